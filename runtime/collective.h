/* collective.h — the collectives of data-parallel training: all-reduce, reduce-scatter,
 * all-gather, broadcast and barrier among the ranks of a World (runtime/world.h), each
 * started asynchronously and finished with comm_wait, so the caller can go on computing
 * while the bytes move. The training loop calls these without knowing what is below:
 * today a ring over TCP between the hosts' processes (runtime/comm_tcp.c, for CPU ranks);
 * NCCL for GPUs is the next backend behind the same calls.
 *
 * Every rank must start the same collectives in the same order (as with MPI and NCCL);
 * they run one at a time, in that order. Nothing waits forever: a rank that exits, is
 * killed or stops answering for `timeout_s` fails the collective on every other rank with
 * an error naming it and the collective. */
#ifndef COIL_RUNTIME_COLLECTIVE_H
#define COIL_RUNTIME_COLLECTIVE_H

#include "runtime/world.h"

typedef struct Comm Comm;
typedef struct CommOp CommOp; /* a started collective */

/* Joins the world: rank 0 waits at MASTER_ADDR:MASTER_PORT for the others (each tries
 * for timeout_s), then the ranks connect in a ring. A world of one needs no network. */
Comm *comm_open(const World *w, double timeout_s, Err *e);
void comm_free(Comm *c);
int comm_rank(const Comm *c);
int comm_size(const Comm *c);

/* Elements [comm_chunk_start(n, size, i), comm_chunk_start(n, size, i + 1)) of an array
 * of n are chunk i of `size`: what reduce-scatter leaves on rank i, and all-gather takes
 * from it. */
int64_t comm_chunk_start(int64_t n, int size, int i);

/* What the reduced arrays hold: f32, or bf16 (uint16_t bits; each hop's sum rounded to
 * bf16: half the bytes moved, about 3 significant digits kept, as PyTorch's bf16
 * gradient compression). */
typedef enum CommDtype { COMM_F32, COMM_BF16 } CommDtype;

/* Started collectives (NULL with e set when one cannot start). data is the caller's, n
 * elements of t, and must stay untouched until comm_wait returns:
 *   all_reduce      data[0..n) summed over the ranks, on every rank
 *   reduce_scatter  chunk `rank` of data summed over the ranks (the rest undefined)
 *   all_gather      every rank's chunk `rank` of data, on every rank
 *   broadcast       root's bytes on every rank
 *   barrier         returns once every rank has started it */
CommOp *comm_all_reduce_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e);
CommOp *comm_reduce_scatter_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e);
CommOp *comm_all_gather_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e);
CommOp *comm_broadcast_start(Comm *c, void *data, size_t bytes, int root, Err *e);
CommOp *comm_barrier_start(Comm *c, Err *e);
/* Waits for op to finish and frees it; false with its error. */
bool comm_wait(CommOp *op, Err *e);

/* Started and waited for (f32). */
bool comm_all_reduce(Comm *c, float *data, int64_t n, Err *e);
bool comm_broadcast(Comm *c, void *data, size_t bytes, int root, Err *e);
bool comm_barrier(Comm *c, Err *e);

/* Seconds the collectives have taken so far (the thread's busy time), and the part of it
 * a caller spent waiting in comm_wait: the rest was hidden under its own work. */
double comm_busy_seconds(const Comm *c);
double comm_waited_seconds(const Comm *c);

#endif
