/* data.c — a token file memory-mapped, batches drawn by a producer thread into a ring. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/data.h"

#define MAX_DEPTH 16
#define MAX_COLS 8 /* tensors a batch holds: tokens and targets, or one per array */

struct Loader {
    const uint8_t *map;
    size_t bytes;
    int width;
    int64_t ntok, vocab, B, T;
    int64_t row0, stride;   /* this shard's first row of a global batch of `stride` rows */
    uint64_t seed;
    int depth;
    int ncol;
    Tensor slot[MAX_DEPTH][MAX_COLS]; /* batches made ahead: tokens and targets, or rows */
    Tensor *arr;                      /* arrays mode: the datasets (owned), else NULL */
    int64_t rows;                     /* arrays mode: their common leading dimension */
    uint64_t made, taken;   /* batch numbers: made by the thread, taken by the caller */
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    pthread_t thread;
    bool started;
};

static int64_t token(const Loader *l, int64_t i)
{
    const uint8_t *p = l->map + i * l->width;
    if (l->width == 1)
        return p[0];
    if (l->width == 2)
        return (int64_t)p[0] | (int64_t)p[1] << 8;
    return (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Row r of batch k: a uniform draw in [0, n) from Philox (seed, k*stride + row0 + r), the
 * global batch's row row0 + r. */
static int64_t draw(const Loader *l, uint64_t k, int64_t r, int64_t n)
{
    uint32_t u[4];
    philox4x32(l->seed, k * (uint64_t)l->stride + (uint64_t)(l->row0 + r), u);
    return (int64_t)((((uint64_t)u[0] << 32) | u[1]) % (uint64_t)n);
}

/* Batch number k into slot s: T tokens and the T after them from a drawn offset, or the
 * same drawn row of every array. */
static void make_batch(Loader *l, uint64_t k, int s)
{
    if (l->arr) {
        for (int64_t r = 0; r < l->B; r++) {
            int64_t at = draw(l, k, r, l->rows);
            for (int c = 0; c < l->ncol; c++) {
                size_t row = tensor_nbytes(&l->arr[c]) / (size_t)l->rows;
                memcpy((char *)l->slot[s][c].data + (size_t)r * row,
                       (const char *)l->arr[c].data + (size_t)at * row, row);
            }
        }
        return;
    }
    int64_t *x = l->slot[s][0].data, *y = l->slot[s][1].data;
    for (int64_t r = 0; r < l->B; r++) {
        int64_t at = draw(l, k, r, l->ntok - l->T);
        for (int64_t t = 0; t < l->T; t++)
            x[r * l->T + t] = token(l, at + t), y[r * l->T + t] = token(l, at + t + 1);
    }
}

static void *producer(void *arg)
{
    Loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        if (l->made - l->taken >= (uint64_t)l->depth) {
            pthread_cond_wait(&l->changed, &l->mu);
            continue;
        }
        uint64_t k = l->made;
        pthread_mutex_unlock(&l->mu);
        make_batch(l, k, (int)(k % (uint64_t)l->depth)); /* a slot the caller is not reading */
        pthread_mutex_lock(&l->mu);
        l->made++;
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static bool map_file(Loader *l, const char *path, Err *e)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        err_set(e, ERR_FILE, "%s: cannot read the token file", path);
        return false;
    }
    l->bytes = (size_t)st.st_size;
    l->ntok = (int64_t)(l->bytes / (size_t)l->width);
    if (l->bytes % (size_t)l->width || l->ntok < l->T + 1) {
        close(fd);
        err_set(e, ERR_INPUT, "%s: %zu bytes is %s; the data needs at least %lld tokens of %d "
                "bytes", path, l->bytes, l->bytes % (size_t)l->width ? "not whole tokens" : "too short",
                (long long)l->T + 1, l->width);
        return false;
    }
    void *m = mmap(NULL, l->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        err_set(e, ERR_INPUT, "%s: cannot map the token file", path);
        return false;
    }
    l->map = m;
    for (int64_t i = 0; i < l->ntok; i++) {
        int64_t t = token(l, i);
        l->vocab = t + 1 > l->vocab ? t + 1 : l->vocab;
    }
    return true;
}

static Loader *loader_new(int64_t B, uint64_t seed, uint64_t first, int depth, DataShard shard,
                          Err *e)
{
    Loader *l = calloc(1, sizeof *l);
    if (!l) {
        err_set(e, ERR_MEMORY, "out of memory starting a data loader");
        return NULL;
    }
    int parts = shard.parts > 0 ? shard.parts : 1;
    *l = (Loader){.B = B, .seed = seed, .depth = depth < 1 ? 1 : depth > MAX_DEPTH ? MAX_DEPTH : depth,
                  .made = first, .taken = first, .row0 = B * shard.part, .stride = B * parts};
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->changed, NULL);
    return l;
}

/* Slots of the given shapes, then the producer thread. */
static Loader *loader_start(Loader *l, bool ok, const Tensor *like, const char *what, Err *e)
{
    for (int s = 0; ok && s < l->depth; s++)
        for (int c = 0; ok && c < l->ncol; c++) {
            int64_t shape[COIL_MAX_RANK];
            memcpy(shape, like[c].shape, sizeof shape);
            shape[0] = like[c].rank ? l->B : 1;
            ok = tensor_alloc(&l->slot[s][c], like[c].dt, like[c].rank, shape, e);
        }
    ok = ok && pthread_create(&l->thread, NULL, producer, l) == 0;
    l->started = ok;
    if (!ok) {
        if (err_ok(e))
            err_set(e, ERR_INPUT, "%s: cannot start the loader thread", what);
        loader_free(l);
        return NULL;
    }
    return l;
}

Loader *loader_open(const char *path, int width, int64_t B, int64_t T, uint64_t seed,
                    uint64_t first, int depth, DataShard shard, Err *e)
{
    Loader *l = loader_new(B, seed, first, depth, shard, e);
    if (!l)
        return NULL;
    l->width = width, l->T = T, l->ncol = 2;
    bool ok = (width == 1 || width == 2 || width == 4) && map_file(l, path, e);
    if (!ok && err_ok(e))
        err_set(e, ERR_USAGE, "%s: token width %d: expected 1, 2 or 4 bytes", path, width);
    Tensor like = {.dt = DT_I64, .rank = 2, .shape = {B, T}};
    Tensor both[2] = {like, like};
    return loader_start(l, ok, both, path, e);
}

Loader *loader_open_arrays(Tensor *arrays, const char *const *names, int n, int64_t B,
                           uint64_t seed, uint64_t first, int depth, DataShard shard, Err *e)
{
    Loader *l = loader_new(B, seed, first, depth, shard, e);
    bool ok = l != NULL;
    for (int c = 0; ok && c < n; c++) {
        ok = arrays[c].rank >= 1 && arrays[c].shape[0] > 0 && (c == 0 || arrays[c].shape[0] == arrays[0].shape[0]);
        if (!ok)
            err_set(e, ERR_INPUT, "--input %s: a dataset needs a leading dimension of samples, "
                    "the same in every array (%s has %lld, %s %lld)", names[c], names[0],
                    (long long)arrays[0].shape[0], names[c],
                    (long long)(arrays[c].rank ? arrays[c].shape[0] : 0));
    }
    if (!l) {
        for (int c = 0; c < n; c++)
            tensor_free(&arrays[c]);
        return NULL;
    }
    if (ok && n > MAX_COLS) {
        err_set(e, ERR_USAGE, "--input: at most %d arrays", MAX_COLS);
        ok = false;
    }
    l->arr = calloc((size_t)n + 1, sizeof *l->arr);
    ok = ok && l->arr;
    for (int c = 0; c < n; c++) /* taken over, even on failure */
        if (l->arr)
            l->arr[c] = arrays[c], arrays[c] = (Tensor){0};
    l->ncol = ok ? n : 0, l->rows = ok ? l->arr[0].shape[0] : 0;
    return loader_start(l, ok, l->arr, "--input", e);
}

bool loader_take(Loader *l, Tensor *const *out, Err *e)
{
    pthread_mutex_lock(&l->mu);
    while (l->made == l->taken)
        pthread_cond_wait(&l->changed, &l->mu);
    int s = (int)(l->taken % (uint64_t)l->depth);
    pthread_mutex_unlock(&l->mu);
    bool ok = true;
    for (int c = 0; ok && c < l->ncol; c++) {
        const Tensor *from = &l->slot[s][c];
        tensor_free(out[c]);
        ok = tensor_alloc(out[c], from->dt, from->rank, from->shape, e);
        if (ok)
            memcpy(out[c]->data, from->data, tensor_nbytes(from));
    }
    pthread_mutex_lock(&l->mu);
    l->taken++;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

uint64_t loader_position(const Loader *l) { return l->taken; }
int64_t loader_vocab(const Loader *l) { return l->vocab; }
int64_t loader_tokens(const Loader *l) { return l->ntok; }

void loader_free(Loader *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->changed);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    for (int s = 0; s < MAX_DEPTH; s++)
        for (int c = 0; c < MAX_COLS; c++)
            tensor_free(&l->slot[s][c]);
    for (int c = 0; l->arr && c < l->ncol; c++)
        tensor_free(&l->arr[c]);
    free(l->arr);
    if (l->map)
        munmap((void *)l->map, l->bytes);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->changed);
    free(l);
}
