/* test_api_compile.c — the API at parity with `coil compile` and `coil run`: compile options
 * (mode, cache, dims), coil_prepare (the first run then compiles nothing), coil_save (a
 * package coil_load and `coil run` load, with the source's outputs), coil_dump (the same
 * text as `coil dump --after`), the profile (`coil bench --profile`'s steps). Held against
 * the source model's outputs, the interpreter, closed forms and the command line itself. */
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_check.h"
#include "coil/coil.h"

static char tmpdir[] = "/tmp/coil_test_api_compile_XXXXXX";
static char coil_bin[4096]; /* the `coil` built beside this test, or "" */

static const char *tmp_path(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A command's whole stdout (malloc'd), or NULL when it fails. */
static char *command_output(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    size_t n = 0, cap = 1 << 16;
    char *out = p ? malloc(cap) : NULL;
    while (out && !feof(p)) {
        if (n + 4096 > cap && !(out = realloc(out, cap *= 2)))
            break;
        n += fread(out + n, 1, cap - n - 1, p);
    }
    int status = p ? pclose(p) : -1;
    if (out)
        out[n] = 0;
    if (status != 0) {
        fprintf(stderr, "%s: exit status %d\n", cmd, status);
        free(out);
        return NULL;
    }
    return out;
}

static coil_tensor tensor_f32(int rank, const int64_t *shape, float *data)
{
    coil_tensor t = {COIL_F32, rank, {0}, data};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
    return t;
}

/* tiny.coil's x at batch b: a fixed pattern. */
static coil_tensor tiny_input(float *x, int64_t b)
{
    for (int i = 0; i < b * 16; i++)
        x[i] = (float)cos(0.17 * i);
    return tensor_f32(2, (int64_t[]){b, 16}, x);
}

/* Both outputs of tiny.coil at batch 4 into logits[40], probs[40]. */
static bool run_tiny(coil_model *m, float *logits, float *probs)
{
    float x[4 * 16];
    coil_tensor in = tiny_input(x, 4);
    coil_tensor out[2] = {tensor_f32(2, (int64_t[]){4, 10}, logits),
                          tensor_f32(2, (int64_t[]){4, 10}, probs)};
    coil_error err;
    bool ok = coil_run_named(m, NULL, &in, 1, NULL, out, 2, &err);
    CHECK_OK(ok, err);
    return ok;
}

static coil_model *load_tiny(const coil_options *opt, uint64_t seed)
{
    coil_error err;
    coil_model *m = coil_load("examples/tiny.coil", opt, &err);
    CHECK_OK(m && coil_init_params(m, seed, NULL, 0, &err), err);
    return m;
}

/* ---------------------------------------------------------------- options */

static void test_options(void)
{
    coil_error err;
    coil_options bad = {.mode = "fast"};
    CHECK(!coil_load("examples/tiny.coil", &bad, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "mode 'fast'", "default, reduce-overhead or max-autotune");
    coil_options nodims = {.ndims = 1};
    CHECK(!coil_load("examples/tiny.coil", &nodims, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "1 dims but dims is NULL");
    coil_options q = {.dims = (coil_dim_size[]){{"Q", 2}}, .ndims = 1};
    CHECK(!coil_load("examples/tiny.coil", &q, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_options.dims", "no symbolic dimension 'Q'");
    /* reduce-overhead is the default on the CPU: the same outputs, bit for bit */
    float l0[40], p0[40], l1[40], p1[40];
    coil_options ro = {.mode = "reduce-overhead"}, def = {.mode = "default"};
    coil_model *a = load_tiny(&def, 3), *b = load_tiny(&ro, 3);
    if (a && b && run_tiny(a, l0, p0) && run_tiny(b, l1, p1))
        CHECK(memcmp(l0, l1, sizeof l0) == 0 && memcmp(p0, p1, sizeof p0) == 0);
    coil_free(a);
    coil_free(b);
    /* dims size a parameter's symbol for coil_init_params when it is given none */
    static const char text[] = "graph @s(%x: f32[B,2]) -> (y: f32[B,2]) {\n"
                               "  %p = param {name=\"p\", init=\"ones\"} : f32[B,2]\n"
                               "  %y = add %x, %p : f32[B,2]\n"
                               "  return %y\n"
                               "}\n";
    coil_options b3 = {.dims = (coil_dim_size[]){{"B", 3}}, .ndims = 1};
    coil_model *s = coil_load_text("s.cir", text, sizeof text - 1, &b3, &err);
    CHECK_OK(s && coil_init_params(s, 0, NULL, 0, &err), err);
    float x[6] = {1, 2, 3, 4, 5, 6};
    coil_tensor in = tensor_f32(2, (int64_t[]){3, 2}, x), out;
    CHECK_OK(s && coil_run(s, &in, 1, &out, 1, &err), err);
    for (int i = 0; err.code == 0 && i < 6; i++)
        CHECK(((float *)out.data)[i] == x[i] + 1);
    if (err.code == 0)
        coil_tensor_free(&out);
    coil_free(s);
}

/* max-autotune measures at the warm-up and writes the cache it is given; its kernels
 * compute what the heuristics' do. */
static void test_autotune_cache(void)
{
    char cache[256];
    coil_options o = {.mode = "max-autotune", .cache = tmp_path("autotune.json", cache, sizeof cache),
                      .dims = (coil_dim_size[]){{"B", 4}}, .ndims = 1, .threads = 2};
    coil_model *tuned = load_tiny(&o, 9), *plain = load_tiny(NULL, 9);
    coil_error err;
    struct stat st;
    double t0 = now();
    CHECK_OK(tuned && coil_prepare(tuned, NULL, 0, &err), err); /* B from the options */
    printf("max-autotune: prepare (compile and tune at B=4) %.0f ms\n", (now() - t0) * 1e3);
    CHECK(stat(cache, &st) == 0 && st.st_size > 0);
    float l0[40], p0[40], l1[40], p1[40];
    if (tuned && plain && run_tiny(tuned, l0, p0) && run_tiny(plain, l1, p1))
        for (int i = 0; i < 40; i++)
            CHECK(fabsf(l0[i] - l1[i]) <= 1e-5f * (1 + fabsf(l1[i])));
    coil_free(tuned);
    coil_free(plain);
    unlink(cache);
    strcat(cache, ".lock"); /* the cache's writers' lock */
    unlink(cache);
}

/* ---------------------------------------------------------------- coil_prepare */

/* The first run's time: after coil_prepare it compiles nothing. (Without the object
 * cache, so that both models' compiles are whole.) */
static void test_prepare(void)
{
    setenv("COIL_CODE_CACHE", "0", 1);
    coil_error err;
    float x[8 * 16];
    coil_tensor in = tiny_input(x, 8), out[2];
    coil_model *cold = load_tiny(NULL, 1), *warm = load_tiny(NULL, 1);
    double t0 = now();
    bool ok = cold && coil_run(cold, &in, 1, out, 2, &err);
    double cold_s = now() - t0;
    CHECK_OK(ok, err);
    for (int i = 0; ok && i < 2; i++)
        coil_tensor_free(&out[i]);
    t0 = now();
    CHECK_OK(warm && coil_prepare(warm, (coil_dim_size[]){{"B", 8}}, 1, &err), err);
    double prepare_s = now() - t0;
    t0 = now();
    ok = warm && coil_run(warm, &in, 1, out, 2, &err);
    double first_s = now() - t0;
    CHECK_OK(ok, err);
    for (int i = 0; ok && i < 2; i++)
        coil_tensor_free(&out[i]);
    printf("tiny.coil at B=8: first run %.2f ms without coil_prepare, %.3f ms after it "
           "(coil_prepare %.1f ms)\n", cold_s * 1e3, first_s * 1e3, prepare_s * 1e3);
    CHECK(first_s < prepare_s / 4 && first_s < cold_s / 4);
    CHECK_OK(coil_prepare(warm, NULL, 0, &err), err); /* compiled already: nothing to do */
    coil_free(cold);
    coil_free(warm);
    unsetenv("COIL_CODE_CACHE");

    coil_model *m = coil_load("examples/tiny.coil", NULL, &err);
    CHECK(!coil_prepare(m, (coil_dim_size[]){{"B", 2}}, 1, &err)); /* no parameters yet */
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_prepare", "parameter 'fc1.weight' has no value");
    CHECK(!coil_prepare(m, (coil_dim_size[]){{"T", 2}}, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "no symbolic dimension 'T'");
    CHECK_OK(coil_prepare(m, NULL, 0, &err), err); /* no sizes: compile only */
    CHECK_OK(coil_init_params(m, 1, NULL, 0, &err), err);
    CHECK_OK(coil_prepare(m, (coil_dim_size[]){{"B", 2}}, 1, &err), err);
    CHECK(!coil_prepare(NULL, NULL, 0, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "model is NULL");
    coil_free(m);
    static const char two[] = "graph @two(%a: f32[B,2], %b: f32[T]) -> (y: f32[B,2]) {\n"
                              "  %y = neg %a : f32[B,2]\n  return %y\n}\n";
    m = coil_load_text("two.cir", two, sizeof two - 1, NULL, &err);
    CHECK(!coil_prepare(m, (coil_dim_size[]){{"B", 2}}, 1, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'b' has type f32[T]");
    coil_free(m);
}

/* ---------------------------------------------------------------- coil_save */

/* A package saved from the API runs as its source does, through the API and `coil run`. */
static void test_save(void)
{
    char pkg[256], cmd[8192];
    coil_error err;
    coil_model *src = load_tiny(NULL, 5);
    CHECK_OK(src && coil_save(src, tmp_path("pkg", pkg, sizeof pkg), &err), err);
    coil_model *loaded = coil_load(pkg, NULL, &err);
    CHECK_OK(loaded && coil_init_params(loaded, 5, NULL, 0, &err), err);
    float l0[40], p0[40], l1[40], p1[40];
    if (src && loaded && run_tiny(src, l0, p0) && run_tiny(loaded, l1, p1))
        CHECK(memcmp(l0, l1, sizeof l0) == 0 && memcmp(p0, p1, sizeof p0) == 0);
    coil_model *again = NULL; /* a package saved again from its loaded self */
    char pkg2[256];
    CHECK_OK(loaded && coil_save(loaded, tmp_path("pkg2", pkg2, sizeof pkg2), &err) &&
             (again = coil_load(pkg2, NULL, &err)) && coil_init_params(again, 5, NULL, 0, &err),
             err);
    if (again && run_tiny(again, l1, p1))
        CHECK(memcmp(l0, l1, sizeof l0) == 0);
    coil_free(again);
    coil_options interp = {.interpret = true}; /* an interpreted model compiles for it */
    coil_model *im = load_tiny(&interp, 5);
    char pkg3[256];
    CHECK_OK(im && coil_save(im, tmp_path("pkg3", pkg3, sizeof pkg3), &err), err);
    coil_free(im);
    if (coil_bin[0]) { /* the command line runs it as it runs the source */
        snprintf(cmd, sizeof cmd, "'%s' run '%s' --dim B=3 | grep -v '^compile\\|^time'",
                 coil_bin, pkg);
        char *from_pkg = command_output(cmd);
        snprintf(cmd, sizeof cmd, "'%s' run examples/tiny.coil --dim B=3 | grep -v "
                 "'^compile\\|^time'", coil_bin);
        char *from_src = command_output(cmd);
        CHECK(from_pkg && from_src && strstr(from_pkg, "logits f32[3,10] sum="));
        CHECK(from_pkg && from_src && strcmp(from_pkg, from_src) == 0);
        free(from_pkg);
        free(from_src);
    }
    CHECK(!coil_save(src, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_save", "directory is NULL");
    char blocked[300];
    snprintf(blocked, sizeof blocked, "%s/pkg/manifest.json/sub", tmpdir); /* a file in the way */
    CHECK(!coil_save(src, blocked, &err));
    CHECK_ERR(err, COIL_ERR_IO, "manifest.json/sub", "cannot create the package directory");
    coil_free(src);
    coil_free(loaded);
}

/* Whether two files hold the same bytes. */
static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    for (int ca = 0, cb = 0; same && ca != EOF; same = ca == cb)
        ca = fgetc(fa), cb = fgetc(fb);
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* A GPU package needs no GPU (NVRTC compiles it here): the files `coil compile --device
 * cuda` writes, byte for byte. Skipped where this build or machine cannot compile CUDA. */
static void test_save_gpu(void)
{
    coil_options cuda = {.device = "cuda"};
    coil_error err;
    char pkg[256], cli[256], cmd[8192];
    coil_model *m = coil_load("examples/tiny.coil", &cuda, &err);
    CHECK_OK(m, err);
    if (m && !coil_save(m, tmp_path("gpu", pkg, sizeof pkg), &err)) {
        printf("coil_save for cuda: skipped (%s)\n", err.message);
        CHECK(err.code == COIL_ERR_UNSUPPORTED || err.code == COIL_ERR_DEVICE);
    } else if (m && coil_bin[0]) {
        snprintf(cmd, sizeof cmd, "'%s' compile examples/tiny.coil --device cuda -o '%s'",
                 coil_bin, tmp_path("gpu-cli", cli, sizeof cli));
        free(command_output(cmd));
        static const char *const files[] = {"model.cir", "program.loop", "kernels.cu",
                                            "kernels.sm_90a.cubin"};
        for (int i = 0; i < 4; i++) {
            char a[512], b[512];
            snprintf(a, sizeof a, "%s/%s", pkg, files[i]);
            snprintf(b, sizeof b, "%s/%s", cli, files[i]);
            CHECK(same_file(a, b));
        }
        char *cu = coil_dump(m, "cuda", &err);
        snprintf(cmd, sizeof cmd, "%s/kernels.cu", cli);
        FILE *f = fopen(cmd, "rb");
        char head[64] = "";
        CHECK(f && fgets(head, sizeof head, f) && cu && strncmp(cu, head, strlen(head)) == 0);
        if (f)
            fclose(f);
        coil_string_free(cu);
    }
    coil_free(m);
}

/* ---------------------------------------------------------------- coil_dump */

/* The stages' text is `coil dump --after`'s, and the optimised IR reads back as a model. */
static void test_dump(void)
{
    coil_error err;
    coil_model *m = coil_load("examples/tiny.coil", NULL, &err);
    CHECK_OK(m, err);
    if (!m)
        return;
    char *input = coil_dump(m, "input", &err);
    CHECK(input && strstr(input, "graph @Tiny("));
    static const char *const stages[] = {"cse", "fuse", "lower"};
    for (int i = 0; coil_bin[0] && i < 3; i++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s' dump examples/tiny.coil --after=%s", coil_bin, stages[i]);
        char *want = command_output(cmd), *got = coil_dump(m, stages[i], &err);
        CHECK_OK(got, err);
        CHECK(want && got && strcmp(want, got) == 0);
        free(want);
        coil_string_free(got);
    }
    char *dce = coil_dump(m, "dce", &err); /* the optimised graph is a model too */
    coil_model *back = dce ? coil_load_text("dce.cir", dce, strlen(dce), NULL, &err) : NULL;
    CHECK_OK(back, err);
    float l0[40], p0[40], l1[40], p1[40];
    if (back && coil_init_params(m, 4, NULL, 0, &err) && coil_init_params(back, 4, NULL, 0, &err) &&
        run_tiny(m, l0, p0) && run_tiny(back, l1, p1))
        for (int i = 0; i < 40; i++)
            CHECK(fabsf(p0[i] - p1[i]) <= 1e-6f);
    coil_free(back);
    coil_string_free(dce);
    char *ll = coil_dump(m, "llvm-ir", &err), *as = coil_dump(m, "asm", &err);
    CHECK(ll && strstr(ll, "define "));
    CHECK(as && strstr(as, ".text"));
    coil_string_free(ll);
    coil_string_free(as);
    char path[256];
    CHECK_OK(coil_dump_file(m, "input", tmp_path("input.cir", path, sizeof path), &err), err);
    coil_model *from_file = coil_load(path, NULL, &err);
    char *again = from_file ? coil_dump(from_file, "input", &err) : NULL;
    CHECK(input && again && strcmp(input, again) == 0);
    coil_string_free(again);
    coil_free(from_file);
    unlink(path);
    CHECK_OK(coil_dump_file(m, "asm", tmp_path("kernels.s", path, sizeof path), &err), err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 0);
    unlink(path);
    CHECK(!coil_dump(m, "codegen", &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "stage 'codegen'", "input, verify, decompose",
              "dce, fuse, lower, llvm-ir, asm");
    CHECK(!coil_dump(m, "ptx", &err)); /* a GPU's stage, and this model is for the CPU */
    CHECK_ERR(err, COIL_ERR_USAGE, "stage 'ptx'");
    CHECK(!coil_dump(NULL, "input", &err) && err.code == COIL_ERR_USAGE);
    coil_string_free(input);
    coil_string_free(NULL);
    coil_free(m);
    char pkg[256]; /* a package's graph has been through the passes */
    coil_model *p = coil_load(tmp_path("pkg", pkg, sizeof pkg), NULL, &err);
    CHECK(p && !coil_dump(p, "cse", &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "stage 'cse' is a pass", "input, fuse, lower");
    char *lower = p ? coil_dump(p, "lower", &err) : NULL;
    CHECK(lower && strstr(lower, "program @Tiny"));
    coil_string_free(lower);
    coil_free(p);
}

/* ---------------------------------------------------------------- the profile */

static void test_profile(void)
{
    coil_error err;
    coil_profile pr;
    coil_options o = {.profile = true, .threads = 1};
    coil_model *m = load_tiny(&o, 2);
    if (!m)
        return;
    CHECK(!coil_get_profile(m, &pr, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "no run to report since loading");
    CHECK_OK(coil_prepare(m, (coil_dim_size[]){{"B", 4}}, 1, &err), err);
    CHECK(!coil_get_profile(m, &pr, &err)); /* the warm-up is not counted */
    CHECK_ERR(err, COIL_ERR_USAGE, "no run to report");
    float l[40], p[40];
    for (int r = 0; r < 5; r++)
        run_tiny(m, l, p);
    CHECK_OK(coil_get_profile(m, &pr, &err), err);
    CHECK(pr.runs == 5 && pr.nsteps == 4 && pr.ms > 0);
    double sum = 0, share = 0;
    int gemms = 0;
    for (int i = 0; i < pr.nsteps; i++) {
        const coil_step_time *s = &pr.steps[i];
        sum += s->ms, share += s->share;
        CHECK(s->name && s->name[0] && s->layer && s->kind && s->ms >= 0 && s->bytes > 0);
        CHECK(i == 0 || pr.steps[i - 1].ms >= s->ms);
        if (s->kind && strcmp(s->kind, "gemm") == 0) { /* fc1: 2*4*16*32, fc2: 2*4*32*10 */
            gemms++;
            CHECK(strcmp(s->layer, "fc1") == 0 ? s->flops >= 4096 && s->flops < 4096 + 512
                                               : s->flops >= 2560 && s->flops < 2560 + 512);
        }
        printf("  step %d %-28s %8.4f ms %5.1f%% %8.0f FLOPs\n", s->step, s->name, s->ms,
               s->share * 100, s->flops);
    }
    CHECK(gemms == 2 && fabs(sum - pr.ms) < 1e-9 && fabs(share - 1) < 1e-9);
    CHECK_OK(coil_reset_profile(m, &err), err);
    CHECK(!coil_get_profile(m, &pr, &err) && err.code == COIL_ERR_USAGE);
    run_tiny(m, l, p);
    CHECK_OK(coil_get_profile(m, &pr, &err) && pr.runs == 1, err);
    coil_free(m);
    m = load_tiny(NULL, 2); /* loaded without profile: says how to get one */
    if (m)
        run_tiny(m, l, p);
    CHECK(!coil_get_profile(m, &pr, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_options.profile");
    coil_free(m);
}

/* `coil` beside this test's executable (both are built into the build directory). */
static void find_coil(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    snprintf(coil_bin, sizeof coil_bin, "%s/coil", dirname(exe));
    if (access(coil_bin, X_OK) != 0) {
        printf("no coil beside the test: the comparisons with the command line are skipped\n");
        coil_bin[0] = 0;
    }
}

static void remove_package(const char *name)
{
    static const char *const files[] = {"model.cir", "program.loop", "plan.json", "kernels.o",
                                        "kernels.cu", "kernels.sm_90a.cubin", "manifest.json"};
    char dir[256], path[512];
    tmp_path(name, dir, sizeof dir);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    find_coil();
    test_options();
    test_autotune_cache();
    test_prepare();
    test_save();
    test_save_gpu();
    test_dump();
    test_profile();
    remove_package("pkg");
    remove_package("pkg2");
    remove_package("pkg3");
    remove_package("gpu");
    remove_package("gpu-cli");
    rmdir(tmpdir);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
