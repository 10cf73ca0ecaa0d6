/* ir.h — coil's typed SSA graph: dtypes, symbolic shapes, attributes, nodes,
 * the op table, the builder and the reference interpreter's entry points.
 * Every later stage (passes, codegen, runtime) reads these structs and nothing else. */
#ifndef COIL_IR_H
#define COIL_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define COIL_MAX_RANK 8
#define COIL_MAX_SYMS 32
/* The symbol table kernels read at run time: the symbols, then one reserved slot holding
 * the run's rng step, which random ops put in Philox's counter words 2 and 3 (so a
 * training step draws new dropout masks without recompiling; step 0 is coil's old draw). */
#define COIL_SYM_RNG_STEP COIL_MAX_SYMS
#define COIL_SYM_SLOTS (COIL_MAX_SYMS + 1)

/* ---------------------------------------------------------------- dtypes */

typedef enum DType { DT_F32, DT_F16, DT_BF16, DT_I8, DT_I32, DT_I64, DT_BOOL, DT_COUNT } DType;

typedef struct DTypeInfo {
    const char *name; /* as printed in IR text: "f32" */
    int size;         /* bytes per element */
    bool is_float;
    const char *npy;  /* NumPy descr: "<f4"; bf16 travels as "<u2" */
} DTypeInfo;

extern const DTypeInfo dtype_info[DT_COUNT];
bool dtype_parse(const char *s, size_t n, DType *out);
/* The value a tensor of this dtype would hold after storing v:
 * round-to-nearest-even for floats, truncation then wrap-around for ints, v != 0 for bool. */
double dtype_round(DType dt, double v);
/* Raw element access for host tensors in their native dtype. */
double dtype_load(DType dt, const void *base, int64_t i);
void dtype_store(DType dt, void *base, int64_t i, double v);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
/* The same two inline, by the bits (round to nearest even; a NaN stays a NaN, its payload
 * kept where f32_to_bf16 makes it canonical): for loops over millions of values. */
static inline uint16_t bf16_pack(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
static inline float bf16_unpack(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- shapes */

/* A dimension is k times a product of symbols: static when syms == 0 (k >= 0),
 * symbolic otherwise ("B" is k=1, syms={B}; a merged reshape gives "B*T").
 * Bit i of syms names graph->sym[i]. */
typedef struct Dim {
    int64_t k;
    uint32_t syms;
    uint32_t sq; /* of syms, those squared: never in a type's dims, but the products code
                    generation forms (a [B,H,T,T] tensor's B*H*T*T elements, its strides) */
} Dim;

typedef struct Type {
    DType dt;
    int rank;
    Dim dim[COIL_MAX_RANK];
} Type;

static inline Dim dim_static(int64_t k) { return (Dim){k, 0, 0}; }
static inline bool dim_is_static(Dim d) { return d.syms == 0; }
static inline bool dim_eq(Dim a, Dim b) { return a.k == b.k && a.syms == b.syms && a.sq == b.sq; }
/* The value of d when symbol s has value val[s] (squared symbols twice). */
int64_t dim_eval(Dim d, const int64_t *val);
Dim dim_mul(Dim a, Dim b, bool *overflow); /* false overflow if a symbol repeats */
bool type_eq(const Type *a, const Type *b);
bool type_same_shape(const Type *a, const Type *b);
Type type_scalar(DType dt);
Type type_make(DType dt, int rank, const int64_t *dims); /* static dims */
/* Number of elements as a Dim (product of all dims). */
Dim type_numel(const Type *t, bool *overflow);
/* Normalise a possibly negative axis against rank; false when out of range. */
bool axis_norm(int64_t axis, int rank, int *out);

/* ---------------------------------------------------------------- attributes */

typedef enum AttrKind { AK_INT, AK_FLOAT, AK_BOOL, AK_INTS, AK_STR, AK_DATA } AttrKind;

/* A large constant's elements (BLOB_MIN or more), shared by every graph that holds them
 * and never changed (blob.c): passes copy graphs, and weights must not be copied with them.
 * Each graph holds a reference per use; the last release frees it. */
typedef struct Blob Blob;
#define BLOB_MIN 1024
const Blob *blob_new(const double *data, int64_t n); /* copies data; one reference */
void blob_retain(const Blob *b);
void blob_release(const Blob *b);
const double *blob_data(const Blob *b);
uint64_t blob_hash(const Blob *b); /* FNV-1a of the elements' bytes, computed once */

/* One attribute value. ints/data point into the graph's arena, or data into a blob. */
typedef struct Attr {
    const char *name;
    AttrKind kind;
    int64_t i;          /* AK_INT, AK_BOOL (0/1) */
    double f;           /* AK_FLOAT */
    int n;              /* length of ints or data */
    const int64_t *ints;/* AK_INTS */
    const double *data; /* AK_DATA: a constant's elements, row-major, as doubles */
    const Blob *blob;   /* AK_DATA of BLOB_MIN elements or more: where data lives */
    const char *s;      /* AK_STR */
} Attr;

/* An op's attribute schema. Optional attributes take `def` (numbers, bools) or
 * an empty list / NULL string; the printer omits attributes equal to their default. */
typedef struct AttrSpec {
    const char *name;
    AttrKind kind;
    bool required;
    double def;
} AttrSpec;

static inline Attr attr_int(const char *name, int64_t v) { return (Attr){.name = name, .kind = AK_INT, .i = v}; }
static inline Attr attr_float(const char *name, double v) { return (Attr){.name = name, .kind = AK_FLOAT, .f = v}; }
static inline Attr attr_bool(const char *name, bool v) { return (Attr){.name = name, .kind = AK_BOOL, .i = v}; }
static inline Attr attr_ints(const char *name, int n, const int64_t *v) { return (Attr){.name = name, .kind = AK_INTS, .n = n, .ints = v}; }
static inline Attr attr_str(const char *name, const char *s) { return (Attr){.name = name, .kind = AK_STR, .s = s}; }
static inline Attr attr_data(const char *name, int n, const double *d) { return (Attr){.name = name, .kind = AK_DATA, .n = n, .data = d}; }

/* ---------------------------------------------------------------- ops */

/* The op codes; ir/optable.c holds one row per code. */
typedef enum OpCode {
    /* leaves */
    OP_INPUT, OP_PARAM, OP_CONSTANT, OP_FULL, OP_IOTA, OP_RAND,
    /* pointwise unary */
    OP_NEG, OP_ABS, OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_RECIPROCAL, OP_TANH,
    OP_SIGMOID, OP_RELU, OP_GELU, OP_GELU_TANH, OP_SILU, OP_SIN, OP_COS, OP_ERF,
    /* pointwise binary, numpy broadcasting */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE,
    /* other pointwise */
    OP_WHERE, OP_CAST, OP_INDEX_CHECK,
    /* reductions */
    OP_SUM, OP_MEAN, OP_MAX, OP_MIN, OP_ARGMAX,
    /* contraction */
    OP_MATMUL,
    /* data movement */
    OP_TRANSPOSE, OP_RESHAPE, OP_EXPAND, OP_SLICE, OP_CONCAT, OP_GATHER,
    OP_INDEX_ADD, /* gather's adjoint: rows of src added into a copy of base at the indices */
    /* composites (each has a decomposition into the ops above) */
    OP_SOFTMAX, OP_LOG_SOFTMAX, OP_LAYER_NORM, OP_RMS_NORM, OP_DROPOUT,
    OP_CROSS_ENTROPY, OP_ATTENTION,
    OP_CONV, /* composite too: im2col + matmul where a backend has no conv step */
    /* attention's training ops (composites: decomposed where no fused kernel runs them) */
    OP_ATTENTION_LSE, OP_ATTENTION_GRAD,
    OP_COUNT
} OpCode;

enum {
    OPF_LEAF = 1 << 0,       /* no operands: input, param, constant, full, iota, rand */
    OPF_TYPED = 1 << 1,      /* result type is given (annotation/builder), infer only checks it */
    OPF_POINTWISE = 1 << 2,  /* elementwise with broadcasting */
    OPF_REDUCE = 1 << 3,
    OPF_VIEW = 1 << 4,       /* pure data movement: transpose, reshape, expand, slice */
    OPF_COMPOSITE = 1 << 5,  /* has a decomposition */
    OPF_COMMUTATIVE = 1 << 6,
    OPF_RANDOM = 1 << 7,     /* draws from the counter-based RNG (seed, offset, rng step) */
};

typedef struct Graph Graph;
typedef struct Node Node;
typedef struct Builder Builder;

/* A tensor of the reference interpreter: concrete shape, elements held as doubles
 * (already rounded to the node's dtype). */
typedef struct ITensor {
    int rank;
    int64_t shape[COIL_MAX_RANK];
    int64_t n;
    double *d;
} ITensor;

/* Type inference: `in` are the operand types. For OPF_TYPED ops *out holds the
 * declared type on entry and infer checks it. On failure write a message (no
 * position, starting with the op's name) to e and return false. */
typedef bool (*InferFn)(const Graph *g, const Node *n, const Type *in, Type *out, Err *e);
/* Reference evaluation; out->shape, rank and n are set and out->d allocated by the caller.
 * Values are rounded to the result dtype by the caller afterwards. An OPF_RANDOM op gets
 * one operand more than it has: a scalar holding the run's rng step. */
typedef bool (*EvalFn)(const Node *n, const ITensor *in, ITensor *out, Err *e);
/* FLOPs for one evaluation at concrete shapes (in[i] is operand i's shape). */
typedef double (*FlopsFn)(const Node *n, const ITensor *in, const ITensor *out);
/* Decomposition: build primitives computing node n from operands `in` (new ids);
 * return the id of the value replacing n, or -1 with b's error set. */
typedef int (*DecomposeFn)(Builder *b, const Node *n, const int *in);
/* Gradient rule (filled by the training issue): given dout, add the gradients
 * of each operand to din[] (-1 where none). */
typedef bool (*GradFn)(Builder *b, const Node *n, const int *in, int out, int dout, int *din);

typedef struct OpInfo {
    const char *name;
    int nin_min, nin_max; /* nin_max < 0: variadic */
    unsigned flags;
    const AttrSpec *attrs;
    int nattr;
    InferFn infer;
    EvalFn eval;
    FlopsFn flops;
    double (*scalar1)(double);          /* pointwise unary semantics, in f64 */
    double (*scalar2)(double, double);  /* pointwise binary semantics, in f64 */
    DecomposeFn decompose;
    GradFn grad;
} OpInfo;

extern const OpInfo op_info[OP_COUNT];
int op_lookup(const char *name, size_t n); /* OpCode or -1 */
/* Whether attention node n's gradient can be its fused backward (attention_lse and
 * attention_grad, ir/ops_attention.c): static head dims D == Dv, as many keys as queries,
 * q, k and v of the result's batch dims (none broadcast). Else autodiff decomposes it. */
bool attention_grad_fusable(const Graph *g, const Node *n);
/* Attention and its training ops: each one fused step where a backend keeps them whole. */
static inline bool is_attention_op(int op)
{
    return op == OP_ATTENTION || op == OP_ATTENTION_LSE || op == OP_ATTENTION_GRAD;
}
/* How many operands op takes, as text: "2", "1 to 3", "1 or more". Returns buf. */
const char *op_arity(const OpInfo *op, char *buf, size_t size);

/* ---------------------------------------------------------------- graph */

struct Node {
    int op;       /* OpCode */
    Type type;
    int nin;
    int *in;      /* operand node ids, each < this node's id */
    Attr *attr;   /* op_info[op].nattr entries, in schema order */
    Loc loc;
};

/* A graph: nodes in topological order (operands before users), named inputs,
 * named outputs, and the symbols its shapes use. One arena owns everything
 * except the node array. */
struct Graph {
    Arena *arena;
    const char *name;
    Node *node;
    int nnode, cap;
    int *input;             /* ids of OP_INPUT nodes, in signature order */
    int ninput, cap_input;
    int *output;            /* ids of output values */
    const char **output_name;
    int noutput, cap_output;
    const char *sym[COIL_MAX_SYMS];
    int nsym;
    const Blob **blob;      /* the blobs its constants hold, one reference each */
    int nblob, cap_blob;
};

Graph *graph_new(const char *name);
void graph_free(Graph *g);
/* Intern a symbol name; its bit index, or -1 if the graph has too many. */
int graph_sym(Graph *g, const char *name, size_t len);
int graph_sym_find(const Graph *g, const char *name, size_t len);
/* Format a dim, a type, into buf ("B*T", "f32[B,1024]"); returns buf. */
char *dim_fmt(const Graph *g, Dim d, char *buf, size_t n);
char *type_fmt(const Graph *g, const Type *t, char *buf, size_t n);
/* Attribute lookup by name on a node (NULL when the op has no such attribute). */
const Attr *node_attr(const Node *n, const char *name);
int64_t node_int(const Node *n, const char *name);
double node_float(const Node *n, const char *name);
const char *node_str(const Node *n, const char *name);
/* Param nodes in node order: fills ids (may be NULL) and returns the count. */
int graph_params(const Graph *g, int *ids);
/* The name of an input or param node. */
const char *node_name(const Node *n);
/* A param the model keeps but does not train (its `buffer` attribute): no gradient; a
 * training step sets it to the model's output "update.<name>" where there is one. */
bool param_is_buffer(const Node *n);
/* The output that updates buffer `name` in training ("update.<name>"), or -1. */
int graph_buffer_update(const Graph *g, const char *name);

/* ---------------------------------------------------------------- builder */

/* The builder appends nodes to a graph, filling attribute defaults, checking
 * attribute names and kinds, and inferring types. Errors are sticky: after the
 * first failure every call returns -1, and an operand id of -1 propagates, so
 * a sequence of calls can be checked once at the end. */
struct Builder {
    Graph *g;
    Err *err;
    Loc loc; /* attached to new nodes and to their errors */
};

Builder builder_make(Graph *g, Err *err);
/* The general entry point. declared: the result type for OPF_TYPED ops (else NULL). */
int b_op(Builder *b, int op, const int *in, int nin, const Attr *attrs, int nattr, const Type *declared);
int b_input(Builder *b, const char *name, const Type *t);
int b_param(Builder *b, const char *name, const Type *t, const char *init);
int b_buffer(Builder *b, const char *name, const Type *t, const char *init);
int b_output(Builder *b, int value, const char *name); /* name NULL: "out<i>" */

int b_unary(Builder *b, int op, int x);
int b_binary(Builder *b, int op, int x, int y);
int b_where(Builder *b, int c, int x, int y);
int b_cast(Builder *b, int x, DType dt);
int b_reduce(Builder *b, int op, int x, int naxes, const int64_t *axes, bool keepdim);
int b_argmax(Builder *b, int x, int64_t axis, bool keepdim);
int b_matmul(Builder *b, int x, int y);
int b_transpose(Builder *b, int x, int rank, const int64_t *perm);
int b_reshape(Builder *b, int x, const Type *t);
int b_expand(Builder *b, int x, const Type *t);
int b_slice(Builder *b, int x, int64_t axis, int64_t start, int64_t end, int64_t step);
int b_concat(Builder *b, const int *xs, int n, int64_t axis);
int b_gather(Builder *b, int table, int idx, int64_t axis);
/* x's axis as its sliding windows [out, k] (window o's tap j at o*stride + j*dil): one gather
 * of constant indices, the axis replaced by the two (ir/ops_conv.c). */
int b_windows(Builder *b, int x, int64_t axis, int64_t out, int64_t k, int64_t stride,
              int64_t dil);
/* base with src[i..., :] added into row idx[i...] of axis 0 (torch's index_add, idx of
 * any rank): base [V, rest..], idx integer [S..], src [S.., rest..] of base's dtype. */
int b_index_add(Builder *b, int base, int idx, int src);
int b_full(Builder *b, double v, const Type *t);
int b_scalar(Builder *b, double v, DType dt); /* full of rank 0 */
int b_constant(Builder *b, const Type *t, const double *data);
int b_iota(Builder *b, const Type *t, int64_t axis);
int b_rand(Builder *b, const Type *t, int64_t seed, int64_t offset);
/* The type of node id, NULL for -1. The pointer goes stale when the next node is built
 * (the node array grows): copy the Type when you keep it across b_* calls. */
const Type *b_type(const Builder *b, int id);
/* Node id's type copied into *t, which stays valid across b_* calls; false for -1. */
bool b_type_of(const Builder *b, int id, Type *t);
/* x with its last two dims swapped (a transpose); -1 for -1. */
int b_swap_last(Builder *b, int x);
/* x with axis `from` moved to position `to`, the others in order (a transpose, or x itself
 * when from == to); -1 for -1. */
int b_move_axis(Builder *b, int x, int from, int to);

/* ---------------------------------------------------------------- host tensors */

/* A tensor in host memory in its native dtype (bf16/f16 as uint16 bits). */
typedef struct Tensor {
    DType dt;
    int rank;
    int64_t shape[COIL_MAX_RANK];
    void *data; /* malloc'd; tensor_free releases it */
} Tensor;

int64_t tensor_numel(const Tensor *t);
size_t tensor_nbytes(const Tensor *t);
bool tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *shape, Err *e);
void tensor_free(Tensor *t);
/* Shape as text "f32[2,3]" into buf. */
char *tensor_fmt(const Tensor *t, char *buf, size_t n);

/* ---------------------------------------------------------------- rng */

/* Philox4x32-10, counter-based: the same (seed, counter) gives the same numbers on
 * every backend, so dropout masks and initialisers agree everywhere. */
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* counter -> ctr = {lo, hi, step lo, step hi}, seed -> key = {lo, hi}; philox4x32 is
 * step 0. */
void philox4x32_step(uint64_t seed, uint64_t counter, uint64_t step, uint32_t out[4]);
void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* Element `index` of stream (seed, offset) is philox4x32(seed, offset + index):
 * uniform = (word0 >> 8) * 2^-24; normal = Box-Muller on words 0 and 1. */
/* Uniform in [0, 1) from element `index` of the stream (seed, offset), at a run's rng
 * step (what makes dropout draw a new mask each training step); philox_uniform is step 0. */
double philox_uniform_step(uint64_t seed, uint64_t step, uint64_t offset, uint64_t index);
double philox_uniform(uint64_t seed, uint64_t offset, uint64_t index);
/* Standard normal (Box-Muller on the same stream). */
double philox_normal(uint64_t seed, uint64_t offset, uint64_t index);

/* ---------------------------------------------------------------- interpreter */

/* Symbol values (graph->sym order), bound from the inputs' shapes, and the run's rng
 * step in val[COIL_SYM_RNG_STEP] (bind_inputs makes it 0): val is the kernels' syms table. */
typedef struct SymBind {
    int64_t val[COIL_SYM_SLOTS];
    bool known[COIL_MAX_SYMS];
} SymBind;

/* Whether a and b bind the same sizes; the rng step aside, as plans and tuning do not
 * depend on it. */
bool sym_same_sizes(const SymBind *a, const SymBind *b);

/* Resolve a type to concrete dims under bindings; false if a symbol is unbound. */
bool type_resolve(const Type *t, const SymBind *sb, int64_t *dims);
/* Bytes of a value of type t under sb; -1 when a symbol is unbound or it overflows. */
int64_t type_bytes(const Type *t, const SymBind *sb);
/* Bind symbols from input tensors; errors name the input and the disagreeing dim
 * (signature.c, with the checks below). */
bool bind_inputs(const Graph *g, const Tensor *inputs, SymBind *sb, Err *e);
/* The error for a tensor `got` given for `what` ("input", "parameter") `name` of type
 * want: "expected f32[B,4], got f32[2,5]" (dim >= 0: the one that disagrees); false. */
bool tensor_mismatch(const Graph *g, const char *what, const char *name, const Type *want,
                     const Tensor *got, int dim, Err *e);
/* ir/signature.c: parameters (graph_params order) must have their declared dtype and
 * shape at sb (the message names the first that does not); outputs allocated at sb.
 * reuse_output_tensors keeps an output that already holds data of the right dtype and
 * shape and frees one that does not (its caller passes zeroed or freed tensors, or last
 * run's to overwrite). */
bool check_param_tensors(const Graph *g, const Tensor *params, const SymBind *sb, Err *e);
bool alloc_output_tensors(const Graph *g, const SymBind *sb, Tensor *outputs, Err *e);
bool reuse_output_tensors(const Graph *g, const SymBind *sb, Tensor *outputs, Err *e);

/* Evaluate g. inputs: one per graph input, in order; params: one per param node
 * in node order (graph_params). outputs: noutput tensors, allocated here.
 * flops (may be NULL) receives the total FLOP count at these shapes. */
bool interp_run(const Graph *g, const Tensor *inputs, const Tensor *params,
                Tensor *outputs, double *flops, Err *e);
/* The same at rng step `step` (interp_run is step 0): random ops draw that step's numbers.
 * The reference evaluators hold the step as an f64, so it is exact below 2^53. */
bool interp_run_at(const Graph *g, uint64_t step, const Tensor *inputs, const Tensor *params,
                   Tensor *outputs, double *flops, Err *e);
/* Evaluate one node from operand values (constant folding uses this): allocates out
 * at the node's type resolved under sb, runs the op's eval, rounds to the dtype. */
/* The same without rounding: every value kept in f64 (for gradient checks by finite
 * differences); outputs[i].d malloc'd, the caller frees them. */
bool interp_run_f64(const Graph *g, const Tensor *inputs, const Tensor *params, ITensor *outputs,
                    Err *e);
bool interp_run_f64_at(const Graph *g, uint64_t step, const Tensor *inputs, const Tensor *params,
                       ITensor *outputs, Err *e);
bool interp_eval_node(const Graph *g, int id, const ITensor *in, const SymBind *sb,
                      ITensor *out, Err *e);

/* ---------------------------------------------------------------- text form */

/* ir/print.c: the IR text form (docs/IR.md). Returns a malloc'd string. */
char *ir_print(const Graph *g);
/* ir/parse.c: parse IR text; errors are "FILE:LINE:COL: error: ..." and never crash. */
Graph *ir_parse(const char *text, size_t len, const char *filename, Err *e);
Graph *ir_parse_file(const char *path, Err *e);
/* The same parser on pieces of a statement given alone (the C API's builder): an op name
 * (OpCode, or -1 with a "did you mean"), a type "f32[B,16]" (its symbols interned in g),
 * an op's attributes "axis=1, keepdim=true" (braces optional; at most op_info[op].nattr
 * of them into attrs, their lists and strings in tmp). Errors have no position. */
int ir_parse_op(const char *text, Err *e);
bool ir_parse_type(Graph *g, const char *text, Type *t, Err *e);
bool ir_parse_attrs(int op, const char *text, Arena *tmp, Attr *attrs, int *nattrs, Err *e);
/* ir/verify.c: SSA order, operand counts, attribute schemas, types re-inferred. */
bool ir_verify(const Graph *g, Err *e);

#endif
