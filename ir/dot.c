/* dot.c — Graphviz pictures: a graph node by node, the same grouped into a cluster per
 * block with its parameters folded into the ops that read them; the parts the fusion
 * plan's picture (codegen/fusion_dot.c) draws with too (ir/dot_parts.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dot.h"
#include "ir/dot_parts.h"


const DotStyle dot_style_input = {"invhouse", "lightblue"};
static const DotStyle style_op = {"box", "white"}, style_param = {"box", "lightyellow"},
                      style_leaf = {"box", "gray92"}, style_output = {"house", "palegreen"};

static const DotStyle *node_style(const Node *n)
{
    if (n->op == OP_INPUT)
        return &dot_style_input;
    if (n->op == OP_PARAM)
        return &style_param;
    return op_info[n->op].flags & OPF_LEAF ? &style_leaf : &style_op;
}

/* A label string for dot: quotes and backslashes escaped. */
void dot_put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

void dot_put_header(FILE *f, const Graph *g, const char *title)
{
    fputs("digraph \"", f);
    dot_put_escaped(f, g->name ? g->name : "graph");
    fputs("\" {\n  node [style=filled, fontname=\"monospace\"];\n", f);
    if (title) {
        fputs("  labelloc=t;\n  label=\"", f);
        dot_put_escaped(f, title);
        fputs("\";\n", f);
    }
}

void dot_put_outputs(FILE *f, const Graph *g)
{
    for (int i = 0; i < g->noutput; i++) {
        fprintf(f, "  out%d [shape=%s, fillcolor=%s, label=\"", i, style_output.shape, style_output.fill);
        dot_put_escaped(f, g->output_name && g->output_name[i] ? g->output_name[i] : "out");
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
        dot_put_escaped(f, node_name(n) ? node_name(n) : "?");
    }
    fputs("\\n", f);
    dot_put_escaped(f, type_fmt(g, &n->type, type, sizeof type));
    fputs("\"];\n", f);
}

char *ir_dot(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    dot_put_header(f, g, NULL);
    for (int i = 0; i < g->nnode; i++)
        put_node(f, g, i);
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            fprintf(f, "  n%d -> n%d;\n", g->node[i].in[j], i);
    dot_put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++)
        fprintf(f, "  n%d -> out%d;\n", g->output[i], i);
    fputs("}\n", f);
    fclose(f);
    return text;
}

/* ---------------------------------------------------------------- blocks */



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

void dot_blocks_free(Blocks *b)
{
    for (int k = 0; k < b->nkey; k++)
        free(b->key[k]);
    free(b->key);
    free(b->of);
    free(b->folded);
    memset(b, 0, sizeof *b);
}

bool dot_blocks_make(const Graph *g, Blocks *b)
{
    memset(b, 0, sizeof *b);
    b->of = malloc(((size_t)g->nnode + 1) * sizeof *b->of);
    b->folded = calloc((size_t)g->nnode + 1, sizeof *b->folded);
    if (!b->of || !b->folded) {
        dot_blocks_free(b);
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

void dot_note_operand(Notes *no, const Graph *g, const Blocks *b, int k, int in)
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
char *dot_notes_take(Notes *no)
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
            dot_note_operand(&no, g, b, b->of[id], n->in[j]);
    char *notes = dot_notes_take(&no);
    fprintf(f, "n%d [shape=%s, fillcolor=%s, label=\"%%%d %s", id, st->shape, st->fill, id,
            op_info[n->op].name);
    if (n->op == OP_INPUT) {
        fputs("\\n", f);
        dot_put_escaped(f, node_name(n) ? node_name(n) : "?");
    }
    fputs("\\n", f);
    dot_put_escaped(f, type_fmt(g, &n->type, type, sizeof type));
    if (notes && *notes)
        fprintf(f, "\\n%s", notes); /* escaped as the notes were made */
    fputs("\"];\n", f);
    free(notes);
}

/* Items 0..n-1 grouped by block (of[i], -1 for none): ids[start[k] .. start[k + 1]) are
 * block k's in increasing order, the unclustered ones last (k = nkey). start has nkey + 2
 * entries; the ids are malloc'd (NULL when out of memory). */
int *dot_bucket_by_block(int n, const int *of, int nkey, int *start)
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

void dot_open_cluster(FILE *f, const char *name, int k, const char *label, const char *color)
{
    fprintf(f, "  subgraph cluster_%s%d {\n    label=\"", name, k);
    dot_put_escaped(f, label);
    fprintf(f, "\";\n    style=\"rounded,filled\";\n    fillcolor=\"%s\";\n    color=gray60;\n", color);
}

static bool dot_blocks(FILE *f, const Graph *g)
{
    Blocks b;
    if (!dot_blocks_make(g, &b))
        return false;
    int *start = malloc(((size_t)b.nkey + 2) * sizeof *start);
    int *ids = start ? dot_bucket_by_block(g->nnode, b.of, b.nkey, start) : NULL;
    if (!ids) {
        free(start);
        dot_blocks_free(&b);
        return false;
    }
    dot_put_header(f, g, NULL);
    for (int k = 0; k <= b.nkey; k++) {
        if (k < b.nkey)
            dot_open_cluster(f, "b", k, b.key[k], "gray97");
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
    dot_put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++)
        if (!b.folded[g->output[i]])
            fprintf(f, "  n%d -> out%d;\n", g->output[i], i);
    fputs("}\n", f);
    free(ids);
    free(start);
    dot_blocks_free(&b);
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
