/* tuner.h — the autotuner's search, the same for every device. A kernel's candidates are
 * a space of knobs, each listing its values with the heuristic's (the default) first; the
 * caller measures one point at a time (the median seconds of timed runs, or a wrong
 * result); the search is coordinate descent from the default, one knob at a time, for a
 * few sweeps. Every point measured is kept, for the report. */
#ifndef COIL_CODEGEN_AUTOTUNE_TUNER_H
#define COIL_CODEGEN_AUTOTUNE_TUNER_H

#include <stdio.h>

#include "ir/ir.h"

#define TUNE_MAX_KNOBS 8
#define TUNE_MAX_VALUES 12

typedef struct TuneKnob {
    const char *name;                   /* "kc" */
    int n;                              /* values; 1: nothing to choose */
    int64_t value[TUNE_MAX_VALUES];     /* value[0] is the default */
    const char *label[TUNE_MAX_VALUES]; /* how a value prints; NULL: the number */
    int needs, needs_at;                /* relevant only while knob `needs` is at index
                                           needs_at (-1: always) */
} TuneKnob;

typedef struct TuneSpace {
    int nknob;
    TuneKnob knob[TUNE_MAX_KNOBS];
} TuneSpace;

/* A candidate: an index into each knob's values. */
typedef struct TunePoint {
    int at[TUNE_MAX_KNOBS];
} TunePoint;

typedef enum TuneStatus { TUNE_OK, TUNE_WRONG, TUNE_FAILED } TuneStatus;

typedef struct TuneTrial {
    TunePoint pt;
    TuneStatus status;
    double seconds; /* the median of the timed runs (TUNE_OK) */
} TuneTrial;

/* Measure one candidate: its median seconds, or WRONG (its result disagrees with the
 * default's) or FAILED (it cannot run; e says why, for the log). */
typedef TuneStatus (*TuneMeasureFn)(void *ctx, const TunePoint *pt, double *seconds, Err *e);

typedef struct TuneResult {
    TunePoint best;
    double best_s, default_s;
    TuneTrial *trial; /* malloc'd, every point measured, the default first */
    int ntrial;
} TuneResult;

/* Building a space: knob k named, relevant while knob `needs` is at index needs_at (-1:
 * always), its values cleared; then its values appended, the default first (label NULL:
 * the number prints). */
void tune_knob(TuneSpace *sp, int k, const char *name, int needs, int needs_at);
void tune_add_value(TuneSpace *sp, int k, int64_t v, const char *label);

/* Knob k's value at pt. */
static inline int64_t tune_value(const TuneSpace *sp, const TunePoint *pt, int k)
{
    return sp->knob[k].value[pt->at[k]];
}

/* Coordinate descent from the default: for each relevant knob in turn, every other value
 * with the rest fixed; the fastest correct one (by more than 1%, so noise does not move
 * it) becomes the current point; sweeps repeat until one changes nothing or max_sweeps.
 * A winner other than the default is then timed against it alternately, three times
 * each, and kept only if it still wins by the margin (best_s, default_s: those medians).
 * The default must measure TUNE_OK (it is the reference), else false with e set. */
bool tune_descend(const TuneSpace *sp, TuneMeasureFn measure, void *ctx, int max_sweeps,
                  TuneResult *r, Err *e);
void tune_result_free(TuneResult *r);

/* "kc=512 split=cols": the relevant knobs that are not at their default; "default" when
 * none. tune_point_parse reads it back (false: a name or value this space lacks). */
void tune_point_text(const TuneSpace *sp, const TunePoint *pt, char *buf, size_t n);
bool tune_point_parse(const TuneSpace *sp, const char *text, TunePoint *pt);

/* Timing one candidate: run(ctx, i) performs run i (untimed preparation inside is fine)
 * and gives its seconds; one warm-up, then at least min_runs (3 when the warm-up took
 * over 50 ms) and until min_seconds of timed runs have passed (at most max_runs); the
 * median. */
typedef bool (*TuneRunFn)(void *ctx, int i, double *seconds, Err *e);
typedef struct TuneBudget {
    int min_runs, max_runs;
    double min_seconds;
} TuneBudget;
bool tune_time(TuneRunFn run, void *ctx, const TuneBudget *b, double *median, Err *e);

/* Whether a candidate's result (got) agrees with the default's (want), bytes of dtype dt:
 * floats within 1e-4 (f32) or 2e-2 (f16, bf16) of the reference's largest magnitude, NaN
 * and infinities where the reference has them; integers exactly. */
bool tune_agrees(DType dt, const void *got, const void *want, size_t bytes);

#endif
