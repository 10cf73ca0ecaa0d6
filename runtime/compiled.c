/* compiled.c — the compile pipeline end to end: passes, lowering, then LLVM (or a
 * package's object) and an engine holding the kernels, or for a GPU a CUDA engine (which
 * compiles its kernels with NVRTC). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/compiled.h"
#include "runtime/tune_cuda.h"

static const char *const mode_names[] = {
    [MODE_DEFAULT] = "default", [MODE_REDUCE_OVERHEAD] = "reduce-overhead",
    [MODE_MAX_AUTOTUNE] = "max-autotune"};

bool compile_mode_parse(const char *s, CompileMode *m)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *m = (CompileMode)i;
            return true;
        }
    return false;
}

const char *compile_mode_name(CompileMode m) { return mode_names[m]; }

void compiled_free(Compiled *c)
{
    if (!c)
        return;
    tune_cache_free(c->cache);
    free(c->tuned_cfg);
    free(c->tuned_cu);
    engine_free(c->en);
    cuda_engine_free(c->cu);
    cpu_free(c->m);
    program_free(c->p);
    graph_free(c->g);
    free(c);
}

/* The module's entry points, one per kernel and per step, for the engine. */
static Engine *engine_for(Compiled *c, const CompileOptions *o, Err *e)
{
    const Program *p = c->p;
    EngineOptions eo = {.threads = o->threads, .profile = o->profile};
    KernelFn *fns = c->m ? calloc((size_t)p->nkernel + 1, sizeof *fns) : NULL;
    TileFn *tiles = c->m ? calloc((size_t)p->nstep + 1, sizeof *tiles) : NULL;
    if (c->m && (!fns || !tiles)) {
        free(fns);
        free(tiles);
        err_set(e, ERR_INPUT, "out of memory creating the engine");
        return NULL;
    }
    for (int k = 0; fns && k < p->nkernel; k++)
        fns[k] = cpu_kernel(c->m, k);
    for (int s = 0; tiles && s < p->nstep; s++)
        tiles[s] = cpu_tile(c->m, s);
    eo.fns = fns;
    if (c->m && !o->blas_gemm) {
        eo.tiles = tiles;
        eo.uk = cpu_ukernels(c->m);
    }
    Engine *en = engine_new(p, &eo, e);
    free(fns);
    free(tiles);
    return en;
}

/* The devices a model compiles for, by CompileOptions.device. */
typedef enum Device { DEVICE_CPU, DEVICE_CUDA } Device;
static const struct {
    const char *name;
    Device dev;
} devices[] = {{"cpu", DEVICE_CPU}, {"cuda", DEVICE_CUDA}};

/* The device o asks for, or false with the reason it cannot be compiled for here. */
static bool pick_device(const CompileOptions *o, Device *dev, Err *e)
{
    const char *why, *name = o->device ? o->device : "cpu";
    for (size_t i = 0; i < sizeof devices / sizeof *devices; i++)
        if (strcmp(name, devices[i].name) == 0) {
            *dev = devices[i].dev;
            if (*dev == DEVICE_CUDA && !cuda_driver_available(&why)) {
                err_set(e, ERR_INPUT, "cannot compile for cuda: %s", why);
                return false;
            }
            return true;
        }
    err_set(e, ERR_USAGE, "unknown device '%s' (cpu or cuda)", name);
    return false;
}

/* The CPU: LLVM's module (or the package's object) and an engine over it. */
/* max-autotune: the cache opened now (a corrupt one warns and starts empty), the tuning
 * itself at the first run of each size. */
static bool tune_setup(Compiled *c, const CompileOptions *o, Err *e)
{
    c->mode = o->mode;
    if (o->mode != MODE_MAX_AUTOTUNE)
        return true;
    const char *path = o->tune_cache ? o->tune_cache : tune_cache_default_path();
    if (!path) {
        err_set(e, ERR_USAGE, "max-autotune: no cache file (set COIL_CACHE_DIR or HOME)");
        return false;
    }
    c->cache = tune_cache_open(path, e);
    if (path != o->tune_cache)
        free((char *)path);
    c->tune = (TuneOptions){.cache = c->cache, .measure = true, .progress = o->tune_progress,
                               .report = o->tune_report};
    return c->cache != NULL;
}

static bool compile_cpu(Compiled *c, const CompileOptions *o, Err *e)
{
    double t0 = clock_seconds();
    bool llvm = !o->no_llvm && (cpu_available() || o->object);
    if (llvm)
        c->m = o->object ? cpu_load_object(c->p, o->object, e) : cpu_compile(c->p, &o->cpu, e);
    c->llvm_s = clock_seconds() - t0;
    c->from_object = o->object != NULL;
    return (!llvm || c->m) && (c->en = engine_for(c, o, e)) != NULL && tune_setup(c, o, e);
}

static bool compile_cuda(Compiled *c, const CompileOptions *o, Err *e)
{
    double t0 = clock_seconds();
    CudaEngineOptions co = o->cuda;
    co.profile = o->profile;
    co.graphs = co.graphs || o->mode != MODE_DEFAULT;
    co.full_opt = co.full_opt || o->mode == MODE_MAX_AUTOTUNE;
    c->cu = cuda_engine_new(c->p, &co, e);
    c->llvm_s = clock_seconds() - t0;
    c->from_object = co.cubin != NULL;
    return c->cu != NULL && tune_setup(c, o, e);
}

Compiled *compile_optimised(Graph *g, const CompileOptions *o, Err *e)
{
    static const CompileOptions defaults = {0};
    o = o ? o : &defaults;
    Device dev;
    Compiled *c = pick_device(o, &dev, e) ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        graph_free(g);
        if (err_ok(e))
            err_set(e, ERR_INPUT, "out of memory compiling a model");
        return NULL;
    }
    c->g = g;
    double t0 = clock_seconds();
    LowerOptions lo = {.no_fusion = o->no_fusion};
    c->p = loop_lower(g, &lo, e);
    c->lower_s = clock_seconds() - t0;
    bool ok = c->p && (dev == DEVICE_CUDA ? compile_cuda(c, o, e) : compile_cpu(c, o, e));
    if (ok)
        return c;
    compiled_free(c);
    return NULL;
}

/* The passes must keep the parameters, in order: the caller's params array is indexed so. */
static bool same_params(const Graph *a, const Graph *b, Err *e)
{
    int na = graph_params(a, NULL), nb = graph_params(b, NULL);
    int *ia = malloc(((size_t)na + 1) * sizeof *ia), *ib = malloc(((size_t)nb + 1) * sizeof *ib);
    bool ok = ia && ib && na == nb;
    if (ok) {
        graph_params(a, ia);
        graph_params(b, ib);
    }
    for (int i = 0; ok && i < na; i++)
        ok = strcmp(node_name(&a->node[ia[i]]), node_name(&b->node[ib[i]])) == 0;
    if (!ok)
        err_set(e, ERR_INPUT, "compile: the passes changed the parameters of '%s'", a->name);
    free(ia);
    free(ib);
    return ok;
}

/* The passes a device's code generator wants: the GPU keeps attention whole (one fused
 * kernel), the CPU decomposes it into GEMMs and a softmax. */
static const char *pipeline_for(const CompileOptions *o)
{
    return o && o->device && strcmp(o->device, "cuda") == 0 ? pass_pipeline_cuda : pass_pipeline;
}

/* Padding to whole AVX-512 vectors of f32 (what the CPU's kernels would prefer, if any),
 * or to 8 elements (16 bytes of f16/bf16: what tensor cores and cuBLAS's aligned kernels
 * want on a GPU). */
#define CPU_PAD_MULTIPLE 16
#define CUDA_PAD_MULTIPLE 8

static bool padding_tuned(const CompileOptions *o)
{
    return o && o->mode == MODE_MAX_AUTOTUNE && o->tune_sizes;
}

static int pad_multiple(const CompileOptions *o)
{
    return o->device && strcmp(o->device, "cuda") == 0 ? CUDA_PAD_MULTIPLE : CPU_PAD_MULTIPLE;
}

Compiled *compile_graph(const Graph *src, const CompileOptions *o, Err *e)
{
    double t0 = clock_seconds();
    Graph *g = graph_copy(src, e);
    bool run = !(o && o->optimised);
    if (!g || (run && !run_passes(&g, pipeline_for(o), e)) || !same_params(src, g, e) ||
        (padding_tuned(o) && !tune_pad(&g, o->tune_sizes, pad_multiple(o), o, e))) {
        graph_free(g);
        return NULL;
    }
    double passes = clock_seconds() - t0;
    Compiled *c = compile_optimised(g, o, e);
    if (c)
        c->passes_s = passes;
    return c;
}

bool compiled_tune(Compiled *c, Err *e)
{
    const SymBind *sb = c->cu ? cuda_engine_symbols(c->cu) : engine_symbols(c->en);
    if (c->mode != MODE_MAX_AUTOTUNE || (c->tuned && sym_same_sizes(sb, &c->tuned_sb)))
        return true;
    double t0 = clock_seconds();
    bool ok = c->cu ? tune_cuda(c->cu, c->p, &c->tune, e) : tune_cpu(c->en, c->p, &c->tune, e);
    c->tune_s += clock_seconds() - t0;
    c->tuned_sb = *sb, c->tuned = ok;
    free(c->tuned_cfg);
    free(c->tuned_cu);
    size_t n = (size_t)c->p->nstep + 1;
    c->tuned_cfg = ok && !c->cu ? calloc(n, sizeof *c->tuned_cfg) : NULL;
    c->tuned_cu = ok && c->cu ? calloc(n, sizeof *c->tuned_cu) : NULL;
    for (int s = 0; s < c->p->nstep; s++) {
        if (c->tuned_cfg)
            c->tuned_cfg[s] = *engine_config(c->en, s);
        if (c->tuned_cu)
            c->tuned_cu[s] = *cuda_engine_config(c->cu, s);
    }
    return ok;
}

bool compiled_run(Compiled *c, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                  Err *e)
{
    bool ok = c->cu ? cuda_engine_run(c->cu, inputs, params, outputs, e)
                    : engine_run(c->en, inputs, params, outputs, e);
    if (!ok)
        return false;
    if (compiled_tune(c, e))
        return true;
    for (int i = 0; i < c->g->noutput; i++)
        tensor_free(&outputs[i]);
    return false;
}

void compiled_set_rng_step(Compiled *c, uint64_t step)
{
    if (c->cu)
        cuda_engine_set_rng_step(c->cu, step);
    else
        engine_set_rng_step(c->en, step);
}

void compiled_use_tuning(Compiled *c, bool on)
{
    for (int s = 0; c->en && c->tuned_cfg && s < c->p->nstep; s++)
        engine_configure(c->en, s, on ? &c->tuned_cfg[s] : NULL);
    for (int s = 0; c->cu && c->tuned_cu && s < c->p->nstep; s++) {
        Err ignore = {0}; /* the variants chosen were loaded when tuned: nothing can fail */
        cuda_engine_configure(c->cu, s, on ? &c->tuned_cu[s] : NULL, &ignore);
    }
}

const MemoryPlan *compiled_plan(const Compiled *c)
{
    return c->cu ? cuda_engine_plan(c->cu) : engine_plan(c->en);
}

const double *compiled_step_seconds(const Compiled *c)
{
    return c->cu ? cuda_engine_step_seconds(c->cu) : engine_step_seconds(c->en);
}

bool compile_plan(const Graph *src, const CompileOptions *o, const SymBind *sb, MemoryPlan *plan,
                  Err *e)
{
    Graph *g = graph_copy(src, e);
    LowerOptions lo = {.no_fusion = o && o->no_fusion};
    bool passes = !(o && o->optimised);
    Program *p = g && (!passes || run_passes(&g, pipeline_for(o), e)) ? loop_lower(g, &lo, e) : NULL;
    bool gpu = o && o->device && strcmp(o->device, "cuda") == 0;
    bool ok = p && plan_memory_aligned(p, sb, gpu ? PLAN_ALIGN_GPU : 0, plan, e);
    program_free(p);
    graph_free(g);
    return ok;
}
