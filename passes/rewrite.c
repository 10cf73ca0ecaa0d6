/* rewrite.c — the one way a pass builds its result: copy nodes into a new graph
 * through the builder, remapping operand ids, keeping names, symbols and locations. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

bool rewrite_begin(Rewrite *rw, const Graph *src, Err *e)
{
    memset(rw, 0, sizeof *rw);
    rw->src = src;
    rw->dst = graph_new(src->name);
    rw->map = malloc(sizeof(int) * (size_t)(src->nnode ? src->nnode : 1));
    if (!rw->dst || !rw->map) {
        graph_free(rw->dst);
        free(rw->map);
        rw->dst = NULL;
        rw->map = NULL;
        err_set(e, ERR_MEMORY, "out of memory starting a pass on graph '%s'", src->name);
        return false;
    }
    for (int i = 0; i < src->nnode; i++)
        rw->map[i] = -1;
    /* Same symbols in the same order: a Dim's bitmask means the same in both graphs. */
    for (int s = 0; s < src->nsym; s++)
        graph_sym(rw->dst, src->sym[s], strlen(src->sym[s]));
    rw->b = builder_make(rw->dst, e);
    return true;
}

void rewrite_at(Rewrite *rw, int id)
{
    Loc loc = rw->src->node[id].loc;
    if (loc.file && loc.file != rw->file_src) {
        rw->file_src = loc.file;
        rw->file_dst = arena_strdup(rw->dst->arena, loc.file);
    }
    rw->b.loc = (Loc){loc.file ? rw->file_dst : NULL, loc.line, loc.col};
}

int rewrite_copy_with(Rewrite *rw, int id, const int *in)
{
    const Node *n = &rw->src->node[id];
    const OpInfo *op = &op_info[n->op];
    rewrite_at(rw, id);
    int r = b_op(&rw->b, n->op, in, n->nin, n->attr, op->nattr,
                 (op->flags & OPF_TYPED) ? &n->type : NULL);
    rw->map[id] = r;
    return r;
}

int rewrite_copy(Rewrite *rw, int id)
{
    const Node *n = &rw->src->node[id];
    int in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = rewrite_in(rw, id, j);
    return rewrite_copy_with(rw, id, in);
}

/* The signature: the copies of src's inputs, in src's order. */
static bool copy_inputs(Rewrite *rw)
{
    const Graph *src = rw->src;
    Graph *dst = rw->dst;
    if (src->ninput == 0)
        return true;
    dst->input = malloc(sizeof(int) * (size_t)src->ninput);
    if (!dst->input) {
        err_set(rw->b.err, ERR_MEMORY, "out of memory finishing graph '%s'", src->name);
        return false;
    }
    dst->cap_input = src->ninput;
    for (int i = 0; i < src->ninput; i++) {
        int id = rw->map[src->input[i]];
        if (id < 0 || dst->node[id].op != OP_INPUT) {
            err_set(rw->b.err, ERR_INPUT, "internal error: a pass dropped input '%s'",
                    node_name(&src->node[src->input[i]]));
            return false;
        }
        dst->input[dst->ninput++] = id;
    }
    return true;
}

static bool copy_outputs(Rewrite *rw)
{
    const Graph *src = rw->src;
    for (int i = 0; i < src->noutput; i++) {
        int id = rw->map[src->output[i]];
        if (id < 0) {
            err_set(rw->b.err, ERR_INPUT, "internal error: a pass dropped output '%s'",
                    src->output_name[i]);
            return false;
        }
        if (b_output(&rw->b, id, src->output_name[i]) < 0)
            return false;
    }
    return true;
}

Graph *rewrite_end(Rewrite *rw)
{
    bool ok = err_ok(rw->b.err) && copy_inputs(rw) && copy_outputs(rw);
    free(rw->map);
    rw->map = NULL;
    if (!ok) {
        graph_free(rw->dst);
        rw->dst = NULL;
    }
    return rw->dst;
}

Graph *graph_copy(const Graph *g, Err *e)
{
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++)
        rewrite_copy(&rw, i);
    return rewrite_end(&rw);
}
