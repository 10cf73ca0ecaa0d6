/* test_pad.c — GEMM shape padding: padded graphs give bit-identical interpreter results on
 * the same random inputs and params, only the matmuls asked for are padded, symbolic dims
 * and M never are, and a graph with nothing to pad comes back unchanged. */
#include <stdlib.h>

#include "check.h"
#include "passes/passes.h"

/* ---------------------------------------------------------------- running graphs */

/* Inputs and params drawn once, fed to a graph before and after padding. */
typedef struct Feed {
    Tensor in[8], par[8];
    int nin, npar;
} Feed;

/* Normal values; symbol i of the graph takes sym_val[i]. */
static void fill(Tensor *t, const Type *ty, const int64_t *sym_val, uint64_t seed)
{
    SymBind sb = {0};
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        sb.val[s] = sym_val ? sym_val[s] : 0, sb.known[s] = sym_val != NULL;
    int64_t shape[COIL_MAX_RANK];
    Err e = {0};
    CHECK(type_resolve(ty, &sb, shape));
    CHECK(tensor_alloc(t, ty->dt, ty->rank, shape, &e));
    for (int64_t i = 0; i < tensor_numel(t); i++)
        dtype_store(t->dt, t->data, i, philox_normal(seed, 0, (uint64_t)i));
}

static Feed feed_make(const Graph *g, const int64_t *sym_val)
{
    Feed f = {0};
    for (int i = 0; i < g->ninput; i++)
        fill(&f.in[f.nin++], &g->node[g->input[i]].type, sym_val, 100 + (uint64_t)i);
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_PARAM)
            fill(&f.par[f.npar++], &g->node[i].type, sym_val, 200 + (uint64_t)i);
    return f;
}

static void feed_free(Feed *f)
{
    for (int i = 0; i < f->nin; i++)
        tensor_free(&f->in[i]);
    for (int i = 0; i < f->npar; i++)
        tensor_free(&f->par[i]);
}

static bool run(const Graph *g, const Feed *f, Tensor *outs)
{
    Err e = {0};
    if (interp_run(g, f->in, f->par, outs, NULL, &e))
        return true;
    fprintf(stderr, "interp_run(%s): %s\n", g->name, e.msg);
    return false;
}

/* Same outputs, shapes and bits on the same feed. */
static void check_identical(const Graph *a, const Graph *b, const int64_t *sym_val)
{
    Feed f = feed_make(a, sym_val);
    Tensor oa[8] = {0}, ob[8] = {0};
    CHECK(a->noutput == b->noutput && a->noutput <= 8);
    bool ran = run(a, &f, oa) && run(b, &f, ob);
    CHECK(ran);
    for (int i = 0; ran && i < a->noutput; i++) {
        char sa[256], sb[256];
        CHECK_STR(tensor_fmt(&ob[i], sb, sizeof sb), tensor_fmt(&oa[i], sa, sizeof sa));
        CHECK(tensor_nbytes(&oa[i]) == tensor_nbytes(&ob[i]) &&
              memcmp(oa[i].data, ob[i].data, tensor_nbytes(&oa[i])) == 0);
        CHECK(type_eq(&a->node[a->output[i]].type, &b->node[b->output[i]].type));
    }
    for (int i = 0; i < a->noutput; i++)
        tensor_free(&oa[i]), tensor_free(&ob[i]);
    feed_free(&f);
}

static Graph *built(Graph *g, const Err *e)
{
    if (err_ok(e))
        return g;
    fprintf(stderr, "building graph %s: %s\n", g->name, e->msg);
    CHECK(!"graph builds");
    graph_free(g);
    return NULL;
}

/* Pad g and check the result verifies; NULL (a failed check) when the pass failed. */
static Graph *pad(const Graph *g, int multiple, PadWant want, void *ctx)
{
    Err e = {0};
    Graph *r = pass_pad_gemm(g, multiple, want, ctx, &e);
    if (!r)
        fprintf(stderr, "pad on %s failed: %s\n", g->name, e.msg);
    CHECK(r != NULL);
    CHECK(!r || ir_verify(r, &e));
    return r;
}

static int count_op(const Graph *g, int op)
{
    int k = 0;
    for (int i = 0; i < g->nnode; i++)
        k += g->node[i].op == op;
    return k;
}

/* The type of the n-th matmul of g, as text. */
static const char *matmul_type(const Graph *g, int nth, char *buf, size_t size)
{
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_MATMUL && nth-- == 0)
            return type_fmt(g, &g->node[i].type, buf, size);
    return "(none)";
}

/* ---------------------------------------------------------------- graphs */

static Type ty(DType dt, int rank, const int64_t *dims) { return type_make(dt, rank, dims); }

/* GPT-2's head: x[B,T,64] x transpose(wte[50257,64]), N = the vocabulary. */
static Graph *gpt2_head(int *matmul)
{
    Graph *g = graph_new("gpt2_head");
    Err e = {0};
    Builder b = builder_make(g, &e);
    uint32_t sb = 1u << graph_sym(g, "B", 1), st = 1u << graph_sym(g, "T", 1);
    Type xt = {.dt = DT_F32, .rank = 3, .dim = {{1, sb, 0}, {1, st, 0}, {64, 0, 0}}};
    Type wt = ty(DT_F32, 2, (int64_t[]){50257, 64});
    int x = b_input(&b, "x", &xt);
    int w = b_param(&b, "wte", &wt, NULL);
    *matmul = b_matmul(&b, x, b_transpose(&b, w, 2, (int64_t[]){1, 0}));
    b_output(&b, *matmul, "logits");
    return built(g, &e);
}

/* a x b for static shapes, with a relu after so the result has a user. */
static Graph *gemm(const char *name, DType dt, int ra, const int64_t *da, int rb, const int64_t *db)
{
    Graph *g = graph_new(name);
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type ta = ty(dt, ra, da), tb = ty(dt, rb, db);
    int a = b_input(&b, "a", &ta), w = b_input(&b, "b", &tb);
    int m = b_matmul(&b, a, w);
    b_output(&b, m, "y");
    b_output(&b, b_unary(&b, OP_RELU, m), "r");
    return built(g, &e);
}

/* ---------------------------------------------------------------- tests */

static void test_gpt2_head(void)
{
    int mm;
    Graph *g = gpt2_head(&mm);
    Graph *p = g ? pad(g, 16, NULL, NULL) : NULL;
    if (!p) {
        graph_free(g);
        return;
    }
    char buf[256];
    CHECK_STR(matmul_type(p, 0, buf, sizeof buf), "f32[B,T,50272]");
    CHECK(count_op(p, OP_CONCAT) == 1 && count_op(p, OP_FULL) == 1 && count_op(p, OP_SLICE) == 1);
    int64_t sym_val[COIL_MAX_SYMS] = {2, 3}; /* B, T */
    check_identical(g, p, sym_val);
    graph_free(p);
    graph_free(g);
}

static void check_gemm(DType dt, int ra, const int64_t *da, int rb, const int64_t *db,
                       const char *padded)
{
    Graph *g = gemm("gemm", dt, ra, da, rb, db);
    Graph *p = g ? pad(g, 8, NULL, NULL) : NULL;
    if (p) {
        char buf[256];
        CHECK_STR(matmul_type(p, 0, buf, sizeof buf), padded);
        CHECK(count_op(p, OP_CONCAT) == 3 && count_op(p, OP_SLICE) == 1);
        check_identical(g, p, NULL);
    }
    graph_free(p);
    graph_free(g);
}

/* K = 37 and N = 19 at multiple 8; M = 5 stays. */
static void test_odd_k(void)
{
    check_gemm(DT_F32, 2, (int64_t[]){5, 37}, 2, (int64_t[]){37, 19}, "f32[5,24]");
}

static void test_batched(void)
{
    check_gemm(DT_F32, 3, (int64_t[]){2, 5, 37}, 2, (int64_t[]){37, 19}, "f32[2,5,24]");
    check_gemm(DT_F32, 3, (int64_t[]){1, 5, 37}, 4, (int64_t[]){3, 2, 37, 19}, "f32[3,2,5,24]");
}

/* The interpreter evaluates matmul in any float dtype (f64 sums, rounded to the dtype). */
static void test_f16(void)
{
    check_gemm(DT_F16, 2, (int64_t[]){5, 37}, 2, (int64_t[]){37, 19}, "f16[5,24]");
    check_gemm(DT_BF16, 3, (int64_t[]){2, 5, 37}, 2, (int64_t[]){37, 19}, "bf16[2,5,24]");
}

static void check_unchanged(const Graph *g, int multiple)
{
    Graph *p = pad(g, multiple, NULL, NULL);
    if (!p)
        return;
    char *before = ir_print(g), *after = ir_print(p);
    CHECK_STR(after, before);
    free(before);
    free(after);
    graph_free(p);
}

/* No matmul, matmuls already aligned, and symbolic N and K: nothing to pad. */
static void test_unchanged(void)
{
    Graph *g = graph_new("no_matmul");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t = ty(DT_F32, 2, (int64_t[]){5, 37});
    int x = b_input(&b, "x", &t);
    b_output(&b, b_reduce(&b, OP_SUM, b_unary(&b, OP_EXP, x), 1, (int64_t[]){1}, false), "s");
    if ((g = built(g, &e)))
        check_unchanged(g, 16);
    graph_free(g);

    g = gemm("aligned", DT_F32, 2, (int64_t[]){5, 32}, 2, (int64_t[]){32, 48});
    if (g)
        check_unchanged(g, 16);
    graph_free(g);

    g = graph_new("symbolic");
    b = builder_make(g, &e);
    uint32_t sb = 1u << graph_sym(g, "B", 1);
    Type ta = {.dt = DT_F32, .rank = 2, .dim = {{5, 0, 0}, {1, sb, 0}}};
    Type tb = {.dt = DT_F32, .rank = 2, .dim = {{1, sb, 0}, {1, sb, 0}}};
    b_output(&b, b_matmul(&b, b_input(&b, "a", &ta), b_input(&b, "b", &tb)), "y");
    if ((g = built(g, &e)))
        check_unchanged(g, 16);
    graph_free(g);
}

/* A symbolic batch dim: the zeros padding a's K carry it too. */
static void test_symbolic_batch(void)
{
    Graph *g = graph_new("symbolic_batch");
    Err e = {0};
    Builder b = builder_make(g, &e);
    uint32_t sb = 1u << graph_sym(g, "B", 1);
    Type ta = {.dt = DT_F32, .rank = 3, .dim = {{1, sb, 0}, {5, 0, 0}, {37, 0, 0}}};
    Type tb = ty(DT_F32, 2, (int64_t[]){37, 19});
    b_output(&b, b_matmul(&b, b_input(&b, "a", &ta), b_input(&b, "b", &tb)), "y");
    Graph *p = (g = built(g, &e)) ? pad(g, 8, NULL, NULL) : NULL;
    if (p) {
        char buf[256];
        CHECK_STR(matmul_type(p, 0, buf, sizeof buf), "f32[B,5,24]");
        int64_t sym_val[COIL_MAX_SYMS] = {3};
        check_identical(g, p, sym_val);
    }
    graph_free(p);
    graph_free(g);
}

/* Only K symbolic: N alone is padded. */
static void test_symbolic_k(void)
{
    Graph *g = graph_new("symbolic_k");
    Err e = {0};
    Builder b = builder_make(g, &e);
    uint32_t sb = 1u << graph_sym(g, "B", 1);
    Type ta = {.dt = DT_F32, .rank = 2, .dim = {{5, 0, 0}, {1, sb, 0}}};
    Type tb = {.dt = DT_F32, .rank = 2, .dim = {{1, sb, 0}, {10, 0, 0}}};
    b_output(&b, b_matmul(&b, b_input(&b, "a", &ta), b_input(&b, "b", &tb)), "y");
    Graph *p = (g = built(g, &e)) ? pad(g, 16, NULL, NULL) : NULL;
    if (p) {
        char buf[256];
        CHECK_STR(matmul_type(p, 0, buf, sizeof buf), "f32[5,16]");
        CHECK(count_op(p, OP_CONCAT) == 1 && count_op(p, OP_SLICE) == 1);
        int64_t sym_val[COIL_MAX_SYMS] = {7};
        check_identical(g, p, sym_val);
    }
    graph_free(p);
    graph_free(g);
}

static bool want_not(void *ctx, const Graph *g, int node)
{
    (void)g;
    return node != *(int *)ctx;
}

/* Two matmuls; want declines the first, which stays as it was. */
static void test_want(void)
{
    Graph *g = graph_new("want");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type ta = ty(DT_F32, 2, (int64_t[]){5, 37}), tb = ty(DT_F32, 2, (int64_t[]){37, 19});
    int a = b_input(&b, "a", &ta), w = b_input(&b, "b", &tb);
    int first = b_matmul(&b, a, w);
    b_output(&b, first, "y0");
    b_output(&b, b_matmul(&b, a, w), "y1");
    Graph *p = (g = built(g, &e)) ? pad(g, 8, want_not, &first) : NULL;
    if (p) {
        char buf[256];
        CHECK_STR(matmul_type(p, 0, buf, sizeof buf), "f32[5,19]");
        CHECK_STR(matmul_type(p, 1, buf, sizeof buf), "f32[5,24]");
        CHECK(count_op(p, OP_SLICE) == 1);
        check_identical(g, p, NULL);
    }
    graph_free(p);
    graph_free(g);
}

static void test_dims(void)
{
    int mm;
    Graph *g = gpt2_head(&mm);
    if (!g)
        return;
    int64_t n = 0, k = 0, np = 0, kp = 0;
    CHECK(pad_gemm_dims(g, mm, 16, &n, &k, &np, &kp));
    CHECK(n == 50257 && np == 50272 && k == 64 && kp == 64);
    CHECK(pad_gemm_dims(g, mm, 8, NULL, NULL, &np, NULL) && np == 50264);
    CHECK(pad_gemm_dims(g, mm, 1, NULL, NULL, &np, NULL) && np == 50257);
    CHECK(!pad_gemm_dims(g, 0, 16, &n, &k, &np, &kp)); /* the input */
    CHECK(!pad_gemm_dims(g, g->nnode, 16, &n, &k, &np, &kp));
    graph_free(g);

    g = gemm("multiple0", DT_F32, 2, (int64_t[]){5, 37}, 2, (int64_t[]){37, 19});
    if (g) {
        Err e = {0};
        CHECK(!pass_pad_gemm(g, 0, NULL, NULL, &e) && e.code == ERR_USAGE);
    }
    graph_free(g);
}

int main(void)
{
    test_gpt2_head();
    test_odd_k();
    test_batched();
    test_f16();
    test_unchanged();
    test_symbolic_batch();
    test_symbolic_k();
    test_want();
    test_dims();
    return check_status();
}
