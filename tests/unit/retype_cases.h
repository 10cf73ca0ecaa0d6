/* retype_cases.h — an op fixture (op_cases.h's Case) as `--dtype f16|bf16` runs it: the graph
 * through pass_retype, its f32 inputs and parameters rounded to the new dtype, and the
 * interpreter's outputs on the retyped graph after the standard passes, so compiled code on
 * any device is held to it as test_compile holds f32 code to case_load's. Shared by
 * test_retype.c and the GPU tests; static functions, each test includes it once. */
#ifndef COIL_TEST_RETYPE_CASES_H
#define COIL_TEST_RETYPE_CASES_H

#include "op_cases.h"

/* Whether any value of g has dtype dt. */
static bool graph_has_dtype(const Graph *g, DType dt)
{
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].type.dt == dt)
            return true;
    return false;
}

/* t in dtype `to` (each element rounded to nearest even) when it holds `from`, else a copy. */
static bool tensor_retyped(const Tensor *t, DType from, DType to, Tensor *out, Err *e)
{
    DType dt = t->dt == from ? to : t->dt;
    if (!tensor_alloc(out, dt, t->rank, t->shape, e))
        return false;
    for (int64_t i = 0; i < tensor_numel(t); i++)
        dtype_store(dt, out->data, i, dtype_load(t->dt, t->data, i));
    return true;
}

/* The interpreter's outputs of g after the standard passes (what compiled code runs). */
static bool interp_optimised(const Graph *g, const Tensor *in, const Tensor *params, Tensor *out,
                             Err *e)
{
    Graph *opt = graph_copy(g, e);
    bool ok = opt && run_passes(&opt, pass_pipeline, e) &&
              interp_run(opt, in, params, out, NULL, e);
    graph_free(opt);
    return ok;
}

/* c retyped from f32 to `to` into *out, which borrows c's name (case_free releases the
 * rest, even after a failure). A failure is printed and counted as a check failure. */
/* Fixtures of attention's training ops (attention_lse, attention_grad), whose log-sum-exp
 * is f32 whatever the model's dtype: autodiff makes them after any retype, and pass_retype
 * refuses a model that spells them out, naming the op, rather than change that dtype. */
static bool retype_refuses(const char *name)
{
    return strncmp(name, "attention_lse", 13) == 0 || strncmp(name, "attention_grad", 14) == 0;
}

static bool case_retype(const Case *c, DType to, Case *out)
{
    Err e = {0};
    memset(out, 0, sizeof *out);
    out->name = c->name;
    out->in = calloc((size_t)c->g->ninput + 1, sizeof *out->in);
    out->params = calloc((size_t)c->nparam + 1, sizeof *out->params);
    out->want = calloc((size_t)c->g->noutput + 1, sizeof *out->want);
    out->nparam = out->params ? c->nparam : 0;
    bool ok = out->in && out->params && out->want;
    if (ok)
        ok = (out->g = pass_retype(c->g, DT_F32, to, &e)) != NULL;
    for (int i = 0; ok && i < c->g->ninput; i++)
        ok = tensor_retyped(&c->in[i], DT_F32, to, &out->in[i], &e);
    for (int i = 0; ok && i < c->nparam; i++)
        ok = tensor_retyped(&c->params[i], DT_F32, to, &out->params[i], &e);
    ok = ok && interp_optimised(out->g, out->in, out->params, out->want, &e);
    if (!ok) {
        fprintf(stderr, "%s [retyped to %s]: %s\n", c->name, dtype_info[to].name,
                err_ok(&e) ? "out of memory" : e.msg);
        check_failures++;
    }
    return ok;
}

#endif
