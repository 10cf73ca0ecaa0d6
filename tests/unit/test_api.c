/* test_api.c — the public C API as an embedder sees it, through include/coil/coil.h alone:
 * loading .cir and .coil files and text, the signature, parameters from initializers,
 * from safetensors and from memory, runs checked against closed forms, and every error
 * an embedder can provoke (with NULL arguments, bad counts and bad tensors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_check.h"
#include "coil/coil.h"

static char tmpdir[] = "/tmp/coil_test_api_XXXXXX";

static const char *tmp_path(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static bool write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(bytes, 1, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    return ok;
}

/* Load NUL-terminated text (a failure is expected: the caller checks err). */
static bool load_str(const char *name, const char *text, coil_error *err)
{
    coil_model *m = coil_load_text(name, text, strlen(text), NULL, err);
    coil_free(m);
    return m != NULL;
}

static coil_tensor tensor_f32(int rank, const int64_t *shape, float *data)
{
    coil_tensor t = {COIL_F32, rank, {0}, data};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    return t;
}

/* ---------------------------------------------------------------- basics */

static void test_basics(void)
{
    CHECK_STR(coil_version(), COIL_VERSION);
    static const char *const names[] = {"f32", "f16", "bf16", "i8", "i32", "i64", "bool"};
    static const size_t sizes[] = {4, 2, 2, 1, 4, 8, 1};
    for (int i = COIL_F32; i <= COIL_BOOL; i++) {
        CHECK_STR(coil_dtype_name((coil_dtype)i), names[i]);
        CHECK(coil_dtype_size((coil_dtype)i) == sizes[i]);
    }
    CHECK(coil_dtype_name((coil_dtype)7) == NULL && coil_dtype_size((coil_dtype)-1) == 0);
    coil_tensor t = {COIL_F32, 3, {2, 3, 4}, NULL};
    CHECK(coil_tensor_numel(&t) == 24);
    t.rank = 0;
    CHECK(coil_tensor_numel(&t) == 1);
    t.rank = 9;
    CHECK(coil_tensor_numel(&t) == -1 && coil_tensor_numel(NULL) == -1);
    t = (coil_tensor){COIL_F32, 2, {INT64_MAX, 3}, NULL};
    CHECK(coil_tensor_numel(&t) == -1);
    coil_tensor_free(NULL);
    coil_tensor_free(&t); /* data NULL: a no-op that zeroes */
    CHECK(t.rank == 0);
    coil_free(NULL);
}

/* ---------------------------------------------------------------- tiny.cir */

static void check_info(const coil_model *m, coil_kind kind, int i, const char *name,
                       const char *type, coil_dtype dt, int rank, const int64_t *shape,
                       const char *const *dims, const char *init)
{
    const coil_info *in = coil_info_at(m, kind, i);
    CHECK(in != NULL);
    if (!in)
        return;
    CHECK_STR(in->name, name);
    CHECK_STR(in->type, type);
    CHECK(in->dtype == dt && in->rank == rank);
    for (int d = 0; d < rank; d++) {
        CHECK(in->shape[d] == shape[d]);
        CHECK_STR(in->dim[d], dims[d]);
    }
    CHECK(init ? in->init && strcmp(in->init, init) == 0 : in->init == NULL);
    CHECK(coil_find(m, kind, name) == i);
}

static void test_tiny_signature(const coil_model *m)
{
    CHECK(coil_count(m, COIL_INPUT) == 2 && coil_count(m, COIL_OUTPUT) == 2);
    CHECK(coil_count(m, COIL_PARAM) == 4);
    check_info(m, COIL_INPUT, 0, "x", "f32[B,16]", COIL_F32, 2, (int64_t[]){-1, 16},
               (const char *[]){"B", "16"}, NULL);
    check_info(m, COIL_INPUT, 1, "labels", "i64[B]", COIL_I64, 1, (int64_t[]){-1},
               (const char *[]){"B"}, NULL);
    check_info(m, COIL_OUTPUT, 0, "logits", "f32[B,10]", COIL_F32, 2, (int64_t[]){-1, 10},
               (const char *[]){"B", "10"}, NULL);
    check_info(m, COIL_OUTPUT, 1, "loss", "f32[]", COIL_F32, 0, NULL, NULL, NULL);
    check_info(m, COIL_PARAM, 0, "fc1.weight", "f32[16,32]", COIL_F32, 2, (int64_t[]){16, 32},
               (const char *[]){"16", "32"}, "xavier");
    check_info(m, COIL_PARAM, 3, "fc2.bias", "f32[10]", COIL_F32, 1, (int64_t[]){10},
               (const char *[]){"10"}, "uniform(-0.1, 0.1)");
    CHECK(coil_find(m, COIL_INPUT, "nope") == -1 && coil_find(m, COIL_INPUT, NULL) == -1);
    CHECK(coil_find(m, (coil_kind)5, "x") == -1 && coil_count(m, (coil_kind)-1) == 0);
    CHECK(coil_info_at(m, COIL_PARAM, 4) == NULL && coil_info_at(m, COIL_INPUT, -1) == NULL);
    CHECK(coil_info_at(NULL, COIL_INPUT, 0) == NULL && coil_count(NULL, COIL_INPUT) == 0);
}

/* The loss is cross entropy's mean over the batch, from the logits the run returned. */
static double cross_entropy(const float *logits, const int64_t *labels, int64_t b, int c)
{
    double total = 0;
    for (int64_t i = 0; i < b; i++) {
        const float *row = logits + i * c;
        double mx = row[0], s = 0;
        for (int j = 1; j < c; j++)
            mx = fmax(mx, row[j]);
        for (int j = 0; j < c; j++)
            s += exp(row[j] - mx);
        total += mx + log(s) - row[labels[i]];
    }
    return total / (double)b;
}

/* Run tiny at batch b; returns the loss (NaN on failure), the logits in out. */
static double run_tiny(coil_model *m, int64_t b, coil_tensor out[2])
{
    float x[8 * 16];
    int64_t labels[8];
    for (int i = 0; i < b * 16; i++)
        x[i] = (float)sin(0.37 * i);
    for (int i = 0; i < b; i++)
        labels[i] = (i * 7) % 10;
    coil_tensor in[2] = {tensor_f32(2, (int64_t[]){b, 16}, x), {COIL_I64, 1, {b}, labels}};
    coil_error err;
    CHECK_OK(coil_run(m, in, 2, out, 2, &err), err);
    if (err.code)
        return NAN;
    CHECK(out[0].dtype == COIL_F32 && out[0].rank == 2);
    CHECK(out[0].shape[0] == b && out[0].shape[1] == 10);
    CHECK(out[1].dtype == COIL_F32 && out[1].rank == 0 && out[1].data);
    for (int i = 0; i < b * 10; i++)
        CHECK(isfinite(((float *)out[0].data)[i]));
    double loss = ((float *)out[1].data)[0];
    CHECK(isfinite(loss) && fabs(loss - cross_entropy(out[0].data, labels, b, 10)) < 1e-5);
    return loss;
}

static void test_tiny_cir(void)
{
    coil_error err;
    coil_model *m = coil_load("examples/tiny.cir", NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    test_tiny_signature(m);
    coil_tensor out[2];
    float x[16] = {0};
    int64_t label = 0;
    coil_tensor in[2] = {tensor_f32(2, (int64_t[]){1, 16}, x), {COIL_I64, 1, {1}, &label}};
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "parameter 'fc1.weight' has no value", "coil_init_params");
    CHECK(out[0].data == NULL && out[1].data == NULL);

    CHECK_OK(coil_init_params(m, 1, NULL, 0, &err), err);
    double loss3 = run_tiny(m, 3, out);
    coil_tensor_free(&out[0]);
    coil_tensor_free(&out[1]);
    CHECK(out[0].data == NULL && out[0].rank == 0);
    double loss5 = run_tiny(m, 5, out); /* the batch comes from the inputs */
    coil_tensor_free(&out[0]);
    coil_tensor_free(&out[1]);
    CHECK(loss3 != loss5);
    CHECK(run_tiny(m, 3, out) == loss3); /* a run is a pure function of inputs and params */
    coil_tensor_free(&out[0]);
    coil_tensor_free(&out[1]);
    CHECK_OK(coil_init_params(m, 2, NULL, 0, &err), err);
    CHECK(run_tiny(m, 3, out) != loss3);
    coil_tensor_free(&out[0]);
    coil_tensor_free(&out[1]);
    coil_free(m);
}

/* ---------------------------------------------------------------- tiny.coil */

/* coil_run compiles by default; the interpreter (coil_options.interpret) agrees with it. */
static void test_compiled_matches(const coil_tensor *in)
{
    coil_error err;
    coil_options interp = {.interpret = true}, two = {.threads = 2};
    coil_model *a = coil_load("examples/tiny.coil", &two, &err);
    coil_model *b = coil_load("examples/tiny.coil", &interp, &err);
    coil_tensor oa[2], ob[2];
    bool ok = a && b && coil_init_params(a, 7, NULL, 0, &err) &&
              coil_init_params(b, 7, NULL, 0, &err) && coil_run(a, in, 1, oa, 2, &err) &&
              coil_run(b, in, 1, ob, 2, &err);
    CHECK_OK(ok, err);
    for (int o = 0; ok && o < 2; o++) {
        const float *x = oa[o].data, *y = ob[o].data;
        for (int i = 0; i < 40; i++)
            CHECK(fabs(x[i] - y[i]) <= 1e-5 * (1 + fabs(y[i])));
        coil_tensor_free(&oa[o]);
        coil_tensor_free(&ob[o]);
    }
    coil_free(a);
    coil_free(b);
}

/* coil_options.device: "cuda" runs on a GPU where there is one and matches the CPU, and
 * sees a parameter set after the first run; without one the run says why; anything else
 * is a usage error at load. */
static void test_device(const coil_tensor *in)
{
    coil_error err;
    coil_options tpu = {.device = "tpu"}, cuda = {.device = "cuda"};
    CHECK(!coil_load("examples/tiny.coil", &tpu, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "device 'tpu'");
    coil_model *cpu = coil_load("examples/tiny.coil", NULL, &err);
    coil_model *gpu = coil_load("examples/tiny.coil", &cuda, &err);
    coil_tensor oc[2], og[2];
    bool ok = cpu && gpu && coil_init_params(cpu, 7, NULL, 0, &err) &&
              coil_init_params(gpu, 7, NULL, 0, &err) && coil_run(cpu, in, 1, oc, 2, &err);
    CHECK_OK(ok, err);
    if (ok && !coil_run(gpu, in, 1, og, 2, &err)) {
        CHECK_ERR(err, COIL_ERR_DEVICE, "cannot compile for cuda");
        printf("device cuda: %s (skipped)\n", err.message);
        for (int o = 0; o < 2; o++) /* the CPU's outputs, unused without a GPU to compare */
            coil_tensor_free(&oc[o]);
        ok = false;
    }
    for (int round = 0; ok && round < 2; round++) {
        const float *x = og[0].data, *y = oc[0].data;
        for (int i = 0; i < 40; i++)
            CHECK(fabs(x[i] - y[i]) <= 1e-4 * (1 + fabs(y[i])));
        for (int o = 0; o < 2; o++)
            coil_tensor_free(&oc[o]), coil_tensor_free(&og[o]);
        float w[10] = {0.5f, -1, 2, 0, 0, 0, 0, 0, 0, 3}; /* fc2.bias: a change the GPU must see */
        coil_tensor bias = {.dtype = COIL_F32, .rank = 1, .shape = {10}, .data = w};
        int b = coil_find(cpu, COIL_PARAM, "fc2.bias");
        ok = round == 0 && coil_set_param(cpu, b, &bias, &err) &&
             coil_set_param(gpu, b, &bias, &err) && coil_run(cpu, in, 1, oc, 2, &err) &&
             coil_run(gpu, in, 1, og, 2, &err);
        CHECK(ok || round == 1);
    }
    coil_free(cpu);
    coil_free(gpu);
}

static void test_tiny_coil(void)
{
    coil_error err;
    coil_model *m = coil_load("examples/tiny.coil", NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK(coil_count(m, COIL_INPUT) == 1 && coil_count(m, COIL_OUTPUT) == 2);
    CHECK(coil_count(m, COIL_PARAM) == 6);
    CHECK(coil_find(m, COIL_PARAM, "norm.weight") == 2 && coil_find(m, COIL_OUTPUT, "probs") == 1);
    check_info(m, COIL_PARAM, 4, "fc2.weight", "f32[10,32]", COIL_F32, 2, (int64_t[]){10, 32},
               (const char *[]){"10", "32"}, coil_info_at(m, COIL_PARAM, 4)->init);
    CHECK_OK(coil_init_params(m, 7, NULL, 0, &err), err);
    float x[4 * 16];
    for (int i = 0; i < 4 * 16; i++)
        x[i] = (float)cos(0.21 * i);
    coil_tensor in = tensor_f32(2, (int64_t[]){4, 16}, x), out[2];
    CHECK_OK(coil_run(m, &in, 1, out, 2, &err), err);
    if (err.code == COIL_OK) {
        CHECK(out[1].rank == 2 && out[1].shape[0] == 4 && out[1].shape[1] == 10);
        const float *logits = out[0].data, *probs = out[1].data;
        for (int i = 0; i < 4; i++) { /* probs = softmax(logits), row by row */
            double s = 0, sp = 0;
            for (int j = 0; j < 10; j++)
                s += exp(logits[i * 10 + j]);
            for (int j = 0; j < 10; j++) {
                CHECK(fabs(probs[i * 10 + j] - exp(logits[i * 10 + j]) / s) < 1e-6);
                sp += probs[i * 10 + j];
            }
            CHECK(fabs(sp - 1) < 1e-5);
        }
        coil_tensor_free(&out[0]);
        coil_tensor_free(&out[1]);
    }
    coil_free(m);
    test_compiled_matches(&in);
    test_device(&in);
}

static void test_overrides(void)
{
    coil_error err;
    const char *set[] = {"hidden=8", "hidden=12"}; /* the last one wins */
    coil_options opt = {.overrides = set, .noverrides = 2};
    coil_model *m = coil_load("examples/tiny.coil", &opt, &err);
    CHECK_OK(m, err);
    CHECK_STR(m ? coil_info_at(m, COIL_PARAM, 0)->type : NULL, "f32[12,16]");
    coil_free(m);
    const char *bad[] = {"hiden=8"};
    opt = (coil_options){.overrides = bad, .noverrides = 1};
    CHECK(!coil_load("examples/tiny.coil", &opt, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "hiden");
    CHECK(!coil_load("examples/tiny.cir", &opt, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "hiden=8", "IR text");
    const char *malformed[] = {"hidden"};
    opt = (coil_options){.overrides = malformed, .noverrides = 1};
    CHECK(!coil_load("examples/tiny.coil", &opt, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "'hidden'", "name=value");
    opt = (coil_options){.overrides = NULL, .noverrides = 1};
    CHECK(!coil_load("examples/tiny.coil", &opt, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "overrides is NULL");
    const char *nulls[] = {NULL};
    opt = (coil_options){.overrides = nulls, .noverrides = 1};
    CHECK(!coil_load("examples/tiny.coil", &opt, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "(null)");
}

/* Dropout draws its masks from the seed in training mode only. */
static void test_training(void)
{
    const char *set[] = {"layers=1", "hidden=8", "classes=3"};
    float x[2 * 8];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i % 5) - 2;
    coil_tensor in = tensor_f32(2, (int64_t[]){2, 8}, x);
    float got[4][6];
    for (int k = 0; k < 4; k++) {
        coil_options opt = {.overrides = set, .noverrides = 3, .training = k >= 2,
                            .seed = (uint64_t)(k % 2 + 1)};
        coil_error err;
        coil_tensor out;
        coil_model *m = coil_load("examples/mlp.coil", &opt, &err);
        CHECK_OK(m, err);
        CHECK_OK(coil_init_params(m, 3, NULL, 0, &err), err);
        CHECK_OK(coil_run(m, &in, 1, &out, 1, &err), err);
        memcpy(got[k], out.data ? out.data : (float[6]){0}, sizeof got[k]);
        coil_tensor_free(&out);
        coil_free(m);
    }
    CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0);
    CHECK(memcmp(got[2], got[3], sizeof got[0]) != 0);
    CHECK(memcmp(got[0], got[2], sizeof got[0]) != 0);
}

/* Each rng step draws its own mask, the same one compiled or interpreted and again when
 * the step comes back; nothing is recompiled between them. */
static void test_rng_step(void)
{
    static const char text[] = "graph @d(%x: f32[2,64]) -> (y: f32[2,64]) {\n"
                               "  %y = dropout %x {p=0.5, seed=3} : f32[2,64]\n"
                               "  return %y\n"
                               "}\n";
    float x[128], got[4][128];
    for (int i = 0; i < 128; i++)
        x[i] = 1;
    coil_tensor in = tensor_f32(2, (int64_t[]){2, 64}, x);
    static const uint64_t steps[4] = {0, 1, 0, 1}; /* the last interpreted */
    coil_error err;
    coil_model *m = coil_load_text("d.cir", text, sizeof text - 1, NULL, &err);
    coil_model *mi = coil_load_text("d.cir", text, sizeof text - 1,
                                    &(coil_options){.interpret = true}, &err);
    CHECK_OK(m && mi, err);
    for (int k = 0; m && mi && k < 4; k++) {
        coil_model *run = k == 3 ? mi : m;
        coil_tensor out;
        CHECK_OK(coil_set_rng_step(run, steps[k], &err), err);
        CHECK_OK(coil_run(run, &in, 1, &out, 1, &err), err);
        memcpy(got[k], out.data ? out.data : (float[128]){0}, sizeof got[k]);
        coil_tensor_free(&out);
    }
    CHECK(memcmp(got[0], got[1], sizeof got[0]) != 0);
    CHECK(memcmp(got[0], got[2], sizeof got[0]) == 0);
    CHECK(memcmp(got[1], got[3], sizeof got[0]) == 0);
    CHECK(!coil_set_rng_step(NULL, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_set_rng_step: the model is NULL");
    coil_free(m);
    coil_free(mi);
}

/* ---------------------------------------------------------------- closed forms */

static const char affine_cir[] =
    "graph @affine(%x: f32[N,3]) -> (y: f32[N,3]) {\n"
    "  %two = full {value=2} : f32[]\n"
    "  %one = full {value=1} : f32[]\n"
    "  %a = mul %x, %two : f32[N,3]\n"
    "  %y = add %a, %one : f32[N,3]\n"
    "  return %y\n"
    "}\n";

/* y = x*2 + 1 exactly, for a text that is not NUL-terminated, at batch 2 and 0. */
static void test_affine_text(void)
{
    size_t len = sizeof affine_cir - 1;
    char *text = malloc(len);
    memcpy(text, affine_cir, len);
    coil_error err;
    coil_model *m = coil_load_text("affine.cir", text, len, NULL, &err);
    free(text);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK(coil_count(m, COIL_PARAM) == 0);
    CHECK_STR(coil_info_at(m, COIL_OUTPUT, 0)->type, "f32[N,3]");
    float x[6] = {0, 1, -1.5f, 0.25f, 1e6f, -3e-3f};
    coil_tensor in = tensor_f32(2, (int64_t[]){2, 3}, x), out;
    CHECK_OK(coil_run(m, &in, 1, &out, 1, &err), err); /* no params: nothing to initialise */
    CHECK(out.rank == 2 && out.shape[0] == 2 && out.shape[1] == 3);
    for (int i = 0; out.data && i < 6; i++)
        CHECK(((float *)out.data)[i] == x[i] * 2 + 1);
    coil_tensor_free(&out);
    in = tensor_f32(2, (int64_t[]){0, 3}, NULL); /* an empty batch needs no data */
    CHECK_OK(coil_run(m, &in, 1, &out, 1, &err), err);
    CHECK(out.rank == 2 && out.shape[0] == 0 && out.shape[1] == 3);
    coil_tensor_free(&out);
    coil_free(m);
}

/* The same model in the model language, from memory. */
static void test_coil_text(void)
{
    static const char src[] = "model Affine(x: f32[B, 3]) -> (y: f32[B, 3]) {\n"
                              "  return x * 2 + 1\n"
                              "}\n";
    coil_error err;
    coil_model *m = coil_load_text("affine.coil", src, sizeof src - 1, NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK_STR(coil_info_at(m, COIL_INPUT, 0)->type, "f32[B,3]");
    CHECK_STR(coil_info_at(m, COIL_OUTPUT, 0)->name, "y");
    float x[3] = {1, -2, 0.5f};
    coil_tensor in = tensor_f32(2, (int64_t[]){1, 3}, x), out;
    CHECK_OK(coil_run(m, &in, 1, &out, 1, &err), err);
    for (int i = 0; out.data && i < 3; i++)
        CHECK(((float *)out.data)[i] == x[i] * 2 + 1);
    coil_tensor_free(&out);
    coil_free(m);
    CHECK(!load_str("bad.coil", "model M(x: f32[B]) -> f32[B] {\n  return nope(x)\n}\n", &err));
    CHECK_ERR(err, COIL_ERR_SYNTAX, "bad.coil:2:");
}

static const char scale_cir[] =
    "graph @scale(%x: f32[N,3]) -> (y: f32[N,3]) {\n"
    "  %w = param {name=\"w\", init=\"ones\"} : f32[3]\n"
    "  %b = param {name=\"b\", init=\"zeros\"} : f32[3]\n"
    "  %a = mul %x, %w : f32[N,3]\n"
    "  %y = add %a, %b : f32[N,3]\n"
    "  return %y\n"
    "}\n";

/* Run scale on x = [[1, 2, 3]] and check y against want. */
static void check_scale(coil_model *m, const float *want, int line)
{
    float x[3] = {1, 2, 3};
    coil_tensor in = tensor_f32(2, (int64_t[]){1, 3}, x), out;
    coil_error err;
    if (!coil_run(m, &in, 1, &out, 1, &err)) {
        fprintf(stderr, "%s:%d: coil_run failed: %s\n", __FILE__, line, err.message);
        failures++;
        return;
    }
    if (memcmp(out.data, want, 3 * sizeof(float)) != 0) {
        const float *y = out.data;
        fprintf(stderr, "%s:%d: y = [%g, %g, %g], want [%g, %g, %g]\n", __FILE__, line, y[0],
                y[1], y[2], want[0], want[1], want[2]);
        failures++;
    }
    coil_tensor_free(&out);
}

/* A safetensors file of w and b (f32[3] each, or w of `wlen` elements). */
static bool write_weights(const char *path, const float *w, int wlen, const float *b)
{
    char header[200];
    int n = snprintf(header, sizeof header,
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[%d,%d]}}",
                     wlen, 4 * wlen, 4 * wlen, 4 * wlen + 12);
    unsigned char bytes[512];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(bytes + 8, header, (size_t)n);
    memcpy(bytes + 8 + n, w, 4 * (size_t)wlen);
    memcpy(bytes + 8 + n + 4 * wlen, b, 12);
    return write_file(path, bytes, 8 + (size_t)n + 4 * (size_t)wlen + 12);
}

static void test_params(void)
{
    coil_error err;
    char path[256];
    coil_model *m = coil_load_text("scale.cir", scale_cir, sizeof scale_cir - 1, NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK_OK(coil_init_params(m, 0, NULL, 0, &err), err);
    check_scale(m, (float[]){1, 2, 3}, __LINE__);

    float w[3] = {2, -1, 0.5f}, b[3] = {10, 20, 30};
    coil_tensor tw = tensor_f32(1, (int64_t[]){3}, w), tb = tensor_f32(1, (int64_t[]){3}, b);
    CHECK_OK(coil_set_param(m, coil_find(m, COIL_PARAM, "w"), &tw, &err), err);
    w[0] = 99; /* the model holds a copy */
    check_scale(m, (float[]){2, -2, 1.5f}, __LINE__);
    CHECK_OK(coil_set_param(m, coil_find(m, COIL_PARAM, "b"), &tb, &err), err);
    check_scale(m, (float[]){12, 18, 31.5f}, __LINE__);

    tw = tensor_f32(1, (int64_t[]){4}, w);
    CHECK(!coil_set_param(m, 0, &tw, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "parameter 'w'", "expected f32[3], got f32[4]");
    tw = (coil_tensor){COIL_F16, 1, {3}, w};
    CHECK(!coil_set_param(m, 0, &tw, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "parameter 'w'", "got f16[3]");
    CHECK(!coil_set_param(m, 2, &tb, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "out of range");
    CHECK(!coil_set_param(m, 0, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "NULL");
    CHECK(!coil_set_param(NULL, 0, &tb, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "model is NULL");

    /* weights from a file replace them all; a bad file leaves them as they were */
    CHECK(write_weights(tmp_path("good.safetensors", path, sizeof path), (float[]){3, 4, 5}, 3,
                        (float[]){-1, -2, -3}));
    CHECK_OK(coil_load_weights(m, path, &err), err);
    check_scale(m, (float[]){2, 6, 12}, __LINE__);
    CHECK(write_weights(tmp_path("bad.safetensors", path, sizeof path), (float[]){7, 7, 7, 7}, 4,
                        (float[]){0, 0, 0}));
    CHECK(!coil_load_weights(m, path, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "bad.safetensors", "'w'");
    CHECK(!coil_load_weights(m, tmp_path("missing.safetensors", path, sizeof path), &err));
    CHECK_ERR(err, COIL_ERR_FILE, "missing.safetensors");
    check_scale(m, (float[]){2, 6, 12}, __LINE__);
    CHECK(!coil_load_weights(m, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "path is NULL");
    CHECK(!coil_load_weights(NULL, path, NULL)); /* err may be NULL */
    coil_free(m);
}

/* A parameter whose shape uses a symbol needs that symbol's size. */
static void test_symbolic_param(void)
{
    static const char text[] = "graph @s(%x: f32[B,2]) -> (y: f32[B,2]) {\n"
                               "  %p = param {name=\"p\", init=\"ones\"} : f32[B,2]\n"
                               "  %y = add %x, %p : f32[B,2]\n"
                               "  return %y\n"
                               "}\n";
    coil_error err;
    coil_model *m = coil_load_text("s.cir", text, sizeof text - 1, NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK(!coil_init_params(m, 0, NULL, 0, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "parameter 'p'", "f32[B,2]", "'B'");
    CHECK(!coil_init_params(m, 0, (coil_dim_size[]){{"T", 2}}, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "no symbolic dimension 'T'");
    CHECK(!coil_init_params(m, 0, (coil_dim_size[]){{"B", -2}}, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "negative");
    CHECK(!coil_init_params(m, 0, NULL, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "sizes is NULL");
    CHECK_OK(coil_init_params(m, 0, (coil_dim_size[]){{"B", 2}}, 1, &err), err);
    float x[4] = {1, 2, 3, 4};
    coil_tensor in = tensor_f32(2, (int64_t[]){2, 2}, x), out;
    CHECK_OK(coil_run(m, &in, 1, &out, 1, &err), err);
    for (int i = 0; out.data && i < 4; i++)
        CHECK(((float *)out.data)[i] == x[i] + 1);
    coil_tensor_free(&out);
    in.shape[0] = 1; /* the parameter was sized for B=2 */
    CHECK(!coil_run(m, &in, 1, &out, 1, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "parameter 'p'");
    coil_free(m);
}

/* ---------------------------------------------------------------- errors */

static void test_load_errors(void)
{
    coil_error err;
    CHECK(!coil_load("examples/no-such-model.cir", NULL, &err));
    CHECK_ERR(err, COIL_ERR_FILE, "examples/no-such-model.cir", "cannot open");
    CHECK(!coil_load("examples/no-such-model.coil", NULL, NULL)); /* err may be NULL */
    CHECK(!coil_load("CMakeLists.txt", NULL, &err));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "unknown model format");
    CHECK(!coil_load(NULL, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "path is NULL");
    CHECK(!load_str("broken.cir", "graph @g(%x: f32[2]) -> (y: f32[2]) {\n  return %z\n}\n", &err));
    CHECK_ERR(err, COIL_ERR_SYNTAX, "broken.cir:2:");
    CHECK(!coil_load_text("t.cir", NULL, 5, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "text is NULL");
    CHECK(!coil_load_text(NULL, NULL, 0, NULL, &err)); /* empty text: a parse error */
    CHECK_ERR(err, COIL_ERR_SYNTAX, "<text>");
    /* a type the verifier rejects: the annotation disagrees with inference */
    CHECK(!load_str("wrong.cir", "graph @g(%x: f32[2]) -> (y: f32[3]) {\n"
                                 "  %y = neg %x : f32[3]\n  return %y\n}\n", &err));
    CHECK(err.code == COIL_ERR_SYNTAX && strstr(err.message, "wrong.cir"));
}

/* Options in another header's layout: an older program's smaller struct (the fields past
 * its size read as zero whatever follows it in memory), a newer one's larger struct (its
 * extra bytes zero: accepted; one set: refused), and the train defaults written no further
 * than the caller's size. */
static void test_sized_options(void)
{
    static const char tiny[] = "graph @g(%x: f32[2]) -> (y: f32[2]) {\n  %y = neg %x : f32[2]\n"
                               "  return %y\n}\n";
    coil_error err;
    coil_profile pr;
    union { coil_options o; unsigned char b[sizeof(coil_options) + 16]; } older, newer;
    memset(older.b, 0xff, sizeof older.b); /* would set profile, and more, if read */
    memset(older.b, 0, offsetof(coil_options, profile));
    coil_model *m = coil_load_text_sized("t.cir", tiny, strlen(tiny), &older.o, &err,
                                         offsetof(coil_options, profile));
    CHECK(m && !coil_get_profile(m, &pr, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "without coil_options.profile");
    coil_free(m);
    memset(newer.b, 0, sizeof newer.b);
    newer.o.profile = true;
    m = coil_load_text_sized("t.cir", tiny, strlen(tiny), &newer.o, &err, sizeof newer.b);
    CHECK(m != NULL);
    coil_free(m);
    newer.b[sizeof(coil_options) + 5] = 1;
    CHECK(!coil_load_text_sized("t.cir", tiny, strlen(tiny), &newer.o, &err, sizeof newer.b));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_load_text", "a field from a newer header");
    CHECK(!coil_load_sized("examples/tiny.cir", &newer.o, &err, 0));
    CHECK_ERR(err, COIL_ERR_USAGE, "size 0");
    CHECK(!coil_trainer_new_sized(NULL, (const coil_train_options *)&newer.o, &err, 0));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_trainer_new", "size 0");
    union { coil_train_options o; unsigned char b[sizeof(coil_train_options)]; } small;
    memset(small.b, 0xab, sizeof small.b);
    coil_train_defaults_into("sgd", &small.o, offsetof(coil_train_options, seed));
    CHECK(small.o.lr == 3e-4 && small.o.momentum == 0.9 && small.o.accum == 1 &&
          small.b[sizeof small.b - 1] == 0xab);
    coil_train_options d = coil_train_defaults("lion"); /* the header's inline, sized */
    CHECK(d.lr == 3e-4 && d.beta2 == 0.99 && d.seed == 0);
}

static void test_run_errors(void)
{
    coil_error err;
    coil_model *m = coil_load("examples/tiny.cir", NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    CHECK_OK(coil_init_params(m, 1, NULL, 0, &err), err);
    float x[3 * 16] = {0};
    int64_t labels[4] = {0, 1, 2, 3};
    int32_t labels32[3] = {0};
    coil_tensor in[2] = {tensor_f32(2, (int64_t[]){3, 16}, x), {COIL_I64, 1, {3}, labels}};
    coil_tensor out[2] = {{COIL_F32, 1, {1}, (void *)1}, {COIL_F32, 1, {1}, (void *)1}};

    CHECK(!coil_run(m, in, 1, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "@tiny takes 2 inputs (x, labels), given 1");
    CHECK(out[0].data == NULL && out[1].data == NULL); /* zeroed on failure */
    CHECK(!coil_run(m, in, 2, out, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "has 2 outputs (logits, loss), room given for 1");
    CHECK(!coil_run(m, NULL, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "inputs array is NULL");
    CHECK(!coil_run(m, in, 2, NULL, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "outputs array is NULL");
    CHECK(!coil_run(NULL, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "model is NULL");
    CHECK(!coil_run(m, in, -1, out, 2, NULL));

    in[1] = (coil_tensor){COIL_I32, 1, {3}, labels32}; /* wrong dtype */
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'labels'", "expected i64[B], got i32[3]");
    in[1] = (coil_tensor){COIL_I64, 2, {3, 1}, labels}; /* wrong rank */
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'labels'", "got i64[3,1]");
    in[1] = (coil_tensor){COIL_I64, 1, {4}, labels}; /* B disagrees between the inputs */
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "input '");
    in[1] = (coil_tensor){COIL_I64, 1, {3}, labels};
    in[0].shape[1] = 15; /* a static dim */
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'x'", "expected f32[B,16], got f32[3,15]",
              "dimension 1 disagrees");
    in[0].shape[1] = 16;
    in[0].data = NULL;
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'x'", "data is NULL", "48 elements");
    in[0].data = x;
    in[0].dtype = (coil_dtype)42;
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'x'", "dtype 42");
    in[0].dtype = COIL_F32;
    in[0].rank = 9;
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'x'", "rank 9");
    in[0].rank = 2;
    in[0].shape[0] = -3;
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'x'", "negative");
    in[0].shape[0] = 3;
    labels[1] = 10; /* a class out of range: the interpreter's own check */
    CHECK(!coil_run(m, in, 2, out, 2, &err));
    CHECK(err.code == COIL_ERR_INPUT && err.message[0]);
    labels[1] = 1;
    CHECK_OK(coil_run(m, in, 2, out, 2, &err), err); /* and it still runs after all that */
    CHECK(err.message[0] == 0);
    coil_tensor_free(&out[0]);
    coil_tensor_free(&out[1]);
    coil_free(m);
}

/* Out of memory, for real: an outer product of 100,000 values (a 40 GB output) in a
 * child whose address space is limited to 1 GiB. Exit status 0: COIL_ERR_MEMORY, named. */
static int run_out_of_memory(void)
{
    struct rlimit lim = {1u << 30, 1u << 30};
    static float x[100000];
    int64_t n = 100000;
    coil_error err;
    const char *ir = "graph @big(%x: f32[B]) -> (y: f32[B,B]) {\n"
                     "  %a = reshape %x : f32[B,1]\n  %b = reshape %x : f32[1,B]\n"
                     "  %y = mul %a, %b : f32[B,B]\n  return %y\n}\n";
    coil_model *m = setrlimit(RLIMIT_AS, &lim) == 0
                        ? coil_load_text("big.cir", ir, strlen(ir), NULL, &err)
                        : NULL;
    coil_tensor in = tensor_f32(1, &n, x), out = {0};
    bool ran = m && coil_run(m, &in, 1, &out, 1, &err);
    coil_free(m);
    if (!m || ran || err.code != COIL_ERR_MEMORY || !strstr(err.message, "out of memory")) {
        fprintf(stderr, "out of memory: got code %d: %s\n", err.code, err.message);
        return 1;
    }
    return 0;
}

/* Each remaining error code from a real case. (COIL_ERR_IO: test_api_compile's coil_save
 * into a path a file is in the way of; COIL_ERR_INTERNAL is a bug, reached by no input on
 * purpose.) */
static void test_error_kinds(void)
{
#ifdef __SANITIZE_ADDRESS__
    printf("out of memory: skipped under ASan (its shadow memory needs the address space)\n");
#else
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_out_of_memory());
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_basics();
    test_tiny_cir();
    test_tiny_coil();
    test_overrides();
    test_training();
    test_rng_step();
    test_affine_text();
    test_coil_text();
    test_params();
    test_symbolic_param();
    test_load_errors();
    test_sized_options();
    test_run_errors();
    test_error_kinds();
    char path[256];
    unlink(tmp_path("good.safetensors", path, sizeof path));
    unlink(tmp_path("bad.safetensors", path, sizeof path));
    rmdir(tmpdir);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
