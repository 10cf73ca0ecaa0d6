/* dot.c — Graphviz output of a graph. Leaves are told apart by shape and colour so the
 * data (inputs), the weights (params) and the results (outputs) stand out in the picture. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/dot.h"

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
    fputs("digraph \"", f);
    put_escaped(f, g->name ? g->name : "graph");
    fputs("\" {\n  node [style=filled, fontname=\"monospace\"];\n", f);
    for (int i = 0; i < g->nnode; i++)
        put_node(f, g, i);
    for (int i = 0; i < g->nnode; i++)
        for (int j = 0; j < g->node[i].nin; j++)
            fprintf(f, "  n%d -> n%d;\n", g->node[i].in[j], i);
    for (int i = 0; i < g->noutput; i++) {
        fprintf(f, "  out%d [shape=%s, fillcolor=%s, label=\"", i, style_output.shape, style_output.fill);
        put_escaped(f, g->output_name && g->output_name[i] ? g->output_name[i] : "out");
        fprintf(f, "\"];\n  n%d -> out%d;\n", g->output[i], i);
    }
    fputs("}\n", f);
    fclose(f);
    return text;
}
