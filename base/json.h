/* json.h — JSON both ways: a small strict reader (RFC 8259) for the files coil reads
 * (safetensors headers, caches, manifests), the document in an arena freed as a whole; and
 * the one streaming writer every `--json` output and trace file goes through. */
#ifndef COIL_RUNTIME_JSON_H
#define COIL_RUNTIME_JSON_H

#include <stdio.h>

#include "base/base.h"

typedef enum JsonKind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonKind;

typedef struct Json Json;
struct Json {
    JsonKind kind;
    size_t at;       /* byte offset of the value in the text, for messages */
    bool b;          /* JSON_BOOL */
    double num;      /* JSON_NUMBER */
    bool is_int;     /* a number written without fraction or exponent that fits int64 */
    int64_t i;       /* its value when is_int */
    const char *s;   /* JSON_STRING: UTF-8, NUL-terminated (\u0000 is rejected) */
    size_t slen;
    int n;           /* JSON_ARRAY, JSON_OBJECT: number of items */
    Json *item;      /* the items (object values) */
    const char **key;/* JSON_OBJECT: item i's key */
    const int *slot; /* JSON_OBJECT of more than a few items: a hash table of item indices
                        by key (-1 empty; nslot a power of two), so json_get takes a probe
                        or a few; NULL (nslot 0) for a small object, searched in place */
    int nslot;
};

enum { JSON_MAX_DEPTH = 64 };

/* Parse exactly one JSON value (surrounded by optional whitespace) from text[0..len).
 * Strict: no comments, no trailing commas, no duplicate object keys (the error names the
 * key), valid UTF-8. Linear in the text: an object's keys are checked through a hash table.
 * what names the text in errors ("model.safetensors: header"). NULL on failure. */
Json *json_parse(Arena *a, const char *text, size_t len, const char *what, Err *e);
/* An object's member by key, or NULL (a hash lookup: constant time for any size). */
const Json *json_get(const Json *obj, const char *key);
/* The kind's name for messages ("string", "array"). */
const char *json_kind_name(JsonKind k);
/* Write s as a JSON string literal into f, escaped as JsonWriter escapes strings (for
 * files written by hand: packages' manifests, safetensors headers, the autotune cache). */
void json_write_string(FILE *f, const char *s);

/* ---------------------------------------------------------------- writing */

/* A streaming writer: each value goes to f as it is given (constant memory for output of
 * any size), with ", " and ": " between items, so every document it writes is valid JSON
 * whatever the values:
 * - strings: '"', '\\' and control characters escaped (\n \t \r \b \f, others \u00XX);
 *   UTF-8 passes through as it is; a byte that is not part of valid UTF-8 becomes U+FFFD;
 *   NULL is written as null.
 * - integers exactly; doubles in the fewest of 15, 16 or 17 significant digits that read
 *   back as the same double (round-trip exact).
 * - NON-FINITE DOUBLES (NaN, +-Inf: a diverging loss) have no JSON form. The convention:
 *   such a value is written as null and, when it is an object member, a sibling member
 *   "<key>_nonfinite" follows with "nan", "inf" or "-inf":
 *       {"grad_norm": null, "grad_norm_nonfinite": "nan"}
 *   A reader that wants the value back checks the sibling; one that does not sees null.
 *   In an array a non-finite element is null alone.
 * Misuse (a value where a key is due, a key outside an object, ends that do not match,
 * nesting deeper than JSON_MAX_DEPTH) marks the writer failed; json_writer_done says so. */
typedef struct JsonWriter {
    FILE *f;
    int depth;            /* open containers */
    uint64_t is_object;   /* bit d: container d is an object (else an array) */
    uint64_t has_item;    /* bit d: container d has an item already */
    const char *key;      /* the member whose value is due (valid until it is written) */
    bool newline;         /* json_newline: the next item starts on a line of its own */
    bool done;            /* the document's one value has begun */
    bool failed;
} JsonWriter;

void json_writer_init(JsonWriter *w, FILE *f);
void json_begin_object(JsonWriter *w);
void json_end_object(JsonWriter *w);
void json_begin_array(JsonWriter *w);
void json_end_array(JsonWriter *w);
/* A member's key; its value is the next value written. */
void json_key(JsonWriter *w, const char *key);
void json_string(JsonWriter *w, const char *s);
void json_int(JsonWriter *w, int64_t v);
void json_double(JsonWriter *w, double v);
void json_bool(JsonWriter *w, bool v);
void json_null(JsonWriter *w);
/* Members in one call: key, then value. */
void json_field_string(JsonWriter *w, const char *key, const char *s);
void json_field_int(JsonWriter *w, const char *key, int64_t v);
void json_field_double(JsonWriter *w, const char *key, double v);
void json_field_bool(JsonWriter *w, const char *key, bool v);
/* Start the next item (or the container's end) on a new line: for files people open too
 * (one trace event a line). */
void json_newline(JsonWriter *w);
/* The document is whole: every container closed, nothing failed, f took every byte. A
 * newline ends it (JSON lines). False otherwise. */
bool json_writer_done(JsonWriter *w);

#endif
