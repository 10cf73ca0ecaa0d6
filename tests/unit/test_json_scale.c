/* test_json_scale.c — the JSON reader at scale: an object of 100,000 keys and a safetensors
 * header of 100,000 tensors parse in linear time, and a duplicate key is still refused by name. */
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

#include "base/json.h"
#include "check.h"
#include "io/safetensors.h"

enum { NKEYS = 100000 };

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A growable string. */
typedef struct Buf {
    char *s;
    size_t n, cap;
} Buf;

static void put(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = 2 * (b->cap + (size_t)k + 64);
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            abort();
    }
}

/* {"key.0": 0, "key.1": 1, ...}, the keys in a scrambled order, and optionally one of
 * them again at the end. */
static char *object_text(int n, const char *again, size_t *len)
{
    Buf b = {0};
    put(&b, "{");
    for (int i = 0; i < n; i++) {
        int k = (int)(((int64_t)i * 7919) % n); /* 7919 is prime: a permutation */
        put(&b, "%s\"key.%d\": %d", i ? ", " : "", k, k);
    }
    if (again)
        put(&b, ", \"%s\": -1", again);
    put(&b, "}");
    *len = b.n;
    return b.s;
}

/* 100,000 keys parse, and every one is found again by json_get, in well under a second
 * each (the reader used to compare each key with all those before it: 43 s). */
static void test_object_100k(void)
{
    size_t len;
    char *text = object_text(NKEYS, NULL, &len);
    Arena *a = arena_new();
    Err e = {0};
    double t0 = now_s();
    const Json *v = json_parse(a, text, len, "big", &e);
    double parse_s = now_s() - t0;
    CHECK(v != NULL && v->kind == JSON_OBJECT && v->n == NKEYS);
    t0 = now_s();
    int found = 0;
    for (int i = 0; v && i < NKEYS; i++) {
        char key[32];
        snprintf(key, sizeof key, "key.%d", i);
        const Json *x = json_get(v, key);
        found += x && x->kind == JSON_NUMBER && x->is_int && x->i == i;
    }
    double get_s = now_s() - t0;
    CHECK(found == NKEYS);
    CHECK(json_get(v, "key.100000") == NULL && json_get(v, "") == NULL);
    printf("json: %d keys (%zu bytes) parsed in %.3f s, all looked up in %.3f s\n", NKEYS, len,
           parse_s, get_s);
    CHECK(parse_s < 1.0 * CHECK_TIME_SCALE);
    CHECK(get_s < 1.0 * CHECK_TIME_SCALE);
    arena_free(a);
    free(text);
}

/* The same object with its first key again at the end: refused, the message naming the
 * key and where its second occurrence starts. */
static void test_duplicate_100k(void)
{
    size_t len;
    char *text = object_text(NKEYS, "key.0", &len);
    Arena *a = arena_new();
    Err e = {0};
    double t0 = now_s();
    CHECK(json_parse(a, text, len, "big", &e) == NULL);
    double s = now_s() - t0;
    char want[128];
    snprintf(want, sizeof want, "big: byte %zu: duplicate key \"key.0\" in object",
             len - strlen("\"key.0\": -1}"));
    CHECK_STR(e.msg, want);
    CHECK(s < 1.0 * CHECK_TIME_SCALE);
    arena_free(a);
    free(text);
}

/* Duplicates in small and nested objects, keys that need escaping or cutting to be shown. */
static void test_duplicate_messages(void)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"{\"a\": 1, \"b\": 2, \"a\": 3}", "t: byte 17: duplicate key \"a\" in object"},
        {"{\"x\": {\"k\": [], \"k\": {}}}", "t: byte 16: duplicate key \"k\" in object"},
        {"{\"x\": 1, \"y\": {\"x\": 2}}", NULL}, /* one key per object: fine */
        {"{\"q\\\"\\n\": 1, \"q\\\"\\n\": 2}",
         "t: byte 13: duplicate key \"q\\\"\\u000a\" in object"},
        {"{\"\": 1, \"\": 2}", "t: byte 8: duplicate key \"\" in object"},
        {"{\"\\u00e9t\\u00e9\": 1, \"\xc3\xa9t\xc3\xa9\": 2}",
         "t: byte 21: duplicate key \"\xc3\xa9t\xc3\xa9\" in object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Arena *a = arena_new();
        Err e = {0};
        const Json *v = json_parse(a, cases[i].text, strlen(cases[i].text), "t", &e);
        if (cases[i].msg) {
            CHECK(v == NULL);
            CHECK_STR(e.msg, cases[i].msg);
        } else {
            CHECK(v != NULL && err_ok(&e));
        }
        arena_free(a);
    }
    /* A key of 300 characters is shown cut, with "...". */
    Buf b = {0};
    char key[301];
    memset(key, 'k', 300);
    key[300] = 0;
    put(&b, "{\"%s\": 1, \"%s\": 2}", key, key);
    Arena *a = arena_new();
    Err e = {0};
    CHECK(json_parse(a, b.s, b.n, "t", &e) == NULL);
    CHECK(strstr(e.msg, "duplicate key \"kkkk") != NULL);
    CHECK(strstr(e.msg, "...\" in object") != NULL);
    CHECK(strlen(e.msg) < 200);
    arena_free(a);
    free(b.s);
}

/* Small objects (no hash table kept) and large ones answer json_get alike. */
static void test_get_sizes(void)
{
    for (int n = 0; n <= 40; n++) {
        size_t len;
        char *text = object_text(n, NULL, &len);
        Arena *a = arena_new();
        Err e = {0};
        const Json *v = json_parse(a, text, len, "t", &e);
        CHECK(v != NULL && v->n == n);
        for (int i = 0; v && i < n; i++) {
            char key[32];
            snprintf(key, sizeof key, "key.%d", i);
            const Json *x = json_get(v, key);
            CHECK(x != NULL && x->i == i);
        }
        CHECK(json_get(v, "key.-1") == NULL);
        arena_free(a);
        free(text);
    }
    Arena *a = arena_new();
    Err e = {0};
    const Json *arr = json_parse(a, "[1, 2]", 6, "t", &e);
    CHECK(arr && json_get(arr, "0") == NULL); /* not an object */
    arena_free(a);
}

/* A safetensors file of 100,000 one-element f32 tensors, built in memory: the header (about
 * 8 MiB of JSON) is read and checked in well under a second. */
static void test_safetensors_100k(void)
{
    Buf h = {0};
    put(&h, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < NKEYS; i++)
        put(&h, ", \"layers.%d.weight\": {\"dtype\": \"F32\", \"shape\": [1], "
                "\"data_offsets\": [%d, %d]}", i, 4 * i, 4 * i + 4);
    put(&h, "}");
    size_t n = 8 + h.n + 4 * (size_t)NKEYS;
    uint8_t *bytes = calloc(n, 1);
    CHECK(bytes != NULL);
    if (!bytes)
        return;
    for (int i = 0; i < 8; i++)
        bytes[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    memcpy(bytes + 8, h.s, h.n);
    for (int i = 0; i < NKEYS; i++) {
        float x = (float)i;
        memcpy(bytes + 8 + h.n + 4 * (size_t)i, &x, 4);
    }
    StFile f;
    Err e = {0};
    double t0 = now_s();
    bool ok = safetensors_parse(bytes, n, "big.safetensors", &f, &e);
    double s = now_s() - t0;
    if (!ok)
        fprintf(stderr, "%s\n", e.msg);
    CHECK(ok && f.nentry == NKEYS && f.nmeta == 1);
    printf("safetensors: %d tensors (header %zu bytes) parsed in %.3f s\n", NKEYS, h.n, s);
    CHECK(s < 1.0 * CHECK_TIME_SCALE);
    if (ok) {
        const StEntry *last = &f.entry[NKEYS - 1];
        Tensor t = {0};
        CHECK_STR(last->name, "layers.99999.weight");
        CHECK(safetensors_tensor(&f, last, &t, &e) && check_at(&t, 0) == 99999.0);
        tensor_free(&t);
        safetensors_free(&f);
    }
    free(h.s);
}

int main(void)
{
    test_object_100k();
    test_duplicate_100k();
    test_duplicate_messages();
    test_get_sizes();
    test_safetensors_100k();
    return check_status();
}
