/* cpu_tune.c — measuring the CPU engine's candidates, step by step, in program order.
 *
 * Each step is timed alone, on the buffers a real run gives it: the steps before it have
 * just run (with their chosen configurations), the buffers it writes are restored before
 * every timed run (so an in-place kernel reads the same values each time), and the
 * weights it reads rotate between copies, so a candidate does not find them in L1/L2 as
 * no real run would. After the default candidate runs, what the step wrote is the
 * reference; a candidate whose results differ is rejected. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "runtime/cpu/cpu_tune.h"

#define MAX_TOUCHED 32          /* buffers a step writes, or weights it reads */
#define ROTATE_COPIES 3
#define ROTATE_MAX_BYTES (256ll << 20) /* weights larger than this are not copied */

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

static size_t buf_bytes(const Program *p, int b, const SymBind *sb)
{
    return (size_t)dim_value(p->buf[b].numel, sb) * dtype_info[p->buf[b].dt].size;
}

/* Written buffers (with copies to restore them) and weights read (with rotated copies). */
static bool collect(StepRun *r, const SymBind *sb)
{
    int rd[MAX_TOUCHED], nrd = tune_step_reads(r->p, r->s, rd, MAX_TOUCHED);
    r->nw = tune_step_writes(r->p, r->s, r->w, r->compare, MAX_TOUCHED);
    for (int i = 0; i < r->nw; i++) {
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

/* A kernel: how many chunks its outer loop is cut into (fewer threads for small work). */
static void kernel_space(TuneSpace *sp, int threads)
{
    for (int k = 0; k < K_PARTS; k++)
        tune_knob(sp, k, "-", -1, 0), tune_add_value(sp, k, 0, NULL);
    tune_knob(sp, K_PARTS, "parts", -1, 0);
    tune_add_value(sp, K_PARTS, 0, "auto");
    for (int t = 1; t <= threads && sp->knob[K_PARTS].n < TUNE_MAX_VALUES; t *= 2)
        tune_add_value(sp, K_PARTS, t, NULL);
    if (threads > 1 && (threads & (threads - 1)))
        tune_add_value(sp, K_PARTS, threads, NULL);
}

/* A GEMM: OpenBLAS (its epilogue separate) or the generated kernels, and their blocking:
 * form, k block, macro block, thread split, epilogue fused in the tiles or separate. */
static void gemm_space(TuneSpace *sp, const Gemm *g, bool dot_layout, int64_t K, int threads)
{
    kernel_space(sp, threads);
    sp->knob[K_PARTS].n = 1; /* the epilogue's chunks: not worth a dimension */
    tune_knob(sp, K_LIB, "lib", -1, 0);
    tune_add_value(sp, K_LIB, 0, "generated"), tune_add_value(sp, K_LIB, 1, "openblas");
    tune_knob(sp, K_FORM, "form", K_LIB, 0);
    tune_add_value(sp, K_FORM, GEMM_FORM_AUTO, "auto");
    if (dot_layout)
        tune_add_value(sp, K_FORM, GEMM_FORM_DOT, "dot"), tune_add_value(sp, K_FORM, GEMM_FORM_BCAST, "bcast");
    tune_knob(sp, K_KC, "kc", K_LIB, 0);
    tune_add_value(sp, K_KC, 0, "auto");
    for (int64_t kc = 256; kc <= 1024; kc *= 2)
        if (kc < K)
            tune_add_value(sp, K_KC, kc, NULL);
    tune_knob(sp, K_MC, "mc", K_LIB, 0);
    tune_add_value(sp, K_MC, 0, "auto");
    for (int64_t mc = 2; mc <= 32; mc *= 2)
        tune_add_value(sp, K_MC, mc, NULL);
    tune_knob(sp, K_SPLIT, "split", K_LIB, 0);
    tune_add_value(sp, K_SPLIT, GEMM_SPLIT_AUTO, "auto");
    if (threads > 1)
        tune_add_value(sp, K_SPLIT, GEMM_SPLIT_ROWS, "rows"), tune_add_value(sp, K_SPLIT, GEMM_SPLIT_COLS, "cols");
    tune_knob(sp, K_EPI, "epilogue", K_LIB, 0);
    tune_add_value(sp, K_EPI, 0, "fused");
    if (g->epilogue >= 0 && g->epi_load >= 0)
        tune_add_value(sp, K_EPI, 1, "separate");
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

/* Whether buffer w's values agree with the reference's. */
static bool agrees(const StepRun *r, int w)
{
    return tune_agrees(r->p->buf[r->w[w]].dt, engine_buffer(r->en, r->w[w]), r->ref[w],
                       r->bytes[w]);
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
            flags = fnv1a_str(colon + 1);
    }
    if (f)
        fclose(f);
    snprintf(buf, n, "cpu %s (flags %08llx) threads %d", model,
             (unsigned long long)(flags & 0xffffffffu), threads);
}


/* ---------------------------------------------------------------- the target */

typedef struct CpuTarget {
    Engine *en;
    const Program *p;
} CpuTarget;

static void cpu_space(void *ctx, int s, TuneSpace *sp)
{
    const CpuTarget *t = ctx;
    const Step *st = &t->p->step[s];
    const SymBind *sb = engine_symbols(t->en);
    memset(sp, 0, sizeof *sp);
    if (st->kind == STEP_KERNEL)
        kernel_space(sp, engine_threads(t->en));
    else if (st->kind == STEP_GEMM && engine_can_tile(t->en, s)) {
        bool dot = gemm_tiled_dot_layout(&st->gemm, engine_buffers(t->en), sb);
        gemm_space(sp, &st->gemm, dot, dim_value(st->gemm.k, sb), engine_threads(t->en));
    }
}

/* Descent over step s's space; its written buffers as before the step after. */
static bool cpu_search(void *ctx, int s, const TuneSpace *sp, const TuneBudget *b,
                       TuneResult *res, Err *e)
{
    const CpuTarget *t = ctx;
    StepRun r = {.en = t->en, .p = t->p, .s = s, .sp = sp, .budget = *b};
    if (r.budget.max_runs == 0)
        r.budget = (TuneBudget){5, 200, 0.01};
    *res = (TuneResult){0};
    bool ok = collect(&r, engine_symbols(t->en));
    if (!ok)
        err_set(e, ERR_MEMORY, "autotune: out of memory copying step %d's buffers", s);
    ok = ok && tune_descend(sp, measure, &r, 2, res, e);
    for (int w = 0; w < r.nw; w++) /* as before the step: it runs once more, chosen */
        memcpy(engine_buffer(t->en, r.w[w]), r.saved[w], r.bytes[w]);
    release(&r);
    return ok;
}

static bool cpu_configure(void *ctx, int s, const TuneSpace *sp, const TunePoint *pt, Err *e)
{
    (void)e;
    const CpuTarget *t = ctx;
    StepConfig c = sp->nknob ? config_of(sp, pt) : (StepConfig){0};
    engine_configure(t->en, s, &c);
    return true;
}

static bool cpu_run_step(void *ctx, int s, Err *e)
{
    const CpuTarget *t = ctx;
    return engine_run_step(t->en, s, e);
}

bool tune_cpu(Engine *en, const Program *p, const TuneOptions *o, Err *e)
{
    if (!engine_symbols(en)) {
        err_set(e, ERR_USAGE, "autotune: run the engine once first (the sizes come from a run)");
        return false;
    }
    char device[160];
    tune_cpu_device(device, sizeof device, engine_threads(en));
    CpuTarget ct = {en, p};
    TuneTarget t = {.p = p, .sb = engine_symbols(en), .device = device, .ctx = &ct,
                    .space = cpu_space, .search = cpu_search, .configure = cpu_configure,
                    .run_step = cpu_run_step};
    return tune_steps(&t, o, e);
}
