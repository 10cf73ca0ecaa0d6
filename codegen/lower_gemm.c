/* lower_gemm.c — a matmul as a GEMM step: each operand's chain of views down to its
 * buffer read as strides (the index algebra shows the address affine in the loop
 * variables: a transposed weight is swapped strides, a broadcast batch a zero stride),
 * C dense; batch dims fold into M when B is shared across them (x[B,T,C] @ W is one
 * GEMM with M = B*T). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "codegen/lower_int.h"

/* The buffer and strides of operand j of matmul m, read at idx (its dims' loop
 * variables). False, asking for a retry, when the view is not strided. */
static bool operand_strides(Gen *G, int m, int j, const int *idx, int nvar, int *buf, Dim *coef,
                            Dim *offset)
{
    int in = G->L->g->node[m].in[j];
    int v = value_at(G, in, idx);
    if (v < 0)
        return false;
    const Lx *x = &G->kb.lx[v];
    if (x->kind == LX_LOAD && ix_affine(&G->kb, x->a, nvar, coef, offset)) {
        *buf = (int)x->i;
        return true;
    }
    lower_retry(G->L, in); /* copy it densely first */
    return false;
}

/* idx of operand t (rank r) of a matmul of nb batch dims: its batch dims aligned at the
 * right with the result's (a stretched 1 reads index 0), then its two matrix dims. */
static void operand_index(Gen *G, const Type *t, const Type *out, const int *var, int row,
                          int col, int *idx)
{
    int nb = out->rank - 2, lead = nb - (t->rank - 2);
    for (int d = 0; d < t->rank - 2; d++) {
        bool stretched = dim_eq(t->dim[d], dim_static(1)) &&
                         !dim_eq(out->dim[lead + d], dim_static(1));
        idx[d] = stretched ? lx_int(&G->kb, 0) : var[lead + d];
    }
    idx[t->rank - 2] = row;
    idx[t->rank - 1] = col;
}

static void set_operand(GemmOperand *o, int buf, const Dim *coef, Dim offset, int nb, int row,
                        int col)
{
    o->buf = buf;
    o->offset = offset;
    for (int d = 0; d < nb; d++)
        o->batch_stride[d] = coef[d];
    o->row_stride = coef[row];
    o->col_stride = coef[col];
}

/* x[B..., M, K] @ W[K, N] with W shared by every batch and A's batches laid out one after
 * another: one GEMM of M' = B... * M rows. */
static void fold_batches(Gemm *gm)
{
    Dim rows = gm->m, expect;
    for (int d = gm->nbatch - 1; d >= 0; d--) {
        if (gm->b.batch_stride[d].k != 0 || !dim_times(rows, gm->a.row_stride, &expect) ||
            !dim_eq(gm->a.batch_stride[d], expect) || !dim_times(rows, gm->batch[d], &rows))
            return;
    }
    gm->m = rows;
    gm->nbatch = 0;
}

static int new_c(Lower *L, int m)
{
    if (L->node_buf[m] >= 0) /* an index_add's output, which adds into it next */
        return L->node_buf[m];
    int out = lower_first_output(L, m);
    if (out >= 0)
        return L->out_buf[out];
    const Type *t = &L->g->node[m].type;
    Buffer b = {.name = "c", .kind = BUF_TEMP, .index = m, .dt = t->dt, .first = -1, .last = -1};
    if (!type_size(t, &b.numel))
        return too_large(L, m) ? 0 : -1;
    return lower_add_buffer(L, b);
}

static bool fill(Gen *G, int m, Gemm *gm)
{
    const Graph *g = G->L->g;
    const Type *out = &g->node[m].type, *ta = &g->node[g->node[m].in[0]].type,
               *tb = &g->node[g->node[m].in[1]].type;
    int nb = out->rank - 2, var[COIL_MAX_RANK + 3], ia[COIL_MAX_RANK], ib[COIL_MAX_RANK];
    Dim coef[COIL_MAX_RANK + 3], offset;
    Dim k = ta->dim[ta->rank - 1];
    for (int d = 0; d < nb + 2; d++)
        var[d] = lx_var(&G->kb, d, out->dim[d]);
    var[nb + 2] = lx_var(&G->kb, nb + 2, k);
    int row = var[nb], col = var[nb + 1], kv = var[nb + 2], buf;
    operand_index(G, ta, out, var, row, kv, ia);
    operand_index(G, tb, out, var, kv, col, ib);
    memset(gm, 0, sizeof *gm);
    if (!operand_strides(G, m, 0, ia, nb + 3, &buf, coef, &offset))
        return false;
    set_operand(&gm->a, buf, coef, offset, nb, nb, nb + 2);
    if (!operand_strides(G, m, 1, ib, nb + 3, &buf, coef, &offset))
        return false;
    set_operand(&gm->b, buf, coef, offset, nb, nb + 2, nb + 1);
    gm->nbatch = nb;
    memcpy(gm->batch, out->dim, (size_t)nb * sizeof *out->dim);
    gm->m = out->dim[nb];
    gm->n = out->dim[nb + 1];
    gm->k = k;
    Dim stride = dim_static(1);
    gm->c.col_stride = stride;
    gm->c.row_stride = gm->n;
    dim_times(stride, gm->n, &stride);
    for (int d = nb; d >= 0; d--) { /* dense: M*N per innermost batch, and so on */
        dim_times(stride, out->dim[d], &stride);
        if (d > 0)
            gm->c.batch_stride[d - 1] = stride;
    }
    fold_batches(gm);
    gm->epilogue = gm->epi_load = -1;
    return true;
}

/* The matmul (or attention) a step group holds: its first member. */
static int group_node(const Lower *L, int grp)
{
    int n;
    const int *member = lower_members(L, grp, &n);
    return n > 0 ? member[0] : -1;
}

bool lower_gemm(Lower *L, int grp, Gemm *out)
{
    int m = group_node(L, grp);
    Gen G;
    bool ok = m >= 0 && values_init(&G, L, grp) &&
              (L->g->node[m].op == OP_CONV ? lower_conv_fill(&G, m, out) : fill(&G, m, out));
    if (m >= 0)
        values_free(&G);
    if (ok && (out->c.buf = L->node_buf[m] = new_c(L, m)) >= 0)
        L->buf_holds[out->c.buf] = m;
    if (!ok && !L->nretry && err_ok(L->e))
        err_set(L->e, ERR_MEMORY, "lowering: out of memory lowering a matmul");
    return ok && out->c.buf >= 0;
}

/* An integer matmul (OpenBLAS and the micro-kernels are for floats) as a kernel: a loop
 * over the result's dims, summing A[.., m, k] * B[.., k, n] over k in i64 (exact, as the
 * interpreter's f64 is below 2^53), then wrapped to the dtype. */
int lower_contraction(Lower *L, int grp, KernelCtx *ctx)
{
    int m = group_node(L, grp);
    const Graph *g = L->g;
    const Node *n = &g->node[m];
    const Type *out = &n->type, *ta = &g->node[n->in[0]].type, *tb = &g->node[n->in[1]].type;
    int r = out->rank, var[COIL_MAX_RANK + 1], ia[COIL_MAX_RANK], ib[COIL_MAX_RANK];
    Kernel k = {.group = grp, .nouter = r, .ninner = 1};
    Gen G;
    if (!values_init(&G, L, grp)) {
        values_free(&G);
        err_set(L->e, ERR_MEMORY, "lowering: out of memory");
        return -1;
    }
    for (int d = 0; d < r; d++)
        var[d] = lx_var(&G.kb, d, k.size[d] = out->dim[d]);
    var[r] = lx_var(&G.kb, r, k.size[r] = ta->dim[ta->rank - 1]);
    operand_index(&G, ta, out, var, var[r - 2], var[r], ia);
    operand_index(&G, tb, out, var, var[r], var[r - 1], ib);
    KB *kb = &G.kb;
    int a = lx_cast(kb, DT_I64, value_at(&G, n->in[0], ia));
    int b = lx_cast(kb, DT_I64, value_at(&G, n->in[1], ib));
    int acc = lx_acc(kb, kb_reduce(kb, 0, OP_SUM, lx_binary(kb, OP_MUL, DT_I64, a, b), r, DT_I64),
                     DT_I64);
    kb_store(kb, -1, PENDING_BUF(m), dense_index_at(&G, out, var), lx_cast(kb, out->dt, acc));
    bool ok = kb_finish(kb, L->p->arena, &k);
    values_free(&G);
    if (!ok) {
        if (err_ok(L->e) && !L->nretry)
            err_set(L->e, ERR_MEMORY, "lowering: out of memory lowering an integer matmul");
        return -1;
    }
    k.name = "contraction";
    return lower_place(L, &k, ctx);
}

/* o's batch strides for a dense [batch.., rows, cols] laid out in order; the elements in
 * all, or false when they overflow. */
static bool dense_batches(GemmOperand *o, const Dim *batch, int nb, Dim rows, Dim cols, Dim *total)
{
    Dim stride = dim_static(1);
    bool ok = dim_times(stride, cols, &stride) && dim_times(stride, rows, &stride);
    for (int d = nb - 1; ok && d >= 0; d--) {
        o->batch_stride[d] = stride;
        ok = dim_times(stride, batch[d], &stride);
    }
    *total = stride;
    return ok;
}

/* Which operands an attention step of each kind reads: operand j of the node, its row
 * variable (0 queries, 1 keys) and column variable (2 Q's and K's features, 3 V's). */
typedef struct AttnOperand {
    int row, col;
    size_t field; /* offsetof the GemmOperand in Attention */
} AttnOperand;

static const AttnOperand attn_operands[] = {
    {0, 2, offsetof(Attention, q)},  {1, 2, offsetof(Attention, k)},
    {1, 3, offsetof(Attention, v)},  {0, 3, offsetof(Attention, fo)},
    {0, 3, offsetof(Attention, dout)}, {0, -1, offsetof(Attention, lse)},
};
/* The forward's fourth operand: queries down, keys across. */
static const AttnOperand attn_bias = {0, 1, offsetof(Attention, bias)};

/* A bias row or column of one is broadcast: index 0 there. */
static void bias_broadcast(Gen *G, const Type *t, const Dim *ext, int *idx)
{
    for (int d = 0; d < 2; d++)
        if (dim_eq(t->dim[t->rank - 2 + d], dim_static(1)) && !dim_eq(ext[d], dim_static(1)))
            idx[t->rank - 2 + d] = lx_int(&G->kb, 0);
}

/* Attention kept whole (decompose_fused), or one of its training ops: Q, K, V (and the
 * backward's O, dO and lse) read through their views as strides, as a GEMM's operands
 * are; the result dense. Loop variables: the batch dims, then i (queries), j (keys), c
 * (Q and K's features), c' (V's). `r` is the result seen as attention's [batch.., Tq, Dv]
 * (lse's gets a column of 1, the backward's loses its leading 3). */
bool lower_attention(Lower *L, int grp, Attention *out)
{
    int m = group_node(L, grp);
    const Node *n = &L->g->node[m];
    const Type *tq = &L->g->node[n->in[0]].type, *tk = &L->g->node[n->in[1]].type;
    const Type *tv = &L->g->node[n->in[n->op == OP_ATTENTION_LSE ? 1 : 2]].type;
    Type r = n->type;
    memset(out, 0, sizeof *out);
    out->kind = n->op == OP_ATTENTION_LSE    ? ATTN_LSE
                : n->op == OP_ATTENTION_GRAD ? ATTN_BACKWARD
                                             : ATTN_FORWARD;
    if (out->kind == ATTN_LSE)
        r.dim[r.rank++] = dim_static(1);
    if (out->kind == ATTN_BACKWARD)
        memmove(r.dim, r.dim + 1, (size_t)--r.rank * sizeof *r.dim);
    int nb = r.rank - 2, nvar = nb + 4, var[COIL_MAX_RANK + 4], idx[COIL_MAX_RANK], buf;
    Dim coef[COIL_MAX_RANK + 4], offset;
    Gen G;
    bool ok = values_init(&G, L, grp);
    for (int d = 0; ok && d < nb; d++)
        var[d] = lx_var(&G.kb, d, r.dim[d]);
    const Dim ext[4] = {tq->dim[tq->rank - 2], tk->dim[tk->rank - 2], tq->dim[tq->rank - 1],
                        tv->dim[tv->rank - 1]};
    for (int d = 0; ok && d < 4; d++)
        var[nb + d] = lx_var(&G.kb, nb + d, ext[d]);
    for (int j = 0; ok && j < n->nin; j++) {
        bool bias = out->kind == ATTN_FORWARD && j == 3;
        const AttnOperand *a = bias ? &attn_bias : &attn_operands[j];
        const Type *t = &L->g->node[n->in[j]].type;
        if (a->col < 0) { /* lse: the batch dims and the query */
            memcpy(idx, var, (size_t)nb * sizeof *var);
            idx[nb] = var[nb];
        } else
            operand_index(&G, t, &r, var, var[nb + a->row], var[nb + a->col], idx);
        if (bias)
            bias_broadcast(&G, t, ext, idx);
        ok = operand_strides(&G, m, j, idx, nvar, &buf, coef, &offset);
        if (ok)
            set_operand((GemmOperand *)((char *)out + a->field), buf, coef, offset, nb,
                        nb + a->row, nb + (a->col < 0 ? 3 : a->col));
    }
    values_free(&G);
    if (!ok) {
        if (!L->nretry && err_ok(L->e))
            err_set(L->e, ERR_MEMORY, "lowering: out of memory lowering an attention");
        return false;
    }
    if (out->kind == ATTN_LSE)
        out->v = out->k;
    out->has_bias = out->kind == ATTN_FORWARD && n->nin > 3;
    out->nbatch = nb;
    memcpy(out->batch, r.dim, (size_t)nb * sizeof *r.dim);
    out->tq = ext[0], out->tk = ext[1], out->d = ext[2].k;
    out->dv = out->kind == ATTN_LSE ? 0 : ext[3].k;
    out->causal = node_int(n, "causal") != 0;
    out->scale = node_float(n, "scale") != 0 ? node_float(n, "scale") : 1.0 / sqrt((double)out->d);
    Dim cols = out->kind == ATTN_LSE ? dim_static(1) : dim_static(out->dv);
    out->o.col_stride = out->kind == ATTN_LSE ? dim_static(0) : dim_static(1);
    out->o.row_stride = cols;
    if (!dense_batches(&out->o, r.dim, nb, out->tq, cols, &out->part))
        return too_large(L, m);
    if ((out->o.buf = L->node_buf[m] = new_c(L, m)) >= 0)
        L->buf_holds[out->o.buf] = m;
    return out->o.buf >= 0;
}
