/* clock.c — the monotonic clock every timing in coil reads (compile stages, benchmarks,
 * the autotuner, training steps). */
#include <time.h>

#include "base/base.h"

double clock_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
