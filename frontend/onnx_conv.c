/* onnx_conv.c — ONNX's convolutions and pools: Conv as the IR's conv op, ConvTranspose as
 * a conv of the zero-upsampled input; MaxPool, AveragePool and LpPool as window.c's
 * decompositions (windows gathered, then reduced); Resize as gathers or matmuls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COIL_HAVE_ONNX
#include "frontend/onnx_int.h"
#include "frontend/norm.h"
#include "frontend/resize.h"
#include "frontend/window.h"

enum { MAX_SPATIAL = WINDOW_MAX_SPATIAL };

/* A per-axis attribute list (strides, dilations) of n entries, def when absent. */
static bool axis_ints(Cv *c, const char *name, int n, int64_t def, int64_t *out)
{
    int64_t v[ONNX_MAX_LIST];
    int got;
    if (!cv_ints(c, CV_ATTR_ONLY, name, v, &got))
        return false;
    if (got >= 0 && got != n)
        return cv_invalid(c, "%s has %d entries for %d spatial axes", name, got, n);
    for (int i = 0; i < n; i++) {
        out[i] = got < 0 ? def : v[i];
        if (out[i] < 1 && def == 1)
            return cv_invalid(c, "%s must be positive", name);
    }
    return true;
}

/* The geometry of x[N, C, spatial...] under kernel k: strides, dilations, pads or auto_pad,
 * and ceil_mode (pools); window.c checks and sizes it. */
static bool window_setup(Cv *c, const Type *x, const int64_t *k, Window *w)
{
    int64_t pads[ONNX_MAX_LIST];
    int np;
    if (!window_init(cv_b(c), NULL, x, w) || !axis_ints(c, "strides", w->n, 1, w->stride) ||
        !axis_ints(c, "dilations", w->n, 1, w->dil) || !cv_ints(c, CV_ATTR_ONLY, "pads", pads, &np))
        return false;
    if (np >= 0 && np != 2 * w->n)
        return cv_invalid(c, "pads has %d entries for %d spatial axes", np, w->n);
    char mode[32];
    cv_str(c, "auto_pad", "NOTSET", mode, sizeof mode);
    for (int i = 0; i < w->n; i++) {
        int64_t span = (k[i] - 1) * w->dil[i] + 1;
        w->k[i] = k[i];
        w->pad0[i] = np > 0 ? pads[i] : 0, w->pad1[i] = np > 0 ? pads[w->n + i] : 0;
        if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
            int64_t out = (w->in[i] + w->stride[i] - 1) / w->stride[i];
            int64_t total = (out - 1) * w->stride[i] + span - w->in[i];
            total = total > 0 ? total : 0;
            w->pad0[i] = mode[5] == 'U' ? total / 2 : total - total / 2;
            w->pad1[i] = total - w->pad0[i];
        } else if (strcmp(mode, "VALID") == 0)
            w->pad0[i] = w->pad1[i] = 0;
        else if (strcmp(mode, "NOTSET") != 0)
            return cv_invalid(c, "auto_pad '%s'", mode);
    }
    return window_size(cv_b(c), w, cv_int(c, "ceil_mode", 0) != 0);
}

/* The convolution of x by weight[M, C/G, k...] with w's strides, dilations and pads (the
 * IR's conv op), plus the bias. */
static int convolve(Cv *c, int x, int weight, int bias, const Window *w, int64_t groups)
{
    int64_t pads[2 * MAX_SPATIAL];
    for (int i = 0; i < w->n; i++)
        pads[i] = w->pad0[i], pads[w->n + i] = w->pad1[i] + w->extra[i];
    Attr a[4] = {attr_ints("stride", w->n, w->stride), attr_ints("padding", 2 * w->n, pads),
                 attr_ints("dilation", w->n, w->dil), attr_int("groups", groups)};
    int y = b_op(cv_b(c), OP_CONV, (int[]){x, weight}, 2, a, 4, NULL);
    if (bias >= 0) {
        Dim bd[COIL_MAX_RANK] = {dim_static(cv_type(c, weight).dim[0].k)};
        for (int i = 0; i < w->n; i++)
            bd[1 + i] = dim_static(1);
        y = cv_bin(c, OP_ADD, y, cv_reshape(c, bias, 1 + w->n, bd));
    }
    return y;
}

/* The operands' shapes a convolution needs: x[N, C, ...] and w[M, C/G, k...] static but N. */
static bool conv_shapes(Cv *c, int x, int weight, int64_t groups, bool transposed, int64_t *k)
{
    Type xt = cv_type(c, x), wt = cv_type(c, weight);
    if (xt.rank != wt.rank || xt.rank < 3)
        return cv_invalid(c, "x and w need the same rank, 3 or more");
    for (int i = 0; i < wt.rank; i++)
        if (!dim_is_static(wt.dim[i]) || (i > 0 && !dim_is_static(xt.dim[i])))
            return cv_unsupported(c, "symbolic dims other than the batch");
    int64_t ch = xt.dim[1].k;
    int64_t per = transposed ? wt.dim[0].k : wt.dim[1].k * groups;
    if (groups < 1 || ch % groups || per != ch || (!transposed && wt.dim[0].k % groups))
        return cv_invalid(c, "the channels (%lld) do not match the weight and group %lld",
                          (long long)ch, (long long)groups);
    int64_t ks[ONNX_MAX_LIST];
    int nk;
    if (!cv_ints(c, CV_ATTR_ONLY, "kernel_shape", ks, &nk))
        return false;
    for (int i = 0; i < wt.rank - 2; i++) {
        k[i] = wt.dim[2 + i].k;
        if (nk >= 0 && (nk != wt.rank - 2 || ks[i] != k[i]))
            return cv_invalid(c, "kernel_shape disagrees with the weight's shape");
    }
    return true;
}

bool conv_conv(Cv *c)
{
    int x = cv_in(c, 0), weight = cv_in(c, 1), bias = cv_has(c, 2) ? cv_in(c, 2) : -1;
    int64_t groups = cv_int(c, "group", 1), k[MAX_SPATIAL + 5];
    Window w;
    if (x < 0 || weight < 0 || !conv_shapes(c, x, weight, groups, false, k))
        return false;
    Type xt = cv_type(c, x);
    if (!window_setup(c, &xt, k, &w))
        return false;
    c->out[0] = convolve(c, x, weight, bias, &w, groups);
    return true;
}

/* ConvTranspose: its pads from pads, auto_pad or output_shape, then window.c's transposed
 * convolution, plus the bias. */
bool conv_conv_transpose(Cv *c)
{
    int x = cv_in(c, 0), weight = cv_in(c, 1), bias = cv_has(c, 2) ? cv_in(c, 2) : -1;
    int64_t groups = cv_int(c, "group", 1), k[MAX_SPATIAL + 5];
    if (x < 0 || weight < 0 || !conv_shapes(c, x, weight, groups, true, k))
        return false;
    Type xt = cv_type(c, x);
    int n = xt.rank - 2;
    if (n > MAX_SPATIAL)
        return cv_unsupported(c, "%d spatial axes", n);
    int64_t stride[MAX_SPATIAL], dil[MAX_SPATIAL], outpad[MAX_SPATIAL], pads[ONNX_MAX_LIST],
        oshape[ONNX_MAX_LIST];
    int np, no;
    if (!axis_ints(c, "strides", n, 1, stride) || !axis_ints(c, "dilations", n, 1, dil) ||
        !axis_ints(c, "output_padding", n, 0, outpad) || !cv_ints(c, CV_ATTR_ONLY, "pads", pads, &np) ||
        !cv_ints(c, CV_ATTR_ONLY, "output_shape", oshape, &no))
        return false;
    char mode[32];
    cv_str(c, "auto_pad", "NOTSET", mode, sizeof mode);
    bool same = strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0;
    if ((np >= 0 && np != 2 * n) || (no >= 0 && no != n))
        return cv_invalid(c, "pads or output_shape of the wrong length");
    Window w;
    if (!window_init(cv_b(c), NULL, &xt, &w))
        return false;
    for (int i = 0; i < n; i++) {
        int64_t span = (k[i] - 1) * dil[i] + 1, full = stride[i] * (w.in[i] - 1) + outpad[i] + span;
        int64_t p0, p1;
        if (np < 0 && (same || no >= 0)) { /* onnx's reference: pads from the output shape */
            int64_t out = no >= 0 ? oshape[i] : w.in[i] * stride[i], total = full - out;
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor, as Python's // */
            p0 = strcmp(mode, "SAME_UPPER") == 0 ? half : total - half;
            p1 = total - p0;
        } else {
            p0 = np > 0 ? pads[i] : 0, p1 = np > 0 ? pads[n + i] : 0;
            if (no >= 0) /* an explicit output shape wins: cut or extend the end */
                p1 = full - p0 - oshape[i];
        }
        w.stride[i] = stride[i], w.dil[i] = dil[i], w.pad0[i] = p0, w.pad1[i] = p1, w.extra[i] = outpad[i];
    }
    int y = window_conv_transpose(cv_b(c), x, weight, groups, &w);
    c->out[0] = norm_affine(cv_b(c), y, -1, bias);
    return true;
}

/* CausalConvWithState (opset 27): a depthwise 1-D convolution over the past state (zeros
 * without one) followed by the input, no padding; the new state is the last K-1 steps. */
bool conv_causal_conv(Cv *c)
{
    int x = cv_in(c, 0), weight = cv_in(c, 1), bias = cv_has(c, 2) ? cv_in(c, 2) : -1;
    if (x < 0 || weight < 0)
        return false;
    Type xt = cv_type(c, x), wt = cv_type(c, weight);
    if (xt.rank != 3 || wt.rank != 3 || !dim_is_static(xt.dim[1]) || !dim_is_static(xt.dim[2]) ||
        !dim_is_static(wt.dim[2]) || !dim_eq(wt.dim[0], xt.dim[1]))
        return cv_unsupported(c, "other than x[B, C, L] with a static weight[C, 1, K]");
    int64_t k = wt.dim[2].k, ch = xt.dim[1].k;
    int past;
    if (cv_has(c, 3))
        past = cv_in(c, 3);
    else {
        Type pt = xt;
        pt.dim[2] = dim_static(k - 1);
        past = b_full(cv_b(c), 0, &pt);
    }
    int padded = k > 1 ? b_concat(cv_b(c), (int[]){past, x}, 2, 2) : x;
    int64_t len = xt.dim[2].k + k - 1;
    Window w = {.n = 1, .in = {len}, .k = {k}, .stride = {1}, .dil = {1}, .out = {len - k + 1}};
    int y = convolve(c, padded, weight, bias, &w, ch);
    char act[16];
    cv_str(c, "activation", "none", act, sizeof act);
    if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0)
        y = cv_bin(c, OP_MUL, y, cv_un(c, OP_SIGMOID, y));
    else if (strcmp(act, "none") != 0)
        return cv_unsupported(c, "activation '%s'", act);
    c->out[0] = y;
    c->out[1] = b_slice(cv_b(c), padded, 2, len - (k - 1), len, 1);
    return true;
}

/* ---------------------------------------------------------------- pools */

static bool pool_window(Cv *c, int x, Window *w)
{
    int64_t k[ONNX_MAX_LIST];
    int nk;
    if (!cv_ints(c, CV_ATTR_ONLY, "kernel_shape", k, &nk))
        return false;
    Type t = cv_type(c, x);
    if (nk != t.rank - 2)
        return cv_invalid(c, "kernel_shape needs one entry per spatial axis");
    if (c->node->n_output > 1)
        return cv_unsupported(c, "the Indices result");
    return window_setup(c, &t, k, w);
}

bool conv_max_pool(Cv *c)
{
    int x = cv_in(c, 0);
    Window w;
    if (x < 0 || !pool_window(c, x, &w))
        return false;
    c->out[0] = window_max_pool(cv_b(c), x, &w);
    return true;
}

bool conv_average_pool(Cv *c)
{
    int x = cv_in(c, 0);
    Window w;
    if (x < 0 || !pool_window(c, x, &w))
        return false;
    c->out[0] = window_avg_pool(cv_b(c), x, &w, cv_int(c, "count_include_pad", 0) != 0);
    return true;
}

/* LpPool: (sum over the window of |x|^p)^(1/p), zero padding. */
bool conv_lp_pool(Cv *c)
{
    int x = cv_in(c, 0);
    Window w;
    if (x < 0 || !pool_window(c, x, &w))
        return false;
    DType dt = cv_type(c, x).dt;
    double p = (double)cv_int(c, "p", 2);
    int a = cv_un(c, OP_ABS, x);
    int powed = p == 2 ? cv_bin(c, OP_MUL, a, a) : cv_bin(c, OP_POW, a, cv_scalar(c, p, dt));
    int sum = window_reduce(cv_b(c), OP_SUM, window_gather(cv_b(c), powed, &w, 0), &w);
    c->out[0] = p == 2 ? cv_un(c, OP_SQRT, sum) : cv_bin(c, OP_POW, sum, cv_scalar(c, 1.0 / p, dt));
    return true;
}

/* ---------------------------------------------------------------- resize */

/* The output sizes and scales of every axis (sizes win; keep_aspect_ratio_policy). */
static bool resize_sizes(Cv *c, const Type *t, const int64_t *axes, int na, double *scale,
                         int64_t *out)
{
    int64_t n_sc = 0, n_sz = 0;
    const double *sc = cv_has(c, 2) ? cv_const(c, 2, &n_sc) : NULL;
    const double *sz = cv_has(c, 3) ? cv_const(c, 3, &n_sz) : NULL;
    if (cv_has(c, 2) && !sc)
        return cv_need_const(c, 2);
    if (cv_has(c, 3) && !sz)
        return cv_need_const(c, 3);
    for (int i = 0; i < t->rank; i++)
        scale[i] = 1, out[i] = t->dim[i].k;
    if (sz && n_sz == na) {
        char policy[24];
        cv_str(c, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy);
        double pick = strcmp(policy, "not_larger") == 0 ? INFINITY : -INFINITY;
        for (int i = 0; i < na; i++) {
            double s = sz[i] / (double)t->dim[axes[i]].k;
            scale[axes[i]] = s, out[axes[i]] = (int64_t)sz[i];
            pick = strcmp(policy, "not_larger") == 0 ? fmin(pick, s) : fmax(pick, s);
        }
        if (strcmp(policy, "stretch") != 0)
            for (int i = 0; i < na; i++) {
                scale[axes[i]] = pick;
                out[axes[i]] = (int64_t)(pick * (double)t->dim[axes[i]].k + 0.5);
            }
        return true;
    }
    if (!sc || n_sc != na)
        return cv_invalid(c, "needs scales or sizes with one entry per resized axis");
    for (int i = 0; i < na; i++) {
        scale[axes[i]] = sc[i];
        out[axes[i]] = (int64_t)(sc[i] * (double)t->dim[axes[i]].k);
    }
    return true;
}

/* String attribute `name` (def when absent) as its index in names; false (the node's error)
 * when it is none of them. */
static bool resize_enum(Cv *c, const char *name, const char *def, const char *const *names, int n,
                        int *out)
{
    char buf[32];
    *out = name_index(names, n, cv_str(c, name, def, buf, sizeof buf));
    return *out >= 0 || cv_invalid(c, "%s '%s'", name, buf);
}

bool conv_resize(Cv *c)
{
    int x = cv_in(c, 0), na, mode, coord, nearest;
    if (x < 0)
        return false;
    if (c->o->opset < 11) /* scales its second operand, no coordinate modes */
        return cv_unsupported(c, "Resize-10 (opset 10): coil converts Resize from opset 11");
    Type t = cv_type(c, x);
    for (int i = 0; i < t.rank; i++)
        if (!dim_is_static(t.dim[i]))
            return cv_unsupported(c, "symbolic dims");
    if (!resize_enum(c, "mode", "nearest", resize_mode_names, 3, &mode) ||
        !resize_enum(c, "coordinate_transformation_mode", "half_pixel", resize_coord_names, 6, &coord) ||
        !resize_enum(c, "nearest_mode", "round_prefer_floor", resize_nearest_names, 4, &nearest))
        return false;
    Resize r = {.mode = (ResizeMode)mode, .coord = (ResizeCoord)coord,
                .nearest = (ResizeNearest)nearest, .cubic_a = cv_float(c, "cubic_coeff_a", -0.75),
                .extrapolation = cv_float(c, "extrapolation_value", 0),
                .antialias = cv_int(c, "antialias", 0) != 0,
                .exclude_outside = cv_int(c, "exclude_outside", 0) != 0};
    int64_t raw[ONNX_MAX_LIST], axes[COIL_MAX_RANK], nroi = 0;
    if (!cv_ints(c, CV_ATTR_ONLY, "axes", raw, &na))
        return false;
    if (na < 0) {
        na = t.rank;
        for (int i = 0; i < na; i++)
            raw[i] = i;
    }
    for (int i = 0; i < na; i++) /* in the attribute's order, as the reference resizes */
        if (!axis_norm(raw[i], t.rank, (int[]){0}))
            return cv_invalid(c, "axis %lld is out of range", (long long)raw[i]);
        else
            axes[i] = raw[i] < 0 ? raw[i] + t.rank : raw[i];
    const double *roi = cv_has(c, 1) ? cv_const(c, 1, &nroi) : NULL;
    if (r.coord == COORD_TF_CROP_AND_RESIZE && !roi)
        return cv_need_const(c, 1);
    if (r.coord == COORD_TF_CROP_AND_RESIZE && nroi != 2 * na)
        return cv_invalid(c, "roi needs two entries per resized axis");
    double scale[COIL_MAX_RANK];
    int64_t out[COIL_MAX_RANK];
    if (!resize_sizes(c, &t, axes, na, scale, out))
        return false;
    for (int i = 0; i < na && x >= 0; i++) {
        int64_t a = axes[i];
        double axis_roi[2] = {roi ? roi[i] : 0, roi ? roi[na + i] : 1};
        if (fabs(scale[a] - 1) < 1e-9 && out[a] == t.dim[a].k && axis_roi[0] == 0 && axis_roi[1] == 1)
            continue;
        x = resize_axis(cv_b(c), x, (int)a, &r, scale[a], out[a], axis_roi);
    }
    c->out[0] = x;
    return x >= 0;
}

#endif
