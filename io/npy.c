/* npy.c — NumPy's .npy format (numpy/lib/format.py): magic, version, a Python-literal
 * dict {'descr', 'fortran_order', 'shape'} padded to 64 bytes, then the raw C-order data. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "io/npy.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1 << 20) /* real headers are ~128 bytes; refuse absurd ones */
#define NPY_ALIGN 64

/* What the header dict says. */
typedef struct NpyHeader {
    DType dt;
    bool fortran;
    int rank;
    int64_t shape[COIL_MAX_RANK];
    bool has_descr, has_order, has_shape;
} NpyHeader;

/* A cursor over the header text; errors quote where parsing stopped. */
typedef struct Cursor {
    const char *p, *end;
    const char *path;
    Err *e;
} Cursor;

static bool bad_header(Cursor *c, const char *what)
{
    int n = (int)(c->end - c->p) < 24 ? (int)(c->end - c->p) : 24;
    err_set(c->e, ERR_INPUT, "%s: malformed .npy header: %s at '%.*s'", c->path, what, n, c->p);
    return false;
}

static void skip_space(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n'))
        c->p++;
}

static bool eat(Cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (all that numpy writes): 'x' or "x". */
static bool parse_string(Cursor *c, const char **s, size_t *n)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return bad_header(c, "expected a string");
    char q = *c->p++;
    const char *close = memchr(c->p, q, (size_t)(c->end - c->p));
    if (!close)
        return bad_header(c, "unterminated string");
    *s = c->p;
    *n = (size_t)(close - c->p);
    c->p = close + 1;
    return true;
}

static bool parse_bool(Cursor *c, bool *out)
{
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        c->p += 4;
        *out = true;
        return true;
    }
    if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        c->p += 5;
        *out = false;
        return true;
    }
    return bad_header(c, "expected True or False");
}

static bool parse_dim(Cursor *c, int64_t *out)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return bad_header(c, "expected a dimension");
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c->p - '0', &v)) {
            err_set(c->e, ERR_INPUT, "%s: shape too large: a dimension overflows 64 bits", c->path);
            return false;
        }
        c->p++;
    }
    if (c->p < c->end && *c->p == 'L') /* Python 2 longs */
        c->p++;
    *out = v;
    return true;
}

/* A shape tuple: (), (3,), (2, 3). */
static bool parse_shape(Cursor *c, NpyHeader *h)
{
    if (!eat(c, '('))
        return bad_header(c, "expected a shape tuple");
    h->rank = 0;
    while (!eat(c, ')')) {
        if (h->rank == COIL_MAX_RANK) {
            err_set(c->e, ERR_INPUT, "%s: shape has more than %d dimensions, coil's maximum rank",
                    c->path, COIL_MAX_RANK);
            return false;
        }
        if (!parse_dim(c, &h->shape[h->rank++]))
            return false;
        if (!eat(c, ',') && !(skip_space(c), c->p < c->end && *c->p == ')'))
            return bad_header(c, "expected ',' or ')' in the shape");
    }
    return true;
}

/* The dtypes coil reads, for error messages: "f32 <f4, f16 <f2, ...". */
static void dtype_list(char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < DT_COUNT && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s %s", i ? ", " : "", dtype_info[i].name,
                                dtype_info[i].npy);
}

/* Match a descr against the table; byte order '<' or '=' (this is a little-endian
 * host), and any order for one-byte types. */
static bool descr_dtype(Cursor *c, const char *s, size_t n, DType *out)
{
    for (int i = 0; n == 3 && i < DT_COUNT; i++) {
        const DTypeInfo *di = &dtype_info[i];
        if (memcmp(s + 1, di->npy + 1, 2) != 0)
            continue;
        if (di->size == 1 || s[0] == '<' || s[0] == '=') {
            *out = (DType)i;
            return true;
        }
        if (s[0] == '>') {
            err_set(c->e, ERR_INPUT, "%s: big-endian data ('%.*s') is not supported; save it "
                    "little-endian (arr.astype('<%.2s'))", c->path, (int)n, s, s + 1);
            return false;
        }
    }
    char list[256];
    dtype_list(list, sizeof list);
    err_set(c->e, ERR_INPUT, "%s: unsupported dtype '%.*s' (coil reads %s)", c->path,
            (int)(n > 32 ? 32 : n), s, list);
    return false;
}

static bool key_is(const char *key, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(key, want, n) == 0;
}

static bool parse_entry(Cursor *c, NpyHeader *h)
{
    const char *key, *s;
    size_t klen, n;
    if (!parse_string(c, &key, &klen))
        return false;
    if (!eat(c, ':'))
        return bad_header(c, "expected ':'");
    if (key_is(key, klen, "descr")) {
        h->has_descr = true;
        return parse_string(c, &s, &n) && descr_dtype(c, s, n, &h->dt);
    }
    if (key_is(key, klen, "fortran_order")) {
        h->has_order = true;
        return parse_bool(c, &h->fortran);
    }
    if (key_is(key, klen, "shape")) {
        h->has_shape = true;
        return parse_shape(c, h);
    }
    c->p = key - 1; /* quote the key with its quote */
    return bad_header(c, "unexpected key");
}

static bool parse_header(const char *text, size_t len, const char *path, NpyHeader *h, Err *e)
{
    Cursor c = {text, text + len, path, e};
    memset(h, 0, sizeof *h);
    if (!eat(&c, '{'))
        return bad_header(&c, "expected '{'");
    while (!eat(&c, '}')) {
        if (!parse_entry(&c, h))
            return false;
        if (!eat(&c, ',') && !(skip_space(&c), c.p < c.end && *c.p == '}'))
            return bad_header(&c, "expected ',' or '}'");
    }
    if (!h->has_descr || !h->has_order || !h->has_shape) {
        err_set(e, ERR_INPUT, "%s: malformed .npy header: it lacks '%s'", path,
                !h->has_descr ? "descr" : !h->has_order ? "fortran_order" : "shape");
        return false;
    }
    if (h->fortran) {
        err_set(e, ERR_INPUT, "%s: Fortran-order arrays are not supported; save a C-order copy "
                "(np.save(path, np.ascontiguousarray(a)))", path);
        return false;
    }
    return true;
}

/* Magic, version and header length; *prefix receives the bytes before the dict. */
static bool read_preamble(FILE *f, const char *path, uint32_t *hlen, long *prefix, Err *e)
{
    unsigned char p[12];
    size_t got = fread(p, 1, 10, f);
    if (got >= NPY_MAGIC_LEN && memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        err_set(e, ERR_INPUT, "%s: not a .npy file (bad magic: it must start with \\x93NUMPY)", path);
        return false;
    }
    if (got < 10) {
        err_set(e, ERR_INPUT, "%s: truncated header: expected at least 10 bytes, found %zu", path, got);
        return false;
    }
    if (p[6] == 1) {
        *hlen = (uint32_t)p[8] | (uint32_t)p[9] << 8;
        *prefix = 10;
        return true;
    }
    if (p[6] != 2 && p[6] != 3) {
        err_set(e, ERR_INPUT, "%s: unsupported .npy format version %d.%d (coil reads 1.0, 2.0, 3.0)",
                path, p[6], p[7]);
        return false;
    }
    got = fread(p + 10, 1, 2, f);
    if (got < 2) {
        err_set(e, ERR_INPUT, "%s: truncated header: expected at least 12 bytes, found %zu", path,
                10 + got);
        return false;
    }
    *hlen = (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    *prefix = 12;
    return true;
}

static bool read_header(FILE *f, const char *path, NpyHeader *h, long *data_at, Err *e)
{
    uint32_t hlen;
    long prefix;
    if (!read_preamble(f, path, &hlen, &prefix, e))
        return false;
    if (hlen > NPY_MAX_HEADER) {
        err_set(e, ERR_INPUT, "%s: .npy header of %u bytes is too large (at most %d)", path, hlen,
                NPY_MAX_HEADER);
        return false;
    }
    char *text = malloc(hlen ? hlen : 1);
    if (!text) {
        err_set(e, ERR_MEMORY, "%s: out of memory reading the header", path);
        return false;
    }
    size_t got = fread(text, 1, hlen, f);
    bool ok = got == hlen;
    if (!ok)
        err_set(e, ERR_INPUT, "%s: truncated header: expected %u bytes, found %zu", path, hlen, got);
    ok = ok && parse_header(text, hlen, path, h, e);
    free(text);
    *data_at = prefix + (long)hlen;
    return ok;
}

/* Compare the data's size with what the shape needs before allocating anything, so a
 * lying header cannot make us allocate terabytes. */
static bool check_data_size(const char *path, const NpyHeader *h, int64_t have, Err *e)
{
    int64_t need = dtype_info[h->dt].size;
    for (int i = 0; i < h->rank; i++)
        if (__builtin_mul_overflow(need, h->shape[i], &need)) {
            err_set(e, ERR_INPUT, "%s: shape too large: its size overflows 64 bits", path);
            return false;
        }
    Tensor shape = {.dt = h->dt, .rank = h->rank};
    memcpy(shape.shape, h->shape, sizeof h->shape);
    char ty[256];
    tensor_fmt(&shape, ty, sizeof ty);
    if (have < need) {
        err_set(e, ERR_INPUT, "%s: truncated data: %s needs %lld bytes, found %lld", path, ty,
                (long long)need, (long long)have);
        return false;
    }
    if (have > need) {
        err_set(e, ERR_INPUT, "%s: %lld unexpected bytes after the data of %s (%lld bytes)", path,
                (long long)(have - need), ty, (long long)need);
        return false;
    }
    return true;
}

bool npy_read(const char *path, Tensor *t, Err *e)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(e, ERR_FILE, "%s: cannot open: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    NpyHeader h;
    long data_at = 0;
    bool ok = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    if (!ok)
        err_set(e, ERR_INPUT, "%s: not a regular file", path);
    ok = ok && read_header(f, path, &h, &data_at, e);
    ok = ok && check_data_size(path, &h, (int64_t)st.st_size - data_at, e);
    ok = ok && tensor_alloc(t, h.dt, h.rank, h.shape, e);
    if (ok && fread(t->data, 1, tensor_nbytes(t), f) != tensor_nbytes(t)) {
        err_set(e, ERR_INPUT, "%s: read failed: %s", path, ferror(f) ? strerror(errno) : "short read");
        ok = false;
    }
    fclose(f);
    if (!ok)
        tensor_free(t);
    return ok;
}

/* The version 1.0 header: dict, spaces, '\n', padded so the data starts 64-aligned.
 * Rank <= 8 keeps it far below the 64 KiB a 1.0 header can hold. */
static size_t format_header(const Tensor *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                  dtype_info[t->dt].npy);
    for (int i = 0; i < t->rank; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    len += (size_t)snprintf(buf + len, n - len, "%s), }", t->rank == 1 ? "," : "");
    while ((10 + len + 1) % NPY_ALIGN != 0)
        buf[len++] = ' ';
    buf[len++] = '\n';
    return len;
}

bool npy_write(const char *path, const Tensor *t, Err *e)
{
    char header[512];
    size_t hlen = format_header(t, header, sizeof header);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    /* through a temporary: a full disk leaves no truncated .npy that a later read would
     * take for the output */
    AtomicFile af;
    if (!atomic_open(&af, path, e))
        return false;
    size_t nbytes = tensor_nbytes(t);
    bool ok = fwrite(pre, 1, sizeof pre, af.f) == sizeof pre &&
              fwrite(header, 1, hlen, af.f) == hlen && fwrite(t->data, 1, nbytes, af.f) == nbytes;
    return atomic_close(&af, ok, e);
}
