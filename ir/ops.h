/* ops.h — the functions the op table (optable.c) points at, grouped by file.
 * Internal to ir/: passes and backends read op_info[], never these names. */
#ifndef COIL_OPS_H
#define COIL_OPS_H

#include "ir.h"

/* ops_leaf.c: input, param, constant, full, iota, rand */
bool infer_leaf(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_constant(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_iota(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_constant(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_full(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_iota(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_rand(const Node *n, const ITensor *in, ITensor *out, Err *e);

/* ops_pointwise.c: unary, binary with broadcasting, where, cast */
bool infer_unary(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_unary_float(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_binary(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_compare(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_where(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_cast(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_unary(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_binary(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_where(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_copy(const Node *n, const ITensor *in, ITensor *out, Err *e); /* cast, reshape */
bool infer_index_check(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_index_check(const Node *n, const ITensor *in, ITensor *out, Err *e);
/* Broadcast two shapes (numpy rules) into out; false with a message naming the dim. */
bool broadcast_types(const Graph *g, const char *op, const Type *a, const Type *b, Type *out, Err *e);
/* Offset into a broadcast operand for output coordinates idx. */
int64_t broadcast_offset(const ITensor *t, int out_rank, const int64_t *idx);
double s_neg(double), s_abs(double), s_exp(double), s_log(double), s_sqrt(double),
    s_rsqrt(double), s_reciprocal(double), s_tanh(double), s_sigmoid(double),
    s_relu(double), s_gelu(double), s_gelu_tanh(double), s_silu(double), s_sin(double),
    s_cos(double), s_erf(double);
double s_add(double, double), s_sub(double, double), s_mul(double, double),
    s_div(double, double), s_pow(double, double), s_maximum(double, double),
    s_minimum(double, double), s_eq(double, double), s_ne(double, double),
    s_lt(double, double), s_le(double, double), s_gt(double, double), s_ge(double, double);

/* ops_reduce.c: sum, mean, max, min (axes, keepdim), argmax (axis, keepdim) */
bool infer_reduce(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_argmax(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_reduce(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_argmax(const Node *n, const ITensor *in, ITensor *out, Err *e);
double flops_reduce(const Node *n, const ITensor *in, const ITensor *out);

/* ops_shape.c: matmul, transpose, reshape, expand, slice, concat, gather, index_add */
bool infer_matmul(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_transpose(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_reshape(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_expand(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_slice(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_concat(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_gather(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_index_add(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_matmul(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_transpose(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_expand(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_slice(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_concat(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_gather(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_index_add(const Node *n, const ITensor *in, ITensor *out, Err *e);
double flops_index_add(const Node *n, const ITensor *in, const ITensor *out);
double flops_matmul(const Node *n, const ITensor *in, const ITensor *out);
/* Shared with ops_nn.c (attention batches like matmul). A type or dim as text held in a
 * struct, so one message can format several: type_text(g, a).s lives to the end of
 * the full expression. */
typedef struct TypeText {
    char s[256];
} TypeText;
TypeText type_text(const Graph *g, const Type *t);
TypeText dim_text(const Graph *g, Dim d);
/* Numpy broadcast of two dim lists aligned at the right into out[*rank]; on a clash,
 * false with *bad the result dim and *da, *db the two dims that disagree. */
bool broadcast_dims(int ra, const Dim *a, int rb, const Dim *b, Dim *out, int *rank, int *bad,
                    Dim *da, Dim *db);
/* Element offsets in each operand of the matrix (last two dims) that batch element
 * `batch` of out reads, broadcasting the leading dims. */
void batch_offsets(const ITensor *out, int64_t batch, const ITensor *in, int nin, int64_t *off);

/* ops_conv.c: convolution x[N, C, s...] by w[M, C/groups, k...], 1 to 3 spatial axes. Its
 * geometry, resolved from the operand types and the attributes (every list per axis), is
 * what the decomposition, the gradients and a backend's conv step read. */
enum { CONV_MAX_AXES = 3 };
typedef struct ConvGeom {
    int n;                  /* spatial axes */
    int64_t c, m, cg, groups; /* x's channels, w's output channels, channels per group */
    int64_t in[CONV_MAX_AXES], k[CONV_MAX_AXES], stride[CONV_MAX_AXES], dil[CONV_MAX_AXES];
    int64_t pad0[CONV_MAX_AXES], pad1[CONV_MAX_AXES], out[CONV_MAX_AXES];
} ConvGeom;
bool conv_geometry(const Graph *g, const Node *n, const Type *x, const Type *w, ConvGeom *c,
                   Err *e);
bool infer_conv(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_conv(const Node *n, const ITensor *in, ITensor *out, Err *e);
double flops_conv(const Node *n, const ITensor *in, const ITensor *out);
int dec_conv(Builder *b, const Node *n, const int *in);
bool grad_conv(Builder *b, const Node *n, const int *in, int out, int g, int *din);

/* ops_nn.c: the composites, their reference evaluation and decompositions */
bool infer_softmax(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_layer_norm(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_rms_norm(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_dropout(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_cross_entropy(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_attention(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_softmax(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_log_softmax(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_layer_norm(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_rms_norm(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_dropout(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_cross_entropy(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_attention(const Node *n, const ITensor *in, ITensor *out, Err *e);
double flops_softmax(const Node *n, const ITensor *in, const ITensor *out);
double flops_layer_norm(const Node *n, const ITensor *in, const ITensor *out);
double flops_rms_norm(const Node *n, const ITensor *in, const ITensor *out);
double flops_dropout(const Node *n, const ITensor *in, const ITensor *out);
double flops_cross_entropy(const Node *n, const ITensor *in, const ITensor *out);
double flops_attention(const Node *n, const ITensor *in, const ITensor *out);
int dec_softmax(Builder *b, const Node *n, const int *in);
int dec_log_softmax(Builder *b, const Node *n, const int *in);
int dec_layer_norm(Builder *b, const Node *n, const int *in);
int dec_rms_norm(Builder *b, const Node *n, const int *in);
int dec_dropout(Builder *b, const Node *n, const int *in);
int dec_cross_entropy(Builder *b, const Node *n, const int *in);
int dec_attention(Builder *b, const Node *n, const int *in);
/* Attention's scale (the attribute, else 1/sqrt(head_dim)); as a value (run time when D is
 * symbolic); q k^T * scale, masked when causal: shared with ops_attention.c. */
double attention_scale(const Node *n, int64_t head_dim);
int attention_scale_value(Builder *b, const Node *n, int q);
int attention_scores(Builder *b, const Node *n, int q, int k, int bias);

/* ops_attention.c: attention's training ops (its log-sum-exp, its fused backward) and the
 * gradient rule of attention that builds them */
bool infer_attention_lse(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool infer_attention_grad(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
bool eval_attention_lse(const Node *n, const ITensor *in, ITensor *out, Err *e);
bool eval_attention_grad(const Node *n, const ITensor *in, ITensor *out, Err *e);
double flops_attention_lse(const Node *n, const ITensor *in, const ITensor *out);
double flops_attention_grad(const Node *n, const ITensor *in, const ITensor *out);
int dec_attention_lse(Builder *b, const Node *n, const int *in);
int dec_attention_grad(Builder *b, const Node *n, const int *in);
bool grad_attention(Builder *b, const Node *n, const int *in, int out, int g, int *din);

/* grad.c: the gradient rules (GradFn), and g summed back to a broadcast operand's type. */
#define GRAD(name) bool grad_##name(Builder *b, const Node *n, const int *in, int out, int g, int *din);
GRAD(neg) GRAD(abs) GRAD(exp) GRAD(log) GRAD(sqrt) GRAD(rsqrt) GRAD(reciprocal) GRAD(tanh)
GRAD(sigmoid) GRAD(relu) GRAD(gelu) GRAD(gelu_tanh) GRAD(silu) GRAD(sin) GRAD(cos) GRAD(erf)
GRAD(add) GRAD(sub) GRAD(mul) GRAD(div) GRAD(pow) GRAD(maximum) GRAD(minimum) GRAD(where)
GRAD(cast) GRAD(sum) GRAD(mean) GRAD(extremum) GRAD(matmul) GRAD(transpose) GRAD(reshape)
GRAD(expand) GRAD(slice) GRAD(concat) GRAD(gather) GRAD(index_add)
#undef GRAD
int grad_unbroadcast(Builder *b, int g, const Type *to);

/* optable.c: FLOP counts shared by many rows */
double flops_zero(const Node *n, const ITensor *in, const ITensor *out);
double flops_elems(const Node *n, const ITensor *in, const ITensor *out);

#endif
