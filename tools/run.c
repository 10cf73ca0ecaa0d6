/* run.c — `coil run`: compile a model for the CPU or (--device cuda) an NVIDIA GPU, or load
 * its package, run it once on the given or drawn inputs, and print each output's
 * checksums; --interp evaluates it with the reference interpreter instead. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/gemm.h"
#include "runtime/npy.h"
#include "runtime/summary.h"
#include "tools/cli.h"

/* What ran and how long it took, for the last line. */
typedef struct Outcome {
    Tensor *outputs;
    double seconds, flops;
    Compiled *c;
} Outcome;

/* One line per output: name, shape, sum and mean |x| (checksums). */
static void print_outputs(const Graph *g, const Tensor *outputs)
{
    for (int i = 0; i < g->noutput; i++) {
        const Tensor *t = &outputs[i];
        double sum = 0, abs_sum = 0;
        int64_t n = tensor_numel(t);
        for (int64_t k = 0; k < n; k++) {
            double v = dtype_load(t->dt, t->data, k);
            sum += v;
            abs_sum += fabs(v);
        }
        char ty[256];
        printf("%s %s sum=%.6g mean_abs=%.6g\n", g->output_name[i], tensor_fmt(t, ty, sizeof ty),
               sum, n ? abs_sum / (double)n : 0.0);
    }
}

static void print_cuda_timing(const Outcome *o)
{
    const Compiled *c = o->c;
    CudaEngineStats st = cuda_engine_stats(c->cu);
    const CudaDeviceInfo *d = cuda_engine_device(c->cu);
    const char *how = c->from_object ? "loading the cubin" : st.cubin_cached ? "NVRTC, cached"
                                                                              : "NVRTC";
    printf("compile %.1f ms (passes %.1f, lowering %.1f, %s %.1f): %d kernels, %d GEMMs, for "
           "%s (%s)\n", (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3,
           c->lower_s * 1e3, how, c->llvm_s * 1e3, c->p->nkernel, st.gemm_cublas + st.gemm_lt,
           d->name, d->arch);
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
    if (c->cu) {
        print_cuda_timing(o);
        return;
    }
    EngineStats st = engine_stats(c->en);
    printf("compile %.1f ms (passes %.1f, lowering %.1f, %s %.1f): %d kernels, %d GEMMs\n",
           (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3, c->lower_s * 1e3,
           c->from_object ? "loading the object" : c->m ? "LLVM" : "no code generator: loop evaluator",
           c->llvm_s * 1e3, c->p->nkernel,
           st.gemm_generated + st.gemm_blas);
    printf("time %.3f ms (compiled; GEMMs: %d generated, %d %s), %.4g FLOPs\n",
           o->seconds * 1e3, st.gemm_generated, st.gemm_blas, gemm_blas_name(), o->flops);
    if (c->mode == MODE_MAX_AUTOTUNE)
        printf("autotune %.2f s of that (max-autotune: measured, or read from the cache)\n",
               c->tune_s);
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
        snprintf(path, sizeof path, "%s/%s.npy", dir, g->output_name[i]);
        if (!npy_write(path, &outputs[i], e))
            return false;
    }
    return true;
}

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
        {"--input", .list = &a->input}, {"--set", .list = &a->set},
        {"--dim", .list = &a->dim},     {"--weights", .value = &a->weights},
        {"--out", .value = &a->out},    {"--seed", .value = &a->seed},
        {"--interp", .on = &a->interp}, {"--train", .on = &a->train},
        {"--threads", .value = &a->threads}, {"--no-fusion", .on = &a->no_fusion},
        {"--blas", .on = &a->blas},     {"--device", .value = &a->device},
        {"--cuda-graphs", .on = &a->graphs}, {"--allow-tf32", .on = &a->tf32},
        {"--mode", .value = &a->mode},  {"--cache", .value = &a->cache},
        {"--rng-step", .value = &a->rng_step}, {"--dtype", .value = &a->dtype},
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
    if (ok) {
        print_outputs(r.g, o.outputs);
        print_timing(&o);
    } else if (err_ok(&e)) {
        err_set(&e, ERR_INPUT, "out of memory");
    }
    rc = ok ? EXIT_OK : cli_fail(&e);
    for (int i = 0; o.outputs && i < r.g->noutput; i++)
        tensor_free(&o.outputs[i]);
    free(o.outputs);
    compiled_free(o.c);
    prepared_free(&r);
    return rc;
}
