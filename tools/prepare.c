/* prepare.c — a model made ready to run for `coil run` and `coil bench`: loaded (a model
 * file, or a package directory written by `coil compile`), its symbols sized, inputs read
 * from .npy files or drawn from the seed, parameters loaded or initialised. */
#include <stdlib.h>
#include <string.h>

#include "io/npy.h"
#include "io/package.h"
#include "io/safetensors.h"
#include "tools/cli.h"

void prepared_free(Prepared *r)
{
    for (int i = 0; r->g && i < r->g->ninput && r->inputs; i++)
        tensor_free(&r->inputs[i]);
    for (int i = 0; r->params && i < r->nparam; i++)
        tensor_free(&r->params[i]);
    free(r->inputs);
    free(r->params);
    free(r->given);
    graph_free(r->g);
    memset(r, 0, sizeof *r);
}

static bool alloc_tables(Prepared *r, Err *e)
{
    int n = r->g->ninput + 1, np = graph_params(r->g, NULL) + 1;
    r->nparam = np - 1;
    r->inputs = calloc((size_t)n, sizeof(Tensor));
    r->given = calloc((size_t)n, sizeof(bool));
    r->params = calloc((size_t)np, sizeof(Tensor));
    if (r->inputs && r->given && r->params)
        return true;
    err_set(e, ERR_MEMORY, "out of memory");
    return false;
}

static int find_input(const Graph *g, const char *name, size_t len)
{
    for (int i = 0; i < g->ninput; i++) {
        const char *n = node_name(&g->node[g->input[i]]);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return i;
    }
    return -1;
}

static bool no_such_input(const Graph *g, const char *name, size_t len, Err *e)
{
    char list[512] = "none";
    size_t used = 0;
    for (int i = 0; i < g->ninput && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 node_name(&g->node[g->input[i]]));
    err_set(e, ERR_INPUT, "--input %.*s: graph @%s has no input '%.*s' (its inputs: %s)", (int)len,
            name, g->name, (int)len, name, list);
    return false;
}

/* The first static dim of want that t disagrees with, or -1. */
static int static_dim_mismatch(const Type *want, const Tensor *t)
{
    for (int d = 0; d < t->rank; d++)
        if (dim_is_static(want->dim[d]) && want->dim[d].k != t->shape[d])
            return d;
    return -1;
}

/* Whether --dtype retyped the model from f32: then f32 inputs and weights are rounded to
 * it, so the files that serve the f32 model serve the bf16 and f16 ones. */
static bool retyped(const Args *a) { return a->dtype && strcmp(a->dtype, "f32") != 0; }

/* An f32 array for an input the retyped model holds in f16 or bf16, rounded to it. Other
 * dtypes are left for check_input to refuse. */
static bool round_to_input(const Graph *g, int i, Tensor *t, Err *e)
{
    DType want = g->node[g->input[i]].type.dt;
    if (t->dt != DT_F32 || (want != DT_F16 && want != DT_BF16))
        return true;
    Tensor r;
    if (!tensor_alloc(&r, want, t->rank, t->shape, e))
        return false;
    for (int64_t k = 0; k < tensor_numel(t); k++)
        dtype_store(want, r.data, k, dtype_load(DT_F32, t->data, k));
    tensor_free(t);
    *t = r;
    return true;
}

/* The file's dtype, rank and static dims must be the input's; symbolic dims are checked
 * together when the graph binds them. */
static bool check_input(const Graph *g, int i, const Tensor *t, const char *file, Err *e)
{
    const Type *want = &g->node[g->input[i]].type;
    bool same_kind = t->dt == want->dt && t->rank == want->rank;
    int bad_dim = same_kind ? static_dim_mismatch(want, t) : -1;
    if (same_kind && bad_dim < 0)
        return true;
    char tw[256], tg[256], which[64] = "";
    if (bad_dim >= 0)
        snprintf(which, sizeof which, " (dimension %d disagrees)", bad_dim);
    err_set(e, ERR_INPUT, "input '%s' from %s: expected %s, got %s%s",
            node_name(&g->node[g->input[i]]), file, type_fmt(g, want, tw, sizeof tw),
            tensor_fmt(t, tg, sizeof tg), which);
    return false;
}

static bool read_inputs(Prepared *r, const Args *a, Err *e)
{
    for (int k = 0; k < a->input.n; k++) {
        const char *name = a->input.item[k], *file;
        size_t len;
        split_pair(name, &len, &file);
        int i = find_input(r->g, name, len);
        if (i < 0)
            return no_such_input(r->g, name, len, e);
        if (r->given[i]) {
            err_set(e, ERR_INPUT, "--input %.*s is given twice", (int)len, name);
            return false;
        }
        if (!npy_read(file, &r->inputs[i], e))
            return false;
        r->given[i] = true;
        if ((retyped(a) && !round_to_input(r->g, i, &r->inputs[i], e)) ||
            !check_input(r->g, i, &r->inputs[i], file, e))
            return false;
    }
    return true;
}

static bool load_params(Prepared *r, const Args *a, uint64_t seed, Err *e)
{
    if (a->weights && retyped(a))
        return safetensors_bind_rounded(r->g, a->weights, r->params, e);
    if (a->weights)
        return safetensors_bind(r->g, a->weights, r->params, e);
    return init_params(r->g, &r->sb, seed, r->params, e);
}

/* A package holds the optimised graph: what runs is what was compiled. */
static Graph *load_graph(Prepared *r, const Args *a, uint64_t seed, Err *e)
{
    if (!package_is(a->model))
        return load_model(a, seed, e);
    if (a->set.n || a->dtype) {
        err_set(e, ERR_USAGE, "%s is a compiled package: %s applies when compiling it",
                a->model, a->set.n ? "--set" : "--dtype");
        return NULL;
    }
    r->package = a->model;
    return package_graph(a->model, e);
}

bool prepare(Prepared *r, const Args *a, const SymSize *sizes, int nsizes, uint64_t seed, Err *e)
{
    memset(r, 0, sizeof *r);
    return (r->g = load_graph(r, a, seed, e)) && alloc_tables(r, e) && read_inputs(r, a, e) &&
           init_symbols(r->g, r->inputs, r->given, sizes, nsizes, DEFAULT_DIM, &r->sb, e) &&
           init_inputs(r->g, &r->sb, seed, r->given, r->inputs, e) && load_params(r, a, seed, e);
}

Compiled *prepared_compile(const Prepared *r, const CompileOptions *o, Err *e)
{
    if (r->package)
        return package_load(r->package, r->g, o, e);
    return compile_graph(r->g, o, e);
}
