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

/* e^x for x <= 0 (differences from a running maximum; larger x give 1), inlined into the
 * loops: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so n ln2 is exact), e^r by
 * its Taylor series to r^7 (truncation below 1e-8 relative), times 2^n through the
 * exponent bits. Below -87 (where 2^n would leave the normal range) it is 0, so masked
 * scores (-inf) weigh exactly nothing; NaN stays NaN. */
CONTRACT static inline float exp_nonpositive(float x)
{
    float c = x > -87.0f ? x : -87.0f;
    c = c < 0.0f ? c : 0.0f;
    float n = c * 1.44269504f + 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    n -= 12582912.0f;
    float r = c - n * 0.693145752f;
    r = r - n * 1.42860677e-6f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = x > -87.0f ? p * scale : 0.0f;
    return x == x ? y : x;
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
