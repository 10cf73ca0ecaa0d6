/* grad.c — the op table's gradient rules (OpInfo.grad): given dout, the gradient of the
 * loss with respect to a node's value, each rule builds the gradients of its operands
 * (din[j], -1 where an operand has none) with the builder. Gradients of broadcast
 * operands are summed back to the operand's shape. Composites have no rule: autodiff
 * decomposes them first, so only primitives need one. */
#include <math.h>

#include "ops.h"

/* ---------------------------------------------------------------- building blocks */

/* b_type's pointer points into the node array, which the next builder call may move (it
 * grows with realloc), so no rule holds one across a call: every rule reads the types it
 * needs through b_type_of first. */

static DType dt_of(Builder *b, int x)
{
    Type t;
    return b_type_of(b, x, &t) ? t.dt : DT_F32;
}

static int k_(Builder *b, double v, int like) { return b_scalar(b, v, dt_of(b, like)); }
static int add_(Builder *b, int x, int y) { return b_binary(b, OP_ADD, x, y); }
static int sub_(Builder *b, int x, int y) { return b_binary(b, OP_SUB, x, y); }
static int mul_(Builder *b, int x, int y) { return b_binary(b, OP_MUL, x, y); }
static int div_(Builder *b, int x, int y) { return b_binary(b, OP_DIV, x, y); }
static int zero_where(Builder *b, int cond, int g) { return b_where(b, cond, g, k_(b, 0, g)); }

static void b_fail(Builder *b, const char *msg)
{
    if (err_ok(b->err))
        err_at(b->err, b->loc, "%s", msg);
}

/* g summed back to operand x's shape. */
static int unbroadcast_to(Builder *b, int g, int x)
{
    Type t;
    return b_type_of(b, x, &t) ? grad_unbroadcast(b, g, &t) : -1;
}

/* `to` must not point into the graph's node array (callers pass a copy). */
int grad_unbroadcast(Builder *b, int g, const Type *to)
{
    Type t;
    if (!b_type_of(b, g, &t))
        return -1;
    int lead = t.rank - to->rank, n = 0;
    int64_t axes[COIL_MAX_RANK];
    for (int d = 0; d < t.rank; d++)
        if (d < lead || !dim_eq(to->dim[d - lead], t.dim[d]))
            axes[n++] = d;
    if (n > 0)
        g = b_reduce(b, OP_SUM, g, n, axes, true);
    Type want = *to, now;
    want.dt = t.dt;
    bool same = b_type_of(b, g, &now) && now.rank == want.rank;
    for (int d = 0; same && d < want.rank; d++)
        same = dim_eq(now.dim[d], want.dim[d]);
    return same ? g : b_reshape(b, g, &want);
}

/* The reduced axes of a reduction node over an operand of rank `rank`, as a mask. */
static unsigned reduced_mask(const Node *n, int rank)
{
    const Attr *a = node_attr(n, "axes");
    unsigned mask = a->n == 0 ? (1u << rank) - 1 : 0;
    for (int i = 0; i < a->n; i++)
        mask |= 1u << (a->ints[i] < 0 ? a->ints[i] + rank : a->ints[i]);
    return mask;
}

/* A reduction's result (or its gradient) in keepdim form: ones where x was reduced. */
static int keepdim_form(Builder *b, const Node *n, int v, const Type *x)
{
    if (node_attr(n, "keepdim")->i)
        return v;
    unsigned mask = reduced_mask(n, x->rank);
    Type t = {.dt = dt_of(b, v), .rank = x->rank};
    for (int d = 0; d < x->rank; d++)
        t.dim[d] = mask >> d & 1 ? dim_static(1) : x->dim[d];
    return b_reshape(b, v, &t);
}

/* How many elements each result of reduction n summarises: a constant when static, else
 * the sum of ones over the reduced axes (symbolic sizes are known only at run time). */
static int reduced_count(Builder *b, const Node *n, const Type *x, int like)
{
    unsigned mask = reduced_mask(n, x->rank);
    Dim c = dim_static(1);
    bool overflow = false;
    for (int d = 0; d < x->rank; d++)
        if (mask >> d & 1)
            c = dim_mul(c, x->dim[d], &overflow);
    if (dim_is_static(c) && !overflow)
        return k_(b, (double)c.k, like);
    Type ones = *x;
    ones.dt = dt_of(b, like);
    int64_t axes[COIL_MAX_RANK];
    int na = 0;
    for (int d = 0; d < x->rank; d++)
        if (mask >> d & 1)
            axes[na++] = d;
    return b_reduce(b, OP_SUM, b_expand(b, k_(b, 1, like), &ones), na, axes, true);
}

/* ---------------------------------------------------------------- unary */

bool grad_neg(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in, (void)out;
    din[0] = b_unary(b, OP_NEG, g);
    return true;
}

bool grad_abs(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    int pos = b_binary(b, OP_GT, in[0], k_(b, 0, in[0]));
    int neg = b_binary(b, OP_LT, in[0], k_(b, 0, in[0]));
    din[0] = b_where(b, pos, g, zero_where(b, neg, b_unary(b, OP_NEG, g)));
    return true;
}

bool grad_exp(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in;
    din[0] = mul_(b, g, out);
    return true;
}

bool grad_log(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = div_(b, g, in[0]);
    return true;
}

bool grad_sqrt(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in;
    din[0] = div_(b, mul_(b, g, k_(b, 0.5, g)), out);
    return true;
}

bool grad_rsqrt(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in; /* d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3 */
    din[0] = mul_(b, mul_(b, g, k_(b, -0.5, g)), mul_(b, out, mul_(b, out, out)));
    return true;
}

bool grad_reciprocal(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in;
    din[0] = b_unary(b, OP_NEG, mul_(b, g, mul_(b, out, out)));
    return true;
}

bool grad_tanh(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in;
    din[0] = mul_(b, g, sub_(b, k_(b, 1, g), mul_(b, out, out)));
    return true;
}

bool grad_sigmoid(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)in;
    din[0] = mul_(b, g, mul_(b, out, sub_(b, k_(b, 1, g), out)));
    return true;
}

bool grad_relu(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = zero_where(b, b_binary(b, OP_GT, in[0], k_(b, 0, in[0])), g);
    return true;
}

/* x Phi(x): Phi(x) + x phi(x), Phi the normal CDF, phi its density. */
bool grad_gelu(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    int x = in[0];
    int cdf = mul_(b, k_(b, 0.5, x), add_(b, k_(b, 1, x), b_unary(b, OP_ERF, mul_(b, x, k_(b, M_SQRT1_2, x)))));
    int pdf = mul_(b, b_unary(b, OP_EXP, mul_(b, mul_(b, x, x), k_(b, -0.5, x))), k_(b, 0.3989422804014327, x));
    din[0] = mul_(b, g, add_(b, cdf, mul_(b, x, pdf)));
    return true;
}

/* 0.5 x (1 + tanh(u)), u = c (x + a x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3a x^2). */
bool grad_gelu_tanh(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    const double c = 0.7978845608028654, a = 0.044715;
    int x = in[0], x2 = mul_(b, x, x);
    int u = mul_(b, k_(b, c, x), add_(b, x, mul_(b, k_(b, a, x), mul_(b, x2, x))));
    int t = b_unary(b, OP_TANH, u);
    int du = mul_(b, k_(b, c, x), add_(b, k_(b, 1, x), mul_(b, k_(b, 3 * a, x), x2)));
    int left = mul_(b, k_(b, 0.5, x), add_(b, k_(b, 1, x), t));
    int right = mul_(b, mul_(b, k_(b, 0.5, x), x), mul_(b, sub_(b, k_(b, 1, x), mul_(b, t, t)), du));
    din[0] = mul_(b, g, add_(b, left, right));
    return true;
}

/* x s(x): s (1 + x (1 - s)). */
bool grad_silu(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    int s = b_unary(b, OP_SIGMOID, in[0]);
    din[0] = mul_(b, g, mul_(b, s, add_(b, k_(b, 1, s), mul_(b, in[0], sub_(b, k_(b, 1, s), s)))));
    return true;
}

bool grad_sin(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = mul_(b, g, b_unary(b, OP_COS, in[0]));
    return true;
}

bool grad_cos(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = b_unary(b, OP_NEG, mul_(b, g, b_unary(b, OP_SIN, in[0])));
    return true;
}

bool grad_erf(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out; /* 2/sqrt(pi) e^(-x^2) */
    int e = b_unary(b, OP_EXP, b_unary(b, OP_NEG, mul_(b, in[0], in[0])));
    din[0] = mul_(b, g, mul_(b, e, k_(b, M_2_SQRTPI, in[0])));
    return true;
}

/* ---------------------------------------------------------------- binary */

/* din[j] = contribution j summed back to operand j's shape. */
static bool unbroadcast2(Builder *b, const int *in, int *din)
{
    for (int j = 0; j < 2; j++)
        if (din[j] >= 0)
            din[j] = unbroadcast_to(b, din[j], in[j]);
    return true;
}

bool grad_add(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = g, din[1] = g;
    return unbroadcast2(b, in, din);
}

bool grad_sub(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = g, din[1] = b_unary(b, OP_NEG, g);
    return unbroadcast2(b, in, din);
}

bool grad_mul(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = mul_(b, g, in[1]), din[1] = mul_(b, g, in[0]);
    return unbroadcast2(b, in, din);
}

bool grad_div(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n; /* x/y: g/y and -g x/y^2 = -g out/y */
    din[0] = div_(b, g, in[1]);
    din[1] = b_unary(b, OP_NEG, div_(b, mul_(b, g, out), in[1]));
    return unbroadcast2(b, in, din);
}

bool grad_pow(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n; /* x^y: y x^(y-1) and out log x */
    int ym1 = sub_(b, in[1], k_(b, 1, in[1]));
    din[0] = mul_(b, g, mul_(b, in[1], b_binary(b, OP_POW, in[0], ym1)));
    din[1] = mul_(b, g, mul_(b, out, b_unary(b, OP_LOG, in[0])));
    return unbroadcast2(b, in, din);
}

/* maximum and minimum: the gradient goes to the operand chosen (ties to the first). */
static bool grad_select2(Builder *b, int op, const int *in, int g, int *din)
{
    int first = b_binary(b, op, in[0], in[1]);
    din[0] = zero_where(b, first, g);
    din[1] = b_where(b, first, k_(b, 0, g), g);
    return unbroadcast2(b, in, din);
}

bool grad_maximum(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    return grad_select2(b, OP_GE, in, g, din);
}

bool grad_minimum(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    return grad_select2(b, OP_LE, in, g, din);
}

bool grad_where(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[1] = zero_where(b, in[0], g);
    din[2] = b_where(b, in[0], k_(b, 0, g), g);
    for (int j = 1; j < 3; j++)
        din[j] = unbroadcast_to(b, din[j], in[j]);
    return true;
}

bool grad_cast(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    Type t;
    if (b_type_of(b, in[0], &t) && dtype_info[t.dt].is_float)
        din[0] = b_cast(b, g, t.dt);
    return true;
}

/* ---------------------------------------------------------------- reductions */

bool grad_sum(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)out;
    Type t;
    if (!b_type_of(b, in[0], &t))
        return false;
    t.dt = dt_of(b, g);
    din[0] = b_expand(b, keepdim_form(b, n, g, &t), &t);
    return true;
}

/* The operand's type is taken before grad_sum builds: a pointer taken then would dangle
 * once its nodes grow the array (a use after free that coil train hit). */
bool grad_mean(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    Type t;
    if (!b_type_of(b, in[0], &t) || !grad_sum(b, n, in, out, g, din))
        return false;
    din[0] = div_(b, din[0], reduced_count(b, n, &t, g));
    return true;
}

/* max and min: shared evenly among the elements equal to the result. */
bool grad_extremum(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    Type x;
    if (!b_type_of(b, in[0], &x))
        return false;
    int hit = b_binary(b, OP_EQ, in[0], keepdim_form(b, n, out, &x));
    int64_t axes[COIL_MAX_RANK];
    int na = 0;
    unsigned mask = reduced_mask(n, x.rank);
    for (int d = 0; d < x.rank; d++)
        if (mask >> d & 1)
            axes[na++] = d;
    int count = b_reduce(b, OP_SUM, b_cast(b, hit, dt_of(b, g)), na, axes, true);
    din[0] = zero_where(b, hit, div_(b, keepdim_form(b, n, g, &x), count));
    return true;
}

/* ---------------------------------------------------------------- shapes */


/* The gradient of a matrix w that every batch of x multiplies (a linear layer's weight,
 * x [B.., M, K] @ w [K, N]): one product over all the rows, x's batch dims merged into M
 * (K = B*T for a [B, T, in] activation), rather than a product per batch element summed
 * after: one GEMM accumulating every row in its own precision (f32 on cuBLAS for bf16),
 * no [B, K, N] intermediate, no reduction kernel. -1 where x's batch dims are not g's. */
static int shared_weight_grad(Builder *b, int x, int g)
{
    Type tx, tg;
    if (!b_type_of(b, x, &tx) || !b_type_of(b, g, &tg) || tx.rank < 3 || tg.rank != tx.rank)
        return -1;
    bool overflow = false;
    Dim rows = dim_static(1);
    for (int d = 0; d < tx.rank - 1; d++) {
        if (!dim_eq(tx.dim[d], tg.dim[d]))
            return -1;
        rows = dim_mul(rows, tx.dim[d], &overflow);
    }
    if (overflow)
        return -1;
    Type fx = {.dt = tx.dt, .rank = 2, .dim = {rows, tx.dim[tx.rank - 1]}};
    Type fg = {.dt = tg.dt, .rank = 2, .dim = {rows, tg.dim[tg.rank - 1]}};
    return b_matmul(b, b_swap_last(b, b_reshape(b, x, &fx)), b_reshape(b, g, &fg));
}

bool grad_matmul(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    Type w;
    if (!b_type_of(b, in[1], &w))
        return false;
    din[0] = b_matmul(b, g, b_swap_last(b, in[1]));
    din[1] = w.rank == 2 ? shared_weight_grad(b, in[0], g) : -1;
    if (din[1] < 0)
        din[1] = b_matmul(b, b_swap_last(b, in[0]), g);
    return unbroadcast2(b, in, din);
}

/* Whether perm swaps the last two of `rank` dims and keeps the rest. */
static bool swaps_last(const Attr *p)
{
    for (int d = 0; d < p->n - 2; d++)
        if (p->ints[d] != d)
            return false;
    return p->n >= 2 && p->ints[p->n - 2] == p->n - 1 && p->ints[p->n - 1] == p->n - 2;
}

bool grad_transpose(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)in, (void)out;
    const Attr *p = node_attr(n, "perm"); /* n is the source graph's: it never moves */
    const Node *gn = &b->g->node[g]; /* read now, before anything is built */
    if (swaps_last(p) && gn->op == OP_MATMUL) {
        /* A weight used as W^T gets (x^T g)^T: computed as g^T x, its rows in W's order,
         * rather than a product then a strided copy of it. */
        int a = gn->in[0], w = gn->in[1];
        din[0] = b_matmul(b, b_swap_last(b, w), b_swap_last(b, a));
        return true;
    }
    int64_t inv[COIL_MAX_RANK];
    for (int d = 0; d < p->n; d++)
        inv[p->ints[d]] = d;
    din[0] = b_transpose(b, g, p->n, inv);
    return true;
}

bool grad_reshape(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    Type want;
    if (!b_type_of(b, in[0], &want))
        return false;
    want.dt = dt_of(b, g);
    din[0] = b_reshape(b, g, &want);
    return true;
}

bool grad_expand(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = unbroadcast_to(b, g, in[0]);
    return true;
}

/* Zeros of x's type but `len` long along axis. */
static int zeros_along(Builder *b, const Type *x, int axis, int64_t len)
{
    Type t = *x;
    t.dim[axis] = dim_static(len);
    return b_full(b, 0, &t);
}

/* The slice's gradient placed back among zeros (step 1 only). */
bool grad_slice(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)out;
    Type x;
    if (!b_type_of(b, in[0], &x))
        return false;
    x.dt = dt_of(b, g);
    int axis = (int)node_int(n, "axis");
    axis = axis < 0 ? axis + x.rank : axis;
    int64_t start = node_int(n, "start"), end = node_int(n, "end");
    if (node_int(n, "step") != 1 || !dim_is_static(x.dim[axis])) {
        b_fail(b, "autodiff: slice with a step other than 1 or along a symbolic dimension has "
                  "no gradient rule yet");
        return false;
    }
    int64_t len = x.dim[axis].k;
    start = start < 0 ? start + len : start, end = end < 0 ? end + len : end;
    start = start < 0 ? 0 : start > len ? len : start, end = end > len ? len : end;
    int parts[3], np = 0;
    if (start > 0)
        parts[np++] = zeros_along(b, &x, axis, start);
    parts[np++] = g;
    if (end < len)
        parts[np++] = zeros_along(b, &x, axis, len - end);
    din[0] = np == 1 ? g : b_concat(b, parts, np, axis);
    return true;
}

bool grad_concat(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)out;
    int axis = (int)node_int(n, "axis");
    int64_t at = 0;
    for (int j = 0; j < n->nin; j++) {
        Type t;
        if (!b_type_of(b, in[j], &t))
            return false;
        int ax = axis < 0 ? axis + t.rank : axis;
        if (!dim_is_static(t.dim[ax])) {
            b_fail(b, "autodiff: concat along a symbolic dimension has no gradient rule yet");
            return false;
        }
        din[j] = b_slice(b, g, ax, at, at + t.dim[ax].k, 1);
        at += t.dim[ax].k;
    }
    return true;
}

/* An embedding's table gradient: g's rows added into zeros at the indices, gather's
 * adjoint (an index_add: O(N * width), where a one-hot GEMM took N * V * width FLOPs and
 * an N x V buffer, 1.6 GB at GPT-2's vocabulary and B=8, T=1024). autodiff's accumulate
 * turns a tied embedding's two gradients into one index_add into the other's. Along
 * another axis a (x[:, -1] of a sequence), the same with that axis moved first: g's index
 * dims to the front, added into zeros of [x[a], x[:a], x[a+1:]], transposed back. */
bool grad_gather(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)out;
    Type table, idx;
    int axis;
    if (!b_type_of(b, in[0], &table) || !b_type_of(b, in[1], &idx) ||
        !axis_norm(node_int(n, "axis"), table.rank, &axis))
        return false;
    table.dt = dt_of(b, g);
    if (axis == 0) {
        din[0] = b_index_add(b, b_full(b, 0, &table), in[1], g);
        return true;
    }
    int64_t to_front[COIL_MAX_RANK], back[COIL_MAX_RANK], src_perm[COIL_MAX_RANK];
    Type moved = {.dt = table.dt, .rank = table.rank};
    for (int d = 0; d < table.rank; d++) { /* moved axis d is table axis to_front[d] */
        to_front[d] = d == 0 ? axis : d <= axis ? d - 1 : d;
        moved.dim[d] = table.dim[to_front[d]];
        back[to_front[d]] = d;
    }
    int gr = table.rank - 1 + idx.rank; /* g: x[:a], idx dims, x[a+1:] */
    for (int d = 0; d < gr; d++)
        src_perm[d] = d < idx.rank ? axis + d : d - idx.rank < axis ? d - idx.rank : d;
    int src = b_transpose(b, g, gr, src_perm);
    int sum = b_index_add(b, b_full(b, 0, &moved), in[1], src);
    din[0] = b_transpose(b, sum, table.rank, back);
    return true;
}

/* d base = g; d src = g's rows at the indices. */
bool grad_index_add(Builder *b, const Node *n, const int *in, int out, int g, int *din)
{
    (void)n, (void)out;
    din[0] = g;
    din[2] = b_gather(b, g, in[1], 0);
    return true;
}
