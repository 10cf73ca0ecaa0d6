/* zero.c — ZeRO stages 1 and 2 (train/zero.h): the optimizer over this rank's slices of
 * the parameters, the reduce-scatter before it and the all-gather after. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/zero.h"

struct Zero {
    int stage;
    DataParallel *dp;
    OptConfig c;
    Tensor *params;      /* the run's, whole on every rank */
    int nparam;
    char **names;        /* the parameters' */
    ParamRole *role;     /* and how each is updated */
    DpSlice *slice;      /* this rank's shard */
    int nslice;
    Optimizer *opt;      /* over the slices */
    Tensor *pview, *gview; /* the slices of the parameters and of the gradients a step uses */
    Tensor *acc;         /* stage 2: the shard's gradients summed over micro-batches */
    bool accumulated;    /* acc holds this step's gradients */
    int kinds;           /* state tensors per parameter (optim_state_kinds) */
    Tensor *full[2];     /* per kind, the whole state of every parameter (checkpoints) */
    char **full_name;    /* kinds * nparam: "m.<parameter>" */
};

/* Slice s of tensors t as a rank-1 tensor (a view: never freed). */
static Tensor view(const Tensor *t, DpSlice s)
{
    return (Tensor){.dt = DT_F32, .rank = 1, .shape = {s.hi - s.lo},
                    .data = (float *)t[s.tensor].data + s.lo};
}

static bool make_names(Zero *z, const Graph *g, Err *e)
{
    int *ids = malloc(((size_t)z->nparam + 1) * sizeof *ids);
    z->names = calloc((size_t)z->nparam + 1, sizeof *z->names);
    z->full_name = calloc((size_t)z->nparam * 2 + 1, sizeof *z->full_name);
    z->role = calloc((size_t)z->nparam + 1, sizeof *z->role);
    bool ok = ids && z->names && z->full_name && z->role;
    if (ok)
        graph_params(g, ids);
    for (int p = 0; ok && p < z->nparam; p++) {
        const char *name = node_name(&g->node[ids[p]]);
        z->role[p] = optim_role_of(&z->c, &g->node[ids[p]]);
        ok = (z->names[p] = strdup(name)) != NULL;
        for (int k = 0; ok && k < z->kinds; k++) {
            size_t len = strlen(name) + 4;
            ok = (z->full_name[p * z->kinds + k] = malloc(len)) != NULL;
            if (ok)
                snprintf(z->full_name[p * z->kinds + k], len, "%s.%s",
                         optim_state_prefix(&z->c, k), name);
        }
    }
    free(ids);
    if (!ok)
        err_set(e, ERR_MEMORY, "ZeRO: out of memory");
    return ok;
}

/* The shard's slices, their views and the optimizer over them. */
static bool make_shard(Zero *z, Err *e)
{
    z->nslice = dp_shard(z->dp, z->params, NULL);
    size_t n = (size_t)z->nslice + 1;
    z->slice = calloc(n, sizeof *z->slice);
    z->pview = calloc(n, sizeof *z->pview), z->gview = calloc(n, sizeof *z->gview);
    z->acc = calloc(n, sizeof *z->acc);
    const char **names = calloc(n, sizeof *names);
    ParamRole *role = calloc(n, sizeof *role);
    bool ok = z->slice && z->pview && z->gview && z->acc && names && role;
    if (ok) {
        dp_shard(z->dp, z->params, z->slice);
        for (int j = 0; j < z->nslice; j++) {
            z->pview[j] = view(z->params, z->slice[j]);
            names[j] = z->names[z->slice[j].tensor];
            role[j] = z->role[z->slice[j].tensor];
        }
        z->opt = optim_new_named(&z->c, z->nslice, z->pview, names, role, e);
        ok = z->opt != NULL;
    } else
        err_set(e, ERR_MEMORY, "ZeRO: out of memory");
    free(names), free(role);
    return ok;
}

Zero *zero_new(int stage, DataParallel *dp, const OptConfig *c, const Graph *g, Tensor *params,
               int n, Err *e)
{
    Zero *z = calloc(1, sizeof *z);
    if (!z) {
        err_set(e, ERR_MEMORY, "ZeRO: out of memory");
        return NULL;
    }
    *z = (Zero){.stage = stage, .dp = dp, .c = *c, .params = params, .nparam = n,
                .kinds = optim_state_kinds(c)};
    if (make_names(z, g, e) && dp_plan(dp, params, n, e) && make_shard(z, e))
        return z;
    zero_free(z);
    return NULL;
}

void zero_free(Zero *z)
{
    if (!z)
        return;
    zero_state_close(z);
    for (int j = 0; z->acc && j < z->nslice; j++)
        tensor_free(&z->acc[j]);
    for (int p = 0; p < z->nparam; p++) {
        if (z->names)
            free(z->names[p]);
        for (int k = 0; z->full_name && k < z->kinds; k++)
            free(z->full_name[p * z->kinds + k]);
    }
    optim_free(z->opt);
    free(z->names), free(z->role), free(z->full_name), free(z->slice), free(z->pview), free(z->gview), free(z->acc);
    free(z);
}

bool zero_accumulate(Zero *z, Tensor *grads, bool first, Err *e)
{
    if (!dp_sum_own_grads(z->dp, grads, z->nparam, e))
        return false;
    for (int j = 0; j < z->nslice; j++) {
        Tensor g = view(grads, z->slice[j]);
        if (first && !z->acc[j].data && !tensor_alloc(&z->acc[j], DT_F32, 1, g.shape, e))
            return false;
        float *a = z->acc[j].data;
        const float *d = g.data;
        for (int64_t k = 0; k < g.shape[0]; k++)
            a[k] = first ? d[k] : a[k] + d[k];
    }
    z->accumulated = true;
    return true;
}

bool zero_step(Zero *z, Tensor *grads, double grad_scale, double lr, double *norm, Err *e)
{
    if (!z->accumulated && !dp_sum_own_grads(z->dp, grads, z->nparam, e))
        return false;
    for (int j = 0; j < z->nslice; j++)
        z->gview[j] = z->accumulated ? z->acc[j] : view(grads, z->slice[j]);
    z->accumulated = false;
    double squares = optim_grad_squares(z->opt, z->gview);
    if (!dp_sum_scalar(z->dp, &squares, e))
        return false;
    *norm = sqrt(squares) * grad_scale;
    optim_apply(z->opt, z->pview, z->gview, grad_scale, lr, *norm);
    return dp_gather(z->dp, z->params, z->nparam, e);
}

void zero_set_steps(Zero *z, int64_t steps) { optim_set_steps(z->opt, steps); }

int64_t zero_state_bytes(const Zero *z)
{
    int64_t n = optim_state_bytes(z->opt);
    for (int j = 0; j < z->nslice; j++)
        n += (int64_t)tensor_nbytes(&z->acc[j]);
    return n;
}

/* ---------------------------------------------------------------- checkpoints */

int zero_state_count(const Zero *z) { return z->nparam * z->kinds; }

bool zero_state_open(Zero *z, Err *e)
{
    for (int k = 0; k < z->kinds; k++) {
        z->full[k] = calloc((size_t)z->nparam + 1, sizeof *z->full[k]);
        for (int p = 0; z->full[k] && p < z->nparam; p++) {
            const Tensor *t = &z->params[p];
            if (!tensor_alloc(&z->full[k][p], DT_F32, t->rank, t->shape, e)) {
                zero_state_close(z);
                return false;
            }
            memset(z->full[k][p].data, 0, tensor_nbytes(t));
        }
        if (!z->full[k]) {
            zero_state_close(z);
            err_set(e, ERR_MEMORY, "ZeRO: out of memory for the whole optimizer state");
            return false;
        }
    }
    return true;
}

/* Each slice's state into the whole tensors (into) or out of them. */
static void copy_state(Zero *z, bool into)
{
    for (int j = 0; j < z->nslice; j++)
        for (int k = 0; k < z->kinds; k++) {
            const char *name;
            Tensor *part = optim_state(z->opt, j * z->kinds + k, &name);
            Tensor whole = view(z->full[k], z->slice[j]);
            size_t bytes = tensor_nbytes(part);
            memcpy(into ? whole.data : part->data, into ? part->data : whole.data, bytes);
        }
}

bool zero_state_gather(Zero *z, Err *e)
{
    if (!zero_state_open(z, e))
        return false;
    copy_state(z, true);
    for (int k = 0; k < z->kinds; k++)
        if (!dp_gather(z->dp, z->full[k], z->nparam, e)) {
            zero_state_close(z);
            return false;
        }
    return true;
}

Tensor *zero_state(Zero *z, int i, const char **name)
{
    *name = z->full_name[i];
    return &z->full[i % z->kinds][i / z->kinds];
}

void zero_state_take(Zero *z)
{
    if (z->full[0])
        copy_state(z, false);
    zero_state_close(z);
}

void zero_state_close(Zero *z)
{
    for (int k = 0; k < 2; k++) {
        for (int p = 0; z->full[k] && p < z->nparam; p++)
            tensor_free(&z->full[k][p]);
        free(z->full[k]);
        z->full[k] = NULL;
    }
}
