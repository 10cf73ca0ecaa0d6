/* cpu_absent.c — the CPU backend's interface in a build without LLVM (-DCOIL_LLVM=OFF, as
 * on a GPU machine without llvm-19-dev): compiling fails saying so, and the compile
 * pipeline then runs kernels through the loop evaluator and GEMMs on the BLAS path (OpenBLAS,
 * or coil's portable GEMM in a build without it: -DCOIL_OPENBLAS=OFF). */
#include "codegen/cpu/cpu.h"

static const char why[] = "this coil was built without LLVM (-DCOIL_LLVM=OFF), so it has no "
                          "CPU code generator; install llvm-19-dev and rebuild";

bool cpu_available(void) { return false; }

CpuModule *cpu_compile(const Program *p, const CpuOptions *o, Err *e)
{
    (void)p, (void)o;
    err_set(e, ERR_INPUT, "%s", why);
    return NULL;
}

CpuModule *cpu_load_object(const Program *p, const char *path, Err *e)
{
    (void)p;
    err_set(e, ERR_INPUT, "%s: cannot load compiled kernels: %s", path, why);
    return NULL;
}

bool cpu_emit(const Program *p, const CpuOptions *o, const char *what, const char *path, Err *e)
{
    (void)p, (void)o, (void)what;
    err_set(e, ERR_INPUT, "%s: cannot emit kernels: %s", path, why);
    return false;
}

KernelFn cpu_kernel(const CpuModule *m, int k)
{
    (void)m, (void)k;
    return NULL;
}

TileFn cpu_tile(const CpuModule *m, int s)
{
    (void)m, (void)s;
    return NULL;
}

const Ukernels *cpu_ukernels(const CpuModule *m)
{
    (void)m;
    return NULL;
}

double cpu_compile_seconds(const CpuModule *m)
{
    (void)m;
    return 0;
}

CpuTimes cpu_compile_times(const CpuModule *m)
{
    (void)m;
    return (CpuTimes){0};
}

void cpu_free(CpuModule *m) { (void)m; }
