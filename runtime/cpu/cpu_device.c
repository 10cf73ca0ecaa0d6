/* cpu_device.c — the CPU engine's operations for runtime/device.h: each one the Engine's
 * own function, called through the one interface the pipeline drives every engine by. */
#include <stdlib.h>

#include "runtime/cpu/cpu_engine.h"
#include "runtime/cpu/cpu_tune.h"
#include "runtime/device.h"

/* An engine over module m's entry points, one per kernel and per step (m NULL: the loop
 * evaluator runs every kernel). */
static Engine *engine_over(const Program *p, const CpuModule *m, const EngineRequest *r, Err *e)
{
    EngineOptions eo = {.threads = r->threads, .profile = r->profile};
    KernelFn *fns = m ? calloc((size_t)p->nkernel + 1, sizeof *fns) : NULL;
    TileFn *tiles = m ? calloc((size_t)p->nstep + 1, sizeof *tiles) : NULL;
    if (m && (!fns || !tiles)) {
        free(fns);
        free(tiles);
        err_set(e, ERR_INPUT, "out of memory creating the engine");
        return NULL;
    }
    for (int k = 0; fns && k < p->nkernel; k++)
        fns[k] = cpu_kernel(m, k);
    for (int s = 0; tiles && s < p->nstep; s++)
        tiles[s] = cpu_tile(m, s);
    eo.fns = fns;
    if (m && !r->blas_gemm) {
        eo.tiles = tiles;
        eo.uk = cpu_ukernels(m);
    }
    Engine *en = engine_new(p, &eo, e);
    free(fns);
    free(tiles);
    return en;
}

/* LLVM's module for p (or a package's object), then an engine over it. */
static void *prepare(const Program *p, const EngineRequest *r, EngineMade *made, Err *e)
{
    double t0 = clock_seconds();
    bool llvm = !r->no_llvm && (cpu_available() || r->object);
    if (llvm)
        made->module = r->object ? cpu_load_object(p, r->object, e) : cpu_compile(p, &r->cpu, e);
    made->from_object = r->object != NULL;
    made->codegen_s = clock_seconds() - t0;
    Engine *en = !llvm || made->module ? engine_over(p, made->module, r, e) : NULL;
    if (en && r->trace && !engine_set_trace(en, r->trace, e)) {
        engine_free(en);
        en = NULL;
    }
    made->seconds = clock_seconds() - t0;
    return en;
}

static bool run(void *en, const Tensor *inputs, const Tensor *params, Tensor *outputs, Err *e)
{
    return engine_run(en, inputs, params, outputs, e);
}

static void set_rng_step(void *en, uint64_t step) { engine_set_rng_step(en, step); }
static const SymBind *symbols(const void *en) { return engine_symbols(en); }
static const MemoryPlan *plan(const void *en) { return engine_plan(en); }
static const double *step_seconds(const void *en) { return engine_step_seconds(en); }

static bool tune(void *en, const Program *p, const TuneOptions *o, Err *e)
{
    return tune_cpu(en, p, o, e);
}

static const void *config(const void *en, int step) { return engine_config(en, step); }

static bool configure(void *en, int step, const void *c, Err *e)
{
    (void)e; /* a CPU configuration only selects among code that is already there */
    engine_configure(en, step, c);
    return true;
}

static void release(void *en) { engine_free(en); }

const DeviceOps cpu_device_ops = {prepare,      true,  run,    set_rng_step,
                                  symbols,      plan,  step_seconds, tune,
                                  sizeof(StepConfig), config, configure, release};
