/* onnx_shape.c — the ONNX converters that move data or make it: reshapes, slices, gathers,
 * padding, constants and shape arithmetic (Shape of a symbolic tensor stays Dims). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COIL_HAVE_ONNX
#include "frontend/onnx_int.h"
#include "frontend/window.h"

/* ---------------------------------------------------------------- reshapes */

/* Reshape's target: 0 copies the operand's dim (unless allowzero), -1 takes what is
 * left; symbolic dims stay symbolic. */
static bool reshape_dims(Cv *c, const Type *t, const Dim *shape, int n, bool allowzero, Dim *dims)
{
    Dim known = dim_static(1);
    int infer = -1;
    bool overflow = false;
    for (int i = 0; i < n; i++) {
        Dim d = shape[i];
        if (dim_is_static(d) && d.k == -1) {
            if (infer >= 0)
                return cv_invalid(c, "the shape has more than one -1");
            infer = i;
            continue;
        }
        if (dim_is_static(d) && d.k == 0 && !allowzero) {
            if (i >= t->rank)
                return cv_invalid(c, "shape entry %d is 0 (copy) beyond the operand's rank %d", i,
                                  t->rank);
            d = t->dim[i];
        } else if (dim_is_static(d) && d.k < 0)
            return cv_invalid(c, "shape entry %d is %lld", i, (long long)d.k);
        dims[i] = d;
        known = dim_mul(known, d, &overflow);
    }
    if (infer < 0)
        return true;
    Dim all = type_numel(t, &overflow);
    if (known.k == 0 || all.k % known.k || (known.syms & ~all.syms) || known.sq || all.sq)
        return cv_unsupported(c, "cannot infer the -1 entry of the shape (the sizes do not "
                              "divide, or symbolic dims do not cancel)");
    dims[infer] = (Dim){all.k / known.k, all.syms & ~known.syms, 0};
    return true;
}

/* A shape vector of rank <= 1 reshaped stays a shape vector. */
static bool reshape_shape_value(Cv *c, const OnnxValue *v)
{
    int64_t want[ONNX_MAX_LIST];
    int n;
    if (!cv_ints(c, 1, NULL, want, &n))
        return false;
    if (n > 1 || (n == 1 && want[0] != -1 && want[0] != v->numel) || (n == 0 && v->numel != 1))
        return cv_unsupported(c, "reshaping the shape of a symbolic tensor to rank %d", n);
    cv_define_shape(c, 0, v->sdim, (int)v->numel, n);
    return true;
}

bool conv_reshape(Cv *c)
{
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv)
        return reshape_shape_value(c, sv);
    int x = cv_in(c, 0), n;
    Dim shape[ONNX_MAX_LIST], dims[COIL_MAX_RANK];
    if (x < 0 || !cv_shape(c, 1, shape, &n))
        return false;
    if (n > COIL_MAX_RANK)
        return cv_unsupported(c, "a result of rank %d (coil's limit is %d)", n, COIL_MAX_RANK);
    Type t = cv_type(c, x);
    if (!reshape_dims(c, &t, shape, n, cv_int(c, "allowzero", 0) != 0, dims))
        return false;
    c->out[0] = cv_reshape(c, x, n, dims);
    return true;
}

bool conv_flatten(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    int64_t axis = cv_int(c, "axis", 1);
    axis = axis < 0 ? axis + t.rank : axis; /* -1 is the last axis; rank itself is allowed */
    if (axis < 0 || axis > t.rank)
        return cv_invalid(c, "axis %lld is out of range", (long long)cv_int(c, "axis", 1));
    c->out[0] = cv_flatten_at(c, x, (int)axis);
    return true;
}

bool conv_unsqueeze(Cv *c)
{
    int64_t axes[ONNX_MAX_LIST];
    int n;
    if (!cv_ints(c, 1, "axes", axes, &n))
        return false;
    if (n < 0)
        return cv_invalid(c, "needs axes");
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv) { /* a scalar Dim becomes a one-entry shape vector */
        if (sv->type.rank != 0 || n != 1)
            return cv_unsupported(c, "unsqueezing a shape vector other than a scalar");
        cv_define_shape(c, 0, sv->sdim, 1, 1);
        return true;
    }
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    int rank = t.rank + n;
    int64_t norm[COIL_MAX_RANK];
    if (rank > COIL_MAX_RANK)
        return cv_unsupported(c, "a result of rank %d (coil's limit is %d)", rank, COIL_MAX_RANK);
    if (!cv_axes(c, axes, n, rank, norm))
        return false;
    Dim dims[COIL_MAX_RANK];
    for (int i = 0, j = 0, k = 0; i < rank; i++)
        dims[i] = (k < n && norm[k] == i) ? (k++, dim_static(1)) : t.dim[j++];
    c->out[0] = cv_reshape(c, x, rank, dims);
    return true;
}

bool conv_squeeze(Cv *c)
{
    int64_t axes[ONNX_MAX_LIST], norm[COIL_MAX_RANK];
    int n;
    if (!cv_ints(c, 1, "axes", axes, &n))
        return false;
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv) {
        if (sv->numel != 1)
            return cv_unsupported(c, "squeezing a shape vector of more than one entry");
        cv_define_shape(c, 0, sv->sdim, 1, 0);
        return true;
    }
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    if (n > 0 && !cv_axes(c, axes, n, t.rank, norm))
        return false;
    bool drop[COIL_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        if (!dim_eq(t.dim[norm[i]], dim_static(1)))
            return cv_invalid(c, "axis %lld does not have size 1", (long long)norm[i]);
        drop[norm[i]] = true;
    }
    Dim dims[COIL_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < t.rank; i++)
        if (!(n > 0 ? drop[i] : dim_eq(t.dim[i], dim_static(1))))
            dims[rank++] = t.dim[i];
    c->out[0] = cv_reshape(c, x, rank, dims);
    return true;
}

bool conv_transpose(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    int rank = cv_type(c, x).rank;
    int64_t perm[COIL_MAX_RANK];
    const Onnx__AttributeProto *a = cv_attr(c, "perm");
    if (a && (int)a->n_ints != rank)
        return cv_invalid(c, "perm has %zu entries for an operand of rank %d", a->n_ints, rank);
    for (int i = 0; i < rank; i++)
        perm[i] = a ? a->ints[i] : rank - 1 - i;
    c->out[0] = rank < 2 ? x : b_transpose(cv_b(c), x, rank, perm);
    return true;
}

/* ---------------------------------------------------------------- joining, cutting */

/* Concat of shape vectors (some symbolic) is a shape vector. */
static bool concat_shape_values(Cv *c)
{
    Dim all[ONNX_MAX_LIST], part[ONNX_MAX_LIST];
    int total = 0, n;
    for (size_t i = 0; i < c->node->n_input; i++) {
        if (!cv_shape(c, i, part, &n))
            return false;
        if (total + n > ONNX_MAX_LIST)
            return cv_unsupported(c, "a shape vector longer than %d", ONNX_MAX_LIST);
        memcpy(all + total, part, (size_t)n * sizeof *part);
        total += n;
    }
    cv_define_shape(c, 0, all, total, 1);
    return true;
}

bool conv_concat(Cv *c)
{
    int n = (int)c->node->n_input;
    for (int i = 0; i < n; i++)
        if (cv_shape_value(c, (size_t)i))
            return concat_shape_values(c);
    int *xs = malloc((size_t)n * sizeof *xs), k = 0;
    if (!xs)
        abort();
    for (int i = 0; i < n; i++) {
        int x = cv_in(c, (size_t)i);
        if (x < 0) {
            free(xs);
            return false;
        }
        xs[k++] = x;
    }
    c->out[0] = k == 1 ? xs[0] : b_concat(cv_b(c), xs, k, cv_int(c, "axis", 0));
    free(xs);
    return true;
}

bool conv_split(Cv *c)
{
    int x = cv_in(c, 0), axis, n;
    int64_t sizes[ONNX_MAX_LIST];
    if (x < 0 || !cv_ints(c, 1, "split", sizes, &n))
        return false;
    Type t = cv_type(c, x);
    if (!axis_norm(cv_int(c, "axis", 0), t.rank, &axis))
        return cv_invalid(c, "axis %lld is out of range", (long long)cv_int(c, "axis", 0));
    if (!dim_is_static(t.dim[axis]))
        return cv_unsupported(c, "splitting a symbolic axis");
    int64_t len = t.dim[axis].k, outs = (int64_t)c->node->n_output;
    if (n < 0) { /* equal parts (opset 18's num_outputs: the last one smaller) */
        int64_t parts = cv_int(c, "num_outputs", outs), each = (len + parts - 1) / parts;
        if (parts != outs || parts <= 0)
            return cv_invalid(c, "num_outputs %lld differs from its %lld results",
                              (long long)parts, (long long)outs);
        n = (int)outs;
        for (int i = 0; i < n; i++)
            sizes[i] = i < n - 1 ? each : len - each * (n - 1);
        if (!cv_attr(c, "num_outputs") && len % outs)
            return cv_invalid(c, "axis of size %lld does not split into %lld equal parts",
                              (long long)len, (long long)outs);
    }
    if (n != outs)
        return cv_invalid(c, "split gives %d sizes for %lld results", n, (long long)outs);
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0 || start + sizes[i] > len)
            return cv_invalid(c, "split sizes do not add up to the axis's %lld", (long long)len);
        c->out[i] = b_slice(cv_b(c), x, axis, start, start + sizes[i], 1);
        start += sizes[i];
    }
    if (start != len)
        return cv_invalid(c, "split sizes add up to %lld, not the axis's %lld", (long long)start,
                          (long long)len);
    return true;
}

/* Python's clamping of a slice bound for a negative step: start, end in [-1, len-1]. */
static int64_t clamp_neg(int64_t v, int64_t len)
{
    if (v < 0)
        v += len;
    return v < -1 ? -1 : v > len - 1 ? len - 1 : v;
}

/* A negative step: the elements start, start+step, ... (> end) gathered. */
static int slice_backward(Cv *c, int x, int axis, int64_t start, int64_t end, int64_t step)
{
    Type t = cv_type(c, x);
    if (!dim_is_static(t.dim[axis])) {
        cv_unsupported(c, "a negative step on a symbolic axis");
        return -1;
    }
    int64_t len = t.dim[axis].k, s = clamp_neg(start, len), e = clamp_neg(end, len);
    if (end < -len) /* INT64_MIN and the like: through element 0 */
        e = -1;
    int64_t count = s > e ? (s - e - 1) / -step + 1 : 0;
    double *idx = malloc((size_t)(count ? count : 1) * sizeof *idx);
    if (!idx)
        abort();
    for (int64_t i = 0; i < count; i++)
        idx[i] = (double)(s + i * step);
    Type it = type_make(DT_I64, 1, &count);
    int r = b_gather(cv_b(c), x, b_constant(cv_b(c), &it, idx), axis);
    free(idx);
    return r;
}

/* A forward slice's bounds in coil's terms (Python's rules, which b_slice clamps). */
static int slice_forward(Cv *c, int x, int axis, int64_t start, int64_t end, int64_t step)
{
    Type t = cv_type(c, x);
    if (!dim_is_static(t.dim[axis]) && start == 0 && end >= INT32_MAX && step == 1)
        end = INT64_MAX; /* the full range of a symbolic axis */
    return b_slice(cv_b(c), x, axis, start, end, step);
}

static bool slice_shape_value(Cv *c, const OnnxValue *v)
{
    int64_t st[ONNX_MAX_LIST], en[ONNX_MAX_LIST], ax[ONNX_MAX_LIST], sp[ONNX_MAX_LIST];
    int ns, ne, na, np;
    if (!cv_ints(c, 1, NULL, st, &ns) || !cv_ints(c, 2, NULL, en, &ne) ||
        !cv_ints(c, 3, NULL, ax, &na) || !cv_ints(c, 4, NULL, sp, &np))
        return false;
    if (ns != 1 || ne != 1 || (na == 1 && ax[0] != 0 && ax[0] != -1) || (np == 1 && sp[0] != 1))
        return cv_unsupported(c, "this slice of the shape of a symbolic tensor");
    int64_t len = v->numel, s = st[0] < 0 ? st[0] + len : st[0], e = en[0] < 0 ? en[0] + len : en[0];
    s = s < 0 ? 0 : s > len ? len : s;
    e = e < s ? s : e > len ? len : e;
    cv_define_shape(c, 0, v->sdim + s, (int)(e - s), 1);
    return true;
}

bool conv_slice(Cv *c)
{
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv)
        return slice_shape_value(c, sv);
    int x = cv_in(c, 0), ns, ne, na, np;
    int64_t st[ONNX_MAX_LIST], en[ONNX_MAX_LIST], ax[ONNX_MAX_LIST], sp[ONNX_MAX_LIST];
    if (x < 0 || !cv_ints(c, 1, NULL, st, &ns) || !cv_ints(c, 2, NULL, en, &ne) ||
        !cv_ints(c, 3, NULL, ax, &na) || !cv_ints(c, 4, NULL, sp, &np))
        return false;
    int rank = cv_type(c, x).rank;
    if (ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns))
        return cv_invalid(c, "starts, ends, axes and steps differ in length");
    for (int i = 0; i < ns && x >= 0; i++) {
        int axis;
        int64_t step = np >= 0 ? sp[i] : 1;
        if (!axis_norm(na >= 0 ? ax[i] : i, rank, &axis))
            return cv_invalid(c, "axis %lld is out of range", (long long)(na >= 0 ? ax[i] : i));
        if (step == 0)
            return cv_invalid(c, "a step of 0");
        x = step > 0 ? slice_forward(c, x, axis, st[i], en[i], step)
                     : slice_backward(c, x, axis, st[i], en[i], step);
    }
    c->out[0] = x;
    return x >= 0;
}

/* ---------------------------------------------------------------- gathers */

/* Gather from a shape vector by constant indices stays a shape vector. */
static bool gather_shape_value(Cv *c, const OnnxValue *v)
{
    int64_t numel;
    const double *idx = cv_const(c, 1, &numel);
    const OnnxValue *iv = onnx_value(c->o, c->node->input[1]);
    if (!idx || !iv || iv->type.rank > 1 || numel > ONNX_MAX_LIST)
        return cv_unsupported(c, "gathering from the shape of a symbolic tensor by indices that "
                              "are not a constant of rank 0 or 1");
    Dim d[ONNX_MAX_LIST];
    for (int64_t i = 0; i < numel; i++) {
        int64_t k = (int64_t)idx[i] < 0 ? (int64_t)idx[i] + v->numel : (int64_t)idx[i];
        if (k < 0 || k >= v->numel)
            return cv_invalid(c, "index %lld is out of range", (long long)idx[i]);
        d[i] = v->sdim[k];
    }
    cv_define_shape(c, 0, d, (int)numel, iv->type.rank);
    return true;
}

/* Indices with negatives counted from the end of a static axis of size len. */
static int wrap_indices(Cv *c, int idx, int64_t len)
{
    DType dt = cv_type(c, idx).dt;
    int neg = cv_bin(c, OP_LT, idx, cv_scalar(c, 0, dt));
    return cv_where(c, neg, cv_bin(c, OP_ADD, idx, cv_scalar(c, (double)len, dt)), idx);
}

bool conv_gather(Cv *c)
{
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv)
        return gather_shape_value(c, sv);
    int x = cv_in(c, 0), idx = cv_in(c, 1), axis;
    if (x < 0 || idx < 0)
        return false;
    Type t = cv_type(c, x);
    if (!axis_norm(cv_int(c, "axis", 0), t.rank, &axis))
        return cv_invalid(c, "axis %lld is out of range", (long long)cv_int(c, "axis", 0));
    if (dim_is_static(t.dim[axis]))
        idx = wrap_indices(c, idx, t.dim[axis].k);
    c->out[0] = b_gather(cv_b(c), x, idx, axis);
    return true;
}

/* For each element of idx (of type it), the linear index into x (of static type t) of the
 * element at its position with the axis's coordinate replaced by its value:
 * sum_d coord_d * stride_d. *numel is x's element count. */
static int element_index(Cv *c, int idx, const Type *it, const Type *t, int axis, int64_t *numel)
{
    Type it64 = *it;
    it64.dt = DT_I64;
    int wrapped = wrap_indices(c, cv_cast(c, idx, DT_I64), t->dim[axis].k), lin = -1;
    int64_t stride = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        int coord = d == axis ? wrapped : b_iota(cv_b(c), &it64, d);
        int term = cv_bin(c, OP_MUL, coord, cv_scalar(c, (double)stride, DT_I64));
        lin = lin < 0 ? term : cv_bin(c, OP_ADD, lin, term);
        stride *= t->dim[d].k;
    }
    *numel = stride;
    return lin;
}

/* GatherElements: x[..., idx[...], ...] along axis, as a gather from x flattened at the
 * linear index sum_d coord_d * stride_d with idx standing in for the axis's coordinate. */
bool conv_gather_elements(Cv *c)
{
    int x = cv_in(c, 0), idx = cv_in(c, 1), axis;
    if (x < 0 || idx < 0)
        return false;
    Type t = cv_type(c, x), it = cv_type(c, idx);
    if (!axis_norm(cv_int(c, "axis", 0), t.rank, &axis))
        return cv_invalid(c, "axis %lld is out of range", (long long)cv_int(c, "axis", 0));
    bool overflow = false;
    if (!dim_is_static(type_numel(&t, &overflow)) || !dim_is_static(type_numel(&it, &overflow)))
        return cv_unsupported(c, "symbolic dims");
    int64_t count;
    int lin = element_index(c, idx, &it, &t, axis, &count);
    Dim flat = dim_static(count);
    c->out[0] = b_gather(cv_b(c), cv_reshape(c, x, 1, &flat), lin, 0);
    return true;
}

/* ---------------------------------------------------------------- n-d indices */

/* The row of x flattened over its first `lead` axes that each index vector idx[..., :k]
 * (plus the coordinates of idx's first `batch` axes) names: sum of coordinate * stride. */
static int linear_index(Cv *c, const Type *x, int idx, int batch, int k)
{
    Type it = cv_type(c, idx);
    int lead = batch + k, lin = -1;
    Type pos = it; /* idx without its last axis */
    pos.rank = it.rank - 1, pos.dt = DT_I64;
    int64_t stride = 1;
    for (int d = lead - 1; d >= 0; d--) {
        int coord;
        if (d >= batch) {
            int col = b_slice(cv_b(c), cv_cast(c, idx, DT_I64), it.rank - 1, d - batch, d - batch + 1, 1);
            coord = wrap_indices(c, cv_reshape(c, col, pos.rank, pos.dim), x->dim[d].k);
        } else
            coord = b_iota(cv_b(c), &pos, d);
        int term = cv_bin(c, OP_MUL, coord, cv_scalar(c, (double)stride, DT_I64));
        lin = lin < 0 ? term : cv_bin(c, OP_ADD, lin, term);
        stride *= x->dim[d].k;
    }
    return lin;
}

static bool static_dims(Cv *c, const Type *t)
{
    for (int i = 0; i < t->rank; i++)
        if (!dim_is_static(t->dim[i]))
            return cv_unsupported(c, "symbolic dims");
    return true;
}

/* x[D0..Dn) as [prod(D0..D(lead-1)), D(lead)...]. */
static int merge_leading(Cv *c, int x, int lead)
{
    Type t = cv_type(c, x);
    Dim d[COIL_MAX_RANK];
    int64_t rows = 1;
    for (int i = 0; i < lead; i++)
        rows *= t.dim[i].k;
    d[0] = dim_static(rows);
    for (int i = lead; i < t.rank; i++)
        d[1 + i - lead] = t.dim[i];
    return cv_reshape(c, x, 1 + t.rank - lead, d);
}

bool conv_gather_nd(Cv *c)
{
    int x = cv_in(c, 0), idx = cv_in(c, 1);
    if (x < 0 || idx < 0)
        return false;
    Type t = cv_type(c, x), it = cv_type(c, idx);
    int64_t batch = cv_int(c, "batch_dims", 0);
    if (!static_dims(c, &t) || !static_dims(c, &it))
        return false;
    int k = (int)it.dim[it.rank - 1].k;
    if (batch < 0 || batch + k > t.rank || batch >= it.rank)
        return cv_invalid(c, "the index vectors (%d) and batch_dims exceed the data's rank", k);
    int lin = linear_index(c, &t, idx, (int)batch, k);
    c->out[0] = b_gather(cv_b(c), merge_leading(c, x, (int)batch + k), lin, 0);
    return true;
}

/* Scatter onto rows: data2[N, R] with updates upd[Q, R] at rows lin[Q], combined by the
 * reduction: add is an index_add; the others find each row's updates by a [Q, N] one-hot. */
static int scatter_rows(Cv *c, int data2, int lin, int upd, const char *reduction)
{
    if (strcmp(reduction, "add") == 0)
        return b_index_add(cv_b(c), data2, lin, upd);
    Type dt = cv_type(c, data2), ut = cv_type(c, upd);
    int64_t n = dt.dim[0].k, q = ut.dim[0].k;
    if (q * n > (1 << 24)) {
        cv_unsupported(c, "a scatter of %lld updates into %lld rows", (long long)q, (long long)n);
        return -1;
    }
    Type rows = type_make(DT_I64, 2, (int64_t[]){1, n});
    int hot = cv_bin(c, OP_EQ, cv_reshape(c, lin, 2, (Dim[]){dim_static(q), dim_static(1)}),
                     b_iota(cv_b(c), &rows, 1)); /* [Q, N] */
    int64_t zero = 0;
    int covered = b_reduce(cv_b(c), OP_MAX, cv_cast(c, hot, DT_I32), 1, &zero, false);
    covered = cv_reshape(c, cv_bin(c, OP_GT, covered, cv_scalar(c, 0, DT_I32)), 2,
                         (Dim[]){dim_static(n), dim_static(1)});
    int hot3 = cv_reshape(c, hot, 3, (Dim[]){dim_static(q), dim_static(n), dim_static(1)});
    Dim ud[3] = {dim_static(q), dim_static(1), ut.dim[1]};
    int u3 = cv_reshape(c, upd, 3, ud);
    bool is_max = strcmp(reduction, "max") == 0, is_min = strcmp(reduction, "min") == 0;
    if (strcmp(reduction, "mul") == 0) { /* one update at a time, in order */
        if (q > 64) {
            cv_unsupported(c, "reduction mul over more than 64 updates");
            return -1;
        }
        int acc = data2;
        for (int64_t i = 0; i < q; i++) {
            int row = cv_reshape(c, b_slice(cv_b(c), hot, 0, i, i + 1, 1), 2,
                                 (Dim[]){dim_static(n), dim_static(1)});
            int val = b_slice(cv_b(c), upd, 0, i, i + 1, 1);
            acc = cv_where(c, row, cv_bin(c, OP_MUL, acc, val), acc);
        }
        return acc;
    }
    double fill = is_max ? -INFINITY : is_min ? INFINITY : 0;
    if (!dtype_info[dt.dt].is_float && (is_max || is_min))
        fill = is_max ? -9.2e18 : 9.2e18;
    int picked = cv_where(c, hot3, u3, cv_scalar(c, fill, dt.dt)); /* [Q, N, R] */
    int s = b_reduce(cv_b(c), is_max ? OP_MAX : is_min ? OP_MIN : OP_SUM, picked, 1, &zero, false);
    if (is_max || is_min)
        s = cv_bin(c, is_max ? OP_MAXIMUM : OP_MINIMUM, data2, s);
    return cv_where(c, covered, s, data2);
}

static bool scatter_reduction(Cv *c, char *buf, size_t n)
{
    cv_str(c, "reduction", "none", buf, n);
    if (strcmp(buf, "none") && strcmp(buf, "add") && strcmp(buf, "mul") && strcmp(buf, "max") &&
        strcmp(buf, "min"))
        return cv_invalid(c, "reduction '%s'", buf);
    return true;
}

bool conv_scatter_nd(Cv *c)
{
    int x = cv_in(c, 0), idx = cv_in(c, 1), upd = cv_in(c, 2);
    char red[16];
    if (x < 0 || idx < 0 || upd < 0 || !scatter_reduction(c, red, sizeof red))
        return false;
    Type t = cv_type(c, x), it = cv_type(c, idx);
    if (!static_dims(c, &t) || !static_dims(c, &it))
        return false;
    int k = (int)it.dim[it.rank - 1].k;
    if (k > t.rank)
        return cv_invalid(c, "index vectors longer than the data's rank");
    int lin = linear_index(c, &t, idx, 0, k);
    bool overflow = false;
    Type lt = cv_type(c, lin);
    Dim q = type_numel(&lt, &overflow), r = dim_static(1);
    for (int i = k; i < t.rank; i++)
        r = dim_mul(r, t.dim[i], &overflow);
    int64_t rows = 1;
    for (int i = 0; i < k; i++)
        rows *= t.dim[i].k;
    int data2 = cv_reshape(c, x, 2, (Dim[]){dim_static(rows), r});
    int out = scatter_rows(c, data2, cv_reshape(c, lin, 1, &q), cv_reshape(c, upd, 2, (Dim[]){q, r}), red);
    c->out[0] = cv_reshape(c, out, t.rank, t.dim);
    return out >= 0;
}

/* ScatterElements: each element of updates to data at its position with the axis's
 * coordinate replaced by its index; onto data flattened to rows of one. */
bool conv_scatter_elements(Cv *c)
{
    int x = cv_in(c, 0), idx = cv_in(c, 1), upd = cv_in(c, 2), axis;
    char red[16];
    if (x < 0 || idx < 0 || upd < 0 || !scatter_reduction(c, red, sizeof red))
        return false;
    Type t = cv_type(c, x), it = cv_type(c, idx);
    if (!static_dims(c, &t) || !static_dims(c, &it))
        return false;
    if (!axis_norm(cv_int(c, "axis", 0), t.rank, &axis))
        return cv_invalid(c, "axis is out of range");
    int64_t stride;
    int lin = element_index(c, idx, &it, &t, axis, &stride);
    bool overflow = false;
    Dim q = type_numel(&it, &overflow), one = dim_static(1);
    int data2 = cv_reshape(c, x, 2, (Dim[]){dim_static(stride), one});
    int out = scatter_rows(c, data2, cv_reshape(c, lin, 1, &q), cv_reshape(c, upd, 2, (Dim[]){q, one}), red);
    c->out[0] = cv_reshape(c, out, t.rank, t.dim);
    return out >= 0;
}

/* ---------------------------------------------------------------- broadcasting */

/* Expand: numpy broadcasting of the operand's shape and the given one, both ways. */
bool conv_expand(Cv *c)
{
    int x = cv_in(c, 0), n;
    Dim shape[ONNX_MAX_LIST];
    if (x < 0 || !cv_shape(c, 1, shape, &n))
        return false;
    Type t = cv_type(c, x), r = t;
    r.rank = t.rank > n ? t.rank : n;
    if (r.rank > COIL_MAX_RANK)
        return cv_unsupported(c, "a result of rank %d", r.rank);
    for (int i = 0; i < r.rank; i++) {
        int a = i - (r.rank - t.rank), b = i - (r.rank - n);
        Dim da = a >= 0 ? t.dim[a] : dim_static(1), db = b >= 0 ? shape[b] : dim_static(1);
        if (dim_eq(da, db) || dim_eq(db, dim_static(1)))
            r.dim[i] = da;
        else if (dim_eq(da, dim_static(1)))
            r.dim[i] = db;
        else
            return cv_invalid(c, "shape entry %d does not broadcast against the operand", b);
    }
    if (r.rank == t.rank) {
        bool same = true;
        for (int i = 0; i < r.rank; i++)
            same = same && dim_eq(r.dim[i], t.dim[i]);
        if (same) {
            c->out[0] = x;
            return true;
        }
    }
    c->out[0] = b_expand(cv_b(c), x, &r);
    return true;
}

/* Tile: x[d0, d1] as [1, d0, 1, d1], expanded to [r0, d0, r1, d1], then [r0*d0, r1*d1]. */
bool conv_tile(Cv *c)
{
    int x = cv_in(c, 0), n;
    int64_t reps[ONNX_MAX_LIST];
    if (x < 0 || !cv_ints(c, 1, NULL, reps, &n))
        return false;
    Type t = cv_type(c, x);
    if (n != t.rank)
        return cv_invalid(c, "repeats has %d entries for an operand of rank %d", n, t.rank);
    if (2 * t.rank > COIL_MAX_RANK)
        return cv_unsupported(c, "tiling rank %d (coil expands through rank %d)", t.rank, 2 * t.rank);
    Dim split[COIL_MAX_RANK], big[COIL_MAX_RANK], out[COIL_MAX_RANK];
    bool overflow = false;
    for (int i = 0; i < t.rank; i++) {
        if (reps[i] < 0)
            return cv_invalid(c, "a negative repeat");
        split[2 * i] = dim_static(1), split[2 * i + 1] = t.dim[i];
        big[2 * i] = dim_static(reps[i]), big[2 * i + 1] = t.dim[i];
        out[i] = dim_mul(dim_static(reps[i]), t.dim[i], &overflow);
    }
    Type e = t;
    e.rank = 2 * t.rank;
    memcpy(e.dim, big, (size_t)e.rank * sizeof *big);
    int s = cv_reshape(c, x, 2 * t.rank, split);
    c->out[0] = cv_reshape(c, b_expand(cv_b(c), s, &e), t.rank, out);
    return true;
}

/* ---------------------------------------------------------------- shape arithmetic */

/* Operand i's entries as Dims, and its rank: a shape vector's, or a constant's. */
static bool shape_entries(Cv *c, size_t i, Dim *d, int *n, int *rank)
{
    const OnnxValue *sv = cv_shape_value(c, i);
    const OnnxValue *v = onnx_value(c->o, c->node->input[i]);
    *rank = sv ? sv->type.rank : v ? v->type.rank : 0;
    return cv_shape(c, i, d, n);
}

/* Where an entry of a is known to equal b's: both static, a symbolic dim against a
 * negative number (a size never is), or the same symbolic dim. */
static bool dims_equal_known(Cv *c, Dim a, Dim b, bool *eq)
{
    bool both_static = dim_is_static(a) && dim_is_static(b);
    bool negative = (dim_is_static(a) && a.k < 0) || (dim_is_static(b) && b.k < 0);
    if (!both_static && !negative && !dim_eq(a, b))
        return cv_unsupported(c, "comparing a symbolic dim with a size it may have at run time");
    *eq = both_static ? a.k == b.k : !negative;
    return true;
}

/* Equal on shape vectors (torch.onnx's expand(-1) pattern: which entries are -1) is a
 * constant wherever the answer does not depend on the symbols' values. */
bool cv_equal_shapes(Cv *c)
{
    Dim a[ONNX_MAX_LIST], b[ONNX_MAX_LIST];
    int na, nb, ra, rb;
    if (!shape_entries(c, 0, a, &na, &ra) || !shape_entries(c, 1, b, &nb, &rb))
        return false;
    if (na != nb && na != 1 && nb != 1)
        return cv_invalid(c, "compares shape vectors of %d and %d entries", na, nb);
    int n = na > nb ? na : nb;
    double eq[ONNX_MAX_LIST];
    for (int i = 0; i < n; i++) {
        bool e = false;
        if (!dims_equal_known(c, a[na == 1 ? 0 : i], b[nb == 1 ? 0 : i], &e))
            return false;
        eq[i] = e;
    }
    cv_define_const(c, 0, DT_BOOL, ra > rb ? ra : rb, (int64_t[]){n}, eq);
    return true;
}

/* Where with a constant condition choosing between shape vectors is a shape vector. */
bool cv_where_shapes(Cv *c)
{
    int64_t nc;
    const double *cond = cv_const(c, 0, &nc);
    if (!cond)
        return cv_unsupported(c, "choosing between shape vectors by a condition that is not "
                              "a constant");
    Dim x[ONNX_MAX_LIST], y[ONNX_MAX_LIST], d[ONNX_MAX_LIST];
    int nx, ny, rx, ry;
    if (!shape_entries(c, 1, x, &nx, &rx) || !shape_entries(c, 2, y, &ny, &ry))
        return false;
    int64_t n = nc > nx ? nc : nx;
    n = n > ny ? n : ny;
    if ((nc != n && nc != 1) || (nx != n && nx != 1) || (ny != n && ny != 1) || n > ONNX_MAX_LIST)
        return cv_invalid(c, "chooses between shape vectors of %lld, %d and %d entries",
                          (long long)nc, nx, ny);
    for (int64_t i = 0; i < n; i++)
        d[i] = cond[nc == 1 ? 0 : i] != 0 ? x[nx == 1 ? 0 : i] : y[ny == 1 ? 0 : i];
    cv_define_shape(c, 0, d, (int)n, rx > ry ? rx : ry);
    return true;
}

/* ---------------------------------------------------------------- shapes and constants */

bool conv_shape(Cv *c)
{
    const OnnxValue *sv = cv_shape_value(c, 0); /* a shape vector's own shape is static */
    int x = sv ? -1 : cv_in(c, 0);
    if (!sv && x < 0)
        return false;
    Type t = sv ? sv->type : cv_type(c, x);
    int64_t from = cv_int(c, "start", 0), to = cv_int(c, "end", t.rank);
    from = from < 0 ? from + t.rank : from, to = to < 0 ? to + t.rank : to;
    from = from < 0 ? 0 : from > t.rank ? t.rank : from;
    to = to < from ? from : to > t.rank ? t.rank : to;
    cv_define_shape(c, 0, t.dim + from, (int)(to - from), 1); /* a constant where all static */
    return true;
}

bool conv_size(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    bool overflow = false;
    Dim n = type_numel(&t, &overflow);
    if (!dim_is_static(n)) {
        cv_define_shape(c, 0, &n, 1, 0);
        return true;
    }
    double d = (double)n.k;
    cv_define_const(c, 0, DT_I64, 0, NULL, &d);
    return true;
}

bool conv_constant(Cv *c)
{
    const Onnx__AttributeProto *a;
    if ((a = cv_attr(c, "value")) && a->t) {
        OnnxValue v = {.name = c->node->output[0]};
        if (!onnx_tensor_read(c->o, a->t, &v))
            return false;
        int64_t dims[COIL_MAX_RANK];
        for (int i = 0; i < v.type.rank; i++)
            dims[i] = v.type.dim[i].k;
        cv_define_const(c, 0, v.type.dt, v.type.rank, dims, v.data);
        free(v.data);
        return true;
    }
    if ((a = cv_attr(c, "value_float")) || (a = cv_attr(c, "value_int"))) {
        bool f = strcmp(a->name, "value_float") == 0;
        double d = f ? a->f : (double)a->i;
        cv_define_const(c, 0, f ? DT_F32 : DT_I64, 0, NULL, &d);
        return true;
    }
    if ((a = cv_attr(c, "value_floats")) || (a = cv_attr(c, "value_ints"))) {
        bool f = strcmp(a->name, "value_floats") == 0;
        int64_t n = f ? (int64_t)a->n_floats : (int64_t)a->n_ints;
        double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
        if (!d)
            abort();
        for (int64_t i = 0; i < n; i++)
            d[i] = f ? a->floats[i] : (double)a->ints[i];
        cv_define_const(c, 0, f ? DT_F32 : DT_I64, 1, &n, d);
        free(d);
        return true;
    }
    return cv_unsupported(c, "only value, value_float(s) and value_int(s) are supported");
}

bool conv_constant_of_shape(Cv *c)
{
    int n;
    Dim shape[ONNX_MAX_LIST];
    if (!cv_shape(c, 0, shape, &n))
        return false;
    if (n > COIL_MAX_RANK)
        return cv_unsupported(c, "a result of rank %d", n);
    Type t = {.dt = DT_F32, .rank = n};
    memcpy(t.dim, shape, (size_t)n * sizeof *shape);
    double value = 0;
    const Onnx__AttributeProto *a = cv_attr(c, "value");
    if (a && a->t) {
        OnnxValue v = {.name = c->node->output[0]};
        if (!onnx_tensor_read(c->o, a->t, &v))
            return false;
        t.dt = v.type.dt;
        value = v.numel == 1 ? v.data[0] : NAN;
        free(v.data);
        if (v.numel != 1)
            return cv_invalid(c, "value must hold one element");
    }
    c->out[0] = b_full(cv_b(c), value, &t);
    return true;
}

/* Range(0, a symbolic dim, 1), torch.arange over a symbolic size: an iota of that size. */
static bool range_to_dim(Cv *c, const OnnxValue *limit)
{
    int64_t n0, n2;
    const double *start = cv_const(c, 0, &n0), *delta = cv_const(c, 2, &n2);
    if (!start || !delta || *start != 0 || *delta != 1 || limit->numel != 1)
        return cv_unsupported(c, "a range to a symbolic limit other than 0, 1, ..., limit - 1");
    Type t = type_make(onnx_value(c->o, c->node->input[0])->type.dt, 1, (int64_t[]){1});
    t.dim[0] = limit->sdim[0];
    c->out[0] = b_iota(cv_b(c), &t, 0);
    return c->out[0] >= 0;
}

bool conv_range(Cv *c)
{
    const OnnxValue *symbolic_limit = cv_shape_value(c, 1);
    if (symbolic_limit)
        return range_to_dim(c, symbolic_limit);
    int64_t n0, n1, n2;
    const double *start = cv_const(c, 0, &n0), *limit = cv_const(c, 1, &n1),
                 *delta = cv_const(c, 2, &n2);
    for (size_t i = 0; i < 3; i++)
        if (!(i == 0 ? start : i == 1 ? limit : delta))
            return cv_need_const(c, i); /* the result's size depends on them */
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    DType dt = cv_type(c, x).dt;
    if (*delta == 0)
        return cv_invalid(c, "delta is 0");
    double count = ceil((*limit - *start) / *delta);
    int64_t n = count > 0 ? (int64_t)count : 0;
    if (n > (1 << 24))
        return cv_unsupported(c, "a range of %lld elements", (long long)n);
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    if (!d)
        abort();
    for (int64_t i = 0; i < n; i++)
        d[i] = dtype_round(dt, *start + (double)i * *delta);
    cv_define_const(c, 0, dt, 1, &n, d);
    free(d);
    return true;
}

/* A [rows, cols] bool mask: col - row compared with k (op OP_GE: above the k-th diagonal). */
static int diagonal_mask(Cv *c, const Type *t, int op, int64_t k)
{
    Type it = *t;
    it.dt = DT_I64;
    it.rank = 2;
    it.dim[0] = t->dim[t->rank - 2], it.dim[1] = t->dim[t->rank - 1];
    int diff = cv_bin(c, OP_SUB, b_iota(cv_b(c), &it, 1), b_iota(cv_b(c), &it, 0));
    return cv_bin(c, op, diff, cv_scalar(c, (double)k, DT_I64));
}

bool conv_eye_like(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    if (t.rank != 2)
        return cv_invalid(c, "the operand must have rank 2");
    if (cv_attr(c, "dtype") && !onnx_dtype((int)cv_int(c, "dtype", 1), &t.dt))
        return cv_unsupported(c, "dtype %s", onnx_dtype_name((int)cv_int(c, "dtype", 1)));
    int mask = diagonal_mask(c, &t, OP_EQ, cv_int(c, "k", 0));
    c->out[0] = cv_cast(c, mask, t.dt);
    return true;
}

bool conv_trilu(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    if (t.rank < 2)
        return cv_invalid(c, "the operand must have rank 2 or more");
    bool upper = cv_int(c, "upper", 1) != 0;
    int keep = diagonal_mask(c, &t, upper ? OP_GE : OP_LE, 0);
    if (cv_has(c, 1)) { /* k may be a run-time scalar: the mask compares against it */
        int k = cv_cast(c, cv_in(c, 1), DT_I64);
        Type it = type_make(DT_I64, 2, (int64_t[]){0, 0});
        it.dim[0] = t.dim[t.rank - 2], it.dim[1] = t.dim[t.rank - 1];
        int diff = cv_bin(c, OP_SUB, b_iota(cv_b(c), &it, 1), b_iota(cv_b(c), &it, 0));
        keep = cv_bin(c, upper ? OP_GE : OP_LE, diff, cv_reshape(c, k, 0, NULL));
    }
    c->out[0] = cv_where(c, keep, x, cv_scalar(c, 0, t.dt));
    return true;
}

bool conv_one_hot(Cv *c)
{
    int idx = cv_in(c, 0), values = cv_in(c, 2), axis;
    int64_t numel;
    const double *depth = cv_const(c, 1, &numel);
    if (idx < 0 || values < 0)
        return false;
    if (!depth)
        return cv_need_const(c, 1);
    if (numel != 1)
        return cv_invalid(c, "depth must be a scalar");
    Type it = cv_type(c, idx), vt = cv_type(c, values);
    if (vt.rank != 1 || !dim_eq(vt.dim[0], dim_static(2)))
        return cv_invalid(c, "values must be [off, on]");
    if (!axis_norm(cv_int(c, "axis", -1), it.rank + 1, &axis))
        return cv_invalid(c, "axis is out of range");
    int64_t d = (int64_t)depth[0];
    int i64 = cv_cast(c, idx, DT_I64);
    if (dtype_info[it.dt].is_float) /* float indices: their whole part */
        i64 = cv_cast(c, cv_trunc(c, idx), DT_I64);
    i64 = wrap_indices(c, i64, d);
    Type ot = it;
    ot.dt = DT_I64, ot.rank = it.rank + 1;
    Dim dims[COIL_MAX_RANK];
    for (int i = 0, j = 0; i < ot.rank; i++)
        dims[i] = i == axis ? dim_static(1) : it.dim[j++];
    memcpy(ot.dim, dims, sizeof dims);
    ot.dim[axis] = dim_static(d);
    int at = cv_reshape(c, i64, ot.rank, dims);
    int hot = cv_bin(c, OP_EQ, b_iota(cv_b(c), &ot, axis), at);
    int off = b_slice(cv_b(c), values, 0, 0, 1, 1), on = b_slice(cv_b(c), values, 0, 1, 2, 1);
    c->out[0] = cv_where(c, hot, cv_reshape(c, on, 0, NULL), cv_reshape(c, off, 0, NULL));
    return true;
}

/* ---------------------------------------------------------------- padding */

bool conv_pad(Cv *c)
{
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"}; /* PadMode's order */
    int x = cv_in(c, 0), np, na, mode = 0;
    int64_t pads[ONNX_MAX_LIST], axes[ONNX_MAX_LIST];
    char name[32];
    cv_str(c, "mode", "constant", name, sizeof name);
    if (x < 0 || !cv_ints(c, 1, "pads", pads, &np) || !cv_ints(c, 3, NULL, axes, &na))
        return false;
    while (mode < 4 && strcmp(name, modes[mode]))
        mode++;
    if (mode == 4)
        return cv_unsupported(c, "mode '%s'", name);
    Type t = cv_type(c, x);
    if (na < 0) {
        na = t.rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    }
    if (np != 2 * na)
        return cv_invalid(c, "pads has %d entries for %d axes", np, na);
    int value = cv_has(c, 2) ? cv_in(c, 2) : cv_scalar(c, 0, t.dt);
    for (int i = 0; i < na; i++)
        if (!axis_norm(axes[i], t.rank, (int[]){0}))
            return cv_invalid(c, "axis %lld is out of range", (long long)axes[i]);
    for (int i = 0; i < na && x >= 0; i++) {
        int a;
        axis_norm(axes[i], t.rank, &a);
        x = window_pad(cv_b(c), NULL, x, a, pads[i], pads[i + na], (PadMode)mode, value);
    }
    c->out[0] = x;
    return x >= 0;
}

/* HannWindow, HammingWindow, BlackmanWindow of a constant size: constants, sum over k of
 * a_k cos(2 pi k n / D), D the size (periodic) or the size less one (symmetric). */
bool conv_window(Cv *c)
{
    int64_t numel;
    const double *size = cv_const(c, 0, &numel);
    if (!size)
        return cv_need_const(c, 0);
    DType dt = DT_F32;
    if (cv_attr(c, "output_datatype") && !onnx_dtype((int)cv_int(c, "output_datatype", 1), &dt))
        return cv_unsupported(c, "output_datatype %s", onnx_dtype_name((int)cv_int(c, "output_datatype", 1)));
    int64_t n = numel == 1 ? (int64_t)size[0] : -1;
    if (n < 0 || n > (1 << 24))
        return cv_invalid(c, "size must be a scalar between 0 and 2^24");
    const char *op = c->node->op_type;
    double a[3] = {0.5, -0.5, 0}; /* Hann */
    if (strcmp(op, "HammingWindow") == 0)
        a[0] = 25.0 / 46, a[1] = -(1 - 25.0 / 46);
    else if (strcmp(op, "BlackmanWindow") == 0)
        a[0] = 0.42, a[1] = -0.5, a[2] = 0.08;
    double denom = cv_int(c, "periodic", 1) ? (double)n : (double)(n - 1);
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    if (!d)
        abort();
    for (int64_t i = 0; i < n; i++) {
        double t = 2 * M_PI * (double)i / denom;
        d[i] = a[0] + a[1] * cos(t) + a[2] * cos(2 * t);
    }
    cv_define_const(c, 0, dt, 1, &n, d);
    free(d);
    return true;
}

/* LRN: x / (bias + alpha/size * sum of x^2 over the `size` channels around each)^beta. */
bool conv_lrn(Cv *c)
{
    int x = cv_in(c, 0);
    int64_t size = cv_int(c, "size", 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    if (t.rank < 3 || !dim_is_static(t.dim[1]) || size < 1)
        return cv_invalid(c, "needs x[N, C, ...] with a static C and size >= 1");
    int64_t ch = t.dim[1].k, before = (size - 1) / 2, after = size - 1 - before;
    int sq = cv_bin(c, OP_MUL, x, x), zero = cv_scalar(c, 0, t.dt);
    if ((sq = window_pad(cv_b(c), NULL, sq, 1, before, after, PAD_CONSTANT, zero)) < 0)
        return false;
    int64_t dims[2] = {ch, size};
    double *idx = malloc((size_t)(ch * size) * sizeof *idx);
    if (!idx)
        abort();
    for (int64_t i = 0; i < ch; i++)
        for (int64_t k = 0; k < size; k++)
            idx[i * size + k] = (double)(i + k);
    Type it = type_make(DT_I64, 2, dims);
    int win = b_gather(cv_b(c), sq, b_constant(cv_b(c), &it, idx), 1); /* [N, C, size, ...] */
    free(idx);
    int64_t axis = 2;
    int s = b_reduce(cv_b(c), OP_SUM, win, 1, &axis, false);
    double alpha = cv_float(c, "alpha", 1e-4), beta = cv_float(c, "beta", 0.75);
    int base = cv_bin(c, OP_ADD, cv_scalar(c, cv_float(c, "bias", 1.0), t.dt),
                      cv_bin(c, OP_MUL, s, cv_scalar(c, alpha / (double)size, t.dt)));
    c->out[0] = cv_bin(c, OP_DIV, x, cv_bin(c, OP_POW, base, cv_scalar(c, beta, t.dt)));
    return true;
}

/* CenterCropPad: each axis cut or zero-padded to its target size, centred (the odd
 * element at the end). */
bool conv_center_crop_pad(Cv *c)
{
    int x = cv_in(c, 0), n, na;
    int64_t shape[ONNX_MAX_LIST], axes[ONNX_MAX_LIST];
    if (x < 0 || !cv_ints(c, 1, NULL, shape, &n) || !cv_ints(c, CV_ATTR_ONLY, "axes", axes, &na))
        return false;
    Type t = cv_type(c, x);
    if (na < 0) {
        na = t.rank;
        for (int i = 0; i < na; i++)
            axes[i] = i;
    }
    if (n != na)
        return cv_invalid(c, "shape has %d entries for %d axes", n, na);
    int zero = cv_scalar(c, 0, t.dt);
    for (int i = 0; i < na && x >= 0; i++) {
        int a;
        if (!axis_norm(axes[i], t.rank, &a))
            return cv_invalid(c, "axis %lld is out of range", (long long)axes[i]);
        Type now = cv_type(c, x);
        if (!dim_is_static(now.dim[a]))
            return cv_unsupported(c, "a symbolic axis");
        int64_t len = now.dim[a].k, want = shape[i];
        if (want < len)
            x = b_slice(cv_b(c), x, a, (len - want) / 2, (len - want) / 2 + want, 1);
        else if (want > len)
            x = window_pad(cv_b(c), NULL, x, a, (want - len) / 2, want - len - (want - len) / 2,
                           PAD_CONSTANT, zero);
    }
    c->out[0] = x;
    return x >= 0;
}

/* ---------------------------------------------------------------- depth and space */

static bool static_type(Cv *c, const Type *t)
{
    for (int i = 0; i < t->rank; i++)
        if (!dim_is_static(t->dim[i]))
            return cv_unsupported(c, "symbolic dims");
    return true;
}

/* reshape to `split`, transpose by perm, reshape to `out` */
static int regroup(Cv *c, int x, int ns, const int64_t *split, const int64_t *perm, int no,
                   const int64_t *out)
{
    Dim d[COIL_MAX_RANK];
    for (int i = 0; i < ns; i++)
        d[i] = dim_static(split[i]);
    int y = b_transpose(cv_b(c), cv_reshape(c, x, ns, d), ns, perm);
    for (int i = 0; i < no; i++)
        d[i] = dim_static(out[i]);
    return cv_reshape(c, y, no, d);
}

bool conv_depth_to_space(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    int64_t b = cv_int(c, "blocksize", 0);
    if (t.rank != 4 || b <= 0)
        return cv_invalid(c, "needs x[N,C,H,W] and a blocksize > 0");
    if (!static_type(c, &t))
        return false;
    if (t.dim[1].k % (b * b))
        return cv_invalid(c, "C is not a multiple of blocksize squared");
    int64_t n = t.dim[0].k, ch = t.dim[1].k, h = t.dim[2].k, w = t.dim[3].k, cb = ch / (b * b);
    int64_t out[4] = {n, cb, h * b, w * b};
    if (cv_str_is(c, "mode", "DCR", "CRD"))
        c->out[0] = regroup(c, x, 6, (int64_t[]){n, cb, b, b, h, w}, (int64_t[]){0, 1, 4, 2, 5, 3},
                            4, out);
    else
        c->out[0] = regroup(c, x, 6, (int64_t[]){n, b, b, cb, h, w}, (int64_t[]){0, 3, 4, 1, 5, 2},
                            4, out);
    return true;
}

bool conv_space_to_depth(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    int64_t b = cv_int(c, "blocksize", 0);
    if (t.rank != 4 || b <= 0)
        return cv_invalid(c, "needs x[N,C,H,W] and a blocksize > 0");
    if (!static_type(c, &t))
        return false;
    int64_t n = t.dim[0].k, ch = t.dim[1].k, h = t.dim[2].k, w = t.dim[3].k;
    if (h % b || w % b)
        return cv_invalid(c, "H and W must be multiples of blocksize");
    c->out[0] = regroup(c, x, 6, (int64_t[]){n, ch, h / b, b, w / b, b},
                        (int64_t[]){0, 3, 5, 1, 2, 4}, 4, (int64_t[]){n, ch * b * b, h / b, w / b});
    return true;
}

/* ---------------------------------------------------------------- identity and casts */

bool conv_identity(Cv *c)
{
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv) {
        cv_define_shape(c, 0, sv->sdim, (int)sv->numel, sv->type.rank);
        return true;
    }
    c->out[0] = cv_in(c, 0);
    return c->out[0] >= 0;
}

static bool cast_to(Cv *c, DType dt)
{
    const OnnxValue *sv = cv_shape_value(c, 0);
    if (sv && (dt == DT_I64 || dt == DT_I32)) {
        cv_define_shape(c, 0, sv->sdim, (int)sv->numel, sv->type.rank);
        return true;
    }
    c->out[0] = cv_cast(c, cv_in(c, 0), dt);
    return c->out[0] >= 0;
}

bool conv_cast(Cv *c)
{
    DType dt;
    int to = (int)cv_int(c, "to", 0);
    if (!onnx_dtype(to, &dt))
        return cv_unsupported(c, "a cast to %s, which coil does not have", onnx_dtype_name(to));
    return cast_to(c, dt);
}

bool conv_cast_like(Cv *c)
{
    int like = cv_in(c, 1);
    return like >= 0 && cast_to(c, cv_type(c, like).dt);
}

#endif
