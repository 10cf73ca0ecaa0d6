/* placement.h — where a rank of a data-parallel job runs on its host: its own share of the
 * CPUs this process may use (or of one NUMA node's), read from the kernel (the affinity
 * mask, /sys/devices/system/node), so the ranks on one host do not trade cores and their
 * caches. Called before any thread is made: threads inherit the binding. */
#ifndef COIL_RUNTIME_PLACEMENT_H
#define COIL_RUNTIME_PLACEMENT_H

#include "base/base.h"

typedef enum BindMode { BIND_NONE, BIND_CORES, BIND_NUMA } BindMode;

/* "none", "cores", "numa"; false for anything else. */
bool bind_parse(const char *s, BindMode *m);
const char *bind_name(BindMode m);

/* Binds this process as m says for local rank k of n: cores, the k-th of n equal runs of
 * the CPUs it may use (the first ones one longer); numa, the CPUs of NUMA node k mod
 * nodes (among those it may use). *ncpu: how many it then has; desc: "CPUs 2-3" or
 * "CPUs 0-7 (NUMA node 1)". BIND_NONE changes nothing. */
bool bind_rank(BindMode m, int k, int n, int *ncpu, char *desc, size_t len, Err *e);

#endif
