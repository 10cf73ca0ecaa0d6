/* ops_reduce.c — reductions over a set of axes (sum, mean, max, min) and argmax:
 * their type rules and reference evaluation, accumulating in f64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops.h"

/* The axes a node folds: argmax's single `axis`, or the `axes` list of the others. */
static int node_axes(const Node *n, const int64_t **axes)
{
    if (n->op == OP_ARGMAX) {
        *axes = &node_attr(n, "axis")->i;
        return 1;
    }
    const Attr *a = node_attr(n, "axes");
    *axes = a->ints;
    return a->n;
}

/* The folded axes as a bit mask over the operand's dims; an empty list means all of them.
 * `shape` names the operand in messages. */
static bool reduce_mask(const Node *n, int rank, const char *shape, unsigned *mask, Err *e)
{
    const char *op = op_info[n->op].name;
    const int64_t *axes;
    int naxes = node_axes(n, &axes);
    *mask = naxes == 0 ? (1u << rank) - 1 : 0;
    for (int i = 0; i < naxes; i++) {
        int axis;
        if (!axis_norm(axes[i], rank, &axis)) {
            err_set(e, ERR_INPUT, "%s: axis %lld is out of range for %s (rank %d)", op,
                    (long long)axes[i], shape, rank);
            return false;
        }
        if (*mask >> axis & 1) {
            err_set(e, ERR_INPUT, "%s: axis %lld repeats dimension %d of %s; list each axis once",
                    op, (long long)axes[i], axis, shape);
            return false;
        }
        *mask |= 1u << axis;
    }
    return true;
}

static void reduced_type(const Type *in, unsigned mask, bool keepdim, Type *out)
{
    Type r = {.dt = in->dt};
    for (int d = 0; d < in->rank; d++)
        if (!(mask >> d & 1))
            r.dim[r.rank++] = in->dim[d];
        else if (keepdim)
            r.dim[r.rank++] = dim_static(1);
    *out = r;
}

/* Shared by reductions and argmax: validate the axes, then shape the result. */
static bool infer_folded(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    char buf[256];
    unsigned mask;
    if (!reduce_mask(n, in->rank, type_fmt(g, in, buf, sizeof buf), &mask, e))
        return false;
    reduced_type(in, mask, node_int(n, "keepdim") != 0, out);
    return true;
}

/* A sum of bools or a mean of integers has no faithful result in the operand's dtype. */
static const char *dtype_needed(int op, DType dt)
{
    if (op == OP_MEAN && !dtype_info[dt].is_float)
        return "a float dtype";
    if (op == OP_SUM && dt == DT_BOOL)
        return "a numeric dtype";
    return NULL;
}

bool infer_reduce(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const char *need = dtype_needed(n->op, in[0].dt);
    if (need) {
        char buf[256];
        err_set(e, ERR_INPUT, "%s: operand %s is not %s; cast it first", op_info[n->op].name,
                type_fmt(g, &in[0], buf, sizeof buf), need);
        return false;
    }
    return infer_folded(g, n, &in[0], out, e);
}

bool infer_argmax(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!infer_folded(g, n, &in[0], out, e))
        return false;
    out->dt = DT_I64;
    return true;
}

/* ---------------------------------------------------------------- evaluation */

/* Offsets into t of every coordinate over the dims in `axes` (the others held at 0),
 * in row-major order; *count receives how many. malloc'd, NULL when out of memory. */
static int64_t *axis_offsets(const ITensor *t, unsigned axes, int64_t *count)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        if (axes >> d & 1)
            n *= t->shape[d];
    int64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    for (int64_t i = 0; off && i < n; i++) {
        int64_t rem = i, o = 0, stride = 1;
        for (int d = t->rank - 1; d >= 0; d--) {
            if (axes >> d & 1) {
                o += rem % t->shape[d] * stride;
                rem /= t->shape[d];
            }
            stride *= t->shape[d];
        }
        off[i] = o;
    }
    *count = n;
    return off;
}

/* A reducer folds the `count` elements x[off[j]] into one value. */
typedef double (*Reducer)(const double *x, const int64_t *off, int64_t count);

/* Neumaier's compensated sum: f64 plus a running error term. Once the sum is not
 * finite the compensation is meaningless (inf - inf), so the plain sum is returned. */
static double red_sum(const double *x, const int64_t *off, int64_t count)
{
    double sum = 0, comp = 0;
    for (int64_t j = 0; j < count; j++) {
        double v = x[off[j]], t = sum + v;
        comp += fabs(sum) >= fabs(v) ? (sum - t) + v : (v - t) + sum;
        sum = t;
    }
    return isfinite(sum) ? sum + comp : sum;
}

/* An empty mean is 0/0 = NaN, as in numpy. */
static double red_mean(const double *x, const int64_t *off, int64_t count)
{
    return red_sum(x, off, count) / (double)count;
}

/* max and min have no identity: start from the first element (callers ensure one). */
static double red_fold(double (*combine)(double, double), const double *x, const int64_t *off,
                       int64_t count)
{
    double acc = x[off[0]];
    for (int64_t j = 1; j < count; j++)
        acc = combine(acc, x[off[j]]);
    return acc;
}

/* s_maximum/s_minimum: NaN propagates, as in numpy's max and min. */
static double red_max(const double *x, const int64_t *off, int64_t count)
{
    return red_fold(s_maximum, x, off, count);
}

static double red_min(const double *x, const int64_t *off, int64_t count)
{
    return red_fold(s_minimum, x, off, count);
}

/* The first position of the maximum; a NaN counts as the maximum (numpy). */
static double red_argmax(const double *x, const int64_t *off, int64_t count)
{
    int64_t best = 0;
    for (int64_t j = 1; j < count && !isnan(x[off[best]]); j++)
        if (x[off[j]] > x[off[best]] || isnan(x[off[j]]))
            best = j;
    return (double)best;
}

/* needs_elements: the reducer has no identity, so an empty axis is an error. */
static const struct {
    Reducer fn;
    bool needs_elements;
} reducers[OP_COUNT] = {
    [OP_SUM] = {red_sum, false},     [OP_MEAN] = {red_mean, false},
    [OP_MAX] = {red_max, true},      [OP_MIN] = {red_min, true},
    [OP_ARGMAX] = {red_argmax, true},
};

/* Kept axes enumerate the results in row-major order (keepdim's 1s change nothing);
 * the folded axes' offsets are computed once and reused from each result's base. */
static bool eval_folded(const Node *n, const ITensor *x, ITensor *out, Err *e)
{
    const char *op = op_info[n->op].name;
    unsigned mask;
    if (!reduce_mask(n, x->rank, "the operand", &mask, e))
        return false;
    int64_t nfold, nkeep;
    int64_t *fold = axis_offsets(x, mask, &nfold), *keep = axis_offsets(x, ~mask, &nkeep);
    bool ok = fold && keep && nkeep == out->n;
    if (!ok)
        err_set(e, ERR_INPUT, "%s: %s", op,
                fold && keep ? "the result's size disagrees with the operand" : "out of memory");
    else if (nfold == 0 && nkeep > 0 && reducers[n->op].needs_elements) {
        err_set(e, ERR_INPUT, "%s: cannot reduce over an empty dimension (it has no identity)", op);
        ok = false;
    }
    for (int64_t o = 0; ok && o < nkeep; o++)
        out->d[o] = reducers[n->op].fn(x->d + keep[o], fold, nfold);
    free(fold);
    free(keep);
    return ok;
}

bool eval_reduce(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    return eval_folded(n, &in[0], out, e);
}

bool eval_argmax(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    return eval_folded(n, &in[0], out, e);
}

/* One FLOP per element read: each is combined into an accumulator once. */
double flops_reduce(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)out;
    return (double)in[0].n;
}
