/* cache.c — the autotune cache file: read strictly (anything odd is dropped with a warning,
 * since a cache only saves time), written atomically under a lock so processes merge. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/hash.h"
#include "base/json.h"
#include "codegen/autotune/cache.h"

#define CACHE_FORMAT "coil-autotune-cache"
#define CACHE_VERSION 1
#define CACHE_MAX_BYTES (64 << 20) /* a few hundred entries are ~100 KiB; refuse absurd files */

/* Slots are allocated one by one so a TuneEntry pointer survives the array growing. */
typedef struct Slot {
    TuneEntry e;
    char key[]; /* NUL-terminated */
} Slot;

/* Slots in the order they were added, found through a hash table of their indices: a
 * cache of any size is loaded and queried in time linear in its entries. The file is
 * written sorted by key. */
struct TuneCache {
    char *path;
    Slot **slot;
    int n, cap;
    int *index;  /* slot indices by key hash, -1 empty; never more than half full */
    int nindex;  /* a power of two */
};

const char *tune_cache_default_path(void)
{
    const char *dir = getenv("COIL_CACHE_DIR"), *suffix = "/autotune.json";
    if (!dir || !*dir) {
        dir = getenv("XDG_CACHE_HOME"), suffix = "/coil/autotune.json";
        if (!dir || dir[0] != '/') /* the XDG spec: an empty or relative value is ignored */
            dir = getenv("HOME"), suffix = "/.cache/coil/autotune.json";
    }
    if (!dir || !*dir)
        return NULL;
    size_t n = strlen(dir) + strlen(suffix) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s", dir, suffix);
    return p;
}

const char *tune_cache_path(const TuneCache *c) { return c->path; }
int tune_cache_count(const TuneCache *c) { return c->n; }

static uint64_t key_hash(const char *k)
{
    return fnv1a_str(k);
}

/* The index table's position of key: where its slot's index is, or the empty entry
 * where it would go. */
static size_t position(const TuneCache *c, const char *key)
{
    size_t mask = (size_t)c->nindex - 1, at = key_hash(key) & mask;
    while (c->index[at] >= 0 && strcmp(c->slot[c->index[at]]->key, key) != 0)
        at = (at + 1) & mask;
    return at;
}

static Slot *find(const TuneCache *c, const char *key)
{
    int i = c->nindex ? c->index[position(c, key)] : -1;
    return i >= 0 ? c->slot[i] : NULL;
}

/* Twice the index table (16 at first), every slot placed again. */
static bool grow_index(TuneCache *c)
{
    int n = c->nindex ? 2 * c->nindex : 16;
    int *index = malloc((size_t)n * sizeof *index);
    if (!index)
        return false;
    memset(index, -1, (size_t)n * sizeof *index);
    free(c->index);
    c->index = index;
    c->nindex = n;
    for (int i = 0; i < c->n; i++)
        c->index[position(c, c->slot[i]->key)] = i;
    return true;
}

const TuneEntry *tune_cache_get(const TuneCache *c, const char *key)
{
    const Slot *s = find(c, key);
    return s ? &s->e : NULL;
}

/* key's slot, made (with no choice yet) when absent; NULL on out of memory. */
static Slot *slot_for(TuneCache *c, const char *key)
{
    Slot *found = find(c, key);
    if (found)
        return found;
    if (2 * (c->n + 1) > c->nindex && !grow_index(c))
        return NULL;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        Slot **grown = realloc(c->slot, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        c->slot = grown;
        c->cap = cap;
    }
    Slot *s = calloc(1, sizeof *s + strlen(key) + 1);
    if (!s)
        return NULL;
    strcpy(s->key, key);
    c->index[position(c, key)] = c->n;
    c->slot[c->n++] = s;
    return s;
}

bool tune_cache_put(TuneCache *c, const char *key, const char *choice, double best_s, double default_s)
{
    char *ch = strdup(choice);
    Slot *s = ch ? slot_for(c, key) : NULL;
    if (!s) {
        free(ch);
        return false;
    }
    free((char *)s->e.choice);
    s->e = (TuneEntry){ch, best_s, default_s};
    return true;
}

/* The file's text, NUL-terminated (caller frees); NULL with why set when it cannot be read,
 * and *missing too when it does not exist (an empty cache, not a problem). A short read
 * needs no check of its own: it fails to parse like any truncated file. */
static char *slurp(const char *path, size_t *len, bool *missing, Err *why)
{
    FILE *f = fopen(path, "rb");
    *missing = !f && errno == ENOENT;
    struct stat st;
    char *text = NULL;
    if (!f)
        err_set(why, ERR_INPUT, "%s: %s", path, strerror(errno));
    else if (fstat(fileno(f), &st) != 0 || st.st_size > CACHE_MAX_BYTES)
        err_set(why, ERR_INPUT, "%s: not a file of a cache's size", path);
    else if (!(text = malloc((size_t)st.st_size + 1)))
        err_set(why, ERR_MEMORY, "%s: out of memory", path);
    else {
        *len = fread(text, 1, (size_t)st.st_size, f);
        text[*len] = 0;
    }
    if (f)
        fclose(f);
    return text;
}

static bool is(const Json *j, JsonKind k) { return j && j->kind == k; }

/* The document's "entries" when it is a cache of this format and version, else NULL. */
static const Json *check_doc(const Json *doc, const char *path, Err *why)
{
    const Json *fmt = json_get(doc, "format"), *ver = json_get(doc, "version");
    const Json *ent = json_get(doc, "entries");
    if (!is(fmt, JSON_STRING) || strcmp(fmt->s, CACHE_FORMAT) != 0)
        err_set(why, ERR_INPUT, "%s: not {\"format\": \"" CACHE_FORMAT "\", ...}, another file", path);
    else if (!is(ver, JSON_NUMBER) || !ver->is_int || ver->i != CACHE_VERSION)
        err_set(why, ERR_INPUT, "%s: \"version\" is not %d, another format version", path, CACHE_VERSION);
    else if (!is(ent, JSON_OBJECT))
        err_set(why, ERR_INPUT, "%s: \"entries\" is not an object", path);
    for (int i = 0; err_ok(why) && i < ent->n; i++) {
        const Json *v = &ent->item[i];
        if (!is(json_get(v, "choice"), JSON_STRING) || !is(json_get(v, "best_s"), JSON_NUMBER) ||
            !is(json_get(v, "default_s"), JSON_NUMBER))
            err_set(why, ERR_INPUT, "%s: entry \"%s\" is not {\"choice\": STRING, \"best_s\": "
                    "NUMBER, \"default_s\": NUMBER}", path, ent->key[i]);
    }
    return err_ok(why) ? ent : NULL;
}

/* Add the file's entries that c lacks. A missing file is an empty cache; one that is not a
 * cache is warned about and counts as empty (the next save replaces it). The whole file is
 * checked before any entry is taken, so a bad file adds nothing. false only on out of memory. */
static bool merge_file(TuneCache *c)
{
    Err why = {0};
    size_t len = 0;
    bool missing;
    char *text = slurp(c->path, &len, &missing, &why);
    Arena *a = arena_new();
    const Json *doc = text ? json_parse(a, text, len, c->path, &why) : NULL;
    const Json *ent = doc ? check_doc(doc, c->path, &why) : NULL;
    if (!ent && !missing)
        fprintf(stderr, "coil: warning: autotune cache %s: ignored, it will be rewritten\n", why.msg);
    bool ok = true;
    for (int i = 0; ent && ok && i < ent->n; i++) {
        const Json *v = &ent->item[i];
        if (!tune_cache_get(c, ent->key[i]))
            ok = tune_cache_put(c, ent->key[i], json_get(v, "choice")->s, json_get(v, "best_s")->num,
                                json_get(v, "default_s")->num);
    }
    arena_free(a);
    free(text);
    return ok;
}

TuneCache *tune_cache_open(const char *path, Err *e)
{
    char *own = path ? strdup(path) : (char *)tune_cache_default_path();
    bool usable = own && *own && strlen(own) < PATH_MAX;
    TuneCache *c = usable ? calloc(1, sizeof *c) : NULL;
    if (c && (c->path = own) && merge_file(c))
        return c;
    if (!path && !own)
        err_set(e, ERR_INPUT, "autotune cache: nowhere to keep it: set COIL_CACHE_DIR or HOME");
    else if (own && !usable)
        err_set(e, ERR_USAGE, "autotune cache \"%.64s\": the path is empty or too long", own);
    else
        err_set(e, ERR_MEMORY, "autotune cache %s: out of memory", path ? path : own);
    c ? tune_cache_free(c) : free(own);
    return NULL;
}

/* mkdir -p of the directory holding the cache file. */
static bool make_parents(const TuneCache *c, Err *e)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", c->path);
    char *slash = strrchr(p, '/');
    if (!slash || slash == p)
        return true;
    *slash = 0;
    return make_dirs(p, "autotune cache", e);
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(Slot *const *)a)->key, (*(Slot *const *)b)->key);
}

/* Sorted by key, one entry per line, so a person can read and diff it. Entries whose times
 * are not finite are left out: JSON cannot spell them, and one would spoil the whole file.
 * false when out of memory for the sorting. */
static bool write_entries(const TuneCache *c, FILE *f)
{
    Slot **sorted = malloc(((size_t)c->n + 1) * sizeof *sorted);
    if (!sorted)
        return false;
    memcpy(sorted, c->slot, (size_t)c->n * sizeof *sorted);
    qsort(sorted, (size_t)c->n, sizeof *sorted, by_key);
    fprintf(f, "{\"format\": \"%s\", \"version\": %d, \"entries\": {", CACHE_FORMAT, CACHE_VERSION);
    const char *sep = "\n";
    for (int i = 0; i < c->n; i++) {
        const Slot *s = sorted[i];
        if (!isfinite(s->e.best_s) || !isfinite(s->e.default_s))
            continue;
        fprintf(f, "%s  ", sep);
        json_write_string(f, s->key);
        fputs(": {\"choice\": ", f);
        json_write_string(f, s->e.choice);
        fprintf(f, ", \"best_s\": %.9g, \"default_s\": %.9g}", s->e.best_s, s->e.default_s);
        sep = ",\n";
    }
    fputs(*sep == ',' ? "\n}}\n" : "}}\n", f);
    free(sorted);
    return true;
}

/* Under the lock: merge what is on disk, then write the file whole (base/fileio.h). */
static bool save_locked(TuneCache *c, Err *e)
{
    if (!merge_file(c)) {
        err_set(e, ERR_MEMORY, "autotune cache %s: out of memory", c->path);
        return false;
    }
    AtomicFile af;
    return atomic_open(&af, c->path, e) && atomic_close(&af, write_entries(c, af.f), e);
}

bool tune_cache_save(TuneCache *c, Err *e)
{
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s.lock", c->path);
    if (!make_parents(c, e))
        return false;
    /* The lock file stays: removing it would let a waiter lock an inode no one else sees. */
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666), r = -1;
    while (fd >= 0 && (r = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (r != 0)
        err_set(e, ERR_INPUT, "autotune cache %s: cannot lock %s: %s", c->path, lock, strerror(errno));
    bool ok = r == 0 && save_locked(c, e);
    if (fd >= 0)
        close(fd); /* releases the flock */
    return ok;
}

void tune_cache_free(TuneCache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free((char *)c->slot[i]->e.choice);
        free(c->slot[i]);
    }
    free(c->slot);
    free(c->index);
    free(c->path);
    free(c);
}
