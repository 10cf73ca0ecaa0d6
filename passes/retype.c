/* retype.c — a whole model in another float dtype, as PyTorch's `model.to(torch.bfloat16)`:
 * every value of dtype `from` (inputs, parameters, constants, every op's result) becomes `to`.
 *
 * What matches `.to()`: floating parameters change dtype, integer and bool values do not;
 * kernels compute in f32 and round to the dtype where they store, as PyTorch's bf16 and f16
 * kernels do (GEMMs and reductions accumulate in f32 and round once).
 * Where it differs: (1) `.to()` converts parameters and buffers only: a forward's own dtypes
 * (x.float(), torch.zeros(..., dtype=torch.float32), torch.arange) stay as written, and the
 * inputs are the caller's to convert. A coil graph does not record which f32 was a default
 * and which was asked for, so every f32 in it changes, inputs, casts and leaves included: a
 * cast from `from` to an integer reads `to`, a cast from an integer (or to `from`) gives
 * `to`, an iota past 2^8 (bf16) or 2^11 (f16) holds rounded indices, a rand's uniforms are
 * rounded (so may be 1.0), as a cast of the f32 value would give. (2) Composites (softmax,
 * layer_norm, cross_entropy, attention) keep the node's dtype through their decomposition,
 * so each primitive of it stores in `to` where PyTorch's fused kernels round once: a few
 * more units in the last place. (3) A constant or full whose finite value overflows `to`
 * is an error naming the node (PyTorch's fill refuses such a value too), where PyTorch's
 * own constants would have stayed f32. Any node whose re-inferred type would not be its old
 * one retyped is an error too, never a silent change. dropout's mask is drawn in f32
 * whatever the dtype (its decomposition's rule), so the same elements drop at every dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Retype {
    Rewrite rw;
    DType from, to;
} Retype;

static Type retyped(const Retype *r, Type t)
{
    if (t.dt == r->from)
        t.dt = r->to;
    return t;
}

/* "%5 (matmul)" as the printer numbers statements, or "%x (input)". */
static const char *node_label(const Graph *g, int id, char *buf, size_t n)
{
    const Node *node = &g->node[id];
    if (node->op == OP_INPUT) {
        snprintf(buf, n, "%%%s (input)", node_name(node));
        return buf;
    }
    int k = 0;
    for (int i = 0; i < id; i++)
        k += g->node[i].op != OP_INPUT;
    snprintf(buf, n, "%%%d (%s)", k, op_info[node->op].name);
    return buf;
}

/* An error about src node id, at its location when it has one, saying which retype it was
 * part of; a builder's message (already located) is taken without its location. */
static int node_fail(Retype *r, int id, const char *why)
{
    const Graph *g = r->rw.src;
    const char *bare = strstr(why, "error: ");
    char label[128], msg[700];
    snprintf(msg, sizeof msg, "%s", bare ? bare + strlen("error: ") : why);
    Err *e = r->rw.b.err;
    *e = (Err){0};
    Loc loc = g->node[id].loc;
    node_label(g, id, label, sizeof label);
    const char *from = dtype_info[r->from].name, *to = dtype_info[r->to].name;
    if (loc.file)
        err_at(e, loc, "retype %s -> %s: %s: %s", from, to, label, msg);
    else
        err_set(e, ERR_INPUT, "retype %s -> %s: %s: %s", from, to, label, msg);
    return -1;
}

/* A value the node holds as an attribute, rounded as storing it in `to` would; a finite
 * value that becomes infinite is a change of meaning, not a rounding. */
static bool round_value(Retype *r, int id, double v, double *out)
{
    *out = dtype_round(r->to, v);
    if (isinf(*out) && isfinite(v)) {
        char why[256];
        snprintf(why, sizeof why, "value %g overflows %s; keep the model in %s or change the "
                 "value", v, dtype_info[r->to].name, dtype_info[r->from].name);
        node_fail(r, id, why);
        return false;
    }
    return true;
}

/* constant and full: their values rounded, their declared type retyped. */
static int retype_valued(Retype *r, int id, const Type *t)
{
    const Node *n = &r->rw.src->node[id];
    Attr a = n->attr[0]; /* the one attribute both have: value */
    int count = n->op == OP_CONSTANT ? a.n : 1;
    double *v = malloc(sizeof *v * (size_t)(count ? count : 1));
    if (!v)
        return node_fail(r, id, "out of memory");
    bool ok = true;
    for (int i = 0; ok && i < count; i++)
        ok = round_value(r, id, n->op == OP_CONSTANT ? a.data[i] : a.f, &v[i]);
    if (n->op == OP_CONSTANT)
        a.data = v;
    else
        a.f = v[0];
    rewrite_at(&r->rw, id);
    int res = ok ? b_op(&r->rw.b, n->op, NULL, 0, &a, 1, t) : -1;
    free(v);
    return ok && res < 0 ? node_fail(r, id, r->rw.b.err->msg) : res;
}

/* Any other node: the same op on the retyped operands, a typed op with its declared type
 * retyped; the type inferred must be the old one retyped. */
static int retype_node(Retype *r, int id)
{
    const Node *n = &r->rw.src->node[id];
    Type want = retyped(r, n->type);
    if ((n->op == OP_CONSTANT || n->op == OP_FULL) && n->type.dt == r->from)
        return retype_valued(r, id, &want);
    int in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = rewrite_in(&r->rw, id, j);
    rewrite_at(&r->rw, id);
    const OpInfo *op = &op_info[n->op];
    int res = b_op(&r->rw.b, n->op, in, n->nin, n->attr, op->nattr,
                   (op->flags & OPF_TYPED) ? &want : NULL);
    if (res < 0)
        return node_fail(r, id, r->rw.b.err->msg);
    if (!type_eq(&r->rw.dst->node[res].type, &want)) {
        char got[256], wanted[256], why[600];
        snprintf(why, sizeof why, "the op gives %s where the retyped model needs %s",
                 type_fmt(r->rw.dst, &r->rw.dst->node[res].type, got, sizeof got),
                 type_fmt(r->rw.dst, &want, wanted, sizeof wanted));
        return node_fail(r, id, why);
    }
    return res;
}

Graph *pass_retype(const Graph *g, DType from, DType to, Err *e)
{
    if (!dtype_info[from].is_float || !dtype_info[to].is_float) {
        err_set(e, ERR_USAGE, "retype %s -> %s: only float dtypes are retyped (integer and "
                "bool values keep theirs)", dtype_info[from].name, dtype_info[to].name);
        return NULL;
    }
    Retype r = {.from = from, .to = to};
    if (!rewrite_begin(&r.rw, g, e))
        return NULL;
    for (int i = 0; i < g->nnode && err_ok(e); i++)
        r.rw.map[i] = retype_node(&r, i);
    return rewrite_end(&r.rw);
}
