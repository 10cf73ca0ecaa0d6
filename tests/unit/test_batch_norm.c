/* test_batch_norm.c — buffers and modes end to end: a small ResNet in torchvision's layout
 * and names (tests/models/train/resnet/model.coil: convolutions, batch norm, pooling, a
 * downsampling residual block), loaded from a torchvision-style state dict saved with
 * safetensors (num_batches_tracked and all) and trained by SGD through the C API, matches
 * PyTorch step for step (tests/models/train/gen_resnet.py: each loss, then every parameter
 * and running statistic the steps leave), keeps num_batches_tracked in its checkpoint as it
 * was loaded, then, loaded for inference with the trained parameters and buffers, gives
 * PyTorch's evaluation-mode logits; a model whose running statistics are not buffers, or
 * that updates one twice, is refused in training with a located message; the optimizer
 * leaves a buffer that nothing updates as it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_check.h"
#include "coil/coil.h"
#include "io/npy.h"
#include "io/safetensors.h"

#define DIR "tests/models/train/resnet/"
#define STEPS 10
#define TRACKED 12345 /* gen_resnet.py's num_batches_tracked */

static Tensor read_npy(const char *path)
{
    Tensor t = {0};
    Err e = {0};
    if (!npy_read(path, &t, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        failures++;
    }
    return t;
}

static coil_tensor as_coil(const Tensor *t)
{
    coil_tensor c = {(coil_dtype)t->dt, t->rank, {0}, t->data};
    memcpy(c.shape, t->shape, sizeof c.shape);
    return c;
}

/* The largest |got - want| / max(1, |want|) over n floats. */
static double max_rel(const float *got, const float *want, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)got[i] - want[i]) / fmax(1, fabs(want[i])));
    return worst;
}

static coil_model *load(bool training, coil_error *err)
{
    coil_options o = {.training = training};
    return coil_load(DIR "model.coil", &o, err);
}

/* Every parameter and buffer from gen_resnet.py's state dict, as torch saved it. */
static void load_fixture_params(coil_model *m)
{
    coil_error err = {0};
    CHECK_OK(coil_load_weights(m, DIR "state_dict.safetensors", &err), err);
}

static bool is_tracked(const char *name)
{
    size_t n = strlen(name), k = strlen(".num_batches_tracked");
    return n > k && strcmp(name + n - k, ".num_batches_tracked") == 0;
}

/* A num_batches_tracked after training: as the state dict had it. coil keeps it and does
 * not count steps (they matter only for momentum=None, which batch_norm does not take);
 * nn.BatchNorm2d would hold TRACKED + STEPS. */
static void check_tracked(coil_trainer *tr, coil_model *m, const char *name)
{
    coil_tensor got = {0};
    coil_error err = {0};
    CHECK_OK(coil_trainer_param(tr, coil_find(m, COIL_PARAM, name), &got, &err), err);
    CHECK(got.data && got.dtype == COIL_I64 && got.rank == 0 && *(int64_t *)got.data == TRACKED);
    coil_tensor_free(&got);
}

/* The trainer's checkpoint holds every num_batches_tracked (int64, as loaded) beside the
 * parameters and running statistics. */
static void check_checkpoint(coil_trainer *tr, coil_model *m)
{
    char dir[] = "/tmp/coil_test_batch_norm_XXXXXX", path[64];
    coil_error err = {0};
    Err e = {0};
    StFile f;
    CHECK(mkdtemp(dir) != NULL);
    CHECK_OK(coil_trainer_save(tr, dir, &err), err);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    if (!safetensors_read(path, &f, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        failures++;
        return;
    }
    int tracked = 0;
    for (int i = 0; i < coil_count(m, COIL_PARAM); i++) {
        const char *name = coil_info_at(m, COIL_PARAM, i)->name;
        const StEntry *en = safetensors_find(&f, name);
        CHECK(en != NULL);
        if (!en || !is_tracked(name))
            continue;
        Tensor t = {0};
        CHECK(safetensors_tensor(&f, en, &t, &e) && t.dt == DT_I64 && t.rank == 0 &&
              *(int64_t *)t.data == TRACKED);
        tensor_free(&t);
        tracked++;
    }
    CHECK(tracked == 6);
    safetensors_free(&f);
    unlink(path);
    snprintf(path, sizeof path, "%s/train.lock", dir);
    unlink(path);
    rmdir(dir);
}

/* The trainer's value of parameter `name` against DIR/expect.<name>.npy. */
static void check_param(coil_trainer *tr, coil_model *m, const char *name, double tol)
{
    char path[256];
    snprintf(path, sizeof path, DIR "expect.%s.npy", name);
    Tensor want = read_npy(path);
    coil_tensor got = {0};
    coil_error err = {0};
    CHECK_OK(coil_trainer_param(tr, coil_find(m, COIL_PARAM, name), &got, &err), err);
    if (got.data && want.data && tensor_numel(&want) == coil_tensor_numel(&got)) {
        double rel = max_rel(got.data, want.data, tensor_numel(&want));
        if (rel > tol)
            fprintf(stderr, "%s: relative error %.3g against PyTorch\n", name, rel);
        CHECK(rel <= tol);
    } else
        CHECK(!"the parameter's size differs from PyTorch's");
    coil_tensor_free(&got), tensor_free(&want);
}

static coil_trainer *sgd_trainer(coil_model *m)
{
    coil_train_options o = coil_train_defaults("sgd");
    o.lr = 0.05, o.momentum = 0, o.weight_decay = 0, o.clip = 0, o.loss = "cross_entropy"; /* gen_resnet.py's */
    coil_error err = {0};
    coil_trainer *tr = coil_trainer_new(m, &o, &err);
    CHECK_OK(tr != NULL, err);
    return tr;
}

/* The trained net, loaded for inference with the trainer's parameters and buffers, on
 * x.eval: PyTorch's net.eval() logits. */
static void check_eval(coil_trainer *tr)
{
    coil_error err = {0};
    coil_model *m = load(false, &err);
    CHECK_OK(m != NULL, err);
    for (int i = 0; m && i < coil_count(m, COIL_PARAM); i++) {
        coil_tensor p = {0};
        CHECK_OK(coil_trainer_param(tr, i, &p, &err) && coil_set_param(m, i, &p, &err), err);
        coil_tensor_free(&p);
    }
    Tensor x = read_npy(DIR "x.eval.npy"), want = read_npy(DIR "expect.eval.npy");
    coil_tensor in = as_coil(&x), out = {0};
    CHECK_OK(m && x.data && coil_run(m, &in, 1, &out, 1, &err), err);
    if (out.data && want.data && coil_tensor_numel(&out) == tensor_numel(&want)) {
        double rel = max_rel(out.data, want.data, tensor_numel(&want));
        if (rel > 1e-5)
            fprintf(stderr, "evaluation logits: relative error %.3g against PyTorch\n", rel);
        CHECK(rel <= 1e-5);
    } else
        CHECK(!"no evaluation logits of PyTorch's size");
    coil_tensor_free(&out), tensor_free(&x), tensor_free(&want);
    coil_free(m);
}

static void test_trains_like_pytorch(void)
{
    coil_error err = {0};
    coil_model *m = load(true, &err);
    CHECK_OK(m != NULL, err);
    if (!m)
        return;
    int mean = coil_find(m, COIL_PARAM, "layer2.0.downsample.1.running_mean");
    CHECK(mean >= 0 && coil_info_at(m, COIL_PARAM, mean)->buffer);
    CHECK(!coil_info_at(m, COIL_PARAM, coil_find(m, COIL_PARAM, "bn1.weight"))->buffer);
    load_fixture_params(m);
    coil_trainer *tr = sgd_trainer(m);
    Tensor losses = read_npy(DIR "losses.npy");
    for (int s = 0; tr && losses.data && s < STEPS; s++) {
        char xp[128], yp[128];
        snprintf(xp, sizeof xp, DIR "x.%d.npy", s), snprintf(yp, sizeof yp, DIR "y.%d.npy", s);
        Tensor x = read_npy(xp), y = read_npy(yp);
        coil_tensor in[2] = {as_coil(&x), as_coil(&y)};
        double loss = NAN, want = ((float *)losses.data)[s];
        CHECK_OK(x.data && y.data && coil_train_step(tr, in, 2, NULL, &loss, &err), err);
        if (!(fabs(loss - want) <= 1e-5 * fmax(1, fabs(want))))
            fprintf(stderr, "step %d: loss %.9g, PyTorch's %.9g\n", s, loss, want);
        CHECK(fabs(loss - want) <= 1e-5 * fmax(1, fabs(want)));
        tensor_free(&x), tensor_free(&y);
    }
    for (int i = 0; tr && i < coil_count(m, COIL_PARAM); i++) {
        const char *name = coil_info_at(m, COIL_PARAM, i)->name;
        if (is_tracked(name))
            check_tracked(tr, m, name);
        else
            check_param(tr, m, name, 1e-5);
    }
    if (tr)
        check_checkpoint(tr, m), check_eval(tr);
    tensor_free(&losses);
    coil_trainer_free(tr);
    coil_free(m);
}

/* A .coil text loaded in training mode; NULL with err set when it is refused. */
static coil_model *load_text(const char *text, bool training, coil_error *err)
{
    coil_options o = {.training = training};
    return coil_load_text("bn.coil", text, strlen(text), &o, err);
}

static void test_refused_in_training(void)
{
    static const char not_buffers[] =
        "model M(x: f32[B, 3]) -> (y: f32[B, 3]) {\n"
        "  param mean: f32[3] = zeros\n"
        "  param var: f32[3] = ones\n"
        "  return batch_norm(x, mean, var)\n"
        "}\n";
    static const char twice[] =
        "model M(x: f32[B, 3]) -> (y: f32[B, 3]) {\n"
        "  buffer mean: f32[3] = zeros\n"
        "  buffer var: f32[3] = ones\n"
        "  return batch_norm(batch_norm(x, mean, var), mean, var)\n"
        "}\n";
    coil_error err = {0};
    coil_model *m = load_text(not_buffers, false, &err); /* inference reads them only */
    CHECK_OK(m != NULL, err);
    coil_free(m);
    CHECK(load_text(not_buffers, true, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "bn.coil:4:24", "running_mean is updated, so it must be a buffer");
    CHECK(load_text(twice, true, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_SYNTAX, "bn.coil:4:10", "buffer 'mean' is updated twice");
}

/* A buffer nothing updates keeps its value through steps of every optimizer, weight decay
 * and clipping included, while the parameter beside it trains. */
static void test_untouched_buffer(void)
{
    static const char text[] =
        "graph @g(%x: f32[4,2]) -> (loss: f32[]) {\n"
        "  %w = param {name=\"w\", init=\"ones\"} : f32[2,2]\n"
        "  %s = param {name=\"s\", init=\"ones\", buffer=true} : f32[2]\n"
        "  %0 = matmul %x, %w : f32[4,2]\n"
        "  %1 = mul %0, %s : f32[4,2]\n"
        "  %2 = mean %1 : f32[]\n"
        "  return %2\n"
        "}\n";
    static const char *const optimizers[] = {"sgd", "adamw", "lion"};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    coil_tensor in = {COIL_F32, 2, {4, 2}, x};
    for (int k = 0; k < 3; k++) {
        coil_error err = {0};
        coil_model *m = coil_load_text("g.cir", text, strlen(text), NULL, &err);
        CHECK_OK(m && coil_init_params(m, 1, NULL, 0, &err), err);
        coil_train_options o = coil_train_defaults(optimizers[k]);
        o.weight_decay = 0.5, o.clip = 0.1;
        coil_trainer *tr = m ? coil_trainer_new(m, &o, &err) : NULL;
        CHECK_OK(tr != NULL, err);
        for (int s = 0; tr && s < 3; s++)
            CHECK_OK(coil_train_step(tr, &in, 1, NULL, NULL, &err), err);
        coil_tensor w = {0}, sv = {0};
        CHECK_OK(tr && coil_trainer_param(tr, 0, &w, &err) && coil_trainer_param(tr, 1, &sv, &err), err);
        for (int i = 0; sv.data && i < 4; i++)
            CHECK(((float *)sv.data)[i % 2] == 1 && ((float *)w.data)[i] != 1);
        coil_tensor_free(&w), coil_tensor_free(&sv);
        coil_trainer_free(tr);
        coil_free(m);
    }
}

int main(void)
{
    test_trains_like_pytorch();
    test_refused_in_training();
    test_untouched_buffer();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
