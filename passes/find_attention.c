/* find_attention.c — attention written out as ops becomes the attention op. Exported
 * models (ONNX from PyTorch: BERT, ViT, GPT-2's eager attention) and hand-written ones
 * spell scaled dot-product attention as
 *     softmax(matmul(q, kt) * c [+ bias], axis=-1) @ v      (or / c, or no scale)
 * which runs as two GEMMs around a materialised T x S score tensor. Matched here (each
 * intermediate used once, the softmax over the keys, c a scalar constant, the bias adding
 * no batch elements to the scores), it is attention(q, swap(kt), v [, bias]) {scale=c}:
 * the fused kernels on both devices, no T x S buffer. A pattern that differs (another
 * user of the scores or probabilities, a mask applied with `where`) is left as it is. */
#include <math.h>
#include <stdlib.h>

#include "passes/passes.h"

/* Whether node id is a scalar constant (a `full`, or a one-element `constant`): *v. */
static bool scalar_constant(const Graph *g, int id, double *v)
{
    const Node *n = &g->node[id];
    if (n->op == OP_FULL) {
        *v = node_float(n, "value");
        return true;
    }
    if (n->op != OP_CONSTANT || n->attr[0].n != 1)
        return false;
    *v = n->attr[0].data[0];
    return true;
}

/* The parts of one match, as ids in the source graph. */
typedef struct Match {
    int q, kt, v, bias; /* bias -1: none */
    double scale;
} Match;

/* x * c, c * x or x / c with c a scalar constant, the product keeping x's type: x, and c
 * (1/c) in *scale; else `id` itself with scale 1. */
static int unscaled(const Graph *g, const int *uses, int id, double *scale)
{
    const Node *n = &g->node[id];
    double c;
    *scale = 1;
    if ((n->op != OP_MUL && n->op != OP_DIV) || uses[id] != 1)
        return id;
    for (int side = 0; side < (n->op == OP_MUL ? 2 : 1); side++) {
        int x = n->in[side], other = n->in[1 - side];
        if (scalar_constant(g, other, &c) && c != 0 && isfinite(c) &&
            type_eq(&g->node[x].type, &n->type)) {
            *scale = n->op == OP_MUL ? c : 1 / c;
            return x;
        }
    }
    return id;
}

/* scores [* or / c] -> the matmul under them, when it is one used only here: its id. */
static int scores_product(const Graph *g, const int *uses, int id, double *scale)
{
    int raw = unscaled(g, uses, id, scale);
    return g->node[raw].op == OP_MATMUL && uses[raw] == 1 ? raw : -1;
}

/* Whether attention(q, swap(kt), v [, bias]) {scale} types as node pv does: the op's own
 * inference, quietly (a shape it does not take is no match, not an error). */
static bool types_fit(const Graph *g, const Match *m, const Type *want)
{
    Type in[4] = {g->node[m->q].type, g->node[m->kt].type, g->node[m->v].type};
    Type *k = &in[1];
    if (in[0].rank < 2 || k->rank < 2 || in[2].rank < 2)
        return false;
    Dim last = k->dim[k->rank - 1];
    k->dim[k->rank - 1] = k->dim[k->rank - 2], k->dim[k->rank - 2] = last;
    if (m->bias >= 0)
        in[3] = g->node[m->bias].type;
    Attr attrs[2] = {attr_bool("causal", false), attr_float("scale", m->scale)};
    Node n = {.op = OP_ATTENTION, .nin = m->bias >= 0 ? 4 : 3, .attr = attrs};
    Type out;
    Err quiet = {0};
    return op_info[OP_ATTENTION].infer(g, &n, in, &out, &quiet) && type_eq(&out, want);
}

/* Node i as softmax(q kt [* c] [+ bias]) v: the match. The scores are the softmax's
 * operand, or one side of an add whose other side is the bias. */
static bool match_attention(const Graph *g, const int *uses, int i, Match *m)
{
    const Node *pv = &g->node[i];
    if (pv->op != OP_MATMUL || !dtype_info[pv->type.dt].is_float)
        return false;
    const Node *sm = &g->node[pv->in[0]];
    if (sm->op != OP_SOFTMAX || uses[pv->in[0]] != 1 ||
        (node_int(sm, "axis") != -1 && node_int(sm, "axis") != sm->type.rank - 1))
        return false;
    int s = sm->in[0], raw = scores_product(g, uses, s, &m->scale);
    m->bias = -1;
    const Node *add = &g->node[s];
    for (int side = 0; raw < 0 && add->op == OP_ADD && uses[s] == 1 && side < 2; side++) {
        raw = scores_product(g, uses, add->in[side], &m->scale);
        m->bias = raw >= 0 && type_eq(&g->node[add->in[side]].type, &add->type)
                      ? add->in[1 - side] : -1;
        raw = m->bias >= 0 ? raw : -1;
    }
    if (raw < 0)
        return false;
    m->q = g->node[raw].in[0], m->kt = g->node[raw].in[1], m->v = pv->in[1];
    return types_fit(g, m, &pv->type);
}

/* The attention op for a match; -1 (and e set) when it does not type. */
static int build(Rewrite *rw, const Match *m)
{
    int in[4] = {rw->map[m->q], b_swap_last(&rw->b, rw->map[m->kt]), rw->map[m->v],
                 m->bias >= 0 ? rw->map[m->bias] : -1};
    Attr scale = attr_float("scale", m->scale);
    return b_op(&rw->b, OP_ATTENTION, in, m->bias >= 0 ? 4 : 3, &scale, 1, NULL);
}

/* How many operand slots and outputs read each node. */
static int *count_uses(const Graph *g, Err *e)
{
    int *uses = calloc((size_t)g->nnode + 1, sizeof *uses);
    if (!uses) {
        err_set(e, ERR_MEMORY, "find_attention: out of memory for %d nodes", g->nnode);
        return NULL;
    }
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            uses[g->node[i].in[j]]++;
    for (int o = 0; o < g->noutput; o++)
        uses[g->output[o]]++;
    return uses;
}

Graph *pass_find_attention(const Graph *g, Err *e)
{
    int *uses = count_uses(g, e);
    Rewrite rw;
    if (!uses || !rewrite_begin(&rw, g, e)) {
        free(uses);
        return NULL;
    }
    for (int i = 0; i < g->nnode && err_ok(e); i++) {
        Match m;
        if (!match_attention(g, uses, i, &m)) {
            rewrite_copy(&rw, i);
            continue;
        }
        rewrite_at(&rw, i);
        rw.map[i] = build(&rw, &m);
    }
    free(uses);
    return rewrite_end(&rw);
}
