/* cse.c — common subexpression elimination: a node with the same op, operands
 * (in either order for commutative ops), attributes and type as an earlier one is
 * replaced by it. Inputs and params are never merged: each is its own tensor. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "passes/passes.h"

/* Fed field by field, so struct padding never reaches the hash. */
static uint64_t mix_int(uint64_t h, int64_t v) { return fnv1a(h, &v, sizeof v); }

/* Only the field an attribute's kind uses is read: the others may hold anything. */
static uint64_t hash_attr(uint64_t h, const Attr *a)
{
    h = mix_int(h, a->kind);
    switch (a->kind) {
    case AK_INT:
    case AK_BOOL:
        return mix_int(h, a->i);
    case AK_FLOAT:
        return fnv1a(h, &a->f, sizeof a->f);
    case AK_INTS:
        return fnv1a(mix_int(h, a->n), a->ints, sizeof(int64_t) * (size_t)a->n);
    case AK_DATA: /* a blob's hash is made once (large constants: model weights) */
        return a->blob ? mix_int(mix_int(h, a->n), (int64_t)blob_hash(a->blob))
                       : fnv1a(mix_int(h, a->n), a->data, sizeof(double) * (size_t)a->n);
    case AK_STR:
        return a->s ? fnv1a(h, a->s, strlen(a->s) + 1) : h;
    }
    return h;
}

/* Floats and data compare by bits: 0.0 and -0.0 differ, a NaN equals itself. */
static bool attr_same(const Attr *a, const Attr *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case AK_INT:
    case AK_BOOL:
        return a->i == b->i;
    case AK_FLOAT:
        return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case AK_INTS:
        return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0);
    case AK_DATA:
        return a->n == b->n && (a->n == 0 || a->data == b->data ||
                                memcmp(a->data, b->data, sizeof(double) * (size_t)a->n) == 0);
    case AK_STR:
        return a->s == b->s || (a->s && b->s && strcmp(a->s, b->s) == 0);
    }
    return false;
}

/* A node as CSE sees it: operands are dst ids, sorted when the op commutes. */
typedef struct Key {
    int op;
    const Type *type;
    int nin;
    const int *in;
    const Attr *attr;
} Key;

static Key key_of(const Node *n, int *in)
{
    if ((op_info[n->op].flags & OPF_COMMUTATIVE) && n->nin == 2 && in[0] > in[1]) {
        int t = in[0];
        in[0] = in[1];
        in[1] = t;
    }
    return (Key){n->op, &n->type, n->nin, in, n->attr};
}

static uint64_t key_hash(const Key *k)
{
    uint64_t h = mix_int(mix_int(FNV1A_OFFSET, k->op), k->type->dt);
    for (int d = 0; d < k->type->rank; d++)
        h = mix_int(mix_int(h, k->type->dim[d].k), k->type->dim[d].syms);
    h = fnv1a(h, k->in, sizeof(int) * (size_t)k->nin);
    for (int a = 0; a < op_info[k->op].nattr; a++)
        h = hash_attr(h, &k->attr[a]);
    return h;
}

static bool key_same(const Key *a, const Key *b)
{
    if (a->op != b->op || a->nin != b->nin || !type_eq(a->type, b->type))
        return false;
    if (a->nin && memcmp(a->in, b->in, sizeof(int) * (size_t)a->nin) != 0)
        return false;
    for (int i = 0; i < op_info[a->op].nattr; i++)
        if (!attr_same(&a->attr[i], &b->attr[i]))
            return false;
    return true;
}

/* Open addressing over dst ids; dst never has more nodes than src. */
typedef struct Table {
    int *slot; /* dst id, or -1 */
    size_t mask;
} Table;

static bool table_init(Table *t, int nnode)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)nnode)
        cap *= 2;
    t->slot = malloc(sizeof(int) * cap);
    t->mask = cap - 1;
    for (size_t i = 0; t->slot && i < cap; i++)
        t->slot[i] = -1;
    return t->slot != NULL;
}

/* The dst node equal to k, or the empty slot where it belongs (*found false). */
static int *table_probe(const Table *t, const Graph *dst, const Key *k, bool *found)
{
    for (size_t i = key_hash(k) & t->mask;; i = (i + 1) & t->mask) {
        int id = t->slot[i];
        if (id < 0) {
            *found = false;
            return &t->slot[i];
        }
        const Node *n = &dst->node[id];
        int in[n->nin > 0 ? n->nin : 1];
        memcpy(in, n->in, sizeof(int) * (size_t)n->nin);
        Key have = key_of(n, in);
        if (key_same(k, &have)) {
            *found = true;
            return &t->slot[i];
        }
    }
}

static void cse_node(Rewrite *rw, Table *t, int id)
{
    const Node *n = &rw->src->node[id];
    if (n->op == OP_INPUT || n->op == OP_PARAM) {
        rewrite_copy(rw, id);
        return;
    }
    int in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = rewrite_in(rw, id, j);
    int key_in[n->nin > 0 ? n->nin : 1];
    memcpy(key_in, in, sizeof(int) * (size_t)n->nin);
    Key k = key_of(n, key_in);
    bool found;
    int *slot = table_probe(t, rw->dst, &k, &found);
    if (found)
        rw->map[id] = *slot;
    else
        *slot = rewrite_copy_with(rw, id, in);
}

Graph *pass_cse(const Graph *g, Err *e)
{
    Table t;
    if (!table_init(&t, g->nnode)) {
        err_set(e, ERR_MEMORY, "cse: out of memory on graph '%s'", g->name);
        return NULL;
    }
    Rewrite rw;
    if (rewrite_begin(&rw, g, e)) {
        for (int i = 0; i < g->nnode && err_ok(e); i++)
            cse_node(&rw, &t, i);
    }
    free(t.slot);
    return rw.dst ? rewrite_end(&rw) : NULL;
}
