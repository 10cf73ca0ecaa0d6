/* fuzz_tokens.c — libFuzzer harness for the token-file loader (train/data.c, `coil train
 * --data FILE --token-bytes 1|2|4`): the first two bytes choose the width, B, T and the
 * first batch number, the rest is the file. It opens or is refused with a message; opened,
 * every batch holds tokens below the vocabulary with the targets the tokens shifted by one. */
#include <stdint.h>

#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_files.h"
#include "train/data.h"

#define BATCHES 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int widths[] = {1, 2, 4};
    static char path[512];
    if (size < 2)
        return 0;
    if (!path[0])
        snprintf(path, sizeof path, "%s", fuzz_path("tokens.bin"));
    int width = widths[data[0] % 3];
    int64_t B = 1 + (data[0] >> 2) % 4, T = 1 + data[1] % 16;
    uint64_t first = data[1] >> 4;
    fuzz_write(path, data + 2, size - 2);
    Err e = {0};
    Loader *l = loader_open(path, width, B, T, 7, first, 2, (DataShard){0, 1}, &e);
    if (!l) {
        if (e.msg[0] == 0)
            fuzz_bug("loader_open failed without a message", NULL);
        return 0;
    }
    int64_t vocab = loader_vocab(l);
    if (loader_tokens(l) != (int64_t)(size - 2) / width || loader_tokens(l) < T + 1)
        fuzz_bug("the loader counts the tokens wrong", NULL);
    Tensor x = {0}, y = {0};
    Tensor *out[2] = {&x, &y};
    for (int k = 0; k < BATCHES; k++) {
        if (!loader_take(l, out, &e))
            fuzz_bug("an opened loader cannot make a batch", e.msg);
        if (x.dt != DT_I64 || y.dt != DT_I64 || x.rank != 2 || x.shape[0] != B || x.shape[1] != T ||
            y.rank != 2 || y.shape[0] != B || y.shape[1] != T)
            fuzz_bug("a batch is not two int64 [B, T] tensors", NULL);
        const int64_t *xs = x.data, *ys = y.data;
        for (int64_t i = 0; i < B * T; i++) {
            if (xs[i] < 0 || xs[i] >= vocab || ys[i] < 0 || ys[i] >= vocab)
                fuzz_bug("a token outside [0, vocab)", NULL);
            if (i % T + 1 < T && ys[i] != xs[i + 1])
                fuzz_bug("the targets are not the tokens shifted by one", NULL);
        }
    }
    if (loader_position(l) != first + BATCHES)
        fuzz_bug("the loader's position is not the batches taken", NULL);
    tensor_free(&x);
    tensor_free(&y);
    loader_free(l);
    return 0;
}
