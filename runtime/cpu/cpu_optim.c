/* cpu_optim.c — AdamW, SGD with momentum and Lion, each one loop over all parameters. */
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu/clones.h"
#include "runtime/cpu/cpu_optim.h"
#include "runtime/pool.h"

/* Elements per chunk of the parallel passes: large enough that waking a thread is cheap
 * next to the chunk's work. */
#define CHUNK 65536

struct Optimizer {
    OptConfig c;
    int n;              /* parameters */
    ParamRole *role;
    Tensor *m, *v;      /* AdamW: both; SGD (momentum): m; Lion: m */
    char **mname, **vname;
    int64_t steps;
    Pool *pool;         /* the passes split each tensor over its threads */
};

static const char *const names[] = {[OPT_ADAMW] = "adamw", [OPT_SGD] = "sgd", [OPT_LION] = "lion"};

bool optim_parse(const char *s, OptKind *k)
{
    int i = name_index(names, 3, s);
    if (i >= 0)
        *k = (OptKind)i;
    return i >= 0;
}

const char *optim_name(OptKind k) { return names[k]; }

static bool has_v(const Optimizer *o) { return o->c.kind == OPT_ADAMW; }
static bool has_m(const Optimizer *o) { return o->c.kind != OPT_SGD || o->c.momentum != 0; }

static bool zeros_like(Tensor *t, const Tensor *p, Err *e)
{
    if (!tensor_alloc(t, DT_F32, p->rank, p->shape, e))
        return false;
    memset(t->data, 0, tensor_nbytes(t));
    return true;
}

ParamRole optim_role_of(const OptConfig *c, const Node *p)
{
    if (param_is_buffer(p))
        return ROLE_BUFFER;
    bool decay = p->type.rank >= 2;
    for (int k = 0; k < c->nno_decay; k++)
        decay = decay && fnmatch(c->no_decay[k], node_name(p), 0) != 0;
    return decay ? ROLE_DECAY : ROLE_PLAIN;
}

Optimizer *optim_new_named(const OptConfig *c, int n, const Tensor *params,
                           const char *const *names, const ParamRole *role, Err *e)
{
    Optimizer *o = calloc(1, sizeof *o);
    bool ok = o != NULL;
    if (ok) {
        o->c = *c, o->n = n;
        o->pool = pool_new(c->threads, e);
        o->role = calloc((size_t)n + 1, sizeof *o->role);
        o->m = calloc((size_t)n + 1, sizeof *o->m), o->v = calloc((size_t)n + 1, sizeof *o->v);
        o->mname = calloc((size_t)n + 1, sizeof *o->mname);
        o->vname = calloc((size_t)n + 1, sizeof *o->vname);
        ok = o->role && o->m && o->v && o->mname && o->vname && o->pool;
    }
    for (int i = 0; ok && i < n; i++) {
        if (params[i].dt != DT_F32) {
            err_set(e, ERR_INPUT, "optimizer: parameter '%s' is %s; training keeps f32 master "
                    "weights", names[i], dtype_info[params[i].dt].name);
            ok = false;
            break;
        }
        o->role[i] = role[i];
        size_t len = strlen(names[i]) + 8;
        ok = (o->mname[i] = malloc(len)) && (o->vname[i] = malloc(len));
        if (ok)
            snprintf(o->mname[i], len, "m.%s", names[i]), snprintf(o->vname[i], len, "v.%s", names[i]);
        ok = ok && (!has_m(o) || zeros_like(&o->m[i], &params[i], e)) &&
             (!has_v(o) || zeros_like(&o->v[i], &params[i], e));
    }
    if (!ok) {
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "optimizer: out of memory for its state");
        optim_free(o);
        return NULL;
    }
    return o;
}

Optimizer *optim_new(const OptConfig *c, const Graph *g, const Tensor *params, Err *e)
{
    int np = graph_params(g, NULL), *ids = malloc(((size_t)np + 1) * sizeof *ids);
    const char **names = calloc((size_t)np + 1, sizeof *names);
    ParamRole *role = calloc((size_t)np + 1, sizeof *role);
    Optimizer *o = NULL;
    if (ids && names && role) {
        graph_params(g, ids);
        for (int i = 0; i < np; i++) {
            names[i] = node_name(&g->node[ids[i]]);
            role[i] = optim_role_of(c, &g->node[ids[i]]);
        }
        o = optim_new_named(c, np, params, names, role, e);
    } else
        err_set(e, ERR_MEMORY, "optimizer: out of memory for its state");
    free(ids), free(names), free(role);
    return o;
}

void optim_free(Optimizer *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->n; i++) {
        if (o->m)
            tensor_free(&o->m[i]);
        if (o->v)
            tensor_free(&o->v[i]);
        if (o->mname)
            free(o->mname[i]);
        if (o->vname)
            free(o->vname[i]);
    }
    free(o->m), free(o->v), free(o->mname), free(o->vname), free(o->role);
    pool_free(o->pool);
    free(o);
}

double lr_at(const LrSchedule *s, int64_t step)
{
    if (s->warmup > 0 && step < s->warmup)
        return s->lr * (double)(step + 1) / (double)s->warmup;
    if (s->total <= s->warmup)
        return s->lr;
    double t = (double)(step - s->warmup) / (double)(s->total - s->warmup);
    t = t > 1 ? 1 : t;
    return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1 + cos(M_PI * t));
}

/* The passes run at the host's widest vectors (clones.h): element by element the same IEEE
 * operations, so every clone gives the same bits (no FMA contraction: ISO C,
 * -ffp-contract=off, and no CONTRACT here). */

/* One tensor's pass, split over the pool's threads in chunks [begin, end). */
typedef struct Pass {
    const Optimizer *o;
    float *p, *m, *v;
    const float *g;
    float lr, scale;
    bool decay;
    float assign;        /* a buffer's p = g * assign (the unclipped gradient scale); 0:
                            not a buffer */
    int nparts;          /* the norm pass's: each chunk's sum and where it began, added */
    double *part;        /* in the order of the chunks afterwards, so the norm does not */
    int64_t *at;         /* depend on which thread finished first */
    pthread_mutex_t lock;
} Pass;

/* Lanes of the sum of squares: independent accumulators, so the loop vectorises and is
 * not one long chain of dependent f64 adds (4 cycles each); fixed, so the sum is the same
 * bits every run. */
#define SQUARE_LANES 8

VECTOR_CLONES static void squares(void *ctx, int64_t begin, int64_t end)
{
    Pass *x = ctx;
    const float *g = x->g;
    /* f64: an f32 sum over a chunk of 65536 loses about 1e-5, and the GPU's optimizer
     * (cuda_optim.h), which cannot sum in this order, agrees with an exact sum, not with
     * that */
    double lane[SQUARE_LANES] = {0};
    int64_t k = begin;
    for (; k + SQUARE_LANES <= end; k += SQUARE_LANES)
        for (int l = 0; l < SQUARE_LANES; l++)
            lane[l] += (double)g[k + l] * g[k + l];
    for (; k < end; k++)
        lane[0] += (double)g[k] * g[k];
    double part = 0;
    for (int l = 0; l < SQUARE_LANES; l++)
        part += lane[l];
    pthread_mutex_lock(&x->lock);
    x->part[x->nparts] = part, x->at[x->nparts++] = begin;
    pthread_mutex_unlock(&x->lock);
}

/* The chunks' sums of one tensor, in the order of the chunks. */
static double sum_in_order(Pass *x)
{
    double sum = 0;
    for (int done = 0; done < x->nparts; done++) {
        int first = done;
        for (int i = done + 1; i < x->nparts; i++)
            first = x->at[i] < x->at[first] ? i : first;
        double p = x->part[first];
        int64_t a = x->at[first];
        x->part[first] = x->part[done], x->at[first] = x->at[done];
        x->part[done] = p, x->at[done] = a;
        sum += p;
    }
    x->nparts = 0;
    return sum;
}

double optim_grad_squares(const Optimizer *o, const Tensor *grads)
{
    size_t most = (size_t)pool_threads(o->pool) + 1;
    Pass x = {.o = o, .part = malloc(most * sizeof *x.part), .at = malloc(most * sizeof *x.at)};
    if (!x.part || !x.at) {
        free(x.part), free(x.at);
        return NAN; /* the step is skipped, as for an overflow */
    }
    pthread_mutex_init(&x.lock, NULL);
    double sum = 0;
    for (int i = 0; i < o->n; i++) {
        if (o->role[i] == ROLE_BUFFER)
            continue;
        x.g = grads[i].data;
        pool_parallel_for(o->pool, tensor_numel(&grads[i]), CHUNK, squares, &x);
        sum += sum_in_order(&x);
    }
    pthread_mutex_destroy(&x.lock);
    free(x.part), free(x.at);
    return sum;
}


/* The update of elements [begin, end) of one tensor: p, its gradient g (times scale),
 * state m, v. */
VECTOR_CLONES static void update(void *ctx, int64_t begin, int64_t end)
{
    const Pass *x = ctx;
    const OptConfig *c = &x->o->c;
    float *p = x->p, *m = x->m, *v = x->v, lr = x->lr, scale = x->scale;
    const float *g = x->g;
    float wd = x->decay ? (float)(lr * c->weight_decay) : 0, b1 = (float)c->beta1, b2 = (float)c->beta2;
    if (x->assign) {
        for (int64_t k = begin; k < end; k++)
            p[k] = g[k] * x->assign;
    } else if (c->kind == OPT_ADAMW) {
        double t = (double)x->o->steps + 1;
        float bc1 = (float)(1 - pow(c->beta1, t)), bc2 = (float)(1 - pow(c->beta2, t));
        float step = lr / bc1, eps = (float)c->eps, rbc2 = 1 / sqrtf(bc2);
        for (int64_t k = begin; k < end; k++) {
            float gk = g[k] * scale;
            m[k] = b1 * m[k] + (1 - b1) * gk;
            v[k] = b2 * v[k] + (1 - b2) * gk * gk;
            p[k] -= wd * p[k] + step * m[k] / (sqrtf(v[k]) * rbc2 + eps);
        }
    } else if (c->kind == OPT_LION) {
        for (int64_t k = begin; k < end; k++) {
            float gk = g[k] * scale, u = b1 * m[k] + (1 - b1) * gk;
            p[k] -= wd * p[k] + lr * (float)((u > 0) - (u < 0));
            m[k] = b2 * m[k] + (1 - b2) * gk;
        }
    } else {
        float mu = (float)c->momentum;
        for (int64_t k = begin; k < end; k++) {
            float gk = g[k] * scale;
            if (m) {
                m[k] = mu * m[k] + gk;
                gk = m[k];
            }
            p[k] -= wd * p[k] + lr * gk;
        }
    }
}

void optim_apply(Optimizer *o, Tensor *params, const Tensor *grads, double grad_scale, double lr,
                 double norm)
{
    double scale = grad_scale;
    if (!isfinite(norm))
        return; /* a step on NaN or inf would ruin every weight: skipped */
    if (o->c.clip > 0 && norm > o->c.clip)
        scale *= o->c.clip / norm;
    for (int i = 0; i < o->n; i++) {
        Pass x = {.o = o, .p = params[i].data, .m = has_m(o) ? o->m[i].data : NULL,
                  .v = has_v(o) ? o->v[i].data : NULL, .g = grads[i].data, .lr = (float)lr,
                  .scale = (float)scale, .decay = o->role[i] == ROLE_DECAY,
                  .assign = o->role[i] == ROLE_BUFFER ? (float)grad_scale : 0};
        pool_parallel_for(o->pool, tensor_numel(&params[i]), CHUNK, update, &x);
    }
    o->steps++;
}

double optim_step(Optimizer *o, Tensor *params, const Tensor *grads, double grad_scale, double lr)
{
    double norm = sqrt(optim_grad_squares(o, grads)) * grad_scale;
    optim_apply(o, params, grads, grad_scale, lr, norm);
    return norm;
}

int optim_state_count(const Optimizer *o) { return o->n * (has_m(o) + has_v(o)); }

int optim_state_kinds(const OptConfig *c)
{
    Optimizer o = {.c = *c};
    return has_m(&o) + has_v(&o);
}

const char *optim_state_prefix(const OptConfig *c, int kind)
{
    Optimizer o = {.c = *c};
    return kind == 0 && has_m(&o) ? "m" : "v";
}

Tensor *optim_state(Optimizer *o, int i, const char **name)
{
    int per = has_m(o) + has_v(o), p = i / per;
    bool second = i % per == 1;
    *name = second ? o->vname[p] : (has_m(o) ? o->mname[p] : o->vname[p]);
    return second ? &o->v[p] : (has_m(o) ? &o->m[p] : &o->v[p]);
}

int64_t optim_steps(const Optimizer *o) { return o->steps; }

int64_t optim_state_bytes(const Optimizer *o)
{
    int64_t n = 0;
    for (int i = 0; i < o->n; i++)
        n += (int64_t)(has_m(o) ? tensor_nbytes(&o->m[i]) : 0) +
             (int64_t)(has_v(o) ? tensor_nbytes(&o->v[i]) : 0);
    return n;
}
void optim_set_steps(Optimizer *o, int64_t steps) { o->steps = steps; }

const OptConfig *optim_config(const Optimizer *o) { return &o->c; }

ParamRole optim_role(const Optimizer *o, int i) { return o->role[i]; }
