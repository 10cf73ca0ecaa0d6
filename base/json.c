/* json.c — a strict recursive-descent JSON reader into an arena-held tree (untrusted bytes
 * welcome: every read is bounds-checked, depth is limited, errors give the byte offset), and
 * the streaming writer every JSON output of coil goes through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/json.h"

typedef struct Reader {
    const char *p;
    size_t len, pos;
    const char *what;
    Arena *arena;
    Err *err;
    int depth;
} Reader;

static bool fail(Reader *r, size_t at, const char *msg)
{
    err_set(r->err, ERR_INPUT, "%s: byte %zu: %s", r->what, at, msg);
    return false;
}

static int peek(const Reader *r) { return r->pos < r->len ? (unsigned char)r->p[r->pos] : -1; }

static void skip_space(Reader *r)
{
    for (int c = peek(r); c == ' ' || c == '\t' || c == '\r' || c == '\n'; c = peek(r))
        r->pos++;
}

static bool expect(Reader *r, char c, const char *msg)
{
    skip_space(r);
    if (peek(r) != c)
        return fail(r, r->pos, msg);
    r->pos++;
    return true;
}

static bool literal(Reader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->p + r->pos, word, n) != 0)
        return fail(r, r->pos, "invalid literal (expected a value)");
    r->pos += n;
    return true;
}

/* ---------------------------------------------------------------- numbers */

static size_t skip_digits(Reader *r)
{
    size_t start = r->pos;
    while (peek(r) >= '0' && peek(r) <= '9')
        r->pos++;
    return r->pos - start;
}

/* An integer literal's exact value; false when it does not fit int64. */
static bool exact_int(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (s += neg; *s; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool parse_number(Reader *r, Json *v)
{
    size_t start = r->pos;
    bool integral = true;
    if (peek(r) == '-')
        r->pos++;
    if (peek(r) == '0')
        r->pos++;
    else if (!skip_digits(r))
        return fail(r, start, "invalid number");
    if (peek(r) == '.') {
        r->pos++;
        integral = false;
        if (!skip_digits(r))
            return fail(r, r->pos, "invalid number: digits must follow '.'");
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        r->pos++;
        integral = false;
        if (peek(r) == '+' || peek(r) == '-')
            r->pos++;
        if (!skip_digits(r))
            return fail(r, r->pos, "invalid number: digits must follow the exponent");
    }
    char buf[128];
    size_t n = r->pos - start;
    if (n >= sizeof buf)
        return fail(r, start, "number too long");
    memcpy(buf, r->p + start, n);
    buf[n] = 0;
    v->kind = JSON_NUMBER;
    v->num = strtod(buf, NULL);
    v->is_int = integral && exact_int(buf, &v->i);
    return true;
}

/* ---------------------------------------------------------------- strings */

static int hex4(const Reader *r, size_t at)
{
    int v = 0;
    for (size_t i = at; i < at + 4; i++) {
        int c = i < r->len ? (unsigned char)r->p[i] : -1, d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80)
        return out[0] = (char)cp, 1;
    if (cp < 0x800)
        return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)),
               out[2] = (char)(0x80 | (cp & 0x3F)), 3;
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A \u escape (r->pos after the 'u'), joining a surrogate pair; the code point or -1. */
static long unicode_escape(Reader *r)
{
    int hi = hex4(r, r->pos);
    if (hi < 0)
        return fail(r, r->pos, "invalid \\u escape: four hex digits expected"), -1;
    r->pos += 4;
    if (hi >= 0xDC00 && hi <= 0xDFFF)
        return fail(r, r->pos - 6, "invalid \\u escape: lone low surrogate"), -1;
    if (hi < 0xD800 || hi > 0xDBFF)
        return hi ? hi : (fail(r, r->pos - 6, "\\u0000 is not allowed in strings"), -1);
    int lo = r->len - r->pos >= 6 && r->p[r->pos] == '\\' && r->p[r->pos + 1] == 'u' ? hex4(r, r->pos + 2) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return fail(r, r->pos - 6, "invalid \\u escape: high surrogate without its low half"), -1;
    r->pos += 6;
    return 0x10000 + ((long)(hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* Length of the valid UTF-8 sequence at s[0..n) (overlongs, surrogates rejected), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    static const struct { unsigned char lead_min, lead_max, len, lo, hi; } form[] = {
        {0xC2, 0xDF, 2, 0x80, 0xBF}, {0xE0, 0xE0, 3, 0xA0, 0xBF}, {0xE1, 0xEC, 3, 0x80, 0xBF},
        {0xED, 0xED, 3, 0x80, 0x9F}, {0xEE, 0xEF, 3, 0x80, 0xBF}, {0xF0, 0xF0, 4, 0x90, 0xBF},
        {0xF1, 0xF3, 4, 0x80, 0xBF}, {0xF4, 0xF4, 4, 0x80, 0x8F},
    };
    for (size_t f = 0; f < sizeof form / sizeof form[0]; f++) {
        if (s[0] < form[f].lead_min || s[0] > form[f].lead_max)
            continue;
        if (n < form[f].len || s[1] < form[f].lo || s[1] > form[f].hi)
            return 0;
        for (size_t i = 2; i < form[f].len; i++)
            if ((s[i] & 0xC0) != 0x80)
                return 0;
        return form[f].len;
    }
    return 0;
}

static bool string_escape(Reader *r, char *out, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    int c = peek(r);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    r->pos++;
    if (hit) {
        out[(*n)++] = to[hit - from];
        return true;
    }
    if (c != 'u')
        return fail(r, r->pos - 2, "invalid escape in string");
    long cp = unicode_escape(r);
    if (cp < 0)
        return false;
    *n += put_utf8(out + *n, (uint32_t)cp);
    return true;
}

/* r->pos is at the opening quote. Decoded text never exceeds the raw length. */
static bool parse_string(Reader *r, const char **s, size_t *slen)
{
    size_t start = r->pos++, n = 0;
    size_t end = r->pos;
    while (end < r->len && r->p[end] != '"')
        end += r->p[end] == '\\' ? 2 : 1;
    if (end >= r->len)
        return fail(r, start, "unterminated string");
    char *out = arena_alloc(r->arena, end - r->pos + 1);
    while (r->pos < end) {
        unsigned char c = (unsigned char)r->p[r->pos];
        size_t k = 1;
        if (c < 0x20)
            return fail(r, r->pos, "control character in string (escape it)");
        if (c == '\\') {
            r->pos++;
            if (!string_escape(r, out, &n))
                return false;
            continue;
        }
        if (c >= 0x80 && !(k = utf8_len((const unsigned char *)r->p + r->pos, end - r->pos)))
            return fail(r, r->pos, "invalid UTF-8 in string");
        memcpy(out + n, r->p + r->pos, k);
        n += k;
        r->pos += k;
    }
    r->pos++; /* the closing quote */
    out[n] = 0;
    *s = out;
    *slen = n;
    return true;
}

/* ---------------------------------------------------------------- arrays, objects */

static bool parse_value(Reader *r, Json *v);

/* A growable list of items (and keys) held in malloc'd memory until copied to the arena,
 * and for an object a hash table of its keys so far: each key is checked against the
 * others in constant time, so an object of n members parses in O(n), not O(n^2). */
/* Objects of at most this many members keep no table: a scan is as quick. */
#define JSON_SMALL_OBJECT 8

typedef struct Items {
    Json *item;
    const char **key;
    int n, cap;
    int *slot; /* item indices by key hash, -1 empty; never more than half full */
    int nslot;
} Items;

static bool items_push(Reader *r, Items *it)
{
    if (it->n < it->cap)
        return true;
    int cap = it->cap ? it->cap * 2 : 8;
    Json *item = realloc(it->item, (size_t)cap * sizeof *item);
    if (item)
        it->item = item;
    const char **key = item ? realloc(it->key, (size_t)cap * sizeof *key) : NULL;
    if (key)
        it->key = key;
    if (!item || !key || cap > (1 << 24))
        return fail(r, r->pos, "too many items (out of memory)");
    it->cap = cap;
    return true;
}

static uint64_t key_hash(const char *k)
{
    return fnv1a_str(k);
}

/* The slot holding key in a table of nslot (a power of two), or the empty one where it
 * would go. Keys are NUL-terminated (\u0000 is rejected), so strcmp compares them. */
static int key_slot(const int *slot, int nslot, const char *const *keys, const char *key)
{
    size_t mask = (size_t)nslot - 1, s = key_hash(key) & mask;
    while (slot[s] >= 0 && strcmp(keys[slot[s]], key) != 0)
        s = (s + 1) & mask;
    return (int)s;
}

static bool keys_rehash(Items *it)
{
    int nslot = it->nslot ? 2 * it->nslot : 16;
    int *slot = malloc((size_t)nslot * sizeof *slot);
    if (!slot)
        return false;
    memset(slot, -1, (size_t)nslot * sizeof *slot);
    for (int i = 0; i < it->n; i++)
        slot[key_slot(slot, nslot, it->key, it->key[i])] = i;
    free(it->slot);
    it->slot = slot;
    it->nslot = nslot;
    return true;
}

/* A key shown in a message: quotes, backslashes and control characters escaped, long
 * ones cut (a key can be anything). */
static void show_key(const char *key, char *out, size_t cap)
{
    size_t n = 0;
    const unsigned char *k = (const unsigned char *)key;
    for (; *k && n + 12 < cap; k++) { /* room for an escape, "..." and the NUL */
        if (*k == '"' || *k == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", *k);
        else if (*k < 0x20)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", *k);
        else
            out[n++] = (char)*k;
    }
    snprintf(out + n, cap - n, "%s", *k ? "..." : "");
}

/* Add the key of item it->n to the table; false (r's error set) when it is already there. */
static bool add_key(Reader *r, Items *it, size_t at)
{
    if (2 * (it->n + 1) > it->nslot && !keys_rehash(it))
        return fail(r, at, "too many keys (out of memory)");
    int s = key_slot(it->slot, it->nslot, it->key, it->key[it->n]);
    if (it->slot[s] >= 0) {
        char shown[160];
        show_key(it->key[it->n], shown, sizeof shown);
        err_set(r->err, ERR_INPUT, "%s: byte %zu: duplicate key \"%s\" in object", r->what, at,
                shown);
        return false;
    }
    it->slot[s] = it->n;
    return true;
}

static bool parse_member(Reader *r, Items *it, bool object)
{
    skip_space(r);
    if (!items_push(r, it))
        return false;
    it->key[it->n] = NULL;
    if (object) {
        size_t at = r->pos, klen;
        if (peek(r) != '"')
            return fail(r, r->pos, "expected a string key");
        if (!parse_string(r, &it->key[it->n], &klen) || !add_key(r, it, at))
            return false;
        if (!expect(r, ':', "expected ':' after the key"))
            return false;
    }
    if (!parse_value(r, &it->item[it->n]))
        return false;
    it->n++;
    return true;
}

static bool parse_container(Reader *r, Json *v, bool object)
{
    char close = object ? '}' : ']';
    Items it = {0};
    bool ok = true;
    r->pos++;
    skip_space(r);
    if (peek(r) == close)
        r->pos++;
    else
        for (;;) {
            if (!(ok = parse_member(r, &it, object)))
                break;
            skip_space(r);
            if (peek(r) == ',') {
                r->pos++;
                continue;
            }
            ok = expect(r, close, object ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
    v->kind = object ? JSON_OBJECT : JSON_ARRAY;
    v->n = it.n;
    if (ok && it.n) {
        v->item = arena_memdup(r->arena, it.item, (size_t)it.n * sizeof *it.item);
        v->key = object ? arena_memdup(r->arena, it.key, (size_t)it.n * sizeof *it.key) : NULL;
        if (object && it.n > JSON_SMALL_OBJECT) { /* a small one is searched in place */
            v->slot = arena_memdup(r->arena, it.slot, (size_t)it.nslot * sizeof *it.slot);
            v->nslot = v->slot ? it.nslot : 0;
        }
    }
    free(it.item);
    free(it.key);
    free(it.slot);
    return ok;
}

static bool parse_value(Reader *r, Json *v)
{
    skip_space(r);
    memset(v, 0, sizeof *v);
    v->at = r->pos;
    int c = peek(r);
    if (c == '{' || c == '[') {
        if (++r->depth > JSON_MAX_DEPTH)
            return fail(r, r->pos, "nesting too deep");
        bool ok = parse_container(r, v, c == '{');
        r->depth--;
        return ok;
    }
    if (c == '"')
        return v->kind = JSON_STRING, parse_string(r, &v->s, &v->slen);
    if (c == 't' || c == 'f')
        return v->kind = JSON_BOOL, v->b = c == 't', literal(r, c == 't' ? "true" : "false");
    if (c == 'n')
        return v->kind = JSON_NULL, literal(r, "null");
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(r, v);
    return fail(r, r->pos, c < 0 ? "unexpected end of text (expected a value)" : "expected a value");
}

Json *json_parse(Arena *a, const char *text, size_t len, const char *what, Err *e)
{
    Reader r = {.p = text, .len = len, .what = what, .arena = a, .err = e};
    Json *v = arena_alloc(a, sizeof *v);
    if (!parse_value(&r, v))
        return NULL;
    skip_space(&r);
    if (r.pos != len) {
        fail(&r, r.pos, "unexpected text after the value");
        return NULL;
    }
    return v;
}

const Json *json_get(const Json *obj, const char *key)
{
    if (!obj || obj->kind != JSON_OBJECT)
        return NULL;
    if (obj->nslot) {
        int i = obj->slot[key_slot(obj->slot, obj->nslot, obj->key, key)];
        return i >= 0 ? &obj->item[i] : NULL;
    }
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->key[i], key) == 0)
            return &obj->item[i];
    return NULL;
}

const char *json_kind_name(JsonKind k)
{
    static const char *const name[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)k < sizeof name / sizeof name[0] ? name[k] : "?";
}

/* ---------------------------------------------------------------- writing */

/* s as a string literal: the escapes JSON requires, UTF-8 as it is, and U+FFFD for each
 * byte that does not start a valid UTF-8 sequence (a path or a name can hold anything). */
static void put_string(FILE *f, const char *s)
{
    static const char short_escape[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r',
                                        ['\t'] = 't', ['"'] = '"', ['\\'] = '\\'};
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    fputc('"', f);
    while (left > 0) {
        size_t k = 1;
        if (*p < sizeof short_escape && short_escape[*p])
            fprintf(f, "\\%c", short_escape[*p]);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else if (*p < 0x80)
            fputc(*p, f);
        else if ((k = utf8_len(p, left)) > 0)
            fwrite(p, 1, k, f);
        else
            fputs("\\ufffd", f), k = 1;
        p += k, left -= k;
    }
    fputc('"', f);
}

void json_write_string(FILE *f, const char *s) { put_string(f, s); }

void json_writer_init(JsonWriter *w, FILE *f) { *w = (JsonWriter){.f = f}; }

static bool in_object(const JsonWriter *w)
{
    return w->depth > 0 && (w->is_object >> (w->depth - 1) & 1);
}

/* What comes before any item: the separator from the previous one, and in an object the
 * check that this value's key was given (a key itself comes where a key is due). */
static bool before_item(JsonWriter *w, bool is_key)
{
    bool object = in_object(w);
    if (w->failed || (object && !is_key && !w->key) || (is_key && (!object || w->key)) ||
        (w->depth == 0 && w->done)) {
        w->failed = true; /* one document, keys and values in turn */
        return false;
    }
    if (object && !is_key)
        return true; /* a member's value: its key wrote the separator */
    if (w->depth == 0)
        return true; /* the document's value */
    uint64_t bit = UINT64_C(1) << (w->depth - 1);
    bool later = w->has_item & bit;
    if (later)
        fputc(',', w->f);
    if (w->newline)
        fputc('\n', w->f);
    else if (later)
        fputc(' ', w->f);
    w->newline = false;
    w->has_item |= bit;
    return true;
}

/* A value begun: the key it answers is spent; at the top it is the document's one value. */
static void after_value(JsonWriter *w)
{
    w->key = NULL;
    w->done = w->done || w->depth == 0;
}

static void begin(JsonWriter *w, char open, bool object)
{
    if (!before_item(w, false))
        return;
    if (w->depth >= JSON_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    after_value(w);
    fputc(open, w->f);
    uint64_t bit = UINT64_C(1) << w->depth;
    w->is_object = object ? w->is_object | bit : w->is_object & ~bit;
    w->has_item &= ~bit;
    w->depth++;
}

static void end(JsonWriter *w, char close, bool object)
{
    if (w->failed || w->depth == 0 || in_object(w) != object || w->key) {
        w->failed = true;
        return;
    }
    if (w->newline)
        fputc('\n', w->f);
    w->newline = false;
    fputc(close, w->f);
    w->depth--;
}

void json_begin_object(JsonWriter *w) { begin(w, '{', true); }
void json_end_object(JsonWriter *w) { end(w, '}', true); }
void json_begin_array(JsonWriter *w) { begin(w, '[', false); }
void json_end_array(JsonWriter *w) { end(w, ']', false); }

void json_key(JsonWriter *w, const char *key)
{
    if (!key) {
        w->failed = true;
        return;
    }
    if (!before_item(w, true))
        return;
    put_string(w->f, key);
    fputs(": ", w->f);
    w->key = key;
}

/* A scalar: its text after the separator. */
static void scalar(JsonWriter *w, const char *text)
{
    if (!before_item(w, false))
        return;
    after_value(w);
    fputs(text, w->f);
}

void json_string(JsonWriter *w, const char *s)
{
    if (!s) {
        scalar(w, "null");
        return;
    }
    if (!before_item(w, false))
        return;
    after_value(w);
    put_string(w->f, s);
}

void json_int(JsonWriter *w, int64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)v);
    scalar(w, text);
}

/* The fewest of 15, 16, 17 significant digits that read back as v (17 always do). */
static void round_trip_text(double v, char *text, size_t n)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, n, "%.*g", digits, v);
        if (strtod(text, NULL) == v)
            return;
    }
}

void json_double(JsonWriter *w, double v)
{
    if (isfinite(v)) {
        char text[40];
        round_trip_text(v, text, sizeof text);
        scalar(w, text);
        return;
    }
    const char *key = w->key, *what = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
    scalar(w, "null");
    if (!key || w->failed)
        return; /* an array's element: null alone */
    char sibling[256];
    if (snprintf(sibling, sizeof sibling, "%s_nonfinite", key) >= (int)sizeof sibling) {
        w->failed = true; /* no key that long is ever written */
        return;
    }
    json_key(w, sibling);
    json_string(w, what);
}

void json_bool(JsonWriter *w, bool v) { scalar(w, v ? "true" : "false"); }
void json_null(JsonWriter *w) { scalar(w, "null"); }

void json_field_string(JsonWriter *w, const char *key, const char *s)
{
    json_key(w, key);
    json_string(w, s);
}

void json_field_int(JsonWriter *w, const char *key, int64_t v)
{
    json_key(w, key);
    json_int(w, v);
}

void json_field_double(JsonWriter *w, const char *key, double v)
{
    json_key(w, key);
    json_double(w, v);
}

void json_field_bool(JsonWriter *w, const char *key, bool v)
{
    json_key(w, key);
    json_bool(w, v);
}

void json_newline(JsonWriter *w) { w->newline = true; }

bool json_writer_done(JsonWriter *w)
{
    bool whole = !w->failed && w->depth == 0 && w->done;
    fputc('\n', w->f);
    return whole && !ferror(w->f);
}
