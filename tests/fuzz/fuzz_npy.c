/* fuzz_npy.c — libFuzzer harness for the .npy reader (io/npy.c): any bytes are a
 * tensor or an error with a message, never a crash; an accepted tensor holds every byte
 * its header promised, and writes and reads back as the same dtype, shape and bytes. */
#include <stdint.h>

#include "io/npy.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char in[512], out[512];
    if (!in[0]) {
        snprintf(in, sizeof in, "%s", fuzz_path("in.npy"));
        snprintf(out, sizeof out, "%s", fuzz_path("out.npy"));
    }
    fuzz_write(in, data, size);
    Tensor t = {0}, back = {0};
    Err e = {0};
    if (!npy_read(in, &t, &e)) {
        if (e.msg[0] == 0)
            fuzz_bug("npy_read failed without a message", NULL);
        return 0;
    }
    size_t n = tensor_nbytes(&t);
    volatile uint8_t sum = 0; /* every byte of the data must be there (ASan checks) */
    for (size_t i = 0; i < n; i++)
        sum ^= ((const uint8_t *)t.data)[i];
    if (!npy_write(out, &t, &e))
        fuzz_bug("an accepted tensor does not write back", e.msg);
    if (!npy_read(out, &back, &e))
        fuzz_bug("a written tensor does not read back", e.msg);
    if (back.dt != t.dt || back.rank != t.rank ||
        memcmp(back.shape, t.shape, sizeof t.shape[0] * (size_t)t.rank) != 0 ||
        tensor_nbytes(&back) != n || (n && memcmp(back.data, t.data, n) != 0))
        fuzz_bug("the tensor read back differs from the one written", NULL);
    tensor_free(&back);
    tensor_free(&t);
    return 0;
}
