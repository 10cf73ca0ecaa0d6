/* ops_nn.c — the composites (softmax, log_softmax, layer_norm, rms_norm, dropout,
 * cross_entropy, attention): type rules, a direct reference evaluation in f64, and
 * the decomposition into primitives that passes/decompose.c substitutes for them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---------------------------------------------------------------- type inference */

static bool need_float(const Graph *g, const Node *n, const char *what, const Type *t, Err *e)
{
    if (dtype_info[t->dt].is_float)
        return true;
    err_set(e, ERR_INPUT, "%s: %s %s is not a float dtype; cast it first", op_info[n->op].name,
            what, type_text(g, t).s);
    return false;
}

/* softmax and log_softmax. */
bool infer_softmax(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    int axis;
    if (!need_float(g, n, "operand", &in[0], e))
        return false;
    if (!axis_norm(node_int(n, "axis"), in[0].rank, &axis)) {
        err_set(e, ERR_INPUT, "%s: axis %lld is out of range for %s (rank %d)",
                op_info[n->op].name, (long long)node_int(n, "axis"), type_text(g, &in[0]).s,
                in[0].rank);
        return false;
    }
    *out = in[0];
    return true;
}

/* x[..., C] with optional weight and bias of shape [C] in x's dtype; eps >= 0. */
static bool infer_norm(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    static const char *role[] = {"x", "weight", "bias"};
    const Type *x = &in[0];
    const char *op = op_info[n->op].name;
    if (!need_float(g, n, "x", x, e))
        return false;
    if (x->rank < 1) {
        err_set(e, ERR_INPUT, "%s: x %s is a scalar; it normalises over the last dimension",
                op, type_text(g, x).s);
        return false;
    }
    Type want = {.dt = x->dt, .rank = 1, .dim = {x->dim[x->rank - 1]}};
    for (int i = 1; i < n->nin; i++)
        if (!type_eq(&in[i], &want)) {
            err_set(e, ERR_INPUT, "%s: %s %s must be %s to match the last dimension of x %s",
                    op, role[i], type_text(g, &in[i]).s, type_text(g, &want).s,
                    type_text(g, x).s);
            return false;
        }
    double eps = node_float(n, "eps");
    if (!(eps >= 0) || isinf(eps)) {
        err_set(e, ERR_INPUT, "%s: eps = %g must be finite and >= 0", op, eps);
        return false;
    }
    *out = *x;
    return true;
}

bool infer_layer_norm(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    return infer_norm(g, n, in, out, e);
}

bool infer_rms_norm(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    return infer_norm(g, n, in, out, e);
}

bool infer_dropout(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!need_float(g, n, "operand", &in[0], e))
        return false;
    double p = node_float(n, "p");
    if (!(p >= 0 && p < 1)) {
        err_set(e, ERR_INPUT, "dropout: p = %g must be in [0, 1)", p);
        return false;
    }
    *out = in[0];
    return true;
}

typedef enum Reduction { RED_MEAN, RED_SUM, RED_NONE, RED_UNKNOWN } Reduction;

static Reduction reduction_of(const Node *n)
{
    static const char *names[] = {[RED_MEAN] = "mean", [RED_SUM] = "sum", [RED_NONE] = "none"};
    const char *s = node_str(n, "reduction");
    if (!s)
        return RED_MEAN;
    for (int r = 0; r < RED_UNKNOWN; r++)
        if (strcmp(s, names[r]) == 0)
            return (Reduction)r;
    return RED_UNKNOWN;
}

static bool labels_fit(const Graph *g, const Type *logits, const Type *labels, Err *e)
{
    TypeText tx = type_text(g, logits), tl = type_text(g, labels);
    if (labels->dt != DT_I8 && labels->dt != DT_I32 && labels->dt != DT_I64)
        err_set(e, ERR_INPUT, "cross_entropy: labels %s must have an integer dtype (i8, i32, "
                "i64); cast them", tl.s);
    else if (labels->rank != logits->rank - 1)
        err_set(e, ERR_INPUT, "cross_entropy: labels %s must have the shape of logits %s without "
                "its last (class) dimension: ranks %d and %d", tl.s, tx.s, labels->rank,
                logits->rank);
    for (int d = 0; err_ok(e) && d < labels->rank; d++)
        if (!dim_eq(labels->dim[d], logits->dim[d]))
            err_set(e, ERR_INPUT, "cross_entropy: labels %s must have the shape of logits %s "
                    "without its last (class) dimension: dimension %d differs (%s vs %s)", tl.s,
                    tx.s, d, dim_text(g, labels->dim[d]).s, dim_text(g, logits->dim[d]).s);
    return err_ok(e);
}

/* logits[..., C] float, labels[...] integer -> a scalar, or labels' shape for "none". */
bool infer_cross_entropy(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const Type *logits = &in[0], *labels = &in[1];
    Reduction red = reduction_of(n);
    if (red == RED_UNKNOWN) {
        err_set(e, ERR_INPUT, "cross_entropy: reduction \"%s\" is unknown; use \"mean\", "
                "\"sum\" or \"none\"", node_str(n, "reduction"));
        return false;
    }
    if (!need_float(g, n, "logits", logits, e))
        return false;
    if (logits->rank < 1) {
        err_set(e, ERR_INPUT, "cross_entropy: logits %s need a class dimension (rank >= 1)",
                type_text(g, logits).s);
        return false;
    }
    if (!labels_fit(g, logits, labels, e))
        return false;
    *out = red == RED_NONE ? *labels : type_scalar(logits->dt);
    out->dt = logits->dt;
    return true;
}

static bool attention_dims_ok(const Graph *g, const Node *n, const Type *q, const Type *k,
                              const Type *v, Err *e)
{
    TypeText tq = type_text(g, q), tk = type_text(g, k), tv = type_text(g, v);
    double scale = node_float(n, "scale");
    if (k->dt != q->dt || v->dt != q->dt)
        err_set(e, ERR_INPUT, "attention: q %s, k %s, v %s: dtypes differ; insert a cast", tq.s,
                tk.s, tv.s);
    else if (q->rank < 2 || k->rank < 2 || v->rank < 2)
        err_set(e, ERR_INPUT, "attention: q %s, k %s, v %s: each needs rank >= 2 ([..., T, D])",
                tq.s, tk.s, tv.s);
    else if (!dim_eq(q->dim[q->rank - 1], k->dim[k->rank - 1]))
        err_set(e, ERR_INPUT, "attention: q %s and k %s: head dimensions %s and %s differ", tq.s,
                tk.s, dim_text(g, q->dim[q->rank - 1]).s, dim_text(g, k->dim[k->rank - 1]).s);
    else if (!dim_eq(k->dim[k->rank - 2], v->dim[v->rank - 2]))
        err_set(e, ERR_INPUT, "attention: k %s and v %s: key counts %s and %s differ", tk.s,
                tv.s, dim_text(g, k->dim[k->rank - 2]).s, dim_text(g, v->dim[v->rank - 2]).s);
    else if (!(scale >= 0) || isinf(scale))
        err_set(e, ERR_INPUT, "attention: scale = %g must be finite and >= 0 (0 means "
                "1/sqrt(head dimension))", scale);
    return err_ok(e);
}

/* The additive bias: q's dtype, [..., T or 1, S or 1], its batch dims broadcasting into
 * the result's (it never adds batch elements of its own). */
static bool attention_bias_ok(const Graph *g, const Type *bias, const Type *r, const Type *q,
                              const Type *k, Err *e)
{
    TypeText tb = type_text(g, bias), tr = type_text(g, r);
    Dim rows = q->dim[q->rank - 2], keys = k->dim[k->rank - 2], out[COIL_MAX_RANK], da, db;
    int rank, bad;
    if (bias->dt != q->dt)
        err_set(e, ERR_INPUT, "attention: bias %s: dtype differs from q's %s; insert a cast", tb.s,
                dtype_info[q->dt].name);
    else if (bias->rank < 2)
        err_set(e, ERR_INPUT, "attention: bias %s needs rank >= 2 ([..., T, S])", tb.s);
    else if (!dim_eq(bias->dim[bias->rank - 2], rows) &&
             !dim_eq(bias->dim[bias->rank - 2], dim_static(1)))
        err_set(e, ERR_INPUT, "attention: bias %s: %s rows, not the %s queries (or 1)", tb.s,
                dim_text(g, bias->dim[bias->rank - 2]).s, dim_text(g, rows).s);
    else if (!dim_eq(bias->dim[bias->rank - 1], keys) &&
             !dim_eq(bias->dim[bias->rank - 1], dim_static(1)))
        err_set(e, ERR_INPUT, "attention: bias %s: %s columns, not the %s keys (or 1)", tb.s,
                dim_text(g, bias->dim[bias->rank - 1]).s, dim_text(g, keys).s);
    else if (!broadcast_dims(r->rank - 2, r->dim, bias->rank - 2, bias->dim, out, &rank, &bad,
                             &da, &db) ||
             rank != r->rank - 2 || memcmp(out, r->dim, (size_t)rank * sizeof *out) != 0)
        err_set(e, ERR_INPUT, "attention: bias %s does not broadcast to the result %s's batch "
                "dimensions", tb.s, tr.s);
    return err_ok(e);
}

/* q[..., T, D], k[..., S, D], v[..., S, Dv] (, bias[..., T, S] added to the scaled
 * scores) -> broadcast(batch) + [T, Dv]. */
bool infer_attention(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const Type *q = &in[0], *k = &in[1], *v = &in[2];
    if (!need_float(g, n, "q", q, e) || !attention_dims_ok(g, n, q, k, v, e))
        return false;
    Type r = {.dt = q->dt};
    Dim qk[COIL_MAX_RANK], da, db;
    int nqk, bad;
    if (!broadcast_dims(q->rank - 2, q->dim, k->rank - 2, k->dim, qk, &nqk, &bad, &da, &db) ||
        !broadcast_dims(nqk, qk, v->rank - 2, v->dim, r.dim, &r.rank, &bad, &da, &db)) {
        err_set(e, ERR_INPUT, "attention: q %s, k %s, v %s: batch dimension %d differs (%s vs %s)",
                type_text(g, q).s, type_text(g, k).s, type_text(g, v).s, bad, dim_text(g, da).s,
                dim_text(g, db).s);
        return false;
    }
    r.dim[r.rank++] = q->dim[q->rank - 2];
    r.dim[r.rank++] = v->dim[v->rank - 1];
    if (n->op == OP_ATTENTION && n->nin > 3 && !attention_bias_ok(g, &in[3], &r, q, k, e))
        return false;
    *out = r;
    return true;
}

/* ---------------------------------------------------------------- evaluation */

/* A tensor seen as rows along one axis: element j of row r is at row_at(rows, r) + j * stride. */
typedef struct Rows {
    int64_t count, len, stride;
} Rows;

static Rows rows_along(const ITensor *t, int axis)
{
    Rows r = {1, t->shape[axis], 1};
    for (int d = 0; d < t->rank; d++)
        if (d > axis)
            r.stride *= t->shape[d];
        else if (d < axis)
            r.count *= t->shape[d];
    r.count *= r.stride;
    return r;
}

static int64_t row_at(Rows rows, int64_t r)
{
    return r / rows.stride * rows.stride * rows.len + r % rows.stride;
}

/* The row's max (NaN wins, as in the `max` reduction) and sum of exp(x - max): the
 * same steps, in the same order, as the decomposition. */
static double row_sum_exp(const double *x, int64_t len, int64_t stride, double *max)
{
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < len; j++)
        m = s_maximum(m, x[j * stride]);
    for (int64_t j = 0; j < len; j++)
        s += exp(x[j * stride] - m);
    *max = m;
    return s;
}

/* y may alias x: each element is read before it is written. */
static void softmax_row(const double *x, double *y, int64_t len, int64_t stride, bool log_form)
{
    double m, s = row_sum_exp(x, len, stride, &m), log_s = log(s);
    for (int64_t j = 0; j < len; j++) {
        double c = x[j * stride] - m;
        y[j * stride] = log_form ? c - log_s : exp(c) / s;
    }
}

static bool eval_softmax_form(const Node *n, const ITensor *in, ITensor *out, Err *e,
                              bool log_form)
{
    int axis;
    if (!axis_norm(node_int(n, "axis"), in[0].rank, &axis)) {
        err_set(e, ERR_INPUT, "%s: axis %lld is out of range for rank %d", op_info[n->op].name,
                (long long)node_int(n, "axis"), in[0].rank);
        return false;
    }
    Rows rows = rows_along(&in[0], axis);
    for (int64_t r = 0; r < rows.count; r++) {
        int64_t at = row_at(rows, r);
        softmax_row(in[0].d + at, out->d + at, rows.len, rows.stride, log_form);
    }
    return true;
}

bool eval_softmax(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    return eval_softmax_form(n, in, out, e, false);
}

bool eval_log_softmax(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    return eval_softmax_form(n, in, out, e, true);
}

/* y = xc * inv [* w] [+ b] over rows of the last axis, xc = x - mean (layer_norm) or x
 * (rms_norm), inv = 1/sqrt(mean(xc^2) + eps). */
static void normalise_rows(const Node *n, const ITensor *in, ITensor *out, bool center)
{
    const ITensor *x = &in[0];
    int64_t len = x->shape[x->rank - 1], nrow = len ? x->n / len : 0;
    double eps = node_float(n, "eps");
    for (int64_t r = 0; r < nrow; r++) {
        const double *xr = x->d + r * len;
        double mean = 0, sq = 0;
        for (int64_t j = 0; center && j < len; j++) /* rms_norm keeps mean = 0 */
            mean += xr[j];
        mean /= (double)len;
        for (int64_t j = 0; j < len; j++)
            sq += (xr[j] - mean) * (xr[j] - mean);
        double inv = 1.0 / sqrt(sq / (double)len + eps);
        for (int64_t j = 0; j < len; j++) {
            double y = (xr[j] - mean) * inv;
            y = n->nin > 1 ? y * in[1].d[j] : y;
            out->d[r * len + j] = n->nin > 2 ? y + in[2].d[j] : y;
        }
    }
}

/* Biased variance, eps inside the square root (PyTorch's layer_norm). */
bool eval_layer_norm(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)e;
    normalise_rows(n, in, out, true);
    return true;
}

bool eval_rms_norm(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)e;
    normalise_rows(n, in, out, false);
    return true;
}

/* Kernels compare the f32 uniform with p held in f32, so the oracle rounds p the same way.
 * in[1]: the rng step (a random op's extra operand). */
bool eval_dropout(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)e;
    double p = node_float(n, "p"), keep_at = dtype_round(DT_F32, p), scale = 1.0 / (1.0 - p);
    uint64_t seed = (uint64_t)node_int(n, "seed"), offset = (uint64_t)node_int(n, "offset");
    uint64_t step = (uint64_t)in[1].d[0];
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = philox_uniform_step(seed, step, offset, (uint64_t)i) >= keep_at
                        ? in[0].d[i] * scale : 0;
    return true;
}

/* -log_softmax(row)[label], as the decomposition computes it: (x - max) - log(sum). */
static bool row_nll(const double *x, int64_t classes, double label, int64_t pos, double *nll,
                    Err *e)
{
    if (!(label >= 0 && label < (double)classes)) {
        err_set(e, ERR_INPUT, "cross_entropy: label %lld at position %lld is out of range "
                "[0, %lld)", (long long)label, (long long)pos, (long long)classes);
        return false;
    }
    double m, s = row_sum_exp(x, classes, 1, &m);
    *nll = -((x[(int64_t)label] - m) - log(s));
    return true;
}

/* The mean is over label positions; an empty batch gives NaN (0/0), as in PyTorch. */
bool eval_cross_entropy(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    const ITensor *logits = &in[0], *labels = &in[1];
    int64_t classes = logits->shape[logits->rank - 1];
    Reduction red = reduction_of(n);
    double total = 0;
    for (int64_t p = 0; p < labels->n; p++) {
        double nll;
        if (!row_nll(logits->d + p * classes, classes, labels->d[p], p, &nll, e))
            return false;
        if (red == RED_NONE)
            out->d[p] = nll;
        total += nll;
    }
    if (red != RED_NONE)
        out->d[0] = red == RED_MEAN ? total / (double)labels->n : total;
    return true;
}

double attention_scale(const Node *n, int64_t head_dim)
{
    double scale = node_float(n, "scale");
    return scale != 0 ? scale : 1.0 / sqrt((double)head_dim);
}

/* One query row: scores against every key, plus the bias row (key j's at bias[j *
 * bias_step]; NULL: none), causal mask, softmax, weighted sum of v. */
static void attend_row(const double *q, const double *k, const double *v, double *out,
                       double *score, int64_t t, int64_t nkey, int64_t d, int64_t dv,
                       double scale, bool causal, const double *bias, int64_t bias_step)
{
    for (int64_t j = 0; j < nkey; j++) {
        double dot = 0;
        for (int64_t c = 0; c < d; c++)
            dot += q[c] * k[j * d + c];
        score[j] = dot * scale + (bias ? bias[j * bias_step] : 0);
        score[j] = causal && j > t ? -INFINITY : score[j];
    }
    softmax_row(score, score, nkey, 1, false);
    for (int64_t c = 0; c < dv; c++) {
        double acc = 0;
        for (int64_t j = 0; j < nkey; j++)
            acc += score[j] * v[j * dv + c];
        out[c] = acc;
    }
}

bool eval_attention(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    const ITensor *q = &in[0], *k = &in[1], *v = &in[2];
    int64_t nq = q->shape[q->rank - 2], d = q->shape[q->rank - 1];
    int64_t nkey = k->shape[k->rank - 2], dv = v->shape[v->rank - 1];
    int64_t nbatch = 1;
    for (int i = 0; i < out->rank - 2; i++)
        nbatch *= out->shape[i];
    double scale = attention_scale(n, d), *score = malloc(sizeof(double) * (size_t)(nkey + 1));
    if (!score) {
        err_set(e, ERR_MEMORY, "attention: out of memory for %lld scores", (long long)nkey);
        return false;
    }
    bool causal = node_int(n, "causal") != 0;
    const ITensor *bias = n->nin > 3 ? &in[3] : NULL;
    /* the bias's rows and columns: 1 broadcasts (a step of 0) */
    int64_t bias_rows = bias ? bias->shape[bias->rank - 2] : 1;
    int64_t bias_cols = bias ? bias->shape[bias->rank - 1] : 1;
    for (int64_t b = 0; b < nbatch; b++) {
        int64_t off[4];
        batch_offsets(out, b, in, n->nin, off);
        for (int64_t t = 0; t < nq; t++) {
            const double *brow = bias ? bias->d + off[3] + (bias_rows > 1 ? t : 0) * bias_cols : NULL;
            attend_row(q->d + off[0] + t * d, k->d + off[1], v->d + off[2],
                       out->d + (b * nq + t) * dv, score, t, nkey, d, dv, scale, causal, brow,
                       bias_cols > 1 ? 1 : 0);
        }
    }
    free(score);
    return true;
}

/* ---------------------------------------------------------------- FLOP counts */

/* Per element: max, subtract, exp, sum, divide (log_softmax: subtract) = 5. */
double flops_softmax(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)in;
    return 5.0 * (double)out->n;
}

/* Per element: mean, center, square, sum, normalise = 5, plus 1 each for weight and bias. */
double flops_layer_norm(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)in;
    return (5.0 + (n->nin - 1)) * (double)out->n;
}

/* Per element: square, sum, normalise = 3, plus 1 for the weight. */
double flops_rms_norm(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)in;
    return (3.0 + (n->nin - 1)) * (double)out->n;
}

/* Per element: draw, compare, scale = 3; nothing when p = 0 (the identity). */
double flops_dropout(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)in;
    return node_float(n, "p") == 0 ? 0 : 3.0 * (double)out->n;
}

/* log_softmax's 5 per logit, then pick and negate (2) per position, plus the reduction. */
double flops_cross_entropy(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)out;
    return 5.0 * (double)in[0].n + 3.0 * (double)in[1].n;
}

/* q k^T and p v: 2 * batch * T * S * (D + Dv); scale and softmax: 6 per score. */
double flops_attention(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n;
    const ITensor *q = &in[0], *k = &in[1], *v = &in[2];
    double t = (double)q->shape[q->rank - 2], d = (double)q->shape[q->rank - 1];
    double s = (double)k->shape[k->rank - 2], dv = (double)v->shape[v->rank - 1];
    double batch = t * dv > 0 ? (double)out->n / (t * dv) : 0;
    return batch * t * s * (2.0 * (d + dv) + 6.0);
}

/* ---------------------------------------------------------------- decompositions */


static int scalar_like(Builder *b, double v, int like)
{
    Type t;
    return b_type_of(b, like, &t) ? b_scalar(b, v, t.dt) : -1;
}

/* x - max(x) first, so exp never overflows; log_softmax never divides. */
static int softmax_parts(Builder *b, int x, int64_t axis, bool log_form)
{
    int64_t ax[1] = {axis};
    int c = b_binary(b, OP_SUB, x, b_reduce(b, OP_MAX, x, 1, ax, true));
    int ex = b_unary(b, OP_EXP, c);
    int sum = b_reduce(b, OP_SUM, ex, 1, ax, true);
    return log_form ? b_binary(b, OP_SUB, c, b_unary(b, OP_LOG, sum))
                    : b_binary(b, OP_DIV, ex, sum);
}

int dec_softmax(Builder *b, const Node *n, const int *in)
{
    return softmax_parts(b, in[0], node_int(n, "axis"), false);
}

int dec_log_softmax(Builder *b, const Node *n, const int *in)
{
    return softmax_parts(b, in[0], node_int(n, "axis"), true);
}

/* xc * rsqrt(mean(xc^2) + eps) [* w] [+ b], with xc = x - mean(x) or x itself (rms). */
static int normalise_parts(Builder *b, const Node *n, const int *in, bool center)
{
    int64_t last[1] = {-1};
    int x = in[0];
    int xc = center ? b_binary(b, OP_SUB, x, b_reduce(b, OP_MEAN, x, 1, last, true)) : x;
    int ms = b_reduce(b, OP_MEAN, b_binary(b, OP_MUL, xc, xc), 1, last, true);
    int eps = scalar_like(b, node_float(n, "eps"), x);
    int y = b_binary(b, OP_MUL, xc, b_unary(b, OP_RSQRT, b_binary(b, OP_ADD, ms, eps)));
    if (n->nin > 1)
        y = b_binary(b, OP_MUL, y, in[1]);
    if (n->nin > 2)
        y = b_binary(b, OP_ADD, y, in[2]);
    return y;
}

int dec_layer_norm(Builder *b, const Node *n, const int *in)
{
    return normalise_parts(b, n, in, true);
}

int dec_rms_norm(Builder *b, const Node *n, const int *in)
{
    return normalise_parts(b, n, in, false);
}

/* where(rand >= p, x * 1/(1-p), 0), the uniforms drawn in f32 whatever x's dtype;
 * p = 0 keeps everything, so x itself replaces the node. */
int dec_dropout(Builder *b, const Node *n, const int *in)
{
    double p = node_float(n, "p");
    Type uniform;
    if (!b_type_of(b, in[0], &uniform) || p == 0)
        return p == 0 ? in[0] : -1;
    uniform.dt = DT_F32;
    int u = b_rand(b, &uniform, node_int(n, "seed"), node_int(n, "offset"));
    int keep = b_binary(b, OP_GE, u, b_scalar(b, p, DT_F32));
    int scaled = b_binary(b, OP_MUL, in[0], scalar_like(b, 1.0 / (1.0 - p), in[0]));
    return b_where(b, keep, scaled, scalar_like(b, 0, in[0]));
}

/* -sum(where(iota(C) == labels[..., None], log_softmax(logits), 0), -1), then reduced.
 * Labels compare as i64: an i8 iota would wrap past 127 and match the wrong class. With C
 * static the labels first pass index_check, so a label out of range stays an error after
 * decomposition, as it is of the composite (a symbolic C has no bound to check against). */
int dec_cross_entropy(Builder *b, const Node *n, const int *in)
{
    Type logits, column;
    if (!b_type_of(b, in[0], &logits) || !b_type_of(b, in[1], &column))
        return -1;
    int64_t last[1] = {-1};
    Type classes = {.dt = DT_I64, .rank = 1, .dim = {logits.dim[logits.rank - 1]}};
    int labels = column.dt == DT_I64 ? in[1] : b_cast(b, in[1], DT_I64);
    Dim c = logits.dim[logits.rank - 1];
    if (dim_is_static(c)) {
        Attr bound = attr_int("bound", c.k);
        labels = b_op(b, OP_INDEX_CHECK, &labels, 1, &bound, 1, NULL);
    }
    column.dt = DT_I64;
    column.dim[column.rank++] = dim_static(1);
    int onehot = b_binary(b, OP_EQ, b_reshape(b, labels, &column), b_iota(b, &classes, 0));
    int picked = b_where(b, onehot, softmax_parts(b, in[0], -1, true), scalar_like(b, 0, in[0]));
    int nll = b_unary(b, OP_NEG, b_reduce(b, OP_SUM, picked, 1, last, false));
    Reduction red = reduction_of(n);
    if (red == RED_NONE)
        return nll;
    return b_reduce(b, red == RED_SUM ? OP_SUM : OP_MEAN, nll, 0, NULL, false);
}

/* The scale as a constant when given or when D is static; else rsqrt(sum of D ones),
 * computed at run time. */
int attention_scale_value(Builder *b, const Node *n, int q)
{
    Type t;
    if (!b_type_of(b, q, &t))
        return -1;
    Dim d = t.dim[t.rank - 1];
    if (node_float(n, "scale") != 0 || dim_is_static(d))
        return b_scalar(b, attention_scale(n, d.k), t.dt);
    Type ones = {.dt = t.dt, .rank = 1, .dim = {d}};
    return b_unary(b, OP_RSQRT, b_reduce(b, OP_SUM, b_full(b, 1, &ones), 0, NULL, false));
}

/* Key j is hidden from query i when j > i (aligned at the start). */
static int causal_mask(Builder *b, int scores)
{
    Type t;
    if (!b_type_of(b, scores, &t))
        return -1;
    Type grid = {.dt = DT_I64, .rank = 2, .dim = {t.dim[t.rank - 2], t.dim[t.rank - 1]}};
    int hidden = b_binary(b, OP_GT, b_iota(b, &grid, 1), b_iota(b, &grid, 0));
    return b_where(b, hidden, b_scalar(b, -INFINITY, t.dt), scores);
}

/* q k^T * scale (+ bias, when bias >= 0), masked when causal (attention's training ops
 * decompose through it too, with no bias). */
int attention_scores(Builder *b, const Node *n, int q, int k, int bias)
{
    int scores = b_matmul(b, q, b_swap_last(b, k));
    scores = b_binary(b, OP_MUL, scores, attention_scale_value(b, n, q));
    if (bias >= 0)
        scores = b_binary(b, OP_ADD, scores, bias);
    return node_int(n, "causal") ? causal_mask(b, scores) : scores;
}

/* softmax(q k^T * scale [+ bias] [masked]) v, in f32 whatever the operands' format (the
 * fused kernels compute in f32 too), the result cast back. */
int dec_attention(Builder *b, const Node *n, const int *in)
{
    int x[4] = {in[0], in[1], in[2], n->nin > 3 ? in[3] : -1};
    DType dt = n->type.dt;
    for (int i = 0; i < 4 && dt != DT_F32; i++)
        x[i] = x[i] < 0 ? x[i] : b_cast(b, x[i], DT_F32);
    int y = b_matmul(b, softmax_parts(b, attention_scores(b, n, x[0], x[1], x[3]), -1, false), x[2]);
    return dt == DT_F32 ? y : b_cast(b, y, dt);
}
