/* cuda_driver.h — the NVIDIA libraries the CUDA engine calls, opened with dlopen at first
 * use: the Driver API (libcuda.so.1), cuBLAS and cuBLASLt. Each is a table of entry points
 * resolved once per process by the symbol names cuda.h's macros give them (cuMemAlloc is
 * cuMemAlloc_v2), so a call through a table is the call the headers would compile, and a
 * machine without a GPU builds, links and runs coil, and is told why a GPU run cannot start.
 * Only the CUDA runtime's own files include this (it needs the toolkit's headers);
 * cuda_engine.h is the interface everyone else uses. */
#ifndef COIL_RUNTIME_CUDA_DRIVER_H
#define COIL_RUNTIME_CUDA_DRIVER_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>

#include "ir/ir.h"

/* The entry points, by their unversioned names: each expands, through cuda.h's and
 * cublas_v2.h's macros, to the versioned symbol the library exports. */
#define CUDA_DRIVER_ENTRIES(X)                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                   \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)           \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)            \
    X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize)           \
    X(cuMemGetInfo)                                                                         \
    X(cuMemAlloc) X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoD)           \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)       \
    X(cuModuleLoadData)                                                                     \
    X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuStreamCreate)            \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy)            \
    X(cuEventRecord) X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture)    \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

#define CUDA_CUBLAS_ENTRIES(X)                                                              \
    X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace)               \
    X(cublasSetMathMode) X(cublasGemmStridedBatchedEx) X(cublasGetStatusName)               \
    X(cublasGetProperty)

#define CUDA_CUBLASLT_ENTRIES(X)                                                            \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtGetVersion)     \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                                \
    X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)                         \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)                        \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)              \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

#define CUDA_ENTRY_FIELD(f) __typeof__(f) *f;

typedef struct CudaDriver {
    CUDA_DRIVER_ENTRIES(CUDA_ENTRY_FIELD)
    int version; /* cuDriverGetVersion: 12080 for 12.8 */
} CudaDriver;

typedef struct CudaCublas {
    CUDA_CUBLAS_ENTRIES(CUDA_ENTRY_FIELD)
    int version[3]; /* major, minor, patch */
} CudaCublas;

typedef struct CudaCublasLt {
    CUDA_CUBLASLT_ENTRIES(CUDA_ENTRY_FIELD)
} CudaCublasLt;

/* The tables, or NULL with *why saying what is missing in one line ("no NVIDIA driver:
 * libcuda.so.1 not found", "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is
 * detected)"). The driver's table is returned only once cuInit has succeeded and a device
 * is present. $COIL_LIBCUDA, $COIL_LIBCUBLAS and $COIL_LIBCUBLASLT name other files to
 * open (tests point them at the toolkit's stub and libraries). */
const CudaDriver *cuda_driver(const char **why);
const CudaCublas *cuda_cublas(const char **why);
const CudaCublasLt *cuda_cublaslt(const char **why);

/* Device `ordinal`'s primary context, retained once for the life of the process (never
 * released: retaining and releasing it per engine or per query would create and destroy
 * the context, and everything allocated in it, whenever the count fell to zero). */
bool cuda_primary_context(int ordinal, CUcontext *ctx, Err *e);

/* A CUresult as "NAME (description)" into buf (returned), also where the driver cannot
 * name it (the toolkit's stub library); a cublasStatus_t's name ("CUBLAS_STATUS_..."). */
const char *cuda_describe(CUresult r, char *buf, size_t n);
const char *cuda_blas_status_name(cublasStatus_t s);
/* Whether a driver call succeeded; if not, e says "cuda: WHAT failed: NAME (description)".
 * The one check for every CUresult the engine, the optimizer and the queries get back. */
bool cu_ok(CUresult r, const char *what, Err *e);

/* Every entry point name the tables resolve, in order (for tests): the driver's,
 * cuBLAS's, cuBLASLt's. */
extern const char *const cuda_driver_symbols[];
extern const char *const cuda_cublas_symbols[];
extern const char *const cuda_cublaslt_symbols[];

#endif
