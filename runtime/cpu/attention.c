/* attention.c — attention steps on the CPU, FlashAttention's forward: a task is one batch
 * element's tile of queries, walked against blocks of keys with an online softmax.
 *
 * Everything runs transposed, so the softmax's statistics are vectors along the queries:
 * a block's scores are S^T = K Q^T (keys down, queries across), made by the broadcast
 * micro-kernel with K's rows as A and the scaled Q^T as B. Per query the block's maximum
 * updates the running one, the running sum and the output are rescaled by exp(old - new),
 * and P^T = exp(S^T - max) feeds O += P V on the same micro-kernel (P read through A's
 * strides, V's rows as B). Causal blocks past a tile's last query are never computed, the
 * diagonal ones are masked. K and V are read where they are when their rows are dense
 * f32; else each thread packs them so (whole heads when they fit its cache, else block by
 * block), so any strides and f16/bf16 operands take the same path.
 * An additive bias (a view, any strides, broadcast dims at stride 0) joins each block's
 * scaled scores before the mask and the softmax.
 * The only per-task memory is a few blocks: no Tq x Tk buffer. An ATTN_LSE step (training
 * saves it for the backward, attention_backward.c) runs the same with no values: each
 * query's m + log(l) instead of an output. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/attention_blocks.h"

/* A task's queries: the least multiple of both sides of the micro-kernel's tile at or
 * above this (96 with the AVX-512 tile, 12 x 32), so row and column tiles divide it. */
#define QUERIES_MIN 96
/* Keys per block: the least multiple of the tile's rows at or above this. A block of
 * scores and one of probabilities, 96 x 96 floats each, stay in L2 with the queries. */
#define KEYS_MIN 96
/* A head's K and V packed once per thread when they fit this (a causal task after the
 * first needs only keys already packed); larger ones are packed block by block. */
#define HEAD_CACHE_BYTES (4 << 20)

typedef struct Job {
    const Ukernels *uk;
    int nbatch;
    int64_t batch[COIL_MAX_RANK];
    int64_t tq, tk, d, dv;
    View q, k, v, o, bias, lse_out;
    bool causal, has_bias;
    bool lse;               /* ATTN_LSE: o gets each query's log-sum-exp (dv is 0) */
    bool writes_lse;        /* a forward that also writes them, into lse_out */
    float scale;
    int64_t mr, nr;         /* the micro-kernel's tile */
    int64_t br, bc;         /* queries per task, keys per block */
    int64_t nct;            /* column tiles of the output (dv / nr, rounded up) */
    int64_t tiles, tasks;   /* query tiles per batch element; tasks in all */
    bool pack_k, pack_v;    /* K's, V's rows copied as dense f32 (else read where they are) */
    bool cache_heads;       /* pack a head's keys whole, else block by block */
    _Atomic int64_t next;   /* the next task to take */
} Job;

/* A thread's memory, reused by every task it takes. */
typedef struct Scratch {
    float *qt;    /* d x br: the task's queries transposed, times the scale */
    float *s;     /* br / nr strips of bc x nr: a block's scores, micro-kernel tiles */
    float *p;     /* bc x br: its probabilities, key-major (A of the second product) */
    float *acc;   /* br / mr row tiles x nct column tiles of mr x nr: the output's sums */
    float *m, *l, *corr; /* per query: the running max and sum, this block's factor */
    float *row;   /* four rows of Q, widened */
    float *kp, *vp; /* K's and V's rows packed as f32 (a head's, or a block's) */
    int64_t head, packed; /* with cache_heads: whose keys kp and vp hold, and how many */
} Scratch;

/* ---------------------------------------------------------------- the portable tile */

/* The broadcast micro-kernel's contract (codegen/cpu/cpu.h) in C, for engines without
 * generated code: t[i * NR + j] (+)= sum_p a[min(i, mr - 1) * lda_r + p * lda_c] *
 * b[p * ldb + j], i < MR, j < nr. */
#define PORTABLE_MR 8
#define PORTABLE_NR 16

VECTOR_CLONES CONTRACT static void bcast_portable(int64_t kc, const float *a, int64_t lda_r,
                                                  int64_t lda_c, int64_t mr, const float *b,
                                                  int64_t ldb, int64_t nr, float *t,
                                                  int64_t accumulate)
{
    float acc[PORTABLE_MR * PORTABLE_NR], bp[PORTABLE_NR] = {0};
    const float *arow[PORTABLE_MR];
    for (int x = 0; x < PORTABLE_MR * PORTABLE_NR; x++)
        acc[x] = accumulate ? t[x] : 0;
    for (int i = 0; i < PORTABLE_MR; i++)
        arow[i] = a + (i < mr ? i : mr - 1) * lda_r;
    for (int64_t p = 0; p < kc; p++) {
        for (int j = 0; j < nr && j < PORTABLE_NR; j++)
            bp[j] = b[p * ldb + j];
        for (int i = 0; i < PORTABLE_MR; i++) {
            float av = arow[i][p * lda_c];
            for (int j = 0; j < PORTABLE_NR; j++)
                acc[i * PORTABLE_NR + j] += av * bp[j];
        }
    }
    memcpy(t, acc, sizeof acc);
}

const Ukernels attention_portable = {
    .shape = {.vec = 16, .bc_mr = PORTABLE_MR, .bc_nr = PORTABLE_NR}, .bcast = bcast_portable};

/* ---------------------------------------------------------------- operands */

/* x's element offset at flat batch index t (batch dims row-major). */
static int64_t batch_offset(const View *x, const Job *j, int64_t t)
{
    return view_batch_offset(x, j->nbatch, j->batch, t);
}

/* Rows of f32 with unit column stride: row r at first + r * ld. */
typedef struct Rows {
    const float *first;
    int64_t ld;
} Rows;

/* Keys [k0, k0 + nk) of batch element bh: K's and V's rows where they are when dense f32,
 * else packed (with cache_heads, only the keys no earlier task of this head packed). */
static void keys_at(const Job *j, Scratch *sc, int64_t bh, int64_t k0, int64_t nk, Rows *keys,
                    Rows *vals)
{
    int64_t ka = batch_offset(&j->k, j, bh), va = batch_offset(&j->v, j, bh), from = k0, base = k0;
    if (j->cache_heads) {
        if (sc->head != bh)
            sc->head = bh, sc->packed = 0;
        from = sc->packed, base = 0;
        sc->packed = from > k0 + nk ? from : k0 + nk;
    }
    for (int64_t r = from; r < k0 + nk; r++) {
        if (j->pack_k)
            load_row(&j->k, ka, r, j->d, sc->kp + (r - base) * j->d);
        if (j->pack_v)
            load_row(&j->v, va, r, j->dv, sc->vp + (r - base) * j->dv);
    }
    *keys = j->pack_k ? (Rows){sc->kp + (k0 - base) * j->d, j->d}
                      : (Rows){(const float *)j->k.base + ka + k0 * j->k.rs, j->k.rs};
    *vals = j->pack_v ? (Rows){sc->vp + (k0 - base) * j->dv, j->dv}
                      : (Rows){(const float *)j->v.base + va + k0 * j->v.rs, j->v.rs};
}

/* Queries [q0, q0 + nq) of batch element bh into qt[c * br + i], times the scale, four
 * rows at a time (each run of four queries is stored as one vector). Columns past nq are
 * left: the micro-kernel reads B only up to the strip's nr. */
VECTOR_CLONES static void pack_queries(const Job *j, Scratch *sc, int64_t bh, int64_t q0,
                                       int64_t nq)
{
    int64_t at = batch_offset(&j->q, j, bh), d = j->d, br = j->br, i = 0;
    float *rows = sc->row, scale = j->scale;
    for (; i + 4 <= nq; i += 4) {
        for (int r = 0; r < 4; r++)
            load_row(&j->q, at, q0 + i + r, d, rows + r * d);
        for (int64_t c = 0; c < d; c++)
            for (int r = 0; r < 4; r++)
                sc->qt[c * br + i + r] = rows[r * d + c] * scale;
    }
    for (; i < nq; i++) {
        load_row(&j->q, at, q0 + i, d, rows);
        for (int64_t c = 0; c < d; c++)
            sc->qt[c * br + i] = rows[c] * scale;
    }
}

/* ---------------------------------------------------------------- one block */

/* S^T for keys [k0, k0 + nk) against the task's queries [q0, q0 + nq): strip c (queries
 * c * nr ...) holds bc rows of nr, tile by tile as the micro-kernel writes them. Causal:
 * tiles of keys past the strip's last query are left (the mask hides them whole). */
static void block_scores(const Job *j, Scratch *sc, Rows keys, int64_t q0, int64_t nq,
                         int64_t k0, int64_t nk)
{
    int64_t MR = j->mr, NR = j->nr;
    for (int64_t c = 0; c * NR < nq; c++) {
        int64_t nr = nq - c * NR < NR ? nq - c * NR : NR;
        int64_t visible = j->causal ? q0 + c * NR + nr - k0 : nk; /* keys past: all hidden */
        for (int64_t r0 = 0; r0 < nk && r0 < visible; r0 += MR) {
            float *t = sc->s + (c * j->bc + r0) * NR;
            int64_t mr = nk - r0 < MR ? nk - r0 : MR;
            if (j->d == 0)
                memset(t, 0, (size_t)(MR * NR) * sizeof *t);
            else
                j->uk->bcast(j->d, keys.first + r0 * keys.ld, keys.ld, 1, mr, sc->qt + c * NR, j->br,
                             nr, t, 0);
        }
    }
}

/* The bias of queries [first, first + nr) and keys [k0, k0 + nk) of batch element bh,
 * added to the strip's scores (row i at i * NR), which are scaled already. */
static void add_bias(const Job *j, float *s, int64_t bh, int64_t first, int64_t nr, int64_t k0,
                     int64_t nk)
{
    const View *b = &j->bias;
    int64_t at = batch_offset(b, j, bh) + first * b->rs + k0 * b->cs;
    for (int64_t i = 0; i < nk; i++)
        for (int64_t q = 0; q < nr; q++)
            s[i * j->nr + q] += load_f32(b, at + q * b->rs + i * b->cs);
}

/* Causal, a block on the diagonal: key k0 + i is hidden from the strip's queries before
 * it (-inf where k0 + i > query); `ahead` is k0 less the strip's first query. */
static void mask_strip(float *s, int64_t NR, int64_t nk, int64_t nr, int64_t ahead)
{
    for (int64_t i = 0; i < nk; i++) {
        int64_t hidden = ahead + i < nr ? ahead + i : nr;
        for (int64_t q = 0; q < hidden; q++)
            s[i * NR + q] = -INFINITY;
    }
}

/* One strip of nr queries (columns of s, row i at i * NR) over the block's nk keys: the
 * block's maximum into the running one (m), the factor the earlier sums take (corr), the
 * probabilities into p (row i at i * ldp) and their sum into the running one (l). A query
 * with no visible key yet keeps -inf as its maximum and weighs nothing. */
VECTOR_CLONES CONTRACT static void strip_softmax(const float *s, int64_t NR, int64_t nk,
                                                 int64_t nr, float *m, float *l, float *corr,
                                                 float *p, int64_t ldp)
{
    for (int64_t q = 0; q < nr; q++) {
        float most = m[q], total = 0;
        for (int64_t i = 0; i < nk; i++)
            most = s[i * NR + q] > most ? s[i * NR + q] : most;
        float shift = most == -INFINITY ? 0.0f : most;
        corr[q] = exp_nonpositive(m[q] - shift);
        m[q] = most;
        for (int64_t i = 0; i < nk; i++)
            total += p[i * ldp + q] = exp_nonpositive(s[i * NR + q] - shift);
        l[q] = l[q] * corr[q] + total;
    }
}

/* strip_softmax on whole vectors of SOFTMAX_LANES queries, `groups` of them: the maxima
 * and sums in registers, every key row one load. Lanes past the strip's queries compute
 * on whatever the scratch holds there, and nothing reads their results. */
VECTOR_CLONES CONTRACT static void strip_softmax_vec(const float *s, int64_t NR, int64_t nk,
                                                     int64_t groups, float *m, float *l,
                                                     float *corr, float *p, int64_t ldp)
{
    const VecF zero = {0}, none = zero - INFINITY;
    for (int64_t q = 0; q < groups * SOFTMAX_LANES; q += SOFTMAX_LANES) {
        VecF most = VEC_AT(m + q), total = zero;
        for (int64_t i = 0; i < nk; i++) {
            VecF v = VEC_AT(s + i * NR + q);
            most = VEC_SELECT(v > most, v, most);
        }
        VecF shift = VEC_SELECT(most == none, zero, most);
        VecF c = VEC_AT(m + q) - shift;
        vec_exp_nonpositive(&c);
        VEC_AT(corr + q) = c;
        VEC_AT(m + q) = most;
        for (int64_t i = 0; i < nk; i++) {
            VecF e = VEC_AT(s + i * NR + q) - shift;
            vec_exp_nonpositive(&e);
            VEC_AT(p + i * ldp + q) = e;
            total += e;
        }
        VEC_AT(l + q) = VEC_AT(l + q) * c + total;
    }
}

/* The output's rows times their queries' factors, where a factor is not 1. */
VECTOR_CLONES static void rescale(const Job *j, Scratch *sc, int64_t nq)
{
    int64_t MR = j->mr, NR = j->nr;
    for (int64_t q = 0; q < nq; q++) {
        float f = sc->corr[q];
        if (f == 1.0f)
            continue;
        for (int64_t ct = 0; ct < j->nct; ct++) {
            float *row = sc->acc + ((q / MR * j->nct + ct) * MR + q % MR) * NR;
            for (int64_t c = 0; c < NR; c++)
                row[c] *= f;
        }
    }
}

/* O += P V for the block: row tiles of mr queries (P^T read through A's strides) by
 * column tiles of V; causal, each row tile's keys end at its last query. */
static void block_values(const Job *j, Scratch *sc, Rows vals, int64_t q0, int64_t nq,
                         int64_t k0, int64_t nk)
{
    int64_t MR = j->mr, NR = j->nr;
    for (int64_t ct = 0; ct < j->nct; ct++) {
        int64_t nr = j->dv - ct * NR < NR ? j->dv - ct * NR : NR;
        for (int64_t r0 = 0; r0 < nq; r0 += MR) {
            int64_t mr = nq - r0 < MR ? nq - r0 : MR, kc = nk;
            if (j->causal && q0 + r0 + mr - k0 < kc)
                kc = q0 + r0 + mr - k0; /* the keys after: hidden from every row, p = 0 */
            float *t = sc->acc + (r0 / MR * j->nct + ct) * MR * NR;
            if (kc > 0)
                j->uk->bcast(kc, sc->p + r0, 1, j->br, mr, vals.first + ct * NR, vals.ld, nr, t, 1);
        }
    }
}

/* Keys [k0, k0 + nk) against the task's queries [q0, q0 + nq). */
static void block(const Job *j, Scratch *sc, int64_t bh, int64_t q0, int64_t nq, int64_t k0,
                  int64_t nk)
{
    Rows keys, vals;
    keys_at(j, sc, bh, k0, nk, &keys, &vals);
    block_scores(j, sc, keys, q0, nq, k0, nk);
    for (int64_t c = 0; c * j->nr < nq; c++) {
        int64_t first = q0 + c * j->nr, nr = nq - c * j->nr < j->nr ? nq - c * j->nr : j->nr;
        float *s = sc->s + c * j->bc * j->nr;
        if (j->has_bias)
            add_bias(j, s, bh, first, nr, k0, nk);
        if (j->causal && k0 + nk - 1 > first)
            mask_strip(s, j->nr, nk, nr, k0 - first);
        int64_t q = c * j->nr;
        if (j->nr % SOFTMAX_LANES == 0)
            strip_softmax_vec(s, j->nr, nk, (nr + SOFTMAX_LANES - 1) / SOFTMAX_LANES, sc->m + q,
                              sc->l + q, sc->corr + q, sc->p + q, j->br);
        else
            strip_softmax(s, j->nr, nk, nr, sc->m + q, sc->l + q, sc->corr + q, sc->p + q, j->br);
    }
    rescale(j, sc, nq);
    block_values(j, sc, vals, q0, nq, k0, nk);
}

/* ---------------------------------------------------------------- one task */

VECTOR_CLONES static void store_output(const Job *j, Scratch *sc, int64_t bh, int64_t q0, int64_t nq)
{
    int64_t at = batch_offset(&j->o, j, bh), MR = j->mr, NR = j->nr;
    const View *o = &j->o;
    const View *lv = j->lse ? o : j->writes_lse ? &j->lse_out : NULL;
    int64_t lat = lv ? batch_offset(lv, j, bh) : 0;
    for (int64_t q = 0; q < nq; q++) {
        float l = sc->l[q], inv = l != 0.0f ? 1.0f / l : 0.0f; /* no keys at all: zeros */
        if (lv) /* the scores are scaled already; no visible key: -inf */
            dtype_store(lv->dt, (void *)lv->base, lat + (q0 + q) * lv->rs,
                        l != 0.0f ? sc->m[q] + logf(l) : -INFINITY);
        for (int64_t ct = 0; ct < j->nct; ct++) {
            const float *row = sc->acc + ((q / MR * j->nct + ct) * MR + q % MR) * NR;
            int64_t n = j->dv - ct * NR < NR ? j->dv - ct * NR : NR;
            int64_t i0 = at + (q0 + q) * o->rs + ct * NR * o->cs;
            if (o->dt == DT_F32 && o->cs == 1) {
                float *dst = (float *)o->base + i0;
                for (int64_t c = 0; c < n; c++)
                    dst[c] = row[c] * inv;
            } else
                for (int64_t c = 0; c < n; c++)
                    dtype_store(o->dt, (void *)o->base, i0 + c * o->cs, row[c] * inv);
        }
    }
}

/* Task t: batch element t / tiles, its query tiles heaviest first when causal (the last
 * tile sees every key), so the threads' shares even out at the end. */
static void run_task(const Job *j, Scratch *sc, int64_t t)
{
    int64_t bh = t / j->tiles, tile = t % j->tiles;
    if (j->causal)
        tile = j->tiles - 1 - tile;
    int64_t q0 = tile * j->br, nq = j->tq - q0 < j->br ? j->tq - q0 : j->br;
    int64_t kend = j->causal && q0 + nq < j->tk ? q0 + nq : j->tk;
    pack_queries(j, sc, bh, q0, nq);
    for (int64_t q = 0; q < j->br; q++) /* past nq too: the vector softmax reads them */
        sc->m[q] = -INFINITY, sc->l[q] = 0;
    memset(sc->acc, 0, (size_t)(j->br * j->nct * j->nr) * sizeof *sc->acc);
    for (int64_t k0 = 0; k0 < kend; k0 += j->bc)
        block(j, sc, bh, q0, nq, k0, kend - k0 < j->bc ? kend - k0 : j->bc);
    store_output(j, sc, bh, q0, nq);
}

/* ---------------------------------------------------------------- threads */

static size_t aligned16(size_t n) { return (n + 15) / 16 * 16; }

/* One allocation for a thread's scratch, or false. */
static bool scratch_alloc(const Job *j, Scratch *sc)
{
    size_t br = (size_t)j->br, bc = (size_t)j->bc, rows = (size_t)(j->cache_heads ? j->tk : j->bc);
    size_t kp = j->pack_k ? rows * (size_t)j->d : 0, vp = j->pack_v ? rows * (size_t)j->dv : 0;
    size_t len[] = {(size_t)j->d * br, br * bc, bc * br, br * (size_t)(j->nct * j->nr), br, br, br,
                    4 * (size_t)j->d + 1, kp + 1, vp + 1};
    float **at[] = {&sc->qt, &sc->s, &sc->p, &sc->acc, &sc->m, &sc->l, &sc->corr, &sc->row,
                    &sc->kp, &sc->vp};
    size_t total = 0;
    for (size_t i = 0; i < sizeof len / sizeof *len; i++)
        total += aligned16(len[i]);
    float *mem = aligned_alloc(64, total * sizeof(float));
    if (!mem)
        return false;
    for (size_t i = 0, off = 0; i < sizeof len / sizeof *len; i++) {
        *at[i] = mem + off;
        off += aligned16(len[i]);
    }
    /* the scores past a strip's queries are never written; the vector softmax reads them */
    memset(sc->s, 0, len[1] * sizeof(float));
    sc->head = -1, sc->packed = 0;
    return true;
}

/* A thread: tasks taken one at a time until none is left. One whose scratch cannot be
 * allocated takes none (the others do its share; attention_run reports it when none
 * could). */
static void worker(void *ctx, int64_t begin, int64_t end)
{
    (void)begin, (void)end;
    Job *j = ctx;
    Scratch sc;
    if (!scratch_alloc(j, &sc))
        return;
    for (int64_t t; (t = atomic_fetch_add(&j->next, 1)) < j->tasks;)
        run_task(j, &sc, t);
    free(sc.qt);
}

/* ---------------------------------------------------------------- the step */

View attention_view(const GemmOperand *o, int nbatch, void *const *bufs, const DType *dts,
                    const SymBind *sb)
{
    View v = {.base = bufs[o->buf], .dt = dts[o->buf], .off = dim_value(o->offset, sb),
              .rs = dim_value(o->row_stride, sb), .cs = dim_value(o->col_stride, sb)};
    for (int d = 0; d < nbatch; d++)
        v.bs[d] = dim_value(o->batch_stride[d], sb);
    return v;
}

/* Every index the view can reach, |off| + sum (extent - 1) |stride|, within int64. */
bool attention_view_span_ok(const View *v, int nbatch, const int64_t *batch, int64_t rows,
                            int64_t cols)
{
    int64_t span = v->off < 0 ? -v->off : v->off, term;
    int64_t ext[COIL_MAX_RANK + 2], st[COIL_MAX_RANK + 2];
    for (int d = 0; d < nbatch; d++)
        ext[d] = batch[d], st[d] = v->bs[d];
    ext[nbatch] = rows, st[nbatch] = v->rs;
    ext[nbatch + 1] = cols, st[nbatch + 1] = v->cs;
    for (int d = 0; d < nbatch + 2; d++) {
        if (ext[d] == 0)
            return true; /* nothing is read */
        int64_t s = st[d] == INT64_MIN ? INT64_MAX : st[d] < 0 ? -st[d] : st[d];
        if (ext[d] < 0 || __builtin_mul_overflow(ext[d] - 1, s, &term) ||
            __builtin_add_overflow(span, term, &span))
            return false;
    }
    return true;
}

/* Why the step cannot run (an error in e), after the job's sizes and views are made. */
static bool job_ok(const Job *j, const Attention *a, Err *e)
{
    const View *v[5] = {&j->q, &j->k, &j->v, &j->o, &j->bias};
    const int64_t rows[5] = {j->tq, j->tk, j->tk, j->tq, j->tq};
    const int64_t cols[5] = {j->d, j->d, j->dv, j->dv, j->tk};
    const char *name = "QKVOB";
    if (a->nbatch < 0 || a->nbatch > COIL_MAX_RANK - 2 || j->tq < 0 || j->tk < 0 || j->d < 0 ||
        j->dv < 0) {
        err_set(e, ERR_INPUT, "attention: %d batch dimensions, %lld queries, %lld keys, head "
                "dimensions %lld and %lld: out of range", a->nbatch, (long long)j->tq,
                (long long)j->tk, (long long)j->d, (long long)j->dv);
        return false;
    }
    for (int i = 0; i < (j->has_bias ? 5 : 4); i++) {
        if (!attention_dtype_ok(v[i]->dt)) {
            err_set(e, ERR_INPUT, "attention: %c is %s; the CPU's attention takes f32, f16 or "
                    "bf16 (cast it first)", name[i], dtype_info[v[i]->dt].name);
            return false;
        }
        if (!attention_view_span_ok(v[i], j->nbatch, j->batch, rows[i], cols[i])) {
            err_set(e, ERR_INPUT, "attention: %c's indices reach past int64 at these sizes",
                    name[i]);
            return false;
        }
    }
    if (j->writes_lse && !attention_view_span_ok(&j->lse_out, j->nbatch, j->batch, j->tq, 1)) {
        err_set(e, ERR_INPUT, "attention: the log-sum-exp's indices reach past int64 at these "
                "sizes");
        return false;
    }
    return true;
}

/* Whether x's rows of `cols` are f32 and dense (row r at r * cols, unit columns), so the
 * micro-kernels read them where they are. Rows farther apart are packed: a block's rows a
 * page apart (GPT-2's heads are columns of one [T, 3C] product) would share a few L1 sets. */
static bool dense_f32(const View *x, int64_t cols)
{
    return x->dt == DT_F32 && (x->cs == 1 || cols <= 1) && x->rs == cols;
}

/* The blocking for the micro-kernel's tile: br a multiple of both its sides, bc of its
 * rows; a head's keys cached when they fit. */
static void plan(Job *j)
{
    int64_t mr = j->uk->shape.bc_mr, nr = j->uk->shape.bc_nr, lcm = mr;
    while (lcm % nr)
        lcm += mr;
    j->mr = mr, j->nr = nr;
    j->br = (QUERIES_MIN + lcm - 1) / lcm * lcm;
    j->bc = (KEYS_MIN + mr - 1) / mr * mr;
    j->nct = (j->dv + nr - 1) / nr;
    j->tiles = (j->tq + j->br - 1) / j->br;
    j->pack_k = !dense_f32(&j->k, j->d), j->pack_v = j->dv > 0 && !dense_f32(&j->v, j->dv);
    double head_bytes = (double)j->tk * (double)(j->pack_k * j->d + j->pack_v * j->dv) * sizeof(float);
    j->cache_heads = head_bytes <= HEAD_CACHE_BYTES;
}

bool attention_run(const Attention *a, void *const *bufs, const DType *dts, const SymBind *sb,
                   const Ukernels *uk, Pool *pool, Err *e)
{
    if (a->kind == ATTN_BACKWARD)
        return attention_backward_run(a, bufs, dts, sb, uk && uk->bcast ? uk : &attention_portable,
                                      pool, e);
    Job j = {.uk = uk && uk->bcast ? uk : &attention_portable, .nbatch = a->nbatch,
             .tq = dim_value(a->tq, sb), .tk = dim_value(a->tk, sb), .d = a->d, .dv = a->dv,
             .causal = a->causal, .lse = a->kind == ATTN_LSE, .scale = (float)a->scale,
             .has_bias = a->kind == ATTN_FORWARD && a->has_bias,
             .writes_lse = a->kind == ATTN_FORWARD && a->writes_lse};
    int64_t nbh = 1;
    bool sizes_ok = a->nbatch >= 0 && a->nbatch <= COIL_MAX_RANK - 2;
    for (int d = 0; sizes_ok && d < a->nbatch; d++) {
        j.batch[d] = dim_value(a->batch[d], sb);
        sizes_ok = j.batch[d] >= 0 && !__builtin_mul_overflow(nbh, j.batch[d], &nbh);
    }
    if (sizes_ok) {
        j.q = attention_view(&a->q, a->nbatch, bufs, dts, sb);
        j.k = attention_view(&a->k, a->nbatch, bufs, dts, sb);
        j.v = attention_view(&a->v, a->nbatch, bufs, dts, sb);
        j.o = attention_view(&a->o, a->nbatch, bufs, dts, sb);
        if (j.has_bias)
            j.bias = attention_view(&a->bias, a->nbatch, bufs, dts, sb);
        if (j.writes_lse)
            j.lse_out = attention_view(&a->lse, a->nbatch, bufs, dts, sb);
    } else
        j.tq = -1; /* job_ok reports it */
    if (!job_ok(&j, a, e))
        return false;
    plan(&j);
    if (nbh == 0 || j.tq == 0 || (j.dv == 0 && !j.lse))
        return true;
    if (__builtin_mul_overflow(nbh, j.tiles, &j.tasks)) {
        err_set(e, ERR_INPUT, "attention: %lld batch elements x %lld query tiles overflow",
                (long long)nbh, (long long)j.tiles);
        return false;
    }
    int64_t threads = pool_threads(pool) < j.tasks ? pool_threads(pool) : j.tasks;
    atomic_store(&j.next, 0);
    pool_parallel_for(pool, threads, 1, worker, &j);
    if (atomic_load(&j.next) < j.tasks) {
        err_set(e, ERR_MEMORY, "attention: out of memory for the threads' blocks (%lld keys "
                "of %lld + %lld floats each)", (long long)j.tk, (long long)j.d, (long long)j.dv);
        return false;
    }
    return true;
}
