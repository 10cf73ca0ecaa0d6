/* dce.c — dead code elimination: keep what the outputs depend on, plus every input
 * (the signature) and every param (the model's state dict), and renumber. */
#include <stdlib.h>

#include "passes/passes.h"

/* live[i]: node i is kept. Nodes are in topological order, so one backward sweep
 * marks every operand of a live node before the operand is visited. */
static void mark_live(const Graph *g, bool *live, bool (*keep_leaf)(const Node *))
{
    for (int i = 0; i < g->noutput; i++)
        live[g->output[i]] = true;
    for (int i = g->nnode - 1; i >= 0; i--) {
        const Node *n = &g->node[i];
        if ((n->op == OP_INPUT || n->op == OP_PARAM) && keep_leaf(n))
            live[i] = true;
        for (int j = 0; live[i] && j < n->nin; j++)
            live[n->in[j]] = true;
    }
}

static bool every_leaf(const Node *n)
{
    (void)n;
    return true;
}

Graph *pass_dce(const Graph *g, Err *e) { return pass_dce_leaves(g, every_leaf, e); }

Graph *pass_dce_leaves(const Graph *g, bool (*keep_leaf)(const Node *), Err *e)
{
    bool *live = calloc((size_t)g->nnode + 1, sizeof(bool));
    if (!live) {
        err_set(e, ERR_MEMORY, "dce: out of memory on graph '%s'", g->name);
        return NULL;
    }
    mark_live(g, live, keep_leaf);
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e)) {
        free(live);
        return NULL;
    }
    for (int i = 0; i < g->nnode && err_ok(e); i++)
        if (live[i])
            rewrite_copy(&rw, i);
    free(live);
    return rewrite_end(&rw);
}
