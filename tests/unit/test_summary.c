/* test_summary.c — `coil check`'s model summary (parameter totals, FLOPs from shapes
 * alone, held against the interpreter's count) and the Graphviz output. */
#include <stdlib.h>

#include "check.h"
#include "ir/dot.h"
#include "ir/summary.h"

/* x: f32[B,4] -> hidden = relu(x @ w + b), total = sum(hidden, axes=[1]). */
static Graph *small_mlp(void)
{
    Err e = {0};
    Graph *g = graph_new("Small\"Mlp");
    Builder b = builder_make(g, &e);
    Type tx = {.dt = DT_F32, .rank = 2, .dim = {{1, 1u << graph_sym(g, "B", 1)}, {4, 0}}};
    int64_t w_dims[2] = {4, 4}, b_dims[1] = {4}, axis1[1] = {1};
    Type tw = type_make(DT_F32, 2, w_dims), tb = type_make(DT_F32, 1, b_dims);
    int x = b_input(&b, "x", &tx);
    int w = b_param(&b, "layer.weight", &tw, "normal(0.02)");
    int bias = b_param(&b, "layer.bias", &tb, "zeros");
    int h = b_unary(&b, OP_RELU, b_binary(&b, OP_ADD, b_matmul(&b, x, w), bias));
    b_output(&b, h, "hidden");
    b_output(&b, b_reduce(&b, OP_SUM, h, 1, axis1, false), "total");
    if (!err_ok(&e)) {
        fprintf(stderr, "small_mlp: %s\n", e.msg);
        check_failures++;
    }
    return g;
}

/* B bound to n (the graph's only symbol). */
static SymBind bind_b(int64_t n)
{
    SymBind sb = {0};
    sb.val[0] = n;
    sb.known[0] = true;
    return sb;
}

static bool contains(const char *s, const char *part)
{
    if (s && strstr(s, part))
        return true;
    fprintf(stderr, "text lacks \"%s\":\n%s\n", part, s ? s : "(null)");
    return false;
}

static void test_flops_match_interpreter(void)
{
    Graph *g = small_mlp();
    int64_t xs[2] = {3, 4}, ws[2] = {4, 4}, bs[1] = {4};
    Tensor in = check_tensor(DT_F32, 2, xs, NULL);
    Tensor params[2] = {check_tensor(DT_F32, 2, ws, NULL), check_tensor(DT_F32, 1, bs, NULL)};
    Tensor out[2];
    Err e = {0};
    double interp_flops = -1, walk_flops = -1;
    bool ran = interp_run(g, &in, params, out, &interp_flops, &e);
    if (!ran)
        fprintf(stderr, "interp_run: %s\n", e.msg);
    CHECK(ran);
    SymBind sb = bind_b(3);
    CHECK(graph_flops(g, &sb, &walk_flops, &e));
    /* matmul 2*3*4*4 = 96, add 12, relu 12, sum reads 12 */
    CHECK_NEAR(walk_flops, 132, 0);
    CHECK_NEAR(walk_flops, interp_flops, 0);
    for (int i = 0; ran && i < 2; i++)
        tensor_free(&out[i]);
    tensor_free(&in);
    tensor_free(&params[0]);
    tensor_free(&params[1]);
    graph_free(g);
}

static void test_unbound(void)
{
    Graph *g = small_mlp();
    SymBind none = {0}, ten = bind_b(10);
    Err e = {0};
    double flops = -1;
    CHECK(!graph_flops(g, &none, &flops, &e));
    CHECK(contains(e.msg, "%0 = input : f32[B,4]: symbol B has no value (bind it: --dim B=N)"));
    CHECK(graph_flops(g, &ten, &flops, &e) && flops == 440);
    graph_free(g);
}

static void test_summary_text(void)
{
    Graph *g = small_mlp();
    SymBind sb = bind_b(128);
    Err e = {0};
    char *text = model_summary(g, &sb, &e);
    CHECK(contains(text, "inputs (1):\n    x: f32[B,4]\n"));
    CHECK(contains(text, "outputs (2):\n    hidden: f32[B,4]\n    total: f32[B]\n"));
    CHECK(contains(text, "parameters: 2 tensors, 20 values, 80 B\n"));
    CHECK(contains(text, "FLOPs per call at B=128: 5.63 KFLOP (5,632)\n"));
    free(text);
    memset(&sb, 0, sizeof sb);
    text = model_summary(g, &sb, &e);
    CHECK(contains(text, "FLOPs per call: unknown: "));
    free(text);
    text = model_param_list(g, &e);
    CHECK_STR(text, "layer.weight: f32[4,4]  normal(0.02)\nlayer.bias: f32[4]  zeros\n");
    free(text);
    graph_free(g);
}

/* Lines of text that start with prefix and contain part. */
static int count_lines(const char *text, const char *prefix, const char *part)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        n += strncmp(buf, prefix, strlen(prefix)) == 0 && strstr(buf, part) != NULL;
        line = end ? end + 1 : NULL;
    }
    return n;
}

static void test_dot(void)
{
    Graph *g = small_mlp();
    char *dot = ir_dot(g);
    int edges = g->noutput;
    for (int i = 0; i < g->nnode; i++)
        edges += g->node[i].nin;
    CHECK(dot && strncmp(dot, "digraph \"Small\\\"Mlp\" {\n", 23) == 0);
    CHECK(dot && strcmp(dot + strlen(dot) - 2, "}\n") == 0);
    CHECK(count_lines(dot, "  n", "[shape=") == g->nnode);
    CHECK(count_lines(dot, "  out", "[shape=house") == g->noutput);
    CHECK(count_lines(dot, "  ", " -> ") == edges);
    CHECK(edges == 8);
    CHECK(contains(dot, "  n0 [shape=invhouse, fillcolor=lightblue, label=\"%0 input\\nx\\nf32[B,4]\"];\n"));
    CHECK(contains(dot, "  n1 [shape=box, fillcolor=lightyellow, label=\"%1 param\\nlayer.weight\\nf32[4,4]\"];\n"));
    CHECK(contains(dot, "label=\"%3 matmul\\nf32[B,4]\"];\n"));
    CHECK(contains(dot, "  n0 -> n3;\n  n1 -> n3;\n"));
    CHECK(contains(dot, "  out1 [shape=house, fillcolor=palegreen, label=\"total\"];\n"));
    CHECK(contains(dot, "  n6 -> out1;\n"));
    free(dot);
    graph_free(g);
}

int main(void)
{
    test_flops_match_interpreter();
    test_unbound();
    test_summary_text();
    test_dot();
    return check_status();
}
