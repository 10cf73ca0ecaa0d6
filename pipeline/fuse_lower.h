/* fuse_lower.h — the fuse and lower stages: a graph of primitives to a Program, planning
 * fusion (passes/fuse.h) and lowering the plan (codegen/lower.h) until a plan lowers. */
#ifndef COIL_PIPELINE_FUSE_LOWER_H
#define COIL_PIPELINE_FUSE_LOWER_H

#include "codegen/lower.h"

typedef struct LowerOptions {
    bool no_fusion; /* one kernel per op, no epilogues (--no-fusion): for comparison */
    Fusion *plan;   /* when not NULL, receives the fusion plan the program was lowered
                       from (after any retries); fuse_free it */
    int max_fused;  /* the most nodes in one kernel: 0 for FUSE_MAX_NODES, < 0 no limit */
    double *fuse_s; /* when not NULL, receives the seconds spent planning fusion (every
                       plan tried), part of fuse_and_lower's time */
} LowerOptions;

/* Plan g's fusion (g must hold only primitives: run the decompose pass first) and lower
 * the plan. When a group cannot be lowered as planned (a reduction read at another index,
 * a view a GEMM cannot stride through) its node is given a group of its own and planning
 * starts again. Errors name the node. The program points at g, which must outlive it. o
 * may be NULL (fusion on). */
Program *fuse_and_lower(const Graph *g, const LowerOptions *o, Err *e);

#endif
