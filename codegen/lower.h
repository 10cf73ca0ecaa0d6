/* lower.h — a fusion plan to a Program: the plan's groups become loop kernels and GEMM
 * steps. Planning (passes/fuse.h) and planning again are pipeline/fuse_lower.c's. */
#ifndef COIL_CODEGEN_LOWER_H
#define COIL_CODEGEN_LOWER_H

#include "codegen/loop.h"
#include "passes/fuse.h"

/* Lower g, which must hold only primitives (run the decompose pass first), as f plans it
 * (made by fuse_plan with force): lower each group, place results in buffers (in place
 * where a temporary dies), and order the steps. The program points at g, which must
 * outlive it; f may be freed once it returns. Errors name the node.
 * force holds FORCE_NONE or FORCE_OWN_GROUP per node of g. When a group cannot be lowered
 * as planned (a reduction read at another index, a view a GEMM cannot stride through) the
 * result is NULL with e unset and the *nretry nodes this plan could not lower made
 * FORCE_OWN_GROUP in force: plan again with force and lower that plan. A node already
 * FORCE_OWN_GROUP that still cannot be lowered is an error. */
Program *lower_fused(const Graph *g, const Fusion *f, uint8_t *force, int *nretry, Err *e);

#endif
