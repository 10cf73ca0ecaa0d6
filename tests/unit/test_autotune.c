/* test_autotune.c — the autotuner: the search finds the truly fastest candidate when the
 * test controls the candidates' speeds, never chooses a wrong one, and keeps the default
 * when a win does not hold up; choices print and parse back; on a real model (the CPU
 * engine) max-autotune's results equal the interpreter's, a second compile with the same
 * cache measures nothing, a cache of another device is not used, a corrupt cache is
 * rewritten; and the padding decision keeps results. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "codegen/autotune/tuner.h"
#include "frontend/frontend.h"
#include "pipeline/pipeline.h"
#include "runtime/init.h"

/* ---------------------------------------------------------------- the search */

/* A space of two knobs (4 x 3 values) whose point times come from a table. */
typedef struct Fake {
    double t[4][3];
    bool wrong[4][3];
    int calls;
} Fake;

static TuneStatus fake_measure(void *ctx, const TunePoint *pt, double *s, Err *e)
{
    (void)e;
    Fake *f = ctx;
    f->calls++;
    *s = f->t[pt->at[0]][pt->at[1]];
    return f->wrong[pt->at[0]][pt->at[1]] ? TUNE_WRONG : TUNE_OK;
}

static TuneSpace fake_space(void)
{
    TuneSpace sp = {.nknob = 2};
    sp.knob[0] = (TuneKnob){.name = "kc", .n = 4, .value = {0, 128, 256, 512},
                            .label = {"auto"}, .needs = -1};
    sp.knob[1] = (TuneKnob){.name = "split", .n = 3, .value = {0, 1, 2},
                            .label = {"auto", "rows", "cols"}, .needs = -1};
    return sp;
}

/* Separable times (a sum of per-knob costs): descent must reach the global minimum. */
static void test_finds_fastest(void)
{
    TuneSpace sp = fake_space();
    const double a[4] = {5, 3, 1, 4}, b[3] = {2, 0.5, 3};
    Fake f = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            f.t[i][j] = a[i] + b[j];
    TuneResult r;
    Err e = {0};
    CHECK(tune_descend(&sp, fake_measure, &f, 3, &r, &e));
    CHECK(r.best.at[0] == 2 && r.best.at[1] == 1);
    CHECK(r.best_s == 1.5 && r.default_s == 7);
    char text[64];
    tune_point_text(&sp, &r.best, text, sizeof text);
    CHECK_STR(text, "kc=256 split=rows");
    TunePoint back;
    CHECK(tune_point_parse(&sp, text, &back) && memcmp(&back, &r.best, sizeof back) == 0);
    CHECK(tune_point_parse(&sp, "default", &back) && back.at[0] == 0 && back.at[1] == 0);
    CHECK(!tune_point_parse(&sp, "kc=100", &back) && !tune_point_parse(&sp, "mc=2", &back));
    tune_result_free(&r);
}

/* The fastest point gives a wrong result: the next fastest correct one wins. */
static void test_wrong_never_chosen(void)
{
    TuneSpace sp = fake_space();
    Fake f = {0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            f.t[i][j] = 10 - i - j;
    f.wrong[3][2] = f.wrong[3][0] = true; /* the two fastest along kc, and the very fastest */
    TuneResult r;
    Err e = {0};
    CHECK(tune_descend(&sp, fake_measure, &f, 3, &r, &e));
    CHECK(!f.wrong[r.best.at[0]][r.best.at[1]]);
    CHECK(r.best.at[0] == 2 && r.best.at[1] == 2); /* 6: the fastest correct point */
    for (int i = 0; i < r.ntrial; i++)
        if (f.wrong[r.trial[i].pt.at[0]][r.trial[i].pt.at[1]])
            CHECK(r.trial[i].status == TUNE_WRONG);
    tune_result_free(&r);
    /* a default that cannot be measured is an error, not a choice */
    f.wrong[0][0] = true;
    CHECK(!tune_descend(&sp, fake_measure, &f, 3, &r, &e) && !err_ok(&e));
    tune_result_free(&r);
}

/* A point that looked faster once but not when timed against the default again. */
typedef struct Flaky {
    int calls_at_1;
} Flaky;

static TuneStatus flaky_measure(void *ctx, const TunePoint *pt, double *s, Err *e)
{
    (void)e;
    Flaky *f = ctx;
    if (pt->at[0] == 1)
        *s = f->calls_at_1++ == 0 ? 1.0 : 2.5; /* lucky the first time only */
    else
        *s = pt->at[0] == 0 ? 2.0 : 3.0;
    return TUNE_OK;
}

static void test_confirmation(void)
{
    TuneSpace sp = fake_space();
    sp.nknob = 1;
    Flaky f = {0};
    TuneResult r;
    Err e = {0};
    CHECK(tune_descend(&sp, flaky_measure, &f, 2, &r, &e));
    CHECK(r.best.at[0] == 0 && r.best_s == r.default_s);
    tune_result_free(&r);
}

/* Run 0 is the warm-up (slow), every third run an outlier: the median ignores both. */
static bool outlier_run(void *ctx, int i, double *s, Err *e)
{
    (void)e;
    ++*(int *)ctx;
    *s = i == 0 ? 100 : i % 3 == 0 ? 50 : 1;
    return true;
}

static void test_timing(void)
{
    int runs = 0;
    TuneBudget b = {5, 9, 1e9};
    double median = 0;
    Err e = {0};
    CHECK(tune_time(outlier_run, &runs, &b, &median, &e));
    CHECK(runs == 10 && median == 1); /* one warm-up, then max_runs timed ones */
}

/* ---------------------------------------------------------------- a real model */

typedef struct Model {
    Graph *g;
    SymBind sb;
    Tensor in[2], *params, out[2], ref[2];
    int nparam;
} Model;

static bool model_setup(Model *m, const char *path, const char *const *set, int nset, SymSize *dims,
                        int ndims, Err *e)
{
    ModelOptions opt = {.set = set, .nset = nset};
    bool given[2] = {false, false};
    memset(m, 0, sizeof *m);
    if (!(m->g = model_load(path, &opt, e)))
        return false;
    m->nparam = graph_params(m->g, NULL);
    m->params = calloc((size_t)m->nparam + 1, sizeof *m->params);
    return m->g->ninput <= 2 && m->g->noutput <= 2 &&
           init_symbols(m->g, NULL, given, dims, ndims, 1, &m->sb, e) &&
           init_params(m->g, &m->sb, 1, m->params, e) &&
           init_inputs(m->g, &m->sb, 2, given, m->in, e) &&
           interp_run(m->g, m->in, m->params, m->ref, NULL, e);
}

static void model_free(Model *m)
{
    for (int i = 0; m->g && i < 2; i++)
        tensor_free(&m->in[i]), tensor_free(&m->out[i]), tensor_free(&m->ref[i]);
    for (int i = 0; i < m->nparam; i++)
        tensor_free(&m->params[i]);
    free(m->params);
    graph_free(m->g);
}

static bool close_to_ref(const Model *m)
{
    for (int o = 0; o < m->g->noutput; o++)
        for (int64_t i = 0; i < tensor_numel(&m->ref[o]); i++)
            if (!check_close(dtype_load(m->out[o].dt, m->out[o].data, i),
                             dtype_load(m->ref[o].dt, m->ref[o].data, i), 1e-4))
                return false;
    return true;
}

/* Compile in max-autotune mode with cache `path`, run twice (the first run tunes), check
 * the second run's outputs; the report says what was measured. */
static bool tune_run(Model *m, const char *path, TuneReport *rep, Err *e)
{
    CompileOptions o = {.mode = MODE_MAX_AUTOTUNE, .tune_cache = path, .tune_report = rep,
                        .tune_sizes = &m->sb, .threads = 2};
    Compiled *c = compile_graph(m->g, &o, e);
    bool ok = c && compiled_run(c, m->in, m->params, m->out, e);
    for (int i = 0; ok && i < m->g->noutput; i++)
        tensor_free(&m->out[i]);
    ok = ok && compiled_run(c, m->in, m->params, m->out, e) && close_to_ref(m);
    compiled_free(c);
    return ok;
}

static int measured(const TuneReport *r)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += !r->k[i].cached;
    return n;
}

static void test_model_and_cache(const char *dir)
{
    const char *set[] = {"hidden=64", "layers=3", "classes=10"};
    SymSize dims[] = {{"B", 16}};
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/autotune.json", dir);
    Model m;
    Err e = {0};
    TuneReport first = {0}, second = {0}, foreign = {0}, corrupt = {0};
    CHECK(model_setup(&m, "examples/mlp.coil", set, 3, dims, 1, &e));
    CHECK(tune_run(&m, path, &first, &e));
    CHECK(first.n > 0 && measured(&first) == first.n);
    /* a restart: the same compile reads every choice and measures nothing */
    CHECK(tune_run(&m, path, &second, &e));
    CHECK(second.n == first.n && measured(&second) == 0);
    /* another device's entries (the key's device renamed) are not used */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"cpu /\"other-cpu /' %s", path);
    CHECK(system(cmd) == 0);
    CHECK(tune_run(&m, path, &foreign, &e));
    CHECK(foreign.n > 0 && measured(&foreign) == foreign.n);
    /* a corrupt file: a warning, measured again, rewritten whole */
    FILE *f = fopen(path, "w");
    fputs("{\"format\": \"coil-autotune-cache\", \"entr", f);
    fclose(f);
    CHECK(tune_run(&m, path, &corrupt, &e));
    /* everything measured again (the padding decision may differ from the first run's on
     * a busy machine, and with it the kernels: compare with this run's own count) */
    CHECK(corrupt.n > 0 && measured(&corrupt) == corrupt.n);
    TuneCache *c = tune_cache_open(path, &e);
    CHECK(c && tune_cache_count(c) >= corrupt.n);
    tune_cache_free(c);
    if (!err_ok(&e))
        fprintf(stderr, "test_model_and_cache: %s\n", e.msg);
    tune_report_free(&first), tune_report_free(&second), tune_report_free(&foreign);
    tune_report_free(&corrupt);
    model_free(&m);
}

/* A head of 50257 classes is a padding candidate: whatever is decided, results hold. */
static void test_padding_decision(const char *dir)
{
    const char *set[] = {"hidden=32", "layers=1", "classes=50257"};
    SymSize dims[] = {{"B", 4}};
    char path[512];
    snprintf(path, sizeof path, "%s/pad.json", dir);
    Model m;
    Err e = {0};
    TuneReport rep = {0};
    CHECK(model_setup(&m, "examples/mlp.coil", set, 3, dims, 1, &e));
    CHECK(tune_run(&m, path, &rep, &e));
    bool probed = false;
    for (int i = 0; i < rep.n; i++)
        probed = probed || strncmp(rep.k[i].name, "pad matmul", 10) == 0;
    CHECK(probed);
    if (!err_ok(&e))
        fprintf(stderr, "test_padding_decision: %s\n", e.msg);
    tune_report_free(&rep);
    model_free(&m);
}

int main(void)
{
    test_finds_fastest();
    test_wrong_never_chosen();
    test_confirmation();
    test_timing();
    if (!cpu_codegen_built()) {
        printf("test_autotune: model tests skipped (built without COIL_LLVM)\n");
        return check_status();
    }
    char dir[] = "/tmp/coil-autotune-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_model_and_cache(dir);
    test_padding_decision(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return check_status();
}
