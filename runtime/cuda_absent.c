/* cuda_absent.c — the CUDA engine in a build without the CUDA toolkit's headers: every entry
 * point says so, once, the way cuda_driver_available's reason reads elsewhere. */
#include <string.h>

#include "runtime/cuda_engine.h"

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
