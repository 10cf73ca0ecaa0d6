/* test_pool.c — the thread pool: every index visited exactly once, chunks contiguous and
 * at least `grain` long, the barrier (results visible after the call), many tiny calls,
 * ranges shorter than the thread count, empty ranges, clean shutdown, and tracing (every
 * chunk recorded once with its job's tag and thread, overflow counted, then room made). */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "runtime/pool.h"

typedef struct Visit {
    int *count;          /* per index: how many times it was visited */
    _Atomic int calls;   /* chunks run */
    _Atomic int64_t min_chunk;
} Visit;

static void visit(void *ctx, int64_t begin, int64_t end)
{
    Visit *v = ctx;
    for (int64_t i = begin; i < end; i++)
        v->count[i]++; /* disjoint chunks: no two threads touch one index */
    atomic_fetch_add(&v->calls, 1);
    int64_t len = end - begin, cur = atomic_load(&v->min_chunk);
    while (len < cur && !atomic_compare_exchange_weak(&v->min_chunk, &cur, len))
        ;
}

/* Run one parallel_for over [0, n) and check coverage and chunking. */
static void check_cover(Pool *p, int64_t n, int64_t grain)
{
    Visit v = {.count = calloc((size_t)(n > 0 ? n : 1), sizeof(int)), .min_chunk = INT64_MAX};
    pool_parallel_for(p, n, grain, visit, &v);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += v.count[i] != 1;
    CHECK(bad == 0);
    int calls = atomic_load(&v.calls);
    CHECK(calls <= pool_threads(p));
    CHECK(n == 0 ? calls == 0 : calls >= 1);
    if (calls > 1)
        CHECK(atomic_load(&v.min_chunk) >= (grain > 0 ? grain : 1));
    free(v.count);
}

typedef struct Sum {
    const int64_t *x;
    _Atomic int64_t total;
} Sum;

static void sum_chunk(void *ctx, int64_t begin, int64_t end)
{
    Sum *s = ctx;
    int64_t acc = 0;
    for (int64_t i = begin; i < end; i++)
        acc += s->x[i];
    atomic_fetch_add(&s->total, acc);
}

static void test_sum(Pool *p)
{
    enum { N = 1000003 };
    int64_t *x = malloc(N * sizeof *x);
    for (int64_t i = 0; i < N; i++)
        x[i] = i % 7 - 3 + i;
    int64_t want = 0;
    for (int64_t i = 0; i < N; i++)
        want += x[i];
    for (int round = 0; round < 20; round++) {
        Sum s = {.x = x};
        pool_parallel_for(p, N, 1024, sum_chunk, &s);
        CHECK(atomic_load(&s.total) == want);
    }
    free(x);
}

static void add_one(void *ctx, int64_t begin, int64_t end)
{
    int64_t *x = ctx;
    for (int64_t i = begin; i < end; i++)
        x[i] += 1;
}

/* Many tiny jobs back to back: each must see the previous one's writes (the barrier).
 * Each job waits for every worker, and with more workers than free cores each such wait
 * can cost a scheduler time slice: 100,000 jobs took 7 s on an idle 2-core machine and
 * minutes on a loaded one; 10,000 still take every worker across the barrier thousands of
 * times. */
#define TINY_CALLS 10000
static void test_tiny_calls(Pool *p)
{
    int64_t x[16] = {0};
    for (int r = 0; r < TINY_CALLS; r++)
        pool_parallel_for(p, 16, 1, add_one, x);
    int bad = 0;
    for (int i = 0; i < 16; i++)
        bad += x[i] != TINY_CALLS;
    CHECK(bad == 0);
}

static void never(void *ctx, int64_t begin, int64_t end)
{
    (void)begin, (void)end;
    atomic_fetch_add((_Atomic int *)ctx, 1);
}

static void test_pool(int threads)
{
    Err e = {0};
    Pool *p = pool_new(threads, &e);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    CHECK(pool_threads(p) == (threads > 0 ? threads : pool_default_threads()));
    check_cover(p, 1000, 1);
    check_cover(p, 1000, 300);   /* at most 3 chunks */
    check_cover(p, 1000, 5000);  /* one chunk: the caller alone */
    check_cover(p, 3, 1);        /* fewer iterations than threads */
    check_cover(p, 1, 1);
    check_cover(p, 0, 1);
    check_cover(p, 12345, 0);    /* grain 0 means 1 */
    _Atomic int called = 0;
    pool_parallel_for(p, 0, 1, never, &called);
    pool_parallel_for(p, -5, 1, never, &called);
    CHECK(atomic_load(&called) == 0);
    test_sum(p);
    test_tiny_calls(p);
    pool_free(p);
}

/* Workers that went to sleep must wake up for the next job. */
static void test_sleep_wake(void)
{
    Err e = {0};
    Pool *p = pool_new(4, &e);
    if (!p)
        return;
    for (int r = 0; r < 3; r++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL); /* long past the spin: every worker is asleep */
        check_cover(p, 4000, 1);
    }
    pool_free(p);
}

/* What a drain saw: per tag, the iterations its chunks covered and their threads. */
typedef struct Seen {
    int64_t covered[3];
    int chunks, bad;
    int threads;
} Seen;

static void take_chunk(void *ctx, const PoolChunk *c)
{
    Seen *s = ctx;
    s->chunks++;
    if (c->tag < 0 || c->tag > 2 || c->thread < 0 || c->thread >= s->threads ||
        c->first >= c->last || c->end < c->start) {
        s->bad++;
        return;
    }
    s->covered[c->tag] += c->last - c->first;
}

static void test_trace(int threads)
{
    Err e = {0};
    Pool *p = pool_new(threads, &e);
    CHECK(p && pool_trace_start(p, 4, &e));
    Visit v = {.count = calloc(1000, sizeof(int)), .min_chunk = INT64_MAX};
    pool_trace_tag(p, -1);
    pool_parallel_for(p, 1000, 1, visit, &v); /* untagged: not recorded */
    for (int tag = 0; tag < 3; tag++) {
        pool_trace_tag(p, tag);
        pool_parallel_for(p, 100 * (tag + 1), 1, visit, &v);
    }
    pool_parallel_for(p, 7, 100, visit, &v); /* one chunk, on the caller, still recorded */
    Seen s = {.threads = pool_threads(p)};
    CHECK(pool_trace_drain(p, take_chunk, &s) == 0);
    CHECK(s.bad == 0);
    CHECK(s.covered[0] == 100 && s.covered[1] == 200 && s.covered[2] == 300 + 7);
    /* more jobs than the 4 chunks a thread holds: the rest are counted as dropped, and the
     * next drain's buffers are large enough */
    for (int i = 0; i < 10; i++)
        pool_parallel_for(p, 1000, 1, visit, &v);
    Seen over = {.threads = pool_threads(p)};
    int64_t dropped = pool_trace_drain(p, take_chunk, &over);
    CHECK(dropped > 0 && over.chunks == 4 * pool_threads(p));
    CHECK(over.chunks + dropped == 10 * pool_threads(p));
    for (int i = 0; i < 8; i++)
        pool_parallel_for(p, 1000, 1, visit, &v);
    Seen after = {.threads = pool_threads(p)};
    CHECK(pool_trace_drain(p, take_chunk, &after) == 0 && after.chunks == 8 * pool_threads(p));
    free(v.count);
    pool_free(p);
}

int main(void)
{
    CHECK(pool_default_threads() >= 1);
    test_pool(1);
    test_pool(2);
    test_pool(4);
    test_pool(7);
    test_pool(0);
    test_sleep_wake();
    test_trace(1);
    test_trace(3);
    check_cover(NULL, 100, 1); /* no pool: serial */
    pool_free(NULL);
    for (int i = 0; i < 50; i++) { /* create and shut down quickly, workers still spinning */
        Err e = {0};
        pool_free(pool_new(3, &e));
    }
    return check_status();
}
