/* test_retype.c — the whole-model dtype switch (passes/retype.c, `--dtype`): the pass's rule
 * for every typed op, its errors, then every op fixture with f32 values retyped to f16 and
 * to bf16: the graph verifies and holds no f32, its interpreter outputs stay close to the f32
 * model's, and the compiled CPU engine matches the interpreter on the retyped graph.
 * `test_retype --report` prints each fixture's largest error (how the tolerances were set). */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "io/safetensors.h"
#include "op_cases.h"
#include "passes/passes.h"
#include "pipeline/pipeline.h"
#include "retype_cases.h"

static Graph *parse(const char *text)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), "test.cir", &e);
    if (!g) {
        fprintf(stderr, "parse: %s\n", e.msg);
        check_failures++;
    }
    return g;
}

/* src retyped f32 -> to, printed (NULL when the pass fails; *e holds why). */
static char *retyped_text(const char *src, DType to, Err *e)
{
    Graph *g = parse(src);
    Graph *r = g ? pass_retype(g, DT_F32, to, e) : NULL;
    char *text = r && ir_verify(r, e) ? ir_print(r) : NULL;
    graph_free(g);
    graph_free(r);
    return text;
}

/* ---------------------------------------------------------------- the pass's rules */

/* Each typed op (input, param, constant, full, iota, rand, cast, reshape, expand) and an
 * inferred one; integers stay; a bf16 value stays bf16 when retyping to f16, so the cast
 * into it now reads f16. Constants are rounded: 0.1 is 0.0999755859375 in f16. */
static void test_typed_ops(void)
{
    const char *src =
        "graph @t(%x: f32[2,3], %n: i32[3]) -> (a: f32[3,2], b: i32[2,3], c: f32[3], d: f32[2,3],\n"
        "    e: f32[4,2,3], f: bf16[2,3], g: f32[3]) {\n"
        "  %w = param {name=\"w\", init=\"normal(0.02)\"} : f32[2,3]\n"
        "  %0 = add %x, %w : f32[2,3]\n"
        "  %1 = reshape %0 : f32[3,2]\n"
        "  %2 = cast %x : i32[2,3]\n"
        "  %3 = cast %n : f32[3]\n"
        "  %4 = constant {value=[0.1, 2, -3]} : f32[3]\n"
        "  %5 = full {value=0.5} : f32[2,3]\n"
        "  %6 = iota {axis=1} : f32[2,3]\n"
        "  %7 = rand {seed=1} : f32[2,3]\n"
        "  %8 = add %5, %6 : f32[2,3]\n"
        "  %9 = add %8, %7 : f32[2,3]\n"
        "  %10 = expand %9 : f32[4,2,3]\n"
        "  %11 = cast %x : bf16[2,3]\n"
        "  %12 = add %3, %4 : f32[3]\n"
        "  return %1, %2, %3, %9, %10, %11, %12\n"
        "}\n";
    const char *want =
        "graph @t(%x: f16[2,3], %n: i32[3]) -> (a: f16[3,2], b: i32[2,3], c: f16[3], d: f16[2,3], "
        "e: f16[4,2,3], f: bf16[2,3], g: f16[3]) {\n"
        "  %0 = param {name=\"w\", init=\"normal(0.02)\"} : f16[2,3]\n"
        "  %1 = add %x, %0 : f16[2,3]\n"
        "  %2 = reshape %1 : f16[3,2]\n"
        "  %3 = cast %x : i32[2,3]\n"
        "  %4 = cast %n : f16[3]\n"
        "  %5 = constant {value=[0.0999755859375, 2, -3]} : f16[3]\n"
        "  %6 = full {value=0.5} : f16[2,3]\n"
        "  %7 = iota {axis=1} : f16[2,3]\n"
        "  %8 = rand {seed=1} : f16[2,3]\n"
        "  %9 = add %6, %7 : f16[2,3]\n"
        "  %10 = add %9, %8 : f16[2,3]\n"
        "  %11 = expand %10 : f16[4,2,3]\n"
        "  %12 = cast %x : bf16[2,3]\n"
        "  %13 = add %4, %5 : f16[3]\n"
        "  return %2, %3, %4, %10, %11, %12, %13\n"
        "}\n";
    Err e = {0};
    char *got = retyped_text(src, DT_F16, &e);
    CHECK_STR(got, want);
    if (!got)
        fprintf(stderr, "retype: %s\n", e.msg);
    free(got);
}

/* A finite value that would become infinite is refused, naming the node at its location;
 * bf16 has f32's range, so the same graph retypes to it. */
static void test_overflow(void)
{
    const char *src = "graph @t(%x: f32[2]) -> (y: f32[2]) {\n"
                      "  %0 = full {value=-1e9} : f32[]\n"
                      "  %1 = add %x, %0 : f32[2]\n"
                      "  return %1\n"
                      "}\n";
    Err e = {0};
    char *got = retyped_text(src, DT_F16, &e);
    CHECK(!got && e.code == ERR_INPUT);
    CHECK(strstr(e.msg, "test.cir:2:8: error: retype f32 -> f16: %0 (full): value -1e+09 "
                        "overflows f16") != NULL);
    free(got);
    e = (Err){0};
    got = retyped_text(src, DT_BF16, &e);
    CHECK(got && strstr(got, "full {value=-998244352} : bf16[]"));
    free(got);
    const char *constant = "graph @t() -> (y: f32[2]) {\n"
                           "  %0 = constant {value=[1, 70000]} : f32[2]\n"
                           "  return %0\n"
                           "}\n";
    e = (Err){0};
    got = retyped_text(constant, DT_F16, &e);
    CHECK(!got && strstr(e.msg, "%0 (constant): value 70000 overflows f16"));
    free(got);
}

/* Only float dtypes retype; retyping to the same dtype is a copy. */
static void test_usage(void)
{
    Graph *g = parse("graph @t(%x: f32[2]) -> (y: f32[2]) {\n"
                     "  %0 = neg %x : f32[2]\n"
                     "  return %0\n}\n");
    Err e = {0};
    CHECK(g && !pass_retype(g, DT_F32, DT_I32, &e) && e.code == ERR_USAGE);
    CHECK(strstr(e.msg, "retype f32 -> i32: only float dtypes") != NULL);
    e = (Err){0};
    Graph *same = g ? pass_retype(g, DT_F32, DT_F32, &e) : NULL;
    char *a = g ? ir_print(g) : NULL, *b = same ? ir_print(same) : NULL;
    CHECK(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
    graph_free(same);
    graph_free(g);
}

/* f32 weights for a retyped model: safetensors_bind_rounded rounds F32 tensors to its f16
 * and bf16 parameters (and nothing else: an I64 tensor for an i32 parameter is still
 * refused, with a note on what converts); safetensors_bind stays exact. */
static void test_weights(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_retype_%d.safetensors", (int)getpid());
    const char *names[] = {"w", "b", "n"};
    int64_t two = 2, three = 3;
    Tensor t[3] = {check_tensor(DT_F32, 1, &two, (double[]){0.1, -3.3}),
                   check_tensor(DT_F32, 1, &three, (double[]){1e-3, 70000, 2.5}),
                   check_tensor(DT_I32, 1, &two, (double[]){7, -8})};
    Err e = {0};
    CHECK(safetensors_write(path, names, t, 3, NULL, NULL, 0, &e));
    Graph *g = parse("graph @w() -> (w: bf16[2], b: f16[3], n: i32[2]) {\n"
                     "  %w = param {name=\"w\"} : bf16[2]\n"
                     "  %b = param {name=\"b\"} : f16[3]\n"
                     "  %n = param {name=\"n\"} : i32[2]\n"
                     "  return %w, %b, %n\n}\n");
    Tensor p[3] = {{0}};
    CHECK(g && safetensors_bind_rounded(g, path, p, &e));
    for (int i = 0; err_ok(&e) && i < 3; i++) {
        CHECK(p[i].dt == g->node[i].type.dt);
        for (int64_t k = 0; k < tensor_numel(&t[i]); k++)
            CHECK(check_at(&p[i], k) == dtype_round(p[i].dt, check_at(&t[i], k)));
        tensor_free(&p[i]);
    }
    e = (Err){0};
    CHECK(g && !safetensors_bind(g, path, p, &e) &&
          strstr(e.msg, "'w': the model expects bf16[2]"));
    t[2] = (tensor_free(&t[2]), check_tensor(DT_I64, 1, &two, (double[]){7, -8}));
    e = (Err){0};
    CHECK(safetensors_write(path, names, t, 3, NULL, NULL, 0, &e));
    CHECK(g && !safetensors_bind_rounded(g, path, p, &e) &&
          strstr(e.msg, "'n': the model expects i32[2], the file holds i64[2]") &&
          strstr(e.msg, "F32 tensors are rounded to f16 and bf16 parameters"));
    for (int i = 0; i < 3; i++)
        tensor_free(&t[i]);
    graph_free(g);
    unlink(path);
}

/* ---------------------------------------------------------------- the fixtures */

/* How close the retyped model's outputs must come to the f32 model's: relative to the f32
 * value rounded to the output's format, plus the same fraction of the output's mean |value|
 * (so a sum that cancels to near 0 is judged against the size of what it summed). A single
 * op's inputs are rounded once (half an ulp: 2^-9 in bf16, 2^-12 in f16) and its result once
 * more, and the op amplifies its inputs' error by its condition number (exp, log near 1, a
 * difference of near values, a dot product's cancellation), so single ops get 4 units of
 * the format's epsilon at 1: bf16 2^-6 = 1.6e-2, f16 2^-8 = 3.9e-3. Chains (the composites'
 * decompositions, the training graphs) round every intermediate in the format: 4x that.
 * Measured (--report): the largest single-op errors are 6.8e-3 in bf16 (log) and 1.1e-3 in
 * f16 (matmul), the largest chain errors 2.5e-2 in bf16 and 4.4e-3 in f16 (train_attn's and
 * train_mlp's gradients): a margin of 2.3x or more everywhere. */
typedef struct Tolerance {
    DType dt;
    double single, chain;
} Tolerance;

static const Tolerance tolerances[] = {
    {DT_F16, 0x1p-8, 0x1p-6},
    {DT_BF16, 0x1p-6, 0x1p-4},
};

static const Tolerance *tolerance_of(DType dt)
{
    for (size_t i = 0; i < sizeof tolerances / sizeof *tolerances; i++)
        if (tolerances[i].dt == dt)
            return &tolerances[i];
    return NULL;
}

/* Fixtures whose ops chain several roundings (by name prefix). */
static const char *const chains[] = {
    "softmax", "log_softmax", "layer_norm", "rms_norm", "attention", "cross_entropy", "train_",
    "symbolic_batch",
};

/* Fixtures whose comparison with the f32 model is left out in one format, and why (their
 * retyped graph is still verified and compiled). */
static const struct {
    const char *name;
    DType dt;
    const char *why;
} excluded[] = {
    {"softmax_large", DT_BF16, "its inputs 999, 1000, 1001 are all 1000 in bf16 (4 apart "
     "there): the bf16 model's softmax is uniform, as PyTorch's in bf16 is"},
    {"log_softmax_large", DT_BF16, "the same inputs as softmax_large"},
    {"train_pool", DT_BF16, "in 1 of its max pool's 96 windows two values are closer than "
     "bf16's rounding, so the maximum, where the window's gradient goes, moves (PyTorch's "
     "max_pool2d on the bf16-rounded inputs moves it too)"},
};

static bool is_chain(const char *name)
{
    for (size_t i = 0; i < sizeof chains / sizeof *chains; i++)
        if (strncmp(name, chains[i], strlen(chains[i])) == 0)
            return true;
    return false;
}

static const char *exclusion(const char *name, DType dt)
{
    for (size_t i = 0; i < sizeof excluded / sizeof *excluded; i++)
        if (strcmp(name, excluded[i].name) == 0 && excluded[i].dt == dt)
            return excluded[i].why;
    return NULL;
}

static bool report;

/* The output's mean |value| over its finite elements. */
static double mean_abs(const Tensor *t)
{
    double s = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double v = dtype_load(t->dt, t->data, i);
        if (isfinite(v))
            s += fabs(v), n++;
    }
    return n ? s / (double)n : 0;
}

/* The largest error of got against the f32 model's want rounded to got's dtype, in units of
 * |want| + scale; INFINITY when a special value (nan, inf) differs. An input beyond the
 * format's range (65504 in f16) is inf in it, as in PyTorch: where the f32 model on the
 * rounded inputs (`rounded`) is not finite, got is held to that instead. */
static double float_error(const Tensor *got, const Tensor *want, const Tensor *rounded)
{
    double scale = mean_abs(want), worst = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++) {
        double g = dtype_load(got->dt, got->data, i), r = dtype_load(rounded->dt, rounded->data, i);
        double w = dtype_round(got->dt, isfinite(r) ? dtype_load(want->dt, want->data, i) : r);
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            if (!(isnan(w) && isnan(g)) && g != w)
                return INFINITY;
            continue;
        }
        worst = fmax(worst, fabs(g - w) / (fabs(w) + scale + 1e-30));
    }
    return worst;
}

/* Integer and bool outputs are decisions (comparisons, argmax, casts): an input within
 * rounding of a boundary may legitimately fall the other way, so they are held exactly to
 * the f32 model run on the inputs rounded to the format (and kept in f32). */
static int integer_mismatches(const Tensor *got, const Tensor *want)
{
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++)
        bad += dtype_load(got->dt, got->data, i) != dtype_load(want->dt, want->data, i);
    return bad;
}

/* The f32 model's outputs on c's inputs and parameters rounded to dt (still f32). */
static bool f32_on_rounded(const Case *c, DType dt, Tensor *out)
{
    Err e = {0};
    int n = c->g->ninput, np = c->nparam;
    Tensor *in = calloc((size_t)n + 1, sizeof *in);
    Tensor *params = calloc((size_t)np + 1, sizeof *params);
    bool ok = in && params;
    for (int i = 0; ok && i < n + np; i++) {
        const Tensor *t = i < n ? &c->in[i] : &c->params[i - n];
        Tensor *r = i < n ? &in[i] : &params[i - n];
        ok = tensor_alloc(r, t->dt, t->rank, t->shape, &e);
        for (int64_t k = 0; ok && k < tensor_numel(t); k++) {
            double v = dtype_load(t->dt, t->data, k);
            dtype_store(t->dt, r->data, k, t->dt == DT_F32 ? dtype_round(dt, v) : v);
        }
    }
    ok = ok && interp_optimised(c->g, in, params, out, &e);
    if (!ok) {
        fprintf(stderr, "%s: f32 on rounded inputs: %s\n", c->name, e.msg);
        check_failures++;
    }
    for (int i = 0; in && params && i < n + np; i++)
        tensor_free(i < n ? &in[i] : &params[i - n]);
    free(in);
    free(params);
    return ok;
}

/* One float output against the f32 model's, at its format's tolerance (an output that was
 * bf16 in the f32 model stays bf16 when the model goes to f16). */
static void check_float_output(const Case *c, DType to, int i, const Tensor *got,
                               const Tensor *rounded)
{
    const Tolerance *tol = tolerance_of(got->dt);
    if (!tol) {
        fprintf(stderr, "%s [%s]: %s is %s after the retype\n", c->name, dtype_info[to].name,
                c->g->output_name[i], dtype_info[got->dt].name);
        check_failures++;
        return;
    }
    double limit = is_chain(c->name) ? tol->chain : tol->single;
    double err = float_error(got, &c->want[i], rounded);
    if (report)
        printf("%-26s %-5s %-10s error %.3g (limit %.3g)\n", c->name, dtype_info[to].name,
               c->g->output_name[i], err, limit);
    if (err > limit) {
        fprintf(stderr, "%s [%s]: %s is %.3g from the f32 model's (limit %.3g)\n", c->name,
                dtype_info[to].name, c->g->output_name[i], err, limit);
        check_failures++;
    }
}

static void check_against_f32(const Case *c, const Case *r, DType to)
{
    const char *why = exclusion(c->name, to);
    if (why) {
        if (report)
            printf("%-26s %-5s excluded: %s\n", c->name, dtype_info[to].name, why);
        return;
    }
    Tensor rounded[16] = {{0}};
    if (!f32_on_rounded(c, to, rounded))
        return;
    for (int i = 0; i < c->g->noutput; i++) {
        const Tensor *got = &r->want[i];
        if (dtype_info[got->dt].is_float) {
            check_float_output(c, to, i, got, &rounded[i]);
            continue;
        }
        int bad = integer_mismatches(got, &rounded[i]);
        if (bad) {
            fprintf(stderr, "%s [%s]: %s: %d elements differ from the f32 model on rounded "
                    "inputs\n", c->name, dtype_info[to].name, c->g->output_name[i], bad);
            check_failures++;
        }
    }
    for (int i = 0; i < c->g->noutput; i++)
        tensor_free(&rounded[i]);
}

/* The retyped graph: verified, no f32 left. */
static void check_graph(const Case *r, DType dt)
{
    Err e = {0};
    if (!ir_verify(r->g, &e)) {
        fprintf(stderr, "%s [%s]: the retyped graph does not verify: %s\n", r->name,
                dtype_info[dt].name, e.msg);
        check_failures++;
    }
    if (graph_has_dtype(r->g, DT_F32)) {
        fprintf(stderr, "%s [%s]: f32 values are left\n", r->name, dtype_info[dt].name);
        check_failures++;
    }
}

/* The compiled CPU engine on the retyped case against the interpreter on the same graph,
 * at fixture_close's tolerance for the format. */
static void check_compiled(const Case *r, DType dt)
{
    Err e = {0};
    Tensor out[16] = {{0}};
    char how[64];
    snprintf(how, sizeof how, "llvm, retyped to %s", dtype_info[dt].name);
    Compiled *cc = compile_graph(r->g, &(CompileOptions){.threads = 1}, &e);
    if (cc && compiled_run(cc, r->in, r->params, out, &e))
        check_outputs(r, how, out);
    else {
        fprintf(stderr, "%s [%s]: %s\n", r->name, how, e.msg);
        check_failures++;
    }
    compiled_free(cc);
}

/* A fixture pass_retype must refuse (retype_refuses), in both formats, naming the op. */
static void check_refused(const Case *c)
{
    for (size_t t = 0; t < sizeof tolerances / sizeof *tolerances; t++) {
        Err e = {0};
        Graph *g = pass_retype(c->g, DT_F32, tolerances[t].dt, &e);
        if (g || !strstr(e.msg, "(attention_")) {
            fprintf(stderr, "%s [%s]: retype should be refused naming the op, got: %s\n",
                    c->name, dtype_info[tolerances[t].dt].name, g ? "a graph" : e.msg);
            check_failures++;
        }
        graph_free(g);
    }
}

static int run_fixtures(const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, is_case_file, alphasort), retyped = 0;
    if (n < 0) {
        fprintf(stderr, "cannot read %s (run from the source root)\n", dir);
        check_failures++;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        list[i]->d_name[strlen(list[i]->d_name) - 4] = '\0';
        Case c;
        bool loaded = case_load(dir, list[i]->d_name, &c);
        if (loaded && retype_refuses(c.name)) {
            check_refused(&c);
        } else if (loaded && graph_has_dtype(c.g, DT_F32) && c.g->noutput <= 16) {
            retyped++;
            for (size_t t = 0; t < sizeof tolerances / sizeof *tolerances; t++) {
                Case r;
                DType to = tolerances[t].dt;
                if (case_retype(&c, to, &r)) {
                    check_graph(&r, to);
                    check_against_f32(&c, &r, to);
                    check_compiled(&r, to);
                }
                case_free(&r);
            }
        }
        case_free(&c);
        free(list[i]);
    }
    free(list);
    printf("%d fixtures with f32 values retyped to f16 and to bf16 and checked (%d comparisons "
           "with the f32 model left out)\n", retyped, (int)(sizeof excluded / sizeof *excluded));
    return retyped;
}

int main(int argc, char **argv)
{
    report = argc > 1 && strcmp(argv[1], "--report") == 0;
    test_typed_ops();
    test_overflow();
    test_usage();
    test_weights();
    CHECK(run_fixtures(FIXTURE_DIR) >= 80);
    return check_status();
}
