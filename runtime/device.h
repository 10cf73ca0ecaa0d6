/* device.h — the devices coil compiles for and runs on, in one table. A device named on
 * the command line, in the C API or in a package's manifest is looked up here once;
 * everything after asks its Device for what differs (the passes its code generator wants,
 * the padding and alignment that suit it, whether it is there), and nothing else in coil
 * compares device names.
 *
 * Everything a device does goes through its DeviceOps: making an engine (a program's
 * kernels generated or loaded, its memory planned, ready to run), running, tuning and
 * configuring it, writing its code into a package, and, where parameters live on the
 * device, training there (DeviceTraining: resident runs and the optimizer). A backend this
 * build lacks (CUDA without the toolkit's headers) has no operations: its row says why,
 * and no code of it is linked. */
#ifndef COIL_RUNTIME_DEVICE_H
#define COIL_RUNTIME_DEVICE_H

#include "base/base.h"
#include "codegen/autotune/steps.h"
#include "codegen/cpu/cpu.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/cpu/cpu_optim.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/trace.h"

/* What an engine is made from, besides its program: every device reads the fields it
 * knows and ignores the others. */
typedef struct EngineRequest {
    int threads;             /* the CPU's pool (0: one per core) */
    bool profile;            /* time each step (step_seconds) */
    bool blas_gemm;          /* the CPU's GEMMs on the BLAS path instead of coil's tiles */
    bool no_llvm;            /* the CPU: no code generator (the loop evaluator runs) */
    const char *object;      /* the CPU: a package's object instead of running LLVM */
    CpuOptions cpu;          /* the CPU's code generator (its debug directory included) */
    CudaEngineOptions cuda;  /* a GPU's engine */
    Trace *trace;            /* an engine that traces itself records its runs here */
    bool graphs;             /* replay runs as captured graphs where the device can */
    bool full_opt;           /* the device compiler's full optimisation (max-autotune) */
} EngineRequest;

/* What making it produced besides the engine. */
typedef struct EngineMade {
    bool generated;          /* code was generated or loaded (false: the CPU without LLVM,
                                its kernels on the loop evaluator) */
    bool from_object;        /* the code was a package's (object or cubin), not generated */
    const char *codegen;     /* how, for reports: "LLVM", "NVRTC, cached", "loading the
                                object", "no code generator: loop evaluator" */
    double seconds;          /* making it: code generation or loading, and the engine */
    double codegen_s;        /* of which the device compiler proper (NVRTC; LLVM: seconds) */
    int nstage;              /* the device compiler's stages, for the debug directory's */
    struct {                 /* breakdown ("llvm-ir", "llvm-opt", "machine-code"; "nvrtc") */
        const char *name;
        double seconds;
    } stage[4];
} EngineMade;

/* What an engine says of itself after a run, for `coil run` and `coil bench`: the
 * hardware and the counts of its own kind (the other kind's stay zero). */
typedef struct EngineReport {
    char hardware[256];      /* the GPU's name ("NVIDIA H100 80GB HBM3"); the CPU: "" */
    char arch[32];           /* what a GPU's code was compiled for ("sm_90a"); the CPU: "" */
    EngineStats cpu;         /* the CPU engine's GEMM paths */
    CudaEngineStats gpu;     /* a GPU engine's GEMM paths, launches, graphs, memory */
} EngineReport;

/* How a device writes a program's code into a package (its forms: the CPU's "obj",
 * "llvm-ir", "asm"; a GPU's "cu", "cubin", "ptx"). */
typedef struct EmitRequest {
    CpuOptions cpu;          /* the CPU's code generator */
    const char *arch;        /* a GPU's architecture ("sm_90a"): no GPU needed */
    bool full_opt;           /* the device compiler's full optimisation */
} EmitRequest;

/* Training where the parameters stay on the device between steps (a GPU's): runs that
 * leave them there, the optimizer's step done there, both brought home for checkpoints.
 * NULL where they live on the host (the CPU: runtime/cpu/cpu_optim.h steps them). `opt`
 * is what optim_new made; the gradient of parameter i is engine output first_grad + i. */
typedef struct DeviceTraining {
    void *(*optim_new)(void *en, const Optimizer *host, const Tensor *params, int nparam,
                       int first_grad, bool accumulate, Err *e);
    void (*optim_free)(void *opt);
    /* A run that keeps the parameters on the device (uploaded only while it has none);
     * outputs[i] brought home only where fetch[i]. */
    bool (*run)(void *en, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                const bool *fetch, Err *e);
    /* After a micro-batch's run: its gradients added to the sum (first: the sum starts). */
    bool (*accumulate)(void *opt, bool first, Err *e);
    /* The update enqueued, then waited for; *norm: the scaled gradient's global norm (not
     * finite: the update was skipped). */
    bool (*step)(void *opt, double grad_scale, double lr, double *norm, Err *e);
    /* Parameters, and the optimizer's state, to and from the host: checkpoints. */
    bool (*download_params)(void *en, Tensor *params, Err *e);
    bool (*download)(void *opt, Optimizer *host, Err *e);
    bool (*upload)(void *opt, const Optimizer *host, Err *e);
} DeviceTraining;

/* What every device does; `en` is the engine it made (an Engine, a CudaEngine). */
typedef struct DeviceOps {
    /* Whether it can be compiled for and run here; false with why (a static string). */
    bool (*available)(const char **why);
    /* The autotuner's cache key for the device r would make an engine on ("cpu avx2 x2
     * threads", "NVIDIA H100 ... sm_90a"). */
    bool (*tune_key)(const EngineRequest *r, char *key, size_t n, Err *e);
    /* p's code in one of the device's forms written to path atomically (no engine, no
     * GPU needed); *seconds: the device compiler's (0 from a cache). */
    bool (*emit)(const Program *p, const EmitRequest *r, const char *form, const char *path,
                 double *seconds, Err *e);
    /* The engine for p (which must outlive it), its code generated or loaded as r says;
     * NULL with e set. */
    void *(*prepare)(const Program *p, const EngineRequest *r, EngineMade *made, Err *e);
    /* An engine that records its runs itself (the CPU: each step and each thread's chunks)
     * into EngineRequest.trace: from now on into t (NULL: no more). NULL: its caller traces
     * from step_seconds. */
    bool (*set_trace)(void *en, Trace *t, Err *e);
    /* One run: interp_run's conventions (outputs allocated here). */
    bool (*run)(void *en, const Tensor *inputs, const Tensor *params, Tensor *outputs, Err *e);
    /* The rng step random ops draw at from the next run on. */
    void (*set_rng_step)(void *en, uint64_t step);
    /* The sizes of the latest run (NULL before one), its memory plan, and with a profile
     * each step's seconds summed over the runs (else NULL). */
    const SymBind *(*symbols)(const void *en);
    const MemoryPlan *(*plan)(const void *en);
    const double *(*step_seconds)(const void *en);
    /* max-autotune: measure the steps' candidates at the latest run's sizes and keep the
     * fastest (codegen/autotune/steps.h). */
    bool (*tune)(void *en, const Program *p, const TuneOptions *o, Err *e);
    /* A step's configuration: config_size bytes, read as it is now, or set (NULL: back to
     * the heuristics). */
    size_t config_size;
    const void *(*config)(const void *en, int step);
    bool (*configure)(void *en, int step, const void *config, Err *e);
    /* The parameters' tensors were written in place (NULL: the engine reads them anew at
     * every run anyway). */
    void (*params_changed)(void *en);
    /* fn(ctx, s) after each step s of every later run (fn NULL: no more): the collectives
     * start on what a step finished while the rest runs. NULL: the device cannot say. */
    void (*on_step)(void *en, void (*fn)(void *ctx, int step), void *ctx);
    void (*report)(const void *en, EngineReport *r);
    void (*free)(void *en);
    const DeviceTraining *training; /* NULL: parameters live on the host */
} DeviceOps;

/* The devices' operations (runtime/cpu/cpu_device.c, runtime/cuda/cuda_device.c): the
 * CUDA one only in a build with the toolkit's headers. */
extern const DeviceOps cpu_device_ops, cuda_device_ops;

typedef struct Device {
    const char *name;             /* "cpu", "cuda": as users and manifests write it */
    const char *title;            /* for messages: "this CPU", "an NVIDIA GPU" */
    bool gpu;                     /* kernels through NVRTC on a GPU, else LLVM on the host */
    const char *const *passes;    /* the pass pipeline its code generator expects */
    int pad_multiple;             /* max-autotune pads a matmul's N to a multiple of it */
    int plan_align;               /* bytes every temporary's offset is a multiple of (0: 64) */
    const DeviceOps *ops;         /* what it does; NULL: not in this build (absent says why) */
    const char *absent;
} Device;

/* Whether d can be compiled for and run here; false with why (a static string). */
bool device_available(const Device *d, const char **why);

/* The device named `name` (NULL: the CPU), or NULL when there is none of that name. */
const Device *device_find(const char *name);
/* The same, or an ERR_USAGE error naming what was asked for and every known device. */
const Device *device_parse(const char *name, Err *e);
/* The CPU, the default everywhere a device is not given. */
const Device *device_cpu(void);
/* "cpu or cuda": the known names, for help and messages (from the table). */
const char *device_names(void);

#endif
