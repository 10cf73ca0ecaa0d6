/* api_example.c — coil's C API end to end, on examples/tiny.coil: load with compile
 * options, read the signature, give the parameters values, compile ahead, run by name into
 * a buffer of our own, read the profile, write a package and load it back, dump the IR,
 * and see an error. docs/API.md shows this file whole; tests/install/consumer.sh builds it
 * against an installed coil and runs it.
 *
 *     cc api_example.c $(pkg-config --cflags --libs coil) -o api_example
 *     ./api_example examples/tiny.coil tiny.pkg */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <coil/coil.h>

/* Every call reports failure through a coil_error: its kind and a located message. */
static void check(bool ok, const char *what, const coil_error *err)
{
    if (!ok) {
        fprintf(stderr, "%s failed (code %d): %s\n", what, err->code, err->message);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *model_path = argc > 1 ? argv[1] : "examples/tiny.coil";
    const char *package = argc > 2 ? argv[2] : "tiny.pkg";
    coil_error err;

    /* Load: the options are `coil run`'s flags (--threads, --mode, --dim, ...). */
    coil_dim_size batch[] = {{"B", 4}};
    coil_options opt = {.threads = 2, .mode = "default", .dims = batch, .ndims = 1,
                        .profile = true};
    coil_model *m = coil_load(model_path, &opt, &err);
    check(m != NULL, "coil_load", &err);
    for (int kind = COIL_INPUT; kind <= COIL_OUTPUT; kind++)
        for (int i = 0; i < coil_count(m, (coil_kind)kind); i++) {
            const coil_info *info = coil_info_at(m, (coil_kind)kind, i);
            printf("%s %s: %s\n", kind == COIL_INPUT ? "input" : "output", info->name, info->type);
        }

    /* Parameters from their initializers (or coil_load_weights from a .safetensors). */
    check(coil_init_params(m, 0, NULL, 0, &err), "coil_init_params", &err);
    /* Compile now and warm up at B=4 (from the options): no run below compiles. */
    check(coil_prepare(m, NULL, 0, &err), "coil_prepare", &err);

    /* Run by name: probs into our own buffer, logits allocated by coil. */
    float x[4 * 16], probs[4 * 10];
    for (int i = 0; i < 4 * 16; i++)
        x[i] = (float)sin(0.1 * i);
    const char *in_names[] = {"x"}, *out_names[] = {"probs", "logits"};
    coil_tensor in = {COIL_F32, 2, {4, 16}, x};
    coil_tensor out[2] = {{COIL_F32, 2, {4, 10}, probs}, {0}};
    for (int run = 0; run < 10; run++) {
        if (run > 0)
            coil_tensor_free(&out[1]);
        check(coil_run_named(m, in_names, &in, 1, out_names, out, 2, &err), "coil_run_named",
              &err);
    }
    double row = 0;
    for (int j = 0; j < 10; j++)
        row += probs[j];
    printf("probs[0] sums to %.4f; logits %s[%lld,%lld] allocated by coil\n", row,
           coil_dtype_name(out[1].dtype), (long long)out[1].shape[0], (long long)out[1].shape[1]);
    coil_tensor_free(&out[1]);

    /* Where the time went: each compiled step, slowest first. */
    coil_profile prof;
    check(coil_get_profile(m, &prof, &err), "coil_get_profile", &err);
    printf("profile: %lld runs, %d steps, the slowest: %s\n", (long long)prof.runs, prof.nsteps,
           prof.steps[0].name);

    /* A package, as `coil compile -o` writes it; loading it compiles nothing. */
    check(coil_save(m, package, &err), "coil_save", &err);
    coil_model *p = coil_load(package, NULL, &err);
    check(p != NULL, "coil_load (the package)", &err);
    check(coil_init_params(p, 0, NULL, 0, &err), "coil_init_params", &err);
    float again[4 * 10];
    coil_tensor out2 = {COIL_F32, 2, {4, 10}, again};
    check(coil_run_named(p, in_names, &in, 1, out_names, &out2, 1, &err), "coil_run_named",
          &err);
    printf("package %s: %s outputs\n", package,
           memcmp(probs, again, sizeof probs) == 0 ? "the same" : "DIFFERENT");

    /* The IR at a stage of the compiler (`coil dump --after=lower`). */
    char *loop = coil_dump(m, "lower", &err);
    check(loop != NULL, "coil_dump", &err);
    printf("loop IR: %.*s\n", (int)strcspn(loop, "\n"), loop);
    coil_string_free(loop);

    /* A mistake is reported, not a crash: the message names the input and both types. */
    coil_tensor wrong = {COIL_F32, 2, {4, 15}, x};
    if (!coil_run_named(m, in_names, &wrong, 1, out_names, out, 1, &err))
        printf("error %d: %s\n", err.code, err.message);

    coil_free(p);
    coil_free(m);
    return 0;
}
