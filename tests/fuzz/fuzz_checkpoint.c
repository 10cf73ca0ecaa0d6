/* fuzz_checkpoint.c — libFuzzer harness for resuming training from a checkpoint
 * (train/train_loop.c, `coil train --save DIR --resume`): the input is DIR/checkpoint.
 * safetensors, whose metadata (step, data position, seed, optimizer, loss scale, digest)
 * and tensors (parameters, optimizer state) the resume reads; a small model is trained from
 * it on a dataset of .npy arrays for at most STEPS steps, once as --resume and once as
 * --resume-anyway (which takes a file without a digest, so the fuzzer gets past the
 * digest to the tensors). It resumes or is refused with a message, never crashes, and a
 * resumed run takes no more steps than asked. The reader (open_checkpoint, load_checkpoint)
 * is static, so the harness goes through train_run: a checkpoint that passes the metadata
 * checks also compiles the joint graph (through the loop evaluator, no LLVM). The seeds are
 * checkpoints train_run writes at start-up, sealed and not, so they have the current format. */
#include <stdint.h>

#include "io/npy.h"
#include "io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_files.h"
#include "train/train.h"

#define STEPS 2

static const char model_text[] =
    "graph @ck(%x: f32[B,4], %y: f32[B,3]) -> (loss: f32[]) {\n"
    "  %w = param {name=\"w\", init=\"normal(0.02)\"} : f32[4,3]\n"
    "  %b = param {name=\"b\", init=\"zeros\"} : f32[3]\n"
    "  %h = matmul %x, %w : f32[B,3]\n"
    "  %o = add %h, %b : f32[B,3]\n"
    "  %d = sub %o, %y : f32[B,3]\n"
    "  %s = mul %d, %d : f32[B,3]\n"
    "  %loss = mean %s {axes=[0, 1]} : f32[]\n"
    "  return %loss\n"
    "}\n";

static Graph *model;
static TrainOptions base;
static char dir[512], checkpoint[640], x_path[640], y_path[640];
static const SymSize sizes[] = {{"B", 2}};
static const char *names[] = {"x", "y"};
static const char *arrays[2] = {x_path, y_path};

static void write_array(const char *path, int64_t rows, int64_t cols)
{
    Tensor t;
    Err e = {0};
    if (!tensor_alloc(&t, DT_F32, 2, (int64_t[]){rows, cols}, &e))
        abort();
    for (int64_t i = 0; i < rows * cols; i++)
        ((float *)t.data)[i] = (float)((i * 37 % 11) - 5) * 0.25f;
    if (!npy_write(path, &t, &e)) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", e.msg);
        abort();
    }
    tensor_free(&t);
}

/* The seed checkpoint again without its digest (what --resume-anyway takes), as a seed. */
static void write_unsealed(void)
{
    StFile f;
    Err e = {0};
    const char *copy = fuzz_path("unsealed.safetensors");
    if (!safetensors_read(checkpoint, &f, &e))
        abort();
    const char *names[16], *keys[16], *values[16];
    Tensor t[16] = {{0}};
    int n = 0, m = 0;
    for (int i = 0; i < f.nentry && n < 16; i++, n++)
        if (names[n] = f.entry[i].name, !safetensors_tensor(&f, &f.entry[i], &t[n], &e))
            abort();
    for (int i = 0; i < f.nmeta && m < 16; i++)
        if (strcmp(f.meta_key[i], SAFETENSORS_DIGEST_KEY) != 0)
            keys[m] = f.meta_key[i], values[m++] = f.meta_value[i];
    if (!safetensors_write(copy, names, t, n, keys, values, m, &e))
        abort();
    for (int i = 0; i < n; i++)
        tensor_free(&t[i]);
    safetensors_free(&f);
    size_t size;
    uint8_t *bytes = fuzz_read(copy, &size);
    if (!bytes)
        abort();
    fuzz_seed("unsealed.safetensors", NULL, 0, bytes, size);
    free(bytes);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    Err e = {0};
    snprintf(dir, sizeof dir, "%s", fuzz_path("run"));
    snprintf(checkpoint, sizeof checkpoint, "%s/checkpoint.safetensors", dir);
    snprintf(x_path, sizeof x_path, "%s", fuzz_path("x.npy"));
    snprintf(y_path, sizeof y_path, "%s", fuzz_path("y.npy"));
    write_array(x_path, 8, 4);
    write_array(y_path, 8, 3);
    model = ir_parse(model_text, strlen(model_text), "ck.cir", &e);
    FILE *out = fopen("/dev/null", "w");
    if (!model || !out) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", e.msg);
        abort();
    }
    base = (TrainOptions){
        .steps = STEPS, .accum = 1, .sizes = sizes, .nsizes = 1, .array_names = names,
        .array_files = arrays, .narray = 2, .seed = 1,
        .opt = {.kind = OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.01,
                .threads = 1},
        .lr = {.lr = 1e-3}, .log_every = 1, .save = dir, .peak_gflops = 1,
        .compile = {.threads = 1, .no_llvm = true}, .out = out};
    TrainResult res;
    if (!train_run(model, &base, &res, &e)) { /* the seed: a checkpoint after STEPS steps */
        fprintf(stderr, "fuzz_checkpoint: cannot train the model: %s\n", e.msg);
        abort();
    }
    size_t n;
    uint8_t *seed = fuzz_read(checkpoint, &n);
    if (!seed)
        abort();
    fuzz_seed("checkpoint.safetensors", NULL, 0, seed, n);
    free(seed);
    write_unsealed();
    return 0;
}

/* One resume from the input; anyway: as --resume-anyway. */
static void resume(const uint8_t *data, size_t size, bool anyway)
{
    fuzz_write(checkpoint, data, size); /* again: a run rewrites it when it ends */
    TrainOptions o = base;
    o.resume = true;
    o.resume_anyway = anyway;
    TrainResult res;
    Err e = {0};
    if (!train_run(model, &o, &res, &e)) {
        if (e.msg[0] == 0)
            fuzz_bug("train_run --resume failed without a message", NULL);
        return;
    }
    if (res.steps > STEPS) {
        char what[128];
        snprintf(what, sizeof what, "resumed, it ran %lld steps of %d", (long long)res.steps,
                 STEPS);
        fuzz_bug("a checkpoint's step makes a resumed run take more steps than asked", what);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resume(data, size, false);
    resume(data, size, true);
    return 0;
}
