/* test_ops_reduce.c — sum, mean, max, min and argmax against sums written out by hand:
 * any axes, keepdim, NaN rules, f64 accumulation, dtype rounding, symbolic dims, errors. */
#include "check.h"

#define SYM_B ((Dim){1, 1u << 0, 0}) /* symbol B: the first one a test graph interns */

/* x[i][j][k] = 100 i + 10 j + k over [2,3,4]: every partial sum has a closed form. */
static double x234[24];

static void fill_x234(void)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                x234[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
}

/* Evaluate `op` {axes, keepdim} (or argmax {axis, keepdim} when naxes < 0) over x of type t. */
static bool reduce_case(int op, Type t, const double *x, int naxes, const int64_t *axes,
                        bool keepdim, Tensor *out)
{
    Attr attrs[2] = {naxes < 0 ? attr_int("axis", axes[0]) : attr_ints("axes", naxes, axes),
                     attr_bool("keepdim", keepdim)};
    const double *vals[1] = {x};
    return check_eval(op, 1, &t, vals, attrs, 2, NULL, out, NULL);
}

static void expect_reduce(int op, Type t, const double *x, int naxes, const int64_t *axes,
                          bool keepdim, const char *shape, const double *want, int64_t n)
{
    Tensor out;
    if (!reduce_case(op, t, x, naxes, axes, keepdim, &out))
        return;
    CHECK_RESULT(&out, shape, want, n, 0);
}

static void test_sum_axes(void)
{
    Type t = type_make(DT_F32, 3, (int64_t[]){2, 3, 4});
    /* over k: 4 (100 i + 10 j) + 6 */
    double over_k[6], over_ij[4], over_j[8];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            over_k[i * 3 + j] = 4 * (100 * i + 10 * j) + 6;
    for (int k = 0; k < 4; k++)
        over_ij[k] = 3 * 100 + 2 * 30 + 6 * k; /* sum_i 3*100i + sum_j 2*10j + 6k */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            over_j[i * 4 + k] = 3 * (100 * i + k) + 30;
    expect_reduce(OP_SUM, t, x234, 1, (int64_t[]){2}, false, "f32[2,3]", over_k, 6);
    expect_reduce(OP_SUM, t, x234, 1, (int64_t[]){-1}, true, "f32[2,3,1]", over_k, 6);
    expect_reduce(OP_SUM, t, x234, 2, (int64_t[]){1, 0}, false, "f32[4]", over_ij, 4);
    expect_reduce(OP_SUM, t, x234, 2, (int64_t[]){0, -2}, true, "f32[1,1,4]", over_ij, 4);
    expect_reduce(OP_SUM, t, x234, 1, (int64_t[]){1}, false, "f32[2,4]", over_j, 8);
    /* empty axes: everything, 12*100 + 8*30 + 6*6 */
    expect_reduce(OP_SUM, t, x234, 0, NULL, false, "f32[]", (double[]){1476}, 1);
    expect_reduce(OP_SUM, t, x234, 0, NULL, true, "f32[1,1,1]", (double[]){1476}, 1);
    expect_reduce(OP_SUM, t, x234, 3, (int64_t[]){2, 0, 1}, false, "f32[]", (double[]){1476}, 1);
    /* a scalar reduced over no axes is itself */
    expect_reduce(OP_SUM, type_scalar(DT_F32), (double[]){2.5}, 0, NULL, false, "f32[]",
                  (double[]){2.5}, 1);
}

static void test_mean(void)
{
    Type t = type_make(DT_F32, 3, (int64_t[]){2, 3, 4});
    double over_i[12];
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            over_i[j * 4 + k] = 50 + 10 * j + k; /* (0 + 100)/2 + 10 j + k */
    expect_reduce(OP_MEAN, t, x234, 1, (int64_t[]){0}, false, "f32[3,4]", over_i, 12);
    expect_reduce(OP_MEAN, t, x234, 2, (int64_t[]){1, 2}, true, "f32[2,1,1]",
                  (double[]){(float)(10 + 1.5), (float)(110 + 1.5)}, 2);
    expect_reduce(OP_MEAN, t, x234, 0, NULL, false, "f32[]", (double[]){1476.0 / 24}, 1);
    /* mean of [1, 2] in f16 is 1.5 exactly; of [1,2,2] is 5/3 rounded to f16 (1.6669921875) */
    Type h3 = type_make(DT_F16, 1, (int64_t[]){3});
    expect_reduce(OP_MEAN, h3, (double[]){1, 2, 2}, 0, NULL, false, "f16[]", (double[]){1.6669921875}, 1);
}

static void test_accumulation(void)
{
    /* f32 running sums lose the 1s next to 1e8 (ulp 8); an f64 accumulator keeps them */
    Type t4 = type_make(DT_F32, 1, (int64_t[]){4});
    expect_reduce(OP_SUM, t4, (double[]){1e8, 1, -1e8, 1}, 0, NULL, false, "f32[]", (double[]){2}, 1);
    /* f64 inputs are not available, but i64 ones are: 2^53 + 1 + 1 is exact only when the
     * rounding error of the first addition is carried (compensated summation) */
    Type i3 = type_make(DT_I64, 1, (int64_t[]){3});
    expect_reduce(OP_SUM, i3, (double[]){0x1p53, 1, 1}, 0, NULL, false, "i64[]",
                  (double[]){0x1p53 + 2}, 1);
    /* the result wraps like the dtype: 2^31 - 1 + 1 in i32 */
    Type i2 = type_make(DT_I32, 1, (int64_t[]){2});
    expect_reduce(OP_SUM, i2, (double[]){2147483647, 1}, 0, NULL, false, "i32[]",
                  (double[]){-2147483648.0}, 1);
    /* infinities stay infinite (no inf - inf from the compensation term) */
    expect_reduce(OP_SUM, t4, (double[]){1, INFINITY, 2, 3}, 0, NULL, false, "f32[]",
                  (double[]){INFINITY}, 1);
    expect_reduce(OP_SUM, t4, (double[]){1, INFINITY, -INFINITY, 3}, 0, NULL, false, "f32[]",
                  (double[]){NAN}, 1);
}

static void test_max_min(void)
{
    Type t = type_make(DT_F32, 2, (int64_t[]){2, 3});
    const double x[6] = {3, -1, 7, -2, -8, 0.5};
    expect_reduce(OP_MAX, t, x, 1, (int64_t[]){1}, false, "f32[2]", (double[]){7, 0.5}, 2);
    expect_reduce(OP_MIN, t, x, 1, (int64_t[]){1}, true, "f32[2,1]", (double[]){-1, -8}, 2);
    expect_reduce(OP_MAX, t, x, 1, (int64_t[]){0}, false, "f32[3]", (double[]){3, -1, 7}, 3);
    expect_reduce(OP_MIN, t, x, 0, NULL, false, "f32[]", (double[]){-8}, 1);
    /* NaN anywhere in a row makes that row's max and min NaN (numpy), wherever it sits */
    const double y[6] = {1, NAN, 3, NAN, 5, 6};
    expect_reduce(OP_MAX, t, y, 1, (int64_t[]){1}, false, "f32[2]", (double[]){NAN, NAN}, 2);
    expect_reduce(OP_MIN, t, y, 1, (int64_t[]){0}, false, "f32[3]", (double[]){NAN, NAN, 3}, 3);
    /* bool max is any, min is all */
    Type b22 = type_make(DT_BOOL, 2, (int64_t[]){2, 2});
    expect_reduce(OP_MAX, b22, (double[]){0, 1, 0, 0}, 1, (int64_t[]){1}, false, "bool[2]",
                  (double[]){1, 0}, 2);
    expect_reduce(OP_MIN, b22, (double[]){1, 1, 0, 1}, 1, (int64_t[]){1}, false, "bool[2]",
                  (double[]){1, 0}, 2);
}

static void test_argmax(void)
{
    Type t = type_make(DT_F32, 2, (int64_t[]){2, 4});
    /* ties: the first maximum wins */
    const double x[8] = {1, 5, 5, 2, 9, 0, 9, -1};
    expect_reduce(OP_ARGMAX, t, x, -1, (int64_t[]){-1}, false, "i64[2]", (double[]){1, 0}, 2);
    expect_reduce(OP_ARGMAX, t, x, -1, (int64_t[]){1}, true, "i64[2,1]", (double[]){1, 0}, 2);
    expect_reduce(OP_ARGMAX, t, x, -1, (int64_t[]){0}, false, "i64[4]", (double[]){1, 0, 1, 0}, 4);
    /* the first NaN counts as the maximum */
    const double y[8] = {1, NAN, 7, NAN, 4, 3, 2, NAN};
    expect_reduce(OP_ARGMAX, t, y, -1, (int64_t[]){1}, false, "i64[2]", (double[]){1, 3}, 2);
    /* default axis is the last */
    Tensor out;
    const double *vals[1] = {x};
    if (check_eval(OP_ARGMAX, 1, &t, vals, NULL, 0, NULL, &out, NULL))
        CHECK_RESULT(&out, "i64[2]", ((double[]){1, 0}), 2, 0);
}

/* Reductions keep a symbolic batch dim and the interpreter binds it from the input. */
static void test_symbolic(void)
{
    Graph *g = graph_new("t");
    Err e = {0};
    Builder b = builder_make(g, &e);
    graph_sym(g, "B", 1);
    Type tb3 = {.dt = DT_F32, .rank = 2, .dim = {SYM_B, {3, 0}}};
    int x = b_input(&b, "x", &tb3);
    int mean = b_reduce(&b, OP_MEAN, x, 1, (int64_t[]){1}, true);
    int over_b = b_reduce(&b, OP_MAX, x, 1, (int64_t[]){0}, false);
    int arg = b_argmax(&b, x, 0, false);
    b_output(&b, mean, NULL);
    b_output(&b, over_b, NULL);
    b_output(&b, arg, NULL);
    CHECK(err_ok(&e));
    CHECK_TYPE(g, b_type(&b, mean), "f32[B,1]");
    CHECK_TYPE(g, b_type(&b, over_b), "f32[3]");
    CHECK_TYPE(g, b_type(&b, arg), "i64[3]");
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){3, 3}, (double[]){1, 2, 6, 0, 0, 3, 9, -9, 0});
    Tensor out[3];
    double flops = 0;
    if (check_run(g, &in, out, &flops)) {
        CHECK_SHAPE(&out[0], "f32[3,1]");
        CHECK_VALUES(&out[0], ((double[]){3, 1, 0}), 3, 0);
        CHECK_VALUES(&out[1], ((double[]){9, 2, 6}), 3, 0);
        CHECK_VALUES(&out[2], ((double[]){2, 0, 0}), 3, 0);
        CHECK(flops == 3 * 9); /* one per element read, for each of the three */
        for (int i = 0; i < 3; i++)
            tensor_free(&out[i]);
    }
    tensor_free(&in);
    graph_free(g);
}

/* An axis of size zero: sum is 0 and mean NaN (numpy); max has no identity and fails. */
static void test_empty(void)
{
    Type t = type_make(DT_F32, 2, (int64_t[]){2, 0});
    expect_reduce(OP_SUM, t, NULL, 1, (int64_t[]){1}, false, "f32[2]", (double[]){0, 0}, 2);
    expect_reduce(OP_MEAN, t, NULL, 1, (int64_t[]){1}, false, "f32[2]", (double[]){NAN, NAN}, 2);
    expect_reduce(OP_MAX, t, NULL, 1, (int64_t[]){0}, false, "f32[0]", NULL, 0);
    Graph *g = graph_new("t");
    Err e = {0};
    Builder b = builder_make(g, &e);
    b_output(&b, b_reduce(&b, OP_MAX, b_input(&b, "x", &t), 1, (int64_t[]){1}, false), NULL);
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){2, 0}, NULL), out;
    CHECK(!interp_run(g, &in, NULL, &out, NULL, &e));
    CHECK_STR(e.msg, "error: max: cannot reduce over an empty dimension (it has no identity)");
    tensor_free(&in);
    graph_free(g);
}

static void expect_error(int op, Type t, const Attr *attrs, int nattr, const char *want)
{
    Graph *g = graph_new("t");
    Err e = {0};
    Builder b = builder_make(g, &e);
    graph_sym(g, "B", 1);
    int x = b_input(&b, "x", &t);
    CHECK(b_op(&b, op, &x, 1, attrs, nattr, NULL) == -1);
    CHECK_STR(e.msg, want);
    graph_free(g);
}

static void test_errors(void)
{
    Type fb4 = {.dt = DT_F32, .rank = 2, .dim = {SYM_B, {4, 0}}};
    Attr a2 = attr_ints("axes", 1, (int64_t[]){2}), am3 = attr_ints("axes", 2, (int64_t[]){0, -3});
    Attr dup = attr_ints("axes", 2, (int64_t[]){1, -1});
    expect_error(OP_SUM, fb4, &a2, 1, "error: sum: axis 2 is out of range for f32[B,4] (rank 2)");
    expect_error(OP_MAX, fb4, &am3, 1, "error: max: axis -3 is out of range for f32[B,4] (rank 2)");
    expect_error(OP_MEAN, fb4, &dup, 1,
                 "error: mean: axis -1 repeats dimension 1 of f32[B,4]; list each axis once");
    Attr ax2 = attr_int("axis", 2);
    expect_error(OP_ARGMAX, fb4, &ax2, 1, "error: argmax: axis 2 is out of range for f32[B,4] (rank 2)");
    expect_error(OP_ARGMAX, type_scalar(DT_F32), NULL, 0,
                 "error: argmax: axis -1 is out of range for f32[] (rank 0)");
    Type ib4 = fb4, bb4 = fb4;
    ib4.dt = DT_I32;
    bb4.dt = DT_BOOL;
    expect_error(OP_MEAN, ib4, NULL, 0, "error: mean: operand i32[B,4] is not a float dtype; cast it first");
    expect_error(OP_SUM, bb4, NULL, 0, "error: sum: operand bool[B,4] is not a numeric dtype; cast it first");
}

int main(void)
{
    fill_x234();
    test_sum_axes();
    test_mean();
    test_accumulation();
    test_max_min();
    test_argmax();
    test_symbolic();
    test_empty();
    test_errors();
    return check_status();
}
