/* test_cuda_emu.c — the generated CUDA C++, run without a GPU: every op fixture lowered by
 * the CUDA pipeline (attention as one fused kernel) is written as CUDA C, all of them in
 * one translation unit compiled by the host's C++ compiler with cuda_emu.h (blocks of real
 * threads meeting at barriers: __syncthreads, shared memory and warp shuffles as on a
 * GPU), and run step by step as the CUDA engine runs them (GEMMs by a reference, then
 * their epilogue kernels; the fused attention kernels as they are), then held against the
 * interpreter on the same graph. This checks what the kernels compute; test_cuda_codegen
 * checks NVRTC compiles them, a GPU run checks the rest. Skips when there is no c++. */
#include <dlfcn.h>
#include <unistd.h>

#include "codegen/cuda/cuda.h"
#include "emu_build.h"
#include "op_cases.h"
#include "pipeline/fuse_lower.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cuda/cuda_mapping.h"

#define MAX_CASES 256
#define EMU_SMS 1 /* at most CUDA_WAVES blocks per launch */
#define VARIANT_EVERY 3 /* every third case also runs the autotuner's kernel variants */

/* The variants those cases run with: every kernel step at one of these (a row kernel
 * without items), as the CUDA engine launches a tuned step. */
static const CudaKernelConfig variant_configs[] = {{128, 4, 2}, {512, 2, 0}};

typedef void (*KernelEntry)(void *const *, const long long *);
typedef void (*LaunchFn)(KernelEntry, unsigned, unsigned, unsigned, void *const *,
                         const long long *);

/* A fixture after the CUDA backend's passes, lowered. */
typedef struct Emu {
    Case c;
    Graph *g;
    Program *p;
} Emu;

static bool emu_load(Emu *u, const char *kase)
{
    Err e = {0};
    if (!case_load(FIXTURE_DIR, kase, &u->c))
        return false;
    bool ok = (u->g = graph_copy(u->c.g, &e)) && run_passes(&u->g, pass_pipeline_cuda, &e) &&
              (u->p = fuse_and_lower(u->g, NULL, &e));
    if (!ok) {
        fprintf(stderr, "%s [CUDA passes]: %s\n", kase, e.msg);
        check_failures++;
    }
    return ok;
}

/* Cases larger than a block's threads times its items (the fixtures are smaller), so the
 * variants' unrolled points and the grid-stride loops run more than one pass: built here
 * from IR text, inputs drawn from a fixed sequence, the interpreter the reference. */
static const char *const large_cases[][2] = {
    {"large_pointwise", "graph @p(%x: f32[40,53]) -> (y: f32[40,53]) {\n"
                        "  %t = tanh %x : f32[40,53]\n  %y = mul %t, %x : f32[40,53]\n"
                        "  return %y\n}\n"},
    {"large_rows", "graph @r(%x: f32[300,37]) -> (y: f32[300,37]) {\n"
                   "  %y = softmax %x : f32[300,37]\n  return %y\n}\n"},
    {"large_inner", "graph @i(%x: f32[5,1100]) -> (y: f32[5,1100]) {\n"
                    "  %y = log_softmax %x : f32[5,1100]\n  return %y\n}\n"},
    /* attention with a tensor-core kernel: query and key tails, several tiles and query
     * blocks, causal skipping, both formats, head sizes 32 to 128 */
    {"mma_bf16_tails", "graph @a(%q: bf16[2,3,70,64], %k: bf16[2,3,90,64], %v: bf16[2,3,90,64]) "
                       "-> (y: bf16[2,3,70,64]) {\n"
                       "  %y = attention %q, %k, %v : bf16[2,3,70,64]\n  return %y\n}\n"},
    {"mma_bf16_causal", "graph @a(%q: bf16[1,2,150,64], %k: bf16[1,2,150,64], %v: bf16[1,2,150,64]) "
                        "-> (y: bf16[1,2,150,64]) {\n  %y = attention %q, %k, %v {causal=true} : "
                        "bf16[1,2,150,64]\n  return %y\n}\n"},
    {"mma_f16_causal_dv", "graph @a(%q: f16[2,40,32], %k: f16[2,100,32], %v: f16[2,100,48]) "
                          "-> (y: f16[2,40,48]) {\n  %y = attention %q, %k, %v {causal=true, "
                          "scale=0.3} : f16[2,40,48]\n  return %y\n}\n"},
    /* K and V through transposes: strided, so the kernel loads them element by element */
    {"mma_bf16_strided", "graph @a(%q: bf16[2,33,32], %kt: bf16[2,32,80], %vt: bf16[2,16,80]) "
                         "-> (y: bf16[2,33,16]) {\n"
                         "  %k = transpose %kt {perm=[0, 2, 1]} : bf16[2,80,32]\n"
                         "  %v = transpose %vt {perm=[0, 2, 1]} : bf16[2,80,16]\n"
                         "  %y = attention %q, %k, %v : bf16[2,33,16]\n  return %y\n}\n"},
    /* an additive bias: a padding mask's shape over heads (causal too), and a full one */
    {"mma_bf16_bias_mask", "graph @a(%q: bf16[2,2,70,64], %k: bf16[2,2,90,64], %v: bf16[2,2,90,64], "
                           "%b: bf16[2,1,1,90]) -> (y: bf16[2,2,70,64]) {\n  %y = attention %q, %k, "
                           "%v, %b {causal=true} : bf16[2,2,70,64]\n  return %y\n}\n"},
    {"mma_f16_bias_full", "graph @a(%q: f16[2,40,32], %k: f16[2,100,32], %v: f16[2,100,32], "
                          "%b: f16[2,40,100]) -> (y: f16[2,40,32]) {\n  %y = attention %q, %k, %v, "
                          "%b : f16[2,40,32]\n  return %y\n}\n"},
    {"mma_bf16_head128", "graph @a(%q: bf16[1,20,128], %k: bf16[1,70,128], %v: bf16[1,70,128]) "
                         "-> (y: bf16[1,20,128]) {\n"
                         "  %y = attention %q, %k, %v : bf16[1,20,128]\n  return %y\n}\n"},
    /* attention's training ops, kept whole (decompose_fused_cuda): the log-sum-exp, and the
     * backward (O an input, so that the forward kernel's rounding of it is not what is
     * measured): causal with a query tail over three key blocks, f16 with a scale and a
     * tail, and Q, K, V and dO strided (element-by-element loads) */
    {"mma_bf16_grad_causal",
     "graph @a(%q: bf16[1,2,150,64], %k: bf16[1,2,150,64], %v: bf16[1,2,150,64], "
     "%o: bf16[1,2,150,64], %g: bf16[1,2,150,64]) -> (d: bf16[3,1,2,150,64], l: f32[1,2,150]) {\n"
     "  %l = attention_lse %q, %k {causal=true} : f32[1,2,150]\n"
     "  %d = attention_grad %q, %k, %v, %o, %g, %l {causal=true} : bf16[3,1,2,150,64]\n"
     "  return %d, %l\n}\n"},
    {"mma_f16_grad_scale",
     "graph @a(%q: f16[2,70,32], %k: f16[2,70,32], %v: f16[2,70,32], %o: f16[2,70,32], "
     "%g: f16[2,70,32]) -> (d: f16[3,2,70,32], l: f32[2,70]) {\n"
     "  %l = attention_lse %q, %k {scale=0.3} : f32[2,70]\n"
     "  %d = attention_grad %q, %k, %v, %o, %g, %l {scale=0.3} : f16[3,2,70,32]\n"
     "  return %d, %l\n}\n"},
    /* the forward with the log-sum-exp of the same scores: one step writes both */
    {"mma_bf16_forward_lse",
     "graph @a(%q: bf16[1,2,130,32], %k: bf16[1,2,130,32], %v: bf16[1,2,130,32]) "
     "-> (y: bf16[1,2,130,32], l: f32[1,2,130]) {\n"
     "  %y = attention %q, %k, %v {causal=true} : bf16[1,2,130,32]\n"
     "  %l = attention_lse %q, %k {causal=true} : f32[1,2,130]\n"
     "  return %y, %l\n}\n"},
    {"mma_bf16_grad_strided",
     "graph @a(%qt: bf16[2,16,40], %kt: bf16[2,16,40], %vt: bf16[2,16,40], %o: bf16[2,40,16], "
     "%gt: bf16[2,16,40]) -> (d: bf16[3,2,40,16]) {\n"
     "  %q = transpose %qt {perm=[0, 2, 1]} : bf16[2,40,16]\n"
     "  %k = transpose %kt {perm=[0, 2, 1]} : bf16[2,40,16]\n"
     "  %v = transpose %vt {perm=[0, 2, 1]} : bf16[2,40,16]\n"
     "  %g = transpose %gt {perm=[0, 2, 1]} : bf16[2,40,16]\n"
     "  %l = attention_lse %q, %k {causal=true} : f32[2,40]\n"
     "  %d = attention_grad %q, %k, %v, %o, %g, %l {causal=true} : bf16[3,2,40,16]\n"
     "  return %d\n}\n"},
};

static bool emu_make(Emu *u, const char *name, const char *text)
{
    Err e = {0};
    memset(u, 0, sizeof *u);
    u->c.name = name;
    u->c.g = ir_parse(text, strlen(text), name, &e);
    u->c.in = u->c.g ? calloc((size_t)u->c.g->ninput + 1, sizeof *u->c.in) : NULL;
    bool ok = u->c.in != NULL;
    for (int i = 0; ok && i < u->c.g->ninput; i++) {
        const Type *t = &u->c.g->node[u->c.g->input[i]].type;
        int64_t shape[COIL_MAX_RANK];
        for (int d = 0; d < t->rank; d++)
            shape[d] = t->dim[d].k;
        ok = tensor_alloc(&u->c.in[i], t->dt, t->rank, shape, &e);
        for (int64_t j = 0; ok && j < tensor_numel(&u->c.in[i]); j++)
            dtype_store(t->dt, u->c.in[i].data, j, (j * 7919 % 1000) / 250.0 - 2.0);
    }
    ok = ok && (u->g = graph_copy(u->c.g, &e)) && run_passes(&u->g, pass_pipeline_cuda, &e) &&
         (u->p = fuse_and_lower(u->g, NULL, &e));
    if (!ok) {
        fprintf(stderr, "%s: %s\n", name, e.msg);
        check_failures++;
    }
    return ok;
}

static void emu_free(Emu *u)
{
    program_free(u->p);
    graph_free(u->g);
    case_free(&u->c);
}

/* Whether case i runs the kernel variants too: every VARIANT_EVERY-th, and the large ones. */
static bool variants_of(const Emu *u, int i)
{
    return i % VARIANT_EVERY == 0 || strncmp(u->c.name, "large_", 6) == 0;
}

/* ---------------------------------------------------------------- compiling */

/* All cases' kernels in one unit (names prefixed f<i>_), compiled to a shared library. */
static void *compile_all(Emu *cases, int n, const char *dir)
{
    char src[512], lib[512];
    snprintf(src, sizeof src, "%s/kernels.cpp", dir);
    snprintf(lib, sizeof lib, "%s/kernels.so", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return NULL;
    fputs(cuda_prelude, f);
    for (int i = 0; i < n; i++) {
        char prefix[32];
        Err e = {0};
        snprintf(prefix, sizeof prefix, "f%d_", i);
        char *part = cuda_source_part(cases[i].p, prefix, false, &e);
        if (part)
            fputs(part, f);
        free(part);
        for (int k = 0; variants_of(&cases[i], i) && k < cases[i].p->nkernel; k++) {
            part = cuda_variants_part(cases[i].p, k, prefix, false, &e);
            if (part)
                fputs(part, f);
            free(part);
        }
    }
    fclose(f);
    return emu_build(src, lib, "the generated source");
}

/* ---------------------------------------------------------------- running */

typedef struct Run {
    void *lib;
    LaunchFn launch;
    int index;          /* the case's prefix number */
    const Program *p;
    void **bufs;
    SymBind sb;
    const CudaKernelConfig *cfg; /* kernel steps' launch (NULL: the heuristics) */
    bool mma;                    /* attention on tensor cores, where that kernel fits */
} Run;

static KernelEntry entry(const Run *r, const char *name)
{
    char full[300];
    snprintf(full, sizeof full, "f%d_%s", r->index, name);
    KernelEntry fn = (KernelEntry)dlsym(r->lib, full);
    if (!fn) {
        fprintf(stderr, "kernel %s is missing\n", full);
        check_failures++;
    }
    return fn;
}

/* cuda_emu.h's serial launch: a pointwise kernel's threads never meet, so they run one by
 * one on this thread (a thread per CUDA thread made the test's system time larger than
 * its user time). */
static LaunchFn launch_serial;

/* With the engine's geometry (cuda_mapping.c), on a device of EMU_SMS multiprocessors: a
 * small grid, so the kernels' grid-stride loops are exercised too. */
static void launch_kernel(const Run *r, int k, bool step)
{
    const Kernel *kn = &r->p->kernel[k];
    CudaKernelConfig c = step && r->cfg ? *r->cfg : (CudaKernelConfig){0};
    if (cuda_shape(kn) == CUDA_ROWS)
        c.items = 1;
    char name[200];
    if (cuda_variant_is_default(&c))
        snprintf(name, sizeof name, "%s", kn->name);
    else
        cuda_variant_name(kn, &c, name, sizeof name);
    CudaLaunch L = cuda_launch_dims(kn, &r->sb, EMU_SMS, &c);
    KernelEntry fn = entry(r, name);
    LaunchFn launch = cuda_shape(kn) == CUDA_POINTWISE ? launch_serial : r->launch;
    if (fn && L.blocks > 0)
        launch(fn, (unsigned)L.blocks, 1, (unsigned)L.threads, r->bufs,
               (const long long *)r->sb.val);
}

/* so the checks below see the fused kernels really ran */
static int attention_launches, mma_launches;

static void launch_attention(const Run *r, int s)
{
    CudaGrid G;
    Err e = {0};
    char name[64];
    bool mma = r->mma && cuda_attention_mma_fits(r->p, &r->p->step[s].attn);
    snprintf(name, sizeof name, "coil_attention_%d%s", s, mma ? "_mma" : "");
    KernelEntry fn = entry(r, name);
    if (!cuda_attention_dims(&r->p->step[s].attn, &r->sb, &G, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        check_failures++;
    } else if (fn && G.x > 0 && G.y > 0) {
        attention_launches++;
        mma_launches += mma;
        G.threads = mma ? CUDA_ATTN_MMA_THREADS : G.threads;
        r->launch(fn, (unsigned)G.x, (unsigned)G.y, (unsigned)G.threads, r->bufs,
                  (const long long *)r->sb.val);
    }
}

static void run_steps(Run *r, const DType *dts)
{
    for (int s = 0; s < r->p->nstep; s++) {
        const Step *st = &r->p->step[s];
        Err e = {0};
        if (st->kind == STEP_KERNEL)
            launch_kernel(r, st->kernel, true);
        else if (st->kind == STEP_ATTENTION)
            launch_attention(r, s);
        else if (!dtype_info[dts[st->gemm.a.buf]].is_float) /* never: integer matmuls are kernels */
            check_failures++;
        else {
            gemm_reference(&st->gemm, r->bufs, dts, &r->sb, &e);
            if (st->gemm.epilogue >= 0)
                launch_kernel(r, st->gemm.epilogue, false);
        }
    }
}

/* Host memory for every buffer, as the engine's device memory would be laid out. */
static bool bind(Run *r, const Emu *u, Tensor *out, DType *dts, Err *e)
{
    const Program *p = u->p;
    const Case *c = &u->c;
    if (!bind_inputs(u->g, c->in, &r->sb, e) || !alloc_output_tensors(u->g, &r->sb, out, e))
        return false;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        dts[b] = buf->dt;
        int64_t n = dim_value(buf->numel, &r->sb);
        switch (buf->kind) {
        case BUF_INPUT: r->bufs[b] = c->in[buf->index].data; break;
        case BUF_PARAM: r->bufs[b] = c->params[buf->index].data; break;
        case BUF_OUTPUT: r->bufs[b] = out[buf->index].data; break;
        default:
            r->bufs[b] = calloc((size_t)(n > 0 ? n : 1), (size_t)dtype_info[buf->dt].size);
            for (int64_t i = 0; buf->kind == BUF_CONST && i < n; i++)
                dtype_store(buf->dt, r->bufs[b], i, buf->data[i]);
        }
    }
    return true;
}

/* The tensor-core attention rounds P to the inputs' format before P V, as FlashAttention
 * does: held to the largest output's magnitude (bf16: 2^-7 of it, f16: 2^-9), not each
 * element's, since an output near zero is a sum that cancels. */
static void check_normwise(const Case *c, Tensor *out, const Tensor *want)
{
    for (int i = 0; i < c->g->noutput; i++) {
        double big = 0, worst = 0, tol = want[i].dt == DT_F16 ? 0x1p-9 : 0x1p-7;
        for (int64_t j = 0; j < tensor_numel(&want[i]); j++)
            big = fmax(big, fabs(dtype_load(want[i].dt, want[i].data, j)));
        for (int64_t j = 0; j < tensor_numel(&want[i]); j++)
            worst = fmax(worst, fabs(dtype_load(out[i].dt, out[i].data, j) -
                                     dtype_load(want[i].dt, want[i].data, j)));
        if (!(worst <= tol * big)) {
            fprintf(stderr, "%s [tensor cores, emulated]: %s is off by %g, more than %g of the "
                    "largest output %g\n", c->name, c->g->output_name[i], worst, tol, big);
            check_failures++;
        }
        tensor_free(&out[i]);
    }
}

/* The emulated run against the interpreter on the same graph (attention whole), both at
 * rng step `step` (the syms table's last slot); `mma`: attention on tensor cores. */
static void run_case(void *lib, LaunchFn launch, int index, const Emu *u, uint64_t step,
                     const CudaKernelConfig *cfg, bool mma)
{
    Err e = {0};
    const Program *p = u->p;
    Tensor out[16] = {{0}}, want[16] = {{0}};
    DType *dts = calloc((size_t)p->nbuf + 1, sizeof *dts);
    Run r = {.lib = lib, .launch = launch, .index = index, .p = p,
             .bufs = calloc((size_t)p->nbuf + 1, sizeof(void *)), .cfg = cfg, .mma = mma};
    if (dts && r.bufs && interp_run_at(u->g, step, u->c.in, u->c.params, want, NULL, &e) &&
        bind(&r, u, out, dts, &e)) {
        r.sb.val[COIL_SYM_RNG_STEP] = (int64_t)step;
        run_steps(&r, dts);
        if (mma)
            check_normwise(&u->c, out, want);
        else
            check_against(&u->c, "CUDA C, emulated", out, want);
    } else {
        fprintf(stderr, "%s: %s\n", u->c.name, e.msg);
        check_failures++;
    }
    for (int i = 0; i < u->g->noutput; i++)
        tensor_free(&want[i]), tensor_free(&out[i]);
    for (int b = 0; r.bufs && b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_CONST || p->buf[b].kind == BUF_TEMP)
            free(r.bufs[b]);
    free(r.bufs);
    free(dts);
}

static bool has_mma_attention(const Program *p)
{
    for (int s = 0; s < p->nstep; s++)
        if (p->step[s].kind == STEP_ATTENTION && cuda_attention_mma_fits(p, &p->step[s].attn))
            return true;
    return false;
}

static bool has_random(const Graph *g)
{
    for (int i = 0; i < g->nnode; i++)
        if (op_info[g->node[i].op].flags & OPF_RANDOM)
            return true;
    return false;
}

int main(void)
{
    if (system("c++ --version > /dev/null 2>&1") != 0) {
        printf("skipped: no host C++ compiler (c++) to run the generated CUDA C with\n");
        return 0;
    }
    struct dirent **list;
    int n = scandir(FIXTURE_DIR, &list, is_case_file, alphasort), ncase = 0;
    static Emu cases[MAX_CASES];
    for (int i = 0; i < n; i++) {
        list[i]->d_name[strlen(list[i]->d_name) - 4] = 0; /* the name without .cir */
        if (ncase < MAX_CASES && emu_load(&cases[ncase], list[i]->d_name))
            ncase++;
        else if (ncase < MAX_CASES)
            emu_free(&cases[ncase]), memset(&cases[ncase], 0, sizeof cases[ncase]);
    }
    for (size_t i = 0; i < sizeof large_cases / sizeof *large_cases && ncase < MAX_CASES; i++)
        ncase += emu_make(&cases[ncase], large_cases[i][0], large_cases[i][1]) ? 1 : 0;
    char dir[] = "/tmp/coil-cuda-emu-XXXXXX";
    void *lib = mkdtemp(dir) ? compile_all(cases, ncase, dir) : NULL;
    LaunchFn launch = lib ? (LaunchFn)dlsym(lib, "coil_emu_launch") : NULL;
    launch_serial = lib ? (LaunchFn)dlsym(lib, "coil_emu_launch_serial") : NULL;
    launch = launch_serial ? launch : NULL;
    int nrandom = 0; /* cases drawing random numbers run at a step past 2^32 too */
    int nvariant = 0;
    for (int i = 0; launch && i < ncase; i++) {
        run_case(lib, launch, i, &cases[i], 0, NULL, false);
        if (has_mma_attention(cases[i].p))
            run_case(lib, launch, i, &cases[i], 0, NULL, true);
        for (size_t v = 0; variants_of(&cases[i], i) && v < sizeof variant_configs / sizeof *variant_configs; v++)
            run_case(lib, launch, i, &cases[i], 0, &variant_configs[v], false), nvariant++;
        if (!has_random(cases[i].g))
            continue;
        run_case(lib, launch, i, &cases[i], 0x300000005ull, NULL, false);
        nrandom++;
    }
    for (int i = 0; i < ncase; i++)
        emu_free(&cases[i]);
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    CHECK(launch != NULL && ncase > 100);
    CHECK(attention_launches >= 5);
    CHECK(mma_launches >= 7);
    CHECK(nrandom >= 6);
    CHECK(nvariant >= 60);
    printf("%d op fixtures: their CUDA C run emulated and checked (%d fused attention "
           "launches, %d on tensor cores; %d runs with the autotuner's kernel variants)\n", ncase,
           attention_launches, mma_launches, nvariant);
    return check_status();
}
