/* test_index_bounds.c — gathers out of range are errors on every runner, as in the
 * interpreter (and PyTorch), never silently clamped. The range analysis on its own (what
 * it bounds, where it is exact); indices known from the sizes (a sequence longer than a
 * position table) rejected before any kernel runs; indices computed from data caught by
 * their range step after the run; each on the loop evaluator, the CPU engine with the
 * loop evaluator's kernels and with LLVM's, and the CUDA C run on the host emulator.
 * In-range models give the interpreter's results. */
#include <stdlib.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "codegen/index_bounds.h"
#include "emu_build.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"
#include "runtime/cuda/cuda_mapping.h"

static Graph *parse(const char *name, const char *text)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), name, &e);
    if (!g) {
        fprintf(stderr, "%s\n%s\n", e.msg, text);
        check_failures++;
    }
    return g;
}

static Tensor ints(DType dt, int n, const int64_t *v)
{
    double d[16];
    for (int i = 0; i < n; i++)
        d[i] = (double)v[i];
    return check_tensor(dt, n < 0 ? 0 : 1, (int64_t[]){n}, d);
}

/* A table of rows*cols floats, element i = i / 4. */
static Tensor table(int64_t rows, int64_t cols)
{
    double d[256];
    for (int i = 0; i < rows * cols; i++)
        d[i] = i / 4.0;
    return check_tensor(DT_F32, 2, (int64_t[]){rows, cols}, d);
}

/* ---------------------------------------------------------------- the analysis */

/* The range of node `name`'s value at T = t in a graph whose only symbol is T. */
static ValueRange range_at(const Graph *g, int node, int64_t t)
{
    SymBind sb = {.val = {t}, .known = {true}};
    return value_range(g, node, &sb);
}

#define CHECK_RANGE(r, want_lo, want_hi, want_lo_hit, want_hi_hit)                       \
    do {                                                                                 \
        ValueRange r_ = (r);                                                             \
        CHECK(r_.known && !r_.empty && r_.lo == (want_lo) && r_.hi == (want_hi) &&       \
              r_.lo_hit == (want_lo_hit) && r_.hi_hit == (want_hi_hit));                 \
        if (!(r_.known && r_.lo == (want_lo) && r_.hi == (want_hi)))                     \
            fprintf(stderr, "  range [%g, %g] known %d hits %d %d\n", r_.lo, r_.hi,      \
                    r_.known, r_.lo_hit, r_.hi_hit);                                     \
    } while (0)

static void test_ranges(void)
{
    /* Node ids: the inputs are 0 and 1, then one per statement. */
    Graph *g = parse("ranges.cir",
        "graph @r(%x: i64[T], %s: f32[T,6]) -> (a: i64[T]) {\n"
        "  %p = iota : i64[T]\n"
        "  %three = full {value=3} : i64[]\n"
        "  %a = add %p, %three : i64[T]\n"
        "  %b = sub %three, %p : i64[T]\n"
        "  %c = minimum %a, %three : i64[T]\n"
        "  %d = add %p, %p : i64[T]\n"
        "  %e = expand %p : i64[4,T]\n"
        "  %f = reshape %e : i64[T*4]\n"
        "  %two = full {value=2} : i64[]\n"
        "  %q = div %a, %two : i64[T]\n"
        "  %m = maximum %d, %a : i64[T]\n"
        "  %lt = lt %p, %three : bool[T]\n"
        "  %w = where %lt, %p, %three : i64[T]\n"
        "  %y = mul %x, %two : i64[T]\n"
        "  %am = argmax %s {axis=1} : i64[T]\n"
        "  %three4 = expand %three : i64[4]\n"
        "  %big = mul %p, %p : i64[T]\n"
        "  %n = cast %big : i8[T]\n"
        "  %nine = full {value=9} : i64[2]\n"
        "  %cat = concat %three4, %nine {axis=0} : i64[6]\n"
        "  %ok = lt %y, %two : bool[T]\n"
        "  return %a\n}\n");
    if (!g)
        return;
    CHECK_RANGE(range_at(g, 2, 64), 0, 63, true, true);    /* iota */
    CHECK_RANGE(range_at(g, 4, 64), 3, 66, true, true);    /* iota + 3 */
    CHECK_RANGE(range_at(g, 5, 64), -60, 3, true, true);   /* 3 - iota */
    CHECK_RANGE(range_at(g, 6, 64), 3, 3, true, true);     /* min(iota + 3, 3) */
    CHECK_RANGE(range_at(g, 7, 64), 0, 126, false, false); /* iota + iota: pairs unknown */
    CHECK_RANGE(range_at(g, 9, 64), 0, 63, true, true);    /* expanded, reshaped */
    CHECK_RANGE(range_at(g, 11, 64), 1, 33, true, true);   /* (iota + 3) / 2, truncated */
    CHECK_RANGE(range_at(g, 12, 64), 3, 126, false, false); /* max(d, a): d's end not hit */
    CHECK_RANGE(range_at(g, 14, 64), 0, 63, false, false); /* where: a union */
    CHECK_RANGE(range_at(g, 15, 64), -0x1p63, 0x1p63, false, false); /* data: i64's range */
    CHECK_RANGE(range_at(g, 16, 64), 0, 5, false, false);  /* argmax over 6 */
    CHECK_RANGE(range_at(g, 19, 10), 0, 81, false, false); /* fits i8 at T = 10 */
    CHECK_RANGE(range_at(g, 19, 64), -128, 127, false, false); /* 63 * 63 wraps in i8 */
    CHECK_RANGE(range_at(g, 21, 4), 3, 9, true, true);     /* concat of 3s and 9s */
    CHECK_RANGE(range_at(g, 22, 4), 0, 1, false, false);   /* a compare of data: a bool */
    CHECK(range_at(g, 2, 0).empty);
    SymBind none = {0};
    CHECK_RANGE(value_range(g, 2, &none), -0x1p63, 0x1p63, false, false); /* T unbound */
    graph_free(g);
}

/* ---------------------------------------------------------------- runners */

typedef enum Runner { INTERP, LOOP_EVAL, ENGINE_EVAL, ENGINE_LLVM, NRUNNER } Runner;
static const char *const runner_name[] = {"interpreter", "loop evaluator",
                                          "engine (loop evaluator kernels)", "engine (LLVM)"};

static Program *lowered(const Graph *src, const char *pipeline, Graph **g, Err *e)
{
    *g = graph_copy(src, e);
    return *g && run_passes(g, pipeline, e) ? fuse_and_lower(*g, NULL, e) : NULL;
}

static bool run_on(Runner r, const Graph *src, const Tensor *in, Tensor *out, Err *e)
{
    if (r == INTERP)
        return interp_run(src, in, NULL, out, NULL, e);
    if (r == LOOP_EVAL) {
        Graph *g = NULL;
        Program *p = lowered(src, pass_pipeline, &g, e);
        bool ok = p && loop_eval(p, in, NULL, out, e);
        program_free(p);
        graph_free(g);
        return ok;
    }
    CompileOptions o = {.threads = 2, .no_llvm = r == ENGINE_EVAL};
    Compiled *c = compile_graph(src, &o, e);
    bool ok = c && compiled_run(c, in, NULL, out, e);
    compiled_free(c);
    return ok;
}

static bool runner_here(Runner r) { return r != ENGINE_LLVM || cpu_codegen_built(); }

/* Every runner gives the interpreter's outputs. */
static void expect_ok(const char *what, const Graph *g, const Tensor *in)
{
    Tensor want[4] = {{0}};
    Err e = {0};
    if (!interp_run(g, in, NULL, want, NULL, &e)) {
        fprintf(stderr, "%s: the interpreter fails: %s\n", what, e.msg);
        check_failures++;
        return;
    }
    for (Runner r = LOOP_EVAL; r < NRUNNER; r++) {
        Tensor got[4] = {{0}};
        e = (Err){0};
        if (!runner_here(r))
            continue;
        if (!run_on(r, g, in, got, &e)) {
            fprintf(stderr, "%s on the %s: %s\n", what, runner_name[r], e.msg);
            check_failures++;
            continue;
        }
        for (int o = 0; o < g->noutput; o++) {
            bool same = tensor_numel(&got[o]) == tensor_numel(&want[o]);
            for (int64_t i = 0; same && i < tensor_numel(&got[o]); i++)
                same = check_close(check_at(&got[o], i), check_at(&want[o], i), 1e-6);
            if (!same) {
                fprintf(stderr, "%s on the %s: output %d differs from the interpreter's\n",
                        what, runner_name[r], o);
                check_failures++;
            }
            tensor_free(&got[o]);
        }
    }
    for (int o = 0; o < g->noutput; o++)
        tensor_free(&want[o]);
}

/* Every runner fails with a message holding each of want[] (the interpreter with its own,
 * interp_want). */
static void expect_error(const char *what, const Graph *g, const Tensor *in,
                         const char *interp_want, const char *const *want, int nwant)
{
    for (Runner r = INTERP; r < NRUNNER; r++) {
        Tensor got[4] = {{0}};
        Err e = {0};
        if (!runner_here(r))
            continue;
        bool ran = run_on(r, g, in, got, &e);
        bool said = !ran && strstr(e.msg, r == INTERP ? interp_want : want[0]);
        for (int i = 1; r != INTERP && said && i < nwant; i++)
            said = strstr(e.msg, want[i]) != NULL;
        if (!said) {
            fprintf(stderr, "%s on the %s: %s\n", what, runner_name[r],
                    ran ? "ran, where an index is out of range" : e.msg);
            check_failures++;
        }
        for (int o = 0; o < g->noutput; o++)
            tensor_free(&got[o]);
    }
}

/* ---------------------------------------------------------------- from the sizes */

/* GPT-2's position embedding: iota(T) indexes a table of 16 rows. */
static const char position_text[] =
    "graph @pos(%ids: i64[B,T], %wte: f32[32,4], %wpe: f32[16,4]) -> (y: f32[B,T,4]) {\n"
    "  %tok = gather %wte, %ids : f32[B,T,4]\n"
    "  %p = iota : i64[T]\n"
    "  %pos = gather %wpe, %p : f32[T,4]\n"
    "  %y = add %tok, %pos : f32[B,T,4]\n"
    "  return %y\n}\n";

static Tensor ids_of(int64_t b, int64_t t)
{
    double d[128];
    for (int i = 0; i < b * t && i < 128; i++)
        d[i] = (i * 7) % 32;
    return check_tensor(DT_I64, 2, (int64_t[]){b, t}, d);
}

static void test_position_table(void)
{
    Graph *g = parse("pos.cir", position_text);
    if (!g)
        return;
    Tensor in[3] = {ids_of(2, 16), table(32, 4), table(16, 4)};
    expect_ok("T = context", g, in);
    tensor_free(&in[0]);
    in[0] = ids_of(2, 40);
    const char *want[] = {"pos.cir:4:10: error: gather: index 39 is out of range [0, 16) for "
                          "axis 0: its indices take values in [0, 39] at B=2, T=40"};
    expect_error("T > context", g, in, "gather: index 16 (element 16", want, 1);
    /* No range step: an index known from the sizes is decided before the run. */
    Err e = {0};
    Graph *lg = NULL;
    Program *p = lowered(g, pass_pipeline, &lg, &e);
    for (int s = 0; p && s < p->nstep; s++)
        CHECK(range_step_buffer(p, s) < 0);
    CHECK(p != NULL);
    program_free(p);
    graph_free(lg);
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    graph_free(g);
}

/* Ranges that do not decide (a where of iota and 0): the values are computed exactly. */
static void test_exact_fallback(void)
{
    static const char text[] =
        "graph @window(%t: f32[4,2], %z: f32[T]) -> (y: f32[T,2]) {\n"
        "  %p = iota : i64[T]\n"
        "  %k = full {value=#} : i64[]\n"
        "  %near = lt %p, %k : bool[T]\n"
        "  %zero = full {value=0} : i64[]\n"
        "  %i = where %near, %p, %zero : i64[T]\n"
        "  %y = gather %t, %i : f32[T,2]\n"
        "  return %y\n}\n";
    char buf[sizeof text];
    Tensor in[2] = {table(4, 2), check_tensor(DT_F32, 1, (int64_t[]){8}, NULL)};
    memcpy(buf, text, sizeof text);
    char *k = strchr(buf, '#');
    *k = '4'; /* 0 1 2 3 0 0 0 0 */
    Graph *g = parse("window.cir", buf);
    if (g)
        expect_ok("where(iota < 4, iota, 0)", g, in);
    graph_free(g);
    *k = '5'; /* 0 1 2 3 4 0 0 0 */
    g = parse("window.cir", buf);
    const char *want[] = {"window.cir:7:8: error: gather: index 4 is out of range [0, 4)",
                          "take values in [0, 4] at T=8"};
    if (g)
        expect_error("where(iota < 5, iota, 0)", g, in, "gather: index 4 (element 4", want, 2);
    graph_free(g);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
}

/* ---------------------------------------------------------------- from data */

static const char twice_text[] =
    "graph @twice(%x: i64[N], %t: f32[8,4]) -> (y: f32[N,4]) {\n"
    "  %two = full {value=2} : i64[]\n"
    "  %i = mul %x, %two : i64[N]\n"
    "  %y = gather %t, %i : f32[N,4]\n"
    "  return %y\n}\n";

static void test_computed_index(void)
{
    Graph *g = parse("twice.cir", twice_text);
    if (!g)
        return;
    Tensor in[2] = {ints(DT_I64, 3, (int64_t[]){0, 1, 3}), table(8, 4)};
    expect_ok("2x in range", g, in);
    tensor_free(&in[0]);
    in[0] = ints(DT_I64, 3, (int64_t[]){0, 2, 5}); /* x in range of the table, 2x not */
    const char *high[] = {"twice.cir:4:8: error: gather: index 10 is out of range [0, 8) for "
                          "axis 0: its indices, computed in this run, took values in [0, 10]"};
    expect_error("2x past the table", g, in, "gather: index 10 (element 2", high, 1);
    tensor_free(&in[0]);
    in[0] = ints(DT_I64, 2, (int64_t[]){1, -3});
    const char *low[] = {"gather: index -6 is out of range [0, 8)", "took values in [-6, 2]"};
    expect_error("2x negative", g, in, "gather: index -6", low, 2);
    tensor_free(&in[0]);
    in[0] = ints(DT_I64, 0, NULL); /* no index at all */
    expect_ok("no indices", g, in);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
    graph_free(g);
}

/* The same inside other kernels: a row group (the gather summed), a scalar index (a range
 * kernel with no loop), an index read from a reduction (argmax), labels (index_check). */
static void test_computed_shapes(void)
{
    Graph *g = parse("rows.cir",
        "graph @rows(%x: i64[N], %t: f32[8,4]) -> (y: f32[N]) {\n"
        "  %two = full {value=2} : i64[]\n"
        "  %i = mul %x, %two : i64[N]\n"
        "  %g = gather %t, %i : f32[N,4]\n"
        "  %y = sum %g {axes=[1]} : f32[N]\n"
        "  return %y\n}\n");
    Tensor in[2] = {ints(DT_I64, 3, (int64_t[]){3, 0, 1}), table(8, 4)};
    const char *rows[] = {"rows.cir:4:8: error: gather: index 8 is out of range [0, 8)"};
    if (g) {
        expect_ok("a gather summed", g, in);
        tensor_free(&in[0]);
        in[0] = ints(DT_I64, 3, (int64_t[]){3, 4, 1});
        expect_error("a gather summed, past the table", g, in, "gather: index 8", rows, 1);
    }
    graph_free(g);
    tensor_free(&in[0]);

    g = parse("scalar.cir",
        "graph @scalar(%x: i64[], %t: f32[8,4]) -> (y: f32[4]) {\n"
        "  %two = full {value=2} : i64[]\n"
        "  %i = mul %x, %two : i64[]\n"
        "  %y = gather %t, %i : f32[4]\n"
        "  return %y\n}\n");
    double three = 3, four = 4;
    int64_t no_dims[1] = {0};
    in[0] = check_tensor(DT_I64, 0, no_dims, &three);
    const char *scalar[] = {"scalar.cir:4:8: error: gather: index 8 is out of range [0, 8)"};
    if (g) {
        expect_ok("a scalar index", g, in);
        tensor_free(&in[0]);
        in[0] = check_tensor(DT_I64, 0, no_dims, &four);
        expect_error("a scalar index past the table", g, in, "gather: index 8", scalar, 1);
    }
    graph_free(g);
    tensor_free(&in[0]);

    g = parse("pick.cir",
        "graph @pick(%s: f32[N,6], %t: f32[8,4]) -> (y: f32[N,4]) {\n"
        "  %a = argmax %s {axis=1} : i64[N]\n"
        "  %two = full {value=2} : i64[]\n"
        "  %i = mul %a, %two : i64[N]\n"
        "  %y = gather %t, %i : f32[N,4]\n"
        "  return %y\n}\n");
    double s[12] = {0, 5, 1, 0, 0, 0, /* argmax 1 */ 0, 0, 0, 7, 0, 0 /* argmax 3 */};
    in[0] = check_tensor(DT_F32, 2, (int64_t[]){2, 6}, s);
    const char *pick[] = {"pick.cir:5:8: error: gather: index 10 is out of range [0, 8)"};
    if (g) {
        expect_ok("an argmax doubled", g, in);
        s[11] = 9; /* argmax 5 */
        tensor_free(&in[0]);
        in[0] = check_tensor(DT_F32, 2, (int64_t[]){2, 6}, s);
        expect_error("an argmax doubled, past the table", g, in, "gather: index 10", pick, 1);
    }
    graph_free(g);
    tensor_free(&in[0]);
    tensor_free(&in[1]);

    g = parse("labels.cir",
        "graph @labels(%x: i64[N]) -> (y: i64[N]) {\n"
        "  %one = full {value=1} : i64[]\n"
        "  %l = add %x, %one : i64[N]\n"
        "  %y = index_check %l {bound=5} : i64[N]\n"
        "  return %y\n}\n");
    Tensor x = ints(DT_I64, 2, (int64_t[]){0, 3});
    const char *labels[] = {"labels.cir:4:8: error: index_check: index 5 is out of range [0, 5)"};
    if (g) {
        expect_ok("labels in range", g, &x);
        tensor_free(&x);
        x = ints(DT_I64, 2, (int64_t[]){4, 0});
        expect_error("labels past the classes", g, &x, "index_check: element 0 is 5", labels, 1);
    }
    graph_free(g);
    tensor_free(&x);
}

/* A computed index the ranges bound keeps its range step, skipped at these sizes. */
static void test_proven_skip(void)
{
    Graph *src = parse("clamped.cir",
        "graph @clamped(%x: i64[N], %t: f32[8,4]) -> (y: f32[N,4]) {\n"
        "  %zero = full {value=0} : i64[]\n"
        "  %seven = full {value=7} : i64[]\n"
        "  %lo = maximum %x, %zero : i64[N]\n"
        "  %i = minimum %lo, %seven : i64[N]\n"
        "  %y = gather %t, %i : f32[N,4]\n"
        "  return %y\n}\n");
    Tensor in[2] = {ints(DT_I64, 3, (int64_t[]){-4, 3, 90}), table(8, 4)};
    Err e = {0};
    Graph *g = NULL;
    Program *p = src ? lowered(src, pass_pipeline, &g, &e) : NULL;
    SymBind sb;
    bool skip[64] = {false};
    int ranged = 0, skipped = 0;
    bool ok = p && p->nstep <= 64 && bind_inputs(g, in, &sb, &e) &&
              index_bounds_before(p, &sb, skip, &e);
    for (int s = 0; ok && s < p->nstep; s++)
        ranged += range_step_buffer(p, s) >= 0, skipped += skip[s];
    CHECK(ok && ranged == 1 && skipped == 1);
    if (!ok || ranged != 1 || skipped != 1)
        fprintf(stderr, "clamped: %s; %d range steps, %d skipped\n", e.msg, ranged, skipped);
    if (src)
        expect_ok("a clamped index", src, in);
    program_free(p);
    graph_free(g);
    graph_free(src);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
}

/* ---------------------------------------------------------------- CUDA C, emulated */

typedef void (*KernelEntry)(void *const *, const long long *);
typedef void (*LaunchFn)(KernelEntry, unsigned, unsigned, unsigned, void *const *,
                         const long long *);

/* The CUDA pipeline's program of src run kernel by kernel as the CUDA engine runs it, then
 * its range buffers checked as the engine checks them; false with e set on a bad index. */
static bool emulate(void *lib, const char *prefix, const Program *p, const Graph *g,
                    const Tensor *in, Err *e)
{
    LaunchFn launch = (LaunchFn)dlsym(lib, "coil_emu_launch");
    SymBind sb;
    Tensor out[4] = {{0}};
    void **bufs = calloc((size_t)p->nbuf + 1, sizeof *bufs);
    bool *skip = calloc((size_t)p->nstep + 1, sizeof *skip);
    bool ok = launch && bufs && skip && bind_inputs(g, in, &sb, e) &&
              alloc_output_tensors(g, &sb, out, e) && index_bounds_before(p, &sb, skip, e);
    for (int b = 0; ok && b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        int64_t n = dim_value(buf->numel, &sb);
        bufs[b] = buf->kind == BUF_INPUT ? in[buf->index].data
                : buf->kind == BUF_OUTPUT ? out[buf->index].data
                : calloc((size_t)(n > 0 ? n : 1), (size_t)dtype_info[buf->dt].size);
        ok = buf->kind != BUF_PARAM && buf->kind != BUF_CONST; /* none in these graphs */
    }
    for (int s = 0; ok && s < p->nstep; s++) {
        const Kernel *k = &p->kernel[p->step[s].kernel];
        char name[200];
        snprintf(name, sizeof name, "%s%s", prefix, k->name);
        KernelEntry fn = (KernelEntry)dlsym(lib, name);
        CudaLaunch L = cuda_launch_dims(k, &sb, 1, NULL);
        ok = p->step[s].kind == STEP_KERNEL && fn;
        if (ok && !skip[s] && L.blocks > 0)
            launch(fn, (unsigned)L.blocks, 1, (unsigned)L.threads, bufs, (const long long *)sb.val);
    }
    for (int s = 0; ok && s < p->nstep; s++) {
        int b = skip[s] ? -1 : range_step_buffer(p, s);
        ok = b < 0 || index_bounds_after(p, b, bufs[b], &sb, e);
    }
    for (int b = 0; bufs && b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_TEMP)
            free(bufs[b]);
    for (int o = 0; o < g->noutput; o++)
        tensor_free(&out[o]);
    free(bufs);
    free(skip);
    return ok;
}

/* NVRTC takes the range kernel, where it is installed (and built: the CUDA headers). */
static void nvrtc_takes(const Program *p, Err *e)
{
#if COIL_HAVE_CUDA
    const char *why;
    Cubin cubin = {0};
    char *whole = p && nvrtc_available(&why) ? cuda_source(p, e) : NULL;
    CudaCompileOptions co = {.arch = "sm_80", .cache_dir = ""};
    CHECK(!whole || nvrtc_compile(whole, "range kernels", &co, &cubin, e));
    cubin_free(&cubin);
    free(whole);
#else
    (void)p, (void)e;
    printf("  NVRTC compile skipped: built without the CUDA toolkit's headers\n");
#endif
}

static void test_cuda_emulated(void)
{
    if (system("c++ --version > /dev/null 2>&1") != 0) {
        printf("CUDA emulation skipped: no host C++ compiler\n");
        return;
    }
    Graph *src = parse("twice.cir", twice_text), *g = NULL;
    Err e = {0};
    Program *p = src ? lowered(src, pass_pipeline_cuda, &g, &e) : NULL;
    char *part = p ? cuda_source_part(p, "t_", false, &e) : NULL;
    char dir[] = "/tmp/coil-index-emu-XXXXXX", src_path[300], lib_path[300];
    FILE *f = part && mkdtemp(dir) ? fopen(strcat(strcpy(src_path, dir), "/k.cpp"), "w") : NULL;
    if (f) {
        fputs(cuda_prelude, f);
        fputs(part, f);
        fclose(f);
    }
    void *lib = f ? emu_build(src_path, strcat(strcpy(lib_path, dir), "/k.so"), "the range kernels")
                  : NULL;
    CHECK(lib != NULL);
    Tensor in[2] = {ints(DT_I64, 3, (int64_t[]){0, 1, 3}), table(8, 4)};
    e = (Err){0};
    CHECK(lib && emulate(lib, "t_", p, g, in, &e));
    tensor_free(&in[0]);
    in[0] = ints(DT_I64, 3, (int64_t[]){0, 2, 5});
    e = (Err){0};
    CHECK(lib && !emulate(lib, "t_", p, g, in, &e) &&
          strstr(e.msg, "twice.cir:4:8: error: gather: index 10 is out of range [0, 8)"));
    nvrtc_takes(p, &e);
    if (lib)
        dlclose(lib);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (f && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(part);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
    program_free(p);
    graph_free(g);
    graph_free(src);
}

int main(void)
{
    test_ranges();
    test_position_table();
    test_exact_fallback();
    test_computed_index();
    test_computed_shapes();
    test_proven_skip();
    test_cuda_emulated();
    return check_status();
}
