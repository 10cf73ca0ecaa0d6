/* fuzz_cache.c — libFuzzer harness for the autotune cache reader: any file is either a
 * cache (whose entries all read back) or ignored with a warning, never a crash; an
 * ignored one starts empty. The warning is coil's design, so it is silenced here. */
#include <stdint.h>

#include "codegen/autotune/cache.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path("autotune-cache.json");
    fuzz_write(path, data, size);
    Err e = {0};
    fuzz_stderr_quiet();
    TuneCache *c = tune_cache_open(path, &e);
    fuzz_stderr_restore();
    if (!c)
        __builtin_trap(); /* a bad file is ignored, not an error */
    if (tune_cache_count(c) > 0 && !tune_cache_get(c, "no such key|x"))
        (void)0;
    tune_cache_free(c);
    return 0;
}
