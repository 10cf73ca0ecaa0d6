/* train.c — the training loop: graph, compile, batches, optimizer, progress, checkpoints. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/coil/coil.h"
#include "passes/passes.h"
#include "runtime/cuda_optim.h"
#include "runtime/data.h"
#include "runtime/init.h"
#include "runtime/npy.h"
#include "runtime/peak.h"
#include "runtime/pool.h"
#include "runtime/safetensors.h"
#include "runtime/summary.h"
#include "runtime/train.h"

#define LOADER_DEPTH 4

/* ---------------------------------------------------------------- the training graph */

static int output_named(const Graph *g, const char *name)
{
    for (int i = 0; i < g->noutput; i++)
        if (strcmp(g->output_name[i], name) == 0)
            return i;
    return -1;
}

/* cross_entropy(first output, targets): targets an i64 input of the logits' shape less
 * the class dimension. */
static int add_cross_entropy(Graph *g, Err *e)
{
    Builder b = builder_make(g, e);
    int logits = g->output[0];
    Type t = g->node[logits].type;
    if (t.rank < 2 || !dtype_info[t.dt].is_float) {
        char buf[128];
        err_set(e, ERR_INPUT, "--loss cross_entropy: the first output of @%s is %s; it must be "
                "float logits with a class dimension", g->name, type_fmt(g, &t, buf, sizeof buf));
        return -1;
    }
    t.rank--, t.dt = DT_I64;
    int targets = b_input(&b, "targets", &t);
    int in[2] = {logits, targets};
    return b_op(&b, OP_CROSS_ENTROPY, in, 2, NULL, 0, NULL);
}

Graph *train_graph(const Graph *model, const char *loss, Err *e)
{
    Graph *g = graph_copy(model, e);
    if (!g)
        return NULL;
    int value = -1, at = output_named(g, "loss");
    if (!loss && at >= 0)
        value = g->output[at];
    else if (!loss)
        err_set(e, ERR_INPUT, "@%s has no output named 'loss'; give --loss cross_entropy to "
                "train its first output against targets", g->name);
    else if (strcmp(loss, "cross_entropy") == 0)
        value = add_cross_entropy(g, e);
    else
        err_set(e, ERR_USAGE, "--loss %s: expected cross_entropy (or a model output 'loss')", loss);
    if (value < 0) {
        if (err_ok(e))
            err_set(e, ERR_INPUT, "@%s: cannot make its training loss", g->name);
        graph_free(g);
        return NULL;
    }
    g->output[0] = value, g->output_name[0] = "loss", g->noutput = 1;
    return g;
}

/* ---------------------------------------------------------------- state */

typedef struct Run {
    const TrainOptions *o;
    Graph *joint;
    Compiled *c;
    SymBind sb;
    Tensor *inputs, *params, *outputs, *accum;
    bool *given;
    int nparam, targets_at, tokens_at;
    Optimizer *opt;      /* on a GPU: the device optimizer's host copy, for checkpoints */
    CudaOptim *dev;      /* on a GPU: the update where the parameters and gradients are */
    bool *fetch;         /* on a GPU: the outputs brought home (the loss, not gradients) */
    Loader *loader;
    int col_input[8];    /* arrays mode: the graph input each array feeds */
    int scale_at;        /* f16: the input "loss_scale", else -1 */
    double scale;        /* the loss scale (1 without f16) */
    int64_t good;        /* steps since the scale last changed */
    int64_t step;
    double flops, hflops, peak; /* the model's FLOPs a micro-batch; with recomputation */
    int64_t rss0;        /* resident bytes once compiled, before any training state */
} Run;

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

static void run_free(Run *r)
{
    for (int i = 0; r->joint && i < r->joint->ninput; i++)
        tensor_free(&r->inputs[i]);
    for (int i = 0; i < r->nparam; i++) {
        tensor_free(&r->params[i]);
        if (r->accum)
            tensor_free(&r->accum[i]);
    }
    for (int i = 0; r->joint && r->outputs && i < r->joint->noutput; i++)
        tensor_free(&r->outputs[i]);
    free(r->inputs), free(r->params), free(r->outputs), free(r->accum), free(r->given);
    free(r->fetch);
    cuda_optim_free(r->dev);
    optim_free(r->opt);
    loader_free(r->loader);
    compiled_free(r->c);
    graph_free(r->joint);
}

static int input_named(const Graph *g, const char *name)
{
    for (int i = 0; i < g->ninput; i++)
        if (strcmp(node_name(&g->node[g->input[i]]), name) == 0)
            return i;
    return -1;
}

/* g replaced by its pass result (NULL: g freed too). */
static Graph *replace(Graph *g, Graph *next)
{
    graph_free(g);
    return next;
}

/* f16: the loss times an input "loss_scale", so the backward's small gradients stay above
 * f16's smallest normal; the optimizer divides it back out. */
static Graph *scale_loss(Graph *g, Err *e)
{
    Builder b = builder_make(g, e);
    Type scalar = type_scalar(DT_F32);
    int s = b_input(&b, "loss_scale", &scalar);
    int scaled = b_binary(&b, OP_MUL, g->output[0], s);
    if (scaled < 0) {
        graph_free(g);
        return NULL;
    }
    g->output[0] = scaled;
    return g;
}

/* The joint graph of model's loss at the sizes o gives (into *sb), rematerialised as
 * o->checkpoint says; *flops: the model's FLOPs a micro-batch (before recomputation). */
Graph *train_joint_graph(const Graph *model, const TrainOptions *o, SymBind *sb, double *flops,
                         Err *e)
{
    Graph *tg = train_graph(model, o->loss, e);
    if (tg && o->precision && o->precision != DT_F32)
        tg = replace(tg, pass_mixed_precision(tg, o->precision, e));
    if (tg && o->precision == DT_F16)
        tg = scale_loss(tg, e);
    Graph *joint = tg ? autodiff(tg, NULL, e) : NULL;
    graph_free(tg);
    bool *given = joint ? calloc((size_t)joint->ninput + 1, sizeof *given) : NULL;
    bool ok = given && init_symbols(joint, NULL, given, o->sizes, o->nsizes, 1, sb, e) &&
              graph_flops(joint, sb, flops, e);
    free(given);
    /* the passes first, then the cut: CSE afterwards would merge each recomputation with
     * the forward value it repeats */
    ok = ok && run_passes(&joint, pass_pipeline, e);
    Graph *out = ok ? pass_remat(joint, o->checkpoint, sb, e) : NULL;
    graph_free(joint);
    return out;
}

/* On a GPU the parameters, gradients and optimizer state stay there: the update runs on
 * the device (cuda_optim.h), only the loss comes home each micro-batch, and parameters and
 * state cross only for checkpoints. The gradients are outputs 1.. (autodiff's order). */
static bool on_device(Run *r, Err *e)
{
    r->fetch = calloc((size_t)r->joint->noutput + 1, sizeof *r->fetch);
    if (!r->fetch) {
        err_set(e, ERR_INPUT, "out of memory");
        return false;
    }
    r->fetch[0] = true;
    r->dev = cuda_optim_new(r->c->cu, r->opt, r->params, r->nparam, 1, r->o->accum > 1, e);
    return r->dev != NULL;
}

/* The device's parameters and optimizer state into the host's tensors (checkpoints). */
static bool to_host(Run *r, Err *e)
{
    return !r->dev || (cuda_engine_download_params(r->c->cu, r->params, e) &&
                       cuda_optim_download(r->dev, r->opt, e));
}

/* The joint graph, compiled, with parameters and sizes. */
static bool setup(Run *r, const Graph *model, Err *e)
{
    const TrainOptions *o = r->o;
    if (!(r->joint = train_joint_graph(model, o, &r->sb, &r->flops, e)))
        return false;
    const Graph *g = r->joint;
    r->nparam = graph_params(g, NULL);
    r->inputs = calloc((size_t)g->ninput + 1, sizeof *r->inputs);
    r->given = calloc((size_t)g->ninput + 1, sizeof *r->given);
    r->params = calloc((size_t)r->nparam + 1, sizeof *r->params);
    r->outputs = calloc((size_t)g->noutput + 1, sizeof *r->outputs);
    r->accum = calloc((size_t)r->nparam + 1, sizeof *r->accum);
    if (!r->inputs || !r->given || !r->params || !r->outputs || !r->accum) {
        err_set(e, ERR_INPUT, "out of memory");
        return false;
    }
    r->targets_at = input_named(g, "targets");
    r->scale_at = input_named(g, "loss_scale");
    r->scale = r->scale_at >= 0 ? (o->loss_scale > 0 ? o->loss_scale : 65536) : 1;
    r->tokens_at = r->targets_at == 0 && g->ninput > 1 ? 1 : 0;
    /* compiled first: the resident memory after it is the baseline the training state's
     * (parameters, gradients, optimizer state, activations) is measured from */
    CompileOptions co = o->compile;
    co.optimised = true;
    bool ok = graph_flops(g, &r->sb, &r->hflops, e) && (r->c = compile_graph(g, &co, e)) != NULL;
    r->rss0 = resident_bytes();
    return ok &&
           (o->weights ? safetensors_bind(g, o->weights, r->params, e)
                       : init_params(g, &r->sb, o->seed, r->params, e)) &&
           (r->opt = optim_new(&o->opt, g, r->params, e)) != NULL && (!r->c->cu || on_device(r, e));
}

/* ---------------------------------------------------------------- checkpoints */

static bool checkpoint_path(const char *dir, const char *file, char *buf, size_t n, Err *e)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        err_set(e, ERR_INPUT, "%s: cannot create the checkpoint directory", dir);
        return false;
    }
    snprintf(buf, n, "%s/%s", dir, file);
    return true;
}

/* Parameters, optimizer state, the step and the data position: one safetensors file,
 * written beside its name, fsynced and renamed (a kill leaves the previous one whole). */
static bool save_checkpoint(Run *r, Err *e)
{
    char path[4096], step[32], pos[32], seed[32];
    if (!checkpoint_path(r->o->save, "checkpoint.safetensors", path, sizeof path, e) ||
        !to_host(r, e))
        return false;
    int ns = optim_state_count(r->opt), n = r->nparam + ns;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    Tensor *t = calloc((size_t)n + 1, sizeof *t);
    int *ids = calloc((size_t)r->nparam + 1, sizeof *ids);
    bool ok = names && t && ids;
    if (ok) {
        graph_params(r->joint, ids);
        for (int i = 0; i < r->nparam; i++)
            names[i] = node_name(&r->joint->node[ids[i]]), t[i] = r->params[i];
        for (int i = 0; i < ns; i++)
            t[r->nparam + i] = *optim_state(r->opt, i, &names[r->nparam + i]);
        snprintf(step, sizeof step, "%lld", (long long)r->step);
        snprintf(pos, sizeof pos, "%llu", (unsigned long long)(r->loader ? loader_position(r->loader) : 0));
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->o->seed);
        const char *key[] = {"step", "data_position", "seed", "optimizer", "coil"};
        const char *val[] = {step, pos, seed, optim_name(r->o->opt.kind), coil_version()};
        ok = safetensors_write(path, names, t, n, key, val, 5, e);
    } else
        err_set(e, ERR_INPUT, "out of memory writing a checkpoint");
    free(names), free(t), free(ids);
    return ok;
}

static const char *meta(const StFile *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], key) == 0)
            return f->meta_value[i];
    return NULL;
}

/* A tensor of the checkpoint into dst (same dtype and shape), by name. */
static bool restore(const StFile *f, const char *path, const char *name, Tensor *dst, Err *e)
{
    const StEntry *en = safetensors_find(f, name);
    Tensor t = {0};
    if (!en || !safetensors_tensor(f, en, &t, e) || t.dt != dst->dt ||
        tensor_nbytes(&t) != tensor_nbytes(dst)) {
        tensor_free(&t);
        if (err_ok(e))
            err_set(e, ERR_INPUT, "%s: checkpoint has no tensor '%s' of the model's type", path, name);
        return false;
    }
    memcpy(dst->data, t.data, tensor_nbytes(dst));
    tensor_free(&t);
    return true;
}

static bool load_checkpoint(Run *r, uint64_t *data_pos, Err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", r->o->save);
    StFile f;
    if (!safetensors_read(path, &f, e))
        return false;
    int *ids = calloc((size_t)r->nparam + 1, sizeof *ids);
    bool ok = ids != NULL;
    if (ok)
        graph_params(r->joint, ids);
    for (int i = 0; ok && i < r->nparam; i++)
        ok = restore(&f, path, node_name(&r->joint->node[ids[i]]), &r->params[i], e);
    for (int i = 0; ok && i < optim_state_count(r->opt); i++) {
        const char *name;
        Tensor *s = optim_state(r->opt, i, &name);
        ok = restore(&f, path, name, s, e);
    }
    const char *step = meta(&f, "step"), *pos = meta(&f, "data_position");
    if (ok && (!step || !pos)) {
        err_set(e, ERR_INPUT, "%s: checkpoint metadata lacks the step or data position", path);
        ok = false;
    }
    if (ok) {
        r->step = strtoll(step, NULL, 10);
        *data_pos = strtoull(pos, NULL, 10);
        optim_set_steps(r->opt, r->step);
        ok = !r->dev || cuda_optim_upload(r->dev, r->opt, e); /* parameters: with the first run */
    }
    free(ids);
    safetensors_free(&f);
    return ok;
}

/* ---------------------------------------------------------------- the loop */

/* One micro-batch: inputs (from the loader or synthetic), the joint graph run (into last
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
    bool ok = r->loader ? loader_take(r->loader, cols, e)
                        : init_inputs(g, &r->sb, r->o->seed + 1 + draw, r->given, r->inputs, e);
    if (ok && r->scale_at >= 0) {
        Tensor *s = &r->inputs[r->scale_at];
        tensor_free(s);
        ok = tensor_alloc(s, DT_F32, 0, NULL, e);
        if (ok)
            *(float *)s->data = (float)r->scale;
    }
    if (ok)
        compiled_set_rng_step(r->c, draw);
    ok = ok && (r->dev ? cuda_engine_run_resident(r->c->cu, r->inputs, r->params, r->outputs,
                                                  r->fetch, e) && compiled_tune(r->c, e)
                       : compiled_run(r->c, r->inputs, r->params, r->outputs, e));
    if (ok)
        *loss = dtype_load(r->outputs[0].dt, r->outputs[0].data, 0) / r->scale;
    return ok;
}

/* grads summed over the step's micro-batches (the outputs after the loss). */
static bool add_grads(Run *r, bool first, Err *e)
{
    if (r->dev)
        return cuda_optim_accumulate(r->dev, first, e);
    for (int i = 0; i < r->nparam; i++) {
        Tensor *g = &r->outputs[1 + i];
        if (first) {
            tensor_free(&r->accum[i]);
            if (!tensor_alloc(&r->accum[i], DT_F32, g->rank, g->shape, e))
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

static void progress(Run *r, double loss, double lr, double norm, double dt, int64_t tokens,
                     const TrainResult *res)
{
    const TrainOptions *o = r->o;
    double gflops = r->flops * (double)o->accum / dt * 1e-9, mfu = r->peak > 0 ? gflops / r->peak : 0;
    double hfu = r->peak > 0 ? r->hflops * (double)o->accum / dt * 1e-9 / r->peak : 0;
    if (o->json)
        fprintf(o->out, "{\"step\": %lld, \"loss\": %.6f, \"lr\": %.6g, \"grad_norm\": %.6g, "
                "\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"gflops\": %.2f, \"mfu\": %.4f, \"hfu\": %.4f, "
                "\"planned_bytes\": %lld, \"skipped\": %lld}\n", (long long)r->step, loss, lr,
                norm, dt * 1e3, (double)tokens / dt, gflops, mfu, hfu, (long long)res->planned_bytes,
                (long long)res->skipped);
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

/* The optimizer step; *norm: the gradient's global norm (not finite: skipped). */
static bool update(Run *r, double grad_scale, double lr, double *norm, Err *e)
{
    if (r->dev)
        return cuda_optim_step(r->dev, grad_scale, lr, e) && cuda_optim_finish(r->dev, norm, e);
    const Tensor *grads = r->o->accum > 1 ? r->accum : r->outputs + 1; /* one: no copy */
    *norm = optim_step(r->opt, r->params, grads, grad_scale, lr);
    return true;
}

static bool step_once(Run *r, TrainResult *res, Err *e)
{
    const TrainOptions *o = r->o;
    double t0 = clock_seconds(), loss = 0, sum = 0;
    for (int64_t m = 0; m < o->accum; m++) {
        if (!micro_batch(r, (uint64_t)(r->step * o->accum + m), &loss, e) ||
            (o->accum > 1 && !add_grads(r, m == 0, e)))
            return false;
        sum += loss;
    }
    double lr = lr_at(&o->lr, r->step), norm;
    if (!update(r, 1.0 / ((double)o->accum * r->scale), lr, &norm, e))
        return false;
    res->skipped += !isfinite(norm);
    adjust_scale(r, isfinite(norm));
    res->loss_scale = r->scale;
    r->step++;
    double dt = clock_seconds() - t0, mean = sum / (double)o->accum;
    res->first_loss = res->steps == 0 ? mean : res->first_loss;
    res->last_loss = mean, res->tail[res->steps % TRAIN_TAIL] = mean;
    res->steps++, res->seconds += dt;
    int64_t n = res->steps < TRAIN_TAIL ? res->steps : TRAIN_TAIL;
    res->tail_loss = 0;
    for (int64_t i = 0; i < n; i++)
        res->tail_loss += res->tail[i] / (double)n;
    const MemoryPlan *mp = compiled_plan(r->c);
    if (mp)
        res->planned_bytes = mp->arena_bytes + mp->param_bytes + mp->io_bytes +
                             optim_state_bytes(r->opt) + (o->accum > 1 ? grad_bytes(r) : 0);
    if (o->log_every > 0 && (r->step % o->log_every == 0 || r->step == o->steps || res->steps == 1))
        progress(r, mean, lr, norm, dt, batch_tokens(r) * o->accum, res);
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
                                       data_pos, LOADER_DEPTH, e);
    for (int c = 0; c < 8; c++)
        tensor_free(&arrays[c]);
    return ok && r->loader;
}

bool train_run(const Graph *model, const TrainOptions *o, TrainResult *res, Err *e)
{
    Run r = {.o = o};
    *res = (TrainResult){0};
    uint64_t data_pos = 0;
    bool ok = setup(&r, model, e) && (!o->resume || load_checkpoint(&r, &data_pos, e));
    if (ok && o->data) {
        int64_t dims[COIL_MAX_RANK];
        ok = r.targets_at >= 0 && r.joint->node[r.joint->input[r.targets_at]].type.rank == 2 &&
             type_resolve(&r.joint->node[r.joint->input[r.targets_at]].type, &r.sb, dims);
        if (!ok)
            err_set(e, ERR_USAGE, "--data needs --loss cross_entropy on a model whose first output is "
                    "[B, T, vocab] logits of an [B, T] token input");
        ok = ok && (r.loader = loader_open(o->data, o->data_width, dims[0], dims[1], o->seed,
                                           data_pos, LOADER_DEPTH, e)) != NULL;
    }
    if (ok && o->narray > 0)
        ok = open_arrays(&r, data_pos, e);
    bool gpu = o->compile.device && strcmp(o->compile.device, "cuda") == 0;
    r.peak = o->peak_gflops > 0 ? o->peak_gflops
             : gpu              ? 0 /* a GPU's peak depends on the dtype: --peak gives it */
                                : peak_fma_gflops(o->compile.threads > 0 ? o->compile.threads
                                                                         : pool_default_threads(), 0.2);
    res->flops_per_step = r.flops * (double)o->accum;
    res->hflops_per_step = r.hflops * (double)o->accum;
    while (ok && r.step < o->steps) {
        ok = step_once(&r, res, e);
        if (ok && o->save && o->save_every > 0 && r.step % o->save_every == 0)
            ok = save_checkpoint(&r, e);
    }
    if (ok && o->save)
        ok = save_checkpoint(&r, e);
    res->measured_bytes = ok ? resident_bytes() - r.rss0 : 0;
    double per_s = res->seconds > 0 && r.peak > 0 ? (double)res->steps / res->seconds * 1e-9 / r.peak : 0;
    res->mfu = res->flops_per_step * per_s, res->hfu = res->hflops_per_step * per_s;
    run_free(&r);
    return ok;
}
