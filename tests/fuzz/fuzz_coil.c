/* fuzz_coil.c — libFuzzer harness for the .coil frontend (lexer, parser, checks, lowering):
 * any bytes must give a graph or an error, never a crash, a leak or undefined behaviour;
 * an accepted model must lower to a graph that verifies and round-trips as IR text. */
#include <stdint.h>

#include "frontend/to_graph.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Err e = {0};
    FeOptions o = {0};
    /* Includes resolve next to this name: the run directory, where run.sh puts nothing. */
    Graph *g = coil_frontend_compile("fuzz.coil", (const char *)data, size, &o, &e);
    if (!g && e.msg[0] == 0)
        fuzz_bug("the frontend failed without a message", NULL);
    bool accepted = g != NULL;
    if (g && !fuzz_shallow())
        fuzz_check_graph(g);
    graph_free(g);
    /* Training mode lowers dropout differently: exercise it when it can matter. */
    if (accepted && memmem(data, size, "dropout", 7)) {
        o.training = true;
        o.seed = 7;
        e = (Err){0};
        g = coil_frontend_compile("fuzz.coil", (const char *)data, size, &o, &e);
        if (g && !fuzz_shallow())
            fuzz_check_graph(g);
        graph_free(g);
    }
    return 0;
}
