/* cuda_optim.c — the device optimizer: its module (NVRTC, its own cubin: compiled without
 * FMA contraction), one device block for the tensor table, chunks, partial sums, the norm
 * and the state, and the launches on the engine's stream. */
#include <math.h>
#include <stdlib.h>

#include "codegen/cuda/cuda.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_optim.h"

#define ALIGN 256

struct CudaOptim {
    CudaEngine *en;
    const CudaDriver *cu;
    CUcontext ctx;
    CUstream stream;
    CUmodule mod;
    CUfunction norm, update, accumulate;
    OptConfig c;
    int n, first_grad, npartial, grid;
    bool has_m, has_v, accum;
    CoilOptTensor *rec;       /* the table as last uploaded (p and g: the engine's) */
    bool table_sent;
    int64_t nchunks;
    CUdeviceptr block, table, chunks, partial, norm_dev;
    double *norm_host;        /* pinned: the norm's copy home */
    int64_t steps;
};

static int64_t round_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static void *dptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* The module, compiled for the engine's device through NVRTC's cache. */
static bool load_module(CudaOptim *o, Err *e)
{
    const CudaDeviceInfo *info = cuda_engine_device(o->en);
    CudaCompileOptions co = {.arch = info->arch, .no_fmad = true};
    Cubin cubin = {0};
    bool ok = nvrtc_compile(cuda_optim_source, "coil_optim.cu", &co, &cubin, e) &&
              cu_ok(o->cu->cuModuleLoadData(&o->mod, cubin.data), "cuModuleLoadData", e);
    cubin_free(&cubin);
    return ok && cu_ok(o->cu->cuModuleGetFunction(&o->norm, o->mod, "coil_optim_norm"),
                       "cuModuleGetFunction(coil_optim_norm)", e) &&
           cu_ok(o->cu->cuModuleGetFunction(&o->update, o->mod, "coil_optim_update"),
                 "cuModuleGetFunction(coil_optim_update)", e) &&
           cu_ok(o->cu->cuModuleGetFunction(&o->accumulate, o->mod, "coil_optim_accumulate"),
                 "cuModuleGetFunction(coil_optim_accumulate)", e);
}

/* Byte offsets in the one device block: the table at 0, then the chunks, the partial
 * sums, the norm, and per tensor its m, v and micro-batch sum (-1: none). The block's size. */
typedef struct Layout {
    int64_t chunks, partial, norm, state, bytes;
    int64_t *off; /* 3 per tensor */
} Layout;

static bool lay_out(const CudaOptim *o, const int64_t *numel, Layout *L)
{
    int64_t at = round_up((int64_t)o->n * (int64_t)sizeof(CoilOptTensor));
    L->chunks = at, at += round_up(o->nchunks * (int64_t)sizeof(CoilOptChunk));
    L->partial = at, at += round_up((int64_t)o->npartial * 8);
    L->norm = at, at += ALIGN;
    L->state = at;
    L->off = calloc((size_t)o->n * 3 + 1, sizeof *L->off);
    bool has[3] = {o->has_m, o->has_v, o->accum};
    for (int i = 0; L->off && i < o->n; i++)
        for (int j = 0; j < 3; j++) {
            L->off[3 * i + j] = has[j] ? at : -1;
            at += has[j] ? round_up(numel[i] * 4) : 0;
        }
    L->bytes = at;
    return L->off != NULL;
}

static float *state_ptr(const CudaOptim *o, const Layout *L, int i, int j)
{
    int64_t off = L->off[3 * i + j];
    return off < 0 ? NULL : dptr(o->block + (CUdeviceptr)off);
}

/* The block allocated, the table's state pointers filled, state zeroed, the chunks (which
 * never change) uploaded. */
static bool place(CudaOptim *o, const int64_t *numel, const CoilOptChunk *ch, Err *e)
{
    Layout L = {0};
    bool ok = lay_out(o, numel, &L) &&
              cu_ok(o->cu->cuMemAlloc(&o->block, (size_t)L.bytes),
                    "cuMemAlloc (the optimizer's state)", e);
    for (int i = 0; ok && i < o->n; i++)
        o->rec[i] = (CoilOptTensor){.m = state_ptr(o, &L, i, 0), .v = state_ptr(o, &L, i, 1),
                                    .acc = state_ptr(o, &L, i, 2), .numel = numel[i]};
    if (ok) {
        o->table = o->block, o->chunks = o->block + (CUdeviceptr)L.chunks;
        o->partial = o->block + (CUdeviceptr)L.partial;
        o->norm_dev = o->block + (CUdeviceptr)L.norm;
        ok = cu_ok(o->cu->cuMemsetD8Async(o->block + (CUdeviceptr)L.state, 0,
                                          (size_t)(L.bytes - L.state), o->stream),
                   "cuMemsetD8Async (the optimizer's state)", e) &&
             cu_ok(o->cu->cuMemcpyHtoDAsync(o->chunks, ch, (size_t)o->nchunks * sizeof *ch,
                                            o->stream), "cuMemcpyHtoDAsync (the chunks)", e) &&
             cu_ok(o->cu->cuStreamSynchronize(o->stream), "cuStreamSynchronize", e);
    }
    free(L.off);
    return ok;
}

/* The chunks of params' tensors, then the block. */
static bool plan(CudaOptim *o, const Tensor *params, Err *e)
{
    int64_t *numel = calloc((size_t)o->n + 1, sizeof *numel);
    for (int i = 0; numel && i < o->n; i++)
        numel[i] = tensor_numel(&params[i]);
    o->nchunks = numel ? cuda_optim_chunks(numel, o->n, NULL) : 0;
    o->npartial = cuda_optim_partials(o->nchunks);
    CoilOptChunk *ch = numel ? calloc((size_t)o->nchunks + 1, sizeof *ch) : NULL;
    if (ch)
        cuda_optim_chunks(numel, o->n, ch);
    bool ok = ch && place(o, numel, ch, e);
    free(numel), free(ch);
    return ok;
}

CudaOptim *cuda_optim_new(CudaEngine *en, const Optimizer *host, const Tensor *params,
                          int nparam, int first_grad, bool accumulate, Err *e)
{
    const char *why;
    const CudaDriver *cu = cuda_driver(&why);
    if (!cu) {
        err_set(e, ERR_INPUT, "cannot run on a GPU: %s", why);
        return NULL;
    }
    CudaOptim *o = calloc(1, sizeof *o);
    if (!o) {
        err_set(e, ERR_MEMORY, "cuda optimizer: out of memory");
        return NULL;
    }
    o->en = en, o->cu = cu, o->c = *optim_config(host), o->first_grad = first_grad;
    o->ctx = cuda_engine_context(en), o->stream = cuda_engine_stream(en);
    o->n = nparam;
    o->has_v = o->c.kind == OPT_ADAMW;
    o->has_m = o->c.kind != OPT_SGD || o->c.momentum != 0;
    o->accum = accumulate;
    o->steps = optim_steps(host);
    o->grid = cuda_engine_device(en)->sms * CUDA_OPTIM_BLOCKS_PER_SM;
    o->rec = calloc((size_t)o->n + 1, sizeof *o->rec);
    void *pinned = NULL;
    bool ok = o->rec && cu_ok(cu->cuCtxSetCurrent(o->ctx), "cuCtxSetCurrent", e) &&
              load_module(o, e) && cu_ok(cu->cuMemHostAlloc(&pinned, 8, 0), "cuMemHostAlloc", e);
    o->norm_host = pinned;
    ok = ok && plan(o, params, e);
    for (int i = 0; ok && i < o->n; i++)
        o->rec[i].role = optim_role(host, i);
    if (!ok) {
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "cuda optimizer: out of memory");
        cuda_optim_free(o);
        return NULL;
    }
    return o;
}

void cuda_optim_free(CudaOptim *o)
{
    if (!o)
        return;
    if (o->ctx) {
        o->cu->cuCtxSetCurrent(o->ctx);
        o->cu->cuStreamSynchronize(o->stream);
    }
    if (o->block)
        o->cu->cuMemFree(o->block);
    if (o->norm_host)
        o->cu->cuMemFreeHost(o->norm_host);
    if (o->mod)
        o->cu->cuModuleUnload(o->mod);
    free(o->rec);
    free(o);
}

/* The engine's parameter and gradient addresses into the table, uploaded when they moved
 * (the first step, or a new plan). */
static bool bind(CudaOptim *o, Err *e)
{
    bool moved = !o->table_sent;
    for (int i = 0; i < o->n; i++) {
        uint64_t p = cuda_engine_param_addr(o->en, i);
        uint64_t g = cuda_engine_output_addr(o->en, o->first_grad + i);
        if (!p || !g) {
            err_set(e, ERR_INPUT, "cuda optimizer: parameter %d or its gradient (output %d) has "
                    "no device memory: run the engine before a step", i, o->first_grad + i);
            return false;
        }
        moved = moved || (uintptr_t)o->rec[i].p != p || (uintptr_t)o->rec[i].g != g;
        o->rec[i].p = (float *)(uintptr_t)p, o->rec[i].g = (const float *)(uintptr_t)g;
    }
    o->table_sent = true;
    /* pageable: the copy has the table before the call returns, so rec may change after */
    return !moved || cu_ok(o->cu->cuMemcpyHtoDAsync(o->table, o->rec,
                                                     (size_t)o->n * sizeof *o->rec, o->stream),
                           "cuMemcpyHtoDAsync (the table)", e);
}

static bool launch(CudaOptim *o, CUfunction f, int64_t blocks, void **args, const char *what,
                   Err *e)
{
    unsigned grid = (unsigned)(blocks < 1 ? 1 : blocks);
    return cu_ok(o->cu->cuLaunchKernel(f, grid, 1, 1, CUDA_OPTIM_THREADS, 1, 1, 0, o->stream,
                                       args, NULL), what, e);
}

static int64_t update_grid(const CudaOptim *o)
{
    return o->nchunks < o->grid ? o->nchunks : o->grid;
}

bool cuda_optim_accumulate(CudaOptim *o, bool first, Err *e)
{
    long long nchunks = o->nchunks;
    int f = first;
    void *args[] = {&o->table, &o->chunks, &nchunks, &f};
    if (!o->accum) {
        err_set(e, ERR_INPUT, "cuda optimizer: made without accumulation buffers");
        return false;
    }
    return cu_ok(o->cu->cuCtxSetCurrent(o->ctx), "cuCtxSetCurrent", e) && bind(o, e) &&
           launch(o, o->accumulate, update_grid(o), args,
                  "cuLaunchKernel(coil_optim_accumulate)", e);
}

bool cuda_optim_step(CudaOptim *o, double grad_scale, double lr, Err *e)
{
    CoilOptHyper h = cuda_optim_hyper(&o->c, o->steps, lr, grad_scale, o->nchunks, o->npartial);
    void *nargs[] = {&o->table, &o->chunks, &h, &o->partial};
    void *uargs[] = {&o->table, &o->chunks, &h, &o->partial, &o->norm_dev};
    return cu_ok(o->cu->cuCtxSetCurrent(o->ctx), "cuCtxSetCurrent", e) && bind(o, e) &&
           launch(o, o->norm, o->npartial, nargs, "cuLaunchKernel(coil_optim_norm)", e) &&
           launch(o, o->update, update_grid(o), uargs, "cuLaunchKernel(coil_optim_update)", e) &&
           cu_ok(o->cu->cuMemcpyDtoHAsync(o->norm_host, o->norm_dev, 8, o->stream),
                 "cuMemcpyDtoHAsync (the norm)", e);
}

bool cuda_optim_finish(CudaOptim *o, double *norm, Err *e)
{
    if (!cu_ok(o->cu->cuStreamSynchronize(o->stream), "the optimizer step (rerun with "
               "CUDA_LAUNCH_BLOCKING=1 to find the launch that faulted)", e))
        return false;
    *norm = *o->norm_host;
    o->steps += isfinite(*norm);
    return true;
}

/* State tensor i of the host optimizer (optim_state's order) and its device address. */
static CUdeviceptr state_addr(const CudaOptim *o, int i)
{
    int per = o->has_m + o->has_v, p = i / per;
    bool second = i % per == 1;
    float *a = second || !o->has_m ? o->rec[p].v : o->rec[p].m;
    return (CUdeviceptr)(uintptr_t)a;
}

bool cuda_optim_download(CudaOptim *o, Optimizer *host, Err *e)
{
    bool ok = cu_ok(o->cu->cuCtxSetCurrent(o->ctx), "cuCtxSetCurrent", e);
    for (int i = 0; ok && i < optim_state_count(host); i++) {
        const char *name;
        Tensor *t = optim_state(host, i, &name);
        ok = cu_ok(o->cu->cuMemcpyDtoHAsync(t->data, state_addr(o, i), tensor_nbytes(t), o->stream),
                   "cuMemcpyDtoHAsync (optimizer state)", e);
    }
    optim_set_steps(host, o->steps);
    return ok && cu_ok(o->cu->cuStreamSynchronize(o->stream), "cuStreamSynchronize", e);
}

bool cuda_optim_upload(CudaOptim *o, const Optimizer *host, Err *e)
{
    bool ok = cu_ok(o->cu->cuCtxSetCurrent(o->ctx), "cuCtxSetCurrent", e);
    for (int i = 0; ok && i < optim_state_count(host); i++) {
        const char *name;
        Tensor *t = optim_state((Optimizer *)host, i, &name);
        ok = cu_ok(o->cu->cuMemcpyHtoDAsync(state_addr(o, i), t->data, tensor_nbytes(t), o->stream),
                   "cuMemcpyHtoDAsync (optimizer state)", e);
    }
    o->steps = optim_steps(host);
    return ok && cu_ok(o->cu->cuStreamSynchronize(o->stream), "cuStreamSynchronize", e);
}
