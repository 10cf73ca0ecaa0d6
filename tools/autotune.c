/* autotune.c — `coil autotune MODEL`: compile in max-autotune mode, run once at the given
 * sizes (which tunes every kernel, or reads the choices from the cache), then print the
 * table of what was tried and chosen, and with --report write it all as JSON. */
#include <stdlib.h>
#include <string.h>

#include "runtime/pool.h"
#include "tools/cli.h"

static bool tune_model(const Prepared *r, const Args *a, int threads, TuneReport *rep, Err *e)
{
    CompileOptions co = compile_options(a, threads);
    co.mode = MODE_MAX_AUTOTUNE, co.tune_report = rep;
    co.tune_sizes = &r->sb;
    Compiled *c = prepared_compile(r, &co, e);
    Tensor *outputs = c ? calloc((size_t)r->g->noutput + 1, sizeof *outputs) : NULL;
    bool ok = outputs && compiled_run(c, r->inputs, r->params, outputs, e);
    for (int i = 0; ok && i < r->g->noutput; i++)
        tensor_free(&outputs[i]);
    if (c && !outputs && err_ok(e))
        err_set(e, ERR_MEMORY, "out of memory");
    free(outputs);
    compiled_free(c);
    return ok;
}

int cmd_autotune(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {
        MODEL_FLAGS(a),
        {"--batch", .value = &a->batch}, {"--report", .value = &a->report},
    };
    SymSize sizes[argc + 2];
    int64_t threads;
    uint64_t seed = 0;
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    int nsizes = a->dim.n;
    if (rc == EXIT_OK && !a->help)
        rc = parse_batch(cmd, a, sizes, &nsizes);
    if (rc == EXIT_OK && !a->help)
        rc = parse_count(cmd, "--threads", a->threads, pool_default_threads(), &threads);
    if (rc == EXIT_OK && !a->help && a->seed && !parse_u64(a->seed, &seed))
        rc = usage_error(cmd, "--seed %s: expected a non-negative integer", a->seed);
    if (rc == EXIT_OK && !a->help)
        rc = check_device(cmd, a);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    Prepared r;
    TuneReport rep = {0};
    bool ok = prepare(&r, a, sizes, nsizes, seed, &e);
    if (ok)
        snprintf(rep.model, sizeof rep.model, "%s", a->model);
    ok = ok && tune_model(&r, a, (int)threads, &rep, &e);
    if (ok) {
        printf("autotune @%s on %s\n", r.g->name, rep.device);
        tune_report_table(&rep, stdout);
    }
    if (ok && a->report && (ok = tune_report_json(&rep, a->report, &e)))
        printf("report written to %s\n", a->report);
    rc = ok ? EXIT_OK : cli_fail(&e);
    tune_report_free(&rep);
    prepared_free(&r);
    return rc;
}
