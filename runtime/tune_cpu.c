/* tune_cpu.c — measuring the CPU engine's candidates, step by step, in program order.
 *
 * Each step is timed alone, on the buffers a real run gives it: the steps before it have
 * just run (with their chosen configurations), the buffers it writes are restored before
 * every timed run (so an in-place kernel reads the same values each time), and the
 * weights it reads rotate between copies, so a candidate does not find them in L1/L2 as
 * no real run would. After the default candidate runs, what the step wrote is the
 * reference; a candidate whose results differ is rejected. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/coil/coil.h"
#include "runtime/tune_cpu.h"

#define MAX_TOUCHED 32          /* buffers a step writes, or weights it reads */
#define ROTATE_COPIES 3
#define ROTATE_MAX_BYTES (256ll << 20) /* weights larger than this are not copied */
#define TOL_F32 1e-4            /* relative to the reference's largest magnitude */
#define TOL_HALF 2e-2

/* One step under measurement. */
typedef struct StepRun {
    Engine *en;
    const Program *p;
    int s;
    const TuneSpace *sp;
    int nw;                       /* written buffers */
    int w[MAX_TOUCHED];
    bool compare[MAX_TOUCHED];    /* C of a fused GEMM whose C is dead is not a result */
    size_t bytes[MAX_TOUCHED];
    void *saved[MAX_TOUCHED], *ref[MAX_TOUCHED];
    int nr;                       /* rotated weights */
    int r[MAX_TOUCHED];
    void *orig[MAX_TOUCHED], *copy[MAX_TOUCHED][ROTATE_COPIES];
    TuneBudget budget;
} StepRun;

/* ---------------------------------------------------------------- what a step touches */

static void add_buf(int *list, int *n, int b)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == b)
            return;
    if (*n < MAX_TOUCHED)
        list[(*n)++] = b;
}

static void kernel_buffers(const Kernel *k, int *w, int *nw, int *rd, int *nrd)
{
    for (int t = 0; t < k->nstmt; t++)
        if (k->stmt[t].kind == ST_STORE)
            add_buf(w, nw, k->stmt[t].buf);
    for (int x = 0; x < k->nlx; x++)
        if (k->lx[x].kind == LX_LOAD)
            add_buf(rd, nrd, (int)k->lx[x].i);
}

static size_t buf_bytes(const Program *p, int b, const SymBind *sb)
{
    return (size_t)dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

/* Written buffers (with copies to restore them) and weights read (with rotated copies). */
static bool collect(StepRun *r, const SymBind *sb)
{
    const Step *st = &r->p->step[r->s];
    int rd[MAX_TOUCHED], nrd = 0, k = st->kind == STEP_KERNEL ? st->kernel : st->gemm.epilogue;
    if (st->kind == STEP_GEMM) {
        add_buf(r->w, &r->nw, st->gemm.c.buf);
        add_buf(rd, &nrd, st->gemm.a.buf);
        add_buf(rd, &nrd, st->gemm.b.buf);
    }
    if (k >= 0)
        kernel_buffers(&r->p->kernel[k], r->w, &r->nw, rd, &nrd);
    for (int i = 0; i < r->nw; i++) {
        const Gemm *g = &st->gemm;
        r->compare[i] = !(st->kind == STEP_GEMM && r->w[i] == g->c.buf && g->epilogue >= 0 &&
                          g->epi_load >= 0 && !g->c_live);
        r->bytes[i] = buf_bytes(r->p, r->w[i], sb);
        if (!(r->saved[i] = malloc(r->bytes[i] + 1)) || !(r->ref[i] = malloc(r->bytes[i] + 1)))
            return false;
        memcpy(r->saved[i], engine_buffer(r->en, r->w[i]), r->bytes[i]);
    }
    for (int i = 0; i < nrd; i++) {
        BufKind kind = r->p->buf[rd[i]].kind;
        size_t n = buf_bytes(r->p, rd[i], sb);
        if ((kind != BUF_PARAM && kind != BUF_CONST) || n * ROTATE_COPIES > ROTATE_MAX_BYTES)
            continue;
        int j = r->nr++;
        r->r[j] = rd[i], r->orig[j] = engine_buffer(r->en, rd[i]);
        for (int c = 0; c < ROTATE_COPIES; c++) {
            if (!(r->copy[j][c] = aligned_alloc(64, (n + 64) / 64 * 64)))
                return false;
            memcpy(r->copy[j][c], r->orig[j], n);
        }
    }
    return true;
}

static void release(StepRun *r)
{
    for (int i = 0; i < r->nw; i++)
        free(r->saved[i]), free(r->ref[i]);
    for (int j = 0; j < r->nr; j++) {
        engine_set_buffer(r->en, r->r[j], r->orig[j]);
        for (int c = 0; c < ROTATE_COPIES; c++)
            free(r->copy[j][c]);
    }
}

/* ---------------------------------------------------------------- candidates */

enum { K_LIB, K_FORM, K_KC, K_MC, K_SPLIT, K_EPI, K_PARTS };

static void knob(TuneSpace *sp, int k, const char *name, int needs, int needs_at)
{
    sp->knob[k] = (TuneKnob){.name = name, .needs = needs, .needs_at = needs_at};
    sp->nknob = sp->nknob > k + 1 ? sp->nknob : k + 1;
}

static void value(TuneSpace *sp, int k, int64_t v, const char *label)
{
    TuneKnob *kn = &sp->knob[k];
    kn->label[kn->n] = label;
    kn->value[kn->n++] = v;
}

/* A kernel: how many chunks its outer loop is cut into (fewer threads for small work). */
static void kernel_space(TuneSpace *sp, int threads)
{
    for (int k = 0; k < K_PARTS; k++)
        knob(sp, k, "-", -1, 0), value(sp, k, 0, NULL);
    knob(sp, K_PARTS, "parts", -1, 0);
    value(sp, K_PARTS, 0, "auto");
    for (int t = 1; t <= threads && sp->knob[K_PARTS].n < TUNE_MAX_VALUES; t *= 2)
        value(sp, K_PARTS, t, NULL);
    if (threads > 1 && (threads & (threads - 1)))
        value(sp, K_PARTS, threads, NULL);
}

/* A GEMM: OpenBLAS (its epilogue separate) or the generated kernels, and their blocking:
 * form, k block, macro block, thread split, epilogue fused in the tiles or separate. */
static void gemm_space(TuneSpace *sp, const Gemm *g, bool dot_layout, int64_t K, int threads)
{
    kernel_space(sp, threads);
    sp->knob[K_PARTS].n = 1; /* the epilogue's chunks: not worth a dimension */
    knob(sp, K_LIB, "lib", -1, 0);
    value(sp, K_LIB, 0, "generated"), value(sp, K_LIB, 1, "openblas");
    knob(sp, K_FORM, "form", K_LIB, 0);
    value(sp, K_FORM, GEMM_FORM_AUTO, "auto");
    if (dot_layout)
        value(sp, K_FORM, GEMM_FORM_DOT, "dot"), value(sp, K_FORM, GEMM_FORM_BCAST, "bcast");
    knob(sp, K_KC, "kc", K_LIB, 0);
    value(sp, K_KC, 0, "auto");
    for (int64_t kc = 256; kc <= 1024; kc *= 2)
        if (kc < K)
            value(sp, K_KC, kc, NULL);
    knob(sp, K_MC, "mc", K_LIB, 0);
    value(sp, K_MC, 0, "auto");
    for (int64_t mc = 2; mc <= 32; mc *= 2)
        value(sp, K_MC, mc, NULL);
    knob(sp, K_SPLIT, "split", K_LIB, 0);
    value(sp, K_SPLIT, GEMM_SPLIT_AUTO, "auto");
    if (threads > 1)
        value(sp, K_SPLIT, GEMM_SPLIT_ROWS, "rows"), value(sp, K_SPLIT, GEMM_SPLIT_COLS, "cols");
    knob(sp, K_EPI, "epilogue", K_LIB, 0);
    value(sp, K_EPI, 0, "fused");
    if (g->epilogue >= 0 && g->epi_load >= 0)
        value(sp, K_EPI, 1, "separate");
}

static StepConfig config_of(const TuneSpace *sp, const TunePoint *pt)
{
    return (StepConfig){
        .parts = (int)tune_value(sp, pt, K_PARTS),
        .path = tune_value(sp, pt, K_LIB) ? GEMM_PATH_BLAS : GEMM_PATH_AUTO,
        .tiling = {(GemmForm)tune_value(sp, pt, K_FORM), tune_value(sp, pt, K_KC),
                   tune_value(sp, pt, K_MC), (GemmSplit)tune_value(sp, pt, K_SPLIT),
                   tune_value(sp, pt, K_EPI) != 0},
    };
}

/* ---------------------------------------------------------------- measuring */

static bool timed_run(void *ctx, int i, double *seconds, Err *e)
{
    StepRun *r = ctx;
    for (int w = 0; w < r->nw; w++)
        memcpy(engine_buffer(r->en, r->w[w]), r->saved[w], r->bytes[w]);
    for (int j = 0; j < r->nr; j++)
        engine_set_buffer(r->en, r->r[j], r->copy[j][i % ROTATE_COPIES]);
    double t0 = clock_seconds();
    bool ok = engine_run_step(r->en, r->s, e);
    *seconds = clock_seconds() - t0;
    return ok;
}

/* Whether buffer w's values agree with the reference's within the dtype's tolerance. */
static bool agrees(const StepRun *r, int w)
{
    DType dt = r->p->buf[r->w[w]].dt;
    const void *got = engine_buffer(r->en, r->w[w]), *want = r->ref[w];
    int64_t n = (int64_t)(r->bytes[w] / dtype_info[dt].size);
    if (!dtype_info[dt].is_float)
        return memcmp(got, want, r->bytes[w]) == 0;
    double big = 0, tol = dt == DT_F32 ? TOL_F32 : TOL_HALF;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs(dtype_load(dt, want, i));
        big = v > big && v < INFINITY ? v : big;
    }
    for (int64_t i = 0; i < n; i++) {
        double a = dtype_load(dt, got, i), b = dtype_load(dt, want, i);
        bool same = isnan(a) ? isnan(b) : isinf(b) ? a == b : fabs(a - b) <= tol * big + 1e-30;
        if (!same)
            return false;
    }
    return true;
}

static TuneStatus measure(void *ctx, const TunePoint *pt, double *seconds, Err *e)
{
    StepRun *r = ctx;
    StepConfig c = config_of(r->sp, pt);
    engine_configure(r->en, r->s, &c);
    if (!tune_time(timed_run, r, &r->budget, seconds, e))
        return TUNE_FAILED;
    bool reference = pt->at[K_LIB] == 0 && memcmp(pt, &(TunePoint){{0}}, sizeof *pt) == 0;
    for (int w = 0; w < r->nw; w++) {
        if (reference)
            memcpy(r->ref[w], engine_buffer(r->en, r->w[w]), r->bytes[w]);
        else if (r->compare[w] && !agrees(r, w))
            return TUNE_WRONG;
    }
    return TUNE_OK;
}

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
static void describe(const Program *p, int s, const SymBind *sb, TuneKernelReport *k)
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

void tune_cpu_device(char *buf, size_t n, int threads)
{
    char line[4096], model[128] = "unknown cpu";
    uint64_t flags = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        colon[strcspn(colon, "\n")] = 0;
        if (strncmp(line, "model name", 10) == 0)
            snprintf(model, sizeof model, "%s", colon + 2);
        else if (strncmp(line, "flags", 5) == 0 && !flags)
            flags = tune_hash(colon + 1);
    }
    if (f)
        fclose(f);
    snprintf(buf, n, "cpu %s (flags %08llx) threads %d", model,
             (unsigned long long)(flags & 0xffffffffu), threads);
}

/* The cache key: device, coil's version, the step's canonical text and sizes. */
static bool step_key(const Program *p, int s, const SymBind *sb, const char *device, char *key,
                     size_t n)
{
    char *text = canonical_step(p, s);
    if (!text)
        return false;
    uint64_t h = tune_hash(text);
    for (int i = 0; i < p->graph->nsym; i++) {
        char v[32];
        snprintf(v, sizeof v, "|%lld", (long long)sb->val[i]);
        for (const char *c = v; *c; c++)
            h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    }
    free(text);
    snprintf(key, n, "%s|coil %s|%016llx", device, coil_version(), (unsigned long long)h);
    return true;
}

/* ---------------------------------------------------------------- the steps */

typedef struct Seen {
    char key[256];
    StepConfig cfg;
    int report; /* index in the report, -1 */
} Seen;

/* Measure step s: descent over its space, the fastest correct point configured. */
static bool tune_step(Engine *en, const Program *p, int s, const TuneSpace *sp,
                      const TuneCpuOptions *o, TuneResult *res, Err *e)
{
    StepRun r = {.en = en, .p = p, .s = s, .sp = sp, .budget = o->budget};
    if (r.budget.max_runs == 0)
        r.budget = (TuneBudget){5, 200, 0.01};
    bool ok = collect(&r, engine_symbols(en));
    if (!ok)
        err_set(e, ERR_INPUT, "autotune: out of memory copying step %d's buffers", s);
    ok = ok && tune_descend(sp, measure, &r, 2, res, e);
    for (int w = 0; w < r.nw; w++) /* as before the step: it runs once more, chosen */
        memcpy(engine_buffer(en, r.w[w]), r.saved[w], r.bytes[w]);
    release(&r);
    return ok;
}

static void space_of(const Engine *en, const Program *p, int s, TuneSpace *sp)
{
    const Step *st = &p->step[s];
    const SymBind *sb = engine_symbols(en);
    memset(sp, 0, sizeof *sp);
    if (st->kind == STEP_KERNEL)
        kernel_space(sp, engine_threads(en));
    else if (st->kind == STEP_GEMM && engine_can_tile(en, s)) {
        bool dot = gemm_tiled_dot_layout(&st->gemm, engine_buffers(en), sb);
        gemm_space(sp, &st->gemm, dot, dim_value(st->gemm.k, sb), engine_threads(en));
    }
}

/* Report entry for a newly decided kernel (NULL without a report or memory). */
static TuneKernelReport *report_kernel(const TuneCpuOptions *o, const Program *p, int s,
                                       const SymBind *sb, const TuneSpace *sp)
{
    TuneKernelReport *k = o->report ? tune_report_add(o->report) : NULL;
    if (k) {
        describe(p, s, sb, k);
        k->space = *sp;
        k->steps = 1;
    }
    return k;
}

/* The configuration of a step met for the first time: the cache's, else measured (and
 * cached), else the heuristics'. */
static bool decide(Engine *en, const Program *p, int s, const TuneCpuOptions *o,
                   const char *key, Seen *seen, bool *measured, Err *e)
{
    TuneSpace sp;
    space_of(en, p, s, &sp);
    seen->cfg = (StepConfig){0}, seen->report = -1;
    if (sp.nknob == 0)
        return true; /* nothing to choose */
    const TuneEntry *hit = o->cache ? tune_cache_get(o->cache, key) : NULL;
    TunePoint pt;
    if (hit && tune_point_parse(&sp, hit->choice, &pt)) {
        seen->cfg = config_of(&sp, &pt);
        TuneKernelReport *k = report_kernel(o, p, s, engine_symbols(en), &sp);
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
    if (!tune_step(en, p, s, &sp, o, &res, e)) {
        tune_result_free(&res);
        return false;
    }
    *measured = true;
    seen->cfg = config_of(&sp, &res.best);
    char choice[128];
    tune_point_text(&sp, &res.best, choice, sizeof choice);
    if (o->cache && !tune_cache_put(o->cache, key, choice, res.best_s, res.default_s)) {
        err_set(e, ERR_INPUT, "autotune: out of memory");
        tune_result_free(&res);
        return false;
    }
    TuneKernelReport *k = report_kernel(o, p, s, engine_symbols(en), &sp);
    if (!k) {
        tune_result_free(&res);
        return true;
    }
    k->res = res, k->best_s = res.best_s, k->default_s = res.default_s;
    snprintf(k->choice, sizeof k->choice, "%s", choice);
    seen->report = o->report->n - 1;
    return true;
}

/* The keys of every step; how many distinct ones. */
static int step_keys(const Engine *en, const Program *p, const char *device, Seen *keys)
{
    int distinct = 0;
    for (int s = 0; s < p->nstep; s++) {
        if (!step_key(p, s, engine_symbols(en), device, keys[s].key, sizeof keys[s].key))
            keys[s].key[0] = 0;
        bool first = true;
        for (int t = 0; t < s && first; t++)
            first = strcmp(keys[t].key, keys[s].key) != 0;
        distinct += first;
    }
    return distinct;
}

/* Whether any step will be measured: a first step of its key with something to choose
 * and no choice in the cache. */
static bool must_measure(const Engine *en, const Program *p, const TuneCpuOptions *o,
                         const Seen *seen)
{
    for (int s = 0; o->measure && s < p->nstep; s++) {
        int first = 0;
        while (first < s && strcmp(seen[first].key, seen[s].key) != 0)
            first++;
        TuneSpace sp;
        if (first < s)
            continue;
        space_of(en, p, s, &sp);
        if (sp.nknob > 0 && !(o->cache && tune_cache_get(o->cache, seen[s].key)))
            return true;
    }
    return false;
}

bool tune_cpu(Engine *en, const Program *p, const TuneCpuOptions *o, Err *e)
{
    if (!engine_symbols(en)) {
        err_set(e, ERR_USAGE, "autotune: run the engine once first (the sizes come from a run)");
        return false;
    }
    char device[160];
    tune_cpu_device(device, sizeof device, engine_threads(en));
    if (o->report)
        snprintf(o->report->device, sizeof o->report->device, "%s", device);
    Seen *seen = calloc((size_t)p->nstep + 1, sizeof *seen);
    if (!seen) {
        err_set(e, ERR_INPUT, "autotune: out of memory");
        return false;
    }
    int total = step_keys(en, p, device, seen), done = 0;
    double t0 = clock_seconds();
    /* Measuring runs the steps again, in order, so each reads real values; with every
     * choice in the cache the latest run's results stand and nothing runs. */
    bool ok = true, measured = false, replay = must_measure(en, p, o, seen);
    for (int s = 0; ok && s < p->nstep; s++) {
        int first = 0;
        while (first < s && strcmp(seen[first].key, seen[s].key) != 0)
            first++;
        if (first == s || !seen[s].key[0]) {
            ok = decide(en, p, s, o, seen[s].key, &seen[s], &measured, e);
            if (o->progress && replay)
                tune_progress(stderr, ++done, total, clock_seconds() - t0, p->step[s].kind == STEP_KERNEL
                                                                     ? p->kernel[p->step[s].kernel].name : "gemm");
        } else {
            seen[s].cfg = seen[first].cfg, seen[s].report = seen[first].report;
            if (seen[s].report >= 0)
                o->report->k[seen[s].report].steps++;
        }
        engine_configure(en, s, &seen[s].cfg);
        ok = ok && (!replay || engine_run_step(en, s, e)); /* the next reads what it wrote */
    }
    if (o->report)
        o->report->seconds = clock_seconds() - t0;
    if (ok && measured && o->cache)
        ok = tune_cache_save(o->cache, e);
    free(seen);
    return ok;
}
