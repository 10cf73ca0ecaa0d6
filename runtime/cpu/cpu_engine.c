/* cpu_engine.c — runs a Program on the CPU: binds symbols from the inputs, places the
 * temporaries by the memory plan in one arena, then runs the steps in order, each kernel
 * split over the thread pool along its outer dimension 0, each GEMM through gemm_run, each
 * attention through attention_run.
 *
 * Everything that does not depend on the sizes (constants in their dtypes, the pool) is
 * made once in engine_new; the plan and the arena are kept while the symbol values repeat,
 * so a steady-state run allocates only its outputs. */
#include <stdlib.h>
#include <string.h>

#include "codegen/index_bounds.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/gemm_tiled.h"
#include "runtime/pool.h"

#define ARENA_ALIGN 64
/* Element-statements a chunk should hold at least, so waking a thread (a few
 * microseconds) is small next to the chunk's work. */
#define MIN_CHUNK_WORK 32768

struct Engine {
    const Program *p;
    Pool *pool;
    KernelFn *fns;     /* per kernel; NULL (all or one): the loop evaluator */
    TileFn *tiles;     /* per step; NULL (all or one): OpenBLAS */
    const Ukernels *uk;
    void *code;        /* what fns, tiles and uk point into (EngineOptions.code) */
    void (*free_code)(void *code);
    StepConfig *cfg;   /* per step */
    bool *heavy;       /* per step: a GEMM whose fused epilogue calls transcendental math */
    int *range_buf;    /* per step: the buffer a range step stores an index's [min, max]
                          into (codegen/index_bounds.h), else -1 */
    bool *skip;        /* per step: a range step whose index is proven in range at the
                          planned sizes */
    SymBind run_sb;    /* the latest run's symbols */
    uint64_t rng_step; /* the next run's (engine_set_rng_step) */
    bool ran;          /* run_sb and bufs hold a finished run's */
    EngineStats stats;
    double *step_s;    /* per step, with profiling */
    Trace *trace;      /* engine_set_trace's, else NULL */
    void (*on_step)(void *ctx, int step); /* engine_on_step's, else NULL */
    void *on_step_ctx;
    int trace_prog;    /* this program's id in it */
    DType *dts;        /* per buffer */
    void **bufs;       /* per buffer: its base for the current run */
    void **consts;     /* per buffer: a BUF_CONST's elements in its dtype, else NULL */
    int nparam;
    MemoryPlan plan;
    SymBind plan_sb;   /* the symbol values `plan` was made for */
    bool planned;
    char *arena;
    int64_t arena_cap;
};

/* ---------------------------------------------------------------- set-up */

static void *alloc_aligned(int64_t bytes)
{
    size_t n = (size_t)(bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    return aligned_alloc(ARENA_ALIGN, n ? n : ARENA_ALIGN);
}

/* Every index the program holds must name something of its graph. */
static bool check_program(const Program *p, int nparam, Err *e)
{
    const Graph *g = p->graph;
    int count[] = {[BUF_INPUT] = g->ninput, [BUF_PARAM] = nparam, [BUF_OUTPUT] = g->noutput};
    bool *has_output = calloc((size_t)g->noutput + 1, 1);
    bool ok = has_output != NULL;
    for (int b = 0; ok && b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind > BUF_OUTPUT)
            continue;
        ok = buf->index >= 0 && buf->index < count[buf->kind];
        if (ok && buf->kind == BUF_OUTPUT)
            has_output[buf->index] = true;
        if (!ok)
            err_set(e, ERR_INPUT, "program buffer '%s': index %d is out of range", buf->name,
                    buf->index);
    }
    for (int i = 0; ok && i < g->noutput; i++)
        if (!(ok = has_output[i]))
            err_set(e, ERR_INPUT, "program has no buffer for output '%s'", g->output_name[i]);
    for (int s = 0; ok && s < p->nstep; s++) {
        const Step *st = &p->step[s];
        if (st->kind == STEP_ATTENTION)
            continue; /* runs no kernel */
        int k = st->kind == STEP_KERNEL ? st->kernel : st->gemm.epilogue;
        int least = st->kind == STEP_KERNEL ? 0 : -1; /* a GEMM may have no epilogue */
        if (!(ok = k >= least && k < p->nkernel))
            err_set(e, ERR_INPUT, "program step %d: kernel %d is out of range", s, k);
    }
    if (!has_output)
        err_set(e, ERR_MEMORY, "out of memory checking a program");
    free(has_output);
    return ok;
}

/* Constants in their dtype, once: they are static, whatever the batch. */
static bool bind_consts(Engine *en, Err *e)
{
    const Program *p = en->p;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind != BUF_CONST)
            continue;
        if (!dim_is_static(buf->numel) || (buf->numel.k > 0 && !buf->data)) {
            err_set(e, ERR_INPUT, "constant '%s' has no static elements", buf->name);
            return false;
        }
        en->consts[b] = alloc_aligned(buf->numel.k * dtype_info[buf->dt].size);
        if (!en->consts[b]) {
            err_set(e, ERR_MEMORY, "out of memory for constant '%s'", buf->name);
            return false;
        }
        for (int64_t i = 0; i < buf->numel.k; i++)
            dtype_store(buf->dt, en->consts[b], i, buf->data[i]);
    }
    return true;
}

/* Whether GEMM step s's fused epilogue calls transcendental math (GELU, tanh, exp...):
 * evaluated per tile, it costs the dot form's small 4 x 6 tiles far more than the
 * broadcast form's wide rows (GPT-2's c_fc with gelu_tanh: 1.68x faster broadcast,
 * measured by the autotuner on Sapphire Rapids, which also chose k blocks of 256 there).
 * The k blocks stay the heuristic's: on a Zen 3 blocks of 256 made GPT-2's c_fc 1.07x
 * and BERT's first FFN GEMM 1.04x slower than whole K = 768 (per-step profiles, 3
 * alternating rounds; the other GEMMs level). */
static bool heavy_epilogue(const Program *p, int s)
{
    const Step *st = &p->step[s];
    if (st->kind != STEP_GEMM || st->gemm.epilogue < 0 || st->gemm.epi_load < 0)
        return false;
    const Kernel *k = &p->kernel[st->gemm.epilogue];
    for (int x = 0; x < k->nlx; x++) {
        int op = k->lx[x].op;
        if (k->lx[x].kind == LX_UNARY && op != OP_NEG && op != OP_ABS && op != OP_RELU)
            return true;
    }
    return false;
}

static bool alloc_tables(Engine *en, const EngineOptions *o, Err *e)
{
    const Program *p = en->p;
    size_t nbuf = (size_t)p->nbuf + 1;
    en->nparam = graph_params(p->graph, NULL);
    en->dts = calloc(nbuf, sizeof *en->dts);
    en->bufs = calloc(nbuf, sizeof *en->bufs);
    en->consts = calloc(nbuf, sizeof *en->consts);
    if (o->fns && (en->fns = calloc((size_t)p->nkernel + 1, sizeof *en->fns)))
        memcpy(en->fns, o->fns, (size_t)p->nkernel * sizeof *en->fns);
    if (o->tiles && o->uk && (en->tiles = calloc((size_t)p->nstep + 1, sizeof *en->tiles)))
        memcpy(en->tiles, o->tiles, (size_t)p->nstep * sizeof *en->tiles);
    en->uk = o->uk;
    en->cfg = calloc((size_t)p->nstep + 1, sizeof *en->cfg);
    en->heavy = calloc((size_t)p->nstep + 1, sizeof *en->heavy);
    en->range_buf = calloc((size_t)p->nstep + 1, sizeof *en->range_buf);
    en->skip = calloc((size_t)p->nstep + 1, sizeof *en->skip);
    for (int s = 0; en->heavy && s < p->nstep; s++)
        en->heavy[s] = heavy_epilogue(p, s);
    for (int s = 0; en->range_buf && s < p->nstep; s++)
        en->range_buf[s] = range_step_buffer(p, s);
    if (o->profile)
        en->step_s = calloc((size_t)p->nstep + 1, sizeof *en->step_s);
    bool tiles_ok = !(o->tiles && o->uk) || en->tiles;
    if (!en->dts || !en->bufs || !en->consts || !en->cfg || !en->heavy || !en->range_buf ||
        !en->skip || (o->fns && !en->fns) || !tiles_ok || (o->profile && !en->step_s)) {
        err_set(e, ERR_MEMORY, "out of memory creating an engine for %d buffers", p->nbuf);
        return false;
    }
    for (int b = 0; b < p->nbuf; b++)
        en->dts[b] = p->buf[b].dt;
    return true;
}

Engine *engine_new(const Program *p, const EngineOptions *o, Err *e)
{
    static const EngineOptions defaults = {0};
    o = o ? o : &defaults;
    if (!p->graph) {
        if (o->free_code)
            o->free_code(o->code);
        err_set(e, ERR_INPUT, "engine: the program has no graph to take its signature from");
        return NULL;
    }
    Engine *en = calloc(1, sizeof *en);
    if (!en) {
        if (o->free_code)
            o->free_code(o->code);
        err_set(e, ERR_MEMORY, "out of memory creating an engine");
        return NULL;
    }
    en->p = p, en->code = o->code, en->free_code = o->free_code;
    bool ok = alloc_tables(en, o, e) && check_program(p, en->nparam, e) && bind_consts(en, e) &&
              (en->pool = pool_shared(o->threads, e)) != NULL;
    if (!ok) {
        engine_free(en);
        return NULL;
    }
    if (o->threads > 0)
        gemm_set_threads(o->threads); /* OpenBLAS's count is global: set only when asked */
    return en;
}

void engine_free(Engine *en)
{
    if (!en)
        return;
    pool_free(en->pool);
    for (int b = 0; en->consts && b < en->p->nbuf; b++)
        free(en->consts[b]);
    free(en->consts);
    free(en->bufs);
    free(en->dts);
    free(en->fns);
    free(en->tiles);
    free(en->cfg);
    free(en->heavy);
    free(en->range_buf);
    free(en->skip);
    free(en->step_s);
    plan_free(&en->plan);
    free(en->arena);
    if (en->free_code)
        en->free_code(en->code);
    free(en);
}

const MemoryPlan *engine_plan(const Engine *en) { return en->planned ? &en->plan : NULL; }

EngineStats engine_stats(const Engine *en) { return en->stats; }

const double *engine_step_seconds(const Engine *en) { return en->step_s; }

/* Room for a run's chunks: a step is at most two jobs (a GEMM, then its epilogue), each a
 * chunk per thread; the pool doubles its buffers if a run ever needs more. */
bool engine_set_trace(Engine *en, Trace *t, Err *e)
{
    int prog = t ? trace_program(t, en->p, "the CPU", e) : -1;
    if (t && (prog < 0 || !pool_trace_start(en->pool, 2 * en->p->nstep + 64, e)))
        return false;
    en->trace = t, en->trace_prog = prog;
    return true;
}

void engine_on_step(Engine *en, void (*fn)(void *ctx, int step), void *ctx)
{
    en->on_step = fn, en->on_step_ctx = ctx;
}

void engine_configure(Engine *en, int s, const StepConfig *c)
{
    if (s >= 0 && s < en->p->nstep)
        en->cfg[s] = c ? *c : (StepConfig){0};
}

const StepConfig *engine_config(const Engine *en, int s) { return &en->cfg[s]; }

int engine_threads(const Engine *en) { return pool_threads(en->pool); }

const SymBind *engine_symbols(const Engine *en) { return en->ran ? &en->run_sb : NULL; }

void engine_set_rng_step(Engine *en, uint64_t step) { en->rng_step = step; }

bool engine_can_tile(const Engine *en, int s)
{
    const Step *st = &en->p->step[s];
    return en->ran && st->kind == STEP_GEMM && en->tiles && en->tiles[s] && en->uk &&
           gemm_tiled_supported(&st->gemm, en->bufs, en->dts, &en->run_sb);
}

void *engine_buffer(const Engine *en, int b) { return en->bufs[b]; }

void *const *engine_buffers(const Engine *en) { return en->bufs; }

void engine_set_buffer(Engine *en, int b, void *base) { en->bufs[b] = base; }

/* ---------------------------------------------------------------- per run */

/* The plan for these symbol values: the last one when they repeat, and an arena to hold it.
 * The indices are checked at new sizes first (an index proven out of range is an error
 * before anything runs; range steps proven unneeded are skipped). */
static bool ensure_plan(Engine *en, const SymBind *sb, Err *e)
{
    if (en->planned && sym_same_sizes(&en->plan_sb, sb))
        return true;
    plan_free(&en->plan);
    en->planned = false;
    if (!index_bounds_before(en->p, sb, en->skip, e) || !plan_memory(en->p, sb, &en->plan, e))
        return false;
    if (!en->arena || en->plan.arena_bytes > en->arena_cap) {
        free(en->arena);
        en->arena_cap = 0;
        if (!(en->arena = alloc_aligned(en->plan.arena_bytes))) {
            err_set(e, ERR_MEMORY, "out of memory: the memory plan needs %lld bytes of temporaries",
                    (long long)en->plan.arena_bytes);
            plan_free(&en->plan);
            return false;
        }
        en->arena_cap = en->plan.arena_bytes;
    }
    en->plan_sb = *sb;
    en->planned = true;
    return true;
}

/* Every buffer's base for this run. */
static void bind_buffers(Engine *en, const Tensor *inputs, const Tensor *params,
                         const Tensor *outputs)
{
    const Program *p = en->p;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        switch (buf->kind) {
        case BUF_INPUT: en->bufs[b] = inputs[buf->index].data; break;
        case BUF_PARAM: en->bufs[b] = params[buf->index].data; break;
        case BUF_OUTPUT: en->bufs[b] = outputs[buf->index].data; break;
        case BUF_CONST: en->bufs[b] = en->consts[b]; break;
        case BUF_TEMP: en->bufs[b] = en->arena + en->plan.offset[b]; break;
        }
    }
}

/* ---------------------------------------------------------------- steps */

typedef struct KernelCall {
    KernelFn fn; /* NULL: the loop evaluator */
    const Program *p;
    int kernel;
    void *const *bufs;
    const int64_t *syms;
} KernelCall;

static void kernel_chunk(void *ctx, int64_t begin, int64_t end)
{
    const KernelCall *c = ctx;
    if (c->fn)
        c->fn(c->bufs, c->syms, begin, end);
    else
        loop_eval_kernel(c->p, c->kernel, c->bufs, c->syms, begin, end);
}

/* Work in one iteration of outer variable 0: the points of the other loops, the inner
 * space counted once per phase. */
static int64_t work_per_row(const Kernel *k, const SymBind *sb)
{
    int64_t w = 1, inner = 1;
    for (int d = 1; d < k->nouter; d++)
        w *= dim_value(k->size[d], sb);
    for (int d = k->nouter; d < k->nouter + k->ninner; d++)
        inner *= dim_value(k->size[d], sb);
    return w * (k->ninner ? inner * (k->nphase > 0 ? k->nphase : 1) : 1);
}

static void run_kernel(Engine *en, int k, int parts, const SymBind *sb)
{
    const Kernel *kn = &en->p->kernel[k];
    KernelCall call = {en->fns ? en->fns[k] : NULL, en->p, k, en->bufs, sb->val};
    if (kn->nouter == 0) {
        kernel_chunk(&call, 0, 1); /* one point: nothing to split */
        return;
    }
    int64_t n = dim_value(kn->size[0], sb), w = work_per_row(kn, sb);
    if (kernel_adds(kn)) { /* its points may add into one element (loop.h): one thread */
        kernel_chunk(&call, 0, n);
        return;
    }
    int64_t grain = w >= MIN_CHUNK_WORK ? 1 : (MIN_CHUNK_WORK + w - 1) / (w > 0 ? w : 1);
    if (parts > 0)
        grain = (n + parts - 1) / parts;
    pool_parallel_for(en->pool, n, grain, kernel_chunk, &call);
}

/* A GEMM step: the generated kernels with the epilogue in the tiles when it can be fused
 * (else the tiles store C and the epilogue kernel runs after), or OpenBLAS then the
 * epilogue. */
static bool run_gemm(Engine *en, int s, const SymBind *sb, Err *e)
{
    const Gemm *g = &en->p->step[s].gemm;
    const StepConfig *c = &en->cfg[s];
    TileFn tile = en->tiles ? en->tiles[s] : NULL;
    bool generated = tile && c->path != GEMM_PATH_BLAS &&
                     gemm_tiled_supported(g, en->bufs, en->dts, sb);
    GemmTiling how = c->tiling;
    if (en->heavy[s] && how.form == GEMM_FORM_AUTO && !how.store_only)
        how.form = GEMM_FORM_BCAST;
    bool ok = generated ? gemm_tiled_run(g, en->bufs, en->dts, sb, en->uk, tile, &how, en->pool, e)
                        : gemm_run(g, en->bufs, en->dts, sb, e);
    en->stats.gemm_generated += generated;
    en->stats.gemm_blas += !generated;
    bool fused = generated && g->epi_load >= 0 && !c->tiling.store_only;
    if (ok && g->epilogue >= 0 && !fused)
        run_kernel(en, g->epilogue, c->parts, sb);
    return ok;
}

static bool run_step(Engine *en, int s, const SymBind *sb, Err *e)
{
    const Step *st = &en->p->step[s];
    if (st->kind == STEP_KERNEL) {
        run_kernel(en, st->kernel, en->cfg[s].parts, sb);
        return true;
    }
    if (st->kind == STEP_ATTENTION) /* the block products on the GEMM micro-kernels */
        return attention_run(&st->attn, en->bufs, en->dts, sb, en->uk, en->pool, e);
    return run_gemm(en, s, sb, e);
}

bool engine_run_step(Engine *en, int s, Err *e)
{
    if (!en->ran || s < 0 || s >= en->p->nstep) {
        err_set(e, ERR_USAGE, "engine_run_step: no finished run, or no step %d", s);
        return false;
    }
    return run_step(en, s, &en->run_sb, e);
}

/* Step s took [t0, now): into the profile's sums and the trace. */
static void step_timed(Engine *en, int s, double t0)
{
    double t1 = clock_seconds();
    if (en->step_s)
        en->step_s[s] += t1 - t0;
    if (en->trace)
        trace_step(en->trace, en->trace_prog, s, t0, t1);
}

static bool run_steps(Engine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    bool timed = en->step_s || en->trace;
    en->stats = (EngineStats){0};
    for (int s = 0; s < p->nstep; s++) {
        double t0 = timed ? clock_seconds() : 0;
        if (en->trace && !en->skip[s])
            pool_trace_tag(en->pool, s); /* the pool's chunks from now on are step s's */
        if (!en->skip[s] && !run_step(en, s, sb, e))
            return false;
        if (timed && !en->skip[s])
            step_timed(en, s, t0);
        if (en->on_step)
            en->on_step(en->on_step_ctx, s);
    }
    return true;
}

static void take_chunk(void *ctx, const PoolChunk *c)
{
    Engine *en = ctx;
    trace_chunk(en->trace, en->trace_prog, c);
}

/* After a traced run: its chunks out of the pool's buffers, the run's own event. Work
 * outside a run (the autotuner's engine_run_step) is not recorded. */
static void trace_run_done(Engine *en)
{
    pool_trace_tag(en->pool, -1);
    trace_dropped(en->trace, pool_trace_drain(en->pool, take_chunk, en));
    trace_run_end(en->trace, en->trace_prog);
}

/* After the steps: every index a range step reduced must have stayed in its table. */
static bool check_ranges(const Engine *en, const SymBind *sb, Err *e)
{
    for (int s = 0; s < en->p->nstep; s++) {
        int b = en->range_buf[s];
        if (b >= 0 && !en->skip[s] && !index_bounds_after(en->p, b, en->bufs[b], sb, e))
            return false;
    }
    return true;
}

bool engine_run(Engine *en, const Tensor *inputs, const Tensor *params, Tensor *outputs, Err *e)
{
    SymBind sb;
    const Graph *g = en->p->graph;
    if (!bind_inputs(g, inputs, &sb, e) || !check_param_tensors(g, params, &sb, e) ||
        !program_check_inputs(en->p, inputs, &sb, e) || !ensure_plan(en, &sb, e) ||
        !reuse_output_tensors(g, &sb, outputs, e))
        return false;
    sb.val[COIL_SYM_RNG_STEP] = (int64_t)en->rng_step;
    bind_buffers(en, inputs, params, outputs);
    en->ran = false;
    bool traced = en->trace && trace_run_begin(en->trace, en->trace_prog, &sb, clock_seconds(), e);
    bool ok = (!en->trace || traced) && run_steps(en, &sb, e) && check_ranges(en, &sb, e);
    if (traced)
        trace_run_done(en);
    if (ok) {
        en->run_sb = sb, en->ran = true;
        return true;
    }
    for (int i = 0; i < en->p->graph->noutput; i++)
        tensor_free(&outputs[i]);
    return false;
}
