/* test_collective.c — the data-parallel world read from each launcher's variables, and
 * the collectives among real processes on this host (forked, a ring over loopback TCP):
 * each result against its closed form, a lost rank named within the timeout. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runtime/collective.h"

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

/* Rank r's part: every collective, each checked against what the ranks' inputs give.
 * Exit status: the number of failed checks. */
static int rank_main(int r, int p, int port)
{
    World w = {.rank = r, .size = p, .local_rank = r, .local_size = p, .master_port = port,
               .launcher = "test"};
    snprintf(w.master_addr, sizeof w.master_addr, "127.0.0.1");
    Err e = {0};
    Comm *c = comm_open(&w, 20 * CHECK_TIME_SCALE, &e);
    if (!c) {
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
        return 1;
    }
    enum { N = 100003 }; /* not a multiple of the world: uneven chunks */
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++)
        x[i] = (float)(r + 1) * (float)(i % 97);
    float ranks = (float)(p * (p + 1) / 2);
    CHECK(comm_all_reduce(c, x, N, &e));
    for (int i = 0; i < N; i++)
        CHECK(x[i] == ranks * (float)(i % 97) || (i = N, false));
    for (int i = 0; i < N; i++)
        x[i] = (float)(r + 1);
    CommOp *op = comm_reduce_scatter_start(c, x, N, COMM_F32, &e); /* asynchronous: waited below */
    CHECK(op && comm_wait(op, &e));
    int64_t lo = comm_chunk_start(N, p, r), hi = comm_chunk_start(N, p, r + 1);
    for (int64_t i = lo; i < hi; i++)
        CHECK(x[i] == ranks || (i = hi, false));
    CHECK(comm_wait(comm_all_gather_start(c, x, N, COMM_F32, &e), &e));
    for (int i = 0; i < N; i++)
        CHECK(x[i] == ranks || (i = N, false));
    size_t nb = 3u << 20 | 5; /* pieces of 1 MiB and a tail */
    unsigned char *b = malloc(nb);
    int root = p - 1;
    for (size_t i = 0; i < nb; i++)
        b[i] = r == root ? (unsigned char)(i * 7) : 0;
    CHECK(comm_broadcast(c, b, nb, root, &e));
    for (size_t i = 0; i < nb; i++)
        CHECK(b[i] == (unsigned char)(i * 7) || (i = nb, false));
    uint16_t *h = malloc(N * sizeof *h); /* bf16: small integers add exactly */
    for (int i = 0; i < N; i++)
        h[i] = f32_to_bf16((float)(r + 1) * (float)(i % 8));
    CHECK(comm_wait(comm_all_reduce_start(c, h, N, COMM_BF16, &e), &e));
    for (int i = 0; i < N; i++)
        CHECK(bf16_to_f32(h[i]) == ranks * (float)(i % 8) || (i = N, false));
    free(h);
    CHECK(comm_barrier(c, &e));
    if (!err_ok(&e))
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
    free(x), free(b);
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

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_world();
    test_collectives(1);
    test_collectives(2);
    test_collectives(3);
    test_lost_rank();
    return check_status();
}
