/* train.c — `coil train MODEL`: flags into TrainOptions, then train/train_loop.c's loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "runtime/pool.h"
#include "runtime/placement.h"
#include "tools/cli.h"
#include "train/train.h"

typedef struct TrainFlags {
    const char *steps, *accum, *lr, *min_lr, *warmup, *optimizer, *wd, *clip, *log_every,
        *save, *save_every, *data, *width, *loss, *momentum, *checkpoint, *precision, *loss_scale,
        *trace_steps, *bucket_mb, *dp_timeout, *bind, *reduce_dtype, *zero;
    bool resume, resume_anyway, auto_resume, cosine, synthetic, measure_scaling;
    bool bound;           /* this rank was bound to its share of the host's CPUs */
    List *no_decay;
} TrainFlags;

/* A finite non-negative number flag; def when absent. inf is refused: --lr inf or
 * --clip inf would run on to a NaN loss. */
static int parse_real(const Command *cmd, const char *flag, const char *s, double def, double *out)
{
    char *end = NULL;
    *out = s ? strtod(s, &end) : def;
    if (s && (end == s || *end || !(*out >= 0) || !isfinite(*out)))
        return usage_error(cmd, "%s %s: expected a finite non-negative number", flag, s);
    return EXIT_OK;
}

/* The data-parallel flags: buckets, the reduction's dtype, the timeout. */
static int parse_dp_flags(const Command *cmd, const TrainFlags *f, TrainOptions *o)
{
    int rc = parse_real(cmd, "--bucket-mb", f->bucket_mb, 25, &o->bucket_mb);
    rc = rc ? rc : parse_real(cmd, "--dp-timeout", f->dp_timeout, 60, &o->dp_timeout_s);
    if (!rc && (o->bucket_mb <= 0 || o->dp_timeout_s <= 0))
        rc = usage_error(cmd, "%s must be positive", o->bucket_mb <= 0 ? "--bucket-mb" : "--dp-timeout");
    const char *t = f->reduce_dtype ? f->reduce_dtype : "f32";
    if (!rc && strcmp(t, "f32") != 0 && strcmp(t, "bf16") != 0)
        rc = usage_error(cmd, "--reduce-dtype %s: expected f32 or bf16", t);
    o->reduce_bf16 = strcmp(t, "bf16") == 0;
    uint64_t stage = 0;
    if (!rc && f->zero && !parse_u64(f->zero, &stage))
        rc = usage_error(cmd, "--zero %s: expected a ZeRO stage, 0, 1 or 2", f->zero);
    if (!rc && stage > 2)
        rc = usage_error(cmd, "--zero %s: stages 0, 1 (optimizer state sharded) and 2 (gradients "
                         "too) are built; stage 3 needs the engine to gather each block's "
                         "parameters before its kernels, which it cannot yet", f->zero);
    o->zero = (int)stage;
    if (!rc && f->measure_scaling && o->world.size <= 1)
        rc = usage_error(cmd, "--measure-scaling compares N data-parallel ranks with one: start "
                         "the ranks with coil launch --nproc N (or torchrun, srun, mpirun)");
    o->measure_scaling = f->measure_scaling;
    return rc;
}

/* A data-parallel rank bound to its share of the host's CPUs (--bind; cores by default
 * when the host has more than one rank), before any thread exists, and said on stderr. */
static int place_rank(const Command *cmd, TrainFlags *f, const World *w)
{
    BindMode m = w->local_size > 1 ? BIND_CORES : BIND_NONE;
    if (f->bind && !bind_parse(f->bind, &m))
        return usage_error(cmd, "--bind %s: expected none, cores or numa", f->bind);
    if (w->size <= 1 || m == BIND_NONE)
        return EXIT_OK;
    char desc[256];
    int ncpu;
    Err e = {0};
    if (!bind_rank(m, w->local_rank, w->local_size, &ncpu, desc, sizeof desc, &e))
        return cli_fail(&e);
    f->bound = true;
    fprintf(stderr, "coil: rank %d of %d (local %d of %d): %s\n", w->rank, w->size,
            w->local_rank, w->local_size, desc);
    return EXIT_OK;
}

/* Every size a training step is made of must be at least 1: a batch of 0 samples has a
 * NaN mean loss, and nothing to learn from. */
static int parse_flags(const Command *cmd, const TrainFlags *f, const Args *a, TrainOptions *o)
{
    int64_t steps, accum, warmup, log_every, save_every = 0, width = 1, threads;
    double lr, min_lr, wd, clip, momentum;
    int rc = parse_count(cmd, "--steps", f->steps, 100, &steps);
    rc = rc ? rc : parse_count(cmd, "--accum", f->accum, 1, &accum);
    rc = rc ? rc : parse_count(cmd, "--log-every", f->log_every, 10, &log_every);
    rc = rc ? rc : parse_count(cmd, "--threads", a->threads, 0, &threads);
    rc = rc ? rc : parse_real(cmd, "--lr", f->lr, 3e-4, &lr);
    rc = rc ? rc : parse_real(cmd, "--min-lr", f->min_lr, lr / 10, &min_lr);
    rc = rc ? rc : parse_real(cmd, "--weight-decay", f->wd, 0.1, &wd);
    rc = rc ? rc : parse_real(cmd, "--clip", f->clip, 1.0, &clip);
    rc = rc ? rc : parse_real(cmd, "--momentum", f->momentum, 0.9, &momentum);
    double w = 0;
    rc = rc ? rc : parse_real(cmd, "--warmup", f->warmup, 0, &w);
    warmup = (int64_t)w;
    if (!rc && f->save_every)
        rc = parse_count(cmd, "--save-every", f->save_every, 0, &save_every);
    if (!rc && f->width)
        rc = parse_count(cmd, "--token-bytes", f->width, 1, &width);
    OptKind kind = OPT_ADAMW;
    if (!rc && f->optimizer && !optim_parse(f->optimizer, &kind))
        rc = usage_error(cmd, "--optimizer %s: expected adamw, sgd or lion", f->optimizer);
    if (!rc && (f->resume || f->resume_anyway || f->auto_resume) && !f->save)
        rc = usage_error(cmd, "%s needs --save DIR (the checkpoint to continue from)",
                         f->resume ? "--resume" : f->resume_anyway ? "--resume-anyway" : "--auto-resume");
    if (!rc && f->precision && !precision_parse(f->precision, &o->precision))
        rc = usage_error(cmd, "--precision %s: expected f32, bf16 or f16", f->precision);
    rc = rc ? rc : parse_real(cmd, "--loss-scale", f->loss_scale, 0, &o->loss_scale);
    if (!rc && f->checkpoint && !remat_mode_parse(f->checkpoint, &o->checkpoint))
        rc = usage_error(cmd, "--checkpoint %s: expected none or auto", f->checkpoint);
    if (!rc && f->data && f->synthetic)
        rc = usage_error(cmd, "--data and --synthetic exclude each other");
    if (!rc && f->trace_steps && !a->trace)
        rc = usage_error(cmd, "--trace-steps %s needs --trace FILE.json (the trace it bounds)",
                         f->trace_steps);
    rc = rc ? rc : parse_count(cmd, "--trace-steps", f->trace_steps, 10, &o->trace_steps);
    if (rc)
        return rc;
    if (threads == 0 && o->world.local_size > 1 && !f->bound) /* the host's CPUs, shared */
        threads = pool_default_threads() / o->world.local_size > 1
                      ? pool_default_threads() / o->world.local_size : 1;
    bool lion = kind == OPT_LION;
    o->steps = steps, o->accum = accum, o->log_every = log_every;
    o->opt = (OptConfig){kind, 0.9, lion ? 0.99 : 0.95, 1e-8, kind == OPT_SGD ? momentum : 0, wd,
                         clip, (int)threads, (const char *const *)f->no_decay->item,
                         f->no_decay->n};
    o->lr = (LrSchedule){lr, min_lr, warmup, f->cosine ? steps : 0};
    o->data = f->data, o->data_width = (int)width, o->save = f->save, o->save_every = save_every;
    o->resume = f->resume || f->resume_anyway, o->resume_anyway = f->resume_anyway;
    if (f->auto_resume && train_checkpoint_exists(f->save)) /* a restarted job goes on */
        o->resume = true;
    o->loss = f->loss, o->json = a->json, o->weights = a->weights, o->trace = a->trace;
    o->compile = compile_options(a, (int)threads);
    o->opt.threads = (int)threads;
    return EXIT_OK;
}

/* How many steps the trace holds: --trace-steps, or fewer when the run was shorter. */
static int64_t traced_steps(const TrainOptions *o, const TrainResult *res)
{
    return o->trace_steps > 0 && o->trace_steps < res->steps ? o->trace_steps : res->steps;
}

static void summary_text(const TrainOptions *o, const TrainResult *res)
{
    printf("trained %lld steps in %.2f s: loss %.4f -> %.4f, %.3g FLOPs a step, MFU %.1f%%, "
           "HFU %.1f%%%s\n"
           "memory %.1f MiB planned (coil plan's total), %.1f MiB resident growth measured\n",
           (long long)res->steps, res->seconds, res->first_loss, res->last_loss,
           res->flops_per_step, 100 * res->mfu, 100 * res->hfu, o->save ? ", checkpoint saved" : "",
           (double)res->planned_bytes / 1048576.0, (double)res->measured_bytes / 1048576.0);
    if (res->world > 1)
        printf("data-parallel %d ranks: collectives %.2f s, %.2f s of it waited for (%.0f%% "
               "hidden under the steps' work; %s)\n", res->world, res->comm_s, res->comm_waited_s,
               res->comm_s > res->comm_waited_s ? 100 * (1 - res->comm_waited_s / res->comm_s) : 0.0,
               res->overlap ? "each bucket started as the backward finished it"
                            : "the sums started after the backward");
    if (o->measure_scaling)
        printf("scaling: a step of %d ranks %.1f ms (median), of one rank alone %.1f ms: "
               "efficiency %.3f\n", res->world, res->step_s * 1e3, res->alone_step_s * 1e3,
               res->scaling);
    if (o->trace)
        printf("trace %lld events of the first %lld steps in %s (open it in ui.perfetto.dev or "
               "chrome://tracing)\n", (long long)res->trace_events,
               (long long)traced_steps(o, res), o->trace);
}

/* --json: the run's summary as the last JSON line, after the progress lines ("steps",
 * never "step": readers pick progress lines by that key). */
static bool summary_json(const TrainOptions *o, const TrainResult *res, Err *e)
{
    JsonWriter w;
    json_writer_init(&w, stdout);
    json_begin_object(&w);
    json_field_int(&w, "steps", res->steps);
    json_field_double(&w, "seconds", res->seconds);
    json_field_double(&w, "first_loss", res->first_loss);
    json_field_double(&w, "last_loss", res->last_loss);
    json_field_double(&w, "tail_loss", res->tail_loss);
    json_field_double(&w, "flops_per_step", res->flops_per_step);
    json_field_double(&w, "mfu", res->mfu);
    json_field_double(&w, "hfu", res->hfu);
    json_field_int(&w, "skipped", res->skipped);
    json_field_int(&w, "planned_bytes", res->planned_bytes);
    json_field_int(&w, "measured_bytes", res->measured_bytes);
    json_field_int(&w, "world", res->world);
    json_field_double(&w, "comm_s", res->comm_s);
    json_field_double(&w, "comm_waited_s", res->comm_waited_s);
    if (res->world > 1)
        json_field_bool(&w, "overlap", res->overlap);
    json_field_double(&w, "step_s", res->step_s);
    if (o->measure_scaling) {
        json_field_double(&w, "alone_step_s", res->alone_step_s);
        json_field_double(&w, "scaling_efficiency", res->scaling);
    }
    if (o->save)
        json_field_string(&w, "checkpoint", o->save);
    if (o->trace) {
        json_field_string(&w, "trace", o->trace);
        json_field_int(&w, "trace_events", res->trace_events);
        json_field_int(&w, "trace_steps", traced_steps(o, res));
    }
    json_end_object(&w);
    if (json_writer_done(&w) && fflush(stdout) == 0)
        return true;
    err_set(e, ERR_INPUT, "writing the summary to stdout failed");
    return false;
}

int cmd_train(const Command *cmd, Args *a, int argc, char **argv)
{
    char *no_decay_items[argc + 1];
    List no_decay = {no_decay_items, 0}; /* parse_args fills it: room for every argument */
    TrainFlags f = {.no_decay = &no_decay};
    const Flag flags[] = {
        {"--steps", .value = &f.steps},        {"--accum", .value = &f.accum},
        {"--lr", .value = &f.lr},              {"--min-lr", .value = &f.min_lr},
        {"--warmup", .value = &f.warmup},      {"--cosine", .on = &f.cosine},
        {"--optimizer", .value = &f.optimizer}, {"--weight-decay", .value = &f.wd},
        {"--momentum", .value = &f.momentum},  {"--clip", .value = &f.clip},
        {"--log-every", .value = &f.log_every}, {"--save", .value = &f.save},
        {"--save-every", .value = &f.save_every}, {"--resume", .on = &f.resume},
        {"--resume-anyway", .on = &f.resume_anyway}, {"--auto-resume", .on = &f.auto_resume},
        {"--data", .value = &f.data},          {"--token-bytes", .value = &f.width},
        {"--synthetic", .on = &f.synthetic},   {"--loss", .value = &f.loss},
        {"--set", .list = &a->set},            {"--dim", .list = &a->dim},
        {"--seed", .value = &a->seed},         {"--threads", .value = &a->threads},
        {"--json", .on = &a->json},            {"--weights", .value = &a->weights},
        {"--no-fusion", .on = &a->no_fusion},  {"--mode", .value = &a->mode},
        {"--cache", .value = &a->cache},       {"--checkpoint", .value = &f.checkpoint},
        {"--input", .list = &a->input},        {"--precision", .value = &f.precision},
        {"--loss-scale", .value = &f.loss_scale}, {"--device", .value = &a->device},
        {"--no-decay", .list = &no_decay},
        {"--peak", .value = &a->peak},
        {"--trace", .value = &a->trace},       {"--trace-steps", .value = &f.trace_steps},
        {"--bucket-mb", .value = &f.bucket_mb}, {"--dp-timeout", .value = &f.dp_timeout},
        {"--bind", .value = &f.bind},          {"--reduce-dtype", .value = &f.reduce_dtype},
        {"--zero", .value = &f.zero},          {"--measure-scaling", .on = &f.measure_scaling},
    };
    SymSize sizes[argc + 1];
    uint64_t seed = 0;
    TrainOptions o = {.out = stdout};
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && !a->help)
        rc = check_dim_sizes(cmd, sizes, a->dim.n);
    if (rc == EXIT_OK && !a->help && a->seed && !parse_u64(a->seed, &seed))
        rc = usage_error(cmd, "--seed %s: expected a non-negative integer", a->seed);
    if (rc == EXIT_OK && !a->help)
        rc = check_device(cmd, a);
    Err we = {0};
    if (rc == EXIT_OK && !a->help && !world_from_env(&o.world, &we))
        rc = usage_error(cmd, "%s", we.msg);
    if (rc == EXIT_OK && !a->help)
        rc = place_rank(cmd, &f, &o.world);
    if (rc == EXIT_OK && !a->help)
        rc = parse_flags(cmd, &f, a, &o);
    if (rc == EXIT_OK && !a->help)
        rc = parse_dp_flags(cmd, &f, &o);
    if (rc == EXIT_OK && !a->help)
        rc = parse_positive(cmd, "--peak", a->peak, "GFLOP/s", &o.peak_gflops);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    o.sizes = sizes, o.nsizes = a->dim.n, o.seed = seed;
    char *names[a->input.n + 1];
    const char *files[a->input.n + 1];
    for (int i = 0; i < a->input.n; i++) {
        size_t len;
        const char *file;
        if (!split_pair(a->input.item[i], &len, &file)) {
            for (int j = 0; j < i; j++)
                free(names[j]);
            return usage_error(cmd, "--input %s: expected NAME=FILE.npy", a->input.item[i]);
        }
        names[i] = strndup(a->input.item[i], len), files[i] = file;
    }
    if (a->input.n && (f.data || f.synthetic)) {
        for (int j = 0; j < a->input.n; j++)
            free(names[j]);
        return usage_error(cmd, "--input (a dataset of arrays) excludes --data and --synthetic");
    }
    o.array_names = (const char *const *)names, o.array_files = files, o.narray = a->input.n;
    Err e = {0};
    a->train = true; /* dropout active; train_run gives each micro-batch its rng step */
    Graph *g = load_model(a, seed, &e);
    TrainResult res;
    bool ok = g && train_run(g, &o, &res, &e);
    bool speaks = o.world.rank == 0; /* rank 0 speaks for a data-parallel job */
    if (ok && speaks && a->json)
        ok = summary_json(&o, &res, &e);
    else if (ok && speaks)
        summary_text(&o, &res);
    graph_free(g);
    for (int i = 0; i < a->input.n; i++)
        free(names[i]);
    return ok ? EXIT_OK : cli_fail(&e);
}
