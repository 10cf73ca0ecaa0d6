/* test_loop_eval.c — the loop IR's reference evaluator and printer on hand-built Programs,
 * against closed forms, Philox itself and the IR interpreter on equivalent graphs. */
#include <stdlib.h>

#include "check.h"
#include "codegen/loop.h"

#define MAXBUF 16
#define MAXKERNEL 4
#define MAXSTEP 4
#define MAXLX 96
#define MAXSTMT 16

/* ---------------------------------------------------------------- building programs */

static Program *prog_new(const Graph *g)
{
    Program *p = calloc(1, sizeof *p);
    p->arena = arena_new();
    p->graph = g;
    p->buf = arena_alloc(p->arena, MAXBUF * sizeof *p->buf);
    p->kernel = arena_alloc(p->arena, MAXKERNEL * sizeof *p->kernel);
    p->step = arena_alloc(p->arena, MAXSTEP * sizeof *p->step);
    return p;
}

static int add_buf(Program *p, const char *name, BufKind kind, int index, DType dt, Dim numel)
{
    p->buf[p->nbuf] = (Buffer){.name = name, .kind = kind, .index = index, .dt = dt,
                               .numel = numel, .last = p->nstep};
    return p->nbuf++;
}

/* A kernel under construction: statements go to the phase (or `after`) opened last. */
typedef struct KB {
    Kernel *k;
    StmtRange *cur;
} KB;

/* A kernel over loops of sizes dims[0..nouter + ninner), not (yet) a step. */
static KB new_kernel(Program *p, const char *name, int nouter, int ninner, const Dim *dims)
{
    Kernel *k = &p->kernel[p->nkernel++];
    *k = (Kernel){.name = name, .nouter = nouter, .ninner = ninner, .group = p->nkernel - 1};
    for (int d = 0; d < nouter + ninner; d++)
        k->size[d] = dims[d];
    k->lx = arena_alloc(p->arena, MAXLX * sizeof *k->lx);
    k->stmt = arena_alloc(p->arena, MAXSTMT * sizeof *k->stmt);
    return (KB){k, &k->after};
}

/* A kernel that is the program's next step. */
static KB add_kernel(Program *p, const char *name, int nouter, int ninner, const Dim *dims)
{
    KB kb = new_kernel(p, name, nouter, ninner, dims);
    p->step[p->nstep++] = (Step){.kind = STEP_KERNEL, .kernel = p->nkernel - 1};
    return kb;
}

static void kb_phase(KB *kb)
{
    kb->cur = &kb->k->phase[kb->k->nphase++];
    kb->cur->first = kb->k->nstmt;
}

static void kb_after(KB *kb)
{
    kb->cur = &kb->k->after;
    kb->cur->first = kb->k->nstmt;
}

static int kx(KB *kb, Lx x)
{
    kb->k->lx[kb->k->nlx] = x;
    return kb->k->nlx++;
}

static int x_int(KB *kb, int64_t v) { return kx(kb, (Lx){LX_INT, DT_I64, 0, -1, -1, -1, v, 0, 0}); }
static int x_var(KB *kb, int v) { return kx(kb, (Lx){LX_VAR, DT_I64, 0, -1, -1, -1, v, 0, 0}); }
static int x_sym(KB *kb, int s) { return kx(kb, (Lx){LX_SYM, DT_I64, 0, -1, -1, -1, s, 0, 0}); }
static int x_f(KB *kb, DType dt, double v) { return kx(kb, (Lx){LX_FLOAT, dt, 0, -1, -1, -1, 0, 0, v}); }
static int x_load(KB *kb, DType dt, int buf, int at) { return kx(kb, (Lx){LX_LOAD, dt, 0, at, -1, -1, buf, 0, 0}); }
static int x_un(KB *kb, int op, DType dt, int a) { return kx(kb, (Lx){LX_UNARY, dt, op, a, -1, -1, 0, 0, 0}); }
static int x_bin(KB *kb, int op, DType dt, int a, int b) { return kx(kb, (Lx){LX_BINARY, dt, op, a, b, -1, 0, 0, 0}); }
static int x_cast(KB *kb, DType dt, int a) { return kx(kb, (Lx){LX_CAST, dt, 0, a, -1, -1, 0, 0, 0}); }
static int x_acc(KB *kb, DType dt, int stmt) { return kx(kb, (Lx){LX_ACC, dt, 0, -1, -1, -1, stmt, 0, 0}); }

/* sum of var[i] * stride[i] (zero strides skipped) plus off, as i64 expressions. */
static int x_index(KB *kb, int n, const int *vars, const int64_t *strides, int64_t off)
{
    int at = x_int(kb, off);
    for (int i = 0; i < n; i++)
        if (strides[i] != 0)
            at = x_bin(kb, OP_ADD, DT_I64, at,
                       x_bin(kb, OP_MUL, DT_I64, x_var(kb, vars[i]), x_int(kb, strides[i])));
    return at;
}

static int st_store(KB *kb, int buf, int at, int value)
{
    kb->k->stmt[kb->k->nstmt] = (LStmt){.kind = ST_STORE, .buf = buf, .index = at, .value = value};
    kb->cur->count++;
    return kb->k->nstmt++;
}

static int st_reduce(KB *kb, int op, int value, DType acc_dt, int axis)
{
    kb->k->stmt[kb->k->nstmt] = (LStmt){.kind = ST_REDUCE, .op = op, .value = value,
                                        .axis = axis, .acc_dt = acc_dt};
    kb->cur->count++;
    return kb->k->nstmt++;
}

static Type ty(DType dt, int rank, const int64_t *dims) { return type_make(dt, rank, dims); }

/* Run p, reporting an error; outputs[] has the graph's noutput entries. */
static bool eval(const Program *p, const Tensor *in, const Tensor *params, Tensor *out)
{
    Err e = {0};
    if (loop_eval(p, in, params, out, &e))
        return true;
    fprintf(stderr, "loop_eval: %s\n", e.msg);
    check_failures++;
    return false;
}

/* The interpreter on g with parameters: the independent value to compare with. */
static bool interp(const Graph *g, const Tensor *in, const Tensor *params, Tensor *out)
{
    Err e = {0};
    if (interp_run(g, in, params, out, NULL, &e))
        return true;
    fprintf(stderr, "interp_run: %s\n", e.msg);
    check_failures++;
    return false;
}

/* ---------------------------------------------------------------- pointwise */

/* out[i, j] = x[i, j] * c[j] + bias[j]: bias and the f16 constant broadcast along rows
 * (stride 0 on v0). A second output re-reads a temporary stored one statement earlier at
 * the same point: statements run in order. */
static void test_pointwise(void)
{
    Err err = {0};
    Graph *g = graph_new("pw");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){3, 4}), tb = ty(DT_F32, 1, (int64_t[]){4});
    int x = b_input(&b, "x", &tx), bias = b_param(&b, "bias", &tb, NULL);
    b_output(&b, b_binary(&b, OP_ADD, x, bias), "out");
    b_output(&b, x, "twice");
    CHECK(err_ok(&err));

    static const double cdata[4] = {0.1, 1, -2, 3};
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(12));
    int bb = add_buf(p, "bias", BUF_PARAM, 0, DT_F32, dim_static(4));
    int bc = add_buf(p, "c", BUF_CONST, 0, DT_F16, dim_static(4));
    int bt = add_buf(p, "t", BUF_TEMP, 0, DT_F32, dim_static(12));
    int bo = add_buf(p, "out", BUF_OUTPUT, 0, DT_F32, dim_static(12));
    int b2 = add_buf(p, "twice", BUF_OUTPUT, 1, DT_F32, dim_static(12));
    p->buf[bc].data = cdata;
    KB kb = add_kernel(p, "k0_pw", 2, 0, (Dim[]){dim_static(3), dim_static(4)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){4, 1}, 0);
    int col = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){0, 1}, 0);
    int xv = x_load(&kb, DT_F32, bx, at);
    int v = x_bin(&kb, OP_ADD, DT_F32, x_bin(&kb, OP_MUL, DT_F32, xv, x_load(&kb, DT_F16, bc, col)),
                  x_load(&kb, DT_F32, bb, col));
    st_store(&kb, bo, at, v);
    st_store(&kb, bt, at, x_bin(&kb, OP_MUL, DT_F32, xv, x_f(&kb, DT_F32, 2)));
    st_store(&kb, b2, at, x_bin(&kb, OP_ADD, DT_F32, x_load(&kb, DT_F32, bt, at), x_f(&kb, DT_F32, 1)));

    double xs[12], bs[4] = {10, 20, 30, 40};
    for (int i = 0; i < 12; i++)
        xs[i] = i - 5.5;
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){3, 4}, xs);
    Tensor pb = check_tensor(DT_F32, 1, (int64_t[]){4}, bs);
    Tensor out[2];
    if (eval(p, &in, &pb, out)) {
        double want[12], want2[12], c0 = 0.0999755859375; /* 0.1 as f16 */
        for (int i = 0; i < 12; i++) {
            double c = i % 4 == 0 ? c0 : cdata[i % 4];
            want[i] = (double)(float)((float)(xs[i] * c) + bs[i % 4]);
            want2[i] = 2 * xs[i] + 1;
        }
        CHECK_RESULT(&out[0], "f32[3,4]", want, 12, 0);
        CHECK_RESULT(&out[1], "f32[3,4]", want2, 12, 0);
    }
    tensor_free(&in);
    tensor_free(&pb);
    program_free(p);
    graph_free(g);
}

/* out[i, j] = x[j, i]: a transposed load. */
static void test_transpose(void)
{
    Err err = {0};
    Graph *g = graph_new("tr");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){3, 5});
    b_output(&b, b_transpose(&b, b_input(&b, "x", &tx), 2, (int64_t[]){1, 0}), "y");
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(15));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(15));
    KB kb = add_kernel(p, "k0_transpose", 2, 0, (Dim[]){dim_static(5), dim_static(3)});
    int src = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){1, 5}, 0);
    int dst = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){3, 1}, 0);
    st_store(&kb, by, dst, x_load(&kb, DT_F32, bx, src));
    double xs[15], want[15];
    for (int i = 0; i < 15; i++)
        xs[i] = i * 1.5;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = xs[j * 5 + i];
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){3, 5}, xs), out;
    if (eval(p, &in, NULL, &out))
        CHECK_RESULT(&out, "f32[5,3]", want, 15, 0);
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* ---------------------------------------------------------------- reductions */

/* softmax over rows of f32[4, 6]: max; sum of exp(x - max); store exp(x - max) / sum. */
static void test_softmax(void)
{
    Err err = {0};
    Graph *g = graph_new("softmax");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){4, 6});
    b_output(&b, b_input(&b, "x", &tx), "y");
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(24));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(24));
    KB kb = add_kernel(p, "k0_softmax", 1, 1, (Dim[]){dim_static(4), dim_static(6)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){6, 1}, 0);
    int xv = x_load(&kb, DT_F32, bx, at);
    kb_phase(&kb);
    int mx = st_reduce(&kb, OP_MAX, xv, DT_F32, 0);
    int ex = x_un(&kb, OP_EXP, DT_F32, x_bin(&kb, OP_SUB, DT_F32, xv, x_acc(&kb, DT_F32, mx)));
    kb_phase(&kb);
    int sum = st_reduce(&kb, OP_SUM, ex, DT_F32, 0);
    kb_phase(&kb);
    st_store(&kb, by, at, x_bin(&kb, OP_DIV, DT_F32, ex, x_acc(&kb, DT_F32, sum)));

    double xs[24], want[24];
    for (int i = 0; i < 24; i++)
        xs[i] = (i % 7) * 0.75 - 2 + (i >= 18 ? 1000 : 0); /* the last row overflows exp */
    for (int r = 0; r < 4; r++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < 6; j++)
            m = fmax(m, xs[r * 6 + j]);
        for (int j = 0; j < 6; j++)
            s += exp(xs[r * 6 + j] - m);
        for (int j = 0; j < 6; j++)
            want[r * 6 + j] = exp(xs[r * 6 + j] - m) / s;
    }
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){4, 6}, xs), out;
    if (eval(p, &in, NULL, &out))
        CHECK_RESULT(&out, "f32[4,6]", want, 24, 1e-6);
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* layer_norm over rows (mean; variance; store) against the interpreter running the same
 * computation as graph primitives. */
static void test_layer_norm(void)
{
    Err err = {0};
    Graph *g = graph_new("ln");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){3, 8}), tw = ty(DT_F32, 1, (int64_t[]){8});
    int x = b_input(&b, "x", &tx), gamma = b_param(&b, "gamma", &tw, NULL);
    int beta = b_param(&b, "beta", &tw, NULL);
    int64_t last = -1;
    int d = b_binary(&b, OP_SUB, x, b_reduce(&b, OP_MEAN, x, 1, &last, true));
    int var = b_reduce(&b, OP_MEAN, b_binary(&b, OP_MUL, d, d), 1, &last, true);
    int inv = b_unary(&b, OP_RSQRT, b_binary(&b, OP_ADD, var, b_scalar(&b, 1e-5, DT_F32)));
    int y = b_binary(&b, OP_ADD, b_binary(&b, OP_MUL, b_binary(&b, OP_MUL, d, inv), gamma), beta);
    b_output(&b, y, "y");
    CHECK(err_ok(&err));

    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(24));
    int bg = add_buf(p, "gamma", BUF_PARAM, 0, DT_F32, dim_static(8));
    int bbeta = add_buf(p, "beta", BUF_PARAM, 1, DT_F32, dim_static(8));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(24));
    KB kb = add_kernel(p, "k0_layer_norm", 1, 1, (Dim[]){dim_static(3), dim_static(8)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){8, 1}, 0);
    int col = x_var(&kb, 1);
    int xv = x_load(&kb, DT_F32, bx, at), n = x_f(&kb, DT_F32, 8);
    kb_phase(&kb);
    int s0 = st_reduce(&kb, OP_SUM, xv, DT_F32, 0);
    int dv = x_bin(&kb, OP_SUB, DT_F32, xv, x_bin(&kb, OP_DIV, DT_F32, x_acc(&kb, DT_F32, s0), n));
    kb_phase(&kb);
    int s1 = st_reduce(&kb, OP_SUM, x_bin(&kb, OP_MUL, DT_F32, dv, dv), DT_F32, 0);
    int vv = x_bin(&kb, OP_DIV, DT_F32, x_acc(&kb, DT_F32, s1), n);
    int iv = x_un(&kb, OP_RSQRT, DT_F32, x_bin(&kb, OP_ADD, DT_F32, vv, x_f(&kb, DT_F32, 1e-5)));
    int yv = x_bin(&kb, OP_MUL, DT_F32, x_bin(&kb, OP_MUL, DT_F32, dv, iv),
                   x_load(&kb, DT_F32, bg, col));
    kb_phase(&kb);
    st_store(&kb, by, at, x_bin(&kb, OP_ADD, DT_F32, yv, x_load(&kb, DT_F32, bbeta, col)));

    double xs[24], gs[8], bs[8];
    for (int i = 0; i < 24; i++)
        xs[i] = sin(i * 1.7) * (1 + i / 8) + i / 8 * 100;
    for (int i = 0; i < 8; i++) {
        gs[i] = 0.5 + i * 0.25;
        bs[i] = i - 3;
    }
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){3, 8}, xs);
    Tensor ps[2] = {check_tensor(DT_F32, 1, (int64_t[]){8}, gs),
                    check_tensor(DT_F32, 1, (int64_t[]){8}, bs)};
    Tensor want = {0}, got = {0};
    if (interp(g, &in, ps, &want) && eval(p, &in, ps, &got)) {
        CHECK(tensor_numel(&got) == 24);
        for (int i = 0; i < 24; i++)
            CHECK_NEAR(check_at(&got, i), check_at(&want, i), 1e-5);
        CHECK(fabs(check_at(&got, 0) - check_at(&got, 1)) > 0.1); /* not all one value */
        tensor_free(&got);
    }
    tensor_free(&want);
    tensor_free(&in);
    tensor_free(&ps[0]);
    tensor_free(&ps[1]);
    program_free(p);
    graph_free(g);
}

/* argmax and max along rows with ties, NaNs and -inf rows, against fixed answers and the
 * interpreter; max and min of integers start from the dtype's extremes, not 0. */
static void test_argmax(void)
{
    Err err = {0};
    Graph *g = graph_new("argmax");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){5, 5});
    int x = b_input(&b, "x", &tx);
    int64_t one = 1;
    b_output(&b, b_argmax(&b, x, 1, false), "idx");
    b_output(&b, b_reduce(&b, OP_MAX, x, 1, &one, false), "mx");
    CHECK(err_ok(&err));
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(25));
    int bi = add_buf(p, "idx", BUF_OUTPUT, 0, DT_I64, dim_static(5));
    int bm = add_buf(p, "mx", BUF_OUTPUT, 1, DT_F32, dim_static(5));
    KB kb = add_kernel(p, "k0_argmax", 1, 1, (Dim[]){dim_static(5), dim_static(5)});
    int xv = x_load(&kb, DT_F32, bx, x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){5, 1}, 0));
    kb_phase(&kb);
    int am = st_reduce(&kb, OP_ARGMAX, xv, DT_I64, 1);
    int mx = st_reduce(&kb, OP_MAX, xv, DT_F32, 0);
    kb_after(&kb);
    int row = x_var(&kb, 0);
    st_store(&kb, bi, row, x_acc(&kb, DT_I64, am));
    st_store(&kb, bm, row, x_acc(&kb, DT_F32, mx));

    double n = NAN, inf = INFINITY;
    double xs[25] = {1, 3, 3, 2, 0,       n, 9, n, 1, 1,       1, n, 5, n, 2,
                     -inf, -inf, -inf, -inf, -inf,             0, 1, 2, 7, 7};
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){5, 5}, xs), want[2] = {0}, out[2] = {0};
    if (interp(g, &in, NULL, want) && eval(p, &in, NULL, out)) {
        for (int r = 0; r < 5; r++) {
            CHECK(check_at(&out[0], r) == check_at(&want[0], r));
            CHECK_NEAR(check_at(&out[1], r), check_at(&want[1], r), 0);
        }
        CHECK_RESULT(&out[0], "i64[5]", ((double[]){1, 0, 1, 0, 3}), 5, 0);
        CHECK_RESULT(&out[1], "f32[5]", ((double[]){3, n, n, -inf, 7}), 5, 0);
    }
    tensor_free(&want[0]);
    tensor_free(&want[1]);
    tensor_free(&in);
    program_free(p);
    graph_free(g);

    /* i32 rows of negatives: max is not 0; of positives: min is not 0 */
    g = graph_new("imax");
    b = builder_make(g, &err);
    Type ti = ty(DT_I32, 2, (int64_t[]){2, 3});
    x = b_input(&b, "x", &ti);
    b_output(&b, b_reduce(&b, OP_MAX, x, 1, &one, false), "mx");
    b_output(&b, b_reduce(&b, OP_MIN, x, 1, &one, false), "mn");
    p = prog_new(g);
    bx = add_buf(p, "x", BUF_INPUT, 0, DT_I32, dim_static(6));
    bm = add_buf(p, "mx", BUF_OUTPUT, 0, DT_I32, dim_static(2));
    int bn = add_buf(p, "mn", BUF_OUTPUT, 1, DT_I32, dim_static(2));
    kb = add_kernel(p, "k0_minmax", 1, 1, (Dim[]){dim_static(2), dim_static(3)});
    xv = x_load(&kb, DT_I32, bx, x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){3, 1}, 0));
    kb_phase(&kb);
    mx = st_reduce(&kb, OP_MAX, xv, DT_I32, 0);
    int mn = st_reduce(&kb, OP_MIN, x_un(&kb, OP_NEG, DT_I32, xv), DT_I32, 0);
    kb_after(&kb);
    st_store(&kb, bm, x_var(&kb, 0), x_acc(&kb, DT_I32, mx));
    st_store(&kb, bn, x_var(&kb, 0), x_acc(&kb, DT_I32, mn));
    in = check_tensor(DT_I32, 2, (int64_t[]){2, 3}, (double[]){-5, -3, -9, -1, -7, -2});
    if (eval(p, &in, NULL, out)) {
        CHECK_RESULT(&out[0], "i32[2]", ((double[]){-3, -1}), 2, 0);
        CHECK_RESULT(&out[1], "i32[2]", ((double[]){3, 1}), 2, 0);
    }
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* A full reduction (nouter == 0) of f32[3, 4] to scalars: the sum, the row of the first
 * greatest value (argmax along v0 of a two-variable walk), and the accumulator read back
 * rounded to its f32 dtype (the f64 sum carries a 2^-30 that f32 cannot hold). */
static void test_scalar_reduce(void)
{
    Err err = {0};
    Graph *g = graph_new("total");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){3, 4});
    int x = b_input(&b, "x", &tx);
    b_output(&b, b_reduce(&b, OP_SUM, x, 0, NULL, false), "sum");
    b_output(&b, b_reduce(&b, OP_SUM, x, 0, NULL, false), "rest");
    b_output(&b, b_argmax(&b, b_reshape(&b, x, &(Type){DT_F32, 1, {{12, 0, 0}}}), 0, false), "row");
    CHECK(err_ok(&err));
    double xs[12] = {1, 0x1p-30, 2, 3, 4, 5, 6, 7.5, 8, 9.5, 3, 2};
    double total = 0;
    for (int i = 0; i < 12; i++)
        total += xs[i];
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(12));
    int bs = add_buf(p, "sum", BUF_OUTPUT, 0, DT_F32, dim_static(1));
    int br = add_buf(p, "rest", BUF_OUTPUT, 1, DT_F32, dim_static(1));
    int bw = add_buf(p, "row", BUF_OUTPUT, 2, DT_I64, dim_static(1));
    KB kb = add_kernel(p, "k0_total", 0, 2, (Dim[]){dim_static(3), dim_static(4)});
    int xv = x_load(&kb, DT_F32, bx, x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){4, 1}, 0));
    kb_phase(&kb);
    int s = st_reduce(&kb, OP_SUM, xv, DT_F32, 0);
    int a = st_reduce(&kb, OP_ARGMAX, xv, DT_I64, 0);
    kb_after(&kb);
    int zero = x_int(&kb, 0), acc = x_acc(&kb, DT_F32, s);
    st_store(&kb, bs, zero, acc);
    st_store(&kb, br, zero, x_bin(&kb, OP_SUB, DT_F32, acc, x_f(&kb, DT_F32, (float)total)));
    st_store(&kb, bw, zero, x_acc(&kb, DT_I64, a));
    Tensor in = check_tensor(DT_F32, 2, (int64_t[]){3, 4}, xs), out[3];
    if (eval(p, &in, NULL, out)) {
        CHECK_RESULT(&out[0], "f32[]", ((double[]){(float)total}), 1, 0);
        CHECK_RESULT(&out[1], "f32[]", ((double[]){0}), 1, 0);
        CHECK_RESULT(&out[2], "i64[]", ((double[]){2}), 1, 0);
    }
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* ---------------------------------------------------------------- values and dtypes */

/* rand: element i of stream (7, 100) at rng step s is philox_uniform_step(7, s, 100, i),
 * whatever the loop; step 0 is philox_uniform's (what coil drew before steps). */
static void test_rand(void)
{
    Err err = {0};
    Graph *g = graph_new("rand");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 2, (int64_t[]){2, 5});
    b_output(&b, b_rand(&b, &tx, 7, 100), "r");
    Program *p = prog_new(g);
    int br = add_buf(p, "r", BUF_OUTPUT, 0, DT_F32, dim_static(10));
    KB kb = add_kernel(p, "k0_rand", 2, 0, (Dim[]){dim_static(2), dim_static(5)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){5, 1}, 0);
    int step = x_sym(&kb, COIL_SYM_RNG_STEP);
    st_store(&kb, br, at, kx(&kb, (Lx){LX_RAND, DT_F32, 0, at, step, -1, 7, 100, 0}));
    static const uint64_t steps[2] = {0, 0x100000003ull};
    for (int s = 0; s < 2; s++) {
        Tensor out;
        Err e = {0};
        bool ok = loop_eval_at(p, steps[s], NULL, NULL, &out, &e);
        CHECK(ok);
        if (!ok)
            continue;
        double want[10];
        for (int i = 0; i < 10; i++)
            want[i] = s == 0 ? philox_uniform(7, 100, (uint64_t)i)
                             : philox_uniform_step(7, steps[s], 100, (uint64_t)i);
        CHECK(want[0] != want[1]);
        CHECK(s == 0 || want[0] != philox_uniform(7, 100, 0));
        CHECK_RESULT(&out, "f32[2,5]", want, 10, 0);
    }
    program_free(p);
    graph_free(g);
}

/* f32 to i32 and i8 truncates (and wraps; NaN gives 0), to bool tests != 0; a cast's
 * result is rounded where it is computed, not only when stored. */
static void test_casts(void)
{
    Err err = {0};
    Graph *g = graph_new("casts");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 1, (int64_t[]){7});
    int x = b_input(&b, "x", &tx);
    static const DType to[3] = {DT_I32, DT_I8, DT_BOOL};
    for (int i = 0; i < 3; i++)
        b_output(&b, b_cast(&b, x, to[i]), NULL);
    b_output(&b, x, "back");
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(7));
    KB kb = add_kernel(p, "k0_cast", 1, 0, (Dim[]){dim_static(7)});
    int at = x_var(&kb, 0), xv = x_load(&kb, DT_F32, bx, at);
    for (int i = 0; i < 3; i++)
        st_store(&kb, add_buf(p, "out", BUF_OUTPUT, i, to[i], dim_static(7)), at,
                 x_cast(&kb, to[i], xv));
    st_store(&kb, add_buf(p, "back", BUF_OUTPUT, 3, DT_F32, dim_static(7)), at,
             x_cast(&kb, DT_F32, x_cast(&kb, DT_I8, xv)));
    Tensor in = check_tensor(DT_F32, 1, (int64_t[]){7}, (double[]){-2.7, -0.5, 0, 0.5, 2.7, 300, NAN});
    Tensor out[4];
    if (eval(p, &in, NULL, out)) {
        CHECK_RESULT(&out[3], "f32[7]", ((double[]){-2, 0, 0, 0, 2, 44, 0}), 7, 0);
        CHECK_RESULT(&out[0], "i32[7]", ((double[]){-2, 0, 0, 0, 2, 300, 0}), 7, 0);
        CHECK_RESULT(&out[1], "i8[7]", ((double[]){-2, 0, 0, 0, 2, 44, 0}), 7, 0);
        CHECK_RESULT(&out[2], "bool[7]", ((double[]){1, 1, 0, 1, 1, 1, 1}), 7, 0);
    }
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* Stores round to f16 and bf16 (to nearest even, overflow to inf); an f16 expression
 * rounds each result: 1 + 2^-11 ties down to 1, 1 + 3 * 2^-11 up to 1 + 2^-9. */
static void test_half_stores(void)
{
    Err err = {0};
    Graph *g = graph_new("half");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 1, (int64_t[]){5});
    int x = b_input(&b, "x", &tx);
    b_output(&b, b_cast(&b, x, DT_F16), "h");
    b_output(&b, b_cast(&b, x, DT_BF16), "bh");
    b_output(&b, x, "chain");
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(5));
    int bh = add_buf(p, "h", BUF_OUTPUT, 0, DT_F16, dim_static(5));
    int bb = add_buf(p, "bh", BUF_OUTPUT, 1, DT_BF16, dim_static(5));
    int bc = add_buf(p, "chain", BUF_OUTPUT, 2, DT_F32, dim_static(5));
    KB kb = add_kernel(p, "k0_half", 1, 0, (Dim[]){dim_static(5)});
    int at = x_var(&kb, 0), xv = x_load(&kb, DT_F32, bx, at);
    st_store(&kb, bh, at, xv);
    st_store(&kb, bb, at, xv);
    int h = x_bin(&kb, OP_ADD, DT_F16, x_cast(&kb, DT_F16, xv), x_f(&kb, DT_F16, 0x1p-11));
    st_store(&kb, bc, at, h);
    Tensor in = check_tensor(DT_F32, 1, (int64_t[]){5}, (double[]){0.1, 1.0 / 3, 70000, 1, 1 + 0x1p-10});
    Tensor out[3];
    if (eval(p, &in, NULL, out)) {
        CHECK_RESULT(&out[0], "f16[5]", ((double[]){0.0999755859375, 0.333251953125, INFINITY, 1, 1 + 0x1p-10}), 5, 0);
        CHECK_RESULT(&out[1], "bf16[5]", ((double[]){0.10009765625, 0.333984375, 70144, 1, 1}), 5, 0);
        CHECK_RESULT(&out[2], "f32[5]", ((double[]){0.1004638671875, 0.333740234375, INFINITY, 1, 1 + 0x1p-9}), 5, 0);
    }
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* x: f32[B, 3]; y = x * 2 + B, B bound from the input's shape at each run. */
static void test_symbolic(void)
{
    Err err = {0};
    Graph *g = graph_new("sym");
    Builder b = builder_make(g, &err);
    int B = graph_sym(g, "B", 1);
    Dim bd = {1, 1u << B, 0}, b3 = {3, 1u << B, 0};
    Type tx = {DT_F32, 2, {bd, {3, 0, 0}}};
    b_output(&b, b_input(&b, "x", &tx), "y");
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, b3);
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, b3);
    KB kb = add_kernel(p, "k0_sym", 2, 0, (Dim[]){bd, dim_static(3)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){3, 1}, 0);
    int v = x_bin(&kb, OP_MUL, DT_F32, x_load(&kb, DT_F32, bx, at), x_f(&kb, DT_F32, 2));
    st_store(&kb, by, at, x_bin(&kb, OP_ADD, DT_F32, v, x_cast(&kb, DT_F32, x_sym(&kb, B))));
    for (int64_t batch = 5; batch >= 2; batch -= 3) {
        double xs[15], want[15];
        for (int i = 0; i < batch * 3; i++) {
            xs[i] = i * 0.5 - 1;
            want[i] = xs[i] * 2 + (double)batch;
        }
        Tensor in = check_tensor(DT_F32, 2, (int64_t[]){batch, 3}, xs), out;
        char shape[32];
        snprintf(shape, sizeof shape, "f32[%lld,3]", (long long)batch);
        if (eval(p, &in, NULL, &out))
            CHECK_RESULT(&out, shape, want, batch * 3, 0);
        tensor_free(&in);
    }
    program_free(p);
    graph_free(g);
}

/* ---------------------------------------------------------------- GEMM */

/* y = relu(x @ transpose(w) + bias), x: f32[3, 2, 3, 4], w: f32[2, 5, 4] broadcast along
 * x's first batch dim (batch stride 0) and transposed (row stride 1, column stride 4);
 * the bias and relu are the epilogue kernel, reading C through load epi_load. */
static Graph *gemm_graph(void)
{
    Err err = {0};
    Graph *g = graph_new("gemm");
    Builder b = builder_make(g, &err);
    Type tx = ty(DT_F32, 4, (int64_t[]){3, 2, 3, 4}), tw = ty(DT_F32, 3, (int64_t[]){2, 5, 4});
    Type tb = ty(DT_F32, 1, (int64_t[]){5});
    int x = b_input(&b, "x", &tx), w = b_param(&b, "w", &tw, NULL), bias = b_param(&b, "bias", &tb, NULL);
    int mm = b_matmul(&b, x, b_transpose(&b, w, 3, (int64_t[]){0, 2, 1}));
    b_output(&b, b_unary(&b, OP_RELU, b_binary(&b, OP_ADD, mm, bias)), "y");
    CHECK(err_ok(&err));
    return g;
}

static Program *gemm_program(const Graph *g)
{
    Program *p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(72));
    int bw = add_buf(p, "w", BUF_PARAM, 0, DT_F32, dim_static(40));
    int bb = add_buf(p, "bias", BUF_PARAM, 1, DT_F32, dim_static(5));
    int bc = add_buf(p, "t3", BUF_TEMP, 0, DT_F32, dim_static(90));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(90));
    KB kb = new_kernel(p, "k0_bias_relu", 2, 0, (Dim[]){dim_static(18), dim_static(5)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){5, 1}, 0);
    int c = x_load(&kb, DT_F32, bc, at);
    int v = x_bin(&kb, OP_ADD, DT_F32, c, x_load(&kb, DT_F32, bb, x_var(&kb, 1)));
    st_store(&kb, by, at, x_un(&kb, OP_RELU, DT_F32, v));
    Gemm gm = {.nbatch = 2, .batch = {dim_static(3), dim_static(2)}, .m = dim_static(3),
               .n = dim_static(5), .k = dim_static(4), .epilogue = 0, .epi_load = c};
    gm.a = (GemmOperand){bx, dim_static(0), {dim_static(24), dim_static(12)}, dim_static(4), dim_static(1)};
    gm.b = (GemmOperand){bw, dim_static(0), {dim_static(0), dim_static(20)}, dim_static(1), dim_static(4)};
    gm.c = (GemmOperand){bc, dim_static(0), {dim_static(30), dim_static(15)}, dim_static(5), dim_static(1)};
    p->step[p->nstep++] = (Step){.kind = STEP_GEMM, .gemm = gm};
    return p;
}

static void test_gemm(void)
{
    Graph *g = gemm_graph();
    Program *p = gemm_program(g);
    double xs[72], ws[40], bs[5] = {0.5, -1, 2, 0, -30};
    for (int i = 0; i < 72; i++)
        xs[i] = (i % 11) * 0.25 - 1;
    for (int i = 0; i < 40; i++)
        ws[i] = (i % 7) * 0.5 - 1.25 + (i >= 20 ? 3 : 0); /* the two w batches differ */
    Tensor in = check_tensor(DT_F32, 4, (int64_t[]){3, 2, 3, 4}, xs);
    Tensor ps[2] = {check_tensor(DT_F32, 3, (int64_t[]){2, 5, 4}, ws),
                    check_tensor(DT_F32, 1, (int64_t[]){5}, bs)};
    Tensor want = {0}, got = {0};
    if (interp(g, &in, ps, &want) && eval(p, &in, ps, &got)) {
        CHECK_SHAPE(&got, "f32[3,2,3,5]");
        int positive = 0;
        for (int i = 0; i < 90; i++) {
            CHECK_NEAR(check_at(&got, i), check_at(&want, i), 1e-6);
            positive += check_at(&got, i) > 0;
        }
        CHECK(positive > 10 && positive < 90); /* relu clipped some, not all */
        /* one element by hand: batch (2, 1), row 2, column 3 */
        double dot = 0;
        for (int k = 0; k < 4; k++)
            dot += xs[60 + 2 * 4 + k] * ws[20 + 3 * 4 + k];
        CHECK_NEAR(check_at(&got, 75 + 2 * 5 + 3), fmax(0, dot + bs[3]), 1e-6);
    }
    tensor_free(&want);
    tensor_free(&got);
    tensor_free(&in);
    tensor_free(&ps[0]);
    tensor_free(&ps[1]);
    program_free(p);
    graph_free(g);
}

/* ---------------------------------------------------------------- KernelFn conventions */

/* loop_eval_kernel over [1, 3) of outer var 0 writes rows 1 and 2 and nothing else; a
 * kernel with no outer loops runs once for [0, 1) and not for an empty range. */
static void test_kernel_range(void)
{
    Program *p = prog_new(NULL);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(12));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(12));
    int bs = add_buf(p, "s", BUF_OUTPUT, 1, DT_F32, dim_static(1));
    KB kb = add_kernel(p, "k0_inc", 2, 0, (Dim[]){dim_static(4), dim_static(3)});
    int at = x_index(&kb, 2, (int[]){0, 1}, (int64_t[]){3, 1}, 0);
    st_store(&kb, by, at, x_bin(&kb, OP_ADD, DT_F32, x_load(&kb, DT_F32, bx, at), x_f(&kb, DT_F32, 1)));
    KB ks = add_kernel(p, "k1_sum", 0, 1, (Dim[]){dim_static(12)});
    kb_phase(&ks);
    int s = st_reduce(&ks, OP_SUM, x_load(&ks, DT_F32, bx, x_var(&ks, 0)), DT_F32, 0);
    kb_after(&ks);
    st_store(&ks, bs, x_int(&ks, 0), x_acc(&ks, DT_F32, s));

    float x[12], y[12], sum = -7;
    for (int i = 0; i < 12; i++) {
        x[i] = (float)i;
        y[i] = -7;
    }
    void *bufs[3] = {x, y, &sum};
    int64_t syms[COIL_MAX_SYMS] = {0};
    loop_eval_kernel(p, 0, bufs, syms, 1, 3);
    for (int i = 0; i < 12; i++)
        CHECK(y[i] == (i >= 3 && i < 9 ? (float)i + 1 : -7));
    loop_eval_kernel(p, 1, bufs, syms, 0, 0);
    CHECK(sum == -7);
    loop_eval_kernel(p, 1, bufs, syms, 0, 1);
    CHECK(sum == 66);
    program_free(p);
}

/* ---------------------------------------------------------------- errors */

static void check_fails(const Program *p, const Tensor *in, const Tensor *params, int nout,
                        const char *want)
{
    Err e = {0};
    Tensor out[4] = {0};
    CHECK(!loop_eval(p, in, params, out, &e));
    if (!strstr(e.msg, want)) {
        fprintf(stderr, "error '%s' does not say '%s'\n", e.msg, want);
        check_failures++;
    }
    for (int i = 0; i < nout; i++)
        CHECK(out[i].data == NULL); /* freed, or never allocated */
}

static void test_errors(void)
{
    Graph *g = gemm_graph();
    Program *p = gemm_program(g);
    Tensor in = check_tensor(DT_F32, 4, (int64_t[]){3, 2, 3, 5}, NULL);
    Tensor ps[2] = {check_tensor(DT_F32, 3, (int64_t[]){2, 5, 4}, NULL),
                    check_tensor(DT_F32, 1, (int64_t[]){5}, NULL)};
    check_fails(p, &in, ps, 1, "input 'x'");
    tensor_free(&in);
    in = check_tensor(DT_F32, 4, (int64_t[]){3, 2, 3, 4}, NULL);
    tensor_free(&ps[1]);
    ps[1] = check_tensor(DT_F16, 1, (int64_t[]){5}, NULL);
    check_fails(p, &in, ps, 1, "parameter 'bias'");
    tensor_free(&ps[1]);
    ps[1] = check_tensor(DT_F32, 1, (int64_t[]){5}, NULL);

    Tensor out = {0};
    CHECK(eval(p, &in, ps, &out)); /* the well-formed program runs */
    tensor_free(&out);
    p->step[0].gemm.a.offset = dim_static(1); /* A's last element is past x */
    check_fails(p, &in, ps, 1, "operand A reaches elements 1..72 of buffer 'x'");
    p->step[0].gemm.a.offset = dim_static(0);

    Kernel *k = &p->kernel[0];
    k->lx[3].a = 7; /* an operand after its user */
    check_fails(p, &in, ps, 1, "kernel 'k0_bias_relu': %e3 reads an expression");
    k->lx[3].a = 2;
    k->lx[0].i = 85; /* the indices' base: all but 5 of y's 90 stores fall past its end */
    check_fails(p, &in, ps, 1, "kernel 'k0_bias_relu': 85 stores fell outside");
    k->lx[0].i = 0;
    k->stmt[0].value = k->nlx; /* a statement naming no expression */
    check_fails(p, &in, ps, 1, "statement 0 is malformed");

    Program nog = *p;
    nog.graph = NULL;
    check_fails(&nog, &in, ps, 1, "no graph");
    tensor_free(&in);
    tensor_free(&ps[0]);
    tensor_free(&ps[1]);
    program_free(p);
    graph_free(g);

    /* an accumulator read in its own phase, before the walk has finished */
    g = graph_new("early");
    Builder b = builder_make(g, &(Err){0});
    Type tx = ty(DT_F32, 1, (int64_t[]){4});
    b_output(&b, b_input(&b, "x", &tx), "y");
    p = prog_new(g);
    int bx = add_buf(p, "x", BUF_INPUT, 0, DT_F32, dim_static(4));
    int by = add_buf(p, "y", BUF_OUTPUT, 0, DT_F32, dim_static(4));
    KB kb = add_kernel(p, "k0_early", 0, 1, (Dim[]){dim_static(4)});
    int at = x_var(&kb, 0);
    kb_phase(&kb);
    int s = st_reduce(&kb, OP_SUM, x_load(&kb, DT_F32, bx, at), DT_F32, 0);
    st_store(&kb, by, at, x_acc(&kb, DT_F32, s));
    in = check_tensor(DT_F32, 1, (int64_t[]){4}, NULL);
    check_fails(p, &in, NULL, 1, "accumulator of a reduction that is not done");
    tensor_free(&in);
    program_free(p);
    graph_free(g);
}

/* ---------------------------------------------------------------- printing */

static void check_has(const char *text, const char *want)
{
    if (!text || !strstr(text, want)) {
        fprintf(stderr, "loop_print output lacks '%s'\n", want);
        check_failures++;
    }
}

static void test_print(void)
{
    Graph *g = gemm_graph();
    Program *p = gemm_program(g);
    char *text = loop_print(p);
    static const char *const lines[] = {
        "program @gemm {\n",
        "  buf 0 x: input 0 f32[72]\n",
        "  buf 2 bias: param 1 f32[5]\n",
        "  buf 3 t3: temp f32[90] steps 0..0\n",
        "  step 0: gemm batch [3, 2] m 3 n 5 k 4\n",
        "    b: buf1 offset 0 batch_stride [0, 20] row_stride 1 col_stride 4\n",
        "    epilogue k0_bias_relu load %e9\n",
        "  kernel k0_bias_relu (group 0) outer [v0 < 18, v1 < 5] inner [] {\n",
        "    %e2 = var v0 : i64\n",
        "    %e3 = mul %e2, %e1 : i64\n",
        "    %e9 = load buf3[%e8] : f32\n",
        "    %e13 = relu %e12 : f32\n",
        "    after {\n      store buf4[%e8] = %e13\n    }\n  }\n}\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        check_has(text, lines[i]);
    free(text);
    program_free(p);
    graph_free(g);

    /* no graph: symbols print by their bit; phases, reductions and constants */
    static const double data[10] = {1, 0.5, 1e-5, 3, 4, 5, 6, 7, 8, 9};
    p = prog_new(NULL);
    add_buf(p, "c", BUF_CONST, 0, DT_F32, dim_static(10));
    p->buf[0].data = data;
    add_buf(p, "t1", BUF_TEMP, 0, DT_BF16, (Dim){4, 1u << 2, 0});
    KB kb = add_kernel(p, "k0_max", 1, 1, (Dim[]){{1, 1u << 2, 0}, dim_static(4)});
    kb_phase(&kb);
    int s = st_reduce(&kb, OP_ARGMAX, x_load(&kb, DT_F32, 0, x_var(&kb, 1)), DT_I64, 1);
    kb_after(&kb);
    st_store(&kb, 1, x_sym(&kb, 2), x_cast(&kb, DT_BF16, x_acc(&kb, DT_I64, s)));
    text = loop_print(p);
    static const char *const lines2[] = {
        "program {\n",
        "  buf 0 c: const f32[10] = [1, 0.5, 1e-05, 3, 4, 5, 6, 7, ...]\n",
        "  buf 1 t1: temp bf16[4*sym2] steps 0..0\n",
        "  step 0: kernel k0_max\n",
        "outer [v0 < sym2] inner [v1 < 4] {\n",
        "    phase 0 {\n      s0 = reduce argmax %e1 along v1 : i64\n    }\n",
        "    %e2 = acc s0 : i64\n",
        "    %e4 = sym sym2 : i64\n",
        "      store buf1[%e4] = %e3\n",
    };
    for (size_t i = 0; i < sizeof lines2 / sizeof *lines2; i++)
        check_has(text, lines2[i]);
    free(text);
    program_free(p);

    Program empty = {0};
    text = loop_print(&empty);
    CHECK_STR(text, "program {\n}\n");
    free(text);
}

int main(void)
{
    test_pointwise();
    test_transpose();
    test_softmax();
    test_layer_norm();
    test_argmax();
    test_scalar_reduce();
    test_rand();
    test_casts();
    test_half_stores();
    test_symbolic();
    test_gemm();
    test_kernel_range();
    test_errors();
    test_print();
    return check_status();
}
