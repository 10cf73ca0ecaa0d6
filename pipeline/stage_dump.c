/* stage_dump.c — what each stage of the compile pipeline writes into COIL_DEBUG_DIR:
 * IR text, the fusion plan and its picture, the loop IR, CUDA C, and as JSON the memory
 * plan, the compile-time breakdown and (through the autotuner's report) its decisions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug_dir.h"
#include "base/json.h"
#include "codegen/fusion_dot.h"
#include "pipeline/stage_dump.h"

#define MAX_TIMES 64

typedef struct Timed {
    const char *name; /* a pass's or stage's name: static strings */
    double seconds;
} Timed;

struct CompileDebug {
    DebugDir *dir;
    char model[128];
    Timed pass[MAX_TIMES], stage[MAX_TIMES];
    int npass, nstage;
    double mark;        /* the passes: when the last one (or its file) ended */
    int times_file;     /* compile-time.json's number (-1: not written yet) */
    SymBind planned;    /* the sizes of the last memory plan written */
    bool has_plan;
    TuneReport report;  /* tuning's, when the caller keeps none */
};

CompileDebug *compile_debug_open(const Graph *g, const CompileOptions *o)
{
    if (o && o->no_debug_dir)
        return NULL;
    DebugDir *dir = debug_dir_open(g->name);
    CompileDebug *cd = dir ? calloc(1, sizeof *cd) : NULL;
    if (!cd) {
        debug_dir_close(dir);
        return NULL;
    }
    cd->dir = dir;
    cd->times_file = -1;
    snprintf(cd->model, sizeof cd->model, "%s", g->name ? g->name : "graph");
    return cd;
}

void compile_debug_free(CompileDebug *cd)
{
    if (!cd)
        return;
    tune_report_free(&cd->report);
    debug_dir_close(cd->dir);
    free(cd);
}

DebugDir *compile_debug_dir(const CompileDebug *cd) { return cd ? cd->dir : NULL; }

void compile_debug_graph(CompileDebug *cd, const char *stage, const Graph *g)
{
    if (cd && g)
        debug_dir_text(cd->dir, stage, "cir", ir_print(g));
}

static void add_time(Timed *list, int *n, const char *name, double seconds)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i].name, name) == 0) {
            list[i].seconds = seconds;
            return;
        }
    if (*n < MAX_TIMES)
        list[(*n)++] = (Timed){name, seconds};
}

void compile_debug_passes_start(CompileDebug *cd)
{
    if (cd)
        cd->mark = clock_seconds();
}

bool compile_debug_after_pass(const Graph *g, const Pass *pass, void *ctx)
{
    CompileDebug *cd = ctx;
    if (cd->npass < MAX_TIMES) /* not add_time: a pass may run twice, each its own line */
        cd->pass[cd->npass++] = (Timed){pass->name, clock_seconds() - cd->mark};
    char stage[64];
    snprintf(stage, sizeof stage, "after-%s", pass->name);
    compile_debug_graph(cd, stage, g);
    cd->mark = clock_seconds();
    return true;
}

/* The IR, then the plan as comments (so the file still reads back as IR), as `coil dump
 * --after=fuse` prints it. */
static char *plan_text(const Graph *g, const Fusion *f)
{
    char *ir = ir_print(g), *plan = fuse_print(g, f), *both = NULL;
    if (ir && plan && asprintf(&both, "%s%s", ir, plan) < 0)
        both = NULL;
    free(ir);
    free(plan);
    return both;
}

void compile_debug_lowered(CompileDebug *cd, const Graph *g, const Fusion *f, const Program *p)
{
    if (!cd)
        return;
    debug_dir_text(cd->dir, "fusion-plan", "cir", plan_text(g, f));
    debug_dir_text(cd->dir, "fusion-plan", "dot", fuse_dot(g, f, p));
    debug_dir_text(cd->dir, "loop-ir", "loop", loop_print(p));
}

void compile_debug_cuda(CompileDebug *cd, const Program *p)
{
    Err e = {0};
    if (cd)
        debug_dir_text(cd->dir, "cuda", "cu", cuda_engine_source(p, &e));
}

/* ---------------------------------------------------------------- the memory plan */

typedef struct PlanDoc {
    const Program *p;
    const SymBind *sb;
    const MemoryPlan *mp;
} PlanDoc;

static const char *const kind_name[] = {"input", "param", "output", "const", "temp"};

static void plan_buffer(JsonWriter *w, const PlanDoc *d, int b)
{
    const Buffer *buf = &d->p->buf[b];
    char numel[128];
    dim_fmt(d->p->graph, buf->numel, numel, sizeof numel);
    json_newline(w);
    json_begin_object(w);
    json_field_string(w, "name", buf->name);
    json_field_string(w, "kind", kind_name[buf->kind]);
    json_field_string(w, "dtype", dtype_info[buf->dt].name);
    json_field_string(w, "numel", numel);
    json_field_int(w, "bytes", dim_value(buf->numel, d->sb) * (int64_t)dtype_info[buf->dt].size);
    if (buf->kind == BUF_TEMP) {
        json_key(w, "steps");
        json_begin_array(w);
        json_int(w, buf->first);
        json_int(w, buf->last);
        json_end_array(w);
        json_field_int(w, "offset", d->mp->offset[b]);
    }
    json_end_object(w);
}

static bool write_plan(FILE *f, const void *ctx)
{
    const PlanDoc *d = ctx;
    const Graph *g = d->p->graph;
    JsonWriter w;
    json_writer_init(&w, f);
    json_begin_object(&w);
    json_field_string(&w, "format", "coil-memory-plan");
    json_key(&w, "sizes");
    json_begin_object(&w);
    for (int s = 0; g && s < g->nsym; s++)
        if (d->sb->known[s])
            json_field_int(&w, g->sym[s], d->sb->val[s]);
    json_end_object(&w);
    json_field_int(&w, "arena_bytes", d->mp->arena_bytes);
    json_field_int(&w, "param_bytes", d->mp->param_bytes);
    json_field_int(&w, "io_bytes", d->mp->io_bytes);
    json_newline(&w);
    json_key(&w, "buffers");
    json_begin_array(&w);
    for (int b = 0; b < d->p->nbuf; b++)
        plan_buffer(&w, d, b);
    json_newline(&w);
    json_end_array(&w);
    json_end_object(&w);
    return json_writer_done(&w);
}

void compile_debug_plan(CompileDebug *cd, const Program *p, const SymBind *sb,
                        const MemoryPlan *mp)
{
    if (!cd || !sb || !mp || (cd->has_plan && sym_same_sizes(&cd->planned, sb)))
        return;
    PlanDoc d = {p, sb, mp};
    debug_dir_file(cd->dir, -1, "memory-plan", "json", write_plan, &d);
    cd->planned = *sb, cd->has_plan = true;
}

/* ---------------------------------------------------------------- times and tuning */

void compile_debug_stage(CompileDebug *cd, const char *stage, double seconds)
{
    if (cd)
        add_time(cd->stage, &cd->nstage, stage, seconds);
}

/* Seconds to the nanosecond: the clock's digits past that are noise to a reader. */
static double ns(double seconds) { return round(seconds * 1e9) / 1e9; }

static void time_list(JsonWriter *w, const char *key, const char *name_key, const Timed *t,
                      int n)
{
    json_newline(w);
    json_key(w, key);
    json_begin_array(w);
    for (int i = 0; i < n; i++) {
        json_newline(w);
        json_begin_object(w);
        json_field_string(w, name_key, t[i].name);
        json_field_double(w, "seconds", ns(t[i].seconds));
        json_end_object(w);
    }
    json_newline(w);
    json_end_array(w);
}

static bool write_times(FILE *f, const void *ctx)
{
    const CompileDebug *cd = ctx;
    double total = 0;
    for (int i = 0; i < cd->nstage; i++)
        total += cd->stage[i].seconds;
    JsonWriter w;
    json_writer_init(&w, f);
    json_begin_object(&w);
    json_field_string(&w, "format", "coil-compile-time");
    json_field_string(&w, "model", cd->model);
    json_field_double(&w, "total_s", ns(total));
    json_field_double(&w, "debug_writes_s", ns(debug_dir_seconds(cd->dir)));
    time_list(&w, "stages", "stage", cd->stage, cd->nstage);
    time_list(&w, "passes", "pass", cd->pass, cd->npass);
    json_end_object(&w);
    return json_writer_done(&w);
}

void compile_debug_times(CompileDebug *cd)
{
    if (cd)
        cd->times_file = debug_dir_file(cd->dir, cd->times_file, "compile-time", "json",
                                        write_times, cd);
}

TuneReport *compile_debug_report(CompileDebug *cd)
{
    if (!cd)
        return NULL;
    snprintf(cd->report.model, sizeof cd->report.model, "%s", cd->model);
    return &cd->report;
}

static bool write_report(FILE *f, const void *r) { return tune_report_write(f, r); }

void compile_debug_tuned(CompileDebug *cd, const TuneReport *r)
{
    if (cd && r)
        debug_dir_file(cd->dir, -1, "autotune", "json", write_report, r);
}
