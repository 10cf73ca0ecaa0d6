/* device.c — the table of devices (runtime/device.h). A device whose backend is not built
 * is still listed (its name is known: a package or a command line may ask for it), and
 * says why it is unavailable. */
#include <string.h>

#include "passes/passes.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/device.h"

static bool always(const char **why)
{
    *why = NULL;
    return true;
}

/* Padding to whole AVX-512 vectors of f32 on the CPU (what its kernels would prefer, if
 * any); to 8 elements on a GPU (16 bytes of f16/bf16: what tensor cores and cuBLAS's
 * aligned kernels want), whose temporaries are 256-byte aligned for cuBLASLt. The GPU keeps
 * attention whole (one fused kernel); the CPU decomposes it into GEMMs and a softmax. */
static const char *const cpu_passes = pass_pipeline, *const cuda_passes = pass_pipeline_cuda;

static const Device devices[] = {
    {"cpu", "this CPU", false, &cpu_passes, 16, 0, always, &cpu_device_ops},
    {"cuda", "an NVIDIA GPU", true, &cuda_passes, 8, PLAN_ALIGN_GPU, cuda_driver_available,
     &cuda_device_ops},
};

const Device *device_find(const char *name)
{
    if (!name)
        return &devices[0];
    for (size_t i = 0; i < sizeof devices / sizeof *devices; i++)
        if (strcmp(name, devices[i].name) == 0)
            return &devices[i];
    return NULL;
}

const Device *device_parse(const char *name, Err *e)
{
    const Device *d = device_find(name);
    if (!d)
        err_set(e, ERR_USAGE, "unknown device '%s' (%s)", name, device_names());
    return d;
}

const Device *device_cpu(void) { return &devices[0]; }

const char *device_names(void) { return "cpu or cuda"; }
