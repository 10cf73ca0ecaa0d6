/* test_cuda_codegen.c — every generated CUDA kernel compiles: each op fixture
 * (tests/models/ops) and each example (tiny, mlp, gpt2 at a small size and at its own),
 * lowered as for the CPU and written as CUDA C, compiled by NVRTC to cubins for sm_80 and
 * sm_90a (no GPU needed). Also the cubin cache: a second compile of the same source is read
 * back, not compiled, and a damaged cache file is ignored and replaced. Skips with a
 * message when NVRTC is not installed. What the kernels compute is checked on a GPU
 * (test_cuda_run), not here. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"

#define FIXTURE_DIR "tests/models/ops"

/* Each source is compiled for both. Under the sanitizers (make test-asan) only for the
 * first: the source, which is all of coil's code a compile runs, is the same for both,
 * and NVRTC itself is not instrumented, so the second would only double its time. */
#ifdef __SANITIZE_ADDRESS__
static const char *const archs[] = {"sm_80"};
#define ARCHS "sm_80"
#else
static const char *const archs[] = {"sm_80", "sm_90a"};
#define ARCHS "sm_80 and sm_90a"
#endif

/* Whether source compiles for every architecture; the first error said. */
static bool compiles(const char *src, const char *label)
{
    Err e = {0};
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        CudaCompileOptions o = {.arch = archs[a], .cache_dir = ""};
        Cubin c;
        if (!nvrtc_compile(src, label, &o, &c, &e)) {
            fprintf(stderr, "%s: %s\n", label, e.msg);
            return false;
        }
        CHECK(c.size > 4 && memcmp(c.data, "\177ELF", 4) == 0 && !c.cached);
        cubin_free(&c);
    }
    return true;
}

/* Lower g as the CUDA backend does (attention kept whole) and compile its kernels, the
 * fused attention kernels included, for every architecture. */
static int compile_graph(Graph *g, const char *label)
{
    Err e = {0};
    Program *p = run_passes(&g, pass_pipeline_cuda, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
    char *src = p ? cuda_source(p, &e) : NULL;
    int kernels = p ? p->nkernel : 0;
    if (!src)
        fprintf(stderr, "%s: %s\n", label, e.msg);
    if (!src || !compiles(src, label))
        check_failures++;
    free(src);
    program_free(p);
    graph_free(g);
    return kernels;
}

static int is_case(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".cir") == 0;
}

/* Every fixture lowered and written with its own prefix (f<i>_) after one prelude, into
 * one source; the number of kernels, or -1 when a fixture failed before NVRTC (each such
 * one said and counted). One NVRTC program for all of them: each program costs NVRTC a
 * fixed ~0.2 s (its headers and the prelude), which 190 fixtures times two architectures
 * made most of this test's time. */
static int fixtures_source(struct dirent **list, int n, FILE *out)
{
    int kernels = 0;
    bool failed = false;
    fputs(cuda_prelude, out);
    for (int i = 0; i < n; i++) {
        char path[1024], prefix[32];
        snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, list[i]->d_name);
        snprintf(prefix, sizeof prefix, "f%d_", i);
        Err e = {0};
        Graph *g = ir_parse_file(path, &e);
        Program *p = g && run_passes(&g, pass_pipeline_cuda, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
        char *part = p ? cuda_source_part(p, prefix, false, &e) : NULL;
        if (part)
            fputs(part, out), kernels += p->nkernel;
        else
            fprintf(stderr, "%s: %s\n", list[i]->d_name, e.msg), failed = true, check_failures++;
        free(part);
        program_free(p);
        graph_free(g);
    }
    return failed ? -1 : kernels;
}

/* All fixtures in one program; where it fails, each one alone, to name the culprits. */
static void test_fixtures(void)
{
    struct dirent **list;
    int n = scandir(FIXTURE_DIR, &list, is_case, alphasort);
    CHECK(n > 100);
    char *src = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&src, &len);
    int kernels = out ? fixtures_source(list, n, out) : -1;
    if (out)
        fclose(out);
    if (kernels >= 0 && !compiles(src, "the op fixtures")) {
        check_failures++;
        for (int i = 0; i < n; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, list[i]->d_name);
            Err e = {0};
            Graph *g = ir_parse_file(path, &e);
            if (g)
                compile_graph(g, list[i]->d_name);
        }
    }
    free(src);
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    printf("%d op fixtures: %d kernels compiled for " ARCHS "\n", n, kernels);
}

/* Graph text through the CUDA passes to its program and source, which `want` checks,
 * then the graph's kernels compiled for both architectures; whether the text parsed. */
static bool check_and_compile(const char *text, const char *label,
                              bool (*want)(const Program *p, const char *src))
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), label, &e);
    Program *p = g && run_passes(&g, pass_pipeline_cuda, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
    char *src = p ? cuda_source(p, &e) : NULL;
    CHECK(p && src && want(p, src));
    if (!src)
        fprintf(stderr, "%s: %s\n", label, e.msg);
    free(src);
    program_free(p);
    if (g)
        compile_graph(graph_copy(g, &e), label);
    graph_free(g);
    return g != NULL;
}

static bool has_mma_attention(const Program *p, const char *src)
{
    (void)p;
    return strstr(src, "coil_attention_0_mma(") && strstr(src, "coil_mma_");
}

/* The training ops' graph: lse on tensor cores, the backward with both kernels. */
static bool has_training_kernels(const Program *p, const char *src)
{
    (void)p;
    return strstr(src, "coil_attention_0_mma(") && strstr(src, "coil_attention_1_mma(") &&
           strstr(src, "coil_attention_1(");
}

/* The forward with its log-sum-exp in one step, in both of its kernels. */
static bool forward_writes_lse(const Program *p, const char *src)
{
    return p->nstep == 2 && p->step[0].attn.writes_lse &&
           strstr(src, "lse[off_lse + row * rs_lse]") && strstr(src, "lse[off_lse + i * rs_lse]");
}

/* The tensor-core attention kernels (f16, bf16; causal or not; head sizes 16 to 128; a
 * padding mask's bias) are in the source and compile for both architectures. */
static void test_attention_mma(void)
{
    static const char *const shapes[][3] = {{"bf16", "[2,12,1024,64]", ""},
                                            {"f16", "[1,4,100,128]", ""},
                                            {"bf16", "[3,77,16]", ""},
                                            {"bf16", "[2,12,1024,64]", "[2,1,1,1024]"}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int causal = 0; causal < 2; causal++) {
            char text[700], label[64], bias[80] = "", operand[8] = "";
            const char *dt = shapes[i][0], *sh = shapes[i][1];
            if (*shapes[i][2]) {
                snprintf(bias, sizeof bias, ", %%b: %s%s", dt, shapes[i][2]);
                snprintf(operand, sizeof operand, ", %%b");
            }
            snprintf(text, sizeof text,
                     "graph @a(%%q: %s%s, %%k: %s%s, %%v: %s%s%s) -> (y: %s%s) {\n"
                     "  %%y = attention %%q, %%k, %%v%s {causal=%s} : %s%s\n  return %%y\n}\n",
                     dt, sh, dt, sh, dt, sh, bias, dt, sh, operand, causal ? "true" : "false",
                     dt, sh);
            snprintf(label, sizeof label, "attention_mma_%s_%zu_%d.cu", dt, i, causal);
            check_and_compile(text, label, has_mma_attention);
        }
    printf("tensor-core attention: 8 kernels compiled for " ARCHS "\n");
}

/* attention's training ops kept whole (decompose_fused_cuda): attention_lse on tensor
 * cores and the backward's two kinds of block, with their CUDA-core kernels. */
static void test_attention_training(void)
{
    static const char *const shapes[][3] = {{"bf16", "[2,12,1024,64]", "[2,12,1024]"},
                                            {"f16", "[3,77,32]", "[3,77]"},
                                            {"bf16", "[5,16]", "[5]"}};
    int n = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int causal = 0; causal < 2; causal++) {
            char text[900], label[64];
            const char *dt = shapes[i][0], *sh = shapes[i][1], *c = causal ? "true" : "false";
            snprintf(text, sizeof text,
                     "graph @a(%%q: %s%s, %%k: %s%s, %%v: %s%s, %%o: %s%s, %%g: %s%s) -> (d: %s[3,%s) {\n"
                     "  %%l = attention_lse %%q, %%k {causal=%s} : f32%s\n"
                     "  %%d = attention_grad %%q, %%k, %%v, %%o, %%g, %%l {causal=%s} : %s[3,%s\n"
                     "  return %%d\n}\n",
                     dt, sh, dt, sh, dt, sh, dt, sh, dt, sh, dt, sh + 1, c, shapes[i][2], c, dt, sh + 1);
            snprintf(label, sizeof label, "attention_train_%s_%zu_%d.cu", dt, i, causal);
            n += check_and_compile(text, label, has_training_kernels);
        }
    /* the forward with the log-sum-exp merged into its step (lower.c's merge_lse) */
    static const char fwd[] =
        "graph @a(%q: bf16[2,12,1024,64], %k: bf16[2,12,1024,64], %v: bf16[2,12,1024,64], "
        "%g: bf16[2,12,1024,64]) -> (d: bf16[3,2,12,1024,64]) {\n"
        "  %o = attention %q, %k, %v {causal=true} : bf16[2,12,1024,64]\n"
        "  %l = attention_lse %q, %k {causal=true} : f32[2,12,1024]\n"
        "  %d = attention_grad %q, %k, %v, %o, %g, %l {causal=true} : bf16[3,2,12,1024,64]\n"
        "  return %d\n}\n";
    n += check_and_compile(fwd, "attention_forward_lse.cu", forward_writes_lse);
    printf("attention's training ops: %d graphs' kernels compiled for " ARCHS "\n", n);
}

static void test_examples(void)
{
    static const struct {
        const char *path;
        const char *set[2];
        int nset;
    } models[] = {
        {"examples/tiny.coil", {NULL}, 0},
        {"examples/mlp.coil", {"layers=2"}, 1},
        {"examples/gpt2.coil", {"layers=1", "vocab=512"}, 2},
        {"examples/gpt2.coil", {NULL}, 0},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        Err e = {0};
        ModelOptions mo = {.set = models[i].set, .nset = models[i].nset};
        Graph *g = model_load(models[i].path, &mo, &e);
        if (!g) {
            fprintf(stderr, "%s: %s\n", models[i].path, e.msg);
            check_failures++;
            continue;
        }
        int k = compile_graph(g, models[i].path);
        printf("%s%s%s: %d kernels compiled\n", models[i].path, models[i].nset ? " --set " : "",
               models[i].nset ? models[i].set[0] : "", k);
    }
}

/* A second compile reads the cubin back; a corrupt cache file is compiled again. */
static void test_cache(void)
{
    char dir[] = "/tmp/coil-cubin-test-XXXXXX";
    if (!mkdtemp(dir)) {
        check_failures++;
        return;
    }
    const char *src = "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n";
    CudaCompileOptions o = {.arch = "sm_80", .cache_dir = dir};
    Cubin a, b, c;
    Err e = {0};
    CHECK(nvrtc_compile(src, "twice.cu", &o, &a, &e) && !a.cached);
    CHECK(nvrtc_compile(src, "twice.cu", &o, &b, &e) && b.cached && b.size == a.size &&
          memcmp(a.data, b.data, a.size) == 0);
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    char path[512] = "";
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.')
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        free(list[i]);
    }
    free(n >= 0 ? list : NULL);
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs("not a cubin", f) >= 0);
    if (f)
        fclose(f);
    CHECK(nvrtc_compile(src, "twice.cu", &o, &c, &e) && !c.cached && c.size == a.size);
    CudaCompileOptions other = {.arch = "sm_90a", .cache_dir = dir};
    Cubin d;
    CHECK(nvrtc_compile(src, "twice.cu", &other, &d, &e) && !d.cached); /* keyed by arch */
    /* max-autotune's full optimisation is another compile (another key), not the fast one's */
    CudaCompileOptions full = {.arch = "sm_90a", .cache_dir = dir, .full_opt = true};
    Cubin f1, f2;
    char v[32];
    int major = 0, minor = 0;
    sscanf(nvrtc_version(v, sizeof v), "%d.%d", &major, &minor);
    bool fast_flag = major > 12 || (major == 12 && minor >= 8); /* else the options agree */
    CHECK(nvrtc_compile(src, "twice.cu", &full, &f1, &e) && f1.cached == !fast_flag);
    CHECK(nvrtc_compile(src, "twice.cu", &full, &f2, &e) && f2.cached);
    cubin_free(&f1), cubin_free(&f2);
    cubin_free(&a), cubin_free(&b), cubin_free(&c), cubin_free(&d);
    remove(path);
    DIR *dd = opendir(dir);
    for (struct dirent *ent; dd && (ent = readdir(dd));)
        if (ent->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
            remove(path);
        }
    if (dd)
        closedir(dd);
    rmdir(dir);
}

/* A compile error names the kernel source's file, kept for reading. */
static void test_error(void)
{
    CudaCompileOptions o = {.arch = "sm_80", .cache_dir = ""};
    Cubin c;
    Err e = {0};
    CHECK(!nvrtc_compile("extern \"C\" __global__ void bad() { undeclared = 1; }", "bad.cu", &o,
                         &c, &e));
    const char *at = strstr(e.msg, "source written to ");
    CHECK(strstr(e.msg, "bad.cu") && at);
    if (at) {
        char path[256];
        sscanf(at + strlen("source written to "), "%255[^)]", path);
        CHECK(access(path, R_OK) == 0);
        remove(path);
    }
}

/* One small kernel compiled, no cache: the child run of test_builtins_found. */
static int compile_one(void)
{
    CudaCompileOptions o = {.arch = "sm_80", .cache_dir = ""};
    Cubin c;
    Err e = {0};
    bool ok = nvrtc_compile("extern \"C\" __global__ void k(float *x) { x[0] = sinf(x[0]); }",
                            "one.cu", &o, &c, &e);
    if (!ok)
        fprintf(stderr, "under ld.so --inhibit-cache: %s\n", e.msg);
    cubin_free(&c);
    return ok ? 0 : 1;
}

/* NVRTC opens libnvrtc-builtins by name while compiling: with libnvrtc found outside the
 * loader's path (here: the ld.so cache ignored, so only coil's own search finds it), the
 * builtins must already be loaded from libnvrtc's folder or every compile fails. */
static void test_builtins_found(void)
{
    static const char *const loaders[] = {"/lib64/ld-linux-x86-64.so.2",
                                          "/lib/ld-linux-aarch64.so.1"};
    const char *ld = NULL;
    for (size_t i = 0; i < sizeof loaders / sizeof *loaders && !ld; i++)
        if (access(loaders[i], X_OK) == 0)
            ld = loaders[i];
    if (!ld || getenv("LD_LIBRARY_PATH")) {
        printf("builtins test skipped: %s\n", ld ? "LD_LIBRARY_PATH is set" : "no known ld.so");
        return;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1); /* after exec it is ld.so */
    CHECK(n > 0);
    if (n <= 0)
        return;
    self[n] = 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(ld, ld, "--inhibit-cache", self, "--compile-one", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    const char *why;
    if (argc > 1 && strcmp(argv[1], "--compile-one") == 0)
        return compile_one();
    if (!nvrtc_available(&why)) {
        printf("skipped: %s\n", why);
        return 0;
    }
    char v[32];
    printf("NVRTC %s\n", nvrtc_version(v, sizeof v));
    printf("NVRTC from %s\n", nvrtc_library());
    test_error();
    test_builtins_found();
    test_cache();
    test_examples();
    test_attention_mma();
    test_attention_training();
    test_fixtures();
    return check_status();
}
