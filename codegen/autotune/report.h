/* report.h — what the autotuner tells its user: a progress bar while it measures, a table
 * at the end (kernel, shape, candidates tried, default and best time, speed-up, choice),
 * and a JSON file with every candidate's configuration and time. */
#ifndef COIL_CODEGEN_AUTOTUNE_REPORT_H
#define COIL_CODEGEN_AUTOTUNE_REPORT_H

#include "codegen/autotune/tuner.h"

typedef struct TuneKernelReport {
    char name[64];     /* the first step's kernel ("gemm+k3_gelu", "k7_layer_norm") */
    char shape[96];    /* "128x1024x1024", "[128] x [1024]" */
    int steps;         /* steps of the model that share this kernel and shape */
    bool cached;       /* the choice came from the cache: nothing measured */
    TuneSpace space;
    TuneResult res;    /* trials are empty when cached */
    char choice[128];  /* tune_point_text of the best point */
    double best_s, default_s;
} TuneKernelReport;

typedef struct TuneReport {
    char device[160];
    char model[160];
    double seconds;    /* wall time of the whole tuning */
    int n, cap;
    TuneKernelReport *k;
} TuneReport;

/* A new entry (zeroed; NULL on out of memory). */
TuneKernelReport *tune_report_add(TuneReport *r);
void tune_report_free(TuneReport *r);

/* The table, fastest speed-ups first, then a total line. */
void tune_report_table(const TuneReport *r, FILE *f);
/* The JSON report as path, written whole or not at all; errors name the file. */
bool tune_report_json(const TuneReport *r, const char *path, Err *e);
/* The same document onto f (one kernel, one candidate a line); false when it failed. */
bool tune_report_write(FILE *f, const TuneReport *r);

/* A one-line progress bar on f (a terminal): kernels done of total, the time left
 * estimated from the time so far. Ends the line when done == total. */
void tune_progress(FILE *f, int done, int total, double elapsed_s, const char *what);

#endif
