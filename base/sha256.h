/* sha256.h — SHA-256 (FIPS 180-4) for the checksums coil writes beside what it may later
 * load: the files of a package, the contents of a checkpoint. Streaming and reentrant. */
#ifndef COIL_RUNTIME_SHA256_H
#define COIL_RUNTIME_SHA256_H

#include "base/base.h"

#define SHA256_HEX 65 /* 64 hex digits and a NUL */

typedef struct Sha256 {
    uint32_t h[8];       /* the chaining state */
    uint64_t bytes;      /* message length so far */
    uint8_t block[64];   /* a partial block */
    size_t nblock;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
/* The digest as 64 lowercase hex digits; s is spent afterwards. */
void sha256_hex(Sha256 *s, char hex[SHA256_HEX]);
/* The digest of data[0..n) in one call. */
void sha256_of(const void *data, size_t n, char hex[SHA256_HEX]);
/* The digest of a regular file and its size; errors name the path. */
bool sha256_file(const char *path, char hex[SHA256_HEX], int64_t *bytes, Err *e);
/* Whether s is 64 lowercase hex digits, as sha256_hex writes. */
bool sha256_is_hex(const char *s);

#endif
