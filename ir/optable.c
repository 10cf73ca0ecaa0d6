/* optable.c — the op table: one row per op. Adding an op means adding a row here
 * (and its tests); passes, the printer, the parser and the interpreter read it. */
#include <stdio.h>
#include <string.h>

#include "ops.h"

#define SPECS(a) a, (int)(sizeof a / sizeof a[0])
#define NONE NULL, 0

static const AttrSpec a_input[] = {{"name", AK_STR, true, 0}};
/* buffer: a tensor the model keeps but does not train (batch norm's running statistics):
 * no gradient; a training step sets it to the model's output "update.<name>" */
static const AttrSpec a_param[] = {
    {"name", AK_STR, true, 0}, {"init", AK_STR, false, 0}, {"buffer", AK_BOOL, false, 0}};
static const AttrSpec a_constant[] = {{"value", AK_DATA, true, 0}};
static const AttrSpec a_full[] = {{"value", AK_FLOAT, true, 0}};
static const AttrSpec a_iota[] = {{"axis", AK_INT, false, 0}};
static const AttrSpec a_rand[] = {{"seed", AK_INT, false, 0}, {"offset", AK_INT, false, 0}};
static const AttrSpec a_reduce[] = {{"axes", AK_INTS, false, 0}, {"keepdim", AK_BOOL, false, 0}};
static const AttrSpec a_argmax[] = {{"axis", AK_INT, false, -1}, {"keepdim", AK_BOOL, false, 0}};
static const AttrSpec a_transpose[] = {{"perm", AK_INTS, true, 0}};
static const AttrSpec a_slice[] = {{"axis", AK_INT, true, 0}, {"start", AK_INT, true, 0},
                                   {"end", AK_INT, true, 0}, {"step", AK_INT, false, 1}};
static const AttrSpec a_axis0[] = {{"axis", AK_INT, false, 0}};
static const AttrSpec a_axis_req[] = {{"axis", AK_INT, true, 0}};
static const AttrSpec a_axis_last[] = {{"axis", AK_INT, false, -1}};
static const AttrSpec a_layer_norm[] = {{"eps", AK_FLOAT, false, 1e-5}};
static const AttrSpec a_rms_norm[] = {{"eps", AK_FLOAT, false, 1e-6}};
static const AttrSpec a_dropout[] = {{"p", AK_FLOAT, true, 0}, {"seed", AK_INT, false, 0},
                                     {"offset", AK_INT, false, 0}};
static const AttrSpec a_bound[] = {{"bound", AK_INT, true, 0}};
static const AttrSpec a_cross_entropy[] = {{"reduction", AK_STR, false, 0}};
static const AttrSpec a_attention[] = {{"causal", AK_BOOL, false, 0}, {"scale", AK_FLOAT, false, 0}};
static const AttrSpec a_conv[] = {{"stride", AK_INTS, false, 0}, {"padding", AK_INTS, false, 0},
                                  {"dilation", AK_INTS, false, 0}, {"groups", AK_INT, false, 1}};

#define LEAF(nm, infer, eval, attrs) \
    {nm, 0, 0, OPF_LEAF | OPF_TYPED, attrs, infer, eval, flops_zero, NULL, NULL, NULL, NULL}
#define UNARY(nm, fn, infer, gr) \
    {nm, 1, 1, OPF_POINTWISE, NONE, infer, eval_unary, flops_elems, fn, NULL, NULL, gr}
#define BINARY(nm, fn, infer, fl, gr) \
    {nm, 2, 2, OPF_POINTWISE | (fl), NONE, infer, eval_binary, flops_elems, NULL, fn, NULL, gr}
#define REDUCE(nm, gr) \
    {nm, 1, 1, OPF_REDUCE, SPECS(a_reduce), infer_reduce, eval_reduce, flops_reduce, NULL, NULL, NULL, gr}
#define VIEW(nm, nmin, nmax, fl, attrs, infer, eval, gr) \
    {nm, nmin, nmax, OPF_VIEW | (fl), attrs, infer, eval, flops_zero, NULL, NULL, NULL, gr}
#define COMPOSITE(nm, nmin, nmax, fl, attrs, infer, eval, flops, dec) \
    {nm, nmin, nmax, OPF_COMPOSITE | (fl), attrs, infer, eval, flops, NULL, NULL, dec, NULL}

const OpInfo op_info[OP_COUNT] = {
    [OP_INPUT] = LEAF("input", infer_leaf, NULL, SPECS(a_input)),
    [OP_PARAM] = LEAF("param", infer_leaf, NULL, SPECS(a_param)),
    [OP_CONSTANT] = LEAF("constant", infer_constant, eval_constant, SPECS(a_constant)),
    [OP_FULL] = LEAF("full", infer_leaf, eval_full, SPECS(a_full)),
    [OP_IOTA] = LEAF("iota", infer_iota, eval_iota, SPECS(a_iota)),
    [OP_RAND] = {"rand", 0, 0, OPF_LEAF | OPF_TYPED | OPF_RANDOM, SPECS(a_rand), infer_leaf,
                 eval_rand, flops_elems, NULL, NULL, NULL, NULL},

    [OP_NEG] = UNARY("neg", s_neg, infer_unary, grad_neg),
    [OP_ABS] = UNARY("abs", s_abs, infer_unary, grad_abs),
    [OP_EXP] = UNARY("exp", s_exp, infer_unary_float, grad_exp),
    [OP_LOG] = UNARY("log", s_log, infer_unary_float, grad_log),
    [OP_SQRT] = UNARY("sqrt", s_sqrt, infer_unary_float, grad_sqrt),
    [OP_RSQRT] = UNARY("rsqrt", s_rsqrt, infer_unary_float, grad_rsqrt),
    [OP_RECIPROCAL] = UNARY("reciprocal", s_reciprocal, infer_unary_float, grad_reciprocal),
    [OP_TANH] = UNARY("tanh", s_tanh, infer_unary_float, grad_tanh),
    [OP_SIGMOID] = UNARY("sigmoid", s_sigmoid, infer_unary_float, grad_sigmoid),
    [OP_RELU] = UNARY("relu", s_relu, infer_unary, grad_relu),
    [OP_GELU] = UNARY("gelu", s_gelu, infer_unary_float, grad_gelu),
    [OP_GELU_TANH] = UNARY("gelu_tanh", s_gelu_tanh, infer_unary_float, grad_gelu_tanh),
    [OP_SILU] = UNARY("silu", s_silu, infer_unary_float, grad_silu),
    [OP_SIN] = UNARY("sin", s_sin, infer_unary_float, grad_sin),
    [OP_COS] = UNARY("cos", s_cos, infer_unary_float, grad_cos),
    [OP_ERF] = UNARY("erf", s_erf, infer_unary_float, grad_erf),

    [OP_ADD] = BINARY("add", s_add, infer_binary, OPF_COMMUTATIVE, grad_add),
    [OP_SUB] = BINARY("sub", s_sub, infer_binary, 0, grad_sub),
    [OP_MUL] = BINARY("mul", s_mul, infer_binary, OPF_COMMUTATIVE, grad_mul),
    [OP_DIV] = BINARY("div", s_div, infer_binary, 0, grad_div),
    [OP_POW] = BINARY("pow", s_pow, infer_binary, 0, grad_pow),
    [OP_MAXIMUM] = BINARY("maximum", s_maximum, infer_binary, OPF_COMMUTATIVE, grad_maximum),
    [OP_MINIMUM] = BINARY("minimum", s_minimum, infer_binary, OPF_COMMUTATIVE, grad_minimum),
    [OP_EQ] = BINARY("eq", s_eq, infer_compare, OPF_COMMUTATIVE, NULL),
    [OP_NE] = BINARY("ne", s_ne, infer_compare, OPF_COMMUTATIVE, NULL),
    [OP_LT] = BINARY("lt", s_lt, infer_compare, 0, NULL),
    [OP_LE] = BINARY("le", s_le, infer_compare, 0, NULL),
    [OP_GT] = BINARY("gt", s_gt, infer_compare, 0, NULL),
    [OP_GE] = BINARY("ge", s_ge, infer_compare, 0, NULL),

    [OP_WHERE] = {"where", 3, 3, OPF_POINTWISE, NONE, infer_where, eval_where, flops_elems,
                  NULL, NULL, NULL, grad_where},
    [OP_CAST] = {"cast", 1, 1, OPF_POINTWISE | OPF_TYPED, NONE, infer_cast, eval_copy, flops_zero,
                 NULL, NULL, NULL, grad_cast},
    [OP_INDEX_CHECK] = {"index_check", 1, 1, OPF_POINTWISE, SPECS(a_bound), infer_index_check,
                        eval_index_check, flops_zero, NULL, NULL, NULL, NULL},

    [OP_SUM] = REDUCE("sum", grad_sum),
    [OP_MEAN] = REDUCE("mean", grad_mean),
    [OP_MAX] = REDUCE("max", grad_extremum),
    [OP_MIN] = REDUCE("min", grad_extremum),
    [OP_ARGMAX] = {"argmax", 1, 1, OPF_REDUCE, SPECS(a_argmax), infer_argmax, eval_argmax,
                   flops_reduce, NULL, NULL, NULL, NULL},

    [OP_MATMUL] = {"matmul", 2, 2, 0, NONE, infer_matmul, eval_matmul, flops_matmul,
                   NULL, NULL, NULL, grad_matmul},

    [OP_TRANSPOSE] = VIEW("transpose", 1, 1, 0, SPECS(a_transpose), infer_transpose, eval_transpose, grad_transpose),
    [OP_RESHAPE] = VIEW("reshape", 1, 1, OPF_TYPED, NONE, infer_reshape, eval_copy, grad_reshape),
    [OP_EXPAND] = VIEW("expand", 1, 1, OPF_TYPED, NONE, infer_expand, eval_expand, grad_expand),
    [OP_SLICE] = VIEW("slice", 1, 1, 0, SPECS(a_slice), infer_slice, eval_slice, grad_slice),
    [OP_CONCAT] = {"concat", 1, -1, 0, SPECS(a_axis_req), infer_concat, eval_concat, flops_zero,
                   NULL, NULL, NULL, grad_concat},
    [OP_GATHER] = {"gather", 2, 2, 0, SPECS(a_axis0), infer_gather, eval_gather, flops_zero,
                   NULL, NULL, NULL, grad_gather},
    [OP_INDEX_ADD] = {"index_add", 3, 3, 0, NONE, infer_index_add, eval_index_add,
                      flops_index_add, NULL, NULL, NULL, grad_index_add},

    [OP_SOFTMAX] = COMPOSITE("softmax", 1, 1, 0, SPECS(a_axis_last), infer_softmax,
                             eval_softmax, flops_softmax, dec_softmax),
    [OP_LOG_SOFTMAX] = COMPOSITE("log_softmax", 1, 1, 0, SPECS(a_axis_last), infer_softmax,
                                 eval_log_softmax, flops_softmax, dec_log_softmax),
    [OP_LAYER_NORM] = COMPOSITE("layer_norm", 1, 3, 0, SPECS(a_layer_norm), infer_layer_norm,
                                eval_layer_norm, flops_layer_norm, dec_layer_norm),
    [OP_RMS_NORM] = COMPOSITE("rms_norm", 1, 2, 0, SPECS(a_rms_norm), infer_rms_norm,
                              eval_rms_norm, flops_rms_norm, dec_rms_norm),
    [OP_DROPOUT] = COMPOSITE("dropout", 1, 1, OPF_RANDOM, SPECS(a_dropout), infer_dropout,
                             eval_dropout, flops_dropout, dec_dropout),
    [OP_CROSS_ENTROPY] = COMPOSITE("cross_entropy", 2, 2, 0, SPECS(a_cross_entropy),
                                   infer_cross_entropy, eval_cross_entropy, flops_cross_entropy,
                                   dec_cross_entropy),
    [OP_ATTENTION] = {"attention", 3, 4, OPF_COMPOSITE, SPECS(a_attention), infer_attention,
                      eval_attention, flops_attention, NULL, NULL, dec_attention, grad_attention},
    [OP_CONV] = {"conv", 2, 2, OPF_COMPOSITE, SPECS(a_conv), infer_conv, eval_conv, flops_conv,
                 NULL, NULL, dec_conv, grad_conv},
    [OP_ATTENTION_LSE] = COMPOSITE("attention_lse", 2, 2, 0, SPECS(a_attention),
                                   infer_attention_lse, eval_attention_lse, flops_attention_lse,
                                   dec_attention_lse),
    [OP_ATTENTION_GRAD] = COMPOSITE("attention_grad", 6, 6, 0, SPECS(a_attention),
                                    infer_attention_grad, eval_attention_grad,
                                    flops_attention_grad, dec_attention_grad),
};

int op_lookup(const char *name, size_t n)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (strlen(op_info[op].name) == n && memcmp(op_info[op].name, name, n) == 0)
            return op;
    return -1;
}

const char *op_arity(const OpInfo *op, char *buf, size_t size)
{
    if (op->nin_max < 0)
        snprintf(buf, size, "%d or more", op->nin_min);
    else if (op->nin_max > op->nin_min)
        snprintf(buf, size, "%d to %d", op->nin_min, op->nin_max);
    else
        snprintf(buf, size, "%d", op->nin_min);
    return buf;
}

double flops_zero(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)in, (void)out;
    return 0;
}

/* One FLOP per output element: the convention for pointwise ops, transcendental or not. */
double flops_elems(const Node *n, const ITensor *in, const ITensor *out)
{
    (void)n, (void)in;
    return (double)out->n;
}
