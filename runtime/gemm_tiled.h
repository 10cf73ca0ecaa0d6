/* gemm_tiled.h — GEMM steps through the generated micro-kernels (codegen/cpu/cpu.h):
 * the blocking loops, the split over threads and the edges here, the arithmetic in the
 * micro-kernels, the epilogue in the step's TileFn, called once per finished tile. */
#ifndef COIL_RUNTIME_GEMM_TILED_H
#define COIL_RUNTIME_GEMM_TILED_H

#include "codegen/cpu/cpu.h"
#include "runtime/pool.h"

/* Whether g can run here at these sizes: f32 A and B whose layout fits the dot form
 * (A's columns and B's rows unit-stride) or the broadcast form (B's columns unit-stride),
 * and sizes within int64 arithmetic. C needs no check: the TileFn writes it. */
bool gemm_tiled_supported(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb);

/* Run g: bufs[i] is the base of program buffer i, sb the symbol values; every tile's
 * result goes to tile() (the step's TileFn), which stores C and runs the epilogue.
 * Splits the tiles over the pool's threads (NULL: the calling thread). Errors: an
 * unsupported g (check first), out of memory. */
bool gemm_tiled_run(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb,
                    const Ukernels *uk, TileFn tile, Pool *pool, Err *e);

#endif
