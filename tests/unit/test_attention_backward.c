/* test_attention_backward.c — attention's fused backward (attention_lse and attention_grad,
 * runtime/cpu/attention_backward.c) against the gradients of the decomposed attention in
 * the f64 interpreter: loss = sum(attention(q, k, v) * w) with q, k, v parameters, its
 * joint graph from autodiff (which keeps attention whole and builds the fused ops) compiled
 * and run, grad.q, grad.k and grad.v held to those of autodiff over the decomposition.
 * Causal and not, T off the blocks, batch and heads, GPT-2's strided heads, f16 and bf16,
 * 1 to 3 threads, the portable micro-kernel, and the loop IR's evaluator. The interpreter's own
 * evaluation of the fused ops, and of what the CUDA pipeline's passes leave (the fused ops
 * in f16/bf16 at D up to 64, else their decomposition), are held to the same oracle. Then training: a small GPT-2's
 * losses over a few SGD steps, fused against decomposed, within 1e-5. */
#include <stdlib.h>

#include "check.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"
#include "pipeline/training.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/init.h"

typedef struct Case {
    const char *name;
    DType dt;
    bool heads;          /* q, k, v as [B, T, H, D] transposed to [B, H, T, D] (GPT-2) */
    int64_t b0, b1, t, d;
    bool causal;
    double scale;        /* 0: 1/sqrt(d) */
} Case;

static const Case cases[] = {
    {"causal, one query", DT_F32, false, 2, 1, 1, 16, true, 0},
    {"causal, T=100, 2x3 heads", DT_F32, false, 2, 3, 100, 32, true, 0},
    {"plain, T=130, scale 0.3", DT_F32, false, 1, 2, 130, 64, false, 0.3},
    {"causal, T=97 (one block and one key)", DT_F32, false, 1, 1, 97, 64, true, 0},
    {"odd D=17, causal, T=200", DT_F32, false, 1, 2, 200, 17, true, 0},
    {"GPT-2's heads, causal, T=150", DT_F32, true, 2, 3, 150, 64, true, 0},
    {"GPT-2's heads, plain, T=40", DT_F32, true, 1, 4, 40, 16, false, 0},
    {"bf16, GPT-2's heads, causal", DT_BF16, true, 1, 2, 120, 64, true, 0},
    {"f16, causal", DT_F16, false, 1, 2, 110, 32, true, 0},
};

/* ---------------------------------------------------------------- one case */

static const char *dt_name(DType dt) { return dtype_info[dt].name; }

/* loss = sum(attention(q, k, v) * w): q, k, v parameters in the case's layout, w an input
 * of the result's shape (f32, so the loss is f32 whatever the operands). */
static char *case_ir(const Case *c)
{
    char in[64], hv[64], o[64], attrs[64] = "";
    long long b0 = c->b0, b1 = c->b1, t = c->t, d = c->d;
    const char *dt = dt_name(c->dt);
    if (c->heads)
        snprintf(in, sizeof in, "%s[%lld,%lld,%lld,%lld]", dt, b0, t, b1, d);
    else
        snprintf(in, sizeof in, "%s[%lld,%lld,%lld,%lld]", dt, b0, b1, t, d);
    snprintf(hv, sizeof hv, "%s[%lld,%lld,%lld,%lld]", dt, b0, b1, t, d);
    snprintf(o, sizeof o, "f32[%lld,%lld,%lld,%lld]", b0, b1, t, d);
    if (c->causal && c->scale)
        snprintf(attrs, sizeof attrs, " {causal=true, scale=%.17g}", c->scale);
    else if (c->causal)
        snprintf(attrs, sizeof attrs, " {causal=true}");
    else if (c->scale)
        snprintf(attrs, sizeof attrs, " {scale=%.17g}", c->scale);
    char *text = malloc(4096);
    int n = snprintf(text, 4096,
                     "graph @attn_bwd(%%w: %s) -> (loss: f32[]) {\n"
                     "  %%q = param {name=\"q\"} : %s\n  %%k = param {name=\"k\"} : %s\n"
                     "  %%v = param {name=\"v\"} : %s\n", o, in, in, in);
    const char *qi = "%q", *ki = "%k", *vi = "%v";
    if (c->heads) {
        n += snprintf(text + n, 4096 - n,
                      "  %%qh = transpose %%q {perm=[0, 2, 1, 3]} : %s\n"
                      "  %%kh = transpose %%k {perm=[0, 2, 1, 3]} : %s\n"
                      "  %%vh = transpose %%v {perm=[0, 2, 1, 3]} : %s\n", hv, hv, hv);
        qi = "%qh", ki = "%kh", vi = "%vh";
    }
    snprintf(text + n, 4096 - n,
             "  %%y = attention %s, %s, %s%s : %s\n"
             "  %%yf = cast %%y : %s\n  %%l = mul %%yf, %%w : %s\n"
             "  %%s = sum %%l : f32[]\n  return %%s\n}\n",
             qi, ki, vi, attrs, hv, o, o);
    return text;
}

/* A reproducible value in [-2, 2) for element i of tensor `which`. */
static double value_at(int which, int64_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)which * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
    return 4 * ((double)(x >> 11) / 9007199254740992.0) - 2;
}

static Tensor filled(const Type *t, int which)
{
    int64_t shape[COIL_MAX_RANK];
    for (int d = 0; d < t->rank; d++)
        shape[d] = t->dim[d].k;
    Tensor x = check_tensor(t->dt, t->rank, shape, NULL);
    for (int64_t e = 0; e < tensor_numel(&x); e++)
        dtype_store(t->dt, x.data, e, value_at(which, e));
    return x;
}

static int backward_steps(const Program *p)
{
    int n = 0;
    for (int s = 0; s < p->nstep; s++)
        n += p->step[s].kind == STEP_ATTENTION && p->step[s].attn.kind == ATTN_BACKWARD;
    return n;
}

static bool has_op(const Graph *g, int op)
{
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == op)
            return true;
    return false;
}

/* got's gradients (outputs 1..3) against want's, element by element. */
static void compare(const Case *c, const char *how, const Tensor *got, const ITensor *want,
                    double tol)
{
    int bad = 0;
    for (int o = 1; o <= 3; o++)
        for (int64_t i = 0; i < want[o].n; i++)
            if (!check_close(check_at(&got[o], i), want[o].d[i], tol) && bad++ < 3)
                fprintf(stderr, "%s [%s]: grad.%c[%lld] = %.9g, want %.9g\n", c->name, how,
                        "lqkv"[o], (long long)i, check_at(&got[o], i), want[o].d[i]);
    check_failures += bad > 0;
}

static void run_compiled(const Case *c, const Graph *joint, const char *how, CompileOptions o,
                         const Tensor *in, const Tensor *params, const ITensor *want)
{
    Err e = {0};
    Tensor got[4] = {{0}};
    double tol = c->dt == DT_F32 ? 2e-5 : 3e-2; /* f16/bf16: operands and results rounded */
    Compiled *cc = compile_graph(joint, &o, &e);
    if (!cc || !compiled_run(cc, in, params, got, &e)) {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
    } else {
        if (backward_steps(cc->p) != 1) {
            fprintf(stderr, "%s [%s]: %d fused backward steps, want 1\n", c->name, how,
                    backward_steps(cc->p));
            check_failures++;
        }
        compare(c, how, got, want, tol);
    }
    for (int i = 0; i < 4; i++)
        tensor_free(&got[i]);
    compiled_free(cc);
}

/* f64 results as f32 tensors, to compare as compiled ones are. */
static void compare_f64(const Case *c, const char *how, const ITensor *got, const ITensor *want)
{
    Tensor as_t[4] = {{0}};
    for (int o = 1; o <= 3; o++)
        as_t[o] = check_tensor(DT_F32, 1, (int64_t[]){got[o].n}, got[o].d);
    compare(c, how, as_t, want, 1e-6); /* as_t is f32 */
    for (int o = 1; o <= 3; o++)
        tensor_free(&as_t[o]);
}

/* The CUDA pipeline's passes keep the training ops where its tensor-core kernels take them
 * (f16 or bf16, D a multiple of 16 up to 64) and decompose them elsewhere: the joint
 * graph they leave has both or neither, and the same gradients. */
static void check_gpu_pipeline(const Case *c, const Graph *joint, const Tensor *in,
                               const Tensor *params, const ITensor *want)
{
    Err e = {0};
    Graph *g = graph_copy(joint, &e);
    ITensor got[4] = {{0}};
    bool keep = c->dt != DT_F32 && c->d % 16 == 0 && c->d <= ATTENTION_MMA_BACKWARD_MAX_HEAD;
    if (!g || !run_passes(&g, pass_pipeline_cuda, &e) || has_op(g, OP_ATTENTION_GRAD) != keep ||
        has_op(g, OP_ATTENTION_LSE) != keep || !interp_run_f64(g, in, params, got, &e)) {
        fprintf(stderr, "%s [CUDA's passes]: %s\n", c->name,
                err_ok(&e) ? (keep ? "fused ops decomposed" : "fused ops left") : e.msg);
        check_failures++;
    } else
        compare_f64(c, "CUDA's passes, interpreted", got, want);
    for (int o = 0; o < 4; o++)
        free(got[o].d);
    graph_free(g);
}

/* The loop IR's evaluator (codegen/loop_eval.c, f64 per step) on the lowered program. */
static void run_loop_eval(const Case *c, const Graph *joint, const Tensor *in,
                          const Tensor *params, const ITensor *want)
{
    Err e = {0};
    Graph *g = graph_copy(joint, &e);
    Program *p = g && run_passes(&g, pass_pipeline, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
    Tensor got[4] = {{0}};
    if (!p || backward_steps(p) != 1 || !loop_eval(p, in, params, got, &e)) {
        fprintf(stderr, "%s [loop_eval]: %s\n", c->name, err_ok(&e) ? "no fused step" : e.msg);
        check_failures++;
    } else
        compare(c, "loop_eval", got, want, c->dt == DT_F32 ? 2e-5 : 3e-2);
    for (int i = 0; i < 4; i++)
        tensor_free(&got[i]);
    program_free(p);
    graph_free(g);
}

/* The reference: autodiff over the decomposed attention, in f64. */
static bool reference(const Graph *g, const Tensor *in, const Tensor *params, ITensor *want,
                      Err *e)
{
    Graph *dec = pass_decompose(g, e);
    Graph *joint = dec ? autodiff(dec, NULL, e) : NULL;
    bool ok = joint && !has_op(joint, OP_ATTENTION_GRAD) &&
              interp_run_f64(joint, in, params, want, e);
    graph_free(joint);
    graph_free(dec);
    return ok;
}

static void test_case(const Case *c)
{
    Err e = {0};
    char *text = case_ir(c);
    Graph *g = ir_parse(text, strlen(text), c->name, &e);
    Graph *joint = g ? autodiff(g, NULL, &e) : NULL;
    Tensor in[1] = {{0}}, params[3] = {{0}};
    ITensor want[4] = {{0}}, interp[4] = {{0}};
    if (g) {
        in[0] = filled(&g->node[g->input[0]].type, 9);
        int ids[3];
        graph_params(g, ids);
        for (int i = 0; i < 3; i++)
            params[i] = filled(&g->node[ids[i]].type, i);
    }
    if (!joint || !reference(g, in, params, want, &e)) {
        fprintf(stderr, "%s: %s\n%s", c->name, e.msg, text);
        check_failures++;
    } else {
        CHECK(has_op(joint, OP_ATTENTION_GRAD) && has_op(joint, OP_ATTENTION_LSE));
        /* the interpreter's evaluation of the fused ops: the same gradients */
        if (interp_run_f64(joint, in, params, interp, &e))
            compare_f64(c, "interpreter", interp, want);
        else {
            fprintf(stderr, "%s [interpreter]: %s\n", c->name, e.msg);
            check_failures++;
        }
        check_gpu_pipeline(c, joint, in, params, want);
        if (cpu_codegen_built()) {
            run_compiled(c, joint, "micro-kernels, 1 thread", (CompileOptions){.threads = 1}, in,
                         params, want);
            run_compiled(c, joint, "micro-kernels, 2 threads", (CompileOptions){.threads = 2}, in,
                         params, want);
        }
        run_compiled(c, joint, "portable, 3 threads",
                     (CompileOptions){.threads = 3, .blas_gemm = true}, in, params, want);
        run_compiled(c, joint, "no LLVM, 2 threads", (CompileOptions){.threads = 2, .no_llvm = true},
                     in, params, want);
        run_loop_eval(c, joint, in, params, want);
    }
    for (int o = 0; o < 4; o++)
        free(want[o].d), free(interp[o].d);
    tensor_free(&in[0]);
    for (int i = 0; i < 3; i++)
        tensor_free(&params[i]);
    graph_free(joint);
    graph_free(g);
    free(text);
}

/* ---------------------------------------------------------------- training */

/* SGD on a small GPT-2 (2 layers, 4 heads of 16, T = 100 over one block), fused backward
 * against the decomposed one: the same losses step after step, within 1e-5. */
static bool sgd_losses(const Graph *joint, Tensor *params, int np, const Tensor *in,
                       double *loss, int steps, Err *e)
{
    Compiled *cc = compile_graph(joint, &(CompileOptions){.threads = 2}, e);
    Tensor *out = calloc((size_t)joint->noutput, sizeof *out);
    bool ok = cc && out;
    for (int s = 0; ok && s < steps; s++) {
        ok = compiled_run(cc, in, params, out, e);
        for (int i = 0; ok && i < np; i++) {
            float *p = params[i].data;
            const float *grad = out[1 + i].data;
            for (int64_t x = 0; x < tensor_numel(&params[i]); x++)
                p[x] -= 0.05f * grad[x];
        }
        if (ok)
            loss[s] = check_at(&out[0], 0);
    }
    for (int i = 0; out && i < joint->noutput; i++)
        tensor_free(&out[i]);
    free(out);
    compiled_free(cc);
    return ok;
}

static void test_gpt2_training(void)
{
    const char *set[] = {"layers=2", "heads=4", "hidden=64", "vocab=97", "context=128"};
    ModelOptions mo = {.set = set, .nset = 5};
    SymSize dims[] = {{"B", 2}, {"T", 100}};
    enum { STEPS = 4 };
    Err e = {0};
    SymBind sb;
    bool given[2] = {false, false};
    Graph *model = model_load("examples/gpt2.coil", &mo, &e);
    Graph *g = model ? training_loss_graph(model, "cross_entropy", &e) : NULL;
    Graph *fused = g ? autodiff(g, NULL, &e) : NULL;
    Graph *dec = g ? pass_decompose(g, &e) : NULL;
    Graph *plain = dec ? autodiff(dec, NULL, &e) : NULL;
    int np = g ? graph_params(g, NULL) : 0;
    Tensor *pa = calloc((size_t)np + 1, sizeof *pa), *pb = calloc((size_t)np + 1, sizeof *pb);
    Tensor in[2] = {{0}};
    double la[STEPS], lb[STEPS];
    bool ok = plain && fused && g->ninput == 2 &&
              init_symbols(g, NULL, given, dims, 2, 1, &sb, &e) &&
              init_params(g, &sb, 1, pa, &e) && init_params(g, &sb, 1, pb, &e) &&
              init_inputs(g, &sb, 2, given, in, &e);
    if (ok) { /* targets: tokens in range */
        int64_t *tg = in[1].data;
        for (int64_t i = 0; i < tensor_numel(&in[1]); i++)
            tg[i] = (i * 31 + 7) % 97;
    }
    ok = ok && has_op(fused, OP_ATTENTION_GRAD) && !has_op(plain, OP_ATTENTION_GRAD) &&
         sgd_losses(fused, pa, np, in, la, STEPS, &e) && sgd_losses(plain, pb, np, in, lb, STEPS, &e);
    if (!ok) {
        fprintf(stderr, "gpt2 training: %s\n", e.msg);
        check_failures++;
    } else {
        for (int s = 0; s < STEPS; s++)
            if (!(fabs(la[s] - lb[s]) <= 1e-5 * fmax(1, fabs(lb[s])))) {
                fprintf(stderr, "gpt2 training, step %d: loss %.9g fused, %.9g decomposed\n", s,
                        la[s], lb[s]);
                check_failures++;
            }
        CHECK(la[STEPS - 1] < la[0]);
    }
    for (int i = 0; i < np; i++)
        tensor_free(&pa[i]), tensor_free(&pb[i]);
    free(pa), free(pb);
    tensor_free(&in[0]), tensor_free(&in[1]);
    graph_free(plain), graph_free(dec), graph_free(fused), graph_free(g), graph_free(model);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        test_case(&cases[i]);
    test_gpt2_training();
    return check_status();
}
