/* ast.h — the syntax tree of a .coil program, as the parser builds it.
 * All nodes live in one arena per program; lists are singly linked through `next`. */
#ifndef COIL_FRONTEND_AST_H
#define COIL_FRONTEND_AST_H

#include "frontend/diag.h"
#include "ir/ir.h"

/* Limits that keep hostile input from exhausting the stack or the machine. */
enum {
    AST_MAX_DEPTH = 256,   /* expression and statement nesting */
    AST_MAX_ERRORS = 50,   /* the parse stops after this many */
};

typedef enum ExprKind {
    E_INT, E_FLOAT, E_BOOL, E_STR, E_NAME, E_DTYPE, E_LIST, E_UNARY, E_BINARY, E_CALL,
    E_ELLIPSIS, /* "..." in a shape pattern or an index */
    E_INDEX,    /* x[items]: lhs the tensor, items its indices (exprs, E_SLICE, E_ELLIPSIS) */
    E_SLICE,    /* start:end:step in an index: lhs, rhs, items (the step); each may be NULL */
} ExprKind;

/* Binary and unary operators, as the parser tags them. */
typedef enum BinOp {
    B_ADD, B_SUB, B_MUL, B_DIV, B_FLOORDIV, B_MOD, B_MATMUL,
    B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_COUNT
} BinOp;

typedef struct Expr Expr;
typedef struct Arg Arg;
typedef struct LabelPart LabelPart;

/* One component of a call's label: `name` or `name[index]`. */
struct LabelPart {
    LabelPart *next;
    const char *name;
    Expr *index; /* NULL for a plain name */
    Loc loc;
};

/* A call argument; kw == NULL for a positional one. */
struct Arg {
    Arg *next;
    const char *kw;
    Expr *value;
    Loc loc;
};

struct Expr {
    Expr *next; /* sibling in a list (list items, return values, dims) */
    ExprKind kind;
    Loc loc;
    int depth;      /* nesting depth of this subtree */
    int64_t i;      /* E_INT, E_BOOL */
    double f;       /* E_FLOAT */
    const char *s;  /* E_STR text, E_NAME name, E_CALL callee */
    int op;         /* E_UNARY ('-'), E_BINARY (BinOp) */
    DType dt;       /* E_DTYPE */
    Expr *lhs, *rhs;/* E_UNARY uses lhs */
    Expr *items;    /* E_LIST */
    Arg *args;      /* E_CALL */
    LabelPart *label; /* E_CALL with a label, else NULL */
};

/* A parameter or return type: a tensor type or a compile-time kind. */
typedef enum TypeKind { T_TENSOR, T_INT, T_FLOAT, T_BOOL } TypeKind;

typedef struct TypeExpr {
    TypeKind kind;
    DType dt;     /* T_TENSOR */
    Expr *dims;   /* T_TENSOR: list of dims (E_ELLIPSIS allowed) */
    Loc loc;
} TypeExpr;

/* A block parameter, model input, or (named) return type. */
typedef struct Param {
    struct Param *next;
    const char *name; /* NULL for an unnamed return type */
    TypeExpr *type;
    Expr *def;        /* default value, compile-time parameters only */
    Loc loc;
} Param;

typedef struct Name {
    struct Name *next;
    const char *s;
    Loc loc;
} Name;

typedef enum StmtKind { S_PARAM, S_ASSIGN, S_RETURN, S_REPEAT, S_IF } StmtKind;

typedef struct Stmt {
    struct Stmt *next;
    StmtKind kind;
    Loc loc;
    int depth;         /* statement nesting depth */
    Name *names;       /* S_ASSIGN targets; S_PARAM name; S_REPEAT loop variable (or NULL) */
    TypeExpr *type;    /* S_PARAM */
    bool buffer;       /* S_PARAM: a buffer (kept, not trained) */
    Expr *value;       /* S_PARAM init, S_ASSIGN rhs, S_REPEAT count, S_IF condition */
    Expr *values;      /* S_RETURN list */
    struct Stmt *body; /* S_REPEAT, S_IF then */
    struct Stmt *els;  /* S_IF else (NULL when absent) */
} Stmt;

typedef struct ConfigEntry {
    struct ConfigEntry *next;
    const char *name;
    Expr *value;
    Loc loc;
} ConfigEntry;

typedef enum ItemKind { I_INCLUDE, I_CONFIG, I_BLOCK, I_MODEL } ItemKind;

typedef struct Item {
    struct Item *next;
    ItemKind kind;
    Loc loc;
    const char *name;    /* block/model name; include path */
    ConfigEntry *config; /* I_CONFIG */
    Param *params;       /* I_BLOCK, I_MODEL */
    Param *rets;         /* NULL when not declared */
    Stmt *body;
    bool prelude;        /* defined by the built-in prelude */
} Item;

/* A generic list under construction: every AST list node starts with `next`. */
typedef struct List {
    void *head, *tail;
} List;
List list_append(List l, void *node);
int list_len(const void *head);

/* What the parser needs: where nodes go, where errors go, the lexer's state. */
typedef struct ParseCtx {
    Arena *arena;
    Diags *diags;
    const char *file;   /* interned path, used in every Loc */
    List items;         /* the file's items (Item), in order */
    /* lexer state */
    int line, col;      /* position of the next character */
    int depth;          /* ( and [ nesting: newlines inside are not separators */
    uint64_t square;    /* bit i: nesting level i+1 is a '[' (a ':' there is a slice's) */
    bool ends;          /* the last token may end a statement (a newline then separates) */
    bool operand;       /* the last token was an operand (so // is floor division) */
    bool floordiv_seen; /* a // operator on this line (for a syntax-error hint) */
    int err_line, err_col; /* the last syntax error's position (reported once) */
} ParseCtx;

/* Parse one file's text (any bytes) into ctx->items; errors go to ctx->diags.
 * Returns false when the file had syntax errors. */
bool ast_parse(ParseCtx *ctx, const char *text, size_t len);

/* Node constructors used by the parser's actions. */
Loc ast_loc(const ParseCtx *ctx, int line, int col);
Expr *ast_expr(ParseCtx *ctx, ExprKind kind, Loc loc);
Expr *ast_binary(ParseCtx *ctx, int op, Expr *l, Expr *r, Loc loc);
Expr *ast_unary(ParseCtx *ctx, Expr *x, Loc loc);
Expr *ast_call(ParseCtx *ctx, const char *callee, Arg *args, LabelPart *label, Loc loc);
Expr *ast_list(ParseCtx *ctx, Expr *items, Loc loc);
Stmt *ast_stmt(ParseCtx *ctx, StmtKind kind, Loc loc);
void *ast_new(ParseCtx *ctx, size_t size);

/* A string-keyed hash map (keys are not copied; they must outlive the map). */
typedef struct NameMap {
    const char **key;
    void **val;
    int cap, n;
} NameMap;
void *namemap_get(const NameMap *m, const char *key);
void namemap_put(NameMap *m, const char *key, void *val); /* replaces an existing value */
void namemap_free(NameMap *m);
/* Offer every key to a suggestion (did you mean). */
void namemap_suggest(const NameMap *m, Suggest *s);

/* Program-wide: the name of a BinOp as written ("+", "//", "@"). */
const char *binop_text(int op);

#endif
