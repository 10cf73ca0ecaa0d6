/* test_ops_pointwise.c — leaves, unary, binary, where and cast against closed forms written
 * out here: broadcasting spelled by hand, dtype rounding, symbolic dims, every type error. */
#include "check.h"
#include "ir/ops.h"

/* A graph's first two symbols are B and T, so these Dims name them there. */
#define SYM_B ((Dim){1, 1u << 0, 0})
#define SYM_T ((Dim){1, 1u << 1, 0})
#define S(k) dim_static(k)

static Graph *graph_bt(Builder *b, Err *e)
{
    Graph *g = graph_new("t");
    *e = (Err){0};
    *b = builder_make(g, e);
    graph_sym(g, "B", 1);
    graph_sym(g, "T", 1);
    return g;
}

static Type ty(DType dt, int rank, const Dim *dims)
{
    Type t = {.dt = dt, .rank = rank};
    for (int i = 0; i < rank; i++)
        t.dim[i] = dims[i];
    return t;
}
#define TY(dt, ...) ty(dt, (int)(sizeof((Dim[]){__VA_ARGS__}) / sizeof(Dim)), (Dim[]){__VA_ARGS__})

/* ---------------------------------------------------------------- unary */

static double ref_neg(double x) { return 0.0 - x; }
static double ref_abs(double x) { return x < 0 ? -x : x; }
static double ref_rsqrt(double x) { return pow(x, -0.5); }
static double ref_reciprocal(double x) { return pow(x, -1.0); }
static double ref_tanh(double x) { return (exp(2 * x) - 1) / (exp(2 * x) + 1); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double ref_silu(double x) { return x / (1 + exp(-x)); }

static void test_unary_table(void)
{
    static const struct {
        int op;
        double (*ref)(double);
    } cases[] = {
        {OP_NEG, ref_neg}, {OP_ABS, ref_abs}, {OP_EXP, exp}, {OP_LOG, log}, {OP_SQRT, sqrt},
        {OP_RSQRT, ref_rsqrt}, {OP_RECIPROCAL, ref_reciprocal}, {OP_TANH, ref_tanh},
        {OP_SIGMOID, ref_sigmoid}, {OP_RELU, ref_relu}, {OP_GELU, ref_gelu},
        {OP_GELU_TANH, ref_gelu_tanh}, {OP_SILU, ref_silu}, {OP_SIN, sin}, {OP_COS, cos},
        {OP_ERF, erf},
    };
    const double x[7] = {-3, -0.5, 0, 0.25, 1, 2.5, 7};
    Type t = type_make(DT_F32, 1, (int64_t[]){7});
    const double *vals[1] = {x};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double want[7];
        for (int i = 0; i < 7; i++)
            want[i] = (float)cases[c].ref(x[i]);
        Tensor out;
        if (!check_eval(cases[c].op, 1, &t, vals, NULL, 0, NULL, &out, NULL))
            continue;
        CHECK(out.dt == DT_F32);
        int before = check_failures;
        CHECK_VALUES(&out, want, 7, 3e-7);
        if (check_failures != before)
            fprintf(stderr, "  (op %s)\n", op_info[cases[c].op].name);
        tensor_free(&out);
    }
}

/* One f64 input, one unary op, the value back: exact cases and the tails. */
static double unary64(int op, double x)
{
    Type t = type_scalar(DT_F32);
    const double *vals[1] = {&x};
    Tensor out;
    double v = NAN;
    if (check_eval(op, 1, &t, vals, NULL, 0, NULL, &out, NULL))
        v = check_at(&out, 0);
    tensor_free(&out);
    return v;
}

static void test_unary_values(void)
{
    CHECK(unary64(OP_EXP, 1.0) == (double)(float)M_E);
    CHECK(unary64(OP_GELU, 1.0) == (double)(float)0.8413447460685429);      /* Phi(1) */
    CHECK(unary64(OP_GELU_TANH, 1.0) == (double)(float)0.8411919906082768);
    CHECK(unary64(OP_SIGMOID, 0.0) == 0.5);
    CHECK(unary64(OP_SIGMOID, 800.0) == 1.0);   /* no inf/inf */
    CHECK(unary64(OP_SIGMOID, -800.0) == 0.0);
    CHECK(unary64(OP_SILU, -800.0) == 0.0);
    CHECK(isnan(unary64(OP_RELU, NAN)));
    CHECK(unary64(OP_RELU, -2.0) == 0.0);
    CHECK(unary64(OP_RSQRT, 4.0) == 0.5);
    CHECK(isinf(unary64(OP_RECIPROCAL, 0.0)));
    CHECK(isnan(unary64(OP_LOG, -1.0)));
    /* gelu(-10) = -10 Phi(-10): 1 + erf(-7.07) cancels to 0 in f64, the value does not
     * (relative checks: these values lie far below CHECK_NEAR's absolute floor). */
    double gelu_tail = -10 * 7.6198530241605269e-24;
    CHECK(fabs(unary64(OP_GELU, -10.0) / gelu_tail - 1) < 1e-6);
    double u = sqrt(2 / M_PI) * (-10 - 0.044715 * 1000);
    double gelu_tanh_tail = -10 / (1 + exp(-2 * u)); /* 0.5 x (1 + tanh u) = x sigmoid(2u) */
    CHECK(fabs(unary64(OP_GELU_TANH, -10.0) / gelu_tanh_tail - 1) < 1e-6);
}

/* ---------------------------------------------------------------- binary */

static void eval_binary_case(int op, Type ta, const double *a, Type tb, const double *b,
                             const char *shape, const double *want, int64_t n)
{
    Type ts[2] = {ta, tb};
    const double *vals[2] = {a, b};
    Tensor out;
    if (!check_eval(op, 2, ts, vals, NULL, 0, NULL, &out, NULL))
        return;
    CHECK_RESULT(&out, shape, want, n, 0);
}

static void test_broadcast(void)
{
    const double col[2] = {1, 2}, row[3] = {10, 20, 30}, six[6] = {1, 2, 3, 4, 5, 6};
    Type t21 = type_make(DT_F32, 2, (int64_t[]){2, 1}), t13 = type_make(DT_F32, 2, (int64_t[]){1, 3});
    Type t3 = type_make(DT_F32, 1, (int64_t[]){3}), t23 = type_make(DT_F32, 2, (int64_t[]){2, 3});
    /* out[i][j] = col[i] op row[j] */
    eval_binary_case(OP_ADD, t21, col, t13, row, "f32[2,3]", (double[]){11, 21, 31, 12, 22, 32}, 6);
    eval_binary_case(OP_SUB, t21, col, t13, row, "f32[2,3]", (double[]){-9, -19, -29, -8, -18, -28}, 6);
    eval_binary_case(OP_SUB, t13, row, t21, col, "f32[2,3]", (double[]){9, 19, 29, 8, 18, 28}, 6);
    /* a rank-1 row against every row of a [2,3] */
    eval_binary_case(OP_MUL, t3, (double[]){1, 2, 3}, t23, six, "f32[2,3]",
                     (double[]){1, 4, 9, 4, 10, 18}, 6);
    /* a scalar against everything */
    eval_binary_case(OP_DIV, t23, six, type_scalar(DT_F32), (double[]){2}, "f32[2,3]",
                     (double[]){0.5, 1, 1.5, 2, 2.5, 3}, 6);
    eval_binary_case(OP_POW, t3, (double[]){2, 4, 9}, t3, (double[]){3, 0.5, -1}, "f32[3]",
                     (double[]){8, 2, (float)(1.0 / 9)}, 3);
    const double nan = NAN;
    eval_binary_case(OP_MAXIMUM, t3, (double[]){1, nan, 3}, t3, (double[]){nan, 2, 1}, "f32[3]",
                     (double[]){nan, nan, 3}, 3);
    eval_binary_case(OP_MINIMUM, t3, (double[]){1, nan, 3}, t3, (double[]){nan, 2, 1}, "f32[3]",
                     (double[]){nan, nan, 1}, 3);
}

static void test_int_rounding(void)
{
    Type i5 = type_make(DT_I32, 1, (int64_t[]){5});
    /* C division truncates toward zero, never floors */
    eval_binary_case(OP_DIV, i5, (double[]){7, -7, 7, -7, 1}, i5, (double[]){2, 2, -2, -2, 3},
                     "i32[5]", (double[]){3, -3, -3, 3, 0}, 5);
    Type i1 = type_make(DT_I32, 1, (int64_t[]){1});
    eval_binary_case(OP_ADD, i1, (double[]){2147483647}, i1, (double[]){1}, "i32[1]",
                     (double[]){-2147483648.0}, 1);
    Type i8 = type_make(DT_I8, 1, (int64_t[]){2});
    eval_binary_case(OP_MUL, i8, (double[]){100, -100}, i8, (double[]){2, 3}, "i8[2]",
                     (double[]){-56, -44}, 2);
    eval_binary_case(OP_POW, i8, (double[]){2, 2}, i8, (double[]){3, -1}, "i8[2]", (double[]){8, 0}, 2);
}

/* maximum/minimum are commutative down to the sign of zero and NaN, so CSE may swap them. */
static void test_minmax_commute(void)
{
    const double v[] = {0.0, -0.0, 1.0, -1.0, NAN, INFINITY};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            double a = v[i], b = v[j], hi = s_maximum(a, b), lo = s_minimum(a, b);
            CHECK(isnan(hi) == (isnan(a) || isnan(b)));
            CHECK(isnan(hi) || (hi == s_maximum(b, a) && signbit(hi) == signbit(s_maximum(b, a))));
            CHECK(isnan(lo) || (lo == s_minimum(b, a) && signbit(lo) == signbit(s_minimum(b, a))));
        }
    CHECK(!signbit(s_maximum(-0.0, 0.0)) && signbit(s_minimum(0.0, -0.0)));
}

static void test_compare(void)
{
    Type t3 = type_make(DT_F32, 1, (int64_t[]){3});
    const double a[3] = {1, 2, 3}, b[3] = {2, 2, 2};
    /* nan_b: {NaN, NaN, 1} against b, where NaN is unordered: only ne holds */
    const double nan[3] = {NAN, NAN, 1};
    static const struct {
        int op;
        double want[3], nan_b[3];
    } cases[] = {
        {OP_LT, {1, 0, 0}, {0, 0, 1}}, {OP_LE, {1, 1, 0}, {0, 0, 1}},
        {OP_GT, {0, 0, 1}, {0, 0, 0}}, {OP_GE, {0, 1, 1}, {0, 0, 0}},
        {OP_EQ, {0, 1, 0}, {0, 0, 0}}, {OP_NE, {1, 0, 1}, {1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        eval_binary_case(cases[c].op, t3, a, t3, b, "bool[3]", cases[c].want, 3);
        eval_binary_case(cases[c].op, t3, nan, t3, b, "bool[3]", cases[c].nan_b, 3);
    }
    eval_binary_case(OP_EQ, t3, nan, t3, nan, "bool[3]", (double[]){0, 0, 1}, 3);
    /* [2,1] < [3]: out[i][j] = a[i] < b[j] */
    Type i21 = type_make(DT_I64, 2, (int64_t[]){2, 1}), i3 = type_make(DT_I64, 1, (int64_t[]){3});
    eval_binary_case(OP_LT, i21, (double[]){1, 5}, i3, (double[]){0, 2, 9}, "bool[2,3]",
                     (double[]){0, 1, 1, 0, 0, 1}, 6);
}

static void test_where(void)
{
    /* cond [2,1], a [1,3], b [] -> [2,3]: row 0 takes a, row 1 takes b */
    Type ts[3] = {type_make(DT_BOOL, 2, (int64_t[]){2, 1}), type_make(DT_F32, 2, (int64_t[]){1, 3}),
                  type_scalar(DT_F32)};
    const double c[2] = {1, 0}, a[3] = {1, 2, 3}, b[1] = {-1};
    const double *vals[3] = {c, a, b};
    Tensor out;
    if (check_eval(OP_WHERE, 3, ts, vals, NULL, 0, NULL, &out, NULL))
        CHECK_RESULT(&out, "f32[2,3]", ((double[]){1, 2, 3, -1, -1, -1}), 6, 0);
    /* the condition alone carries the result's shape */
    Type ts2[3] = {type_make(DT_BOOL, 1, (int64_t[]){4}), type_scalar(DT_I32), type_scalar(DT_I32)};
    const double *vals2[3] = {(double[]){0, 1, 1, 0}, (double[]){7}, (double[]){-7}};
    if (check_eval(OP_WHERE, 3, ts2, vals2, NULL, 0, NULL, &out, NULL))
        CHECK_RESULT(&out, "i32[4]", ((double[]){-7, 7, 7, -7}), 4, 0);
}

static void cast_case(DType from, DType to, int n, const double *x, const double *want)
{
    Type t = type_make(from, 1, (int64_t[]){n}), r = type_make(to, 1, (int64_t[]){n});
    const double *vals[1] = {x};
    Tensor out;
    if (!check_eval(OP_CAST, 1, &t, vals, NULL, 0, &r, &out, NULL))
        return;
    CHECK(out.dt == to);
    CHECK_VALUES(&out, want, n, 0);
    tensor_free(&out);
}

static void test_cast(void)
{
    const double x[5] = {1.75, -1.75, 2.5, -0.0, 1e10};
    /* truncation toward zero, then wrap: 1e10 - 2 * 2^32 */
    cast_case(DT_F32, DT_I32, 5, x, (double[]){1, -1, 2, 0, 1410065408});
    cast_case(DT_F32, DT_BOOL, 5, x, (double[]){1, 1, 1, 0, 1});
    cast_case(DT_I32, DT_F32, 2, (double[]){16777217, -3}, (double[]){16777216, -3});
    cast_case(DT_F32, DT_BF16, 1, (double[]){3.14159265}, (double[]){3.140625});
    cast_case(DT_F32, DT_I8, 2, (double[]){200, -129}, (double[]){-56, 127});
    cast_case(DT_BOOL, DT_F32, 2, (double[]){1, 0}, (double[]){1, 0});
}

/* ---------------------------------------------------------------- symbolic shapes */

static void test_symbolic(void)
{
    Err e;
    Builder b;
    Graph *g = graph_bt(&b, &e);
    Type xb4 = TY(DT_F32, SYM_B, S(4)), x4 = TY(DT_F32, S(4)), x314 = TY(DT_F32, S(3), S(1), S(4));
    int x = b_input(&b, "x", &xb4), y = b_input(&b, "y", &x4);
    int sum = b_binary(&b, OP_ADD, x, y);
    int wide = b_binary(&b, OP_MUL, b_input(&b, "z", &x314), x);
    int cmp = b_binary(&b, OP_GT, x, y);
    b_output(&b, sum, NULL);
    b_output(&b, b_where(&b, cmp, x, y), NULL);
    CHECK(err_ok(&e));
    CHECK_TYPE(g, b_type(&b, sum), "f32[B,4]");
    CHECK_TYPE(g, b_type(&b, wide), "f32[3,B,4]");
    CHECK_TYPE(g, b_type(&b, cmp), "bool[B,4]");
    /* run with B = 2 */
    double xv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, yv[4] = {4, 4, 4, 4};
    Tensor in[3] = {check_tensor(DT_F32, 2, (int64_t[]){2, 4}, xv),
                    check_tensor(DT_F32, 1, (int64_t[]){4}, yv),
                    check_tensor(DT_F32, 3, (int64_t[]){3, 1, 4}, NULL)};
    Tensor out[2];
    double flops = 0;
    if (check_run(g, in, out, &flops)) {
        CHECK_SHAPE(&out[0], "f32[2,4]");
        CHECK_VALUES(&out[0], ((double[]){5, 6, 7, 8, 9, 10, 11, 12}), 8, 0);
        CHECK_VALUES(&out[1], ((double[]){4, 4, 4, 4, 5, 6, 7, 8}), 8, 0); /* max(x, 4) */
        CHECK(flops == 8 + 24 + 8 + 8); /* one per result element: add, mul, gt, where */
        tensor_free(&out[0]);
        tensor_free(&out[1]);
    }
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    graph_free(g);
}

/* ---------------------------------------------------------------- leaves */

static void test_leaves(void)
{
    Err e;
    Builder b;
    Graph *g = graph_bt(&b, &e);
    Type tb = TY(DT_F32, SYM_B), t23 = TY(DT_I64, S(2), S(3)), tb3 = TY(DT_I32, SYM_B, S(3));
    b_input(&b, "x", &tb);
    b_output(&b, b_constant(&b, &(Type){.dt = DT_F32, .rank = 2, .dim = {S(2), S(2)}},
                            (double[]){1.5, -2, 0.1, 4}), "const");
    b_output(&b, b_full(&b, 0.1, &tb), "full");
    b_output(&b, b_iota(&b, &t23, 0), "iota0");
    b_output(&b, b_iota(&b, &t23, -1), "iota1");
    b_output(&b, b_iota(&b, &tb3, 0), "iotab");
    Type r23 = TY(DT_F32, S(2), S(3)), r6 = TY(DT_F32, S(6));
    b_output(&b, b_rand(&b, &r23, 7, 5), "rand");
    b_output(&b, b_rand(&b, &r6, 7, 0), "rand0");
    Type i64x1 = TY(DT_I64, S(1));
    b_output(&b, b_constant(&b, &i64x1, (double[]){0x1p40 + 1}), "big"); /* not an f32 */
    CHECK(err_ok(&e));
    Tensor in = check_tensor(DT_F32, 1, (int64_t[]){3}, NULL), out[8];
    double flops = -1;
    if (check_run(g, &in, out, &flops)) {
        CHECK_VALUES(&out[0], ((double[]){1.5, -2, (float)0.1, 4}), 4, 0);
        CHECK_SHAPE(&out[1], "f32[3]");
        CHECK_VALUES(&out[1], ((double[]){(float)0.1, (float)0.1, (float)0.1}), 3, 0);
        CHECK_VALUES(&out[2], ((double[]){0, 0, 0, 1, 1, 1}), 6, 0);
        CHECK_VALUES(&out[3], ((double[]){0, 1, 2, 0, 1, 2}), 6, 0);
        CHECK_SHAPE(&out[4], "i32[3,3]");
        CHECK_VALUES(&out[4], ((double[]){0, 0, 0, 1, 1, 1, 2, 2, 2}), 9, 0);
        /* element i is philox_uniform(seed, offset, i); offset 5 starts 5 draws later */
        for (int i = 0; i < 6; i++) {
            double u = check_at(&out[5], i);
            CHECK(u == philox_uniform(7, 5, (uint64_t)i) && u >= 0 && u < 1);
        }
        CHECK(check_at(&out[6], 5) == check_at(&out[5], 0));
        CHECK(check_at(&out[5], 0) != check_at(&out[5], 1));
        CHECK(check_at(&out[7], 0) == 0x1p40 + 1);
        CHECK(flops == 12); /* rand counts one per element, the other leaves nothing */
        for (int i = 0; i < 8; i++)
            tensor_free(&out[i]);
    }
    tensor_free(&in);
    graph_free(g);
}

/* ---------------------------------------------------------------- type errors */

/* The builder's message for op over operands of types ts (declared: OPF_TYPED result). */
static void expect_error(int op, int nin, const Type *ts, const Attr *attrs, int nattr,
                         const Type *declared, const char *want)
{
    Err e;
    Builder b;
    Graph *g = graph_bt(&b, &e);
    int ids[3];
    for (int i = 0; i < nin; i++)
        ids[i] = b_input(&b, i == 0 ? "a" : i == 1 ? "b" : "c", &ts[i]);
    CHECK(b_op(&b, op, ids, nin, attrs, nattr, declared) == -1);
    CHECK_STR(e.msg, want);
    graph_free(g);
}

static void expect_binary_error(int op, Type a, Type b, const char *want)
{
    Type ts[2] = {a, b};
    expect_error(op, 2, ts, NULL, 0, NULL, want);
}

static void test_errors(void)
{
    Type fb4 = TY(DT_F32, SYM_B, S(4));
    expect_binary_error(OP_ADD, fb4, TY(DT_F32, SYM_B, S(5)),
                        "error: add: f32[B,4] and f32[B,5]: dimension 1 differs (4 vs 5)");
    expect_binary_error(OP_MUL, fb4, TY(DT_F32, SYM_T, S(4)),
                        "error: mul: f32[B,4] and f32[T,4]: dimension 0 differs (B vs T)");
    expect_binary_error(OP_SUB, TY(DT_F32, SYM_B), TY(DT_F32, S(4)),
                        "error: sub: f32[B] and f32[4]: dimension 0 differs (B vs 4)");
    /* ranks differ: shapes align at the right, the dimension indexes the result */
    expect_binary_error(OP_DIV, TY(DT_F32, S(2), S(3)), TY(DT_F32, S(5), S(3), S(1)),
                        "error: div: f32[2,3] and f32[5,3,1]: dimension 1 differs (2 vs 3)");
    expect_binary_error(OP_ADD, fb4, TY(DT_I32, SYM_B, S(4)),
                        "error: add: f32[B,4] and i32[B,4]: dtypes differ (f32 vs i32); insert a cast");
    expect_binary_error(OP_LT, fb4, TY(DT_F16, SYM_B, S(4)),
                        "error: lt: f32[B,4] and f16[B,4]: dtypes differ (f32 vs f16); insert a cast");
    expect_binary_error(OP_EQ, fb4, TY(DT_F32, S(3), S(4)),
                        "error: eq: f32[B,4] and f32[3,4]: dimension 0 differs (B vs 3)");

    Type ib4 = TY(DT_I32, SYM_B, S(4));
    expect_error(OP_EXP, 1, &ib4, NULL, 0, NULL,
                 "error: exp: operand i32[B,4] is not a float dtype; cast it first");
    Type bool3 = TY(DT_BOOL, S(3));
    expect_error(OP_NEG, 1, &bool3, NULL, 0, NULL,
                 "error: neg: operand bool[3] is not a numeric dtype; cast it first");

    Type w1[3] = {fb4, fb4, fb4};
    expect_error(OP_WHERE, 3, w1, NULL, 0, NULL,
                 "error: where: the condition f32[B,4] must be bool; compare or cast it first");
    Type w2[3] = {TY(DT_BOOL, SYM_B, S(4)), fb4, ib4};
    expect_error(OP_WHERE, 3, w2, NULL, 0, NULL,
                 "error: where: f32[B,4] and i32[B,4]: dtypes differ (f32 vs i32); insert a cast");
    Type w3[3] = {TY(DT_BOOL, SYM_B, S(3)), fb4, type_scalar(DT_F32)};
    expect_error(OP_WHERE, 3, w3, NULL, 0, NULL,
                 "error: where: bool[B,3] and f32[B,4]: dimension 1 differs (3 vs 4)");
    Type w4[3] = {TY(DT_BOOL, SYM_B), fb4, TY(DT_F32, SYM_T, S(1))};
    expect_error(OP_WHERE, 3, w4, NULL, 0, NULL,
                 "error: where: f32[B,4] and f32[T,1]: dimension 0 differs (B vs T)");

    Type to_b5 = TY(DT_I32, SYM_B, S(5)), to_b = TY(DT_I32, SYM_B);
    expect_error(OP_CAST, 1, &fb4, NULL, 0, &to_b5,
                 "error: cast: f32[B,4] and i32[B,5]: dimension 1 differs (4 vs 5)");
    expect_error(OP_CAST, 1, &fb4, NULL, 0, &to_b,
                 "error: cast: f32[B,4] and i32[B]: ranks differ (2 vs 1); cast keeps the shape");
}

static void test_leaf_errors(void)
{
    Type neg = TY(DT_F32, S(2), S(-1));
    Attr name = attr_str("name", "x");
    expect_error(OP_INPUT, 0, NULL, &name, 1, &neg, "error: input: f32[2,-1]: dimension 1 is negative");
    Type t23 = TY(DT_F32, S(2), S(3)), tb2 = TY(DT_F32, SYM_B, S(2));
    Attr five = attr_data("value", 5, (double[]){1, 2, 3, 4, 5});
    expect_error(OP_CONSTANT, 0, NULL, &five, 1, &t23,
                 "error: constant: f32[2,3] holds 6 elements but 5 values are given");
    expect_error(OP_CONSTANT, 0, NULL, &five, 1, &tb2,
                 "error: constant: f32[B,2]: dimension 0 is symbolic; a constant needs a static shape");
    Type ib3 = TY(DT_I64, SYM_B, S(3));
    Attr axis2 = attr_int("axis", 2), axism3 = attr_int("axis", -3);
    expect_error(OP_IOTA, 0, NULL, &axis2, 1, &ib3,
                 "error: iota: axis 2 is out of range for i64[B,3] (rank 2)");
    expect_error(OP_IOTA, 0, NULL, &axism3, 1, &ib3,
                 "error: iota: axis -3 is out of range for i64[B,3] (rank 2)");
}

/* index_check: the identity in range; out of range an error naming element and bound;
 * only integers, and a non-negative bound. */
static void test_index_check(void)
{
    Type t = type_make(DT_I64, 1, (int64_t[]){3});
    Attr bound = attr_int("bound", 5);
    Tensor out;
    if (check_eval(OP_INDEX_CHECK, 1, &t, (const double *[]){(double[]){4, 0, 2}}, &bound, 1,
                   NULL, &out, NULL))
        CHECK_RESULT(&out, "i64[3]", ((double[]){4, 0, 2}), 3, 0);
    Err err = {0};
    Graph *g = graph_new("bad");
    Builder b = builder_make(g, &err);
    int x = b_input(&b, "x", &t);
    b_output(&b, b_op(&b, OP_INDEX_CHECK, &x, 1, &bound, 1, NULL), NULL);
    Tensor in = check_tensor(DT_I64, 1, (int64_t[]){3}, (double[]){1, 5, -1});
    CHECK(err_ok(&err) && !interp_run(g, &in, NULL, &out, NULL, &err));
    CHECK(strstr(err.msg, "index_check: element 1 is 5, outside [0, 5)") != NULL);
    tensor_free(&in);
    graph_free(g);
    Type f = type_make(DT_F32, 1, (int64_t[]){3});
    expect_error(OP_INDEX_CHECK, 1, &f, &bound, 1, NULL, "error: index_check: f32[3] is not an integer tensor (i8, i32, i64)");
    Attr negative = attr_int("bound", -1);
    expect_error(OP_INDEX_CHECK, 1, &t, &negative, 1, NULL, "error: index_check: bound -1 is negative");
}

int main(void)
{
    test_unary_table();
    test_unary_values();
    test_broadcast();
    test_int_rounding();
    test_minmax_commute();
    test_compare();
    test_where();
    test_cast();
    test_index_check();
    test_symbolic();
    test_leaves();
    test_errors();
    test_leaf_errors();
    return check_status();
}
