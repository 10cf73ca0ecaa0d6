/* lower_int.h — what lowering's files share: the state of one lowering (lower.c), the
 * kernel of one group (lower_kernel.c) and a GEMM step (lower_gemm.c). Internal. */
#ifndef COIL_CODEGEN_LOWER_INT_H
#define COIL_CODEGEN_LOWER_INT_H

#include "codegen/kernel_expr.h"
#include "codegen/lower.h"
#include "passes/fuse.h"

/* A store whose buffer is chosen after the kernel is built (in place or a new temporary)
 * names its node instead: buf = PENDING_BUF(node). */
#define PENDING_BUF(node) (-2 - (node))
#define PENDING_NODE(buf) (-2 - (buf))

typedef struct Lower {
    const Graph *g;
    const Fusion *f;
    Program *p;
    Err *e;
    int *leaf_buf;   /* per node: the buffer of an input, param or constant, else -1 */
    int *node_buf;   /* per node: the buffer its group stores it in, -1 until then */
    int *out_buf;    /* per graph output: its BUF_OUTPUT buffer */
    int *buf_holds;  /* per buffer: the node whose value it holds (in-place reuse moves it) */
    int *step_of;    /* per group: its step */
    int *last_read;  /* per node: the last step reading its stored value, -1 none */
    uint8_t *force;  /* per node: FORCE_OWN_GROUP for the next plan (lower_retry sets it) */
    int nretry;      /* nodes asked for in this attempt: the plan must be made again */
    int cap_buf, cap_kernel, cap_step, cap_check;
    /* Per group, its members in node order: member[member_start[g] .. member_start[g+1]).
     * Each group's step walks only its own nodes, so lowering stays linear in the graph. */
    int *member_start, *member;
    int *first_out;  /* per node: the first graph output returning it, -1 none */
    int *next_out;   /* per output: the next output returning the same node, -1 none */
    int *acc;        /* per node: its reduction statement in the kernel being built, -1;
                        shared by every kernel (values_free resets its group's entries) */
} Lower;

/* Ask for node in a group of its own in the next plan (a reduction read at another
 * index, a view a GEMM cannot stride through); an error when it already was. False. */
bool lower_retry(Lower *L, int node);

/* Append a buffer or a kernel (the Program's arrays grow); its index, or -1 out of
 * memory (L->e set). */
int lower_add_buffer(Lower *L, Buffer b);
int lower_add_kernel(Lower *L, const Kernel *k);
/* An error: node's type has more elements than a Dim can say. False. */
bool too_large(Lower *L, int node);
/* Node ids indexes a gather over `bound` rows: when it is an input (through views and
 * casts), the runner checks its values first. */
void lower_index_check(Lower *L, int ids, Dim bound);
/* The first graph output that returns node, or -1. */
int lower_first_output(const Lower *L, int node);
/* Group grp's members in node order; *n gets their count. */
const int *lower_members(const Lower *L, int grp, int *n);

/* Generating one group's values: a builder, the space's loop variables, a memo, and the
 * work stack that evaluates a value's operands before it (no recursion: a fused chain of
 * any length is evaluated in constant C stack). */
typedef struct Gen {
    Lower *L;
    KB kb;
    int grp;                    /* the group being lowered (its members are inlined) */
    int full[COIL_MAX_RANK];    /* the index of each dim of the space at the kernel's point */
    int inner_var[COIL_MAX_RANK]; /* per inner dim of the space: its loop variable */
    struct Memo *memo;
    int nmemo, cap_memo;
    struct Memo *work;          /* (node, index) pairs still to evaluate, the top next */
    int nwork, cap_work;
    bool evaluating;            /* inside one node's evaluation: operands are looked up */
    int *acc;                   /* L->acc: per node, its reduction statement here, -1 */
} Gen;

bool values_init(Gen *G, Lower *L, int grp);
void values_free(Gen *G);
/* Node id's value at index idx (one lx index per dim of its type): -1 on failure (L->e
 * set) or when the fusion plan must change (lower_retry called). Inside the evaluation
 * of another node (the value functions of lower_gen.c) an operand not yet known is -1
 * too: it is queued, and that node is evaluated again once its operands are known. */
int value_at(Gen *G, int id, const int *idx);

/* The dense row-major index of idx in a tensor of type t (an error on a repeated symbol). */
int dense_index_at(Gen *G, const Type *t, const int *idx);

/* Where a kernel runs: its step, the buffers a GEMM reads in the same step (-1 none),
 * which the kernel must not overwrite, and for a GEMM's epilogue C's buffer: lowering
 * reports whether the kernel reads C exactly once, at its own point. */
typedef struct KernelCtx {
    int step;
    int busy[2];
    int c_buf;
    bool c_identity;
} KernelCtx;

/* lower_kernel.c: group grp as a Kernel; its index, or -1. */
int lower_kernel(Lower *L, int grp, KernelCtx *ctx);
/* Give the kernel's pending stores their buffers (in place where safe) and add it to the
 * program; its index, or -1. */
int lower_place(Lower *L, Kernel *k, const KernelCtx *ctx);

/* lower_gemm.c: matmul group grp as a GEMM step (epilogue left for the caller), or, for
 * integer dtypes, as a kernel (an index, or -1). */
bool lower_gemm(Lower *L, int grp, Gemm *out);
/* lower_conv.c: a conv node's GEMM (w times x through its windows, Gemm.conv). */
bool lower_conv_fill(Gen *G, int m, Gemm *gm);
int lower_contraction(Lower *L, int grp, KernelCtx *ctx);
/* lower_gemm.c: an attention group as its step. */
bool lower_attention(Lower *L, int grp, Attention *out);

/* lower_kernel.c: a pointwise or row group's space as the kernel's loop variables
 * (G->full, G->inner_var); a scatter group's is pointwise over src. */
void lower_space(Gen *G, Kernel *k, const FuseGroup *grp);

/* lower.c: group grp's step (it computes the group's nodes), appended. */
bool lower_group_step(Lower *L, Step s, int grp);

/* lower_scatter.c: an index_add group (FUSE_SCATTER). Whether index_add node id adds
 * into its base's buffer (else the base is copied first); how many steps come before
 * the group's own (the copy, or for f16/bf16 the copy into f32 and the adds); base values
 * returned by an index_add stored straight into its output buffer (before any group is
 * lowered); the group's steps, its own last. */
bool scatter_in_place(const Lower *L, int id);
int scatter_steps_before(const Lower *L, int grp);
void scatter_outputs(Lower *L);
bool lower_scatter(Lower *L, int grp);

#endif
