/* pool.c — the CPU engine's thread pool: persistent workers woken per parallel_for.
 *
 * A call publishes its job with one atomic word, `state` = generation << 16 | chunks, so a
 * worker learns in a single load both that there is new work and whether a chunk of it is
 * its own; workers without a chunk touch nothing else, and the caller may rewrite the job
 * as soon as the workers that have chunks are done. Idle workers spin briefly (kernels
 * come back to back) and then sleep on a condition variable. */
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
};

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

/* Chunk c of [0, n) split in `chunks` nearly equal contiguous parts (no overflow). */
static void run_chunk(PoolFn fn, void *ctx, int64_t n, int chunks, int c)
{
    int64_t q = n / chunks, r = n % chunks;
    int64_t begin = q * c + (c < r ? c : r);
    int64_t end = begin + q + (c < r);
    if (begin < end)
        fn(ctx, begin, end);
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
        run_chunk(p->fn, p->ctx, p->n, chunks, w->index);
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

Pool *pool_new(int threads, Err *e)
{
    if (threads > POOL_MAX_THREADS) { /* asked for: refused, not silently fewer */
        err_set(e, ERR_USAGE, "a pool of %d threads: at most %d are supported", threads,
                POOL_MAX_THREADS);
        return NULL;
    }
    if (threads <= 0) /* the machine's count: capped, a pool this large is plenty */
        threads = pool_default_threads() < POOL_MAX_THREADS ? pool_default_threads()
                                                             : POOL_MAX_THREADS;
    Pool *p = calloc(1, sizeof *p);
    if (p)
        p->worker = calloc((size_t)threads, sizeof *p->worker);
    if (!p || !p->worker) {
        free(p);
        err_set(e, ERR_INPUT, "out of memory creating a thread pool of %d threads", threads);
        return NULL;
    }
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
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

void pool_free(Pool *p)
{
    if (!p)
        return;
    if (!atomic_load(&p->stop))
        stop_workers(p, p->nthreads - 1);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
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
    if (chunks <= 1) {
        fn(ctx, 0, n); /* not worth waking anyone */
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store_explicit(&p->pending, chunks - 1, memory_order_relaxed);
    uint64_t gen = atomic_load_explicit(&p->state, memory_order_relaxed) >> 16;
    publish(p, (gen + 1) << 16 | (uint64_t)chunks);
    run_chunk(fn, ctx, n, chunks, 0);
    wait_pending(p);
}
