/* sema.h — a whole .coil program (all files, includes expanded) and the checks that run
 * before lowering: names, arities, structure. Every problem found is reported, not just the first. */
#ifndef COIL_FRONTEND_SEMA_H
#define COIL_FRONTEND_SEMA_H

#include "frontend/ast.h"

/* The program as written (named Source so it is not mistaken for codegen's lowered Program). */
typedef struct Source {
    Arena *arena;
    Diags *diags;
    Item **items;  /* the prelude's items, then the files' in include order */
    int nitems;
    NameMap blocks; /* name -> Item* (a program's block replaces the prelude's) */
    NameMap config; /* name -> ConfigEntry* */
    Item *model;
} Source;

/* Build the tables and check the program; false when diagnostics were added. */
bool sema_check(Source *p);
const Item *program_block(const Source *p, const char *name);
/* Number of values a block returns (from its declaration or its return statement). */
int block_results(const Item *blk);

/* Initializers a param may name: zeros, ones, xavier, kaiming (bare) and normal, uniform. */
bool init_is_bare(const char *name);
/* normal(std) or normal(mean, std), uniform(a, b): false for other names. */
bool init_arity(const char *name, int *min, int *max);

#endif
