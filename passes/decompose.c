/* decompose.c — replace every composite op (softmax, layer_norm, attention, ...) by
 * the primitives its op-table row builds, so later passes see only primitives. */
#include "passes/passes.h"

/* Build n's decomposition from its mapped operands; the result must have n's type. */
static int decompose_node(Rewrite *rw, int id)
{
    const Node *n = &rw->src->node[id];
    const OpInfo *op = &op_info[n->op];
    int in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = rewrite_in(rw, id, j);
    rewrite_at(rw, id);
    if (!op->decompose) {
        err_at(rw->b.err, rw->b.loc, "decompose: %s has no decomposition in the op table", op->name);
        return -1;
    }
    int r = op->decompose(&rw->b, n, in);
    const Type *t = b_type(&rw->b, r);
    if (r >= 0 && !type_eq(t, &n->type)) {
        char want[256], got[256];
        err_at(rw->b.err, rw->b.loc, "decompose: %s's decomposition gives %s instead of %s",
               op->name, type_fmt(rw->dst, t, got, sizeof got),
               type_fmt(rw->dst, &n->type, want, sizeof want));
        r = -1;
    }
    rw->map[id] = r;
    return r;
}

/* Which composites stay whole: none, or (decompose_fused) those a backend runs as one
 * fused kernel: attention with static head dims. */
typedef bool (*KeepFn)(const Graph *g, const Node *n);

static bool keep_none(const Graph *g, const Node *n)
{
    (void)g, (void)n;
    return false;
}

static bool keep_fused_forward(const Graph *g, const Node *n)
{
    if (n->op != OP_ATTENTION)
        return false;
    const Type *q = &g->node[n->in[0]].type, *v = &g->node[n->in[2]].type;
    return dim_is_static(q->dim[q->rank - 1]) && dim_is_static(v->dim[v->rank - 1]);
}

/* The CPU runs attention's training ops fused too (runtime/cpu/attention_backward.c;
 * their types already ask for a static head dimension), and conv as a GEMM over x's
 * windows (codegen/lower_conv.c, runtime/cpu/conv.c). */
static bool keep_fused(const Graph *g, const Node *n)
{
    return n->op == OP_ATTENTION_LSE || n->op == OP_ATTENTION_GRAD || n->op == OP_CONV ||
           keep_fused_forward(g, n);
}

/* The GPU keeps attention's training ops whole where its tensor-core kernels take them
 * (codegen/cuda/attention_mma_backward.c): Q, K and V in f16 or bf16 with head dims a
 * multiple of 16 up to ATTENTION_MMA_BACKWARD_MAX_HEAD. Elsewhere (f32, larger heads) the
 * decomposed backward's cuBLAS GEMMs are faster than a CUDA-core kernel would be. */
static bool keep_training_op_cuda(const Graph *g, const Node *n)
{
    if (n->op != OP_ATTENTION_LSE && n->op != OP_ATTENTION_GRAD)
        return false;
    const Type *q = &g->node[n->in[0]].type;
    int64_t d = q->dim[q->rank - 1].k;
    for (int i = 0; i < (n->op == OP_ATTENTION_LSE ? 2 : 5); i++)
        if (g->node[n->in[i]].type.dt != q->dt)
            return false;
    return (q->dt == DT_F16 || q->dt == DT_BF16) && dim_is_static(q->dim[q->rank - 1]) &&
           d > 0 && d % 16 == 0 && d <= ATTENTION_MMA_BACKWARD_MAX_HEAD;
}

static bool keep_fused_cuda(const Graph *g, const Node *n)
{
    return keep_fused_forward(g, n) || keep_training_op_cuda(g, n);
}

/* For autodiff: composites with a gradient rule of their own (conv) stay whole, so the
 * backward is built from the op (a conv's is two convs' worth, not im2col's gathers). */
static bool keep_differentiable(const Graph *g, const Node *n)
{
    return op_info[n->op].grad != NULL && (n->op != OP_ATTENTION || attention_grad_fusable(g, n));
}

static bool to_decompose(const Graph *g, int i, KeepFn keep)
{
    return (op_info[g->node[i].op].flags & OPF_COMPOSITE) && !keep(g, &g->node[i]);
}

static bool has_composite(const Graph *g, KeepFn keep)
{
    for (int i = 0; i < g->nnode; i++)
        if (to_decompose(g, i, keep))
            return true;
    return false;
}

static Graph *decompose_once(const Graph *g, KeepFn keep, Err *e)
{
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++) {
        if (to_decompose(g, i, keep))
            decompose_node(&rw, i);
        else
            rewrite_copy(&rw, i);
    }
    return rewrite_end(&rw);
}

/* A decomposition may use other composites (cross_entropy via log_softmax):
 * repeat until none is left, with a bound against a row that rebuilds itself. */
static Graph *decompose(const Graph *g, KeepFn keep, Err *e)
{
    Graph *cur = decompose_once(g, keep, e);
    for (int round = 0; cur && has_composite(cur, keep); round++) {
        if (round == 8) {
            err_set(e, ERR_INPUT, "decompose: composites remain after %d rounds in graph '%s'",
                    round, g->name);
            graph_free(cur);
            return NULL;
        }
        Graph *next = decompose_once(cur, keep, e);
        graph_free(cur);
        cur = next;
    }
    return cur;
}

Graph *pass_decompose(const Graph *g, Err *e) { return decompose(g, keep_none, e); }

/* For a backend with fused kernels: attention written out as ops found first, so that it
 * stays whole too. */
static Graph *decompose_fused(const Graph *g, KeepFn keep, Err *e)
{
    Graph *found = pass_find_attention(g, e);
    Graph *done = found ? decompose(found, keep, e) : NULL;
    graph_free(found);
    return done;
}

Graph *pass_decompose_fused(const Graph *g, Err *e) { return decompose_fused(g, keep_fused, e); }

Graph *pass_decompose_fused_cuda(const Graph *g, Err *e)
{
    return decompose_fused(g, keep_fused_cuda, e);
}

Graph *pass_decompose_for_grad(const Graph *g, Err *e)
{
    return decompose(g, keep_differentiable, e);
}
