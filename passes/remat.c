/* remat.c — what the backward saves and what it recomputes, chosen by a minimum cut.
 *
 * In a joint graph every forward value the backward reads would otherwise stay alive from
 * the forward to its last backward use. Each such value can instead be recomputed in the
 * backward from values that are kept. The choice is a minimum s-t cut (as AOTAutograd's
 * partitioner makes it): every forward value v is an edge v_in -> v_out weighted by its
 * bytes (cutting it = saving v); data dependencies are infinite edges u_out -> v_in; what
 * the backward reads connects to the sink; ops that must not be recomputed (matmuls, with
 * --checkpoint=auto) hang from the source. Parameters, inputs and constants are free: they
 * are there anyway. After the cut, a forward value on the sink side that the backward
 * needs is recomputed, next to its first backward use, from saved values; fusion then
 * usually folds the recomputation into the backward's kernels. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

#define INF (INT64_MAX / 4)

typedef struct Edge {
    int to;
    int64_t cap;
} Edge;

/* A flow network in adjacency lists (edge i and its reverse i ^ 1). */
typedef struct Net {
    int n, nedge, cap;
    Edge *e;
    int *head, *next; /* per vertex: first edge; per edge: the vertex's next edge */
    int *level, *it;
} Net;

static bool net_init(Net *g, int n)
{
    *g = (Net){.n = n};
    g->head = malloc((size_t)n * sizeof *g->head);
    g->level = malloc((size_t)n * sizeof *g->level);
    g->it = malloc((size_t)n * sizeof *g->it);
    if (!g->head || !g->level || !g->it)
        return false;
    for (int v = 0; v < n; v++)
        g->head[v] = -1;
    return true;
}

static void net_free(Net *g)
{
    free(g->e), free(g->head), free(g->next), free(g->level), free(g->it);
}

static bool add_edge(Net *g, int a, int b, int64_t cap)
{
    if (g->nedge + 2 > g->cap) {
        int c = g->cap ? 2 * g->cap : 1024;
        Edge *e = realloc(g->e, (size_t)c * sizeof *e);
        int *nx = e ? realloc(g->next, (size_t)c * sizeof *nx) : NULL;
        if (!e || !nx) {
            if (e)
                g->e = e;
            return false;
        }
        g->e = e, g->next = nx, g->cap = c;
    }
    int from[2] = {a, b}, to[2] = {b, a};
    int64_t caps[2] = {cap, 0};
    for (int k = 0; k < 2; k++) {
        g->e[g->nedge] = (Edge){to[k], caps[k]};
        g->next[g->nedge] = g->head[from[k]];
        g->head[from[k]] = g->nedge++;
    }
    return true;
}

/* Dinic: BFS levels, then blocking flows by DFS. */
static bool bfs(Net *g, int s, int t, int *queue)
{
    for (int v = 0; v < g->n; v++)
        g->level[v] = -1;
    int qh = 0, qt = 0;
    g->level[s] = 0, queue[qt++] = s;
    while (qh < qt) {
        int v = queue[qh++];
        for (int i = g->head[v]; i >= 0; i = g->next[i])
            if (g->e[i].cap > 0 && g->level[g->e[i].to] < 0)
                g->level[g->e[i].to] = g->level[v] + 1, queue[qt++] = g->e[i].to;
    }
    return g->level[t] >= 0;
}

static int64_t dfs(Net *g, int v, int t, int64_t f)
{
    if (v == t)
        return f;
    for (; g->it[v] >= 0; g->it[v] = g->next[g->it[v]]) {
        Edge *e = &g->e[g->it[v]];
        if (e->cap <= 0 || g->level[e->to] != g->level[v] + 1)
            continue;
        int64_t got = dfs(g, e->to, t, f < e->cap ? f : e->cap);
        if (got > 0) {
            e->cap -= got, g->e[g->it[v] ^ 1].cap += got;
            return got;
        }
    }
    return 0;
}

static bool max_flow(Net *g, int s, int t)
{
    int *queue = malloc((size_t)g->n * sizeof *queue);
    if (!queue)
        return false;
    while (bfs(g, s, t, queue)) {
        memcpy(g->it, g->head, (size_t)g->n * sizeof *g->it);
        while (dfs(g, s, t, INF) > 0)
            ;
    }
    bfs(g, s, t, queue); /* level >= 0: the source side of the minimum cut */
    free(queue);
    return true;
}

/* ---------------------------------------------------------------- the choice */

static bool is_leaf(const Node *n) { return op_info[n->op].flags & OPF_LEAF; }

/* Ops the backward may recompute: everything but matmuls, convs and fused attention with auto
 * (they are what a step's time is made of; attention's output is O(T) per head, and with
 * its fused backward (attention_grad) that and the log-sum-exp are all it saves, no
 * T x T probabilities); with full, those too (only leaves are never cut). */
static bool recomputable(const Node *n, RematMode mode)
{
    return mode == REMAT_FULL || (n->op != OP_MATMUL && n->op != OP_CONV && n->op != OP_ATTENTION);
}

static int64_t bytes_of(const Graph *g, int id, const SymBind *sb)
{
    int64_t n = type_bytes(&g->node[id].type, sb);
    return n > 0 ? n : 1; /* unbound: still a cost, so nothing is saved for free */
}

/* The forward's bottlenecks in node order: values v after which no other forward value
 * that depends on the inputs is still needed by a later forward op (leaves, and what is
 * computed from leaves alone, such as a causal mask, are there or cost nothing), so every
 * path from the inputs to the loss passes through v: the residual stream after each of a
 * transformer's adds. Full checkpointing saves them (views excepted: they are their
 * source) and recomputes everything else from the nearest one before it, a block at a
 * time as the backward reaches it. */
static bool bottlenecks(const Graph *g, int loss, bool *neck)
{
    int nf = loss + 1, *last = malloc((size_t)nf * sizeof *last);
    int *dying = calloc((size_t)nf, sizeof *dying);
    bool *varies = calloc((size_t)nf, sizeof *varies);
    if (!last || !dying || !varies) {
        free(last), free(dying), free(varies);
        return false;
    }
    for (int v = 0; v < nf; v++) {
        const Node *n = &g->node[v];
        last[v] = v;
        varies[v] = n->op == OP_INPUT;
        for (int j = 0; j < n->nin; j++) {
            last[n->in[j]] = v; /* node order is topological: v is the latest */
            varies[v] = varies[v] || varies[n->in[j]];
        }
    }
    for (int v = 0; v < nf; v++)
        if (varies[v] && !is_leaf(&g->node[v]) && last[v] > v)
            dying[last[v]]++;
    int live = 0;
    for (int v = 0; v < nf; v++) {
        const Node *n = &g->node[v];
        bool crosses = varies[v] && !is_leaf(n) && last[v] > v;
        live += crosses - dying[v];
        neck[v] = crosses && live == 1 && !(op_info[n->op].flags & OPF_VIEW);
    }
    free(last), free(dying), free(varies);
    return true;
}

/* recompute[v]: forward value v lies on the sink side (the backward recomputes it when
 * it needs it); saved values are those the cut separates from their input side. */
static bool choose(const Graph *g, int loss, RematMode mode, const SymBind *sb, bool *recompute)
{
    int nf = loss + 1, S = 2 * nf, T = S + 1;
    Net net;
    bool ok = net_init(&net, 2 * nf + 2), *neck = calloc((size_t)nf, sizeof *neck);
    ok = ok && neck && (mode != REMAT_FULL || bottlenecks(g, loss, neck));
    for (int v = 0; ok && v < nf; v++) {
        const Node *n = &g->node[v];
        if (is_leaf(n))
            continue;
        bool view = op_info[n->op].flags & OPF_VIEW;
        ok = add_edge(&net, 2 * v, 2 * v + 1, view ? INF : bytes_of(g, v, sb));
        if (ok && !recomputable(n, mode))
            ok = add_edge(&net, S, 2 * v, INF);
        if (ok && neck[v]) /* its edge must be cut: saved */
            ok = add_edge(&net, S, 2 * v, INF) && add_edge(&net, 2 * v + 1, T, INF);
        for (int j = 0; ok && j < n->nin; j++)
            if (!is_leaf(&g->node[n->in[j]]))
                ok = add_edge(&net, 2 * n->in[j] + 1, 2 * v, INF);
    }
    for (int b = nf; ok && b < g->nnode; b++) /* what the backward reads */
        for (int j = 0; ok && j < g->node[b].nin; j++) {
            int u = g->node[b].in[j];
            if (u < nf && !is_leaf(&g->node[u]))
                ok = add_edge(&net, 2 * u + 1, T, INF);
        }
    ok = ok && max_flow(&net, S, T);
    for (int v = 0; ok && v < nf; v++)
        recompute[v] = !is_leaf(&g->node[v]) && net.level[2 * v] < 0;
    net_free(&net);
    free(neck);
    return ok;
}

/* ---------------------------------------------------------------- the rewrite */

typedef struct Remat {
    Rewrite rw;
    const bool *recompute;
    int *clone; /* forward id -> its recomputed copy in the backward, -1 */
} Remat;

/* The value the backward reads for forward node u: itself (kept) or its recomputation. */
static int backward_value(Remat *r, int u)
{
    if (!r->recompute[u])
        return r->rw.map[u];
    if (r->clone[u] >= 0)
        return r->clone[u];
    const Node *n = &r->rw.src->node[u];
    int in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++)
        in[j] = backward_value(r, n->in[j]);
    int kept = r->rw.map[u]; /* rewrite_copy_with records the copy: the forward's stays */
    r->clone[u] = rewrite_copy_with(&r->rw, u, in);
    r->rw.map[u] = kept;
    return r->clone[u];
}

Graph *pass_remat(const Graph *g, RematMode mode, const SymBind *sb, Err *e)
{
    if (mode == REMAT_NONE || g->noutput == 0)
        return graph_copy(g, e);
    int loss = g->output[0];
    bool *recompute = calloc((size_t)g->nnode + 1, sizeof *recompute);
    int *clone = malloc(((size_t)g->nnode + 1) * sizeof *clone);
    Remat r = {.recompute = recompute, .clone = clone};
    bool ok = recompute && clone && choose(g, loss, mode, sb, recompute) && rewrite_begin(&r.rw, g, e);
    Graph *out = NULL;
    if (ok) {
        for (int i = 0; i < g->nnode; i++)
            clone[i] = -1;
        for (int i = 0; i < g->nnode && err_ok(e); i++) {
            const Node *n = &g->node[i];
            if (i <= loss || is_leaf(n)) {
                rewrite_copy(&r.rw, i);
                continue;
            }
            int in[n->nin > 0 ? n->nin : 1];
            for (int j = 0; j < n->nin; j++)
                in[j] = n->in[j] <= loss ? backward_value(&r, n->in[j]) : r.rw.map[n->in[j]];
            r.rw.map[i] = rewrite_copy_with(&r.rw, i, in);
        }
        out = rewrite_end(&r.rw);
    } else if (err_ok(e))
        err_set(e, ERR_MEMORY, "remat: out of memory choosing what to save in @%s", g->name);
    free(recompute);
    free(clone);
    return out;
}

bool remat_mode_parse(const char *s, RematMode *m)
{
    static const char *const names[] = {"none", "auto", "full"};
    int i = name_index(names, 3, s);
    if (i >= 0)
        *m = (RematMode)i;
    return i >= 0;
}

/* Sizes for a cut made outside training (`coil opt --passes=remat=auto`), where nothing
 * binds the graph's symbols: each is this. Training binds its --dim sizes instead. */
#define REMAT_PASS_SIZE 64

/* The pass table's remat=auto|full, on a joint graph (autodiff's). */
Graph *pass_remat_arg(const Graph *g, const char *arg, Err *e)
{
    RematMode m;
    if (!remat_mode_parse(arg, &m) || m == REMAT_NONE) {
        err_set(e, ERR_USAGE, "--passes: remat=%s: expected auto or full", arg);
        return NULL;
    }
    SymBind sb = {0};
    for (int i = 0; i < g->nsym; i++)
        sb.val[i] = REMAT_PASS_SIZE, sb.known[i] = true;
    return pass_remat(g, m, &sb, e);
}
