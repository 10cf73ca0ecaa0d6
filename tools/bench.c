/* bench.c — `coil bench`: compile a model, then time it in this process: warm-up runs,
 * then the median (and min, max) of timed runs; throughput, GFLOP/s from the model's FLOP
 * count, the fraction of the FMA peak measured on the same threads, planned memory and
 * the process's peak resident set. --json gives what bench/run.sh reads; --profile each
 * step's time under the layer it computes; --trace every run as a Chrome/Perfetto trace.
 * The outputs the first run allocates are reused by every later one (the engine writes into
 * output tensors of the right shape: reuse_output_tensors), as coil_run_named does with the
 * outputs it keeps between calls (it then copies the ones asked for into a caller's
 * buffers, or hands them over): a run pays no fresh pages for its outputs (GPT-2's 206 MB of
 * logits: 5-8% of its run). bench/README.md says what the peers do. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/json.h"
#include "ir/summary.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/peak.h"
#include "runtime/pool.h"
#include "runtime/trace.h"
#include "tools/cli.h"

/* --profile: every step's time per run, slowest first, named by its layer. */
typedef struct ProfileRow {
    int step;
    double seconds; /* per run */
} ProfileRow;

typedef struct Profile {
    StepTable *steps; /* names, FLOPs and bytes (at the runs' sizes) */
    ProfileRow *row;  /* every step, slowest first */
    int n;
    double seconds;   /* a whole run: the steps' sum */
} Profile;

typedef struct Figures {
    int64_t batch, threads, runs, warmup;
    double compile_s, median_s, min_s, max_s, flops, peak_gflops;
    int64_t planned_bytes, rss_bytes;
    EngineStats gemms;         /* the CPU's */
    CudaEngineStats gpu;       /* a GPU's (device set) */
    const char *device;        /* NULL: the CPU; else the GPU's name */
    const char *dtype;         /* the model's float dtype (model_dtype) */
    CompileMode mode;
    double tune_s;             /* max-autotune: seconds the tuning run spent tuning */
    double default_median_s;   /* max-autotune: the same runs with the heuristics' kernels */
    char gpu_name[256];
    Profile prof;              /* --profile */
    int64_t trace_events;      /* --trace: events written */
} Figures;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run into outputs (kept from the run before; compiled_run frees them if it fails). */
static bool run_once(Compiled *c, const Prepared *r, Tensor *outputs, double *seconds, Err *e)
{
    double t0 = clock_seconds();
    bool ok = compiled_run(c, r->inputs, r->params, outputs, e);
    *seconds = clock_seconds() - t0;
    return ok;
}

static bool time_runs(Compiled *c, const Prepared *r, Figures *f, Err *e)
{
    Tensor *outputs = calloc((size_t)r->g->noutput + 1, sizeof *outputs);
    double *t = calloc((size_t)f->runs, sizeof *t), ignore;
    bool ok = outputs && t;
    for (int64_t i = 0; ok && i < f->warmup; i++)
        ok = run_once(c, r, outputs, &ignore, e);
    for (int64_t i = 0; ok && i < f->runs; i++)
        ok = run_once(c, r, outputs, &t[i], e);
    if (ok) {
        qsort(t, (size_t)f->runs, sizeof *t, cmp_double);
        f->median_s = f->runs % 2 ? t[f->runs / 2] : 0.5 * (t[f->runs / 2 - 1] + t[f->runs / 2]);
        f->min_s = t[0];
        f->max_s = t[f->runs - 1];
        EngineReport rep = compiled_report(c);
        f->gpu = rep.gpu, f->gemms = rep.cpu;
    } else if (err_ok(e)) {
        err_set(e, ERR_MEMORY, "out of memory");
    }
    for (int i = 0; outputs && i < r->g->noutput; i++)
        tensor_free(&outputs[i]);
    free(outputs);
    free(t);
    return ok;
}

/* max-autotune: after the tuned runs (the first warm-up run tuned), the same runs with the
 * heuristics' kernels, then the tuned ones again: the figures reported are that last
 * pass, timed back to back with the default one on the same engine. */
static bool time_default(Compiled *c, const Prepared *r, Figures *f, Err *e)
{
    compiled_use_tuning(c, false);
    bool ok = time_runs(c, r, f, e);
    double def = f->median_s;
    compiled_use_tuning(c, true);
    ok = ok && time_runs(c, r, f, e);
    f->default_median_s = def, f->tune_s = c->tune_s;
    return ok;
}

static int64_t peak_rss(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (int64_t)u.ru_maxrss * 1024 : -1;
}

/* What the model computes in: its first float parameter's dtype (else its first float
 * input's), so a package compiled with --dtype reports its own. */
static const char *model_dtype(const Graph *g)
{
    for (int i = 0; i < g->nnode; i++) {
        const Node *n = &g->node[i];
        if ((n->op == OP_PARAM || n->op == OP_INPUT) && dtype_info[n->type.dt].is_float)
            return dtype_info[n->type.dt].name;
    }
    return dtype_info[DT_F32].name;
}

/* The batch: symbol B's size, else the first input's leading dimension, else 1. */
static int64_t batch_of(const Prepared *r)
{
    int b = graph_sym_find(r->g, "B", 1);
    if (b >= 0 && r->sb.known[b])
        return r->sb.val[b];
    return r->g->ninput && r->inputs[0].rank ? r->inputs[0].shape[0] : 1;
}

static void print_profile(const Profile *pr);

static void print_text_report(const Prepared *r, const Figures *f, const Args *a)
{
    double gflops = f->flops / f->median_s * 1e-9;
    if (f->device)
        printf("model @%s in %s, batch %lld, on %s (times include copying inputs in and "
               "outputs out)\n", r->g->name, f->dtype, (long long)f->batch, f->device);
    else
        printf("model @%s in %s, batch %lld, %lld threads (%s)\n", r->g->name, f->dtype,
               (long long)f->batch, (long long)f->threads, peak_isa());
    printf("compile   %.1f ms\n", f->compile_s * 1e3);
    printf("latency   %.3f ms median (min %.3f, max %.3f) over %lld runs after %lld warm-up\n",
           f->median_s * 1e3, f->min_s * 1e3, f->max_s * 1e3, (long long)f->runs,
           (long long)f->warmup);
    printf("throughput %.1f samples/s\n", (double)f->batch / f->median_s);
    if (f->mode == MODE_MAX_AUTOTUNE && f->default_median_s > 0)
        printf("max-autotune %.3f ms median against %.3f ms in default mode: %.3fx (tuning "
               "took %.2f s, in the first run)\n", f->median_s * 1e3, f->default_median_s * 1e3,
               f->default_median_s / f->median_s, f->tune_s);
    if (f->peak_gflops > 0)
        printf("compute   %.1f GFLOP/s = %.1f%% of the %.1f GFLOP/s %s peak (%.4g FLOPs per "
               "call)\n", gflops, 100 * gflops / f->peak_gflops, f->peak_gflops,
               f->device ? "given" : "FMA", f->flops);
    else
        printf("compute   %.1f GFLOP/s (%.4g FLOPs per call; --peak gives the fraction)\n",
               gflops, f->flops);
    printf("memory    %.2f MiB planned, %.2f MiB peak resident (the whole process)\n",
           (double)f->planned_bytes / 1048576.0, (double)f->rss_bytes / 1048576.0);
    if (f->device)
        printf("gemms     %d cuBLAS, %d cuBLASLt with the epilogue fused; %d kernel launches "
               "per run%s\n", f->gpu.gemm_cublas, f->gpu.gemm_lt, f->gpu.launches,
               f->gpu.graph_replays ? ", replayed as a CUDA graph" : "");
    else
        printf("gemms     %d generated, %d %s\n", f->gemms.gemm_generated, f->gemms.gemm_blas,
               gemm_blas_name());
    if (a->trace)
        printf("trace     %lld events in %s (open it in ui.perfetto.dev or chrome://tracing)\n",
               (long long)f->trace_events, a->trace);
    if (f->prof.row)
        print_profile(&f->prof);
}

/* The ten slowest steps, after the model's figures. */
static void print_profile(const Profile *pr)
{
    printf("profile   %.3f ms per run in %d steps; the slowest:\n", pr->seconds * 1e3, pr->n);
    for (int i = 0; i < pr->n && i < 10; i++) {
        const ProfileRow *r = &pr->row[i];
        const StepInfo *info = &pr->steps->step[r->step];
        printf("  step %-4d %9.3f ms %5.1f%% %8.1f GFLOP/s  %s\n", r->step, r->seconds * 1e3,
               pr->seconds > 0 ? 100 * r->seconds / pr->seconds : 0.0,
               r->seconds > 0 ? info->flops / r->seconds * 1e-9 : 0.0, info->name);
    }
}

/* The profile as JSON: every step, slowest first. */
static void json_profile(JsonWriter *w, const Profile *pr)
{
    json_key(w, "profile");
    json_begin_array(w);
    for (int i = 0; i < pr->n; i++) {
        const ProfileRow *r = &pr->row[i];
        const StepInfo *info = &pr->steps->step[r->step];
        json_begin_object(w);
        json_field_int(w, "step", r->step);
        json_field_string(w, "name", info->name);
        json_field_string(w, "layer", info->layer);
        json_field_string(w, "kind", info->kind);
        json_field_string(w, "kernel", info->kernel);
        json_field_string(w, "source", info->source);
        json_field_double(w, "ms", r->seconds * 1e3);
        json_field_double(w, "share", pr->seconds > 0 ? r->seconds / pr->seconds : 0);
        json_field_double(w, "flops", info->flops);
        json_field_int(w, "bytes", info->bytes);
        json_end_object(w);
    }
    json_end_array(w);
}

static bool print_json_report(const Prepared *r, const Figures *f, const Args *a)
{
    double gflops = f->flops / f->median_s * 1e-9;
    JsonWriter w;
    json_writer_init(&w, stdout);
    json_begin_object(&w);
    json_field_string(&w, "engine", "coil");
    json_field_string(&w, "device", f->device ? f->device : "cpu");
    json_field_string(&w, "model", r->g->name);
    json_field_string(&w, "dtype", f->dtype);
    json_field_int(&w, "batch", f->batch);
    json_field_int(&w, "threads", f->threads);
    json_field_double(&w, "compile_s", f->compile_s);
    json_field_double(&w, "median_ms", f->median_s * 1e3);
    json_field_double(&w, "min_ms", f->min_s * 1e3);
    json_field_double(&w, "max_ms", f->max_s * 1e3);
    json_field_int(&w, "runs", f->runs);
    json_field_int(&w, "warmup", f->warmup);
    json_field_double(&w, "samples_per_s", (double)f->batch / f->median_s);
    json_field_double(&w, "flops", f->flops);
    json_field_double(&w, "gflops", gflops);
    json_field_double(&w, "peak_gflops", f->peak_gflops);
    json_field_double(&w, "peak_fraction", f->peak_gflops > 0 ? gflops / f->peak_gflops : 0.0);
    json_field_int(&w, "peak_memory_bytes", f->rss_bytes);
    json_field_int(&w, "planned_bytes", f->planned_bytes);
    json_field_string(&w, "isa", f->device ? "cuda" : peak_isa());
    json_field_int(&w, "gemm_generated", f->gemms.gemm_generated);
    json_field_int(&w, "gemm_blas", f->gemms.gemm_blas);
    json_field_int(&w, "gemm_cublas", f->gpu.gemm_cublas);
    json_field_int(&w, "gemm_cublaslt", f->gpu.gemm_lt);
    json_field_bool(&w, "cuda_graph", f->gpu.graph_replays > 0);
    json_field_string(&w, "mode", compile_mode_name(f->mode));
    json_field_double(&w, "tune_s", f->tune_s);
    json_field_double(&w, "default_median_ms", f->default_median_s * 1e3);
    if (a->trace) {
        json_field_string(&w, "trace", a->trace);
        json_field_int(&w, "trace_events", f->trace_events);
    }
    if (f->prof.row)
        json_profile(&w, &f->prof);
    json_end_object(&w);
    return json_writer_done(&w);
}

/* Each step's time per run (the profile's sums over every run, warm-up included), named
 * by runtime/trace.h's step table, slowest first. */
static bool collect_profile(const Compiled *c, const Figures *f, Profile *pr, Err *e)
{
    const double *t = compiled_step_seconds(c);
    const SymBind *sb = compiled_symbols(c);
    int n = c->p->nstep;
    double runs = (double)(f->runs + f->warmup);
    pr->steps = step_table_new(c->p, e);
    pr->row = calloc((size_t)n + 1, sizeof *pr->row);
    if (!pr->steps || !pr->row || !sb || !step_table_size(pr->steps, sb, e)) {
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "out of memory profiling");
        return false;
    }
    for (int s = 0; s < n; s++) {
        pr->row[s] = (ProfileRow){s, t[s] / runs};
        pr->seconds += t[s] / runs;
    }
    for (int i = 0; i < n; i++) /* insertion sort: steps are few */
        for (int j = i; j > 0 && pr->row[j].seconds > pr->row[j - 1].seconds; j--) {
            ProfileRow tmp = pr->row[j];
            pr->row[j] = pr->row[j - 1];
            pr->row[j - 1] = tmp;
        }
    pr->n = n;
    return true;
}

static void profile_free(Profile *pr)
{
    step_table_free(pr->steps);
    free(pr->row);
}

/* Compile (recording every run into trace, when given), time, and keep the figures. */
static bool measure(const Prepared *r, const Args *a, Trace *trace, Figures *f, Err *e)
{
    CompileOptions co = compile_options(a, (int)f->threads);
    co.tune_sizes = &r->sb;
    co.profile = a->profile;
    co.trace = trace;
    double t0 = clock_seconds();
    Compiled *c = prepared_compile(r, &co, e);
    f->compile_s = clock_seconds() - t0;
    bool ok = c && graph_flops(r->g, &r->sb, &f->flops, e) && time_runs(c, r, f, e);
    f->mode = co.mode;
    if (ok && co.mode == MODE_MAX_AUTOTUNE)
        ok = time_default(c, r, f, e);
    const MemoryPlan *mp = ok ? compiled_plan(c) : NULL;
    if (ok && c->device->gpu) {
        snprintf(f->gpu_name, sizeof f->gpu_name, "%s", compiled_report(c).hardware);
        f->device = f->gpu_name;
    }
    if (mp)
        f->planned_bytes = mp->arena_bytes + mp->param_bytes + mp->io_bytes;
    if (ok && a->profile)
        ok = collect_profile(c, f, &f->prof, e);
    if (ok && trace) {
        f->trace_events = trace_events(trace);
        ok = trace_write(trace, a->trace, e);
    }
    compiled_free(c);
    f->rss_bytes = peak_rss();
    return ok;
}

/* The run, traced into a->trace when asked. */
static bool measure_traced(const Prepared *r, const Args *a, Figures *f, Err *e)
{
    Trace *trace = a->trace ? trace_new(e) : NULL;
    bool ok = (!a->trace || trace) && measure(r, a, trace, f, e);
    trace_free(trace);
    return ok;
}

int cmd_bench(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {
        RUN_FLAGS(a),
        {"--batch", .value = &a->batch},   {"--runs", .value = &a->runs},
        {"--warmup", .value = &a->warmup}, {"--peak", .value = &a->peak},
        {"--profile", .on = &a->profile},  {"--trace", .value = &a->trace},
    };
    SymSize sizes[argc + 2];
    Figures f = {0};
    int nsizes = 0;
    uint64_t seed = 0;
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help && (rc = check_model_args(cmd, a, sizes)) == EXIT_OK)
        nsizes = a->dim.n;
    if (rc == EXIT_OK && !a->help)
        rc = parse_batch(cmd, a, sizes, &nsizes);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--threads", a->threads, pool_default_threads(), &f.threads);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--runs", a->runs, 20, &f.runs);
    uint64_t warmup = 3;
    if (rc == EXIT_OK && !a->help && a->warmup && (!parse_u64(a->warmup, &warmup) || warmup > 1000000))
        rc = usage_error(cmd, "--warmup %s: expected a non-negative integer", a->warmup);
    f.warmup = (int64_t)warmup;
    if (rc == EXIT_OK && !a->help && a->seed && !parse_u64(a->seed, &seed))
        rc = usage_error(cmd, "--seed %s: expected a non-negative integer", a->seed);
    if (rc == EXIT_OK && !a->help)
        rc = parse_positive(cmd, "--peak", a->peak, "GFLOP/s", &f.peak_gflops);
    if (rc == EXIT_OK && !a->help)
        rc = check_device(cmd, a);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    Prepared r;
    bool ok = prepare(&r, a, sizes, nsizes, seed, &e);
    f.dtype = ok ? model_dtype(r.g) : NULL;
    if (ok && a->batch && graph_sym_find(r.g, "B", 1) < 0) {
        err_set(&e, ERR_USAGE, "--batch: model @%s has no symbolic dimension B", r.g->name);
        ok = false;
    }
    if (ok && !f.peak_gflops && !device_is_cuda(a)) /* a GPU's peak: --peak (dtype-dependent) */
        f.peak_gflops = peak_fma_gflops((int)f.threads, 0.2);
    f.batch = ok ? batch_of(&r) : 0;
    ok = ok && measure_traced(&r, a, &f, &e);
    if (ok && a->json && !print_json_report(&r, &f, a))
        ok = false, err_set(&e, ERR_INPUT, "cannot write the JSON report to stdout");
    if (ok && !a->json)
        print_text_report(&r, &f, a);
    rc = ok ? EXIT_OK : cli_fail(&e);
    profile_free(&f.prof);
    prepared_free(&r);
    return rc;
}
