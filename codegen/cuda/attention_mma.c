/* attention_mma.c — fused attention on tensor cores, FlashAttention-2's forward (and
 * attention_lse, the same walk summing each row's exponentials without V): a block of
 * four warps takes CUDA_ATTN_QUERIES queries, each warp 16 of them, its rows of Q held in
 * registers as mma.sync A fragments. Per tile of 64 keys, K (rows) and V (transposed) are
 * staged in shared memory, padded so the fragment loads meet no bank conflicts; S = Q K^T
 * on tensor cores with f32 accumulators, scaled and masked in registers; the online
 * softmax keeps each row's running maximum (its four lanes agree through two shuffles) and
 * a per-lane partial sum; P, rounded to the inputs' format as FlashAttention does, is
 * already in the A layout of P V (the accumulator layout of two adjacent 8-key tiles), so
 * it never leaves registers. K and V move 128 bits at a time where their rows are
 * contiguous and 16-byte aligned (checked in the kernel), else element by element.
 * Causal: a block stops at its last query's key and a warp skips the tiles wholly above its diagonal. The fragment layouts are PTX's m16n8k16; the
 * host emulator (tests/unit/cuda_emu.h) models them, so the kernel is checked without a
 * GPU. */
#include <math.h>

#include "codegen/cuda/cuda.h"

#define MMA_MAX_HEAD 128 /* registers: Q's fragments and the output's accumulators */

bool cuda_attention_mma_fits(const Program *p, const Attention *a)
{
    if (a->kind == ATTN_BACKWARD)
        return cuda_attention_mma_backward_fits(p, a);
    DType dt = p->buf[a->q.buf].dt;
    bool forward = a->kind == ATTN_FORWARD;
    return (dt == DT_F16 || dt == DT_BF16) && p->buf[a->k.buf].dt == dt &&
           p->buf[a->v.buf].dt == dt && a->d % 16 == 0 && a->d > 0 && a->d <= MMA_MAX_HEAD &&
           (!forward || (a->dv % 16 == 0 && a->dv > 0 && a->dv <= MMA_MAX_HEAD));
}

/* Q's fragments, the row statistics, the causal stop. */
static const char mma_setup[] =
    "  enum { D = %lld, BC = 64, BR = %d, NT = %d, KP = D + 8 };\n"
    "  alignas(16) __shared__ coil_h16 ks[BC * KP];\n"
    "  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;\n"
    "  const long long w0 = (long long)blockIdx.y * BR + (threadIdx.x >> 5) * 16;\n"
    "  const long long r0 = w0 + g, r1 = r0 + 8;\n"
    "  unsigned qa[D / 16][4];\n"
    "  coil_frag_a<D>(qa, q + off_q, rs_q, cs_q, w0, tq);\n"
    "  float m[2] = {-COIL_INF, -COIL_INF}, l[2] = {0.0f, 0.0f};\n"
    "  const bool kvec = coil_vec8(k + off_k, rs_k, cs_k);\n"
    "  long long kend = tk;\n"
    "  if (%d) { long long last = (long long)(blockIdx.y + 1) * BR; kend = last < tk ? last : tk; }\n";

/* The forward's: V transposed in shared memory, the output's accumulators. */
static const char mma_setup_v[] =
    "  enum { DV = %lld, VP = BC + 8 };\n"
    "  alignas(16) __shared__ coil_h16 vt[DV * VP];\n"
    "  float oacc[DV / 8][4];\n"
    "  #pragma unroll\n"
    "  for (int n = 0; n < DV / 8; n++)\n"
    "    oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.0f;\n"
    "  const bool vvec = coil_vec8(v + off_v, rs_v, cs_v);\n";

/* A tile of keys (and the forward's values) into shared memory, zeros past tk (no NaN
 * reaches P V), then S = Q K^T. */
static const char mma_tile[] =
    "  for (long long j0 = 0; j0 < kend; j0 += BC) {\n"
    "    __syncthreads();\n"
    "    coil_stage<BC, D, KP, false>(ks, k + off_k + j0 * rs_k, rs_k, cs_k, tk - j0, kvec);\n";
static const char mma_tile_v[] =
    "    coil_stage<BC, DV, VP, true>(vt, v + off_v + j0 * rs_v, rs_v, cs_v, tk - j0, vvec);\n";
static const char mma_scores[] =
    "    __syncthreads();\n"
    "    if (%d && w0 + 15 < j0) continue;\n"
    "    float sc[BC / 8][4];\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < BC / 8; n++) {\n"
    "      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;\n"
    "      const coil_h16 *kr = ks + (n * 8 + g) * KP + 2 * t4;\n"
    "      #pragma unroll\n"
    "      for (int kk = 0; kk < D / 16; kk++) {\n"
    "        unsigned frag[2];\n"
    "        coil_frag_b(frag, kr, kk);\n"
    "        coil_mma_%s(sc[n], qa[kk], frag);\n"
    "      }\n"
    "    }\n";

/* Scale, bias, mask (in log2 units from here), the online softmax, P in registers, then
 * O += P V. */
static const char mma_mask[] =
    "    float mx[2] = {m[0], m[1]};\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < BC / 8; n++)\n"
    "      #pragma unroll\n"
    "      for (int i = 0; i < 4; i++) {\n"
    "        const long long row = i < 2 ? r0 : r1, col = j0 + n * 8 + 2 * t4 + (i & 1);\n"
    "        const bool seen = row < tq && col < tk && !(%d && col > row);\n"
    "        const float x = seen ? (sc[n][i] * %af + ";
static const char mma_softmax[] =
    ") * 1.4426950408889634f : -COIL_INF;\n"
    "        sc[n][i] = x;\n"
    "        mx[i >> 1] = fmaxf(mx[i >> 1], x);\n"
    "      }\n"
    "    float base[2], corr[2];\n"
    "    #pragma unroll\n"
    "    for (int r = 0; r < 2; r++) {\n"
    "      mx[r] = fmaxf(mx[r], coil_shfl_xor(mx[r], 1));\n"
    "      mx[r] = fmaxf(mx[r], coil_shfl_xor(mx[r], 2));\n"
    "      base[r] = mx[r] == -COIL_INF ? 0.0f : mx[r];\n"
    "      corr[r] = exp2f(m[r] - base[r]);\n"
    "      m[r] = mx[r];\n"
    "      l[r] *= corr[r];\n"
    "    }\n";

/* The forward's: O rescaled, P in registers, then O += P V. */
static const char mma_pv[] =
    "    #pragma unroll\n"
    "    for (int n = 0; n < DV / 8; n++)\n"
    "      #pragma unroll\n"
    "      for (int i = 0; i < 4; i++) oacc[n][i] *= corr[i >> 1];\n"
    "    unsigned pa[BC / 16][4];\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < BC / 8; n++) {\n"
    "      const float p0 = exp2f(sc[n][0] - base[0]), p1 = exp2f(sc[n][1] - base[0]);\n"
    "      const float p2 = exp2f(sc[n][2] - base[1]), p3 = exp2f(sc[n][3] - base[1]);\n"
    "      l[0] += p0 + p1;\n"
    "      l[1] += p2 + p3;\n"
    "      pa[n / 2][(n & 1) * 2] = coil_pack_%s(p0, p1);\n"
    "      pa[n / 2][(n & 1) * 2 + 1] = coil_pack_%s(p2, p3);\n"
    "    }\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < DV / 8; n++) {\n"
    "      const coil_h16 *vr = vt + (n * 8 + g) * VP + 2 * t4;\n"
    "      #pragma unroll\n"
    "      for (int kk = 0; kk < BC / 16; kk++) {\n"
    "        unsigned frag[2];\n"
    "        coil_frag_b(frag, vr, kk);\n"
    "        coil_mma_%s(oacc[n], pa[kk], frag);\n"
    "      }\n"
    "    }\n"
    "  }\n";

/* attention_lse's: the rows' sums only. */
static const char mma_lse_sum[] =
    "    #pragma unroll\n"
    "    for (int n = 0; n < BC / 8; n++) {\n"
    "      l[0] += exp2f(sc[n][0] - base[0]) + exp2f(sc[n][1] - base[0]);\n"
    "      l[1] += exp2f(sc[n][2] - base[1]) + exp2f(sc[n][3] - base[1]);\n"
    "    }\n"
    "  }\n";

/* The rows' sums gathered from their four lanes. */
static const char mma_gather[] =
    "  #pragma unroll\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    l[r] += coil_shfl_xor(l[r], 1);\n"
    "    l[r] += coil_shfl_xor(l[r], 2);\n"
    "  }\n";

/* The forward's O / l (and with writes_lse, its log-sum-exp as mma_lse_store's). */
static const char mma_store[] =
    "  #pragma unroll\n"
    "  for (int n = 0; n < DV / 8; n++)\n"
    "    #pragma unroll\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "      const long long row = i < 2 ? r0 : r1;\n"
    "      const int c = n * 8 + 2 * t4 + (i & 1);\n"
    "      if (row < tq) o[off_o + row * rs_o + c * cs_o] = (%s)%s(oacc[n][i] / l[i >> 1]);\n"
    "    }\n";

/* The log-sum-exp, in natural units, by one lane of the four: into o (attention_lse)
 * or lse (a forward that writes it). */
static const char mma_lse_store[] =
    "  #pragma unroll\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    const long long row = r ? r1 : r0;\n"
    "    if (t4 == 0 && row < tq)\n"
    "      %s[off_%s + row * rs_%s] = m[r] == -COIL_INF ? -COIL_INF\n"
    "                                   : (m[r] + log2f(l[r])) * 0.6931471805599453f;\n"
    "  }\n";

void cuda_put_attention_mma(Text *t, const Program *p, int s, const char *prefix)
{
    const Attention *a = &p->step[s].attn;
    if (a->kind == ATTN_BACKWARD) {
        cuda_put_attention_mma_backward(t, p, s, prefix);
        return;
    }
    const char *type = p->buf[a->q.buf].dt == DT_F16 ? "f16" : "bf16";
    DType ot = p->buf[a->o.buf].dt;
    const char *store = cuda_store_fn(ot);
    int causal = a->causal ? 1 : 0;
    bool forward = a->kind == ATTN_FORWARD;
    cuda_put_attention_head(t, p, s, prefix, "_mma", CUDA_ATTN_MMA_THREADS);
    text_put(t, mma_setup, (long long)a->d, CUDA_ATTN_QUERIES, CUDA_ATTN_MMA_THREADS, causal);
    if (forward)
        text_put(t, mma_setup_v, (long long)a->dv);
    text_put(t, mma_tile);
    if (forward)
        text_put(t, mma_tile_v);
    text_put(t, mma_scores, causal, type);
    text_put(t, mma_mask, causal, a->scale);
    cuda_put_attention_bias(t, p, a, "row", "col");
    text_put(t, mma_softmax);
    if (forward)
        text_put(t, mma_pv, type, type, type);
    else
        text_put(t, mma_lse_sum);
    text_put(t, mma_gather);
    if (forward)
        text_put(t, mma_store, cuda_mem_type(ot), store);
    if (!forward || a->writes_lse) {
        const char *to = forward ? "lse" : "o";
        text_put(t, mma_lse_store, to, to, to);
    }
    text_put(t, "}\n\n");
}
