/* fuzz_onnx.c — libFuzzer harness for the ONNX importer (frontend/onnx*.c): any bytes as a
 * model.onnx are a graph or an error with a message, never a crash; an accepted graph
 * verifies and its text form reads back the same (fuzz_common.h). External data resolves
 * in the harness's own directory, where nothing but the model is. The seeds are the
 * repository's .onnx files (run.sh); libFuzzer's -max_len keeps their first 8 KiB. */
#include <stdint.h>

#include "frontend/onnx.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0])
        snprintf(path, sizeof path, "%s", fuzz_path("model.onnx"));
    fuzz_write(path, data, size);
    ModelOptions opt = {0};
    Err e = {0};
    Graph *g = onnx_load(path, &opt, &e);
    if (!g) {
        if (e.msg[0] == 0)
            fuzz_bug("onnx_load failed without a message", NULL);
        return 0;
    }
    if (!fuzz_shallow())
        fuzz_check_graph(g);
    graph_free(g);
    return 0;
}
