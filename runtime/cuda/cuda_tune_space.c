/* cuda_tune_space.c — the GPU autotuner's candidates, as pure functions of the Program (and
 * of how many algorithms cuBLASLt offers), so they are tested without a GPU. */
#include <string.h>

#include "runtime/cuda/cuda_mapping.h"
#include "runtime/cuda/cuda_tune.h"

enum { K_THREADS, K_ITEMS, K_WAVES, K_PATH, K_ALGO, K_EPI, K_ATTN, K_COUNT };

/* Every knob present, at one value: a step fills in the ones it has. */
static void empty_space(TuneSpace *sp)
{
    memset(sp, 0, sizeof *sp);
    for (int k = 0; k < K_COUNT; k++)
        tune_knob(sp, k, "-", -1, 0), tune_add_value(sp, k, 0, NULL);
}

/* A kernel: threads per block and, pointwise, points per thread (the compiled variants,
 * codegen/cuda), and the grid's cap in blocks per multiprocessor. */
static void kernel_space(TuneSpace *sp, const Kernel *k)
{
    static const int threads[] = CUDA_VARIANT_THREADS, items[] = CUDA_VARIANT_ITEMS;
    static const int waves[] = {4, 8, 16, 64};
    tune_knob(sp, K_THREADS, "threads", -1, 0);
    tune_add_value(sp, K_THREADS, CUDA_BLOCK, NULL);
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++)
        if (threads[i] != CUDA_BLOCK)
            tune_add_value(sp, K_THREADS, threads[i], NULL);
    if (cuda_shape(k) == CUDA_POINTWISE) {
        tune_knob(sp, K_ITEMS, "items", -1, 0);
        for (size_t i = 0; i < sizeof items / sizeof *items; i++)
            tune_add_value(sp, K_ITEMS, items[i], NULL);
    }
    tune_knob(sp, K_WAVES, "waves", -1, 0);
    tune_add_value(sp, K_WAVES, CUDA_WAVES, NULL);
    for (size_t i = 0; i < sizeof waves / sizeof *waves; i++)
        tune_add_value(sp, K_WAVES, waves[i], NULL);
}

/* A GEMM: the heuristics, cuBLAS, or one of cuBLASLt's algorithms, with the epilogue in
 * cuBLASLt (when it has it) or a kernel. Nothing to choose when cuBLASLt takes none. */
static void gemm_space(TuneSpace *sp, const Gemm *g, int nfused, int nplain)
{
    int most = nfused > nplain ? nfused : nplain;
    most = most < TUNE_MAX_VALUES ? most : TUNE_MAX_VALUES;
    if (most == 0)
        return;
    tune_knob(sp, K_PATH, "gemm", -1, 0);
    tune_add_value(sp, K_PATH, CUDA_GEMM_AUTO, "auto");
    tune_add_value(sp, K_PATH, CUDA_GEMM_CUBLAS, "cublas");
    tune_add_value(sp, K_PATH, CUDA_GEMM_LT, "cublaslt");
    tune_knob(sp, K_ALGO, "algo", K_PATH, 2);
    for (int i = 0; i < most; i++)
        tune_add_value(sp, K_ALGO, i, NULL);
    tune_knob(sp, K_EPI, "epilogue", K_PATH, 2);
    /* in cuBLASLt when it offers the epilogue, else (the one value) a kernel after it */
    tune_add_value(sp, K_EPI, nfused ? 0 : 1, nfused ? "cublaslt" : "kernel");
    if (nfused && nplain && g->epilogue >= 0)
        tune_add_value(sp, K_EPI, 1, "kernel");
}

/* Attention: the kernel on CUDA cores (the reference) or on tensor cores, where it fits. */
static void attention_space(TuneSpace *sp, const Program *p, const Attention *a)
{
    if (!cuda_attention_mma_fits(p, a))
        return;
    tune_knob(sp, K_ATTN, "attention", -1, 0);
    tune_add_value(sp, K_ATTN, CUDA_ATTENTION_CORES, "cores");
    tune_add_value(sp, K_ATTN, CUDA_ATTENTION_MMA, "mma");
}

void tune_cuda_space(const Program *p, int s, int nfused, int nplain, TuneSpace *sp)
{
    const Step *st = &p->step[s];
    empty_space(sp);
    if (st->kind == STEP_KERNEL)
        kernel_space(sp, &p->kernel[st->kernel]);
    else if (st->kind == STEP_GEMM)
        gemm_space(sp, &st->gemm, nfused, nplain);
    else if (st->kind == STEP_ATTENTION)
        attention_space(sp, p, &st->attn);
    bool any = false;
    for (int k = 0; k < sp->nknob; k++)
        any = any || sp->knob[k].n > 1;
    if (!any)
        memset(sp, 0, sizeof *sp); /* attention on CUDA cores only, or cuBLASLt takes nothing */
}

CudaStepConfig tune_cuda_config(const TuneSpace *sp, const TunePoint *pt)
{
    if (sp->nknob == 0)
        return (CudaStepConfig){0};
    int64_t path = tune_value(sp, pt, K_PATH);
    bool lt = path == CUDA_GEMM_LT;
    return (CudaStepConfig){
        .kernel = {(int)tune_value(sp, pt, K_THREADS), (int)tune_value(sp, pt, K_ITEMS),
                   (int)tune_value(sp, pt, K_WAVES)},
        .path = (CudaGemmPath)path,
        .algo = lt ? (int)tune_value(sp, pt, K_ALGO) : 0,
        .separate = lt && tune_value(sp, pt, K_EPI) == 1,
        .attention = (CudaAttentionKernel)tune_value(sp, pt, K_ATTN),
    };
}

void tune_cuda_device(const CudaDeviceInfo *d, char *buf, size_t n)
{
    snprintf(buf, n, "cuda %s %s driver %d", d->name, d->arch, d->driver_version);
}
