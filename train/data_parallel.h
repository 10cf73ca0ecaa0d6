/* data_parallel.h — data-parallel training's part of a step, as PyTorch's DDP does it:
 * the parameters broadcast from rank 0 at the start; each step's gradients summed over
 * the ranks in buckets (the first 1 MiB, then `bucket_mb` each), the last parameters'
 * first, as the backward produces them, each bucket's all-reduce started as soon as it is
 * packed so the communication thread works while the next is packed; the loss averaged.
 * The collectives are runtime/collective.h's. */
#ifndef COIL_TRAIN_DATA_PARALLEL_H
#define COIL_TRAIN_DATA_PARALLEL_H

#include "ir/ir.h"
#include "runtime/collective.h"

typedef struct DataParallel DataParallel;

/* Joins w's world (runtime/collective.h's comm_open); the gradients are reduced in dtype
 * (COMM_BF16: half the bytes, each sum rounded to bf16). NULL with e set. */
DataParallel *dp_open(const World *w, double timeout_s, double bucket_mb, CommDtype dtype, Err *e);
void dp_free(DataParallel *dp);

/* Rank 0's values of every tensor, on every rank (the same shapes everywhere). */
bool dp_broadcast(DataParallel *dp, Tensor *t, int n, Err *e);
/* grads[0..n) (f32) summed over the ranks, in place, through the buckets. */
bool dp_sum_grads(DataParallel *dp, Tensor *grads, int n, Err *e);
/* *x averaged over the ranks. */
bool dp_mean(DataParallel *dp, double *x, Err *e);

/* Seconds the collectives took, and of them the part the training loop waited for. */
double dp_comm_seconds(const DataParallel *dp);
double dp_waited_seconds(const DataParallel *dp);

#endif
