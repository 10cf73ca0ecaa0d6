/* test_files.h — whole files in and out, for tests that corrupt, compare or plant files. */
#ifndef COIL_TEST_FILES_H
#define COIL_TEST_FILES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* path's bytes, malloc'd and NUL-terminated (text tests read them as a string), their
 * count in *n; NULL when it cannot be read. */
static inline char *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *buf = size >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)size + 1) : NULL;
    *n = buf ? fread(buf, 1, (size_t)size, f) : 0;
    if (buf)
        buf[*n] = 0;
    if (f)
        fclose(f);
    return buf;
}

/* data[0..n) as path; false when any of it could not be written. */
static inline bool write_whole(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    return f ? fclose(f) == 0 && ok : false;
}

#endif
