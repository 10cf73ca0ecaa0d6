/* index_bounds.c — the range analysis of indices (what values a gather's index takes at a
 * run's sizes) and the checks every runner makes with it, before and after a run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/index_bounds.h"
#include "passes/fuse.h"

const char index_range_buffer[] = "index.range";

/* Above this magnitude a double no longer holds every integer: an integer range there is
 * not known exactly. */
#define EXACT_INT 9007199254740992.0

/* ---------------------------------------------------------------- uses */

bool index_use(const Graph *g, int node, int *index, Dim *bound)
{
    const Node *n = &g->node[node];
    if (n->op == OP_INDEX_CHECK) {
        *index = n->in[0];
        *bound = dim_static(node_int(n, "bound"));
        return true;
    }
    if (n->op == OP_INDEX_ADD) { /* adds at rows of axis 0 of its base */
        *index = n->in[1];
        *bound = g->node[n->in[0]].type.dim[0];
        return true;
    }
    if (n->op != OP_GATHER)
        return false;
    const Type *table = &g->node[n->in[0]].type;
    int axis;
    if (!axis_norm(node_int(n, "axis"), table->rank, &axis))
        return false;
    *index = n->in[1];
    *bound = table->dim[axis];
    return true;
}

bool *value_depends_on_data(const Graph *g)
{
    bool *dep = calloc((size_t)g->nnode + 1, sizeof *dep);
    for (int i = 0; dep && i < g->nnode; i++) {
        const Node *n = &g->node[i];
        dep[i] = n->op == OP_INPUT || n->op == OP_PARAM || (op_info[n->op].flags & OPF_RANDOM);
        for (int j = 0; j < n->nin && !dep[i]; j++)
            dep[i] = dep[n->in[j]];
    }
    return dep;
}

bool index_is_checked_input(const Graph *g, int index)
{
    while (op_info[g->node[index].op].flags & OPF_VIEW || g->node[index].op == OP_CAST)
        index = g->node[index].in[0];
    return g->node[index].op == OP_INPUT;
}

bool index_needs_range_step(const Graph *g, int node, const bool *dep)
{
    int index;
    Dim bound;
    return index_use(g, node, &index, &bound) && dep[index] && !index_is_checked_input(g, index);
}

/* ---------------------------------------------------------------- ranges */

static ValueRange unknown(void) { return (ValueRange){0}; }

static ValueRange exact(double lo, double hi)
{
    return (ValueRange){.known = true, .lo_hit = true, .hi_hit = true, .lo = lo, .hi = hi};
}

static ValueRange within(double lo, double hi)
{
    return (ValueRange){.known = true, .lo = lo, .hi = hi};
}

/* Every value of x through a monotone f, given f(x.lo) and f(x.hi): an increasing f keeps
 * x's exact ends, a decreasing one swaps them. */
static ValueRange mapped(const ValueRange *x, double f_lo, double f_hi, bool increasing)
{
    ValueRange r = {.known = true};
    r.lo = increasing ? f_lo : f_hi, r.hi = increasing ? f_hi : f_lo;
    r.lo_hit = increasing ? x->lo_hit : x->hi_hit;
    r.hi_hit = increasing ? x->hi_hit : x->lo_hit;
    return r;
}

/* Every element the same value (so a broadcast partner sees each of its own values with it). */
static bool singleton(const ValueRange *x) { return x->known && !x->empty && x->lo == x->hi; }

/* The range of every value of dtype dt: an integer tensor never holds more (i64's upper
 * end is 2^63, the double next to 2^63 - 1). */
static ValueRange dtype_range(DType dt)
{
    static const double lo[DT_COUNT] = {[DT_I8] = -128, [DT_I32] = -2147483648.0,
                                        [DT_I64] = -9223372036854775808.0},
                        hi[DT_COUNT] = {[DT_I8] = 127, [DT_I32] = 2147483647.0,
                                        [DT_I64] = 9223372036854775808.0, [DT_BOOL] = 1};
    return dtype_info[dt].is_float ? unknown() : within(lo[dt], hi[dt]);
}

/* Ops whose values are some of their operands' (or a constant's): they cannot leave the
 * dtype's range, so an integer range needs no check for wrapping. */
static bool selects(int op)
{
    return (op_info[op].flags & OPF_VIEW) || op == OP_CONCAT || op == OP_GATHER ||
           op == OP_WHERE || op == OP_MAXIMUM || op == OP_MINIMUM || op == OP_MAX ||
           op == OP_MIN || op == OP_INDEX_CHECK;
}

/* The values' range as the node's dtype stores them: floats round (monotone, so exact ends
 * stay exact), integers truncate, and arithmetic that may leave the dtype's range (wrap
 * around, or pass 2^53 where doubles no longer count exactly) gives the dtype's range;
 * bools are 0 or 1. An integer's range is always known: its dtype's at worst. */
static ValueRange fit_dtype(DType dt, ValueRange r, bool arithmetic)
{
    if (r.known && r.empty)
        return r;
    if (dtype_info[dt].is_float) {
        if (!r.known)
            return r;
        r.lo = dtype_round(dt, r.lo), r.hi = dtype_round(dt, r.hi);
        return isfinite(r.lo) && isfinite(r.hi) ? r : unknown();
    }
    ValueRange all = dtype_range(dt);
    double lo = arithmetic ? fmax(all.lo, -EXACT_INT) : all.lo;
    double hi = arithmetic ? fmin(all.hi, EXACT_INT) : all.hi;
    if (!r.known || isnan(r.lo) || isnan(r.hi))
        return all;
    r.lo = trunc(r.lo), r.hi = trunc(r.hi); /* integer results of float arithmetic truncate */
    return r.lo >= lo && r.hi <= hi ? r : all;
}

static double apply2(int op, double a, double b)
{
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_MAXIMUM: return fmax(a, b);
    default: return fmin(a, b); /* OP_MINIMUM */
    }
}

/* f(v) = op(v, c) (c_second) or op(c, v), as a map of x's values: monotone for each op here. */
static ValueRange with_constant(int op, const ValueRange *x, double c, bool c_second)
{
    double f_lo = c_second ? apply2(op, x->lo, c) : apply2(op, c, x->lo);
    double f_hi = c_second ? apply2(op, x->hi, c) : apply2(op, c, x->hi);
    bool increasing = true;
    if (op == OP_SUB)
        increasing = c_second;
    else if (op == OP_MUL)
        increasing = c >= 0;
    else if (op == OP_DIV)
        increasing = c_second ? c > 0 : c < 0; /* c / v with v of one sign falls for c > 0 */
    return mapped(x, f_lo, f_hi, increasing);
}

/* add, sub, mul, div, maximum, minimum: each monotone in either operand with the other
 * fixed (div with a divisor of one sign), so the corners bound it. Exact ends survive a
 * constant partner, and for maximum (minimum) the greater (lesser) end of either side. */
static ValueRange arith(int op, const ValueRange *a, const ValueRange *b)
{
    if (!a->known || !b->known || (op == OP_DIV && b->lo <= 0 && b->hi >= 0))
        return unknown();
    if (singleton(b))
        return with_constant(op, a, b->lo, true);
    if (singleton(a))
        return with_constant(op, b, a->lo, false);
    double c[4] = {apply2(op, a->lo, b->lo), apply2(op, a->lo, b->hi), apply2(op, a->hi, b->lo),
                   apply2(op, a->hi, b->hi)};
    ValueRange r = within(fmin(fmin(c[0], c[1]), fmin(c[2], c[3])),
                          fmax(fmax(c[0], c[1]), fmax(c[2], c[3])));
    if (op == OP_MAXIMUM)
        r.hi_hit = (a->hi >= b->hi && a->hi_hit) || (b->hi >= a->hi && b->hi_hit);
    if (op == OP_MINIMUM)
        r.lo_hit = (a->lo <= b->lo && a->lo_hit) || (b->lo <= a->lo && b->lo_hit);
    return r;
}

/* A comparison is certain when the ranges do not overlap the wrong way. */
static ValueRange compare(int op, const ValueRange *a, const ValueRange *b)
{
    if (!a->known || !b->known)
        return within(0, 1);
    bool yes = false, no = false;
    switch (op) {
    case OP_LT: yes = a->hi < b->lo, no = a->lo >= b->hi; break;
    case OP_LE: yes = a->hi <= b->lo, no = a->lo > b->hi; break;
    case OP_GT: yes = a->lo > b->hi, no = a->hi <= b->lo; break;
    case OP_GE: yes = a->lo >= b->hi, no = a->hi < b->lo; break;
    case OP_EQ:
    case OP_NE: {
        bool same = singleton(a) && singleton(b) && a->lo == b->lo;
        bool apart = a->hi < b->lo || b->hi < a->lo;
        yes = op == OP_EQ ? same : apart, no = op == OP_EQ ? apart : same;
        break;
    }
    default: break;
    }
    return yes ? exact(1, 1) : no ? exact(0, 0) : within(0, 1);
}

static ValueRange unary(int op, const ValueRange *x)
{
    if (!x->known)
        return unknown();
    switch (op) {
    case OP_NEG: return mapped(x, -x->lo, -x->hi, false);
    case OP_RELU: return mapped(x, fmax(x->lo, 0), fmax(x->hi, 0), true);
    case OP_ABS:
        if (x->lo >= 0)
            return *x;
        if (x->hi <= 0)
            return mapped(x, -x->lo, -x->hi, false);
        ValueRange r = within(0, fmax(-x->lo, x->hi));
        r.hi_hit = -x->lo >= x->hi ? x->lo_hit : x->hi_hit;
        return r;
    default: return unknown();
    }
}

static ValueRange cast_to(DType dt, const ValueRange *x)
{
    if (!x->known)
        return dt == DT_BOOL ? within(0, 1) : unknown();
    if (dt == DT_BOOL) /* v != 0 */
        return x->lo > 0 || x->hi < 0 ? exact(1, 1) : singleton(x) ? exact(0, 0) : within(0, 1);
    return *x; /* truncation or rounding: fit_dtype applies it */
}

static ValueRange union_of(const ValueRange *a, const ValueRange *b)
{
    if (a->empty)
        return *b;
    if (b->empty)
        return *a;
    if (!a->known || !b->known)
        return unknown();
    ValueRange r = within(fmin(a->lo, b->lo), fmax(a->hi, b->hi));
    r.lo_hit = (a->lo == r.lo && a->lo_hit) || (b->lo == r.lo && b->lo_hit);
    r.hi_hit = (a->hi == r.hi && a->hi_hit) || (b->hi == r.hi && b->hi_hit);
    return r;
}

/* The elements over which reduction n (of operand type t at sb) folds each result. */
static double reduced_count(const Node *n, const int64_t *dims, int rank)
{
    unsigned mask = reduce_axes(n, rank);
    double c = 1;
    for (int d = 0; d < rank; d++)
        if (mask >> d & 1)
            c *= (double)dims[d];
    return c;
}

static ValueRange reduction(const Node *n, const ValueRange *x, const int64_t *dims, int rank)
{
    double count = reduced_count(n, dims, rank);
    if (count == 0) /* an empty sum is 0; an empty max, mean or argmax has no value here */
        return n->op == OP_SUM ? exact(0, 0) : unknown();
    if (n->op == OP_ARGMAX) {
        int axis;
        return axis_norm(node_int(n, "axis"), rank, &axis) ? within(0, (double)dims[axis] - 1)
                                                           : unknown();
    }
    if (!x->known)
        return unknown();
    if (singleton(x))
        return n->op == OP_SUM ? exact(x->lo * count, x->lo * count) : *x;
    ValueRange r = n->op == OP_SUM ? within(x->lo * count, x->hi * count) : within(x->lo, x->hi);
    r.hi_hit = n->op == OP_MAX && x->hi_hit; /* the row holding the greatest element */
    r.lo_hit = n->op == OP_MIN && x->lo_hit;
    return r;
}

static ValueRange leaf(const Node *n, const int64_t *dims)
{
    switch (n->op) {
    case OP_IOTA: {
        int axis;
        if (!axis_norm(node_int(n, "axis"), n->type.rank, &axis))
            return unknown();
        return exact(0, (double)dims[axis] - 1);
    }
    case OP_FULL: {
        double v = dtype_round(n->type.dt, node_float(n, "value")); /* as the dtype holds it */
        return exact(v, v);
    }
    case OP_CONSTANT: {
        const Attr *v = node_attr(n, "value");
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < v->n; i++) {
            double x = dtype_round(n->type.dt, v->data[i]);
            lo = fmin(lo, x), hi = fmax(hi, x);
        }
        return v->n > 0 ? exact(lo, hi) : unknown();
    }
    case OP_RAND: return within(0, 1);
    default: return unknown(); /* inputs and parameters: data */
    }
}

/* Node id's range from its operands' (r), at sb. */
static ValueRange node_range(const Graph *g, int id, const ValueRange *r, const SymBind *sb)
{
    const Node *n = &g->node[id];
    int64_t dims[COIL_MAX_RANK], in_dims[COIL_MAX_RANK];
    if (!type_resolve(&n->type, sb, dims))
        return unknown();
    for (int d = 0; d < n->type.rank; d++)
        if (dims[d] == 0)
            return (ValueRange){.known = true, .empty = true};
    if (n->nin == 0)
        return leaf(n, dims);
    const ValueRange *a = &r[n->in[0]], *b = n->nin > 1 ? &r[n->in[1]] : NULL;
    if (n->op == OP_CONCAT) {
        ValueRange u = {.known = true, .empty = true};
        for (int j = 0; j < n->nin; j++)
            u = union_of(&u, &r[n->in[j]]);
        return u;
    }
    if (op_info[n->op].flags & OPF_REDUCE) {
        const Type *t = &g->node[n->in[0]].type;
        return type_resolve(t, sb, in_dims) ? reduction(n, a, in_dims, t->rank) : unknown();
    }
    for (int j = 0; j < n->nin; j++) /* a value with elements has operands with elements */
        if (r[n->in[j]].empty && !(n->op == OP_GATHER && j == 0))
            return unknown();
    switch (n->op) {
    case OP_TRANSPOSE: case OP_RESHAPE: case OP_EXPAND: return *a;
    case OP_SLICE: return a->known ? within(a->lo, a->hi) : unknown();
    case OP_GATHER: return a->known && !a->empty ? within(a->lo, a->hi) : unknown();
    case OP_CAST: return cast_to(n->type.dt, a);
    case OP_WHERE: {
        if (singleton(a)) /* one branch taken everywhere */
            return a->lo != 0 ? *b : r[n->in[2]];
        ValueRange u = union_of(b, &r[n->in[2]]);
        u.lo_hit = u.hi_hit = false; /* which elements each branch keeps is not known */
        return u;
    }
    case OP_INDEX_CHECK: { /* past the check, every value is in [0, bound) */
        double last = (double)node_int(n, "bound") - 1;
        if (a->known && a->lo >= 0 && a->hi <= last)
            return *a;
        return last >= 0 ? within(0, last) : unknown();
    }
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MAXIMUM: case OP_MINIMUM:
        return arith(n->op, a, b);
    case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE:
        return compare(n->op, a, b);
    default:
        return n->nin == 1 && op_info[n->op].scalar1 ? unary(n->op, a) : unknown();
    }
}

/* need[i] for every producer of a node already needed (ids are in topological order). */
static void close_over_producers(const Graph *g, bool *need, int last)
{
    for (int i = last; i >= 0; i--)
        for (int j = 0; need[i] && j < g->node[i].nin; j++)
            need[g->node[i].in[j]] = true;
}

/* r[i] for every needed node, in order. */
static void ranges_of(const Graph *g, const bool *need, int last, const SymBind *sb,
                      ValueRange *r)
{
    for (int i = 0; i <= last; i++)
        if (need[i])
            r[i] = fit_dtype(g->node[i].type.dt, node_range(g, i, r, sb),
                             !selects(g->node[i].op));
}

ValueRange value_range(const Graph *g, int node, const SymBind *sb)
{
    bool *need = calloc((size_t)node + 1, sizeof *need);
    ValueRange *r = malloc(((size_t)node + 1) * sizeof *r), v = unknown();
    if (need && r) {
        need[node] = true;
        close_over_producers(g, need, node);
        ranges_of(g, need, node, sb, r);
        v = r[node];
    }
    free(need);
    free(r);
    return v;
}

/* ---------------------------------------------------------------- exact values */

/* The values of an index computed from the sizes alone, by the interpreter's own kernels
 * over its producers: the range exactly (both ends hit), when the analysis was not
 * conclusive. An error in a producer (a gather out of range) is reported, located. */
static bool exact_range(const Graph *g, int node, const SymBind *sb, ValueRange *out, Err *e)
{
    bool *need = calloc((size_t)node + 1, sizeof *need);
    ITensor *val = calloc((size_t)node + 1, sizeof *val);
    bool ok = need && val;
    if (ok) {
        need[node] = true;
        close_over_producers(g, need, node);
    }
    for (int i = 0; ok && i <= node; i++) {
        const Node *n = &g->node[i];
        if (!need[i])
            continue;
        ITensor in[n->nin + 1];
        for (int j = 0; j < n->nin; j++)
            in[j] = val[n->in[j]];
        ok = interp_eval_node(g, i, in, sb, &val[i], e);
    }
    if (ok) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t k = 0; k < val[node].n; k++)
            lo = fmin(lo, val[node].d[k]), hi = fmax(hi, val[node].d[k]);
        *out = val[node].n ? exact(lo, hi) : (ValueRange){.known = true, .empty = true};
    } else if (err_ok(e)) {
        err_set(e, ERR_MEMORY, "out of memory checking the indices of node %d", node);
    }
    for (int i = 0; val && i <= node; i++)
        free(val[i].d);
    free(val);
    free(need);
    return ok;
}

/* ---------------------------------------------------------------- verdicts */

typedef enum Verdict { UNDECIDED, IN_RANGE, OUT_OF_RANGE } Verdict;

static Verdict verdict_of(const ValueRange *r, int64_t bound)
{
    if (r->empty)
        return IN_RANGE;
    if (!r->known)
        return UNDECIDED;
    double last = (double)bound - 1;
    if (r->lo >= 0 && r->hi <= last)
        return IN_RANGE;
    if ((r->hi > last && r->hi_hit) || (r->lo < 0 && r->lo_hit))
        return OUT_OF_RANGE;
    return UNDECIDED;
}

/* "gather: index 63 is out of range [0, 16) for axis 0", the start of every message. */
static int out_of_range_text(const Graph *g, int use, double lo, double hi, int64_t bound,
                             char *buf, size_t size)
{
    const Node *n = &g->node[use];
    double bad = hi > (double)bound - 1 ? hi : lo;
    int k = snprintf(buf, size, "%s: index %.0f is out of range [0, %lld)", op_info[n->op].name,
                     bad, (long long)bound);
    int axis;
    if (n->op == OP_INDEX_ADD)
        axis = 0;
    else if (n->op != OP_GATHER || !axis_norm(node_int(n, "axis"), g->node[n->in[0]].type.rank, &axis))
        axis = -1;
    if (axis >= 0 && k >= 0 && (size_t)k < size)
        k += snprintf(buf + k, size - (size_t)k, " for axis %d", axis);
    return k;
}

/* "B=2, T=64": the symbols bound at sb. */
static void sizes_text(const Graph *g, const SymBind *sb, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; s < g->nsym && k < size; s++)
        if (sb->known[s]) {
            int w = snprintf(buf + k, size - k, "%s%s=%lld", k ? ", " : "", g->sym[s],
                             (long long)sb->val[s]);
            k += w > 0 ? (size_t)w : 0;
        }
}

static bool report_static(const Graph *g, int use, const ValueRange *r, int64_t bound,
                          const SymBind *sb, Err *e)
{
    char head[256], sizes[256];
    out_of_range_text(g, use, r->lo, r->hi, bound, head, sizeof head);
    sizes_text(g, sb, sizes, sizeof sizes);
    err_at(e, g->node[use].loc, "%s: its indices take values in [%.0f, %.0f] at %s, found "
           "before anything ran (a sequence longer than the table it indexes?)", head, r->lo,
           r->hi, sizes[0] ? sizes : "these sizes");
    return false;
}

/* Use `use`'s verdict at sb from the ranges r; an index known from the sizes alone is
 * computed exactly when the ranges do not decide. */
static bool decide(const Graph *g, int use, const ValueRange *r, const bool *dep,
                   const SymBind *sb, Verdict *v, Err *e)
{
    int index;
    Dim bound;
    index_use(g, use, &index, &bound);
    for (int s = 0; s < g->nsym; s++)
        if ((bound.syms >> s & 1) && !sb->known[s]) {
            *v = UNDECIDED;
            return true;
        }
    int64_t rows = dim_eval(bound, sb->val);
    ValueRange vr = r[index];
    *v = verdict_of(&vr, rows);
    if (*v == UNDECIDED && !dep[index]) {
        if (!exact_range(g, index, sb, &vr, e))
            return false;
        *v = verdict_of(&vr, rows);
    }
    return *v != OUT_OF_RANGE || report_static(g, use, &vr, rows, sb, e);
}

int range_step_buffer(const Program *p, int s)
{
    const Step *st = &p->step[s];
    if (st->kind != STEP_KERNEL || st->kernel < 0 || st->kernel >= p->nkernel)
        return -1;
    const Kernel *k = &p->kernel[st->kernel];
    for (int i = 0; i < k->nstmt; i++) {
        int b = k->stmt[i].buf;
        if (k->stmt[i].kind != ST_STORE || b < 0 || b >= p->nbuf)
            continue;
        const Buffer *buf = &p->buf[b];
        int index;
        Dim bound;
        if (buf->kind == BUF_TEMP && strcmp(buf->name, index_range_buffer) == 0 &&
            buf->index >= 0 && buf->index < p->graph->nnode &&
            index_use(p->graph, buf->index, &index, &bound))
            return b;
    }
    return -1;
}

bool index_bounds_before(const Program *p, const SymBind *sb, bool *skip, Err *e)
{
    const Graph *g = p->graph;
    int index;
    Dim bound;
    bool *need = calloc((size_t)g->nnode + 1, sizeof *need);
    bool *dep = value_depends_on_data(g);
    Verdict *v = calloc((size_t)g->nnode + 1, sizeof *v);
    ValueRange *r = malloc(((size_t)g->nnode + 1) * sizeof *r);
    bool ok = need && dep && v && r;
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory checking the indices of '%s'", g->name);
    for (int i = 0; ok && i < g->nnode; i++)
        if (index_use(g, i, &index, &bound))
            need[index] = true;
    if (ok) {
        close_over_producers(g, need, g->nnode - 1);
        ranges_of(g, need, g->nnode - 1, sb, r);
    }
    for (int i = 0; ok && i < g->nnode; i++)
        if (index_use(g, i, &index, &bound))
            ok = decide(g, i, r, dep, sb, &v[i], e);
    for (int s = 0; s < p->nstep; s++) {
        int b = ok ? range_step_buffer(p, s) : -1;
        skip[s] = b >= 0 && v[p->buf[b].index] == IN_RANGE;
    }
    free(need);
    free(dep);
    free(v);
    free(r);
    return ok;
}

bool index_bounds_after(const Program *p, int b, const int64_t *minmax, const SymBind *sb,
                        Err *e)
{
    const Graph *g = p->graph;
    int use = p->buf[b].index, index;
    Dim bound;
    if (minmax[0] > minmax[1] || !index_use(g, use, &index, &bound))
        return true; /* no index at all */
    int64_t rows = dim_eval(bound, sb->val);
    if (minmax[0] >= 0 && minmax[1] < rows)
        return true;
    char head[256];
    out_of_range_text(g, use, (double)minmax[0], (double)minmax[1], rows, head, sizeof head);
    err_at(e, g->node[use].loc, "%s: its indices, computed in this run, took values in "
           "[%lld, %lld] (the kernels clamped them; the results are not valid)", head,
           (long long)minmax[0], (long long)minmax[1]);
    return false;
}
