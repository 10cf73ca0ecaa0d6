/* pipeline.c — the compile pipeline end to end, on one page:
 *
 *   inference (compile_graph)            training (train/train_loop.c, then compile_graph)
 *   ---------------------------          ------------------------------------------------
 *   the model (frontend/, ir/parse.c)    the model
 *                                        loss, kept buffers, precision, loss scale,
 *                                          autodiff, sizes (pipeline/training.c:
 *                                          training_graph)
 *   passes: the device's list            passes: verify, decompose, colsum, fold, cse, dce
 *     (verify, decompose, colsum, fold,  remat (training.c), then with `optimised`:
 *     cse, dce; runtime/device.c)
 *   pad (max-autotune, tune_pad.c)
 *   fuse (passes/fuse.c)                 fuse
 *   lower (codegen/lower.c): a node it   lower
 *     cannot lower as planned gets a
 *     group of its own and fuse runs
 *     again (fuse_lower.c)
 *   code generation and an engine:       code generation and an engine
 *     the device's prepare (make_engine):
 *     LLVM or a package's object and the
 *     CPU engine, or NVRTC and the CUDA
 *     engine (runtime/device.h)
 *   the memory plan (at the first run of each size, by the engine), tuning (max-autotune)
 *
 * Every stage can write what it made to COIL_DEBUG_DIR (stage_dump.c); the engine is then
 * driven through its device's operations (runtime/device.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"
#include "pipeline/stage_dump.h"

static const char *const mode_names[] = {
    [MODE_DEFAULT] = "default", [MODE_REDUCE_OVERHEAD] = "reduce-overhead",
    [MODE_MAX_AUTOTUNE] = "max-autotune"};

bool compile_mode_parse(const char *s, CompileMode *m)
{
    int i = name_index(mode_names, 3, s);
    if (i >= 0)
        *m = (CompileMode)i;
    return i >= 0;
}

const char *compile_mode_name(CompileMode m) { return mode_names[m]; }

void compiled_free(Compiled *c)
{
    if (!c)
        return;
    tune_cache_free(c->cache);
    compile_debug_free(c->debug);
    free(c->tuned_config);
    free(c->traced_s);
    if (c->engine)
        c->device->ops->free(c->engine);
    program_free(c->p);
    graph_free(c->g);
    free(c);
}

static bool device_here(const Device *dev, Err *e)
{
    const char *why;
    if (device_available(dev, &why))
        return true;
    err_set(e, dev->ops ? ERR_DEVICE : ERR_UNSUPPORTED, "cannot compile for %s: %s", dev->name, why);
    return false;
}

/* The device o asks for, or NULL with the reason it cannot be compiled for here. With
 * a debug directory a missing GPU is reported later, in make_engine, once the stages
 * that need none (up to the CUDA C) are written. */
static const Device *pick_device(const CompileOptions *o, bool debug, Err *e)
{
    const Device *dev = o->device ? o->device : device_cpu();
    return debug || device_here(dev, e) ? dev : NULL;
}

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
    TuneReport *report = o->tune_report ? o->tune_report : compile_debug_report(c->debug);
    c->tune = (TuneOptions){.cache = c->cache, .measure = true, .progress = o->tune_progress,
                               .report = report};
    return c->cache != NULL;
}

/* Seconds spent writing the debug directory so far: timers subtract it. */
static double debug_seconds(const Compiled *c)
{
    return debug_dir_seconds(compile_debug_dir(c->debug));
}

/* The engine's making, for the breakdown: the device compiler's stages (LLVM's, none
 * without LLVM: the kernels run on the loop evaluator; NVRTC's and the CUDA engine's). */
static void debug_engine_times(Compiled *c, const EngineMade *made)
{
    for (int i = 0; i < made->nstage; i++)
        compile_debug_stage(c->debug, made->stage[i].name, made->stage[i].seconds);
}

/* A traced engine that does not trace itself (a GPU's): the profile's events time each
 * step (what --profile uses), and each run's steps go into the trace after it. */
static bool trace_setup(Compiled *c, const CompileOptions *o, Err *e)
{
    if (!o->trace || c->device->ops->set_trace)
        return true;
    char device[300];
    EngineReport rep = compiled_report(c);
    snprintf(device, sizeof device, "%s (%s)", rep.hardware[0] ? rep.hardware : c->device->title,
             c->device->name);
    c->trace = o->trace;
    c->trace_prog = trace_program(c->trace, c->p, device, e);
    c->traced_s = calloc((size_t)c->p->nstep + 1, sizeof *c->traced_s);
    if (!c->traced_s && err_ok(e))
        err_set(e, ERR_MEMORY, "out of memory tracing a GPU");
    return c->trace_prog >= 0 && c->traced_s;
}

/* What the device's engine is made from (runtime/device.h). */
static EngineRequest engine_request(const Compiled *c, const CompileOptions *o)
{
    EngineRequest r = {.threads = o->threads, .profile = o->profile, .blas_gemm = o->blas_gemm,
                       .no_llvm = o->no_llvm, .object = o->object, .cpu = o->cpu,
                       .cuda = o->cuda, .trace = o->trace, .graphs = o->mode != MODE_DEFAULT,
                       .full_opt = o->mode == MODE_MAX_AUTOTUNE};
    r.cpu.debug = compile_debug_dir(c->debug);
    return r;
}

/* Code generation and the engine, through the device (runtime/device.h). */
static bool make_engine(Compiled *c, const CompileOptions *o, Err *e)
{
    const Device *dev = c->device;
    if (dev->gpu)
        compile_debug_cuda(c->debug, c->p);
    if (c->debug && !device_here(dev, e))
        return false; /* pick_device left it until the CUDA C was written */
    EngineRequest r = engine_request(c, o);
    EngineMade made = {0};
    double written = debug_seconds(c);
    c->engine = dev->ops->prepare(c->p, &r, &made, e);
    c->generated = made.generated, c->from_object = made.from_object;
    c->codegen = made.codegen;
    /* the CPU's time is LLVM's alone (less the debug directory's writing); a GPU's, the
     * whole engine's, NVRTC included */
    c->llvm_s = dev->gpu ? made.seconds : made.codegen_s - (debug_seconds(c) - written);
    if (!c->engine)
        return false;
    debug_engine_times(c, &made);
    return trace_setup(c, o, e) && tune_setup(c, o, e);
}

/* The fuse and lower stages (fuse_lower.c): g's fusion planned, the plan lowered to the
 * loop IR, and both written when debugging. */
static bool lower(Compiled *c, const CompileOptions *o, Err *e)
{
    Fusion f = {0};
    double t0 = clock_seconds();
    LowerOptions lo = {.no_fusion = o->no_fusion, .plan = c->debug ? &f : NULL,
                       .fuse_s = &c->fuse_s};
    c->p = fuse_and_lower(c->g, &lo, e);
    c->lower_s = clock_seconds() - t0;
    if (c->p)
        compile_debug_lowered(c->debug, c->g, &f, c->p);
    fuse_free(&f);
    compile_debug_stage(c->debug, "fusion", c->fuse_s);
    compile_debug_stage(c->debug, "lowering", c->lower_s - c->fuse_s);
    return c->p != NULL;
}

/* The rest of the pipeline after the passes: lowering, then the device's code generator;
 * takes g and the debug directory over, even on failure. */
static Compiled *compile_lowered(Graph *g, const CompileOptions *o, CompileDebug *debug,
                                 Err *e)
{
    const Device *dev = pick_device(o, debug != NULL, e);
    Compiled *c = dev ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        graph_free(g);
        compile_debug_free(debug);
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "out of memory compiling a model");
        return NULL;
    }
    c->g = g, c->debug = debug, c->device = dev;
    bool ok = lower(c, o, e) &&
              make_engine(c, o, e);
    if (ok) {
        compile_debug_times(c->debug);
        return c;
    }
    compiled_free(c);
    return NULL;
}

Compiled *compile_optimised(Graph *g, const CompileOptions *o, Err *e)
{
    static const CompileOptions defaults = {0};
    o = o ? o : &defaults;
    CompileDebug *debug = compile_debug_open(g, o);
    compile_debug_graph(debug, "input", g);
    return compile_lowered(g, o, debug, e);
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

/* The passes the device's code generator wants (runtime/device.h). */
static const char *pipeline_for(const CompileOptions *o)
{
    return *(o && o->device ? o->device : device_cpu())->passes;
}

static bool padding_tuned(const CompileOptions *o)
{
    return o && o->mode == MODE_MAX_AUTOTUNE && o->tune_sizes;
}

static int pad_multiple(const CompileOptions *o)
{
    return (o->device ? o->device : device_cpu())->pad_multiple;
}

/* The passes the pipeline runs, each graph written when debugging. */
static bool optimise(Graph **g, const CompileOptions *o, CompileDebug *debug, Err *e)
{
    compile_debug_passes_start(debug);
    return run_passes_with(g, pipeline_for(o), debug ? compile_debug_after_pass : NULL, debug, e);
}

/* max-autotune with sizes: matmuls padded where that measured faster. */
static bool pad(Graph **g, const CompileOptions *o, CompileDebug *debug, Err *e)
{
    if (!padding_tuned(o))
        return true;
    CompileOptions po = *o; /* its decisions in the debug directory's report too */
    po.tune_report = o->tune_report ? o->tune_report : compile_debug_report(debug);
    const Graph *before = *g;
    double t0 = clock_seconds();
    bool ok = tune_pad(g, o->tune_sizes, pad_multiple(o), &po, e);
    compile_debug_stage(debug, "shape-padding", clock_seconds() - t0);
    if (ok && *g != before) /* some matmul was padded */
        compile_debug_graph(debug, "after-tune-pad", *g);
    return ok;
}

Compiled *compile_graph(const Graph *src, const CompileOptions *o, Err *e)
{
    static const CompileOptions defaults = {0};
    o = o ? o : &defaults;
    CompileDebug *debug = compile_debug_open(src, o);
    DebugDir *dir = compile_debug_dir(debug);
    double t0 = clock_seconds() - debug_dir_seconds(dir); /* the writing left out */
    Graph *g = graph_copy(src, e);
    compile_debug_graph(debug, "input", g);
    bool ok = g && (o->optimised || optimise(&g, o, debug, e));
    compile_debug_stage(debug, "passes", clock_seconds() - debug_dir_seconds(dir) - t0);
    if (!ok || !same_params(src, g, e) || !pad(&g, o, debug, e)) {
        graph_free(g);
        compile_debug_free(debug);
        return NULL;
    }
    double passes = clock_seconds() - debug_dir_seconds(dir) - t0; /* padding included */
    Compiled *c = compile_lowered(g, o, debug, e);
    if (c)
        c->passes_s = passes;
    return c;
}

/* Step s's configuration as the tuning chose it. */
static void *tuned_config(const Compiled *c, int s)
{
    return (char *)c->tuned_config + (size_t)s * c->device->ops->config_size;
}

bool compiled_tune(Compiled *c, Err *e)
{
    const DeviceOps *ops = c->device->ops;
    const SymBind *sb = ops->symbols(c->engine);
    if (c->mode != MODE_MAX_AUTOTUNE || (c->tuned && sym_same_sizes(sb, &c->tuned_sb)))
        return true;
    double t0 = clock_seconds();
    bool ok = ops->tune(c->engine, c->p, &c->tune, e);
    c->tune_s += clock_seconds() - t0;
    if (ok && c->debug) {
        compile_debug_tuned(c->debug, c->tune.report);
        compile_debug_stage(c->debug, "tuning", c->tune_s);
        compile_debug_times(c->debug); /* again, under its first number, with the tuning */
    }
    c->tuned_sb = *sb, c->tuned = ok;
    free(c->tuned_config);
    c->tuned_config = ok ? calloc((size_t)c->p->nstep + 1, ops->config_size) : NULL;
    for (int s = 0; c->tuned_config && s < c->p->nstep; s++)
        memcpy(tuned_config(c, s), ops->config(c->engine, s), ops->config_size);
    return ok;
}

/* The GPU's run that began at start, into the trace: each step's time is what its CUDA
 * events measured this run (the profile's sums, less what they held before); the steps
 * are laid end to end from the run's start, as the stream ran them (gaps between them,
 * and the copies in and out, are not shown). */
static bool trace_gpu_run(Compiled *c, double start, Err *e)
{
    const double *sum = c->device->ops->step_seconds(c->engine);
    if (!trace_run_begin(c->trace, c->trace_prog, c->device->ops->symbols(c->engine), start, e))
        return false;
    double at = start;
    for (int s = 0; sum && s < c->p->nstep; s++) {
        double took = sum[s] - c->traced_s[s];
        c->traced_s[s] = sum[s];
        if (took > 0)
            trace_step(c->trace, c->trace_prog, s, at, at + took);
        at += took > 0 ? took : 0;
    }
    trace_run_end(c->trace, c->trace_prog);
    return true;
}

bool compiled_run(Compiled *c, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                  Err *e)
{
    double start = c->trace ? clock_seconds() : 0;
    bool ok = c->device->ops->run(c->engine, inputs, params, outputs, e);
    if (ok && c->trace && !trace_gpu_run(c, start, e)) {
        for (int i = 0; i < c->g->noutput; i++)
            tensor_free(&outputs[i]);
        return false;
    }
    if (!ok)
        return false;
    if (c->debug) /* at each new size the engine planned at */
        compile_debug_plan(c->debug, c->p, c->device->ops->symbols(c->engine), compiled_plan(c));
    if (compiled_tune(c, e))
        return true;
    for (int i = 0; i < c->g->noutput; i++)
        tensor_free(&outputs[i]);
    return false;
}

void compiled_set_rng_step(Compiled *c, uint64_t step)
{
    c->device->ops->set_rng_step(c->engine, step);
}

void compiled_use_tuning(Compiled *c, bool on)
{
    const DeviceOps *ops = c->device->ops;
    for (int s = 0; c->tuned_config && s < c->p->nstep; s++) {
        Err ignore = {0}; /* the variants chosen were loaded when tuned: nothing can fail */
        ops->configure(c->engine, s, on ? tuned_config(c, s) : NULL, &ignore);
    }
}

const MemoryPlan *compiled_plan(const Compiled *c) { return c->device->ops->plan(c->engine); }

const SymBind *compiled_symbols(const Compiled *c) { return c->device->ops->symbols(c->engine); }

const double *compiled_step_seconds(const Compiled *c)
{
    return c->device->ops->step_seconds(c->engine);
}

EngineReport compiled_report(const Compiled *c)
{
    EngineReport r;
    c->device->ops->report(c->engine, &r);
    return r;
}

void compiled_params_changed(Compiled *c)
{
    if (c->device->ops->params_changed)
        c->device->ops->params_changed(c->engine);
}

bool compiled_on_step(Compiled *c, void (*fn)(void *ctx, int step), void *ctx)
{
    if (!c->device->ops->on_step)
        return false;
    c->device->ops->on_step(c->engine, fn, ctx);
    return true;
}

bool compiled_stop_trace(Compiled *c, Err *e)
{
    if (c->device->ops->set_trace)
        return c->device->ops->set_trace(c->engine, NULL, e);
    c->trace = NULL; /* compiled_run traces a GPU's runs while it is set */
    return true;
}

bool compile_plan(const Graph *src, const CompileOptions *o, const SymBind *sb, MemoryPlan *plan,
                  Err *e)
{
    static const CompileOptions defaults = {0};
    o = o ? o : &defaults;
    CompileDebug *debug = compile_debug_open(src, o);
    Graph *g = graph_copy(src, e);
    compile_debug_graph(debug, "input", g);
    Fusion f = {0};
    LowerOptions lo = {.no_fusion = o->no_fusion, .plan = debug ? &f : NULL};
    bool optimised = g && (o->optimised || optimise(&g, o, debug, e));
    Program *p = optimised ? fuse_and_lower(g, &lo, e) : NULL;
    if (p)
        compile_debug_lowered(debug, g, &f, p);
    fuse_free(&f);
    int align = (o->device ? o->device : device_cpu())->plan_align;
    bool ok = p && plan_memory_aligned(p, sb, align, plan, e);
    if (ok)
        compile_debug_plan(debug, p, sb, plan);
    compile_debug_free(debug);
    program_free(p);
    graph_free(g);
    return ok;
}
