/* target.c — the machine the CPU backend generates code for (the host, or CpuOptions.cpu),
 * what code generation may rely on there (vector width, FMA, half conversions), and the
 * optimisation pipeline run on every module. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/cpu/gen.h"

/* LLVM's target registry is process-wide and must be filled once, before any thread uses
 * it; pthread_once makes that safe from concurrent cpu_compile calls. */
static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void llvm_init(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser();
}

/* A named CPU's features cannot be queried through LLVM-C, so its vector width comes from
 * this table; an unknown name gets 4 lanes and no FMA, which is valid everywhere. */
static const struct {
    const char *cpu;
    int vec;
} cpu_vec[] = {
    {"x86-64-v4", 16}, {"skylake-avx512", 16}, {"cascadelake", 16}, {"cooperlake", 16},
    {"cannonlake", 16}, {"icelake-client", 16}, {"icelake-server", 16}, {"tigerlake", 16},
    {"rocketlake", 16}, {"sapphirerapids", 16}, {"emeraldrapids", 16}, {"graniterapids", 16},
    {"graniterapids-d", 16}, {"znver4", 16}, {"znver5", 16},
    {"x86-64-v3", 8}, {"haswell", 8}, {"broadwell", 8}, {"skylake", 8}, {"alderlake", 8},
    {"raptorlake", 8}, {"meteorlake", 8}, {"arrowlake", 8}, {"lunarlake", 8}, {"znver1", 8},
    {"znver2", 8}, {"znver3", 8},
};

/* "+name" in an LLVM feature string ("+sse2,-avx512f,..."). */
bool target_has_feature(const char *features, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = features; (s = strstr(s, name)); s += n)
        if (s > features && s[-1] == '+' && (s[n] == ',' || s[n] == 0))
            return true;
    return false;
}

static void capabilities(Target *t, bool named)
{
    bool arm = strncmp(t->triple, "aarch64", 7) == 0 || strncmp(t->triple, "arm64", 5) == 0;
    t->vec = 4;
    if (named) {
        for (size_t i = 0; i < sizeof cpu_vec / sizeof cpu_vec[0]; i++)
            if (strcmp(cpu_vec[i].cpu, t->cpu) == 0)
                t->vec = cpu_vec[i].vec;
        t->fma = t->f16 = t->vec >= 8 || arm; /* every CPU of the table with AVX2 has both */
        return;
    }
    if (target_has_feature(t->features, "avx512f"))
        t->vec = 16;
    else if (target_has_feature(t->features, "avx2") && target_has_feature(t->features, "fma"))
        t->vec = 8;
    t->fma = arm || target_has_feature(t->features, "fma");
    t->f16 = arm || target_has_feature(t->features, "f16c");
}

/* The level where CpuOptions leaves it 0: O3. The sanitizer build (CMake's COIL_SANITIZE)
 * defines O1: what the sanitizers check is coil's own C, which is the same at every level,
 * and O1 optimises in about half of O3's time, in a job where LLVM is most of the time of
 * the tests that compile. */
#ifndef COIL_LLVM_OPT_DEFAULT
#define COIL_LLVM_OPT_DEFAULT 3
#endif

bool target_make(const CpuOptions *o, Target *t, Err *e)
{
    pthread_once(&llvm_once, llvm_init);
    memset(t, 0, sizeof *t);
    t->opt_level = o && o->opt_level > 0 && o->opt_level <= 3 ? o->opt_level
                                                                   : COIL_LLVM_OPT_DEFAULT;
    t->triple = LLVMGetDefaultTargetTriple();
    bool named = o && o->cpu && *o->cpu;
    t->cpu = named ? LLVMCreateMessage(o->cpu) : LLVMGetHostCPUName();
    t->features = named ? LLVMCreateMessage("") : LLVMGetHostCPUFeatures();
    capabilities(t, named);
    t->tm = target_clone_tm(t);
    if (!t->tm) {
        err_set(e, ERR_INPUT, "cpu: LLVM has no code generator for '%s' (cpu '%s')", t->triple,
                t->cpu);
        target_free(t);
        return false;
    }
    return true;
}

LLVMTargetMachineRef target_clone_tm(const Target *t)
{
    static const LLVMCodeGenOptLevel level[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                                LLVMCodeGenLevelDefault,
                                                LLVMCodeGenLevelAggressive};
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &msg)) {
        LLVMDisposeMessage(msg);
        return NULL;
    }
    /* PIC: the same code is JIT-linked here and written as an object for cpu_load_object. */
    return LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features, level[t->opt_level],
                                   LLVMRelocPIC, LLVMCodeModelDefault);
}

void target_free(Target *t)
{
    if (t->tm)
        LLVMDisposeTargetMachine(t->tm);
    LLVMDisposeMessage(t->triple);
    LLVMDisposeMessage(t->cpu);
    LLVMDisposeMessage(t->features);
    memset(t, 0, sizeof *t);
}

bool target_optimise(const Target *t, LLVMModuleRef mod, Err *e)
{
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", t->opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMErrorRef err = LLVMRunPasses(mod, pipeline, t->tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (!err)
        return true;
    char *msg = LLVMGetErrorMessage(err);
    err_set(e, ERR_INPUT, "cpu: the %s pipeline failed: %s", pipeline, msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}
