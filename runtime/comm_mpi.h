/* comm_mpi.h — internal to the collectives (collective.c): the engine that runs them on
 * Open MPI's library, opened with dlopen, and what collective.c hands any engine. */
#ifndef COIL_RUNTIME_COMM_MPI_H
#define COIL_RUNTIME_COMM_MPI_H

#include "runtime/collective.h"

/* The collectives, as errors name them (comm_kind_name, in collective.c). */
typedef enum CommKind {
    COMM_ALL_REDUCE, COMM_REDUCE_SCATTER, COMM_ALL_GATHER, COMM_BROADCAST, COMM_BARRIER
} CommKind;
extern const char *const comm_kind_name[];

/* One collective's operands (collective.h says what each kind does with them). */
typedef struct CommWork {
    CommKind kind;
    void *data;      /* n elements of dtype; broadcast's `bytes` bytes */
    int64_t n;
    CommDtype dtype;
    size_t bytes;
    int root;
} CommWork;

typedef struct Mpi Mpi;

/* Whether Open MPI's libmpi.so.40 (or $COIL_LIBMPI) opens and has what coil calls; false
 * with e saying which file or name is missing, in one line. Opened once per process. */
bool mpi_loads(Err *e);
/* MPI started (MPI_Init_thread, at MPI_THREAD_SERIALIZED at least) on the calling thread,
 * its world checked against w's; a watchdog ends the process if that takes more than
 * timeout_s (MPI_Init waits for every rank). NULL with e set. */
Mpi *mpi_open(const World *w, double timeout_s, Err *e);
/* One collective, on the Comm's thread; false with e naming it (and the ranks not in it)
 * when MPI fails or it takes more than the timeout. */
bool mpi_run(Mpi *m, const CommWork *w, Err *e);
/* Between collectives, on the Comm's thread: answers another rank asking where this one
 * is (how a rank that timed out names the lost one). */
void mpi_idle(Mpi *m);
/* Prints why on stderr and ends the whole job (MPI_Abort: mpirun stops every rank). */
_Noreturn void mpi_abort(Mpi *m, const Err *why);
/* After the Comm's thread has ended: waits (up to the timeout) for every rank to close too,
 * then MPI_Finalize; a rank left working ends the job instead (mpi_abort). */
void mpi_close(Mpi *m);

#endif
