/* run_named.c — coil_run_named: inputs by name in any order, a chosen subset of outputs by
 * name, each written into a buffer the caller gives (dtype and shape checked first) or
 * allocated by coil. The engine writes into the model's spare outputs, reused from run to
 * run, and the caller's buffers are filled from them. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

void api_spare_free(coil_model *m)
{
    for (int i = 0; m->spare && i < m->count[COIL_OUTPUT]; i++)
        tensor_free(&m->spare[i]);
    free(m->spare);
    m->spare = NULL;
}

/* The index of the item of `kind` each name is (names NULL: signature order); every item
 * exactly once for inputs, at most once for outputs. */
static bool match_names(const coil_model *m, coil_kind kind, const char *const *names, int n,
                        int *index, coil_error *err)
{
    const char *what = kind == COIL_INPUT ? "input" : "output";
    char list[512];
    bool *seen = calloc((size_t)m->count[kind] + 1, sizeof *seen);
    if (!seen)
        return api_fail(err, COIL_ERR_MEMORY, "coil_run_named: out of memory");
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const char *name = names ? names[i] : m->info[kind][i].name;
        index[i] = name ? coil_find(m, kind, name) : -1;
        if (index[i] < 0)
            ok = api_fail(err, COIL_ERR_USAGE, "coil_run_named: model @%s has no %s '%s' (its "
                          "%ss: %s)", m->g->name, what, name ? name : "(null)", what,
                          api_name_list(m, kind, list, sizeof list));
        else if (seen[index[i]])
            ok = api_fail(err, COIL_ERR_USAGE, "coil_run_named: %s '%s' is given twice", what,
                          name);
        else
            seen[index[i]] = true;
    }
    for (int k = 0; ok && kind == COIL_INPUT && k < m->count[kind]; k++)
        if (!seen[k])
            ok = api_fail(err, COIL_ERR_USAGE, "coil_run_named: input '%s' is missing (the "
                          "model's inputs: %s)", m->info[kind][k].name,
                          api_name_list(m, kind, list, sizeof list));
    free(seen);
    return ok;
}

static bool check_counts(const coil_model *m, const coil_tensor *inputs, int ninputs,
                         const char *const *output_names, const coil_tensor *outputs,
                         int noutputs, coil_error *err)
{
    char list[512];
    if (ninputs != m->count[COIL_INPUT])
        return api_fail(err, COIL_ERR_USAGE, "coil_run_named: model @%s takes %d inputs (%s), "
                        "given %d", m->g->name, m->count[COIL_INPUT],
                        api_name_list(m, COIL_INPUT, list, sizeof list), ninputs);
    if (noutputs < 0 || noutputs > m->count[COIL_OUTPUT] ||
        (!output_names && noutputs != m->count[COIL_OUTPUT]))
        return api_fail(err, COIL_ERR_USAGE, "coil_run_named: %d outputs asked for; model @%s "
                        "has %d (%s)%s", noutputs, m->g->name, m->count[COIL_OUTPUT],
                        api_name_list(m, COIL_OUTPUT, list, sizeof list),
                        output_names ? "" : ": without output names, room for all of them");
    if ((ninputs > 0 && !inputs) || (noutputs > 0 && !outputs))
        return api_fail(err, COIL_ERR_USAGE, "coil_run_named: the %s array is NULL",
                        ninputs > 0 && !inputs ? "inputs" : "outputs");
    return true;
}

/* The inputs in graph order, each checked against its declaration. */
static bool input_views(const coil_model *m, const coil_tensor *inputs, const int *index,
                        Tensor *views, coil_error *err)
{
    for (int i = 0; i < m->count[COIL_INPUT]; i++) {
        int k = index[i];
        const char *name = m->info[COIL_INPUT][k].name;
        if (!api_tensor_view(&inputs[i], "input", name, &views[k], err) ||
            !api_check_type(m->g, &m->g->node[m->g->input[k]].type, &views[k], "input", name,
                            err))
            return false;
    }
    return true;
}

/* A caller's buffer must hold exactly what output k is at the sizes sb. */
static bool check_buffer(const coil_model *m, int k, const SymBind *sb, const coil_tensor *t,
                         coil_error *err)
{
    const char *name = m->info[COIL_OUTPUT][k].name;
    const Type *want = &m->g->node[m->g->output[k]].type;
    Tensor view, at = {.dt = want->dt, .rank = want->rank};
    char got[256], need[256];
    if (!api_tensor_view(t, "output", name, &view, err))
        return false;
    type_resolve(want, sb, at.shape); /* bound: bind_inputs succeeded */
    bool same = view.dt == at.dt && view.rank == at.rank;
    for (int d = 0; same && d < at.rank; d++)
        same = view.shape[d] == at.shape[d];
    if (same)
        return true;
    return api_fail(err, COIL_ERR_SHAPE, "output '%s': the buffer given is %s, but at these "
                    "inputs the output is %s: give a buffer of that type, or data NULL to have "
                    "coil allocate it", name, tensor_fmt(&view, got, sizeof got),
                    tensor_fmt(&at, need, sizeof need));
}

/* The spares the evaluator writes into: an engine overwrites those of the right shape in
 * place and releases the others (reuse_output_tensors); the interpreter allocates its own,
 * so it gets none. */
static bool spares_ready(coil_model *m, coil_error *err)
{
    if (!m->spare && !(m->spare = calloc((size_t)m->count[COIL_OUTPUT] + 1, sizeof(Tensor))))
        return api_fail(err, COIL_ERR_MEMORY, "coil_run_named: out of memory");
    for (int k = 0; m->interpret && k < m->count[COIL_OUTPUT]; k++)
        tensor_free(&m->spare[k]);
    return true;
}

/* The outputs asked for, to the caller: copied into its buffers, or handed over. */
static void outputs_give(coil_model *m, const int *index, coil_tensor *outputs, int n)
{
    for (int i = 0; i < n; i++) {
        Tensor *t = &m->spare[index[i]];
        if (outputs[i].data) {
            memcpy(outputs[i].data, t->data, tensor_nbytes(t));
            continue;
        }
        outputs[i] = (coil_tensor){.dtype = (coil_dtype)t->dt, .rank = t->rank, .data = t->data};
        memcpy(outputs[i].shape, t->shape, sizeof outputs[i].shape);
        memset(t, 0, sizeof *t); /* the caller's now */
    }
}

static bool run_named(coil_model *m, const int *in_index, const coil_tensor *inputs,
                      const int *out_index, coil_tensor *outputs, int noutputs, coil_error *err)
{
    Tensor *views = calloc((size_t)m->count[COIL_INPUT] + 1, sizeof *views);
    SymBind sb;
    Err e = {0};
    bool ok = views != NULL;
    if (!ok)
        api_fail(err, COIL_ERR_MEMORY, "coil_run_named: out of memory");
    ok = ok && input_views(m, inputs, in_index, views, err);
    if (ok && !(ok = bind_inputs(m->g, views, &sb, &e)))
        api_fail_err(err, &e);
    for (int i = 0; ok && i < noutputs; i++)
        ok = !outputs[i].data || check_buffer(m, out_index[i], &sb, &outputs[i], err);
    ok = ok && api_check_params(m, "coil_run_named", err) && spares_ready(m, err);
    if (ok && !(ok = api_evaluate(m, views, m->spare, &e)))
        api_fail_err(err, &e);
    if (ok)
        outputs_give(m, out_index, outputs, noutputs);
    free(views);
    return ok;
}

bool coil_run_named(coil_model *model, const char *const *input_names,
                    const coil_tensor *inputs, int ninputs, const char *const *output_names,
                    coil_tensor *outputs, int noutputs, coil_error *err)
{
    api_err_clear(err);
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_run_named: the model is NULL");
    if (!check_counts(model, inputs, ninputs, output_names, outputs, noutputs, err))
        return false;
    int *in_index = calloc((size_t)ninputs + 1, sizeof *in_index);
    int *out_index = calloc((size_t)noutputs + 1, sizeof *out_index);
    bool ok = in_index && out_index;
    if (!ok)
        api_fail(err, COIL_ERR_MEMORY, "coil_run_named: out of memory");
    ok = ok && match_names(model, COIL_INPUT, input_names, ninputs, in_index, err) &&
         match_names(model, COIL_OUTPUT, output_names, noutputs, out_index, err) &&
         run_named(model, in_index, inputs, out_index, outputs, noutputs, err);
    free(in_index);
    free(out_index);
    return ok;
}
