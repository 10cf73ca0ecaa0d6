/* test_api_pool.c — one thread pool per thread count for all the models of a process:
 * counted in /proc/self/task, loading more models with the same count starts no threads,
 * another count starts its own pool once, and freeing the last model of a count stops its
 * threads. Models sharing a pool and run from two threads at once still compute what the
 * interpreter does. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "api_check.h"
#include "coil/coil.h"

#define NMODELS 4

static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* tiny.coil with `threads` threads, parameters drawn, compiled and warmed up at B=64 (rows
 * enough for the kernels to split over the threads). */
static coil_model *ready(int threads, bool interpret)
{
    coil_options o = {.threads = threads, .interpret = interpret};
    coil_error err;
    coil_model *m = coil_load("examples/tiny.coil", &o, &err);
    CHECK_OK(m && coil_init_params(m, 6, NULL, 0, &err) &&
             coil_prepare(m, (coil_dim_size[]){{"B", 64}}, 1, &err), err);
    return m;
}

static void test_thread_counts(void)
{
    coil_model *m[NMODELS + 1] = {0};
    /* OpenBLAS keeps a pool of its own, process-wide already, grown to the largest count
     * asked for and never shrunk: grown first, so that only coil's threads are counted */
    coil_free(ready(3, false));
    int before = task_count();
    m[0] = ready(3, false);
    int one = task_count();
    for (int i = 1; i < NMODELS; i++)
        m[i] = ready(3, false);
    int four = task_count();
    m[NMODELS] = ready(2, false);
    int other = task_count();
    printf("threads in the process: %d before, %d with one 3-thread model, %d with %d of them, "
           "%d with a 2-thread model too\n", before, one, four, NMODELS, other);
    CHECK(one - before == 2); /* the pool's two workers (the caller is the third) */
    CHECK(four == one);
    CHECK(other - four == 1);
    for (int i = 0; i < NMODELS; i++)
        coil_free(m[i]);
    CHECK(task_count() == other - 2); /* the 3-thread pool's last user gone */
    coil_free(m[NMODELS]);
    CHECK(task_count() == before);
}

typedef struct Job {
    coil_model *m;
    float x[64 * 16], probs[64 * 10];
    bool ok;
} Job;

static void *run_many(void *arg)
{
    Job *j = arg;
    const char *in_name[] = {"x"}, *out_name[] = {"probs"};
    coil_tensor in = {COIL_F32, 2, {64, 16}, j->x};
    coil_tensor out = {COIL_F32, 2, {64, 10}, j->probs};
    j->ok = true;
    for (int r = 0; r < 200 && j->ok; r++)
        j->ok = coil_run_named(j->m, in_name, &in, 1, out_name, &out, 1, NULL);
    return NULL;
}

/* Two models on one pool, run from two threads at once: their jobs take turns. */
static void test_concurrent(void)
{
    static Job job[2];
    pthread_t tid[2];
    coil_model *ref = ready(1, true);
    for (int t = 0; t < 2; t++) {
        job[t].m = ready(2, false);
        for (int i = 0; i < 64 * 16; i++)
            job[t].x[i] = (float)sin(0.01 * i + t);
    }
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&tid[t], NULL, run_many, &job[t]) == 0);
    for (int t = 0; t < 2; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < 2 && ref; t++) {
        float want[64 * 10];
        Job check = {.m = ref};
        memcpy(check.x, job[t].x, sizeof check.x);
        const char *in_name[] = {"x"}, *out_name[] = {"probs"};
        coil_tensor in = {COIL_F32, 2, {64, 16}, check.x}, out = {COIL_F32, 2, {64, 10}, want};
        coil_error err;
        CHECK_OK(coil_run_named(ref, in_name, &in, 1, out_name, &out, 1, &err), err);
        CHECK(job[t].ok);
        for (int i = 0; i < 64 * 10; i++)
            CHECK(fabsf(job[t].probs[i] - want[i]) <= 1e-5f * (1 + want[i]));
    }
    for (int t = 0; t < 2; t++)
        coil_free(job[t].m);
    coil_free(ref);
}

int main(void)
{
    test_thread_counts();
    test_concurrent();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
