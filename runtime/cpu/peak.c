/* peak.c — the machine's f32 FMA peak and copy bandwidth, measured at start-up.
 *
 * The FMA loop keeps 12 independent accumulator vectors in flight, enough to cover the
 * FMA latency (4 cycles) times the issue width (2 per cycle) on current x86 cores, so the
 * loop is throughput-bound. Each ISA variant is compiled for its own target with GCC's
 * target attribute and picked at run time, so one binary measures any x86-64 host. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/cpu/peak.h"

#define NACC 12

/* One variant per vector width: `iters` rounds of NACC vector FMAs; returns a value that
 * depends on every accumulator so the compiler cannot drop the work. Intrinsics, not
 * a*b+c, because ISO C mode does not contract a multiply and an add into an FMA. */
#define FMA_LOOP(NAME, VEC, SET1, FMADD, STORE, LANES, TARGET)                               \
    __attribute__((target(TARGET), noinline)) static float NAME(int64_t iters, float seed) \
    {                                                                                      \
        VEC acc[NACC], mul = SET1(0.999999f), add = SET1(seed * 1e-7f);                    \
        for (int a = 0; a < NACC; a++)                                                     \
            acc[a] = SET1(seed * 1e-7f * (float)(a + 1));                                  \
        for (int64_t i = 0; i < iters; i++)                                                \
            _Pragma("GCC unroll 12") /* keep every accumulator in a register */            \
            for (int a = 0; a < NACC; a++)                                                 \
                acc[a] = FMADD(acc[a], mul, add);                                          \
        float sum = 0, lane[LANES];                                                        \
        for (int a = 0; a < NACC; a++) {                                                   \
            STORE(lane, acc[a]);                                                           \
            for (int l = 0; l < LANES; l++)                                                \
                sum += lane[l];                                                            \
        }                                                                                  \
        return sum;                                                                        \
    }

#if defined(__x86_64__)
#include <immintrin.h>
FMA_LOOP(fma_avx512, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, 16, "avx512f")
FMA_LOOP(fma_avx2, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, 8, "avx2,fma")
#endif

static float fma_scalar(int64_t iters, float seed)
{
    float acc[NACC], add = seed * 1e-7f;
    for (int a = 0; a < NACC; a++)
        acc[a] = add * (float)(a + 1);
    for (int64_t i = 0; i < iters; i++)
        for (int a = 0; a < NACC; a++)
            acc[a] = __builtin_fmaf(acc[a], 0.999999f, add);
    float sum = 0;
    for (int a = 0; a < NACC; a++)
        sum += acc[a];
    return sum;
}

/* The variants, widest first; the first the CPU supports is the one measured. */
static const struct {
    const char *isa;
    int lanes;
    float (*loop)(int64_t, float);
} variants[] = {
#if defined(__x86_64__)
    {"avx512", 16, fma_avx512},
    {"avx2", 8, fma_avx2},
#endif
    {"scalar", 1, fma_scalar},
};

static int variant_index(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
    return 2;
#else
    return 0;
#endif
}

const char *peak_isa(void)
{
    return variants[variant_index()].isa;
}

typedef struct FmaJob {
    int64_t iters;
    float result;
    float (*loop)(int64_t, float);
} FmaJob;

static void *fma_thread(void *arg)
{
    FmaJob *job = arg;
    job->result = job->loop(job->iters, 1.0f);
    return NULL;
}

/* Run `iters` rounds on every thread at once; the wall time. *ran counts the threads
 * that did run (a thread that cannot be created does no work and is not counted). */
static double fma_trial(int threads, int64_t iters, float (*loop)(int64_t, float), int *ran)
{
    pthread_t tid[threads];
    FmaJob job[threads];
    double t0 = clock_seconds();
    int started = 0;
    for (int t = 0; t < threads; t++) {
        job[t] = (FmaJob){iters, 0, loop};
        if (t > 0 && pthread_create(&tid[started], NULL, fma_thread, &job[t]) == 0)
            started++;
    }
    fma_thread(&job[0]);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    *ran = started + 1;
    return clock_seconds() - t0;
}

double peak_fma_gflops(int threads, double seconds)
{
    int v = variant_index();
    if (threads < 1)
        threads = 1;
    /* Calibrate on one short run, then size the trials to the time asked for. */
    int64_t iters = 1 << 16;
    int ran;
    double t = fma_trial(1, iters, variants[v].loop, &ran);
    if (t > 0)
        iters = (int64_t)((double)iters * (seconds / 3) / t) + 1;
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        double dt = fma_trial(threads, iters, variants[v].loop, &ran);
        double flops = 2.0 * NACC * variants[v].lanes * (double)iters * ran;
        if (dt > 0 && flops / dt > best)
            best = flops / dt;
    }
    return best * 1e-9;
}

typedef struct CopyJob {
    char *dst;
    const char *src;
    size_t bytes;
} CopyJob;

static void *copy_thread(void *arg)
{
    CopyJob *job = arg;
    memcpy(job->dst, job->src, job->bytes);
    return NULL;
}

static double copy_trial(int threads, char *dst, const char *src, size_t bytes)
{
    pthread_t tid[threads];
    CopyJob job[threads];
    size_t chunk = bytes / (size_t)threads;
    double t0 = clock_seconds();
    int started = 0;
    for (int t = 0; t < threads; t++) {
        size_t begin = chunk * (size_t)t, n = t == threads - 1 ? bytes - begin : chunk;
        job[t] = (CopyJob){dst + begin, src + begin, n};
        if (t > 0 && pthread_create(&tid[started], NULL, copy_thread, &job[t]) == 0)
            started++;
    }
    copy_thread(&job[0]);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    return clock_seconds() - t0;
}

double peak_copy_gbs(int threads, size_t bytes)
{
    if (threads < 1)
        threads = 1;
    char *src = malloc(bytes), *dst = malloc(bytes);
    double best = 0;
    if (src && dst) {
        memset(src, 1, bytes);
        memset(dst, 0, bytes); /* touch the pages before timing */
        for (int trial = 0; trial < 5; trial++) {
            double dt = copy_trial(threads, dst, src, bytes);
            if (dt > 0 && 2.0 * (double)bytes / dt > best)
                best = 2.0 * (double)bytes / dt;
        }
    }
    free(src);
    free(dst);
    return best * 1e-9;
}
