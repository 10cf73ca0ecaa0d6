/* test_rng_step.c — dropout's mask follows the run's rng step on every CPU backend, with
 * nothing recompiled: the interpreter, the loop evaluator and the compiled engine (LLVM
 * kernels, a GEMM's fused epilogue, or the loop evaluator as its kernels) agree at step 0
 * and at step 5; step 0 draws what coil drew before steps existed (the op fixtures that
 * tests/models/gen_ops.py wrote); steps 0 and 1 draw different masks, each dropping about
 * p; and the joint graph's gradients use the forward's mask at each step. */
#include <stdlib.h>

#include "check.h"
#include "io/npy.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"

#define P 0.25
#define ROWS 8
#define IN 64
#define OUT 48

/* y = dropout(x @ w) (the GEMM's epilogue), z = dropout(gelu(x)) (a kernel), r = rand:
 * three random ops, each its own stream; B symbolic, so the syms table holds a symbol
 * beside the rng step. With `loss`, loss = sum(y * c) for autodiff. */
static Graph *model(bool loss)
{
    Graph *g = graph_new("drop");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Dim B = {1, 1u << graph_sym(g, "B", 1), 0};
    Type tx = {.dt = DT_F32, .rank = 2, .dim = {B, {IN, 0, 0}}};
    Type tr = {.dt = DT_F32, .rank = 2, .dim = {B, {OUT, 0, 0}}};
    Type tw = type_make(DT_F32, 2, (int64_t[]){IN, OUT});
    int x = b_input(&b, "x", &tx), w = b_param(&b, "w", &tw, NULL);
    Attr a1[3] = {attr_float("p", P), attr_int("seed", 42), attr_int("offset", 7)};
    Attr a2[3] = {attr_float("p", P), attr_int("seed", 42), attr_int("offset", 1ll << 40)};
    int h = b_matmul(&b, x, w), gx = b_unary(&b, OP_GELU, x);
    int y = b_op(&b, OP_DROPOUT, &h, 1, a1, 3, NULL);
    if (loss) {
        Type tc = type_make(DT_F32, 1, (int64_t[]){OUT});
        double c[OUT];
        for (int i = 0; i < OUT; i++)
            c[i] = (double)(i % 7) - 3;
        int s = b_reduce(&b, OP_SUM, b_binary(&b, OP_MUL, y, b_constant(&b, &tc, c)), 0, NULL, false);
        b_output(&b, s, "loss");
    } else {
        b_output(&b, y, "y");
        b_output(&b, b_op(&b, OP_DROPOUT, &gx, 1, a2, 3, NULL), "z");
        b_output(&b, b_rand(&b, &tr, 9, 3), "r");
    }
    if (!err_ok(&e)) {
        fprintf(stderr, "building the model: %s\n", e.msg);
        check_failures++;
        graph_free(g);
        return NULL;
    }
    return g;
}

static Tensor normal(int64_t rows, int64_t cols, uint64_t seed)
{
    Tensor t = check_tensor(DT_F32, 2, (int64_t[]){rows, cols}, NULL);
    for (int64_t i = 0; t.data && i < rows * cols; i++)
        ((float *)t.data)[i] = (float)philox_normal(seed, 0, (uint64_t)i);
    return t;
}

static void free_all(Tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        tensor_free(&t[i]);
}

/* got against want: the same zeros (the mask, exactly), values within tol. */
static void check_same(const char *how, uint64_t step, const Tensor *got, const Tensor *want,
                       double tol)
{
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++) {
        double g = check_at(got, i), w = check_at(want, i);
        if (((g == 0) != (w == 0) || !check_close(g, w, tol)) && bad++ < 3)
            fprintf(stderr, "%s at rng step %llu: element %lld = %.9g, the interpreter gives "
                    "%.9g\n", how, (unsigned long long)step, (long long)i, g, w);
    }
    check_failures += bad > 0 || tensor_numel(got) != tensor_numel(want);
}

/* The fraction of elements dropped in a, and dropped in exactly one of a and b. */
static void mask_stats(const Tensor *a, const Tensor *b, double *dropped, double *differ)
{
    int64_t n = tensor_numel(a), d = 0, x = 0;
    for (int64_t i = 0; i < n; i++) {
        d += check_at(a, i) == 0;
        x += (check_at(a, i) == 0) != (check_at(b, i) == 0);
    }
    *dropped = (double)d / (double)n, *differ = (double)x / (double)n;
}

/* ---------------------------------------------------------------- forward */

static bool interp_at(const Graph *g, uint64_t step, const Tensor *in, const Tensor *params,
                      Tensor *out)
{
    Err e = {0};
    if (interp_run_at(g, step, in, params, out, NULL, &e))
        return true;
    fprintf(stderr, "interp_run_at: %s\n", e.msg);
    check_failures++;
    return false;
}

/* One compiled program run at steps 5, 0, 5 (switching back and forth: nothing is kept
 * from a step), each held against the interpreter. */
static void check_compiled(const Graph *g, const CompileOptions *o, const char *how,
                           const Tensor *in, const Tensor *params)
{
    Err e = {0};
    Compiled *c = compile_graph(g, o, &e);
    CHECK(c != NULL);
    if (!c) {
        fprintf(stderr, "%s: %s\n", how, e.msg);
        return;
    }
    static const uint64_t steps[3] = {5, 0, 5};
    for (int s = 0; s < 3; s++) {
        Tensor got[3] = {{0}}, want[3] = {{0}};
        compiled_set_rng_step(c, steps[s]);
        bool ok = compiled_run(c, in, params, got, &e) && interp_at(g, steps[s], in, params, want);
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "%s: %s\n", how, e.msg);
        for (int i = 0; ok && i < 3; i++)
            check_same(how, steps[s], &got[i], &want[i], 1e-4);
        free_all(got, 3), free_all(want, 3);
    }
    compiled_free(c);
}

static void test_backends_agree(void)
{
    Graph *g = model(false);
    Tensor x = normal(ROWS, IN, 1), w = normal(IN, OUT, 2);
    for (int64_t i = 0; w.data && i < IN * OUT; i++)
        ((float *)w.data)[i] *= 0.125f;
    Tensor at0[3] = {{0}}, at1[3] = {{0}};
    bool ok = g && interp_at(g, 0, &x, &w, at0) && interp_at(g, 1, &x, &w, at1);
    for (int i = 0; ok && i < 3; i++) {
        double dropped, differ;
        if (i == 2) { /* rand: every element new */
            mask_stats(&at0[i], &at1[i], &dropped, &differ);
            int same = 0;
            for (int64_t k = 0; k < tensor_numel(&at0[i]); k++)
                same += check_at(&at0[i], k) == check_at(&at1[i], k);
            CHECK(same == 0);
            continue;
        }
        mask_stats(&at0[i], &at1[i], &dropped, &differ);
        printf("dropout output %d: %.3f dropped at step 0; %.3f of the mask differs at step 1 "
               "(p = %.2f: %.3f expected)\n", i, dropped, differ, P, 2 * P * (1 - P));
        CHECK(dropped > P - 0.1 && dropped < P + 0.1);
        CHECK(differ > 2 * P * (1 - P) - 0.12 && differ < 2 * P * (1 - P) + 0.12);
    }
    free_all(at0, 3), free_all(at1, 3);
    /* the loop IR's reference evaluator on the lowered program */
    Graph *opt = g ? graph_copy(g, &(Err){0}) : NULL;
    Err e = {0};
    Program *p = opt && run_passes(&opt, pass_pipeline, &e) ? fuse_and_lower(opt, NULL, &e) : NULL;
    CHECK(p != NULL);
    for (uint64_t step = 0; p && step <= 5; step += 5) {
        Tensor got[3] = {{0}}, want[3] = {{0}};
        bool ran = loop_eval_at(p, step, &x, &w, got, &e) && interp_at(g, step, &x, &w, want);
        CHECK(ran);
        for (int i = 0; ran && i < 3; i++)
            check_same("loop_eval", step, &got[i], &want[i], 1e-4);
        free_all(got, 3), free_all(want, 3);
    }
    program_free(p);
    graph_free(opt);
    if (g && cpu_codegen_built()) {
        check_compiled(g, &(CompileOptions){.threads = 2}, "LLVM", &x, &w);
        check_compiled(g, &(CompileOptions){.threads = 2, .no_fusion = true}, "LLVM, unfused", &x, &w);
    }
    if (g)
        check_compiled(g, &(CompileOptions){.threads = 2, .no_llvm = true}, "loop evaluator", &x, &w);
    tensor_free(&x), tensor_free(&w);
    graph_free(g);
}

/* ---------------------------------------------------------------- step 0 is the past */

static bool read(const char *kase, const char *what, Tensor *t)
{
    char path[256];
    Err e = {0};
    snprintf(path, sizeof path, "tests/models/ops/%s.%s.npy", kase, what);
    if (npy_read(path, t, &e))
        return true;
    fprintf(stderr, "%s\n", e.msg);
    check_failures++;
    return false;
}

/* Fixtures gen_ops.py wrote (its own Philox, counter words 2 and 3 zero): a compiled run
 * at step 0, after one at step 3, draws those numbers (the same mask; the kept values
 * scaled in f32, within an ulp); step 3 draws others. */
static void test_step0_is_fixtures(void)
{
    static const char *const kases[2] = {"dropout_p025", "rand_f32"};
    for (int k = 0; k < 2; k++) {
        char path[256];
        Err e = {0};
        snprintf(path, sizeof path, "tests/models/ops/%s.cir", kases[k]);
        Graph *g = ir_parse_file(path, &e);
        Tensor x = {0}, want = {0};
        bool ok = g && read(kases[k], "expect.y", &want) && (k == 1 || read(kases[k], "x", &x));
        Compiled *c = ok ? compile_graph(g, &(CompileOptions){.threads = 1, .no_llvm = !cpu_codegen_built()}, &e) : NULL;
        CHECK(c != NULL);
        for (int s = 0; c && s < 2; s++) {
            Tensor got = {0};
            compiled_set_rng_step(c, s == 0 ? 3 : 0);
            CHECK(compiled_run(c, &x, NULL, &got, &e));
            int same = 0;
            for (int64_t i = 0; got.data && i < tensor_numel(&want); i++)
                same += check_at(&got, i) == check_at(&want, i) ||
                        (check_at(&got, i) != 0 && check_close(check_at(&got, i), check_at(&want, i), 1e-7));
            if (s == 1)
                CHECK(same == tensor_numel(&want)); /* step 0: every element */
            else
                CHECK(same < tensor_numel(&want)); /* step 3: another draw */
            tensor_free(&got);
        }
        if (!ok || !c)
            fprintf(stderr, "%s: %s\n", kases[k], e.msg);
        compiled_free(c);
        tensor_free(&x), tensor_free(&want);
        graph_free(g);
    }
}

/* ---------------------------------------------------------------- gradients */

/* The joint graph compiled against the interpreter at steps 5 and 6: the same gradients
 * at the same step (the backward reads the forward's mask), other ones at the next. */
static void test_gradients(void)
{
    Graph *g = model(true);
    Err e = {0};
    Graph *j = g ? autodiff(g, NULL, &e) : NULL;
    CHECK(j != NULL);
    Tensor x = normal(ROWS, IN, 3), w = normal(IN, OUT, 4);
    CompileOptions o = {.threads = 2, .no_llvm = !cpu_codegen_built()};
    Compiled *c = j ? compile_graph(j, &o, &e) : NULL;
    CHECK(c != NULL);
    Tensor at[2][2] = {{{0}}};
    for (int s = 0; c && s < 2; s++) {
        Tensor want[2] = {{0}};
        compiled_set_rng_step(c, 5 + (uint64_t)s);
        bool ok = compiled_run(c, &x, &w, at[s], &e) && interp_at(j, 5 + (uint64_t)s, &x, &w, want);
        CHECK(ok && j->noutput == 2);
        for (int i = 0; ok && i < 2; i++)
            check_same("joint graph", 5 + (uint64_t)s, &at[s][i], &want[i], 1e-4);
        free_all(want, 2);
    }
    if (c) { /* another mask: another loss, and nearly every weight's gradient changes */
        int64_t n = tensor_numel(&at[0][1]), changed = 0;
        for (int64_t i = 0; i < n; i++)
            changed += check_at(&at[0][1], i) != check_at(&at[1][1], i);
        CHECK(check_at(&at[0][0], 0) != check_at(&at[1][0], 0) && changed > n / 2);
    }
    free_all(at[0], 2), free_all(at[1], 2);
    if (!c)
        fprintf(stderr, "joint graph: %s\n", e.msg);
    compiled_free(c);
    tensor_free(&x), tensor_free(&w);
    graph_free(j);
    graph_free(g);
}

int main(void)
{
    test_backends_agree();
    test_step0_is_fixtures();
    test_gradients();
    return check_status();
}
