/* cuda_engine_int.h — what the CUDA engine's files share (cuda_engine.c: its life and runs;
 * cuda_memory.c: device memory; cuda_gemm.c: GEMMs on cuBLAS and cuBLASLt; cuda_launch.c:
 * kernels, steps, CUDA graphs and the variants the autotuner configures): the engine's
 * struct, checked calls, and each file's functions the others call. Not for other users:
 * runtime/cuda/cuda_engine.h is the engine's interface. */
#ifndef COIL_RUNTIME_CUDA_ENGINE_INT_H
#define COIL_RUNTIME_CUDA_ENGINE_INT_H

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "codegen/cuda/cuda.h"
#include "codegen/index_bounds.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_mapping.h"

#define DEV_ALIGN PLAN_ALIGN_GPU /* cuMemAlloc's, kept for every buffer and temporary */
#define WORKSPACE_BYTES (32ll << 20)   /* cuBLAS/cuBLASLt workspace: NVIDIA's advice for Hopper */

/* A GEMM step's cuBLASLt call, prepared when the sizes are known: the heuristic's first
 * algorithms for it, the first the default, the others the autotuner's candidates. */
#define LT_TOPK 8
typedef struct LtStep {
    bool on;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    int nalgo;
    cublasLtMatmulAlgo_t algo[LT_TOPK];
    size_t workspace[LT_TOPK];
    int out; /* the epilogue's output buffer (its C without one): cuBLASLt's D */
} LtStep;

struct CudaEngine {
    const Program *p;
    CudaEngineOptions o;
    const CudaDriver *cu;
    const CudaCublas *bl;
    const CudaCublasLt *lt;  /* NULL: every epilogue as a kernel */
    CudaDeviceInfo info;
    CUcontext ctx;           /* the device's primary context (the process keeps it) */
    CUstream stream;
    CUmodule mod;
    CUfunction *fn, pack;
    CUfunction *attn_fn; /* by step: an attention step's own kernel */
    CUfunction *attn_mma_fn; /* by step: its tensor-core kernel (NULL: none fits or runs) */
    cublasHandle_t blas;
    cublasLtHandle_t blt;
    CUdeviceptr workspace;
    int nparam;
    /* parameters and constants */
    CUdeviceptr pblock;
    int64_t pblock_bytes;
    const void **param_src;  /* per buffer: the host data last uploaded */
    bool params_dirty;
    /* the plan at the current symbol values */
    MemoryPlan plan;
    SymBind plan_sb;
    bool planned;
    CUdeviceptr dblock, scratch, bufs_dev, syms_dev;
    int64_t dblock_bytes;
    int64_t *off;            /* per buffer: byte offset in its block (and in the staging) */
    CUdeviceptr *addr;       /* per buffer: device address (the bufs table) */
    long long syms[COIL_SYM_SLOTS]; /* as on the device: the symbols, the rng step */
    uint64_t rng_step;       /* the next run's (cuda_engine_set_rng_step) */
    char *staging;           /* pinned: inputs and outputs at their io offsets */
    int64_t staging_bytes;
    CuGemm *gemm;            /* per step */
    LtStep *lts;             /* per step: cuBLASLt with the epilogue */
    LtStep *ltp;             /* per step: cuBLASLt plain, the epilogue a kernel (tuning) */
    CudaStepConfig *cfg;     /* per step: what the autotuner chose (zeros: the heuristics) */
    int *range_buf;          /* per step: a range step's [min, max] buffer, else -1 */
    bool *skip;              /* per step: a range step proven unneeded at the planned sizes */
    CUmodule *vmod;          /* per kernel: its variants' module, loaded when first used */
    CUfunction *vfn;         /* per kernel: the configured variant (NULL: fn[k]) */
    bool warm;               /* a run at these sizes has completed (graphs capture after) */
    CUgraphExec exec;
    CUevent *ev;
    double *step_s;
    CudaEngineStats stats;
};

/* ---------------------------------------------------------------- checked calls */

/* A CUresult's check is cuda_driver.h's cu_ok. */

/* Every entry point makes the engine's context current on the calling thread first: a
 * thread that has none current (or another device's) would otherwise fail or run there. */
static inline bool make_current(const CudaEngine *en, Err *e)
{
    return cu_ok(en->cu->cuCtxSetCurrent(en->ctx), "cuCtxSetCurrent", e);
}

static inline bool blas_ok(cublasStatus_t s, const char *what, Err *e)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        err_set(e, ERR_INPUT, "cuda: %s failed: %s", what, cuda_blas_status_name(s));
    return s == CUBLAS_STATUS_SUCCESS;
}

static inline int64_t round_up(int64_t n) { return (n + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN; }

static inline void *dptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

static inline int64_t buf_bytes(const Program *p, int b, const SymBind *sb)
{
    return dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

/* ---------------------------------------------------------------- cuda_memory.c */

bool cuda_dev_alloc(CudaEngine *en, CUdeviceptr *p, int64_t bytes, const char *what, Err *e);
void cuda_dev_free(CudaEngine *en, CUdeviceptr *p);
bool cuda_place_params(CudaEngine *en, const SymBind *sb, Err *e);
bool cuda_place_activations(CudaEngine *en, const SymBind *sb, Err *e);

/* ---------------------------------------------------------------- cuda_gemm.c */

void cuda_lt_drop(CudaEngine *en, LtStep *L);
bool cuda_lt_eligible(const CudaEngine *en, int s);
void cuda_prepare_lt(CudaEngine *en, int s);
void cuda_prepare_plain(CudaEngine *en, int s);
bool cuda_map_gemms(CudaEngine *en, const SymBind *sb, Err *e);
bool cuda_run_gemm(CudaEngine *en, int s, const SymBind *sb, Err *e);

/* ---------------------------------------------------------------- cuda_launch.c */

bool cuda_launch(CudaEngine *en, int k, int s, const SymBind *sb, Err *e);
bool cuda_run_all(CudaEngine *en, const SymBind *sb, Err *e);

#endif
