/* autodiff.c — reverse-mode differentiation: the joint forward-and-backward graph of a
 * scalar loss. Composites are decomposed first, but those with a rule of their own (conv),
 * so only the primitives' rules and theirs (the op table's grad column, ir/grad.c,
 * ir/ops_conv.c) are needed. The forward is copied as it is; then, from
 * the loss down, each node that depends on a parameter and has a gradient hands it to its
 * operands through its rule, contributions to one value summed. The result has the
 * forward's outputs, then `grad.<param>` for every parameter in graph_params order (zeros
 * for one the loss does not depend on), so the joint graph goes through the same fusion,
 * tuning and code generation as any graph. A buffer (param_is_buffer) has no gradient: its
 * slot, `update.<buffer>`, is the buffer's new value, the forward's output of that name
 * (moved there from the forward's outputs) or the buffer itself, which the optimizer
 * assigns instead of stepping (cpu_optim.h's ROLE_BUFFER). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Which values depend on a parameter through float values (only those carry gradients). */
static bool *needs_grad(const Graph *g)
{
    bool *need = calloc((size_t)g->nnode + 1, sizeof *need);
    for (int i = 0; need && i < g->nnode; i++) {
        const Node *n = &g->node[i];
        bool dep = n->op == OP_PARAM && !param_is_buffer(n);
        for (int j = 0; j < n->nin && !dep; j++)
            dep = need[n->in[j]];
        need[i] = dep && dtype_info[n->type.dt].is_float;
    }
    return need;
}

/* The loss: the output called `loss` (name NULL), else the named one; a float scalar. */
static int find_loss(const Graph *g, const char *name, Err *e)
{
    const char *want = name ? name : "loss";
    for (int i = 0; i < g->noutput; i++)
        if (strcmp(g->output_name[i], want) == 0) {
            const Type *t = &g->node[g->output[i]].type;
            if (t->rank == 0 && dtype_info[t->dt].is_float)
                return g->output[i];
            char buf[128];
            err_set(e, ERR_INPUT, "autodiff: output '%s' of @%s is %s; the loss must be a float "
                    "scalar", want, g->name, type_fmt(g, t, buf, sizeof buf));
            return -1;
        }
    err_set(e, ERR_INPUT, "autodiff: @%s has no output named '%s' to differentiate", g->name, want);
    return -1;
}

/* dense + scatter as one index_add into dense, when scatter is an index_add into zeros
 * (a gather's rule: a tied embedding's table is read by a gather and a matmul); else -1.
 * Both are fresh gradient terms read by nothing else; the zeros are left to dce. */
static int add_into_scatter(Builder *b, int dense, int scatter)
{
    const Node *s = &b->g->node[scatter];
    if (s->op != OP_INDEX_ADD || b->g->node[s->in[0]].op != OP_FULL ||
        node_float(&b->g->node[s->in[0]], "value") != 0 ||
        !type_eq(&b->g->node[dense].type, &s->type))
        return -1;
    int idx = s->in[1], src = s->in[2]; /* copied out: building moves the nodes */
    return b_index_add(b, dense, idx, src);
}

/* grad[x] += contribution (the first one is taken as it is). */
static void accumulate(Builder *b, int *grad, int x, int contribution)
{
    int sum = -1;
    if (grad[x] >= 0 && (sum = add_into_scatter(b, grad[x], contribution)) < 0)
        sum = add_into_scatter(b, contribution, grad[x]);
    if (grad[x] >= 0 && sum < 0)
        sum = b_binary(b, OP_ADD, grad[x], contribution);
    grad[x] = grad[x] < 0 ? contribution : sum;
}

/* One node's rule, its operands' gradients accumulated. */
static bool backward_node(Rewrite *rw, const bool *need, int *grad, int i, Err *e)
{
    const Node *n = &rw->src->node[i];
    GradFn rule = op_info[n->op].grad;
    if (n->op == OP_PARAM)
        return true;
    rewrite_at(rw, i);
    if (!rule) {
        err_at(e, n->loc, "autodiff: '%s' has no gradient rule, and the loss depends on a "
               "parameter through it", op_info[n->op].name);
        return false;
    }
    int in[n->nin > 0 ? n->nin : 1], din[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = rw->map[n->in[j]], din[j] = -1;
    if (!rule(&rw->b, n, in, rw->map[i], grad[i], din))
        return err_ok(e) ? (err_at(e, n->loc, "autodiff: the rule of '%s' failed",
                                   op_info[n->op].name), false) : false;
    for (int j = 0; j < n->nin; j++)
        if (din[j] >= 0 && need[n->in[j]])
            accumulate(&rw->b, grad, n->in[j], din[j]);
    return err_ok(e);
}

/* Buffer n's slot: its update output (taken out of the forward's outputs, in n's dtype),
 * else `self`, the buffer unchanged. */
static int buffer_slot(Builder *b, const Node *n, int self)
{
    Graph *g = b->g;
    int at = graph_buffer_update(g, node_name(n));
    if (at < 0)
        return self;
    int v = g->output[at];
    for (int i = at; i + 1 < g->noutput; i++)
        g->output[i] = g->output[i + 1], g->output_name[i] = g->output_name[i + 1];
    g->noutput--;
    return g->node[v].type.dt == n->type.dt ? v : b_cast(b, v, n->type.dt);
}

/* Gradient outputs for every parameter, after the forward's outputs; a buffer's update.
 * grad[i] of a buffer is the buffer's own node. */
static bool add_grad_outputs(Graph *dst, const Graph *src, const int *grad, Err *e)
{
    Builder b = builder_make(dst, e);
    for (int i = 0; i < src->nnode; i++) {
        const Node *n = &src->node[i];
        if (n->op != OP_PARAM)
            continue;
        bool buffer = param_is_buffer(n);
        char name[512];
        snprintf(name, sizeof name, "%s.%s", buffer ? "update" : "grad", node_name(n));
        int v = buffer ? buffer_slot(&b, n, grad[i]) : grad[i] >= 0 ? grad[i] : b_full(&b, 0, &n->type);
        if (b_output(&b, v, name) < 0)
            return false;
    }
    return err_ok(e);
}

Graph *autodiff(const Graph *src, const char *loss_name, Err *e)
{
    Graph *g = pass_decompose_for_grad(src, e);
    int loss = g ? find_loss(g, loss_name, e) : -1;
    bool *need = loss >= 0 ? needs_grad(g) : NULL;
    int *grad = need ? malloc((size_t)g->nnode * sizeof *grad + 1) : NULL;
    Rewrite rw;
    bool ok = grad && rewrite_begin(&rw, g, e);
    Graph *out = NULL;
    if (ok) {
        for (int i = 0; i < g->nnode && err_ok(e); i++)
            rewrite_copy(&rw, i), grad[i] = param_is_buffer(&g->node[i]) ? rw.map[i] : -1;
        rewrite_at(&rw, loss);
        grad[loss] = b_full(&rw.b, 1, &g->node[loss].type);
        for (int i = loss; i >= 0 && ok; i--)
            if (grad[i] >= 0 && need[i])
                ok = backward_node(&rw, need, grad, i, e);
        out = rewrite_end(&rw); /* NULL when a rule failed: the builder shares e */
        if (out && !add_grad_outputs(out, g, grad, e))
            graph_free(out), out = NULL;
        Graph *live = out ? pass_dce(out, e) : NULL; /* rules leave a few values unused */
        graph_free(out);
        out = live;
    }
    if (!out && err_ok(e))
        err_set(e, ERR_MEMORY, "autodiff: out of memory differentiating @%s", src->name);
    free(grad);
    free(need);
    graph_free(g);
    return out;
}

Graph *pass_autodiff(const Graph *g, Err *e) { return autodiff(g, NULL, e); }
