/* lower.h — a graph to a Program: fusion groups become loop kernels and GEMM steps. */
#ifndef COIL_CODEGEN_LOWER_H
#define COIL_CODEGEN_LOWER_H

#include "codegen/loop.h"

typedef struct LowerOptions {
    bool fusion; /* false: one kernel per op (--no-fusion), for comparison and bisecting */
} LowerOptions;

/* Lower g, which must hold only primitives (run the decompose pass first). Errors name
 * the node that cannot be lowered. The program points at g, which must outlive it. */
Program *loop_lower(const Graph *g, const LowerOptions *o, Err *e);

#endif
