/* cuda_memory.c — the CUDA engine's device memory: allocations with their failures named,
 * the parameters' and constants' block (uploaded once, again when they change) and the
 * activations' block laid out from the memory plan with the staging it copies through. */
#include "runtime/cuda/cuda_engine_int.h"

/* cuMemAlloc, saying how much was asked and how much the device has when it cannot. */
bool cuda_dev_alloc(CudaEngine *en, CUdeviceptr *p, int64_t bytes, const char *what, Err *e)
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

void cuda_dev_free(CudaEngine *en, CUdeviceptr *p)
{
    if (*p)
        en->cu->cuMemFree(*p);
    *p = 0;
}

/* Parameters and constants in their own block: sized once (again only if a parameter's
 * size follows a symbol), constants uploaded with it. */
bool cuda_place_params(CudaEngine *en, const SymBind *sb, Err *e)
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
    cuda_dev_free(en, &en->pblock);
    en->pblock_bytes = 0;
    if (!cuda_dev_alloc(en, &en->pblock, at, "parameters and constants", e))
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
            err_set(e, ERR_MEMORY, "out of memory for constant '%s'", buf->name);
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

bool cuda_place_activations(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    int64_t io, arena_at, scratch_at, tables_at;
    int64_t need = layout_activations(en, sb, &io, &arena_at, &scratch_at, &tables_at);
    if (!en->dblock || need > en->dblock_bytes) {
        cuda_dev_free(en, &en->dblock);
        en->dblock_bytes = 0;
        if (!cuda_dev_alloc(en, &en->dblock, need, "activations", e))
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
