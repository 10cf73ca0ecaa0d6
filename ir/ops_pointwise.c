/* ops_pointwise.c — elementwise ops: unary, binary and `where` with numpy broadcasting,
 * cast; their type rules, reference evaluation and exact f64 scalar semantics. */
#include <math.h>
#include <stdio.h>

#include "ops.h"

/* ---------------------------------------------------------------- type inference */

static const Dim static_one = {1, 0, 0};

/* Numpy broadcasting of one aligned dim pair; a symbolic dim meets only itself or 1. */
static bool broadcast_dim(Dim a, Dim b, Dim *out)
{
    if (dim_eq(a, b) || dim_eq(b, static_one))
        *out = a;
    else if (dim_eq(a, static_one))
        *out = b;
    else
        return false;
    return true;
}

static bool dim_differs(const Graph *g, const char *op, const Type *a, const Type *b, int axis,
                        Dim da, Dim db, Err *e)
{
    char ta[256], tb[256], sa[128], sb[128];
    err_set(e, ERR_INPUT, "%s: %s and %s: dimension %d differs (%s vs %s)", op,
            type_fmt(g, a, ta, sizeof ta), type_fmt(g, b, tb, sizeof tb), axis,
            dim_fmt(g, da, sa, sizeof sa), dim_fmt(g, db, sb, sizeof sb));
    return false;
}

/* Shapes are aligned at the right; the reported dimension indexes the result. */
bool broadcast_types(const Graph *g, const char *op, const Type *a, const Type *b, Type *out, Err *e)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    Type r = {.dt = a->dt, .rank = rank};
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        Dim da = ia >= 0 ? a->dim[ia] : static_one, db = ib >= 0 ? b->dim[ib] : static_one;
        if (!broadcast_dim(da, db, &r.dim[i]))
            return dim_differs(g, op, a, b, i, da, db, e);
    }
    *out = r;
    return true;
}

static bool same_dtype(const Graph *g, const char *op, const Type *a, const Type *b, Err *e)
{
    if (a->dt == b->dt)
        return true;
    char ta[256], tb[256];
    err_set(e, ERR_INPUT, "%s: %s and %s: dtypes differ (%s vs %s); insert a cast", op,
            type_fmt(g, a, ta, sizeof ta), type_fmt(g, b, tb, sizeof tb), dtype_info[a->dt].name,
            dtype_info[b->dt].name);
    return false;
}

static bool dtype_rejected(const Graph *g, const Node *n, const Type *t, const char *need, Err *e)
{
    char buf[256];
    err_set(e, ERR_INPUT, "%s: operand %s is not %s; cast it first", op_info[n->op].name,
            type_fmt(g, t, buf, sizeof buf), need);
    return false;
}

bool infer_unary(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (in[0].dt == DT_BOOL)
        return dtype_rejected(g, n, &in[0], "a numeric dtype", e);
    *out = in[0];
    return true;
}

bool infer_unary_float(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!dtype_info[in[0].dt].is_float)
        return dtype_rejected(g, n, &in[0], "a float dtype", e);
    *out = in[0];
    return true;
}

bool infer_binary(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const char *op = op_info[n->op].name;
    return same_dtype(g, op, &in[0], &in[1], e) && broadcast_types(g, op, &in[0], &in[1], out, e);
}

bool infer_compare(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!infer_binary(g, n, in, out, e))
        return false;
    out->dt = DT_BOOL;
    return true;
}

bool infer_where(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    const char *op = op_info[n->op].name;
    if (in[0].dt != DT_BOOL) {
        char buf[256];
        err_set(e, ERR_INPUT, "%s: the condition %s must be bool; compare or cast it first", op,
                type_fmt(g, &in[0], buf, sizeof buf));
        return false;
    }
    Type values; /* the two value operands first, so a mismatch names both as written */
    if (!same_dtype(g, op, &in[1], &in[2], e) ||
        !broadcast_types(g, op, &in[1], &in[2], &values, e) ||
        !broadcast_types(g, op, &in[0], &values, out, e))
        return false;
    out->dt = in[1].dt;
    return true;
}

/* The declared type in *out brings the new dtype; only the shape is checked. */
bool infer_cast(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    char ta[256], tb[256];
    if (in[0].rank != out->rank) {
        err_set(e, ERR_INPUT, "%s: %s and %s: ranks differ (%d vs %d); cast keeps the shape",
                op_info[n->op].name, type_fmt(g, &in[0], ta, sizeof ta),
                type_fmt(g, out, tb, sizeof tb), in[0].rank, out->rank);
        return false;
    }
    for (int i = 0; i < out->rank; i++)
        if (!dim_eq(in[0].dim[i], out->dim[i]))
            return dim_differs(g, op_info[n->op].name, &in[0], out, i, in[0].dim[i], out->dim[i], e);
    return true;
}

/* ---------------------------------------------------------------- evaluation */

int64_t broadcast_offset(const ITensor *t, int out_rank, const int64_t *idx)
{
    int64_t off = 0;
    for (int j = 0; j < t->rank; j++) {
        int64_t coord = t->shape[j] == 1 ? 0 : idx[out_rank - t->rank + j];
        off = off * t->shape[j] + coord;
    }
    return off;
}

/* Row-major successor of the multi-index idx within out's shape. */
static void index_next(int64_t *idx, const ITensor *out)
{
    for (int d = out->rank - 1; d >= 0; d--) {
        if (++idx[d] < out->shape[d])
            return;
        idx[d] = 0;
    }
}

/* Operands whose concrete shapes do not broadcast to out would be read out of bounds. */
static bool broadcast_fits(const Node *n, const ITensor *in, int nin, const ITensor *out, Err *e)
{
    for (int k = 0; k < nin; k++) {
        bool ok = in[k].rank <= out->rank;
        for (int j = 0; ok && j < in[k].rank; j++) {
            int64_t s = in[k].shape[j];
            ok = s == 1 || s == out->shape[out->rank - in[k].rank + j];
        }
        if (!ok) {
            err_set(e, ERR_INPUT, "%s: operand %d does not broadcast to the result shape",
                    op_info[n->op].name, k);
            return false;
        }
    }
    return true;
}

static bool counts_agree(const Node *n, const ITensor *in, const ITensor *out, Err *e)
{
    if (in[0].n == out->n)
        return true;
    err_set(e, ERR_INPUT, "%s: operand has %lld elements, the result %lld", op_info[n->op].name,
            (long long)in[0].n, (long long)out->n);
    return false;
}

bool eval_unary(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    if (!counts_agree(n, in, out, e))
        return false;
    double (*f)(double) = op_info[n->op].scalar1;
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = f(in[0].d[i]);
    return true;
}

bool eval_binary(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    if (!broadcast_fits(n, in, 2, out, e))
        return false;
    double (*f)(double, double) = op_info[n->op].scalar2;
    int64_t idx[COIL_MAX_RANK] = {0};
    for (int64_t i = 0; i < out->n; i++, index_next(idx, out))
        out->d[i] = f(in[0].d[broadcast_offset(&in[0], out->rank, idx)],
                      in[1].d[broadcast_offset(&in[1], out->rank, idx)]);
    return true;
}

bool eval_where(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    if (!broadcast_fits(n, in, 3, out, e))
        return false;
    int64_t idx[COIL_MAX_RANK] = {0};
    for (int64_t i = 0; i < out->n; i++, index_next(idx, out)) {
        const ITensor *pick = in[0].d[broadcast_offset(&in[0], out->rank, idx)] != 0 ? &in[1] : &in[2];
        out->d[i] = pick->d[broadcast_offset(pick, out->rank, idx)];
    }
    return true;
}

/* Same elements in the same order: the caller's rounding does a cast's work. */
bool eval_copy(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    if (!counts_agree(n, in, out, e))
        return false;
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = in[0].d[i];
    return true;
}

/* ---------------------------------------------------------------- scalar semantics (f64) */

double s_neg(double x) { return -x; }
double s_abs(double x) { return fabs(x); }
double s_exp(double x) { return exp(x); }
double s_log(double x) { return log(x); }
double s_sqrt(double x) { return sqrt(x); }
double s_rsqrt(double x) { return 1.0 / sqrt(x); }
double s_reciprocal(double x) { return 1.0 / x; }
double s_tanh(double x) { return tanh(x); }
double s_sin(double x) { return sin(x); }
double s_cos(double x) { return cos(x); }
double s_erf(double x) { return erf(x); }

/* exp only of a non-positive number, so neither tail overflows. */
double s_sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double z = exp(x);
    return z / (1.0 + z);
}

double s_relu(double x) { return x > 0 || isnan(x) ? x : 0.0; }
double s_silu(double x) { return x * s_sigmoid(x); }

/* 0.5 x (1 + erf(x/sqrt 2)), written with erfc so the negative tail keeps its digits. */
double s_gelu(double x) { return 0.5 * x * erfc(-x * M_SQRT1_2); }

/* 0.5 x (1 + tanh(u)) == x sigmoid(2u): the same value without cancellation for x << 0. */
double s_gelu_tanh(double x)
{
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x * s_sigmoid(2.0 * u);
}

double s_add(double a, double b) { return a + b; }
double s_sub(double a, double b) { return a - b; }
double s_mul(double a, double b) { return a * b; }
double s_div(double a, double b) { return a / b; }
double s_pow(double a, double b) { return pow(a, b); }

/* NaN wins, as in numpy's maximum/minimum (fmax/fmin would drop it). */
/* NaN wins; of two equal values (+0 and -0) max takes +0 and min -0, as IEEE 754-2019's
 * maximum/minimum do, so the ops are truly commutative and CSE may swap their operands. */
double s_maximum(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    return a == b ? (signbit(a) ? b : a) : a > b ? a : b;
}

double s_minimum(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    return a == b ? (signbit(a) ? a : b) : a < b ? a : b;
}

double s_eq(double a, double b) { return a == b; }
double s_ne(double a, double b) { return a != b; }
double s_lt(double a, double b) { return a < b; }
double s_le(double a, double b) { return a <= b; }
double s_gt(double a, double b) { return a > b; }
double s_ge(double a, double b) { return a >= b; }

/* index_check: the identity on integers that must index `bound` things (cross_entropy's
 * labels); a value outside [0, bound) is an error where it is evaluated, so a bad label
 * is reported, not silently matched to no class. */
bool infer_index_check(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    char ty[256];
    DType dt = in[0].dt;
    if (dt != DT_I8 && dt != DT_I32 && dt != DT_I64) {
        err_set(e, ERR_INPUT, "index_check: %s is not an integer tensor (i8, i32, i64)",
                type_fmt(g, &in[0], ty, sizeof ty));
        return false;
    }
    if (node_int(n, "bound") < 0) {
        err_set(e, ERR_INPUT, "index_check: bound %lld is negative", (long long)node_int(n, "bound"));
        return false;
    }
    *out = in[0];
    return true;
}

bool eval_index_check(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    int64_t bound = node_int(n, "bound");
    for (int64_t i = 0; i < in[0].n; i++) {
        double v = in[0].d[i];
        if (!(v >= 0 && v < (double)bound)) {
            err_set(e, ERR_INPUT, "index_check: element %lld is %.0f, outside [0, %lld)",
                    (long long)i, v, (long long)bound);
            return false;
        }
        out->d[i] = v;
    }
    return true;
}
