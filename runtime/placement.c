/* placement.c — a rank's CPUs (runtime/placement.h), from sched_getaffinity and the
 * kernel's NUMA node lists. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/placement.h"

static const char *const bind_names[] = {"none", "cores", "numa"};

bool bind_parse(const char *s, BindMode *m)
{
    int i = name_index(bind_names, 3, s);
    if (i >= 0)
        *m = (BindMode)i;
    return i >= 0;
}

const char *bind_name(BindMode m) { return bind_names[m]; }

/* The CPUs of set in order into cpu[]; their count. */
static int cpus_of(const cpu_set_t *set, int *cpu)
{
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set))
            cpu[n++] = c;
    return n;
}

/* "2-3,6": a kernel cpulist into set. */
static void parse_cpulist(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, set);
        s = *end == ',' ? end + 1 : end;
        if (*s == '\n')
            break;
    }
}

/* NUMA node `node`'s CPUs; false when the kernel lists no such node. */
static bool node_cpus(int node, cpu_set_t *set)
{
    char path[96], line[4096];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    bool ok = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    if (ok)
        parse_cpulist(line, set);
    return ok;
}

static int node_count(void)
{
    cpu_set_t s;
    int n = 0;
    while (n < 1024 && node_cpus(n, &s))
        n++;
    return n > 0 ? n : 1;
}

/* "CPUs 2-3" for a run of consecutive CPUs, else "CPUs 1,4,7" (shortened). */
static void describe(const int *cpu, int n, char *desc, size_t len)
{
    bool run = n > 0 && cpu[n - 1] - cpu[0] == n - 1;
    if (run) {
        snprintf(desc, len, n == 1 ? "CPU %d" : "CPUs %d-%d", cpu[0], cpu[n - 1]);
        return;
    }
    size_t used = (size_t)snprintf(desc, len, "CPUs ");
    for (int i = 0; i < n && used + 16 < len; i++)
        used += (size_t)snprintf(desc + used, len - used, "%s%d", i ? "," : "", cpu[i]);
}

bool bind_rank(BindMode m, int k, int n, int *ncpu, char *desc, size_t len, Err *e)
{
    cpu_set_t allowed, want;
    int cpu[CPU_SETSIZE];
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        err_set(e, ERR_INPUT, "--bind: cannot read this process's CPUs");
        return false;
    }
    int have = cpus_of(&allowed, cpu);
    *ncpu = have;
    snprintf(desc, len, "not bound (%d CPUs)", have);
    if (m == BIND_NONE)
        return true;
    CPU_ZERO(&want);
    int node = -1;
    if (m == BIND_CORES) {
        int per = have / n, extra = have % n;
        int first = k * per + (k < extra ? k : extra), count = per + (k < extra);
        for (int i = 0; i < (count > 0 ? count : 1); i++) /* fewer CPUs than ranks: share */
            CPU_SET(cpu[count > 0 ? first + i : k % have], &want);
    } else {
        node = k % node_count();
        cpu_set_t on_node;
        if (node_cpus(node, &on_node))
            CPU_AND(&want, &on_node, &allowed);
        if (CPU_COUNT(&want) == 0)
            want = allowed;
    }
    if (sched_setaffinity(0, sizeof want, &want) != 0) {
        err_set(e, ERR_INPUT, "--bind %s: cannot bind rank %d to its CPUs", bind_name(m), k);
        return false;
    }
    *ncpu = cpus_of(&want, cpu);
    describe(cpu, *ncpu, desc, len);
    if (node >= 0) {
        size_t used = strlen(desc);
        snprintf(desc + used, len - used, " (NUMA node %d)", node);
    }
    return true;
}
