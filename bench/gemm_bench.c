/* gemm_bench.c — GFLOP/s of coil's tiled GEMM (runtime/cpu/gemm_tiled.c on the generated
 * micro-kernels) against OpenBLAS (runtime/cpu/gemm.c's gemm_run) and the machine's FMA peak.
 *
 *   gemm_bench [--threads 1,2] [--seconds S] [--only NAME]   the model shapes, a row each
 *   gemm_bench --shape M,N,K[,dot|bcast|wgrad[,BATCH]]  one shape (dot: B given as [N, K];
 *                                                     wgrad: A as [K, M], B as [K, N], the
 *                                                     weight gradient g^T x)
 *   gemm_bench --kernels [--kc N]                     the micro-kernels alone, in cache
 *   --dot MRxNR, --bcast MRxNR: other tiles than the host's; --offset A,B: A's and B's
 *   first element that many floats past a 64-byte boundary (default 0, aligned);
 *   --weights W: W different B operands, one per call in turn (default 1), so B streams
 *   from L3 or memory as a model's weights do (the MLP has 24 of 4 MiB)
 *   --tiling FORM[,KC[,MC]]: the form (auto, dot, bcast), k per block and row tiles per
 *   macro block instead of the heuristic's (0: its choice); several, '/' apart, are timed
 *   call by call in turn for --rounds rounds (default 15) with OpenBLAS, medians compared
 *
 * OpenBLAS picks its kernels when it loads, from OPENBLAS_CORETYPE or its CPU detection;
 * the core it runs is printed, so run the binary once per core type to compare. Every
 * rate is the best of 5 trials of about --seconds / 5 each; `other` is the share of all
 * CPUs that other processes used meanwhile (a shared machine disturbs the rows it marks). */
#include <cblas.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cpu/gemm.h"
#include "runtime/cpu/gemm_tiled.h"
#include "runtime/cpu/peak.h"
#include "tests/unit/ukernel_jit.h"

/* C's row length travels in this symbol (no Dim uses it): TileFns only see syms. */
#define SYM_LDC (COIL_MAX_SYMS - 1)

typedef struct Shape {
    const char *name;
    int64_t batch, m, n, k;
    bool dot; /* B given as B^T [N, K] (a weight), else as [K, N] */
    int qkv;  /* attention as GPT-2 lays it out: q, k, v are column slices of one [T, 3C]
                 buffer, heads its batch: 1 q@k^T, 2 p@v (p dense) */
    bool at;  /* A given as A^T [K, M] */
} Shape;

static const Shape shapes[] = {
    {"mlp 128x1024x1024", 1, 128, 1024, 1024, true, 0, false},
    {"mlp 128x512x1024", 1, 128, 512, 1024, true, 0, false},
    {"mlp 128x1000x512", 1, 128, 1000, 512, true, 0, false},
    {"gpt2 qkv 1024x2304x768", 1, 1024, 2304, 768, true, 0, false},
    {"gpt2 proj 1024x768x768", 1, 1024, 768, 768, true, 0, false},
    {"gpt2 fc 1024x3072x768", 1, 1024, 3072, 768, true, 0, false},
    {"gpt2 fc2 1024x768x3072", 1, 1024, 768, 3072, true, 0, false},
    {"attn q@k^T 12x128x128x64", 12, 128, 128, 64, true, 1, false},
    {"attn p@v 12x128x64x128", 12, 128, 64, 128, false, 2, false},
    {"bcast 1024x768x768", 1, 1024, 768, 768, false, 0, false},
    {"mlp dW 1024x1024x128", 1, 1024, 1024, 128, false, 0, true},
};

/* The machine is shared: what the other processes took of all CPUs while a row was
 * measured (/proc/stat's busy time less this process's own), printed with the row so a
 * disturbed measurement shows. */
typedef struct Load {
    double busy, own, wall;
} Load;

static Load load_now(void)
{
    Load l = {0, 0, clock_seconds()};
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (f && fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8)
        l.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
    if (f)
        fclose(f);
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    l.own = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
    return l;
}

static double load_other(Load a, Load b)
{
    double other = (b.busy - a.busy) - (b.own - a.own);
    double all = (b.wall - a.wall) * (double)sysconf(_SC_NPROCESSORS_ONLN);
    return all > 0 && other > 0 ? other / all : 0;
}

static void store_tile(const float *tile, int64_t ldt, void *const *bufs, const int64_t *syms,
                       int64_t row0, int64_t col0, int64_t mr, int64_t nr)
{
    float *c = (float *)bufs[2] + row0 * syms[SYM_LDC] + col0;
    for (int64_t i = 0; i < mr; i++)
        memcpy(c + i * syms[SYM_LDC], tile + i * ldt, (size_t)nr * sizeof *c);
}

/* A GEMM of shape s over dense operands: A [batch, M, K], B as B^T [batch, N, K] (dot) or
 * [batch, K, N], C [batch, M, N]. */
typedef struct Problem {
    Gemm g;
    void *bufs[3];
    DType dts[3];
    SymBind sb;
    void **weights;  /* nweights B operands; bufs[1] is one of them */
    int nweights, next;
} Problem;

/* 64-byte aligned, as coil's engine and PyTorch allocate. */
static float *random_floats(int64_t n)
{
    float *p = aligned_alloc(64, ((size_t)n * sizeof(float) + 127) / 64 * 64);
    for (int64_t i = 0; p && i < n; i++)
        p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

/* A GEMM over dense operands: A [batch, M, K], B as B^T [batch, N, K] (dot) or
 * [batch, K, N], C [batch, M, N]; off[0], off[1]: A's and B's first element, in floats past
 * a 64-byte boundary. */
static Problem problem(const Shape *s, const int64_t off[2], int nweights)
{
    Problem p = {.dts = {DT_F32, DT_F32, DT_F32}};
    Gemm *g = &p.g;
    *g = (Gemm){.nbatch = 1, .batch = {dim_static(s->batch)}, .m = dim_static(s->m),
                .n = dim_static(s->n), .k = dim_static(s->k), .epilogue = -1};
    g->a = (GemmOperand){0, dim_static(off[0]), {dim_static(s->m * s->k)},
                         dim_static(s->at ? 1 : s->k), dim_static(s->at ? s->m : 1)};
    g->b = (GemmOperand){1, dim_static(off[1]), {dim_static(s->k * s->n)},
                         dim_static(s->dot ? 1 : s->n), dim_static(s->dot ? s->k : 1)};
    g->c = (GemmOperand){2, dim_static(0), {dim_static(s->m * s->n)}, dim_static(s->n), dim_static(1)};
    int64_t na = s->batch * s->m * s->k, nb = s->batch * s->k * s->n;
    if (s->qkv) { /* heads of 64 side by side in rows of 3C = 3 * heads * 64 */
        int64_t c3 = 3 * s->batch * 64, t = s->qkv == 1 ? s->m : s->k;
        if (s->qkv == 1) /* A = q, B = k^T */
            g->a = (GemmOperand){0, dim_static(off[0]), {dim_static(64)}, dim_static(c3), dim_static(1)};
        g->b = (GemmOperand){s->qkv == 1 ? 0 : 1, dim_static(off[1] + s->batch * 64 * s->qkv),
                             {dim_static(64)}, dim_static(s->qkv == 1 ? 1 : c3),
                             dim_static(s->qkv == 1 ? c3 : 1)};
        na = s->qkv == 1 ? t * c3 : na;
        nb = s->qkv == 1 ? 1 : t * c3;
    }
    p.bufs[0] = random_floats(na + off[0] + off[1]);
    p.nweights = s->qkv == 1 || nweights < 1 ? 1 : nweights; /* q@k^T's B lies in A */
    p.weights = calloc((size_t)p.nweights, sizeof *p.weights);
    for (int w = 0; w < p.nweights; w++)
        p.weights[w] = random_floats(nb + off[1]);
    p.bufs[1] = p.weights[0];
    p.bufs[2] = random_floats(s->batch * s->m * s->n);
    p.sb.val[SYM_LDC] = s->n;
    return p;
}

static void problem_free(Problem *p)
{
    free(p->bufs[0]);
    free(p->bufs[2]);
    for (int w = 0; w < p->nweights; w++)
        free(p->weights[w]);
    free(p->weights);
}

typedef struct Runner {
    bool blas;
    Problem *p;
    const Ukernels *uk;
    Pool *pool;
    const GemmTiling *how; /* --tiling, else NULL: the heuristic's */
} Runner;

static bool run_once(const Runner *r, Err *e)
{
    Problem *p = r->p;
    if (p->nweights > 1 && p->g.b.buf == 1) {
        p->next = (p->next + 1) % p->nweights;
        p->bufs[1] = p->weights[p->next];
    }
    if (r->blas)
        return gemm_run(&p->g, p->bufs, p->dts, &p->sb, e);
    return gemm_tiled_run(&p->g, p->bufs, p->dts, &p->sb, r->uk, store_tile, r->how, r->pool, e);
}

/* Best GFLOP/s of 5 trials, each repeating the GEMM for about seconds / 5. */
static double rate(const Runner *r, double flops, double seconds)
{
    Err e = {0};
    if (!run_once(r, &e)) {
        fprintf(stderr, "gemm_bench: %s\n", e.msg);
        return 0;
    }
    double t0 = clock_seconds();
    run_once(r, &e);
    double once = clock_seconds() - t0, best = 0;
    int64_t reps = once > 0 ? (int64_t)(seconds / 5 / once) + 1 : 1;
    for (int trial = 0; trial < 5; trial++) {
        t0 = clock_seconds();
        for (int64_t i = 0; i < reps; i++)
            run_once(r, &e);
        double dt = clock_seconds() - t0;
        if (dt > 0 && flops * (double)reps / dt > best)
            best = flops * (double)reps / dt;
    }
    return best * 1e-9;
}

static double shape_flops(const Shape *s) { return 2.0 * (double)(s->batch * s->m * s->n * s->k); }

/* ---------------------------------------------------------------- tilings compared */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds of `reps` calls. */
static double time_calls(const Runner *r, int64_t reps)
{
    Err e = {0};
    double t0 = clock_seconds();
    for (int64_t i = 0; i < reps; i++)
        if (!run_once(r, &e)) {
            fprintf(stderr, "gemm_bench: %s\n", e.msg);
            return -1;
        }
    return clock_seconds() - t0;
}

#define TILINGS_MAX 8
#define COMPARE_MAX (TILINGS_MAX + 1) /* and OpenBLAS */
/* GemmForm's spellings, in its order. */
static const char *const form_names[] = {"auto", "dot", "bcast"};

/* Every tiling and OpenBLAS on one shape, interleaved sample by sample for `rounds`
 * rounds: a shared machine's slow spells then fall on all of them alike, and each one's
 * median sample is compared with the first tiling's. */
static int compare_tilings(const Runner *tiled, int ntilings, const GemmTiling *tilings,
                           const Runner *blas, double flops, int rounds)
{
    int n = ntilings + 1;
    Runner rs[COMPARE_MAX];
    for (int i = 0; i < ntilings; i++)
        rs[i] = *tiled, rs[i].how = &tilings[i];
    rs[ntilings] = *blas;
    double once = time_calls(&rs[0], 1); /* warms every operand up too */
    if (once < 0)
        return 1;
    int64_t reps = once > 0 ? (int64_t)(0.02 / once) + 1 : 1; /* samples of >= 20 ms */
    double *rate = calloc((size_t)(n * rounds), sizeof *rate);
    if (!rate)
        return 1;
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < n; i++) {
            double dt = time_calls(&rs[i], reps);
            if (dt < 0)
                return free(rate), 1;
            rate[i * rounds + k] = flops * (double)reps / dt * 1e-9;
        }
    double med[COMPARE_MAX];
    for (int i = 0; i < n; i++) {
        qsort(rate + i * rounds, (size_t)rounds, sizeof *rate, cmp_double);
        med[i] = rate[i * rounds + rounds / 2];
    }
    for (int i = 0; i < n; i++) {
        const GemmTiling *t = &tilings[i < ntilings ? i : 0];
        if (i < ntilings)
            printf("  %-5s kc %-5lld mc %-3lld", form_names[t->form], (long long)t->kc,
                   (long long)t->mc);
        else
            printf("  %-25s", "openblas");
        printf(" %7.1f GFLOP/s (median of %d, %.1f-%.1f)  x%.3f of the first  x%.3f of openblas\n",
               med[i], rounds, rate[i * rounds], rate[i * rounds + rounds - 1], med[i] / med[0],
               med[i] / med[ntilings]);
    }
    free(rate);
    return 0;
}

/* --tiling's list when it has several: compared shape by shape instead of the table. */
typedef struct Compare {
    const GemmTiling *tilings;
    int ntilings, rounds;
} Compare;

/* One table row per shape and thread count (with cmp, a comparison of tilings each). */
static int run_table(const Ukernels *uk, const int *threads, int nthreads, double seconds,
                     const int64_t off[2], int nweights, const GemmTiling *how,
                     const Compare *cmp, const Shape *list, int nshapes)
{
    printf("openblas core: %s   coil tiles: dot %dx%d, bcast %dx%d (vec %d)\n",
           openblas_get_corename(), uk->shape.dot_mr, uk->shape.dot_nr, uk->shape.bc_mr,
           uk->shape.bc_nr, uk->shape.vec);
    if (!cmp)
        printf("%-28s %3s %8s %8s %7s %8s %8s %6s\n", "shape", "thr", "coil", "openblas", "peak",
           "coil%pk", "blas%pk", "other");
    for (int ti = 0; ti < nthreads; ti++) {
        Err e = {0};
        Pool *pool = pool_new(threads[ti], &e);
        if (!pool) {
            fprintf(stderr, "gemm_bench: %s\n", e.msg);
            return 1;
        }
        gemm_set_threads(threads[ti]);
        double peak = peak_fma_gflops(threads[ti], 0.5);
        for (int si = 0; si < nshapes; si++) {
            Problem p = problem(&list[si], off, nweights);
            Runner coil = {false, &p, uk, threads[ti] > 1 ? pool : NULL, how};
            Runner blas = {true, &p, uk, NULL, NULL};
            if (cmp) {
                printf("%s, %d thread%s:\n", list[si].name, threads[ti], threads[ti] > 1 ? "s" : "");
                int rc = compare_tilings(&coil, cmp->ntilings, cmp->tilings, &blas,
                                         shape_flops(&list[si]), cmp->rounds);
                problem_free(&p);
                if (rc)
                    return rc;
                continue;
            }
            Load l0 = load_now();
            double f = shape_flops(&list[si]), rc = rate(&coil, f, seconds), rb = rate(&blas, f, seconds);
            printf("%-28s %3d %8.1f %8.1f %7.1f %7.1f%% %7.1f%% %5.0f%%\n", list[si].name,
                   threads[ti], rc, rb, peak, 100 * rc / peak, 100 * rb / peak,
                   100 * load_other(l0, load_now()));
            fflush(stdout);
            problem_free(&p);
        }
        pool_free(pool);
    }
    return 0;
}

/* ---------------------------------------------------------------- the micro-kernels alone */

/* One micro-kernel call on operands that stay in L1: dot, bcast with A packed k-major
 * (lda_r 1, lda_c MR, as a driver packing A would), bcast with A row-major. */
typedef struct KernelCall {
    const Ukernels *uk;
    int which;
    int64_t kc;
    const float *a, *b;
    float *t;
} KernelCall;

static void kernel_call(const KernelCall *c, int64_t i)
{
    const UkernelShape *s = &c->uk->shape;
    if (c->which == 0)
        c->uk->dot(c->kc, c->a, c->kc, s->dot_mr, c->b, c->kc, s->dot_nr, c->t, i & 1);
    else if (c->which == 1)
        c->uk->bcast(c->kc, c->a, 1, s->bc_mr, s->bc_mr, c->b, s->bc_nr, s->bc_nr, c->t, i & 1);
    else
        c->uk->bcast(c->kc, c->a, c->kc, 1, s->bc_mr, c->b, s->bc_nr, s->bc_nr, c->t, i & 1);
}

/* Best GFLOP/s of 5 trials of about 0.1 s. */
static double kernel_rate(const KernelCall *c)
{
    const UkernelShape *s = &c->uk->shape;
    double flops = 2.0 * (double)c->kc * (c->which ? s->bc_mr * s->bc_nr : s->dot_mr * s->dot_nr);
    int64_t reps = (int64_t)(1.5e10 / flops) + 1;
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = clock_seconds();
        for (int64_t i = 0; i < reps; i++)
            kernel_call(c, i);
        double r = flops * (double)reps / (clock_seconds() - t0);
        best = r > best ? r : best;
    }
    return best * 1e-9;
}

static void bench_kernels(const Ukernels *uk, int64_t kc)
{
    const UkernelShape *s = &uk->shape;
    float *a = random_floats(64 * kc + 64), *b = random_floats(64 * kc + 64);
    _Alignas(64) float t[4096];
    double r[3];
    for (int w = 0; w < 3; w++)
        r[w] = kernel_rate(&(KernelCall){uk, w, kc, a, b, t});
    printf("kc %4lld  dot %dx%d: %6.1f GFLOP/s   bcast %dx%d: %6.1f (A packed) %6.1f (A rows)\n",
           (long long)kc, s->dot_mr, s->dot_nr, r[0], s->bc_mr, s->bc_nr, r[1], r[2]);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- arguments */

static bool parse_tile(const char *s, int *mr, int *nr) { return sscanf(s, "%dx%d", mr, nr) == 2; }

typedef struct Opts {
    int threads[8], nthreads;
    double seconds;
    bool kernels;
    int64_t kc;          /* --kernels: one block of k, 0 for the list */
    bool have_one;
    Shape one;           /* --shape */
    int64_t off[2];      /* --offset */
    int nweights;        /* --weights */
    const char *only;    /* --only: the table's rows whose name contains this */
    UkernelShape shape;  /* the host's tiles, or --dot / --bcast */
    GemmTiling tilings[TILINGS_MAX]; /* --tiling FORM[,KC[,MC]][/...] */
    int ntilings;
    int rounds;          /* --rounds: interleaved calls per tiling when there are several */
} Opts;

static bool parse_shape(const char *v, Shape *one)
{
    long long m, n, k, b = 1;
    char form[8] = "dot";
    if (sscanf(v, "%lld,%lld,%lld,%7[a-z],%lld", &m, &n, &k, form, &b) < 3)
        return false;
    *one = (Shape){"custom", b, m, n, k, strcmp(form, "bcast") != 0 && strcmp(form, "wgrad") != 0,
                   0, strcmp(form, "wgrad") == 0};
    return true;
}

/* --tiling dot|bcast|auto[,KC[,MC]][/...]: the GEMM's form, k per block and row tiles per
 * macro block instead of the heuristic's (0 or absent: its choice); several, '/' apart,
 * are compared call by call. */
static bool parse_tilings(const char *v, Opts *o)
{
    for (o->ntilings = 0; *v && o->ntilings < TILINGS_MAX; o->ntilings++) {
        char form[8] = "";
        long long kc = 0, mc = 0;
        if (sscanf(v, "%7[a-z],%lld,%lld", form, &kc, &mc) < 1)
            return false;
        int f = name_index(form_names, (int)(sizeof form_names / sizeof *form_names), form);
        if (f < 0)
            return false;
        o->tilings[o->ntilings] = (GemmTiling){.form = (GemmForm)f, .kc = kc, .mc = mc};
        const char *next = strchr(v, '/');
        v = next ? next + 1 : "";
    }
    return o->ntilings > 0 && !*v;
}

static bool parse_args(int argc, char **argv, Opts *o)
{
    *o = (Opts){.threads = {1, 2}, .nthreads = 2, .seconds = 1.0, .nweights = 1,
                .shape = ukernel_shape(ukjit_host_vec())};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        bool ok = true, takes = true;
        if (!strcmp(a, "--threads")) {
            o->nthreads = 0;
            for (char *p = (char *)v; *p && o->nthreads < 8; p += *p == ',')
                o->threads[o->nthreads++] = (int)strtol(p, &p, 10);
        } else if (!strcmp(a, "--seconds"))
            o->seconds = atof(v);
        else if (!strcmp(a, "--offset"))
            ok = sscanf(v, "%" SCNd64 ",%" SCNd64, &o->off[0], &o->off[1]) == 2;
        else if (!strcmp(a, "--weights"))
            ok = (o->nweights = atoi(v)) >= 1;
        else if (!strcmp(a, "--only"))
            o->only = v;
        else if (!strcmp(a, "--kc"))
            o->kc = atoll(v);
        else if (!strcmp(a, "--dot"))
            ok = parse_tile(v, &o->shape.dot_mr, &o->shape.dot_nr);
        else if (!strcmp(a, "--bcast"))
            ok = parse_tile(v, &o->shape.bc_mr, &o->shape.bc_nr);
        else if (!strcmp(a, "--tiling"))
            ok = parse_tilings(v, o);
        else if (!strcmp(a, "--rounds"))
            ok = (o->rounds = atoi(v)) >= 1;
        else if (!strcmp(a, "--shape"))
            ok = o->have_one = parse_shape(v, &o->one);
        else if (!strcmp(a, "--kernels"))
            o->kernels = true, takes = false;
        else
            ok = false;
        if (!ok || (takes && ++i >= argc))
            return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    Opts o;
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: gemm_bench [--threads 1,2] [--seconds S] [--offset A,B] [--only NAME]\n"
                        "                  [--weights W]\n"
                        "                  [--shape M,N,K[,dot|bcast|wgrad[,BATCH]]] [--dot MRxNR]"
                        " [--bcast MRxNR] [--kernels [--kc N]]\n"
                        "                  [--tiling FORM[,KC[,MC]][/FORM...] [--rounds R]]\n");
        return 2;
    }
    UkJit jit;
    Err e = {0};
    if (!ukjit_open(&jit, &o.shape, &e)) {
        fprintf(stderr, "gemm_bench: %s\n", e.msg);
        return 1;
    }
    int rc = 0;
    Compare c = {o.tilings, o.ntilings, o.rounds ? o.rounds : 15};
    const Compare *cmp = o.ntilings > 1 ? &c : NULL;
    if (o.kernels) {
        const int64_t kcs[] = {64, 128, 256, 512, 768, 1024};
        for (int i = 0; i < (o.kc ? 1 : 6); i++)
            bench_kernels(&jit.uk, o.kc ? o.kc : kcs[i]);
    } else if (o.have_one)
        rc = run_table(&jit.uk, o.threads, o.nthreads, o.seconds, o.off, o.nweights,
                       o.ntilings == 1 ? &o.tilings[0] : NULL, cmp, &o.one, 1);
    else {
        Shape rows[sizeof shapes / sizeof *shapes];
        int n = 0;
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            if (!o.only || strstr(shapes[i].name, o.only))
                rows[n++] = shapes[i];
        rc = run_table(&jit.uk, o.threads, o.nthreads, o.seconds, o.off, o.nweights,
                       o.ntilings == 1 ? &o.tilings[0] : NULL, cmp, rows, n);
    }
    ukjit_close(&jit);
    return rc;
}
