/* ops_attention.c — attention's training ops and the gradient rule that builds them:
 * attention_lse(q, k), each query's log-sum-exp of its scaled, masked scores, and
 * attention_grad(q, k, v, o, do, lse), FlashAttention-2's backward as one value.
 *
 * Why this shape. A node has one result, and the backward's three gradients share all
 * their work (the probabilities P = exp(S - lse) and dS = P (dP - rowsum(dO o)) feed
 * dQ, dK and dV alike), so attention_grad returns them packed on a new leading axis,
 * [3, batch.., T, D] = (dQ, dK, dV): each part a dense block that a slice and a reshape
 * (views) hand to q, k and v. That needs as many keys as queries (one Dim T) and D == Dv,
 * so self-attention; anything else (and q, k or v broadcast over batch dims, where the
 * gradient would need summing) keeps the decomposed backward (attention_grad_fusable).
 * The log-sum-exp is its own op rather than a second result of attention: the backward
 * then saves q, k, v, o and lse, all O(T) per head, and recomputes P block by block;
 * attention_lse costs one Q K^T pass more than a forward that returned it.
 * Both ops are composites: a backend without their fused kernels (CUDA) decomposes them
 * into the primitives below; the interpreter evaluates them directly in f64. */
#include <math.h>
#include <stdlib.h>

#include "ops.h"

/* ---------------------------------------------------------------- types */

static bool batch_same(const Type *a, const Type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank - 2; d++)
        if (!dim_eq(a->dim[d], b->dim[d]))
            return false;
    return true;
}

/* q, k, v of attention's result type r: the fused backward's conditions. */
static bool fusable_types(const Type *q, const Type *k, const Type *v, const Type *r)
{
    int n = q->rank;
    return n >= 2 && n < COIL_MAX_RANK && batch_same(q, r) && batch_same(k, r) && batch_same(v, r) &&
           dim_eq(q->dim[n - 2], k->dim[n - 2]) && dim_is_static(q->dim[n - 1]) &&
           dim_eq(q->dim[n - 1], v->dim[n - 1]);
}

bool attention_grad_fusable(const Graph *g, const Node *n)
{
    return n->op == OP_ATTENTION && n->nin == 3 && /* a bias takes the decomposed backward */
           fusable_types(&g->node[n->in[0]].type, &g->node[n->in[1]].type,
                         &g->node[n->in[2]].type, &n->type);
}

/* attention_lse(q[..., T, D], k[..., S, D]) -> f32[batch.., T]: attention's checks (k as
 * its own values), less the value dimension; f32 whatever q's float dtype, as exp(s - lse)
 * must recover probabilities to f32's precision. */
bool infer_attention_lse(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    Type qkk[3] = {in[0], in[1], in[1]};
    if (!infer_attention(g, n, qkk, out, e))
        return false;
    out->rank--;
    out->dt = DT_F32;
    return true;
}

/* attention_grad(q, k, v, o, do, lse) -> [3, batch.., T, D] in q's dtype. */
bool infer_attention_grad(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    Type r, lse;
    if (!infer_attention(g, n, in, &r, e))
        return false;
    lse = r;
    lse.rank--, lse.dt = DT_F32;
    const char *what[3] = {"o", "do", "lse"};
    const Type *want[3] = {&r, &r, &lse};
    if (r.rank >= COIL_MAX_RANK) {
        err_set(e, ERR_INPUT, "attention_grad: %s has rank %d; the gradients' leading axis would "
                "pass rank %d", type_text(g, &r).s, r.rank, COIL_MAX_RANK);
        return false;
    }
    if (!fusable_types(&in[0], &in[1], &in[2], &r)) {
        err_set(e, ERR_INPUT, "attention_grad: q %s, k %s, v %s: needs q, k and v of one batch "
                "shape, as many keys as queries and a static head dimension equal to v's",
                type_text(g, &in[0]).s, type_text(g, &in[1]).s, type_text(g, &in[2]).s);
        return false;
    }
    for (int i = 0; i < 3; i++)
        if (!type_eq(&in[3 + i], want[i])) {
            err_set(e, ERR_INPUT, "attention_grad: %s is %s; expected %s", what[i],
                    type_text(g, &in[3 + i]).s, type_text(g, want[i]).s);
            return false;
        }
    *out = r;
    out->rank = r.rank + 1;
    out->dim[0] = dim_static(3);
    for (int d = 0; d < r.rank; d++)
        out->dim[d + 1] = r.dim[d];
    return true;
}

/* ---------------------------------------------------------------- evaluation */

/* One batch element's geometry: q, k, v, o, do rows of d (v of dv), lse one per query. */
typedef struct Head {
    const double *q, *k, *v, *o, *dout, *lse;
    int64_t tq, tk, d, dv;
    double scale;
    bool causal;
} Head;

/* Query i's scores against every key (-inf where hidden). */
static void scores_row(const Head *h, int64_t i, double *s)
{
    for (int64_t j = 0; j < h->tk; j++) {
        double dot = 0;
        for (int64_t c = 0; c < h->d; c++)
            dot += h->q[i * h->d + c] * h->k[j * h->d + c];
        s[j] = h->causal && j > i ? -INFINITY : dot * h->scale;
    }
}

static double log_sum_exp(const double *s, int64_t n)
{
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; j++)
        m = s[j] > m ? s[j] : m;
    if (m == -INFINITY)
        return -INFINITY; /* no visible key */
    for (int64_t j = 0; j < n; j++)
        sum += exp(s[j] - m);
    return m + log(sum);
}

static int64_t batch_count(const ITensor *t, int lead)
{
    int64_t n = 1;
    for (int d = lead; d < t->rank - 2; d++)
        n *= t->shape[d];
    return n;
}

bool eval_attention_lse(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    const ITensor *q = &in[0], *k = &in[1];
    Head h = {.tq = q->shape[q->rank - 2], .tk = k->shape[k->rank - 2],
              .d = q->shape[q->rank - 1], .causal = node_int(n, "causal") != 0};
    h.scale = attention_scale(n, h.d);
    double *s = malloc(sizeof(double) * (size_t)(h.tk + 1));
    if (!s) {
        err_set(e, ERR_MEMORY, "attention_lse: out of memory for %lld scores", (long long)h.tk);
        return false;
    }
    ITensor rows = *out; /* out as [batch.., T, 1]: batch_offsets reads matrix dims */
    rows.shape[rows.rank++] = 1;
    int64_t nbatch = h.tq > 0 ? out->n / h.tq : 0;
    for (int64_t b = 0; b < nbatch; b++) {
        int64_t off[2];
        batch_offsets(&rows, b, in, 2, off);
        h.q = q->d + off[0], h.k = k->d + off[1];
        for (int64_t i = 0; i < h.tq; i++) {
            scores_row(&h, i, s);
            out->d[b * h.tq + i] = log_sum_exp(s, h.tk);
        }
    }
    free(s);
    return true;
}

/* One query row's share of the three gradients: P from lse, dP = dO V^T, dS = P (dP - Di). */
static void grad_row(const Head *h, int64_t i, double *s, double *dq, double *dk, double *dv)
{
    const double *dout = h->dout + i * h->dv;
    double di = 0;
    for (int64_t c = 0; c < h->dv; c++)
        di += dout[c] * h->o[i * h->dv + c];
    scores_row(h, i, s);
    for (int64_t j = 0; j < h->tk; j++) {
        double p = s[j] == -INFINITY ? 0 : exp(s[j] - h->lse[i]), dp = 0;
        for (int64_t c = 0; c < h->dv; c++) {
            dp += dout[c] * h->v[j * h->dv + c];
            dv[j * h->dv + c] += p * dout[c];
        }
        double ds = p * (dp - di) * h->scale;
        for (int64_t c = 0; c < h->d; c++) {
            dq[i * h->d + c] += ds * h->k[j * h->d + c];
            dk[j * h->d + c] += ds * h->q[i * h->d + c];
        }
    }
}

bool eval_attention_grad(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    const ITensor *q = &in[0];
    Head h = {.tq = q->shape[q->rank - 2], .tk = in[1].shape[q->rank - 2],
              .d = q->shape[q->rank - 1], .dv = in[2].shape[q->rank - 1],
              .causal = node_int(n, "causal") != 0};
    h.scale = attention_scale(n, h.d);
    double *s = malloc(sizeof(double) * (size_t)(h.tk + 1));
    if (!s) {
        err_set(e, ERR_MEMORY, "attention_grad: out of memory for %lld scores", (long long)h.tk);
        return false;
    }
    int64_t nbatch = batch_count(q, 0), part = out->n / 3; /* operands unbroadcast, dense */
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = 0;
    for (int64_t b = 0; b < nbatch; b++) {
        int64_t qs = b * h.tq * h.d, ks = b * h.tk * h.d, vs = b * h.tk * h.dv, os = b * h.tq * h.dv;
        h.q = q->d + qs, h.k = in[1].d + ks, h.v = in[2].d + vs, h.o = in[3].d + os;
        h.dout = in[4].d + os, h.lse = in[5].d + b * h.tq;
        for (int64_t i = 0; i < h.tq; i++)
            grad_row(&h, i, s, out->d + qs, out->d + part + ks, out->d + 2 * part + vs);
    }
    free(s);
    return true;
}

/* ---------------------------------------------------------------- FLOP counts */

/* q k^T: 2 D per score, and the log-sum-exp's max, subtract, exp, sum: 4. */
double flops_attention_lse(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n;
    double s = (double)in[1].shape[in[1].rank - 2], d = (double)in[0].shape[in[0].rank - 1];
    return (double)out->n * s * (2.0 * d + 4.0);
}

/* Per score: the products S = Q K^T, dP = dO V^T, dV += P^T dO, dK += dS^T Q,
 * dQ += dS K (2 D or 2 Dv each) and exp, P, dS (~6). */
double flops_attention_grad(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)out;
    const ITensor *q = &in[0];
    double t = (double)q->shape[q->rank - 2], d = (double)q->shape[q->rank - 1];
    double s = (double)in[1].shape[q->rank - 2], dv = (double)in[2].shape[q->rank - 1];
    double batch = t * d > 0 ? (double)q->n / (t * d) : 0;
    return batch * t * s * (2.0 * (3 * d + 2 * dv) + 6.0);
}

/* ---------------------------------------------------------------- decompositions */


/* max + log(sum(exp(s - max))) over the keys, computed in f32 (the result's dtype). */
int dec_attention_lse(Builder *b, const Node *n, const int *in)
{
    int64_t last[1] = {-1};
    Type qt;
    if (!b_type_of(b, in[0], &qt))
        return -1;
    int q = qt.dt == DT_F32 ? in[0] : b_cast(b, in[0], DT_F32);
    int k = qt.dt == DT_F32 ? in[1] : b_cast(b, in[1], DT_F32);
    int s = attention_scores(b, n, q, k, -1);
    int m = b_reduce(b, OP_MAX, s, 1, last, true);
    int sum = b_reduce(b, OP_SUM, b_unary(b, OP_EXP, b_binary(b, OP_SUB, s, m)), 1, last, true);
    int lse = b_binary(b, OP_ADD, m, b_unary(b, OP_LOG, sum));
    Type t;
    if (!b_type_of(b, lse, &t))
        return -1;
    t.rank--;
    return b_reshape(b, lse, &t);
}

/* x[...] as [1, ...], to be concatenated on the new leading axis. */
static int lead_one(Builder *b, int x)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    for (int d = t.rank; d > 0; d--)
        t.dim[d] = t.dim[d - 1];
    t.dim[0] = dim_static(1), t.rank++;
    return b_reshape(b, x, &t);
}

/* The same products FlashAttention-2 forms, on whole matrices, in f32 whatever the
 * operands' format (the fused kernels compute in f32 too), the result cast back. */
int dec_attention_grad(Builder *b, const Node *n, const int *in)
{
    int x[5];
    int64_t last[1] = {-1};
    Type rows;
    if (!b_type_of(b, in[0], &rows))
        return -1;
    DType dt = rows.dt;
    for (int i = 0; i < 5; i++)
        x[i] = dt == DT_F32 ? in[i] : b_cast(b, in[i], DT_F32);
    int q = x[0], k = x[1], v = x[2], o = x[3], dout = x[4];
    rows.dt = DT_F32;
    rows.dim[rows.rank - 1] = dim_static(1);
    int lse = b_reshape(b, b_cast(b, in[5], rows.dt), &rows);
    int p = b_unary(b, OP_EXP, b_binary(b, OP_SUB, attention_scores(b, n, q, k, -1), lse));
    int dv = b_matmul(b, b_swap_last(b, p), dout);
    int dp = b_matmul(b, dout, b_swap_last(b, v));
    int di = b_reduce(b, OP_SUM, b_binary(b, OP_MUL, dout, o), 1, last, true);
    int ds = b_binary(b, OP_MUL, b_binary(b, OP_MUL, p, b_binary(b, OP_SUB, dp, di)),
                      attention_scale_value(b, n, q));
    int parts[3] = {lead_one(b, b_matmul(b, ds, k)), lead_one(b, b_matmul(b, b_swap_last(b, ds), q)),
                    lead_one(b, dv)};
    int packed = b_concat(b, parts, 3, 0);
    return dt == DT_F32 ? packed : b_cast(b, packed, dt);
}

/* ---------------------------------------------------------------- the gradient rule */

/* Attention kept whole by autodiff (attention_grad_fusable): its log-sum-exp and the fused
 * backward, whose three parts are q's, k's and v's gradients. */
bool grad_attention(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    Attr attrs[2] = {attr_bool("causal", node_int(n, "causal") != 0),
                     attr_float("scale", node_float(n, "scale"))};
    int lse = b_op(b, OP_ATTENTION_LSE, in, 2, attrs, 2, NULL);
    int operands[6] = {in[0], in[1], in[2], out, g, lse};
    int packed = b_op(b, OP_ATTENTION_GRAD, operands, 6, attrs, 2, NULL);
    for (int j = 0; j < 3; j++) {
        Type t;
        if (!b_type_of(b, in[j], &t))
            return false;
        din[j] = b_reshape(b, b_slice(b, packed, 0, j, j + 1, 1), &t);
    }
    return din[2] >= 0;
}
