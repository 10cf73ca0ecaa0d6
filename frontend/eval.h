/* eval.h — internal to the evaluation into a graph (to_graph.c, builtins.c): compile-time
 * values, the evaluator's state, and the helpers both files use to check and convert them. */
#ifndef COIL_FRONTEND_EVAL_H
#define COIL_FRONTEND_EVAL_H

#include "frontend/to_graph.h"

typedef enum VKind {
    V_NONE, V_INT, V_FLOAT, V_BOOL, V_DIM, V_STR, V_DTYPE, V_LIST, V_TENSOR,
    V_DIMS, /* the leading dims bound by `...` */
} VKind;

/* A value of the evaluator: a compile-time value or a tensor (an IR node id).
 * A V_DIM is always symbolic (a static dim is a V_INT). */
typedef struct Value {
    VKind kind;
    int64_t i;   /* V_INT, V_BOOL */
    double f;    /* V_FLOAT */
    Dim dim;     /* V_DIM */
    const char *s; /* V_STR */
    DType dt;    /* V_DTYPE */
    int id;      /* V_TENSOR */
    int n;       /* V_LIST, V_DIMS */
    const struct Value *items;
} Value;

/* One block (or the model) being evaluated. */
typedef struct Frame {
    NameMap names;      /* local name -> Value* */
    const char *prefix; /* parameter name prefix: "" or "layers.3." */
    const Item *item;
    int depth;          /* block call depth */
    const Value *ret;   /* the return statement's values, once executed */
    int nret;
    Loc ret_loc;        /* where the return statement is */
    Loc site;           /* for prelude blocks: the user's call that led here */
} Frame;

typedef struct Lower {
    const Source *p;
    const FeOptions *o;
    Arena *arena;       /* values and strings of this lowering */
    Graph *g;
    Builder b;
    Err berr;           /* the builder's sticky error, turned into a diagnostic */
    NameMap config;     /* name -> Value* */
    NameMap params;     /* full parameter name -> Loc* of its declaration */
    Frame *frame;
    long steps;
    int ndropout;
    bool failed;
    struct BufferUpdate { int buffer, value; Loc loc; } *update; /* training: the buffers' */
    int nupdate, cap_update;                                       /* new values (outputs) */
} Lower;

/* Where to point for something at loc: inside prelude blocks, the user's call site. */
Loc user_loc(const Lower *L, Loc loc);
/* Report an error at loc (the first one only: lowering stops there); returns false. */
bool fail(Lower *L, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline Value v_int(int64_t i) { return (Value){.kind = V_INT, .i = i}; }
static inline Value v_float(double f) { return (Value){.kind = V_FLOAT, .f = f}; }
static inline Value v_bool(bool b) { return (Value){.kind = V_BOOL, .i = b}; }
static inline Value v_tensor(int id) { return (Value){.kind = V_TENSOR, .id = id}; }
static inline bool v_is_number(const Value *v) { return v->kind == V_INT || v->kind == V_FLOAT; }
static inline double v_number(const Value *v) { return v->kind == V_INT ? (double)v->i : v->f; }
Value v_dim(Dim d); /* V_INT when static */

/* "tensor f32[B,4]", "integer 3", ... for messages. */
const char *v_describe(const Lower *L, const Value *v, char *buf, size_t n);
const Type *v_type(const Lower *L, const Value *v);

/* Evaluate one expression (a call must give exactly one value) or a call's values. */
bool eval_expr(Lower *L, const Expr *e, Value *out);
bool eval_call_multi(Lower *L, const Expr *call, Value *out, int max, int *n);

/* Checked conversions; `what` names the thing in the message ("axis", "argument 'x'"). */
bool wrong_kind(Lower *L, Loc loc, const Value *v, const char *what, const char *want);
bool want_tensor(Lower *L, Loc loc, const Value *v, const char *what, int *id);
bool want_int(Lower *L, Loc loc, const Value *v, const char *what, int64_t *out);
bool want_number(Lower *L, Loc loc, const Value *v, const char *what, double *out);
bool want_bool(Lower *L, Loc loc, const Value *v, const char *what, bool *out);
bool want_dim(Lower *L, Loc loc, const Value *v, const char *what, Dim *out);
/* A list of dims as a shape; one -1 entry allowed when infer is non-NULL (set to its index). */
bool want_shape(Lower *L, Loc loc, const Value *v, DType dt, Type *out, int *infer);
/* Binary operators on compile-time values (ints, floats, symbolic dims, bools). */
bool fold_binary(Lower *L, Loc loc, int op, const Value *a, const Value *b, Value *out);
/* A number or tensor as a tensor; numbers become a rank-0 full of dtype dt. */
bool as_tensor(Lower *L, Loc loc, const Value *v, DType dt, int *id);
/* After a builder call: turn a failure into a diagnostic at L->b.loc. */
bool built(Lower *L, int id, Value *out);
/* x[i, a:b:c, ...] as slice and reshape ops (builtins.c). */
bool lower_index(Lower *L, const Expr *e, Value *out);
/* Apply an IR op (by code) to evaluated operands; numbers are lifted or folded. */
bool apply_op(Lower *L, Loc loc, int op, const Value *args, int nargs, const Attr *attrs,
              int nattr, Value *out);

/* A buffer's new value in training, the model's output "update.<buffer>" (to_graph.c);
 * a second update of the same buffer is an error at loc. */
bool record_buffer_update(Lower *L, Loc loc, int buffer, int value);

/* builtins.c: IR ops by name and the builtin forms; false with a diagnostic. */
bool call_builtin(Lower *L, const Expr *call, Value *out, int max, int *n);
bool call_ir_op(Lower *L, int op, const Expr *call, Value *out);

/* A builtin form's arguments, bound to its parameter list (builtins.c's table). */
typedef struct BArgs {
    Value v[BI_MAX];
    Loc loc[BI_MAX];
    bool given[BI_MAX];
} BArgs;
/* Argument i as a tensor; `name` names it in the message. */
bool arg_tensor(Lower *L, const BArgs *a, int i, const char *name, int *id);
/* An integer, or a list of them, as *n integers in the lowering's arena. */
bool int_list(Lower *L, Loc loc, const Value *v, const char *what, int *n, int64_t **out);
/* A list of numbers as *n doubles in the lowering's arena. */
bool number_list(Lower *L, Loc loc, const Value *v, const char *what, int *n, double **out);

/* pooling.c: the pooling, padding, transposed convolution and resize forms (loc: the call) */
bool bi_max_pool(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_avg_pool(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_global_avg_pool(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_global_max_pool(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_pad(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_conv_transpose(Lower *L, Loc loc, const BArgs *a, Value *out);
bool bi_resize(Lower *L, Loc loc, const BArgs *a, Value *out);

#endif
