/* data.c — a token file memory-mapped, batches drawn by a producer thread into a ring. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/data.h"

#define MAX_DEPTH 16

struct Loader {
    const uint8_t *map;
    size_t bytes;
    int width;
    int64_t ntok, vocab, B, T;
    uint64_t seed;
    int depth;
    Tensor x[MAX_DEPTH], y[MAX_DEPTH];
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

/* Batch number k into slot s: row r starts at a uniform offset from Philox (seed, k*B + r). */
static void make_batch(Loader *l, uint64_t k, int s)
{
    int64_t *x = l->x[s].data, *y = l->y[s].data, span = l->ntok - l->T;
    for (int64_t r = 0; r < l->B; r++) {
        uint32_t u[4];
        philox4x32(l->seed, k * (uint64_t)l->B + (uint64_t)r, u);
        int64_t at = (int64_t)((((uint64_t)u[0] << 32) | u[1]) % (uint64_t)span);
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
        err_set(e, ERR_INPUT, "%s: cannot read the token file", path);
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

Loader *loader_open(const char *path, int width, int64_t B, int64_t T, uint64_t seed,
                    uint64_t first, int depth, Err *e)
{
    Loader *l = calloc(1, sizeof *l);
    if (!l) {
        err_set(e, ERR_INPUT, "out of memory opening %s", path);
        return NULL;
    }
    *l = (Loader){.width = width, .B = B, .T = T, .seed = seed,
                  .depth = depth < 1 ? 1 : depth > MAX_DEPTH ? MAX_DEPTH : depth,
                  .made = first, .taken = first};
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->changed, NULL);
    bool ok = (width == 1 || width == 2 || width == 4) && map_file(l, path, e);
    if (!ok && err_ok(e))
        err_set(e, ERR_USAGE, "%s: token width %d: expected 1, 2 or 4 bytes", path, width);
    int64_t shape[2] = {B, T};
    for (int s = 0; ok && s < l->depth; s++)
        ok = tensor_alloc(&l->x[s], DT_I64, 2, shape, e) && tensor_alloc(&l->y[s], DT_I64, 2, shape, e);
    ok = ok && pthread_create(&l->thread, NULL, producer, l) == 0;
    l->started = ok;
    if (!ok) {
        if (err_ok(e))
            err_set(e, ERR_INPUT, "%s: cannot start the loader thread", path);
        loader_free(l);
        return NULL;
    }
    return l;
}

bool loader_next(Loader *l, Tensor *inputs, Tensor *targets, Err *e)
{
    pthread_mutex_lock(&l->mu);
    while (l->made == l->taken)
        pthread_cond_wait(&l->changed, &l->mu);
    int s = (int)(l->taken % (uint64_t)l->depth);
    pthread_mutex_unlock(&l->mu);
    int64_t shape[2] = {l->B, l->T};
    bool ok = tensor_alloc(inputs, DT_I64, 2, shape, e) && tensor_alloc(targets, DT_I64, 2, shape, e);
    if (ok) {
        memcpy(inputs->data, l->x[s].data, tensor_nbytes(inputs));
        memcpy(targets->data, l->y[s].data, tensor_nbytes(targets));
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
        tensor_free(&l->x[s]), tensor_free(&l->y[s]);
    if (l->map)
        munmap((void *)l->map, l->bytes);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->changed);
    free(l);
}
