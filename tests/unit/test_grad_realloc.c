/* test_grad_realloc.c — gradient rules while the node array moves. A rule builds nodes, and
 * a pointer into the array taken before a build dangles once the array grows: grad_mean
 * read its operand's type that way (a use after free `coil train` hit, found by ASan).
 *
 * Each case puts k relus (the identity here: the parameter is positive) in front of the op
 * under test, so the joint graph's node count when the op's rule runs goes up one per k.
 * The array doubles from 16 entries, so sweeping k from 0 to 72 makes each of the rule's
 * builder calls the one that grows it past 32 and past 64: under ASan every stale read is
 * a fault, deterministically. In any build the gradients must not change with k. */
#include <stdlib.h>

#include "check.h"
#include "passes/passes.h"

#define MAX_PAD 72

/* The op under test applied to h (f32[3,4], w with k relus), then reduced to the loss.
 * x is an input f32[B,4] (a symbolic batch, for the rules' symbolic paths). */
typedef int (*BuildFn)(Builder *b, int h, int x);

static int mean_of_square(Builder *b, int h, int x)
{
    (void)x; /* the audit's model: mean(d * d) */
    return b_reduce(b, OP_MEAN, b_binary(b, OP_MUL, h, h), 0, NULL, false);
}

static int mean_of_axis(Builder *b, int h, int x)
{
    (void)x;
    int64_t ax[1] = {1};
    return b_reduce(b, OP_SUM, b_reduce(b, OP_MEAN, h, 1, ax, false), 0, NULL, false);
}

static int mean_symbolic(Builder *b, int h, int x)
{
    int64_t first[1] = {0};
    int row = b_reduce(b, OP_SUM, h, 1, first, false); /* f32[4] */
    return b_reduce(b, OP_MEAN, b_binary(b, OP_MUL, x, row), 0, NULL, false);
}

static int max_of_axis(Builder *b, int h, int x)
{
    (void)x;
    int64_t ax[1] = {1};
    return b_reduce(b, OP_SUM, b_reduce(b, OP_MAX, h, 1, ax, false), 0, NULL, false);
}

static int sliced_concat(Builder *b, int h, int x)
{
    (void)x;
    int parts[2] = {b_slice(b, h, 1, 1, 3, 1), h};
    return b_reduce(b, OP_SUM, b_concat(b, parts, 2, 1), 0, NULL, false);
}

static int gathered(Builder *b, int h, int x)
{
    (void)x;
    Type it = type_make(DT_I64, 1, (int64_t[]){4});
    double idx[4] = {2, 0, 2, 1};
    return b_reduce(b, OP_SUM, b_gather(b, h, b_constant(b, &it, idx), 0), 0, NULL, false);
}

static int linear_of(Builder *b, int h, int x)
{
    int64_t perm[2] = {1, 0};
    int y = b_matmul(b, x, b_transpose(b, h, 2, perm)); /* x h^T: f32[B,3] */
    return b_reduce(b, OP_MEAN, y, 0, NULL, false);
}

static int reshaped_cast(Builder *b, int h, int x)
{
    (void)x;
    Type flat = type_make(DT_F32, 1, (int64_t[]){12});
    int y = b_cast(b, b_cast(b, b_reshape(b, h, &flat), DT_F16), DT_F32);
    return b_reduce(b, OP_SUM, b_where(b, b_binary(b, OP_GT, y, b_scalar(b, 1, DT_F32)), y,
                                       b_unary(b, OP_NEG, y)), 0, NULL, false);
}

static const struct {
    const char *name;
    BuildFn build;
} cases[] = {
    {"mean(h * h)", mean_of_square}, {"mean over an axis", mean_of_axis},
    {"mean over a symbolic batch", mean_symbolic}, {"max over an axis", max_of_axis},
    {"slice and concat", sliced_concat}, {"gather", gathered}, {"linear", linear_of},
    {"reshape, cast, where", reshaped_cast},
};

/* loss = build(relu^k(w), x). */
static Graph *forward(BuildFn build, int k)
{
    Graph *g = graph_new("realloc");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type wt = type_make(DT_F32, 2, (int64_t[]){3, 4});
    Type xt = {.dt = DT_F32, .rank = 2, .dim = {{1, 1u << graph_sym(g, "B", 1), 0}, dim_static(4)}};
    int x = b_input(&b, "x", &xt), h = b_param(&b, "w", &wt, NULL);
    for (int i = 0; i < k; i++)
        h = b_unary(&b, OP_RELU, h);
    b_output(&b, build(&b, h, x), "loss");
    if (err_ok(&e))
        return g;
    fprintf(stderr, "building: %s\n", e.msg);
    graph_free(g);
    return NULL;
}

/* grad.w of the case at padding k, in f64 (malloc'd, 12 values), or NULL. */
static double *gradient(BuildFn build, int k, const Tensor *x, const Tensor *w)
{
    Graph *g = forward(build, k);
    Err e = {0};
    Graph *joint = g ? autodiff(g, NULL, &e) : NULL;
    ITensor out[2] = {{0}};
    bool ran = joint && interp_run_f64(joint, x, w, out, &e);
    if (!ran)
        fprintf(stderr, "k = %d: %s\n", k, e.msg);
    free(out[0].d);
    graph_free(joint);
    graph_free(g);
    return ran ? out[1].d : NULL;
}

static void check_case(int c, const Tensor *x, const Tensor *w)
{
    double *ref = gradient(cases[c].build, 0, x, w);
    CHECK(ref != NULL);
    int bad = 0;
    for (int k = 1; ref && k <= MAX_PAD; k++) {
        double *got = gradient(cases[c].build, k, x, w);
        CHECK(got != NULL);
        for (int i = 0; got && i < 12; i++)
            if (got[i] != ref[i] && bad++ < 3)
                fprintf(stderr, "%s, %d relus: grad.w[%d] = %.17g, want %.17g\n", cases[c].name,
                        k, i, got[i], ref[i]);
        free(got);
    }
    CHECK(bad == 0);
    free(ref);
}

/* The sweep must carry every rule across both growths of the array (32 and 64 entries). */
static void check_sweep_spans_growth(void)
{
    Graph *lo = forward(mean_of_square, 0), *hi = forward(mean_of_square, MAX_PAD);
    CHECK(lo && hi && lo->nnode + 1 < 16 && hi->nnode > 64 + 8);
    graph_free(lo);
    graph_free(hi);
}

int main(void)
{
    double xv[8], wv[12];
    for (int i = 0; i < 8; i++)
        xv[i] = (i % 5 - 2) / 4.0;
    for (int i = 0; i < 12; i++)
        wv[i] = 0.25 + i / 8.0; /* positive: every relu passes w through */
    Tensor x = check_tensor(DT_F32, 2, (int64_t[]){2, 4}, xv);
    Tensor w = check_tensor(DT_F32, 2, (int64_t[]){3, 4}, wv);
    check_sweep_spans_growth();
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        check_case((int)c, &x, &w);
    /* The audit's case, by its value: d mean(w * w) / dw = 2 w / 12. */
    double *g = gradient(mean_of_square, 7, &x, &w);
    for (int i = 0; g && i < 12; i++)
        CHECK_NEAR(g[i], 2 * wv[i] / 12, 1e-12);
    CHECK(g != NULL);
    free(g);
    tensor_free(&x);
    tensor_free(&w);
    return check_status();
}
