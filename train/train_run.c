/* train_run.c — a training run held between steps whose batches the caller gives (the C
 * API's trainer, api/train.c): train_open, train_step, train_save, train_resume. */
#include <stdlib.h>

#include "train/run.h"

/* The C API's trainer: a Run whose batches the caller gives, one train_step at a time;
 * checkpoints go where the caller says (o.save set for the call, the directory locked
 * only while it is written). */
struct TrainRun {
    Run run;
    TrainOptions o;
};

TrainRun *train_open(const Graph *model, const TrainOptions *o, Err *e)
{
    TrainRun *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(e, ERR_MEMORY, "out of memory");
        return NULL;
    }
    t->o = *o;
    t->o.accum = o->accum > 0 ? o->accum : 1;
    t->o.log_every = 0, t->o.save = NULL, t->o.resume = false, t->o.data = NULL;
    t->o.narray = 0, t->o.trace = NULL, t->o.world = (World){0}; /* alone */
    t->run = (Run){.o = &t->o, .lock = {-1}};
    if (run_setup(&t->run, model, e))
        return t;
    train_close(t);
    return NULL;
}

void train_close(TrainRun *t)
{
    if (!t)
        return;
    run_free(&t->run);
    free(t);
}

const Graph *train_graph(const TrainRun *t) { return t->run.joint; }

int64_t train_steps_done(const TrainRun *t) { return t->run.step; }

Tensor *train_params(TrainRun *t, Err *e)
{
    Run *r = &t->run;
    if (r->dev && !r->dt->download_params(r->c->engine, r->params, e))
        return NULL;
    return r->params;
}

const char *const *train_param_names(const TrainRun *t, int *n)
{
    *n = t->run.nparam + t->run.nkept;
    return t->run.param_name;
}

void train_params_changed(TrainRun *t) { compiled_params_changed(t->run.c); }

static bool usable(const Run *r, Err *e)
{
    if (r->broken)
        err_set(e, ERR_USAGE, "this training run's state is part the checkpoint's, part its own: "
                "a resume failed while restoring it; make a new one");
    return !r->broken;
}

bool train_step(TrainRun *t, const Tensor *batch, double *loss, Err *e)
{
    Run *r = &t->run;
    TrainResult res = {0};
    if (!usable(r, e))
        return false;
    r->batch = batch;
    bool ok = run_step_once(r, &res, e);
    r->batch = NULL;
    *loss = res.last_loss;
    return ok;
}

bool train_save(TrainRun *t, const char *dir, Err *e)
{
    Run *r = &t->run;
    t->o.save = dir;
    bool ok = usable(r, e) && run_claim_save_dir(r, e) && run_checkpoint(r, true, e);
    dir_unlock(&r->lock);
    t->o.save = NULL;
    return ok;
}

bool train_resume(TrainRun *t, const char *dir, Err *e)
{
    Run *r = &t->run;
    uint64_t data_pos;
    t->o.save = dir;
    bool checked = usable(r, e) && run_open_checkpoint(r, e);
    bool ok = checked && run_load_checkpoint(r, &data_pos, e);
    safetensors_free(&r->ck);
    r->broken = checked && !ok;
    if (ok)
        compiled_params_changed(r->c); /* a device takes the host's parameters again */
    t->o.save = NULL;
    return ok;
}
