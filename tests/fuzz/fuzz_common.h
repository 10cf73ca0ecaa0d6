/* fuzz_common.h — what the fuzz harnesses check about a graph they got: it verifies, and
 * its text form prints, parses back and prints the same. A failure is a bug: trap, so
 * libFuzzer saves the input. COIL_FUZZ_SHALLOW=1 skips these checks (parse only). */
#ifndef COIL_FUZZ_COMMON_H
#define COIL_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static inline void fuzz_bug(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz: %s\n%s\n", what, detail ? detail : "");
    __builtin_trap();
}

static inline int fuzz_shallow(void)
{
    const char *s = getenv("COIL_FUZZ_SHALLOW");
    return s && *s == '1';
}

static inline void fuzz_check_graph(const Graph *g)
{
    Err e = {0};
    if (!ir_verify(g, &e))
        fuzz_bug("a graph that was accepted does not verify", e.msg);
    char *text = ir_print(g);
    if (!text)
        return; /* out of memory: not a bug of the parser */
    Graph *back = ir_parse(text, strlen(text), "printed.cir", &e);
    if (!back)
        fuzz_bug("the printed graph does not parse back", e.msg);
    char *again = ir_print(back);
    if (again && strcmp(text, again) != 0)
        fuzz_bug("print(parse(print(g))) differs from print(g)", again);
    free(again);
    free(text);
    graph_free(back);
}

#endif
