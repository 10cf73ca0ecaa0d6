/* cuda_optim_kernels.c — the device optimizer's kernels as CUDA C++ text, and what the host
 * decides for them without a GPU: the chunk list and the rounded hyper-parameters. */
#include <math.h>

#include "runtime/cuda/cuda_optim.h"

_Static_assert(OPT_ADAMW == 0 && OPT_SGD == 1 && OPT_LION == 2,
               "the kernels' kind numbers are OptKind's");
_Static_assert(ROLE_PLAIN == 0 && ROLE_DECAY == 1 && ROLE_BUFFER == 2,
               "the kernels' role numbers are ParamRole's");

#define STR_(...) #__VA_ARGS__
#define STR(...) STR_(__VA_ARGS__)

/* Each update is optim.c's, operation for operation, in f32 (no FMA contraction: the
 * module is compiled with --fmad=false). The norm: squares summed in f64 (as optim.c sums
 * them, so the two agree to f64's rounding, not f32's), per thread, over the block in a
 * tree, then the partials in index order: a fixed order, so a resumed run is
 * bit-identical, and the same on every GPU. */
const char cuda_optim_source[] =
    "// the device optimizer (runtime/cuda/cuda_optim_kernels.c)\n"
    STR(CUDA_OPTIM_TYPES) "\n"
    "#define COIL_OPT_CHUNK " STR(CUDA_OPTIM_CHUNK) "LL\n"
    "#define COIL_OPT_THREADS " STR(CUDA_OPTIM_THREADS) "\n"
    "\n"
    "// The block's sum, to every thread: a tree over shared memory, the same order each time.\n"
    "__device__ double coil_opt_block_sum(double x)\n"
    "{\n"
    "  __shared__ double part[COIL_OPT_THREADS];\n"
    "  part[threadIdx.x] = x;\n"
    "  __syncthreads();\n"
    "  for (unsigned s = COIL_OPT_THREADS / 2; s > 0; s >>= 1) {\n"
    "    if (threadIdx.x < s)\n"
    "      part[threadIdx.x] += part[threadIdx.x + s];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  double r = part[0];\n"
    "  __syncthreads(); // the next call writes part again\n"
    "  return r;\n"
    "}\n"
    "\n"
    "__device__ long long coil_opt_end(const CoilOptTensor &t, const CoilOptChunk &c)\n"
    "{\n"
    "  return c.start + COIL_OPT_CHUNK < t.numel ? c.start + COIL_OPT_CHUNK : t.numel;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(COIL_OPT_THREADS) coil_optim_norm(\n"
    "    const CoilOptTensor *__restrict__ t, const CoilOptChunk *__restrict__ c, CoilOptHyper h,\n"
    "    double *__restrict__ partial)\n"
    "{\n"
    "  double sum = 0;\n"
    "  for (long long i = blockIdx.x; i < h.nchunks; i += gridDim.x) {\n"
    "    const CoilOptTensor &T = t[c[i].tensor];\n"
    "    const float *g = T.acc ? T.acc : T.g;\n"
    "    if (T.role == 2)\n"
    "      continue; // a buffer's new value, not a gradient\n"
    "    for (long long k = c[i].start + threadIdx.x; k < coil_opt_end(T, c[i]); k += COIL_OPT_THREADS)\n"
    "      sum += (double)g[k] * g[k];\n"
    "  }\n"
    "  sum = coil_opt_block_sum(sum);\n"
    "  if (threadIdx.x == 0)\n"
    "    partial[blockIdx.x] = sum;\n"
    "}\n"
    "\n"
    "__device__ void coil_opt_assign(const CoilOptTensor &T, long long k0, long long end, float scale)\n"
    "{\n"
    "  const float *g = T.acc ? T.acc : T.g;\n"
    "  for (long long k = k0; k < end; k += COIL_OPT_THREADS)\n"
    "    T.p[k] = g[k] * scale;\n"
    "}\n"
    "\n"
    "__device__ void coil_opt_adamw(const CoilOptTensor &T, long long k0, long long end,\n"
    "                               const CoilOptHyper &h, float scale)\n"
    "{\n"
    "  float *p = T.p, *m = T.m, *v = T.v, wd = T.role == 1 ? h.wd : 0, b1 = h.b1, b2 = h.b2;\n"
    "  const float *g = T.acc ? T.acc : T.g;\n"
    "  for (long long k = k0; k < end; k += COIL_OPT_THREADS) {\n"
    "    float gk = g[k] * scale;\n"
    "    m[k] = b1 * m[k] + (1 - b1) * gk;\n"
    "    v[k] = b2 * v[k] + (1 - b2) * gk * gk;\n"
    "    p[k] -= wd * p[k] + h.step * m[k] / (sqrtf(v[k]) * h.rbc2 + h.eps);\n"
    "  }\n"
    "}\n"
    "\n"
    "__device__ void coil_opt_lion(const CoilOptTensor &T, long long k0, long long end,\n"
    "                              const CoilOptHyper &h, float scale)\n"
    "{\n"
    "  float *p = T.p, *m = T.m, wd = T.role == 1 ? h.wd : 0, b1 = h.b1, b2 = h.b2;\n"
    "  const float *g = T.acc ? T.acc : T.g;\n"
    "  for (long long k = k0; k < end; k += COIL_OPT_THREADS) {\n"
    "    float gk = g[k] * scale, u = b1 * m[k] + (1 - b1) * gk;\n"
    "    p[k] -= wd * p[k] + h.lr * (float)((u > 0) - (u < 0));\n"
    "    m[k] = b2 * m[k] + (1 - b2) * gk;\n"
    "  }\n"
    "}\n"
    "\n"
    "__device__ void coil_opt_sgd(const CoilOptTensor &T, long long k0, long long end,\n"
    "                             const CoilOptHyper &h, float scale)\n"
    "{\n"
    "  float *p = T.p, *m = T.m, wd = T.role == 1 ? h.wd : 0, mu = h.mu;\n"
    "  const float *g = T.acc ? T.acc : T.g;\n"
    "  for (long long k = k0; k < end; k += COIL_OPT_THREADS) {\n"
    "    float gk = g[k] * scale;\n"
    "    if (m) {\n"
    "      m[k] = mu * m[k] + gk;\n"
    "      gk = m[k];\n"
    "    }\n"
    "    p[k] -= wd * p[k] + h.lr * gk;\n"
    "  }\n"
    "}\n"
    "\n"
    "// Every block finishes the norm from the partials (the same sum in the same order), so\n"
    "// clipping and the skip need neither a third launch nor the host.\n"
    "extern \"C\" __global__ void __launch_bounds__(COIL_OPT_THREADS) coil_optim_update(\n"
    "    const CoilOptTensor *__restrict__ t, const CoilOptChunk *__restrict__ c, CoilOptHyper h,\n"
    "    const double *__restrict__ partial, double *__restrict__ norm_out)\n"
    "{\n"
    "  double sum = 0;\n"
    "  for (long long i = threadIdx.x; i < h.npartial; i += COIL_OPT_THREADS)\n"
    "    sum += partial[i];\n"
    "  double norm = sqrt(coil_opt_block_sum(sum)) * h.grad_scale;\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0)\n"
    "    *norm_out = norm;\n"
    "  if (!isfinite(norm))\n"
    "    return; // a step on NaN or inf would ruin every weight: skipped\n"
    "  double scale = h.grad_scale;\n"
    "  if (h.clip > 0 && norm > h.clip)\n"
    "    scale *= h.clip / norm;\n"
    "  for (long long i = blockIdx.x; i < h.nchunks; i += gridDim.x) {\n"
    "    const CoilOptTensor &T = t[c[i].tensor];\n"
    "    long long k0 = c[i].start + threadIdx.x, end = coil_opt_end(T, c[i]);\n"
    "    if (T.role == 2) // a buffer: its new value, unclipped\n"
    "      coil_opt_assign(T, k0, end, (float)h.grad_scale);\n"
    "    else if (h.kind == 0)\n"
    "      coil_opt_adamw(T, k0, end, h, (float)scale);\n"
    "    else if (h.kind == 2)\n"
    "      coil_opt_lion(T, k0, end, h, (float)scale);\n"
    "    else\n"
    "      coil_opt_sgd(T, k0, end, h, (float)scale);\n"
    "  }\n"
    "}\n"
    "\n"
    "// Micro-batches summed as train.c sums them on the host: a copy, then adds.\n"
    "extern \"C\" __global__ void __launch_bounds__(COIL_OPT_THREADS) coil_optim_accumulate(\n"
    "    const CoilOptTensor *__restrict__ t, const CoilOptChunk *__restrict__ c,\n"
    "    long long nchunks, int first)\n"
    "{\n"
    "  for (long long i = blockIdx.x; i < nchunks; i += gridDim.x) {\n"
    "    const CoilOptTensor &T = t[c[i].tensor];\n"
    "    for (long long k = c[i].start + threadIdx.x; k < coil_opt_end(T, c[i]); k += COIL_OPT_THREADS)\n"
    "      T.acc[k] = first ? T.g[k] : T.acc[k] + T.g[k];\n"
    "  }\n"
    "}\n";

int64_t cuda_optim_chunks(const int64_t *numel, int n, CoilOptChunk *out)
{
    int64_t count = 0;
    for (int i = 0; i < n; i++)
        for (int64_t at = 0; at < numel[i]; at += CUDA_OPTIM_CHUNK, count++)
            if (out)
                out[count] = (CoilOptChunk){.tensor = i, .start = at};
    return count;
}

int cuda_optim_partials(int64_t nchunks)
{
    return nchunks < 1 ? 1 : nchunks < CUDA_OPTIM_PARTIALS ? (int)nchunks : CUDA_OPTIM_PARTIALS;
}

/* optim.c's update() computes these per tensor from a float lr and double configuration;
 * the same expressions, once. */
CoilOptHyper cuda_optim_hyper(const OptConfig *c, int64_t steps, double lr, double grad_scale,
                              int64_t nchunks, int npartial)
{
    float lrf = (float)lr;
    CoilOptHyper h = {.grad_scale = grad_scale, .clip = c->clip, .kind = c->kind,
                      .nchunks = nchunks, .npartial = npartial, .lr = lrf,
                      .b1 = (float)c->beta1, .b2 = (float)c->beta2, .eps = (float)c->eps,
                      .wd = (float)(lrf * c->weight_decay), .mu = (float)c->momentum};
    if (c->kind == OPT_ADAMW) {
        double t = (double)steps + 1;
        float bc1 = (float)(1 - pow(c->beta1, t)), bc2 = (float)(1 - pow(c->beta2, t));
        h.step = lrf / bc1;
        h.rbc2 = 1 / sqrtf(bc2);
    }
    return h;
}
