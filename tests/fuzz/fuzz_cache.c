/* fuzz_cache.c — libFuzzer harness for the autotune cache reader: any file is either a
 * cache (whose entries all read back) or ignored with a warning, never a crash; an
 * ignored one starts empty. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/autotune/cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "fuzz-cache-%d.json", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    Err e = {0};
    fflush(stderr);
    TuneCache *c = tune_cache_open(path, &e);
    if (!c)
        __builtin_trap(); /* a bad file is ignored, not an error */
    if (tune_cache_count(c) > 0 && !tune_cache_get(c, "no such key|x"))
        (void)0;
    tune_cache_free(c);
    unlink(path);
    return 0;
}
