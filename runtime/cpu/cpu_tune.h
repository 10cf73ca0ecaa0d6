/* cpu_tune.h — the autotuner on the CPU engine: each step of a Program measured alone on
 * real-shaped buffers, its candidates searched by codegen/autotune's coordinate descent,
 * the fastest correct one configured into the engine and remembered in the cache. */
#ifndef COIL_RUNTIME_TUNE_CPU_H
#define COIL_RUNTIME_TUNE_CPU_H

#include "codegen/autotune/steps.h"
#include "runtime/cpu/cpu_engine.h"

/* Tune the engine's steps at the sizes of its latest run (engine_run first; the steps
 * then run once more, in order, so each is measured on the values it really reads).
 * Identical steps (same loop IR up to buffer names, same sizes) are tuned once. A zero
 * budget: 5 runs, 10 ms of timed runs at least, 200 at most. */
bool tune_cpu(Engine *en, const Program *p, const TuneOptions *o, Err *e);

/* This machine as the cache keys it: the CPU model, a hash of its feature flags, the
 * engine's thread count. */
void tune_cpu_device(char *buf, size_t n, int threads);

#endif
