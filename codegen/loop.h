/* loop.h — the loop IR: the one contract between optimisation and code generation.
 *
 * A Program is what a graph becomes once fused and lowered: buffers (the graph's inputs,
 * parameters and outputs, constants, and temporaries placed by the memory plan) and a
 * list of steps, each a loop kernel or a GEMM. The backends (codegen/cpu, later
 * codegen/cuda) and the loop evaluator (codegen/loop_eval.c, the reference) read only this.
 *
 * A kernel is a loop nest over an outer (parallel) space, optionally with an inner
 * (reduction) space walked by one or more phases:
 *
 *     for o in outer:                      -- parallel; backends split outer var 0
 *         for each phase p, in order:
 *             for r in inner:              -- each phase walks the whole inner space
 *                 statements of phase p    -- reduce into an accumulator, or store
 *         statements of `after`            -- stores at the outer point
 *
 * Pointwise kernels have no inner space and no phases: only `after`. A sum over the last
 * axis is one phase reducing and a store after. softmax is three phases (max; sum of
 * exp(x - max); store exp(x - max) / sum), layer_norm three (mean; variance; store).
 * Within one walk, statements run in order for each point; a phase may mix reductions
 * and stores, but a statement may use an accumulator (LX_ACC) only of an earlier phase
 * (or, in `after`, of any phase).
 *
 * Values are expressions in one pool per kernel (Lx, referenced by index, operands before
 * users, hash-consed by lowering so equal expressions are one id). Index arithmetic and
 * element values share the pool: an index is an i64 expression. Views (transpose,
 * reshape, expand, slice) never copy: they are index expressions of the loads. Every
 * buffer is dense in its dtype; index expressions address elements.
 *
 * Arithmetic semantics (what every backend computes; the interpreter, which evaluates in
 * f64 and rounds each node to its dtype, agrees to within rounding):
 * - f32 expressions compute in f32; f16 and bf16 ones compute in f32 and round the result
 *   to their dtype (round to nearest even), so a chain matches the interpreter's per-op
 *   rounding. Loads widen f16/bf16 to f32; stores convert to the buffer's dtype.
 * - Integer add, sub, mul, neg, abs, maximum, minimum wrap around in two's complement at
 *   their dtype's width; div, pow and the unary float functions of an integer compute in
 *   f64 and convert back as dtype_round does (truncate; NaN gives 0; out of range
 *   saturates at 2^63 - 1024 or -2^63, then wraps). bool operands read as 0 and 1; a bool
 *   result is value != 0.
 * - Compares give bool (false with a NaN, except ne). maximum and minimum propagate NaN
 *   and order -0 below +0 (IEEE 754-2019 maximum/minimum); relu(x) is x > 0 || x is NaN
 *   ? x : +0. Transcendentals (exp, log, tanh, erf, sigmoid, gelu, ...) are accurate to a
 *   few ulp of the dtype, not bit-exact.
 * - Index (i64) expressions never overflow or divide by zero: lowering guarantees it. */
#ifndef COIL_CODEGEN_LOOP_H
#define COIL_CODEGEN_LOOP_H

#include "ir/ir.h"

/* ---------------------------------------------------------------- expressions */

typedef enum LxKind {
    LX_INT,    /* i64 constant `i` */
    LX_FLOAT,  /* constant `f` of dtype dt (any dtype: a bool or integer constant too) */
    LX_SYM,    /* i64: the value of graph symbol `i` (bit index into the graph's syms), or
                  with `i` COIL_SYM_RNG_STEP the run's rng step */
    LX_VAR,    /* i64: loop variable `i`: 0..nouter-1 outer, nouter.. inner */
    LX_LOAD,   /* dt: element a (an i64 index) of buffer `i`; dt is the buffer's dtype */
    LX_UNARY,  /* dt: pointwise unary OpCode `op` (OP_NEG ... OP_ERF) of a */
    LX_BINARY, /* dt: pointwise binary OpCode `op` (OP_ADD ... OP_GE) of a, b; compares
                  have dt DT_BOOL and operands of one dtype */
    LX_IDIV,   /* i64: a / b, a >= 0, b > 0 (index arithmetic) */
    LX_IMOD,   /* i64: a % b, a >= 0, b > 0 */
    LX_SELECT, /* dt: a (bool) ? b : c */
    LX_CAST,   /* dt: a converted as dtype_round does (float to int truncates) */
    LX_RAND,   /* f32: uniform [0, 1): philox_uniform_step(seed `i`, step b, offset `j`,
                  index a); b is the rng step symbol, so no kernel is compiled per step */
    LX_ACC,    /* acc_dt: the value of reduction statement `i` at this outer point */
    LX_COUNT
} LxKind;

/* One expression node. Index expressions (LX_INT, LX_SYM, LX_VAR, LX_IDIV, LX_IMOD,
 * and binaries of i64) have dt == DT_I64. */
typedef struct Lx {
    LxKind kind;
    DType dt;
    int op;          /* OpCode for LX_UNARY / LX_BINARY */
    int a, b, c;     /* operand expression ids, -1 when unused */
    int64_t i, j;    /* LX_INT value, LX_SYM symbol, LX_VAR variable, LX_LOAD buffer,
                        LX_RAND seed (i) and offset (j), LX_ACC statement */
    double f;        /* LX_FLOAT value */
} Lx;

/* ---------------------------------------------------------------- statements */

typedef enum LStmtKind {
    ST_STORE,  /* buffer `buf` at i64 expression `index` = value (converted to its dtype),
                  or with `add`, += value (an index_add's scatter: the element read, value
                  added in the buffer's dtype, stored; never into f16 or bf16: lowering adds
                  those in an f32 buffer, rounded once after). Points of a kernel that adds may
                  meet at one element, in any order: a backend makes the adds safe (the
                  CPU runs such a kernel on one thread, CUDA adds atomically) */
    ST_REDUCE, /* acc = combine(acc, value) over the inner space: `op` OP_SUM (starts at
                  0), OP_MAX (-inf, or the dtype's least), OP_MIN, or OP_ARGMAX (the
                  first value of inner variable `axis` where value is greatest; a NaN is
                  the greatest) */
} LStmtKind;

typedef struct LStmt {
    LStmtKind kind;
    int op;       /* ST_REDUCE: OP_SUM, OP_MAX, OP_MIN, OP_ARGMAX */
    int buf;      /* ST_STORE */
    int index;    /* ST_STORE: i64 expression */
    int value;    /* expression */
    int axis;     /* ST_REDUCE with OP_ARGMAX: the loop variable whose value is returned */
    bool add;     /* ST_STORE: add value to the element instead of replacing it */
    DType acc_dt; /* ST_REDUCE: the accumulator's dtype: f32 for float sums, max, min
                     (of f32, f16, bf16), i64 for integer sums and argmax, else the
                     value's dtype */
} LStmt;

/* Statements [first, first + count) of a kernel's stmt array. */
typedef struct StmtRange {
    int first, count;
} StmtRange;

/* ---------------------------------------------------------------- kernels */

#define LOOP_MAX_DIMS (2 * COIL_MAX_RANK)
#define LOOP_MAX_PHASES 8

typedef struct Kernel {
    const char *name;          /* unique in the program: "k3_layer_norm" */
    int nouter, ninner;
    Dim size[LOOP_MAX_DIMS];   /* outer sizes then inner sizes (k * product of symbols) */
    int nphase;
    StmtRange phase[LOOP_MAX_PHASES]; /* each walks the inner space; reduce or store */
    StmtRange after;           /* stores at the outer point, after every phase */
    Lx *lx;
    int nlx;
    LStmt *stmt;
    int nstmt;
    int group;                 /* the fusion group it came from (for dumps and tests) */
} Kernel;

/* ---------------------------------------------------------------- GEMM */

/* C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (f32, f16 or bf16 operands, f32 accumulate),
 * over up to COIL_MAX_RANK - 2 batch dimensions. Each operand is a buffer and strides in
 * elements (symbolic: k * symbols) for its batch dims, rows and columns: a transposed
 * weight is swapped strides, a broadcast batch a zero stride. Lowering always gives C a
 * dense row-major buffer of its own (offset 0, strides N and 1, batch strides packed). */
typedef struct GemmOperand {
    int buf;
    Dim offset;                       /* first element */
    Dim batch_stride[COIL_MAX_RANK];
    Dim row_stride, col_stride;
} GemmOperand;

/* A convolution (ir's conv, kept whole on the CPU) as a GEMM whose B is never stored: it
 * is x read through the im2col windows, B[(n, g), k, o] = x[n, g*cg + c, o_d * stride_d -
 * pad0_d + t_d * dil_d ...] (0 in the padding), k = (c, t0, t1, t2) row-major over [cg,
 * k...] and o = (o0, o1, o2) row-major over out[...]. Always three spatial axes: a 1-D or
 * 2-D conv has leading axes of size 1. The GEMM's batch dims are (N, G): b.buf is x's
 * buffer, b.offset its first element, b.batch_stride x's per image and per group, and b's
 * row and column strides those of the dense [K, O] B would be. A is w as [G, M/G, K], C y
 * as [N, G, M/G, O] (y's NCHW layout). codegen/gemm_conv.c reads one element of B. */
typedef struct GemmConv {
    int64_t cg, c_stride;        /* channels per group; x's channel stride */
    int64_t in[3], k[3], stride[3], dil[3], pad0[3], out[3];
    int64_t x_stride[3];         /* x's spatial strides */
} GemmConv;

double gemm_conv_load(const GemmConv *cv, DType dt, const void *x, int64_t off, int64_t k,
                      int64_t o);
/* The elements of x below and above off that one batch's B can read (lo <= 0 <= hi). */
void gemm_conv_reach(const GemmConv *cv, int64_t *lo, int64_t *hi);

typedef struct Gemm {
    int nbatch;
    Dim batch[COIL_MAX_RANK];
    Dim m, n, k;
    GemmOperand a, b, c;
    const GemmConv *conv; /* NULL, or B is x through a convolution's windows (above) */
    /* The epilogue: -1, or a pointwise kernel consuming C that runs as part of this step,
     * right after the product (it is not a step of its own). When epi_load >= 0 its outer
     * space is exactly [rows, N], rows = the batch dims and M flattened, and it reads C
     * through exactly one load, expression epi_load, at index var0 * N + var1: a backend
     * may then fuse it into the GEMM's tiles, evaluating the kernel at each tile point with
     * that load replaced by the product's value, and storing C itself only when `c_live`
     * (C is an output or a later step reads it). Otherwise (epi_load == -1, or a backend
     * that does not fuse) the product is stored in C and the kernel runs after it. */
    int epilogue;
    int epi_load;
    bool c_live;
} Gemm;

/* ---------------------------------------------------------------- attention */

/* O[b, i, :] = softmax_j(scale * Q[b, i, :] . K[b, j, :] (+ bias[b, i, j]), with j > i
 * hidden when causal) V[b, j, :], as one step, no T x T matrix in memory: the CPU runs it with
 * runtime/cpu/attention.c, the CUDA backend generates a kernel. Both pipelines keep
 * attention whole (passes' decompose_fused) where its head dims are static.
 * Operands as a GEMM's: Q [batch.., Tq, D], K [batch.., Tk, D], V [batch.., Tk, Dv];
 * O is dense [batch.., Tq, Dv]. D and Dv are static. */
/* Training adds two kinds (ir/ops_attention.c; the CPU runs them, the CUDA pipeline
 * decomposes them): ATTN_LSE writes each query's log-sum-exp, f32 [batch.., Tq], into o
 * (its row stride 1; v is K again and dv 0); ATTN_BACKWARD reads also the forward's
 * output (fo), its gradient (dout) and lse (rows of one), and writes dQ, dK and dV into o
 * as one dense [3, batch.., T, D]; its o strides are dQ's (the next part at `part`). */
typedef enum AttentionKind { ATTN_FORWARD, ATTN_LSE, ATTN_BACKWARD } AttentionKind;

typedef struct Attention {
    AttentionKind kind;
    int nbatch;
    Dim batch[COIL_MAX_RANK];
    Dim tq, tk;
    int64_t d, dv;
    GemmOperand q, k, v, o;
    GemmOperand fo, dout, lse; /* ATTN_BACKWARD; lse also ATTN_FORWARD's with writes_lse */
    bool writes_lse;           /* ATTN_FORWARD: also each query's log-sum-exp into lse, as
                                  an attention_lse of the same q, k, causal and scale would
                                  (lowering merges that step into this one) */
    bool has_bias;             /* ATTN_FORWARD: an additive bias, [batch.., Tq, Tk] as a
                                  view (broadcast dims at stride 0), in q's dtype */
    GemmOperand bias;
    Dim part;                  /* ATTN_BACKWARD: elements per gradient in o */
    bool causal;
    double scale;
} Attention;

/* ---------------------------------------------------------------- program */

typedef enum BufKind {
    BUF_INPUT,  /* graph input `index` */
    BUF_PARAM,  /* parameter `index` (graph_params order) */
    BUF_OUTPUT, /* graph output `index` */
    BUF_CONST,  /* constant: `data` (numel doubles, converted to dt when bound) */
    BUF_TEMP,   /* an intermediate, placed in the arena by the memory plan */
} BufKind;

typedef struct Buffer {
    const char *name;   /* for dumps: the input/param/output name or "t12" */
    BufKind kind;
    int index;
    DType dt;
    Dim numel;
    const double *data; /* BUF_CONST */
    int first, last;    /* BUF_TEMP: the steps that write it first and read it last
                           (a kernel storing into a buffer it loads at the same index is
                           an in-place update: both steps in one interval) */
} Buffer;

/* An input whose values index a gather: every element must lie in [0, bound). Runners
 * check before running and report the input. Computed indices are checked by
 * codegen/index_bounds.c (from the shapes before a run, or by a range step after it);
 * kernels still clamp every index, so no load can fault meanwhile. */
typedef struct IndexCheck {
    int buf;   /* a BUF_INPUT of an integer dtype */
    Dim bound;
} IndexCheck;

typedef enum StepKind { STEP_KERNEL, STEP_GEMM, STEP_ATTENTION } StepKind;

typedef struct Step {
    StepKind kind;
    int kernel;   /* STEP_KERNEL */
    Gemm gemm;    /* STEP_GEMM */
    Attention attn; /* STEP_ATTENTION */
    /* The graph nodes the step computes, ascending: its fusion group's members (with a
     * GEMM's epilogue group), the gather a range step checks, the output a copy returns.
     * Profiles and traces name a step by them (runtime/trace.h); nothing runs from them. */
    const int *node;
    int nnode;
} Step;

/* A lowered graph: malloc'd, everything it points to allocated from `arena`;
 * program_free releases both. */
typedef struct Program {
    Arena *arena;
    const Graph *graph;   /* the (optimised) graph it was lowered from; not owned */
    Buffer *buf;
    int nbuf;
    Kernel *kernel;
    int nkernel;
    Step *step;
    int nstep;
    IndexCheck *check;
    int ncheck;
} Program;

void program_free(Program *p);

/* What a compiled kernel is, on every CPU path (JIT, AOT, the loop evaluator's adapter):
 * bufs[i] is the base of program buffer i (NULL for those the kernel does not touch),
 * syms[s] the value of symbol s, and [begin, end) the range of outer variable 0 to run
 * (a kernel with no outer dims runs once, for begin 0, end 1). Threads split the range. */
typedef void (*KernelFn)(void *const *bufs, const int64_t *syms, int64_t begin, int64_t end);

/* A GEMM's tile epilogue, compiled from its epilogue kernel (or, without a fusable one,
 * the store of C): for i < mr, j < nr, the product's value at row row0 + i, column
 * col0 + j is tile[i * ldt + j]; rows count the batch dims and M flattened, as the
 * epilogue's var0 does. It stores C there when epi_load < 0 or c_live, and when
 * epi_load >= 0 evaluates the epilogue at (var0, var1) = (row0 + i, col0 + j) with that
 * load replaced by the tile's value. Called once per tile, after the last block of K. */
typedef void (*TileFn)(const float *tile, int64_t ldt, void *const *bufs, const int64_t *syms,
                       int64_t row0, int64_t col0, int64_t mr, int64_t nr);

/* Whether kernel k has a store with add (its points may meet: see ST_STORE). */
bool kernel_adds(const Kernel *k);

/* Element count of a Dim under symbol values. */
int64_t dim_value(Dim d, const SymBind *sb);

/* codegen/loop.c: the program's index checks on its inputs (graph order): an error naming
 * the input, the element and the bound at the first value out of range. */
bool program_check_inputs(const Program *p, const Tensor *inputs, const SymBind *sb, Err *e);

/* codegen/loop_print.c: the loop IR's text form (what `coil dump --after=lower` prints),
 * malloc'd. Kernels print as nested loops with their expressions named %e<N>. */
char *loop_print(const Program *p);
/* Step s alone: the step line and the kernel it runs (a GEMM's epilogue), malloc'd. */
char *loop_print_step(const Program *p, int s);

/* codegen/loop_eval.c: run a program with the loop IR's reference semantics (above),
 * every expression evaluated in f64 and rounded to its dtype as the interpreter does,
 * one thread. Same argument conventions as interp_run: inputs and params in, outputs
 * allocated. */
bool loop_eval(const Program *p, const Tensor *inputs, const Tensor *params, Tensor *outputs,
               Err *e);
/* The same at rng step `step` (loop_eval is step 0), as interp_run_at. */
bool loop_eval_at(const Program *p, uint64_t step, const Tensor *inputs, const Tensor *params,
                  Tensor *outputs, Err *e);
/* One kernel over [begin, end) of its outer variable 0, in KernelFn's conventions. */
void loop_eval_kernel(const Program *p, int kernel, void *const *bufs, const int64_t *syms,
                      int64_t begin, int64_t end);

#endif
