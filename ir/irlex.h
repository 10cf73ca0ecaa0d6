/* irlex.h — the tokenizer of the IR text form (docs/IR.md) and the lexical rules the
 * printer shares with it, so what print.c writes bare is exactly what the lexer reads back. */
#ifndef COIL_IRLEX_H
#define COIL_IRLEX_H

#include "ir.h"

typedef enum TokKind {
    TK_EOF, TK_IDENT, TK_NUMBER, TK_STRING, TK_VALUE, TK_GLOBAL,
    TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_LBRACKET, TK_RBRACKET,
    TK_COMMA, TK_COLON, TK_EQUAL, TK_STAR, TK_ARROW,
} TokKind;

typedef struct Token {
    TokKind kind;
    const char *p; /* the token's text in the source */
    size_t n;
    /* IDENT: its text; STRING, and VALUE/GLOBAL names: the name or the decoded string
     * (NUL-terminated, valid until the next token). */
    const char *s;
    size_t slen;
    bool quoted;   /* VALUE/GLOBAL written %"..." / @"..." */
    Loc loc;
} Token;

typedef struct Lexer {
    const char *src;
    size_t len, pos;
    int line, col;
    const char *file;
    Err *err;
    char *buf; /* decoded strings */
    size_t cap;
} Lexer;

void lex_init(Lexer *lx, const char *src, size_t len, const char *file, Err *err);
void lex_free(Lexer *lx);
/* The next token; false with lx->err set on malformed text (never reads past len). */
bool lex_next(Lexer *lx, Token *t);
/* "'foo'" or "end of file", for "expected X, got Y" messages. */
const char *tok_describe(const Token *t, char *buf, size_t n);

/* Names: [A-Za-z_][A-Za-z0-9_.]* prints bare; anything else is quoted. */
static inline bool lex_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static inline bool lex_ident_char(int c)
{
    return lex_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}
bool lex_is_bare_name(const char *s);
/* Length of the valid UTF-8 sequence starting at p (n bytes available), 0 if invalid. */
int utf8_seq_len(const unsigned char *p, size_t n);

#endif
