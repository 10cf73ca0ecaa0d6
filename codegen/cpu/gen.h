/* gen.h — what the CPU backend's files share: the target (target.c), the module being
 * generated (Gen) and the function being generated (Fn), and each file's entry points. */
#ifndef COIL_CODEGEN_CPU_GEN_H
#define COIL_CODEGEN_CPU_GEN_H

#include <llvm-c/Core.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/cpu/cpu.h"

/* ---------------------------------------------------------------- target.c */

/* The machine code is for: a target machine plus what code generation may rely on. */
typedef struct Target {
    LLVMTargetMachineRef tm;
    char *triple, *cpu, *features; /* LLVM strings (LLVMDisposeMessage) */
    int opt_level;                 /* 1..3 */
    int vec;                       /* f32 lanes of the widest vector: 16, 8 or 4 */
    bool fma;                      /* fused multiply-add instructions */
    bool f16;                      /* half <-> float conversion instructions */
} Target;

/* The host (o->cpu NULL) or the named CPU; o may be NULL. */
bool target_make(const CpuOptions *o, Target *t, Err *e);
void target_free(Target *t);
/* Whether an LLVM feature string ("+sse2,-avx512f,...") enables `name`. */
bool target_has_feature(const char *features, const char *name);
/* A second target machine like t's, for the JIT (which takes ownership). */
LLVMTargetMachineRef target_clone_tm(const Target *t);
/* The new pass manager's default<O1..3> pipeline with vectorisation on. */
bool target_optimise(const Target *t, LLVMModuleRef mod, Err *e);

/* ---------------------------------------------------------------- jit.c */

/* ORC's LLJIT for one target; `async` receives the errors ORC reports while it links
 * (an unresolved symbol), which lookups then add to their own. */
typedef struct Jit {
    LLVMOrcLLJITRef lljit;
    Err async;
} Jit;

bool jit_new(Jit *j, const Target *t, Err *e);
/* An object in memory (copied), or in a file; errors name `where` or the file. */
bool jit_add_object(Jit *j, const void *obj, size_t n, const char *where, Err *e);
bool jit_add_object_file(Jit *j, const char *path, Err *e);
/* The address of `name`; NULL with e set (naming `where`) when it cannot be had. */
void *jit_lookup(Jit *j, const char *name, const char *where, Err *e);
void jit_free(Jit *j);

/* ---------------------------------------------------------------- the module */

typedef struct Gen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b; /* positioned in the function being generated */
    const Program *p;
    const Target *t;
    LLVMTypeRef f32, f64, i1, i8, i16, i32, i64, ptr, voidt;
    unsigned md_scope, md_noalias, md_loop; /* metadata kinds !alias.scope, !noalias, !llvm.loop */
    Err *e;
} Gen;

void gen_init(Gen *g, LLVMModuleRef mod, const Program *p, const Target *t, Err *e);
void gen_dispose(Gen *g);
/* A call of intrinsic `name` overloaded on types ov[0..nov). */
LLVMValueRef gen_intrinsic(Gen *g, LLVMBuilderRef b, const char *name, LLVMTypeRef *ov, int nov,
                           LLVMValueRef *args, int nargs);
/* Enum attribute `name` on function fn (idx: LLVMAttributeFunctionIndex or parameter + 1). */
void gen_attr(Gen *g, LLVMValueRef fn, unsigned idx, const char *name);
/* Fail code generation with a message naming the function being generated. */
LLVMValueRef gen_fail(Gen *g, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- the function */

typedef struct Fn Fn;
/* Called at every innermost outer point, before its expressions (the tile's load of C). */
typedef void (*PointHook)(Fn *f);

struct Fn {
    Gen *g;
    const Kernel *k;
    const char *name;
    LLVMValueRef fn, bufs, syms;
    LLVMValueRef *base;       /* per program buffer: its base pointer, NULL when untouched */
    LLVMValueRef *numel;      /* per buffer: its element count, for clamped loads */
    LLVMValueRef *scope;      /* per buffer: its !alias.scope and !noalias lists */
    LLVMValueRef *noalias;
    LLVMValueRef *val;        /* per expression: its value, once emitted */
    int *slot;                /* per expression: where it is emitted (kernel.c) */
    unsigned char *flag;      /* per expression: FL_* */
    LLVMValueRef *acc;        /* per statement: the final value of its accumulator */
    LLVMValueRef var[LOOP_MAX_DIMS];
    LLVMValueRef size[LOOP_MAX_DIMS];
    /* The outer loops: var d runs over [lo[d], hi[d]) plus off[d] (NULL: 0). */
    LLVMValueRef lo[LOOP_MAX_DIMS], hi[LOOP_MAX_DIMS], off[LOOP_MAX_DIMS];
    LLVMValueRef iv[LOOP_MAX_DIMS];
    int override;             /* an expression whose value at_point supplies, or -1 */
    PointHook at_point;
    void *ctx;                /* at_point's state */
    bool narrow;              /* the innermost outer loop runs a few vectors at most (a
                                 tile's columns): vectorised without interleaving */
};

/* Per expression: used by a statement; varies in the inner walk; reads a buffer the kernel
 * stores (kernel.c); evaluated on every path, not only in a select's arm (a load that is
 * not may be out of its buffer, so its index is clamped); scratch. */
enum { FL_USED = 1, FL_INNER = 2, FL_PIN = 4, FL_SURE = 8, FL_MARK = 16 };

/* kernel.c: whether kernel k of the program has a usable name (unique, not reserved) and
 * consistent loop and statement counts; kernel k as a KernelFn called `name`. */
bool kernel_check(Gen *g, int k);
bool kernel_define(Gen *g, const Kernel *k, const char *name);
/* kernel.c, for tile.c as well: a function of the given type running k's statements at
 * every point of its outer loops. fn_tables names the arguments holding bufs and syms;
 * fn_set_size loads the sizes and buffers at entry; the caller then sets the outer loops
 * (f->lo, hi, off) and runs fn_body; fn_end finishes (and frees) whatever happened. */
bool fn_begin(Gen *g, Fn *f, const Kernel *k, const char *name, LLVMTypeRef type);
void fn_tables(Fn *f, unsigned bufs, unsigned syms);
/* gen_attr on f's function. */
void fn_attr(Fn *f, unsigned idx, const char *name);
void fn_set_size(Fn *f);
bool fn_body(Fn *f);
void fn_end(Fn *f);
/* Base pointer and alias metadata of buffer b in f (tile.c adds its own "buffer"). */
LLVMValueRef fn_buffer(Fn *f, int b);
void fn_mark(Fn *f, LLVMValueRef access, int b);
LLVMValueRef fn_dim(Fn *f, Dim d);

/* tile.c: the TileFn of GEMM step gm (of g's program), called `name`. */
bool tile_define(Gen *g, const Gemm *gm, const char *name);

/* ---------------------------------------------------------------- share.c */

/* Every kernel of the program as a KernelFn named after it, and every GEMM step's TileFn,
 * named coil_tile_<s>: functions that are the same code but for the buffers they touch
 * share one body. *functions: how many bodies were generated. */
bool share_emit(Gen *g, int *functions);
/* Everything of k the generated code depends on but its name, into FNV-1a hash h. */
uint64_t kernel_hash(uint64_t h, const Kernel *k);

/* ---------------------------------------------------------------- expr.c */

/* The register type of a dtype: float for f32/f16/bf16, iN for integers, i1 for bool. */
LLVMTypeRef reg_type(Gen *g, DType dt);
/* Expression id of f's kernel from its operands' values. */
LLVMValueRef expr_emit(Fn *f, int id);
/* Value v (register form of dtype from) converted to dtype to as dtype_round does. */
LLVMValueRef expr_convert(Gen *g, LLVMValueRef v, DType from, DType to);
/* An f32 register rounded to what dtype dt holds (f16, bf16; else unchanged). */
LLVMValueRef expr_round(Gen *g, LLVMValueRef v, DType dt);
/* Element idx of a buffer of dtype dt at base: loaded and widened to its register form
 * (*inst: the load, for alias marks); stored from its register form (returns the store). */
LLVMValueRef mem_load(Gen *g, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef *inst);
LLVMValueRef mem_store(Gen *g, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v);

/* ---------------------------------------------------------------- mathlib.c */

/* op (an OP_* unary float function) of an f32 value; NULL for an op that is not one. */
LLVMValueRef math_unary(Gen *g, int op, LLVMValueRef x);
/* C's powf of two f32 values. */
LLVMValueRef math_pow(Gen *g, LLVMValueRef a, LLVMValueRef b);
/* philox_uniform_step(seed, step, offset, index) as an f32; index and step are i64. */
LLVMValueRef math_rand(Gen *g, uint64_t seed, uint64_t offset, LLVMValueRef index,
                       LLVMValueRef step);

#endif
