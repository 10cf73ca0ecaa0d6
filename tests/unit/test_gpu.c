/* test_gpu.c — coil on a GPU, stage by stage, every case held to an independent reference:
 * the interpreter (op fixtures as they are and retyped to f16 and bf16, the training
 * fixtures' joint graphs, random graphs, the examples), a plain run (CUDA-graph replays and
 * re-captures, max-autotune), the planner's own numbers (running out of GPU memory).
 * The GPU kit (scripts/gpu-check.sh) runs each stage in a process of its own, since a
 * faulting kernel poisons the whole CUDA context: a stage stops at the first such sticky
 * error and prints the command that reruns that case alone with CUDA_LAUNCH_BLOCKING=1.
 * Without a GPU every stage but `devices` prints "skipped: REASON" and passes; --cpu runs
 * the stages on this CPU instead, to check their own logic before a GPU is at hand.
 * usage: test_gpu [STAGE...|all] [--case NAME] [--shard I/N] [--random N] [--cpu] [--list] */
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "differential.h"
#include "frontend/frontend.h"
#include "op_cases.h"
#include "pipeline/pipeline.h"
#include "retype_cases.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_tune.h"
#include "runtime/device.h"

/* ---------------------------------------------------------------- running cases */

/* Which cases of a stage run: one by name (--case), or every I-th of N (--shard I/N), so
 * that the kit can run a long stage in several processes at once. */
typedef struct Runner {
    const char *argv0, *stage, *only;
    int shard, nshards, random;
    bool gpu; /* a GPU is here (without one only `devices` runs, and nothing is sticky) */
    int seen, ran, failed;
} Runner;

static bool want(Runner *r, const char *name)
{
    if (r->only)
        return strcmp(r->only, name) == 0;
    return r->seen++ % r->nshards == r->shard;
}

/* A case finished: ok or FAIL, and the rerun line; a sticky error ends the stage (exit 3)
 * because every later call in this process would fail with it. */
static void done(Runner *r, const char *name, int failures_before)
{
    bool ok = check_failures == failures_before;
    char why[400];
    r->ran++;
    r->failed += !ok;
    printf("%s %s %s\n", ok ? "ok  " : "FAIL", r->stage, name);
    if (r->gpu && !cuda_device_healthy(0, why, sizeof why)) {
        printf("STICKY %s %s: the CUDA context is lost: %s\n"
               "rerun alone: CUDA_LAUNCH_BLOCKING=1 %s %s --case %s\n",
               r->stage, name, why, r->argv0, r->stage, name);
        fflush(stdout);
        exit(3);
    }
    if (!ok)
        printf("rerun alone: CUDA_LAUNCH_BLOCKING=1 %s %s --case %s\n", r->argv0, r->stage, name);
    fflush(stdout);
}

/* What every case compiles with: the GPU, or with --cpu this machine's CPU (a dry run of
 * the stages' own logic where no GPU is, the GPU's statistics unchecked). */
static CompileOptions gpu; /* .device: set by main (the GPU, or the CPU with --cpu) */

static bool on_gpu(const Compiled *c) { return c && c->device->gpu; }

/* The passes the device's code generator wants (the GPU keeps attention whole). */
static const char *device_pipeline(void)
{
    return *gpu.device->passes;
}

/* ---------------------------------------------------------------- models */

/* A graph with parameters, inputs and the interpreter's outputs (differential.h's Data). */
typedef struct Model {
    Graph *g;
    Data d;
} Model;

static void model_free(Model *m)
{
    if (m->g)
        data_free(m->g, &m->d);
    graph_free(m->g);
    memset(m, 0, sizeof *m);
}

/* m->g (taken over) through the passes of pipeline, then data drawn from seed. */
static bool model_from(Graph *g, const char *pipeline, uint64_t seed, Model *m, const char *label)
{
    Err e = {0};
    memset(m, 0, sizeof *m);
    m->g = g;
    bool ok = m->g && run_passes(&m->g, pipeline, &e) && data_make(m->g, seed, &m->d, &e);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", label, e.msg);
        check_failures++;
    }
    return ok;
}

static bool model_file(const char *path, const char *const *set, int nset, uint64_t seed, Model *m)
{
    Err e = {0};
    ModelOptions mo = {.set = set, .nset = nset};
    Graph *g = model_load(path, &mo, &e);
    if (!g) {
        memset(m, 0, sizeof *m);
        fprintf(stderr, "%s: %s\n", path, e.msg);
        check_failures++;
        return false;
    }
    return model_from(g, device_pipeline(), seed, m, path);
}

static bool model_text(const char *text, uint64_t seed, Model *m)
{
    Err e = {0};
    Graph *g = ir_parse(text, strlen(text), "test.cir", &e);
    if (!g) {
        memset(m, 0, sizeof *m);
        fprintf(stderr, "%s\n%s\n", e.msg, text);
        check_failures++;
        return false;
    }
    return model_from(g, device_pipeline(), seed, m, "test.cir");
}

/* Copies of n tensors (kept for comparing two ways of running). */
static void keep_copy(const Tensor *got, int n, Tensor *keep)
{
    for (int i = 0; i < n; i++) {
        Err e = {0};
        tensor_free(&keep[i]);
        /* an empty output may have no data at all: memcpy from NULL is undefined even for 0 */
        if (tensor_alloc(&keep[i], got[i].dt, got[i].rank, got[i].shape, &e) &&
            tensor_nbytes(&got[i]) > 0)
            memcpy(keep[i].data, got[i].data, tensor_nbytes(&got[i]));
    }
}

static void tensors_free(Tensor *t, int n)
{
    for (int i = 0; i < n; i++)
        tensor_free(&t[i]);
}

/* `runs` runs of m compiled with o, each against the interpreter; the last run's outputs
 * into keep when given. The compiled model is returned for its statistics. */
static Compiled *model_run(const Model *m, CompileOptions o, int runs, const char *how, Tensor *keep)
{
    Err e = {0};
    Tensor got[8] = {{0}};
    Compiled *c = compile_optimised(graph_copy(m->g, &e), &o, &e);
    for (int r = 0; c && r < runs && err_ok(&e); r++) {
        if (!compiled_run(c, m->d.in, m->d.params, got, &e))
            break;
        if (keep && r == runs - 1)
            keep_copy(got, m->g->noutput, keep);
        if (!outputs_match(m->g, &m->d, got, how, 0))
            check_failures++;
        tensors_free(got, m->g->noutput);
    }
    if (!err_ok(&e)) {
        fprintf(stderr, "%s: %s\n", how, e.msg);
        check_failures++;
    }
    return c;
}

static bool same_tensors(const Tensor *a, const Tensor *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!a[i].data || !b[i].data || tensor_nbytes(&a[i]) != tensor_nbytes(&b[i]) ||
            memcmp(a[i].data, b[i].data, tensor_nbytes(&a[i])) != 0)
            return false;
    return true;
}

/* ---------------------------------------------------------------- fixtures */

/* c on the GPU with o, `runs` times, each against the interpreter on the graph the GPU
 * compiled (the CUDA passes keep attention whole: one rounding, not one per op). */
static Compiled *fixture_run(const Case *c, CompileOptions o, int runs, const char *how)
{
    Err e = {0};
    Tensor out[16] = {{0}}, want[16] = {{0}};
    Compiled *cc = compile_graph(c->g, &o, &e);
    if (cc && !interp_run(cc->g, c->in, c->params, want, NULL, &e))
        runs = 0;
    for (int r = 0; cc && r < runs && err_ok(&e); r++)
        if (compiled_run(cc, c->in, c->params, out, &e))
            check_against(c, how, out, want);
    for (int i = 0; cc && i < c->g->noutput; i++)
        tensor_free(&want[i]);
    if (!err_ok(&e)) {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
    }
    return cc;
}

/* Plain; as a CUDA graph (one capture, then replays); without fusion. */
static void fixture_three_ways(const Case *c)
{
    compiled_free(fixture_run(c, gpu, 1, "cuda"));
    CompileOptions o = gpu;
    o.cuda.graphs = true;
    Compiled *cc = fixture_run(c, o, 3, "cuda, graphs");
    if (on_gpu(cc)) {
        CudaEngineStats st = cuda_engine_stats(cc->engine);
        CHECK(st.graph_captures == 1 && st.graph_replays == 2);
    }
    compiled_free(cc);
    o = gpu;
    o.no_fusion = true;
    compiled_free(fixture_run(c, o, 1, "cuda, no fusion"));
}

/* Every fixture of tests/models/ops, as it is (f32 ... bf16) or, with `to` f16 or bf16,
 * each f32 one retyped (retype_cases.h), held at that format's tolerance. */
static void each_fixture(Runner *r, DType to)
{
    struct dirent **list;
    int n = scandir(FIXTURE_DIR, &list, is_case_file, alphasort);
    CHECK(n >= 100);
    for (int i = 0; i < n; i++) {
        list[i]->d_name[strlen(list[i]->d_name) - 4] = '\0';
        const char *name = list[i]->d_name;
        if (want(r, name)) {
            int before = check_failures;
            Case c, low;
            if (case_load(FIXTURE_DIR, name, &c) && c.g->noutput <= 16) {
                if (to == DT_F32)
                    fixture_three_ways(&c);
                else if (!graph_has_dtype(c.g, DT_F32))
                    printf("     %s: no f32 value to retype\n", name);
                else if (retype_refuses(name))
                    printf("     %s: its log-sum-exp stays f32 (not retyped)\n", name);
                else if (case_retype(&c, to, &low)) {
                    compiled_free(fixture_run(&low, gpu, 1, dtype_info[to].name));
                    case_free(&low);
                }
            }
            case_free(&c);
            done(r, name, before);
        }
        free(list[i]);
    }
    free(n >= 0 ? list : NULL);
}

static void stage_fixtures(Runner *r) { each_fixture(r, DT_F32); }
static void stage_fixtures_f16(Runner *r) { each_fixture(r, DT_F16); }
static void stage_fixtures_bf16(Runner *r) { each_fixture(r, DT_BF16); }

/* ---------------------------------------------------------------- training graphs */

/* The training fixtures' forward graphs (tests/models/train: a 2-layer MLP with layer norm
 * and GELU, a block of causal attention), differentiated here: the joint graph on the GPU
 * against the interpreter, in f32 and autocast to bf16 (passes/precision.c). (Their
 * joint graphs as written, held to PyTorch autograd, are op fixtures: stage fixtures.) */
static void stage_training(Runner *r)
{
    static const char *const names[] = {"train_mlp", "train_attn"};
    static const DType lows[] = {DT_F32, DT_BF16};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (size_t j = 0; j < sizeof lows / sizeof *lows; j++) {
            char name[64], path[256];
            snprintf(name, sizeof name, "%s-%s", names[i], dtype_info[lows[j]].name);
            if (!want(r, name))
                continue;
            int before = check_failures;
            Err e = {0};
            snprintf(path, sizeof path, "tests/models/train/%s.fwd.cir", names[i]);
            Graph *fwd = ir_parse_file(path, &e), *low = NULL;
            if (fwd && lows[j] != DT_F32)
                low = pass_mixed_precision(fwd, lows[j], &e);
            Graph *joint = fwd ? autodiff(low ? low : fwd, "loss", &e) : NULL;
            Model m;
            if (!joint) {
                fprintf(stderr, "%s: %s\n", path, e.msg);
                check_failures++;
            } else if (model_from(joint, device_pipeline(), 7, &m, name)) {
                compiled_free(model_run(&m, gpu, 2, name, NULL));
                model_free(&m);
            }
            graph_free(low);
            graph_free(fwd);
            done(r, name, before);
        }
}

/* ---------------------------------------------------------------- random graphs */

static void stage_random(Runner *r)
{
    for (uint64_t seed = 1; seed <= (uint64_t)r->random; seed++) {
        char name[32];
        snprintf(name, sizeof name, "%llu", (unsigned long long)seed);
        if (!want(r, name))
            continue;
        int before = check_failures;
        Err e = {0};
        Model m;
        Tensor got[2] = {{0}};
        if (model_from(random_graph(seed, &e), pass_pipeline, seed, &m, name)) {
            Compiled *c = compile_optimised(graph_copy(m.g, &e), &gpu, &e);
            if (!c || !compiled_run(c, m.d.in, m.d.params, got, &e) ||
                !outputs_match(m.g, &m.d, got, "cuda", seed)) {
                char *text = ir_print(m.g);
                fprintf(stderr, "seed %s: %s\n%s\n", name, e.msg, text ? text : "");
                free(text);
                check_failures++;
            }
            tensors_free(got, m.g->noutput);
            compiled_free(c);
        }
        model_free(&m);
        done(r, name, before);
    }
}

/* ---------------------------------------------------------------- examples */

/* Plain, then as a CUDA graph (the same kernels and cuBLAS calls: the same bits), then at
 * another batch size (the graph captured again), then profiled without cuBLASLt. */
static void example_case(const char *path, const char *const *set, int nset)
{
    Model m, other;
    Tensor plain[8] = {{0}}, graphs[8] = {{0}};
    if (!model_file(path, set, nset, 3, &m) || !model_file(path, set, nset, 5, &other)) {
        model_free(&m);
        return;
    }
    compiled_free(model_run(&m, gpu, 1, path, plain));
    CompileOptions o = gpu;
    o.cuda.graphs = true;
    Compiled *c = model_run(&m, o, 3, path, graphs);
    CudaEngineStats st = on_gpu(c) ? cuda_engine_stats(c->engine) : (CudaEngineStats){0};
    CHECK(c && (!on_gpu(c) || (st.graph_captures == 1 && st.graph_replays == 2)));
    CHECK(same_tensors(plain, graphs, m.g->noutput));
    if (on_gpu(c))
        printf("     %s: %d cuBLAS, %d cuBLASLt GEMMs, %d launches, %.1f MiB on the device%s%s\n",
               path, st.gemm_cublas, st.gemm_lt, st.launches, (double)st.device_bytes / 1048576,
               st.note[0] ? "; " : "", st.note);
    for (int run = 0; c && run < 3; run++) { /* B = 2 (seed 5) after B = 4 (seed 3) */
        Err e = {0};
        Tensor got[8] = {{0}};
        CHECK(compiled_run(c, other.d.in, other.d.params, got, &e) &&
              outputs_match(other.g, &other.d, got, "graphs, batch changed", 0));
        tensors_free(got, other.g->noutput);
    }
    if (on_gpu(c))
        CHECK(cuda_engine_stats(c->engine).graph_captures == 2);
    compiled_free(c);
    o = gpu;
    o.cuda.no_lt = true;
    o.profile = true;
    c = model_run(&m, o, 1, path, NULL);
    const double *t = c ? compiled_step_seconds(c) : NULL;
    double sum = 0;
    for (int s = 0; t && s < c->p->nstep; s++)
        sum += t[s];
    CHECK(t && sum > 0 && (!on_gpu(c) || cuda_engine_stats(c->engine).gemm_lt == 0));
    compiled_free(c);
    tensors_free(plain, m.g->noutput);
    tensors_free(graphs, m.g->noutput);
    model_free(&m);
    model_free(&other);
}

static void stage_examples(Runner *r)
{
    static const struct {
        const char *name, *path;
        const char *set[3];
        int nset;
    } ex[] = {{"tiny", "examples/tiny.coil", {0}, 0},
              {"tiny-cir", "examples/tiny.cir", {0}, 0},
              {"mlp", "examples/mlp.coil", {"layers=2"}, 1},
              {"gpt2-small", "examples/gpt2.coil", {"layers=1", "vocab=512"}, 2}};
    for (size_t i = 0; i < sizeof ex / sizeof *ex; i++)
        if (want(r, ex[i].name)) {
            int before = check_failures;
            example_case(ex[i].path, ex[i].set, ex[i].nset);
            done(r, ex[i].name, before);
        }
}

/* ---------------------------------------------------------------- cuBLASLt, parameters */

/* cuBLASLt's GELU is taken to be the tanh form: gelu_tanh(x W^T + b) fused must match the
 * interpreter with pre-activations spread over [-4, 4], where the two forms differ; the erf
 * form is left to its own kernel. */
static void lt_gelu_case(int form)
{
    static const char *const forms[] = {"gelu_tanh", "gelu"};
    char text[1024];
    Model m;
    snprintf(text, sizeof text, "graph @t(%%x: f32[B,32]) -> (y: f32[B,48]) {\n"
             "  %%w = param {name=\"w\", init=\"normal(0.3)\"} : f32[48,32]\n"
             "  %%b = param {name=\"b\", init=\"normal(1)\"} : f32[48]\n"
             "  %%wt = transpose %%w {perm=[1,0]} : f32[32,48]\n"
             "  %%h = matmul %%x, %%wt : f32[B,48]\n  %%s = add %%h, %%b : f32[B,48]\n"
             "  %%y = %s %%s : f32[B,48]\n  return %%y\n}\n", forms[form]);
    if (!model_text(text, 11, &m))
        return;
    int before = check_failures;
    Compiled *c = model_run(&m, gpu, 1, forms[form], NULL);
    CHECK(c && (!on_gpu(c) || cuda_engine_stats(c->engine).gemm_lt == (form == 0)));
    if (form == 0 && check_failures > before)
        fprintf(stderr, "if only gelu_tanh fails: cuBLASLt's GELU is not the tanh form; move "
                "lt_epilogue's GELU row in runtime/cuda/cuda_engine.c to CU_EPI_GELU_BIAS\n");
    compiled_free(c);
    model_free(&m);
}

/* New values in the same parameter memory are seen only after cuda_engine_params_changed. */
static void params_changed_case(void)
{
    Model m;
    Err e = {0};
    Tensor got[4] = {{0}}, first[4] = {{0}};
    if (!model_file("examples/tiny.cir", NULL, 0, 5, &m))
        return;
    Compiled *c = model_run(&m, gpu, 1, "tiny", first);
    if (!on_gpu(c)) { /* the CPU reads the host's parameters in place: nothing is stale */
        printf("     only on a GPU\n");
        compiled_free(c);
        tensors_free(first, m.g->noutput);
        model_free(&m);
        return;
    }
    for (int i = 0; c && i < m.d.nparam; i++)
        for (int64_t j = 0; j < tensor_numel(&m.d.params[i]); j++)
            dtype_store(m.d.params[i].dt, m.d.params[i].data, j,
                        2 * dtype_load(m.d.params[i].dt, m.d.params[i].data, j));
    CHECK(c && compiled_run(c, m.d.in, m.d.params, got, &e) &&
          same_tensors(got, first, m.g->noutput)); /* stale, as documented */
    tensors_free(got, m.g->noutput);
    tensors_free(m.d.want, m.g->noutput);
    CHECK(interp_run(m.g, m.d.in, m.d.params, m.d.want, NULL, &e));
    if (on_gpu(c)) {
        cuda_engine_params_changed(c->engine);
        CHECK(compiled_run(c, m.d.in, m.d.params, got, &e) &&
              outputs_match(m.g, &m.d, got, "tiny, parameters changed", 0));
        CHECK(cuda_engine_stats(c->engine).param_uploads == 2);
        tensors_free(got, m.g->noutput);
    }
    compiled_free(c);
    tensors_free(first, m.g->noutput);
    model_free(&m);
}

static void stage_engine(Runner *r)
{
    static const char *const names[] = {"lt-gelu-tanh", "lt-gelu-erf", "params-changed"};
    for (int i = 0; i < 3; i++)
        if (want(r, names[i])) {
            int before = check_failures;
            if (i < 2)
                lt_gelu_case(i);
            else
                params_changed_case();
            done(r, names[i], before);
        }
}

/* ---------------------------------------------------------------- autotuning */

/* max-autotune on the GPU: every output within the interpreter's tolerance and equal to
 * the default's at f32 precision, a report with measured candidates, and a second compile
 * that takes every choice from the cache. */
static void autotune_case(const char *path, const char *const *set, int nset)
{
    Model m;
    Tensor base[8] = {{0}}, tuned[8] = {{0}};
    char dir[] = "/tmp/coil-gpu-tune-XXXXXX", cache[80];
    if (!model_file(path, set, nset, 5, &m))
        return;
    if (!mkdtemp(dir)) {
        model_free(&m);
        return;
    }
    snprintf(cache, sizeof cache, "%s/autotune.json", dir);
    compiled_free(model_run(&m, gpu, 1, "default", base));
    for (int round = 0; round < 2; round++) {
        TuneReport rep = {0};
        CompileOptions o = gpu;
        o.mode = MODE_MAX_AUTOTUNE, o.tune_cache = cache, o.tune_report = &rep;
        Compiled *c = model_run(&m, o, 2, round ? "max-autotune, cached" : "max-autotune", tuned);
        int measured = 0, cached = 0;
        for (int i = 0; i < rep.n; i++)
            measured += rep.k[i].res.ntrial > 1, cached += rep.k[i].cached;
        CHECK(c && rep.n > 0 && (round ? cached == rep.n && measured == 0 : measured > 0));
        for (int i = 0; c && i < m.g->noutput; i++)
            for (int64_t j = 0; j < tensor_numel(&base[i]); j++)
                CHECK(check_close(dtype_load(tuned[i].dt, tuned[i].data, j),
                                  dtype_load(base[i].dt, base[i].data, j), 1e-4));
        if (round == 0)
            tune_report_table(&rep, stdout);
        compiled_free(c);
        tune_report_free(&rep);
    }
    unlink(cache);
    strcat(cache, ".lock"); /* the cache's writers' lock */
    unlink(cache);
    rmdir(dir);
    tensors_free(base, m.g->noutput);
    tensors_free(tuned, m.g->noutput);
    model_free(&m);
}

static void stage_autotune(Runner *r)
{
    if (want(r, "mlp")) {
        int before = check_failures;
        autotune_case("examples/mlp.coil", (const char *[]){"layers=2"}, 1);
        done(r, "mlp", before);
    }
    if (want(r, "gpt2-small")) {
        int before = check_failures;
        autotune_case("examples/gpt2.coil", (const char *[]){"layers=1", "vocab=512"}, 2);
        done(r, "gpt2-small", before);
    }
}

/* ---------------------------------------------------------------- memory */

/* A plan larger than the GPU: x^T x of an [N, 1] x is an N x N product that must be stored
 * (a sum reads it), 4 N^2 bytes. The run fails with coil's message (the plan's size, the
 * device's free and total memory), not a crash, and the engine then runs at a size that fits. */
static void oom_case(void)
{
    static const char text[] =
        "graph @oom(%x: f32[N,1]) -> (s: f32[]) {\n"
        "  %xt = transpose %x {perm=[1,0]} : f32[1,N]\n"
        "  %p = matmul %x, %xt : f32[N,N]\n"
        "  %s = sum %p {axes=[0,1]} : f32[]\n  return %s\n}\n";
    CudaDeviceInfo d;
    Err e = {0};
    if (!gpu.device->gpu) {
        printf("     not on a CPU: this machine's memory is the host's\n");
        return;
    }
    if (!cuda_device_query(0, &d, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        check_failures++;
        return;
    }
    int64_t n = 1024; /* 4 n^2 bytes: the smallest power of two over twice the device */
    while (4 * n * n < 2 * d.total_bytes)
        n *= 2;
    Graph *g = ir_parse(text, sizeof text - 1, "oom.cir", &e);
    Compiled *c = g ? compile_graph(g, &gpu, &e) : NULL;
    Tensor x = {0}, small = {0}, out[1] = {{0}};
    CHECK(c && tensor_alloc(&x, DT_F32, 2, (int64_t[]){n, 1}, &e) &&
          tensor_alloc(&small, DT_F32, 2, (int64_t[]){64, 1}, &e));
    for (int64_t i = 0; c && i < n; i++)
        ((float *)x.data)[i] = i < 64 ? 1.0f : 0.0f;
    for (int64_t i = 0; c && i < 64; i++)
        ((float *)small.data)[i] = 1.0f;
    if (c) {
        CHECK(!compiled_run(c, &x, NULL, out, &e));
        CHECK(strstr(e.msg, "out of GPU memory: the plan needs") && strstr(e.msg, "MiB free of"));
        printf("     at N = %lld: %s\n", (long long)n, e.msg);
        e = (Err){0};
        CHECK(compiled_run(c, &small, NULL, out, &e) && out[0].data &&
              ((float *)out[0].data)[0] == 64.0f * 64.0f);
        if (!err_ok(&e))
            fprintf(stderr, "after running out of memory: %s\n", e.msg);
    }
    tensor_free(&out[0]);
    tensor_free(&x);
    tensor_free(&small);
    compiled_free(c);
    graph_free(g);
}

static void stage_memory(Runner *r)
{
    if (want(r, "larger-than-gpu")) {
        int before = check_failures;
        oom_case();
        done(r, "larger-than-gpu", before);
    }
}

/* ---------------------------------------------------------------- the device */

/* What the kit prints first: the GPU, and the libraries coil resolved (also without a GPU). */
static void stage_devices(Runner *r)
{
    char libs[4096];
    Err e = {0};
    CudaDeviceInfo d;
    if (!want(r, "query"))
        return;
    int before = check_failures;
    cuda_libraries_report(libs, sizeof libs);
    printf("%s", libs);
    if (cuda_device_query(0, &d, &e))
        printf("GPU:      %s, %d SMs, compute capability %d.%d (%s), %.0f of %.0f MiB free, "
               "driver %d.%d\n", d.name, d.sms, d.major, d.minor, d.arch,
               (double)d.free_bytes / 1048576, (double)d.total_bytes / 1048576,
               d.driver_version / 1000, d.driver_version % 1000 / 10);
    else
        printf("GPU:      none (%s)\n", e.msg);
    done(r, "query", before);
}

/* ---------------------------------------------------------------- the stages */

typedef struct Stage {
    const char *name;
    void (*run)(Runner *r);
    const char *what;
} Stage;

static const Stage stages[] = {
    {"devices", stage_devices, "the GPU and the libraries coil resolved"},
    {"fixtures", stage_fixtures, "every op fixture: plain, as a CUDA graph, without fusion"},
    {"fixtures-f16", stage_fixtures_f16, "every f32 op fixture retyped to f16"},
    {"fixtures-bf16", stage_fixtures_bf16, "every f32 op fixture retyped to bf16"},
    {"training", stage_training, "the training fixtures differentiated, f32 and bf16 autocast"},
    {"random", stage_random, "random graphs (test_differential's)"},
    {"examples", stage_examples, "tiny, mlp, a small gpt2: graphs, batch change, profile"},
    {"engine", stage_engine, "cuBLASLt's fused GELU, parameter re-uploads"},
    {"autotune", stage_autotune, "max-autotune equal to the default, then from its cache"},
    {"memory", stage_memory, "a plan larger than the GPU fails with coil's message"},
};
#define NSTAGE (int)(sizeof stages / sizeof *stages)

static double now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* One stage: its cases, then "stage NAME: N cases, F failed (T s)" (or skipped). */
static void run_stage(const Stage *st, Runner base, const char *no_gpu)
{
    Runner r = base;
    r.stage = st->name;
    r.gpu = !no_gpu && gpu.device->gpu;
    if (no_gpu && st->run != stage_devices) {
        printf("stage %s: skipped: no GPU (%s)\n", st->name, no_gpu);
        return;
    }
    double t0 = now();
    st->run(&r);
    printf("stage %s: %d cases, %d failed (%.1f s)\n", st->name, r.ran, r.failed, now() - t0);
    fflush(stdout);
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [STAGE...|all] [--case NAME] [--shard I/N] [--random N] [--cpu] "
            "[--list]\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    Runner base = {.argv0 = argv[0], .nshards = 1, .random = 100};
    bool chosen[NSTAGE] = {false}, any = false;
    gpu.device = device_find("cuda");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--list") == 0) {
            for (int s = 0; s < NSTAGE; s++)
                printf("%-14s %s\n", stages[s].name, stages[s].what);
            return 0;
        } else if (strcmp(a, "--case") == 0 && i + 1 < argc) {
            base.only = argv[++i];
        } else if (strcmp(a, "--shard") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%d/%d", &base.shard, &base.nshards) != 2 || base.nshards < 1 ||
                base.shard < 0 || base.shard >= base.nshards)
                return usage(argv[0]);
        } else if (strcmp(a, "--random") == 0 && i + 1 < argc) {
            base.random = atoi(argv[++i]);
        } else if (strcmp(a, "--cpu") == 0) {
            gpu = (CompileOptions){.device = device_cpu(), .threads = 2};
        } else if (strcmp(a, "all") == 0) {
            for (int s = 0; s < NSTAGE; s++)
                chosen[s] = any = true;
        } else {
            int s = 0;
            while (s < NSTAGE && strcmp(stages[s].name, a) != 0)
                s++;
            if (s == NSTAGE) {
                fprintf(stderr, "%s: unknown stage '%s' (--list names them)\n", argv[0], a);
                return usage(argv[0]);
            }
            chosen[s] = any = true;
        }
    }
    const char *why = NULL;
    bool have_gpu = !gpu.device->gpu || device_available(gpu.device, &why);
    for (int s = 0; s < NSTAGE; s++)
        if (!any || chosen[s])
            run_stage(&stages[s], base, have_gpu ? NULL : why);
    return check_status();
}
