/* cpu_engine.h — running a Program on the CPU: symbols bound from the inputs, the memory
 * plan placed in one arena, then each step in order, kernels split over a thread pool. */
#ifndef COIL_RUNTIME_ENGINE_H
#define COIL_RUNTIME_ENGINE_H

#include "codegen/cpu/cpu.h"
#include "runtime/cpu/gemm_tiled.h"
#include "runtime/trace.h"

typedef struct Engine Engine;

/* How the steps run. GEMM steps: through the generated micro-kernels (runtime/
 * gemm_tiled.c) with the step's TileFn when both are given and the layout fits, else
 * OpenBLAS followed by the epilogue kernel. */
typedef struct EngineOptions {
    int threads;          /* 0: one per core; > 0 also sets OpenBLAS's (process-wide) count */
    const KernelFn *fns;  /* per kernel (copied); NULL, or a NULL entry: the loop evaluator */
    const TileFn *tiles;  /* per step (copied); NULL, or a NULL entry: OpenBLAS */
    const Ukernels *uk;   /* the micro-kernels (must outlive the engine); NULL: OpenBLAS */
    bool profile;         /* time every step (engine_step_seconds) */
    void *code;           /* what fns, tiles and uk point into, owned by the engine from
                             engine_new on (even when it fails): free_code(code) at its end */
    void (*free_code)(void *code);
} EngineOptions;

/* How one step runs, when something better than the heuristics is known (the autotuner's
 * choices; all zero: the heuristics). */
typedef enum GemmPath { GEMM_PATH_AUTO, GEMM_PATH_TILED, GEMM_PATH_BLAS } GemmPath;
typedef struct StepConfig {
    int parts;         /* a kernel (and a GEMM's unfused epilogue): split into at most this
                          many chunks over the threads, 0: by its work */
    GemmPath path;     /* a GEMM: the generated kernels (where they can run) or OpenBLAS */
    GemmTiling tiling; /* the generated kernels' blocking; store_only: epilogue unfused */
} StepConfig;

/* Whether this build generates the CPU's kernels (LLVM, codegen/cpu); without, the loop
 * evaluator runs them (runtime/cpu/cpu_device.c). */
bool cpu_codegen_built(void);

/* p (and its graph) must outlive the engine; o NULL: the defaults. Errors: a program whose
 * indices name nothing in its graph, non-static constants, out of memory, no threads. */
Engine *engine_new(const Program *p, const EngineOptions *o, Err *e);
void engine_free(Engine *en);
/* Same conventions as interp_run: inputs (graph order) and params (graph_params order)
 * in, outputs allocated here: outputs must be zeroed (or freed) tensors, or the previous
 * run's of the same shapes, which are overwritten in place (no fresh pages per run). The arena is kept between runs of the same sizes. Inputs
 * and parameters are checked first; errors name them ("input 'x': expected f32[B,4],
 * got f32[2,5] (dimension 1 disagrees)"). One run at a time per engine. */
bool engine_run(Engine *en, const Tensor *inputs, const Tensor *params, Tensor *outputs, Err *e);
/* The rng step random ops draw at from the next run on (0 until set): a training step's
 * dropout masks, read by the kernels at run time, so nothing is recompiled. */
void engine_set_rng_step(Engine *en, uint64_t step);
/* Step s's configuration from now on (NULL: the heuristics again); the current one. */
void engine_configure(Engine *en, int s, const StepConfig *c);
const StepConfig *engine_config(const Engine *en, int s);
int engine_threads(const Engine *en);

/* For the autotuner, after a successful engine_run: step s alone again, on the buffers and
 * sizes of that run (run steps before it first if their results matter); the symbol
 * values; and buffer b's base, which engine_set_buffer may point elsewhere (a copy of a
 * weight, so repeated timings do not find it in cache) until the next engine_run. */
bool engine_run_step(Engine *en, int s, Err *e);
/* Whether GEMM step s can run on the generated kernels at the latest run's sizes. */
bool engine_can_tile(const Engine *en, int s);
const SymBind *engine_symbols(const Engine *en);
void *engine_buffer(const Engine *en, int b);
void *const *engine_buffers(const Engine *en);
void engine_set_buffer(Engine *en, int b, void *base);

/* The planned bytes of the temporaries at these symbol values (peak memory of the
 * arena), and of parameters (constants included), inputs and outputs; known before
 * anything runs. Offsets are 64-byte aligned (plan_memory_aligned: any multiple); temporaries whose lifetimes [first, last]
 * overlap never share bytes (runtime/memory_plan.c says how they are placed). */
typedef struct MemoryPlan {
    int64_t arena_bytes, param_bytes, io_bytes;
    int64_t *offset; /* per buffer: byte offset in the arena (BUF_TEMP), else -1 */
} MemoryPlan;
/* Errors name the buffer (an unbound symbol, a lifetime outside the steps, a size too
 * large). plan_free releases the offsets (and zeroes the plan). */
bool plan_memory(const Program *p, const SymBind *sb, MemoryPlan *plan, Err *e);
/* The same with every temporary's size and offset a multiple of align bytes (a GPU's:
 * cuBLASLt picks its fastest kernels by the operands' alignment, and vector loads need it);
 * align <= 0: plan_memory's 64. */
#define PLAN_ALIGN_GPU 256
bool plan_memory_aligned(const Program *p, const SymBind *sb, int64_t align, MemoryPlan *plan,
                         Err *e);
void plan_free(MemoryPlan *plan);
/* The memory plan at the latest run's sizes (`coil check` and `coil bench` print its peak);
 * NULL before a run has got that far. Valid until the next run or engine_free. */
const MemoryPlan *engine_plan(const Engine *en);
/* How many GEMM steps of the latest run took each path (for reports and tests). */
typedef struct EngineStats {
    int gemm_generated, gemm_blas;
} EngineStats;
EngineStats engine_stats(const Engine *en);
/* With EngineOptions.profile: seconds spent in each step, summed over every run so far;
 * NULL without. */
const double *engine_step_seconds(const Engine *en);
/* Record every run from now on into t (runtime/trace.h): the run, each step's start and
 * end, and each chunk the pool's threads ran (timed into per-thread buffers, drained after
 * the run). t must outlive the engine. Without a trace an engine times nothing. */
bool engine_set_trace(Engine *en, Trace *t, Err *e);
/* fn(ctx, s) after each step s of every run from now on (fn NULL: no more), on the
 * running thread, so a caller can start on the outputs a step finished while the next
 * steps run (data parallelism sums gradients during the backward). */
void engine_on_step(Engine *en, void (*fn)(void *ctx, int step), void *ctx);

#endif
