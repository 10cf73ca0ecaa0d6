/* cuda_mapping.c — the CUDA engine's decisions that need no GPU: architecture names, launch
 * geometry, GEMM steps as cuBLAS calls (row-major operands read as column-major ones,
 * batch dimensions merged into one strided batch where their strides compose) and the
 * epilogue kernels cuBLASLt can compute. Pure functions of the Program and symbol values. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "codegen/cuda/cuda.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_mapping.h"

#define PACK_ALIGN 256 /* cuMemAlloc's alignment: the fastest cuBLAS kernels want it */

bool cuda_arch_name(int major, int minor, char *buf, size_t n)
{
    if (major < 5 || minor < 0 || minor > 9)
        return false;
    snprintf(buf, n, "sm_%d%d%s", major, minor, major >= 9 ? "a" : "");
    return true;
}

CudaLaunch cuda_launch_dims(const Kernel *k, const SymBind *sb, int sms, const CudaKernelConfig *c)
{
    int64_t points = 1;
    for (int d = 0; d < k->nouter; d++)
        points *= dim_value(k->size[d], sb);
    int threads = c && c->threads ? c->threads : CUDA_BLOCK;
    int64_t per_block = (int64_t)threads * (c && c->items > 1 ? c->items : 1);
    int64_t cap = (int64_t)(sms > 0 ? sms : 1) * (c && c->waves ? c->waves : CUDA_WAVES);
    int64_t want = cuda_shape(k) == CUDA_ROWS ? points : (points + per_block - 1) / per_block;
    return (CudaLaunch){want < cap ? want : cap, threads};
}

bool cuda_attention_dims(const Attention *a, const SymBind *sb, CudaGrid *g, Err *e)
{
    int64_t batch = 1, tq = dim_value(a->tq, sb);
    for (int d = 0; d < a->nbatch; d++)
        batch *= dim_value(a->batch[d], sb);
    int64_t blocks = (tq + CUDA_ATTN_QUERIES - 1) / CUDA_ATTN_QUERIES;
    /* the backward's key blocks, then its query blocks (tq = tk) */
    *g = (CudaGrid){batch, a->kind == ATTN_BACKWARD ? 2 * blocks : blocks, CUDA_ATTN_QUERIES};
    if (g->y <= 65535 && g->x <= INT_MAX)
        return true;
    err_set(e, ERR_INPUT, "attention over %lld queries and %lld batch elements exceeds the "
            "CUDA grid (at most %d queries, 2^31 - 1 batch elements)", (long long)tq,
            (long long)batch, 65535 * CUDA_ATTN_QUERIES);
    return false;
}

/* ---------------------------------------------------------------- GEMM */

/* An operand at concrete sizes: element (t..., r, c) at off + sum t_d bs[d] + r rs + c cs. */
typedef struct View {
    int buf;
    int64_t rows, cols, off, rs, cs, bs[COIL_MAX_RANK];
} View;

static View view_of(const GemmOperand *o, int nb, const SymBind *sb, int64_t rows, int64_t cols)
{
    View v = {.buf = o->buf, .rows = rows, .cols = cols, .off = dim_value(o->offset, sb),
              .rs = dim_value(o->row_stride, sb), .cs = dim_value(o->col_stride, sb)};
    for (int d = 0; d < nb; d++)
        v.bs[d] = dim_value(o->batch_stride[d], sb);
    return v;
}

/* How cuBLAS reads v in place: rows contiguous (row-major: cuBLAS sees the transpose, so
 * no flag, ld = the row stride) or columns contiguous (column-major: CUBLAS_OP_T, ld = the
 * column stride). A dimension of extent 1 has no meaningful stride. False: neither. */
static bool blas_layout(const View *v, bool *trans, int64_t *ld)
{
    int64_t r = v->rows > 1 ? v->rows : 1, c = v->cols > 1 ? v->cols : 1;
    if ((v->cols <= 1 || v->cs == 1) && (v->rows <= 1 || v->rs >= c)) {
        *trans = false;
        *ld = v->rows <= 1 ? c : v->rs;
        return true;
    }
    if ((v->rows <= 1 || v->rs == 1) && (v->cols <= 1 || v->cs >= r)) {
        *trans = true;
        *ld = v->cols <= 1 ? r : v->cs;
        return true;
    }
    return false;
}

/* v copied dense ([batch..., rows, cols], row-major) at byte `at` of the scratch. */
static void pack_view(View *v, CuPack *pk, const int64_t *batch, int nb, DType dt, int64_t *at)
{
    *pk = (CuPack){.needed = true, .rank = nb + 2, .offset = v->off, .src = v->buf,
                   .scratch = *at};
    for (int d = 0; d < nb; d++)
        pk->size[d] = batch[d], pk->stride[d] = v->bs[d];
    pk->size[nb] = v->rows, pk->stride[nb] = v->rs;
    pk->size[nb + 1] = v->cols, pk->stride[nb + 1] = v->cs;
    View dense = {.buf = -1, .rows = v->rows, .cols = v->cols, .rs = v->cols, .cs = 1};
    int64_t n = v->rows * v->cols;
    for (int d = nb - 1; d >= 0; d--) {
        dense.bs[d] = n;
        n *= batch[d];
    }
    pk->numel = n;
    *v = dense;
    int64_t bytes = n * dtype_info[dt].size;
    *at += (bytes + PACK_ALIGN - 1) / PACK_ALIGN * PACK_ALIGN;
}

static CuOperand operand_of(const View *v, bool trans, int64_t ld)
{
    return (CuOperand){.buf = v->buf, .offset = v->off, .trans = trans, .ld = ld};
}

/* Batch dimensions of extent > 1, merged where every operand's strides compose (outer
 * stride = inner stride * inner extent): the innermost group is cuBLAS's strided batch,
 * the others loop around it. */
static void merge_batches(CuGemm *cg, const int64_t *batch, int nb, const View *const v[3])
{
    CuOperand *op[3] = {&cg->a, &cg->b, &cg->c};
    int64_t gsize[COIL_MAX_RANK], gstride[3][COIL_MAX_RANK];
    int ng = 0;
    for (int d = nb - 1; d >= 0; d--) {
        if (batch[d] == 1)
            continue;
        bool merge = ng > 0;
        for (int i = 0; i < 3 && merge; i++)
            merge = v[i]->bs[d] == gstride[i][ng - 1] * gsize[ng - 1];
        if (merge) {
            gsize[ng - 1] *= batch[d];
            continue;
        }
        gsize[ng] = batch[d];
        for (int i = 0; i < 3; i++)
            gstride[i][ng] = v[i]->bs[d];
        ng++;
    }
    cg->batch = ng ? gsize[0] : 1;
    for (int i = 0; i < 3; i++)
        op[i]->stride = ng ? gstride[i][0] : 0;
    cg->nouter = ng > 0 ? ng - 1 : 0;
    for (int j = 0; j < cg->nouter; j++) { /* outermost first */
        cg->outer[j] = gsize[ng - 1 - j];
        for (int i = 0; i < 3; i++)
            op[i]->outer_stride[j] = gstride[i][ng - 1 - j];
    }
}

/* What cublasGemmStridedBatchedEx and cublasLtMatmul compute with CUBLAS_COMPUTE_32F:
 * A and B of one dtype, C of the same or, from f16 or bf16 operands, f32. An f32 product
 * stored as f16 or bf16 is refused by cuBLAS at run time (CUBLAS_STATUS_NOT_SUPPORTED). */
static bool supported_gemm(DType ab, DType b, DType c)
{
    bool half = ab == DT_F16 || ab == DT_BF16;
    return (ab == DT_F32 || half) && b == ab && (c == ab || (half && c == DT_F32));
}

static bool check_dtypes(const Program *p, const Gemm *g, CuGemm *cg, Err *e)
{
    cg->ab_dt = p->buf[g->a.buf].dt;
    cg->c_dt = p->buf[g->c.buf].dt;
    DType b = p->buf[g->b.buf].dt;
    if (!supported_gemm(cg->ab_dt, b, cg->c_dt)) {
        err_set(e, ERR_INPUT, "cuda gemm: operands %s @ %s -> %s are not supported (A and B of "
                "one dtype, f32, f16 or bf16; C of the same dtype, or f32 from f16 or bf16)",
                dtype_info[cg->ab_dt].name, dtype_info[b].name, dtype_info[cg->c_dt].name);
        return false;
    }
    return true;
}

static bool fits_int(const CuGemm *cg, Err *e)
{
    int64_t v[] = {cg->m, cg->n, cg->k, cg->a.ld, cg->b.ld, cg->c.ld, cg->batch};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (v[i] > INT_MAX) {
            err_set(e, ERR_INPUT, "cuda gemm: %lld x %lld x %lld (batch %lld) exceeds cuBLAS's "
                    "32-bit sizes", (long long)cg->n, (long long)cg->m, (long long)cg->k,
                    (long long)cg->batch);
            return false;
        }
    return true;
}

bool cuda_gemm_map(const Program *p, const Gemm *g, const SymBind *sb, CuGemm *cg, Err *e)
{
    memset(cg, 0, sizeof *cg);
    if (g->conv) { /* B is not in memory: the GPU's pipeline decomposes conv first */
        err_set(e, ERR_INPUT, "a conv step (B read through x's windows) has no CUDA kernel; "
                "decompose conv (the CUDA pipeline's decompose_fused_cuda does)");
        return false;
    }
    if (!check_dtypes(p, g, cg, e))
        return false;
    int64_t M = dim_value(g->m, sb), N = dim_value(g->n, sb), K = dim_value(g->k, sb);
    int64_t batch[COIL_MAX_RANK], nmat = 1;
    for (int d = 0; d < g->nbatch; d++)
        nmat *= batch[d] = dim_value(g->batch[d], sb);
    cg->m = N, cg->n = M, cg->k = K;
    cg->c_numel = nmat * M * N;
    cg->empty = cg->c_numel == 0;
    cg->zero = !cg->empty && K == 0;
    if (cg->empty || cg->zero)
        return true;
    View a = view_of(&g->b, g->nbatch, sb, K, N); /* cuBLAS's A is coil's B */
    View b = view_of(&g->a, g->nbatch, sb, M, K);
    View c = view_of(&g->c, g->nbatch, sb, M, N);
    bool ta = false, tb = false, tc = false;
    int64_t la = 0, lb = 0, lc = 0, at = 0;
    if (!blas_layout(&a, &ta, &la)) {
        pack_view(&a, &cg->pack_a, batch, g->nbatch, cg->ab_dt, &at);
        blas_layout(&a, &ta, &la);
    }
    if (!blas_layout(&b, &tb, &lb)) {
        pack_view(&b, &cg->pack_b, batch, g->nbatch, cg->ab_dt, &at);
        blas_layout(&b, &tb, &lb);
    }
    if (!blas_layout(&c, &tc, &lc) || tc) {
        err_set(e, ERR_INPUT, "cuda gemm: C (buffer '%s') is not row-major (lowering makes it "
                "dense)", p->buf[g->c.buf].name);
        return false;
    }
    cg->scratch_bytes = at;
    cg->a = operand_of(&a, ta, la);
    cg->b = operand_of(&b, tb, lb);
    cg->c = operand_of(&c, false, lc);
    merge_batches(cg, batch, g->nbatch, (const View *const[3]){&a, &b, &c});
    return fits_int(cg, e);
}

/* ---------------------------------------------------------------- epilogues */

const char *const cuda_epilogue_name[CU_EPI_COUNT] = {
    [CU_EPI_NONE] = "none", [CU_EPI_BIAS] = "bias", [CU_EPI_RELU_BIAS] = "relu(bias)",
    [CU_EPI_GELU_BIAS] = "gelu(bias)", [CU_EPI_GELU_TANH_BIAS] = "gelu_tanh(bias)"};

/* The activation applied after the bias, by its op. */
static const struct {
    int op;
    CuEpilogue kind;
} activations[] = {
    {OP_RELU, CU_EPI_RELU_BIAS}, {OP_GELU, CU_EPI_GELU_BIAS},
    {OP_GELU_TANH, CU_EPI_GELU_TANH_BIAS}};

/* The one store of a pointwise kernel over [rows, N], or NULL. */
static const LStmt *single_store(const Kernel *k)
{
    if (k->nouter != 2 || k->ninner != 0 || k->nphase != 0 || k->nstmt != 1 ||
        k->after.count != 1 || k->stmt[k->after.first].kind != ST_STORE ||
        k->stmt[k->after.first].add)
        return NULL;
    return &k->stmt[k->after.first];
}

/* value = [act](C + bias[var1]) in dtype dt; the kind, with the bias buffer, or NONE. */
static CuEpilogue match_value(const Kernel *k, int value, int load, DType dt, int *bias)
{
    CuEpilogue kind = CU_EPI_BIAS;
    const Lx *x = &k->lx[value];
    if (x->kind == LX_UNARY) {
        kind = CU_EPI_NONE;
        for (size_t i = 0; i < sizeof activations / sizeof *activations; i++)
            if (activations[i].op == x->op && x->dt == dt)
                kind = activations[i].kind;
        x = &k->lx[x->a];
    }
    if (kind == CU_EPI_NONE || x->kind != LX_BINARY || x->op != OP_ADD || x->dt != dt)
        return CU_EPI_NONE;
    int other = x->a == load ? x->b : x->b == load ? x->a : -1;
    const Lx *b = other >= 0 ? &k->lx[other] : NULL;
    if (!b || b->kind != LX_LOAD || k->lx[b->a].kind != LX_VAR || k->lx[b->a].i != 1)
        return CU_EPI_NONE;
    *bias = (int)b->i;
    return kind;
}

/* The match, or NONE with *why saying what stops it (for COIL_LOG). */
static CuFusion match_epilogue(const Program *p, const Gemm *g, const char **why)
{
    CuFusion none = {CU_EPI_NONE, -1, -1};
    *why = "no epilogue kernel";
    if (g->epilogue < 0 || g->epi_load < 0)
        return none;
    const Kernel *k = &p->kernel[g->epilogue];
    const LStmt *s = single_store(k);
    DType dt = p->buf[g->c.buf].dt;
    *why = !s ? "not one store over [rows, N]"
           : s->index != k->lx[g->epi_load].a ? "it stores at another index than it reads C"
           : p->buf[s->buf].dt != dt ? "it stores another dtype than C's"
           : g->c_live && s->buf != g->c.buf ? "C is read again after it" : NULL;
    if (*why)
        return none;
    int bias = -1;
    CuEpilogue kind = match_value(k, s->value, g->epi_load, dt, &bias);
    *why = kind == CU_EPI_NONE ? "its value is not [relu|gelu|gelu_tanh](C + bias[n])"
           : bias == g->c.buf || bias == s->buf ? "the bias is C or the output"
           : p->buf[bias].dt != dt ? "the bias has another dtype than C" : NULL;
    if (*why)
        return none;
    return (CuFusion){kind, bias, s->buf};
}

CuFusion cuda_match_epilogue(const Program *p, const Gemm *g)
{
    const char *why;
    CuFusion f = match_epilogue(p, g, &why);
    if (f.kind == CU_EPI_NONE && g->epilogue >= 0)
        coil_log(LOG_DEBUG, "cuda: epilogue %s has no cuBLASLt form: %s",
                 p->kernel[g->epilogue].name, why);
    return f;
}

/* ---------------------------------------------------------------- helper kernels */

CudaPackArgs cuda_pack_args(const CuPack *pk, DType dt)
{
    CudaPackArgs a = {.numel = pk->numel, .rank = pk->rank, .elem_bytes = dtype_info[dt].size,
                      .offset = pk->offset};
    for (int d = 0; d < pk->rank && d < CUDA_PACK_RANK; d++)
        a.size[d] = pk->size[d], a.stride[d] = pk->stride[d];
    return a;
}

/* CoilPackArgs mirrors CudaPackArgs field for field (all long long: no padding to differ). */
#define STR_(x) #x
#define STR(x) STR_(x)
const char cuda_helper_source[] =
    "\n// the CUDA engine's helpers (runtime/cuda/cuda_mapping.c)\n"
    "struct CoilPackArgs {\n"
    "  long long numel, rank, elem_bytes, offset;\n"
    "  long long size[" STR(CUDA_PACK_RANK) "], stride[" STR(CUDA_PACK_RANK) "];\n"
    "};\n"
    "extern \"C\" __global__ void __launch_bounds__(" STR(CUDA_BLOCK) ") coil_pack(\n"
    "    const void *__restrict__ src, void *__restrict__ dst, CoilPackArgs a)\n"
    "{\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.numel;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    long long rest = i, at = a.offset;\n"
    "    for (int d = (int)a.rank - 1; d >= 0; d--) {\n"
    "      at += rest % a.size[d] * a.stride[d];\n"
    "      rest /= a.size[d];\n"
    "    }\n"
    "    if (a.elem_bytes == 4)\n"
    "      ((unsigned *)dst)[i] = ((const unsigned *)src)[at];\n"
    "    else\n"
    "      ((unsigned short *)dst)[i] = ((const unsigned short *)src)[at];\n"
    "  }\n"
    "}\n";

char *cuda_engine_source(const Program *p, Err *e)
{
    char *src = cuda_source(p, e);
    if (!src)
        return NULL;
    size_t n = strlen(src), h = strlen(cuda_helper_source);
    char *all = realloc(src, n + h + 1);
    if (!all) {
        free(src);
        err_set(e, ERR_MEMORY, "cuda: out of memory writing the kernels' source");
        return NULL;
    }
    memcpy(all + n, cuda_helper_source, h + 1);
    return all;
}
