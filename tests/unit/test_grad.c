/* test_grad.c — every gradient rule against central finite differences in the f64
 * interpreter. Each case builds loss = sum(op(params...) * w) for a fixed random w, takes
 * the joint graph from autodiff, and compares grad.<param> with (L(p + h) - L(p - h)) / 2h
 * for every element of every parameter. Parameters hold multiples of 1/64 and h is 2^-12,
 * so p +- h is exact in f32 and the difference quotient is the only error (O(h^2)).
 * Composites are checked through their decompositions; broadcasting, keepdim and
 * symbolic-free shapes of each rule are covered by the cases' shapes. */
#include <stdlib.h>

#include "check.h"
#include "passes/passes.h"

#define H 0x1p-12
#define MAXP 4

typedef struct Case {
    const char *name;
    int np;
    int64_t shape[MAXP][4];
    int rank[MAXP];
    double lo, hi;                       /* parameter values in [lo, hi), multiples of 1/64 */
    int (*build)(Builder *b, const int *p, int op);
    int op;
} Case;

/* ---------------------------------------------------------------- builders */

static int b_un(Builder *b, const int *p, int op) { return b_unary(b, op, p[0]); }
static int b_bin(Builder *b, const int *p, int op) { return b_binary(b, op, p[0], p[1]); }
static int b_mm(Builder *b, const int *p, int op) { (void)op; return b_matmul(b, p[0], p[1]); }

static int b_red(Builder *b, const int *p, int op)
{
    int64_t ax[1] = {1};
    return b_reduce(b, op, p[0], 1, ax, op == OP_MEAN || op == OP_MAX);
}

static int b_red_all(Builder *b, const int *p, int op)
{
    return b_binary(b, OP_MUL, b_reduce(b, op, p[0], 0, NULL, false), p[1]);
}

static int b_where3(Builder *b, const int *p, int op)
{
    (void)op;
    int c = b_binary(b, OP_GT, p[0], b_scalar(b, 0, DT_F32));
    return b_where(b, c, p[0], p[1]);
}

static int b_cast_rt(Builder *b, const int *p, int op)
{
    (void)op;
    return b_cast(b, b_cast(b, p[0], DT_F16), DT_F32);
}

static int b_tr(Builder *b, const int *p, int op)
{
    (void)op;
    int64_t perm[3] = {2, 0, 1};
    return b_transpose(b, p[0], 3, perm);
}

static int b_rs(Builder *b, const int *p, int op)
{
    (void)op;
    Type t = type_make(DT_F32, 2, (int64_t[]){3, 4});
    return b_reshape(b, p[0], &t);
}

static int b_ex(Builder *b, const int *p, int op)
{
    (void)op;
    Type t = type_make(DT_F32, 3, (int64_t[]){2, 4, 3});
    return b_expand(b, p[0], &t);
}

static int b_sl(Builder *b, const int *p, int op) { (void)op; return b_slice(b, p[0], 1, 1, 3, 1); }

static int b_cat(Builder *b, const int *p, int op)
{
    (void)op;
    return b_concat(b, p, 2, 1);
}

static int b_gat(Builder *b, const int *p, int op)
{
    (void)op;
    Type t = type_make(DT_I64, 2, (int64_t[]){2, 3});
    double idx[6] = {0, 4, 2, 4, 1, 0};
    return b_gather(b, p[0], b_constant(b, &t, idx), 0);
}

/* along axis 1 of a [3, 5, 2] table with [2, 2] indices (4 twice) and a scalar one */
static int b_gat1(Builder *b, const int *p, int op)
{
    Type t = type_make(DT_I64, 2, (int64_t[]){2, 2});
    double idx[4] = {4, 0, 2, 4};
    int at = op ? b_scalar(b, 3, DT_I64) : b_constant(b, &t, idx);
    return b_gather(b, p[0], at, 1);
}

/* index_add's two gradients (base's and src's), rows 4 and 0 hit twice */
static int b_iadd(Builder *b, const int *p, int op)
{
    (void)op;
    Type t = type_make(DT_I64, 2, (int64_t[]){2, 3});
    double idx[6] = {0, 4, 2, 4, 1, 0};
    return b_index_add(b, p[0], b_constant(b, &t, idx), p[1]);
}

/* A tied table: a gather and a matmul read it, so autodiff adds their gradients as one
 * index_add into the matmul's (passes/autodiff.c) */
static int b_tied(Builder *b, const int *p, int op)
{
    (void)op;
    Type t = type_make(DT_I64, 1, (int64_t[]){4});
    double idx[4] = {3, 0, 3, 1};
    int rows = b_gather(b, p[0], b_constant(b, &t, idx), 0);
    return b_matmul(b, rows, b_swap_last(b, p[0]));
}

static int b_comp1(Builder *b, const int *p, int op)
{
    Attr axis = attr_int("axis", -1);
    return b_op(b, op, p, 1, &axis, 1, NULL);
}

static int b_norm(Builder *b, const int *p, int op) { return b_op(b, op, p, op == OP_LAYER_NORM ? 3 : 2, NULL, 0, NULL); }

static int b_xent(Builder *b, const int *p, int op)
{
    Type t = type_make(DT_I64, 1, (int64_t[]){3});
    double labels[3] = {2, 0, 4};
    int in[2] = {p[0], b_constant(b, &t, labels)};
    return b_op(b, op, in, 2, NULL, 0, NULL);
}

static int b_attn(Builder *b, const int *p, int op)
{
    Attr causal = attr_bool("causal", true);
    return b_op(b, op, p, 3, &causal, 1, NULL);
}

/* Causal, with an additive bias (the fourth parameter): the decomposed backward, the
 * bias's gradient summed over the heads it is broadcast to. */
static int b_attn_bias(Builder *b, const int *p, int op)
{
    Attr causal = attr_bool("causal", true);
    return b_op(b, op, p, 4, &causal, 1, NULL);
}

/* Not causal, scale 0.7: the fused backward's other branch (attention_grad). */
static int b_attn_plain(Builder *b, const int *p, int op)
{
    Attr scale = attr_float("scale", 0.7);
    return b_op(b, op, p, 3, &scale, 1, NULL);
}

static int b_drop(Builder *b, const int *p, int op)
{
    Attr a[2] = {attr_float("p", 0.5), attr_int("seed", 7)};
    return b_op(b, op, p, 1, a, 2, NULL);
}

/* conv with the geometry each case names through its op field (CONV_* below). */
enum { CONV_PLAIN, CONV_STRIDE_PAD, CONV_DILATION, CONV_GROUPS, CONV_DEPTHWISE_1D, CONV_BIG_PAD };

static int b_conv(Builder *b, const int *p, int op)
{
    static const struct {
        int axes, npad;
        int64_t stride, dilation, groups, pad[4];
    } geo[] = {
        [CONV_PLAIN] = {2, 0, 1, 1, 1, {0}},
        [CONV_STRIDE_PAD] = {2, 4, 2, 1, 1, {1, 0, 2, 1}},
        [CONV_DILATION] = {2, 1, 1, 2, 1, {1}},
        [CONV_GROUPS] = {2, 1, 2, 1, 2, {1}},
        [CONV_DEPTHWISE_1D] = {1, 2, 2, 2, 4, {2, 1}},
        [CONV_BIG_PAD] = {1, 2, 3, 1, 1, {4, 3}},
    };
    int64_t stride = geo[op].stride, dilation = geo[op].dilation;
    Attr a[4] = {attr_ints("stride", 1, &stride), attr_ints("padding", geo[op].npad, geo[op].pad),
                 attr_ints("dilation", 1, &dilation), attr_int("groups", geo[op].groups)};
    return b_op(b, OP_CONV, p, 2, a, 4, NULL);
}

/* ---------------------------------------------------------------- the cases */

#define S23 {{2, 3}}, {2}
#define UN(op, lo, hi) {#op, 1, S23, lo, hi, b_un, op}
#define BIN(op, lo, hi, yrank, ...) {#op, 2, {{2, 3}, {__VA_ARGS__}}, {2, yrank}, lo, hi, b_bin, op}

static const Case cases[] = {
    UN(OP_NEG, -2, 2), UN(OP_ABS, -2, 2), UN(OP_EXP, -2, 2), UN(OP_LOG, 0.25, 2),
    UN(OP_SQRT, 0.25, 2), UN(OP_RSQRT, 0.25, 2), UN(OP_RECIPROCAL, 0.25, 2),
    UN(OP_TANH, -2, 2), UN(OP_SIGMOID, -2, 2), UN(OP_RELU, -2, 2), UN(OP_GELU, -3, 3),
    UN(OP_GELU_TANH, -3, 3), UN(OP_SILU, -3, 3), UN(OP_SIN, -3, 3), UN(OP_COS, -3, 3),
    UN(OP_ERF, -2, 2),
    BIN(OP_ADD, -2, 2, 1, 3), BIN(OP_SUB, -2, 2, 2, 2, 1), BIN(OP_MUL, -2, 2, 1, 3),
    BIN(OP_DIV, 0.5, 2, 2, 2, 1), BIN(OP_POW, 0.5, 2, 1, 3),
    BIN(OP_MAXIMUM, -2, 2, 2, 2, 3), BIN(OP_MINIMUM, -2, 2, 1, 3),
    {"where", 2, {{2, 3}, {3}}, {2, 1}, -2, 2, b_where3, 0},
    {"cast", 1, S23, -2, 2, b_cast_rt, 0},
    {"sum", 1, S23, -2, 2, b_red, OP_SUM}, {"mean", 1, S23, -2, 2, b_red, OP_MEAN},
    {"max", 1, S23, -2, 2, b_red, OP_MAX}, {"min", 1, S23, -2, 2, b_red, OP_MIN},
    {"mean all", 2, {{2, 3}, {1}}, {2, 1}, -2, 2, b_red_all, OP_MEAN},
    {"matmul", 2, {{2, 3}, {3, 4}}, {2, 2}, -2, 2, b_mm, 0},
    {"matmul batched", 2, {{2, 2, 3}, {3, 4}}, {3, 2}, -2, 2, b_mm, 0},
    /* the weight's gradient as one product over the merged batch rows */
    {"matmul 4-d into a weight", 2, {{2, 3, 2, 3}, {3, 4}}, {4, 2}, -2, 2, b_mm, 0},
    {"matmul, both batched", 2, {{2, 2, 3}, {2, 3, 4}}, {3, 3}, -2, 2, b_mm, 0},
    {"transpose", 1, {{2, 3, 4}}, {3}, -2, 2, b_tr, 0},
    {"reshape", 1, {{2, 6}}, {2}, -2, 2, b_rs, 0},
    {"expand", 1, {{2, 1, 3}}, {3}, -2, 2, b_ex, 0},
    {"slice", 1, {{2, 4}}, {2}, -2, 2, b_sl, 0},
    {"concat", 2, {{2, 3}, {2, 2}}, {2, 2}, -2, 2, b_cat, 0},
    {"gather", 1, {{5, 3}}, {2}, -2, 2, b_gat, 0},
    {"index_add", 2, {{5, 3}, {2, 3, 3}}, {2, 3}, -2, 2, b_iadd, 0},
    {"gather along axis 1", 1, {{3, 5, 2}}, {3}, -2, 2, b_gat1, 0},
    {"gather along axis 1, a scalar index", 1, {{3, 5, 2}}, {3}, -2, 2, b_gat1, 1},
    {"tied embedding", 1, {{5, 3}}, {2}, -2, 2, b_tied, 0},
    {"softmax", 1, S23, -2, 2, b_comp1, OP_SOFTMAX},
    {"log_softmax", 1, S23, -2, 2, b_comp1, OP_LOG_SOFTMAX},
    {"layer_norm", 3, {{2, 4}, {4}, {4}}, {2, 1, 1}, -2, 2, b_norm, OP_LAYER_NORM},
    {"rms_norm", 2, {{2, 4}, {4}}, {2, 1}, -2, 2, b_norm, OP_RMS_NORM},
    {"cross_entropy", 1, {{3, 5}}, {2}, -2, 2, b_xent, OP_CROSS_ENTROPY},
    {"attention", 3, {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {3, 3, 3}, -1, 1, b_attn, OP_ATTENTION},
    /* the fused backward (attention_lse, attention_grad) with heads; then shapes it does not
     * take (more keys than queries, k and v broadcast), which keep the decomposed one */
    {"attention, 2x2 heads, fused", 3, {{2, 2, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 3}}, {4, 4, 4}, -1, 1,
     b_attn_plain, OP_ATTENTION},
    {"attention, bias over heads", 4, {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}, {2, 1, 3, 3}},
     {4, 4, 4, 4}, -1, 1, b_attn_bias, OP_ATTENTION},
    {"attention, more keys", 3, {{2, 3, 4}, {2, 5, 4}, {2, 5, 4}}, {3, 3, 3}, -1, 1, b_attn, OP_ATTENTION},
    {"attention, k v broadcast", 3, {{2, 3, 4}, {3, 4}, {3, 4}}, {3, 2, 2}, -1, 1, b_attn_plain,
     OP_ATTENTION},
    {"dropout", 1, S23, -2, 2, b_drop, OP_DROPOUT},
    {"conv", 2, {{2, 2, 4, 5}, {3, 2, 2, 3}}, {4, 4}, -2, 2, b_conv, CONV_PLAIN},
    {"conv stride 2, padding", 2, {{1, 2, 5, 6}, {2, 2, 3, 2}}, {4, 4}, -2, 2, b_conv, CONV_STRIDE_PAD},
    {"conv dilation 2", 2, {{1, 2, 5, 5}, {2, 2, 2, 2}}, {4, 4}, -2, 2, b_conv, CONV_DILATION},
    {"conv groups 2", 2, {{2, 4, 3, 4}, {4, 2, 2, 2}}, {4, 4}, -2, 2, b_conv, CONV_GROUPS},
    {"conv 1-D depthwise, stride 2, dilation 2", 2, {{2, 4, 9}, {4, 1, 3}}, {3, 3}, -2, 2, b_conv, CONV_DEPTHWISE_1D},
    {"conv 1-D padding wider than the kernel", 2, {{1, 2, 5}, {3, 2, 2}}, {3, 3}, -2, 2, b_conv, CONV_BIG_PAD},
};

/* Checked at rng step 3, where about half of these 32 elements' mask differs from step 0's: the
 * backward must read the forward's mask, the one finite differences at that step see. */
static const Case dropout_at_step = {"dropout at rng step 3", 1, {{4, 8}}, {2}, -2, 2, b_drop,
                                     OP_DROPOUT};

/* ---------------------------------------------------------------- checking */

/* loss = sum(op(p...) * w), w fixed; params named p0, p1, ... */
static Graph *forward(const Case *c)
{
    Graph *g = graph_new("grad_case");
    Err e = {0};
    Builder b = builder_make(g, &e);
    int p[MAXP];
    for (int i = 0; i < c->np; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        Type t = type_make(DT_F32, c->rank[i], c->shape[i]);
        p[i] = b_param(&b, name, &t, NULL);
    }
    int y = c->build(&b, p, c->op);
    const Type *yt = b_type(&b, y);
    Type wt = yt ? *yt : type_scalar(DT_F32);
    int64_t n = 1;
    for (int d = 0; d < wt.rank; d++)
        n *= wt.dim[d].k;
    double *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        w[i] = (double)(rand() % 129 - 64) / 32;
    int loss = b_reduce(&b, OP_SUM, b_binary(&b, OP_MUL, y, b_constant(&b, &wt, w)), 0, NULL, false);
    b_output(&b, loss, "loss");
    free(w);
    if (!err_ok(&e)) {
        fprintf(stderr, "%s: building: %s\n", c->name, e.msg);
        graph_free(g);
        return NULL;
    }
    return g;
}

static double loss_at(const Graph *g, uint64_t step, const Tensor *params)
{
    ITensor out[1];
    Err e = {0};
    if (!interp_run_f64_at(g, step, NULL, params, out, &e)) {
        fprintf(stderr, "interp_run_f64: %s\n", e.msg);
        return NAN;
    }
    double v = out[0].d[0];
    free(out[0].d);
    return v;
}

static void check_case(const Case *c, uint64_t rng_step)
{
    Graph *g = forward(c);
    Err e = {0};
    Graph *joint = g ? autodiff(g, NULL, &e) : NULL;
    CHECK(joint != NULL);
    if (!joint) {
        fprintf(stderr, "%s: autodiff: %s\n", c->name, e.msg);
        graph_free(g);
        return;
    }
    Tensor params[MAXP];
    for (int i = 0; i < c->np; i++) {
        tensor_alloc(&params[i], DT_F32, c->rank[i], c->shape[i], &e);
        float *v = params[i].data;
        int steps = (int)((c->hi - c->lo) * 64);
        for (int64_t k = 0; k < tensor_numel(&params[i]); k++)
            v[k] = (float)(c->lo + (rand() % steps) / 64.0 + 1.0 / 128);
    }
    ITensor grads[1 + MAXP];
    CHECK(joint->noutput == 1 + c->np);
    bool ran = interp_run_f64_at(joint, rng_step, NULL, params, grads, &e);
    CHECK(ran);
    int bad = 0;
    for (int i = 0; ran && i < c->np; i++) {
        float *v = params[i].data;
        for (int64_t k = 0; k < tensor_numel(&params[i]); k++) {
            float keep = v[k];
            v[k] = keep + (float)H;
            double up = loss_at(g, rng_step, params);
            v[k] = keep - (float)H;
            double down = loss_at(g, rng_step, params);
            v[k] = keep;
            double fd = (up - down) / (2 * H), ad = grads[1 + i].d[k];
            if (!(fabs(fd - ad) <= 1e-5 * fmax(1, fabs(fd))) && bad++ < 3)
                fprintf(stderr, "%s: d loss / d p%d[%lld]: autodiff %.9g, finite difference %.9g\n",
                        c->name, i, (long long)k, ad, fd);
        }
    }
    CHECK(bad == 0);
    for (int i = 0; ran && i <= c->np; i++)
        free(grads[i].d);
    for (int i = 0; i < c->np; i++)
        tensor_free(&params[i]);
    graph_free(joint);
    graph_free(g);
}

/* An op without a rule on the path to a parameter is an error located at it; the loss
 * must be a float scalar. */
static void test_errors(void)
{
    Graph *g = graph_new("bad");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t = type_make(DT_F32, 2, (int64_t[]){2, 3});
    int p = b_param(&b, "w", &t, NULL);
    int am = b_cast(&b, b_argmax(&b, p, 1, false), DT_F32);
    b_output(&b, b_reduce(&b, OP_SUM, am, 0, NULL, false), "loss");
    b_output(&b, p, "w_out");
    Err ad = {0};
    Graph *j = autodiff(g, NULL, &ad); /* argmax is integer: no gradient flows, not an error */
    CHECK(j != NULL);
    graph_free(j);
    ad = (Err){0};
    CHECK(autodiff(g, "w_out", &ad) == NULL && strstr(ad.msg, "float scalar"));
    ad = (Err){0};
    CHECK(autodiff(g, "nope", &ad) == NULL && strstr(ad.msg, "no output named 'nope'"));
    graph_free(g);
}

int main(void)
{
    srand(3);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i], 0);
    check_case(&dropout_at_step, 3);
    test_errors();
    return check_status();
}
