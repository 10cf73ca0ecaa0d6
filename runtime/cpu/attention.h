/* attention.h — attention steps (codegen/loop.h's Attention) on the CPU: FlashAttention's
 * forward (or its log-sum-exp alone), query tiles against key blocks with an online
 * softmax, and its backward, over the engine's pool. */
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

/* An ATTN_BACKWARD step (attention_backward.c): FlashAttention-2's backward, dQ, dK and dV
 * into the step's o from Q, K, V, O, dO and the log-sum-exp, block by block; a task is
 * one batch element (a head), taken by the pool's threads. uk must have its bcast. */
bool attention_backward_run(const Attention *a, void *const *bufs, const DType *dts,
                            const SymBind *sb, const Ukernels *uk, Pool *pool, Err *e);

#endif
