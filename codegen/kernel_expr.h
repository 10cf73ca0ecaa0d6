/* kernel_expr.h — building one kernel's expression pool: hash-consed Lx nodes (equal expressions
 * are one id, so a value used twice is computed once), statements by phase, and the index
 * algebra that keeps views affine (codegen/index.c). Internal to codegen/. */
#ifndef COIL_CODEGEN_LX_H
#define COIL_CODEGEN_LX_H

#include "codegen/loop.h"

/* Facts an index expression may lack: a bound (extents are >= 0) or a known value. */
#define LX_NO_EXTENT ((Dim){-1, 0, 0})
#define LX_NO_VALUE ((Dim){INT64_MIN, 0, 0})

/* A kernel under construction. Arrays grow with realloc; lx_finish copies them into the
 * program's arena. Any allocation failure makes every later call return -1 (sticky). */
typedef struct KB {
    Lx *lx;
    int nlx, cap;
    int *slot;        /* open-addressing hash of lx ids, -1 empty */
    int nslot;
    Dim *extent;      /* per lx: an index's exclusive bound, or LX_NO_EXTENT */
    Dim *dimval;      /* per lx: the value of an index constant (LX_INT, symbols), or LX_NO_VALUE */
    int *phase_of;    /* per lx: the latest phase whose accumulator it reads, -1 none */
    LStmt *stmt;
    int *stmt_phase;  /* per statement: its phase, -1 for `after` */
    int nstmt, cap_stmt;
    bool oom;
} KB;

void kb_init(KB *kb);
void kb_free(KB *kb);

/* Values. dt is the expression's dtype (loop.h). Each returns an lx id or -1. */
int lx_int(KB *kb, int64_t v);
int lx_dim(KB *kb, Dim d);                    /* k * product of symbols, as i64 */
int lx_var(KB *kb, int var, Dim extent);      /* 0 when the extent is 1 */
int lx_float(KB *kb, double v, DType dt);
int lx_load(KB *kb, int buf, DType dt, int index);
int lx_unary(KB *kb, int op, DType dt, int a);
int lx_binary(KB *kb, int op, DType dt, int a, int b);
int lx_select(KB *kb, DType dt, int c, int a, int b);
int lx_cast(KB *kb, DType dt, int a);         /* a itself when already of dtype dt */
int lx_rand(KB *kb, int64_t seed, int64_t offset, int index);
int lx_acc(KB *kb, int stmt, DType dt);

/* An i64 node (LX_IDIV, LX_IMOD, or LX_BINARY op) with its known bound and value;
 * for index.c. */
int lx_index_node(KB *kb, LxKind kind, int op, int a, int b, Dim extent, Dim dimval);

/* Statements: phase >= 0 walks the inner space, -1 is `after`. Returns the index or -1. */
int kb_store(KB *kb, int phase, int buf, int index, int value);
int kb_store_add(KB *kb, int phase, int buf, int index, int value); /* buf[index] += value */
int kb_reduce(KB *kb, int phase, int op, int value, int axis, DType acc_dt);

/* The kernel's expressions (only those its statements use, renumbered) and statements
 * (phases in order, then `after`) copied into the arena; nouter, sizes and name are the
 * caller's. False when building failed or there are more than LOOP_MAX_PHASES phases. */
bool kb_finish(KB *kb, Arena *arena, Kernel *k);

/* Index algebra (codegen/index.c) over non-negative i64 expressions: sums, products by
 * constants, division and remainder by constants, simplified so that views over dense
 * buffers stay affine in the loop variables (a merged then split dim folds back). */
int ix_add(KB *kb, int a, int b);
int ix_sub_dim(KB *kb, int a, Dim d);         /* a - d (d <= a is the caller's to ensure) */
int ix_mul(KB *kb, int a, Dim c);
int ix_div(KB *kb, int a, Dim d);
int ix_mod(KB *kb, int a, Dim d);
int ix_clamp(KB *kb, int a, Dim size);        /* min(max(a, 0), size - 1), extent size */
/* Sum of idx[d] * stride[d] (+ offset). */
int ix_linear(KB *kb, int n, const int *idx, const Dim *stride, Dim offset);
/* a as an affine combination of loop variables: coef[v] for v < nvar and a constant
 * offset; false when a is not affine (a div, a mod, a load) or its constant is a sum of
 * distinct symbolic terms. */
bool ix_affine(KB *kb, int a, int nvar, Dim *coef, Dim *offset);

/* Dims as index arithmetic: products (false on a repeated symbol), exact quotients. */
bool dim_times(Dim a, Dim b, Dim *out);
bool dim_divides(Dim d, Dim c); /* c is a multiple of d */
Dim dim_quot(Dim c, Dim d);     /* c / d when dim_divides(d, c) */
/* A tensor's element count (squares allowed: f32[B,T,T] has B*T*T); false beyond. */
bool type_size(const Type *t, Dim *out);

#endif
