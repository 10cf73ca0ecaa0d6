/* cpu_device.c — the CPU engine's operations for runtime/device.h: each one the Engine's
 * own function, called through the one interface the pipeline drives every engine by. */
#include "runtime/cpu/cpu_engine.h"
#include "runtime/cpu/cpu_tune.h"
#include "runtime/device.h"

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

const DeviceOps cpu_device_ops = {run,  set_rng_step,       symbols,   plan,      step_seconds,
                                  tune, sizeof(StepConfig), config,    configure, release};
