/* init.c — initial values for a run without data: parameters from their init strings,
 * random inputs, and sizes for symbolic dims. All draws are Philox streams keyed by name. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "runtime/init.h"

/* Inputs and params live in separate streams even when their names coincide. */
#define INPUT_STREAM_TAG UINT64_C(0x9E3779B97F4A7C15)
#define INIT_MAX_ARGS 4

uint64_t init_stream(const char *name)
{
    return fnv1a_str(name);
}

/* ---------------------------------------------------------------- init strings */

/* Every initializer reduces to one distribution: a constant a, normal(mean a, std b)
 * or uniform [a, b). */
typedef enum DistKind { DIST_CONST, DIST_NORMAL, DIST_UNIFORM } DistKind;
typedef struct Dist {
    DistKind kind;
    double a, b;
} Dist;

/* An initializer's rule: from its arguments and the tensor's shape to a distribution,
 * or an explanation of what is wrong. */
typedef const char *(*InitRule)(const double *arg, int nargs, const Tensor *t, Dist *d);

/* PyTorch's fans (torch.nn.init._calculate_fan_in_and_fan_out) for a weight [out, in, ...]. */
static bool fans(const Tensor *t, double *fan_in, double *fan_out)
{
    if (t->rank == 0)
        return false;
    double receptive = 1;
    for (int i = 2; i < t->rank; i++)
        receptive *= (double)t->shape[i];
    *fan_out = (double)t->shape[0] * receptive;
    *fan_in = t->rank == 1 ? *fan_out : (double)t->shape[1] * receptive;
    return true;
}

static const char *rule_zeros(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)arg, (void)nargs, (void)t;
    *d = (Dist){DIST_CONST, 0, 0};
    return NULL;
}

static const char *rule_ones(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)arg, (void)nargs, (void)t;
    *d = (Dist){DIST_CONST, 1, 0};
    return NULL;
}

static const char *rule_normal(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)t;
    *d = nargs == 1 ? (Dist){DIST_NORMAL, 0, arg[0]} : (Dist){DIST_NORMAL, arg[0], arg[1]};
    return d->b < 0 ? "the standard deviation must be >= 0" : NULL;
}

static const char *rule_uniform(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)nargs, (void)t;
    *d = (Dist){DIST_UNIFORM, arg[0], arg[1]};
    return arg[0] > arg[1] ? "the lower bound is above the upper bound" : NULL;
}

static const char *rule_xavier(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)arg, (void)nargs;
    double fan_in, fan_out;
    if (!fans(t, &fan_in, &fan_out))
        return "xavier needs a parameter of rank >= 1";
    double bound = sqrt(6.0 / (fan_in + fan_out));
    *d = (Dist){DIST_UNIFORM, -bound, bound};
    return NULL;
}

static const char *rule_kaiming(const double *arg, int nargs, const Tensor *t, Dist *d)
{
    (void)arg, (void)nargs;
    double fan_in, fan_out;
    if (!fans(t, &fan_in, &fan_out))
        return "kaiming needs a parameter of rank >= 1";
    *d = (Dist){DIST_NORMAL, 0, sqrt(2.0 / fan_in)};
    return NULL;
}

static const struct {
    const char *name;
    int min_args, max_args;
    InitRule rule;
} init_rules[] = {
    {"zeros", 0, 0, rule_zeros},     {"ones", 0, 0, rule_ones},
    {"normal", 1, 2, rule_normal},   {"uniform", 2, 2, rule_uniform},
    {"xavier", 0, 0, rule_xavier},   {"kaiming", 0, 0, rule_kaiming},
};
#define INIT_KNOWN "zeros, ones, normal(std), normal(mean, std), uniform(a, b), xavier, kaiming"

/* "name" or "name(x, y)": the name, its length and the arguments; NULL or a reason. */
static const char *parse_init(const char *s, const char **name, size_t *name_len, double *arg,
                              int *nargs)
{
    while (isspace((unsigned char)*s))
        s++;
    *name = s;
    while (isalpha((unsigned char)*s) || *s == '_')
        s++;
    *name_len = (size_t)(s - *name);
    *nargs = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '(') {
        s++;
        while (isspace((unsigned char)*s))
            s++;
        while (*s != ')') {
            if (*nargs == INIT_MAX_ARGS)
                return "too many arguments";
            char *end;
            arg[*nargs] = strtod(s, &end);
            if (end == s || !isfinite(arg[*nargs]))
                return "arguments must be finite numbers";
            (*nargs)++;
            for (s = end; isspace((unsigned char)*s); s++) {}
            if (*s == ',')
                for (s++; isspace((unsigned char)*s); s++) {}
            else if (*s != ')')
                return "expected ',' or ')'";
        }
        s++;
    }
    while (isspace((unsigned char)*s))
        s++;
    return *s ? "unexpected text after the initializer" : NULL;
}

static int find_rule(const char *word, size_t len)
{
    for (int r = 0; r < (int)(sizeof init_rules / sizeof init_rules[0]); r++)
        if (strlen(init_rules[r].name) == len && strncmp(init_rules[r].name, word, len) == 0)
            return r;
    return -1;
}

/* Resolve an init string against the table to a distribution for t. */
static bool init_dist(const Tensor *t, const char *name, const char *init, Dist *d, Err *e)
{
    const char *word;
    size_t len;
    double arg[INIT_MAX_ARGS];
    int nargs;
    const char *why = parse_init(init, &word, &len, arg, &nargs);
    int r = why ? -1 : find_rule(word, len);
    if (!why && r < 0)
        why = "unknown initializer";
    else if (!why && (nargs < init_rules[r].min_args || nargs > init_rules[r].max_args))
        why = "wrong number of arguments";
    else if (!why)
        why = init_rules[r].rule(arg, nargs, t, d);
    if (!why)
        return true;
    char ty[128];
    err_set(e, ERR_INPUT, "parameter '%s' (%s): bad initializer \"%s\": %s (known: " INIT_KNOWN ")",
            name, tensor_fmt(t, ty, sizeof ty), init, why);
    return false;
}

bool init_tensor(Tensor *t, const char *name, const char *init, uint64_t seed, Err *e)
{
    Dist d = {DIST_CONST, 0, 0};
    if (init && *init && !init_dist(t, name, init, &d, e))
        return false;
    uint64_t stream = init_stream(name);
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = d.a;
        if (d.kind == DIST_NORMAL)
            v = d.a + d.b * philox_normal(seed, stream, (uint64_t)i);
        else if (d.kind == DIST_UNIFORM)
            v = d.a + (d.b - d.a) * philox_uniform(seed, stream, (uint64_t)i);
        dtype_store(t->dt, t->data, i, v);
    }
    return true;
}

/* ---------------------------------------------------------------- symbols */

static bool unknown_symbol(const Graph *g, const char *name, Err *e)
{
    char list[512] = "none";
    size_t len = 0;
    for (int s = 0; s < g->nsym && len < sizeof list; s++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", s ? ", " : "", g->sym[s]);
    err_set(e, ERR_INPUT, "--dim %s: graph @%s has no symbolic dimension '%s' (it has: %s)", name,
            g->name ? g->name : "?", name, list);
    return false;
}

/* A given input's size for a symbol set with --dim must agree with it. */
static bool dim_conflict(const Graph *g, int input, const Tensor *t, int d, int s, int64_t dim_value,
                         Err *e)
{
    char ty[256];
    err_set(e, ERR_INPUT, "--dim %s=%lld, but input '%s' (%s) has %s=%lld", g->sym[s],
            (long long)dim_value, node_name(&g->node[g->input[input]]), tensor_fmt(t, ty, sizeof ty),
            g->sym[s], (long long)t->shape[d]);
    return false;
}

bool init_symbols(const Graph *g, const Tensor *inputs, const bool *given, const SymSize *sizes,
                  int nsizes, int64_t fallback, SymBind *sb, Err *e)
{
    SymBind from_dim;
    memset(sb, 0, sizeof *sb);
    for (int i = 0; i < nsizes; i++) {
        int s = graph_sym_find(g, sizes[i].name, strlen(sizes[i].name));
        if (s < 0)
            return unknown_symbol(g, sizes[i].name, e);
        sb->val[s] = sizes[i].value;
        sb->known[s] = true;
    }
    from_dim = *sb;
    for (int i = 0; i < g->ninput; i++) {
        const Type *ty = &g->node[g->input[i]].type;
        for (int d = 0; given && given[i] && d < ty->rank && d < inputs[i].rank; d++) {
            Dim dim = ty->dim[d];
            if (dim.k != 1 || __builtin_popcount(dim.syms) != 1)
                continue; /* products are checked, not solved, when the graph runs */
            int s = __builtin_ctz(dim.syms);
            if (from_dim.known[s] && from_dim.val[s] != inputs[i].shape[d])
                return dim_conflict(g, i, &inputs[i], d, s, from_dim.val[s], e);
            if (!sb->known[s]) {
                sb->val[s] = inputs[i].shape[d];
                sb->known[s] = true;
            }
        }
    }
    for (int s = 0; s < g->nsym; s++)
        if (!sb->known[s]) {
            sb->val[s] = fallback;
            sb->known[s] = true;
        }
    return true;
}

/* ---------------------------------------------------------------- params and inputs */

/* Allocate t at node n's type resolved under sb (g names its symbols in messages). */
static bool alloc_node_tensor(const Graph *g, const Node *n, const SymBind *sb, Tensor *t, Err *e)
{
    int64_t dims[COIL_MAX_RANK];
    if (!type_resolve(&n->type, sb, dims)) {
        char ty[256];
        err_set(e, ERR_INPUT, "'%s': cannot size %s: a symbol has no value", node_name(n),
                type_fmt(g, &n->type, ty, sizeof ty));
        return false;
    }
    return tensor_alloc(t, n->type.dt, n->type.rank, dims, e);
}

bool init_param(const Graph *g, const Node *n, const SymBind *sb, uint64_t seed, Tensor *t, Err *e)
{
    return alloc_node_tensor(g, n, sb, t, e) && init_tensor(t, node_name(n), node_str(n, "init"), seed, e);
}

bool init_params(const Graph *g, const SymBind *sb, uint64_t seed, Tensor *params, Err *e)
{
    int np = graph_params(g, NULL);
    int *ids = malloc(sizeof(int) * (size_t)(np ? np : 1));
    if (!ids) {
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    graph_params(g, ids);
    memset(params, 0, sizeof *params * (size_t)np); /* so a failure can free them all */
    bool ok = true;
    for (int i = 0; ok && i < np; i++)
        ok = init_param(g, &g->node[ids[i]], sb, seed, &params[i], e);
    for (int i = 0; !ok && i < np; i++)
        tensor_free(&params[i]);
    free(ids);
    return ok;
}

/* Lower bound[v] to at most b. */
static void tighten(int64_t *bound, int v, int64_t b)
{
    if (b < bound[v])
        bound[v] = b;
}

/* The size of axis `axis` of value v's type under sb (INT64_MAX when unknown). */
static int64_t dim_of(const Graph *g, int v, int64_t axis, const SymBind *sb)
{
    const Type *t = &g->node[v].type;
    int64_t dims[COIL_MAX_RANK];
    int ax;
    if (!axis_norm(axis, t->rank, &ax) || !type_resolve(t, sb, dims))
        return INT64_MAX;
    return dims[ax];
}

/* bound[v]: the exclusive upper bound of the integers v may hold, from what reads v:
 * a gather's or index_add's index, cross_entropy's labels (index_check's bound once it is decomposed,
 * as in a joint graph), or data movement feeding one of those.
 * Nodes are visited last to first so a value's users are final before it. */
static void index_bounds(const Graph *g, const SymBind *sb, int64_t *bound)
{
    for (int i = 0; i < g->nnode; i++)
        bound[i] = INT64_MAX;
    for (int i = g->nnode - 1; i >= 0; i--) {
        const Node *n = &g->node[i];
        if (n->op == OP_GATHER)
            tighten(bound, n->in[1], dim_of(g, n->in[0], node_int(n, "axis"), sb));
        else if (n->op == OP_INDEX_ADD) /* rows of its base */
            tighten(bound, n->in[1], dim_of(g, n->in[0], 0, sb));
        else if (n->op == OP_CROSS_ENTROPY)
            tighten(bound, n->in[1], dim_of(g, n->in[0], -1, sb));
        else if (n->op == OP_INDEX_CHECK) /* a decomposed cross_entropy's labels */
            tighten(bound, n->in[0], node_int(n, "bound"));
        else if ((op_info[n->op].flags & OPF_VIEW) || n->op == OP_CAST || n->op == OP_CONCAT)
            for (int j = 0; j < n->nin; j++)
                tighten(bound, n->in[j], bound[i]);
    }
}

/* Element i drawn at counter first + i. */
static void fill_random_input(Tensor *t, const char *name, int64_t bound, uint64_t seed,
                              uint64_t first)
{
    uint64_t stream = init_stream(name) ^ INPUT_STREAM_TAG;
    if (t->dt == DT_BOOL || bound == INT64_MAX)
        bound = 2; /* bools, and integers nothing bounds */
    else if (bound < 1)
        bound = 1; /* indexing an empty axis: the run reports it */
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double v = dtype_info[t->dt].is_float
                       ? philox_normal(seed, stream, first + (uint64_t)i)
                       : floor(philox_uniform(seed, stream, first + (uint64_t)i) * (double)bound);
        dtype_store(t->dt, t->data, i, v);
    }
}

/* Whether input node n has a leading dimension of samples (a symbol: B, B*T). */
static bool batched(const Node *n) { return n->type.rank > 0 && n->type.dim[0].syms != 0; }

bool init_inputs_part(const Graph *g, const SymBind *sb, uint64_t seed, const bool *given,
                      int part, Tensor *inputs, Err *e)
{
    int64_t *bound = malloc(sizeof(int64_t) * (size_t)(g->nnode ? g->nnode : 1));
    if (!bound) {
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    index_bounds(g, sb, bound);
    for (int i = 0; i < g->ninput; i++)
        if (!given[i])
            memset(&inputs[i], 0, sizeof inputs[i]); /* so a failure can free them all */
    bool ok = true;
    for (int i = 0; ok && i < g->ninput; i++) {
        int id = g->input[i];
        if (given[i])
            continue;
        ok = alloc_node_tensor(g, &g->node[id], sb, &inputs[i], e);
        uint64_t first = batched(&g->node[id]) ? (uint64_t)part * (uint64_t)tensor_numel(&inputs[i]) : 0;
        if (ok)
            fill_random_input(&inputs[i], node_name(&g->node[id]), bound[id], seed, first);
    }
    for (int i = 0; !ok && i < g->ninput; i++)
        if (!given[i])
            tensor_free(&inputs[i]);
    free(bound);
    return ok;
}

bool init_inputs(const Graph *g, const SymBind *sb, uint64_t seed, const bool *given,
                 Tensor *inputs, Err *e)
{
    return init_inputs_part(g, sb, seed, given, 0, inputs, e);
}
