/* base.h — what every layer of coil uses and nothing of coil's own: errors as values,
 * arenas, growing text and the clock. Sectioned by the file that defines each part.
 * base/ sits below everything (ir, passes, codegen, runtime...) and includes none of it. */
#ifndef COIL_BASE_H
#define COIL_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- errors (err.c) */

/* A source position; file == NULL means "no position" (graphs built in code). */
typedef struct Loc {
    const char *file;
    int line, col;
} Loc;

/* What kind of failure an Err is (include/coil/coil.h's COIL_ERR_* have the same values).
 * ERR_USAGE: the caller's mistake (a flag, an argument); ERR_INPUT: bad input not
 * classified further; the others say which. The command's exit status is 2 for ERR_USAGE
 * and 1 for every other. */
enum {
    ERR_OK = 0, ERR_INPUT = 1, ERR_USAGE = 2,
    ERR_FILE = 3,        /* a file missing or unreadable */
    ERR_SYNTAX = 4,      /* the model's text is wrong (located FILE:LINE:COL) */
    ERR_SHAPE = 5,       /* a tensor of the wrong dtype or shape */
    ERR_UNSUPPORTED = 6, /* not supported (yet, or by this build) */
    ERR_DEVICE = 7,      /* the device is missing or failed */
    ERR_MEMORY = 8,      /* out of memory */
    ERR_IO = 9,          /* a write failed */
    ERR_INTERNAL = 10,   /* a bug in coil */
};

/* Errors are values: a failing function fills an Err and returns false (or -1).
 * The first error wins; later ones are dropped so the root cause is reported. */
typedef struct Err {
    int code;
    char msg[1024];
} Err;

/* "FILE:LINE:COL: error: MSG" (or "error: MSG" without a position). */
void err_at(Err *e, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void err_vat(Err *e, Loc loc, const char *fmt, va_list ap);
/* A message with no position and an explicit code (ERR_INPUT, ERR_USAGE). */
void err_set(Err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline bool err_ok(const Err *e) { return e->code == ERR_OK; }

/* ---------------------------------------------------------------- arena (arena.c) */

/* Bump allocator: a graph's or a pass's memory, freed as a whole. */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n); /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
void *arena_memdup(Arena *a, const void *p, size_t n);

/* ---------------------------------------------------------------- growing text (text.c) */

/* A string built with printf formats. Zero-initialise; text_take hands the
 * malloc'd string over (NULL when any append ran out of memory) and resets t. */
typedef struct Text {
    char *s;
    size_t n, cap;
    bool oom;
} Text;
void text_put(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *text_take(Text *t);
/* The index of s in names[0..n) (an enum's spellings, in its order), or -1. */
int name_index(const char *const *names, int n, const char *s);

/* ---------------------------------------------------------------- clock (clock.c) */

/* Seconds on the monotonic clock (differences only). */
double clock_seconds(void);

#endif
