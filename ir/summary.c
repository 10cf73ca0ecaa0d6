/* summary.c — a model's vital statistics for `coil check`: signature, parameters, and FLOPs
 * per call from a shape-only walk of the graph (the same op_info[].flops the interpreter sums),
 * as text or as JSON members. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/summary.h"

/* ---------------------------------------------------------------- FLOPs */

/* The first symbol of t that sb leaves unbound, or -1. */
static int unbound_sym(const Type *t, const SymBind *sb)
{
    for (int i = 0; i < t->rank; i++)
        for (int s = 0; s < COIL_MAX_SYMS; s++)
            if ((t->dim[i].syms >> s & 1) && !sb->known[s])
                return s;
    return -1;
}

/* A node's concrete shape as an ITensor without data. */
static bool shape_of(const Graph *g, int id, const SymBind *sb, ITensor *t, Err *e)
{
    const Node *n = &g->node[id];
    char buf[256];
    t->rank = n->type.rank;
    t->n = 1;
    t->d = NULL;
    if (!type_resolve(&n->type, sb, t->shape)) {
        int s = unbound_sym(&n->type, sb);
        if (s >= 0)
            err_at(e, n->loc, "%%%d = %s : %s: symbol %s has no value (bind it: --dim %s=N)", id,
                   op_info[n->op].name, type_fmt(g, &n->type, buf, sizeof buf), g->sym[s], g->sym[s]);
        else
            err_at(e, n->loc, "%%%d = %s : %s: dimension too large", id, op_info[n->op].name,
                   type_fmt(g, &n->type, buf, sizeof buf));
        return false;
    }
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(t->n, t->shape[i], &t->n)) {
            err_at(e, n->loc, "%%%d = %s: element count overflows", id, op_info[n->op].name);
            return false;
        }
    return true;
}

bool graph_node_flops(const Graph *g, const SymBind *sb, double *flops, Err *e)
{
    SymBind none = {0};
    ITensor *shape = calloc((size_t)g->nnode + 1, sizeof *shape);
    ITensor *in = calloc((size_t)g->nnode + 1, sizeof *in); /* no node has more operands */
    bool ok = shape && in;
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory counting FLOPs");
    for (int i = 0; ok && i < g->nnode; i++) {
        const Node *n = &g->node[i];
        if (!(ok = shape_of(g, i, sb ? sb : &none, &shape[i], e)))
            break;
        for (int j = 0; j < n->nin; j++)
            in[j] = shape[n->in[j]];
        flops[i] = op_info[n->op].flops(n, in, &shape[i]);
    }
    free(shape);
    free(in);
    return ok;
}

bool graph_flops(const Graph *g, const SymBind *sb, double *flops, Err *e)
{
    double *per_node = malloc(((size_t)g->nnode + 1) * sizeof *per_node), total = 0;
    bool ok = per_node && graph_node_flops(g, sb, per_node, e);
    if (!per_node)
        err_set(e, ERR_MEMORY, "out of memory counting FLOPs");
    for (int i = 0; ok && i < g->nnode; i++)
        total += per_node[i];
    free(per_node);
    if (ok)
        *flops = total;
    return ok;
}

/* ---------------------------------------------------------------- parameters */

ParamStats param_stats(const Graph *g, bool buffers)
{
    ParamStats st = {0};
    for (int i = 0; i < g->nnode; i++) {
        const Node *n = &g->node[i];
        int64_t dims[COIL_MAX_RANK], numel = 1;
        if (n->op != OP_PARAM || param_is_buffer(n) != buffers)
            continue;
        st.ntensor++;
        if (!type_resolve(&n->type, NULL, dims)) {
            st.nsymbolic++;
            continue;
        }
        for (int d = 0; d < n->type.rank; d++)
            numel *= dims[d];
        st.nvalue += numel;
        st.nbyte += numel * dtype_info[n->type.dt].size;
    }
    return st;
}

/* ---------------------------------------------------------------- the text */

/* 25694184 -> "25,694,184" */
static char *group_digits(int64_t v, char *buf, size_t n)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v));
    size_t k = 0;
    if (v < 0 && k + 1 < n)
        buf[k++] = '-';
    for (int i = 0; i < len && k + 2 < n; i++) {
        buf[k++] = raw[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len)
            buf[k++] = ',';
    }
    buf[k] = 0;
    return buf;
}

/* A quantity with a binary (bytes) or decimal (FLOPs) prefix: "98.0 MiB", "6.58 GFLOP". */
static char *scaled(double v, bool binary, const char *unit, char *buf, size_t n)
{
    static const char *const dec[] = {"", "K", "M", "G", "T", "P"}, *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
    double base = binary ? 1024 : 1000;
    int p = 0;
    while (v >= base && p < 5)
        v /= base, p++;
    if (p)
        snprintf(buf, n, "%.*f %s%s", v >= 100 ? 1 : 2, v, binary ? bin[p] : dec[p], unit);
    else
        snprintf(buf, n, "%.0f %s", v, unit);
    return buf;
}

static void print_values(FILE *f, const Graph *g, const char *title, int n, const int *ids,
                         const char *const *names)
{
    char buf[256];
    fprintf(f, "  %s (%d):\n", title, n);
    for (int i = 0; i < n; i++) {
        const Node *v = &g->node[ids[i]];
        fprintf(f, "    %s: %s\n", names ? names[i] : node_name(v), type_fmt(g, &v->type, buf, sizeof buf));
    }
}

static void print_param_stats(FILE *f, const char *what, ParamStats st)
{
    char a[64], b[64];
    fprintf(f, "  %s: %d tensors, %s values, %s", what, st.ntensor, group_digits(st.nvalue, a, sizeof a),
            scaled((double)st.nbyte, true, "B", b, sizeof b));
    if (st.nsymbolic)
        fprintf(f, " (and %d of symbolic shape, not counted)", st.nsymbolic);
    fputc('\n', f);
}

/* Parameters, and buffers where the model has any, counted apart as PyTorch's
 * parameters() and buffers() are. */
static void print_params(FILE *f, const Graph *g)
{
    ParamStats buffers = param_stats(g, true);
    print_param_stats(f, "parameters", param_stats(g, false));
    if (buffers.ntensor)
        print_param_stats(f, "buffers", buffers);
}

static void print_flops(FILE *f, const Graph *g, const SymBind *sb)
{
    char at[512] = "", a[64], b[64];
    for (int s = 0; s < g->nsym; s++)
        if (sb && sb->known[s])
            snprintf(at + strlen(at), sizeof at - strlen(at), "%s%s=%lld", at[0] ? ", " : " at ", g->sym[s],
                     (long long)sb->val[s]);
    double flops = 0;
    Err e = {0};
    if (graph_flops(g, sb, &flops, &e))
        fprintf(f, "  FLOPs per call%s: %s (%s)\n", at, scaled(flops, false, "FLOP", a, sizeof a),
                group_digits((int64_t)flops, b, sizeof b));
    else
        fprintf(f, "  FLOPs per call%s: unknown: %s\n", at, e.msg);
}

char *model_summary(const Graph *g, const SymBind *sb, Err *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        err_set(e, ERR_MEMORY, "out of memory writing the model summary");
        return NULL;
    }
    fprintf(f, "model %s\n", g->name ? g->name : "(unnamed)");
    print_values(f, g, "inputs", g->ninput, g->input, NULL);
    print_values(f, g, "outputs", g->noutput, g->output, g->output_name);
    print_params(f, g);
    fprintf(f, "  nodes: %d\n", g->nnode);
    print_flops(f, g, sb);
    fclose(f);
    return text;
}

char *model_param_list(const Graph *g, Err *e)
{
    char *text = NULL, buf[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        err_set(e, ERR_MEMORY, "out of memory listing parameters");
        return NULL;
    }
    for (int i = 0; i < g->nnode; i++) {
        const Node *n = &g->node[i];
        if (n->op == OP_PARAM)
            fprintf(f, "%s: %s  %s%s\n", node_name(n), type_fmt(g, &n->type, buf, sizeof buf),
                    node_str(n, "init") ? node_str(n, "init") : "",
                    param_is_buffer(n) ? "  (buffer)" : "");
    }
    fclose(f);
    return text;
}

/* ---------------------------------------------------------------- the data (JSON) */

void json_type_members(JsonWriter *w, const Graph *g, const Type *t)
{
    char buf[128];
    json_field_string(w, "dtype", dtype_info[t->dt].name);
    json_key(w, "shape");
    json_begin_array(w);
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i].syms)
            json_string(w, dim_fmt(g, t->dim[i], buf, sizeof buf));
        else
            json_int(w, t->dim[i].k);
    }
    json_end_array(w);
}

static void json_values(JsonWriter *w, const Graph *g, const char *key, int n, const int *ids,
                        const char *const *names)
{
    json_key(w, key);
    json_begin_array(w);
    for (int i = 0; i < n; i++) {
        const Node *v = &g->node[ids[i]];
        json_begin_object(w);
        json_field_string(w, "name", names ? names[i] : node_name(v));
        json_type_members(w, g, &v->type);
        json_end_object(w);
    }
    json_end_array(w);
}

static void json_param_stats(JsonWriter *w, const char *key, ParamStats st)
{
    json_key(w, key);
    json_begin_object(w);
    json_field_int(w, "tensors", st.ntensor);
    json_field_int(w, "values", st.nvalue);
    json_field_int(w, "bytes", st.nbyte);
    json_field_int(w, "symbolic", st.nsymbolic);
    json_end_object(w);
}

static void json_params(JsonWriter *w, const Graph *g)
{
    json_param_stats(w, "parameters", param_stats(g, false));
    json_param_stats(w, "buffers", param_stats(g, true));
}

static void json_flops(JsonWriter *w, const Graph *g, const SymBind *sb)
{
    json_key(w, "sizes");
    json_begin_object(w);
    for (int s = 0; s < g->nsym; s++)
        if (sb && sb->known[s])
            json_field_int(w, g->sym[s], sb->val[s]);
    json_end_object(w);
    double flops = 0;
    Err e = {0};
    if (graph_flops(g, sb, &flops, &e)) {
        json_field_double(w, "flops", flops);
        return;
    }
    json_key(w, "flops");
    json_null(w);
    json_field_string(w, "flops_error", e.msg);
}

void model_summary_json(JsonWriter *w, const Graph *g, const SymBind *sb)
{
    json_field_string(w, "model", g->name);
    json_values(w, g, "inputs", g->ninput, g->input, NULL);
    json_values(w, g, "outputs", g->noutput, g->output, g->output_name);
    json_params(w, g);
    json_field_int(w, "nodes", g->nnode);
    json_flops(w, g, sb);
}

void model_param_list_json(JsonWriter *w, const Graph *g)
{
    json_key(w, "params");
    json_begin_array(w);
    for (int i = 0; i < g->nnode; i++) {
        const Node *n = &g->node[i];
        if (n->op != OP_PARAM)
            continue;
        json_begin_object(w);
        json_field_string(w, "name", node_name(n));
        json_type_members(w, g, &n->type);
        json_field_string(w, "init", node_str(n, "init"));
        json_field_bool(w, "buffer", param_is_buffer(n));
        json_end_object(w);
    }
    json_end_array(w);
}
