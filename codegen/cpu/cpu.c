/* cpu.c — the CPU backend's interface (cpu.h): a Program becomes one LLVM module (every
 * kernel, every GEMM step's tile function, the micro-kernels), optimised and JIT-compiled;
 * or written out as IR, assembly or an object, and such an object loaded back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Orc.h>

#include "base/fileio.h"
#include "base/hash.h"
#include "base/log.h"
#include "codegen/cpu/gen.h"
#include "codegen/cpu/ukernel.h"

/* Globals every module carries, so a loaded object can be checked against its program
 * and its machine: a hash of the program, the target (CPU and features) and the micro-
 * kernels' vector width. */
#define SYM_PROGRAM "coil_program"
#define SYM_TARGET "coil_target"
#define SYM_VEC "coil_vec"

struct CpuModule {
    Jit jit;
    int nkernel, nstep;
    KernelFn *kernel;
    TileFn *tile;   /* per step; NULL for kernel steps */
    Ukernels uk;
    bool has_uk;
    double seconds;
    CpuTimes times;
};

/* Whether the module needs the micro-kernels: GEMM steps, and attention steps (the
 * runtime's block products, runtime/cpu/attention.c). */
static bool has_gemm(const Program *p)
{
    for (int s = 0; s < p->nstep; s++)
        if (p->step[s].kind == STEP_GEMM || p->step[s].kind == STEP_ATTENTION)
            return true;
    return false;
}

/* ---------------------------------------------------------------- the program's hash */


#define MIX(h, v) ((h) = fnv1a((h), &(v), sizeof(v)))

static uint64_t hash_kernel(uint64_t h, const Kernel *k)
{
    h = fnv1a(h, k->name, strlen(k->name) + 1);
    MIX(h, k->nouter), MIX(h, k->ninner), MIX(h, k->nphase), MIX(h, k->after);
    for (int d = 0; d < k->nouter + k->ninner; d++)
        MIX(h, k->size[d].k), MIX(h, k->size[d].syms), MIX(h, k->size[d].sq);
    for (int p = 0; p < k->nphase; p++)
        MIX(h, k->phase[p]);
    for (int i = 0; i < k->nlx; i++) {
        const Lx *x = &k->lx[i];
        MIX(h, x->kind), MIX(h, x->dt), MIX(h, x->op), MIX(h, x->a), MIX(h, x->b);
        MIX(h, x->c), MIX(h, x->i), MIX(h, x->j), MIX(h, x->f);
    }
    for (int i = 0; i < k->nstmt; i++) {
        const LStmt *s = &k->stmt[i];
        MIX(h, s->kind), MIX(h, s->op), MIX(h, s->buf), MIX(h, s->index), MIX(h, s->value);
        MIX(h, s->axis), MIX(h, s->acc_dt);
    }
    return h;
}

/* Everything the generated code depends on, field by field (no padding bytes). */
static uint64_t program_hash(const Program *p)
{
    uint64_t h = FNV1A_OFFSET;
    MIX(h, p->nbuf), MIX(h, p->nkernel), MIX(h, p->nstep);
    for (int b = 0; b < p->nbuf; b++)
        MIX(h, p->buf[b].dt);
    for (int k = 0; k < p->nkernel; k++)
        h = hash_kernel(h, &p->kernel[k]);
    for (int s = 0; s < p->nstep; s++) {
        const Gemm *g = &p->step[s].gemm;
        MIX(h, p->step[s].kind), MIX(h, p->step[s].kernel);
        if (p->step[s].kind == STEP_GEMM)
            MIX(h, g->epilogue), MIX(h, g->epi_load), MIX(h, g->c_live), MIX(h, g->c.buf),
                MIX(h, g->n.k), MIX(h, g->n.syms), MIX(h, g->n.sq);
    }
    return h;
}

/* ---------------------------------------------------------------- building the module */

static void add_global(LLVMModuleRef mod, const char *name, LLVMValueRef init)
{
    LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
}

static void add_fingerprint(const Program *p, const Target *t, LLVMModuleRef mod)
{
    LLVMContextRef c = LLVMGetModuleContext(mod);
    char target[4096];
    snprintf(target, sizeof target, "%s %s", t->cpu, t->features);
    add_global(mod, SYM_PROGRAM, LLVMConstInt(LLVMInt64TypeInContext(c), program_hash(p), 0));
    add_global(mod, SYM_TARGET, LLVMConstStringInContext(c, target, (unsigned)strlen(target), 0));
    add_global(mod, SYM_VEC, LLVMConstInt(LLVMInt32TypeInContext(c), (unsigned long long)t->vec, 0));
}

static bool write_string(FILE *f, const void *text) { return fputs(text, f) >= 0; }

/* The module as text into the debug directory (LLVM's string, so not debug_dir_text's). */
static void debug_module(DebugDir *d, const char *stage, LLVMModuleRef mod)
{
    if (!d)
        return;
    char *text = LLVMPrintModuleToString(mod);
    debug_dir_file(d, -1, stage, "ll", write_string, text);
    LLVMDisposeMessage(text);
}

/* Every kernel, tile function and micro-kernel of p into mod, verified and optimised;
 * with a debug directory the module written there before and after the optimiser, and
 * *times (NULL: not kept) the seconds of each, the writing left out. */
static bool build(const Program *p, const Target *t, DebugDir *debug, LLVMModuleRef mod,
                  CpuTimes *times, Err *e)
{
    double t0 = clock_seconds();
    LLVMSetTarget(mod, t->triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(t->tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
    Gen g;
    gen_init(&g, mod, p, t, e);
    bool ok = true;
    for (int k = 0; k < p->nkernel && ok; k++)
        ok = kernel_emit(&g, k);
    for (int s = 0; s < p->nstep && ok; s++)
        if (p->step[s].kind == STEP_GEMM)
            ok = tile_emit(&g, s);
    gen_dispose(&g);
    if (ok && has_gemm(p)) {
        UkernelShape shape = ukernel_shape(t->vec);
        ok = ukernel_emit(mod, &shape, e);
    }
    if (!ok)
        return false;
    add_fingerprint(p, t, mod);
    char *msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        err_set(e, ERR_INPUT, "cpu: internal error: the generated module is invalid: %.900s", msg);
        LLVMDisposeMessage(msg);
        return false;
    }
    LLVMDisposeMessage(msg);
    double t1 = clock_seconds();
    debug_module(debug, "llvm-ir", mod);
    double t2 = clock_seconds();
    ok = target_optimise(t, mod, e);
    double t3 = clock_seconds();
    char stage[16];
    snprintf(stage, sizeof stage, "llvm-ir-O%d", t->opt_level);
    if (ok)
        debug_module(debug, stage, mod);
    if (times)
        times->ir_s = t1 - t0, times->opt_s = t3 - t2;
    return ok;
}

/* ---------------------------------------------------------------- JIT */

static bool lookup_fn(CpuModule *m, const char *name, const char *where, void *fnptr, size_t size, Err *e)
{
    void *addr = jit_lookup(&m->jit, name, where, e);
    if (!addr)
        return false;
    memcpy(fnptr, &addr, size); /* an object pointer to a function pointer, as POSIX allows */
    return true;
}

static bool lookup_all(CpuModule *m, const Program *p, const char *where, int vec, Err *e)
{
    bool ok = true;
    for (int k = 0; k < p->nkernel && ok; k++)
        ok = lookup_fn(m, p->kernel[k].name, where, &m->kernel[k], sizeof m->kernel[k], e);
    for (int s = 0; s < p->nstep && ok; s++) {
        char name[32];
        snprintf(name, sizeof name, "coil_tile_%d", s);
        if (p->step[s].kind == STEP_GEMM)
            ok = lookup_fn(m, name, where, &m->tile[s], sizeof m->tile[s], e);
    }
    if (!ok || !has_gemm(p))
        return ok;
    m->uk.shape = ukernel_shape(vec);
    m->has_uk = lookup_fn(m, UKERNEL_DOT_NAME, where, &m->uk.dot, sizeof m->uk.dot, e) &&
                lookup_fn(m, UKERNEL_BCAST_NAME, where, &m->uk.bcast, sizeof m->uk.bcast, e);
    return m->has_uk;
}

static CpuModule *module_new(const Program *p)
{
    CpuModule *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->nkernel = p->nkernel;
    m->nstep = p->nstep;
    m->kernel = calloc((size_t)p->nkernel + 1, sizeof *m->kernel);
    m->tile = calloc((size_t)p->nstep + 1, sizeof *m->tile);
    if (!m->kernel || !m->tile) {
        cpu_free(m);
        return NULL;
    }
    return m;
}

CpuModule *cpu_compile(const Program *p, const CpuOptions *o, Err *e)
{
    DebugDir *debug = o ? o->debug : NULL;
    double t0 = clock_seconds() - debug_dir_seconds(debug); /* the writing below left out */
    Target t;
    if (!target_make(o, &t, e))
        return NULL;
    CpuModule *m = module_new(p);
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("coil", LLVMOrcThreadSafeContextGetContext(tsc));
    bool ok = m && build(p, &t, debug, mod, &m->times, e) && jit_new(&m->jit, &t, e);
    if (ok) {
        ok = jit_add_module(&m->jit, tsc, mod, e);
        mod = NULL;
    }
    if (mod)
        LLVMDisposeModule(mod);
    LLVMOrcDisposeThreadSafeContext(tsc);
    if (!m)
        err_set(e, ERR_MEMORY, "cpu: out of memory");
    double t1 = clock_seconds();
    int level = t.opt_level;
    ok = ok && lookup_all(m, p, "cpu", t.vec, e); /* materialises: compiles to machine code */
    target_free(&t);
    if (!ok) {
        cpu_free(m);
        return NULL;
    }
    m->times.machine_s = clock_seconds() - t1;
    m->seconds = clock_seconds() - debug_dir_seconds(debug) - t0;
    coil_log(LOG_INFO, "llvm '%s': %d kernels: IR %.1f ms, O%d %.1f ms, machine code %.1f ms",
             p->graph && p->graph->name ? p->graph->name : "program", p->nkernel,
             m->times.ir_s * 1e3, level, m->times.opt_s * 1e3, m->times.machine_s * 1e3);
    return m;
}

KernelFn cpu_kernel(const CpuModule *m, int k) { return k >= 0 && k < m->nkernel ? m->kernel[k] : NULL; }
TileFn cpu_tile(const CpuModule *m, int s) { return s >= 0 && s < m->nstep ? m->tile[s] : NULL; }
const Ukernels *cpu_ukernels(const CpuModule *m) { return m->has_uk ? &m->uk : NULL; }
double cpu_compile_seconds(const CpuModule *m) { return m->seconds; }
CpuTimes cpu_compile_times(const CpuModule *m) { return m->times; }

void cpu_free(CpuModule *m)
{
    if (!m)
        return;
    jit_free(&m->jit);
    free(m->kernel);
    free(m->tile);
    free(m);
}

/* ---------------------------------------------------------------- emitting */

static const struct {
    const char *what;
    bool ir;
    LLVMCodeGenFileType type;
} emit_kinds[] = {
    {"llvm-ir", true, LLVMAssemblyFile},
    {"asm", false, LLVMAssemblyFile},
    {"obj", false, LLVMObjectFile},
};

/* Into memory, then onto disk whole (fileio.h): a failed or interrupted write leaves
 * neither a truncated file nor a temporary behind. */
static bool emit_atomically(const Target *t, LLVMModuleRef mod, int kind, const char *path, Err *e)
{
    char *msg = NULL;
    if (emit_kinds[kind].ir) {
        char *text = LLVMPrintModuleToString(mod);
        bool ok = file_write_atomic(path, text, strlen(text), e);
        LLVMDisposeMessage(text);
        return ok;
    }
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(t->tm, mod, emit_kinds[kind].type, &msg, &buf)) {
        err_set(e, ERR_INPUT, "%s: error: cannot generate the %s: %s", path,
                emit_kinds[kind].what, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return false;
    }
    bool ok = file_write_atomic(path, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf), e);
    LLVMDisposeMemoryBuffer(buf);
    return ok;
}

bool cpu_emit(const Program *p, const CpuOptions *o, const char *what, const char *path, Err *e)
{
    int kind = -1;
    for (int i = 0; i < (int)(sizeof emit_kinds / sizeof emit_kinds[0]); i++)
        if (what && strcmp(emit_kinds[i].what, what) == 0)
            kind = i;
    if (kind < 0) {
        err_set(e, ERR_USAGE, "cpu_emit: unknown output '%s' (llvm-ir, asm or obj)", what ? what : "(null)");
        return false;
    }
    Target t;
    if (!target_make(o, &t, e))
        return false;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("coil", ctx);
    bool ok = build(p, &t, NULL, mod, NULL, e);
    ok = ok && emit_atomically(&t, mod, kind, path, e);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    target_free(&t);
    return ok;
}

/* ---------------------------------------------------------------- loading an object */

/* The object's fingerprint against p and this machine: the same program, and no CPU
 * feature this machine lacks (else its code could stop on an illegal instruction). */
static bool check_object(CpuModule *m, const Program *p, const char *path, int *vec, Err *e)
{
    const uint64_t *hash = jit_lookup(&m->jit, SYM_PROGRAM, path, e);
    const char *target = hash ? jit_lookup(&m->jit, SYM_TARGET, path, e) : NULL;
    const int32_t *v = target ? jit_lookup(&m->jit, SYM_VEC, path, e) : NULL;
    if (!v)
        return false;
    if (*hash != program_hash(p)) {
        err_set(e, ERR_INPUT, "%s: error: the object was compiled from a different program", path);
        return false;
    }
    *vec = *v;
    const char *features = strchr(target, ' ');
    char *host = LLVMGetHostCPUFeatures(), name[64];
    bool ok = true;
    for (const char *s = features ? strchr(features, '+') : NULL; s && ok; s = strchr(s + 1, '+')) {
        size_t n = strcspn(s + 1, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s + 1);
        if (!target_has_feature(host, name)) {
            err_set(e, ERR_INPUT, "%s: error: compiled for CPU '%.*s' with +%s, which this machine lacks",
                    path, (int)(features - target), target, name);
            ok = false;
        }
    }
    LLVMDisposeMessage(host);
    return ok;
}

CpuModule *cpu_load_object(const Program *p, const char *obj_path, Err *e)
{
    Target t;
    if (!target_make(NULL, &t, e))
        return NULL;
    CpuModule *m = module_new(p);
    int vec = 0;
    bool ok = m && jit_new(&m->jit, &t, e) && jit_add_object(&m->jit, obj_path, e) &&
              check_object(m, p, obj_path, &vec, e) && lookup_all(m, p, obj_path, vec, e);
    target_free(&t);
    if (!m)
        err_set(e, ERR_MEMORY, "cpu: out of memory");
    if (!ok) {
        cpu_free(m);
        return NULL;
    }
    return m;
}

const CpuCodegen cpu_llvm = {cpu_compile, cpu_load_object, cpu_emit, cpu_kernel,
                             cpu_tile, cpu_ukernels, cpu_compile_times, cpu_free};
