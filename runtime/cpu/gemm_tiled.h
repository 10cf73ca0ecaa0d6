/* gemm_tiled.h — GEMM steps through the generated micro-kernels (codegen/cpu/cpu.h):
 * the blocking loops, the split over threads and the edges here, the arithmetic in the
 * micro-kernels, the epilogue in the step's TileFn, called once per finished tile. */
#ifndef COIL_RUNTIME_GEMM_TILED_H
#define COIL_RUNTIME_GEMM_TILED_H

#include "codegen/cpu/cpu.h"
#include "runtime/pool.h"

/* How a GEMM is blocked: every field 0 (or AUTO) leaves the choice to the heuristic the
 * blocking comments in gemm_tiled.c describe; the autotuner sets them from measurements. */
typedef enum GemmForm { GEMM_FORM_AUTO, GEMM_FORM_DOT, GEMM_FORM_BCAST } GemmForm;
typedef enum GemmSplit { GEMM_SPLIT_AUTO, GEMM_SPLIT_ROWS, GEMM_SPLIT_COLS } GemmSplit;
typedef struct GemmTiling {
    GemmForm form;   /* DOT needs the dot layout; BCAST there packs B^T's panels transposed */
    int64_t kc;      /* k per block (rounded up to whole vectors), 0: heuristic */
    int64_t mc;      /* row tiles per macro block, 0: heuristic */
    GemmSplit split; /* which side of the tile grid the threads divide */
    bool store_only; /* store C (in its dtype, through g->c) instead of calling the TileFn:
                        the epilogue then runs as its own kernel */
} GemmTiling;

/* Whether the dot form can run g (A's columns and B's rows unit-stride). */
bool gemm_tiled_dot_layout(const Gemm *g, void *const *bufs, const SymBind *sb);
/* The tiling the heuristic picks for g at these sizes, every field resolved (for reports). */
GemmTiling gemm_tiled_default(const Gemm *g, void *const *bufs, const SymBind *sb,
                              const Ukernels *uk);

/* Whether g can run here at these sizes: f32 A and B whose layout fits the dot form
 * (A's columns and B's rows unit-stride) or the broadcast form (B's columns unit-stride),
 * and sizes within int64 arithmetic. C needs no check: the TileFn writes it. */
bool gemm_tiled_supported(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb);

/* Run g: bufs[i] is the base of program buffer i, sb the symbol values; every tile's
 * result goes to tile() (the step's TileFn), which stores C and runs the epilogue.
 * Splits the tiles over the pool's threads (NULL: the calling thread). how NULL: the
 * heuristic; a form the layout cannot take falls back to it. Errors: an unsupported g
 * (check first), out of memory. */
bool gemm_tiled_run(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb,
                    const Ukernels *uk, TileFn tile, const GemmTiling *how, Pool *pool,
                    Err *e);

#endif
