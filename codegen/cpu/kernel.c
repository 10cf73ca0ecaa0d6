/* kernel.c — a loop kernel as an LLVM function (KernelFn): outer loops, each phase's inner
 * loop nest with its accumulators as phis, then the stores after; every expression is
 * emitted once, at the outermost place its operands allow.
 *
 * Where an expression goes is its slot: 0 is the function's entry, d in 1..nouter the body
 * of outer loop d-1 (before the phases, at d == nouter), nouter+1+p the point right after
 * phase p's loops; LLVM's LICM then has little left to do. Two kinds are a section's own
 * (a phase's, or `after`'s) and emitted afresh in each section that uses them: those of
 * inner variables, inside the walk, and those reading a buffer the kernel stores into,
 * right before the first statement needing them (the outer-only ones of a phase before
 * its walk), so a statement sees the stores of the statements before it, as in
 * codegen/loop_eval.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h> /* temporary metadata nodes: a loop ID refers to itself */

#include "codegen/cpu/gen.h"

/* ---------------------------------------------------------------- loops */

typedef struct Loop {
    LLVMBasicBlockRef pre, head, body, exit;
    LLVMValueRef iv;
    LLVMValueRef *phi; /* n loop-carried values: the current ones in the body, the final
                          ones after the loop */
    int n;
} Loop;

/* for (iv = lo; iv < hi; iv++), carrying n values that start at init; leaves the builder
 * in the body. */
static void loop_open(Fn *f, Loop *l, LLVMValueRef lo, LLVMValueRef hi, int n,
                      const LLVMValueRef *init)
{
    Gen *g = f->g;
    l->pre = LLVMGetInsertBlock(g->b);
    l->head = LLVMAppendBasicBlockInContext(g->ctx, f->fn, "loop");
    l->body = LLVMAppendBasicBlockInContext(g->ctx, f->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(g->ctx, f->fn, "done");
    LLVMBuildBr(g->b, l->head);
    LLVMPositionBuilderAtEnd(g->b, l->head);
    l->iv = LLVMBuildPhi(g->b, g->i64, "i");
    LLVMAddIncoming(l->iv, &lo, &l->pre, 1);
    l->n = n;
    l->phi = n ? malloc((size_t)n * sizeof *l->phi) : NULL;
    for (int i = 0; i < n; i++) {
        l->phi[i] = LLVMBuildPhi(g->b, LLVMTypeOf(init[i]), "acc");
        LLVMAddIncoming(l->phi[i], (LLVMValueRef *)&init[i], &l->pre, 1);
    }
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, l->iv, hi, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(g->b, l->body);
}

/* The latch: next[i] (the carried values at the end of the body) flow back; the builder
 * moves after the loop, where l->phi holds the final values. Returns the latch's branch. */
static LLVMValueRef loop_close(Fn *f, Loop *l, const LLVMValueRef *next)
{
    Gen *g = f->g;
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef inc = LLVMBuildNSWAdd(g->b, l->iv, LLVMConstInt(g->i64, 1, 0), "");
    LLVMValueRef br = LLVMBuildBr(g->b, l->head);
    LLVMAddIncoming(l->iv, &inc, &latch, 1);
    for (int i = 0; i < l->n; i++)
        LLVMAddIncoming(l->phi[i], (LLVMValueRef *)&next[i], &latch, 1);
    LLVMPositionBuilderAtEnd(g->b, l->exit);
    return br;
}

/* Loop metadata asking the vectoriser not to interleave: one vector per step, so that a
 * loop of a tile's width (16 floats on AVX2) runs vectorised, where LLVM's default of four
 * vectors per step needs 32 and left every tile's epilogue scalar. The node refers to
 * itself first, as LLVM's loop IDs do. */
static void no_interleave(Gen *g, LLVMValueRef latch)
{
    const char *name = "llvm.loop.interleave.count";
    LLVMMetadataRef count[2] = {LLVMMDStringInContext2(g->ctx, name, strlen(name)),
                                LLVMValueAsMetadata(LLVMConstInt(g->i32, 1, 0))};
    LLVMMetadataRef self = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(g->ctx, count, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(g->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, id);
    LLVMSetMetadata(latch, g->md_loop, LLVMMetadataAsValue(g->ctx, id));
}

/* ---------------------------------------------------------------- buffers and alias scopes */

LLVMValueRef fn_buffer(Fn *f, int b)
{
    if (!f->base[b]) {
        LLVMValueRef idx = LLVMConstInt(f->g->i64, (unsigned long long)b, 0);
        LLVMValueRef at = LLVMBuildInBoundsGEP2(f->g->b, f->g->ptr, f->bufs, &idx, 1, "");
        f->base[b] = LLVMBuildLoad2(f->g->b, f->g->ptr, at, f->g->p->buf[b].name);
    }
    return f->base[b];
}

/* Distinct program buffers never overlap (loop.h: an in-place update stores into the
 * buffer it loads, the same buffer), so each buffer the function touches is an alias
 * scope of its own and an access to one is noalias with the others. Slot nbuf is the
 * tile (tile.c). */
static void make_scopes(Fn *f)
{
    Gen *g = f->g;
    int n = g->p->nbuf + 1;
    char name[256];
    snprintf(name, sizeof name, "coil.%s", f->name);
    LLVMMetadataRef dname = LLVMMDStringInContext2(g->ctx, name, strlen(name));
    LLVMMetadataRef domain = LLVMMDNodeInContext2(g->ctx, &dname, 1);
    LLVMMetadataRef *scope = calloc((size_t)n, sizeof *scope), *others = calloc((size_t)n, sizeof *others);
    for (int b = 0; b < n; b++) {
        if (!f->base[b])
            continue;
        snprintf(name, sizeof name, "coil.%s.%d", f->name, b);
        LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(g->ctx, name, strlen(name)), domain};
        scope[b] = LLVMMDNodeInContext2(g->ctx, ops, 2);
    }
    for (int b = 0; b < n; b++) {
        if (!scope[b])
            continue;
        int m = 0;
        for (int c = 0; c < n; c++)
            if (scope[c] && c != b)
                others[m++] = scope[c];
        f->scope[b] = LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, &scope[b], 1));
        if (m)
            f->noalias[b] = LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, others, (size_t)m));
    }
    free(scope);
    free(others);
}

void fn_mark(Fn *f, LLVMValueRef access, int b)
{
    if (f->scope[b])
        LLVMSetMetadata(access, f->g->md_scope, f->scope[b]);
    if (f->noalias[b])
        LLVMSetMetadata(access, f->g->md_noalias, f->noalias[b]);
}

LLVMValueRef fn_dim(Fn *f, Dim d)
{
    Gen *g = f->g;
    LLVMValueRef v = LLVMConstInt(g->i64, (unsigned long long)d.k, 1);
    for (int s = 0; s < COIL_MAX_SYMS; s++) {
        if (!(d.syms >> s & 1))
            continue;
        LLVMValueRef idx = LLVMConstInt(g->i64, (unsigned long long)s, 0);
        LLVMValueRef at = LLVMBuildInBoundsGEP2(g->b, g->i64, f->syms, &idx, 1, "");
        LLVMValueRef sym = LLVMBuildLoad2(g->b, g->i64, at, "sym");
        v = LLVMBuildNSWMul(g->b, v, sym, "");
        if (d.sq >> s & 1) /* squared: a B*T*T tensor's size or stride */
            v = LLVMBuildNSWMul(g->b, v, sym, "");
    }
    return v;
}

/* ---------------------------------------------------------------- validation and slots */

static bool bad(Fn *f, const char *fmt, int a, int b)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b);
    gen_fail(f->g, f->name, "%s", msg);
    return false;
}

/* The phase statement s belongs to, nphase for `after`, -1 for none. */
static int stmt_phase(const Kernel *k, int s)
{
    for (int p = 0; p < k->nphase; p++)
        if (s >= k->phase[p].first && s < k->phase[p].first + k->phase[p].count)
            return p;
    return s >= k->after.first && s < k->after.first + k->after.count ? k->nphase : -1;
}

/* Operand dtypes as loop.h defines each kind (an index is i64, a condition bool). */
static bool types_agree(Fn *f, const Lx *x)
{
    const Lx *lx = f->k->lx;
    DType a = x->a >= 0 ? lx[x->a].dt : DT_I64, b = x->b >= 0 ? lx[x->b].dt : a;
    bool cmp = x->op >= OP_EQ && x->op <= OP_GE;
    switch (x->kind) {
    case LX_INT: case LX_SYM: case LX_VAR: return x->dt == DT_I64;
    case LX_LOAD: return a == DT_I64 && x->dt == f->g->p->buf[x->i].dt;
    case LX_UNARY: return x->a >= 0 && a == x->dt;
    case LX_BINARY: return x->a >= 0 && x->b >= 0 && a == b && x->dt == (cmp ? DT_BOOL : a);
    case LX_IDIV: case LX_IMOD: return x->a >= 0 && x->b >= 0 && a == DT_I64 && b == DT_I64 && x->dt == DT_I64;
    case LX_SELECT: return x->c >= 0 && a == DT_BOOL && b == x->dt && lx[x->c].dt == x->dt;
    case LX_CAST: return x->a >= 0;
    case LX_RAND: return x->a >= 0 && x->b >= 0 && a == DT_I64 && b == DT_I64 && dtype_info[x->dt].is_float;
    case LX_ACC: return x->dt == f->k->stmt[x->i].acc_dt;
    default: return true;
    }
}

static bool check_lx(Fn *f, int id)
{
    const Kernel *k = f->k;
    const Lx *x = &k->lx[id];
    int ops[3] = {x->a, x->b, x->c};
    for (int i = 0; i < 3; i++)
        if (ops[i] >= id || ops[i] < -1)
            return bad(f, "expression %d uses %d, which is not an earlier expression", id, ops[i]);
    if (x->dt < 0 || x->dt >= DT_COUNT || x->kind < 0 || x->kind >= LX_COUNT)
        return bad(f, "expression %d has kind %d or dtype out of range", id, x->kind);
    if (x->kind == LX_VAR && (x->i < 0 || x->i >= k->nouter + k->ninner))
        return bad(f, "expression %d is loop variable %d, out of range", id, (int)x->i);
    if (x->kind == LX_LOAD && (x->i < 0 || x->i >= f->g->p->nbuf || x->a < 0))
        return bad(f, "expression %d loads buffer %d, out of range", id, (int)x->i);
    if (x->kind == LX_ACC && (x->i < 0 || x->i >= k->nstmt || k->stmt[x->i].kind != ST_REDUCE))
        return bad(f, "expression %d reads accumulator %d, which is no reduction", id, (int)x->i);
    if (x->kind == LX_SYM && (x->i < 0 || x->i >= COIL_SYM_SLOTS))
        return bad(f, "expression %d is symbol %d, out of range", id, (int)x->i);
    if (!types_agree(f, x))
        return bad(f, "expression %d (kind %d): its operands' dtypes do not fit", id, x->kind);
    return true;
}

/* Each expression's slot, whether it varies in the inner walk (FL_INNER), and whether it
 * reads a buffer this kernel stores into (FL_PIN: evaluated where a statement needs it,
 * after the statements before, as codegen/loop_eval.c does). */
static bool place(Fn *f, const bool *stored)
{
    const Kernel *k = f->k;
    for (int id = 0; id < k->nlx; id++) {
        if (!check_lx(f, id))
            return false;
        const Lx *x = &k->lx[id];
        int ops[3] = {x->a, x->b, x->c}, slot = 0;
        unsigned char fl = 0;
        for (int i = 0; i < 3; i++)
            if (ops[i] >= 0) {
                slot = f->slot[ops[i]] > slot ? f->slot[ops[i]] : slot;
                fl |= f->flag[ops[i]] & (FL_INNER | FL_PIN);
            }
        if (x->kind == LX_VAR && x->i < k->nouter)
            slot = (int)x->i + 1;
        if (x->kind == LX_VAR && x->i >= k->nouter)
            fl |= FL_INNER;
        if (x->kind == LX_LOAD && stored[x->i] && id != f->override)
            fl |= FL_PIN;
        if (id == f->override)
            slot = slot > k->nouter ? slot : k->nouter;
        if (x->kind == LX_ACC) {
            int p = stmt_phase(k, (int)x->i);
            if (p < 0 || p >= k->nphase)
                return bad(f, "expression %d reads statement %d, which is in no phase", id, (int)x->i);
            slot = slot > k->nouter + 1 + p ? slot : k->nouter + 1 + p;
        }
        f->slot[id] = slot;
        f->flag[id] = fl;
    }
    return true;
}

/* Flag fl spreads from users to operands (operands have smaller ids); sure_only keeps it
 * off the arms of selects. The override's operands are not needed. */
static void spread(Fn *f, unsigned char fl, bool sure_only)
{
    for (int id = f->k->nlx - 1; id >= 0; id--) {
        const Lx *x = &f->k->lx[id];
        if (!(f->flag[id] & fl) || id == f->override)
            continue;
        int ops[3] = {x->a, x->b, x->c};
        for (int i = 0; i < 3; i++)
            if (ops[i] >= 0 && !(sure_only && x->kind == LX_SELECT && i > 0))
                f->flag[ops[i]] |= fl;
    }
}

/* Statements outside every phase and `after` are never run (as in loop_eval). */
static void mark_roots(Fn *f, unsigned char fl)
{
    for (int s = 0; s < f->k->nstmt; s++) {
        if (stmt_phase(f->k, s) < 0)
            continue;
        f->flag[f->k->stmt[s].value] |= fl;
        if (f->k->stmt[s].kind == ST_STORE)
            f->flag[f->k->stmt[s].index] |= fl;
    }
}

static bool check_stmts(Fn *f)
{
    const Kernel *k = f->k;
    for (int s = 0; s < k->nstmt; s++) {
        const LStmt *st = &k->stmt[s];
        int p = stmt_phase(k, s);
        if (p < 0)
            continue;
        if (st->value < 0 || st->value >= k->nlx || (st->kind == ST_STORE && (st->index < 0 || st->index >= k->nlx)))
            return bad(f, "statement %d names an expression out of range (%d)", s, st->value);
        if (st->kind == ST_STORE && (st->buf < 0 || st->buf >= f->g->p->nbuf || k->lx[st->index].dt != DT_I64))
            return bad(f, "statement %d stores into buffer %d (out of range, or not at an i64 index)", s, st->buf);
        if (st->kind == ST_REDUCE && p == k->nphase)
            return bad(f, "statement %d reduces after the phases (%d)", s, p);
        int limit = k->nouter + p; /* accumulators of earlier phases only */
        int used = f->slot[st->value];
        if (st->kind == ST_STORE && f->slot[st->index] > used)
            used = f->slot[st->index];
        if (used > limit)
            return bad(f, "statement %d uses the accumulator of its own or a later phase (%d)", s, p);
        unsigned char inner = f->flag[st->value] | (st->kind == ST_STORE ? f->flag[st->index] : 0);
        if (p == k->nphase && (inner & FL_INNER))
            return bad(f, "statement %d after the phases uses an inner loop variable (%d)", s, p);
    }
    return true;
}

/* ---------------------------------------------------------------- emission */

/* Hoisted expressions of a slot, in id order (operands first). */
static bool emit_slot(Fn *f, int slot)
{
    for (int id = 0; id < f->k->nlx; id++) {
        if (f->slot[id] != slot || (f->flag[id] & (FL_INNER | FL_PIN | FL_USED)) != FL_USED || f->val[id])
            continue;
        f->val[id] = expr_emit(f, id);
        if (!f->val[id])
            return false;
    }
    return true;
}

/* What statements [first, first + n) need of the expressions a section emits itself
 * (inner or pinned) and has not yet: in id order; outer_only leaves the inner ones. */
static bool emit_needed(Fn *f, int first, int n, bool outer_only)
{
    const Kernel *k = f->k;
    const unsigned char own = FL_INNER | FL_PIN;
    for (int s = first; s < first + n; s++) {
        int roots[2] = {k->stmt[s].value, k->stmt[s].kind == ST_STORE ? k->stmt[s].index : -1};
        for (int i = 0; i < 2; i++)
            if (roots[i] >= 0 && (f->flag[roots[i]] & own) && !f->val[roots[i]])
                f->flag[roots[i]] |= FL_MARK;
    }
    for (int id = k->nlx - 1; id >= 0; id--) {
        const Lx *x = &k->lx[id];
        int ops[3] = {x->a, x->b, x->c};
        for (int i = 0; i < 3 && (f->flag[id] & FL_MARK) && id != f->override; i++)
            if (ops[i] >= 0 && (f->flag[ops[i]] & own) && !f->val[ops[i]])
                f->flag[ops[i]] |= FL_MARK;
    }
    bool ok = true;
    for (int id = 0; id < k->nlx; id++) {
        if (!(f->flag[id] & FL_MARK))
            continue;
        f->flag[id] &= (unsigned char)~FL_MARK;
        if (ok && !(outer_only && (f->flag[id] & FL_INNER)))
            ok = (f->val[id] = expr_emit(f, id)) != NULL;
    }
    return ok;
}

/* A section's own values do not outlive it (the next phase walks its loops afresh). */
static void forget_section(Fn *f)
{
    for (int id = 0; id < f->k->nlx; id++)
        if ((f->flag[id] & (FL_INNER | FL_PIN)) && id != f->override)
            f->val[id] = NULL;
}

/* A store, or with add the element read and the value added in registers (f32 for the
 * float dtypes; bool as or), then stored: the kernel runs on one thread (loop.h). */
static void store(Fn *f, const LStmt *s)
{
    Gen *g = f->g;
    DType dt = g->p->buf[s->buf].dt;
    LLVMValueRef v = expr_convert(g, f->val[s->value], f->k->lx[s->value].dt, dt);
    LLVMValueRef base = fn_buffer(f, s->buf), inst;
    if (s->add) {
        LLVMValueRef old = mem_load(g, dt, base, f->val[s->index], &inst);
        fn_mark(f, inst, s->buf);
        v = dtype_info[dt].is_float ? LLVMBuildFAdd(g->b, old, v, "")
            : dt == DT_BOOL         ? LLVMBuildOr(g->b, old, v, "")
                                    : LLVMBuildAdd(g->b, old, v, "");
    }
    fn_mark(f, mem_store(g, dt, base, f->val[s->index], v), s->buf);
}

/* The dtype's least (greatest when !least) value, the start of max (min) and argmax. */
static LLVMValueRef extreme(Gen *g, DType dt, bool least)
{
    if (dtype_info[dt].is_float)
        return LLVMConstReal(g->f32, least ? -INFINITY : INFINITY);
    if (dt == DT_BOOL)
        return LLVMConstInt(g->i1, !least, 0);
    unsigned bits = (unsigned)dtype_info[dt].size * 8;
    uint64_t max = (UINT64_C(1) << (bits - 1)) - 1;
    return LLVMConstInt(reg_type(g, dt), least ? ~max : max, 1);
}

static int reduce_init(Fn *f, const LStmt *s, LLVMValueRef *init)
{
    Gen *g = f->g;
    DType vdt = f->k->lx[s->value].dt;
    if (s->op == OP_ARGMAX) {
        init[0] = extreme(g, vdt, true);
        init[1] = LLVMConstInt(g->i64, 0, 0);
        return 2;
    }
    if (s->op == OP_SUM)
        init[0] = LLVMConstNull(reg_type(g, s->acc_dt));
    else
        init[0] = extreme(g, s->acc_dt, s->op == OP_MAX);
    return 1;
}

/* argmax: v replaces the best so far when greater, or when it is the first NaN. */
static LLVMValueRef better(Gen *g, DType dt, LLVMValueRef v, LLVMValueRef best)
{
    LLVMBuilderRef b = g->b;
    if (dtype_info[dt].is_float) {
        LLVMValueRef gt = LLVMBuildFCmp(b, LLVMRealOGT, v, best, "");
        LLVMValueRef nan = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""),
                                        LLVMBuildFCmp(b, LLVMRealORD, best, best, ""), "");
        return LLVMBuildOr(b, gt, nan, "");
    }
    if (dt == DT_BOOL)
        return LLVMBuildAnd(b, v, LLVMBuildNot(b, best, ""), "");
    return LLVMBuildICmp(b, LLVMIntSGT, v, best, "");
}

static const char *const float_combine[OP_COUNT] = {[OP_MAX] = "llvm.maximum", [OP_MIN] = "llvm.minimum"};
static const char *const int_combine[OP_COUNT] = {[OP_MAX] = "llvm.smax", [OP_MIN] = "llvm.smin"};

/* acc (op) v for sum, max and min, in the accumulator's dtype. A float sum may be
 * reassociated (only that add), so the loop vectoriser can split it into lanes. */
static LLVMValueRef combine(Gen *g, const LStmt *s, LLVMValueRef acc, LLVMValueRef v)
{
    DType dt = s->acc_dt;
    LLVMValueRef args[2] = {acc, v};
    LLVMTypeRef t = reg_type(g, dt);
    if (dt == DT_BOOL) /* or as sum and max, and as min */
        return s->op == OP_MIN ? LLVMBuildAnd(g->b, acc, v, "") : LLVMBuildOr(g->b, acc, v, "");
    if (s->op == OP_SUM && dtype_info[dt].is_float) {
        LLVMValueRef r = LLVMBuildFAdd(g->b, acc, v, "");
        LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
        return r;
    }
    if (s->op == OP_SUM)
        return LLVMBuildAdd(g->b, acc, v, "");
    return gen_intrinsic(g, g->b, dtype_info[dt].is_float ? float_combine[s->op] : int_combine[s->op],
                         &t, 1, args, 2);
}

static void reduce_step(Fn *f, const LStmt *s, const LLVMValueRef *cur, LLVMValueRef *next)
{
    Gen *g = f->g;
    DType vdt = f->k->lx[s->value].dt;
    LLVMValueRef v = f->val[s->value];
    if (s->op == OP_ARGMAX) {
        LLVMValueRef take = better(g, vdt, v, cur[0]);
        next[0] = LLVMBuildSelect(g->b, take, v, cur[0], "");
        next[1] = LLVMBuildSelect(g->b, take, f->var[s->axis], cur[1], "");
        return;
    }
    next[0] = combine(g, s, cur[0], expr_convert(g, v, vdt, s->acc_dt));
}

static bool check_reduce(Fn *f, const LStmt *s, int id)
{
    const Kernel *k = f->k;
    bool ok = s->op == OP_SUM || s->op == OP_MAX || s->op == OP_MIN || s->op == OP_ARGMAX;
    if (!ok)
        return bad(f, "statement %d reduces with op %d (sum, max, min or argmax)", id, s->op);
    if (s->op == OP_ARGMAX && (s->axis < k->nouter || s->axis >= k->nouter + k->ninner))
        return bad(f, "statement %d: argmax over variable %d, not an inner one", id, s->axis);
    if (s->op == OP_ARGMAX && s->acc_dt != DT_I64)
        return bad(f, "statement %d: argmax accumulates an i64 index, not dtype %d", id, s->acc_dt);
    if (s->acc_dt < 0 || s->acc_dt >= DT_COUNT)
        return bad(f, "statement %d: accumulator dtype %d", id, s->acc_dt);
    return true;
}

/* The accumulators of phase p's reductions: where each starts in the carried values. */
static int carries(Fn *f, StmtRange r, int *carry, LLVMValueRef *init)
{
    int n = 0;
    for (int i = 0; i < r.count; i++) {
        const LStmt *s = &f->k->stmt[r.first + i];
        carry[i] = n;
        if (s->kind == ST_REDUCE && !check_reduce(f, s, r.first + i))
            return -1;
        if (s->kind == ST_REDUCE)
            n += reduce_init(f, s, init + n);
    }
    return n;
}

/* Phase p: its pinned outer values, then the inner loop nest carrying the accumulators
 * as phis, each statement after what it needs; the final values become f->acc. */
static bool emit_phase(Fn *f, int p)
{
    const Kernel *k = f->k;
    StmtRange r = k->phase[p];
    int *carry = calloc((size_t)r.count + 1, sizeof *carry);
    LLVMValueRef *init = calloc(2 * (size_t)r.count + 1, sizeof *init);
    LLVMValueRef *next = calloc(2 * (size_t)r.count + 1, sizeof *next);
    Loop loop[LOOP_MAX_DIMS];
    int n = carry && init && next ? carries(f, r, carry, init) : -1;
    bool ok = n >= 0 && emit_needed(f, r.first, r.count, true);
    const LLVMValueRef *cur = init;
    int open = 0;
    for (; open < k->ninner && ok; open++) {
        loop_open(f, &loop[open], LLVMConstInt(f->g->i64, 0, 0), f->size[k->nouter + open], n, cur);
        f->var[k->nouter + open] = loop[open].iv;
        cur = loop[open].phi;
    }
    for (int i = 0; i < n; i++)
        next[i] = cur[i];
    for (int i = 0; i < r.count && ok; i++) {
        const LStmt *s = &k->stmt[r.first + i];
        if (!(ok = emit_needed(f, r.first + i, 1, false)))
            break;
        if (s->kind == ST_STORE)
            store(f, s);
        else
            reduce_step(f, s, cur + carry[i], next + carry[i]);
    }
    for (int d = open - 1; d >= 0; d--) {
        loop_close(f, &loop[d], next);
        for (int i = 0; i < n; i++)
            next[i] = loop[d].phi[i];
        free(loop[d].phi);
    }
    for (int i = 0; i < r.count && ok; i++)
        if (k->stmt[r.first + i].kind == ST_REDUCE)
            f->acc[r.first + i] = next[carry[i] + (k->stmt[r.first + i].op == OP_ARGMAX)];
    forget_section(f);
    free(carry);
    free(init);
    free(next);
    return ok && err_ok(f->g->e);
}

/* The innermost outer point: the phases, then the stores after them. */
static bool emit_point(Fn *f)
{
    const Kernel *k = f->k;
    for (int p = 0; p < k->nphase; p++)
        if (!emit_phase(f, p) || !emit_slot(f, k->nouter + 1 + p))
            return false;
    for (int i = 0; i < k->after.count; i++) {
        if (!emit_needed(f, k->after.first + i, 1, false))
            return false;
        store(f, &k->stmt[k->after.first + i]);
    }
    forget_section(f);
    return err_ok(f->g->e);
}

static bool emit_outer(Fn *f, int d)
{
    if (d == f->k->nouter && f->at_point)
        f->at_point(f);
    if (!emit_slot(f, d))
        return false;
    if (d == f->k->nouter)
        return emit_point(f);
    Loop l;
    loop_open(f, &l, f->lo[d], f->hi[d], 0, NULL);
    f->iv[d] = l.iv;
    f->var[d] = f->off[d] ? LLVMBuildNSWAdd(f->g->b, l.iv, f->off[d], "") : l.iv;
    bool ok = emit_outer(f, d + 1);
    LLVMValueRef latch = loop_close(f, &l, NULL);
    if (f->narrow && d == f->k->nouter - 1)
        no_interleave(f->g, latch);
    return ok;
}

/* ---------------------------------------------------------------- functions */

void fn_attr(Fn *f, unsigned idx, const char *name) { gen_attr(f->g, f->fn, idx, name); }

/* A kernel's buffers and sizes are loaded at entry: every later use is inside loops. */
bool fn_begin(Gen *g, Fn *f, const Kernel *k, const char *name, LLVMTypeRef type)
{
    const Program *p = g->p;
    *f = (Fn){.g = g, .k = k, .name = name, .override = -1};
    f->fn = LLVMAddFunction(g->mod, name, type);
    fn_attr(f, LLVMAttributeFunctionIndex, "nounwind");
    if (g->t->vec == 16) /* AVX-512: use zmm (LLVM's x86 default for these CPUs is 256 bits) */
        LLVMAddAttributeAtIndex(f->fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(g->ctx, "prefer-vector-width", 19, "512", 3));
    int n = f->k->nlx + 1, nb = p->nbuf + 1;
    f->base = calloc((size_t)nb, sizeof *f->base);
    f->numel = calloc((size_t)nb, sizeof *f->numel);
    f->scope = calloc((size_t)nb, sizeof *f->scope);
    f->noalias = calloc((size_t)nb, sizeof *f->noalias);
    f->val = calloc((size_t)n, sizeof *f->val);
    f->slot = calloc((size_t)n, sizeof *f->slot);
    f->flag = calloc((size_t)n, 1);
    f->acc = calloc((size_t)f->k->nstmt + 1, sizeof *f->acc);
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, f->fn, "entry"));
    return f->base && f->numel && f->scope && f->noalias && f->val && f->slot && f->flag && f->acc;
}

/* The pointer arguments: bufs and syms are read-only tables the function never leaks. */
void fn_tables(Fn *f, unsigned bufs, unsigned syms)
{
    f->bufs = LLVMGetParam(f->fn, bufs);
    f->syms = LLVMGetParam(f->fn, syms);
    const char *attrs[] = {"noalias", "nocapture", "readonly"};
    for (int i = 0; i < 3; i++) {
        fn_attr(f, bufs + 1, attrs[i]);
        fn_attr(f, syms + 1, attrs[i]);
    }
}

void fn_set_size(Fn *f)
{
    const Kernel *k = f->k;
    for (int d = 0; d < k->nouter + k->ninner; d++)
        f->size[d] = fn_dim(f, k->size[d]);
    for (int s = 0; s < k->nlx; s++) {
        int b = (int)k->lx[s].i;
        if (k->lx[s].kind != LX_LOAD || b < 0 || b >= f->g->p->nbuf)
            continue;
        fn_buffer(f, b);
        if (!f->numel[b])
            f->numel[b] = fn_dim(f, f->g->p->buf[b].numel);
    }
    for (int s = 0; s < k->nstmt; s++)
        if (k->stmt[s].kind == ST_STORE && k->stmt[s].buf >= 0 && k->stmt[s].buf < f->g->p->nbuf &&
            stmt_phase(k, s) >= 0)
            fn_buffer(f, k->stmt[s].buf);
}

bool fn_body(Fn *f)
{
    const Kernel *k = f->k;
    Gen *g = f->g;
    int nb = g->p->nbuf;
    bool *stored = calloc((size_t)nb + 1, sizeof *stored);
    for (int s = 0; s < k->nstmt; s++)
        if (k->stmt[s].kind == ST_STORE && k->stmt[s].buf >= 0 && k->stmt[s].buf < nb && stmt_phase(k, s) >= 0)
            stored[k->stmt[s].buf] = true;
    bool ok = place(f, stored) && check_stmts(f);
    free(stored);
    if (!ok)
        return false;
    mark_roots(f, FL_USED | FL_SURE);
    spread(f, FL_USED, false);
    spread(f, FL_SURE, true);
    make_scopes(f);
    if (k->nouter == 0) { /* no outer loop: run once when the range is not empty */
        LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(g->ctx, f->fn, "run");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(g->ctx, f->fn, "skip");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, f->lo[0], f->hi[0], ""), run, done);
        LLVMPositionBuilderAtEnd(g->b, done);
        LLVMBuildRetVoid(g->b);
        LLVMPositionBuilderAtEnd(g->b, run);
    }
    return emit_outer(f, 0);
}

void fn_end(Fn *f)
{
    if (err_ok(f->g->e))
        LLVMBuildRetVoid(f->g->b);
    free(f->base);
    free(f->numel);
    free(f->scope);
    free(f->noalias);
    free(f->val);
    free(f->slot);
    free(f->flag);
    free(f->acc);
}

/* Names the module has for itself, and the C library's names LLVM may call (a loop that
 * fills memory becomes memset): a kernel called memset would call itself. */
static bool reserved(const char *name)
{
    static const char *const libc[] = {"memcpy", "memmove", "memset", "bzero"};
    for (size_t i = 0; i < sizeof libc / sizeof libc[0]; i++)
        if (strcmp(name, libc[i]) == 0)
            return true;
    return strncmp(name, "coil_", 5) == 0 || strncmp(name, "coil.", 5) == 0;
}

/* The kernel's shape: a usable name, loop and phase counts, statement ranges within the
 * statements and apart. */
static bool check_kernel(Gen *g, const Kernel *k, int id)
{
    if (!k->name || !*k->name || reserved(k->name) || LLVMGetNamedFunction(g->mod, k->name))
        return gen_fail(g, k->name ? k->name : "(null)", "kernel %d's name is empty, not unique "
                        "or reserved (coil_*, memcpy, memset, ...)", id) != NULL;
    if (k->nouter < 0 || k->ninner < 0 || k->nouter + k->ninner > LOOP_MAX_DIMS || k->nphase < 0 ||
        k->nphase > LOOP_MAX_PHASES || k->nlx < 0 || k->nstmt < 0)
        return gen_fail(g, k->name, "%d outer and %d inner dims, %d phases: out of range",
                        k->nouter, k->ninner, k->nphase) != NULL;
    for (int p = 0; p <= k->nphase; p++) {
        StmtRange r = p < k->nphase ? k->phase[p] : k->after;
        bool ok = r.first >= 0 && r.count >= 0 && r.first <= k->nstmt - r.count;
        for (int q = 0; ok && q < p; q++) /* sections are disjoint */
            ok = r.count == 0 || k->phase[q].count == 0 || r.first >= k->phase[q].first + k->phase[q].count ||
                 k->phase[q].first >= r.first + r.count;
        if (!ok)
            return gen_fail(g, k->name, "statements %d..%d of section %d overlap another or "
                            "fall outside the statements", r.first, r.first + r.count, p) != NULL;
    }
    return true;
}

bool kernel_check(Gen *g, int k) { return check_kernel(g, &g->p->kernel[k], k); }

bool kernel_define(Gen *g, const Kernel *kk, const char *name)
{
    Fn f;
    LLVMTypeRef args[4] = {g->ptr, g->ptr, g->i64, g->i64};
    bool ok = fn_begin(g, &f, kk, name, LLVMFunctionType(g->voidt, args, 4, 0));
    if (ok) {
        fn_tables(&f, 0, 1);
        fn_set_size(&f);
        LLVMValueRef lo[2] = {LLVMGetParam(f.fn, 2), LLVMConstInt(g->i64, 0, 0)};
        LLVMValueRef hi[2] = {LLVMGetParam(f.fn, 3), f.size[0]};
        LLVMTypeRef i64 = g->i64; /* the range within [0, size 0], as loop_eval does */
        f.lo[0] = kk->nouter ? gen_intrinsic(g, g->b, "llvm.smax", &i64, 1, lo, 2) : lo[0];
        f.hi[0] = kk->nouter ? gen_intrinsic(g, g->b, "llvm.smin", &i64, 1, hi, 2) : hi[0];
        for (int d = 1; d < kk->nouter; d++) {
            f.lo[d] = LLVMConstInt(g->i64, 0, 0);
            f.hi[d] = f.size[d];
        }
        ok = fn_body(&f);
    }
    fn_end(&f);
    return ok && err_ok(g->e);
}
