/* lower.c — a graph of primitives to a Program: the fusion plan's groups become steps in
 * its order (a GEMM with its epilogue is one step), values get buffers (the leaves' own,
 * outputs', or temporaries reused in place), and every temporary's lifetime is recorded
 * for the memory plan. A group that cannot be lowered as planned fails the lowering with
 * its node marked for a group of its own, and the plan is made again (pipeline/
 * fuse_lower.c), so lowering never fuses what it cannot prove right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "codegen/index_bounds.h"
#include "codegen/lower_int.h"

/* ---------------------------------------------------------------- growing arrays */

static void *grow(void *arr, int *cap, int n, size_t size)
{
    if (n < *cap)
        return arr;
    int c = *cap ? 2 * *cap : 16;
    void *a = realloc(arr, (size_t)c * size);
    if (a)
        *cap = c;
    return a;
}

int lower_add_buffer(Lower *L, Buffer b)
{
    Program *p = L->p;
    Buffer *nb = grow(p->buf, &L->cap_buf, p->nbuf, sizeof *nb);
    int *holds = nb ? realloc(L->buf_holds, (size_t)L->cap_buf * sizeof *holds) : NULL;
    if (nb)
        p->buf = nb;
    if (!holds) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory for %d buffers", p->nbuf);
        return -1;
    }
    L->buf_holds = holds;
    holds[p->nbuf] = b.kind == BUF_TEMP ? b.index : -1;
    p->buf[p->nbuf] = b;
    return p->nbuf++;
}

int lower_add_kernel(Lower *L, const Kernel *k)
{
    Program *p = L->p;
    Kernel *nk = grow(p->kernel, &L->cap_kernel, p->nkernel, sizeof *nk);
    if (!nk) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory for %d kernels", p->nkernel);
        return -1;
    }
    p->kernel = nk;
    p->kernel[p->nkernel] = *k;
    return p->nkernel++;
}

/* Step s with the graph nodes it computes: a[0..na) and b[0..nb), each ascending (a
 * group's members and its epilogue's), merged into one ascending list in the arena. */
/* Two ascending node lists as one, in the program's arena (NULL, with the error set, when
 * out of memory); *n its length. */
static int *merged_nodes(Lower *L, int step, const int *a, int na, const int *b, int nb, int *n)
{
    int *node = arena_alloc(L->p->arena, ((size_t)na + (size_t)nb + 1) * sizeof *node);
    if (!node) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory for step %d's nodes", step);
        return NULL;
    }
    int i = 0, j = 0;
    *n = 0;
    while (i < na || j < nb)
        node[(*n)++] = j >= nb || (i < na && a[i] < b[j]) ? a[i++] : b[j++];
    return node;
}

static bool add_step(Lower *L, Step s, const int *a, int na, const int *b, int nb)
{
    Program *p = L->p;
    int n, *node = merged_nodes(L, p->nstep, a, na, b, nb, &n);
    if (!node)
        return false;
    s.node = node, s.nnode = n;
    Step *ns = grow(p->step, &L->cap_step, p->nstep, sizeof *ns);
    if (!ns) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory for %d steps", p->nstep);
        return false;
    }
    p->step = ns;
    p->step[p->nstep++] = s;
    return true;
}

/* A group's step (epi: the epilogue group a GEMM step also computes, or -1). */
static bool add_group_step(Lower *L, Step s, int grp, int epi)
{
    int na, nb = 0;
    const int *a = lower_members(L, grp, &na), *b = epi >= 0 ? lower_members(L, epi, &nb) : NULL;
    return add_step(L, s, a, na, b, nb);
}

bool lower_group_step(Lower *L, Step s, int grp) { return add_group_step(L, s, grp, -1); }

/* Asked for in this attempt; FORCE_OWN_GROUP from the next plan on. */
#define FORCE_NEXT 2

bool lower_retry(Lower *L, int node)
{
    if (L->force[node] == FORCE_OWN_GROUP) {
        err_at(L->e, L->g->node[node].loc, "lowering: %s cannot be lowered even on its own",
               op_info[L->g->node[node].op].name);
        return false;
    }
    if (L->force[node] != FORCE_NEXT) {
        L->nretry++;
        coil_log(LOG_DEBUG, "lower: %s (%s) cannot be lowered in its group as planned: it "
                 "gets a group of its own in the next plan", node_name(&L->g->node[node]),
                 op_info[L->g->node[node].op].name);
    }
    L->force[node] = FORCE_NEXT;
    return false;
}

void lower_index_check(Lower *L, int ids, Dim bound)
{
    const Graph *g = L->g;
    while (op_info[g->node[ids].op].flags & OPF_VIEW || g->node[ids].op == OP_CAST)
        ids = g->node[ids].in[0];
    int buf = L->leaf_buf[ids];
    Program *p = L->p;
    if (g->node[ids].op != OP_INPUT || buf < 0)
        return;
    for (int c = 0; c < p->ncheck; c++)
        if (p->check[c].buf == buf && dim_eq(p->check[c].bound, bound))
            return;
    IndexCheck *nc = grow(p->check, &L->cap_check, p->ncheck, sizeof *nc);
    if (!nc) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory");
        return;
    }
    p->check = nc;
    p->check[p->ncheck++] = (IndexCheck){buf, bound};
}

int lower_first_output(const Lower *L, int node) { return L->first_out[node]; }

const int *lower_members(const Lower *L, int grp, int *n)
{
    *n = L->member_start[grp + 1] - L->member_start[grp];
    return L->member + L->member_start[grp];
}

/* Each group's members (a counting sort of the nodes by group, so in node order) and
 * each node's outputs, built once: every per-group and per-output question is then
 * answered without walking the whole graph again. */
static bool index_plan(Lower *L)
{
    const Graph *g = L->g;
    const Fusion *f = L->f;
    size_t n = (size_t)g->nnode + 1, ng = (size_t)f->ngroup + 2;
    L->member_start = calloc(ng, sizeof(int));
    L->member = malloc(n * sizeof(int));
    L->first_out = malloc(n * sizeof(int));
    L->next_out = malloc(((size_t)g->noutput + 1) * sizeof(int));
    L->acc = malloc(n * sizeof(int));
    if (!L->member_start || !L->member || !L->first_out || !L->next_out || !L->acc)
        return false;
    for (int id = 0; id < g->nnode; id++) {
        L->acc[id] = L->first_out[id] = -1;
        if (f->group[id] >= 0)
            L->member_start[f->group[id] + 2]++;
    }
    for (int grp = 0; grp < f->ngroup; grp++)
        L->member_start[grp + 2] += L->member_start[grp + 1];
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] >= 0)
            L->member[L->member_start[f->group[id] + 1]++] = id;
    for (int o = g->noutput - 1; o >= 0; o--) { /* backwards: each node's chain in order */
        L->next_out[o] = L->first_out[g->output[o]];
        L->first_out[g->output[o]] = o;
    }
    return true;
}

/* ---------------------------------------------------------------- the leaves */

bool too_large(Lower *L, int node)
{
    char ty[256];
    err_at(L->e, L->g->node[node].loc, "lowering: %s has more elements than coil can count "
           "(a symbol cubed)", type_fmt(L->g, &L->g->node[node].type, ty, sizeof ty));
    return false;
}

static bool leaf_buffers(Lower *L)
{
    const Graph *g = L->g;
    int nparam = 0;
    for (int id = 0; id < g->nnode; id++) {
        const Node *n = &g->node[id];
        Buffer b = {.name = node_name(n), .dt = n->type.dt, .first = -1, .last = -1};
        if (!type_size(&n->type, &b.numel))
            return too_large(L, id);
        if (n->op == OP_INPUT) {
            b.kind = BUF_INPUT;
            for (int i = 0; i < g->ninput; i++)
                if (g->input[i] == id)
                    b.index = i;
        } else if (n->op == OP_PARAM) {
            b.kind = BUF_PARAM;
            b.index = nparam++;
        } else if (n->op == OP_CONSTANT && node_attr(n, "value")->n > 1) {
            b.kind = BUF_CONST;
            b.name = "const";
            b.data = node_attr(n, "value")->data;
        } else {
            continue;
        }
        if ((L->leaf_buf[id] = lower_add_buffer(L, b)) < 0)
            return false;
    }
    for (int o = 0; o < g->noutput; o++) {
        const Type *t = &g->node[g->output[o]].type;
        Buffer b = {.name = g->output_name[o], .kind = BUF_OUTPUT, .index = o, .dt = t->dt,
                    .first = -1, .last = -1};
        if (!type_size(t, &b.numel))
            return too_large(L, g->output[o]);
        if ((L->out_buf[o] = lower_add_buffer(L, b)) < 0)
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- index guards */

/* A gather (or index_check) whose index is computed from data is guarded at run time:
 * right before the step that reads it, a range step recomputes the index and reduces its
 * values to [min, max] in a buffer of its own, which the runner compares with the bound
 * after the run (codegen/index_bounds.h). Its kernel still clamps, so nothing faults. */

/* The index uses each step is preceded by range steps for, by the group owning the step
 * (a GEMM's for its epilogue's uses): group grp's are use[first[grp] .. first[grp + 1]). */
typedef struct Guards {
    int *first, *use;
} Guards;

static void guards_free(Guards *gd)
{
    free(gd->first);
    free(gd->use);
}

/* The group whose step a range step for node u precedes, or -1 when u needs none. */
static int guarded_by(const Lower *L, const bool *dep, int u)
{
    int grp = L->f->group[u];
    if (grp < 0 || !index_needs_range_step(L->g, u, dep))
        return -1;
    return L->f->g[grp].gemm >= 0 ? L->f->g[grp].gemm : grp;
}

static bool guards_init(Lower *L, Guards *gd)
{
    int n = L->g->nnode, ng = L->f->ngroup;
    bool *dep = value_depends_on_data(L->g);
    int *at = calloc((size_t)ng + 1, sizeof *at);
    gd->first = calloc((size_t)ng + 2, sizeof *gd->first);
    gd->use = malloc(((size_t)n + 1) * sizeof *gd->use);
    bool ok = dep && at && gd->first && gd->use;
    for (int u = 0; ok && u < n; u++) {
        int grp = guarded_by(L, dep, u);
        if (grp >= 0)
            gd->first[grp + 1]++;
    }
    for (int grp = 0; ok && grp < ng; grp++)
        gd->first[grp + 1] += gd->first[grp], at[grp] = gd->first[grp];
    for (int u = 0; ok && u < n; u++) {
        int grp = guarded_by(L, dep, u);
        if (grp >= 0)
            gd->use[at[grp]++] = u;
    }
    free(dep);
    free(at);
    if (!ok)
        err_set(L->e, ERR_MEMORY, "lowering: out of memory");
    return ok;
}

static int guard_count(const Guards *gd, int grp) { return gd->first[grp + 1] - gd->first[grp]; }

/* Whether the index can be computed again in a kernel of its own, right before its
 * reader's step: what it reads inside that group is pointwise (no accumulator), and what
 * it reads from other groups is already stored (not a GEMM product of the same step). */
static bool recomputable(const Lower *L, int index, int grp)
{
    const Graph *g = L->g;
    const Fusion *f = L->f;
    bool *seen = calloc((size_t)index + 1, sizeof *seen), ok = seen != NULL;
    if (ok)
        seen[index] = true;
    for (int x = index; ok && x >= 0; x--) { /* producers have lower ids */
        if (!seen[x] || L->leaf_buf[x] >= 0)
            continue;
        if (f->group[x] >= 0 && f->group[x] != grp) {
            ok = L->node_buf[x] >= 0;
            continue;
        }
        ok = f->cls[x] != NC_REDUCE && f->cls[x] != NC_MATMUL && f->cls[x] != NC_ATTENTION;
        for (int j = 0; ok && j < g->node[x].nin; j++)
            seen[g->node[x].in[j]] = true;
    }
    free(seen);
    return ok;
}

/* The range kernel: one inner loop per dim of the index, min and max reduced in one
 * phase, stored after it (a scalar index is stored as both). */
static bool range_kernel(Gen *G, int index, int buf, Kernel *k)
{
    const Type *t = &G->L->g->node[index].type;
    KB *kb = &G->kb;
    int idx[COIL_MAX_RANK];
    for (int d = 0; d < COIL_MAX_RANK; d++)
        G->full[d] = -1; /* no point of the group's space: no accumulator of it is read */
    for (int d = 0; d < t->rank; d++) {
        k->size[d] = t->dim[d];
        idx[d] = lx_var(kb, d, t->dim[d]);
    }
    k->nouter = 0, k->ninner = t->rank;
    int v = lx_cast(kb, DT_I64, value_at(G, index, idx)), lo = v, hi = v;
    if (v < 0)
        return false;
    if (t->rank > 0) {
        lo = lx_acc(kb, kb_reduce(kb, 0, OP_MIN, v, 0, DT_I64), DT_I64);
        hi = lx_acc(kb, kb_reduce(kb, 0, OP_MAX, v, 0, DT_I64), DT_I64);
    }
    kb_store(kb, -1, buf, lx_int(kb, 0), lo);
    kb_store(kb, -1, buf, lx_int(kb, 1), hi);
    return kb_finish(kb, G->L->p->arena, k);
}

/* The range step for index use `use` (or a retry with its index stored, when it cannot
 * be recomputed here). */
static bool range_step(Lower *L, int use)
{
    int index, grp = L->f->group[use];
    Dim bound;
    index_use(L->g, use, &index, &bound);
    if (!recomputable(L, index, grp))
        return lower_retry(L, index);
    Buffer rb = {.name = index_range_buffer, .kind = BUF_TEMP, .index = use, .dt = DT_I64,
                 .numel = dim_static(2), .first = -1, .last = -1};
    Gen G;
    Kernel k = {.group = -1};
    bool ok = values_init(&G, L, grp); /* values_free is safe after it either way */
    int buf = ok ? lower_add_buffer(L, rb) : -1;
    ok = buf >= 0 && range_kernel(&G, index, buf, &k);
    values_free(&G);
    char *name = ok ? arena_alloc(L->p->arena, 48) : NULL;
    if (name)
        snprintf(name, 48, "k%d_range_%s", L->p->nkernel, op_info[L->g->node[use].op].name);
    k.name = name;
    int ki = name ? lower_add_kernel(L, &k) : -1;
    if (ki < 0 && !L->nretry && err_ok(L->e))
        err_at(L->e, L->g->node[use].loc, "lowering: cannot build the range check of this %s",
               op_info[L->g->node[use].op].name);
    return ki >= 0 && add_step(L, (Step){.kind = STEP_KERNEL, .kernel = ki}, &use, 1, NULL, 0);
}

static bool range_steps(Lower *L, const Guards *gd, int grp)
{
    bool ok = true;
    for (int i = gd->first[grp]; i < gd->first[grp + 1]; i++)
        ok = range_step(L, gd->use[i]) && ok; /* with retries asked for, collect them all */
    return ok;
}

/* A range buffer is read by the runner after the run: nothing may reuse its bytes. */
static void keep_ranges_live(Program *p)
{
    for (int s = 0; s < p->nstep; s++) {
        int b = range_step_buffer(p, s);
        if (b >= 0)
            p->buf[b].last = p->nstep - 1;
    }
}

/* ---------------------------------------------------------------- steps */

/* Each group's step (an epilogue shares its GEMM's; a group's range steps come right
 * before its own), and the last step reading each stored node. */
static void number_steps(Lower *L, const Guards *gd)
{
    const Fusion *f = L->f;
    const Graph *g = L->g;
    for (int i = 0, s = -1; i < f->ngroup; i++) {
        int grp = f->order[i];
        if (f->g[grp].gemm >= 0) {
            L->step_of[grp] = s;
            continue;
        }
        s += guard_count(gd, grp) + scatter_steps_before(L, grp);
        L->step_of[grp] = ++s;
    }
    for (int id = 0; id < g->nnode; id++) {
        int grp = f->group[id];
        for (int j = 0; grp >= 0 && j < g->node[id].nin; j++) {
            int src = g->node[id].in[j];
            while (f->cls[src] == NC_VIEW)
                src = g->node[src].in[0];
            if (f->group[src] >= 0 && f->group[src] != grp && L->step_of[grp] > L->last_read[src])
                L->last_read[src] = L->step_of[grp];
        }
    }
}

/* The epilogue runs in the GEMM's tiles when its outer space is the GEMM's [rows, N] and
 * it reads C once, at var0 * N + var1 (lower_kernel checks the index): that load. */
static int epilogue_load(const Kernel *k, const Gemm *gm, bool identity)
{
    if (!identity || k->nouter != 2 || k->ninner != 0 || !dim_eq(k->size[1], gm->n))
        return -1;
    for (int id = 0; id < k->nlx; id++)
        if (k->lx[id].kind == LX_LOAD && k->lx[id].i == gm->c.buf)
            return id;
    return -1;
}

static bool gemm_step(Lower *L, int grp)
{
    Step st = {.kind = STEP_GEMM};
    if (!lower_gemm(L, grp, &st.gemm))
        return false;
    int epi = L->f->g[grp].epilogue;
    if (epi >= 0) {
        KernelCtx ctx = {L->p->nstep, {st.gemm.a.buf, st.gemm.b.buf}, st.gemm.c.buf, false};
        int k = lower_kernel(L, epi, &ctx);
        if (k < 0)
            return false;
        st.gemm.epilogue = k;
        st.gemm.epi_load = epilogue_load(&L->p->kernel[k], &st.gemm, ctx.c_identity);
    }
    return add_group_step(L, st, grp, epi);
}

static bool kernel_step(Lower *L, int grp)
{
    KernelCtx ctx = {L->p->nstep, {-1, -1}, -1, false};
    int k = lower_kernel(L, grp, &ctx);
    return k >= 0 && add_group_step(L, (Step){.kind = STEP_KERNEL, .kernel = k}, grp, -1);
}

/* A matmul of integers is a loop kernel; of floats a GEMM step. */
static bool matmul_step(Lower *L, int grp)
{
    if (dtype_info[L->f->g[grp].space.dt].is_float)
        return gemm_step(L, grp);
    KernelCtx ctx = {L->p->nstep, {-1, -1}, -1, false};
    int k = lower_contraction(L, grp, &ctx);
    return k >= 0 && add_group_step(L, (Step){.kind = STEP_KERNEL, .kernel = k}, grp, -1);
}

static bool same_operand(const GemmOperand *a, const GemmOperand *b, int nbatch)
{
    bool same = a->buf == b->buf && dim_eq(a->offset, b->offset) &&
                dim_eq(a->row_stride, b->row_stride) && dim_eq(a->col_stride, b->col_stride);
    for (int d = 0; same && d < nbatch; d++)
        same = dim_eq(a->batch_stride[d], b->batch_stride[d]);
    return same;
}

/* Whether forward f computes the scores lse's log-sum-exp is of: the same Q and K views,
 * sizes, mask and scale, and no bias (attention_lse has none). */
static bool same_scores(const Attention *f, const Attention *lse)
{
    bool same = f->kind == ATTN_FORWARD && !f->has_bias && !f->writes_lse &&
                f->nbatch == lse->nbatch && dim_eq(f->tq, lse->tq) && dim_eq(f->tk, lse->tk) &&
                f->d == lse->d && f->causal == lse->causal && f->scale == lse->scale &&
                same_operand(&f->q, &lse->q, f->nbatch) && same_operand(&f->k, &lse->k, f->nbatch);
    for (int d = 0; same && d < f->nbatch; d++)
        same = dim_eq(f->batch[d], lse->batch[d]);
    return same;
}

/* An attention_lse whose scores a forward step already computes (training's: autodiff's
 * rule reads the forward's q and k) is written by that step, which has each query's
 * maximum and sum at its end: one Q K^T pass fewer per layer. The step then computes the
 * lse node too. */
static bool merge_lse(Lower *L, int grp, const Attention *lse)
{
    Program *p = L->p;
    for (int s = p->nstep - 1; s >= 0; s--) {
        Step *st = &p->step[s];
        if (st->kind != STEP_ATTENTION || !same_scores(&st->attn, lse))
            continue;
        int nm, n;
        const int *members = lower_members(L, grp, &nm);
        int *node = merged_nodes(L, s, st->node, st->nnode, members, nm, &n);
        if (!node)
            return false;
        st->node = node, st->nnode = n;
        st->attn.writes_lse = true;
        st->attn.lse = lse->o;
        return true;
    }
    return false;
}

static bool attention_step(Lower *L, int grp)
{
    Step st = {.kind = STEP_ATTENTION};
    if (!lower_attention(L, grp, &st.attn))
        return false;
    if (st.attn.kind == ATTN_LSE && (merge_lse(L, grp, &st.attn) || !err_ok(L->e)))
        return err_ok(L->e);
    return add_group_step(L, st, grp, -1);
}

/* An output nothing stored (a matmul's result returned twice): a copy of its value. */
static bool copy_step(Lower *L, int node, int dst)
{
    const Type *t = &L->g->node[node].type;
    int src = L->leaf_buf[node] >= 0 ? L->leaf_buf[node] : L->node_buf[node];
    Dim n;
    if (!type_size(t, &n))
        return too_large(L, node);
    KB kb;
    kb_init(&kb);
    Kernel k = {.nouter = 1, .size = {n}, .group = -1, .name = "copy"};
    int v = lx_var(&kb, 0, n);
    kb_store(&kb, -1, dst, v, lx_load(&kb, src, t->dt, v));
    bool ok = src >= 0 && kb_finish(&kb, L->p->arena, &k);
    kb_free(&kb);
    int ki = ok ? lower_add_kernel(L, &k) : -1;
    if (!ok && err_ok(L->e))
        err_set(L->e, ERR_INPUT, "lowering: cannot copy output '%s'", L->p->buf[dst].name);
    return ki >= 0 && add_step(L, (Step){.kind = STEP_KERNEL, .kernel = ki}, &node, 1, NULL, 0);
}

/* Per buffer: whether some step writes it (one pass over the program). */
static void mark_stored(const Program *p, bool *stored)
{
    for (int s = 0; s < p->nstep; s++) {
        const Step *st = &p->step[s];
        if (st->kind == STEP_GEMM)
            stored[st->gemm.c.buf] = true;
        if (st->kind == STEP_ATTENTION) {
            stored[st->attn.o.buf] = true;
            if (st->attn.writes_lse)
                stored[st->attn.lse.buf] = true;
            continue;
        }
        int k = st->kind == STEP_KERNEL ? st->kernel : st->gemm.epilogue;
        for (int i = 0; k >= 0 && i < p->kernel[k].nstmt; i++)
            if (p->kernel[k].stmt[i].kind == ST_STORE)
                stored[p->kernel[k].stmt[i].buf] = true;
    }
}

static bool copy_unwritten_outputs(Lower *L)
{
    bool *stored = calloc((size_t)L->p->nbuf + 1, sizeof *stored);
    if (!stored) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory");
        return false;
    }
    mark_stored(L->p, stored);
    bool ok = true;
    for (int o = 0; ok && o < L->g->noutput; o++)
        ok = stored[L->out_buf[o]] || copy_step(L, L->g->output[o], L->out_buf[o]);
    free(stored);
    return ok;
}

/* ---------------------------------------------------------------- lifetimes */

static void touch(Program *p, int b, int step)
{
    Buffer *buf = &p->buf[b];
    if (buf->first < 0 || step < buf->first)
        buf->first = step;
    if (step > buf->last)
        buf->last = step;
}

static void touch_kernel(Program *p, int k, int step)
{
    const Kernel *kn = &p->kernel[k];
    for (int id = 0; id < kn->nlx; id++)
        if (kn->lx[id].kind == LX_LOAD)
            touch(p, (int)kn->lx[id].i, step);
    for (int s = 0; s < kn->nstmt; s++)
        if (kn->stmt[s].kind == ST_STORE)
            touch(p, kn->stmt[s].buf, step);
}

static void lifetimes(Lower *L)
{
    Program *p = L->p;
    for (int s = 0; s < p->nstep; s++) {
        Step *st = &p->step[s];
        if (st->kind == STEP_KERNEL) {
            touch_kernel(p, st->kernel, s);
            continue;
        }
        if (st->kind == STEP_ATTENTION) {
            const Attention *a = &st->attn;
            const GemmOperand *ops[7] = {&a->q, &a->k, &a->v, &a->o, &a->fo, &a->dout, &a->lse};
            for (int i = 0; i < (a->kind == ATTN_BACKWARD ? 7 : 4); i++)
                touch(p, ops[i]->buf, s);
            if (a->has_bias)
                touch(p, a->bias.buf, s);
            if (a->writes_lse)
                touch(p, a->lse.buf, s);
            continue;
        }
        Gemm *gm = &st->gemm;
        touch(p, gm->a.buf, s);
        touch(p, gm->b.buf, s);
        touch(p, gm->c.buf, s);
        if (gm->epilogue >= 0)
            touch_kernel(p, gm->epilogue, s);
    }
    for (int s = 0; s < p->nstep; s++) {
        Gemm *gm = &p->step[s].gemm;
        if (p->step[s].kind == STEP_GEMM) /* the product is read after this step, or returned */
            gm->c_live = p->buf[gm->c.buf].kind == BUF_OUTPUT ||
                         L->last_read[p->buf[gm->c.buf].index] > s;
    }
}

/* ---------------------------------------------------------------- one attempt */

static bool lower_steps(Lower *L, const Guards *gd)
{
    const Fusion *f = L->f;
    number_steps(L, gd);
    for (int i = 0; i < f->ngroup; i++) {
        int grp = f->order[i];
        if (f->g[grp].gemm >= 0)
            continue; /* lowered with its GEMM */
        FuseKind kind = f->g[grp].kind;
        bool ok = range_steps(L, gd, grp);
        ok = (kind == FUSE_GEMM ? matmul_step(L, grp)
              : kind == FUSE_ATTENTION ? attention_step(L, grp)
              : kind == FUSE_SCATTER   ? lower_scatter(L, grp)
                                       : kernel_step(L, grp)) && ok;
        if (!ok && !(L->nretry && err_ok(L->e)))
            return false; /* with retries asked for, go on: collect them all in one pass */
    }
    if (L->nretry)
        return false;
    if (!copy_unwritten_outputs(L))
        return false;
    lifetimes(L);
    keep_ranges_live(L->p);
    return true;
}

static bool lower_once(Lower *L)
{
    int n = L->g->nnode + 1;
    L->leaf_buf = malloc((size_t)n * sizeof(int));
    L->node_buf = malloc((size_t)n * sizeof(int));
    L->last_read = malloc((size_t)n * sizeof(int));
    L->out_buf = malloc(((size_t)L->g->noutput + 1) * sizeof(int));
    L->step_of = malloc(((size_t)L->f->ngroup + 1) * sizeof(int));
    if (!L->leaf_buf || !L->node_buf || !L->last_read || !L->out_buf || !L->step_of ||
        !index_plan(L)) {
        err_set(L->e, ERR_MEMORY, "lowering: out of memory");
        return false;
    }
    for (int i = 0; i < n; i++)
        L->leaf_buf[i] = L->node_buf[i] = L->last_read[i] = -1;
    Guards gd = {0};
    bool ok = leaf_buffers(L) && guards_init(L, &gd);
    if (ok)
        scatter_outputs(L);
    ok = ok && lower_steps(L, &gd);
    guards_free(&gd);
    return ok;
}

static void lower_release(Lower *L)
{
    free(L->leaf_buf);
    free(L->node_buf);
    free(L->last_read);
    free(L->out_buf);
    free(L->step_of);
    free(L->buf_holds);
    free(L->member_start);
    free(L->member);
    free(L->first_out);
    free(L->next_out);
    free(L->acc);
}

static void *arena_copy(Arena *a, const void *src, size_t n)
{
    void *dst = arena_alloc(a, n ? n : 1);
    if (dst && n)
        memcpy(dst, src, n);
    return dst;
}

/* The arrays built with realloc, moved into the program's arena. */
static bool settle(Program *p)
{
    Buffer *b = arena_copy(p->arena, p->buf, (size_t)p->nbuf * sizeof *b);
    Kernel *k = arena_copy(p->arena, p->kernel, (size_t)p->nkernel * sizeof *k);
    Step *s = arena_copy(p->arena, p->step, (size_t)p->nstep * sizeof *s);
    IndexCheck *c = arena_copy(p->arena, p->check, (size_t)p->ncheck * sizeof *c);
    free(p->buf);
    free(p->kernel);
    free(p->step);
    free(p->check);
    p->buf = b;
    p->kernel = k;
    p->step = s;
    p->check = c;
    return b && k && s && c;
}

static void discard(Program *p)
{
    if (!p)
        return;
    if (p->arena)
        arena_free(p->arena);
    free(p);
}

/* FORCE_NEXT, asked for in this attempt, becomes FORCE_OWN_GROUP for the next plan:
 * fuse_plan knows only FORCE_*, and lower_retry must tell a node already on its own (an
 * error) from one asked for earlier in this same attempt (counted once). */
static void force_for_next_plan(uint8_t *force, int nnode)
{
    for (int id = 0; id < nnode; id++)
        force[id] = force[id] ? FORCE_OWN_GROUP : FORCE_NONE;
}

Program *lower_fused(const Graph *g, const Fusion *f, uint8_t *force, int *nretry, Err *e)
{
    Program *p = calloc(1, sizeof *p);
    Lower L = {.g = g, .f = f, .p = p, .e = e, .force = force};
    bool ok = p && (p->arena = arena_new()) != NULL;
    if (!ok)
        err_set(e, ERR_MEMORY, "lowering: out of memory");
    if (ok) {
        p->graph = g;
        bool built = lower_once(&L);
        ok = settle(p) && built; /* settle frees the realloc'd arrays either way */
    }
    *nretry = L.nretry;
    lower_release(&L);
    force_for_next_plan(force, g->nnode);
    if (ok)
        return p;
    discard(p);
    return NULL;
}
