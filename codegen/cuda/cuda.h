/* cuda.h — the CUDA backend's code generation: a Program's loop kernels as one CUDA C++
 * translation unit (emit.c), compiled at run time by NVRTC to a cubin for a GPU
 * architecture, with a cache on disk (nvrtc.c). NVRTC is opened with dlopen: nothing here
 * needs a GPU, and a machine without the CUDA toolkit gets a clear error, not a crash. */
#ifndef COIL_CODEGEN_CUDA_H
#define COIL_CODEGEN_CUDA_H

#include "codegen/loop.h"

/* How each kernel of the source is launched: a pointwise kernel is a grid-stride loop over
 * its outer points, one thread each; a kernel with an inner space walks one outer point per
 * block (grid-stride over the points), its threads striding over the inner space and
 * meeting in block reductions between phases. Every kernel has the signature
 *     extern "C" __global__ void NAME(void *const *bufs, const long long *syms)
 * with bufs[i] the device address of program buffer i and syms[s] symbol s's value, both
 * tables in device memory. */
typedef enum CudaShape { CUDA_POINTWISE, CUDA_ROWS } CudaShape;

/* The block size a kernel of this shape is compiled for (its __launch_bounds__). */
#define CUDA_BLOCK 256

/* A kernel's launch configuration, what the GPU autotuner varies: threads per block (the
 * kernel's __launch_bounds__); for a pointwise kernel the outer points each thread takes
 * per pass of its grid-stride loop (unrolled, a block's threads on consecutive points for
 * each, so loads stay coalesced and a thread has `items` independent chains in flight);
 * and the grid's cap, in blocks per streaming multiprocessor. Zeros: the heuristics
 * (CUDA_BLOCK threads, 1 item, CUDA_WAVES). */
typedef struct CudaKernelConfig {
    int threads, items, waves;
} CudaKernelConfig;

/* The compiled variants: every (threads, items) pair of these (items only for pointwise
 * kernels) but the default, each a kernel of its own, "<name>__t<threads>_i<items>". */
#define CUDA_VARIANT_THREADS {128, 256, 512, 1024}
#define CUDA_VARIANT_ITEMS {1, 2, 4}
void cuda_variant_name(const Kernel *k, const CudaKernelConfig *c, char *buf, size_t n);
/* Whether c names a compiled variant other than the default (threads and items). */
bool cuda_variant_is_default(const CudaKernelConfig *c);
/* Kernel k's variants as one source (the prelude first), malloc'd: the autotuner's
 * candidates, compiled once per kernel when first tried, and cached like every cubin. */
char *cuda_variants_source(const Program *p, int k, Err *e);
/* The same with the names prefixed and the prelude optional (cuda_source_part's way). */
char *cuda_variants_part(const Program *p, int k, const char *prefix, bool prelude, Err *e);

/* An attention step s is `coil_attention_<s>` (same signature): one thread per query,
 * CUDA_ATTN_QUERIES queries per block, one batch element per grid.x (batch dims flattened,
 * row-major: grid.x allows 2^31 - 1 of them), grid.y = ceil(Tq / CUDA_ATTN_QUERIES) (at
 * most 65535), keys in tiles of CUDA_ATTN_TILE. A backward step's grid.y is twice that:
 * its key blocks (a thread per key: dK, dV), then its query blocks (dQ). */
#define CUDA_ATTN_QUERIES 64
#define CUDA_ATTN_TILE 32

/* Where it fits (attention_mma.c), step s also has `coil_attention_<s>_mma`: the same
 * grid (CUDA_ATTN_QUERIES queries per block) on CUDA_ATTN_MMA_THREADS threads, Q K^T and
 * P V on tensor cores (mma.sync m16n8k16, f32 accumulators; sm_80 and later). */
#define CUDA_ATTN_MMA_THREADS 128
/* Whether attention a has a tensor-core kernel: Q, K and V (and the backward's O and dO)
 * all f16 or all bf16, head sizes multiples of 16 up to 128 (the backward's up to
 * ATTENTION_MMA_BACKWARD_MAX_HEAD). The backward's grid: key blocks, then query blocks
 * (cuda_attention_dims). */
bool cuda_attention_mma_fits(const Program *p, const Attention *a);
bool cuda_attention_mma_backward_fits(const Program *p, const Attention *a);
/* For the emitters (emit.c, attention_mma.c): attention step s's kernel signature (the
 * name prefix, coil_attention_<s>, suffix), its operands' pointers, sizes, batch indices,
 * offsets (off_q...) and strides (rs_q, cs_q...); a size from the symbol table; the type a
 * dtype is stored as; the tensor-core kernel. */
void cuda_put_attention_head(Text *t, const Program *p, int s, const char *prefix,
                             const char *suffix, int threads);
void cuda_put_dim(Text *t, Dim d);
/* The bias at (row, col) as a float expression ("0.0f" without one): C expressions. */
void cuda_put_attention_bias(Text *t, const Program *p, const Attention *a, const char *row,
                             const char *col);
const char *cuda_mem_type(DType dt);
/* A stored element's conversion to float, and back ("" for f32): C function names. */
const char *cuda_load_fn(DType dt);
const char *cuda_store_fn(DType dt);
void cuda_put_attention_mma(Text *t, const Program *p, int s, const char *prefix);
void cuda_put_attention_mma_backward(Text *t, const Program *p, int s, const char *prefix);
/* attention_lse's and attention_grad's kernels on CUDA cores (attention_train.c). */
void cuda_put_attention_train(Text *t, const Program *p, int s, const char *prefix);

/* The program's kernels (GEMM steps are the runtime's: cuBLAS) as CUDA C++ source,
 * malloc'd; NULL with e set when a kernel cannot be expressed. */
char *cuda_source(const Program *p, Err *e);
/* The same with every kernel's name prefixed and the prelude (device helpers) optional:
 * several programs in one translation unit (tests compile every op fixture at once). */
char *cuda_source_part(const Program *p, const char *prefix, bool prelude, Err *e);
/* The device helpers every source starts with (cuda_source includes them). */
extern const char cuda_prelude[];
CudaShape cuda_shape(const Kernel *k);

/* ---------------------------------------------------------------- NVRTC */

typedef struct CudaCompileOptions {
    const char *arch;      /* "sm_80", "sm_90a", ... */
    const char *cache_dir; /* cubins by content; NULL: $COIL_CACHE_DIR, else
                              $XDG_CACHE_HOME/coil, else ~/.cache/coil; "" disables */
    bool full_opt;         /* NVRTC's full optimisation (max-autotune); else, where NVRTC
                              has it (12.8 on), --Ofast-compile=min: GPT-2's 61 kernels
                              compile in 1.9 s instead of 6.2 on a 2-core host */
    bool no_fmad;          /* --fmad=false: every multiply and add rounded on its own, as
                              the host's C rounds them (the device optimizer, which must
                              agree with runtime/cpu/cpu_optim.c's update to the last bit) */
} CudaCompileOptions;

typedef struct Cubin {
    void *data;
    size_t size;
    bool cached;     /* read from the cache: NVRTC did not run */
    double seconds;  /* in NVRTC (0 when cached) */
} Cubin;

/* A cubin file (a package's kernels), checked to be an ELF object; cached set. */
bool cubin_read(const char *path, Cubin *out, Err *e);
/* Whether NVRTC can be loaded here; *why gets the reason when not. */
bool nvrtc_available(const char **why);
/* NVRTC's version, as "13.0" (into buf). */
const char *nvrtc_version(char *buf, size_t n);
/* The libnvrtc file opened (codegen/cuda/libs.h says where it is looked for; $COIL_LIBNVRTC
 * names one), NULL when none. */
const char *nvrtc_library(void);
/* Compile source (named `name` in messages) to a cubin for o->arch. A compile error
 * writes the source to a file whose path the message names. */
bool nvrtc_compile(const char *source, const char *name, const CudaCompileOptions *o, Cubin *out,
                   Err *e);
void cubin_free(Cubin *c);
/* PTX instead of a cubin (for --emit=ptx), malloc'd text. */
char *nvrtc_ptx(const char *source, const char *name, const CudaCompileOptions *o, Err *e);

#endif
