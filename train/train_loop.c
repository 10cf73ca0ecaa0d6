/* train_loop.c — the training loop: graph, compile, batches, optimizer, progress (text or JSON
 * lines), data parallelism's part of a step, and a trace of the first steps (--trace);
 * checkpoints are checkpoint.c's, the C API's held runs train_run.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "io/npy.h"
#include "ir/summary.h"
#include "passes/passes.h"
#include "pipeline/training.h"
#include "runtime/cpu/peak.h"
#include "runtime/init.h"
#include "runtime/pool.h"
#include "train/run.h"

#define LOADER_DEPTH 4
/* Steps in a row whose loss (or, with no loss scale left to lower, gradient) is not finite
 * before a run is declared diverged: a lone overflow is survivable, ten are not. */
#define DIVERGED_STEPS 10

/* The process's resident set now (/proc/self/statm), 0 when unknown. */
static int64_t resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

void run_free(Run *r)
{
    for (int i = 0; r->joint && i < r->joint->ninput; i++)
        tensor_free(&r->inputs[i]);
    for (int i = 0; r->params && i < r->nparam + r->nkept; i++)
        tensor_free(&r->params[i]);
    for (int i = 0; r->accum && i < r->nparam; i++)
        tensor_free(&r->accum[i]);
    for (int i = r->nparam; r->param_name && i < r->nparam + r->nkept; i++)
        free((char *)r->param_name[i]);
    free(r->param_name);
    for (int i = 0; r->joint && r->outputs && i < r->joint->noutput; i++)
        tensor_free(&r->outputs[i]);
    free(r->inputs), free(r->params), free(r->outputs), free(r->accum), free(r->given);
    free(r->fetch);
    if (r->dev)
        r->dt->optim_free(r->dev);
    optim_free(r->opt);
    zero_free(r->zero);
    loader_free(r->loader);
    compiled_free(r->c);
    dp_free(r->dp);
    trace_free(r->trace); /* after the engine that records into it */
    graph_free(r->joint);
    safetensors_free(&r->ck);
    dir_unlock(&r->lock);
}

static int input_named(const Graph *g, const char *name)
{
    for (int i = 0; i < g->ninput; i++)
        if (strcmp(node_name(&g->node[g->input[i]]), name) == 0)
            return i;
    return -1;
}

/* The joint graph at the sizes o gives (pipeline/training.h). */
Graph *train_joint_graph(const Graph *model, const TrainOptions *o, SymBind *sb, double *flops,
                         Err *e)
{
    const Device *dev = o->compile.device ? o->compile.device : device_cpu();
    TrainingStages t = {o->loss, o->precision, o->checkpoint, o->sizes, o->nsizes, *dev->passes};
    return training_graph(model, &t, sb, flops, e);
}

/* On a device that keeps them (a GPU: runtime/device.h's DeviceTraining) the parameters,
 * gradients and optimizer state stay there: the update runs on the device, only the loss
 * comes home each micro-batch, and parameters and state cross only for checkpoints. The
 * gradients are outputs 1.. (autodiff's order). */
static bool on_device(Run *r, Err *e)
{
    r->dt = r->c->device->ops->training;
    if (!r->dt)
        return true;
    r->fetch = calloc((size_t)r->joint->noutput + 1, sizeof *r->fetch);
    if (!r->fetch) {
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    r->fetch[0] = true;
    r->dev = r->dt->optim_new(r->c->engine, r->opt, r->params, r->nparam, 1, r->o->accum > 1, e);
    return r->dev != NULL;
}

/* The device's parameters and optimizer state into the host's tensors (checkpoints). */
bool run_to_host(Run *r, Err *e)
{
    return !r->dev || (r->dt->download_params(r->c->engine, r->params, e) &&
                       r->dt->download(r->dev, r->opt, e));
}

/* The first element of t that is not finite, or -1 (integer tensors: none). */
static int64_t first_nonfinite(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    if (t->dt == DT_F32) { /* the common case, without a call per element */
        const float *x = t->data;
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(x[i]))
                return i;
        return -1;
    }
    for (int64_t i = 0; dtype_info[t->dt].is_float && i < n; i++)
        if (!isfinite(dtype_load(t->dt, t->data, i)))
            return i;
    return -1;
}

/* Every tensor finite, or an error naming the first that is not; `what` says where the
 * tensors come from and `why` what to do. */
bool run_check_finite(const Tensor *t, const char *const *names, int n, const char *what,
                      const char *why, Err *e)
{
    for (int i = 0; i < n; i++) {
        int64_t at = first_nonfinite(&t[i]);
        if (at >= 0) {
            err_set(e, ERR_INPUT, "%s: tensor '%s' holds %g at element %lld: %s", what, names[i],
                    dtype_load(t[i].dt, t[i].data, at), (long long)at, why);
            return false;
        }
    }
    return true;
}

/* --weights with a NaN or inf would make every step's loss NaN and skip every update. */
static bool weights_finite(const Run *r, Err *e)
{
    return run_check_finite(r->params, r->param_name, r->nparam, r->o->weights, "training from "
                            "it would only skip steps; give finite weights", e);
}

/* Whether graph g has a param named name. */
static bool has_param(const Graph *g, const char *name)
{
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_PARAM && strcmp(node_name(&g->node[i]), name) == 0)
            return true;
    return false;
}

/* The joint graph's param nodes, then the model's integer buffers it left out (the kept:
 * few, so looked up one by one); r->nkept and r->param_name set. NULL: out of memory. */
static const Node **list_params(Run *r, const Graph *model, Err *e)
{
    const Graph *g = r->joint;
    int nm = graph_params(model, NULL), n = r->nparam + nm + 1;
    int *ids = malloc((size_t)n * sizeof *ids);
    const Node **node = calloc((size_t)n, sizeof *node);
    bool ok = ids && node && (r->param_name = calloc((size_t)n, sizeof *r->param_name));
    if (ok)
        graph_params(g, ids);
    for (int i = 0; ok && i < r->nparam; i++)
        node[i] = &g->node[ids[i]], r->param_name[i] = node_name(node[i]);
    if (ok)
        graph_params(model, ids);
    for (int i = 0; ok && i < nm; i++) {
        const Node *p = &model->node[ids[i]];
        if (!param_is_buffer(p) || dtype_info[p->type.dt].is_float || has_param(g, node_name(p)))
            continue;
        node[r->nparam + r->nkept] = p;
        ok = (r->param_name[r->nparam + r->nkept++] = strdup(node_name(p))) != NULL;
    }
    free(ids);
    if (ok)
        return node;
    free(node);
    err_set(e, ERR_MEMORY, "out of memory");
    return NULL;
}

/* Every parameter and kept buffer from --weights, or drawn from its initializer. */
static bool load_params(Run *r, const Node *const *node, Err *e)
{
    const Graph *g = r->joint;
    if (r->o->weights)
        return safetensors_bind_nodes(g, node, r->nparam + r->nkept, r->o->weights, r->params, e) &&
               weights_finite(r, e);
    bool ok = init_params(g, &r->sb, r->o->seed, r->params, e);
    for (int i = r->nparam; ok && i < r->nparam + r->nkept; i++)
        ok = init_param(g, node[i], &r->sb, r->o->seed, &r->params[i], e);
    return ok;
}

/* Data-parallel: the gradients' buckets in the order the compiled backward finishes them
 * (each gradient's buffer's last use) and, where the engine calls back after each step,
 * their sums started as soon as that step is done. */
static bool schedule_reduction(Run *r, Err *e)
{
    if (!r->dp || r->dev)
        return true;
    const Program *p = r->c->p;
    int *final_step = malloc(((size_t)r->nparam + 1) * sizeof *final_step);
    if (!final_step) {
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    for (int i = 0; i < r->nparam; i++)
        final_step[i] = p->nstep; /* a gradient no step writes: final at the end */
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind == BUF_OUTPUT && buf->index >= 1 && buf->index <= r->nparam)
            final_step[buf->index - 1] = buf->last;
    }
    bool ok = dp_set_order(r->dp, final_step, r->nparam, e);
    free(final_step);
    r->overlap = ok && compiled_on_step(r->c, dp_step_done, r->dp);
    return ok;
}

/* The optimizer: over every parameter, or (ZeRO, with other ranks) over this rank's
 * shard of them. */
static bool make_optimizer(Run *r, Err *e)
{
    const TrainOptions *o = r->o;
    if (o->zero > 0 && r->dp)
        return (r->zero = zero_new(o->zero, r->dp, &o->opt, r->joint, r->params, r->nparam, e));
    return (r->opt = optim_new(&o->opt, r->joint, r->params, e)) != NULL;
}

/* The optimizer state, whole (ZeRO's between zero_state_gather or _open and _close). */
int run_state_count(const Run *r)
{
    return r->zero ? zero_state_count(r->zero) : optim_state_count(r->opt);
}

Tensor *run_state_at(Run *r, int i, const char **name)
{
    return r->zero ? zero_state(r->zero, i, name) : optim_state(r->opt, i, name);
}

/* The joint graph, compiled, with parameters and sizes. */
bool run_setup(Run *r, const Graph *model, Err *e)
{
    const TrainOptions *o = r->o;
    if (!(r->joint = train_joint_graph(model, o, &r->sb, &r->flops, e)))
        return false;
    const Graph *g = r->joint;
    r->nparam = graph_params(g, NULL);
    const Node **node = list_params(r, model, e);
    if (!node)
        return false;
    r->inputs = calloc((size_t)g->ninput + 1, sizeof *r->inputs);
    r->given = calloc((size_t)g->ninput + 1, sizeof *r->given);
    r->params = calloc((size_t)(r->nparam + r->nkept) + 1, sizeof *r->params);
    r->outputs = calloc((size_t)g->noutput + 1, sizeof *r->outputs);
    r->accum = calloc((size_t)r->nparam + 1, sizeof *r->accum);
    if (!r->inputs || !r->given || !r->params || !r->outputs || !r->accum) {
        free(node);
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    r->targets_at = input_named(g, "targets");
    r->scale_at = input_named(g, "loss_scale");
    r->scale = r->scale_at >= 0 ? (o->loss_scale > 0 ? o->loss_scale : 65536) : 1;
    r->tokens_at = r->targets_at == 0 && g->ninput > 1 ? 1 : 0;
    /* compiled first: the resident memory after it is the baseline the training state's
     * (parameters, gradients, optimizer state, activations) is measured from */
    CompileOptions co = o->compile;
    co.optimised = true, co.trace = r->trace;
    bool ok = graph_flops(g, &r->sb, &r->hflops, e) && (r->c = compile_graph(g, &co, e)) != NULL;
    r->rss0 = resident_bytes();
    ok = ok && load_params(r, node, e) && schedule_reduction(r, e) && make_optimizer(r, e) &&
         on_device(r, e) && (!r->dp || dp_broadcast(r->dp, r->params, r->nparam, e));
    free(node);
    return ok;
}

/* ---------------------------------------------------------------- the loop */

/* The data-parallel ranks training together (1: alone). */
static int world_size(const TrainOptions *o) { return o->world.size > 1 ? o->world.size : 1; }

/* Micro-batch `draw` of the caller's (train_step): r->batch holds o->accum of them, each
 * the joint graph's inputs in order less loss_scale; copied, as the run frees its inputs
 * each micro-batch. */
static bool batch_take(Run *r, uint64_t draw, Err *e)
{
    const Graph *g = r->joint;
    int n = g->ninput - (r->scale_at >= 0);
    const Tensor *in = r->batch + (draw - (uint64_t)r->step * (uint64_t)r->o->accum) * (uint64_t)n;
    for (int i = 0; i < g->ninput; i++) {
        if (i == r->scale_at)
            continue;
        const Tensor *t = in++;
        if (!tensor_alloc(&r->inputs[i], t->dt, t->rank, t->shape, e))
            return false;
        memcpy(r->inputs[i].data, t->data, tensor_nbytes(t));
    }
    return true;
}

/* The gradients' sum started during the run (data_parallel.h's dp_arm_sum) where the run's
 * own gradients are what is summed: one micro-batch a step, or ZeRO-2's each micro-batch.
 * Not at the first run, which max-autotune may follow with reruns of its steps. */
static bool arm_overlap(Run *r, Err *e)
{
    bool outputs_summed = r->o->accum == 1 || (r->zero && r->o->zero >= 2);
    if (!r->overlap || !r->ran || !outputs_summed)
        return true;
    return dp_arm_sum(r->dp, r->outputs + 1, r->nparam, r->zero != NULL, e);
}

/* One micro-batch: inputs (the caller's, from the loader or synthetic), the joint graph run (into last
 * step's output tensors, reused), its loss. `draw` counts micro-batches from the start
 * (step * accum + m) and is also the rng step: each micro-batch gets its own dropout masks,
 * the backward the forward's, and a resumed run the ones it would have drawn. */
static bool micro_batch(Run *r, uint64_t draw, double *loss, Err *e)
{
    const Graph *g = r->joint;
    for (int i = 0; i < g->ninput; i++)
        tensor_free(&r->inputs[i]);
    Tensor *cols[8] = {&r->inputs[r->tokens_at], &r->inputs[r->targets_at < 0 ? 0 : r->targets_at]};
    for (int c = 0; r->o->narray > 0 && c < r->o->narray && c < 8; c++)
        cols[c] = &r->inputs[r->col_input[c]];
    bool ok = r->batch    ? batch_take(r, draw, e)
              : r->loader ? loader_take(r->loader, cols, e)
                          : init_inputs_part(g, &r->sb, r->o->seed + 1 + draw, r->given,
                                             r->o->world.rank, r->inputs, e);
    if (ok && r->scale_at >= 0) {
        Tensor *s = &r->inputs[r->scale_at];
        tensor_free(s);
        ok = tensor_alloc(s, DT_F32, 0, NULL, e);
        if (ok)
            *(float *)s->data = (float)r->scale;
    }
    if (ok) /* data-parallel ranks draw masks of their own: rank k at draw * ranks + k */
        compiled_set_rng_step(r->c, draw * (uint64_t)world_size(r->o) + (uint64_t)r->o->world.rank);
    ok = ok && arm_overlap(r, e);
    ok = ok && (r->dev ? r->dt->run(r->c->engine, r->inputs, r->params, r->outputs, r->fetch,
                                    e) && compiled_tune(r->c, e)
                       : compiled_run(r->c, r->inputs, r->params, r->outputs, e));
    if (ok)
        *loss = dtype_load(r->outputs[0].dt, r->outputs[0].data, 0) / r->scale;
    r->ran = r->ran || ok;
    return ok;
}

/* grads summed over the step's micro-batches (the outputs after the loss). */
static bool add_grads(Run *r, bool first, Err *e)
{
    if (r->dev)
        return r->dt->accumulate(r->dev, first, e);
    if (r->zero && r->o->zero >= 2) /* the shard's sums only */
        return zero_accumulate(r->zero, r->outputs + 1, first, e);
    for (int i = 0; i < r->nparam; i++) {
        Tensor *g = &r->outputs[1 + i];
        if (first) { /* allocated once: freeing and allocating each step grows the heap */
            if (!r->accum[i].data && !tensor_alloc(&r->accum[i], DT_F32, g->rank, g->shape, e))
                return false;
            memcpy(r->accum[i].data, g->data, tensor_nbytes(g));
            continue;
        }
        float *a = r->accum[i].data;
        const float *d = g->data;
        for (int64_t k = 0; k < tensor_numel(g); k++)
            a[k] += d[k];
    }
    return true;
}

static int64_t batch_tokens(const Run *r)
{
    const Tensor *t = &r->inputs[r->targets_at >= 0 ? r->targets_at : 0];
    return r->joint->ninput ? tensor_numel(t) : 1;
}

/* Whether a target is a token of a sequence ([B, T] targets), else a sample. */
static bool per_token(const Run *r)
{
    return r->targets_at >= 0 && r->inputs[r->targets_at].rank >= 2;
}

/* x to `digits` decimals: timings and rates are noise past those, and a line of full
 * 17-digit doubles is hard to read; not finite stays as it is (written as null). */
static double rounded(double x, int digits)
{
    double scale = pow(10, digits);
    return isfinite(x * scale) ? round(x * scale) / scale : x;
}

/* A progress line as one JSON object (JSON lines): through JsonWriter, so a diverging
 * run's NaN loss or gradient norm is null with a "_nonfinite" sibling, never "-nan". The
 * loss, lr and norm are written exactly (runs are compared step by step). */
static void progress_json(const Run *r, double loss, double lr, double norm, double dt,
                          int64_t tokens, double gflops, double mfu, double hfu,
                          const TrainResult *res)
{
    JsonWriter w;
    json_writer_init(&w, r->o->out);
    json_begin_object(&w);
    json_field_int(&w, "step", r->step);
    json_field_double(&w, "loss", loss);
    json_field_double(&w, "lr", lr);
    json_field_double(&w, "grad_norm", norm);
    json_field_double(&w, "step_ms", rounded(dt * 1e3, 3));
    json_field_double(&w, "tokens_per_s", rounded((double)tokens / dt, 1));
    json_field_double(&w, "gflops", rounded(gflops, 2));
    json_field_double(&w, "mfu", rounded(mfu, 4));
    json_field_double(&w, "hfu", rounded(hfu, 4));
    json_field_int(&w, "planned_bytes", res->planned_bytes);
    json_field_int(&w, "skipped", res->skipped);
    json_end_object(&w);
    json_writer_done(&w); /* a full disk shows when the run's output is read, as printf's */
}

static void progress(Run *r, double loss, double lr, double norm, double dt, int64_t tokens,
                     const TrainResult *res)
{
    const TrainOptions *o = r->o;
    double gflops = r->flops * (double)o->accum / dt * 1e-9, mfu = r->peak > 0 ? gflops / r->peak : 0;
    double hfu = r->peak > 0 ? r->hflops * (double)o->accum / dt * 1e-9 / r->peak : 0;
    if (o->json)
        progress_json(r, loss, lr, norm, dt, tokens, gflops, mfu, hfu, res);
    else
        fprintf(o->out, "step %5lld/%lld  loss %.4f  lr %.2e  grad-norm %.3f  %.0f %s/s  "
                "%.1f GFLOP/s  MFU %.1f%%  HFU %.1f%%  mem %.1f MiB%s\n", (long long)r->step,
                (long long)o->steps, loss, lr, norm, (double)tokens / dt,
                per_token(r) ? "tokens" : "samples", gflops, 100 * mfu,
                100 * hfu, (double)res->planned_bytes / 1048576.0,
                res->skipped ? "  (a step skipped: non-finite gradient)" : "");
    fflush(o->out);
}

static int64_t grad_bytes(const Run *r)
{
    int64_t n = 0;
    for (int i = 0; i < r->nparam; i++)
        n += (int64_t)tensor_nbytes(&r->params[i]);
    return n;
}

/* Dynamic loss scaling (f16): an overflowing step halves the scale (its update was
 * skipped); LOSS_SCALE_GROWTH good steps in a row double it. */
static void adjust_scale(Run *r, bool finite)
{
    if (r->scale_at < 0)
        return;
    if (!finite) {
        r->scale = r->scale / 2 > 1 ? r->scale / 2 : 1, r->good = 0;
        return;
    }
    if (++r->good >= LOSS_SCALE_GROWTH && r->scale < 0x1p24)
        r->scale *= 2, r->good = 0;
}

/* A step that went wrong: its loss is not finite, or its gradient is not and there is no
 * loss scale left to lower. Under f16 an overflowing gradient with a scale above 1 is
 * routine (the step is skipped, the scale halved, as PyTorch's GradScaler does), not
 * divergence. Called before adjust_scale, with the scale the step ran at. */
static void count_divergence(Run *r, double loss, double norm)
{
    bool scaled = r->scale_at >= 0 && r->scale > 1;
    if (isfinite(loss) && (isfinite(norm) || scaled)) {
        r->bad = 0;
        return;
    }
    /* NaN's sign is noise ("-nan" in a message reads as a second kind of failure) */
    r->bad++, r->bad_loss = isnan(loss) ? NAN : loss, r->bad_norm = isnan(norm) ? NAN : norm;
}

/* After DIVERGED_STEPS bad steps in a row, or a last step that was bad: an error saying
 * so (the last good checkpoint, if any, is left as it is). */
static bool check_diverged(const Run *r, bool at_end, Err *e)
{
    if (r->bad == 0 || (!at_end && r->bad < DIVERGED_STEPS))
        return true;
    char kept[FILEIO_PATH + 64] = "";
    if (r->o->save)
        snprintf(kept, sizeof kept, "; the checkpoint in %s is the last good one", r->o->save);
    err_set(e, ERR_INPUT, "training diverged: the %s was not finite for %lld step%s in a row "
            "(steps %lld to %lld; last loss %g, gradient norm %g): lower --lr (%g), clip the "
            "gradient (--clip), or check the data%s",
            isfinite(r->bad_loss) ? "gradient" : "loss", (long long)r->bad, r->bad == 1 ? "" : "s",
            (long long)(r->step - r->bad + 1), (long long)r->step, r->bad_loss, r->bad_norm,
            r->o->lr.lr, kept);
    return false;
}

/* The optimizer step; *norm: the gradient's global norm (not finite: skipped). */
static bool update(Run *r, double grad_scale, double lr, double *norm, Err *e)
{
    if (r->dev)
        return r->dt->step(r->dev, grad_scale, lr, norm, e);
    Tensor *grads = r->o->accum > 1 ? r->accum : r->outputs + 1; /* one: no copy */
    if (r->zero)
        return zero_step(r->zero, grads, grad_scale, lr, norm, e);
    *norm = optim_step(r->opt, r->params, grads, grad_scale, lr);
    return true;
}

bool run_step_once(Run *r, TrainResult *res, Err *e)
{
    const TrainOptions *o = r->o;
    double t0 = clock_seconds(), loss = 0, sum = 0;
    for (int64_t m = 0; m < o->accum; m++) {
        if (!micro_batch(r, (uint64_t)(r->step * o->accum + m), &loss, e) ||
            (o->accum > 1 && !add_grads(r, m == 0, e)))
            return false;
        sum += loss;
    }
    double lr = lr_at(&o->lr, r->step), norm, mean_loss = sum / (double)o->accum;
    /* (ZeRO reduces the gradients in its step) */
    if (r->dp && !((r->zero || dp_sum_grads(r->dp, o->accum > 1 ? r->accum : r->outputs + 1,
                                            r->nparam, e)) &&
                   dp_mean(r->dp, &mean_loss, e)))
        return false;
    if (!update(r, 1.0 / ((double)o->accum * r->scale * world_size(o)), lr, &norm, e))
        return false;
    res->skipped += !isfinite(norm);
    count_divergence(r, mean_loss, norm);
    adjust_scale(r, isfinite(norm));
    res->loss_scale = r->scale;
    r->step++;
    double dt = clock_seconds() - t0, mean = mean_loss;
    res->first_loss = res->steps == 0 ? mean : res->first_loss;
    res->last_loss = mean, res->tail[res->steps % TRAIN_TAIL] = mean;
    res->step_tail[res->steps % TRAIN_TAIL] = dt;
    res->steps++, res->seconds += dt;
    int64_t n = res->steps < TRAIN_TAIL ? res->steps : TRAIN_TAIL;
    res->tail_loss = 0;
    for (int64_t i = 0; i < n; i++)
        res->tail_loss += res->tail[i] / (double)n;
    const MemoryPlan *mp = compiled_plan(r->c);
    if (mp)
        res->planned_bytes = mp->arena_bytes + mp->param_bytes + mp->io_bytes +
                             (r->zero ? zero_state_bytes(r->zero) : optim_state_bytes(r->opt)) +
                             (o->accum > 1 && !(r->zero && o->zero >= 2) ? grad_bytes(r) : 0);
    if (o->log_every > 0 && o->world.rank == 0 &&
        (r->step % o->log_every == 0 || r->step == o->steps || res->steps == 1))
        progress(r, mean, lr, norm, dt, batch_tokens(r) * o->accum * world_size(o), res);
    return true;
}

/* Array i must feed a graph input of its dtype and, past the leading dimension of
 * samples, its shape at these sizes; every input must be fed. */
static bool check_array(Run *r, int c, const Tensor *a, Err *e)
{
    const Graph *g = r->joint;
    const char *name = r->o->array_names[c];
    int in = input_named(g, name);
    if (in < 0) {
        err_set(e, ERR_INPUT, "--input %s: the training graph of @%s has no input '%s'", name,
                g->name, name);
        return false;
    }
    const Type *t = &g->node[g->input[in]].type;
    int64_t dims[COIL_MAX_RANK];
    bool ok = a->dt == t->dt && a->rank == t->rank && t->rank >= 1 && type_resolve(t, &r->sb, dims);
    for (int d = 1; ok && d < t->rank; d++)
        ok = a->shape[d] == dims[d];
    if (!ok) {
        char want[128], got[128];
        err_set(e, ERR_INPUT, "--input %s=%s: %s; the input is %s (a leading dimension of "
                "samples, then the rest as it is)", name, r->o->array_files[c],
                tensor_fmt(a, got, sizeof got), type_fmt(g, t, want, sizeof want));
        return false;
    }
    r->col_input[c] = in;
    return true;
}

/* This rank's rows of every global batch. */
static DataShard shard_of(const TrainOptions *o) { return (DataShard){o->world.rank, world_size(o)}; }

/* The loader of --input arrays: read, checked against the inputs, sampled together. */
static bool open_arrays(Run *r, uint64_t data_pos, Err *e)
{
    const TrainOptions *o = r->o;
    Tensor arrays[8] = {{0}};
    bool ok = o->narray <= 8 && o->narray == r->joint->ninput - (r->scale_at >= 0);
    if (!ok)
        err_set(e, ERR_USAGE, "--input: the training graph of @%s has %d inputs; give one "
                "array for each (at most 8)", r->joint->name, r->joint->ninput);
    for (int c = 0; ok && c < o->narray; c++)
        ok = npy_read(o->array_files[c], &arrays[c], e) && check_array(r, c, &arrays[c], e);
    int64_t dims[COIL_MAX_RANK];
    const Type *t0 = ok ? &r->joint->node[r->joint->input[r->col_input[0]]].type : NULL;
    ok = ok && type_resolve(t0, &r->sb, dims);
    if (ok)
        r->loader = loader_open_arrays(arrays, o->array_names, o->narray, dims[0], o->seed,
                                       data_pos, LOADER_DEPTH, shard_of(o), e);
    for (int c = 0; c < 8; c++)
        tensor_free(&arrays[c]);
    return ok && r->loader;
}

/* A GPU's training runs are resident (DeviceTraining.run), which pipeline.c's
 * tracing of compiled_run does not see: refused rather than a trace with no steps. */
static bool check_trace(const TrainOptions *o, Err *e)
{
    bool gpu = o->compile.device && o->compile.device->gpu;
    if (o->trace && gpu)
        err_set(e, ERR_USAGE, "--trace %s: not yet for --device cuda (its training steps run "
                "resident on the GPU, untraced): trace the same run on the CPU, or a model's "
                "forward on the GPU with coil bench --device cuda --trace FILE", o->trace);
    return !(o->trace && gpu);
}

/* With other ranks (o->world): the collectives joined before anything is compiled, so a
 * rank that cannot meet the others fails at once. CPU ranks only so far: a GPU's ranks
 * need NCCL. */
static bool join_world(Run *r, Err *e)
{
    const TrainOptions *o = r->o;
    if (world_size(o) == 1)
        return true;
    if (o->compile.device && o->compile.device->gpu) {
        err_set(e, ERR_USAGE, "data-parallel training on GPUs needs NCCL, which this coil does "
                "not have yet: train on --device cpu ranks, or on one GPU (world size %d here)",
                o->world.size);
        return false;
    }
    r->dp = dp_open(&o->world, o->dp_timeout_s > 0 ? o->dp_timeout_s : 60, o->bucket_mb,
                    o->reduce_bf16 ? COMM_BF16 : COMM_F32, o->zero > 0, e);
    return r->dp != NULL;
}

/* After the first o->trace_steps steps: nothing more recorded (the pool's chunks stop
 * too: the engine no longer tags its jobs). */
static bool trace_enough(Run *r, const TrainResult *res, Err *e)
{
    const TrainOptions *o = r->o;
    if (!r->trace || o->trace_steps <= 0 || res->steps != o->trace_steps)
        return true;
    return compiled_stop_trace(r->c, e);
}

/* The trace written while its programs are alive (it names their steps from them). */
static bool write_trace(const Run *r, TrainResult *res, Err *e)
{
    res->trace_events = trace_events(r->trace);
    return trace_write(r->trace, r->o->trace, e);
}

static double median(double *x, int n)
{
    for (int i = 1; i < n; i++) /* a handful of values */
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1], x[j - 1] = t;
        }
    return n == 0 ? 0 : n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

#define ALONE_STEPS 5

/* --measure-scaling, once the run is over (its last checkpoint written): after a barrier
 * the other ranks leave and rank 0 times ALONE_STEPS steps of its micro-batches alone
 * (after one untimed), the joint graph's runs and a whole optimizer's update with no
 * collective: a one-rank step of the same work on the same host, beside the N ranks'.
 * The run's state is not used after, so these steps may change it. */
static bool measure_alone(Run *r, TrainResult *res, Err *e)
{
    const TrainOptions *o = r->o;
    if (!dp_barrier(r->dp, e))
        return false;
    if (o->world.rank != 0)
        return true;
    Optimizer *opt = optim_new(&o->opt, r->joint, r->params, e);
    Zero *zero = r->zero;
    double t[ALONE_STEPS + 1], loss;
    bool ok = opt != NULL;
    r->overlap = false, r->zero = NULL; /* no collective from here on */
    for (int k = 0; ok && k <= ALONE_STEPS; k++) {
        double t0 = clock_seconds();
        for (int64_t m = 0; ok && m < o->accum; m++)
            ok = micro_batch(r, (uint64_t)((r->step + k) * o->accum + m), &loss, e) &&
                 (o->accum == 1 || add_grads(r, m == 0, e));
        if (ok)
            optim_step(opt, r->params, o->accum > 1 ? r->accum : r->outputs + 1,
                       1.0 / ((double)o->accum * r->scale), lr_at(&o->lr, r->step));
        t[k] = clock_seconds() - t0;
    }
    r->zero = zero;
    optim_free(opt);
    res->alone_step_s = median(t + 1, ALONE_STEPS);
    res->scaling = res->step_s > 0 ? res->alone_step_s / res->step_s : 0;
    return ok;
}

bool train_run(const Graph *model, const TrainOptions *o, TrainResult *res, Err *e)
{
    Run r = {.o = o, .lock = {-1}};
    *res = (TrainResult){0};
    uint64_t data_pos = 0;
    /* the directory first: a second writer fails before compiling anything */
    bool saves = o->save && o->world.rank == 0; /* the ranks' states are the same: one writes */
    bool ok = check_trace(o, e) && join_world(&r, e) &&
              (!o->trace || (r.trace = trace_new(e)) != NULL) &&
              (!saves || run_claim_save_dir(&r, e)) && (!o->resume || run_open_checkpoint(&r, e)) &&
              run_setup(&r, model, e) && (!o->resume || run_load_checkpoint(&r, &data_pos, e));
    if (ok && o->data) {
        int64_t dims[COIL_MAX_RANK];
        ok = r.targets_at >= 0 && r.joint->node[r.joint->input[r.targets_at]].type.rank == 2 &&
             type_resolve(&r.joint->node[r.joint->input[r.targets_at]].type, &r.sb, dims);
        if (!ok)
            err_set(e, ERR_USAGE, "--data needs --loss cross_entropy on a model whose first output is "
                    "[B, T, vocab] logits of an [B, T] token input");
        ok = ok && (r.loader = loader_open(o->data, o->data_width, dims[0], dims[1], o->seed,
                                           data_pos, LOADER_DEPTH, shard_of(o), e)) != NULL;
    }
    if (ok && o->narray > 0)
        ok = open_arrays(&r, data_pos, e);
    bool gpu = o->compile.device && o->compile.device->gpu;
    r.peak = o->peak_gflops > 0 ? o->peak_gflops
             : gpu              ? 0 /* a GPU's peak depends on the dtype: --peak gives it */
                                : peak_fma_gflops(o->compile.threads > 0 ? o->compile.threads
                                                                         : pool_default_threads(), 0.2);
    res->flops_per_step = r.flops * (double)o->accum;
    res->hflops_per_step = r.hflops * (double)o->accum;
    while (ok && r.step < o->steps) {
        ok = run_step_once(&r, res, e) && trace_enough(&r, res, e) && check_diverged(&r, false, e);
        /* not in the middle of a bad stretch: the last good checkpoint stays */
        if (ok && o->save && o->save_every > 0 && r.step % o->save_every == 0 && r.bad == 0)
            ok = run_checkpoint(&r, saves, e);
    }
    ok = ok && check_diverged(&r, true, e);
    if (ok && o->save)
        ok = run_checkpoint(&r, saves, e);
    res->world = world_size(o);
    int tail = res->steps < TRAIN_TAIL ? (int)res->steps : TRAIN_TAIL;
    double steps[TRAIN_TAIL];
    memcpy(steps, res->step_tail, sizeof steps);
    res->step_s = median(steps, tail);
    if (r.dp)
        res->comm_s = dp_comm_seconds(r.dp), res->comm_waited_s = dp_waited_seconds(r.dp);
    res->overlap = r.overlap;
    if (ok && r.trace)
        ok = write_trace(&r, res, e);
    res->measured_bytes = ok ? resident_bytes() - r.rss0 : 0;
    double per_s = res->seconds > 0 && r.peak > 0 ? (double)res->steps / res->seconds * 1e-9 / r.peak : 0;
    res->mfu = res->flops_per_step * per_s, res->hfu = res->hflops_per_step * per_s;
    if (ok && o->measure_scaling && r.dp) /* last: it changes the run's state */
        ok = measure_alone(&r, res, e);
    /* Under MPI the others time out and end the job (MPI_Abort) while this rank waits to
     * close: its own error is said now or never */
    if (!ok && r.dp && strcmp(dp_engine(r.dp), "mpi") == 0)
        fprintf(stderr, "coil: rank %d: %s\n", o->world.rank, e->msg);
    run_free(&r);
    return ok;
}
