/* cuda_device.c — an NVIDIA GPU as a device (runtime/device.h): its kernels compiled by
 * NVRTC (or a package's cubin loaded) and run by the CUDA engine, its parameters kept on
 * the GPU through training, where the optimizer steps them (cuda_optim.h). Built only
 * with the toolkit's headers; without them the device's row says so (runtime/device.c). */
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_optim.h"
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
    made->generated = en != NULL;
    CudaEngineStats st = en ? cuda_engine_stats(en) : (CudaEngineStats){0};
    made->codegen_s = st.nvrtc_s;
    made->codegen = co.cubin ? "loading the cubin" : st.cubin_cached ? "NVRTC, cached" : "NVRTC";
    made->nstage = 2;
    made->stage[0].name = co.cubin ? "load-cubin" : "nvrtc";
    made->stage[0].seconds = st.nvrtc_s;
    made->stage[1].name = "cuda-engine";
    made->stage[1].seconds = made->seconds - st.nvrtc_s;
    return en;
}

/* The GPU the engine would run on, as the autotuner's cache keys it. */
static bool tune_key(const EngineRequest *r, char *key, size_t n, Err *e)
{
    CudaDeviceInfo d;
    if (!cuda_device_query(r->cuda.device, &d, e))
        return false;
    tune_cuda_device(&d, key, n);
    return true;
}

static bool write_cubin(const char *source, const CudaCompileOptions *co, const char *path,
                        double *seconds, Err *e)
{
    Cubin c = {0};
    bool ok = nvrtc_compile(source, "kernels.cu", co, &c, e) &&
              file_write_atomic(path, c.data, c.size, e);
    *seconds = ok ? c.seconds : 0;
    cubin_free(&c);
    return ok;
}

static bool write_ptx(const char *source, const CudaCompileOptions *co, const char *path, Err *e)
{
    char *ptx = nvrtc_ptx(source, "kernels.cu", co, e);
    bool ok = ptx && file_write_atomic(path, ptx, strlen(ptx), e);
    free(ptx);
    return ok;
}

/* The kernels' CUDA C ("cu": the engine's helpers too, since it loads the cubin made from
 * it), or that compiled by NVRTC for r->arch ("cubin", "ptx"). */
static bool emit(const Program *p, const EmitRequest *r, const char *form, const char *path,
                 double *seconds, Err *e)
{
    *seconds = 0;
    char *source = cuda_engine_source(p, e);
    CudaCompileOptions co = {.arch = r->arch, .full_opt = r->full_opt};
    bool ok = source && (strcmp(form, "cu") == 0 ? file_write_atomic(path, source, strlen(source), e)
                         : strcmp(form, "cubin") == 0 ? write_cubin(source, &co, path, seconds, e)
                                                      : write_ptx(source, &co, path, e));
    free(source);
    return ok;
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

static void params_changed(void *en) { cuda_engine_params_changed(en); }

static void report(const void *en, EngineReport *r)
{
    memset(r, 0, sizeof *r);
    const CudaDeviceInfo *d = cuda_engine_device(en);
    snprintf(r->hardware, sizeof r->hardware, "%s", d->name);
    snprintf(r->arch, sizeof r->arch, "%s", d->arch);
    r->gpu = cuda_engine_stats(en);
}

static void release(void *en) { cuda_engine_free(en); }

/* ---------------------------------------------------------------- training on the GPU */

static void *device_optim_new(void *en, const Optimizer *host, const Tensor *params, int nparam,
                       int first_grad, bool accumulate, Err *e)
{
    return cuda_optim_new(en, host, params, nparam, first_grad, accumulate, e);
}

static void device_optim_free(void *opt) { cuda_optim_free(opt); }

static bool run_resident(void *en, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                         const bool *fetch, Err *e)
{
    return cuda_engine_run_resident(en, inputs, params, outputs, fetch, e);
}

static bool accumulate(void *opt, bool first, Err *e) { return cuda_optim_accumulate(opt, first, e); }

static bool step(void *opt, double grad_scale, double lr, double *norm, Err *e)
{
    return cuda_optim_step(opt, grad_scale, lr, e) && cuda_optim_finish(opt, norm, e);
}

static bool download_params(void *en, Tensor *params, Err *e)
{
    return cuda_engine_download_params(en, params, e);
}

static bool download(void *opt, Optimizer *host, Err *e) { return cuda_optim_download(opt, host, e); }
static bool upload(void *opt, const Optimizer *host, Err *e) { return cuda_optim_upload(opt, host, e); }

static const DeviceTraining training = {device_optim_new, device_optim_free, run_resident,
                                        accumulate,       step,              download_params,
                                        download,         upload};

const DeviceOps cuda_device_ops = {
    .available = cuda_driver_available, .tune_key = tune_key, .emit = emit,
    .prepare = prepare, .set_trace = NULL, .run = run, .set_rng_step = set_rng_step,
    .symbols = symbols, .plan = plan, .step_seconds = step_seconds, .tune = tune,
    .config_size = sizeof(CudaStepConfig), .config = config, .configure = configure,
    .params_changed = params_changed, .report = report, .free = release,
    .training = &training};
