/* sema.c — checks a parsed program before lowering: unknown names (with "did you mean"),
 * duplicate definitions, call arities and keywords, return placement, recursion. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"
#include "frontend/to_graph.h"

enum { SEMA_MAX_PARAMS = 64 };

typedef struct Sema {
    Source *p;
    const Item *item;   /* the block or model being checked */
    NameMap *scope;     /* local names of the body being checked */
    NameMap callees;    /* blocks called by the current item (for recursion) */
} Sema;

static void check_expr(Sema *s, const Expr *e);

static const char *const bare_inits[] = {"zeros", "ones", "xavier", "kaiming"};

bool init_is_bare(const char *name)
{
    for (size_t i = 0; i < sizeof bare_inits / sizeof bare_inits[0]; i++)
        if (strcmp(name, bare_inits[i]) == 0)
            return true;
    return false;
}

bool init_arity(const char *name, int *min, int *max)
{
    bool normal = strcmp(name, "normal") == 0, uniform = strcmp(name, "uniform") == 0;
    *min = normal ? 1 : 2;
    *max = 2;
    return normal || uniform;
}

const Item *program_block(const Source *p, const char *name)
{
    return namemap_get(&p->blocks, name);
}

int block_results(const Item *blk)
{
    if (blk->rets)
        return list_len(blk->rets);
    const Stmt *last = blk->body;
    while (last && last->next)
        last = last->next;
    return last && last->kind == S_RETURN ? list_len(last->values) : 1;
}

static bool is_defined(const Sema *s, const char *name)
{
    return (s->scope && namemap_get(s->scope, name)) || namemap_get(&s->p->config, name);
}

static void define(Sema *s, const char *name)
{
    if (s->scope)
        namemap_put(s->scope, name, (void *)name);
}

static void unknown_name(Sema *s, const char *name, Loc loc, const char *what)
{
    Suggest sg;
    suggest_init(&sg, name);
    if (s->scope)
        namemap_suggest(s->scope, &sg);
    namemap_suggest(&s->p->config, &sg);
    char buf[160];
    int lo, hi;
    if (init_is_bare(name) || init_arity(name, &lo, &hi))
        diag_error(s->p->diags, loc, "'%s' is an initializer; it can only follow `param NAME: TYPE =`", name);
    else
        diag_error(s->p->diags, loc, "unknown %s '%s'%s", what, name, suggest_text(&sg, buf, sizeof buf));
}

/* ---------------------------------------------------------------- calls */

static void suggest_callee(const Source *p, Suggest *sg)
{
    namemap_suggest(&p->blocks, sg);
    for (int op = 0; op < OP_COUNT; op++)
        suggest_try(sg, op_info[op].name);
    static const char *const forms[] = {"linear", "embedding", "mlp", "split", "dropout"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        suggest_try(sg, forms[i]);
}

/* Keyword names must be among `names`, appear once, and come after the positionals. */
static void check_keywords(Sema *s, const Expr *call, const char *const *names, int n,
                           const char *what)
{
    bool seen_kw = false;
    for (const Arg *a = call->args; a; a = a->next) {
        if (!a->kw) {
            if (seen_kw)
                diag_error(s->p->diags, a->loc, "positional argument after a keyword argument");
            continue;
        }
        seen_kw = true;
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], a->kw) == 0)
                found = i;
        for (const Arg *b = call->args; b != a; b = b->next)
            if (b->kw && strcmp(b->kw, a->kw) == 0)
                diag_error(s->p->diags, a->loc, "argument '%s' given twice", a->kw);
        if (found >= 0)
            continue;
        Suggest sg;
        suggest_init(&sg, a->kw);
        for (int i = 0; i < n; i++)
            suggest_try(&sg, names[i]);
        char buf[160];
        diag_error(s->p->diags, a->loc, "%s has no parameter '%s'%s", what, a->kw,
                   suggest_text(&sg, buf, sizeof buf));
    }
}

static void check_block_call(Sema *s, const Expr *call, const Item *blk)
{
    const char *names[SEMA_MAX_PARAMS];
    int n = 0;
    for (const Param *p = blk->params; p && n < SEMA_MAX_PARAMS; p = p->next)
        names[n++] = p->name;
    char what[160];
    snprintf(what, sizeof what, "block '%s'", blk->name);
    check_keywords(s, call, names, n, what);
    int positional = 0, given = 0;
    for (const Arg *a = call->args; a; a = a->next, given++)
        positional += !a->kw;
    if (positional > n)
        diag_error(s->p->diags, call->loc, "block '%s' takes %d argument%s, %d given", blk->name,
                   n, n == 1 ? "" : "s", positional);
    for (const Param *p = blk->params; p; p = p->next) {
        bool has = false;
        int i = 0;
        for (const Arg *a = call->args; a; a = a->next, i++)
            has |= a->kw ? strcmp(a->kw, p->name) == 0 : i < n && names[i] == p->name;
        if (!has && !p->def)
            diag_error(s->p->diags, call->loc, "block '%s': missing argument '%s'", blk->name, p->name);
    }
    namemap_put(&s->callees, blk->name, (void *)blk);
}

static void check_op_call(Sema *s, const Expr *call, int op)
{
    const OpInfo *info = &op_info[op];
    const char *names[16];
    for (int i = 0; i < info->nattr && i < 16; i++)
        names[i] = info->attrs[i].name;
    char what[96];
    snprintf(what, sizeof what, "op '%s'", info->name);
    check_keywords(s, call, names, info->nattr, what);
    if (op == OP_INPUT || op == OP_PARAM)
        diag_error(s->p->diags, call->loc, "'%s' cannot be called: declare %s", info->name,
                   op == OP_INPUT ? "model inputs in the model's signature"
                                  : "parameters with `param NAME: TYPE = INIT`");
}

static void check_call(Sema *s, const Expr *call)
{
    for (const LabelPart *l = call->label; l; l = l->next)
        if (l->index)
            check_expr(s, l->index);
    for (const Arg *a = call->args; a; a = a->next)
        check_expr(s, a->value);
    const Item *blk = program_block(s->p, call->s);
    const BuiltinSig *sig = builtin_sig(call->s);
    int op = op_lookup(call->s, strlen(call->s));
    if (call->label && !blk && (sig || op >= 0))
        diag_error(s->p->diags, call->loc, "'%s' is a builtin and has no parameters to name; "
                   "labels apply to block calls", call->s);
    if (blk) {
        check_block_call(s, call, blk);
    } else if (sig) {
        char what[96];
        snprintf(what, sizeof what, "'%s'", sig->name);
        check_keywords(s, call, sig->param, sig->nparam, what);
    } else if (op >= 0) {
        check_op_call(s, call, op);
    } else {
        Suggest sg;
        suggest_init(&sg, call->s);
        suggest_callee(s->p, &sg);
        char buf[160];
        diag_error(s->p->diags, call->loc, "unknown block or op '%s'%s", call->s,
                   suggest_text(&sg, buf, sizeof buf));
    }
}

static void check_expr(Sema *s, const Expr *e)
{
    switch (e->kind) {
    case E_NAME:
        if (!is_defined(s, e->s))
            unknown_name(s, e->s, e->loc, "name");
        break;
    case E_ELLIPSIS:
        diag_error(s->p->diags, e->loc, "'...' is only allowed as the first dimension of a block parameter's type");
        break;
    case E_LIST:
        for (const Expr *x = e->items; x; x = x->next)
            check_expr(s, x);
        break;
    case E_UNARY:
        check_expr(s, e->lhs);
        break;
    case E_BINARY:
        check_expr(s, e->lhs);
        check_expr(s, e->rhs);
        break;
    case E_CALL:
        check_call(s, e);
        break;
    case E_INDEX:
        check_expr(s, e->lhs);
        for (const Expr *x = e->items; x; x = x->next)
            if (x->kind != E_ELLIPSIS)
                check_expr(s, x);
        break;
    case E_SLICE: {
        const Expr *parts[3] = {e->lhs, e->rhs, e->items};
        for (int i = 0; i < 3; i++)
            if (parts[i])
                check_expr(s, parts[i]);
        break;
    }
    default:
        break;
    }
}

/* ---------------------------------------------------------------- signatures */

static bool is_symbol_name(const char *name) { return isupper((unsigned char)name[0]); }

/* Dims of a signature type: unknown capitalised names are introduced (symbols in a model,
 * pattern variables in a block); `...` may lead a block parameter's type. */
static void check_sig_type(Sema *s, const TypeExpr *t, bool allow_ellipsis, bool introduce)
{
    if (t->kind != T_TENSOR)
        return;
    for (const Expr *d = t->dims; d; d = d->next) {
        if (d->kind == E_ELLIPSIS) {
            if (!allow_ellipsis || d != t->dims)
                diag_error(s->p->diags, d->loc, "'...' is only allowed as the first dimension of a "
                           "block parameter's type");
            continue;
        }
        if (d->kind == E_NAME && !is_defined(s, d->s) && is_symbol_name(d->s) && introduce) {
            define(s, d->s);
            continue;
        }
        if (d->kind == E_NAME && !is_defined(s, d->s) && !is_symbol_name(d->s)) {
            Suggest sg;
            suggest_init(&sg, d->s);
            namemap_suggest(s->scope, &sg);
            namemap_suggest(&s->p->config, &sg);
            char buf[160];
            diag_error(s->p->diags, d->loc, "unknown name '%s' in a shape%s (a new symbolic "
                       "dimension must start with an uppercase letter)", d->s,
                       suggest_text(&sg, buf, sizeof buf));
            continue;
        }
        check_expr(s, d);
    }
}

/* A model output's name in the graph: its own, or out<i> (b_output's) when unnamed. */
static const char *output_name(const Param *r, int i, char *buf, size_t n)
{
    if (r->name)
        return r->name;
    snprintf(buf, n, "out%d", i);
    return buf;
}

/* A model's outputs are found by name (coil run, the C API, packages): no two alike. */
static void check_output_names(Sema *s, const Param *rets)
{
    int i = 0;
    for (const Param *r = rets; r; r = r->next, i++) {
        char mine[32], theirs[32];
        const char *name = output_name(r, i, mine, sizeof mine);
        int j = 0;
        for (const Param *q = rets; q != r; q = q->next, j++)
            if (strcmp(output_name(q, j, theirs, sizeof theirs), name) == 0) {
                diag_error(s->p->diags, r->loc, "outputs %d and %d are both named '%s'%s", j, i,
                           name, r->name && q->name ? "" : " (an unnamed output i is out<i>)");
                break;
            }
    }
}

static void check_signature(Sema *s, const Item *it)
{
    bool model = it->kind == I_MODEL;
    if (list_len(it->params) > SEMA_MAX_PARAMS)
        diag_error(s->p->diags, it->loc, "'%s' has %d parameters; the limit is %d", it->name,
                   list_len(it->params), SEMA_MAX_PARAMS);
    for (const Param *p = it->params; p; p = p->next) {
        for (const Param *q = it->params; q != p; q = q->next)
            if (strcmp(q->name, p->name) == 0)
                diag_error(s->p->diags, p->loc, "parameter '%s' is declared twice", p->name);
        if (model && p->type->kind != T_TENSOR)
            diag_error(s->p->diags, p->loc, "model inputs are tensors: give '%s' a type like f32[B, 16]", p->name);
        if (p->def && p->type->kind == T_TENSOR)
            diag_error(s->p->diags, p->def->loc, "only int, float and bool parameters take defaults");
        if (p->def)
            check_expr(s, p->def);
        define(s, p->name);
    }
    for (const Param *p = it->params; p; p = p->next)
        check_sig_type(s, p->type, !model, true);
    for (const Param *r = it->rets; r; r = r->next)
        check_sig_type(s, r->type, !model, false);
    if (model)
        check_output_names(s, it->rets);
    if (model && !it->rets)
        diag_error(s->p->diags, it->loc, "model '%s' needs its output types: `model %s(...) -> f32[...]`",
                   it->name, it->name);
}

/* ---------------------------------------------------------------- statements */

static void check_init(Sema *s, const Expr *init)
{
    if (init->kind == E_NAME && init_is_bare(init->s))
        return;
    int lo, hi;
    if (init->kind == E_CALL && !init->label && init_arity(init->s, &lo, &hi)) {
        int got = list_len(init->args);
        if (got < lo || got > hi)
            diag_error(s->p->diags, init->loc, "%s() takes %s arguments, %d given", init->s,
                       lo == hi ? "2" : "1 or 2", got);
        for (const Arg *a = init->args; a; a = a->next) {
            if (a->kw)
                diag_error(s->p->diags, a->loc, "%s() takes positional arguments", init->s);
            check_expr(s, a->value);
        }
        return;
    }
    const char *name = init->kind == E_NAME || init->kind == E_CALL ? init->s : "";
    Suggest sg;
    suggest_init(&sg, name);
    for (size_t i = 0; i < sizeof bare_inits / sizeof bare_inits[0]; i++)
        suggest_try(&sg, bare_inits[i]);
    suggest_try(&sg, "normal");
    suggest_try(&sg, "uniform");
    char buf[160];
    diag_error(s->p->diags, init->loc, "not an initializer (use zeros, ones, normal(std), "
               "normal(mean, std), uniform(a, b), xavier or kaiming)%s", suggest_text(&sg, buf, sizeof buf));
}

static void check_assign(Sema *s, const Stmt *st)
{
    check_expr(s, st->value);
    int targets = list_len(st->names);
    const Expr *v = st->value;
    const Item *blk = v->kind == E_CALL ? program_block(s->p, v->s) : NULL;
    bool multi = blk || (v->kind == E_CALL && strcmp(v->s, "split") == 0);
    if (blk && block_results(blk) != targets)
        diag_error(s->p->diags, st->loc, "block '%s' returns %d value%s, but %d name%s bound",
                   blk->name, block_results(blk), block_results(blk) == 1 ? "" : "s", targets,
                   targets == 1 ? " is" : "s are");
    else if (!multi && targets > 1)
        diag_error(s->p->diags, st->loc, "%d names are bound to one value", targets);
    for (const Name *n = st->names; n; n = n->next)
        define(s, n->s);
}

static void check_return(Sema *s, const Stmt *st, bool top)
{
    for (const Expr *e = st->values; e; e = e->next)
        check_expr(s, e);
    if (!top || st->next) {
        diag_error(s->p->diags, st->loc, "return must be the last statement of a %s's body",
                   s->item->kind == I_MODEL ? "model" : "block");
        return;
    }
    int n = list_len(st->values), want = list_len(s->item->rets);
    if (s->item->rets && n != want)
        diag_error(s->p->diags, st->loc, "%s '%s' declares %d output%s but returns %d value%s",
                   s->item->kind == I_MODEL ? "model" : "block", s->item->name, want,
                   want == 1 ? "" : "s", n, n == 1 ? "" : "s");
}

static void check_stmts(Sema *s, const Stmt *st, bool top)
{
    for (; st; st = st->next) {
        switch (st->kind) {
        case S_PARAM:
            check_sig_type(s, st->type, false, false);
            if (st->type->kind != T_TENSOR)
                diag_error(s->p->diags, st->type->loc, "a parameter is a tensor: give it a type like f32[16, 16]");
            check_init(s, st->value);
            define(s, st->names->s);
            break;
        case S_ASSIGN:
            check_assign(s, st);
            break;
        case S_RETURN:
            check_return(s, st, top);
            break;
        case S_REPEAT:
            check_expr(s, st->value);
            if (st->names)
                define(s, st->names->s);
            check_stmts(s, st->body, false);
            break;
        case S_IF:
            check_expr(s, st->value);
            check_stmts(s, st->body, false);
            check_stmts(s, st->els, false);
            break;
        }
    }
}

static void check_item(Sema *s, const Item *it)
{
    NameMap scope = {0};
    s->item = it;
    s->scope = &scope;
    namemap_free(&s->callees);
    check_signature(s, it);
    check_stmts(s, it->body, true);
    const Stmt *last = it->body;
    while (last && last->next)
        last = last->next;
    if (!last || last->kind != S_RETURN)
        diag_error(s->p->diags, it->loc, "%s '%s' does not end with a return statement",
                   it->kind == I_MODEL ? "model" : "block", it->name);
    namemap_free(&scope);
    s->scope = NULL;
}

/* ---------------------------------------------------------------- recursion */

typedef struct CallGraph {
    const Item **blk;
    NameMap *callees; /* per block: the blocks it calls */
    NameMap index;    /* block name -> its index + 1 */
    int n;
} CallGraph;

/* An iterative depth-first search (no recursion, whatever the program): a call that
 * reaches a block still on the stack closes a cycle. */
static void check_recursion(Source *p, CallGraph *cg)
{
    for (int i = 0; i < cg->n; i++)
        namemap_put(&cg->index, cg->blk[i]->name, (void *)(intptr_t)(i + 1));
    char *color = calloc((size_t)cg->n + 1, 1); /* 0 new, 1 on the stack, 2 done */
    int *stack = calloc((size_t)cg->n + 1, sizeof *stack), *next = calloc((size_t)cg->n + 1, sizeof *next);
    for (int root = 0; color && stack && next && root < cg->n; root++) {
        if (color[root])
            continue;
        int top = 0;
        stack[top] = root, color[root] = 1, next[root] = 0;
        while (top >= 0) {
            int b = stack[top];
            const NameMap *m = &cg->callees[b];
            while (next[b] < m->cap && !m->key[next[b]])
                next[b]++;
            if (next[b] >= m->cap) {
                color[b] = 2, top--;
                continue;
            }
            int c = (int)(intptr_t)namemap_get(&cg->index, m->key[next[b]++]) - 1;
            if (c < 0 || color[c] == 2)
                continue;
            if (color[c] == 1) {
                diag_error(p->diags, cg->blk[c]->loc, "block '%s' calls itself (directly or through "
                           "other blocks); recursion is not supported: use repeat", cg->blk[c]->name);
                continue;
            }
            stack[++top] = c, color[c] = 1, next[c] = 0;
        }
    }
    free(color);
    free(stack);
    free(next);
}

/* ---------------------------------------------------------------- program */

static void collect(Source *p)
{
    for (int i = 0; i < p->nitems; i++) {
        Item *it = p->items[i];
        if (it->kind == I_CONFIG) {
            for (ConfigEntry *c = it->config; c; c = c->next) {
                ConfigEntry *old = namemap_get(&p->config, c->name);
                if (old)
                    diag_error(p->diags, c->loc, "config constant '%s' is already defined at %s:%d:%d",
                               c->name, old->loc.file, old->loc.line, old->loc.col);
                else
                    namemap_put(&p->config, c->name, c);
            }
        } else if (it->kind == I_BLOCK) {
            Item *old = namemap_get(&p->blocks, it->name);
            if (old && !old->prelude)
                diag_error(p->diags, it->loc, "block '%s' is already defined at %s:%d:%d", it->name,
                           old->loc.file, old->loc.line, old->loc.col);
            else
                namemap_put(&p->blocks, it->name, it);
        } else if (it->kind == I_MODEL) {
            if (p->model)
                diag_error(p->diags, it->loc, "a second model '%s': a program has exactly one "
                           "(the first, '%s', is at %s:%d:%d)", it->name, p->model->name,
                           p->model->loc.file, p->model->loc.line, p->model->loc.col);
            else
                p->model = it;
        }
    }
}

/* Config values may use only the constants defined above them. */
static void check_config(Source *p)
{
    NameMap all = p->config;
    p->config = (NameMap){0};
    Sema s = {.p = p};
    for (int i = 0; i < p->nitems; i++)
        for (ConfigEntry *c = p->items[i]->kind == I_CONFIG ? p->items[i]->config : NULL; c; c = c->next) {
            check_expr(&s, c->value);
            if (!namemap_get(&p->config, c->name))
                namemap_put(&p->config, c->name, c);
        }
    namemap_free(&p->config);
    p->config = all;
    namemap_free(&s.callees);
}

bool sema_check(Source *p)
{
    int before = diags_count(p->diags);
    collect(p);
    check_config(p);
    if (!p->model)
        diag_error(p->diags, (Loc){0}, "no model defined: a program needs one `model NAME(inputs) -> outputs { ... }`");
    CallGraph cg = {0};
    cg.blk = calloc((size_t)p->nitems + 1, sizeof *cg.blk);
    cg.callees = calloc((size_t)p->nitems + 1, sizeof *cg.callees);
    Sema s = {.p = p};
    for (int i = 0; i < p->nitems && cg.blk && cg.callees; i++) {
        Item *it = p->items[i];
        if (it->kind != I_BLOCK && it->kind != I_MODEL)
            continue;
        if (it->kind == I_BLOCK && program_block(p, it->name) != it)
            continue; /* a replaced prelude block */
        check_item(&s, it);
        if (it->kind == I_BLOCK) {
            cg.blk[cg.n] = it;
            cg.callees[cg.n++] = s.callees;
            s.callees = (NameMap){0};
        }
    }
    namemap_free(&s.callees);
    if (cg.blk && cg.callees)
        check_recursion(p, &cg);
    for (int i = 0; i < cg.n; i++)
        namemap_free(&cg.callees[i]);
    namemap_free(&cg.index);
    free(cg.blk);
    free(cg.callees);
    return diags_count(p->diags) == before;
}
