/* report.c — the autotuner's table, JSON report and progress bar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"
#include "codegen/autotune/report.h"

TuneKernelReport *tune_report_add(TuneReport *r)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        TuneKernelReport *k = realloc(r->k, (size_t)cap * sizeof *k);
        if (!k)
            return NULL;
        r->k = k, r->cap = cap;
    }
    TuneKernelReport *k = &r->k[r->n++];
    memset(k, 0, sizeof *k);
    return k;
}

void tune_report_free(TuneReport *r)
{
    for (int i = 0; i < r->n; i++)
        tune_result_free(&r->k[i].res);
    free(r->k);
    *r = (TuneReport){0};
}

static double speedup(const TuneKernelReport *k)
{
    return k->best_s > 0 ? k->default_s / k->best_s : 1;
}

/* Time saved per model run: the kernel's gain times the steps that share it. */
static double saved(const TuneKernelReport *k) { return (k->default_s - k->best_s) * k->steps; }

static int by_saved(const void *a, const void *b)
{
    double x = saved(*(TuneKernelReport *const *)a), y = saved(*(TuneKernelReport *const *)b);
    return (x < y) - (x > y);
}

void tune_report_table(const TuneReport *r, FILE *f)
{
    TuneKernelReport **order = malloc((size_t)(r->n + 1) * sizeof *order);
    if (!order)
        return;
    for (int i = 0; i < r->n; i++)
        order[i] = &r->k[i];
    qsort(order, (size_t)r->n, sizeof *order, by_saved);
    fprintf(f, "%-28s %-20s %5s %6s %11s %11s %8s  %s\n", "kernel", "shape", "steps", "tried",
            "default", "best", "speed-up", "choice");
    double def = 0, best = 0;
    for (int i = 0; i < r->n; i++) {
        const TuneKernelReport *k = order[i];
        char tried[16];
        snprintf(tried, sizeof tried, k->cached ? "cache" : "%d", k->res.ntrial);
        fprintf(f, "%-28.28s %-20.20s %5d %6s %9.1fus %9.1fus %7.2fx  %s\n", k->name, k->shape,
                k->steps, tried, k->default_s * 1e6, k->best_s * 1e6, speedup(k), k->choice);
        def += k->default_s * k->steps, best += k->best_s * k->steps;
    }
    fprintf(f, "%d kernels; summed over the model's steps: default %.3f ms, tuned %.3f ms (%.2fx); "
            "tuning took %.1f s\n", r->n, def * 1e3, best * 1e3, best > 0 ? def / best : 1,
            r->seconds);
    free(order);
}

static const char *status_name(TuneStatus s)
{
    return s == TUNE_OK ? "ok" : s == TUNE_WRONG ? "wrong result" : "failed";
}

/* x to the nearest 1/scale: all a reader needs of a ratio or a wall time, in few digits. */
static double rounded(double x, double scale) { return round(x * scale) / scale; }

/* One trial: its configuration, status and (when it ran) median seconds. */
static void json_trial(JsonWriter *w, const TuneSpace *sp, const TuneTrial *t)
{
    char cfg[128];
    tune_point_text(sp, &t->pt, cfg, sizeof cfg);
    json_newline(w);
    json_begin_object(w);
    json_field_string(w, "config", cfg);
    json_field_string(w, "status", status_name(t->status));
    if (t->status == TUNE_OK)
        json_field_double(w, "seconds", t->seconds);
    json_end_object(w);
}

static void json_kernel(JsonWriter *w, const TuneKernelReport *k)
{
    json_newline(w);
    json_begin_object(w);
    json_field_string(w, "kernel", k->name);
    json_field_string(w, "shape", k->shape);
    json_field_int(w, "steps", k->steps);
    json_field_bool(w, "cached", k->cached);
    json_field_double(w, "default_s", k->default_s);
    json_field_double(w, "best_s", k->best_s);
    json_field_double(w, "speedup", rounded(speedup(k), 1e4));
    json_field_string(w, "choice", k->choice);
    json_newline(w);
    json_key(w, "candidates");
    json_begin_array(w);
    for (int i = 0; i < k->res.ntrial; i++)
        json_trial(w, &k->space, &k->res.trial[i]);
    json_end_array(w);
    json_end_object(w);
}

bool tune_report_write(FILE *f, const TuneReport *r)
{
    JsonWriter w;
    json_writer_init(&w, f);
    json_begin_object(&w);
    json_field_string(&w, "format", "coil-autotune-report");
    json_field_string(&w, "device", r->device);
    json_field_string(&w, "model", r->model);
    json_field_double(&w, "seconds", rounded(r->seconds, 1e3));
    json_newline(&w);
    json_key(&w, "kernels");
    json_begin_array(&w);
    for (int i = 0; i < r->n; i++)
        json_kernel(&w, &r->k[i]);
    json_newline(&w);
    json_end_array(&w);
    json_end_object(&w);
    return json_writer_done(&w);
}

bool tune_report_json(const TuneReport *r, const char *path, Err *e)
{
    AtomicFile af;
    return atomic_open(&af, path, e) && atomic_close(&af, tune_report_write(af.f, r), e);
}

void tune_progress(FILE *f, int done, int total, double elapsed_s, const char *what)
{
    enum { WIDTH = 30 };
    int fill = total > 0 ? done * WIDTH / total : WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = 0;
    double left = done > 0 ? elapsed_s / done * (total - done) : 0;
    fprintf(f, "\rautotune [%s] %d/%d kernels, %.0f s left  %-24.24s", bar, done, total, left,
            what ? what : "");
    if (done == total)
        fputs("\n", f);
    fflush(f);
}
