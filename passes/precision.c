/* precision.c — mixed precision as autocasting: every f32 matmul, and every fused
 * attention (two matmuls around a softmax, as PyTorch's autocast runs SDPA), reads its
 * operands cast to bf16 or f16 (they accumulate in f32 on every backend) and its result
 * is cast back to f32, so they move half the bytes and run on low-precision units where a
 * device has them (the GPU's tensor-core attention), while everything else (reductions,
 * norms, softmax, the loss) stays f32. Parameters stay f32: they are the master weights
 * the optimizer updates; the casts are differentiated like any op, so gradients arrive
 * in f32. */
#include <string.h>

#include "passes/passes.h"

bool precision_parse(const char *s, DType *dt)
{
    static const struct { const char *name; DType dt; } table[] = {
        {"f32", DT_F32}, {"bf16", DT_BF16}, {"f16", DT_F16}};
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(s, table[i].name) == 0) {
            *dt = table[i].dt;
            return true;
        }
    return false;
}

Graph *pass_mixed_precision(const Graph *g, DType low, Err *e)
{
    Rewrite rw;
    if (!rewrite_begin(&rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++) {
        const Node *n = &g->node[i];
        if ((n->op != OP_MATMUL && n->op != OP_ATTENTION) || n->type.dt != DT_F32 ||
            low == DT_F32) {
            rewrite_copy(&rw, i);
            continue;
        }
        rewrite_at(&rw, i);
        int in[4];
        for (int j = 0; j < n->nin; j++)
            in[j] = b_cast(&rw.b, rewrite_in(&rw, i, j), low);
        int low_result = b_op(&rw.b, n->op, in, n->nin, n->attr, op_info[n->op].nattr, NULL);
        rw.map[i] = b_cast(&rw.b, low_result, DT_F32);
    }
    return rewrite_end(&rw);
}

/* The pass table's precision=bf16|f16 (f32 is not a choice: it would change nothing). */
Graph *pass_precision_arg(const Graph *g, const char *arg, Err *e)
{
    DType dt;
    if (!precision_parse(arg, &dt) || dt == DT_F32) {
        err_set(e, ERR_USAGE, "--passes: precision=%s: expected bf16 or f16", arg);
        return NULL;
    }
    return pass_mixed_precision(g, dt, e);
}
