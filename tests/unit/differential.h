/* differential.h — the random graphs of test_differential.c, shared with test_cuda_run.c
 * (which runs them on a GPU): seeded graphs of the ops lowering handles on random shapes with
 * a symbolic batch, their inputs and parameters, the interpreter's outputs, and the
 * comparison with its tolerance. Static functions: each test program includes it once. */
#ifndef COIL_TEST_DIFFERENTIAL_H
#define COIL_TEST_DIFFERENTIAL_H

#include <stdlib.h>

#include "check.h"
#include "runtime/init.h"

#define MAX_VALUES 64

typedef struct Rng {
    uint64_t s;
} Rng;

static uint32_t next(Rng *r)
{
    r->s = r->s * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(r->s >> 33);
}

static int pick(Rng *r, int n) { return (int)(next(r) % (uint32_t)n); }

/* ---------------------------------------------------------------- building */

typedef struct Maker {
    Rng rng;
    Builder b;
    Graph *g;
    int value[MAX_VALUES]; /* float values built so far */
    int n, nparam, ninput;
    uint32_t batch;        /* the symbol B */
} Maker;

static Type type_of(const Maker *m, int id) { return m->g->node[id].type; }

static void add(Maker *m, int id)
{
    if (id >= 0 && m->n < MAX_VALUES)
        m->value[m->n++] = id;
}

/* A value to build on: one of the last few half the time, so chains grow deep. */
static int any(Maker *m)
{
    int recent = m->n < 3 ? m->n : 3;
    return pick(&m->rng, 2) ? m->value[m->n - 1 - pick(&m->rng, recent)]
                            : m->value[pick(&m->rng, m->n)];
}

/* A random shape of rank 1 to 3 whose first dim may be the batch. */
static Type random_type(Maker *m)
{
    Type t = {.dt = DT_F32, .rank = 1 + pick(&m->rng, 3)};
    for (int d = 0; d < t.rank; d++)
        t.dim[d] = dim_static(1 + pick(&m->rng, 7));
    if (pick(&m->rng, 2))
        t.dim[0] = (Dim){1, m->batch, 0};
    return t;
}

static int new_param(Maker *m, const Type *t)
{
    char name[32];
    snprintf(name, sizeof name, "p%d", m->nparam++);
    return b_param(&m->b, name, t, "normal(1)");
}

/* An operand for x: x itself, a parameter of a shape x broadcasts with, or a scalar. */
static int partner(Maker *m, int x)
{
    Type t = type_of(m, x);
    switch (pick(&m->rng, 4)) {
    case 0: return x;
    case 1: return b_scalar(&m->b, (double)(pick(&m->rng, 5) - 2) * 0.5, DT_F32);
    case 2:
        for (int d = 0; d < t.rank; d++) /* some dims stretched from 1 */
            if (pick(&m->rng, 2) && dim_is_static(t.dim[d]))
                t.dim[d] = dim_static(1);
        return new_param(m, &t);
    default: {
        int y = any(m);
        Type u = type_of(m, y);
        return type_same_shape(&t, &u) ? y : x;
    }
    }
}

/* Well-conditioned ones only: a last-ulp difference in exp's result fed to cos changes
 * everything, and that says nothing of a compiler (test_cpu holds each function's
 * accuracy; softmax here exercises exp). */
static const int unary_ops[] = {OP_NEG, OP_ABS, OP_TANH, OP_SIGMOID, OP_RELU, OP_GELU,
                                OP_GELU_TANH, OP_SILU, OP_ERF};
static const int binary_ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_MAXIMUM, OP_MINIMUM};
static const int reduce_ops[] = {OP_SUM, OP_MEAN, OP_MAX, OP_MIN};
#define COUNT(a) (int)(sizeof a / sizeof a[0])

static int make_reduce(Maker *m, int x)
{
    Type t = type_of(m, x);
    int64_t axes[COIL_MAX_RANK];
    int n = 0;
    for (int d = 0; d < t.rank; d++)
        if (pick(&m->rng, 2))
            axes[n++] = d - (pick(&m->rng, 2) ? t.rank : 0);
    return b_reduce(&m->b, reduce_ops[pick(&m->rng, COUNT(reduce_ops))], x, n ? n : 1,
                    n ? axes : (int64_t[]){-1}, pick(&m->rng, 2));
}

/* x @ W, W a parameter [K, N], or a PyTorch-layout weight [N, K] read transposed. */
static int make_matmul(Maker *m, int x)
{
    Type t = type_of(m, x);
    Dim k = t.dim[t.rank - 1], n = dim_static(1 + pick(&m->rng, 9));
    if (t.rank < 2 || !dim_is_static(k))
        return -1;
    if (pick(&m->rng, 2)) {
        Type w = {.dt = DT_F32, .rank = 2, .dim = {n, k}};
        return b_matmul(&m->b, x, b_transpose(&m->b, new_param(m, &w), 2, (int64_t[]){1, 0}));
    }
    Type w = {.dt = DT_F32, .rank = 2, .dim = {k, n}};
    return b_matmul(&m->b, x, new_param(m, &w));
}

static int make_view(Maker *m, int x)
{
    Type t = type_of(m, x);
    int d = pick(&m->rng, t.rank);
    switch (pick(&m->rng, 3)) {
    case 0: { /* transpose: reverse the dims */
        int64_t perm[COIL_MAX_RANK];
        for (int i = 0; i < t.rank; i++)
            perm[i] = t.rank - 1 - i;
        return b_transpose(&m->b, x, t.rank, perm);
    }
    case 1: { /* slice a static dim */
        if (!dim_is_static(t.dim[d]) || t.dim[d].k < 2)
            return -1;
        return b_slice(&m->b, x, d, pick(&m->rng, 2), t.dim[d].k, 1 + pick(&m->rng, 2));
    }
    default: { /* reshape: merge the last two dims */
        if (t.rank < 2)
            return -1;
        Type r = t;
        bool overflow = false;
        r.dim[t.rank - 2] = dim_mul(t.dim[t.rank - 2], t.dim[t.rank - 1], &overflow);
        r.rank--;
        return overflow ? -1 : b_reshape(&m->b, x, &r);
    }
    }
}

static int make_other(Maker *m, int x)
{
    Type t = type_of(m, x);
    switch (pick(&m->rng, 6)) {
    case 0: return b_unary(&m->b, OP_SOFTMAX, x);
    case 1: {
        Type w = {.dt = DT_F32, .rank = 1, .dim = {t.dim[t.rank - 1]}};
        if (!dim_is_static(w.dim[0]))
            return -1;
        /* eps 1e-3, not the default 1e-5: a row of equal values (a where's broadcast
         * operand) has an f32 variance of rounding noise, which 1/sqrt(eps) amplifies; at
         * 1e-5 that reached the comparison's tolerance (seed 460544: 1.08e-4) */
        int in[3] = {x, new_param(m, &w), new_param(m, &w)};
        Attr eps = attr_float("eps", 1e-3);
        return b_op(&m->b, OP_LAYER_NORM, in, 3, &eps, 1, NULL);
    }
    case 2: return b_concat(&m->b, (int[]){x, x}, 2, pick(&m->rng, t.rank));
    case 3: { /* gather rows of x by an index input */
        Type ids = {.dt = DT_I64, .rank = 1, .dim = {dim_static(1 + pick(&m->rng, 5))}};
        char name[32];
        snprintf(name, sizeof name, "ids%d", m->ninput++);
        return b_gather(&m->b, x, b_input(&m->b, name, &ids), 0);
    }
    case 4: { /* rows of x, changed, added back into x at an index input (repeats likely) */
        Type ids = {.dt = DT_I32, .rank = 1 + pick(&m->rng, 2)};
        for (int d = 0; d < ids.rank; d++)
            ids.dim[d] = dim_static(1 + pick(&m->rng, 4));
        if (ids.rank + t.rank - 1 > COIL_MAX_RANK)
            return -1;
        char name[32];
        snprintf(name, sizeof name, "ids%d", m->ninput++);
        int at = b_input(&m->b, name, &ids);
        int rows = b_unary(&m->b, OP_TANH, b_gather(&m->b, x, at, 0));
        return b_index_add(&m->b, x, at, rows);
    }
    default: {
        int c = b_binary(&m->b, OP_GT, x, b_scalar(&m->b, 0, DT_F32));
        return b_where(&m->b, c, x, partner(m, x));
    }
    }
}

static int make_op(Maker *m)
{
    int x = any(m);
    if (type_of(m, x).rank == 0) /* a scalar: only pointwise ops apply */
        return b_unary(&m->b, unary_ops[pick(&m->rng, COUNT(unary_ops))], x);
    switch (pick(&m->rng, 7)) {
    case 0: return b_unary(&m->b, unary_ops[pick(&m->rng, COUNT(unary_ops))], x);
    case 1:
    case 2: return b_binary(&m->b, binary_ops[pick(&m->rng, COUNT(binary_ops))], x, partner(m, x));
    case 3: return make_reduce(m, x);
    case 4: return make_matmul(m, x);
    case 5: return make_view(m, x);
    default: return make_other(m, x);
    }
}

static Graph *random_graph(uint64_t seed, Err *e)
{
    Maker m = {.rng = {seed * 2654435761u + 1}};
    m.g = graph_new("random");
    m.b = builder_make(m.g, e);
    m.batch = 1u << graph_sym(m.g, "B", 1);
    for (int i = 0, n = 1 + pick(&m.rng, 2); i < n; i++) {
        char name[16];
        Type t = random_type(&m);
        snprintf(name, sizeof name, "x%d", m.ninput++);
        add(&m, b_input(&m.b, name, &t));
    }
    for (int i = 0, n = 5 + pick(&m.rng, 16); i < n && err_ok(e); i++) {
        int v = make_op(&m);
        if (v >= 0 && dtype_info[type_of(&m, v).dt].is_float)
            add(&m, v);
        if (!err_ok(e)) /* an op the shapes did not allow: drop it, go on */
            *e = (Err){0}, m.b = builder_make(m.g, e);
    }
    b_output(&m.b, m.value[m.n - 1], "out");
    if (m.n > 2 && pick(&m.rng, 2))
        b_output(&m.b, m.value[pick(&m.rng, m.n - 1)], "extra");
    if (!err_ok(e)) {
        graph_free(m.g);
        return NULL;
    }
    return m.g;
}

/* ---------------------------------------------------------------- checking */

static bool close_enough(double got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= 1e-4 + 1e-3 * fabs(want);
}

typedef struct Data {
    Tensor *in, *params, *want;
    int nparam;
} Data;

static void data_free(const Graph *g, Data *d)
{
    for (int i = 0; d->in && i < g->ninput; i++)
        tensor_free(&d->in[i]);
    for (int i = 0; d->params && i < d->nparam; i++)
        tensor_free(&d->params[i]);
    for (int i = 0; d->want && i < g->noutput; i++)
        tensor_free(&d->want[i]);
    free(d->in);
    free(d->params);
    free(d->want);
}

static bool data_make(const Graph *g, uint64_t seed, Data *d, Err *e)
{
    SymSize batch = {"B", 1 + (int64_t)(seed % 4)};
    SymBind sb;
    d->nparam = graph_params(g, NULL);
    d->in = calloc((size_t)g->ninput + 1, sizeof *d->in);
    d->params = calloc((size_t)d->nparam + 1, sizeof *d->params);
    d->want = calloc((size_t)g->noutput + 1, sizeof *d->want);
    bool *given = calloc((size_t)g->ninput + 1, sizeof *given);
    bool has_batch = false; /* a fixed-size graph has no B to size */
    for (int i = 0; i < g->nsym; i++)
        has_batch = has_batch || strcmp(g->sym[i], "B") == 0;
    bool ok = d->in && d->params && d->want && given &&
              init_symbols(g, NULL, NULL, &batch, has_batch, 2, &sb, e) &&
              init_inputs(g, &sb, seed, given, d->in, e) && init_params(g, &sb, seed, d->params, e) &&
              interp_run(g, d->in, d->params, d->want, NULL, e);
    free(given);
    return ok;
}

static bool outputs_match(const Graph *g, const Data *d, Tensor *got, const char *how,
                          uint64_t seed)
{
    bool ok = true;
    for (int i = 0; i < g->noutput; i++) {
        int64_t n = tensor_numel(&d->want[i]);
        for (int64_t j = 0; ok && j < n; j++) {
            double x = dtype_load(got[i].dt, got[i].data, j);
            double w = dtype_load(d->want[i].dt, d->want[i].data, j);
            if (!close_enough(x, w)) {
                fprintf(stderr, "seed %llu [%s]: %s[%lld] = %.9g, the interpreter gives %.9g\n",
                        (unsigned long long)seed, how, g->output_name[i], (long long)j, x, w);
                ok = false;
            }
        }
        tensor_free(&got[i]);
    }
    return ok;
}

#endif
