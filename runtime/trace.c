/* trace.c — steps named by the layers they compute (from the parameters their nodes read
 * and the data flow around them), and the trace recorder: runs, steps and pool chunks held
 * as plain records while the model runs, written as Chrome trace events at the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"
#include "ir/summary.h"
#include "runtime/trace.h"

/* ---------------------------------------------------------------- layer names */

/* Dotted names: a layer is a parameter's name less its last component. */
static const char *param_layer(Arena *a, const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? arena_strndup(a, name, (size_t)(dot - name)) : name;
}

/* The longest common prefix of x and y that ends at a component ("a.b.c", "a.b.d": "a.b");
 * "" when none, the other when one is NULL (unknown). */
static const char *common_layer(Arena *a, const char *x, const char *y)
{
    if (!x || !y)
        return x ? x : y;
    size_t n = 0, end = 0;
    for (; x[n] && x[n] == y[n]; n++)
        if (x[n] == '.')
            end = n;
    if (!x[n] && (!y[n] || y[n] == '.'))
        return x; /* x is y, or a prefix of it at a component */
    if (!y[n] && x[n] == '.')
        return y;
    return end ? arena_strndup(a, x, end) : "";
}

/* Per node of a graph: the layer of the parameters it reads itself (own), the nearest
 * layer before it (up: through its latest operand) and after it (down: through its
 * earliest reader), and whether it belongs to the backward of a training graph. */
typedef struct Layers {
    const Graph *g;
    Arena *arena;
    const char **own, **up, **down;
    bool *backward;
} Layers;

/* The parameter a value is, through views and casts (a weight read transposed, or cast
 * for autocast), or -1. */
static int param_under(const Graph *g, int id)
{
    while (g->node[id].op != OP_PARAM &&
           ((op_info[g->node[id].op].flags & OPF_VIEW) || g->node[id].op == OP_CAST))
        id = g->node[id].in[0];
    return g->node[id].op == OP_PARAM ? id : -1;
}

static void own_layers(Layers *L)
{
    const Graph *g = L->g;
    for (int id = 0; id < g->nnode; id++) {
        const Node *n = &g->node[id];
        if (n->op == OP_PARAM)
            continue;
        for (int j = 0; j < n->nin; j++) {
            int w = param_under(g, n->in[j]);
            if (w >= 0)
                L->own[id] = common_layer(L->arena, L->own[id],
                                          param_layer(L->arena, node_name(&g->node[w])));
        }
    }
    /* a gradient output "grad.NAME" names the value it returns (autodiff's naming) */
    for (int o = 0; o < g->noutput; o++) {
        if (strncmp(g->output_name[o], "grad.", 5) != 0)
            continue;
        int id = g->output[o];
        while (op_info[g->node[id].op].flags & OPF_VIEW)
            id = g->node[id].in[0];
        if (g->node[id].op != OP_PARAM)
            L->own[id] = common_layer(L->arena, L->own[id],
                                      param_layer(L->arena, g->output_name[o] + 5));
    }
}

/* up: forwards, from the operand computed last (the residual stream's older value loses
 * to the branch just computed); a parameter is its own layer. */
static void up_layers(Layers *L)
{
    const Graph *g = L->g;
    for (int id = 0; id < g->nnode; id++) {
        const Node *n = &g->node[id];
        L->up[id] = n->op == OP_PARAM ? param_layer(L->arena, node_name(n)) : L->own[id];
        int latest = -1;
        for (int j = 0; !L->up[id] && j < n->nin; j++)
            if (L->up[n->in[j]] && n->in[j] > latest)
                latest = n->in[j];
        if (latest >= 0)
            L->up[id] = L->up[latest];
    }
}

/* down: backwards, from the reader computed first; and which nodes reach an output other
 * than a gradient (the rest of a training graph is its backward). */
static void down_layers(Layers *L, const char **reader, bool *forward)
{
    const Graph *g = L->g;
    bool grads = false;
    for (int o = 0; o < g->noutput; o++) {
        bool grad = strncmp(g->output_name[o], "grad.", 5) == 0;
        grads = grads || grad;
        forward[g->output[o]] = forward[g->output[o]] || !grad;
    }
    for (int id = g->nnode - 1; id >= 0; id--) {
        const Node *n = &g->node[id];
        L->down[id] = L->own[id] ? L->own[id] : reader[id];
        L->backward[id] = grads && !forward[id];
        /* operands see where this node is (its layer, or where the layers around it meet),
         * so a value only a block's inner ops read (attention's causal mask) stays in that
         * block instead of taking the name of the layer after it */
        const char *here = L->own[id] ? L->own[id]
                         : L->up[id] && L->down[id] ? common_layer(L->arena, L->up[id], L->down[id])
                                                    : L->down[id];
        here = here && *here ? here : L->down[id];
        for (int j = 0; j < n->nin; j++) {
            if (here)
                reader[n->in[j]] = here; /* a lower reader comes later: it wins */
            forward[n->in[j]] = forward[n->in[j]] || forward[id];
        }
    }
}

static bool layers_init(Layers *L, const Graph *g, Arena *a)
{
    size_t n = (size_t)g->nnode + 1;
    *L = (Layers){g, a, calloc(n, sizeof(char *)), calloc(n, sizeof(char *)),
                  calloc(n, sizeof(char *)), calloc(n, sizeof(bool))};
    const char **reader = calloc(n, sizeof *reader);
    bool *forward = calloc(n, sizeof *forward);
    bool ok = L->own && L->up && L->down && L->backward && reader && forward;
    if (ok) {
        own_layers(L);
        up_layers(L);
        down_layers(L, reader, forward);
    }
    free(reader);
    free(forward);
    return ok;
}

static void layers_free(Layers *L)
{
    free(L->own);
    free(L->up);
    free(L->down);
    free(L->backward);
}

/* A node's layer: its own; else where the layers before and after it meet. */
static const char *node_layer(const Layers *L, int id)
{
    if (L->own[id])
        return L->own[id];
    const char *both = L->up[id] && L->down[id] ? common_layer(L->arena, L->up[id], L->down[id])
                                                : NULL;
    return both && *both ? both : L->up[id] ? L->up[id] : L->down[id];
}

/* ---------------------------------------------------------------- naming a step */

enum { MAX_LAYERS_SHOWN = 4, MAX_SOURCES_SHOWN = 4 };

/* Distinct layers, "" and NULL left out, joined: one as it is; a few as
 * "prefix.{a,b}" (or "a+b" with no common prefix); many as their prefix. */
static const char *join_layers(Arena *a, const char **layer, int n)
{
    if (n == 0)
        return "";
    const char *prefix = layer[0];
    for (int i = 1; i < n; i++)
        prefix = common_layer(a, prefix, layer[i]);
    if (n == 1 || (n > MAX_LAYERS_SHOWN && *prefix))
        return prefix;
    char text[1024];
    size_t len = strlen(prefix), at = 0;
    at += (size_t)snprintf(text, sizeof text, "%s%s", prefix, *prefix ? ".{" : "");
    for (int i = 0; i < n && i < MAX_LAYERS_SHOWN && at < sizeof text; i++) {
        const char *rest = layer[i] + len + (*prefix && layer[i][len] == '.');
        at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", i ? (*prefix ? "," : "+") : "",
                               *rest ? rest : "(itself)");
    }
    if (at < sizeof text)
        snprintf(text + at, sizeof text - at, "%s%s", n > MAX_LAYERS_SHOWN ? "+..." : "",
                 *prefix ? "}" : "");
    return arena_strdup(a, text);
}

static void add_distinct(const char **list, int *n, const char *layer)
{
    if (!layer || !*layer)
        return;
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i], layer) == 0)
            return;
    list[(*n)++] = layer;
}

/* The step's layer: those its nodes' parameters name, else those around its nodes. */
static const char *step_layer(const Layers *L, const Step *st, const char **scratch)
{
    int n = 0;
    for (int i = 0; i < st->nnode; i++)
        add_distinct(scratch, &n, L->own[st->node[i]]);
    for (int i = 0; n == 0 && i < st->nnode; i++)
        add_distinct(scratch, &n, node_layer(L, st->node[i]));
    return join_layers(L->arena, scratch, n);
}

/* A kernel's name without lowering's "k<index>_": what it computes ("gelu_tanh"). */
static const char *kernel_what(const char *name)
{
    const char *p = name;
    if (*p == 'k') {
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
        if (*p == '_' && p > name + 1)
            return p + 1;
    }
    return name;
}

static void step_what(Arena *a, const Program *p, const Step *st, StepInfo *info)
{
    if (st->kind == STEP_ATTENTION) {
        static const char *const kind[] = {"attention", "attention_lse", "attention_grad"};
        info->kind = info->what = kind[st->attn.kind];
        return;
    }
    int k = st->kind == STEP_KERNEL ? st->kernel : st->gemm.epilogue;
    /* the table's own copy: a profile outlives the program it names (bench prints it
     * after the compiled model is freed) */
    info->kernel = k >= 0 ? arena_strdup(a, p->kernel[k].name) : NULL;
    info->kind = st->kind == STEP_KERNEL ? "kernel" : "gemm";
    if (st->kind == STEP_KERNEL) {
        info->what = kernel_what(info->kernel);
        return;
    }
    char text[128];
    snprintf(text, sizeof text, "gemm%s%s", k >= 0 ? "+" : "", k >= 0 ? kernel_what(info->kernel) : "");
    info->what = arena_strdup(a, text);
}

/* The distinct FILE:LINE of the step's nodes, in node order (a few). */
static const char *step_source(Arena *a, const Graph *g, const Step *st)
{
    char text[1024] = "";
    size_t at = 0;
    int shown = 0;
    for (int i = 0; i < st->nnode && at < sizeof text; i++) {
        Loc loc = g->node[st->node[i]].loc;
        char one[512];
        if (!loc.file)
            continue;
        snprintf(one, sizeof one, "%s:%d", loc.file, loc.line);
        if (strstr(text, one)) /* short lists: a search is enough */
            continue;
        if (shown == MAX_SOURCES_SHOWN) {
            snprintf(text + at, sizeof text - at, ", ...");
            break;
        }
        at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", shown ? ", " : "", one);
        shown++;
    }
    return arena_strdup(a, text);
}

static bool all_backward(const Layers *L, const Step *st)
{
    for (int i = 0; i < st->nnode; i++)
        if (!L->backward[st->node[i]])
            return false;
    return st->nnode > 0;
}

static void name_step(const Layers *L, const Program *p, int s, StepInfo *info,
                      const char **scratch)
{
    const Step *st = &p->step[s];
    step_what(L->arena, p, st, info);
    info->layer = step_layer(L, st, scratch);
    info->backward = all_backward(L, st);
    info->source = step_source(L->arena, p->graph, st);
    char text[1536];
    if (*info->layer)
        snprintf(text, sizeof text, "%s%s: %s", info->layer, info->backward ? " (backward)" : "",
                 info->what);
    else
        snprintf(text, sizeof text, "%s%s", info->what, info->backward ? " (backward)" : "");
    info->name = arena_strdup(L->arena, text);
}

void step_table_free(StepTable *t)
{
    if (!t)
        return;
    arena_free(t->arena);
    free(t);
}

StepTable *step_table_new(const Program *p, Err *e)
{
    StepTable *t = calloc(1, sizeof *t);
    Arena *a = t ? arena_new() : NULL;
    Layers L = {0};
    const char **scratch = calloc((size_t)p->graph->nnode + 1, sizeof *scratch);
    bool ok = a && scratch && layers_init(&L, p->graph, a) &&
              (t->step = arena_alloc(a, ((size_t)p->nstep + 1) * sizeof *t->step)) != NULL;
    if (t)
        t->arena = a, t->p = p;
    for (int s = 0; ok && s < p->nstep; s++)
        name_step(&L, p, s, &t->step[s], scratch);
    layers_free(&L);
    free(scratch);
    if (ok)
        return t;
    err_set(e, ERR_MEMORY, "out of memory naming the steps of a program");
    step_table_free(t);
    return NULL;
}

/* ---------------------------------------------------------------- FLOPs and bytes */

static void touch(const Program *p, int b, int s, int *seen, const SymBind *sb, int64_t *bytes)
{
    if (b < 0 || seen[b] == s)
        return;
    seen[b] = s;
    *bytes += dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

static void touch_kernel(const Program *p, int k, int s, int *seen, const SymBind *sb,
                         int64_t *bytes)
{
    const Kernel *kn = &p->kernel[k];
    for (int x = 0; x < kn->nlx; x++)
        if (kn->lx[x].kind == LX_LOAD)
            touch(p, (int)kn->lx[x].i, s, seen, sb, bytes);
    for (int i = 0; i < kn->nstmt; i++)
        if (kn->stmt[i].kind == ST_STORE)
            touch(p, kn->stmt[i].buf, s, seen, sb, bytes);
}

static int64_t step_bytes(const Program *p, int s, int *seen, const SymBind *sb)
{
    const Step *st = &p->step[s];
    int64_t bytes = 0;
    if (st->kind == STEP_KERNEL) {
        touch_kernel(p, st->kernel, s, seen, sb, &bytes);
    } else if (st->kind == STEP_ATTENTION) {
        const Attention *a = &st->attn;
        int ops[7] = {a->q.buf, a->k.buf, a->v.buf, a->o.buf, a->fo.buf, a->dout.buf, a->lse.buf};
        for (int i = 0; i < (a->kind == ATTN_BACKWARD ? 7 : 4); i++)
            touch(p, ops[i], s, seen, sb, &bytes);
        if (a->writes_lse)
            touch(p, a->lse.buf, s, seen, sb, &bytes);
    } else {
        touch(p, st->gemm.a.buf, s, seen, sb, &bytes);
        touch(p, st->gemm.b.buf, s, seen, sb, &bytes);
        touch(p, st->gemm.c.buf, s, seen, sb, &bytes);
        if (st->gemm.epilogue >= 0)
            touch_kernel(p, st->gemm.epilogue, s, seen, sb, &bytes);
    }
    return bytes;
}

bool step_table_size(StepTable *t, const SymBind *sb, Err *e)
{
    if (t->sized && sym_same_sizes(&t->sb, sb))
        return true;
    const Program *p = t->p;
    double *flops = malloc(((size_t)p->graph->nnode + 1) * sizeof *flops);
    int *seen = malloc(((size_t)p->nbuf + 1) * sizeof *seen);
    bool ok = flops && seen && graph_node_flops(p->graph, sb, flops, e);
    if (!flops || !seen)
        err_set(e, ERR_MEMORY, "out of memory counting the steps' FLOPs");
    for (int b = 0; seen && b < p->nbuf; b++)
        seen[b] = -1;
    for (int s = 0; ok && s < p->nstep; s++) {
        StepInfo *info = &t->step[s];
        info->flops = 0;
        for (int i = 0; i < p->step[s].nnode; i++)
            info->flops += flops[p->step[s].node[i]];
        info->bytes = step_bytes(p, s, seen, sb);
    }
    free(flops);
    free(seen);
    t->sb = *sb, t->sized = ok;
    return ok;
}

/* ---------------------------------------------------------------- the recorder */

/* At most this many events are held (about 64 bytes each); later ones are counted. */
#define TRACE_MAX_EVENTS (INT64_C(1) << 22)

typedef enum EventKind { EV_RUN, EV_STEP, EV_CHUNK } EventKind;

typedef struct Event {
    double start, end; /* clock_seconds() */
    EventKind kind;
    int prog, step, run, thread;
    int64_t first, last; /* a chunk's iterations */
    double flops;        /* a step's, at its run's sizes */
    int64_t bytes;
} Event;

typedef struct Traced {
    const Program *p;
    StepTable *steps;
    char *device;
    int runs;            /* runs begun */
    double run_start;
} Traced;

struct Trace {
    double origin;       /* clock_seconds() at trace_new: time 0 in the file */
    Traced *prog;
    int nprog;
    Event *ev;
    int64_t nev, cap;
    int64_t dropped;     /* chunks the pool could not hold, events over the limit */
};

Trace *trace_new(Err *e)
{
    Trace *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(e, ERR_MEMORY, "out of memory starting a trace");
        return NULL;
    }
    t->origin = clock_seconds();
    return t;
}

void trace_free(Trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nprog; i++) {
        step_table_free(t->prog[i].steps);
        free(t->prog[i].device);
    }
    free(t->prog);
    free(t->ev);
    free(t);
}

int trace_program(Trace *t, const Program *p, const char *device, Err *e)
{
    Traced *grown = realloc(t->prog, ((size_t)t->nprog + 1) * sizeof *grown);
    if (!grown) {
        err_set(e, ERR_MEMORY, "out of memory tracing a program");
        return -1;
    }
    t->prog = grown;
    Traced *tp = &t->prog[t->nprog];
    *tp = (Traced){.p = p, .steps = step_table_new(p, e), .device = strdup(device)};
    if (!tp->steps || !tp->device) {
        step_table_free(tp->steps);
        free(tp->device);
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "out of memory tracing a program");
        return -1;
    }
    return t->nprog++;
}

const StepTable *trace_steps(const Trace *t, int prog) { return t->prog[prog].steps; }

/* Room for one more event; NULL (counted as dropped) at the limit or out of memory. */
static Event *new_event(Trace *t)
{
    if (t->nev == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 4096;
        Event *ev = t->nev < TRACE_MAX_EVENTS ? realloc(t->ev, (size_t)cap * sizeof *ev) : NULL;
        if (!ev) {
            t->dropped++;
            return NULL;
        }
        t->ev = ev, t->cap = cap;
    }
    return &t->ev[t->nev++];
}

bool trace_run_begin(Trace *t, int prog, const SymBind *sb, double start, Err *e)
{
    Traced *tp = &t->prog[prog];
    tp->run_start = start;
    tp->runs++;
    return step_table_size(tp->steps, sb, e);
}

void trace_step(Trace *t, int prog, int s, double start, double end)
{
    const Traced *tp = &t->prog[prog];
    Event *ev = new_event(t);
    if (ev)
        *ev = (Event){start, end, EV_STEP, prog, s, tp->runs - 1, 0, -1, -1,
                      tp->steps->step[s].flops, tp->steps->step[s].bytes};
}

void trace_chunk(Trace *t, int prog, const PoolChunk *c)
{
    Event *ev = c->tag >= 0 && c->tag < t->prog[prog].p->nstep ? new_event(t) : NULL;
    if (ev)
        *ev = (Event){c->start, c->end, EV_CHUNK, prog, c->tag, t->prog[prog].runs - 1,
                      c->thread, c->first, c->last, 0, 0};
}

void trace_run_end(Trace *t, int prog)
{
    const Traced *tp = &t->prog[prog];
    Event *ev = new_event(t);
    if (ev)
        *ev = (Event){tp->run_start, clock_seconds(), EV_RUN, prog, -1, tp->runs - 1, 0, -1, -1,
                      0, 0};
}

void trace_dropped(Trace *t, int64_t chunks) { t->dropped += chunks; }

int64_t trace_events(const Trace *t) { return t->nev; }

/* ---------------------------------------------------------------- writing */

/* Microseconds from the trace's start, to the nanosecond. */
static double micros(const Trace *t, double seconds)
{
    return round((seconds - t->origin) * 1e9) / 1e3;
}

/* A duration in microseconds, never 0: viewers drop empty slices. */
static double duration(const Event *ev)
{
    double us = round((ev->end - ev->start) * 1e9) / 1e3;
    return us > 0.001 ? us : 0.001;
}

/* The tracks of program i: a process, its "steps" thread and one per pool thread. */
static void write_names(JsonWriter *w, const Trace *t, int i, int threads)
{
    char text[512];
    snprintf(text, sizeof text, "coil @%s on %s", t->prog[i].p->graph->name, t->prog[i].device);
    for (int tid = -1; tid <= threads; tid++) {
        json_newline(w);
        json_begin_object(w);
        json_field_string(w, "name", tid < 0 ? "process_name" : "thread_name");
        json_field_string(w, "ph", "M");
        json_field_int(w, "pid", i + 1);
        json_field_int(w, "tid", tid < 0 ? 0 : tid);
        json_key(w, "args");
        json_begin_object(w);
        if (tid > 0)
            snprintf(text, sizeof text, "thread %d%s", tid - 1, tid == 1 ? " (the caller)" : "");
        json_field_string(w, "name", tid < 0 ? text : tid == 0 ? "steps" : text);
        json_end_object(w);
        json_end_object(w);
    }
}

enum { MAX_NODES_LISTED = 32 };

static void write_step_args(JsonWriter *w, const Traced *tp, const Event *ev)
{
    const StepInfo *info = &tp->steps->step[ev->step];
    const Step *st = &tp->p->step[ev->step];
    json_field_string(w, "layer", info->layer);
    json_field_string(w, "kind", info->kind);
    if (info->kernel)
        json_field_string(w, "kernel", info->kernel);
    json_key(w, "nodes");
    json_begin_array(w);
    for (int i = 0; i < st->nnode && i < MAX_NODES_LISTED; i++)
        json_int(w, st->node[i]);
    json_end_array(w);
    if (st->nnode > MAX_NODES_LISTED)
        json_field_int(w, "nodes_total", st->nnode);
    json_field_string(w, "source", info->source);
    json_field_double(w, "flops", ev->flops);
    json_field_int(w, "bytes", ev->bytes);
    if (info->backward)
        json_field_bool(w, "backward", true);
}

static void write_event(JsonWriter *w, const Trace *t, const Event *ev)
{
    static const char *const category[] = {[EV_RUN] = "run", [EV_STEP] = "step",
                                           [EV_CHUNK] = "chunk"};
    const Traced *tp = &t->prog[ev->prog];
    char run_name[32];
    snprintf(run_name, sizeof run_name, "run %d", ev->run);
    json_newline(w);
    json_begin_object(w);
    json_field_string(w, "name", ev->kind == EV_RUN ? run_name : tp->steps->step[ev->step].name);
    json_field_string(w, "cat", category[ev->kind]);
    json_field_string(w, "ph", "X");
    json_field_double(w, "ts", micros(t, ev->start));
    json_field_double(w, "dur", duration(ev));
    json_field_int(w, "pid", ev->prog + 1);
    json_field_int(w, "tid", ev->kind == EV_CHUNK ? ev->thread + 1 : 0);
    json_key(w, "args");
    json_begin_object(w);
    json_field_int(w, "run", ev->run);
    if (ev->kind != EV_RUN)
        json_field_int(w, "step", ev->step);
    if (ev->kind == EV_STEP)
        write_step_args(w, tp, ev);
    if (ev->kind == EV_CHUNK) {
        json_field_int(w, "first", ev->first);
        json_field_int(w, "last", ev->last);
    }
    json_end_object(w);
    json_end_object(w);
}

static void write_events(JsonWriter *w, const Trace *t)
{
    json_begin_object(w);
    json_key(w, "traceEvents");
    json_begin_array(w);
    for (int i = 0; i < t->nprog; i++) {
        int threads = 0;
        for (int64_t k = 0; k < t->nev; k++)
            if (t->ev[k].prog == i && t->ev[k].kind == EV_CHUNK && t->ev[k].thread + 1 > threads)
                threads = t->ev[k].thread + 1;
        write_names(w, t, i, threads);
    }
    for (int64_t k = 0; k < t->nev; k++)
        write_event(w, t, &t->ev[k]);
    json_newline(w);
    json_end_array(w);
    json_field_string(w, "displayTimeUnit", "ms");
    json_key(w, "otherData");
    json_begin_object(w);
    json_field_string(w, "generator", "coil");
    json_field_int(w, "events", t->nev);
    json_field_int(w, "dropped", t->dropped);
    json_end_object(w);
    json_end_object(w);
}

bool trace_write(const Trace *t, const char *path, Err *e)
{
    AtomicFile af;
    if (!atomic_open(&af, path, e))
        return false;
    JsonWriter w;
    json_writer_init(&w, af.f);
    write_events(&w, t);
    return atomic_close(&af, json_writer_done(&w), e);
}
