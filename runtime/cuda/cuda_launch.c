/* cuda_launch.c — the CUDA engine's steps on the stream: kernel launches (with the
 * variant the autotuner configured), fused attention, GEMMs, every step in order or as a
 * captured CUDA graph replayed; and the tuning interface (configure, run one step). */
#include "runtime/cuda/cuda_engine_int.h"

/* The configuration of kernel k: its step's (a GEMM's epilogue keeps the heuristics). */
static const CudaKernelConfig *kernel_config(const CudaEngine *en, int k, int s)
{
    return en->p->step[s].kind == STEP_KERNEL && en->p->step[s].kernel == k ? &en->cfg[s].kernel
                                                                            : NULL;
}

bool cuda_launch(CudaEngine *en, int k, int s, const SymBind *sb, Err *e)
{
    const Kernel *kn = &en->p->kernel[k];
    CudaLaunch L = cuda_launch_dims(kn, sb, en->info.sms, kernel_config(en, k, s));
    if (L.blocks == 0)
        return true;
    void *args[] = {&en->bufs_dev, &en->syms_dev};
    en->stats.launches++;
    CUresult r = en->cu->cuLaunchKernel(en->vfn[k] ? en->vfn[k] : en->fn[k], (unsigned)L.blocks, 1, 1, (unsigned)L.threads,
                                        1, 1, 0, en->stream, args, NULL);
    char what[200];
    snprintf(what, sizeof what, "cuLaunchKernel(%s, %lld blocks of %d)", kn->name,
             (long long)L.blocks, L.threads);
    return cu_ok(r, what, e);
}

/* An attention step's kernel when its configuration says AUTO. */
#define ATTENTION_DEFAULT CUDA_ATTENTION_MMA

static bool launch_attention(CudaEngine *en, int s, const SymBind *sb, Err *e)
{
    CudaGrid G;
    if (!cuda_attention_dims(&en->p->step[s].attn, sb, &G, e))
        return false;
    if (G.x == 0 || G.y == 0)
        return true;
    CudaAttentionKernel want = en->cfg[s].attention ? en->cfg[s].attention : ATTENTION_DEFAULT;
    bool mma = want == CUDA_ATTENTION_MMA && en->attn_mma_fn[s];
    G.threads = mma ? CUDA_ATTN_MMA_THREADS : G.threads;
    void *args[] = {&en->bufs_dev, &en->syms_dev};
    en->stats.launches++;
    CUresult r = en->cu->cuLaunchKernel(mma ? en->attn_mma_fn[s] : en->attn_fn[s], (unsigned)G.x,
                                        (unsigned)G.y, 1, (unsigned)G.threads, 1, 1, 0,
                                        en->stream, args, NULL);
    char what[200];
    snprintf(what, sizeof what, "cuLaunchKernel(coil_attention_%d%s, %lld x %lld blocks of %d)",
             s, mma ? "_mma" : "", (long long)G.x, (long long)G.y, G.threads);
    return cu_ok(r, what, e);
}

static bool run_steps(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    en->stats.gemm_cublas = en->stats.gemm_lt = en->stats.packs = en->stats.launches = 0;
    for (int s = 0; s < p->nstep; s++) {
        if (en->ev && !cu_ok(en->cu->cuEventRecord(en->ev[s], en->stream), "cuEventRecord", e))
            return false;
        if (en->skip[s])
            continue;
        StepKind kind = p->step[s].kind;
        bool ok = kind == STEP_KERNEL      ? cuda_launch(en, p->step[s].kernel, s, sb, e)
                  : kind == STEP_ATTENTION ? launch_attention(en, s, sb, e)
                                           : cuda_run_gemm(en, s, sb, e);
        if (!ok)
            return false;
    }
    return !en->ev || cu_ok(en->cu->cuEventRecord(en->ev[p->nstep], en->stream), "cuEventRecord", e);
}

/* The steps as a graph: captured from the stream (not run), instantiated, kept. */
static bool capture(CudaEngine *en, const SymBind *sb, Err *e)
{
    const CudaDriver *cu = en->cu;
    CUgraph graph = NULL;
    if (!cu_ok(cu->cuStreamBeginCapture(en->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture", e))
        return false;
    bool ran = run_steps(en, sb, e);
    CUresult r = cu->cuStreamEndCapture(en->stream, &graph);
    bool ok = ran && cu_ok(r, "cuStreamEndCapture", e) &&
              cu_ok(cu->cuGraphInstantiateWithFlags(&en->exec, graph, 0),
                    "cuGraphInstantiateWithFlags", e);
    if (graph)
        cu->cuGraphDestroy(graph);
    en->stats.graph_captures += ok;
    return ok;
}

/* Plain: the steps on the stream. Graphs: the first run at new sizes runs plainly (it
 * warms cuBLAS and the module's lazily loaded kernels, which capture must not do), the
 * second captures, every run launches the graph. */
bool cuda_run_all(CudaEngine *en, const SymBind *sb, Err *e)
{
    if (!en->o.graphs || en->ev || !en->warm)
        return run_steps(en, sb, e);
    if (!en->exec && !capture(en, sb, e))
        return false;
    en->stats.graph_replays++;
    return cu_ok(en->cu->cuGraphLaunch(en->exec, en->stream), "cuGraphLaunch", e);
}

/* Kernel k's variants module: compiled (through the cubin cache) and loaded at first use. */
static bool load_variants(CudaEngine *en, int k, Err *e)
{
    if (en->vmod[k])
        return true;
    char name[256];
    snprintf(name, sizeof name, "%s.%s.variants.cu", en->p->graph->name ? en->p->graph->name : "coil",
             en->p->kernel[k].name);
    CudaCompileOptions co = {.arch = en->info.arch, .cache_dir = en->o.cache_dir,
                             .full_opt = en->o.full_opt};
    Cubin cubin = {0};
    char *src = cuda_variants_source(en->p, k, e);
    bool ok = src && nvrtc_compile(src, name, &co, &cubin, e) &&
              cu_ok(en->cu->cuModuleLoadData(&en->vmod[k], cubin.data), "cuModuleLoadData (variants)", e);
    en->stats.nvrtc_s += cubin.seconds;
    free(src);
    cubin_free(&cubin);
    return ok;
}

/* Kernel k's variant for configuration c: loaded (its module compiled at first use), into *f. */
static bool variant_function(CudaEngine *en, int k, const CudaKernelConfig *c, CUfunction *f,
                             Err *e)
{
    char name[160], what[200];
    cuda_variant_name(&en->p->kernel[k], c, name, sizeof name);
    snprintf(what, sizeof what, "cuModuleGetFunction(%s)", name);
    return load_variants(en, k, e) &&
           cu_ok(en->cu->cuModuleGetFunction(f, en->vmod[k], name), what, e);
}

/* The configuration is stored only once its variant has loaded: a failed build leaves the
 * step as it was, never the default kernel launched with a variant's block size. */
bool cuda_engine_configure(CudaEngine *en, int s, const CudaStepConfig *c, Err *e)
{
    static const CudaStepConfig heuristics = {0};
    const CudaStepConfig want = c ? *c : heuristics;
    const Step *st = &en->p->step[s];
    CUfunction variant = NULL;
    if (!make_current(en, e))
        return false;
    if (st->kind == STEP_KERNEL && !cuda_variant_is_default(&want.kernel) &&
        !variant_function(en, st->kernel, &want.kernel, &variant, e))
        return false;
    if (en->exec) /* the captured graph launches the old choices */
        en->cu->cuGraphExecDestroy(en->exec);
    en->exec = NULL;
    en->cfg[s] = want;
    if (st->kind == STEP_KERNEL)
        en->vfn[st->kernel] = variant;
    if (st->kind == STEP_GEMM && en->planned && want.path == CUDA_GEMM_LT)
        cuda_prepare_plain(en, s);
    return true;
}

const CudaStepConfig *cuda_engine_config(const CudaEngine *en, int s) { return &en->cfg[s]; }

int cuda_engine_lt_algos(CudaEngine *en, int s, bool plain)
{
    Err e = {0};
    if (!en->planned || en->p->step[s].kind != STEP_GEMM || !cuda_lt_eligible(en, s) ||
        !make_current(en, &e))
        return 0;
    if (plain)
        cuda_prepare_plain(en, s);
    const LtStep *L = plain ? &en->ltp[s] : &en->lts[s];
    return L->on ? L->nalgo : 0;
}

bool cuda_engine_run_step(CudaEngine *en, int s, Err *e)
{
    const SymBind *sb = &en->plan_sb;
    StepKind kind = en->p->step[s].kind;
    if (!en->planned) {
        err_set(e, ERR_USAGE, "cuda engine: run it once before running one step");
        return false;
    }
    if (!make_current(en, e))
        return false;
    return kind == STEP_KERNEL      ? cuda_launch(en, en->p->step[s].kernel, s, sb, e)
           : kind == STEP_ATTENTION ? launch_attention(en, s, sb, e)
                                    : cuda_run_gemm(en, s, sb, e);
}
