/* test_ops_shape.c — matmul, transpose, reshape, expand, slice, concat and gather against
 * results worked out by hand (python's slicing, numpy's take), symbolic dims, every error. */
#include "ops_fixture.h"

/* 0, 1, 2, ...: each element names its own position. */
static double seq[64];

/* Build one op over inputs of the given dims (dtype dt each), run it, check the result. */
static void expect_op_at(const char *file, int line, int op, DType dt, int nin,
                         const char *const *dims, const double *const *vals, const Attr *attrs,
                         int nattr, const char *declared, const char *shape, const double *want,
                         int64_t n)
{
    Fx f;
    fx_init(&f, 2, 3);
    const DType dts[4] = {dt, dt, dt, dt};
    b_output(&f.b, fx_op(&f, op, nin, dts, dims, attrs, nattr, declared), NULL);
    Tensor out;
    if (fx_run(&f, vals, &out))
        check_result_at(file, line, &out, shape, want, n, 0);
    fx_free(&f);
}
#define expect_op(...) expect_op_at(__FILE__, __LINE__, __VA_ARGS__)

/* Build one op and require the builder's message, exactly. */
static void expect_error(int op, int nin, const DType *dts, const char *const *dims,
                         const Attr *attrs, int nattr, const char *declared, const char *want)
{
    Fx f;
    fx_init(&f, 2, 3);
    CHECK(fx_op(&f, op, nin, dts, dims, attrs, nattr, declared) < 0);
    CHECK_BUILD_ERROR(&f, want);
    fx_free(&f);
}

#define DIMS(...) ((const char *const[]){__VA_ARGS__})
#define VALS(...) ((const double *const[]){__VA_ARGS__})
#define DTS(...) ((const DType[]){__VA_ARGS__})

/* ---------------------------------------------------------------- matmul */

static void test_matmul_values(void)
{
    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]:
     * 1*7+2*9+3*11 = 58, 1*8+2*10+3*12 = 64, 4*7+5*9+6*11 = 139, 4*8+5*10+6*12 = 154 */
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    const double ab[4] = {58, 64, 139, 154};
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("2,3", "3,2"), VALS(a, b), NULL, 0, NULL, "f32[2,2]", ab, 4);
    /* the batch B = 2 rows are the same two rows */
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("B,3", "3,2"), VALS(a, b), NULL, 0, NULL, "f32[2,2]", ab, 4);
    /* integers: [3,4] . [5,6] = 39; wraps like the dtype */
    expect_op(OP_MATMUL, DT_I32, 2, DIMS("1,2", "2,1"), VALS((double[]){3, 4}, (double[]){5, 6}),
              NULL, 0, NULL, "i32[1,1]", (double[]){39}, 1);
    expect_op(OP_MATMUL, DT_I8, 2, DIMS("1,2", "2,1"), VALS((double[]){10, 10}, (double[]){7, 6}),
              NULL, 0, NULL, "i8[1,1]", (double[]){130 - 256}, 1);
    /* f64 accumulation: an f32 accumulator would lose the 1 next to 1e8 */
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("1,3", "3,1"), VALS((double[]){1e8, 1, -1e8}, (double[]){1, 1, 1}),
              NULL, 0, NULL, "f32[1,1]", (double[]){1}, 1);
}

/* a[2,1,2,2] holds matrices A0, A1; b[3,2,2] holds (j+1) I: a x b is [2,3,2,2] with
 * block [i][j] = (j+1) Ai, and b[3,1,2,2] x a[2,2,2] is [3,2,2,2] with block [j][i] the same. */
static void test_matmul_batch_broadcast(void)
{
    double a[8], b[12] = {0}, ab[24], ba[24];
    for (int i = 0; i < 8; i++)
        a[i] = i + 1;
    for (int j = 0; j < 3; j++)
        b[j * 4] = b[j * 4 + 3] = j + 1;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int e = 0; e < 4; e++)
                ab[(i * 3 + j) * 4 + e] = ba[(j * 2 + i) * 4 + e] = (j + 1) * a[i * 4 + e];
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("2,1,2,2", "3,2,2"), VALS(a, b), NULL, 0, NULL,
              "f32[2,3,2,2]", ab, 24);
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("3,1,2,2", "2,2,2"), VALS(b, a), NULL, 0, NULL,
              "f32[3,2,2,2]", ba, 24);
    /* a rank-2 right operand shared by every batch */
    const double twice[4] = {2, 0, 0, 2};
    double a2[8];
    for (int i = 0; i < 8; i++)
        a2[i] = 2 * a[i];
    expect_op(OP_MATMUL, DT_F32, 2, DIMS("2,2,2", "2,2"), VALS(a, twice), NULL, 0, NULL,
              "f32[2,2,2]", a2, 8);
}

static void test_matmul_types_and_flops(void)
{
    Fx f;
    fx_init(&f, 4, 3);
    int x = fx_input(&f, "x", DT_F32, "B,T,8"), w = fx_input(&f, "w", DT_F32, "8,5");
    int y = b_matmul(&f.b, x, w);
    CHECK_TYPE(f.g, b_type(&f.b, y), "f32[B,T,5]");
    int z = b_matmul(&f.b, fx_input(&f, "z", DT_F32, "1,T,5,2"), fx_input(&f, "u", DT_F32, "B,1,2,7"));
    CHECK_TYPE(f.g, b_type(&f.b, z), "f32[B,T,5,7]");
    b_output(&f.b, y, NULL);
    b_output(&f.b, z, NULL);
    Tensor out[2];
    double flops = 0;
    if (fx_run_flops(&f, NULL, out, &flops)) {
        /* 2 M N K batch: 2*3*5*8*4 + 2*5*7*2*(4*3) */
        CHECK_NEAR(flops, 2.0 * 3 * 5 * 8 * 4 + 2.0 * 5 * 7 * 2 * 12, 0);
        CHECK_SHAPE(&out[0], "f32[4,3,5]");
        CHECK_SHAPE(&out[1], "f32[4,3,5,7]");
        tensor_free(&out[0]);
        tensor_free(&out[1]);
    }
    fx_free(&f);
}

static void test_matmul_errors(void)
{
    const DType ff[2] = {DT_F32, DT_F32};
    expect_error(OP_MATMUL, 2, ff, DIMS("B,1024", "512,1000"), NULL, 0, NULL,
                 "error: matmul: f32[B,1024] x f32[512,1000]: inner dimensions 1024 and 512 differ");
    expect_error(OP_MATMUL, 2, ff, DIMS("B,T", "B,4"), NULL, 0, NULL,
                 "error: matmul: f32[B,T] x f32[B,4]: inner dimensions T and B differ");
    expect_error(OP_MATMUL, 2, ff, DIMS("4", "4,3"), NULL, 0, NULL,
                 "error: matmul: f32[4] x f32[4,3]: both operands need rank >= 2; reshape a "
                 "vector to [1,K] or [K,1]");
    expect_error(OP_MATMUL, 2, DTS(DT_F32, DT_F16), DIMS("2,3", "3,2"), NULL, 0, NULL,
                 "error: matmul: f32[2,3] x f16[3,2]: dtypes differ (f32 vs f16); insert a cast");
    expect_error(OP_MATMUL, 2, DTS(DT_BOOL, DT_BOOL), DIMS("2,3", "3,2"), NULL, 0, NULL,
                 "error: matmul: bool[2,3] x bool[3,2]: bool operands; cast them to a numeric dtype");
    expect_error(OP_MATMUL, 2, ff, DIMS("2,3,4", "5,4,6"), NULL, 0, NULL,
                 "error: matmul: f32[2,3,4] x f32[5,4,6]: batch dimension 0 differs (2 vs 5)");
    expect_error(OP_MATMUL, 2, ff, DIMS("B,3,4", "7,T,4,6"), NULL, 0, NULL,
                 "error: matmul: f32[B,3,4] x f32[7,T,4,6]: batch dimension 1 differs (B vs T)");
}

/* ---------------------------------------------------------------- transpose */

static void test_transpose(void)
{
    const Attr swap = attr_ints("perm", 2, (int64_t[]){1, 0});
    expect_op(OP_TRANSPOSE, DT_F32, 1, DIMS("2,3"), VALS(seq), &swap, 1, NULL, "f32[3,2]",
              (double[]){0, 3, 1, 4, 2, 5}, 6);
    expect_op(OP_TRANSPOSE, DT_F32, 1, DIMS("B,3"), VALS(seq), &swap, 1, NULL, "f32[3,2]",
              (double[]){0, 3, 1, 4, 2, 5}, 6);
    /* x[i][j][k] = 12 i + 4 j + k; perm [2,0,1]: out[k][i][j] = x[i][j][k] */
    double want[24];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                want[(k * 2 + i) * 3 + j] = 12 * i + 4 * j + k;
    const Attr rot = attr_ints("perm", 3, (int64_t[]){2, 0, 1});
    expect_op(OP_TRANSPOSE, DT_I32, 1, DIMS("2,3,4"), VALS(seq), &rot, 1, NULL, "i32[4,2,3]", want, 24);
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "B,T,4");
    CHECK_TYPE(f.g, b_type(&f.b, b_transpose(&f.b, x, 3, (int64_t[]){2, 0, 1})), "f32[4,B,T]");
    fx_free(&f);
}

static void test_transpose_errors(void)
{
    const DType f32[1] = {DT_F32};
    const Attr short_perm = attr_ints("perm", 1, (int64_t[]){0});
    const Attr far = attr_ints("perm", 2, (int64_t[]){0, 2});
    const Attr twice = attr_ints("perm", 2, (int64_t[]){1, 1});
    const Attr negative = attr_ints("perm", 2, (int64_t[]){-1, 0});
    expect_error(OP_TRANSPOSE, 1, f32, DIMS("2,3"), &short_perm, 1, NULL,
                 "error: transpose: perm lists 1 axes but f32[2,3] has rank 2");
    expect_error(OP_TRANSPOSE, 1, f32, DIMS("2,3"), &far, 1, NULL,
                 "error: transpose: perm entry 2 is out of range for f32[2,3] (rank 2)");
    expect_error(OP_TRANSPOSE, 1, f32, DIMS("2,3"), &negative, 1, NULL,
                 "error: transpose: perm entry -1 is out of range for f32[2,3] (rank 2)");
    expect_error(OP_TRANSPOSE, 1, f32, DIMS("2,3"), &twice, 1, NULL,
                 "error: transpose: perm names dimension 1 twice; list each axis of f32[2,3] once");
}

/* ---------------------------------------------------------------- reshape, expand */

static void test_reshape(void)
{
    expect_op(OP_RESHAPE, DT_F32, 1, DIMS("2,3"), VALS(seq), NULL, 0, "3,2", "f32[3,2]", seq, 6);
    expect_op(OP_RESHAPE, DT_F32, 1, DIMS("2,3"), VALS(seq), NULL, 0, "6", "f32[6]", seq, 6);
    /* symbolic: B,T,4 -> B*T,4 -> B,T*4 at B = 2, T = 3, elements in the same order */
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "B,T,4");
    Type flat = fx_type(&f, DT_F32, "B*T,4"), wide = fx_type(&f, DT_F32, "B,T*4");
    int y = b_reshape(&f.b, x, &flat);
    b_output(&f.b, y, NULL);
    b_output(&f.b, b_reshape(&f.b, y, &wide), NULL);
    CHECK_TYPE(f.g, b_type(&f.b, y), "f32[B*T,4]");
    Tensor out[2];
    if (fx_run(&f, VALS(seq), out)) {
        CHECK_RESULT(&out[0], "f32[6,4]", seq, 24, 0);
        CHECK_RESULT(&out[1], "f32[2,12]", seq, 24, 0);
    }
    fx_free(&f);
    /* a scalar becomes [1,1] and back */
    expect_op(OP_RESHAPE, DT_I64, 1, DIMS(""), VALS((double[]){7}), NULL, 0, "1,1", "i64[1,1]",
              (double[]){7}, 1);
}

static void test_reshape_errors(void)
{
    const DType f32[1] = {DT_F32};
    expect_error(OP_RESHAPE, 1, f32, DIMS("B,T"), NULL, 0, "B",
                 "error: reshape: f32[B,T] -> f32[B]: element counts differ (B*T vs B)");
    expect_error(OP_RESHAPE, 1, f32, DIMS("2,3"), NULL, 0, "5",
                 "error: reshape: f32[2,3] -> f32[5]: element counts differ (6 vs 5)");
    expect_error(OP_RESHAPE, 1, f32, DIMS("B,4"), NULL, 0, "2,B",
                 "error: reshape: f32[B,4] -> f32[2,B]: element counts differ (4*B vs 2*B)");
    expect_error(OP_RESHAPE, 1, f32, DIMS("B,B"), NULL, 0, "B,B",
                 "error: reshape: f32[B,B] -> f32[B,B]: the element count overflows or repeats "
                 "a symbol, so the counts cannot be compared");
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "6");
    Type t = fx_type(&f, DT_I32, "6");
    CHECK(b_reshape(&f.b, x, &t) < 0);
    CHECK_BUILD_ERROR(&f, "error: reshape: f32[6] -> i32[6]: dtypes differ; reshape keeps the "
                          "dtype (insert a cast)");
    fx_free(&f);
}

static void test_expand(void)
{
    const double r3[3] = {1, 2, 3};
    const double rows[6] = {1, 2, 3, 1, 2, 3}, cols[6] = {1, 1, 1, 2, 2, 2};
    expect_op(OP_EXPAND, DT_F32, 1, DIMS("1,3"), VALS(r3), NULL, 0, "2,3", "f32[2,3]", rows, 6);
    expect_op(OP_EXPAND, DT_F32, 1, DIMS("3"), VALS(r3), NULL, 0, "2,3", "f32[2,3]", rows, 6);
    expect_op(OP_EXPAND, DT_F32, 1, DIMS("2,1"), VALS(r3), NULL, 0, "2,3", "f32[2,3]", cols, 6);
    /* a symbolic dim passes through (B = 2 bound by the input) while the 1 stretches */
    expect_op(OP_EXPAND, DT_F32, 1, DIMS("B,1,3"), VALS(seq), NULL, 0, "B,2,3", "f32[2,2,3]",
              ((double[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}), 12);
    expect_op(OP_EXPAND, DT_BOOL, 1, DIMS(""), VALS((double[]){1}), NULL, 0, "2,1,2", "bool[2,1,2]",
              (double[]){1, 1, 1, 1}, 4);
    Fx f;
    fx_init(&f, 2, 3);
    Type tb3 = fx_type(&f, DT_F32, "B,3");
    CHECK_TYPE(f.g, b_type(&f.b, b_expand(&f.b, fx_input(&f, "x", DT_F32, "1,3"), &tb3)), "f32[B,3]");
    fx_free(&f);
    /* [2,1] -> [2,2,3]: a leading dim added and the 1 stretched */
    double want[12];
    for (int i = 0; i < 12; i++)
        want[i] = i % 6 < 3 ? 1 : 2;
    expect_op(OP_EXPAND, DT_F32, 1, DIMS("2,1"), VALS(r3), NULL, 0, "2,2,3", "f32[2,2,3]", want, 12);
}

static void test_expand_errors(void)
{
    const DType f32[1] = {DT_F32};
    expect_error(OP_EXPAND, 1, f32, DIMS("2,3"), NULL, 0, "4,3",
                 "error: expand: f32[2,3] -> f32[4,3]: dimension 0 (2) cannot become 4; only a "
                 "dimension of size 1 expands");
    expect_error(OP_EXPAND, 1, f32, DIMS("B"), NULL, 0, "T",
                 "error: expand: f32[B] -> f32[T]: dimension 0 (B) cannot become T; only a "
                 "dimension of size 1 expands");
    expect_error(OP_EXPAND, 1, f32, DIMS("2,3"), NULL, 0, "3",
                 "error: expand: f32[2,3] -> f32[3]: the operand has more dimensions than the result");
}

/* ---------------------------------------------------------------- slice */

static void expect_slice(const char *dims, int64_t axis, int64_t start, int64_t end, int64_t step,
                         const char *shape, const double *want, int64_t n)
{
    Attr a[4] = {attr_int("axis", axis), attr_int("start", start), attr_int("end", end),
                 attr_int("step", step)};
    expect_op(OP_SLICE, DT_F32, 1, DIMS(dims), VALS(seq), a, 4, NULL, shape, want, n);
}

/* Expected values are python's, on list(range(10)) and numpy arange reshapes. */
static void test_slice(void)
{
    expect_slice("10", 0, 2, 5, 1, "f32[3]", (double[]){2, 3, 4}, 3);
    expect_slice("10", 0, -4, 10, 2, "f32[2]", (double[]){6, 8}, 2);
    expect_slice("10", 0, -100, 3, 1, "f32[3]", (double[]){0, 1, 2}, 3);
    expect_slice("10", 0, 7, 100, 3, "f32[1]", (double[]){7}, 1);
    expect_slice("10", 0, 5, 2, 1, "f32[0]", NULL, 0);
    expect_slice("10", 0, -1, -100, 1, "f32[0]", NULL, 0);
    expect_slice("10", 0, 0, INT64_MAX, 4, "f32[3]", (double[]){0, 4, 8}, 3);
    expect_slice("10", -1, INT64_MIN, INT64_MAX, INT64_MAX, "f32[1]", (double[]){0}, 1);
    expect_slice("3,4", 0, 1, 3, 1, "f32[2,4]", (double[]){4, 5, 6, 7, 8, 9, 10, 11}, 8);
    expect_slice("2,5", -1, 0, INT64_MAX, 2, "f32[2,3]", (double[]){0, 2, 4, 5, 7, 9}, 6);
    expect_slice("2,5", 1, -4, 5, 2, "f32[2,2]", (double[]){1, 3, 6, 8}, 4);
    /* a symbolic dim elsewhere, and the full range of a symbolic axis */
    expect_slice("B,5", 1, -4, 5, 2, "f32[2,2]", (double[]){1, 3, 6, 8}, 4);
    expect_slice("B,5", 0, 0, INT64_MAX, 1, "f32[2,5]", seq, 10);
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "B,5");
    CHECK_TYPE(f.g, b_type(&f.b, b_slice(&f.b, x, 1, 1, 3, 1)), "f32[B,2]");
    CHECK_TYPE(f.g, b_type(&f.b, b_slice(&f.b, x, 0, 0, INT64_MAX, 1)), "f32[B,5]");
    fx_free(&f);
}

static void test_slice_errors(void)
{
    const DType f32[1] = {DT_F32};
    Attr part[4] = {attr_int("axis", 0), attr_int("start", 0), attr_int("end", 2), attr_int("step", 1)};
    expect_error(OP_SLICE, 1, f32, DIMS("B,4"), part, 4, NULL,
                 "error: slice: f32[B,4]: axis 0 is symbolic (B); only its full range (start=0, "
                 "end=9223372036854775807, step=1) can be taken");
    Attr still[4] = {attr_int("axis", 1), attr_int("start", 0), attr_int("end", 2), attr_int("step", 0)};
    expect_error(OP_SLICE, 1, f32, DIMS("B,4"), still, 4, NULL, "error: slice: step 0 must be positive");
    Attr back[4] = {attr_int("axis", 1), attr_int("start", 3), attr_int("end", 0), attr_int("step", -1)};
    expect_error(OP_SLICE, 1, f32, DIMS("B,4"), back, 4, NULL, "error: slice: step -1 must be positive");
    Attr far[3] = {attr_int("axis", 2), attr_int("start", 0), attr_int("end", 2)};
    expect_error(OP_SLICE, 1, f32, DIMS("B,4"), far, 3, NULL,
                 "error: slice: axis 2 is out of range for f32[B,4] (rank 2)");
}

/* ---------------------------------------------------------------- concat */

static void test_concat(void)
{
    const double a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, c[2] = {7, 8};
    const Attr ax1 = attr_int("axis", 1), ax0 = attr_int("axis", 0), last = attr_int("axis", -1);
    /* [[1],[2]] ++ [[3,4],[5,6]] ++ [[7],[8]] along columns */
    expect_op(OP_CONCAT, DT_F32, 3, DIMS("2,1", "2,2", "2,1"), VALS(a, b, c), &ax1, 1, NULL,
              "f32[2,4]", (double[]){1, 3, 4, 7, 2, 5, 6, 8}, 8);
    expect_op(OP_CONCAT, DT_F32, 3, DIMS("2,1", "2,2", "2,1"), VALS(a, b, c), &last, 1, NULL,
              "f32[2,4]", (double[]){1, 3, 4, 7, 2, 5, 6, 8}, 8);
    expect_op(OP_CONCAT, DT_I32, 2, DIMS("1,2", "2,2"), VALS(a, b), &ax0, 1, NULL, "i32[3,2]",
              (double[]){1, 2, 3, 4, 5, 6}, 6);
    expect_op(OP_CONCAT, DT_F32, 1, DIMS("2,2"), VALS(b), &ax0, 1, NULL, "f32[2,2]", b, 4);
    expect_op(OP_CONCAT, DT_F32, 2, DIMS("B,1", "B,2"), VALS(a, b), &ax1, 1, NULL, "f32[2,3]",
              (double[]){1, 3, 4, 2, 5, 6}, 6);
    /* the same symbols add: B + B rows = 2*B rows */
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "B,2"), y = fx_input(&f, "y", DT_F32, "B,2");
    int z = b_concat(&f.b, (int[]){x, y, x}, 3, 0);
    CHECK_TYPE(f.g, b_type(&f.b, z), "f32[3*B,2]");
    b_output(&f.b, z, NULL);
    Tensor out;
    if (fx_run(&f, VALS(seq, b), &out))
        CHECK_RESULT(&out, "f32[6,2]", ((double[]){0, 1, 2, 3, 3, 4, 5, 6, 0, 1, 2, 3}), 12, 0);
    fx_free(&f);
}

static void test_concat_errors(void)
{
    const Attr ax0 = attr_int("axis", 0), ax1 = attr_int("axis", 1), ax2 = attr_int("axis", 2);
    const DType ff[2] = {DT_F32, DT_F32};
    expect_error(OP_CONCAT, 2, DTS(DT_F32, DT_I32), DIMS("2,1", "2,2"), &ax1, 1, NULL,
                 "error: concat: f32[2,1] and operand 1 i32[2,2]: dtypes differ; insert a cast");
    expect_error(OP_CONCAT, 2, ff, DIMS("2,1", "2,2,1"), &ax1, 1, NULL,
                 "error: concat: f32[2,1] and operand 1 f32[2,2,1]: ranks differ (2 vs 3)");
    expect_error(OP_CONCAT, 2, ff, DIMS("2,1", "3,2"), &ax1, 1, NULL,
                 "error: concat: f32[2,1] and operand 1 f32[3,2]: dimension 0 differs (2 vs 3) "
                 "and only the axis (1) may");
    expect_error(OP_CONCAT, 2, ff, DIMS("B,2", "3,2"), &ax0, 1, NULL,
                 "error: concat: f32[B,2] and operand 1 f32[3,2]: sizes B and 3 along axis 0 "
                 "cannot be added; make them static");
    expect_error(OP_CONCAT, 2, ff, DIMS("B,2", "T,2"), &ax0, 1, NULL,
                 "error: concat: f32[B,2] and operand 1 f32[T,2]: sizes B and T along axis 0 "
                 "cannot be added; make them static");
    expect_error(OP_CONCAT, 2, ff, DIMS("2,1", "2,2"), &ax2, 1, NULL,
                 "error: concat: axis 2 is out of range for f32[2,1] (rank 2)");
}

/* ---------------------------------------------------------------- gather */

static void test_gather(void)
{
    /* table[i][j] = 10 i + j over [4,3]; rows picked by [[3,0],[1,3]] */
    double table[12];
    for (int i = 0; i < 12; i++)
        table[i] = 10 * (i / 3) + i % 3;
    const double rows[12] = {30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32};
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "4,3"), ids = fx_input(&f, "ids", DT_I64, "2,2");
    b_output(&f.b, b_gather(&f.b, x, ids, 0), NULL);
    Tensor out;
    if (fx_run(&f, VALS(table, (double[]){3, 0, 1, 3}), &out))
        CHECK_RESULT(&out, "f32[2,2,3]", rows, 12, 0);
    fx_free(&f);
    /* axis 1 of table [2,4] (t[i][j] = 10 i + j) with i32 indices [3,0,2] */
    double t24[8];
    for (int i = 0; i < 8; i++)
        t24[i] = 10 * (i / 4) + i % 4;
    fx_init(&f, 2, 3);
    x = fx_input(&f, "x", DT_F32, "2,4");
    ids = fx_input(&f, "ids", DT_I32, "T");
    int y = b_gather(&f.b, x, ids, 1);
    CHECK_TYPE(f.g, b_type(&f.b, y), "f32[2,T]");
    b_output(&f.b, y, NULL);
    if (fx_run(&f, VALS(t24, (double[]){3, 0, 2}), &out))
        CHECK_RESULT(&out, "f32[2,3]", ((double[]){3, 0, 2, 13, 10, 12}), 6, 0);
    fx_free(&f);
    /* a scalar index drops the axis: row 2 */
    fx_init(&f, 2, 3);
    x = fx_input(&f, "x", DT_F32, "4,3");
    b_output(&f.b, b_gather(&f.b, x, fx_input(&f, "ids", DT_I8, ""), 0), NULL);
    if (fx_run(&f, VALS(table, (double[]){2}), &out))
        CHECK_RESULT(&out, "f32[3]", ((double[]){20, 21, 22}), 3, 0);
    fx_free(&f);
}

/* An index outside [0, 4) stops the run with its value and the bound. */
static void expect_gather_range_error(double bad, const char *want)
{
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "4,3"), ids = fx_input(&f, "ids", DT_I64, "B");
    b_output(&f.b, b_gather(&f.b, x, ids, 0), NULL);
    Tensor in[2] = {check_tensor(DT_F32, 2, (int64_t[]){4, 3}, seq),
                    check_tensor(DT_I64, 1, (int64_t[]){2}, (double[]){0, bad})};
    Tensor out = {0};
    Err e = {0};
    CHECK(!interp_run(f.g, in, NULL, &out, NULL, &e));
    CHECK_STR(e.msg, want);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
    fx_free(&f);
}

static void test_gather_errors(void)
{
    expect_gather_range_error(4, "error: gather: index 4 (element 1 of the indices) is out of "
                                 "range [0, 4) for axis 0");
    expect_gather_range_error(-1, "error: gather: index -1 (element 1 of the indices) is out of "
                                  "range [0, 4) for axis 0");
    const Attr ax2 = attr_int("axis", 2);
    expect_error(OP_GATHER, 2, DTS(DT_F32, DT_F32), DIMS("4,3", "2"), NULL, 0, NULL,
                 "error: gather: indices f32[2] must have an integer dtype (i8, i32, i64); cast them");
    expect_error(OP_GATHER, 2, DTS(DT_F32, DT_BOOL), DIMS("4,3", "2"), NULL, 0, NULL,
                 "error: gather: indices bool[2] must have an integer dtype (i8, i32, i64); cast them");
    expect_error(OP_GATHER, 2, DTS(DT_F32, DT_I64), DIMS("4,3", "2"), &ax2, 1, NULL,
                 "error: gather: axis 2 is out of range for f32[4,3] (rank 2)");
    expect_error(OP_GATHER, 2, DTS(DT_F32, DT_I64), DIMS("2,2,2,2,2", "2,2,2,2,2"), NULL, 0, NULL,
                 "error: gather: f32[2,2,2,2,2] indexed by i64[2,2,2,2,2] has rank 9, above the "
                 "limit 8");
}

/* ---------------------------------------------------------------- index_add */

/* index_add(base, ids, src), base[i][j] = 10 i + j over [4,3], src[k][j] = k + 1 at rows
 * [[3,0],[1,3]] (row 3 twice), and a symbolic count of indices */
static void test_index_add(void)
{
    double table[12], src[12], want[12];
    for (int i = 0; i < 12; i++)
        table[i] = want[i] = 10 * (i / 3) + i % 3, src[i] = i / 3 + 1;
    const int rows[4] = {3, 0, 1, 3};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            want[rows[k] * 3 + j] += k + 1;
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "4,3"), ids = fx_input(&f, "ids", DT_I64, "2,2");
    int y = b_index_add(&f.b, x, ids, fx_input(&f, "src", DT_F32, "2,2,3"));
    CHECK_TYPE(f.g, b_type(&f.b, y), "f32[4,3]");
    b_output(&f.b, y, NULL);
    Tensor out;
    if (fx_run(&f, VALS(table, (double[]){3, 0, 1, 3}, src), &out))
        CHECK_RESULT(&out, "f32[4,3]", want, 12, 0);
    fx_free(&f);
    fx_init(&f, 2, 3);
    x = fx_input(&f, "x", DT_F32, "4");
    ids = fx_input(&f, "ids", DT_I32, "B"); /* inputs in order, not as call arguments */
    y = b_index_add(&f.b, x, ids, fx_input(&f, "src", DT_F32, "B"));
    b_output(&f.b, y, NULL);
    if (fx_run(&f, VALS(((double[]){1, 2, 3, 4}), ((double[]){2, 2}), ((double[]){0.5, 0.25})), &out))
        CHECK_RESULT(&out, "f32[4]", ((double[]){1, 2, 3.75, 4}), 4, 0);
    fx_free(&f);
}

static void test_index_add_errors(void)
{
    expect_error(OP_INDEX_ADD, 3, DTS(DT_F32, DT_F32, DT_F32), DIMS("4,3", "2", "2,3"), NULL, 0,
                 NULL, "error: index_add: indices f32[2] must have an integer dtype (i8, i32, "
                 "i64); cast them");
    expect_error(OP_INDEX_ADD, 3, DTS(DT_F32, DT_I64, DT_F32), DIMS("4,3", "2", "2,4"), NULL, 0,
                 NULL, "error: index_add: src is f32[2,4]; into base f32[4,3] at indices i64[2] "
                 "it must be f32[2,3] (the indices' shape, then base's dims after the first, "
                 "base's dtype)");
    expect_error(OP_INDEX_ADD, 3, DTS(DT_F32, DT_I64, DT_BF16), DIMS("4,3", "2", "2,3"), NULL, 0,
                 NULL, "error: index_add: src is bf16[2,3]; into base f32[4,3] at indices i64[2] "
                 "it must be f32[2,3] (the indices' shape, then base's dims after the first, "
                 "base's dtype)");
    expect_error(OP_INDEX_ADD, 3, DTS(DT_F32, DT_I64, DT_F32), DIMS("", "2", "2"), NULL, 0, NULL,
                 "error: index_add: base f32[] has no axis 0 to add rows into");
    expect_error(OP_INDEX_ADD, 3, DTS(DT_F32, DT_I64, DT_F32), DIMS("2,2,2,2,2", "2,2,2,2,2", "2"),
                 NULL, 0, NULL, "error: index_add: base f32[2,2,2,2,2] indexed by "
                 "i64[2,2,2,2,2]: src would have rank 9, above the limit 8");
}

int main(void)
{
    for (int i = 0; i < 64; i++)
        seq[i] = i;
    test_matmul_values();
    test_matmul_batch_broadcast();
    test_matmul_types_and_flops();
    test_matmul_errors();
    test_transpose();
    test_transpose_errors();
    test_reshape();
    test_reshape_errors();
    test_expand();
    test_expand_errors();
    test_slice();
    test_slice_errors();
    test_concat();
    test_concat_errors();
    test_gather();
    test_gather_errors();
    test_index_add();
    test_index_add_errors();
    return check_status();
}
