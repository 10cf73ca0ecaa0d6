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

static double mib(double bytes) { return bytes / 1048576.0; }

/* Each rank's parameters, gradients and optimizer state by the ZeRO paper's formulas
 * (Rajbhandari et al.: with p, g, k bytes a parameter, plain DP (p+g+k)Ψ, stage 1
 * (p+g)Ψ + kΨ/N, stage 2 pΨ + (g+k)Ψ/N, stage 3 (p+g+k)Ψ/N; the paper's mixed-precision
 * Adam has p=2, g=2, k=12), at coil's byte counts, beside this plan's figure. */
static void print_zero(const TrainOptions *o, const TrainPlan *p)
{
    double psi = (double)p->psi, n = o->world.size > 1 ? o->world.size : 1;
    double pb = (double)p->params / psi, gb = (double)p->grads_whole / psi,
           kb = (double)p->state_whole / psi;
    double stage[4] = {(pb + gb + kb) * psi, (pb + gb) * psi + kb * psi / n,
                       pb * psi + (gb + kb) * psi / n, (pb + gb + kb) * psi / n};
    static const char *const formula[4] = {"(p+g+k)Ψ", "(p+g)Ψ + kΨ/N", "pΨ + (g+k)Ψ/N",
                                           "(p+g+k)Ψ/N"};
    printf("data parallel: %d rank%s, ZeRO stage %d; each rank's parameters, gradients and "
           "optimizer state by ZeRO's formulas, Ψ = %lld parameters, p = %.0f, g = %.0f, "
           "k = %.0f bytes each (coil's master weights are its f32 parameters: p+g+k = %.0f, "
           "as the paper's 2+2+12):\n", (int)n, n == 1 ? "" : "s", o->zero, (long long)p->psi,
           pb, gb, kb, pb + gb + kb);
    for (int s = 0; s < 4; s++)
        printf("  stage %d  %-14s %12.2f MiB%s\n", s, formula[s], mib(stage[s]),
               s == 3 ? "  (not built: the engine would gather each block's parameters)" : "");
    double planned = (double)(p->params + p->grads + p->optimizer);
    printf("  this plan, stage %d: %.2f MiB", o->zero, mib(planned));
    if (o->zero == 2 && o->accum > 1)
        printf(" (the formula's, plus each micro-batch's gradients, %.2f MiB, which the joint "
               "graph writes whole before they are reduce-scattered)",
               mib((double)p->grads_whole));
    else if (o->zero == 2)
        printf(" (without accumulation no gradients are kept across micro-batches: the joint "
               "graph writes them whole, %.2f MiB, as at stage 1)", mib((double)p->grads_whole));
    else if (o->accum > 1)
        printf(" (the formula's, plus the accumulated gradients, %.2f MiB)",
               mib((double)p->grads_whole));
    printf("\n");
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
    if (o->world.size > 1 || o->zero > 0)
        print_zero(o, p);
    if (mem && p->max_batch >= 0)
        printf("largest micro-batch within %s: B = %lld\n", mem, (long long)p->max_batch);
    else if (mem)
        printf("largest micro-batch within %s: the model has no symbolic batch B\n", mem);
}

int cmd_plan(const Command *cmd, Args *a, int argc, char **argv)
{
    const char *loss = NULL, *memory = NULL, *optimizer = NULL, *accum = NULL, *precision = NULL,
               *checkpoint = NULL, *bandwidth = NULL, *world = NULL, *zero = NULL;
    const Flag flags[] = {
        {"--loss", .value = &loss},           {"--memory", .value = &memory},
        {"--optimizer", .value = &optimizer}, {"--accum", .value = &accum},
        {"--precision", .value = &precision}, {"--set", .list = &a->set},
        {"--dim", .list = &a->dim},           {"--threads", .value = &a->threads},
        {"--no-fusion", .on = &a->no_fusion}, {"--device", .value = &a->device},
        {"--peak", .value = &a->peak},         {"--checkpoint", .value = &checkpoint},
        {"--bandwidth", .value = &bandwidth}, {"--world", .value = &world},
        {"--zero", .value = &zero},
    };
    SymSize sizes[argc + 1];
    int64_t limit = 0, threads, n_accum, ranks;
    uint64_t stage = 0;
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
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--world", world, 1, &ranks);
    if (rc == EXIT_OK && !a->help && zero && !parse_u64(zero, &stage))
        stage = 99; /* refused below */
    if (rc == EXIT_OK && !a->help && (ranks < 1 || ranks > 1 << 20 || stage > 2))
        rc = usage_error(cmd, ranks < 1 || ranks > 1 << 20 ? "--world %s: expected 1 to 1048576 ranks"
                         : "--zero %s: expected 0, 1 or 2 (stage 3 is not built)",
                         ranks < 1 || ranks > 1 << 20 ? world : zero);
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
    o.world.size = (int)ranks, o.zero = (int)stage;
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
