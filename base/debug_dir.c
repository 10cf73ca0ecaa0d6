/* debug_dir.c — the numbered stage files of COIL_DEBUG_DIR: one sub-directory per compile,
 * each file written atomically; a failure warns once and never reaches the compile. */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/debug_dir.h"
#include "base/fileio.h"

struct DebugDir {
    char path[FILEIO_PATH];
    int nfile;      /* the next file's number */
    bool broken;    /* a write failed: the rest would too, and warned already */
    double seconds; /* spent writing */
};

/* One warning per process: a full disk would otherwise warn at every stage of every
 * compile. Process-wide, as the stderr it guards is. */
static atomic_bool warned;

static void warn(const Err *e)
{
    if (!atomic_exchange(&warned, true))
        fprintf(stderr, "coil: warning: COIL_DEBUG_DIR: %s (the compile goes on without it)\n",
                e->msg);
}

/* The highest NNN of DIR's NNN-* entries (0: none). */
static int highest_number(const char *dir)
{
    DIR *dp = opendir(dir);
    int most = 0;
    for (struct dirent *de; dp && (de = readdir(dp));) {
        char *end;
        long n = strtol(de->d_name, &end, 10);
        if (end != de->d_name && *end == '-' && n > most && n < 1000000)
            most = (int)n;
    }
    if (dp)
        closedir(dp);
    return most;
}

/* The graph's name as a file name: letters, digits, '-', '_' and '.'; others '_'. */
static void file_name(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s", name && *name ? name : "graph");
    for (char *c = out; *c; c++)
        if (!(('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') || ('0' <= *c && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            *c = '_';
}

/* DIR/NNN-name made by this call: mkdir fails on one another process (or thread) made
 * first, so each takes the next number. */
static bool claim(DebugDir *d, const char *dir, const char *name, Err *e)
{
    char base[128];
    file_name(name, base, sizeof base);
    for (int tries = 0, n = highest_number(dir) + 1; tries < 1000; tries++, n++) {
        snprintf(d->path, sizeof d->path, "%s/%03d-%s", dir, n, base);
        if (mkdir(d->path, 0777) == 0)
            return true;
        if (errno != EEXIST)
            break;
    }
    err_set(e, ERR_INPUT, "%s: cannot create a directory for '%s': %s", dir, base,
            strerror(errno));
    return false;
}

DebugDir *debug_dir_open(const char *graph_name)
{
    const char *dir = getenv("COIL_DEBUG_DIR");
    if (!dir || !*dir)
        return NULL;
    double t0 = clock_seconds();
    Err e = {0};
    DebugDir *d = calloc(1, sizeof *d);
    if (!d)
        err_set(&e, ERR_MEMORY, "out of memory");
    if (!d || !make_dirs(dir, "debug", &e) || !claim(d, dir, graph_name, &e)) {
        warn(&e);
        free(d);
        return NULL;
    }
    d->seconds = clock_seconds() - t0;
    return d;
}

void debug_dir_close(DebugDir *d) { free(d); }

const char *debug_dir_path(const DebugDir *d) { return d ? d->path : ""; }

double debug_dir_seconds(const DebugDir *d) { return d ? d->seconds : 0; }

/* DIR/NNN-graph/NN-stage.ext */
static void stage_path(const DebugDir *d, int number, const char *stage, const char *ext,
                       char *out, size_t n)
{
    snprintf(out, n, "%s/%02d-%s.%s", d->path, number, stage, ext);
}

/* The number a write takes (the next when number < 0); -1 once broken. */
static int take_number(DebugDir *d, int number)
{
    if (!d || d->broken)
        return -1;
    return number >= 0 ? number : d->nfile++;
}

static int finish(DebugDir *d, int number, bool ok, const Err *e, double t0)
{
    d->seconds += clock_seconds() - t0;
    if (ok)
        return number;
    d->broken = true;
    warn(e);
    return -1;
}

int debug_dir_text(DebugDir *d, const char *stage, const char *ext, char *text)
{
    int number = take_number(d, -1);
    if (number < 0) {
        free(text);
        return -1;
    }
    double t0 = clock_seconds();
    char path[FILEIO_PATH + 256];
    Err e = {0};
    stage_path(d, number, stage, ext, path, sizeof path);
    bool ok = text && file_write_atomic(path, text, strlen(text), &e);
    if (!text)
        err_set(&e, ERR_MEMORY, "out of memory writing %s", path);
    free(text);
    return finish(d, number, ok, &e, t0);
}

int debug_dir_file(DebugDir *d, int number, const char *stage, const char *ext, DebugWriteFn fn,
                   const void *ctx)
{
    number = take_number(d, number);
    if (number < 0)
        return -1;
    double t0 = clock_seconds();
    char path[FILEIO_PATH + 256];
    Err e = {0};
    AtomicFile af;
    stage_path(d, number, stage, ext, path, sizeof path);
    bool ok = atomic_open(&af, path, &e);
    if (ok)
        ok = atomic_close(&af, fn(af.f, ctx), &e);
    if (!ok && err_ok(&e))
        err_set(&e, ERR_INPUT, "%s: cannot write", path);
    return finish(d, number, ok, &e, t0);
}
