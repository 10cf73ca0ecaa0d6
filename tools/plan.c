/* plan.c — `coil plan MODEL`: a training step's memory and time, before anything runs. */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "train/train.h"

/* "80GiB", "512MiB", "2e9": bytes; false for anything else. */
static bool parse_bytes(const char *s, int64_t *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    static const struct { const char *unit; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TiB", 1099511627776.0}};
    for (size_t i = 0; end != s && i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].unit) == 0 && v > 0) {
            *out = (int64_t)(v * units[i].scale);
            return true;
        }
    return false;
}

static void line(const char *what, int64_t bytes, int64_t total)
{
    printf("  %-20s %12.2f MiB  %5.1f%%\n", what, (double)bytes / 1048576.0,
           total > 0 ? 100.0 * (double)bytes / (double)total : 0.0);
}

static void print_plan(const Graph *g, const TrainOptions *o, const TrainPlan *p, const char *mem)
{
    printf("plan @%s: one training step (%s, %s, %lld micro-batch%s)\n", g->name,
           optim_name(o->opt.kind), o->precision ? dtype_info[o->precision].name : "f32", (long long)o->accum, o->accum > 1 ? "es" : "");
    line("parameters", p->params, p->total);
    line("gradients", p->grads, p->total);
    line("optimizer state", p->optimizer, p->total);
    line("saved activations", p->saved, p->total);
    line("workspace", p->workspace, p->total);
    line("inputs", p->inputs, p->total);
    line("total", p->total, p->total);
    printf("FLOPs per step %.4g (%.4g with recomputation); roofline %.3f ms (compute %.3f ms at %.1f GFLOP/s, memory "
           "%.3f ms at %.1f GB/s)\n", p->flops, p->hflops, p->step_s * 1e3, p->compute_s * 1e3,
           p->peak_gflops, p->memory_s * 1e3, p->bandwidth_gbs);
    if (mem && p->max_batch >= 0)
        printf("largest micro-batch within %s: B = %lld\n", mem, (long long)p->max_batch);
    else if (mem)
        printf("largest micro-batch within %s: the model has no symbolic batch B\n", mem);
}

int cmd_plan(const Command *cmd, Args *a, int argc, char **argv)
{
    const char *loss = NULL, *memory = NULL, *optimizer = NULL, *accum = NULL, *precision = NULL,
               *checkpoint = NULL, *bandwidth = NULL;
    const Flag flags[] = {
        {"--loss", .value = &loss},           {"--memory", .value = &memory},
        {"--optimizer", .value = &optimizer}, {"--accum", .value = &accum},
        {"--precision", .value = &precision}, {"--set", .list = &a->set},
        {"--dim", .list = &a->dim},           {"--threads", .value = &a->threads},
        {"--no-fusion", .on = &a->no_fusion}, {"--device", .value = &a->device},
        {"--peak", .value = &a->peak},         {"--checkpoint", .value = &checkpoint},
        {"--bandwidth", .value = &bandwidth},
    };
    SymSize sizes[argc + 1];
    int64_t limit = 0, threads, n_accum;
    TrainOptions o = {.opt = {.kind = OPT_ADAMW}, .out = stdout};
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && !a->help)
        rc = check_dim_sizes(cmd, sizes, a->dim.n);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--threads", a->threads, 0, &threads);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--accum", accum, 1, &n_accum);
    if (rc == EXIT_OK && !a->help && memory && !parse_bytes(memory, &limit))
        rc = usage_error(cmd, "--memory %s: expected a size such as 80GiB or 512MiB", memory);
    if (rc == EXIT_OK && !a->help && optimizer && !optim_parse(optimizer, &o.opt.kind))
        rc = usage_error(cmd, "--optimizer %s: expected adamw, sgd or lion", optimizer);
    if (rc == EXIT_OK && !a->help && checkpoint && !remat_mode_parse(checkpoint, &o.checkpoint))
        rc = usage_error(cmd, "--checkpoint %s: expected none or auto", checkpoint);
    if (rc == EXIT_OK && !a->help && precision && !precision_parse(precision, &o.precision))
        rc = usage_error(cmd, "--precision %s: expected f32, bf16 or f16", precision);
    if (rc == EXIT_OK && !a->help && (rc = check_device(cmd, a)) == EXIT_OK && device_is_cuda(a) &&
        (!a->peak || !bandwidth))
        rc = usage_error(cmd, "--device cuda: give the GPU's --peak GFLOPS (for the dtype the "
                         "GEMMs run in) and --bandwidth GB/s; nothing is measured on a GPU here");
    if (rc == EXIT_OK && !a->help)
        rc = parse_positive(cmd, "--bandwidth", bandwidth, "GB/s", &o.bandwidth_gbs);
    if (rc == EXIT_OK && !a->help)
        rc = parse_positive(cmd, "--peak", a->peak, "GFLOP/s", &o.peak_gflops);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    o.loss = loss, o.accum = n_accum, o.sizes = sizes, o.nsizes = a->dim.n;
    o.opt.momentum = o.opt.kind == OPT_SGD ? 0.9 : 0;
    o.compile = compile_options(a, (int)threads);
    Err e = {0};
    a->train = true; /* the graph coil train builds: dropout active */
    Graph *g = load_model(a, 0, &e);
    TrainPlan p;
    bool ok = g && train_plan(g, &o, limit, &p, &e);
    if (ok)
        print_plan(g, &o, &p, memory);
    graph_free(g);
    return ok ? EXIT_OK : cli_fail(&e);
}
