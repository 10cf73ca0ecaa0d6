/* fusion_dot.h — a fusion plan as a Graphviz digraph. */
#ifndef COIL_CODEGEN_FUSION_DOT_H
#define COIL_CODEGEN_FUSION_DOT_H

#include "codegen/loop.h"
#include "passes/fuse.h"

/* The fusion plan f of g (after passes: primitives only) as lowering used it: one box
 * per group, in block clusters (ir/dot.h), labelled with its kernel's name (from p, the
 * program lowered from f; NULL: "row (g3)"), its kind and space, its ops, the parameters
 * it reads and the values it stores; a GEMM and its epilogue drawn as one step (a
 * cluster, the epilogue orange); edges for the buffers one group stores and another
 * reads, inputs to their readers, stored outputs to out<i>. Malloc'd; NULL out of memory. */
char *fuse_dot(const Graph *g, const Fusion *f, const Program *p);

#endif
