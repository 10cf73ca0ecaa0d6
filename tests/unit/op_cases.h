/* op_cases.h — the op fixtures of tests/models/ops as test cases, shared by test_compile.c
 * and test_cuda_run.c: a case's graph, inputs and parameters, the interpreter's outputs on
 * the optimised graph, and the comparison of a compiled run's outputs with them at the
 * tolerances compiled code is held to. Static functions: each test includes it once. */
#ifndef COIL_TEST_OP_CASES_H
#define COIL_TEST_OP_CASES_H

#include <dirent.h>
#include <stdlib.h>

#include "check.h"
#include "io/npy.h"
#include "passes/passes.h"

#define FIXTURE_DIR "tests/models/ops"

/* The interpreter rounds each op's f64 result once; compiled f32 code computes in f32
 * (a few ulps per transcendental, sums in another order), so f32 gets 2e-4 relative;
 * f16 and bf16 are computed in f32 and rounded per op, as the interpreter does, so they
 * differ by about one ulp of their format where a rounding tie falls differently. */
static bool fixture_close(DType dt, double got, double want)
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
        if (!fixture_close(want->dt, g, w) && bad++ < 3)
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

/* out against want (then freed), labelled with the case and how out was computed. */
static void check_against(const Case *c, const char *how, Tensor *out, const Tensor *want)
{
    char label[512];
    snprintf(label, sizeof label, "%s [%s]", c->name, how);
    for (int i = 0; i < c->g->noutput; i++) {
        compare(label, c->g->output_name[i], &out[i], &want[i]);
        tensor_free(&out[i]);
    }
}

static inline void check_outputs(const Case *c, const char *how, Tensor *out)
{
    check_against(c, how, out, c->want);
}

static int is_case_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".cir") == 0;
}

#endif
