/* cuda_tune.h — the autotuner on the CUDA engine: each step of a Program timed alone on
 * the GPU (CUDA events) on the buffers a real run leaves, its candidates searched by
 * codegen/autotune's coordinate descent, the fastest correct one configured into the
 * engine and remembered in the cache. Candidates: for a kernel, threads per block, points
 * per thread and the grid's cap; for a GEMM, cuBLASLt's heuristic algorithms (the first
 * LT_TOPK), cuBLAS, and the epilogue fused into cuBLASLt or run as its own kernel. */
#ifndef COIL_RUNTIME_TUNE_CUDA_H
#define COIL_RUNTIME_TUNE_CUDA_H

#include "codegen/autotune/steps.h"
#include "runtime/cuda/cuda_engine.h"

/* Tune the engine's steps at the sizes of its latest run (cuda_engine_run first). A zero
 * budget: 10 runs and 5 ms of GPU time at least, 100 runs at most. */
bool tune_cuda(CudaEngine *en, const Program *p, const TuneOptions *o, Err *e);

/* The GPU as the cache keys it: its name, architecture and driver version. */
void tune_cuda_device(const CudaDeviceInfo *d, char *buf, size_t n);

/* Step s's candidates given how many cuBLASLt algorithms are offered with the epilogue
 * fused (nfused) and plain (nplain); shared with the tests, which build spaces without a
 * GPU. */
void tune_cuda_space(const Program *p, int s, int nfused, int nplain, TuneSpace *sp);
/* A point of that space as the engine's step configuration. */
CudaStepConfig tune_cuda_config(const TuneSpace *sp, const TunePoint *pt);

#endif
