/* value.c — the evaluator's compile-time values: checked conversions (with messages that
 * say what was expected and what came), arithmetic folded at compile time, and the
 * bridge to the builder (numbers lifted to tensors, builder errors to diagnostics). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend/eval.h"

Loc user_loc(const Lower *L, Loc loc)
{
    const Frame *f = L->frame;
    return f && f->item && f->item->prelude && f->site.file ? f->site : loc;
}

bool fail(Lower *L, Loc loc, const char *fmt, ...)
{
    loc = user_loc(L, loc);
    if (!L->failed) {
        va_list ap;
        va_start(ap, fmt);
        diag_verror(L->p->diags, loc, fmt, ap);
        va_end(ap);
    }
    L->failed = true;
    return false;
}

Value v_dim(Dim d)
{
    return d.syms ? (Value){.kind = V_DIM, .dim = d} : v_int(d.k);
}

const Type *v_type(const Lower *L, const Value *v)
{
    return v->kind == V_TENSOR ? &L->g->node[v->id].type : NULL;
}

const char *v_describe(const Lower *L, const Value *v, char *buf, size_t n)
{
    char t[256];
    switch (v->kind) {
    case V_INT: snprintf(buf, n, "integer %lld", (long long)v->i); break;
    case V_FLOAT: snprintf(buf, n, "float %g", v->f); break;
    case V_BOOL: snprintf(buf, n, "bool %s", v->i ? "true" : "false"); break;
    case V_DIM: snprintf(buf, n, "dimension %s", dim_fmt(L->g, v->dim, t, sizeof t)); break;
    case V_STR: snprintf(buf, n, "string \"%.60s\"", v->s); break;
    case V_DTYPE: snprintf(buf, n, "dtype %s", dtype_info[v->dt].name); break;
    case V_LIST: snprintf(buf, n, "a list of %d", v->n); break;
    case V_TENSOR: snprintf(buf, n, "tensor %s", type_fmt(L->g, v_type(L, v), t, sizeof t)); break;
    case V_DIMS: snprintf(buf, n, "the dims of '...'"); break;
    default: snprintf(buf, n, "nothing"); break;
    }
    return buf;
}

/* ---------------------------------------------------------------- checked conversions */

bool wrong_kind(Lower *L, Loc loc, const Value *v, const char *what, const char *want)
{
    char d[300];
    return fail(L, loc, "%s must be %s, got %s", what, want, v_describe(L, v, d, sizeof d));
}

bool want_tensor(Lower *L, Loc loc, const Value *v, const char *what, int *id)
{
    if (v->kind != V_TENSOR)
        return wrong_kind(L, loc, v, what, "a tensor");
    *id = v->id;
    return true;
}

bool want_int(Lower *L, Loc loc, const Value *v, const char *what, int64_t *out)
{
    if (v->kind == V_FLOAT && v->f == floor(v->f) && fabs(v->f) < 9e15)
        return wrong_kind(L, loc, v, what, "an integer (write it without a decimal point)");
    if (v->kind != V_INT)
        return wrong_kind(L, loc, v, what, "an integer");
    *out = v->i;
    return true;
}

bool want_number(Lower *L, Loc loc, const Value *v, const char *what, double *out)
{
    if (!v_is_number(v))
        return wrong_kind(L, loc, v, what, "a number");
    *out = v_number(v);
    return true;
}

bool want_bool(Lower *L, Loc loc, const Value *v, const char *what, bool *out)
{
    if (v->kind != V_BOOL)
        return wrong_kind(L, loc, v, what, "true or false");
    *out = v->i != 0;
    return true;
}

bool want_dim(Lower *L, Loc loc, const Value *v, const char *what, Dim *out)
{
    if (v->kind == V_DIM) {
        *out = v->dim;
        return true;
    }
    if (v->kind != V_INT)
        return wrong_kind(L, loc, v, what, "an integer dimension");
    if (v->i < 0)
        return fail(L, loc, "%s must be >= 0, got %lld", what, (long long)v->i);
    *out = dim_static(v->i);
    return true;
}

bool want_shape(Lower *L, Loc loc, const Value *v, DType dt, Type *out, int *infer)
{
    if (v->kind != V_LIST)
        return wrong_kind(L, loc, v, "a shape", "a list of dimensions like [B, 16]");
    if (v->n > COIL_MAX_RANK)
        return fail(L, loc, "a shape has at most %d dimensions, got %d", COIL_MAX_RANK, v->n);
    *out = (Type){.dt = dt, .rank = v->n};
    if (infer)
        *infer = -1;
    for (int i = 0; i < v->n; i++) {
        const Value *d = &v->items[i];
        if (infer && d->kind == V_INT && d->i == -1 && *infer < 0) {
            *infer = i;
            continue;
        }
        char what[48];
        snprintf(what, sizeof what, "dimension %d of the shape", i);
        if (!want_dim(L, loc, d, what, &out->dim[i]))
            return false;
    }
    return true;
}

/* Whether number v can be stored in dtype dt without changing it. */
static bool fits_dtype(double v, DType dt)
{
    if (dt == DT_BOOL)
        return v == 0 || v == 1;
    return dtype_info[dt].is_float || dtype_round(dt, v) == v;
}

bool as_tensor(Lower *L, Loc loc, const Value *v, DType dt, int *id)
{
    if (v->kind == V_TENSOR) {
        *id = v->id;
        return true;
    }
    double x = 0;
    if (v->kind == V_BOOL && dt == DT_BOOL)
        x = (double)v->i;
    else if (!want_number(L, loc, v, "an operand", &x))
        return false;
    if (!fits_dtype(x, dt))
        return fail(L, loc, "%g cannot be combined with a tensor of dtype %s without changing its "
                    "value (cast the tensor first)", x, dtype_info[dt].name);
    L->b.loc = loc;
    Value t;
    if (!built(L, b_scalar(&L->b, x, dt), &t))
        return false;
    *id = t.id;
    return true;
}

/* The builder formats "FILE:LINE:COL: error: MSG" at b.loc; re-report MSG as a diagnostic. */
bool built(Lower *L, int id, Value *out)
{
    if (id >= 0 && L->g->nnode > LOWER_MAX_NODES)
        return fail(L, L->b.loc, "the model unrolls to more than %d IR nodes", LOWER_MAX_NODES);
    if (id >= 0) {
        L->g->node[id].loc = user_loc(L, L->g->node[id].loc);
        *out = v_tensor(id);
        return true;
    }
    const char *msg = L->berr.msg;
    char prefix[512];
    if (L->b.loc.file)
        snprintf(prefix, sizeof prefix, "%s:%d:%d: error: ", L->b.loc.file, L->b.loc.line, L->b.loc.col);
    else
        snprintf(prefix, sizeof prefix, "error: ");
    if (strncmp(msg, prefix, strlen(prefix)) == 0)
        msg += strlen(prefix);
    return fail(L, L->b.loc, "%s", msg[0] ? msg : "the IR builder rejected this operation");
}

/* ---------------------------------------------------------------- compile-time arithmetic */

static bool fold_int(Lower *L, Loc loc, int op, int64_t a, int64_t b, Value *out)
{
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
    case B_ADD: ovf = __builtin_add_overflow(a, b, &r); break;
    case B_SUB: ovf = __builtin_sub_overflow(a, b, &r); break;
    case B_MUL: ovf = __builtin_mul_overflow(a, b, &r); break;
    case B_DIV: case B_FLOORDIV: case B_MOD:
        if (b == 0)
            return fail(L, loc, "division by zero: %lld %s 0", (long long)a, binop_text(op));
        if (a == INT64_MIN && b == -1)
            return fail(L, loc, "integer overflow in %lld %s -1", (long long)a, binop_text(op));
        if (op == B_DIV && a % b != 0) {
            *out = v_float((double)a / (double)b);
            return true;
        }
        r = op == B_MOD ? a % b : a / b;
        if (op == B_FLOORDIV && (a % b != 0) && ((a < 0) != (b < 0)))
            r--; /* Python floors toward -inf */
        if (op == B_MOD && r != 0 && ((r < 0) != (b < 0)))
            r += b; /* Python's modulo takes the divisor's sign */
        break;
    default:
        *out = v_bool(op == B_EQ ? a == b : op == B_NE ? a != b : op == B_LT ? a < b
                      : op == B_LE ? a <= b : op == B_GT ? a > b : a >= b);
        return true;
    }
    if (ovf)
        return fail(L, loc, "integer overflow in %lld %s %lld", (long long)a, binop_text(op), (long long)b);
    *out = v_int(r);
    return true;
}

static bool fold_float(Lower *L, Loc loc, int op, double a, double b, Value *out)
{
    if ((op == B_DIV || op == B_FLOORDIV || op == B_MOD) && b == 0)
        return fail(L, loc, "division by zero: %g %s 0", a, binop_text(op));
    double r;
    switch (op) {
    case B_ADD: r = a + b; break;
    case B_SUB: r = a - b; break;
    case B_MUL: r = a * b; break;
    case B_DIV: r = a / b; break;
    case B_FLOORDIV: r = floor(a / b); break;
    case B_MOD: r = fmod(a, b); r = r != 0 && ((r < 0) != (b < 0)) ? r + b : r; break;
    default:
        *out = v_bool(op == B_EQ ? a == b : op == B_NE ? a != b : op == B_LT ? a < b
                      : op == B_LE ? a <= b : op == B_GT ? a > b : a >= b);
        return true;
    }
    if (!isfinite(r) && isfinite(a) && isfinite(b))
        return fail(L, loc, "float overflow in %g %s %g", a, binop_text(op), b);
    *out = v_float(r);
    return true;
}

/* Symbolic dims multiply and divide exactly; nothing else is defined on them. */
static bool fold_dim(Lower *L, Loc loc, int op, Dim a, Dim b, Value *out)
{
    char x[128], y[128];
    if (op == B_EQ || op == B_NE) {
        *out = v_bool(dim_eq(a, b) == (op == B_EQ));
        return true;
    }
    if (op == B_MUL) {
        bool ovf = false;
        Dim r = dim_mul(a, b, &ovf);
        if (ovf)
            return fail(L, loc, "%s * %s is not a dimension (overflow, or a symbol squared)",
                        dim_fmt(L->g, a, x, sizeof x), dim_fmt(L->g, b, y, sizeof y));
        *out = v_dim(r);
        return true;
    }
    if (op == B_DIV && b.k != 0 && a.k % b.k == 0 && (a.syms & b.syms) == b.syms) {
        *out = v_dim((Dim){a.k / b.k, a.syms & ~b.syms, 0});
        return true;
    }
    return fail(L, loc, "%s %s %s is not defined on symbolic dimensions (only * and exact /)",
                dim_fmt(L->g, a, x, sizeof x), binop_text(op), dim_fmt(L->g, b, y, sizeof y));
}

/* a + b of two lists: their items in order, a new list (how a loop builds one:
 * `xs = xs + [h]` in a repeat). */
static bool join_lists(Lower *L, const Value *a, const Value *b, Value *out)
{
    int n = a->n + b->n;
    Value *items = arena_alloc(L->arena, sizeof *items * (size_t)(n ? n : 1));
    if (!items)
        return false;
    for (int i = 0; i < n; i++)
        items[i] = i < a->n ? a->items[i] : b->items[i - a->n];
    *out = (Value){.kind = V_LIST, .n = n, .items = items};
    return true;
}

bool fold_binary(Lower *L, Loc loc, int op, const Value *a, const Value *b, Value *out)
{
    char x[300], y[300];
    if (op == B_ADD && a->kind == V_LIST && b->kind == V_LIST)
        return join_lists(L, a, b, out);
    if (op == B_MATMUL)
        return fail(L, loc, "'@' needs two tensors, got %s and %s", v_describe(L, a, x, sizeof x),
                    v_describe(L, b, y, sizeof y));
    if ((a->kind == V_DIM || b->kind == V_DIM) && (a->kind == V_DIM || a->kind == V_INT) &&
        (b->kind == V_DIM || b->kind == V_INT))
        return fold_dim(L, loc, op, a->kind == V_DIM ? a->dim : dim_static(a->i),
                        b->kind == V_DIM ? b->dim : dim_static(b->i), out);
    if (a->kind == V_INT && b->kind == V_INT)
        return fold_int(L, loc, op, a->i, b->i, out);
    if (v_is_number(a) && v_is_number(b))
        return fold_float(L, loc, op, v_number(a), v_number(b), out);
    if (a->kind == b->kind && (op == B_EQ || op == B_NE) &&
        (a->kind == V_BOOL || a->kind == V_DTYPE || a->kind == V_STR)) {
        bool eq = a->kind == V_STR ? strcmp(a->s, b->s) == 0 : a->kind == V_DTYPE ? a->dt == b->dt : a->i == b->i;
        *out = v_bool(eq == (op == B_EQ));
        return true;
    }
    return fail(L, loc, "'%s' cannot combine %s and %s", binop_text(op), v_describe(L, a, x, sizeof x),
                v_describe(L, b, y, sizeof y));
}
