/* pool.h — a small persistent thread pool for the CPU engine: N-1 workers plus the
 * caller split a range into contiguous chunks, one per thread, and meet at a barrier. */
#ifndef COIL_RUNTIME_POOL_H
#define COIL_RUNTIME_POOL_H

#include "ir/ir.h"

typedef struct Pool Pool;

/* One chunk of work: iterations [begin, end) of the range, with the caller's context. */
typedef void (*PoolFn)(void *ctx, int64_t begin, int64_t end);

/* The threads a pool gets by default: the CPUs this process may run on. */
int pool_default_threads(void);
/* A pool of `threads` threads in all, the caller included (0: pool_default_threads, at
 * most POOL_MAX_THREADS); NULL with e set when threads cannot be started or more than
 * that many are asked for. */
Pool *pool_new(int threads, Err *e);
/* The process's pool of that many threads (0: pool_default_threads), started at its
 * first use and shared by every caller asking for the same count: engines loaded side by
 * side start their threads once. Its jobs take turns (pool_parallel_for waits while
 * another thread's job runs), so callers may use it from different threads. Each
 * pool_shared is matched by a pool_free; the last stops the workers. */
Pool *pool_shared(int threads, Err *e);
/* Stops and joins the workers (a shared pool: when its last user frees it). NULL is fine. */
void pool_free(Pool *p);
int pool_threads(const Pool *p);

/* Run fn over [0, n) split into at most pool_threads(p) contiguous chunks of at least
 * `grain` iterations (static schedule: kernels are regular); the caller runs the first
 * chunk and returns when every chunk is done, so fn's writes are visible after the call.
 * One caller at a time, and fn must not call back into the same pool. p NULL: serial. */
void pool_parallel_for(Pool *p, int64_t n, int64_t grain, PoolFn fn, void *ctx);

/* ---------------------------------------------------------------- tracing */

/* One chunk as a thread ran it (runtime/trace.h turns these into trace events). */
typedef struct PoolChunk {
    double start, end;   /* clock_seconds() */
    int tag;             /* pool_trace_tag's value when it ran (the engine's step) */
    int thread;          /* 0: the caller, 1..threads-1: the workers */
    int64_t first, last; /* the iterations [first, last) */
} PoolChunk;

/* Record every chunk from now on into a buffer per thread, preallocated for `per_thread`
 * chunks: a thread appends to its own buffer only, so the hot path takes no lock, and a
 * pool not tracing pays one predictable branch per chunk. False (e set) out of memory. */
bool pool_trace_start(Pool *p, int per_thread, Err *e);
/* The tag recorded with the chunks of the jobs that follow; a negative tag: not recorded
 * (work outside a traced run). Call between jobs, as pool_parallel_for is called. */
void pool_trace_tag(Pool *p, int tag);
/* Hand each recorded chunk to take (per thread, in order), then empty the buffers. Call
 * between jobs (the workers touch their buffers only inside one). A buffer that filled up
 * dropped chunks: they are counted in the return value, and the buffers are doubled for
 * the next time. */
int64_t pool_trace_drain(Pool *p, void (*take)(void *ctx, const PoolChunk *c), void *ctx);

#endif
