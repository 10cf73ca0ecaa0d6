/* pool.c — the CPU engine's thread pool: persistent workers woken per parallel_for.
 *
 * A call publishes its job with one atomic word, `state` = generation << 16 | chunks, so a
 * worker learns in a single load both that there is new work and whether a chunk of it is
 * its own; workers without a chunk touch nothing else, and the caller may rewrite the job
 * as soon as the workers that have chunks are done. Idle workers spin briefly (kernels
 * come back to back) and then sleep on a condition variable. While tracing, each thread
 * times its chunks into a buffer of its own, drained by the caller between jobs. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/pool.h"

#define POOL_MAX_THREADS 1024 /* chunk counts must fit state's low 16 bits */
#define SPIN_WAKE 2000 /* pauses (10-100 ns each) an idle worker spins before sleeping */
#define YIELD_EVERY 32 /* spinning threads yield this often, in case a thread that has
                          work is waiting for the core (more threads than cores) */

/* A thread's trace buffer, alone on its cache lines: threads append side by side. */
typedef struct TraceBuf {
    _Alignas(64) PoolChunk *chunk;
    int n, cap;
    int64_t dropped;
} TraceBuf;

typedef struct Worker {
    Pool *pool;
    int index; /* 1..nthreads-1; the caller is 0 */
    pthread_t tid;
} Worker;

struct Pool {
    int nthreads;
    Worker *worker; /* nthreads - 1 */
    /* The job: written by the caller before it publishes state, read only by workers
     * whose index is below the published chunk count. */
    PoolFn fn;
    void *ctx;
    int64_t n;
    _Atomic uint64_t state;   /* generation << 16 | chunks */
    _Atomic int pending;      /* worker chunks of the current job not yet done */
    _Atomic int sleepers;     /* workers blocked (or about to block) on cv */
    _Atomic bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    TraceBuf *trace; /* per thread while tracing, else NULL; written between jobs only */
    int tag;         /* the job's tag for traced chunks (part of the job, like fn) */
    bool shared;     /* made by pool_shared (set before anyone else sees the pool) */
    int users;       /* a shared pool's, under shared_mu */
    Pool *next_shared;
    pthread_mutex_t job_mu; /* a shared pool's jobs one at a time */
};

/* The shared pools, one per thread count: the runtime's one piece of process state
 * besides the device registry, since threads are a process's to share. */
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static Pool *shared_pools;

/* One round of a spin-wait: a pause, and now and then the core to whoever needs it. */
static inline void spin_pause(int round)
{
    if (round % YIELD_EVERY == YIELD_EVERY - 1) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int pool_default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* [first, last) run by thread c, timed into its own trace buffer. */
static void traced(Pool *p, int c, int64_t first, int64_t last)
{
    double t0 = clock_seconds();
    p->fn(p->ctx, first, last);
    double t1 = clock_seconds();
    TraceBuf *b = &p->trace[c];
    if (b->n < b->cap)
        b->chunk[b->n++] = (PoolChunk){t0, t1, p->tag, c, first, last};
    else
        b->dropped++;
}

/* Chunk c of the job [0, p->n) split in `chunks` nearly equal contiguous parts (no overflow). */
static void run_chunk(Pool *p, int chunks, int c)
{
    int64_t q = p->n / chunks, r = p->n % chunks;
    int64_t begin = q * c + (c < r ? c : r);
    int64_t end = begin + q + (c < r);
    if (begin >= end)
        return;
    if (p->trace && p->tag >= 0)
        traced(p, c, begin, end);
    else
        p->fn(p->ctx, begin, end);
}

/* Block until state differs from `seen`; spin first since the next job is usually close. */
static uint64_t wait_for_job(Pool *p, uint64_t seen)
{
    for (int i = 0; i < SPIN_WAKE; i++) {
        uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
        if (s != seen)
            return s;
        spin_pause(i);
    }
    /* sleepers is raised before state is re-read, and the caller stores state before it
     * reads sleepers (both seq_cst): either we see the new state or it sees a sleeper and
     * broadcasts under the mutex, so a wake-up is never lost. */
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    uint64_t s;
    while ((s = atomic_load(&p->state)) == seen)
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return s;
}

static void *worker_main(void *arg)
{
    Worker *w = arg;
    Pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return NULL;
        int chunks = (int)(seen & 0xffff);
        if (w->index >= chunks)
            continue; /* not ours: the job's fields may already be the next job's */
        run_chunk(p, chunks, w->index);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

/* Publish a new state and wake sleeping workers. */
static void publish(Pool *p, uint64_t state)
{
    atomic_store(&p->state, state);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void stop_workers(Pool *p, int started)
{
    atomic_store_explicit(&p->stop, true, memory_order_release);
    uint64_t gen = atomic_load(&p->state) >> 16;
    publish(p, (gen + 1) << 16);
    for (int i = 0; i < started; i++)
        pthread_join(p->worker[i].tid, NULL);
}

/* 0: the machine's count, capped (a pool this large is plenty). */
static int threads_wanted(int threads)
{
    if (threads > 0)
        return threads;
    return pool_default_threads() < POOL_MAX_THREADS ? pool_default_threads() : POOL_MAX_THREADS;
}

Pool *pool_new(int threads, Err *e)
{
    if (threads > POOL_MAX_THREADS) { /* asked for: refused, not silently fewer */
        err_set(e, ERR_USAGE, "a pool of %d threads: at most %d are supported", threads,
                POOL_MAX_THREADS);
        return NULL;
    }
    threads = threads_wanted(threads);
    Pool *p = calloc(1, sizeof *p);
    if (p)
        p->worker = calloc((size_t)threads, sizeof *p->worker);
    if (!p || !p->worker) {
        free(p);
        err_set(e, ERR_MEMORY, "out of memory creating a thread pool of %d threads", threads);
        return NULL;
    }
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->job_mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < threads - 1; i++) {
        p->worker[i] = (Worker){.pool = p, .index = i + 1};
        int rc = pthread_create(&p->worker[i].tid, NULL, worker_main, &p->worker[i]);
        if (rc != 0) {
            stop_workers(p, i);
            pool_free(p);
            err_set(e, ERR_INPUT, "cannot start thread %d of %d: %s", i + 2, threads, strerror(rc));
            return NULL;
        }
    }
    return p;
}

Pool *pool_shared(int threads, Err *e)
{
    threads = threads > POOL_MAX_THREADS ? threads : threads_wanted(threads);
    pthread_mutex_lock(&shared_mu);
    Pool *p = shared_pools;
    while (p && p->nthreads != threads)
        p = p->next_shared;
    if (!p && (p = pool_new(threads, e))) {
        p->shared = true;
        p->next_shared = shared_pools;
        shared_pools = p;
    }
    if (p)
        p->users++;
    pthread_mutex_unlock(&shared_mu);
    return p;
}

/* A shared pool's last user gone: out of the list (true), else one user fewer (false). */
static bool shared_release(Pool *p)
{
    pthread_mutex_lock(&shared_mu);
    bool last = --p->users == 0;
    for (Pool **at = &shared_pools; last && *at; at = &(*at)->next_shared)
        if (*at == p) {
            *at = p->next_shared;
            break;
        }
    pthread_mutex_unlock(&shared_mu);
    return last;
}

void pool_free(Pool *p)
{
    if (!p || (p->shared && !shared_release(p)))
        return;
    if (!atomic_load(&p->stop))
        stop_workers(p, p->nthreads - 1);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->job_mu);
    for (int t = 0; p->trace && t < p->nthreads; t++)
        free(p->trace[t].chunk);
    free(p->trace);
    free(p->worker);
    free(p);
}

int pool_threads(const Pool *p) { return p ? p->nthreads : 1; }

/* The barrier: chunks are equal, so the others finish about when the caller does. */
static void wait_pending(Pool *p)
{
    for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        spin_pause(i);
}

void pool_parallel_for(Pool *p, int64_t n, int64_t grain, PoolFn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int64_t most = n / grain;
    int chunks = (int)(most < pool_threads(p) ? most : pool_threads(p));
    if (chunks <= 1 && !(p && p->trace)) {
        fn(ctx, 0, n); /* not worth waking anyone */
        return;
    }
    if (p->shared)
        pthread_mutex_lock(&p->job_mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    if (chunks <= 1) {
        run_chunk(p, 1, 0); /* alone, but traced */
    } else {
        atomic_store_explicit(&p->pending, chunks - 1, memory_order_relaxed);
        uint64_t gen = atomic_load_explicit(&p->state, memory_order_relaxed) >> 16;
        publish(p, (gen + 1) << 16 | (uint64_t)chunks);
        run_chunk(p, chunks, 0);
        wait_pending(p);
    }
    if (p->shared)
        pthread_mutex_unlock(&p->job_mu);
}

/* ---------------------------------------------------------------- tracing */

static bool trace_alloc(Pool *p, int per_thread)
{
    for (int t = 0; t < p->nthreads; t++) {
        PoolChunk *c = realloc(p->trace[t].chunk, (size_t)per_thread * sizeof *c);
        if (!c)
            return false;
        p->trace[t].chunk = c, p->trace[t].cap = per_thread;
    }
    return true;
}

bool pool_trace_start(Pool *p, int per_thread, Err *e)
{
    if (!p->trace) {
        p->trace = aligned_alloc(64, ((size_t)p->nthreads * sizeof *p->trace + 63) / 64 * 64);
        if (p->trace)
            memset(p->trace, 0, (size_t)p->nthreads * sizeof *p->trace);
        p->tag = -1;
    }
    if (!p->trace || !trace_alloc(p, per_thread > 0 ? per_thread : 1)) {
        err_set(e, ERR_MEMORY, "out of memory for the trace buffers of %d threads", p->nthreads);
        return false;
    }
    return true;
}

void pool_trace_tag(Pool *p, int tag)
{
    if (p)
        p->tag = tag;
}

int64_t pool_trace_drain(Pool *p, void (*take)(void *ctx, const PoolChunk *c), void *ctx)
{
    int64_t dropped = 0;
    int most = 0;
    for (int t = 0; p && p->trace && t < p->nthreads; t++) {
        TraceBuf *b = &p->trace[t];
        for (int i = 0; i < b->n; i++)
            take(ctx, &b->chunk[i]);
        dropped += b->dropped;
        most = b->cap > most ? b->cap : most;
        b->n = 0, b->dropped = 0;
    }
    if (dropped > 0 && most < INT32_MAX / 2)
        trace_alloc(p, 2 * most); /* out of memory: the old size stays, and drops go on */
    return dropped;
}
