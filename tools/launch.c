/* launch.c — `coil launch --nproc N -- PROGRAM ARGS...`: N local ranks of a data-parallel
 * job, started as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT), their output forwarded a whole line at a time with a
 * "[rank K] " prefix, and all of them ended when one fails: a job never half-runs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/world.h"
#include "tools/cli.h"

#define MAX_LOCAL 256
#define GRACE_S 5.0 /* after SIGTERM, the ranks' time to go before SIGKILL */

typedef struct Rank {
    pid_t pid;      /* 0 once reaped */
    int out;        /* its stdout and stderr, -1 at EOF */
    char line[4096];
    size_t len;
    int status;     /* exit status, 128 + signal when killed */
} Rank;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

static void set_env_int(const char *name, long v)
{
    char s[32];
    snprintf(s, sizeof s, "%ld", v);
    setenv(name, s, 1);
}

/* The child: rank k's variables (another launcher's dropped), then the program. */
static void exec_rank(int k, int n, const char *addr, int port, char **cmd, int out,
                      int restart)
{
    static const char *const others[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_PROCID", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        unsetenv(others[i]);
    set_env_int("RANK", k), set_env_int("WORLD_SIZE", n);
    set_env_int("LOCAL_RANK", k), set_env_int("LOCAL_WORLD_SIZE", n);
    setenv("MASTER_ADDR", addr, 1), set_env_int("MASTER_PORT", port);
    set_env_int("TORCHELASTIC_RESTART_COUNT", restart); /* as torchrun names it */
    setpgid(0, 0); /* its own group: ending it ends what it started */
    dup2(out, STDOUT_FILENO), dup2(out, STDERR_FILENO);
    close(out);
    execvp(cmd[0], cmd);
    fprintf(stderr, "coil launch: cannot run %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
}

static bool start_ranks(Rank *r, int n, const char *addr, int port, char **cmd, int restart)
{
    for (int k = 0; k < n; k++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0)
            return false;
        fflush(NULL);
        r[k].pid = fork();
        if (r[k].pid == 0) {
            close(p[0]);
            exec_rank(k, n, addr, port, cmd, p[1], restart);
        }
        close(p[1]);
        r[k].out = p[0];
        if (r[k].pid < 0)
            return false;
        setpgid(r[k].pid, r[k].pid); /* also here: no race with the child's own */
    }
    return true;
}

/* Rank k's complete lines to stdout, prefixed; at EOF (or a full buffer) the rest too. */
static void forward(Rank *r, int k, bool all)
{
    size_t start = 0;
    for (size_t i = 0; i < r->len; i++)
        if (r->line[i] == '\n') {
            printf("[rank %d] %.*s\n", k, (int)(i - start), r->line + start);
            start = i + 1;
        }
    bool full = start == 0 && r->len == sizeof r->line; /* a longer line: in pieces */
    if ((all || full) && start < r->len) {
        printf("[rank %d] %.*s\n", k, (int)(r->len - start), r->line + start);
        start = r->len;
    }
    memmove(r->line, r->line + start, r->len - start);
    r->len -= start;
    fflush(stdout);
}

/* Whatever the ranks have written, forwarded; waits up to ms for something. */
static void pump(Rank *r, int n, int ms)
{
    struct pollfd p[MAX_LOCAL];
    for (int k = 0; k < n; k++)
        p[k] = (struct pollfd){.fd = r[k].out, .events = POLLIN};
    if (poll(p, (nfds_t)n, ms) <= 0)
        return;
    for (int k = 0; k < n; k++) {
        if (!p[k].revents)
            continue;
        ssize_t got = read(r[k].out, r[k].line + r[k].len, sizeof r[k].line - r[k].len);
        if (got > 0)
            r[k].len += (size_t)got;
        else if (got == 0 || errno != EINTR)
            close(r[k].out), r[k].out = -1;
        forward(&r[k], k, r[k].out < 0);
    }
}

/* Ranks that ended since last time: their status kept; the first to fail, if any. Of
 * ranks failing in the same sweep, one killed by a signal comes first: the others may
 * have exited only because they lost it ("rank 0 lost rank 1"), and the job's status,
 * which decides a restart, must be the cause's. */
static int reap(Rank *r, int n, int *failed)
{
    int running = 0, first = -1;
    for (int k = 0; k < n; k++) {
        int st;
        if (r[k].pid > 0 && waitpid(r[k].pid, &st, WNOHANG) == r[k].pid) {
            r[k].pid = 0;
            r[k].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (r[k].status != 0 && (first < 0 || (r[k].status > 128 && r[first].status <= 128)))
                first = k;
        }
        running += r[k].pid > 0;
    }
    if (*failed < 0)
        *failed = first;
    return running;
}

static void signal_all(Rank *r, int n, int sig)
{
    for (int k = 0; k < n; k++)
        if (r[k].pid > 0)
            kill(-r[k].pid, sig);
}

/* Until every rank has ended: one failing (or an interrupt) ends the others, SIGTERM
 * first, SIGKILL after the grace. The job's status: the first failure's, else 0. */
static int supervise(Rank *r, int n)
{
    int failed = -1;
    double stopping = 0, ended = 0;
    for (;;) {
        pump(r, n, 100);
        int running = reap(r, n, &failed);
        bool eof = true;
        for (int k = 0; k < n; k++)
            eof = eof && r[k].out < 0;
        ended = running || ended > 0 ? ended : clock_seconds();
        /* every rank gone: what they wrote drained (for a second at most: something they
         * started may hold their output open) */
        if (!running && (eof || clock_seconds() - ended > 1))
            break;
        if (!running)
            continue;
        if ((failed >= 0 || interrupted) && stopping == 0) {
            if (failed >= 0)
                fprintf(stderr, "coil launch: rank %d %s %d: stopping the other ranks\n", failed,
                        r[failed].status > 128 ? "was killed by signal" : "exited with status",
                        r[failed].status > 128 ? r[failed].status - 128 : r[failed].status);
            signal_all(r, n, SIGTERM);
            stopping = clock_seconds();
        } else if (stopping > 0 && clock_seconds() - stopping > GRACE_S) {
            signal_all(r, n, SIGKILL);
            stopping = -1;
        }
    }
    if (failed >= 0)
        return r[failed].status;
    return interrupted ? 128 + interrupted : EXIT_OK;
}

/* One attempt at the job: every rank started (with the restart's number), supervised. */
static int run_job(Rank *r, int n, const char *addr, int port, char **cmd, int restart)
{
    memset(r, 0, sizeof *r * MAX_LOCAL);
    for (int k = 0; k < MAX_LOCAL; k++)
        r[k].out = -1;
    if (!start_ranks(r, n, addr, port, cmd, restart)) {
        fprintf(stderr, "coil launch: cannot start the ranks: %s\n", strerror(errno));
        signal_all(r, n, SIGKILL);
        return EXIT_INPUT;
    }
    return supervise(r, n);
}

int cmd_launch(const Command *cmd, Args *a, int argc, char **argv)
{
    (void)a;
    const char *nproc = NULL, *port_s = NULL, *addr = "127.0.0.1", *restarts_s = NULL;
    int i = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0 && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return help(cmd);
        const char **v = strcmp(argv[i], "--nproc") == 0         ? &nproc
                         : strcmp(argv[i], "--master-port") == 0 ? &port_s
                         : strcmp(argv[i], "--master-addr") == 0 ? &addr
                         : strcmp(argv[i], "--max-restarts") == 0 ? &restarts_s
                                                                  : NULL;
        if (!v)
            return usage_error(cmd, "unknown option '%s'", argv[i]);
        if (++i == argc)
            return usage_error(cmd, "%s needs a value", argv[i - 1]);
        *v = argv[i];
    }
    i += i < argc && strcmp(argv[i], "--") == 0;
    int64_t n, port = 0, restarts = 0;
    int rc = parse_count(cmd, "--nproc", nproc, 1, &n);
    if (rc == EXIT_OK && restarts_s && strcmp(restarts_s, "0") != 0)
        rc = parse_count(cmd, "--max-restarts", restarts_s, 0, &restarts);
    if (rc == EXIT_OK && n > MAX_LOCAL)
        rc = usage_error(cmd, "--nproc %lld: at most %d ranks on one host", (long long)n, MAX_LOCAL);
    rc = rc ? rc : parse_count(cmd, "--master-port", port_s, world_free_port(), &port);
    if (rc == EXIT_OK && port > 65535)
        rc = usage_error(cmd, "--master-port %lld: expected a port up to 65535", (long long)port);
    if (rc == EXIT_OK && i >= argc)
        rc = usage_error(cmd, "no program to launch (coil launch --nproc N -- PROGRAM ARGS...)");
    if (rc != EXIT_OK)
        return rc;
    signal(SIGINT, on_signal), signal(SIGTERM, on_signal), signal(SIGPIPE, SIG_IGN);
    Rank *r = calloc(MAX_LOCAL, sizeof *r);
    for (int restart = 0; r; restart++) {
        rc = run_job(r, (int)n, addr, (int)port, argv + i, restart);
        if (rc == EXIT_OK || interrupted || rc == EXIT_INPUT || restart >= restarts) {
            free(r);
            return rc;
        }
        fprintf(stderr, "coil launch: restarting the job (restart %d of %lld)\n", restart + 1,
                (long long)restarts);
    }
    fprintf(stderr, "coil launch: out of memory\n");
    return EXIT_INPUT;
}
