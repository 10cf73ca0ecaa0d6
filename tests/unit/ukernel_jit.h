/* ukernel_jit.h — the GEMM micro-kernels alone, JIT-compiled for the host as the CPU
 * backend compiles them (O3, host CPU and features), for the unit test and gemm_bench. */
#ifndef COIL_TOOLS_UKERNEL_JIT_H
#define COIL_TOOLS_UKERNEL_JIT_H

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <string.h>

#include "codegen/cpu/ukernel.h"

typedef struct UkJit {
    LLVMOrcLLJITRef jit;
    Ukernels uk;
} UkJit;

/* f32 lanes of the host's widest vectors, from LLVM's view of its features. */
static inline int ukjit_host_vec(void)
{
    char *f = LLVMGetHostCPUFeatures();
    int vec = strstr(f, "+avx512f") ? 16 : strstr(f, "+avx2") ? 8 : 4;
    LLVMDisposeMessage(f);
    return vec;
}

static inline bool ukjit_fail(LLVMErrorRef err, const char *what, Err *e)
{
    char *msg = LLVMGetErrorMessage(err);
    err_set(e, ERR_INPUT, "ukernel jit: %s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}

static inline LLVMTargetMachineRef ukjit_host_machine(void)
{
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName();
    char *features = LLVMGetHostCPUFeatures(), *msg = NULL;
    LLVMTargetRef target = NULL;
    LLVMTargetMachineRef tm = NULL;
    if (!LLVMGetTargetFromTriple(triple, &target, &msg))
        tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive,
                                     LLVMRelocDefault, LLVMCodeModelJITDefault);
    LLVMDisposeMessage(msg);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    return tm;
}

/* The module holding both micro-kernels of `shape`, optimised at O3 for the host. */
static inline bool ukjit_module(LLVMContextRef ctx, const UkernelShape *shape, LLVMModuleRef *out,
                                Err *e)
{
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("ukernels", ctx);
    LLVMTargetMachineRef tm = ukjit_host_machine();
    bool ok = tm && ukernel_emit(mod, shape, e);
    if (ok) {
        char *triple = LLVMGetTargetMachineTriple(tm);
        LLVMSetTarget(mod, triple);
        LLVMDisposeMessage(triple);
        LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
        LLVMSetModuleDataLayout(mod, dl);
        LLVMDisposeTargetData(dl);
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMErrorRef err = LLVMRunPasses(mod, "default<O3>", tm, po);
        LLVMDisposePassBuilderOptions(po);
        ok = !err || ukjit_fail(err, "optimising", e);
    } else if (!tm)
        err_set(e, ERR_INPUT, "ukernel jit: no target machine for the host");
    if (tm)
        LLVMDisposeTargetMachine(tm);
    if (!ok)
        LLVMDisposeModule(mod);
    *out = ok ? mod : NULL;
    return ok;
}

/* JIT the micro-kernels of `shape` (NULL: the host's, ukernel_shape(ukjit_host_vec())). */
static inline bool ukjit_open(UkJit *j, const UkernelShape *shape, Err *e)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    memset(j, 0, sizeof *j);
    j->uk.shape = shape ? *shape : ukernel_shape(ukjit_host_vec());
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMTargetMachineRef tm = ukjit_host_machine();
    if (!tm) {
        LLVMOrcDisposeLLJITBuilder(builder);
        err_set(e, ERR_INPUT, "ukernel jit: no target machine for the host");
        return false;
    }
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&j->jit, builder);
    if (err)
        return ukjit_fail(err, "creating LLJIT", e);
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef mod;
    bool ok = ukjit_module(LLVMOrcThreadSafeContextGetContext(tsc), &j->uk.shape, &mod, e);
    if (ok) {
        LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
        err = LLVMOrcLLJITAddLLVMIRModule(j->jit, LLVMOrcLLJITGetMainJITDylib(j->jit), tsm);
        ok = !err || ukjit_fail(err, "adding the module", e);
    }
    LLVMOrcDisposeThreadSafeContext(tsc);
    LLVMOrcExecutorAddress dot = 0, bcast = 0;
    if (ok && (err = LLVMOrcLLJITLookup(j->jit, &dot, UKERNEL_DOT_NAME)))
        ok = ukjit_fail(err, UKERNEL_DOT_NAME, e);
    if (ok && (err = LLVMOrcLLJITLookup(j->jit, &bcast, UKERNEL_BCAST_NAME)))
        ok = ukjit_fail(err, UKERNEL_BCAST_NAME, e);
    if (!ok) {
        LLVMOrcDisposeLLJIT(j->jit);
        j->jit = NULL;
        return false;
    }
    /* ORC hands back addresses; converting them to function pointers is the JIT's
     * whole purpose (POSIX guarantees the round trip) */
    j->uk.dot = (UkernelDotFn)(uintptr_t)dot;
    j->uk.bcast = (UkernelBcastFn)(uintptr_t)bcast;
    return true;
}

static inline void ukjit_close(UkJit *j)
{
    if (j->jit)
        LLVMOrcDisposeLLJIT(j->jit);
    j->jit = NULL;
}

/* The optimised module's assembly, for looking at what the micro-kernels became. */
static inline bool ukjit_asm(const UkernelShape *shape, const char *path, Err *e)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod;
    bool ok = ukjit_module(ctx, shape, &mod, e);
    LLVMTargetMachineRef tm = ok ? ukjit_host_machine() : NULL;
    char *msg = NULL;
    if (tm && LLVMTargetMachineEmitToFile(tm, mod, path, LLVMAssemblyFile, &msg)) {
        err_set(e, ERR_INPUT, "ukernel jit: writing %s: %s", path, msg);
        ok = false;
    }
    LLVMDisposeMessage(msg);
    if (tm)
        LLVMDisposeTargetMachine(tm);
    if (mod)
        LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    return ok;
}

#endif
