/* fold.c — constant folding: a node whose operands are all known at compile time is
 * evaluated by the interpreter's own eval and replaced by a full or a constant, so the
 * folded graph computes bit for bit what the interpreter would. Also drops x*1, x/1,
 * x-0.0 and x+(-0.0), which are exact for every x (x+0.0 is not: -0.0+0.0 is 0.0). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Fold {
    Rewrite rw;
    ITensor *val; /* by src id: the value when known at compile time (d != NULL) */
    int *last;    /* by src id: the last node reading it, so values are freed early */
} Fold;

/* A static shape small enough to hold as text. */
static bool foldable_type(const Type *t)
{
    bool overflow = false;
    Dim n = type_numel(t, &overflow);
    return !overflow && n.syms == 0 && n.k <= FOLD_MAX_ELEMS;
}

static bool operands_known(const Fold *f, const Node *n)
{
    for (int j = 0; j < n->nin; j++)
        if (!f->val[n->in[j]].d)
            return false;
    return true;
}

/* Evaluate src node id into f->val[id] when its value is known at compile time. An
 * eval error (an index out of range) is left for run time to report, where it belongs. */
static void evaluate(Fold *f, int id)
{
    const Node *n = &f->rw.src->node[id];
    unsigned flags = op_info[n->op].flags;
    bool leaf_constant = n->op == OP_CONSTANT || n->op == OP_FULL || n->op == OP_IOTA;
    if ((flags & OPF_RANDOM) || ((flags & OPF_LEAF) && !leaf_constant) || !foldable_type(&n->type) ||
        !operands_known(f, n))
        return;
    ITensor in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = f->val[n->in[j]];
    SymBind none = {0};
    Err ignored = {0};
    interp_eval_node(f->rw.src, id, in, &none, &f->val[id], &ignored);
}

static bool all_equal(const ITensor *v, double x)
{
    for (int64_t i = 0; i < v->n; i++)
        if (memcmp(&v->d[i], &x, sizeof x) != 0)
            return false;
    return true;
}

/* The folded value as a node: a full when every element has the same bits. */
static int emit_value(Fold *f, int id)
{
    const Node *n = &f->rw.src->node[id];
    const ITensor *v = &f->val[id];
    rewrite_at(&f->rw, id);
    int r = v->n == 0 || all_equal(v, v->d[0]) ? b_full(&f->rw.b, v->n ? v->d[0] : 0, &n->type)
                                              : b_constant(&f->rw.b, &n->type, v->d);
    f->rw.map[id] = r;
    return r;
}

/* Identities exact in f64 for every x, NaN and -0.0 included; side: bit 0 when the
 * left operand may be the identity, bit 1 the right. */
static const struct {
    int op;
    unsigned side;
    double value;
} identities[] = {
    {OP_MUL, 3, 1.0},
    {OP_DIV, 2, 1.0},
    {OP_SUB, 2, 0.0},
    {OP_ADD, 3, -0.0},
};

/* Does src node id hold `value` (bitwise, after rounding to its dtype) everywhere? */
static bool holds(const Fold *f, int id, double value)
{
    const Node *n = &f->rw.src->node[id];
    if (f->val[id].d)
        return all_equal(&f->val[id], value);
    if (n->op != OP_FULL)
        return false;
    double v = dtype_round(n->type.dt, node_float(n, "value"));
    return memcmp(&v, &value, sizeof v) == 0;
}

/* The src operand that node id equals by an identity, or -1. */
static int identity_operand(const Fold *f, int id)
{
    const Node *n = &f->rw.src->node[id];
    for (size_t k = 0; k < sizeof identities / sizeof identities[0]; k++) {
        if (identities[k].op != n->op)
            continue;
        for (int side = 0; side < 2; side++) {
            int other = n->in[1 - side];
            if ((identities[k].side >> side & 1) && holds(f, n->in[side], identities[k].value) &&
                type_eq(&f->rw.src->node[other].type, &n->type))
                return other;
        }
    }
    return -1;
}

/* Free the values nothing after node i reads. */
static void release(Fold *f, int i)
{
    const Node *n = &f->rw.src->node[i];
    for (int j = 0; j < n->nin; j++)
        if (f->last[n->in[j]] == i) {
            free(f->val[n->in[j]].d);
            f->val[n->in[j]].d = NULL;
        }
    if (f->last[i] < 0) {
        free(f->val[i].d);
        f->val[i].d = NULL;
    }
}

static void fold_node(Fold *f, int id)
{
    const Node *n = &f->rw.src->node[id];
    evaluate(f, id);
    int same = identity_operand(f, id);
    if (!(op_info[n->op].flags & OPF_LEAF) && f->val[id].d)
        emit_value(f, id);
    else if (same >= 0)
        f->rw.map[id] = f->rw.map[same];
    else
        rewrite_copy(&f->rw, id);
    release(f, id);
}

static bool fold_init(Fold *f, const Graph *g, Err *e)
{
    f->val = calloc((size_t)g->nnode + 1, sizeof(ITensor));
    f->last = malloc(sizeof(int) * ((size_t)g->nnode + 1));
    if (!f->val || !f->last) {
        err_set(e, ERR_MEMORY, "fold: out of memory on graph '%s'", g->name);
        return false;
    }
    for (int i = 0; i < g->nnode; i++)
        f->last[i] = -1;
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            f->last[g->node[i].in[j]] = i;
    return rewrite_begin(&f->rw, g, e);
}

Graph *pass_fold(const Graph *g, Err *e)
{
    Fold f = {0};
    Graph *out = NULL;
    if (fold_init(&f, g, e)) {
        for (int i = 0; i < g->nnode && err_ok(e); i++)
            fold_node(&f, i);
        out = rewrite_end(&f.rw);
    }
    for (int i = 0; f.val && i < g->nnode; i++)
        free(f.val[i].d);
    free(f.val);
    free(f.last);
    return out;
}
