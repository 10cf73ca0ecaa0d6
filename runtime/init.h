/* init.h — initial values for a run without data: parameters from their init strings
 * and random graph inputs, drawn from Philox so every backend gets the same numbers. */
#ifndef COIL_RUNTIME_INIT_H
#define COIL_RUNTIME_INIT_H

#include "ir/ir.h"

/* The stream of a named tensor: FNV-1a 64 of its name, so a value depends on the seed
 * and the name only, never on the order of parameters. Element i of the tensor is
 * drawn from philox_*(seed, init_stream(name), i). */
uint64_t init_stream(const char *name);

/* Fill t (allocated, row-major) from an init string: zeros, ones, normal(std),
 * normal(mean, std), uniform(a, b), xavier (uniform, bound sqrt(6/(fan_in+fan_out))),
 * kaiming (normal, std sqrt(2/fan_in)); NULL or "" means zeros. Fans follow PyTorch for a
 * weight [out, in, ...]: fan_in = in*receptive, fan_out = out*receptive; rank 1:
 * both are shape[0]. Errors name the parameter. */
bool init_tensor(Tensor *t, const char *name, const char *init, uint64_t seed, Err *e);

/* A symbol's size given on the command line (--dim B=8). */
typedef struct SymSize {
    const char *name;
    int64_t value;
} SymSize;

/* Choose every symbol's value: from `sizes` first, then from the inputs already given
 * (given[i]; dims that are a lone symbol), then `fallback`. inputs and given may be NULL
 * (no inputs). A size naming no symbol of g is an error listing the symbols. */
bool init_symbols(const Graph *g, const Tensor *inputs, const bool *given, const SymSize *sizes,
                  int nsizes, int64_t fallback, SymBind *sb, Err *e);

/* Allocate and fill params (graph_params order) from their init strings. */
bool init_params(const Graph *g, const SymBind *sb, uint64_t seed, Tensor *params, Err *e);
/* The same for one param node n (of g, or of a graph g was made from: sb binds g's symbols). */
bool init_param(const Graph *g, const Node *n, const SymBind *sb, uint64_t seed, Tensor *t, Err *e);

/* Allocate and fill the inputs not given: floats normal(0, 1); bools 0/1; integers
 * uniform in [0, bound) where bound is what the value indexes (a gather's table
 * dimension, cross_entropy's class count, through views and casts), else 2. */
bool init_inputs(const Graph *g, const SymBind *sb, uint64_t seed, const bool *given,
                 Tensor *inputs, Err *e);
/* The same for part `part` of a batch split across data-parallel ranks: an input whose
 * leading dimension is one of samples gets the values of that part of the whole batch's
 * (element i of part p is element p * numel + i of the whole); the others, the same
 * values in every part. */
bool init_inputs_part(const Graph *g, const SymBind *sb, uint64_t seed, const bool *given,
                      int part, Tensor *inputs, Err *e);

#endif
