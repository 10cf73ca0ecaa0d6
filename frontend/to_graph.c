/* to_graph.c — evaluates a checked program into an IR graph: config constants, the model's
 * inputs, statements, inlined block calls with shape patterns, and parameter naming. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/eval.h"

/* ---------------------------------------------------------------- names */

static Value *lookup(Lower *L, const char *name)
{
    Value *v = L->frame ? namemap_get(&L->frame->names, name) : NULL;
    return v ? v : namemap_get(&L->config, name);
}

static void bind(Lower *L, Frame *f, const char *name, Value v)
{
    Value *slot = namemap_get(&f->names, name);
    if (!slot) {
        slot = arena_alloc(L->arena, sizeof *slot);
        namemap_put(&f->names, name, slot);
    }
    *slot = v;
}

static bool eval_name(Lower *L, const Expr *e, Value *out)
{
    const Value *v = lookup(L, e->s);
    if (v) {
        *out = *v;
        return true;
    }
    Suggest sg;
    suggest_init(&sg, e->s);
    if (L->frame)
        namemap_suggest(&L->frame->names, &sg);
    namemap_suggest(&L->config, &sg);
    char buf[160];
    return fail(L, e->loc, "'%s' has no value here%s (is it assigned only in an `if` branch or a "
                "`repeat` body that did not run?)", e->s, suggest_text(&sg, buf, sizeof buf));
}

static const int binop_ir[B_COUNT] = {
    [B_ADD] = OP_ADD, [B_SUB] = OP_SUB, [B_MUL] = OP_MUL, [B_DIV] = OP_DIV, [B_FLOORDIV] = -1,
    [B_MOD] = -1, [B_MATMUL] = OP_MATMUL, [B_EQ] = OP_EQ, [B_NE] = OP_NE, [B_LT] = OP_LT,
    [B_LE] = OP_LE, [B_GT] = OP_GT, [B_GE] = OP_GE,
};

static bool eval_binary(Lower *L, const Expr *e, Value *out)
{
    Value ab[2];
    if (!eval_expr(L, e->lhs, &ab[0]) || !eval_expr(L, e->rhs, &ab[1]))
        return false;
    if (ab[0].kind != V_TENSOR && ab[1].kind != V_TENSOR)
        return fold_binary(L, e->loc, e->op, &ab[0], &ab[1], out);
    int op = binop_ir[e->op];
    if (op < 0)
        return fail(L, e->loc, "'%s' works on compile-time numbers only, not tensors", binop_text(e->op));
    if (op == OP_MATMUL && (ab[0].kind != V_TENSOR || ab[1].kind != V_TENSOR))
        return fold_binary(L, e->loc, e->op, &ab[0], &ab[1], out);
    return apply_op(L, e->loc, op, ab, 2, NULL, 0, out);
}

static bool eval_unary(Lower *L, const Expr *e, Value *out)
{
    Value x;
    if (!eval_expr(L, e->lhs, &x))
        return false;
    if (x.kind == V_TENSOR)
        return apply_op(L, e->loc, OP_NEG, &x, 1, NULL, 0, out);
    if (x.kind == V_INT && x.i == INT64_MIN)
        return fail(L, e->loc, "integer overflow negating %lld", (long long)x.i);
    if (x.kind == V_INT || x.kind == V_FLOAT) {
        *out = x.kind == V_INT ? v_int(-x.i) : v_float(-x.f);
        return true;
    }
    char d[300];
    return fail(L, e->loc, "unary '-' cannot apply to %s", v_describe(L, &x, d, sizeof d));
}

static bool eval_list(Lower *L, const Expr *e, Value *out)
{
    int n = list_len(e->items);
    Value *items = arena_alloc(L->arena, sizeof *items * (size_t)(n ? n : 1));
    int i = 0;
    for (const Expr *x = e->items; x; x = x->next)
        if (!eval_expr(L, x, &items[i++]))
            return false;
    *out = (Value){.kind = V_LIST, .n = n, .items = items};
    return true;
}

bool eval_expr(Lower *L, const Expr *e, Value *out)
{
    if (L->failed)
        return false;
    switch (e->kind) {
    case E_INT: *out = v_int(e->i); return true;
    case E_FLOAT: *out = v_float(e->f); return true;
    case E_BOOL: *out = v_bool(e->i != 0); return true;
    case E_STR: *out = (Value){.kind = V_STR, .s = e->s}; return true;
    case E_DTYPE: *out = (Value){.kind = V_DTYPE, .dt = e->dt}; return true;
    case E_NAME: return eval_name(L, e, out);
    case E_LIST: return eval_list(L, e, out);
    case E_UNARY: return eval_unary(L, e, out);
    case E_BINARY: return eval_binary(L, e, out);
    case E_ELLIPSIS: return fail(L, e->loc, "'...' is only allowed in a block parameter's type or an index");
    case E_INDEX: return lower_index(L, e, out);
    case E_SLICE: return fail(L, e->loc, "a slice 'a:b' is only allowed inside '[ ]'");
    case E_CALL: {
        int n = 0;
        if (!eval_call_multi(L, e, out, 1, &n))
            return false;
        return n == 1 || fail(L, e->loc, "'%s' gives %d values here, where one is needed", e->s, n);
    }
    }
    return fail(L, e->loc, "unexpected expression");
}

/* ---------------------------------------------------------------- text of expressions */

/* An expression as the user wrote it (for messages about shape patterns). */
static int expr_text(const Expr *e, char *buf, size_t n)
{
    if (n < 2)
        return 0;
    switch (e->kind) {
    case E_INT: return snprintf(buf, n, "%lld", (long long)e->i);
    case E_FLOAT: return snprintf(buf, n, "%g", e->f);
    case E_NAME: return snprintf(buf, n, "%s", e->s);
    case E_ELLIPSIS: return snprintf(buf, n, "...");
    case E_UNARY: {
        int k = snprintf(buf, n, "-");
        return k + expr_text(e->lhs, buf + k, n - (size_t)k);
    }
    case E_BINARY: {
        size_t k = (size_t)expr_text(e->lhs, buf, n);
        if (k < n)
            k += (size_t)snprintf(buf + k, n - k, " %s ", binop_text(e->op));
        if (k < n)
            k += (size_t)expr_text(e->rhs, buf + k, n - k);
        return (int)k;
    }
    default: return snprintf(buf, n, "(...)");
    }
}

static char *type_text(const Lower *L, const TypeExpr *t, char *buf, size_t n)
{
    (void)L;
    size_t k = (size_t)snprintf(buf, n, "%s[", dtype_info[t->dt].name);
    for (const Expr *d = t->dims; d && k < n; d = d->next) {
        k += (size_t)expr_text(d, buf + k, n - k);
        if (d->next && k < n)
            k += (size_t)snprintf(buf + k, n - k, ", ");
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---------------------------------------------------------------- shape patterns */

static bool is_symbol_name(const char *s) { return isupper((unsigned char)s[0]); }

/* Match one declared dim against an actual one, binding a new capitalised name. */
static bool match_dim(Lower *L, Frame *f, const Expr *d, Dim actual, int axis, const char *who,
                      const TypeExpr *pattern, const Type *t, Loc at)
{
    if (d->kind == E_NAME && !lookup(L, d->s) && is_symbol_name(d->s)) {
        bind(L, f, d->s, v_dim(actual));
        return true;
    }
    Value v;
    Dim want;
    if (!eval_expr(L, d, &v) || !want_dim(L, d->loc, &v, "a dimension", &want))
        return false;
    if (dim_eq(want, actual))
        return true;
    char pt[256], tt[256], ws[64], as[64], dt[128];
    expr_text(d, dt, sizeof dt);
    dim_fmt(L->g, want, ws, sizeof ws);
    bool same = strcmp(dt, ws) == 0;
    return fail(L, at, "%s is %s, which does not match %s: dimension %d is %s, expected %s%s%s",
                who, type_fmt(L->g, t, tt, sizeof tt), type_text(L, pattern, pt, sizeof pt), axis,
                dim_fmt(L->g, actual, as, sizeof as), dt, same ? "" : " = ", same ? "" : ws);
}

/* Match a tensor against a pattern type like f32[..., In]: dtype, rank, then each dim. */
static bool match_type(Lower *L, Frame *f, const TypeExpr *pattern, const Value *v, Loc loc,
                       const char *who)
{
    char pt[256], at[256], d[300];
    if (v->kind != V_TENSOR)
        return fail(L, loc, "%s must be a tensor %s, got %s", who, type_text(L, pattern, pt, sizeof pt),
                    v_describe(L, v, d, sizeof d));
    /* A copy: matching evaluates each dim's expression, which may build nodes and move the
     * node array a pointer from v_type points into. */
    Type tv = *v_type(L, v);
    const Type *t = &tv;
    bool ellipsis = pattern->dims && pattern->dims->kind == E_ELLIPSIS;
    int np = list_len(pattern->dims) - ellipsis;
    if (t->dt != pattern->dt || (ellipsis ? t->rank < np : t->rank != np))
        return fail(L, loc, "%s is %s, which does not match %s%s", who, type_fmt(L->g, t, at, sizeof at),
                    type_text(L, pattern, pt, sizeof pt),
                    t->dt != pattern->dt ? " (dtypes differ)" : " (ranks differ)");
    int lead = t->rank - np;
    if (ellipsis) {
        Value *items = arena_alloc(L->arena, sizeof *items * (size_t)(lead ? lead : 1));
        for (int i = 0; i < lead; i++)
            items[i] = v_dim(t->dim[i]);
        Value dims = {.kind = V_DIMS, .n = lead, .items = items};
        const Value *old = namemap_get(&f->names, "...");
        bool same = old && old->n == lead;
        for (int i = 0; same && i < lead; i++)
            same = dim_eq(t->dim[i], old->items[i].kind == V_DIM ? old->items[i].dim : dim_static(old->items[i].i));
        if (old && !same)
            return fail(L, loc, "%s is %s, whose leading dimensions differ from those '...' matched "
                        "before", who, type_fmt(L->g, t, at, sizeof at));
        bind(L, f, "...", dims);
    }
    int axis = lead;
    for (const Expr *dm = ellipsis ? pattern->dims->next : pattern->dims; dm; dm = dm->next, axis++)
        if (!match_dim(L, f, dm, t->dim[axis], axis, who, pattern, t, loc))
            return false;
    return true;
}

/* ---------------------------------------------------------------- statements */

static bool exec(Lower *L, const Stmt *st);

/* Count one unit of unrolling work, so no program runs the compiler for long. */
static bool step(Lower *L, Loc loc)
{
    return ++L->steps <= LOWER_MAX_STEPS ||
           fail(L, loc, "the model unrolls to more than %d statements", LOWER_MAX_STEPS);
}

/* "uniform(-0.03125, 0.03125)": the shortest text that reads back as the same double. */
static void number_text(double v, char *buf, size_t n)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static bool init_text(Lower *L, const Expr *init, char *buf, size_t n)
{
    if (init->kind == E_NAME && init_is_bare(init->s)) {
        snprintf(buf, n, "%s", init->s);
        return true;
    }
    int lo, hi, given = list_len(init->args);
    if (init->kind != E_CALL || !init_arity(init->s, &lo, &hi) || given < lo || given > hi)
        return fail(L, init->loc, "not an initializer (use zeros, ones, normal(std), normal(mean, std), "
                    "uniform(a, b), xavier or kaiming)");
    double v[2];
    int k = 0;
    for (const Arg *a = init->args; a; a = a->next, k++) {
        Value x;
        if (!eval_expr(L, a->value, &x) || !want_number(L, a->value->loc, &x, "an initializer argument", &v[k]))
            return false;
        if (!isfinite(v[k]))
            return fail(L, a->value->loc, "an initializer argument must be finite");
    }
    bool normal = init->s[0] == 'n';
    if (normal && v[k - 1] < 0)
        return fail(L, init->loc, "normal needs std >= 0, got %g", v[k - 1]);
    if (!normal && v[0] > v[1])
        return fail(L, init->loc, "uniform(a, b) needs a <= b, got %g > %g", v[0], v[1]);
    char a[32], b[32];
    number_text(v[0], a, sizeof a);
    if (k == 1)
        snprintf(buf, n, "%s(%s)", init->s, a);
    else
        number_text(v[1], b, sizeof b), snprintf(buf, n, "%s(%s, %s)", init->s, a, b);
    return true;
}

static bool exec_param(Lower *L, const Stmt *st)
{
    const char *local = st->names->s;
    Value shape = {.kind = V_LIST, .n = list_len(st->type->dims)};
    Value *items = arena_alloc(L->arena, sizeof *items * (size_t)(shape.n ? shape.n : 1));
    int i = 0;
    for (const Expr *d = st->type->dims; d; d = d->next)
        if (!eval_expr(L, d, &items[i++]))
            return false;
    shape.items = items;
    Type t;
    char init[160], tb[256];
    if (!want_shape(L, st->type->loc, &shape, st->type->dt, &t, NULL) || !init_text(L, st->value, init, sizeof init))
        return false;
    for (i = 0; i < t.rank; i++)
        if (t.dim[i].syms)
            return fail(L, st->type->loc, "parameter '%s' must have a static shape, got %s", local,
                        type_fmt(L->g, &t, tb, sizeof tb));
    size_t len = strlen(L->frame->prefix) + strlen(local) + 1;
    char *name = arena_alloc(L->arena, len);
    snprintf(name, len, "%s%s", L->frame->prefix, local);
    const Loc *first = namemap_get(&L->params, name);
    Loc here = user_loc(L, st->loc);
    if (first)
        return fail(L, here, "parameter '%s' is declared twice (first at %s:%d:%d); give the block "
                    "calls distinct labels, e.g. `fc1: Linear(...)`, `layers[i]: Layer(...)`", name,
                    first->file, first->line, first->col);
    Loc *at = arena_memdup(L->arena, &here, sizeof here);
    namemap_put(&L->params, name, at);
    L->b.loc = st->loc;
    Value v;
    int id = st->buffer ? b_buffer(&L->b, name, &t, init) : b_param(&L->b, name, &t, init);
    if (!built(L, id, &v))
        return false;
    bind(L, L->frame, local, v);
    return true;
}

static bool exec_assign(Lower *L, const Stmt *st)
{
    int want = list_len(st->names), n = 1;
    Value *vals = arena_alloc(L->arena, sizeof *vals * (size_t)want);
    if (want == 1 && !eval_expr(L, st->value, &vals[0]))
        return false;
    if (want > 1) {
        if (st->value->kind != E_CALL)
            return fail(L, st->loc, "%d names are bound to one value", want);
        if (!eval_call_multi(L, st->value, vals, want, &n))
            return false;
        if (n != want)
            return fail(L, st->loc, "'%s' gives %d value%s, but %d names are bound", st->value->s, n,
                        n == 1 ? "" : "s", want);
    }
    int i = 0;
    for (const Name *nm = st->names; nm; nm = nm->next)
        bind(L, L->frame, nm->s, vals[i++]);
    return true;
}

static bool exec_return(Lower *L, const Stmt *st)
{
    int n = list_len(st->values);
    Value *vals = arena_alloc(L->arena, sizeof *vals * (size_t)n);
    int i = 0;
    for (const Expr *e = st->values; e; e = e->next)
        if (!eval_expr(L, e, &vals[i++]))
            return false;
    L->frame->ret = vals;
    L->frame->nret = n;
    L->frame->ret_loc = st->loc;
    return true;
}

static bool exec_repeat(Lower *L, const Stmt *st)
{
    Value c;
    int64_t n;
    if (!eval_expr(L, st->value, &c) || !want_int(L, st->value->loc, &c, "a repeat count", &n))
        return false;
    if (n < 0 || n > LOWER_MAX_REPEAT)
        return fail(L, st->value->loc, "a repeat count must be between 0 and %d, got %lld",
                    LOWER_MAX_REPEAT, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (!step(L, st->loc)) /* an empty body still costs a step */
            return false;
        if (st->names)
            bind(L, L->frame, st->names->s, v_int(i));
        if (!exec(L, st->body))
            return false;
    }
    return true;
}

static bool exec_if(Lower *L, const Stmt *st)
{
    Value c;
    bool cond = false;
    if (!eval_expr(L, st->value, &c) || !want_bool(L, st->value->loc, &c, "an if condition", &cond))
        return false;
    return exec(L, cond ? st->body : st->els);
}

static bool exec(Lower *L, const Stmt *st)
{
    for (; st && !L->failed; st = st->next) {
        if (!step(L, st->loc))
            return false;
        bool ok = st->kind == S_PARAM    ? exec_param(L, st)
                  : st->kind == S_ASSIGN ? exec_assign(L, st)
                  : st->kind == S_RETURN ? exec_return(L, st)
                  : st->kind == S_REPEAT ? exec_repeat(L, st)
                                         : exec_if(L, st);
        if (!ok)
            return false;
    }
    return !L->failed;
}

/* ---------------------------------------------------------------- block calls */

/* The label's path with indices evaluated: "transformer.h.3." appended to the prefix. */
static bool label_prefix(Lower *L, const Expr *call, const char **out)
{
    size_t cap = strlen(L->frame->prefix) + 1;
    for (const LabelPart *p = call->label; p; p = p->next)
        cap += strlen(p->name) + 24;
    char *s = arena_alloc(L->arena, cap);
    size_t k = (size_t)snprintf(s, cap, "%s", L->frame->prefix);
    for (const LabelPart *p = call->label; p; p = p->next) {
        k += (size_t)snprintf(s + k, cap - k, "%s.", p->name);
        if (!p->index)
            continue;
        Value v;
        int64_t i = 0;
        if (!eval_expr(L, p->index, &v) || !want_int(L, p->index->loc, &v, "a label index", &i))
            return false;
        k += (size_t)snprintf(s + k, cap - k, "%lld.", (long long)i);
    }
    *out = s;
    return true;
}

/* Evaluate a call's arguments (in the caller) into the block's parameter slots. */
static bool bind_block_args(Lower *L, const Item *blk, const Expr *call, Value *slot, bool *given, int np)
{
    int i = 0;
    for (const Arg *a = call->args; a; a = a->next) {
        int k = -1;
        if (!a->kw) {
            k = i++;
        } else {
            int j = 0;
            for (const Param *p = blk->params; p; p = p->next, j++)
                if (strcmp(p->name, a->kw) == 0)
                    k = j;
        }
        if (k < 0 && a->kw)
            return fail(L, a->loc, "block '%s' has no parameter '%s'", blk->name, a->kw);
        if (k >= np)
            return fail(L, a->loc, "block '%s' takes %d argument%s", blk->name, np, np == 1 ? "" : "s");
        if (given[k])
            return fail(L, a->loc, "argument %d of block '%s' is given twice", k + 1, blk->name);
        if (!eval_expr(L, a->value, &slot[k]))
            return false;
        given[k] = true;
    }
    return true;
}

static bool bind_scalar_param(Lower *L, Frame *f, const Param *p, Value v, Loc loc, const char *who)
{
    bool ok = p->type->kind == T_INT   ? v.kind == V_INT || v.kind == V_DIM
              : p->type->kind == T_FLOAT ? v_is_number(&v)
                                         : v.kind == V_BOOL;
    if (!ok)
        return wrong_kind(L, loc, &v, who, p->type->kind == T_INT ? "an integer" : p->type->kind == T_FLOAT
                                                                                   ? "a number" : "true or false");
    if (p->type->kind == T_FLOAT)
        v = v_float(v_number(&v));
    bind(L, f, p->name, v);
    return true;
}

/* Bind the callee's parameters: compile-time ones (with defaults) first, so tensor
 * patterns can use them, then the tensors against their patterns. */
static bool bind_params(Lower *L, const Item *blk, Frame *f, Value *slot, const bool *given, const Expr *call)
{
    Frame *caller = L->frame;
    L->frame = f;
    int k = 0;
    bool ok = true;
    for (const Param *p = blk->params; ok && p; p = p->next, k++) {
        char who[160];
        snprintf(who, sizeof who, "block '%s': argument '%s'", blk->name, p->name);
        if (!given[k] && !p->def)
            ok = fail(L, call->loc, "block '%s': missing argument '%s'", blk->name, p->name);
        else if (!given[k])
            ok = eval_expr(L, p->def, &slot[k]);
        if (ok && p->type->kind != T_TENSOR)
            ok = bind_scalar_param(L, f, p, slot[k], call->loc, who);
    }
    k = 0;
    for (const Param *p = blk->params; ok && p; p = p->next, k++) {
        char who[160];
        snprintf(who, sizeof who, "block '%s': argument '%s'", blk->name, p->name);
        if (p->type->kind == T_TENSOR) {
            ok = match_type(L, f, p->type, &slot[k], call->loc, who);
            if (ok)
                bind(L, f, p->name, slot[k]);
        }
    }
    L->frame = caller;
    return ok;
}

/* Check returned values against declared output types (patterns evaluated in frame f). */
static bool check_rets(Lower *L, Frame *f, Loc loc, const char *what)
{
    int i = 0;
    for (const Param *r = f->item->rets; r; r = r->next, i++) {
        char who[200];
        snprintf(who, sizeof who, "%s: output %d%s%s%s", what, i, r->name ? " ('" : "",
                 r->name ? r->name : "", r->name ? "')" : "");
        if (i >= f->nret || !match_type(L, f, r->type, &f->ret[i], f->ret_loc, who))
            return i < f->nret ? false : fail(L, loc, "%s returns too few values", what);
    }
    return true;
}

static bool call_block(Lower *L, const Item *blk, const Expr *call, Value *out, int max, int *n)
{
    Frame *caller = L->frame;
    if (!caller)
        return fail(L, call->loc, "block '%s' cannot be called in a config value", blk->name);
    if (caller->depth >= LOWER_MAX_CALL_DEPTH)
        return fail(L, call->loc, "block calls nested more than %d deep", LOWER_MAX_CALL_DEPTH);
    int np = list_len(blk->params);
    Value *slot = arena_alloc(L->arena, sizeof *slot * (size_t)(np ? np : 1));
    bool *given = arena_alloc(L->arena, sizeof *given * (size_t)(np ? np : 1));
    Frame f = {.item = blk, .depth = caller->depth + 1, .prefix = caller->prefix,
               .site = user_loc(L, call->loc)};
    bool ok = bind_block_args(L, blk, call, slot, given, np) &&
              (!call->label || label_prefix(L, call, &f.prefix)) &&
              bind_params(L, blk, &f, slot, given, call);
    if (ok) {
        L->frame = &f;
        char what[160];
        snprintf(what, sizeof what, "block '%s'", blk->name);
        ok = exec(L, blk->body) && check_rets(L, &f, call->loc, what);
        L->frame = caller;
    }
    if (ok && f.nret > max)
        ok = fail(L, call->loc, "block '%s' returns %d values; bind them: `a, b = %s(...)`", blk->name,
                  f.nret, blk->name);
    for (int i = 0; ok && i < f.nret; i++)
        out[i] = f.ret[i];
    *n = f.nret;
    namemap_free(&f.names);
    return ok;
}

bool eval_call_multi(Lower *L, const Expr *call, Value *out, int max, int *n)
{
    if (L->failed)
        return false;
    const Item *blk = program_block(L->p, call->s);
    L->b.loc = call->loc;
    if (blk)
        return call_block(L, blk, call, out, max, n);
    return call_builtin(L, call, out, max, n);
}

/* ---------------------------------------------------------------- config and model */

static bool parse_override(Lower *L, const char *set, const char **name, Value *v)
{
    const char *eq = strchr(set, '=');
    if (!eq || eq == set)
        return fail(L, (Loc){0}, "--set %s: write NAME=VALUE", set);
    char *nm = arena_strndup(L->arena, set, (size_t)(eq - set));
    const char *text = eq + 1;
    if (!namemap_get(&L->p->config, nm)) {
        Suggest sg;
        suggest_init(&sg, nm);
        namemap_suggest(&L->p->config, &sg);
        char buf[160];
        return fail(L, (Loc){0}, "--set %s: there is no config constant '%s'%s", set, nm,
                    suggest_text(&sg, buf, sizeof buf));
    }
    char *end;
    long long i = strtoll(text, &end, 10);
    if (*text && !*end && i != LLONG_MAX && i != LLONG_MIN) {
        *v = v_int(i);
    } else if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
        *v = v_bool(text[0] == 't');
    } else {
        double f = strtod(text, &end);
        if (!*text || *end || !isfinite(f))
            return fail(L, (Loc){0}, "--set %s: '%s' is not a number, true or false", set, text);
        *v = v_float(f);
    }
    *name = nm;
    return true;
}

static bool eval_config(Lower *L)
{
    NameMap over = {0};
    bool ok = true;
    for (int i = 0; ok && i < L->o->nset; i++) {
        const char *name = NULL;
        Value v;
        ok = parse_override(L, L->o->set[i], &name, &v);
        if (ok)
            namemap_put(&over, name, arena_memdup(L->arena, &v, sizeof v));
    }
    for (int i = 0; ok && i < L->p->nitems; i++) {
        const Item *it = L->p->items[i];
        for (const ConfigEntry *c = it->kind == I_CONFIG ? it->config : NULL; ok && c; c = c->next) {
            const Value *set = namemap_get(&over, c->name);
            Value v;
            ok = set ? (v = *set, true) : eval_expr(L, c->value, &v);
            if (ok && v.kind != V_INT && v.kind != V_FLOAT && v.kind != V_BOOL) {
                char d[300];
                ok = fail(L, c->loc, "config constant '%s' must be a number or a bool, got %s", c->name,
                          v_describe(L, &v, d, sizeof d));
            }
            if (ok)
                namemap_put(&L->config, c->name, arena_memdup(L->arena, &v, sizeof v));
        }
    }
    namemap_free(&over);
    return ok;
}

/* A model input's type: capitalised unknown names become the graph's symbols. */
static bool input_type(Lower *L, const Param *p, Type *t)
{
    *t = (Type){.dt = p->type->dt, .rank = list_len(p->type->dims)};
    if (t->rank > COIL_MAX_RANK)
        return fail(L, p->type->loc, "a tensor has at most %d dimensions", COIL_MAX_RANK);
    int i = 0;
    for (const Expr *d = p->type->dims; d; d = d->next, i++) {
        if (d->kind == E_NAME && !lookup(L, d->s) && is_symbol_name(d->s)) {
            int sym = graph_sym(L->g, d->s, strlen(d->s));
            if (sym < 0)
                return fail(L, d->loc, "more than %d symbolic dimensions", COIL_MAX_SYMS);
            bind(L, L->frame, d->s, v_dim((Dim){1, 1u << sym, 0}));
        }
        Value v;
        if (!eval_expr(L, d, &v) || !want_dim(L, d->loc, &v, "a dimension", &t->dim[i]))
            return false;
    }
    return true;
}

bool record_buffer_update(Lower *L, Loc loc, int buffer, int value)
{
    const char *name = node_name(&L->g->node[buffer]);
    for (int i = 0; i < L->nupdate; i++)
        if (L->update[i].buffer == buffer)
            return fail(L, loc, "buffer '%s' is updated twice in training (first at %s:%d:%d); "
                        "give each normalisation its own buffers", name, L->update[i].loc.file,
                        L->update[i].loc.line, L->update[i].loc.col);
    if (L->nupdate == L->cap_update) {
        int cap = L->cap_update ? 2 * L->cap_update : 16;
        struct BufferUpdate *u = realloc(L->update, (size_t)cap * sizeof *u);
        if (!u)
            return fail(L, loc, "out of memory");
        L->update = u, L->cap_update = cap;
    }
    L->update[L->nupdate++] = (struct BufferUpdate){buffer, value, user_loc(L, loc)};
    return true;
}

/* After the model's outputs, "update.<buffer>" for each buffer updated (training). */
static bool output_buffer_updates(Lower *L)
{
    for (int i = 0; i < L->nupdate; i++) {
        const char *buffer = node_name(&L->g->node[L->update[i].buffer]);
        size_t len = strlen(buffer) + 8;
        char *name = arena_alloc(L->arena, len);
        snprintf(name, len, "update.%s", buffer);
        L->b.loc = L->update[i].loc;
        if (b_output(&L->b, L->update[i].value, name) < 0)
            return false;
    }
    return true;
}

static bool lower_model(Lower *L, const Item *m)
{
    Frame f = {.item = m, .prefix = ""};
    L->frame = &f;
    bool ok = true;
    for (const Param *p = m->params; ok && p; p = p->next) {
        Type t;
        Value v;
        ok = input_type(L, p, &t) && (L->b.loc = p->loc, built(L, b_input(&L->b, p->name, &t), &v));
        if (ok)
            bind(L, &f, p->name, v);
    }
    char what[160];
    snprintf(what, sizeof what, "model '%s'", m->name);
    ok = ok && exec(L, m->body) && check_rets(L, &f, m->loc, what);
    const Param *r = m->rets;
    for (int i = 0; ok && i < f.nret; i++, r = r ? r->next : NULL) {
        int id = -1;
        ok = want_tensor(L, m->loc, &f.ret[i], "a model output", &id) &&
             b_output(&L->b, id, r ? r->name : NULL) >= 0;
    }
    ok = ok && output_buffer_updates(L);
    namemap_free(&f.names);
    L->frame = NULL;
    return ok;
}

Graph *lower_program(const Source *p, const FeOptions *o)
{
    static const FeOptions none = {0};
    Lower L = {.p = p, .o = o ? o : &none, .arena = arena_new()};
    L.g = graph_new(p->model->name);
    L.b = builder_make(L.g, &L.berr);
    bool ok = eval_config(&L) && lower_model(&L, p->model);
    namemap_free(&L.config);
    namemap_free(&L.params);
    free(L.update);
    arena_free(L.arena);
    if (!ok || L.failed) {
        if (!L.failed)
            fail(&L, p->model->loc, "%s", L.berr.msg);
        graph_free(L.g);
        return NULL;
    }
    return L.g;
}
