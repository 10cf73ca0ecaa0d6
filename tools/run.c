/* run.c — `coil run`: compile a model for the CPU or (--device cuda) an NVIDIA GPU, or load
 * its package, run it once on the given or drawn inputs, and print each output's
 * checksums (--json: one JSON object); --interp evaluates it with the reference
 * interpreter instead. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "io/npy.h"
#include "ir/summary.h"
#include "runtime/cpu/gemm.h"
#include "tools/cli.h"

/* What ran and how long it took, for the last line. */
typedef struct Outcome {
    Tensor *outputs;
    double seconds, flops;
    Compiled *c;
} Outcome;

/* An output's checksums and range: NaN poisons min and max; an empty tensor has none. */
typedef struct Stats {
    int64_t n, nonfinite;
    double sum, abs_sum, min, max;
} Stats;

static Stats stats_of(const Tensor *t)
{
    Stats s = {.n = tensor_numel(t), .min = INFINITY, .max = -INFINITY};
    for (int64_t k = 0; k < s.n; k++) {
        double v = dtype_load(t->dt, t->data, k);
        s.sum += v;
        s.abs_sum += fabs(v);
        s.nonfinite += !isfinite(v);
        if (isnan(v) || v < s.min)
            s.min = v;
        if (isnan(v) || v > s.max)
            s.max = v;
    }
    return s;
}

/* One line per output: name, shape, sum and mean |x| (checksums). */
static void print_outputs(const Graph *g, const Tensor *outputs)
{
    for (int i = 0; i < g->noutput; i++) {
        const Tensor *t = &outputs[i];
        Stats s = stats_of(t);
        char ty[256];
        printf("%s %s sum=%.6g mean_abs=%.6g\n", g->output_name[i], tensor_fmt(t, ty, sizeof ty),
               s.sum, s.n ? s.abs_sum / (double)s.n : 0.0);
    }
}

static void print_cuda_timing(const Outcome *o, const EngineReport *rep)
{
    const Compiled *c = o->c;
    const CudaEngineStats st = rep->gpu;
    printf("compile %.1f ms (passes %.1f, lowering %.1f, %s %.1f): %d kernels, %d GEMMs, for "
           "%s (%s)\n", (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3,
           c->lower_s * 1e3, c->codegen, c->llvm_s * 1e3, c->p->nkernel,
           st.gemm_cublas + st.gemm_lt, rep->hardware, rep->arch);
    printf("time %.3f ms (GPU, copies in and out included; GEMMs: %d cuBLAS, %d cuBLASLt with "
           "the epilogue fused), %.4g FLOPs\n", o->seconds * 1e3, st.gemm_cublas, st.gemm_lt,
           o->flops);
}

static void print_timing(const Outcome *o)
{
    const Compiled *c = o->c;
    if (!c) {
        printf("time %.3f ms (interpreter), %.4g FLOPs\n", o->seconds * 1e3, o->flops);
        return;
    }
    EngineReport rep = compiled_report(c);
    if (c->device->gpu) {
        print_cuda_timing(o, &rep);
        return;
    }
    EngineStats st = rep.cpu;
    printf("compile %.1f ms (passes %.1f, lowering %.1f, %s %.1f): %d kernels, %d GEMMs\n",
           (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3, c->lower_s * 1e3,
           c->codegen, c->llvm_s * 1e3, c->p->nkernel, st.gemm_generated + st.gemm_blas);
    printf("time %.3f ms (compiled; GEMMs: %d generated, %d %s), %.4g FLOPs\n",
           o->seconds * 1e3, st.gemm_generated, st.gemm_blas, gemm_blas_name(), o->flops);
    if (c->mode == MODE_MAX_AUTOTUNE)
        printf("autotune %.2f s of that (max-autotune: measured, or read from the cache)\n",
               c->tune_s);
}

static void output_path(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s.npy", dir, name);
}

static bool write_outputs(const Graph *g, const Tensor *outputs, const char *dir, Err *e)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        err_set(e, ERR_INPUT, "--out %s: cannot create the directory: %s", dir,
                errno == EEXIST ? "a file is in the way" : strerror(errno));
        return false;
    }
    for (int i = 0; i < g->noutput; i++) {
        char path[4096];
        output_path(path, sizeof path, dir, g->output_name[i]);
        if (!npy_write(path, &outputs[i], e))
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- --json */

/* An extreme of n values: null when there are none. */
static void json_field_range(JsonWriter *w, const char *key, double v, int64_t n)
{
    json_key(w, key);
    if (n)
        json_double(w, v);
    else
        json_null(w);
}

/* An output as data: its type, the checksums the text prints, its range, how many values
 * are not finite, and the file --out wrote. */
static void json_output(JsonWriter *w, const char *name, const Tensor *t, const char *dir)
{
    Stats s = stats_of(t);
    char path[4096];
    json_begin_object(w);
    json_field_string(w, "name", name);
    json_field_string(w, "dtype", dtype_info[t->dt].name);
    json_key(w, "shape");
    json_begin_array(w);
    for (int d = 0; d < t->rank; d++)
        json_int(w, t->shape[d]);
    json_end_array(w);
    json_field_int(w, "elements", s.n);
    json_field_double(w, "sum", s.sum);
    json_field_double(w, "mean", s.n ? s.sum / (double)s.n : 0.0);
    json_field_double(w, "mean_abs", s.n ? s.abs_sum / (double)s.n : 0.0);
    json_field_range(w, "min", s.min, s.n);
    json_field_range(w, "max", s.max, s.n);
    json_field_int(w, "nonfinite", s.nonfinite);
    if (dir)
        output_path(path, sizeof path, dir, name);
    json_field_string(w, "file", dir ? path : NULL);
    json_end_object(w);
}

static void json_gemms(JsonWriter *w, const Compiled *c)
{
    EngineReport rep = compiled_report(c);
    if (c->device->gpu) {
        json_field_string(w, "gpu", rep.hardware);
        json_field_string(w, "arch", rep.arch);
        json_field_int(w, "gemms_cublas", rep.gpu.gemm_cublas);
        json_field_int(w, "gemms_cublaslt", rep.gpu.gemm_lt);
        return;
    }
    EngineStats st = rep.cpu;
    json_field_int(w, "gemms_generated", st.gemm_generated);
    json_field_int(w, "gemms_blas", st.gemm_blas);
    json_field_string(w, "blas", gemm_blas_name());
}

/* What compiling took (the text's "compile" line): each stage, the kernels, the GEMMs. */
static void json_compiled(JsonWriter *w, const Compiled *c)
{
    json_field_string(w, "mode", compile_mode_name(c->mode));
    json_field_double(w, "compile_ms", (c->passes_s + c->lower_s + c->llvm_s) * 1e3);
    json_field_double(w, "passes_ms", c->passes_s * 1e3);
    json_field_double(w, "lowering_ms", c->lower_s * 1e3);
    json_field_string(w, "codegen", c->codegen);
    json_field_double(w, "codegen_ms", c->llvm_s * 1e3);
    json_field_int(w, "kernels", c->p->nkernel);
    json_gemms(w, c);
    if (c->mode == MODE_MAX_AUTOTUNE)
        json_field_double(w, "autotune_s", c->tune_s);
}

static bool print_json(const Prepared *r, const Outcome *o, const Args *a)
{
    JsonWriter w;
    json_writer_init(&w, stdout);
    json_begin_object(&w);
    json_field_string(&w, "model", r->g->name);
    json_field_string(&w, "package", r->package);
    json_field_string(&w, "device", o->c ? o->c->device->name : "cpu");
    json_field_string(&w, "executor", o->c ? "compiled" : "interpreter");
    json_key(&w, "outputs");
    json_begin_array(&w);
    for (int i = 0; i < r->g->noutput; i++)
        json_output(&w, r->g->output_name[i], &o->outputs[i], a->out);
    json_end_array(&w);
    json_field_double(&w, "time_ms", o->seconds * 1e3);
    json_field_double(&w, "flops", o->flops);
    if (o->c)
        json_compiled(&w, o->c);
    json_end_object(&w);
    return json_writer_done(&w);
}

/* ---------------------------------------------------------------- running */

static bool evaluate(const Prepared *r, const Args *a, int threads, uint64_t step, Outcome *o,
                     Err *e)
{
    if (a->interp && r->package) {
        err_set(e, ERR_USAGE, "--interp: %s is a compiled package; interpret its model file",
                r->package);
        return false;
    }
    double t0 = clock_seconds();
    if (a->interp) {
        bool ok = interp_run_at(r->g, step, r->inputs, r->params, o->outputs, &o->flops, e);
        o->seconds = clock_seconds() - t0;
        return ok;
    }
    CompileOptions co = compile_options(a, threads);
    co.tune_sizes = &r->sb;
    Compiled *c = prepared_compile(r, &co, e);
    if (!c)
        return false;
    o->c = c;
    compiled_set_rng_step(c, step);
    t0 = clock_seconds();
    bool ok = compiled_run(c, r->inputs, r->params, o->outputs, e);
    o->seconds = clock_seconds() - t0;
    return ok && graph_flops(r->g, &r->sb, &o->flops, e);
}

int cmd_run(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {
        RUN_FLAGS(a),
        {"--input", .list = &a->input}, {"--weights", .value = &a->weights},
        {"--out", .value = &a->out},    {"--interp", .on = &a->interp},
        {"--train", .on = &a->train},   {"--rng-step", .value = &a->rng_step},
    };
    SymSize sizes[argc + 1];
    uint64_t seed = 0, step = 0;
    int64_t threads;
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && !a->help && a->seed && !parse_u64(a->seed, &seed))
        rc = usage_error(cmd, "--seed %s: expected a non-negative integer", a->seed);
    if (rc == EXIT_OK && !a->help && a->rng_step && !parse_u64(a->rng_step, &step))
        rc = usage_error(cmd, "--rng-step %s: expected a non-negative integer", a->rng_step);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--threads", a->threads, 0, &threads);
    if (rc == EXIT_OK && !a->help)
        rc = check_device(cmd, a);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    Prepared r;
    Outcome o = {0};
    bool ok = prepare(&r, a, sizes, a->dim.n, seed, &e) &&
              (o.outputs = calloc((size_t)r.g->noutput + 1, sizeof(Tensor))) &&
              evaluate(&r, a, (int)threads, step, &o, &e) &&
              (!a->out || write_outputs(r.g, o.outputs, a->out, &e));
    if (ok && a->json && !print_json(&r, &o, a))
        ok = false, err_set(&e, ERR_INPUT, "cannot write the JSON report to stdout");
    else if (ok && !a->json)
        print_outputs(r.g, o.outputs), print_timing(&o);
    else if (!ok && err_ok(&e))
        err_set(&e, ERR_MEMORY, "out of memory");
    rc = ok ? EXIT_OK : cli_fail(&e);
    for (int i = 0; o.outputs && i < r.g->noutput; i++)
        tensor_free(&o.outputs[i]);
    free(o.outputs);
    compiled_free(o.c);
    prepared_free(&r);
    return rc;
}
