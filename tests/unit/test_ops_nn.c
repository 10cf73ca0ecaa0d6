/* test_ops_nn.c — the composites against closed forms worked out here (softmax from exp
 * values, layer_norm of [1,2,3,4], one-key and causal attention, uniform cross_entropy),
 * and every composite against its own decomposition run through the interpreter. */
#include "ops_fixture.h"

#define DIMS(...) ((const char *const[]){__VA_ARGS__})
#define VALS(...) ((const double *const[]){__VA_ARGS__})

/* Build `op` over inputs (dts[i], dims[i]), run on vals at B = 2, T = 3, check the result. */
static void expect_op_at(const char *file, int line, int op, int nin, const DType *dts,
                         const char *const *dims, const double *const *vals, const Attr *attrs,
                         int nattr, const char *shape, const double *want, int64_t n, double tol)
{
    Fx f;
    fx_init(&f, 2, 3);
    b_output(&f.b, fx_op(&f, op, nin, dts, dims, attrs, nattr, NULL), NULL);
    Tensor out;
    if (fx_run(&f, vals, &out))
        check_result_at(file, line, &out, shape, want, n, tol);
    fx_free(&f);
}
#define expect_op(...) expect_op_at(__FILE__, __LINE__, __VA_ARGS__)

/* The builder's message for `op` over inputs (dts[i], dims[i]), exactly. */
static void expect_error(int op, int nin, const DType *dts, const char *const *dims,
                         const Attr *attrs, int nattr, const char *want)
{
    Fx f;
    fx_init(&f, 2, 3);
    CHECK(fx_op(&f, op, nin, dts, dims, attrs, nattr, NULL) < 0);
    CHECK_BUILD_ERROR(&f, want);
    fx_free(&f);
}

static const DType F1[1] = {DT_F32}, F3[3] = {DT_F32, DT_F32, DT_F32};
static const DType CE[2] = {DT_F32, DT_I64};

/* ---------------------------------------------------------------- softmax */

static void test_softmax(void)
{
    const double x[3] = {1, 2, 3};
    double s = exp(1) + exp(2) + exp(3);
    expect_op(OP_SOFTMAX, 1, F1, DIMS("3"), VALS(x), NULL, 0, "f32[3]",
              (double[]){exp(1) / s, exp(2) / s, exp(3) / s}, 3, 1e-7);
    expect_op(OP_LOG_SOFTMAX, 1, F1, DIMS("3"), VALS(x), NULL, 0, "f32[3]",
              (double[]){1 - log(s), 2 - log(s), 3 - log(s)}, 3, 1e-7);
    /* axis 0 of [[1,2],[3,4]]: each column is softmax([a, a+2]) */
    double lo = 1 / (1 + exp(2)), hi = exp(2) / (1 + exp(2));
    const Attr ax0 = attr_int("axis", 0);
    expect_op(OP_SOFTMAX, 1, F1, DIMS("2,2"), VALS((double[]){1, 2, 3, 4}), &ax0, 1, "f32[2,2]",
              (double[]){lo, lo, hi, hi}, 4, 1e-7);
    expect_op(OP_SOFTMAX, 1, F1, DIMS("B,2"), VALS((double[]){1, 2, 3, 4}), &ax0, 1, "f32[2,2]",
              (double[]){lo, lo, hi, hi}, 4, 1e-7);
    /* large logits: exp(1000) overflows, the shifted form does not */
    expect_op(OP_SOFTMAX, 1, F1, DIMS("2"), VALS((double[]){1000, 1000}), NULL, 0, "f32[2]",
              (double[]){0.5, 0.5}, 2, 0);
    expect_op(OP_LOG_SOFTMAX, 1, F1, DIMS("2"), VALS((double[]){1000, 0}), NULL, 0, "f32[2]",
              (double[]){0, -1000}, 2, 0);
    /* a -inf logit gets probability 0; a NaN poisons its row */
    expect_op(OP_SOFTMAX, 1, F1, DIMS("2,2"), VALS((double[]){-INFINITY, 5, NAN, 1}), NULL, 0,
              "f32[2,2]", (double[]){0, 1, NAN, NAN}, 4, 0);
    expect_error(OP_SOFTMAX, 1, (DType[]){DT_I32}, DIMS("3"), NULL, 0,
                 "error: softmax: operand i32[3] is not a float dtype; cast it first");
    const Attr ax2 = attr_int("axis", 2);
    expect_error(OP_LOG_SOFTMAX, 1, F1, DIMS("B,3"), &ax2, 1,
                 "error: log_softmax: axis 2 is out of range for f32[B,3] (rank 2)");
}

/* ---------------------------------------------------------------- norms */

static void test_layer_norm(void)
{
    /* [1,2,3,4]: mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 */
    const double x[4] = {1, 2, 3, 4}, w[4] = {1, -1, 2, 0.5}, b[4] = {0, 1, 0, -1};
    double r = 1 / sqrt(1.25 + 1e-5), plain[4], affine[4];
    for (int i = 0; i < 4; i++) {
        plain[i] = (x[i] - 2.5) * r;
        affine[i] = plain[i] * w[i] + b[i];
    }
    expect_op(OP_LAYER_NORM, 1, F1, DIMS("4"), VALS(x), NULL, 0, "f32[4]", plain, 4, 1e-7);
    expect_op(OP_LAYER_NORM, 3, F3, DIMS("1,4", "4", "4"), VALS(x, w, b), NULL, 0, "f32[1,4]",
              affine, 4, 1e-7);
    /* eps inside the square root: with eps = 1, 1/sqrt(2.25) */
    const Attr eps1 = attr_float("eps", 1);
    expect_op(OP_LAYER_NORM, 1, F1, DIMS("4"), VALS(x), &eps1, 1, "f32[4]",
              (double[]){-1.5 / 1.5, -0.5 / 1.5, 0.5 / 1.5, 1.5 / 1.5}, 4, 1e-7);
    /* rms: mean of squares (1 + 4 + 9 + 16) / 4 = 7.5 */
    double rr = 1 / sqrt(7.5 + 1e-6), rms[4];
    for (int i = 0; i < 4; i++)
        rms[i] = x[i] * rr * w[i];
    expect_op(OP_RMS_NORM, 2, F3, DIMS("4", "4"), VALS(x, w), NULL, 0, "f32[4]", rms, 4, 1e-7);
    expect_op(OP_RMS_NORM, 1, F1, DIMS("4"), VALS(x), NULL, 0, "f32[4]",
              (double[]){rr, 2 * rr, 3 * rr, 4 * rr}, 4, 1e-7);
}

static void test_norm_errors(void)
{
    expect_error(OP_LAYER_NORM, 2, F3, DIMS("B,3", "4"), NULL, 0,
                 "error: layer_norm: weight f32[4] must be f32[3] to match the last dimension of "
                 "x f32[B,3]");
    expect_error(OP_LAYER_NORM, 3, (DType[]){DT_F32, DT_F32, DT_F16}, DIMS("B,3", "3", "3"), NULL, 0,
                 "error: layer_norm: bias f16[3] must be f32[3] to match the last dimension of "
                 "x f32[B,3]");
    expect_error(OP_RMS_NORM, 2, F3, DIMS("B,T", "B"), NULL, 0,
                 "error: rms_norm: weight f32[B] must be f32[T] to match the last dimension of "
                 "x f32[B,T]");
    expect_error(OP_RMS_NORM, 1, (DType[]){DT_I32}, DIMS("2,3"), NULL, 0,
                 "error: rms_norm: x i32[2,3] is not a float dtype; cast it first");
    expect_error(OP_LAYER_NORM, 1, F1, DIMS(""), NULL, 0,
                 "error: layer_norm: x f32[] is a scalar; it normalises over the last dimension");
    const Attr neg = attr_float("eps", -1);
    expect_error(OP_LAYER_NORM, 1, F1, DIMS("3"), &neg, 1,
                 "error: layer_norm: eps = -1 must be finite and >= 0");
}

/* ---------------------------------------------------------------- dropout */

/* Element i survives when philox_uniform(seed, offset, i) >= p (p held in f32). */
static void expect_dropout(double p, int64_t seed, int64_t offset)
{
    enum { N = 4096 };
    static double x[N], want[N];
    int kept = 0;
    for (int i = 0; i < N; i++) {
        x[i] = i + 1;
        bool keep = philox_uniform((uint64_t)seed, (uint64_t)offset, (uint64_t)i) >= (float)p;
        want[i] = keep ? x[i] / (1 - p) : 0;
        kept += keep;
    }
    Attr a[3] = {attr_float("p", p), attr_int("seed", seed), attr_int("offset", offset)};
    expect_op(OP_DROPOUT, 1, F1, DIMS("B,2048"), VALS(x), a, 3, "f32[2,2048]", want, N, 1e-7);
    /* the mask is not degenerate: the share kept is 1 - p within 5 standard deviations */
    CHECK(fabs(kept - N * (1 - p)) <= 5 * sqrt(N * p * (1 - p)));
}

static void test_dropout(void)
{
    expect_dropout(0, 7, 3);
    expect_dropout(0.5, 7, 3);
    expect_dropout(0.1, 11, 0);
    expect_dropout(0.9, 1, 1000);
    /* the offset shifts the stream: offset 5 element 0 is offset 0 element 5 */
    CHECK(philox_uniform(7, 5, 0) == philox_uniform(7, 0, 5));
    Attr p1 = attr_float("p", 1), pn = attr_float("p", -0.25);
    expect_error(OP_DROPOUT, 1, F1, DIMS("3"), &p1, 1, "error: dropout: p = 1 must be in [0, 1)");
    expect_error(OP_DROPOUT, 1, F1, DIMS("3"), &pn, 1, "error: dropout: p = -0.25 must be in [0, 1)");
    expect_error(OP_DROPOUT, 1, (DType[]){DT_I64}, DIMS("3"), &p1, 1,
                 "error: dropout: operand i64[3] is not a float dtype; cast it first");
}

/* ---------------------------------------------------------------- cross_entropy */

static void test_cross_entropy(void)
{
    /* uniform logits over C = 5 classes: every position costs log 5 */
    double flat[20];
    for (int i = 0; i < 20; i++)
        flat[i] = 0.7;
    const double labels[4] = {0, 4, 2, 2};
    const Attr none = attr_str("reduction", "none"), sum = attr_str("reduction", "sum");
    const Attr mean = attr_str("reduction", "mean");
    expect_op(OP_CROSS_ENTROPY, 2, CE, DIMS("4,5", "4"), VALS(flat, labels), NULL, 0, "f32[]",
              (double[]){log(5)}, 1, 1e-7);
    expect_op(OP_CROSS_ENTROPY, 2, CE, DIMS("4,5", "4"), VALS(flat, labels), &mean, 1, "f32[]",
              (double[]){log(5)}, 1, 1e-7);
    expect_op(OP_CROSS_ENTROPY, 2, CE, DIMS("4,5", "4"), VALS(flat, labels), &sum, 1, "f32[]",
              (double[]){4 * log(5)}, 1, 1e-7);
    expect_op(OP_CROSS_ENTROPY, 2, CE, DIMS("B,2,5", "B,2"), VALS(flat, labels), &none, 1,
              "f32[2,2]", (double[]){log(5), log(5), log(5), log(5)}, 4, 1e-7);
    /* [1,2,3] labelled 2: log(e + e^2 + e^3) - 3; [1,1,1] labelled 0: log 3 */
    double l0 = log(exp(1) + exp(2) + exp(3)) - 3, l1 = log(3);
    const double logits[6] = {1, 2, 3, 1, 1, 1};
    expect_op(OP_CROSS_ENTROPY, 2, (DType[]){DT_F32, DT_I32}, DIMS("2,3", "2"),
              VALS(logits, (double[]){2, 0}), &none, 1, "f32[2]", (double[]){l0, l1}, 2, 1e-7);
    expect_op(OP_CROSS_ENTROPY, 2, (DType[]){DT_F32, DT_I8}, DIMS("B,3", "B"),
              VALS(logits, (double[]){2, 0}), NULL, 0, "f32[]", (double[]){(l0 + l1) / 2}, 1, 1e-7);
    /* a single position: logits [C], labels a scalar */
    expect_op(OP_CROSS_ENTROPY, 2, CE, DIMS("3", ""), VALS(logits, (double[]){2}), NULL, 0, "f32[]",
              (double[]){l0}, 1, 1e-7);
}

static void test_cross_entropy_errors(void)
{
    Fx f;
    fx_init(&f, 2, 3);
    int x = fx_input(&f, "x", DT_F32, "B,3"), y = fx_input(&f, "y", DT_I64, "B");
    b_output(&f.b, b_op(&f.b, OP_CROSS_ENTROPY, (int[]){x, y}, 2, NULL, 0, NULL), NULL);
    Tensor in[2] = {check_tensor(DT_F32, 2, (int64_t[]){2, 3}, NULL),
                    check_tensor(DT_I64, 1, (int64_t[]){2}, (double[]){0, 3})};
    Tensor out = {0};
    Err e = {0};
    CHECK(!interp_run(f.g, in, NULL, &out, NULL, &e));
    CHECK_STR(e.msg, "error: cross_entropy: label 3 at position 1 is out of range [0, 3)");
    tensor_free(&in[0]);
    tensor_free(&in[1]);
    fx_free(&f);

    const Attr avg = attr_str("reduction", "avg");
    expect_error(OP_CROSS_ENTROPY, 2, CE, DIMS("B,3", "B"), &avg, 1,
                 "error: cross_entropy: reduction \"avg\" is unknown; use \"mean\", \"sum\" or \"none\"");
    expect_error(OP_CROSS_ENTROPY, 2, F3, DIMS("B,3", "B"), NULL, 0,
                 "error: cross_entropy: labels f32[B] must have an integer dtype (i8, i32, i64); "
                 "cast them");
    expect_error(OP_CROSS_ENTROPY, 2, CE, DIMS("B,T,5", "B"), NULL, 0,
                 "error: cross_entropy: labels i64[B] must have the shape of logits f32[B,T,5] "
                 "without its last (class) dimension: ranks 1 and 3");
    expect_error(OP_CROSS_ENTROPY, 2, CE, DIMS("B,5", "T"), NULL, 0,
                 "error: cross_entropy: labels i64[T] must have the shape of logits f32[B,5] "
                 "without its last (class) dimension: dimension 0 differs (T vs B)");
    expect_error(OP_CROSS_ENTROPY, 2, CE, DIMS("", ""), NULL, 0,
                 "error: cross_entropy: logits f32[] need a class dimension (rank >= 1)");
    expect_error(OP_CROSS_ENTROPY, 2, (DType[]){DT_I32, DT_I32}, DIMS("B,3", "B"), NULL, 0,
                 "error: cross_entropy: logits i32[B,3] is not a float dtype; cast it first");
}

/* ---------------------------------------------------------------- attention */

static void test_attention_closed_forms(void)
{
    double q[24], k[8], v[10];
    for (int i = 0; i < 24; i++)
        q[i] = philox_normal(1, 0, (uint64_t)i);
    for (int i = 0; i < 8; i++)
        k[i] = philox_normal(2, 0, (uint64_t)i);
    for (int i = 0; i < 10; i++)
        v[i] = i + 1;
    /* one key: its weight is 1 whatever the score, so every row is that key's value */
    double ones[30];
    for (int i = 0; i < 30; i++)
        ones[i] = v[i / 15 * 5 + i % 5];
    expect_op(OP_ATTENTION, 3, F3, DIMS("B,3,4", "B,1,4", "B,1,5"), VALS(q, k, v), NULL, 0,
              "f32[2,3,5]", ones, 30, 1e-7);
    /* q = k = I2, v = [[1,2],[3,4]], scale 1: row i weighs key i by e/(1+e) */
    const double eye[4] = {1, 0, 0, 1}, v2[4] = {1, 2, 3, 4};
    double hi = exp(1) / (1 + exp(1)), lo = 1 - hi;
    const Attr one = attr_float("scale", 1);
    expect_op(OP_ATTENTION, 3, F3, DIMS("2,2", "2,2", "2,2"), VALS(eye, eye, v2), &one, 1,
              "f32[2,2]", (double[]){hi + 3 * lo, 2 * hi + 4 * lo, lo + 3 * hi, 2 * lo + 4 * hi},
              4, 1e-7);
    /* the default scale 1/sqrt(2) */
    double hs = exp(M_SQRT1_2) / (1 + exp(M_SQRT1_2)), ls = 1 - hs;
    expect_op(OP_ATTENTION, 3, F3, DIMS("2,2", "2,2", "2,2"), VALS(eye, eye, v2), NULL, 0,
              "f32[2,2]", (double[]){hs + 3 * ls, 2 * hs + 4 * ls, ls + 3 * hs, 2 * ls + 4 * hs},
              4, 1e-7);
    /* causal: query 0 sees only key 0, so its row is v[0]; query 1 sees both */
    Attr causal[2] = {attr_bool("causal", true), attr_float("scale", 1)};
    expect_op(OP_ATTENTION, 3, F3, DIMS("2,2", "2,2", "2,2"), VALS(eye, eye, v2), causal, 2,
              "f32[2,2]", (double[]){1, 2, lo + 3 * hi, 2 * lo + 4 * hi}, 4, 1e-7);
    /* causal with more keys than queries: query 0 still sees key 0 alone */
    double kv[12];
    for (int i = 0; i < 12; i++)
        kv[i] = philox_normal(3, 0, (uint64_t)i);
    Fx f;
    fx_init(&f, 2, 3);
    int in[3] = {fx_input(&f, "q", DT_F32, "T,2"), fx_input(&f, "k", DT_F32, "6,2"),
                 fx_input(&f, "v", DT_F32, "6,2")};
    b_output(&f.b, b_op(&f.b, OP_ATTENTION, in, 3, causal, 1, NULL), NULL);
    Tensor out;
    if (fx_run(&f, VALS(q, kv, kv), &out)) {
        CHECK_SHAPE(&out, "f32[3,2]");
        CHECK_NEAR(check_at(&out, 0), kv[0], 1e-7);
        CHECK_NEAR(check_at(&out, 1), kv[1], 1e-7);
        tensor_free(&out);
    }
    fx_free(&f);
}

static void test_attention_types(void)
{
    Fx f;
    fx_init(&f, 2, 3);
    int q = fx_input(&f, "q", DT_F32, "B,4,8"), k = fx_input(&f, "k", DT_F32, "B,6,8");
    int v = fx_input(&f, "v", DT_F32, "B,6,5");
    CHECK_TYPE(f.g, b_type(&f.b, b_op(&f.b, OP_ATTENTION, (int[]){q, k, v}, 3, NULL, 0, NULL)),
               "f32[B,4,5]");
    int q4 = fx_input(&f, "q4", DT_F32, "2,1,T,8"), k4 = fx_input(&f, "k4", DT_F32, "3,6,8");
    CHECK_TYPE(f.g, b_type(&f.b, b_op(&f.b, OP_ATTENTION, (int[]){q4, k4, k4}, 3, NULL, 0, NULL)),
               "f32[2,3,T,8]");
    CHECK(err_ok(&f.e));
    fx_free(&f);
}

static void test_attention_errors(void)
{
    expect_error(OP_ATTENTION, 3, F3, DIMS("B,4,8", "B,6,7", "B,6,5"), NULL, 0,
                 "error: attention: q f32[B,4,8] and k f32[B,6,7]: head dimensions 8 and 7 differ");
    expect_error(OP_ATTENTION, 3, F3, DIMS("B,4,8", "B,6,8", "B,5,8"), NULL, 0,
                 "error: attention: k f32[B,6,8] and v f32[B,5,8]: key counts 6 and 5 differ");
    expect_error(OP_ATTENTION, 3, F3, DIMS("2,4,8", "3,6,8", "3,6,8"), NULL, 0,
                 "error: attention: q f32[2,4,8], k f32[3,6,8], v f32[3,6,8]: batch dimension 0 "
                 "differs (2 vs 3)");
    expect_error(OP_ATTENTION, 3, F3, DIMS("B,4,8", "B,6,8", "T,6,8"), NULL, 0,
                 "error: attention: q f32[B,4,8], k f32[B,6,8], v f32[T,6,8]: batch dimension 0 "
                 "differs (B vs T)");
    expect_error(OP_ATTENTION, 3, (DType[]){DT_F32, DT_F16, DT_F32}, DIMS("4,8", "6,8", "6,8"),
                 NULL, 0, "error: attention: q f32[4,8], k f16[6,8], v f32[6,8]: dtypes differ; "
                          "insert a cast");
    expect_error(OP_ATTENTION, 3, F3, DIMS("8", "6,8", "6,8"), NULL, 0,
                 "error: attention: q f32[8], k f32[6,8], v f32[6,8]: each needs rank >= 2 "
                 "([..., T, D])");
    const Attr neg = attr_float("scale", -1);
    expect_error(OP_ATTENTION, 3, F3, DIMS("4,8", "6,8", "6,8"), &neg, 1,
                 "error: attention: scale = -1 must be finite and >= 0 (0 means 1/sqrt(head "
                 "dimension))");
    expect_error(OP_ATTENTION, 3, (DType[]){DT_I32, DT_I32, DT_I32}, DIMS("4,8", "6,8", "6,8"),
                 NULL, 0, "error: attention: q i32[4,8] is not a float dtype; cast it first");
    static const DType f4[4] = {DT_F32, DT_F32, DT_F32, DT_F32};
    expect_error(OP_ATTENTION, 4, f4, DIMS("2,4,8", "2,6,8", "2,6,8", "4,5"), NULL, 0,
                 "error: attention: bias f32[4,5]: 5 columns, not the 6 keys (or 1)");
    expect_error(OP_ATTENTION, 4, f4, DIMS("2,4,8", "2,6,8", "2,6,8", "3,6"), NULL, 0,
                 "error: attention: bias f32[3,6]: 3 rows, not the 4 queries (or 1)");
    expect_error(OP_ATTENTION, 4, f4, DIMS("2,4,8", "2,6,8", "2,6,8", "3,2,4,6"), NULL, 0,
                 "error: attention: bias f32[3,2,4,6] does not broadcast to the result "
                 "f32[2,4,8]'s batch dimensions");
    expect_error(OP_ATTENTION, 4, (DType[]){DT_F32, DT_F32, DT_F32, DT_F16},
                 DIMS("4,8", "6,8", "6,8", "4,6"), NULL, 0,
                 "error: attention: bias f16[4,6]: dtype differs from q's f32; insert a cast");
    expect_error(OP_ATTENTION, 4, f4, DIMS("4,8", "6,8", "6,8", "6"), NULL, 0,
                 "error: attention: bias f32[6] needs rank >= 2 ([..., T, S])");
}

/* ---------------------------------------------------------------- FLOP counts */

static void expect_flops(int op, int nin, const DType *dts, const char *const *dims,
                         const Attr *attrs, int nattr, double want)
{
    Fx f;
    fx_init(&f, 2, 3);
    b_output(&f.b, fx_op(&f, op, nin, dts, dims, attrs, nattr, NULL), NULL);
    Tensor out;
    double flops = -1;
    if (fx_run_flops(&f, NULL, &out, &flops)) {
        CHECK_NEAR(flops, want, 0);
        tensor_free(&out);
    }
    fx_free(&f);
}

static void test_flops(void)
{
    Attr half = attr_float("p", 0.5), zero = attr_float("p", 0);
    expect_flops(OP_SOFTMAX, 1, F1, DIMS("B,3"), NULL, 0, 5 * 6);
    expect_flops(OP_LAYER_NORM, 3, F3, DIMS("B,4", "4", "4"), NULL, 0, 7 * 8);
    expect_flops(OP_RMS_NORM, 1, F1, DIMS("B,4"), NULL, 0, 3 * 8);
    expect_flops(OP_DROPOUT, 1, F1, DIMS("B,5"), &half, 1, 3 * 10);
    expect_flops(OP_DROPOUT, 1, F1, DIMS("B,5"), &zero, 1, 0);
    expect_flops(OP_CROSS_ENTROPY, 2, CE, DIMS("4,5", "4"), NULL, 0, 5 * 20 + 3 * 4);
    /* batch 2, T 4, S 6: 2 T S (D + Dv) for the two products, 6 per score */
    expect_flops(OP_ATTENTION, 3, F3, DIMS("B,4,8", "B,6,8", "B,6,5"), NULL, 0,
                 2.0 * 4 * 6 * (2 * (8 + 5) + 6));
}

/* ---------------------------------------------------------------- decompositions */

typedef struct Case {
    const char *what;
    int op, nin;
    DType dt[3];
    const char *dims[3];
    Attr attrs[3];
    int nattr;
} Case;

/* Float inputs are standard normal samples; integer inputs are labels below input 0's
 * last dimension. vals[i] is malloc'd. */
static void sample_inputs(const Fx *f, double **vals)
{
    int64_t dims[COIL_MAX_RANK], classes = 1;
    for (int i = 0; i < f->g->ninput; i++) {
        const Type *t = &f->g->node[f->g->input[i]].type;
        type_resolve(t, &f->sb, dims);
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++)
            n *= dims[d];
        if (i == 0 && t->rank > 0)
            classes = dims[t->rank - 1];
        vals[i] = malloc(sizeof(double) * (size_t)(n + 1));
        for (int64_t j = 0; j < n; j++)
            vals[i][j] = dtype_info[t->dt].is_float ? philox_normal(17, (uint64_t)i << 20, (uint64_t)j)
                                                    : (double)((j * 7 + 3) % classes);
    }
}

/* Same shape, and every element within 1e-6 (relative above 1). */
static void expect_agree(const char *what, const Tensor *want, const Tensor *got)
{
    char ws[256], gs[256];
    tensor_fmt(want, ws, sizeof ws);
    if (strcmp(ws, tensor_fmt(got, gs, sizeof gs)) != 0) {
        fprintf(stderr, "%s: decomposition gives %s, the composite %s\n", what, gs, ws);
        check_failures++;
        return;
    }
    for (int64_t i = 0; i < tensor_numel(want); i++)
        if (!check_close(check_at(got, i), check_at(want, i), 1e-6)) {
            fprintf(stderr, "%s: element %lld: decomposition %.9g, composite %.9g\n", what,
                    (long long)i, check_at(got, i), check_at(want, i));
            check_failures++;
            return;
        }
}

/* Both graphs run on the same sampled inputs. */
static void run_both(const char *what, Fx *whole, Fx *parts)
{
    double *vals[3] = {0};
    sample_inputs(whole, vals);
    Tensor want, got;
    if (fx_run(whole, (const double *const *)vals, &want)) {
        if (fx_run(parts, (const double *const *)vals, &got)) {
            expect_agree(what, &want, &got);
            tensor_free(&got);
        }
        tensor_free(&want);
    }
    for (int i = 0; i < 3; i++)
        free(vals[i]);
}

/* The decomposition, built by the op table's row on a second graph, has the composite's
 * type, only primitives, verifies, and computes the same values. */
static void check_decomposition(const Case *c, int64_t B, int64_t T)
{
    Fx whole, parts;
    fx_init(&whole, B, T);
    fx_init(&parts, B, T);
    int a[3], p[3];
    for (int i = 0; i < c->nin; i++) {
        const char *name = (const char *[]){"x", "y", "z"}[i];
        a[i] = fx_input(&whole, name, c->dt[i], c->dims[i]);
        p[i] = fx_input(&parts, name, c->dt[i], c->dims[i]);
    }
    int id = b_op(&whole.b, c->op, a, c->nin, c->attrs, c->nattr, NULL);
    b_output(&whole.b, id, NULL);
    int r = id < 0 ? -1 : op_info[c->op].decompose(&parts.b, &whole.g->node[id], p);
    b_output(&parts.b, r, NULL);
    Err ve = {0};
    if (r < 0) {
        fprintf(stderr, "%s: building failed: %s%s\n", c->what, whole.e.msg, parts.e.msg);
        check_failures++;
    } else if (!ir_verify(parts.g, &ve)) {
        fprintf(stderr, "%s: the decomposition does not verify: %s\n", c->what, ve.msg);
        check_failures++;
    } else {
        CHECK(type_eq(b_type(&parts.b, r), &whole.g->node[id].type));
        for (int i = 0; i < parts.g->nnode; i++)
            CHECK(!(op_info[parts.g->node[i].op].flags & OPF_COMPOSITE));
        run_both(c->what, &whole, &parts);
    }
    fx_free(&whole);
    fx_free(&parts);
}

#define F32S {DT_F32, DT_F32, DT_F32}

static void test_decompositions(void)
{
    const Attr causal = attr_bool("causal", true), none = attr_str("reduction", "none");
    const Case cases[] = {
        {"softmax", OP_SOFTMAX, 1, F32S, {"B,7"}, {{0}}, 0},
        {"softmax axis 1", OP_SOFTMAX, 1, F32S, {"2,T,4"}, {attr_int("axis", 1)}, 1},
        {"log_softmax", OP_LOG_SOFTMAX, 1, F32S, {"B,T,5"}, {{0}}, 0},
        {"log_softmax axis 0", OP_LOG_SOFTMAX, 1, F32S, {"B,3"}, {attr_int("axis", 0)}, 1},
        {"layer_norm", OP_LAYER_NORM, 1, F32S, {"B,T,8"}, {{0}}, 0},
        {"layer_norm w", OP_LAYER_NORM, 2, F32S, {"B,8", "8"}, {attr_float("eps", 1e-3)}, 1},
        {"layer_norm w b", OP_LAYER_NORM, 3, F32S, {"B,T,6", "6", "6"}, {{0}}, 0},
        {"rms_norm", OP_RMS_NORM, 1, F32S, {"B,8"}, {{0}}, 0},
        {"rms_norm w", OP_RMS_NORM, 2, F32S, {"B,T,8", "8"}, {{0}}, 0},
        {"dropout 0.3", OP_DROPOUT, 1, F32S, {"B,T,16"},
         {attr_float("p", 0.3), attr_int("seed", 5), attr_int("offset", 7)}, 3},
        {"dropout 0.1", OP_DROPOUT, 1, F32S, {"B,100"}, {attr_float("p", 0.1), attr_int("seed", 9)}, 2},
        {"dropout 0", OP_DROPOUT, 1, F32S, {"B,5"}, {attr_float("p", 0)}, 1},
        {"cross_entropy mean", OP_CROSS_ENTROPY, 2, {DT_F32, DT_I64}, {"B,6", "B"}, {{0}}, 0},
        {"cross_entropy sum", OP_CROSS_ENTROPY, 2, {DT_F32, DT_I32}, {"B,T,5", "B,T"},
         {attr_str("reduction", "sum")}, 1},
        {"cross_entropy none", OP_CROSS_ENTROPY, 2, {DT_F32, DT_I8}, {"B,T,5", "B,T"}, {none}, 1},
        {"cross_entropy one position", OP_CROSS_ENTROPY, 2, {DT_F32, DT_I64}, {"7", ""}, {{0}}, 0},
        {"attention", OP_ATTENTION, 3, F32S, {"B,4,8", "B,6,8", "B,6,5"}, {{0}}, 0},
        {"attention causal", OP_ATTENTION, 3, F32S, {"B,T,4", "B,T,4", "B,T,4"}, {causal}, 1},
        {"attention causal, fewer queries", OP_ATTENTION, 3, F32S, {"2,T,4", "2,5,4", "2,5,3"},
         {causal, attr_float("scale", 0.3)}, 2},
        {"attention batch broadcast", OP_ATTENTION, 3, F32S, {"2,1,T,4", "3,5,4", "5,2"}, {{0}}, 0},
        {"attention symbolic head", OP_ATTENTION, 3, F32S, {"3,T", "4,T", "4,2"}, {{0}}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_decomposition(&cases[i], 2, 3);
        check_decomposition(&cases[i], 3, 5);
    }
}

int main(void)
{
    test_softmax();
    test_layer_norm();
    test_norm_errors();
    test_dropout();
    test_cross_entropy();
    test_cross_entropy_errors();
    test_attention_closed_forms();
    test_attention_types();
    test_attention_errors();
    test_flops();
    test_decompositions();
    return check_status();
}
