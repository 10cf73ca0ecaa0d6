/* pad.c — GEMM shape padding: a matmul whose static N or K is not a multiple of what the
 * hardware prefers (tensor-core tiles, the CPU kernel's vector width) gets zero-padded
 * operands and its result sliced back to N, computing exactly the same values. */
#include "passes/passes.h"

/* A static size rounded up to a multiple; -1 (symbolic) and sizes whose rounding would
 * overflow stay as they are. */
static int64_t round_up(int64_t v, int multiple)
{
    int64_t r = v < 0 ? 0 : v % multiple;
    if (r == 0 || v > INT64_MAX - multiple)
        return v;
    return v + (multiple - r);
}

static int64_t static_or_neg(Dim d) { return dim_is_static(d) ? d.k : -1; }

bool pad_gemm_dims(const Graph *g, int node, int multiple, int64_t *n, int64_t *k,
                   int64_t *n_padded, int64_t *k_padded)
{
    if (node < 0 || node >= g->nnode || g->node[node].op != OP_MATMUL || multiple < 1)
        return false;
    const Type *a = &g->node[g->node[node].in[0]].type, *b = &g->node[g->node[node].in[1]].type;
    int64_t nn = static_or_neg(b->dim[b->rank - 1]), kk = static_or_neg(a->dim[a->rank - 1]);
    if (n)
        *n = nn;
    if (k)
        *k = kk;
    if (n_padded)
        *n_padded = round_up(nn, multiple);
    if (k_padded)
        *k_padded = round_up(kk, multiple);
    return true;
}

/* x with zeros appended along axis (counted from the end) up to `to` elements; the zeros
 * share x's dtype and every other dim, symbolic batch dims included, so concat accepts them. */
static int pad_axis(Builder *b, int x, int from_end, int64_t to)
{
    if (x < 0)
        return x;
    Type t = *b_type(b, x);
    int axis = t.rank - from_end;
    if (!dim_is_static(t.dim[axis]) || t.dim[axis].k >= to)
        return x;
    t.dim[axis] = dim_static(to - t.dim[axis].k);
    int parts[2] = {x, b_full(b, 0, &t)};
    return b_concat(b, parts, 2, axis);
}

/* Exact: the K padding adds 0*0 terms to each sum (after the real ones, so even the
 * interpreter's f64 sums come out bit-identical), and the N padding's columns, whatever
 * they hold, are cut by the slice. */
static int pad_matmul(Rewrite *rw, int id, int64_t n, int64_t np, int64_t kp)
{
    Builder *b = &rw->b;
    rewrite_at(rw, id);
    int a = pad_axis(b, rewrite_in(rw, id, 0), 1, kp);
    int w = pad_axis(b, pad_axis(b, rewrite_in(rw, id, 1), 2, kp), 1, np);
    int r = b_matmul(b, a, w);
    if (r >= 0 && np != n)
        r = b_slice(b, r, b_type(b, r)->rank - 1, 0, n, 1);
    rw->map[id] = r;
    return r;
}

static bool wants_pad(const Graph *g, int id, int multiple, PadWant want, void *ctx,
                      int64_t *n, int64_t *np, int64_t *kp)
{
    int64_t k;
    if (!pad_gemm_dims(g, id, multiple, n, &k, np, kp) || (*np == *n && *kp == k))
        return false;
    return !want || want(ctx, g, id);
}

Graph *pass_pad_gemm(const Graph *g, int multiple, PadWant want, void *ctx, Err *e)
{
    if (multiple < 1) {
        err_set(e, ERR_USAGE, "pad: multiple %d must be at least 1", multiple);
        return NULL;
    }
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++) {
        int64_t n, np, kp;
        if (wants_pad(g, i, multiple, want, ctx, &n, &np, &kp))
            pad_matmul(&rw, i, n, np, kp);
        else
            rewrite_copy(&rw, i);
    }
    return rewrite_end(&rw);
}

Graph *pass_pad(const Graph *g, Err *e)
{
    return pass_pad_gemm(g, 16, NULL, NULL, e);
}
