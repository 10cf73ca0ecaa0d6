/* onnx_ops.c — the ONNX op table: one row per op type with its converter onto coil's ops
 * (composites through their decompositions), and the converters for math, reductions,
 * normalizations and losses (data movement is onnx_shape.c's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COIL_HAVE_ONNX
#include "frontend/norm.h"
#include "frontend/onnx_int.h"
#include "frontend/window.h"

static DType dt_of(Cv *c, int id) { return cv_type(c, id).dt; }
static int scalar_like(Cv *c, double v, int like) { return cv_scalar(c, v, dt_of(c, like)); }

static bool need_float(Cv *c, int x)
{
    if (x >= 0 && !dtype_info[dt_of(c, x)].is_float)
        return cv_unsupported(c, "a %s operand (coil computes it on floats)",
                              dtype_info[dt_of(c, x)].name);
    return x >= 0;
}

/* ---------------------------------------------------------------- pointwise */

static bool conv_unary(Cv *c)
{
    c->out[0] = cv_un(c, c->row->op, cv_in(c, 0));
    return true;
}

static bool conv_binary(Cv *c)
{
    if (c->row->op == OP_EQ && (cv_shape_value(c, 0) || cv_shape_value(c, 1)))
        return cv_equal_shapes(c);
    c->out[0] = cv_bin(c, c->row->op, cv_in(c, 0), cv_in(c, 1));
    return true;
}

/* Pow's exponent may have another dtype than its base: it is cast to the base's. */
static bool conv_pow(Cv *c)
{
    int x = cv_in(c, 0), y = cv_in(c, 1);
    if (x < 0 || y < 0)
        return false;
    c->out[0] = cv_bin(c, OP_POW, x, cv_cast(c, y, dt_of(c, x)));
    return true;
}

/* Max, Min, Sum, Mean of any number of operands, broadcast together. */
static bool conv_variadic(Cv *c)
{
    int op = c->row->op == OP_MEAN ? OP_ADD : c->row->op;
    int acc = cv_in(c, 0);
    for (size_t i = 1; i < c->node->n_input && acc >= 0; i++)
        acc = cv_bin(c, op, acc, cv_in(c, i));
    if (c->row->op == OP_MEAN && c->node->n_input > 1)
        acc = cv_bin(c, OP_DIV, acc, scalar_like(c, (double)c->node->n_input, acc));
    c->out[0] = acc;
    return acc >= 0;
}

static bool conv_not(Cv *c)
{
    int x = cv_in(c, 0);
    c->out[0] = cv_bin(c, OP_EQ, x, cv_scalar(c, 0, DT_BOOL));
    return x >= 0;
}

/* And: where(a, b, false); Or: where(a, true, b); Xor: a != b. */
static bool conv_logic(Cv *c)
{
    int a = cv_in(c, 0), b = cv_in(c, 1);
    if (a < 0 || b < 0)
        return false;
    if (dt_of(c, a) != DT_BOOL || dt_of(c, b) != DT_BOOL)
        return cv_invalid(c, "operands must be bool");
    switch (c->row->op) {
    case OP_MUL: c->out[0] = cv_where(c, a, b, cv_scalar(c, 0, DT_BOOL)); break;
    case OP_ADD: c->out[0] = cv_where(c, a, cv_scalar(c, 1, DT_BOOL), b); break;
    default: c->out[0] = cv_bin(c, OP_NE, a, b); break;
    }
    return true;
}

static bool conv_where(Cv *c)
{
    if (cv_shape_value(c, 1) || cv_shape_value(c, 2))
        return cv_where_shapes(c);
    c->out[0] = cv_where(c, cv_in(c, 0), cv_in(c, 1), cv_in(c, 2));
    return true;
}

/* Clip: min(max(x, lo), hi), each bound optional: operands from opset 11 on, attributes
 * min and max before. */
static bool conv_clip(Cv *c)
{
    int x = cv_in(c, 0);
    if (x >= 0 && cv_has(c, 1))
        x = cv_bin(c, OP_MAXIMUM, x, cv_in(c, 1));
    if (x >= 0 && cv_has(c, 2))
        x = cv_bin(c, OP_MINIMUM, x, cv_in(c, 2));
    if (x >= 0 && cv_attr(c, "min"))
        x = cv_bin(c, OP_MAXIMUM, x, scalar_like(c, cv_float(c, "min", 0), x));
    if (x >= 0 && cv_attr(c, "max"))
        x = cv_bin(c, OP_MINIMUM, x, scalar_like(c, cv_float(c, "max", 0), x));
    c->out[0] = x;
    return x >= 0;
}

static bool conv_sign(Cv *c)
{
    int x = cv_in(c, 0), zero = scalar_like(c, 0, x);
    DType dt = dt_of(c, x);
    c->out[0] = cv_bin(c, OP_SUB, cv_cast(c, cv_bin(c, OP_GT, x, zero), dt),
                       cv_cast(c, cv_bin(c, OP_LT, x, zero), dt));
    return true;
}

static bool conv_floor(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    c->out[0] = cv_floor(c, x);
    return true;
}

static bool conv_ceil(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    c->out[0] = cv_un(c, OP_NEG, cv_floor(c, cv_un(c, OP_NEG, x)));
    return true;
}

/* Round half to even: floor(x + 0.5), less one where that lands on an odd number from
 * exactly half way. */
static bool conv_round(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    int half = scalar_like(c, 0.5, x), two = scalar_like(c, 2, x), one = scalar_like(c, 1, x);
    int r = cv_floor(c, cv_bin(c, OP_ADD, x, half));
    int tie = cv_bin(c, OP_EQ, cv_bin(c, OP_SUB, r, x), half);
    int odd = cv_bin(c, OP_NE, cv_bin(c, OP_SUB, r, cv_bin(c, OP_MUL, two, cv_floor(c, cv_bin(c, OP_DIV, r, two)))),
                     scalar_like(c, 0, x));
    int down = cv_where(c, tie, odd, cv_scalar(c, 0, DT_BOOL));
    c->out[0] = cv_where(c, down, cv_bin(c, OP_SUB, r, one), r);
    return true;
}

/* Mod: fmod=1 takes the dividend's sign (x - trunc(x/y)*y); fmod=0 (integers) the
 * divisor's, as Python's %. */
static bool conv_mod(Cv *c)
{
    int x = cv_in(c, 0), y = cv_in(c, 1);
    if (x < 0 || y < 0)
        return false;
    bool is_float = dtype_info[dt_of(c, x)].is_float;
    if (is_float && !cv_int(c, "fmod", 0))
        return cv_invalid(c, "fmod must be 1 for float operands");
    int q = cv_bin(c, OP_DIV, x, y); /* integer division truncates */
    if (is_float)
        q = cv_trunc(c, q);
    int r = cv_bin(c, OP_SUB, x, cv_bin(c, OP_MUL, q, y));
    if (!cv_int(c, "fmod", 0)) {
        int zero = scalar_like(c, 0, x);
        int differ = cv_bin(c, OP_NE, cv_bin(c, OP_LT, r, zero), cv_bin(c, OP_LT, y, zero));
        int fix = cv_where(c, cv_bin(c, OP_NE, r, zero), differ, cv_scalar(c, 0, DT_BOOL));
        r = cv_where(c, fix, cv_bin(c, OP_ADD, r, y), r);
    }
    c->out[0] = r;
    return true;
}

static bool conv_isnan(Cv *c)
{
    int x = cv_in(c, 0);
    c->out[0] = cv_bin(c, OP_NE, x, x);
    return x >= 0;
}

static bool conv_isinf(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    int pos = cv_bin(c, OP_EQ, x, scalar_like(c, INFINITY, x));
    int neg = cv_bin(c, OP_EQ, x, scalar_like(c, -INFINITY, x));
    int f = cv_scalar(c, 0, DT_BOOL);
    pos = cv_int(c, "detect_positive", 1) ? pos : f;
    neg = cv_int(c, "detect_negative", 1) ? neg : f;
    c->out[0] = cv_where(c, pos, cv_scalar(c, 1, DT_BOOL), neg);
    return true;
}

/* ---------------------------------------------------------------- activations */

typedef int (*Activation)(Cv *c, int x);

static int act_tan(Cv *c, int x) { return cv_bin(c, OP_DIV, cv_un(c, OP_SIN, x), cv_un(c, OP_COS, x)); }

static int exp_pair(Cv *c, int x, int op)
{
    int half = scalar_like(c, 0.5, x);
    return cv_bin(c, OP_MUL, half, cv_bin(c, op, cv_un(c, OP_EXP, x), cv_un(c, OP_EXP, cv_un(c, OP_NEG, x))));
}

static int act_sinh(Cv *c, int x) { return exp_pair(c, x, OP_SUB); }
static int act_cosh(Cv *c, int x) { return exp_pair(c, x, OP_ADD); }

static int act_asinh(Cv *c, int x)
{
    int r = cv_un(c, OP_SQRT, cv_bin(c, OP_ADD, cv_bin(c, OP_MUL, x, x), scalar_like(c, 1, x)));
    return cv_un(c, OP_LOG, cv_bin(c, OP_ADD, x, r));
}

static int act_acosh(Cv *c, int x)
{
    int r = cv_un(c, OP_SQRT, cv_bin(c, OP_SUB, cv_bin(c, OP_MUL, x, x), scalar_like(c, 1, x)));
    return cv_un(c, OP_LOG, cv_bin(c, OP_ADD, x, r));
}

static int act_atanh(Cv *c, int x)
{
    int one = scalar_like(c, 1, x);
    int q = cv_bin(c, OP_DIV, cv_bin(c, OP_ADD, one, x), cv_bin(c, OP_SUB, one, x));
    return cv_bin(c, OP_MUL, scalar_like(c, 0.5, x), cv_un(c, OP_LOG, q));
}

/* softplus(x) = max(x, 0) + log(1 + exp(-|x|)): no overflow for large x */
static int softplus(Cv *c, int x)
{
    int tail = cv_un(c, OP_EXP, cv_un(c, OP_NEG, cv_un(c, OP_ABS, x)));
    int lg = cv_un(c, OP_LOG, cv_bin(c, OP_ADD, scalar_like(c, 1, x), tail));
    return cv_bin(c, OP_ADD, cv_bin(c, OP_MAXIMUM, x, scalar_like(c, 0, x)), lg);
}

static int act_softplus(Cv *c, int x) { return softplus(c, x); }
static int act_mish(Cv *c, int x) { return cv_bin(c, OP_MUL, x, cv_un(c, OP_TANH, softplus(c, x))); }

static int act_softsign(Cv *c, int x)
{
    return cv_bin(c, OP_DIV, x, cv_bin(c, OP_ADD, scalar_like(c, 1, x), cv_un(c, OP_ABS, x)));
}

/* alpha * (exp(x) - 1) where x <= 0, else x */
static int elu(Cv *c, int x, double alpha)
{
    int neg = cv_bin(c, OP_MUL, scalar_like(c, alpha, x),
                     cv_bin(c, OP_SUB, cv_un(c, OP_EXP, x), scalar_like(c, 1, x)));
    return cv_where(c, cv_bin(c, OP_GT, x, scalar_like(c, 0, x)), x, neg);
}

static int act_elu(Cv *c, int x) { return elu(c, x, cv_float(c, "alpha", 1.0)); }

static int act_selu(Cv *c, int x)
{
    double alpha = cv_float(c, "alpha", 1.67326319217681884765625);
    double gamma = cv_float(c, "gamma", 1.05070102214813232421875);
    return cv_bin(c, OP_MUL, scalar_like(c, gamma, x), elu(c, x, alpha));
}

static int act_celu(Cv *c, int x)
{
    double alpha = cv_float(c, "alpha", 1.0);
    int scaled = elu(c, cv_bin(c, OP_DIV, x, scalar_like(c, alpha, x)), alpha);
    return cv_where(c, cv_bin(c, OP_GT, x, scalar_like(c, 0, x)), x, scaled);
}

static int act_leaky_relu(Cv *c, int x)
{
    int scaled = cv_bin(c, OP_MUL, x, scalar_like(c, cv_float(c, "alpha", 0.01), x));
    return cv_where(c, cv_bin(c, OP_LT, x, scalar_like(c, 0, x)), scaled, x);
}

static int act_thresholded_relu(Cv *c, int x)
{
    int keep = cv_bin(c, OP_GT, x, scalar_like(c, cv_float(c, "alpha", 1.0), x));
    return cv_where(c, keep, x, scalar_like(c, 0, x));
}

/* max(0, min(1, alpha * x + beta)) */
static int hard_sigmoid(Cv *c, int x, double alpha, double beta)
{
    int y = cv_bin(c, OP_ADD, cv_bin(c, OP_MUL, x, scalar_like(c, alpha, x)), scalar_like(c, beta, x));
    return cv_bin(c, OP_MAXIMUM, cv_bin(c, OP_MINIMUM, y, scalar_like(c, 1, x)), scalar_like(c, 0, x));
}

static int act_hard_sigmoid(Cv *c, int x)
{
    return hard_sigmoid(c, x, cv_float(c, "alpha", 0.2), cv_float(c, "beta", 0.5));
}

static int act_hard_swish(Cv *c, int x) { return cv_bin(c, OP_MUL, x, hard_sigmoid(c, x, 1.0 / 6, 0.5)); }

static int act_swish(Cv *c, int x)
{
    int ax = cv_bin(c, OP_MUL, x, scalar_like(c, cv_float(c, "alpha", 1.0), x));
    return cv_bin(c, OP_MUL, x, cv_un(c, OP_SIGMOID, ax));
}

static int act_shrink(Cv *c, int x)
{
    double lambd = cv_float(c, "lambd", 0.5), bias = cv_float(c, "bias", 0.0);
    int lo = cv_bin(c, OP_LT, x, scalar_like(c, -lambd, x)), hi = cv_bin(c, OP_GT, x, scalar_like(c, lambd, x));
    int up = cv_bin(c, OP_ADD, x, scalar_like(c, bias, x)), down = cv_bin(c, OP_SUB, x, scalar_like(c, bias, x));
    return cv_where(c, lo, up, cv_where(c, hi, down, scalar_like(c, 0, x)));
}

static int act_gelu(Cv *c, int x)
{
    char mode[16];
    const char *m = cv_str(c, "approximate", "none", mode, sizeof mode);
    if (strcmp(m, "none") && strcmp(m, "tanh")) {
        cv_unsupported(c, "approximate='%s'", m);
        return -1;
    }
    return cv_un(c, strcmp(m, "tanh") == 0 ? OP_GELU_TANH : OP_GELU, x);
}

static const struct {
    const char *name;
    Activation f;
} activations[] = {
    {"Tan", act_tan}, {"Sinh", act_sinh}, {"Cosh", act_cosh}, {"Asinh", act_asinh},
    {"Acosh", act_acosh}, {"Atanh", act_atanh}, {"Softplus", act_softplus}, {"Mish", act_mish},
    {"Softsign", act_softsign}, {"Elu", act_elu}, {"Selu", act_selu}, {"Celu", act_celu},
    {"LeakyRelu", act_leaky_relu}, {"ThresholdedRelu", act_thresholded_relu},
    {"HardSigmoid", act_hard_sigmoid}, {"HardSwish", act_hard_swish}, {"Swish", act_swish},
    {"Shrink", act_shrink}, {"Gelu", act_gelu},
};

/* The activations above, on float operands, found by the node's op type. */
static bool conv_activation(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (strcmp(activations[i].name, c->node->op_type) == 0) {
            c->out[0] = activations[i].f(c, x);
            return c->out[0] >= 0;
        }
    return cv_unsupported(c, "no activation of this name");
}

static bool conv_prelu(Cv *c)
{
    int x = cv_in(c, 0), slope = cv_in(c, 1);
    if (x < 0 || slope < 0)
        return false;
    int neg = cv_bin(c, OP_LT, x, scalar_like(c, 0, x));
    c->out[0] = cv_where(c, neg, cv_bin(c, OP_MUL, x, slope), x);
    return true;
}

/* ---------------------------------------------------------------- matrix products */

/* numpy's matmul: a 1-D operand is a row (left) or a column (right), dropped after. */
static bool conv_matmul(Cv *c)
{
    int a = cv_in(c, 0), b = cv_in(c, 1);
    if (a < 0 || b < 0)
        return false;
    Type ta = cv_type(c, a), tb = cv_type(c, b);
    if (ta.rank == 1)
        a = cv_reshape(c, a, 2, (Dim[]){dim_static(1), ta.dim[0]});
    if (tb.rank == 1)
        b = cv_reshape(c, b, 2, (Dim[]){tb.dim[0], dim_static(1)});
    int y = b_matmul(cv_b(c), a, b);
    if (y >= 0 && (ta.rank == 1 || tb.rank == 1)) {
        Type t = cv_type(c, y);
        Dim d[COIL_MAX_RANK];
        int r = 0;
        for (int i = 0; i < t.rank - 2; i++)
            d[r++] = t.dim[i];
        if (ta.rank != 1)
            d[r++] = t.dim[t.rank - 2];
        if (tb.rank != 1)
            d[r++] = t.dim[t.rank - 1];
        y = cv_reshape(c, y, r, d);
    }
    c->out[0] = y;
    return true;
}

static bool conv_gemm(Cv *c)
{
    static const int64_t swap[2] = {1, 0};
    int a = cv_in(c, 0), w = cv_in(c, 1);
    if (a < 0 || w < 0)
        return false;
    if (cv_int(c, "transA", 0))
        a = b_transpose(cv_b(c), a, 2, swap);
    if (cv_int(c, "transB", 0))
        w = b_transpose(cv_b(c), w, 2, swap);
    int y = b_matmul(cv_b(c), a, w);
    double alpha = cv_float(c, "alpha", 1.0), beta = cv_float(c, "beta", 1.0);
    if (alpha != 1.0)
        y = cv_bin(c, OP_MUL, y, scalar_like(c, alpha, a));
    if (cv_has(c, 2) && beta != 0.0) {
        int bias = cv_in(c, 2);
        if (beta != 1.0)
            bias = cv_bin(c, OP_MUL, bias, scalar_like(c, beta, a));
        y = cv_bin(c, OP_ADD, y, bias);
    }
    c->out[0] = y;
    return true;
}

/* ---------------------------------------------------------------- softmax */

/* The operand Softmax, LogSoftmax and Hardmax normalise along *axis: x itself from opset
 * 13 on (axis -1 by default); before, x flattened at `axis` (1 by default) into a matrix
 * whose rows are normalised. -1 with the node's error when axis is out of range. */
static int normalised_operand(Cv *c, int x, int *axis)
{
    Type t = cv_type(c, x);
    bool rows = c->o->opset < 13;
    if (!axis_norm(cv_int(c, "axis", rows ? 1 : -1), t.rank, axis))
        return cv_invalid(c, "axis is out of range"), -1;
    if (!rows || *axis == t.rank - 1)
        return x;
    int at = *axis;
    *axis = 1;
    return cv_flatten_at(c, x, at);
}

static bool conv_softmax(Cv *c)
{
    int x = cv_in(c, 0), axis;
    if (!need_float(c, x))
        return false;
    Type t = cv_type(c, x);
    int m = normalised_operand(c, x, &axis);
    if (m < 0)
        return false;
    Attr a = attr_int("axis", axis);
    int y = b_op(cv_b(c), c->row->op, &m, 1, &a, 1, NULL);
    c->out[0] = cv_reshape(c, y, t.rank, t.dim);
    return true;
}

/* Hardmax: 1 at the first maximum along axis, 0 elsewhere. */
static bool conv_hardmax(Cv *c)
{
    int x = cv_in(c, 0), axis;
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    int m = normalised_operand(c, x, &axis);
    if (m < 0)
        return false;
    Type it = cv_type(c, m);
    it.dt = DT_I64;
    int at = b_argmax(cv_b(c), m, axis, true);
    int y = cv_cast(c, cv_bin(c, OP_EQ, b_iota(cv_b(c), &it, axis), at), t.dt);
    c->out[0] = cv_reshape(c, y, t.rank, t.dim);
    return true;
}

/* ---------------------------------------------------------------- reductions */

/* A reduction's axes (opset 18's operand, else the attribute) and keepdims; *noop when
 * the axes are empty and noop_with_empty_axes says to return the operand. */
static bool reduce_axes(Cv *c, int x, int64_t *axes, int *n, bool *noop)
{
    int64_t raw[ONNX_MAX_LIST];
    if (!cv_ints(c, 1, "axes", raw, n))
        return false;
    *noop = *n <= 0 && cv_int(c, "noop_with_empty_axes", 0);
    int rank = cv_type(c, x).rank;
    if (*n <= 0) { /* every axis */
        *n = rank;
        for (int i = 0; i < rank; i++)
            axes[i] = i;
        return true;
    }
    return cv_axes(c, raw, *n, rank, axes);
}

/* The identity of a reduction over nothing: onnx's max of an empty set is -inf. */
static double empty_reduction(int op, DType dt)
{
    bool f = dtype_info[dt].is_float;
    double big = f ? INFINITY : dt == DT_I8 ? 127 : dt == DT_I32 ? 2147483647.0 : 0x1p63 - 1024;
    return op == OP_MAX ? -big - (f ? 0 : 1) : op == OP_MIN ? big : op == OP_MEAN ? NAN : 0;
}

static int reduce(Cv *c, int op, int x, const int64_t *axes, int n, bool keep)
{
    if (n == 0)
        return x; /* a scalar: nothing to reduce */
    Type t = cv_type(c, x), r = t;
    bool empty = false;
    r.rank = 0;
    for (int i = 0, k = 0; i < t.rank; i++) {
        bool reduced = k < n && axes[k] == i;
        empty = empty || (reduced && dim_eq(t.dim[i], dim_static(0)));
        if (!reduced || keep)
            r.dim[r.rank++] = reduced ? dim_static(1) : t.dim[i];
        k += reduced;
    }
    if (empty) /* coil reduces only over elements; nothing to read here anyway */
        return b_full(cv_b(c), empty_reduction(op, t.dt), &r);
    return b_reduce(cv_b(c), op, x, n, axes, keep);
}

/* ReduceProd: the reduced axes multiplied out one slice at a time (exact, every dtype). */
static int reduce_prod(Cv *c, int x, const int64_t *axes, int n, bool keep)
{
    for (int i = n - 1; i >= 0 && x >= 0; i--) {
        Type t = cv_type(c, x);
        int a = (int)axes[i];
        if (!dim_is_static(t.dim[a]) || t.dim[a].k > 64) {
            cv_unsupported(c, "a product over an axis of more than 64 elements or symbolic");
            return -1;
        }
        int64_t len = t.dim[a].k;
        int acc = len ? b_slice(cv_b(c), x, a, 0, 1, 1) : -1;
        for (int64_t j = 1; j < len; j++)
            acc = cv_bin(c, OP_MUL, acc, b_slice(cv_b(c), x, a, j, j + 1, 1));
        if (!len) {
            t.dim[a] = dim_static(1);
            acc = b_full(cv_b(c), 1, &t);
        }
        if (!keep) {
            Dim d[COIL_MAX_RANK];
            int r = 0;
            for (int k = 0; k < t.rank; k++)
                if (k != a)
                    d[r++] = t.dim[k];
            acc = cv_reshape(c, acc, r, d);
        }
        x = acc;
    }
    return x;
}

/* ReduceSum/Mean/Max/Min straight, the others through them: L1 = sum |x|, L2 = sqrt of
 * sum x², SumSquare, LogSum = log sum, LogSumExp = max + log sum exp(x - max). */
static bool conv_reduce(Cv *c)
{
    int x = cv_in(c, 0), n;
    int64_t axes[COIL_MAX_RANK];
    bool noop, keep = cv_int(c, "keepdims", 1) != 0;
    if (x < 0 || !reduce_axes(c, x, axes, &n, &noop))
        return false;
    const char *op = c->node->op_type;
    if (noop) {
        c->out[0] = x;
        if (strcmp(op, "ReduceL1") == 0)
            c->out[0] = cv_un(c, OP_ABS, x);
        else if (strcmp(op, "ReduceSumSquare") == 0)
            c->out[0] = cv_bin(c, OP_MUL, x, x);
        return true;
    }
    if (strcmp(op, "ReduceL1") == 0)
        c->out[0] = reduce(c, OP_SUM, cv_un(c, OP_ABS, x), axes, n, keep);
    else if (strcmp(op, "ReduceL2") == 0)
        c->out[0] = need_float(c, x) ? cv_un(c, OP_SQRT, reduce(c, OP_SUM, cv_bin(c, OP_MUL, x, x), axes, n, keep)) : -1;
    else if (strcmp(op, "ReduceSumSquare") == 0)
        c->out[0] = reduce(c, OP_SUM, cv_bin(c, OP_MUL, x, x), axes, n, keep);
    else if (strcmp(op, "ReduceProd") == 0)
        c->out[0] = reduce_prod(c, x, axes, n, keep);
    else if (strcmp(op, "ReduceLogSum") == 0)
        c->out[0] = need_float(c, x) ? cv_un(c, OP_LOG, reduce(c, OP_SUM, x, axes, n, keep)) : -1;
    else if (strcmp(op, "ReduceLogSumExp") == 0) {
        if (!need_float(c, x))
            return false;
        int m = reduce(c, OP_MAX, x, axes, n, true);
        if (dim_eq(type_numel(b_type(cv_b(c), x), &(bool){false}), dim_static(0))) {
            c->out[0] = reduce(c, OP_MAX, x, axes, n, keep); /* log(0) = -inf */
            return true;
        }
        int finite = cv_bin(c, OP_EQ, cv_bin(c, OP_SUB, m, m), scalar_like(c, 0, x));
        m = cv_where(c, finite, m, scalar_like(c, 0, x)); /* all -inf: exp(-inf - 0) = 0 */
        int s = reduce(c, OP_SUM, cv_un(c, OP_EXP, cv_bin(c, OP_SUB, x, m)), axes, n, keep);
        int mk = keep ? m : reduce(c, OP_MAX, m, axes, n, false);
        c->out[0] = cv_bin(c, OP_ADD, cv_un(c, OP_LOG, s), mk);
    } else
        c->out[0] = reduce(c, c->row->op, x, axes, n, keep);
    return c->out[0] >= 0;
}

/* ArgMax, and ArgMin as the argmax of -x; select_last_index reverses the axis first. */
static bool conv_argmax(Cv *c)
{
    int x = cv_in(c, 0), axis;
    if (x < 0)
        return false;
    Type t = cv_type(c, x);
    if (!axis_norm(cv_int(c, "axis", 0), t.rank, &axis))
        return cv_invalid(c, "axis is out of range");
    if (c->row->op == OP_MIN) {
        if (t.dt == DT_BOOL)
            x = cv_cast(c, x, DT_I32);
        x = cv_un(c, OP_NEG, x);
    }
    bool last = cv_int(c, "select_last_index", 0) != 0, keep = cv_int(c, "keepdims", 1) != 0;
    if (last)
        x = cv_reverse(c, x, axis);
    int at = b_argmax(cv_b(c), x, axis, keep);
    if (last && at >= 0) /* index i of the reversed axis is n-1-i of the original */
        at = cv_bin(c, OP_SUB, cv_scalar(c, (double)(t.dim[axis].k - 1), DT_I64), at);
    c->out[0] = at;
    return at >= 0;
}

/* CumSum along a constant axis: x[..., i] summed over the j it covers, as a masked sum
 * over a new axis (exclusive and reverse pick the mask). */
static bool conv_cumsum(Cv *c)
{
    int x = cv_in(c, 0), axis;
    int64_t numel;
    const double *ax = cv_const(c, 1, &numel);
    if (x < 0)
        return false;
    if (!ax)
        return cv_need_const(c, 1);
    if (numel != 1)
        return cv_invalid(c, "the axis must be a scalar");
    Type t = cv_type(c, x);
    if (!axis_norm((int64_t)ax[0], t.rank, &axis))
        return cv_invalid(c, "axis %lld is out of range", (long long)ax[0]);
    if (!dim_is_static(t.dim[axis]) || t.rank + 1 > COIL_MAX_RANK)
        return cv_unsupported(c, "a symbolic axis or rank %d", t.rank);
    int64_t n = t.dim[axis].k;
    bool exclusive = cv_int(c, "exclusive", 0), reverse = cv_int(c, "reverse", 0);
    /* mask[j, i]: source j counts toward result i */
    Type mt = type_make(DT_I64, 2, (int64_t[]){n, n});
    int j = b_iota(cv_b(c), &mt, 0), i = b_iota(cv_b(c), &mt, 1);
    int op = reverse ? (exclusive ? OP_GT : OP_GE) : (exclusive ? OP_LT : OP_LE);
    int mask = cv_bin(c, op, j, i);
    int last = cv_to_last(c, x, axis); /* [..., n] */
    Type lt = cv_type(c, last);
    Dim d[COIL_MAX_RANK];
    memcpy(d, lt.dim, sizeof(Dim) * (size_t)lt.rank);
    d[lt.rank] = dim_static(1); /* [..., n(j), 1] */
    int col = cv_reshape(c, last, lt.rank + 1, d);
    int picked = cv_where(c, mask, col, scalar_like(c, 0, x)); /* [..., n(j), n(i)] */
    int64_t sum_axis = lt.rank - 1;
    int s = b_reduce(cv_b(c), OP_SUM, picked, 1, &sum_axis, false);
    c->out[0] = cv_from_last(c, s, axis);
    return true;
}

/* ---------------------------------------------------------------- normalization */

/* stash_type=1 (the default) computes in f32: a half-precision operand is widened. */
static int stash(Cv *c, int x)
{
    DType dt = dt_of(c, x);
    return cv_int(c, "stash_type", 1) == 1 && (dt == DT_F16 || dt == DT_BF16) ? cv_cast(c, x, DT_F32) : x;
}

static bool conv_layer_norm(Cv *c)
{
    int x = cv_in(c, 0), axis;
    if (!need_float(c, x))
        return false;
    Type t = cv_type(c, x);
    if (!axis_norm(cv_int(c, "axis", -1), t.rank, &axis))
        return cv_invalid(c, "axis is out of range");
    double eps = cv_float(c, "epsilon", 1e-5);
    int scale = cv_in(c, 1), bias = cv_has(c, 2) ? cv_in(c, 2) : -1;
    bool extra = c->node->n_output > 1;
    Type st = cv_type(c, scale);
    if (!extra && axis == t.rank - 1 && st.rank == 1 && dt_of(c, scale) == t.dt &&
        (bias < 0 || type_eq(b_type(cv_b(c), bias), &st))) {
        int in[3] = {x, scale, bias};
        Attr a = attr_float("eps", eps);
        c->out[0] = b_op(cv_b(c), OP_LAYER_NORM, in, bias < 0 ? 2 : 3, &a, 1, NULL);
        return true;
    }
    int64_t axes[COIL_MAX_RANK];
    int n = 0;
    for (int i = axis; i < t.rank; i++)
        axes[n++] = i;
    int mean, inv, y = norm_moments(cv_b(c), stash(c, x), axes, n, eps, &mean, &inv);
    y = cv_bin(c, OP_MUL, cv_cast(c, y, t.dt), scale);
    if (bias >= 0)
        y = cv_bin(c, OP_ADD, y, bias);
    c->out[0] = y, c->out[1] = mean, c->out[2] = inv;
    return true;
}

static bool conv_rms_norm(Cv *c)
{
    int x = cv_in(c, 0), axis;
    if (!need_float(c, x))
        return false;
    Type t = cv_type(c, x);
    if (!axis_norm(cv_int(c, "axis", -1), t.rank, &axis))
        return cv_invalid(c, "axis is out of range");
    int64_t axes[COIL_MAX_RANK];
    int n = 0;
    for (int i = axis; i < t.rank; i++)
        axes[n++] = i;
    int xs = stash(c, x);
    int ms = b_reduce(cv_b(c), OP_MEAN, cv_bin(c, OP_MUL, xs, xs), n, axes, true);
    int r = cv_un(c, OP_RSQRT, cv_bin(c, OP_ADD, ms, scalar_like(c, cv_float(c, "epsilon", 1e-5), xs)));
    c->out[0] = cv_bin(c, OP_MUL, cv_cast(c, cv_bin(c, OP_MUL, xs, r), t.dt), cv_in(c, 1));
    return true;
}

/* x[N, C, ...]: a per-channel vector v[C] shaped [C, 1, ...] to broadcast against it. */
static int per_channel(Cv *c, int v, int rank)
{
    Type t = cv_type(c, v);
    Dim d[COIL_MAX_RANK];
    d[0] = t.rank ? t.dim[0] : dim_static(1);
    for (int i = 1; i < rank - 1; i++)
        d[i] = dim_static(1);
    return cv_reshape(c, v, rank > 1 ? rank - 1 : 1, d);
}

/* BatchNormalization: in inference the running statistics; in training mode the batch's
 * own (over every axis but the channels), and the running ones updated as results. */
static bool conv_batch_norm(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    if (!cv_int(c, "spatial", 1)) /* opset 7's per-element statistics ([C, H, W]) */
        return cv_unsupported(c, "spatial=0 (statistics per element, not per channel)");
    int rank = cv_type(c, x).rank;
    double eps = cv_float(c, "epsilon", 1e-5), momentum = cv_float(c, "momentum", 0.9);
    int scale = per_channel(c, cv_in(c, 1), rank), bias = per_channel(c, cv_in(c, 2), rank);
    int mean = per_channel(c, cv_in(c, 3), rank), var = per_channel(c, cv_in(c, 4), rank);
    if (cv_int(c, "training_mode", 0)) {
        int64_t axes[COIL_MAX_RANK];
        int n = 0;
        for (int i = 0; i < rank; i++)
            if (i != 1)
                axes[n++] = i;
        int bm = b_reduce(cv_b(c), OP_MEAN, x, n, axes, false);
        int d = cv_bin(c, OP_SUB, x, per_channel(c, bm, rank));
        int bv = b_reduce(cv_b(c), OP_MEAN, cv_bin(c, OP_MUL, d, d), n, axes, false);
        int mom = scalar_like(c, momentum, x), rest = scalar_like(c, 1 - momentum, x);
        c->out[1] = cv_bin(c, OP_ADD, cv_bin(c, OP_MUL, cv_in(c, 3), mom), cv_bin(c, OP_MUL, bm, rest));
        c->out[2] = cv_bin(c, OP_ADD, cv_bin(c, OP_MUL, cv_in(c, 4), mom), cv_bin(c, OP_MUL, bv, rest));
        mean = per_channel(c, bm, rank), var = per_channel(c, bv, rank);
    } else if (c->node->n_output > 1)
        return cv_invalid(c, "running statistics are results only in training mode");
    int inv = cv_un(c, OP_RSQRT, cv_bin(c, OP_ADD, var, scalar_like(c, eps, var)));
    int y = cv_bin(c, OP_MUL, cv_bin(c, OP_SUB, x, mean), cv_bin(c, OP_MUL, inv, scale));
    c->out[0] = cv_bin(c, OP_ADD, y, bias);
    return true;
}

static bool conv_instance_norm(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    int y = norm_instance(cv_b(c), x, cv_float(c, "epsilon", 1e-5));
    c->out[0] = norm_affine(cv_b(c), y, cv_in(c, 1), cv_in(c, 2));
    return true;
}

/* GroupNormalization: x[N, C, ...] as [N, G, C/G * ...], normalized over the last axis,
 * then scale and bias per channel (opset 21; opset 18's per-group scale is refused). */
static bool conv_group_norm(Cv *c)
{
    int x = cv_in(c, 0);
    if (!need_float(c, x))
        return false;
    Type t = cv_type(c, x);
    int64_t groups = cv_int(c, "num_groups", 0);
    if (t.rank < 2 || !dim_is_static(t.dim[1]) || groups <= 0 || t.dim[1].k % groups)
        return cv_unsupported(c, "x needs a static channel axis divisible by num_groups");
    if (c->o->opset < 21)
        return cv_unsupported(c, "opset %lld's per-group scale and bias (opset 21 takes them "
                              "per channel)", (long long)c->o->opset);
    int y = norm_group(cv_b(c), stash(c, x), groups, cv_float(c, "epsilon", 1e-5));
    c->out[0] = norm_affine(cv_b(c), cv_cast(c, y, t.dt), cv_in(c, 1), cv_in(c, 2));
    return true;
}

/* MeanVarianceNormalization: (x - mean) / sqrt(var + 1e-9) over axes (default 0, 2, 3). */
static bool conv_mvn(Cv *c)
{
    int x = cv_in(c, 0), n;
    int64_t raw[ONNX_MAX_LIST], axes[COIL_MAX_RANK];
    if (!need_float(c, x) || !cv_ints(c, CV_ATTR_ONLY, "axes", raw, &n))
        return false;
    if (n < 0) {
        n = 3;
        raw[0] = 0, raw[1] = 2, raw[2] = 3;
    }
    if (!cv_axes(c, raw, n, cv_type(c, x).rank, axes))
        return false;
    c->out[0] = norm_moments(cv_b(c), x, axes, n, 1e-9, NULL, NULL);
    return true;
}

static bool conv_lp_norm(Cv *c)
{
    int x = cv_in(c, 0);
    int64_t axis = cv_int(c, "axis", -1), p = cv_int(c, "p", 2);
    if (!need_float(c, x))
        return false;
    int a;
    if (!axis_norm(axis, cv_type(c, x).rank, &a))
        return cv_invalid(c, "axis is out of range");
    int64_t ax = a;
    int norm;
    if (p == 1)
        norm = b_reduce(cv_b(c), OP_SUM, cv_un(c, OP_ABS, x), 1, &ax, true);
    else if (p == 2)
        norm = cv_un(c, OP_SQRT, b_reduce(cv_b(c), OP_SUM, cv_bin(c, OP_MUL, x, x), 1, &ax, true));
    else
        return cv_invalid(c, "p must be 1 or 2");
    int zero = cv_bin(c, OP_EQ, norm, scalar_like(c, 0, x)); /* 0 / 0 gives 0, as onnx's */
    c->out[0] = cv_where(c, zero, scalar_like(c, 0, x), cv_bin(c, OP_DIV, x, norm));
    return true;
}

/* GlobalAveragePool and GlobalMaxPool: mean or max over every axis after N and C. */
static bool conv_global_pool(Cv *c)
{
    int x = cv_in(c, 0);
    if (x < 0)
        return false;
    c->out[0] = window_global_pool(cv_b(c), NULL, c->row->op, x);
    return true;
}

/* ---------------------------------------------------------------- dropout */

/* Inference: the identity, and a mask of every element kept. */
static bool conv_dropout(Cv *c)
{
    int64_t numel;
    const double *training = cv_const(c, 2, &numel), *ratio = cv_const(c, 1, &numel);
    if (cv_has(c, 2) && !training)
        return cv_need_const(c, 2);
    if (cv_has(c, 2) && training[0] != 0) { /* training: only a ratio of 0 keeps everything */
        if (cv_has(c, 1) && !ratio)
            return cv_need_const(c, 1);
        if (!ratio || ratio[0] != 0)
            return cv_unsupported(c, "training mode with a ratio other than 0 (coil imports "
                                  "models for inference)");
    }
    int x = cv_in(c, 0);
    c->out[0] = x;
    if (x >= 0 && c->node->n_output > 1) { /* the mask: bool from opset 10, x's type before */
        Type t = cv_type(c, x);
        t.dt = c->o->opset < 10 ? t.dt : DT_BOOL;
        c->out[1] = b_full(cv_b(c), 1, &t);
    }
    return x >= 0;
}

/* ---------------------------------------------------------------- losses */

/* NegativeLogLikelihoodLoss: loss[n, d...] = -x[n, t[n, d...], d...] * w[t], 0 where t
 * is ignore_index; reduction mean divides by the sum of the weights used. */
static int nll(Cv *c, int x, int target, int weight)
{
    Type xt = cv_type(c, x), tt = cv_type(c, target);
    int64_t ignore = cv_int(c, "ignore_index", INT64_MIN);
    bool has_ignore = cv_attr(c, "ignore_index") != NULL;
    int t64 = cv_cast(c, target, DT_I64);
    int ignored = has_ignore ? cv_bin(c, OP_EQ, t64, cv_scalar(c, (double)ignore, DT_I64)) : -1;
    if (has_ignore)
        t64 = cv_where(c, ignored, cv_scalar(c, 0, DT_I64), t64);
    /* one-hot along the class axis 1 */
    Dim d[COIL_MAX_RANK];
    d[0] = tt.dim[0], d[1] = dim_static(1);
    for (int i = 1; i < tt.rank; i++)
        d[i + 1] = tt.dim[i];
    Type it = xt;
    it.dt = DT_I64;
    int hot = cv_bin(c, OP_EQ, b_iota(cv_b(c), &it, 1), cv_reshape(c, t64, tt.rank + 1, d));
    int64_t one = 1;
    int picked = b_reduce(cv_b(c), OP_SUM, cv_where(c, hot, x, scalar_like(c, 0, x)), 1, &one, false);
    int w = weight >= 0 ? b_gather(cv_b(c), weight, t64, 0) : scalar_like(c, 1, x);
    if (has_ignore)
        w = cv_where(c, ignored, scalar_like(c, 0, x), w);
    if (weight < 0 && !has_ignore)
        w = -1;
    int loss = cv_un(c, OP_NEG, w >= 0 ? cv_bin(c, OP_MUL, picked, w) : picked);
    char red[16];
    const char *r = cv_str(c, "reduction", "mean", red, sizeof red);
    if (strcmp(r, "none") == 0)
        return loss;
    int total = b_reduce(cv_b(c), OP_SUM, loss, 0, NULL, false);
    if (strcmp(r, "sum") == 0)
        return total;
    if (strcmp(r, "mean") != 0) {
        cv_invalid(c, "reduction '%s'", r);
        return -1;
    }
    if (w < 0)
        return b_reduce(cv_b(c), OP_MEAN, loss, 0, NULL, false);
    Type lt = cv_type(c, loss);
    int ws = b_reduce(cv_b(c), OP_SUM, b_expand(cv_b(c), w, &lt), 0, NULL, false);
    return cv_bin(c, OP_DIV, total, ws);
}

static bool conv_nll(Cv *c)
{
    int x = cv_in(c, 0), t = cv_in(c, 1);
    if (!need_float(c, x) || t < 0)
        return false;
    c->out[0] = nll(c, x, t, cv_has(c, 2) ? cv_in(c, 2) : -1);
    return c->out[0] >= 0;
}

static bool conv_softmax_ce(Cv *c)
{
    int x = cv_in(c, 0), t = cv_in(c, 1);
    if (!need_float(c, x) || t < 0)
        return false;
    Attr axis = attr_int("axis", 1);
    int lp = b_op(cv_b(c), OP_LOG_SOFTMAX, &x, 1, &axis, 1, NULL);
    c->out[0] = nll(c, lp, t, cv_has(c, 2) ? cv_in(c, 2) : -1);
    c->out[1] = lp;
    return c->out[0] >= 0;
}

/* ---------------------------------------------------------------- attention */

/* Attention's operands as [B, heads, S, D]: a 3-D [B, S, heads * D] is split into heads. */
static int heads_first(Cv *c, int x, int64_t heads)
{
    Type t = cv_type(c, x);
    if (t.rank == 4)
        return x;
    if (heads <= 0 || !dim_is_static(t.dim[2]) || t.dim[2].k % heads) {
        cv_invalid(c, "3-D operands need q_num_heads and kv_num_heads dividing their last axis");
        return -1;
    }
    Dim d[4] = {t.dim[0], t.dim[1], dim_static(heads), dim_static(t.dim[2].k / heads)};
    return b_transpose(cv_b(c), cv_reshape(c, x, 4, d), 4, (int64_t[]){0, 2, 1, 3});
}

/* k[B, h, S, D] with each head repeated r times in place: [h0, h0, h1, h1, ...]. */
static int repeat_heads(Cv *c, int k, int64_t r)
{
    Type t = cv_type(c, k);
    if (r == 1)
        return k;
    Dim five[5] = {t.dim[0], t.dim[1], dim_static(1), t.dim[2], t.dim[3]};
    Type e = {.dt = t.dt, .rank = 5, .dim = {t.dim[0], t.dim[1], dim_static(r), t.dim[2], t.dim[3]}};
    bool overflow = false;
    Dim four[4] = {t.dim[0], dim_mul(t.dim[1], dim_static(r), &overflow), t.dim[2], t.dim[3]};
    return cv_reshape(c, b_expand(cv_b(c), cv_reshape(c, k, 5, five), &e), 4, four);
}

/* The additive bias [.., S_q, S_kv] of the mask (bool: -inf where false; padded to S_kv
 * with masked columns) and of is_causal (key j hidden from query i when j - past > i). */
static int attention_bias(Cv *c, DType dt, Dim sq, Dim skv, int64_t past)
{
    int bias = -1, ninf = cv_scalar(c, -INFINITY, dt), zero = cv_scalar(c, 0, dt);
    if (cv_has(c, 3)) {
        int mask = cv_in(c, 3);
        Type mt = cv_type(c, mask);
        if (mask < 0 || !dim_is_static(mt.dim[mt.rank - 1]) || !dim_is_static(skv)) {
            cv_unsupported(c, "a mask with symbolic key length");
            return -1;
        }
        int64_t short_by = skv.k - mt.dim[mt.rank - 1].k;
        if (mt.dt == DT_BOOL)
            mask = cv_where(c, mask, zero, ninf);
        else
            mask = cv_cast(c, mask, dt);
        if (short_by > 0) {
            Type pt = cv_type(c, mask);
            pt.dim[pt.rank - 1] = dim_static(short_by);
            int pad = b_expand(cv_b(c), ninf, &pt);
            mask = b_concat(cv_b(c), (int[]){mask, pad}, 2, pt.rank - 1);
        }
        bias = mask;
    }
    if (cv_int(c, "is_causal", 0)) {
        if (!dim_is_static(sq) || !dim_is_static(skv)) {
            cv_unsupported(c, "is_causal with symbolic sequence lengths");
            return -1;
        }
        Type it = type_make(DT_I64, 2, (int64_t[]){sq.k, skv.k});
        int ahead = cv_bin(c, OP_SUB, b_iota(cv_b(c), &it, 1), b_iota(cv_b(c), &it, 0));
        int hidden = cv_bin(c, OP_GT, ahead, cv_scalar(c, (double)past, DT_I64));
        int causal = cv_where(c, hidden, ninf, zero);
        bias = bias < 0 ? causal : cv_bin(c, OP_ADD, bias, causal);
    }
    if (cv_has(c, 6)) { /* nonpad_kv_seqlen[B]: keys at or past it are padding */
        int len = cv_cast(c, cv_in(c, 6), DT_I64);
        Type lt = cv_type(c, len);
        if (len < 0 || lt.rank != 1 || !dim_is_static(skv)) {
            cv_unsupported(c, "nonpad_kv_seqlen of this shape");
            return -1;
        }
        Type it = {.dt = DT_I64, .rank = 4, .dim = {lt.dim[0], dim_static(1), dim_static(1), skv}};
        int at = b_iota(cv_b(c), &it, 3);
        int l4 = cv_reshape(c, len, 4, (Dim[]){lt.dim[0], dim_static(1), dim_static(1), dim_static(1)});
        int pad = cv_where(c, cv_bin(c, OP_LT, at, l4), zero, ninf);
        bias = bias < 0 ? pad : cv_bin(c, OP_ADD, bias, pad);
    }
    return bias;
}

/* Attention (opset 23): softmax(Q K^T * scale (softcapped) + bias) V over heads, with a
 * key/value cache (past_key/value concatenated), grouped-query heads and 3-D operands. */
static bool conv_attention(Cv *c)
{
    int q = cv_in(c, 0), k = cv_in(c, 1), v = cv_in(c, 2);
    if (!need_float(c, q) || k < 0 || v < 0)
        return false;
    bool three = cv_type(c, q).rank == 3;
    int64_t qh = cv_int(c, "q_num_heads", 0), kvh = cv_int(c, "kv_num_heads", 0);
    q = heads_first(c, q, qh), k = heads_first(c, k, kvh), v = heads_first(c, v, kvh);
    if (q < 0 || k < 0 || v < 0)
        return false;
    int64_t past = 0;
    if (cv_has(c, 4)) {
        past = cv_type(c, cv_in(c, 4)).dim[2].k;
        k = b_concat(cv_b(c), (int[]){cv_in(c, 4), k}, 2, 2);
    }
    if (cv_has(c, 5))
        v = b_concat(cv_b(c), (int[]){cv_in(c, 5), v}, 2, 2);
    c->out[1] = k, c->out[2] = v;
    Type qt = cv_type(c, q), kt = cv_type(c, k);
    DType dt = qt.dt;
    if (!dim_is_static(qt.dim[1]) || !dim_is_static(kt.dim[1]) || kt.dim[1].k == 0 ||
        qt.dim[1].k % kt.dim[1].k)
        return cv_invalid(c, "the query heads must be a multiple of the key/value heads");
    int64_t reps = qt.dim[1].k / kt.dim[1].k;
    k = repeat_heads(c, k, reps), v = repeat_heads(c, v, reps);
    double scale = cv_float(c, "scale", 1.0 / sqrt((double)qt.dim[3].k));
    int kT = b_transpose(cv_b(c), k, 4, (int64_t[]){0, 1, 3, 2});
    int s = cv_bin(c, OP_MUL, b_matmul(cv_b(c), q, kT), cv_scalar(c, scale, dt));
    double cap = cv_float(c, "softcap", 0);
    if (cap > 0)
        s = cv_bin(c, OP_MUL, cv_un(c, OP_TANH, cv_bin(c, OP_DIV, s, cv_scalar(c, cap, dt))),
                   cv_scalar(c, cap, dt));
    int qk = s, bias = attention_bias(c, dt, qt.dim[2], kt.dim[2], past);
    if (!err_ok(c->o->e))
        return false;
    if (bias >= 0)
        s = cv_bin(c, OP_ADD, s, bias);
    int64_t mode = cv_int(c, "qk_matmul_output_mode", 0);
    if (mode == 2)
        qk = s;
    DType sdt;
    if (cv_attr(c, "softmax_precision") && onnx_dtype((int)cv_int(c, "softmax_precision", 1), &sdt))
        s = cv_cast(c, s, sdt);
    Attr axis = attr_int("axis", -1);
    int p = cv_cast(c, b_op(cv_b(c), OP_SOFTMAX, &s, 1, &axis, 1, NULL), dt);
    if (mode == 3)
        qk = p;
    int y = b_matmul(cv_b(c), p, v);
    if (three && y >= 0) {
        Type yt = cv_type(c, y);
        bool overflow = false;
        Dim d[3] = {yt.dim[0], yt.dim[2], dim_mul(yt.dim[1], yt.dim[3], &overflow)};
        y = cv_reshape(c, b_transpose(cv_b(c), y, 4, (int64_t[]){0, 2, 1, 3}), 3, d);
    }
    c->out[0] = y, c->out[3] = qk;
    return y >= 0;
}

/* ---------------------------------------------------------------- rotary embedding */

/* RotaryEmbedding (opset 23): x[B, S, H, D] (4-D inputs are [B, H, S, D]; 3-D are split
 * into num_heads) with its first rotary_embedding_dim channels rotated in pairs (halves,
 * or neighbours when interleaved) by cos/sin[S or position_ids, dim/2]. */
static bool conv_rotary(Cv *c)
{
    int x = cv_in(c, 0), cosv = cv_in(c, 1), sinv = cv_in(c, 2);
    if (!need_float(c, x) || cosv < 0 || sinv < 0)
        return false;
    Type t = cv_type(c, x);
    bool four = t.rank == 4;
    int64_t heads = cv_int(c, "num_heads", 0);
    if (four)
        x = b_transpose(cv_b(c), x, 4, (int64_t[]){0, 2, 1, 3}); /* [B, S, H, D] */
    else if (t.rank == 3 && heads > 0 && dim_is_static(t.dim[2]) && t.dim[2].k % heads == 0)
        x = cv_reshape(c, x, 4, (Dim[]){t.dim[0], t.dim[1], dim_static(heads), dim_static(t.dim[2].k / heads)});
    else
        return cv_invalid(c, "x must be 4-D, or 3-D with num_heads dividing its last axis");
    Type xt = cv_type(c, x);
    if (!dim_is_static(xt.dim[3]))
        return cv_unsupported(c, "a symbolic head size");
    int64_t d = xt.dim[3].k, rd = cv_int(c, "rotary_embedding_dim", 0);
    rd = rd ? rd : d;
    if (rd > d || rd % 2)
        return cv_invalid(c, "rotary_embedding_dim must be even and at most the head size");
    if (cv_has(c, 3)) { /* caches indexed by position: [B, S, rd/2] */
        int pos = cv_in(c, 3);
        cosv = b_gather(cv_b(c), cosv, pos, 0), sinv = b_gather(cv_b(c), sinv, pos, 0);
    }
    Type ct = cv_type(c, cosv); /* [B or S..., rd/2] -> [.., S, 1, rd/2] */
    Dim cd[COIL_MAX_RANK];
    memcpy(cd, ct.dim, sizeof cd);
    cd[ct.rank] = cd[ct.rank - 1], cd[ct.rank - 1] = dim_static(1);
    cosv = cv_reshape(c, cosv, ct.rank + 1, cd), sinv = cv_reshape(c, sinv, ct.rank + 1, cd);
    int rot = rd == d ? x : b_slice(cv_b(c), x, 3, 0, rd, 1);
    bool inter = cv_int(c, "interleaved", 0) != 0;
    int x1 = inter ? b_slice(cv_b(c), rot, 3, 0, rd, 2) : b_slice(cv_b(c), rot, 3, 0, rd / 2, 1);
    int x2 = inter ? b_slice(cv_b(c), rot, 3, 1, rd, 2) : b_slice(cv_b(c), rot, 3, rd / 2, rd, 1);
    int re = cv_bin(c, OP_SUB, cv_bin(c, OP_MUL, cosv, x1), cv_bin(c, OP_MUL, sinv, x2));
    int im = cv_bin(c, OP_ADD, cv_bin(c, OP_MUL, sinv, x1), cv_bin(c, OP_MUL, cosv, x2));
    Type rt = cv_type(c, rot);
    if (inter) { /* [.., rd/2, 2] -> [.., rd]: pairs side by side */
        Dim e[5] = {rt.dim[0], rt.dim[1], rt.dim[2], dim_static(rd / 2), dim_static(1)};
        int pair = b_concat(cv_b(c), (int[]){cv_reshape(c, re, 5, e), cv_reshape(c, im, 5, e)}, 2, 4);
        rot = cv_reshape(c, pair, 4, rt.dim);
    } else
        rot = b_concat(cv_b(c), (int[]){re, im}, 2, 3);
    if (rd < d)
        rot = b_concat(cv_b(c), (int[]){rot, b_slice(cv_b(c), x, 3, rd, d, 1)}, 2, 3);
    c->out[0] = four ? b_transpose(cv_b(c), rot, 4, (int64_t[]){0, 2, 1, 3})
                     : cv_reshape(c, rot, 3, t.dim);
    return true;
}

/* ---------------------------------------------------------------- the table */

#define UNARY(name, op) {name, conv_unary, op, 1, 1, 1, ""}
#define BINARY(name, op) {name, conv_binary, op, 2, 2, 1, ""}
#define ACT(name, attrs) {name, conv_activation, 0, 1, 1, 1, attrs}
#define REDUCE(name, op) {name, conv_reduce, op, 1, 2, 1, "axes keepdims noop_with_empty_axes"}

static const OnnxOp onnx_ops[] = {
    UNARY("Abs", OP_ABS), UNARY("Neg", OP_NEG), UNARY("Exp", OP_EXP), UNARY("Log", OP_LOG),
    UNARY("Sqrt", OP_SQRT), UNARY("Relu", OP_RELU), UNARY("Sigmoid", OP_SIGMOID),
    UNARY("Tanh", OP_TANH), UNARY("Erf", OP_ERF), UNARY("Sin", OP_SIN), UNARY("Cos", OP_COS),
    UNARY("Reciprocal", OP_RECIPROCAL),
    BINARY("Add", OP_ADD), BINARY("Sub", OP_SUB), BINARY("Mul", OP_MUL), BINARY("Div", OP_DIV),
    BINARY("Equal", OP_EQ), BINARY("Less", OP_LT), BINARY("LessOrEqual", OP_LE),
    BINARY("Greater", OP_GT), BINARY("GreaterOrEqual", OP_GE),
    {"Pow", conv_pow, OP_POW, 2, 2, 1, ""},
    {"Max", conv_variadic, OP_MAXIMUM, 1, 64, 1, ""},
    {"Min", conv_variadic, OP_MINIMUM, 1, 64, 1, ""},
    {"Sum", conv_variadic, OP_ADD, 1, 64, 1, ""},
    {"Mean", conv_variadic, OP_MEAN, 1, 64, 1, ""},
    {"Not", conv_not, 0, 1, 1, 1, ""},
    {"And", conv_logic, OP_MUL, 2, 2, 1, ""},
    {"Or", conv_logic, OP_ADD, 2, 2, 1, ""},
    {"Xor", conv_logic, OP_NE, 2, 2, 1, ""},
    {"Where", conv_where, 0, 3, 3, 1, ""},
    {"Clip", conv_clip, 0, 1, 3, 1, "max min"},
    {"Sign", conv_sign, 0, 1, 1, 1, ""},
    {"Floor", conv_floor, 0, 1, 1, 1, ""},
    {"Ceil", conv_ceil, 0, 1, 1, 1, ""},
    {"Round", conv_round, 0, 1, 1, 1, ""},
    {"Mod", conv_mod, 0, 2, 2, 1, "fmod"},
    {"IsNaN", conv_isnan, 0, 1, 1, 1, ""},
    {"IsInf", conv_isinf, 0, 1, 1, 1, "detect_negative detect_positive"},
    ACT("Tan", ""), ACT("Sinh", ""), ACT("Cosh", ""), ACT("Asinh", ""), ACT("Acosh", ""),
    ACT("Atanh", ""), ACT("Softplus", ""), ACT("Mish", ""), ACT("Softsign", ""),
    ACT("Elu", "alpha"), ACT("Selu", "alpha gamma"), ACT("Celu", "alpha"),
    ACT("LeakyRelu", "alpha"), ACT("ThresholdedRelu", "alpha"), ACT("HardSigmoid", "alpha beta"),
    ACT("HardSwish", ""), ACT("Swish", "alpha"), ACT("Shrink", "bias lambd"),
    ACT("Gelu", "approximate"),
    {"PRelu", conv_prelu, 0, 2, 2, 1, ""},
    {"MatMul", conv_matmul, 0, 2, 2, 1, ""},
    {"Gemm", conv_gemm, 0, 2, 3, 1, "alpha beta transA transB"},
    {"Softmax", conv_softmax, OP_SOFTMAX, 1, 1, 1, "axis"},
    {"LogSoftmax", conv_softmax, OP_LOG_SOFTMAX, 1, 1, 1, "axis"},
    {"Hardmax", conv_hardmax, 0, 1, 1, 1, "axis"},
    REDUCE("ReduceSum", OP_SUM), REDUCE("ReduceMean", OP_MEAN), REDUCE("ReduceMax", OP_MAX),
    REDUCE("ReduceMin", OP_MIN), REDUCE("ReduceL1", OP_SUM), REDUCE("ReduceL2", OP_SUM),
    REDUCE("ReduceSumSquare", OP_SUM), REDUCE("ReduceLogSum", OP_SUM),
    REDUCE("ReduceLogSumExp", OP_SUM), REDUCE("ReduceProd", OP_SUM),
    {"ArgMax", conv_argmax, OP_MAX, 1, 1, 1, "axis keepdims select_last_index"},
    {"ArgMin", conv_argmax, OP_MIN, 1, 1, 1, "axis keepdims select_last_index"},
    {"CumSum", conv_cumsum, 0, 2, 2, 1, "exclusive reverse"},
    {"LayerNormalization", conv_layer_norm, 0, 2, 3, 3, "axis epsilon stash_type"},
    {"RMSNormalization", conv_rms_norm, 0, 2, 2, 1, "axis epsilon stash_type"},
    {"BatchNormalization", conv_batch_norm, 0, 5, 5, 3, "epsilon momentum spatial training_mode"},
    {"InstanceNormalization", conv_instance_norm, 0, 3, 3, 1, "epsilon"},
    {"GroupNormalization", conv_group_norm, 0, 3, 3, 1, "epsilon num_groups stash_type"},
    {"MeanVarianceNormalization", conv_mvn, 0, 1, 1, 1, "axes"},
    {"LpNormalization", conv_lp_norm, 0, 1, 1, 1, "axis p"},
    {"GlobalAveragePool", conv_global_pool, OP_MEAN, 1, 1, 1, ""},
    {"GlobalMaxPool", conv_global_pool, OP_MAX, 1, 1, 1, ""},
    {"Dropout", conv_dropout, 0, 1, 3, 2, "ratio seed"}, /* ratio: before opset 12 */
    {"Attention", conv_attention, 0, 3, 7, 4,
     "is_causal kv_num_heads q_num_heads qk_matmul_output_mode scale softcap softmax_precision"},
    {"RotaryEmbedding", conv_rotary, 0, 3, 4, 1, "interleaved num_heads rotary_embedding_dim"},
    {"NegativeLogLikelihoodLoss", conv_nll, 0, 2, 3, 1, "ignore_index reduction"},
    {"SoftmaxCrossEntropyLoss", conv_softmax_ce, 0, 2, 3, 2, "ignore_index reduction"},
    /* onnx_shape.c */
    /* onnx_conv.c */
    {"Conv", conv_conv, 0, 2, 3, 1, "auto_pad dilations group kernel_shape pads strides"},
    {"ConvTranspose", conv_conv_transpose, 0, 2, 3, 1,
     "auto_pad dilations group kernel_shape output_padding output_shape pads strides"},
    {"CausalConvWithState", conv_causal_conv, 0, 2, 4, 2, "activation"},
    {"MaxPool", conv_max_pool, 0, 1, 1, 2,
     "auto_pad ceil_mode dilations kernel_shape pads storage_order strides"},
    {"AveragePool", conv_average_pool, 0, 1, 1, 1,
     "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides"},
    {"LpPool", conv_lp_pool, 0, 1, 1, 1, "auto_pad ceil_mode dilations kernel_shape p pads strides"},
    {"Resize", conv_resize, 0, 1, 4, 1,
     "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside "
     "extrapolation_value keep_aspect_ratio_policy mode nearest_mode"},
    {"Reshape", conv_reshape, 0, 2, 2, 1, "allowzero"},
    {"Flatten", conv_flatten, 0, 1, 1, 1, "axis"},
    {"Unsqueeze", conv_unsqueeze, 0, 1, 2, 1, "axes"},
    {"Squeeze", conv_squeeze, 0, 1, 2, 1, "axes"},
    {"Transpose", conv_transpose, 0, 1, 1, 1, "perm"},
    {"Concat", conv_concat, 0, 1, 4096, 1, "axis"},
    {"Split", conv_split, 0, 1, 2, ONNX_MAX_OUT, "axis num_outputs split"},
    {"Slice", conv_slice, 0, 3, 5, 1, ""},
    {"Gather", conv_gather, 0, 2, 2, 1, "axis"},
    {"GatherElements", conv_gather_elements, 0, 2, 2, 1, "axis"},
    {"GatherND", conv_gather_nd, 0, 2, 2, 1, "batch_dims"},
    {"ScatterND", conv_scatter_nd, 0, 3, 3, 1, "reduction"},
    {"ScatterElements", conv_scatter_elements, 0, 3, 3, 1, "axis reduction"},
    {"Expand", conv_expand, 0, 2, 2, 1, ""},
    {"Tile", conv_tile, 0, 2, 2, 1, ""},
    {"Shape", conv_shape, 0, 1, 1, 1, "end start"},
    {"Size", conv_size, 0, 1, 1, 1, ""},
    {"Constant", conv_constant, 0, 0, 0, 1, "value value_float value_floats value_int value_ints"},
    {"ConstantOfShape", conv_constant_of_shape, 0, 1, 1, 1, "value"},
    {"Range", conv_range, 0, 3, 3, 1, ""},
    {"HannWindow", conv_window, 0, 1, 1, 1, "output_datatype periodic"},
    {"HammingWindow", conv_window, 0, 1, 1, 1, "output_datatype periodic"},
    {"BlackmanWindow", conv_window, 0, 1, 1, 1, "output_datatype periodic"},
    {"LRN", conv_lrn, 0, 1, 1, 1, "alpha beta bias size"},
    {"EyeLike", conv_eye_like, 0, 1, 1, 1, "dtype k"},
    {"Trilu", conv_trilu, 0, 1, 2, 1, "upper"},
    {"OneHot", conv_one_hot, 0, 3, 3, 1, "axis"},
    {"Pad", conv_pad, 0, 2, 4, 1, "mode"},
    {"CenterCropPad", conv_center_crop_pad, 0, 2, 2, 1, "axes"},
    {"DepthToSpace", conv_depth_to_space, 0, 1, 1, 1, "blocksize mode"},
    {"SpaceToDepth", conv_space_to_depth, 0, 1, 1, 1, "blocksize"},
    {"Identity", conv_identity, 0, 1, 1, 1, ""},
    {"Cast", conv_cast, 0, 1, 1, 1, "saturate to"},
    {"CastLike", conv_cast_like, 0, 2, 2, 1, "saturate"},
};

/* The ops of the table that came after opset 7, with the opset that brought each (from
 * onnx.defs: the smallest since_version of its schemas). */
static const struct {
    const char *name;
    int since;
} op_since[] = {
    {"Erf", 9}, {"LessOrEqual", 12}, {"GreaterOrEqual", 12}, {"Where", 9}, {"Sign", 9},
    {"Round", 11}, {"Mod", 10}, {"IsNaN", 9}, {"IsInf", 10}, {"Sinh", 9}, {"Cosh", 9},
    {"Asinh", 9}, {"Acosh", 9}, {"Atanh", 9}, {"Mish", 18}, {"Celu", 12},
    {"ThresholdedRelu", 10}, {"HardSwish", 14}, {"Swish", 24}, {"Shrink", 9}, {"Gelu", 20},
    {"CumSum", 11}, {"LayerNormalization", 17}, {"RMSNormalization", 23},
    {"GroupNormalization", 18}, {"MeanVarianceNormalization", 9}, {"Attention", 23},
    {"RotaryEmbedding", 23}, {"NegativeLogLikelihoodLoss", 12},
    {"SoftmaxCrossEntropyLoss", 12}, {"Resize", 10}, {"GatherElements", 11},
    {"GatherND", 11}, {"ScatterND", 11}, {"ScatterElements", 11}, {"Expand", 8},
    {"ConstantOfShape", 9}, {"Range", 11}, {"HannWindow", 17}, {"HammingWindow", 17},
    {"BlackmanWindow", 17}, {"EyeLike", 9}, {"Trilu", 14}, {"OneHot", 9},
    {"CenterCropPad", 18}, {"CastLike", 15},
};

int onnx_op_since(const char *name)
{
    for (size_t i = 0; i < sizeof op_since / sizeof op_since[0]; i++)
        if (strcmp(op_since[i].name, name) == 0)
            return op_since[i].since;
    return 1;
}

const OnnxOp *onnx_op_find(const char *name)
{
    for (size_t i = 0; i < sizeof onnx_ops / sizeof onnx_ops[0]; i++)
        if (strcmp(onnx_ops[i].name, name) == 0)
            return &onnx_ops[i];
    return NULL;
}

#endif
