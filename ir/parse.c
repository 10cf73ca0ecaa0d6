/* parse.c — the IR text form's parser (docs/IR.md): recursive descent over irlex tokens,
 * building through the builder so a parsed graph gets every check a built one gets. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "irlex.h"

#define IR_MAX_BYTES ((size_t)1 << 30) /* the largest IR text read */
#define IR_MAX_OPERANDS 4096           /* per statement; concat of more is a bug, not a model */

/* A %name as written: bare and quoted names are distinct, so an input named "0" (written
 * %"0") never collides with statement %0. */
typedef struct Name {
    const char *s;
    size_t n;
    bool quoted;
    Loc loc;
} Name;

typedef struct ValEntry {
    Name name;
    int id;
    bool used;
} ValEntry;

/* Names to ids: open addressing, the capacity a power of two. */
typedef struct NameTab {
    ValEntry *e;
    size_t n, cap;
} NameTab;

typedef struct OutDecl {
    const char *name; /* as written, or the default out<i> */
    Type type;
    Loc loc;
} OutDecl;

typedef struct Parser {
    Lexer lx;
    Token tok;
    Err *err;
    Arena *tmp;       /* scratch for names and attribute lists, freed after parsing */
    Graph *g;
    Builder b;
    const char *file; /* in g's arena: node locations point at it */
    NameTab vals;     /* %names defined so far */
    NameTab outs;     /* output names declared in the header */
    uint32_t before[COIL_MAX_SYMS]; /* before[s]: symbols written before s in one dim */
} Parser;

/* ---------------------------------------------------------------- tokens and errors */

static bool next(Parser *p) { return lex_next(&p->lx, &p->tok); }

static bool expected(Parser *p, const char *what)
{
    char got[64];
    if (p->tok.kind == TK_EOF)
        err_at(p->err, p->tok.loc, "unexpected end of file; expected %s", what);
    else
        err_at(p->err, p->tok.loc, "expected %s, got %s", what, tok_describe(&p->tok, got, sizeof got));
    return false;
}

static bool expect(Parser *p, TokKind kind, const char *what)
{
    return p->tok.kind == kind ? next(p) : expected(p, what);
}

static bool tok_is(const Token *t, TokKind kind, const char *text)
{
    return t->kind == kind && t->slen == strlen(text) && memcmp(t->s, text, t->slen) == 0;
}

/* Growable arrays in the scratch arena (the old block is left behind; it is scratch). */
static void *grow(Arena *a, void *arr, int *cap, int n, size_t size)
{
    if (n < *cap)
        return arr;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = arena_alloc(a, (size_t)ncap * size);
    if (n)
        memcpy(p, arr, (size_t)n * size);
    *cap = ncap;
    return p;
}

/* Levenshtein distance, for "did you mean"; long words are never close. */
static int edit_distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    if (n > 32 || m > 32)
        return 99;
    int row[33];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

/* Keeps cand in *best when it is within distance 2 of (s, n) and closer than *best_d. */
static void closest(const char *s, size_t n, const char *cand, const char **best, int *best_d)
{
    int d = edit_distance(s, n, cand);
    if (d <= 2 && d < *best_d) {
        *best_d = d;
        *best = cand;
    }
}

/* ---------------------------------------------------------------- values */

static uint64_t name_hash(const Name *nm)
{
    return fnv1a(FNV1A_OFFSET ^ (uint64_t)nm->quoted, nm->s, nm->n);
}

static ValEntry *val_slot(ValEntry *tab, size_t cap, const Name *nm)
{
    for (size_t i = name_hash(nm) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        ValEntry *e = &tab[i];
        if (!e->used || (e->name.quoted == nm->quoted && e->name.n == nm->n &&
                         memcmp(e->name.s, nm->s, nm->n) == 0))
            return e;
    }
}

static const ValEntry *tab_find(const NameTab *t, const Name *nm)
{
    if (!t->cap)
        return NULL;
    const ValEntry *e = val_slot(t->e, t->cap, nm);
    return e->used ? e : NULL;
}

static bool tab_add(Parser *p, NameTab *t, const Name *nm, int id)
{
    if (2 * (t->n + 1) > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        ValEntry *tab = calloc(ncap, sizeof *tab);
        if (!tab) {
            err_at(p->err, nm->loc, "out of memory");
            return false;
        }
        for (size_t i = 0; i < t->cap; i++)
            if (t->e[i].used)
                *val_slot(tab, ncap, &t->e[i].name) = t->e[i];
        free(t->e);
        t->e = tab;
        t->cap = ncap;
    }
    *val_slot(t->e, t->cap, nm) = (ValEntry){*nm, id, true};
    t->n++;
    return true;
}

/* The current %name token, copied to scratch memory; advances. */
static bool take_name(Parser *p, Name *nm)
{
    if (p->tok.kind != TK_VALUE)
        return expected(p, "a value '%name'");
    *nm = (Name){arena_strndup(p->tmp, p->tok.s, p->tok.slen), p->tok.slen, p->tok.quoted, p->tok.loc};
    if (nm->n == 0) {
        err_at(p->err, nm->loc, "empty value name");
        return false;
    }
    return next(p);
}

static bool define_new(Parser *p, const Name *nm)
{
    const ValEntry *e = tab_find(&p->vals, nm);
    if (!e)
        return true;
    err_at(p->err, nm->loc, "redefinition of %%%s%.*s%s (first defined at line %d, column %d)",
           nm->quoted ? "\"" : "", (int)(nm->n > 64 ? 64 : nm->n), nm->s, nm->quoted ? "\"" : "",
           e->name.loc.line, e->name.loc.col);
    return false;
}

/* A use of a value: its node id. */
static bool use_value(Parser *p, int *id, Loc *loc)
{
    Name nm;
    Token t = p->tok;
    if (!take_name(p, &nm))
        return false;
    const ValEntry *e = tab_find(&p->vals, &nm);
    if (!e) {
        err_at(p->err, nm.loc, "use of undefined value %.*s; values must be defined before they are used",
               (int)(t.n > 64 ? 64 : t.n), t.p);
        return false;
    }
    *id = e->id;
    if (loc)
        *loc = nm.loc;
    return true;
}

/* ---------------------------------------------------------------- numbers */

static bool number_text(Parser *p, const Token *t, char *buf, size_t n)
{
    if (t->n >= n) {
        err_at(p->err, t->loc, "number '%.20s...' is too long", t->p);
        return false;
    }
    memcpy(buf, t->p, t->n);
    buf[t->n] = 0;
    return true;
}

static bool is_int_token(const Token *t)
{
    if (t->kind != TK_NUMBER)
        return false;
    for (size_t i = t->p[0] == '-'; i < t->n; i++)
        if (t->p[i] < '0' || t->p[i] > '9')
            return false;
    return true;
}

static bool is_float_token(const Token *t)
{
    return t->kind == TK_NUMBER || tok_is(t, TK_IDENT, "inf") || tok_is(t, TK_IDENT, "nan");
}

/* The current token (checked with is_int_token) as an int64; advances. */
static bool take_int(Parser *p, int64_t *v)
{
    char buf[512];
    if (!number_text(p, &p->tok, buf, sizeof buf))
        return false;
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno == ERANGE) {
        err_at(p->err, p->tok.loc, "integer %s does not fit in 64 bits", buf);
        return false;
    }
    *v = x;
    return next(p);
}

/* The current token (checked with is_float_token) as a double; advances. */
static bool take_float(Parser *p, double *v)
{
    char buf[512];
    if (!number_text(p, &p->tok, buf, sizeof buf))
        return false;
    errno = 0;
    *v = strtod(buf, NULL);
    if (errno == ERANGE && isinf(*v)) {
        err_at(p->err, p->tok.loc, "number %s is out of range for a 64-bit float", buf);
        return false;
    }
    return next(p);
}

/* ---------------------------------------------------------------- types */

static bool unknown_dtype(Parser *p, const Token *t)
{
    char list[128] = "";
    for (int i = 0; i < DT_COUNT; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", dtype_info[i].name);
    err_at(p->err, t->loc, "unknown dtype '%.*s' (expected one of %s)", (int)(t->slen > 32 ? 32 : t->slen),
           t->s, list);
    return false;
}

/* One factor of a dim: an integer or a symbol, multiplied into *d. */
static bool parse_factor(Parser *p, Dim *d, int *order, int *norder, bool *overflow)
{
    const Token *t = &p->tok;
    if (is_int_token(t) && t->p[0] != '-') {
        int64_t k;
        if (!take_int(p, &k))
            return false;
        *d = dim_mul(*d, dim_static(k), overflow);
        return true;
    }
    if (t->kind != TK_IDENT)
        return expected(p, "a dim: a non-negative integer, a symbol, or a product like 2*B");
    int s = graph_sym(p->g, t->s, t->slen);
    if (s < 0) {
        err_at(p->err, t->loc, "too many symbols: a graph has at most %d", COIL_MAX_SYMS);
        return false;
    }
    if (d->syms >> s & 1) {
        err_at(p->err, t->loc, "symbol %s appears twice in one dim", p->g->sym[s]);
        return false;
    }
    *d = dim_mul(*d, (Dim){1, 1u << s, 0}, overflow);
    order[(*norder)++] = s;
    return next(p);
}

/* factor ('*' factor)*; records the written order of its symbols. */
static bool parse_dim(Parser *p, Dim *d)
{
    Loc at = p->tok.loc;
    int order[COIL_MAX_SYMS], norder = 0;
    bool overflow = false;
    *d = dim_static(1);
    if (!parse_factor(p, d, order, &norder, &overflow))
        return false;
    while (p->tok.kind == TK_STAR)
        if (!next(p) || !parse_factor(p, d, order, &norder, &overflow))
            return false;
    if (overflow) {
        err_at(p->err, at, "dim overflows 64 bits");
        return false;
    }
    for (int i = 0; i < norder; i++)
        for (int j = i + 1; j < norder; j++)
            p->before[order[j]] |= 1u << order[i];
    return true;
}

/* dtype '[' dims ']' with the dtype token already read. */
static bool parse_type_rest(Parser *p, const Token *dt, Type *t)
{
    *t = (Type){0};
    if (!dtype_parse(dt->s, dt->slen, &t->dt))
        return unknown_dtype(p, dt);
    if (!expect(p, TK_LBRACKET, "'[' after the dtype (rank 0 is written f32[])"))
        return false;
    if (p->tok.kind == TK_RBRACKET)
        return next(p);
    for (;;) {
        if (t->rank == COIL_MAX_RANK) {
            err_at(p->err, p->tok.loc, "too many dims: the rank is at most %d", COIL_MAX_RANK);
            return false;
        }
        if (!parse_dim(p, &t->dim[t->rank++]))
            return false;
        if (p->tok.kind != TK_COMMA)
            return expect(p, TK_RBRACKET, "',' or ']' in a type");
        if (!next(p))
            return false;
    }
}

static bool parse_type(Parser *p, Type *t)
{
    if (p->tok.kind != TK_IDENT)
        return expected(p, "a type like f32[B,4]");
    Token dt = p->tok;
    return next(p) && parse_type_rest(p, &dt, t);
}

/* ---------------------------------------------------------------- attributes */

static const char *const kind_text[] = {
    [AK_INT] = "an integer", [AK_FLOAT] = "a number", [AK_BOOL] = "true or false",
    [AK_INTS] = "a list of integers like [0, 1]", [AK_STR] = "a string in double quotes",
    [AK_DATA] = "a list of numbers like [1, 2.5]",
};

static bool wrong_kind(Parser *p, const OpInfo *op, const AttrSpec *spec)
{
    char got[64];
    err_at(p->err, p->tok.loc, "%s: attribute '%s' takes %s, got %s", op->name, spec->name,
           kind_text[spec->kind], tok_describe(&p->tok, got, sizeof got));
    return false;
}

/* '[' item (',' item)* ']' of integers or numbers, into the scratch arena. */
static bool parse_list(Parser *p, const OpInfo *op, const AttrSpec *spec, Attr *a)
{
    bool ints = spec->kind == AK_INTS;
    void *items = NULL;
    int n = 0, cap = 0;
    if (!next(p))
        return false;
    while (p->tok.kind != TK_RBRACKET) {
        if (n > 0 && !expect(p, TK_COMMA, "',' or ']' in a list"))
            return false;
        if (!(ints ? is_int_token(&p->tok) : is_float_token(&p->tok)))
            return wrong_kind(p, op, spec);
        if (n == INT32_MAX - 1) {
            err_at(p->err, p->tok.loc, "%s: attribute '%s' has too many elements", op->name, spec->name);
            return false;
        }
        items = grow(p->tmp, items, &cap, n, ints ? sizeof(int64_t) : sizeof(double));
        if (!(ints ? take_int(p, (int64_t *)items + n) : take_float(p, (double *)items + n)))
            return false;
        n++;
    }
    a->n = n;
    if (ints)
        a->ints = items;
    else
        a->data = items;
    return next(p);
}

static bool parse_attr_value(Parser *p, const OpInfo *op, const AttrSpec *spec, Attr *a)
{
    *a = (Attr){.name = spec->name, .kind = spec->kind};
    const Token *t = &p->tok;
    switch (spec->kind) {
    case AK_INT:
        return is_int_token(t) ? take_int(p, &a->i) : wrong_kind(p, op, spec);
    case AK_FLOAT:
        return is_float_token(t) ? take_float(p, &a->f) : wrong_kind(p, op, spec);
    case AK_BOOL:
        if (!tok_is(t, TK_IDENT, "true") && !tok_is(t, TK_IDENT, "false"))
            return wrong_kind(p, op, spec);
        a->i = tok_is(t, TK_IDENT, "true");
        return next(p);
    case AK_STR:
        if (t->kind != TK_STRING)
            return wrong_kind(p, op, spec);
        a->s = arena_strndup(p->tmp, t->s, t->slen);
        return next(p);
    case AK_INTS:
    case AK_DATA:
        return t->kind == TK_LBRACKET ? parse_list(p, op, spec, a) : wrong_kind(p, op, spec);
    }
    return wrong_kind(p, op, spec);
}

static bool unknown_attr(Parser *p, const OpInfo *op, const Token *t)
{
    int len = (int)(t->slen > 32 ? 32 : t->slen);
    if (op->nattr == 0) {
        err_at(p->err, t->loc, "%s has no attributes, got '%.*s'", op->name, len, t->s);
        return false;
    }
    char list[256] = "", hint[64] = "";
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; i < op->nattr; i++) {
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", op->attrs[i].name);
        closest(t->s, t->slen, op->attrs[i].name, &best, &best_d);
    }
    if (best)
        snprintf(hint, sizeof hint, "; did you mean '%s'?", best);
    err_at(p->err, t->loc, "%s has no attribute '%.*s'%s (its attributes: %s)", op->name, len, t->s, hint, list);
    return false;
}

/* name '=' value (',' name '=' value)* up to the token `end`, which is left to the caller;
 * `more` says what may follow an attribute. */
static bool parse_attr_list(Parser *p, const OpInfo *op, Attr *attrs, int *nattrs, TokKind end,
                            const char *more)
{
    uint32_t seen = 0;
    while (p->tok.kind != end) {
        if (*nattrs > 0 && !expect(p, TK_COMMA, more))
            return false;
        if (p->tok.kind != TK_IDENT)
            return expected(p, "an attribute name");
        int i = 0;
        while (i < op->nattr && !tok_is(&p->tok, TK_IDENT, op->attrs[i].name))
            i++;
        if (i == op->nattr)
            return unknown_attr(p, op, &p->tok);
        if (seen >> i & 1) {
            err_at(p->err, p->tok.loc, "%s: duplicate attribute '%s'", op->name, op->attrs[i].name);
            return false;
        }
        seen |= 1u << i;
        if (!next(p) || !expect(p, TK_EQUAL, "'=' after the attribute name") ||
            !parse_attr_value(p, op, &op->attrs[i], &attrs[(*nattrs)++]))
            return false;
    }
    return true;
}

/* '{' name '=' value (',' name '=' value)* '}' */
static bool parse_attrs(Parser *p, const OpInfo *op, Attr *attrs, int *nattrs)
{
    return next(p) &&
           parse_attr_list(p, op, attrs, nattrs, TK_RBRACE, "',' or '}' after an attribute") &&
           next(p);
}

/* ---------------------------------------------------------------- statements */

static int parse_op_name(Parser *p)
{
    const Token *t = &p->tok;
    if (t->kind != TK_IDENT) {
        expected(p, "an op name");
        return -1;
    }
    int op = op_lookup(t->s, t->slen);
    int len = (int)(t->slen > 32 ? 32 : t->slen);
    if (op == OP_INPUT) {
        err_at(p->err, t->loc, "inputs are declared in the graph header, as in graph @g(%%x: f32[4])");
        return -1;
    }
    if (op < 0) {
        const char *best = NULL;
        int best_d = 3;
        for (int i = 0; i < OP_COUNT; i++)
            closest(t->s, t->slen, op_info[i].name, &best, &best_d);
        if (best)
            err_at(p->err, t->loc, "unknown op '%.*s'; did you mean '%s'?", len, t->s, best);
        else
            err_at(p->err, t->loc, "unknown op '%.*s' (docs/IR.md lists the ops)", len, t->s);
        return -1;
    }
    return next(p) ? op : -1;
}

static bool parse_operands(Parser *p, int **in, int *nin)
{
    int cap = 0;
    while (p->tok.kind == TK_VALUE) {
        if (*nin == IR_MAX_OPERANDS) {
            err_at(p->err, p->tok.loc, "too many operands: at most %d", IR_MAX_OPERANDS);
            return false;
        }
        *in = grow(p->tmp, *in, &cap, *nin, sizeof(int));
        if (!use_value(p, &(*in)[(*nin)++], NULL))
            return false;
        if (p->tok.kind != TK_COMMA)
            return true;
        if (!next(p))
            return false;
        if (p->tok.kind != TK_VALUE)
            return expected(p, "an operand after ','");
    }
    return true;
}

/* For ops whose type is inferred, the annotation must agree with the inference. */
static bool check_annotation(Parser *p, int id, const Type *declared, Loc at)
{
    const Type *inferred = &p->g->node[id].type;
    if (type_eq(inferred, declared))
        return true;
    char a[512], b[512];
    err_at(p->err, at, "type annotation %s does not match inferred type %s",
           type_fmt(p->g, declared, a, sizeof a), type_fmt(p->g, inferred, b, sizeof b));
    return false;
}

/* %name '=' op operands [attrs] ':' type */
static bool parse_statement(Parser *p)
{
    Name def;
    if (!take_name(p, &def) || !define_new(p, &def) || !expect(p, TK_EQUAL, "'=' after the value name"))
        return false;
    Loc op_loc = p->tok.loc;
    int op = parse_op_name(p);
    if (op < 0)
        return false;
    int *in = NULL, nin = 0, nattr = 0;
    Attr attrs[32]; /* at most one per schema entry (duplicates are errors); schemas are short */
    if (!parse_operands(p, &in, &nin))
        return false;
    if (p->tok.kind == TK_LBRACE && !parse_attrs(p, &op_info[op], attrs, &nattr))
        return false;
    if (!expect(p, TK_COLON, "':' and the result type"))
        return false;
    Loc type_loc = p->tok.loc;
    Type declared;
    if (!parse_type(p, &declared))
        return false;
    bool typed = op_info[op].flags & OPF_TYPED;
    op_loc.file = p->file;
    p->b.loc = op_loc;
    int id = b_op(&p->b, op, in, nin, attrs, nattr, typed ? &declared : NULL);
    if (id < 0 || (!typed && !check_annotation(p, id, &declared, type_loc)))
        return false;
    return tab_add(p, &p->vals, &def, id);
}

/* ---------------------------------------------------------------- header and return */

static bool parse_input(Parser *p)
{
    Name nm;
    Type t;
    if (!take_name(p, &nm) || !define_new(p, &nm) || !expect(p, TK_COLON, "':' and the input's type") ||
        !parse_type(p, &t))
        return false;
    p->b.loc = (Loc){p->file, nm.loc.line, nm.loc.col};
    int id = b_input(&p->b, nm.s, &t);
    return id >= 0 && tab_add(p, &p->vals, &nm, id);
}

/* [name ':'] type, the name bare or quoted. */
static bool parse_output_decl(Parser *p, OutDecl *o)
{
    *o = (OutDecl){.loc = p->tok.loc};
    Token first = p->tok;
    if (first.kind == TK_STRING || first.kind == TK_IDENT) {
        if (first.kind == TK_STRING && first.slen == 0) {
            err_at(p->err, first.loc, "empty output name");
            return false;
        }
        const char *name = arena_strndup(p->tmp, first.s, first.slen);
        if (!next(p))
            return false;
        if (p->tok.kind == TK_COLON) {
            o->name = name;
            return next(p) && parse_type(p, &o->type);
        }
        if (first.kind == TK_IDENT && p->tok.kind == TK_LBRACKET)
            return parse_type_rest(p, &first, &o->type);
        return expected(p, "':' after the output name");
    }
    return expected(p, "an output 'name: type'");
}

/* '(' [output (',' output)*] ')' */
static bool parse_outputs(Parser *p, OutDecl **outs, int *nout)
{
    int cap = 0;
    if (!expect(p, TK_LPAREN, "'(' and the output types"))
        return false;
    while (p->tok.kind != TK_RPAREN) {
        if (*nout > 0 && !expect(p, TK_COMMA, "',' or ')' in the output list"))
            return false;
        *outs = grow(p->tmp, *outs, &cap, *nout, sizeof(OutDecl));
        OutDecl *o = &(*outs)[*nout];
        if (!parse_output_decl(p, o))
            return false;
        if (!o->name) {
            char dflt[32];
            snprintf(dflt, sizeof dflt, "out%d", *nout);
            o->name = arena_strdup(p->tmp, dflt);
        }
        Name nm = {o->name, strlen(o->name), false, o->loc};
        const ValEntry *dup = tab_find(&p->outs, &nm);
        if (dup) {
            err_at(p->err, o->loc, "output name '%s' is already used by output %d", o->name, dup->id);
            return false;
        }
        if (!tab_add(p, &p->outs, &nm, (*nout)++))
            return false;
    }
    return next(p);
}

static bool parse_inputs(Parser *p)
{
    if (!expect(p, TK_LPAREN, "'(' and the graph's inputs"))
        return false;
    for (int n = 0; p->tok.kind != TK_RPAREN; n++)
        if ((n > 0 && !expect(p, TK_COMMA, "',' or ')' in the input list")) || !parse_input(p))
            return false;
    return next(p);
}

static bool check_output(Parser *p, int i, const OutDecl *o, int id, Loc at)
{
    const Type *t = &p->g->node[id].type;
    if (type_eq(t, &o->type))
        return true;
    char a[512], b[512];
    err_at(p->err, at, "output %d (%s) is declared %s in the header, but the returned value has type %s", i,
           o->name, type_fmt(p->g, &o->type, a, sizeof a), type_fmt(p->g, t, b, sizeof b));
    return false;
}

/* 'return' values '}' EOF, checked against the header's outputs. */
static bool parse_return(Parser *p, const OutDecl *outs, int nout)
{
    if (!tok_is(&p->tok, TK_IDENT, "return"))
        return expected(p, "a statement '%N = op ...' or 'return'");
    Loc at = p->tok.loc;
    if (!next(p))
        return false;
    for (int i = 0; p->tok.kind != TK_RBRACE; i++) {
        int id;
        Loc vloc;
        if (i > 0 && !expect(p, TK_COMMA, "',' or '}' after a returned value"))
            return false;
        if (p->tok.kind != TK_VALUE)
            return expected(p, i > 0 ? "a returned value" : "a returned value or '}'");
        if (!use_value(p, &id, &vloc))
            return false;
        if (i >= nout) {
            err_at(p->err, vloc, "return gives more values than the %d output%s the header declares", nout,
                   nout == 1 ? "" : "s");
            return false;
        }
        if (!check_output(p, i, &outs[i], id, vloc) || b_output(&p->b, id, outs[i].name) < 0)
            return false;
    }
    if (p->g->noutput < nout) {
        err_at(p->err, at, "return gives %d value%s but the header declares %d output%s", p->g->noutput,
               p->g->noutput == 1 ? "" : "s", nout, nout == 1 ? "" : "s");
        return false;
    }
    if (!next(p))
        return false;
    return p->tok.kind == TK_EOF || expected(p, "end of file after the graph's '}'");
}

static bool parse_graph(Parser *p)
{
    if (!tok_is(&p->tok, TK_IDENT, "graph"))
        return expected(p, "'graph @name(...)'");
    if (!next(p))
        return false;
    if (p->tok.kind != TK_GLOBAL || p->tok.slen == 0)
        return expected(p, "the graph's name, as in graph @name");
    p->g = graph_new(arena_strndup(p->tmp, p->tok.s, p->tok.slen));
    p->file = arena_strdup(p->g->arena, p->lx.file);
    p->b = builder_make(p->g, p->err);
    OutDecl *outs = NULL;
    int nout = 0;
    if (!next(p) || !parse_inputs(p) || !expect(p, TK_ARROW, "'->' and the output types") ||
        !parse_outputs(p, &outs, &nout) || !expect(p, TK_LBRACE, "'{' opening the graph's body"))
        return false;
    while (p->tok.kind == TK_VALUE)
        if (!parse_statement(p))
            return false;
    return parse_return(p, outs, nout);
}

/* ---------------------------------------------------------------- symbols */

/* Intern symbols so that every dim lists them in the order they were written: the printer
 * writes products in interning order, so this makes print(parse(text)) reproduce text. */
static void order_symbols(Graph *g, const uint32_t *before)
{
    int perm[COIL_MAX_SYMS];
    uint32_t placed = 0;
    bool identity = true;
    for (int k = 0; k < g->nsym; k++) {
        int pick = -1;
        for (int s = 0; s < g->nsym && pick < 0; s++)
            if (!(placed >> s & 1) && (before[s] & ~placed) == 0)
                pick = s;
        for (int s = 0; s < g->nsym && pick < 0; s++) /* a cycle (B*T and T*B): any order */
            if (!(placed >> s & 1))
                pick = s;
        perm[pick] = k;
        placed |= 1u << pick;
        identity &= pick == k;
    }
    if (identity)
        return;
    const char *sym[COIL_MAX_SYMS];
    for (int s = 0; s < g->nsym; s++)
        sym[perm[s]] = g->sym[s];
    memcpy(g->sym, sym, sizeof(char *) * (size_t)g->nsym);
    for (int id = 0; id < g->nnode; id++)
        for (int i = 0; i < g->node[id].type.rank; i++) {
            uint32_t old = g->node[id].type.dim[i].syms, now = 0;
            for (int s = 0; s < g->nsym; s++)
                now |= (old >> s & 1u) << perm[s];
            g->node[id].type.dim[i].syms = now;
        }
}

/* ---------------------------------------------------------------- entry points */

Graph *ir_parse(const char *text, size_t len, const char *filename, Err *e)
{
    const char *file = filename ? filename : "<input>";
    if (len > IR_MAX_BYTES) {
        err_at(e, (Loc){file, 1, 1}, "IR text is larger than %zu MiB", IR_MAX_BYTES >> 20);
        return NULL;
    }
    Parser p = {.err = e, .tmp = arena_new()};
    lex_init(&p.lx, text, len, file, e);
    bool ok = next(&p) && parse_graph(&p);
    lex_free(&p.lx);
    free(p.vals.e);
    free(p.outs.e);
    arena_free(p.tmp);
    if (ok && err_ok(e)) {
        order_symbols(p.g, p.before);
        if (ir_verify(p.g, e))
            return p.g;
    }
    graph_free(p.g);
    return NULL;
}

Graph *ir_parse_file(const char *path, Err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    errno = 0;
    while (!ferror(f) && !feof(f) && n <= IR_MAX_BYTES) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        n += fread(buf + n, 1, cap - n, f);
    }
    bool bad = ferror(f) || (!feof(f) && n <= IR_MAX_BYTES);
    int saved = errno;
    fclose(f);
    Graph *g = NULL;
    if (bad)
        err_set(e, ERR_MEMORY, "%s: cannot read: %s", path, saved ? strerror(saved) : "out of memory");
    else
        g = ir_parse(buf, n, path, e);
    free(buf);
    return g;
}

/* ---------------------------------------------------------------- pieces */

/* A parser over a piece of the text form on its own (the C API's builder takes op names,
 * types and attributes as text): errors carry no position, as the piece is no file. */
static bool piece_open(Parser *p, Graph *g, const char *text, Arena *tmp, Err *e)
{
    *p = (Parser){.err = e, .tmp = tmp, .g = g};
    lex_init(&p->lx, text, strlen(text), NULL, e);
    return next(p);
}

/* The whole piece read (nothing may follow), and the lexer freed. */
static bool piece_close(Parser *p, bool ok)
{
    ok = ok && (p->tok.kind == TK_EOF || expected(p, "the end of the text"));
    lex_free(&p->lx);
    return ok;
}

int ir_parse_op(const char *text, Err *e)
{
    Parser p;
    int op = piece_open(&p, NULL, text, NULL, e) ? parse_op_name(&p) : -1;
    return piece_close(&p, op >= 0) ? op : -1;
}

bool ir_parse_type(Graph *g, const char *text, Type *t, Err *e)
{
    Parser p;
    bool ok = piece_open(&p, g, text, NULL, e) && parse_type(&p, t);
    return piece_close(&p, ok);
}

bool ir_parse_attrs(int op, const char *text, Arena *tmp, Attr *attrs, int *nattrs, Err *e)
{
    Parser p;
    const OpInfo *info = &op_info[op];
    bool ok = piece_open(&p, NULL, text, tmp, e);
    *nattrs = 0;
    if (ok && p.tok.kind == TK_LBRACE)
        ok = parse_attrs(&p, info, attrs, nattrs);
    else if (ok)
        ok = parse_attr_list(&p, info, attrs, nattrs, TK_EOF, "',' or the end after an attribute");
    return piece_close(&p, ok);
}
