/* test_cuda_run.c — the CUDA runtime's decisions, without a GPU: NVRTC architecture names,
 * launch geometry, the cuBLASLt epilogue matcher on programs lowered from small graphs,
 * every GEMM step's cuBLAS mapping (transposes, leading dimensions, strided and looped
 * batches, dense copies, the dtypes cuBLAS takes) run on the host as a column-major
 * reference GEMM with the mapped parameters and held against the row-major product, the
 * helper kernels under NVRTC, the libraries' entry points resolving (the driver's against
 * the toolkit's stub) and where they are looked for. What runs on a GPU is test_gpu's. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "codegen/cuda/libs.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_mapping.h"
#include "runtime/cuda/cuda_tune.h"
#include "runtime/device.h"

#define FIXTURE_DIR "tests/models/ops"

static int is_cir(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".cir") == 0;
}

/* ---------------------------------------------------------------- architecture */

static void test_arch(void)
{
    static const struct {
        int major, minor;
        const char *want;
    } cases[] = {{5, 0, "sm_50"},   {7, 5, "sm_75"},     {8, 0, "sm_80"},     {8, 6, "sm_86"},
                 {8, 9, "sm_89"},   {9, 0, "sm_90a"},    {10, 0, "sm_100a"},  {10, 3, "sm_103a"},
                 {12, 0, "sm_120a"}, {12, 1, "sm_121a"}};
    char buf[16];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK(cuda_arch_name(cases[i].major, cases[i].minor, buf, sizeof buf));
        CHECK_STR(buf, cases[i].want);
    }
    CHECK(!cuda_arch_name(3, 5, buf, sizeof buf));
}

/* ---------------------------------------------------------------- launches */

static Kernel kernel_of(int nouter, int ninner, const Dim *size)
{
    Kernel k = {.name = "k", .nouter = nouter, .ninner = ninner};
    if (nouter + ninner > 0) /* no memcpy from NULL, even of nothing */
        memcpy(k.size, size, (size_t)(nouter + ninner) * sizeof *size);
    return k;
}

static void check_launch(Kernel k, const SymBind *sb, int sms, int64_t blocks)
{
    CudaLaunch l = cuda_launch_dims(&k, sb, sms, NULL);
    if (l.blocks != blocks || l.threads != CUDA_BLOCK) {
        fprintf(stderr, "launch of %d outer, %d inner dims on %d SMs: %lld blocks of %d, want "
                "%lld of %d\n", k.nouter, k.ninner, sms, (long long)l.blocks, l.threads,
                (long long)blocks, CUDA_BLOCK);
        check_failures++;
    }
}

static void test_launch(void)
{
    SymBind sb = {.val = {5}, .known = {true}};
    Dim B = {1, 1, 0}, d32 = dim_static(32), big = dim_static(1 << 20), huge = dim_static(1 << 24);
    check_launch(kernel_of(2, 0, (Dim[]){B, d32}), &sb, 132, 1);             /* 160 points */
    check_launch(kernel_of(1, 0, (Dim[]){big}), &sb, 132, 4096);
    check_launch(kernel_of(1, 0, (Dim[]){huge}), &sb, 132, 132 * CUDA_WAVES); /* capped */
    check_launch(kernel_of(2, 0, (Dim[]){d32, dim_static(0)}), &sb, 132, 0);  /* nothing */
    check_launch(kernel_of(0, 0, NULL), &sb, 132, 1);                        /* one point */
    check_launch(kernel_of(1, 1, (Dim[]){dim_static(1000), d32}), &sb, 132, 1000); /* rows */
    check_launch(kernel_of(1, 1, (Dim[]){big, d32}), &sb, 132, 132 * CUDA_WAVES);
    check_launch(kernel_of(2, 1, (Dim[]){B, dim_static(0), d32}), &sb, 132, 0);
    check_launch(kernel_of(1, 1, (Dim[]){B, dim_static(0)}), &sb, 108, 5); /* empty rows run */
    /* configured: threads, points per thread, the cap's waves */
    Kernel pw = kernel_of(1, 0, (Dim[]){big}), rows = kernel_of(1, 1, (Dim[]){big, d32});
    CudaLaunch l = cuda_launch_dims(&pw, &sb, 132, &(CudaKernelConfig){512, 4, 0});
    CHECK(l.threads == 512 && l.blocks == (1 << 20) / 2048);
    l = cuda_launch_dims(&pw, &sb, 132, &(CudaKernelConfig){128, 1, 8});
    CHECK(l.threads == 128 && l.blocks == 132 * 8);
    l = cuda_launch_dims(&rows, &sb, 132, &(CudaKernelConfig){1024, 4, 64}); /* items: pointwise only */
    CHECK(l.threads == 1024 && l.blocks == 132 * 64);
    l = cuda_launch_dims(&pw, &sb, 132, &(CudaKernelConfig){0});
    CHECK(l.threads == CUDA_BLOCK && l.blocks == 4096);
}

/* ---------------------------------------------------------------- programs */

typedef struct Lowered {
    Graph *g;
    Program *p;
} Lowered;

/* Attention decomposed (as training's backward and symbolic head dims have it), so the
 * GEMM layouts of q @ k^T and p @ v are among those checked. */
static const char decomposing_pipeline[] = "verify,decompose,colsum,fold,cse,dce";

static bool lower_graph(Graph *g, const char *label, Lowered *l)
{
    Err e = {0};
    l->g = g;
    l->p = g && run_passes(&l->g, decomposing_pipeline, &e) ? fuse_and_lower(l->g, NULL, &e)
                                                             : NULL;
    if (!l->p) {
        fprintf(stderr, "%s: %s\n", label, e.msg);
        check_failures++;
    }
    return l->p != NULL;
}

static bool lower_text(const char *text, Lowered *l)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), "test.cir", &e);
    if (!g) {
        fprintf(stderr, "%s\n%s\n", e.msg, text);
        check_failures++;
        l->g = NULL, l->p = NULL;
        return false;
    }
    return lower_graph(g, text, l);
}

static void lowered_free(Lowered *l)
{
    program_free(l->p);
    graph_free(l->g);
}

static const Gemm *first_gemm(const Program *p)
{
    for (int s = 0; s < p->nstep; s++)
        if (p->step[s].kind == STEP_GEMM)
            return &p->step[s].gemm;
    return NULL;
}

/* Symbol s bound to 2 + s (B = 2, T = 3, ...): small, distinct. */
static SymBind small_syms(const Graph *g)
{
    SymBind sb = {0};
    for (int s = 0; s < g->nsym; s++)
        sb.val[s] = 2 + s, sb.known[s] = true;
    return sb;
}

/* ---------------------------------------------------------------- the epilogue matcher */

/* y = EPILOGUE over h = x @ W^T (x [B,16], W [32,16] PyTorch's layout, bias b [32]);
 * outputs "%y", or "%y, %h" (the product read later too). */
static char *linear_text(const char *dt, const char *epilogue, const char *outputs)
{
    static char buf[2048];
    char sig[128];
    if (strchr(outputs, ','))
        snprintf(sig, sizeof sig, "y: %s[B,32], h: %s[B,32]", dt, dt);
    else
        snprintf(sig, sizeof sig, "y: %s[B,32]", dt);
    snprintf(buf, sizeof buf,
             "graph @t(%%x: %s[B,16]) -> (%s) {\n"
             "  %%w = param {name=\"w\"} : %s[32,16]\n"
             "  %%b = param {name=\"b\"} : %s[32]\n"
             "  %%wt = transpose %%w {perm=[1,0]} : %s[16,32]\n"
             "  %%h = matmul %%x, %%wt : %s[B,32]\n%s\n"
             "  return %s\n}\n",
             dt, sig, dt, dt, dt, dt, epilogue, outputs);
    return buf;
}

static void check_match(const char *label, const char *dt, const char *epilogue,
                        const char *outputs, CuEpilogue want)
{
    Lowered l;
    if (!lower_text(linear_text(dt, epilogue, outputs), &l))
        return;
    const Gemm *g = first_gemm(l.p);
    CuFusion f = g ? cuda_match_epilogue(l.p, g) : (CuFusion){CU_EPI_NONE, -1, -1};
    if (f.kind != want) {
        char *text = loop_print(l.p);
        fprintf(stderr, "epilogue '%s': matched %s, want %s\n%s\n", label,
                cuda_epilogue_name[f.kind], cuda_epilogue_name[want], text ? text : "");
        free(text);
        check_failures++;
    } else if (want != CU_EPI_NONE) {
        CHECK_STR(l.p->buf[f.bias].name, "b");
        CHECK(l.p->buf[f.out].kind == BUF_OUTPUT && l.p->buf[f.out].index == 0);
    }
    lowered_free(&l);
}

static void test_epilogue_match(void)
{
    static const struct {
        const char *label, *dt, *epilogue, *outputs;
        CuEpilogue want;
    } cases[] = {
        {"bias", "f32", "  %y = add %h, %b : f32[B,32]", "%y", CU_EPI_BIAS},
        {"bias on the left", "f32", "  %y = add %b, %h : f32[B,32]", "%y", CU_EPI_BIAS},
        {"bias in f16", "f16", "  %y = add %h, %b : f16[B,32]", "%y", CU_EPI_BIAS},
        {"relu", "f32", "  %s = add %h, %b : f32[B,32]\n  %y = relu %s : f32[B,32]", "%y",
         CU_EPI_RELU_BIAS},
        {"gelu", "f32", "  %s = add %h, %b : f32[B,32]\n  %y = gelu %s : f32[B,32]", "%y",
         CU_EPI_GELU_BIAS},
        {"gelu_tanh", "f32", "  %s = add %h, %b : f32[B,32]\n  %y = gelu_tanh %s : f32[B,32]",
         "%y", CU_EPI_GELU_TANH_BIAS},
        {"scale", "f32", "  %y = mul %h, %b : f32[B,32]", "%y", CU_EPI_NONE},
        {"subtract", "f32", "  %y = sub %h, %b : f32[B,32]", "%y", CU_EPI_NONE},
        {"self add", "f32", "  %y = add %h, %h : f32[B,32]", "%y", CU_EPI_NONE},
        {"activation first", "f32", "  %s = relu %h : f32[B,32]\n  %y = add %s, %b : f32[B,32]",
         "%y", CU_EPI_NONE},
        {"more after", "f32",
         "  %s = add %h, %b : f32[B,32]\n  %r = relu %s : f32[B,32]\n  %y = mul %r, %b : f32[B,32]",
         "%y", CU_EPI_NONE},
        {"tanh", "f32", "  %s = add %h, %b : f32[B,32]\n  %y = tanh %s : f32[B,32]", "%y",
         CU_EPI_NONE},
        {"product also an output", "f32", "  %y = add %h, %b : f32[B,32]", "%y, %h", CU_EPI_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_match(cases[i].label, cases[i].dt, cases[i].epilogue, cases[i].outputs,
                    cases[i].want);
    /* a bias per row, not per column */
    Lowered l;
    if (lower_text("graph @t(%x: f32[4,16]) -> (y: f32[4,32]) {\n"
                   "  %w = param {name=\"w\"} : f32[16,32]\n"
                   "  %b = param {name=\"b\"} : f32[4,1]\n"
                   "  %h = matmul %x, %w : f32[4,32]\n"
                   "  %y = add %h, %b : f32[4,32]\n  return %y\n}\n", &l)) {
        const Gemm *g = first_gemm(l.p);
        CHECK(g && cuda_match_epilogue(l.p, g).kind == CU_EPI_NONE);
        lowered_free(&l);
    }
}

/* ---------------------------------------------------------------- GEMM mapping */

/* Every program buffer on the host at sb, in its dtype, holding small distinct values. */
static void **host_buffers(const Program *p, const SymBind *sb)
{
    void **bufs = calloc((size_t)p->nbuf + 1, sizeof *bufs);
    for (int b = 0; bufs && b < p->nbuf; b++) {
        int64_t n = dim_value(p->buf[b].numel, sb);
        bufs[b] = calloc((size_t)(n > 0 ? n : 1), (size_t)dtype_info[p->buf[b].dt].size);
        for (int64_t i = 0; bufs[b] && i < n; i++)
            dtype_store(p->buf[b].dt, bufs[b], i, (double)((i * 7 + b * 3) % 13) / 4 - 1.5);
    }
    return bufs;
}

static void host_free(const Program *p, void **bufs)
{
    for (int b = 0; bufs && b < p->nbuf; b++)
        free(bufs[b]);
    free(bufs);
}

/* C as the Gemm defines it, row-major, in f64: out[C's element index]. */
static void reference_gemm(const Program *p, const Gemm *g, const SymBind *sb, void **bufs,
                           double *out)
{
    int64_t M = dim_value(g->m, sb), N = dim_value(g->n, sb), K = dim_value(g->k, sb), nb = 1;
    for (int d = 0; d < g->nbatch; d++)
        nb *= dim_value(g->batch[d], sb);
    const GemmOperand *o[3] = {&g->a, &g->b, &g->c};
    for (int64_t t = 0; t < nb; t++) {
        int64_t off[3], rest = t;
        for (int i = 0; i < 3; i++)
            off[i] = dim_value(o[i]->offset, sb);
        for (int d = g->nbatch - 1; d >= 0; d--) {
            int64_t size = dim_value(g->batch[d], sb), idx = rest % size;
            rest /= size;
            for (int i = 0; i < 3; i++)
                off[i] += idx * dim_value(o[i]->batch_stride[d], sb);
        }
        int64_t rs[3], cs[3];
        for (int i = 0; i < 3; i++)
            rs[i] = dim_value(o[i]->row_stride, sb), cs[i] = dim_value(o[i]->col_stride, sb);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t q = 0; q < K; q++)
                    acc += dtype_load(p->buf[g->a.buf].dt, bufs[g->a.buf], off[0] + i * rs[0] +
                                      q * cs[0]) *
                           dtype_load(p->buf[g->b.buf].dt, bufs[g->b.buf], off[1] + q * rs[1] +
                                      j * cs[1]);
                out[off[2] + i * rs[2] + j * cs[2]] = acc;
            }
    }
}

/* coil_pack on the host, with the kernel's arguments. */
static void host_pack(const CuPack *pk, DType dt, void **bufs, char *scratch)
{
    if (!pk->needed)
        return;
    CudaPackArgs a = cuda_pack_args(pk, dt);
    for (long long i = 0; i < a.numel; i++) {
        long long rest = i, at = a.offset;
        for (int d = (int)a.rank - 1; d >= 0; d--) {
            at += rest % a.size[d] * a.stride[d];
            rest /= a.size[d];
        }
        memcpy(scratch + pk->scratch + i * a.elem_bytes, (char *)bufs[pk->src] + at * a.elem_bytes,
               (size_t)a.elem_bytes);
    }
}

/* What cuBLAS checks of its arguments (CUBLAS_STATUS_INVALID_VALUE otherwise). */
static bool blas_args_valid(const CuGemm *cg)
{
    int64_t ra = cg->a.trans ? cg->k : cg->m, rb = cg->b.trans ? cg->n : cg->k;
    return cg->m >= 0 && cg->n >= 0 && cg->k >= 0 && cg->a.ld >= (ra > 1 ? ra : 1) &&
           cg->b.ld >= (rb > 1 ? rb : 1) && cg->c.ld >= (cg->m > 1 ? cg->m : 1) && cg->batch >= 1;
}

/* One column-major GEMM as cuBLAS defines it: C = op(A) op(B), C m x n. */
static void colmajor_gemm(const CuGemm *cg, DType dt, const void *A, const void *B, double *C)
{
    for (int64_t j = 0; j < cg->n; j++)
        for (int64_t i = 0; i < cg->m; i++) {
            double acc = 0;
            for (int64_t q = 0; q < cg->k; q++) {
                int64_t ia = cg->a.trans ? q + i * cg->a.ld : i + q * cg->a.ld;
                int64_t ib = cg->b.trans ? j + q * cg->b.ld : q + j * cg->b.ld;
                acc += dtype_load(dt, A, ia) * dtype_load(dt, B, ib);
            }
            C[i + j * cg->c.ld] = acc;
        }
}

/* The mapped calls run on the host: packs, then every looped and strided batch. */
static void mapped_gemm(const CuGemm *cg, void **bufs, char *scratch, double *out)
{
    host_pack(&cg->pack_a, cg->ab_dt, bufs, scratch);
    host_pack(&cg->pack_b, cg->ab_dt, bufs, scratch);
    int64_t es = dtype_info[cg->ab_dt].size, loops = 1;
    const char *A = cg->a.buf >= 0 ? bufs[cg->a.buf] : scratch + cg->pack_a.scratch;
    const char *B = cg->b.buf >= 0 ? bufs[cg->b.buf] : scratch + cg->pack_b.scratch;
    for (int j = 0; j < cg->nouter; j++)
        loops *= cg->outer[j];
    for (int64_t t = 0; t < loops; t++) {
        int64_t off[3] = {cg->a.offset, cg->b.offset, cg->c.offset}, rest = t;
        for (int j = cg->nouter - 1; j >= 0; j--) {
            int64_t i = rest % cg->outer[j];
            rest /= cg->outer[j];
            off[0] += i * cg->a.outer_stride[j];
            off[1] += i * cg->b.outer_stride[j];
            off[2] += i * cg->c.outer_stride[j];
        }
        for (int64_t bi = 0; bi < cg->batch; bi++)
            colmajor_gemm(cg, cg->ab_dt, A + (off[0] + bi * cg->a.stride) * es,
                          B + (off[1] + bi * cg->b.stride) * es,
                          out + off[2] + bi * cg->c.stride);
    }
}

/* GEMM step s of p mapped at sb and run both ways; the mapping, or false. */
static bool check_gemm_step(const Program *p, int s, const SymBind *sb, const char *label,
                            CuGemm *cg)
{
    const Gemm *g = &p->step[s].gemm;
    Err e = {0};
    if (!cuda_gemm_map(p, g, sb, cg, &e)) {
        bool int_gemm = !dtype_info[p->buf[g->a.buf].dt].is_float;
        if (!int_gemm)
            fprintf(stderr, "%s step %d: %s\n", label, s, e.msg), check_failures++;
        return false;
    }
    if (cg->empty || cg->zero)
        return true;
    if (!blas_args_valid(cg)) {
        fprintf(stderr, "%s step %d: cuBLAS would reject m %lld n %lld k %lld lda %lld ldb %lld "
                "ldc %lld\n", label, s, (long long)cg->m, (long long)cg->n, (long long)cg->k,
                (long long)cg->a.ld, (long long)cg->b.ld, (long long)cg->c.ld);
        check_failures++;
        return false;
    }
    void **bufs = host_buffers(p, sb);
    int64_t nc = dim_value(p->buf[g->c.buf].numel, sb);
    double *want = malloc((size_t)nc * sizeof *want), *got = malloc((size_t)nc * sizeof *got);
    char *scratch = calloc(1, (size_t)cg->scratch_bytes + 1);
    for (int64_t i = 0; i < nc; i++)
        want[i] = got[i] = NAN;
    reference_gemm(p, g, sb, bufs, want);
    mapped_gemm(cg, bufs, scratch, got);
    int bad = 0;
    for (int64_t i = 0; i < nc; i++)
        if (!check_close(got[i], want[i], 1e-9) && bad++ < 3)
            fprintf(stderr, "%s step %d: C[%lld] = %g through the cuBLAS mapping, %g row-major\n",
                    label, s, (long long)i, got[i], want[i]);
    check_failures += bad > 0;
    free(want), free(got), free(scratch);
    host_free(p, bufs);
    return bad == 0;
}

/* Every GEMM step of a program; how many were checked and how many packed an operand. */
static void check_gemms(const Program *p, const char *label, int *checked, int *packed)
{
    SymBind sb = small_syms(p->graph);
    for (int s = 0; s < p->nstep; s++) {
        CuGemm cg;
        if (p->step[s].kind == STEP_GEMM && check_gemm_step(p, s, &sb, label, &cg)) {
            (*checked)++;
            *packed += cg.pack_a.needed || cg.pack_b.needed;
        }
    }
}

static void test_gemm_fixtures(void)
{
    struct dirent **list;
    int n = scandir(FIXTURE_DIR, &list, is_cir, alphasort), checked = 0, packed = 0;
    for (int i = 0; i < n; i++) {
        char path[1024];
        Err e = {0};
        Lowered l;
        snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, list[i]->d_name);
        if (lower_graph(ir_parse_file(path, &e), path, &l))
            check_gemms(l.p, list[i]->d_name, &checked, &packed);
        lowered_free(&l);
        free(list[i]);
    }
    free(n >= 0 ? list : NULL);
    CHECK(checked >= 10);
    printf("op fixtures: %d GEMM steps mapped to cuBLAS and checked (%d with a dense copy)\n",
           checked, packed);
}

static const CuGemm *gemm_where(const Program *p, const SymBind *sb, int nbatch, int64_t n,
                                int64_t k, CuGemm *cg)
{
    Err e = {0};
    for (int s = 0; s < p->nstep; s++) {
        const Gemm *g = &p->step[s].gemm;
        if (p->step[s].kind == STEP_GEMM && g->nbatch == nbatch && dim_value(g->n, sb) == n &&
            dim_value(g->k, sb) == k)
            return cuda_gemm_map(p, g, sb, cg, &e) ? cg : NULL;
    }
    return NULL;
}

/* GPT-2's layouts: c_attn's x @ W^T, then q @ k^T and p @ v over [B, H] read from the
 * fused qkv buffer [B, T, 3C]: the heads are a strided batch, B loops around it. */
static void test_gpt2_layouts(void)
{
    ModelOptions mo = {.set = (const char *[]){"layers=1", "vocab=512"}, .nset = 2};
    Err e = {0};
    Lowered l;
    int checked = 0, packed = 0;
    if (!lower_graph(model_load("examples/gpt2.coil", &mo, &e), "gpt2", &l))
        return;
    check_gemms(l.p, "gpt2", &checked, &packed);
    SymBind sb = small_syms(l.g); /* B = 2, T = 3 */
    int64_t T = 3, qkv = 2304;
    CuGemm cg;
    const CuGemm *c = gemm_where(l.p, &sb, 0, qkv, 768, &cg); /* x @ W^T: W [2304, 768] */
    CHECK(c && c->a.trans && c->a.ld == 768 && !c->b.trans && c->b.ld == 768 && c->m == qkv &&
          c->n == 2 * T && c->batch == 1 && c->nouter == 0);
    c = gemm_where(l.p, &sb, 2, T, 64, &cg); /* q @ k^T */
    CHECK(c && c->a.trans && c->a.ld == qkv && c->a.offset == 768 && !c->b.trans &&
          c->b.ld == qkv && c->batch == 12 && c->a.stride == 64 && c->b.stride == 64 &&
          c->c.stride == T * T && c->nouter == 1 && c->outer[0] == 2 &&
          c->a.outer_stride[0] == qkv * T && c->c.outer_stride[0] == 12 * T * T);
    c = gemm_where(l.p, &sb, 2, 64, T, &cg); /* p @ v */
    CHECK(c && !c->a.trans && c->a.ld == qkv && c->a.offset == 1536 && !c->b.trans &&
          c->b.ld == T && c->batch == 12 && c->a.stride == 64 && c->b.stride == T * T &&
          c->c.stride == 64 * T && c->nouter == 1 && !c->pack_a.needed && !c->pack_b.needed);
    CHECK(checked == 7 && packed == 0); /* c_attn, q k^T, p v, c_proj, c_fc, c_proj, lm_head */
    lowered_free(&l);
}

/* GPT-2 through the CUDA passes: attention one step, its grid one block per (batch, head)
 * on x and per CUDA_ATTN_QUERIES queries on y; more queries than grid.y holds refused. */
static void test_attention_dims(void)
{
    ModelOptions mo = {.set = (const char *[]){"layers=1", "vocab=512"}, .nset = 2};
    Err e = {0};
    Graph *g = model_load("examples/gpt2.coil", &mo, &e);
    Program *p = g && run_passes(&g, pass_pipeline_cuda, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
    int attn = -1;
    for (int s = 0; p && s < p->nstep; s++)
        attn = p->step[s].kind == STEP_ATTENTION ? s : attn;
    CHECK(p && attn >= 0);
    if (attn >= 0) {
        SymBind sb = small_syms(g); /* B = 2, T = 3 */
        CudaGrid G;
        CHECK(cuda_attention_dims(&p->step[attn].attn, &sb, &G, &e) && G.x == 2 * 12 &&
              G.y == 1 && G.threads == CUDA_ATTN_QUERIES);
        sb.val[graph_sym_find(g, "T", 1)] = 1000;
        CHECK(cuda_attention_dims(&p->step[attn].attn, &sb, &G, &e) && G.y == 16);
        sb.val[graph_sym_find(g, "T", 1)] = 65535LL * CUDA_ATTN_QUERIES + 1;
        CHECK(!cuda_attention_dims(&p->step[attn].attn, &sb, &G, &e) &&
              strstr(e.msg, "exceeds the CUDA grid"));
    }
    program_free(p);
    graph_free(g);
}

/* Layouts written out: x @ W, a batch broadcast over one of two batch dims (a looped
 * batch), a step-2 slice no leading dimension expresses (a dense copy first). */
static void test_gemm_layouts(void)
{
    static const char *const texts[] = {
        "graph @t(%x: f32[B,16]) -> (y: f32[B,32]) {\n  %w = param {name=\"w\"} : f32[16,32]\n"
        "  %y = matmul %x, %w : f32[B,32]\n  return %y\n}\n",
        "graph @t(%a: f32[2,3,4,5], %b: f32[3,5,6]) -> (y: f32[2,3,4,6]) {\n"
        "  %y = matmul %a, %b : f32[2,3,4,6]\n  return %y\n}\n",
        "graph @t(%x: f32[B,16]) -> (y: f32[B,16]) {\n  %w = param {name=\"w\"} : f32[16,32]\n"
        "  %s = slice %w {axis=1, start=0, end=32, step=2} : f32[16,16]\n"
        "  %y = matmul %x, %s : f32[B,16]\n  return %y\n}\n",
        "graph @t(%x: bf16[B,8,16]) -> (y: bf16[B,8,32]) {\n  %w = param {name=\"w\"} : bf16[32,16]\n"
        "  %wt = transpose %w {perm=[1,0]} : bf16[16,32]\n"
        "  %y = matmul %x, %wt : bf16[B,8,32]\n  return %y\n}\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        Lowered l;
        int checked = 0, packed = 0;
        if (!lower_text(texts[i], &l))
            continue;
        check_gemms(l.p, texts[i], &checked, &packed);
        SymBind sb = small_syms(l.g);
        CuGemm cg;
        Err e = {0};
        const Gemm *g = first_gemm(l.p);
        CHECK(checked == 1 && g && cuda_gemm_map(l.p, g, &sb, &cg, &e));
        if (i == 0)
            CHECK(!cg.a.trans && cg.a.ld == 32 && !cg.b.trans && cg.b.ld == 16 && !packed);
        if (i == 1)
            CHECK(cg.batch == 3 && cg.nouter == 1 && cg.outer[0] == 2 && cg.a.outer_stride[0] == 0);
        if (i == 2)
            CHECK(packed == 1 && cg.pack_a.needed && cg.a.buf == -1 && !cg.a.trans &&
                  cg.a.ld == 16 && cg.scratch_bytes >= 16 * 16 * 4);
        if (i == 3)
            CHECK(cg.ab_dt == DT_BF16 && cg.a.trans && cg.n == 2 * 8 && cg.batch == 1);
        lowered_free(&l);
    }
}

/* cuBLAS computes f32 x f32 -> f32 and, from f16 or bf16, their own dtype or f32 (with
 * CUBLAS_COMPUTE_32F); an f32 product stored as bf16 is refused here, not by cuBLAS. */
static void test_gemm_dtypes(void)
{
    static const struct {
        const char *ab;
        DType c;
        bool ok;
    } cases[] = {{"f32", DT_F32, true},  {"f32", DT_BF16, false}, {"f32", DT_F16, false},
                 {"bf16", DT_BF16, true}, {"bf16", DT_F32, true}, {"f16", DT_F32, true},
                 {"f16", DT_BF16, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[512];
        Lowered l;
        snprintf(text, sizeof text, "graph @t(%%x: %s[4,16]) -> (y: %s[4,32]) {\n"
                 "  %%w = param {name=\"w\"} : %s[16,32]\n  %%y = matmul %%x, %%w : %s[4,32]\n"
                 "  return %%y\n}\n", cases[i].ab, cases[i].ab, cases[i].ab, cases[i].ab);
        if (!lower_text(text, &l))
            continue;
        const Gemm *g = first_gemm(l.p);
        SymBind sb = small_syms(l.g);
        CuGemm cg;
        Err e = {0};
        CHECK(g);
        if (g) {
            l.p->buf[g->c.buf].dt = cases[i].c; /* as a lowering that stored it so would */
            CHECK(cuda_gemm_map(l.p, g, &sb, &cg, &e) == cases[i].ok);
            CHECK(cases[i].ok || strstr(e.msg, "are not supported"));
        }
        lowered_free(&l);
    }
}

/* ---------------------------------------------------------------- the helpers and libraries */

static void test_helper_source(void)
{
    Lowered l;
    Err e = {0};
    const char *why;
    if (!lower_text(linear_text("f32", "  %y = add %h, %b : f32[B,32]", "%y"), &l))
        return;
    char *src = cuda_engine_source(l.p, &e);
    CHECK(src && strstr(src, "coil_pack") && strstr(src, l.p->kernel[0].name));
    if (src && nvrtc_available(&why)) {
        CudaCompileOptions o = {.arch = "sm_90a", .cache_dir = ""};
        Cubin c;
        CHECK(nvrtc_compile(src, "helpers.cu", &o, &c, &e));
        if (!err_ok(&e))
            fprintf(stderr, "%s\n", e.msg);
        cubin_free(&c);
    }
    free(src);
    lowered_free(&l);
}

/* ---------------------------------------------------------------- autotuning (no GPU) */

/* The GPU tuner's candidates: a pointwise kernel's threads x items x waves, a row kernel's
 * without items, a GEMM's paths and cuBLASLt algorithms, and points back as configs. */
static void test_tune_space(void)
{
    Lowered l;
    if (!lower_text(linear_text("f32", "  %y = relu %h : f32[B,32]\n  %t = softmax %y : "
                                "f32[B,32]\n  %u = add %t, %y : f32[B,32]", "%u"), &l))
        return;
    const Program *p = l.p;
    int kernels = 0, gemms = 0;
    for (int s = 0; s < p->nstep; s++) {
        TuneSpace sp;
        const Step *st = &p->step[s];
        tune_cuda_space(p, s, 3, 5, &sp);
        if (st->kind == STEP_KERNEL) {
            kernels++;
            bool pointwise = cuda_shape(&p->kernel[st->kernel]) == CUDA_POINTWISE;
            CHECK(sp.knob[0].n == 4 && sp.knob[0].value[0] == CUDA_BLOCK);
            CHECK(sp.knob[1].n == (pointwise ? 3 : 1) && sp.knob[2].n == 5);
            TunePoint pt = {{3, pointwise ? 2 : 0, 1}};
            CudaStepConfig c = tune_cuda_config(&sp, &pt);
            CHECK(c.kernel.threads == 1024 && c.kernel.items == (pointwise ? 4 : 0) &&
                  c.kernel.waves == 4 && c.path == CUDA_GEMM_AUTO);
            char text[128], name[128];
            tune_point_text(&sp, &pt, text, sizeof text);
            TunePoint back;
            CHECK(tune_point_parse(&sp, text, &back) && memcmp(&back, &pt, sizeof pt) == 0);
            cuda_variant_name(&p->kernel[st->kernel], &c.kernel, name, sizeof name);
            CHECK(strstr(name, pointwise ? "__t1024_i4" : "__t1024_i1") != NULL);
        } else if (st->kind == STEP_GEMM) {
            gemms++;
            CHECK(sp.knob[3].n == 3 && sp.knob[4].n == 5);           /* auto, cublas, lt x 5 */
            CHECK(sp.knob[5].n == (st->gemm.epilogue >= 0 ? 2 : 1)); /* fused or a kernel */
            TunePoint pt = {{0, 0, 0, 2, 4, sp.knob[5].n - 1}};
            CudaStepConfig c = tune_cuda_config(&sp, &pt);
            CHECK(c.path == CUDA_GEMM_LT && c.algo == 4 && c.separate == (st->gemm.epilogue >= 0));
            tune_cuda_space(p, s, 0, 0, &sp);
            CHECK(sp.nknob == 0); /* cuBLASLt takes nothing: cuBLAS is all there is */
            tune_cuda_space(p, s, 0, 2, &sp);
            pt = (TunePoint){{0, 0, 0, 2, 1, 0}};
            CHECK(sp.knob[5].n == 1 && tune_cuda_config(&sp, &pt).separate); /* plain only */
        }
    }
    CHECK(kernels >= 1 && gemms == 1);
    lowered_free(&l);
}

/* An attention step's candidates: CUDA cores (the reference) and tensor cores where that
 * kernel fits (bf16, head 64), nothing to choose where it does not (f32). */
static void test_tune_attention(void)
{
    static const char *const dts[] = {"bf16", "f32"};
    for (int i = 0; i < 2; i++) {
        char text[400];
        snprintf(text, sizeof text,
                 "graph @a(%%q: %s[2,70,64], %%k: %s[2,70,64], %%v: %s[2,70,64]) -> (y: %s[2,70,64]) {\n"
                 "  %%y = attention %%q, %%k, %%v {causal=true} : %s[2,70,64]\n  return %%y\n}\n",
                 dts[i], dts[i], dts[i], dts[i], dts[i]);
        Err e = {0};
        Lowered l = {ir_parse(text, strlen(text), "attention.cir", &e), NULL};
        l.p = l.g && run_passes(&l.g, pass_pipeline_cuda, &e) ? fuse_and_lower(l.g, NULL, &e) : NULL;
        if (!l.p) {
            fprintf(stderr, "%s\n", e.msg);
            check_failures++;
            lowered_free(&l);
            return;
        }
        TuneSpace sp;
        tune_cuda_space(l.p, 0, 0, 0, &sp);
        CHECK(l.p->nstep == 1 && l.p->step[0].kind == STEP_ATTENTION);
        if (i == 1) {
            CHECK(sp.nknob == 0);
        } else {
            CHECK(sp.knob[6].n == 2 && strcmp(sp.knob[6].name, "attention") == 0);
            TunePoint pt = {{0}};
            CHECK(tune_cuda_config(&sp, &pt).attention == CUDA_ATTENTION_CORES);
            pt.at[6] = 1;
            CHECK(tune_cuda_config(&sp, &pt).attention == CUDA_ATTENTION_MMA);
        }
        lowered_free(&l);
    }
}

/* Every kernel's variants of GPT-2 (one layer) compile under NVRTC for sm_90a. */
static void test_variants_compile(void)
{
    const char *why;
    Err e = {0};
    ModelOptions mo = {.set = (const char *[]){"layers=1", "vocab=512"}, .nset = 2};
    Graph *g = model_load("examples/gpt2.coil", &mo, &e);
    Program *p = g && run_passes(&g, pass_pipeline_cuda, &e) ? fuse_and_lower(g, NULL, &e) : NULL;
    CHECK(p != NULL);
    int compiled = 0;
    for (int k = 0; p && k < p->nkernel; k++) {
        char *src = cuda_variants_source(p, k, &e), name[160];
        cuda_variant_name(&p->kernel[k], &(CudaKernelConfig){512, 1, 0}, name, sizeof name);
        CHECK(src && strstr(src, name) && strstr(src, "__launch_bounds__(1024)"));
        CHECK(!src || !strstr(src, "__launch_bounds__(256) ") ||
              cuda_shape(&p->kernel[k]) == CUDA_POINTWISE); /* rows: 256 is the default */
        if (src && nvrtc_available(&why)) {
            CudaCompileOptions o = {.arch = "sm_90a", .cache_dir = ""};
            Cubin c = {0};
            bool ok = nvrtc_compile(src, name, &o, &c, &e);
            CHECK(ok);
            if (!ok)
                fprintf(stderr, "%s\n", e.msg);
            compiled += ok;
            cubin_free(&c);
        }
        free(src);
    }
    printf("kernel variants: %d kernels' variants compiled by NVRTC\n", compiled);
    program_free(p);
    graph_free(g);
}

/* The driver's entry points resolve against the toolkit's stub, which then fails cuInit:
 * checked in a child, since the driver is opened once per process (so this runs before
 * anything in this process opens it). */
static void test_stub_driver(void)
{
#ifdef COIL_HAVE_CUDA
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (access(stub, R_OK) != 0)
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("COIL_LIBCUDA", stub, 1);
        const char *why = NULL;
        bool ok = !cuda_driver_available(&why) && why && strstr(why, "cuInit failed") &&
                  strstr(why, "CUDA_ERROR_STUB_LIBRARY") && !strchr(why, '\n');
        if (!ok)
            fprintf(stderr, "with the stub driver: %s\n", why ? why : "(available?)");
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
#endif
}

static void test_libraries(void)
{
    const char *why = NULL;
    bool gpu = cuda_driver_available(&why);
    CHECK(gpu || (why && *why && !strchr(why, '\n')));
#ifdef COIL_HAVE_CUDA
    bool blas = cuda_blas_available(&why);
    if (access("/usr/local/cuda/lib64/libcublas.so.13", R_OK) == 0)
        CHECK(blas);
    printf("cuBLAS and cuBLASLt: %s\n", blas ? "every entry point resolves" : why);
#endif
}

/* A copy of src at dst (a real shared object to find under another name). */
static bool copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    char buf[65536];
    size_t n;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = false;
    return ok;
}

/* The libraries of Python's NVIDIA wheels are found under a venv's site-packages (the
 * GPU machine's PyTorch has them there, with no toolkit on the loader's path): a copy of
 * libm under a made-up name in $VIRTUAL_ENV/lib/python3.x/site-packages/nvidia/x/lib. */
static void test_library_search(void)
{
    char root[] = "/tmp/coil-venv-XXXXXX", dir[512], file[600], libm_dir[4096], libm[4200];
    void *h = dlopen("libm.so.6", RTLD_NOW);
    if (!mkdtemp(root) || !h || !cuda_lib_origin(h, libm_dir, sizeof libm_dir)) {
        CHECK(!"a temporary folder and libm's own folder");
        return;
    }
    snprintf(libm, sizeof libm, "%s/libm.so.6", libm_dir);
    const char *const parts[] = {"/lib", "/lib/python3.99", "/lib/python3.99/site-packages",
                                 "/lib/python3.99/site-packages/nvidia",
                                 "/lib/python3.99/site-packages/nvidia/x",
                                 "/lib/python3.99/site-packages/nvidia/x/lib"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        snprintf(dir, sizeof dir, "%s%s", root, parts[i]);
        mkdir(dir, 0700);
    }
    snprintf(file, sizeof file, "%s/libcoilfake.so.7", dir);
    CHECK(copy_file(libm, file));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { /* the environment changes in a child only */
        char path[4096], dirs[64][4096];
        setenv("VIRTUAL_ENV", root, 1);
        void *lib = cuda_lib_open(NULL, (const char *const[]){"libcoilfake.so.7", NULL}, path,
                                  sizeof path);
        int nd = cuda_lib_dirs(dirs, 64), at = -1;
        for (int i = 0; i < nd; i++)
            at = strcmp(dirs[i], dir) == 0 ? i : at;
        bool ok = lib && strcmp(path, file) == 0 && at >= 0 && dlsym(lib, "cos");
        if (!ok)
            fprintf(stderr, "library search: opened %s from '%s', %d folders\n", lib ? "it" : "nothing",
                    path, nd);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    remove(file);
    for (int i = (int)(sizeof parts / sizeof *parts) - 1; i >= 0; i--) {
        snprintf(dir, sizeof dir, "%s%s", root, parts[i]);
        rmdir(dir);
    }
    rmdir(root);
}

/* Compiling for a device: an unknown name is a usage error; "cuda" without a GPU fails
 * with the driver's reason. */
static void test_compile_device(void)
{
    Err e = {0};
    const char *why;
    Graph *g = ir_parse_file("examples/tiny.cir", &e);
    CompileOptions o = {0};
    CHECK(!device_find("tpu") && !device_parse("tpu", &e) && e.code == ERR_USAGE);
    CHECK_STR(e.msg, "unknown device 'tpu' (cpu or cuda)");
    CHECK(device_find(NULL) == device_cpu() && device_find("cpu") == device_cpu());
    CHECK(device_find("cuda") && device_find("cuda")->gpu && !device_cpu()->gpu);
    if (g && !cuda_driver_available(&why)) {
        char want[1100];
        snprintf(want, sizeof want, "cannot compile for cuda: %s", why);
        e = (Err){0};
        o.device = device_find("cuda");
        CHECK(!compile_graph(g, &o, &e));
        CHECK_STR(e.msg, want);
    }
    o.device = device_cpu();
    e = (Err){0};
    Compiled *c = g ? compile_graph(g, &o, &e) : NULL;
    CHECK(c && c->engine && !c->device->gpu && compiled_plan(c) == NULL);
    compiled_free(c);
    graph_free(g);
}

int main(void)
{
    test_stub_driver();
    test_arch();
    test_launch();
    test_epilogue_match();
    test_gemm_fixtures();
    test_gpt2_layouts();
    test_attention_dims();
    test_gemm_layouts();
    test_gemm_dtypes();
    test_helper_source();
    test_tune_space();
    test_tune_attention();
    test_variants_compile();
    test_libraries();
    test_library_search();
    test_compile_device();
    return check_status();
}
