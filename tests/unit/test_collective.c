/* test_collective.c — the data-parallel world read from each launcher's variables, and
 * the collectives among real processes on this host, on each engine (forked ranks on a
 * ring over loopback TCP; `--mpi`: ranks of this program under Open MPI's mpirun): each
 * result against its closed form, a lost rank named within the timeout. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runtime/collective.h"
#include "runtime/comm_mpi.h"

static const char *const all_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_TASKS_PER_NODE"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof all_vars / sizeof *all_vars; i++)
        unsetenv(all_vars[i]);
}

static void test_world(void)
{
    World w;
    Err e = {0};
    clear_env();
    CHECK(world_from_env(&w, &e) && w.rank == 0 && w.size == 1 && w.master_port == 29500 &&
          strcmp(w.launcher, "none") == 0);
    setenv("RANK", "3", 1), setenv("WORLD_SIZE", "4", 1), setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1), setenv("MASTER_ADDR", "node7", 1);
    setenv("MASTER_PORT", "1234", 1);
    CHECK(world_from_env(&w, &e) && w.rank == 3 && w.size == 4 && w.local_rank == 1 &&
          w.local_size == 2 && w.master_port == 1234 && strcmp(w.master_addr, "node7") == 0 &&
          strcmp(w.launcher, "torchrun") == 0);
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1), setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(world_from_env(&w, &e) && w.rank == 1 && w.size == 2 && strcmp(w.launcher, "mpirun") == 0);
    clear_env();
    setenv("SLURM_PROCID", "5", 1), setenv("SLURM_NTASKS", "8", 1), setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_TASKS_PER_NODE", "4(x2)", 1);
    CHECK(world_from_env(&w, &e) && w.rank == 5 && w.size == 8 && w.local_rank == 1 &&
          w.local_size == 4 && strcmp(w.launcher, "srun") == 0);
    clear_env();
    setenv("RANK", "2", 1), setenv("WORLD_SIZE", "2", 1); /* rank past the world */
    CHECK(!world_from_env(&w, &e) && strstr(e.msg, "RANK=2: expected an integer from 0 to 1"));
    e = (Err){0};
    clear_env();
    setenv("RANK", "0", 1), setenv("WORLD_SIZE", "two", 1);
    CHECK(!world_from_env(&w, &e) && strstr(e.msg, "WORLD_SIZE=two"));
    clear_env();
}

/* Rank r's input to the sums of inexact values: f32 sums that depend on the order. */
static float wobbly(int r, int i) { return sinf(0.37f * (float)i + (float)r) * (float)(r + 1); }

/* Sums whose rounding depends on the order of the additions: close to the exact sum, and
 * the same bits on every rank (rank 0's broadcast compared); for 2 ranks in bf16, one
 * addition rounded to bf16 (the ring's definition, and MPI's). */
static void check_rounded_sums(Comm *c, int r, int p, Err *e)
{
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *x0 = malloc(N * sizeof *x0);
    for (int i = 0; i < N; i++)
        x[i] = wobbly(r, i);
    CHECK(comm_all_reduce(c, x, N, e));
    for (int i = 0; i < N; i++) {
        double want = 0, scale = 0;
        for (int k = 0; k < p; k++)
            want += wobbly(k, i), scale += fabs(wobbly(k, i));
        CHECK(fabs(x[i] - want) <= 1e-6 * scale || (i = N, false));
    }
    memcpy(x0, x, N * sizeof *x);
    CHECK(comm_broadcast(c, x0, N * sizeof *x0, 0, e));
    CHECK(memcmp(x0, x, N * sizeof *x) == 0);
    uint16_t h[N];
    for (int i = 0; i < N; i++)
        h[i] = f32_to_bf16(wobbly(r, i));
    CHECK(comm_wait(comm_all_reduce_start(c, h, N, COMM_BF16, e), e));
    for (int i = 0; p == 2 && i < N; i++) {
        float sum = bf16_to_f32(f32_to_bf16(wobbly(0, i))) + bf16_to_f32(f32_to_bf16(wobbly(1, i)));
        CHECK(h[i] == f32_to_bf16(sum) || (i = N, false));
    }
    free(x), free(x0);
}

/* Every collective on c, each checked against what the ranks' inputs give. */
static void check_collectives(Comm *c, int r, int p, Err *e)
{
    enum { N = 100003 }; /* not a multiple of the world: uneven chunks */
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++)
        x[i] = (float)(r + 1) * (float)(i % 97);
    float ranks = (float)(p * (p + 1) / 2), one = (float)(r + 1); /* one element: fewer than ranks */
    CHECK(comm_all_reduce(c, &one, 1, e) && one == ranks);
    CHECK(comm_all_reduce(c, x, N, e));
    for (int i = 0; i < N; i++)
        CHECK(x[i] == ranks * (float)(i % 97) || (i = N, false));
    for (int i = 0; i < N; i++)
        x[i] = (float)(r + 1);
    CommOp *op = comm_reduce_scatter_start(c, x, N, COMM_F32, e); /* asynchronous: waited below */
    CHECK(op && comm_wait(op, e));
    int64_t lo = comm_chunk_start(N, p, r), hi = comm_chunk_start(N, p, r + 1);
    for (int64_t i = lo; i < hi; i++)
        CHECK(x[i] == ranks || (i = hi, false));
    CHECK(comm_wait(comm_all_gather_start(c, x, N, COMM_F32, e), e));
    for (int i = 0; i < N; i++)
        CHECK(x[i] == ranks || (i = N, false));
    size_t nb = 3u << 20 | 5; /* pieces of 1 MiB and a tail */
    unsigned char *b = malloc(nb);
    int root = p - 1;
    for (size_t i = 0; i < nb; i++)
        b[i] = r == root ? (unsigned char)(i * 7) : 0;
    CHECK(comm_broadcast(c, b, nb, root, e));
    for (size_t i = 0; i < nb; i++)
        CHECK(b[i] == (unsigned char)(i * 7) || (i = nb, false));
    uint16_t *h = malloc(N * sizeof *h); /* bf16: small integers add exactly */
    for (int i = 0; i < N; i++)
        h[i] = f32_to_bf16((float)(r + 1) * (float)(i % 8));
    CHECK(comm_wait(comm_all_reduce_start(c, h, N, COMM_BF16, e), e));
    for (int i = 0; i < N; i++)
        CHECK(bf16_to_f32(h[i]) == ranks * (float)(i % 8) || (i = N, false));
    free(h);
    check_rounded_sums(c, r, p, e);
    CHECK(comm_barrier(c, e));
    if (!err_ok(e))
        fprintf(stderr, "rank %d: %s\n", r, e->msg);
    free(x), free(b);
}

static const char *rank_launcher = "test"; /* the forked ranks' World's */

/* Rank r's part over TCP. Exit status: the number of failed checks. */
static int rank_main(int r, int p, int port)
{
    World w = {.rank = r, .size = p, .local_rank = r, .local_size = p, .master_port = port,
               .launcher = rank_launcher};
    snprintf(w.master_addr, sizeof w.master_addr, "127.0.0.1");
    Err e = {0};
    Comm *c = comm_open(&w, 20 * CHECK_TIME_SCALE, &e);
    if (!c) {
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
        return 1;
    }
    CHECK_STR(comm_engine(c), p == 1 ? "none" : "tcp");
    check_collectives(c, r, p, &e);
    comm_free(c);
    return check_failures;
}

/* p forked ranks running `body`; their exit statuses into status[]. */
static void run_ranks(int p, int (*body)(int, int, int), int *status)
{
    int port = world_free_port();
    pid_t pid[8];
    for (int r = 0; r < p; r++)
        if ((pid[r] = fork()) == 0) {
            check_failures = 0; /* the child's own count is its exit status */
            _exit(body(r, p, port));
        }
    for (int r = 0; r < p; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

static void test_collectives(int p)
{
    int status[8];
    run_ranks(p, rank_main, status);
    for (int r = 0; r < p; r++)
        CHECK(status[r] == 0);
}

/* The last rank goes away after joining: the others' all-reduce fails naming it, well
 * within the timeout, instead of waiting forever. Exit 0: failed as it should. */
static int lost_main(int r, int p, int port)
{
    World w = {.rank = r, .size = p, .local_rank = r, .local_size = p, .master_port = port};
    snprintf(w.master_addr, sizeof w.master_addr, "127.0.0.1");
    Err e = {0};
    Comm *c = comm_open(&w, 5 * CHECK_TIME_SCALE, &e);
    if (!c)
        return 10;
    if (r == p - 1)
        _exit(0); /* as if killed: no goodbye */
    float x[1000] = {0};
    double t0 = clock_seconds();
    bool ok = comm_all_reduce(c, x, 1000, &e);
    double took = clock_seconds() - t0;
    comm_free(c);
    if (ok || took > 6 * CHECK_TIME_SCALE)
        return 11;
    if (!strstr(e.msg, "lost rank") || !strstr(e.msg, "all-reduce")) {
        fprintf(stderr, "rank %d: unexpected: %s\n", r, e.msg);
        return 12;
    }
    return 0;
}

static void test_lost_rank(void)
{
    int status[3];
    run_ranks(3, lost_main, status);
    for (int r = 0; r < 3; r++)
        CHECK(status[r] == 0);
}

/* The engine's choice (COIL_COMM) refused where it cannot work, saying what to do; a
 * missing libmpi named in one line, and mpirun's ranks falling back to TCP without it.
 * Last: the process keeps the library it failed to open. */
static void test_engine_choice(void)
{
    World w = {.rank = 0, .size = 2, .local_rank = 0, .local_size = 2, .master_port = 1};
    Err e = {0};
    clear_env();
    setenv("COIL_COMM", "udp", 1);
    CHECK(!comm_open(&w, 1, &e) && strstr(e.msg, "COIL_COMM=udp: expected tcp, mpi or auto"));
    e = (Err){0};
    setenv("COIL_COMM", "mpi", 1);
    CHECK(!comm_open(&w, 1, &e) && strstr(e.msg, "not started by Open MPI's mpirun"));
    e = (Err){0};
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("COIL_LIBMPI", "/nonexistent/libmpi.so.40", 1);
    CHECK(!comm_open(&w, 1, &e) &&
          strstr(e.msg, "Open MPI's library /nonexistent/libmpi.so.40 not found ($COIL_LIBMPI)"));
    unsetenv("COIL_COMM"); /* auto, mpirun's world: TCP (rank_main checks which) */
    rank_launcher = "mpirun";
    test_collectives(2);
    rank_launcher = "test";
    unsetenv("COIL_LIBMPI");
    clear_env();
}

/* ---------------------------------------------------------------- under mpirun */

/* This process as one rank of an mpirun job. mode: the engine expected ("mpi", or "tcp"
 * with COIL_COMM=tcp), whose collectives are checked; or a fault of the last rank: "stuck"
 * (it never starts the all-reduce the others wait in) or "stopped" (SIGSTOP). Exit status:
 * the failed checks; a fault's other ranks never return (the job ends). */
static int mpi_rank_main(const char *mode)
{
    World w;
    Err e = {0};
    bool stuck = strcmp(mode, "stuck") == 0, stopped = strcmp(mode, "stopped") == 0;
    /* a fault's timeout is what the job waits out, counted from the all-reduce every rank
       has reached: short, and only doubled under the sanitizers (not CHECK_TIME_SCALE's
       10x, which made each fault case a 30 s wait there) */
    double timeout = stuck || stopped ? 3 * (CHECK_TIME_SCALE > 1 ? 2 : 1) : 20 * CHECK_TIME_SCALE;
    Comm *c = world_from_env(&w, &e) ? comm_open(&w, timeout, &e) : NULL;
    if (!c) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    if ((stuck || stopped) && w.rank == w.size - 1) {
        if (stopped)
            raise(SIGSTOP);
        sleep(60);
        _exit(20); /* the others should have ended the job by now */
    }
    if (stuck || stopped) {
        float x[1000] = {0};
        comm_all_reduce(c, x, 1000, &e);
        fprintf(stderr, "rank %d: the all-reduce returned: %s\n", w.rank, e.msg);
        _exit(21);
    }
    CHECK_STR(comm_engine(c), mode);
    check_collectives(c, w.rank, w.size, &e);
    comm_free(c);
    return check_failures;
}

static bool on_path(const char *program)
{
    const char *path = getenv("PATH");
    char dirs[4096], file[4200];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(file, sizeof file, "%s/%s", d, program);
        if (access(file, X_OK) == 0)
            return true;
    }
    return false;
}

/* `mpirun -np p` of this program as ranks of `mode`, env prefixed; its output into out,
 * its exit status returned, the seconds it took in *took. */
static int mpirun(const char *env, int p, const char *mode, char *out, size_t n, double *took)
{
    char self[4096] = "", cmd[8192];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    snprintf(cmd, sizeof cmd, "%s timeout 60 mpirun --oversubscribe -np %d '%s' --mpi-rank %s 2>&1",
             env, p, self, mode);
    double t0 = clock_seconds();
    FILE *f = popen(cmd, "r");
    size_t got = f ? fread(out, 1, n - 1, f) : 0;
    out[got] = 0;
    int st = f ? pclose(f) : -1;
    *took = clock_seconds() - t0;
    int rc = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 255;
    if (rc != 0)
        fprintf(stderr, "[%s mpirun -np %d ... %s: status %d, %.1f s]\n%s\n", env, p, mode, rc,
                *took, out);
    return rc;
}

/* The collectives under Open MPI (as root if this is root), on 2 and 3 ranks, on MPI by
 * default and on TCP when asked; a stuck and a stopped rank named within the timeout and
 * the job ended. 77 (skipped) where Open MPI is not installed. */
static int test_mpi(void)
{
    Err e = {0};
    if (!on_path("mpirun") || !mpi_loads(&e)) {
        printf("skipped: %s\n", on_path("mpirun") ? e.msg : "mpirun not found (install Debian's "
               "openmpi-bin)");
        return 77;
    }
    clear_env();
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1), setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    static char out[1 << 16];
    char env[64];
    double took;
    CHECK(mpirun("", 2, "mpi", out, sizeof out, &took) == 0);
    CHECK(mpirun("", 3, "mpi", out, sizeof out, &took) == 0);
    snprintf(env, sizeof env, "COIL_COMM=tcp MASTER_PORT=%d", world_free_port());
    CHECK(mpirun(env, 2, "tcp", out, sizeof out, &took) == 0);
    CHECK(mpirun("", 3, "stuck", out, sizeof out, &took) != 0);
    CHECK(took < 20 * CHECK_TIME_SCALE);
    CHECK(strstr(out, "lost rank 2 during all-reduce") && strstr(out, "rank 2 has not started it"));
    CHECK(mpirun("", 2, "stopped", out, sizeof out, &took) != 0);
    CHECK(took < 20 * CHECK_TIME_SCALE);
    CHECK(strstr(out, "lost rank 1 during all-reduce") && strstr(out, "rank 1 did not answer"));
    if (check_failures)
        printf("last output:\n%s\n", out);
    return check_status();
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 3 && strcmp(argv[1], "--mpi-rank") == 0)
        return mpi_rank_main(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--mpi") == 0)
        return test_mpi();
    test_world();
    test_collectives(1);
    test_collectives(2);
    test_collectives(3);
    test_lost_rank();
    test_engine_choice();
    return check_status();
}
