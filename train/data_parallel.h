/* data_parallel.h — data-parallel training's part of a step, as PyTorch's DDP does it:
 * the parameters broadcast from rank 0 at the start; each step's gradients summed over
 * the ranks in buckets (the first 1 MiB, then `bucket_mb` each), the last parameters'
 * first, as the backward produces them, each bucket's all-reduce started as soon as it is
 * packed so the communication thread works while the next is packed; the loss averaged.
 * For ZeRO (train/zero.h) the same buckets are reduce-scattered instead, each rank
 * keeping the sum of its chunk of each bucket (its shard), and all-gathered back.
 * The collectives are runtime/collective.h's. */
#ifndef COIL_TRAIN_DATA_PARALLEL_H
#define COIL_TRAIN_DATA_PARALLEL_H

#include "ir/ir.h"
#include "runtime/collective.h"

typedef struct DataParallel DataParallel;

/* Joins w's world (runtime/collective.h's comm_open); the gradients are reduced in dtype
 * (COMM_BF16: half the bytes, each sum rounded to bf16); sharded: ZeRO's gathers will
 * be used too. NULL with e set. */
DataParallel *dp_open(const World *w, double timeout_s, double bucket_mb, CommDtype dtype,
                      bool sharded, Err *e);
void dp_free(DataParallel *dp);

/* Rank 0's values of every tensor, on every rank (the same shapes everywhere). */
bool dp_broadcast(DataParallel *dp, Tensor *t, int n, Err *e);
/* Per gradient, the step of the compiled program after which it is final (its buffer's
 * last use): the buckets follow that order. Before the first reduction; without it they
 * go from the last parameter back. */
bool dp_set_order(DataParallel *dp, const int *final_step, int n, Err *e);
/* Arms the sum of grads[0..n) (all of it, or own: this rank's shard) for the next run:
 * dp_step_done, the engine's step hook (ctx: the DataParallel), starts each bucket once
 * the step finishing its gradients is done, and the dp_sum_grads or dp_sum_own_grads
 * call for the same grads after the run starts the rest and waits. The run must not
 * write a gradient after its final step, nor anything else touch them until then. */
bool dp_arm_sum(DataParallel *dp, Tensor *grads, int n, bool own, Err *e);
void dp_step_done(void *ctx, int step);
/* grads[0..n) (f32) summed over the ranks, in place, through the buckets. */
bool dp_sum_grads(DataParallel *dp, Tensor *grads, int n, Err *e);
/* *x averaged, or summed, over the ranks (in f32). */
bool dp_mean(DataParallel *dp, double *x, Err *e);
bool dp_sum_scalar(DataParallel *dp, double *x, Err *e);
bool dp_barrier(DataParallel *dp, Err *e);
/* The collectives' engine: "tcp", "mpi" (runtime/collective.h's comm_engine). */
const char *dp_engine(const DataParallel *dp);
int dp_rank(const DataParallel *dp);
int dp_size(const DataParallel *dp);

/* ZeRO's sharding. The buckets, planned for tensors shaped like like[0..n) (f32: the
 * parameters) unless they are already; each rank owns its chunk of every bucket. */
bool dp_plan(DataParallel *dp, const Tensor *like, int n, Err *e);
/* Elements [lo, hi) of tensor `tensor` (flattened): a piece of a rank's shard. */
typedef struct DpSlice {
    int tensor;
    int64_t lo, hi;
} DpSlice;
/* This rank's shard as slices, written to out (NULL: only counted); returns the count.
 * The buckets must be planned. */
int dp_shard(const DataParallel *dp, const Tensor *like, DpSlice *out);
/* grads summed over the ranks where this rank's shard is (the rest left undefined). */
bool dp_sum_own_grads(DataParallel *dp, Tensor *grads, int n, Err *e);
/* Every rank's shard of t[0..n) (shaped like the planned tensors, f32) on every rank. */
bool dp_gather(DataParallel *dp, Tensor *t, int n, Err *e);

/* Seconds the collectives took, and of them the part the training loop waited for. */
double dp_comm_seconds(const DataParallel *dp);
double dp_waited_seconds(const DataParallel *dp);

#endif
