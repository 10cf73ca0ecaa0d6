/* graph.c — graphs and the builder. Every node enters a graph through b_op, which
 * fills attribute defaults, checks names and kinds, and infers the result type,
 * so a graph built in code is as checked as one parsed from text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

Graph *graph_new(const char *name)
{
    Graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->arena = arena_new();
    g->name = arena_strdup(g->arena, name ? name : "main");
    return g;
}

void graph_free(Graph *g)
{
    if (!g)
        return;
    free(g->node);
    free(g->input);
    free(g->output);
    free(g->output_name);
    for (int i = 0; i < g->nblob; i++)
        blob_release(g->blob[i]);
    free(g->blob);
    arena_free(g->arena);
    free(g);
}

/* Grow *arr (elements of `size` bytes) to hold n + 1 entries. */
static void *grow(void *arr, int *cap, int n, size_t size)
{
    if (n < *cap)
        return arr;
    int ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(arr, (size_t)ncap * size);
    if (!p) {
        fprintf(stderr, "coil: out of memory growing a graph\n");
        abort();
    }
    *cap = ncap;
    return p;
}

int graph_sym_find(const Graph *g, const char *name, size_t len)
{
    for (int i = 0; i < g->nsym; i++)
        if (strlen(g->sym[i]) == len && memcmp(g->sym[i], name, len) == 0)
            return i;
    return -1;
}

int graph_sym(Graph *g, const char *name, size_t len)
{
    int i = graph_sym_find(g, name, len);
    if (i >= 0 || g->nsym == COIL_MAX_SYMS)
        return i;
    g->sym[g->nsym] = arena_strndup(g->arena, name, len);
    return g->nsym++;
}

const Attr *node_attr(const Node *n, const char *name)
{
    const OpInfo *op = &op_info[n->op];
    for (int i = 0; i < op->nattr; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return &n->attr[i];
    return NULL;
}

int64_t node_int(const Node *n, const char *name)
{
    const Attr *a = node_attr(n, name);
    return a ? a->i : 0;
}

double node_float(const Node *n, const char *name)
{
    const Attr *a = node_attr(n, name);
    return a ? a->f : 0;
}

const char *node_str(const Node *n, const char *name)
{
    const Attr *a = node_attr(n, name);
    return a ? a->s : NULL;
}

const char *node_name(const Node *n)
{
    return node_str(n, "name");
}

bool param_is_buffer(const Node *n)
{
    return n->op == OP_PARAM && node_int(n, "buffer");
}

int graph_buffer_update(const Graph *g, const char *name)
{
    for (int i = 0; i < g->noutput; i++) {
        const char *o = g->output_name[i];
        if (strncmp(o, "update.", 7) == 0 && strcmp(o + 7, name) == 0)
            return i;
    }
    return -1;
}

int graph_params(const Graph *g, int *ids)
{
    int k = 0;
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_PARAM) {
            if (ids)
                ids[k] = i;
            k++;
        }
    return k;
}

/* ---------------------------------------------------------------- builder */

Builder builder_make(Graph *g, Err *err)
{
    return (Builder){.g = g, .err = err};
}

const Type *b_type(const Builder *b, int id)
{
    return id >= 0 && id < b->g->nnode ? &b->g->node[id].type : NULL;
}

bool b_type_of(const Builder *b, int id, Type *t)
{
    const Type *p = b_type(b, id);
    if (p)
        *t = *p;
    return p != NULL;
}

static Attr attr_default(const AttrSpec *spec)
{
    Attr a = {.name = spec->name, .kind = spec->kind};
    if (spec->kind == AK_FLOAT)
        a.f = spec->def;
    else if (spec->kind == AK_INT || spec->kind == AK_BOOL)
        a.i = (int64_t)spec->def;
    return a;
}

/* A constant's elements: small ones copied into the arena, large ones shared (the blob the
 * given attribute's data lives in, else a new one), the graph holding a reference. */
static void take_data(Graph *g, const Attr *given, Attr *out)
{
    out->blob = NULL;
    if (given->n < BLOB_MIN) {
        out->data = arena_memdup(g->arena, given->data, sizeof(double) * (size_t)given->n);
        return;
    }
    const Blob *b = given->blob;
    if (b && blob_data(b) == given->data)
        blob_retain(b);
    else /* new elements, or a copied Attr whose data was replaced */
        b = blob_new(given->data, given->n);
    g->blob = grow(g->blob, &g->cap_blob, g->nblob, sizeof *g->blob);
    g->blob[g->nblob++] = b;
    out->blob = b;
    out->data = blob_data(b);
}

/* Copy a given attribute into the arena, checking it against its spec. */
static bool attr_take(Builder *b, const OpInfo *op, const AttrSpec *spec, const Attr *given, Attr *out)
{
    static const char *kind_name[] = {"an integer", "a float", "a bool", "an integer list",
                                      "a string", "a data list"};
    if (given->kind != spec->kind) {
        err_at(b->err, b->loc, "%s: attribute '%s' must be %s", op->name, spec->name,
               kind_name[spec->kind]);
        return false;
    }
    *out = *given;
    out->name = spec->name;
    Arena *a = b->g->arena;
    if (given->kind == AK_INTS)
        out->ints = arena_memdup(a, given->ints, sizeof(int64_t) * (size_t)given->n);
    if (given->kind == AK_DATA)
        take_data(b->g, given, out);
    if (given->kind == AK_STR)
        out->s = arena_strdup(a, given->s);
    return true;
}

/* The node's attribute array in schema order: given values, else defaults. */
static Attr *attrs_build(Builder *b, const OpInfo *op, const Attr *attrs, int nattr)
{
    for (int j = 0; j < nattr; j++) {
        int found = 0;
        for (int i = 0; i < op->nattr; i++)
            found += strcmp(op->attrs[i].name, attrs[j].name) == 0;
        if (!found) {
            err_at(b->err, b->loc, "%s: unknown attribute '%s'", op->name, attrs[j].name);
            return NULL;
        }
    }
    Attr *out = arena_alloc(b->g->arena, sizeof(Attr) * (size_t)(op->nattr ? op->nattr : 1));
    for (int i = 0; i < op->nattr; i++) {
        const AttrSpec *spec = &op->attrs[i];
        const Attr *given = NULL;
        for (int j = 0; j < nattr; j++)
            if (strcmp(attrs[j].name, spec->name) == 0)
                given = &attrs[j];
        if (!given && spec->required) {
            err_at(b->err, b->loc, "%s: missing required attribute '%s'", op->name, spec->name);
            return NULL;
        }
        if (!given)
            out[i] = attr_default(spec);
        else if (!attr_take(b, op, spec, given, &out[i]))
            return NULL;
    }
    return out;
}

static bool operands_ok(Builder *b, const OpInfo *op, const int *in, int nin)
{
    if (nin < op->nin_min || (op->nin_max >= 0 && nin > op->nin_max)) {
        if (op->nin_min == op->nin_max)
            err_at(b->err, b->loc, "%s: expects %d operand%s, got %d", op->name, op->nin_min,
                   op->nin_min == 1 ? "" : "s", nin);
        else if (op->nin_max < 0)
            err_at(b->err, b->loc, "%s: expects at least %d operands, got %d", op->name, op->nin_min, nin);
        else
            err_at(b->err, b->loc, "%s: expects %d to %d operands, got %d", op->name, op->nin_min,
                   op->nin_max, nin);
        return false;
    }
    for (int i = 0; i < nin; i++)
        if (in[i] < 0 || in[i] >= b->g->nnode) {
            err_at(b->err, b->loc, "%s: operand %d is not a value of this graph", op->name, i);
            return false;
        }
    return true;
}

int b_op(Builder *b, int opc, const int *in, int nin, const Attr *attrs, int nattr, const Type *declared)
{
    if (!err_ok(b->err))
        return -1;
    if (opc < 0 || opc >= OP_COUNT) {
        err_at(b->err, b->loc, "unknown op code %d", opc);
        return -1;
    }
    const OpInfo *op = &op_info[opc];
    if (!operands_ok(b, op, in, nin))
        return -1;
    if ((op->flags & OPF_TYPED) && !declared) {
        err_at(b->err, b->loc, "%s: needs its result type", op->name);
        return -1;
    }
    Node n = {.op = opc, .nin = nin, .loc = b->loc};
    n.attr = attrs_build(b, op, attrs, nattr);
    if (!n.attr)
        return -1;
    n.in = arena_memdup(b->g->arena, in, sizeof(int) * (size_t)nin);
    /* On the heap: a concat may have thousands of operands. */
    Type *tin = malloc(sizeof(Type) * (size_t)(nin > 0 ? nin : 1));
    if (!tin) {
        err_at(b->err, b->loc, "%s: out of memory", op->name);
        return -1;
    }
    for (int i = 0; i < nin; i++)
        tin[i] = b->g->node[in[i]].type;
    if (declared)
        n.type = *declared;
    Err ie = {0};
    bool typed = op->infer(b->g, &n, tin, &n.type, &ie);
    free(tin);
    if (!typed) {
        err_at(b->err, b->loc, "%s", ie.msg);
        return -1;
    }
    b->g->node = grow(b->g->node, &b->g->cap, b->g->nnode, sizeof(Node));
    b->g->node[b->g->nnode] = n;
    return b->g->nnode++;
}

int b_input(Builder *b, const char *name, const Type *t)
{
    Attr a = attr_str("name", name);
    int id = b_op(b, OP_INPUT, NULL, 0, &a, 1, t);
    if (id < 0)
        return -1;
    Graph *g = b->g;
    g->input = grow(g->input, &g->cap_input, g->ninput, sizeof(int));
    g->input[g->ninput++] = id;
    return id;
}

int b_param(Builder *b, const char *name, const Type *t, const char *init)
{
    Attr a[2] = {attr_str("name", name), attr_str("init", init)};
    return b_op(b, OP_PARAM, NULL, 0, a, init ? 2 : 1, t);
}

int b_buffer(Builder *b, const char *name, const Type *t, const char *init)
{
    Attr a[3] = {attr_str("name", name), attr_bool("buffer", true), attr_str("init", init)};
    return b_op(b, OP_PARAM, NULL, 0, a, init ? 3 : 2, t);
}

int b_output(Builder *b, int value, const char *name)
{
    if (!err_ok(b->err) || value < 0)
        return -1;
    Graph *g = b->g;
    int cap = g->cap_output;
    g->output = grow(g->output, &cap, g->noutput, sizeof(int));
    g->output_name = grow(g->output_name, &g->cap_output, g->noutput, sizeof(char *));
    char buf[32];
    if (!name) {
        snprintf(buf, sizeof buf, "out%d", g->noutput);
        name = buf;
    }
    g->output[g->noutput] = value;
    g->output_name[g->noutput] = arena_strdup(g->arena, name);
    return g->noutput++;
}

/* ---------------------------------------------------------------- conveniences */

int b_unary(Builder *b, int op, int x) { return b_op(b, op, &x, 1, NULL, 0, NULL); }

int b_binary(Builder *b, int op, int x, int y)
{
    int in[2] = {x, y};
    return b_op(b, op, in, 2, NULL, 0, NULL);
}

int b_where(Builder *b, int c, int x, int y)
{
    int in[3] = {c, x, y};
    return b_op(b, OP_WHERE, in, 3, NULL, 0, NULL);
}

int b_cast(Builder *b, int x, DType dt)
{
    const Type *t = b_type(b, x);
    if (!t)
        return -1;
    Type r = *t;
    r.dt = dt;
    return b_op(b, OP_CAST, &x, 1, NULL, 0, &r);
}

int b_reduce(Builder *b, int op, int x, int naxes, const int64_t *axes, bool keepdim)
{
    Attr a[2] = {attr_ints("axes", naxes, axes), attr_bool("keepdim", keepdim)};
    return b_op(b, op, &x, 1, a, 2, NULL);
}

int b_argmax(Builder *b, int x, int64_t axis, bool keepdim)
{
    Attr a[2] = {attr_int("axis", axis), attr_bool("keepdim", keepdim)};
    return b_op(b, OP_ARGMAX, &x, 1, a, 2, NULL);
}

int b_matmul(Builder *b, int x, int y) { return b_binary(b, OP_MATMUL, x, y); }

int b_transpose(Builder *b, int x, int rank, const int64_t *perm)
{
    Attr a = attr_ints("perm", rank, perm);
    return b_op(b, OP_TRANSPOSE, &x, 1, &a, 1, NULL);
}

int b_swap_last(Builder *b, int x)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int64_t perm[COIL_MAX_RANK];
    for (int d = 0; d < t.rank; d++)
        perm[d] = d;
    perm[t.rank - 2] = t.rank - 1, perm[t.rank - 1] = t.rank - 2;
    return b_transpose(b, x, t.rank, perm);
}

int b_move_axis(Builder *b, int x, int from, int to)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    if (from == to)
        return x;
    int64_t perm[COIL_MAX_RANK];
    int k = 0;
    for (int i = 0; i < t.rank; i++)
        if (i != from)
            perm[k++] = i;
    /* perm now lists the other axes; put `from` at position `to` */
    memmove(perm + to + 1, perm + to, (size_t)(t.rank - 1 - to) * sizeof *perm);
    perm[to] = from;
    return b_transpose(b, x, t.rank, perm);
}

int b_reshape(Builder *b, int x, const Type *t) { return b_op(b, OP_RESHAPE, &x, 1, NULL, 0, t); }

int b_expand(Builder *b, int x, const Type *t) { return b_op(b, OP_EXPAND, &x, 1, NULL, 0, t); }

int b_slice(Builder *b, int x, int64_t axis, int64_t start, int64_t end, int64_t step)
{
    Attr a[4] = {attr_int("axis", axis), attr_int("start", start), attr_int("end", end),
                 attr_int("step", step)};
    return b_op(b, OP_SLICE, &x, 1, a, 4, NULL);
}

int b_concat(Builder *b, const int *xs, int n, int64_t axis)
{
    Attr a = attr_int("axis", axis);
    return b_op(b, OP_CONCAT, xs, n, &a, 1, NULL);
}

int b_gather(Builder *b, int table, int idx, int64_t axis)
{
    int in[2] = {table, idx};
    Attr a = attr_int("axis", axis);
    return b_op(b, OP_GATHER, in, 2, &a, 1, NULL);
}

int b_index_add(Builder *b, int base, int idx, int src)
{
    int in[3] = {base, idx, src};
    return b_op(b, OP_INDEX_ADD, in, 3, NULL, 0, NULL);
}

int b_full(Builder *b, double v, const Type *t)
{
    Attr a = attr_float("value", v);
    return b_op(b, OP_FULL, NULL, 0, &a, 1, t);
}

int b_scalar(Builder *b, double v, DType dt)
{
    Type t = type_scalar(dt);
    return b_full(b, v, &t);
}

int b_constant(Builder *b, const Type *t, const double *data)
{
    bool overflow = false;
    Dim n = type_numel(t, &overflow);
    if (overflow || n.syms || n.k > INT32_MAX) {
        err_at(b->err, b->loc, "constant: needs a static shape of fewer than 2^31 elements");
        return -1;
    }
    Attr a = attr_data("value", (int)n.k, data);
    return b_op(b, OP_CONSTANT, NULL, 0, &a, 1, t);
}

int b_iota(Builder *b, const Type *t, int64_t axis)
{
    Attr a = attr_int("axis", axis);
    return b_op(b, OP_IOTA, NULL, 0, &a, 1, t);
}

int b_rand(Builder *b, const Type *t, int64_t seed, int64_t offset)
{
    Attr a[2] = {attr_int("seed", seed), attr_int("offset", offset)};
    return b_op(b, OP_RAND, NULL, 0, a, 2, t);
}
