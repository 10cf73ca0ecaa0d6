/* device.c — the table of devices (runtime/device.h). A device whose backend this build
 * lacks is still listed (its name is known: a package or a command line may ask for it),
 * without operations, saying why; the build's choice shows here and nowhere else. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/device.h"

#if COIL_HAVE_CUDA
#define CUDA_OPS &cuda_device_ops
#else
#define CUDA_OPS NULL
#endif

/* Padding to whole AVX-512 vectors of f32 on the CPU (what its kernels would prefer, if
 * any); to 8 elements on a GPU (16 bytes of f16/bf16: what tensor cores and cuBLAS's
 * aligned kernels want), whose temporaries are 256-byte aligned for cuBLASLt. Both keep
 * attention whole (one fused step: runtime/cpu/attention.c, the GPU's generated kernel). */
static const char *const cpu_passes = pass_pipeline, *const cuda_passes = pass_pipeline_cuda;

static const Device devices[] = {
    {"cpu", "this CPU", false, &cpu_passes, 16, 0, &cpu_device_ops, NULL},
    {"cuda", "an NVIDIA GPU", true, &cuda_passes, 8, PLAN_ALIGN_GPU, CUDA_OPS,
     "this coil was built without the CUDA toolkit's headers (/usr/local/cuda/include): "
     "install the toolkit and rebuild"},
};
enum { NDEVICE = sizeof devices / sizeof *devices };

const Device *device_find(const char *name)
{
    if (!name)
        return &devices[0];
    for (int i = 0; i < NDEVICE; i++)
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

bool device_available(const Device *d, const char **why)
{
    if (d->ops)
        return d->ops->available(why);
    *why = d->absent;
    return false;
}

/* "cpu or cuda", "cpu, cuda or tpu": written once from the table. */
static char names[128];

static void write_names(void)
{
    size_t used = 0;
    for (int i = 0; i < NDEVICE && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                 i == 0 ? "" : i + 1 < NDEVICE ? ", " : " or ", devices[i].name);
}

const char *device_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, write_names);
    return names;
}
