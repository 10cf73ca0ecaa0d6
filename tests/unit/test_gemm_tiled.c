/* test_gemm_tiled.c — the generated GEMM micro-kernels, JIT'd for the host, and
 * gemm_tiled_run on them against the f64 reference: every tile edge, K tails, both forms,
 * strided and transposed operands, broadcast batches, symbolic sizes, 1 and 2 threads, an
 * epilogue TileFn; the micro-kernels alone next to guard pages (nothing read past an edge);
 * and the narrower tiles of AVX2 and SSE, run on this host. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

#ifdef COIL_HAVE_LLVM
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/gemm_tiled.h"
#include "ukernel_jit.h"

/* The TileFns find C's row length and the bias buffer through symbols no Dim uses. */
#define SYM_LDC (COIL_MAX_SYMS - 1)
#define BUF_C 2
#define BUF_BIAS 3

static double urand(void) { return (double)rand() / RAND_MAX * 2 - 1; }

/* ---------------------------------------------------------------- guarded memory */

/* n floats ending exactly where an inaccessible page begins: a read past the end faults. */
typedef struct Guarded {
    void *map;
    size_t len;
    float *p;
} Guarded;

static Guarded guarded(int64_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    size_t body = (bytes + page - 1) / page * page;
    Guarded g = {.len = body + page};
    g.map = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED || mprotect((char *)g.map + body, page, PROT_NONE) != 0) {
        fprintf(stderr, "guarded: mmap failed\n");
        exit(1);
    }
    g.p = (float *)((char *)g.map + body) - n;
    for (int64_t i = 0; i < n; i++)
        g.p[i] = (float)urand();
    return g;
}

static void guarded_free(Guarded *g) { munmap(g->map, g->len); }

/* ---------------------------------------------------------------- micro-kernels alone */

/* The expected tile: t0 (accumulate) plus the clamped product, for every i < MR and
 * j < ncols, from element (i, p) of A at a[i * ars + p * acs], B's (p, j) at b[...]. */
static void expect_tile(int64_t kc, const float *a, int64_t ars, int64_t acs, int64_t mr,
                        const float *b, int64_t brs, int64_t bcs, int64_t nr, int MR, int NR,
                        const float *t0, bool acc, double *want)
{
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            int64_t ii = i < mr ? i : mr - 1, jj = j < nr ? j : nr - 1;
            double s = acc ? t0[i * NR + j] : 0;
            for (int64_t p = 0; p < kc; p++)
                s += (double)a[ii * ars + p * acs] * b[p * brs + jj * bcs];
            want[i * NR + j] = s;
        }
}

static int tile_errors(const float *t, const double *want, int MR, int NR, int ncols, int64_t kc)
{
    int bad = 0;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < ncols; j++)
            bad += !check_close(t[i * NR + j], want[i * NR + j], 1e-5 * sqrt((double)kc + 1));
    return bad;
}

/* The dot form at (kc, mr, nr): A's rows and B^T's rows packed tight against a guard. */
static void dot_case(const Ukernels *uk, int64_t kc, int64_t mr, int64_t nr, bool acc)
{
    int MR = uk->shape.dot_mr, NR = uk->shape.dot_nr;
    Guarded a = guarded(mr * kc), b = guarded(nr * kc);
    float t[64 * 64], t0[64 * 64];
    double want[64 * 64];
    for (int q = 0; q < MR * NR; q++)
        t[q] = t0[q] = (float)urand();
    uk->dot(kc, a.p, kc, mr, b.p, kc, nr, t, acc);
    expect_tile(kc, a.p, kc, 1, mr, b.p, 1, kc, nr, MR, NR, t0, acc, want);
    int bad = tile_errors(t, want, MR, NR, NR, kc);
    if (bad)
        fprintf(stderr, "dot kc %lld mr %lld nr %lld acc %d: %d wrong\n", (long long)kc,
                (long long)mr, (long long)nr, acc, bad);
    CHECK(bad == 0);
    guarded_free(&a);
    guarded_free(&b);
}

/* The broadcast form: B's rows of nr columns tight against a guard (ldb = nr), A packed
 * k-major (the driver's choice) or row-major. */
static void bcast_case(const Ukernels *uk, int64_t kc, int64_t mr, int64_t nr, bool acc, bool kmajor)
{
    int MR = uk->shape.bc_mr, NR = uk->shape.bc_nr;
    Guarded a = guarded(mr * kc), b = guarded(kc * nr);
    int64_t ars = kmajor ? 1 : kc, acs = kmajor ? mr : 1;
    float t[64 * 64], t0[64 * 64];
    double want[64 * 64];
    for (int q = 0; q < MR * NR; q++)
        t[q] = t0[q] = (float)urand();
    uk->bcast(kc, a.p, ars, acs, mr, b.p, nr, nr, t, acc);
    expect_tile(kc, a.p, ars, acs, mr, b.p, nr, 1, nr, MR, NR, t0, acc, want);
    int bad = tile_errors(t, want, MR, NR, (int)nr, kc);
    if (bad)
        fprintf(stderr, "bcast kc %lld mr %lld nr %lld acc %d: %d wrong\n", (long long)kc,
                (long long)mr, (long long)nr, acc, bad);
    CHECK(bad == 0);
    guarded_free(&a);
    guarded_free(&b);
}

static void test_ukernels(const Ukernels *uk)
{
    const UkernelShape *s = &uk->shape;
    int64_t kcs[] = {0, 1, 2, 3, 15, 16, 17, 31, 33, 64, 100};
    for (size_t k = 0; k < sizeof kcs / sizeof *kcs; k++)
        for (int acc = 0; acc < 2; acc++) {
            for (int mr = 1; mr <= s->dot_mr; mr++)
                for (int nr = 1; nr <= s->dot_nr; nr++)
                    dot_case(uk, kcs[k], mr, nr, acc);
            for (int mr = 1; mr <= s->bc_mr; mr++)
                for (int nr = 1; nr <= s->bc_nr; nr += nr < 3 ? 1 : 7)
                    bcast_case(uk, kcs[k], mr, nr, acc, (mr + nr) % 2);
            bcast_case(uk, kcs[k], s->bc_mr, s->bc_nr, acc, true);
            bcast_case(uk, kcs[k], s->bc_mr, s->bc_nr - 1, acc, false);
        }
}

/* ---------------------------------------------------------------- whole GEMMs */

/* C dense row-major [rows, ldc]. */
static void store_tile(const float *tile, int64_t ldt, void *const *bufs, const int64_t *syms,
                       int64_t row0, int64_t col0, int64_t mr, int64_t nr)
{
    float *c = (float *)bufs[BUF_C] + row0 * syms[SYM_LDC] + col0;
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++)
            c[i * syms[SYM_LDC] + j] = tile[i * ldt + j];
}

/* An epilogue: relu(v + bias[col]), so a wrong row0 or col0 shows. */
static void bias_relu_tile(const float *tile, int64_t ldt, void *const *bufs, const int64_t *syms,
                           int64_t row0, int64_t col0, int64_t mr, int64_t nr)
{
    float *c = (float *)bufs[BUF_C] + row0 * syms[SYM_LDC] + col0;
    const float *bias = (const float *)bufs[BUF_BIAS] + col0;
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) {
            float v = tile[i * ldt + j] + bias[j];
            c[i * syms[SYM_LDC] + j] = v > 0 ? v : 0;
        }
}

/* How an operand is stored: transposed or not, `step` between the elements of a stored
 * row, `pad` extra elements per stored row, zero strides over broadcast batch dims. */
typedef struct Layout {
    bool trans;
    int64_t step, pad;
    bool bcast[2];
} Layout;

typedef struct Case {
    int64_t m, n, k;
    Layout a, b;
    int nbatch;
    int64_t batch[2];
    bool epilogue;
} Case;

/* Strides for a rows x cols operand at offset 5; the elements it spans. */
static int64_t layout(const Layout *l, int nbatch, const int64_t *batch, int64_t rows,
                      int64_t cols, GemmOperand *o)
{
    int64_t step = l->step ? l->step : 1;
    int64_t inner = l->trans ? rows : cols, outer = l->trans ? cols : rows;
    int64_t ld = inner * step + l->pad;
    o->row_stride = dim_static(l->trans ? step : ld);
    o->col_stride = dim_static(l->trans ? ld : step);
    o->offset = dim_static(5);
    int64_t span = outer * ld;
    for (int d = nbatch - 1; d >= 0; d--) {
        o->batch_stride[d] = dim_static(l->bcast[d] ? 0 : span);
        span *= l->bcast[d] ? 1 : batch[d];
    }
    return span + 5;
}

static float *random_floats(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)urand();
    return p;
}

/* The tiling the next check_gemm runs with (NULL: the heuristic's); the autotuner's choices
 * must all compute the same product. */
static const GemmTiling *tiling;

/* Run g through gemm_tiled_run (C in bufs[BUF_C], dense) and compare with the reference
 * (plus the epilogue when asked); false on any mismatch. */
static bool check_gemm(const Gemm *g, void **bufs, const SymBind *sb, const Ukernels *uk,
                       Pool *pool, bool epilogue, const char *what)
{
    int64_t M = dim_value(g->m, sb), N = dim_value(g->n, sb), K = dim_value(g->k, sb), rows = M;
    for (int d = 0; d < g->nbatch; d++)
        rows *= dim_value(g->batch[d], sb);
    float *c = bufs[BUF_C], *ref = malloc((size_t)(rows * N + 1) * sizeof *ref);
    for (int64_t i = 0; i < rows * N; i++)
        c[i] = ref[i] = NAN;
    DType dts[5] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_F32};
    Err e = {0};
    CHECK(gemm_tiled_supported(g, bufs, dts, sb));
    bool ok = gemm_tiled_run(g, bufs, dts, sb, uk, epilogue ? bias_relu_tile : store_tile, tiling, pool, &e);
    if (!ok)
        fprintf(stderr, "%s: gemm_tiled_run: %s\n", what, e.msg);
    Gemm rg = *g;
    void *rbufs[5] = {bufs[0], bufs[1], bufs[2], bufs[3], ref};
    rg.c.buf = 4;
    CHECK(gemm_reference(&rg, rbufs, dts, sb, &e));
    const float *bias = bufs[BUF_BIAS];
    int bad = 0;
    for (int64_t i = 0; i < rows * N; i++) {
        double want = ref[i];
        if (epilogue && !(tiling && tiling->store_only))
            want = fmax(want + bias[i % N], 0);
        if (!check_close(c[i], want, 1e-5 * sqrt((double)K + 1)) && bad++ < 3)
            fprintf(stderr, "%s: C[%lld] = %g, want %g\n", what, (long long)i, c[i], want);
    }
    free(ref);
    return ok && bad == 0;
}

/* A case with static sizes on `pool`; C dense and packed over its batches. */
static void run_case(const Case *c, const Ukernels *uk, Pool *pool)
{
    Gemm g = {.nbatch = c->nbatch, .m = dim_static(c->m), .n = dim_static(c->n),
              .k = dim_static(c->k), .epilogue = -1};
    for (int d = 0; d < c->nbatch; d++)
        g.batch[d] = dim_static(c->batch[d]);
    int64_t rows = c->m;
    for (int d = 0; d < c->nbatch; d++)
        rows *= c->batch[d];
    int64_t sa = layout(&c->a, c->nbatch, c->batch, c->m, c->k, &g.a);
    int64_t sbn = layout(&c->b, c->nbatch, c->batch, c->k, c->n, &g.b);
    g.a.buf = 0, g.b.buf = 1, g.c = (GemmOperand){.buf = BUF_C, .row_stride = dim_static(c->n),
                                                 .col_stride = dim_static(1)};
    for (int d = c->nbatch - 1, span = 1; d >= 0; span *= (int)c->batch[d--])
        g.c.batch_stride[d] = dim_static(span * c->m * c->n);
    void *bufs[4] = {random_floats(sa), random_floats(sbn), random_floats(rows * c->n),
                     random_floats(c->n)};
    SymBind sb = {0};
    sb.val[SYM_LDC] = c->n;
    char what[160];
    snprintf(what, sizeof what, "M %lld N %lld K %lld%s%s batch %d threads %d%s", (long long)c->m,
             (long long)c->n, (long long)c->k, c->a.trans ? " A^T" : "", c->b.trans ? " B^T" : "",
             c->nbatch, pool_threads(pool), c->epilogue ? " epilogue" : "");
    CHECK(check_gemm(&g, bufs, &sb, uk, pool, c->epilogue, what));
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
}

/* Every M, N, K of the list in both forms: dot (B^T rows contiguous, a weight) and
 * broadcast (B rows contiguous). */
static void test_sizes(const Ukernels *uk, Pool *pool, const int64_t *list, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                for (int form = 0; form < 2; form++) {
                    Case c = {list[i], list[j], list[k], {0}, {.trans = form == 0}, 0, {0}, false};
                    run_case(&c, uk, pool);
                }
}

/* The dot kernel itself, forced (AVX2 never chooses it): every tile edge at K with and
 * without a vector tail, and with k blocked. */
static void test_dot_sizes(const Ukernels *uk, Pool *pool, const int64_t *list, int n)
{
    const int64_t ks[] = {257, 300, 1040};
    const GemmTiling dot = {.form = GEMM_FORM_DOT};
    tiling = &dot;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < 3; k++) {
                Case c = {list[i], list[j], ks[k], {0}, {.trans = true}, 0, {0}, false};
                run_case(&c, uk, pool);
            }
    tiling = NULL;
}

static void test_layouts(const Ukernels *uk, Pool *pool)
{
    const Case cases[] = {
        /* A's columns strided or A transposed: the broadcast form */
        {17, 33, 31, {.step = 2}, {0}, 0, {0}, false},
        {33, 40, 17, {.trans = true}, {0}, 0, {0}, false},
        {5, 70, 9, {.trans = true, .pad = 3}, {.pad = 5}, 0, {0}, false},
        /* padded rows in the dot form */
        {31, 17, 33, {.pad = 3}, {.trans = true, .pad = 7}, 0, {0}, false},
        /* K blocked, several macro blocks */
        {70, 50, 1500, {0}, {.trans = true}, 0, {0}, false},
        {300, 400, 100, {0}, {.trans = true}, 0, {0}, false},
        {70, 90, 600, {0}, {0}, 0, {0}, false},
        {150, 2100, 20, {0}, {0}, 0, {0}, false},
        {300, 70, 2100, {0}, {0}, 0, {0}, false},
        {9, 2050, 513, {0}, {.trans = true}, 0, {0}, false},
        /* either side of the dot layout's small-K threshold */
        {17, 45, 256, {0}, {.trans = true}, 0, {0}, false},
        {17, 45, 257, {0}, {.trans = true, .pad = 3}, 0, {0}, false},
        /* broadcast-form rows far apart: packed, with k blocked too */
        {40, 70, 300, {0}, {.pad = 1100}, 0, {0}, false},
        {30, 1100, 1500, {0}, {0}, 0, {0}, false},
        {13, 35, 17, {0}, {.pad = 2000, .bcast = {true, false}}, 2, {2, 3}, false},
        /* A transposed with its k far apart (a weight gradient, g^T x): A's row tiles
         * packed, partial last tile, k blocked, batches */
        {37, 70, 300, {.trans = true, .pad = 1000}, {0}, 0, {0}, false},
        {29, 50, 1500, {.trans = true, .pad = 1100}, {.pad = 1100}, 0, {0}, false},
        {13, 35, 17, {.trans = true, .pad = 1100}, {0}, 2, {2, 3}, true},
        /* batches, weights broadcast over them, A broadcast over dim 0 */
        {5, 7, 9, {0}, {.trans = true}, 2, {2, 3}, false},
        {13, 20, 17, {0}, {.trans = true, .bcast = {true, true}}, 2, {2, 3}, false},
        {13, 35, 17, {0}, {.bcast = {true, true}}, 2, {2, 3}, false},
        {13, 35, 17, {.bcast = {true, false}}, {0}, 2, {2, 3}, false},
        {3, 35, 17, {.bcast = {true, false}}, {.trans = true}, 2, {3, 2}, false},
        {128, 128, 64, {0}, {.trans = true}, 1, {12}, false},
        {128, 64, 128, {0}, {0}, 1, {12}, false},
        {4, 3, 5, {0}, {0}, 2, {2, 0}, false},
        /* the epilogue sees the right rows and columns */
        {33, 45, 20, {0}, {.trans = true}, 0, {0}, true},
        {17, 70, 20, {0}, {0}, 0, {0}, true},
        {9, 13, 16, {0}, {.trans = true}, 1, {3}, true},
        {9, 40, 5, {.trans = true}, {0}, 2, {2, 2}, true},
        /* a last column tile of 1 to 4 columns goes to the dot kernel (Job.edge): with the
         * epilogue, and with k blocked (accumulating in the tile) */
        {17, 50, 40, {0}, {0}, 0, {0}, true},
        {29, 33, 1500, {0}, {0}, 0, {0}, true},
        {7, 9, 0, {0}, {.trans = true}, 0, {0}, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i], uk, pool);
}

/* Sizes and strides as products of symbols: M = 2 * S0, K = S1, N = 3 * S2, batch S3. */
static void test_symbolic(const Ukernels *uk, Pool *pool)
{
    for (int form = 0; form < 2; form++) {
        SymBind sb = {0};
        sb.val[0] = 9, sb.val[1] = 37, sb.val[2] = 11, sb.val[3] = 2;
        int64_t M = 18, K = 37, N = 33, B = 2;
        sb.val[SYM_LDC] = N;
        Dim m = {2, 1u << 0, 0}, k = {1, 1u << 1, 0}, n = {3, 1u << 2, 0}, bt = {1, 1u << 3, 0};
        Dim mk = {2, 1u << 0 | 1u << 1, 0}, kn = {3, 1u << 1 | 1u << 2, 0};
        Gemm g = {.nbatch = 1, .batch = {bt}, .m = m, .n = n, .k = k, .epilogue = -1};
        g.a = (GemmOperand){0, dim_static(0), {mk}, k, dim_static(1)};
        if (form == 0) /* B^T [S3, N, K] */
            g.b = (GemmOperand){1, dim_static(1), {kn}, dim_static(1), k};
        else /* B [S3, K, N] */
            g.b = (GemmOperand){1, dim_static(1), {kn}, n, dim_static(1)};
        g.c = (GemmOperand){BUF_C, dim_static(0), {{6, 1u << 0 | 1u << 2, 0}}, n, dim_static(1)};
        void *bufs[4] = {random_floats(B * M * K), random_floats(B * K * N + 1),
                         random_floats(B * M * N), random_floats(N)};
        CHECK(check_gemm(&g, bufs, &sb, uk, pool, false, form ? "symbolic bcast" : "symbolic dot"));
        for (int i = 0; i < 4; i++)
            free(bufs[i]);
    }
}

static void test_unsupported(const Ukernels *uk)
{
    Gemm g = {.m = dim_static(4), .n = dim_static(5), .k = dim_static(6), .epilogue = -1};
    g.a = (GemmOperand){0, dim_static(0), {{0}}, dim_static(6), dim_static(1)};
    g.b = (GemmOperand){1, dim_static(0), {{0}}, dim_static(10), dim_static(2)}; /* no unit stride */
    g.c = (GemmOperand){BUF_C, dim_static(0), {{0}}, dim_static(5), dim_static(1)};
    float a[24], b[60], c[20];
    void *bufs[3] = {a, b, c};
    DType f32[3] = {DT_F32, DT_F32, DT_F32}, f16[3] = {DT_F16, DT_F32, DT_F32};
    SymBind sb = {0};
    Err e = {0};
    CHECK(!gemm_tiled_supported(&g, bufs, f32, &sb));
    CHECK(!gemm_tiled_run(&g, bufs, f32, &sb, uk, store_tile, NULL, NULL, &e));
    CHECK(strstr(e.msg, "unit-stride") != NULL);
    g.b.col_stride = dim_static(1);
    CHECK(gemm_tiled_supported(&g, bufs, f32, &sb));
    CHECK(!gemm_tiled_supported(&g, bufs, f16, &sb));
    g.b.row_stride = dim_static(INT64_MAX / 2); /* indices past int64 */
    CHECK(!gemm_tiled_supported(&g, bufs, f32, &sb));
}

/* Every tiling the autotuner can choose computes the same product: forced forms (BCAST on
 * the dot layout packs transposed panels), short k blocks, small macro blocks, either
 * split, and C stored without the TileFn (the epilogue then runs on its own). */
static void test_tilings(const Ukernels *uk, Pool *pool)
{
    const Case cases[] = {
        {37, 70, 300, {0}, {.trans = true}, 0, {0}, true},
        {64, 33, 1040, {0}, {.trans = true}, 0, {0}, false},
        {17, 100, 257, {0}, {0}, 0, {0}, true},
        {5, 9, 40, {0}, {.trans = true}, 1, {3}, false},
        {37, 70, 300, {.trans = true, .pad = 1000}, {0}, 0, {0}, true},
    };
    const GemmForm forms[] = {GEMM_FORM_AUTO, GEMM_FORM_DOT, GEMM_FORM_BCAST};
    const int64_t kcs[] = {0, 16, 200}, mcs[] = {0, 1, 3};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int f = 0; f < 3; f++)
            for (int k = 0; k < 3; k++)
                for (int m = 0; m < 3; m++)
                    for (int sp = GEMM_SPLIT_ROWS; sp <= GEMM_SPLIT_COLS; sp++)
                        for (int so = 0; so < 2; so++) {
                            GemmTiling t = {forms[f], kcs[k], mcs[m], sp, so};
                            tiling = &t;
                            run_case(&cases[c], uk, pool);
                        }
    tiling = NULL;
}

/* The whole suite for one micro-kernel shape. */
static void test_shape(const UkernelShape *shape, bool full)
{
    UkJit jit;
    Err e = {0};
    if (!ukjit_open(&jit, shape, &e)) {
        fprintf(stderr, "ukjit_open: %s\n", e.msg);
        check_failures++;
        return;
    }
    Pool *pool = pool_new(2, &e);
    CHECK(pool != NULL);
    test_ukernels(&jit.uk);
#ifdef __SANITIZE_ADDRESS__
    /* the sanitizers check the edges' memory: every edge kind, a third of the sizes (each
       of M, N and K crosses them, so the product of the lists is what costs) */
    const int64_t all[] = {0, 1, 3, 5, 16, 17, 33, 100};
#else
    const int64_t all[] = {0, 1, 2, 3, 5, 15, 16, 17, 31, 33, 64, 100, 128};
#endif
    const int64_t some[] = {0, 1, 3, 17, 33, 100};
    const int nall = (int)(sizeof all / sizeof *all);
    for (int threads = 1; threads <= 2; threads++) {
        Pool *p = threads == 2 ? pool : NULL;
        if (full || threads == 2) {
            test_sizes(&jit.uk, p, full ? all : some, full ? nall : 6);
            test_dot_sizes(&jit.uk, p, full ? all + 1 : some + 1, full ? nall - 2 : 4);
        }
        test_layouts(&jit.uk, p);
        test_symbolic(&jit.uk, p);
    }
    test_unsupported(&jit.uk);
    if (full) {
        test_tilings(&jit.uk, NULL);
        test_tilings(&jit.uk, pool);
    }
    pool_free(pool);
    ukjit_close(&jit);
}

int main(void)
{
    srand(1);
    UkernelShape host = ukernel_shape(ukjit_host_vec());
    test_shape(&host, true);
    /* the other targets' tiles, where this host can run them */
    for (int vec = host.vec / 2; vec >= 4; vec /= 2) {
        UkernelShape s = ukernel_shape(vec);
        test_shape(&s, false);
    }
    /* odd tiles: one accumulator row, MR x NR not a multiple of vec */
    UkernelShape odd = {.vec = host.vec, .dot_mr = 1, .dot_nr = 3, .bc_mr = 3, .bc_nr = host.vec};
    test_shape(&odd, false);
    return check_status();
}
#else
int main(void)
{
    printf("test_gemm_tiled: skipped (built without COIL_LLVM)\n");
    return 0;
}
#endif
