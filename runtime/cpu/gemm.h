/* gemm.h — GEMM steps of a Program (codegen/loop.h) on the CPU: the BLAS path's sgemm for
 * f32 (OpenBLAS, or coil's portable GEMM in a build without it), and for f16 and bf16
 * through f32 panels (accumulating in f32), batched by strides. */
#ifndef COIL_RUNTIME_GEMM_H
#define COIL_RUNTIME_GEMM_H

#include "codegen/loop.h"

/* Run g: bufs[i] is the base of program buffer i, dts[i] its dtype, sb the symbol values.
 * Runs on the calling thread plus the BLAS path's own threads (gemm_set_threads). Errors:
 * an operand that is not f32, f16 or bf16; sizes beyond sgemm's int; out of memory. */
bool gemm_run(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb, Err *e);
/* The BLAS path's thread count, for the whole process (n <= 0: one per available CPU). */
void gemm_set_threads(int n);
/* What the BLAS path is in this build, for messages: "OpenBLAS" or "portable GEMM". */
const char *gemm_blas_name(void);
/* The reference: a plain triple loop accumulating in f64, for tests. */
bool gemm_reference(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb, Err *e);

#endif
