/* sgemm.h — coil's portable single-precision GEMM: runtime/cpu/gemm.c's BLAS path in a build
 * without OpenBLAS (-DCOIL_OPENBLAS=OFF). Always compiled, so tests can hold it in any build. */
#ifndef COIL_RUNTIME_SGEMM_H
#define COIL_RUNTIME_SGEMM_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major C = op(A) op(B), overwriting C: op(A) is m x k, A itself (trans_a false, rows
 * lda apart) or the transpose of a k x m A (trans_a true); op(B), k x n, likewise; C is
 * m x n with rows ldc apart (elements between n and ldc untouched). k = 0 zeroes C. Rows
 * of C are split over up to `threads` threads (<= 1: the caller alone) when the product is
 * large enough to pay for starting them. */
void sgemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                    int64_t ldc, int threads);

#endif
