/* to_graph.h — lowering a checked program to the SSA IR by evaluating it: blocks are inlined,
 * repeats unrolled, constants folded, every tensor operation built through the IR builder. */
#ifndef COIL_FRONTEND_LOWER_H
#define COIL_FRONTEND_LOWER_H

#include "frontend/sema.h"

/* What the command line can change. */
typedef struct FeOptions {
    const char *const *set; /* "name=value" config overrides */
    int nset;
    bool training;          /* dropout becomes the IR dropout op (else identity) */
    uint64_t seed;          /* dropout seed in training mode */
} FeOptions;

/* Limits on what a program may unroll into. */
enum {
    LOWER_MAX_REPEAT = 65536,
    LOWER_MAX_CALL_DEPTH = 64,
    LOWER_MAX_NODES = 1000000,
    LOWER_MAX_STEPS = 1000000,  /* statements executed */
    LOWER_MAX_RESULTS = 256,    /* values one call returns */
};

/* Lower p->model; NULL with diagnostics in p->diags on failure. */
Graph *lower_program(const Source *p, const FeOptions *o);

/* The builtins that are not plain IR ops (layer forms, typed ops): their parameter
 * names, so sema can check keyword arguments. NULL when name is not one. */
enum { BI_MAX = 10 }; /* the most parameters a builtin takes (attention's nine) */
typedef struct BuiltinSig {
    const char *name;
    int nparam, nrequired;
    const char *param[BI_MAX];
} BuiltinSig;
const BuiltinSig *builtin_sig(const char *name);

/* The frontend's entry point below the file loader: compile a program from text.
 * path names the file (diagnostics, includes); text may hold any bytes. */
Graph *coil_frontend_compile(const char *path, const char *text, size_t len,
                             const FeOptions *o, Err *e);
/* The same from a file; includes are resolved relative to each including file. */
Graph *coil_frontend_compile_file(const char *path, const FeOptions *o, Err *e);

#endif
