/* attention_backward.c — attention's backward on the CPU, FlashAttention-2's way: from Q,
 * K, V, the forward's output O, its gradient dO and each query's log-sum-exp (lse), the
 * probabilities are recomputed block by block, P = exp(S - lse), never stored whole:
 *
 *   S = scale Q K^T    dP = dO V^T    dS = P (dP - D),  D_i = rowsum(dO_i O_i)
 *   dV += P^T dO       dK += scale dS^T Q                dQ += scale dS K
 *
 * A task is one batch element (a head): its Q (scaled), dO, K, K^T and V^T are widened to
 * dense f32 once, then for each block of keys every block of queries that sees it (causal:
 * from the diagonal on) adds to the key block's dK and dV (a block of rows each, stored
 * when the key block is done) and to the head's dQ, a [T, D] f32 sum stored at the end.
 * So no two threads write one gradient, and per thread the memory is O(T D) plus two
 * blocks of scores. With fewer heads than threads, a head's key blocks are dealt to several tasks
 * (dK and dV are still each one task's) and their dQ sums added after all tasks. The five
 * products run on the forward's broadcast micro-kernel (attention_blocks.h); the masks,
 * the exponentials and dS are plain loops that vectorise. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/attention_blocks.h"

/* Queries and keys per block: 96 x 96 scores and as many of dS stay in L2. */
#define BLOCK_ROWS 96

typedef struct BackJob {
    const Ukernels *uk;
    int nbatch;
    int64_t batch[COIL_MAX_RANK];
    int64_t t, d, part; /* T queries = keys, head dim D = Dv, elements per gradient in o */
    View q, k, v, o, fo, dout, lse;
    bool causal;
    float scale;
    int64_t splits;   /* tasks per head: its key blocks dealt round-robin */
    float *dq_parts;  /* splits > 1: each task's dQ sums, T x D, summed after the tasks */
    int64_t tasks;
    _Atomic int64_t next;
} BackJob;

/* A thread's memory: a head's operands as dense f32 and a block's products. */
typedef struct BackScratch {
    float *qs, *dout, *k;  /* T x D rows: Q times the scale, dO, K */
    float *kt, *vt;        /* D x T: K^T and V^T, B operands of S and dP */
    float *dq;             /* T x D: the head's dQ / scale */
    float *lse, *di;       /* per query: the log-sum-exp, rowsum(dO O) */
    float *s, *dp;         /* BLOCK_ROWS x BLOCK_ROWS: P, then dS; dP */
    float *dk, *dv;        /* BLOCK_ROWS x D: the key block's sums */
    float *tile;           /* the micro-kernel's MR x NR */
    float *row;            /* one widened row of O */
} BackScratch;

/* c[M x N] (+)= a[M x K] b[K x N] on the broadcast micro-kernel: a read through its
 * strides (row i, column p at i * ar + p * ac), b's rows dense at ldb, c's at ldc. */
static void block_product(const Ukernels *uk, int64_t m, int64_t n, int64_t kc, const float *a,
                          int64_t ar, int64_t ac, const float *b, int64_t ldb, float *c,
                          int64_t ldc, bool accumulate, float *tile)
{
    int64_t MR = uk->shape.bc_mr, NR = uk->shape.bc_nr;
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
        int64_t mr = m - i0 < MR ? m - i0 : MR;
        for (int64_t j0 = 0; j0 < n; j0 += NR) {
            int64_t nr = n - j0 < NR ? n - j0 : NR;
            if (kc > 0)
                uk->bcast(kc, a + i0 * ar, ar, ac, mr, b + j0, ldb, nr, tile, 0);
            else
                memset(tile, 0, (size_t)(MR * NR) * sizeof *tile);
            for (int64_t i = 0; i < mr; i++) {
                float *dst = c + (i0 + i) * ldc + j0;
                const float *src = tile + i * NR;
                for (int64_t j = 0; j < nr; j++)
                    dst[j] = accumulate ? dst[j] + src[j] : src[j];
            }
        }
    }
}

/* ---------------------------------------------------------------- one head */

/* The head's operands widened: Q scaled, dO, K and its transpose, V transposed, lse, and
 * D_i = dO_i . O_i. dQ's sums start at zero. */
VECTOR_CLONES CONTRACT static void load_head(const BackJob *j, BackScratch *sc, int64_t bh)
{
    int64_t t = j->t, d = j->d;
    int64_t qa = view_batch_offset(&j->q, j->nbatch, j->batch, bh);
    int64_t ka = view_batch_offset(&j->k, j->nbatch, j->batch, bh);
    int64_t va = view_batch_offset(&j->v, j->nbatch, j->batch, bh);
    int64_t oa = view_batch_offset(&j->fo, j->nbatch, j->batch, bh);
    int64_t ga = view_batch_offset(&j->dout, j->nbatch, j->batch, bh);
    int64_t la = view_batch_offset(&j->lse, j->nbatch, j->batch, bh);
    for (int64_t r = 0; r < t; r++) {
        float *q = sc->qs + r * d, *g = sc->dout + r * d, *k = sc->k + r * d, di = 0;
        load_row(&j->q, qa, r, d, q);
        for (int64_t c = 0; c < d; c++)
            q[c] *= j->scale;
        load_row(&j->dout, ga, r, d, g);
        load_row(&j->fo, oa, r, d, sc->row);
        for (int64_t c = 0; c < d; c++)
            di += g[c] * sc->row[c];
        sc->di[r] = di;
        sc->lse[r] = load_f32(&j->lse, la + r * j->lse.rs);
        load_row(&j->k, ka, r, d, k);
        load_row(&j->v, va, r, d, sc->row);
        for (int64_t c = 0; c < d; c++) {
            sc->kt[c * t + r] = k[c];
            sc->vt[c * t + r] = sc->row[c];
        }
    }
    memset(sc->dq, 0, (size_t)(t * d) * sizeof *sc->dq);
}

/* P = exp(S - lse) in place of S: 0 where causal hides key k0 + x from query q0 + i, or
 * where a query sees no key at all (lse = -inf). */
VECTOR_CLONES CONTRACT static void block_p(const BackJob *j, BackScratch *sc, int64_t q0,
                                           int64_t nq, int64_t k0, int64_t nk)
{
    for (int64_t i = 0; i < nq; i++) {
        float *s = sc->s + i * BLOCK_ROWS, lse = sc->lse[q0 + i];
        int64_t visible = j->causal ? q0 + i - k0 + 1 : nk;
        visible = visible < 0 ? 0 : visible > nk ? nk : visible;
        if (lse == -INFINITY)
            visible = 0;
        int64_t x = 0;
        for (const VecF shift = (VecF){0} + lse; x + SOFTMAX_LANES <= visible; x += SOFTMAX_LANES) {
            VecF e = VEC_AT(s + x) - shift; /* GCC leaves the scalar loop scalar */
            vec_exp_nonpositive(&e);
            VEC_AT(s + x) = e;
        }
        for (; x < visible; x++)
            s[x] = exp_nonpositive(s[x] - lse);
        for (; x < nk; x++)
            s[x] = 0;
    }
}

/* dS = P (dP - D) in place of P. */
VECTOR_CLONES CONTRACT static void block_dsoftmax(BackScratch *sc, int64_t q0, int64_t nq,
                                                  int64_t nk)
{
    for (int64_t i = 0; i < nq; i++) {
        float *s = sc->s + i * BLOCK_ROWS, di = sc->di[q0 + i];
        const float *dp = sc->dp + i * BLOCK_ROWS;
        for (int64_t x = 0; x < nk; x++)
            s[x] = s[x] * (dp[x] - di);
    }
}

/* Keys [k0, k0 + nk) against queries [q0, q0 + nq): S and dP, P, dV's sum (it reads P),
 * dS in place of P, then dK's and dQ's sums. */
static void block_pair(const BackJob *j, BackScratch *sc, int64_t q0, int64_t nq, int64_t k0,
                       int64_t nk)
{
    const Ukernels *uk = j->uk;
    int64_t t = j->t, d = j->d, ld = BLOCK_ROWS;
    block_product(uk, nq, nk, d, sc->qs + q0 * d, d, 1, sc->kt + k0, t, sc->s, ld, false, sc->tile);
    block_product(uk, nq, nk, d, sc->dout + q0 * d, d, 1, sc->vt + k0, t, sc->dp, ld, false,
                  sc->tile);
    block_p(j, sc, q0, nq, k0, nk);
    /* dV += P^T dO: P^T read through A's strides */
    block_product(uk, nk, d, nq, sc->s, 1, ld, sc->dout + q0 * d, d, sc->dv, d, true, sc->tile);
    block_dsoftmax(sc, q0, nq, nk);
    /* dK += dS^T (scale Q); dQ += dS K (scaled once at the end) */
    block_product(uk, nk, d, nq, sc->s, 1, ld, sc->qs + q0 * d, d, sc->dk, d, true, sc->tile);
    block_product(uk, nq, d, nk, sc->s, ld, 1, sc->k + k0 * d, d, sc->dq + q0 * d, d, true,
                  sc->tile);
}

/* Rows [r0, r0 + n) of src (n x D f32, times f) into part `which` of o. */
static void store_rows(const BackJob *j, int64_t bh, int which, int64_t r0, int64_t n,
                       const float *src, float f)
{
    const View *o = &j->o;
    int64_t at = view_batch_offset(o, j->nbatch, j->batch, bh) + which * j->part;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < j->d; c++)
            dtype_store(o->dt, (void *)o->base, at + (r0 + r) * o->rs + c * o->cs,
                        src[r * j->d + c] * f);
}

/* Task `task`: head task / splits, its key blocks part, part + splits, ... (round-robin, so
 * causal blocks, lighter towards the end, even out). */
static void run_task(const BackJob *j, BackScratch *sc, int64_t task)
{
    int64_t t = j->t, d = j->d, bh = task / j->splits, part = task % j->splits;
    load_head(j, sc, bh);
    for (int64_t k0 = part * BLOCK_ROWS; k0 < t; k0 += j->splits * BLOCK_ROWS) {
        int64_t nk = t - k0 < BLOCK_ROWS ? t - k0 : BLOCK_ROWS;
        memset(sc->dk, 0, (size_t)(nk * d) * sizeof *sc->dk);
        memset(sc->dv, 0, (size_t)(nk * d) * sizeof *sc->dv);
        /* causal: query blocks wholly before the key block see none of it */
        int64_t first = j->causal ? k0 / BLOCK_ROWS * BLOCK_ROWS : 0;
        for (int64_t q0 = first; q0 < t; q0 += BLOCK_ROWS)
            block_pair(j, sc, q0, t - q0 < BLOCK_ROWS ? t - q0 : BLOCK_ROWS, k0, nk);
        store_rows(j, bh, 1, k0, nk, sc->dk, 1.0f);
        store_rows(j, bh, 2, k0, nk, sc->dv, 1.0f);
    }
    if (j->splits == 1)
        store_rows(j, bh, 0, 0, t, sc->dq, j->scale);
    else
        memcpy(j->dq_parts + task * t * d, sc->dq, (size_t)(t * d) * sizeof *sc->dq);
}

/* splits > 1: each head's dQ is the sum of its tasks' parts. */
static void store_dq_parts(const BackJob *j, int64_t nbh)
{
    size_t td = (size_t)(j->t * j->d);
    for (int64_t bh = 0; bh < nbh; bh++) {
        float *sum = j->dq_parts + (size_t)(bh * j->splits) * td;
        for (int64_t p = 1; p < j->splits; p++)
            for (size_t x = 0; x < td; x++)
                sum[x] += sum[(size_t)p * td + x];
        store_rows(j, bh, 0, 0, j->t, sum, j->scale);
    }
}

/* ---------------------------------------------------------------- threads */

static bool scratch_alloc(const BackJob *j, BackScratch *sc)
{
    size_t td = (size_t)(j->t * j->d), t = (size_t)j->t, bb = BLOCK_ROWS * BLOCK_ROWS;
    size_t bd = BLOCK_ROWS * (size_t)j->d;
    size_t tile = (size_t)(j->uk->shape.bc_mr * j->uk->shape.bc_nr);
    size_t len[] = {td, td, td, td, td, td, t, t, bb, bb, bd, bd, tile, (size_t)j->d};
    float **at[] = {&sc->qs, &sc->dout, &sc->k, &sc->kt, &sc->vt, &sc->dq, &sc->lse, &sc->di,
                    &sc->s, &sc->dp, &sc->dk, &sc->dv, &sc->tile, &sc->row};
    size_t total = 0;
    for (size_t i = 0; i < sizeof len / sizeof *len; i++)
        total += (len[i] + 16) / 16 * 16;
    float *mem = aligned_alloc(64, total * sizeof(float));
    if (!mem)
        return false;
    for (size_t i = 0, off = 0; i < sizeof len / sizeof *len; i++) {
        *at[i] = mem + off;
        off += (len[i] + 16) / 16 * 16;
    }
    memset(sc->s, 0, bb * sizeof(float)); /* a block's columns past nk are never read */
    memset(sc->dp, 0, bb * sizeof(float));
    return true;
}

/* Heads taken one at a time until none is left; a thread without scratch takes none. */
static void worker(void *ctx, int64_t begin, int64_t end)
{
    (void)begin, (void)end;
    BackJob *j = ctx;
    BackScratch sc;
    if (!scratch_alloc(j, &sc))
        return;
    for (int64_t t; (t = atomic_fetch_add(&j->next, 1)) < j->tasks;)
        run_task(j, &sc, t);
    free(sc.qs);
}

/* ---------------------------------------------------------------- the step */

static bool job_ok(const BackJob *j, const Attention *a, Err *e)
{
    const View *v[7] = {&j->q, &j->k, &j->v, &j->o, &j->fo, &j->dout, &j->lse};
    const int64_t rows[7] = {j->t, j->t, j->t, 3 * j->t, j->t, j->t, j->t};
    const int64_t cols[7] = {j->d, j->d, j->d, j->d, j->d, j->d, 1};
    const char *name[7] = {"Q", "K", "V", "the gradients", "O", "dO", "lse"};
    if (j->t < 0 || j->d < 0 || a->dv != a->d || !dim_eq(a->tq, a->tk)) {
        err_set(e, ERR_INPUT, "attention backward: %lld queries, head dimensions %lld and %lld: "
                "it takes as many keys as queries and D == Dv", (long long)j->t,
                (long long)a->d, (long long)a->dv);
        return false;
    }
    for (int i = 0; i < 7; i++) {
        if (!attention_dtype_ok(v[i]->dt)) {
            err_set(e, ERR_INPUT, "attention backward: %s is %s; the CPU's attention takes f32, "
                    "f16 or bf16", name[i], dtype_info[v[i]->dt].name);
            return false;
        }
        if (!attention_view_span_ok(v[i], j->nbatch, j->batch, rows[i], cols[i])) {
            err_set(e, ERR_INPUT, "attention backward: %s's indices reach past int64 at these "
                    "sizes", name[i]);
            return false;
        }
    }
    return true;
}

bool attention_backward_run(const Attention *a, void *const *bufs, const DType *dts,
                            const SymBind *sb, const Ukernels *uk, Pool *pool, Err *e)
{
    BackJob j = {.uk = uk, .nbatch = a->nbatch, .t = dim_value(a->tq, sb), .d = a->d,
                 .part = dim_value(a->part, sb), .causal = a->causal,
                 .scale = (float)a->scale};
    int64_t nbh = 1;
    bool sizes_ok = a->nbatch >= 0 && a->nbatch <= COIL_MAX_RANK - 2;
    for (int d = 0; sizes_ok && d < a->nbatch; d++) {
        j.batch[d] = dim_value(a->batch[d], sb);
        sizes_ok = j.batch[d] >= 0 && !__builtin_mul_overflow(nbh, j.batch[d], &nbh);
    }
    if (!sizes_ok) {
        err_set(e, ERR_INPUT, "attention backward: %d batch dimensions out of range", a->nbatch);
        return false;
    }
    const GemmOperand *ops[7] = {&a->q, &a->k, &a->v, &a->o, &a->fo, &a->dout, &a->lse};
    View *views[7] = {&j.q, &j.k, &j.v, &j.o, &j.fo, &j.dout, &j.lse};
    for (int i = 0; i < 7; i++)
        *views[i] = attention_view(ops[i], a->nbatch, bufs, dts, sb);
    if (!job_ok(&j, a, e))
        return false;
    if (nbh == 0 || j.t == 0 || j.d == 0)
        return true;
    /* fewer heads than threads: a head's key blocks split over tasks, dQ summed after */
    int64_t threads = pool_threads(pool), blocks = (j.t + BLOCK_ROWS - 1) / BLOCK_ROWS;
    j.splits = nbh >= threads ? 1 : (threads + nbh - 1) / nbh;
    j.splits = j.splits < blocks ? j.splits : blocks;
    j.tasks = nbh * j.splits;
    if (j.splits > 1 &&
        !(j.dq_parts = malloc((size_t)(j.tasks * j.t * j.d) * sizeof *j.dq_parts))) {
        err_set(e, ERR_MEMORY, "attention backward: out of memory for %lld partial dQ sums",
                (long long)j.tasks);
        return false;
    }
    threads = threads < j.tasks ? threads : j.tasks;
    atomic_store(&j.next, 0);
    pool_parallel_for(pool, threads, 1, worker, &j);
    bool ok = atomic_load(&j.next) >= j.tasks;
    if (!ok)
        err_set(e, ERR_MEMORY, "attention backward: out of memory for the threads' heads (%lld "
                "rows of %lld floats, several times)", (long long)j.t, (long long)j.d);
    else if (j.splits > 1)
        store_dq_parts(&j, nbh);
    free(j.dq_parts);
    return ok;
}
