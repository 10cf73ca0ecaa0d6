/* test_safetensors.c — the safetensors reader against a file written by the reference Python
 * package (tests/models/safetensors/gen.py), binding by name, malformed files, and the writer. */
#include <stdlib.h>
#include <unistd.h>

#include "base/json.h"
#include "check.h"
#include "io/safetensors.h"

#define FIXTURE "tests/models/safetensors/fixture.safetensors"

/* ---------------------------------------------------------------- the reference fixture */

typedef struct Expect {
    const char *name, *shape; /* shape as tensor_fmt prints it */
    int n;
    double v[8];
} Expect;

/* The same numbers as gen.py's TENSORS. */
static const Expect fixture[] = {
    {"layer.weight", "f32[2,3]", 6, {1.5, -2.25, 3.0, 0.1f, 1e-8f, -0.0}},
    {"layer.bias", "f32[3]", 3, {0.5, -1.0, 65504.0}},
    {"half", "f16[4]", 4, {1.0, -0.5, 65504.0, 0x1p-24}},
    {"brain", "bf16[2,2]", 4, {1.0, -2.5, 0.15625, 0x1p127}},
    {"ids", "i64[3]", 3, {1099511627783.0, -5, 0}},
    {"counts", "i32[2,2]", 4, {7, -2147483648.0, 2147483647.0, 0}},
    {"small", "i8[3]", 3, {-128, 0, 127}},
    {"mask", "bool[4]", 4, {1, 0, 0, 1}},
    {"scalar", "f32[1]", 1, {42}},
    {"empty", "f32[0,3]", 0, {0}},
};
enum { NFIXTURE = sizeof fixture / sizeof fixture[0] };

static void test_fixture_values(void)
{
    StFile f;
    Err e = {0};
    if (!safetensors_read(FIXTURE, &f, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        CHECK(0);
        return;
    }
    CHECK(f.nentry == NFIXTURE);
    CHECK(f.nmeta == 2);
    for (int i = 0; i < f.nmeta; i++)
        if (strcmp(f.meta_key[i], "format") == 0)
            CHECK_STR(f.meta_value[i], "pt");
    for (int i = 0; i < NFIXTURE; i++) {
        const StEntry *en = safetensors_find(&f, fixture[i].name);
        Tensor t = {0};
        CHECK(en != NULL);
        if (!en || !safetensors_tensor(&f, en, &t, &e))
            continue;
        CHECK_SHAPE(&t, fixture[i].shape);
        CHECK_VALUES(&t, fixture[i].v, fixture[i].n, 0);
        tensor_free(&t);
    }
    CHECK(safetensors_find(&f, "nope") == NULL);
    safetensors_free(&f);
}

/* ---------------------------------------------------------------- binding */

/* A graph whose params are the given names and types ("f32[2,3]" style, static). */
static Graph *params_graph(int n, const char *const *names, const Type *types)
{
    Err e = {0};
    Graph *g = graph_new("bind");
    Builder b = builder_make(g, &e);
    int64_t one = 1;
    Type t1 = type_make(DT_F32, 1, &one);
    int x = b_input(&b, "x", &t1);
    b_output(&b, x, NULL);
    for (int i = 0; i < n; i++)
        b_param(&b, names[i], &types[i], "zeros");
    if (!err_ok(&e)) {
        fprintf(stderr, "params_graph: %s\n", e.msg);
        CHECK(0);
    }
    return g;
}

static Type ty(DType dt, int rank, int64_t d0, int64_t d1)
{
    int64_t dims[2] = {d0, d1};
    return type_make(dt, rank, dims);
}

static void test_bind_all(void)
{
    const char *names[NFIXTURE];
    Type types[NFIXTURE] = {
        ty(DT_F32, 2, 2, 3), ty(DT_F32, 1, 3, 0), ty(DT_F16, 1, 4, 0), ty(DT_BF16, 2, 2, 2),
        ty(DT_I64, 1, 3, 0), ty(DT_I32, 2, 2, 2), ty(DT_I8, 1, 3, 0),  ty(DT_BOOL, 1, 4, 0),
        ty(DT_F32, 1, 1, 0), ty(DT_F32, 2, 0, 3),
    };
    /* In reverse file order: binding goes by name, not position. */
    for (int i = 0; i < NFIXTURE; i++)
        names[i] = fixture[i].name;
    Graph *g = params_graph(NFIXTURE, names, types);
    Tensor p[NFIXTURE];
    Err e = {0};
    bool ok = safetensors_bind(g, FIXTURE, p, &e);
    if (!ok)
        fprintf(stderr, "%s\n", e.msg);
    CHECK(ok);
    for (int i = 0; ok && i < NFIXTURE; i++) {
        CHECK_SHAPE(&p[i], fixture[i].shape);
        CHECK_VALUES(&p[i], fixture[i].v, fixture[i].n, 0);
        tensor_free(&p[i]);
    }
    graph_free(g);
}

static bool contains(const char *s, const char *part)
{
    if (strstr(s, part))
        return true;
    fprintf(stderr, "message lacks \"%s\":\n%s\n", part, s);
    return false;
}

/* Binding g to the fixture fails with a message holding each of parts. */
static void expect_bind_error(Graph *g, const char *const *parts, int nparts)
{
    Tensor p[NFIXTURE + 4];
    Err e = {0};
    CHECK(!safetensors_bind(g, FIXTURE, p, &e));
    CHECK(e.code == ERR_INPUT);
    for (int i = 0; i < nparts; i++)
        CHECK(contains(e.msg, parts[i]));
    graph_free(g);
}

static void test_bind_errors(void)
{
    const char *names[] = {"layer.weight", "layer.bias", "head.weight", "head.bias"};
    Type types[] = {ty(DT_F32, 2, 3, 2), ty(DT_F16, 1, 3, 0), ty(DT_F32, 1, 3, 0), ty(DT_F32, 1, 3, 0)};
    const char *want[] = {
        "missing from the file (2): head.weight, head.bias",
        "in the file but not in the model (8):",
        "ids", "empty", "scalar", "counts", "brain", "half", "small", "mask",
        "'layer.weight': the model expects f32[3,2], the file holds f32[2,3]",
        "'layer.bias': the model expects f16[3], the file holds f32[3]",
    };
    expect_bind_error(params_graph(4, names, types), want, sizeof want / sizeof want[0]);

    /* A long list is cut to what an Err holds, and says how many it left out. */
    enum { MANY = 60 };
    char many_names[MANY][32];
    const char *many[MANY];
    Type many_types[MANY];
    for (int i = 0; i < MANY; i++) {
        snprintf(many_names[i], sizeof many_names[i], "encoder.layers.%d.weight", i);
        many[i] = many_names[i];
        many_types[i] = ty(DT_F32, 1, 1, 0);
    }
    const char *want_many[] = {"missing from the file (60): encoder.layers.0.weight, encoder.layers.1.weight,",
                               " more\n  in the file but not in the model (10):"};
    expect_bind_error(params_graph(MANY, many, many_types), want_many, 2);

    const char *missing_file[] = {"cannot open"};
    Tensor p[1];
    Err e = {0};
    Graph *g = params_graph(0, NULL, NULL);
    CHECK(!safetensors_bind(g, "tests/models/safetensors/no-such-file", p, &e));
    CHECK(contains(e.msg, missing_file[0]));
    graph_free(g);
}

/* ---------------------------------------------------------------- malformed files */

/* A file image: 8-byte length (hlen, or strlen(header) when hlen < 0), header, ndata bytes. */
static bool parse_image(const char *header, long long hlen, size_t ndata, Err *e)
{
    size_t h = strlen(header), n = 8 + h + ndata;
    uint64_t len = hlen < 0 ? h : (uint64_t)hlen;
    uint8_t *bytes = calloc(n, 1);
    for (int i = 0; i < 8; i++)
        bytes[i] = (uint8_t)(len >> (8 * i));
    memcpy(bytes + 8, header, h);
    StFile f;
    bool ok = safetensors_parse(bytes, n, "bad.safetensors", &f, e);
    safetensors_free(&f);
    return ok;
}

typedef struct Bad {
    const char *header;
    long long hlen; /* -1: the header's length */
    size_t ndata;
    const char *error;
} Bad;

static const Bad bad_files[] = {
    {"{}", 1000, 0, "header length 1000 runs past the end of the file"},
    {"{}", (long long)1 << 62, 0, "runs past the end"},
    {"[1]", -1, 0, "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",}}", -1, 0, "header: byte 20: expected a string key"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", -1, 4, "expected ',' or '}'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", -1, 4, "unexpected text after"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 4, "run past the data (4 bytes)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", -1, 4, "shape f32[2] needs 8 bytes but data_offsets span 4"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
     -1, 6, "tensors 'a' and 'b' overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, "bytes 0..4 of the data belong to no tensor"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 9, "the last 5 bytes"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8, "tensor 'a': dtype F64 is not supported"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,4]}}", -1, 4, "needs 0 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 4, "\"shape\"[0] must be a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", -1, 4, "\"shape\"[0] must be a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", -1, 4, "has 9 entries, at most 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", -1, 4, "begin <= end"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, 4, "\"data_offsets\" must be an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", -1, 4, "unknown field \"x\""},
    {"{\"a\":3}", -1, 0, "tensor 'a': expected an object, found a number"},
    {"{\"__metadata__\":{\"k\":1}}", -1, 0, "value of \"k\" must be a string"},
    {"{\"a\":{},\"a\":{}}", -1, 0, "duplicate key"},
    {"{\"\xff\":{}}", -1, 0, "invalid UTF-8"},
    {"{\"\\ud800\":{}}", -1, 0, "high surrogate without its low half"},
    {"{\"\\u0000\":{}}", -1, 0, "\\u0000 is not allowed"},
    {"{\"a\":tru}", -1, 0, "invalid literal"},
    {"{\"a\":01}", -1, 0, "expected ',' or '}'"},
    {"{\"a", -1, 0, "unterminated string"},
    {"", -1, 0, "not a JSON object"},
};

static void test_malformed(void)
{
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        Err e = {0};
        const Bad *b = &bad_files[i];
        CHECK(!parse_image(b->header, b->hlen, b->ndata, &e));
        if (!contains(e.msg, b->error)) {
            fprintf(stderr, "  (case %zu: %s)\n", i, b->header);
            check_failures++;
        }
        CHECK(strncmp(e.msg, "bad.safetensors: ", 17) == 0 || strstr(e.msg, "bad.safetensors"));
    }
    Err e = {0};
    StFile f;
    CHECK(!safetensors_parse(calloc(4, 1), 4, "bad.safetensors", &f, &e));
    CHECK(contains(e.msg, "4 bytes is too short"));
    /* Deep nesting is refused, not recursed into. */
    char deep[400] = "{\"a\":";
    for (int i = 0; i < 100; i++)
        strcat(deep, "[");
    e = (Err){0};
    CHECK(!parse_image(deep, -1, 0, &e));
    CHECK(contains(e.msg, "nesting too deep"));
}

/* Every truncation and many one-byte corruptions of a real file: an error or success, never
 * a crash (run under ASan/the fuzzer for the memory side). */
static void test_corruption_sweep(void)
{
    FILE *fp = fopen(FIXTURE, "rb");
    uint8_t orig[4096];
    size_t n = fp ? fread(orig, 1, sizeof orig, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(n > 100);
    static const uint8_t subst[] = {0x00, 0xff, '"', '{', '}', '[', ']', ',', ':', '9', '\\', ' '};
    int failures = 0, runs = 0;
    for (size_t cut = 0; cut <= n; cut++) {
        for (size_t k = 0; k <= sizeof subst; k++) {
            if (k && cut >= n)
                break;
            uint8_t *bytes = malloc(n ? n : 1);
            memcpy(bytes, orig, n);
            size_t len = k ? n : cut; /* k == 0: truncate at cut; else substitute byte cut */
            if (k)
                bytes[cut] = subst[k - 1];
            Err e = {0};
            StFile f;
            bool ok = safetensors_parse(bytes, len, "sweep", &f, &e);
            failures += !ok && e.msg[0] == 0; /* a failure must say why */
            failures += ok && k == 0 && len != n; /* a truncated file can never parse */
            safetensors_free(&f);
            runs++;
        }
    }
    CHECK(failures == 0);
    CHECK(runs > 1000);
}

/* ---------------------------------------------------------------- JSON details */

static void test_json(void)
{
    Arena *a = arena_new();
    Err e = {0};
    const char *text = " {\"caf\\u00e9 \\ud83d\\ude00\": [1, -0, 2.5e1, 9223372036854775807, "
                       "9223372036854775808, \"\\\"\\\\\\/\\b\\f\\n\\r\\t\", true, null]} ";
    const Json *v = json_parse(a, text, strlen(text), "t", &e);
    CHECK(v && v->kind == JSON_OBJECT && v->n == 1);
    if (v && v->n == 1) {
        CHECK_STR(v->key[0], "caf\xc3\xa9 \xf0\x9f\x98\x80");
        const Json *arr = &v->item[0];
        CHECK(arr->kind == JSON_ARRAY && arr->n == 8);
        CHECK(arr->item[0].is_int && arr->item[0].i == 1);
        CHECK(arr->item[2].kind == JSON_NUMBER && !arr->item[2].is_int && arr->item[2].num == 25);
        CHECK(arr->item[3].is_int && arr->item[3].i == INT64_MAX);
        CHECK(!arr->item[4].is_int); /* 2^63 does not fit */
        CHECK_STR(arr->item[5].s, "\"\\/\b\f\n\r\t");
        CHECK(arr->item[6].kind == JSON_BOOL && arr->item[6].b);
        CHECK(arr->item[7].kind == JSON_NULL);
    }
    const char *bad[] = {"[1,]", "{\"a\" 1}", "[\"\t\"]", "1.", "-", "[1e]", "\"\\x\"", "[] []", "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (Err){0};
        CHECK(json_parse(a, bad[i], strlen(bad[i]), "t", &e) == NULL);
        CHECK(e.msg[0] != 0);
    }
    arena_free(a);
}

/* ---------------------------------------------------------------- writing */

static void test_write_roundtrip(void)
{
    char path[] = "/tmp/coil-st-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    double v6[6] = {1, -2, 3.5, 1e-3, 0, 7}, v4[4] = {1, 0, 1, 1}, v1[1] = {-3.25};
    Tensor ts[4] = {
        check_tensor(DT_F32, 2, s23, v6), check_tensor(DT_BF16, 1, s4, v6),
        check_tensor(DT_BOOL, 1, s4, v4), check_tensor(DT_F32, 0, NULL, v1),
    };
    const char *names[4] = {"a.weight", "quote\"name", "mask", "scalar"};
    const char *mk[1] = {"step"}, *mv[1] = {"12"};
    Err e = {0};
    CHECK(safetensors_write(path, names, ts, 4, mk, mv, 1, &e));
    StFile f;
    CHECK(safetensors_read(path, &f, &e));
    CHECK(f.nentry == 4 && f.nmeta == 1 && (8 + (f.data - f.bytes - 8)) % 8 == 0);
    for (int i = 0; i < 4 && f.nentry == 4; i++) {
        const StEntry *en = safetensors_find(&f, names[i]);
        Tensor t = {0};
        CHECK(en && safetensors_tensor(&f, en, &t, &e));
        CHECK(t.data && t.rank == ts[i].rank && memcmp(t.data, ts[i].data, tensor_nbytes(&ts[i])) == 0);
        tensor_free(&t);
    }
    safetensors_free(&f);
    const char *dup[2] = {"x", "x"};
    CHECK(!safetensors_write(path, dup, ts, 2, NULL, NULL, 0, &e));
    CHECK(contains(e.msg, "'x' appears twice"));
    for (int i = 0; i < 4; i++)
        tensor_free(&ts[i]);
    unlink(path);
}

int main(void)
{
    test_fixture_values();
    test_bind_all();
    test_bind_errors();
    test_malformed();
    test_corruption_sweep();
    test_json();
    test_write_roundtrip();
    return check_status();
}
