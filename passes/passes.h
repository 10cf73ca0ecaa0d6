/* passes.h — graph-to-graph passes and the pass manager that runs them by name.
 * Every pass reads a graph and builds a new one; the input is never modified. */
#ifndef COIL_PASSES_H
#define COIL_PASSES_H

#include "ir/ir.h"

/* A pass: a new graph computing the same outputs, or NULL with e set. */
typedef Graph *(*PassFn)(const Graph *g, Err *e);
/* A pass that takes an argument, written NAME=ARG in a list ("precision=bf16"). */
typedef Graph *(*PassArgFn)(const Graph *g, const char *arg, Err *e);

typedef struct Pass {
    const char *name; /* as written in --passes=... */
    PassFn run;       /* NULL for a pass that needs its argument */
    const char *help; /* one line for --help */
    PassArgFn run_arg;/* the pass given NAME=ARG (NULL: it takes none) */
    const char *args; /* what ARG may be, for messages ("bf16 or f16") */
} Pass;

/* manager.c: the pass table, in pipeline order. */
extern const Pass pass_table[];
extern const int pass_count;
const Pass *pass_find(const char *name, size_t len); /* NULL when unknown */
/* Run the comma-separated passes in order. Each result replaces *g and the previous
 * graph is freed. An unknown name is an ERR_USAGE error listing the valid names,
 * reported before any pass runs; on a failing pass *g is the last good graph. */
bool run_passes(Graph **g, const char *list, Err *e);
/* The same, calling after(g, pass, ctx) once each pass has replaced *g; when it returns
 * false the remaining passes are skipped (still a success). */
typedef bool (*PassHook)(const Graph *g, const Pass *pass, void *ctx);
bool run_passes_with(Graph **g, const char *list, PassHook after, void *ctx, Err *e);
/* The default pipeline, what `coil dump --after/--all` walks: "verify,decompose,...";
 * and the CUDA backend's, which keeps attention whole (decompose_fused). */
extern const char pass_pipeline[];
extern const char pass_pipeline_cuda[];

/* One file each. */
Graph *pass_verify(const Graph *g, Err *e);    /* verify.c */
Graph *pass_fold(const Graph *g, Err *e);      /* fold.c */
Graph *pass_cse(const Graph *g, Err *e);       /* cse.c */
Graph *pass_dce(const Graph *g, Err *e);       /* dce.c */
/* dce, but an input or param nothing reads stays only when keep_leaf says so. */
Graph *pass_dce_leaves(const Graph *g, bool (*keep_leaf)(const Node *), Err *e);
Graph *pass_decompose(const Graph *g, Err *e); /* decompose.c */
/* The same, but attention with static head dims stays whole, for a backend with a fused
 * attention kernel (CUDA), after find_attention has found it where it is written out. */
Graph *pass_decompose_fused(const Graph *g, Err *e);
/* The same for the CUDA backend: attention's forward stays whole, its training ops
 * (attention_lse, attention_grad) where the tensor-core kernels take them: f16 or bf16, head
 * dims a multiple of 16 up to this many; conv decomposes. */
#define ATTENTION_MMA_BACKWARD_MAX_HEAD 64
Graph *pass_decompose_fused_cuda(const Graph *g, Err *e);
/* decompose, but keep the composites with a gradient rule (autodiff runs it first) */
Graph *pass_decompose_for_grad(const Graph *g, Err *e);

/* pad.c: GEMM dimensions padded to a multiple (tensor cores want 8/16 elements, the CPU
 * kernel its vector width). Each matmul whose static N or K is not a multiple and that
 * want(ctx, g, node) accepts (want NULL: all) gets its operands zero-padded (a's last axis
 * and b's second-to-last to K', b's last to N') and its result sliced back to N: exact,
 * the added terms are 0*0 and the extra columns are cut. Symbolic dims and M stay. */
typedef bool (*PadWant)(void *ctx, const Graph *g, int node);
Graph *pass_pad_gemm(const Graph *g, int multiple, PadWant want, void *ctx, Err *e);
/* The pass table's "pad": multiple 16, every matmul. */
Graph *pass_pad(const Graph *g, Err *e);

/* find_attention.c: softmax(matmul(q, kt) [* or / c] [+ bias], last axis) @ v, each
 * intermediate used once and the whole typing as attention, becomes attention(q,
 * swap(kt), v [, bias]) {scale=c} (ONNX exports spell attention so). */
Graph *pass_find_attention(const Graph *g, Err *e);

/* colsum.c: sum(x) over x's leading axes (f32, at least 16 kept elements, static) as
 * ones[1, R] x x[R, C], reshaped: a GEMM streams the rows at vector width where a loop
 * kernel would walk each column with a row's stride. */
Graph *pass_colsum(const Graph *g, Err *e);
/* For a caller deciding what to pad: matmul node's N and K (-1 when symbolic) and their
 * padded sizes (equal when already a multiple, or symbolic); false when node is not a
 * matmul (or multiple < 1). Any out pointer may be NULL. */
bool pad_gemm_dims(const Graph *g, int node, int multiple, int64_t *n, int64_t *k,
                   int64_t *n_padded, int64_t *k_padded);

/* autodiff.c: the joint forward-and-backward graph of the float scalar output `loss`
 * (NULL: the output named "loss"): the forward's outputs, then grad.<param> for every
 * parameter in graph_params order. Composites are decomposed first. An op the loss
 * depends on a parameter through that has no rule is an error located at that op. */
Graph *autodiff(const Graph *g, const char *loss, Err *e);
Graph *pass_autodiff(const Graph *g, Err *e); /* the pass table's: loss = output "loss" */

/* remat.c: which forward values a joint graph (autodiff's: output 0 the loss, forward
 * nodes up to it) keeps for the backward and which the backward recomputes, by a minimum
 * cut weighted by bytes at sizes sb: none (keep all), auto (matmul outputs are never
 * recomputed), full (activation checkpointing: the forward's bottlenecks, a
 * transformer's residual stream between blocks, are saved and everything else, matmuls
 * too, is recomputed from them a block at a time). */
typedef enum RematMode { REMAT_NONE, REMAT_AUTO, REMAT_FULL } RematMode;
bool remat_mode_parse(const char *s, RematMode *m);
Graph *pass_remat(const Graph *g, RematMode mode, const SymBind *sb, Err *e);

/* precision.c: every f32 matmul of g computed on operands cast to `low` (bf16, f16) and
 * its product cast back to f32; everything else as it is. "f32", "bf16", "f16" parse. */
bool precision_parse(const char *s, DType *dt);
Graph *pass_mixed_precision(const Graph *g, DType low, Err *e);
/* The pass table's forms, NAME=ARG: precision=bf16|f16; remat=auto|full with every symbol
 * at 64 (nothing binds sizes in `coil opt`; training cuts at its own). */
Graph *pass_precision_arg(const Graph *g, const char *arg, Err *e);
Graph *pass_remat_arg(const Graph *g, const char *arg, Err *e);

/* retype.c: the whole model in another float dtype, as PyTorch's model.to(dtype): every
 * value of dtype `from` (inputs, parameters, constants rounded, every op's result, casts'
 * and leaves' declared types) becomes `to`; integer and bool values stay. Both dtypes must
 * be float (else ERR_USAGE); a constant overflowing `to` is an error naming the node. */
Graph *pass_retype(const Graph *g, DType from, DType to, Err *e);

/* Folded values larger than this stay as computations: constants print as text. */
#define FOLD_MAX_ELEMS 65536

/* ---------------------------------------------------------------- rewrite.c */

/* Building a pass's result: a new graph with src's name and symbols (same bit
 * order, so types copy unchanged), a builder on it, and the id map src -> dst.
 * Copied nodes keep their locations (file names moved into dst's arena). */
typedef struct Rewrite {
    const Graph *src;
    Graph *dst;
    Builder b;
    int *map; /* src id -> dst id; -1 while not copied or when dropped */
    const char *file_src, *file_dst; /* the last Loc.file translated */
} Rewrite;

bool rewrite_begin(Rewrite *rw, const Graph *src, Err *e);
/* Point the builder at src node id's location (for the nodes built next). */
void rewrite_at(Rewrite *rw, int id);
/* Copy src node id with its operands mapped through rw->map; records and returns
 * the new id (-1 with the builder's error set). */
int rewrite_copy(Rewrite *rw, int id);
/* Copy src node id with the given dst operands instead. */
int rewrite_copy_with(Rewrite *rw, int id, const int *in);
/* Operand j of src node id, mapped to dst. */
static inline int rewrite_in(const Rewrite *rw, int id, int j) { return rw->map[rw->src->node[id].in[j]]; }
/* Finish: inputs in signature order, outputs with their names. Returns dst, or NULL
 * (dst freed) when any step failed or an input or output was dropped. */
Graph *rewrite_end(Rewrite *rw);
/* A plain copy: the identity pass. */
Graph *graph_copy(const Graph *g, Err *e);

#endif
