/* dot.h — Graphviz `digraph` text for `coil dump --format=dot`: a graph node by node, the
 * same as a readable picture (a cluster per block, parameters folded). The fusion plan's
 * picture is codegen/fusion_dot.h. */
#ifndef COIL_IR_DOT_H
#define COIL_IR_DOT_H

#include "ir/ir.h"

/* The digraph (malloc'd; the caller frees), NULL when out of memory. Nodes are named n0,
 * n1, ... after their ids, labelled "%N op\ntype" (inputs and params also show their
 * name); each graph output adds a node out0, out1, ... fed by its value. Edges run
 * operand -> user, one per operand (an operand used twice gives two edges). */
char *ir_dot(const Graph *g);

/* The same graph drawn to be read at a model's scale: parameters, constants and views
 * of them are not nodes but notes on the ops that read them ("attn.c_attn.weight"), and
 * ops are grouped into a cluster per block: the dotted prefix of the parameters' names
 * up to the first index ("transformer.h.3", "backbone.4"), else less the last part
 * ("transformer.ln_f"). An op without parameters joins the latest block among its
 * operands'. Nodes keep ir_dot's names and labels (n<id>, "%<id> op\ntype"). */
char *ir_dot_blocks(const Graph *g);

#endif
