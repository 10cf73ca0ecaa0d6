/* ast.c — constructors for the syntax tree and the list helper the parser uses.
 * Nodes come from the program's arena, so an abandoned parse leaks nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "frontend/ast.h"

typedef struct Link {
    struct Link *next;
} Link;

/* Every AST list node has `next` as its first member, so it can be linked generically. */
List list_append(List l, void *node)
{
    if (!node)
        return l;
    ((Link *)node)->next = NULL;
    if (l.tail)
        ((Link *)l.tail)->next = node;
    else
        l.head = node;
    l.tail = node;
    return l;
}

int list_len(const void *head)
{
    int n = 0;
    for (const Link *p = head; p; p = p->next)
        n++;
    return n;
}

Loc ast_loc(const ParseCtx *ctx, int line, int col)
{
    return (Loc){ctx->file, line, col};
}

void *ast_new(ParseCtx *ctx, size_t size)
{
    return arena_alloc(ctx->arena, size);
}

Expr *ast_expr(ParseCtx *ctx, ExprKind kind, Loc loc)
{
    Expr *e = ast_new(ctx, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->depth = 1;
    return e;
}

static int deeper(int depth, const Expr *e)
{
    return e && e->depth + 1 > depth ? e->depth + 1 : depth;
}

Expr *ast_binary(ParseCtx *ctx, int op, Expr *l, Expr *r, Loc loc)
{
    Expr *e = ast_expr(ctx, E_BINARY, loc);
    e->op = op;
    e->lhs = l;
    e->rhs = r;
    e->depth = deeper(deeper(1, l), r);
    return e;
}

Expr *ast_unary(ParseCtx *ctx, Expr *x, Loc loc)
{
    Expr *e = ast_expr(ctx, E_UNARY, loc);
    e->op = '-';
    e->lhs = x;
    e->depth = deeper(1, x);
    return e;
}

Expr *ast_call(ParseCtx *ctx, const char *callee, Arg *args, LabelPart *label, Loc loc)
{
    Expr *e = ast_expr(ctx, E_CALL, loc);
    e->s = callee;
    e->args = args;
    e->label = label;
    for (Arg *a = args; a; a = a->next)
        e->depth = deeper(e->depth, a->value);
    for (LabelPart *p = label; p; p = p->next)
        e->depth = deeper(e->depth, p->index);
    return e;
}

Expr *ast_list(ParseCtx *ctx, Expr *items, Loc loc)
{
    Expr *e = ast_expr(ctx, E_LIST, loc);
    e->items = items;
    for (Expr *x = items; x; x = x->next)
        e->depth = deeper(e->depth, x);
    return e;
}

Stmt *ast_stmt(ParseCtx *ctx, StmtKind kind, Loc loc)
{
    Stmt *s = ast_new(ctx, sizeof *s);
    s->kind = kind;
    s->loc = loc;
    s->depth = 1;
    return s;
}

const char *binop_text(int op)
{
    static const char *text[B_COUNT] = {
        [B_ADD] = "+", [B_SUB] = "-", [B_MUL] = "*", [B_DIV] = "/", [B_FLOORDIV] = "//",
        [B_MOD] = "%", [B_MATMUL] = "@", [B_EQ] = "==", [B_NE] = "!=", [B_LT] = "<",
        [B_LE] = "<=", [B_GT] = ">", [B_GE] = ">=",
    };
    return op >= 0 && op < B_COUNT ? text[op] : "?";
}

/* ---------------------------------------------------------------- name map */

static uint64_t name_hash(const char *s)
{
    return fnv1a_str(s);
}

static int namemap_slot(const NameMap *m, const char *key)
{
    int mask = m->cap - 1;
    int i = (int)(name_hash(key) & (uint64_t)mask);
    while (m->key[i] && strcmp(m->key[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

void *namemap_get(const NameMap *m, const char *key)
{
    if (m->cap == 0)
        return NULL;
    int i = namemap_slot(m, key);
    return m->key[i] ? m->val[i] : NULL;
}

static void namemap_grow(NameMap *m)
{
    NameMap bigger = {.cap = m->cap ? m->cap * 2 : 16};
    bigger.key = calloc((size_t)bigger.cap, sizeof *bigger.key);
    bigger.val = calloc((size_t)bigger.cap, sizeof *bigger.val);
    if (!bigger.key || !bigger.val) {
        fprintf(stderr, "coil: out of memory in the frontend\n");
        abort();
    }
    for (int i = 0; i < m->cap; i++)
        if (m->key[i]) {
            int j = namemap_slot(&bigger, m->key[i]);
            bigger.key[j] = m->key[i];
            bigger.val[j] = m->val[i];
            bigger.n++;
        }
    namemap_free(m);
    *m = bigger;
}

void namemap_put(NameMap *m, const char *key, void *val)
{
    if ((m->n + 1) * 2 > m->cap)
        namemap_grow(m);
    int i = namemap_slot(m, key);
    if (!m->key[i]) {
        m->key[i] = key;
        m->n++;
    }
    m->val[i] = val;
}

void namemap_free(NameMap *m)
{
    free(m->key);
    free(m->val);
    *m = (NameMap){0};
}

void namemap_suggest(const NameMap *m, Suggest *s)
{
    for (int i = 0; i < m->cap; i++)
        if (m->key[i])
            suggest_try(s, m->key[i]);
}
