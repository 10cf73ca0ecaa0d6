/* test_deep_chain.c — long chains of ops (257, 10,000, 32,768 and more): every stage from
 * the .coil frontend through fusion and lowering to LLVM, CUDA C and the loop evaluator, in
 * time linear in the chain and a small fixed stack, both as the CLI compiles them (kernels
 * of FUSE_MAX_NODES nodes) and as one kernel whose expression is as deep as the chain;
 * results as the interpreter's. Lowering used to hang past 256 fused ops and overflow the
 * stack on long chains. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cpu/cpu.h"
#include "codegen/cuda/cuda.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"

enum { ROWS = 4, COLS = 16 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- models */

/* `repeat n { body }` over x: f32[4, 16], as a .coil file; the graph loaded from it. */
static Graph *chain(int n, const char *body)
{
    char path[] = "/tmp/coil_test_deep_chain_XXXXXX.coil";
    int fd = mkstemps(path, 5);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        CHECK(0);
        return NULL;
    }
    fprintf(f, "model Chain(x: f32[%d, %d]) -> (y: f32[%d, %d]) {\n  repeat %d as i {\n"
               "    %s\n  }\n  return x\n}\n", ROWS, COLS, ROWS, COLS, n, body);
    fclose(f);
    Err e = {0};
    ModelOptions mo = {0};
    Graph *g = model_load(path, &mo, &e);
    if (!g)
        fprintf(stderr, "loading a chain of %d: %s\n", n, e.msg);
    CHECK(g != NULL);
    unlink(path);
    return g;
}

/* Values of both signs, so relu, tanh and the rest all have work to do. */
static Tensor input(void)
{
    double v[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        v[i] = 2.0 * sin(0.7 * i + 0.3);
    return check_tensor(DT_F32, 2, (const int64_t[]){ROWS, COLS}, v);
}

/* The graph after the standard passes (what lowering sees). */
static Graph *optimised(const Graph *src)
{
    Err e = {0};
    Graph *g = graph_copy(src, &e);
    if (!g || !run_passes(&g, pass_pipeline, &e)) {
        fprintf(stderr, "passes: %s\n", e.msg);
        CHECK(0);
        graph_free(g);
        return NULL;
    }
    return g;
}

static void check_same(const char *what, const Tensor *got, const Tensor *want, double tol)
{
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++)
        bad += !check_close(check_at(got, i), check_at(want, i), tol);
    if (bad)
        fprintf(stderr, "%s: %d of %lld elements differ from the interpreter's\n", what, bad,
                (long long)tensor_numel(want));
    CHECK(bad == 0);
}

/* ---------------------------------------------------------------- compiled, as the CLI does */

/* The compute nodes of g after the passes: what fusion groups. */
static int compute_nodes(const Graph *g)
{
    int n = 0;
    for (int id = 0; id < g->nnode; id++)
        n += !(op_info[g->node[id].op].flags & (OPF_LEAF | OPF_VIEW));
    return n;
}

/* g compiled (passes, fusion, lowering, LLVM) and run, against the interpreter: the chain
 * in kernels of FUSE_MAX_NODES nodes. */
static void check_compiled(const char *what, const Graph *g, double tol)
{
    Err e = {0};
    Tensor in = input(), want = {0}, got = {0};
    CompileOptions o = {.threads = 1};
    double t0 = now_s();
    Compiled *c = compile_graph(g, &o, &e);
    bool ok = c && compiled_run(c, &in, NULL, &got, &e) &&
              interp_run(g, &in, NULL, &want, NULL, &e);
    if (!ok)
        fprintf(stderr, "%s: %s\n", what, e.msg);
    CHECK(ok);
    if (ok) {
        int n = compute_nodes(c->g);
        printf("%s: compiled in %.3f s (passes %.3f, lowering %.3f, LLVM %.3f), %d kernel(s)\n",
               what, now_s() - t0, c->passes_s, c->lower_s, c->llvm_s, c->p->nkernel);
        CHECK(c->p->nkernel == (n + FUSE_MAX_NODES - 1) / FUSE_MAX_NODES);
        CHECK(c->lower_s < 1.0 * CHECK_TIME_SCALE);
        check_same(what, &got, &want, tol);
    }
    compiled_free(c);
    tensor_free(&in);
    tensor_free(&want);
    tensor_free(&got);
}

/* The reproduction of the hang: 257 relus (one past what the memo's first table held). */
static void test_relu_257(void)
{
    Graph *g = chain(257, "x = relu(x)");
    if (g)
        check_compiled("257 relus", g, 0);
    graph_free(g);
}

/* 10,000 ops of four kinds, so LLVM cannot fold the chain away (each op rounds once, in
 * f32 compiled and in f64 then f32 interpreted: the same values). */
static void test_mixed_10000(void)
{
    Graph *g = chain(2500, "x = abs(x * -0.9 + 1.0) - 0.5");
    if (g)
        check_compiled("10,000 mixed ops", g, 0);
    graph_free(g);
}

static void test_relu_32768(void)
{
    Graph *g = chain(32768, "x = relu(x)");
    if (g)
        check_compiled("32,768 relus", g, 0);
    graph_free(g);
}

/* ---------------------------------------------------------------- one kernel, unlimited */

/* g's chain lowered into one kernel (no limit on a group's size): a single expression as
 * deep as the chain. */
static Program *one_kernel(const Graph *g, double *seconds)
{
    Err e = {0};
    LowerOptions lo = {.max_fused = -1};
    double t0 = now_s();
    Program *p = fuse_and_lower(g, &lo, &e);
    *seconds = now_s() - t0;
    if (!p)
        fprintf(stderr, "lowering: %s\n", e.msg);
    CHECK(p != NULL && p->nkernel == 1 && p->nstep == 1);
    return p;
}

/* Lowering a fused chain of 10,000 ops takes well under a second (it was recursion with a
 * memo that stopped growing: a hang). */
static void test_lowering_time(void)
{
    Graph *src = chain(3334, "x = tanh(x * 1.25 + 0.5)");
    Graph *g = src ? optimised(src) : NULL;
    double s = 0;
    Program *p = g ? one_kernel(g, &s) : NULL;
    if (p) {
        printf("lowering %d nodes into one kernel of %d expressions: %.4f s\n", g->nnode,
               p->kernel[0].nlx, s);
        CHECK(p->kernel[0].nlx > 10000);
        CHECK(s < 1.0 * CHECK_TIME_SCALE);
    }
    program_free(p);
    graph_free(g);
    graph_free(src);
}

/* That one kernel of a 32,768-op chain through LLVM (coil's emission walks the pool in
 * order; nothing recurses), run, against the interpreter. Relus, which LLVM folds into
 * one early: its own time on long kernels of other ops is what FUSE_MAX_NODES bounds. */
static void test_llvm_one_kernel(void)
{
#if COIL_HAVE_LLVM /* a build without LLVM has no codegen/cpu to call */
    Graph *src = chain(32768, "x = relu(x)");
    Graph *g = src ? optimised(src) : NULL;
    double s = 0;
    Program *p = g ? one_kernel(g, &s) : NULL;
    Err e = {0};
    CpuOptions co = {0};
    double t0 = now_s();
    CpuModule *m = p ? cpu_compile(p, &co, &e) : NULL;
    Tensor in = input(), want = {0}, got = {0};
    bool ok = m && interp_run(src, &in, NULL, &want, NULL, &e) &&
              tensor_alloc(&got, DT_F32, 2, (const int64_t[]){ROWS, COLS}, &e);
    if (ok) {
        void **bufs = calloc((size_t)p->nbuf, sizeof *bufs);
        int64_t syms[COIL_SYM_SLOTS] = {0};
        for (int b = 0; bufs && b < p->nbuf; b++)
            bufs[b] = p->buf[b].kind == BUF_INPUT    ? in.data
                    : p->buf[b].kind == BUF_OUTPUT ? got.data
                                                   : NULL;
        KernelFn fn = cpu_kernel(m, 0);
        if (bufs && fn)
            fn(bufs, syms, 0, p->kernel[0].size[0].k);
        CHECK(bufs && fn);
        free(bufs);
        printf("one kernel of %d expressions: lowered in %.3f s, LLVM %.3f s\n",
               p->kernel[0].nlx, s, now_s() - t0);
        check_same("one LLVM kernel", &got, &want, 0);
    } else {
        fprintf(stderr, "one LLVM kernel: %s\n", e.msg);
        CHECK(0);
    }
    cpu_free(m);
    tensor_free(&in);
    tensor_free(&want);
    tensor_free(&got);
    program_free(p);
    graph_free(g);
    graph_free(src);
#else
    printf("  LLVM one-kernel chain skipped: built without LLVM\n");
#endif
}

/* ---------------------------------------------------------------- in a small stack */

/* Every stage coil itself runs (frontend, passes, fusion, lowering with and without
 * fusion, the loop IR's text, CUDA C and the loop evaluator) on a 32,768-op chain, in a
 * thread of 256 KiB: no stage recurses to a depth proportional to the chain. */
typedef struct Staged {
    Graph *src;
    Tensor out;
    size_t cuda_bytes, text_bytes;
    bool ok;
} Staged;

static void *all_stages(void *arg)
{
    Staged *s = arg;
    Err e = {0};
    s->src = chain(32768, "x = relu(x) * 0.5 - 0.25");
    Graph *g = s->src ? optimised(s->src) : NULL;
    LowerOptions whole = {.max_fused = -1}, off = {.no_fusion = true};
    Program *p = g ? fuse_and_lower(g, &whole, &e) : NULL;
    Program *unfused = p ? fuse_and_lower(g, &off, &e) : NULL;
    char *text = unfused ? loop_print(p) : NULL;
    char *cu = text ? cuda_source(p, &e) : NULL;
    Tensor in = input();
    s->ok = cu && p->nkernel == 1 && unfused->nkernel > 32768 &&
            loop_eval(p, &in, NULL, &s->out, &e);
    if (!s->ok)
        fprintf(stderr, "stages: %s\n", e.msg);
    s->text_bytes = text ? strlen(text) : 0;
    s->cuda_bytes = cu ? strlen(cu) : 0;
    tensor_free(&in);
    free(cu);
    free(text);
    program_free(unfused);
    program_free(p);
    graph_free(g);
    return NULL;
}

static void test_small_stack(void)
{
    pthread_attr_t attr;
    pthread_t t;
    Staged s = {0};
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    double t0 = now_s();
    CHECK(pthread_create(&t, &attr, all_stages, &s) == 0 && pthread_join(t, NULL) == 0);
    pthread_attr_destroy(&attr);
    CHECK(s.ok);
    printf("32,768-op chain in a 256 KiB stack: %.3f s; loop IR %zu bytes, CUDA C %zu bytes\n",
           now_s() - t0, s.text_bytes, s.cuda_bytes);
    Err e = {0};
    Tensor in = input(), want = {0};
    if (s.ok && interp_run(s.src, &in, NULL, &want, NULL, &e))
        check_same("loop evaluator", &s.out, &want, 0);
    tensor_free(&in);
    tensor_free(&want);
    tensor_free(&s.out);
    graph_free(s.src);
}

/* ---------------------------------------------------------------- deep stacks of layers */

/* A residual stack of 4,096 Linear layers: each GEMM takes the bias, relu and residual
 * add as its epilogue. Checking that no epilogue closes a cycle walked everything below
 * each GEMM (quadratic: 9.8 s for 8,192 layers); fusion and lowering now take a fraction
 * of a second. */
static void test_residual_stack(void)
{
    Graph *src = chain(4096, "x = x + relu(layer[i]: Linear(x, 16))");
    Graph *g = src ? optimised(src) : NULL;
    Err e = {0};
    double t0 = now_s();
    Program *p = g ? fuse_and_lower(g, NULL, &e) : NULL;
    double s = now_s() - t0;
    int gemms = 0, fused = 0;
    for (int i = 0; p && i < p->nstep; i++) {
        gemms += p->step[i].kind == STEP_GEMM;
        fused += p->step[i].kind == STEP_GEMM && p->step[i].gemm.epilogue >= 0;
    }
    CHECK(p != NULL && gemms == 4096 && fused == 4096 && p->nstep == 4096);
    printf("residual stack of 4,096 layers: %d nodes lowered in %.3f s\n", g ? g->nnode : 0, s);
    CHECK(s < 1.0 * CHECK_TIME_SCALE);
    program_free(p);
    graph_free(g);
    graph_free(src);
}

/* ---------------------------------------------------------------- long reductions */

/* 512 softmaxes fuse into row groups of up to FUSE_MAX_NODES nodes, far more phases than
 * LOOP_MAX_PHASES; lowering cuts them, all the cuts at once (a retry per cut, each
 * lowering everything again, made this quadratic). */
static void test_softmax_chain(void)
{
    Graph *g = chain(512, "x = softmax(x * 8.0)");
    if (!g)
        return;
    Err e = {0};
    Tensor in = input(), want = {0}, got = {0};
    CompileOptions o = {.threads = 1, .no_llvm = true}; /* lowering is the point */
    Compiled *c = compile_graph(g, &o, &e);
    bool ok = c && compiled_run(c, &in, NULL, &got, &e) &&
              interp_run(g, &in, NULL, &want, NULL, &e);
    CHECK(ok);
    if (ok) {
        printf("512 softmaxes: %d kernels, lowered in %.3f s\n", c->p->nkernel, c->lower_s);
        CHECK(c->p->nkernel <= 512 / 3 + 2); /* three softmaxes and a part per kernel */
        CHECK(c->lower_s < 1.0 * CHECK_TIME_SCALE);
        check_same("512 softmaxes", &got, &want, 1e-4);
    } else {
        fprintf(stderr, "softmax chain: %s\n", e.msg);
    }
    compiled_free(c);
    tensor_free(&in);
    tensor_free(&want);
    tensor_free(&got);
    graph_free(g);
}

int main(void)
{
#ifndef COIL_HAVE_FRONTEND
    printf("skipped: this build has no .coil frontend\n");
    return 0;
#endif
    test_relu_257();
    test_mixed_10000();
    test_lowering_time();
    test_llvm_one_kernel();
    test_small_stack();
    test_relu_32768();
    test_residual_stack();
    test_softmax_chain();
    return check_status();
}
