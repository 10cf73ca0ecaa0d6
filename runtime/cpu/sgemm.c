/* sgemm.c — coil's portable f32 GEMM (sgemm.h), for builds without OpenBLAS: "slow is fine,
 * the GPU does the work", but not needlessly slow, and right for every layout.
 *
 * op(B) is copied block by block (KC rows x NC columns) into a dense row-major panel on the
 * stack, so whatever B's transposition, the inner loop adds a multiple of a panel row to a
 * row of C: two contiguous streams that the compiler vectorises. The panel (64 KiB) stays in
 * L2 while every row of the caller's range passes over it, and a C row segment (1 KiB) in L1
 * while KC panel rows are added to it. Threads take contiguous ranges of C's rows, each
 * packing its own panels (their cost is 1/rows of the arithmetic). */
#include "runtime/cpu/sgemm.h"

#include "runtime/pool.h"

enum {
    KC = 64,  /* panel rows: the depth of one pass over a C row segment */
    NC = 256, /* panel columns: one C row segment */
    MIN_ROWS_PER_THREAD = 16,
};
/* Below this many multiply-adds one thread does it all: starting threads (tens of
 * microseconds) must stay small beside the arithmetic. */
static const double PARALLEL_MIN_MACS = 1 << 22;

typedef struct Sgemm {
    bool trans_a, trans_b;
    int64_t m, n, k;
    const float *a, *b;
    float *c;
    int64_t lda, ldb, ldc;
} Sgemm;

/* Element (i, p) of op(A). */
static inline float a_at(const Sgemm *s, int64_t i, int64_t p)
{
    return s->trans_a ? s->a[p * s->lda + i] : s->a[i * s->lda + p];
}

/* Rows p0 .. p0+kc of op(B), columns j0 .. j0+nc, into panel (row-major, nc a row). */
static void pack_b(const Sgemm *s, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *panel)
{
    for (int64_t p = 0; p < kc; p++) {
        float *dst = panel + p * nc;
        if (!s->trans_b) {
            const float *src = s->b + (p0 + p) * s->ldb + j0;
            for (int64_t j = 0; j < nc; j++)
                dst[j] = src[j];
        } else { /* a column of the stored B; its cache lines serve the next p too */
            const float *src = s->b + j0 * s->ldb + p0 + p;
            for (int64_t j = 0; j < nc; j++)
                dst[j] = src[j * s->ldb];
        }
    }
}

/* y = a x and y += a x over n floats: the two streams the whole product reduces to
 * (restrict: y never overlaps the panel, so no run-time overlap check). */
static inline void row_set(float *restrict y, float a, const float *restrict x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        y[j] = a * x[j];
}

static inline void row_add(float *restrict y, float a, const float *restrict x, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        y[j] += a * x[j];
}

/* C[i0..i1, j0..j0+nc] gets op(A)[i0..i1, p0..p0+kc] times the panel: written by the first
 * depth block (p0 = 0), added to by the others. */
static void panel_rows(const Sgemm *s, int64_t i0, int64_t i1, int64_t p0, int64_t kc,
                       int64_t j0, int64_t nc, const float *panel)
{
    for (int64_t i = i0; i < i1; i++) {
        float *crow = s->c + i * s->ldc + j0;
        for (int64_t p = 0; p < kc; p++) {
            float aip = a_at(s, i, p0 + p);
            if (p0 == 0 && p == 0)
                row_set(crow, aip, panel, nc);
            else
                row_add(crow, aip, panel + p * nc, nc);
        }
    }
}

/* Rows [i0, i1) of C, complete. */
static void multiply_rows(const Sgemm *s, int64_t i0, int64_t i1)
{
    if (s->k == 0) { /* an empty sum */
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = 0; j < s->n; j++)
                s->c[i * s->ldc + j] = 0;
        return;
    }
    float panel[KC * NC];
    for (int64_t j0 = 0; j0 < s->n; j0 += NC) {
        int64_t nc = s->n - j0 < NC ? s->n - j0 : NC;
        for (int64_t p0 = 0; p0 < s->k; p0 += KC) {
            int64_t kc = s->k - p0 < KC ? s->k - p0 : KC;
            pack_b(s, p0, kc, j0, nc, panel);
            panel_rows(s, i0, i1, p0, kc, j0, nc, panel);
        }
    }
}

static void multiply_chunk(void *ctx, int64_t begin, int64_t end)
{
    multiply_rows(ctx, begin, end);
}

/* How many threads the product is worth: none beyond the first for a small one, and
 * at least MIN_ROWS_PER_THREAD rows each. */
static int threads_worth(const Sgemm *s, int threads)
{
    if ((double)s->m * (double)s->n * (double)s->k < PARALLEL_MIN_MACS)
        return 1;
    int64_t by_rows = s->m / MIN_ROWS_PER_THREAD;
    return by_rows < threads ? (int)(by_rows > 1 ? by_rows : 1) : threads;
}

void sgemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                    int64_t ldc, int threads)
{
    if (m <= 0 || n <= 0)
        return;
    Sgemm s = {.trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k,
               .a = a, .b = b, .c = c, .lda = lda, .ldb = ldb, .ldc = ldc};
    int t = threads_worth(&s, threads);
    if (t <= 1) {
        multiply_rows(&s, 0, m);
        return;
    }
    Err e = {0};
    Pool *pool = pool_new(t, &e); /* NULL (threads would not start): the caller alone */
    pool_parallel_for(pool, m, MIN_ROWS_PER_THREAD, multiply_chunk, &s);
    pool_free(pool);
}
