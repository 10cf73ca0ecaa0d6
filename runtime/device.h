/* device.h — the devices coil compiles for and runs on, in one table. A device named on
 * the command line, in the C API or in a package's manifest is looked up here once;
 * everything after asks its Device for what differs (the passes its code generator wants,
 * the padding and alignment that suit it, whether it is there), and nothing else in coil
 * compares device names.
 *
 * A device's engine (a program's kernels loaded, its memory planned, ready to run) is
 * driven through DeviceOps: the pipeline runs, tunes, configures and frees any engine
 * without knowing which it is. Making one is still the pipeline's (LLVM or a package's
 * object for the CPU, NVRTC or a cubin for the GPU), and each engine keeps its own extras
 * (the CPU's statistics, the GPU's resident runs for training). Room is left here for the
 * collectives of data-parallel training. */
#ifndef COIL_RUNTIME_DEVICE_H
#define COIL_RUNTIME_DEVICE_H

#include "base/base.h"
#include "codegen/autotune/steps.h"
#include "codegen/cpu/cpu.h"
#include "runtime/cpu/cpu_engine.h"
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
    CpuModule *module;       /* the CPU's generated code (the caller frees it after the
                                engine; a package writes its object), else NULL */
    bool from_object;        /* the code was a package's (object or cubin), not generated */
    double seconds;          /* making it: code generation or loading, and the engine */
    double codegen_s;        /* of which the device compiler proper (NVRTC; LLVM: seconds) */
} EngineMade;

/* What every engine does; `en` is the engine its device made (an Engine, a CudaEngine). */
typedef struct DeviceOps {
    /* The engine for p (which must outlive it), its code generated or loaded as r says;
     * NULL with e set. */
    void *(*prepare)(const Program *p, const EngineRequest *r, EngineMade *made, Err *e);
    /* Whether the engine records its runs into EngineRequest.trace itself (the CPU: each
     * step and each thread's chunks); else its caller traces from step_seconds. */
    bool traces_itself;
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
    void (*free)(void *en);
} DeviceOps;

/* The engines' operations (runtime/cpu/cpu_device.c, runtime/cuda/cuda_device.c). */
extern const DeviceOps cpu_device_ops, cuda_device_ops;

typedef struct Device {
    const char *name;             /* "cpu", "cuda": as users and manifests write it */
    const char *title;            /* for messages: "this CPU", "an NVIDIA GPU" */
    bool gpu;                     /* kernels through NVRTC on a GPU, else LLVM on the host */
    const char *const *passes;    /* the pass pipeline its code generator expects */
    int pad_multiple;             /* max-autotune pads a matmul's N to a multiple of it */
    int plan_align;               /* bytes every temporary's offset is a multiple of (0: 64) */
    /* Whether it can be compiled for and run here; false with why (a static string). */
    bool (*available)(const char **why);
    const DeviceOps *ops;         /* its engine's operations */
} Device;

/* The device named `name` (NULL: the CPU), or NULL when there is none of that name. */
const Device *device_find(const char *name);
/* The same, or an ERR_USAGE error naming what was asked for and every known device. */
const Device *device_parse(const char *name, Err *e);
/* The CPU, the default everywhere a device is not given. */
const Device *device_cpu(void);
/* "cpu or cuda": the known names, for help and messages. */
const char *device_names(void);

#endif
