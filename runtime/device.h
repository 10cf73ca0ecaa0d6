/* device.h — the devices coil compiles for and runs on, in one table. A device named on
 * the command line, in the C API or in a package's manifest is looked up here once;
 * everything after asks its Device for what differs (the passes its code generator wants,
 * the padding and alignment that suit it, whether it is there), and nothing else in coil
 * compares device names.
 *
 * What is not behind this table yet: the engines themselves (runtime/cpu/cpu_engine.h and
 * runtime/cuda/cuda_engine.h, twin APIs the pipeline chooses between with `gpu`). They
 * are to become operations of a Device (prepare, run, configure, plan, tune, free), with
 * room for the collectives of data-parallel training. */
#ifndef COIL_RUNTIME_DEVICE_H
#define COIL_RUNTIME_DEVICE_H

#include "base/base.h"

typedef struct Device {
    const char *name;             /* "cpu", "cuda": as users and manifests write it */
    const char *title;            /* for messages: "this CPU", "an NVIDIA GPU" */
    bool gpu;                     /* kernels through NVRTC on a GPU, else LLVM on the host */
    const char *const *passes;    /* the pass pipeline its code generator expects */
    int pad_multiple;             /* max-autotune pads a matmul's N to a multiple of it */
    int plan_align;               /* bytes every temporary's offset is a multiple of (0: 64) */
    /* Whether it can be compiled for and run here; false with why (a static string). */
    bool (*available)(const char **why);
} Device;

/* The device named `name` (NULL: the CPU), or NULL when there is none of that name. */
const Device *device_find(const char *name);
/* The same, or an ERR_USAGE error naming what was asked for and every known device. */
const Device *device_parse(const char *name, Err *e);
/* The CPU, the default everywhere a device is not given. */
const Device *device_cpu(void);
/* "cpu or cuda": the known names, for help and messages. */
const char *device_names(void);

#endif
