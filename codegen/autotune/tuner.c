/* tuner.c — coordinate descent over a TuneSpace, and the timing of one candidate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "codegen/autotune/tuner.h"

/* A candidate whose warm-up run takes longer than this is timed 3 times, not min_runs:
 * such a run is long enough to be steady, and GPT-2's vocabulary GEMM has 20 candidates. */
#define TUNE_SLOW_S 0.05

/* A candidate must beat the current point by this fraction to replace it. */
#define TUNE_MARGIN 0.01

static bool relevant(const TuneSpace *sp, const TunePoint *pt, int k)
{
    const TuneKnob *kn = &sp->knob[k];
    return kn->n > 1 && (kn->needs < 0 || pt->at[kn->needs] == kn->needs_at);
}

/* Irrelevant knobs at their default, so one candidate has one point. */
static TunePoint canonical(const TuneSpace *sp, TunePoint pt)
{
    for (int k = 0; k < sp->nknob; k++)
        if (!relevant(sp, &pt, k))
            pt.at[k] = 0;
    return pt;
}

static const TuneTrial *find_trial(const TuneResult *r, const TunePoint *pt)
{
    for (int i = 0; i < r->ntrial; i++)
        if (memcmp(&r->trial[i].pt, pt, sizeof *pt) == 0)
            return &r->trial[i];
    return NULL;
}

/* Measure pt once (a point seen before is not measured again) and keep the trial. */
static const TuneTrial *trial(const TuneSpace *sp, TuneResult *r, const TunePoint *pt,
                              TuneMeasureFn measure, void *ctx, Err *e)
{
    const TuneTrial *seen = find_trial(r, pt);
    if (seen)
        return seen;
    TuneTrial *grown = realloc(r->trial, (size_t)(r->ntrial + 1) * sizeof *grown);
    if (!grown) {
        err_set(e, ERR_MEMORY, "autotune: out of memory");
        return NULL;
    }
    r->trial = grown;
    TuneTrial *t = &r->trial[r->ntrial++];
    Err why = {0};
    *t = (TuneTrial){.pt = *pt, .seconds = 0};
    t->status = measure(ctx, pt, &t->seconds, &why);
    if (t->status == TUNE_FAILED && coil_log_on(LOG_DEBUG)) { /* the report keeps no reason */
        char cfg[128];
        tune_point_text(sp, pt, cfg, sizeof cfg);
        coil_log(LOG_DEBUG, "autotune: candidate %s cannot run: %s", cfg,
                 why.msg[0] ? why.msg : "no reason given");
    }
    return t;
}

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* The search's winner against the default once more, alternately, three times each: a
 * win found among many noisy measurements must hold up back to back before it counts.
 * Keeps the default when it does not. */
static void confirm(const TuneSpace *sp, TuneResult *r, TuneMeasureFn measure, void *ctx)
{
    TunePoint def = {{0}};
    double d[3], b[3];
    for (int i = 0; i < 3; i++) {
        Err ignore = {0};
        if (measure(ctx, &def, &d[i], &ignore) != TUNE_OK ||
            measure(ctx, &r->best, &b[i], &ignore) != TUNE_OK)
            d[i] = 0, b[i] = 1; /* cannot be compared: the default stays */
    }
    r->default_s = median3(d[0], d[1], d[2]);
    r->best_s = median3(b[0], b[1], b[2]);
    bool held = r->best_s < r->default_s * (1 - TUNE_MARGIN);
    if (coil_log_on(LOG_DEBUG)) {
        char cfg[128];
        tune_point_text(sp, &r->best, cfg, sizeof cfg);
        coil_log(LOG_DEBUG, "autotune: %s against the default, back to back: %.1f us vs %.1f us: "
                 "%s%.0f%% margin%s", cfg, r->best_s * 1e6, r->default_s * 1e6,
                 held ? "faster by the " : "not faster by the ", TUNE_MARGIN * 100,
                 held ? ": it wins" : ", so the default stays");
    }
    if (!held)
        r->best = def, r->best_s = r->default_s;
}

bool tune_descend(const TuneSpace *sp, TuneMeasureFn measure, void *ctx, int max_sweeps,
                  TuneResult *r, Err *e)
{
    *r = (TuneResult){0};
    TunePoint cur = {{0}};
    Err why = {0};
    r->trial = malloc(sizeof *r->trial);
    if (!r->trial) {
        err_set(e, ERR_MEMORY, "autotune: out of memory");
        return false;
    }
    r->ntrial = 1;
    r->trial[0] = (TuneTrial){.pt = cur};
    r->trial[0].status = measure(ctx, &cur, &r->trial[0].seconds, &why);
    if (r->trial[0].status != TUNE_OK) {
        err_set(e, ERR_INPUT, "autotune: the default candidate %s: %s",
                r->trial[0].status == TUNE_WRONG ? "disagrees with itself" : "cannot run",
                why.msg[0] ? why.msg : "no reason given");
        return false;
    }
    double cur_s = r->default_s = r->trial[0].seconds;
    for (int sweep = 0; sweep < max_sweeps; sweep++) {
        bool moved = false;
        for (int k = 0; k < sp->nknob; k++) {
            if (!relevant(sp, &cur, k))
                continue;
            TunePoint along = cur;
            double along_s = cur_s;
            for (int v = 0; v < sp->knob[k].n; v++) {
                TunePoint pt = cur;
                pt.at[k] = v;
                pt = canonical(sp, pt);
                const TuneTrial *t = trial(sp, r, &pt, measure, ctx, e);
                if (!t)
                    return false;
                if (t->status == TUNE_OK && t->seconds < along_s * (1 - TUNE_MARGIN))
                    along = pt, along_s = t->seconds;
            }
            if (memcmp(&along, &cur, sizeof cur) != 0)
                cur = along, cur_s = along_s, moved = true;
        }
        if (!moved)
            break;
    }
    r->best = cur, r->best_s = cur_s;
    if (memcmp(&cur, &(TunePoint){{0}}, sizeof cur) != 0)
        confirm(sp, r, measure, ctx);
    return true;
}

void tune_knob(TuneSpace *sp, int k, const char *name, int needs, int needs_at)
{
    sp->knob[k] = (TuneKnob){.name = name, .needs = needs, .needs_at = needs_at};
    sp->nknob = sp->nknob > k + 1 ? sp->nknob : k + 1;
}

void tune_add_value(TuneSpace *sp, int k, int64_t v, const char *label)
{
    TuneKnob *kn = &sp->knob[k];
    if (kn->n < TUNE_MAX_VALUES)
        kn->label[kn->n] = label, kn->value[kn->n++] = v;
}

void tune_result_free(TuneResult *r)
{
    free(r->trial);
    *r = (TuneResult){0};
}

static void value_text(const TuneKnob *kn, int at, char *buf, size_t n)
{
    if (kn->label[at])
        snprintf(buf, n, "%s", kn->label[at]);
    else
        snprintf(buf, n, "%lld", (long long)kn->value[at]);
}

void tune_point_text(const TuneSpace *sp, const TunePoint *pt, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < sp->nknob && used < n; k++) {
        if (pt->at[k] == 0 || !relevant(sp, pt, k))
            continue;
        char v[32];
        value_text(&sp->knob[k], pt->at[k], v, sizeof v);
        used += (size_t)snprintf(buf + used, n - used, "%s%s=%s", used ? " " : "",
                                 sp->knob[k].name, v);
    }
    if (!buf[0])
        snprintf(buf, n, "default");
}

/* The index of `value` (its text) among knob kn's values, or -1. */
static int find_value(const TuneKnob *kn, const char *value, size_t len)
{
    for (int v = 0; v < kn->n; v++) {
        char t[32];
        value_text(kn, v, t, sizeof t);
        if (strlen(t) == len && memcmp(t, value, len) == 0)
            return v;
    }
    return -1;
}

bool tune_point_parse(const TuneSpace *sp, const char *text, TunePoint *pt)
{
    *pt = (TunePoint){{0}};
    if (strcmp(text, "default") == 0)
        return true;
    for (const char *s = text; *s;) {
        const char *eq = strchr(s, '='), *end = strchr(s, ' ');
        end = end ? end : s + strlen(s);
        if (!eq || eq > end)
            return false;
        int k = 0;
        while (k < sp->nknob && (strlen(sp->knob[k].name) != (size_t)(eq - s) ||
                                 memcmp(sp->knob[k].name, s, (size_t)(eq - s)) != 0))
            k++;
        if (k == sp->nknob || (pt->at[k] = find_value(&sp->knob[k], eq + 1, (size_t)(end - eq - 1))) < 0)
            return false;
        s = *end ? end + 1 : end;
    }
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bool tune_time(TuneRunFn run, void *ctx, const TuneBudget *b, double *median, Err *e)
{
    double warm, *t = malloc((size_t)(b->max_runs > 0 ? b->max_runs : 1) * sizeof *t), total = 0;
    if (!t) {
        err_set(e, ERR_MEMORY, "autotune: out of memory");
        return false;
    }
    bool ok = run(ctx, 0, &warm, e);
    int n = 0, least = warm > TUNE_SLOW_S && b->min_runs > 3 ? 3 : b->min_runs;
    while (ok && n < b->max_runs && (n < least || total < b->min_seconds)) {
        ok = run(ctx, n + 1, &t[n], e);
        total += t[n++];
    }
    if (ok) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        *median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    }
    free(t);
    return ok;
}


/* Relative to the reference's largest finite magnitude: candidates sum in other orders. */
#define TOL_F32 1e-4
#define TOL_HALF 2e-2

bool tune_agrees(DType dt, const void *got, const void *want, size_t bytes)
{
    int64_t n = (int64_t)(bytes / dtype_info[dt].size);
    if (!dtype_info[dt].is_float)
        return memcmp(got, want, bytes) == 0;
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
