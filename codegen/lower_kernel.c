/* lower_kernel.c — a pointwise or row group as one loop kernel: the group's space as loop
 * variables, each stored member built at its point (full points in the phase after the
 * accumulators it reads, outer points after every phase), then its buffer chosen: in
 * place of a buffer this kernel reads for the last time when that is safe, else new. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower_int.h"

/* ---------------------------------------------------------------- the space */

/* One loop variable over dims[0..n) of the space, the dims recovered by div and mod
 * (which the index algebra folds away again where memory is dense). */
static bool flatten(Gen *G, Kernel *k, const Type *s, const int *dims, int n)
{
    Dim prod = dim_static(1), inner = dim_static(1);
    for (int i = 0; i < n; i++)
        if (!dim_times(prod, s->dim[dims[i]], &prod))
            return false;
    int var = lx_var(&G->kb, k->nouter, prod);
    k->size[k->nouter++] = prod;
    for (int i = n - 1; i >= 0; i--) {
        Dim size = s->dim[dims[i]];
        G->full[dims[i]] = ix_mod(&G->kb, ix_div(&G->kb, var, inner), size);
        dim_times(inner, size, &inner);
    }
    return true;
}

static void own_vars(Gen *G, Kernel *k, const Type *s, const int *dims, int n)
{
    for (int i = 0; i < n; i++) {
        G->full[dims[i]] = lx_var(&G->kb, k->nouter, s->dim[dims[i]]);
        k->size[k->nouter++] = s->dim[dims[i]];
    }
}

/* A conv GEMM's epilogue over y[N, M, s...]: rows N*M and columns the output positions,
 * the GEMM's own [rows, N], so its tiles can run it (codegen/lower_conv.c). */
static bool conv_epilogue_space(Gen *G, Kernel *k, const FuseGroup *grp)
{
    int n, dims[COIL_MAX_RANK];
    const int *member = grp->kind == FUSE_POINTWISE && grp->gemm >= 0
                            ? lower_members(G->L, grp->gemm, &n) : NULL;
    const Node *conv = member && n > 0 ? &G->L->g->node[member[0]] : NULL;
    if (!conv || conv->op != OP_CONV || !type_same_shape(&conv->type, &grp->space))
        return false;
    for (int d = 0; d < grp->space.rank; d++)
        dims[d] = d;
    return flatten(G, k, &grp->space, dims, 2) &&
           flatten(G, k, &grp->space, dims + 2, grp->space.rank - 2);
}

/* Outer variables: a row group's kept dims flattened into one (rows); a pointwise
 * group's dims but the last flattened (rows), the last its own (columns, the vector
 * loop). Inner variables: one per reduced dim, in order. */
void lower_space(Gen *G, Kernel *k, const FuseGroup *grp)
{
    const Type *s = &grp->space;
    unsigned inner = grp->kind == FUSE_ROW ? grp->inner : 0;
    if (conv_epilogue_space(G, k, grp))
        return;
    int kept[COIL_MAX_RANK], nk = 0, reduced[COIL_MAX_RANK], nr = 0;
    for (int d = 0; d < s->rank; d++) {
        if (inner >> d & 1)
            reduced[nr++] = d;
        else
            kept[nk++] = d;
    }
    int merge = grp->kind == FUSE_ROW ? nk : nk - 1;
    if (merge > 1 && !flatten(G, k, s, kept, merge))
        own_vars(G, k, s, kept, merge);
    else if (merge == 1)
        own_vars(G, k, s, kept, 1);
    if (merge < 0)
        merge = 0;
    own_vars(G, k, s, kept + merge, nk - merge);
    for (int j = 0; j < nr; j++) {
        int v = k->nouter + j;
        G->inner_var[reduced[j]] = v;
        G->full[reduced[j]] = lx_var(&G->kb, v, s->dim[reduced[j]]);
        k->size[v] = s->dim[reduced[j]];
    }
    k->ninner = nr;
}

/* ---------------------------------------------------------------- roots */

/* A stored member's point: the full point when it has the space's shape, else the outer
 * point (the reduced dims at 0 when kept, dropped when not). */
static bool root_index(const Gen *G, const FuseGroup *grp, const Type *t, int *idx, KB *kb)
{
    if (grp->kind == FUSE_POINTWISE || type_same_shape(t, &grp->space)) {
        memcpy(idx, G->full, (size_t)t->rank * sizeof *idx);
        return true;
    }
    bool keep = t->rank == grp->space.rank;
    for (int d = 0, k = 0; d < grp->space.rank; d++) {
        if (!(grp->inner >> d & 1))
            idx[k++] = G->full[d];
        else if (keep)
            idx[k++] = lx_int(kb, 0);
    }
    return false;
}

static bool store_roots(Gen *G, const FuseGroup *grp)
{
    Lower *L = G->L;
    int nm;
    const int *member = lower_members(L, G->grp, &nm);
    for (int i = 0; i < nm; i++) {
        int id = member[i];
        if (!L->f->stored[id])
            continue;
        const Type *t = &L->g->node[id].type;
        int idx[COIL_MAX_RANK];
        bool full = root_index(G, grp, t, idx, &G->kb);
        int v = value_at(G, id, idx), index = dense_index_at(G, t, idx);
        if (v < 0 || index < 0)
            return false;
        int phase = grp->kind == FUSE_ROW && full ? G->kb.phase_of[v] + 1 : -1;
        kb_store(&G->kb, phase, PENDING_BUF(id), index, v);
        int first = lower_first_output(L, id);
        for (int o = first >= 0 ? L->next_out[first] : -1; o >= 0; o = L->next_out[o])
            if (L->out_buf[o] != L->out_buf[first]) /* returned again under another name */
                kb_store(&G->kb, phase, L->out_buf[o], index, v);
    }
    return !G->kb.oom;
}

/* ---------------------------------------------------------------- buffers */

/* Whether the value of expression id depends on a load of buffer b, per expression. */
static void loads_of(const Kernel *k, int b, bool *dep)
{
    for (int id = 0; id < k->nlx; id++) {
        const Lx *x = &k->lx[id];
        dep[id] = (x->kind == LX_LOAD && x->i == b) || (x->a >= 0 && dep[x->a]) ||
                  (x->b >= 0 && dep[x->b]) || (x->c >= 0 && dep[x->c]);
    }
}

/* Statement s may write buffer b in place of its own when every load of b reads the very
 * element s writes, no later statement reads b, and nothing else here writes b. */
static bool safe_in_place(const Kernel *k, int s, int b, bool *dep)
{
    const LStmt *st = &k->stmt[s];
    for (int id = 0; id < k->nlx; id++)
        if (k->lx[id].kind == LX_LOAD && k->lx[id].i == b && k->lx[id].a != st->index)
            return false;
    loads_of(k, b, dep);
    for (int t = 0; t < k->nstmt; t++) {
        const LStmt *u = &k->stmt[t];
        bool reads = dep[u->value] || (u->kind == ST_STORE && dep[u->index]);
        if ((t > s && reads) || (u->kind == ST_STORE && u->buf == b))
            return false;
    }
    return true;
}

/* A temporary this kernel reads for the last time, of node's dtype and size, not one of
 * `busy` (a GEMM's operands, read while its epilogue writes). */
static int in_place(Lower *L, const Kernel *k, int s, int node, int step, const int *busy,
                    bool *dep)
{
    const Type *t = &L->g->node[node].type;
    Dim numel;
    bool sized = type_size(t, &numel);
    for (int id = 0; sized && id < k->nlx; id++) {
        int b = (int)k->lx[id].i;
        if (k->lx[id].kind != LX_LOAD || b == busy[0] || b == busy[1])
            continue;
        const Buffer *buf = &L->p->buf[b];
        if (buf->kind == BUF_TEMP && buf->dt == t->dt && dim_eq(buf->numel, numel) &&
            L->last_read[L->buf_holds[b]] == step && safe_in_place(k, s, b, dep))
            return b;
    }
    return -1;
}

static int new_temp(Lower *L, int node)
{
    const Type *t = &L->g->node[node].type;
    char *name = arena_alloc(L->p->arena, 16);
    if (name)
        snprintf(name, 16, "t%d", node);
    Buffer b = {.name = name, .kind = BUF_TEMP, .index = node, .dt = t->dt, .first = -1,
                .last = -1};
    if (!type_size(t, &b.numel))
        return too_large(L, node) ? 0 : -1;
    return lower_add_buffer(L, b);
}

/* Give every pending store its buffer: the output's, one in place, or a new temporary. */
static bool resolve_buffers(Lower *L, Kernel *k, int step, const int *busy)
{
    bool *dep = malloc(((size_t)k->nlx + 1) * sizeof *dep);
    bool ok = dep != NULL;
    for (int s = 0; ok && s < k->nstmt; s++) {
        LStmt *st = &k->stmt[s];
        if (st->kind != ST_STORE || st->buf >= 0)
            continue;
        int node = PENDING_NODE(st->buf);
        if (L->node_buf[node] < 0) {
            int out = lower_first_output(L, node);
            int b = out >= 0 ? L->out_buf[out] : in_place(L, k, s, node, step, busy, dep);
            L->node_buf[node] = b >= 0 ? b : new_temp(L, node);
            if (L->node_buf[node] >= 0)
                L->buf_holds[L->node_buf[node]] = node;
        }
        st->buf = L->node_buf[node];
        ok = st->buf >= 0;
    }
    free(dep);
    if (!ok)
        err_set(L->e, ERR_MEMORY, "lowering: out of memory choosing buffers");
    return ok;
}

/* ---------------------------------------------------------------- the kernel */

/* The position of node id among a group's members (sorted), or -1. */
static int member_pos(const int *member, int n, int id)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (member[mid] == id)
            return mid;
        if (member[mid] < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Too many phases: the first reduction in the last phase a kernel can hold gets a group
 * of its own, which ends a segment of the kernel: the next segment loads what it reads
 * of earlier ones (phase -1 again). Past that cut, the phases members would have are
 * followed in node order (a reduction one above its operands', anything else theirs) and
 * cut the same way, so a fused chain of many reductions (a stack of layer norms) is cut
 * where each retry in turn would cut it, in one new plan rather than one plan per cut.
 * A kernel that could not be built (it reads a group that failed: a new plan is due
 * anyway) is cut by those phases alone, so a chain of such groups is cut in one plan too. */
static void split_phases(Gen *G, bool built)
{
    const Graph *g = G->L->g;
    const Fusion *f = G->L->f;
    int nm, first = -1, seg = 0;
    const int *member = lower_members(G->L, G->grp, &nm);
    for (int i = 0; built && i < nm && first < 0; i++) {
        int acc = G->acc[member[i]];
        if (acc >= 0 && G->kb.stmt_phase[acc] >= LOOP_MAX_PHASES - 1)
            first = i;
    }
    if (built && first < 0)
        return;
    if (built)
        lower_retry(G->L, member[first]), seg = 1;
    /* Out of memory for these, only that first cut is made: the next plan finds the rest. */
    int *phase = calloc((size_t)nm + 1, sizeof *phase);
    int *seg_of = calloc((size_t)nm + 1, sizeof *seg_of); /* up to that cut: segment 0 */
    for (int i = first + 1; phase && seg_of && i < nm; i++) {
        const Node *n = &g->node[member[i]];
        int p = -1;
        for (int j = 0; j < n->nin; j++) {
            int o = n->in[j];
            while (f->cls[o] == NC_VIEW)
                o = g->node[o].in[0];
            int at = member_pos(member, nm, o);
            if (at >= 0 && seg_of[at] == seg && phase[at] > p)
                p = phase[at];
        }
        phase[i] = p + (f->cls[member[i]] == NC_REDUCE);
        seg_of[i] = seg;
        if (phase[i] < LOOP_MAX_PHASES - 1)
            continue;
        if (G->L->force[member[i]] != FORCE_OWN_GROUP) /* else its group is its own already */
            lower_retry(G->L, member[i]);
        seg++;
    }
    free(phase);
    free(seg_of);
}

static const char *kernel_name(Lower *L, int index, int grp)
{
    const char *what = "copy";
    int nm;
    const int *member = lower_members(L, grp, &nm);
    for (int i = nm - 1; i >= 0; i--)
        if (L->f->stored[member[i]]) {
            what = op_info[L->g->node[member[i]].op].name;
            break;
        }
    char *name = arena_alloc(L->p->arena, 48);
    if (name)
        snprintf(name, 48, "k%d_%s", index, what);
    return name;
}

/* Whether the kernel's only load of buffer c is at var0 * N + var1 (N its var1 extent). */
static bool reads_c_at_point(Gen *G, const Kernel *k, int c)
{
    if (k->nouter != 2 || k->ninner != 0)
        return false;
    int var[2] = {lx_var(&G->kb, 0, k->size[0]), lx_var(&G->kb, 1, k->size[1])};
    Dim stride[2] = {k->size[1], dim_static(1)};
    int point = ix_linear(&G->kb, 2, var, stride, dim_static(0)), loads = 0;
    for (int id = 0; id < G->kb.nlx; id++)
        if (G->kb.lx[id].kind == LX_LOAD && G->kb.lx[id].i == c) {
            if (G->kb.lx[id].a != point)
                return false;
            loads++;
        }
    return loads == 1;
}

int lower_kernel(Lower *L, int grp, KernelCtx *ctx)
{
    Gen G;
    Kernel k = {.group = grp};
    const FuseGroup *fg = &L->f->g[grp];
    bool ok = values_init(&G, L, grp);
    if (ok) {
        lower_space(&G, &k, fg);
        bool built = store_roots(&G, fg);
        if (built && ctx->c_buf >= 0)
            ctx->c_identity = reads_c_at_point(&G, &k, ctx->c_buf);
        ok = built && kb_finish(&G.kb, L->p->arena, &k);
        if (!ok && !G.kb.oom && err_ok(L->e) && (built || (L->nretry && fg->kind == FUSE_ROW)))
            split_phases(&G, built);
    }
    if (!ok && !L->nretry && err_ok(L->e))
        err_set(L->e, ERR_MEMORY, "lowering: out of memory building a kernel");
    values_free(&G);
    if (!ok)
        return -1;
    k.name = kernel_name(L, L->p->nkernel, grp);
    return lower_place(L, &k, ctx);
}

int lower_place(Lower *L, Kernel *k, const KernelCtx *ctx)
{
    if (!resolve_buffers(L, k, ctx->step, ctx->busy))
        return -1;
    return lower_add_kernel(L, k);
}
