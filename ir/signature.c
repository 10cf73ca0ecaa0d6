/* signature.c — what every runner of a graph checks and allocates at its boundary: the
 * inputs, whose shapes bind the symbols; the parameters against their declared types;
 * the outputs at the bound sizes. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

bool tensor_mismatch(const Graph *g, const char *what, const char *name, const Type *want,
                     const Tensor *got, int dim, Err *e)
{
    char tw[256], tg[256];
    type_fmt(g, want, tw, sizeof tw);
    tensor_fmt(got, tg, sizeof tg);
    if (dim < 0)
        err_set(e, ERR_SHAPE, "%s '%s': expected %s, got %s", what, name, tw, tg);
    else
        err_set(e, ERR_INPUT, "%s '%s': expected %s, got %s (dimension %d disagrees)", what, name,
                tw, tg, dim);
    return false;
}

/* Bind dims that are a lone symbol (B), then solve products (B*T, 2*B) with one unknown. */
static bool bind_dim(const Graph *g, SymBind *sb, Dim d, int64_t size, bool simple_pass)
{
    int unknown = -1, nunknown = 0;
    int64_t known = d.k;
    for (int s = 0; s < COIL_MAX_SYMS; s++) {
        if (!(d.syms >> s & 1))
            continue;
        if (sb->known[s])
            known *= sb->val[s];
        else
            unknown = s, nunknown++;
    }
    (void)g;
    if (nunknown == 0)
        return known == size;
    if (nunknown > 1 || (simple_pass && (d.k != 1 || __builtin_popcount(d.syms) != 1)))
        return true; /* decided in a later pass */
    if (known == 0 || size % known != 0)
        return false;
    sb->val[unknown] = size / known;
    sb->known[unknown] = true;
    return true;
}

bool bind_inputs(const Graph *g, const Tensor *inputs, SymBind *sb, Err *e)
{
    memset(sb, 0, sizeof *sb);
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < g->ninput; i++) {
            const Node *n = &g->node[g->input[i]];
            const Tensor *t = &inputs[i];
            if (t->dt != n->type.dt || t->rank != n->type.rank)
                return tensor_mismatch(g, "input", node_name(n), &n->type, t, -1, e);
            for (int d = 0; d < t->rank; d++)
                if (!bind_dim(g, sb, n->type.dim[d], t->shape[d], pass == 0))
                    return tensor_mismatch(g, "input", node_name(n), &n->type, t, d, e);
        }
    return true;
}

bool sym_same_sizes(const SymBind *a, const SymBind *b)
{
    return memcmp(a->val, b->val, COIL_MAX_SYMS * sizeof a->val[0]) == 0 &&
           memcmp(a->known, b->known, sizeof a->known) == 0;
}

bool check_param_tensors(const Graph *g, const Tensor *params, const SymBind *sb, Err *e)
{
    int nparam = graph_params(g, NULL);
    int *ids = malloc(((size_t)nparam + 1) * sizeof *ids);
    if (!ids) {
        err_set(e, ERR_MEMORY, "out of memory checking %d parameters", nparam);
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
            err_set(e, ERR_SHAPE, "parameter '%s': expected %s, got %s", node_name(n),
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
        if (reuse) /* last run's, at other sizes */
            tensor_free(&outputs[i]);
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
