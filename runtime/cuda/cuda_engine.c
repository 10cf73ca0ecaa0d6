/* cuda_engine.c — runs a Program on an NVIDIA GPU through the Driver API: the primary
 * context, one stream, the kernels' module compiled by NVRTC for the device, GEMM steps on
 * cuBLAS (cuBLASLt when it can compute the epilogue too), and device memory in two blocks:
 * parameters and constants (uploaded once, and again only when they change) and the
 * activations (inputs, outputs, the memory plan's temporaries, packed GEMM operands and the
 * kernels' bufs and syms tables), both kept while the symbol values repeat. Host tensors
 * cross through pinned staging with async copies; every step is stream-ordered and the run
 * ends with one synchronisation. With graphs on, a run at sizes already seen once is
 * captured as a CUDA graph and later runs at those sizes replay it. */
#include "runtime/cuda/cuda_engine_int.h"

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
    en->attn_mma_fn = calloc(nstep, sizeof *en->attn_mma_fn);
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
    if (!en->fn || !en->attn_fn || !en->attn_mma_fn || !en->param_src || !en->off || !en->addr || !en->gemm || !en->lts ||
        !en->ltp || !en->cfg || !en->vmod || !en->vfn || !en->range_buf || !en->skip ||
        (en->o.profile && (!en->ev || !en->step_s))) {
        err_set(e, ERR_MEMORY, "out of memory creating a CUDA engine for %d buffers", p->nbuf);
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
        if (!ok || en->info.major < 8 || !cuda_attention_mma_fits(p, &p->step[s].attn))
            continue;
        snprintf(fn, sizeof fn, "coil_attention_%d_mma", s);
        snprintf(name, sizeof name, "cuModuleGetFunction(%s)", fn);
        ok = cu_ok(en->cu->cuModuleGetFunction(&en->attn_mma_fn[s], en->mod, fn), name, e);
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
         cuda_dev_alloc(en, &en->workspace, WORKSPACE_BYTES, "cuBLAS workspace", e) &&
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
        err_set(e, ERR_MEMORY, "out of memory creating a CUDA engine");
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

/* What depends on the symbol values: the captured graph, cuBLASLt's plans, the plan. */
static void drop_plan(CudaEngine *en)
{
    if (en->exec)
        en->cu->cuGraphExecDestroy(en->exec);
    en->exec = NULL;
    for (int s = 0; en->lts && s < en->p->nstep; s++)
        cuda_lt_drop(en, &en->lts[s]), cuda_lt_drop(en, &en->ltp[s]);
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
        cuda_dev_free(en, &en->dblock);
        cuda_dev_free(en, &en->pblock);
        cuda_dev_free(en, &en->workspace);
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
    free(en->attn_mma_fn);
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
    if (!plan_memory_aligned(en->p, sb, DEV_ALIGN, &en->plan, e) || !cuda_map_gemms(en, sb, e) ||
        !cuda_place_params(en, sb, e) || !cuda_place_activations(en, sb, e)) {
        plan_free(&en->plan);
        return false;
    }
    for (int s = 0; s < en->p->nstep; s++)
        if (en->p->step[s].kind == STEP_GEMM) {
            cuda_prepare_lt(en, s);
            if (en->cfg[s].path == CUDA_GEMM_LT)
                cuda_prepare_plain(en, s);
        }
    en->plan_sb = *sb;
    en->planned = true;
    return true;
}

const SymBind *cuda_engine_symbols(const CudaEngine *en) { return en->planned ? &en->plan_sb : NULL; }

void *cuda_engine_stream(const CudaEngine *en) { return en->stream; }

uint64_t cuda_engine_buffer_address(const CudaEngine *en, int b) { return (uint64_t)en->addr[b]; }

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
        err_set(e, ERR_MEMORY, "out of memory");
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
        !ensure_plan(en, &sb, e) || !reuse_output_tensors(g, &sb, outputs, e))
        return false;
    bool ok = upload_params(en, params, &sb, e) && upload_rng_step(en, e) &&
              stage_inputs(en, inputs, &sb, e) &&
              cuda_run_all(en, &sb, e) && fetch_outputs(en, outputs, NULL, &sb, e) &&
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
              cuda_run_all(en, &sb, e) && fetch_outputs(en, outputs, fetch, &sb, e) &&
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
