/* attention_mma_backward.c — attention's backward on tensor cores, FlashAttention-2's:
 * from Q, K, V, the forward's output O, its gradient dO and each query's log-sum-exp, the
 * probabilities are recomputed tile by tile, never stored whole:
 *
 *   P = exp(scale Q K^T - lse)    dP = dO V^T    dS = scale P (dP - D),  D_i = dO_i . O_i
 *   dV = P^T dO                   dK = dS^T Q    dQ = dS K
 *
 * One launch, two kinds of block (the grid's y: key blocks first, then query blocks), so
 * no gradient is written by two blocks and none needs atomics or a zeroed buffer:
 * - a key block (64 keys, 16 per warp, their rows of K and V held as A fragments) walks
 *   the query tiles that see it (causal: from its diagonal on), with Q and dO staged in
 *   shared memory both as rows (B of S^T = K Q^T and dP^T = V dO^T) and transposed (B of
 *   dV += P^T dO and dK += dS^T Q); S^T's and dP^T's accumulators become P^T's and dS^T's
 *   A fragments in registers, as the forward's P does;
 * - a query block (64 queries, 16 per warp, Q and dO as A fragments) walks the key tiles
 *   it sees, K and V staged as rows and K transposed, recomputing S and dP to sum dQ.
 * The query block repeats two of the key block's five products: FlashAttention-2 sums dQ
 * with atomics instead, which costs a zeroed f32 buffer and a cast after. P and dS are
 * rounded to the inputs' format for their products, as FlashAttention does. Head dims up
 * to ATTENTION_MMA_BACKWARD_MAX_HEAD (registers: a warp's rows of K, V, dK and dV). */
#include "codegen/cuda/cuda.h"
#include "passes/passes.h"

/* Shared: the tile constants, the warp's lanes, the block's kind. */
static const char bwd_setup[] =
    "  enum { D = %lld, BT = 64, NT = %d, RP = D + 8, TP = BT + 8 };\n"
    "  const float SCALE2 = %af, LOG2E = 1.4426950408889634f;\n"
    "  alignas(16) __shared__ coil_h16 sm[4 * BT * RP];\n"
    "  __shared__ float lsq[BT], dsq[BT];\n"
    "  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, warp = threadIdx.x >> 5;\n"
    "  const long long nkb = (tk + BT - 1) / BT;\n"
    "  const bool qvec = coil_vec8(q + off_q, rs_q, cs_q), gvec = coil_vec8(dout + off_dout, rs_dout, cs_dout);\n"
    "  const bool kvec = coil_vec8(k + off_k, rs_k, cs_k), vvec = coil_vec8(v + off_v, rs_v, cs_v);\n"
    "  (void)qvec, (void)gvec, (void)kvec, (void)vvec;\n";

/* A key block: dK and dV of its 64 keys. Per query tile: Q and dO as rows and
 * transposed, each query's lse and D in shared memory. */
static const char bwd_keys[] =
    "  if ((long long)blockIdx.y < nkb) {\n"
    "    coil_h16 *qs = sm, *gs = sm + BT * RP, *qt = sm + 2 * BT * RP, *gt = qt + D * TP;\n"
    "    const long long j0 = (long long)blockIdx.y * BT, kw = j0 + warp * 16;\n"
    "    unsigned ka[D / 16][4], va[D / 16][4];\n"
    "    coil_frag_a<D>(ka, k + off_k, rs_k, cs_k, kw, tk);\n"
    "    coil_frag_a<D>(va, v + off_v, rs_v, cs_v, kw, tk);\n"
    "    float dk[D / 8][4], dv[D / 8][4];\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < D / 8; n++)\n"
    "      #pragma unroll\n"
    "      for (int i = 0; i < 4; i++) dk[n][i] = dv[n][i] = 0.0f;\n"
    "    for (long long q0 = %d ? j0 : 0; q0 < tq; q0 += BT) {\n"
    "      __syncthreads();\n"
    "      const coil_h16 *qq = q + off_q + q0 * rs_q, *gq = dout + off_dout + q0 * rs_dout;\n"
    "      coil_stage<BT, D, RP, false>(qs, qq, rs_q, cs_q, tq - q0, qvec);\n"
    "      coil_stage<BT, D, TP, true>(qt, qq, rs_q, cs_q, tq - q0, qvec);\n"
    "      coil_stage<BT, D, RP, false>(gs, gq, rs_dout, cs_dout, tq - q0, gvec);\n"
    "      coil_stage<BT, D, TP, true>(gt, gq, rs_dout, cs_dout, tq - q0, gvec);\n"
    "      __syncthreads();\n"
    "      { /* D_i = dO_i . O_i: two threads a query, half the row each */\n"
    "        const int i = threadIdx.x >> 1, h = threadIdx.x & 1;\n"
    "        const long long row = q0 + i;\n"
    "        float di = 0.0f;\n"
    "        if (row < tq)\n"
    "          for (int c = h * (D / 2); c < (h + 1) * (D / 2); c++)\n"
    "            di += %s(gs[i * RP + c]) * %s(fo[off_fo + row * rs_fo + c * cs_fo]);\n"
    "        di += coil_shfl_xor(di, 1);\n"
    "        if (h == 0) {\n"
    "          dsq[i] = di;\n"
    "          lsq[i] = row < tq ? lse[off_lse + row * rs_lse] * LOG2E : 0.0f;\n"
    "        }\n"
    "      }\n"
    "      __syncthreads();\n"
    /* S^T = K Q^T, then P^T = exp2(S^T scale log2e - lse log2e), masked */
    "      float st[BT / 8][4], dpt[BT / 8][4];\n"
    "      #pragma unroll\n"
    "      for (int n = 0; n < BT / 8; n++) {\n"
    "        st[n][0] = st[n][1] = st[n][2] = st[n][3] = 0.0f;\n"
    "        dpt[n][0] = dpt[n][1] = dpt[n][2] = dpt[n][3] = 0.0f;\n"
    "        const coil_h16 *qr = qs + (n * 8 + g) * RP + 2 * t4, *gr = gs + (n * 8 + g) * RP + 2 * t4;\n"
    "        #pragma unroll\n"
    "        for (int kk = 0; kk < D / 16; kk++) {\n"
    "          unsigned fq[2], fg[2];\n"
    "          coil_frag_b(fq, qr, kk);\n"
    "          coil_frag_b(fg, gr, kk);\n"
    "          coil_mma_%s(st[n], ka[kk], fq);\n"
    "          coil_mma_%s(dpt[n], va[kk], fg);\n"
    "        }\n"
    "      }\n"
    "      unsigned pa[BT / 16][4], sa[BT / 16][4];\n"
    "      #pragma unroll\n"
    "      for (int n = 0; n < BT / 8; n++) {\n"
    "        float p[4], ds[4];\n"
    "        #pragma unroll\n"
    "        for (int i = 0; i < 4; i++) {\n"
    "          const int c = n * 8 + 2 * t4 + (i & 1);\n"
    "          const long long key = kw + g + 8 * (i >> 1), row = q0 + c;\n"
    "          const bool seen = row < tq && key < tk && !(%d && key > row);\n"
    "          p[i] = seen ? exp2f(st[n][i] * SCALE2 - lsq[c]) : 0.0f;\n"
    "          ds[i] = p[i] * (dpt[n][i] - dsq[c]) * %af;\n"
    "        }\n"
    "        pa[n / 2][(n & 1) * 2] = coil_pack_%s(p[0], p[1]);\n"
    "        pa[n / 2][(n & 1) * 2 + 1] = coil_pack_%s(p[2], p[3]);\n"
    "        sa[n / 2][(n & 1) * 2] = coil_pack_%s(ds[0], ds[1]);\n"
    "        sa[n / 2][(n & 1) * 2 + 1] = coil_pack_%s(ds[2], ds[3]);\n"
    "      }\n"
    /* dV += P^T dO, dK += dS^T Q: B from the transposed tiles */
    "      #pragma unroll\n"
    "      for (int n = 0; n < D / 8; n++) {\n"
    "        const coil_h16 *gr = gt + (n * 8 + g) * TP + 2 * t4, *qr = qt + (n * 8 + g) * TP + 2 * t4;\n"
    "        #pragma unroll\n"
    "        for (int kk = 0; kk < BT / 16; kk++) {\n"
    "          unsigned fg[2], fq[2];\n"
    "          coil_frag_b(fg, gr, kk);\n"
    "          coil_frag_b(fq, qr, kk);\n"
    "          coil_mma_%s(dv[n], pa[kk], fg);\n"
    "          coil_mma_%s(dk[n], sa[kk], fq);\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < D / 8; n++)\n"
    "      #pragma unroll\n"
    "      for (int i = 0; i < 4; i++) {\n"
    "        const long long key = kw + g + 8 * (i >> 1);\n"
    "        const long long at = off_o + key * rs_o + (n * 8 + 2 * t4 + (i & 1)) * cs_o;\n"
    "        if (key < tk) {\n"
    "          o[at + part] = (%s)%s(dk[n][i]);\n"
    "          o[at + 2 * part] = (%s)%s(dv[n][i]);\n"
    "        }\n"
    "      }\n"
    "    return;\n"
    "  }\n";

/* A query block: dQ of its 64 queries, K and V as rows and K transposed per key tile. */
static const char bwd_queries[] =
    "  coil_h16 *ks = sm, *vs = sm + BT * RP, *kt = sm + 2 * BT * RP;\n"
    "  const long long qb = (long long)blockIdx.y - nkb, w0 = qb * BT + warp * 16;\n"
    "  const long long r0 = w0 + g, r1 = r0 + 8;\n"
    "  unsigned qa[D / 16][4], ga[D / 16][4];\n"
    "  coil_frag_a<D>(qa, q + off_q, rs_q, cs_q, w0, tq);\n"
    "  coil_frag_a<D>(ga, dout + off_dout, rs_dout, cs_dout, w0, tq);\n"
    "  float lsr[2], dsr[2], dq[D / 8][4];\n"
    "  #pragma unroll\n"
    "  for (int r = 0; r < 2; r++) { /* D_i: a quarter of the row per lane of its four */\n"
    "    const long long row = r ? r1 : r0;\n"
    "    float di = 0.0f;\n"
    "    if (row < tq)\n"
    "      for (int c = t4 * (D / 4); c < (t4 + 1) * (D / 4); c++)\n"
    "        di += %s(dout[off_dout + row * rs_dout + c * cs_dout]) * %s(fo[off_fo + row * rs_fo + c * cs_fo]);\n"
    "    di += coil_shfl_xor(di, 1);\n"
    "    dsr[r] = di + coil_shfl_xor(di, 2);\n"
    "    lsr[r] = row < tq ? lse[off_lse + row * rs_lse] * LOG2E : 0.0f;\n"
    "  }\n"
    "  #pragma unroll\n"
    "  for (int n = 0; n < D / 8; n++)\n"
    "    dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;\n"
    "  long long kend = tk;\n"
    "  if (%d) { long long last = (qb + 1) * BT; kend = last < tk ? last : tk; }\n"
    "  for (long long j0 = 0; j0 < kend; j0 += BT) {\n"
    "    __syncthreads();\n"
    "    const coil_h16 *kq = k + off_k + j0 * rs_k;\n"
    "    coil_stage<BT, D, RP, false>(ks, kq, rs_k, cs_k, tk - j0, kvec);\n"
    "    coil_stage<BT, D, TP, true>(kt, kq, rs_k, cs_k, tk - j0, kvec);\n"
    "    coil_stage<BT, D, RP, false>(vs, v + off_v + j0 * rs_v, rs_v, cs_v, tk - j0, vvec);\n"
    "    __syncthreads();\n"
    "    if (%d && w0 + 15 < j0) continue;\n"
    "    float sc[BT / 8][4], dp[BT / 8][4];\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < BT / 8; n++) {\n"
    "      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;\n"
    "      dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;\n"
    "      const coil_h16 *kr = ks + (n * 8 + g) * RP + 2 * t4, *vr = vs + (n * 8 + g) * RP + 2 * t4;\n"
    "      #pragma unroll\n"
    "      for (int kk = 0; kk < D / 16; kk++) {\n"
    "        unsigned fk[2], fv[2];\n"
    "        coil_frag_b(fk, kr, kk);\n"
    "        coil_frag_b(fv, vr, kk);\n"
    "        coil_mma_%s(sc[n], qa[kk], fk);\n"
    "        coil_mma_%s(dp[n], ga[kk], fv);\n"
    "      }\n"
    "    }\n"
    "    unsigned sa[BT / 16][4];\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < BT / 8; n++) {\n"
    "      float ds[4];\n"
    "      #pragma unroll\n"
    "      for (int i = 0; i < 4; i++) {\n"
    "        const long long row = i < 2 ? r0 : r1, col = j0 + n * 8 + 2 * t4 + (i & 1);\n"
    "        const bool seen = row < tq && col < tk && !(%d && col > row);\n"
    "        const float p = seen ? exp2f(sc[n][i] * SCALE2 - lsr[i >> 1]) : 0.0f;\n"
    "        ds[i] = p * (dp[n][i] - dsr[i >> 1]) * %af;\n"
    "      }\n"
    "      sa[n / 2][(n & 1) * 2] = coil_pack_%s(ds[0], ds[1]);\n"
    "      sa[n / 2][(n & 1) * 2 + 1] = coil_pack_%s(ds[2], ds[3]);\n"
    "    }\n"
    "    #pragma unroll\n"
    "    for (int n = 0; n < D / 8; n++) {\n"
    "      const coil_h16 *kr = kt + (n * 8 + g) * TP + 2 * t4;\n"
    "      #pragma unroll\n"
    "      for (int kk = 0; kk < BT / 16; kk++) {\n"
    "        unsigned fk[2];\n"
    "        coil_frag_b(fk, kr, kk);\n"
    "        coil_mma_%s(dq[n], sa[kk], fk);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  #pragma unroll\n"
    "  for (int n = 0; n < D / 8; n++)\n"
    "    #pragma unroll\n"
    "    for (int i = 0; i < 4; i++) {\n"
    "      const long long row = i < 2 ? r0 : r1;\n"
    "      if (row < tq)\n"
    "        o[off_o + row * rs_o + (n * 8 + 2 * t4 + (i & 1)) * cs_o] = (%s)%s(dq[n][i]);\n"
    "    }\n"
    "}\n\n";

bool cuda_attention_mma_backward_fits(const Program *p, const Attention *a)
{
    DType dt = p->buf[a->q.buf].dt;
    const GemmOperand *same[4] = {&a->k, &a->v, &a->fo, &a->dout};
    for (int i = 0; i < 4; i++)
        if (p->buf[same[i]->buf].dt != dt)
            return false;
    return a->kind == ATTN_BACKWARD && (dt == DT_F16 || dt == DT_BF16) && a->d == a->dv &&
           a->d > 0 && a->d % 16 == 0 && a->d <= ATTENTION_MMA_BACKWARD_MAX_HEAD &&
           p->buf[a->lse.buf].dt == DT_F32;
}

void cuda_put_attention_mma_backward(Text *t, const Program *p, int s, const char *prefix)
{
    const Attention *a = &p->step[s].attn;
    DType dt = p->buf[a->q.buf].dt, ot = p->buf[a->o.buf].dt;
    const char *type = dt == DT_F16 ? "f16" : "bf16";
    const char *load = dt == DT_F16 ? "coil_f16_to_f32" : "coil_bf16_to_f32";
    const char *ld_o = cuda_load_fn(p->buf[a->fo.buf].dt);
    const char *mem = cuda_mem_type(ot), *store = cuda_store_fn(ot);
    int causal = a->causal ? 1 : 0;
    cuda_put_attention_head(t, p, s, prefix, "_mma", CUDA_ATTN_MMA_THREADS);
    text_put(t, bwd_setup, (long long)a->d, CUDA_ATTN_MMA_THREADS, a->scale * 1.4426950408889634);
    text_put(t, bwd_keys, causal, load, ld_o, type, type, causal, a->scale, type, type, type, type,
             type, type, mem, store, mem, store);
    text_put(t, bwd_queries, load, ld_o, causal, causal, type, type, causal, a->scale, type, type,
             type, mem, store);
}
