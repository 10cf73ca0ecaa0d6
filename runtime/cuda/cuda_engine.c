/* cuda_engine.c — runs a Program on an NVIDIA GPU through the Driver API: the primary
 * context, one stream, the kernels' module compiled by NVRTC for the device, GEMM steps on
 * cuBLAS (cuBLASLt when it can compute the epilogue too), and device memory in two blocks:
 * parameters and constants (uploaded once, and again only when they change) and the
 * activations (inputs, outputs, the memory plan's temporaries, packed GEMM operands and the
 * kernels' bufs and syms tables), both kept while the symbol values repeat. Host tensors
 * cross through pinned staging with async copies; every step is stream-ordered and the run
 * ends with one synchronisation. With graphs on, a run at sizes already seen once is
 * captured as a CUDA graph and later runs at those sizes replay it. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "codegen/cuda/cuda.h"
#include "codegen/index_bounds.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_mapping.h"

#define DEV_ALIGN PLAN_ALIGN_GPU /* cuMemAlloc's, kept for every buffer and temporary */
#define WORKSPACE_BYTES (32ll << 20)   /* cuBLAS/cuBLASLt workspace: NVIDIA's advice for Hopper */

/* The epilogues handed to cuBLASLt (0: not handed; the kernel runs after a cuBLAS GEMM).
 * gelu's erf form is not: cuBLASLt has one GELU, believed to be the tanh approximation
 * (test_cuda_run's gelu_tanh case checks it on a GPU; if it fails, this row moves). */
static const cublasLtEpilogue_t lt_epilogue[CU_EPI_COUNT] = {
    [CU_EPI_BIAS] = CUBLASLT_EPILOGUE_BIAS,
    [CU_EPI_RELU_BIAS] = CUBLASLT_EPILOGUE_RELU_BIAS,
    [CU_EPI_GELU_TANH_BIAS] = CUBLASLT_EPILOGUE_GELU_BIAS,
};

static const cudaDataType cuda_dtype[DT_COUNT] = {
    [DT_F32] = CUDA_R_32F, [DT_F16] = CUDA_R_16F, [DT_BF16] = CUDA_R_16BF};

/* A GEMM step's cuBLASLt call, prepared when the sizes are known: the heuristic's first
 * algorithms for it, the first the default, the others the autotuner's candidates. */
#define LT_TOPK 8
typedef struct LtStep {
    bool on;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    int nalgo;
    cublasLtMatmulAlgo_t algo[LT_TOPK];
    size_t workspace[LT_TOPK];
    int out; /* the epilogue's output buffer (its C without one): cuBLASLt's D */
} LtStep;

struct CudaEngine {
    const Program *p;
    CudaEngineOptions o;
    const CudaDriver *cu;
    const CudaCublas *bl;
    const CudaCublasLt *lt;  /* NULL: every epilogue as a kernel */
    CudaDeviceInfo info;
    CUcontext ctx;           /* the device's primary context (the process keeps it) */
    CUstream stream;
    CUmodule mod;
    CUfunction *fn, pack;
    CUfunction *attn_fn; /* by step: an attention step's own kernel */
    cublasHandle_t blas;
    cublasLtHandle_t blt;
    CUdeviceptr workspace;
    int nparam;
    /* parameters and constants */
    CUdeviceptr pblock;
    int64_t pblock_bytes;
    const void **param_src;  /* per buffer: the host data last uploaded */
    bool params_dirty;
    /* the plan at the current symbol values */
    MemoryPlan plan;
    SymBind plan_sb;
    bool planned;
    CUdeviceptr dblock, scratch, bufs_dev, syms_dev;
    int64_t dblock_bytes;
    int64_t *off;            /* per buffer: byte offset in its block (and in the staging) */
    CUdeviceptr *addr;       /* per buffer: device address (the bufs table) */
    long long syms[COIL_SYM_SLOTS]; /* as on the device: the symbols, the rng step */
    uint64_t rng_step;       /* the next run's (cuda_engine_set_rng_step) */
    char *staging;           /* pinned: inputs and outputs at their io offsets */
    int64_t staging_bytes;
    CuGemm *gemm;            /* per step */
    LtStep *lts;             /* per step: cuBLASLt with the epilogue */
    LtStep *ltp;             /* per step: cuBLASLt plain, the epilogue a kernel (tuning) */
    CudaStepConfig *cfg;     /* per step: what the autotuner chose (zeros: the heuristics) */
    int *range_buf;          /* per step: a range step's [min, max] buffer, else -1 */
    bool *skip;              /* per step: a range step proven unneeded at the planned sizes */
    CUmodule *vmod;          /* per kernel: its variants' module, loaded when first used */
    CUfunction *vfn;         /* per kernel: the configured variant (NULL: fn[k]) */
    bool warm;               /* a run at these sizes has completed (graphs capture after) */
    CUgraphExec exec;
    CUevent *ev;
    double *step_s;
    CudaEngineStats stats;
};

/* ---------------------------------------------------------------- checked calls */

static bool cu_ok(CUresult r, const char *what, Err *e)
{
    char buf[400];
    if (r != CUDA_SUCCESS)
        err_set(e, ERR_INPUT, "cuda: %s failed: %s", what, cuda_describe(r, buf, sizeof buf));
    return r == CUDA_SUCCESS;
}

/* Every entry point makes the engine's context current on the calling thread first: a
 * thread that has none current (or another device's) would otherwise fail or run there. */
static bool make_current(const CudaEngine *en, Err *e)
{
    return cu_ok(en->cu->cuCtxSetCurrent(en->ctx), "cuCtxSetCurrent", e);
}

static bool blas_ok(cublasStatus_t s, const char *what, Err *e)
{
    if (s != CUBLAS_STATUS_SUCCESS)
        err_set(e, ERR_INPUT, "cuda: %s failed: %s", what, cuda_blas_status_name(s));
    return s == CUBLAS_STATUS_SUCCESS;
}

static int64_t round_up(int64_t n) { return (n + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN; }

static void *dptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

static int64_t buf_bytes(const Program *p, int b, const SymBind *sb)
{
    return dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

/* cuMemAlloc, saying how much was asked and how much the device has when it cannot. */
static bool dev_alloc(CudaEngine *en, CUdeviceptr *p, int64_t bytes, const char *what, Err *e)
{
    CUresult r = en->cu->cuMemAlloc(p, (size_t)(bytes > 0 ? bytes : DEV_ALIGN));
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total_b = 0;
        en->cu->cuMemGetInfo(&free_b, &total_b);
        err_set(e, ERR_INPUT, "out of GPU memory: the plan needs %.1f MiB (%s), %.1f MiB free "
                "of %.1f MiB", (double)bytes / 1048576, what, (double)free_b / 1048576,
                (double)total_b / 1048576);
        *p = 0;
        return false;
    }
    if (r != CUDA_SUCCESS)
        *p = 0;
    return cu_ok(r, "cuMemAlloc", e);
}

static void dev_free(CudaEngine *en, CUdeviceptr *p)
{
    if (*p)
        en->cu->cuMemFree(*p);
    *p = 0;
}

/* ---------------------------------------------------------------- set-up */

/* Every index the program holds must name something of its graph (engine.c checks the
 * same for the CPU). */
static bool check_program(const Program *p, int nparam, Err *e)
{
    const Graph *g = p->graph;
    int count[] = {[BUF_INPUT] = g->ninput, [BUF_PARAM] = nparam, [BUF_OUTPUT] = g->noutput};
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind <= BUF_OUTPUT && (buf->index < 0 || buf->index >= count[buf->kind])) {
            err_set(e, ERR_INPUT, "program buffer '%s': index %d is out of range", buf->name,
                    buf->index);
            return false;
        }
        if (buf->kind == BUF_CONST && (!dim_is_static(buf->numel) ||
                                       (buf->numel.k > 0 && !buf->data))) {
            err_set(e, ERR_INPUT, "constant '%s' has no static elements", buf->name);
            return false;
        }
    }
    for (int s = 0; s < p->nstep; s++) {
        const Step *st = &p->step[s];
        if (st->kind == STEP_ATTENTION)
            continue; /* its kernel is the step's own: coil_attention_<s> */
        int k = st->kind == STEP_KERNEL ? st->kernel : st->gemm.epilogue;
        if (k < (st->kind == STEP_KERNEL ? 0 : -1) || k >= p->nkernel) {
            err_set(e, ERR_INPUT, "program step %d: kernel %d is out of range", s, k);
            return false;
        }
    }
    return true;
}

static bool alloc_tables(CudaEngine *en, Err *e)
{
    const Program *p = en->p;
    size_t nbuf = (size_t)p->nbuf + 1, nstep = (size_t)p->nstep + 1;
    en->fn = calloc((size_t)p->nkernel + 1, sizeof *en->fn);
    en->attn_fn = calloc(nstep, sizeof *en->attn_fn);
    en->param_src = calloc(nbuf, sizeof *en->param_src);
    en->off = calloc(nbuf, sizeof *en->off);
    en->addr = calloc(nbuf, sizeof *en->addr);
    en->gemm = calloc(nstep, sizeof *en->gemm);
    en->lts = calloc(nstep, sizeof *en->lts);
    en->ltp = calloc(nstep, sizeof *en->ltp);
    en->cfg = calloc(nstep, sizeof *en->cfg);
    en->vmod = calloc((size_t)p->nkernel + 1, sizeof *en->vmod);
    en->vfn = calloc((size_t)p->nkernel + 1, sizeof *en->vfn);
    en->range_buf = calloc(nstep, sizeof *en->range_buf);
    en->skip = calloc(nstep, sizeof *en->skip);
    for (int s = 0; en->range_buf && s < p->nstep; s++)
        en->range_buf[s] = range_step_buffer(p, s);
    if (en->o.profile) {
        en->ev = calloc(nstep, sizeof *en->ev);
        en->step_s = calloc(nstep, sizeof *en->step_s);
    }
    if (!en->fn || !en->attn_fn || !en->param_src || !en->off || !en->addr || !en->gemm || !en->lts ||
        !en->ltp || !en->cfg || !en->vmod || !en->vfn || !en->range_buf || !en->skip ||
        (en->o.profile && (!en->ev || !en->step_s))) {
        err_set(e, ERR_INPUT, "out of memory creating a CUDA engine for %d buffers", p->nbuf);
        return false;
    }
    return true;
}

/* The package's cubin, when it was built for this device's architecture. */
static bool package_cubin(const CudaEngine *en, Cubin *cubin, Err *e)
{
    const char *arch = en->o.cubin_arch ? en->o.cubin_arch : "?";
    if (strcmp(arch, en->info.arch) == 0)
        return cubin_read(en->o.cubin, cubin, e);
    err_set(e, ERR_INPUT, "%s: compiled for %s, but %s is %s: compile the model again with "
            "--arch %s", en->o.cubin, arch, en->info.name, en->info.arch, en->info.arch);
    return false;
}

/* The program's kernels and the helpers for this device: NVRTC through its cache, or a
 * package's cubin. */
static bool compile_kernels(CudaEngine *en, Cubin *cubin, Err *e)
{
    if (en->o.cubin)
        return package_cubin(en, cubin, e);
    const Program *p = en->p;
    char name[256];
    snprintf(name, sizeof name, "%s.cu", p->graph->name ? p->graph->name : "coil");
    CudaCompileOptions co = {.arch = en->info.arch, .cache_dir = en->o.cache_dir,
                             .full_opt = en->o.full_opt};
    char *src = cuda_engine_source(p, e);
    bool ok = src && nvrtc_compile(src, name, &co, cubin, e);
    free(src);
    return ok;
}

static bool load_module(CudaEngine *en, Err *e)
{
    const Program *p = en->p;
    char name[256];
    Cubin cubin = {0};
    bool ok = compile_kernels(en, &cubin, e) &&
              cu_ok(en->cu->cuModuleLoadData(&en->mod, cubin.data), "cuModuleLoadData", e);
    en->stats.nvrtc_s = cubin.seconds;
    en->stats.cubin_cached = cubin.cached;
    cubin_free(&cubin);
    for (int k = 0; ok && k < p->nkernel; k++) {
        snprintf(name, sizeof name, "cuModuleGetFunction(%s)", p->kernel[k].name);
        ok = cu_ok(en->cu->cuModuleGetFunction(&en->fn[k], en->mod, p->kernel[k].name), name, e);
    }
    for (int s = 0; ok && s < p->nstep; s++) {
        if (p->step[s].kind != STEP_ATTENTION)
            continue;
        char fn[64];
        snprintf(fn, sizeof fn, "coil_attention_%d", s);
        snprintf(name, sizeof name, "cuModuleGetFunction(%s)", fn);
        ok = cu_ok(en->cu->cuModuleGetFunction(&en->attn_fn[s], en->mod, fn), name, e);
    }
    return ok && cu_ok(en->cu->cuModuleGetFunction(&en->pack, en->mod, "coil_pack"),
                       "cuModuleGetFunction(coil_pack)", e);
}

/* Context, stream, cuBLAS (and cuBLASLt) on that stream with one workspace, events. */
static bool open_device(CudaEngine *en, Err *e)
{
    const CudaDriver *cu = en->cu;
    if (!cuda_primary_context(en->o.device, &en->ctx, e))
        return false;
    bool ok = cu_ok(cu->cuCtxSetCurrent(en->ctx), "cuCtxSetCurrent", e) &&
         cu_ok(cu->cuStreamCreate(&en->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", e) &&
         dev_alloc(en, &en->workspace, WORKSPACE_BYTES, "cuBLAS workspace", e) &&
         blas_ok(en->bl->cublasCreate(&en->blas), "cublasCreate", e) &&
         blas_ok(en->bl->cublasSetStream(en->blas, en->stream), "cublasSetStream", e) &&
         blas_ok(en->bl->cublasSetWorkspace(en->blas, dptr(en->workspace), WORKSPACE_BYTES),
                 "cublasSetWorkspace", e);
    if (ok && en->lt && en->lt->cublasLtCreate(&en->blt) != CUBLAS_STATUS_SUCCESS)
        en->lt = NULL; /* cuBLASLt is an optimisation: without it, epilogues are kernels */
    for (int s = 0; ok && en->ev && s <= en->p->nstep; s++)
        ok = cu_ok(cu->cuEventCreate(&en->ev[s], CU_EVENT_DEFAULT), "cuEventCreate", e);
    return ok;
}

CudaEngine *cuda_engine_new(const Program *p, const CudaEngineOptions *o, Err *e)
{
    static const CudaEngineOptions defaults = {0};
    const char *why;
    const CudaDriver *cu = cuda_driver(&why);
    const CudaCublas *bl = cu ? cuda_cublas(&why) : NULL;
    if (!cu || !bl) {
        err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
        return NULL;
    }
    if (!p->graph) {
        err_set(e, ERR_INPUT, "cuda engine: the program has no graph to take its signature from");
        return NULL;
    }
    CudaEngine *en = calloc(1, sizeof *en);
    if (!en) {
        err_set(e, ERR_INPUT, "out of memory creating a CUDA engine");
        return NULL;
    }
    *en = (CudaEngine){.p = p, .o = o ? *o : defaults, .cu = cu, .bl = bl, .params_dirty = true};
    en->lt = en->o.no_lt ? NULL : cuda_cublaslt(NULL);
    en->nparam = graph_params(p->graph, NULL);
    bool ok = check_program(p, en->nparam, e) && alloc_tables(en, e) &&
              cuda_device_query(en->o.device, &en->info, e) && open_device(en, e) &&
              load_module(en, e);
    if (!ok) {
        cuda_engine_free(en);
        return NULL;
    }
    return en;
}

/* ---------------------------------------------------------------- freeing */

static void lt_drop(CudaEngine *en, LtStep *L)
{
    const CudaCublasLt *lt = en->lt;
    if (L->lc)
        lt->cublasLtMatrixLayoutDestroy(L->lc);
    if (L->lb)
        lt->cublasLtMatrixLayoutDestroy(L->lb);
    if (L->la)
        lt->cublasLtMatrixLayoutDestroy(L->la);
    if (L->desc)
        lt->cublasLtMatmulDescDestroy(L->desc);
    memset(L, 0, sizeof *L);
}

/* What depends on the symbol values: the captured graph, cuBLASLt's plans, the plan. */
static void drop_plan(CudaEngine *en)
{
    if (en->exec)
        en->cu->cuGraphExecDestroy(en->exec);
    en->exec = NULL;
    for (int s = 0; en->lts && s < en->p->nstep; s++)
        lt_drop(en, &en->lts[s]), lt_drop(en, &en->ltp[s]);
    plan_free(&en->plan);
    en->planned = en->warm = false;
}

void cuda_engine_free(CudaEngine *en)
{
    if (!en)
        return;
    const CudaDriver *cu = en->cu;
    if (en->ctx) {
        cu->cuCtxSetCurrent(en->ctx);
        if (en->stream)
            cu->cuStreamSynchronize(en->stream);
        drop_plan(en);
        for (int s = 0; en->ev && s <= en->p->nstep; s++)
            if (en->ev[s])
                cu->cuEventDestroy(en->ev[s]);
        if (en->blt)
            en->lt->cublasLtDestroy(en->blt);
        if (en->blas)
            en->bl->cublasDestroy(en->blas);
        dev_free(en, &en->dblock);
        dev_free(en, &en->pblock);
        dev_free(en, &en->workspace);
        if (en->staging)
            cu->cuMemFreeHost(en->staging);
        if (en->mod)
            cu->cuModuleUnload(en->mod);
        for (int k = 0; en->vmod && k < en->p->nkernel; k++)
            if (en->vmod[k])
                cu->cuModuleUnload(en->vmod[k]);
        if (en->stream)
            cu->cuStreamDestroy(en->stream);
    }
    free(en->fn);
    free(en->attn_fn);
    free(en->param_src);
    free(en->off);
    free(en->addr);
    free(en->gemm);
    free(en->lts);
    free(en->ltp);
    free(en->cfg);
    free(en->vmod);
    free(en->vfn);
    free(en->range_buf);
    free(en->skip);
    free(en->ev);
    free(en->step_s);
    free(en);
}

void cuda_engine_params_changed(CudaEngine *en) { en->params_dirty = true; }

void cuda_engine_set_rng_step(CudaEngine *en, uint64_t step) { en->rng_step = step; }

const MemoryPlan *cuda_engine_plan(const CudaEngine *en) { return en->planned ? &en->plan : NULL; }

const CudaDeviceInfo *cuda_engine_device(const CudaEngine *en) { return &en->info; }

CudaEngineStats cuda_engine_stats(const CudaEngine *en)
{
    CudaEngineStats s = en->stats;
    s.device_bytes = en->pblock_bytes + en->dblock_bytes + (en->workspace ? WORKSPACE_BYTES : 0);
    return s;
}

const double *cuda_engine_step_seconds(const CudaEngine *en) { return en->step_s; }

/* ---------------------------------------------------------------- memory */

/* Parameters and constants in their own block: sized once (again only if a parameter's
 * size follows a symbol), constants uploaded with it. */
static bool place_params(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    int64_t at = 0;
    for (int b = 0; b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_PARAM || p->buf[b].kind == BUF_CONST) {
            en->off[b] = at;
            at += round_up(buf_bytes(p, b, sb));
        }
    if (en->pblock && at == en->pblock_bytes)
        return true;
    dev_free(en, &en->pblock);
    en->pblock_bytes = 0;
    if (!dev_alloc(en, &en->pblock, at, "parameters and constants", e))
        return false;
    en->pblock_bytes = at;
    en->params_dirty = true;
    bool ok = true;
    for (int b = 0; ok && b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind != BUF_CONST || buf->numel.k == 0)
            continue;
        void *host = malloc((size_t)buf_bytes(p, b, sb));
        if (!host) {
            err_set(e, ERR_INPUT, "out of memory for constant '%s'", buf->name);
            return false;
        }
        for (int64_t i = 0; i < buf->numel.k; i++)
            dtype_store(buf->dt, host, i, buf->data[i]);
        ok = cu_ok(en->cu->cuMemcpyHtoDAsync(en->pblock + (CUdeviceptr)en->off[b], host,
                                             (size_t)buf_bytes(p, b, sb), en->stream),
                   "cuMemcpyHtoDAsync (a constant)", e) &&
             cu_ok(en->cu->cuStreamSynchronize(en->stream), "cuStreamSynchronize", e);
        free(host);
    }
    return ok;
}

/* The activation block: inputs and outputs (at the same offsets as in the staging), the
 * plan's arena, the GEMMs' scratch, the bufs and syms tables. */
static int64_t layout_activations(CudaEngine *en, const SymBind *sb, int64_t *io,
                                  int64_t *arena_at, int64_t *scratch_at, int64_t *tables_at)
{
    const Program *p = en->p;
    int64_t at = 0, scratch = 0;
    for (int b = 0; b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_INPUT || p->buf[b].kind == BUF_OUTPUT) {
            en->off[b] = at;
            at += round_up(buf_bytes(p, b, sb));
        }
    *io = at;
    *arena_at = at;
    at += round_up(en->plan.arena_bytes);
    for (int s = 0; s < p->nstep; s++)
        if (p->step[s].kind == STEP_GEMM && en->gemm[s].scratch_bytes > scratch)
            scratch = en->gemm[s].scratch_bytes;
    *scratch_at = at;
    at += round_up(scratch);
    *tables_at = at;
    return at + round_up((int64_t)p->nbuf * 8) + COIL_SYM_SLOTS * 8;
}

static bool place_activations(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    int64_t io, arena_at, scratch_at, tables_at;
    int64_t need = layout_activations(en, sb, &io, &arena_at, &scratch_at, &tables_at);
    if (!en->dblock || need > en->dblock_bytes) {
        dev_free(en, &en->dblock);
        en->dblock_bytes = 0;
        if (!dev_alloc(en, &en->dblock, need, "activations", e))
            return false;
        en->dblock_bytes = need;
    }
    if (!en->staging || io > en->staging_bytes) {
        if (en->staging)
            en->cu->cuMemFreeHost(en->staging);
        en->staging = NULL;
        en->staging_bytes = 0;
        void *h = NULL;
        if (!cu_ok(en->cu->cuMemHostAlloc(&h, (size_t)(io > 0 ? io : DEV_ALIGN), 0),
                   "cuMemHostAlloc (pinned staging)", e))
            return false;
        en->staging = h;
        en->staging_bytes = io;
    }
    for (int b = 0; b < p->nbuf; b++) {
        BufKind k = p->buf[b].kind;
        if (k == BUF_TEMP)
            en->off[b] = arena_at + en->plan.offset[b];
        en->addr[b] = (k == BUF_PARAM || k == BUF_CONST ? en->pblock : en->dblock) +
                      (CUdeviceptr)en->off[b];
    }
    en->scratch = en->dblock + (CUdeviceptr)scratch_at;
    en->bufs_dev = en->dblock + (CUdeviceptr)tables_at;
    en->syms_dev = en->bufs_dev + (CUdeviceptr)round_up((int64_t)p->nbuf * 8);
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        en->syms[s] = sb->known[s] ? sb->val[s] : 0;
    return cu_ok(en->cu->cuMemcpyHtoDAsync(en->bufs_dev, en->addr, (size_t)p->nbuf * 8,
                                           en->stream), "cuMemcpyHtoDAsync (the bufs table)", e) &&
           cu_ok(en->cu->cuMemcpyHtoDAsync(en->syms_dev, en->syms, sizeof en->syms, en->stream),
                 "cuMemcpyHtoDAsync (the syms table)", e);
}

/* ---------------------------------------------------------------- cuBLASLt */

static cublasComputeType_t compute_type(const CudaEngine *en, const CuGemm *cg)
{
    return cg->ab_dt == DT_F32 && en->o.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F;
}

/* Where cuBLAS reads an operand: its buffer, or its packed copy in the scratch. */
static CUdeviceptr operand_addr(const CudaEngine *en, const CuOperand *o, const CuPack *pk,
                                DType dt)
{
    CUdeviceptr base = o->buf >= 0 ? en->addr[o->buf] : en->scratch + (CUdeviceptr)pk->scratch;
    return base + (CUdeviceptr)(o->offset * dtype_info[dt].size);
}

/* The largest power of two (up to 256) dividing an address: cuBLASLt picks algorithms by it. */
static uint32_t alignment(CUdeviceptr a)
{
    uint32_t n = 256;
    while (n > 1 && a % n)
        n /= 2;
    return n;
}

static bool lt_call(cublasStatus_t st, const char *what, char *why, size_t n)
{
    if (st != CUBLAS_STATUS_SUCCESS && !*why)
        snprintf(why, n, "%s: %s", what, cuda_blas_status_name(st));
    return st == CUBLAS_STATUS_SUCCESS;
}

/* The matmul descriptor: transposes, epilogue, bias (f.kind CU_EPI_NONE: plain). */
static bool lt_desc(CudaEngine *en, const CuGemm *cg, CuFusion f, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cublasOperation_t ta = cg->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = cg->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = f.kind ? lt_epilogue[f.kind] : CUBLASLT_EPILOGUE_DEFAULT;
    void *bias = f.kind ? dptr(en->addr[f.bias]) : NULL;
    bool plain = !f.kind;
    return lt_call(lt->cublasLtMatmulDescCreate(&L->desc, compute_type(en, cg), CUDA_R_32F),
                   "cublasLtMatmulDescCreate", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                      sizeof ta), "TRANSA", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                      sizeof tb), "TRANSB", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                      sizeof epi), "EPILOGUE", why, n) &&
           (plain || lt_call(lt->cublasLtMatmulDescSetAttribute(
                                 L->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                             "BIAS_POINTER", why, n));
}

/* Layouts of the stored matrices (before the transposes): A is m x k (k x m transposed),
 * B k x n (n x k), C and D m x n. */
static bool lt_layouts(CudaEngine *en, const CuGemm *cg, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cudaDataType ab = cuda_dtype[cg->ab_dt], c = cuda_dtype[cg->c_dt];
    return lt_call(lt->cublasLtMatrixLayoutCreate(&L->la, ab, cg->a.trans ? cg->k : cg->m,
                                                  cg->a.trans ? cg->m : cg->k, cg->a.ld),
                   "cublasLtMatrixLayoutCreate(A)", why, n) &&
           lt_call(lt->cublasLtMatrixLayoutCreate(&L->lb, ab, cg->b.trans ? cg->n : cg->k,
                                                  cg->b.trans ? cg->k : cg->n, cg->b.ld),
                   "cublasLtMatrixLayoutCreate(B)", why, n) &&
           lt_call(lt->cublasLtMatrixLayoutCreate(&L->lc, c, cg->m, cg->n, cg->c.ld),
                   "cublasLtMatrixLayoutCreate(C)", why, n);
}

/* The heuristic's first LT_TOPK algorithms for these operands' alignments within the
 * workspace (the default runs the first). */
static bool lt_algo(CudaEngine *en, const CuGemm *cg, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = WORKSPACE_BYTES;
    uint32_t al[4] = {alignment(operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt)),
                      alignment(operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt)),
                      alignment(en->addr[L->out]), alignment(en->addr[L->out])};
    static const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    bool ok = lt_call(lt->cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate",
                      why, n) &&
              lt_call(lt->cublasLtMatmulPreferenceSetAttribute(
                          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                      "MAX_WORKSPACE_BYTES", why, n);
    for (int i = 0; ok && i < 4; i++)
        ok = lt_call(lt->cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &al[i],
                                                              sizeof al[i]),
                     "MIN_ALIGNMENT", why, n);
    cublasLtMatmulHeuristicResult_t h[LT_TOPK];
    int got = 0;
    ok = ok && lt_call(lt->cublasLtMatmulAlgoGetHeuristic(en->blt, L->desc, L->la, L->lb, L->lc,
                                                          L->lc, pref, LT_TOPK, h, &got),
                       "cublasLtMatmulAlgoGetHeuristic", why, n);
    if (ok && got == 0)
        snprintf(why, n, "cublasLtMatmulAlgoGetHeuristic: no algorithm");
    if (pref)
        lt->cublasLtMatmulPreferenceDestroy(pref);
    if (!ok || got == 0)
        return false;
    for (int i = 0; i < got; i++)
        L->algo[i] = h[i].algo, L->workspace[i] = h[i].workspaceSize;
    L->nalgo = got;
    return true;
}

/* Whether cuBLASLt can take GEMM step s at all: one matrix product (no batches), K > 0. */
static bool lt_eligible(const CudaEngine *en, int s)
{
    const CuGemm *cg = &en->gemm[s];
    return en->lt && cg->batch == 1 && !cg->nouter && !cg->zero && !cg->empty;
}

/* L prepared for step s with fusion f (CU_EPI_NONE: plain, D = C); false with why. */
static bool lt_prepare(CudaEngine *en, int s, CuFusion f, LtStep *L, char *why, size_t n)
{
    const CuGemm *cg = &en->gemm[s];
    L->out = f.kind ? f.out : en->p->step[s].gemm.c.buf;
    L->on = lt_desc(en, cg, f, L, why, n) && lt_layouts(en, cg, L, why, n) &&
            lt_algo(en, cg, L, why, n);
    if (!L->on)
        lt_drop(en, L);
    return L->on;
}

/* COIL_LOG=info: where step s's epilogue runs and why. declined: NULL when cuBLASLt was
 * not asked (no match, not eligible), "" when it took the GEMM, else its reason. */
static void log_lt(const CudaEngine *en, int s, CuFusion f, const char *declined)
{
    const Gemm *g = &en->p->step[s].gemm;
    const CuGemm *cg = &en->gemm[s];
    const char *epi = g->epilogue >= 0 ? en->p->kernel[g->epilogue].name : NULL;
    if (declined && !*declined) {
        coil_log(LOG_INFO, "cuda step %d: GEMM and epilogue %s on cuBLASLt (%s)", s,
                 epi ? epi : "-", cuda_epilogue_name[f.kind]);
        return;
    }
    const char *why = declined ? declined
                      : !en->lt ? (en->o.no_lt ? "cuBLASLt is off" : "no cuBLASLt library")
                      : cg->batch != 1 || cg->nouter ? "a batched GEMM"
                      : cg->zero ? "K is 0" : cg->empty ? "C is empty"
                      : f.kind == CU_EPI_NONE ? (epi ? "no cuBLASLt form (COIL_LOG=debug says "
                                                       "why)" : "no epilogue")
                      : "cuBLASLt has no such epilogue";
    coil_log(LOG_INFO, "cuda step %d: GEMM on cuBLAS%s%s: %s%s", s, epi ? ", epilogue kernel " : "",
             epi ? epi : "", declined ? "cuBLASLt declined: " : "", why);
}

/* cuBLASLt for step s when its epilogue matches and cuBLASLt takes it; otherwise (no
 * match, batches, K = 0, or cuBLASLt declines: stats.note says why) cuBLAS and the
 * epilogue kernel. */
static void prepare_lt(CudaEngine *en, int s)
{
    const Gemm *g = &en->p->step[s].gemm;
    CuFusion f = cuda_match_epilogue(en->p, g);
    if (!lt_eligible(en, s) || !lt_epilogue[f.kind]) {
        log_lt(en, s, f, NULL);
        return;
    }
    char why[200] = "";
    bool on = lt_prepare(en, s, f, &en->lts[s], why, sizeof why);
    if (!on)
        snprintf(en->stats.note, sizeof en->stats.note, "step %d: cuBLASLt declined %s: %s", s,
                 cuda_epilogue_name[f.kind], why);
    log_lt(en, s, f, on ? "" : why);
}

/* The plain cuBLASLt call of step s (its epilogue a kernel), for a tuned choice. */
static void prepare_plain(CudaEngine *en, int s)
{
    char why[200] = "";
    if (lt_eligible(en, s) && !en->ltp[s].on)
        lt_prepare(en, s, (CuFusion){CU_EPI_NONE, -1, -1}, &en->ltp[s], why, sizeof why);
}

/* ---------------------------------------------------------------- the plan */

static bool map_gemms(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    for (int s = 0; s < p->nstep; s++) {
        Err why = {0};
        if (p->step[s].kind == STEP_GEMM && !cuda_gemm_map(p, &p->step[s].gemm, sb, &en->gemm[s],
                                                           &why)) {
            err_set(e, ERR_INPUT, "step %d: %s", s, why.msg);
            return false;
        }
    }
    return true;
}

/* The plan, memory and cuBLASLt calls for these symbol values (kept while they repeat),
 * after the indices are checked at them (codegen/index_bounds.h: an index proven out of
 * range is an error before anything runs, range steps proven unneeded are skipped). */
static bool ensure_plan(CudaEngine *en, const SymBind *sb, Err *e)
{
    if (en->planned && sym_same_sizes(&en->plan_sb, sb))
        return true;
    drop_plan(en);
    if (!index_bounds_before(en->p, sb, en->skip, e))
        return false;
    if (!plan_memory_aligned(en->p, sb, DEV_ALIGN, &en->plan, e) || !map_gemms(en, sb, e) ||
        !place_params(en, sb, e) || !place_activations(en, sb, e)) {
        plan_free(&en->plan);
        return false;
    }
    for (int s = 0; s < en->p->nstep; s++)
        if (en->p->step[s].kind == STEP_GEMM) {
            prepare_lt(en, s);
            if (en->cfg[s].path == CUDA_GEMM_LT)
                prepare_plain(en, s);
        }
    en->plan_sb = *sb;
    en->planned = true;
    return true;
}

/* ---------------------------------------------------------------- steps */

/* The configuration of kernel k: its step's (a GEMM's epilogue keeps the heuristics). */
static const CudaKernelConfig *kernel_config(const CudaEngine *en, int k, int s)
{
    return en->p->step[s].kind == STEP_KERNEL && en->p->step[s].kernel == k ? &en->cfg[s].kernel
                                                                            : NULL;
}

static bool launch(CudaEngine *en, int k, int s, const SymBind *sb, Err *e)
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

static bool launch_attention(CudaEngine *en, int s, const SymBind *sb, Err *e)
{
    CudaGrid G;
    if (!cuda_attention_dims(&en->p->step[s].attn, sb, &G, e))
        return false;
    if (G.x == 0 || G.y == 0)
        return true;
    void *args[] = {&en->bufs_dev, &en->syms_dev};
    en->stats.launches++;
    CUresult r = en->cu->cuLaunchKernel(en->attn_fn[s], (unsigned)G.x, (unsigned)G.y, 1,
                                        (unsigned)G.threads, 1, 1, 0, en->stream, args, NULL);
    char what[200];
    snprintf(what, sizeof what, "cuLaunchKernel(coil_attention_%d, %lld x %lld blocks of %d)", s,
             (long long)G.x, (long long)G.y, G.threads);
    return cu_ok(r, what, e);
}

static bool run_pack(CudaEngine *en, const CuPack *pk, DType dt, Err *e)
{
    if (!pk->needed || pk->numel == 0)
        return true;
    CudaPackArgs a = cuda_pack_args(pk, dt);
    CUdeviceptr src = en->addr[pk->src], dst = en->scratch + (CUdeviceptr)pk->scratch;
    void *args[] = {&src, &dst, &a};
    int64_t blocks = (pk->numel + CUDA_BLOCK - 1) / CUDA_BLOCK, cap = (int64_t)en->info.sms * CUDA_WAVES;
    en->stats.packs++;
    en->stats.launches++;
    return cu_ok(en->cu->cuLaunchKernel(en->pack, (unsigned)(blocks < cap ? blocks : cap), 1, 1,
                                        CUDA_BLOCK, 1, 1, 0, en->stream, args, NULL),
                 "cuLaunchKernel(coil_pack)", e);
}

/* Offsets (elements) of looped batch t in A, B and C. */
static void outer_offsets(const CuGemm *cg, int64_t t, int64_t off[3])
{
    off[0] = off[1] = off[2] = 0;
    for (int j = cg->nouter - 1; j >= 0; j--) {
        int64_t i = t % cg->outer[j];
        t /= cg->outer[j];
        off[0] += i * cg->a.outer_stride[j];
        off[1] += i * cg->b.outer_stride[j];
        off[2] += i * cg->c.outer_stride[j];
    }
}

static bool run_cublas(CudaEngine *en, int s, Err *e)
{
    const CuGemm *cg = &en->gemm[s];
    float one = 1, zero = 0;
    int64_t ea = dtype_info[cg->ab_dt].size, ec = dtype_info[cg->c_dt].size, loops = 1, off[3];
    CUdeviceptr A = operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt);
    CUdeviceptr B = operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt);
    CUdeviceptr C = operand_addr(en, &cg->c, NULL, cg->c_dt);
    cudaDataType ab = cuda_dtype[cg->ab_dt], c = cuda_dtype[cg->c_dt];
    for (int j = 0; j < cg->nouter; j++)
        loops *= cg->outer[j];
    for (int64_t t = 0; t < loops; t++) {
        outer_offsets(cg, t, off);
        cublasStatus_t st = en->bl->cublasGemmStridedBatchedEx(
            en->blas, cg->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
            cg->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)cg->m, (int)cg->n, (int)cg->k, &one,
            dptr(A + (CUdeviceptr)(off[0] * ea)), ab, (int)cg->a.ld, cg->a.stride,
            dptr(B + (CUdeviceptr)(off[1] * ea)), ab, (int)cg->b.ld, cg->b.stride, &zero,
            dptr(C + (CUdeviceptr)(off[2] * ec)), c, (int)cg->c.ld, cg->c.stride, (int)cg->batch,
            compute_type(en, cg), CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) {
            char what[200];
            snprintf(what, sizeof what, "step %d: cublasGemmStridedBatchedEx (m %lld n %lld k %lld, "
                     "batch %lld)", s, (long long)cg->m, (long long)cg->n, (long long)cg->k,
                     (long long)cg->batch);
            return blas_ok(st, what, e);
        }
    }
    return true;
}

static bool run_lt(CudaEngine *en, int s, const LtStep *L, int algo, Err *e)
{
    const CuGemm *cg = &en->gemm[s];
    float one = 1, zero = 0;
    void *D = dptr(en->addr[L->out]);
    cublasStatus_t st = en->lt->cublasLtMatmul(
        en->blt, L->desc, &one, dptr(operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt)), L->la,
        dptr(operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt)), L->lb, &zero, D, L->lc, D, L->lc,
        &L->algo[algo], dptr(en->workspace), L->workspace[algo], en->stream);
    char what[100];
    snprintf(what, sizeof what, "step %d: cublasLtMatmul", s);
    return blas_ok(st, what, e);
}

/* The cuBLASLt call step s makes as configured (NULL: cuBLAS), and its algorithm. */
static const LtStep *gemm_lt(const CudaEngine *en, int s, int *algo)
{
    const CudaStepConfig *c = &en->cfg[s];
    const LtStep *fused = &en->lts[s], *plain = &en->ltp[s];
    *algo = 0;
    if (c->path == CUDA_GEMM_CUBLAS)
        return NULL;
    if (c->path == CUDA_GEMM_AUTO)
        return fused->on ? fused : NULL;
    const LtStep *L = fused->on && !c->separate ? fused : plain;
    if (!L->on || c->algo >= L->nalgo)
        return fused->on ? fused : NULL; /* not offered at these sizes: the heuristics */
    *algo = c->algo;
    return L;
}

/* Packs, the product (or zeros when K = 0), then the epilogue kernel unless cuBLASLt did it. */
static bool run_gemm(CudaEngine *en, int s, const SymBind *sb, Err *e)
{
    const Gemm *g = &en->p->step[s].gemm;
    const CuGemm *cg = &en->gemm[s];
    int algo;
    const LtStep *L = gemm_lt(en, s, &algo);
    bool lt = L != NULL, fused = L && L != &en->ltp[s], ok = true;
    if (cg->empty)
        ok = true;
    else if (cg->zero)
        ok = cu_ok(en->cu->cuMemsetD8Async(en->addr[g->c.buf], 0,
                                           (size_t)(cg->c_numel * dtype_info[cg->c_dt].size),
                                           en->stream), "cuMemsetD8Async (C of a GEMM with K = 0)", e);
    else
        ok = run_pack(en, &cg->pack_a, cg->ab_dt, e) && run_pack(en, &cg->pack_b, cg->ab_dt, e) &&
             (lt ? run_lt(en, s, L, algo, e) : run_cublas(en, s, e));
    en->stats.gemm_lt += lt;
    en->stats.gemm_cublas += !lt;
    return ok && (fused || g->epilogue < 0 || launch(en, g->epilogue, s, sb, e));
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
        bool ok = kind == STEP_KERNEL      ? launch(en, p->step[s].kernel, s, sb, e)
                  : kind == STEP_ATTENTION ? launch_attention(en, s, sb, e)
                                           : run_gemm(en, s, sb, e);
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
static bool run_all(CudaEngine *en, const SymBind *sb, Err *e)
{
    if (!en->o.graphs || en->ev || !en->warm)
        return run_steps(en, sb, e);
    if (!en->exec && !capture(en, sb, e))
        return false;
    en->stats.graph_replays++;
    return cu_ok(en->cu->cuGraphLaunch(en->exec, en->stream), "cuGraphLaunch", e);
}

/* ---------------------------------------------------------------- tuning */

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
        prepare_plain(en, s);
    return true;
}

const CudaStepConfig *cuda_engine_config(const CudaEngine *en, int s) { return &en->cfg[s]; }

int cuda_engine_lt_algos(CudaEngine *en, int s, bool plain)
{
    Err e = {0};
    if (!en->planned || en->p->step[s].kind != STEP_GEMM || !lt_eligible(en, s) ||
        !make_current(en, &e))
        return 0;
    if (plain)
        prepare_plain(en, s);
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
    return kind == STEP_KERNEL      ? launch(en, en->p->step[s].kernel, s, sb, e)
           : kind == STEP_ATTENTION ? launch_attention(en, s, sb, e)
                                    : run_gemm(en, s, sb, e);
}

const SymBind *cuda_engine_symbols(const CudaEngine *en) { return en->planned ? &en->plan_sb : NULL; }
void *cuda_engine_stream(const CudaEngine *en) { return en->stream; }
uint64_t cuda_engine_buffer_address(const CudaEngine *en, int b) { return (uint64_t)en->addr[b]; }

/* ---------------------------------------------------------------- a run */

static bool upload_params(CudaEngine *en, const Tensor *params, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    bool any = false;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind != BUF_PARAM || (!en->params_dirty && en->param_src[b] ==
                                                                params[buf->index].data))
            continue;
        int64_t n = buf_bytes(p, b, sb);
        if (n > 0 && !cu_ok(en->cu->cuMemcpyHtoDAsync(en->addr[b], params[buf->index].data,
                                                      (size_t)n, en->stream),
                            "cuMemcpyHtoDAsync (a parameter)", e))
            return false;
        en->param_src[b] = params[buf->index].data;
        any = true;
    }
    en->params_dirty = false;
    en->stats.param_uploads += any;
    return true;
}

/* The rng step into the syms table's reserved slot when it changed: 8 bytes on the stream
 * before the kernels that read it, so a replayed graph draws the new step's masks too. */
static bool upload_rng_step(CudaEngine *en, Err *e)
{
    if ((uint64_t)en->syms[COIL_SYM_RNG_STEP] == en->rng_step)
        return true;
    en->syms[COIL_SYM_RNG_STEP] = (long long)en->rng_step;
    return cu_ok(en->cu->cuMemcpyHtoDAsync(en->syms_dev + COIL_SYM_RNG_STEP * 8,
                                           &en->syms[COIL_SYM_RNG_STEP], 8, en->stream),
                 "cuMemcpyHtoDAsync (the rng step)", e);
}

static bool stage_inputs(CudaEngine *en, const Tensor *inputs, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    for (int b = 0; b < p->nbuf; b++) {
        int64_t n = p->buf[b].kind == BUF_INPUT ? buf_bytes(p, b, sb) : 0;
        if (n == 0)
            continue;
        memcpy(en->staging + en->off[b], inputs[p->buf[b].index].data, (size_t)n);
        if (!cu_ok(en->cu->cuMemcpyHtoDAsync(en->addr[b], en->staging + en->off[b], (size_t)n,
                                             en->stream), "cuMemcpyHtoDAsync (an input)", e))
            return false;
    }
    return true;
}

static void add_step_times(CudaEngine *en)
{
    for (int s = 0; s < en->p->nstep; s++) {
        float ms = 0;
        if (en->cu->cuEventElapsedTime(&ms, en->ev[s], en->ev[s + 1]) == CUDA_SUCCESS)
            en->step_s[s] += ms * 1e-3;
    }
}

/* Outputs back through the staging (those with fetch[i]; fetch NULL: all); the run's one
 * synchronisation, where a kernel's fault surfaces. */
static bool fetch_outputs(CudaEngine *en, Tensor *outputs, const bool *fetch, const SymBind *sb,
                          Err *e)
{
    const Program *p = en->p;
    bool *want = calloc((size_t)p->nbuf + 1, sizeof *want);
    if (!want) {
        err_set(e, ERR_INPUT, "out of memory");
        return false;
    }
    for (int b = 0; b < p->nbuf; b++)
        want[b] = p->buf[b].kind == BUF_OUTPUT && (!fetch || fetch[p->buf[b].index]);
    bool ok = true;
    for (int b = 0; ok && b < p->nbuf; b++) {
        int64_t n = want[b] ? buf_bytes(p, b, sb) : 0;
        ok = n == 0 || cu_ok(en->cu->cuMemcpyDtoHAsync(en->staging + en->off[b], en->addr[b],
                                                       (size_t)n, en->stream),
                             "cuMemcpyDtoHAsync (an output)", e);
    }
    CUresult r = ok ? en->cu->cuStreamSynchronize(en->stream) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        ok = cu_ok(r, "running the steps (rerun with CUDA_LAUNCH_BLOCKING=1 to find the step "
                   "that faulted)", e);
    if (ok && en->ev)
        add_step_times(en);
    for (int b = 0; ok && b < p->nbuf; b++)
        if (want[b])
            memcpy(outputs[p->buf[b].index].data, en->staging + en->off[b],
                   (size_t)buf_bytes(p, b, sb));
    free(want);
    return ok;
}

/* After the run's synchronisation: each range step's [min, max] brought home and held
 * against its bound (there are none unless an index is computed from data). */
static bool check_ranges(CudaEngine *en, const SymBind *sb, Err *e)
{
    for (int s = 0; s < en->p->nstep; s++) {
        int b = en->range_buf[s];
        int64_t minmax[2];
        if (b < 0 || en->skip[s])
            continue;
        if (!cu_ok(en->cu->cuMemcpyDtoHAsync(minmax, en->addr[b], sizeof minmax, en->stream),
                   "cuMemcpyDtoHAsync (an index range)", e) ||
            !cu_ok(en->cu->cuStreamSynchronize(en->stream), "cuStreamSynchronize", e) ||
            !index_bounds_after(en->p, b, minmax, sb, e))
            return false;
    }
    return true;
}

bool cuda_engine_run(CudaEngine *en, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                     Err *e)
{
    SymBind sb;
    const Graph *g = en->p->graph;
    if (!make_current(en, e) || !bind_inputs(g, inputs, &sb, e) ||
        !check_param_tensors(g, params, &sb, e) || !program_check_inputs(en->p, inputs, &sb, e) ||
        !ensure_plan(en, &sb, e) || !alloc_output_tensors(g, &sb, outputs, e))
        return false;
    bool ok = upload_params(en, params, &sb, e) && upload_rng_step(en, e) &&
              stage_inputs(en, inputs, &sb, e) &&
              run_all(en, &sb, e) && fetch_outputs(en, outputs, NULL, &sb, e) &&
              check_ranges(en, &sb, e);
    if (ok) {
        en->warm = true;
        return true;
    }
    en->cu->cuStreamSynchronize(en->stream);
    for (int i = 0; i < g->noutput; i++)
        tensor_free(&outputs[i]);
    return false;
}

/* ---------------------------------------------------------------- resident parameters */

/* For work on the engine's buffers in place (the device optimizer, cuda_optim.c): its
 * context and stream, buffer addresses, a run that leaves the parameters where they are
 * and brings home only the outputs asked for, and the parameters' download. */

void *cuda_engine_context(const CudaEngine *en) { return en->ctx; }

static uint64_t buffer_addr(const CudaEngine *en, BufKind kind, int index)
{
    for (int b = 0; en->planned && b < en->p->nbuf; b++)
        if (en->p->buf[b].kind == kind && en->p->buf[b].index == index)
            return en->addr[b];
    return 0;
}

uint64_t cuda_engine_param_addr(const CudaEngine *en, int param)
{
    return buffer_addr(en, BUF_PARAM, param);
}

uint64_t cuda_engine_output_addr(const CudaEngine *en, int output)
{
    return buffer_addr(en, BUF_OUTPUT, output);
}

/* outputs[i] for fetch[i] only: kept when its dtype and shape still fit, else made. */
static bool alloc_fetched(const Graph *g, const SymBind *sb, Tensor *outputs, const bool *fetch,
                          Err *e)
{
    for (int i = 0; i < g->noutput; i++) {
        const Type *t = &g->node[g->output[i]].type;
        int64_t dims[COIL_MAX_RANK];
        bool same = outputs[i].data && outputs[i].dt == t->dt && outputs[i].rank == t->rank;
        if (!fetch[i] || !type_resolve(t, sb, dims))
            continue;
        for (int d = 0; same && d < t->rank; d++)
            same = outputs[i].shape[d] == dims[d];
        if (same)
            continue;
        tensor_free(&outputs[i]);
        if (!tensor_alloc(&outputs[i], t->dt, t->rank, dims, e))
            return false;
    }
    return true;
}

bool cuda_engine_run_resident(CudaEngine *en, const Tensor *inputs, const Tensor *params,
                              Tensor *outputs, const bool *fetch, Err *e)
{
    SymBind sb;
    const Graph *g = en->p->graph;
    if (!make_current(en, e) || !bind_inputs(g, inputs, &sb, e) ||
        !check_param_tensors(g, params, &sb, e) || !program_check_inputs(en->p, inputs, &sb, e) ||
        !ensure_plan(en, &sb, e) || !alloc_fetched(g, &sb, outputs, fetch, e))
        return false;
    /* the device's parameters are the current ones once uploaded: only a fresh block (the
     * first run) or cuda_engine_params_changed takes the host's again */
    bool ok = (!en->params_dirty || upload_params(en, params, &sb, e)) &&
              upload_rng_step(en, e) && stage_inputs(en, inputs, &sb, e) &&
              run_all(en, &sb, e) && fetch_outputs(en, outputs, fetch, &sb, e) &&
              check_ranges(en, &sb, e);
    en->warm = en->warm || ok;
    if (!ok)
        en->cu->cuStreamSynchronize(en->stream);
    return ok;
}

bool cuda_engine_download_params(CudaEngine *en, Tensor *params, Err *e)
{
    const Program *p = en->p;
    if (!make_current(en, e))
        return false;
    for (int b = 0; en->planned && b < p->nbuf; b++) {
        int64_t n = p->buf[b].kind == BUF_PARAM ? buf_bytes(p, b, &en->plan_sb) : 0;
        if (n > 0 && !cu_ok(en->cu->cuMemcpyDtoHAsync(params[p->buf[b].index].data, en->addr[b],
                                                      (size_t)n, en->stream),
                            "cuMemcpyDtoHAsync (a parameter)", e))
            return false;
    }
    return cu_ok(en->cu->cuStreamSynchronize(en->stream), "cuStreamSynchronize", e);
}
