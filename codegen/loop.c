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

int64_t dim_value(Dim d, const SymBind *sb) { return dim_eval(d, sb->val); }

bool kernel_adds(const Kernel *k)
{
    for (int s = 0; s < k->nstmt; s++)
        if (k->stmt[s].kind == ST_STORE && k->stmt[s].add)
            return true;
    return false;
}

bool program_check_inputs(const Program *p, const Tensor *inputs, const SymBind *sb, Err *e)
{
    for (int c = 0; c < p->ncheck; c++) {
        const Buffer *buf = &p->buf[p->check[c].buf];
        const Tensor *t = &inputs[buf->index];
        int64_t bound = dim_value(p->check[c].bound, sb), n = tensor_numel(t);
        for (int64_t i = 0; i < n; i++) {
            double v = dtype_load(t->dt, t->data, i);
            if (v >= 0 && v < (double)bound)
                continue;
            err_set(e, ERR_INPUT, "input '%s': element %lld is %.0f, outside [0, %lld): it "
                    "indexes a table of %lld rows", buf->name, (long long)i, v, (long long)bound,
                    (long long)bound);
            return false;
        }
    }
    return true;
}
