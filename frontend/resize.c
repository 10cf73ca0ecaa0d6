/* resize.c — interpolation is separable: along each resized axis, out = W[O, I] x, where
 * row y of W holds output y's coefficients at the input elements it reads (onnx's
 * reference, op_resize.py, transcribed for one axis). W becomes a constant, so a resize is
 * gathers or matmuls and its gradient theirs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/resize.h"

const char *const resize_mode_names[3] = {"nearest", "linear", "cubic"};
const char *const resize_coord_names[6] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                           "align_corners", "asymmetric", "tf_crop_and_resize"};
const char *const resize_nearest_names[4] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* nearest's two coefficients at `ratio` past the floor: the element below or above */
static int nearest_coeffs(const Resize *r, double ratio, double *c)
{
    bool up;
    if (ratio == floor(ratio))
        up = true;
    else if (r->nearest == NEAREST_FLOOR || r->nearest == NEAREST_CEIL)
        up = r->nearest == NEAREST_CEIL;
    else /* the nearest, a tie as the mode prefers */
        up = ratio > 0.5 || (ratio == 0.5 && r->nearest == NEAREST_ROUND_PREFER_CEIL);
    c[0] = !up, c[1] = up;
    return 2;
}

static double cubic_at(double x, double a)
{
    x = fabs(x);
    if (x <= 1)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    return x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0;
}

/* The coefficients of one output element at fraction `ratio` past its floor; their count
 * (at most 64: antialiasing widens the kernel by 1 / scale). */
static int resize_coeffs(const Resize *r, double ratio, double scale, double *c)
{
    if (r->mode == RESIZE_NEAREST)
        return nearest_coeffs(r, ratio, c);
    bool cubic = r->mode == RESIZE_CUBIC;
    if (!r->antialias) {
        if (!cubic) {
            c[0] = 1 - ratio, c[1] = ratio;
            return 2;
        }
        for (int i = 0; i < 4; i++)
            c[i] = cubic_at((double)(i - 1) - ratio, r->cubic_a);
        return 4;
    }
    double s = scale < 1 ? scale : 1, sum = 0;
    int start = (int)floor((cubic ? -2 : -1) / s) + 1, n = 2 - 2 * start;
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        double arg = s * ((double)(start + i) - ratio);
        c[i] = cubic ? cubic_at(arg, r->cubic_a) : fmax(0, fmin(1, 1 - fabs(arg)));
        sum += c[i];
    }
    for (int i = 0; i < n; i++)
        c[i] /= sum;
    return n;
}

static double source_coord(const Resize *r, double y, double scale, int64_t in, int64_t out,
                           const double *roi)
{
    double width = scale * (double)in, x;
    switch (r->coord) {
    case COORD_ALIGN_CORNERS: return width == 1 ? 0 : y * (double)(in - 1) / (width - 1);
    case COORD_ASYMMETRIC: return y / scale;
    case COORD_TF_CROP_AND_RESIZE:
        x = width == 1 ? (roi[1] - roi[0]) * (double)(in - 1) / 2
                       : y * (roi[1] - roi[0]) * (double)(in - 1) / (width - 1);
        return x + roi[0] * (double)(in - 1);
    case COORD_PYTORCH_HALF_PIXEL: return width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case COORD_HALF_PIXEL_SYMMETRIC:
        return (double)in / 2 * (1 - (double)out / width) + (y + 0.5) / scale - 0.5;
    case COORD_HALF_PIXEL: break;
    }
    return (y + 0.5) / scale - 0.5;
}

/* W[out, in] of one axis, and which outputs lie outside the input (tf_crop_and_resize). */
static void resize_matrix(const Resize *r, double scale, int64_t in, int64_t out, const double *roi,
                          double *w, bool *outside)
{
    memset(w, 0, (size_t)(in * out) * sizeof *w);
    for (int64_t y = 0; y < out; y++) {
        double x = source_coord(r, (double)y, scale, in, out, roi), c[64];
        double ratio = x == floor(x) ? 1.0 : x - floor(x);
        int n = resize_coeffs(r, ratio, scale, c);
        int64_t pad = (n + 1) / 2;
        double xp = x + (double)pad, p = floor(xp), frac = xp - p;
        int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                                 : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
        int64_t start = (int64_t)p + off - pad;
        if (r->exclude_outside) {
            double sum = 0;
            for (int j = 0; j < n; j++)
                c[j] = start + j < 0 || start + j >= in ? 0 : c[j], sum += c[j];
            for (int j = 0; j < n; j++)
                c[j] /= sum == 0 ? 1 : sum;
        }
        for (int j = 0; j < n; j++) { /* the input's edge elements stand for those past it */
            int64_t at = start + j < 0 ? 0 : start + j >= in ? in - 1 : start + j;
            w[y * in + at] += c[j];
        }
        outside[y] = r->coord == COORD_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1));
    }
}

/* Each row of w[out, in] one 1 (the element it copies, into idx) and zeros elsewhere. */
static bool rows_pick(const double *w, int64_t in, int64_t out, double *idx)
{
    for (int64_t y = 0; y < out; y++) {
        int ones = 0, others = 0;
        for (int64_t i = 0; i < in; i++) {
            ones += w[y * in + i] == 1, others += w[y * in + i] != 0 && w[y * in + i] != 1;
            if (w[y * in + i] == 1)
                idx[y] = (double)i;
        }
        if (ones != 1 || others)
            return false;
    }
    return true;
}

/* x[..., I, ...] times W^T[I, O] along axis: the axis moved last, a matmul, moved back. */
static int matmul_along(Builder *b, int x, int axis, const double *w, int64_t in, int64_t out)
{
    Type t;
    b_type_of(b, x, &t);
    double *wt = malloc((size_t)(in * out + 1) * sizeof *wt);
    if (!wt)
        abort();
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            wt[i * out + o] = w[o * in + i];
    Type mt = type_make(t.dt, 2, (int64_t[]){in, out});
    int y = b_matmul(b, b_move_axis(b, x, axis, t.rank - 1), b_constant(b, &mt, wt));
    free(wt);
    return b_move_axis(b, y, t.rank - 1, axis);
}

/* tf_crop_and_resize: the outputs outside the input replaced by the extrapolation value. */
static int extrapolate(Builder *b, int y, int axis, const Resize *r, const bool *outside, int64_t out)
{
    Type t;
    b_type_of(b, y, &t);
    double *m = malloc((size_t)(out + 1) * sizeof *m);
    if (!m)
        abort();
    for (int64_t o = 0; o < out; o++)
        m[o] = outside[o];
    Type mt = type_make(DT_BOOL, 1, &out);
    int last = b_move_axis(b, y, axis, t.rank - 1);
    last = b_where(b, b_constant(b, &mt, m), b_scalar(b, r->extrapolation, t.dt), last);
    free(m);
    return b_move_axis(b, last, t.rank - 1, axis);
}

int resize_axis(Builder *b, int x, int axis, const Resize *r, double scale, int64_t out,
                const double roi[2])
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int64_t in = t.dim[axis].k;
    double *w = malloc((size_t)(in * out + 1) * sizeof *w), *idx = malloc((size_t)(out + 1) * sizeof *idx);
    bool *outside = calloc((size_t)(out + 1), sizeof *outside);
    if (!w || !idx || !outside)
        abort();
    resize_matrix(r, scale, in, out, roi, w, outside);
    bool any_outside = false;
    for (int64_t y = 0; y < out; y++)
        any_outside = any_outside || outside[y];
    int y;
    if (rows_pick(w, in, out, idx)) {
        Type it = type_make(DT_I64, 1, &out);
        y = b_gather(b, x, b_constant(b, &it, idx), axis);
    } else if (!dtype_info[t.dt].is_float) {
        err_set(b->err, ERR_UNSUPPORTED, "interpolating %s values", dtype_info[t.dt].name);
        y = -1;
    } else
        y = matmul_along(b, x, axis, w, in, out);
    if (y >= 0 && any_outside)
        y = extrapolate(b, y, axis, r, outside, out);
    free(w), free(idx), free(outside);
    return y;
}
