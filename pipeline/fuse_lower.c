/* fuse_lower.c — the fuse and lower stages: plan fusion, lower the plan, and while lowering
 * marks nodes it could not lower as planned, plan again with those nodes on their own. */
#include <stdlib.h>

#include "base/log.h"
#include "pipeline/fuse_lower.h"

/* One plan made and lowered: the program, or NULL with *nretry nodes marked in force for
 * the next plan (or e set). fuse_s adds the planning's seconds. */
static Program *plan_and_lower(const Graph *g, uint8_t *force, const LowerOptions *o,
                               int *nretry, double *fuse_s, Err *e)
{
    Fusion f;
    FuseOptions fo = {o && o->no_fusion, force, o ? o->max_fused : 0};
    *nretry = 0;
    double t0 = clock_seconds();
    bool planned = fuse_plan(g, &fo, &f, e);
    *fuse_s += clock_seconds() - t0;
    if (!planned)
        return NULL;
    Program *p = lower_fused(g, &f, force, nretry, e);
    if (p && o && o->plan)
        *o->plan = f; /* the caller frees it */
    else
        fuse_free(&f);
    return p;
}

/* COIL_LOG=info: what lowering made, and how often a plan had to be made again. */
static void log_lowered(const Graph *g, const Program *p, int tries, double fuse_s, double t0)
{
    int gemms = 0;
    for (int s = 0; s < p->nstep; s++)
        gemms += p->step[s].kind == STEP_GEMM;
    coil_log(LOG_INFO, "lower '%s': %d steps (%d kernels, %d GEMMs), %d buffers in %.3f ms "
             "(fusion planning %.3f ms, %d plan%s: %s)", g->name ? g->name : "graph", p->nstep,
             p->nkernel, gemms, p->nbuf, (clock_seconds() - t0) * 1e3, fuse_s * 1e3, tries,
             tries == 1 ? "" : "s", tries == 1 ? "lowered as planned"
             : "nodes a group could not lower were given groups of their own");
}

Program *fuse_and_lower(const Graph *g, const LowerOptions *o, Err *e)
{
    uint8_t *force = calloc((size_t)g->nnode + 1, 1); /* FORCE_*: all FORCE_NONE at first */
    Program *p = NULL;
    double t0 = clock_seconds(), fuse_s = 0;
    if (!force) {
        err_set(e, ERR_MEMORY, "lowering: out of memory");
        return NULL;
    }
    /* each plan splits off at least one node, so there are at most nnode + 1 plans */
    int tries = 0;
    for (int nretry = 1; !p && nretry && err_ok(e) && tries <= g->nnode; tries++)
        p = plan_and_lower(g, force, o, &nretry, &fuse_s, e);
    if (!p && err_ok(e))
        err_set(e, ERR_INTERNAL, "lowering: graph '%s' found no plan to lower", g->name);
    free(force);
    if (o && o->fuse_s)
        *o->fuse_s = fuse_s;
    if (p && coil_log_on(LOG_INFO))
        log_lowered(g, p, tries, fuse_s, t0);
    return p;
}
