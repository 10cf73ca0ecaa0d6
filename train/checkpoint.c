/* checkpoint.c — a training run's checkpoints: parameters, optimizer state, the step, the
 * data position and the run's identity in one safetensors file, sealed with a digest and
 * written atomically; read back checked (digest, metadata, shapes, finite values). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/version.h"
#include "train/run.h"

#define CHECKPOINT_FILE "checkpoint.safetensors"
#define CHECKPOINT_LOCK "train.lock"

/* The save directory, for this run alone: created, locked (a second writer fails at once,
 * naming this one), and rid of the temporaries a killed writer left (under the lock no
 * live writer can own one). */
bool run_claim_save_dir(Run *r, Err *e)
{
    const char *dir = r->o->save;
    int removed = 0;
    if (!make_dir(dir, "checkpoint", e) ||
        !dir_lock(&r->lock, dir, CHECKPOINT_LOCK, "checkpoints", e) ||
        !atomic_sweep(dir, CHECKPOINT_FILE, &removed, e))
        return false;
    if (removed)
        fprintf(stderr, "note: %s: removed %d temporary checkpoint file%s a killed run left\n",
                dir, removed, removed == 1 ? "" : "s");
    return true;
}

/* Parameters and kept buffers, optimizer state, the step and the data position, the run's
 * identity (seed, optimizer, coil version) and, under f16, the loss scale: one safetensors
 * file sealed with a digest of all of it, written beside its name, fsynced and renamed (a
 * kill leaves the previous one whole). Non-finite parameters are never saved over it. */
static bool save_checkpoint(Run *r, Err *e)
{
    char path[4096], step[32], pos[32], seed[32], scale[40], good[32];
    snprintf(path, sizeof path, "%s/%s", r->o->save, CHECKPOINT_FILE);
    if (!run_to_host(r, e))
        return false;
    int np = r->nparam + r->nkept, ns = run_state_count(r), n = np + ns;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    Tensor *t = calloc((size_t)n + 1, sizeof *t);
    bool ok = names && t;
    if (ok) {
        for (int i = 0; i < np; i++)
            names[i] = r->param_name[i], t[i] = r->params[i];
        for (int i = 0; i < ns; i++)
            t[np + i] = *run_state_at(r, i, &names[np + i]);
        snprintf(step, sizeof step, "%lld", (long long)r->step);
        snprintf(pos, sizeof pos, "%llu", (unsigned long long)(r->loader ? loader_position(r->loader) : 0));
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->o->seed);
        snprintf(scale, sizeof scale, "%.17g", r->scale);
        snprintf(good, sizeof good, "%lld", (long long)r->good);
        const char *key[] = {"step", "data_position", "seed", "optimizer", "coil", "loss_scale",
                             "loss_scale_good"};
        const char *val[] = {step, pos, seed, optim_name(r->o->opt.kind), COIL_VERSION_TEXT, scale,
                             good};
        ok = run_check_finite(t, names, n, path, "the run diverged; not saving over the last "
                          "checkpoint", e) &&
             safetensors_write_sealed(path, names, t, n, key, val, r->scale_at >= 0 ? 7 : 5, e);
    } else
        err_set(e, ERR_MEMORY, "out of memory writing a checkpoint");
    free(names), free(t);
    return ok;
}

/* A checkpoint, written by one rank (writes); under ZeRO every rank gathers the optimizer
 * state for it first (a collective). */
bool run_checkpoint(Run *r, bool writes, Err *e)
{
    if (r->zero && !zero_state_gather(r->zero, e))
        return false;
    bool ok = !writes || save_checkpoint(r, e);
    if (r->zero)
        zero_state_close(r->zero);
    return ok;
}

/* A whole number in [0, max] from the checkpoint's metadata; errors name the key and
 * the value found. */
static bool meta_count(const StFile *f, const char *path, const char *key, uint64_t max,
                       uint64_t *out, Err *e)
{
    const char *v = safetensors_meta(f, key);
    uint64_t x = 0;
    bool ok = v && *v && strlen(v) <= 20;
    for (const char *c = v; ok && *c; c++)
        ok = *c >= '0' && *c <= '9' && !__builtin_mul_overflow(x, 10, &x) &&
             !__builtin_add_overflow(x, (uint64_t)(*c - '0'), &x);
    if (ok && x <= max)
        return *out = x, true;
    if (!v)
        err_set(e, ERR_INPUT, "%s: the metadata has no \"%s\": not a checkpoint coil train wrote",
                path, key);
    else
        err_set(e, ERR_INPUT, "%s: metadata \"%s\" is \"%.40s\": expected a whole number from 0 "
                "to %llu; the file was edited or damaged", path, key, v, (unsigned long long)max);
    return false;
}

/* f16's loss scale and its count of good steps, when the checkpoint has them. */
static bool meta_scale(const StFile *f, const char *path, Saved *s, Err *e)
{
    const char *v = safetensors_meta(f, "loss_scale");
    if (!v)
        return true;
    char *end;
    s->scale = strtod(v, &end);
    if (end == v || *end || !(s->scale >= 1 && s->scale <= 0x1p24)) {
        err_set(e, ERR_INPUT, "%s: metadata \"loss_scale\" is \"%.40s\": expected a number from 1 "
                "to 2^24; the file was edited or damaged", path, v);
        return false;
    }
    s->has_scale = true;
    return meta_count(f, path, "loss_scale_good", LOSS_SCALE_GROWTH, &s->good, e);
}

/* Every value range-checked and the digest held against the contents before anything is
 * taken from the file. */
static bool read_saved(const Run *r, const StFile *f, const char *path, Saved *s, Err *e)
{
    s->optimizer = safetensors_meta(f, "optimizer"), s->coil = safetensors_meta(f, "coil");
    if (!meta_count(f, path, "step", (uint64_t)1 << 53, &s->step, e) ||
        !meta_count(f, path, "data_position", UINT64_MAX, &s->data_pos, e) ||
        !meta_count(f, path, "seed", UINT64_MAX, &s->seed, e) || !meta_scale(f, path, s, e))
        return false;
    if (!s->optimizer || !s->coil) {
        err_set(e, ERR_INPUT, "%s: the metadata has no \"%s\": not a checkpoint coil train wrote",
                path, s->optimizer ? "coil" : "optimizer");
        return false;
    }
    const char *sealed = safetensors_meta(f, SAFETENSORS_DIGEST_KEY);
    char hex[65];
    safetensors_digest(f, hex);
    if (!sealed && !r->o->resume_anyway) {
        err_set(e, ERR_INPUT, "%s: has no checksum (metadata \"%s\"): written by an older coil "
                "or another tool; give --resume-anyway to load it unchecked", path,
                SAFETENSORS_DIGEST_KEY);
        return false;
    }
    if (sealed && strcmp(sealed, hex) != 0) {
        err_set(e, ERR_INPUT, "%s: damaged: its contents do not match its checksum (SHA-256 "
                "%.16s..., the file says %.16s...); resume from a copy, or start again "
                "without --resume", path, hex, sealed);
        return false;
    }
    return true;
}

/* The run this checkpoint continues must be the one that saved it: the same coil, seed
 * (data order, dropout masks) and optimizer (its state's meaning), unless overridden. */
static bool same_run(const Run *r, const Saved *s, const char *path, Err *e)
{
    const TrainOptions *o = r->o;
    const char *opt = optim_name(o->opt.kind);
    if (o->resume_anyway)
        return true;
    if (strcmp(s->coil, COIL_VERSION_TEXT) != 0)
        err_set(e, ERR_INPUT, "%s: saved by coil %.40s, this is coil %s: the run would not "
                "continue as it began; give --resume-anyway to resume it regardless", path,
                s->coil, COIL_VERSION_TEXT);
    else if (s->seed != o->seed)
        err_set(e, ERR_INPUT, "%s: saved by a run with --seed %llu, this one has --seed %llu: "
                "its data order and dropout masks would not continue; give --seed %llu, or "
                "--resume-anyway to resume with the new seed", path,
                (unsigned long long)s->seed, (unsigned long long)o->seed,
                (unsigned long long)s->seed);
    else if (strcmp(s->optimizer, opt) != 0)
        err_set(e, ERR_INPUT, "%s: saved by a run with --optimizer %.40s, this one has %s: the "
                "optimizer state would be misread; give --optimizer %.40s, or --resume-anyway to "
                "keep the parameters and start %s's state afresh", path, s->optimizer, opt,
                s->optimizer, opt);
    else
        return true;
    return false;
}

/* A tensor of the checkpoint into dst (the model's parameter or the optimizer's state),
 * by name: the same dtype and shape, every element finite. */
static bool restore(const StFile *f, const char *path, const char *name, Tensor *dst, bool *used,
                    Err *e)
{
    const StEntry *en = safetensors_find(f, name);
    char want[256], got[256];
    if (!en) {
        err_set(e, ERR_INPUT, "%s: has no tensor '%s': saved from another model (or other --set "
                "values, or another optimizer's settings)", path, name);
        return false;
    }
    used[en - f->entry] = true;
    Tensor t = {.dt = en->dt, .rank = en->rank};
    memcpy(t.shape, en->shape, sizeof t.shape);
    bool same = t.dt == dst->dt && t.rank == dst->rank;
    for (int d = 0; same && d < t.rank; d++)
        same = t.shape[d] == dst->shape[d];
    if (!same) {
        err_set(e, ERR_INPUT, "%s: tensor '%s' is %s, the run's is %s: saved from another model "
                "(or other --set values)", path, name, tensor_fmt(&t, got, sizeof got),
                tensor_fmt(dst, want, sizeof want));
        return false;
    }
    /* checked where it lands: the file's bytes need not be aligned for floats */
    memcpy(dst->data, f->data + en->begin, tensor_nbytes(dst));
    return run_check_finite(dst, &name, 1, path, "saved from a diverged run; resume from an "
                        "earlier checkpoint", e);
}

/* Tensors the run did not take: another model's or another optimizer's. */
static bool none_left(const StFile *f, const bool *used, const char *path, Err *e)
{
    char list[512] = "";
    int left = 0;
    for (int i = 0; i < f->nentry; i++)
        if (!used[i] && left++ < 8)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", left > 1 ? ", " : "",
                     f->entry[i].name);
    if (!left)
        return true;
    err_set(e, ERR_INPUT, "%s: holds %d tensor%s this run has no use for (%s%s): saved from "
            "another model or optimizer", path, left, left == 1 ? "" : "s", list,
            left > 8 ? ", ..." : "");
    return false;
}

/* Parameters and, when the run is the same, the optimizer state (under --resume-anyway
 * with another optimizer, it starts afresh). */
static bool restore_all(Run *r, const StFile *f, const char *path, const Saved *s, Err *e)
{
    bool *used = calloc((size_t)f->nentry + 1, sizeof *used);
    bool ok = used, same_opt = strcmp(s->optimizer, optim_name(r->o->opt.kind)) == 0;
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory");
    for (int i = 0; ok && i < r->nparam + r->nkept; i++)
        ok = restore(f, path, r->param_name[i], &r->params[i], used, e);
    ok = ok && (!r->zero || zero_state_open(r->zero, e));
    for (int i = 0; ok && same_opt && i < run_state_count(r); i++) {
        const char *name;
        Tensor *st = run_state_at(r, i, &name);
        ok = restore(f, path, name, st, used, e);
    }
    ok = ok && (r->o->resume_anyway || none_left(f, used, path, e));
    if (r->zero && ok)
        zero_state_take(r->zero), zero_set_steps(r->zero, same_opt ? (int64_t)s->step : 0);
    else if (r->zero)
        zero_state_close(r->zero);
    else if (ok)
        optim_set_steps(r->opt, same_opt ? (int64_t)s->step : 0);
    free(used);
    return ok;
}

static void checkpoint_in(const char *dir, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, CHECKPOINT_FILE);
}

static void checkpoint_path(const Run *r, char *buf, size_t n) { checkpoint_in(r->o->save, buf, n); }

bool train_checkpoint_exists(const char *dir)
{
    char path[4096];
    checkpoint_in(dir, path, sizeof path);
    return access(path, F_OK) == 0;
}

/* The checkpoint read and every check that needs no model made (metadata, digest, the
 * same run), before anything is compiled: a damaged file is reported at once. */
bool run_open_checkpoint(Run *r, Err *e)
{
    char path[4096];
    checkpoint_path(r, path, sizeof path);
    if (access(path, F_OK) != 0) {
        err_set(e, ERR_INPUT, "%s: no checkpoint to resume from: run without --resume to start "
                "one", path);
        return false;
    }
    return safetensors_read(path, &r->ck, e) && read_saved(r, &r->ck, path, &r->saved, e) &&
           same_run(r, &r->saved, path, e);
}

/* Then, the model compiled, its tensors into the run (checked against it) and the step,
 * data position and loss scale it had reached. */
bool run_load_checkpoint(Run *r, uint64_t *data_pos, Err *e)
{
    char path[4096];
    checkpoint_path(r, path, sizeof path);
    const Saved *s = &r->saved;
    bool ok = restore_all(r, &r->ck, path, s, e);
    if (ok) {
        r->step = (int64_t)s->step;
        *data_pos = s->data_pos;
        if (s->has_scale && r->scale_at >= 0)
            r->scale = s->scale, r->good = (int64_t)s->good;
        ok = !r->dev || r->dt->upload(r->dev, r->opt, e); /* parameters: with the first run */
    }
    safetensors_free(&r->ck);
    return ok;
}
