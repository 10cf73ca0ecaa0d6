/* attention.h — attention steps (codegen/loop.h's Attention) on the CPU: FlashAttention's
 * forward, query tiles against key blocks with an online softmax, over the engine's pool. */
#ifndef COIL_RUNTIME_ATTENTION_H
#define COIL_RUNTIME_ATTENTION_H

#include "codegen/cpu/cpu.h"
#include "runtime/pool.h"

/* Run a: bufs[i] is the base of program buffer i, dts[i] its dtype, sb the symbol values.
 * Q, K and V (f32, f16 or bf16) are read through their strides and widened to f32; O is
 * written in its dtype. No Tq x Tk buffer: each thread keeps one block of scores. The
 * block products run on uk's broadcast micro-kernel (NULL: a portable one compiled here).
 * Tasks (a batch element's query tile) are taken by pool's threads as they finish (NULL:
 * the calling thread). Errors: an operand of another dtype or reaching past int64, out of
 * memory. */
bool attention_run(const Attention *a, void *const *bufs, const DType *dts, const SymBind *sb,
                   const Ukernels *uk, Pool *pool, Err *e);

#endif
