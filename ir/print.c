/* print.c — the IR text form's printer (docs/IR.md): header with inputs and outputs,
 * one numbered statement per node, attributes in schema order without defaults. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "irlex.h"

typedef struct Buf {
    char *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < b->n + n + 1)
            ncap *= 2;
        char *p = realloc(b->p, ncap);
        if (!p) {
            fprintf(stderr, "coil: out of memory printing a graph\n");
            abort();
        }
        b->p = p;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(Buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---------------------------------------------------------------- lexical pieces */

/* Quoted with \" \\ \n \t \r, \xHH for other control bytes and bytes that are not UTF-8. */
static void put_string(Buf *b, const char *s)
{
    static const char from[] = "\"\\\n\t\r", to[] = "\"\\ntr";
    puts_(b, "\"");
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0) {
        const char *e = *p ? strchr(from, *p) : NULL;
        int len = utf8_seq_len(p, left);
        if (e) {
            char esc[2] = {'\\', to[e - from]};
            put(b, esc, 2);
        } else if (len == 0 || *p < 0x20 || *p == 0x7f) {
            putf(b, "\\x%02x", *p);
        } else {
            put(b, (const char *)p, (size_t)len);
            p += len - 1, left -= (size_t)len - 1;
        }
        p++, left--;
    }
    puts_(b, "\"");
}

/* A name after a sigil (or none): bare when the lexer reads it back as one identifier. */
static void put_name(Buf *b, const char *sigil, const char *name)
{
    puts_(b, sigil);
    if (lex_is_bare_name(name))
        puts_(b, name);
    else
        put_string(b, name ? name : "");
}

static bool reads_back(double v, int prec, char *s, size_t n)
{
    snprintf(s, n, "%.*g", prec, v);
    return strtod(s, NULL) == v;
}

/* The first of %.1g ... %.17g that reads back as the same double. Reading back is monotone
 * in the precision, so a binary search finds it, except at powers of two, whose rounding
 * interval is lopsided: those take the linear scan. */
static void put_float(Buf *b, double v)
{
    if (isnan(v) || isinf(v)) {
        puts_(b, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
        return;
    }
    char s[40];
    if (v == trunc(v) && fabs(v) < 1e15) { /* integers as integers: 10, not 1e+01 */
        snprintf(s, sizeof s, "%.0f", v);
        puts_(b, s);
        return;
    }
    int lo = 1, hi = 17, e;
    if (fabs(frexp(v, &e)) == 0.5) {
        while (lo < hi && !reads_back(v, lo, s, sizeof s))
            lo++;
    } else {
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (reads_back(v, mid, s, sizeof s))
                hi = mid;
            else
                lo = mid + 1;
        }
    }
    reads_back(v, lo, s, sizeof s);
    puts_(b, s);
}

/* k first when k != 1 (or the dim is static), then symbols in interning order. */
static void put_dim(Buf *b, const Graph *g, Dim d)
{
    bool first = true;
    if (d.syms == 0 || d.k != 1) {
        putf(b, "%lld", (long long)d.k);
        first = false;
    }
    for (int i = 0; i < COIL_MAX_SYMS; i++) {
        if (!(d.syms >> i & 1))
            continue;
        if (!first)
            puts_(b, "*");
        puts_(b, i < g->nsym && g->sym[i] ? g->sym[i] : "?");
        first = false;
    }
}

static void put_type(Buf *b, const Graph *g, const Type *t)
{
    puts_(b, t->dt >= 0 && t->dt < DT_COUNT ? dtype_info[t->dt].name : "?");
    puts_(b, "[");
    for (int i = 0; i < t->rank && i < COIL_MAX_RANK; i++) {
        if (i)
            puts_(b, ",");
        put_dim(b, g, t->dim[i]);
    }
    puts_(b, "]");
}

/* ---------------------------------------------------------------- attributes */

static bool attr_is_default(const AttrSpec *spec, const Attr *a)
{
    if (spec->required)
        return false;
    switch (spec->kind) {
    case AK_INT:
    case AK_BOOL: return a->i == (int64_t)spec->def;
    case AK_FLOAT: return a->f == spec->def;
    case AK_INTS: return a->n == 0;
    case AK_STR: return a->s == NULL;
    case AK_DATA: return false;
    }
    return false;
}

static void put_attr_value(Buf *b, const Attr *a)
{
    switch (a->kind) {
    case AK_INT: putf(b, "%lld", (long long)a->i); break;
    case AK_FLOAT: put_float(b, a->f); break;
    case AK_BOOL: puts_(b, a->i ? "true" : "false"); break;
    case AK_STR: put_string(b, a->s ? a->s : ""); break;
    case AK_INTS:
    case AK_DATA:
        puts_(b, "[");
        for (int i = 0; i < a->n; i++) {
            if (i)
                puts_(b, ", ");
            if (a->kind == AK_INTS)
                putf(b, "%lld", (long long)a->ints[i]);
            else
                put_float(b, a->data[i]);
        }
        puts_(b, "]");
        break;
    }
}

static void put_attrs(Buf *b, const Node *n)
{
    const OpInfo *op = &op_info[n->op];
    bool any = false;
    for (int i = 0; i < op->nattr && n->attr; i++) {
        if (attr_is_default(&op->attrs[i], &n->attr[i]))
            continue;
        puts_(b, any ? ", " : " {");
        puts_(b, op->attrs[i].name);
        puts_(b, "=");
        put_attr_value(b, &n->attr[i]);
        any = true;
    }
    if (any)
        puts_(b, "}");
}

/* ---------------------------------------------------------------- graph */

/* num[id]: the statement number of node id, or -1 for inputs listed in the header. */
static int *number_values(const Graph *g)
{
    int *num = calloc((size_t)g->nnode + 1, sizeof *num);
    if (!num) {
        fprintf(stderr, "coil: out of memory printing a graph\n");
        abort();
    }
    for (int i = 0; i < g->ninput; i++)
        if (g->input[i] >= 0 && g->input[i] < g->nnode && g->node[g->input[i]].op == OP_INPUT)
            num[g->input[i]] = -1;
    for (int id = 0, k = 0; id < g->nnode; id++)
        if (num[id] == 0)
            num[id] = k++;
    return num;
}

static void put_value(Buf *b, const Graph *g, const int *num, int id)
{
    if (id < 0 || id >= g->nnode)
        putf(b, "%%<bad id %d>", id);
    else if (num[id] < 0)
        put_name(b, "%", node_name(&g->node[id]));
    else
        putf(b, "%%%d", num[id]);
}

static void put_header(Buf *b, const Graph *g, const int *num)
{
    puts_(b, "graph ");
    put_name(b, "@", g->name);
    puts_(b, "(");
    for (int i = 0; i < g->ninput; i++) {
        puts_(b, i ? ", " : "");
        put_value(b, g, num, g->input[i]);
        puts_(b, ": ");
        if (g->input[i] >= 0 && g->input[i] < g->nnode)
            put_type(b, g, &g->node[g->input[i]].type);
    }
    puts_(b, ") -> (");
    for (int i = 0; i < g->noutput; i++) {
        puts_(b, i ? ", " : "");
        put_name(b, "", g->output_name[i]);
        puts_(b, ": ");
        if (g->output[i] >= 0 && g->output[i] < g->nnode)
            put_type(b, g, &g->node[g->output[i]].type);
    }
    puts_(b, ") {\n");
}

static void put_statement(Buf *b, const Graph *g, const int *num, int id)
{
    const Node *n = &g->node[id];
    putf(b, "  %%%d = ", num[id]);
    puts_(b, n->op >= 0 && n->op < OP_COUNT ? op_info[n->op].name : "<bad op>");
    for (int j = 0; j < n->nin; j++) {
        puts_(b, j ? ", " : " ");
        put_value(b, g, num, n->in[j]);
    }
    if (n->op >= 0 && n->op < OP_COUNT)
        put_attrs(b, n);
    puts_(b, " : ");
    put_type(b, g, &n->type);
    puts_(b, "\n");
}

char *ir_print(const Graph *g)
{
    Buf b = {0};
    int *num = number_values(g);
    put_header(&b, g, num);
    for (int id = 0; id < g->nnode; id++)
        if (num[id] >= 0)
            put_statement(&b, g, num, id);
    puts_(&b, "  return");
    for (int i = 0; i < g->noutput; i++) {
        puts_(&b, i ? ", " : " ");
        put_value(&b, g, num, g->output[i]);
    }
    puts_(&b, "\n}\n");
    free(num);
    return b.p;
}
