/* loop.c — the loop IR's small shared helpers: freeing a program, sizing a Dim. */
#include <stdlib.h>

#include "codegen/loop.h"

void program_free(Program *p)
{
    if (!p)
        return;
    arena_free(p->arena);
    free(p);
}

int64_t dim_value(Dim d, const SymBind *sb)
{
    int64_t v = d.k;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if (d.syms >> s & 1)
            v *= sb->val[s];
    return v;
}
