/* cuda_engine.h — running a Program on an NVIDIA GPU: the loop kernels compiled by NVRTC
 * for the device (codegen/cuda), GEMM steps through cuBLAS or, with a fused bias and
 * activation, cuBLASLt, one stream, one device arena laid out by the CPU engine's memory
 * plan, and optionally the whole run captured once as a CUDA graph and replayed. Mirrors
 * engine.h: host tensors in, host tensors out. No CUDA header is needed to include it, but
 * it is built only with the toolkit's headers: the rest of coil reaches it through the
 * device table (runtime/device.h, cuda_device.c), whose "cuda" row says why it is missing. */
#ifndef COIL_RUNTIME_CUDA_ENGINE_H
#define COIL_RUNTIME_CUDA_ENGINE_H

#include "codegen/cuda/cuda.h"
#include "runtime/cpu/cpu_engine.h"

/* ---------------------------------------------------------------- the device */

/* Whether a GPU run can start here (driver found, cuInit succeeded, a device present);
 * *why gets one line saying why not ("no NVIDIA driver: libcuda.so.1 not found"). */
bool cuda_driver_available(const char **why);

/* Whether cuBLAS and cuBLASLt load and have every entry point coil calls (no GPU needed to
 * know); *why names the first that does not. */
bool cuda_blas_available(const char **why);

typedef struct CudaDeviceInfo {
    int ordinal;
    char name[256];       /* "NVIDIA H100 80GB HBM3" */
    int sms;              /* streaming multiprocessors */
    int major, minor;     /* compute capability */
    char arch[16];        /* what NVRTC compiles for: "sm_90a" */
    int64_t total_bytes, free_bytes;
    int driver_version;   /* 12080 for 12.8 */
} CudaDeviceInfo;

/* Device `ordinal`'s properties (free memory as of now). */
bool cuda_device_query(int ordinal, CudaDeviceInfo *info, Err *e);

/* Whether device `ordinal`'s context still works: false, with the error into why, once a
 * kernel has faulted (an illegal address, a trap: such errors are sticky, and every later
 * call in the process fails with them). */
bool cuda_device_healthy(int ordinal, char *why, size_t n);

/* What a GPU run would load, one line per library into buf: the driver, NVRTC, cuBLAS,
 * cuBLASLt and NCCL, each with the file found and its version, or why it is missing. */
void cuda_libraries_report(char *buf, size_t n);

/* ---------------------------------------------------------------- the engine */

typedef struct CudaEngine CudaEngine;

typedef struct CudaEngineOptions {
    int device;            /* ordinal */
    const char *cache_dir; /* cubin cache (CudaCompileOptions.cache_dir); NULL: the default */
    bool allow_tf32;       /* f32 GEMMs in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32): ~1e-3 relative */
    bool graphs;           /* capture a run as a CUDA graph, replay it while the symbol values
                              repeat (ignored with profile: events time each step) */
    bool no_lt;            /* never cuBLASLt: every epilogue as its own kernel */
    bool profile;          /* time every step with events (cuda_engine_step_seconds) */
    const char *cubin;     /* a package's kernels (cuda_engine_source compiled for
                              cubin_arch): loaded instead of running NVRTC; refused when
                              the device's architecture is another */
    const char *cubin_arch;
    bool full_opt;         /* NVRTC's full optimisation (CudaCompileOptions.full_opt) */
} CudaEngineOptions;

/* Compiles p's kernels (with the engine's own helper kernels) for the device's
 * architecture through NVRTC and its cache, and makes a context, stream, module and the
 * cuBLAS handles. p (and its graph) must outlive the engine; o NULL: the defaults. */
CudaEngine *cuda_engine_new(const Program *p, const CudaEngineOptions *o, Err *e);
void cuda_engine_free(CudaEngine *en);

/* engine_run's conventions: inputs (graph order) and params (graph_params order) on the
 * host, outputs allocated here on the host (or last run's reused: reuse_output_tensors);
 * inputs and parameters checked first, index
 * inputs checked on the host. Parameters are copied to the device on the first run, again
 * after cuda_engine_params_changed(), and whenever a parameter tensor's data pointer
 * differs from the last upload (new tensors, not new values in the same memory: say so
 * with cuda_engine_params_changed). One run at a time per engine. */
bool cuda_engine_run(CudaEngine *en, const Tensor *inputs, const Tensor *params,
                     Tensor *outputs, Err *e);
void cuda_engine_params_changed(CudaEngine *en);
/* engine_set_rng_step's twin: the rng step from the next run on (0 until set). */
void cuda_engine_set_rng_step(CudaEngine *en, uint64_t step);

/* The memory plan at the latest run's sizes (the device arena holds its temporaries);
 * NULL before a run has got that far. */
const MemoryPlan *cuda_engine_plan(const CudaEngine *en);
const CudaDeviceInfo *cuda_engine_device(const CudaEngine *en);

typedef struct CudaEngineStats {
    int gemm_cublas, gemm_lt;    /* GEMM steps of the latest run by path */
    int packs;                   /* operands copied dense before a GEMM, latest run */
    int launches;                /* kernels launched by the latest run (graph replays: by
                                    its capture) */
    int graph_captures, graph_replays; /* since the engine was made */
    int param_uploads;
    double nvrtc_s;              /* compiling the kernels (0 when the cache had them) */
    bool cubin_cached;
    int64_t device_bytes;        /* device memory the engine holds now */
    char note[256];              /* why cuBLASLt declined an epilogue it was offered, if it did */
} CudaEngineStats;
CudaEngineStats cuda_engine_stats(const CudaEngine *en);

/* With CudaEngineOptions.profile: seconds per step on the GPU (events), summed over every
 * run so far; NULL without. */
const double *cuda_engine_step_seconds(const CudaEngine *en);

/* ---------------------------------------------------------------- tuning */

/* A step's configuration, what the GPU autotuner (runtime/cuda/cuda_tune.c) varies. A kernel
 * step: its launch (codegen/cuda's CudaKernelConfig: threads, items per thread, waves). A
 * GEMM step: the heuristics (cuBLASLt's first algorithm with the epilogue when it can take
 * it, else cuBLAS and the epilogue kernel), cuBLAS, or cuBLASLt's algorithm `algo` of its
 * heuristic's list, with the epilogue fused (when it can) or `separate`, a kernel. */
typedef enum CudaGemmPath { CUDA_GEMM_AUTO, CUDA_GEMM_CUBLAS, CUDA_GEMM_LT } CudaGemmPath;
/* An attention step: its kernel on CUDA cores, or on tensor cores where that one fits
 * (codegen/cuda: cuda_attention_mma_fits) and the device has them (sm_80 and later);
 * AUTO is the default cuda_launch.c names. */
typedef enum CudaAttentionKernel {
    CUDA_ATTENTION_AUTO,
    CUDA_ATTENTION_CORES,
    CUDA_ATTENTION_MMA
} CudaAttentionKernel;
typedef struct CudaStepConfig {
    CudaKernelConfig kernel;
    CudaGemmPath path;
    int algo;
    bool separate;
    CudaAttentionKernel attention;
} CudaStepConfig;

/* Step s configured (NULL: the heuristics). A kernel variant is compiled (NVRTC, through
 * the cubin cache: all of that kernel's variants at once) the first time one is asked for.
 * A captured CUDA graph is dropped: the next run captures the new choices. A cuBLASLt
 * algorithm its heuristic does not offer at the run's sizes falls back to the heuristics. */
bool cuda_engine_configure(CudaEngine *en, int s, const CudaStepConfig *c, Err *e);
const CudaStepConfig *cuda_engine_config(const CudaEngine *en, int s);
/* How many algorithms cuBLASLt's heuristic offers GEMM step s at the latest run's sizes,
 * with its epilogue fused (plain false) or plain (its epilogue a kernel); 0: cuBLASLt does
 * not take it (batched, K = 0, an epilogue it lacks, or it declined). */
int cuda_engine_lt_algos(CudaEngine *en, int s, bool plain);
/* Step s enqueued on the engine's stream at the latest run's sizes, on the buffers as
 * they are (no synchronisation). */
bool cuda_engine_run_step(CudaEngine *en, int s, Err *e);
const SymBind *cuda_engine_symbols(const CudaEngine *en); /* NULL before a run */
void *cuda_engine_stream(const CudaEngine *en);            /* the CUstream */
uint64_t cuda_engine_buffer_address(const CudaEngine *en, int b); /* a CUdeviceptr */

/* The CUDA C++ the engine compiles: cuda_source(p) and the engine's helper kernels
 * (coil_pack, the dense copy of a GEMM operand); malloc'd. */
char *cuda_engine_source(const Program *p, Err *e);

/* ---------------------------------------------------------------- resident parameters */

/* For work on the engine's buffers in place (the device optimizer, cuda_optim.h), on
 * cuda_engine_stream. The context (a CUcontext) the engine runs in. */
void *cuda_engine_context(const CudaEngine *en);
/* Device address (a CUdeviceptr) of parameter i (graph_params order) or output i at the
 * latest run's plan; 0 before a run has planned, or when the program has no such buffer. */
uint64_t cuda_engine_param_addr(const CudaEngine *en, int param);
uint64_t cuda_engine_output_addr(const CudaEngine *en, int output);
/* cuda_engine_run for training on the device: parameters are uploaded only while the
 * device has none (the first run; after cuda_engine_params_changed), never because the
 * host's tensors moved, so what the device did to them stays; outputs[i] are brought home
 * only where fetch[i] (kept when their shape fits, else allocated), the others untouched. */
bool cuda_engine_run_resident(CudaEngine *en, const Tensor *inputs, const Tensor *params,
                              Tensor *outputs, const bool *fetch, Err *e);
/* The device's parameters into params' data (of the run's shapes): checkpoints. */
bool cuda_engine_download_params(CudaEngine *en, Tensor *params, Err *e);

#endif
