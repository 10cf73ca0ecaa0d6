/* lower_gen.c — a node's value at an index, as loop IR: inlines a group's members, turns
 * views into index arithmetic, reads other groups' results and the leaves from their
 * buffers, and makes a fused reduction an accumulator. Memoised on (node, index), and the
 * pool is hash-consed, so a value is built once per point. Operands are evaluated from an
 * explicit work stack, not by recursion: a fused chain of any length needs no C stack. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "codegen/lower_int.h"

/* A value at a point: a memo entry, or (value unused) an item of the work stack. */
typedef struct Memo {
    int node, rank, value;
    int idx[COIL_MAX_RANK];
} Memo;

/* ---------------------------------------------------------------- the memo */

static uint64_t memo_hash(int node, int rank, const int *idx)
{
    return fnv1a(FNV1A_OFFSET ^ (uint64_t)node * 0x9e3779b97f4a7c15u, idx,
                 sizeof *idx * (size_t)rank);
}

/* The memo is an open-addressed table of Memo entries (node -1: empty), never more than
 * half full, so a probe always ends: at the key's entry or at an empty one. */
static Memo *memo_slot(const Gen *G, int node, int rank, const int *idx)
{
    size_t mask = (size_t)G->cap_memo - 1, s = memo_hash(node, rank, idx) & mask;
    for (;; s = (s + 1) & mask) {
        Memo *m = &G->memo[s];
        if (m->node < 0 || (m->node == node && m->rank == rank &&
                            memcmp(m->idx, idx, (size_t)rank * sizeof *idx) == 0))
            return m;
    }
}

static bool memo_grow(Gen *G)
{
    int cap = G->cap_memo ? 2 * G->cap_memo : 256;
    Memo *old = G->memo, *nm = malloc((size_t)cap * sizeof *nm);
    if (!nm)
        return false;
    for (int i = 0; i < cap; i++)
        nm[i].node = -1;
    int oldcap = G->cap_memo;
    G->memo = nm;
    G->cap_memo = cap;
    for (int i = 0; i < oldcap; i++)
        if (old[i].node >= 0)
            *memo_slot(G, old[i].node, old[i].rank, old[i].idx) = old[i];
    free(old);
    return true;
}

static const Memo *memo_find(const Gen *G, int node, int rank, const int *idx)
{
    const Memo *m = memo_slot(G, node, rank, idx);
    return m->node >= 0 ? m : NULL;
}

/* Record w's value. The table grows here, right before the insert it makes room for. */
static bool memo_put(Gen *G, const Memo *w, int value)
{
    if (2 * (G->nmemo + 1) > G->cap_memo && !memo_grow(G))
        return false;
    Memo *m = memo_slot(G, w->node, w->rank, w->idx);
    *m = *w;
    m->value = value;
    G->nmemo++;
    return true;
}

/* ---------------------------------------------------------------- the work stack */

static bool work_push(Gen *G, int node, int rank, const int *idx)
{
    if (G->nwork == G->cap_work) {
        int cap = G->cap_work ? 2 * G->cap_work : 64;
        Memo *w = realloc(G->work, (size_t)cap * sizeof *w);
        if (!w)
            return false;
        G->work = w;
        G->cap_work = cap;
    }
    Memo *w = &G->work[G->nwork++];
    w->node = node;
    w->rank = rank;
    w->value = -1;
    memcpy(w->idx, idx, (size_t)rank * sizeof *idx);
    return true;
}

/* Items [from, nwork) reversed, so the operand asked for first is evaluated first. */
static void work_reverse(Gen *G, int from)
{
    for (int i = from, j = G->nwork - 1; i < j; i++, j--) {
        Memo t = G->work[i];
        G->work[i] = G->work[j];
        G->work[j] = t;
    }
}

bool values_init(Gen *G, Lower *L, int grp)
{
    memset(G, 0, sizeof *G);
    G->L = L;
    G->grp = grp;
    G->acc = L->acc;
    kb_init(&G->kb);
    return memo_grow(G);
}

/* The accumulators this kernel made belong to its group's members: reset those only. */
void values_free(Gen *G)
{
    int n;
    const int *m = lower_members(G->L, G->grp, &n);
    for (int i = 0; i < n; i++)
        G->acc[m[i]] = -1;
    kb_free(&G->kb);
    free(G->memo);
    free(G->work);
}

/* ---------------------------------------------------------------- helpers */

static int fail_retry(Gen *G, int node)
{
    lower_retry(G->L, node);
    return -1;
}

/* Row-major strides of a dense tensor of type t. */
static bool dense_strides(const Type *t, Dim *stride)
{
    Dim s = dim_static(1);
    for (int d = t->rank - 1; d >= 0; d--) {
        stride[d] = s;
        if (d > 0 && !dim_times(s, t->dim[d], &s))
            return false;
    }
    return true;
}

int dense_index_at(Gen *G, const Type *t, const int *idx)
{
    Dim stride[COIL_MAX_RANK];
    if (!dense_strides(t, stride)) {
        char ty[256];
        err_set(G->L->e, ERR_INPUT, "lowering: %s repeats a symbol across dimensions, so its "
                "elements cannot be addressed", type_fmt(G->L->g, t, ty, sizeof ty));
        return -1;
    }
    return ix_linear(&G->kb, t->rank, idx, stride, dim_static(0));
}

static int load_dense(Gen *G, int buf, const Type *t, const int *idx)
{
    return lx_load(&G->kb, buf, t->dt, dense_index_at(G, t, idx));
}

/* The index into operand type `in` of a value broadcast (numpy) to `out` at idx. */
static void broadcast_index(Gen *G, const Type *in, const Type *out, const int *idx, int *oidx)
{
    int lead = out->rank - in->rank;
    for (int d = 0; d < in->rank; d++) {
        bool stretched = dim_eq(in->dim[d], dim_static(1)) &&
                         !dim_eq(out->dim[lead + d], dim_static(1));
        oidx[d] = stretched ? lx_int(&G->kb, 0) : idx[lead + d];
    }
}

static const Type *type_of(const Gen *G, int id) { return &G->L->g->node[id].type; }

static int operand(Gen *G, int id, int j, const int *idx)
{
    int in = G->L->g->node[id].in[j], oidx[COIL_MAX_RANK];
    broadcast_index(G, type_of(G, in), type_of(G, id), idx, oidx);
    return value_at(G, in, oidx);
}

/* ---------------------------------------------------------------- views */

/* Python slicing: a negative start counts from the end, then clamps to [0, n]. */
static int64_t slice_first(const Node *n, Dim len)
{
    int64_t s = node_int(n, "start");
    if (!dim_is_static(len))
        return 0; /* a symbolic axis is only ever sliced whole */
    if (s < 0)
        s += len.k;
    return s < 0 ? 0 : s > len.k ? len.k : s;
}

static int view_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    const Type *in = type_of(G, n->in[0]);
    int iidx[COIL_MAX_RANK];
    KB *kb = &G->kb;
    if (n->op == OP_TRANSPOSE) {
        const Attr *perm = node_attr(n, "perm");
        for (int i = 0; i < perm->n; i++)
            iidx[perm->ints[i]] = idx[i];
    } else if (n->op == OP_EXPAND) {
        broadcast_index(G, in, &n->type, idx, iidx);
    } else if (n->op == OP_SLICE) {
        int axis;
        axis_norm(node_int(n, "axis"), in->rank, &axis);
        memcpy(iidx, idx, (size_t)in->rank * sizeof *idx);
        int64_t first = slice_first(n, in->dim[axis]);
        iidx[axis] = ix_add(kb, ix_mul(kb, idx[axis], dim_static(node_int(n, "step"))),
                            lx_int(kb, first));
    } else { /* reshape: the flat position, split again in the operand's shape */
        Dim stride[COIL_MAX_RANK];
        int flat = dense_index_at(G, &n->type, idx);
        if (!dense_strides(in, stride)) {
            err_at(G->L->e, n->loc, "lowering: reshape of a tensor that repeats a symbol");
            return -1;
        }
        for (int d = 0; d < in->rank; d++)
            iidx[d] = ix_mod(kb, ix_div(kb, flat, stride[d]), in->dim[d]);
    }
    return value_at(G, n->in[0], iidx);
}

/* ---------------------------------------------------------------- leaves */

static int leaf_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    KB *kb = &G->kb;
    switch (n->op) {
    case OP_FULL: return lx_float(kb, node_float(n, "value"), n->type.dt);
    case OP_CONSTANT: return lx_float(kb, node_attr(n, "value")->data[0], n->type.dt);
    case OP_IOTA: {
        int axis;
        axis_norm(node_int(n, "axis"), n->type.rank, &axis);
        return lx_cast(kb, n->type.dt, idx[axis]);
    }
    case OP_RAND: {
        int at = dense_index_at(G, &n->type, idx);
        return lx_cast(kb, n->type.dt, lx_rand(kb, node_int(n, "seed"), node_int(n, "offset"), at));
    }
    default:
        err_set(G->L->e, ERR_INPUT, "lowering: %s has no buffer", op_info[n->op].name);
        return -1;
    }
}

/* ---------------------------------------------------------------- concat, gather */

/* Where each operand starts along the concatenated axis: sums of sizes, which must stay
 * one Dim (static, or multiples of one product of symbols). */
static bool concat_offsets(const Gen *G, const Node *n, int axis, Dim *offset)
{
    Dim at = dim_static(0);
    for (int j = 0; j < n->nin; j++) {
        offset[j] = at;
        Dim size = type_of(G, n->in[j])->dim[axis];
        if (at.k != 0 && (size.syms != at.syms || size.sq != at.sq))
            return false;
        at = (Dim){at.k + size.k, size.syms, size.sq};
    }
    offset[n->nin] = at;
    return true;
}

/* The operand holding position idx[axis] is picked by comparisons with the offsets; every
 * operand's index is clamped into it, so the loads not picked stay in bounds. */
static int concat_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    KB *kb = &G->kb;
    int axis, v = -1;
    axis_norm(node_int(n, "axis"), n->type.rank, &axis);
    Dim *offset = malloc(((size_t)n->nin + 1) * sizeof *offset);
    if (!offset || !concat_offsets(G, n, axis, offset)) {
        err_at(G->L->e, n->loc, "lowering: concat along axis %d: its operands' sizes do not "
               "add up to one dimension", axis);
        free(offset);
        return -1;
    }
    for (int j = n->nin - 1; j >= 0; j--) {
        const Type *t = type_of(G, n->in[j]);
        int oidx[COIL_MAX_RANK];
        memcpy(oidx, idx, (size_t)t->rank * sizeof *idx);
        int local = j ? ix_sub_dim(kb, idx[axis], offset[j]) : idx[axis];
        oidx[axis] = ix_clamp(kb, local, t->dim[axis]);
        int x = value_at(G, n->in[j], oidx); /* -1 propagates; every operand is asked for */
        int picked = lx_binary(kb, OP_LT, DT_BOOL, idx[axis], lx_dim(kb, offset[j + 1]));
        v = j == n->nin - 1 ? x : lx_select(kb, n->type.dt, picked, x, v);
    }
    free(offset);
    return v;
}

/* take: result dims = table[:axis] + indices' dims + table[axis+1:]. An index outside the
 * table is clamped: the interpreter rejects it, a compiled kernel must not fault. */
static int gather_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    const Type *table = type_of(G, n->in[0]), *ids = type_of(G, n->in[1]);
    int axis, tidx[COIL_MAX_RANK];
    axis_norm(node_int(n, "axis"), table->rank, &axis);
    int i = value_at(G, n->in[1], idx + axis);
    i = ix_clamp(&G->kb, lx_cast(&G->kb, DT_I64, i), table->dim[axis]);
    lower_index_check(G->L, n->in[1], table->dim[axis]);
    for (int d = 0; d < table->rank; d++)
        tidx[d] = d < axis ? idx[d] : d == axis ? i : idx[d - 1 + ids->rank];
    return value_at(G, n->in[0], tidx);
}

/* ---------------------------------------------------------------- reductions */

static DType acc_dtype(int op, DType dt)
{
    if (op == OP_ARGMAX || (op != OP_MAX && op != OP_MIN && !dtype_info[dt].is_float))
        return DT_I64;
    return dtype_info[dt].is_float ? DT_F32 : dt;
}

/* A reduction of this row group read at its outer point: its accumulator. Anywhere else
 * (a transposed read, another space) it needs a group of its own: ask for a retry. */
static int acc_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    const FuseGroup *grp = &G->L->f->g[G->grp];
    const Type *in = type_of(G, n->in[0]);
    unsigned mask = reduce_axes(n, in->rank);
    KB *kb = &G->kb;
    if (grp->kind != FUSE_ROW || mask != grp->inner || !type_same_shape(in, &grp->space))
        return fail_retry(G, id);
    bool keep = n->type.rank == in->rank;
    for (int d = 0, k = 0; d < in->rank; d++) {
        if ((mask >> d & 1) && !keep)
            continue;
        int want = mask >> d & 1 ? lx_int(kb, 0) : G->full[d];
        if (idx[k++] != want)
            return fail_retry(G, id);
    }
    DType acc_dt = acc_dtype(n->op, in->dt);
    if (G->acc[id] < 0) {
        int v = value_at(G, n->in[0], G->full), axis = -1;
        for (int d = 0; d < in->rank; d++)
            if (mask >> d & 1)
                axis = G->inner_var[d];
        int op = n->op == OP_MEAN ? OP_SUM : n->op;
        if (v < 0)
            return -1;
        G->acc[id] = kb_reduce(kb, kb->phase_of[v] + 1, op, v, axis, acc_dt);
    }
    int a = lx_acc(kb, G->acc[id], acc_dt);
    if (n->op != OP_MEAN)
        return lx_cast(kb, n->type.dt, a);
    Dim count = dim_static(1);
    for (int d = 0; d < in->rank; d++)
        if ((mask >> d & 1) && !dim_times(count, in->dim[d], &count))
            return fail_retry(G, id);
    int c = dim_is_static(count) ? lx_float(kb, (double)count.k, DT_F32)
                                 : lx_cast(kb, DT_F32, lx_dim(kb, count));
    return lx_cast(kb, n->type.dt, lx_binary(kb, OP_DIV, DT_F32, a, c));
}

/* ---------------------------------------------------------------- values */

static int pointwise_value(Gen *G, int id, const int *idx)
{
    const Node *n = &G->L->g->node[id];
    const OpInfo *op = &op_info[n->op];
    KB *kb = &G->kb;
    DType dt = n->type.dt;
    if (n->op == OP_CAST)
        return lx_cast(kb, dt, operand(G, id, 0, idx));
    if (n->op == OP_WHERE)
        return lx_select(kb, dt, operand(G, id, 0, idx), operand(G, id, 1, idx),
                         operand(G, id, 2, idx));
    if (op->scalar1)
        return lx_unary(kb, n->op, dt, operand(G, id, 0, idx));
    return lx_binary(kb, n->op, dt, operand(G, id, 0, idx), operand(G, id, 1, idx));
}

static int compute(Gen *G, int id, const int *idx)
{
    const Lower *L = G->L;
    const Node *n = &L->g->node[id];
    NodeClass c = L->f->cls[id];
    if (L->leaf_buf[id] >= 0)
        return load_dense(G, L->leaf_buf[id], &n->type, idx);
    if (L->f->group[id] != G->grp && L->f->group[id] >= 0) { /* stored by an earlier group */
        if (L->node_buf[id] < 0) { /* its group failed: fine while a new plan is due */
            if (!L->nretry)
                err_set(L->e, ERR_INPUT, "lowering: %s node %d is read before its group ran",
                        op_info[n->op].name, id);
            return -1;
        }
        return load_dense(G, L->node_buf[id], &n->type, idx);
    }
    if (op_info[n->op].flags & OPF_VIEW)
        return view_value(G, id, idx);
    if (op_info[n->op].flags & OPF_LEAF)
        return leaf_value(G, id, idx);
    if (c == NC_REDUCE)
        return acc_value(G, id, idx);
    if (n->op == OP_CONCAT)
        return concat_value(G, id, idx);
    if (n->op == OP_GATHER)
        return gather_value(G, id, idx);
    if (n->op == OP_INDEX_CHECK) { /* checked before the run when it reads an input */
        lower_index_check(G->L, n->in[0], dim_static(node_int(n, "bound")));
        return value_at(G, n->in[0], idx);
    }
    if (op_info[n->op].flags & OPF_POINTWISE)
        return pointwise_value(G, id, idx);
    err_set(L->e, ERR_INPUT, "lowering: %s cannot be computed in a loop kernel",
            op_info[n->op].name);
    return -1;
}

/* Evaluate the work stack until it is empty. The top item is computed with its operands
 * looked up in the memo; an operand not there yet is pushed above it (compute then gives
 * -1) and the item is computed again once they are done. Values only depend on operands,
 * which have smaller node ids, so this ends. An item that fails (an error, or a retry
 * asked for) is remembered as -1, so what reads it fails too, while its siblings are
 * still evaluated, as a recursion would: every retry a kernel needs is asked for in one
 * pass. False only out of memory. */
static bool drain(Gen *G)
{
    while (G->nwork > 0) {
        Memo w = G->work[G->nwork - 1];
        if (memo_find(G, w.node, w.rank, w.idx)) {
            G->nwork--; /* asked for twice (a diamond), done meanwhile */
            continue;
        }
        int base = G->nwork;
        G->evaluating = true;
        int v = compute(G, w.node, w.idx);
        G->evaluating = false;
        if (G->kb.oom)
            return false;
        if (G->nwork > base) { /* operands first */
            work_reverse(G, base);
            continue;
        }
        G->nwork--;
        if (!memo_put(G, &w, v)) {
            G->kb.oom = true;
            return false;
        }
    }
    return true;
}

int value_at(Gen *G, int id, const int *idx)
{
    int rank = G->L->g->node[id].type.rank;
    for (int d = 0; d < rank; d++)
        if (idx[d] < 0)
            return -1;
    const Memo *m = memo_find(G, id, rank, idx);
    if (m)
        return m->value;
    if (!work_push(G, id, rank, idx)) {
        G->kb.oom = true;
        return -1;
    }
    if (G->evaluating)
        return -1; /* an operand of the node being computed: the driver does it first */
    bool ok = drain(G);
    G->nwork = 0;
    m = ok ? memo_find(G, id, rank, idx) : NULL;
    return m ? m->value : -1;
}
