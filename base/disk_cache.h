/* disk_cache.h — content-addressed files that only ever save time: the CPU backend's
 * objects and the CUDA backend's cubins, each under a key (a SHA-256 of everything that
 * determines it). An entry carries its key, length and a SHA-256 of its bytes, so a torn,
 * foreign or corrupted file reads as a miss, never as wrong code; entries are written
 * atomically (two processes writing one key both leave a whole file), and the directory
 * is kept under a size by removing the entries least recently used. */
#ifndef COIL_BASE_DISK_CACHE_H
#define COIL_BASE_DISK_CACHE_H

#include "base/fileio.h"
#include "base/sha256.h"

/* The most a cache directory holds before its least recently used entries go. */
#define DISK_CACHE_LIMIT_BYTES (1024LL << 20)

typedef struct DiskCache {
    char dir[FILEIO_PATH]; /* "": off */
    const char *ext;       /* of its files: "o", "cubin" */
} DiskCache;

/* The cache in `dir` (NULL: $COIL_CACHE_DIR/SUB, else $XDG_CACHE_HOME/coil/SUB, else
 * ~/.cache/coil/SUB; "": off), its entries named KEY.EXT; COIL_CODE_CACHE=0 in the
 * environment turns every such cache off. False when it is off. */
bool disk_cache_open(DiskCache *c, const char *dir, const char *sub, const char *ext);
/* The entry for key: malloc'd bytes in *data and their length; false on a miss (no entry,
 * or one that fails its checks). A hit marks the entry used. */
bool disk_cache_get(const DiskCache *c, const char key[SHA256_HEX], void **data, size_t *n);
/* Keep data[0..n) under key; a cache that cannot be written only costs a later compile,
 * so failures are only logged. */
void disk_cache_put(const DiskCache *c, const char key[SHA256_HEX], const void *data, size_t n);
/* Remove the least recently used entries until the directory holds at most `limit`
 * bytes of them; the number removed. disk_cache_put calls it for about one put in 16. */
int disk_cache_trim(const DiskCache *c, long long limit);

#endif
