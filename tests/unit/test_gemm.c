/* test_gemm.c — GEMM steps against the f64 reference: plain, transposed and padded
 * operands, strides sgemm cannot take (packed), batches with broadcast operands, symbolic
 * batch and row counts, f16 and bf16, a strided C, empty sizes, an unsupported dtype; and
 * the sgemm rate at 128x1024x1024. */
#include <stdlib.h>

#include "check.h"
#include "runtime/cpu/gemm.h"

/* One operand's storage: rows x cols, stored transposed or not, with `step` between
 * consecutive elements of a stored row and `pad` extra elements per stored row. */
typedef struct Layout {
    bool trans;
    int64_t step, pad;
    bool bcast[2]; /* zero stride over batch dim d */
} Layout;

typedef struct Case {
    const char *name;
    DType dt[3]; /* A, B, C */
    int64_t m, n, k;
    Layout lay[3];
    int nbatch;
    int64_t batch[2];
} Case;

/* Strides for a rows x cols operand; returns the elements it spans. */
static int64_t layout(const Layout *l, int nbatch, const int64_t *batch, int64_t rows,
                      int64_t cols, GemmOperand *o)
{
    int64_t step = l->step ? l->step : 1;
    int64_t inner = l->trans ? rows : cols, outer = l->trans ? cols : rows;
    int64_t ld = inner * step + l->pad;
    o->row_stride = dim_static(l->trans ? step : ld);
    o->col_stride = dim_static(l->trans ? ld : step);
    o->offset = dim_static(3); /* never at the buffer's start */
    int64_t span = outer * ld;
    for (int d = nbatch - 1; d >= 0; d--) {
        o->batch_stride[d] = dim_static(l->bcast[d] ? 0 : span);
        span *= l->bcast[d] ? 1 : batch[d];
    }
    return span + 3;
}

static void *fill(DType dt, int64_t n, bool random)
{
    void *p = malloc((size_t)(n ? n : 1) * (size_t)dtype_info[dt].size);
    for (int64_t i = 0; i < n; i++)
        dtype_store(dt, p, i, random ? (double)rand() / RAND_MAX * 2 - 1 : NAN);
    return p;
}

/* Run a case with gemm_run and gemm_reference; C's every element must agree (elements
 * outside C's matrices stay NaN in both). */
static void run_case(const Case *c, double tol)
{
    Gemm g = {.nbatch = c->nbatch, .m = dim_static(c->m), .n = dim_static(c->n),
              .k = dim_static(c->k), .epilogue = -1};
    for (int d = 0; d < c->nbatch; d++)
        g.batch[d] = dim_static(c->batch[d]);
    GemmOperand *ops[3] = {&g.a, &g.b, &g.c};
    int64_t rows[3] = {c->m, c->k, c->m}, cols[3] = {c->k, c->n, c->n}, span[3];
    void *bufs[4];
    DType dts[4] = {c->dt[0], c->dt[1], c->dt[2], c->dt[2]};
    for (int i = 0; i < 3; i++) {
        span[i] = layout(&c->lay[i], c->nbatch, c->batch, rows[i], cols[i], ops[i]);
        ops[i]->buf = i;
        bufs[i] = fill(c->dt[i], span[i], i < 2);
    }
    bufs[3] = fill(c->dt[2], span[2], false);
    Err e = {0};
    if (!gemm_run(&g, bufs, dts, &(SymBind){0}, &e)) {
        fprintf(stderr, "%s: gemm_run: %s\n", c->name, e.msg);
        check_failures++;
    }
    g.c.buf = 3;
    CHECK(gemm_reference(&g, bufs, dts, &(SymBind){0}, &e));
    int bad = 0;
    for (int64_t i = 0; i < span[2]; i++) {
        double got = dtype_load(dts[2], bufs[2], i), want = dtype_load(dts[2], bufs[3], i);
        if (!check_close(got, want, tol) && bad++ < 3)
            fprintf(stderr, "%s: C element %lld = %g, want %g\n", c->name, (long long)i, got, want);
    }
    CHECK(bad == 0);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
}

#define F32S {DT_F32, DT_F32, DT_F32}

static void test_layouts(void)
{
    const Case cases[] = {
        {"plain", F32S, 7, 5, 3, {{0}}, 0, {0}},
        {"A^T", F32S, 7, 5, 9, {{.trans = true}}, 0, {0}},
        {"B^T", F32S, 7, 5, 9, {{0}, {.trans = true}}, 0, {0}},
        {"A^T B^T", F32S, 6, 11, 4, {{.trans = true}, {.trans = true}}, 0, {0}},
        {"padded", F32S, 5, 6, 7, {{.pad = 3}, {.trans = true, .pad = 2}, {.pad = 5}}, 0, {0}},
        {"strided A", F32S, 5, 6, 7, {{.step = 2}}, 0, {0}},
        {"strided B^T", F32S, 5, 6, 7, {{0}, {.trans = true, .step = 3}}, 0, {0}},
        {"C^T", F32S, 5, 6, 7, {{0}, {0}, {.trans = true}}, 0, {0}},
        {"strided C", F32S, 5, 6, 7, {{0}, {0}, {.step = 2, .pad = 1}}, 0, {0}},
        {"vector", F32S, 1, 9, 8, {{.trans = true}, {0}}, 0, {0}},
        {"outer", F32S, 6, 5, 1, {{0}, {.trans = true}}, 0, {0}},
        {"column", F32S, 6, 1, 5, {{0}, {.trans = true}, {.trans = true}}, 0, {0}},
        {"large", F32S, 65, 129, 257, {{0}, {.trans = true}}, 0, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i], 1e-5);
}

static void test_batches(void)
{
    const Case cases[] = {
        {"batch", F32S, 4, 3, 5, {{0}}, 1, {3}},
        {"batch 2x3", F32S, 4, 3, 5, {{0}, {.trans = true}}, 2, {2, 3}},
        {"weight broadcast", F32S, 4, 3, 5, {{0}, {.bcast = {true, true}}}, 2, {2, 3}},
        {"A broadcast on dim 0", F32S, 4, 3, 5, {{.bcast = {true}}, {0}}, 2, {2, 3}},
        {"packed broadcast", {DT_F32, DT_BF16, DT_F32}, 4, 3, 5,
         {{0}, {.trans = true, .bcast = {false, true}}}, 2, {2, 3}},
        {"empty batch", F32S, 4, 3, 5, {{0}}, 2, {2, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i], 1e-5);
}

static void test_half(void)
{
    const Case cases[] = {
        {"f16", {DT_F16, DT_F16, DT_F16}, 9, 7, 33, {{0}, {.trans = true}}, 0, {0}},
        {"bf16", {DT_BF16, DT_BF16, DT_BF16}, 9, 7, 33, {{.trans = true}, {0}}, 1, {2}},
        {"bf16 in, f32 out", {DT_BF16, DT_BF16, DT_F32}, 9, 7, 33, {{0}}, 0, {0}},
        {"f32 x f16 -> bf16", {DT_F32, DT_F16, DT_BF16}, 9, 7, 33, {{0}, {.step = 2}}, 0, {0}},
    };
    /* f32 accumulation then one rounding against an f64 sum rounded once: at most one
     * unit in the last place of the output's dtype apart */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        DType dc = cases[i].dt[2];
        run_case(&cases[i], dc == DT_F32 ? 1e-5 : dc == DT_F16 ? 2e-3 : 1e-2);
    }
}

/* Every f16 bit pattern times 1 (K = 1, f32 out): the f16 reading is exact, subnormals,
 * infinities and NaNs included; and every bf16 pattern likewise. */
static void test_half_exact(void)
{
    const int64_t M = 65536;
    uint16_t *a = malloc(M * sizeof *a);
    float one = 1, *c = malloc(M * sizeof *c);
    for (int64_t i = 0; i < M; i++)
        a[i] = (uint16_t)i;
    void *bufs[3] = {a, &one, c};
    Gemm g = {.m = dim_static(M), .n = dim_static(1), .k = dim_static(1), .epilogue = -1};
    g.a = (GemmOperand){0, dim_static(0), {{0}}, dim_static(1), dim_static(1)};
    g.b = (GemmOperand){1, dim_static(0), {{0}}, dim_static(1), dim_static(1)};
    g.c = (GemmOperand){2, dim_static(0), {{0}}, dim_static(1), dim_static(1)};
    for (DType dt = DT_F16; dt <= DT_BF16; dt++) {
        DType dts[3] = {dt, DT_F32, DT_F32};
        Err e = {0};
        CHECK(gemm_run(&g, bufs, dts, &(SymBind){0}, &e));
        int bad = 0;
        for (int64_t i = 0; i < M; i++) {
            float want = dt == DT_F16 ? f16_to_f32(a[i]) : bf16_to_f32(a[i]);
            bad += !(c[i] == want || (isnan(c[i]) && isnan(want)));
        }
        CHECK(bad == 0);
    }
    free(a);
    free(c);
}

/* x[B, 3, 8] @ w[8, 6] as one GEMM of B*3 rows, and as a batch of B: both at B = 1 and 5. */
static void test_symbolic(void)
{
    const int B = 0;
    for (int64_t batch = 1; batch <= 5; batch += 4) {
        SymBind sb = {0};
        sb.val[B] = batch, sb.known[B] = true;
        for (int batched = 0; batched < 2; batched++) {
            Gemm g = {.m = batched ? dim_static(3) : (Dim){3, 1u << B, 0}, .n = dim_static(6),
                      .k = dim_static(8), .epilogue = -1};
            if (batched) {
                g.nbatch = 1;
                g.batch[0] = (Dim){1, 1u << B, 0};
                g.a.batch_stride[0] = dim_static(24);
                g.c.batch_stride[0] = dim_static(18);
            }
            Dim sa = g.a.batch_stride[0], sc = g.c.batch_stride[0]; /* w broadcast */
            g.a = (GemmOperand){0, dim_static(0), {sa}, dim_static(8), dim_static(1)};
            g.b = (GemmOperand){1, dim_static(0), {dim_static(0)}, dim_static(1), dim_static(8)};
            g.c = (GemmOperand){2, dim_static(0), {sc}, dim_static(6), dim_static(1)};
            void *bufs[4] = {fill(DT_F32, batch * 24, true), fill(DT_F32, 48, true),
                             fill(DT_F32, batch * 18, false), fill(DT_F32, batch * 18, false)};
            DType dts[4] = {DT_F32, DT_F32, DT_F32, DT_F32};
            Err e = {0};
            CHECK(gemm_run(&g, bufs, dts, &sb, &e));
            g.c.buf = 3;
            CHECK(gemm_reference(&g, bufs, dts, &sb, &e));
            int bad = 0;
            for (int64_t i = 0; i < batch * 18; i++)
                bad += !check_close(((float *)bufs[2])[i], ((float *)bufs[3])[i], 1e-5);
            CHECK(bad == 0);
            for (int i = 0; i < 4; i++)
                free(bufs[i]);
        }
    }
}

static void test_edges(void)
{
    /* K = 0: C is all zeros */
    float a[1], b[1], c[6] = {1, 2, 3, 4, 5, 6};
    void *bufs[3] = {a, b, c};
    DType dts[3] = {DT_F32, DT_F32, DT_F32};
    Gemm g = {.m = dim_static(2), .n = dim_static(3), .k = dim_static(0), .epilogue = -1};
    g.a = (GemmOperand){0, dim_static(0), {{0}}, dim_static(0), dim_static(1)};
    g.b = (GemmOperand){1, dim_static(0), {{0}}, dim_static(3), dim_static(1)};
    g.c = (GemmOperand){2, dim_static(0), {{0}}, dim_static(3), dim_static(1)};
    Err e = {0};
    CHECK(gemm_run(&g, bufs, dts, &(SymBind){0}, &e));
    int nonzero = 0;
    for (int i = 0; i < 6; i++)
        nonzero += c[i] != 0;
    CHECK(nonzero == 0);
    /* M = 0: nothing to do, nothing touched */
    g.m = dim_static(0), g.k = dim_static(2), c[0] = 7;
    CHECK(gemm_run(&g, bufs, dts, &(SymBind){0}, &e));
    CHECK(c[0] == 7);
    /* integer operands are an error that says which dtype */
    DType ints[3] = {DT_F32, DT_I32, DT_F32};
    g.m = dim_static(2);
    CHECK(!gemm_run(&g, bufs, ints, &(SymBind){0}, &e));
    CHECK(strstr(e.msg, "i32") != NULL);
}

/* Not a check: the rate OpenBLAS gives a typical MLP layer, for the record. */
static void time_sgemm(void)
{
    const int64_t M = 128, N = 1024, K = 1024;
    float *a = fill(DT_F32, M * K, true), *b = fill(DT_F32, K * N, true);
    float *c = fill(DT_F32, M * N, false);
    void *bufs[3] = {a, b, c};
    DType dts[3] = {DT_F32, DT_F32, DT_F32};
    Gemm g = {.m = dim_static(M), .n = dim_static(N), .k = dim_static(K), .epilogue = -1};
    g.a = (GemmOperand){0, dim_static(0), {{0}}, dim_static(K), dim_static(1)};
    g.b = (GemmOperand){1, dim_static(0), {{0}}, dim_static(1), dim_static(K)}; /* w^T */
    g.c = (GemmOperand){2, dim_static(0), {{0}}, dim_static(N), dim_static(1)};
    Err e = {0};
    gemm_set_threads(0);
    CHECK(gemm_run(&g, bufs, dts, &(SymBind){0}, &e)); /* warm-up */
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        double t0 = clock_seconds();
        gemm_run(&g, bufs, dts, &(SymBind){0}, &e);
        double t = clock_seconds() - t0;
        best = t < best ? t : best;
    }
    printf("sgemm %lldx%lldx%lld (B transposed): %.3f ms, %.1f GFLOP/s (best of 10)\n",
           (long long)M, (long long)N, (long long)K, best * 1e3, 2.0 * M * N * K / best * 1e-9);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    srand(3);
    test_layouts();
    test_batches();
    test_half();
    test_half_exact();
    test_symbolic();
    test_edges();
    time_sgemm();
    return check_status();
}
