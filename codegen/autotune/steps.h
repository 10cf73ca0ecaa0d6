/* steps.h — tuning a Program step by step, the same walk on every device: each step's key
 * (the device, coil's version, the step's loop IR with buffer names canonicalised, the
 * sizes), identical steps tuned once, the cache consulted before anything is measured,
 * the steps run again in program order so each is measured on the values a real run gives
 * it, the report and the progress bar. What a candidate is and how it is timed is the
 * device's (runtime/cpu/cpu_tune.c, runtime/cuda/cuda_tune.c), through a TuneTarget. */
#ifndef COIL_CODEGEN_AUTOTUNE_STEPS_H
#define COIL_CODEGEN_AUTOTUNE_STEPS_H

#include "codegen/autotune/cache.h"
#include "codegen/autotune/report.h"
#include "codegen/loop.h"

typedef struct TuneOptions {
    TuneCache *cache;   /* choices read and written here; NULL: none */
    bool measure;       /* false: only the cache's choices (a miss keeps the heuristic) */
    bool progress;      /* a progress bar on stderr */
    TuneReport *report; /* every kernel's result (NULL: none) */
    TuneBudget budget;  /* zero: the device's own */
} TuneOptions;

/* A device's engine, as the walk sees it. */
typedef struct TuneTarget {
    const Program *p;
    const SymBind *sb;  /* the sizes of the engine's latest run */
    const char *device; /* this device as the cache keys it */
    void *ctx;
    /* Step s's candidates; nknob 0: nothing to choose. */
    void (*space)(void *ctx, int s, TuneSpace *sp);
    /* Coordinate descent (tune_descend) over sp for step s, each candidate timed alone on
     * the buffers the run so far has left, which it restores after. */
    bool (*search)(void *ctx, int s, const TuneSpace *sp, const TuneBudget *b, TuneResult *r,
                   Err *e);
    /* Step s configured to point pt of sp (all zero: the heuristics). */
    bool (*configure)(void *ctx, int s, const TuneSpace *sp, const TunePoint *pt, Err *e);
    /* Step s run once, as configured (the next step reads what it wrote). */
    bool (*run_step)(void *ctx, int s, Err *e);
} TuneTarget;

/* Decide every step's configuration (cache, else measured and cached when o->measure,
 * else the heuristics) and configure the engine with it. */
bool tune_steps(const TuneTarget *t, const TuneOptions *o, Err *e);

/* The buffers step s writes (w, up to max; compare[i]: whether buffer w[i] is a result to
 * check, not the dead C of a GEMM whose epilogue consumed it) and reads (r). Counts. */
int tune_step_writes(const Program *p, int s, int *w, bool *compare, int max);
int tune_step_reads(const Program *p, int s, int *r, int max);

/* The step's kernel name and shape as the report prints them. */
void tune_describe_step(const Program *p, int s, const SymBind *sb, TuneKernelReport *k);

#endif
