/* collective.h — the collectives of data-parallel training: all-reduce, reduce-scatter,
 * all-gather, broadcast and barrier among the ranks of a World (runtime/world.h), each
 * started asynchronously and finished with comm_wait, so the caller can go on computing
 * while the bytes move. The training loop calls these without knowing which engine is
 * below (NCCL for GPUs is the next behind the same calls):
 *   tcp  a ring over TCP between the hosts' processes (runtime/comm_tcp.c), met at
 *        MASTER_ADDR:MASTER_PORT; any launcher.
 *   mpi  Open MPI's nonblocking collectives (runtime/comm_mpi.c), for ranks started by
 *        Open MPI's mpirun (MASTER_ADDR/PORT unused).
 * COIL_COMM=tcp|mpi chooses; unset (or auto), MPI is taken when the world is mpirun's
 * (world_from_env read OMPI_COMM_WORLD_*, no torchrun variables being set) and Open MPI's
 * library loads, else TCP. COIL_COMM=mpi in a process mpirun did not start is an error.
 *
 * The MPI engine opens libmpi.so.40 (Debian's libopenmpi3; $COIL_LIBMPI names another
 * file) with dlopen at comm_open, so coil neither builds against MPI nor needs it to run;
 * a missing library is named in one line. It speaks Open MPI's ABI (3.0 or newer): a
 * handle such as MPI_COMM_WORLD is the address of an object libmpi exports. MPICH and its
 * kin (Intel MPI, MVAPICH) define handles as integers and export none of those objects: a
 * library of theirs is refused at comm_open, naming the missing object; use COIL_COMM=tcp
 * there. MPI is initialised by comm_open (MPI_Init_thread, MPI_THREAD_SERIALIZED at least:
 * the collectives run on the Comm's thread; a lower level is an error) unless the program
 * already did, and finalized by comm_free (once a process: MPI cannot start again).
 *
 * Every rank must start the same collectives in the same order (as with MPI and NCCL);
 * they run one at a time, in that order. Nothing waits forever: a rank that exits, is
 * killed or stops answering for `timeout_s` fails the collective on every other rank with
 * an error naming it and the collective. Over TCP the error returns from comm_wait and the
 * timeout restarts whenever bytes arrive. Under MPI the timeout bounds each MPI call of a
 * collective (MPI does not show partial progress), MPI_Init included; the rank that times
 * out asks the others where they are (each Comm's thread answers, even between
 * collectives), prints the error naming the lost rank (one that did not answer, or is not
 * in the collective) and ends the whole job with MPI_Abort, so comm_wait never returns
 * the failure; a killed rank is mpirun's to notice: it ends the job itself. comm_free
 * waits (up to the timeout) for every rank to close too, else it ends the job. */
#ifndef COIL_RUNTIME_COLLECTIVE_H
#define COIL_RUNTIME_COLLECTIVE_H

#include "runtime/world.h"

typedef struct Comm Comm;
typedef struct CommOp CommOp; /* a started collective */

/* Joins the world: over TCP rank 0 waits at MASTER_ADDR:MASTER_PORT for the others (each
 * tries for timeout_s), then the ranks connect in a ring; under MPI, MPI starts. A world
 * of one needs no engine. */
Comm *comm_open(const World *w, double timeout_s, Err *e);
void comm_free(Comm *c);
int comm_rank(const Comm *c);
int comm_size(const Comm *c);
/* "tcp", "mpi", or "none" (a world of one). */
const char *comm_engine(const Comm *c);

/* Elements [comm_chunk_start(n, size, i), comm_chunk_start(n, size, i + 1)) of an array
 * of n are chunk i of `size`: what reduce-scatter leaves on rank i, and all-gather takes
 * from it. */
int64_t comm_chunk_start(int64_t n, int size, int i);

/* What the reduced arrays hold: f32, or bf16 (uint16_t bits; each hop's sum rounded to
 * bf16: half the bytes moved, about 3 significant digits kept, as PyTorch's bf16
 * gradient compression). Under MPI each of MPI's additions is rounded to bf16 (a
 * user-defined MPI_Op); MPI chooses the order of the additions: for 2 ranks the ring's
 * result bit for bit, for more the same on every rank but not always the ring's bits
 * (f32 alike). */
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
