/* ops_shape.c — contraction and data movement (matmul, transpose, reshape, expand, slice,
 * concat, gather): their shape rules on symbolic dims and their reference evaluation. */
#include <stdio.h>

#include "ops.h"

static const Dim static_one = {1, 0, 0};

TypeText type_text(const Graph *g, const Type *t)
{
    TypeText r;
    type_fmt(g, t, r.s, sizeof r.s);
    return r;
}

TypeText dim_text(const Graph *g, Dim d)
{
    TypeText r;
    dim_fmt(g, d, r.s, sizeof r.s);
    return r;
}

/* A symbolic dim meets only itself or a static 1: its size is unknown until run time. */
bool broadcast_dims(int ra, const Dim *a, int rb, const Dim *b, Dim *out, int *rank, int *bad,
                    Dim *da, Dim *db)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        *da = i >= r - ra ? a[i - (r - ra)] : static_one;
        *db = i >= r - rb ? b[i - (r - rb)] : static_one;
        if (dim_eq(*da, *db) || dim_eq(*db, static_one))
            out[i] = *da;
        else if (dim_eq(*da, static_one))
            out[i] = *db;
        else {
            *bad = i;
            return false;
        }
    }
    *rank = r;
    return true;
}

void batch_offsets(const ITensor *out, int64_t batch, const ITensor *in, int nin, int64_t *off)
{
    int nb = out->rank - 2;
    int64_t idx[COIL_MAX_RANK];
    for (int d = nb - 1; d >= 0; d--) {
        idx[d] = batch % out->shape[d];
        batch /= out->shape[d];
    }
    for (int k = 0; k < nin; k++) {
        ITensor lead = in[k]; /* its batch dims alone, for broadcast_offset */
        lead.rank -= 2;
        int64_t matrix = in[k].shape[in[k].rank - 2] * in[k].shape[in[k].rank - 1];
        off[k] = broadcast_offset(&lead, nb, idx) * matrix;
    }
}

/* Row-major successor of the multi-index idx within shape. */
static void index_next(int64_t *idx, const int64_t *shape, int rank)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return;
        idx[d] = 0;
    }
}

static int64_t prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= shape[d];
    return p;
}

/* An eval's axis attribute; infer has checked it, but eval may be handed any node. */
static bool eval_axis(const Node *n, int rank, int *axis, Err *e)
{
    if (axis_norm(node_int(n, "axis"), rank, axis))
        return true;
    err_set(e, ERR_INPUT, "%s: axis %lld is out of range for rank %d", op_info[n->op].name,
            (long long)node_int(n, "axis"), rank);
    return false;
}

static bool axis_out_of_range(const Graph *g, const Node *n, int64_t axis, const Type *t, Err *e)
{
    err_set(e, ERR_INPUT, "%s: axis %lld is out of range for %s (rank %d)", op_info[n->op].name,
            (long long)axis, type_text(g, t).s, t->rank);
    return false;
}

/* ---------------------------------------------------------------- matmul */

static bool matmul_operands_ok(const Graph *g, const Type *a, const Type *b, Err *e)
{
    TypeText ta = type_text(g, a), tb = type_text(g, b);
    if (a->rank < 2 || b->rank < 2)
        err_set(e, ERR_INPUT, "matmul: %s x %s: both operands need rank >= 2; reshape a vector "
                "to [1,K] or [K,1]", ta.s, tb.s);
    else if (a->dt != b->dt)
        err_set(e, ERR_INPUT, "matmul: %s x %s: dtypes differ (%s vs %s); insert a cast", ta.s,
                tb.s, dtype_info[a->dt].name, dtype_info[b->dt].name);
    else if (a->dt == DT_BOOL)
        err_set(e, ERR_INPUT, "matmul: %s x %s: bool operands; cast them to a numeric dtype",
                ta.s, tb.s);
    else if (!dim_eq(a->dim[a->rank - 1], b->dim[b->rank - 2]))
        err_set(e, ERR_INPUT, "matmul: %s x %s: inner dimensions %s and %s differ", ta.s, tb.s,
                dim_text(g, a->dim[a->rank - 1]).s, dim_text(g, b->dim[b->rank - 2]).s);
    return err_ok(e);
}

/* a[..., M, K] x b[..., K, N] -> broadcast(batch) + [M, N]. */
bool infer_matmul(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    (void)n;
    const Type *a = &in[0], *b = &in[1];
    if (!matmul_operands_ok(g, a, b, e))
        return false;
    Type r = {.dt = a->dt};
    int bad;
    Dim da, db;
    if (!broadcast_dims(a->rank - 2, a->dim, b->rank - 2, b->dim, r.dim, &r.rank, &bad, &da, &db)) {
        err_set(e, ERR_INPUT, "matmul: %s x %s: batch dimension %d differs (%s vs %s)",
                type_text(g, a).s, type_text(g, b).s, bad, dim_text(g, da).s, dim_text(g, db).s);
        return false;
    }
    r.dim[r.rank++] = a->dim[a->rank - 2];
    r.dim[r.rank++] = b->dim[b->rank - 1];
    *out = r;
    return true;
}

/* Accumulates in f64 whatever the dtype: the oracle must not share a kernel's rounding. */
bool eval_matmul(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)n, (void)e;
    int64_t m = out->shape[out->rank - 2], nn = out->shape[out->rank - 1];
    int64_t k = in[0].shape[in[0].rank - 1];
    int64_t nbatch = prod(out->shape, 0, out->rank - 2);
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t off[2];
        batch_offsets(out, t, in, 2, off);
        const double *a = in[0].d + off[0], *b = in[1].d + off[1];
        double *c = out->d + t * m * nn;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += a[i * k + p] * b[p * nn + j];
                c[i * nn + j] = acc;
            }
    }
    return true;
}

/* A multiply and an add per inner-product term: 2 * batch * M * N * K. */
double flops_matmul(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n;
    return 2.0 * (double)out->n * (double)in[0].shape[in[0].rank - 1];
}

/* ---------------------------------------------------------------- transpose */

bool infer_transpose(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const Attr *perm = node_attr(n, "perm");
    if (perm->n != in[0].rank) {
        err_set(e, ERR_INPUT, "transpose: perm lists %d axes but %s has rank %d", perm->n,
                type_text(g, &in[0]).s, in[0].rank);
        return false;
    }
    Type r = {.dt = in[0].dt, .rank = in[0].rank};
    unsigned seen = 0;
    for (int i = 0; i < perm->n; i++) {
        int64_t p = perm->ints[i];
        if (p < 0 || p >= in[0].rank) {
            err_set(e, ERR_INPUT, "transpose: perm entry %lld is out of range for %s (rank %d)",
                    (long long)p, type_text(g, &in[0]).s, in[0].rank);
            return false;
        }
        if (seen >> p & 1) {
            err_set(e, ERR_INPUT, "transpose: perm names dimension %lld twice; list each axis "
                    "of %s once", (long long)p, type_text(g, &in[0]).s);
            return false;
        }
        seen |= 1u << p;
        r.dim[i] = in[0].dim[p];
    }
    *out = r;
    return true;
}

/* Result dim i walks operand dim perm[i]. */
bool eval_transpose(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)e;
    const int64_t *perm = node_attr(n, "perm")->ints;
    int64_t stride[COIL_MAX_RANK], idx[COIL_MAX_RANK] = {0};
    for (int d = 0; d < in[0].rank; d++)
        stride[d] = prod(in[0].shape, d + 1, in[0].rank);
    for (int64_t i = 0; i < out->n; i++, index_next(idx, out->shape, out->rank)) {
        int64_t off = 0;
        for (int d = 0; d < out->rank; d++)
            off += idx[d] * stride[perm[d]];
        out->d[i] = in[0].d[off];
    }
    return true;
}

/* ---------------------------------------------------------------- reshape, expand */

/* Reshape and expand keep the dtype; a change of dtype is a cast. */
static bool same_dtype_declared(const Graph *g, const Node *n, const Type *in, const Type *out, Err *e)
{
    if (in->dt == out->dt)
        return true;
    err_set(e, ERR_INPUT, "%s: %s -> %s: dtypes differ; %s keeps the dtype (insert a cast)",
            op_info[n->op].name, type_text(g, in).s, type_text(g, out).s, op_info[n->op].name);
    return false;
}

/* Element counts compare as Dims: B,T -> B*T agrees, B -> T does not. */
bool infer_reshape(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!same_dtype_declared(g, n, &in[0], out, e))
        return false;
    bool overflow = false;
    Dim a = type_numel(&in[0], &overflow), b = type_numel(out, &overflow);
    if (overflow)
        err_set(e, ERR_INPUT, "reshape: %s -> %s: the element count overflows or repeats a "
                "symbol, so the counts cannot be compared", type_text(g, &in[0]).s,
                type_text(g, out).s);
    else if (!dim_eq(a, b))
        err_set(e, ERR_INPUT, "reshape: %s -> %s: element counts differ (%s vs %s)",
                type_text(g, &in[0]).s, type_text(g, out).s, dim_text(g, a).s, dim_text(g, b).s);
    return err_ok(e);
}

/* Numpy broadcasting to the declared shape: dims align at the right, leading dims may be
 * added, and only a static 1 stretches. */
bool infer_expand(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!same_dtype_declared(g, n, &in[0], out, e))
        return false;
    int lead = out->rank - in[0].rank;
    if (lead < 0) {
        err_set(e, ERR_INPUT, "expand: %s -> %s: the operand has more dimensions than the result",
                type_text(g, &in[0]).s, type_text(g, out).s);
        return false;
    }
    for (int i = 0; i < in[0].rank; i++) {
        Dim d = in[0].dim[i];
        if (dim_eq(d, out->dim[lead + i]) || dim_eq(d, static_one))
            continue;
        err_set(e, ERR_INPUT, "expand: %s -> %s: dimension %d (%s) cannot become %s; only a "
                "dimension of size 1 expands", type_text(g, &in[0]).s, type_text(g, out).s, i,
                dim_text(g, d).s, dim_text(g, out->dim[lead + i]).s);
        return false;
    }
    return true;
}

bool eval_expand(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)n, (void)e;
    int64_t idx[COIL_MAX_RANK] = {0};
    for (int64_t i = 0; i < out->n; i++, index_next(idx, out->shape, out->rank))
        out->d[i] = in[0].d[broadcast_offset(&in[0], out->rank, idx)];
    return true;
}

/* ---------------------------------------------------------------- slice */

/* Python: a negative index counts from the end, then clamps to [0, n]. */
static int64_t clamp_index(int64_t i, int64_t n)
{
    if (i < 0)
        i += n;
    return i < 0 ? 0 : i > n ? n : i;
}

/* How many elements start:end:step (step > 0) takes from n; *first gets the first index. */
static int64_t slice_count(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first)
{
    int64_t s = clamp_index(start, n), t = clamp_index(end, n);
    *first = s;
    return s < t ? (t - s - 1) / step + 1 : 0;
}

typedef struct SliceAttrs {
    int64_t axis, start, end, step;
} SliceAttrs;

static SliceAttrs slice_attrs(const Node *n)
{
    return (SliceAttrs){node_int(n, "axis"), node_int(n, "start"), node_int(n, "end"),
                        node_int(n, "step")};
}

/* A symbolic axis has no known length to clamp against, so only its whole is taken. */
static bool full_range(SliceAttrs s)
{
    return s.start == 0 && s.end == INT64_MAX && s.step == 1;
}

bool infer_slice(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    SliceAttrs s = slice_attrs(n);
    int axis;
    if (!axis_norm(s.axis, in[0].rank, &axis))
        return axis_out_of_range(g, n, s.axis, &in[0], e);
    if (s.step <= 0) {
        err_set(e, ERR_INPUT, "slice: step %lld must be positive", (long long)s.step);
        return false;
    }
    Dim d = in[0].dim[axis];
    *out = in[0];
    if (dim_is_static(d)) {
        int64_t first;
        out->dim[axis] = dim_static(slice_count(d.k, s.start, s.end, s.step, &first));
    } else if (!full_range(s)) {
        err_set(e, ERR_INPUT, "slice: %s: axis %d is symbolic (%s); only its full range "
                "(start=0, end=%lld, step=1) can be taken", type_text(g, &in[0]).s, axis,
                dim_text(g, d).s, (long long)INT64_MAX);
        return false;
    }
    return true;
}

bool eval_slice(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    SliceAttrs s = slice_attrs(n);
    int axis;
    if (!eval_axis(n, in[0].rank, &axis, e))
        return false;
    if (s.step <= 0) {
        err_set(e, ERR_INPUT, "slice: step %lld must be positive", (long long)s.step);
        return false;
    }
    int64_t first, len = in[0].shape[axis];
    int64_t count = slice_count(len, s.start, s.end, s.step, &first);
    int64_t outer = prod(in[0].shape, 0, axis), inner = prod(in[0].shape, axis + 1, in[0].rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < count; j++)
            for (int64_t r = 0; r < inner; r++)
                out->d[(o * count + j) * inner + r] =
                    in[0].d[(o * len + first + j * s.step) * inner + r];
    return true;
}

/* ---------------------------------------------------------------- concat */

/* Sizes along the axis add: static ones, or multiples of the same symbols (B + B = 2*B). */
static bool concat_axis_add(Dim *sum, Dim d)
{
    if (sum->syms != d.syms)
        return false;
    return !__builtin_add_overflow(sum->k, d.k, &sum->k);
}

static bool concat_operand_ok(const Graph *g, const Type *first, const Type *t, int i, int axis,
                              Err *e)
{
    TypeText ta = type_text(g, first), tb = type_text(g, t);
    if (t->dt != first->dt)
        err_set(e, ERR_INPUT, "concat: %s and operand %d %s: dtypes differ; insert a cast", ta.s,
                i, tb.s);
    else if (t->rank != first->rank)
        err_set(e, ERR_INPUT, "concat: %s and operand %d %s: ranks differ (%d vs %d)", ta.s, i,
                tb.s, first->rank, t->rank);
    for (int d = 0; err_ok(e) && d < t->rank; d++)
        if (d != axis && !dim_eq(first->dim[d], t->dim[d]))
            err_set(e, ERR_INPUT, "concat: %s and operand %d %s: dimension %d differs (%s vs %s) "
                    "and only the axis (%d) may", ta.s, i, tb.s, d, dim_text(g, first->dim[d]).s,
                    dim_text(g, t->dim[d]).s, axis);
    return err_ok(e);
}

bool infer_concat(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    int64_t axis_attr = node_int(n, "axis");
    int axis;
    if (!axis_norm(axis_attr, in[0].rank, &axis))
        return axis_out_of_range(g, n, axis_attr, &in[0], e);
    Type r = in[0];
    for (int i = 1; i < n->nin; i++) {
        if (!concat_operand_ok(g, &in[0], &in[i], i, axis, e))
            return false;
        if (!concat_axis_add(&r.dim[axis], in[i].dim[axis])) {
            err_set(e, ERR_INPUT, "concat: %s and operand %d %s: sizes %s and %s along axis %d "
                    "cannot be added; make them static", type_text(g, &in[0]).s, i,
                    type_text(g, &in[i]).s, dim_text(g, r.dim[axis]).s,
                    dim_text(g, in[i].dim[axis]).s, axis);
            return false;
        }
    }
    *out = r;
    return true;
}

/* Each operand contributes one contiguous chunk per index of the dims before the axis. */
bool eval_concat(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    int axis;
    if (!eval_axis(n, out->rank, &axis, e))
        return false;
    int64_t outer = prod(out->shape, 0, axis), inner = prod(out->shape, axis + 1, out->rank);
    double *dst = out->d;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n->nin; k++) {
            int64_t chunk = in[k].shape[axis] * inner;
            for (int64_t j = 0; j < chunk; j++)
                *dst++ = in[k].d[o * chunk + j];
        }
    return true;
}

/* ---------------------------------------------------------------- gather */

static bool is_integer(DType dt)
{
    return dt == DT_I8 || dt == DT_I32 || dt == DT_I64;
}

/* numpy take: x.shape[:axis] + idx.shape + x.shape[axis+1:]. */
bool infer_gather(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const Type *x = &in[0], *idx = &in[1];
    int64_t axis_attr = node_int(n, "axis");
    int axis;
    if (!axis_norm(axis_attr, x->rank, &axis))
        return axis_out_of_range(g, n, axis_attr, x, e);
    if (!is_integer(idx->dt)) {
        err_set(e, ERR_INPUT, "gather: indices %s must have an integer dtype (i8, i32, i64); "
                "cast them", type_text(g, idx).s);
        return false;
    }
    if (x->rank - 1 + idx->rank > COIL_MAX_RANK) {
        err_set(e, ERR_INPUT, "gather: %s indexed by %s has rank %d, above the limit %d",
                type_text(g, x).s, type_text(g, idx).s, x->rank - 1 + idx->rank, COIL_MAX_RANK);
        return false;
    }
    Type r = {.dt = x->dt};
    for (int d = 0; d < axis; d++)
        r.dim[r.rank++] = x->dim[d];
    for (int d = 0; d < idx->rank; d++)
        r.dim[r.rank++] = idx->dim[d];
    for (int d = axis + 1; d < x->rank; d++)
        r.dim[r.rank++] = x->dim[d];
    *out = r;
    return true;
}

/* Indices must lie in [0, size): a negative one is reported, not wrapped, since it
 * is almost always a bug in the data (a padding id, an unshifted label). */
bool eval_gather(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    const ITensor *x = &in[0], *idx = &in[1];
    int axis;
    if (!eval_axis(n, x->rank, &axis, e))
        return false;
    int64_t outer = prod(x->shape, 0, axis), size = x->shape[axis];
    int64_t inner = prod(x->shape, axis + 1, x->rank);
    for (int64_t i = 0; i < idx->n; i++)
        if (idx->d[i] < 0 || idx->d[i] >= (double)size) {
            err_set(e, ERR_INPUT, "gather: index %lld (element %lld of the indices) is out of "
                    "range [0, %lld) for axis %d", (long long)idx->d[i], (long long)i,
                    (long long)size, axis);
            return false;
        }
    double *dst = out->d;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < idx->n; i++) {
            const double *src = x->d + (o * size + (int64_t)idx->d[i]) * inner;
            for (int64_t r = 0; r < inner; r++)
                *dst++ = src[r];
        }
    return true;
}

/* ---------------------------------------------------------------- index_add */

/* base [V, rest..], idx integer [S..], src [S.., rest..] of base's dtype: gather's shapes
 * read backwards (src is what gather(base, idx) would return), so it is gather's adjoint. */
bool infer_index_add(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    (void)n;
    const Type *base = &in[0], *idx = &in[1], *src = &in[2];
    if (!is_integer(idx->dt)) {
        err_set(e, ERR_INPUT, "index_add: indices %s must have an integer dtype (i8, i32, "
                "i64); cast them", type_text(g, idx).s);
        return false;
    }
    if (base->rank < 1) {
        err_set(e, ERR_INPUT, "index_add: base %s has no axis 0 to add rows into",
                type_text(g, base).s);
        return false;
    }
    if (idx->rank + base->rank - 1 > COIL_MAX_RANK) {
        err_set(e, ERR_INPUT, "index_add: base %s indexed by %s: src would have rank %d, above "
                "the limit %d", type_text(g, base).s, type_text(g, idx).s,
                idx->rank + base->rank - 1, COIL_MAX_RANK);
        return false;
    }
    Type want = {.dt = base->dt};
    for (int d = 0; d < idx->rank; d++)
        want.dim[want.rank++] = idx->dim[d];
    for (int d = 1; d < base->rank; d++)
        want.dim[want.rank++] = base->dim[d];
    if (!type_eq(src, &want)) {
        err_set(e, ERR_INPUT, "index_add: src is %s; into base %s at indices %s it must be %s "
                "(the indices' shape, then base's dims after the first, base's dtype)",
                type_text(g, src).s, type_text(g, base).s, type_text(g, idx).s,
                type_text(g, &want).s);
        return false;
    }
    *out = *base;
    return true;
}

/* Every index checked first, as gather does (a negative one is a data bug, not a wrap);
 * then sums in f64, rounded once by the caller. */
bool eval_index_add(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)n;
    const ITensor *base = &in[0], *idx = &in[1], *src = &in[2];
    int64_t rows = base->shape[0], width = prod(base->shape, 1, base->rank);
    for (int64_t i = 0; i < idx->n; i++)
        if (idx->d[i] < 0 || idx->d[i] >= (double)rows) {
            err_set(e, ERR_INPUT, "index_add: index %lld (element %lld of the indices) is out "
                    "of range [0, %lld) for axis 0", (long long)idx->d[i], (long long)i,
                    (long long)rows);
            return false;
        }
    for (int64_t i = 0; i < base->n; i++)
        out->d[i] = base->d[i];
    for (int64_t i = 0; i < idx->n; i++) {
        double *dst = out->d + (int64_t)idx->d[i] * width;
        for (int64_t r = 0; r < width; r++)
            dst[r] += src->d[i * width + r];
    }
    return true;
}

/* One add per element of src. */
double flops_index_add(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)out;
    return (double)in[2].n;
}
