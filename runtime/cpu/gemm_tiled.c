/* gemm_tiled.c — GEMM steps on the generated micro-kernels (codegen/cpu/ukernel.c): the
 * operands' layout picks the kernel, tiles are blocked for the caches and split over threads.
 *
 * Row tiles (MR rows of one batch; rows count batches then M) and column tiles (NR columns)
 * form a grid; the threads split whichever side has more tiles into contiguous ranges. A
 * thread walks its part in macro blocks of row tiles x column tiles, never across a batch:
 * for each block of k, each column tile's B panel meets every row tile of the block in turn
 * (the panel stays in cache, the block's A rows in L2; the dot form fetches the next panel
 * of a weight streaming from memory meanwhile). B's panels are used in place, or
 * copied k-major into a per-thread scratch when that is cheaper than reading them where
 * they are: broadcast-form rows a page apart, and the dot layout where the target's dot
 * kernel loses (small K; any K on AVX2) and A has rows enough to repay the copy, where
 * transposing B^T's panel once for the broadcast kernel beats reducing every dot tile. When more than one block of rows would
 * pack the same panels, all of B is packed once first, the threads sharing the work.
 * Partial tiles live in the scratch until their last block of k, then go to the step's
 * TileFn while still in L1. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/conv.h"
#include "runtime/cpu/gemm_tiled.h"

/* Blocking, measured on Sapphire Rapids (48 KiB L1d, 2 MiB L2 per core) with the 4 x 6 dot
 * and 12 x 32 broadcast tiles (tools/gemm_bench.c). A dot tile reduces its accumulators
 * once per block of k, so blocks are long (splitting K = 3072 in blocks of 768 or 1024
 * measured best); a broadcast panel of KC_MAX x 32 floats (128 KiB) streams from L2 at the
 * kernel's full rate, and shorter blocks measured no faster. */
#define KC_MAX 1024
#define DOT_MC_ROWS 128     /* dot: rows of A per macro block, K x 128 floats in L2 */
/* bcast: the A rows of a macro block, in half of L2. Each macro block packs B's panels
 * again, so fewer, taller blocks pack less: 1 MiB against 512 KiB measured 128x1024x1024
 * (the MLP's backward dX) 222 -> 257 GFLOP/s, 1024x3072x768 250 -> 265, 1024x768x3072
 * 217 -> 234 at 2 threads (gemm_bench --shape M,N,K,bcast --weights 4); 1.5 MiB no
 * better. */
#define BCAST_A_BYTES (1024 << 10)
#define MC_TILES_MAX 64     /* row tiles per macro block at most */
#define NC_TILES 64         /* column tiles per macro block */
#define SLOT_BYTES (256 << 10) /* the tiles of a macro block while k is blocked */
/* Macro blocks walk row by row (walk_rows) where K is this short: a tile's product is then
 * cheap beside its trip to C, and C's lines (and the epilogue's operands) arrive as
 * streams along rows. The block's panels, at most WALK_PANEL_BYTES, wait in L2. */
#define WALK_MAX_K 256
#define WALK_PANEL_BYTES (256 << 10)
/* Broadcast-form B rows at least this many floats apart are packed: rows a page apart
 * alias in L1 and take a TLB entry each. */
#define PACK_ROW_STRIDE 1024
/* With at least this many rows of A the broadcast form packs B's rows at any stride: rows
 * 768 floats apart still share a few L1 sets. On a Zen 3, [1024, K] x [K, 768] with K =
 * 768 and 3072: 1.06-1.11x at 1 and 2 threads; 128 rows: no change; 48 rows: 0.88-0.93x
 * (gemm_bench, 11 interleaved rounds). */
#define PACK_ROWS_MIN_M 256
/* B^T's panels transposed for the broadcast kernel cost a pass over B that fewer rows of A
 * than this cannot repay: the dot kernel reads B^T in place. On a Zen 3 at 2 threads,
 * [M, 1024] x [1024, 1024]^T: the dot kernel 2.3x at M = 1, 1.5x at 8, 1.2x at 32, even at
 * 64, 0.9x at 96 (gemm_bench --tiling dot/bcast, 5 interleaved rounds). */
#define TRANSPOSE_MIN_M 64
/* At most this much memory for B's panels packed once for the whole GEMM (prepack):
 * GPT-2's and BERT's largest weights (9 MiB) fit, its 154 MiB LM head does not. */
#define PREPACK_MAX_BYTES (16 << 20)
/* At most this much memory for the last column tile's columns as B^T rows (prepare_edge). */
#define EDGE_MAX_BYTES (16 << 20)

/* PACK_IM2COL: a convolution's B, gathered from x into each panel (runtime/cpu/conv.c). */
typedef enum Pack { PACK_NONE, PACK_ROWS, PACK_TRANSPOSED, PACK_IM2COL } Pack;

/* One operand at concrete sizes: element (r, c) of batch t is
 * base[off + batch_offset(t) + r * rs + c * cs]. */
typedef struct Mat {
    const float *base;
    int64_t off, rs, cs;
    int64_t bs[COIL_MAX_RANK];
} Mat;

typedef struct Job {
    const Ukernels *uk;
    TileFn tile;
    void *const *bufs;
    const int64_t *syms;
    bool dot;                    /* the dot micro-kernel, else the broadcast one */
    Pack pack;                   /* how B's panels reach the broadcast kernel */
    const GemmConv *conv;        /* B is x through a convolution's windows (Gemm.conv) */
    bool pack_a;                 /* broadcast form: A's row tiles copied k-major first */
    int nbatch;
    int64_t batch[COIL_MAX_RANK];
    int64_t M, N, K;
    int64_t mr, nr;              /* the tile */
    int64_t mtiles, ntiles;      /* row tiles per batch, column tiles */
    int64_t rtiles;              /* row tiles of all batches */
    bool split_rows;             /* threads split row tiles, else column tiles */
    bool walk_rows;              /* macro blocks row by row (walk_rows), else by columns */
    int64_t kc, mc, nc;          /* k per block; row and column tiles per macro block */
    int64_t nkb;                 /* blocks of k */
    float *panels;               /* B's panels packed once before the tiles run, or NULL */
    float *edge;                 /* broadcast form: the last column tile's columns as rows
                                  * of B^T (edge_cols x K per batch) for the dot kernel, or NULL */
    int64_t edge_cols;
    bool b_batched;              /* B differs between batches (then panels per batch) */
    Mat a, b, c;                 /* c: where store_only writes */
    DType cdt;
    GemmTiling how;              /* the caller's choices (0: the heuristic's) */
    _Atomic bool failed;         /* a thread could not allocate its scratch */
} Job;

/* ---------------------------------------------------------------- checks */

/* Sizes and strides within int64: every index an operand can reach, |off| + sum of
 * (extent - 1) * |stride|, is representable. */
static bool span_ok(int64_t off, const int64_t *ext, const int64_t *stride, int n)
{
    int64_t span = off < 0 ? -off : off, term;
    for (int d = 0; d < n; d++) {
        if (ext[d] < 0 || stride[d] == INT64_MIN)
            return false;
        if (ext[d] == 0)
            return true; /* nothing is read */
        int64_t s = stride[d] < 0 ? -stride[d] : stride[d];
        if (__builtin_mul_overflow(ext[d] - 1, s, &term) || __builtin_add_overflow(span, term, &span))
            return false;
    }
    return true;
}

static Mat mat_make(const GemmOperand *o, int nbatch, void *const *bufs, const SymBind *sb)
{
    Mat m = {.base = bufs[o->buf], .off = dim_value(o->offset, sb),
             .rs = dim_value(o->row_stride, sb), .cs = dim_value(o->col_stride, sb)};
    for (int d = 0; d < nbatch; d++)
        m.bs[d] = dim_value(o->batch_stride[d], sb);
    return m;
}

static bool mat_span_ok(const Mat *m, int nbatch, const int64_t *batch, int64_t rows, int64_t cols)
{
    int64_t ext[COIL_MAX_RANK + 2], st[COIL_MAX_RANK + 2];
    for (int d = 0; d < nbatch; d++)
        ext[d] = batch[d], st[d] = m->bs[d];
    ext[nbatch] = rows, st[nbatch] = m->rs;
    ext[nbatch + 1] = cols, st[nbatch + 1] = m->cs;
    return span_ok(m->off, ext, st, nbatch + 2);
}

/* A stride along an extent of at most 1 is never used: read it as unit, as a matrix
 * with one row is as contiguous as its columns allow. */
static int64_t eff_stride(int64_t stride, int64_t extent) { return extent <= 1 ? 1 : stride; }

typedef enum Form { FORM_NONE, FORM_DOT, FORM_BCAST } Form;

static Form pick_form(const Mat *a, const Mat *b, int64_t N, int64_t K)
{
    if (eff_stride(a->cs, K) == 1 && eff_stride(b->rs, K) == 1)
        return FORM_DOT;
    if (eff_stride(b->cs, N) == 1)
        return FORM_BCAST;
    return FORM_NONE;
}

/* The sizes, or false when they are negative or their products overflow. */
static bool sizes(const Gemm *g, const SymBind *sb, int64_t *batch, int64_t *nb, int64_t mnk[3])
{
    mnk[0] = dim_value(g->m, sb), mnk[1] = dim_value(g->n, sb), mnk[2] = dim_value(g->k, sb);
    *nb = 1;
    for (int d = 0; d < g->nbatch; d++) {
        batch[d] = dim_value(g->batch[d], sb);
        if (batch[d] < 0 || __builtin_mul_overflow(*nb, batch[d], nb))
            return false;
    }
    int64_t rows;
    return mnk[0] >= 0 && mnk[1] >= 0 && mnk[2] >= 0 && !__builtin_mul_overflow(*nb, mnk[0], &rows);
}

/* Why g cannot run here, or NULL. */
static const char *unsupported(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb)
{
    if (dts[g->a.buf] != DT_F32 || dts[g->b.buf] != DT_F32)
        return "A and B must be f32";
    if (g->nbatch < 0 || g->nbatch > COIL_MAX_RANK - 2)
        return "too many batch dimensions";
    int64_t batch[COIL_MAX_RANK], nb, s[3];
    if (!sizes(g, sb, batch, &nb, s))
        return "sizes out of range";
    Mat a = mat_make(&g->a, g->nbatch, bufs, sb), b = mat_make(&g->b, g->nbatch, bufs, sb);
    if (!mat_span_ok(&a, g->nbatch, batch, s[0], s[2]) || !mat_span_ok(&b, g->nbatch, batch, s[2], s[1]))
        return "operand indices out of range";
    if (pick_form(&a, &b, s[1], s[2]) == FORM_NONE)
        return "neither A's columns and B's rows nor B's columns are unit-stride";
    return NULL;
}

bool gemm_tiled_supported(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb)
{
    return unsupported(g, bufs, dts, sb) == NULL;
}

/* ---------------------------------------------------------------- the tile loops */

/* The element offset of operand m at flat batch index t (batch dims row-major). */
static int64_t mat_batch_offset(const Mat *m, const Job *j, int64_t t)
{
    int64_t at = m->off;
    for (int d = j->nbatch - 1; d >= 0; d--) {
        at += t % j->batch[d] * m->bs[d];
        t /= j->batch[d];
    }
    return at;
}

/* Element offsets of A and B for flat batch index t. */
static void batch_offsets(const Job *j, int64_t t, int64_t *ao, int64_t *bo)
{
    *ao = mat_batch_offset(&j->a, j, t), *bo = mat_batch_offset(&j->b, j, t);
}

/* Where one row tile's operands start: A at its first row, B at its batch (k = 0, n = 0). */
typedef struct RowTile {
    const float *a, *b;
    int64_t row0, mr;            /* flattened first row (batch * M + m0), valid rows */
} RowTile;

static RowTile row_tile(const Job *j, int64_t r)
{
    int64_t t = r / j->mtiles, m0 = r % j->mtiles * j->mr, ao, bo;
    batch_offsets(j, t, &ao, &bo);
    int64_t mr = j->M - m0 < j->mr ? j->M - m0 : j->mr;
    return (RowTile){j->a.base + ao + m0 * j->a.rs, j->b.base + bo, t * j->M + m0, mr};
}

/* A thread's scratch: a macro block's tiles while k is blocked (one tile otherwise), B's
 * current panel packed k-major (kc rows of NR floats; walking rows, the block's panels),
 * and with pack_a the macro block's A row tiles for the current block of k (mr x kc
 * each, k-major). */
typedef struct Scratch {
    float *tiles, *panel, *apanel;
} Scratch;

/* dst[p * NR + q] = src[q * ld + p] for p < kc, q < nr, in 4 x 4 blocks: four rows' runs
 * of k read as vectors, transposed in registers (GCC's SLP vectoriser makes the shuffles),
 * written as four rows of the panel. */
static void pack_transposed(const float *src, int64_t ld, int64_t kc, int64_t nr, int64_t NR,
                            float *dst)
{
    int64_t q = 0;
    for (; q + 4 <= nr; q += 4) {
        const float *s = src + q * ld;
        int64_t p = 0;
        for (; p + 4 <= kc; p += 4) {
            float x[4][4];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++)
                    x[r][c] = s[r * ld + p + c];
            for (int c = 0; c < 4; c++)
                for (int r = 0; r < 4; r++)
                    dst[(p + c) * NR + q + r] = x[r][c];
        }
        for (; p < kc; p++)
            for (int r = 0; r < 4; r++)
                dst[p * NR + q + r] = s[r * ld + p];
    }
    for (; q < nr; q++)
        for (int64_t p = 0; p < kc; p++)
            dst[p * NR + q] = src[q * ld + p];
}

/* B's panel at `from` (k0, n0 applied): kc rows of nr columns, element (p, q) at
 * from[p * b.rs + q * b.cs], into rows of NR floats. */
static void pack_panel(const Job *j, const float *from, int64_t kc, int64_t nr, float *dst)
{
    int64_t rs = j->b.rs, cs = j->b.cs, NR = j->nr;
    if (j->pack == PACK_TRANSPOSED)
        pack_transposed(from, cs, kc, nr, NR, dst);
    else
        for (int64_t p = 0; p < kc; p++)
            memcpy(dst + p * NR, from + p * rs, (size_t)nr * sizeof *dst);
}

/* The macro block's row tiles, k in [k0, k0 + kc), into s->apanel: tile r at
 * r * mr * kc, element (i, p) at p * mr + i. A whose k runs far apart (the transposed
 * operand of a weight gradient, g^T x) would otherwise put every k of a row tile in one
 * L1 set and a page of its own, once per column tile. */
static void pack_a_tiles(const Job *j, const RowTile *rt, int64_t nrows, int64_t k0, int64_t kc,
                         Scratch *s)
{
    int64_t mr = j->mr, rs = j->a.rs, cs = j->a.cs;
    for (int64_t r = 0; r < nrows; r++) {
        float *dst = s->apanel + r * mr * kc;
        const float *src = rt[r].a + k0 * cs;
        for (int64_t p = 0; p < kc; p++)
            for (int64_t i = 0; i < mr; i++)
                dst[p * mr + i] = i < rt[r].mr ? src[p * cs + i * rs] : 0;
    }
}

/* ---------------------------------------------------------------- B packed once */

/* B's distinct batches: all of them where B differs between batches, else one. */
static int64_t b_batches(const Job *j) { return j->b_batched ? j->rtiles / j->mtiles : 1; }

/* Batch t's edge columns as B^T's rows (edge_cols x K). A convolution's are packed as a
 * panel first, then transposed. */
static void edge_chunk(void *ctx, int64_t begin, int64_t end)
{
    Job *j = ctx;
    int64_t cols = j->edge_cols, K = j->K, n0 = (j->ntiles - 1) * j->nr;
    float *panel = j->conv ? malloc((size_t)(K * cols) * sizeof *panel) : NULL;
    if (j->conv && !panel) {
        atomic_store(&j->failed, true);
        return;
    }
    for (int64_t t = begin; t < end; t++) {
        const float *b = j->b.base + mat_batch_offset(&j->b, j, t);
        float *dst = j->edge + t * cols * K;
        if (j->conv)
            conv_pack_panel(j->conv, b, 0, K, n0, cols, cols, panel);
        for (int64_t q = 0; q < cols; q++)
            for (int64_t k = 0; k < K; k++)
                dst[q * K + k] = panel ? panel[k * cols + q] : b[k * j->b.rs + (n0 + q) * j->b.cs];
    }
    free(panel);
}

/* The broadcast form's last column tile, where it has no more columns than the dot
 * kernel's tile and A's rows run along k, goes to the dot kernel (Job.edge): the
 * broadcast kernel would spend a whole tile's FMAs on it (ResNet's 7x7 maps: 49 columns
 * are 3 x 16 + 1). Its columns are copied as B^T's rows first, every batch's, the threads
 * sharing them. */
static void prepare_edge(Job *j, Pool *pool)
{
    int64_t cols = j->N - (j->ntiles - 1) * j->nr, nbt = b_batches(j), floats;
    if (j->dot || j->K < 1 || cols > j->uk->shape.dot_nr || cols == j->nr || j->a.cs != 1 ||
        __builtin_mul_overflow(nbt * cols, j->K, &floats) ||
        floats > EDGE_MAX_BYTES / (int64_t)sizeof(float))
        return;
    j->edge = malloc((size_t)floats * sizeof(float));
    if (!j->edge)
        return;
    j->edge_cols = cols;
    pool_parallel_for(pool, nbt, 1, edge_chunk, j);
}

/* Panel (batch t, block of k kb, column tile c) of the prepacked B: kc rows of NR floats
 * (the last block's rows fewer, the last tile's columns past N unwritten and unread). */
static float *prepacked_panel(const Job *j, int64_t t, int64_t kb, int64_t c)
{
    int64_t bt = j->b_batched ? t : 0;
    return j->panels + ((bt * j->nkb + kb) * j->ntiles + c) * j->kc * j->nr;
}

static void prepack_chunk(void *ctx, int64_t begin, int64_t end)
{
    const Job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        int64_t c = i % j->ntiles, kb = i / j->ntiles % j->nkb, t = i / j->ntiles / j->nkb;
        int64_t k0 = kb * j->kc, n0 = c * j->nr;
        int64_t kc = j->K - k0 < j->kc ? j->K - k0 : j->kc, nr = j->N - n0 < j->nr ? j->N - n0 : j->nr;
        const float *b = j->b.base + mat_batch_offset(&j->b, j, t);
        if (j->pack == PACK_IM2COL)
            conv_pack_panel(j->conv, b, k0, kc, n0, nr, j->nr, prepacked_panel(j, t, kb, c));
        else
            pack_panel(j, b + k0 * j->b.rs + n0 * j->b.cs, kc, nr, prepacked_panel(j, t, kb, c));
    }
}

/* Packing B's panels per macro block packs each again for every block of rows (and every
 * thread): when the rows take more than one macro block, or threads split them, B is
 * packed once instead, the panels shared by all. A B too large for PREPACK_MAX_BYTES, or
 * memory refused, keeps the packing per macro block. */
static void prepack(Job *j, Pool *pool)
{
    if (j->pack == PACK_NONE)
        return;
    bool threads_share_rows = j->split_rows && pool_threads(pool) > 1 && j->mtiles > 1;
    if (j->mtiles <= j->mc && !threads_share_rows)
        return;
    int64_t nbt = b_batches(j);
    int64_t floats;
    if (__builtin_mul_overflow(nbt * j->nkb * j->ntiles, j->kc * j->nr, &floats) ||
        floats > PREPACK_MAX_BYTES / (int64_t)sizeof(float))
        return;
    j->panels = aligned_alloc(64, ((size_t)floats * sizeof(float) + 63) / 64 * 64);
    if (j->panels)
        pool_parallel_for(pool, nbt * j->nkb * j->ntiles, 1, prepack_chunk, j);
}

/* Where the broadcast kernel reads column tile c's panel (k in [k0, k0 + kc)) for the
 * rows of rt's batch: packed once for the whole GEMM, in place, or packed now into the
 * thread's panel slot `slot`. */
typedef struct Panel {
    const float *b;
    int64_t ldb;
} Panel;

static Panel bcast_panel(const Job *j, const RowTile *rt, int64_t c, int64_t k0, int64_t kc,
                         Scratch *s, int64_t slot)
{
    int64_t n0 = c * j->nr, nr = j->N - n0 < j->nr ? j->N - n0 : j->nr;
    if (j->panels)
        return (Panel){prepacked_panel(j, rt->row0 / j->M, k0 / j->kc, c), j->nr};
    if (j->pack == PACK_NONE)
        return (Panel){rt->b + k0 * j->b.rs + n0 * j->b.cs, j->b.rs};
    float *dst = s->panel + slot * j->kc * j->nr;
    if (j->pack == PACK_IM2COL)
        conv_pack_panel(j->conv, rt->b, k0, kc, n0, nr, j->nr, dst);
    else
        pack_panel(j, rt->b + k0 * j->b.rs + n0 * j->b.cs, kc, nr, dst);
    return (Panel){dst, j->nr};
}

/* Whether column tile c is the edge the dot kernel computes (Job.edge). */
static bool is_edge(const Job *j, int64_t c) { return j->edge && c == j->ntiles - 1; }

/* The edge tile of row tile rt, k in [k0, k0 + kc) (a at k0): the dot kernel over the
 * edge's B^T rows, dot_mr rows of A at a time, into t as rows of dot_nr floats. */
static void edge_kernel(const Job *j, const RowTile *rt, const float *a, int64_t k0, int64_t kc,
                        float *t)
{
    int64_t dmr = j->uk->shape.dot_mr, dnr = j->uk->shape.dot_nr;
    const float *b = j->edge + (j->b_batched ? rt->row0 / j->M : 0) * j->edge_cols * j->K + k0;
    for (int64_t i = 0; i < rt->mr; i += dmr)
        j->uk->dot(kc, a + i * j->a.rs, j->a.rs, rt->mr - i < dmr ? rt->mr - i : dmr, b, j->K,
                   j->edge_cols, t + i * dnr, k0 > 0);
}

/* One micro-kernel call: row tile rt (r of the macro block), columns [n0, n0 + nr) (the
 * broadcast form's panel p), k in [k0, k0 + kc). */
static void ukernel(const Job *j, const RowTile *rt, int64_t r, Panel p, int64_t n0, int64_t nr,
                    int64_t k0, int64_t kc, Scratch *s, float *t)
{
    const float *a = rt->a + k0 * j->a.cs;
    if (is_edge(j, n0 / j->nr)) {
        edge_kernel(j, rt, a, k0, kc, t);
        return;
    }
    if (j->dot)
        j->uk->dot(kc, a, j->a.rs, rt->mr, rt->b + k0 * j->b.rs + n0 * j->b.cs, j->b.cs, nr, t,
                   k0 > 0);
    else if (j->pack_a)
        j->uk->bcast(kc, s->apanel + r * j->mr * kc, 1, j->mr, rt->mr, p.b, p.ldb, nr, t, k0 > 0);
    else
        j->uk->bcast(kc, a, j->a.rs, j->a.cs, rt->mr, p.b, p.ldb, nr, t, k0 > 0);
}

/* A hint to fetch p's line into L2. GCC deletes a loop of __builtin_prefetch alone (it
 * counts the builtin as free of side effects), so x86 gets the instruction itself. */
static inline void prefetch_l2(uintptr_t p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht1 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch((const void *)p, 0, 2);
#endif
}

/* Part `part` of `parts` of B^T's panel at b (k0, n0 applied: nr rows of kc floats, ld
 * apart) fetched towards L2. The dot form reads a weight's rows where they lie, each
 * often a page of its own that the hardware prefetchers do not follow across, so the
 * first row tile to meet a panel would wait for memory; fetching the next panel a share
 * per micro-kernel call hides that behind the current one. */
static void prefetch_panel(const float *b, int64_t ld, int64_t nr, int64_t kc, int64_t part,
                           int64_t parts)
{
    int64_t per_row = (kc + 15) / 16 + 1, lines = nr * per_row;
    int64_t l0 = lines * part / parts, l1 = lines * (part + 1) / parts;
    int64_t row = l0 / per_row, line = l0 % per_row;
    for (int64_t l = l0; l < l1; l++) {
        const float *start = b + row * ld;
        uintptr_t p = ((uintptr_t)start & ~(uintptr_t)63) + (uintptr_t)line * 64;
        if (p < (uintptr_t)(start + kc))
            prefetch_l2(p);
        if (++line == per_row)
            row++, line = 0;
    }
}

/* A finished tile into C itself, in C's dtype (GemmTiling.store_only: the epilogue runs
 * after the product, as its own kernel). */
static void store_tile(const Job *j, const float *t, int64_t ldt, int64_t row0, int64_t n0,
                       int64_t mr, int64_t nr)
{
    for (int64_t i = 0; i < mr; i++) {
        int64_t r = row0 + i;
        int64_t at = mat_batch_offset(&j->c, j, r / j->M) + r % j->M * j->c.rs + n0 * j->c.cs;
        for (int64_t q = 0; q < nr; q++) {
            if (j->cdt == DT_F32)
                ((float *)j->c.base)[at + q * j->c.cs] = t[i * ldt + q];
            else
                dtype_store(j->cdt, (void *)j->c.base, at + q * j->c.cs, t[i * ldt + q]);
        }
    }
}

/* A finished tile to the step's TileFn, or stored as it is (an edge tile's rows are
 * dot_nr floats apart). */
static void finish_tile(const Job *j, const float *t, const RowTile *rt, int64_t c, int64_t nr)
{
    int64_t ldt = is_edge(j, c) ? j->uk->shape.dot_nr : j->nr, n0 = c * j->nr;
    if (j->how.store_only)
        store_tile(j, t, ldt, rt->row0, n0, rt->mr, nr);
    else
        j->tile(t, ldt, j->bufs, j->syms, rt->row0, n0, rt->mr, nr);
}

/* A macro block row by row (Job.walk_rows: K in one block): the block's panels first, then
 * each row tile along the columns, so the tiles reach C (and the epilogue its operands)
 * as a few streams along rows instead of a new line of every row at each column. */
static void walk_rows(const Job *j, const RowTile *rt, int64_t nrows, int64_t c0, int64_t c1,
                      Scratch *s)
{
    Panel p[NC_TILES];
    if (j->pack_a)
        pack_a_tiles(j, rt, nrows, 0, j->K, s);
    for (int64_t c = c0; c < c1; c++)
        p[c - c0] = is_edge(j, c) ? (Panel){0} : bcast_panel(j, &rt[0], c, 0, j->K, s, c - c0);
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t c = c0; c < c1; c++) {
            int64_t n0 = c * j->nr, nr = j->N - n0 < j->nr ? j->N - n0 : j->nr;
            ukernel(j, &rt[r], r, p[c - c0], n0, nr, 0, j->K, s, s->tiles);
            finish_tile(j, s->tiles, &rt[r], c, nr);
        }
}

/* A macro block: row tiles [r0, r1) x column tiles [c0, c1). For each block of k the
 * columns go outside (their B panel stays in cache across the rows, and the dot form's
 * next panel is fetched meanwhile); a tile is finished right after its last block of k. */
static void macro_block(const Job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1, Scratch *s)
{
    RowTile rt[MC_TILES_MAX];
    for (int64_t r = r0; r < r1; r++)
        rt[r - r0] = row_tile(j, r);
    int64_t tsize = j->mr * j->nr, nrows = r1 - r0;
    if (j->walk_rows) {
        walk_rows(j, rt, nrows, c0, c1, s);
        return;
    }
    bool blocked = j->K > j->kc; /* then each tile keeps its own slot across blocks */
    for (int64_t k0 = 0; k0 < j->K || k0 == 0; k0 += j->kc) {
        int64_t kc = j->K - k0 < j->kc ? j->K - k0 : j->kc;
        bool last = k0 + kc >= j->K;
        if (j->pack_a)
            pack_a_tiles(j, rt, nrows, k0, kc, s);
        for (int64_t c = c0; c < c1; c++) {
            int64_t n0 = c * j->nr, nr = j->N - n0 < j->nr ? j->N - n0 : j->nr;
            int64_t n1 = n0 + j->nr, nr1 = j->N - n1 < j->nr ? j->N - n1 : j->nr;
            const float *next = j->dot && c + 1 < c1 ? rt[0].b + k0 * j->b.rs + n1 * j->b.cs : NULL;
            Panel p = j->dot || is_edge(j, c) ? (Panel){0} : bcast_panel(j, &rt[0], c, k0, kc, s, 0);
            for (int64_t r = 0; r < nrows; r++) {
                float *t = blocked ? s->tiles + ((c - c0) * nrows + r) * tsize : s->tiles;
                if (next)
                    prefetch_panel(next, j->b.cs, nr1, kc, r, nrows);
                ukernel(j, &rt[r], r, p, n0, nr, k0, kc, s, t);
                if (last)
                    finish_tile(j, t, &rt[r], c, nr);
            }
        }
    }
}

/* Floats of scratch a thread needs: tile slots, the panel, A's tiles (each 64-byte
 * aligned). */
static size_t scratch_floats(const Job *j, size_t *panel_at, size_t *apanel_at)
{
    size_t tiles = (size_t)(j->mr * j->nr) * (j->K > j->kc ? (size_t)(j->mc * j->nc) : 1);
    *panel_at = (tiles + 15) / 16 * 16;
    size_t panels = j->pack != PACK_NONE && !j->panels ? (j->walk_rows ? (size_t)j->nc : 1) : 0;
    *apanel_at = *panel_at + (panels * (size_t)(j->kc * j->nr) + 15) / 16 * 16;
    return *apanel_at + (j->pack_a ? (size_t)(j->mc * j->mr * j->kc) : 0);
}

/* Row tiles [r0, r1) x column tiles [c0, c1) in macro blocks, which never straddle two
 * batches (a packed panel then serves every row of its block). */
static void run_range(Job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    size_t panel_at, apanel_at, n = scratch_floats(j, &panel_at, &apanel_at);
    float *mem = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!mem) {
        atomic_store(&j->failed, true);
        return;
    }
    Scratch s = {mem, mem + panel_at, mem + apanel_at};
    for (int64_t rb = r0; rb < r1;) {
        int64_t re = rb + j->mc, batch_end = (rb / j->mtiles + 1) * j->mtiles;
        re = re < r1 ? re : r1;
        re = re < batch_end ? re : batch_end;
        for (int64_t cb = c0; cb < c1; cb += j->nc)
            macro_block(j, rb, re, cb, cb + j->nc < c1 ? cb + j->nc : c1, &s);
        rb = re;
    }
    free(mem);
}

static void run_chunk(void *ctx, int64_t begin, int64_t end)
{
    Job *j = ctx;
    if (j->split_rows)
        run_range(j, begin, end, 0, j->ntiles);
    else
        run_range(j, 0, j->rtiles, begin, end);
}

/* ---------------------------------------------------------------- planning */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The kernel and packing: the dot kernel for the dot layout where K exceeds the target's
 * dot_min_k (below it the dot tile's reduction costs as much as its FMAs) or A has too few
 * rows to repay a transposition, else B^T's panels transposed for the broadcast kernel;
 * the broadcast layout packs rows far apart. */
static void plan_form(Job *j)
{
    if (j->conv) { /* im2col panels for the broadcast kernel: B is not in memory */
        j->dot = false, j->pack = PACK_IM2COL;
        j->pack_a = llabs(j->a.cs) >= PACK_ROW_STRIDE && j->K > 1;
        return;
    }
    bool dot = pick_form(&j->a, &j->b, j->N, j->K) == FORM_DOT;
    bool few_rows = j->M < TRANSPOSE_MIN_M;
    j->dot = dot && (j->K > j->uk->shape.dot_min_k || few_rows); /* else B^T's panels transposed */
    if (dot && j->how.form != GEMM_FORM_AUTO)
        j->dot = j->how.form == GEMM_FORM_DOT;
    if (dot && !j->dot)
        j->pack = PACK_TRANSPOSED;
    else if (!dot && (llabs(j->b.rs) >= PACK_ROW_STRIDE || j->M >= PACK_ROWS_MIN_M) && j->K > 1)
        j->pack = PACK_ROWS;
    else
        j->pack = PACK_NONE;
    j->pack_a = !j->dot && llabs(j->a.cs) >= PACK_ROW_STRIDE && j->K > 1;
}

/* Blocks of k: the whole of K when it fits, else equal blocks (whole vectors, so only the
 * last has a tail). Macro blocks: as many row tiles as keep their A rows in L2 (evened
 * out over a batch's row tiles), and when k is blocked as many column tiles as the tile
 * slots allow. */
static void plan_blocks(Job *j)
{
    int64_t vec = j->uk->shape.vec, nk = ceil_div(j->K, KC_MAX);
    j->kc = nk <= 1 ? (j->K > 0 ? j->K : 1) : ceil_div(ceil_div(j->K, nk), vec) * vec;
    if (j->how.kc > 0 && j->how.kc < j->K)
        j->kc = ceil_div(j->how.kc, vec) * vec;
    j->nkb = j->K > 0 ? ceil_div(j->K, j->kc) : 1;
    int64_t mc = j->dot ? DOT_MC_ROWS / j->mr : BCAST_A_BYTES / (j->mr * j->kc * 4);
    mc = j->how.mc > 0 ? j->how.mc : mc;
    mc = mc < 1 ? 1 : mc > MC_TILES_MAX ? MC_TILES_MAX : mc;
    j->mc = j->mtiles > 0 ? ceil_div(j->mtiles, ceil_div(j->mtiles, mc)) : 1;
    j->nc = NC_TILES;
    j->walk_rows = !j->dot && j->K <= j->kc && j->K <= WALK_MAX_K;
    if (j->walk_rows) {
        int64_t fit = WALK_PANEL_BYTES / (j->kc * j->nr * 4);
        j->nc = fit < 1 ? 1 : fit < NC_TILES ? fit : NC_TILES;
    } else if (j->K > j->kc) {
        int64_t slots = SLOT_BYTES / (j->mr * j->nr * 4) / j->mc;
        j->nc = slots < 1 ? 1 : slots < NC_TILES ? slots : NC_TILES;
    }
}

static void plan(Job *j, const Gemm *g, void *const *bufs, const SymBind *sb)
{
    int64_t nb, s[3];
    sizes(g, sb, j->batch, &nb, s);
    j->nbatch = g->nbatch;
    j->conv = g->conv;
    j->M = s[0], j->N = s[1], j->K = s[2];
    j->a = mat_make(&g->a, g->nbatch, bufs, sb);
    j->b = mat_make(&g->b, g->nbatch, bufs, sb);
    for (int d = 0; d < j->nbatch; d++)
        j->b_batched |= j->b.bs[d] != 0 && j->batch[d] > 1;
    plan_form(j);
    const UkernelShape *sh = &j->uk->shape;
    j->mr = j->dot ? sh->dot_mr : sh->bc_mr;
    j->nr = j->dot ? sh->dot_nr : sh->bc_nr;
    j->mtiles = ceil_div(j->M, j->mr);
    j->ntiles = ceil_div(j->N, j->nr);
    j->rtiles = nb * j->mtiles;
    j->split_rows = j->how.split == GEMM_SPLIT_AUTO ? j->rtiles >= j->ntiles
                                                    : j->how.split == GEMM_SPLIT_ROWS;
    plan_blocks(j);
}

bool gemm_tiled_dot_layout(const Gemm *g, void *const *bufs, const SymBind *sb)
{
    if (g->conv)
        return false;
    Mat a = mat_make(&g->a, g->nbatch, bufs, sb), b = mat_make(&g->b, g->nbatch, bufs, sb);
    return pick_form(&a, &b, dim_value(g->n, sb), dim_value(g->k, sb)) == FORM_DOT;
}

GemmTiling gemm_tiled_default(const Gemm *g, void *const *bufs, const SymBind *sb,
                              const Ukernels *uk)
{
    Job j = {.uk = uk};
    plan(&j, g, bufs, sb);
    return (GemmTiling){j.dot ? GEMM_FORM_DOT : GEMM_FORM_BCAST, j.kc, j.mc,
                        j.split_rows ? GEMM_SPLIT_ROWS : GEMM_SPLIT_COLS, false};
}

bool gemm_tiled_run(const Gemm *g, void *const *bufs, const DType *dts, const SymBind *sb,
                    const Ukernels *uk, TileFn tile, const GemmTiling *how, Pool *pool,
                    Err *e)
{
    const char *why = unsupported(g, bufs, dts, sb);
    if (why) {
        err_set(e, ERR_USAGE, "gemm_tiled: unsupported GEMM: %s (use gemm_run)", why);
        return false;
    }
    Job j = {.uk = uk, .tile = tile, .bufs = bufs, .syms = sb->val, .cdt = dts[g->c.buf]};
    if (how)
        j.how = *how;
    plan(&j, g, bufs, sb);
    j.c = mat_make(&g->c, g->nbatch, bufs, sb);
    if (j.rtiles == 0 || j.ntiles == 0)
        return true;
    prepack(&j, pool);
    prepare_edge(&j, pool);
    if (!atomic_load(&j.failed))
        pool_parallel_for(pool, j.split_rows ? j.rtiles : j.ntiles, 1, run_chunk, &j);
    free(j.panels);
    free(j.edge);
    if (atomic_load(&j.failed)) {
        err_set(e, ERR_MEMORY, "gemm_tiled: out of memory for a thread's tiles or panels");
        return false;
    }
    return true;
}
