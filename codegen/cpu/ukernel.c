/* ukernel.c — the GEMM micro-kernels as LLVM IR: a register tile of <vec x float>
 * accumulators updated with llvm.fma over a block of k, edges by clamping and masking.
 *
 * Both kernels are one counted loop whose accumulators are phis, so the IR is already
 * in SSA form and register allocation sees exactly MR x NR (dot) or MR x NR/vec (bcast)
 * live vectors. The dot form sums along k inside each vector, so its tile ends with a
 * transposing reduction tree; the broadcast form's vectors already run along n. */
#include <limits.h>
#include <string.h>

#include "codegen/cpu/ukernel.h"

/* At most this many accumulators (plus the loads feeding them) fit the largest register
 * file (32 AVX-512 registers); a larger tile would only spill. */
#define UK_MAX_ACC 64
#define UK_MAX_VEC 64

/* The tile shapes, measured on a Sapphire Rapids core (AVX-512, 2 FMA units, 32 zmm) with
 * bench/gemm_bench.c. dot 4 x 6: 24 accumulators, 4 A vectors and one B vector live, 10
 * loads per 24 FMAs; 4 x 5, 5 x 5 and 3 x 8 ran as fast in whole GEMMs (within noise),
 * 6 x 4, 8 x 3 and 2 x 12 slower. bcast 12 x 32: 24 accumulators, 2 B vectors and 12
 * broadcasts per 24 FMAs, about 5% faster than 8 x 32 and 6 x 64 and as fast as 14 x 32,
 * which wastes more rows at M = 128; there the dot kernel beats transposing B^T above
 * K = 256. The 16-register ISAs (AVX2, SSE, NEON's common subset) get 12 accumulators,
 * chosen by register count. On a Zen 3 core (AVX2) the broadcast kernel with B^T's
 * panels transposed beat the 3 x 4 dot kernel at every K of GPT-2's and the MLP's
 * weights, 1.06-1.23x at 1 and 2 threads (`gemm_bench --shape M,N,K --tiling dot/bcast`),
 * so AVX2 never takes the dot kernel; SSE and NEON keep AVX-512's rule, unmeasured. */
#define DOT_MIN_K 256
#define DOT_NEVER INT_MAX

UkernelShape ukernel_shape(int vec)
{
    if (vec >= 16)
        return (UkernelShape){.vec = 16, .dot_mr = 4, .dot_nr = 6, .bc_mr = 12, .bc_nr = 32,
                              .dot_min_k = DOT_MIN_K};
    if (vec == 8)
        return (UkernelShape){.vec = 8, .dot_mr = 3, .dot_nr = 4, .bc_mr = 6, .bc_nr = 16,
                              .dot_min_k = DOT_NEVER};
    return (UkernelShape){.vec = 4, .dot_mr = 3, .dot_nr = 4, .bc_mr = 6, .bc_nr = 8,
                          .dot_min_k = DOT_MIN_K};
}

/* ---------------------------------------------------------------- IR helpers */

/* What both kernels are built from: the module's context, a builder, the types and the
 * intrinsics at this vector width. */
typedef struct Gen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    int vec;
    LLVMTypeRef f32, i32, i64, ptr, vf, vmask;
    LLVMTypeRef fma_ty, load_ty, store_ty;
    LLVMValueRef fma, mload, mstore;
} Gen;

static LLVMValueRef intrinsic(Gen *g, const char *name, LLVMTypeRef *over, int n,
                              LLVMTypeRef *ty)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    *ty = LLVMIntrinsicGetType(g->ctx, id, over, (size_t)n);
    return LLVMGetIntrinsicDeclaration(g->mod, id, over, (size_t)n);
}

static Gen gen_make(LLVMModuleRef mod, int vec)
{
    Gen g = {.ctx = LLVMGetModuleContext(mod), .mod = mod, .vec = vec};
    g.b = LLVMCreateBuilderInContext(g.ctx);
    g.f32 = LLVMFloatTypeInContext(g.ctx);
    g.i32 = LLVMInt32TypeInContext(g.ctx);
    g.i64 = LLVMInt64TypeInContext(g.ctx);
    g.ptr = LLVMPointerTypeInContext(g.ctx, 0);
    g.vf = LLVMVectorType(g.f32, (unsigned)vec);
    g.vmask = LLVMVectorType(LLVMInt1TypeInContext(g.ctx), (unsigned)vec);
    g.fma = intrinsic(&g, "llvm.fma", &g.vf, 1, &g.fma_ty);
    g.mload = intrinsic(&g, "llvm.masked.load", (LLVMTypeRef[]){g.vf, g.ptr}, 2, &g.load_ty);
    g.mstore = intrinsic(&g, "llvm.masked.store", (LLVMTypeRef[]){g.vf, g.ptr}, 2, &g.store_ty);
    return g;
}

static LLVMValueRef i64c(Gen *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }
static LLVMValueRef i32c(Gen *g, int v) { return LLVMConstInt(g->i32, (unsigned long long)v, 1); }

/* &p[i] for a float pointer p and an i64 index i. */
static LLVMValueRef at(Gen *g, LLVMValueRef p, LLVMValueRef i)
{
    return LLVMBuildGEP2(g->b, g->f32, p, &i, 1, "");
}

/* Loads and stores of the operands only promise float alignment. */
static LLVMValueRef load_vec(Gen *g, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->vf, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

static void store_vec(Gen *g, LLVMValueRef v, LLVMValueRef p)
{
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), 4);
}

/* Lanes of `mask` off are not read (they may lie past the end of the operand) and are 0. */
static LLVMValueRef masked_load(Gen *g, LLVMValueRef p, LLVMValueRef mask)
{
    LLVMValueRef args[] = {p, i32c(g, 4), mask, LLVMConstNull(g->vf)};
    return LLVMBuildCall2(g->b, g->load_ty, g->mload, args, 4, "");
}

static void masked_store(Gen *g, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask)
{
    LLVMValueRef args[] = {v, p, i32c(g, 4), mask};
    LLVMBuildCall2(g->b, g->store_ty, g->mstore, args, 4, "");
}

static LLVMValueRef build_fma(Gen *g, LLVMValueRef x, LLVMValueRef y, LLVMValueRef acc)
{
    LLVMValueRef args[] = {x, y, acc};
    return LLVMBuildCall2(g->b, g->fma_ty, g->fma, args, 3, "");
}

static LLVMValueRef splat(Gen *g, LLVMValueRef s)
{
    LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(g->vf), s, i32c(g, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->i32, (unsigned)g->vec));
    return LLVMBuildShuffleVector(g->b, v, LLVMGetUndef(g->vf), zeros, "");
}

/* Lanes l < count on (count an i64, any value: negative turns every lane off). */
static LLVMValueRef lane_mask(Gen *g, LLVMValueRef count)
{
    LLVMValueRef iota[UK_MAX_VEC];
    for (int l = 0; l < g->vec; l++)
        iota[l] = i64c(g, l);
    LLVMValueRef c = LLVMBuildInsertElement(g->b, LLVMGetUndef(LLVMVectorType(g->i64, (unsigned)g->vec)),
                                            count, i32c(g, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(g->i32, (unsigned)g->vec));
    c = LLVMBuildShuffleVector(g->b, c, LLVMGetUndef(LLVMTypeOf(c)), zeros, "");
    return LLVMBuildICmp(g->b, LLVMIntSLT, LLVMConstVector(iota, (unsigned)g->vec), c, "");
}

/* A constant mask of the first n lanes. */
static LLVMValueRef const_mask(Gen *g, int n)
{
    LLVMValueRef bits[UK_MAX_VEC];
    for (int l = 0; l < g->vec; l++)
        bits[l] = LLVMConstInt(LLVMInt1TypeInContext(g->ctx), l < n, 0);
    return LLVMConstVector(bits, (unsigned)g->vec);
}

/* The pointer to row min(i, mr - 1) of a matrix whose rows are `ld` floats apart: the
 * rows past an edge repeat the last one, so the tile is always computed whole. */
static LLVMValueRef clamped_row(Gen *g, LLVMValueRef base, int i, LLVMValueRef mr, LLVMValueRef ld)
{
    if (i == 0)
        return base;
    LLVMValueRef last = LLVMBuildSub(g->b, mr, i64c(g, 1), "");
    LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntSLT, i64c(g, i), mr, "");
    LLVMValueRef r = LLVMBuildSelect(g->b, in, i64c(g, i), last, "");
    return at(g, base, LLVMBuildMul(g->b, r, ld, ""));
}

/* A function with external linkage, its parameters' types in `params`, its builder at
 * the entry block. Pointers never alias each other: t is the caller's private tile. */
static LLVMValueRef begin_function(Gen *g, const char *name, LLVMTypeRef *params, int n)
{
    LLVMTypeRef ty = LLVMFunctionType(LLVMVoidTypeInContext(g->ctx), params, (unsigned)n, 0);
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, ty);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    for (int i = 0; i < n; i++)
        if (params[i] == g->ptr)
            LLVMAddAttributeAtIndex(fn, (unsigned)i + 1, LLVMCreateEnumAttribute(g->ctx, noalias, 0));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(g->ctx, nounwind, 0));
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
    return fn;
}

/* ---------------------------------------------------------------- counted loops */

/* for (i = 0; i < n; i += step), carrying nv values through phis: loop_begin leaves the
 * builder in the body with L->i and L->v[] live; loop_end closes it with the body's new
 * values and leaves the builder after the loop, L->v[] then the values on exit (the
 * initial ones when the loop ran zero times). */
typedef struct Loop {
    LLVMBasicBlockRef pre, body, exit;
    LLVMValueRef n, i;
    int nv;
    LLVMValueRef v[UK_MAX_ACC], init[UK_MAX_ACC];
} Loop;

static void loop_begin(Gen *g, Loop *L, LLVMValueRef n, const LLVMValueRef *init, int nv)
{
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(g->b));
    L->pre = LLVMGetInsertBlock(g->b);
    L->body = LLVMAppendBasicBlockInContext(g->ctx, fn, "loop");
    L->exit = LLVMAppendBasicBlockInContext(g->ctx, fn, "done");
    L->n = n;
    L->nv = nv;
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, n, i64c(g, 0), ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(g->b, L->body);
    L->i = LLVMBuildPhi(g->b, g->i64, "p");
    LLVMAddIncoming(L->i, (LLVMValueRef[]){i64c(g, 0)}, &L->pre, 1);
    for (int k = 0; k < nv; k++) {
        L->init[k] = init[k];
        L->v[k] = LLVMBuildPhi(g->b, LLVMTypeOf(init[k]), "");
        LLVMAddIncoming(L->v[k], &L->init[k], &L->pre, 1);
    }
}

static void loop_end(Gen *g, Loop *L, int64_t step, const LLVMValueRef *next)
{
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(g->b);
    LLVMValueRef inext = LLVMBuildAdd(g->b, L->i, i64c(g, step), "");
    LLVMAddIncoming(L->i, &inext, &latch, 1);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, inext, L->n, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(g->b, L->exit);
    for (int k = 0; k < L->nv; k++) {
        LLVMAddIncoming(L->v[k], (LLVMValueRef *)&next[k], &latch, 1);
        LLVMValueRef out = LLVMBuildPhi(g->b, LLVMTypeOf(next[k]), "");
        LLVMAddIncoming(out, (LLVMValueRef[]){L->init[k], next[k]},
                        (LLVMBasicBlockRef[]){L->pre, latch}, 2);
        L->v[k] = out;
    }
}

/* ---------------------------------------------------------------- the dot form */

typedef struct DotArgs {
    LLVMValueRef kc, a, lda, mr, b, ldb, nr, t, accumulate;
} DotArgs;

/* One step along k at element p: acc[i * nr + j] += A row i . B^T row j over the vec
 * lanes at p, or only the lanes of `mask` (NULL: all). */
static void dot_step(Gen *g, const UkernelShape *s, LLVMValueRef *const rows, LLVMValueRef p,
                     LLVMValueRef mask, const LLVMValueRef *acc, LLVMValueRef *out)
{
    int mr = s->dot_mr, nr = s->dot_nr;
    LLVMValueRef av[UK_MAX_ACC];
    for (int i = 0; i < mr; i++) {
        LLVMValueRef q = at(g, rows[i], p);
        av[i] = mask ? masked_load(g, q, mask) : load_vec(g, q);
    }
    for (int j = 0; j < nr; j++) {
        LLVMValueRef q = at(g, rows[mr + j], p);
        LLVMValueRef bv = mask ? masked_load(g, q, mask) : load_vec(g, q);
        for (int i = 0; i < mr; i++)
            out[i * nr + j] = build_fma(g, av[i], bv, acc[i * nr + j]);
    }
}

/* Horizontal sums of n <= vec vectors as one vector, lane q the sum of v[q]: a tree of
 * vec - 1 pairwise steps, each halving the lanes per partial sum by adding the lower
 * halves of two vectors' chunks (packed side by side) to the upper halves. Padding with
 * zero vectors keeps the tree regular; LLVM folds the additions of zeros. */
static LLVMValueRef hsum(Gen *g, const LLVMValueRef *v, int n)
{
    LLVMValueRef cur[UK_MAX_VEC];
    for (int q = 0; q < g->vec; q++)
        cur[q] = q < n ? v[q] : LLVMConstNull(g->vf);
    for (int w = g->vec, cnt = g->vec; w > 1; w /= 2, cnt /= 2) {
        int chunks = g->vec / w, half = w / 2;
        LLVMValueRef lo[UK_MAX_VEC], hi[UK_MAX_VEC];
        for (int side = 0; side < 2; side++) /* u's chunk halves, then v's */
            for (int c = 0; c < chunks; c++)
                for (int l = 0; l < half; l++) {
                    int dst = side * chunks * half + c * half + l;
                    lo[dst] = i32c(g, side * g->vec + c * w + l);
                    hi[dst] = i32c(g, side * g->vec + c * w + half + l);
                }
        LLVMValueRef mlo = LLVMConstVector(lo, (unsigned)g->vec);
        LLVMValueRef mhi = LLVMConstVector(hi, (unsigned)g->vec);
        for (int q = 0; q < cnt / 2; q++) {
            LLVMValueRef x = LLVMBuildShuffleVector(g->b, cur[2 * q], cur[2 * q + 1], mlo, "");
            LLVMValueRef y = LLVMBuildShuffleVector(g->b, cur[2 * q], cur[2 * q + 1], mhi, "");
            cur[q] = LLVMBuildFAdd(g->b, x, y, "");
        }
    }
    return cur[0];
}

/* The reduced tile into t, vec sums at a time (t is MR x NR contiguous, so the sums of
 * accumulators q = i * NR + j in order are t's elements in order); a partial last group
 * is masked. With accumulate the old t is added. */
static void dot_store(Gen *g, const UkernelShape *s, const DotArgs *x, const LLVMValueRef *acc)
{
    int total = s->dot_mr * s->dot_nr;
    LLVMValueRef add = LLVMBuildICmp(g->b, LLVMIntNE, x->accumulate, i64c(g, 0), "");
    for (int q0 = 0; q0 < total; q0 += g->vec) {
        int n = total - q0 < g->vec ? total - q0 : g->vec;
        LLVMValueRef sum = hsum(g, acc + q0, n), p = at(g, x->t, i64c(g, q0));
        LLVMValueRef mask = n < g->vec ? const_mask(g, n) : NULL;
        LLVMValueRef old = mask ? masked_load(g, p, mask) : load_vec(g, p);
        sum = LLVMBuildSelect(g->b, add, LLVMBuildFAdd(g->b, sum, old, ""), sum, "");
        if (mask)
            masked_store(g, sum, p, mask);
        else
            store_vec(g, sum, p);
    }
}

static void emit_dot(Gen *g, const UkernelShape *s)
{
    LLVMTypeRef pt[] = {g->i64, g->ptr, g->i64, g->i64, g->ptr, g->i64, g->i64, g->ptr, g->i64};
    LLVMValueRef fn = begin_function(g, UKERNEL_DOT_NAME, pt, 9), prm[9];
    LLVMGetParams(fn, prm);
    DotArgs x = {prm[0], prm[1], prm[2], prm[3], prm[4], prm[5], prm[6], prm[7], prm[8]};
    int mr = s->dot_mr, nr = s->dot_nr, nacc = mr * nr;
    LLVMValueRef rows[2 * UK_MAX_ACC], zero[UK_MAX_ACC], acc[UK_MAX_ACC];
    for (int i = 0; i < mr; i++)
        rows[i] = clamped_row(g, x.a, i, x.mr, x.lda);
    for (int j = 0; j < nr; j++)
        rows[mr + j] = clamped_row(g, x.b, j, x.nr, x.ldb);
    for (int q = 0; q < nacc; q++)
        zero[q] = LLVMConstNull(g->vf);

    /* whole vectors of k, then the remainder with masked loads */
    LLVMValueRef kmain = LLVMBuildAnd(g->b, x.kc, i64c(g, -(int64_t)g->vec), "");
    Loop L;
    loop_begin(g, &L, kmain, zero, nacc);
    dot_step(g, s, rows, L.i, NULL, L.v, acc);
    loop_end(g, &L, g->vec, acc);

    LLVMValueRef rem = LLVMBuildSub(g->b, x.kc, kmain, "");
    LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(g->ctx, fn, "tail");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, fn, "reduce");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, rem, i64c(g, 0), ""), tail, join);
    LLVMPositionBuilderAtEnd(g->b, tail);
    dot_step(g, s, rows, kmain, lane_mask(g, rem), L.v, acc);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    for (int q = 0; q < nacc; q++) {
        LLVMValueRef phi = LLVMBuildPhi(g->b, g->vf, "");
        LLVMAddIncoming(phi, (LLVMValueRef[]){L.v[q], acc[q]},
                        (LLVMBasicBlockRef[]){from, tail}, 2);
        acc[q] = phi;
    }
    dot_store(g, s, &x, acc);
    LLVMBuildRetVoid(g->b);
}

/* ---------------------------------------------------------------- the broadcast form */

typedef struct BcastArgs {
    LLVMValueRef kc, a, lda_r, lda_c, mr, b, ldb, nr, t, accumulate;
} BcastArgs;

/* One k step at p: the NR/vec vectors of B's row p (columns past nr not read; masks
 * NULL: the tile is whole), each multiplied by every A[i, p] broadcast. */
static void bcast_step(Gen *g, const UkernelShape *s, const BcastArgs *x, LLVMValueRef *const rows,
                       const LLVMValueRef *masks, LLVMValueRef p, const LLVMValueRef *acc,
                       LLVMValueRef *out)
{
    int nv = s->bc_nr / g->vec;
    LLVMValueRef brow = at(g, x->b, LLVMBuildMul(g->b, p, x->ldb, "")), bv[UK_MAX_ACC];
    for (int v = 0; v < nv; v++) {
        LLVMValueRef p_v = at(g, brow, i64c(g, (int64_t)v * g->vec));
        bv[v] = masks ? masked_load(g, p_v, masks[v]) : load_vec(g, p_v);
    }
    LLVMValueRef ka = LLVMBuildMul(g->b, p, x->lda_c, "");
    for (int i = 0; i < s->bc_mr; i++) {
        LLVMValueRef e = LLVMBuildLoad2(g->b, g->f32, at(g, rows[i], ka), "");
        LLVMSetAlignment(e, 4);
        LLVMValueRef ai = splat(g, e);
        for (int v = 0; v < nv; v++)
            out[i * nv + v] = build_fma(g, ai, bv[v], acc[i * nv + v]);
    }
}

static void emit_bcast(Gen *g, const UkernelShape *s)
{
    LLVMTypeRef pt[] = {g->i64, g->ptr, g->i64, g->i64, g->i64,
                        g->ptr, g->i64, g->i64, g->ptr, g->i64};
    LLVMValueRef fn = begin_function(g, UKERNEL_BCAST_NAME, pt, 10), prm[10];
    LLVMGetParams(fn, prm);
    BcastArgs x = {prm[0], prm[1], prm[2], prm[3], prm[4], prm[5], prm[6], prm[7], prm[8], prm[9]};
    int nv = s->bc_nr / g->vec, nacc = s->bc_mr * nv;
    LLVMValueRef rows[UK_MAX_ACC], masks[UK_MAX_ACC], init[UK_MAX_ACC], acc[UK_MAX_ACC];
    for (int i = 0; i < s->bc_mr; i++)
        rows[i] = clamped_row(g, x.a, i, x.mr, x.lda_r);
    for (int v = 0; v < nv; v++)
        masks[v] = lane_mask(g, LLVMBuildSub(g->b, x.nr, i64c(g, (int64_t)v * g->vec), ""));

    /* accumulating starts from t's values: t is whole MR x NR, so reading it is safe */
    LLVMValueRef add = LLVMBuildICmp(g->b, LLVMIntNE, x.accumulate, i64c(g, 0), "");
    for (int q = 0; q < nacc; q++) {
        LLVMValueRef old = load_vec(g, at(g, x.t, i64c(g, (int64_t)q * g->vec)));
        init[q] = LLVMBuildSelect(g->b, add, old, LLVMConstNull(g->vf), "");
    }
    /* Two copies of the loop: a whole tile's loads need no masks, which would otherwise
     * take registers the accumulators need (AVX2's 16: 12 accumulators, 2 of B, the
     * broadcast, and the masks spilled and reloaded every step). */
    LLVMValueRef whole = LLVMBuildICmp(g->b, LLVMIntEQ, x.nr, i64c(g, s->bc_nr), "");
    LLVMBasicBlockRef full_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "whole");
    LLVMBasicBlockRef part_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "partial");
    LLVMBasicBlockRef join_bb = LLVMAppendBasicBlockInContext(g->ctx, fn, "join");
    LLVMBuildCondBr(g->b, whole, full_bb, part_bb);
    LLVMValueRef out[2][UK_MAX_ACC];
    LLVMBasicBlockRef from[2];
    for (int w = 0; w < 2; w++) {
        LLVMPositionBuilderAtEnd(g->b, w == 0 ? full_bb : part_bb);
        Loop L;
        loop_begin(g, &L, x.kc, init, nacc);
        bcast_step(g, s, &x, rows, w == 0 ? NULL : masks, L.i, L.v, acc);
        loop_end(g, &L, 1, acc);
        memcpy(out[w], L.v, sizeof(LLVMValueRef) * (size_t)nacc);
        from[w] = LLVMGetInsertBlock(g->b);
        LLVMBuildBr(g->b, join_bb);
    }
    LLVMPositionBuilderAtEnd(g->b, join_bb);
    LLVMValueRef sum[UK_MAX_ACC];
    for (int q = 0; q < nacc; q++) {
        sum[q] = LLVMBuildPhi(g->b, g->vf, "");
        LLVMAddIncoming(sum[q], (LLVMValueRef[]){out[0][q], out[1][q]}, from, 2);
    }
    for (int q = 0; q < nacc; q++)
        store_vec(g, sum[q], at(g, x.t, i64c(g, (int64_t)q * g->vec)));
    LLVMBuildRetVoid(g->b);
}

/* ---------------------------------------------------------------- entry point */

static bool shape_ok(const UkernelShape *s, Err *e)
{
    bool pow2 = s->vec >= 1 && s->vec <= UK_MAX_VEC && (s->vec & (s->vec - 1)) == 0;
    bool dot = s->dot_mr >= 1 && s->dot_nr >= 1 && s->dot_mr * s->dot_nr <= UK_MAX_ACC;
    bool bc = s->bc_mr >= 1 && s->bc_nr >= s->vec && pow2 && s->bc_nr % s->vec == 0 &&
              s->bc_mr * (s->bc_nr / s->vec) <= UK_MAX_ACC;
    if (pow2 && dot && bc)
        return true;
    err_set(e, ERR_USAGE,
            "ukernel: unsupported tile shape (vec %d, dot %dx%d, bcast %dx%d): vec must be a "
            "power of two up to %d, bcast NR a multiple of it, at most %d accumulators",
            s->vec, s->dot_mr, s->dot_nr, s->bc_mr, s->bc_nr, UK_MAX_VEC, UK_MAX_ACC);
    return false;
}

bool ukernel_emit(LLVMModuleRef mod, const UkernelShape *shape, Err *e)
{
    if (!shape_ok(shape, e))
        return false;
    if (LLVMGetNamedFunction(mod, UKERNEL_DOT_NAME) || LLVMGetNamedFunction(mod, UKERNEL_BCAST_NAME)) {
        err_set(e, ERR_USAGE, "ukernel: the module already has the GEMM micro-kernels");
        return false;
    }
    Gen g = gen_make(mod, shape->vec);
    emit_dot(&g, shape);
    emit_bcast(&g, shape);
    LLVMDisposeBuilder(g.b);
    return true;
}
