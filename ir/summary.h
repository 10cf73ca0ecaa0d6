/* summary.h — what `coil check` prints about a model: its inputs and outputs, parameter
 * count and bytes, and the FLOPs of one call at given symbol values, counted from shapes alone. */
#ifndef COIL_RUNTIME_SUMMARY_H
#define COIL_RUNTIME_SUMMARY_H

#include "base/json.h"
#include "ir/ir.h"

/* The FLOPs of one evaluation of g at the shapes sb gives: the sum of op_info[].flops over
 * the nodes, as the interpreter counts them, without any data. Fails naming the first
 * node whose type has an unbound symbol. Bind symbols with init_symbols (runtime/init.h). */
bool graph_flops(const Graph *g, const SymBind *sb, double *flops, Err *e);
/* The same per node: flops[0..g->nnode) (a profile's per-step counts sum its nodes'). */
bool graph_node_flops(const Graph *g, const SymBind *sb, double *flops, Err *e);

/* Parameter totals (params must have static shapes; symbolic ones are counted in nsymbolic). */
typedef struct ParamStats {
    int ntensor, nsymbolic;
    int64_t nvalue, nbyte;
} ParamStats;
/* The parameters' totals (buffers false: the trained ones), or the buffers'. */
ParamStats param_stats(const Graph *g, bool buffers);

/* The summary as text (malloc'd; the caller frees): name, inputs, outputs, parameters,
 * node count, and FLOPs per call at sb (or which symbol to bind when one is missing).
 * NULL only when out of memory. */
char *model_summary(const Graph *g, const SymBind *sb, Err *e);
/* One line per parameter, "name: type  init", in graph_params order (malloc'd). */
char *model_param_list(const Graph *g, Err *e);

/* The same as members of the object w has open (`coil check --json`): "model", "inputs" and
 * "outputs" ([{name, dtype, shape}]), "parameters" {tensors, values, bytes, symbolic},
 * "nodes", "sizes" {symbol: value, those sb binds}, "flops" (null, with "flops_error"
 * saying why, when a symbol is unbound). */
void model_summary_json(JsonWriter *w, const Graph *g, const SymBind *sb);
/* "params": [{name, dtype, shape, init}] in graph_params order (init null when none). */
void model_param_list_json(JsonWriter *w, const Graph *g);
/* A type as the members "dtype" and "shape": a static dim a number, a symbolic one its
 * text ("B", "B*T"). */
void json_type_members(JsonWriter *w, const Graph *g, const Type *t);

#endif
