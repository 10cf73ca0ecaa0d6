/* emit.c — a Program's loop kernels as CUDA C++: a pointwise kernel is a grid-stride loop,
 * one thread per outer point (consecutive threads on consecutive innermost points, so loads
 * and stores coalesce); a kernel with an inner space gives each outer point (a row) to a
 * block, its threads striding over the inner space, each phase's accumulators combined by
 * warp shuffles and shared memory before the next phase reads them. Expressions become
 * locals in the scope that needs them; arithmetic follows loop.h (the prelude's helpers
 * where C++ differs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda/cuda.h"
#include "codegen/cuda/device_helpers.h"

typedef struct Emit {
    Text t;
    const char *prefix; /* before every kernel's name */
    CudaKernelConfig cfg; /* the kernel being written: its threads and items */
    const char *suffix; /* after its name (a variant's) */
    const Program *p;
    const Kernel *k;
    bool *need;  /* per expression: used by the scope being written */
    Err *e;
} Emit;

#define put(em, ...) text_put(&(em)->t, __VA_ARGS__)

/* ---------------------------------------------------------------- types */

static const char *const reg_type[DT_COUNT] = {
    [DT_F32] = "float", [DT_F16] = "float", [DT_BF16] = "float", [DT_I8] = "signed char",
    [DT_I32] = "int",   [DT_I64] = "long long", [DT_BOOL] = "bool"};
static const char *const mem_type[DT_COUNT] = {
    [DT_F32] = "float", [DT_F16] = "coil_h16", [DT_BF16] = "coil_h16", [DT_I8] = "signed char",
    [DT_I32] = "int",   [DT_I64] = "long long", [DT_BOOL] = "unsigned char"};

static bool is_float(DType dt) { return dtype_info[dt].is_float; }

CudaShape cuda_shape(const Kernel *k) { return k->ninner > 0 ? CUDA_ROWS : CUDA_POINTWISE; }

void cuda_put_dim(Text *t, Dim d)
{
    text_put(t, "(%lldLL", (long long)d.k);
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        for (int n = (d.syms >> s & 1) + (d.sq >> s & 1); n > 0; n--)
            text_put(t, " * coil_syms[%d]", s);
    text_put(t, ")");
}

static void put_dim(Emit *em, Dim d) { cuda_put_dim(&em->t, d); }

/* ---------------------------------------------------------------- expressions */

static void put_float(Emit *em, double v, DType dt)
{
    if (isnan(v))
        put(em, "COIL_NAN");
    else if (isinf(v))
        put(em, "%sCOIL_INF", v < 0 ? "-" : "");
    else if (is_float(dt)) /* hexadecimal: exact, whatever the value */
        put(em, "%af", v);
    else if (dt == DT_BOOL)
        put(em, v != 0 ? "true" : "false");
    else if (v == -9223372036854775808.0)
        put(em, "(-9223372036854775807LL - 1)");
    else
        put(em, "(%s)%lldLL", reg_type[dt], (long long)v);
}

typedef struct Op {
    const char *f32;  /* float form: a function applied to the operand(s), or an operator */
    const char *infix;/* binary operator written between the operands, or NULL */
} Op;

static const Op ops[OP_COUNT] = {
    [OP_NEG] = {"-", NULL},          [OP_ABS] = {"fabsf", NULL},
    [OP_EXP] = {"expf", NULL},       [OP_LOG] = {"logf", NULL},
    [OP_SQRT] = {"sqrtf", NULL},     [OP_RSQRT] = {"1.0f / sqrtf", NULL},
    [OP_RECIPROCAL] = {"1.0f / ", NULL}, [OP_TANH] = {"tanhf", NULL},
    [OP_SIGMOID] = {"coil_sigmoid", NULL}, [OP_RELU] = {"coil_relu", NULL},
    [OP_GELU] = {"coil_gelu", NULL}, [OP_GELU_TANH] = {"coil_gelu_tanh", NULL},
    [OP_SILU] = {"coil_silu", NULL}, [OP_SIN] = {"sinf", NULL},
    [OP_COS] = {"cosf", NULL},       [OP_ERF] = {"erff", NULL},
    [OP_ADD] = {NULL, "+"},          [OP_SUB] = {NULL, "-"},
    [OP_MUL] = {NULL, "*"},          [OP_DIV] = {NULL, "/"},
    [OP_POW] = {"powf", NULL},       [OP_MAXIMUM] = {"coil_maximum", NULL},
    [OP_MINIMUM] = {"coil_minimum", NULL},
    [OP_EQ] = {NULL, "=="},          [OP_NE] = {NULL, "!="},
    [OP_LT] = {NULL, "<"},           [OP_LE] = {NULL, "<="},
    [OP_GT] = {NULL, ">"},           [OP_GE] = {NULL, ">="},
};

/* A float result of dtype dt, rounded to it when it is narrower than f32. */
static void open_round(Emit *em, DType dt)
{
    if (dt == DT_F16)
        put(em, "coil_round_f16(");
    else if (dt == DT_BF16)
        put(em, "coil_round_bf16(");
    else
        put(em, "(");
}

/* The unsigned type integer arithmetic wraps in. */
static const char *wrap_type(DType dt) { return dt == DT_I64 ? "coil_u64" : "unsigned"; }

static void emit_unary(Emit *em, const Lx *x)
{
    if (is_float(x->dt)) {
        open_round(em, x->dt);
        put(em, "%s(e%d))", ops[x->op].f32, x->a);
    } else if (x->op == OP_NEG) {
        put(em, "(%s)(0u - (%s)e%d)", reg_type[x->dt], wrap_type(x->dt), x->a);
    } else if (x->op == OP_ABS) {
        put(em, "(%s)(e%d < 0 ? 0u - (%s)e%d : (%s)e%d)", reg_type[x->dt], x->a, wrap_type(x->dt),
            x->a, wrap_type(x->dt), x->a);
    } else { /* relu; the float functions take only floats (the op table says so) */
        put(em, "(e%d > 0 ? e%d : (%s)0)", x->a, x->a, reg_type[x->dt]);
    }
}

/* Integer add, sub, mul wrap; div and pow go through double as dtype_round does. */
static void emit_int_binary(Emit *em, const Lx *x)
{
    const char *t = reg_type[x->dt], *w = wrap_type(x->dt);
    if (x->op == OP_ADD || x->op == OP_SUB || x->op == OP_MUL)
        put(em, "(%s)((%s)e%d %s (%s)e%d)", t, w, x->a, ops[x->op].infix, w, x->b);
    else if (x->op == OP_DIV)
        put(em, "(%s)coil_to_int((double)e%d / (double)e%d)", t, x->a, x->b);
    else if (x->op == OP_POW)
        put(em, "(%s)coil_to_int(pow((double)e%d, (double)e%d))", t, x->a, x->b);
    else
        put(em, "(e%d %s e%d ? e%d : e%d)", x->a, x->op == OP_MAXIMUM ? ">" : "<", x->b, x->a,
            x->b);
}

static void emit_binary(Emit *em, const Lx *x)
{
    const Op *op = &ops[x->op];
    DType in = em->k->lx[x->a].dt;
    if (x->dt == DT_BOOL && in != DT_BOOL) /* a comparison */
        put(em, "(e%d %s e%d)", x->a, op->infix, x->b);
    else if (x->dt == DT_BOOL) /* arithmetic of bools: as numbers, then != 0 */
        put(em, "((double)e%d %s (double)e%d != 0.0)", x->a, op->infix ? op->infix : "+", x->b);
    else if (!is_float(x->dt))
        emit_int_binary(em, x);
    else {
        open_round(em, x->dt);
        if (op->infix)
            put(em, "e%d %s e%d)", x->a, op->infix, x->b);
        else
            put(em, "%s(e%d, e%d))", op->f32, x->a, x->b);
    }
}

/* dtype_round from one register type to another. */
static void emit_cast(Emit *em, DType to, DType from, int a)
{
    if (to == DT_BOOL)
        put(em, "(e%d != 0)", a);
    else if (from == DT_BOOL)
        put(em, "(%s)(e%d ? 1 : 0)", reg_type[to], a);
    else if (is_float(to)) {
        open_round(em, to);
        put(em, "(float)e%d)", a);
    } else if (is_float(from))
        put(em, "(%s)coil_to_int((double)e%d)", reg_type[to], a);
    else
        put(em, "(%s)e%d", reg_type[to], a);
}

static void emit_load(Emit *em, const Lx *x)
{
    DType dt = em->p->buf[x->i].dt;
    if (dt == DT_F16)
        put(em, "coil_f16_to_f32(b%lld[e%d])", (long long)x->i, x->a);
    else if (dt == DT_BF16)
        put(em, "coil_bf16_to_f32(b%lld[e%d])", (long long)x->i, x->a);
    else if (dt == DT_BOOL)
        put(em, "(b%lld[e%d] != 0)", (long long)x->i, x->a);
    else
        put(em, "b%lld[e%d]", (long long)x->i, x->a);
}

/* An accumulator as its statement's dtype would read it. */
static void emit_acc(Emit *em, const Lx *x)
{
    const LStmt *s = &em->k->stmt[x->i];
    if (s->op == OP_ARGMAX)
        put(em, "(long long)s%lld.i", (long long)x->i);
    else
        put(em, "(%s)s%lld", reg_type[x->dt], (long long)x->i);
}

static void emit_value(Emit *em, int id)
{
    const Lx *x = &em->k->lx[id];
    switch (x->kind) {
    case LX_INT: put_float(em, (double)x->i, DT_I64); break;
    case LX_FLOAT: put_float(em, x->f, x->dt); break;
    case LX_SYM: put(em, "coil_syms[%lld]", (long long)x->i); break;
    case LX_VAR: put(em, "v%lld", (long long)x->i); break;
    case LX_LOAD: emit_load(em, x); break;
    case LX_UNARY: emit_unary(em, x); break;
    case LX_BINARY: emit_binary(em, x); break;
    case LX_IDIV: put(em, "(e%d / e%d)", x->a, x->b); break;
    case LX_IMOD: put(em, "(e%d %% e%d)", x->a, x->b); break;
    case LX_SELECT: put(em, "(e%d ? e%d : e%d)", x->a, x->b, x->c); break;
    case LX_CAST: emit_cast(em, x->dt, em->k->lx[x->a].dt, x->a); break;
    case LX_RAND:
        put(em, "coil_rand(%lluULL, %lluULL, e%d, (coil_u64)e%d)", (unsigned long long)x->i,
            (unsigned long long)x->j, x->a, x->b);
        break;
    case LX_ACC: emit_acc(em, x); break;
    default: put(em, "0"); break;
    }
}

/* Mark what statements [first, first + n) use, then write those expressions in order. */
static void emit_needed(Emit *em, StmtRange r)
{
    const Kernel *k = em->k;
    memset(em->need, 0, (size_t)k->nlx * sizeof *em->need);
    for (int s = r.first; s < r.first + r.count; s++) {
        em->need[k->stmt[s].value] = true;
        if (k->stmt[s].kind == ST_STORE)
            em->need[k->stmt[s].index] = true;
    }
    for (int id = k->nlx - 1; id >= 0; id--) {
        const Lx *x = &k->lx[id];
        if (!em->need[id])
            continue;
        if (x->a >= 0)
            em->need[x->a] = true;
        if (x->b >= 0)
            em->need[x->b] = true;
        if (x->c >= 0)
            em->need[x->c] = true;
    }
    for (int id = 0; id < k->nlx; id++) {
        if (!em->need[id])
            continue;
        put(em, "      const %s e%d = ", reg_type[k->lx[id].dt], id);
        emit_value(em, id);
        put(em, ";\n");
    }
}

/* ---------------------------------------------------------------- statements */

/* An accumulator: float for float reductions, long long for integer ones, a (value,
 * index) pair for argmax; its starting value. */
static const char *acc_type(const LStmt *s)
{
    if (s->op == OP_ARGMAX)
        return "CoilArg";
    return is_float(s->acc_dt) ? "float" : "long long";
}

static void put_acc_init(Emit *em, int i, const LStmt *s)
{
    bool f = is_float(s->acc_dt);
    const char *init = s->op == OP_ARGMAX ? "{-COIL_INF, -1}"
                     : s->op == OP_SUM    ? (f ? "0.0f" : "0LL")
                     : s->op == OP_MAX    ? (f ? "-COIL_INF" : "(-9223372036854775807LL - 1)")
                                          : (f ? "COIL_INF" : "9223372036854775807LL");
    put(em, "    %s s%d = %s;\n", acc_type(s), i, init);
}

/* A store with add: atomic (device_helpers.c), the value in its register type; never
 * of f16 or bf16 (loop.h). */
static void put_add(Emit *em, const LStmt *s)
{
    static const char *const add[DT_COUNT] = {
        [DT_F32] = "coil_add_f32", [DT_I32] = "coil_add_i32", [DT_I64] = "coil_add_i64"};
    DType dt = em->p->buf[s->buf].dt;
    if (add[dt])
        put(em, "      %s(&b%d[e%d], e%d);\n", add[dt], s->buf, s->index, s->value);
    else
        put(em, "      coil_add_byte(&b%d[e%d], %s, (int)e%d);\n", s->buf, s->index,
            dt == DT_BOOL ? "true" : "false", s->value);
}

static void emit_stmt(Emit *em, int i)
{
    const LStmt *s = &em->k->stmt[i];
    if (s->kind == ST_STORE && s->add) {
        put_add(em, s);
        return;
    }
    if (s->kind == ST_STORE) {
        DType dt = em->p->buf[s->buf].dt;
        put(em, "      b%d[e%d] = (%s)%s(e%d);\n", s->buf, s->index, mem_type[dt],
            cuda_store_fn(dt), s->value);
        return;
    }
    const char *t = acc_type(s);
    if (s->op == OP_SUM)
        put(em, "      s%d += (%s)e%d;\n", i, t, s->value);
    else if (s->op == OP_ARGMAX)
        put(em, "      s%d = coil_argmax2(s%d, CoilArg{(double)e%d, v%d});\n", i, i, s->value,
            s->axis);
    else
        put(em, "      s%d = Coil%s()(s%d, (%s)e%d);\n", i, s->op == OP_MAX ? "Max" : "Min", i, t,
            s->value);
}

static void emit_stmts(Emit *em, StmtRange r)
{
    emit_needed(em, r);
    for (int s = r.first; s < r.first + r.count; s++)
        emit_stmt(em, s);
}

/* ---------------------------------------------------------------- kernels */

/* Loop variables [first, first + n) from a flat index: the last varies fastest. */
static void split_index(Emit *em, const char *flat, int first, int n)
{
    put(em, "    long long coil_rest = %s;\n", flat);
    for (int v = first + n - 1; v >= first; v--) {
        if (v > first)
            put(em, "    const long long v%d = coil_rest %% n%d; coil_rest /= n%d;\n", v, v, v);
        else
            put(em, "    const long long v%d = coil_rest;\n", v);
    }
    put(em, "    (void)coil_rest;\n");
}

static void emit_header(Emit *em)
{
    const Kernel *k = em->k;
    put(em, "extern \"C\" __global__ void __launch_bounds__(%d) %s%s%s(void *const *__restrict__ "
        "coil_bufs, const long long *__restrict__ coil_syms)\n{\n", em->cfg.threads, em->prefix,
        k->name, em->suffix);
    bool *used = calloc((size_t)em->p->nbuf + 1, sizeof *used);
    for (int id = 0; used && id < k->nlx; id++)
        if (k->lx[id].kind == LX_LOAD)
            used[k->lx[id].i] = true;
    for (int s = 0; used && s < k->nstmt; s++)
        if (k->stmt[s].kind == ST_STORE)
            used[k->stmt[s].buf] = true;
    for (int b = 0; used && b < em->p->nbuf; b++)
        if (used[b])
            put(em, "  %s *b%d = (%s *)coil_bufs[%d];\n", mem_type[em->p->buf[b].dt], b,
                mem_type[em->p->buf[b].dt], b);
    if (!used)
        em->t.oom = true;
    free(used);
    for (int d = 0; d < k->nouter + k->ninner; d++) {
        put(em, "  const long long n%d = ", d);
        put_dim(em, k->size[d]);
        put(em, ";\n");
    }
}

/* Product of sizes [first, first + n) as C ("1LL" for none). */
static void put_product(Emit *em, int first, int n)
{
    put(em, "1LL");
    for (int d = first; d < first + n; d++)
        put(em, " * n%d", d);
}

/* One outer point per thread and pass of a grid-stride loop; with items > 1 a thread takes
 * that many per pass, a block's threads on consecutive points for each (coalesced). */
static void emit_pointwise(Emit *em)
{
    const Kernel *k = em->k;
    put(em, "  const long long coil_total = ");
    put_product(em, 0, k->nouter);
    if (em->cfg.items <= 1) {
        put(em, ";\n  for (long long coil_i = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
            "coil_i < coil_total; coil_i += (long long)gridDim.x * blockDim.x) {\n");
        split_index(em, "coil_i", 0, k->nouter);
        emit_stmts(em, k->after);
        put(em, "  }\n");
        return;
    }
    put(em, ";\n  for (long long coil_b = (long long)blockIdx.x * blockDim.x * %d + threadIdx.x; "
        "coil_b < coil_total; coil_b += (long long)gridDim.x * blockDim.x * %d) {\n"
        "#pragma unroll\n"
        "  for (int coil_u = 0; coil_u < %d; coil_u++) {\n"
        "    const long long coil_i = coil_b + (long long)coil_u * blockDim.x;\n"
        "    if (coil_i >= coil_total) break;\n", em->cfg.items, em->cfg.items, em->cfg.items);
    split_index(em, "coil_i", 0, k->nouter);
    emit_stmts(em, k->after);
    put(em, "  }\n  }\n");
}

/* Each phase: the block strides over the inner space, then combines its accumulators. */
static void emit_phase(Emit *em, int p)
{
    const Kernel *k = em->k;
    StmtRange r = k->phase[p];
    for (int s = r.first; s < r.first + r.count; s++)
        if (k->stmt[s].kind == ST_REDUCE)
            put_acc_init(em, s, &k->stmt[s]);
    put(em, "    for (long long coil_r = threadIdx.x; coil_r < coil_inner; coil_r += blockDim.x) {\n");
    split_index(em, "coil_r", k->nouter, k->ninner);
    emit_stmts(em, r);
    put(em, "    }\n");
    for (int s = r.first; s < r.first + r.count; s++) {
        const LStmt *st = &k->stmt[s];
        if (st->kind != ST_REDUCE)
            continue;
        if (st->op == OP_ARGMAX)
            put(em, "    s%d = coil_block_argmax(s%d, coil_sma);\n", s, s);
        else
            put(em, "    s%d = coil_block_reduce(s%d, Coil%s(), %s);\n", s, s,
                st->op == OP_SUM ? "Sum" : st->op == OP_MAX ? "Max" : "Min",
                is_float(st->acc_dt) ? "coil_smf" : "coil_sml");
    }
}

static void emit_rows(Emit *em)
{
    const Kernel *k = em->k;
    bool uses[3] = {false, false, false}; /* float, integer and argmax reductions */
    for (int s = 0; s < k->nstmt; s++)
        if (k->stmt[s].kind == ST_REDUCE)
            uses[k->stmt[s].op == OP_ARGMAX ? 2 : is_float(k->stmt[s].acc_dt) ? 0 : 1] = true;
    static const char *const smem[3] = {"float coil_smf", "long long coil_sml", "CoilArg coil_sma"};
    for (int i = 0; i < 3; i++)
        if (uses[i])
            put(em, "  __shared__ %s[32];\n", smem[i]);
    put(em, "  const long long coil_rows = ");
    put_product(em, 0, k->nouter);
    put(em, ", coil_inner = ");
    put_product(em, k->nouter, k->ninner);
    put(em, ";\n  for (long long coil_row = blockIdx.x; coil_row < coil_rows; "
        "coil_row += gridDim.x) {\n");
    split_index(em, "coil_row", 0, k->nouter);
    for (int p = 0; p < k->nphase; p++)
        emit_phase(em, p);
    if (k->after.count) {
        put(em, "    if (threadIdx.x == 0) {\n");
        emit_stmts(em, k->after);
        put(em, "    }\n");
    }
    put(em, "    __syncthreads();\n  }\n");
}

static void emit_kernel(Emit *em, int k, CudaKernelConfig cfg, const char *suffix)
{
    em->k = &em->p->kernel[k];
    em->cfg = cfg, em->suffix = suffix;
    emit_header(em);
    if (cuda_shape(em->k) == CUDA_ROWS)
        emit_rows(em);
    else
        emit_pointwise(em);
    put(em, "}\n\n");
}

/* ---------------------------------------------------------------- attention */

static void put_operand_offset(Text *t, const char *name, const GemmOperand *o, int nbatch)
{
    text_put(t, "  long long %s = ", name);
    cuda_put_dim(t, o->offset);
    for (int d = 0; d < nbatch; d++) {
        text_put(t, " + coil_b%d * ", d);
        cuda_put_dim(t, o->batch_stride[d]);
    }
    text_put(t, ";\n");
}

/* The operands an attention step's kernels read and write, by name. */
static int attention_operands(const Attention *a, const GemmOperand **op, const char **names)
{
    const GemmOperand *all[8] = {&a->q, &a->k, &a->v, &a->o, &a->bias, &a->fo, &a->dout, &a->lse};
    static const char *const all_names[8] = {"q", "k", "v", "o", "b", "fo", "dout", "lse"};
    int n = 0;
    for (int i = 0; i < 8; i++) {
        bool used = i < 4 || (i == 4   ? a->has_bias
                              : i == 7 ? a->kind == ATTN_BACKWARD || a->writes_lse
                                       : a->kind == ATTN_BACKWARD);
        if (used)
            op[n] = all[i], names[n++] = all_names[i];
    }
    return n;
}

void cuda_put_attention_head(Text *t, const Program *p, int s, const char *prefix,
                             const char *suffix, int threads)
{
    const Attention *a = &p->step[s].attn;
    const GemmOperand *op[8];
    const char *names[8];
    int nop = attention_operands(a, op, names);
    text_put(t, "extern \"C\" __global__ void __launch_bounds__(%d) %scoil_attention_%d%s(void "
             "*const *__restrict__ coil_bufs, const long long *__restrict__ coil_syms)\n{\n",
             threads, prefix, s, suffix);
    for (int i = 0; i < nop; i++) {
        DType dt = p->buf[op[i]->buf].dt;
        text_put(t, "  %s *%s = (%s *)coil_bufs[%d];\n", mem_type[dt], names[i], mem_type[dt],
                 op[i]->buf);
    }
    text_put(t, "  const long long tq = ");
    cuda_put_dim(t, a->tq);
    text_put(t, ", tk = ");
    cuda_put_dim(t, a->tk);
    if (a->kind == ATTN_BACKWARD) { /* dK and dV follow dQ in o */
        text_put(t, ", part = ");
        cuda_put_dim(t, a->part);
    }
    text_put(t, ";\n  long long coil_rest = blockIdx.x;\n");
    for (int d = a->nbatch - 1; d >= 0; d--) {
        text_put(t, "  const long long coil_n%d = ", d);
        cuda_put_dim(t, a->batch[d]);
        text_put(t, ", coil_b%d = coil_rest %% coil_n%d; coil_rest /= coil_n%d;\n", d, d, d);
    }
    text_put(t, "  (void)coil_rest;\n");
    for (int i = 0; i < nop; i++) {
        char off[16];
        snprintf(off, sizeof off, "off_%s", names[i]);
        put_operand_offset(t, off, op[i], a->nbatch);
        text_put(t, "  const long long rs_%s = ", names[i]);
        cuda_put_dim(t, op[i]->row_stride);
        text_put(t, ", cs_%s = ", names[i]);
        cuda_put_dim(t, op[i]->col_stride);
        text_put(t, ";\n");
    }
}

const char *cuda_mem_type(DType dt) { return mem_type[dt]; }

const char *cuda_load_fn(DType dt)
{
    return dt == DT_F16 ? "coil_f16_to_f32" : dt == DT_BF16 ? "coil_bf16_to_f32" : "(float)";
}

const char *cuda_store_fn(DType dt)
{
    return dt == DT_F16 ? "coil_f32_to_f16" : dt == DT_BF16 ? "coil_f32_to_bf16" : "";
}

void cuda_put_attention_bias(Text *t, const Program *p, const Attention *a, const char *row,
                             const char *col)
{
    if (a->has_bias)
        text_put(t, "%s(b[off_b + (%s) * rs_b + (%s) * cs_b])", cuda_load_fn(p->buf[a->bias.buf].dt),
                 row, col);
    else
        text_put(t, "0.0f");
}

/* Attention as one kernel, FlashAttention's way on CUDA cores: a thread per query (its row
 * of Q scaled, in registers), the keys and values in tiles of CUDA_ATTN_TILE through
 * shared memory, an online softmax (running max and sum, rescaled once per tile), so the
 * T x T scores never reach memory. Causal: a block stops at its last query's key. The
 * tensor-core kernel is attention_mma.c's. */
static void emit_attention(Emit *em, int s)
{
    const Attention *a = &em->p->step[s].attn;
    cuda_put_attention_head(&em->t, em->p, s, em->prefix, "", CUDA_ATTN_QUERIES);
    DType qt = em->p->buf[a->q.buf].dt, kt = em->p->buf[a->k.buf].dt, vt = em->p->buf[a->v.buf].dt,
          ot = em->p->buf[a->o.buf].dt;
    put(em,
        "  enum { D = %lld, DV = %lld, BC = %d, BR = %d };\n"
        "  __shared__ float ks[BC][D], vs[BC][DV];\n"
        "  const long long i = (long long)blockIdx.y * BR + threadIdx.x;\n"
        "  const bool active = i < tq;\n"
        "  float qv[D], acc[DV], m = -COIL_INF, l = 0.0f;\n"
        "  for (int c = 0; c < D; c++)\n"
        "    qv[c] = active ? %s(q[off_q + i * rs_q + c * cs_q]) * %af : 0.0f;\n"
        "  for (int c = 0; c < DV; c++) acc[c] = 0.0f;\n"
        "  long long kend = tk;\n",
        (long long)a->d, (long long)a->dv, CUDA_ATTN_TILE, CUDA_ATTN_QUERIES, cuda_load_fn(qt),
        a->scale);
    if (a->causal)
        put(em, "  { long long last = (long long)(blockIdx.y + 1) * BR; kend = last < tk ? last : tk; }\n");
    put(em,
        "  for (long long j0 = 0; j0 < kend; j0 += BC) {\n"
        "    for (int t = threadIdx.x; t < BC * D; t += BR) {\n"
        "      long long j = j0 + t / D; int c = t %% D;\n"
        "      ks[t / D][c] = j < tk ? %s(k[off_k + j * rs_k + c * cs_k]) : 0.0f;\n"
        "    }\n"
        "    for (int t = threadIdx.x; t < BC * DV; t += BR) {\n"
        "      long long j = j0 + t / DV; int c = t %% DV;\n"
        "      vs[t / DV][c] = j < tk ? %s(v[off_v + j * rs_v + c * cs_v]) : 0.0f;\n"
        "    }\n"
        "    __syncthreads();\n"
        "    if (active) {\n"
        "      float sc[BC], most = -COIL_INF;\n"
        "      for (int jj = 0; jj < BC; jj++) {\n"
        "        long long j = j0 + jj;\n"
        "        float dot = 0.0f;\n"
        "        for (int c = 0; c < D; c++) dot += qv[c] * ks[jj][c];\n"
        "        sc[jj] = j < tk && !(%d && j > i) ? dot + ",
        cuda_load_fn(kt), cuda_load_fn(vt), a->causal ? 1 : 0);
    cuda_put_attention_bias(&em->t, em->p, a, "i", "j");
    put(em,
        " : -COIL_INF;\n"
        "        most = fmaxf(most, sc[jj]);\n"
        "      }\n"
        "      float mnew = fmaxf(m, most);\n"
        "      if (mnew != -COIL_INF) {\n"
        "        float corr = expf(m - mnew);\n"
        "        l *= corr;\n"
        "        for (int c = 0; c < DV; c++) acc[c] *= corr;\n"
        "        for (int jj = 0; jj < BC; jj++) {\n"
        "          float pj = expf(sc[jj] - mnew);\n"
        "          l += pj;\n"
        "          for (int c = 0; c < DV; c++) acc[c] += pj * vs[jj][c];\n"
        "        }\n"
        "        m = mnew;\n"
        "      }\n"
        "    }\n"
        "    __syncthreads();\n"
        "  }\n"
        "  if (active)\n"
        "    for (int c = 0; c < DV; c++)\n"
        "      o[off_o + i * rs_o + c * cs_o] = (%s)%s(acc[c] / l);\n",
        mem_type[ot], cuda_store_fn(ot));
    if (a->writes_lse) /* the scores are scaled already; no visible key: -inf */
        put(em, "  if (active) lse[off_lse + i * rs_lse] = l != 0.0f ? m + logf(l) : -COIL_INF;\n");
    put(em, "}\n\n");
}

char *cuda_source(const Program *p, Err *e) { return cuda_source_part(p, "", true, e); }

static Emit emit_begin(const Program *p, const char *prefix, bool prelude, Err *e)
{
    int most = 1;
    for (int k = 0; k < p->nkernel; k++)
        most = p->kernel[k].nlx > most ? p->kernel[k].nlx : most;
    Emit em = {.prefix = prefix, .p = p, .e = e, .need = malloc((size_t)most * sizeof(bool))};
    put(&em, "// generated by coil from @%s: %d kernels\n", p->graph ? p->graph->name : "?",
        p->nkernel);
    if (prelude)
        put(&em, "%s", cuda_prelude);
    return em;
}

static char *emit_end(Emit *em, Err *e)
{
    free(em->need);
    char *src = em->need ? text_take(&em->t) : (free(text_take(&em->t)), NULL);
    if (!src)
        err_set(e, ERR_MEMORY, "cuda: out of memory writing the kernels' source");
    return src;
}

char *cuda_source_part(const Program *p, const char *prefix, bool prelude, Err *e)
{
    Emit em = emit_begin(p, prefix, prelude, e);
    for (int k = 0; em.need && k < p->nkernel; k++)
        emit_kernel(&em, k, (CudaKernelConfig){CUDA_BLOCK, 1, 0}, "");
    for (int s = 0; em.need && s < p->nstep; s++)
        if (p->step[s].kind == STEP_ATTENTION) {
            if (p->step[s].attn.kind == ATTN_FORWARD)
                emit_attention(&em, s);
            else
                cuda_put_attention_train(&em.t, p, s, prefix);
            if (cuda_attention_mma_fits(p, &p->step[s].attn))
                cuda_put_attention_mma(&em.t, p, s, prefix);
        }
    return emit_end(&em, e);
}

bool cuda_variant_is_default(const CudaKernelConfig *c)
{
    return (c->threads == 0 || c->threads == CUDA_BLOCK) && c->items <= 1;
}

void cuda_variant_name(const Kernel *k, const CudaKernelConfig *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s__t%d_i%d", k->name, c->threads ? c->threads : CUDA_BLOCK,
             c->items > 1 ? c->items : 1);
}

char *cuda_variants_source(const Program *p, int k, Err *e)
{
    return cuda_variants_part(p, k, "", true, e);
}

char *cuda_variants_part(const Program *p, int k, const char *prefix, bool prelude, Err *e)
{
    static const int threads[] = CUDA_VARIANT_THREADS, items[] = CUDA_VARIANT_ITEMS;
    int nitems = cuda_shape(&p->kernel[k]) == CUDA_POINTWISE ? (int)(sizeof items / sizeof *items) : 1;
    Emit em = emit_begin(p, prefix, prelude, e);
    for (size_t t = 0; em.need && t < sizeof threads / sizeof *threads; t++)
        for (int i = 0; em.need && i < nitems; i++) {
            CudaKernelConfig c = {threads[t], items[i], 0};
            if (cuda_variant_is_default(&c))
                continue;
            char name[128];
            cuda_variant_name(&p->kernel[k], &c, name, sizeof name);
            emit_kernel(&em, k, c, name + strlen(p->kernel[k].name));
        }
    return emit_end(&em, e);
}
