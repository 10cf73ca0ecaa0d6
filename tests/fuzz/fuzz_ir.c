/* fuzz_ir.c — libFuzzer harness for the IR text parser (ir_parse): any bytes must give a
 * graph or an error, never a crash; an accepted graph must verify and round-trip exactly. */
#include <stdint.h>

#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Err e = {0};
    Graph *g = ir_parse((const char *)data, size, "fuzz.cir", &e);
    if (!g && e.msg[0] == 0)
        fuzz_bug("ir_parse failed without a message", NULL);
    if (g && !fuzz_shallow())
        fuzz_check_graph(g);
    graph_free(g);
    return 0;
}
