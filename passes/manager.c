/* manager.c — the pass table and the pass manager: `--passes=verify,fold,cse,dce`
 * looks each name up here and runs them in order, each result replacing the graph. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "passes/passes.h"

const Pass pass_table[] = {
    {"verify", pass_verify, "check SSA order, operand counts, attributes and types"},
    {"fold", pass_fold, "evaluate nodes whose operands are all constants (and x*1, x/1, x-0)"},
    {"cse", pass_cse, "merge nodes computing the same op on the same operands"},
    {"dce", pass_dce, "remove nodes no output depends on (inputs and params stay)"},
    {"decompose", pass_decompose, "replace composite ops (softmax, attention, ...) by primitives"},
    {"decompose_fused", pass_decompose_fused,
     "decompose, but keep attention whole (for the CUDA backend's fused kernel)"},
    {"pad", pass_pad, "zero-pad matmul N and K to multiples of 16, slicing the result back"},
    {"colsum", pass_colsum, "a sum over leading axes as a product with a row of ones (a GEMM)"},
    {"autodiff", pass_autodiff, "the joint graph of output 'loss' and grad.<param> of every parameter"},
};
const int pass_count = (int)(sizeof pass_table / sizeof pass_table[0]);

const Pass *pass_find(const char *name, size_t len)
{
    for (int i = 0; i < pass_count; i++)
        if (strlen(pass_table[i].name) == len && memcmp(pass_table[i].name, name, len) == 0)
            return &pass_table[i];
    return NULL;
}

static void unknown_pass(const char *name, size_t len, Err *e)
{
    char valid[256] = "";
    size_t used = 0;
    for (int i = 0; i < pass_count && used < sizeof valid; i++)
        used += (size_t)snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "",
                                 pass_table[i].name);
    if (len == 0)
        err_set(e, ERR_USAGE, "--passes: empty pass name; valid passes: %s", valid);
    else
        err_set(e, ERR_USAGE, "--passes: unknown pass '%.*s'; valid passes: %s", (int)len, name,
                valid);
}

/* Split list at commas into passes: their count, or -1 (e set) at the first unknown name. */
static int parse_list(const char *list, const Pass **out, int cap, Err *e)
{
    int n = 0;
    if (!*list)
        return 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        const Pass *pass = pass_find(p, len);
        if (!pass) {
            unknown_pass(p, len, e);
            return -1;
        }
        if (n == cap) {
            err_set(e, ERR_USAGE, "--passes: more than %d passes in one list", cap);
            return -1;
        }
        out[n++] = pass;
        p += len;
        if (!*p)
            return n;
    }
}

const char pass_pipeline[] = "verify,decompose,colsum,fold,cse,dce";
const char pass_pipeline_cuda[] = "verify,decompose_fused,colsum,fold,cse,dce";

bool run_passes_with(Graph **g, const char *list, PassHook after, void *ctx, Err *e)
{
    const Pass *todo[256];
    int n = parse_list(list ? list : "", todo, 256, e);
    for (int i = 0; i < n; i++) {
        double t0 = clock_seconds();
        Graph *next = todo[i]->run(*g, e);
        if (!next)
            return false;
        coil_log(LOG_INFO, "pass %s on '%s': %.3f ms, %d -> %d nodes", todo[i]->name,
                 (*g)->name ? (*g)->name : "graph", (clock_seconds() - t0) * 1e3, (*g)->nnode,
                 next->nnode);
        graph_free(*g);
        *g = next;
        if (after && !after(*g, todo[i], ctx))
            return true;
    }
    return n >= 0;
}

bool run_passes(Graph **g, const char *list, Err *e)
{
    return run_passes_with(g, list, NULL, NULL, e);
}
