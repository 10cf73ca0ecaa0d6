/* conv.h — a convolution GEMM's B (codegen/loop.h, GemmConv: x through im2col windows)
 * packed into f32 panels for the GEMM paths: gemm_tiled's per-thread panels (implicit
 * GEMM: B is never stored whole) and the BLAS path's per-batch matrix. */
#ifndef COIL_RUNTIME_CONV_H
#define COIL_RUNTIME_CONV_H

#include "codegen/loop.h"

/* Rows [k0, k0 + kc) and columns [n0, n0 + nr) of B, read from f32 x at the batch's first
 * element, into dst (row p at dst + p * ld); the padding reads zeros. */
void conv_pack_panel(const GemmConv *cv, const float *x, int64_t k0, int64_t kc, int64_t n0,
                     int64_t nr, int64_t ld, float *dst);

#endif
