/* gemm_conv.c — a convolution GEMM's B operand (codegen/loop.h, GemmConv) read one element
 * at a time: what the reference paths (the loop evaluator, gemm_reference, the BLAS path's
 * half-precision panels) use; runtime/cpu/conv.c packs whole panels of it fast. */
#include "codegen/loop.h"

/* Where element (k, o) of B lies in x relative to the batch's offset; false in the
 * padding. */
static bool conv_source(const GemmConv *cv, int64_t k, int64_t o, int64_t *at)
{
    int64_t t[3], q[3];
    for (int d = 2; d >= 0; d--)
        t[d] = k % cv->k[d], k /= cv->k[d], q[d] = o % cv->out[d], o /= cv->out[d];
    *at = k * cv->c_stride;
    for (int d = 0; d < 3; d++) {
        int64_t i = q[d] * cv->stride[d] - cv->pad0[d] + t[d] * cv->dil[d];
        if (i < 0 || i >= cv->in[d])
            return false;
        *at += i * cv->x_stride[d];
    }
    return true;
}

double gemm_conv_load(const GemmConv *cv, DType dt, const void *x, int64_t off, int64_t k,
                      int64_t o)
{
    int64_t at;
    return conv_source(cv, k, o, &at) ? dtype_load(dt, x, off + at) : 0;
}

void gemm_conv_reach(const GemmConv *cv, int64_t *lo, int64_t *hi)
{
    int64_t ext[4] = {cv->cg, cv->in[0], cv->in[1], cv->in[2]};
    int64_t st[4] = {cv->c_stride, cv->x_stride[0], cv->x_stride[1], cv->x_stride[2]};
    *lo = *hi = 0;
    for (int d = 0; d < 4; d++) {
        int64_t span = ext[d] > 0 ? (ext[d] - 1) * st[d] : 0;
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}
