/* test_init.c — initializers and random inputs: FNV-1a known answers, the moments and
 * bounds each initializer promises (PyTorch's fans), name-keyed streams, bad init strings,
 * index bounds found from uses, and symbol sizes for random inputs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/init.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

typedef struct Stats {
    double mean, std, min, max;
} Stats;

static Stats stats(const Tensor *t)
{
    int64_t n = tensor_numel(t);
    double s = 0, s2 = 0;
    Stats st = {0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++) {
        double v = dtype_load(t->dt, t->data, i);
        s += v;
        s2 += v * v;
        st.min = fmin(st.min, v);
        st.max = fmax(st.max, v);
    }
    st.mean = s / (double)n;
    st.std = sqrt(s2 / (double)n - st.mean * st.mean);
    return st;
}

/* A fresh tensor of that shape filled by init (false when init fails). */
static bool make(Tensor *t, DType dt, int rank, const int64_t *shape, const char *name,
                 const char *init, uint64_t seed, Err *e)
{
    Err ae = {0};
    if (!tensor_alloc(t, dt, rank, shape, &ae))
        return false;
    if (init_tensor(t, name, init, seed, e))
        return true;
    tensor_free(t);
    return false;
}

static void test_fnv(void)
{
    /* Published FNV-1a 64 test vectors. */
    CHECK(init_stream("") == UINT64_C(0xcbf29ce484222325));
    CHECK(init_stream("a") == UINT64_C(0xaf63dc4c8601ec8c));
    CHECK(init_stream("foobar") == UINT64_C(0x85944171f73967e8));
}

static void test_constants(void)
{
    static const char *zero_inits[] = {NULL, "", "zeros", " zeros ", "zeros()", "normal(0, 0)",
                                       " normal( 0 , 0 ) "};
    int64_t shape[2] = {3, 4};
    Err e = {0};
    Tensor t;
    for (size_t k = 0; k < sizeof zero_inits / sizeof zero_inits[0]; k++) {
        CHECK(make(&t, DT_F32, 2, shape, "z", zero_inits[k], 1, &e));
        Stats s = stats(&t);
        CHECK(s.min == 0 && s.max == 0);
        tensor_free(&t);
    }
    CHECK(make(&t, DT_I32, 2, shape, "o", "ones", 1, &e));
    Stats s = stats(&t);
    CHECK(s.min == 1 && s.max == 1);
    tensor_free(&t);
}

/* Moments within a few standard errors of what the distribution promises. */
static void test_distributions(void)
{
    Err e = {0};
    Tensor t;
    int64_t big[2] = {128, 256}; /* 32768 draws */
    double se = 1.0 / sqrt(32768.0);

    CHECK(make(&t, DT_F32, 2, big, "layers.0.w", "normal(0.02)", 7, &e));
    Stats s = stats(&t);
    CHECK(fabs(s.mean) < 4 * 0.02 * se && fabs(s.std - 0.02) < 0.02 * 0.02);
    /* The documented stream: element i is std * philox_normal(seed, fnv1a(name), i). */
    CHECK(((float *)t.data)[5] == (float)(0.02 * philox_normal(7, init_stream("layers.0.w"), 5)));
    tensor_free(&t);

    CHECK(make(&t, DT_F32, 2, big, "n", "normal(1, 3)", 7, &e));
    s = stats(&t);
    CHECK(fabs(s.mean - 1) < 4 * 3 * se && fabs(s.std - 3) < 0.06);
    tensor_free(&t);

    CHECK(make(&t, DT_F32, 2, big, "u", "uniform(-0.5, 0.25)", 7, &e));
    s = stats(&t);
    CHECK(s.min >= -0.5 && s.max < 0.25 && s.min < -0.49 && s.max > 0.24);
    CHECK(fabs(s.mean + 0.125) < 4 * 0.75 / sqrt(12) * se);
    tensor_free(&t);

    /* xavier on a conv weight [out=30, in=50, 3, 3]: fans 50*9 and 30*9. */
    int64_t conv[4] = {30, 50, 3, 3};
    double bound = sqrt(6.0 / (450 + 270));
    CHECK(make(&t, DT_F32, 4, conv, "conv.w", "xavier", 3, &e));
    s = stats(&t);
    CHECK(s.min >= -bound && s.max <= bound && s.max > 0.99 * bound && s.min < -0.99 * bound);
    CHECK(fabs(s.std - bound / sqrt(3)) < 0.02 * bound);
    tensor_free(&t);

    /* 1-D: fan_in = fan_out = shape[0]. */
    int64_t vec[1] = {4096};
    bound = sqrt(6.0 / (4096 + 4096));
    CHECK(make(&t, DT_F32, 1, vec, "v", "xavier", 3, &e));
    s = stats(&t);
    CHECK(s.max <= bound && s.max > 0.99 * bound);
    tensor_free(&t);

    /* kaiming on [out=256, in=128]: std sqrt(2/128). */
    CHECK(make(&t, DT_F32, 2, (int64_t[]){256, 128}, "k", "kaiming", 3, &e));
    s = stats(&t);
    CHECK(fabs(s.std - 0.125) < 0.003 && fabs(s.mean) < 4 * 0.125 * se * sqrt(1.0));
    tensor_free(&t);

    /* bf16 values are rounded to what a bf16 holds. */
    CHECK(make(&t, DT_BF16, 1, vec, "b", "normal(1)", 3, &e));
    for (int64_t i = 0; i < 4096; i++) {
        double v = dtype_load(DT_BF16, t.data, i);
        CHECK(dtype_round(DT_BF16, v) == v);
    }
    CHECK(fabs(stats(&t).std - 1) < 0.05);
    tensor_free(&t);
    CHECK(err_ok(&e));
}

/* Values depend on (seed, name) only. */
static void test_streams(void)
{
    Err e = {0};
    Tensor a, b, c, d;
    int64_t shape[1] = {16};
    CHECK(make(&a, DT_F32, 1, shape, "h.0.w", "normal(1)", 5, &e));
    CHECK(make(&b, DT_F32, 1, shape, "h.0.w", "normal(1)", 5, &e));
    CHECK(make(&c, DT_F32, 1, shape, "h.1.w", "normal(1)", 5, &e));
    CHECK(make(&d, DT_F32, 1, shape, "h.0.w", "normal(1)", 6, &e));
    CHECK(memcmp(a.data, b.data, 64) == 0);
    CHECK(memcmp(a.data, c.data, 64) != 0);
    CHECK(memcmp(a.data, d.data, 64) != 0);
    tensor_free(&a), tensor_free(&b), tensor_free(&c), tensor_free(&d);
}

static void expect_bad(int rank, const char *init, const char *want)
{
    Err e = {0};
    Tensor t;
    int64_t shape[2] = {4, 4};
    bool ok = make(&t, DT_F32, rank, shape, "blocks.2.w", init, 1, &e);
    CHECK(!ok && e.code == ERR_INPUT && strstr(e.msg, "parameter 'blocks.2.w'"));
    if (!ok && !strstr(e.msg, want)) {
        fprintf(stderr, "  expected '%s' in: %s\n", want, e.msg);
        failures++;
    }
    if (ok)
        tensor_free(&t);
}

static void test_bad_inits(void)
{
    expect_bad(2, "normal", "wrong number of arguments");
    expect_bad(2, "normal(1, 2, 3)", "wrong number of arguments");
    expect_bad(2, "uniform(1)", "wrong number of arguments");
    expect_bad(2, "normal(-1)", "standard deviation must be >= 0");
    expect_bad(2, "uniform(1, 0)", "lower bound is above the upper bound");
    expect_bad(2, "gaussian(1)", "unknown initializer");
    expect_bad(2, "normal(1", "expected ',' or ')'");
    expect_bad(2, "normal(abc)", "arguments must be finite numbers");
    expect_bad(2, "normal(inf)", "arguments must be finite numbers");
    expect_bad(2, "zeros extra", "unexpected text after the initializer");
    expect_bad(2, "normal(1,2,3,4,5)", "too many arguments");
    expect_bad(0, "xavier", "xavier needs a parameter of rank >= 1");
    expect_bad(0, "kaiming", "kaiming needs a parameter of rank >= 1");
    expect_bad(2, "normal(", "arguments must be finite numbers");
}

static Graph *parse(const char *text)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), "test_init", &e);
    if (!g)
        fprintf(stderr, "  parse failed: %s\n", e.msg);
    return g;
}

/* Integer inputs stay inside what they index: the gathered table's axis, the class count,
 * through reshapes; unbounded integers are 0 or 1. */
static void test_random_inputs(void)
{
    Graph *g = parse(
        "graph @g(%ids: i64[B,T], %labels: i64[B], %flat: i32[6], %free: i32[64], %x: f32[B,7],\n"
        "         %m: bool[40]) -> (a: f32[B,T,8], l: f32[], c: f32[2,2,3]) {\n"
        "  %tab = param {name=\"wte\"} : f32[50,8]\n"
        "  %t2 = param {name=\"t2\"} : f32[2,5]\n"
        "  %a = gather %tab, %ids : f32[B,T,8]\n"
        "  %l = cross_entropy %x, %labels : f32[]\n"
        "  %r = reshape %flat : i32[2,3]\n"
        "  %c = gather %t2, %r {axis=1} : f32[2,2,3]\n"
        "  return %a, %l, %c\n"
        "}\n");
    CHECK(g != NULL);
    if (!g)
        return;
    Tensor in[6];
    bool given[6] = {0};
    SymBind sb;
    Err e = {0};
    SymSize sizes[] = {{"T", 16}};
    CHECK(init_symbols(g, in, given, sizes, 1, 4, &sb, &e));
    CHECK(init_inputs(g, &sb, 9, given, in, &e));
    if (!err_ok(&e)) {
        fprintf(stderr, "  %s\n", e.msg);
        graph_free(g);
        return;
    }
    CHECK(in[0].rank == 2 && in[0].shape[0] == 4 && in[0].shape[1] == 16);
    Stats ids = stats(&in[0]), labels = stats(&in[1]), flat = stats(&in[2]), free_ = stats(&in[3]);
    Stats x = stats(&in[4]), m = stats(&in[5]);
    CHECK(ids.min >= 0 && ids.max < 50 && ids.max >= 40);
    CHECK(labels.min >= 0 && labels.max < 7 && in[1].shape[0] == 4);
    CHECK(flat.min >= 0 && flat.max < 5 && flat.max >= 2);
    CHECK(free_.min == 0 && free_.max == 1);
    CHECK(m.min == 0 && m.max == 1);
    CHECK(x.min < -0.5 && x.max > 0.5 && fabs(x.mean) < 1);
    for (int i = 0; i < 6; i++)
        tensor_free(&in[i]);
    graph_free(g);
}

/* --dim first, then the given inputs, then the fallback; conflicts and unknown names fail. */
static void test_symbols(void)
{
    Graph *g = parse("graph @s(%x: f32[B,T], %y: f32[N]) -> (o: f32[B,T]) {\n"
                     "  %o = neg %x : f32[B,T]\n  return %o\n}\n");
    CHECK(g != NULL);
    if (!g)
        return;
    Err e = {0};
    Tensor in[2] = {{.dt = DT_F32, .rank = 2, .shape = {3, 5}}};
    bool given[2] = {true, false};
    SymBind sb;
    SymSize n9[] = {{"N", 9}};
    CHECK(init_symbols(g, in, given, n9, 1, 2, &sb, &e));
    int B = graph_sym_find(g, "B", 1), T = graph_sym_find(g, "T", 1), N = graph_sym_find(g, "N", 1);
    CHECK(sb.val[B] == 3 && sb.val[T] == 5 && sb.val[N] == 9);
    given[0] = false;
    CHECK(init_symbols(g, in, given, NULL, 0, 2, &sb, &e));
    CHECK(sb.val[B] == 2 && sb.val[T] == 2 && sb.val[N] == 2 && sb.known[N]);
    given[0] = true;
    SymSize b4[] = {{"B", 4}};
    CHECK(!init_symbols(g, in, given, b4, 1, 2, &sb, &e));
    CHECK(strstr(e.msg, "--dim B=4, but input 'x' (f32[3,5]) has B=3") != NULL);
    Err e2 = {0};
    SymSize q[] = {{"Q", 4}};
    CHECK(!init_symbols(g, in, given, q, 1, 2, &sb, &e2));
    CHECK(strstr(e2.msg, "no symbolic dimension 'Q' (it has: B, T, N)") != NULL);
    graph_free(g);
}

int main(void)
{
    test_fnv();
    test_constants();
    test_distributions();
    test_streams();
    test_bad_inits();
    test_random_inputs();
    test_symbols();
    if (failures)
        fprintf(stderr, "test_init: %d failures\n", failures);
    return failures != 0;
}
