/* signature.c — what every runner of a graph checks and allocates at its boundary: the
 * parameters against their declared types, the outputs at the bound sizes. (Inputs bind
 * the symbols: bind_inputs, in interp.c.) */
#include <stdlib.h>

#include "ir.h"

bool check_param_tensors(const Graph *g, const Tensor *params, const SymBind *sb, Err *e)
{
    int nparam = graph_params(g, NULL);
    int *ids = malloc(((size_t)nparam + 1) * sizeof *ids);
    if (!ids) {
        err_set(e, ERR_INPUT, "out of memory checking %d parameters", nparam);
        return false;
    }
    graph_params(g, ids);
    bool ok = true;
    for (int i = 0; ok && i < nparam; i++) {
        const Node *n = &g->node[ids[i]];
        int64_t dims[COIL_MAX_RANK];
        ok = type_resolve(&n->type, sb, dims) && params[i].dt == n->type.dt &&
             params[i].rank == n->type.rank && (params[i].data || tensor_numel(&params[i]) == 0);
        for (int d = 0; ok && d < n->type.rank; d++)
            ok = params[i].shape[d] == dims[d];
        if (!ok) {
            char tw[256], tg[256];
            err_set(e, ERR_INPUT, "parameter '%s': expected %s, got %s", node_name(n),
                    type_fmt(g, &n->type, tw, sizeof tw), tensor_fmt(&params[i], tg, sizeof tg));
        }
    }
    free(ids);
    return ok;
}

/* A tensor the caller kept from the last run, of this dtype and shape: written again in
 * place (a training loop's gradients: no fresh pages to fault in every step). */
static bool reusable(const Tensor *t, const Type *want, const int64_t *dims)
{
    if (!t->data || t->dt != want->dt || t->rank != want->rank)
        return false;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] != dims[d])
            return false;
    return true;
}

static bool alloc_outputs(const Graph *g, const SymBind *sb, Tensor *outputs, bool reuse, Err *e)
{
    for (int i = 0; i < g->noutput; i++) {
        const Type *t = &g->node[g->output[i]].type;
        int64_t dims[COIL_MAX_RANK];
        bool resolved = type_resolve(t, sb, dims);
        if (reuse && resolved && reusable(&outputs[i], t, dims))
            continue;
        if (!resolved || !tensor_alloc(&outputs[i], t->dt, t->rank, dims, e)) {
            err_set(e, ERR_INPUT, "output '%s': cannot allocate it at these sizes",
                    g->output_name[i]);
            for (int j = 0; j < i; j++)
                tensor_free(&outputs[j]);
            return false;
        }
    }
    return true;
}

bool alloc_output_tensors(const Graph *g, const SymBind *sb, Tensor *outputs, Err *e)
{
    return alloc_outputs(g, sb, outputs, false, e);
}

bool reuse_output_tensors(const Graph *g, const SymBind *sb, Tensor *outputs, Err *e)
{
    return alloc_outputs(g, sb, outputs, true, e);
}
