/* cuda_tune.c — measuring the CUDA engine's candidates, step by step, in program order.
 *
 * Each step is timed alone with events around it, on the buffers a real run leaves: the
 * steps before it have just run (with their chosen configurations), the buffers it writes
 * are restored from device copies before every timed run (an in-place kernel reads the
 * same values each time), and the L2 cache is overwritten before each, so no candidate
 * finds its operands there from the run before. The default candidate's results are the
 * reference; a candidate whose results differ is rejected. */
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_tune.h"

#define MAX_TOUCHED 32
#define FLUSH_BYTES (256ll << 20) /* more than any GPU's L2 (H100: 50 MB) */

/* One step under measurement. */
typedef struct GpuRun {
    CudaEngine *en;
    const Program *p;
    const CudaDriver *cu;
    CUstream stream;
    int s;
    const TuneSpace *sp;
    int nfused, nplain;
    int nw;
    int w[MAX_TOUCHED];
    bool compare[MAX_TOUCHED];
    size_t bytes[MAX_TOUCHED];
    CUdeviceptr saved[MAX_TOUCHED]; /* the written buffers as before the step */
    void *ref[MAX_TOUCHED], *got;   /* host: the default's results, a candidate's */
    CUdeviceptr flush;
    CUevent ev[2];
    TuneBudget budget;
} GpuRun;

static bool driver_ok(CUresult res, const char *what, Err *e)
{
    char buf[300];
    if (res != CUDA_SUCCESS)
        err_set(e, ERR_INPUT, "autotune: %s: %s", what, cuda_describe(res, buf, sizeof buf));
    return res == CUDA_SUCCESS;
}

/* The engine's context current on this thread before the tuner allocates or copies. */
static bool engine_current(const CudaEngine *en, Err *e)
{
    return driver_ok(cuda_driver(NULL)->cuCtxSetCurrent((CUcontext)cuda_engine_context(en)),
                     "cuCtxSetCurrent", e);
}

static CUdeviceptr addr(const GpuRun *r, int b)
{
    return (CUdeviceptr)cuda_engine_buffer_address(r->en, b);
}

static size_t buf_bytes(const Program *p, int b, const SymBind *sb)
{
    return (size_t)dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

/* Device copies of what the step writes, host room for the results, the flush buffer and
 * the events. */
static bool collect(GpuRun *r, Err *e)
{
    const SymBind *sb = cuda_engine_symbols(r->en);
    size_t most = 1;
    r->nw = tune_step_writes(r->p, r->s, r->w, r->compare, MAX_TOUCHED);
    bool ok = driver_ok(r->cu->cuMemAlloc(&r->flush, FLUSH_BYTES), "cuMemAlloc (L2 flush)", e) &&
              driver_ok(r->cu->cuEventCreate(&r->ev[0], CU_EVENT_DEFAULT), "cuEventCreate", e) &&
              driver_ok(r->cu->cuEventCreate(&r->ev[1], CU_EVENT_DEFAULT), "cuEventCreate", e);
    for (int i = 0; ok && i < r->nw; i++) {
        r->bytes[i] = buf_bytes(r->p, r->w[i], sb);
        most = r->bytes[i] > most ? r->bytes[i] : most;
        ok = driver_ok(r->cu->cuMemAlloc(&r->saved[i], r->bytes[i] + 1), "cuMemAlloc (a copy)", e) &&
             driver_ok(r->cu->cuMemcpyDtoDAsync(r->saved[i], addr(r, r->w[i]), r->bytes[i], r->stream),
                   "cuMemcpyDtoDAsync", e);
        if (ok && !(r->ref[i] = malloc(r->bytes[i] + 1)))
            ok = false, err_set(e, ERR_MEMORY, "autotune: out of memory");
    }
    if (ok && !(r->got = malloc(most)))
        ok = false, err_set(e, ERR_MEMORY, "autotune: out of memory");
    return ok;
}

/* The written buffers as before the step, then everything freed. */
static bool release(GpuRun *r, Err *e)
{
    bool ok = true;
    for (int i = 0; i < r->nw; i++) {
        if (r->saved[i] && ok)
            ok = driver_ok(r->cu->cuMemcpyDtoDAsync(addr(r, r->w[i]), r->saved[i], r->bytes[i],
                                                   r->stream), "cuMemcpyDtoDAsync", e);
        free(r->ref[i]);
    }
    ok = ok && driver_ok(r->cu->cuStreamSynchronize(r->stream), "cuStreamSynchronize", e);
    for (int i = 0; i < r->nw; i++)
        if (r->saved[i])
            r->cu->cuMemFree(r->saved[i]);
    if (r->flush)
        r->cu->cuMemFree(r->flush);
    for (int i = 0; i < 2; i++)
        if (r->ev[i])
            r->cu->cuEventDestroy(r->ev[i]);
    free(r->got);
    return ok;
}

/* ---------------------------------------------------------------- measuring */

/* Restore, flush, then the step between two events: its GPU time. */
static bool timed_run(void *ctx, int i, double *seconds, Err *e)
{
    (void)i;
    GpuRun *r = ctx;
    const CudaDriver *cu = r->cu;
    bool ok = true;
    for (int w = 0; ok && w < r->nw; w++)
        ok = driver_ok(cu->cuMemcpyDtoDAsync(addr(r, r->w[w]), r->saved[w], r->bytes[w], r->stream),
                   "cuMemcpyDtoDAsync", e);
    ok = ok && driver_ok(cu->cuMemsetD8Async(r->flush, (unsigned char)i, FLUSH_BYTES, r->stream),
                     "cuMemsetD8Async (L2 flush)", e) &&
         driver_ok(cu->cuEventRecord(r->ev[0], r->stream), "cuEventRecord", e) &&
         cuda_engine_run_step(r->en, r->s, e) &&
         driver_ok(cu->cuEventRecord(r->ev[1], r->stream), "cuEventRecord", e) &&
         driver_ok(cu->cuStreamSynchronize(r->stream), "running a candidate", e);
    float ms = 0;
    ok = ok && driver_ok(cu->cuEventElapsedTime(&ms, r->ev[0], r->ev[1]), "cuEventElapsedTime", e);
    *seconds = ms * 1e-3;
    return ok;
}

/* Buffer w of the latest run into host memory. */
static bool fetch(GpuRun *r, int w, void *host, Err *e)
{
    return driver_ok(r->cu->cuMemcpyDtoHAsync(host, addr(r, r->w[w]), r->bytes[w], r->stream),
                 "cuMemcpyDtoHAsync", e) &&
           driver_ok(r->cu->cuStreamSynchronize(r->stream), "cuStreamSynchronize", e);
}

static TuneStatus measure(void *ctx, const TunePoint *pt, double *seconds, Err *e)
{
    GpuRun *r = ctx;
    CudaStepConfig c = tune_cuda_config(r->sp, pt);
    if (c.path == CUDA_GEMM_LT && c.algo >= (c.separate || !r->nfused ? r->nplain : r->nfused)) {
        err_set(e, ERR_INPUT, "cuBLASLt offers no algorithm %d here", c.algo);
        return TUNE_FAILED;
    }
    if (!cuda_engine_configure(r->en, r->s, &c, e) || !tune_time(timed_run, r, &r->budget, seconds, e))
        return TUNE_FAILED;
    bool reference = memcmp(pt, &(TunePoint){{0}}, sizeof *pt) == 0;
    for (int w = 0; w < r->nw; w++) {
        if (!r->compare[w] && !reference)
            continue;
        if (!fetch(r, w, reference ? r->ref[w] : r->got, e))
            return TUNE_FAILED;
        if (!reference && !tune_agrees(r->p->buf[r->w[w]].dt, r->got, r->ref[w], r->bytes[w]))
            return TUNE_WRONG;
    }
    return TUNE_OK;
}

/* ---------------------------------------------------------------- the target */

typedef struct GpuTarget {
    CudaEngine *en;
    const Program *p;
} GpuTarget;

static void gpu_space(void *ctx, int s, TuneSpace *sp)
{
    const GpuTarget *t = ctx;
    bool gemm = t->p->step[s].kind == STEP_GEMM;
    int nfused = gemm ? cuda_engine_lt_algos(t->en, s, false) : 0;
    int nplain = gemm ? cuda_engine_lt_algos(t->en, s, true) : 0;
    tune_cuda_space(t->p, s, nfused, nplain, sp);
}

static bool gpu_search(void *ctx, int s, const TuneSpace *sp, const TuneBudget *b,
                       TuneResult *res, Err *e)
{
    const GpuTarget *t = ctx;
    GpuRun r = {.en = t->en, .p = t->p, .cu = cuda_driver(NULL),
                .stream = (CUstream)cuda_engine_stream(t->en), .s = s, .sp = sp, .budget = *b};
    if (r.budget.max_runs == 0)
        r.budget = (TuneBudget){10, 100, 0.005};
    bool gemm = t->p->step[s].kind == STEP_GEMM;
    r.nfused = gemm ? cuda_engine_lt_algos(t->en, s, false) : 0;
    r.nplain = gemm ? cuda_engine_lt_algos(t->en, s, true) : 0;
    *res = (TuneResult){0};
    bool ok = engine_current(t->en, e) && collect(&r, e) && tune_descend(sp, measure, &r, 2, res, e);
    Err later = {0};
    return release(&r, ok ? e : &later) && ok;
}

static bool gpu_configure(void *ctx, int s, const TuneSpace *sp, const TunePoint *pt, Err *e)
{
    const GpuTarget *t = ctx;
    CudaStepConfig c = tune_cuda_config(sp, pt);
    return cuda_engine_configure(t->en, s, &c, e);
}

static bool gpu_run_step(void *ctx, int s, Err *e)
{
    const GpuTarget *t = ctx;
    const CudaDriver *cu = cuda_driver(NULL);
    return cuda_engine_run_step(t->en, s, e) &&
           driver_ok(cu->cuStreamSynchronize((CUstream)cuda_engine_stream(t->en)),
                     "running a step again", e);
}

bool tune_cuda(CudaEngine *en, const Program *p, const TuneOptions *o, Err *e)
{
    if (!cuda_engine_symbols(en)) {
        err_set(e, ERR_USAGE, "autotune: run the engine once first (the sizes come from a run)");
        return false;
    }
    char device[160];
    tune_cuda_device(cuda_engine_device(en), device, sizeof device);
    GpuTarget gt = {en, p};
    TuneTarget t = {.p = p, .sb = cuda_engine_symbols(en), .device = device, .ctx = &gt,
                    .space = gpu_space, .search = gpu_search, .configure = gpu_configure,
                    .run_step = gpu_run_step};
    return tune_steps(&t, o, e);
}
