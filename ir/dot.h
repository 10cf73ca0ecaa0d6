/* dot.h — a graph as Graphviz `digraph` text, for `coil dump --format=dot`: a picture
 * of the dataflow, one box per IR node, inputs, parameters and outputs set apart. */
#ifndef COIL_IR_DOT_H
#define COIL_IR_DOT_H

#include "ir/ir.h"

/* The digraph (malloc'd; the caller frees), NULL when out of memory. Nodes are named n0,
 * n1, ... after their ids, labelled "%N op\ntype" (inputs and params also show their
 * name); each graph output adds a node out0, out1, ... fed by its value. Edges run
 * operand -> user, one per operand (an operand used twice gives two edges). */
char *ir_dot(const Graph *g);

#endif
