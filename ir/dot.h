/* dot.h — Graphviz `digraph` text for `coil dump --format=dot`: a graph node by node, the
 * same as a readable picture (a cluster per block, parameters folded), a fusion plan. */
#ifndef COIL_IR_DOT_H
#define COIL_IR_DOT_H

#include "ir/ir.h"

typedef struct Fusion Fusion;   /* passes/fuse.h */
typedef struct Program Program; /* codegen/loop.h */

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

/* The fusion plan f of g (after passes: primitives only) as lowering used it: one box
 * per group, in block clusters as above, labelled with its kernel's name (from p, the
 * program lowered from f; NULL: "row (g3)"), its kind and space, its ops, the parameters
 * it reads and the values it stores; a GEMM and its epilogue drawn as one step (a
 * cluster, the epilogue orange); edges for the buffers one group stores and another
 * reads, inputs to their readers, stored outputs to out<i>. */
char *fuse_dot(const Graph *g, const Fusion *f, const Program *p);

#endif
