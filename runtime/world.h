/* world.h — which process of a data-parallel job this is: its rank among all of them and
 * among those on its host, and where rank 0 waits for the others. Read from the variables
 * the usual launchers set (torchrun and coil launch, Open MPI's mpirun, Slurm's srun), so a
 * job starts the way users already start PyTorch jobs. */
#ifndef COIL_RUNTIME_WORLD_H
#define COIL_RUNTIME_WORLD_H

#include "base/base.h"

#define WORLD_MAX 1024 /* ranks: a bound that catches a mistyped variable */

typedef struct World {
    int rank, size;             /* 0 <= rank < size; size 1: a process on its own */
    int local_rank, local_size; /* among the ranks on this host (its GPU: local_rank) */
    char master_addr[256];      /* where rank 0 listens for the TCP engine ("127.0.0.1"
                                   when unset; the MPI engine needs none) */
    int master_port;            /* 29500 when unset, as torchrun */
    const char *launcher;       /* "torchrun", "mpirun", "srun" or "none" */
} World;

/* The world the environment describes: torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT (coil launch sets the same), else Open
 * MPI's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, else Slurm's SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID (MASTER_ADDR and MASTER_PORT read in every case). None of
 * them: rank 0 of 1. A variable that is not a number in range is an error naming it. */
bool world_from_env(World *w, Err *e);
/* A TCP port nobody listens on now (the kernel's choice), for a rank 0 to take; 29500 if
 * none can be had. */
int world_free_port(void);

#endif
