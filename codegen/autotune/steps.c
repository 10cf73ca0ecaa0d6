/* steps.c — the walk over a Program's steps that every device's tuning shares: keys,
 * identical steps tuned once, the cache, the report, the replay in program order. */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/version.h"
#include "codegen/autotune/steps.h"

/* ---------------------------------------------------------------- naming and keys */

/* The step's loop IR with what differs between identical layers taken out: buffer
 * numbers renumbered by first use, kernel names and groups dropped, the step number. */
static char *canonical_step(const Program *p, int s)
{
    char *text = loop_print_step(p, s), *out = text ? malloc(strlen(text) + 1) : NULL;
    if (!out) {
        free(text);
        return NULL;
    }
    int seen[1024], nseen = 0;
    char *o = out;
    for (const char *c = text; *c;) {
        bool word = c == text || !(c[-1] == '_' || (c[-1] >= 'a' && c[-1] <= 'z') ||
                                   (c[-1] >= '0' && c[-1] <= '9'));
        if (word && strncmp(c, "buf", 3) == 0 && c[3] >= '0' && c[3] <= '9') {
            int b = (int)strtol(c + 3, (char **)&c, 10), i = 0;
            while (i < nseen && seen[i] != b)
                i++;
            if (i == nseen && nseen < 1024)
                seen[nseen++] = b;
            o += sprintf(o, "b%d", i);
        } else if (word && c[0] == 'k' && c[1] >= '0' && c[1] <= '9') {
            while (*c && *c != ' ' && *c != '\n')
                c++; /* a kernel's name */
        } else if (strncmp(c, "(group ", 7) == 0 || strncmp(c, "step ", 5) == 0) {
            while (*c && *c != ')' && *c != ':')
                c++;
            c += *c != 0;
        } else
            *o++ = *c++;
    }
    *o = 0;
    free(text);
    return out;
}

/* The step's kernel name and shape for the report. */
void tune_describe_step(const Program *p, int s, const SymBind *sb, TuneKernelReport *k)
{
    const Step *st = &p->step[s];
    if (st->kind == STEP_KERNEL) {
        const Kernel *kn = &p->kernel[st->kernel];
        snprintf(k->name, sizeof k->name, "%s", kn->name);
        int used = 0;
        for (int d = 0; d < kn->nouter + kn->ninner && used < (int)sizeof k->shape - 24; d++)
            used += snprintf(k->shape + used, sizeof k->shape - (size_t)used, "%s%lld",
                             d == 0 ? "" : d == kn->nouter ? " x " : ",",
                             (long long)dim_value(kn->size[d], sb));
        return;
    }
    const Gemm *g = &st->gemm;
    int64_t b = 1;
    for (int d = 0; d < g->nbatch; d++)
        b *= dim_value(g->batch[d], sb);
    snprintf(k->name, sizeof k->name, "gemm%s%s", g->epilogue >= 0 ? "+" : "",
             g->epilogue >= 0 ? p->kernel[g->epilogue].name : "");
    snprintf(k->shape, sizeof k->shape, "%lldx%lldx%lld", (long long)dim_value(g->m, sb), (long long)dim_value(g->n, sb),
             (long long)dim_value(g->k, sb));
    if (b > 1) {
        char tail[32];
        snprintf(tail, sizeof tail, " (x%lld)", (long long)b);
        strncat(k->shape, tail, sizeof k->shape - strlen(k->shape) - 1);
    }
}

/* ---------------------------------------------------------------- what a step touches */

static void add_buf(int *list, int *n, int max, int b)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == b)
            return;
    if (*n < max)
        list[(*n)++] = b;
}

/* The kernel step s runs (its own, or its GEMM's epilogue; -1: none). */
static int step_kernel(const Step *st)
{
    return st->kind == STEP_KERNEL ? st->kernel : st->kind == STEP_GEMM ? st->gemm.epilogue : -1;
}

int tune_step_writes(const Program *p, int s, int *w, bool *compare, int max)
{
    const Step *st = &p->step[s];
    const Gemm *g = &st->gemm;
    int n = 0, k = step_kernel(st);
    if (st->kind == STEP_GEMM)
        add_buf(w, &n, max, g->c.buf);
    if (st->kind == STEP_ATTENTION)
        add_buf(w, &n, max, st->attn.o.buf);
    for (int t = 0; k >= 0 && t < p->kernel[k].nstmt; t++)
        if (p->kernel[k].stmt[t].kind == ST_STORE)
            add_buf(w, &n, max, p->kernel[k].stmt[t].buf);
    for (int i = 0; i < n; i++)
        compare[i] = !(st->kind == STEP_GEMM && w[i] == g->c.buf && g->epilogue >= 0 &&
                       g->epi_load >= 0 && !g->c_live);
    return n;
}

int tune_step_reads(const Program *p, int s, int *r, int max)
{
    const Step *st = &p->step[s];
    int n = 0, k = step_kernel(st);
    if (st->kind == STEP_GEMM)
        add_buf(r, &n, max, st->gemm.a.buf), add_buf(r, &n, max, st->gemm.b.buf);
    for (int x = 0; k >= 0 && x < p->kernel[k].nlx; x++)
        if (p->kernel[k].lx[x].kind == LX_LOAD)
            add_buf(r, &n, max, (int)p->kernel[k].lx[x].i);
    return n;
}

/* The cache key: device, coil's version, the step's canonical text and sizes. */
static bool step_key(const Program *p, int s, const SymBind *sb, const char *device, char *key,
                     size_t n)
{
    char *text = canonical_step(p, s);
    if (!text)
        return false;
    uint64_t h = fnv1a_str(text);
    for (int i = 0; i < p->graph->nsym; i++) {
        char v[32];
        snprintf(v, sizeof v, "|%lld", (long long)sb->val[i]);
        h = fnv1a(h, v, strlen(v));
    }
    free(text);
    snprintf(key, n, "%s|coil %s|%016llx", device, COIL_VERSION_TEXT, (unsigned long long)h);
    return true;
}

/* ---------------------------------------------------------------- the steps */

typedef struct Seen {
    char key[256];
    TunePoint pt; /* the choice, in the step's space */
    int report;   /* index in the report, -1 */
} Seen;

/* Report entry for a newly decided kernel (NULL without a report or memory). */
static TuneKernelReport *report_kernel(const TuneTarget *t, const TuneOptions *o, int s,
                                       const TuneSpace *sp)
{
    TuneKernelReport *k = o->report ? tune_report_add(o->report) : NULL;
    if (k) {
        tune_describe_step(t->p, s, t->sb, k);
        k->space = *sp;
        k->steps = 1;
    }
    return k;
}

/* Why trial t lost to the winner w (measured in the same search). */
static void lost_because(const TuneTrial *t, const TuneTrial *w, char *why, size_t n)
{
    if (t->status == TUNE_WRONG)
        snprintf(why, n, "lost: its result disagrees with the default's");
    else if (t->status == TUNE_FAILED)
        snprintf(why, n, "lost: cannot run");
    else if (w && t->seconds >= w->seconds)
        snprintf(why, n, "lost: %.1f%% slower than the winner", (t->seconds / w->seconds - 1) * 100);
    else
        snprintf(why, n, "lost: faster than the winner's search time, but by less than the "
                 "margin over the point it was tried against, or not when timed back to back");
}

/* COIL_LOG: which candidate won (info) and every candidate's time and why it lost (debug). */
static void log_search(const TuneTarget *t, int s, const TuneSpace *sp, const TuneResult *res,
                       const char *choice)
{
    if (!coil_log_on(LOG_INFO))
        return;
    TuneKernelReport k;
    memset(&k, 0, sizeof k);
    tune_describe_step(t->p, s, t->sb, &k);
    coil_log(LOG_INFO, "autotune %s [%s]: %s won: %.1f us, the default %.1f us (%.2fx), of %d "
             "candidates", k.name, k.shape, choice, res->best_s * 1e6, res->default_s * 1e6,
             res->best_s > 0 ? res->default_s / res->best_s : 1, res->ntrial);
    const TuneTrial *w = NULL;
    for (int i = 0; i < res->ntrial; i++)
        if (memcmp(&res->trial[i].pt, &res->best, sizeof res->best) == 0)
            w = &res->trial[i];
    for (int i = 0; i < res->ntrial && coil_log_on(LOG_DEBUG); i++) {
        const TuneTrial *tr = &res->trial[i];
        char cfg[128], why[160] = "won";
        tune_point_text(sp, &tr->pt, cfg, sizeof cfg);
        if (tr != w)
            lost_because(tr, w, why, sizeof why);
        coil_log(LOG_DEBUG, "autotune %s [%s]: candidate %s: %.1f us: %s", k.name, k.shape, cfg,
                 tr->status == TUNE_OK ? tr->seconds * 1e6 : 0.0, why);
    }
}

static void log_cached(const TuneTarget *t, int s, const TuneEntry *hit)
{
    if (!coil_log_on(LOG_INFO))
        return;
    TuneKernelReport k;
    memset(&k, 0, sizeof k);
    tune_describe_step(t->p, s, t->sb, &k);
    coil_log(LOG_INFO, "autotune %s [%s]: %s, from the cache (nothing measured)", k.name,
             k.shape, hit->choice);
}

/* The choice measured for a step: cached, and reported. */
static bool keep_measured(const TuneTarget *t, const TuneOptions *o, int s, const TuneSpace *sp,
                          TuneResult *res, Seen *seen, Err *e)
{
    seen->pt = res->best;
    char choice[128];
    tune_point_text(sp, &res->best, choice, sizeof choice);
    log_search(t, s, sp, res, choice);
    if (o->cache && !tune_cache_put(o->cache, seen->key, choice, res->best_s, res->default_s)) {
        err_set(e, ERR_MEMORY, "autotune: out of memory");
        tune_result_free(res);
        return false;
    }
    TuneKernelReport *k = report_kernel(t, o, s, sp);
    if (!k) {
        tune_result_free(res);
        return true;
    }
    k->res = *res, k->best_s = res->best_s, k->default_s = res->default_s;
    snprintf(k->choice, sizeof k->choice, "%s", choice);
    seen->report = o->report->n - 1;
    return true;
}

/* The configuration of a step met for the first time: the cache's, else measured (and
 * cached), else the heuristics'. */
static bool decide(const TuneTarget *t, int s, const TuneSpace *sp, const TuneOptions *o,
                   Seen *seen, bool *measured, Err *e)
{
    seen->pt = (TunePoint){{0}}, seen->report = -1;
    if (sp->nknob == 0)
        return true; /* nothing to choose */
    const TuneEntry *hit = o->cache ? tune_cache_get(o->cache, seen->key) : NULL;
    TunePoint pt;
    if (hit && tune_point_parse(sp, hit->choice, &pt)) {
        seen->pt = pt;
        log_cached(t, s, hit);
        TuneKernelReport *k = report_kernel(t, o, s, sp);
        if (k) {
            k->cached = true, k->best_s = hit->best_s, k->default_s = hit->default_s;
            snprintf(k->choice, sizeof k->choice, "%s", hit->choice);
            seen->report = o->report->n - 1;
        }
        return true;
    }
    if (!o->measure)
        return true;
    TuneResult res;
    if (!t->search(t->ctx, s, sp, &o->budget, &res, e)) {
        tune_result_free(&res);
        return false;
    }
    *measured = true;
    return keep_measured(t, o, s, sp, &res, seen, e);
}

/* The keys of every step; how many distinct ones. */
static int step_keys(const TuneTarget *t, Seen *keys)
{
    int distinct = 0;
    for (int s = 0; s < t->p->nstep; s++) {
        if (!step_key(t->p, s, t->sb, t->device, keys[s].key, sizeof keys[s].key))
            keys[s].key[0] = 0;
        bool first = true;
        for (int u = 0; u < s && first; u++)
            first = strcmp(keys[u].key, keys[s].key) != 0;
        distinct += first;
    }
    return distinct;
}

/* The first step with s's key (s itself when none before it has). */
static int first_of(const Seen *seen, int s)
{
    int first = 0;
    while (first < s && strcmp(seen[first].key, seen[s].key) != 0)
        first++;
    return seen[s].key[0] ? first : s;
}

/* Whether any step will be measured: a first step of its key with something to choose
 * and no choice in the cache. */
static bool must_measure(const TuneTarget *t, const TuneOptions *o, const Seen *seen)
{
    for (int s = 0; o->measure && s < t->p->nstep; s++) {
        TuneSpace sp;
        if (first_of(seen, s) < s)
            continue;
        t->space(t->ctx, s, &sp);
        if (sp.nknob > 0 && !(o->cache && tune_cache_get(o->cache, seen[s].key)))
            return true;
    }
    return false;
}

static const char *step_label(const Program *p, int s)
{
    const Step *st = &p->step[s];
    return st->kind == STEP_KERNEL ? p->kernel[st->kernel].name
           : st->kind == STEP_GEMM ? "gemm" : "attention";
}

bool tune_steps(const TuneTarget *t, const TuneOptions *o, Err *e)
{
    const Program *p = t->p;
    if (o->report)
        snprintf(o->report->device, sizeof o->report->device, "%s", t->device);
    Seen *seen = calloc((size_t)p->nstep + 1, sizeof *seen);
    if (!seen) {
        err_set(e, ERR_MEMORY, "autotune: out of memory");
        return false;
    }
    int total = step_keys(t, seen), done = 0;
    double t0 = clock_seconds();
    /* Measuring runs the steps again, in order, so each reads real values; with every
     * choice in the cache the latest run's results stand and nothing runs. */
    bool ok = true, measured = false, replay = must_measure(t, o, seen);
    for (int s = 0; ok && s < p->nstep; s++) {
        int first = first_of(seen, s);
        TuneSpace sp;
        t->space(t->ctx, s, &sp);
        if (first == s) {
            ok = decide(t, s, &sp, o, &seen[s], &measured, e);
            if (o->progress && replay)
                tune_progress(stderr, ++done, total, clock_seconds() - t0, step_label(p, s));
        } else {
            seen[s].pt = seen[first].pt, seen[s].report = seen[first].report;
            if (seen[s].report >= 0)
                o->report->k[seen[s].report].steps++;
        }
        ok = ok && t->configure(t->ctx, s, &sp, &seen[s].pt, e) &&
             (!replay || t->run_step(t->ctx, s, e)); /* the next reads what it wrote */
    }
    if (o->report)
        o->report->seconds = clock_seconds() - t0;
    if (ok && measured && o->cache)
        ok = tune_cache_save(o->cache, e);
    free(seen);
    return ok;
}
