/* interp.c — the reference interpreter: evaluates any graph on the CPU in f64,
 * rounding every value to its node's dtype. Simple on purpose: it is the oracle
 * every backend is tested against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static bool itensor_alloc(const Graph *g, const Node *n, const SymBind *sb, ITensor *t, Err *e)
{
    memset(t, 0, sizeof *t);
    t->rank = n->type.rank;
    if (!type_resolve(&n->type, sb, t->shape)) {
        char buf[256];
        err_at(e, n->loc, "%s: cannot resolve type %s: a symbol is not bound by the inputs",
               op_info[n->op].name, type_fmt(g, &n->type, buf, sizeof buf));
        return false;
    }
    t->n = 1;
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(t->n, t->shape[i], &t->n) || t->n > (INT64_C(1) << 36)) {
            err_at(e, n->loc, "%s: result too large to interpret", op_info[n->op].name);
            return false;
        }
    t->d = calloc((size_t)(t->n ? t->n : 1), sizeof(double));
    if (!t->d) {
        err_at(e, n->loc, "%s: out of memory for %lld elements", op_info[n->op].name, (long long)t->n);
        return false;
    }
    return true;
}

static bool eval_node(const Graph *g, int id, const ITensor *in, const SymBind *sb, bool exact,
                      ITensor *out, Err *e)
{
    const Node *n = &g->node[id];
    if (!itensor_alloc(g, n, sb, out, e))
        return false;
    /* a random op reads the rng step as one operand more (EvalFn says so) */
    ITensor all[n->nin + 1];
    double step = (double)(uint64_t)sb->val[COIL_SYM_RNG_STEP];
    memcpy(all, in, (size_t)n->nin * sizeof *in);
    all[n->nin] = (ITensor){.rank = 0, .n = 1, .d = &step};
    Err ie = {0};
    if (!op_info[n->op].eval(n, all, out, &ie)) {
        err_at(e, n->loc, "%s", ie.msg);
        free(out->d);
        out->d = NULL;
        return false;
    }
    for (int64_t i = 0; !exact && i < out->n; i++)
        out->d[i] = dtype_round(n->type.dt, out->d[i]);
    return true;
}

bool interp_eval_node(const Graph *g, int id, const ITensor *in, const SymBind *sb, ITensor *out, Err *e)
{
    return eval_node(g, id, in, sb, false, out, e);
}

/* Input or param: check the host tensor against the node's type, widen to f64. */
static bool load_leaf(const Graph *g, const Node *n, const Tensor *t, const SymBind *sb, ITensor *out, Err *e)
{
    const char *what = n->op == OP_INPUT ? "input" : "parameter";
    if (!itensor_alloc(g, n, sb, out, e))
        return false;
    bool ok = t->dt == n->type.dt && t->rank == out->rank;
    for (int d = 0; ok && d < t->rank; d++)
        ok = t->shape[d] == out->shape[d];
    if (!ok || !t->data)
        return tensor_mismatch(g, what, node_name(n), &n->type, t, -1, e);
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = dtype_load(t->dt, t->data, i);
    return true;
}

static bool store_output(const ITensor *v, DType dt, Tensor *out, Err *e)
{
    if (!tensor_alloc(out, dt, v->rank, v->shape, e))
        return false;
    for (int64_t i = 0; i < v->n; i++)
        dtype_store(dt, out->data, i, v->d[i]);
    return true;
}

/* last[i]: the index of the last node reading value i (or nnode for outputs). */
static int *last_uses(const Graph *g)
{
    int *last = calloc((size_t)g->nnode + 1, sizeof(int));
    if (!last)
        return NULL;
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            last[g->node[i].in[j]] = i;
    for (int i = 0; i < g->noutput; i++)
        last[g->output[i]] = g->nnode;
    return last;
}

/* A copy of each output's values into kept[] (the caller frees each .d). */
static bool keep_outputs(const Graph *g, const ITensor *val, ITensor *kept, Err *e)
{
    for (int i = 0; i < g->noutput; i++) {
        kept[i] = val[g->output[i]];
        kept[i].d = malloc((size_t)(kept[i].n > 0 ? kept[i].n : 1) * sizeof(double));
        if (!kept[i].d) {
            while (i-- > 0)
                free(kept[i].d);
            err_set(e, ERR_MEMORY, "out of memory keeping the outputs");
            return false;
        }
        memcpy(kept[i].d, val[g->output[i]].d, (size_t)kept[i].n * sizeof(double));
    }
    return true;
}

/* The graph evaluated node by node (values rounded to their dtypes unless exact), the
 * outputs' f64 values copied into kept[]. */
static bool run_graph(const Graph *g, uint64_t step, const Tensor *inputs, const Tensor *params,
                      bool exact, ITensor *kept, double *flops, Err *e)
{
    SymBind sb;
    if (!bind_inputs(g, inputs, &sb, e))
        return false;
    sb.val[COIL_SYM_RNG_STEP] = (int64_t)step;
    ITensor *val = calloc((size_t)g->nnode + 1, sizeof(ITensor));
    int *last = last_uses(g);
    bool ok = val && last;
    int ninput = 0, nparam = 0;
    double total = 0;
    for (int i = 0; ok && i < g->nnode; i++) {
        const Node *n = &g->node[i];
        ITensor in[n->nin > 0 ? n->nin : 1];
        for (int j = 0; j < n->nin; j++)
            in[j] = val[n->in[j]];
        if (n->op == OP_INPUT)
            ok = load_leaf(g, n, &inputs[ninput++], &sb, &val[i], e);
        else if (n->op == OP_PARAM)
            ok = load_leaf(g, n, &params[nparam++], &sb, &val[i], e);
        else
            ok = eval_node(g, i, in, &sb, exact, &val[i], e);
        if (ok)
            total += op_info[n->op].flops(n, in, &val[i]);
        for (int j = 0; ok && j < n->nin; j++)
            if (last[n->in[j]] == i) {
                free(val[n->in[j]].d);
                val[n->in[j]].d = NULL;
            }
        if (ok && last[i] == 0) { /* dead value: nothing reads it */
            free(val[i].d);
            val[i].d = NULL;
        }
    }
    ok = ok && keep_outputs(g, val, kept, e);
    if (!val || !last)
        err_set(e, ERR_MEMORY, "out of memory starting the interpreter");
    for (int i = 0; val && i < g->nnode; i++)
        free(val[i].d);
    free(val);
    free(last);
    if (ok && flops)
        *flops = total;
    return ok;
}

bool interp_run(const Graph *g, const Tensor *inputs, const Tensor *params, Tensor *outputs,
                double *flops, Err *e)
{
    return interp_run_at(g, 0, inputs, params, outputs, flops, e);
}

bool interp_run_at(const Graph *g, uint64_t step, const Tensor *inputs, const Tensor *params,
                   Tensor *outputs, double *flops, Err *e)
{
    ITensor *kept = calloc((size_t)g->noutput + 1, sizeof *kept);
    bool ok = kept && run_graph(g, step, inputs, params, false, kept, flops, e);
    int done = 0;
    for (; ok && done < g->noutput; done++)
        ok = store_output(&kept[done], g->node[g->output[done]].type.dt, &outputs[done], e);
    if (!ok)
        for (int i = 0; i < done; i++)
            tensor_free(&outputs[i]);
    for (int i = 0; kept && i < g->noutput; i++)
        free(kept[i].d);
    if (!kept)
        err_set(e, ERR_MEMORY, "out of memory starting the interpreter");
    free(kept);
    return ok;
}

bool interp_run_f64(const Graph *g, const Tensor *inputs, const Tensor *params, ITensor *outputs,
                    Err *e)
{
    return run_graph(g, 0, inputs, params, true, outputs, NULL, e);
}

bool interp_run_f64_at(const Graph *g, uint64_t step, const Tensor *inputs, const Tensor *params,
                       ITensor *outputs, Err *e)
{
    return run_graph(g, step, inputs, params, true, outputs, NULL, e);
}
