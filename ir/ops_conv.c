/* ops_conv.c — convolution (x[N, C, spatial...] by w[M, C/groups, k...], 1 to 3 spatial
 * axes): its geometry and type rule, a direct reference evaluation in f64, the FLOP count,
 * the decomposition (im2col by constant gathers, then one matmul) and the gradient rules
 * (dX as a convolution of the zero-upsampled dY by the flipped, transposed weight; dW as
 * dY times the im2col columns). */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---------------------------------------------------------------- geometry */

/* A per-axis list: empty (def), one value for every axis, one per axis; padding also takes
 * two per axis, all the begins then all the ends (ONNX's order). */
static bool axis_list(const Node *n, const char *name, int axes, int64_t def, bool sides,
                      int64_t *lo, int64_t *hi, Err *e)
{
    const Attr *a = node_attr(n, name);
    int len = a ? a->n : 0;
    if (len != 0 && len != 1 && len != axes && !(sides && len == 2 * axes)) {
        err_set(e, ERR_INPUT, "conv: %s has %d entries for %d spatial axes; give 1, %d%s", name,
                len, axes, axes, sides ? " or two per axis (begins, then ends)" : "");
        return false;
    }
    for (int i = 0; i < axes; i++) {
        lo[i] = len == 0 ? def : len == 1 ? a->ints[0] : a->ints[i];
        if (hi)
            hi[i] = len == 2 * axes ? a->ints[axes + i] : lo[i];
    }
    return true;
}

static bool geometry_values_ok(const ConvGeom *c, Err *e)
{
    if (c->groups < 1)
        err_set(e, ERR_INPUT, "conv: groups = %lld must be at least 1", (long long)c->groups);
    for (int i = 0; err_ok(e) && i < c->n; i++) {
        if (c->stride[i] < 1 || c->dil[i] < 1)
            err_set(e, ERR_INPUT, "conv: spatial axis %d: stride %lld and dilation %lld must be "
                    "at least 1", i, (long long)c->stride[i], (long long)c->dil[i]);
        else if (c->pad0[i] < 0 || c->pad1[i] < 0)
            err_set(e, ERR_INPUT, "conv: spatial axis %d: padding %lld, %lld must not be "
                    "negative", i, (long long)c->pad0[i], (long long)c->pad1[i]);
    }
    return err_ok(e);
}

/* Output sizes, and the channel counts checked against groups. */
static bool geometry_sizes(const Graph *g, const Type *x, const Type *w, ConvGeom *c, Err *e)
{
    TypeText tx = type_text(g, x), tw = type_text(g, w);
    if (c->c != c->cg * c->groups)
        err_set(e, ERR_INPUT, "conv: x %s has %lld channels, but w %s with groups = %lld takes "
                "%lld (w's dimension 1 times groups)", tx.s, (long long)c->c, tw.s,
                (long long)c->groups, (long long)(c->cg * c->groups));
    else if (c->m % c->groups)
        err_set(e, ERR_INPUT, "conv: w %s has %lld output channels, not a multiple of groups = "
                "%lld", tw.s, (long long)c->m, (long long)c->groups);
    for (int i = 0; err_ok(e) && i < c->n; i++) {
        int64_t span = (c->k[i] - 1) * c->dil[i] + 1, room = c->in[i] + c->pad0[i] + c->pad1[i];
        if (c->k[i] < 1 || room < span)
            err_set(e, ERR_INPUT, "conv: spatial axis %d of x %s: the padded input (%lld) is "
                    "shorter than the dilated kernel (%lld), which leaves no output", i, tx.s,
                    (long long)room, (long long)span);
        else
            c->out[i] = (room - span) / c->stride[i] + 1;
    }
    return err_ok(e);
}

bool conv_geometry(const Graph *g, const Node *n, const Type *x, const Type *w, ConvGeom *c, Err *e)
{
    TypeText tx = type_text(g, x), tw = type_text(g, w);
    memset(c, 0, sizeof *c);
    if (x->rank < 3 || x->rank > 2 + CONV_MAX_AXES || w->rank != x->rank) {
        err_set(e, ERR_INPUT, "conv: x %s and w %s need the same rank, 3 to %d ([N, C, spatial...] "
                "and [M, C/groups, kernel...])", tx.s, tw.s, 2 + CONV_MAX_AXES);
        return false;
    }
    for (int i = 0; i < x->rank; i++)
        if (!dim_is_static(w->dim[i]) || (i > 0 && !dim_is_static(x->dim[i]))) {
            err_set(e, ERR_INPUT, "conv: x %s and w %s: only x's batch dimension may be symbolic",
                    tx.s, tw.s);
            return false;
        }
    c->n = x->rank - 2;
    c->c = x->dim[1].k, c->m = w->dim[0].k, c->cg = w->dim[1].k;
    c->groups = node_int(n, "groups");
    for (int i = 0; i < c->n; i++)
        c->in[i] = x->dim[2 + i].k, c->k[i] = w->dim[2 + i].k;
    return axis_list(n, "stride", c->n, 1, false, c->stride, NULL, e) &&
           axis_list(n, "dilation", c->n, 1, false, c->dil, NULL, e) &&
           axis_list(n, "padding", c->n, 0, true, c->pad0, c->pad1, e) &&
           geometry_values_ok(c, e) && geometry_sizes(g, x, w, c, e);
}

bool infer_conv(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const Type *x = &in[0], *w = &in[1];
    ConvGeom c;
    if (!dtype_info[x->dt].is_float || w->dt != x->dt) {
        err_set(e, ERR_INPUT, "conv: x %s and w %s must have one float dtype; cast them",
                type_text(g, x).s, type_text(g, w).s);
        return false;
    }
    if (!conv_geometry(g, n, x, w, &c, e))
        return false;
    *out = *x;
    out->dim[1] = dim_static(c.m);
    for (int i = 0; i < c.n; i++)
        out->dim[2 + i] = dim_static(c.out[i]);
    return true;
}

/* ---------------------------------------------------------------- evaluation */

/* The geometry padded to three spatial axes (the missing ones of size 1), so one loop
 * nest serves 1-D, 2-D and 3-D. */
static void geometry_3d(ConvGeom *c)
{
    for (int i = c->n; i < CONV_MAX_AXES; i++)
        c->in[i] = c->k[i] = c->stride[i] = c->dil[i] = c->out[i] = 1, c->pad0[i] = c->pad1[i] = 0;
}

/* One output element: the sum over the group's channels and the kernel's taps that land
 * inside x (the padding reads zeros). */
static double conv_at(const ConvGeom *c, const double *x, const double *w, const int64_t *o)
{
    double acc = 0;
    for (int64_t ch = 0; ch < c->cg; ch++)
        for (int64_t a = 0; a < c->k[0]; a++) {
            int64_t i0 = o[0] * c->stride[0] - c->pad0[0] + a * c->dil[0];
            for (int64_t b = 0; i0 >= 0 && i0 < c->in[0] && b < c->k[1]; b++) {
                int64_t i1 = o[1] * c->stride[1] - c->pad0[1] + b * c->dil[1];
                for (int64_t d = 0; i1 >= 0 && i1 < c->in[1] && d < c->k[2]; d++) {
                    int64_t i2 = o[2] * c->stride[2] - c->pad0[2] + d * c->dil[2];
                    if (i2 < 0 || i2 >= c->in[2])
                        continue;
                    acc += x[((ch * c->in[0] + i0) * c->in[1] + i1) * c->in[2] + i2] *
                           w[((ch * c->k[0] + a) * c->k[1] + b) * c->k[2] + d];
                }
            }
        }
    return acc;
}

bool eval_conv(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    Type x = {.dt = DT_F32, .rank = in[0].rank}, w = {.dt = DT_F32, .rank = in[1].rank};
    for (int i = 0; i < x.rank; i++)
        x.dim[i] = dim_static(in[0].shape[i]), w.dim[i] = dim_static(in[1].shape[i]);
    ConvGeom c;
    if (!conv_geometry(NULL, n, &x, &w, &c, e))
        return false;
    geometry_3d(&c);
    int64_t batch = in[0].shape[0], mg = c.m / c.groups;
    int64_t xs = c.in[0] * c.in[1] * c.in[2], ws = c.cg * c.k[0] * c.k[1] * c.k[2];
    double *y = out->d;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t m = 0; m < c.m; m++) {
            const double *xg = in[0].d + (b * c.c + m / mg * c.cg) * xs, *wm = in[1].d + m * ws;
            for (int64_t o0 = 0; o0 < c.out[0]; o0++)
                for (int64_t o1 = 0; o1 < c.out[1]; o1++)
                    for (int64_t o2 = 0; o2 < c.out[2]; o2++)
                        *y++ = conv_at(&c, xg, wm, (int64_t[]){o0, o1, o2});
        }
    return true;
}

/* A multiply and an add per output element, channel of its group and kernel tap. */
double flops_conv(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n;
    double taps = 1;
    for (int i = 1; i < in[1].rank; i++)
        taps *= (double)in[1].shape[i];
    return 2.0 * (double)out->n * taps;
}

/* ---------------------------------------------------------------- building blocks */


static int reshape_dims(Builder *b, int x, int rank, const Dim *dims)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    t.rank = rank;
    memcpy(t.dim, dims, sizeof(Dim) * (size_t)rank);
    return b_reshape(b, x, &t);
}

/* x with `before` and `after` zeros along axis (concatenated). */
static int pad_zeros(Builder *b, int x, int axis, int64_t before, int64_t after)
{
    Type t;
    if (!b_type_of(b, x, &t) || (before == 0 && after == 0))
        return x;
    int zero = b_scalar(b, 0, t.dt), parts[3], np = 0;
    int64_t count[2] = {before, after};
    for (int side = 0; side < 2; side++) {
        if (side)
            parts[np++] = x;
        if (!count[side])
            continue;
        Type f = t;
        f.dim[axis] = dim_static(count[side]);
        parts[np++] = b_expand(b, zero, &f);
    }
    return b_concat(b, parts, np, axis);
}

/* x[..., L, ...] along axis with stride-1 zeros after each element, the last dropped:
 * [.., L, 1] ++ zeros [.., L, s-1] -> [.., L*s] -> the first (L-1)*s+1. */
static int spread_zeros(Builder *b, int x, int axis, int64_t stride)
{
    Type t;
    if (!b_type_of(b, x, &t) || stride == 1)
        return x;
    int64_t len = t.dim[axis].k;
    Dim d[COIL_MAX_RANK];
    memcpy(d, t.dim, sizeof d);
    memmove(d + axis + 2, d + axis + 1, sizeof(Dim) * (size_t)(t.rank - axis - 1));
    d[axis + 1] = dim_static(1);
    int col = reshape_dims(b, x, t.rank + 1, d);
    Type z = t;
    z.rank = t.rank + 1;
    memcpy(z.dim, d, sizeof d);
    z.dim[axis + 1] = dim_static(stride - 1);
    int parts[2] = {col, b_expand(b, b_scalar(b, 0, t.dt), &z)};
    int spread = b_concat(b, parts, 2, axis + 1);
    t.dim[axis] = dim_static(len * stride);
    return b_slice(b, reshape_dims(b, spread, t.rank, t.dim), axis, 0, (len - 1) * stride + 1, 1);
}

/* x reversed along axis (a gather of constant indices). */
static int reverse_axis(Builder *b, int x, int axis)
{
    Type t;
    if (!b_type_of(b, x, &t) || t.dim[axis].k <= 1)
        return x;
    int64_t len = t.dim[axis].k;
    double idx[1024];
    if (len > 1024) {
        err_set(b->err, ERR_INPUT, "conv: a kernel axis of %lld taps is too long", (long long)len);
        return -1;
    }
    for (int64_t i = 0; i < len; i++)
        idx[i] = (double)(len - 1 - i);
    Type it = type_make(DT_I64, 1, &len);
    return b_gather(b, x, b_constant(b, &it, idx), axis);
}

/* x[N, C, s...] padded and gathered into windows [N, C, o1, k1, o2, k2, ...]: one gather
 * of constant indices [o, k] per spatial axis. */
static int conv_windows(Builder *b, int x, const ConvGeom *c)
{
    for (int i = 0; i < c->n; i++)
        x = pad_zeros(b, x, 2 + i, c->pad0[i], c->pad1[i]);
    for (int i = 0; i < c->n && x >= 0; i++)
        x = b_windows(b, x, 2 + 2 * i, c->out[i], c->k[i], c->stride[i], c->dil[i]);
    return x;
}

int b_windows(Builder *b, int x, int64_t axis, int64_t out, int64_t k, int64_t stride,
              int64_t dil)
{
    int64_t dims[2] = {out, k}, count = out * k;
    double *idx = malloc(sizeof *idx * (size_t)(count ? count : 1));
    if (!idx) {
        err_set(b->err, ERR_MEMORY, "out of memory for %lld window indices", (long long)count);
        return -1;
    }
    for (int64_t o = 0; o < out; o++)
        for (int64_t j = 0; j < k; j++)
            idx[o * k + j] = (double)(o * stride + j * dil);
    Type it = type_make(DT_I64, 2, dims);
    int y = b_gather(b, x, b_constant(b, &it, idx), axis);
    free(idx);
    return y;
}

/* im2col: x as columns [N, G, C/G * K, O] (K the kernel's taps, O the output positions),
 * rows ordered (channel, taps...) as w's are. A 1x1 kernel with unit strides and no padding
 * is x itself, reshaped. */
static int conv_columns(Builder *b, int x, const ConvGeom *c)
{
    Type xt;
    if (!b_type_of(b, x, &xt))
        return -1;
    int64_t k = 1, o = 1;
    bool pointwise = true;
    for (int i = 0; i < c->n; i++) {
        k *= c->k[i], o *= c->out[i];
        pointwise &= c->k[i] == 1 && c->stride[i] == 1 && c->pad0[i] == 0 && c->pad1[i] == 0;
    }
    int cols = x;
    if (!pointwise) {
        int win = conv_windows(b, x, c);
        int64_t perm[COIL_MAX_RANK] = {0, 1};
        for (int i = 0; i < c->n; i++)
            perm[2 + i] = 3 + 2 * i, perm[2 + c->n + i] = 2 + 2 * i;
        cols = b_transpose(b, win, 2 + 2 * c->n, perm);
    }
    Dim d[4] = {xt.dim[0], dim_static(c->groups), dim_static(c->cg * k), dim_static(o)};
    return reshape_dims(b, cols, 4, d);
}

/* y[N, M, o...] from the columns and w: [G, M/G, C/G*K] @ [N, G, C/G*K, O]. */
int dec_conv(Builder *b, const Node *n, const int *in)
{
    Type xt, wt;
    ConvGeom c;
    if (!b_type_of(b, in[0], &xt) || !b_type_of(b, in[1], &wt) ||
        !conv_geometry(b->g, n, &xt, &wt, &c, b->err))
        return -1;
    int64_t k = 1;
    for (int i = 0; i < c.n; i++)
        k *= c.k[i];
    Dim wd[3] = {dim_static(c.groups), dim_static(c.m / c.groups), dim_static(c.cg * k)};
    int y = b_matmul(b, reshape_dims(b, in[1], 3, wd), conv_columns(b, in[0], &c));
    Dim yd[COIL_MAX_RANK] = {xt.dim[0], dim_static(c.m)};
    for (int i = 0; i < c.n; i++)
        yd[2 + i] = dim_static(c.out[i]);
    return reshape_dims(b, y, 2 + c.n, yd);
}

/* ---------------------------------------------------------------- gradients */

/* A conv node built from per-axis geometry (padding as begins then ends). */
static int conv_build(Builder *b, int x, int w, int axes, const int64_t *stride,
                      const int64_t *pad0, const int64_t *pad1, const int64_t *dil, int64_t groups)
{
    int64_t pads[2 * CONV_MAX_AXES];
    for (int i = 0; i < axes; i++)
        pads[i] = pad0[i], pads[axes + i] = pad1[i];
    Attr a[4] = {attr_ints("stride", axes, stride), attr_ints("padding", 2 * axes, pads),
                 attr_ints("dilation", axes, dil), attr_int("groups", groups)};
    int in[2] = {x, w};
    return b_op(b, OP_CONV, in, 2, a, 4, NULL);
}

/* w[M, C/G, k...] -> [C, M/G, k...] per group, flipped along every kernel axis. */
static int transposed_kernel(Builder *b, int w, const ConvGeom *c)
{
    int64_t mg = c->m / c->groups;
    Dim d[COIL_MAX_RANK] = {dim_static(c->groups), dim_static(mg), dim_static(c->cg)};
    int64_t perm[COIL_MAX_RANK] = {0, 2, 1};
    for (int i = 0; i < c->n; i++)
        d[3 + i] = dim_static(c->k[i]), perm[3 + i] = 3 + i;
    int t = b_transpose(b, reshape_dims(b, w, 3 + c->n, d), 3 + c->n, perm);
    d[0] = dim_static(c->c), d[1] = dim_static(mg);
    for (int i = 0; i < c->n; i++)
        d[2 + i] = dim_static(c->k[i]);
    t = reshape_dims(b, t, 2 + c->n, d);
    for (int i = 0; i < c->n; i++)
        t = reverse_axis(b, t, 2 + i);
    return t;
}

/* dX: dY spread by the stride, padded so that every x position sees the taps that read it
 * (span-1-pad0 before; what makes the length x's after; a negative pad crops), then
 * convolved at unit stride with the flipped, transposed kernel. */
static int conv_grad_x(Builder *b, int dy, int w, const ConvGeom *c)
{
    int64_t pad0[CONV_MAX_AXES], pad1[CONV_MAX_AXES], one[CONV_MAX_AXES];
    for (int i = 0; i < c->n; i++) {
        int64_t span = (c->k[i] - 1) * c->dil[i] + 1, up = (c->out[i] - 1) * c->stride[i] + 1;
        dy = spread_zeros(b, dy, 2 + i, c->stride[i]);
        pad0[i] = span - 1 - c->pad0[i];
        pad1[i] = c->in[i] - up + c->pad0[i];
        one[i] = 1;
        int64_t cut0 = pad0[i] < 0 ? -pad0[i] : 0, cut1 = pad1[i] < 0 ? -pad1[i] : 0;
        if (cut0 || cut1)
            dy = b_slice(b, dy, 2 + i, cut0, up - cut1, 1);
        pad0[i] += cut0, pad1[i] += cut1;
    }
    return conv_build(b, dy, transposed_kernel(b, w, c), c->n, one, pad0, pad1, c->dil, c->groups);
}

/* dW[g] = sum over the batch of dY[n, g] @ columns[n, g]^T: one matmul per group over
 * [M/G, N*O] x [N*O, C/G*K]. */
static int conv_grad_w(Builder *b, int x, int dy, const ConvGeom *c)
{
    Type xt;
    if (!b_type_of(b, x, &xt))
        return -1;
    int64_t k = 1, o = 1, mg = c->m / c->groups;
    for (int i = 0; i < c->n; i++)
        k *= c->k[i], o *= c->out[i];
    bool ovf = false;
    Dim no = dim_mul(xt.dim[0], dim_static(o), &ovf);
    if (ovf) {
        err_set(b->err, ERR_INPUT, "conv: the batch times the output positions overflows");
        return -1;
    }
    Dim yd[4] = {xt.dim[0], dim_static(c->groups), dim_static(mg), dim_static(o)};
    int g = b_transpose(b, reshape_dims(b, dy, 4, yd), 4, (int64_t[]){1, 2, 0, 3});
    g = reshape_dims(b, g, 3, (Dim[]){dim_static(c->groups), dim_static(mg), no});
    int cols = b_transpose(b, conv_columns(b, x, c), 4, (int64_t[]){1, 0, 3, 2});
    cols = reshape_dims(b, cols, 3, (Dim[]){dim_static(c->groups), no, dim_static(c->cg * k)});
    Dim wd[COIL_MAX_RANK] = {dim_static(c->m), dim_static(c->cg)};
    for (int i = 0; i < c->n; i++)
        wd[2 + i] = dim_static(c->k[i]);
    return reshape_dims(b, b_matmul(b, g, cols), 2 + c->n, wd);
}

bool grad_conv(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)out;
    Type xt, wt;
    ConvGeom c;
    if (!b_type_of(b, in[0], &xt) || !b_type_of(b, in[1], &wt) ||
        !conv_geometry(b->g, n, &xt, &wt, &c, b->err))
        return false;
    din[0] = conv_grad_x(b, g, in[1], &c);
    din[1] = conv_grad_w(b, in[0], g, &c);
    return din[0] >= 0 && din[1] >= 0;
}
