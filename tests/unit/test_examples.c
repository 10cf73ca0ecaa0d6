/* test_examples.c — every model in examples/ compiles, verifies and runs at a small size
 * with initialised parameters and random inputs; outputs have the declared shapes and are
 * finite; the summary's shape-only FLOP count equals the interpreter's; and each model's
 * own invariants hold (tiny: probs = softmax(logits); gpt2: causal). */
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "frontend/frontend.h"
#include "ir/summary.h"
#include "runtime/init.h"

typedef struct Example {
    const char *path;
    const char *set[6];
    int nset;
    SymSize dims[2];
    int ndims;
    const char *out_shape[2]; /* the outputs' shapes at this size */
    double seconds;           /* the CPU time it may take (0: 1 s) */
} Example;

static const Example examples[] = {
    {"examples/tiny.coil", {0}, 0, {{"B", 3}}, 1, {"f32[3,10]", "f32[3,10]"}, 0},
    {"examples/mlp.coil", {"layers=3", "hidden=32", "classes=5"}, 3, {{"B", 4}}, 1, {"f32[4,5]"}, 0},
    {"examples/gpt2.coil", {"layers=2", "heads=2", "hidden=16", "vocab=23", "context=8"}, 5,
     {{"B", 2}, {"T", 6}}, 2, {"f32[2,6,23]"}, 0},
    /* 11.2 M parameters to draw and to read, whatever the image size */
    {"examples/resnet18.coil", {"size=16", "classes=10"}, 2, {{"B", 1}}, 1, {"f32[1,10]"}, 4},
};

/* A model run: its graph, inputs, params and outputs, all owned here. */
typedef struct Run {
    Graph *g;
    SymBind sb;
    Tensor in[4], *params, out[4];
    int nparam;
    double flops;
} Run;

static bool run_setup(const Example *ex, Run *r, Err *e)
{
    ModelOptions opt = {.set = ex->set, .nset = ex->nset};
    bool given[4] = {false};
    memset(r, 0, sizeof *r);
    if (!(r->g = model_load(ex->path, &opt, e)) || !ir_verify(r->g, e))
        return false;
    r->nparam = graph_params(r->g, NULL);
    r->params = calloc((size_t)r->nparam + 1, sizeof *r->params);
    return r->g->ninput <= 4 && r->g->noutput <= 4 &&
           init_symbols(r->g, NULL, given, ex->dims, ex->ndims, 1, &r->sb, e) &&
           init_params(r->g, &r->sb, 1, r->params, e) && init_inputs(r->g, &r->sb, 2, given, r->in, e);
}

static bool run_eval(Run *r, Err *e)
{
    return interp_run(r->g, r->in, r->params, r->out, &r->flops, e);
}

static void run_free(Run *r)
{
    for (int i = 0; r->g && i < r->g->noutput; i++)
        tensor_free(&r->out[i]);
    for (int i = 0; r->g && i < r->g->ninput; i++)
        tensor_free(&r->in[i]);
    for (int i = 0; i < r->nparam; i++)
        tensor_free(&r->params[i]);
    free(r->params);
    graph_free(r->g);
}

static bool all_finite(const Tensor *t)
{
    for (int64_t i = 0; i < tensor_numel(t); i++)
        if (!isfinite(check_at(t, i)))
            return false;
    return true;
}

static void test_example(const Example *ex)
{
    Run r;
    Err e = {0};
    clock_t t0 = clock();
    if (!run_setup(ex, &r, &e) || !run_eval(&r, &e)) {
        fprintf(stderr, "%s: %s\n", ex->path, e.msg);
        check_failures++;
        run_free(&r);
        return;
    }
    double seconds = (double)(clock() - t0) / CLOCKS_PER_SEC, walked = -1;
    /* the examples at these sizes are test-suite fast */
    CHECK(seconds < (ex->seconds > 0 ? ex->seconds : 1.0) * CHECK_TIME_SCALE);
    for (int i = 0; i < r.g->noutput; i++) {
        CHECK_SHAPE(&r.out[i], ex->out_shape[i]);
        CHECK(all_finite(&r.out[i]));
    }
    CHECK(graph_flops(r.g, &r.sb, &walked, &e));
    CHECK_NEAR(walked, r.flops, 0);
    CHECK(r.flops > 0);
    run_free(&r);
}

/* tiny's second output is the softmax of its first. */
static void test_tiny_probs(void)
{
    Run r;
    Err e = {0};
    if (!run_setup(&examples[0], &r, &e) || !run_eval(&r, &e)) {
        fprintf(stderr, "tiny: %s\n", e.msg);
        check_failures++;
    } else {
        for (int b = 0; b < 3; b++) {
            double z = 0;
            for (int c = 0; c < 10; c++)
                z += exp(check_at(&r.out[0], b * 10 + c));
            for (int c = 0; c < 10; c++)
                CHECK_NEAR(check_at(&r.out[1], b * 10 + c), exp(check_at(&r.out[0], b * 10 + c)) / z, 1e-6);
        }
    }
    run_free(&r);
}

/* gpt2 is causal: changing the last token changes only the last position's logits. */
static void test_gpt2_causal(void)
{
    Run r;
    Err e = {0};
    Tensor before = {0};
    const int64_t B = 2, T = 6, V = 23;
    bool ok = run_setup(&examples[2], &r, &e) && run_eval(&r, &e);
    if (ok) {
        before = r.out[0];
        r.out[0] = (Tensor){0};
        for (int64_t b = 0; b < B; b++) {
            int64_t *ids = r.in[0].data;
            ids[b * T + T - 1] = (ids[b * T + T - 1] + 1) % V;
        }
        ok = run_eval(&r, &e);
    }
    if (!ok) {
        fprintf(stderr, "gpt2: %s\n", e.msg);
        check_failures++;
    }
    int same_before = 0, changed_last = 0;
    for (int64_t b = 0; ok && b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t v = 0; v < V; v++) {
                int64_t i = (b * T + t) * V + v;
                bool same = check_at(&before, i) == check_at(&r.out[0], i);
                same_before += t < T - 1 && same;
                changed_last += t == T - 1 && !same;
            }
    CHECK(same_before == B * (T - 1) * V);
    CHECK(changed_last > 0);
    tensor_free(&before);
    run_free(&r);
}

int main(void)
{
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        test_example(&examples[i]);
    test_tiny_probs();
    test_gpt2_causal();
    return check_status();
}
