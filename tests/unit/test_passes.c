/* test_passes.c — each pass against the interpreter on the graph it was given: fold
 * is bit-exact, CSE merges only equal values, DCE keeps the signature and the state,
 * decompose agrees within 1e-6; and the pass manager's handling of names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

/* ---------------------------------------------------------------- running graphs */

#define BATCH 3

/* Inputs and params for a graph, drawn once and fed to it before and after a pass. */
typedef struct Feed {
    Tensor in[16], par[16];
    int nin, npar;
} Feed;

/* Normal floats; integers uniform in [0, int_bound) (labels, indices). */
static void fill(Tensor *t, const Graph *g, const Node *n, uint64_t seed, int int_bound)
{
    SymBind sb = {0};
    for (int s = 0; s < g->nsym; s++)
        sb.val[s] = BATCH, sb.known[s] = true;
    int64_t shape[COIL_MAX_RANK];
    Err e = {0};
    CHECK(type_resolve(&n->type, &sb, shape));
    CHECK(tensor_alloc(t, n->type.dt, n->type.rank, shape, &e));
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double v = dtype_info[t->dt].is_float ? philox_normal(seed, 0, (uint64_t)i)
                                              : floor(philox_uniform(seed, 0, (uint64_t)i) * int_bound);
        dtype_store(t->dt, t->data, i, v);
    }
}

static Feed feed_make(const Graph *g, int int_bound)
{
    Feed f = {0};
    for (int i = 0; i < g->ninput; i++)
        fill(&f.in[f.nin++], g, &g->node[g->input[i]], 100 + (uint64_t)i, int_bound);
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_PARAM)
            fill(&f.par[f.npar++], g, &g->node[i], 200 + (uint64_t)i, int_bound);
    return f;
}

static void feed_free(Feed *f)
{
    for (int i = 0; i < f->nin; i++)
        tensor_free(&f->in[i]);
    for (int i = 0; i < f->npar; i++)
        tensor_free(&f->par[i]);
}

/* outs: g->noutput tensors; false (with a message) when the interpreter fails. */
static bool run(const Graph *g, const Feed *f, Tensor *outs)
{
    Err e = {0};
    if (!interp_run(g, f->in, f->par, outs, NULL, &e)) {
        fprintf(stderr, "interp_run(%s): %s\n", g->name, e.msg);
        return false;
    }
    return true;
}

static void free_outs(Tensor *outs, int n)
{
    for (int i = 0; i < n; i++)
        tensor_free(&outs[i]);
}

/* tol < 0: bit-identical; else |a - b| <= tol * (1 + |b|) element by element. */
static bool outputs_agree(const Graph *a, const Graph *b, const Feed *f, double tol)
{
    Tensor oa[32], ob[32];
    if (a->noutput != b->noutput || !run(a, f, oa))
        return false;
    if (!run(b, f, ob)) {
        free_outs(oa, a->noutput);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < a->noutput; i++) {
        ok &= oa[i].dt == ob[i].dt && oa[i].rank == ob[i].rank && tensor_numel(&oa[i]) == tensor_numel(&ob[i]);
        if (ok && tol < 0)
            ok &= memcmp(oa[i].data, ob[i].data, tensor_nbytes(&oa[i])) == 0;
        for (int64_t j = 0; ok && tol >= 0 && j < tensor_numel(&oa[i]); j++) {
            double x = dtype_load(oa[i].dt, oa[i].data, j), y = dtype_load(ob[i].dt, ob[i].data, j);
            ok &= fabs(x - y) <= tol * (1 + fabs(y)) || (isnan(x) && isnan(y));
        }
        if (!ok) {
            fprintf(stderr, "output %s differs\n", a->output_name[i]);
            break;
        }
    }
    free_outs(oa, a->noutput);
    free_outs(ob, b->noutput);
    return ok;
}

static int count_op(const Graph *g, int op)
{
    int k = 0;
    for (int i = 0; i < g->nnode; i++)
        k += g->node[i].op == op;
    return k;
}

static Graph *apply(PassFn pass, const Graph *g)
{
    Err e = {0};
    Graph *r = pass(g, &e);
    if (!r)
        fprintf(stderr, "pass on %s failed: %s\n", g->name, e.msg);
    CHECK(r != NULL);
    return r;
}

/* Interpret before and after on the same random feed, then free both graphs. */
static void check_agree(Graph *before, Graph *after, int int_bound, double tol)
{
    Feed feed = feed_make(before, int_bound);
    CHECK(outputs_agree(before, after, &feed, tol));
    feed_free(&feed);
    graph_free(after);
    graph_free(before);
}

/* g, or NULL (a failed check) when building it failed. */
static Graph *built(Graph *g, const Err *e)
{
    if (err_ok(e))
        return g;
    fprintf(stderr, "building graph %s: %s\n", g->name, e->msg);
    CHECK(!"graph builds");
    graph_free(g);
    return NULL;
}

static Type ty(DType dt, int rank, const int64_t *dims) { return type_make(dt, rank, dims); }

/* f32[B, n] with B the graph's first symbol. */
static Type batched(Graph *g, int64_t n)
{
    Type t = {.dt = DT_F32, .rank = 2, .dim = {{1, 1u << graph_sym(g, "B", 1)}, {n, 0}}};
    return t;
}

/* ---------------------------------------------------------------- fold */

static bool is_constant_leaf(const Node *n)
{
    return n->op == OP_CONSTANT || n->op == OP_FULL || n->op == OP_IOTA;
}

/* A node fold should have evaluated: operands all constant leaves, small static result. */
static bool foldable(const Graph *g, const Node *n)
{
    bool overflow = false;
    Dim numel = type_numel(&n->type, &overflow);
    if ((op_info[n->op].flags & (OPF_LEAF | OPF_RANDOM)) || numel.syms || numel.k > FOLD_MAX_ELEMS)
        return false;
    for (int j = 0; j < n->nin; j++) {
        const Node *a = &g->node[n->in[j]];
        Dim an = type_numel(&a->type, &overflow);
        if (!is_constant_leaf(a) || an.syms || an.k > FOLD_MAX_ELEMS)
            return false;
    }
    return true;
}

/* Constants feeding unary, binary, reduction, matmul, shape ops and a composite,
 * next to an input they must not absorb. */
static Graph *fold_graph(void)
{
    Graph *g = graph_new("fold");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type xt = batched(g, 3);
    int x = b_input(&b, "x", &xt);
    int64_t d3[] = {3}, d13[] = {1, 3}, d32[] = {3, 2}, dbig[] = {300, 300};
    Type t3 = ty(DT_F32, 1, d3), t13 = ty(DT_F32, 2, d13), t32 = ty(DT_F32, 2, d32);
    Type ti3 = ty(DT_I32, 1, d3), tbig = ty(DT_F32, 2, dbig);
    int c = b_constant(&b, &t3, (double[]){0.5, -1.25, 3});
    int e1 = b_unary(&b, OP_EXP, b_binary(&b, OP_MUL, c, b_scalar(&b, 2, DT_F32)));
    int io = b_cast(&b, b_iota(&b, &ti3, 0), DT_F32);
    int sm = b_op(&b, OP_SOFTMAX, (int[]){b_binary(&b, OP_ADD, e1, io)}, 1, NULL, 0, NULL);
    int w = b_constant(&b, &t32, (double[]){1, 2, 3, -4, 0.125, 6});
    int r = b_reduce(&b, OP_SUM, b_matmul(&b, b_reshape(&b, sm, &t13), w), 0, NULL, false);
    int q = b_cast(&b, b_binary(&b, OP_DIV, b_scalar(&b, -7, DT_I32), b_scalar(&b, 2, DT_I32)), DT_F32);
    int y = b_binary(&b, OP_ADD, b_binary(&b, OP_MUL, x, sm), b_binary(&b, OP_ADD, r, q));
    b_output(&b, y, "y");
    b_output(&b, b_reduce(&b, OP_SUM, b_unary(&b, OP_EXP, b_full(&b, 0.1, &tbig)), 0, NULL, false), "big");
    b_output(&b, b_binary(&b, OP_ADD, b_rand(&b, &t3, 5, 0), c), "rnd");
    b_output(&b, b_binary(&b, OP_MUL, x, b_scalar(&b, 1, DT_F32)), "x_times_1");
    b_output(&b, b_binary(&b, OP_MUL, b_full(&b, 1, &t13), x), "ones_times_x");
    b_output(&b, b_binary(&b, OP_SUB, x, b_scalar(&b, 0, DT_F32)), "x_minus_0");
    b_output(&b, b_binary(&b, OP_ADD, x, b_scalar(&b, 0, DT_F32)), "x_plus_0");
    b_output(&b, b_binary(&b, OP_DIV, b_scalar(&b, 1, DT_F32), x), "one_over_x");
    return built(g, &e);
}

static void test_fold(void)
{
    Graph *g = fold_graph();
    Graph *f = g ? apply(pass_fold, g) : NULL;
    if (!f) {
        graph_free(g);
        return;
    }
    for (int i = 0; i < f->nnode; i++)
        CHECK(!foldable(f, &f->node[i]));
    CHECK(count_op(f, OP_SOFTMAX) == 0 && count_op(f, OP_MATMUL) == 0 && count_op(f, OP_CAST) == 0);
    CHECK(count_op(f, OP_EXP) == 1);  /* 90000 elements: over the cap, left alone */
    CHECK(count_op(f, OP_RAND) == 1); /* random values are not folded */
    CHECK(f->output[3] == f->input[0] && f->output[4] == f->input[0] && f->output[5] == f->input[0]);
    CHECK(f->output[6] != f->input[0]); /* -0.0 + 0.0 is 0.0: not an identity */
    CHECK(f->output[7] != f->input[0]);
    Feed feed = feed_make(g, 3);
    float special[] = {-0.0f, NAN, INFINITY, -INFINITY, 0.0f, 1e-40f};
    memcpy(feed.in[0].data, special, sizeof special); /* B = 3: 9 elements */
    CHECK(outputs_agree(g, f, &feed, -1));
    feed_free(&feed);
    graph_free(f);
    graph_free(g);
}

/* An out-of-range gather on constants stays for run time to report, as the interpreter would. */
static void test_fold_keeps_errors(void)
{
    Graph *g = graph_new("bad_gather");
    Err e = {0};
    Builder b = builder_make(g, &e);
    int64_t d3[] = {3}, d1[] = {1};
    Type t3 = ty(DT_F32, 1, d3), ti = ty(DT_I64, 1, d1);
    int table = b_constant(&b, &t3, (double[]){1, 2, 3});
    b_output(&b, b_gather(&b, table, b_constant(&b, &ti, (double[]){5}), 0), NULL);
    if (!(g = built(g, &e)))
        return;
    Graph *f = apply(pass_fold, g);
    CHECK(f && count_op(f, OP_GATHER) == 1);
    graph_free(f);
    graph_free(g);
}

/* ---------------------------------------------------------------- cse */

static void test_cse(void)
{
    Graph *g = graph_new("cse");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type xt = batched(g, 4);
    int64_t d4[] = {4}, d44[] = {4, 4};
    Type t4 = ty(DT_F32, 1, d4), t44 = ty(DT_F32, 2, d44);
    int x = b_input(&b, "x", &xt), y = b_input(&b, "y", &xt);
    int z = b_input(&b, "z", &xt); /* same type as y, still its own input */
    int pa = b_param(&b, "a", &t4, NULL), pb = b_param(&b, "b", &t4, NULL);
    int same[][2] = {
        {b_binary(&b, OP_ADD, x, y), b_binary(&b, OP_ADD, y, x)},                 /* commutes */
        {b_reduce(&b, OP_SUM, x, 1, (int64_t[]){1}, true), b_reduce(&b, OP_SUM, x, 1, (int64_t[]){1}, true)},
        {b_constant(&b, &t4, (double[]){1, 2, 3, NAN}), b_constant(&b, &t4, (double[]){1, 2, 3, NAN})},
        {b_rand(&b, &t44, 1, 16), b_rand(&b, &t44, 1, 16)},
        {b_unary(&b, OP_EXP, b_binary(&b, OP_MUL, x, y)), b_unary(&b, OP_EXP, b_binary(&b, OP_MUL, y, x))},
    };
    int differ[][2] = {
        {b_binary(&b, OP_SUB, x, y), b_binary(&b, OP_SUB, y, x)},                 /* order matters */
        {b_reduce(&b, OP_SUM, x, 1, (int64_t[]){0}, true), b_reduce(&b, OP_SUM, x, 1, (int64_t[]){1}, true)},
        {b_reduce(&b, OP_SUM, x, 1, (int64_t[]){1}, true), b_reduce(&b, OP_SUM, x, 1, (int64_t[]){1}, false)},
        {b_constant(&b, &t4, (double[]){1, 2, 3, 0.0}), b_constant(&b, &t4, (double[]){1, 2, 3, -0.0})},
        {b_scalar(&b, 0.0, DT_F32), b_scalar(&b, -0.0, DT_F32)},
        {b_rand(&b, &t44, 1, 16), b_rand(&b, &t44, 2, 16)},
        {pa, pb},                                                                  /* two tensors of state */
        {b_binary(&b, OP_ADD, x, y), b_binary(&b, OP_ADD, x, z)},
        {b_scalar(&b, 1, DT_F32), b_scalar(&b, 1, DT_I32)},                       /* type */
    };
    int nsame = (int)(sizeof same / sizeof same[0]), ndiffer = (int)(sizeof differ / sizeof differ[0]);
    for (int i = 0; i < nsame; i++)
        for (int j = 0; j < 2; j++)
            b_output(&b, same[i][j], NULL);
    for (int i = 0; i < ndiffer; i++)
        for (int j = 0; j < 2; j++)
            b_output(&b, differ[i][j], NULL);
    if (!(g = built(g, &e)))
        return;
    Graph *c = apply(pass_cse, g);
    if (!c) {
        graph_free(g);
        return;
    }
    for (int i = 0; i < nsame; i++)
        CHECK(c->output[2 * i] == c->output[2 * i + 1]);
    for (int i = 0; i < ndiffer; i++)
        CHECK(c->output[2 * (nsame + i)] != c->output[2 * (nsame + i) + 1]);
    CHECK(c->ninput == 3 && graph_params(c, NULL) == 2);
    check_agree(g, c, 3, -1);
}

/* ---------------------------------------------------------------- dce */

static void test_dce(void)
{
    Graph *g = graph_new("dce");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type xt = batched(g, 4);
    int64_t d4[] = {4};
    Type t4 = ty(DT_F32, 1, d4);
    int x = b_input(&b, "x", &xt);
    b_input(&b, "unused", &xt);
    b_param(&b, "frozen", &t4, "zeros"); /* state nobody reads yet */
    int w = b_param(&b, "w", &t4, NULL);
    b_unary(&b, OP_EXP, b_binary(&b, OP_MUL, x, w)); /* dead */
    int live = b_binary(&b, OP_ADD, x, w);
    b_reduce(&b, OP_SUM, live, 0, NULL, false); /* dead, reads a live value */
    b_output(&b, live, "y");
    b_output(&b, x, "x_again");
    if (!(g = built(g, &e)))
        return;
    Graph *d = apply(pass_dce, g);
    if (!d) {
        graph_free(g);
        return;
    }
    CHECK(d->nnode == 5); /* x, unused, frozen, w, add */
    CHECK(d->ninput == 2 && strcmp(node_name(&d->node[d->input[1]]), "unused") == 0);
    int params[2];
    CHECK(graph_params(d, params) == 2);
    CHECK(strcmp(node_name(&d->node[params[0]]), "frozen") == 0);
    CHECK(strcmp(node_str(&d->node[params[0]], "init"), "zeros") == 0);
    CHECK(d->noutput == 2 && strcmp(d->output_name[0], "y") == 0 && d->output[1] == d->input[0]);
    CHECK(count_op(d, OP_EXP) == 0 && count_op(d, OP_SUM) == 0);
    check_agree(g, d, 3, -1);
}

/* ---------------------------------------------------------------- decompose */

static int composite(Builder *b, int op, int nin, const int *in, const Attr *attrs, int nattr)
{
    return b_op(b, op, in, nin, attrs, nattr, NULL);
}

/* Every composite, in each of its forms. */
static Graph *composite_graph(void)
{
    Graph *g = graph_new("composites");
    Err e = {0};
    Builder b = builder_make(g, &e);
    uint32_t B = 1u << graph_sym(g, "B", 1);
    Type xt = batched(g, 5);
    Type lt = {.dt = DT_I64, .rank = 1, .dim = {{1, B}}};
    Type qt = {.dt = DT_F32, .rank = 3, .dim = {{1, B}, {4, 0}, {8, 0}}};
    Type kt = {.dt = DT_F32, .rank = 3, .dim = {{1, B}, {6, 0}, {8, 0}}};
    Type vt = {.dt = DT_F32, .rank = 3, .dim = {{1, B}, {6, 0}, {2, 0}}};
    int64_t d5[] = {5};
    Type t5 = ty(DT_F32, 1, d5);
    int x = b_input(&b, "x", &xt), labels = b_input(&b, "labels", &lt);
    int q = b_input(&b, "q", &qt), k = b_input(&b, "k", &kt), v = b_input(&b, "v", &vt);
    int w = b_param(&b, "w", &t5, NULL), bias = b_param(&b, "bias", &t5, NULL);
    int qkv[] = {q, k, v}, xwb[] = {x, w, bias}, xl[] = {x, labels};
    Attr axis0 = attr_int("axis", 0), eps = attr_float("eps", 1e-3), causal = attr_bool("causal", true);
    Attr scale = attr_float("scale", 0.5), drop[] = {attr_float("p", 0.25), attr_int("seed", 7)};
    Attr sum = attr_str("reduction", "sum"), none = attr_str("reduction", "none");
    b_output(&b, composite(&b, OP_SOFTMAX, 1, &x, NULL, 0), "softmax");
    b_output(&b, composite(&b, OP_SOFTMAX, 1, &x, &axis0, 1), "softmax_axis0");
    b_output(&b, composite(&b, OP_LOG_SOFTMAX, 1, &x, NULL, 0), "log_softmax");
    b_output(&b, composite(&b, OP_LAYER_NORM, 3, xwb, NULL, 0), "layer_norm");
    b_output(&b, composite(&b, OP_LAYER_NORM, 1, &x, &eps, 1), "layer_norm_plain");
    b_output(&b, composite(&b, OP_RMS_NORM, 2, xwb, NULL, 0), "rms_norm");
    b_output(&b, composite(&b, OP_RMS_NORM, 1, &x, &eps, 1), "rms_norm_plain");
    b_output(&b, composite(&b, OP_DROPOUT, 1, &x, drop, 2), "dropout");
    b_output(&b, composite(&b, OP_CROSS_ENTROPY, 2, xl, NULL, 0), "ce_mean");
    b_output(&b, composite(&b, OP_CROSS_ENTROPY, 2, xl, &sum, 1), "ce_sum");
    b_output(&b, composite(&b, OP_CROSS_ENTROPY, 2, xl, &none, 1), "ce_none");
    b_output(&b, composite(&b, OP_ATTENTION, 3, qkv, NULL, 0), "attention");
    b_output(&b, composite(&b, OP_ATTENTION, 3, qkv, &causal, 1), "attention_causal");
    b_output(&b, composite(&b, OP_ATTENTION, 3, qkv, &scale, 1), "attention_scaled");
    return built(g, &e);
}

static bool any_composite(const Graph *g)
{
    int k = 0;
    for (int op = 0; op < OP_COUNT; op++)
        k += (op_info[op].flags & OPF_COMPOSITE) ? count_op(g, op) : 0;
    return k > 0;
}

static void test_decompose(void)
{
    Graph *g = composite_graph();
    Graph *d = g ? apply(pass_decompose, g) : NULL;
    if (!d) {
        graph_free(g);
        return;
    }
    CHECK(!any_composite(d));
    CHECK(d->ninput == g->ninput && graph_params(d, NULL) == graph_params(g, NULL));
    check_agree(g, d, 5, 1e-6); /* labels in [0, 5) */
}

/* ---------------------------------------------------------------- rewrite, manager */

/* Names, symbols, signature order and locations survive a copy, even once the
 * original (and the file name its locations point at) is gone. */
static void test_copy_preserves(void)
{
    Graph *g = graph_new("keep");
    Err e = {0};
    Builder b = builder_make(g, &e);
    graph_sym(g, "T", 1);
    Type xt = batched(g, 2);
    char *file = strdup("model.cir");
    b.loc = (Loc){file, 3, 9};
    int x = b_input(&b, "x", &xt), y = b_input(&b, "y", &xt);
    b.loc.line = 4;
    b_output(&b, b_binary(&b, OP_SUB, x, y), "diff");
    g->input[0] = y, g->input[1] = x; /* the signature order need not be node order */
    Graph *c = graph_copy(g, &e);
    graph_free(g);
    free(file);
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK(strcmp(c->name, "keep") == 0 && c->nsym == 2 && strcmp(c->sym[1], "B") == 0);
    CHECK(strcmp(node_name(&c->node[c->input[0]]), "y") == 0);
    CHECK(strcmp(c->output_name[0], "diff") == 0);
    const Node *sub = &c->node[c->output[0]];
    CHECK(sub->loc.line == 4 && sub->loc.col == 9 && strcmp(sub->loc.file, "model.cir") == 0);
    graph_free(c);
}

static void test_manager(void)
{
    Graph *g = composite_graph();
    if (!g)
        return;
    Graph *orig = graph_copy(g, &(Err){0});
    Err e = {0};
    CHECK(!run_passes(&g, "fold,bogus,dce", &e));
    CHECK(e.code == ERR_USAGE && strstr(e.msg, "unknown pass 'bogus'"));
    CHECK(strstr(e.msg, "verify, fold, cse, dce, decompose") != NULL);
    CHECK(g->nnode == orig->nnode); /* nothing ran */
    e = (Err){0};
    CHECK(!run_passes(&g, "fold,,dce", &e) && e.code == ERR_USAGE && strstr(e.msg, "empty pass name"));
    e = (Err){0};
    CHECK(run_passes(&g, "", &e) && g->nnode == orig->nnode);
    CHECK(run_passes(&g, "verify,decompose,fold,cse,dce,verify", &e));
    if (!err_ok(&e))
        fprintf(stderr, "run_passes: %s\n", e.msg);
    CHECK(!any_composite(g));
    CHECK(pass_find("cse", 3) == &pass_table[2] && pass_find("cs", 2) == NULL);
    check_agree(orig, g, 5, 1e-6);
}

int main(void)
{
    test_fold();
    test_fold_keeps_errors();
    test_cse();
    test_dce();
    test_decompose();
    test_copy_preserves();
    test_manager();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
