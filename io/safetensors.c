/* safetensors.c — the safetensors weight format: a validating reader (files come from
 * anywhere, so every offset is checked before use), a writer, and binding by parameter name
 * (exact, or rounding F32 tensors to a retyped model's f16/bf16 parameters).
 * Tensor bytes are little-endian in the file and copied as they are (coil hosts are LE). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/sha256.h"
#include "io/safetensors.h"

static const char *const st_dtype[DT_COUNT] = {
    [DT_F32] = "F32", [DT_F16] = "F16", [DT_BF16] = "BF16", [DT_I8] = "I8",
    [DT_I32] = "I32", [DT_I64] = "I64", [DT_BOOL] = "BOOL",
};

const char *safetensors_dtype_name(DType dt) { return (unsigned)dt < DT_COUNT ? st_dtype[dt] : "?"; }

bool safetensors_dtype_parse(const char *s, DType *dt)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(st_dtype[i], s) == 0)
            return *dt = (DType)i, true;
    return false;
}

void safetensors_free(StFile *f)
{
    if (!f)
        return;
    arena_free(f->arena);
    free(f->bytes);
    memset(f, 0, sizeof *f);
}

const StEntry *safetensors_find(const StFile *f, const char *name)
{
    for (int i = 0; i < f->nentry; i++)
        if (strcmp(f->entry[i].name, name) == 0)
            return &f->entry[i];
    return NULL;
}

/* ---------------------------------------------------------------- the header */

/* A JSON array of non-negative integers into out[0..max); its length or -1 with e set. */
static int read_uints(const Json *v, int64_t *out, int max, const char *what, const char *tensor,
                      const char *field, Err *e)
{
    if (!v || v->kind != JSON_ARRAY) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': \"%s\" must be an array of integers", what, tensor, field);
        return -1;
    }
    if (v->n > max) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': \"%s\" has %d entries, at most %d are supported",
                what, tensor, field, v->n, max);
        return -1;
    }
    for (int i = 0; i < v->n; i++) {
        if (v->item[i].kind != JSON_NUMBER || !v->item[i].is_int || v->item[i].i < 0) {
            err_set(e, ERR_INPUT, "%s: tensor '%s': \"%s\"[%d] must be a non-negative integer", what,
                    tensor, field, i);
            return -1;
        }
        out[i] = v->item[i].i;
    }
    return v->n;
}

static bool check_fields(const Json *obj, const char *what, const char *tensor, Err *e)
{
    static const char *const known[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < obj->n; i++) {
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= strcmp(obj->key[i], known[k]) == 0;
        if (!ok) {
            err_set(e, ERR_INPUT, "%s: tensor '%s': unknown field \"%s\" (expected dtype, shape, data_offsets)",
                    what, tensor, obj->key[i]);
            return false;
        }
    }
    return true;
}

static bool read_dtype(const Json *v, StEntry *en, const char *what, Err *e)
{
    if (!v || v->kind != JSON_STRING) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': \"dtype\" must be a string", what, en->name);
        return false;
    }
    if (!safetensors_dtype_parse(v->s, &en->dt)) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': dtype %.32s is not supported (coil reads F32, F16, BF16, "
                "I8, I32, I64, BOOL); convert the file", what, en->name, v->s);
        return false;
    }
    return true;
}

/* Bytes a shape of this dtype needs, or false on overflow. */
static bool shape_bytes(const StEntry *en, uint64_t *bytes)
{
    uint64_t n = (uint64_t)dtype_info[en->dt].size;
    for (int i = 0; i < en->rank; i++)
        if (__builtin_mul_overflow(n, (uint64_t)en->shape[i], &n))
            return false;
    *bytes = n;
    return true;
}

static bool read_entry(const char *name, const Json *v, uint64_t ndata, StEntry *en, const char *what,
                       Err *e)
{
    int64_t off[2];
    uint64_t need = 0;
    en->name = name;
    if (v->kind != JSON_OBJECT) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': expected an object, found a %s", what, name,
                json_kind_name(v->kind));
        return false;
    }
    if (!check_fields(v, what, name, e) || !read_dtype(json_get(v, "dtype"), en, what, e))
        return false;
    if ((en->rank = read_uints(json_get(v, "shape"), en->shape, COIL_MAX_RANK, what, name, "shape", e)) < 0)
        return false;
    int noff = read_uints(json_get(v, "data_offsets"), off, 2, what, name, "data_offsets", e);
    if (noff < 0)
        return false;
    if (noff != 2 || off[0] > off[1]) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': \"data_offsets\" must be [begin, end] with begin <= end",
                what, name);
        return false;
    }
    en->begin = (uint64_t)off[0];
    en->end = (uint64_t)off[1];
    if (en->end > ndata) {
        err_set(e, ERR_INPUT, "%s: tensor '%s': data_offsets [%llu, %llu] run past the data (%llu bytes): "
                "the file is truncated or corrupt", what, name, (unsigned long long)en->begin,
                (unsigned long long)en->end, (unsigned long long)ndata);
        return false;
    }
    if (!shape_bytes(en, &need) || need != en->end - en->begin) {
        char buf[256];
        Tensor t = {.dt = en->dt, .rank = en->rank};
        memcpy(t.shape, en->shape, sizeof t.shape);
        err_set(e, ERR_INPUT, "%s: tensor '%s': shape %s needs %llu bytes but data_offsets span %llu", what,
                name, tensor_fmt(&t, buf, sizeof buf), (unsigned long long)need,
                (unsigned long long)(en->end - en->begin));
        return false;
    }
    return true;
}

static bool read_metadata(const Json *v, StFile *f, const char *what, Err *e)
{
    if (v->kind != JSON_OBJECT) {
        err_set(e, ERR_INPUT, "%s: \"__metadata__\" must be an object of strings", what);
        return false;
    }
    f->nmeta = v->n;
    f->meta_key = v->key;
    f->meta_value = arena_alloc(f->arena, (size_t)(v->n ? v->n : 1) * sizeof *f->meta_value);
    for (int i = 0; i < v->n; i++) {
        if (v->item[i].kind != JSON_STRING) {
            err_set(e, ERR_INPUT, "%s: \"__metadata__\": value of \"%s\" must be a string", what, v->key[i]);
            return false;
        }
        f->meta_value[i] = v->item[i].s;
    }
    return true;
}

/* ---------------------------------------------------------------- the data section */

static int cmp_begin(const void *a, const void *b)
{
    const StEntry *x = *(StEntry *const *)a, *y = *(StEntry *const *)b;
    return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

/* The tensors must tile the data section exactly: no overlap (two names for one byte),
 * no holes (bytes no tensor owns), as the reference implementation demands. */
static bool check_tiling(const StFile *f, const char *what, Err *e)
{
    StEntry **order = malloc((size_t)(f->nentry ? f->nentry : 1) * sizeof *order);
    if (!order) {
        err_set(e, ERR_MEMORY, "%s: out of memory", what);
        return false;
    }
    for (int i = 0; i < f->nentry; i++)
        order[i] = &f->entry[i];
    qsort(order, (size_t)f->nentry, sizeof *order, cmp_begin);
    uint64_t at = 0;
    bool ok = true;
    for (int i = 0; ok && i < f->nentry; i++) {
        if (order[i]->begin < at)
            ok = (err_set(e, ERR_INPUT, "%s: tensors '%s' and '%s' overlap in the data (bytes %llu..%llu)",
                          what, order[i - 1]->name, order[i]->name, (unsigned long long)order[i]->begin,
                          (unsigned long long)at), false);
        else if (order[i]->begin > at)
            ok = (err_set(e, ERR_INPUT, "%s: bytes %llu..%llu of the data belong to no tensor (before '%s')",
                          what, (unsigned long long)at, (unsigned long long)order[i]->begin,
                          order[i]->name), false);
        at = order[i]->end;
    }
    if (ok && at != f->ndata)
        ok = (err_set(e, ERR_INPUT, "%s: the last %llu bytes of the data belong to no tensor", what,
                      (unsigned long long)(f->ndata - at)), false);
    free(order);
    return ok;
}

static bool read_header(StFile *f, const char *text, size_t len, const char *what, Err *e)
{
    char hwhat[512];
    snprintf(hwhat, sizeof hwhat, "%s: header", what);
    if (len == 0 || text[0] != '{') {
        err_set(e, ERR_INPUT, "%s: the header is not a JSON object: not a safetensors file?", what);
        return false;
    }
    const Json *root = json_parse(f->arena, text, len, hwhat, e);
    if (!root)
        return false;
    f->entry = arena_alloc(f->arena, (size_t)(root->n ? root->n : 1) * sizeof *f->entry);
    for (int i = 0; i < root->n; i++) {
        bool ok = strcmp(root->key[i], "__metadata__") == 0
                      ? read_metadata(&root->item[i], f, what, e)
                      : read_entry(root->key[i], &root->item[i], f->ndata, &f->entry[f->nentry++], what, e);
        if (!ok)
            return false;
    }
    return check_tiling(f, what, e);
}

bool safetensors_parse(uint8_t *bytes, size_t n, const char *what, StFile *f, Err *e)
{
    memset(f, 0, sizeof *f);
    f->bytes = bytes;
    f->nbytes = n;
    f->arena = arena_new();
    uint64_t hlen = 0;
    for (int i = 7; n >= 8 && i >= 0; i--)
        hlen = hlen << 8 | bytes[i];
    bool ok = false;
    if (!f->arena)
        err_set(e, ERR_MEMORY, "%s: out of memory", what);
    else if (n < 8)
        err_set(e, ERR_INPUT, "%s: %zu bytes is too short for a safetensors file (8-byte header length)",
                what, n);
    else if (hlen > n - 8)
        err_set(e, ERR_INPUT, "%s: header length %llu runs past the end of the file (%zu bytes): "
                "truncated, or not a safetensors file", what, (unsigned long long)hlen, n);
    else if (hlen > SAFETENSORS_MAX_HEADER)
        err_set(e, ERR_INPUT, "%s: header length %llu exceeds the %u-byte limit", what,
                (unsigned long long)hlen, SAFETENSORS_MAX_HEADER);
    else {
        f->data = bytes + 8 + hlen;
        f->ndata = n - 8 - hlen;
        ok = read_header(f, (const char *)bytes + 8, (size_t)hlen, what, e);
    }
    if (!ok)
        safetensors_free(f);
    return ok;
}

bool safetensors_read(const char *path, StFile *f, Err *e)
{
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    struct stat st;
    if (!fp || fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        err_set(e, ERR_FILE, "%s: cannot open the weights file (%s)", path,
                fp ? "not a regular file" : "missing or unreadable");
        if (fp)
            fclose(fp);
        return false;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *bytes = malloc(n ? n : 1);
    bool ok = bytes && fread(bytes, 1, n, fp) == n;
    fclose(fp);
    if (!ok) {
        free(bytes);
        err_set(e, ERR_MEMORY, "%s: cannot read %zu bytes (%s)", path, n, bytes ? "read error" : "out of memory");
        return false;
    }
    return safetensors_parse(bytes, n, path, f, e);
}

bool safetensors_tensor(const StFile *f, const StEntry *en, Tensor *out, Err *e)
{
    if (!tensor_alloc(out, en->dt, en->rank, en->shape, e))
        return false;
    memcpy(out->data, f->data + en->begin, (size_t)(en->end - en->begin));
    return true;
}

/* ---------------------------------------------------------------- binding */

/* A growing message: the list of every problem, cut to what an Err can hold. */
typedef struct Msg {
    char s[sizeof(((Err *)0)->msg)];
    size_t n;
} Msg;

__attribute__((format(printf, 2, 3))) static void msg_add(Msg *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (m->n < sizeof m->s) {
        int k = vsnprintf(m->s + m->n, sizeof m->s - m->n, fmt, ap);
        m->n += k > 0 ? (size_t)k : 0;
    }
    va_end(ap);
}

/* Characters of names one list may take: the missing and the unexpected lists both fit in
 * an Err, with room left for shape mismatches. */
enum { LIST_BUDGET = 380 };

static void msg_list(Msg *m, const char *title, const char *const *names, int n)
{
    if (!n)
        return;
    msg_add(m, "\n  %s (%d):", title, n);
    size_t used = 0;
    int shown = 0;
    for (; shown < n && (shown == 0 || used + strlen(names[shown]) < LIST_BUDGET); shown++) {
        msg_add(m, " %s%s", names[shown], shown + 1 < n ? "," : "");
        used += strlen(names[shown]) + 2;
    }
    if (shown < n)
        msg_add(m, " ... and %d more", n - shown);
}

/* Whether an entry of dtype have binds a parameter of dtype want: the same, or with
 * rounding allowed an F32 tensor for an f16 or bf16 parameter. */
static bool dtype_binds(DType want, DType have, bool round_f32)
{
    return want == have || (round_f32 && have == DT_F32 && (want == DT_F16 || want == DT_BF16));
}

/* Check one entry against the param node it binds; a mismatch is added to m. */
static bool entry_matches(const Graph *g, const Node *p, const StEntry *en, bool round_f32, Msg *m)
{
    SymBind none = {0};
    int64_t dims[COIL_MAX_RANK];
    char want[256], got[256];
    bool ok = type_resolve(&p->type, &none, dims) && dtype_binds(p->type.dt, en->dt, round_f32) &&
              p->type.rank == en->rank;
    for (int d = 0; ok && d < en->rank; d++)
        ok = dims[d] == en->shape[d];
    if (ok)
        return true;
    Tensor t = {.dt = en->dt, .rank = en->rank};
    memcpy(t.shape, en->shape, sizeof t.shape);
    msg_add(m, "\n  '%s': the model expects %s, the file holds %s (%s)", en->name,
            type_fmt(g, &p->type, want, sizeof want), tensor_fmt(&t, got, sizeof got),
            safetensors_dtype_name(en->dt));
    return false;
}

typedef struct Binding {
    bool round_f32; /* F32 entries bind f16 and bf16 parameters, rounded */
    int nparam;
    const Node *const *param;
    const char **missing, **unexpected;
    int nmissing, nunexpected, nbad;
    bool *used;
} Binding;

static bool binding_alloc(Binding *b, const StFile *f)
{
    size_t np = (size_t)b->nparam + 1, ne = (size_t)f->nentry + 1;
    b->missing = malloc(np * sizeof *b->missing);
    b->unexpected = malloc(ne * sizeof *b->unexpected);
    b->used = calloc(ne, sizeof *b->used);
    return b->missing && b->unexpected && b->used;
}

static void binding_free(Binding *b)
{
    free(b->missing);
    free(b->unexpected);
    free(b->used);
}

/* Match every param to an entry, then list what is left over; problems go to m. */
static void match_names(const Graph *g, const StFile *f, Binding *b, Msg *m)
{
    for (int i = 0; i < b->nparam; i++) {
        const Node *p = b->param[i];
        const StEntry *en = safetensors_find(f, node_name(p));
        if (!en) {
            b->missing[b->nmissing++] = node_name(p);
            continue;
        }
        b->used[en - f->entry] = true;
        b->nbad += !entry_matches(g, p, en, b->round_f32, m);
    }
    for (int i = 0; i < f->nentry; i++)
        if (!b->used[i])
            b->unexpected[b->nunexpected++] = f->entry[i].name;
}

/* An entry's data as a tensor of dtype dt (its own, or f16/bf16 from F32: rounded). */
static bool entry_as(const StFile *f, const StEntry *en, DType dt, Tensor *out, Err *e)
{
    Tensor raw;
    if (!safetensors_tensor(f, en, &raw, e))
        return false;
    if (raw.dt == dt) {
        *out = raw;
        return true;
    }
    bool ok = tensor_alloc(out, dt, raw.rank, raw.shape, e);
    for (int64_t i = 0; ok && i < tensor_numel(&raw); i++)
        dtype_store(dt, out->data, i, dtype_load(raw.dt, raw.data, i));
    tensor_free(&raw);
    return ok;
}

static bool load_params(const StFile *f, const Binding *b, Tensor *params, Err *e)
{
    for (int i = 0; i < b->nparam; i++) {
        const Node *p = b->param[i];
        if (!entry_as(f, safetensors_find(f, node_name(p)), p->type.dt, &params[i], e)) {
            for (int j = 0; j < i; j++)
                tensor_free(&params[j]);
            return false;
        }
    }
    return true;
}

static bool bind(const Graph *g, const Node *const *param, int n, const char *path, bool round_f32,
                 Tensor *params, Err *e)
{
    StFile f;
    if (!safetensors_read(path, &f, e))
        return false;
    Binding b = {.round_f32 = round_f32, .nparam = n, .param = param};
    Msg shapes = {.n = 0};
    bool ok = binding_alloc(&b, &f);
    if (!ok)
        err_set(e, ERR_MEMORY, "%s: out of memory binding parameters", path);
    else
        match_names(g, &f, &b, &shapes);
    if (ok && (b.nmissing || b.nunexpected || b.nbad)) {
        Msg m = {.n = 0};
        msg_add(&m, "%s: the weights do not match the model's %d parameters", path, b.nparam);
        msg_list(&m, "missing from the file", b.missing, b.nmissing);
        msg_list(&m, "in the file but not in the model", b.unexpected, b.nunexpected);
        msg_add(&m, "%s", shapes.s);
        if (b.nbad && round_f32)
            msg_add(&m, "\n  (F32 tensors are rounded to f16 and bf16 parameters; other dtypes "
                    "must match)");
        err_set(e, ERR_INPUT, "%s", m.s);
        ok = false;
    }
    ok = ok && load_params(&f, &b, params, e);
    binding_free(&b);
    safetensors_free(&f);
    return ok;
}

/* g's param nodes, bound (graph_params order). */
static bool bind_graph(const Graph *g, const char *path, bool round_f32, Tensor *params, Err *e)
{
    int n = graph_params(g, NULL), *ids = malloc(((size_t)n + 1) * sizeof *ids);
    const Node **param = malloc(((size_t)n + 1) * sizeof *param);
    bool ok = ids && param;
    if (ok) {
        graph_params(g, ids);
        for (int i = 0; i < n; i++)
            param[i] = &g->node[ids[i]];
        ok = bind(g, param, n, path, round_f32, params, e);
    } else
        err_set(e, ERR_MEMORY, "%s: out of memory binding parameters", path);
    free(ids), free(param);
    return ok;
}

bool safetensors_bind(const Graph *g, const char *path, Tensor *params, Err *e)
{
    return bind_graph(g, path, false, params, e);
}

bool safetensors_bind_rounded(const Graph *g, const char *path, Tensor *params, Err *e)
{
    return bind_graph(g, path, true, params, e);
}

bool safetensors_bind_nodes(const Graph *g, const Node *const *param, int n, const char *path,
                            Tensor *params, Err *e)
{
    return bind(g, param, n, path, false, params, e);
}

/* ---------------------------------------------------------------- writing */

static void write_header_json(FILE *h, const char *const *names, const Tensor *ts, int n,
                              const char *const *mk, const char *const *mv, int nmeta)
{
    fputc('{', h);
    if (nmeta) {
        fputs("\"__metadata__\":{", h);
        for (int i = 0; i < nmeta; i++) {
            fputs(i ? "," : "", h);
            json_write_string(h, mk[i]);
            fputc(':', h);
            json_write_string(h, mv[i]);
        }
        fputc('}', h);
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        fputs(i || nmeta ? "," : "", h);
        json_write_string(h, names[i]);
        fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype[ts[i].dt]);
        for (int d = 0; d < ts[i].rank; d++)
            fprintf(h, "%s%lld", d ? "," : "", (long long)ts[i].shape[d]);
        fprintf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                (unsigned long long)(at + tensor_nbytes(&ts[i])));
        at += tensor_nbytes(&ts[i]);
    }
    fputc('}', h);
}

static bool names_unique(const char *const *names, int n, Err *e)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) {
                err_set(e, ERR_USAGE, "safetensors_write: tensor name '%s' appears twice", names[i]);
                return false;
            }
    return true;
}

/* Header (padded with spaces to 8 bytes, as the reference writer does), then the data. */
static bool write_stream(FILE *out, const char *hdr, size_t hlen, const Tensor *ts, int n)
{
    size_t padded = (hlen + 7) & ~(size_t)7;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    bool ok = fwrite(len8, 1, 8, out) == 8 && fwrite(hdr, 1, hlen, out) == hlen;
    for (size_t i = hlen; ok && i < padded; i++)
        ok = fputc(' ', out) != EOF;
    for (int i = 0; ok && i < n; i++)
        ok = fwrite(ts[i].data, 1, tensor_nbytes(&ts[i]), out) == tensor_nbytes(&ts[i]);
    return ok;
}

/* Header and data through a temporary renamed over path: a crash or a full disk never
 * leaves half a checkpoint under the name. */
bool safetensors_write(const char *path, const char *const *names, const Tensor *tensors, int n,
                       const char *const *meta_key, const char *const *meta_value, int nmeta, Err *e)
{
    if (!names_unique(names, n, e))
        return false;
    char *hdr = NULL;
    size_t hlen = 0;
    FILE *h = open_memstream(&hdr, &hlen);
    if (h) {
        write_header_json(h, names, tensors, n, meta_key, meta_value, nmeta);
        fclose(h);
    }
    AtomicFile af;
    bool ok = hdr && atomic_open(&af, path, e);
    if (ok)
        ok = atomic_close(&af, write_stream(af.f, hdr, hlen, tensors, n), e);
    else if (!hdr)
        err_set(e, ERR_MEMORY, "%s: out of memory writing the header", path);
    free(hdr);
    return ok;
}

/* ---------------------------------------------------------------- digests */

/* One tensor into a digest: name, dtype, shape, then its bytes (lengths first, so no two
 * different files feed the same stream). */
static void digest_tensor(Sha256 *s, const char *name, DType dt, int rank, const int64_t *shape,
                          const void *data, uint64_t nbytes)
{
    char head[64];
    int n = snprintf(head, sizeof head, "tensor %zu:", strlen(name));
    sha256_update(s, head, (size_t)n);
    sha256_update(s, name, strlen(name));
    n = snprintf(head, sizeof head, " %s [", st_dtype[dt]);
    sha256_update(s, head, (size_t)n);
    for (int d = 0; d < rank; d++) {
        n = snprintf(head, sizeof head, "%lld,", (long long)shape[d]);
        sha256_update(s, head, (size_t)n);
    }
    n = snprintf(head, sizeof head, "] %llu\n", (unsigned long long)nbytes);
    sha256_update(s, head, (size_t)n);
    sha256_update(s, data, (size_t)nbytes);
}

static void digest_meta(Sha256 *s, const char *key, const char *value)
{
    char head[64];
    int n = snprintf(head, sizeof head, "meta %zu %zu\n", strlen(key), strlen(value));
    sha256_update(s, head, (size_t)n);
    sha256_update(s, key, strlen(key));
    sha256_update(s, value, strlen(value));
}

void safetensors_digest(const StFile *f, char hex[SHA256_HEX])
{
    Sha256 s;
    sha256_init(&s);
    for (int i = 0; i < f->nentry; i++) {
        const StEntry *en = &f->entry[i];
        digest_tensor(&s, en->name, en->dt, en->rank, en->shape, f->data + en->begin,
                      en->end - en->begin);
    }
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], SAFETENSORS_DIGEST_KEY) != 0)
            digest_meta(&s, f->meta_key[i], f->meta_value[i]);
    sha256_hex(&s, hex);
}

bool safetensors_write_sealed(const char *path, const char *const *names, const Tensor *tensors,
                              int n, const char *const *meta_key, const char *const *meta_value,
                              int nmeta, Err *e)
{
    const char *keys[nmeta + 1], *values[nmeta + 1];
    char hex[SHA256_HEX];
    Sha256 s;
    sha256_init(&s);
    for (int i = 0; i < n; i++)
        digest_tensor(&s, names[i], tensors[i].dt, tensors[i].rank, tensors[i].shape,
                      tensors[i].data, tensor_nbytes(&tensors[i]));
    for (int i = 0; i < nmeta; i++) {
        if (strcmp(meta_key[i], SAFETENSORS_DIGEST_KEY) == 0) {
            err_set(e, ERR_USAGE, "safetensors_write_sealed: metadata key '%s' is the digest's",
                    meta_key[i]);
            return false;
        }
        digest_meta(&s, meta_key[i], meta_value[i]);
        keys[i] = meta_key[i], values[i] = meta_value[i];
    }
    sha256_hex(&s, hex);
    keys[nmeta] = SAFETENSORS_DIGEST_KEY, values[nmeta] = hex;
    return safetensors_write(path, names, tensors, n, keys, values, nmeta + 1, e);
}

const char *safetensors_meta(const StFile *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], key) == 0)
            return f->meta_value[i];
    return NULL;
}
