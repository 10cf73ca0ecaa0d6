/* gemm.c — a Program's GEMM steps on the CPU: each batch is one sgemm on the BLAS path
 * (OpenBLAS, or coil's portable GEMM, runtime/cpu/sgemm.c, in a build without it).
 *
 * An f32 operand whose rows or columns are contiguous goes to sgemm as it is (a transposed
 * weight is read transposed, with its column stride as the leading dimension); any other
 * operand (f16, bf16, a zero or negative stride) is first packed into a dense f32 panel in
 * the order of its memory (a transposed one stays transposed: the copy streams), and a C
 * that sgemm cannot write in place is computed into a panel and stored back, rounding to
 * its dtype. Batches run one after another, each sgemm on the BLAS path's threads;
 * a panel is reused while its operand's offset repeats (a batch-broadcast weight). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/conv.h"
#include "runtime/cpu/gemm.h"
#include "runtime/pool.h"

#ifdef COIL_HAVE_OPENBLAS /* set by CMake for this file alone (-DCOIL_OPENBLAS=ON) */
#include <cblas.h>
#else
#include <stdatomic.h>

#include "runtime/cpu/sgemm.h"
#endif

/* One operand at concrete sizes: element (r, c) of batch offset `off` is at
 * base[off + r * rs + c * cs]. */
typedef struct Mat {
    DType dt;
    char *base;
    int64_t rows, cols, rs, cs;
    int64_t bstride[COIL_MAX_RANK];
    int64_t off;        /* the first element (GemmOperand.offset) */
    float *panel;       /* dense f32 copy, when sgemm cannot read it in place */
    const GemmConv *conv; /* B of a convolution: x through its windows, always packed */
    int64_t panel_off;  /* the offset the panel holds, -1 none */
} Mat;

/* How sgemm reads or writes a matrix in place: row-major as it is, or transposed. */
typedef struct BlasView {
    bool trans;
    int64_t ld;
} BlasView;

/* The BLAS path, picked at build time: row-major C = op(A) op(B), sizes checked to fit int. */
#ifdef COIL_HAVE_OPENBLAS
const char *gemm_blas_name(void) { return "OpenBLAS"; }

void gemm_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : pool_default_threads()); }

static void blas_sgemm(BlasView va, BlasView vb, int64_t m, int64_t n, int64_t k,
                       const float *a, const float *b, float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, va.trans ? CblasTrans : CblasNoTrans,
                vb.trans ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                (int)va.ld, b, (int)vb.ld, 0.0f, c, (int)ldc);
}
#else
const char *gemm_blas_name(void) { return "portable GEMM"; }

/* Like OpenBLAS's count, one for the whole process (0: one thread per available CPU). */
static atomic_int blas_threads;

void gemm_set_threads(int n) { atomic_store(&blas_threads, n > 0 ? n : 0); }

static void blas_sgemm(BlasView va, BlasView vb, int64_t m, int64_t n, int64_t k,
                       const float *a, const float *b, float *c, int64_t ldc)
{
    int threads = atomic_load(&blas_threads);
    sgemm_portable(va.trans, vb.trans, m, n, k, a, va.ld, b, vb.ld, c, ldc,
                   threads > 0 ? threads : pool_default_threads());
}
#endif

static Mat mat_make(const GemmOperand *o, int nbatch, void *const *bufs, const DType *dts,
                    const SymBind *sb, int64_t rows, int64_t cols)
{
    Mat m = {.dt = dts[o->buf], .base = bufs[o->buf], .rows = rows, .cols = cols,
             .rs = dim_value(o->row_stride, sb), .cs = dim_value(o->col_stride, sb),
             .off = dim_value(o->offset, sb), .panel_off = -1};
    for (int d = 0; d < nbatch; d++)
        m.bstride[d] = dim_value(o->batch_stride[d], sb);
    return m;
}

/* Row-major as it is (NoTrans, ld = row stride) or its transpose (Trans, ld = column
 * stride); a dimension of extent 1 has no meaningful stride. False: pack it first. */
static bool blas_view(const Mat *m, BlasView *v)
{
    if (m->dt != DT_F32)
        return false;
    int64_t r = m->rows > 1 ? m->rows : 1, c = m->cols > 1 ? m->cols : 1;
    if ((m->cols <= 1 || m->cs == 1) && (m->rows <= 1 || m->rs >= c)) {
        *v = (BlasView){false, m->rows <= 1 ? c : m->rs};
        return v->ld <= INT_MAX;
    }
    if ((m->rows <= 1 || m->rs == 1) && (m->cols <= 1 || m->cs >= r)) {
        *v = (BlasView){true, m->cols <= 1 ? r : m->cs};
        return v->ld <= INT_MAX;
    }
    return false;
}

/* Inline twins of ir's f16_to_f32 and bf16_to_f32 (exact, same results; the f16 one
 * without libm calls): they run on every element of every half-precision operand. */
static inline float half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h >> 10 & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) { /* zero or subnormal: man * 2^-24 is exact in f32 */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    bits = sign | (exp == 0x1f ? 0x7f800000 | man << 13 : (exp + 112) << 23 | man << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float bf16_bits_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* n elements of dtype dt (f32, f16, bf16), `step` apart, to dense f32; one loop per
 * dtype so each vectorises. */
static void to_f32(DType dt, const char *base, int64_t at, int64_t step, int64_t n, float *dst)
{
    const float *f = (const float *)base + at;
    const uint16_t *h = (const uint16_t *)base + at;
    if (dt == DT_F32)
        for (int64_t i = 0; i < n; i++)
            dst[i] = f[i * step];
    else if (dt == DT_F16)
        for (int64_t i = 0; i < n; i++)
            dst[i] = half_to_f32(h[i * step]);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = bf16_bits_f32(h[i * step]);
}

/* Whether m's columns are closer together than its rows: then its panel is packed
 * transposed, so the copy reads memory in order (a transposed weight). */
static bool column_major(const Mat *m)
{
    return m->rows > 1 && m->cols > 1 && llabs(m->rs) < llabs(m->cs);
}

/* A convolution's B at batch offset off as a dense f32 [K, N] panel (im2col). */
static void pack_conv(Mat *m, int64_t off)
{
    if (m->dt == DT_F32) {
        conv_pack_panel(m->conv, (const float *)m->base + off, 0, m->rows, 0, m->cols, m->cols,
                        m->panel);
        return;
    }
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            m->panel[r * m->cols + c] = (float)gemm_conv_load(m->conv, m->dt, m->base, off, r, c);
}

/* The dense f32 copy of A or B at offset off, in the order its memory is in. */
static void pack(Mat *m, int64_t off)
{
    if (m->panel_off == off)
        return; /* a broadcast operand: same matrix as the last batch */
    if (m->conv) {
        pack_conv(m, off);
        m->panel_off = off;
        return;
    }
    bool cm = column_major(m);
    int64_t outer = cm ? m->cols : m->rows, inner = cm ? m->rows : m->cols;
    int64_t os = cm ? m->cs : m->rs, is = cm ? m->rs : m->cs;
    for (int64_t o = 0; o < outer; o++)
        to_f32(m->dt, m->base, off + o * os, is, inner, m->panel + o * inner);
    m->panel_off = off;
}

/* C's panel back into C at offset off, rounding to C's dtype. */
static void unpack(const Mat *m, int64_t off)
{
    for (int64_t r = 0; r < m->rows; r++) {
        const float *src = m->panel + r * m->cols;
        int64_t at = off + r * m->rs;
        for (int64_t c = 0; c < m->cols; c++, at += m->cs) {
            if (m->dt == DT_F32)
                ((float *)m->base)[at] = src[c];
            else if (m->dt == DT_F16)
                ((uint16_t *)m->base)[at] = f32_to_f16(src[c]);
            else
                ((uint16_t *)m->base)[at] = f32_to_bf16(src[c]);
        }
    }
}

/* Where sgemm finds (or, for C, puts) m at offset off and how it reads it: in place, or
 * in its panel (A and B packed here in their memory's order; C row-major). */
static float *operand(Mat *m, int64_t off, bool is_c, BlasView *v)
{
    if (!m->panel && blas_view(m, v))
        return (float *)m->base + off;
    if (is_c) { /* computed row-major, then stored by unpack */
        *v = (BlasView){false, m->cols > 1 ? m->cols : 1};
        return m->panel;
    }
    pack(m, off);
    bool cm = column_major(m);
    *v = (BlasView){cm, cm ? m->rows : (m->cols > 1 ? m->cols : 1)};
    return m->panel;
}

static void zero_c(Mat *c, int64_t off)
{
    if (c->panel) {
        memset(c->panel, 0, (size_t)(c->rows * c->cols) * sizeof(float));
        unpack(c, off);
        return;
    }
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t j = 0; j < c->cols; j++)
            ((float *)c->base)[off + r * c->rs + j * c->cs] = 0;
}

/* One batch: C = A B at the given element offsets. */
static void gemm_one(Mat *a, Mat *b, Mat *c, int64_t k, const int64_t off[3])
{
    if (k == 0) {
        zero_c(c, off[2]); /* an empty sum */
        return;
    }
    BlasView va, vb, vc;
    const float *pa = operand(a, off[0], false, &va), *pb = operand(b, off[1], false, &vb);
    float *pc = operand(c, off[2], true, &vc);
    blas_sgemm(va, vb, c->rows, c->cols, k, pa, pb, pc, vc.ld);
    if (c->panel)
        unpack(c, off[2]);
}

/* C must be written row-major (NoTrans); A and B may be read either way. */
static bool needs_panel(const Mat *m, bool is_c)
{
    BlasView v;
    return m->conv || !blas_view(m, &v) || (is_c && v.trans);
}

static bool alloc_panels(Mat *m[3], Err *e)
{
    for (int i = 0; i < 3; i++) {
        if (!needs_panel(m[i], i == 2))
            continue;
        size_t n = (size_t)(m[i]->rows * m[i]->cols);
        m[i]->panel = malloc((n ? n : 1) * sizeof(float));
        if (!m[i]->panel) {
            err_set(e, ERR_MEMORY, "gemm: out of memory for a %lld x %lld f32 panel",
                    (long long)m[i]->rows, (long long)m[i]->cols);
            return false;
        }
    }
    return true;
}

static bool check_sizes(const Gemm *g, const DType *dts, int64_t m, int64_t n, int64_t k, Err *e)
{
    const GemmOperand *ops[3] = {&g->a, &g->b, &g->c};
    for (int i = 0; i < 3; i++)
        if (!dtype_info[dts[ops[i]->buf]].is_float) {
            err_set(e, ERR_INPUT, "gemm: %s operands are not supported (f32, f16, bf16 are)",
                    dtype_info[dts[ops[i]->buf]].name);
            return false;
        }
    if (m < 0 || n < 0 || k < 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX) {
        err_set(e, ERR_INPUT, "gemm: sizes %lld x %lld x %lld are out of range", (long long)m,
                (long long)n, (long long)k);
        return false;
    }
    return true;
}

/* Batch t's element offsets of A, B and C (batch dims row-major, t the flat index). */
static void batch_offsets(const Gemm *g, const SymBind *sb, Mat *m[3], int64_t t, int64_t off[3])
{
    for (int i = 0; i < 3; i++)
        off[i] = m[i]->off;
    for (int d = g->nbatch - 1; d >= 0; d--) {
        int64_t size = dim_value(g->batch[d], sb), idx = t % size;
        t /= size;
        for (int i = 0; i < 3; i++)
            off[i] += idx * m[i]->bstride[d];
    }
}

static int64_t batch_count(const Gemm *g, const SymBind *sb)
{
    int64_t n = 1;
    for (int d = 0; d < g->nbatch; d++)
        n *= dim_value(g->batch[d], sb);
    return n;
}

bool gemm_run(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb, Err *e)
{
    int64_t M = dim_value(g->m, sb), N = dim_value(g->n, sb), K = dim_value(g->k, sb);
    if (!check_sizes(g, dts, M, N, K, e))
        return false;
    Mat a = mat_make(&g->a, g->nbatch, bufs, dts, sb, M, K);
    Mat b = mat_make(&g->b, g->nbatch, bufs, dts, sb, K, N);
    Mat c = mat_make(&g->c, g->nbatch, bufs, dts, sb, M, N);
    Mat *m[3] = {&a, &b, &c};
    b.conv = g->conv;
    int64_t nb = batch_count(g, sb);
    bool ok = M == 0 || N == 0 || nb == 0 || alloc_panels(m, e);
    for (int64_t t = 0; ok && M && N && t < nb; t++) {
        int64_t off[3];
        batch_offsets(g, sb, m, t, off);
        gemm_one(&a, &b, &c, K, off);
    }
    free(a.panel);
    free(b.panel);
    free(c.panel);
    return ok;
}

/* Row i of A (f32, `as` apart along k) times column j of B (f32, `bs` apart) in f64: the
 * reference's common case read directly, not element by element through dtype_load
 * (which took 86% of test_gemm_tiled's time). */
static double dot_f32(const float *a, int64_t as, const float *b, int64_t bs, int64_t K)
{
    double acc = 0;
    for (int64_t p = 0; p < K; p++)
        acc += (double)a[p * as] * (double)b[p * bs];
    return acc;
}

bool gemm_reference(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb, Err *e)
{
    int64_t M = dim_value(g->m, sb), N = dim_value(g->n, sb), K = dim_value(g->k, sb);
    if (M < 0 || N < 0 || K < 0) {
        err_set(e, ERR_INPUT, "gemm: negative sizes");
        return false;
    }
    Mat a = mat_make(&g->a, g->nbatch, bufs, dts, sb, M, K);
    Mat b = mat_make(&g->b, g->nbatch, bufs, dts, sb, K, N);
    Mat c = mat_make(&g->c, g->nbatch, bufs, dts, sb, M, N);
    Mat *m[3] = {&a, &b, &c};
    int64_t nb = batch_count(g, sb), off[3];
    bool f32 = a.dt == DT_F32 && b.dt == DT_F32 && !g->conv;
    for (int64_t t = 0; t < nb; t++) {
        batch_offsets(g, sb, m, t, off);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                if (f32)
                    acc = dot_f32((const float *)a.base + off[0] + i * a.rs, a.cs,
                                  (const float *)b.base + off[1] + j * b.cs, b.rs, K);
                else
                    for (int64_t p = 0; p < K; p++)
                        acc += dtype_load(a.dt, a.base, off[0] + i * a.rs + p * a.cs) *
                               (g->conv ? gemm_conv_load(g->conv, b.dt, b.base, off[1], p, j)
                                        : dtype_load(b.dt, b.base, off[1] + p * b.rs + j * b.cs));
                dtype_store(c.dt, c.base, off[2] + i * c.rs + j * c.cs, acc);
            }
    }
    return true;
}
