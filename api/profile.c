/* profile.c — coil_get_profile: each step's time per run, as `coil bench --profile` shows
 * it (the engine's per-step sums, kept when the model was loaded with coil_options.profile),
 * named by the layer it computes (runtime/trace.h's step table), slowest first. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "runtime/trace.h"

typedef struct ApiProfile {
    double *base;          /* the engine's step sums when the profile restarted */
    StepTable *table;      /* the names coil_get_profile handed out */
    coil_step_time *rows;
} ApiProfile;

static void handed_out_free(ApiProfile *p)
{
    step_table_free(p->table);
    free(p->rows);
    p->table = NULL, p->rows = NULL;
}

void api_profile_free(coil_model *m)
{
    if (!m->prof)
        return;
    handed_out_free(m->prof);
    free(m->prof->base);
    free(m->prof);
    m->prof = NULL;
}

void api_profile_restart(coil_model *m)
{
    const double *sums = m->compiled ? compiled_step_seconds(m->compiled) : NULL;
    int n = m->compiled ? m->compiled->p->nstep : 0;
    if (!m->prof && !(m->prof = calloc(1, sizeof *m->prof)))
        return; /* out of memory: coil_get_profile says so */
    double *base = sums ? malloc(sizeof *base * ((size_t)n + 1)) : NULL;
    if (sums && !base)
        return; /* out of memory: the profile goes on counting from where it started */
    if (base)
        memcpy(base, sums, sizeof *base * (size_t)n);
    free(m->prof->base);
    m->prof->base = base;
    m->runs = 0;
}

bool coil_reset_profile(coil_model *model, coil_error *err)
{
    api_err_clear(err);
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_reset_profile: the model is NULL");
    api_profile_restart(model);
    return true;
}

static int slower_first(const void *a, const void *b)
{
    double x = ((const coil_step_time *)a)->ms, y = ((const coil_step_time *)b)->ms;
    return (x < y) - (x > y);
}

/* The rows from the sums since the restart, per run, slowest first. */
static void fill_rows(ApiProfile *p, const double *sums, int n, int64_t runs, coil_profile *out)
{
    double total = 0;
    for (int s = 0; s < n; s++) {
        const StepInfo *info = &p->table->step[s];
        double ms = (sums[s] - (p->base ? p->base[s] : 0)) / (double)runs * 1e3;
        p->rows[s] = (coil_step_time){.step = s, .name = info->name, .layer = info->layer,
                                      .kind = info->kind, .ms = ms, .flops = info->flops,
                                      .bytes = info->bytes};
        total += ms;
    }
    for (int s = 0; s < n; s++)
        p->rows[s].share = total > 0 ? p->rows[s].ms / total : 0;
    qsort(p->rows, (size_t)n, sizeof *p->rows, slower_first);
    *out = (coil_profile){.runs = runs, .ms = total, .nsteps = n, .steps = p->rows};
}

static bool profile_ready(const coil_model *m, coil_error *err)
{
    if (m->interpret || !m->profile)
        return api_fail(err, COIL_ERR_USAGE, "coil_get_profile: %s", m->interpret
                        ? "the model is interpreted: the profile times compiled steps"
                        : "the model was loaded without coil_options.profile: load it with "
                          "profile = true to time each step");
    if (!m->compiled || m->runs == 0 || !compiled_step_seconds(m->compiled))
        return api_fail(err, COIL_ERR_USAGE, "coil_get_profile: no run to report since %s: "
                        "call coil_run first", m->compiled ? "the profile restarted (compiling, "
                        "coil_prepare's warm-up or coil_reset_profile)" : "loading");
    if (!m->prof)
        return api_fail(err, COIL_ERR_MEMORY, "coil_get_profile: out of memory");
    return true;
}

bool coil_get_profile(coil_model *model, coil_profile *out, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!model || !out)
        return api_fail(err, COIL_ERR_USAGE, "coil_get_profile: the %s is NULL",
                        !model ? "model" : "profile");
    memset(out, 0, sizeof *out);
    if (!profile_ready(model, err))
        return false;
    const Compiled *c = model->compiled;
    ApiProfile *p = model->prof;
    int n = c->p->nstep;
    handed_out_free(p);
    p->table = step_table_new(c->p, &e);
    p->rows = calloc((size_t)n + 1, sizeof *p->rows);
    if (!p->table || !p->rows || !step_table_size(p->table, compiled_symbols(c), &e)) {
        handed_out_free(p);
        return err_ok(&e) ? api_fail(err, COIL_ERR_MEMORY, "coil_get_profile: out of memory")
                          : api_fail_err(err, &e);
    }
    fill_rows(p, compiled_step_seconds(c), n, model->runs, out);
    return true;
}
