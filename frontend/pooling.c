/* pooling.c — the .coil pooling, padding, transposed convolution and resize forms with
 * PyTorch's arguments, defaults and checks (F.max_pool1d/2d/3d, F.avg_pool*, adaptive
 * pooling to 1, F.pad, F.conv_transpose*, F.interpolate), lowered through window.c and
 * resize.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/eval.h"
#include "frontend/resize.h"
#include "frontend/window.h"

/* Argument slots of max_pool and avg_pool (builtins.c's table): four shared, then each's. */
enum { POOL_X, POOL_KERNEL, POOL_STRIDE, POOL_PADDING };
enum { MAX_DILATION = 4, MAX_CEIL_MODE, AVG_CEIL_MODE = 4, AVG_INCLUDE_PAD };

/* window.c's check that failed, as the diagnostic at the call. */
static bool window_failed(Lower *L)
{
    Value v;
    return built(L, -1, &v);
}

/* A list of got entries for n spatial axes: one for every axis, or one per axis. */
static bool one_per_axis(Lower *L, Loc loc, const char *what, int got, int n)
{
    return got == 1 || got == n ||
           fail(L, loc, "%s has %d entries for %d spatial axes; give one number for every axis "
                "or one per axis", what, got, n);
}

/* Argument i with one entry per spatial axis: a number for every axis, or a list of one or
 * n (torch's int or tuple); def when absent. */
static bool per_axis(Lower *L, const char *op, const BArgs *a, int i, const char *name, int n,
                     const int64_t *def, int64_t *out)
{
    if (!a->given[i]) {
        memcpy(out, def, sizeof *out * (size_t)n);
        return true;
    }
    char what[64];
    snprintf(what, sizeof what, "%s: %s", op, name);
    int got;
    int64_t *v;
    if (!int_list(L, a->loc[i], &a->v[i], what, &got, &v) || !one_per_axis(L, a->loc[i], what, got, n))
        return false;
    for (int k = 0; k < n; k++)
        out[k] = v[got == 1 ? 0 : k];
    return true;
}

static bool bool_arg(Lower *L, const char *op, const BArgs *a, int i, const char *name, bool *out)
{
    char what[64];
    snprintf(what, sizeof what, "%s: %s", op, name);
    return !a->given[i] || want_bool(L, a->loc[i], &a->v[i], what, out);
}

/* A pool's window over x: kernel, stride (the kernel's when absent), padding on both sides,
 * dilation (slot dil; -1: none, as avg_pool) and ceil_mode (slot ceil); torch allows at most
 * half the kernel of padding, so that every window holds an input element. */
static bool pool_window(Lower *L, const char *op, const BArgs *a, int dil, int ceil, int *x, Window *w)
{
    static const int64_t zeros[WINDOW_MAX_SPATIAL], ones[WINDOW_MAX_SPATIAL] = {1, 1, 1};
    int64_t pad[WINDOW_MAX_SPATIAL];
    bool ceil_mode = false;
    if (!arg_tensor(L, a, POOL_X, "x", x))
        return false;
    Type t = L->g->node[*x].type;
    if (!window_init(&L->b, op, &t, w))
        return window_failed(L);
    if (!per_axis(L, op, a, POOL_KERNEL, "kernel", w->n, ones, w->k) ||
        !per_axis(L, op, a, POOL_STRIDE, "stride", w->n, w->k, w->stride) ||
        !per_axis(L, op, a, POOL_PADDING, "padding", w->n, zeros, pad) ||
        (dil >= 0 && !per_axis(L, op, a, dil, "dilation", w->n, ones, w->dil)) ||
        !bool_arg(L, op, a, ceil, "ceil_mode", &ceil_mode))
        return false;
    for (int i = 0; i < w->n; i++)
        w->pad0[i] = w->pad1[i] = pad[i];
    if (!window_size(&L->b, w, ceil_mode))
        return window_failed(L);
    for (int i = 0; i < w->n; i++)
        if (pad[i] > w->k[i] / 2)
            return fail(L, a->loc[POOL_PADDING], "%s: padding %lld on spatial axis %d is more than "
                        "half the kernel (%lld), which PyTorch does not allow; pad x with pad() "
                        "first", op, (long long)pad[i], i, (long long)w->k[i]);
    return true;
}

/* max_pool(x, kernel, stride=kernel, padding=0, dilation=1, ceil_mode=false) */
bool bi_max_pool(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x;
    Window w;
    if (!pool_window(L, "max_pool", a, MAX_DILATION, MAX_CEIL_MODE, &x, &w))
        return false;
    L->b.loc = loc;
    return built(L, window_max_pool(&L->b, x, &w), out);
}

/* avg_pool(x, kernel, stride=kernel, padding=0, ceil_mode=false, count_include_pad=true) */
bool bi_avg_pool(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x;
    Window w;
    bool include_pad = true;
    if (!pool_window(L, "avg_pool", a, -1, AVG_CEIL_MODE, &x, &w) ||
        !bool_arg(L, "avg_pool", a, AVG_INCLUDE_PAD, "count_include_pad", &include_pad))
        return false;
    const Type *t = &L->g->node[x].type;
    char tb[256];
    if (!dtype_info[t->dt].is_float)
        return fail(L, a->loc[POOL_X], "avg_pool: x %s is not floating point; cast it first",
                    type_fmt(L->g, t, tb, sizeof tb));
    L->b.loc = loc;
    return built(L, window_avg_pool(&L->b, x, &w, include_pad), out);
}

static bool global_pool(Lower *L, Loc loc, const BArgs *a, const char *op, int code, Value *out)
{
    int x;
    if (!arg_tensor(L, a, 0, "x", &x))
        return false;
    L->b.loc = loc;
    return built(L, window_global_pool(&L->b, op, code, x), out);
}

bool bi_global_avg_pool(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    return global_pool(L, loc, a, "global_avg_pool", OP_MEAN, out);
}

bool bi_global_max_pool(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    return global_pool(L, loc, a, "global_max_pool", OP_MAX, out);
}

/* pad(x, pads, mode="constant", value=0): torch's F.pad, pads in pairs from the last axis
 * back ([left, right, top, bottom, ...]); negative pads cut. */
bool bi_pad(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"}; /* PadMode's order */
    int x, n, mode = 0, value = -1;
    int64_t *pads;
    if (!arg_tensor(L, a, 0, "x", &x) || !int_list(L, a->loc[1], &a->v[1], "pad: pads", &n, &pads))
        return false;
    while (a->given[2] && a->v[2].kind == V_STR && mode < 4 && strcmp(a->v[2].s, modes[mode]))
        mode++;
    if (a->given[2] && (a->v[2].kind != V_STR || mode == 4))
        return fail(L, a->loc[2], "pad: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\"");
    Type t = L->g->node[x].type;
    char tb[256];
    if (n % 2 || n > 2 * t.rank)
        return fail(L, a->loc[1], "pad: %d pads for x %s; give two per padded axis, the last axis "
                    "first ([left, right, top, bottom, ...])", n, type_fmt(L->g, &t, tb, sizeof tb));
    if (a->given[3] && mode != PAD_CONSTANT)
        return fail(L, a->loc[3], "pad: value applies only to mode \"constant\"");
    Value zero = v_int(0);
    if (mode == PAD_CONSTANT && !as_tensor(L, a->loc[3], a->given[3] ? &a->v[3] : &zero, t.dt, &value))
        return false;
    L->b.loc = loc;
    for (int i = 0; i < n / 2 && x >= 0; i++)
        x = window_pad(&L->b, "pad", x, t.rank - 1 - i, pads[2 * i], pads[2 * i + 1], (PadMode)mode, value);
    return built(L, x, out);
}

/* conv_transpose(x, w, stride=1, padding=0, output_padding=0, dilation=1, groups=1): PyTorch's
 * F.conv_transpose1d/2d/3d, w[C, M/groups, kernel...]; output_padding below the stride or
 * the dilation, as torch requires. */
bool bi_conv_transpose(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    static const int64_t zeros[WINDOW_MAX_SPATIAL], ones[WINDOW_MAX_SPATIAL] = {1, 1, 1};
    const char *op = "conv_transpose";
    int x, weight;
    int64_t groups = 1;
    Window w;
    if (!arg_tensor(L, a, 0, "x", &x) || !arg_tensor(L, a, 1, "w", &weight) ||
        (a->given[6] && !want_int(L, a->loc[6], &a->v[6], "conv_transpose: groups", &groups)))
        return false;
    Type t = L->g->node[x].type;
    if (!window_init(&L->b, op, &t, &w))
        return window_failed(L);
    if (!per_axis(L, op, a, 2, "stride", w.n, ones, w.stride) ||
        !per_axis(L, op, a, 3, "padding", w.n, zeros, w.pad0) ||
        !per_axis(L, op, a, 4, "output_padding", w.n, zeros, w.extra) ||
        !per_axis(L, op, a, 5, "dilation", w.n, ones, w.dil))
        return false;
    for (int i = 0; i < w.n; i++) {
        w.pad1[i] = w.pad0[i];
        if (w.pad0[i] < 0 || (w.extra[i] >= w.stride[i] && w.extra[i] >= w.dil[i]))
            return fail(L, a->loc[w.pad0[i] < 0 ? 3 : 4], "conv_transpose: spatial axis %d: padding "
                        "%lld must not be negative and output_padding %lld must be below the stride "
                        "(%lld) or the dilation (%lld)", i, (long long)w.pad0[i], (long long)w.extra[i],
                        (long long)w.stride[i], (long long)w.dil[i]);
    }
    L->b.loc = loc;
    return built(L, window_conv_transpose(&L->b, x, weight, groups, &w), out);
}

/* ---------------------------------------------------------------- resize */

/* resize's argument slots (builtins.c's table) */
enum { RESIZE_X, RESIZE_SIZE, RESIZE_SCALE, RESIZE_MODE, RESIZE_ALIGN };

/* F.interpolate's modes: the interpolation, where an output lies in the input without
 * align_corners (PyTorch's nearest is ONNX's asymmetric coordinates with floor; the others
 * half_pixel), and the spatial axes the name implies (0: any). */
static const struct ResizeForm {
    const char *name;
    ResizeMode mode;
    ResizeCoord coord;
    ResizeNearest nearest;
    int axes;
} resize_forms[] = {
    {"nearest", RESIZE_NEAREST, COORD_ASYMMETRIC, NEAREST_FLOOR, 0},
    {"nearest-exact", RESIZE_NEAREST, COORD_HALF_PIXEL, NEAREST_ROUND_PREFER_CEIL, 0},
    {"linear", RESIZE_LINEAR, COORD_HALF_PIXEL, 0, 0},
    {"bilinear", RESIZE_LINEAR, COORD_HALF_PIXEL, 0, 2},
    {"trilinear", RESIZE_LINEAR, COORD_HALF_PIXEL, 0, 3},
    {"cubic", RESIZE_CUBIC, COORD_HALF_PIXEL, 0, 0},
    {"bicubic", RESIZE_CUBIC, COORD_HALF_PIXEL, 0, 2},
};
enum { NRESIZE_FORMS = sizeof resize_forms / sizeof resize_forms[0] };

/* The mode argument's row (nearest when absent), its spatial axes checked. */
static const struct ResizeForm *resize_form(Lower *L, const BArgs *a, int n)
{
    const Value *v = &a->v[RESIZE_MODE];
    int i = 0;
    while (a->given[RESIZE_MODE] && i < NRESIZE_FORMS &&
           !(v->kind == V_STR && strcmp(v->s, resize_forms[i].name) == 0))
        i++;
    if (i == NRESIZE_FORMS) {
        fail(L, a->loc[RESIZE_MODE], "resize: mode must be \"nearest\", \"nearest-exact\", "
             "\"linear\" (\"bilinear\", \"trilinear\") or \"cubic\" (\"bicubic\")");
        return NULL;
    }
    const struct ResizeForm *f = &resize_forms[i];
    if (f->axes && f->axes != n) {
        fail(L, a->loc[RESIZE_MODE], "resize: mode \"%s\" takes %d spatial axes, x has %d; "
             "\"%s\" takes any number", f->name, f->axes, n, f->mode == RESIZE_LINEAR ? "linear" : "cubic");
        return NULL;
    }
    return f;
}

/* x[N, C, spatial...] with 1 to 3 static spatial axes: their count and sizes. */
static bool resize_input(Lower *L, const BArgs *a, int *x, int *n, int64_t *in)
{
    char tb[256];
    if (!arg_tensor(L, a, RESIZE_X, "x", x))
        return false;
    const Type *t = &L->g->node[*x].type;
    *n = t->rank - 2;
    if (*n < 1 || *n > WINDOW_MAX_SPATIAL)
        return fail(L, a->loc[RESIZE_X], "resize: x %s has %d spatial axes; resize takes x[N, C, "
                    "spatial...] with 1 to %d", type_fmt(L->g, t, tb, sizeof tb), *n < 0 ? 0 : *n,
                    WINDOW_MAX_SPATIAL);
    for (int i = 0; i < *n; i++) {
        if (!dim_is_static(t->dim[2 + i]))
            return fail(L, a->loc[RESIZE_X], "resize: spatial axis %d of x %s is symbolic; the "
                        "interpolation needs static sizes", i, type_fmt(L->g, t, tb, sizeof tb));
        in[i] = t->dim[2 + i].k;
    }
    return true;
}

/* The output sizes: size's (one number or one per axis), or floor(in * scale) as
 * F.interpolate's; *by_scale when scale gave them. */
static bool resize_sizes(Lower *L, Loc loc, const BArgs *a, int n, const int64_t *in, int64_t *out,
                         double *scale, bool *by_scale)
{
    int got, slot = a->given[RESIZE_SIZE] ? RESIZE_SIZE : RESIZE_SCALE;
    const Value *v = &a->v[slot];
    int64_t *sizes = NULL;
    double *scales = NULL, one;
    if (a->given[RESIZE_SIZE] == a->given[RESIZE_SCALE])
        return fail(L, a->given[RESIZE_SIZE] ? a->loc[RESIZE_SCALE] : loc, "resize: give %s",
                    a->given[RESIZE_SIZE] ? "size or scale, not both" : "the output's size or a scale");
    *by_scale = slot == RESIZE_SCALE;
    if (!*by_scale && !int_list(L, a->loc[slot], v, "resize: size", &got, &sizes))
        return false;
    if (*by_scale && v_is_number(v))
        one = v_number(v), scales = &one, got = 1;
    else if (*by_scale && v->kind != V_LIST)
        return wrong_kind(L, a->loc[slot], v, "resize: scale", "a number or a list of numbers");
    else if (*by_scale && !number_list(L, a->loc[slot], v, "resize: scale", &got, &scales))
        return false;
    if (!one_per_axis(L, a->loc[slot], *by_scale ? "resize: scale" : "resize: size", got, n))
        return false;
    for (int i = 0; i < n; i++) {
        scale[i] = *by_scale ? scales[got == 1 ? 0 : i] : 0;
        out[i] = *by_scale ? (int64_t)floor((double)in[i] * scale[i]) : sizes[got == 1 ? 0 : i];
        if (*by_scale && !(scale[i] > 0 && isfinite(scale[i])))
            return fail(L, a->loc[slot], "resize: scale %g on spatial axis %d must be positive",
                        scale[i], i);
        if (*by_scale && out[i] < 1)
            return fail(L, a->loc[slot], "resize: scale %g leaves spatial axis %d of %lld elements "
                        "none (floor(%g)); the output needs at least one", scale[i], i,
                        (long long)in[i], (double)in[i] * scale[i]);
        if (out[i] < 1)
            return fail(L, a->loc[slot], "resize: size %lld on spatial axis %d; sizes must be at "
                        "least 1", (long long)out[i], i);
    }
    return true;
}

/* resize(x, size=, scale=, mode="nearest", align_corners=false): PyTorch's F.interpolate
 * over x[N, C, spatial...], one axis after another (the interpolations are separable). */
bool bi_resize(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x, n;
    int64_t in[WINDOW_MAX_SPATIAL], size[WINDOW_MAX_SPATIAL];
    double scale[WINDOW_MAX_SPATIAL];
    bool by_scale = false, align = false;
    const struct ResizeForm *f;
    if (!resize_input(L, a, &x, &n, in) || !(f = resize_form(L, a, n)) ||
        !resize_sizes(L, loc, a, n, in, size, scale, &by_scale) ||
        !bool_arg(L, "resize", a, RESIZE_ALIGN, "align_corners", &align))
        return false;
    if (a->given[RESIZE_ALIGN] && f->mode == RESIZE_NEAREST)
        return fail(L, a->loc[RESIZE_ALIGN], "resize: align_corners applies to the interpolating "
                    "modes only (linear, bilinear, trilinear, cubic, bicubic), not \"%s\"", f->name);
    char tb[256];
    const Type *t = &L->g->node[x].type;
    if (f->mode != RESIZE_NEAREST && !dtype_info[t->dt].is_float)
        return fail(L, a->loc[RESIZE_X], "resize: x %s is not floating point, which mode \"%s\" "
                    "interpolates; cast it first, or use mode \"nearest\"",
                    type_fmt(L->g, t, tb, sizeof tb), f->name);
    Resize r = {.mode = f->mode, .coord = align ? COORD_ALIGN_CORNERS : f->coord,
                .nearest = f->nearest, .cubic_a = -0.75};
    L->b.loc = loc;
    for (int i = 0; i < n && x >= 0; i++) {
        /* PyTorch places outputs by the scale given (not out / in), except with align_corners */
        double s = by_scale && !align ? scale[i] : (double)size[i] / (double)in[i];
        if (size[i] != in[i] || s != 1)
            x = resize_axis(&L->b, x, 2 + i, &r, s, size[i], (const double[]){0, 1});
    }
    return built(L, x, out);
}
