/* tune_pad.c — max-autotune's shape padding: each matmul whose N or K is not a multiple of
 * what the kernels prefer is compiled alone, as it is and padded (passes/pad.c), and timed
 * at the tuning sizes; it is padded in the model only where padding measured faster,
 * copies of its operands included. The decision is cached like a kernel's. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/version.h"
#include "passes/passes.h"
#include "pipeline/pipeline.h"
#include "runtime/init.h"
#include "runtime/pool.h"

typedef struct Probe {
    Compiled *c[2];      /* as it is, padded */
    Tensor in[2];
    Tensor *ref, out[2]; /* ref: the unpadded result */
    TuneBudget budget;
} Probe;

/* Operand j of matmul `node` rebuilt in dst as an input, through the same transpose when
 * it is one (so the probe reads the layout the model reads). */
static int probe_operand(Rewrite *rw, int node, int j)
{
    const Graph *g = rw->src;
    int x = g->node[node].in[j];
    const Node *n = &g->node[x];
    const char *name = j ? "b" : "a";
    if (n->op != OP_TRANSPOSE)
        return b_input(&rw->b, name, &n->type);
    int in = b_input(&rw->b, name, &g->node[n->in[0]].type);
    return rewrite_copy_with(rw, x, &in);
}

/* The matmul alone: inputs a and b (types as in g), output y. */
static Graph *probe_graph(const Graph *g, int node, Err *e)
{
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    int a = probe_operand(&rw, node, 0), b = probe_operand(&rw, node, 1);
    b_output(&rw.b, b_matmul(&rw.b, a, b), "y");
    free(rw.map);
    if (err_ok(rw.b.err))
        return rw.dst;
    graph_free(rw.dst);
    return NULL;
}

/* The GPU time of c's steps so far (its engine times each with events), 0 on the CPU. */
static double gpu_seconds(const Compiled *c)
{
    const double *t = c->device->gpu ? compiled_step_seconds(c) : NULL;
    double sum = 0;
    for (int s = 0; t && s < c->p->nstep; s++)
        sum += t[s];
    return sum;
}

/* Run candidate `at` once, timed; its output stays in p->out[at] (the engine writes the
 * last run's tensor again, so no run allocates). On a GPU the time is the steps' on the
 * device, not the copies of the probe's inputs and output across PCIe. */
static bool probe_run(Probe *p, int at, double *seconds, Err *e)
{
    double t0 = clock_seconds(), g0 = gpu_seconds(p->c[at]);
    bool ok = compiled_run(p->c[at], p->in, NULL, &p->out[at], e);
    *seconds = p->c[at]->device->gpu ? gpu_seconds(p->c[at]) - g0 : clock_seconds() - t0;
    return ok;
}

typedef struct ProbeAt {
    Probe *p;
    int at;
} ProbeAt;

static bool probe_timed(void *ctx, int i, double *seconds, Err *e)
{
    (void)i;
    ProbeAt *x = ctx;
    return probe_run(x->p, x->at, seconds, e);
}

static bool same_values(const Tensor *a, const Tensor *b)
{
    return tensor_numel(a) == tensor_numel(b) && a->dt == b->dt &&
           tune_agrees(a->dt, a->data, b->data, (size_t)tensor_numel(a) * dtype_info[a->dt].size);
}

static TuneStatus probe_measure(void *ctx, const TunePoint *pt, double *seconds, Err *e)
{
    Probe *p = ctx;
    ProbeAt x = {p, pt->at[0]};
    if (!tune_time(probe_timed, &x, &p->budget, seconds, e))
        return TUNE_FAILED;
    if (x.at == 1 && !same_values(&p->out[1], &p->out[0]))
        return TUNE_WRONG;
    return TUNE_OK;
}

static void probe_free(Probe *p)
{
    for (int i = 0; i < 2; i++) {
        compiled_free(p->c[i]);
        tensor_free(&p->in[i]);
        tensor_free(&p->out[i]);
    }
}

/* Both versions of matmul `node` compiled and given the same random inputs. */
static bool probe_make(Probe *p, const Graph *g, int node, const SymBind *sb, int multiple,
                       const CompileOptions *o, Err *e)
{
    CompileOptions plain = {.threads = o->threads, .cpu = o->cpu, .device = o->device,
                            .cuda = o->cuda, .no_debug_dir = true}; /* the model's compile
                                                    writes its stages, not each probe's */
    plain.profile = true; /* on a GPU, its time from the engine's events (probe_run) */
    Graph *alone = probe_graph(g, node, e);
    Graph *padded = alone ? pass_pad_gemm(alone, multiple, NULL, NULL, e) : NULL;
    bool given[2] = {false, false};
    bool ok = padded && init_inputs(alone, sb, 1, given, p->in, e);
    ok = ok && (p->c[0] = compile_graph(alone, &plain, e)) && (p->c[1] = compile_graph(padded, &plain, e));
    graph_free(alone);
    graph_free(padded);
    return ok;
}

static void space_pad(TuneSpace *sp, int multiple)
{
    memset(sp, 0, sizeof *sp);
    sp->nknob = 1;
    sp->knob[0] = (TuneKnob){.name = "pad", .n = 2, .value = {0, multiple}, .label = {"none"},
                             .needs = -1};
}

/* The matmul's cache key: the device, coil's version, its operand types at these sizes. */
static void pad_key(const Graph *g, int node, const SymBind *sb, const char *device, char *key,
                    size_t n)
{
    char text[512] = "pad";
    size_t used = 3;
    for (int j = 0; j < 2; j++) {
        int x = g->node[node].in[j];
        bool tr = g->node[x].op == OP_TRANSPOSE;
        const Type *t = &g->node[tr ? g->node[x].in[0] : x].type;
        int64_t dims[COIL_MAX_RANK];
        type_resolve(t, sb, dims);
        used += (size_t)snprintf(text + used, sizeof text - used, " %s%s", tr ? "T" : "",
                                 dtype_info[t->dt].name);
        for (int d = 0; d < t->rank && used < sizeof text; d++)
            used += (size_t)snprintf(text + used, sizeof text - used, ",%lld", (long long)dims[d]);
    }
    snprintf(key, n, "%s|coil %s|%016llx", device, COIL_VERSION_TEXT,
             (unsigned long long)fnv1a_str(text));
}

/* The device as the cache keys it: the CPU and threads, or the GPU (as its tuner does). */
static bool pad_device(const CompileOptions *o, char *buf, size_t n, Err *e)
{
    const Device *dev = o->device ? o->device : device_cpu();
    EngineRequest r = {.threads = o->threads, .cuda = o->cuda};
    return dev->ops->tune_key(&r, buf, n, e);
}

/* Whether to pad matmul `node`: the cache's answer, else measured. */
static bool decide_pad(const Graph *g, int node, const SymBind *sb, int multiple,
                       const CompileOptions *o, TuneCache *cache, const char *device,
                       bool *pad, bool *measured, Err *e)
{
    char key[256], choice[64];
    pad_key(g, node, sb, device, key, sizeof key);
    TuneSpace sp;
    space_pad(&sp, multiple);
    TunePoint pt;
    const TuneEntry *hit = tune_cache_get(cache, key);
    TuneResult res = {0};
    bool ok = true, cached = hit && tune_point_parse(&sp, hit->choice, &pt);
    if (cached) {
        res.best = pt, res.best_s = hit->best_s, res.default_s = hit->default_s;
    } else {
        Probe p = {.budget = {3, 50, 0.05}};
        ok = probe_make(&p, g, node, sb, multiple, o, e) &&
             tune_descend(&sp, probe_measure, &p, 1, &res, e);
        probe_free(&p);
        *measured = ok;
    }
    tune_point_text(&sp, &res.best, choice, sizeof choice);
    *pad = res.best.at[0] == 1;
    if (ok)
        coil_log(LOG_INFO, "autotune pad matmul %%%d: %s (%.1f us, unpadded %.1f us)%s", node,
                 *pad ? "padded" : "kept as it is", res.best_s * 1e6, res.default_s * 1e6,
                 cached ? ", from the cache" : "");
    if (ok && !cached)
        ok = tune_cache_put(cache, key, choice, res.best_s, res.default_s);
    TuneKernelReport *k = ok && o->tune_report ? tune_report_add(o->tune_report) : NULL;
    if (k) {
        int64_t n, kk, np, kp;
        pad_gemm_dims(g, node, multiple, &n, &kk, &np, &kp);
        snprintf(k->name, sizeof k->name, "pad matmul %%%d", node);
        snprintf(k->shape, sizeof k->shape, "N %lld K %lld", (long long)n, (long long)kk);
        k->steps = 1, k->space = sp, k->res = res, k->cached = cached;
        k->best_s = res.best_s, k->default_s = res.default_s;
        snprintf(k->choice, sizeof k->choice, "%s", choice);
        res = (TuneResult){0};
    }
    tune_result_free(&res);
    return ok;
}

static bool want_marked(void *ctx, const Graph *g, int node)
{
    (void)g;
    return ((const bool *)ctx)[node];
}

bool tune_pad(Graph **g, const SymBind *sb, int multiple, const CompileOptions *o, Err *e)
{
    char device[160];
    if (!pad_device(o, device, sizeof device, e))
        return false;
    const char *path = o->tune_cache ? o->tune_cache : tune_cache_default_path();
    if (!path) {
        err_set(e, ERR_USAGE, "max-autotune: no cache file (set COIL_CACHE_DIR or HOME)");
        return false;
    }
    TuneCache *cache = tune_cache_open(path, e);
    if (path != o->tune_cache)
        free((char *)path);
    bool *pad = calloc((size_t)(*g)->nnode + 1, sizeof *pad), any = false, measured = false;
    bool ok = cache && pad;
    for (int i = 0; ok && i < (*g)->nnode; i++) {
        int64_t n, k, np, kp;
        if (pad_gemm_dims(*g, i, multiple, &n, &k, &np, &kp) && (n != np || k != kp))
            ok = decide_pad(*g, i, sb, multiple, o, cache, device, &pad[i], &measured, e);
        any = any || pad[i];
    }
    if (ok && measured)
        ok = tune_cache_save(cache, e);
    Graph *padded = ok && any ? pass_pad_gemm(*g, multiple, want_marked, pad, e) : NULL;
    if (padded) {
        graph_free(*g);
        *g = padded;
    }
    ok = ok && (!any || padded);
    if (!ok && err_ok(e))
        err_set(e, ERR_MEMORY, "autotune: out of memory deciding the padding");
    free(pad);
    tune_cache_free(cache);
    return ok;
}
