/* lower.h — a graph to a Program: fusion groups become loop kernels and GEMM steps. */
#ifndef COIL_CODEGEN_LOWER_H
#define COIL_CODEGEN_LOWER_H

#include "codegen/loop.h"
#include "passes/fuse.h"

typedef struct LowerOptions {
    bool no_fusion; /* one kernel per op, no epilogues (--no-fusion): for comparison */
    Fusion *plan;   /* when not NULL, receives the fusion plan the program was lowered
                       from (after any retries); fuse_free it */
    int max_fused;  /* the most nodes in one kernel: 0 for FUSE_MAX_NODES, < 0 no limit */
    double *fuse_s; /* when not NULL, receives the seconds spent planning fusion (every
                       plan tried), part of loop_lower's time */
} LowerOptions;

/* Lower g, which must hold only primitives (run the decompose pass first): plan the
 * fusion (passes/fuse.h), lower each group, place results in buffers (in place where a
 * temporary dies), and order the steps. When a group cannot be lowered as planned (a
 * reduction read at another index, a view a GEMM cannot stride through) the node is
 * given a group of its own and planning starts again. Errors name the node. The program
 * points at g, which must outlive it. o may be NULL (fusion on). */
Program *loop_lower(const Graph *g, const LowerOptions *o, Err *e);

#endif
