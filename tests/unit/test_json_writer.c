/* test_json_writer.c — the streaming JSON writer: escaping (quotes, backslashes, control
 * characters, UTF-8 through, bad bytes as U+FFFD), NaN/Inf as null with a sibling flag,
 * nesting and misuse, doubles round-trip exact; each document read back by json_parse. */
#include <stdlib.h>

#include "base/json.h"
#include "check.h"

/* What a writer wrote, as a string (malloc'd), and whether json_writer_done accepted it. */
typedef struct Doc {
    char *text;
    size_t len;
    FILE *f;
    JsonWriter w;
} Doc;

static void doc_open(Doc *d)
{
    d->text = NULL, d->len = 0;
    d->f = open_memstream(&d->text, &d->len);
    json_writer_init(&d->w, d->f);
}

static bool doc_close(Doc *d)
{
    bool ok = json_writer_done(&d->w);
    fclose(d->f);
    return ok;
}

/* Parse d's text; NULL (and the error printed) when the reader refuses it. */
static const Json *read_back(Arena *a, const Doc *d)
{
    Err e = {0};
    const Json *v = json_parse(a, d->text, d->len, "written", &e);
    if (!v)
        fprintf(stderr, "read back: %s\n  text: %s", e.msg, d->text);
    return v;
}

static void test_escaping(void)
{
    static const char tricky[] = "q\"b\\s/ \n\t\r\b\f \x01\x1f \x7f caf\xc3\xa9 \xe2\x82\xac "
                                 "\xf0\x9f\x98\x80";
    Doc d;
    doc_open(&d);
    json_begin_object(&d.w);
    json_field_string(&d.w, "k\"ey\n", tricky);
    json_field_string(&d.w, "bad", "a\xff" "b\xc3" "c\xed\xa0\x80");
    json_field_string(&d.w, "none", NULL);
    json_end_object(&d.w);
    CHECK(doc_close(&d));
    CHECK_STR(d.text, "{\"k\\\"ey\\n\": \"q\\\"b\\\\s/ \\n\\t\\r\\b\\f \\u0001\\u001f \x7f "
                      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", \"bad\": "
                      "\"a\\ufffdb\\ufffdc\\ufffd\\ufffd\\ufffd\", \"none\": null}\n");
    Arena *a = arena_new();
    const Json *v = read_back(a, &d);
    CHECK(v && v->kind == JSON_OBJECT && v->n == 3);
    const Json *s = v ? json_get(v, "k\"ey\n") : NULL;
    CHECK(s && s->kind == JSON_STRING && strcmp(s->s, tricky) == 0);
    const Json *bad = v ? json_get(v, "bad") : NULL;
    CHECK(bad && strcmp(bad->s, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd"
                                "\xef\xbf\xbd") == 0);
    CHECK(v && json_get(v, "none") && json_get(v, "none")->kind == JSON_NULL);
    arena_free(a);
    free(d.text);
}

/* Doubles read back bit-for-bit; integers exactly, to the ends of int64. */
static void test_numbers(void)
{
    const double values[] = {0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 2.0 / 3.0, 1e-310, 5e-324,
                             1.7976931348623157e308, -2.2250738585072014e-308, 123456.789,
                             3e-4, 0.30000000000000004, 1e21, 9007199254740993.0};
    const int n = (int)(sizeof values / sizeof values[0]);
    Doc d;
    doc_open(&d);
    json_begin_object(&d.w);
    json_key(&d.w, "doubles");
    json_begin_array(&d.w);
    for (int i = 0; i < n; i++)
        json_double(&d.w, values[i]);
    json_end_array(&d.w);
    json_field_int(&d.w, "max", INT64_MAX);
    json_field_int(&d.w, "min", INT64_MIN);
    json_field_bool(&d.w, "yes", true);
    json_field_bool(&d.w, "no", false);
    json_end_object(&d.w);
    CHECK(doc_close(&d));
    CHECK(strstr(d.text, "\"doubles\": [0, -0, 1, 0.1, ") != NULL); /* shortest where it can */
    Arena *a = arena_new();
    const Json *v = read_back(a, &d);
    const Json *arr = v ? json_get(v, "doubles") : NULL;
    CHECK(arr && arr->n == n);
    for (int i = 0; arr && i < n && i < arr->n; i++) {
        CHECK(arr->item[i].kind == JSON_NUMBER && arr->item[i].num == values[i]);
        CHECK(signbit(arr->item[i].num) == signbit(values[i]));
    }
    const Json *mx = v ? json_get(v, "max") : NULL, *mn = v ? json_get(v, "min") : NULL;
    CHECK(mx && mx->is_int && mx->i == INT64_MAX);
    CHECK(mn && mn->is_int && mn->i == INT64_MIN);
    CHECK(v && json_get(v, "yes")->b && !json_get(v, "no")->b);
    arena_free(a);
    free(d.text);
}

/* NaN and the infinities: null, and in an object the "<key>_nonfinite" sibling. */
static void test_nonfinite(void)
{
    Doc d;
    doc_open(&d);
    json_begin_object(&d.w);
    json_field_int(&d.w, "step", 7);
    json_field_double(&d.w, "loss", NAN);
    json_field_double(&d.w, "grad_norm", -NAN);
    json_field_double(&d.w, "up", INFINITY);
    json_field_double(&d.w, "down", -INFINITY);
    json_key(&d.w, "list");
    json_begin_array(&d.w);
    json_double(&d.w, 1.5);
    json_double(&d.w, NAN);
    json_end_array(&d.w);
    json_end_object(&d.w);
    CHECK(doc_close(&d));
    CHECK_STR(d.text, "{\"step\": 7, \"loss\": null, \"loss_nonfinite\": \"nan\", "
                      "\"grad_norm\": null, \"grad_norm_nonfinite\": \"nan\", \"up\": null, "
                      "\"up_nonfinite\": \"inf\", \"down\": null, \"down_nonfinite\": \"-inf\", "
                      "\"list\": [1.5, null]}\n");
    Arena *a = arena_new();
    const Json *v = read_back(a, &d);
    CHECK(v && json_get(v, "loss")->kind == JSON_NULL);
    CHECK(v && strcmp(json_get(v, "down_nonfinite")->s, "-inf") == 0);
    arena_free(a);
    free(d.text);
}

/* Containers nest to JSON_MAX_DEPTH (the reader's limit too), one level more fails;
 * json_newline puts items on lines of their own. */
static void test_nesting(void)
{
    enum { PAIRS = (JSON_MAX_DEPTH - 2) / 2 }; /* an array and an object each */
    Doc d;
    doc_open(&d);
    for (int i = 0; i < PAIRS; i++) {
        json_begin_array(&d.w);
        json_begin_object(&d.w);
        json_key(&d.w, "x");
    }
    json_begin_array(&d.w);
    json_newline(&d.w);
    json_int(&d.w, 1);
    json_newline(&d.w);
    json_begin_object(&d.w);
    json_end_object(&d.w);
    json_newline(&d.w);
    json_end_array(&d.w);
    for (int i = 0; i < PAIRS; i++) {
        json_end_object(&d.w);
        json_end_array(&d.w);
    }
    CHECK(doc_close(&d));
    CHECK(strstr(d.text, "[\n1,\n{}\n]") != NULL);
    Arena *a = arena_new();
    CHECK(read_back(a, &d) != NULL);
    arena_free(a);
    free(d.text);

    doc_open(&d);
    for (int i = 0; i <= JSON_MAX_DEPTH; i++)
        json_begin_array(&d.w);
    CHECK(d.w.failed);
    CHECK(!doc_close(&d));
    free(d.text);
}

/* Misuse is refused, not written as broken JSON silently. */
static void value_for_no_key(JsonWriter *w) { json_begin_object(w), json_int(w, 1); }
static void key_in_array(JsonWriter *w) { json_begin_array(w), json_key(w, "k"); }
static void mismatched_end(JsonWriter *w) { json_begin_array(w), json_end_object(w); }
static void left_open(JsonWriter *w) { json_begin_object(w); }
static void two_documents(JsonWriter *w) { json_int(w, 1), json_int(w, 2); }
static void key_left_over(JsonWriter *w) { json_begin_object(w), json_key(w, "k"), json_end_object(w); }
static void nothing(JsonWriter *w) { (void)w; }

static void test_misuse(void)
{
    static const struct {
        const char *what;
        void (*write)(JsonWriter *);
    } cases[] = {{"a value where a key is due", value_for_no_key},
                 {"a key in an array", key_in_array},
                 {"an end that does not match", mismatched_end},
                 {"a container left open", left_open},
                 {"two documents", two_documents},
                 {"a key without its value", key_left_over},
                 {"nothing", nothing}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Doc d;
        doc_open(&d);
        cases[i].write(&d.w);
        if (doc_close(&d)) {
            fprintf(stderr, "accepted %s: %s", cases[i].what, d.text);
            check_failures++;
        }
        free(d.text);
    }
}

/* json_write_string (files written by hand) escapes as the writer does. */
static void test_write_string(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    json_write_string(f, "a\"\\\n\x02\xff");
    fclose(f);
    CHECK_STR(text, "\"a\\\"\\\\\\n\\u0002\\ufffd\"");
    free(text);
}

int main(void)
{
    test_escaping();
    test_numbers();
    test_nonfinite();
    test_nesting();
    test_misuse();
    test_write_string();
    return check_status();
}
