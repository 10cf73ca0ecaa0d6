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
/* Stops and joins the workers. NULL is fine. */
void pool_free(Pool *p);
int pool_threads(const Pool *p);

/* Run fn over [0, n) split into at most pool_threads(p) contiguous chunks of at least
 * `grain` iterations (static schedule: kernels are regular); the caller runs the first
 * chunk and returns when every chunk is done, so fn's writes are visible after the call.
 * One caller at a time, and fn must not call back into the same pool. p NULL: serial. */
void pool_parallel_for(Pool *p, int64_t n, int64_t grain, PoolFn fn, void *ctx);

#endif
