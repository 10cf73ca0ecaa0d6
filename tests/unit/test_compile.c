/* test_compile.c — every op compiled, held against the reference interpreter: each graph in
 * tests/models/ops (the fixtures the interpreter is checked against numpy and PyTorch with)
 * through the standard passes, fusion and lowering, run six ways on the fixture's inputs:
 * the loop evaluator with and without fusion (lowering alone) and after the CUDA backend's
 * passes (attention as one step), the engine with LLVM kernels and coil's GEMMs, the same
 * without fusion, and with OpenBLAS GEMMs on two threads. The interpreter runs the same optimised graph, so composites are compared
 * through the same primitives (their decomposition's rounding is test_oracle's concern). */
#include <dirent.h>
#include <stdlib.h>

#include "check.h"
#include "passes/passes.h"
#include "runtime/compiled.h"
#include "runtime/npy.h"

#define FIXTURE_DIR "tests/models/ops"

/* The interpreter rounds each op's f64 result once; compiled f32 code computes in f32
 * (a few ulps per transcendental, sums in another order), so f32 gets 2e-4 relative;
 * f16 and bf16 are computed in f32 and rounded per op, as the interpreter does, so they
 * differ by about one ulp of their format where a rounding tie falls differently. */
static bool close_enough(DType dt, double got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got) || !dtype_info[dt].is_float)
        return got == want;
    double rtol = dt == DT_F32 ? 2e-4 : dt == DT_F16 ? 2e-3 : 1.6e-2;
    return fabs(got - want) <= 1e-5 + rtol * fabs(want);
}

static void compare(const char *label, const char *name, const Tensor *got, const Tensor *want)
{
    char tg[256], tw[256];
    if (strcmp(tensor_fmt(got, tg, sizeof tg), tensor_fmt(want, tw, sizeof tw)) != 0) {
        fprintf(stderr, "%s: %s is %s, the interpreter gives %s\n", label, name, tg, tw);
        check_failures++;
        return;
    }
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++) {
        double g = dtype_load(got->dt, got->data, i), w = dtype_load(want->dt, want->data, i);
        if (!close_enough(want->dt, g, w) && bad++ < 3)
            fprintf(stderr, "%s: %s[%lld] = %.9g, the interpreter gives %.9g\n", label, name,
                    (long long)i, g, w);
    }
    check_failures += bad > 0;
}

typedef struct Case {
    const char *name;
    Graph *g;
    Tensor *in, *params, *want;
    int nparam;
} Case;

static bool load(const char *dir, const char *kase, const char *what, Tensor *t)
{
    char path[1024];
    Err e = {0};
    snprintf(path, sizeof path, "%s/%s.%s.npy", dir, kase, what);
    if (npy_read(path, t, &e))
        return true;
    fprintf(stderr, "%s: %s\n", kase, e.msg);
    check_failures++;
    return false;
}

static void case_free(Case *c)
{
    for (int i = 0; c->g && i < c->g->ninput; i++)
        tensor_free(&c->in[i]);
    for (int i = 0; i < c->nparam; i++)
        tensor_free(&c->params[i]);
    for (int i = 0; c->g && c->want && i < c->g->noutput; i++)
        tensor_free(&c->want[i]);
    free(c->in);
    free(c->params);
    free(c->want);
    graph_free(c->g);
}

/* The graph, its inputs and parameters, and the interpreter's outputs. */
static bool case_load(const char *dir, const char *kase, Case *c)
{
    char path[1024];
    Err e = {0};
    memset(c, 0, sizeof *c);
    c->name = kase;
    snprintf(path, sizeof path, "%s/%s.cir", dir, kase);
    if (!(c->g = ir_parse_file(path, &e))) {
        fprintf(stderr, "%s: %s\n", kase, e.msg);
        check_failures++;
        return false;
    }
    c->nparam = graph_params(c->g, NULL);
    int *ids = calloc((size_t)c->nparam + 1, sizeof *ids);
    c->in = calloc((size_t)c->g->ninput + 1, sizeof *c->in);
    c->params = calloc((size_t)c->nparam + 1, sizeof *c->params);
    c->want = calloc((size_t)c->g->noutput + 1, sizeof *c->want);
    graph_params(c->g, ids);
    Graph *opt = graph_copy(c->g, &e);
    bool ok = ids && c->in && c->params && c->want && opt && run_passes(&opt, pass_pipeline, &e);
    for (int i = 0; ok && i < c->g->ninput; i++)
        ok = load(dir, kase, node_name(&c->g->node[c->g->input[i]]), &c->in[i]);
    for (int i = 0; ok && i < c->nparam; i++)
        ok = load(dir, kase, node_name(&c->g->node[ids[i]]), &c->params[i]);
    free(ids);
    if (ok && !(ok = interp_run(opt, c->in, c->params, c->want, NULL, &e))) {
        fprintf(stderr, "%s: the interpreter fails: %s\n", kase, e.msg);
        check_failures++;
    }
    graph_free(opt);
    return ok;
}

static void check_against(const Case *c, const char *how, Tensor *out, const Tensor *want)
{
    char label[512];
    snprintf(label, sizeof label, "%s [%s]", c->name, how);
    for (int i = 0; i < c->g->noutput; i++) {
        compare(label, c->g->output_name[i], &out[i], &want[i]);
        tensor_free(&out[i]);
    }
}

static void check_outputs(const Case *c, const char *how, Tensor *out)
{
    check_against(c, how, out, c->want);
}

/* Lowering alone: the program through the loop evaluator, after the CPU's passes or the
 * CUDA backend's (attention kept whole, as one step). */
static void run_loop_eval(const Case *c, bool no_fusion, const char *pipeline, Tensor *out)
{
    Err e = {0};
    Graph *g = graph_copy(c->g, &e);
    LowerOptions lo = {.no_fusion = no_fusion};
    Program *p = g && run_passes(&g, pipeline, &e) ? loop_lower(g, &lo, &e) : NULL;
    char how[128];
    snprintf(how, sizeof how, "loop_eval%s%s", no_fusion ? ", no fusion" : "",
             pipeline == pass_pipeline_cuda ? ", CUDA passes" : "");
    Tensor want[16] = {{0}}; /* the interpreter on the same graph: attention whole or not */
    if (p && interp_run(g, c->in, c->params, want, NULL, &e) &&
        loop_eval(p, c->in, c->params, out, &e))
        check_against(c, how, out, want);
    else {
        fprintf(stderr, "%s [loop_eval]: %s\n", c->name, e.msg);
        check_failures++;
    }
    for (int i = 0; i < c->g->noutput; i++)
        tensor_free(&want[i]);
    program_free(p);
    graph_free(g);
}

static void run_compiled(const Case *c, const char *how, CompileOptions o, Tensor *out)
{
    Err e = {0};
    Compiled *cc = compile_graph(c->g, &o, &e);
    if (cc && compiled_run(cc, c->in, c->params, out, &e))
        check_outputs(c, how, out);
    else {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
    }
    compiled_free(cc);
}

static void run_case(const char *dir, const char *kase)
{
    Case c;
    Tensor out[16] = {{0}};
    if (case_load(dir, kase, &c) && c.g->noutput <= 16) {
        run_loop_eval(&c, false, pass_pipeline, out);
        run_loop_eval(&c, true, pass_pipeline, out);
        run_loop_eval(&c, false, pass_pipeline_cuda, out);
        run_compiled(&c, "llvm", (CompileOptions){.threads = 1}, out);
        run_compiled(&c, "llvm, no fusion", (CompileOptions){.threads = 1, .no_fusion = true}, out);
        run_compiled(&c, "llvm, OpenBLAS, 2 threads",
                     (CompileOptions){.threads = 2, .blas_gemm = true}, out);
    }
    case_free(&c);
}

static int is_case_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".cir") == 0;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : FIXTURE_DIR;
    struct dirent **list;
    int n = scandir(dir, &list, is_case_file, alphasort);
    if (n < 0) {
        fprintf(stderr, "cannot read %s (run from the source root)\n", dir);
        return 1;
    }
    if (!cpu_available())
        printf("note: built without LLVM: the engine runs the loop evaluator\n");
    for (int i = 0; i < n; i++) {
        list[i]->d_name[strlen(list[i]->d_name) - 4] = '\0';
        run_case(dir, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    CHECK(n >= 100);
    printf("%d cases compiled and checked\n", n);
    return check_status();
}
