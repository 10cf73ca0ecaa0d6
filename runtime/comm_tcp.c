/* comm_tcp.c — the ring's links over TCP (runtime/comm_ring.h). Rank 0 listens at the
 * master address; every other rank tells it where its own listening socket is, rank 0
 * sends back the table, and each rank connects to its right neighbour and accepts its
 * left one. Sockets are non-blocking and every wait is a poll with the timeout, so a lost
 * rank is an error, never a hang. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/comm_ring.h"

#define RING_MAGIC 0x636f696cu /* "coil": a stray connection is refused */

struct Ring {
    int left, right;       /* sockets: from rank - 1, to rank + 1 */
    int rank, size;
    double timeout_s;
};

/* What a rank tells rank 0, and then its neighbour. */
typedef struct Hello {
    uint32_t magic, size, rank, port;
} Hello;

/* Where each rank's ring socket listens (rank 0's address: the master's). */
typedef struct Peer {
    uint32_t addr, port; /* network order */
} Peer;

static bool sys_fail(const char *what, Err *e)
{
    err_set(e, ERR_INPUT, "data-parallel: %s: %s", what, strerror(errno));
    return false;
}

static int ms_left(double deadline)
{
    double left = deadline - clock_seconds();
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

/* A TCP socket listening on port (0: any) of every address; *bound its port. */
static int listen_on(int port, int *bound, Err *e)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t n = sizeof a;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, WORLD_MAX) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0) {
        char what[64];
        snprintf(what, sizeof what, "cannot listen on port %d", port);
        sys_fail(what, e);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

/* Non-blocking, no Nagle delay, and buffers of 4 MiB: a step's gradients are many MiB,
 * and each wake-up should move a lot of them. */
static void tune_socket(int fd)
{
    int one = 1, bytes = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A connection accepted on fd before the deadline, non-blocking; -1 with e set. */
static int accept_by(int fd, double deadline, const char *whom, Err *e)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int got = poll(&p, 1, ms_left(deadline));
    int c = got > 0 ? accept4(fd, NULL, NULL, SOCK_CLOEXEC) : -1;
    if (c < 0) {
        err_set(e, ERR_INPUT, "data-parallel: %s never connected (waited the timeout)", whom);
        return -1;
    }
    tune_socket(c);
    return c;
}

/* A connection to addr:port, retried until the deadline (the other side may not be
 * listening yet), non-blocking; -1 with e set. */
static int connect_by(uint32_t addr, uint32_t port, double deadline, const char *whom, Err *e)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = (in_port_t)port,
                            .sin_addr.s_addr = addr};
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            tune_socket(fd);
            return fd;
        }
        if (fd >= 0)
            close(fd);
        if (clock_seconds() > deadline) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
            err_set(e, ERR_INPUT, "data-parallel: cannot reach %s at %s:%d (waited the timeout): "
                    "%s", whom, ip, ntohs((uint16_t)port), strerror(errno));
            return -1;
        }
        usleep(50 * 1000);
    }
}

/* All n bytes written to or read from fd (non-blocking) before the deadline. */
static bool move_all(int fd, void *buf, size_t n, bool out, double deadline, const char *whom,
                     Err *e)
{
    for (size_t done = 0; done < n;) {
        struct pollfd p = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        if (poll(&p, 1, ms_left(deadline)) <= 0) {
            err_set(e, ERR_INPUT, "data-parallel: no word from %s (waited the timeout)", whom);
            return false;
        }
        ssize_t k = out ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + done, n - done, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
            err_set(e, ERR_INPUT, "data-parallel: %s closed the connection while starting", whom);
            return false;
        }
        done += k > 0 ? (size_t)k : 0;
    }
    return true;
}

static bool resolve(const char *host, uint32_t *addr, Err *e)
{
    struct addrinfo hint = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hint, &res);
    if (rc != 0 || !res) {
        err_set(e, ERR_USAGE, "MASTER_ADDR=%s: cannot resolve it: %s", host, gai_strerror(rc));
        return false;
    }
    *addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return true;
}

/* Rank 0: every other rank's hello and address, then the table to each. */
static bool meet_as_root(const World *w, int master, Peer *peers, double deadline, Err *e)
{
    int *fd = malloc((size_t)w->size * sizeof *fd);
    bool ok = fd != NULL;
    for (int i = 0; ok && i < w->size; i++)
        fd[i] = -1;
    for (int i = 1; ok && i < w->size; i++) {
        Hello h;
        struct sockaddr_in a;
        socklen_t n = sizeof a;
        char whom[64];
        snprintf(whom, sizeof whom, "rank %d of %d", i, w->size);
        int c = accept_by(master, deadline, whom, e);
        ok = c >= 0 && getpeername(c, (struct sockaddr *)&a, &n) == 0 &&
             move_all(c, &h, sizeof h, false, deadline, "a rank", e);
        if (ok && (h.magic != RING_MAGIC || h.size != (uint32_t)w->size || h.rank == 0 ||
                   h.rank >= (uint32_t)w->size || fd[h.rank] >= 0)) {
            err_set(e, ERR_INPUT, "data-parallel: a process that is not rank 1 to %d of this "
                    "world of %d connected to rank 0 (another job on MASTER_PORT?)", w->size - 1,
                    w->size);
            ok = false;
        }
        if (ok)
            fd[h.rank] = c, peers[h.rank] = (Peer){a.sin_addr.s_addr, h.port};
        else if (c >= 0)
            close(c);
    }
    for (int i = 1; ok && i < w->size; i++)
        ok = move_all(fd[i], peers, sizeof *peers * (size_t)w->size, true, deadline, "a rank", e);
    for (int i = 1; fd && i < w->size; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    free(fd);
    return ok;
}

/* Any other rank: its hello to rank 0, the table back. */
static bool meet_root(const World *w, int port, Peer *peers, double deadline, Err *e)
{
    int c = connect_by(peers[0].addr, peers[0].port, deadline, "rank 0", e);
    Hello h = {RING_MAGIC, (uint32_t)w->size, (uint32_t)w->rank, htons((uint16_t)port)};
    uint32_t root_addr = peers[0].addr;
    bool ok = c >= 0 && move_all(c, &h, sizeof h, true, deadline, "rank 0", e) &&
              move_all(c, peers, sizeof *peers * (size_t)w->size, false, deadline, "rank 0", e);
    if (c >= 0)
        close(c);
    peers[0].addr = root_addr; /* rank 0 as this rank reaches it */
    return ok;
}

/* Connect to the right neighbour, accept the left one, each saying who it is. */
static bool link_neighbours(Ring *r, const Peer *peers, int listener, double deadline, Err *e)
{
    int right = (r->rank + 1) % r->size, left = (r->rank + r->size - 1) % r->size;
    char rname[32], lname[32];
    snprintf(rname, sizeof rname, "rank %d", right);
    snprintf(lname, sizeof lname, "rank %d", left);
    Hello me = {RING_MAGIC, (uint32_t)r->size, (uint32_t)r->rank, 0}, them;
    r->right = connect_by(peers[right].addr, peers[right].port, deadline, rname, e);
    bool ok = r->right >= 0 && move_all(r->right, &me, sizeof me, true, deadline, rname, e);
    r->left = ok ? accept_by(listener, deadline, lname, e) : -1;
    ok = ok && r->left >= 0 && move_all(r->left, &them, sizeof them, false, deadline, lname, e);
    if (ok && (them.magic != RING_MAGIC || them.rank != (uint32_t)left)) {
        err_set(e, ERR_INPUT, "data-parallel: rank %d expected its left neighbour, rank %d, "
                "and met another process", r->rank, left);
        ok = false;
    }
    return ok;
}

Ring *ring_connect(const World *w, double timeout_s, Err *e)
{
    Ring *r = calloc(1, sizeof *r);
    Peer *peers = calloc((size_t)w->size, sizeof *peers);
    double deadline = clock_seconds() + timeout_s;
    int port = 0, mport = 0, listener = -1, master = -1;
    bool ok = r && peers;
    if (r)
        *r = (Ring){.left = -1, .right = -1, .rank = w->rank, .size = w->size,
                    .timeout_s = timeout_s};
    ok = ok && (listener = listen_on(0, &port, e)) >= 0 && resolve(w->master_addr, &peers[0].addr, e);
    if (ok && w->rank == 0) {
        peers[0].port = htons((uint16_t)port); /* its ring socket, in the table it sends */
        ok = (master = listen_on(w->master_port, &mport, e)) >= 0 &&
             meet_as_root(w, master, peers, deadline, e);
    } else if (ok) {
        peers[0].port = htons((uint16_t)w->master_port); /* to meet it; the table says more */
        ok = meet_root(w, port, peers, deadline, e);
    }
    ok = ok && link_neighbours(r, peers, listener, deadline, e);
    if (listener >= 0)
        close(listener);
    if (master >= 0)
        close(master);
    free(peers);
    if (ok)
        return r;
    if (!r && err_ok(e))
        err_set(e, ERR_MEMORY, "data-parallel: out of memory");
    ring_free(r);
    return NULL;
}

/* A failed exchange, naming the neighbour and what it was doing. */
static bool lost(const Ring *ring, bool from_left, bool closed, const char *what, Err *e)
{
    int who = from_left ? (ring->rank + ring->size - 1) % ring->size : (ring->rank + 1) % ring->size;
    if (closed)
        err_set(e, ERR_INPUT, "data-parallel: rank %d lost rank %d during %s: it closed the "
                "connection (exited or was killed)", ring->rank, who, what);
    else
        err_set(e, ERR_INPUT, "data-parallel: rank %d lost rank %d during %s: no word from it "
                "for %.0f s (stuck, or its host is unreachable)", ring->rank, who, what,
                ring->timeout_s);
    return false;
}

bool ring_exchange(Ring *ring, const void *s, size_t sbytes, void *r, size_t rbytes,
                   const char *what, Err *e)
{
    size_t sent = 0, got = 0;
    double deadline = clock_seconds() + ring->timeout_s;
    while (sent < sbytes || got < rbytes) {
        struct pollfd p[2] = {{.fd = sent < sbytes ? ring->right : -1, .events = POLLOUT},
                              {.fd = got < rbytes ? ring->left : -1, .events = POLLIN}};
        if (poll(p, 2, ms_left(deadline)) <= 0)
            return lost(ring, got < rbytes, false, what, e);
        if (p[0].revents) {
            ssize_t k = send(ring->right, (const char *)s + sent, sbytes - sent, MSG_NOSIGNAL);
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return lost(ring, false, true, what, e);
            sent += k > 0 ? (size_t)k : 0;
        }
        if (p[1].revents) {
            ssize_t k = recv(ring->left, (char *)r + got, rbytes - got, 0);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                return lost(ring, true, true, what, e);
            got += k > 0 ? (size_t)k : 0;
        }
        if (p[0].revents || p[1].revents)
            deadline = clock_seconds() + ring->timeout_s; /* progress: the clock restarts */
    }
    return true;
}

void ring_free(Ring *ring)
{
    if (!ring)
        return;
    if (ring->left >= 0)
        close(ring->left);
    if (ring->right >= 0)
        close(ring->right);
    free(ring);
}
