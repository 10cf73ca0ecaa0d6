/* test_checkpoint.c — what `coil train --resume` accepts: a checkpoint sealed with a digest
 * of its contents (a bit flipped anywhere is refused), metadata checked value by value,
 * shapes and dtypes rather than byte counts, no NaN or inf, the same seed, optimizer and
 * coil unless --resume-anyway; a diverged run exits with an error and leaves the last good
 * checkpoint as it was; and the save directory has one writer at a time (a second fails at
 * once naming the first), which clears the temporaries a killed writer left. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cpu/cpu.h"
#include "coil_beside.h"
#include "io/safetensors.h"
#include "test_files.h"
#include "train/train.h"

#define MODEL "examples/tiny.cir"
#define CKPT "checkpoint.safetensors"

static char root[] = "/tmp/coil-ckpt-XXXXXX";
static Graph *model;

static TrainOptions options(const char *save, int64_t steps, bool resume)
{
    static const SymSize sizes[1] = {{"B", 4}};
    return (TrainOptions){.steps = steps, .accum = 1, .sizes = sizes, .nsizes = 1, .seed = 5,
                          .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 1, NULL, 0},
                          .lr = {1e-3, 1e-4, 0, 0}, .log_every = 0, .save = save,
                          .resume = resume, .compile = {.threads = 1}, .peak_gflops = 100,
                          .out = stdout}; /* a peak given: none measured */
}

static bool train(const TrainOptions *o, Err *e)
{
    TrainResult r;
    return train_run(model, o, &r, e);
}

/* A fresh directory under root with a 3-step checkpoint in it. */
static const char *saved_dir(const char *name)
{
    static char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    TrainOptions o = options(dir, 3, false);
    Err e = {0};
    CHECK(train(&o, &e));
    if (!err_ok(&e))
        fprintf(stderr, "%s: %s\n", name, e.msg);
    return dir;
}

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

/* ---------------------------------------------------------------- rewriting a checkpoint */

/* How a test changes a checkpoint before writing it back. */
typedef struct Change {
    const char *key, *value;      /* a metadata value replaced (or added) */
    const char *reshape;          /* this tensor's shape reversed */
    const char *poison;           /* this tensor's element 3 made NaN */
    bool extra;                   /* a tensor "junk" added */
    bool seal;                    /* digest recomputed (else the file has none) */
} Change;

static void rewrite(const char *dir, const Change *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT);
    StFile f;
    Err e = {0};
    if (!safetensors_read(path, &f, &e)) {
        CHECK(!"readable");
        return;
    }
    int n = f.nentry;
    const char *names[n + 1], *keys[f.nmeta + 1], *values[f.nmeta + 1];
    Tensor t[n + 1];
    for (int i = 0; i < n; i++) {
        const StEntry *en = &f.entry[i];
        CHECK(safetensors_tensor(&f, en, &t[i], &e));
        names[i] = en->name;
        if (c->reshape && strcmp(en->name, c->reshape) == 0)
            for (int d = 0; d < t[i].rank; d++)
                t[i].shape[d] = en->shape[t[i].rank - 1 - d];
        if (c->poison && strcmp(en->name, c->poison) == 0)
            ((float *)t[i].data)[3] = NAN;
    }
    if (c->extra) {
        names[n] = "junk";
        int64_t one = 1;
        CHECK(tensor_alloc(&t[n], DT_F32, 1, &one, &e));
        ((float *)t[n].data)[0] = 0;
        n++;
    }
    int nmeta = 0;
    bool replaced = false;
    for (int i = 0; i < f.nmeta; i++) {
        if (strcmp(f.meta_key[i], SAFETENSORS_DIGEST_KEY) == 0)
            continue;
        bool hit = c->key && strcmp(f.meta_key[i], c->key) == 0;
        keys[nmeta] = f.meta_key[i], values[nmeta++] = hit ? c->value : f.meta_value[i];
        replaced |= hit;
    }
    if (c->key && !replaced)
        keys[nmeta] = c->key, values[nmeta++] = c->value;
    CHECK(c->seal ? safetensors_write_sealed(path, names, t, n, keys, values, nmeta, &e)
                  : safetensors_write(path, names, t, n, keys, values, nmeta, &e));
    for (int i = 0; i < n; i++)
        tensor_free(&t[i]);
    safetensors_free(&f);
}

/* Resuming from dir (after c) fails with a message holding `want`; with --resume-anyway
 * it succeeds when `anyway_ok`. */
static void expect_resume(const char *dir, const Change *c, const char *want, bool anyway_ok)
{
    rewrite(dir, c);
    TrainOptions o = options(dir, 5, true);
    Err e = {0};
    bool ok = train(&o, &e);
    CHECK(!ok && strstr(e.msg, want));
    if (ok || !strstr(e.msg, want))
        fprintf(stderr, "resume: want '%s', got: %s\n", want, ok ? "accepted" : e.msg);
    o.resume_anyway = true;
    Err a = {0};
    ok = train(&o, &a);
    CHECK(ok == anyway_ok);
    if (ok != anyway_ok)
        fprintf(stderr, "resume anyway ('%s'): %s\n", want, ok ? "accepted" : a.msg);
}

/* ---------------------------------------------------------------- the tests */

static void test_sealed_round_trip(void)
{
    const char *dir = saved_dir("round");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT);
    StFile f;
    Err e = {0};
    CHECK(safetensors_read(path, &f, &e));
    char hex[65];
    safetensors_digest(&f, hex);
    const char *sealed = safetensors_meta(&f, SAFETENSORS_DIGEST_KEY);
    CHECK(sealed && strcmp(sealed, hex) == 0);
    safetensors_free(&f);
    TrainOptions o = options(dir, 6, true);
    CHECK(train(&o, &e));
    CHECK(safetensors_read(path, &f, &e) && strcmp(safetensors_meta(&f, "step"), "6") == 0);
    safetensors_free(&f);
}

/* Whether bytes[0..n) would be taken as a checkpoint: well-formed, and its digest matches. */
static bool accepted(const char *bytes, size_t n)
{
    uint8_t *copy = malloc(n);
    memcpy(copy, bytes, n);
    StFile f;
    Err e = {0};
    if (!safetensors_parse(copy, n, "flipped", &f, &e)) /* takes copy over */
        return false;
    char hex[65];
    safetensors_digest(&f, hex);
    const char *sealed = safetensors_meta(&f, SAFETENSORS_DIGEST_KEY);
    bool ok = sealed && strcmp(sealed, hex) == 0;
    safetensors_free(&f);
    return ok;
}

/* A bit flipped in any byte (each bit in turn) is caught; a few of them end to end. */
static void test_bit_flips(void)
{
    const char *dir = saved_dir("flips");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT);
    size_t n;
    char *orig = read_whole(path, &n), *bad = orig ? malloc(n) : NULL;
    int caught = 0;
    for (size_t at = 0; bad && at < n; at++) {
        memcpy(bad, orig, n);
        bad[at] ^= (char)(1 << (at % 8));
        bool took = accepted(bad, n);
        caught += !took;
        if (took)
            fprintf(stderr, "checkpoint byte %zu flipped: accepted\n", at);
    }
    printf("checkpoint bit flips: %d of %zu caught\n", caught, n);
    CHECK(n > 1000 && caught == (int)n);
    for (int trial = 0; bad && trial < 8; trial++) {
        memcpy(bad, orig, n);
        bad[(size_t)rand() % n] ^= (char)(1 << (rand() % 8));
        CHECK(write_whole(path, bad, n));
        TrainOptions o = options(dir, 5, true);
        Err e = {0};
        CHECK(!train(&o, &e) && strstr(e.msg, CKPT));
    }
    free(orig), free(bad);
}

static void test_metadata_ranges(void)
{
    static const struct {
        const char *key, *value;
    } bad[] = {
        {"step", "-100"}, {"step", "abc"}, {"step", "1e20"}, {"step", "9007199254740993"},
        {"step", ""}, {"data_position", "-1"}, {"data_position", "18446744073709551616"},
        {"seed", "0x5"},
    };
    const char *dir = saved_dir("meta");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT);
    size_t n;
    char *orig = read_whole(path, &n);
    for (size_t i = 0; orig && i < sizeof bad / sizeof *bad; i++) {
        char want[128];
        snprintf(want, sizeof want, "metadata \"%s\" is \"%s\"", bad[i].key, bad[i].value);
        CHECK(write_whole(path, orig, n)); /* one bad value at a time */
        Change c = {.key = bad[i].key, .value = bad[i].value, .seal = true};
        expect_resume(dir, &c, want, false);
    }
    free(orig);
}

static void test_same_run(void)
{
    const char *dir = saved_dir("same");
    expect_resume(dir, &(Change){.key = "seed", .value = "6", .seal = true},
                  "--seed 6, this one has --seed 5", true);
    expect_resume(dir, &(Change){.key = "optimizer", .value = "lion", .seal = true},
                  "--optimizer lion, this one has adamw", true);
    expect_resume(dir, &(Change){.key = "coil", .value = "0.0.1", .seal = true},
                  "saved by coil 0.0.1", true);
    expect_resume(dir, &(Change){.seal = false}, "has no checksum", true);
}

/* The parameters of a checkpoint alone, as a weights file. */
static const char *params_only(const char *checkpoint)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/weights.safetensors", root);
    StFile f;
    Err e = {0};
    CHECK(safetensors_read(checkpoint, &f, &e));
    const char *names[f.nentry + 1];
    Tensor t[f.nentry + 1];
    int n = 0;
    for (int i = 0; i < f.nentry; i++)
        if (f.entry[i].name[1] != '.') { /* not m.* or v.* */
            names[n] = f.entry[i].name;
            CHECK(safetensors_tensor(&f, &f.entry[i], &t[n++], &e));
        }
    CHECK(safetensors_write(path, names, t, n, NULL, NULL, 0, &e));
    for (int i = 0; i < n; i++)
        tensor_free(&t[i]);
    safetensors_free(&f);
    return path;
}

static void test_contents(void)
{
    const char *dir = saved_dir("contents");
    /* the same byte count, another shape: accepted before shapes were compared */
    expect_resume(dir, &(Change){.reshape = "fc1.weight", .seal = true},
                  "tensor 'fc1.weight' is f32[32,16], the run's is f32[16,32]", false);
    dir = saved_dir("contents2");
    expect_resume(dir, &(Change){.poison = "fc2.bias", .seal = true},
                  "tensor 'fc2.bias' holds nan at element 3", false);
    dir = saved_dir("contents3");
    expect_resume(dir, &(Change){.poison = "v.fc1.weight", .seal = true},
                  "tensor 'v.fc1.weight' holds nan", false);
    dir = saved_dir("contents4");
    expect_resume(dir, &(Change){.extra = true, .seal = true}, "no use for (junk)", true);
    TrainOptions o = options(NULL, 2, false);
    char path[512];
    snprintf(path, sizeof path, "%s/contents2/%s", root, CKPT);
    o.weights = params_only(path); /* NaN initial weights would only skip every step */
    Err e = {0};
    CHECK(!train(&o, &e) && strstr(e.msg, "holds nan"));
    if (!strstr(e.msg, "holds nan"))
        fprintf(stderr, "NaN weights: %s\n", e.msg);
    o = options(NULL, 2, true);
    snprintf(path, sizeof path, "%s/none", root);
    o.save = path;
    e = (Err){0};
    CHECK(!train(&o, &e) && strstr(e.msg, "no checkpoint to resume from"));
}

/* A learning rate that blows up: an error, and the last good checkpoint untouched. */
static void test_divergence(void)
{
    const char *dir = saved_dir("diverge");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT);
    size_t n0, n1;
    char *before = read_whole(path, &n0);
    TrainOptions o = options(dir, 40, true);
    o.lr.lr = o.lr.min_lr = 1e30;
    Err e = {0};
    CHECK(!train(&o, &e) && strstr(e.msg, "training diverged"));
    char *after = read_whole(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(after);
    /* an infinite step makes the parameters infinite while the loss it reports is still
     * the finite one before the update: the save after it refuses them */
    o.lr.lr = o.lr.min_lr = INFINITY;
    o.save_every = 1;
    e = (Err){0};
    CHECK(!train(&o, &e) && strstr(e.msg, "not saving over the last checkpoint"));
    if (!strstr(e.msg, "not saving"))
        fprintf(stderr, "infinite step: %s\n", e.msg);
    after = read_whole(path, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before), free(after);
    o = options(NULL, 3, false); /* fewer steps than the streak: still an error at the end */
    o.lr.lr = o.lr.min_lr = 1e30;
    e = (Err){0};
    CHECK(!train(&o, &e) && strstr(e.msg, "training diverged"));
    o = options(NULL, 3, false);
    e = (Err){0};
    CHECK(train(&o, &e));
}

/* ---------------------------------------------------------------- two writers */

static pid_t start_writer(const char *coil, const char *dir)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execl(coil, "coil", "train", MODEL, "--dim", "B=4", "--steps", "1000000000", "--save",
              dir, "--save-every", "1", "--log-every", "1000000", "--threads", "1", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Until the lock file names pid (the writer holds the directory), at most a minute. */
static bool wait_for_lock(const char *dir, pid_t pid)
{
    char path[600], want[64];
    snprintf(path, sizeof path, "%s/train.lock", dir);
    snprintf(want, sizeof want, "pid %ld,", (long)pid);
    for (int waited = 0; waited < 600; waited++) {
        size_t n = 0;
        char *text = read_whole(path, &n);
        bool held = text && n < 200 && (text[n] = 0, strstr(text, want) != NULL);
        free(text);
        if (held)
            return true;
        usleep(100 * 1000);
    }
    return false;
}

static void test_two_writers(void)
{
    char coil[4096], dir[512], orphan[600];
    if (!coil_beside_test(coil, sizeof coil)) {
        printf("test_checkpoint: two writers skipped (no coil beside this test)\n");
        return;
    }
    snprintf(dir, sizeof dir, "%s/shared", root);
    pid_t first = start_writer(coil, dir);
    CHECK(wait_for_lock(dir, first));
    char saved[600];
    snprintf(saved, sizeof saved, "%s/%s", dir, CKPT);
    for (int waited = 0; access(saved, F_OK) != 0 && waited < 600; waited++)
        usleep(100 * 1000);
    usleep(300 * 1000); /* writing a checkpoint a step, so a kill may land mid-write */
    /* a leftover in the directory is the live writer's business, not a second one's */
    snprintf(orphan, sizeof orphan, "%s/%s.tmpAbC123", dir, CKPT);
    CHECK(write_whole(orphan, "x", 1));
    TrainOptions o = options(dir, 3, false);
    Err e = {0};
    char want[64];
    snprintf(want, sizeof want, "(pid %ld, started ", (long)first);
    CHECK(!train(&o, &e) && strstr(e.msg, "is in use") && strstr(e.msg, want) &&
          strstr(e.msg, "train.lock"));
    if (!strstr(e.msg, want))
        fprintf(stderr, "second writer: %s\n", e.msg);
    CHECK(access(orphan, F_OK) == 0);
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    /* the kernel released the lock with the killed writer; its leftovers are swept */
    o = options(dir, 0, true); /* resume, then save at once, whatever step it reached */
    o.seed = 0;                 /* the command's default, as the killed run had it */
    e = (Err){0};
    CHECK(train(&o, &e));
    if (!err_ok(&e))
        fprintf(stderr, "after the kill: %s\n", e.msg);
    CHECK(access(orphan, F_OK) != 0 && entries_with(dir, ".tmp") == 0);
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    if (!cpu_codegen_built()) {
        printf("test_checkpoint: skipped (built without COIL_LLVM)\n");
        return check_status();
    }
    Err e = {0};
    model = ir_parse_file(MODEL, &e);
    CHECK(model != NULL);
    if (!model)
        return check_status();
    test_two_writers(); /* first: fork while this process has no threads */
    test_sealed_round_trip();
    test_bit_flips();
    test_metadata_ranges();
    test_same_run();
    test_contents();
    test_divergence();
    graph_free(model);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    return check_status();
}
