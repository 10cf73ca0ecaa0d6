/* manager.c — the pass table and the pass manager: `--passes=verify,fold,cse,dce`
 * looks each name up here and runs them in order, each result replacing the graph. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "passes/passes.h"

const Pass pass_table[] = {
    {"verify", pass_verify, "check SSA order, operand counts, attributes and types", NULL, NULL},
    {"fold", pass_fold,
     "evaluate nodes whose operands are all constants (and x*1, x/1, x-0)", NULL, NULL},
    {"cse", pass_cse, "merge nodes computing the same op on the same operands", NULL, NULL},
    {"dce", pass_dce, "remove nodes no output depends on (inputs and params stay)", NULL, NULL},
    {"decompose", pass_decompose,
     "replace composite ops (softmax, attention, ...) by primitives", NULL, NULL},
    {"decompose_fused", pass_decompose_fused,
     "find_attention, then decompose, but keep attention, its training ops and conv whole "
     "(steps on the CPU)",
     NULL, NULL},
    {"decompose_fused_cuda", pass_decompose_fused_cuda,
     "find_attention, then decompose, but keep attention's forward whole, and its training "
     "ops in f16/bf16 at head dims of 16k <= 64 (the GPU's fused kernels)", NULL, NULL},
    {"pad", pass_pad,
     "zero-pad matmul N and K to multiples of 16, slicing the result back", NULL, NULL},
    {"colsum", pass_colsum,
     "a sum over leading axes as a product with a row of ones (a GEMM)", NULL, NULL},
    {"autodiff", pass_autodiff,
     "the joint graph of output 'loss' and grad.<param> of every parameter", NULL, NULL},
    {"precision", NULL, "precision=bf16|f16: matmuls on operands cast to it (autocast)",
     pass_precision_arg, "bf16 or f16"},
    {"remat", NULL, "remat=auto|full: recompute forward values in the backward (a joint graph)",
     pass_remat_arg, "auto or full"},
    {"find_attention", pass_find_attention,
     "softmax(q k^T * c [+ bias]) v written out as ops becomes one attention op", NULL, NULL},
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
    char valid[512] = "";
    size_t used = 0;
    for (int i = 0; i < pass_count && used < sizeof valid; i++)
        used += (size_t)snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "",
                                 pass_table[i].name);
    /* the stages after the passes make a plan and a program, not a graph */
    bool stage = (len == 4 && strncmp(name, "fuse", 4) == 0) ||
                 (len == 5 && strncmp(name, "lower", 5) == 0);
    if (len == 0)
        err_set(e, ERR_USAGE, "--passes: empty pass name; valid passes: %s", valid);
    else if (stage)
        err_set(e, ERR_USAGE, "--passes: '%.*s' is a stage after the passes, not a pass (its "
                "result is no graph): see it with `coil dump --after=%.*s`; valid passes: %s",
                (int)len, name, (int)len, name, valid);
    else
        err_set(e, ERR_USAGE, "--passes: unknown pass '%.*s'; valid passes: %s", (int)len, name,
                valid);
}

/* One entry of a list: the pass and its argument (NAME=ARG), copied out of the list. */
typedef struct PassItem {
    const Pass *pass;
    char arg[32]; /* "" when none */
} PassItem;

/* "NAME" or "NAME=ARG" (len bytes at p) as an item; false (e set) when the name is
 * unknown or the argument is missing, unexpected or too long. */
static bool parse_item(const char *p, size_t len, PassItem *it, Err *e)
{
    const char *eq = memchr(p, '=', len);
    size_t nlen = eq ? (size_t)(eq - p) : len, alen = eq ? len - nlen - 1 : 0;
    it->pass = pass_find(p, nlen);
    if (!it->pass) {
        unknown_pass(p, nlen, e);
        return false;
    }
    const Pass *ps = it->pass;
    if (!eq && !ps->run)
        err_set(e, ERR_USAGE, "--passes: %s needs an argument: %s=ARG, ARG %s", ps->name,
                ps->name, ps->args);
    else if (eq && !ps->run_arg)
        err_set(e, ERR_USAGE, "--passes: %s takes no argument ('%.*s')", ps->name, (int)len, p);
    else if (alen >= sizeof it->arg || (eq && alen == 0))
        err_set(e, ERR_USAGE, "--passes: %.*s: ARG must be %s", (int)len, p, ps->args);
    if (!err_ok(e))
        return false;
    memcpy(it->arg, eq ? eq + 1 : "", alen);
    it->arg[alen] = 0;
    return true;
}

/* Split list at commas into items: their count, or -1 (e set) at the first bad one. */
static int parse_list(const char *list, PassItem *out, int cap, Err *e)
{
    int n = 0;
    if (!*list)
        return 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (n == cap) {
            err_set(e, ERR_USAGE, "--passes: more than %d passes in one list", cap);
            return -1;
        }
        if (!parse_item(p, len, &out[n++], e))
            return -1;
        p += len;
        if (!*p)
            return n;
    }
}

/* Both keep attention whole where its head dims are static (one fused step: the CPU's
 * runtime/cpu/attention.c, the GPU's generated kernel). Autodiff keeps it whole where its
 * backward can be fused (attention_lse, attention_grad): the CPU runs those as steps
 * (runtime/cpu/attention_backward.c), the GPU's list decomposes them. */
const char pass_pipeline[] = "verify,decompose_fused,colsum,fold,cse,dce";
const char pass_pipeline_cuda[] = "verify,decompose_fused_cuda,colsum,fold,cse,dce";

bool run_passes_with(Graph **g, const char *list, PassHook after, void *ctx, Err *e)
{
    PassItem items[128];
    int n = parse_list(list ? list : "", items, 128, e);
    for (int i = 0; i < n; i++) {
        const Pass *pass = items[i].pass;
        const char *arg = items[i].arg;
        double t0 = clock_seconds();
        Graph *next = arg[0] ? pass->run_arg(*g, arg, e) : pass->run(*g, e);
        if (!next)
            return false;
        coil_log(LOG_INFO, "pass %s%s%s on '%s': %.3f ms, %d -> %d nodes", pass->name,
                 arg[0] ? "=" : "", arg, (*g)->name ? (*g)->name : "graph",
                 (clock_seconds() - t0) * 1e3, (*g)->nnode, next->nnode);
        graph_free(*g);
        *g = next;
        if (after && !after(*g, pass, ctx))
            return true;
    }
    return n >= 0;
}

bool run_passes(Graph **g, const char *list, Err *e)
{
    return run_passes_with(g, list, NULL, NULL, e);
}
