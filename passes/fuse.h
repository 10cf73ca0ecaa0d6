/* fuse.h — the fusion plan: which nodes of a graph of primitives compute together in one
 * kernel, which of them are stored, and which pointwise kernel a GEMM takes as epilogue.
 * Lowering (codegen/lower.c) turns each group into a loop kernel or a GEMM step. */
#ifndef COIL_PASSES_FUSE_H
#define COIL_PASSES_FUSE_H

#include "ir/ir.h"

typedef enum FuseKind {
    FUSE_POINTWISE, /* one store per point of `space`; no reduction */
    FUSE_ROW,       /* reductions of `space` over the axes `inner`, with their pointwise
                       producers and consumers, in phases */
    FUSE_GEMM,      /* one matmul */
    FUSE_ATTENTION, /* one attention kept whole (decompose_fused): a fused kernel's step */
    FUSE_SCATTER,   /* one index_add: base into its buffer (or in place), then src's
                       points added at their rows; space is src's shape */
    FUSE_KIND_COUNT
} FuseKind;

typedef struct FuseGroup {
    FuseKind kind;
    Type space;    /* the iteration shape: the stored roots' shape (pointwise), the
                      reductions' operand shape (row), the matmul's result (gemm),
                      src's shape (scatter) */
    unsigned inner;/* FUSE_ROW: the reduced axes of space, as a bit mask */
    int epilogue;  /* FUSE_GEMM: the pointwise group run as its epilogue, or -1 */
    int gemm;      /* FUSE_POINTWISE: the GEMM group whose epilogue it is, or -1 */
} FuseGroup;

/* Node classes as fusion sees them. */
typedef enum NodeClass {
    NC_DEAD,       /* no output depends on it */
    NC_BUFFER,     /* input, param, or a constant of more than one element: read in place */
    NC_INLINE,     /* full, iota, rand, a one-element constant: an expression wherever used */
    NC_VIEW,       /* transpose, reshape, expand, slice: an index expression of its operand */
    NC_ELEMENT,    /* pointwise, where, cast, concat, gather, and an output that is a view or
                      a leaf (stored by a copy): computable at any index */
    NC_REDUCE,     /* sum, mean, max, min, argmax */
    NC_MATMUL,
    NC_ATTENTION,  /* attention kept whole for a backend's fused kernel */
    NC_SCATTER,    /* index_add: adds at computed rows, a group of its own; its operands
                      are read like any group's (views and inline leaves stay inline) */
} NodeClass;

typedef struct Fusion {
    int nnode;
    NodeClass *cls;  /* per node */
    int *group;      /* per node: its group, -1 for buffers, inline leaves, views, dead */
    bool *stored;    /* per node: it has a buffer of its own, which its group writes */
    FuseGroup *g;
    int ngroup;
    int *order;      /* the groups in execution order (an epilogue right after its GEMM) */
} Fusion;

/* What lowering may ask of a retry: a node stored by a group of its own. */
enum { FORCE_NONE = 0, FORCE_OWN_GROUP = 1 };

/* The most nodes one group holds by default. A longer chain becomes several kernels, a
 * store and a load apart. LLVM's loop vectorizer takes time quadratic in the uses of a
 * constant, so in a kernel's size: a fused chain of 10,002 tanh, mul and add ops took
 * 160 s in one kernel, 15 s in ten; each kernel also costs LLVM some 50 ms of its own, so
 * the limit is not lower. A buffer every 1024 ops costs nothing measurable at run time;
 * no model in examples/ has a group of 20 nodes. */
#define FUSE_MAX_NODES 1024

typedef struct FuseOptions {
    bool off;             /* every compute node its own group, no epilogues (--no-fusion) */
    const uint8_t *force; /* per node (may be NULL): FORCE_* */
    int max_nodes;        /* the most nodes in a group: 0 for FUSE_MAX_NODES, < 0 no limit */
} FuseOptions;

/* Plan g, which must hold only primitives (decompose first; decompose_fused may leave
 * attention whole). Legal by construction: a
 * node joins a group only where every value it needs is computed before the group runs,
 * and groups stay acyclic. Errors: out of memory, a composite op left in the graph. */
bool fuse_plan(const Graph *g, const FuseOptions *o, Fusion *f, Err *e);
void fuse_free(Fusion *f);

/* The reduced axes of a reduction node (sum, mean, max, min, argmax) of an operand of
 * rank `rank`, as a bit mask: no axes listed means all of them. */
unsigned reduce_axes(const Node *n, int rank);

/* The plan as comment lines ("// g3 row f32[B,32] inner {1}: %4 %7 ... stores %16"),
 * malloc'd; statement numbers as ir_print numbers them. */
char *fuse_print(const Graph *g, const Fusion *f);

#endif
