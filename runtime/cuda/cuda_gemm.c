/* cuda_gemm.c — the CUDA engine's GEMM steps: each mapped onto cuBLAS (packed operands,
 * batches merged into one strided call), and onto cuBLASLt when it can compute the
 * epilogue too (its descriptors, layouts and the heuristic's algorithms, prepared when the
 * sizes are known; the autotuner picks among them). */
#include "runtime/cuda/cuda_engine_int.h"

/* The epilogues handed to cuBLASLt (0: not handed; the kernel runs after a cuBLAS GEMM).
 * gelu's erf form is not: cuBLASLt has one GELU, believed to be the tanh approximation
 * (test_cuda_run's gelu_tanh case checks it on a GPU; if it fails, this row moves). */
static const cublasLtEpilogue_t lt_epilogue[CU_EPI_COUNT] = {
    [CU_EPI_BIAS] = CUBLASLT_EPILOGUE_BIAS,
    [CU_EPI_RELU_BIAS] = CUBLASLT_EPILOGUE_RELU_BIAS,
    [CU_EPI_GELU_TANH_BIAS] = CUBLASLT_EPILOGUE_GELU_BIAS,
};

static const cudaDataType cuda_dtype[DT_COUNT] = {
    [DT_F32] = CUDA_R_32F, [DT_F16] = CUDA_R_16F, [DT_BF16] = CUDA_R_16BF};

void cuda_lt_drop(CudaEngine *en, LtStep *L)
{
    const CudaCublasLt *lt = en->lt;
    if (L->lc)
        lt->cublasLtMatrixLayoutDestroy(L->lc);
    if (L->lb)
        lt->cublasLtMatrixLayoutDestroy(L->lb);
    if (L->la)
        lt->cublasLtMatrixLayoutDestroy(L->la);
    if (L->desc)
        lt->cublasLtMatmulDescDestroy(L->desc);
    memset(L, 0, sizeof *L);
}

static cublasComputeType_t compute_type(const CudaEngine *en, const CuGemm *cg)
{
    return cg->ab_dt == DT_F32 && en->o.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F;
}

/* Where cuBLAS reads an operand: its buffer, or its packed copy in the scratch. */
static CUdeviceptr operand_addr(const CudaEngine *en, const CuOperand *o, const CuPack *pk,
                                DType dt)
{
    CUdeviceptr base = o->buf >= 0 ? en->addr[o->buf] : en->scratch + (CUdeviceptr)pk->scratch;
    return base + (CUdeviceptr)(o->offset * dtype_info[dt].size);
}

/* The largest power of two (up to 256) dividing an address: cuBLASLt picks algorithms by it. */
static uint32_t alignment(CUdeviceptr a)
{
    uint32_t n = 256;
    while (n > 1 && a % n)
        n /= 2;
    return n;
}

static bool lt_call(cublasStatus_t st, const char *what, char *why, size_t n)
{
    if (st != CUBLAS_STATUS_SUCCESS && !*why)
        snprintf(why, n, "%s: %s", what, cuda_blas_status_name(st));
    return st == CUBLAS_STATUS_SUCCESS;
}

/* The matmul descriptor: transposes, epilogue, bias (f.kind CU_EPI_NONE: plain). */
static bool lt_desc(CudaEngine *en, const CuGemm *cg, CuFusion f, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cublasOperation_t ta = cg->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = cg->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = f.kind ? lt_epilogue[f.kind] : CUBLASLT_EPILOGUE_DEFAULT;
    void *bias = f.kind ? dptr(en->addr[f.bias]) : NULL;
    bool plain = !f.kind;
    return lt_call(lt->cublasLtMatmulDescCreate(&L->desc, compute_type(en, cg), CUDA_R_32F),
                   "cublasLtMatmulDescCreate", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                      sizeof ta), "TRANSA", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                      sizeof tb), "TRANSB", why, n) &&
           lt_call(lt->cublasLtMatmulDescSetAttribute(L->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                      sizeof epi), "EPILOGUE", why, n) &&
           (plain || lt_call(lt->cublasLtMatmulDescSetAttribute(
                                 L->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                             "BIAS_POINTER", why, n));
}

/* Layouts of the stored matrices (before the transposes): A is m x k (k x m transposed),
 * B k x n (n x k), C and D m x n. */
static bool lt_layouts(CudaEngine *en, const CuGemm *cg, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cudaDataType ab = cuda_dtype[cg->ab_dt], c = cuda_dtype[cg->c_dt];
    return lt_call(lt->cublasLtMatrixLayoutCreate(&L->la, ab, cg->a.trans ? cg->k : cg->m,
                                                  cg->a.trans ? cg->m : cg->k, cg->a.ld),
                   "cublasLtMatrixLayoutCreate(A)", why, n) &&
           lt_call(lt->cublasLtMatrixLayoutCreate(&L->lb, ab, cg->b.trans ? cg->n : cg->k,
                                                  cg->b.trans ? cg->k : cg->n, cg->b.ld),
                   "cublasLtMatrixLayoutCreate(B)", why, n) &&
           lt_call(lt->cublasLtMatrixLayoutCreate(&L->lc, c, cg->m, cg->n, cg->c.ld),
                   "cublasLtMatrixLayoutCreate(C)", why, n);
}

/* The heuristic's first LT_TOPK algorithms for these operands' alignments within the
 * workspace (the default runs the first). */
static bool lt_algo(CudaEngine *en, const CuGemm *cg, LtStep *L, char *why, size_t n)
{
    const CudaCublasLt *lt = en->lt;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = WORKSPACE_BYTES;
    uint32_t al[4] = {alignment(operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt)),
                      alignment(operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt)),
                      alignment(en->addr[L->out]), alignment(en->addr[L->out])};
    static const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    bool ok = lt_call(lt->cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate",
                      why, n) &&
              lt_call(lt->cublasLtMatmulPreferenceSetAttribute(
                          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                      "MAX_WORKSPACE_BYTES", why, n);
    for (int i = 0; ok && i < 4; i++)
        ok = lt_call(lt->cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &al[i],
                                                              sizeof al[i]),
                     "MIN_ALIGNMENT", why, n);
    cublasLtMatmulHeuristicResult_t h[LT_TOPK];
    int got = 0;
    ok = ok && lt_call(lt->cublasLtMatmulAlgoGetHeuristic(en->blt, L->desc, L->la, L->lb, L->lc,
                                                          L->lc, pref, LT_TOPK, h, &got),
                       "cublasLtMatmulAlgoGetHeuristic", why, n);
    if (ok && got == 0)
        snprintf(why, n, "cublasLtMatmulAlgoGetHeuristic: no algorithm");
    if (pref)
        lt->cublasLtMatmulPreferenceDestroy(pref);
    if (!ok || got == 0)
        return false;
    for (int i = 0; i < got; i++)
        L->algo[i] = h[i].algo, L->workspace[i] = h[i].workspaceSize;
    L->nalgo = got;
    return true;
}

/* Whether cuBLASLt can take GEMM step s at all: one matrix product (no batches), K > 0. */
bool cuda_lt_eligible(const CudaEngine *en, int s)
{
    const CuGemm *cg = &en->gemm[s];
    return en->lt && cg->batch == 1 && !cg->nouter && !cg->zero && !cg->empty;
}

/* L prepared for step s with fusion f (CU_EPI_NONE: plain, D = C); false with why. */
static bool lt_prepare(CudaEngine *en, int s, CuFusion f, LtStep *L, char *why, size_t n)
{
    const CuGemm *cg = &en->gemm[s];
    L->out = f.kind ? f.out : en->p->step[s].gemm.c.buf;
    L->on = lt_desc(en, cg, f, L, why, n) && lt_layouts(en, cg, L, why, n) &&
            lt_algo(en, cg, L, why, n);
    if (!L->on)
        cuda_lt_drop(en, L);
    return L->on;
}

/* COIL_LOG=info: where step s's epilogue runs and why. declined: NULL when cuBLASLt was
 * not asked (no match, not eligible), "" when it took the GEMM, else its reason. */
static void log_lt(const CudaEngine *en, int s, CuFusion f, const char *declined)
{
    const Gemm *g = &en->p->step[s].gemm;
    const CuGemm *cg = &en->gemm[s];
    const char *epi = g->epilogue >= 0 ? en->p->kernel[g->epilogue].name : NULL;
    if (declined && !*declined) {
        coil_log(LOG_INFO, "cuda step %d: GEMM and epilogue %s on cuBLASLt (%s)", s,
                 epi ? epi : "-", cuda_epilogue_name[f.kind]);
        return;
    }
    const char *why = declined ? declined
                      : !en->lt ? (en->o.no_lt ? "cuBLASLt is off" : "no cuBLASLt library")
                      : cg->batch != 1 || cg->nouter ? "a batched GEMM"
                      : cg->zero ? "K is 0" : cg->empty ? "C is empty"
                      : f.kind == CU_EPI_NONE ? (epi ? "no cuBLASLt form (COIL_LOG=debug says "
                                                       "why)" : "no epilogue")
                      : "cuBLASLt has no such epilogue";
    coil_log(LOG_INFO, "cuda step %d: GEMM on cuBLAS%s%s: %s%s", s, epi ? ", epilogue kernel " : "",
             epi ? epi : "", declined ? "cuBLASLt declined: " : "", why);
}

/* cuBLASLt for step s when its epilogue matches and cuBLASLt takes it; otherwise (no
 * match, batches, K = 0, or cuBLASLt declines: stats.note says why) cuBLAS and the
 * epilogue kernel. */
void cuda_prepare_lt(CudaEngine *en, int s)
{
    const Gemm *g = &en->p->step[s].gemm;
    CuFusion f = cuda_match_epilogue(en->p, g);
    if (!cuda_lt_eligible(en, s) || !lt_epilogue[f.kind]) {
        log_lt(en, s, f, NULL);
        return;
    }
    char why[200] = "";
    bool on = lt_prepare(en, s, f, &en->lts[s], why, sizeof why);
    if (!on)
        snprintf(en->stats.note, sizeof en->stats.note, "step %d: cuBLASLt declined %s: %s", s,
                 cuda_epilogue_name[f.kind], why);
    log_lt(en, s, f, on ? "" : why);
}

/* The plain cuBLASLt call of step s (its epilogue a kernel), for a tuned choice. */
void cuda_prepare_plain(CudaEngine *en, int s)
{
    char why[200] = "";
    if (cuda_lt_eligible(en, s) && !en->ltp[s].on)
        lt_prepare(en, s, (CuFusion){CU_EPI_NONE, -1, -1}, &en->ltp[s], why, sizeof why);
}

bool cuda_map_gemms(CudaEngine *en, const SymBind *sb, Err *e)
{
    const Program *p = en->p;
    for (int s = 0; s < p->nstep; s++) {
        Err why = {0};
        if (p->step[s].kind == STEP_GEMM && !cuda_gemm_map(p, &p->step[s].gemm, sb, &en->gemm[s],
                                                           &why)) {
            err_set(e, ERR_INPUT, "step %d: %s", s, why.msg);
            return false;
        }
    }
    return true;
}

static bool run_pack(CudaEngine *en, const CuPack *pk, DType dt, Err *e)
{
    if (!pk->needed || pk->numel == 0)
        return true;
    CudaPackArgs a = cuda_pack_args(pk, dt);
    CUdeviceptr src = en->addr[pk->src], dst = en->scratch + (CUdeviceptr)pk->scratch;
    void *args[] = {&src, &dst, &a};
    int64_t blocks = (pk->numel + CUDA_BLOCK - 1) / CUDA_BLOCK, cap = (int64_t)en->info.sms * CUDA_WAVES;
    en->stats.packs++;
    en->stats.launches++;
    return cu_ok(en->cu->cuLaunchKernel(en->pack, (unsigned)(blocks < cap ? blocks : cap), 1, 1,
                                        CUDA_BLOCK, 1, 1, 0, en->stream, args, NULL),
                 "cuLaunchKernel(coil_pack)", e);
}

/* Offsets (elements) of looped batch t in A, B and C. */
static void outer_offsets(const CuGemm *cg, int64_t t, int64_t off[3])
{
    off[0] = off[1] = off[2] = 0;
    for (int j = cg->nouter - 1; j >= 0; j--) {
        int64_t i = t % cg->outer[j];
        t /= cg->outer[j];
        off[0] += i * cg->a.outer_stride[j];
        off[1] += i * cg->b.outer_stride[j];
        off[2] += i * cg->c.outer_stride[j];
    }
}

static bool run_cublas(CudaEngine *en, int s, Err *e)
{
    const CuGemm *cg = &en->gemm[s];
    float one = 1, zero = 0;
    int64_t ea = dtype_info[cg->ab_dt].size, ec = dtype_info[cg->c_dt].size, loops = 1, off[3];
    CUdeviceptr A = operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt);
    CUdeviceptr B = operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt);
    CUdeviceptr C = operand_addr(en, &cg->c, NULL, cg->c_dt);
    cudaDataType ab = cuda_dtype[cg->ab_dt], c = cuda_dtype[cg->c_dt];
    for (int j = 0; j < cg->nouter; j++)
        loops *= cg->outer[j];
    for (int64_t t = 0; t < loops; t++) {
        outer_offsets(cg, t, off);
        cublasStatus_t st = en->bl->cublasGemmStridedBatchedEx(
            en->blas, cg->a.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
            cg->b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)cg->m, (int)cg->n, (int)cg->k, &one,
            dptr(A + (CUdeviceptr)(off[0] * ea)), ab, (int)cg->a.ld, cg->a.stride,
            dptr(B + (CUdeviceptr)(off[1] * ea)), ab, (int)cg->b.ld, cg->b.stride, &zero,
            dptr(C + (CUdeviceptr)(off[2] * ec)), c, (int)cg->c.ld, cg->c.stride, (int)cg->batch,
            compute_type(en, cg), CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) {
            char what[200];
            snprintf(what, sizeof what, "step %d: cublasGemmStridedBatchedEx (m %lld n %lld k %lld, "
                     "batch %lld)", s, (long long)cg->m, (long long)cg->n, (long long)cg->k,
                     (long long)cg->batch);
            return blas_ok(st, what, e);
        }
    }
    return true;
}

static bool run_lt(CudaEngine *en, int s, const LtStep *L, int algo, Err *e)
{
    const CuGemm *cg = &en->gemm[s];
    float one = 1, zero = 0;
    void *D = dptr(en->addr[L->out]);
    cublasStatus_t st = en->lt->cublasLtMatmul(
        en->blt, L->desc, &one, dptr(operand_addr(en, &cg->a, &cg->pack_a, cg->ab_dt)), L->la,
        dptr(operand_addr(en, &cg->b, &cg->pack_b, cg->ab_dt)), L->lb, &zero, D, L->lc, D, L->lc,
        &L->algo[algo], dptr(en->workspace), L->workspace[algo], en->stream);
    char what[100];
    snprintf(what, sizeof what, "step %d: cublasLtMatmul", s);
    return blas_ok(st, what, e);
}

/* The cuBLASLt call step s makes as configured (NULL: cuBLAS), and its algorithm. */
static const LtStep *gemm_lt(const CudaEngine *en, int s, int *algo)
{
    const CudaStepConfig *c = &en->cfg[s];
    const LtStep *fused = &en->lts[s], *plain = &en->ltp[s];
    *algo = 0;
    if (c->path == CUDA_GEMM_CUBLAS)
        return NULL;
    if (c->path == CUDA_GEMM_AUTO)
        return fused->on ? fused : NULL;
    const LtStep *L = fused->on && !c->separate ? fused : plain;
    if (!L->on || c->algo >= L->nalgo)
        return fused->on ? fused : NULL; /* not offered at these sizes: the heuristics */
    *algo = c->algo;
    return L;
}

/* Packs, the product (or zeros when K = 0), then the epilogue kernel unless cuBLASLt did it. */
bool cuda_run_gemm(CudaEngine *en, int s, const SymBind *sb, Err *e)
{
    const Gemm *g = &en->p->step[s].gemm;
    const CuGemm *cg = &en->gemm[s];
    int algo;
    const LtStep *L = gemm_lt(en, s, &algo);
    bool lt = L != NULL, fused = L && L != &en->ltp[s], ok = true;
    if (cg->empty)
        ok = true;
    else if (cg->zero)
        ok = cu_ok(en->cu->cuMemsetD8Async(en->addr[g->c.buf], 0,
                                           (size_t)(cg->c_numel * dtype_info[cg->c_dt].size),
                                           en->stream), "cuMemsetD8Async (C of a GEMM with K = 0)", e);
    else
        ok = run_pack(en, &cg->pack_a, cg->ab_dt, e) && run_pack(en, &cg->pack_b, cg->ab_dt, e) &&
             (lt ? run_lt(en, s, L, algo, e) : run_cublas(en, s, e));
    en->stats.gemm_lt += lt;
    en->stats.gemm_cublas += !lt;
    return ok && (fused || g->epilogue < 0 || cuda_launch(en, g->epilogue, s, sb, e));
}
