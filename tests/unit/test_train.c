/* test_train.c — training end to end: the tiny GPT-2's loss and gradients from autodiff
 * equal PyTorch autograd's on the same weights (tests/models/gpt2/gen_grads.py); the
 * compiled joint graph equals the interpreter's; each optimizer's first steps match their
 * closed forms; a character-level GPT-2 on the GPL-3 text every Debian machine has learns
 * (its loss falls below a stated bound); a run resumed from a checkpoint ends bit-identical
 * to one that was never stopped; and a process killed while checkpointing leaves a whole
 * checkpoint behind. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "coil_beside.h"
#include "frontend/frontend.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "passes/passes.h"
#include "pipeline/training.h"
#include "train/train.h"

#define DIR "tests/models/gpt2/"
#define TEXT "/usr/share/common-licenses/GPL-3"

static const char *const tiny[] = {"layers=2", "heads=4", "hidden=64", "vocab=97", "context=16"};
static const char *const chars[] = {"layers=2", "heads=4", "hidden=64", "vocab=256", "context=64"};

/* training: dropout active (coil train's form), its streams keyed by seed 5 */
static Graph *load_as(const char *const *set, int nset, bool training)
{
    ModelOptions opt = {.set = set, .nset = nset, .training = training, .seed = 5};
    Err e = {0};
    Graph *g = model_load("examples/gpt2.coil", &opt, &e);
    if (!g)
        fprintf(stderr, "model_load: %s\n", e.msg);
    return g;
}

static Graph *load(const char *const *set, int nset) { return load_as(set, nset, false); }

static Graph *joint_of(const Graph *model)
{
    Err e = {0};
    Graph *t = training_loss_graph(model, "cross_entropy", &e);
    Graph *j = t ? autodiff(t, NULL, &e) : NULL;
    if (!j)
        fprintf(stderr, "joint graph: %s\n", e.msg);
    graph_free(t);
    return j;
}

/* ---------------------------------------------------------------- against PyTorch */

static double rel_error(const Tensor *got, const Tensor *want)
{
    double big = 0, worst = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++)
        big = fmax(big, fabs(check_at(want, i)));
    for (int64_t i = 0; i < tensor_numel(want); i++)
        worst = fmax(worst, fabs(check_at(got, i) - check_at(want, i)) / fmax(big, 1e-30));
    return tensor_numel(got) == tensor_numel(want) ? worst : INFINITY;
}

static void test_gradients_match_pytorch(void)
{
    Graph *model = load(tiny, 5), *j = model ? joint_of(model) : NULL;
    CHECK(j != NULL);
    if (!j) {
        graph_free(model);
        return;
    }
    int np = graph_params(j, NULL), *ids = calloc((size_t)np + 1, sizeof *ids);
    graph_params(j, ids);
    Tensor in[2] = {0}, loss = {0}, *params = calloc((size_t)np + 1, sizeof *params);
    Tensor *out = calloc((size_t)j->noutput + 1, sizeof *out), *cout = calloc((size_t)j->noutput + 1, sizeof *cout);
    StFile grads;
    Err e = {0};
    bool ok = npy_read(DIR "ids.npy", &in[0], &e) && npy_read(DIR "targets.npy", &in[1], &e) &&
              npy_read(DIR "loss.npy", &loss, &e) &&
              safetensors_bind(j, DIR "weights.safetensors", params, &e) &&
              safetensors_read(DIR "grads.safetensors", &grads, &e) &&
              interp_run(j, in, params, out, NULL, &e);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "gradients: %s\n", e.msg);
    CHECK(ok && fabs(check_at(&out[0], 0) - check_at(&loss, 0)) <= 1e-5 * check_at(&loss, 0));
    for (int i = 0; ok && i < np; i++) {
        const char *name = node_name(&j->node[ids[i]]);
        const StEntry *en = safetensors_find(&grads, name);
        Tensor want = {0};
        CHECK(en && safetensors_tensor(&grads, en, &want, &e));
        double err = rel_error(&out[1 + i], &want);
        if (!(err <= 1e-4))
            fprintf(stderr, "grad.%s: relative error %.3g against PyTorch\n", name, err);
        CHECK(err <= 1e-4);
        tensor_free(&want);
    }
    /* the compiled joint graph against the interpreter */
    CompileOptions co = {.threads = 2};
    Compiled *c = ok ? compile_graph(j, &co, &e) : NULL;
    CHECK(c && compiled_run(c, in, params, cout, &e));
    for (int i = 0; c && i < j->noutput; i++) {
        double err = rel_error(&cout[i], &out[i]);
        if (!(err <= 1e-4))
            fprintf(stderr, "compiled %s: relative error %.3g against the interpreter\n",
                    j->output_name[i], err);
        CHECK(err <= 1e-4);
    }
    compiled_free(c);
    if (ok)
        safetensors_free(&grads);
    for (int i = 0; i < j->noutput; i++)
        tensor_free(&out[i]), tensor_free(&cout[i]);
    for (int i = 0; i < np; i++)
        tensor_free(&params[i]);
    tensor_free(&in[0]), tensor_free(&in[1]), tensor_free(&loss);
    free(out), free(cout), free(params), free(ids);
    graph_free(j);
    graph_free(model);
}

/* ---------------------------------------------------------------- optimizers */

/* One parameter [2, 2] (decayed) and one [2] (not), one step, closed forms. */
static void test_optimizers(void)
{
    Graph *g = graph_new("opt");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t2 = type_make(DT_F32, 2, (int64_t[]){2, 2}), t1 = type_make(DT_F32, 1, (int64_t[]){2});
    int w = b_param(&b, "w", &t2, NULL), bias = b_param(&b, "b", &t1, NULL); /* in this order */
    b_output(&b, b_binary(&b, OP_ADD, w, bias), "y");
    for (int kind = 0; kind < 3; kind++) {
        Tensor p[2], gr[2];
        tensor_alloc(&p[0], DT_F32, 2, (int64_t[]){2, 2}, &e), tensor_alloc(&p[1], DT_F32, 1, (int64_t[]){2}, &e);
        tensor_alloc(&gr[0], DT_F32, 2, (int64_t[]){2, 2}, &e), tensor_alloc(&gr[1], DT_F32, 1, (int64_t[]){2}, &e);
        for (int i = 0; i < 4; i++)
            ((float *)p[0].data)[i] = 1, ((float *)gr[0].data)[i] = (float)(i + 1);
        for (int i = 0; i < 2; i++)
            ((float *)p[1].data)[i] = 1, ((float *)gr[1].data)[i] = -2;
        OptConfig c = {(OptKind)kind, 0.9, kind == OPT_LION ? 0.99 : 0.95, 1e-8, 0.5, 0.1, 0, 1, NULL, 0};
        Optimizer *o = optim_new(&c, g, p, &e);
        double norm = optim_step(o, p, gr, 0.5, 0.01); /* two micro-batches: grads halved */
        CHECK(fabs(norm - sqrt(0.25 * (1 + 4 + 9 + 16 + 4 + 4))) < 1e-6);
        float w = ((float *)p[0].data)[1], bias = ((float *)p[1].data)[0];
        double decayed = 1 - 0.01 * 0.1;
        if (kind == OPT_ADAMW) /* first step: m/sqrt(v) with bias correction is sign(g) */
            CHECK(fabs(w - (decayed - 0.01)) < 1e-6 && fabs(bias - (1 + 0.01)) < 1e-6);
        else if (kind == OPT_SGD) /* momentum buffer = g/2 at the first step */
            CHECK(fabs(w - (decayed - 0.01 * 1.0)) < 1e-6 && fabs(bias - (1 + 0.01)) < 1e-6);
        else
            CHECK(fabs(w - (decayed - 0.01)) < 1e-6 && fabs(bias - (1 + 0.01)) < 1e-6);
        optim_free(o);
        for (int i = 0; i < 2; i++)
            tensor_free(&p[i]), tensor_free(&gr[i]);
    }
    /* a name pattern exempts a matrix from decay */
    {
        Tensor p[2], gr[2];
        tensor_alloc(&p[0], DT_F32, 2, (int64_t[]){2, 2}, &e), tensor_alloc(&p[1], DT_F32, 1, (int64_t[]){2}, &e);
        tensor_alloc(&gr[0], DT_F32, 2, (int64_t[]){2, 2}, &e), tensor_alloc(&gr[1], DT_F32, 1, (int64_t[]){2}, &e);
        for (int i = 0; i < 4; i++)
            ((float *)p[0].data)[i] = 1, ((float *)gr[0].data)[i] = 1;
        for (int i = 0; i < 2; i++)
            ((float *)p[1].data)[i] = 1, ((float *)gr[1].data)[i] = 1;
        const char *exempt[] = {"w*"};
        OptConfig c = {OPT_SGD, 0.9, 0.95, 1e-8, 0, 0.1, 0, 1, exempt, 1};
        Optimizer *o = optim_new(&c, g, p, &e);
        optim_step(o, p, gr, 1, 0.01);
        CHECK(fabs(((float *)p[0].data)[0] - (1 - 0.01)) < 1e-6); /* no decay */
        optim_free(o);
        for (int i = 0; i < 2; i++)
            tensor_free(&p[i]), tensor_free(&gr[i]);
    }
    LrSchedule s = {1e-3, 1e-4, 10, 110};
    CHECK(fabs(lr_at(&s, 0) - 1e-4) < 1e-12 && fabs(lr_at(&s, 9) - 1e-3) < 1e-12);
    CHECK(fabs(lr_at(&s, 60) - 5.5e-4) < 1e-9 && fabs(lr_at(&s, 110) - 1e-4) < 1e-12);
    graph_free(g);
}

/* ---------------------------------------------------------------- training runs */

static TrainOptions char_model(int64_t steps, const char *save, bool resume)
{
    static const SymSize sizes[2] = {{"B", 8}, {"T", 64}};
    TrainOptions o = {.loss = "cross_entropy", .steps = steps, .accum = 1, .sizes = sizes,
                      .nsizes = 2, .data = TEXT, .data_width = 1, .seed = 5,
                      .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 2, NULL, 0},
                      .lr = {3e-3, 3e-4, 10, 400}, .log_every = 0, .save = save,
                      .resume = resume, .compile = {.threads = 2}, .out = stdout};
    return o;
}

/* Character-level GPT-2 on GPL-3: log(256) = 5.55 at the start; 400 steps must bring it
 * well under the unigram entropy of English text (about 3.1 nats, where it plateaus
 * first), averaged over the last steps. Where it ends depends on the f32 rounding of the
 * sums on the way, chaotically: `coil train` with this model and schedule, seeds 1 to 6,
 * ends between 2.70 and 2.78 (the mean of its last 20 steps) with either of two exact
 * embedding gradients (a one-hot GEMM, index_add), and this run at 2.72 and 2.84. */
#define LEARNED 2.95
/* Under the sanitizers (make test-asan) the same loop for 60 steps, where the loss must
 * only fall by a nat: what they check is memory, and 60 steps run every path 400 do. */
#ifdef __SANITIZE_ADDRESS__
#define LEARN_STEPS 60
#define LEARNED_BY(first) ((first) - 1)
#else
#define LEARN_STEPS 400
#define LEARNED_BY(first) LEARNED
#endif
static void test_learns(void)
{
    Graph *g = load(chars, 5);
    TrainOptions o = char_model(LEARN_STEPS, NULL, false);
    TrainResult r;
    Err e = {0};
    bool ok = g && train_run(g, &o, &r, &e);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "train_run: %s\n", e.msg);
    printf("char-level GPT-2 on GPL-3: loss %.3f -> %.3f (mean of the last %d steps) in %lld "
           "steps, %.2f s\n", r.first_loss, r.tail_loss, TRAIN_TAIL, (long long)r.steps, r.seconds);
    CHECK(ok && r.first_loss > 5 && r.tail_loss < LEARNED_BY(r.first_loss));
    graph_free(g);
}

/* Dropout as coil train runs it: active (the first loss is not the inference form's on the
 * same batches and weights), new masks each micro-batch, and the model still learns. */
static void test_dropout(void)
{
    Graph *off = load(chars, 5), *on = load_as(chars, 5, true);
    TrainOptions o = char_model(1, NULL, false);
    o.accum = 2;
    TrainResult a, b;
    Err e = {0};
    bool ok = off && on && train_run(off, &o, &a, &e);
    o.steps = 60;
    ok = ok && train_run(on, &o, &b, &e);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "dropout: %s\n", e.msg);
    else
        printf("char-level GPT-2 with dropout 0.1, 2 micro-batches a step: loss %.3f (%.3f "
               "without dropout) -> %.3f in %lld steps\n", b.first_loss, a.first_loss,
               b.tail_loss, (long long)b.steps);
    CHECK(ok && a.first_loss != b.first_loss && b.tail_loss < b.first_loss - 1);
    graph_free(off);
    graph_free(on);
}

static bool same_file(const char *a, const char *b)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmp -s %.400s %.400s", a, b);
    return system(cmd) == 0;
}

/* 20 steps straight, against 10 then resumed to 20: the same checkpoint, byte for byte,
 * with dropout active (the resumed run draws the masks of the steps it resumes at). */
static void test_resume(const char *dir)
{
    Graph *g = load_as(chars, 5, true);
    char a[256], b[256], fa[300], fb[300];
    snprintf(a, sizeof a, "%s/a", dir), snprintf(b, sizeof b, "%s/b", dir);
    TrainOptions straight = char_model(20, a, false), first = char_model(10, b, false),
                 rest = char_model(20, b, true);
    TrainResult r;
    Err e = {0};
    bool ok = g && train_run(g, &straight, &r, &e) && train_run(g, &first, &r, &e) &&
              train_run(g, &rest, &r, &e);
    CHECK(ok && r.steps == 10);
    if (!ok)
        fprintf(stderr, "resume: %s\n", e.msg);
    snprintf(fa, sizeof fa, "%s/checkpoint.safetensors", a);
    snprintf(fb, sizeof fb, "%s/checkpoint.safetensors", b);
    CHECK(same_file(fa, fb));
    graph_free(g);
}

/* A process killed at a random moment while it checkpoints every step leaves a whole
 * checkpoint: it reads, and a run resumes from it. */
static void test_kill(const char *dir)
{
    char d[256], coil[4096];
    snprintf(d, sizeof d, "%s/k", dir);
    CHECK(coil_beside_test(coil, sizeof coil));
    fflush(stdout); /* or the child prints what is buffered again */
    pid_t pid = fork();
    if (pid == 0) { /* a fresh process (no threads inherited): the coil command itself, with
                       the seed the resume below gives (a resume from another seed is refused) */
        freopen("/dev/null", "w", stdout);
        execl(coil, "coil", "train", "examples/gpt2.coil", "--set", "layers=2", "--set",
              "heads=4", "--set", "hidden=64", "--set", "vocab=256", "--set", "context=64",
              "--dim", "B=8", "--dim", "T=64", "--loss", "cross_entropy", "--data", TEXT,
              "--steps", "100000", "--save", d, "--save-every", "1", "--threads", "1",
              "--seed", "5", (char *)NULL);
        _exit(127);
    }
    /* once the first checkpoint exists (however slow the machine), a little longer: the
     * run is then writing one every step, ~10 ms apart, so the kill lands mid-write often */
    char f[300];
    snprintf(f, sizeof f, "%s/checkpoint.safetensors", d);
    for (int waited = 0; access(f, F_OK) != 0 && waited < 600; waited++)
        usleep(100 * 1000);
    usleep(300 * 1000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    StFile st;
    Err e = {0};
    bool whole = safetensors_read(f, &st, &e);
    CHECK(whole);
    if (whole)
        safetensors_free(&st);
    else
        fprintf(stderr, "after kill: %s\n", e.msg);
    Graph *g = load(chars, 5);
    TrainOptions o = char_model(0, d, true);
    TrainResult r;
    CHECK(g && train_run(g, &o, &r, &e));
    graph_free(g);
}

/* coil plan's total before anything runs, against the resident memory a run adds once
 * compiled: within 10% (the bar), at a size where the state dwarfs the allocator's
 * own pages. */
static void test_plan_agrees(void)
{
    static const char *const mid[] = {"layers=4", "heads=4", "hidden=256", "vocab=4096",
                                      "context=256"};
    static const SymSize sizes[2] = {{"B", 4}, {"T", 256}};
    Graph *g = load(mid, 5);
    TrainOptions o = {.loss = "cross_entropy", .steps = 2, .accum = 1, .sizes = sizes,
                      .nsizes = 2, .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 2, NULL, 0},
                      .lr = {1e-3, 1e-4, 0, 0}, .compile = {.threads = 2}, .peak_gflops = 100,
                      .out = stdout};
    TrainPlan plan;
    TrainResult r;
    Err e = {0};
    bool ok = g && train_plan(g, &o, 1ll << 30, &plan, &e) && train_run(g, &o, &r, &e);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "plan: %s\n", e.msg);
        graph_free(g);
        return;
    }
    printf("coil plan: %.1f MiB (params %.1f, grads %.1f, optimizer %.1f, saved %.1f, "
           "workspace %.1f); measured %.1f MiB; B <= %lld in 1 GiB\n", plan.total / 1048576.0,
           plan.params / 1048576.0, plan.grads / 1048576.0, plan.optimizer / 1048576.0,
           plan.saved / 1048576.0, plan.workspace / 1048576.0, r.measured_bytes / 1048576.0,
           (long long)plan.max_batch);
    CHECK(plan.total == r.planned_bytes);
#ifndef __SANITIZE_ADDRESS__ /* ASan's allocator keeps freed memory and pads every block */
    CHECK(fabs((double)(r.measured_bytes - plan.total)) <= 0.1 * (double)plan.total);
#endif
    CHECK(plan.params > 0 && plan.grads == plan.params && plan.optimizer == 2 * plan.params);
    CHECK(plan.max_batch > 4 && plan.flops > 0 && plan.step_s > 0);
    graph_free(g);
}

/* --checkpoint auto recomputes instead of keeping, and computes the same: the tiny GPT-2's
 * loss and gradients, with dropout at rng step 7, equal without it (the interpreter: the
 * same ops on the same values, a recomputed mask the forward's, bit for bit), its
 * graph-level saved activations fall, and it trains. */
static void test_remat(void)
{
    static const SymSize sizes[2] = {{"B", 2}, {"T", 11}};
    Graph *model = load_as(tiny, 5, true);
    TrainOptions o = {.loss = "cross_entropy", .steps = 3, .accum = 1, .sizes = sizes,
                      .nsizes = 2, .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 2, NULL, 0},
                      .lr = {1e-3, 1e-4, 0, 0}, .compile = {.threads = 2}, .peak_gflops = 100,
                      .out = stdout};
    TrainPlan none, autop;
    TrainResult r;
    Err e = {0};
    bool ok = model && train_plan(model, &o, 0, &none, &e);
    o.checkpoint = REMAT_AUTO;
    ok = ok && train_plan(model, &o, 0, &autop, &e) && train_run(model, &o, &r, &e);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "remat: %s\n", e.msg);
    CHECK(ok && autop.saved < none.saved && autop.hflops >= autop.flops && r.steps == 3);
    TrainPlan fullp;
    o.checkpoint = REMAT_FULL; /* matmuls recomputed too: more FLOPs, the fewest bytes */
    ok = ok && train_plan(model, &o, 0, &fullp, &e) && train_run(model, &o, &r, &e);
    CHECK(ok && fullp.saved <= autop.saved && fullp.hflops > fullp.flops && r.steps == 3);
    Graph *j = model ? joint_of(model) : NULL;
    SymBind sb = {0};
    sb.val[0] = 2, sb.val[1] = 11, sb.known[0] = sb.known[1] = true;
    Graph *rj = j ? pass_remat(j, REMAT_AUTO, &sb, &e) : NULL;
    CHECK(rj != NULL && rj->noutput == j->noutput);
    int np = rj ? graph_params(rj, NULL) : 0;
    Tensor in[2] = {0}, *params = calloc((size_t)np + 1, sizeof *params);
    Tensor *a = calloc(64, sizeof *a), *b = calloc(64, sizeof *b);
    ok = rj && rj->noutput <= 64 && npy_read(DIR "ids.npy", &in[0], &e) &&
         npy_read(DIR "targets.npy", &in[1], &e) &&
         safetensors_bind(rj, DIR "weights.safetensors", params, &e) &&
         interp_run_at(j, 7, in, params, a, NULL, &e) && interp_run_at(rj, 7, in, params, b, NULL, &e);
    CHECK(ok);
    for (int i = 0; ok && i < rj->noutput; i++)
        CHECK(tensor_nbytes(&a[i]) == tensor_nbytes(&b[i]) &&
              memcmp(a[i].data, b[i].data, tensor_nbytes(&a[i])) == 0);
    for (int i = 0; rj && i < rj->noutput && i < 64; i++)
        tensor_free(&a[i]), tensor_free(&b[i]);
    for (int i = 0; i < np; i++)
        tensor_free(&params[i]);
    tensor_free(&in[0]), tensor_free(&in[1]);
    free(a), free(b), free(params);
    graph_free(rj), graph_free(j), graph_free(model);
}

/* A dataset of .npy arrays: 512 samples labelled by a fixed linear map's argmax, sampled
 * 32 rows a step by the loader thread; a small MLP must fit them. */
static void test_npy_dataset(const char *dir)
{
    enum { N = 512, F = 64, C = 10 };
    Tensor x = {0}, y = {0};
    Err e = {0};
    CHECK(tensor_alloc(&x, DT_F32, 2, (int64_t[]){N, F}, &e) && tensor_alloc(&y, DT_I64, 1, (int64_t[]){N}, &e));
    float w[F][C];
    for (int i = 0; i < F; i++)
        for (int j = 0; j < C; j++)
            w[i][j] = (float)(rand() % 2001 - 1000) / 1000;
    for (int n = 0; n < N; n++) {
        float *row = (float *)x.data + n * F, best = -1e30f;
        for (int i = 0; i < F; i++)
            row[i] = (float)(rand() % 2001 - 1000) / 500;
        for (int j = 0; j < C; j++) {
            float v = 0;
            for (int i = 0; i < F; i++)
                v += row[i] * w[i][j];
            if (v > best)
                best = v, ((int64_t *)y.data)[n] = j;
        }
    }
    char xp[300], yp[300];
    snprintf(xp, sizeof xp, "%s/x.npy", dir), snprintf(yp, sizeof yp, "%s/y.npy", dir);
    CHECK(npy_write(xp, &x, &e) && npy_write(yp, &y, &e));
    static const char *const set[] = {"layers=2", "hidden=64", "classes=10"};
    static const SymSize sizes[1] = {{"B", 32}};
    const char *names[2] = {"x", "targets"}, *files[2] = {xp, yp};
    ModelOptions opt = {.set = set, .nset = 3};
    Graph *g = model_load("examples/mlp.coil", &opt, &e);
    TrainOptions o = {.loss = "cross_entropy", .steps = 200, .accum = 1, .sizes = sizes,
                      .nsizes = 1, .array_names = names, .array_files = files, .narray = 2,
                      .opt = {OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 2, NULL, 0},
                      .lr = {3e-3, 3e-4, 0, 0}, .compile = {.threads = 2}, .out = stdout};
    TrainResult r;
    bool ok = g && train_run(g, &o, &r, &e);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "npy dataset: %s\n", e.msg);
    printf("MLP on a .npy dataset: loss %.3f -> %.3f (mean of the last %d steps)\n", r.first_loss,
           r.tail_loss, TRAIN_TAIL);
    CHECK(ok && r.first_loss > 1.5 && r.tail_loss < 0.3);
    /* an array whose rows do not fit the input is refused, naming it */
    const char *bad[2] = {yp, xp};
    o.array_files = bad;
    CHECK(g && !train_run(g, &o, &r, &e) && strstr(e.msg, "--input x="));
    tensor_free(&x), tensor_free(&y);
    graph_free(g);
}

/* The tiny GPT-2's loss and gradients with matmuls in bf16 and f16 (the interpreter,
 * PyTorch's weights) against f32: within the stated tolerances, relative to each
 * tensor's largest gradient. */
#define BF16_TOL 3e-2
#define F16_TOL 5e-3

static double precision_error(Graph *model, DType low, double *loss_err)
{
    Graph *t = training_loss_graph(model, "cross_entropy", &(Err){0});
    Err e = {0};
    Graph *lo = t ? pass_mixed_precision(t, low, &e) : NULL;
    Graph *j32 = t ? autodiff(t, NULL, &e) : NULL, *jlo = lo ? autodiff(lo, NULL, &e) : NULL;
    int np = j32 ? graph_params(j32, NULL) : 0;
    Tensor in[2] = {0}, *params = calloc((size_t)np + 1, sizeof *params);
    Tensor *a = calloc((size_t)np + 2, sizeof *a), *b = calloc((size_t)np + 2, sizeof *b);
    bool ok = jlo && npy_read(DIR "ids.npy", &in[0], &e) && npy_read(DIR "targets.npy", &in[1], &e) &&
              safetensors_bind(j32, DIR "weights.safetensors", params, &e) &&
              interp_run(j32, in, params, a, NULL, &e) && interp_run(jlo, in, params, b, NULL, &e);
    double worst = ok ? 0 : INFINITY;
    for (int i = 1; ok && i <= np; i++)
        worst = fmax(worst, rel_error(&b[i], &a[i]));
    *loss_err = ok ? fabs(check_at(&b[0], 0) - check_at(&a[0], 0)) / check_at(&a[0], 0) : INFINITY;
    if (!ok)
        fprintf(stderr, "precision %s: %s\n", dtype_info[low].name, e.msg);
    for (int i = 0; ok && i <= np; i++)
        tensor_free(&a[i]), tensor_free(&b[i]);
    for (int i = 0; i < np; i++)
        tensor_free(&params[i]);
    tensor_free(&in[0]), tensor_free(&in[1]);
    free(a), free(b), free(params);
    graph_free(t), graph_free(lo), graph_free(j32), graph_free(jlo);
    return worst;
}

static void test_mixed_precision(void)
{
    Graph *model = load(tiny, 5);
    double lb = INFINITY, lh = INFINITY, gb = model ? precision_error(model, DT_BF16, &lb) : INFINITY;
    double gh = model ? precision_error(model, DT_F16, &lh) : INFINITY;
    printf("mixed precision against f32: bf16 gradients %.2g, loss %.2g; f16 gradients %.2g, "
           "loss %.2g (relative)\n", gb, lb, gh, lh);
    CHECK(gb <= BF16_TOL && lb <= BF16_TOL / 10 && gh <= F16_TOL && lh <= F16_TOL / 10);
    CHECK(gb > 0 && gh > 0); /* the casts are really there */
    graph_free(model);
    /* f16 with a first loss scale of 2^40: the scaled gradients overflow, those steps are
     * skipped and the scale halves until they do not; training goes on */
    Graph *g = load(chars, 5);
    TrainOptions o = char_model(40, NULL, false);
    o.precision = DT_F16, o.loss_scale = 0x1p40;
    TrainResult r;
    Err e = {0};
    bool ok = g && train_run(g, &o, &r, &e);
    CHECK(ok && r.skipped > 0 && r.loss_scale < 0x1p40 && isfinite(r.last_loss) &&
          r.last_loss < r.first_loss);
    if (ok)
        printf("f16 from a loss scale of 2^40: %lld steps skipped, scale now 2^%.0f, loss %.3f -> %.3f\n",
               (long long)r.skipped, log2(r.loss_scale), r.first_loss, r.last_loss);
    graph_free(g);
}

int main(void)
{
    test_optimizers();
    if (!cpu_codegen_built()) {
        printf("test_train: compiled tests skipped (built without COIL_LLVM)\n");
        return check_status();
    }
    test_gradients_match_pytorch();
    test_learns();
    test_plan_agrees();
    test_remat();
    test_mixed_precision();
    test_dropout();
    char dir[] = "/tmp/coil-train-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_resume(dir);
    test_npy_dataset(dir);
    test_kill(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return check_status();
}
