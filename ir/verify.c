/* verify.c — checks a graph however it was built (parser, builder, a pass): SSA order,
 * operand counts, attribute schemas, names, and every type re-inferred from the op table. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "irlex.h"

static bool is_header_input(const Graph *g, int id)
{
    if (g->node[id].op != OP_INPUT)
        return false;
    for (int i = 0; i < g->ninput; i++)
        if (g->input[i] == id)
            return true;
    return false;
}

/* "%5 (matmul)", numbered as the printer numbers statements, or "%x (input)". */
static const char *node_label(const Graph *g, int id, char *buf, size_t n)
{
    const Node *node = &g->node[id];
    const char *op = node->op >= 0 && node->op < OP_COUNT ? op_info[node->op].name : "unknown op";
    if (is_header_input(g, id)) {
        const char *name = node_name(node);
        snprintf(buf, n, "%%%s (input)", name ? name : "?");
        return buf;
    }
    int k = 0;
    for (int i = 0; i < id; i++)
        k += !is_header_input(g, i);
    snprintf(buf, n, "%%%d (%s)", k, op);
    return buf;
}

/* An error about node id: its label, at its location when it has one. */
static bool node_err(Err *e, const Graph *g, int id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool node_err(Err *e, const Graph *g, int id, const char *fmt, ...)
{
    char msg[768], label[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Loc loc = g->node[id].loc.file ? g->node[id].loc : (Loc){0};
    err_at(e, loc, "%s: %s", node_label(g, id, label, sizeof label), msg);
    return false;
}

/* ---------------------------------------------------------------- names */

typedef struct NameRef {
    const char *name;
    int idx;
} NameRef;

static int cmp_name(const void *a, const void *b)
{
    const NameRef *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Finds two equal names (the pair whose later index is smallest); false when all differ. */
static bool find_duplicate(NameRef *refs, int n, int *first, int *second)
{
    qsort(refs, (size_t)n, sizeof *refs, cmp_name);
    bool found = false;
    for (int i = 1; i < n; i++)
        if (strcmp(refs[i - 1].name, refs[i].name) == 0 && (!found || refs[i].idx < *second)) {
            *first = refs[i - 1].idx;
            *second = refs[i].idx;
            found = true;
        }
    return found;
}

/* Node names (inputs or params): present, non-empty and unique. ids: n node ids. */
static bool check_node_names(const Graph *g, const int *ids, int n, const char *what, Err *e)
{
    NameRef *refs = malloc(sizeof *refs * (size_t)(n ? n : 1));
    if (!refs) {
        err_at(e, (Loc){0}, "out of memory verifying the graph");
        return false;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        const char *name = node_name(&g->node[ids[i]]);
        if (!name || !*name)
            ok = node_err(e, g, ids[i], "%s without a name", what);
        refs[i] = (NameRef){name, ids[i]};
    }
    int a = 0, b = 0;
    if (ok && find_duplicate(refs, n, &a, &b))
        ok = node_err(e, g, b, "duplicate %s name '%s' (also used by node %d)", what, node_name(&g->node[a]), a);
    free(refs);
    return ok;
}

static bool check_symbols(const Graph *g, Err *e)
{
    if (g->nsym < 0 || g->nsym > COIL_MAX_SYMS) {
        err_at(e, (Loc){0}, "graph has %d symbols; at most %d", g->nsym, COIL_MAX_SYMS);
        return false;
    }
    for (int i = 0; i < g->nsym; i++) {
        if (!lex_is_bare_name(g->sym[i])) {
            err_at(e, (Loc){0}, "symbol %d, '%s', is not an identifier", i, g->sym[i] ? g->sym[i] : "");
            return false;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(g->sym[i], g->sym[j]) == 0) {
                err_at(e, (Loc){0}, "symbol '%s' is interned twice", g->sym[i]);
                return false;
            }
    }
    return true;
}

/* ---------------------------------------------------------------- nodes */

static bool check_attrs(const Graph *g, int id, Err *e)
{
    const Node *n = &g->node[id];
    const OpInfo *op = &op_info[n->op];
    if (op->nattr > 0 && !n->attr)
        return node_err(e, g, id, "has no attribute array");
    for (int i = 0; i < op->nattr; i++) {
        const AttrSpec *spec = &op->attrs[i];
        const Attr *a = &n->attr[i];
        if (a->kind != spec->kind || !a->name || strcmp(a->name, spec->name) != 0)
            return node_err(e, g, id, "attribute %d is not '%s' of the schema's kind", i, spec->name);
        bool list = a->kind == AK_INTS || a->kind == AK_DATA;
        const void *items = a->kind == AK_INTS ? (const void *)a->ints : (const void *)a->data;
        if (list && (a->n < 0 || (a->n > 0 && !items)))
            return node_err(e, g, id, "attribute '%s' has a malformed list", spec->name);
        if (a->kind == AK_BOOL && a->i != 0 && a->i != 1)
            return node_err(e, g, id, "attribute '%s' is a bool holding %lld", spec->name, (long long)a->i);
        if (a->kind == AK_STR && spec->required && !a->s)
            return node_err(e, g, id, "required attribute '%s' is missing", spec->name);
    }
    return true;
}

static bool check_type(const Graph *g, int id, Err *e)
{
    const Type *t = &g->node[id].type;
    if (t->dt < 0 || t->dt >= DT_COUNT || t->rank < 0 || t->rank > COIL_MAX_RANK)
        return node_err(e, g, id, "malformed type (dtype %d, rank %d)", (int)t->dt, t->rank);
    uint32_t known = g->nsym == COIL_MAX_SYMS ? ~0u : (1u << g->nsym) - 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dim[i].k < 0)
            return node_err(e, g, id, "dim %d is negative (%lld)", i, (long long)t->dim[i].k);
        if (t->dim[i].syms & ~known)
            return node_err(e, g, id, "dim %d uses a symbol the graph does not define", i);
    }
    return true;
}

/* The op table's inference, run again on the operands' types, must give the node's type. */
static bool check_inferred(const Graph *g, int id, Err *e)
{
    const Node *n = &g->node[id];
    const OpInfo *op = &op_info[n->op];
    Type *in = malloc(sizeof *in * (size_t)(n->nin ? n->nin : 1));
    if (!in) {
        err_at(e, (Loc){0}, "out of memory verifying the graph");
        return false;
    }
    for (int i = 0; i < n->nin; i++)
        in[i] = g->node[n->in[i]].type;
    Type out = (op->flags & OPF_TYPED) ? n->type : (Type){0};
    Err ie = {0};
    bool ok = op->infer(g, n, in, &out, &ie);
    free(in);
    if (!ok)
        return node_err(e, g, id, "%s", ie.msg);
    if (!type_eq(&out, &n->type)) {
        char a[512], b[512];
        return node_err(e, g, id, "type %s does not match the type inferred from its operands, %s",
                        type_fmt(g, &n->type, a, sizeof a), type_fmt(g, &out, b, sizeof b));
    }
    return true;
}

static bool check_node(const Graph *g, int id, Err *e)
{
    const Node *n = &g->node[id];
    if (n->op < 0 || n->op >= OP_COUNT)
        return node_err(e, g, id, "unknown op code %d", n->op);
    const OpInfo *op = &op_info[n->op];
    if (n->nin < op->nin_min || (op->nin_max >= 0 && n->nin > op->nin_max) || (n->nin > 0 && !n->in)) {
        char arity[48];
        return node_err(e, g, id, "has %d operands; %s takes %s", n->nin, op->name,
                        op_arity(op, arity, sizeof arity));
    }
    for (int j = 0; j < n->nin; j++)
        if (n->in[j] < 0 || n->in[j] >= id)
            return node_err(e, g, id, "operand %d is node %d, which is not defined before it", j, n->in[j]);
    return check_attrs(g, id, e) && check_type(g, id, e) && check_inferred(g, id, e);
}

/* ---------------------------------------------------------------- signature */

static bool check_inputs(const Graph *g, Err *e)
{
    unsigned char *listed = calloc((size_t)g->nnode + 1, 1);
    if (!listed) {
        err_at(e, (Loc){0}, "out of memory verifying the graph");
        return false;
    }
    bool ok = true;
    for (int i = 0; i < g->ninput && ok; i++) {
        int id = g->input[i];
        if (id < 0 || id >= g->nnode || g->node[id].op != OP_INPUT)
            err_at(e, (Loc){0}, "graph input %d is not an input node", i);
        else if (listed[id]++)
            node_err(e, g, id, "is listed twice among the graph's inputs");
        ok = err_ok(e);
    }
    for (int id = 0; id < g->nnode && ok; id++)
        if (g->node[id].op == OP_INPUT && !listed[id])
            ok = node_err(e, g, id, "is an input node missing from the graph's input list");
    free(listed);
    return ok && check_node_names(g, g->input, g->ninput, "input", e);
}

static bool check_params(const Graph *g, Err *e)
{
    int n = graph_params(g, NULL);
    int *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids) {
        err_at(e, (Loc){0}, "out of memory verifying the graph");
        return false;
    }
    graph_params(g, ids);
    bool ok = check_node_names(g, ids, n, "param", e);
    free(ids);
    return ok;
}

static bool check_outputs(const Graph *g, Err *e)
{
    NameRef *refs = malloc(sizeof *refs * (size_t)(g->noutput ? g->noutput : 1));
    if (!refs) {
        err_at(e, (Loc){0}, "out of memory verifying the graph");
        return false;
    }
    bool ok = true;
    for (int i = 0; i < g->noutput && ok; i++) {
        const char *name = g->output_name ? g->output_name[i] : NULL;
        if (g->output[i] < 0 || g->output[i] >= g->nnode)
            err_at(e, (Loc){0}, "output %d is node %d, which is not in the graph", i, g->output[i]);
        else if (!name || !*name)
            err_at(e, (Loc){0}, "output %d has no name", i);
        ok = err_ok(e);
        refs[i] = (NameRef){name, i};
    }
    int a = 0, b = 0;
    if (ok && find_duplicate(refs, g->noutput, &a, &b)) {
        err_at(e, (Loc){0}, "outputs %d and %d are both named '%s'", a, b, g->output_name[a]);
        ok = false;
    }
    free(refs);
    return ok;
}

bool ir_verify(const Graph *g, Err *e)
{
    if (!err_ok(e))
        return false;
    if (!check_symbols(g, e))
        return false;
    for (int id = 0; id < g->nnode; id++)
        if (!check_node(g, id, e))
            return false;
    return check_inputs(g, e) && check_params(g, e) && check_outputs(g, e);
}
