/* dot_parts.h — what ir/dot.c's pictures are drawn with, shared with the fusion plan's
 * (codegen/fusion_dot.c): escaping, headers, the blocks nodes are clustered in, the notes
 * that stand for folded parameters. Not for other users: ir/dot.h is the interface. */
#ifndef COIL_IR_DOT_PARTS_H
#define COIL_IR_DOT_PARTS_H

#include <stdio.h>

#include "ir/ir.h"

/* How a kind of node is drawn. */
typedef struct DotStyle {
    const char *shape, *fill;
} DotStyle;

/* How a graph input is drawn (an invhouse in light blue). */
extern const DotStyle dot_style_input;

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

/* What folded operands a node (or a kernel) reads, as label lines: parameter names
 * relative to block k, then the other leaves by op ("+2 full"). Lines wrap at ~40
 * characters so a box stays narrow. */
typedef struct Notes {
    Text t;
    int col;           /* characters on the current line */
    int nconst;        /* folded leaves that are not parameters */
    const char *leaf;  /* the op of the last one */
} Notes;

/* A label string for dot: quotes and backslashes escaped, newlines as spaces. */
void dot_put_escaped(FILE *f, const char *s);
/* "digraph NAME {" with the node defaults, and a title on top when given. */
void dot_put_header(FILE *f, const Graph *g, const char *title);
/* A node out<i> per graph output. */
void dot_put_outputs(FILE *f, const Graph *g);
/* The blocks of g's nodes, and which are folded (false: out of memory). */
bool dot_blocks_make(const Graph *g, Blocks *b);
void dot_blocks_free(Blocks *b);
/* Operand `in` (folded) of a node in block k, as a note. */
void dot_note_operand(Notes *no, const Graph *g, const Blocks *b, int k, int in);
/* The notes as label text (escaped for dot), "" when there are none; malloc'd. */
char *dot_notes_take(Notes *no);
/* Items 0..n-1 grouped by block (of[i], -1 for none): ids[start[k] .. start[k + 1]) are
 * block k's in increasing order, the unclustered ones last (k = nkey). start has nkey + 2
 * entries; the ids are malloc'd (NULL when out of memory). */
int *dot_bucket_by_block(int n, const int *of, int nkey, int *start);
/* "subgraph cluster_<name><k> {" with its label and fill; the caller closes it. */
void dot_open_cluster(FILE *f, const char *name, int k, const char *label, const char *color);

#endif
