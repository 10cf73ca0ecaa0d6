/* api.c — the public C API (include/coil/coil.h) over the loaders, the verifier, the
 * initialisers, safetensors and the reference interpreter. A model is a verified graph,
 * its signature as coil_info (strings in the graph's arena) and its parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "base/version.h"
#include "coil/coil.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#ifdef COIL_HAVE_FRONTEND
#include "frontend/to_graph.h"
#endif
#include "io/package.h"
#include "io/safetensors.h"
#include "pipeline/pipeline.h"
#include "runtime/device.h"
#include "runtime/init.h"

_Static_assert(COIL_F32 == (int)DT_F32 && COIL_F16 == (int)DT_F16 && COIL_BF16 == (int)DT_BF16 &&
                   COIL_I8 == (int)DT_I8 && COIL_I32 == (int)DT_I32 && COIL_I64 == (int)DT_I64 &&
                   COIL_BOOL == (int)DT_BOOL && DT_COUNT == 7,
               "coil_dtype mirrors DType");
_Static_assert((int)COIL_OK == (int)ERR_OK && (int)COIL_ERR_INPUT == (int)ERR_INPUT &&
                   (int)COIL_ERR_USAGE == (int)ERR_USAGE,
               "coil_error codes mirror Err's");

/* Parameter values changed: a GPU engine uploads them again at the next run (it cannot
 * tell new values from the old by their address alone: memory is reused). */
static void params_changed(coil_model *m)
{
    if (m->compiled)
        compiled_params_changed(m->compiled);
}

const char *coil_version(void) { return COIL_VERSION_TEXT; }

/* ---------------------------------------------------------------- tensors */

const char *coil_dtype_name(coil_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < DT_COUNT ? dtype_info[dtype].name : NULL;
}

size_t coil_dtype_size(coil_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < DT_COUNT ? (size_t)dtype_info[dtype].size : 0;
}

int64_t coil_tensor_numel(const coil_tensor *t)
{
    if (!t || t->rank < 0 || t->rank > COIL_MAX_RANK)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] < 0 || __builtin_mul_overflow(n, t->shape[d], &n))
            return -1;
    return n;
}

void coil_tensor_free(coil_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* Checked elsewhere against the model: here only that t describes some tensor at all. */
bool api_tensor_view(const coil_tensor *t, const char *what, const char *name, Tensor *out,
                     coil_error *err)
{
    static char empty; /* data of a view with no elements */
    int64_t n = coil_tensor_numel(t);
    size_t size = coil_dtype_size(t->dtype);
    if (!size)
        return api_fail(err, COIL_ERR_USAGE, "%s '%s': dtype %d is not a coil_dtype", what, name,
                    (int)t->dtype);
    if (t->rank < 0 || t->rank > COIL_MAX_RANK)
        return api_fail(err, COIL_ERR_USAGE, "%s '%s': rank %d is out of range (0..%d)", what, name,
                    t->rank, COIL_MAX_RANK);
    if (n < 0 || (uint64_t)n > SIZE_MAX / 8)
        return api_fail(err, COIL_ERR_USAGE, "%s '%s': the shape has a negative size or too many "
                    "elements", what, name);
    if (!t->data && n > 0)
        return api_fail(err, COIL_ERR_USAGE, "%s '%s': data is NULL but the tensor has %lld elements",
                    what, name, (long long)n);
    *out = (Tensor){.dt = (DType)t->dtype, .rank = t->rank, .data = t->data ? t->data : &empty};
    memcpy(out->shape, t->shape, sizeof out->shape);
    return true;
}

/* The dtype, rank and static dims of t must be want's; symbolic dims bind when it runs. */
bool api_check_type(const Graph *g, const Type *want, const Tensor *t, const char *what,
                    const char *name, coil_error *err)
{
    bool same_kind = t->dt == want->dt && t->rank == want->rank;
    int bad = -1;
    for (int d = 0; same_kind && bad < 0 && d < t->rank; d++)
        if (dim_is_static(want->dim[d]) && want->dim[d].k != t->shape[d])
            bad = d;
    if (same_kind && bad < 0)
        return true;
    char tw[256], tg[256], which[64] = "";
    if (bad >= 0)
        snprintf(which, sizeof which, " (dimension %d disagrees)", bad);
    return api_fail(err, COIL_ERR_SHAPE, "%s '%s': expected %s, got %s%s", what, name,
                type_fmt(g, want, tw, sizeof tw), tensor_fmt(t, tg, sizeof tg), which);
}

/* ---------------------------------------------------------------- the model */

static void info_fill(Graph *g, coil_info *in, const char *name, const Type *t, const char *init)
{
    char buf[512];
    in->name = name;
    in->type = arena_strdup(g->arena, type_fmt(g, t, buf, sizeof buf));
    in->dtype = (coil_dtype)t->dt;
    in->rank = t->rank;
    for (int d = 0; d < t->rank; d++) {
        in->shape[d] = dim_is_static(t->dim[d]) ? t->dim[d].k : -1;
        in->dim[d] = arena_strdup(g->arena, dim_fmt(g, t->dim[d], buf, sizeof buf));
    }
    in->init = init;
    in->buffer = false;
}

static void signature_fill(coil_model *m)
{
    Graph *g = m->g;
    int np = graph_params(g, NULL);
    m->count[COIL_INPUT] = g->ninput;
    m->count[COIL_OUTPUT] = g->noutput;
    m->count[COIL_PARAM] = np;
    for (int kind = 0; kind < NKIND; kind++)
        m->info[kind] = arena_alloc(g->arena, sizeof(coil_info) * (size_t)(m->count[kind] + 1));
    for (int i = 0; i < g->ninput; i++) {
        const Node *n = &g->node[g->input[i]];
        info_fill(g, &m->info[COIL_INPUT][i], node_name(n), &n->type, NULL);
    }
    for (int i = 0; i < g->noutput; i++)
        info_fill(g, &m->info[COIL_OUTPUT][i], g->output_name[i], &g->node[g->output[i]].type, NULL);
    m->param_id = arena_alloc(g->arena, sizeof(int) * (size_t)(np + 1));
    graph_params(g, m->param_id);
    for (int i = 0; i < np; i++) {
        const Node *n = &g->node[m->param_id[i]];
        info_fill(g, &m->info[COIL_PARAM][i], node_name(n), &n->type, node_str(n, "init"));
        m->info[COIL_PARAM][i].buffer = param_is_buffer(n);
    }
}

/* Take over g (freed on failure): verify it, then describe its signature. */
static coil_model *model_new(Graph *g, Err *e)
{
    bool verified = g && (ir_verify(g, e) || (model_text_fault(NULL, e), false));
    coil_model *m = verified ? calloc(1, sizeof *m) : NULL;
    if (m)
        m->params = calloc((size_t)graph_params(g, NULL) + 1, sizeof(Tensor));
    if (m && m->params) {
        m->g = g;
        signature_fill(m);
        return m;
    }
    if (g && err_ok(e))
        err_set(e, ERR_MEMORY, "out of memory loading the model");
    free(m);
    graph_free(g);
    return NULL;
}

static void params_free(Tensor *params, int n)
{
    for (int i = 0; params && i < n; i++)
        tensor_free(&params[i]);
    free(params);
}

void coil_free(coil_model *model)
{
    if (!model)
        return;
    params_free(model->params, model->count[COIL_PARAM]);
    api_model_extras_free(model);
    compiled_free(model->compiled);
    free(model->package);
    graph_free(model->g);
    free(model);
}

/* The loaders' options and the inputs fixed at load they point at. */
typedef struct LoadOptions {
    ModelOptions mo;
    ModelConstant constants[COIL_MAX_CONSTANTS];
} LoadOptions;

/* coil_options' constants as the loaders' (views of the caller's tensors). */
static bool load_constants(const coil_options *opt, LoadOptions *lo, coil_error *err)
{
    int n = opt->nconstants;
    if (n < 0 || n > COIL_MAX_CONSTANTS || (n > 0 && (!opt->constant_names || !opt->constants)))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: %d constants (at most %d) with names "
                        "%s and tensors %s", n, COIL_MAX_CONSTANTS,
                        opt->constant_names ? "set" : "NULL", opt->constants ? "set" : "NULL");
    for (int i = 0; i < n; i++) {
        const char *name = opt->constant_names[i];
        if (!name)
            return api_fail(err, COIL_ERR_USAGE, "coil_options: constant %d has no name", i);
        lo->constants[i].name = name;
        if (!api_tensor_view(&opt->constants[i], "coil_options: constant", name,
                             &lo->constants[i].value, err))
            return false;
    }
    lo->mo.constants = lo->constants, lo->mo.nconstants = n;
    return true;
}

/* The caller's options as the loaders' (checked: a NULL override would crash them). */
static bool model_options(const coil_options *opt, LoadOptions *lo, coil_error *err)
{
    ModelOptions *mo = &lo->mo;
    *mo = (ModelOptions){0};
    if (!opt)
        return true;
    if (opt->noverrides < 0 || (opt->noverrides > 0 && !opt->overrides))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: %d overrides but overrides is %s",
                    opt->noverrides, opt->overrides ? "set" : "NULL");
    for (int i = 0; i < opt->noverrides; i++) {
        const char *s = opt->overrides[i], *eq = s ? strchr(s, '=') : NULL;
        if (!eq || eq == s)
            return api_fail(err, COIL_ERR_USAGE, "coil_options: override %d is '%s', expected "
                        "name=value", i, s ? s : "(null)");
    }
    if (opt->device && !device_find(opt->device))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: device '%s', expected %s", opt->device,
                    device_names());
    if (!api_options_check(opt, err))
        return false;
    *mo = (ModelOptions){.set = opt->overrides, .nset = opt->noverrides,
                         .training = opt->training, .seed = opt->seed};
    return load_constants(opt, lo, err);
}

coil_model *api_model_from_graph(Graph *g, const coil_options *opt, Err *e, coil_error *err)
{
    coil_model *m = model_new(g, e);
    if (!m)
        api_fail_err(err, e);
    if (m)
        m->device = device_cpu();
    if (m && opt) {
        m->interpret = opt->interpret;
        m->threads = opt->threads > 0 ? opt->threads : 0;
        m->device = device_find(opt->device); /* checked by the options */
    }
    if (m && !api_options_apply(m, opt, err)) {
        coil_free(m);
        return NULL;
    }
    return m;
}

/* A package directory `coil compile` wrote: its optimised graph now (the manifest and
 * every file checked), its kernels at the first coil_run (mapped, never compiled). */
static coil_model *load_package(const char *path, const coil_options *opt, coil_error *err)
{
    Err e = {0};
    if (opt && opt->noverrides > 0) {
        api_fail(err, COIL_ERR_USAGE, "%s: a package is compiled already: config overrides are "
             "for .coil models", path);
        return NULL;
    }
    coil_model *m = api_model_from_graph(package_graph(path, &e), opt, &e, err);
    if (m && !(m->package = strdup(path))) {
        coil_free(m);
        api_fail(err, COIL_ERR_MEMORY, "out of memory loading %s", path);
        return NULL;
    }
    return m;
}

coil_model *coil_load(const char *path, const coil_options *opt, coil_error *err)
{
    return coil_load_sized(path, opt, err, sizeof *opt);
}

coil_model *coil_load_sized(const char *path, const coil_options *given, coil_error *err,
                            size_t size)
{
    LoadOptions lo;
    const ModelOptions *mo = &lo.mo;
    Err e = {0};
    coil_options o;
    api_err_clear(err);
    if (!api_sized(given, size, &o, sizeof o, "coil_load", "coil_options", err))
        return NULL;
    const coil_options *opt = given ? &o : NULL;
    if (!path) {
        api_fail(err, COIL_ERR_USAGE, "coil_load: the path is NULL");
        return NULL;
    }
    if (!model_options(opt, &lo, err))
        return NULL;
    if (package_is(path))
        return load_package(path, opt, err);
    return api_model_from_graph(model_load(path, mo, &e), opt, &e, err);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* .coil source from memory, through the frontend's text entry point. */
static Graph *compile_text(const char *name, const char *text, size_t len, const ModelOptions *mo,
                           Err *e)
{
#ifdef COIL_HAVE_FRONTEND
    FeOptions fe = {mo->set, mo->nset, mo->training, mo->seed};
    return model_text_fault(coil_frontend_compile(name, text, len, &fe, e), e);
#else
    (void)text, (void)len, (void)mo;
    err_set(e, ERR_UNSUPPORTED, "%s: this build of coil has no .coil frontend; give IR text", name);
    return NULL;
#endif
}

coil_model *coil_load_text(const char *name, const char *text, size_t len,
                           const coil_options *opt, coil_error *err)
{
    return coil_load_text_sized(name, text, len, opt, err, sizeof *opt);
}

coil_model *coil_load_text_sized(const char *name, const char *text, size_t len,
                                 const coil_options *given, coil_error *err, size_t size)
{
    LoadOptions lo;
    const ModelOptions *mo = &lo.mo;
    Err e = {0};
    coil_options o;
    api_err_clear(err);
    if (!api_sized(given, size, &o, sizeof o, "coil_load_text", "coil_options", err))
        return NULL;
    const coil_options *opt = given ? &o : NULL;
    name = name ? name : "<text>";
    if (!text && len > 0) {
        api_fail(err, COIL_ERR_USAGE, "coil_load_text: %s: the text is NULL but len is %zu", name, len);
        return NULL;
    }
    if (!model_options(opt, &lo, err))
        return NULL;
    if (mo->nconstants > 0) {
        api_fail(err, COIL_ERR_USAGE, "coil_options: input '%s' fixed at load: only an ONNX "
                 "model's inputs can be, and %s is text", mo->constants[0].name, name);
        return NULL;
    }
    if (ends_with(name, ".coil"))
        return api_model_from_graph(compile_text(name, text ? text : "", len, mo, &e), opt, &e, err);
    if (mo->nset > 0) {
        api_fail(err, COIL_ERR_INPUT, "override %s: %s is IR text, which has no config constants "
             "to set", mo->set[0], name);
        return NULL;
    }
    return api_model_from_graph(model_text_fault(ir_parse(text ? text : "", len, name, &e), &e), opt, &e, err);
}

/* ---------------------------------------------------------------- introspection */

int coil_count(const coil_model *model, coil_kind kind)
{
    return model && (int)kind >= 0 && (int)kind < NKIND ? model->count[kind] : 0;
}

const coil_info *coil_info_at(const coil_model *model, coil_kind kind, int index)
{
    if (index < 0 || index >= coil_count(model, kind))
        return NULL;
    return &model->info[kind][index];
}

int coil_find(const coil_model *model, coil_kind kind, const char *name)
{
    for (int i = 0; name && i < coil_count(model, kind); i++)
        if (strcmp(model->info[kind][i].name, name) == 0)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- parameters */

/* Install a full set of parameter values, releasing the old ones. */
static void params_replace(coil_model *m, Tensor *fresh)
{
    params_free(m->params, m->count[COIL_PARAM]);
    m->params = fresh;
    params_changed(m);
}

static Tensor *params_alloc(const coil_model *m, coil_error *err)
{
    Tensor *p = calloc((size_t)m->count[COIL_PARAM] + 1, sizeof *p);
    if (!p)
        api_fail(err, COIL_ERR_MEMORY, "out of memory allocating parameters");
    return p;
}

/* Every symbol a parameter's shape uses must have been sized. */
static bool params_sized(const coil_model *m, const SymBind *sb, coil_error *err)
{
    const Graph *g = m->g;
    for (int i = 0; i < m->count[COIL_PARAM]; i++) {
        const Node *n = &g->node[m->param_id[i]];
        for (int d = 0; d < n->type.rank; d++)
            for (int s = 0; s < g->nsym; s++)
                if ((n->type.dim[d].syms >> s & 1) && !sb->known[s]) {
                    char ty[256];
                    return api_fail(err, COIL_ERR_USAGE, "parameter '%s' has type %s: give the size "
                                "of '%s' to coil_init_params", node_name(n),
                                type_fmt(g, &n->type, ty, sizeof ty), g->sym[s]);
                }
    }
    return true;
}

bool coil_init_params(coil_model *model, uint64_t seed, const coil_dim_size *sizes, int nsizes,
                      coil_error *err)
{
    SymBind sb;
    Err e = {0};
    api_err_clear(err);
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_init_params: the model is NULL");
    if (!api_bind_sizes(model->g, "coil_init_params", sizes, nsizes, &model->dims, &sb, err) ||
        !params_sized(model, &sb, err))
        return false;
    Tensor *fresh = params_alloc(model, err);
    if (!fresh)
        return false;
    if (!init_params(model->g, &sb, seed, fresh, &e)) {
        free(fresh); /* init_params frees what it allocated */
        return api_fail_err(err, &e);
    }
    params_replace(model, fresh);
    return true;
}

bool coil_load_weights(coil_model *model, const char *path, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!model || !path)
        return api_fail(err, COIL_ERR_USAGE, "coil_load_weights: the %s is NULL",
                    !model ? "model" : "path");
    Tensor *fresh = params_alloc(model, err);
    if (!fresh)
        return false;
    if (!safetensors_bind(model->g, path, fresh, &e)) {
        params_free(fresh, model->count[COIL_PARAM]);
        return api_fail_err(err, &e);
    }
    params_replace(model, fresh);
    return true;
}

bool coil_set_param(coil_model *model, int index, const coil_tensor *value, coil_error *err)
{
    Err e = {0};
    Tensor view, copy;
    api_err_clear(err);
    const coil_info *info = coil_info_at(model, COIL_PARAM, index);
    if (!info || !value)
        return api_fail(err, COIL_ERR_USAGE, "coil_set_param: %s", !model ? "the model is NULL"
                    : !info ? "the index is out of range" : "the value is NULL");
    const Type *want = &model->g->node[model->param_id[index]].type;
    if (!api_tensor_view(value, "parameter", info->name, &view, err) ||
        !api_check_type(model->g, want, &view, "parameter", info->name, err))
        return false;
    if (!tensor_alloc(&copy, view.dt, view.rank, view.shape, &e))
        return api_fail_err(err, &e);
    memcpy(copy.data, view.data, tensor_nbytes(&copy));
    tensor_free(&model->params[index]);
    model->params[index] = copy;
    params_changed(model);
    return true;
}

/* ---------------------------------------------------------------- running */

/* "x, labels": the names of items of a kind, for messages. */
const char *api_name_list(const coil_model *m, coil_kind kind, char *buf, size_t size)
{
    size_t used = 0;
    snprintf(buf, size, "none");
    for (int i = 0; i < m->count[kind] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                                 m->info[kind][i].name);
    return buf;
}

static bool check_counts(const coil_model *m, const coil_tensor *inputs, int ninputs,
                         const coil_tensor *outputs, int noutputs, coil_error *err)
{
    char names[512];
    if (ninputs != m->count[COIL_INPUT])
        return api_fail(err, COIL_ERR_USAGE, "coil_run: model @%s takes %d inputs (%s), given %d",
                    m->g->name, m->count[COIL_INPUT],
                    api_name_list(m, COIL_INPUT, names, sizeof names), ninputs);
    if (noutputs != m->count[COIL_OUTPUT])
        return api_fail(err, COIL_ERR_USAGE, "coil_run: model @%s has %d outputs (%s), room given "
                    "for %d", m->g->name, m->count[COIL_OUTPUT],
                    api_name_list(m, COIL_OUTPUT, names, sizeof names), noutputs);
    if ((ninputs > 0 && !inputs) || (noutputs > 0 && !outputs))
        return api_fail(err, COIL_ERR_USAGE, "coil_run: the %s array is NULL",
                    ninputs > 0 && !inputs ? "inputs" : "outputs");
    return true;
}

bool api_check_params(const coil_model *m, const char *fn, coil_error *err)
{
    for (int i = 0; i < m->count[COIL_PARAM]; i++)
        if (!m->params[i].data)
            return api_fail(err, COIL_ERR_USAGE, "%s: parameter '%s' has no value: call "
                        "coil_init_params, coil_load_weights or coil_set_param first", fn,
                        m->info[COIL_PARAM][i].name);
    return true;
}

static bool input_views(const coil_model *m, const coil_tensor *inputs, Tensor *views,
                        coil_error *err)
{
    for (int i = 0; i < m->count[COIL_INPUT]; i++) {
        const char *name = m->info[COIL_INPUT][i].name;
        if (!api_tensor_view(&inputs[i], "input", name, &views[i], err) ||
            !api_check_type(m->g, &m->g->node[m->g->input[i]].type, &views[i], "input", name, err))
            return false;
    }
    return true;
}

bool api_evaluate(coil_model *m, const Tensor *inputs, Tensor *res, Err *e)
{
    if (m->interpret)
        return interp_run_at(m->g, m->rng_step, inputs, m->params, res, NULL, e);
    SymBind sb; /* max-autotune pads GEMMs for the first run's sizes, as `coil run` does */
    Err unbound = {0};
    bool sized = m->compiled || bind_inputs(m->g, inputs, &sb, &unbound);
    if (!api_ensure_compiled(m, sized && !m->compiled ? &sb : NULL, e))
        return false;
    compiled_set_rng_step(m->compiled, m->rng_step);
    bool ok = compiled_run(m->compiled, inputs, m->params, res, e);
    m->runs += ok;
    return ok;
}

/* Hand the outputs to the caller (same allocator: coil_tensor_free frees). */
static void outputs_give(const Tensor *res, coil_tensor *outputs, int n)
{
    for (int i = 0; i < n; i++) {
        outputs[i] = (coil_tensor){.dtype = (coil_dtype)res[i].dt, .rank = res[i].rank,
                                   .data = res[i].data};
        memcpy(outputs[i].shape, res[i].shape, sizeof outputs[i].shape);
    }
}

bool coil_set_rng_step(coil_model *model, uint64_t step, coil_error *err)
{
    api_err_clear(err);
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_set_rng_step: the model is NULL");
    model->rng_step = step;
    return true;
}

bool coil_run(coil_model *model, const coil_tensor *inputs, int ninputs, coil_tensor *outputs,
              int noutputs, coil_error *err)
{
    api_err_clear(err);
    for (int i = 0; outputs && i < noutputs && i < coil_count(model, COIL_OUTPUT); i++)
        memset(&outputs[i], 0, sizeof outputs[i]); /* never past what either count allows */
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_run: the model is NULL");
    if (!check_counts(model, inputs, ninputs, outputs, noutputs, err) || !api_check_params(model, "coil_run", err))
        return false;
    Tensor *views = calloc((size_t)ninputs + 1, sizeof *views);
    Tensor *res = calloc((size_t)noutputs + 1, sizeof *res);
    Err e = {0};
    bool ok = views && res;
    if (!ok)
        api_fail(err, COIL_ERR_MEMORY, "coil_run: out of memory");
    ok = ok && input_views(model, inputs, views, err);
    if (ok && !(ok = api_evaluate(model, views, res, &e)))
        api_fail_err(err, &e);
    if (ok)
        outputs_give(res, outputs, noutputs);
    free(views);
    free(res);
    return ok;
}
