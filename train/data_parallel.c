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
    double bucket_bytes;
    Bucket *bucket;      /* made at the first step, for its gradients' sizes */
    int nbucket;
};

DataParallel *dp_open(const World *w, double timeout_s, double bucket_mb, CommDtype dtype, Err *e)
{
    DataParallel *dp = calloc(1, sizeof *dp);
    if (!dp) {
        err_set(e, ERR_MEMORY, "data-parallel: out of memory");
        return NULL;
    }
    dp->bucket_bytes = (bucket_mb > 0 ? bucket_mb : 25) * 1048576.0;
    dp->dtype = dtype;
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
        b->buf = in_place ? NULL : malloc((size_t)b->numel * (dp->dtype == COMM_BF16 ? 2 : 4) + 1);
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

/* The bucket's gradients into its buffer (to) or back (!to); an f32 gradient alone is
 * reduced where it is. */
static void copy_bucket(const DataParallel *dp, Bucket *b, Tensor *grads, bool to)
{
    int64_t at = 0;
    for (int i = b->first; b->buf && i <= b->last; i++) {
        int64_t n = tensor_numel(&grads[i]);
        if (to)
            pack(dp->dtype, b->buf, at, grads[i].data, n);
        else
            unpack(dp->dtype, b->buf, at, grads[i].data, n);
        at += n;
    }
}

bool dp_sum_grads(DataParallel *dp, Tensor *grads, int n, Err *e)
{
    if (!dp->bucket && !(check_grads(grads, n, e) && plan_buckets(dp, grads, n, e)))
        return false;
    CommOp *op[MAX_BUCKETS];
    int started = 0;
    bool ok = dp->nbucket <= MAX_BUCKETS;
    if (!ok)
        err_set(e, ERR_INPUT, "data-parallel: more than %d gradient buckets: raise --bucket-mb",
                MAX_BUCKETS);
    for (; ok && started < dp->nbucket; started++) { /* each starts as soon as it is packed */
        Bucket *b = &dp->bucket[started];
        copy_bucket(dp, b, grads, true);
        op[started] = comm_all_reduce_start(dp->comm, b->buf ? b->buf : grads[b->first].data,
                                            b->numel, dp->dtype, e);
        ok = op[started] != NULL;
    }
    for (int b = 0; b < started; b++) { /* every started one waited for, even after a failure */
        bool done = comm_wait(op[b], e);
        if (done && ok)
            copy_bucket(dp, &dp->bucket[b], grads, false);
        ok = ok && done;
    }
    return ok;
}

bool dp_mean(DataParallel *dp, double *x, Err *e)
{
    float v = (float)*x;
    if (!comm_all_reduce(dp->comm, &v, 1, e))
        return false;
    *x = (double)v / comm_size(dp->comm);
    return true;
}

double dp_comm_seconds(const DataParallel *dp) { return comm_busy_seconds(dp->comm); }
double dp_waited_seconds(const DataParallel *dp) { return comm_waited_seconds(dp->comm); }
