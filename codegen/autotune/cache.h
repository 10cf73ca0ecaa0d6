/* cache.h — the autotuner's persistent choices: one JSON file mapping a key (the caller's:
 * device, coil version, kernel hash, shapes) to the chosen candidate and its times. */
#ifndef COIL_CODEGEN_AUTOTUNE_CACHE_H
#define COIL_CODEGEN_AUTOTUNE_CACHE_H

#include <stdbool.h>

#include "ir/ir.h"

typedef struct TuneCache TuneCache;
typedef struct TuneEntry { const char *choice; double best_s, default_s; } TuneEntry;

/* The file tune_cache_open(NULL) uses: $COIL_CACHE_DIR/autotune.json, else
 * $XDG_CACHE_HOME/coil/autotune.json, else $HOME/.cache/coil/autotune.json (empty variables
 * count as unset, a relative XDG_CACHE_HOME too, as the XDG spec says). The string is
 * malloc'd: the caller frees it. NULL when none of the three is set, or out of memory. */
const char *tune_cache_default_path(void);

/* Open (the file need not exist). A file that is unreadable as a cache (corrupt JSON,
 * truncated, another format or format version, entries of the wrong shape) is ignored: one
 * warning line on stderr naming the file and why ("coil: warning: autotune cache FILE: ...:
 * ignored, it will be rewritten"), and the cache starts empty. NULL only on out of memory or
 * a path that cannot be used at all, with e set. */
TuneCache *tune_cache_open(const char *path, Err *e);
const char *tune_cache_path(const TuneCache *c);
/* The entry for key, or NULL. Valid until the next put or free (a put of the same key
 * replaces its choice string). */
const TuneEntry *tune_cache_get(const TuneCache *c, const char *key);
/* Add or replace (copies strings). false only on out of memory. Times should be finite:
 * JSON has no inf or NaN, so save leaves out an entry whose times are not. */
bool tune_cache_put(TuneCache *c, const char *key, const char *choice, double best_s, double default_s);
int tune_cache_count(const TuneCache *c);
/* Write it: create the directory if needed, take an exclusive flock on FILE.lock, re-read
 * FILE and merge its entries that this cache does not have (so two processes writing at once
 * lose nothing; this cache's own entries win), write FILE.tmp.PID, fflush + fsync, rename
 * over FILE, unlock. Errors name the file. */
bool tune_cache_save(TuneCache *c, Err *e);
void tune_cache_free(TuneCache *c);

#endif
