/* window.c — pools and padding decomposed onto coil's existing ops: the input padded by
 * concat, its sliding windows gathered with constant indices (one gather per spatial axis),
 * then a reduction. Gradients come from those ops' rules (gather's is an index_add). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
    for (int i = 0; i < w->n && x >= 0; i++) {
        int64_t dims[2] = {w->out[i], w->k[i]}, count = dims[0] * dims[1];
        double *idx = malloc((size_t)(count ? count : 1) * sizeof *idx);
        if (!idx)
            abort();
        for (int64_t o = 0; o < w->out[i]; o++)
            for (int64_t k = 0; k < w->k[i]; k++)
                idx[o * w->k[i] + k] = (double)(o * w->stride[i] + k * w->dil[i]);
        Type it = type_make(DT_I64, 2, dims);
        x = b_gather(b, x, b_constant(b, &it, idx), 2 + 2 * i);
        free(idx);
    }
    return x;
}

int window_reduce(Builder *b, int op, int windows, const Window *w)
{
    int64_t axes[WINDOW_MAX_SPATIAL];
    for (int i = 0; i < w->n; i++)
        axes[i] = 3 + 2 * i;
    return b_reduce(b, op, windows, w->n, axes, false);
}

int window_max_pool(Builder *b, int x, const Window *w)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
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
