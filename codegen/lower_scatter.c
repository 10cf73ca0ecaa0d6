/* lower_scatter.c — an index_add group as its steps: the base's value into the buffer the
 * adds go to, then one kernel over src's points adding each into its row with a store that
 * adds (loop.h: the CPU runs it on one thread, CUDA adds atomically).
 *
 * The first step is a copy only when it must be. A base nothing else reads, stored by a
 * group of its own and not returned, gives the result its buffer (an embedding's table
 * gradient adds into the tied output head's GEMM product where it lies); when the result
 * is returned, the base's group stores straight into the output's buffer instead. A base
 * that is a full (zeros: an untied embedding) becomes a fill.
 *
 * f16 and bf16 add in an f32 buffer of their own, converted into the result by a last
 * step: the sum is a reduction, and reductions of those dtypes accumulate in f32 and round
 * once (loop.h), where adding in place would round at every add. */
#include <stdio.h>

#include "codegen/lower_int.h"

static bool is_half(DType dt) { return dt == DT_F16 || dt == DT_BF16; }

/* Whether node x is read by exactly one live node (graph outputs are checked apart). */
static bool read_once(const Lower *L, int x)
{
    int uses = 0;
    for (int id = x + 1; id < L->g->nnode && uses < 2; id++) {
        const Node *n = &L->g->node[id];
        for (int j = 0; j < n->nin && L->f->cls[id] != NC_DEAD; j++)
            uses += n->in[j] == x;
    }
    return uses == 1;
}

bool scatter_in_place(const Lower *L, int id)
{
    int base = L->g->node[id].in[0];
    return !is_half(L->g->node[id].type.dt) && L->f->group[base] >= 0 && L->f->stored[base] &&
           lower_first_output(L, base) < 0 && read_once(L, base);
}

int scatter_steps_before(const Lower *L, int grp)
{
    int n;
    if (L->f->g[grp].kind != FUSE_SCATTER)
        return 0;
    int id = lower_members(L, grp, &n)[0];
    return is_half(L->g->node[id].type.dt) ? 2 : !scatter_in_place(L, id);
}

void scatter_outputs(Lower *L)
{
    for (int id = L->g->nnode - 1; id >= 0; id--) { /* a chain of them: the last first */
        if (L->f->cls[id] != NC_SCATTER || !scatter_in_place(L, id))
            continue;
        int out = lower_first_output(L, id);
        int target = L->node_buf[id] >= 0 ? L->node_buf[id] : out >= 0 ? L->out_buf[out] : -1;
        if (target >= 0)
            L->node_buf[L->g->node[id].in[0]] = target;
    }
}

/* ---------------------------------------------------------------- kernels */

static const char *scatter_name(Lower *L, const char *what)
{
    char *name = arena_alloc(L->p->arena, 48);
    if (name)
        snprintf(name, 48, "k%d_%s", L->p->nkernel, what);
    return name;
}

/* A kernel over every point of the result (node id's type): buf (PENDING_BUF(id): the
 * result's own) = the value of node `from` (base, or an f32 buffer's load when from is
 * -1) in buf's dtype. */
static int whole_kernel(Lower *L, int grp, int id, int from, int acc, int buf, const char *what)
{
    Gen G;
    const Type *t = &L->g->node[id].type;
    FuseGroup space = {.kind = FUSE_POINTWISE, .space = *t, .gemm = -1, .epilogue = -1};
    Kernel k = {.group = grp};
    KernelCtx ctx = {L->p->nstep, {-1, -1}, -1, false};
    bool ok = values_init(&G, L, grp);
    if (ok) {
        lower_space(&G, &k, &space);
        int at = dense_index_at(&G, t, G.full);
        int v = from >= 0 ? value_at(&G, from, G.full) : lx_load(&G.kb, acc, DT_F32, at);
        DType dt = buf >= 0 ? L->p->buf[buf].dt : t->dt;
        ok = v >= 0 && at >= 0 && kb_store(&G.kb, -1, buf, at, lx_cast(&G.kb, dt, v)) >= 0 &&
             kb_finish(&G.kb, L->p->arena, &k);
    }
    values_free(&G);
    k.name = scatter_name(L, what);
    return ok && k.name ? lower_place(L, &k, &ctx) : -1;
}

/* src's point p adds into buf at (idx[p's first dims], p's other dims): the row clamped,
 * so that no store can fault; the runner checks the indices (index_bounds.h). */
static bool add_point(Gen *G, int id, int buf)
{
    const Node *n = &G->L->g->node[id];
    const Type *t = &n->type;
    int rank = G->L->g->node[n->in[1]].type.rank, at[COIL_MAX_RANK];
    int row = value_at(G, n->in[1], G->full);
    if (row < 0)
        return false;
    at[0] = ix_clamp(&G->kb, lx_cast(&G->kb, DT_I64, row), t->dim[0]);
    lower_index_check(G->L, n->in[1], t->dim[0]);
    for (int d = 1; d < t->rank; d++)
        at[d] = G->full[rank + d - 1];
    int v = value_at(G, n->in[2], G->full), index = dense_index_at(G, t, at);
    return v >= 0 && index >= 0 &&
           kb_store_add(&G->kb, -1, buf, index, lx_cast(&G->kb, G->L->p->buf[buf].dt, v)) >= 0;
}

static int add_kernel(Lower *L, int grp, int id, int buf)
{
    Gen G;
    Kernel k = {.group = grp};
    KernelCtx ctx = {L->p->nstep, {-1, -1}, -1, false};
    bool ok = values_init(&G, L, grp);
    if (ok) {
        lower_space(&G, &k, &L->f->g[grp]);
        ok = add_point(&G, id, buf) && kb_finish(&G.kb, L->p->arena, &k);
    }
    values_free(&G);
    k.name = scatter_name(L, "index_add");
    return ok && k.name ? lower_place(L, &k, &ctx) : -1;
}

/* ---------------------------------------------------------------- the group */

/* The base's buffer taken over by the result (scatter_in_place). */
static bool take_base(Lower *L, int id)
{
    int base = L->g->node[id].in[0];
    if (L->node_buf[base] < 0) { /* its group failed: fine while a new plan is due */
        if (!L->nretry)
            err_set(L->e, ERR_INPUT, "lowering: index_add node %d's base is read before its "
                    "group ran", id);
        return false;
    }
    L->node_buf[id] = L->node_buf[base];
    L->buf_holds[L->node_buf[id]] = id;
    return true;
}

static bool step_of_kernel(Lower *L, int k, int grp)
{
    return k >= 0 && lower_group_step(L, (Step){.kind = STEP_KERNEL, .kernel = k}, grp);
}

/* f16/bf16: base into a new f32 buffer, the adds there, then the result converted. */
static int lower_half(Lower *L, int grp, int id)
{
    const Type *t = &L->g->node[id].type;
    Buffer b = {.name = "acc", .kind = BUF_TEMP, .index = id, .dt = DT_F32, .first = -1,
                .last = -1};
    if (!type_size(t, &b.numel)) {
        too_large(L, id);
        return -1;
    }
    int acc = lower_add_buffer(L, b), base = L->g->node[id].in[0];
    bool ok = acc >= 0 && step_of_kernel(L, whole_kernel(L, grp, id, base, -1, acc,
                                                         "index_add_base"), grp) &&
              step_of_kernel(L, add_kernel(L, grp, id, acc), grp);
    return ok ? whole_kernel(L, grp, id, -1, acc, PENDING_BUF(id), "index_add_round") : -1;
}

bool lower_scatter(Lower *L, int grp)
{
    int n;
    int id = lower_members(L, grp, &n)[0], base = L->g->node[id].in[0];
    if (is_half(L->g->node[id].type.dt))
        return step_of_kernel(L, lower_half(L, grp, id), grp);
    bool ready = scatter_in_place(L, id)
                     ? take_base(L, id)
                     : step_of_kernel(L, whole_kernel(L, grp, id, base, -1, PENDING_BUF(id),
                                                      "index_add_base"), grp);
    return ready && step_of_kernel(L, add_kernel(L, grp, id, L->node_buf[id]), grp);
}
