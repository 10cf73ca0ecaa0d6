/* disk_cache.c — content-addressed cache files (disk_cache.h). An entry is a text header
 * and the bytes:
 *
 *     coil-cache 1\n KEY\n LENGTH\n SHA256-OF-THE-BYTES\n BYTES
 *
 * read back whole and checked line by line, so a file some other program or a crash
 * left under the name is a miss. The modification time is the last use (a hit touches
 * it), which trimming orders by. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/disk_cache.h"
#include "base/log.h"

#define MAGIC "coil-cache 1\n"
#define HEADER_MAX 192 /* the magic, a key, a length and a digest, with their newlines */

bool disk_cache_open(DiskCache *c, const char *dir, const char *sub, const char *ext)
{
    const char *env;
    c->ext = ext;
    c->dir[0] = 0;
    if ((env = getenv("COIL_CODE_CACHE")) && strcmp(env, "0") == 0)
        return false;
    if (dir)
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    else if ((env = getenv("COIL_CACHE_DIR")) && *env)
        snprintf(c->dir, sizeof c->dir, "%s/%s", env, sub);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env)
        snprintf(c->dir, sizeof c->dir, "%s/coil/%s", env, sub);
    else if ((env = getenv("HOME")) && *env)
        snprintf(c->dir, sizeof c->dir, "%s/.cache/coil/%s", env, sub);
    Err e = {0};
    if (c->dir[0] && !make_dirs(c->dir, "cache", &e)) { /* only slower: said, not an error */
        coil_log(LOG_INFO, "%s: not cached", e.msg);
        c->dir[0] = 0;
    }
    return c->dir[0] != 0;
}

static void entry_path(const DiskCache *c, const char *key, char *path, size_t n)
{
    snprintf(path, n, "%.4000s/%.64s.%s", c->dir, key, c->ext);
}

/* The whole file, malloc'd, or NULL. */
static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    char *data = fstat(fileno(f), &st) == 0 && st.st_size > 0 ? malloc((size_t)st.st_size) : NULL;
    bool ok = data && fread(data, 1, (size_t)st.st_size, f) == (size_t)st.st_size;
    fclose(f);
    if (!ok) {
        free(data);
        return NULL;
    }
    *n = (size_t)st.st_size;
    return data;
}

/* The header's length when file[0..n) is a whole entry for key, else 0: the magic, the
 * key, the length in decimal and the digest, each line exactly so. */
static size_t check_entry(const char *file, size_t n, const char *key)
{
    size_t m = strlen(MAGIC), at = m + 65;
    if (n < at || memcmp(file, MAGIC, m) != 0 || memcmp(file + m, key, 64) != 0 ||
        file[m + 64] != '\n')
        return 0;
    unsigned long long length = 0;
    size_t digits = 0;
    for (; at < n && file[at] >= '0' && file[at] <= '9' && digits < 19; at++, digits++)
        length = length * 10 + (unsigned long long)(file[at] - '0');
    if (digits == 0 || at >= n || file[at++] != '\n' || n - at < 65 || file[at + 64] != '\n')
        return 0;
    char want[SHA256_HEX], got[SHA256_HEX];
    memcpy(want, file + at, 64);
    want[64] = 0;
    at += 65;
    if (n - at != length)
        return 0;
    sha256_of(file + at, (size_t)length, got);
    return strcmp(got, want) == 0 ? at : 0;
}

bool disk_cache_get(const DiskCache *c, const char key[SHA256_HEX], void **data, size_t *n)
{
    if (!c->dir[0])
        return false;
    char path[FILEIO_PATH + 128];
    entry_path(c, key, path, sizeof path);
    size_t size = 0;
    char *file = read_all(path, &size);
    size_t start = file ? check_entry(file, size, key) : 0;
    if (!start) {
        if (file)
            coil_log(LOG_INFO, "cache %s: fails its checks, compiled again", path);
        free(file);
        return false;
    }
    memmove(file, file + start, size - start);
    *data = file;
    *n = size - start;
    utimensat(AT_FDCWD, path, NULL, 0); /* used now: trimmed last */
    return true;
}

void disk_cache_put(const DiskCache *c, const char key[SHA256_HEX], const void *data, size_t n)
{
    if (!c->dir[0])
        return;
    char path[FILEIO_PATH + 128], header[HEADER_MAX], sum[SHA256_HEX];
    entry_path(c, key, path, sizeof path);
    sha256_of(data, n, sum);
    int h = snprintf(header, sizeof header, MAGIC "%s\n%zu\n%s\n", key, n, sum);
    AtomicFile af;
    Err e = {0};
    if (!atomic_open(&af, path, &e)) {
        coil_log(LOG_INFO, "cache: %s", e.msg);
        return;
    }
    bool written = fwrite(header, 1, (size_t)h, af.f) == (size_t)h &&
                   fwrite(data, 1, n, af.f) == n;
    if (!atomic_close(&af, written, &e))
        coil_log(LOG_INFO, "cache: %s", e.msg);
    if (key[0] == '0') /* about one put in 16 */
        disk_cache_trim(c, DISK_CACHE_LIMIT_BYTES);
}

/* ---------------------------------------------------------------- trimming */

typedef struct Entry {
    char name[96];
    long long bytes;
    struct timespec used;
} Entry;

static int by_last_use(const void *a, const void *b)
{
    const struct timespec *x = &((const Entry *)a)->used, *y = &((const Entry *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* The entries of c (KEY.EXT, 64 hex digits), their sizes added into *total. */
static Entry *list_entries(const DiskCache *c, int *count, long long *total)
{
    DIR *d = opendir(c->dir);
    Entry *list = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    char path[FILEIO_PATH + 128];
    while (d && (de = readdir(d))) {
        const char *dot = strchr(de->d_name, '.');
        struct stat st;
        if (!dot || dot - de->d_name != 64 || strcmp(dot + 1, c->ext) != 0)
            continue;
        snprintf(path, sizeof path, "%.4000s/%.100s", c->dir, de->d_name);
        if (stat(path, &st) != 0)
            continue;
        if (n == cap) {
            Entry *more = realloc(list, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *list);
            if (!more)
                break;
            list = more;
        }
        snprintf(list[n].name, sizeof list[n].name, "%.90s", de->d_name);
        list[n].bytes = (long long)st.st_size;
        list[n++].used = st.st_mtim;
        *total += (long long)st.st_size;
    }
    if (d)
        closedir(d);
    *count = n;
    return list;
}

int disk_cache_trim(const DiskCache *c, long long limit)
{
    int n = 0, removed = 0;
    long long total = 0;
    Entry *list = c->dir[0] ? list_entries(c, &n, &total) : NULL;
    if (total > limit)
        qsort(list, (size_t)n, sizeof *list, by_last_use);
    char path[FILEIO_PATH + 128];
    for (int i = 0; i < n && total > limit; i++) {
        snprintf(path, sizeof path, "%.4000s/%s", c->dir, list[i].name);
        if (unlink(path) == 0)
            total -= list[i].bytes, removed++;
    }
    free(list);
    if (removed)
        coil_log(LOG_INFO, "cache %s: %d least recently used entries removed", c->dir, removed);
    return removed;
}
