/* test_conv.c — the conv op: compiled CPU results against the reference interpreter over
 * many geometries (stride, padding per side, dilation, groups and depthwise, 1-D, ragged
 * sizes, batch > 1, a symbolic batch, a fused bias/relu/residual epilogue) on the
 * micro-kernels, the portable GEMM and the loop evaluator; the interpreter against PyTorch's
 * F.conv1d/conv2d (fixtures from tests/models/conv/gen_conv.py) and against the op's own
 * decomposition; the IR text round trip; and the type rule's errors. */
#include <stdlib.h>

#include "check.h"
#include "io/npy.h"
#include "ir/ops.h"
#include "passes/passes.h"
#include "pipeline/pipeline.h"

#define FIXTURES "tests/models/conv/"

/* How x and w reach the conv: as given, or as views of other layouts (x stored NHWC and
 * transposed: the conv step reads it through strides; w stored HWIO: copied first). */
typedef enum Layout { PLAIN, X_NHWC, W_HWIO } Layout;

typedef struct Case {
    const char *name;
    int n;                       /* spatial axes */
    int64_t batch, c, m, groups;
    int64_t in[2], k[2], stride[2], pad[4], dil[2]; /* pad: begins, then ends */
    bool epilogue;               /* y = relu(conv + bias) + residual */
    bool symbolic;               /* batch as the symbol B */
    Layout layout;
} Case;

static const Case cases[] = {
    {"3x3, pad 1", 2, 1, 8, 16, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"1x1", 2, 2, 16, 24, 1, {7, 5}, {1, 1}, {1, 1}, {0}, {1, 1}, false, false, PLAIN},
    {"1x1, groups 4, epilogue", 2, 2, 8, 12, 4, {5, 6}, {1, 1}, {1, 1}, {0}, {1, 1}, true, false, PLAIN},
    {"1x1, stride 2", 2, 1, 8, 8, 1, {7, 6}, {1, 1}, {2, 2}, {0}, {1, 1}, false, false, PLAIN},
    {"stride 2, ragged", 2, 2, 3, 5, 1, {11, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"asymmetric padding", 2, 1, 4, 6, 1, {6, 7}, {3, 2}, {1, 2}, {0, 2, 1, 0}, {1, 1}, false, false, PLAIN},
    {"dilation 2", 2, 1, 5, 7, 1, {12, 10}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, false, false, PLAIN},
    {"dilation and stride", 2, 2, 4, 4, 1, {13, 11}, {2, 3}, {2, 3}, {1, 0, 1, 2}, {3, 2}, false, false, PLAIN},
    {"groups 2", 2, 2, 6, 4, 2, {8, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"groups 3, stride 2", 2, 1, 9, 6, 3, {10, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"depthwise 3x3", 2, 2, 16, 16, 16, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"depthwise, multiplier 2, stride 2", 2, 1, 8, 16, 8, {9, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, PLAIN},
    {"7x7 stem, stride 2", 2, 1, 3, 8, 1, {32, 30}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, false, false, PLAIN},
    {"kernel = input", 2, 3, 2, 5, 1, {4, 3}, {4, 3}, {1, 1}, {0}, {1, 1}, false, false, PLAIN},
    {"1-D", 1, 2, 3, 4, 1, {17}, {5}, {1}, {2, 2}, {1}, false, false, PLAIN},
    {"1-D stride 3, dilation 2", 1, 3, 4, 6, 2, {29}, {3}, {3}, {1, 4}, {2}, false, false, PLAIN},
    {"1-D depthwise", 1, 2, 6, 6, 6, {40}, {4}, {1}, {3, 0}, {1}, false, false, PLAIN},
    {"bias, relu, residual", 2, 2, 8, 8, 1, {10, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, false, PLAIN},
    {"bias, relu, residual, 1x1", 2, 1, 16, 32, 1, {8, 8}, {1, 1}, {1, 1}, {0}, {1, 1}, true, false, PLAIN},
    {"symbolic batch", 2, 3, 4, 8, 1, {9, 8}, {3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, false, true, PLAIN},
    {"K = 1152, past one block of k", 2, 2, 128, 20, 1, {12, 11}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, false, PLAIN},
    {"symbolic batch, groups, epilogue", 2, 2, 8, 12, 4, {13, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true, PLAIN},
    {"x stored NHWC", 2, 2, 6, 4, 2, {7, 8}, {3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, true, false, X_NHWC},
    {"x stored NHWC, 1x1", 2, 2, 6, 8, 1, {5, 4}, {1, 1}, {1, 1}, {0}, {1, 1}, false, false, X_NHWC},
    {"w stored HWIO", 2, 1, 4, 6, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, false, W_HWIO},
};

/* ---------------------------------------------------------------- the IR of a case */

static int64_t out_size(const Case *c, int i)
{
    int64_t span = (c->k[i] - 1) * c->dil[i] + 1;
    return (c->in[i] + c->pad[i] + c->pad[c->n + i] - span) / c->stride[i] + 1;
}

static int put_list(char *s, size_t size, const int64_t *v, int n)
{
    int len = snprintf(s, size, "[");
    for (int i = 0; i < n; i++)
        len += snprintf(s + len, size - (size_t)len, "%s%lld", i ? ", " : "", (long long)v[i]);
    return len + snprintf(s + len, size - (size_t)len, "]");
}

/* "f32[d0,d1,...]", dim `sym` (-1 none) written as the symbol B. */
static void shape(char *s, size_t size, const int64_t *d, int rank, int sym)
{
    int len = snprintf(s, size, "f32[");
    for (int i = 0; i < rank; i++)
        len += i == sym ? snprintf(s + len, size - (size_t)len, "%sB", i ? "," : "")
                        : snprintf(s + len, size - (size_t)len, "%s%lld", i ? "," : "", (long long)d[i]);
    snprintf(s + len, size - (size_t)len, "]");
}

/* The IR: x and w as declared (in their stored layout), the transposes to NCHW / OIHW,
 * conv, and the epilogue. */
static char *case_ir(const Case *c)
{
    int r = 2 + c->n, bsym = c->symbolic ? 0 : -1;
    int64_t x[4] = {c->batch, c->c}, w[4] = {c->m, c->c / c->groups}, y[4] = {c->batch, c->m};
    int64_t nhwc[4] = {c->batch}, hwio[4], b[4] = {1, c->m, 1, 1};
    for (int i = 0; i < c->n; i++) {
        x[2 + i] = nhwc[1 + i] = c->in[i], w[2 + i] = hwio[i] = c->k[i], y[2 + i] = out_size(c, i);
    }
    nhwc[r - 1] = c->c, hwio[c->n] = w[1], hwio[c->n + 1] = c->m;
    char xs[96], ws[96], ys[96], bs[96], st[64], pd[64], dl[64], stored[96];
    shape(xs, sizeof xs, x, r, bsym), shape(ws, sizeof ws, w, r, -1), shape(ys, sizeof ys, y, r, bsym);
    shape(bs, sizeof bs, b, r, -1);
    put_list(st, sizeof st, c->stride, c->n);
    put_list(pd, sizeof pd, c->pad, 2 * c->n);
    put_list(dl, sizeof dl, c->dil, c->n);
    char *text = malloc(4096);
    const char *xi = "%x", *wi = "%w";
    if (c->layout == X_NHWC)
        shape(stored, sizeof stored, nhwc, r, bsym);
    else if (c->layout == W_HWIO)
        shape(stored, sizeof stored, hwio, r, -1);
    int n = snprintf(text, 4096, "graph @conv(%%x: %s, %%w: %s", c->layout == X_NHWC ? stored : xs,
                     c->layout == W_HWIO ? stored : ws);
    if (c->epilogue) /* the bias [1, M, 1, 1] and the residual, y's shape */
        n += snprintf(text + n, 4096 - (size_t)n, ", %%b: %s, %%r: %s", bs, ys);
    n += snprintf(text + n, 4096 - (size_t)n, ") -> (y: %s) {\n", ys);
    if (c->layout == X_NHWC)
        n += snprintf(text + n, 4096 - (size_t)n, "  %%xv = transpose %%x {perm=[0, 3, 1, 2]} : %s\n", xs), xi = "%xv";
    if (c->layout == W_HWIO)
        n += snprintf(text + n, 4096 - (size_t)n, "  %%wv = transpose %%w {perm=[3, 2, 0, 1]} : %s\n", ws), wi = "%wv";
    n += snprintf(text + n, 4096 - (size_t)n, "  %%c = conv %s, %s {stride=%s, padding=%s, "
                  "dilation=%s, groups=%lld} : %s\n", xi, wi, st, pd, dl, (long long)c->groups, ys);
    if (c->epilogue)
        snprintf(text + n, 4096 - (size_t)n, "  %%cb = add %%c, %%b : %s\n  %%a = relu %%cb : %s\n"
                 "  %%y = add %%a, %%r : %s\n  return %%y\n}\n", ys, ys, ys);
    else
        snprintf(text + n, 4096 - (size_t)n, "  return %%c\n}\n");
    return text;
}

static double value_at(int which, int64_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)which * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
    return 4 * ((double)(x >> 11) / 9007199254740992.0) - 2;
}

static void make_inputs(const Case *c, const Graph *g, Tensor *in)
{
    for (int i = 0; i < g->ninput; i++) {
        const Type *t = &g->node[g->input[i]].type;
        int64_t dims[COIL_MAX_RANK];
        for (int d = 0; d < t->rank; d++)
            dims[d] = dim_is_static(t->dim[d]) ? t->dim[d].k : c->batch;
        in[i] = check_tensor(t->dt, t->rank, dims, NULL);
        for (int64_t e = 0; e < tensor_numel(&in[i]); e++)
            dtype_store(t->dt, in[i].data, e, value_at(i, e));
    }
}

/* ---------------------------------------------------------------- checks */

static int compare(const char *what, const char *how, const Tensor *got, const Tensor *want, double tol)
{
    int bad = tensor_numel(got) != tensor_numel(want);
    if (bad)
        fprintf(stderr, "%s [%s]: %lld elements, want %lld\n", what, how,
                (long long)tensor_numel(got), (long long)tensor_numel(want));
    for (int64_t i = 0; !bad && i < tensor_numel(want); i++)
        if (!check_close(check_at(got, i), check_at(want, i), tol) && bad++ < 3)
            fprintf(stderr, "%s [%s]: element %lld = %.9g, want %.9g\n", what, how, (long long)i,
                    check_at(got, i), check_at(want, i));
    check_failures += bad > 0;
    return bad;
}

static void run_compiled(const Case *c, const Graph *g, const char *how, CompileOptions o,
                         const Tensor *in, const Tensor *want)
{
    Err e = {0};
    Tensor got = {0};
    Compiled *cc = compile_graph(g, &o, &e);
    if (!cc || !compiled_run(cc, in, NULL, &got, &e)) {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
    } else {
        /* f32 sums of K = C/G * taps products, each term up to 4 in size */
        int64_t terms = c->c / c->groups * c->k[0] * (c->n > 1 ? c->k[1] : 1);
        compare(c->name, how, &got, want, fmax(1e-5, 5e-8 * (double)terms));
        int gemms = 0;
        for (int s = 0; s < cc->p->nstep; s++)
            gemms += cc->p->step[s].kind == STEP_GEMM;
        if (gemms != 1 || cc->p->nstep > (c->layout == W_HWIO ? 2 : 1)) {
            fprintf(stderr, "%s [%s]: %d steps, %d GEMMs; want the conv as one GEMM step\n",
                    c->name, how, cc->p->nstep, gemms);
            check_failures++;
        }
    }
    tensor_free(&got);
    compiled_free(cc);
}

/* The decomposition (im2col gathers and one matmul) interpreted, against the op's loops. */
static void check_decomposed(const Case *c, const Graph *g, const Tensor *in, const Tensor *want)
{
    Err e = {0};
    Tensor got = {0};
    Graph *d = pass_decompose(g, &e);
    if (!d || !interp_run(d, in, NULL, &got, NULL, &e)) {
        fprintf(stderr, "%s [decomposed]: %s\n", c->name, e.msg);
        check_failures++;
    } else
        compare(c->name, "decomposed, interpreted", &got, want, 1e-5);
    for (int i = 0; d && i < d->nnode; i++)
        CHECK(d->node[i].op != OP_CONV);
    tensor_free(&got);
    graph_free(d);
}

/* Printed, parsed back and printed again: the same text. */
static void check_round_trip(const Graph *g)
{
    Err e = {0};
    char *once = ir_print(g);
    Graph *back = once ? ir_parse(once, strlen(once), "round trip", &e) : NULL;
    char *twice = back ? ir_print(back) : NULL;
    CHECK_STR(twice, once ? once : "");
    if (!back)
        fprintf(stderr, "round trip: %s\n", e.msg);
    free(once);
    free(twice);
    graph_free(back);
}

static void test_case(const Case *c)
{
    Err e = {0};
    char *text = case_ir(c);
    Graph *g = ir_parse(text, strlen(text), c->name, &e);
    Tensor in[4] = {{0}}, want = {0};
    if (g)
        make_inputs(c, g, in);
    if (!g || !interp_run(g, in, NULL, &want, NULL, &e)) {
        fprintf(stderr, "%s: %s\n%s", c->name, e.msg, text);
        check_failures++;
    } else {
        check_round_trip(g);
        check_decomposed(c, g, in, &want);
        if (cpu_codegen_built()) {
            run_compiled(c, g, "micro-kernels, 1 thread", (CompileOptions){.threads = 1}, in, &want);
            run_compiled(c, g, "micro-kernels, 2 threads", (CompileOptions){.threads = 2}, in, &want);
        }
        run_compiled(c, g, "portable, 3 threads", (CompileOptions){.threads = 3, .blas_gemm = true}, in, &want);
        run_compiled(c, g, "loop evaluator", (CompileOptions){.threads = 2, .no_llvm = true}, in, &want);
    }
    for (int i = 0; i < 4; i++)
        tensor_free(&in[i]);
    tensor_free(&want);
    graph_free(g);
    free(text);
}

/* A graph given as IR text compiled (2 threads) against interpreted. */
static void check_text(const char *name, const char *text, double tol)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), name, &e);
    Tensor in[2] = {{0}}, want = {0}, got = {0};
    Case c = {.batch = 2};
    Compiled *cc = NULL;
    if (g)
        make_inputs(&c, g, in);
    bool ok = g && interp_run(g, in, NULL, &want, NULL, &e) &&
              (cc = compile_graph(g, &(CompileOptions){.threads = 2}, &e)) &&
              compiled_run(cc, in, NULL, &got, &e);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        check_failures++;
    } else
        compare(name, "compiled", &got, &want, tol);
    for (int i = 0; i < 2; i++)
        tensor_free(&in[i]);
    tensor_free(&want), tensor_free(&got);
    compiled_free(cc);
    graph_free(g);
}

/* bf16 and f16 operands (the BLAS path widens each batch's windows to f32: the generated
 * micro-kernels take f32), one rounding of the result apart; and a 3-D conv (NCDHW). */
static void test_other_forms(void)
{
    char text[512];
    const char *dts[2] = {"bf16", "f16"};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text,
                 "graph @half(%%x: %s[2,4,7,6], %%w: %s[6,2,3,3]) -> (y: %s[2,6,4,3]) {\n"
                 "  %%y = conv %%x, %%w {stride=[2], padding=[1], groups=2} : %s[2,6,4,3]\n"
                 "  return %%y\n}\n", dts[i], dts[i], dts[i], dts[i]);
        check_text(dts[i], text, 1e-2);
    }
    check_text("3-D", "graph @conv3d(%x: f32[2,4,5,6,7], %w: f32[6,2,3,2,3]) -> (y: f32[2,6,3,6,3]) {\n"
               "  %y = conv %x, %w {stride=[2, 1, 2], padding=[1, 1, 0, 1, 0, 1], groups=2} : f32[2,6,3,6,3]\n"
               "  return %y\n}\n", 1e-5);
}

/* ---------------------------------------------------------------- training */

/* loss = sum(relu(conv(x, w)) * r) with x and w parameters: the joint graph (conv's
 * gradient rule: dX a conv of dY spread by the stride, dW dY times the im2col columns)
 * compiled against interpreted. */
static void test_training(int64_t stride, int64_t pad, int64_t dil, int64_t groups)
{
    char name[96];
    snprintf(name, sizeof name, "training, stride %lld, padding %lld, dilation %lld, groups %lld",
             (long long)stride, (long long)pad, (long long)dil, (long long)groups);
    Graph *g = graph_new("conv_train");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type xt = type_make(DT_F32, 4, (int64_t[]){2, 4, 9, 8});
    Type wt = type_make(DT_F32, 4, (int64_t[]){8, 4 / groups, 3, 2});
    int in[2] = {b_param(&b, "x", &xt, "normal(1)"), b_param(&b, "w", &wt, "normal(1)")};
    Attr a[4] = {attr_ints("stride", 1, &stride), attr_ints("padding", 1, &pad),
                 attr_ints("dilation", 1, &dil), attr_int("groups", groups)};
    int y = b_unary(&b, OP_RELU, b_op(&b, OP_CONV, in, 2, a, 4, NULL));
    if (y < 0) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        check_failures++;
        graph_free(g);
        return;
    }
    Type rt = *b_type(&b, y);
    int r = b_input(&b, "r", &rt);
    b_output(&b, b_reduce(&b, OP_SUM, b_binary(&b, OP_MUL, y, r), 0, NULL, false), "loss");
    Graph *joint = err_ok(&e) ? autodiff(g, NULL, &e) : NULL;
    Tensor params[2] = {{0}}, inputs[1] = {{0}}, want[3] = {{0}}, got[3] = {{0}};
    const Type *pt[2] = {&xt, &wt};
    for (int i = 0; i < 2; i++) {
        params[i] = check_tensor(DT_F32, 4, (int64_t[]){pt[i]->dim[0].k, pt[i]->dim[1].k, pt[i]->dim[2].k, pt[i]->dim[3].k}, NULL);
        for (int64_t k = 0; k < tensor_numel(&params[i]); k++)
            dtype_store(DT_F32, params[i].data, k, value_at(i, k));
    }
    int64_t rs[4];
    for (int d = 0; d < 4; d++)
        rs[d] = rt.dim[d].k;
    inputs[0] = check_tensor(DT_F32, 4, rs, NULL);
    for (int64_t k = 0; k < tensor_numel(&inputs[0]); k++)
        dtype_store(DT_F32, inputs[0].data, k, value_at(2, k));
    Compiled *cc = NULL;
    bool ok = joint && joint->noutput == 3 && interp_run(joint, inputs, params, want, NULL, &e) &&
              (cc = compile_graph(joint, &(CompileOptions){.threads = 2}, &e)) &&
              compiled_run(cc, inputs, params, got, &e);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        check_failures++;
    }
    for (int i = 0; ok && i < 3; i++)
        compare(name, joint->output_name[i], &got[i], &want[i], 1e-4);
    for (int i = 0; i < 3; i++)
        tensor_free(&want[i]), tensor_free(&got[i]);
    tensor_free(&params[0]), tensor_free(&params[1]), tensor_free(&inputs[0]);
    compiled_free(cc);
    graph_free(joint);
    graph_free(g);
}

/* ---------------------------------------------------------------- PyTorch */

/* As CASES in tests/models/conv/gen_conv.py: stride, padding (begins, ends), dilation,
 * groups; the shapes come from the fixtures. */
static const struct {
    int n;
    int64_t stride[2], pad[4], dil[2], groups;
} torch_cases[] = {
    {2, {2, 1}, {1, 0, 1, 0}, {1, 1}, 1},
    {2, {1, 2}, {2, 1, 2, 1}, {2, 1}, 2},
    {2, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4},
    {1, {3}, {2, 2}, {2}, 1},
    {2, {1, 1}, {0, 2, 1, 0}, {1, 1}, 1},
};

static void test_torch_case(int i)
{
    char path[3][128];
    Tensor t[3] = {{0}}, got = {0};
    Err e = {0};
    for (int k = 0; k < 3; k++)
        snprintf(path[k], sizeof path[k], FIXTURES "case%d_%c.npy", i, "xwy"[k]);
    bool ok = npy_read(path[0], &t[0], &e) && npy_read(path[1], &t[1], &e) && npy_read(path[2], &t[2], &e);
    Graph *g = ok ? graph_new("torch_conv") : NULL;
    Builder b = builder_make(g, &e);
    if (g) {
        Type xt = type_make(DT_F32, t[0].rank, t[0].shape), wt = type_make(DT_F32, t[1].rank, t[1].shape);
        int n = torch_cases[i].n, in[2] = {b_input(&b, "x", &xt), b_input(&b, "w", &wt)};
        Attr a[4] = {attr_ints("stride", n, torch_cases[i].stride), attr_ints("padding", 2 * n, torch_cases[i].pad),
                     attr_ints("dilation", n, torch_cases[i].dil), attr_int("groups", torch_cases[i].groups)};
        b_output(&b, b_op(&b, OP_CONV, in, 2, a, 4, NULL), "y");
        ok = err_ok(&e) && interp_run(g, t, NULL, &got, NULL, &e);
    }
    if (!ok) {
        fprintf(stderr, "torch case %d: %s\n", i, e.msg);
        check_failures++;
    } else
        compare("torch case", path[2], &got, &t[2], 1e-6);
    for (int k = 0; k < 3; k++)
        tensor_free(&t[k]);
    tensor_free(&got);
    graph_free(g);
}

/* ---------------------------------------------------------------- errors */

/* conv of x by w under attrs, built; the error message must contain want. */
static void check_error(int rx, const int64_t *xs, int rw, const int64_t *ws, DType wdt,
                        const Attr *attrs, int na, const char *want)
{
    Graph *g = graph_new("bad_conv");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type xt = type_make(DT_F32, rx, xs), wt = type_make(wdt, rw, ws);
    int in[2] = {b_input(&b, "x", &xt), b_input(&b, "w", &wt)};
    int y = b_op(&b, OP_CONV, in, 2, attrs, na, NULL);
    CHECK(y < 0);
    if (!strstr(e.msg, want)) {
        fprintf(stderr, "conv error: got \"%s\", want it to contain \"%s\"\n", e.msg, want);
        check_failures++;
    }
    graph_free(g);
}

static void test_errors(void)
{
    int64_t x[4] = {1, 4, 5, 5}, w[4] = {6, 3, 3, 3}, w2[4] = {6, 2, 3, 3}, big[4] = {6, 4, 7, 7};
    int64_t five[2] = {5, 5}, zero = 0, three[3] = {1, 1, 1}, neg[1] = {-1};
    check_error(4, x, 4, w, DT_F32, NULL, 0, "has 4 channels, but w f32[6,3,3,3] with groups = 1 takes 3");
    Attr g3 = attr_int("groups", 3);
    check_error(4, x, 4, w2, DT_F32, &g3, 1, "with groups = 3 takes 6");
    int64_t w5[4] = {5, 2, 3, 3};
    Attr g2 = attr_int("groups", 2);
    check_error(4, x, 4, w5, DT_F32, &g2, 1, "5 output channels, not a multiple of groups = 2");
    check_error(4, x, 4, big, DT_F32, NULL, 0, "shorter than the dilated kernel (7)");
    Attr dil = attr_ints("dilation", 2, five);
    check_error(4, x, 4, (int64_t[]){6, 4, 2, 2}, DT_F32, &dil, 1, "shorter than the dilated kernel (6)");
    check_error(3, x, 4, big, DT_F32, NULL, 0, "need the same rank, 3 to 5");
    check_error(2, x, 2, w, DT_F32, NULL, 0, "need the same rank, 3 to 5");
    check_error(4, x, 4, (int64_t[]){6, 4, 3, 3}, DT_F16, NULL, 0, "must have one float dtype");
    Attr st0 = attr_ints("stride", 1, &zero);
    check_error(4, x, 4, (int64_t[]){6, 4, 3, 3}, DT_F32, &st0, 1, "stride 0 and dilation 1 must be at least 1");
    Attr pad3 = attr_ints("padding", 3, three);
    check_error(4, x, 4, (int64_t[]){6, 4, 3, 3}, DT_F32, &pad3, 1, "padding has 3 entries for 2 spatial axes");
    Attr padneg = attr_ints("padding", 1, neg);
    check_error(4, x, 4, (int64_t[]){6, 4, 3, 3}, DT_F32, &padneg, 1, "must not be negative");
    Attr g0 = attr_int("groups", 0);
    check_error(4, x, 4, (int64_t[]){6, 4, 3, 3}, DT_F32, &g0, 1, "groups = 0 must be at least 1");
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        test_case(&cases[i]);
    for (int i = 0; i < (int)(sizeof torch_cases / sizeof *torch_cases); i++)
        test_torch_case(i);
    test_other_forms();
    test_training(1, 1, 1, 1);
    test_training(2, 1, 1, 2);
    test_training(2, 2, 2, 1);
    test_training(3, 0, 1, 4);
    test_errors();
    return check_status();
}
