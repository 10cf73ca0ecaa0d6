/* cuda_device.c — the CUDA engine's operations for runtime/device.h: each one the
 * CudaEngine's own function, called through the one interface the pipeline drives every
 * engine by. (Without the CUDA toolkit's headers the engine's functions are
 * engine_absent.c's, which say why; the device then reports itself unavailable and no
 * engine is ever made.) */
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_tune.h"
#include "runtime/device.h"

/* The engine, its kernels compiled by NVRTC (or a package's cubin loaded). */
static void *prepare(const Program *p, const EngineRequest *r, EngineMade *made, Err *e)
{
    double t0 = clock_seconds();
    CudaEngineOptions co = r->cuda;
    co.profile = co.profile || r->profile || r->trace; /* a trace reads the step events */
    co.graphs = co.graphs || r->graphs;
    co.full_opt = co.full_opt || r->full_opt;
    CudaEngine *en = cuda_engine_new(p, &co, e);
    made->seconds = clock_seconds() - t0;
    made->from_object = co.cubin != NULL;
    made->codegen_s = en ? cuda_engine_stats(en).nvrtc_s : 0;
    return en;
}

static bool run(void *en, const Tensor *inputs, const Tensor *params, Tensor *outputs, Err *e)
{
    return cuda_engine_run(en, inputs, params, outputs, e);
}

static void set_rng_step(void *en, uint64_t step) { cuda_engine_set_rng_step(en, step); }
static const SymBind *symbols(const void *en) { return cuda_engine_symbols(en); }
static const MemoryPlan *plan(const void *en) { return cuda_engine_plan(en); }
static const double *step_seconds(const void *en) { return cuda_engine_step_seconds(en); }

static bool tune(void *en, const Program *p, const TuneOptions *o, Err *e)
{
    return tune_cuda(en, p, o, e);
}

static const void *config(const void *en, int step) { return cuda_engine_config(en, step); }

static bool configure(void *en, int step, const void *c, Err *e)
{
    return cuda_engine_configure(en, step, c, e);
}

static void release(void *en) { cuda_engine_free(en); }

const DeviceOps cuda_device_ops = {prepare,      false, run,    set_rng_step,
                                   symbols,      plan,  step_seconds, tune,
                                   sizeof(CudaStepConfig), config, configure, release};
