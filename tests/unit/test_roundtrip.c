/* test_roundtrip.c — the IR text form: every op prints, parses and prints back identically
 * with the expected statement; golden text; located errors for malformed text; the verifier. */
#include <stdlib.h>

#include "check.h"

/* "f32[B*T,4]" -> Type, interning symbols in g (test inputs are well-formed). */
static Type ty(Graph *g, const char *s)
{
    Type t = {0};
    const char *lb = strchr(s, '[');
    CHECK(lb && dtype_parse(s, (size_t)(lb - s), &t.dt));
    for (const char *p = lb + 1; *p && *p != ']'; p += *p == ',') {
        Dim d = dim_static(1);
        bool overflow = false;
        for (;; p++) {
            size_t n = strcspn(p, "*,]");
            int sym = p[0] >= '0' && p[0] <= '9' ? -1 : graph_sym(g, p, n);
            d = dim_mul(d, sym < 0 ? dim_static(atoll(p)) : (Dim){1, 1u << sym, 0}, &overflow);
            p += n;
            if (*p != '*')
                break;
        }
        t.dim[t.rank++] = d;
    }
    return t;
}

/* print(g); then print(parse(print(g))) must be the same text. Returns the text (malloc'd). */
static char *roundtrip(const Graph *g, const char *what)
{
    char *text = ir_print(g);
    Err e = {0};
    Graph *g2 = ir_parse(text, strlen(text), what, &e);
    if (!g2) {
        fprintf(stderr, "%s: reparse failed: %s\n--- text:\n%s", what, e.msg, text);
        check_failures++;
        return text;
    }
    char *again = ir_print(g2);
    if (strcmp(text, again) != 0) {
        fprintf(stderr, "%s: round trip differs\n--- first:\n%s--- second:\n%s", what, text, again);
        check_failures++;
    }
    free(again);
    graph_free(g2);
    return text;
}

/* ---------------------------------------------------------------- every op */

typedef struct OpCase {
    int op;
    const char *in[6]; /* operand types, named %a, %b, %c, ... */
    const char *out;   /* the declared type (OPF_TYPED ops) */
    Attr attr[4];
    int nattr;
    const char *stmt;  /* the expected statement after "%0 = " */
} OpCase;

static const int64_t i_1[] = {1}, i_0[] = {0}, i_m1[] = {-1}, i_10[] = {1, 0};
static const double d_const[] = {1, 2.5, -3};

/* conv's lists, static: the cases outlive the function that lists them */
static const int64_t conv_stride[] = {2, 1}, conv_padding[] = {1, 0, 1, 2}, conv_dilation[] = {2};

/* Ops whose operands or attributes need more than the generic unary/binary case. */
static int special_cases(OpCase *c)
{
    const OpCase cases[] = {
        {OP_PARAM, {0}, "f32[4,3]", {attr_str("name", "layers.0.w"), attr_str("init", "normal(0.02)")}, 2,
         "param {name=\"layers.0.w\", init=\"normal(0.02)\"} : f32[4,3]"},
        {OP_PARAM, {0}, "bf16[B]", {attr_str("name", "b")}, 1, "param {name=\"b\"} : bf16[B]"},
        {OP_CONSTANT, {0}, "f32[3]", {attr_data("value", 3, d_const)}, 1, "constant {value=[1, 2.5, -3]} : f32[3]"},
        {OP_CONSTANT, {0}, "i64[0]", {attr_data("value", 0, NULL)}, 1, "constant {value=[]} : i64[0]"},
        {OP_FULL, {0}, "f32[B,2]", {attr_float("value", 0.1)}, 1, "full {value=0.1} : f32[B,2]"},
        {OP_FULL, {0}, "f16[]", {attr_float("value", 0)}, 1, "full {value=0} : f16[]"},
        {OP_IOTA, {0}, "i64[4,B]", {{0}}, 0, "iota : i64[4,B]"},
        {OP_IOTA, {0}, "i32[4,B]", {attr_int("axis", 1)}, 1, "iota {axis=1} : i32[4,B]"},
        {OP_RAND, {0}, "f32[2,3]", {attr_int("seed", 7)}, 1, "rand {seed=7} : f32[2,3]"},
        {OP_RAND, {0}, "f32[B]", {attr_int("seed", 1), attr_int("offset", 64)}, 2,
         "rand {seed=1, offset=64} : f32[B]"},
        {OP_WHERE, {"bool[B,3]", "f32[B,3]", "f32[3]"}, NULL, {{0}}, 0, "where %a, %b, %c : f32[B,3]"},
        {OP_CAST, {"f32[B,3]"}, "i32[B,3]", {{0}}, 0, "cast %a : i32[B,3]"},
        {OP_INDEX_CHECK, {"i64[B]"}, NULL, {attr_int("bound", 10)}, 1,
         "index_check %a {bound=10} : i64[B]"},
        {OP_SUM, {"f32[B,3]"}, NULL, {attr_ints("axes", 1, i_1), attr_bool("keepdim", true)}, 2,
         "sum %a {axes=[1], keepdim=true} : f32[B,1]"},
        {OP_MEAN, {"f32[B,3]"}, NULL, {{0}}, 0, "mean %a : f32[]"},
        {OP_MAX, {"f32[B,3]"}, NULL, {attr_ints("axes", 1, i_0)}, 1, "max %a {axes=[0]} : f32[3]"},
        {OP_MIN, {"i32[B,3]"}, NULL, {attr_ints("axes", 1, i_m1), attr_bool("keepdim", true)}, 2,
         "min %a {axes=[-1], keepdim=true} : i32[B,1]"},
        {OP_ARGMAX, {"f32[B,3]"}, NULL, {{0}}, 0, "argmax %a : i64[B]"},
        {OP_ARGMAX, {"f32[B,3]"}, NULL, {attr_int("axis", 0), attr_bool("keepdim", true)}, 2,
         "argmax %a {axis=0, keepdim=true} : i64[1,3]"},
        {OP_MATMUL, {"f32[B,2,3]", "f32[3,4]"}, NULL, {{0}}, 0, "matmul %a, %b : f32[B,2,4]"},
        {OP_TRANSPOSE, {"f32[B,3]"}, NULL, {attr_ints("perm", 2, i_10)}, 1, "transpose %a {perm=[1, 0]} : f32[3,B]"},
        {OP_RESHAPE, {"f32[B,T,4]"}, "f32[B*T,4]", {{0}}, 0, "reshape %a : f32[B*T,4]"},
        {OP_RESHAPE, {"f32[B,T,4]"}, "f32[4*B*T]", {{0}}, 0, "reshape %a : f32[4*B*T]"},
        {OP_EXPAND, {"f32[1,3]"}, "f32[B,3]", {{0}}, 0, "expand %a : f32[B,3]"},
        {OP_SLICE, {"f32[B,3]"}, NULL, {attr_int("axis", 1), attr_int("start", 0), attr_int("end", 2)}, 3,
         "slice %a {axis=1, start=0, end=2} : f32[B,2]"},
        {OP_SLICE, {"f32[B,5]"}, NULL,
         {attr_int("axis", 1), attr_int("start", -4), attr_int("end", 5), attr_int("step", 2)}, 4,
         "slice %a {axis=1, start=-4, end=5, step=2} : f32[B,2]"},
        {OP_CONCAT, {"f32[B,1]", "f32[B,2]", "f32[B,3]"}, NULL, {attr_int("axis", 1)}, 1,
         "concat %a, %b, %c {axis=1} : f32[B,6]"},
        {OP_GATHER, {"f32[10,4]", "i64[B,T]"}, NULL, {{0}}, 0, "gather %a, %b : f32[B,T,4]"},
        {OP_GATHER, {"f32[4,10]", "i32[B]"}, NULL, {attr_int("axis", 1)}, 1, "gather %a, %b {axis=1} : f32[4,B]"},
        {OP_INDEX_ADD, {"f32[10,4]", "i64[B,T]", "f32[B,T,4]"}, NULL, {{0}}, 0,
         "index_add %a, %b, %c : f32[10,4]"},
        {OP_SOFTMAX, {"f32[B,3]"}, NULL, {{0}}, 0, "softmax %a : f32[B,3]"},
        {OP_LOG_SOFTMAX, {"f32[B,3]"}, NULL, {attr_int("axis", 0)}, 1, "log_softmax %a {axis=0} : f32[B,3]"},
        {OP_LAYER_NORM, {"f32[B,3]"}, NULL, {{0}}, 0, "layer_norm %a : f32[B,3]"},
        {OP_LAYER_NORM, {"f32[B,3]", "f32[3]", "f32[3]"}, NULL, {attr_float("eps", 1e-6)}, 1,
         "layer_norm %a, %b, %c {eps=1e-06} : f32[B,3]"},
        {OP_RMS_NORM, {"f32[B,3]", "f32[3]"}, NULL, {{0}}, 0, "rms_norm %a, %b : f32[B,3]"},
        {OP_DROPOUT, {"f32[B,3]"}, NULL, {attr_float("p", 0.1), attr_int("seed", 3), attr_int("offset", 100)}, 3,
         "dropout %a {p=0.1, seed=3, offset=100} : f32[B,3]"},
        {OP_CROSS_ENTROPY, {"f32[B,10]", "i64[B]"}, NULL, {{0}}, 0, "cross_entropy %a, %b : f32[]"},
        {OP_CROSS_ENTROPY, {"f32[B,T,10]", "i32[B,T]"}, NULL, {attr_str("reduction", "none")}, 1,
         "cross_entropy %a, %b {reduction=\"none\"} : f32[B,T]"},
        {OP_ATTENTION, {"f32[B,4,8]", "f32[B,6,8]", "f32[B,6,5]"}, NULL, {{0}}, 0,
         "attention %a, %b, %c : f32[B,4,5]"},
        {OP_ATTENTION, {"f32[2,4,8]", "f32[2,4,8]", "f32[2,4,8]"}, NULL,
         {attr_bool("causal", true), attr_float("scale", 0.125)}, 2,
         "attention %a, %b, %c {causal=true, scale=0.125} : f32[2,4,8]"},
        {OP_ATTENTION_LSE, {"bf16[B,H,4,8]", "bf16[B,H,6,8]"}, NULL, {attr_bool("causal", true)}, 1,
         "attention_lse %a, %b {causal=true} : f32[B,H,4]"},
        {OP_ATTENTION_GRAD, {"f32[B,T,8]", "f32[B,T,8]", "f32[B,T,8]", "f32[B,T,8]", "f32[B,T,8]",
                             "f32[B,T]"}, NULL, {attr_float("scale", 0.5)}, 1,
         "attention_grad %a, %b, %c, %d, %e, %f {scale=0.5} : f32[3,B,T,8]"},
        {OP_CONV, {"f32[B,4,9,8]", "f32[6,2,3,3]"}, NULL,
         {attr_ints("stride", 2, conv_stride), attr_ints("padding", 4, conv_padding),
          attr_ints("dilation", 1, conv_dilation), attr_int("groups", 2)}, 4,
         "conv %a, %b {stride=[2, 1], padding=[1, 0, 1, 2], dilation=[2], groups=2} : f32[B,6,4,6]"},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    memcpy(c, cases, sizeof cases);
    return n;
}

/* Pointwise unary and binary ops: operands from the op table's arity, no attributes. */
static int generic_cases(OpCase *c, const bool *covered)
{
    static char stmt[OP_COUNT][64];
    int n = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        const OpInfo *oi = &op_info[op];
        if (covered[op] || !(oi->flags & OPF_POINTWISE) || oi->nattr || oi->nin_min != oi->nin_max)
            continue;
        bool compare = op >= OP_EQ && op <= OP_GE;
        c[n] = (OpCase){.op = op, .in = {"f32[B,3]", oi->nin_min > 1 ? "f32[3]" : NULL}};
        snprintf(stmt[op], sizeof stmt[op], "%s %%a%s : %s[B,3]", oi->name, oi->nin_min > 1 ? ", %b" : "",
                 compare ? "bool" : "f32");
        c[n++].stmt = stmt[op];
    }
    return n;
}

static void run_case(const OpCase *c)
{
    static const char *names[] = {"a", "b", "c", "d", "e", "f"};
    Graph *g = graph_new("case");
    Err e = {0};
    Builder b = builder_make(g, &e);
    int in[6], nin = 0;
    for (; nin < 6 && c->in[nin]; nin++) {
        Type t = ty(g, c->in[nin]);
        in[nin] = b_input(&b, names[nin], &t);
    }
    Type out = c->out ? ty(g, c->out) : (Type){0};
    int id = b_op(&b, c->op, in, nin, c->attr, c->nattr, c->out ? &out : NULL);
    b_output(&b, id, NULL);
    if (id < 0 || !ir_verify(g, &e)) {
        fprintf(stderr, "case '%s': %s\n", c->stmt, e.msg);
        check_failures++;
        graph_free(g);
        return;
    }
    char *text = roundtrip(g, op_info[c->op].name);
    char want[256];
    snprintf(want, sizeof want, "\n  %%0 = %s\n  return %%0\n}\n", c->stmt);
    if (!strstr(text, want)) {
        fprintf(stderr, "case %s: expected statement\n  %%0 = %s\ngot:\n%s", op_info[c->op].name, c->stmt, text);
        check_failures++;
    }
    free(text);
    graph_free(g);
}

static void test_every_op(void)
{
    OpCase cases[2 * OP_COUNT + 64];
    bool covered[OP_COUNT] = {[OP_INPUT] = true}; /* every case has inputs */
    int n = special_cases(cases);
    for (int i = 0; i < n; i++)
        covered[cases[i].op] = true;
    n += generic_cases(cases + n, covered);
    for (int i = 0; i < n; i++) {
        covered[cases[i].op] = true;
        run_case(&cases[i]);
    }
    for (int op = 0; op < OP_COUNT; op++)
        if (!covered[op]) {
            fprintf(stderr, "op %s has no round-trip case\n", op_info[op].name);
            check_failures++;
        }
}

/* ---------------------------------------------------------------- golden text */

static const char golden[] =
    "graph @tiny(%x: f32[B,T,4], %ids: i64[B,T], %\"in put\": f32[]) -> (out0: f32[B*T,3], loss: f32[], "
    "\"a b\": f32[]) {\n"
    "  %0 = param {name=\"layers.0.w\", init=\"normal(0.02)\"} : f32[4,3]\n"
    "  %1 = reshape %x : f32[B*T,4]\n"
    "  %2 = matmul %1, %0 : f32[B*T,3]\n"
    "  %3 = constant {value=[0.1, 1e-30, -inf, nan, 1e+300, -0, 0.30000000000000004, 5e-324]} : f32[8]\n"
    "  %4 = full {value=-2.5} : f32[]\n"
    "  %5 = param {name=\"q\\\"uote\\\\back\\nnew\\ttab\\x01ctl\\x7f é ∑\"} : f32[2]\n"
    "  %6 = reshape %2 : f32[B,T,3]\n"
    "  %7 = cross_entropy %6, %ids {reduction=\"sum\"} : f32[]\n"
    "  %8 = add %7, %4 : f32[]\n"
    "  return %2, %8, %\"in put\"\n"
    "}\n";

/* Canonical text prints back byte for byte; hand-written variants print canonically. */
static void test_golden(void)
{
    Err e = {0};
    Graph *g = ir_parse(golden, strlen(golden), "golden.cir", &e);
    CHECK(g);
    if (!g) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    char *text = ir_print(g);
    if (strcmp(text, golden) != 0) {
        fprintf(stderr, "golden text differs:\n%s", text);
        check_failures++;
    }
    const Node *c = &g->node[6];
    CHECK(c->op == OP_CONSTANT && c->attr[0].n == 8 && c->attr[0].data[0] == 0.1 && c->attr[0].data[1] == 1e-30);
    CHECK_STR(node_name(&g->node[8]), "q\"uote\\back\nnew\ttab\x01" "ctl\x7f é ∑");
    CHECK(g->noutput == 3 && strcmp(g->output_name[2], "a b") == 0 && g->output[2] == g->input[2]);
    CHECK(g->node[3].loc.line == 2 && g->node[3].loc.col == 8 && strcmp(g->node[3].loc.file, "golden.cir") == 0);
    free(text);
    graph_free(g);

    static const char loose[] =
        "// a comment\ngraph @g(%in: f32[T*2*B]) -> (f32[2*B*T]) {  // trailing\n"
        "  %y = neg %in : f32[2*T*B]\n  %\"0\" = abs %y : f32[B*2*T] return %\"0\" }";
    static const char canon[] =
        "graph @g(%in: f32[2*T*B]) -> (out0: f32[2*T*B]) {\n"
        "  %0 = neg %in : f32[2*T*B]\n  %1 = abs %0 : f32[2*T*B]\n  return %1\n}\n";
    g = ir_parse(loose, strlen(loose), "loose.cir", &e);
    CHECK(g);
    if (g) {
        text = ir_print(g);
        CHECK_STR(text, canon);
        free(text);
        graph_free(g);
    }
}

/* Symbols interned T before B print products as T*B; parsing must keep that order. */
static void test_symbol_order(void)
{
    Graph *g = graph_new("order");
    Err e = {0};
    Builder b = builder_make(g, &e);
    graph_sym(g, "T", 1);
    Type t = ty(g, "f32[B,T]"), flat = ty(g, "f32[T*B]");
    int x = b_input(&b, "x", &t);
    b_output(&b, b_reshape(&b, x, &flat), NULL);
    CHECK(err_ok(&e));
    char *text = roundtrip(g, "order");
    CHECK(strstr(text, "reshape %x : f32[T*B]"));
    free(text);
    graph_free(g);
}

/* A graph with no inputs, outputs or symbols, and an input returned directly. */
static void test_edges(void)
{
    Graph *g = graph_new("empty");
    char *text = roundtrip(g, "empty");
    CHECK_STR(text, "graph @empty() -> () {\n  return\n}\n");
    free(text);
    graph_free(g);
    g = graph_new("weird name");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t = type_scalar(DT_BOOL);
    int x = b_input(&b, "0", &t);
    b_output(&b, x, "1");
    b_output(&b, b_unary(&b, OP_ABS, b_cast(&b, x, DT_I8)), "x y");
    text = roundtrip(g, "weird");
    CHECK_STR(text, "graph @\"weird name\"(%\"0\": bool[]) -> (\"1\": bool[], \"x y\": i8[]) {\n"
                    "  %0 = cast %\"0\" : i8[]\n  %1 = abs %0 : i8[]\n  return %\"0\", %1\n}\n");
    free(text);
    graph_free(g);
}

/* ---------------------------------------------------------------- errors */

#define HDR "graph @g(%x: f32[2], %i: i64[2]) -> (f32[2]) {\n"

static const struct {
    const char *text;
    const char *msg;
} bad[] = {
    {HDR "  %0 = matmull %x, %x : f32[2]\n  return %0\n}\n", "t.cir:2:8: error: unknown op 'matmull'; did you mean 'matmul'?"},
    {HDR "  %0 = frobnicate %x : f32[2]\n  return %0\n}\n", "t.cir:2:8: error: unknown op 'frobnicate' (docs/IR.md lists the ops)"},
    {HDR "  %0 = sum %x {axis=[0]} : f32[]\n  return %0\n}\n",
     "t.cir:2:16: error: sum has no attribute 'axis'; did you mean 'axes'? (its attributes: axes, keepdim)"},
    {HDR "  %0 = neg %x {axis=0} : f32[2]\n  return %0\n}\n", "t.cir:2:16: error: neg has no attributes, got 'axis'"},
    {HDR "  %0 = sum %x {keepdim=1} : f32[]\n  return %0\n}\n",
     "t.cir:2:24: error: sum: attribute 'keepdim' takes true or false, got '1'"},
    {HDR "  %0 = sum %x {axes=[0.5]} : f32[]\n  return %0\n}\n",
     "t.cir:2:22: error: sum: attribute 'axes' takes a list of integers like [0, 1], got '0.5'"},
    {HDR "  %0 = param {name=3} : f32[2]\n  return %0\n}\n",
     "t.cir:2:20: error: param: attribute 'name' takes a string in double quotes, got '3'"},
    {HDR "  %0 = slice %x {axis=0, end=1} : f32[1]\n  return %0\n}\n",
     "t.cir:2:8: error: slice: missing required attribute 'start'"},
    {HDR "  %0 = sum %x {keepdim=true, keepdim=false} : f32[1]\n  return %0\n}\n",
     "t.cir:2:30: error: sum: duplicate attribute 'keepdim'"},
    {HDR "  %0 = add %x : f32[2]\n  return %0\n}\n", "t.cir:2:8: error: add: expects 2 operands, got 1"},
    {HDR "  %0 = add %x, %y : f32[2]\n  return %0\n}\n",
     "t.cir:2:16: error: use of undefined value %y; values must be defined before they are used"},
    {HDR "  %0 = neg %1 : f32[2]\n  %1 = neg %x : f32[2]\n  return %0\n}\n",
     "t.cir:2:12: error: use of undefined value %1; values must be defined before they are used"},
    {HDR "  %0 = neg %x : f32[2]\n  %0 = abs %x : f32[2]\n  return %0\n}\n",
     "t.cir:3:3: error: redefinition of %0 (first defined at line 2, column 3)"},
    {"graph @g(%x: f32[2], %x: f32[2]) -> () {\n  return\n}\n",
     "t.cir:1:22: error: redefinition of %x (first defined at line 1, column 10)"},
    {HDR "  %0 = neg %x : f33[2]\n  return %0\n}\n",
     "t.cir:2:17: error: unknown dtype 'f33' (expected one of f32, f16, bf16, i8, i32, i64, bool)"},
    {HDR "  %0 = neg %x : f32(2)\n  return %0\n}\n",
     "t.cir:2:20: error: expected '[' after the dtype (rank 0 is written f32[]), got '('"},
    {HDR "  %0 = neg %x : f32[-2]\n  return %0\n}\n",
     "t.cir:2:21: error: expected a dim: a non-negative integer, a symbol, or a product like 2*B, got '-2'"},
    {HDR "  %0 = full {value=1.2.3} : f32[2]\n  return %0\n}\n", "t.cir:2:20: error: malformed number '1.2.3'"},
    {HDR "  %0 = full {value=1e} : f32[2]\n  return %0\n}\n", "t.cir:2:20: error: malformed number '1e'"},
    {HDR "  %0 = full {value=12abc} : f32[2]\n  return %0\n}\n", "t.cir:2:20: error: malformed number '12abc'"},
    {HDR "  %0 = full {value=1e999} : f32[2]\n  return %0\n}\n",
     "t.cir:2:20: error: number 1e999 is out of range for a 64-bit float"},
    {HDR "  %0 = iota {axis=9223372036854775808} : i64[2]\n  return %0\n}\n",
     "t.cir:2:19: error: integer 9223372036854775808 does not fit in 64 bits"},
    {"graph @g(%x: f32[18446744073709551616]) -> () {\n  return\n}\n",
     "t.cir:1:18: error: integer 18446744073709551616 does not fit in 64 bits"},
    {"graph @g(%x: f32[4294967296*4294967296]) -> () {\n  return\n}\n", "t.cir:1:18: error: dim overflows 64 bits"},
    {HDR "  %0 = param {name=\"abc} : f32[2]\n  return %0\n}\n",
     "t.cir:2:20: error: unterminated string; close it with '\"' on the same line"},
    {HDR "  %0 = param {name=\"a\\qb\"} : f32[2]\n  return %0\n}\n",
     "t.cir:2:23: error: invalid escape in a string; use \\\", \\\\, \\n, \\t, \\r or \\xHH (not \\x00)"},
    {HDR "  %0 = param {name=\"a\\x00\"} : f32[2]\n  return %0\n}\n",
     "t.cir:2:23: error: invalid escape in a string; use \\\", \\\\, \\n, \\t, \\r or \\xHH (not \\x00)"},
    {HDR "  %0 = neg %x : f32[2]\n  return", "t.cir:3:9: error: unexpected end of file; expected a returned value or '}'"},
    {HDR "  %0 = neg %x : f32[2", "t.cir:2:22: error: unexpected end of file; expected ',' or ']' in a type"},
    {"graph @g(%x: f32[2]", "t.cir:1:20: error: unexpected end of file; expected ',' or ')' in the input list"},
    {"", "t.cir:1:1: error: unexpected end of file; expected 'graph @name(...)'"},
    {HDR "  return %x\n} trailing\n", "t.cir:3:3: error: expected end of file after the graph's '}', got 'trailing'"},
    {HDR "  %0 = neg %x : f32[2]\n  return %0, %0\n}\n",
     "t.cir:3:14: error: return gives more values than the 1 output the header declares"},
    {"graph @g(%x: f32[2]) -> (a: f32[2], b: f32[2]) {\n  return %x\n}\n",
     "t.cir:2:3: error: return gives 1 value but the header declares 2 outputs"},
    {"graph @g(%x: f32[2]) -> (f32[3]) {\n  return %x\n}\n",
     "t.cir:2:10: error: output 0 (out0) is declared f32[3] in the header, but the returned value has type f32[2]"},
    {"graph @g(%x: f32[2]) -> (y: f32[2], y: f32[2]) {\n  return %x, %x\n}\n",
     "t.cir:1:37: error: output name 'y' is already used by output 0"},
    {HDR "  %0 = neg %x : f32[3]\n  return %0\n}\n",
     "t.cir:2:17: error: type annotation f32[3] does not match inferred type f32[2]"},
    {HDR "  %0 = add %x, %i : f32[2]\n  return %0\n}\n", "t.cir:2:8: error: add: "},
    {HDR "  %0 = input {name=\"y\"} : f32[2]\n  return %0\n}\n",
     "t.cir:2:8: error: inputs are declared in the graph header, as in graph @g(%x: f32[4])"},
    {"graph @g(%x: f32[1,2,3,4,5,6,7,8,9]) -> () {\n  return\n}\n",
     "t.cir:1:34: error: too many dims: the rank is at most 8"},
    {"graph @g(%x: f32[B*B]) -> () {\n  return\n}\n", "t.cir:1:20: error: symbol B appears twice in one dim"},
    {"graph @g(%x: f32[2]) -> () {\n  %0 = param {name=\"w\"} : f32[2]\n  %1 = param {name=\"w\"} : f32[3]\n"
     "  return\n}\n", "t.cir:3:8: error: %1 (param): duplicate param name 'w' (also used by node 1)"},
    {"graph @g(%x: f32[2]) -> () {\n  return\n}\n\x01", "t.cir:4:1: error: unexpected control character 0x01"},
    {"graph @g(%x: f32[2]) -> () { $ }", "t.cir:1:30: error: unexpected character '$'"},
    {"graph @g(%x: f32[2]) -> () {\n  // caf\xc3\n  return\n}\n",
     "t.cir:2:9: error: invalid UTF-8 byte 0xc3 in a comment; IR text must be UTF-8"},
    {"graph @g() -> () {\n  %0 = param {name=\"\xed\xa0\x80\"} : f32[]\n  return\n}\n",
     "t.cir:2:21: error: invalid UTF-8 byte 0xed in a string; IR text must be UTF-8"},
    {"graph @g(%x: f32[2]) -> () {\n  return\n}\n\x7f" "ELF\x02\x01", "t.cir:4:1: error: unexpected control character 0x7f"},
    {"\xff\xfe" "g\0r\0", "t.cir:1:1: error: invalid UTF-8 byte 0xff; IR text must be UTF-8"},
    {"graph @g(%: f32[2]) -> () {\n  return\n}\n", "t.cir:1:10: error: expected a name after '%'"},
    {"graph @g(%\"\": f32[2]) -> () {\n  return\n}\n", "t.cir:1:10: error: empty value name"},
    {"graph @g(%x: f32[2]) -> () {\n  %0 neg %x : f32[2]\n  return\n}\n",
     "t.cir:2:6: error: expected '=' after the value name, got 'neg'"},
    {"graph @g(%x: f32[2]) -> () {\n  %0 = neg %x,\n  return\n}\n",
     "t.cir:3:3: error: expected an operand after ',', got 'return'"},
};

static void test_errors(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Err e = {0};
        size_t len = strlen(bad[i].text);
        if (bad[i].text[0] == '\xff')
            len = 6; /* keeps its NUL bytes */
        Graph *g = ir_parse(bad[i].text, len, "t.cir", &e);
        if (g || strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) != 0) {
            fprintf(stderr, "case %zu: expected\n  %s\ngot\n  %s\n", i, bad[i].msg, g ? "(parsed)" : e.msg);
            check_failures++;
        }
        graph_free(g);
    }
    /* A NUL byte inside otherwise valid text. */
    static const char nul[] = "graph @g() -> () {\n  \0return\n}\n";
    Err e = {0};
    CHECK(!ir_parse(nul, sizeof nul - 1, "t.cir", &e));
    CHECK_STR(e.msg, "t.cir:2:3: error: NUL byte; IR text cannot contain NUL (is this a binary file?)");
    /* 33 symbols */
    char many[1024] = "graph @g(%x: f32[";
    for (int s = 0; s < 33; s++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sS%d", s ? "," : "", s);
    strcat(many, "]) -> () {\n  return\n}\n");
    e = (Err){0};
    CHECK(!ir_parse(many, strlen(many), "t.cir", &e));
    CHECK(strstr(e.msg, "error: too many") != NULL);
}

/* Every prefix of valid text, and every single-byte corruption of it, gives a graph or a
 * located error, never a crash. */
static void test_truncation_and_junk(void)
{
    static const unsigned char junk[] = {0, 0xff, 0x80, '}', '%', '"', '[', '\n', '9', 'z'};
    size_t n = strlen(golden);
    char *buf = malloc(n);
    for (size_t len = 0; len + 1 < n; len++) { /* the last prefix lacks only the final newline */
        Err e = {0};
        Graph *g = ir_parse(golden, len, "t.cir", &e);
        if (g || strncmp(e.msg, "t.cir:", 6) != 0) {
            fprintf(stderr, "prefix %zu: %s\n", len, g ? "parsed" : e.msg);
            check_failures++;
        }
        graph_free(g);
    }
    for (size_t pos = 0; pos < n; pos++)
        for (size_t j = 0; j < sizeof junk; j++) {
            memcpy(buf, golden, n);
            buf[pos] = (char)junk[j];
            Err e = {0};
            Graph *g = ir_parse(buf, n, "t.cir", &e);
            if (!g && strncmp(e.msg, "t.cir:", 6) != 0) {
                fprintf(stderr, "byte %zu = 0x%02x: unlocated error %s\n", pos, junk[j], e.msg);
                check_failures++;
            }
            graph_free(g);
        }
    free(buf);
}

static void test_parse_file(void)
{
    Err e = {0};
    CHECK(!ir_parse_file("tests/unit/no-such-file.cir", &e));
    CHECK_STR(e.msg, "tests/unit/no-such-file.cir: cannot open: No such file or directory");
    e = (Err){0};
    CHECK(!ir_parse_file("tests/unit", &e));
    CHECK_STR(e.msg, "tests/unit: cannot read: Is a directory");
}

/* ---------------------------------------------------------------- verifier */

/* x + param, then sum; the verifier's view of corruptions of it. */
static Graph *small_graph(void)
{
    Graph *g = graph_new("v");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t = ty(g, "f32[B,3]"), w = ty(g, "f32[3]");
    int x = b_input(&b, "x", &t);
    int p = b_param(&b, "w", &w, NULL);
    int s = b_binary(&b, OP_ADD, x, p);
    int64_t axes[] = {1};
    b_output(&b, b_reduce(&b, OP_SUM, s, 1, axes, false), NULL);
    CHECK(err_ok(&e) && ir_verify(g, &e));
    return g;
}

static void expect_verify(Graph *g, const char *msg)
{
    Err e = {0};
    bool ok = ir_verify(g, &e);
    if (ok || strcmp(e.msg, msg) != 0) {
        fprintf(stderr, "verify: expected\n  %s\ngot\n  %s\n", msg, ok ? "(ok)" : e.msg);
        check_failures++;
    }
    graph_free(g);
}

static void test_verify(void)
{
    Graph *g = small_graph();
    g->node[2].in[1] = 3;
    expect_verify(g, "error: %1 (add): operand 1 is node 3, which is not defined before it");

    g = small_graph();
    g->node[2].type.dim[1] = dim_static(4);
    expect_verify(g, "error: %1 (add): type f32[B,4] does not match the type inferred from its operands, f32[B,3]");

    g = small_graph();
    g->node[3].nin = 2;
    expect_verify(g, "error: %2 (sum): has 2 operands; sum takes 1");

    g = small_graph();
    g->node[3].attr[1].kind = AK_INT;
    expect_verify(g, "error: %2 (sum): attribute 1 is not 'keepdim' of the schema's kind");

    g = small_graph();
    g->node[3].attr[1].i = 2;
    expect_verify(g, "error: %2 (sum): attribute 'keepdim' is a bool holding 2");

    g = small_graph();
    g->node[1].attr[0].s = "";
    expect_verify(g, "error: %0 (param): param without a name");

    g = small_graph();
    g->node[1].type.dim[0].syms = 1u << 5;
    expect_verify(g, "error: %0 (param): dim 0 uses a symbol the graph does not define");

    g = small_graph();
    g->ninput = 0;
    expect_verify(g, "error: %0 (input): is an input node missing from the graph's input list");

    g = small_graph();
    g->output[0] = 9;
    expect_verify(g, "error: output 0 is node 9, which is not in the graph");

    g = small_graph();
    g->output_name[0] = "";
    expect_verify(g, "error: output 0 has no name");

    g = small_graph();
    g->sym[0] = "not a name";
    expect_verify(g, "error: symbol 0, 'not a name', is not an identifier");

    /* A parsed graph's errors carry the statement's location. */
    static const char text[] = "graph @g(%x: f32[2]) -> () {\n  %0 = neg %x : f32[2]\n  return\n}\n";
    Err e = {0};
    g = ir_parse(text, strlen(text), "v.cir", &e);
    CHECK(g);
    if (g) {
        g->node[1].type.dt = DT_I32;
        expect_verify(g, "v.cir:2:8: error: %0 (neg): type i32[2] does not match the type inferred from its operands, f32[2]");
    }
}

/* ---------------------------------------------------------------- docs/IR.md */

/* The row of docs/IR.md's op table for op, generated from op_info. */
static void op_row(int op, char *buf, size_t n)
{
    static const char *kind[] = {"int", "float", "bool", "int list", "string", "number list"};
    const OpInfo *oi = &op_info[op];
    char arity[32], attrs[512] = "";
    op_arity(oi, arity, sizeof arity);
    for (int i = 0; i < oi->nattr; i++) {
        const AttrSpec *s = &oi->attrs[i];
        size_t len = strlen(attrs);
        len += (size_t)snprintf(attrs + len, sizeof attrs - len, "%s`%s`: %s", i ? ", " : "", s->name, kind[s->kind]);
        if (s->required)
            snprintf(attrs + len, sizeof attrs - len, " (required)");
        else if (s->kind == AK_BOOL)
            snprintf(attrs + len, sizeof attrs - len, " = %s", s->def ? "true" : "false");
        else if (s->kind == AK_INT || s->kind == AK_FLOAT)
            snprintf(attrs + len, sizeof attrs - len, " = %g", s->def);
        else
            snprintf(attrs + len, sizeof attrs - len, " = %s", s->kind == AK_INTS ? "[]" : "none");
    }
    snprintf(buf, n, "| `%s` | %s | %s | %s |", oi->name, arity, oi->flags & OPF_TYPED ? "declared" : "inferred",
             oi->nattr ? attrs : "none");
}

static void test_docs_table(void)
{
    FILE *f = fopen("docs/IR.md", "rb");
    CHECK(f);
    if (!f)
        return;
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = 0;
    fclose(f);
    for (int op = 0; op < OP_COUNT; op++) {
        char row[1024];
        op_row(op, row, sizeof row);
        if (!strstr(doc, row)) {
            fprintf(stderr, "docs/IR.md lacks the row (run test_roundtrip --op-table):\n%s\n", row);
            check_failures++;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--op-table") == 0) {
        for (int op = 0; op < OP_COUNT; op++) {
            char row[1024];
            op_row(op, row, sizeof row);
            puts(row);
        }
        return 0;
    }
    test_every_op();
    test_golden();
    test_symbol_order();
    test_edges();
    test_errors();
    test_truncation_and_junk();
    test_parse_file();
    test_verify();
    test_docs_table();
    return check_status();
}
