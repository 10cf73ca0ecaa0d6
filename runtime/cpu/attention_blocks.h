/* attention_blocks.h — what the CPU's attention steps share: the forward (attention.c)
 * and the backward (attention_backward.c) read operands through the same views widened to
 * f32, run their block products on the same broadcast micro-kernel (or its portable twin)
 * and take e^x of non-positive differences the same way. Internal to runtime/cpu/. */
#ifndef COIL_RUNTIME_ATTENTION_BLOCKS_H
#define COIL_RUNTIME_ATTENTION_BLOCKS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codegen/cpu/cpu.h"
#include "runtime/cpu/clones.h"

/* One operand at concrete sizes: element (t..., r, c) at off + sum t_d bs[d] + r rs + c cs. */
typedef struct View {
    const void *base;
    DType dt;
    int64_t off, rs, cs, bs[COIL_MAX_RANK];
} View;

/* The broadcast micro-kernel in C, for engines without generated code (attention.c). */
extern const Ukernels attention_portable;

/* Floats per vector of the softmaxes (the forward's queries, the backward's keys): AVX2's
 * f32 lanes (half a register in the AVX-512 clone, two in the baseline one). Not
 * AVX-512's 16: GCC splits a 64-byte vector's compares and selects into scalar moves
 * through the stack in the AVX2 clone, which made the softmax 46% of the step (Zen 3: 2.3x
 * slower at T = 1024). */
#define SOFTMAX_LANES 8

/* SOFTMAX_LANES floats at once in GCC's vector extensions. No vector crosses a call:
 * loads, stores and selects are macros and the exponential works in place through a
 * pointer, because a vector wider than the baseline's registers passed by value has no
 * settled ABI (GCC notes it, clang refuses it in unoptimised builds even for inlined
 * helpers). */
typedef float VecF __attribute__((vector_size(4 * SOFTMAX_LANES)));
typedef int32_t VecI __attribute__((vector_size(4 * SOFTMAX_LANES)));
typedef float VecAt __attribute__((vector_size(4 * SOFTMAX_LANES), aligned(4), may_alias));
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* The SOFTMAX_LANES floats at p, unaligned, to read or assign. */
#define VEC_AT(p) (*(VecAt *)(p))
/* Lane by lane: a where mask is set, else b. */
#define VEC_SELECT(mask, a, b) ((VecF)(((VecI)(a) & (mask)) | ((VecI)(b) & ~(mask))))

/* e^x for x <= 0 (differences from a running maximum; larger x give 1), lane by lane,
 * inlined into the loops: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so n ln2 is
 * exact), e^r by its Taylor series to r^7 (truncation below 1e-8 relative), times 2^n
 * through the exponent bits. Below -87 (where 2^n would leave the normal range) it is 0,
 * so masked scores (-inf) weigh exactly nothing; NaN stays NaN. */
CONTRACT ALWAYS_INLINE void vec_exp_nonpositive(VecF *v)
{
    const VecF x = *v, zero = {0}, low = zero - 87.0f;
    VecF c = VEC_SELECT(x > low, x, low);
    c = VEC_SELECT(c < zero, c, zero);
    VecF n = c * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    n -= 12582912.0f;
    VecF r = c - n * 0.693145752f;
    r = r - n * 1.42860677e-6f;
    VecF p = zero + 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    VecI bits = (__builtin_convertvector(n, VecI) + 127) << 23;
    VecF y = VEC_SELECT(x > low, p * (VecF)bits, zero);
    *v = VEC_SELECT(x == x, y, x);
}

/* The same for one float (lane 0 of a vector): the scalar softmax and the loops' tails. */
CONTRACT ALWAYS_INLINE float exp_nonpositive(float x)
{
    VecF v = {x};
    vec_exp_nonpositive(&v);
    return v[0];
}

static inline float load_f32(const View *x, int64_t i)
{
    switch (x->dt) {
    case DT_F16: return f16_to_f32(((const uint16_t *)x->base)[i]);
    case DT_BF16: return bf16_unpack(((const uint16_t *)x->base)[i]);
    default: return ((const float *)x->base)[i];
    }
}

/* Row r of x at batch offset at, n elements, as f32. */
static inline void load_row(const View *x, int64_t at, int64_t r, int64_t n, float *dst)
{
    int64_t i0 = at + r * x->rs;
    if (x->dt == DT_F32 && (x->cs == 1 || n <= 1)) {
        memcpy(dst, (const float *)x->base + i0, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t c = 0; c < n; c++)
        dst[c] = load_f32(x, i0 + c * x->cs);
}

/* x's element offset at flat batch index t (batch dims row-major, extents batch[]). */
static inline int64_t view_batch_offset(const View *x, int nbatch, const int64_t *batch, int64_t t)
{
    int64_t at = x->off;
    for (int d = nbatch - 1; d >= 0; d--) {
        at += t % batch[d] * x->bs[d];
        t /= batch[d];
    }
    return at;
}

/* A step's operand at the run's sizes. */
View attention_view(const GemmOperand *o, int nbatch, void *const *bufs, const DType *dts,
                    const SymBind *sb);
/* Every index the view can reach over [batch.., rows, cols] lies within int64. */
bool attention_view_span_ok(const View *v, int nbatch, const int64_t *batch, int64_t rows,
                            int64_t cols);

static inline bool attention_dtype_ok(DType dt)
{
    return dt == DT_F32 || dt == DT_F16 || dt == DT_BF16;
}

#endif
