/* cpu.h — the CPU backend: loop kernels to LLVM IR through the LLVM-C API, optimised at
 * O3 for the host CPU and compiled by ORC's LLJIT into KernelFns (codegen/loop.h); GEMM
 * steps get a TileFn (their epilogue fused into the tiles) and the generated GEMM
 * micro-kernels (codegen/cpu/ukernel.c) that runtime/cpu/gemm_tiled.c drives. */
#ifndef COIL_CODEGEN_CPU_H
#define COIL_CODEGEN_CPU_H

#include "base/debug_dir.h"
#include "codegen/loop.h"

typedef struct CpuModule CpuModule;

typedef struct CpuOptions {
    int opt_level;   /* 0..3; 0 means the default: 3 (1 in the sanitizer build) */
    const char *cpu; /* target CPU name ("skylake-avx512"), NULL: the host's, features included */
    DebugDir *debug; /* cpu_compile writes the module there as generated and after the
                        optimiser (llvm-ir.ll, llvm-ir-O3.ll at O3); NULL: nowhere. A
                        compile with a debug directory bypasses the object cache */
    const char *cache_dir; /* the object cache (base/disk_cache.h): NULL, $COIL_CACHE_DIR/cpu
                              (else $XDG_CACHE_HOME/coil/cpu, ~/.cache/coil/cpu); "": off */
} CpuOptions;

/* ---------------------------------------------------------------- GEMM micro-kernels */

/* The register tile of the generated GEMM micro-kernels, chosen from the target's vector
 * width (AVX-512: 16 floats): every tile is MR x NR, edges computed whole and cut. */
typedef struct UkernelShape {
    int vec;             /* f32 lanes of the widest vector */
    int dot_mr, dot_nr;  /* the dot form's tile */
    int bc_mr, bc_nr;    /* the broadcast form's tile (bc_nr a multiple of vec) */
    int dot_min_k;       /* the dot layout runs on the dot kernel when K exceeds this
                            (or A has few rows: runtime/cpu/gemm_tiled.c), else on the
                            broadcast one with B^T's panels transposed */
} UkernelShape;

/* The dot form, for A with unit column stride and B with unit row stride (B^T's rows
 * contiguous: a PyTorch-layout weight [N, K] read as its transpose):
 *     t[i * NR + j] (+)= sum_{p < kc} a[min(i, mr - 1) * lda + p] * b[min(j, nr - 1) * ldb + p]
 * for i < MR, j < NR (rows and columns past mr, nr repeat the last one; their results are
 * not used). accumulate != 0 adds to t, else overwrites it. */
typedef void (*UkernelDotFn)(int64_t kc, const float *a, int64_t lda, int64_t mr,
                             const float *b, int64_t ldb, int64_t nr, float *t,
                             int64_t accumulate);
/* The broadcast form, for B with unit column stride (B's rows contiguous), A any strides:
 *     t[i * NR + j] (+)= sum_{p < kc} a[min(i, mr - 1) * lda_r + p * lda_c] * b[p * ldb + j]
 * for i < MR, j < nr; columns j >= nr are left unspecified and B is never read past nr. */
typedef void (*UkernelBcastFn)(int64_t kc, const float *a, int64_t lda_r, int64_t lda_c,
                               int64_t mr, const float *b, int64_t ldb, int64_t nr, float *t,
                               int64_t accumulate);

typedef struct Ukernels {
    UkernelShape shape;
    UkernelDotFn dot;
    UkernelBcastFn bcast;
} Ukernels;

/* ---------------------------------------------------------------- compiling */

/* Compile every kernel of p, a TileFn for every GEMM step and the micro-kernels into one
 * JIT-linked object, or take that object from the cache when the same module was compiled
 * before (by this build of coil, with this LLVM, for this CPU); NULL with e set on failure. */
CpuModule *cpu_compile(const Program *p, const CpuOptions *o, Err *e);
/* The entry point of kernel k (index into p->kernel). */
KernelFn cpu_kernel(const CpuModule *m, int k);
/* The tile epilogue of step s (a STEP_GEMM); NULL for any other step. */
TileFn cpu_tile(const CpuModule *m, int s);
/* The GEMM micro-kernels of the module's target (NULL when the program has no GEMM or
 * attention step: they are only added then). */
const Ukernels *cpu_ukernels(const CpuModule *m);
/* Seconds spent in IR generation + optimisation + machine code, for reports. */
double cpu_compile_seconds(const CpuModule *m);
/* The same split by stage (writing CpuOptions.debug's files left out): generating the
 * LLVM IR (and verifying it), the optimiser, machine code (compiling the object, or
 * taking it from the cache, and linking it). */
typedef struct CpuTimes {
    double ir_s, opt_s, machine_s;
    bool cached; /* the object came from the cache: no optimiser, no code generator */
    int functions; /* kernel and tile functions generated: those that are the same code but
                      for their buffers share one (codegen/cpu/share.c) */
} CpuTimes;
CpuTimes cpu_compile_times(const CpuModule *m);
void cpu_free(CpuModule *m);

/* The module's LLVM IR after optimisation ("llvm-ir"), assembly ("asm") or an ELF
 * object ("obj"), written to path. */
bool cpu_emit(const Program *p, const CpuOptions *o, const char *what, const char *path, Err *e);
/* Ahead of time: the object cpu_emit(p, o, "obj", ...) wrote, linked in without running the
 * optimiser; cpu_kernel, cpu_tile and cpu_ukernels work on it as on a compiled module.
 * Errors name the file: unreadable, not an object, compiled from another program or for
 * a CPU feature this machine lacks, a missing symbol. */
CpuModule *cpu_load_object(const Program *p, const char *obj_path, Err *e);

/* The functions above as the CPU device takes them (runtime/cpu/cpu_device.c): this folder
 * is built only with LLVM (COIL_LLVM), and the device has no code generator without it. */
typedef struct CpuCodegen {
    CpuModule *(*compile)(const Program *p, const CpuOptions *o, Err *e);
    CpuModule *(*load_object)(const Program *p, const char *obj_path, Err *e);
    bool (*emit)(const Program *p, const CpuOptions *o, const char *what, const char *path,
                 Err *e);
    KernelFn (*kernel)(const CpuModule *m, int k);
    TileFn (*tile)(const CpuModule *m, int s);
    const Ukernels *(*ukernels)(const CpuModule *m);
    CpuTimes (*times)(const CpuModule *m);
    void (*free)(CpuModule *m);
} CpuCodegen;
extern const CpuCodegen cpu_llvm;

#endif
