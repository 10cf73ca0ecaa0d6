/* cuda_absent.c — the CUDA backend's compile side in a build without the CUDA toolkit's
 * headers: generating CUDA C still works (emit.c needs none), compiling it says why not. */
#include <stdio.h>
#include <string.h>

#include "codegen/cuda/cuda.h"

static const char why[] = "this coil was built without the CUDA toolkit's headers "
                          "(/usr/local/cuda/include); install the toolkit and rebuild";

bool nvrtc_available(const char **reason)
{
    if (reason)
        *reason = why;
    return false;
}

const char *nvrtc_version(char *buf, size_t n)
{
    snprintf(buf, n, "none");
    return buf;
}

const char *nvrtc_library(void) { return NULL; }

bool nvrtc_compile(const char *source, const char *name, const CudaCompileOptions *o, Cubin *out,
                   Err *e)
{
    (void)source, (void)o;
    memset(out, 0, sizeof *out);
    err_set(e, ERR_INPUT, "cannot compile %s for a GPU: %s", name, why);
    return false;
}

void cubin_free(Cubin *c) { memset(c, 0, sizeof *c); }

char *nvrtc_ptx(const char *source, const char *name, const CudaCompileOptions *o, Err *e)
{
    (void)source, (void)o;
    err_set(e, ERR_INPUT, "cannot compile %s for a GPU: %s", name, why);
    return NULL;
}
