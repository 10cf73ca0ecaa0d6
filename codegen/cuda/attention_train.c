/* attention_train.c — attention's training ops on CUDA cores: attention_lse (each query's
 * log-sum-exp of its scaled, masked scores) and attention_grad (FlashAttention-2's
 * backward: P recomputed from lse, dQ, dK and dV written into one [3, ...] result), a
 * thread per query or key, tiles of CUDA_ATTN_TILE rows through shared memory in f32.
 * The GPU's pipeline keeps these ops whole only where the tensor-core kernels take them
 * (attention_mma.c, attention_mma_backward.c), so these run below sm_80, and as the
 * autotuner's reference ("cores"); the emulator checks them like every kernel. The
 * backward's grid has the key blocks first (a thread per key sums its dK and dV), then the
 * query blocks (a thread per query sums its dQ): no gradient has two writers. */
#include "codegen/cuda/cuda.h"

/* A query's log-sum-exp with a running maximum: no T x T scores, one exp per score. */
static const char lse_kernel[] =
    "  enum { D = %lld, BC = %d, BR = %d };\n"
    "  __shared__ float ks[BC][D];\n"
    "  const long long i = (long long)blockIdx.y * BR + threadIdx.x;\n"
    "  const bool active = i < tq;\n"
    "  float qv[D], m = -COIL_INF, l = 0.0f;\n"
    "  for (int c = 0; c < D; c++)\n"
    "    qv[c] = active ? %s(q[off_q + i * rs_q + c * cs_q]) * %af : 0.0f;\n"
    "  long long kend = tk;\n"
    "  if (%d) { long long last = (long long)(blockIdx.y + 1) * BR; kend = last < tk ? last : tk; }\n"
    "  for (long long j0 = 0; j0 < kend; j0 += BC) {\n"
    "    for (int t = threadIdx.x; t < BC * D; t += BR) {\n"
    "      long long j = j0 + t / D; int c = t %% D;\n"
    "      ks[t / D][c] = j < tk ? %s(k[off_k + j * rs_k + c * cs_k]) : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int jj = 0; active && jj < BC; jj++) {\n"
    "      const long long j = j0 + jj;\n"
    "      if (j >= tk || (%d && j > i)) continue;\n"
    "      float s = 0.0f;\n"
    "      for (int c = 0; c < D; c++) s += qv[c] * ks[jj][c];\n"
    "      if (s > m) l = l * expf(m - s) + 1.0f, m = s;\n"
    "      else l += expf(s - m);\n"
    "    }\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (active) o[off_o + i * rs_o] = m == -COIL_INF ? -COIL_INF : m + logf(l);\n"
    "}\n\n";

/* The backward's tiles: rows of two operands (Q and dO, or K and V) in f32, and per query
 * its log-sum-exp and D = dO . O. */
static const char bwd_setup[] =
    "  enum { D = %lld, BC = %d, BR = %d };\n"
    "  const float SCALE = %af;\n"
    "  __shared__ float sa[BC][D], sb[BC][D], sl[BC], sd[BC];\n"
    "  const long long nkb = (tk + BR - 1) / BR;\n";

/* A thread per key: dK and dV over the queries that see it. */
static const char bwd_keys[] =
    "  if ((long long)blockIdx.y < nkb) {\n"
    "    const long long j = (long long)blockIdx.y * BR + threadIdx.x;\n"
    "    const bool active = j < tk;\n"
    "    float kv[D], vv[D], dk[D], dv[D];\n"
    "    for (int c = 0; c < D; c++) {\n"
    "      kv[c] = active ? %s(k[off_k + j * rs_k + c * cs_k]) : 0.0f;\n"
    "      vv[c] = active ? %s(v[off_v + j * rs_v + c * cs_v]) : 0.0f;\n"
    "      dk[c] = dv[c] = 0.0f;\n"
    "    }\n"
    "    for (long long i0 = %d ? (long long)blockIdx.y * BR : 0; i0 < tq; i0 += BC) {\n"
    "      for (int t = threadIdx.x; t < BC * D; t += BR) {\n"
    "        const long long i = i0 + t / D; const int c = t %% D;\n"
    "        sa[t / D][c] = i < tq ? %s(q[off_q + i * rs_q + c * cs_q]) : 0.0f;\n"
    "        sb[t / D][c] = i < tq ? %s(dout[off_dout + i * rs_dout + c * cs_dout]) : 0.0f;\n"
    "      }\n"
    "      __syncthreads();\n"
    "      for (int t = threadIdx.x; t < BC; t += BR) {\n"
    "        const long long i = i0 + t;\n"
    "        float di = 0.0f;\n"
    "        for (int c = 0; i < tq && c < D; c++) di += sb[t][c] * %s(fo[off_fo + i * rs_fo + c * cs_fo]);\n"
    "        sd[t] = di;\n"
    "        sl[t] = i < tq ? lse[off_lse + i * rs_lse] : 0.0f;\n"
    "      }\n"
    "      __syncthreads();\n"
    "      for (int ii = 0; active && ii < BC; ii++) {\n"
    "        const long long i = i0 + ii;\n"
    "        if (i >= tq || (%d && j > i)) continue;\n"
    "        float s = 0.0f, dp = 0.0f;\n"
    "        for (int c = 0; c < D; c++) s += sa[ii][c] * kv[c], dp += sb[ii][c] * vv[c];\n"
    "        const float p = expf(s * SCALE - sl[ii]), ds = p * (dp - sd[ii]) * SCALE;\n"
    "        for (int c = 0; c < D; c++) dv[c] += p * sb[ii][c], dk[c] += ds * sa[ii][c];\n"
    "      }\n"
    "      __syncthreads();\n"
    "    }\n"
    "    for (int c = 0; active && c < D; c++) {\n"
    "      const long long at = off_o + j * rs_o + c * cs_o;\n"
    "      o[at + part] = (%s)%s(dk[c]);\n"
    "      o[at + 2 * part] = (%s)%s(dv[c]);\n"
    "    }\n"
    "    return;\n"
    "  }\n";

/* A thread per query: dQ over the keys it sees. */
static const char bwd_queries[] =
    "  const long long i = ((long long)blockIdx.y - nkb) * BR + threadIdx.x;\n"
    "  const bool active = i < tq;\n"
    "  float qv[D], gv[D], dq[D], di = 0.0f;\n"
    "  for (int c = 0; c < D; c++) {\n"
    "    qv[c] = active ? %s(q[off_q + i * rs_q + c * cs_q]) : 0.0f;\n"
    "    gv[c] = active ? %s(dout[off_dout + i * rs_dout + c * cs_dout]) : 0.0f;\n"
    "    di += active ? gv[c] * %s(fo[off_fo + i * rs_fo + c * cs_fo]) : 0.0f;\n"
    "    dq[c] = 0.0f;\n"
    "  }\n"
    "  const float li = active ? lse[off_lse + i * rs_lse] : 0.0f;\n"
    "  long long kend = tk;\n"
    "  if (%d) { long long last = ((long long)blockIdx.y - nkb + 1) * BR; kend = last < tk ? last : tk; }\n"
    "  for (long long j0 = 0; j0 < kend; j0 += BC) {\n"
    "    for (int t = threadIdx.x; t < BC * D; t += BR) {\n"
    "      const long long j = j0 + t / D; const int c = t %% D;\n"
    "      sa[t / D][c] = j < tk ? %s(k[off_k + j * rs_k + c * cs_k]) : 0.0f;\n"
    "      sb[t / D][c] = j < tk ? %s(v[off_v + j * rs_v + c * cs_v]) : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int jj = 0; active && jj < BC; jj++) {\n"
    "      const long long j = j0 + jj;\n"
    "      if (j >= tk || (%d && j > i)) continue;\n"
    "      float s = 0.0f, dp = 0.0f;\n"
    "      for (int c = 0; c < D; c++) s += qv[c] * sa[jj][c], dp += gv[c] * sb[jj][c];\n"
    "      const float p = expf(s * SCALE - li), ds = p * (dp - di) * SCALE;\n"
    "      for (int c = 0; c < D; c++) dq[c] += ds * sa[jj][c];\n"
    "    }\n"
    "    __syncthreads();\n"
    "  }\n"
    "  for (int c = 0; active && c < D; c++) o[off_o + i * rs_o + c * cs_o] = (%s)%s(dq[c]);\n"
    "}\n\n";

static const char *load_of(const Program *p, const GemmOperand *o)
{
    return cuda_load_fn(p->buf[o->buf].dt);
}

static void put_lse(Text *t, const Program *p, const Attention *a)
{
    int causal = a->causal ? 1 : 0;
    text_put(t, lse_kernel, (long long)a->d, CUDA_ATTN_TILE, CUDA_ATTN_QUERIES, load_of(p, &a->q),
             a->scale, causal, load_of(p, &a->k), causal);
}

static void put_backward(Text *t, const Program *p, const Attention *a)
{
    int causal = a->causal ? 1 : 0;
    DType ot = p->buf[a->o.buf].dt;
    const char *mem = cuda_mem_type(ot), *store = cuda_store_fn(ot);
    const char *lq = load_of(p, &a->q), *lk = load_of(p, &a->k), *lv = load_of(p, &a->v),
               *lg = load_of(p, &a->dout), *lo = load_of(p, &a->fo);
    text_put(t, bwd_setup, (long long)a->d, CUDA_ATTN_TILE, CUDA_ATTN_QUERIES, a->scale);
    text_put(t, bwd_keys, lk, lv, causal, lq, lg, lo, causal, mem, store, mem, store);
    text_put(t, bwd_queries, lq, lg, lo, causal, lk, lv, causal, mem, store);
}

void cuda_put_attention_train(Text *t, const Program *p, int s, const char *prefix)
{
    const Attention *a = &p->step[s].attn;
    cuda_put_attention_head(t, p, s, prefix, "", CUDA_ATTN_QUERIES);
    if (a->kind == ATTN_LSE)
        put_lse(t, p, a);
    else
        put_backward(t, p, a);
}
