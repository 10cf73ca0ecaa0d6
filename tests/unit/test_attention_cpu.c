/* test_attention_cpu.c — the CPU's fused attention step (runtime/cpu/attention.c) against
 * the reference interpreter, which evaluates attention row by row in f64: causal and not,
 * sizes off the tiles, one query, several batch dims and heads, operands that are strided
 * views (GPT-2's heads, K stored transposed, K and V broadcast over a batch dim), odd head
 * dims, scores far past exp's range, f16 and bf16, heads too large to cache; each on the
 * generated micro-kernels, on the portable one, on one to three threads. Then a small
 * GPT-2 (examples/gpt2.coil) compiled against interpreted. */
#include <stdlib.h>

#include "check.h"
#include "frontend/frontend.h"
#include "pipeline/pipeline.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/init.h"

/* How the operands reach the attention op. */
typedef enum Layout {
    CONTIGUOUS,  /* q, k, v as given, [batch.., T, D] */
    HEADS,       /* [B, T, H, D] transposed to [B, H, T, D], as GPT-2 splits its heads */
    K_STORED_T,  /* k given as [batch.., D, Tk]: the view has column stride Tk */
    BROADCAST,   /* k and v without the first batch dim (stride 0 across it) */
} Layout;

typedef struct Case {
    const char *name;
    DType dt;
    Layout layout;
    int64_t b0, b1;        /* batch dims (HEADS: B and H) */
    int64_t tq, tk, d, dv;
    bool causal;
    double scale;          /* 0: the default 1/sqrt(d) */
    bool large;            /* integer q, k in [-8, 8] at scale 1: scores in the thousands */
} Case;

static const Case cases[] = {
    {"one query, causal", DT_F32, CONTIGUOUS, 2, 1, 1, 1, 64, 64, true, 0, false},
    {"one query, 7 keys", DT_F32, CONTIGUOUS, 2, 1, 1, 7, 64, 64, false, 0, false},
    {"causal, T=200, 3x2 heads", DT_F32, CONTIGUOUS, 3, 2, 200, 200, 64, 64, true, 0, false},
    {"plain, T=150", DT_F32, CONTIGUOUS, 2, 2, 150, 150, 64, 64, false, 0.3, false},
    {"odd D=17, Dv=5", DT_F32, CONTIGUOUS, 2, 1, 97, 97, 17, 5, true, 0, false},
    {"D=33, Dv=40, Tq < Tk", DT_F32, CONTIGUOUS, 3, 1, 50, 130, 33, 40, false, 0, false},
    {"causal, Tq < Tk", DT_F32, CONTIGUOUS, 2, 1, 40, 230, 64, 64, true, 0, false},
    {"causal, Tq > Tk", DT_F32, CONTIGUOUS, 2, 1, 230, 40, 64, 64, true, 0, false},
    {"GPT-2's heads, strided", DT_F32, HEADS, 2, 3, 130, 130, 64, 64, true, 0, false},
    {"K stored transposed", DT_F32, K_STORED_T, 2, 1, 120, 120, 24, 24, true, 0, false},
    {"K and V broadcast", DT_F32, BROADCAST, 2, 3, 100, 100, 32, 32, true, 0, false},
    {"large scores, causal", DT_F32, CONTIGUOUS, 2, 2, 190, 190, 64, 64, true, 1, true},
    {"large scores, plain", DT_F32, CONTIGUOUS, 1, 2, 190, 120, 64, 64, false, 1, true},
    {"bf16", DT_BF16, CONTIGUOUS, 2, 2, 120, 120, 64, 64, true, 0, false},
    {"f16, GPT-2's heads", DT_F16, HEADS, 1, 2, 110, 110, 64, 64, true, 0, false},
    {"many blocks, T=500", DT_F32, HEADS, 1, 2, 500, 500, 64, 64, true, 0, false},
    /* strided, so packed, and 600 x 2048 floats: past a thread's head cache, block by block */
    {"heads past the cache", DT_F32, HEADS, 1, 2, 3, 600, 1024, 1024, false, 0, false},
};

/* ---------------------------------------------------------------- one case */

static const char *dt_name(DType dt) { return dtype_info[dt].name; }

/* The shape text of an operand of rows x cols under the case's batch dims. */
static void shape_text(const Case *c, bool broadcast, int64_t rows, int64_t cols, char *buf,
                       size_t n)
{
    if (c->layout == HEADS)
        snprintf(buf, n, "%s[%lld,%lld,%lld,%lld]", dt_name(c->dt), (long long)c->b0,
                 (long long)rows, (long long)c->b1, (long long)cols);
    else if (broadcast)
        snprintf(buf, n, "%s[%lld,%lld,%lld]", dt_name(c->dt), (long long)c->b1, (long long)rows,
                 (long long)cols);
    else
        snprintf(buf, n, "%s[%lld,%lld,%lld,%lld]", dt_name(c->dt), (long long)c->b0,
                 (long long)c->b1, (long long)rows, (long long)cols);
}

/* The case as IR text: inputs q, k, v in their layout, views to [b0, b1, T, D], attention. */
static char *case_ir(const Case *c)
{
    char q[64], k[64], v[64], o[64], qv[64], kv[64], vv[64], attrs[64] = "";
    bool bc = c->layout == BROADCAST;
    shape_text(c, false, c->tq, c->d, q, sizeof q);
    if (c->layout == K_STORED_T)
        shape_text(c, false, c->d, c->tk, k, sizeof k);
    else
        shape_text(c, bc, c->tk, c->d, k, sizeof k);
    shape_text(c, bc, c->tk, c->dv, v, sizeof v);
    Case flat = *c;
    flat.layout = CONTIGUOUS;
    shape_text(&flat, false, c->tq, c->dv, o, sizeof o);
    shape_text(&flat, false, c->tq, c->d, qv, sizeof qv);
    shape_text(&flat, false, c->tk, c->d, kv, sizeof kv);
    shape_text(&flat, false, c->tk, c->dv, vv, sizeof vv);
    if (c->causal && c->scale)
        snprintf(attrs, sizeof attrs, " {causal=true, scale=%.17g}", c->scale);
    else if (c->causal || c->scale)
        snprintf(attrs, sizeof attrs, c->causal ? " {causal=true}" : " {scale=%.17g}", c->scale);
    char *text = malloc(4096);
    int n = snprintf(text, 4096, "graph @attn(%%q: %s, %%k: %s, %%v: %s) -> (y: %s) {\n", q, k, v, o);
    const char *qi = "%q", *ki = "%k", *vi = "%v";
    if (c->layout == HEADS) {
        n += snprintf(text + n, 4096 - n,
                      "  %%qh = transpose %%q {perm=[0, 2, 1, 3]} : %s\n"
                      "  %%kh = transpose %%k {perm=[0, 2, 1, 3]} : %s\n"
                      "  %%vh = transpose %%v {perm=[0, 2, 1, 3]} : %s\n", qv, kv, vv);
        qi = "%qh", ki = "%kh", vi = "%vh";
    } else if (c->layout == K_STORED_T) {
        n += snprintf(text + n, 4096 - n, "  %%kt = transpose %%k {perm=[0, 1, 3, 2]} : %s\n", kv);
        ki = "%kt";
    }
    snprintf(text + n, 4096 - n, "  %%y = attention %s, %s, %s%s : %s\n  return %%y\n}\n", qi, ki,
             vi, attrs, o);
    return text;
}

/* A reproducible value for element i of input `which`: normal-ish in [-2, 2], or an
 * integer in [-8, 8] for large scores. */
static double value_at(const Case *c, int which, int64_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)which * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
    double u = (double)(x >> 11) / 9007199254740992.0;
    return c->large && which < 2 ? floor(u * 17) - 8 : 4 * u - 2;
}

static void make_inputs(const Case *c, const Graph *g, Tensor *in)
{
    for (int i = 0; i < 3; i++) {
        const Type *t = &g->node[g->input[i]].type;
        int64_t shape[COIL_MAX_RANK];
        for (int d = 0; d < t->rank; d++)
            shape[d] = t->dim[d].k;
        in[i] = check_tensor(t->dt, t->rank, shape, NULL);
        for (int64_t e = 0; e < tensor_numel(&in[i]); e++)
            dtype_store(t->dt, in[i].data, e, value_at(c, i, e));
    }
}

static int attention_steps(const Program *p)
{
    int n = 0;
    for (int s = 0; s < p->nstep; s++)
        n += p->step[s].kind == STEP_ATTENTION;
    return n;
}

/* Compiled with o, run, held to want. */
static void run_compiled(const Case *c, const Graph *g, const char *how, CompileOptions o,
                         const Tensor *in, const Tensor *want)
{
    Err e = {0};
    Tensor got = {0};
    double tol = c->dt == DT_F32 ? 1e-5 : 1e-2; /* f16/bf16: one rounding of the result apart */
    Compiled *cc = compile_graph(g, &o, &e);
    if (!cc || !compiled_run(cc, in, NULL, &got, &e)) {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
        compiled_free(cc);
        return;
    }
    if (attention_steps(cc->p) != 1) {
        fprintf(stderr, "%s [%s]: %d attention steps, want 1 (fused)\n", c->name, how,
                attention_steps(cc->p));
        check_failures++;
    }
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++)
        if (!check_close(check_at(&got, i), check_at(want, i), tol) && bad++ < 3)
            fprintf(stderr, "%s [%s]: element %lld = %.9g, want %.9g\n", c->name, how,
                    (long long)i, check_at(&got, i), check_at(want, i));
    check_failures += bad > 0;
    tensor_free(&got);
    compiled_free(cc);
}

static void test_case(const Case *c)
{
    Err e = {0};
    char *text = case_ir(c);
    Graph *g = ir_parse(text, strlen(text), c->name, &e);
    Tensor in[3] = {{0}}, want = {0};
    if (g)
        make_inputs(c, g, in);
    if (!g || !interp_run(g, in, NULL, &want, NULL, &e)) {
        fprintf(stderr, "%s: %s\n%s", c->name, e.msg, text);
        check_failures++;
    } else {
        if (cpu_codegen_built()) {
            run_compiled(c, g, "micro-kernels, 1 thread", (CompileOptions){.threads = 1}, in, &want);
            run_compiled(c, g, "micro-kernels, 2 threads", (CompileOptions){.threads = 2}, in, &want);
        }
        run_compiled(c, g, "portable, 3 threads", (CompileOptions){.threads = 3, .blas_gemm = true},
                     in, &want);
        run_compiled(c, g, "loop evaluator, 2 threads", (CompileOptions){.threads = 2, .no_llvm = true},
                     in, &want);
    }
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    tensor_free(&want);
    graph_free(g);
    free(text);
}

/* ---------------------------------------------------------------- GPT-2 */

/* A small GPT-2 (2 layers, 4 heads of 16, T = 100 past one query tile): the compiled
 * logits within 1e-5 of the interpreter's, attention fused in each layer. */
static void test_gpt2(void)
{
    const char *set[] = {"layers=2", "heads=4", "hidden=64", "vocab=97", "context=128"};
    ModelOptions mo = {.set = set, .nset = 5};
    SymSize dims[] = {{"B", 2}, {"T", 100}};
    Err e = {0};
    SymBind sb;
    bool given[1] = {false};
    Graph *g = model_load("examples/gpt2.coil", &mo, &e);
    int np = g ? graph_params(g, NULL) : 0;
    Tensor *params = calloc((size_t)np + 1, sizeof *params), in[1] = {{0}}, want = {0}, got = {0};
    Compiled *cc = NULL;
    bool ok = g && g->ninput == 1 && init_symbols(g, NULL, given, dims, 2, 1, &sb, &e) &&
              init_params(g, &sb, 1, params, &e) && init_inputs(g, &sb, 2, given, in, &e) &&
              interp_run(g, in, params, &want, NULL, &e) &&
              (cc = compile_graph(g, &(CompileOptions){.threads = 2}, &e)) &&
              compiled_run(cc, in, params, &got, &e);
    if (!ok) {
        fprintf(stderr, "gpt2: %s\n", e.msg);
        check_failures++;
    } else {
        CHECK(attention_steps(cc->p) == 2);
        double worst = 0;
        for (int64_t i = 0; i < tensor_numel(&want); i++) {
            double w = check_at(&want, i), d = fabs(check_at(&got, i) - w) / fmax(1, fabs(w));
            worst = d > worst || isnan(d) ? d : worst;
        }
        if (!(worst <= 1e-5)) {
            fprintf(stderr, "gpt2: logits differ from the interpreter's by %.3g\n", worst);
            check_failures++;
        }
    }
    compiled_free(cc);
    tensor_free(&got);
    tensor_free(&want);
    tensor_free(&in[0]);
    for (int i = 0; i < np; i++)
        tensor_free(&params[i]);
    free(params);
    graph_free(g);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        test_case(&cases[i]);
    test_gpt2();
    return check_status();
}
