/* irlex.c — tokenizer of the IR text form: a byte buffer in, located tokens out.
 * Any byte sequence gives tokens or one located error; nothing reads past the buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "irlex.h"

void lex_init(Lexer *lx, const char *src, size_t len, const char *file, Err *err)
{
    *lx = (Lexer){.src = src, .len = src ? len : 0, .line = 1, .col = 1, .file = file, .err = err};
}

void lex_free(Lexer *lx)
{
    free(lx->buf);
    lx->buf = NULL;
    lx->cap = 0;
}

bool lex_is_bare_name(const char *s)
{
    if (!s || !lex_ident_start((unsigned char)s[0]))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!lex_ident_char((unsigned char)*p))
            return false;
    return true;
}

int utf8_seq_len(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || n < (size_t)len)
        return 0;
    /* The second byte's range excludes overlong forms, surrogates and code points > U+10FFFF. */
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return len;
}

/* ---------------------------------------------------------------- cursor */

static int peek(const Lexer *lx, size_t k)
{
    return lx->pos + k < lx->len ? (unsigned char)lx->src[lx->pos + k] : -1;
}

static void advance(Lexer *lx, size_t k)
{
    for (; k > 0 && lx->pos < lx->len; k--, lx->pos++) {
        if (lx->src[lx->pos] == '\n') {
            lx->line++;
            lx->col = 1;
        } else if (lx->col < INT32_MAX) {
            lx->col++;
        }
    }
}

static Loc here(const Lexer *lx)
{
    return (Loc){lx->file, lx->line, lx->col};
}

/* A byte that cannot start a token: say what it is so binary input reads as such. */
static bool bad_byte(Lexer *lx, int c, const char *where)
{
    if (c == 0)
        err_at(lx->err, here(lx), "NUL byte%s; IR text cannot contain NUL (is this a binary file?)", where);
    else if (c >= 0x80)
        err_at(lx->err, here(lx), "invalid UTF-8 byte 0x%02x%s; IR text must be UTF-8", (unsigned)c, where);
    else if (c < 0x20 || c == 0x7f)
        err_at(lx->err, here(lx), "unexpected control character 0x%02x%s", (unsigned)c, where);
    else
        err_at(lx->err, here(lx), "unexpected character '%c'%s", c, where);
    return false;
}

/* Step over one character of free text (a comment or a string body), checking UTF-8. */
static bool text_char(Lexer *lx, const char *where)
{
    int c = peek(lx, 0);
    if (c == 0)
        return bad_byte(lx, c, where);
    int len = utf8_seq_len((const unsigned char *)lx->src + lx->pos, lx->len - lx->pos);
    if (len == 0)
        return bad_byte(lx, c, where);
    advance(lx, (size_t)len);
    return true;
}

static bool skip_space(Lexer *lx)
{
    for (;;) {
        int c = peek(lx, 0);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            advance(lx, 1);
        } else if (c == '/' && peek(lx, 1) == '/') {
            while (peek(lx, 0) >= 0 && peek(lx, 0) != '\n')
                if (!text_char(lx, " in a comment"))
                    return false;
        } else {
            return true;
        }
    }
}

/* ---------------------------------------------------------------- tokens */

static bool buf_put(Lexer *lx, size_t at, char c)
{
    if (at + 1 >= lx->cap) {
        size_t ncap = lx->cap ? lx->cap * 2 : 256;
        char *p = realloc(lx->buf, ncap);
        if (!p) {
            err_at(lx->err, here(lx), "out of memory reading a string");
            return false;
        }
        lx->buf = p;
        lx->cap = ncap;
    }
    lx->buf[at] = c;
    lx->buf[at + 1] = 0;
    return true;
}

static int hex_digit(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The escape after a backslash: \" \\ \n \t \r \xHH (HH != 00). -1 with an error. */
static int escape(Lexer *lx)
{
    static const char simple[][2] = {{'"', '"'}, {'\\', '\\'}, {'n', '\n'}, {'t', '\t'}, {'r', '\r'}};
    int c = peek(lx, 0);
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++)
        if (c == simple[i][0]) {
            advance(lx, 1);
            return (unsigned char)simple[i][1];
        }
    if (c == 'x') {
        int hi = hex_digit(peek(lx, 1)), lo = hex_digit(peek(lx, 2));
        if (hi >= 0 && lo >= 0 && (hi | lo)) {
            advance(lx, 3);
            return hi * 16 + lo;
        }
    }
    err_at(lx->err, here(lx), "invalid escape in a string; use \\\", \\\\, \\n, \\t, \\r or \\xHH (not \\x00)");
    return -1;
}

/* A double-quoted string, decoded into lx->buf. */
static bool lex_string(Lexer *lx, Token *t)
{
    Loc start = here(lx);
    size_t n = 0;
    advance(lx, 1);
    if (!buf_put(lx, 0, 0))
        return false;
    for (;;) {
        int c = peek(lx, 0);
        if (c < 0 || c == '\n') {
            err_at(lx->err, start, "unterminated string; close it with '\"' on the same line");
            return false;
        }
        if (c == '"')
            break;
        if (c == '\\') {
            advance(lx, 1);
            if ((c = escape(lx)) < 0 || !buf_put(lx, n++, (char)c))
                return false;
            continue;
        }
        size_t from = lx->pos;
        if (!text_char(lx, " in a string"))
            return false;
        for (size_t i = from; i < lx->pos; i++)
            if (!buf_put(lx, n++, lx->src[i]))
                return false;
    }
    advance(lx, 1);
    t->s = lx->buf;
    t->slen = n;
    t->quoted = true;
    return true;
}

static size_t ident_run(const Lexer *lx, size_t k)
{
    while (lex_ident_char(peek(lx, k)))
        k++;
    return k;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static size_t digit_run(const Lexer *lx, size_t k)
{
    while (is_digit(peek(lx, k)))
        k++;
    return k;
}

/* -?digits[.digits][e[+-]digits], or -inf / -nan; "inf" and "nan" alone lex as identifiers. */
static bool lex_number(Lexer *lx, Token *t)
{
    size_t k = peek(lx, 0) == '-';
    bool ok;
    if (lex_ident_start(peek(lx, k))) {
        size_t end = ident_run(lx, k);
        ok = end - k == 3 && (memcmp(lx->src + lx->pos + k, "inf", 3) == 0 ||
                              memcmp(lx->src + lx->pos + k, "nan", 3) == 0);
        k = end;
    } else {
        size_t d = digit_run(lx, k);
        ok = d > k;
        k = d;
        if (ok && peek(lx, k) == '.' && is_digit(peek(lx, k + 1)))
            k = digit_run(lx, k + 1);
        if (ok && (peek(lx, k) == 'e' || peek(lx, k) == 'E')) {
            size_t s = k + 1 + (peek(lx, k + 1) == '+' || peek(lx, k + 1) == '-');
            d = digit_run(lx, s);
            ok = d > s;
            k = d;
        }
    }
    if (!ok || lex_ident_char(peek(lx, k))) {
        k = ident_run(lx, k);
        err_at(lx->err, here(lx), "malformed number '%.*s'", (int)(k > 64 ? 64 : k), lx->src + lx->pos);
        return false;
    }
    t->kind = TK_NUMBER;
    advance(lx, k);
    return true;
}

/* %name / @name: a bare [A-Za-z0-9_.]+ run or a quoted string. */
static bool lex_sigil_name(Lexer *lx, Token *t)
{
    int sigil = peek(lx, 0);
    t->kind = sigil == '%' ? TK_VALUE : TK_GLOBAL;
    if (peek(lx, 1) == '"') {
        advance(lx, 1);
        return lex_string(lx, t);
    }
    size_t k = ident_run(lx, 1);
    if (k == 1) {
        err_at(lx->err, here(lx), "expected a name after '%c'", sigil);
        return false;
    }
    t->s = lx->src + lx->pos + 1;
    t->slen = k - 1;
    advance(lx, k);
    return true;
}

bool lex_next(Lexer *lx, Token *t)
{
    static const char punct[] = "(){}[],:=*";
    static const TokKind punct_kind[] = {TK_LPAREN, TK_RPAREN, TK_LBRACE, TK_RBRACE, TK_LBRACKET,
                                         TK_RBRACKET, TK_COMMA, TK_COLON, TK_EQUAL, TK_STAR};
    *t = (Token){.kind = TK_EOF};
    if (!skip_space(lx))
        return false;
    t->loc = here(lx);
    t->p = lx->src + lx->pos;
    size_t start = lx->pos;
    int c = peek(lx, 0);
    const char *pc = c > 0 ? strchr(punct, c) : NULL;
    bool ok = true;
    if (c < 0) {
        t->kind = TK_EOF;
    } else if (pc) {
        t->kind = punct_kind[pc - punct];
        advance(lx, 1);
    } else if (c == '-' && peek(lx, 1) == '>') {
        t->kind = TK_ARROW;
        advance(lx, 2);
    } else if (c == '-' || is_digit(c)) {
        ok = lex_number(lx, t);
    } else if (c == '"') {
        t->kind = TK_STRING;
        ok = lex_string(lx, t);
    } else if (c == '%' || c == '@') {
        ok = lex_sigil_name(lx, t);
    } else if (lex_ident_start(c)) {
        t->kind = TK_IDENT;
        t->s = t->p;
        t->slen = ident_run(lx, 0);
        advance(lx, t->slen);
    } else {
        return bad_byte(lx, c, "");
    }
    t->n = lx->pos - start;
    return ok;
}

const char *tok_describe(const Token *t, char *buf, size_t n)
{
    if (t->kind == TK_EOF)
        snprintf(buf, n, "end of file");
    else if (t->n > 40)
        snprintf(buf, n, "'%.40s...'", t->p);
    else
        snprintf(buf, n, "'%.*s'", (int)t->n, t->p);
    return buf;
}
