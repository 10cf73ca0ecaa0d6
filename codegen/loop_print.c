/* loop_print.c — the loop IR's text form, what `coil dump --after=lower` prints: buffers,
 * steps, then each kernel as its expression pool and its phases. For reading and FileCheck.
 *
 *   program @Tiny {
 *     buf 0 x: input 0 f32[B*16]
 *     buf 1 c1: const f32[3] = [1, 2, 3]           (at most 8 values, then "...")
 *     buf 2 t2: temp f32[B*32] steps 0..1          (written first, read last)
 *     buf 3 logits: output 0 f32[B*10]
 *
 *     step 0: kernel k0_add
 *     step 1: gemm batch [4] m B n 32 k 16
 *       a: buf0 offset 0 batch_stride [B*16] row_stride 16 col_stride 1
 *       b: buf2 offset 0 batch_stride [0] row_stride 1 col_stride 16
 *       c: buf3 offset 0 batch_stride [B*32] row_stride 32 col_stride 1
 *       epilogue k2_relu load %e3 c_live            (c_live only when set)
 *     (a conv's GEMM adds, after b: "b im2col: cg C/G channel_stride S in [..] k [..]
 *      stride [..] dilation [..] pad [..] out [..] x_stride [..]", three spatial axes)
 *
 *     kernel k0_add (group 0) outer [v0 < B, v1 < 16] inner [v2 < 32] {
 *       %e0 = var v0 : i64
 *       %e1 = load buf0[%e0] : f32
 *       ...
 *       phase 0 {
 *         s0 = reduce max %e1 : f32                 (argmax: "... along v2 : i64")
 *       }
 *       after {
 *         store buf3[%e0] = %e5
 *       }
 *     }
 *   }
 *
 * Expressions print in pool order (operands first) as `%eN = KIND OPERANDS : DTYPE`; kinds
 * are int, float (any dtype's constant), sym, var, load, the op's name for unary and binary
 * ops, idiv, imod, select, cast, rand (`rand %eI seed S offset O`) and acc (`acc sN`, the
 * reduction statement N). Loop variables are v0.. (outer first), statements s0.., buffers
 * buf0... Dims print as the IR does ("B*16"); a symbol the graph does not name (or with no
 * graph) prints as sym<bit>. Values a malformed program holds out of range print with a
 * "?" instead of crashing the printer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/loop.h"

#define CONST_SHOWN 8 /* constant values printed before "..." */

static const char *const lx_name[LX_COUNT] = {
    [LX_INT] = "int",       [LX_FLOAT] = "float",   [LX_SYM] = "sym",   [LX_VAR] = "var",
    [LX_LOAD] = "load",     [LX_IDIV] = "idiv",     [LX_IMOD] = "imod", [LX_SELECT] = "select",
    [LX_CAST] = "cast",     [LX_RAND] = "rand",     [LX_ACC] = "acc",
};

static const char *const buf_kind[] = {
    [BUF_INPUT] = "input", [BUF_PARAM] = "param", [BUF_OUTPUT] = "output",
    [BUF_CONST] = "const", [BUF_TEMP] = "temp",
};

static const char *dt_name(DType dt)
{
    return (unsigned)dt < DT_COUNT ? dtype_info[dt].name : "?dtype";
}

static const char *op_name(int op)
{
    return op >= 0 && op < OP_COUNT ? op_info[op].name : "?op";
}

static void put_sym(FILE *f, const Graph *g, int64_t s)
{
    if (s == COIL_SYM_RNG_STEP)
        fputs("rng_step", f);
    else if (g && s >= 0 && s < g->nsym)
        fputs(g->sym[s], f);
    else
        fprintf(f, "sym%lld", (long long)s);
}

/* As dim_fmt writes it ("B*T", "16", "2*B"), with unnamed symbols as sym<bit>. */
static void put_dim(FILE *f, const Graph *g, Dim d)
{
    bool named = g != NULL;
    for (int s = 0; named && s < COIL_MAX_SYMS; s++)
        named = !(d.syms >> s & 1) || s < g->nsym;
    if (named) {
        char buf[512];
        fputs(dim_fmt(g, d, buf, sizeof buf), f);
        return;
    }
    const char *sep = "";
    if (d.syms == 0 || d.k != 1) {
        fprintf(f, "%lld", (long long)d.k);
        sep = "*";
    }
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        for (int times = (d.syms >> s & 1) + (d.sq >> s & 1); times > 0; times--) {
            fputs(sep, f);
            put_sym(f, g, s);
            sep = "*";
        }
}

/* The shortest %g that reads back as the same double. */
static void put_float(FILE *f, double v)
{
    if (isnan(v) || isinf(v)) {
        fputs(isnan(v) ? "nan" : v < 0 ? "-inf" : "inf", f);
        return;
    }
    char s[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    fputs(s, f);
}

static void put_kernel_ref(FILE *f, const Program *p, int k)
{
    if (k >= 0 && k < p->nkernel && p->kernel[k].name)
        fputs(p->kernel[k].name, f);
    else
        fprintf(f, "?kernel%d", k);
}

/* ---------------------------------------------------------------- program parts */

static void put_buffer(FILE *f, const Program *p, int b)
{
    const Buffer *buf = &p->buf[b];
    bool known = (unsigned)buf->kind <= BUF_TEMP;
    fprintf(f, "  buf %d %s: %s", b, buf->name ? buf->name : "?", known ? buf_kind[buf->kind] : "?kind");
    if (known && buf->kind <= BUF_OUTPUT)
        fprintf(f, " %d", buf->index);
    fprintf(f, " %s[", dt_name(buf->dt));
    put_dim(f, p->graph, buf->numel);
    fputs("]", f);
    if (buf->kind == BUF_TEMP)
        fprintf(f, " steps %d..%d", buf->first, buf->last);
    if (buf->kind == BUF_CONST && buf->data && dim_is_static(buf->numel)) {
        fputs(" = [", f);
        for (int64_t i = 0; i < buf->numel.k && i < CONST_SHOWN; i++) {
            fputs(i ? ", " : "", f);
            put_float(f, buf->data[i]);
        }
        fputs(buf->numel.k > CONST_SHOWN ? ", ...]" : "]", f);
    }
    fputs("\n", f);
}

static void put_operand(FILE *f, const Graph *g, char name, const GemmOperand *o, int nbatch)
{
    fprintf(f, "    %c: buf%d offset ", name, o->buf);
    put_dim(f, g, o->offset);
    fputs(" batch_stride [", f);
    for (int d = 0; d < nbatch; d++) {
        fputs(d ? ", " : "", f);
        put_dim(f, g, o->batch_stride[d]);
    }
    fputs("] row_stride ", f);
    put_dim(f, g, o->row_stride);
    fputs(" col_stride ", f);
    put_dim(f, g, o->col_stride);
    fputs("\n", f);
}

/* "    b im2col: cg 4 channel_stride 81 in [1, 9, 9] k [1, 3, 3] ..." (three axes). */
static void put_conv(FILE *f, const GemmConv *cv)
{
    const struct {
        const char *name;
        const int64_t *v;
    } lists[] = {{"in", cv->in}, {"k", cv->k}, {"stride", cv->stride}, {"dilation", cv->dil},
                 {"pad", cv->pad0}, {"out", cv->out}, {"x_stride", cv->x_stride}};
    fprintf(f, "    b im2col: cg %lld channel_stride %lld", (long long)cv->cg,
            (long long)cv->c_stride);
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        fprintf(f, " %s [%lld, %lld, %lld]", lists[i].name, (long long)lists[i].v[0],
                (long long)lists[i].v[1], (long long)lists[i].v[2]);
    fputs("\n", f);
}

static void put_gemm(FILE *f, const Program *p, const Gemm *gm)
{
    const Graph *g = p->graph;
    int nbatch = gm->nbatch < 0 ? 0 : gm->nbatch > COIL_MAX_RANK ? COIL_MAX_RANK : gm->nbatch;
    fputs("gemm batch [", f);
    for (int d = 0; d < nbatch; d++) {
        fputs(d ? ", " : "", f);
        put_dim(f, g, gm->batch[d]);
    }
    fputs("] m ", f);
    put_dim(f, g, gm->m);
    fputs(" n ", f);
    put_dim(f, g, gm->n);
    fputs(" k ", f);
    put_dim(f, g, gm->k);
    fputs("\n", f);
    put_operand(f, g, 'a', &gm->a, nbatch);
    put_operand(f, g, 'b', &gm->b, nbatch);
    if (gm->conv) /* b is x read through a convolution's windows */
        put_conv(f, gm->conv);
    put_operand(f, g, 'c', &gm->c, nbatch);
    if (gm->epilogue < 0)
        return;
    fputs("    epilogue ", f);
    put_kernel_ref(f, p, gm->epilogue);
    fprintf(f, " load %%e%d%s\n", gm->epi_load, gm->c_live ? " c_live" : "");
}

static void put_attention(FILE *f, const Program *p, const Attention *a)
{
    const Graph *g = p->graph;
    int nbatch = a->nbatch < 0 ? 0 : a->nbatch > COIL_MAX_RANK ? COIL_MAX_RANK : a->nbatch;
    static const char *const kind[] = {"attention", "attention_lse", "attention_grad"};
    fprintf(f, "%s batch [", kind[a->kind]);
    for (int d = 0; d < nbatch; d++) {
        fputs(d ? ", " : "", f);
        put_dim(f, g, a->batch[d]);
    }
    fputs("] queries ", f);
    put_dim(f, g, a->tq);
    fputs(" keys ", f);
    put_dim(f, g, a->tk);
    fprintf(f, " d %lld dv %lld scale ", (long long)a->d, (long long)a->dv);
    put_float(f, a->scale);
    fputs(a->causal ? " causal\n" : "\n", f);
    put_operand(f, g, 'q', &a->q, nbatch);
    put_operand(f, g, 'k', &a->k, nbatch);
    put_operand(f, g, 'v', &a->v, nbatch);
    put_operand(f, g, 'o', &a->o, nbatch);
    if (a->has_bias)
        put_operand(f, g, 'b', &a->bias, nbatch);
    if (a->writes_lse) /* the forward's log-sum-exp */
        put_operand(f, g, 'l', &a->lse, nbatch);
    if (a->kind == ATTN_BACKWARD) {
        put_operand(f, g, 'O', &a->fo, nbatch);
        put_operand(f, g, 'g', &a->dout, nbatch);
        put_operand(f, g, 'l', &a->lse, nbatch);
    }
}

static void put_step(FILE *f, const Program *p, int s)
{
    const Step *st = &p->step[s];
    fprintf(f, "  step %d: ", s);
    if (st->kind == STEP_GEMM) {
        put_gemm(f, p, &st->gemm);
        return;
    }
    if (st->kind == STEP_ATTENTION) {
        put_attention(f, p, &st->attn);
        return;
    }
    fputs("kernel ", f);
    put_kernel_ref(f, p, st->kernel);
    fputs("\n", f);
}

/* ---------------------------------------------------------------- kernels */

static void put_lx(FILE *f, const Graph *g, const Lx *x, int id)
{
    fprintf(f, "    %%e%d = ", id);
    switch (x->kind) {
    case LX_INT: fprintf(f, "int %lld", (long long)x->i); break;
    case LX_FLOAT: fputs("float ", f); put_float(f, x->f); break;
    case LX_SYM: fputs("sym ", f); put_sym(f, g, x->i); break;
    case LX_VAR: fprintf(f, "var v%lld", (long long)x->i); break;
    case LX_LOAD: fprintf(f, "load buf%lld[%%e%d]", (long long)x->i, x->a); break;
    case LX_UNARY: fprintf(f, "%s %%e%d", op_name(x->op), x->a); break;
    case LX_BINARY: fprintf(f, "%s %%e%d, %%e%d", op_name(x->op), x->a, x->b); break;
    case LX_IDIV:
    case LX_IMOD: fprintf(f, "%s %%e%d, %%e%d", lx_name[x->kind], x->a, x->b); break;
    case LX_SELECT: fprintf(f, "select %%e%d, %%e%d, %%e%d", x->a, x->b, x->c); break;
    case LX_CAST: fprintf(f, "cast %%e%d", x->a); break;
    case LX_RAND:
        fprintf(f, "rand %%e%d seed %lld offset %lld step %%e%d", x->a, (long long)x->i,
                (long long)x->j, x->b);
        break;
    case LX_ACC: fprintf(f, "acc s%lld", (long long)x->i); break;
    default: fprintf(f, "?kind%d", (int)x->kind); break;
    }
    fprintf(f, " : %s\n", dt_name(x->dt));
}

static void put_stmt(FILE *f, const Kernel *k, int t)
{
    if (t < 0 || t >= k->nstmt) {
        fprintf(f, "      ?stmt%d\n", t);
        return;
    }
    const LStmt *s = &k->stmt[t];
    if (s->kind == ST_STORE) {
        fprintf(f, "      store buf%d[%%e%d] %s %%e%d\n", s->buf, s->index, s->add ? "+=" : "=",
                s->value);
        return;
    }
    fprintf(f, "      s%d = reduce %s %%e%d", t, op_name(s->op), s->value);
    if (s->op == OP_ARGMAX)
        fprintf(f, " along v%d", s->axis);
    fprintf(f, " : %s\n", dt_name(s->acc_dt));
}

static void put_block(FILE *f, const Kernel *k, const char *title, int n, StmtRange r)
{
    fprintf(f, "    %s", title);
    if (n >= 0)
        fprintf(f, " %d", n);
    fputs(" {\n", f);
    for (int i = 0; i < r.count; i++)
        put_stmt(f, k, r.first + i);
    fputs("    }\n", f);
}

static void put_loops(FILE *f, const Graph *g, const Kernel *k, const char *title, int from, int to)
{
    fprintf(f, " %s [", title);
    for (int d = from; d < to; d++) {
        fprintf(f, "%sv%d < ", d > from ? ", " : "", d);
        put_dim(f, g, k->size[d]);
    }
    fputs("]", f);
}

static void put_kernel(FILE *f, const Program *p, int kid)
{
    const Kernel *k = &p->kernel[kid];
    int nouter = k->nouter < 0 ? 0 : k->nouter > LOOP_MAX_DIMS ? LOOP_MAX_DIMS : k->nouter;
    int nvar = k->ninner < 0 ? nouter : nouter + k->ninner;
    nvar = nvar > LOOP_MAX_DIMS ? LOOP_MAX_DIMS : nvar;
    fprintf(f, "\n  kernel %s (group %d)", k->name ? k->name : "?", k->group);
    put_loops(f, p->graph, k, "outer", 0, nouter);
    put_loops(f, p->graph, k, "inner", nouter, nvar);
    fputs(" {\n", f);
    for (int id = 0; id < k->nlx; id++)
        put_lx(f, p->graph, &k->lx[id], id);
    int nphase = k->nphase > LOOP_MAX_PHASES ? LOOP_MAX_PHASES : k->nphase;
    for (int ph = 0; ph < nphase; ph++)
        put_block(f, k, "phase", ph, k->phase[ph]);
    put_block(f, k, "after", -1, k->after);
    fputs("  }\n", f);
}

char *loop_print_step(const Program *p, int s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    put_step(f, p, s);
    const Step *st = &p->step[s];
    int k = st->kind == STEP_KERNEL ? st->kernel : st->kind == STEP_GEMM ? st->gemm.epilogue : -1;
    if (k >= 0 && k < p->nkernel)
        put_kernel(f, p, k);
    fclose(f);
    return text;
}

char *loop_print(const Program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs("program", f);
    if (p->graph && p->graph->name)
        fprintf(f, " @%s", p->graph->name);
    fputs(" {\n", f);
    for (int b = 0; b < p->nbuf; b++)
        put_buffer(f, p, b);
    if (p->nstep > 0)
        fputs("\n", f);
    for (int s = 0; s < p->nstep; s++)
        put_step(f, p, s);
    for (int k = 0; k < p->nkernel; k++)
        put_kernel(f, p, k);
    fputs("}\n", f);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        free(text);
        return NULL;
    }
    return text;
}
