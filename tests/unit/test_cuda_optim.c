/* test_cuda_optim.c — the device optimizer (runtime/cuda_optim*.c). Everywhere: the chunk
 * list and rounded hyper-parameters; its source compiled by NVRTC for sm_80 and sm_90a
 * with no FMA contraction in the PTX; and the kernels themselves, compiled by the host's
 * C++ compiler against cuda_emu.h and run on host threads (norm, update, accumulation) for
 * AdamW, SGD with momentum and Lion over tensors of 1, 3, 1000 and 70000 elements with a
 * decay mask and a buffer (assigned, outside the norm), clipping, micro-batch sums and a non-finite gradient, held against
 * runtime/cpu/cpu_optim.c's optim_step over several steps. With a GPU: the same against the engine's
 * own buffers, and `coil train --device cuda` resuming bit-identically; without one it
 * prints "skipped: REASON" and passes. */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "emu_build.h"
#include "frontend/frontend.h"
#include "pipeline/pipeline.h"
#include "runtime/cuda/cuda_optim.h"
#include "runtime/device.h"
#include "train/train.h"

#define NT 4
static const int64_t shapes[NT][2] = {{1, 0}, {3, 0}, {10, 100}, {700, 100}};
static const int ranks[NT] = {1, 1, 2, 2};
static const char *const names[NT] = {"h.bias", "h.gain", "wpe.weight", "h.fc.weight"};
static const char *const exempt[] = {"wpe.*"}; /* a matrix without decay: the mask's row */

/* ---------------------------------------------------------------- planning */

static void test_chunks(void)
{
    int64_t numel[] = {1, 0, CUDA_OPTIM_CHUNK, CUDA_OPTIM_CHUNK + 1, 3};
    CoilOptChunk c[8];
    CHECK(cuda_optim_chunks(numel, 5, NULL) == 5);
    CHECK(cuda_optim_chunks(numel, 5, c) == 5);
    CHECK(c[0].tensor == 0 && c[0].start == 0 && c[1].tensor == 2 && c[1].start == 0);
    CHECK(c[2].tensor == 3 && c[2].start == 0 && c[3].tensor == 3 &&
          c[3].start == CUDA_OPTIM_CHUNK && c[4].tensor == 4);
    CHECK(cuda_optim_partials(0) == 1 && cuda_optim_partials(7) == 7 &&
          cuda_optim_partials(1 << 20) == CUDA_OPTIM_PARTIALS);
    OptConfig oc = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 1, NULL, 0};
    CoilOptHyper h = cuda_optim_hyper(&oc, 0, 1e-3, 0.5, 9, 3);
    CHECK(h.kind == OPT_ADAMW && h.nchunks == 9 && h.npartial == 3 && h.grad_scale == 0.5);
    CHECK(h.lr == (float)1e-3 && h.wd == (float)((float)1e-3 * 0.1) && h.clip == 1.0);
    CHECK(h.step == (float)1e-3 / (float)(1 - 0.9) && h.rbc2 == 1 / sqrtf((float)(1 - 0.95)));
}

/* ---------------------------------------------------------------- NVRTC */

static void test_nvrtc(void)
{
    const char *why;
    if (!nvrtc_available(&why)) {
        printf("NVRTC: skipped: %s\n", why);
        return;
    }
    static const char *const archs[] = {"sm_80", "sm_90a"};
    Err e = {0};
    for (int a = 0; a < 2; a++) {
        CudaCompileOptions o = {.arch = archs[a], .cache_dir = "", .no_fmad = true};
        Cubin c;
        bool ok = nvrtc_compile(cuda_optim_source, "coil_optim.cu", &o, &c, &e);
        CHECK(ok && c.size > 4 && memcmp(c.data, "\177ELF", 4) == 0);
        if (ok)
            cubin_free(&c);
    }
    /* the update's f32 arithmetic rounds each operation as the host does: every multiply
     * and add .rn (ptxas never fuses those), which the same source is not by default */
    CudaCompileOptions exact = {.arch = "sm_90a", .cache_dir = "", .no_fmad = true},
                       fused = {.arch = "sm_90a", .cache_dir = ""};
    char *pe = nvrtc_ptx(cuda_optim_source, "coil_optim.cu", &exact, &e);
    char *pf = nvrtc_ptx(cuda_optim_source, "coil_optim.cu", &fused, &e);
    CHECK(pe && pf && strstr(pe, "coil_optim_update") && strstr(pe, "coil_optim_accumulate"));
    CHECK(pe && !strstr(pe, "mul.f32") && !strstr(pe, "add.f32") && !strstr(pe, "fma.rn.f32"));
    CHECK(pf && strstr(pf, "mul.f32")); /* ptxas may fuse a mul.f32 into an add, not mul.rn */
    free(pe), free(pf);
    if (!err_ok(&e))
        fprintf(stderr, "nvrtc: %s\n", e.msg);
    printf("the optimizer's kernels compile for sm_80 and sm_90a\n");
}

/* ---------------------------------------------------------------- the host's side */

/* A graph whose parameters are the four tensors (their order: graph_params'). */
static Graph *param_graph(void)
{
    Graph *g = graph_new("optim");
    Err e = {0};
    Builder b = builder_make(g, &e);
    for (int i = 0; i < NT; i++) {
        Type t = type_make(DT_F32, ranks[i], shapes[i]);
        b_output(&b, b_param(&b, names[i], &t, NULL), NULL);
    }
    CHECK(err_ok(&e));
    return g;
}

static void alloc_set(Tensor *t)
{
    Err e = {0};
    for (int i = 0; i < NT; i++)
        CHECK(tensor_alloc(&t[i], DT_F32, ranks[i], shapes[i], &e));
}

static void free_set(Tensor *t)
{
    for (int i = 0; i < NT; i++)
        tensor_free(&t[i]);
}

static void copy_set(Tensor *dst, const Tensor *src)
{
    for (int i = 0; i < NT; i++)
        memcpy(dst[i].data, src[i].data, tensor_nbytes(&src[i]));
}

/* Values of a few sizes and both signs, from a small generator: seed picks the set. */
static void fill(Tensor *t, uint64_t seed, float size)
{
    for (int i = 0; i < NT; i++)
        for (int64_t k = 0; k < tensor_numel(&t[i]); k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(seed >> 11) / 9007199254740992.0 * 2 - 1;
            ((float *)t[i].data)[k] = (float)(u * size * (1 + (k % 7)));
        }
}

/* The largest difference relative to the host's value (a floor for values near zero). */
static double worst(const Tensor *got, const Tensor *want)
{
    double w = 0;
    for (int i = 0; i < NT; i++)
        for (int64_t k = 0; k < tensor_numel(&want[i]); k++) {
            double a = ((float *)got[i].data)[k], b = ((float *)want[i].data)[k];
            w = fmax(w, a == b ? 0 : fabs(a - b) / fmax(fabs(b), 1e-6));
        }
    return w;
}

static bool same_bits(const Tensor *a, const Tensor *b)
{
    for (int i = 0; i < NT; i++)
        if (memcmp(a[i].data, b[i].data, tensor_nbytes(&a[i])) != 0)
            return false;
    return true;
}

/* The host optimizer's state, m (which 0) or v (1), as a set of tensors (not owned). */
static void host_state(Optimizer *o, int which, Tensor *out)
{
    int per = optim_state_count(o) / NT;
    for (int i = 0; i < NT; i++) {
        const char *name;
        out[i] = *optim_state(o, i * per + which, &name);
    }
}

/* ---------------------------------------------------------------- the emulator */

/* The kernels' launches from C: the arguments, then which kernel on how many blocks. */
static const char shim[] =
    "\nstatic const CoilOptTensor *emu_t;\n"
    "static const CoilOptChunk *emu_c;\n"
    "static CoilOptHyper emu_h;\n"
    "static double *emu_partial, *emu_norm;\n"
    "static int emu_first;\n"
    "static void emu_norm_entry(void *const *, const long long *)\n"
    "{ coil_optim_norm(emu_t, emu_c, emu_h, emu_partial); }\n"
    "static void emu_update_entry(void *const *, const long long *)\n"
    "{ coil_optim_update(emu_t, emu_c, emu_h, emu_partial, emu_norm); }\n"
    "static void emu_accumulate_entry(void *const *, const long long *)\n"
    "{ coil_optim_accumulate(emu_t, emu_c, emu_h.nchunks, emu_first); }\n"
    "extern \"C\" void emu_optim(int which, unsigned grid, const CoilOptTensor *t,\n"
    "                           const CoilOptChunk *c, const CoilOptHyper *h, double *partial,\n"
    "                           double *norm, int first)\n"
    "{\n"
    "  emu_t = t, emu_c = c, emu_h = *h, emu_partial = partial, emu_norm = norm, emu_first = first;\n"
    "  CoilEmuKernel k = which == 0 ? emu_norm_entry : which == 1 ? emu_update_entry\n"
    "                                                              : emu_accumulate_entry;\n"
    "  coil_emu_launch(k, grid, 1, COIL_OPT_THREADS, nullptr, nullptr);\n"
    "}\n";

typedef void (*EmuOptim)(int, unsigned, const CoilOptTensor *, const CoilOptChunk *,
                         const CoilOptHyper *, double *, double *, int);

static void *compile_emulated(const char *dir, EmuOptim *fn)
{
    char src[512], lib[512];
    snprintf(src, sizeof src, "%s/optim.cpp", dir);
    snprintf(lib, sizeof lib, "%s/optim.so", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return NULL;
    fputs(cuda_optim_source, f);
    fputs(shim, f);
    fclose(f);
    void *h = emu_build(src, lib, "the optimizer's source");
    *fn = h ? (EmuOptim)dlsym(h, "emu_optim") : NULL;
    if (h && !*fn) {
        fprintf(stderr, "%s: no emu_optim\n", lib);
        check_failures++;
    }
    return h;
}

/* The device's side in host memory: parameters, state, sums, the table and chunks. */
typedef struct Emulated {
    EmuOptim run;
    Tensor p[NT], m[NT], v[NT], acc[NT], g[NT];
    CoilOptTensor rec[NT];
    CoilOptChunk chunk[32];
    int64_t nchunks, steps;
    int npartial, grid;
    double partial[CUDA_OPTIM_PARTIALS], norm;
} Emulated;

static void emulated_init(Emulated *d, const Optimizer *host, const Tensor *params, bool accum)
{
    int64_t numel[NT];
    alloc_set(d->p), alloc_set(d->m), alloc_set(d->v), alloc_set(d->acc), alloc_set(d->g);
    copy_set(d->p, params);
    const OptConfig *c = optim_config(host);
    bool has_m = c->kind != OPT_SGD || c->momentum != 0, has_v = c->kind == OPT_ADAMW;
    for (int i = 0; i < NT; i++) {
        memset(d->m[i].data, 0, tensor_nbytes(&d->m[i]));
        memset(d->v[i].data, 0, tensor_nbytes(&d->v[i]));
        numel[i] = tensor_numel(&params[i]);
        d->rec[i] = (CoilOptTensor){.p = d->p[i].data, .g = d->g[i].data,
                                    .acc = accum ? d->acc[i].data : NULL,
                                    .m = has_m ? d->m[i].data : NULL,
                                    .v = has_v ? d->v[i].data : NULL, .numel = numel[i],
                                    .role = optim_role(host, i)};
    }
    d->nchunks = cuda_optim_chunks(numel, NT, d->chunk);
    d->steps = 0;
}

static void emulated_free(Emulated *d)
{
    free_set(d->p), free_set(d->m), free_set(d->v), free_set(d->acc), free_set(d->g);
}

/* cuda_optim_step then cuda_optim_finish, with the emulator's launches. */
static double emulated_step(Emulated *d, const OptConfig *c, double grad_scale, double lr)
{
    CoilOptHyper h = cuda_optim_hyper(c, d->steps, lr, grad_scale, d->nchunks, d->npartial);
    d->norm = -1;
    d->run(0, (unsigned)d->npartial, d->rec, d->chunk, &h, d->partial, &d->norm, 0);
    d->run(1, (unsigned)d->grid, d->rec, d->chunk, &h, d->partial, &d->norm, 0);
    d->steps += isfinite(d->norm);
    return d->norm;
}

static void emulated_accumulate(Emulated *d, bool first)
{
    CoilOptHyper h = {.nchunks = d->nchunks};
    d->run(2, (unsigned)d->grid, d->rec, d->chunk, &h, d->partial, &d->norm, first);
}

typedef struct Scenario {
    const char *label;
    OptConfig c;
    int npartial, grid;  /* 0: the device's rule for the norm's blocks */
    bool accum;          /* two micro-batches a step, summed on the device */
    bool exact;          /* no clipping: every bit as the host's */
} Scenario;

/* Three steps, then one with a NaN gradient and one with inf (skipped, nothing moves),
 * then one more; after each the norm, parameters and state held against the host's. */
static void run_scenario(EmuOptim run, const Graph *g, const Scenario *s)
{
    Err e = {0};
    Tensor hp[NT], hg[NT], g2[NT], hm[NT], hv[NT];
    alloc_set(hp), alloc_set(hg), alloc_set(g2);
    fill(hp, 1, 0.5f);
    Optimizer *host = optim_new(&s->c, g, hp, &e);
    CHECK(host != NULL);
    if (!host) {
        free_set(hp), free_set(hg), free_set(g2);
        return;
    }
    Emulated *d = calloc(1, sizeof *d);
    d->run = run;
    emulated_init(d, host, hp, s->accum);
    d->npartial = s->npartial ? s->npartial : cuda_optim_partials(d->nchunks);
    d->grid = s->grid;
    bool has_m = optim_state_count(host) > 0, has_v = s->c.kind == OPT_ADAMW;
    double lr = 3e-3, most = 0;
    for (int step = 0; step < 6; step++) {
        float size = step == 2 ? 1e-4f : 0.8f; /* step 2: the norm under the clip */
        fill(hg, 100 + (uint64_t)step, size);
        fill(g2, 200 + (uint64_t)step, size);
        double scale = s->accum ? 0.5 : 1;
        if (step == 3 || step == 4) /* in the last micro-batch */
            ((float *)(s->accum ? g2 : hg)[3].data)[12345] = step == 3 ? NAN : INFINITY;
        if (s->accum) {
            copy_set(d->g, hg);
            emulated_accumulate(d, true);
            copy_set(d->g, g2);
            emulated_accumulate(d, false);
            for (int i = 0; i < NT; i++) /* train.c's add_grads on the host */
                for (int64_t k = 0; k < tensor_numel(&hg[i]); k++)
                    ((float *)hg[i].data)[k] += ((float *)g2[i].data)[k];
        }
        if (!s->accum)
            copy_set(d->g, hg);
        Tensor before[NT];
        alloc_set(before);
        copy_set(before, d->p);
        double want = optim_step(host, hp, hg, scale, lr);
        double got = emulated_step(d, &s->c, scale, lr);
        CHECK_NEAR(got, want, 1e-6);
        if (!isfinite(want)) {
            CHECK(!isfinite(got) && same_bits(d->p, before));
            free_set(before);
            continue;
        }
        if (has_m)
            host_state(host, 0, hm);
        if (has_v)
            host_state(host, 1, hv);
        double w = fmax(worst(d->p, hp), fmax(has_m ? worst(d->m, hm) : 0, has_v ? worst(d->v, hv) : 0));
        bool bits = same_bits(d->p, hp) && (!has_m || same_bits(d->m, hm)) &&
                    (!has_v || same_bits(d->v, hv));
        if (w > 1e-6 || (s->exact && !bits)) {
            fprintf(stderr, "%s, step %d: device and host differ by %.3g relative%s\n", s->label,
                    step, w, s->exact ? " (want every bit)" : "");
            check_failures++;
        }
        CHECK(!same_bits(d->p, before)); /* it did update */
        most = fmax(most, w);
        free_set(before);
    }
    CHECK(d->steps == optim_steps(host) && d->steps == 4);
    printf("%-34s %lld chunks, norm on %d blocks, update on %d: within %.2g of optim.c\n",
           s->label, (long long)d->nchunks, d->npartial, d->grid, most);
    emulated_free(d);
    free(d);
    optim_free(host);
    free_set(hp), free_set(hg), free_set(g2);
}

static void test_emulated(void)
{
    char dir[] = "/tmp/coil-optim-XXXXXX";
    if (!mkdtemp(dir) || system("c++ --version > /dev/null 2>&1") != 0) {
        printf("emulator: skipped: no c++\n");
        return;
    }
    EmuOptim run = NULL;
    void *lib = compile_emulated(dir, &run);
    Graph *g = param_graph();
    const Scenario cases[] = {
        {"adamw, clipped", {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 1, exempt, 1}, 0, 3, false, false},
        {"adamw, unclipped", {OPT_ADAMW, 0.9, 0.999, 1e-8, 0, 0.01, 0, 1, exempt, 1}, 2, 8, false, true},
        {"adamw, micro-batches summed", {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 1, exempt, 1}, 3, 2, true, false},
        {"sgd with momentum, clipped", {OPT_SGD, 0.9, 0.95, 1e-8, 0.9, 0.1, 1.0, 1, exempt, 1}, 0, 3, false, false},
        {"sgd with momentum, micro-batches", {OPT_SGD, 0.9, 0.95, 1e-8, 0.9, 0.1, 2.0, 1, exempt, 1}, 3, 5, true, false},
        {"sgd plain, unclipped", {OPT_SGD, 0.9, 0.95, 1e-8, 0, 0.1, 0, 1, exempt, 1}, 0, 3, false, true},
        {"lion, clipped", {OPT_LION, 0.9, 0.99, 1e-8, 0, 0.1, 1.0, 1, exempt, 1}, 3, 3, false, false},
    };
    for (size_t i = 0; run && i < sizeof cases / sizeof *cases; i++)
        run_scenario(run, g, &cases[i]);
    graph_free(g);
    if (lib)
        dlclose(lib);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ---------------------------------------------------------------- on a GPU */

/* A graph that outputs each gradient it is given (times 2: fold keeps x * 2, and 0 p, so
 * every parameter is read): the engine's buffers hold parameters and gradients as
 * training's do, gradient i being output 1 + i. */
static Graph *grad_graph(void)
{
    Graph *g = graph_new("grads");
    Err e = {0};
    Builder b = builder_make(g, &e);
    int ps[NT];
    for (int i = 0; i < NT; i++) {
        Type t = type_make(DT_F32, ranks[i], shapes[i]);
        /* h.gain a buffer: assigned, outside the norm (ROLE_BUFFER) */
        ps[i] = i == 1 ? b_buffer(&b, names[i], &t, NULL) : b_param(&b, names[i], &t, NULL);
    }
    static const char *const inputs[NT] = {"g0", "g1", "g2", "g3"};
    b_output(&b, b_binary(&b, OP_MUL, ps[0], b_scalar(&b, 2, DT_F32)), "loss");
    for (int i = 0; i < NT; i++) { /* 2 x + 0 p: each parameter read, so each has a buffer */
        Type t = type_make(DT_F32, ranks[i], shapes[i]);
        int x = b_input(&b, inputs[i], &t);
        int twice = b_binary(&b, OP_MUL, x, b_scalar(&b, 2, DT_F32));
        int none = b_binary(&b, OP_MUL, ps[i], b_scalar(&b, 0, DT_F32));
        b_output(&b, b_binary(&b, OP_ADD, twice, none), NULL);
    }
    CHECK(err_ok(&e));
    return g;
}

static void gpu_against_host(const Scenario *s)
{
    Err e = {0};
    Graph *g = grad_graph();
    CompileOptions co = {.device = device_find("cuda")};
    Compiled *c = compile_graph(g, &co, &e);
    Tensor hp[NT], hg[NT], dp[NT], in[NT], out[NT + 1] = {{0}};
    alloc_set(hp), alloc_set(hg), alloc_set(dp), alloc_set(in);
    fill(hp, 1, 0.5f);
    Optimizer *host = c ? optim_new(&s->c, g, hp, &e) : NULL;
    CudaOptim *dev = host ? cuda_optim_new(c->engine, host, hp, NT, 1, false, &e) : NULL;
    bool fetch[NT + 1] = {true};
    double most = 0;
    for (int step = 0; dev && step < 5 && err_ok(&e); step++) {
        fill(in, 100 + (uint64_t)step, 0.4f); /* the graph doubles it */
        if (step == 3)
            ((float *)in[3].data)[777] = NAN;
        for (int i = 0; i < NT; i++)
            for (int64_t k = 0; k < tensor_numel(&in[i]); k++)
                ((float *)hg[i].data)[k] = ((float *)in[i].data)[k] * 2;
        /* the first run uploads the parameters: before the host's update */
        if (!cuda_engine_run_resident(c->engine, in, hp, out, fetch, &e))
            break;
        double want = optim_step(host, hp, hg, 1, 1e-2), got = 0;
        if (!cuda_optim_step(dev, 1, 1e-2, &e) || !cuda_optim_finish(dev, &got, &e) ||
            !cuda_engine_download_params(c->engine, dp, &e))
            break;
        CHECK_NEAR(got, want, 1e-6);
        most = fmax(most, worst(dp, hp));
    }
    CHECK(err_ok(&e) && most <= 1e-6);
    if (!err_ok(&e))
        fprintf(stderr, "%s on the GPU: %s\n", s->label, e.msg);
    printf("GPU %-30s within %.2g of optim.c\n", s->label, most);
    cuda_optim_free(dev);
    optim_free(host);
    compiled_free(c);
    for (int i = 0; i <= NT; i++)
        tensor_free(&out[i]);
    free_set(hp), free_set(hg), free_set(dp), free_set(in);
    graph_free(g);
}

/* coil train --device cuda: learns, and 10 + 10 steps resumed is 20 straight, bit for bit
 * (the norm's fixed order); with two micro-batches summed on the device too. */
static void gpu_train(void)
{
    static const char *const set[] = {"layers=2", "heads=4", "hidden=64", "vocab=256", "context=64"};
    static const SymSize sizes[2] = {{"B", 8}, {"T", 64}};
    ModelOptions mo = {.set = set, .nset = 5};
    Err e = {0};
    Graph *g = model_load("examples/gpt2.coil", &mo, &e);
    char dir[] = "/tmp/coil-optim-gpu-XXXXXX";
    if (!g || !mkdtemp(dir)) {
        check_failures++;
        graph_free(g);
        return;
    }
    for (int accum = 1; accum <= 2; accum++) {
        char a[300], b[300], cmd[700];
        snprintf(a, sizeof a, "%s/a%d", dir, accum), snprintf(b, sizeof b, "%s/b%d", dir, accum);
        TrainOptions o = {.loss = "cross_entropy", .steps = 20, .accum = accum, .sizes = sizes,
                          .nsizes = 2, .data = "/usr/share/common-licenses/GPL-3",
                          .data_width = 1, .seed = 5,
                          .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 2, NULL, 0},
                          .lr = {3e-3, 3e-4, 10, 400}, .save = a,
                          .compile = {.device = device_find("cuda")}, .out = stdout};
        TrainOptions first = o, rest = o;
        first.steps = 10, first.save = rest.save = b, rest.resume = true;
        TrainResult r, r0;
        bool ok = train_run(g, &o, &r0, &e) && train_run(g, &first, &r, &e) &&
                  train_run(g, &rest, &r, &e);
        if (!ok)
            fprintf(stderr, "train on the GPU: %s\n", e.msg);
        CHECK(ok && r0.first_loss > 5 && r0.last_loss < r0.first_loss);
        snprintf(cmd, sizeof cmd, "cmp -s %s/checkpoint.safetensors %s/checkpoint.safetensors", a, b);
        CHECK(ok && system(cmd) == 0);
        printf("GPU training, %d micro-batch(es): loss %.3f -> %.3f, resumed bit-identically\n",
               accum, r0.first_loss, r0.last_loss);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    graph_free(g);
}

static void gpu_tests(void)
{
    const Scenario cases[] = {
        {"adamw", {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 1, exempt, 1}, 0, 0, false, false},
        {"sgd with momentum", {OPT_SGD, 0.9, 0.95, 1e-8, 0.9, 0.1, 1.0, 1, exempt, 1}, 0, 0, false, false},
        {"lion", {OPT_LION, 0.9, 0.99, 1e-8, 0, 0.1, 1.0, 1, exempt, 1}, 0, 0, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        gpu_against_host(&cases[i]);
    gpu_train();
}

int main(void)
{
    test_chunks();
    test_nvrtc();
    test_emulated();
    const char *why;
    if (cuda_driver_available(&why))
        gpu_tests();
    else
        printf("skipped: %s\n", why);
    return check_status();
}
