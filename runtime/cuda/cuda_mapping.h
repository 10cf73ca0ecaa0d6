/* cuda_mapping.h — what the CUDA engine decides before it calls the GPU, as pure functions of
 * the Program and the symbol values, so each is tested without a GPU: the NVRTC
 * architecture of a device, each kernel's launch geometry, each GEMM step as a cuBLAS call
 * (column-major operands, transposes, leading dimensions, strided and looped batches, the
 * operands that need a dense copy first), and which epilogue kernels cuBLASLt can fuse.
 * No CUDA header is needed here: every build has these. */
#ifndef COIL_RUNTIME_CUDA_PLAN_H
#define COIL_RUNTIME_CUDA_PLAN_H

#include "codegen/cuda/cuda.h"
#include "codegen/loop.h"

/* ---------------------------------------------------------------- architecture */

/* The NVRTC --gpu-architecture for compute capability major.minor: "sm_86" for 8.6; the
 * arch-specific "sm_90a" / "sm_100a" from 9.0 on (the cubin is built on the device it runs
 * on, so nothing is lost by the features only that architecture has). False below 5.0. */
bool cuda_arch_name(int major, int minor, char *buf, size_t n);

/* ---------------------------------------------------------------- launches */

/* Blocks of CUDA_BLOCK threads a kernel is launched with: a pointwise kernel gets one
 * thread per outer point up to `sms` * CUDA_WAVES blocks (its grid-stride loop does the
 * rest); a kernel with an inner space one block per outer point (row), as many at most.
 * blocks == 0: the kernel has no points and is not launched. A configuration c (NULL: the
 * heuristics) changes the threads, the points per thread and the cap's waves. */
#define CUDA_WAVES 32
typedef struct CudaLaunch {
    int64_t blocks;
    int threads;
} CudaLaunch;
CudaLaunch cuda_launch_dims(const Kernel *k, const SymBind *sb, int sms, const CudaKernelConfig *c);

/* An attention step's grid: x one block per batch element (its batch dims flattened), y
 * one per CUDA_ATTN_QUERIES queries, blocks of CUDA_ATTN_QUERIES threads; x or y 0 when
 * there is nothing to compute. False with e when the queries exceed grid.y's 65535. */
typedef struct CudaGrid {
    int64_t x, y;
    int threads;
} CudaGrid;
bool cuda_attention_dims(const Attention *a, const SymBind *sb, CudaGrid *g, Err *e);

/* ---------------------------------------------------------------- GEMM as cuBLAS */

/* cuBLAS is column-major, coil's C = A B row-major: the engine computes C^T = B^T A^T, so
 * cuBLAS's A is coil's B, its B coil's A, its m coil's N and its n coil's M. An operand
 * whose rows or columns are contiguous is read in place (a row-major one as its transpose:
 * no transpose flag; a column-major one, such as the PyTorch-layout weight W^T, with
 * CUBLAS_OP_T); any other (a step-2 slice, rows overlapping) is first copied dense by the
 * engine's pack kernel into the step's scratch. */
typedef struct CuOperand {
    int buf;          /* program buffer, or -1: the packed copy in the step's scratch */
    int64_t offset;   /* elements from the base of buf (or of the packed copy) */
    bool trans;       /* CUBLAS_OP_T */
    int64_t ld;       /* leading dimension, elements */
    int64_t stride;   /* elements between the strided batch's matrices */
    int64_t outer_stride[COIL_MAX_RANK]; /* per looped batch dimension */
} CuOperand;

/* A dense copy of an operand made before the product: element (i0, ..., i[rank-1]) of
 * the copy (row-major) is source element offset + sum i_d * stride[d]. */
typedef struct CuPack {
    bool needed;
    int rank;
    int64_t size[COIL_MAX_RANK + 2], stride[COIL_MAX_RANK + 2];
    int64_t offset;   /* source element offset */
    int src;          /* source program buffer */
    int64_t numel;
    int64_t scratch;  /* byte offset of the copy in the step's scratch */
} CuPack;

typedef struct CuGemm {
    DType ab_dt, c_dt;       /* operand and result dtypes (f32, f16, bf16) */
    int64_t m, n, k;         /* cuBLAS's: m = coil's N, n = coil's M */
    CuOperand a, b, c;       /* cuBLAS's A (coil's B), B (coil's A), C */
    CuPack pack_a, pack_b;   /* dense copies for cuBLAS's A and B, when needed */
    int64_t batch;           /* matrices in the strided batch (1: none) */
    int nouter;              /* batch dimensions looped around it (strides cannot merge) */
    int64_t outer[COIL_MAX_RANK];
    int64_t scratch_bytes;   /* for the packed copies */
    int64_t c_numel;         /* elements of C (every batch) */
    bool zero;               /* K == 0: C is zeros, no product */
    bool empty;              /* C has no elements: nothing to do */
} CuGemm;

/* The cuBLAS call(s) for GEMM step g of p at these symbol values. Errors: operands that
 * are not f32, f16 or bf16 or differ in dtype, a C that is not dense, sizes beyond cuBLAS's
 * int range. */
bool cuda_gemm_map(const Program *p, const Gemm *g, const SymBind *sb, CuGemm *out, Err *e);

/* The pack kernel's argument (by value; the same layout in the generated source): copy
 * numel elements of elem_bytes (2 or 4) so that element i of the dense copy, i split
 * row-major by size[0..rank), is source element offset + sum i_d * stride[d]. */
#define CUDA_PACK_RANK (COIL_MAX_RANK + 2)
typedef struct CudaPackArgs {
    long long numel, rank, elem_bytes, offset;
    long long size[CUDA_PACK_RANK], stride[CUDA_PACK_RANK];
} CudaPackArgs;
CudaPackArgs cuda_pack_args(const CuPack *pk, DType dt);
/* The helper kernels' CUDA C++ (coil_pack), appended to cuda_source's by the engine. */
extern const char cuda_helper_source[];

/* ---------------------------------------------------------------- cuBLASLt epilogues */

/* A GEMM's epilogue kernel that cuBLASLt computes inside the product: exactly
 *     out[r, n] = act(C[r, n] + bias[n])     act: none, relu, gelu (erf), gelu_tanh
 * with bias a vector of N elements and out a dense [rows, N] buffer of C's dtype, and C not
 * read by any later step (or out is C). Which of these the engine hands to cuBLASLt is its
 * own table (cuda_engine.c): cuBLASLt has one GELU. */
typedef enum CuEpilogue {
    CU_EPI_NONE,
    CU_EPI_BIAS,
    CU_EPI_RELU_BIAS,
    CU_EPI_GELU_BIAS,      /* gelu, the erf form */
    CU_EPI_GELU_TANH_BIAS, /* gelu_tanh */
    CU_EPI_COUNT
} CuEpilogue;

typedef struct CuFusion {
    CuEpilogue kind;
    int bias, out;  /* program buffers */
} CuFusion;

CuFusion cuda_match_epilogue(const Program *p, const Gemm *g);
extern const char *const cuda_epilogue_name[CU_EPI_COUNT];

#endif
