/* fuse.c — the fusion plan: nodes grouped into kernels, consumers first.
 *
 * Nodes are visited from the last to the first, so every consumer of a node has its group
 * when the node is decided. A node whose consumers all sit in one group, and that fits
 * that group's iteration space, joins it and is computed inline (never stored). A node
 * that must be stored — an output, a matmul operand, a value several groups read — joins
 * one of its consumers' groups as a stored root when it fits and no cycle of groups
 * results, else starts a group of its own. Reductions join a group whose space is their
 * operand's shape and whose inner axes are theirs, turning a pointwise group into a row
 * group (softmax, layer_norm, cross_entropy each become one kernel of a few phases).
 * Afterwards a GEMM takes a pointwise group reading its result at the same index as its
 * epilogue, and groups of one space that read a common buffer merge (horizontal fusion).
 * A group holds at most FUSE_MAX_NODES nodes: a longer chain is cut into several kernels.
 * Views are never grouped: lowering turns them into index expressions wherever used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "passes/fuse.h"

/* Working state: the plan being built, users, and each group's members as a list. */
typedef struct Plan {
    const Graph *g;
    Fusion *f;
    const FuseOptions *o;
    bool *output;     /* per node: a graph output */
    bool *operand;    /* per node: read by a matmul (through views): must be a buffer */
    int *user_start;  /* CSR of direct users */
    int *user;
    int *next;        /* per node: the next member of its group, -1 at the end */
    int *head;        /* per group: its first member */
    int *size;        /* per group: its members */
    int cap_group;
    int max_nodes;    /* the most members a group takes (INT32_MAX: no limit) */
    int *mark;        /* per node: DFS visit stamp */
    int stamp;
    int *stack;       /* DFS stack */
    int *scratch;     /* a node's reader groups */
    int *walk;        /* each_user's stack: one entry per use at most */
    /* Once the groups are made (epilogues and siblings): a position per unit (a GEMM and
     * its epilogue are one unit) with every unit after those it needs, and scratch for
     * walks over units: per group a visit stamp, lists and a stack of ngroup entries. */
    int *ord;
    int *umark, ustamp;
    int *ustack, *ulist_f, *ulist_b;
    int64_t *upool;
    int *num;         /* COIL_LOG=debug: statement numbers for the log lines, else NULL */
    int nsibling;     /* sibling merges made (for the log's summary) */
} Plan;

/* ---------------------------------------------------------------- classes */

unsigned reduce_axes(const Node *n, int rank)
{
    const Attr *a = node_attr(n, n->op == OP_ARGMAX ? "axis" : "axes");
    unsigned mask = 0;
    if (n->op == OP_ARGMAX) {
        int axis;
        return axis_norm(a->i, rank, &axis) ? 1u << axis : 0;
    }
    for (int i = 0; i < a->n; i++) {
        int axis;
        if (axis_norm(a->ints[i], rank, &axis))
            mask |= 1u << axis;
    }
    return a->n ? mask : (rank ? (1u << rank) - 1 : 0);
}

static bool is_view(const Node *n) { return op_info[n->op].flags & OPF_VIEW; }

/* copy: the node must have a buffer of its own even if it is a view or a leaf (an
 * output, or what lowering asked for). */
static NodeClass classify(const Graph *g, int id, bool copy)
{
    const Node *n = &g->node[id];
    unsigned fl = op_info[n->op].flags;
    if (copy && (fl & (OPF_VIEW | OPF_LEAF)))
        return NC_ELEMENT; /* stored by a copy kernel */
    if (n->op == OP_INPUT || n->op == OP_PARAM)
        return NC_BUFFER;
    if (n->op == OP_CONSTANT)
        return node_attr(n, "value")->n > 1 ? NC_BUFFER : NC_INLINE;
    if (fl & OPF_LEAF)
        return NC_INLINE;
    if (fl & OPF_VIEW)
        return NC_VIEW;
    if (fl & OPF_REDUCE)
        return NC_REDUCE;
    if (n->op == OP_MATMUL || n->op == OP_CONV) /* conv: a GEMM over x's windows */
        return NC_MATMUL;
    if (is_attention_op(n->op))
        return NC_ATTENTION;
    if (n->op == OP_INDEX_ADD)
        return NC_SCATTER;
    if (fl & OPF_COMPOSITE)
        return NC_DEAD; /* rejected by fuse_plan */
    return NC_ELEMENT;
}

static bool is_compute(NodeClass c)
{
    return c == NC_ELEMENT || c == NC_REDUCE || c == NC_MATMUL || c == NC_ATTENTION ||
           c == NC_SCATTER;
}

/* A step of its own whose operands are read as strided buffers. */
static bool is_step_op(int op) { return op == OP_MATMUL || op == OP_CONV || is_attention_op(op); }

/* Live nodes (what an output needs), which feed a matmul (those need a buffer: an inline
 * leaf or a view there is stored by a copy when lowering cannot read it in place), and
 * every node's class. */
static void classify_all(Plan *p, bool *live)
{
    const Graph *g = p->g;
    for (int i = 0; i < g->noutput; i++)
        p->output[g->output[i]] = live[g->output[i]] = true;
    for (int id = g->nnode - 1; id >= 0; id--)
        for (int j = 0; live[id] && j < g->node[id].nin; j++)
            live[g->node[id].in[j]] = true;
    for (int id = g->nnode - 1; id >= 0; id--) {
        const Node *n = &g->node[id];
        bool feeds = is_step_op(n->op) || (is_view(n) && p->operand[id]);
        for (int j = 0; feeds && live[id] && j < n->nin; j++)
            p->operand[n->in[j]] = true;
    }
    for (int id = 0; id < g->nnode; id++) {
        bool forced = p->o->force && p->o->force[id] == FORCE_OWN_GROUP;
        NodeClass c = live[id] ? classify(g, id, p->output[id] || forced) : NC_DEAD;
        p->f->cls[id] = c == NC_INLINE && p->operand[id] ? NC_ELEMENT : c;
    }
}

static bool build_users(Plan *p)
{
    const Graph *g = p->g;
    int total = 0;
    for (int id = 0; id < g->nnode; id++)
        total += g->node[id].nin;
    p->user_start = calloc((size_t)g->nnode + 2, sizeof(int));
    p->user = malloc(((size_t)total + 1) * sizeof(int));
    p->walk = malloc(((size_t)total + 1) * sizeof(int));
    if (!p->user_start || !p->user || !p->walk)
        return false;
    for (int id = 0; id < g->nnode; id++)
        for (int j = 0; j < g->node[id].nin; j++)
            p->user_start[g->node[id].in[j] + 2]++;
    for (int id = 0; id < g->nnode; id++)
        p->user_start[id + 2] += p->user_start[id + 1];
    for (int id = 0; id < g->nnode; id++)
        for (int j = 0; j < g->node[id].nin; j++)
            p->user[p->user_start[g->node[id].in[j] + 1]++] = id;
    return true;
}

/* ---------------------------------------------------------------- groups */

static int new_group(Plan *p, FuseKind kind, const Type *space, unsigned inner)
{
    Fusion *f = p->f;
    if (f->ngroup == p->cap_group) {
        int cap = p->cap_group ? 2 * p->cap_group : 64;
        FuseGroup *ng = realloc(f->g, (size_t)cap * sizeof *ng);
        int *nh = ng ? realloc(p->head, (size_t)cap * sizeof *nh) : NULL;
        if (ng)
            f->g = ng;
        if (nh)
            p->head = nh;
        int *ns = nh ? realloc(p->size, (size_t)cap * sizeof *ns) : NULL;
        if (!ns)
            return -1;
        p->size = ns;
        p->cap_group = cap;
    }
    f->g[f->ngroup] = (FuseGroup){kind, *space, inner, -1, -1};
    p->head[f->ngroup] = -1;
    p->size[f->ngroup] = 0;
    return f->ngroup++;
}

static void join(Plan *p, int id, int grp, bool stored)
{
    p->f->group[id] = grp;
    p->f->stored[id] = stored;
    p->next[id] = p->head[grp];
    p->head[grp] = id;
    p->size[grp]++;
}

/* The operand reached through a chain of views (a compute node, a leaf). */
static int through_views(const Graph *g, const Fusion *f, int id)
{
    while (f->cls[id] == NC_VIEW)
        id = g->node[id].in[0];
    return id;
}

/* Calls fn for each compute node that reads id, looking through views (an output view
 * is both a reader — its copy — and transparent for its own readers), depth first in use
 * order. A view has one operand, so each use is pushed once: the stack needs one entry
 * per use, however long a chain of views is. */
typedef void (*UserFn)(Plan *p, int user, void *ctx);

static void push_users(Plan *p, int id, int *sp)
{
    for (int k = p->user_start[id + 1] - 1; k >= p->user_start[id]; k--)
        p->walk[(*sp)++] = p->user[k]; /* reversed: the first use is popped first */
}

static void each_user(Plan *p, int id, UserFn fn, void *ctx)
{
    int sp = 0;
    push_users(p, id, &sp);
    while (sp) {
        int u = p->walk[--sp];
        if (p->f->cls[u] == NC_DEAD)
            continue;
        if (is_view(&p->g->node[u])) {
            if (p->f->cls[u] == NC_ELEMENT)
                fn(p, u, ctx);
            push_users(p, u, &sp);
        } else if (is_compute(p->f->cls[u])) {
            fn(p, u, ctx);
        }
    }
}

/* ---------------------------------------------------------------- shapes */

/* s with the axes in mask set to 1 (keep) or dropped. */
static Type reduced(const Type *s, unsigned mask, bool keep)
{
    Type r = {.dt = s->dt};
    for (int d = 0; d < s->rank; d++)
        if (!(mask >> d & 1))
            r.dim[r.rank++] = s->dim[d];
        else if (keep)
            r.dim[r.rank++] = dim_static(1);
    return r;
}

/* t is the shape of a value at the outer points of a row space. */
static bool outer_shape(const Type *t, const Type *s, unsigned inner)
{
    Type a = reduced(s, inner, true), b = reduced(s, inner, false);
    return type_same_shape(t, &a) || type_same_shape(t, &b);
}

/* t broadcasts into s (numpy, aligned at the right): each dim equal or a static 1. */
static bool broadcasts_into(const Type *t, const Type *s)
{
    int lead = s->rank - t->rank;
    for (int d = 0; lead >= 0 && d < t->rank; d++)
        if (!dim_eq(t->dim[d], s->dim[lead + d]) && !dim_eq(t->dim[d], dim_static(1)))
            return false;
    return lead >= 0;
}

/* t's element count as k * symbols; false when a symbol repeats. */
static bool count(const Type *t, Dim *n)
{
    *n = dim_static(1);
    for (int d = 0; d < t->rank; d++) {
        if ((n->syms & t->dim[d].syms) || __builtin_mul_overflow(n->k, t->dim[d].k, &n->k))
            return false;
        n->syms |= t->dim[d].syms;
    }
    return true;
}

/* t has at least as many elements as s: computed inline where a view of it is read (a
 * transpose, a reshape, a slice), each of its elements costs at most once per point. */
static bool covers(const Type *t, const Type *s)
{
    Dim a, b;
    return count(t, &a) && count(s, &b) && a.syms == b.syms && a.k >= b.k;
}

/* ---------------------------------------------------------------- decisions */

static const Type *operand_type(const Plan *p, int id, int j)
{
    return &p->g->node[p->g->node[id].in[j]].type;
}

/* Whether node id can be computed in group grp: inline (every value it gives is used
 * there) or stored (it also writes its buffer, so its shape must be a point of the
 * space), and grp has room for it. A reduction fits a row group over its operand with
 * its axes, or a pointwise group over its operand or over its result, which then becomes
 * that row group. NULL when it fits, else why not (COIL_LOG=debug prints it). */
static const char *misfit(const Plan *p, int id, int grp, bool stored)
{
    const Node *n = &p->g->node[id];
    const FuseGroup *G = &p->f->g[grp];
    if (G->kind == FUSE_GEMM || G->kind == FUSE_ATTENTION || G->kind == FUSE_SCATTER)
        return "a matmul, attention or index_add is a step of its own";
    if (p->size[grp] >= p->max_nodes)
        return "the group is full (FUSE_MAX_NODES)";
    if (p->f->cls[id] == NC_ELEMENT) {
        if (type_same_shape(&n->type, &G->space))
            return NULL;
        if (G->kind == FUSE_ROW && outer_shape(&n->type, &G->space, G->inner))
            return NULL;
        if (!stored && (broadcasts_into(&n->type, &G->space) || covers(&n->type, &G->space)))
            return NULL;
        return stored ? "different space (a stored value must have the group's shape)"
                      : "different space (neither the same shape, nor broadcast into it, nor "
                        "covering it)";
    }
    const Type *in = operand_type(p, id, 0);
    unsigned mask = reduce_axes(n, in->rank);
    if (mask == 0)
        return "a reduction over no axis";
    if (G->kind == FUSE_ROW)
        return type_same_shape(in, &G->space) && mask == G->inner
                   ? NULL : "different space (a row group over another shape or other axes)";
    return type_same_shape(in, &G->space) || type_same_shape(&n->type, &G->space)
               ? NULL : "different space (neither its operand's shape nor its result's)";
}

static bool fits(const Plan *p, int id, int grp, bool stored) { return !misfit(p, id, grp, stored); }

static void join_fitting(Plan *p, int id, int grp, bool stored)
{
    FuseGroup *G = &p->f->g[grp];
    const Node *n = &p->g->node[id];
    if (p->f->cls[id] == NC_REDUCE && G->kind == FUSE_POINTWISE) {
        const Type *in = operand_type(p, id, 0);
        *G = (FuseGroup){FUSE_ROW, *in, reduce_axes(n, in->rank), -1, -1};
    }
    join(p, id, grp, stored);
}

/* Whether a member of group `from` reads, through any chain of nodes above `floor`, a
 * member of group `to`. Consumers are decided first, so every node on such a chain is. */
static bool reaches(Plan *p, int from, int to, int floor)
{
    int sp = 0;
    p->stamp++;
    for (int m = p->head[from]; m >= 0; m = p->next[m]) {
        p->mark[m] = p->stamp;
        p->stack[sp++] = m;
    }
    while (sp) {
        const Node *n = &p->g->node[p->stack[--sp]];
        for (int j = 0; j < n->nin; j++) {
            int o = n->in[j];
            if (o <= floor || p->mark[o] == p->stamp)
                continue;
            if (p->f->group[o] == to)
                return true;
            p->mark[o] = p->stamp;
            p->stack[sp++] = o;
        }
    }
    return false;
}

/* The distinct groups of a node's readers. */
typedef struct GroupSet {
    int *g;
    int n;
} GroupSet;

static void add_user_group(Plan *p, int user, void *ctx)
{
    GroupSet *s = ctx;
    int grp = p->f->group[user];
    for (int i = 0; i < s->n; i++)
        if (s->g[i] == grp)
            return;
    s->g[s->n++] = grp;
}

/* Storing node id in grp makes every other reader's group depend on grp: none of them
 * may be something grp itself depends on. */
static bool makes_cycle(Plan *p, int id, int grp, const GroupSet *readers)
{
    for (int i = 0; i < readers->n; i++)
        if (readers->g[i] != grp && reaches(p, grp, readers->g[i], id))
            return true;
    return false;
}

/* A stored node joins a reader's group where it fits, row groups first (the value a
 * normalisation reads and a residual add reuses is computed once, in the norm). */
static bool join_a_reader(Plan *p, int id, const GroupSet *readers)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < readers->n; i++) {
            int grp = readers->g[i];
            if ((p->f->g[grp].kind == FUSE_ROW) != (pass == 0))
                continue;
            if (fits(p, id, grp, true) && !makes_cycle(p, id, grp, readers)) {
                join_fitting(p, id, grp, true);
                return true;
            }
        }
    return false;
}

static bool own_group(Plan *p, int id)
{
    const Node *n = &p->g->node[id];
    NodeClass c = p->f->cls[id];
    int grp;
    if (c == NC_MATMUL)
        grp = new_group(p, FUSE_GEMM, &n->type, 0);
    else if (c == NC_ATTENTION)
        grp = new_group(p, FUSE_ATTENTION, &n->type, 0);
    else if (c == NC_SCATTER)
        grp = new_group(p, FUSE_SCATTER, operand_type(p, id, 2), 0);
    else if (c == NC_REDUCE) {
        const Type *in = operand_type(p, id, 0);
        grp = new_group(p, FUSE_ROW, in, reduce_axes(n, in->rank));
    } else
        grp = new_group(p, FUSE_POINTWISE, &n->type, 0);
    if (grp >= 0)
        join(p, id, grp, true);
    return grp >= 0;
}

static void log_stored(Plan *p, int id, const GroupSet *readers, bool forced, bool joined);

static bool decide(Plan *p, int id, int *scratch)
{
    GroupSet readers = {scratch, 0};
    if (is_step_op(p->g->node[id].op) || p->f->cls[id] == NC_SCATTER)
        return own_group(p, id);
    each_user(p, id, add_user_group, &readers);
    bool forced = p->o->off || (p->o->force && p->o->force[id] == FORCE_OWN_GROUP);
    bool store = forced || p->output[id] || p->operand[id] || readers.n != 1;
    if (!store && fits(p, id, readers.g[0], false)) {
        join_fitting(p, id, readers.g[0], false);
        return true;
    }
    if (!forced && join_a_reader(p, id, &readers)) {
        if (p->num)
            log_stored(p, id, &readers, forced, true);
        return true;
    }
    if (p->num)
        log_stored(p, id, &readers, forced, false);
    return own_group(p, id);
}

/* ---------------------------------------------------------------- the log */

/* Statement numbers as ir_print and fuse_print number them (inputs by name), so a log
 * line can be read beside `coil dump --after=fuse`. */
static int *statement_numbers(const Graph *g)
{
    int *num = malloc(((size_t)g->nnode + 1) * sizeof *num), k = 0;
    for (int id = 0; num && id < g->nnode; id++)
        num[id] = g->node[id].op == OP_INPUT ? -1 : k++;
    return num;
}

/* "%12 add f32[B,768] (gpt2.coil:41:5)", or "%x ..." for an input. */
static const char *node_text(const Plan *p, int id, char *buf, size_t n)
{
    const Node *nd = &p->g->node[id];
    char ty[128], at[160] = "";
    type_fmt(p->g, &nd->type, ty, sizeof ty);
    if (nd->loc.file)
        snprintf(at, sizeof at, " (%s:%d:%d)", nd->loc.file, nd->loc.line, nd->loc.col);
    if (p->num[id] < 0)
        snprintf(buf, n, "%%%s %s%s", node_name(nd), ty, at);
    else
        snprintf(buf, n, "%%%d %s %s%s", p->num[id], op_info[nd->op].name, ty, at);
    return buf;
}

static const char *const kind_name[FUSE_KIND_COUNT] = {"pointwise", "row", "gemm", "attention",
                                                       "scatter"};

/* "the row group of %18 sum": a group named by its latest member (numbers change when
 * groups merge; members do not). */
static const char *group_text(const Plan *p, int grp, int skip, char *buf, size_t n)
{
    int m = p->head[grp];
    if (m == skip && m >= 0 && p->next[m] >= 0)
        m = p->next[m]; /* a node just joined names the group by another member */
    snprintf(buf, n, "the %s group of %%%d %s", kind_name[p->f->g[grp].kind], m >= 0 ? p->num[m] : -1,
             m >= 0 ? op_info[p->g->node[m].op].name : "?");
    return buf;
}

static const char *why_stored(const Plan *p, int id, const GroupSet *readers, bool forced,
                              char *buf, size_t n)
{
    if (forced)
        snprintf(buf, n, "%s", p->o->off ? "fusion is off" : "lowering asked for a kernel of its own");
    else if (p->output[id])
        snprintf(buf, n, "a graph output");
    else if (p->operand[id])
        snprintf(buf, n, "a matmul operand");
    else if (readers->n != 1)
        snprintf(buf, n, "read by %d groups", readers->n);
    else
        snprintf(buf, n, "its one reader's group refused it");
    return buf;
}

/* A node that could not be computed inline where it is read: stored, by a reader's group
 * (joined) or by a group of its own, with each reader's group's reason for refusing it. */
static void log_stored(Plan *p, int id, const GroupSet *readers, bool forced, bool joined)
{
    char me[320], why[96], grp[128];
    node_text(p, id, me, sizeof me);
    why_stored(p, id, readers, forced, why, sizeof why);
    if (joined) {
        group_text(p, p->f->group[id], id, grp, sizeof grp);
        coil_log(LOG_DEBUG, "fuse: %s: stored (%s) by %s", me, why, grp);
        return;
    }
    coil_log(LOG_DEBUG, "fuse: %s: stored (%s) by a kernel of its own", me, why);
    for (int i = 0; !forced && i < readers->n; i++) {
        const char *no = misfit(p, id, readers->g[i], true);
        if (!no && makes_cycle(p, id, readers->g[i], readers))
            no = "a cycle of groups (that group needs a group reading this value)";
        group_text(p, readers->g[i], -1, grp, sizeof grp);
        coil_log(LOG_DEBUG, "fuse:   refused by %s: %s", grp, no ? no : "?");
    }
}

/* ---------------------------------------------------------------- epilogues */

/* Group grp reads matmul m only as a same-shape pointwise operand (so at the very index
 * it computes), and through no other group: it can run inside m's tiles. */
static bool reads_only_at_identity(Plan *p, int grp, int m)
{
    const Type *c = &p->g->node[m].type;
    for (int k = p->user_start[m]; k < p->user_start[m + 1]; k++) {
        int u = p->user[k];
        if (p->f->cls[u] == NC_DEAD || p->f->group[u] != grp)
            continue;
        const Node *n = &p->g->node[u];
        if (!(op_info[n->op].flags & OPF_POINTWISE) || !type_same_shape(&n->type, c))
            return false;
    }
    for (int x = p->head[grp]; x >= 0; x = p->next[x]) { /* a view of m read in grp */
        const Node *n = &p->g->node[x];
        for (int j = 0; j < n->nin; j++)
            if (p->f->cls[n->in[j]] == NC_VIEW && through_views(p->g, p->f, n->in[j]) == m)
                return false;
    }
    return true;
}

/* No path from grp to m's group other than grp's direct reads of m. m's group is m
 * alone (a GEMM), and nodes below m cannot reach it: the walk stops there, so it costs
 * what lies between grp and m, not the whole graph below. */
static bool depends_only_directly(Plan *p, int grp, int m)
{
    int sp = 0, gm = p->f->group[m];
    p->stamp++;
    for (int x = p->head[grp]; x >= 0; x = p->next[x]) {
        p->mark[x] = p->stamp;
        p->stack[sp++] = x;
    }
    while (sp) {
        int x = p->stack[--sp];
        const Node *n = &p->g->node[x];
        for (int j = 0; j < n->nin; j++) {
            int o = n->in[j];
            if (p->f->group[o] == gm && p->f->group[x] != grp)
                return false; /* reached m through another group */
            if (o <= m || p->mark[o] == p->stamp)
                continue;
            p->mark[o] = p->stamp;
            p->stack[sp++] = o;
        }
    }
    return true;
}

/* The group a group is scheduled with: an epilogue runs inside its GEMM's step. */
static int unit_of(const Fusion *f, int grp) { return f->g[grp].gemm >= 0 ? f->g[grp].gemm : grp; }

/* Whether group `from` needs group `to` to have run, counting a GEMM and its epilogue as
 * one step (the order's unit): a group that reads a GEMM's product waits for its epilogue
 * too, so reading a product whose epilogue reads `to` is needing `to`, though no chain of
 * nodes says so. A unit placed before to's (p->ord) cannot need it: the walk skips those,
 * so it only covers what lies between the two. */
static bool unit_reaches(Plan *p, int from, int to)
{
    Fusion *f = p->f;
    int sp = 0, stamp = ++p->ustamp, floor = p->ord[unit_of(f, to)];
    if (p->ord[unit_of(f, from)] < floor)
        return false;
    p->umark[from] = stamp, p->ustack[sp++] = from;
    while (sp) {
        int grp = p->ustack[--sp];
        for (int x = p->head[grp]; x >= 0; x = p->next[x]) {
            const Node *n = &p->g->node[x];
            for (int j = 0; j < n->nin; j++) {
                int dep = f->group[through_views(p->g, f, n->in[j])];
                if (dep < 0 || dep == grp)
                    continue;
                int unit = unit_of(f, dep), parts[2] = {unit, f->g[unit].epilogue};
                for (int k = 0; k < 2; k++) {
                    if (parts[k] == to)
                        return true;
                    if (parts[k] >= 0 && p->umark[parts[k]] != stamp && p->ord[unit] > floor)
                        p->umark[parts[k]] = stamp, p->ustack[sp++] = parts[k];
                }
            }
        }
    }
    return false;
}

/* ---------------------------------------------------------------- keeping the unit order */

/* Merging two units (an epilogue into its GEMM's, or two siblings) can put a unit between
 * them out of order. Only the units positioned between the two are looked at (Pearce and
 * Kelly's dynamic topological order): those the later one needs (B) move before the
 * merged unit, those that need the earlier one (F) after it, each set in its own order,
 * into the positions they and the two held. A chain of such merges costs what lies
 * between each pair, not a walk of the graph. */
typedef struct Region {
    int lo, hi;  /* positions of the earlier and the later unit: the walk stays between */
    int mark, other; /* this walk's stamp; the other walk's (a unit in both: a cycle) */
    int *list, n;
    bool clash;
} Region;

static void region_add(Plan *p, int unit, Region *r)
{
    int at = p->ord[unit];
    if (at <= r->lo || at >= r->hi || p->umark[unit] == r->mark)
        return;
    r->clash |= p->umark[unit] == r->other;
    p->umark[unit] = r->mark;
    r->list[r->n++] = unit;
}

static void add_user_unit(Plan *p, int user, void *ctx)
{
    if (p->f->group[user] >= 0)
        region_add(p, unit_of(p->f, p->f->group[user]), ctx);
}

/* Every unit that reads unit u's parts (users) or that they read (deps), added to r. */
static void near_units(Plan *p, int u, bool users, Region *r)
{
    int parts[2] = {u, p->f->g[u].epilogue};
    for (int k = 0; k < 2; k++)
        for (int x = parts[k] >= 0 ? p->head[parts[k]] : -1; x >= 0; x = p->next[x]) {
            if (users) {
                each_user(p, x, add_user_unit, r);
                continue;
            }
            for (int j = 0; j < p->g->node[x].nin; j++) {
                int dep = p->f->group[through_views(p->g, p->f, p->g->node[x].in[j])];
                if (dep >= 0)
                    region_add(p, unit_of(p->f, dep), r);
            }
        }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The units of r sorted by position, as (position << 32 | unit) in out. */
static void by_position(const Plan *p, const Region *r, int64_t *out)
{
    for (int i = 0; i < r->n; i++)
        out[i] = (int64_t)p->ord[r->list[i]] << 32 | r->list[i];
    qsort(out, (size_t)r->n, sizeof *out, cmp_i64);
}

/* Units a and b become one, named keep; positions repaired as above. Called while the
 * two are still apart (siblings) or just joined (an epilogue: the joined parts add no
 * reads between the two, so the walks are the same). */
static void merge_positions(Plan *p, int a, int b, int keep)
{
    int lo = p->ord[a] < p->ord[b] ? a : b, hi = lo == a ? b : a;
    Region f = {p->ord[lo], p->ord[hi], ++p->ustamp, -1, p->ulist_f, 0, false};
    Region bk = {p->ord[lo], p->ord[hi], ++p->ustamp, f.mark, p->ulist_b, 0, false};
    near_units(p, lo, true, &f);
    for (int i = 0; i < f.n; i++)
        near_units(p, f.list[i], true, &f);
    near_units(p, hi, false, &bk);
    for (int i = 0; i < bk.n; i++)
        near_units(p, bk.list[i], false, &bk);
    if (bk.clash)
        return; /* a cycle: the callers have ruled it out */
    int64_t *fs = p->upool, *bs = fs + f.n, *slot = bs + bk.n;
    by_position(p, &f, fs);
    by_position(p, &bk, bs);
    int nslot = 0; /* the positions the moved units and the two held, in order */
    for (int i = 0; i < f.n; i++)
        slot[nslot++] = fs[i] >> 32;
    for (int i = 0; i < bk.n; i++)
        slot[nslot++] = bs[i] >> 32;
    slot[nslot++] = p->ord[lo], slot[nslot++] = p->ord[hi];
    qsort(slot, (size_t)nslot, sizeof *slot, cmp_i64);
    for (int i = 0; i < bk.n; i++) /* B lowest, then the merged unit, F highest */
        p->ord[(int)(bs[i] & 0xffffffff)] = (int)slot[i];
    p->ord[keep] = (int)slot[bk.n];
    for (int i = 0; i < f.n; i++)
        p->ord[(int)(fs[i] & 0xffffffff)] = (int)slot[nslot - f.n + i];
}

/* Whether grp as GEMM gm's epilogue would close a cycle of steps: a group grp reads
 * (other than gm's own unit) needs gm's unit, its epilogue now included (a GEMM whose
 * operand is built from gm's product while grp also reads that GEMM's result). */
static bool epilogue_cycles(Plan *p, int grp, int gm)
{
    Fusion *f = p->f;
    for (int x = p->head[grp]; x >= 0; x = p->next[x]) {
        const Node *n = &p->g->node[x];
        for (int j = 0; j < n->nin; j++) {
            int dep = f->group[through_views(p->g, f, n->in[j])];
            if (dep < 0 || dep == grp || unit_of(f, dep) == gm)
                continue;
            if (unit_reaches(p, unit_of(f, dep), gm) ||
                (f->g[unit_of(f, dep)].epilogue >= 0 &&
                 unit_reaches(p, f->g[unit_of(f, dep)].epilogue, gm)))
                return true;
        }
    }
    return false;
}

/* Why group grp cannot be matmul m's epilogue (NULL: it can, cycles aside). */
static const char *epilogue_misfit(Plan *p, int grp, int m)
{
    const FuseGroup *G = &p->f->g[grp];
    if (G->kind != FUSE_POINTWISE)
        return "not a pointwise group";
    if (G->gemm >= 0)
        return "already another GEMM's epilogue";
    if (!type_same_shape(&G->space, &p->g->node[m].type))
        return "a different shape from the product's";
    if (!reads_only_at_identity(p, grp, m))
        return "reads the product at another index (through a view or a broadcast)";
    if (!depends_only_directly(p, grp, m))
        return "reads the product through another group too";
    return NULL;
}

static void log_epilogue(Plan *p, int m, int grp, const char *refused)
{
    if (!p->num)
        return;
    char me[320], g[128];
    node_text(p, m, me, sizeof me);
    group_text(p, grp, -1, g, sizeof g);
    if (refused)
        coil_log(LOG_DEBUG, "fuse: gemm %s: epilogue %s refused: %s", me, g, refused);
    else
        coil_log(LOG_DEBUG, "fuse: gemm %s: epilogue %s", me, g);
}

static void choose_epilogues(Plan *p, int *scratch)
{
    Fusion *f = p->f;
    for (int gm = 0; gm < f->ngroup; gm++) {
        if (f->g[gm].kind != FUSE_GEMM || !dtype_info[f->g[gm].space.dt].is_float)
            continue; /* an integer matmul is a loop kernel, with no epilogue */
        int m = p->head[gm];
        GroupSet readers = {scratch, 0};
        each_user(p, m, add_user_group, &readers);
        for (int i = 0; i < readers.n; i++) {
            int grp = readers.g[i];
            FuseGroup *G = &f->g[grp];
            const char *refused = epilogue_misfit(p, grp, m);
            if (refused) {
                log_epilogue(p, m, grp, refused);
                continue;
            }
            f->g[gm].epilogue = grp;
            G->gemm = gm;
            if (!epilogue_cycles(p, grp, gm)) {
                merge_positions(p, gm, grp, gm);
                log_epilogue(p, m, grp, NULL);
                break;
            }
            log_epilogue(p, m, grp, "a cycle of steps (a group it reads needs this GEMM)");
            f->g[gm].epilogue = G->gemm = -1; /* not this one: try the next reader */
        }
    }
}

/* ---------------------------------------------------------------- horizontal fusion */

/* Whether groups a and b read a common buffer (a leaf or another group's stored node). */
static bool share_a_read(Plan *p, int a, int b)
{
    p->stamp++;
    int stamp_a = p->stamp;
    for (int pass = 0; pass < 2; pass++)
        for (int x = p->head[pass ? b : a]; x >= 0; x = p->next[x]) {
            const Node *n = &p->g->node[x];
            for (int j = 0; j < n->nin; j++) {
                int o = through_views(p->g, p->f, n->in[j]);
                bool buffer = p->f->cls[o] == NC_BUFFER ||
                              (p->f->stored[o] && p->f->group[o] != a && p->f->group[o] != b);
                if (!buffer)
                    continue;
                if (pass == 1 && p->mark[o] == stamp_a)
                    return true;
                if (pass == 0)
                    p->mark[o] = stamp_a;
            }
        }
    return false;
}

static bool same_space(const FuseGroup *a, const FuseGroup *b)
{
    return a->kind == b->kind && a->kind != FUSE_GEMM && a->kind != FUSE_ATTENTION &&
           a->kind != FUSE_SCATTER &&
           a->gemm < 0 && b->gemm < 0 &&
           a->inner == b->inner && type_same_shape(&a->space, &b->space);
}

static void merge_into(Plan *p, int a, int b)
{
    int last = -1;
    for (int x = p->head[b]; x >= 0; x = p->next[x]) {
        p->f->group[x] = a;
        last = x;
    }
    if (last >= 0) {
        p->next[last] = p->head[a];
        p->head[a] = p->head[b];
    }
    p->head[b] = -1;
    p->size[a] += p->size[b];
    p->size[b] = 0;
}

/* Siblings further apart than this many nodes are not merged: the later one would run at
 * the earlier one's step and hold its results from there to its own consumers. That is
 * the pair a recomputation and the forward op it repeats make (passes/remat.c): merged,
 * the backward's recomputation would move back into the forward and save nothing. */
#define SIBLING_WINDOW 48

/* Each group's first node, and the group whose first node each node is (groups
 * partition the nodes, so no node is the first of two): the groups near a group are
 * found by looking at the 2 * SIBLING_WINDOW + 1 nodes around its first. */
typedef struct Firsts {
    int *of_group; /* per group: its smallest member */
    int *group_at; /* per node: the group it is the first node of, or -1 */
} Firsts;

static bool firsts_make(const Plan *p, Firsts *fs)
{
    const Fusion *f = p->f;
    fs->of_group = malloc(((size_t)f->ngroup + 1) * sizeof(int));
    fs->group_at = malloc(((size_t)f->nnode + 1) * sizeof(int));
    if (!fs->of_group || !fs->group_at)
        return false;
    for (int grp = 0; grp < f->ngroup; grp++)
        fs->of_group[grp] = -1;
    for (int x = 0; x < f->nnode; x++) {
        int grp = f->group[x];
        fs->group_at[x] = -1;
        if (grp >= 0 && fs->of_group[grp] < 0) /* ascending x: the smallest */
            fs->of_group[grp] = x, fs->group_at[x] = grp;
    }
    return true;
}

static void firsts_free(Firsts *fs)
{
    free(fs->of_group);
    free(fs->group_at);
}

/* The smallest live group above `after` whose first node is near a's. */
static int next_near(const Plan *p, const Firsts *fs, int a, int after)
{
    int at = fs->of_group[a], best = -1;
    int lo = at - SIBLING_WINDOW < 0 ? 0 : at - SIBLING_WINDOW;
    int hi = at + SIBLING_WINDOW >= p->f->nnode ? p->f->nnode - 1 : at + SIBLING_WINDOW;
    for (int x = lo; x <= hi; x++) {
        int b = fs->group_at[x];
        if (b > after && (best < 0 || b < best) && p->head[b] >= 0 && fs->of_group[b] == x)
            best = b;
    }
    return best;
}

static void merge_near(Plan *p, Firsts *fs, int a, int b)
{
    if (p->num) {
        char ga[128], gb[128];
        coil_log(LOG_DEBUG, "fuse: siblings merged: %s and %s (one space, a common read)",
                 group_text(p, a, -1, ga, sizeof ga), group_text(p, b, -1, gb, sizeof gb));
    }
    p->nsibling++;
    merge_positions(p, a, b, a);
    merge_into(p, a, b);
    if (fs->of_group[b] < fs->of_group[a]) {
        fs->group_at[fs->of_group[a]] = -1;
        fs->of_group[a] = fs->of_group[b];
        fs->group_at[fs->of_group[a]] = a;
    }
}

/* Siblings: groups of one space reading a common buffer, near each other, neither needing
 * the other (as steps: through GEMM epilogues too, or the merged group would wait on
 * itself). For each group a, the candidates b > a in increasing order, each judged by how
 * near it is to a as a is then; only near groups are looked at, so this is linear in the
 * groups. A path from one group to another passes only nodes above the latter's first,
 * which bounds each walk. */
static void merge_siblings(Plan *p)
{
    Fusion *f = p->f;
    Firsts fs = {0};
    bool ok = firsts_make(p, &fs);
    for (int a = 0; ok && a < f->ngroup; a++)
        for (int b = a; p->head[a] >= 0 && (b = next_near(p, &fs, a, b)) >= 0;)
            if (same_space(&f->g[a], &f->g[b]) && p->size[a] + p->size[b] <= p->max_nodes &&
                share_a_read(p, a, b) &&
                !reaches(p, a, b, fs.of_group[b] - 1) && !reaches(p, b, a, fs.of_group[a] - 1) &&
                !unit_reaches(p, a, b) && !unit_reaches(p, b, a))
                merge_near(p, &fs, a, b);
    firsts_free(&fs);
}

/* Drop emptied groups, renumbering the rest (and the epilogue links). */
static void compact_groups(Plan *p)
{
    Fusion *f = p->f;
    int *renum = p->stack, n = 0;
    for (int i = 0; i < f->ngroup; i++)
        renum[i] = p->head[i] >= 0 ? n++ : -1;
    for (int i = 0; i < f->ngroup; i++) {
        if (renum[i] < 0)
            continue;
        FuseGroup G = f->g[i];
        G.epilogue = G.epilogue >= 0 ? renum[G.epilogue] : -1;
        G.gemm = G.gemm >= 0 ? renum[G.gemm] : -1;
        f->g[renum[i]] = G;
        p->head[renum[i]] = p->head[i];
    }
    for (int id = 0; id < f->nnode; id++)
        if (f->group[id] >= 0)
            f->group[id] = renum[f->group[id]];
    f->ngroup = n;
}

/* ---------------------------------------------------------------- order */


/* A unit on the ordering walk's stack: the group whose members' reads it is going
 * through (the unit's own, then its epilogue's) and where it is in them. */
typedef struct Visit {
    int unit, grp, x, j;
} Visit;

typedef struct Order {
    Plan *p;
    char *state;  /* per group: 0 new, 1 on the stack, 2 done */
    Visit *stack; /* a unit is on it at most once: ngroup entries */
    int *out;     /* the groups in order */
    int n;
} Order;

/* The next unit the top of the stack reads that is not ordered yet, or -1 when its reads
 * are all done. */
static int next_dep(Order *o, Visit *v)
{
    const Plan *p = o->p;
    for (;;) {
        for (; v->x >= 0; v->x = p->next[v->x], v->j = 0) {
            const Node *n = &p->g->node[v->x];
            while (v->j < n->nin) {
                int dep = p->f->group[through_views(p->g, p->f, n->in[v->j++])];
                if (dep >= 0 && unit_of(p->f, dep) != v->unit && !o->state[unit_of(p->f, dep)])
                    return unit_of(p->f, dep);
            }
        }
        int epi = p->f->g[v->unit].epilogue;
        if (v->grp != v->unit || epi < 0)
            return -1;
        *v = (Visit){v->unit, epi, p->head[epi], 0}; /* then the epilogue's reads */
    }
}

static void push_unit(Order *o, int *sp, int unit)
{
    o->state[unit] = 1;
    o->stack[(*sp)++] = (Visit){unit, unit, o->p->head[unit], 0};
}

/* Depth first from unit: every unit it reads is ordered before it (a post-order walk with
 * its own stack: a chain of thousands of groups needs no C stack). */
static void visit(Order *o, int unit)
{
    Fusion *f = o->p->f;
    int sp = 0;
    if (o->state[unit])
        return; /* done, or a cycle (impossible by construction) */
    push_unit(o, &sp, unit);
    while (sp) {
        Visit *v = &o->stack[sp - 1];
        int dep = next_dep(o, v);
        if (dep >= 0) {
            push_unit(o, &sp, dep);
            continue;
        }
        int u = v->unit;
        sp--;
        o->state[u] = 2;
        o->out[o->n++] = u;
        if (f->g[u].epilogue >= 0)
            o->out[o->n++] = f->g[u].epilogue;
    }
}

/* Groups by the last node each holds, so the steps keep the graph's own order where
 * dependencies allow: that order is the schedule the frontend and autodiff wrote (a
 * backward's recomputations next to their uses, passes/remat.c), which a bare post-order
 * from the outputs would not keep, pulling a recomputation up into the forward. */
static int *groups_by_last_node(const Plan *p)
{
    const Fusion *f = p->f;
    int *last = malloc(((size_t)f->ngroup + 1) * sizeof *last);
    int *sorted = malloc(((size_t)f->ngroup + 1) * sizeof *sorted), n = 0;
    if (!last || !sorted) {
        free(last), free(sorted);
        return NULL;
    }
    for (int grp = 0; grp < f->ngroup; grp++)
        last[grp] = -1;
    for (int x = 0; x < p->g->nnode; x++)
        if (f->group[x] >= 0)
            last[f->group[x]] = x; /* ascending x: the largest */
    for (int x = 0; x < p->g->nnode; x++) {
        int grp = f->group[x];
        if (grp >= 0 && last[grp] == x)
            sorted[n++] = grp;
    }
    for (int grp = 0; grp < f->ngroup; grp++)
        if (last[grp] < 0)
            sorted[n++] = grp; /* none: cannot happen, kept for completeness */
    free(last);
    return sorted;
}

static bool order_groups(Plan *p)
{
    Fusion *f = p->f;
    Order o = {p, calloc((size_t)f->ngroup + 1, 1),
               malloc(((size_t)f->ngroup + 1) * sizeof *o.stack), NULL, 0};
    int *by_last = groups_by_last_node(p);
    o.out = f->order = malloc(((size_t)f->ngroup + 1) * sizeof *f->order);
    if (!o.state || !o.stack || !f->order || !by_last) {
        free(o.state), free(o.stack), free(by_last);
        return false;
    }
    for (int i = 0; i < f->ngroup; i++)
        if (f->g[by_last[i]].gemm < 0)
            visit(&o, by_last[i]);
    free(o.state);
    free(o.stack);
    free(by_last);
    return o.n == f->ngroup;
}

/* The first unit order (before any epilogue or sibling merge: units are groups), and the
 * scratch the walks over units use. */
static bool rank_units(Plan *p)
{
    Fusion *f = p->f;
    size_t n = (size_t)f->ngroup + 2;
    Order o = {p, calloc(n, 1), malloc(n * sizeof *o.stack), malloc(n * sizeof(int)), 0};
    p->ord = malloc(n * sizeof *p->ord);
    p->umark = calloc(n, sizeof *p->umark);
    p->ustack = malloc(n * sizeof *p->ustack);
    p->ulist_f = malloc(n * sizeof *p->ulist_f);
    p->ulist_b = malloc(n * sizeof *p->ulist_b);
    p->upool = malloc(2 * n * sizeof *p->upool);
    bool ok = o.state && o.stack && o.out && p->ord && p->umark && p->ustack && p->ulist_f &&
              p->ulist_b && p->upool;
    for (int grp = 0; ok && grp < f->ngroup; grp++)
        visit(&o, grp);
    for (int i = 0; ok && i < o.n; i++)
        p->ord[o.out[i]] = i;
    free(o.state);
    free(o.stack);
    free(o.out);
    return ok && o.n == f->ngroup;
}

/* ---------------------------------------------------------------- entry points */

static void plan_free(Plan *p)
{
    free(p->output);
    free(p->operand);
    free(p->user_start);
    free(p->user);
    free(p->next);
    free(p->head);
    free(p->size);
    free(p->mark);
    free(p->stack);
    free(p->scratch);
    free(p->walk);
    free(p->ord);
    free(p->umark);
    free(p->ustack);
    free(p->ulist_f);
    free(p->ulist_b);
    free(p->upool);
    free(p->num);
}

static bool plan_alloc(Plan *p, Fusion *f)
{
    size_t n = (size_t)p->g->nnode + 1;
    f->nnode = p->g->nnode;
    f->cls = calloc(n, sizeof *f->cls);
    f->group = malloc(n * sizeof *f->group);
    f->stored = calloc(n, sizeof *f->stored);
    p->output = calloc(n, sizeof *p->output);
    p->operand = calloc(n, sizeof *p->operand);
    p->next = malloc(n * sizeof *p->next);
    p->mark = calloc(n, sizeof *p->mark);
    p->stack = malloc(n * sizeof *p->stack);
    p->scratch = malloc(n * sizeof *p->scratch);
    if (!p->scratch || !f->cls || !f->group || !f->stored || !p->output || !p->operand || !p->next || !p->mark ||
        !p->stack || !build_users(p))
        return false;
    for (size_t i = 0; i < n; i++)
        f->group[i] = p->next[i] = -1;
    return true;
}

/* One line per plan: how many kernels of each kind, epilogues and sibling merges. */
static void log_summary(const Plan *p)
{
    const Fusion *f = p->f;
    int kind[FUSE_KIND_COUNT] = {0}, epilogues = 0, stored = 0;
    for (int i = 0; i < f->ngroup; i++) {
        kind[f->g[i].kind]++;
        epilogues += f->g[i].epilogue >= 0;
    }
    for (int id = 0; id < f->nnode; id++)
        stored += f->stored[id];
    coil_log(LOG_INFO, "fuse '%s': %d groups (%d pointwise, %d row, %d gemm, %d attention, "
             "%d scatter), %d GEMM epilogues, %d sibling merges, %d stored values%s", p->g->name,
             f->ngroup, kind[FUSE_POINTWISE], kind[FUSE_ROW], kind[FUSE_GEMM],
             kind[FUSE_ATTENTION], kind[FUSE_SCATTER], epilogues, p->nsibling, stored, p->o->off ? " (fusion off)" : "");
}

static bool no_composites(const Graph *g, Err *e)
{
    for (int id = 0; id < g->nnode; id++)
        if ((op_info[g->node[id].op].flags & OPF_COMPOSITE) && !is_attention_op(g->node[id].op) &&
            g->node[id].op != OP_CONV) {
            err_at(e, g->node[id].loc, "fusion: %s is a composite op; run the decompose pass first",
                   op_info[g->node[id].op].name);
            return false;
        }
    return true;
}

bool fuse_plan(const Graph *g, const FuseOptions *o, Fusion *f, Err *e)
{
    static const FuseOptions defaults = {0};
    memset(f, 0, sizeof *f);
    Plan p = {.g = g, .f = f, .o = o ? o : &defaults};
    p.max_nodes = p.o->max_nodes < 0 ? INT32_MAX : p.o->max_nodes ? p.o->max_nodes : FUSE_MAX_NODES;
    bool ok = plan_alloc(&p, f);
    bool *live = ok ? calloc((size_t)g->nnode + 1, sizeof *live) : NULL;
    if (!ok || !live) {
        err_set(e, ERR_MEMORY, "fusion: out of memory on graph '%s'", g->name);
        free(live);
        plan_free(&p);
        fuse_free(f);
        return false;
    }
    classify_all(&p, live);
    free(live);
    if (coil_log_on(LOG_DEBUG))
        p.num = statement_numbers(g);
    ok = no_composites(g, e);
    for (int id = g->nnode - 1; ok && id >= 0; id--)
        if (is_compute(f->cls[id]))
            ok = decide(&p, id, p.scratch);
    if (!ok && err_ok(e))
        err_set(e, ERR_MEMORY, "fusion: out of memory grouping '%s'", g->name);
    if (ok && !p.o->off && !(ok = rank_units(&p)))
        err_set(e, ERR_MEMORY, "fusion: out of memory ordering %d groups of '%s'", f->ngroup,
                g->name);
    if (ok && !p.o->off) {
        choose_epilogues(&p, p.scratch);
        merge_siblings(&p);
        compact_groups(&p);
    }
    if (ok && !(ok = order_groups(&p)))
        err_set(e, ERR_MEMORY, "fusion: out of memory ordering %d groups of '%s'", f->ngroup,
                g->name);
    if (ok && coil_log_on(LOG_INFO))
        log_summary(&p);
    plan_free(&p);
    if (!ok)
        fuse_free(f);
    return ok;
}

void fuse_free(Fusion *f)
{
    free(f->cls);
    free(f->group);
    free(f->stored);
    free(f->g);
    free(f->order);
    memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------- printing */

/* A node as ir_print names it: an input by name, anything else by statement number. */
static void put_node(Text *t, const Graph *g, int id)
{
    int num = 0;
    for (int i = 0; i < id; i++)
        num += g->node[i].op != OP_INPUT;
    if (g->node[id].op == OP_INPUT)
        text_put(t, " %%%s", node_name(&g->node[id]));
    else
        text_put(t, " %%%d", num);
}

static void put_group(Text *t, const Graph *g, const Fusion *f, int grp)
{
    const FuseGroup *G = &f->g[grp];
    char ty[256];
    text_put(t, "// g%d %s %s", grp, kind_name[G->kind], type_fmt(g, &G->space, ty, sizeof ty));
    if (G->kind == FUSE_ROW) {
        text_put(t, " inner {");
        for (int d = 0, first = 1; d < G->space.rank; d++)
            if (G->inner >> d & 1) {
                text_put(t, first ? "%d" : ",%d", d);
                first = 0;
            }
        text_put(t, "}");
    }
    if (G->epilogue >= 0)
        text_put(t, " epilogue g%d", G->epilogue);
    if (G->gemm >= 0)
        text_put(t, " (epilogue of g%d)", G->gemm);
    text_put(t, ":");
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] == grp)
            put_node(t, g, id);
    text_put(t, "; stores");
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] == grp && f->stored[id])
            put_node(t, g, id);
    text_put(t, "\n");
}

char *fuse_print(const Graph *g, const Fusion *f)
{
    Text t = {0};
    text_put(&t, "// fusion: %d groups, in execution order\n", f->ngroup);
    for (int i = 0; i < f->ngroup; i++)
        put_group(&t, g, f, f->order[i]);
    return text_take(&t);
}
