/* hash.h — FNV-1a 64, the hash coil keys its tables and in-memory caches with (names, JSON
 * keys, CSE, the memo of lowering, the autotune cache, init streams); the code caches on
 * disk key on SHA-256 (base/disk_cache.h). It must stay the same across runs and machines:
 * cache keys and parameter streams depend on it. */
#ifndef COIL_BASE_HASH_H
#define COIL_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_OFFSET UINT64_C(0xcbf29ce484222325)

/* h extended by n bytes at p (start from FNV1A_OFFSET). Fed field by field, a struct's
 * padding never reaches the hash. */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* A NUL-terminated string's hash (the NUL not included). */
static inline uint64_t fnv1a_str(const char *s)
{
    uint64_t h = FNV1A_OFFSET;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

#endif
