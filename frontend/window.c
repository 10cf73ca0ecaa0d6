/* window.c — pools and padding decomposed onto coil's existing ops: the input padded by
 * concat, its sliding windows gathered with constant indices (one gather per spatial axis),
 * then a reduction. Gradients come from those ops' rules (gather's is an index_add). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/window.h"

/* The builder's sticky error with its own code, "WHAT: ..." when what names the op. */
static bool window_fail(Builder *b, const char *what, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool window_fail(Builder *b, const char *what, int code, const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(b->err, code, "%s%s%s", what ? what : "", what ? ": " : "", msg);
    return false;
}

bool window_init(Builder *b, const char *what, const Type *x, Window *w)
{
    char tb[256];
    *w = (Window){.what = what, .n = x->rank - 2};
    if (w->n < 1 || w->n > WINDOW_MAX_SPATIAL)
        return window_fail(b, what, ERR_UNSUPPORTED, "x %s has %d spatial axes; coil takes "
                           "x[N, C, spatial...] with 1 to %d", type_fmt(b->g, x, tb, sizeof tb),
                           w->n < 0 ? 0 : w->n, WINDOW_MAX_SPATIAL);
    for (int i = 0; i < w->n; i++) {
        if (!dim_is_static(x->dim[2 + i]))
            return window_fail(b, what, ERR_UNSUPPORTED, "spatial axis %d of x %s is symbolic; "
                               "windows need static sizes", i, type_fmt(b->g, x, tb, sizeof tb));
        w->in[i] = x->dim[2 + i].k, w->k[i] = w->stride[i] = w->dil[i] = 1;
    }
    return true;
}

/* One axis's checks and output size. */
static bool axis_size(Builder *b, Window *w, int i, bool ceil_mode)
{
    if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1)
        return window_fail(b, w->what, ERR_INPUT, "spatial axis %d: kernel %lld, stride %lld and "
                           "dilation %lld must each be at least 1", i, (long long)w->k[i],
                           (long long)w->stride[i], (long long)w->dil[i]);
    if (w->pad0[i] < 0 || w->pad1[i] < 0)
        return window_fail(b, w->what, ERR_UNSUPPORTED, "spatial axis %d: negative padding "
                           "(%lld, %lld)", i, (long long)w->pad0[i], (long long)w->pad1[i]);
    int64_t span = (w->k[i] - 1) * w->dil[i] + 1, padded = w->in[i] + w->pad0[i] + w->pad1[i];
    int64_t room = padded - span;
    if (room < 0)
        return window_fail(b, w->what, ERR_INPUT, "spatial axis %d: the padded input (%lld) is "
                           "shorter than the dilated kernel (%lld), which leaves no output", i,
                           (long long)padded, (long long)span);
    w->out[i] = room / w->stride[i] + 1, w->extra[i] = 0;
    if (ceil_mode && room % w->stride[i]) { /* a last, partial window: not one starting past the input */
        if (w->out[i] * w->stride[i] < w->in[i] + w->pad0[i])
            w->out[i]++;
        int64_t need = (w->out[i] - 1) * w->stride[i] + span;
        w->extra[i] = need > padded ? need - padded : 0;
    }
    return true;
}

bool window_size(Builder *b, Window *w, bool ceil_mode)
{
    for (int i = 0; i < w->n; i++)
        if (!axis_size(b, w, i, ceil_mode))
            return false;
    return true;
}

/* ---------------------------------------------------------------- padding */

int window_reverse(Builder *b, int x, int axis)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    if (!dim_is_static(t.dim[axis])) {
        window_fail(b, NULL, ERR_UNSUPPORTED, "reversing a symbolic axis");
        return -1;
    }
    int64_t n = t.dim[axis].k;
    double *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx)
        abort();
    for (int64_t i = 0; i < n; i++)
        idx[i] = (double)(n - 1 - i);
    Type it = type_make(DT_I64, 1, &n);
    int r = b_gather(b, x, b_constant(b, &it, idx), axis);
    free(idx);
    return r;
}

/* The part that a pad of `count` adds before (side 0) or after (side 1) the axis. */
static int pad_part(Builder *b, int x, int axis, int64_t count, int side, PadMode mode, int value)
{
    Type t;
    b_type_of(b, x, &t);
    int64_t len = t.dim[axis].k;
    t.dim[axis] = dim_static(count);
    switch (mode) {
    case PAD_CONSTANT: return b_expand(b, value, &t);
    case PAD_EDGE: return b_expand(b, side ? b_slice(b, x, axis, len - 1, len, 1) : b_slice(b, x, axis, 0, 1, 1), &t);
    case PAD_WRAP: return side ? b_slice(b, x, axis, 0, count, 1) : b_slice(b, x, axis, len - count, len, 1);
    case PAD_REFLECT: break;
    }
    int mirror = side ? b_slice(b, x, axis, len - 1 - count, len - 1, 1) : b_slice(b, x, axis, 1, count + 1, 1);
    return window_reverse(b, mirror, axis);
}

/* Whether the axis (len) can take these pads in this mode; the error when not. */
static bool pad_fits(Builder *b, const char *what, int axis, int64_t len, int64_t before,
                     int64_t after, PadMode mode)
{
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    int64_t most = mode == PAD_REFLECT ? len - 1 : mode == PAD_WRAP ? len : INT64_MAX;
    if (mode == PAD_EDGE && len == 0)
        most = 0;
    int64_t cut = (before < 0 ? -before : 0) + (after < 0 ? -after : 0);
    if (cut > len)
        return window_fail(b, what, ERR_INPUT, "pads (%lld, %lld) of axis %d cut %lld elements "
                           "from its %lld", (long long)before, (long long)after, axis,
                           (long long)cut, (long long)len);
    if (before <= most && after <= most)
        return true;
    return window_fail(b, what, ERR_UNSUPPORTED, "%s padding (%lld, %lld) of axis %d: the axis "
                       "has %lld elements, so at most %lld each side", names[mode],
                       (long long)before, (long long)after, axis, (long long)len, (long long)most);
}

int window_pad(Builder *b, const char *what, int x, int axis, int64_t before, int64_t after,
               PadMode mode, int value)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    if (!before && !after)
        return x;
    if (!dim_is_static(t.dim[axis])) {
        window_fail(b, what, ERR_UNSUPPORTED, "axis %d is symbolic; only static axes can be padded", axis);
        return -1;
    }
    int64_t len = t.dim[axis].k;
    if (!pad_fits(b, what, axis, len, before, after, mode))
        return -1;
    if (before < 0 || after < 0) { /* negative pads cut */
        x = b_slice(b, x, axis, before < 0 ? -before : 0, after < 0 ? len + after : len, 1);
        return window_pad(b, what, x, axis, before > 0 ? before : 0, after > 0 ? after : 0, mode, value);
    }
    Type vt;
    if (mode == PAD_CONSTANT && b_type_of(b, value, &vt) && vt.rank > 0) /* ONNX's [1] */
        value = b_reshape(b, value, &(Type){.dt = vt.dt, .rank = 0});
    int parts[3], n = 0;
    if (before)
        parts[n++] = pad_part(b, x, axis, before, 0, mode, value);
    parts[n++] = x;
    if (after)
        parts[n++] = pad_part(b, x, axis, after, 1, mode, value);
    return b_concat(b, parts, n, axis);
}

/* ---------------------------------------------------------------- windows and pools */

int window_gather(Builder *b, int x, const Window *w, double pad_value)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int v = -1;
    for (int i = 0; i < w->n; i++)
        if (w->pad0[i] || w->pad1[i] + w->extra[i]) {
            v = v < 0 ? b_scalar(b, pad_value, t.dt) : v;
            x = window_pad(b, w->what, x, 2 + i, w->pad0[i], w->pad1[i] + w->extra[i], PAD_CONSTANT, v);
        }
    for (int i = 0; i < w->n && x >= 0; i++)
        x = b_windows(b, x, 2 + 2 * i, w->out[i], w->k[i], w->stride[i], w->dil[i]);
    return x;
}

int window_reduce(Builder *b, int op, int windows, const Window *w)
{
    int64_t axes[WINDOW_MAX_SPATIAL];
    for (int i = 0; i < w->n; i++)
        axes[i] = 3 + 2 * i;
    return b_reduce(b, op, windows, w->n, axes, false);
}

/* Whether every window along axis i is a run of x's elements, the padding aside: dilation
 * 1, and each window meets x. A padding index then clamped to x's edge reads an element
 * of the same window, which leaves its maximum as it was. */
static bool clamps(const Window *w, int i)
{
    int64_t last = (w->out[i] - 1) * w->stride[i] - w->pad0[i]; /* windows start in order */
    return w->dil[i] == 1 && w->k[i] - 1 - w->pad0[i] >= 0 && last < w->in[i];
}

/* The maximum over axis i's windows of x [N, C, ...]: per kernel tap, x gathered at the
 * windows' indices clamped into x (no padding kernel), the taps' maximum taken pointwise
 * (one vectorised kernel; a reduction over a few taps would be a row kernel each). */
static int clamped_max(Builder *b, int x, const Window *w, int i)
{
    int64_t n = w->out[i];
    double *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx)
        abort();
    Type it = type_make(DT_I64, 1, &n);
    int y = -1;
    for (int64_t j = 0; j < w->k[i]; j++) {
        for (int64_t o = 0; o < n; o++) {
            int64_t at = o * w->stride[i] - w->pad0[i] + j;
            idx[o] = (double)(at < 0 ? 0 : at >= w->in[i] ? w->in[i] - 1 : at);
        }
        int tap = b_gather(b, x, b_constant(b, &it, idx), 2 + i);
        y = y < 0 ? tap : b_binary(b, OP_MAXIMUM, y, tap);
    }
    free(idx);
    return y;
}

/* Max pooling is separable: where every axis clamps, axis by axis from the last, a gather
 * per tap and their pointwise maximum (ResNet's 3x3 pool fuses into one kernel; its
 * padded, gathered form took four); else the padded windows of window_gather. A tap that
 * repeats an element gets none of the gradient where maximum gives it to the other: the
 * gathers' index_add sums each element's share once. */
int window_max_pool(Builder *b, int x, const Window *w)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    bool all = true;
    for (int i = 0; i < w->n; i++)
        all &= clamps(w, i);
    if (all) {
        for (int i = w->n - 1; i >= 0 && x >= 0; i--)
            x = clamped_max(b, x, w, i);
        return x;
    }
    DType dt = t.dt;
    double lowest = dt == DT_I8 ? -128 : dt == DT_I32 ? -2147483648.0 : dt == DT_I64 ? -0x1p63 : -INFINITY;
    return window_reduce(b, OP_MAX, window_gather(b, x, w, lowest), w);
}

/* How many of output o's window elements count along axis i: those inside the input, or
 * inside the input and its pads; never ceil_mode's extension. */
static double window_count(const Window *w, int i, int64_t o, bool include_pad)
{
    int64_t lo = include_pad ? 0 : w->pad0[i];
    int64_t hi = include_pad ? w->in[i] + w->pad0[i] + w->pad1[i] : w->pad0[i] + w->in[i];
    double n = 0;
    for (int64_t k = 0; k < w->k[i]; k++) {
        int64_t at = o * w->stride[i] + k * w->dil[i];
        n += at >= lo && at < hi;
    }
    return n;
}

int window_avg_pool(Builder *b, int x, const Window *w, bool include_pad)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int sum = window_reduce(b, OP_SUM, window_gather(b, x, w, 0), w);
    int64_t dims[WINDOW_MAX_SPATIAL], total = 1;
    for (int i = 0; i < w->n; i++)
        dims[i] = w->out[i], total *= w->out[i];
    double *count = malloc((size_t)(total ? total : 1) * sizeof *count);
    if (!count)
        abort();
    for (int64_t j = 0; j < total; j++) { /* the product of the axes' counts */
        int64_t rest = j;
        count[j] = 1;
        for (int i = w->n - 1; i >= 0; i--) {
            count[j] *= window_count(w, i, rest % w->out[i], include_pad);
            rest /= w->out[i];
        }
    }
    Type ct = type_make(t.dt, w->n, dims);
    int y = b_binary(b, OP_DIV, sum, b_constant(b, &ct, count));
    free(count);
    return y;
}

int window_global_pool(Builder *b, const char *what, int op, int x)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    char tb[256];
    if (t.rank < 3) {
        window_fail(b, what, ERR_INPUT, "x %s has no spatial axes; global pools take x[N, C, "
                    "spatial...]", type_fmt(b->g, &t, tb, sizeof tb));
        return -1;
    }
    int64_t axes[COIL_MAX_RANK];
    for (int i = 2; i < t.rank; i++)
        axes[i - 2] = i;
    return b_reduce(b, op, x, t.rank - 2, axes, true);
}

/* ---------------------------------------------------------------- transposed convolution */

/* weight[C, M/G, k...] as the conv weight [M, C/G, k...] of the transposed convolution: split
 * into groups, the channel axes swapped per group, the kernel flipped. */
static int transpose_weight(Builder *b, int weight, int64_t groups)
{
    Type t;
    if (!b_type_of(b, weight, &t))
        return -1;
    int n = t.rank - 2;
    int64_t cg = t.dim[0].k / groups, mg = t.dim[1].k, perm[COIL_MAX_RANK] = {0, 2, 1};
    Type split = {.dt = t.dt, .rank = 3 + n, .dim = {dim_static(groups), dim_static(cg), dim_static(mg)}};
    Type conv = {.dt = t.dt, .rank = 2 + n, .dim = {dim_static(groups * mg), dim_static(cg)}};
    for (int i = 0; i < n; i++) {
        split.dim[3 + i] = conv.dim[2 + i] = t.dim[2 + i];
        perm[3 + i] = 3 + i;
    }
    int wf = b_reshape(b, b_transpose(b, b_reshape(b, weight, &split), 3 + n, perm), &conv);
    for (int i = 0; i < n; i++)
        wf = window_reverse(b, wf, 2 + i);
    return wf;
}

/* x with stride-1 zeros after each element along axis, the trailing ones cut:
 * [.., in, 1] ++ zeros [.., in, s-1] -> [.., in*s] -> [.., (in-1)*s+1]. */
static int spread(Builder *b, int x, int axis, int64_t stride, int zero)
{
    Type t, col;
    b_type_of(b, x, &t);
    int64_t in = t.dim[axis].k;
    col = t;
    col.rank = t.rank + 1;
    memmove(col.dim + axis + 2, t.dim + axis + 1, (size_t)(t.rank - axis - 1) * sizeof *t.dim);
    col.dim[axis + 1] = dim_static(1);
    int c = b_reshape(b, x, &col);
    col.dim[axis + 1] = dim_static(stride - 1);
    int s = b_concat(b, (int[]){c, b_expand(b, zero, &col)}, 2, axis + 1);
    t.dim[axis] = dim_static(in * stride);
    return b_slice(b, b_reshape(b, s, &t), axis, 0, (in - 1) * stride + 1, 1);
}

/* The operands' checks: weight[C, M/groups, k...] static, of x's rank, C static and divisible. */
static bool transpose_fits(Builder *b, const Window *w, const Type *xt, const Type *wt, int64_t groups)
{
    char xb[256], wb[256];
    bool fixed = wt->rank == xt->rank && dim_is_static(xt->dim[1]);
    for (int i = 0; fixed && i < wt->rank; i++)
        fixed = dim_is_static(wt->dim[i]);
    type_fmt(b->g, xt, xb, sizeof xb), type_fmt(b->g, wt, wb, sizeof wb);
    if (!fixed)
        return window_fail(b, w->what, ERR_INPUT, "w %s does not fit x %s: w is [C, M/groups, "
                           "kernel...] with x's rank and static sizes, and x's channels static", wb, xb);
    int64_t ch = xt->dim[1].k;
    if (groups < 1 || ch % groups)
        return window_fail(b, w->what, ERR_INPUT, "x %s has %lld channels, which groups = %lld does "
                           "not divide", xb, (long long)ch, (long long)groups);
    if (wt->dim[0].k != ch)
        return window_fail(b, w->what, ERR_INPUT, "x %s has %lld channels, but w %s takes %lld (w's "
                           "dimension 0)", xb, (long long)ch, wb, (long long)wt->dim[0].k);
    return true;
}

int window_conv_transpose(Builder *b, int x, int weight, int64_t groups, Window *w)
{
    Type xt, wt;
    if (!b_type_of(b, x, &xt) || !b_type_of(b, weight, &wt) || !transpose_fits(b, w, &xt, &wt, groups))
        return -1;
    int n = w->n, zero = b_scalar(b, 0, xt.dt);
    int64_t pads[2 * WINDOW_MAX_SPATIAL], stride[WINDOW_MAX_SPATIAL], cut0[WINDOW_MAX_SPATIAL] = {0},
        cut1[WINDOW_MAX_SPATIAL] = {0};
    for (int i = 0; i < n; i++) {
        int64_t k = w->k[i] = wt.dim[2 + i].k, s = w->stride[i], in = w->in[i];
        if (s < 1 || w->dil[i] < 1 || w->extra[i] < 0) {
            window_fail(b, w->what, ERR_INPUT, "spatial axis %d: stride %lld and dilation %lld must "
                        "each be at least 1, output_padding %lld not negative", i, (long long)s,
                        (long long)w->dil[i], (long long)w->extra[i]);
            return -1;
        }
        /* the conv over the spread input: its pads are the span less the transposed pads */
        int64_t span = (k - 1) * w->dil[i] + 1, p0 = span - 1 - w->pad0[i], p1 = span - 1 - w->pad1[i] + w->extra[i];
        w->out[i] = (in - 1) * s + 1 + p0 + p1 - span + 1;
        if (w->out[i] < 1) {
            window_fail(b, w->what, ERR_INPUT, "spatial axis %d: the padding (%lld, %lld) leaves no "
                        "output of the %lld the input, stride, kernel and output_padding give", i,
                        (long long)w->pad0[i], (long long)w->pad1[i],
                        (long long)((in - 1) * s + span + w->extra[i]));
            return -1;
        }
        if (s > 1)
            x = spread(b, x, 2 + i, s, zero);
        cut0[i] = p0 < 0 ? p0 : 0, cut1[i] = p1 < 0 ? p1 : 0; /* negative pads cut first */
        pads[i] = p0 - cut0[i], pads[n + i] = p1 - cut1[i], stride[i] = 1;
    }
    for (int i = 0; i < n; i++)
        if (cut0[i] || cut1[i])
            x = window_pad(b, w->what, x, 2 + i, cut0[i], cut1[i], PAD_CONSTANT, zero);
    Attr a[4] = {attr_ints("stride", n, stride), attr_ints("padding", 2 * n, pads),
                 attr_ints("dilation", n, w->dil), attr_int("groups", groups)};
    return b_op(b, OP_CONV, (int[]){x, transpose_weight(b, weight, groups)}, 2, a, 4, NULL);
}
