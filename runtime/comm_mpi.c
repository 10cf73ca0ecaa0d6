/* comm_mpi.c — the collectives on Open MPI (runtime/comm_mpi.h), for ranks mpirun started:
 * libmpi.so.40 opened with dlopen, its functions and handle objects resolved by name, so
 * coil builds without mpi.h and runs without libmpi. Each collective is MPI's nonblocking
 * one polled with MPI_Test against the timeout; a rank that times out asks the others, on
 * a communicator of its own that every rank's Comm thread answers, where they are, and
 * names the one missing. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir/ir.h"
#include "runtime/comm_mpi.h"

/* Open MPI's handles are pointers to its objects; a predefined one (MPI_COMM_WORLD,
 * MPI_FLOAT, MPI_SUM) is the address of an object libmpi exports (ompi_mpi_comm_world). */
typedef void *MpiComm, *MpiType, *MpiOp, *MpiRequest, *MpiErrhandler;
typedef void MpiUserFunction(void *in, void *inout, int *len, MpiType *type);

enum {
    MPI_OK = 0,               /* MPI_SUCCESS */
    THREAD_SERIALIZED = 2,    /* MPI_THREAD_SERIALIZED: any thread, one at a time */
    ANY_SOURCE = -1,          /* MPI_ANY_SOURCE */
    TAG_ASK = 1, TAG_TELL = 2 /* where-are-you questions and their answers */
};
#define IN_PLACE ((void *)1)  /* Open MPI's MPI_IN_PLACE */
#define MAX_COUNT (1 << 30)   /* elements (or bytes) of one call: MPI's counts are int */
#define SPIN_POLLS 2000       /* MPI_Tests before the poll loop starts to sleep */
#define NAP_NS 20000          /* between polls after that */
#define ASK_S 2.0             /* how long a rank that timed out waits for the answers */

#define MPI_CALLS(X)                                                                        \
    X(MPI_Initialized, (int *)) X(MPI_Finalized, (int *))                                   \
    X(MPI_Init_thread, (int *, char ***, int, int *)) X(MPI_Query_thread, (int *))          \
    X(MPI_Finalize, (void)) X(MPI_Abort, (MpiComm, int))                                    \
    X(MPI_Comm_rank, (MpiComm, int *)) X(MPI_Comm_size, (MpiComm, int *))                   \
    X(MPI_Comm_dup, (MpiComm, MpiComm *)) X(MPI_Comm_free, (MpiComm *))                     \
    X(MPI_Comm_set_errhandler, (MpiComm, MpiErrhandler))                                    \
    X(MPI_Op_create, (MpiUserFunction *, int, MpiOp *)) X(MPI_Op_free, (MpiOp *))           \
    X(MPI_Iallreduce, (const void *, void *, int, MpiType, MpiOp, MpiComm, MpiRequest *))   \
    X(MPI_Ireduce_scatter,                                                                  \
      (const void *, void *, const int *, MpiType, MpiOp, MpiComm, MpiRequest *))           \
    X(MPI_Iallgatherv, (const void *, int, MpiType, void *, const int *, const int *,       \
                        MpiType, MpiComm, MpiRequest *))                                    \
    X(MPI_Ibcast, (void *, int, MpiType, int, MpiComm, MpiRequest *))                       \
    X(MPI_Ibarrier, (MpiComm, MpiRequest *))                                                \
    X(MPI_Isend, (const void *, int, MpiType, int, int, MpiComm, MpiRequest *))             \
    X(MPI_Irecv, (void *, int, MpiType, int, int, MpiComm, MpiRequest *))                   \
    X(MPI_Test, (MpiRequest *, int *, void *)) X(MPI_Cancel, (MpiRequest *))                \
    X(MPI_Request_free, (MpiRequest *)) X(MPI_Error_string, (int, char *, int *))

#define MPI_OBJECTS(X)                                                                      \
    X(ompi_mpi_comm_world) X(ompi_mpi_float) X(ompi_mpi_uint16_t) X(ompi_mpi_int)           \
    X(ompi_mpi_byte) X(ompi_mpi_op_sum) X(ompi_mpi_errors_return)

#define CALL_FIELD(f, params) int (*f) params;
#define OBJECT_FIELD(o) void *o;
#define CALL_NAME(f, params) #f,
#define OBJECT_NAME(o) #o,

/* The library, opened once per process (pthread_once) and never changed after. */
static struct {
    struct {
        MPI_CALLS(CALL_FIELD)
    } f;
    struct {
        MPI_OBJECTS(OBJECT_FIELD)
    } o;
    char why[600]; /* empty: loaded */
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static const char *const call_names[] = {MPI_CALLS(CALL_NAME) NULL};
static const char *const object_names[] = {MPI_OBJECTS(OBJECT_NAME) NULL};

/* Every name's address into table, a struct of pointers in names' order; the first name
 * missing, or NULL. */
static const char *resolve(void *h, const char *const *names, void *table)
{
    for (int i = 0; names[i]; i++) {
        void *p = dlsym(h, names[i]);
        if (!p)
            return names[i];
        memcpy((char *)table + (size_t)i * sizeof p, &p, sizeof p);
    }
    return NULL;
}

static void lib_open(void)
{
    const char *env = getenv("COIL_LIBMPI"), *missing;
    const char *file = env && *env ? env : "libmpi.so.40";
    /* global: Open MPI's own plugins, which it opens in MPI_Init, resolve libmpi's names */
    void *h = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(lib.why, sizeof lib.why, "Open MPI's library %s not found%s", file,
                 env && *env ? " ($COIL_LIBMPI)"
                             : " (install Debian's libopenmpi3 and openmpi-bin, or set "
                               "COIL_COMM=tcp)");
        return;
    }
    if ((missing = resolve(h, call_names, &lib.f)) || (missing = resolve(h, object_names, &lib.o))) {
        snprintf(lib.why, sizeof lib.why, "%.300s lacks %s: coil's MPI engine speaks Open MPI's "
                 "ABI (3.0 or newer); with another MPI set COIL_COMM=tcp", file, missing);
        memset(&lib.f, 0, sizeof lib.f), memset(&lib.o, 0, sizeof lib.o);
        dlclose(h);
    }
}

bool mpi_loads(Err *e)
{
    pthread_once(&lib_once, lib_open);
    if (lib.why[0])
        err_set(e, ERR_DEVICE, "data-parallel: %s", lib.why);
    return !lib.why[0];
}

/* ---------------------------------------------------------------- the engine */

/* A rank's answer to "where are you": how many collectives it has started, and what it is
 * doing (a CommKind, or one of the AT_ values). */
typedef struct Where {
    int started, state;
} Where;
enum { AT_IDLE = -1, AT_CLOSING = -2, AT_SILENT = -3 /* no answer */ };

struct Mpi {
    int rank, size;
    double timeout_s;
    bool owns;              /* this Comm started MPI: it finalizes it */
    MpiComm comm, ask;      /* the collectives', and the questions' */
    MpiOp sum_bf16;
    int started, state;     /* this rank's Where */
    int asker;              /* the next question's sender, when it arrives */
    MpiRequest question;    /* the receive posted for it */
    bool listening;
    Where *told, *heard;    /* [size]: the answer sent to each asker; each rank's answer */
    bool *asked, *answered; /* [size]: a survey's progress */
    MpiRequest *pending;    /* [2 * size]: a survey's receives and sends */
    int *counts, *offsets;  /* [size]: each rank's chunk, in MPI's ints */
};

/* bf16 sums rounded at each addition, as the ring's (collective.c's add_bf16). */
static void sum_bf16(void *in, void *inout, int *len, MpiType *type)
{
    (void)type;
    const uint16_t *b = in;
    uint16_t *a = inout;
    for (int i = 0; i < *len; i++)
        a[i] = bf16_pack(bf16_unpack(a[i]) + bf16_unpack(b[i]));
}

static MpiType type_of(CommDtype t) { return t == COMM_F32 ? lib.o.ompi_mpi_float : lib.o.ompi_mpi_uint16_t; }
static size_t width_of(CommDtype t) { return t == COMM_F32 ? 4 : 2; }
static MpiOp sum_of(const Mpi *m, CommDtype t) { return t == COMM_F32 ? lib.o.ompi_mpi_op_sum : m->sum_bf16; }

/* rc as an error naming the call and the collective; true when rc is MPI_SUCCESS. */
static bool called(const Mpi *m, int rc, const char *call, const char *what, Err *e)
{
    if (rc == MPI_OK)
        return true;
    char text[512];
    int len = 0;
    if (lib.f.MPI_Error_string(rc, text, &len) != MPI_OK)
        snprintf(text, sizeof text, "error %d", rc);
    err_set(e, ERR_INPUT, "data-parallel: rank %d: %s failed during %s: %s", m->rank, call,
            what, text);
    return false;
}

static void nap(void)
{
    struct timespec t = {0, NAP_NS};
    nanosleep(&t, NULL);
}

/* The receive of the next question (any rank's). */
static void listen_for_questions(Mpi *m)
{
    m->listening = lib.f.MPI_Irecv(&m->asker, 1, lib.o.ompi_mpi_int, ANY_SOURCE, TAG_ASK, m->ask,
                                   &m->question) == MPI_OK;
}

/* Every question that has come, answered with where this rank is. */
static void answer(Mpi *m)
{
    int done = 0;
    while (m->listening && lib.f.MPI_Test(&m->question, &done, NULL) == MPI_OK && done) {
        int j = m->asker;
        MpiRequest r;
        if (j >= 0 && j < m->size && j != m->rank) {
            m->told[j] = (Where){m->started, m->state};
            if (lib.f.MPI_Isend(&m->told[j], 2, lib.o.ompi_mpi_int, j, TAG_TELL, m->ask, &r) == MPI_OK)
                lib.f.MPI_Request_free(&r);
        }
        listen_for_questions(m);
        done = 0;
    }
}

void mpi_idle(Mpi *m) { answer(m); }

/* Every other rank asked where it is; m->heard[j] its answer (AT_SILENT: none within
 * ASK_S). Requests left unanswered stay posted: the job ends next. */
static void survey(Mpi *m)
{
    MpiRequest *recv = m->pending, *send = m->pending + m->size;
    int waiting = 0;
    for (int j = 0; j < m->size; j++) {
        bool posted = j != m->rank &&
                      lib.f.MPI_Irecv(&m->heard[j], 2, lib.o.ompi_mpi_int, j, TAG_TELL, m->ask,
                                      &recv[j]) == MPI_OK &&
                      lib.f.MPI_Isend(&m->rank, 1, lib.o.ompi_mpi_int, j, TAG_ASK, m->ask,
                                      &send[j]) == MPI_OK;
        m->answered[j] = false, m->asked[j] = posted;
        waiting += posted;
    }
    double until = clock_seconds() + (m->timeout_s < ASK_S ? m->timeout_s : ASK_S);
    while (waiting > 0 && clock_seconds() < until) {
        for (int j = 0; j < m->size; j++) {
            int done = 0;
            if (m->asked[j] && !m->answered[j] &&
                lib.f.MPI_Test(&recv[j], &done, NULL) == MPI_OK && done)
                m->answered[j] = true, waiting--;
        }
        answer(m); /* another rank may be asking at the same time */
        nap();
    }
    for (int j = 0; j < m->size; j++)
        if (!m->answered[j])
            m->heard[j] = (Where){-1, AT_SILENT};
}

/* What rank j's answer says about it, when it is not where this rank is; NULL when it is. */
static const char *whereabouts(const Mpi *m, int j, char *buf, size_t n)
{
    Where h = m->heard[j];
    const char *doing = h.state >= 0 ? comm_kind_name[h.state] : NULL;
    if (h.state == AT_SILENT)
        snprintf(buf, n, "rank %d did not answer within %.0f s (stopped, killed, or its host is "
                 "unreachable)", j, ASK_S);
    else if (h.state == m->state && (h.started == m->started || h.state == AT_CLOSING))
        return NULL;
    else if (h.state == AT_CLOSING)
        snprintf(buf, n, "rank %d has closed its collectives (it ended early: see its own "
                 "message)", j);
    else if (h.started == m->started && doing)
        snprintf(buf, n, "rank %d is in collective %d too, but a %s: the ranks started "
                 "different collectives", j, h.started, doing);
    else if (doing)
        snprintf(buf, n, "rank %d is in its collective %d, a %s", j, h.started, doing);
    else if (h.started == 0)
        snprintf(buf, n, "rank %d has not started it: it is working outside the collectives "
                 "(stuck?) and has started none yet", j);
    else
        snprintf(buf, n, "rank %d has not started it: it is working outside the collectives "
                 "(stuck?) since its collective %d", j, h.started);
    return buf;
}

/* After the timeout: the ranks asked where they are, and the error naming the first one
 * not here, with what each such one said. */
static bool timed_out(Mpi *m, const char *what, Err *e)
{
    survey(m);
    char list[700] = "", one[200];
    int first = -1;
    for (int j = 0; j < m->size; j++) {
        if (j == m->rank || !whereabouts(m, j, one, sizeof one))
            continue;
        first = first < 0 ? j : first;
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", at ? "; " : "", one);
    }
    if (first < 0)
        err_set(e, ERR_INPUT, "data-parallel: rank %d: %s (collective %d) made no progress for "
                "%.0f s though every rank is in it (MPI's transport is stuck: a network "
                "problem?)", m->rank, what, m->started, m->timeout_s);
    else
        err_set(e, ERR_INPUT, "data-parallel: rank %d lost rank %d during %s (collective %d, no "
                "progress for %.0f s under MPI): %s", m->rank, first, what, m->started,
                m->timeout_s, list);
    return false;
}

/* req polled until it completes: a nonblocking collective moves its bytes inside MPI_Test,
 * so the loop spins a little, then naps between polls so that it leaves the core to the
 * rank's compute. Questions from other ranks are answered meanwhile. */
static bool finish(Mpi *m, MpiRequest *req, const char *call, const char *what, Err *e)
{
    double deadline = clock_seconds() + m->timeout_s;
    for (int polls = 0;; polls++) {
        int done = 0;
        if (!called(m, lib.f.MPI_Test(req, &done, NULL), call, what, e))
            return false;
        if (done)
            return true;
        answer(m);
        if (clock_seconds() > deadline)
            return timed_out(m, what, e);
        if (polls >= SPIN_POLLS)
            nap();
    }
}

/* ---------------------------------------------------------------- the collectives */

typedef bool (*Run)(Mpi *, const CommWork *, const char *, Err *);

/* In pieces of at most MAX_COUNT elements (an element's sum is independent of the rest). */
static bool all_reduce(Mpi *m, const CommWork *w, const char *what, Err *e)
{
    size_t width = width_of(w->dtype);
    for (int64_t at = 0; at < w->n; at += MAX_COUNT) {
        int count = (int)(w->n - at < MAX_COUNT ? w->n - at : MAX_COUNT);
        MpiRequest req;
        if (!called(m, lib.f.MPI_Iallreduce(IN_PLACE, (char *)w->data + (size_t)at * width, count,
                                            type_of(w->dtype), sum_of(m, w->dtype), m->comm, &req),
                    "MPI_Iallreduce", what, e) ||
            !finish(m, &req, "MPI_Iallreduce", what, e))
            return false;
    }
    return true;
}

/* Each rank's chunk of n (comm_chunk_start's) as MPI's int counts and offsets. */
static bool chunk_counts(Mpi *m, int64_t n, const char *what, Err *e)
{
    if (n > INT_MAX) {
        err_set(e, ERR_UNSUPPORTED, "data-parallel: a %s of %lld elements under MPI, whose "
                "offsets are int (at most %d): use COIL_COMM=tcp", what, (long long)n, INT_MAX);
        return false;
    }
    for (int i = 0; i < m->size; i++) {
        m->offsets[i] = (int)comm_chunk_start(n, m->size, i);
        m->counts[i] = (int)comm_chunk_start(n, m->size, i + 1) - m->offsets[i];
    }
    return true;
}

/* MPI leaves this rank's sums at the front of the array: moved to its chunk's place. */
static bool reduce_scatter(Mpi *m, const CommWork *w, const char *what, Err *e)
{
    size_t width = width_of(w->dtype);
    MpiRequest req;
    bool ok = chunk_counts(m, w->n, what, e) &&
              called(m, lib.f.MPI_Ireduce_scatter(IN_PLACE, w->data, m->counts, type_of(w->dtype),
                                                  sum_of(m, w->dtype), m->comm, &req),
                     "MPI_Ireduce_scatter", what, e) &&
              finish(m, &req, "MPI_Ireduce_scatter", what, e);
    if (ok)
        memmove((char *)w->data + (size_t)m->offsets[m->rank] * width, w->data,
                (size_t)m->counts[m->rank] * width);
    return ok;
}

static bool all_gather(Mpi *m, const CommWork *w, const char *what, Err *e)
{
    MpiRequest req;
    MpiType t = type_of(w->dtype);
    return chunk_counts(m, w->n, what, e) &&
           called(m, lib.f.MPI_Iallgatherv(IN_PLACE, 0, t, w->data, m->counts, m->offsets, t,
                                           m->comm, &req),
                  "MPI_Iallgatherv", what, e) &&
           finish(m, &req, "MPI_Iallgatherv", what, e);
}

static bool broadcast(Mpi *m, const CommWork *w, const char *what, Err *e)
{
    for (size_t at = 0; at < w->bytes; at += MAX_COUNT) {
        int count = (int)(w->bytes - at < MAX_COUNT ? w->bytes - at : MAX_COUNT);
        MpiRequest req;
        if (!called(m, lib.f.MPI_Ibcast((char *)w->data + at, count, lib.o.ompi_mpi_byte, w->root,
                                        m->comm, &req),
                    "MPI_Ibcast", what, e) ||
            !finish(m, &req, "MPI_Ibcast", what, e))
            return false;
    }
    return true;
}

static bool barrier(Mpi *m, const CommWork *w, const char *what, Err *e)
{
    (void)w;
    MpiRequest req;
    return called(m, lib.f.MPI_Ibarrier(m->comm, &req), "MPI_Ibarrier", what, e) &&
           finish(m, &req, "MPI_Ibarrier", what, e);
}

static const Run runs[] = {[COMM_ALL_REDUCE] = all_reduce, [COMM_REDUCE_SCATTER] = reduce_scatter,
                           [COMM_ALL_GATHER] = all_gather, [COMM_BROADCAST] = broadcast,
                           [COMM_BARRIER] = barrier};

bool mpi_run(Mpi *m, const CommWork *w, Err *e)
{
    m->started++, m->state = (int)w->kind;
    bool ok = runs[w->kind](m, w, comm_kind_name[w->kind], e);
    m->state = AT_IDLE;
    return ok;
}

/* ---------------------------------------------------------------- start and end */

/* Ends the process if MPI has not started within the timeout: MPI_Init_thread and the
 * communicators' duplication wait for every rank, with no timeout of their own. */
typedef struct Watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, running;
    int rank;
    double timeout_s;
} Watchdog;

static void *watch(void *arg)
{
    Watchdog *w = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)w->timeout_s + 1;
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    bool late = !w->done;
    pthread_mutex_unlock(&w->mu);
    if (late) {
        fprintf(stderr, "coil: data-parallel: rank %d: MPI did not start within %.0f s: "
                "MPI_Init waits for every rank of the job, and one never reached it (stuck, or "
                "it failed before: see its message)\n", w->rank, w->timeout_s);
        _exit(1);
    }
    return NULL;
}

static void watch_start(Watchdog *w, int rank, double timeout_s)
{
    *w = (Watchdog){.rank = rank, .timeout_s = timeout_s};
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->running = pthread_create(&w->thread, NULL, watch, w) == 0;
}

static void watch_stop(Watchdog *w)
{
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->running)
        pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* MPI initialised at a thread level that lets the Comm's thread call it (or found already
 * initialised by the program, at such a level). */
static bool start_mpi(Mpi *m, Err *e)
{
    int finalized = 0, initialized = 0, level = 0;
    lib.f.MPI_Finalized(&finalized);
    if (finalized) {
        err_set(e, ERR_UNSUPPORTED, "data-parallel: MPI was finalized by an earlier data-parallel "
                "run in this process and cannot start again: one MPI run a process (or "
                "COIL_COMM=tcp)");
        return false;
    }
    lib.f.MPI_Initialized(&initialized);
    /* Open MPI 4.1's own choice of nonblocking all-reduce took twice Rabenseifner's time
     * (reduce-scatter by halving, all-gather by doubling) for 25 to 100 MB here; the
     * user's setting, if any, stands */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    int rc = initialized ? lib.f.MPI_Query_thread(&level)
                         : lib.f.MPI_Init_thread(NULL, NULL, THREAD_SERIALIZED, &level);
    m->owns = !initialized && rc == MPI_OK;
    if (!called(m, rc, initialized ? "MPI_Query_thread" : "MPI_Init_thread", "the start", e))
        return false;
    if (level < THREAD_SERIALIZED) {
        err_set(e, ERR_UNSUPPORTED, "data-parallel: MPI gives thread level %d; coil's "
                "collectives run on a thread of their own and need MPI_THREAD_SERIALIZED (%d): "
                "an Open MPI built without threads? Use COIL_COMM=tcp", level, THREAD_SERIALIZED);
        return false;
    }
    return true;
}

/* MPI's world must be the one the environment described. */
static bool check_world(Mpi *m, const World *w, Err *e)
{
    int rank = -1, size = -1;
    lib.f.MPI_Comm_rank(lib.o.ompi_mpi_comm_world, &rank);
    lib.f.MPI_Comm_size(lib.o.ompi_mpi_comm_world, &size);
    if (rank == w->rank && size == w->size)
        return true;
    err_set(e, ERR_USAGE, "data-parallel: MPI says this is rank %d of %d, the environment (%s's "
            "variables) rank %d of %d: start the ranks with mpirun alone, or set COIL_COMM=tcp",
            rank, size, w->launcher, w->rank, w->size);
    (void)m;
    return false;
}

/* Communicators of coil's own (another MPI user in the process cannot mix in), errors
 * returned rather than fatal, the bf16 sum, and the first question's receive. */
static bool make_comms(Mpi *m, Err *e)
{
    MpiComm world = lib.o.ompi_mpi_comm_world;
    MpiErrhandler ret = lib.o.ompi_mpi_errors_return;
    bool ok = called(m, lib.f.MPI_Comm_dup(world, &m->comm), "MPI_Comm_dup", "the start", e) &&
              called(m, lib.f.MPI_Comm_dup(world, &m->ask), "MPI_Comm_dup", "the start", e) &&
              called(m, lib.f.MPI_Comm_set_errhandler(m->comm, ret), "MPI_Comm_set_errhandler",
                     "the start", e) &&
              called(m, lib.f.MPI_Comm_set_errhandler(m->ask, ret), "MPI_Comm_set_errhandler",
                     "the start", e) &&
              called(m, lib.f.MPI_Op_create(sum_bf16, 1, &m->sum_bf16), "MPI_Op_create",
                     "the start", e);
    if (ok)
        listen_for_questions(m);
    return ok;
}

static void free_mpi(Mpi *m)
{
    free(m->told), free(m->heard), free(m->asked), free(m->answered), free(m->pending);
    free(m->counts), free(m->offsets);
    free(m);
}

static Mpi *new_mpi(const World *w, double timeout_s, Err *e)
{
    Mpi *m = calloc(1, sizeof *m);
    size_t p = (size_t)w->size;
    if (m) {
        *m = (Mpi){.rank = w->rank, .size = w->size, .timeout_s = timeout_s, .state = AT_IDLE};
        m->told = calloc(p, sizeof *m->told), m->heard = calloc(p, sizeof *m->heard);
        m->asked = calloc(p, sizeof *m->asked), m->answered = calloc(p, sizeof *m->answered);
        m->pending = calloc(2 * p, sizeof *m->pending);
        m->counts = calloc(p, sizeof *m->counts), m->offsets = calloc(p, sizeof *m->offsets);
    }
    if (m && m->told && m->heard && m->asked && m->answered && m->pending && m->counts &&
        m->offsets)
        return m;
    if (m)
        free_mpi(m);
    err_set(e, ERR_MEMORY, "data-parallel: out of memory");
    return NULL;
}

Mpi *mpi_open(const World *w, double timeout_s, Err *e)
{
    Mpi *m = mpi_loads(e) ? new_mpi(w, timeout_s, e) : NULL;
    if (!m)
        return NULL;
    Watchdog dog;
    watch_start(&dog, w->rank, timeout_s);
    bool started = start_mpi(m, e);
    bool ok = started && check_world(m, w, e) && make_comms(m, e);
    watch_stop(&dog);
    if (ok)
        return m;
    if (started) /* the other ranks are in MPI now: only ending the job stops them */
        mpi_abort(m, e);
    free_mpi(m);
    return NULL;
}

_Noreturn void mpi_abort(Mpi *m, const Err *why)
{
    fprintf(stderr, "coil: %s\ncoil: rank %d ends the job (MPI_Abort)\n", why->msg, m->rank);
    fflush(stderr);
    lib.f.MPI_Abort(lib.o.ompi_mpi_comm_world, 1);
    _exit(1); /* MPI_Abort returned: it should not */
}

void mpi_close(Mpi *m)
{
    if (!m)
        return;
    Err e = {0};
    MpiRequest req;
    m->started++, m->state = AT_CLOSING;
    if (!called(m, lib.f.MPI_Ibarrier(m->comm, &req), "MPI_Ibarrier", "the close", &e) ||
        !finish(m, &req, "MPI_Ibarrier", "the close", &e))
        mpi_abort(m, &e);
    if (m->listening && lib.f.MPI_Cancel(&m->question) == MPI_OK)
        lib.f.MPI_Request_free(&m->question);
    lib.f.MPI_Op_free(&m->sum_bf16);
    lib.f.MPI_Comm_free(&m->ask);
    lib.f.MPI_Comm_free(&m->comm);
    if (m->owns)
        lib.f.MPI_Finalize();
    free_mpi(m);
}
