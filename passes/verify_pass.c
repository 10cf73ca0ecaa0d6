/* verify_pass.c — the verify pass: ir_verify as a pipeline stage, so a list like
 * "fold,verify,cse" checks the graph between passes. */
#include "passes/passes.h"

Graph *pass_verify(const Graph *g, Err *e)
{
    return ir_verify(g, e) ? graph_copy(g, e) : NULL;
}
