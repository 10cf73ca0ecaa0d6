/* diag.h — the frontend's diagnostics: a list of located errors printed gcc-style
 * (FILE:LINE:COL: error: ..., the source line, a caret), and "did you mean" suggestions. */
#ifndef COIL_FRONTEND_DIAG_H
#define COIL_FRONTEND_DIAG_H

#include "ir/ir.h"

typedef struct Diags Diags;

Diags *diags_new(void);
void diags_free(Diags *d);
/* Make a file's text available for quoting source lines; text must outlive d. */
void diags_source(Diags *d, const char *path, const char *text, size_t len);
void diag_error(Diags *d, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_verror(Diags *d, Loc loc, const char *fmt, va_list ap);
int diags_count(const Diags *d);
/* Write every diagnostic into e (first error wins: nothing happens if e is already set).
 * Diagnostics that do not fit in e->msg are summarised as "... and N more errors".
 * Returns true when there was at least one. */
bool diags_to_err(const Diags *d, Err *e);

/* "Did you mean": feed candidates, keep the closest one within a small edit distance. */
typedef struct Suggest {
    const char *word;
    const char *best;
    int dist;
} Suggest;
void suggest_init(Suggest *s, const char *word);
void suggest_try(Suggest *s, const char *candidate);
/* "; did you mean 'x'?" or "" — a string to append to a message (valid until s changes). */
const char *suggest_text(const Suggest *s, char *buf, size_t n);

#endif
