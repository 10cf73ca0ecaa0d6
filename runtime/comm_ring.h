/* comm_ring.h — internal to the collectives (collective.c): the links to a rank's two
 * neighbours in a ring of the world's ranks, over TCP (comm_tcp.c). The ring algorithms
 * need only this: send to the right while receiving from the left. */
#ifndef COIL_RUNTIME_COMM_RING_H
#define COIL_RUNTIME_COMM_RING_H

#include "runtime/world.h"

typedef struct Ring Ring;

/* The ring of w's ranks, met through rank 0 at w->master_addr:w->master_port; each step
 * of the meeting gives up after timeout_s. NULL with e set. */
Ring *ring_connect(const World *w, double timeout_s, Err *e);
/* sbytes of s to the right neighbour while rbytes from the left one arrive into r (either
 * may be 0); `what` names the collective for errors: a neighbour that closed (exited,
 * killed) or sent nothing for the timeout is named. */
bool ring_exchange(Ring *ring, const void *s, size_t sbytes, void *r, size_t rbytes,
                   const char *what, Err *e);
void ring_free(Ring *ring);

#endif
