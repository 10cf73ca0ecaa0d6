/* dot.c — Graphviz pictures: a graph node by node, the same grouped into a cluster per
 * block with its parameters folded into the ops that read them, and a fusion plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/loop.h"
#include "ir/dot.h"
#include "passes/fuse.h"

/* How a kind of node is drawn. */
typedef struct DotStyle {
    const char *shape, *fill;
} DotStyle;

static const DotStyle style_op = {"box", "white"}, style_input = {"invhouse", "lightblue"},
                      style_param = {"box", "lightyellow"}, style_leaf = {"box", "gray92"},
                      style_output = {"house", "palegreen"};

static const DotStyle *node_style(const Node *n)
{
    if (n->op == OP_INPUT)
        return &style_input;
    if (n->op == OP_PARAM)
        return &style_param;
    return op_info[n->op].flags & OPF_LEAF ? &style_leaf : &style_op;
}

/* A label string for dot: quotes and backslashes escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

static void put_header(FILE *f, const Graph *g, const char *title)
{
    fputs("digraph \"", f);
    put_escaped(f, g->name ? g->name : "graph");
    fputs("\" {\n  node [style=filled, fontname=\"monospace\"];\n", f);
    if (title) {
        fputs("  labelloc=t;\n  label=\"", f);
        put_escaped(f, title);
        fputs("\";\n", f);
    }
}

static void put_outputs(FILE *f, const Graph *g)
{
    for (int i = 0; i < g->noutput; i++) {
        fprintf(f, "  out%d [shape=%s, fillcolor=%s, label=\"", i, style_output.shape, style_output.fill);
        put_escaped(f, g->output_name && g->output_name[i] ? g->output_name[i] : "out");
        fputs("\"];\n", f);
    }
}

/* ---------------------------------------------------------------- every node */

static void put_node(FILE *f, const Graph *g, int id)
{
    const Node *n = &g->node[id];
    const DotStyle *st = node_style(n);
    char type[256];
    fprintf(f, "  n%d [shape=%s, fillcolor=%s, label=\"%%%d %s", id, st->shape, st->fill, id, op_info[n->op].name);
    if (n->op == OP_INPUT || n->op == OP_PARAM) {
        fputs("\\n", f);
        put_escaped(f, node_name(n) ? node_name(n) : "?");
    }
    fputs("\\n", f);
    put_escaped(f, type_fmt(g, &n->type, type, sizeof type));
    fputs("\"];\n", f);
}

char *ir_dot(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    put_header(f, g, NULL);
    for (int i = 0; i < g->nnode; i++)
        put_node(f, g, i);
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            fprintf(f, "  n%d -> n%d;\n", g->node[i].in[j], i);
    put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++)
        fprintf(f, "  n%d -> out%d;\n", g->output[i], i);
    fputs("}\n", f);
    fclose(f);
    return text;
}

/* ---------------------------------------------------------------- blocks */

/* A block is the dotted prefix of parameter names up to the first index
 * ("transformer.h.3.attn.c_attn.weight" is in "transformer.h.3", "backbone.4.weight" in
 * "backbone.4"), else the name less its last part ("transformer.ln_f"). A node's block is
 * the latest (in first-read order) among the blocks of the parameters it reads and of its
 * operands: a residual add joins the block whose output it adds, the head the final norm. */
typedef struct Blocks {
    char **key;    /* per block: its prefix, malloc'd */
    int nkey, cap;
    int *of;       /* per node: its block, -1 for none */
    bool *folded;  /* per node: drawn as a note on its readers (a parameter, a constant, a
                      view of one), not as a node of its own */
} Blocks;

/* Blocks past this many are not told apart (their nodes go unclustered): a picture of
 * thousands of clusters is no picture, and the lookup stays linear. */
#define DOT_MAX_BLOCKS 4096

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return n > 0;
}

static size_t block_prefix(const char *name)
{
    for (const char *c = name;;) {
        const char *dot = strchr(c, '.');
        size_t n = dot ? (size_t)(dot - c) : strlen(c);
        if (all_digits(c, n))
            return (size_t)(c - name) + n;
        if (!dot)
            break;
        c = dot + 1;
    }
    const char *last = strrchr(name, '.');
    return last ? (size_t)(last - name) : 0;
}

/* The block of a parameter name (made when new), -1 for none. Searched from the latest:
 * consecutive reads are mostly of one block. */
static int block_of_name(Blocks *b, const char *name)
{
    size_t n = name ? block_prefix(name) : 0;
    if (n == 0)
        return -1;
    for (int k = b->nkey - 1; k >= 0; k--)
        if (strlen(b->key[k]) == n && memcmp(b->key[k], name, n) == 0)
            return k;
    if (b->nkey == DOT_MAX_BLOCKS)
        return -1;
    if (b->nkey == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        char **grown = realloc(b->key, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        b->key = grown, b->cap = cap;
    }
    char *key = malloc(n + 1);
    if (!key)
        return -1;
    memcpy(key, name, n);
    key[n] = 0;
    b->key[b->nkey] = key;
    return b->nkey++;
}

/* The parameter id reaches through views, or -1. */
static int param_through_views(const Graph *g, int id)
{
    while (op_info[g->node[id].op].flags & OPF_VIEW)
        id = g->node[id].in[0];
    return g->node[id].op == OP_PARAM ? id : -1;
}

static void blocks_free(Blocks *b)
{
    for (int k = 0; k < b->nkey; k++)
        free(b->key[k]);
    free(b->key);
    free(b->of);
    free(b->folded);
    memset(b, 0, sizeof *b);
}

static bool blocks_make(const Graph *g, Blocks *b)
{
    memset(b, 0, sizeof *b);
    b->of = malloc(((size_t)g->nnode + 1) * sizeof *b->of);
    b->folded = calloc((size_t)g->nnode + 1, sizeof *b->folded);
    if (!b->of || !b->folded) {
        blocks_free(b);
        return false;
    }
    for (int id = 0; id < g->nnode; id++) {
        const Node *n = &g->node[id];
        int flags = op_info[n->op].flags;
        b->folded[id] = ((flags & OPF_LEAF) && n->op != OP_INPUT) ||
                        ((flags & OPF_VIEW) && b->folded[n->in[0]]);
        b->of[id] = -1;
        for (int j = 0; !b->folded[id] && j < n->nin; j++) {
            int in = n->in[j], p = b->folded[in] ? param_through_views(g, in) : -1;
            int k = p >= 0 ? block_of_name(b, node_name(&g->node[p])) : b->folded[in] ? -1 : b->of[in];
            b->of[id] = k > b->of[id] ? k : b->of[id];
        }
    }
    return true;
}

/* name less its block's prefix: "attn.c_attn.weight" in block "transformer.h.3". */
static const char *relative_name(const Blocks *b, int k, const char *name)
{
    size_t n = k >= 0 ? strlen(b->key[k]) : 0;
    return n && strncmp(name, b->key[k], n) == 0 && name[n] == '.' ? name + n + 1 : name;
}

/* What folded operands a node (or a kernel) reads, as label lines: parameter names
 * relative to block k, then the other leaves by op ("+2 full"). Lines wrap at ~40
 * characters so a box stays narrow. */
typedef struct Notes {
    Text t;
    int col;           /* characters on the current line */
    int nconst;        /* folded leaves that are not parameters */
    const char *leaf;  /* the op of the last one */
} Notes;

static void note_param(Notes *no, const char *name)
{
    char esc[256];
    size_t n = 0;
    for (const char *c = name; *c && n + 2 < sizeof esc; c++) {
        if (*c == '"' || *c == '\\')
            esc[n++] = '\\';
        esc[n++] = *c == '\n' ? ' ' : *c;
    }
    esc[n] = 0;
    if (no->col && no->col + (int)n > 40) {
        text_put(&no->t, "\\n");
        no->col = 0;
    }
    text_put(&no->t, "%s%s", no->col ? ", " : "", esc);
    no->col += (int)n + 2;
}

static void note_operand(Notes *no, const Graph *g, const Blocks *b, int k, int in)
{
    int p = param_through_views(g, in);
    if (p >= 0) {
        note_param(no, relative_name(b, k, node_name(&g->node[p])));
        return;
    }
    while (op_info[g->node[in].op].flags & OPF_VIEW)
        in = g->node[in].in[0];
    no->nconst++;
    no->leaf = op_info[g->node[in].op].name;
}

/* The notes as label text (escaped for dot), "" when there are none; malloc'd. */
static char *notes_take(Notes *no)
{
    if (no->nconst)
        text_put(&no->t, "%s+%d %s", no->col ? "\\n" : "", no->nconst,
                 no->nconst == 1 ? no->leaf : "leaves");
    char *s = text_take(&no->t);
    return s ? s : calloc(1, 1);
}

/* ---------------------------------------------------------------- the clustered graph */

static void put_folded_node(FILE *f, const Graph *g, const Blocks *b, int id)
{
    const Node *n = &g->node[id];
    const DotStyle *st = node_style(n);
    char type[256];
    Notes no = {0};
    for (int j = 0; j < n->nin; j++)
        if (b->folded[n->in[j]])
            note_operand(&no, g, b, b->of[id], n->in[j]);
    char *notes = notes_take(&no);
    fprintf(f, "n%d [shape=%s, fillcolor=%s, label=\"%%%d %s", id, st->shape, st->fill, id,
            op_info[n->op].name);
    if (n->op == OP_INPUT) {
        fputs("\\n", f);
        put_escaped(f, node_name(n) ? node_name(n) : "?");
    }
    fputs("\\n", f);
    put_escaped(f, type_fmt(g, &n->type, type, sizeof type));
    if (notes && *notes)
        fprintf(f, "\\n%s", notes); /* escaped as the notes were made */
    fputs("\"];\n", f);
    free(notes);
}

/* Items 0..n-1 grouped by block (of[i], -1 for none): ids[start[k] .. start[k + 1]) are
 * block k's in increasing order, the unclustered ones last (k = nkey). start has nkey + 2
 * entries; the ids are malloc'd (NULL when out of memory). */
static int *bucket_by_block(int n, const int *of, int nkey, int *start)
{
    int *ids = malloc(((size_t)n + 1) * sizeof *ids);
    int *at = malloc(((size_t)nkey + 2) * sizeof *at);
    if (!ids || !at) {
        free(ids);
        free(at);
        return NULL;
    }
    memset(start, 0, ((size_t)nkey + 2) * sizeof *start);
    for (int i = 0; i < n; i++)
        start[(of[i] >= 0 ? of[i] : nkey) + 1]++;
    for (int k = 0; k <= nkey; k++)
        start[k + 1] += start[k];
    memcpy(at, start, ((size_t)nkey + 2) * sizeof *at);
    for (int i = 0; i < n; i++)
        ids[at[of[i] >= 0 ? of[i] : nkey]++] = i;
    free(at);
    return ids;
}

static void open_cluster(FILE *f, const char *name, int k, const char *label, const char *color)
{
    fprintf(f, "  subgraph cluster_%s%d {\n    label=\"", name, k);
    put_escaped(f, label);
    fprintf(f, "\";\n    style=\"rounded,filled\";\n    fillcolor=\"%s\";\n    color=gray60;\n", color);
}

static bool dot_blocks(FILE *f, const Graph *g)
{
    Blocks b;
    if (!blocks_make(g, &b))
        return false;
    int *start = malloc(((size_t)b.nkey + 2) * sizeof *start);
    int *ids = start ? bucket_by_block(g->nnode, b.of, b.nkey, start) : NULL;
    if (!ids) {
        free(start);
        blocks_free(&b);
        return false;
    }
    put_header(f, g, NULL);
    for (int k = 0; k <= b.nkey; k++) {
        if (k < b.nkey)
            open_cluster(f, "b", k, b.key[k], "gray97");
        for (int i = start[k]; i < start[k + 1]; i++)
            if (!b.folded[ids[i]]) {
                fputs(k < b.nkey ? "    " : "  ", f);
                put_folded_node(f, g, &b, ids[i]);
            }
        if (k < b.nkey)
            fputs("  }\n", f);
    }
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; !b.folded[i] && j < g->node[i].nin; j++)
            if (!b.folded[g->node[i].in[j]])
                fprintf(f, "  n%d -> n%d;\n", g->node[i].in[j], i);
    put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++)
        if (!b.folded[g->output[i]])
            fprintf(f, "  n%d -> out%d;\n", g->output[i], i);
    fputs("}\n", f);
    free(ids);
    free(start);
    blocks_free(&b);
    return true;
}

char *ir_dot_blocks(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    bool ok = dot_blocks(f, g);
    fclose(f);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---------------------------------------------------------------- the fusion plan */

static const char *const kind_name[] = {"pointwise", "row", "gemm", "attention"};
static const char *const kind_fill[] = {"white", "lightcyan", "khaki", "plum"};

/* What the picture of a plan needs per group: its block, its kernel's name, its members
 * in node order. */
typedef struct PlanView {
    const Graph *g;
    const Fusion *f;
    Blocks b;
    int *block;          /* per group */
    const char **kernel; /* per group: the loop kernel's name, NULL (a GEMM, or no program) */
    int *start, *member; /* member[start[grp] .. start[grp + 1]): grp's nodes */
    int *seen;           /* per group (edges) or per node (parameters): a stamp */
    int stamp;
} PlanView;

static void plan_view_free(PlanView *v)
{
    blocks_free(&v->b);
    free(v->block);
    free((void *)v->kernel);
    free(v->start);
    free(v->member);
    free(v->seen);
}

static bool plan_view_make(PlanView *v, const Graph *g, const Fusion *f, const Program *p)
{
    memset(v, 0, sizeof *v);
    v->g = g, v->f = f;
    size_t ng = (size_t)f->ngroup + 2, nn = (size_t)g->nnode + 1;
    v->block = malloc(ng * sizeof *v->block);
    v->kernel = calloc(ng, sizeof *v->kernel);
    v->start = calloc(ng + 1, sizeof *v->start);
    v->member = malloc(nn * sizeof *v->member);
    v->seen = calloc(ng > nn ? ng : nn, sizeof *v->seen);
    if (!blocks_make(g, &v->b) || !v->block || !v->kernel || !v->start || !v->member || !v->seen)
        return false;
    for (int grp = 0; grp < f->ngroup; grp++)
        v->block[grp] = -1;
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] >= 0) {
            int *k = &v->block[f->group[id]];
            *k = v->b.of[id] > *k ? v->b.of[id] : *k;
            v->start[f->group[id] + 1]++;
        }
    for (int grp = 0; grp < f->ngroup; grp++)
        v->start[grp + 1] += v->start[grp];
    int *at = v->seen; /* borrowed: zeroed again below */
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] >= 0)
            v->member[v->start[f->group[id]] + at[f->group[id]]++] = id;
    memset(v->seen, 0, (ng > nn ? ng : nn) * sizeof *v->seen);
    for (int k = 0; p && k < p->nkernel; k++)
        if (p->kernel[k].group >= 0 && p->kernel[k].group < f->ngroup)
            v->kernel[p->kernel[k].group] = p->kernel[k].name;
    return true;
}

/* The members' ops, "mean sub mul ..." wrapped every few, at most 48 listed. */
static void put_op_list(FILE *f, const PlanView *v, int grp)
{
    int n = v->start[grp + 1] - v->start[grp];
    for (int i = 0; i < n && i < 48; i++) {
        const Node *x = &v->g->node[v->member[v->start[grp] + i]];
        fprintf(f, "%s%s", i == 0 ? "" : i % 6 ? " " : "\\n", op_info[x->op].name);
    }
    if (n > 48)
        fprintf(f, " ... (%d ops)", n);
}

/* "stores %45 f32[B,T,768]" for up to three stored members, then a count. */
static void put_stores(FILE *f, const PlanView *v, int grp)
{
    int shown = 0, more = 0;
    char ty[128];
    for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
        int id = v->member[i];
        if (!v->f->stored[id])
            continue;
        if (shown == 3) {
            more++;
            continue;
        }
        fprintf(f, "%s%%%d %s", shown ? "\\n       " : "\\nstores ", id,
                type_fmt(v->g, &v->g->node[id].type, ty, sizeof ty));
        shown++;
    }
    if (more)
        fprintf(f, "\\n       and %d more", more);
}

/* The parameters and other leaves the group's members read, each once. */
static char *group_notes(PlanView *v, int grp)
{
    Notes no = {0};
    v->stamp++;
    for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
        const Node *x = &v->g->node[v->member[i]];
        for (int j = 0; j < x->nin; j++) {
            int in = x->in[j];
            if (!v->b.folded[in] || v->seen[in] == v->stamp)
                continue;
            v->seen[in] = v->stamp;
            note_operand(&no, v->g, &v->b, v->block[grp], in);
        }
    }
    return notes_take(&no);
}

static void put_group_node(FILE *f, PlanView *v, int grp, const char *indent)
{
    const FuseGroup *G = &v->f->g[grp];
    char ty[256];
    fprintf(f, "%sg%d [shape=box, fillcolor=%s, label=\"", indent, grp,
            G->gemm >= 0 ? "lightsalmon" : kind_fill[G->kind]);
    if (v->kernel[grp])
        fprintf(f, "%s", v->kernel[grp]);
    else
        fprintf(f, "%s (g%d)", kind_name[G->kind], grp);
    if (G->gemm >= 0)
        fputs("  [epilogue]", f);
    fprintf(f, "\\n%s %s", kind_name[G->kind], type_fmt(v->g, &G->space, ty, sizeof ty));
    fputs("\\n", f);
    put_op_list(f, v, grp);
    char *notes = group_notes(v, grp);
    if (notes && *notes)
        fprintf(f, "\\nreads %s", notes);
    free(notes);
    put_stores(f, v, grp);
    fputs("\"];\n", f);
}

/* A GEMM and its epilogue are one step: a cluster of two boxes. */
static void put_group(FILE *f, PlanView *v, int grp)
{
    const FuseGroup *G = &v->f->g[grp];
    if (G->gemm >= 0)
        return; /* drawn with its GEMM */
    if (G->epilogue < 0) {
        put_group_node(f, v, grp, "    ");
        return;
    }
    fprintf(f, "    subgraph cluster_step%d {\n      label=\"GEMM step, epilogue in its tiles\";\n"
               "      style=dashed;\n      color=darkorange;\n", grp);
    put_group_node(f, v, grp, "      ");
    put_group_node(f, v, G->epilogue, "      ");
    fputs("    }\n", f);
}

/* Edges between groups for the buffers one stores and the other reads (views looked
 * through), inputs to their readers, each pair once. */
static void put_plan_edges(FILE *f, PlanView *v)
{
    const Graph *g = v->g;
    const Fusion *fu = v->f;
    for (int grp = 0; grp < fu->ngroup; grp++) {
        v->stamp++;
        for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
            const Node *x = &g->node[v->member[i]];
            for (int j = 0; j < x->nin; j++) {
                int src = x->in[j];
                while (fu->cls[src] == NC_VIEW)
                    src = g->node[src].in[0];
                int from = fu->group[src];
                if (from == grp || (from < 0 && g->node[src].op != OP_INPUT))
                    continue;
                int key = from >= 0 ? from : fu->ngroup; /* inputs: stamped per node below */
                if (from >= 0 && v->seen[key] == v->stamp)
                    continue;
                if (from >= 0)
                    v->seen[key] = v->stamp;
                bool epi = from >= 0 && fu->g[from].epilogue == grp;
                if (from >= 0)
                    fprintf(f, "  g%d -> g%d%s;\n", from, grp,
                            epi ? " [style=bold, color=darkorange, label=\"epilogue\"]" : "");
                else
                    fprintf(f, "  n%d -> g%d;\n", src, grp);
            }
        }
    }
}

static void put_plan_outputs(FILE *f, const PlanView *v)
{
    const Graph *g = v->g;
    put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++) {
        int src = g->output[i];
        while (v->f->cls[src] == NC_VIEW && v->f->group[src] < 0)
            src = g->node[src].in[0];
        if (v->f->group[src] >= 0)
            fprintf(f, "  g%d -> out%d;\n", v->f->group[src], i);
        else if (g->node[src].op == OP_INPUT)
            fprintf(f, "  n%d -> out%d;\n", src, i);
    }
}

static bool dot_plan(FILE *f, const Graph *g, const Fusion *fu, const Program *p)
{
    PlanView v;
    if (!plan_view_make(&v, g, fu, p)) {
        plan_view_free(&v);
        return false;
    }
    char title[256];
    snprintf(title, sizeof title, "fusion plan of '%s': %d groups (boxes: one kernel each; "
             "orange: a GEMM step with its epilogue)", g->name ? g->name : "graph", fu->ngroup);
    int *start = malloc(((size_t)v.b.nkey + 2) * sizeof *start);
    int *block_at = malloc(((size_t)fu->ngroup + 1) * sizeof *block_at), *ids = NULL;
    for (int o = 0; block_at && o < fu->ngroup; o++)
        block_at[o] = v.block[fu->order[o]]; /* positions in execution order, by block */
    if (!start || !block_at || !(ids = bucket_by_block(fu->ngroup, block_at, v.b.nkey, start))) {
        free(start), free(block_at);
        plan_view_free(&v);
        return false;
    }
    put_header(f, g, title);
    for (int i = 0; i < g->ninput; i++) {
        const Node *n = &g->node[g->input[i]];
        fprintf(f, "  n%d [shape=%s, fillcolor=%s, label=\"", g->input[i], style_input.shape,
                style_input.fill);
        put_escaped(f, node_name(n) ? node_name(n) : "?");
        fputs("\"];\n", f);
    }
    for (int k = 0; k <= v.b.nkey; k++) {
        if (k < v.b.nkey)
            open_cluster(f, "b", k, v.b.key[k], "gray97");
        for (int i = start[k]; i < start[k + 1]; i++)
            put_group(f, &v, fu->order[ids[i]]);
        if (k < v.b.nkey)
            fputs("  }\n", f);
    }
    put_plan_edges(f, &v);
    put_plan_outputs(f, &v);
    fputs("}\n", f);
    free(start), free(block_at), free(ids);
    plan_view_free(&v);
    return true;
}

char *fuse_dot(const Graph *g, const Fusion *f, const Program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    bool ok = dot_plan(out, g, f, p);
    fclose(out);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}
