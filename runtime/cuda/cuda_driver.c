/* cuda_driver.c — libcuda, libcublas and libcublasLt opened with dlopen at first use, their
 * entry points resolved by versioned name into tables that never change after (pthread_once:
 * the one piece of process-wide state, immutable once made); device queries; CUresult and
 * cublasStatus_t names for messages, and the check (cu_ok) every CUresult goes through. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda/cuda.h"
#include "codegen/cuda/libs.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_mapping.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define ENTRY_NAME(f) STR(f),

const char *const cuda_driver_symbols[] = {CUDA_DRIVER_ENTRIES(ENTRY_NAME) NULL};
const char *const cuda_cublas_symbols[] = {CUDA_CUBLAS_ENTRIES(ENTRY_NAME) NULL};
const char *const cuda_cublaslt_symbols[] = {CUDA_CUBLASLT_ENTRIES(ENTRY_NAME) NULL};

/* A versioned entry point newer than some drivers coil runs on, and its predecessor of the
 * same signature (cuEventElapsedTime_v2 came with 12.8; both time two recorded events). */
static const struct {
    const char *name, *older;
} fallbacks[] = {{"cuEventElapsedTime_v2", "cuEventElapsedTime"}};

/* One library and its table, made once. */
typedef struct Lib {
    void *handle;
    const char *why;
    char msg[512];
    char path[4096]; /* the file opened (codegen/cuda/libs.h finds it) */
} Lib;

static struct {
    Lib lib;
    CudaDriver t;
} drv;
static struct {
    Lib lib;
    CudaCublas t;
} blas;
static struct {
    Lib lib;
    CudaCublasLt t;
} lt;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT, blas_once = PTHREAD_ONCE_INIT,
                      lt_once = PTHREAD_ONCE_INIT;

/* Every name into slots (in order; the tables' fields are the same list); the first
 * missing name, or NULL. */
static const char *resolve(void *h, const char *const *names, void (**slots)(void))
{
    for (int i = 0; names[i]; i++) {
        void *f = dlsym(h, names[i]);
        for (size_t j = 0; !f && j < sizeof fallbacks / sizeof *fallbacks; j++)
            if (strcmp(names[i], fallbacks[j].name) == 0)
                f = dlsym(h, fallbacks[j].older);
        if (!f)
            return names[i];
        memcpy(&slots[i], &f, sizeof f);
    }
    return NULL;
}

/* The tables hold only function pointers, in list order: resolve fills them as an array. */
#define RESOLVE(h, names, table) resolve(h, names, (void (**)(void))(void *)&(table))

/* ---------------------------------------------------------------- names */

static const struct {
    CUresult r;
    const char *name;
} cu_names[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};

/* Why the driver cannot say it itself: the stub library answers every call, its name
 * lookups included, with CUDA_ERROR_STUB_LIBRARY. */
static const char *cu_name(CUresult r, const char **text)
{
    const char *name = NULL;
    *text = NULL;
    if (drv.t.cuGetErrorName && drv.t.cuGetErrorName(r, &name) == CUDA_SUCCESS && name) {
        if (drv.t.cuGetErrorString(r, text) != CUDA_SUCCESS)
            *text = NULL;
        return name;
    }
    for (size_t i = 0; i < sizeof cu_names / sizeof *cu_names; i++)
        if (cu_names[i].r == r)
            return cu_names[i].name;
    return "CUDA error (an unknown code)";
}

/* CUresult r as "NAME (description)", into buf. */
const char *cuda_describe(CUresult r, char *buf, size_t n)
{
    const char *text, *name = cu_name(r, &text);
    if (r == CUDA_ERROR_STUB_LIBRARY)
        text = "the CUDA toolkit's stub libcuda.so was loaded, not a driver: no NVIDIA driver "
               "is installed";
    snprintf(buf, n, "%s%s%s%s", name, text ? " (" : "", text ? text : "", text ? ")" : "");
    return buf;
}

bool cu_ok(CUresult r, const char *what, Err *e)
{
    char buf[400];
    if (r != CUDA_SUCCESS)
        err_set(e, ERR_INPUT, "cuda: %s failed: %s", what, cuda_describe(r, buf, sizeof buf));
    return r == CUDA_SUCCESS;
}

const char *cuda_blas_status_name(cublasStatus_t s)
{
    const char *name = blas.t.cublasGetStatusName ? blas.t.cublasGetStatusName(s) : NULL;
    return name ? name : s == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED"
                                                            : "CUBLAS_STATUS (an unknown code)";
}

/* ---------------------------------------------------------------- opening */

static void driver_open(void)
{
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    const char *missing, *env = getenv("COIL_LIBCUDA");
    Lib *L = &drv.lib;
    if (!(L->handle = cuda_lib_open("COIL_LIBCUDA", names, L->path, sizeof L->path))) {
        snprintf(L->msg, sizeof L->msg, "no NVIDIA driver: %s not found%s",
                 env && *env ? env : "libcuda.so.1",
                 env && *env ? " ($COIL_LIBCUDA)" : " (install the NVIDIA driver to run on a GPU)");
        L->why = L->msg;
        return;
    }
    if ((missing = RESOLVE(L->handle, cuda_driver_symbols, drv.t))) {
        memset(&drv.t, 0, sizeof drv.t);
        snprintf(L->msg, sizeof L->msg, "the NVIDIA driver is too old: %.300s lacks %s (coil needs "
                 "a driver for CUDA 12 or newer)", L->path, missing);
        L->why = L->msg;
        return;
    }
    char buf[300];
    int count = 0;
    CUresult r = drv.t.cuInit(0);
    if (r == CUDA_SUCCESS)
        r = drv.t.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(L->msg, sizeof L->msg, r != CUDA_SUCCESS ? "cuInit failed: %s"
                                                          : "no CUDA device (%s)",
                 r != CUDA_SUCCESS ? cuda_describe(r, buf, sizeof buf) : "cuDeviceGetCount is 0");
        L->why = L->msg;
        return;
    }
    drv.t.cuDriverGetVersion(&drv.t.version);
}

static void blas_open(void)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                        NULL};
    const char *missing, *env = getenv("COIL_LIBCUBLAS");
    Lib *L = &blas.lib;
    if (!(L->handle = cuda_lib_open("COIL_LIBCUBLAS", names, L->path, sizeof L->path))) {
        snprintf(L->msg, sizeof L->msg, "cuBLAS not found: %s (looked in the loader's path, the "
                 "CUDA toolkit's lib64 and Python's nvidia packages; install the toolkit's "
                 "libcublas, or add its folder to LD_LIBRARY_PATH)",
                 env && *env ? env : "libcublas.so.13 or .12");
        L->why = L->msg;
        return;
    }
    if ((missing = RESOLVE(L->handle, cuda_cublas_symbols, blas.t))) {
        memset(&blas.t, 0, sizeof blas.t);
        snprintf(L->msg, sizeof L->msg, "%.300s lacks %s (coil needs cuBLAS 12 or newer)", L->path,
                 missing);
        L->why = L->msg;
        return;
    }
    static const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int i = 0; i < 3; i++)
        blas.t.cublasGetProperty(parts[i], &blas.t.version[i]);
}

/* cuBLASLt of cuBLAS's major version first: the two are released together. */
static void lt_open(void)
{
    char same[64];
    const char *missing, *why, *env = getenv("COIL_LIBCUBLASLT");
    const CudaCublas *b = cuda_cublas(&why);
    snprintf(same, sizeof same, "libcublasLt.so.%d", b ? b->version[0] : 13);
    const char *const names[] = {same, "libcublasLt.so.13", "libcublasLt.so.12",
                                 "libcublasLt.so", NULL};
    Lib *L = &lt.lib;
    if (!(L->handle = cuda_lib_open("COIL_LIBCUBLASLT", names, L->path, sizeof L->path))) {
        snprintf(L->msg, sizeof L->msg, "cuBLASLt not found: %s", env && *env ? env : same);
        L->why = L->msg;
        return;
    }
    if ((missing = RESOLVE(L->handle, cuda_cublaslt_symbols, lt.t))) {
        memset(&lt.t, 0, sizeof lt.t);
        snprintf(L->msg, sizeof L->msg, "%.300s lacks %s (coil needs cuBLASLt 12 or newer)", L->path,
                 missing);
        L->why = L->msg;
    }
}

const CudaDriver *cuda_driver(const char **why)
{
    pthread_once(&drv_once, driver_open);
    if (why)
        *why = drv.lib.why;
    return drv.lib.why ? NULL : &drv.t;
}

const CudaCublas *cuda_cublas(const char **why)
{
    pthread_once(&blas_once, blas_open);
    if (why)
        *why = blas.lib.why;
    return blas.lib.why ? NULL : &blas.t;
}

const CudaCublasLt *cuda_cublaslt(const char **why)
{
    pthread_once(&lt_once, lt_open);
    if (why)
        *why = lt.lib.why;
    return lt.lib.why ? NULL : &lt.t;
}

bool cuda_driver_available(const char **why) { return cuda_driver(why) != NULL; }

bool cuda_blas_available(const char **why)
{
    return cuda_cublas(why) && cuda_cublaslt(why);
}

/* ---------------------------------------------------------------- reports */

/* One line: the library's file and version, or why it did not load. */
static size_t report_line(char *buf, size_t n, const char *what, const Lib *L, const char *version)
{
    int w = L->why ? snprintf(buf, n, "%-9s %s\n", what, L->why)
                   : snprintf(buf, n, "%-9s %s (%s)\n", what, L->path, version);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

/* NCCL is not used yet: found, only to say where, and closed again. */
static size_t report_nccl(char *buf, size_t n)
{
    static const char *const names[] = {"libnccl.so.2", "libnccl.so", NULL};
    char path[4096];
    void *h = cuda_lib_open("COIL_LIBNCCL", names, path, sizeof path);
    int w = snprintf(buf, n, "%-9s %s\n", "NCCL:", h ? path : "not found");
    if (h)
        dlclose(h);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

void cuda_libraries_report(char *buf, size_t n)
{
    char v[64], nv[32];
    size_t at = 0;
    const CudaDriver *cu = cuda_driver(NULL);
    const CudaCublas *b = cuda_cublas(NULL);
    cuda_cublaslt(NULL);
    snprintf(v, sizeof v, "CUDA %d.%d", cu ? cu->version / 1000 : 0, cu ? cu->version % 1000 / 10 : 0);
    at += report_line(buf + at, n - at, "driver:", &drv.lib, v);
    const char *nvrtc = nvrtc_library();
    int w = snprintf(buf + at, n - at, "%-9s %s (%s)\n", "NVRTC:", nvrtc ? nvrtc : "not found",
                     nvrtc_version(nv, sizeof nv));
    at += w < 0 ? 0 : (size_t)w < n - at ? (size_t)w : n - at - 1;
    snprintf(v, sizeof v, "%d.%d.%d", b ? b->version[0] : 0, b ? b->version[1] : 0,
             b ? b->version[2] : 0);
    at += report_line(buf + at, n - at, "cuBLAS:", &blas.lib, v);
    at += report_line(buf + at, n - at, "cuBLASLt:", &lt.lib, "its cuBLAS's");
    report_nccl(buf + at, n - at);
}

/* ---------------------------------------------------------------- devices */

/* ---------------------------------------------------------------- contexts */

#define MAX_DEVICES 64
static struct {
    pthread_mutex_t lock;
    CUcontext ctx[MAX_DEVICES];
} primary = {PTHREAD_MUTEX_INITIALIZER, {0}};

bool cuda_primary_context(int ordinal, CUcontext *ctx, Err *e)
{
    const char *why;
    const CudaDriver *cu = cuda_driver(&why);
    CUdevice dev;
    *ctx = NULL;
    if (!cu) {
        err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
        return false;
    }
    if (ordinal < 0 || ordinal >= MAX_DEVICES) {
        err_set(e, ERR_INPUT, "cuda: device %d: coil handles devices 0 to %d", ordinal,
                MAX_DEVICES - 1);
        return false;
    }
    pthread_mutex_lock(&primary.lock);
    bool ok = primary.ctx[ordinal] ||
              (cu_ok(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet", e) &&
               cu_ok(cu->cuDevicePrimaryCtxRetain(&primary.ctx[ordinal], dev),
                     "cuDevicePrimaryCtxRetain", e));
    *ctx = primary.ctx[ordinal];
    pthread_mutex_unlock(&primary.lock);
    return ok;
}

/* Free memory needs a context: the primary one, current for the question. */
static bool query_memory(const CudaDriver *cu, int ordinal, CudaDeviceInfo *info, Err *e)
{
    CUcontext ctx, prev;
    size_t free_b = 0, total_b = 0;
    if (!cuda_primary_context(ordinal, &ctx, e) ||
        !cu_ok(cu->cuCtxPushCurrent(ctx), "cuCtxPushCurrent", e))
        return false;
    bool ok = cu_ok(cu->cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo", e);
    cu->cuCtxPopCurrent(&prev);
    info->free_bytes = (int64_t)free_b;
    info->total_bytes = (int64_t)total_b;
    return ok;
}

bool cuda_device_healthy(int ordinal, char *why, size_t n)
{
    Err e = {0};
    CUcontext ctx, prev;
    const CudaDriver *cu = cuda_driver(NULL);
    if (!cuda_primary_context(ordinal, &ctx, &e)) {
        snprintf(why, n, "%s", e.msg);
        return false;
    }
    CUresult r = cu->cuCtxPushCurrent(ctx);
    if (r == CUDA_SUCCESS) {
        r = cu->cuCtxSynchronize();
        cu->cuCtxPopCurrent(&prev);
    }
    if (r != CUDA_SUCCESS)
        cuda_describe(r, why, n);
    return r == CUDA_SUCCESS;
}

bool cuda_device_query(int ordinal, CudaDeviceInfo *info, Err *e)
{
    const char *why;
    const CudaDriver *cu = cuda_driver(&why);
    memset(info, 0, sizeof *info);
    if (!cu) {
        err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
        return false;
    }
    CUdevice dev;
    info->ordinal = ordinal;
    info->driver_version = cu->version;
    bool ok = cu_ok(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet", e) &&
              cu_ok(cu->cuDeviceGetName(info->name, sizeof info->name, dev),
                    "cuDeviceGetName", e) &&
              cu_ok(cu->cuDeviceGetAttribute(&info->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                             dev), "cuDeviceGetAttribute", e) &&
              cu_ok(cu->cuDeviceGetAttribute(&info->major,
                                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                    "cuDeviceGetAttribute", e) &&
              cu_ok(cu->cuDeviceGetAttribute(&info->minor,
                                             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                    "cuDeviceGetAttribute", e) &&
              query_memory(cu, ordinal, info, e);
    if (ok && !cuda_arch_name(info->major, info->minor, info->arch, sizeof info->arch)) {
        err_set(e, ERR_INPUT, "cuda: %s has compute capability %d.%d, older than any NVRTC "
                "compiles for", info->name, info->major, info->minor);
        ok = false;
    }
    return ok;
}
