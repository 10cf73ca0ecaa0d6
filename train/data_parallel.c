/* data_parallel.c — gradients summed over the ranks in buckets (train/data_parallel.h). A
 * bucket is a run of gradients in the order the backward finishes them (the engine's
 * schedule says; else from the last parameter back), packed into one buffer so a small
 * tensor costs no collective of its own; a gradient of a bucket's size or more is reduced
 * where it is, no copy (in f32; reduced in bf16, every bucket is a converted copy). A
 * reduction armed before the run starts each bucket from the engine's step hook as soon
 * as its last gradient is final, so the sums travel while the backward goes on. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_parallel.h"

#define FIRST_BUCKET_BYTES (1 << 20) /* DDP's first bucket: communication starts early */
#define MAX_BUCKETS 4096

typedef struct Bucket {
    int first, last;     /* the gradients order[first..last], reduced together */
    int ready;           /* the step after which all of them are final (-1: before any) */
    int64_t numel;
    void *buf;           /* the packed gradients (f32 or bf16); NULL: one f32 gradient,
                            reduced in place */
} Bucket;

struct DataParallel {
    Comm *comm;
    CommDtype dtype;     /* of the reduction */
    bool sharded;        /* ZeRO: buffers hold f32 too, for the parameters' all-gather */
    double bucket_bytes;
    int *order;          /* the gradients in the order they are final */
    int *final_step;     /* per gradient, the step after which it is final (NULL: unknown) */
    Bucket *bucket;      /* made at the first step, for its gradients' sizes */
    int nbucket;
    /* the reduction in flight: its tensors, what it does, the buckets started */
    Tensor *armed;
    int what;            /* a Collective */
    int started;
    CommOp *op[MAX_BUCKETS];
    Err failed;          /* a bucket that could not start from the step hook */
};

static bool finish(DataParallel *dp, Err *e);

DataParallel *dp_open(const World *w, double timeout_s, double bucket_mb, CommDtype dtype,
                      bool sharded, Err *e)
{
    DataParallel *dp = calloc(1, sizeof *dp);
    if (!dp) {
        err_set(e, ERR_MEMORY, "data-parallel: out of memory");
        return NULL;
    }
    dp->bucket_bytes = (bucket_mb > 0 ? bucket_mb : 25) * 1048576.0;
    dp->dtype = dtype, dp->sharded = sharded;
    dp->comm = comm_open(w, timeout_s, e);
    if (dp->comm)
        return dp;
    free(dp);
    return NULL;
}

void dp_free(DataParallel *dp)
{
    if (!dp)
        return;
    if (dp->armed) /* a run that failed: its started buckets waited for */
        finish(dp, &(Err){0});
    for (int b = 0; b < dp->nbucket; b++)
        free(dp->bucket[b].buf);
    free(dp->bucket), free(dp->order), free(dp->final_step);
    comm_free(dp->comm);
    free(dp);
}

bool dp_broadcast(DataParallel *dp, Tensor *t, int n, Err *e)
{
    for (int i = 0; i < n; i++)
        if (!comm_broadcast(dp->comm, t[i].data, tensor_nbytes(&t[i]), 0, e))
            return false;
    return true;
}

bool dp_set_order(DataParallel *dp, const int *final_step, int n, Err *e)
{
    free(dp->final_step);
    dp->final_step = malloc(((size_t)n + 1) * sizeof *dp->final_step);
    if (!dp->final_step) {
        err_set(e, ERR_MEMORY, "data-parallel: out of memory");
        return false;
    }
    memcpy(dp->final_step, final_step, (size_t)n * sizeof *final_step);
    return true;
}

/* The gradients by the step that finishes them, ties (and, without a schedule, all) from
 * the last parameter back: the order the backward produces them. */
static bool order_grads(DataParallel *dp, int n)
{
    if (!(dp->order = malloc(((size_t)n + 1) * sizeof *dp->order)))
        return false;
    const int *at = dp->final_step;
    for (int k = 0; k < n; k++) { /* insertion: a few hundred gradients, once */
        int i = n - 1 - k, j = k;
        for (; j > 0 && at && at[dp->order[j - 1]] > at[i]; j--)
            dp->order[j] = dp->order[j - 1];
        dp->order[j] = i;
    }
    return true;
}

static bool alone(const Tensor *t) { return (double)tensor_numel(t) * 4 >= FIRST_BUCKET_BYTES; }

/* The buckets for these gradients in that order: a gradient of 1 MiB or more alone,
 * reduced where it is; runs of smaller ones packed, the first bucket up to 1 MiB, the
 * others up to bucket_bytes. */
static bool plan_buckets(DataParallel *dp, const Tensor *grads, int n, Err *e)
{
    dp->bucket = calloc((size_t)n + 1, sizeof *dp->bucket);
    bool ok = dp->bucket != NULL && order_grads(dp, n);
    for (int k = 0; ok && k < n;) {
        Bucket *b = &dp->bucket[dp->nbucket];
        double cap = dp->nbucket == 0 ? FIRST_BUCKET_BYTES : dp->bucket_bytes;
        bool single = alone(&grads[dp->order[k]]);
        b->first = k;
        do
            b->numel += tensor_numel(&grads[dp->order[k++]]);
        while (!single && k < n && !alone(&grads[dp->order[k]]) &&
               (double)(b->numel + tensor_numel(&grads[dp->order[k]])) * 4 <= cap);
        b->last = k - 1;
        b->ready = dp->final_step ? dp->final_step[dp->order[b->last]] : -1;
        bool in_place = single && dp->dtype == COMM_F32;
        size_t width = dp->dtype == COMM_BF16 && !dp->sharded ? 2 : 4;
        b->buf = in_place ? NULL : malloc((size_t)b->numel * width + 1);
        ok = in_place || b->buf;
        dp->nbucket += ok;
    }
    if (!ok)
        err_set(e, ERR_MEMORY, "data-parallel: out of memory for the gradients' buckets");
    return ok;
}

static bool check_grads(const Tensor *grads, int n, Err *e)
{
    for (int i = 0; i < n; i++)
        if (grads[i].dt != DT_F32) {
            err_set(e, ERR_USAGE, "data-parallel: gradient %d is %s; the gradients are reduced "
                    "in f32", i, dtype_info[grads[i].dt].name);
            return false;
        }
    return true;
}

/* n f32 values to and from the reduction's dtype at buf (element `at` on). */
static void pack(CommDtype t, void *buf, int64_t at, const float *g, int64_t n)
{
    if (t == COMM_F32) {
        memcpy((float *)buf + at, g, (size_t)n * sizeof *g);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ((uint16_t *)buf)[at + i] = bf16_pack(g[i]);
}

static void unpack(CommDtype t, const void *buf, int64_t at, float *g, int64_t n)
{
    if (t == COMM_F32) {
        memcpy(g, (const float *)buf + at, (size_t)n * sizeof *g);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        g[i] = bf16_unpack(((const uint16_t *)buf)[at + i]);
}

/* Elements [lo, hi) of the bucket's run of tensors, into its buffer (to) or back (!to), as
 * dtype t; an f32 tensor alone is reduced where it is (nothing to copy). */
static void copy_range(const DataParallel *dp, const Bucket *b, Tensor *t, CommDtype dt,
                       int64_t lo, int64_t hi, bool to)
{
    int64_t at = 0;
    for (int k = b->first; b->buf && k <= b->last && at < hi; k++) {
        int i = dp->order[k];
        int64_t n = tensor_numel(&t[i]), from = lo > at ? lo - at : 0, end = hi - at < n ? hi - at : n;
        if (from < end) {
            if (to)
                pack(dt, b->buf, at + from, (float *)t[i].data + from, end - from);
            else
                unpack(dt, b->buf, at + from, (float *)t[i].data + from, end - from);
        }
        at += n;
    }
}

static void copy_bucket(const DataParallel *dp, Bucket *b, Tensor *grads, bool to)
{
    copy_range(dp, b, grads, dp->dtype, 0, b->numel, to);
}

/* This rank's chunk of bucket b: [*lo, *hi) of its elements. */
static void own_chunk(const DataParallel *dp, const Bucket *b, int64_t *lo, int64_t *hi)
{
    int rank = comm_rank(dp->comm), size = comm_size(dp->comm);
    *lo = comm_chunk_start(b->numel, size, rank), *hi = comm_chunk_start(b->numel, size, rank + 1);
}

bool dp_plan(DataParallel *dp, const Tensor *like, int n, Err *e)
{
    return dp->bucket || (check_grads(like, n, e) && plan_buckets(dp, like, n, e));
}

/* What a bucketed collective does with each bucket: all-reduce the gradients,
 * reduce-scatter them, or all-gather the tensors' chunks. */
typedef enum Collective { SUM_ALL, SUM_OWN, GATHER } Collective;

static CommOp *start_bucket(DataParallel *dp, Bucket *b, Tensor *t, Collective what, Err *e)
{
    void *data = b->buf ? b->buf : t[dp->order[b->first]].data;
    if (what == GATHER) {
        int64_t lo, hi;
        own_chunk(dp, b, &lo, &hi);
        copy_range(dp, b, t, COMM_F32, lo, hi, true);
        return comm_all_gather_start(dp->comm, data, b->numel, COMM_F32, e);
    }
    copy_bucket(dp, b, t, true);
    return what == SUM_ALL ? comm_all_reduce_start(dp->comm, data, b->numel, dp->dtype, e)
                           : comm_reduce_scatter_start(dp->comm, data, b->numel, dp->dtype, e);
}

static void finish_bucket(DataParallel *dp, Bucket *b, Tensor *t, Collective what)
{
    int64_t lo = 0, hi = b->numel;
    if (what == SUM_OWN)
        own_chunk(dp, b, &lo, &hi);
    copy_range(dp, b, t, what == GATHER ? COMM_F32 : dp->dtype, lo, hi, false);
}

/* Arms the collective over every bucket of t[0..n): dp_step_done starts the buckets a
 * step finished, dp_finish the rest. */
static bool arm(DataParallel *dp, Tensor *t, int n, Collective what, Err *e)
{
    if (dp->armed) {
        err_set(e, ERR_INTERNAL, "data-parallel: a reduction armed while another is in flight");
        return false;
    }
    if (!dp_plan(dp, t, n, e))
        return false;
    if (dp->nbucket > MAX_BUCKETS) {
        err_set(e, ERR_INPUT, "data-parallel: more than %d gradient buckets: raise --bucket-mb",
                MAX_BUCKETS);
        return false;
    }
    dp->armed = t, dp->what = what, dp->started = 0, dp->failed = (Err){0};
    return true;
}

/* Buckets in order while their gradients are final at `step` (INT_MAX: all). */
static void start_ready(DataParallel *dp, int step)
{
    while (dp->armed && err_ok(&dp->failed) && dp->started < dp->nbucket &&
           dp->bucket[dp->started].ready <= step) {
        Bucket *b = &dp->bucket[dp->started];
        if (!(dp->op[dp->started] = start_bucket(dp, b, dp->armed, dp->what, &dp->failed)))
            return;
        dp->started++;
    }
}

void dp_step_done(void *ctx, int step) { start_ready(ctx, step); }

/* The rest started, every started one waited for (even after a failure), the results
 * unpacked. */
static bool finish(DataParallel *dp, Err *e)
{
    start_ready(dp, INT_MAX);
    bool ok = err_ok(&dp->failed);
    if (!ok)
        *e = dp->failed;
    for (int b = 0; b < dp->started; b++) {
        bool done = comm_wait(dp->op[b], ok ? e : &(Err){0});
        if (done && ok)
            finish_bucket(dp, &dp->bucket[b], dp->armed, dp->what);
        ok = ok && done;
    }
    dp->armed = NULL, dp->started = 0;
    return ok;
}

/* The collective over every bucket of t[0..n): finishes the one armed for t, or runs it
 * now, each bucket started as soon as it is packed. */
static bool bucketed(DataParallel *dp, Tensor *t, int n, Collective what, Err *e)
{
    if (dp->armed == t && dp->what == (int)what)
        return finish(dp, e);
    return arm(dp, t, n, what, e) && finish(dp, e);
}

bool dp_arm_sum(DataParallel *dp, Tensor *grads, int n, bool own, Err *e)
{
    return arm(dp, grads, n, own ? SUM_OWN : SUM_ALL, e);
}

bool dp_sum_grads(DataParallel *dp, Tensor *grads, int n, Err *e)
{
    return bucketed(dp, grads, n, SUM_ALL, e);
}

bool dp_sum_own_grads(DataParallel *dp, Tensor *grads, int n, Err *e)
{
    return bucketed(dp, grads, n, SUM_OWN, e);
}

bool dp_gather(DataParallel *dp, Tensor *t, int n, Err *e)
{
    return bucketed(dp, t, n, GATHER, e);
}

int dp_shard(const DataParallel *dp, const Tensor *like, DpSlice *out)
{
    int count = 0;
    for (int k = 0; k < dp->nbucket; k++) {
        const Bucket *b = &dp->bucket[k];
        int64_t lo, hi, at = 0;
        own_chunk(dp, b, &lo, &hi);
        for (int k = b->first; k <= b->last; k++) {
            int i = dp->order[k];
            int64_t n = tensor_numel(&like[i]), from = lo > at ? lo - at : 0;
            int64_t end = hi - at < n ? hi - at : n;
            if (from < end && out)
                out[count] = (DpSlice){i, from, end};
            count += from < end;
            at += n;
        }
    }
    return count;
}

bool dp_mean(DataParallel *dp, double *x, Err *e)
{
    bool ok = dp_sum_scalar(dp, x, e);
    *x /= comm_size(dp->comm);
    return ok;
}

bool dp_sum_scalar(DataParallel *dp, double *x, Err *e)
{
    float v = (float)*x;
    if (!comm_all_reduce(dp->comm, &v, 1, e))
        return false;
    *x = (double)v;
    return true;
}

bool dp_barrier(DataParallel *dp, Err *e) { return comm_barrier(dp->comm, e); }
const char *dp_engine(const DataParallel *dp) { return comm_engine(dp->comm); }
int dp_rank(const DataParallel *dp) { return comm_rank(dp->comm); }
int dp_size(const DataParallel *dp) { return comm_size(dp->comm); }

double dp_comm_seconds(const DataParallel *dp) { return comm_busy_seconds(dp->comm); }
double dp_waited_seconds(const DataParallel *dp) { return comm_waited_seconds(dp->comm); }
