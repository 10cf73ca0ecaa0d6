/* test_sgemm.c — coil's portable GEMM (runtime/cpu/sgemm.c) against a plain f64 triple loop:
 * every transpose combination, empty and odd sizes, padded rows, several threads. */
#include <float.h>
#include <stdlib.h>

#include "check.h"
#include "runtime/cpu/sgemm.h"

typedef struct Shape {
    int64_t m, n, k;
    int threads;
} Shape;

/* Uniform in [-1, 1) from a 64-bit LCG: reproducible without the runtime's generators. */
static float next_uniform(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* A rows x cols matrix (rows ld apart, ld > cols: the padding must be left alone). */
static float *random_matrix(int64_t rows, int64_t ld, uint64_t *state)
{
    int64_t n = rows * ld;
    float *m = malloc((size_t)(n ? n : 1) * sizeof *m);
    for (int64_t i = 0; i < n; i++)
        m[i] = next_uniform(state);
    return m;
}

/* Element (r, c) of op(X) where X has rows ld apart. */
static double op_at(const float *x, bool trans, int64_t ld, int64_t r, int64_t c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

/* C against the f64 product: each element within the bound f32 summation of k products
 * can drift from it (k + 2 roundings of the sum of their magnitudes); the padding of
 * every row and NaN-free results. */
static void check_product(const Shape *s, bool ta, bool tb, const float *a, int64_t lda,
                          const float *b, int64_t ldb, const float *c, int64_t ldc, float pad)
{
    int bad = 0;
    for (int64_t i = 0; i < s->m; i++) {
        for (int64_t j = 0; j < s->n; j++) {
            double want = 0, mag = 0;
            for (int64_t p = 0; p < s->k; p++) {
                double t = op_at(a, ta, lda, i, p) * op_at(b, tb, ldb, p, j);
                want += t, mag += fabs(t);
            }
            double tol = (double)(s->k + 2) * FLT_EPSILON * mag;
            if (!(fabs(c[i * ldc + j] - want) <= tol) && bad++ < 3)
                fprintf(stderr, "  (%lld, %lld): %.9g, want %.9g\n", (long long)i, (long long)j,
                        c[i * ldc + j], want);
        }
        for (int64_t j = s->n; j < ldc; j++)
            if (c[i * ldc + j] != pad && bad++ < 3)
                fprintf(stderr, "  padding (%lld, %lld) overwritten\n", (long long)i, (long long)j);
    }
    if (bad)
        fprintf(stderr, "%lldx%lldx%lld trans_a=%d trans_b=%d threads=%d: %d wrong\n",
                (long long)s->m, (long long)s->n, (long long)s->k, ta, tb, s->threads, bad);
    CHECK(bad == 0);
}

/* One shape, one transpose combination: every leading dimension 3 past its row. C starts
 * as NaN, so an element the GEMM forgets to write shows (k = 0 must write zeros). */
static void check_case(const Shape *s, bool ta, bool tb, uint64_t *state)
{
    int64_t lda = (ta ? s->m : s->k) + 3, ldb = (tb ? s->k : s->n) + 3, ldc = s->n + 3;
    float *a = random_matrix(ta ? s->k : s->m, lda, state);
    float *b = random_matrix(tb ? s->n : s->k, ldb, state);
    float *c = malloc((size_t)(s->m * ldc + 1) * sizeof *c);
    const float pad = -7.25f;
    for (int64_t i = 0; i < s->m * ldc; i++)
        c[i] = (i % ldc) < s->n ? NAN : pad;
    sgemm_portable(ta, tb, s->m, s->n, s->k, a, lda, b, ldb, c, ldc, s->threads);
    check_product(s, ta, tb, a, lda, b, ldb, c, ldc, pad);
    free(a);
    free(b);
    free(c);
}

/* m or n zero: nothing is written, not even C's first element. */
static void check_empty(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[1] = {42};
    sgemm_portable(false, false, 0, 2, 2, a, 2, b, 2, c, 2, 1);
    sgemm_portable(true, true, 2, 0, 2, a, 2, b, 2, c, 1, 1);
    CHECK(c[0] == 42);
}

int main(void)
{
    /* Odd sizes; 65x33x129 crosses the depth blocking, 37x300x67 the column blocking, and
     * 300x257x70 is large enough to be split over threads (with a remainder of rows). */
    const Shape shapes[] = {
        {1, 1, 1, 1},   {0, 0, 0, 1},   {3, 4, 0, 1},      {1, 9, 2, 1},      {7, 13, 5, 1},
        {7, 13, 5, 4},  {9, 1, 17, 1},  {65, 33, 129, 1},  {65, 33, 129, 3},  {37, 300, 67, 2},
        {300, 257, 70, 3}, {300, 257, 70, 1},
    };
    uint64_t state = 12345;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 4; t++)
            check_case(&shapes[i], t & 1, t >> 1 & 1, &state);
    check_empty();
    return check_status();
}
