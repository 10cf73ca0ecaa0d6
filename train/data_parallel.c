/* data_parallel.c — gradients summed over the ranks in buckets (train/data_parallel.h). A
 * bucket is a run of consecutive gradients, taken from the last parameter back (the order
 * the backward finishes them), packed into one buffer so a small tensor costs no
 * collective of its own; a gradient of a bucket's size or more is reduced where it is,
 * no copy (in f32; reduced in bf16, every bucket is a converted copy). */
#include <stdlib.h>
#include <string.h>

#include "train/data_parallel.h"

#define FIRST_BUCKET_BYTES (1 << 20) /* DDP's first bucket: communication starts early */
#define MAX_BUCKETS 4096

typedef struct Bucket {
    int first, last;     /* gradients [first, last], reduced together */
    int64_t numel;
    void *buf;           /* the packed gradients (f32 or bf16); NULL: one f32 gradient,
                            reduced in place */
} Bucket;

struct DataParallel {
    Comm *comm;
    CommDtype dtype;     /* of the reduction */
    bool sharded;        /* ZeRO: buffers hold f32 too, for the parameters' all-gather */
    double bucket_bytes;
    Bucket *bucket;      /* made at the first step, for its gradients' sizes */
    int nbucket;
};

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
    for (int b = 0; b < dp->nbucket; b++)
        free(dp->bucket[b].buf);
    free(dp->bucket);
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

/* The buckets for these gradients, from the last back: a gradient of 1 MiB or more alone,
 * reduced where it is; runs of smaller ones packed, the first bucket up to 1 MiB, the
 * others up to bucket_bytes. */
static bool plan_buckets(DataParallel *dp, const Tensor *grads, int n, Err *e)
{
    dp->bucket = calloc((size_t)n + 1, sizeof *dp->bucket);
    bool ok = dp->bucket != NULL;
    for (int i = n - 1; ok && i >= 0;) {
        Bucket *b = &dp->bucket[dp->nbucket];
        double cap = dp->nbucket == 0 ? FIRST_BUCKET_BYTES : dp->bucket_bytes;
        bool alone = (double)tensor_numel(&grads[i]) * 4 >= FIRST_BUCKET_BYTES;
        bool in_place = alone && dp->dtype == COMM_F32;
        b->last = i;
        do
            b->numel += tensor_numel(&grads[i--]);
        while (!alone && i >= 0 && (double)tensor_numel(&grads[i]) * 4 < FIRST_BUCKET_BYTES &&
               (double)(b->numel + tensor_numel(&grads[i])) * 4 <= cap);
        b->first = i + 1;
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
static void copy_range(const Bucket *b, Tensor *t, CommDtype dt, int64_t lo, int64_t hi, bool to)
{
    int64_t at = 0;
    for (int i = b->first; b->buf && i <= b->last && at < hi; i++) {
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
    copy_range(b, grads, dp->dtype, 0, b->numel, to);
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
    void *data = b->buf ? b->buf : t[b->first].data;
    if (what == GATHER) {
        int64_t lo, hi;
        own_chunk(dp, b, &lo, &hi);
        copy_range(b, t, COMM_F32, lo, hi, true);
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
    copy_range(b, t, what == GATHER ? COMM_F32 : dp->dtype, lo, hi, false);
}

/* The collective over every bucket of t[0..n), each started as soon as it is packed. */
static bool bucketed(DataParallel *dp, Tensor *t, int n, Collective what, Err *e)
{
    if (!dp_plan(dp, t, n, e))
        return false;
    CommOp *op[MAX_BUCKETS];
    int started = 0;
    bool ok = dp->nbucket <= MAX_BUCKETS;
    if (!ok)
        err_set(e, ERR_INPUT, "data-parallel: more than %d gradient buckets: raise --bucket-mb",
                MAX_BUCKETS);
    for (; ok && started < dp->nbucket; started++)
        ok = (op[started] = start_bucket(dp, &dp->bucket[started], t, what, e)) != NULL;
    for (int b = 0; b < started; b++) { /* every started one waited for, even after a failure */
        bool done = comm_wait(op[b], e);
        if (done && ok)
            finish_bucket(dp, &dp->bucket[b], t, what);
        ok = ok && done;
    }
    return ok;
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
        for (int i = b->first; i <= b->last; i++) {
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

int dp_rank(const DataParallel *dp) { return comm_rank(dp->comm); }
int dp_size(const DataParallel *dp) { return comm_size(dp->comm); }

double dp_comm_seconds(const DataParallel *dp) { return comm_busy_seconds(dp->comm); }
double dp_waited_seconds(const DataParallel *dp) { return comm_waited_seconds(dp->comm); }
