/* zero.h — ZeRO's sharding of data-parallel training (Rajbhandari et al., 2020): each
 * rank keeps the optimizer state of its shard of the parameters only (stage 1) and, with
 * gradient accumulation, only its shard's accumulated gradients (stage 2). A step
 * reduce-scatters the gradients in data_parallel.h's buckets (each rank owning its chunk
 * of every bucket), updates the rank's shard with the global gradient norm, and
 * all-gathers the parameters. Element by element the update is the unsharded one, so the
 * run follows plain data parallelism's to the last bit but for the norm's rounding.
 *
 * Stage 3 (the parameters sharded too, gathered block by block as the forward and the
 * backward need them) needs the engine to call back before each block's kernels; the
 * compiled joint graph takes every parameter at once, so it is not built. */
#ifndef COIL_TRAIN_ZERO_H
#define COIL_TRAIN_ZERO_H

#include "runtime/cpu/cpu_optim.h"
#include "train/data_parallel.h"

typedef struct Zero Zero;

/* The shard of params[0..n) (the parameters of g, f32, the same on every rank) that this
 * rank of dp updates, with c's optimizer state for it alone. */
Zero *zero_new(int stage, DataParallel *dp, const OptConfig *c, const Graph *g, Tensor *params,
               int n, Err *e);
void zero_free(Zero *z);

/* Stage 2: one micro-batch's gradients summed over the ranks into the shard's
 * accumulated gradients (first: they start afresh). */
bool zero_accumulate(Zero *z, Tensor *grads, bool first, Err *e);
/* The step: the gradients (grads, whole; or stage 2's accumulated ones when
 * zero_accumulate gave them) times grad_scale, the shard updated at lr, the parameters
 * gathered. *norm: the global gradient norm (not finite: the update was skipped on every
 * rank). */
bool zero_step(Zero *z, Tensor *grads, double grad_scale, double lr, double *norm, Err *e);
void zero_set_steps(Zero *z, int64_t steps);
/* Bytes this rank keeps: the shard's optimizer state and accumulated gradients. */
int64_t zero_state_bytes(const Zero *z);

/* The optimizer state whole, for checkpoints, in optim_state's order and names. Between
 * zero_state_gather (a collective: every rank calls it) or zero_state_open (zeros, for a
 * checkpoint to fill) and zero_state_close or zero_state_take (the rank's shard taken
 * from it), zero_state(z, i) is tensor i of zero_state_count. */
int zero_state_count(const Zero *z);
bool zero_state_gather(Zero *z, Err *e);
bool zero_state_open(Zero *z, Err *e);
Tensor *zero_state(Zero *z, int i, const char **name);
void zero_state_take(Zero *z);
void zero_state_close(Zero *z);

#endif
