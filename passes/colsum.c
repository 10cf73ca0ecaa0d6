/* colsum.c — sums over leading axes as a product with a row of ones. A sum that keeps the
 * trailing dims and folds the leading ones (a bias's gradient, a norm's gain gradient:
 * sum over the batch of a [B*T, C] value) is, as a loop kernel, one column walked per
 * output element with a stride of a whole row: no vector spans it and every load is a
 * line of its own. As ones[1, R] x x[R, C] it is a GEMM whose kernels stream the rows
 * at vector width, on the CPU and on cuBLAS alike; the producer of x is stored first
 * (a pass over x in cache), which costs less than the strided walk saves. */
#include "passes/fuse.h"
#include "passes/passes.h"

/* Fewer kept elements than this stay a loop kernel: the GEMM's tiles would be mostly
 * empty, and a few columns walk fast enough. */
#define COLSUM_MIN_COLS 16

/* Whether node n sums x over its leading `*lead` dims (at least one) and keeps the rest. */
static bool leading_sum(const Graph *g, const Node *n, int *lead)
{
    if (n->op != OP_SUM || n->type.dt != DT_F32)
        return false;
    const Type *x = &g->node[n->in[0]].type;
    unsigned mask = reduce_axes(n, x->rank);
    int r = 0;
    while (r < x->rank && (mask >> r & 1))
        r++;
    if (r == 0 || r == x->rank || mask != (1u << r) - 1)
        return false;
    int64_t cols = 1;
    for (int d = r; d < x->rank; d++) {
        if (!dim_is_static(x->dim[d]))
            return false; /* the kept dims a weight's: static */
        cols *= x->dim[d].k;
    }
    *lead = r;
    return cols >= COLSUM_MIN_COLS;
}

/* The product of dims [from, to) of t as one Dim; false when it is not one. */
static bool dims_product(const Type *t, int from, int to, Dim *out)
{
    Dim p = dim_static(1);
    bool overflow = false;
    for (int d = from; d < to && !overflow; d++)
        p = dim_mul(p, t->dim[d], &overflow);
    *out = p;
    return !overflow;
}

/* ones[1, R] x reshape(x, [R, C]), reshaped to n's type; -1 when the sizes do not fold. */
static int as_gemm(Rewrite *rw, const Node *n, int lead)
{
    const Type *x = &rw->src->node[n->in[0]].type;
    Dim rows, cols;
    if (!dims_product(x, 0, lead, &rows) || !dims_product(x, lead, x->rank, &cols))
        return -1;
    Builder *b = &rw->b;
    Type flat = {.dt = DT_F32, .rank = 2, .dim = {rows, cols}};
    Type ones_t = {.dt = DT_F32, .rank = 2, .dim = {dim_static(1), rows}};
    int x2 = b_reshape(b, rw->map[n->in[0]], &flat);
    int prod = b_matmul(b, b_full(b, 1, &ones_t), x2);
    return prod < 0 ? -1 : b_reshape(b, prod, &n->type);
}

Graph *pass_colsum(const Graph *g, Err *e)
{
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++) {
        int lead, v;
        if (leading_sum(g, &g->node[i], &lead) && (v = as_gemm(&rw, &g->node[i], lead)) >= 0)
            rw.map[i] = v;
        else
            rewrite_copy(&rw, i);
    }
    return rewrite_end(&rw);
}
