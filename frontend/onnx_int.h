/* onnx_int.h — what the ONNX importer's two halves share: onnx.c (the file, its values,
 * inputs, outputs and the node loop) and onnx_ops.c (the table of op converters). */
#ifndef COIL_FRONTEND_ONNX_INT_H
#define COIL_FRONTEND_ONNX_INT_H

#include "frontend/frontend.h"
#include "onnx.pb-c.h"

enum { ONNX_MIN_OPSET = 7, ONNX_MAX_OUT = 8, ONNX_MAX_LIST = 64 };

/* A named ONNX value. id is its node (-1 until a constant is first used as an operand);
 * constants (initializers, Constant nodes, values folded at import) also hold their
 * elements, which shapes and axes are read from; shape vectors of a tensor with symbolic
 * dims (Shape of x[B,4]) hold them as Dims in sdim instead. poisoned: made by a node
 * coil could not convert, so its users are skipped (that node is already reported). */
typedef struct OnnxValue {
    const char *name;
    int id;
    Type type;
    double *data; /* numel elements, row-major */
    Dim *sdim;    /* a 1-D i64 shape vector with symbolic entries: numel Dims */
    int64_t numel;
    bool poisoned;
} OnnxValue;

typedef struct Onnx {
    const char *path;
    const ModelOptions *opt; /* the caller's (inputs fixed at load), or NULL */
    Graph *g;
    Builder b;
    Err *e;
    int64_t opset;
    OnnxValue *vals;
    int nval, capval;
    ITensor *fold; /* per node id: its value once folded (fold_node), d NULL otherwise */
    char *known;   /* per node id: 0 not tried, 1 folded, 2 not a constant */
    int nfold;
} Onnx;

typedef struct OnnxOp OnnxOp;

/* One node being converted: its converter sets out[i] for each output it makes. */
typedef struct Cv {
    Onnx *o;
    const Onnx__NodeProto *node;
    const OnnxOp *row;
    int out[ONNX_MAX_OUT];
} Cv;

/* One row per ONNX op type: its converter, the coil op it passes on (for rows sharing a
 * converter), its operand and result counts, and the attributes it understands: any
 * other attribute makes the node unsupported. */
struct OnnxOp {
    const char *name;
    bool (*convert)(Cv *c);
    int op;
    int min_in, max_in, max_out;
    const char *attrs; /* space-separated */
};

const OnnxOp *onnx_op_find(const char *name);
/* The first opset whose default domain has the op (1 for those from before opset 7). */
int onnx_op_since(const char *name);

/* onnx.c: values */
OnnxValue *onnx_value(Onnx *o, const char *name);
OnnxValue *onnx_value_add(Onnx *o, const char *name);
bool onnx_dtype(int onnx_type, DType *out);
const char *onnx_dtype_name(int onnx_type);
/* A TensorProto's elements into v (dims, dtype, data): typed fields, raw_data, or an
 * external file in the model's folder (o->path). */
bool onnx_tensor_read(Onnx *o, const Onnx__TensorProto *t, OnnxValue *v);
/* The node id of a value, building a constant's node on its first use. */
int onnx_operand(Onnx *o, const char *name);
/* The value of node id when it is computable now (every leaf below it a constant, static
 * shapes, at most a million elements), or NULL. */
const ITensor *onnx_fold(Onnx *o, int id);

/* onnx.c: a node's failures, "PATH: node 'NAME' (OP): ..."; false */
bool cv_unsupported(const Cv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool cv_invalid(const Cv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* onnx_cv.c: what converters read and build */
static inline Builder *cv_b(Cv *c) { return &c->o->b; }
bool cv_has(const Cv *c, size_t i);      /* operand i given (not absent, not "") */
int cv_in(Cv *c, size_t i);              /* operand i's node id */
Type cv_type(Cv *c, int id);             /* a copy: builder pointers go stale */
const Onnx__AttributeProto *cv_attr(const Cv *c, const char *name);
int64_t cv_int(const Cv *c, const char *name, int64_t def);
double cv_float(const Cv *c, const char *name, double def);
/* A string attribute (or def) is `want`. */
bool cv_str_is(const Cv *c, const char *name, const char *def, const char *want);
/* A string attribute (or def) copied into buf, which it returns. */
const char *cv_str(const Cv *c, const char *name, const char *def, char *buf, size_t n);
/* The elements of constant operand i (an initializer, a Constant, or folded now), or NULL;
 * *numel their count. */
const double *cv_const(Cv *c, size_t i, int64_t *numel);
/* Equal and Where on shape vectors with symbolic entries (onnx_shape.c). */
bool cv_equal_shapes(Cv *c);
bool cv_where_shapes(Cv *c);
/* The error for operand i that is not a constant; false. */
bool cv_need_const(const Cv *c, size_t i);
/* cv_ints's operand index for an op whose list is only ever an attribute */
#define CV_ATTR_ONLY ((size_t)-1)
/* Integers from constant operand i, else from attribute attr (NULL: none); *n = -1 when
 * neither is given. False (with the node's error) when the operand is not constant. */
bool cv_ints(Cv *c, size_t i, const char *attr, int64_t *out, int *n);
/* A shape vector (Reshape's, Expand's...) from operand i: constant entries, or Dims of a
 * Shape of a symbolic tensor. */
bool cv_shape(Cv *c, size_t i, Dim *out, int *n);
/* Result i is a shape vector (i64[n], or a scalar when rank 0), not a node. */
void cv_define_shape(Cv *c, size_t i, const Dim *d, int n, int rank);
/* Result i is a constant with these elements (dt, dims). */
void cv_define_const(Cv *c, size_t i, DType dt, int rank, const int64_t *dims, const double *d);
/* Operand i's shape-vector entries when it is one (Shape of a symbolic tensor), or NULL. */
const OnnxValue *cv_shape_value(Cv *c, size_t i);

int cv_scalar(Cv *c, double v, DType dt);
int cv_un(Cv *c, int op, int x);
int cv_bin(Cv *c, int op, int x, int y);
int cv_where(Cv *c, int cond, int x, int y);
int cv_cast(Cv *c, int x, DType dt);
int cv_reshape(Cv *c, int x, int rank, const Dim *dims);
/* x as the matrix [d0 * ... * d(axis-1), d(axis) * ... * d(n-1)]: Flatten's, and how
 * Softmax and its kin saw their operand before opset 13. */
int cv_flatten_at(Cv *c, int x, int axis);
/* x with axis moved to the end, and (of such a result) back to axis. */
int cv_to_last(Cv *c, int x, int axis);
int cv_from_last(Cv *c, int x, int axis);
/* x reversed along axis (a gather of n-1 ... 0; static axis). */
int cv_reverse(Cv *c, int x, int axis);
/* floor and trunc of a float tensor, through i64 casts where the value can have a
 * fraction (|x| < 2^52). */
int cv_floor(Cv *c, int x);
int cv_trunc(Cv *c, int x);
/* Normalised axes (rank given); false with the node's error when one is out of range or
 * repeated. */
bool cv_axes(Cv *c, const int64_t *axes, int n, int rank, int64_t *out);

/* Converters of onnx_shape.c (data movement, shapes, constants) and onnx_conv.c
 * (convolutions, pools, resize), in onnx_ops.c's table. */
#define ONNX_CONVERTERS(X)                                                                    \
    X(reshape) X(flatten) X(unsqueeze) X(squeeze) X(transpose) X(concat) X(split) X(slice)   \
    X(gather) X(gather_elements) X(expand) X(tile) X(shape) X(size) X(constant)               \
    X(constant_of_shape) X(range) X(eye_like) X(trilu) X(one_hot) X(pad) X(depth_to_space)    \
    X(space_to_depth) X(identity) X(cast) X(cast_like) X(conv) X(conv_transpose) X(max_pool) \
    X(average_pool) X(lp_pool) X(resize) X(center_crop_pad) X(gather_nd) X(scatter_nd)       \
    X(scatter_elements) X(window) X(lrn) X(causal_conv)
#define ONNX_DECLARE(name) bool conv_##name(Cv *c);
ONNX_CONVERTERS(ONNX_DECLARE)
#undef ONNX_DECLARE

#endif
