/* index_bounds.h — whether the indices of a gather (or an index_check) stay in range: a
 * range analysis over the index's producers at a run's symbol values, checked before any
 * kernel runs, and the run-time guard for indices computed from data.
 *
 * Compiled kernels clamp an index into its table so that no load faults; the interpreter
 * (like PyTorch) rejects it. These checks make every runner reject it too:
 * - an index read straight from an input (through views and casts) is checked on the
 *   input's values before the run (IndexCheck, codegen/loop.c);
 * - an index the analysis bounds at the run's sizes is checked then: proven in range, or
 *   an error naming the gather, the values' range and the table's size (a sequence
 *   longer than a position table); indices computed from the sizes alone (iota, full,
 *   constants and arithmetic on them) are always decided, exactly when the ranges are
 *   not conclusive;
 * - any other index (computed from data) gets a range step from lowering: a kernel before
 *   its reader's step reduces the index's values to [min, max] in a small buffer, which
 *   the runner compares with the bound after the run. Runners skip the step when the
 *   analysis has proven the index in range at the run's sizes. */
#ifndef COIL_CODEGEN_INDEX_BOUNDS_H
#define COIL_CODEGEN_INDEX_BOUNDS_H

#include "codegen/loop.h"

/* A node that indexes: a gather (operand 1, against the table's size along its axis) or
 * an index_check (operand 0, against its bound). False for any other node. */
bool index_use(const Graph *g, int node, int *index, Dim *bound);

/* Per node of g: whether its values depend on data (an input, a parameter, a random
 * draw) rather than on the sizes alone. malloc'd; NULL when out of memory. */
bool *value_depends_on_data(const Graph *g);

/* Whether `index` is an input read through views and casts: the runner checks the input's
 * values before the run (lower_index_check records it). */
bool index_is_checked_input(const Graph *g, int index);

/* Whether index use `node` gets a range step: its index depends on data (dep, from
 * value_depends_on_data) and is not a checked input. */
bool index_needs_range_step(const Graph *g, int node, const bool *dep);

/* The closed range of a node's values at some symbol values. known: bounded at all (an
 * integer always is, by its dtype's range at worst; a float computed from data or by an op
 * the analysis does not model is not); empty: the node has no elements there; lo_hit /
 * hi_hit: some element is known to equal lo / hi (the range is exact at that end, so a
 * bound it crosses is crossed by a real value). */
typedef struct ValueRange {
    bool known, empty, lo_hit, hi_hit;
    double lo, hi;
} ValueRange;

/* The range of node's values at sb (symbols it needs unbound: not known). */
ValueRange value_range(const Graph *g, int node, const SymBind *sb);

/* The buffers range steps store [min, max] into (two i64) carry this name; their Buffer
 * index is the index use's node. No other buffer is a BUF_TEMP of this name. */
extern const char index_range_buffer[];
/* Step s's range buffer when it is a range step, else -1. */
int range_step_buffer(const Program *p, int s);

/* Before a run at sb: an error naming the first index use proven out of range (a gather
 * reading past its table); skip[s] (one per step) true for the range steps whose index
 * is proven in range, false for every other step. */
bool index_bounds_before(const Program *p, const SymBind *sb, bool *skip, Err *e);
/* After a run: the [min, max] range buffer b of p holds (a range step's); an error naming
 * its index use when a value lies outside [0, bound). An empty index (min > max) passes. */
bool index_bounds_after(const Program *p, int b, const int64_t *minmax, const SymBind *sb,
                        Err *e);

#endif
