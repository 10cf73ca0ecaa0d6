/* world.c — the data-parallel world from the launcher's variables (runtime/world.h). */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/world.h"

/* Each launcher's names for rank, size, local rank and local size (NULL: it has none). */
typedef struct Launcher {
    const char *name, *rank, *size, *local_rank, *local_size;
} Launcher;

static const Launcher launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
};

/* Variable `name` as an integer in [lo, hi]; def when unset (or name NULL). */
static bool env_int(const char *name, int lo, int hi, int def, int *out, Err *e)
{
    const char *s = name ? getenv(name) : NULL;
    if (!s || !*s) {
        *out = def;
        return true;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > hi) {
        err_set(e, ERR_USAGE, "%s=%s: expected an integer from %d to %d", name, s, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

/* SLURM_TASKS_PER_NODE's first count ("2(x3),1": 2); at least local_rank + 1. */
static int slurm_tasks_here(int local_rank)
{
    const char *s = getenv("SLURM_TASKS_PER_NODE");
    long n = s ? strtol(s, NULL, 10) : 0;
    return n > local_rank && n <= WORLD_MAX ? (int)n : local_rank + 1;
}

static bool master(World *w, Err *e)
{
    const char *addr = getenv("MASTER_ADDR");
    snprintf(w->master_addr, sizeof w->master_addr, "%s", addr && *addr ? addr : "127.0.0.1");
    return env_int("MASTER_PORT", 1, 65535, 29500, &w->master_port, e);
}

bool world_from_env(World *w, Err *e)
{
    *w = (World){.rank = 0, .size = 1, .local_rank = 0, .local_size = 1, .launcher = "none"};
    const Launcher *l = NULL;
    for (size_t i = 0; !l && i < sizeof launchers / sizeof *launchers; i++)
        if (getenv(launchers[i].size) && getenv(launchers[i].rank))
            l = &launchers[i];
    if (!master(w, e))
        return false;
    if (!l)
        return true;
    w->launcher = l->name;
    bool ok = env_int(l->size, 1, WORLD_MAX, 1, &w->size, e) &&
              env_int(l->rank, 0, w->size - 1, 0, &w->rank, e) &&
              env_int(l->local_size, 1, w->size, 1, &w->local_size, e) &&
              env_int(l->local_rank, 0, w->size - 1, 0, &w->local_rank, e);
    if (ok && !l->local_size) /* Slurm: "4" or "2(x3),1": the leading count, if any */
        w->local_size = slurm_tasks_here(w->local_rank);
    if (ok && w->local_rank >= w->local_size) {
        err_set(e, ERR_USAGE, "%s=%d: not below the %d ranks on this host", l->local_rank,
                w->local_rank, w->local_size);
        ok = false;
    }
    return ok;
}

int world_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 29500;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t n = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}
