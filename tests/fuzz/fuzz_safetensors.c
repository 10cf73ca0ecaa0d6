/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader: any bytes must be
 * accepted or refused with a message; an accepted file's tensors must all copy out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *bytes = malloc(size ? size : 1); /* safetensors_parse takes ownership */
    if (!bytes)
        return 0;
    memcpy(bytes, data, size);
    StFile f;
    Err e = {0};
    if (!safetensors_parse(bytes, size, "fuzz.safetensors", &f, &e)) {
        if (e.msg[0] == 0)
            __builtin_trap();
        return 0;
    }
    for (int i = 0; i < f.nentry; i++) {
        Tensor t;
        if (safetensors_tensor(&f, &f.entry[i], &t, &e))
            tensor_free(&t);
    }
    safetensors_free(&f);
    return 0;
}
