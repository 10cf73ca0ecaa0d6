/* pipeline.h — a model compiled end to end: the standard passes, lowering to the loop IR,
 * then for the CPU LLVM and an engine, or for an NVIDIA GPU (device "cuda") NVRTC and a
 * CUDA engine, ready to run. What `coil run`, `coil bench`, `coil compile` and the C API
 * use; each stage timed. */
#ifndef COIL_RUNTIME_COMPILED_H
#define COIL_RUNTIME_COMPILED_H

#include "codegen/lower.h"
#include "runtime/device.h"

/* What a compile optimises for (--mode): the heuristics alone; the same with CUDA graphs
 * (a GPU's launch overhead gone; on the CPU the same as default); or every kernel's
 * candidates measured at the first run of each size, and chosen by the cache after. */
typedef enum CompileMode { MODE_DEFAULT, MODE_REDUCE_OVERHEAD, MODE_MAX_AUTOTUNE } CompileMode;

/* "default", "reduce-overhead", "max-autotune" into *m; false for anything else. */
bool compile_mode_parse(const char *s, CompileMode *m);
const char *compile_mode_name(CompileMode m);

typedef struct CompileOptions {
    bool no_fusion;      /* one kernel per op, no epilogues (--no-fusion) */
    bool no_llvm;        /* kernels through the loop evaluator, GEMMs on the BLAS path (also
                            what a build without LLVM does: cpu_codegen_built() is false) */
    bool blas_gemm;      /* GEMMs on the BLAS path (OpenBLAS, or runtime/cpu/sgemm.c in a build
                            without it) even when the generated kernels can run */
    int threads;         /* 0: one per core */
    CpuOptions cpu;
    const char *object;  /* load this object file (a package's) instead of running LLVM */
    bool profile;        /* time each step (compiled_step_seconds) */
    const Device *device;/* NULL or the CPU: this CPU; the GPU: an NVIDIA GPU (kernels through
                            NVRTC for its architecture, GEMMs on cuBLAS); where it is not
                            available, compiling fails with the reason (runtime/device.h) */
    CudaEngineOptions cuda; /* on a GPU (profile above sets its profile) */
    bool optimised;      /* the graph has been through the passes already (a rematerialised
                            joint graph: CSE would merge its recomputations back) */
    CompileMode mode;
    const char *tune_cache;   /* max-autotune: the cache file (NULL: tune_cache_default_path) */
    bool tune_progress;       /* max-autotune: a progress bar on stderr while measuring */
    TuneReport *tune_report;  /* max-autotune: what the tuning found (NULL: not kept) */
    const SymBind *tune_sizes;/* max-autotune: the sizes to decide shape padding at (NULL:
                                 no padding; kernels are tuned at each run's sizes) */
    Trace *trace;             /* record every run into it (runtime/trace.h; NULL: none):
                                 on a GPU through the profile's CUDA events */
    bool no_debug_dir;        /* never write COIL_DEBUG_DIR's stages (the autotuner's probe
                                 compiles, which would bury the model's own) */
} CompileOptions;

typedef struct CompileDebug CompileDebug; /* pipeline/stage_dump.h */

typedef struct Compiled {
    Graph *g;            /* the optimised graph (owned) */
    Program *p;
    const Device *device;/* what it was compiled for */
    void *engine;        /* its engine, driven through device->ops (runtime/device.h) */
    bool generated;      /* its code was generated or loaded (false: no_llvm, or a build
                            without LLVM: the loop evaluator runs the kernels) */
    const char *codegen; /* how ("LLVM", "NVRTC, cached", "loading the object", ...) */
    double passes_s, lower_s, llvm_s; /* seconds in each stage (llvm_s: NVRTC and loading
                                         the module, on a GPU) */
    double fuse_s;       /* of lower_s, planning fusion */
    bool from_object;    /* the kernels were a package's object, not compiled here */
    CompileMode mode;
    TuneCache *cache;    /* max-autotune */
    TuneOptions tune;
    SymBind tuned_sb;    /* the sizes the engine is tuned for */
    bool tuned;
    void *tuned_config;  /* per step, what the tuning chose (device->ops->config_size bytes
                            each; for compiled_use_tuning) */
    double tune_s;       /* seconds spent tuning (measuring, or reading the cache) */
    Trace *trace;        /* CompileOptions.trace (the GPU's runs are recorded here) */
    int trace_prog;
    double *traced_s;    /* a GPU's step seconds summed up to the last traced run */
    CompileDebug *debug; /* COIL_DEBUG_DIR's stages, written as they happen (NULL: unset) */
} Compiled;

/* Optimise a copy of g (verify, decompose, fold, cse, dce) and compile it. Errors from any
 * stage, located where they can be. With COIL_DEBUG_DIR=DIR every stage is written to
 * DIR/NNN-<graph>/ as it happens (base/debug_dir.h; the memory plan and the autotuner's
 * report at the first run of each size); a failed write warns and the compile goes on. */
Compiled *compile_graph(const Graph *g, const CompileOptions *o, Err *e);
/* Compile g as it is (already optimised: a package's IR). Takes g over, even on failure. */
Compiled *compile_optimised(Graph *g, const CompileOptions *o, Err *e);
void compiled_free(Compiled *c);
/* The memory plan of g compiled with o at the sizes sb, without generating code (what
 * `coil check` prints). plan_free releases it. */
bool compile_plan(const Graph *g, const CompileOptions *o, const SymBind *sb, MemoryPlan *plan,
                  Err *e);

/* tune_pad.c, for max-autotune: the matmuls of *g whose N or K are not multiples of
 * `multiple`, each compiled alone as it is and padded (passes/pad.c) and timed at sizes
 * sb; *g replaced by a graph padded where padding measured faster. Cached per device. */
bool tune_pad(Graph **g, const SymBind *sb, int multiple, const CompileOptions *o, Err *e);

/* Run with interp_run's conventions: inputs in graph order, params in graph_params order
 * of the source graph (the same order: passes keep parameters and their order), outputs
 * allocated here. With max-autotune, the first run at new sizes then tunes the engine
 * (tune_cpu, tune_cuda) for the runs after it. */
bool compiled_run(Compiled *c, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                  Err *e);
/* The rng step random ops (dropout) draw at from the next run on, on either device (see
 * engine_set_rng_step); 0 until set. */
void compiled_set_rng_step(Compiled *c, uint64_t step);
/* max-autotune: the engine's steps tuned at its latest run's sizes (once per sizes; a
 * no-op in other modes), what was chosen kept for compiled_use_tuning. compiled_run does
 * it; a caller running the engine itself (GPU training's resident runs) calls it after. */
bool compiled_tune(Compiled *c, Err *e);
/* max-autotune, after the tuning run: the chosen configurations (true) or the heuristics
 * (false), so `coil bench` can time both in one process. */
void compiled_use_tuning(Compiled *c, bool on);

/* The engine's memory plan, its latest run's sizes and per-step seconds, and what it says
 * of itself, whichever device runs it (runtime/device.h). */
const MemoryPlan *compiled_plan(const Compiled *c);
const SymBind *compiled_symbols(const Compiled *c);
const double *compiled_step_seconds(const Compiled *c);
EngineReport compiled_report(const Compiled *c);
/* The parameters' tensors were written in place: uploaded again before the next run
 * where the device keeps its own copy. */
void compiled_params_changed(Compiled *c);
/* fn(ctx, s) after each step s (of c->p) of every later run, where the device can (false
 * where it cannot: the caller waits for the whole run). fn NULL: no more. */
bool compiled_on_step(Compiled *c, void (*fn)(void *ctx, int step), void *ctx);
/* A trace's recording stopped (the runs after it go unrecorded). */
bool compiled_stop_trace(Compiled *c, Err *e);

#endif
