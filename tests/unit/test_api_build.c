/* test_api_build.c — the C API's builder as an embedder uses it, through include/coil/coil.h
 * alone: an MLP built op by op runs like the same model loaded from IR text (the same bits)
 * and like its closed form; attributes, declared types and reuse of a builder; and every
 * error a call can make, each leaving the builder usable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coil/coil.h"

static int failures;

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* A call that succeeded, with err clear. */
#define CHECK_OK(ok, err)                                                                \
    do {                                                                                 \
        if (!(ok) || (err).code != COIL_OK) {                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #ok,           \
                    (err).message);                                                      \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* A failed call: its code, and a message holding each of the fragments. */
#define CHECK_ERR(err, want_code, ...)                                                   \
    do {                                                                                 \
        const char *frags_[] = {__VA_ARGS__};                                            \
        if ((err).code != (want_code)) {                                                 \
            fprintf(stderr, "%s:%d: error code %d, want %d (%s)\n", __FILE__, __LINE__,  \
                    (err).code, want_code, (err).message);                               \
            failures++;                                                                  \
        }                                                                                \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                 \
            if (!strstr((err).message, frags_[k_])) {                                    \
                fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,  \
                        (err).message, frags_[k_]);                                      \
                failures++;                                                              \
            }                                                                            \
    } while (0)

#define B 5
#define IN 4
#define HID 8
#define OUT 3

/* The MLP in IR text: the oracle the builder's graph is held against. */
static const char mlp_text[] =
    "graph @mlp(%x: f32[B,4]) -> (logits: f32[B,3], probs: f32[B,3]) {\n"
    "  %w1 = param {name=\"fc1.weight\", init=\"xavier\"} : f32[4,8]\n"
    "  %b1 = param {name=\"fc1.bias\", init=\"normal(0.5)\"} : f32[8]\n"
    "  %w2 = param {name=\"fc2.weight\", init=\"xavier\"} : f32[8,8]\n"
    "  %b2 = param {name=\"fc2.bias\", init=\"normal(0.5)\"} : f32[8]\n"
    "  %w3 = param {name=\"fc3.weight\", init=\"xavier\"} : f32[8,3]\n"
    "  %b3 = param {name=\"fc3.bias\", init=\"zeros\"} : f32[3]\n"
    "  %0 = matmul %x, %w1 : f32[B,8]\n"
    "  %1 = add %0, %b1 : f32[B,8]\n"
    "  %2 = relu %1 : f32[B,8]\n"
    "  %3 = matmul %2, %w2 : f32[B,8]\n"
    "  %4 = add %3, %b2 : f32[B,8]\n"
    "  %5 = gelu %4 : f32[B,8]\n"
    "  %6 = matmul %5, %w3 : f32[B,3]\n"
    "  %7 = add %6, %b3 : f32[B,3]\n"
    "  %8 = softmax %7 {axis=-1} : f32[B,3]\n"
    "  return %7, %8\n"
    "}\n";

/* One linear layer, as a program building its graph would write it. */
static int linear(coil_builder *b, int x, const char *name, int in, int out, const char *bias_init,
                  coil_error *err)
{
    char w_name[64], b_name[64], w_type[32], b_type[32];
    snprintf(w_name, sizeof w_name, "%s.weight", name);
    snprintf(b_name, sizeof b_name, "%s.bias", name);
    snprintf(w_type, sizeof w_type, "f32[%d,%d]", in, out);
    snprintf(b_type, sizeof b_type, "f32[%d]", out);
    int w = coil_param(b, w_name, w_type, "xavier", err);
    int bias = coil_param(b, b_name, b_type, bias_init, err);
    int args[2] = {x, w};
    int y = coil_op(b, "matmul", args, 2, NULL, NULL, err);
    args[0] = y, args[1] = bias;
    return coil_op(b, "add", args, 2, NULL, NULL, err);
}

/* The MLP op by op; the params declared in the text's order (they are its signature). */
static coil_model *build_mlp(coil_error *err)
{
    coil_builder *b = coil_builder_new("mlp", err);
    int x = coil_input(b, "x", "f32[B,4]", err);
    int h = linear(b, x, "fc1", IN, HID, "normal(0.5)", err);
    h = coil_op(b, "relu", &h, 1, NULL, NULL, err);
    h = linear(b, h, "fc2", HID, HID, "normal(0.5)", err);
    h = coil_op(b, "gelu", &h, 1, NULL, NULL, err);
    int logits = linear(b, h, "fc3", HID, OUT, "zeros", err);
    int probs = coil_op(b, "softmax", &logits, 1, "axis=-1", "f32[B,3]", err);
    coil_output(b, "logits", logits, err);
    coil_output(b, "probs", probs, err);
    coil_model *m = coil_build(b, NULL, err);
    coil_builder_free(b);
    return m;
}

static coil_tensor f32_tensor(int rank, const int64_t *shape, float *data)
{
    coil_tensor t = {COIL_F32, rank, {0}, data};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    return t;
}

static void input_x(float *x)
{
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)sin(0.7 * i + 0.3) * 1.5f;
}

static bool run2(coil_model *m, const float *x, coil_tensor *out, coil_error *err)
{
    coil_tensor in = f32_tensor(2, (int64_t[]){B, IN}, (float *)x);
    return coil_run(m, &in, 1, out, 2, err);
}

/* Both models' signatures, parameters from the same seed, and outputs bit for bit. */
static void test_built_equals_text(void)
{
    coil_error err;
    coil_model *built = build_mlp(&err);
    CHECK_OK(built != NULL, err);
    coil_model *text = coil_load_text("mlp.cir", mlp_text, strlen(mlp_text), NULL, &err);
    CHECK_OK(text != NULL, err);
    if (!built || !text)
        goto done;
    for (int kind = COIL_INPUT; kind <= COIL_PARAM; kind++) {
        CHECK(coil_count(built, kind) == coil_count(text, kind));
        for (int i = 0; i < coil_count(text, kind); i++) {
            const coil_info *a = coil_info_at(built, kind, i), *b = coil_info_at(text, kind, i);
            CHECK(strcmp(a->name, b->name) == 0 && strcmp(a->type, b->type) == 0);
            CHECK((!a->init && !b->init) || (a->init && b->init && !strcmp(a->init, b->init)));
        }
    }
    CHECK(strcmp(coil_info_at(built, COIL_INPUT, 0)->dim[0], "B") == 0);
    CHECK_OK(coil_init_params(built, 7, NULL, 0, &err), err);
    CHECK_OK(coil_init_params(text, 7, NULL, 0, &err), err);
    float x[B * IN];
    input_x(x);
    coil_tensor a[2] = {0}, b[2] = {0};
    CHECK_OK(run2(built, x, a, &err), err);
    CHECK_OK(run2(text, x, b, &err), err);
    for (int o = 0; o < 2 && a[o].data && b[o].data; o++) {
        CHECK(a[o].rank == 2 && a[o].shape[0] == B && a[o].shape[1] == OUT);
        CHECK(memcmp(a[o].data, b[o].data, sizeof(float) * B * OUT) == 0);
    }
    for (int o = 0; o < 2; o++)
        coil_tensor_free(&a[o]), coil_tensor_free(&b[o]);
done:
    coil_free(built);
    coil_free(text);
}

/* ---------------------------------------------------------------- the closed form */

static double gelu(double v) { return 0.5 * v * (1 + erf(v / sqrt(2))); }

/* y[n, out] = x[n, in] w[in, out] + b[out], then act (NULL: none). */
static void layer(const double *x, const float *w, const float *bias, int n, int in, int out,
                  double (*act)(double), double *y)
{
    for (int r = 0; r < n; r++)
        for (int c = 0; c < out; c++) {
            double s = bias[c];
            for (int k = 0; k < in; k++)
                s += x[r * in + k] * w[k * out + c];
            y[r * out + c] = act ? act(s) : s;
        }
}

static double relu(double v) { return v > 0 ? v : 0; }

/* Parameters of known values through coil_set_param; the outputs against the MLP computed
 * here in f64 (the softmax rows also sum to 1). */
static void test_closed_form(void)
{
    coil_error err;
    coil_model *m = build_mlp(&err);
    CHECK_OK(m != NULL, err);
    if (!m)
        return;
    static const struct {
        const char *name;
        int rows, cols;
    } shapes[] = {{"fc1.weight", IN, HID}, {"fc1.bias", 1, HID}, {"fc2.weight", HID, HID},
                  {"fc2.bias", 1, HID},    {"fc3.weight", HID, OUT}, {"fc3.bias", 1, OUT}};
    float p[6][HID * HID];
    for (int i = 0; i < 6; i++) {
        int n = shapes[i].rows * shapes[i].cols, idx = coil_find(m, COIL_PARAM, shapes[i].name);
        for (int k = 0; k < n; k++)
            p[i][k] = (float)(0.6 * cos(1.3 * k + i));
        coil_tensor t = shapes[i].rows == 1
                            ? f32_tensor(1, (int64_t[]){shapes[i].cols}, p[i])
                            : f32_tensor(2, (int64_t[]){shapes[i].rows, shapes[i].cols}, p[i]);
        CHECK(idx >= 0);
        CHECK_OK(coil_set_param(m, idx, &t, &err), err);
    }
    float x[B * IN];
    double xd[B * IN], h1[B * HID], h2[B * HID], logits[B * OUT];
    input_x(x);
    for (int i = 0; i < B * IN; i++)
        xd[i] = x[i];
    layer(xd, p[0], p[1], B, IN, HID, relu, h1);
    layer(h1, p[2], p[3], B, HID, HID, gelu, h2);
    layer(h2, p[4], p[5], B, HID, OUT, NULL, logits);
    coil_tensor out[2] = {0};
    CHECK_OK(run2(m, x, out, &err), err);
    const float *got = out[0].data, *probs = out[1].data;
    for (int r = 0; got && probs && r < B; r++) {
        double big = -INFINITY, sum = 0, psum = 0;
        for (int c = 0; c < OUT; c++)
            big = fmax(big, logits[r * OUT + c]);
        for (int c = 0; c < OUT; c++)
            sum += exp(logits[r * OUT + c] - big);
        for (int c = 0; c < OUT; c++) {
            double want = exp(logits[r * OUT + c] - big) / sum;
            CHECK(fabs(got[r * OUT + c] - logits[r * OUT + c]) <= 1e-5 * fmax(1, fabs(logits[r * OUT + c])));
            CHECK(fabs(probs[r * OUT + c] - want) <= 1e-6);
            psum += probs[r * OUT + c];
        }
        CHECK(fabs(psum - 1) <= 1e-6);
    }
    coil_tensor_free(&out[0]), coil_tensor_free(&out[1]);
    coil_free(m);
}

/* ---------------------------------------------------------------- attributes and types */

static bool run1(coil_model *m, const float *x, int64_t rows, int64_t cols, coil_tensor *out,
                 coil_error *err)
{
    coil_tensor in = f32_tensor(2, (int64_t[]){rows, cols}, (float *)x);
    return coil_run(m, &in, 1, out, 1, err);
}

/* Reductions with attributes (with and without braces), declared types (reshape, full,
 * cast), a transpose's list; against sums worked out here. One builder, built twice. */
static void test_attributes_and_types(void)
{
    coil_error err;
    coil_builder *b = coil_builder_new(NULL, &err);
    int x = coil_input(b, "x", "f32[2,3]", &err);
    int s = coil_op(b, "sum", &x, 1, "axes=[1], keepdim=true", "f32[2,1]", &err);
    CHECK_OK(s >= 0, err);
    int two = coil_op(b, "full", NULL, 0, "{value=2}", "f32[]", &err);
    int args[2] = {s, two};
    int scaled = coil_op(b, "mul", args, 2, NULL, NULL, &err);
    int flat = coil_op(b, "reshape", &scaled, 1, NULL, "f32[2]", &err);
    CHECK_OK(flat >= 0, err);
    CHECK_OK(coil_output(b, "twice_row_sums", flat, &err), err);
    coil_model *first = coil_build(b, NULL, &err);
    CHECK_OK(first != NULL, err);
    /* more after building: the first model keeps its one output */
    int t = coil_op(b, "transpose", &x, 1, "perm=[1, 0]", NULL, &err);
    int m = coil_op(b, "max", &t, 1, "axes=[1]", NULL, &err);
    int i = coil_op(b, "cast", &m, 1, NULL, "i32[3]", &err);
    CHECK_OK(i >= 0, err);
    CHECK_OK(coil_output(b, NULL, i, &err), err); /* named out1 */
    coil_model *second = coil_build(b, NULL, &err);
    CHECK_OK(second != NULL, err);
    coil_builder_free(b);
    CHECK(coil_count(first, COIL_OUTPUT) == 1 && coil_count(second, COIL_OUTPUT) == 2);
    CHECK(coil_find(second, COIL_OUTPUT, "out1") == 1);
    float xv[6] = {1, 2, 3.5f, -4, 5, 6.25f};
    coil_tensor out[2] = {0};
    CHECK_OK(run1(first, xv, 2, 3, out, &err), err);
    const float *o = out[0].data;
    CHECK(o && out[0].rank == 1 && o[0] == 13.0f && o[1] == 14.5f);
    coil_tensor_free(&out[0]);
    coil_tensor in = f32_tensor(2, (int64_t[]){2, 3}, xv);
    CHECK_OK(coil_run(second, &in, 1, out, 2, &err), err);
    const int32_t *cols = out[1].data;
    CHECK(out[1].dtype == COIL_I32 && cols && cols[0] == 1 && cols[1] == 5 && cols[2] == 6);
    coil_tensor_free(&out[0]), coil_tensor_free(&out[1]);
    coil_free(first);
    coil_free(second);
}

/* ---------------------------------------------------------------- errors */

/* Every call's error, each naming the op and what is wrong; after each the builder goes
 * on as if the call had not been made, and builds a model that runs. */
static void test_errors(void)
{
    coil_error err;
    coil_builder *b = coil_builder_new("errs", &err);
    int x = coil_input(b, "x", "f32[B,4]", &err);
    int w = coil_param(b, "w", "f32[4,3]", "xavier", &err);
    CHECK(x == 0 && w == 1);
    int next = 2; /* the handle the next successful op gets */

    CHECK(coil_op(b, "matmull", (int[]){x, w}, 2, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_op %2", "unknown op 'matmull'; did you mean 'matmul'?");
    CHECK(coil_op(b, "frobnicate", &x, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "unknown op 'frobnicate'");
    CHECK(coil_op(b, NULL, &x, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "the op's name is NULL");
    CHECK(coil_op(b, "input", NULL, 0, "name=\"y\"", "f32[2]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "inputs are made with coil_input");
    CHECK(coil_op(b, "param", NULL, 0, "name=\"v\"", "f32[2]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "params are made with coil_param");

    CHECK(coil_op(b, "matmul", &x, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "%2 = matmul", "takes 2 operands, given 1");
    CHECK(coil_op(b, "add", NULL, 2, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "args is NULL");
    CHECK(coil_op(b, "concat", (int[]){x}, -1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "-1 operands");
    CHECK(coil_op(b, "relu", (int[]){99}, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "operand 0 is 99, not a value of this builder (0 to 1)");

    /* a type error lists the operands with their types */
    CHECK(coil_op(b, "matmul", (int[]){w, w}, 2, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SHAPE, "coil_op %2 = matmul(%1: f32[4,3], %1: f32[4,3]): matmul");
    CHECK(coil_op(b, "relu", &x, 1, NULL, "f32[B,5]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_SHAPE, "the type given, f32[B,5], is not the inferred f32[B,4]");
    CHECK(coil_op(b, "reshape", &x, 1, NULL, "f32[7]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_SHAPE, "%2 = reshape(%0: f32[B,4])");

    /* attributes and types as text */
    CHECK(coil_op(b, "sum", &x, 1, "axs=[1]", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "attributes \"axs=[1]\"", "did you mean 'axes'?");
    CHECK(coil_op(b, "sum", &x, 1, "axes=1", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "attribute 'axes' takes a list of integers");
    CHECK(coil_op(b, "sum", &x, 1, "axes=[1] keepdim=true", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "expected ',' or the end after an attribute");
    CHECK(coil_op(b, "sum", &x, 1, "axes=[1], axes=[0]", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "duplicate attribute 'axes'");
    CHECK(coil_op(b, "sum", &x, 1, "{axes=[1]", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "attributes \"{axes=[1]\"");
    CHECK(coil_op(b, "relu", &x, 1, "alpha=1", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "relu has no attributes");
    CHECK(coil_op(b, "transpose", &x, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "transpose needs attribute 'perm'");
    CHECK(coil_op(b, "reshape", &x, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "%2 = reshape(%0: f32[B,4])", "result type is declared");
    CHECK(coil_op(b, "full", NULL, 0, "value=1", "f33[2]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "type \"f33[2]\"", "unknown dtype 'f33'");

    /* inputs, parameters, outputs */
    CHECK(coil_input(b, "x", "f32[4]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_input 'x': %0 is already the input of that name");
    CHECK(coil_input(b, "y", "f32[B,", &err) == -1);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "coil_input 'y': type \"f32[B,\"");
    CHECK(coil_input(b, "y", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "the type is NULL");
    CHECK(coil_input(b, "", "f32[2]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_input: the name is empty");
    CHECK(coil_param(b, "w", "f32[4,3]", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "%1 is already the param of that name");
    CHECK(coil_param(b, "v", "f32[4,3]", "xavir", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_param 'v' (f32[4,3]): bad initializer \"xavir\"",
              "unknown initializer");
    CHECK(coil_param(b, "s", "f32[]", "kaiming", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "kaiming needs a parameter of rank >= 1");
    CHECK(!coil_output(b, "y", 42, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_output: value of output 0 is 42");

    /* a failed call's -1 carries the first failure along */
    CHECK(!coil_output(b, "y", -1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "is -1, the result of a failed call",
              "the first failure: coil_op %2: unknown op 'matmull'");
    CHECK(coil_build(b, NULL, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "graph @errs has no outputs");

    /* the builder goes on: nothing the failures tried was added */
    int y = coil_op(b, "matmul", (int[]){x, w}, 2, NULL, "f32[B,3]", &err);
    CHECK_OK(y == next, err);
    CHECK_OK(coil_output(b, "y", y, &err), err);
    CHECK(!coil_output(b, "y", x, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "output 0 is already named 'y'");
    CHECK(coil_build(b, &(coil_options){.overrides = (const char *[]){"a=1"}, .noverrides = 1},
                     &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "config overrides", "a built graph has no config");
    CHECK(coil_build(b, &(coil_options){.device = "tpu"}, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "device 'tpu'");
    coil_model *m = coil_build(b, &(coil_options){.interpret = true}, &err);
    CHECK_OK(m != NULL, err);
    CHECK(coil_count(m, COIL_INPUT) == 1 && coil_count(m, COIL_PARAM) == 1 &&
          coil_count(m, COIL_OUTPUT) == 1);
    float wv[12], xv[8];
    for (int i = 0; i < 12; i++)
        wv[i] = (float)(i % 5) - 2;
    for (int i = 0; i < 8; i++)
        xv[i] = (float)i;
    coil_tensor wt = f32_tensor(2, (int64_t[]){4, 3}, wv), out = {0};
    CHECK_OK(coil_set_param(m, 0, &wt, &err), err);
    CHECK_OK(run1(m, xv, 2, 4, &out, &err), err);
    const float *o = out.data;
    for (int r = 0; o && r < 2; r++)
        for (int c = 0; c < 3; c++) {
            float want = 0;
            for (int k = 0; k < 4; k++)
                want += xv[r * 4 + k] * wv[k * 3 + c];
            CHECK(o[r * 3 + c] == want);
        }
    coil_tensor_free(&out);
    coil_free(m);
    coil_builder_free(b);
}

/* NULL builders and other bad arguments: errors, never a crash. */
static void test_null_arguments(void)
{
    coil_error err;
    CHECK(coil_input(NULL, "x", "f32[2]", &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_input: the builder is NULL");
    CHECK(coil_param(NULL, "w", "f32[2]", NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_param: the builder is NULL");
    CHECK(coil_op(NULL, "relu", (int[]){0}, 1, NULL, NULL, &err) == -1);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_op: the builder is NULL");
    CHECK(!coil_output(NULL, "y", 0, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_output: the builder is NULL");
    CHECK(coil_build(NULL, NULL, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_build: the builder is NULL");
    coil_builder_free(NULL);
    coil_builder *b = coil_builder_new("n", NULL); /* err may be NULL throughout */
    CHECK(coil_input(b, NULL, "f32[2]", NULL) == -1);
    CHECK(coil_input(b, "x", "f32[2]", NULL) == 0);
    CHECK(coil_op(b, "neg", (int[]){0}, 1, NULL, NULL, NULL) == 1);
    CHECK(coil_output(b, NULL, 1, &err) && err.code == COIL_OK && err.message[0] == 0);
    coil_model *m = coil_build(b, NULL, NULL);
    CHECK(m && coil_find(m, COIL_OUTPUT, "out0") == 0);
    coil_free(m);
    coil_builder_free(b);
}

int main(void)
{
    test_built_equals_text();
    test_closed_form();
    test_attributes_and_types();
    test_errors();
    test_null_arguments();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
