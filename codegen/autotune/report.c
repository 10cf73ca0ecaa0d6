/* report.c — the autotuner's table, JSON report and progress bar. */
#include <stdlib.h>
#include <string.h>

#include "codegen/autotune/report.h"
#include "runtime/json.h"

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

static void json_kernel(FILE *f, const TuneKernelReport *k)
{
    fputs("    {\"kernel\": ", f);
    json_write_string(f, k->name);
    fputs(", \"shape\": ", f);
    json_write_string(f, k->shape);
    fprintf(f, ", \"steps\": %d, \"cached\": %s, \"default_s\": %.9g, \"best_s\": %.9g, "
            "\"speedup\": %.4f, \"choice\": ", k->steps, k->cached ? "true" : "false",
            k->default_s, k->best_s, speedup(k));
    json_write_string(f, k->choice);
    fputs(",\n     \"candidates\": [", f);
    for (int i = 0; i < k->res.ntrial; i++) {
        const TuneTrial *t = &k->res.trial[i];
        char cfg[128];
        tune_point_text(&k->space, &t->pt, cfg, sizeof cfg);
        fputs(i ? ",\n       {\"config\": " : "\n       {\"config\": ", f);
        json_write_string(f, cfg);
        fprintf(f, ", \"status\": \"%s\"", status_name(t->status));
        if (t->status == TUNE_OK)
            fprintf(f, ", \"seconds\": %.9g", t->seconds);
        fputs("}", f);
    }
    fputs("]}", f);
}

bool tune_report_json(const TuneReport *r, const char *path, Err *e)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        err_set(e, ERR_INPUT, "%s: cannot write the autotune report", path);
        return false;
    }
    fputs("{\"format\": \"coil-autotune-report\", \"device\": ", f);
    json_write_string(f, r->device);
    fputs(", \"model\": ", f);
    json_write_string(f, r->model);
    fprintf(f, ", \"seconds\": %.3f,\n  \"kernels\": [\n", r->seconds);
    for (int i = 0; i < r->n; i++) {
        json_kernel(f, &r->k[i]);
        fputs(i + 1 < r->n ? ",\n" : "\n", f);
    }
    fputs("  ]}\n", f);
    bool ok = fclose(f) == 0;
    if (!ok)
        err_set(e, ERR_INPUT, "%s: cannot write the autotune report", path);
    return ok;
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
