/* diag.c — collects the frontend's errors and renders them as compilers do: a located
 * message, the offending source line (sanitised) and a caret under the column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/diag.h"

enum { DIAG_KEEP = 64, LINE_SHOWN = 160 };

typedef struct Source {
    const char *path, *text;
    size_t len;
} Source;

typedef struct Diag {
    Loc loc;
    char msg[512];
} Diag;

struct Diags {
    Diag *list; /* the first DIAG_KEEP diagnostics */
    int n, count;
    Source *src;
    int nsrc;
};

Diags *diags_new(void)
{
    Diags *d = calloc(1, sizeof *d);
    if (d)
        d->list = calloc(DIAG_KEEP, sizeof *d->list);
    if (d && !d->list) {
        free(d);
        return NULL;
    }
    return d;
}

void diags_free(Diags *d)
{
    if (!d)
        return;
    free(d->list);
    free(d->src);
    free(d);
}

void diags_source(Diags *d, const char *path, const char *text, size_t len)
{
    Source *s = realloc(d->src, sizeof *s * (size_t)(d->nsrc + 1));
    if (!s)
        return; /* quoting is a nicety: without it the message still stands */
    d->src = s;
    d->src[d->nsrc++] = (Source){path, text, len};
}

void diag_verror(Diags *d, Loc loc, const char *fmt, va_list ap)
{
    d->count++;
    if (d->n == DIAG_KEEP)
        return;
    Diag *g = &d->list[d->n++];
    g->loc = loc;
    vsnprintf(g->msg, sizeof g->msg, fmt, ap);
}

void diag_error(Diags *d, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_verror(d, loc, fmt, ap);
    va_end(ap);
}

int diags_count(const Diags *d) { return d->count; }

static const Source *source_of(const Diags *d, const char *path)
{
    for (int i = 0; path && i < d->nsrc; i++)
        if (d->src[i].path == path || strcmp(d->src[i].path, path) == 0)
            return &d->src[i];
    return NULL;
}

/* Length of a valid UTF-8 sequence at p (at most n bytes), or 0 if invalid. */
static int utf8_len(const unsigned char *p, size_t n)
{
    int len = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3
            : p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : 0;
    if (len == 0 || (size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* Append the quoted source line and the caret line for loc to out (printable text only:
 * control bytes and invalid UTF-8 become '?', so a NUL in the file cannot cut the message). */
static void quote_line(const Source *s, Loc loc, char *out, size_t n)
{
    const unsigned char *p = (const unsigned char *)s->text, *end = p + s->len;
    for (int line = 1; line < loc.line && p < end; p++)
        line += *p == '\n';
    char text[LINE_SHOWN * 4 + 8], caret[LINE_SHOWN + 8];
    size_t t = 0, c = 0;
    int col = 1, shown = 0;
    while (p < end && *p != '\n' && shown < LINE_SHOWN) {
        int len = utf8_len(p, (size_t)(end - p));
        bool printable = len > 1 || (len == 1 && (*p >= 0x20 || *p == '\t') && *p != 0x7f);
        if (printable)
            memcpy(text + t, p, (size_t)len), t += (size_t)len;
        else
            text[t++] = '?', len = 1;
        if (col < loc.col)
            caret[c++] = *p == '\t' ? '\t' : ' ';
        col += len, p += len, shown++;
    }
    text[t] = caret[c] = 0;
    snprintf(out, n, "\n%5d | %s\n      | %s^", loc.line, text, caret);
}

/* One diagnostic; with quote, followed by its source line and caret. */
static int diag_format(const Diags *d, const Diag *g, bool quote, char *out, size_t n)
{
    char text[LINE_SHOWN * 6 + 64] = "";
    const Source *s = source_of(d, g->loc.file);
    if (quote && s && g->loc.line > 0)
        quote_line(s, g->loc, text, sizeof text);
    if (g->loc.file)
        return snprintf(out, n, "%s:%d:%d: error: %s%s", g->loc.file, g->loc.line, g->loc.col,
                        g->msg, text);
    return snprintf(out, n, "error: %s", g->msg);
}

/* Diagnostics go in with their source lines while they fit, then as single lines,
 * then as a count, so a run with many errors still names as many as it can. */
bool diags_to_err(const Diags *d, Err *e)
{
    if (d->count == 0)
        return false;
    if (!err_ok(e))
        return true;
    size_t used = 0, room = sizeof e->msg - 40; /* keep space for the summary line */
    int shown = 0;
    bool quote = true;
    for (; shown < d->n; shown++) {
        char one[2048];
        int len = diag_format(d, &d->list[shown], quote, one, sizeof one);
        if (len >= 0 && used + (size_t)len + 1 > room && quote) {
            quote = false;
            len = diag_format(d, &d->list[shown], false, one, sizeof one);
        }
        if (len < 0 || used + (size_t)len + 1 > room) {
            if (shown == 0) { /* the first always goes in, cut if need be */
                used = strnlen(one, room - 1);
                memcpy(e->msg, one, used);
                e->msg[used] = 0;
                shown = 1;
            }
            break;
        }
        used += (size_t)snprintf(e->msg + used, sizeof e->msg - used, "%s%s", used ? "\n" : "", one);
    }
    if (shown < d->count)
        snprintf(e->msg + used, sizeof e->msg - used, "\n... and %d more error%s", d->count - shown,
                 d->count - shown == 1 ? "" : "s");
    e->code = ERR_INPUT;
    return true;
}

/* ---------------------------------------------------------------- did you mean */

/* Optimal-string-alignment distance (edits and adjacent swaps), names up to 63 bytes. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 1 << 20;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

void suggest_init(Suggest *s, const char *word)
{
    *s = (Suggest){.word = word, .best = NULL, .dist = 1 << 20};
}

void suggest_try(Suggest *s, const char *candidate)
{
    if (!candidate || strcmp(candidate, s->word) == 0)
        return;
    int len = (int)strlen(s->word);
    int limit = len <= 2 ? 0 : len <= 5 ? 1 : len <= 8 ? 2 : 3;
    int dist = edit_distance(s->word, candidate);
    if (dist <= limit && dist < s->dist) {
        s->best = candidate;
        s->dist = dist;
    }
}

const char *suggest_text(const Suggest *s, char *buf, size_t n)
{
    if (!s->best)
        return "";
    snprintf(buf, n, "; did you mean '%s'?", s->best);
    return buf;
}
