/* test_frontend.c — the .coil frontend beyond what lit sees: two programs compiled at
 * once on two threads, dropout in training mode, lowered models evaluated against values
 * computed independently, and several errors gathered into one Err. */
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "frontend/to_graph.h"

static Graph *compile(const char *text, const FeOptions *o, Err *e)
{
    return coil_frontend_compile("test.coil", text, strlen(text), o, e);
}

/* text, which must compile: its graph, or NULL with the error counted and said */
static Graph *compile_ok(const char *text)
{
    Err e = {0};
    Graph *g = compile(text, NULL, &e);
    CHECK(g != NULL);
    if (!g)
        fprintf(stderr, "%s\n", e.msg);
    return g;
}

/* ---------------------------------------------------------------- reentrancy */

typedef struct Job {
    const char *text;
    int runs;
    int params;     /* expected param count; -1: expect an error */
    const char *first_param; /* or the expected error text */
    int bad;        /* runs that gave something else */
} Job;

static void *compile_many(void *arg)
{
    Job *job = arg;
    for (int i = 0; i < job->runs; i++) {
        Err e = {0};
        Graph *g = compile(job->text, NULL, &e);
        int ids[16];
        if (job->params < 0)
            job->bad += g != NULL || !strstr(e.msg, job->first_param);
        else
            job->bad += !g || graph_params(g, ids) != job->params ||
                        strcmp(node_name(&g->node[ids[0]]), job->first_param) != 0;
        graph_free(g);
    }
    return NULL;
}

/* The lexer and parser keep no global state: two threads compiling different programs
 * (one with errors) see only their own results. */
static void test_two_at_once(void)
{
    Job a = {"config { n = 4 }\n"
             "model A(x: f32[B, n]) -> f32[B, 3] {\n"
             "  repeat 3 as i { x = layers[i]: Linear(x, n) }\n"
             "  return head: Linear(x, 3)\n"
             "}\n",
             200, 8, "layers.0.weight", 0};
    Job b = {"model Bad(x: f32[4]) -> f32[4] {\n"
             "  y = (x +\n"
             "  return undefined_name\n"
             "}\n",
             200, -1, "test.coil:3:3: error: syntax error", 0};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, compile_many, &a) == 0);
    CHECK(pthread_create(&tb, NULL, compile_many, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.bad == 0);
    CHECK(b.bad == 0);
}

/* ---------------------------------------------------------------- dropout */

static void test_dropout_modes(void)
{
    const char *text = "model D(x: f32[B, 4]) -> f32[B, 4] {\n"
                       "  repeat 3 { x = dropout(x, 0.25) }\n"
                       "  return dropout(x, 0.0)\n"
                       "}\n";
    FeOptions train = {.training = true, .seed = 42};
    Err e = {0};
    Graph *g = compile(text, &train, &e);
    CHECK(g != NULL);
    int found = 0;
    for (int i = 0; g && i < g->nnode; i++) {
        const Node *n = &g->node[i];
        if (n->op != OP_DROPOUT)
            continue;
        CHECK(node_float(n, "p") == 0.25);
        CHECK(node_int(n, "seed") == 42);
        CHECK(node_int(n, "offset") == (int64_t)found << 40); /* one stream per call instance */
        found++;
    }
    CHECK(found == 3); /* p = 0 is the identity even in training */
    graph_free(g);
    g = compile(text, NULL, &e);
    CHECK(g && g->nnode == 1); /* inference: the input alone */
    graph_free(g);
}

/* ---------------------------------------------------------------- numbers */

static bool eval1(const char *text, const Tensor *inputs, const Tensor *params, Tensor *out)
{
    Err e = {0};
    Graph *g = compile(text, NULL, &e);
    if (!g) {
        fprintf(stderr, "compile: %s\n", e.msg);
        check_failures++;
        return false;
    }
    bool ok = interp_run(g, inputs, params, out, NULL, &e);
    if (!ok) {
        fprintf(stderr, "interp_run: %s\n", e.msg);
        check_failures++;
    }
    graph_free(g);
    return ok;
}

/* Linear keeps PyTorch's layout: y = x @ W^T + b with W [out, in]. */
static void test_linear_values(void)
{
    const char *text = "model L(x: f32[2, 3]) -> f32[2, 2] {\n"
                       "  return fc: Linear(x, 2) * 2 - 1\n"
                       "}\n";
    double x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 0.5, 0.5, 0.5}, b[2] = {10, 20};
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){2, 3}, x);
    Tensor params[2] = {check_tensor(DT_F32, 2, (int64_t[]){2, 3}, w),
                        check_tensor(DT_F32, 1, (int64_t[]){2}, b)};
    double want[4];
    for (int r = 0; r < 2; r++)
        for (int o = 0; o < 2; o++) {
            double dot = b[o];
            for (int k = 0; k < 3; k++)
                dot += x[r * 3 + k] * w[o * 3 + k];
            want[r * 2 + o] = dot * 2 - 1;
        }
    Tensor out;
    if (eval1(text, &in, params, &out))
        CHECK_RESULT(&out, "f32[2,2]", want, 4, 1e-6);
    tensor_free(&in);
    tensor_free(&params[0]);
    tensor_free(&params[1]);
}

/* attention(heads=2) equals single-head attention on each half of the features, the
 * halves written out with slice and concat: the head split and merge are right. */
static void test_multihead_values(void)
{
    const char *text =
        "model A(q: f32[1, 3, 4], k: f32[1, 3, 4], v: f32[1, 3, 4]) -> (f32[1, 3, 4], f32[1, 3, 4]) {\n"
        "  both = attention(q, k, v, heads=2, causal=true)\n"
        "  h0 = attention(slice(q, 2, 0, 2), slice(k, 2, 0, 2), slice(v, 2, 0, 2), causal=true)\n"
        "  h1 = attention(slice(q, 2, 2, 4), slice(k, 2, 2, 4), slice(v, 2, 2, 4), causal=true)\n"
        "  return both, concat(h0, h1, axis=2)\n"
        "}\n";
    Graph *g = compile_ok(text);
    if (!g)
        return;
    Tensor in[3], out[2];
    for (int i = 0; i < 3; i++) {
        double vals[12];
        for (int j = 0; j < 12; j++)
            vals[j] = sin(1.0 + i * 12 + j);
        in[i] = check_tensor(DT_F32, 3, (int64_t[]){1, 3, 4}, vals);
    }
    if (check_run(g, in, out, NULL)) {
        double want[12];
        for (int j = 0; j < 12; j++)
            want[j] = check_at(&out[1], j);
        CHECK_RESULT(&out[0], "f32[1,3,4]", want, 12, 1e-6);
        tensor_free(&out[1]);
    }
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    graph_free(g);
}

/* attention's mask: a query that sees one key only gets that key's value row, exactly
 * (per head, with a bias beside it that shifts every score of a row alike); the second
 * batch sees every key, so its rows average the values (zero queries: equal scores). */
static void test_attention_mask_values(void)
{
    const char *text =
        "model A(q: f32[2, 3, 4], k: f32[2, 5, 4], v: f32[2, 5, 4], seen: bool[2, 1, 5])\n"
        "    -> (f32[2, 3, 4], f32[2, 3, 4]) {\n"
        "  one = attention(q, k, v, mask=seen)\n"
        "  two = attention(q, k, v, heads=2, mask=reshape(seen, [2, 1, 1, 5]),\n"
        "                  bias=full([1, 1, 3, 5], 0.25))\n"
        "  return one, two\n"
        "}\n";
    Graph *g = compile_ok(text);
    if (!g)
        return;
    double q[24] = {0}, kv[40], seen[10] = {0, 0, 1, 0, 0, 1, 1, 1, 1, 1}, want[24];
    for (int j = 0; j < 40; j++)
        kv[j] = sin(1.0 + j);
    for (int i = 0; i < 24; i++) {
        int b = i / 12, c = i % 4;
        double mean = 0;
        for (int s = 0; s < 5; s++)
            mean += kv[b * 20 + s * 4 + c] / 5;
        want[i] = b == 0 ? kv[2 * 4 + c] : mean; /* batch 0 sees key 2 only */
    }
    for (int i = 0; i < 12; i++) /* batch 0's queries are not zero: they must not matter */
        q[i] = cos(i);
    Tensor in[4] = {check_tensor(DT_F32, 3, (int64_t[]){2, 3, 4}, q),
                    check_tensor(DT_F32, 3, (int64_t[]){2, 5, 4}, kv),
                    check_tensor(DT_F32, 3, (int64_t[]){2, 5, 4}, kv),
                    check_tensor(DT_BOOL, 3, (int64_t[]){2, 1, 5}, seen)};
    Tensor out[2];
    if (check_run(g, in, out, NULL)) {
        CHECK_RESULT(&out[0], "f32[2,3,4]", want, 24, 1e-6);
        CHECK_RESULT(&out[1], "f32[2,3,4]", want, 24, 1e-6);
    }
    for (int i = 0; i < 4; i++)
        tensor_free(&in[i]);
    graph_free(g);
    Err e = {0};
    CHECK(compile("model A(q: f32[1, 2, 4], m: f32[1, 2, 2]) -> f32[1, 2, 4] {\n"
                  "  return attention(q, q, q, mask=m)\n}\n", NULL, &e) == NULL);
    CHECK(strstr(e.msg, "test.coil:2:34: error: attention: mask is f32[1,2,2]; it must be bool, "
                        "true where a query attends to a key (or give an additive bias=)") != NULL);
}

/* attention(heads=4, kv_heads=2) equals attention(heads=4) with each k, v head repeated
 * for its two query heads (concat of slices), with a mask too; kv_heads 1 is one k, v head
 * for all. */
static void test_grouped_query_values(void)
{
    const char *text =
        "model A(q: f32[1, 3, 8], k: f32[1, 3, 4], v: f32[1, 3, 4], seen: bool[1, 1, 1, 3])\n"
        "    -> (f32[1, 3, 8], f32[1, 3, 8], f32[1, 3, 8], f32[1, 3, 8]) {\n"
        "  k0 = slice(k, 2, 0, 2)\n"
        "  k1 = slice(k, 2, 2, 4)\n"
        "  v0 = slice(v, 2, 0, 2)\n"
        "  v1 = slice(v, 2, 2, 4)\n"
        "  kk = concat(k0, k0, k1, k1, axis=2)\n"
        "  vv = concat(v0, v0, v1, v1, axis=2)\n"
        "  g = attention(q, k, v, heads=4, kv_heads=2, causal=true)\n"
        "  m = attention(q, kk, vv, heads=4, causal=true)\n"
        "  one = attention(q, k0, v0, heads=4, kv_heads=1, mask=seen)\n"
        "  all = attention(q, concat(k0, k0, k0, k0, axis=2), concat(v0, v0, v0, v0, axis=2),\n"
        "                  heads=4, mask=seen)\n"
        "  return g, m, one, all\n"
        "}\n";
    Graph *g = compile_ok(text);
    if (!g)
        return;
    Tensor in[4], out[4];
    for (int i = 0; i < 3; i++) {
        double vals[24];
        for (int j = 0; j < 24; j++)
            vals[j] = sin(1.0 + i * 24 + j);
        in[i] = check_tensor(DT_F32, 3, (int64_t[]){1, 3, i ? 4 : 8}, vals);
    }
    in[3] = check_tensor(DT_BOOL, 4, (int64_t[]){1, 1, 1, 3}, (double[]){1, 0, 1});
    if (check_run(g, in, out, NULL)) {
        for (int pair = 0; pair < 4; pair += 2) {
            double want[24];
            for (int j = 0; j < 24; j++)
                want[j] = check_at(&out[pair + 1], j);
            CHECK_RESULT(&out[pair], "f32[1,3,8]", want, 24, 1e-6);
        }
        tensor_free(&out[1]);
        tensor_free(&out[3]);
    }
    for (int i = 0; i < 4; i++)
        tensor_free(&in[i]);
    graph_free(g);
    Err e = {0};
    CHECK(compile("model A(q: f32[1, 2, 8]) -> f32[1, 2, 8] {\n"
                  "  return attention(q, q, q, heads=4, kv_heads=3)\n}\n", NULL, &e) == NULL);
    CHECK(strstr(e.msg, "test.coil:2:47: error: attention: kv_heads must divide heads (4), got 3") != NULL);
}

/* ---------------------------------------------------------------- errors */

static void test_errors_gathered(void)
{
    const char *text = "model M(x: f32[4]) -> f32[4] {\n"
                       "  a = one\n"
                       "  b = two\n"
                       "  return three\n"
                       "}\n";
    Err e = {0};
    CHECK(compile(text, NULL, &e) == NULL);
    const char *one = strstr(e.msg, "test.coil:2:7: error: unknown name 'one'");
    const char *two = strstr(e.msg, "test.coil:3:7: error: unknown name 'two'");
    const char *three = strstr(e.msg, "test.coil:4:10: error: unknown name 'three'");
    CHECK(one && two && three && one < two && two < three);
    CHECK(e.code == ERR_INPUT);

    FeOptions bad = {.set = (const char *const[]){"nope=1"}, .nset = 1};
    Err e2 = {0};
    CHECK(compile("model M(x: f32[4]) -> f32[4] { return x }\n", &bad, &e2) == NULL);
    CHECK(strstr(e2.msg, "--set nope=1: there is no config constant 'nope'") != NULL);
}

int main(void)
{
    test_two_at_once();
    test_dropout_modes();
    test_linear_values();
    test_multihead_values();
    test_attention_mask_values();
    test_grouped_query_values();
    test_errors_gathered();
    return check_status();
}
