/* loop_eval.c — the loop IR's reference evaluator: runs a Program on one thread, every
 * expression in f64 rounded to its dtype, so it agrees with ir/interp.c (loop.h's semantics).
 *
 * Each kernel call first makes a plan, which also checks the kernel: every expression gets
 * a level (constant; outer: fixed at an outer point; inner: varies in the inner walk), and
 * each statement the list of expressions it is the first in its phase to need. Constants
 * are evaluated once per call; a phase's outer expressions once per outer point, before its
 * walk (the accumulators they may read are final by then); everything else just before the
 * statement that first needs it, at each point, so a statement sees the stores of the
 * statements before it (an outer-only load inside a phase is the one exception). Loads
 * outside their buffer (the untaken side of a select may be one) read 0; stores outside it
 * are skipped and counted, and loop_eval reports them. GEMM steps are a plain loop nest
 * accumulating in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/index_bounds.h"
#include "codegen/loop.h"

enum { LV_CONST, LV_OUTER, LV_INNER };

/* Operands each kind reads (a, then b, then c), and which of them are i64 indices. */
static const struct {
    unsigned char nops, index_ops;
} lx_shape[LX_COUNT] = {
    [LX_LOAD] = {1, 1},   [LX_UNARY] = {1, 0}, [LX_BINARY] = {2, 0}, [LX_IDIV] = {2, 3},
    [LX_IMOD] = {2, 3},   [LX_SELECT] = {3, 0}, [LX_CAST] = {1, 0},  [LX_RAND] = {2, 3},
};

typedef struct Span {
    int first, count;
} Span;

/* What one kernel evaluates where; sections are the phases, then `after` (nphase). */
typedef struct Plan {
    const Kernel *k;
    int nvar;
    unsigned char *level; /* per expression */
    int *klist, *olist, *ilist;
    Span konst;                      /* into klist: once per call */
    Span outer[LOOP_MAX_PHASES + 1]; /* into olist, per phase: before its walk */
    Span *inner;                     /* into ilist, per statement: just before it */
} Plan;

/* One call's state: values at the current point; reentrant, nothing shared. */
typedef struct Frame {
    const Program *p;
    const Plan *pl;
    void *const *bufs;
    const int64_t *syms;
    int64_t *bufn;                /* per buffer: its elements at these sizes */
    int64_t size[LOOP_MAX_DIMS];  /* per loop variable */
    int64_t var[LOOP_MAX_DIMS];
    double *val;                  /* per expression */
    double *acc, *best;           /* per statement: accumulator; argmax's greatest value */
    unsigned char *seen;          /* per statement: argmax has seen a value */
    int64_t bad;                  /* stores outside their buffer */
} Frame;

static int64_t dim_at(Dim d, const int64_t *syms) { return dim_eval(d, syms); }

/* ---------------------------------------------------------------- checking and planning */

static bool lx_fail(const Kernel *k, int id, const char *what, Err *e)
{
    err_set(e, ERR_INPUT, "kernel '%s': %%e%d %s", k->name ? k->name : "?", id, what);
    return false;
}

/* One expression's fields, then its level from its operands'. */
static bool plan_lx(const Program *p, Plan *pl, int id, Err *e)
{
    const Kernel *k = pl->k;
    const Lx *x = &k->lx[id];
    if ((unsigned)x->kind >= LX_COUNT || (unsigned)x->dt >= DT_COUNT)
        return lx_fail(k, id, "has an unknown kind or dtype", e);
    int ops[3] = {x->a, x->b, x->c}, lv = LV_CONST;
    for (int i = 0; i < lx_shape[x->kind].nops; i++) {
        if (ops[i] < 0 || ops[i] >= id)
            return lx_fail(k, id, "reads an expression that is not before it", e);
        if ((lx_shape[x->kind].index_ops >> i & 1) && k->lx[ops[i]].dt != DT_I64)
            return lx_fail(k, id, "takes an index that is not i64", e);
        lv = pl->level[ops[i]] > lv ? pl->level[ops[i]] : lv;
    }
    bool ok = true;
    switch (x->kind) {
    case LX_SYM: ok = x->i >= 0 && x->i < COIL_SYM_SLOTS; break;
    case LX_VAR: ok = x->i >= 0 && x->i < pl->nvar; lv = x->i < k->nouter ? LV_OUTER : LV_INNER; break;
    case LX_LOAD: ok = x->i >= 0 && x->i < p->nbuf && p->buf[x->i].dt == x->dt;
                  lv = lv > LV_OUTER ? lv : LV_OUTER; break;
    case LX_UNARY: ok = x->op >= OP_NEG && x->op <= OP_ERF && op_info[x->op].scalar1; break;
    case LX_BINARY: ok = x->op >= OP_ADD && x->op <= OP_GE && op_info[x->op].scalar2; break;
    case LX_ACC: ok = x->i >= 0 && x->i < k->nstmt && k->stmt[x->i].kind == ST_REDUCE;
                 lv = LV_OUTER; break;
    default: break;
    }
    if (!ok)
        return lx_fail(k, id, "names a variable, symbol, buffer (of its dtype), op or reduction "
                       "that does not exist", e);
    pl->level[id] = (unsigned char)lv;
    return true;
}

static bool stmt_ok(const Program *p, const Kernel *k, const LStmt *s, int sec)
{
    if (s->value < 0 || s->value >= k->nlx)
        return false;
    if (s->kind == ST_STORE)
        return s->buf >= 0 && s->buf < p->nbuf && s->index >= 0 && s->index < k->nlx &&
               k->lx[s->index].dt == DT_I64;
    bool argmax_ok = s->op != OP_ARGMAX || (s->axis >= k->nouter && s->axis < k->nouter + k->ninner);
    return s->kind == ST_REDUCE && sec < k->nphase && (unsigned)s->acc_dt < DT_COUNT && argmax_ok &&
           (s->op == OP_SUM || s->op == OP_MAX || s->op == OP_MIN || s->op == OP_ARGMAX);
}

/* The section (phase, or nphase for `after`) of each statement; -1 for none. */
static bool plan_sections(const Kernel *k, int *sec_of, Err *e)
{
    for (int t = 0; t < k->nstmt; t++)
        sec_of[t] = -1;
    for (int s = 0; s <= k->nphase; s++) {
        StmtRange r = s < k->nphase ? k->phase[s] : k->after;
        if (r.first < 0 || r.count < 0 || r.first > k->nstmt - r.count) {
            err_set(e, ERR_INPUT, "kernel '%s': statements %d..%d are out of range", k->name,
                    r.first, r.first + r.count);
            return false;
        }
        for (int t = r.first; t < r.first + r.count; t++) {
            if (sec_of[t] >= 0) {
                err_set(e, ERR_INPUT, "kernel '%s': statement %d is in two phases", k->name, t);
                return false;
            }
            sec_of[t] = s;
        }
    }
    return true;
}

/* Schedule what statement t of section sec needs and no earlier statement of sec did.
 * reach and done are scratch (per expression), stamp unique to this statement. */
static bool plan_stmt(Plan *pl, int t, int sec, const int *sec_of, int *reach, int *done,
                      int stamp, Err *e)
{
    const Kernel *k = pl->k;
    const LStmt *s = &k->stmt[t];
    reach[s->value] = stamp;
    if (s->kind == ST_STORE)
        reach[s->index] = stamp;
    for (int id = k->nlx - 1; id >= 0; id--) {
        const Lx *x = &k->lx[id];
        int ops[3] = {x->a, x->b, x->c};
        for (int i = 0; reach[id] == stamp && i < lx_shape[x->kind].nops; i++)
            reach[ops[i]] = stamp;
    }
    for (int id = 0; id < k->nlx; id++) {
        if (reach[id] != stamp || done[id] == sec + 1 || (pl->level[id] == LV_CONST && done[id]))
            continue;
        const Lx *x = &k->lx[id];
        if (x->kind == LX_ACC && (sec_of[x->i] < 0 || sec_of[x->i] >= sec))
            return lx_fail(k, id, "reads the accumulator of a reduction that is not done yet", e);
        if (pl->level[id] == LV_INNER && sec == k->nphase)
            return lx_fail(k, id, "depends on an inner variable but is used after the walk", e);
        done[id] = pl->level[id] == LV_CONST ? -1 : sec + 1;
        if (pl->level[id] == LV_CONST)
            pl->klist[pl->konst.count++] = id;
        else if (pl->level[id] == LV_OUTER && sec < k->nphase)
            pl->olist[pl->outer[sec].first + pl->outer[sec].count++] = id;
        else
            pl->ilist[pl->inner[t].first + pl->inner[t].count++] = id;
    }
    return true;
}

static bool plan_schedule(const Program *p, Plan *pl, const int *sec_of, int *reach, int *done,
                          Err *e)
{
    const Kernel *k = pl->k;
    int ofill = 0, ifill = 0, stamp = 0;
    for (int sec = 0; sec <= k->nphase; sec++) {
        StmtRange r = sec < k->nphase ? k->phase[sec] : k->after;
        pl->outer[sec] = (Span){ofill, 0};
        for (int t = r.first; t < r.first + r.count; t++) {
            if (!stmt_ok(p, k, &k->stmt[t], sec)) {
                err_set(e, ERR_INPUT, "kernel '%s': statement %d is malformed", k->name, t);
                return false;
            }
            pl->inner[t] = (Span){ifill, 0};
            if (!plan_stmt(pl, t, sec, sec_of, reach, done, ++stamp, e))
                return false;
            ifill += pl->inner[t].count;
        }
        ofill += pl->outer[sec].count;
    }
    return true;
}

static void plan_free(Plan *pl)
{
    free(pl->level);
    free(pl->klist);
    free(pl->olist);
    free(pl->ilist);
    free(pl->inner);
}

/* Check kernel kid of p and plan its evaluation; false with e set when it is malformed. */
static bool plan_make(const Program *p, int kid, Plan *pl, Err *e)
{
    memset(pl, 0, sizeof *pl);
    const Kernel *k = pl->k = &p->kernel[kid];
    pl->nvar = k->nouter + k->ninner;
    if (k->nouter < 0 || k->ninner < 0 || pl->nvar > LOOP_MAX_DIMS || k->nphase < 0 ||
        k->nphase > LOOP_MAX_PHASES || k->nlx < 0 || k->nstmt < 0) {
        err_set(e, ERR_INPUT, "kernel '%s': loop or phase counts out of range", k->name);
        return false;
    }
    size_t nx = (size_t)k->nlx + 1, nsec = (size_t)k->nphase + 1, ns = (size_t)k->nstmt + 1;
    pl->level = malloc(nx);
    pl->klist = malloc(nx * sizeof(int));
    pl->olist = malloc(nx * nsec * sizeof(int));
    pl->ilist = malloc(nx * nsec * sizeof(int));
    pl->inner = calloc(ns, sizeof *pl->inner);
    int *sec_of = malloc(ns * sizeof(int)), *reach = calloc(nx, sizeof(int)),
        *done = calloc(nx, sizeof(int));
    bool ok = pl->level && pl->klist && pl->olist && pl->ilist && pl->inner && sec_of && reach &&
              done;
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory planning kernel '%s'", k->name);
    for (int id = 0; ok && id < k->nlx; id++)
        ok = plan_lx(p, pl, id, e);
    ok = ok && plan_sections(k, sec_of, e) && plan_schedule(p, pl, sec_of, reach, done, e);
    free(sec_of);
    free(reach);
    free(done);
    if (!ok)
        plan_free(pl);
    return ok;
}

/* ---------------------------------------------------------------- evaluation */

/* An out-of-range load reads 0: only a value that is never used may be one. */
static double load(const Frame *f, int64_t b, double at)
{
    if (!(at >= 0 && at < (double)f->bufn[b]) || !f->bufs[b])
        return 0;
    return dtype_load(f->p->buf[b].dt, f->bufs[b], (int64_t)at);
}

static double acc_value(const Frame *f, int64_t t)
{
    return dtype_round(f->pl->k->stmt[t].acc_dt, f->acc[t]);
}

/* An i64 expression's value as an integer; 2^63 (what INT64_MAX reads as) saturates. */
static int64_t as_i64(double v)
{
    return v >= 0x1p63 ? INT64_MAX : v >= -0x1p63 ? (int64_t)v : INT64_MIN;
}

/* Index division: a divisor lowering promised > 0 is checked anyway, since 0 would trap. */
static double idiv(double a, double b, bool mod)
{
    int64_t x = as_i64(a), y = as_i64(b);
    if (y <= 0)
        return 0;
    return (double)(mod ? x % y : x / y);
}

static double eval_lx(const Frame *f, const Lx *x)
{
    const double *v = f->val;
    switch (x->kind) {
    case LX_INT: return (double)x->i;
    case LX_FLOAT: return dtype_round(x->dt, x->f);
    case LX_SYM: return (double)f->syms[x->i];
    case LX_VAR: return (double)f->var[x->i];
    case LX_LOAD: return load(f, x->i, v[x->a]);
    case LX_UNARY: return dtype_round(x->dt, op_info[x->op].scalar1(v[x->a]));
    case LX_BINARY: return dtype_round(x->dt, op_info[x->op].scalar2(v[x->a], v[x->b]));
    case LX_IDIV: return idiv(v[x->a], v[x->b], false);
    case LX_IMOD: return idiv(v[x->a], v[x->b], true);
    case LX_SELECT: return v[x->a] != 0 ? v[x->b] : v[x->c];
    case LX_CAST: return dtype_round(x->dt, v[x->a]);
    case LX_RAND:
        return dtype_round(x->dt, philox_uniform_step((uint64_t)x->i, (uint64_t)as_i64(v[x->b]),
                                                      (uint64_t)x->j, (uint64_t)as_i64(v[x->a])));
    case LX_ACC: return acc_value(f, x->i);
    default: return 0;
    }
}

static void eval_list(Frame *f, const int *list, Span s)
{
    for (int i = s.first; i < s.first + s.count; i++)
        f->val[list[i]] = eval_lx(f, &f->pl->k->lx[list[i]]);
}

/* The least (sign -1) or greatest (+1) value of a dtype: max's and min's identity. */
static double dtype_extreme(DType dt, int sign)
{
    static const double least[DT_COUNT] = {
        [DT_F32] = -INFINITY, [DT_F16] = -INFINITY, [DT_BF16] = -INFINITY,
        [DT_I8] = -128.0, [DT_I32] = -0x1p31, [DT_I64] = -0x1p63, [DT_BOOL] = 0,
    };
    static const double greatest[DT_COUNT] = {
        [DT_F32] = INFINITY, [DT_F16] = INFINITY, [DT_BF16] = INFINITY,
        [DT_I8] = 127.0, [DT_I32] = 0x1p31 - 1, [DT_I64] = 0x1p63 - 1024, [DT_BOOL] = 1,
    };
    return sign < 0 ? least[dt] : greatest[dt];
}

static void reduce_init(Frame *f, int t)
{
    const LStmt *s = &f->pl->k->stmt[t];
    f->acc[t] = s->op == OP_MAX ? dtype_extreme(s->acc_dt, -1)
              : s->op == OP_MIN ? dtype_extreme(s->acc_dt, +1) : 0;
    f->seen[t] = 0;
}

/* argmax keeps the first greatest value; once it holds a NaN nothing replaces it. */
static void reduce_step(Frame *f, int t)
{
    const LStmt *s = &f->pl->k->stmt[t];
    double v = f->val[s->value];
    switch (s->op) {
    case OP_SUM: f->acc[t] += v; break;
    case OP_MAX: f->acc[t] = op_info[OP_MAXIMUM].scalar2(f->acc[t], v); break;
    case OP_MIN: f->acc[t] = op_info[OP_MINIMUM].scalar2(f->acc[t], v); break;
    case OP_ARGMAX:
        if (!f->seen[t] || (!isnan(f->best[t]) && (v > f->best[t] || isnan(v)))) {
            f->best[t] = v;
            f->acc[t] = (double)f->var[s->axis];
            f->seen[t] = 1;
        }
        break;
    default: break;
    }
}

static void store(Frame *f, const LStmt *s)
{
    double at = f->val[s->index];
    if (!(at >= 0 && at < (double)f->bufn[s->buf]) || !f->bufs[s->buf]) {
        f->bad++;
        return;
    }
    DType dt = f->p->buf[s->buf].dt;
    double v = f->val[s->value];
    if (s->add) /* the exact sum, rounded once by the store: an f32 add's result */
        v += dtype_load(dt, f->bufs[s->buf], (int64_t)at);
    dtype_store(dt, f->bufs[s->buf], (int64_t)at, v);
}

static void run_stmts(Frame *f, StmtRange r)
{
    for (int t = r.first; t < r.first + r.count; t++) {
        eval_list(f, f->pl->ilist, f->pl->inner[t]);
        if (f->pl->k->stmt[t].kind == ST_STORE)
            store(f, &f->pl->k->stmt[t]);
        else
            reduce_step(f, t);
    }
}

/* The next point of var[from..to) in row-major order below lim; false after the last.
 * var[from] is never reset: it ends the walk. */
static bool next_point(int64_t *var, const int64_t *lim, int from, int to)
{
    for (int d = to - 1; d > from; d--) {
        if (++var[d] < lim[d])
            return true;
        var[d] = 0;
    }
    return ++var[from] < lim[from];
}

/* Whether the box var[from..to) = start .. lim holds a point (no dims: one point). */
static bool has_points(const int64_t *start, const int64_t *lim, int from, int to)
{
    for (int d = from; d < to; d++)
        if (start[d] >= lim[d])
            return false;
    return true;
}

static void run_phase(Frame *f, int ph)
{
    const Kernel *k = f->pl->k;
    int from = k->nouter, to = from + k->ninner;
    for (int t = k->phase[ph].first; t < k->phase[ph].first + k->phase[ph].count; t++)
        reduce_init(f, t);
    eval_list(f, f->pl->olist, f->pl->outer[ph]);
    int64_t zero[LOOP_MAX_DIMS] = {0};
    if (!has_points(zero, f->size, from, to))
        return;
    memset(f->var + from, 0, sizeof(int64_t) * (size_t)k->ninner);
    do
        run_stmts(f, k->phase[ph]);
    while (from < to && next_point(f->var, f->size, from, to));
}

static void run_outer_point(Frame *f)
{
    const Kernel *k = f->pl->k;
    for (int ph = 0; ph < k->nphase; ph++)
        run_phase(f, ph);
    run_stmts(f, k->after);
}

/* Outer variable 0 over [begin, end), the others whole. */
static void run_outer(Frame *f, int64_t begin, int64_t end)
{
    const Kernel *k = f->pl->k;
    int64_t start[LOOP_MAX_DIMS] = {0}, lim[LOOP_MAX_DIMS];
    memcpy(lim, f->size, sizeof lim);
    if (k->nouter > 0) {
        start[0] = begin > 0 ? begin : 0;
        lim[0] = end < f->size[0] ? end : f->size[0];
    } else if (begin >= end) {
        return;
    }
    eval_list(f, f->pl->klist, f->pl->konst);
    if (!has_points(start, lim, 0, k->nouter))
        return;
    memcpy(f->var, start, sizeof start);
    do
        run_outer_point(f);
    while (k->nouter > 0 && next_point(f->var, lim, 0, k->nouter));
}

/* Run a planned kernel; false only when out of memory. *bad counts stores outside. */
static bool run_planned(const Program *p, const Plan *pl, void *const *bufs, const int64_t *syms,
                        int64_t begin, int64_t end, int64_t *bad)
{
    const Kernel *k = pl->k;
    Frame f = {.p = p, .pl = pl, .bufs = bufs, .syms = syms};
    size_t ns = (size_t)k->nstmt + 1;
    f.bufn = malloc(((size_t)p->nbuf + 1) * sizeof *f.bufn);
    f.val = calloc((size_t)k->nlx + 1, sizeof *f.val);
    f.acc = calloc(ns, sizeof *f.acc);
    f.best = calloc(ns, sizeof *f.best);
    f.seen = calloc(ns, 1);
    bool ok = f.bufn && f.val && f.acc && f.best && f.seen;
    for (int b = 0; ok && b < p->nbuf; b++)
        f.bufn[b] = dim_at(p->buf[b].numel, syms);
    for (int d = 0; d < pl->nvar; d++)
        f.size[d] = dim_at(k->size[d], syms);
    if (ok)
        run_outer(&f, begin, end);
    *bad += f.bad;
    free(f.bufn);
    free(f.val);
    free(f.acc);
    free(f.best);
    free(f.seen);
    return ok;
}

/* KernelFn has no way to report an error: a malformed kernel, or no memory for its
 * scratch, leaves the range untouched (loop_eval reports both). */
void loop_eval_kernel(const Program *p, int kernel, void *const *bufs, const int64_t *syms,
                      int64_t begin, int64_t end)
{
    Plan pl;
    Err e = {0};
    int64_t bad = 0;
    if (kernel < 0 || kernel >= p->nkernel || !plan_make(p, kernel, &pl, &e))
        return;
    run_planned(p, &pl, bufs, syms, begin, end, &bad);
    plan_free(&pl);
}

/* ---------------------------------------------------------------- programs */

/* A whole kernel, with its errors. */
static bool eval_kernel(const Program *p, int kid, void *const *bufs, const SymBind *sb, Err *e)
{
    Plan pl;
    if (kid < 0 || kid >= p->nkernel) {
        err_set(e, ERR_INPUT, "program names kernel %d of %d", kid, p->nkernel);
        return false;
    }
    if (!plan_make(p, kid, &pl, e))
        return false;
    const Kernel *k = pl.k;
    int64_t bad = 0, n = k->nouter > 0 ? dim_value(k->size[0], sb) : 1;
    bool ok = run_planned(p, &pl, bufs, sb->val, 0, n, &bad);
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory running kernel '%s'", k->name);
    else if (bad > 0)
        err_set(e, ERR_INPUT, "kernel '%s': %lld stores fell outside their buffer", k->name,
                (long long)bad);
    plan_free(&pl);
    return ok && bad == 0;
}


/* ---------------------------------------------------------------- GEMM */

#define GEMM_NB 256 /* columns of B widened to f64 at a time */

/* One operand at concrete sizes: element (r, c) of the batch at offset o is
 * base[o + r * rs + c * cs]. */
typedef struct Operand {
    DType dt;
    void *base;
    int64_t off, rs, cs, bs[COIL_MAX_RANK];
} Operand;

/* Widen [lo, hi] by the elements n steps of `stride` reach; overflow saturates. */
static void reach_span(int64_t *lo, int64_t *hi, int64_t n, int64_t stride)
{
    int64_t d;
    if (n <= 0)
        return;
    if (__builtin_mul_overflow(n - 1, stride, &d))
        d = stride > 0 ? INT64_MAX : INT64_MIN;
    if (d > 0 && __builtin_add_overflow(*hi, d, hi))
        *hi = INT64_MAX;
    if (d < 0 && __builtin_add_overflow(*lo, d, lo))
        *lo = INT64_MIN;
}

/* Operand `which` at these sizes (nbatch batch dims of extents ext); an error when it
 * reaches outside its buffer (conv: B as the x its windows read, Gemm.conv). */
static bool gemm_operand_of(const Program *p, int step, char which, const GemmOperand *o,
                            int nbatch, const int64_t *ext, int64_t rows, int64_t cols,
                            void *const *bufs, const SymBind *sb, const GemmConv *conv,
                            Operand *m, Err *e)
{
    if (o->buf < 0 || o->buf >= p->nbuf) {
        err_set(e, ERR_INPUT, "gemm step %d: operand %c names buffer %d of %d", step, which,
                o->buf, p->nbuf);
        return false;
    }
    *m = (Operand){.dt = p->buf[o->buf].dt, .base = bufs[o->buf], .off = dim_value(o->offset, sb),
                   .rs = dim_value(o->row_stride, sb), .cs = dim_value(o->col_stride, sb)};
    int64_t lo = m->off, hi = m->off, numel = dim_value(p->buf[o->buf].numel, sb);
    bool empty = rows <= 0 || cols <= 0;
    for (int d = 0; d < nbatch; d++) {
        m->bs[d] = dim_value(o->batch_stride[d], sb);
        empty = empty || ext[d] <= 0;
        reach_span(&lo, &hi, ext[d], m->bs[d]);
    }
    if (conv) { /* a convolution's B: what its windows reach in x */
        int64_t below, above;
        gemm_conv_reach(conv, &below, &above);
        lo += below, hi += above;
    } else {
        reach_span(&lo, &hi, rows, m->rs);
        reach_span(&lo, &hi, cols, m->cs);
    }
    if (empty || (lo >= 0 && hi < numel && m->base))
        return true;
    err_set(e, ERR_INPUT, "gemm step %d: operand %c reaches elements %lld..%lld of buffer '%s', "
            "which holds %lld", step, which, (long long)lo, (long long)hi, p->buf[o->buf].name,
            (long long)numel);
    return false;
}

/* Any operand but a convolution's B. */
static bool gemm_operand(const Program *p, int step, char which, const GemmOperand *o, int nbatch,
                         const int64_t *ext, int64_t rows, int64_t cols, void *const *bufs,
                         const SymBind *sb, Operand *m, Err *e)
{
    return gemm_operand_of(p, step, which, o, nbatch, ext, rows, cols, bufs, sb, NULL, m, e);
}

/* C[:, n0 .. n0 + nb) of one batch: B's columns widened once into `panel` (K x nb), then
 * each row of C accumulated in f64 over k in order; the loop over j vectorises without
 * reordering any sum, so the result is the plain triple loop's. */
static void gemm_block(const Operand *a, const Operand *b, const Operand *c, const GemmConv *conv,
                       const int64_t *off, int64_t m, int64_t k, int64_t n0, int64_t nb,
                       double *panel, double *row)
{
    for (int64_t x = 0; x < k; x++)
        for (int64_t j = 0; j < nb; j++)
            panel[x * nb + j] =
                conv ? gemm_conv_load(conv, b->dt, b->base, off[1], x, n0 + j)
                     : dtype_load(b->dt, b->base, off[1] + x * b->rs + (n0 + j) * b->cs);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < nb; j++)
            row[j] = 0;
        for (int64_t x = 0; x < k; x++) {
            double av = dtype_load(a->dt, a->base, off[0] + i * a->rs + x * a->cs);
            const double *bp = panel + x * nb;
            for (int64_t j = 0; j < nb; j++)
                row[j] += av * bp[j];
        }
        for (int64_t j = 0; j < nb; j++)
            dtype_store(c->dt, c->base, off[2] + i * c->rs + (n0 + j) * c->cs, row[j]);
    }
}

static bool eval_gemm(const Program *p, int step, void *const *bufs, const SymBind *sb, Err *e)
{
    const Gemm *g = &p->step[step].gemm;
    int64_t ext[COIL_MAX_RANK], nbt = 1, m = dim_value(g->m, sb), n = dim_value(g->n, sb),
            k = dim_value(g->k, sb);
    if (g->nbatch < 0 || g->nbatch > COIL_MAX_RANK - 2) {
        err_set(e, ERR_INPUT, "gemm step %d: %d batch dimensions", step, g->nbatch);
        return false;
    }
    for (int d = 0; d < g->nbatch; d++)
        nbt *= ext[d] = dim_value(g->batch[d], sb);
    Operand op[3];
    if (!gemm_operand(p, step, 'A', &g->a, g->nbatch, ext, m, k, bufs, sb, &op[0], e) ||
        !gemm_operand_of(p, step, 'B', &g->b, g->nbatch, ext, k, n, bufs, sb, g->conv, &op[1], e) ||
        !gemm_operand(p, step, 'C', &g->c, g->nbatch, ext, m, n, bufs, sb, &op[2], e))
        return false;
    if (nbt <= 0 || m <= 0 || n <= 0)
        return true;
    double *panel = malloc(((size_t)(k > 0 ? k : 1) * GEMM_NB) * sizeof *panel);
    double *row = malloc(GEMM_NB * sizeof *row);
    for (int64_t bi = 0; panel && row && bi < nbt; bi++) {
        int64_t off[3] = {op[0].off, op[1].off, op[2].off}, rem = bi;
        for (int d = g->nbatch - 1; d >= 0; d--) { /* batch dims row-major */
            for (int o = 0; o < 3; o++)
                off[o] += rem % ext[d] * op[o].bs[d];
            rem /= ext[d];
        }
        for (int64_t n0 = 0; n0 < n; n0 += GEMM_NB)
            gemm_block(&op[0], &op[1], &op[2], g->conv, off, m, k, n0,
                       n - n0 < GEMM_NB ? n - n0 : GEMM_NB, panel, row);
    }
    bool ok = panel && row;
    if (!ok)
        err_set(e, ERR_MEMORY, "gemm step %d: out of memory for a %lld x %d panel", step,
                (long long)k, GEMM_NB);
    free(panel);
    free(row);
    return ok;
}

/* ---------------------------------------------------------------- attention */

static double op_at(const Operand *o, int64_t off, int64_t r, int64_t c)
{
    return dtype_load(o->dt, o->base, off + r * o->rs + c * o->cs);
}

/* One query row in f64, as the interpreter's attention: scores against every key (causal:
 * keys past the query hidden), softmax, the weighted sum of V's rows. */
static void attend(const Attention *a, const Operand op[7], const int64_t off[7], int64_t i,
                   int64_t tk, double *score)
{
    double most = -INFINITY, sum = 0;
    for (int64_t j = 0; j < tk; j++) {
        double dot = 0;
        for (int64_t c = 0; c < a->d; c++)
            dot += dtype_load(op[0].dt, op[0].base, off[0] + i * op[0].rs + c * op[0].cs) *
                   dtype_load(op[1].dt, op[1].base, off[1] + j * op[1].rs + c * op[1].cs);
        double biased = dot * a->scale + (a->has_bias ? op_at(&op[4], off[4], i, j) : 0);
        score[j] = a->causal && j > i ? -INFINITY : biased;
        most = score[j] > most ? score[j] : most;
    }
    for (int64_t j = 0; j < tk; j++)
        sum += score[j] = exp(score[j] - most);
    if (a->writes_lse)
        dtype_store(op[6].dt, op[6].base, off[6] + i * op[6].rs,
                    most > -INFINITY ? most + log(sum) : -INFINITY);
    for (int64_t c = 0; c < a->dv; c++) {
        double acc = 0;
        for (int64_t j = 0; j < tk; j++)
            acc += score[j] * dtype_load(op[2].dt, op[2].base, off[2] + j * op[2].rs + c * op[2].cs);
        dtype_store(op[3].dt, op[3].base, off[3] + i * op[3].rs + c * op[3].cs, acc / sum);
    }
}

/* Query i's scaled scores (causal: -inf past it); their log-sum-exp. */
static double scores_of(const Attention *a, const Operand *op, const int64_t *off, int64_t i,
                        int64_t tk, double *score)
{
    double most = -INFINITY, sum = 0;
    for (int64_t j = 0; j < tk; j++) {
        double dot = 0;
        for (int64_t c = 0; c < a->d; c++)
            dot += op_at(&op[0], off[0], i, c) * op_at(&op[1], off[1], j, c);
        score[j] = a->causal && j > i ? -INFINITY : dot * a->scale;
        most = score[j] > most ? score[j] : most;
    }
    for (int64_t j = 0; most > -INFINITY && j < tk; j++)
        sum += exp(score[j] - most);
    return most > -INFINITY ? most + log(sum) : -INFINITY;
}

/* The backward of one batch element, as ir/ops_attention.c defines it, into acc (dQ's
 * tq x d, then dK's and dV's tk x d), then stored in o's three parts. */
static void backward_head(const Attention *a, const Operand *op, const int64_t *off,
                          int64_t tq, int64_t tk, int64_t part, double *score, double *acc)
{
    int64_t d = a->d;
    double *dq = acc, *dk = acc + tq * d, *dv = dk + tk * d;
    for (int64_t x = 0; x < (tq + 2 * tk) * d; x++)
        acc[x] = 0;
    for (int64_t i = 0; i < tq; i++) {
        double di = 0, lse = op_at(&op[6], off[6], i, 0);
        for (int64_t c = 0; c < d; c++)
            di += op_at(&op[5], off[5], i, c) * op_at(&op[4], off[4], i, c);
        scores_of(a, op, off, i, tk, score);
        for (int64_t j = 0; j < tk; j++) {
            double pr = score[j] == -INFINITY ? 0 : exp(score[j] - lse), dp = 0;
            for (int64_t c = 0; c < d; c++) {
                double g = op_at(&op[5], off[5], i, c);
                dp += g * op_at(&op[2], off[2], j, c);
                dv[j * d + c] += pr * g;
            }
            double ds = pr * (dp - di) * a->scale;
            for (int64_t c = 0; c < d; c++) {
                dq[i * d + c] += ds * op_at(&op[1], off[1], j, c);
                dk[j * d + c] += ds * op_at(&op[0], off[0], i, c);
            }
        }
    }
    const double *src[3] = {dq, dk, dv};
    const int64_t rows[3] = {tq, tk, tk};
    for (int w = 0; w < 3; w++)
        for (int64_t r = 0; r < rows[w]; r++)
            for (int64_t c = 0; c < d; c++)
                dtype_store(op[3].dt, op[3].base, off[3] + w * part + r * op[3].rs + c * op[3].cs,
                            src[w][r * d + c]);
}

static void attend_batch(const Attention *a, const Operand *op, const int64_t *off, int64_t tq,
                         int64_t tk, int64_t part, double *score, double *acc)
{
    if (a->kind == ATTN_BACKWARD) {
        backward_head(a, op, off, tq, tk, part, score, acc);
        return;
    }
    for (int64_t i = 0; i < tq; i++) {
        if (a->kind == ATTN_LSE)
            dtype_store(op[3].dt, op[3].base, off[3] + i * op[3].rs,
                        scores_of(a, op, off, i, tk, score));
        else
            attend(a, op, off, i, tk, score);
    }
}

static bool eval_attention(const Program *p, int step, void *const *bufs, const SymBind *sb,
                           Err *e)
{
    const Attention *a = &p->step[step].attn;
    int64_t ext[COIL_MAX_RANK], nbt = 1, tq = dim_value(a->tq, sb), tk = dim_value(a->tk, sb);
    for (int d = 0; d < a->nbatch; d++)
        nbt *= ext[d] = dim_value(a->batch[d], sb);
    bool back = a->kind == ATTN_BACKWARD, bias = a->kind == ATTN_FORWARD && a->has_bias;
    int nop = back ? 7 : bias ? 5 : 4; /* the forward's bias takes the fifth place */
    int64_t part = back ? dim_value(a->part, sb) : 0;
    const GemmOperand *go[7] = {&a->q, &a->k, &a->v, &a->o, bias ? &a->bias : &a->fo, &a->dout,
                                &a->lse};
    const int64_t rows[7] = {tq, tk, tk, back ? 3 * tq : tq, tq, tq, tq};
    const int64_t cols[7] = {a->d, a->d, a->dv, a->kind == ATTN_LSE ? 1 : a->dv,
                             bias ? tk : a->dv, a->dv, 1};
    Operand op[7] = {{0}};
    for (int i = 0; i < 7; i++) /* a forward's log-sum-exp goes to lse's place */
        if ((i < nop || (i == 6 && a->writes_lse)) &&
            !gemm_operand(p, step, (bias ? "QKVOBGL" : "QKVOFGL")[i], go[i], a->nbatch, ext,
                          rows[i], cols[i], bufs, sb, &op[i], e))
            return false;
    double *score = malloc(((size_t)(tk > 0 ? tk : 1)) * sizeof *score);
    double *acc = back ? malloc((size_t)((tq + 2 * tk) * a->d + 1) * sizeof *acc) : NULL;
    bool ok = score && (acc || !back);
    for (int64_t bi = 0; ok && bi < nbt; bi++) {
        int64_t off[7], rem = bi;
        for (int o = 0; o < 7; o++)
            off[o] = op[o].off;
        for (int d = a->nbatch - 1; d >= 0; d--) {
            for (int o = 0; o < 7; o++)
                off[o] += rem % ext[d] * op[o].bs[d];
            rem /= ext[d];
        }
        attend_batch(a, op, off, tq, tk, part, score, acc);
    }
    if (!ok)
        err_set(e, ERR_MEMORY, "attention step %d: out of memory for %lld scores", step,
                (long long)tk);
    free(score);
    free(acc);
    return ok;
}

/* ---------------------------------------------------------------- programs */

/* The steps but those in skip (range steps whose index is proven in range), then the
 * range steps' results against their bounds. */
static bool run_steps(const Program *p, void *const *bufs, const SymBind *sb, const bool *skip,
                      Err *e)
{
    for (int s = 0; s < p->nstep; s++) {
        const Step *st = &p->step[s];
        if (skip[s])
            continue;
        bool ok = st->kind == STEP_KERNEL  ? eval_kernel(p, st->kernel, bufs, sb, e)
                : st->kind == STEP_ATTENTION ? eval_attention(p, s, bufs, sb, e)
                  : eval_gemm(p, s, bufs, sb, e) &&
                        (st->gemm.epilogue < 0 || eval_kernel(p, st->gemm.epilogue, bufs, sb, e));
        if (!ok)
            return false;
    }
    for (int s = 0; s < p->nstep; s++) {
        int b = skip[s] ? -1 : range_step_buffer(p, s);
        if (b >= 0 && !index_bounds_after(p, b, bufs[b], sb, e))
            return false;
    }
    return true;
}

/* The base of an input, parameter or output buffer: its tensor, which must hold the
 * buffer's dtype and element count. */
static bool bind_io(const Buffer *buf, int b, const Tensor *t, int count, int64_t numel, Err *e)
{
    static const char *const kind[] = {"input", "parameter", "output"};
    if (buf->index < 0 || buf->index >= count) {
        err_set(e, ERR_INPUT, "program buffer %d '%s' names %s %d of %d", b, buf->name,
                kind[buf->kind], buf->index, count);
        return false;
    }
    t += buf->index;
    if (t->dt == buf->dt && tensor_numel(t) == numel && t->data)
        return true;
    char tb[256];
    err_set(e, ERR_INPUT, "program buffer %d '%s' (%s, %lld elements) disagrees with %s %s",
            b, buf->name, dtype_info[buf->dt].name, (long long)numel, kind[buf->kind],
            tensor_fmt(t, tb, sizeof tb));
    return false;
}

/* A temporary (zeroed) or a constant (its data in the buffer's dtype), owned here. */
static void *alloc_owned(const Buffer *buf, int64_t numel, Err *e)
{
    if (numel < 0 || numel > (INT64_C(1) << 40) ||
        (buf->kind == BUF_CONST && (!dim_is_static(buf->numel) || (numel > 0 && !buf->data)))) {
        err_set(e, ERR_INPUT, "buffer '%s': %lld elements %s", buf->name, (long long)numel,
                buf->kind == BUF_CONST ? "and no static data" : "is out of range");
        return NULL;
    }
    void *d = calloc((size_t)(numel > 0 ? numel : 1), (size_t)dtype_info[buf->dt].size);
    if (!d)
        err_set(e, ERR_MEMORY, "out of memory for buffer '%s' (%lld elements)", buf->name,
                (long long)numel);
    for (int64_t i = 0; d && buf->kind == BUF_CONST && i < numel; i++)
        dtype_store(buf->dt, d, i, buf->data[i]);
    return d;
}

static bool bind_buffers(const Program *p, const Tensor *const *io, const int *count,
                         const SymBind *sb, void **bufs, Err *e)
{
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        int64_t numel = dim_value(buf->numel, sb);
        if ((unsigned)buf->dt >= DT_COUNT || (unsigned)buf->kind > BUF_TEMP) {
            err_set(e, ERR_INPUT, "program buffer %d '%s' has no such kind or dtype", b, buf->name);
            return false;
        }
        if (buf->kind <= BUF_OUTPUT) {
            if (!bind_io(buf, b, io[buf->kind], count[buf->kind], numel, e))
                return false;
            bufs[b] = io[buf->kind][buf->index].data;
        } else if (!(bufs[b] = alloc_owned(buf, numel, e))) {
            return false;
        }
    }
    return true;
}

bool loop_eval(const Program *p, const Tensor *inputs, const Tensor *params, Tensor *outputs,
               Err *e)
{
    return loop_eval_at(p, 0, inputs, params, outputs, e);
}

bool loop_eval_at(const Program *p, uint64_t step, const Tensor *inputs, const Tensor *params,
                  Tensor *outputs, Err *e)
{
    const Graph *g = p->graph;
    if (!g) {
        err_set(e, ERR_INPUT, "loop_eval: the program has no graph to take its signature from");
        return false;
    }
    SymBind sb;
    int nparam = graph_params(g, NULL);
    if (!bind_inputs(g, inputs, &sb, e) || !check_param_tensors(g, params, &sb, e) ||
        !program_check_inputs(p, inputs, &sb, e) || !alloc_output_tensors(g, &sb, outputs, e))
        return false;
    sb.val[COIL_SYM_RNG_STEP] = (int64_t)step;
    const Tensor *io[] = {[BUF_INPUT] = inputs, [BUF_PARAM] = params, [BUF_OUTPUT] = outputs};
    int count[] = {[BUF_INPUT] = g->ninput, [BUF_PARAM] = nparam, [BUF_OUTPUT] = g->noutput};
    void **bufs = calloc((size_t)p->nbuf + 1, sizeof *bufs);
    bool *skip = calloc((size_t)p->nstep + 1, sizeof *skip);
    if (!bufs || !skip)
        err_set(e, ERR_MEMORY, "out of memory binding %d buffers", p->nbuf);
    bool ok = bufs && skip && index_bounds_before(p, &sb, skip, e) &&
              bind_buffers(p, io, count, &sb, bufs, e) && run_steps(p, bufs, &sb, skip, e);
    for (int b = 0; bufs && b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_CONST || p->buf[b].kind == BUF_TEMP)
            free(bufs[b]);
    free(bufs);
    free(skip);
    for (int i = 0; !ok && i < g->noutput; i++)
        tensor_free(&outputs[i]);
    return ok;
}
