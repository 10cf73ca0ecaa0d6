/* test_package_integrity.c — a package is checked before any of it is used: a bit flipped
 * anywhere in any file (the manifest included), a file deleted, a manifest field edited
 * or added, a directory without a manifest, each is refused with an error naming the file,
 * never loaded and never a crash; and a write that fails (the file-size limit standing in
 * for a full disk) leaves neither a half file nor a temporary behind. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/sha256.h"
#include "check.h"
#include "codegen/cpu/cpu.h"
#include "io/npy.h"
#include "io/package.h"
#include "io/safetensors.h"
#include "test_files.h"

#define MODEL "examples/tiny.cir"

static char root[] = "/tmp/coil-pkg-XXXXXX";

static const char *in_root(const char *name)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 256, "%s/%s", root, name);
    return b;
}

static bool write_package(const char *dir, Err *e)
{
    Graph *g = ir_parse_file(MODEL, e);
    CompileOptions co = {.threads = 1};
    Compiled *c = g ? compile_graph(g, &co, e) : NULL;
    bool ok = c && package_write(dir, c, &co, NULL, e);
    compiled_free(c);
    graph_free(g);
    return ok;
}

/* Whether the package loads: its graph, then its object. */
static bool loads(const char *dir, Err *e)
{
    Graph *g = package_graph(dir, e);
    CompileOptions co = {.threads = 1};
    Compiled *c = g ? package_load(dir, g, &co, e) : NULL;
    bool ok = c != NULL;
    compiled_free(c);
    graph_free(g);
    return ok;
}

/* Names of dir's entries that contain `part`, counted. */
static int entries_with(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *en; d && (en = readdir(d));)
        n += strstr(en->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

/* ---------------------------------------------------------------- the intact package */

static const char *const files[] = {"manifest.json", "model.cir", "program.loop", "plan.json",
                                    "kernels.o"};
#define NFILES (int)(sizeof files / sizeof *files)

static void test_intact(const char *pkg)
{
    Err e = {0};
    CHECK(loads(pkg, &e));
    if (!err_ok(&e))
        fprintf(stderr, "intact package: %s\n", e.msg);
    size_t n;
    char *m = read_whole(in_root("pkg/manifest.json"), &n);
    CHECK(m && strstr(m, "\"format\": 2") && strstr(m, "\"manifest_sha256\""));
    for (int i = 1; m && i < NFILES; i++) { /* every file listed with its own digest */
        char hex[SHA256_HEX], path[512];
        int64_t bytes;
        snprintf(path, sizeof path, "%s/%s", pkg, files[i]);
        CHECK(sha256_file(path, hex, &bytes, &e));
        CHECK(strstr(m, hex) != NULL);
    }
    CHECK(m && !strstr(m, "\"kernels\":") && !strstr(m, "\"steps\":")); /* fields nobody read */
    CHECK(entries_with(pkg, ".tmp") == 0);
    free(m);
}

/* ---------------------------------------------------------------- damage */

/* One bit flipped at each `stride`-th byte of each file (a different bit each time):
 * package_graph refuses every one, naming the file. */
static void test_bit_flips(const char *pkg)
{
    int refused = 0, tried = 0;
    for (int k = 0; k < NFILES; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", pkg, files[k]);
        size_t n;
        char *orig = read_whole(path, &n), *bad = orig ? malloc(n + 1) : NULL;
        size_t stride = n > 8192 ? 7 : 1;
        for (size_t at = 0; bad && at < n; at += stride) {
            memcpy(bad, orig, n);
            bad[at] ^= (char)(1 << (at % 8));
            CHECK(write_whole(path, bad, n));
            Err e = {0};
            Graph *g = package_graph(pkg, &e);
            tried++;
            bool named = strstr(e.msg, files[k]) != NULL;
            refused += !g && named;
            if (g || !named)
                fprintf(stderr, "%s: byte %zu flipped: %s\n", files[k], at, g ? "accepted" : e.msg);
            graph_free(g);
        }
        if (orig)
            CHECK(write_whole(path, orig, n));
        free(orig), free(bad);
    }
    printf("package bit flips: %d of %d refused with the file named\n", refused, tried);
    CHECK(tried > 5000 && refused == tried);
    Err e = {0};
    CHECK(loads(pkg, &e)); /* restored */
}

/* A flip in kernels.o stops package_load too, before the object is mapped. */
static void test_object_never_mapped(const char *pkg)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels.o", pkg);
    Err e = {0};
    Graph *g = package_graph(pkg, &e);
    size_t n;
    char *orig = read_whole(path, &n);
    CHECK(g && orig && n > 64);
    for (int trial = 0; g && orig && trial < 30; trial++) {
        char *bad = malloc(n);
        memcpy(bad, orig, n);
        for (int f = 0; f < 4; f++) { /* four random bits, as the audit flipped them */
            size_t at = (size_t)rand() % n;
            bad[at] ^= (char)(1 << (rand() % 8));
        }
        CHECK(write_whole(path, bad, n));
        CompileOptions co = {.threads = 1};
        Err le = {0};
        Compiled *c = package_load(pkg, g, &co, &le);
        CHECK(!c && strstr(le.msg, "kernels.o: error: not a loadable object"));
        compiled_free(c);
        free(bad);
    }
    if (orig)
        CHECK(write_whole(path, orig, n));
    free(orig);
    graph_free(g);
}

static void test_missing_files(const char *pkg)
{
    for (int k = 1; k < NFILES; k++) {
        char path[512], moved[600];
        snprintf(path, sizeof path, "%s/%s", pkg, files[k]);
        snprintf(moved, sizeof moved, "%s.away", path);
        CHECK(rename(path, moved) == 0);
        Err e = {0};
        CHECK(!loads(pkg, &e) && strstr(e.msg, files[k]) && strstr(e.msg, "missing"));
        CHECK(rename(moved, path) == 0);
    }
    Err e = {0};
    char empty[256];
    snprintf(empty, sizeof empty, "%s/empty", root);
    CHECK(mkdir(empty, 0777) == 0);
    CHECK(package_is(empty) && !package_is(MODEL));
    CHECK(!package_graph(empty, &e) && strstr(e.msg, "not a coil package") &&
          strstr(e.msg, "no manifest.json"));
}

/* ---------------------------------------------------------------- edited manifests */

/* The manifest's own checksum recomputed, as an editor who knew the scheme would. */
static char *reseal(char *m)
{
    char *line = strstr(m, "  \"manifest_sha256\"");
    char hex[SHA256_HEX];
    if (!line)
        return m;
    sha256_of(m, (size_t)(line - m), hex);
    snprintf(line, strlen(line) + 1, "  \"manifest_sha256\": \"%s\"\n}\n", hex);
    return m;
}

/* m with the first `from` replaced by `to` (in a new buffer). */
static char *edit(const char *m, const char *from, const char *to)
{
    const char *at = strstr(m, from);
    char *out = malloc(strlen(m) + strlen(to) + 1);
    if (!at) {
        strcpy(out, m);
        return out;
    }
    sprintf(out, "%.*s%s%s", (int)(at - m), m, to, at + strlen(from));
    return out;
}

static void expect_refused(const char *pkg, const char *manifest, const char *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    CHECK(write_whole(path, manifest, strlen(manifest)));
    Err e = {0};
    bool ok = loads(pkg, &e);
    CHECK(!ok && strstr(e.msg, want));
    if (ok || !strstr(e.msg, want))
        fprintf(stderr, "edited manifest: want '%s', got: %s\n", want, ok ? "loaded" : e.msg);
}

static void test_manifest_edits(const char *pkg)
{
    size_t n;
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.json", pkg);
    char *orig = read_whole(path, &n);
    if (!orig)
        return;
    static const struct {
        const char *from, *to, *want;
        bool reseal;
    } edits[] = {
        {"\"no_fusion\": false", "\"no_fusion\": true", "does not match its contents", false},
        {"\"target\": \"host\"", "\"target\": \"hosu\"", "does not match its contents", false},
        {"\"format\": 2", "\"format\": 1", "format 1 carried no checksums", false},
        {"\"coil\": \"0.1.0\"", "\"coil\": \"0.0.1\"", "written by coil 0.0.1", false},
        {"\"no_fusion\": false,", "\"no_fusion\": false,\n  \"kernels\": 3,", "unknown field \"kernels\"", true},
        {"\"model\": \"tiny\"", "\"model\": \"other\"", "the manifest says @other", true},
        {"\"device\": \"cpu\"", "\"device\": \"tpu\"", "expected cpu or cuda", true},
        {"\"target\": \"host\"", "\"target\": \"../x\"", "not a CPU or GPU architecture", true},
        {"\"plan.json\"", "\"../plan.json\"", "is not a file name", true},
        {"\"plan.json\"", "\"plan.jsom\"", "lacks plan.json", true},
        {"\"bytes\": ", "\"bytes\": 1", "the manifest says 1", true},
        {"\"manifest_sha256\"", "\"manifest_sha255\"", "has no \"manifest_sha256\"", false},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char *m = edit(orig, edits[i].from, edits[i].to);
        CHECK(strcmp(m, orig) != 0);
        expect_refused(pkg, edits[i].reseal ? reseal(m) : m, edits[i].want);
        free(m);
    }
    CHECK(write_whole(path, orig, n));
    free(orig);
    Err e = {0};
    CHECK(loads(pkg, &e));
}

/* ---------------------------------------------------------------- failed writes */

/* A file-size limit of 8 KiB makes every larger write fail with EFBIG (SIGXFSZ ignored),
 * as a full disk would: nothing half-written and no temporary stays. */
static void test_failed_writes(void)
{
    struct rlimit old, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    small = old;
    small.rlim_cur = 8192;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    Err pe = {0}, ne = {0}, se = {0};
    bool wrote_pkg = write_package(in_root("full"), &pe);
    Tensor t = {0};
    int64_t shape[1] = {8192};
    CHECK(tensor_alloc(&t, DT_F32, 1, shape, &ne));
    memset(t.data, 0, tensor_nbytes(&t));
    bool wrote_npy = npy_write(in_root("out.npy"), &t, &ne);
    const char *name = "w";
    bool wrote_st = safetensors_write(in_root("w.safetensors"), &name, &t, 1, NULL, NULL, 0, &se);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_DFL);
    CHECK(!wrote_pkg && strstr(pe.msg, "kernels.o: cannot write: File too large"));
    CHECK(!wrote_npy && strstr(ne.msg, "out.npy: cannot write: File too large"));
    CHECK(!wrote_st && strstr(se.msg, "w.safetensors: cannot write"));
    CHECK(entries_with(in_root("full"), ".tmp") == 0 && entries_with(in_root("full"), "kernels.o") == 0 &&
          entries_with(in_root("full"), "manifest.json") == 0);
    CHECK(entries_with(root, ".tmp") == 0 && entries_with(root, "out.npy") == 0 &&
          entries_with(root, "w.safetensors") == 0);
    tensor_free(&t);
    /* a failed write leaves an existing file as it was */
    Err e = {0};
    CHECK(file_write_atomic(in_root("keep"), "old", 3, &e));
    AtomicFile af;
    CHECK(atomic_open(&af, in_root("keep"), &e));
    fputs("new", af.f);
    CHECK(!atomic_close(&af, false, &e) && entries_with(root, "keep.tmp") == 0);
    size_t n;
    char *kept = read_whole(in_root("keep"), &n);
    CHECK(kept && n == 3 && memcmp(kept, "old", 3) == 0);
    free(kept);
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    if (!cpu_codegen_built()) {
        printf("test_package_integrity: skipped (built without COIL_LLVM)\n");
        return check_status();
    }
    test_failed_writes();
    char pkg[256];
    snprintf(pkg, sizeof pkg, "%s/pkg", root);
    Err e = {0};
    CHECK(write_package(pkg, &e));
    if (!err_ok(&e)) {
        fprintf(stderr, "package_write: %s\n", e.msg);
        return check_status();
    }
    test_intact(pkg);
    test_bit_flips(pkg);
    test_object_never_mapped(pkg);
    test_missing_files(pkg);
    test_manifest_edits(pkg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return check_status();
}
