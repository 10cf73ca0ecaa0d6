/* collective.c — the collectives (runtime/collective.h), run in order by one thread per
 * Comm, so a started collective moves its bytes while the caller computes: on Open MPI
 * (comm_mpi.c) under mpirun, else as ring algorithms over the ring's TCP links
 * (comm_ring.h). The ring's all-reduce is reduce-scatter then all-gather: each rank sends
 * and receives 2(n-1)/n of the data, whatever the world size. Every rank adds the chunks
 * in the same order, so all end with the same bits. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"
#include "runtime/collective.h"
#include "runtime/comm_mpi.h"
#include "runtime/comm_ring.h"

const char *const comm_kind_name[] = {"all-reduce", "reduce-scatter", "all-gather",
                                      "broadcast", "barrier"};

/* Which engine moves the bytes (none: a world of one). */
typedef enum Engine { ENGINE_NONE, ENGINE_TCP, ENGINE_MPI } Engine;
static const char *const engine_names[] = {"none", "tcp", "mpi"};

/* An element type of the reduced arrays: its bytes, and in += out summed elementwise. */
typedef struct Elem {
    size_t size;
    void (*add)(void *x, const void *in, int64_t n);
} Elem;

static void add_f32(void *x, const void *in, int64_t n)
{
    float *a = x;
    const float *b = in;
    for (int64_t i = 0; i < n; i++)
        a[i] += b[i];
}

static void add_bf16(void *x, const void *in, int64_t n)
{
    uint16_t *a = x;
    const uint16_t *b = in;
    for (int64_t i = 0; i < n; i++)
        a[i] = bf16_pack(bf16_unpack(a[i]) + bf16_unpack(b[i]));
}

static const Elem elems[] = {[COMM_F32] = {4, add_f32}, [COMM_BF16] = {2, add_bf16}};

struct CommOp {
    Comm *c;
    CommWork w;
    bool done, ok;
    Err err;
    CommOp *next;
};

struct Comm {
    World w;
    Engine engine;
    Ring *ring;              /* ENGINE_TCP's */
    Mpi *mpi;                /* ENGINE_MPI's */
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    CommOp *head, *tail;     /* started, not yet run */
    bool broken;             /* a collective failed: the ranks are out of step */
    Err why;
    double busy_s, waited_s;
};

int64_t comm_chunk_start(int64_t n, int size, int i)
{
    int64_t per = n / size, extra = n % size; /* the first `extra` chunks one longer */
    return (int64_t)i * per + (i < extra ? i : extra);
}

static int64_t chunk_len(int64_t n, int size, int i)
{
    return comm_chunk_start(n, size, i + 1) - comm_chunk_start(n, size, i);
}

static int mod(int a, int m) { return ((a % m) + m) % m; }

/* Chunk i of x (n elements of el): its address and bytes. */
static char *chunk(char *x, int64_t n, int p, int i, const Elem *el, size_t *bytes)
{
    *bytes = (size_t)chunk_len(n, p, i) * el->size;
    return x + (size_t)comm_chunk_start(n, p, i) * el->size;
}

/* Step s of reduce-scatter: chunk rank-s-1 to the right, chunk rank-s-2 from the left
 * added in; after size-1 steps chunk `rank` holds the sum. */
static bool reduce_scatter(Comm *c, char *x, int64_t n, const Elem *el, const char *what, Err *e)
{
    int p = c->w.size, r = c->w.rank;
    char *in = malloc(((size_t)(n / p) + 1) * el->size);
    bool ok = in != NULL;
    if (!ok)
        err_set(e, ERR_MEMORY, "data-parallel: out of memory in %s", what);
    for (int s = 0; ok && s < p - 1; s++) {
        size_t sb, rb;
        char *out = chunk(x, n, p, mod(r - s - 1, p), el, &sb);
        char *got = chunk(x, n, p, mod(r - s - 2, p), el, &rb);
        ok = ring_exchange(c->ring, out, sb, in, rb, what, e);
        if (ok)
            el->add(got, in, (int64_t)(rb / el->size));
    }
    free(in);
    return ok;
}

/* Step s of all-gather: chunk rank-s to the right, chunk rank-s-1 from the left. */
static bool all_gather(Comm *c, char *x, int64_t n, const Elem *el, const char *what, Err *e)
{
    int p = c->w.size, r = c->w.rank;
    bool ok = true;
    for (int s = 0; ok && s < p - 1; s++) {
        size_t sb, rb;
        char *out = chunk(x, n, p, mod(r - s, p), el, &sb);
        char *got = chunk(x, n, p, mod(r - s - 1, p), el, &rb);
        ok = ring_exchange(c->ring, out, sb, got, rb, what, e);
    }
    return ok;
}

/* Around the ring from root in pieces, each rank passing on what it got (but to root). */
static bool broadcast(Comm *c, char *b, size_t n, int root, Err *e)
{
    enum { PIECE = 1 << 20 };
    int p = c->w.size, r = c->w.rank;
    bool ok = true, forward = mod(r + 1, p) != root;
    for (size_t at = 0; ok && at < n; at += PIECE) {
        size_t len = n - at < PIECE ? n - at : PIECE;
        if (r != root)
            ok = ring_exchange(c->ring, NULL, 0, b + at, len, "broadcast", e);
        if (ok && (r == root || forward))
            ok = ring_exchange(c->ring, b + at, len, NULL, 0, "broadcast", e);
    }
    return ok;
}

static bool run_on_ring(Comm *c, const CommWork *w, Err *e)
{
    const char *what = comm_kind_name[w->kind];
    float token[WORLD_MAX] = {0}; /* a barrier: one float a rank, so every link carries one */
    const Elem *el = &elems[w->dtype];
    switch (w->kind) {
    case COMM_ALL_REDUCE:
        return reduce_scatter(c, w->data, w->n, el, what, e) &&
               all_gather(c, w->data, w->n, el, what, e);
    case COMM_REDUCE_SCATTER:
        return reduce_scatter(c, w->data, w->n, el, what, e);
    case COMM_ALL_GATHER:
        return all_gather(c, w->data, w->n, el, what, e);
    case COMM_BROADCAST:
        return broadcast(c, w->data, w->bytes, w->root, e);
    case COMM_BARRIER:
        el = &elems[COMM_F32];
        return reduce_scatter(c, (char *)token, c->w.size, el, what, e) &&
               all_gather(c, (char *)token, c->w.size, el, what, e);
    }
    return false;
}

static bool run_op(Comm *c, CommOp *op, Err *e)
{
    return c->mpi ? mpi_run(c->mpi, &op->w, e) : run_on_ring(c, &op->w, e);
}

/* Waits (the lock held) for a collective to be started. MPI's engine wakes every 10 ms to
 * answer the other ranks' questions (how a rank that timed out finds the lost one). */
static void wait_for_work(Comm *c)
{
    if (!c->mpi) {
        pthread_cond_wait(&c->changed, &c->mu);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10 * 1000 * 1000;
    until.tv_sec += until.tv_nsec / 1000000000, until.tv_nsec %= 1000000000;
    if (pthread_cond_timedwait(&c->changed, &c->mu, &until) == ETIMEDOUT) {
        pthread_mutex_unlock(&c->mu);
        mpi_idle(c->mpi);
        pthread_mutex_lock(&c->mu);
    }
}

/* The thread: each started collective in turn; after a failure every later one fails
 * with the same error (the ranks no longer agree on what comes next). Under MPI a failure
 * ends the job there and then: the other ranks would wait in MPI for this one. */
static void *worker(void *arg)
{
    Comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop)
            wait_for_work(c);
        if (!c->head)
            break;
        CommOp *op = c->head;
        c->head = op->next;
        if (!c->head)
            c->tail = NULL;
        bool broken = c->broken;
        pthread_mutex_unlock(&c->mu);
        double t0 = clock_seconds();
        Err e = broken ? c->why : (Err){0};
        bool ok = !broken && run_op(c, op, &e);
        if (!ok && c->mpi)
            mpi_abort(c->mpi, &e);
        pthread_mutex_lock(&c->mu);
        c->busy_s += clock_seconds() - t0;
        if (!ok && !c->broken)
            c->broken = true, c->why = e;
        op->ok = ok, op->err = e, op->done = true;
        pthread_cond_broadcast(&c->changed);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* COIL_COMM: tcp, mpi, or auto (unset): MPI when the world is mpirun's (its variables,
 * not torchrun's, gave it) and Open MPI's library loads, else TCP. */
static bool choose_engine(const World *w, Engine *engine, Err *e)
{
    static const char *const choices[] = {"auto", "tcp", "mpi"};
    const char *s = getenv("COIL_COMM");
    int choice = s && *s ? name_index(choices, 3, s) : 0;
    bool by_mpirun = w->launcher && strcmp(w->launcher, "mpirun") == 0;
    bool mpi_job = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"); /* MPI can start */
    Err quiet = {0};
    if (choice < 0) {
        err_set(e, ERR_USAGE, "COIL_COMM=%s: expected tcp, mpi or auto", s);
        return false;
    }
    *engine = w->size == 1 ? ENGINE_NONE
              : choice == 0 ? (by_mpirun && mpi_loads(&quiet) ? ENGINE_MPI : ENGINE_TCP)
                            : choice == 1 ? ENGINE_TCP : ENGINE_MPI;
    if (*engine == ENGINE_MPI && !mpi_job) {
        err_set(e, ERR_USAGE, "COIL_COMM=mpi: this process was not started by Open MPI's mpirun "
                "(OMPI_COMM_WORLD_SIZE is unset): start the ranks with mpirun, or set "
                "COIL_COMM=tcp");
        return false;
    }
    return true;
}

Comm *comm_open(const World *w, double timeout_s, Err *e)
{
    Comm *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(e, ERR_MEMORY, "data-parallel: out of memory");
        return NULL;
    }
    c->w = *w;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->changed, NULL);
    bool ok = choose_engine(w, &c->engine, e);
    if (ok && c->engine == ENGINE_TCP)
        ok = (c->ring = ring_connect(w, timeout_s, e)) != NULL;
    else if (ok && c->engine == ENGINE_MPI)
        ok = (c->mpi = mpi_open(w, timeout_s, e)) != NULL;
    if (ok && w->size > 1) {
        ok = pthread_create(&c->thread, NULL, worker, c) == 0;
        c->started = ok;
        if (!ok)
            err_set(e, ERR_INPUT, "data-parallel: cannot start the communication thread");
    }
    if (ok)
        return c;
    comm_free(c);
    return NULL;
}

void comm_free(Comm *c)
{
    if (!c)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_broadcast(&c->changed);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    for (CommOp *op = c->head, *next; op; op = next) /* started, never waited for */
        next = op->next, free(op);
    ring_free(c->ring);
    mpi_close(c->mpi); /* after the thread: MPI is called from one thread at a time */
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int comm_rank(const Comm *c) { return c->w.rank; }
int comm_size(const Comm *c) { return c->w.size; }
const char *comm_engine(const Comm *c) { return engine_names[c->engine]; }

/* The op queued for the thread (a world of one has nothing to move: done at once). */
static CommOp *start(Comm *c, CommOp op, Err *e)
{
    CommOp *o = malloc(sizeof *o);
    if (!o) {
        err_set(e, ERR_MEMORY, "data-parallel: out of memory starting a %s",
                comm_kind_name[op.w.kind]);
        return NULL;
    }
    *o = op;
    o->c = c, o->next = NULL, o->err = (Err){0};
    o->done = c->w.size == 1, o->ok = o->done;
    if (o->done)
        return o;
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = o;
    else
        c->head = o;
    c->tail = o;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->mu);
    return o;
}

CommOp *comm_all_reduce_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e)
{
    return start(c, (CommOp){.w = {.kind = COMM_ALL_REDUCE, .data = data, .n = n, .dtype = t}}, e);
}

CommOp *comm_reduce_scatter_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e)
{
    return start(c, (CommOp){.w = {.kind = COMM_REDUCE_SCATTER, .data = data, .n = n,
                                    .dtype = t}}, e);
}

CommOp *comm_all_gather_start(Comm *c, void *data, int64_t n, CommDtype t, Err *e)
{
    return start(c, (CommOp){.w = {.kind = COMM_ALL_GATHER, .data = data, .n = n, .dtype = t}}, e);
}

CommOp *comm_broadcast_start(Comm *c, void *data, size_t bytes, int root, Err *e)
{
    if (root < 0 || root >= c->w.size) {
        err_set(e, ERR_INPUT, "data-parallel: broadcast from rank %d of %d", root, c->w.size);
        return NULL;
    }
    return start(c, (CommOp){.w = {.kind = COMM_BROADCAST, .data = data, .bytes = bytes,
                                    .root = root}}, e);
}

CommOp *comm_barrier_start(Comm *c, Err *e)
{
    return start(c, (CommOp){.w = {.kind = COMM_BARRIER}}, e);
}

bool comm_wait(CommOp *op, Err *e)
{
    if (!op)
        return false;
    Comm *c = op->c;
    if (!op->done) {
        double t0 = clock_seconds();
        pthread_mutex_lock(&c->mu);
        while (!op->done)
            pthread_cond_wait(&c->changed, &c->mu);
        c->waited_s += clock_seconds() - t0;
        pthread_mutex_unlock(&c->mu);
    }
    bool ok = op->ok;
    if (!ok && err_ok(e))
        *e = op->err;
    free(op);
    return ok;
}

bool comm_all_reduce(Comm *c, float *data, int64_t n, Err *e)
{
    return comm_wait(comm_all_reduce_start(c, data, n, COMM_F32, e), e);
}

bool comm_broadcast(Comm *c, void *data, size_t bytes, int root, Err *e)
{
    return comm_wait(comm_broadcast_start(c, data, bytes, root, e), e);
}

bool comm_barrier(Comm *c, Err *e) { return comm_wait(comm_barrier_start(c, e), e); }

/* Read under the lock: the thread adds to them. */
static double locked(const Comm *c, const double *v)
{
    pthread_mutex_t *mu = (pthread_mutex_t *)&c->mu;
    pthread_mutex_lock(mu);
    double x = *v;
    pthread_mutex_unlock(mu);
    return x;
}

double comm_busy_seconds(const Comm *c) { return locked(c, &c->busy_s); }
double comm_waited_seconds(const Comm *c) { return locked(c, &c->waited_s); }
