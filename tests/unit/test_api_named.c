/* test_api_named.c — coil_run_named as an embedder sees it: inputs by name in any order, a
 * subset of outputs by name, outputs into the caller's buffers or allocated by coil; held
 * against closed forms (y = 2x + b, its row sums) and against the reference interpreter
 * (tiny.coil), with every misuse an error naming what is wrong and touching nothing. */
#include <math.h>
#include <stdlib.h>

#include "api_check.h"
#include "coil/coil.h"

static const char affine_cir[] =
    "graph @affine(%x: f32[B,3], %b: f32[3]) -> (y: f32[B,3], s: f32[B]) {\n"
    "  %two = full {value=2} : f32[]\n"
    "  %m = mul %x, %two : f32[B,3]\n"
    "  %y = add %m, %b : f32[B,3]\n"
    "  %s = sum %y {axes=[1]} : f32[B]\n"
    "  return %y, %s\n"
    "}\n";

static coil_tensor tensor_f32(int rank, const int64_t *shape, float *data)
{
    coil_tensor t = {COIL_F32, rank, {0}, data};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    return t;
}

static coil_model *load_affine(const coil_options *opt)
{
    coil_error err;
    coil_model *m = coil_load_text("affine.cir", affine_cir, sizeof affine_cir - 1, opt, &err);
    CHECK_OK(m, err);
    return m;
}

/* x[i] = i - 3 (small integers: every sum is exact in f32). */
static void fill_x(float *x, int n, float shift)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)i - 3 + shift;
}

static void check_y(const float *y, const float *x, const float *b, int rows, int line)
{
    for (int i = 0; i < rows * 3; i++)
        if (y[i] != 2 * x[i] + b[i % 3]) {
            fprintf(stderr, "%s:%d: y[%d] = %g, want %g\n", __FILE__, line, i, y[i],
                    2 * x[i] + b[i % 3]);
            failures++;
            return;
        }
}

static void check_s(const float *s, const float *x, const float *b, int rows, int line)
{
    for (int r = 0; r < rows; r++) {
        float want = 0;
        for (int j = 0; j < 3; j++)
            want += 2 * x[r * 3 + j] + b[j];
        if (s[r] != want) {
            fprintf(stderr, "%s:%d: s[%d] = %g, want %g\n", __FILE__, line, r, s[r], want);
            failures++;
        }
    }
}

/* Inputs in reverse order, both outputs: one into the caller's buffer, one allocated. */
static void test_names_and_buffers(coil_model *m)
{
    float x[12], b[3] = {1, -1, 0.5f}, y[12];
    fill_x(x, 12, 0);
    const char *in_names[] = {"b", "x"}, *out_names[] = {"s", "y"};
    coil_tensor in[2] = {tensor_f32(1, (int64_t[]){3}, b), tensor_f32(2, (int64_t[]){4, 3}, x)};
    coil_tensor out[2] = {{0}, tensor_f32(2, (int64_t[]){4, 3}, y)};
    coil_error err;
    CHECK_OK(coil_run_named(m, in_names, in, 2, out_names, out, 2, &err), err);
    CHECK(out[1].data == y); /* the caller's buffer, written in place */
    check_y(y, x, b, 4, __LINE__);
    CHECK(out[0].data && out[0].rank == 1 && out[0].shape[0] == 4 && out[0].dtype == COIL_F32);
    if (out[0].data)
        check_s(out[0].data, x, b, 4, __LINE__);
    coil_tensor_free(&out[0]);

    /* again with other values at the same sizes (coil's buffers reused), then at batch 2 */
    for (int rows = 4; rows >= 2; rows -= 2) {
        fill_x(x, 12, (float)rows);
        in[1].shape[0] = rows;
        out[1].shape[0] = rows;
        float s[4];
        out[0] = tensor_f32(1, (int64_t[]){rows}, s);
        CHECK_OK(coil_run_named(m, in_names, in, 2, out_names, out, 2, &err), err);
        check_y(y, x, b, rows, __LINE__);
        check_s(s, x, b, rows, __LINE__);
    }
}

/* One output of two, and input_names NULL: the signature's order. */
static void test_subset(coil_model *m)
{
    float x[6], b[3] = {0, 2, -4};
    fill_x(x, 6, 1);
    const char *only_s[] = {"s"};
    coil_tensor in[2] = {tensor_f32(2, (int64_t[]){2, 3}, x), tensor_f32(1, (int64_t[]){3}, b)};
    coil_tensor out = {0};
    coil_error err;
    CHECK_OK(coil_run_named(m, NULL, in, 2, only_s, &out, 1, &err), err);
    CHECK(out.rank == 1 && out.shape[0] == 2);
    if (out.data)
        check_s(out.data, x, b, 2, __LINE__);
    coil_tensor_free(&out);
    coil_tensor both[2] = {{0}, {0}}; /* output_names NULL: all, coil-allocated */
    CHECK_OK(coil_run_named(m, NULL, in, 2, NULL, both, 2, &err), err);
    if (both[0].data && both[1].data) {
        check_y(both[0].data, x, b, 2, __LINE__);
        check_s(both[1].data, x, b, 2, __LINE__);
    }
    coil_tensor_free(&both[0]);
    coil_tensor_free(&both[1]);
}

/* Every misuse fails naming it, and leaves the caller's buffer as it was. */
static void test_errors(coil_model *m)
{
    float x[12] = {0}, b[3] = {0}, y[12], sentinel = 12345;
    for (int i = 0; i < 12; i++)
        y[i] = sentinel;
    const char *xb[] = {"x", "b"}, *xx[] = {"x", "x"}, *xq[] = {"x", "q"}, *ys[] = {"y", "s"};
    const char *yy[] = {"y", "y"}, *nope[] = {"nope"};
    coil_tensor in[2] = {tensor_f32(2, (int64_t[]){4, 3}, x), tensor_f32(1, (int64_t[]){3}, b)};
    coil_tensor out[2] = {tensor_f32(2, (int64_t[]){3, 3}, y), {0}};
    coil_error err;
    CHECK(!coil_run_named(m, xb, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "output 'y'", "f32[3,3]", "f32[4,3]");
    out[0].dtype = COIL_I32, out[0].shape[0] = 4;
    CHECK(!coil_run_named(m, xb, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "output 'y'", "i32[4,3]", "f32[4,3]");
    out[0].dtype = COIL_F32;
    for (int i = 0; i < 12; i++)
        CHECK(y[i] == sentinel);
    CHECK(out[1].data == NULL);
    CHECK(!coil_run_named(m, xx, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'x' is given twice");
    CHECK(!coil_run_named(m, xq, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "no input 'q'", "its inputs: x, b");
    CHECK(!coil_run_named(m, xb, in, 1, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "takes 2 inputs (x, b), given 1");
    CHECK(!coil_run_named(m, xb, in, 2, yy, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "output 'y' is given twice");
    CHECK(!coil_run_named(m, xb, in, 2, nope, out, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "no output 'nope'", "its outputs: y, s");
    CHECK(!coil_run_named(m, xb, in, 2, ys, out, 3, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "3 outputs asked for");
    CHECK(!coil_run_named(m, xb, in, 2, NULL, out, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "without output names");
    CHECK(!coil_run_named(m, xb, NULL, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "inputs array is NULL");
    CHECK(!coil_run_named(NULL, xb, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "model is NULL");
    in[1].shape[0] = 4; /* b: f32[4] where f32[3] is declared */
    CHECK(!coil_run_named(m, xb, in, 2, ys, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'b'", "expected f32[3], got f32[4]");
    for (int i = 0; i < 12; i++)
        CHECK(y[i] == sentinel);
}

/* tiny.coil compiled, "probs" alone into a caller's buffer, against the interpreter's run
 * of the same parameters; then the interpreted model through coil_run_named itself. */
static void test_against_interpreter(void)
{
    coil_error err;
    coil_options interp = {.interpret = true};
    coil_model *c = coil_load("examples/tiny.coil", NULL, &err);
    coil_model *r = coil_load("examples/tiny.coil", &interp, &err);
    float x[5 * 16], probs[5 * 10], probs_interp[5 * 10];
    for (int i = 0; i < 5 * 16; i++)
        x[i] = (float)sin(0.3 * i);
    const char *xname[] = {"x"}, *pname[] = {"probs"};
    coil_tensor in = tensor_f32(2, (int64_t[]){5, 16}, x);
    coil_tensor pc = tensor_f32(2, (int64_t[]){5, 10}, probs);
    coil_tensor pr = tensor_f32(2, (int64_t[]){5, 10}, probs_interp);
    bool ok = c && r && coil_init_params(c, 11, NULL, 0, &err) &&
              coil_init_params(r, 11, NULL, 0, &err) &&
              coil_run_named(c, xname, &in, 1, pname, &pc, 1, &err) &&
              coil_run_named(r, xname, &in, 1, pname, &pr, 1, &err);
    CHECK_OK(ok, err);
    for (int i = 0; ok && i < 50; i++)
        CHECK(fabsf(probs[i] - probs_interp[i]) <= 1e-5f * (1 + fabsf(probs_interp[i])));
    for (int row = 0; ok && row < 5; row++) {
        double sum = 0;
        for (int j = 0; j < 10; j++)
            sum += probs[row * 10 + j];
        CHECK(fabs(sum - 1) < 1e-5);
    }
    coil_free(c);
    coil_free(r);
}

int main(void)
{
    coil_model *m = load_affine(NULL);
    if (m) {
        test_names_and_buffers(m);
        test_subset(m);
        test_errors(m);
        coil_free(m);
    }
    coil_options interp = {.interpret = true}; /* the same through the interpreter */
    if ((m = load_affine(&interp))) {
        test_names_and_buffers(m);
        test_subset(m);
        coil_free(m);
    }
    test_against_interpreter();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
