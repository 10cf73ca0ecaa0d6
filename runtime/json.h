/* json.h — a small strict JSON reader (RFC 8259) for file headers coil reads: safetensors
 * today, caches and checkpoints later. The document lives in an arena, freed as a whole. */
#ifndef COIL_RUNTIME_JSON_H
#define COIL_RUNTIME_JSON_H

#include <stdio.h>

#include "ir/ir.h"

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
/* Write s as a JSON string literal (quotes and escapes) into f. */
void json_write_string(FILE *f, const char *s);

#endif
