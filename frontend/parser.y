/* parser.y — the .coil grammar: a pure (reentrant) bison parser building the AST of
 * ast.h. Syntax errors recover at the next statement so one run reports several. */
%code requires {
#include "frontend/ast.h"
typedef void *yyscan_t;
}

%code provides {
int coil_yylex(COIL_YYSTYPE *val, COIL_YYLTYPE *loc, yyscan_t scanner);
}

%code {
#include <stdio.h>
#include <string.h>

#define LOC(l) ast_loc(ctx, (l).first_line, (l).first_column)

static void coil_yyerror(COIL_YYLTYPE *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg);
static Expr *number_int(ParseCtx *ctx, int64_t v, Loc loc);
static Stmt *stmt_checked(ParseCtx *ctx, Stmt *s);
static void depth_check(ParseCtx *ctx, Expr *e);
static Param *new_param(ParseCtx *ctx, const char *name, TypeExpr *type, Expr *def, Loc loc);
static Stmt *param_stmt(ParseCtx *ctx, bool buffer, const char *name, Loc at, TypeExpr *type,
                        Expr *init);
static LabelPart *new_label_part(ParseCtx *ctx, const char *name, Expr *index, Loc loc);
static LabelPart *label_from_index(ParseCtx *ctx, const Expr *e);
static Expr *new_index(ParseCtx *ctx, Expr *x, Expr *items, Loc loc);
static Expr *new_slice(ParseCtx *ctx, Expr *start, Expr *end, Expr *step, Loc loc);
static Arg *new_arg(ParseCtx *ctx, const char *kw, Expr *value, Loc loc);
static void add_item(ParseCtx *ctx, Item *it);
#define TOO_MANY_ERRORS() (diags_count(ctx->diags) >= AST_MAX_ERRORS)
}

%define api.pure full
%define api.prefix {coil_yy}
%define parse.error detailed
%locations
%parse-param {yyscan_t scanner} {ParseCtx *ctx}
%lex-param {yyscan_t scanner}

%union {
    char *str;
    int64_t i;
    double f;
    int dt;
    Expr *expr;
    Arg *arg;
    LabelPart *label;
    Stmt *stmt;
    Param *param;
    TypeExpr *type;
    Name *name;
    ConfigEntry *cfg;
    Item *item;
    List list;
}

%token <str> IDENT "name" STRING "string"
%token <i> INT "integer"
%token <f> FLOAT "float"
%token <dt> DTYPE "dtype"
/* keywords carry their text too: a label may use them (label_word) */
%token <str> CONFIG "config" BLOCK "block" MODEL "model" PARAM "param" BUFFER "buffer" RETURN "return"
%token <str> REPEAT "repeat" AS "as" IF "if" ELSE "else" INCLUDE "include"
%token TRUE "true" FALSE "false"
%token <str> KW_INT "int" KW_FLOAT "float type"
%token ARROW "->" FLOORDIV "//" EQEQ "==" NE "!=" LE "<=" GE ">=" ELLIPSIS "..."
%token NL "end of line"
%token SLICE_COLON "':' of a slice"

%nonassoc EQEQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' FLOORDIV '%' '@'
%precedence UMINUS

%type <expr> expr primary call dim
%type <list> exprs dims dims_opt list_items args args_opt label targets
%type <list> params params_opt rets ret_list stmts cfg_entries
%type <arg> arg
%type <stmt> stmt if_stmt body
%type <param> param ret
%type <type> ptype tensortype
%type <cfg> cfg_entry
%type <item> item
%type <str> opt_as label_word first_word
%type <expr> label_index indexed name_index index_item opt_bound
%type <list> index_items

%%

program
    : %empty
    | program item      { add_item(ctx, $2); }
    | program sep
    | program error sep { yyerrok; if (TOO_MANY_ERRORS()) YYABORT; }
    ;

sep : NL | ';' ;

opt_nl : %empty | NL ;

item
    : INCLUDE STRING {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_INCLUDE, .loc = LOC(@2), .name = $2};
      }
    | CONFIG opt_nl '{' cfg_entries '}' {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_CONFIG, .loc = LOC(@1), .config = $4.head};
      }
    | CONFIG opt_nl '{' cfg_entries cfg_entry '}' {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_CONFIG, .loc = LOC(@1), .config = list_append($4, $5).head};
      }
    | BLOCK IDENT '(' params_opt ')' opt_nl body {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_BLOCK, .loc = LOC(@2), .name = $2, .params = $4.head, .body = $7};
      }
    | BLOCK IDENT '(' params_opt ')' opt_nl ARROW rets opt_nl body {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_BLOCK, .loc = LOC(@2), .name = $2, .params = $4.head,
                       .rets = $8.head, .body = $10};
      }
    | MODEL IDENT '(' params_opt ')' opt_nl body {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_MODEL, .loc = LOC(@2), .name = $2, .params = $4.head, .body = $7};
      }
    | MODEL IDENT '(' params_opt ')' opt_nl ARROW rets opt_nl body {
          $$ = ast_new(ctx, sizeof(Item));
          *$$ = (Item){.kind = I_MODEL, .loc = LOC(@2), .name = $2, .params = $4.head,
                       .rets = $8.head, .body = $10};
      }
    ;

cfg_entries
    : %empty                    { $$ = (List){0}; }
    | cfg_entries sep
    | cfg_entries cfg_entry sep { $$ = list_append($1, $2); }
    | cfg_entries error sep     { yyerrok; if (TOO_MANY_ERRORS()) YYABORT; }
    ;

cfg_entry
    : IDENT '=' expr {
          $$ = ast_new(ctx, sizeof(ConfigEntry));
          *$$ = (ConfigEntry){.name = $1, .value = $3, .loc = LOC(@1)};
          depth_check(ctx, $3);
      }
    ;

params_opt : %empty { $$ = (List){0}; } | params | params ',' ;
params
    : param             { $$ = list_append((List){0}, $1); }
    | params ',' param  { $$ = list_append($1, $3); }
    ;
param
    : IDENT ':' ptype            { $$ = new_param(ctx, $1, $3, NULL, LOC(@1)); }
    | IDENT ':' ptype '=' expr   { $$ = new_param(ctx, $1, $3, $5, LOC(@1)); }
    ;

ptype
    : tensortype
    | DTYPE {
          $$ = ast_new(ctx, sizeof(TypeExpr));
          *$$ = (TypeExpr){.kind = T_BOOL, .dt = (DType)$1, .loc = LOC(@1)};
          if ($1 != DT_BOOL)
              diag_error(ctx->diags, LOC(@1), "a tensor type needs a shape: write %s[...] "
                         "(compile-time parameters are int, float or bool)", dtype_info[$1].name);
      }
    | KW_INT {
          $$ = ast_new(ctx, sizeof(TypeExpr));
          *$$ = (TypeExpr){.kind = T_INT, .loc = LOC(@1)};
      }
    | KW_FLOAT {
          $$ = ast_new(ctx, sizeof(TypeExpr));
          *$$ = (TypeExpr){.kind = T_FLOAT, .loc = LOC(@1)};
      }
    ;

tensortype
    : DTYPE '[' dims_opt ']' {
          $$ = ast_new(ctx, sizeof(TypeExpr));
          *$$ = (TypeExpr){.kind = T_TENSOR, .dt = (DType)$1, .dims = $3.head, .loc = LOC(@1)};
      }
    ;

dims_opt : %empty { $$ = (List){0}; } | dims | dims ',' ;
dims
    : dim           { $$ = list_append((List){0}, $1); }
    | dims ',' dim  { $$ = list_append($1, $3); }
    ;
dim
    : expr          { $$ = $1; depth_check(ctx, $1); }
    | ELLIPSIS      { $$ = ast_expr(ctx, E_ELLIPSIS, LOC(@1)); }
    ;

rets
    : tensortype            { $$ = list_append((List){0}, new_param(ctx, NULL, $1, NULL, LOC(@1))); }
    | '(' ret_list ')'      { $$ = $2; }
    | '(' ret_list ',' ')'  { $$ = $2; }
    ;
ret_list
    : ret               { $$ = list_append((List){0}, $1); }
    | ret_list ',' ret  { $$ = list_append($1, $3); }
    ;
ret
    : tensortype            { $$ = new_param(ctx, NULL, $1, NULL, LOC(@1)); }
    | IDENT ':' tensortype  { $$ = new_param(ctx, $1, $3, NULL, LOC(@1)); }
    ;

body
    : '{' stmts '}'         { $$ = $2.head; }
    | '{' stmts stmt '}'    { $$ = list_append($2, $3).head; }
    | '{' stmts error '}'   { $$ = $2.head; yyerrok; }
    ;

stmts
    : %empty            { $$ = (List){0}; }
    | stmts sep
    | stmts stmt sep    { $$ = list_append($1, $2); }
    | stmts error sep   { yyerrok; if (TOO_MANY_ERRORS()) YYABORT; }
    ;

stmt
    : PARAM IDENT ':' ptype '=' expr { $$ = param_stmt(ctx, false, $2, LOC(@2), $4, $6); }
    | BUFFER IDENT ':' ptype '=' expr { $$ = param_stmt(ctx, true, $2, LOC(@2), $4, $6); }
    | targets '=' expr {
          $$ = ast_stmt(ctx, S_ASSIGN, LOC(@1));
          $$->names = $1.head;
          $$->value = $3;
          depth_check(ctx, $3);
      }
    | RETURN exprs {
          $$ = ast_stmt(ctx, S_RETURN, LOC(@1));
          $$->values = $2.head;
          for (Expr *e = $2.head; e; e = e->next)
              depth_check(ctx, e);
      }
    | REPEAT expr opt_as opt_nl body {
          $$ = ast_stmt(ctx, S_REPEAT, LOC(@1));
          $$->value = $2;
          depth_check(ctx, $2);
          if ($3) {
              $$->names = ast_new(ctx, sizeof(Name));
              *$$->names = (Name){.s = $3, .loc = LOC(@3)};
          }
          $$->body = $5;
          $$ = stmt_checked(ctx, $$);
      }
    | if_stmt
    ;

opt_as : %empty { $$ = NULL; } | AS IDENT { $$ = $2; } ;

if_stmt
    : IF expr opt_nl body {
          $$ = ast_stmt(ctx, S_IF, LOC(@1));
          $$->value = $2;
          depth_check(ctx, $2);
          $$->body = $4;
          $$ = stmt_checked(ctx, $$);
      }
    | IF expr opt_nl body ELSE opt_nl body {
          $$ = ast_stmt(ctx, S_IF, LOC(@1));
          $$->value = $2;
          depth_check(ctx, $2);
          $$->body = $4;
          $$->els = $7;
          $$ = stmt_checked(ctx, $$);
      }
    | IF expr opt_nl body ELSE if_stmt {
          $$ = ast_stmt(ctx, S_IF, LOC(@1));
          $$->value = $2;
          depth_check(ctx, $2);
          $$->body = $4;
          $$->els = $6;
          $$ = stmt_checked(ctx, $$);
      }
    ;

targets
    : IDENT {
          Name *n = ast_new(ctx, sizeof(Name));
          *n = (Name){.s = $1, .loc = LOC(@1)};
          $$ = list_append((List){0}, n);
      }
    | targets ',' IDENT {
          Name *n = ast_new(ctx, sizeof(Name));
          *n = (Name){.s = $3, .loc = LOC(@3)};
          $$ = list_append($1, n);
      }
    ;

exprs
    : expr              { $$ = list_append((List){0}, $1); }
    | exprs ',' expr    { $$ = list_append($1, $3); }
    ;

expr
    : expr '+' expr         { $$ = ast_binary(ctx, B_ADD, $1, $3, LOC(@2)); }
    | expr '-' expr         { $$ = ast_binary(ctx, B_SUB, $1, $3, LOC(@2)); }
    | expr '*' expr         { $$ = ast_binary(ctx, B_MUL, $1, $3, LOC(@2)); }
    | expr '/' expr         { $$ = ast_binary(ctx, B_DIV, $1, $3, LOC(@2)); }
    | expr FLOORDIV expr    { $$ = ast_binary(ctx, B_FLOORDIV, $1, $3, LOC(@2)); }
    | expr '%' expr         { $$ = ast_binary(ctx, B_MOD, $1, $3, LOC(@2)); }
    | expr '@' expr         { $$ = ast_binary(ctx, B_MATMUL, $1, $3, LOC(@2)); }
    | expr EQEQ expr        { $$ = ast_binary(ctx, B_EQ, $1, $3, LOC(@2)); }
    | expr NE expr          { $$ = ast_binary(ctx, B_NE, $1, $3, LOC(@2)); }
    | expr '<' expr         { $$ = ast_binary(ctx, B_LT, $1, $3, LOC(@2)); }
    | expr LE expr          { $$ = ast_binary(ctx, B_LE, $1, $3, LOC(@2)); }
    | expr '>' expr         { $$ = ast_binary(ctx, B_GT, $1, $3, LOC(@2)); }
    | expr GE expr          { $$ = ast_binary(ctx, B_GE, $1, $3, LOC(@2)); }
    | '-' expr %prec UMINUS { $$ = ast_unary(ctx, $2, LOC(@1)); }
    | primary
    ;

primary
    : INT           { $$ = number_int(ctx, $1, LOC(@1)); }
    | FLOAT         { $$ = ast_expr(ctx, E_FLOAT, LOC(@1)); $$->f = $1; }
    | STRING        { $$ = ast_expr(ctx, E_STR, LOC(@1)); $$->s = $1; }
    | TRUE          { $$ = ast_expr(ctx, E_BOOL, LOC(@1)); $$->i = 1; }
    | FALSE         { $$ = ast_expr(ctx, E_BOOL, LOC(@1)); $$->i = 0; }
    | DTYPE         { $$ = ast_expr(ctx, E_DTYPE, LOC(@1)); $$->dt = (DType)$1; }
    | IDENT         { $$ = ast_expr(ctx, E_NAME, LOC(@1)); $$->s = $1; }
    | indexed
    | '(' expr ')'  { $$ = $2; }
    | '[' list_items ']'      { $$ = ast_list(ctx, $2.head, LOC(@1)); }
    | '[' list_items ',' ']'  { $$ = ast_list(ctx, $2.head, LOC(@1)); }
    | '[' ']'                 { $$ = ast_list(ctx, NULL, LOC(@1)); }
    | call
    ;

/* x[i, a:b:c, ...]: `name[...]` is its own rule because a label's first part shares it */
indexed
    : name_index
    | indexed '[' index_items ']'       { $$ = new_index(ctx, $1, $3.head, LOC(@2)); }
    | call '[' index_items ']'          { $$ = new_index(ctx, $1, $3.head, LOC(@2)); }
    | '(' expr ')' '[' index_items ']'  { $$ = new_index(ctx, $2, $5.head, LOC(@4)); }
    ;
name_index
    : IDENT '[' index_items ']' {
          Expr *x = ast_expr(ctx, E_NAME, LOC(@1));
          x->s = $1;
          $$ = new_index(ctx, x, $3.head, LOC(@2));
      }
    ;
index_items
    : index_item                    { $$ = list_append((List){0}, $1); }
    | index_items ',' index_item    { $$ = list_append($1, $3); }
    ;
index_item
    : expr
    | ELLIPSIS                      { $$ = ast_expr(ctx, E_ELLIPSIS, LOC(@1)); }
    | opt_bound SLICE_COLON opt_bound                    { $$ = new_slice(ctx, $1, $3, NULL, LOC(@2)); }
    | opt_bound SLICE_COLON opt_bound SLICE_COLON opt_bound { $$ = new_slice(ctx, $1, $3, $5, LOC(@2)); }
    ;
opt_bound : %empty { $$ = NULL; } | expr ;

list_items
    : expr                  { $$ = list_append((List){0}, $1); }
    | list_items ',' expr   { $$ = list_append($1, $3); }
    ;

call
    : IDENT '(' args_opt ')'            { $$ = ast_call(ctx, $1, $3.head, NULL, LOC(@1)); }
    | label ':' IDENT '(' args_opt ')'  { $$ = ast_call(ctx, $3, $5.head, $1.head, LOC(@3)); }
    ;

/* A label's parts after a dot may be any keyword, and its first may be `model`, so
 * state-dict names such as model.layers.0.mlp are written as they are (the first part is
 * kept to names and `model` so that `return x` and `if c` still read as statements). */
label
    : first_word {
          $$ = list_append((List){0}, new_label_part(ctx, $1, NULL, LOC(@1)));
      }
    | MODEL '[' expr ']' {
          $$ = list_append((List){0}, new_label_part(ctx, $1, $3, LOC(@1)));
      }
    | name_index {
          $$ = list_append((List){0}, label_from_index(ctx, $1));
      }
    | label '.' label_word label_index {
          $$ = list_append($1, new_label_part(ctx, $3, $4, LOC(@3)));
      }
    ;
label_index
    : %empty          { $$ = NULL; }
    | '[' expr ']'    { $$ = $2; }
    ;
first_word : IDENT | MODEL ;
label_word
    : IDENT | CONFIG | BLOCK | MODEL | PARAM | BUFFER | RETURN | REPEAT | AS | IF | ELSE | INCLUDE
    | KW_INT | KW_FLOAT
    ;

args_opt : %empty { $$ = (List){0}; } | args | args ',' ;
args
    : arg           { $$ = list_append((List){0}, $1); }
    | args ',' arg  { $$ = list_append($1, $3); }
    ;
arg
    : expr              { $$ = new_arg(ctx, NULL, $1, LOC(@1)); }
    | IDENT '=' expr    { $$ = new_arg(ctx, $1, $3, LOC(@1)); }
    ;

%%

static void coil_yyerror(COIL_YYLTYPE *loc, yyscan_t scanner, ParseCtx *ctx, const char *msg)
{
    (void)scanner;
    const char *hint = ctx->floordiv_seen
        ? " (after a value `//` is floor division; use `#` for a comment at the end of a line)" : "";
    if (strstr(msg, "memory exhausted"))
        msg = "the program is nested too deeply";
    ctx->depth = 0; /* so the newline ending this line can end the recovery */
    if (loc->first_line == ctx->err_line && loc->first_column == ctx->err_col)
        return; /* recovery stopped where it started: this error is already reported */
    ctx->err_line = loc->first_line;
    ctx->err_col = loc->first_column;
    diag_error(ctx->diags, LOC(*loc), "%s%s", msg, hint);
}

static Expr *number_int(ParseCtx *ctx, int64_t v, Loc loc)
{
    Expr *e = ast_expr(ctx, E_INT, loc);
    e->i = v;
    return e;
}

/* Report an expression nested beyond AST_MAX_DEPTH once, where it is used;
 * later passes refuse to walk a program with errors, so they never recurse that deep. */
static void depth_check(ParseCtx *ctx, Expr *e)
{
    if (e && e->depth > AST_MAX_DEPTH)
        diag_error(ctx->diags, e->loc, "expression nested too deeply (more than %d levels)",
                   AST_MAX_DEPTH);
}

static Stmt *stmt_checked(ParseCtx *ctx, Stmt *s)
{
    int depth = 0;
    for (Stmt *b = s->body; b; b = b->next)
        depth = b->depth > depth ? b->depth : depth;
    for (Stmt *b = s->els; b; b = b->next)
        depth = b->depth > depth ? b->depth : depth;
    s->depth = depth + 1;
    if (s->depth == AST_MAX_DEPTH + 1)
        diag_error(ctx->diags, s->loc, "statements nested too deeply (more than %d levels)",
                   AST_MAX_DEPTH);
    return s;
}

static LabelPart *new_label_part(ParseCtx *ctx, const char *name, Expr *index, Loc loc)
{
    LabelPart *p = ast_new(ctx, sizeof(LabelPart));
    *p = (LabelPart){.name = name, .index = index, .loc = loc};
    return p;
}

/* `param NAME: TYPE = INIT`, or `buffer ...` (kept, not trained). */
static Stmt *param_stmt(ParseCtx *ctx, bool buffer, const char *name, Loc at, TypeExpr *type,
                        Expr *init)
{
    Stmt *st = ast_stmt(ctx, S_PARAM, at);
    st->names = ast_new(ctx, sizeof(Name));
    *st->names = (Name){.s = name, .loc = at};
    st->type = type, st->value = init, st->buffer = buffer;
    depth_check(ctx, init);
    return st;
}

static Param *new_param(ParseCtx *ctx, const char *name, TypeExpr *type, Expr *def, Loc loc)
{
    Param *p = ast_new(ctx, sizeof(Param));
    *p = (Param){.name = name, .type = type, .def = def, .loc = loc};
    if (def)
        depth_check(ctx, def);
    return p;
}

static Arg *new_arg(ParseCtx *ctx, const char *kw, Expr *value, Loc loc)
{
    Arg *a = ast_new(ctx, sizeof(Arg));
    *a = (Arg){.kw = kw, .value = value, .loc = loc};
    return a;
}

static void add_item(ParseCtx *ctx, Item *it)
{
    ctx->items = list_append(ctx->items, it);
}

static Expr *new_index(ParseCtx *ctx, Expr *x, Expr *items, Loc loc)
{
    Expr *e = ast_expr(ctx, E_INDEX, loc);
    e->lhs = x;
    e->items = items;
    return e;
}

static Expr *new_slice(ParseCtx *ctx, Expr *start, Expr *end, Expr *step, Loc loc)
{
    Expr *e = ast_expr(ctx, E_SLICE, loc);
    e->lhs = start;
    e->rhs = end;
    e->items = step;
    return e;
}

/* `name[i]` read before a '.' or ':' turned out to start a label: its index is one value. */
static LabelPart *label_from_index(ParseCtx *ctx, const Expr *e)
{
    const Expr *i = e->items;
    if (i->next || i->kind == E_SLICE || i->kind == E_ELLIPSIS)
        diag_error(ctx->diags, e->loc, "a label's index is one integer, as in layers[i]");
    return new_label_part(ctx, e->lhs->s, (Expr *)i, e->lhs->loc);
}
