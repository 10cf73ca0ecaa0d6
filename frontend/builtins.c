/* builtins.c — what a call to a non-block name lowers to: an IR op by name (tensor operands,
 * then attributes by position or keyword), ops typed by their arguments, and the layer forms. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/eval.h"
#include "frontend/norm.h"

/* Most builtins give one value; split gives several. Both run with L->b.loc at the call. */
typedef bool (*BuiltinFn)(Lower *L, Loc loc, const BArgs *a, Value *out);
typedef bool (*BuiltinMulti)(Lower *L, Loc loc, const BArgs *a, Value *out, int max, int *n);

/* ---------------------------------------------------------------- applying ops */

/* Ops whose folded result stays an integer when every input is one. */
static bool int_preserving(int op)
{
    static const int ops[] = {OP_NEG, OP_ABS, OP_RELU, OP_ADD, OP_SUB, OP_MUL, OP_POW,
                              OP_MAXIMUM, OP_MINIMUM};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i] == op)
            return true;
    return false;
}

/* A pointwise op on compile-time numbers, in double precision like the interpreter. */
static bool fold_op(Lower *L, Loc loc, int op, const Value *args, int nargs, Value *out)
{
    const OpInfo *info = &op_info[op];
    bool ints = true;
    double x[2] = {0, 0};
    for (int i = 0; i < nargs; i++) {
        if (!want_number(L, loc, &args[i], "an operand", &x[i]))
            return false;
        ints &= args[i].kind == V_INT;
    }
    double r = nargs == 1 ? info->scalar1(x[0]) : info->scalar2(x[0], x[1]);
    if (op >= OP_EQ && op <= OP_GE) {
        *out = v_bool(r != 0);
        return true;
    }
    if (!isfinite(r))
        return fail(L, loc, "%s of these numbers is not finite", info->name);
    if (ints && int_preserving(op) && r == floor(r) && fabs(r) < 9007199254740992.0)
        *out = v_int((int64_t)r);
    else
        *out = v_float(r);
    return true;
}

bool apply_op(Lower *L, Loc loc, int op, const Value *args, int nargs, const Attr *attrs,
              int nattr, Value *out)
{
    const OpInfo *info = &op_info[op];
    const Value *lead = NULL; /* the tensor whose dtype numbers take */
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == V_TENSOR && (!lead || v_type(L, lead)->dt == DT_BOOL))
            lead = &args[i];
    bool foldable = (nargs == 1 && info->scalar1) || (nargs == 2 && info->scalar2);
    if (!lead && foldable)
        return fold_op(L, loc, op, args, nargs, out);
    if (!lead && nargs > 0)
        return fail(L, loc, "%s needs a tensor operand", info->name);
    int *in = arena_alloc(L->arena, sizeof *in * (size_t)(nargs ? nargs : 1));
    for (int i = 0; i < nargs; i++)
        if (!as_tensor(L, loc, &args[i], v_type(L, lead)->dt, &in[i]))
            return false;
    L->b.loc = loc;
    return built(L, b_op(&L->b, op, in, nargs, attrs, nattr, NULL), out);
}

/* ---------------------------------------------------------------- attributes */

bool int_list(Lower *L, Loc loc, const Value *v, const char *what, int *n, int64_t **out)
{
    if (v->kind == V_INT) {
        *n = 1;
        *out = arena_memdup(L->arena, &v->i, sizeof v->i);
        return true;
    }
    char d[300];
    if (v->kind != V_LIST)
        return fail(L, loc, "%s must be a list of integers, got %s", what, v_describe(L, v, d, sizeof d));
    *n = v->n;
    *out = arena_alloc(L->arena, sizeof **out * (size_t)(v->n ? v->n : 1));
    for (int i = 0; i < v->n; i++)
        if (!want_int(L, loc, &v->items[i], what, &(*out)[i]))
            return false;
    return true;
}

bool number_list(Lower *L, Loc loc, const Value *v, const char *what, int *n, double **out)
{
    if (v->kind != V_LIST)
        return fail(L, loc, "%s must be a list of numbers", what);
    *n = v->n;
    *out = arena_alloc(L->arena, sizeof **out * (size_t)(v->n ? v->n : 1));
    for (int i = 0; i < v->n; i++)
        if (!want_number(L, loc, &v->items[i], what, &(*out)[i]))
            return false;
    return true;
}

/* A value as the attribute `spec` of an op. */
static bool to_attr(Lower *L, Loc loc, const char *op, const AttrSpec *spec, const Value *v, Attr *a)
{
    char what[96];
    snprintf(what, sizeof what, "%s: attribute '%s'", op, spec->name);
    *a = (Attr){.name = spec->name, .kind = spec->kind};
    switch (spec->kind) {
    case AK_INT: return want_int(L, loc, v, what, &a->i);
    case AK_FLOAT: return want_number(L, loc, v, what, &a->f);
    case AK_BOOL: {
        bool b;
        if (!want_bool(L, loc, v, what, &b))
            return false;
        a->i = b;
        return true;
    }
    case AK_INTS: {
        int64_t *p = NULL;
        if (!int_list(L, loc, v, what, &a->n, &p))
            return false;
        a->ints = p;
        return true;
    }
    case AK_STR:
        if (v->kind != V_STR)
            return fail(L, loc, "%s must be a string", what);
        a->s = v->s;
        return true;
    case AK_DATA: {
        double *p = NULL;
        if (!number_list(L, loc, v, what, &a->n, &p))
            return false;
        a->data = p;
        return true;
    }
    }
    return false;
}

static int attr_index(const OpInfo *info, const char *name)
{
    for (int i = 0; i < info->nattr; i++)
        if (strcmp(info->attrs[i].name, name) == 0)
            return i;
    return -1;
}

/* A list of tensors given where an op takes any number of operands: each item one of
 * them (vals grows to hold them). */
static bool splat_list(Lower *L, Loc loc, const Value *list, Value **vals, int *nargs, int *nin)
{
    Value *grown = arena_alloc(L->arena, sizeof *grown * (size_t)(*nargs + list->n + 1));
    if (!grown)
        return fail(L, loc, "out of memory");
    memcpy(grown, *vals, sizeof *grown * (size_t)*nin);
    for (int i = 0; i < list->n; i++) {
        if (list->items[i].kind != V_TENSOR) {
            char d[300];
            return fail(L, loc, "item %d of this list is %s; an op's operands must be tensors", i,
                        v_describe(L, &list->items[i], d, sizeof d));
        }
        grown[(*nin)++] = list->items[i];
    }
    *vals = grown;
    *nargs += list->n;
    return true;
}

bool call_ir_op(Lower *L, int op, const Expr *call, Value *out)
{
    const OpInfo *info = &op_info[op];
    if (info->flags & (OPF_TYPED | OPF_LEAF))
        return fail(L, call->loc, "'%s' cannot be called here", info->name);
    int nargs = list_len(call->args), nin = 0, npos = 0;
    Value *vals = arena_alloc(L->arena, sizeof *vals * (size_t)(nargs ? nargs : 1));
    int max_in = info->nin_max < 0 ? INT_MAX : info->nin_max; /* lists may splat */
    Attr attrs[16];
    bool set[16] = {false};
    int next_attr = 0;
    for (const Arg *a = call->args; a; a = a->next) {
        Value v;
        if (!eval_expr(L, a->value, &v))
            return false;
        if (!a->kw && npos == nin && info->nin_max < 0 && v.kind == V_LIST) { /* concat(xs) */
            if (!splat_list(L, a->loc, &v, &vals, &nargs, &nin))
                return false;
            npos = nin;
            continue;
        }
        bool operand = !a->kw && npos == nin && nin < max_in &&
                       (v.kind == V_TENSOR || ((info->flags & OPF_POINTWISE) && (v_is_number(&v) || v.kind == V_BOOL)));
        if (operand) {
            vals[nin++] = v;
            npos++;
            continue;
        }
        int k = a->kw ? attr_index(info, a->kw) : next_attr;
        if (!a->kw) {
            npos++;
            while (k < info->nattr && set[k])
                k++;
            next_attr = k + 1;
        }
        if (k < 0 || k >= info->nattr || k >= 16) {
            if (a->kw)
                return fail(L, a->loc, "op '%s' has no attribute '%s'", info->name, a->kw);
            return fail(L, a->loc, "op '%s' takes %d operand%s and %d attribute%s; this argument is one too many",
                        info->name, max_in == INT_MAX ? nin : max_in, max_in == 1 ? "" : "s", info->nattr,
                        info->nattr == 1 ? "" : "s");
        }
        if (set[k])
            return fail(L, a->loc, "attribute '%s' given twice", info->attrs[k].name);
        if (!to_attr(L, a->value->loc, info->name, &info->attrs[k], &v, &attrs[k]))
            return false;
        set[k] = true;
    }
    Attr given[16];
    int ng = 0;
    for (int k = 0; k < info->nattr && k < 16; k++)
        if (set[k])
            given[ng++] = attrs[k];
    return apply_op(L, call->loc, op, vals, nin, given, ng, out);
}

/* ---------------------------------------------------------------- helpers for forms */

static const Type *tensor_type(const Lower *L, int id) { return &L->g->node[id].type; }

static bool op1(Lower *L, Loc loc, int op, int x, const Attr *attrs, int nattr, int *out)
{
    Value v;
    L->b.loc = loc;
    if (!built(L, b_op(&L->b, op, &x, 1, attrs, nattr, NULL), &v))
        return false;
    *out = v.id;
    return true;
}

static bool op2(Lower *L, Loc loc, int op, int x, int y, int *out)
{
    int in[2] = {x, y};
    Value v;
    L->b.loc = loc;
    if (!built(L, b_op(&L->b, op, in, 2, NULL, 0, NULL), &v))
        return false;
    *out = v.id;
    return true;
}

/* Swap axes i and i + 1. */
static bool transpose_pair(Lower *L, Loc loc, int x, int i, int *out)
{
    const Type *t = tensor_type(L, x);
    if (i < 0 || i + 1 >= t->rank)
        return fail(L, loc, "cannot swap axes %d and %d of a rank-%d tensor", i, i + 1, t->rank);
    int64_t perm[COIL_MAX_RANK];
    for (int k = 0; k < t->rank; k++)
        perm[k] = k;
    perm[i] = i + 1;
    perm[i + 1] = i;
    Attr a = attr_ints("perm", t->rank, perm);
    return op1(L, loc, OP_TRANSPOSE, x, &a, 1, out);
}

static bool reshape_to(Lower *L, Loc loc, int x, const Type *t, int *out)
{
    Value v;
    L->b.loc = loc;
    if (!built(L, b_reshape(&L->b, x, t), &v))
        return false;
    *out = v.id;
    return true;
}

bool arg_tensor(Lower *L, const BArgs *a, int i, const char *name, int *id)
{
    char what[64];
    snprintf(what, sizeof what, "argument '%s'", name);
    return want_tensor(L, a->loc[i], &a->v[i], what, id);
}

static DType arg_dtype(const BArgs *a, int i, DType def)
{
    return a->given[i] && a->v[i].kind == V_DTYPE ? a->v[i].dt : def;
}

static bool check_dtype_arg(Lower *L, const BArgs *a, int i)
{
    char d[300];
    if (a->given[i] && a->v[i].kind != V_DTYPE)
        return fail(L, a->loc[i], "dtype must be a dtype like f32 or i64, got %s",
                    v_describe(L, &a->v[i], d, sizeof d));
    return true;
}

static bool arg_int(Lower *L, const BArgs *a, int i, const char *name, int64_t def, int64_t *out)
{
    *out = def;
    char what[64];
    snprintf(what, sizeof what, "argument '%s'", name);
    return !a->given[i] || want_int(L, a->loc[i], &a->v[i], what, out);
}

/* ---------------------------------------------------------------- typed ops */

/* reshape(x, [dims]) with one -1 inferred from the element count. */
static bool bi_reshape(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    int x, infer;
    Type t;
    if (!arg_tensor(L, a, 0, "x", &x) || !want_shape(L, a->loc[1], &a->v[1], tensor_type(L, x)->dt, &t, &infer))
        return false;
    if (infer >= 0) {
        bool ovf = false;
        Dim total = type_numel(tensor_type(L, x), &ovf), rest = dim_static(1);
        for (int i = 0; i < t.rank; i++)
            if (i != infer)
                rest = dim_mul(rest, t.dim[i], &ovf);
        if (ovf || rest.k == 0 || total.k % rest.k != 0 || (total.syms & rest.syms) != rest.syms) {
            char tb[256];
            return fail(L, a->loc[1], "reshape: cannot infer the -1 dimension of %s from the other dimensions",
                        type_fmt(L->g, tensor_type(L, x), tb, sizeof tb));
        }
        t.dim[infer] = (Dim){total.k / rest.k, total.syms & ~rest.syms, 0};
    }
    return built(L, b_reshape(&L->b, x, &t), out);
}

static bool bi_expand(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    int x;
    Type t;
    if (!arg_tensor(L, a, 0, "x", &x) || !want_shape(L, a->loc[1], &a->v[1], tensor_type(L, x)->dt, &t, NULL))
        return false;
    return built(L, b_expand(&L->b, x, &t), out);
}

static bool bi_cast(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    int x;
    if (!arg_tensor(L, a, 0, "x", &x) || !check_dtype_arg(L, a, 1))
        return false;
    return built(L, b_cast(&L->b, x, a->v[1].dt), out);
}

static bool bi_full(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    Type t;
    double v;
    if (!check_dtype_arg(L, a, 2) || !want_shape(L, a->loc[0], &a->v[0], arg_dtype(a, 2, DT_F32), &t, NULL))
        return false;
    if (a->v[1].kind == V_BOOL)
        v = (double)a->v[1].i;
    else if (!want_number(L, a->loc[1], &a->v[1], "the fill value", &v))
        return false;
    return built(L, b_full(&L->b, v, &t), out);
}

static bool bi_iota(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    Type t;
    int64_t axis;
    if (!check_dtype_arg(L, a, 2) || !want_shape(L, a->loc[0], &a->v[0], arg_dtype(a, 2, DT_I64), &t, NULL) ||
        !arg_int(L, a, 1, "axis", 0, &axis))
        return false;
    return built(L, b_iota(&L->b, &t, axis), out);
}

static bool bi_rand(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    Type t;
    int64_t seed, offset;
    if (!check_dtype_arg(L, a, 3) || !want_shape(L, a->loc[0], &a->v[0], arg_dtype(a, 3, DT_F32), &t, NULL) ||
        !arg_int(L, a, 1, "seed", 0, &seed) || !arg_int(L, a, 2, "offset", 0, &offset))
        return false;
    return built(L, b_rand(&L->b, &t, seed, offset), out);
}

static bool bi_constant(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int count = 0;
    double *data = NULL;
    if (!check_dtype_arg(L, a, 2) || !number_list(L, a->loc[0], &a->v[0], "constant values", &count, &data))
        return false;
    DType dt = arg_dtype(a, 2, DT_F32);
    Type t = {.dt = dt, .rank = 1, .dim = {dim_static(count)}};
    if (a->given[1] && !want_shape(L, a->loc[1], &a->v[1], dt, &t, NULL))
        return false;
    bool ovf = false;
    Dim numel = type_numel(&t, &ovf);
    if (ovf || numel.syms || numel.k != count) {
        char tb[256];
        return fail(L, loc, "constant: %d values do not fill the shape %s", count,
                    type_fmt(L->g, &t, tb, sizeof tb));
    }
    for (int i = 0; i < count; i++)
        if (dtype_round(dt, data[i]) != data[i] && !dtype_info[dt].is_float)
            return fail(L, a->loc[0], "constant: value %g is not representable as %s", data[i], dtype_info[dt].name);
    return built(L, b_constant(&L->b, &t, data), out);
}

/* ---------------------------------------------------------------- layer forms */

/* linear(x, w[, b]) = x @ w^T (+ b), with w in PyTorch's [out, in] layout. */
static bool linear(Lower *L, Loc loc, int x, int w, int b, int *out)
{
    char tb[256];
    if (tensor_type(L, w)->rank != 2)
        return fail(L, loc, "linear: the weight must be [out, in], got %s",
                    type_fmt(L->g, tensor_type(L, w), tb, sizeof tb));
    int wt, y;
    if (!transpose_pair(L, loc, w, 0, &wt) || !op2(L, loc, OP_MATMUL, x, wt, &y))
        return false;
    if (b >= 0 && !op2(L, loc, OP_ADD, y, b, &y))
        return false;
    *out = y;
    return true;
}

static bool bi_linear(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x, w, b = -1;
    if (!arg_tensor(L, a, 0, "x", &x) || !arg_tensor(L, a, 1, "w", &w) ||
        (a->given[2] && !arg_tensor(L, a, 2, "b", &b)))
        return false;
    *out = v_tensor(0);
    return linear(L, loc, x, w, b, &out->id);
}

static bool bi_embedding(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    (void)loc; /* the builder's location is already the call's */
    int table, ids;
    if (!arg_tensor(L, a, 0, "table", &table) || !arg_tensor(L, a, 1, "ids", &ids))
        return false;
    return built(L, b_gather(&L->b, table, ids, 0), out);
}

static bool bi_mlp(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    static const char *const names[] = {"x", "w1", "b1", "w2", "b2"};
    int t[5];
    for (int i = 0; i < 5; i++)
        if (!arg_tensor(L, a, i, names[i], &t[i]))
            return false;
    const char *act = a->given[5] && a->v[5].kind == V_STR ? a->v[5].s : "gelu";
    int op = op_lookup(act, strlen(act));
    if ((a->given[5] && a->v[5].kind != V_STR) || op < 0 || op_info[op].nin_max != 1 ||
        !(op_info[op].flags & OPF_POINTWISE))
        return fail(L, a->given[5] ? a->loc[5] : loc, "mlp: act must name a unary op such as \"gelu\" or \"relu\"");
    int h;
    *out = v_tensor(0);
    return linear(L, loc, t[0], t[1], t[2], &h) && op1(L, loc, op, h, NULL, 0, &h) &&
           linear(L, loc, h, t[3], t[4], &out->id);
}

/* [..., T, C] -> [..., H, T, C/H] */
static bool split_heads(Lower *L, Loc loc, int x, int64_t heads, int *out)
{
    Type t = *tensor_type(L, x);
    char tb[256];
    Dim c = t.rank >= 2 ? t.dim[t.rank - 1] : dim_static(0);
    if (t.rank < 2 || t.rank + 1 > COIL_MAX_RANK || c.syms || c.k % heads != 0)
        return fail(L, loc, "attention: %s cannot be split into %lld heads (the last dimension must "
                    "be a static multiple of heads)", type_fmt(L->g, &t, tb, sizeof tb), (long long)heads);
    t.dim[t.rank - 1] = dim_static(heads);
    t.dim[t.rank] = dim_static(c.k / heads);
    t.rank++;
    int r;
    return reshape_to(L, loc, x, &t, &r) && transpose_pair(L, loc, r, t.rank - 3, out);
}

/* Grouped-query heads: x [..., T, G*P*D] -> [..., G, P, T, D] (q: P heads per group; k
 * and v: P = 1, broadcast over the group's query heads by the attention op). */
static bool split_groups(Lower *L, Loc loc, int x, int64_t groups, int64_t per_group, int *out)
{
    Type t = *tensor_type(L, x);
    char tb[256];
    int r = t.rank;
    Dim c = r >= 2 ? t.dim[r - 1] : dim_static(0);
    if (r < 2 || r + 2 > COIL_MAX_RANK || c.syms || c.k % (groups * per_group) != 0)
        return fail(L, loc, "attention: %s cannot be split into %lld groups of %lld heads (the last "
                    "dimension must be a static multiple of them)", type_fmt(L->g, &t, tb, sizeof tb),
                    (long long)groups, (long long)per_group);
    t.dim[r - 1] = dim_static(groups);
    t.dim[r] = dim_static(per_group);
    t.dim[r + 1] = dim_static(c.k / (groups * per_group));
    t.rank = r + 2;
    int a = -1, b = -1;
    return reshape_to(L, loc, x, &t, &a) && transpose_pair(L, loc, a, r - 2, &b) &&
           transpose_pair(L, loc, b, r - 1, out);
}

/* [..., G, P, T, D] -> [..., T, G*P*D] */
static bool merge_groups(Lower *L, Loc loc, int y, int *out)
{
    int n = tensor_type(L, y)->rank, a = -1, b = -1;
    if (!transpose_pair(L, loc, y, n - 3, &a) || !transpose_pair(L, loc, a, n - 4, &b))
        return false;
    Type t = *tensor_type(L, b);
    t.dim[n - 3] = dim_static(t.dim[n - 3].k * t.dim[n - 2].k * t.dim[n - 1].k);
    t.rank = n - 2;
    return reshape_to(L, loc, b, &t, out);
}

/* A bias broadcast to [..., H, T, S] as [..., G, P, T, S]: its head axis (H, or 1)
 * split in two; one of rank 2 or less broadcasts as it is. */
static bool group_bias(Lower *L, Loc loc, int bias, int64_t groups, int64_t per_group, int *out)
{
    Type t = *tensor_type(L, bias);
    char tb[256];
    int r = t.rank;
    *out = bias;
    if (r <= 2)
        return true;
    Dim h = t.dim[r - 3];
    if (r + 1 > COIL_MAX_RANK || h.syms || (h.k != 1 && h.k != groups * per_group))
        return fail(L, loc, "attention: bias %s: its head axis must be 1 or %lld heads to group "
                    "them", type_fmt(L->g, &t, tb, sizeof tb), (long long)(groups * per_group));
    for (int d = r; d > r - 2; d--)
        t.dim[d] = t.dim[d - 1];
    t.dim[r - 3] = dim_static(h.k == 1 ? 1 : groups);
    t.dim[r - 2] = dim_static(h.k == 1 ? 1 : per_group);
    t.rank = r + 1;
    return reshape_to(L, loc, bias, &t, out);
}

/* The attention op on q, k, v (and bias) split into heads, its result merged back. */
typedef bool (*MergeFn)(Lower *L, Loc loc, int y, int *out);
static bool heads_op(Lower *L, Loc loc, const int *in, int nin, const Attr *attrs, int na,
                     MergeFn merge, Value *out)
{
    Value y;
    L->b.loc = loc;
    if (!built(L, b_op(&L->b, OP_ATTENTION, in, nin, attrs, na, NULL), &y))
        return false;
    *out = v_tensor(0);
    return merge(L, loc, y.id, &out->id);
}

/* attention with heads= and kv_heads=: q's heads in kv_heads groups sharing one head of
 * k and v each (grouped-query attention; kv_heads 1 is multi-query). */
static bool grouped_attention(Lower *L, Loc loc, const BArgs *a, int64_t heads, int *in, int nin,
                              const Attr *attrs, int na, Value *out)
{
    int64_t groups;
    if (!want_int(L, a->loc[8], &a->v[8], "kv_heads", &groups))
        return false;
    if (groups <= 0 || heads % groups != 0)
        return fail(L, a->loc[8], "attention: kv_heads must divide heads (%lld), got %lld",
                    (long long)heads, (long long)groups);
    for (int i = 0; i < 3; i++)
        if (!arg_tensor(L, a, i, i == 0 ? "q" : i == 1 ? "k" : "v", &in[i]) ||
            !split_groups(L, loc, in[i], groups, i == 0 ? heads / groups : 1, &in[i]))
            return false;
    if (nin == 4 && !group_bias(L, loc, in[3], groups, heads / groups, &in[3]))
        return false;
    return heads_op(L, loc, in, nin, attrs, na, merge_groups, out);
}

/* [..., H, T, D] -> [..., T, H*D] */
static bool merge_heads(Lower *L, Loc loc, int y, int *out)
{
    int r;
    if (!transpose_pair(L, loc, y, tensor_type(L, y)->rank - 3, &r))
        return false;
    Type t = *tensor_type(L, r);
    t.dim[t.rank - 2] = dim_static(t.dim[t.rank - 2].k * t.dim[t.rank - 1].k);
    t.rank--;
    return reshape_to(L, loc, r, &t, out);
}

/* attention's bias operand, or -1 for none: bias, or mask (bool: true where a query sees
 * the key) as 0 or -inf in q's dtype, added to bias when both are given. */
static bool attention_bias(Lower *L, Loc loc, const BArgs *a, int *bias)
{
    int q, mask;
    *bias = -1;
    if (a->given[6] && !arg_tensor(L, a, 6, "bias", bias))
        return false;
    if (!a->given[7])
        return true;
    if (!arg_tensor(L, a, 0, "q", &q) || !arg_tensor(L, a, 7, "mask", &mask))
        return false;
    char tb[256];
    const Type *mt = tensor_type(L, mask);
    if (mt->dt != DT_BOOL)
        return fail(L, a->loc[7], "attention: mask is %s; it must be bool, true where a query "
                    "attends to a key (or give an additive bias=)", type_fmt(L->g, mt, tb, sizeof tb));
    DType dt = tensor_type(L, q)->dt;
    L->b.loc = loc;
    int m = b_where(&L->b, mask, b_scalar(&L->b, 0, dt), b_scalar(&L->b, -INFINITY, dt));
    *bias = *bias >= 0 ? b_binary(&L->b, OP_ADD, *bias, m) : m;
    return *bias >= 0 && err_ok(L->b.err);
}

/* attention(q, k, v, causal=, scale=, heads=, bias=, mask=, kv_heads=): the bias, added
 * to the scaled scores, and the mask, true where a query attends to a key, broadcast to
 * [..., T, S] (with heads: [..., H, T, S]); kv_heads groups q's heads over fewer k, v ones. */
static bool bi_attention(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int bias;
    if (!attention_bias(L, loc, a, &bias))
        return false;
    int nin = bias >= 0 ? 4 : 3;
    Attr attrs[2];
    int na = 0;
    const OpInfo *info = &op_info[OP_ATTENTION];
    for (int i = 0; i < 2; i++)
        if (a->given[3 + i] && !to_attr(L, a->loc[3 + i], "attention", &info->attrs[i], &a->v[3 + i], &attrs[na++]))
            return false;
    if (!a->given[5] && a->given[8])
        return fail(L, a->loc[8], "attention: kv_heads needs heads=");
    if (!a->given[5]) {
        Value qkv[4] = {a->v[0], a->v[1], a->v[2], v_tensor(bias)};
        return apply_op(L, loc, OP_ATTENTION, qkv, nin, attrs, na, out);
    }
    int64_t heads;
    int in[4] = {-1, -1, -1, bias};
    if (!want_int(L, a->loc[5], &a->v[5], "heads", &heads))
        return false;
    if (heads <= 0)
        return fail(L, a->loc[5], "heads must be positive, got %lld", (long long)heads);
    if (a->given[8])
        return grouped_attention(L, loc, a, heads, in, nin, attrs, na, out);
    for (int i = 0; i < 3; i++)
        if (!arg_tensor(L, a, i, i == 0 ? "q" : i == 1 ? "k" : "v", &in[i]) ||
            !split_heads(L, loc, in[i], heads, &in[i]))
            return false;
    return heads_op(L, loc, in, nin, attrs, na, merge_heads, out);
}

static bool bi_split(Lower *L, Loc loc, const BArgs *a, Value *out, int max, int *n)
{
    int x, ax;
    int64_t parts, axis;
    if (!arg_tensor(L, a, 0, "x", &x) || !arg_int(L, a, 1, "parts", 0, &parts) || !arg_int(L, a, 2, "axis", -1, &axis))
        return false;
    const Type *t = tensor_type(L, x);
    char tb[256];
    if (!axis_norm(axis, t->rank, &ax))
        return fail(L, a->loc[2], "split: axis %lld is out of range for %s", (long long)axis,
                    type_fmt(L->g, t, tb, sizeof tb));
    Dim d = t->dim[ax];
    if (parts <= 0 || parts > LOWER_MAX_RESULTS || d.syms || d.k % parts != 0)
        return fail(L, loc, "split: %s cannot be split into %lld equal parts along axis %d",
                    type_fmt(L->g, t, tb, sizeof tb), (long long)parts, ax);
    if (parts > max)
        return fail(L, loc, "split gives %lld values; bind them: `a, b = split(...)`", (long long)parts);
    int64_t step = d.k / parts;
    L->b.loc = loc;
    for (int64_t i = 0; i < parts; i++)
        if (!built(L, b_slice(&L->b, x, ax, i * step, (i + 1) * step, 1), &out[i]))
            return false;
    *n = (int)parts;
    return true;
}

/* Identity for inference; in training the IR op with a stream per call instance. */
static bool bi_dropout(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x;
    double p;
    if (!arg_tensor(L, a, 0, "x", &x) || !want_number(L, a->loc[1], &a->v[1], "dropout p", &p))
        return false;
    if (!(p >= 0 && p < 1))
        return fail(L, a->loc[1], "dropout p must be in [0, 1), got %g", p);
    if (!L->o->training || p == 0) {
        *out = v_tensor(x);
        return true;
    }
    Attr attrs[3] = {attr_float("p", p), attr_int("seed", (int64_t)L->o->seed),
                     attr_int("offset", (int64_t)L->ndropout++ << 40)};
    L->b.loc = loc;
    return built(L, b_op(&L->b, OP_DROPOUT, &x, 1, attrs, 3, NULL), out);
}

/* ---------------------------------------------------------------- batch norm */

/* The elements of x per channel (every axis but 1) as a scalar of x's dtype: static axes
 * folded, a symbolic one's length as max(iota) + 1. */
static int per_channel_count(Builder *b, int x)
{
    Type t = b->g->node[x].type;
    double k = 1;
    int n = b_scalar(b, 1, t.dt);
    for (int i = 0; i < t.rank; i++) {
        if (i == 1 || dim_is_static(t.dim[i])) {
            k *= i == 1 ? 1 : (double)t.dim[i].k;
            continue;
        }
        Type axis = {.dt = t.dt, .rank = 1, .dim = {t.dim[i]}};
        int last = b_reduce(b, OP_MAX, b_iota(b, &axis, 0), 0, NULL, false);
        n = b_binary(b, OP_MUL, n, b_binary(b, OP_ADD, last, b_scalar(b, 1, t.dt)));
    }
    return b_binary(b, OP_MUL, n, b_scalar(b, k, t.dt));
}

/* running * (1 - m) + batch * m, batch [1, C, 1...] in the running statistic's shape and
 * dtype (PyTorch's update). */
static int running_update(Builder *b, int running, int batch, double m)
{
    Type r = b->g->node[running].type;
    int v = b_reshape(b, batch, &(Type){.dt = b->g->node[batch].type.dt, .rank = 1, .dim = {r.dim[0]}});
    v = b->g->node[v].type.dt == r.dt ? v : b_cast(b, v, r.dt);
    return b_binary(b, OP_ADD, b_binary(b, OP_MUL, running, b_scalar(b, 1 - m, r.dt)),
                    b_binary(b, OP_MUL, v, b_scalar(b, m, r.dt)));
}

/* Training: x normalised by its batch's statistics over every axis but the channels
 * (variance biased), the running ones updated with the unbiased variance, as PyTorch's
 * F.batch_norm(training=True); both must be buffers. Returns x - mean over the deviation. */
static int batch_statistics(Lower *L, Loc loc, int x, int mean, int var, double m, double eps)
{
    Builder *b = &L->b;
    Type t = b->g->node[x].type;
    int64_t axes[COIL_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t.rank; i++)
        if (i != 1)
            axes[n++] = i;
    int bm = b_reduce(b, OP_MEAN, x, n, axes, true), d = b_binary(b, OP_SUB, x, bm);
    int bv = b_reduce(b, OP_MEAN, b_binary(b, OP_MUL, d, d), n, axes, true);
    int count = per_channel_count(b, x);
    int unbiased = b_binary(b, OP_DIV, b_binary(b, OP_MUL, bv, count),
                            b_binary(b, OP_SUB, count, b_scalar(b, 1, t.dt)));
    int y = b_binary(b, OP_MUL, d, b_unary(b, OP_RSQRT, b_binary(b, OP_ADD, bv, b_scalar(b, eps, t.dt))));
    if (y < 0 || !record_buffer_update(L, loc, mean, running_update(b, mean, bm, m)) ||
        !record_buffer_update(L, loc, var, running_update(b, var, unbiased, m)))
        return -1;
    return y;
}

/* Each statistic a buffer of shape [C] (training updates them), weight and bias [C]. */
static bool batch_norm_args(Lower *L, const BArgs *a, int x, const int *per, bool training)
{
    static const char *const names[] = {"running_mean", "running_var", "weight", "bias"};
    const Type *t = tensor_type(L, x);
    char tb[256], pb[256];
    if (!dtype_info[t->dt].is_float || t->rank < 2 || !dim_is_static(t->dim[1]))
        return fail(L, a->loc[0], "batch_norm: x must be float [N, C, ...] with a static channel "
                    "axis, got %s", type_fmt(L->g, t, tb, sizeof tb));
    for (int i = 0; i < 4; i++) {
        if (per[i] < 0)
            continue;
        const Node *n = &L->g->node[per[i]];
        if (n->type.rank != 1 || n->type.dim[0].k != t->dim[1].k || !dim_is_static(n->type.dim[0]) ||
            !dtype_info[n->type.dt].is_float)
            return fail(L, a->loc[1 + i], "batch_norm: %s must be float [%lld] for x %s, got %s",
                        names[i], (long long)t->dim[1].k, type_fmt(L->g, t, tb, sizeof tb),
                        type_fmt(L->g, &n->type, pb, sizeof pb));
        if (training && i < 2 && !param_is_buffer(n))
            return fail(L, a->loc[1 + i], "batch_norm: in training %s is updated, so it must be a "
                        "buffer (`buffer %s: f32[C] = %s`)", names[i], names[i], i ? "ones" : "zeros");
    }
    return true;
}

/* batch_norm(x, running_mean, running_var, weight, bias, momentum=0.1, eps=1e-5):
 * PyTorch's F.batch_norm, its `training` the model's mode. */
static bool bi_batch_norm(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x, per[4] = {-1, -1, -1, -1};
    double m = 0.1, eps = 1e-5;
    bool ok = arg_tensor(L, a, 0, "x", &x) && arg_tensor(L, a, 1, "running_mean", &per[0]) &&
              arg_tensor(L, a, 2, "running_var", &per[1]) &&
              (!a->given[3] || arg_tensor(L, a, 3, "weight", &per[2])) &&
              (!a->given[4] || arg_tensor(L, a, 4, "bias", &per[3])) &&
              (!a->given[5] || want_number(L, a->loc[5], &a->v[5], "batch_norm momentum", &m)) &&
              (!a->given[6] || want_number(L, a->loc[6], &a->v[6], "batch_norm eps", &eps));
    if (!ok || !batch_norm_args(L, a, x, per, L->o->training))
        return false;
    if (!(m >= 0 && m <= 1) || !(eps > 0))
        return fail(L, a->loc[m >= 0 && m <= 1 ? 6 : 5], "batch_norm: momentum must be in [0, 1] "
                    "and eps positive, got %g and %g", m, eps);
    Builder *b = &L->b;
    Type t = *tensor_type(L, x);
    int y;
    if (L->o->training)
        y = batch_statistics(L, loc, x, per[0], per[1], m, eps);
    else
        y = b_binary(b, OP_MUL, b_binary(b, OP_SUB, x, norm_channels(b, per[0], &t)),
                     b_unary(b, OP_RSQRT, b_binary(b, OP_ADD, norm_channels(b, per[1], &t),
                                                   b_scalar(b, eps, t.dt))));
    if (y >= 0)
        y = norm_affine(b, y, per[2], per[3]);
    return L->failed ? false : built(L, y, out);
}

/* group_norm(x, groups, weight, bias, eps) and instance_norm(x, weight, bias, eps): x float
 * [N, C, ...] with C static (instance_norm: a spatial axis or more), weight and bias
 * optional, float [C]; slot w is weight's (bias's follows, then eps). */
static bool norm_args(Lower *L, const char *op, const BArgs *a, int w, int min_rank, int *x,
                      int *per, double *eps)
{
    char tb[256], pb[256];
    if (!arg_tensor(L, a, 0, "x", x))
        return false;
    const Type t = *tensor_type(L, *x);
    if (!dtype_info[t.dt].is_float || t.rank < min_rank || !dim_is_static(t.dim[1]))
        return fail(L, a->loc[0], "%s: x must be float [N, C%s] with a static channel axis, "
                    "got %s", op, min_rank > 2 ? ", spatial..." : ", ...", type_fmt(L->g, &t, tb, sizeof tb));
    for (int i = 0; i < 2; i++) {
        if (!a->given[w + i]) {
            per[i] = -1;
            continue;
        }
        if (!arg_tensor(L, a, w + i, i ? "bias" : "weight", &per[i]))
            return false;
        const Type *p = tensor_type(L, per[i]);
        if (p->rank != 1 || !dim_is_static(p->dim[0]) || p->dim[0].k != t.dim[1].k || !dtype_info[p->dt].is_float)
            return fail(L, a->loc[w + i], "%s: %s must be float [%lld] for x %s, got %s", op,
                        i ? "bias" : "weight", (long long)t.dim[1].k, type_fmt(L->g, &t, tb, sizeof tb),
                        type_fmt(L->g, p, pb, sizeof pb));
    }
    *eps = 1e-5;
    if (a->given[w + 2] && !want_number(L, a->loc[w + 2], &a->v[w + 2], "eps", eps))
        return false;
    if (!(*eps > 0))
        return fail(L, a->loc[w + 2], "%s: eps must be positive, got %g", op, *eps);
    return true;
}

/* group_norm(x, groups, weight, bias, eps=1e-5): PyTorch's F.group_norm. */
static bool bi_group_norm(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x, per[2];
    int64_t groups;
    double eps;
    if (!norm_args(L, "group_norm", a, 2, 2, &x, per, &eps) ||
        !want_int(L, a->loc[1], &a->v[1], "group_norm: groups", &groups))
        return false;
    int64_t ch = tensor_type(L, x)->dim[1].k;
    if (groups < 1 || ch % groups)
        return fail(L, a->loc[1], "group_norm: groups = %lld does not divide x's %lld channels",
                    (long long)groups, (long long)ch);
    L->b.loc = loc;
    return built(L, norm_affine(&L->b, norm_group(&L->b, x, groups, eps), per[0], per[1]), out);
}

/* instance_norm(x, weight, bias, eps=1e-5): PyTorch's F.instance_norm without running
 * statistics. */
static bool bi_instance_norm(Lower *L, Loc loc, const BArgs *a, Value *out)
{
    int x, per[2];
    double eps;
    if (!norm_args(L, "instance_norm", a, 1, 3, &x, per, &eps))
        return false;
    L->b.loc = loc;
    return built(L, norm_affine(&L->b, norm_instance(&L->b, x, eps), per[0], per[1]), out);
}

/* ---------------------------------------------------------------- indexing */

/* built() for a node the caller goes on working on. */
static bool built_id(Lower *L, int id, int *x)
{
    Value v;
    if (!built(L, id, &v))
        return false;
    *x = v.id;
    return true;
}

/* Positions of a symbolic axis of size d (known only at run time) as an i64 tensor [n]:
 * start + step * i, a negative start counted from the end (d + start: the axis's largest
 * index, max(iota), plus one, plus start). */
static int symbolic_positions(Lower *L, Dim d, int64_t start, int64_t step, int64_t n)
{
    Builder *b = &L->b;
    Type along = {.dt = DT_I64, .rank = 1, .dim = {dim_static(n)}};
    int at = b_iota(b, &along, 0);
    if (step != 1)
        at = b_binary(b, OP_MUL, at, b_scalar(b, (double)step, DT_I64));
    int first = start > 0 ? b_scalar(b, (double)start, DT_I64) : -1;
    if (start < 0) {
        Type axis = {.dt = DT_I64, .rank = 1, .dim = {d}};
        first = b_reduce(b, OP_MAX, b_iota(b, &axis, 0), 0, NULL, false);
        if (start != -1)
            first = b_binary(b, OP_ADD, first, b_scalar(b, (double)(1 + start), DT_I64));
    }
    return start == 0 ? at : b_binary(b, OP_ADD, at, first);
}

/* x[..., i] or x[..., start:end:step] on a symbolic axis: a gather of positions, which
 * must lie in the axis at run time (the range checks say so otherwise: the length is
 * static, so Python's clamping cannot apply). Only static lengths are expressible: an
 * index, or bounds counted from one end ([:k], [i:j], [-k:], [-k:-j]); [1:] would have
 * T-1 elements. */
static bool index_symbolic(Lower *L, const Expr *item, int *x, int axis, const int64_t *v,
                           const bool *given, bool *drop)
{
    const Type *t = tensor_type(L, *x);
    char tb[256];
    int64_t start = given[0] ? v[0] : 0, n = 1;
    if (item->kind == E_SLICE) {
        bool from_end = start < 0;
        int64_t end = given[1] ? v[1] : 0;
        if (from_end ? given[1] && end >= 0 : !given[1] || end < 0)
            return fail(L, item->loc, "axis %d of %s is symbolic: a slice of it needs a static "
                        "length, bounds counted from one end ([:k], [i:j], [-k:], [-k:-j])",
                        axis, type_fmt(L->g, t, tb, sizeof tb));
        n = end > start ? (end - start + v[2] - 1) / v[2] : 0;
    }
    *drop = item->kind != E_SLICE;
    int at = symbolic_positions(L, t->dim[axis], start, v[2], n);
    return built_id(L, b_gather(&L->b, *x, at, axis), x);
}

/* One axis of x[...]: an integer picks one element (and the axis is dropped after), a
 * slice keeps start:end:step with Python's rules; on a symbolic axis both gather. */
static bool index_axis(Lower *L, const Expr *item, int *x, int axis, bool *drop)
{
    Dim d = tensor_type(L, *x)->dim[axis];
    int64_t v[3] = {0, INT64_MAX, 1};
    bool given[3] = {false, false, false};
    const Expr *parts[3] = {item, NULL, NULL};
    if (item->kind == E_SLICE)
        parts[0] = item->lhs, parts[1] = item->rhs, parts[2] = item->items;
    static const char *what[3] = {"a slice's start", "a slice's end", "a slice's step"};
    for (int i = 0; i < 3; i++) {
        Value pv;
        if (!parts[i])
            continue;
        if (!eval_expr(L, parts[i], &pv) ||
            !want_int(L, parts[i]->loc, &pv, item->kind == E_SLICE ? what[i] : "an index", &v[i]))
            return false;
        given[i] = true;
    }
    if (v[2] == 0)
        return fail(L, parts[2]->loc, "a slice's step cannot be 0");
    if (v[2] < 0)
        return fail(L, parts[2]->loc, "a slice's step must be positive (the IR's slice has no reversed form)");
    bool whole = item->kind == E_SLICE && (!given[0] || v[0] == 0) && !given[1] && v[2] == 1;
    if (whole)
        return true;
    if (d.syms)
        return index_symbolic(L, item, x, axis, v, given, drop);
    if (item->kind != E_SLICE) {
        int64_t i = v[0] < 0 ? v[0] + d.k : v[0];
        if (i < 0 || i >= d.k)
            return fail(L, item->loc, "index %lld is out of range for axis %d of size %lld (use -%lld to %lld)",
                        (long long)v[0], axis, (long long)d.k, (long long)d.k, (long long)d.k - 1);
        *drop = true;
        return built_id(L, b_slice(&L->b, *x, axis, i, i + 1, 1), x);
    }
    return built_id(L, b_slice(&L->b, *x, axis, v[0], given[1] ? v[1] : d.k, v[2]), x);
}

/* The index list as one entry per axis: a single '...' stands for the axes no index names. */
static bool index_spread(Lower *L, const Expr *e, int rank, const Expr **per_axis)
{
    int n = 0, ellipses = 0;
    for (const Expr *i = e->items; i; i = i->next)
        if (i->kind == E_ELLIPSIS)
            ellipses++;
        else
            n++;
    if (ellipses > 1)
        return fail(L, e->loc, "an index may contain one '...', this one has %d", ellipses);
    if (n > rank)
        return fail(L, e->loc, "too many indices: %d for a tensor of rank %d", n, rank);
    int axis = 0;
    for (const Expr *i = e->items; i; i = i->next) {
        if (i->kind == E_ELLIPSIS) {
            for (int k = 0; k < rank - n; k++)
                per_axis[axis++] = NULL;
            continue;
        }
        per_axis[axis++] = i;
    }
    while (axis < rank)
        per_axis[axis++] = NULL;
    return true;
}

bool lower_index(Lower *L, const Expr *e, Value *out)
{
    Value base;
    int x;
    if (!eval_expr(L, e->lhs, &base) || !want_tensor(L, e->lhs->loc, &base, "the indexed value", &x))
        return false;
    int rank = tensor_type(L, x)->rank;
    const Expr *per_axis[COIL_MAX_RANK];
    bool drop[COIL_MAX_RANK] = {false};
    if (!index_spread(L, e, rank, per_axis))
        return false;
    L->b.loc = e->loc;
    bool any_drop = false;
    for (int a = 0; a < rank; a++) {
        if (per_axis[a] && !index_axis(L, per_axis[a], &x, a, &drop[a]))
            return false;
        any_drop |= drop[a];
    }
    if (!any_drop) {
        *out = v_tensor(x);
        return true;
    }
    const Type *t = tensor_type(L, x);
    Type kept = {.dt = t->dt, .rank = 0};
    for (int a = 0; a < rank; a++)
        if (!drop[a])
            kept.dim[kept.rank++] = t->dim[a];
    return built(L, b_reshape(&L->b, x, &kept), out);
}


/* ---------------------------------------------------------------- the table */

static const struct {
    BuiltinSig sig;
    BuiltinFn fn;
    BuiltinMulti multi;
} builtins[] = {
    {{"reshape", 2, 2, {"x", "shape"}}, bi_reshape, NULL},
    {{"expand", 2, 2, {"x", "shape"}}, bi_expand, NULL},
    {{"cast", 2, 2, {"x", "dtype"}}, bi_cast, NULL},
    {{"full", 3, 2, {"shape", "value", "dtype"}}, bi_full, NULL},
    {{"iota", 3, 1, {"shape", "axis", "dtype"}}, bi_iota, NULL},
    {{"rand", 4, 1, {"shape", "seed", "offset", "dtype"}}, bi_rand, NULL},
    {{"constant", 3, 1, {"values", "shape", "dtype"}}, bi_constant, NULL},
    {{"linear", 3, 2, {"x", "w", "b"}}, bi_linear, NULL},
    {{"embedding", 2, 2, {"table", "ids"}}, bi_embedding, NULL},
    {{"mlp", 6, 5, {"x", "w1", "b1", "w2", "b2", "act"}}, bi_mlp, NULL},
    {{"attention", 9, 3, {"q", "k", "v", "causal", "scale", "heads", "bias", "mask", "kv_heads"}},
     bi_attention, NULL},
    {{"split", 3, 2, {"x", "parts", "axis"}}, NULL, bi_split},
    {{"dropout", 2, 2, {"x", "p"}}, bi_dropout, NULL},
    {{"batch_norm", 7, 3, {"x", "running_mean", "running_var", "weight", "bias", "momentum", "eps"}},
     bi_batch_norm, NULL},
    {{"group_norm", 5, 2, {"x", "groups", "weight", "bias", "eps"}}, bi_group_norm, NULL},
    {{"instance_norm", 4, 1, {"x", "weight", "bias", "eps"}}, bi_instance_norm, NULL},
    {{"conv_transpose", 7, 2, {"x", "w", "stride", "padding", "output_padding", "dilation", "groups"}},
     bi_conv_transpose, NULL},
    {{"max_pool", 6, 2, {"x", "kernel", "stride", "padding", "dilation", "ceil_mode"}}, bi_max_pool, NULL},
    {{"avg_pool", 6, 2, {"x", "kernel", "stride", "padding", "ceil_mode", "count_include_pad"}},
     bi_avg_pool, NULL},
    {{"global_avg_pool", 1, 1, {"x"}}, bi_global_avg_pool, NULL},
    {{"global_max_pool", 1, 1, {"x"}}, bi_global_max_pool, NULL},
    {{"pad", 4, 2, {"x", "pads", "mode", "value"}}, bi_pad, NULL},
    {{"resize", 5, 1, {"x", "size", "scale", "mode", "align_corners"}}, bi_resize, NULL},
};

enum { NBUILTIN = sizeof builtins / sizeof builtins[0] };

const BuiltinSig *builtin_sig(const char *name)
{
    for (int i = 0; i < NBUILTIN; i++)
        if (strcmp(builtins[i].sig.name, name) == 0)
            return &builtins[i].sig;
    return NULL;
}

static bool bind_builtin(Lower *L, const Expr *call, const BuiltinSig *sig, BArgs *a)
{
    int pos = 0;
    for (const Arg *arg = call->args; arg; arg = arg->next) {
        int k = arg->kw ? -1 : pos++;
        for (int i = 0; arg->kw && i < sig->nparam; i++)
            if (strcmp(sig->param[i], arg->kw) == 0)
                k = i;
        if (k < 0 && arg->kw)
            return fail(L, arg->loc, "'%s' has no parameter '%s'", sig->name, arg->kw);
        if (k >= sig->nparam)
            return fail(L, arg->loc, "'%s' takes at most %d arguments", sig->name, sig->nparam);
        if (a->given[k])
            return fail(L, arg->loc, "argument '%s' given twice", sig->param[k]);
        if (!eval_expr(L, arg->value, &a->v[k]))
            return false;
        a->given[k] = true;
        a->loc[k] = arg->value->loc;
    }
    for (int i = 0; i < sig->nrequired; i++)
        if (!a->given[i])
            return fail(L, call->loc, "'%s': missing argument '%s'", sig->name, sig->param[i]);
    return true;
}

bool call_builtin(Lower *L, const Expr *call, Value *out, int max, int *n)
{
    for (int i = 0; i < NBUILTIN; i++)
        if (strcmp(builtins[i].sig.name, call->s) == 0) {
            BArgs a = {0};
            if (!bind_builtin(L, call, &builtins[i].sig, &a))
                return false;
            L->b.loc = call->loc;
            if (builtins[i].multi)
                return builtins[i].multi(L, call->loc, &a, out, max, n);
            *n = 1;
            return builtins[i].fn(L, call->loc, &a, out);
        }
    int op = op_lookup(call->s, strlen(call->s));
    if (op < 0)
        return fail(L, call->loc, "unknown block or op '%s'", call->s);
    *n = 1;
    return call_ir_op(L, op, call, out);
}
