/* cuda_optim.h — the optimizer step on the GPU: runtime/cpu/cpu_optim.c's AdamW, SGD with momentum
 * and Lion over every parameter of a CUDA engine, where its parameters and gradients
 * already are. A step is two launches on the engine's stream: the global gradient norm
 * (per-block partial sums of squares in a fixed order), then ONE update of every parameter
 * (multi-tensor apply: a device table of tensors and a list of chunks the blocks walk),
 * which finishes the norm itself, clips, and skips the whole update when the norm is not
 * finite, with no host round trip. The host learns the norm after the step's sync.
 * The kernels' source and the pure planning (cuda_optim_kernels.c) are in every build; the
 * device side (cuda_optim.c) needs the toolkit's headers, and is reached through the
 * device's DeviceTraining (runtime/device.h, cuda_device.c). */
#ifndef COIL_RUNTIME_CUDA_OPTIM_H
#define COIL_RUNTIME_CUDA_OPTIM_H

#include "runtime/cpu/cpu_optim.h"
#include "runtime/cuda/cuda_engine.h"

/* ---------------------------------------------------------------- the kernels (no GPU) */

/* Elements of one tensor a block updates at a time (its chunk), threads per block, the
 * most blocks (partial sums) the norm has: that count never depends on the device, so
 * the norm, and so every step, is the same bits on any GPU. */
#define CUDA_OPTIM_CHUNK 16384
#define CUDA_OPTIM_THREADS 256
#define CUDA_OPTIM_PARTIALS 1024
#define CUDA_OPTIM_BLOCKS_PER_SM 8

/* The kernels' arguments, one text for the host's C and the device's C++ (the source
 * stringifies it): a tensor of the table (device addresses; acc, the summed micro-batch
 * gradients, or NULL: g is read; m and v NULL when the optimizer has no such state; role,
 * cpu_optim.h's ParamRole), a
 * chunk (elements [start, start + CUDA_OPTIM_CHUNK) of a tensor), and the step's
 * hyper-parameters, rounded on the host exactly as optim.c rounds them. */
#define CUDA_OPTIM_TYPES                                                                   \
    typedef struct CoilOptTensor {                                                         \
        float *p;                                                                          \
        const float *g;                                                                    \
        float *acc, *m, *v;                                                                \
        long long numel, role;                                                             \
    } CoilOptTensor;                                                                       \
    typedef struct CoilOptChunk {                                                          \
        long long tensor, start;                                                           \
    } CoilOptChunk;                                                                        \
    typedef struct CoilOptHyper {                                                          \
        double grad_scale, clip;                                                           \
        long long kind, nchunks, npartial;                                                 \
        float lr, b1, b2, eps, wd, mu, step, rbc2;                                         \
    } CoilOptHyper;

CUDA_OPTIM_TYPES

/* The kernels' CUDA C++ (compiled with CudaCompileOptions.no_fmad):
 *   coil_optim_norm(tensors, chunks, hyper, double *partial)           grid: npartial
 *   coil_optim_update(tensors, chunks, hyper, const double *partial, double *norm)
 *   coil_optim_accumulate(tensors, chunks, long long nchunks, int first)
 * all with CUDA_OPTIM_THREADS threads; the last two take any grid. */
extern const char cuda_optim_source[];

/* The chunks of tensors of numel[0..n) into out (NULL: only counted); their count. */
int64_t cuda_optim_chunks(const int64_t *numel, int n, CoilOptChunk *out);
/* The norm's blocks for nchunks chunks. */
int cuda_optim_partials(int64_t nchunks);
/* The hyper-parameters of update number steps + 1 at learning rate lr, gradients times
 * grad_scale: optim.c's float and double roundings, done once here. */
CoilOptHyper cuda_optim_hyper(const OptConfig *c, int64_t steps, double lr, double grad_scale,
                              int64_t nchunks, int npartial);

/* ---------------------------------------------------------------- the device optimizer */

typedef struct CudaOptim CudaOptim;

/* The device twin of host (its configuration, decay mask, state layout and step count):
 * state on the device, zeros; params[0..nparam) (graph_params order) give the shapes. The
 * gradient of parameter i is engine output first_grad + i (autodiff's order). accumulate:
 * micro-batches are summed on the device (cuda_optim_accumulate) into buffers of its own.
 * The engine's addresses are read at each launch (they exist once it has run). */
CudaOptim *cuda_optim_new(CudaEngine *en, const Optimizer *host, const Tensor *params,
                          int nparam, int first_grad, bool accumulate, Err *e);
void cuda_optim_free(CudaOptim *o);
/* After a micro-batch's run: its gradients added to the sum (first: the sum starts). */
bool cuda_optim_accumulate(CudaOptim *o, bool first, Err *e);
/* Enqueues the norm and the update on the engine's stream, then the norm's copy home. */
bool cuda_optim_step(CudaOptim *o, double grad_scale, double lr, Err *e);
/* Waits for the step; *norm: the global norm of the scaled gradient before clipping (not
 * finite: the update was skipped, and the step is not counted). */
bool cuda_optim_finish(CudaOptim *o, double *norm, Err *e);
/* The state (and step count) to and from the host optimizer's tensors: checkpoints. */
bool cuda_optim_download(CudaOptim *o, Optimizer *host, Err *e);
bool cuda_optim_upload(CudaOptim *o, const Optimizer *host, Err *e);

#endif
