/* train.c — the C API's trainer (include/coil/coil.h): train/'s run held between steps
 * (train_open, train_step), its batches the caller's, its parameters taken from a model and
 * given back to it, its checkpoints the ones `coil train --save` writes. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "train/train.h"

struct coil_trainer {
    coil_model *model;
    TrainRun *run;
    char *loss;        /* the options' strings the run keeps */
    int ninput, accum; /* a micro-batch's tensors (the joint graph's inputs less
                          loss_scale, which the run fills), micro-batches a step */
    int *input_at;     /* step input i is the joint graph's input input_at[i] */
    char **type;       /* step input i's type as text */
    int *param_at;     /* model parameter i is the run's parameter param_at[i] (-1: the
                          loss does not use it, so training leaves it as it is) */
    Tensor *batch;     /* one step's inputs as views, in the joint graph's order */
};

/* ---------------------------------------------------------------- options */

void coil_train_defaults_into(const char *optimizer, coil_train_options *out, size_t size)
{
    coil_train_options o = coil_train_defaults(optimizer);
    if (!out)
        return;
    memcpy(out, &o, size < sizeof o ? size : sizeof o);
    if (size > sizeof o) /* a newer header's fields: zero, their defaults */
        memset((char *)out + sizeof o, 0, size - sizeof o);
}

coil_train_options coil_train_defaults(const char *optimizer)
{
    bool lion = optimizer && strcmp(optimizer, "lion") == 0;
    return (coil_train_options){
        .optimizer = optimizer ? optimizer : "adamw", .lr = 3e-4, .min_lr = 3e-5,
        .weight_decay = 0.1, .beta1 = 0.9, .beta2 = lion ? 0.99 : 0.95, .eps = 1e-8,
        .momentum = 0.9, .clip = 1.0, .accum = 1};
}

/* The real-valued options: finite, within [min, max). */
static const struct {
    const char *name;
    size_t at;
    double min, max;
} reals[] = {
    {"lr", offsetof(coil_train_options, lr), 0, INFINITY},
    {"min_lr", offsetof(coil_train_options, min_lr), 0, INFINITY},
    {"weight_decay", offsetof(coil_train_options, weight_decay), 0, INFINITY},
    {"beta1", offsetof(coil_train_options, beta1), 0, 1},
    {"beta2", offsetof(coil_train_options, beta2), 0, 1},
    {"eps", offsetof(coil_train_options, eps), 0, INFINITY},
    {"momentum", offsetof(coil_train_options, momentum), 0, INFINITY},
    {"clip", offsetof(coil_train_options, clip), 0, INFINITY},
};

static bool reals_ok(const coil_train_options *o, coil_error *err)
{
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = *(const double *)((const char *)o + reals[i].at);
        if (!(v >= reals[i].min && v < reals[i].max))
            return api_fail(err, COIL_ERR_USAGE, "coil_train_options: %s = %g: expected a finite "
                            "number from %g%s", reals[i].name, v, reals[i].min,
                            isinf(reals[i].max) ? " up" : " up to, not including, 1");
    }
    return true;
}

/* Every option checked; the optimizer's kind and the precision's dtype parsed. */
static bool options_ok(const coil_train_options *o, OptKind *kind, DType *precision,
                       coil_error *err)
{
    *precision = DT_F32;
    if (o->lr == 0)
        return api_fail(err, COIL_ERR_USAGE, "coil_train_options: lr = 0 trains nothing: start "
                        "from coil_train_defaults() (a zeroed struct has lr 0) and set lr");
    if (!o->optimizer || !optim_parse(o->optimizer, kind))
        return api_fail(err, COIL_ERR_USAGE, "coil_train_options: optimizer '%s': expected "
                        "adamw, sgd or lion", o->optimizer ? o->optimizer : "(null)");
    if (o->accum < 1 || o->warmup < 0 || o->cosine_steps < 0)
        return api_fail(err, COIL_ERR_USAGE, "coil_train_options: %s is %lld: expected %s",
                        o->accum < 1 ? "accum" : o->warmup < 0 ? "warmup" : "cosine_steps",
                        (long long)(o->accum < 1 ? o->accum : o->warmup < 0 ? o->warmup
                                                                             : o->cosine_steps),
                        o->accum < 1 ? "1 or more" : "0 or more");
    if (o->loss && strcmp(o->loss, "cross_entropy") != 0)
        return api_fail(err, COIL_ERR_USAGE, "coil_train_options: loss '%s': expected NULL (the "
                        "model's output \"loss\") or \"cross_entropy\"", o->loss);
    if (o->precision && !precision_parse(o->precision, precision))
        return api_fail(err, COIL_ERR_USAGE, "coil_train_options: precision '%s': expected f32, "
                        "bf16 or f16", o->precision);
    return reals_ok(o, err);
}

/* coil train's TrainOptions for these options (parsed by options_ok). */
static TrainOptions train_options(const coil_model *m, const coil_train_options *o, OptKind kind,
                                  DType precision, const char *loss)
{
    CompileOptions co = api_compile_options(m);
    return (TrainOptions){
        .precision = precision, .loss = loss, .accum = o->accum, .seed = o->seed,
        .opt = {kind, o->beta1, o->beta2, o->eps, kind == OPT_SGD ? o->momentum : 0,
                o->weight_decay, o->clip, m->threads, NULL, 0},
        .lr = {o->lr, o->min_lr, o->warmup, o->cosine_steps},
        .compile = co};
}

/* ---------------------------------------------------------------- the trainer */

void coil_trainer_free(coil_trainer *tr)
{
    if (!tr)
        return;
    train_close(tr->run);
    for (int i = 0; tr->type && i < tr->ninput; i++)
        free(tr->type[i]);
    free(tr->type), free(tr->input_at), free(tr->param_at), free(tr->batch), free(tr->loss);
    free(tr);
}

/* What a step takes: the joint graph's inputs but loss_scale (train_loop.c fills the first
 * input of that name), with their types as text. */
static bool signature(coil_trainer *tr, coil_error *err)
{
    const Graph *g = train_graph(tr->run);
    int scale = -1;
    for (int i = 0; i < g->ninput && scale < 0; i++)
        if (strcmp(node_name(&g->node[g->input[i]]), "loss_scale") == 0)
            scale = i;
    tr->ninput = g->ninput - (scale >= 0);
    tr->input_at = calloc((size_t)tr->ninput + 1, sizeof *tr->input_at);
    tr->type = calloc((size_t)tr->ninput + 1, sizeof *tr->type);
    tr->batch = calloc((size_t)tr->ninput * (size_t)tr->accum + 1, sizeof *tr->batch);
    if (!tr->input_at || !tr->type || !tr->batch)
        return api_fail(err, COIL_ERR_MEMORY, "coil_trainer_new: out of memory");
    for (int i = 0, k = 0; i < g->ninput; i++) {
        char ty[256];
        if (i == scale)
            continue;
        tr->input_at[k] = i;
        if (!(tr->type[k++] = strdup(type_fmt(g, &g->node[g->input[i]].type, ty, sizeof ty))))
            return api_fail(err, COIL_ERR_MEMORY, "coil_trainer_new: out of memory");
    }
    return true;
}

/* The run's parameters and kept buffers (train_params) start from the model's values, by
 * name; param_at[i]: model parameter i's place among them (-1: the run has none). */
static bool params_from_model(coil_trainer *tr, coil_error *err)
{
    const coil_model *m = tr->model;
    int nrun;
    const char *const *names = train_param_names(tr->run, &nrun);
    Err e = {0};
    Tensor *run = train_params(tr->run, &e);
    tr->param_at = calloc((size_t)m->count[COIL_PARAM] + 1, sizeof *tr->param_at);
    bool ok = run || api_fail_err(err, &e);
    if (ok && !tr->param_at)
        ok = api_fail(err, COIL_ERR_MEMORY, "coil_trainer_new: out of memory");
    for (int i = 0; ok && i < m->count[COIL_PARAM]; i++) {
        const char *name = m->info[COIL_PARAM][i].name;
        tr->param_at[i] = -1;
        for (int j = 0; j < nrun && tr->param_at[i] < 0; j++)
            if (strcmp(names[j], name) == 0)
                tr->param_at[i] = j;
        if (tr->param_at[i] < 0)
            continue;
        Tensor *dst = &run[tr->param_at[i]];
        const Tensor *src = &m->params[i];
        char got[128], want[128];
        bool alike = src->dt == dst->dt && src->rank == dst->rank &&
                     memcmp(src->shape, dst->shape, (size_t)src->rank * sizeof *src->shape) == 0;
        if (!alike)
            ok = api_fail(err, COIL_ERR_SHAPE, "parameter '%s': the model's is %s, the training "
                          "graph's %s (its symbolic sizes differ)", name,
                          tensor_fmt(src, got, sizeof got), tensor_fmt(dst, want, sizeof want));
        else
            memcpy(dst->data, src->data, tensor_nbytes(dst));
    }
    if (ok)
        train_params_changed(tr->run);
    return ok;
}

/* Without a loss option the model must have an output "loss". */
static bool loss_ok(const coil_model *m, const char *loss, coil_error *err)
{
    char names[512];
    if (loss || coil_find(m, COIL_OUTPUT, "loss") >= 0)
        return true;
    return api_fail(err, COIL_ERR_USAGE, "coil_trainer_new: model @%s has no output named "
                    "\"loss\" (its outputs: %s): give it one, or set coil_train_options.loss to "
                    "\"cross_entropy\" to train its first output against targets", m->g->name,
                    api_name_list(m, COIL_OUTPUT, names, sizeof names));
}

coil_trainer *coil_trainer_new(coil_model *model, const coil_train_options *opt, coil_error *err)
{
    return coil_trainer_new_sized(model, opt, err, sizeof *opt);
}

coil_trainer *coil_trainer_new_sized(coil_model *model, const coil_train_options *given,
                                     coil_error *err, size_t size)
{
    coil_train_options sized;
    api_err_clear(err);
    if (!api_sized(given, size, &sized, sizeof sized, "coil_trainer_new", "coil_train_options", err))
        return NULL;
    const coil_train_options *opt = given ? &sized : NULL;
    if (!model) {
        api_fail(err, COIL_ERR_USAGE, "coil_trainer_new: the model is NULL");
        return NULL;
    }
    coil_train_options o = opt ? *opt : coil_train_defaults(NULL);
    OptKind kind;
    DType precision;
    if (!options_ok(&o, &kind, &precision, err) || !loss_ok(model, o.loss, err) ||
        !api_check_params(model, "coil_trainer_new", err))
        return NULL;
    coil_trainer *tr = calloc(1, sizeof *tr);
    if (!tr || (o.loss && !(tr->loss = strdup(o.loss)))) {
        free(tr);
        api_fail(err, COIL_ERR_MEMORY, "coil_trainer_new: out of memory");
        return NULL;
    }
    tr->model = model, tr->accum = o.accum;
    TrainOptions to = train_options(model, &o, kind, precision, tr->loss);
    Err e = {0};
    if (!(tr->run = train_open(model->g, &to, &e)))
        api_fail_err(err, &e);
    if (tr->run && signature(tr, err) && params_from_model(tr, err))
        return tr;
    coil_trainer_free(tr);
    return NULL;
}

int coil_trainer_ninputs(const coil_trainer *tr) { return tr ? tr->ninput : 0; }

const char *coil_trainer_input(const coil_trainer *tr, int index, const char **type)
{
    bool in = tr && index >= 0 && index < tr->ninput;
    const Graph *g = in ? train_graph(tr->run) : NULL;
    if (type)
        *type = in ? tr->type[index] : NULL;
    return in ? node_name(&g->node[g->input[tr->input_at[index]]]) : NULL;
}

int64_t coil_trainer_steps(const coil_trainer *tr) { return tr ? train_steps_done(tr->run) : 0; }

/* ---------------------------------------------------------------- steps */

/* "x: f32[B,3], targets: i64[B]": a micro-batch's inputs, for messages. */
static const char *input_list(const coil_trainer *tr, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < tr->ninput && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s: %s", i ? ", " : "",
                                 coil_trainer_input(tr, i, NULL), tr->type[i]);
    return buf;
}

/* order[k]: the step input names[k] gives (each once); identity without names. */
static bool input_order(const coil_trainer *tr, const char *const *names, int *order,
                        coil_error *err)
{
    char list[512];
    for (int k = 0; k < tr->ninput; k++) {
        order[k] = names ? -1 : k;
        for (int i = 0; names && names[k] && i < tr->ninput && order[k] < 0; i++)
            if (strcmp(names[k], coil_trainer_input(tr, i, NULL)) == 0)
                order[k] = i;
        if (order[k] < 0)
            return api_fail(err, COIL_ERR_USAGE, "coil_train_step: names[%d] is '%s', which is "
                            "no input of the trainer (%s)", k, names[k] ? names[k] : "(null)",
                            input_list(tr, list, sizeof list));
        for (int j = 0; j < k; j++)
            if (order[j] == order[k])
                return api_fail(err, COIL_ERR_USAGE, "coil_train_step: names[%d] and names[%d] "
                                "are both '%s'", j, k, names[k]);
    }
    return true;
}

/* A micro-batch's symbols (B, T) the same in every input that has them. */
static bool sizes_agree(const coil_trainer *tr, const Tensor *views, coil_error *err)
{
    const Graph *g = train_graph(tr->run);
    Tensor *all = calloc((size_t)g->ninput + 1, sizeof *all);
    static float scale; /* loss_scale's, which the run fills */
    SymBind sb;
    Err e = {0};
    if (!all)
        return api_fail(err, COIL_ERR_MEMORY, "coil_train_step: out of memory");
    for (int i = 0; i < g->ninput; i++)
        all[i] = (Tensor){.dt = DT_F32, .data = &scale};
    for (int k = 0; k < tr->ninput; k++)
        all[tr->input_at[k]] = views[k];
    bool ok = bind_inputs(g, all, &sb, &e);
    free(all);
    return ok || api_fail(err, COIL_ERR_SHAPE, "%s", e.msg);
}

/* inputs as views in the joint graph's order, each checked against its input's type, the
 * sizes of each micro-batch's symbols agreeing. */
static bool batch_views(coil_trainer *tr, const coil_tensor *inputs, const int *order,
                        coil_error *err)
{
    const Graph *g = train_graph(tr->run);
    for (int m = 0; m < tr->accum; m++) {
        Tensor *views = tr->batch + m * tr->ninput;
        const coil_tensor *given = inputs + m * tr->ninput;
        for (int k = 0; k < tr->ninput; k++) {
            int i = order[k];
            const char *name = coil_trainer_input(tr, i, NULL);
            if (!api_tensor_view(&given[k], "input", name, &views[i], err) ||
                !api_check_type(g, &g->node[g->input[tr->input_at[i]]].type, &views[i], "input",
                                name, err))
                return false;
        }
        if (!sizes_agree(tr, views, err))
            return false;
    }
    return true;
}

bool coil_train_step(coil_trainer *tr, const coil_tensor *inputs, int ninputs,
                     const char *const *names, double *loss, coil_error *err)
{
    char list[512];
    api_err_clear(err);
    if (!tr)
        return api_fail(err, COIL_ERR_USAGE, "coil_train_step: the trainer is NULL");
    if (ninputs != tr->ninput * tr->accum || (ninputs > 0 && !inputs))
        return api_fail(err, COIL_ERR_USAGE, "coil_train_step: a micro-batch is %d tensor%s (%s) "
                        "and a step sums %d micro-batch%s: give %d tensors, given %d%s",
                        tr->ninput, tr->ninput == 1 ? "" : "s", input_list(tr, list, sizeof list),
                        tr->accum, tr->accum == 1 ? "" : "es", tr->ninput * tr->accum, ninputs,
                        ninputs > 0 && !inputs ? " in a NULL array" : "");
    int *order = calloc((size_t)tr->ninput + 1, sizeof *order);
    if (!order)
        return api_fail(err, COIL_ERR_MEMORY, "coil_train_step: out of memory");
    double l = NAN;
    Err e = {0};
    bool ok = input_order(tr, names, order, err) && batch_views(tr, inputs, order, err) &&
              (train_step(tr->run, tr->batch, &l, &e) || api_fail_err(err, &e));
    free(order);
    if (ok && loss)
        *loss = l;
    return ok;
}

/* ---------------------------------------------------------------- parameters */

/* A copy of t (the caller's to free). */
static bool copy_tensor(const Tensor *t, Tensor *out, coil_error *err)
{
    Err e = {0};
    if (!tensor_alloc(out, t->dt, t->rank, t->shape, &e))
        return api_fail_err(err, &e);
    memcpy(out->data, t->data, tensor_nbytes(t));
    return true;
}

bool coil_trainer_param(coil_trainer *tr, int index, coil_tensor *out, coil_error *err)
{
    api_err_clear(err);
    if (out)
        memset(out, 0, sizeof *out);
    if (!tr || !out || index < 0 || index >= tr->model->count[COIL_PARAM])
        return api_fail(err, COIL_ERR_USAGE, "coil_trainer_param: %s", !tr ? "the trainer is NULL"
                        : !out ? "out is NULL" : "the index is out of range");
    Err e = {0};
    int at = tr->param_at[index];
    Tensor *run = at >= 0 ? train_params(tr->run, &e) : NULL;
    if (at >= 0 && !run)
        return api_fail_err(err, &e);
    Tensor copy;
    if (!copy_tensor(at >= 0 ? &run[at] : &tr->model->params[index], &copy, err))
        return false;
    *out = (coil_tensor){.dtype = (coil_dtype)copy.dt, .rank = copy.rank, .data = copy.data};
    memcpy(out->shape, copy.shape, sizeof out->shape);
    return true;
}

bool coil_trainer_sync(coil_trainer *tr, coil_error *err)
{
    api_err_clear(err);
    if (!tr)
        return api_fail(err, COIL_ERR_USAGE, "coil_trainer_sync: the trainer is NULL");
    Err e = {0};
    Tensor *run = train_params(tr->run, &e);
    if (!run)
        return api_fail_err(err, &e);
    coil_model *m = tr->model;
    for (int i = 0; i < m->count[COIL_PARAM]; i++) {
        const Tensor *t = tr->param_at[i] >= 0 ? &run[tr->param_at[i]] : NULL;
        Tensor *dst = &m->params[i], fresh;
        bool same = t && dst->data && tensor_nbytes(dst) == tensor_nbytes(t) &&
                    memcmp(dst->shape, t->shape, sizeof t->shape) == 0;
        if (same)
            memcpy(dst->data, t->data, tensor_nbytes(t));
        else if (t && !copy_tensor(t, &fresh, err)) /* the model's sizes were changed since */
            return false;
        else if (t)
            tensor_free(dst), *dst = fresh;
    }
    if (m->compiled)
        compiled_params_changed(m->compiled);
    return true;
}

/* ---------------------------------------------------------------- checkpoints */

bool coil_trainer_save(coil_trainer *tr, const char *dir, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!tr || !dir)
        return api_fail(err, COIL_ERR_USAGE, "coil_trainer_save: the %s is NULL",
                        !tr ? "trainer" : "directory");
    return train_save(tr->run, dir, &e) || api_fail_err(err, &e);
}

bool coil_trainer_resume(coil_trainer *tr, const char *dir, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!tr || !dir)
        return api_fail(err, COIL_ERR_USAGE, "coil_trainer_resume: the %s is NULL",
                        !tr ? "trainer" : "directory");
    return train_resume(tr->run, dir, &e) || api_fail_err(err, &e);
}
