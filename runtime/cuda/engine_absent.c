/* engine_absent.c — the CUDA engine in a build without the CUDA toolkit's headers: every entry
 * point says so, once, the way cuda_driver_available's reason reads elsewhere. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_optim.h"
#include "runtime/cuda/cuda_tune.h"

static const char why[] = "this coil was built without the CUDA toolkit's headers "
                          "(/usr/local/cuda/include): install the toolkit and rebuild";

bool cuda_driver_available(const char **reason)
{
    if (reason)
        *reason = why;
    return false;
}

bool cuda_blas_available(const char **reason)
{
    if (reason)
        *reason = why;
    return false;
}

bool cuda_device_query(int ordinal, CudaDeviceInfo *info, Err *e)
{
    memset(info, 0, sizeof *info);
    info->ordinal = ordinal;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

bool cuda_device_healthy(int ordinal, char *reason, size_t n)
{
    (void)ordinal;
    snprintf(reason, n, "%s", why);
    return false;
}

void cuda_libraries_report(char *buf, size_t n) { snprintf(buf, n, "CUDA: %s\n", why); }

CudaEngine *cuda_engine_new(const Program *p, const CudaEngineOptions *o, Err *e)
{
    (void)p, (void)o;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return NULL;
}

void cuda_engine_free(CudaEngine *en) { (void)en; }

bool cuda_engine_run(CudaEngine *en, const Tensor *inputs, const Tensor *params,
                     Tensor *outputs, Err *e)
{
    (void)en, (void)inputs, (void)params, (void)outputs;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

void cuda_engine_params_changed(CudaEngine *en) { (void)en; }

void cuda_engine_set_rng_step(CudaEngine *en, uint64_t step) { (void)en, (void)step; }

const MemoryPlan *cuda_engine_plan(const CudaEngine *en)
{
    (void)en;
    return NULL;
}

const CudaDeviceInfo *cuda_engine_device(const CudaEngine *en)
{
    (void)en;
    return NULL;
}

CudaEngineStats cuda_engine_stats(const CudaEngine *en)
{
    (void)en;
    return (CudaEngineStats){0};
}

const double *cuda_engine_step_seconds(const CudaEngine *en)
{
    (void)en;
    return NULL;
}

void *cuda_engine_context(const CudaEngine *en)
{
    (void)en;
    return NULL;
}

uint64_t cuda_engine_param_addr(const CudaEngine *en, int param)
{
    (void)en, (void)param;
    return 0;
}

uint64_t cuda_engine_output_addr(const CudaEngine *en, int output)
{
    (void)en, (void)output;
    return 0;
}

bool cuda_engine_run_resident(CudaEngine *en, const Tensor *inputs, const Tensor *params,
                              Tensor *outputs, const bool *fetch, Err *e)
{
    (void)en, (void)inputs, (void)params, (void)outputs, (void)fetch;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

bool cuda_engine_download_params(CudaEngine *en, Tensor *params, Err *e)
{
    (void)en, (void)params;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

CudaOptim *cuda_optim_new(CudaEngine *en, const Optimizer *host, const Tensor *params,
                          int nparam, int first_grad, bool accumulate, Err *e)
{
    (void)en, (void)host, (void)params, (void)nparam, (void)first_grad, (void)accumulate;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return NULL;
}

void cuda_optim_free(CudaOptim *o) { (void)o; }

static bool absent(Err *e)
{
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

bool cuda_optim_accumulate(CudaOptim *o, bool first, Err *e)
{
    (void)o, (void)first;
    return absent(e);
}

bool cuda_optim_step(CudaOptim *o, double grad_scale, double lr, Err *e)
{
    (void)o, (void)grad_scale, (void)lr;
    return absent(e);
}

bool cuda_optim_finish(CudaOptim *o, double *norm, Err *e)
{
    (void)o;
    *norm = NAN;
    return absent(e);
}

bool cuda_optim_download(CudaOptim *o, Optimizer *host, Err *e)
{
    (void)o, (void)host;
    return absent(e);
}

bool cuda_optim_upload(CudaOptim *o, const Optimizer *host, Err *e)
{
    (void)o, (void)host;
    return absent(e);
}

bool cuda_engine_configure(CudaEngine *en, int s, const CudaStepConfig *c, Err *e)
{
    (void)en, (void)s, (void)c;
    err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
    return false;
}

bool tune_cuda(CudaEngine *en, const Program *p, const TuneOptions *o, Err *e)
{
    (void)en, (void)p, (void)o;
    err_set(e, ERR_INPUT, "cannot tune for a GPU: %s", why);
    return false;
}

const CudaStepConfig *cuda_engine_config(const CudaEngine *en, int s)
{
    (void)en, (void)s;
    return NULL;
}

const SymBind *cuda_engine_symbols(const CudaEngine *en)
{
    (void)en;
    return NULL;
}
