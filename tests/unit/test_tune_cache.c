/* test_tune_cache.c — the autotune cache file: choices survive a restart, a bad file is
 * dropped with one warning and then rewritten, concurrent writers lose nothing, and a
 * cache of 100,000 entries loads and answers in well under a second. */
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "codegen/autotune/cache.h"
#include "test_files.h"

static char tmpdir[] = "/tmp/coil_test_tune_cache_XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* tune_cache_open with stderr captured into warn[]. */
static TuneCache *open_capturing(const char *path, char *warn, size_t cap, Err *e)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    dup2(fileno(f), 2);
    TuneCache *c = tune_cache_open(path, e);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(warn, 1, cap - 1, f);
    warn[n] = 0;
    fclose(f);
    return c;
}

static void check_entry(const TuneCache *c, const char *key, const char *choice, double best_s,
                        double default_s)
{
    const TuneEntry *t = tune_cache_get(c, key);
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK_STR(t->choice, choice);
    CHECK(t->best_s == best_s);
    CHECK(t->default_s == default_s);
}

/* Put, save, free, reopen: the same choices and times, in a directory save had to create. */
static void test_restart(void)
{
    Err e = {0};
    const char *path = tmp_path("a/b/autotune.json");
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    TuneCache *c = tune_cache_open(p, &e);
    CHECK(c != NULL && tune_cache_count(c) == 0);
    CHECK(tune_cache_put(c, "cpu|0.1|k1|[4,8]", "tile=32x8", 1.25e-05, 2.5e-05));
    CHECK(tune_cache_put(c, "cpu|0.1|k0|\"quoted\"\\\n", "tile=4", 0.001, 0.002));
    CHECK(tune_cache_put(c, "cpu|0.1|k2", "first", 1, 2));
    CHECK(tune_cache_put(c, "cpu|0.1|k2", "vector=8", 3.5, 4.75)); /* replaces */
    CHECK(tune_cache_put(c, "cpu|0.1|inf", "x", 1, INFINITY));      /* not written */
    CHECK(tune_cache_count(c) == 4);
    CHECK(tune_cache_save(c, &e));
    if (!err_ok(&e))
        fprintf(stderr, "  %s\n", e.msg);
    tune_cache_free(c);

    c = tune_cache_open(p, &e);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_STR(tune_cache_path(c), p);
    CHECK(tune_cache_count(c) == 3);
    check_entry(c, "cpu|0.1|k1|[4,8]", "tile=32x8", 1.25e-05, 2.5e-05);
    check_entry(c, "cpu|0.1|k0|\"quoted\"\\\n", "tile=4", 0.001, 0.002);
    check_entry(c, "cpu|0.1|k2", "vector=8", 3.5, 4.75);
    CHECK(tune_cache_get(c, "cpu|0.1|inf") == NULL);
    CHECK(tune_cache_get(c, "cpu|0.1|k3") == NULL);
    tune_cache_free(c);

    /* Sorted, one entry per line: a header line, three entries, the closing line. */
    char text[1024] = {0};
    FILE *f = fopen(p, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    CHECK(lines == 5);
    CHECK(strstr(text, "k0") && strstr(text, "k1") && strstr(text, "k0") < strstr(text, "k1"));
}

/* Each bad file: opens empty with one warning naming it; put + save make it a cache again. */
static void test_corrupt(void)
{
    unsigned char noise[300];
    unsigned s = 12345;
    for (size_t i = 0; i < sizeof noise; i++) {
        s = s * 1103515245 + 12345;
        noise[i] = (unsigned char)(s >> 16);
    }
    static const char *const bad[] = {
        "",
        "{\"format\": \"coil-autotune-cache\", \"version\": 1, \"entries\": {\n  \"k\": {\"cho",
        "{\"format\": \"something-else\", \"version\": 1, \"entries\": {}}",
        "[1, 2, 3]",
        "{\"format\": \"coil-autotune-cache\", \"version\": 2, \"entries\": {}}",
        "{\"format\": \"coil-autotune-cache\", \"version\": \"1\", \"entries\": {}}",
        "{\"format\": \"coil-autotune-cache\", \"version\": 1, \"entries\": []}",
        "{\"format\": \"coil-autotune-cache\", \"version\": 1, \"entries\": {\n"
        "  \"good\": {\"choice\": \"a\", \"best_s\": 1, \"default_s\": 2},\n"
        "  \"bad\": {\"choice\": 7, \"best_s\": 1, \"default_s\": 2}}}",
        "{\"format\": \"coil-autotune-cache\", \"version\": 1, \"entries\": {\n"
        "  \"k\": {\"choice\": \"a\", \"best_s\": 1}}}",
        NULL, /* the random bytes */
    };
    char path[512], warn[2048];
    snprintf(path, sizeof path, "%s", tmp_path("bad.json"));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i])
            CHECK(write_whole(path, bad[i], strlen(bad[i])));
        else
            CHECK(write_whole(path, noise, sizeof noise));
        Err e = {0};
        TuneCache *c = open_capturing(path, warn, sizeof warn, &e);
        CHECK(c != NULL && err_ok(&e));
        if (!c)
            continue;
        CHECK(tune_cache_count(c) == 0);
        CHECK(strstr(warn, "coil: warning: autotune cache ") == warn);
        CHECK(strstr(warn, path) != NULL);
        CHECK(strstr(warn, ": ignored, it will be rewritten\n") != NULL);
        CHECK(strchr(warn, '\n') == strrchr(warn, '\n')); /* one line */
        CHECK(tune_cache_put(c, "new", "fixed", 0.5, 0.75));
        CHECK(tune_cache_save(c, &e)); /* the save's own re-read warns again; not captured */
        tune_cache_free(c);

        c = open_capturing(path, warn, sizeof warn, &e);
        CHECK(c != NULL && warn[0] == 0);
        if (c) {
            CHECK(tune_cache_count(c) == 1);
            check_entry(c, "new", "fixed", 0.5, 0.75);
            tune_cache_free(c);
        }
    }
}

/* Four processes, 25 saves each, one new key per save: the file ends with all 100. */
static void test_concurrent(void)
{
    enum { NCHILD = 4, NKEY = 25 };
    char path[512], key[64];
    snprintf(path, sizeof path, "%s", tmp_path("shared/autotune.json"));
    pid_t pid[NCHILD];
    for (int k = 0; k < NCHILD; k++) {
        pid[k] = fork();
        if (pid[k] == 0) {
            Err e = {0};
            TuneCache *c = tune_cache_open(path, &e);
            bool ok = c != NULL;
            for (int i = 0; ok && i < NKEY; i++) {
                snprintf(key, sizeof key, "child%d/key%02d", k, i);
                ok = tune_cache_put(c, key, key, k + i / 32.0, 1) && tune_cache_save(c, &e);
            }
            if (!ok)
                fprintf(stderr, "child %d: %s\n", k, e.msg);
            tune_cache_free(c);
            _exit(ok ? 0 : 1);
        }
        CHECK(pid[k] > 0);
    }
    for (int k = 0; k < NCHILD; k++) {
        int status = 0;
        CHECK(pid[k] > 0 && waitpid(pid[k], &status, 0) == pid[k]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    Err e = {0};
    TuneCache *c = tune_cache_open(path, &e);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(tune_cache_count(c) == NCHILD * NKEY);
    for (int k = 0; k < NCHILD; k++)
        for (int i = 0; i < NKEY; i++) {
            snprintf(key, sizeof key, "child%d/key%02d", k, i);
            check_entry(c, key, key, k + i / 32.0, 1);
        }
    tune_cache_free(c);
    CHECK(access(tmp_path("shared/autotune.json.lock"), F_OK) == 0);
}

static void test_default_path(void)
{
    unsetenv("COIL_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    Err e = {0};
    CHECK(tune_cache_default_path() == NULL);
    CHECK(tune_cache_open(NULL, &e) == NULL && !err_ok(&e));
    static const struct { const char *var, *val, *want; } steps[] = {
        {"HOME", "/home/u", "/home/u/.cache/coil/autotune.json"},
        {"XDG_CACHE_HOME", "relative", "/home/u/.cache/coil/autotune.json"},
        {"XDG_CACHE_HOME", "/xdg", "/xdg/coil/autotune.json"},
        {"COIL_CACHE_DIR", "", "/xdg/coil/autotune.json"},
        {"COIL_CACHE_DIR", "rel", "rel/autotune.json"},
        {"COIL_CACHE_DIR", "/x/y", "/x/y/autotune.json"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        setenv(steps[i].var, steps[i].val, 1);
        char *p = (char *)tune_cache_default_path();
        CHECK_STR(p, steps[i].want);
        free(p);
    }
    /* open(NULL) uses it, and save creates the directory. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp_path("dflt"));
    setenv("COIL_CACHE_DIR", dir, 1);
    TuneCache *c = tune_cache_open(NULL, &e);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_STR(tune_cache_path(c), tmp_path("dflt/autotune.json"));
    CHECK(tune_cache_put(c, "k", "v", 1, 2) && tune_cache_save(c, &e));
    CHECK(access(tmp_path("dflt/autotune.json"), R_OK) == 0);
    tune_cache_free(c);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void many_key(char *key, size_t n, int i)
{
    snprintf(key, n, "cpu|0.1|k%08x|[%d,1024]", (unsigned)i * 2654435761u, i % 97);
}

/* 100,000 entries, written in a scrambled order (what another writer might leave): loaded
 * and every key queried (and as many misses) in well under a second, where a sorted array
 * searched linearly took 309 s. A save then writes them sorted by key. */
static void test_many_entries(void)
{
    enum { N = 100000 };
    const char *path = tmp_path("many.json");
    char key[64];
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("{\"format\": \"coil-autotune-cache\", \"version\": 1, \"entries\": {", f);
    for (int i = 0; i < N; i++) {
        int k = (int)(((int64_t)i * 7919) % N); /* 7919 is prime: a permutation */
        many_key(key, sizeof key, k);
        fprintf(f, "%s\n  \"%s\": {\"choice\": \"c%d\", \"best_s\": %d, \"default_s\": 1}",
                i ? "," : "", key, k, k);
    }
    fputs("\n}}\n", f);
    fclose(f);

    char p[512];
    snprintf(p, sizeof p, "%s", path);
    Err e = {0};
    double t0 = now_s();
    TuneCache *c = tune_cache_open(p, &e);
    double load_s = now_s() - t0;
    CHECK(c != NULL && tune_cache_count(c) == N);
    if (!c)
        return;
    t0 = now_s();
    int hits = 0, misses = 0;
    for (int i = 0; i < N; i++) {
        char want[16];
        many_key(key, sizeof key, i);
        const TuneEntry *t = tune_cache_get(c, key);
        snprintf(want, sizeof want, "c%d", i);
        hits += t && strcmp(t->choice, want) == 0 && t->best_s == i;
        key[0] = 'g'; /* "gpu|...": absent */
        misses += tune_cache_get(c, key) == NULL;
    }
    double query_s = now_s() - t0;
    CHECK(hits == N && misses == N);
    printf("autotune cache: %d entries loaded in %.3f s, %d queries in %.3f s\n", N, load_s,
           2 * N, query_s);
    CHECK(load_s + query_s < 1.0 * CHECK_TIME_SCALE);

    CHECK(tune_cache_put(c, "a-first-key", "x", 1, 2));
    t0 = now_s();
    CHECK(tune_cache_save(c, &e));
    printf("autotune cache: saved %d entries in %.3f s\n", N + 1, now_s() - t0);
    tune_cache_free(c);
    f = fopen(path, "r");
    char line[256], prev[256] = "";
    int lines = 0, sorted = 1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "  \"", 3) != 0)
            continue;
        *strchr(line + 3, '"') = 0;
        sorted &= strcmp(prev, line + 3) < 0;
        snprintf(prev, sizeof prev, "%s", line + 3);
        lines++;
    }
    if (f)
        fclose(f);
    CHECK(lines == N + 1 && sorted);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_restart();
    test_corrupt();
    test_concurrent();
    test_default_path();
    test_many_entries();
    nftw(tmpdir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_status();
}
