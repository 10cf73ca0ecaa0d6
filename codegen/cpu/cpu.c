/* cpu.c — the CPU backend's interface (cpu.h): a Program becomes one LLVM module (every
 * kernel, every GEMM step's tile function, the micro-kernels), optimised and compiled to
 * an object that the JIT links (kept in the object cache, so that the same module is
 * compiled once); or written out as IR, assembly or an object, and such an object loaded
 * back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Orc.h>

#include "base/build_id.h"
#include "base/disk_cache.h"
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

/* How many tile functions the module has: one per GEMM step. */
static int gemm_steps(const Program *p)
{
    int n = 0;
    for (int s = 0; s < p->nstep; s++)
        n += p->step[s].kind == STEP_GEMM;
    return n;
}

/* ---------------------------------------------------------------- the program's hash */


#define MIX(h, v) ((h) = fnv1a((h), &(v), sizeof(v)))

static uint64_t hash_kernel(uint64_t h, const Kernel *k)
{
    return kernel_hash(fnv1a(h, k->name, strlen(k->name) + 1), k);
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

/* Every kernel, tile function and micro-kernel of p into mod, verified; with a debug
 * directory the module written there. */
static bool generate(const Program *p, const Target *t, DebugDir *debug, LLVMModuleRef mod,
                     int *functions, Err *e)
{
    LLVMSetTarget(mod, t->triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(t->tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
    Gen g;
    gen_init(&g, mod, p, t, e);
    bool ok = share_emit(&g, functions);
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
    debug_module(debug, "llvm-ir", mod);
    return true;
}

/* The optimiser over mod; with a debug directory the result written there. */
static bool optimise(const Target *t, DebugDir *debug, LLVMModuleRef mod, Err *e)
{
    if (!target_optimise(t, mod, e))
        return false;
    char stage[16];
    snprintf(stage, sizeof stage, "llvm-ir-O%d", t->opt_level);
    debug_module(debug, stage, mod);
    return true;
}

/* ---------------------------------------------------------------- the object cache */

/* The clock less the time spent writing the debug directory's files. */
static double seconds_but_writing(const DebugDir *debug)
{
    return clock_seconds() - debug_dir_seconds(debug);
}

/* The key of mod's object: everything that decides the machine code. The module (as
 * bitcode) holds the program, the target's CPU and features; the rest is the optimiser's
 * level, LLVM's version and how this coil was built (its pipeline and code generator
 * options are code, which the build ID covers). False, no caching, without a build ID. */
static bool object_key(const Target *t, LLVMModuleRef mod, char key[SHA256_HEX])
{
    const char *id = build_id();
    if (!id)
        return false;
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    char head[512];
    int n = snprintf(head, sizeof head, "coil cpu object\n%s\nllvm %u.%u.%u\nO%d\n%s\n", id,
                     major, minor, patch, t->opt_level, t->triple);
    LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(mod);
    if (!bc)
        return false;
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, head, (size_t)n);
    sha256_update(&s, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
    sha256_hex(&s, key);
    LLVMDisposeMemoryBuffer(bc);
    return true;
}

/* mod's machine code as an ELF object in memory (malloc'd). */
static bool emit_object(const Target *t, LLVMModuleRef mod, void **obj, size_t *n, Err *e)
{
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(t->tm, mod, LLVMObjectFile, &msg, &buf)) {
        err_set(e, ERR_INPUT, "cpu: cannot generate machine code: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return false;
    }
    *n = LLVMGetBufferSize(buf);
    *obj = malloc(*n ? *n : 1);
    if (*obj)
        memcpy(*obj, LLVMGetBufferStart(buf), *n);
    else
        err_set(e, ERR_MEMORY, "cpu: out of memory");
    LLVMDisposeMemoryBuffer(buf);
    return *obj != NULL;
}

/* p's object: from the cache when an earlier compile left it there, else generated,
 * optimised and compiled (and left there). The debug directory's stages need the
 * optimiser to run, so a compile that writes them neither reads nor fills the cache. */
static bool make_object(const Program *p, const Target *t, const CpuOptions *o, void **obj,
                        size_t *n, CpuTimes *times, Err *e)
{
    DebugDir *debug = o ? o->debug : NULL;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("coil", ctx);
    double t0 = seconds_but_writing(debug);
    int functions = 0;
    bool ok = generate(p, t, debug, mod, &functions, e);
    double t1 = seconds_but_writing(debug);
    DiskCache cache;
    char key[SHA256_HEX];
    bool cacheable = ok && !debug &&
                     disk_cache_open(&cache, o ? o->cache_dir : NULL, "cpu", "o") &&
                     object_key(t, mod, key);
    bool hit = cacheable && disk_cache_get(&cache, key, obj, n);
    double t2 = seconds_but_writing(debug);
    *times = (CpuTimes){.ir_s = t1 - t0, .machine_s = t2 - t1, .cached = hit, .functions = functions};
    if (ok && !hit) {
        ok = optimise(t, debug, mod, e);
        double t3 = seconds_but_writing(debug);
        ok = ok && emit_object(t, mod, obj, n, e);
        times->opt_s = t3 - t2;
        times->machine_s = seconds_but_writing(debug) - t3;
        if (ok && cacheable)
            disk_cache_put(&cache, key, *obj, *n);
    }
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
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
    double t0 = seconds_but_writing(debug);
    Target t;
    if (!target_make(o, &t, e))
        return NULL;
    CpuModule *m = module_new(p);
    void *obj = NULL;
    size_t n = 0;
    bool ok = m && make_object(p, &t, o, &obj, &n, &m->times, e);
    double t1 = seconds_but_writing(debug);
    ok = ok && jit_new(&m->jit, &t, e) && jit_add_object(&m->jit, obj, n, "cpu", e) &&
         lookup_all(m, p, "cpu", t.vec, e); /* links the object */
    free(obj);
    if (!m)
        err_set(e, ERR_MEMORY, "cpu: out of memory");
    int level = t.opt_level;
    target_free(&t);
    if (!ok) {
        cpu_free(m);
        return NULL;
    }
    m->times.machine_s += seconds_but_writing(debug) - t1;
    m->seconds = seconds_but_writing(debug) - t0;
    const char *name = p->graph && p->graph->name ? p->graph->name : "program";
    if (m->times.cached)
        coil_log(LOG_INFO, "llvm '%s': %d kernels, %d tile functions, %d generated: IR %.1f ms, the object "
                 "from the cache in %.1f ms", name, p->nkernel, gemm_steps(p), m->times.functions,
                 m->times.ir_s * 1e3, m->times.machine_s * 1e3);
    else
        coil_log(LOG_INFO, "llvm '%s': %d kernels, %d tile functions, %d generated: IR %.1f ms, O%d %.1f ms, "
                 "machine code %.1f ms", name, p->nkernel, gemm_steps(p), m->times.functions,
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
    int functions = 0;
    bool ok = generate(p, &t, NULL, mod, &functions, e) && optimise(&t, NULL, mod, e) &&
              emit_atomically(&t, mod, kind, path, e);
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
    bool ok = m && jit_new(&m->jit, &t, e) && jit_add_object_file(&m->jit, obj_path, e) &&
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
