/* test_api_train.c — training through the C API: a linear regression trained by SGD (with
 * momentum, weight decay, clipping, accumulation) and by AdamW matches those optimizers'
 * closed forms computed here; an MLP trained with cross_entropy matches `coil train`'s
 * loop (train_run, on the same batches: the only internal headers here are that oracle's);
 * checkpoints cross between the two both ways, and a resumed trainer's steps are bit-identical
 * to an uninterrupted one's; every error a caller can make. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coil/coil.h"
#include "ir/ir.h"
#include "runtime/init.h"
#include "train/train.h"

static int failures;

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#define CHECK_OK(ok, err)                                                                \
    do {                                                                                 \
        if (!(ok) || (err).code != COIL_OK) {                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #ok,           \
                    (err).message);                                                      \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#define CHECK_ERR(err, want_code, ...)                                                   \
    do {                                                                                 \
        const char *frags_[] = {__VA_ARGS__};                                            \
        if ((err).code != (want_code)) {                                                 \
            fprintf(stderr, "%s:%d: error code %d, want %d (%s)\n", __FILE__, __LINE__,  \
                    (err).code, want_code, (err).message);                               \
            failures++;                                                                  \
        }                                                                                \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                 \
            if (!strstr((err).message, frags_[k_])) {                                    \
                fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,  \
                        (err).message, frags_[k_]);                                      \
                failures++;                                                              \
            }                                                                            \
    } while (0)

/* |got - want| <= tol * max(1, |want|) */
#define CHECK_NEAR(got, want, tol)                                                       \
    do {                                                                                 \
        double g_ = (got), w_ = (want);                                                  \
        if (!(fabs(g_ - w_) <= (tol) * fmax(1, fabs(w_)))) {                             \
            fprintf(stderr, "%s:%d: %s = %.17g, want %.17g\n", __FILE__, __LINE__, #got, \
                    g_, w_);                                                             \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

static char tmpdir[] = "/tmp/coil_test_api_train_XXXXXX";

static const char *tmp_path(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

/* ---------------------------------------------------------------- linear regression */

#define ROWS 8
#define NX 3
#define NY 2

static const char linreg_text[] =
    "graph @linreg(%x: f32[B,3], %y: f32[B,2]) -> (loss: f32[], pred: f32[B,2]) {\n"
    "  %w = param {name=\"w\", init=\"normal(0.3)\"} : f32[3,2]\n"
    "  %b = param {name=\"b\", init=\"normal(0.3)\"} : f32[2]\n"
    "  %0 = matmul %x, %w : f32[B,2]\n"
    "  %1 = add %0, %b : f32[B,2]\n"
    "  %2 = sub %1, %y : f32[B,2]\n"
    "  %3 = mul %2, %2 : f32[B,2]\n"
    "  %4 = mean %3 : f32[]\n"
    "  return %4, %1\n"
    "}\n";

static coil_model *load_linreg(uint64_t seed)
{
    coil_error err;
    coil_model *m = coil_load_text("linreg.cir", linreg_text, strlen(linreg_text), NULL, &err);
    CHECK_OK(m != NULL, err);
    if (m)
        CHECK_OK(coil_init_params(m, seed, NULL, 0, &err), err);
    return m;
}

/* Step s's batch: rows of x and targets y = x W* + b* + a wobble. */
static void linreg_batch(int s, float *x, float *y)
{
    static const double wt[NX][NY] = {{1.5, -2}, {0.5, 1}, {-1, 0.25}}, bt[NY] = {0.3, -0.7};
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < NX; k++)
            x[r * NX + k] = (float)sin(0.9 * r + 1.7 * k + 0.37 * s);
        for (int c = 0; c < NY; c++) {
            double v = bt[c] + 0.05 * cos(r + 3.0 * c + s);
            for (int k = 0; k < NX; k++)
                v += x[r * NX + k] * wt[k][c];
            y[r * NY + c] = (float)v;
        }
    }
}

static coil_tensor f32_tensor(int rank, int64_t d0, int64_t d1, float *data)
{
    return (coil_tensor){COIL_F32, rank, {d0, d1}, data};
}

/* The model's parameters w (3x2) and b (2) through the trainer, as doubles. */
static bool read_params(coil_trainer *tr, coil_model *m, double *w, double *b)
{
    coil_error err;
    coil_tensor tw = {0}, tb = {0};
    bool ok = coil_trainer_param(tr, coil_find(m, COIL_PARAM, "w"), &tw, &err) &&
              coil_trainer_param(tr, coil_find(m, COIL_PARAM, "b"), &tb, &err);
    CHECK_OK(ok, err);
    for (int i = 0; ok && i < NX * NY; i++)
        w[i] = ((float *)tw.data)[i];
    for (int i = 0; ok && i < NY; i++)
        b[i] = ((float *)tb.data)[i];
    coil_tensor_free(&tw), coil_tensor_free(&tb);
    return ok;
}

/* The closed form: the loss at (w, b) on a batch and its gradients. */
static double linreg_grad(const double *w, const double *b, const float *x, const float *y,
                          double *gw, double *gb)
{
    double loss = 0;
    memset(gw, 0, sizeof(double) * NX * NY), memset(gb, 0, sizeof(double) * NY);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < NY; c++) {
            double v = b[c] - y[r * NY + c];
            for (int k = 0; k < NX; k++)
                v += x[r * NX + k] * w[k * NY + c];
            loss += v * v / (ROWS * NY);
            double d = 2 * v / (ROWS * NY);
            gb[c] += d;
            for (int k = 0; k < NX; k++)
                gw[k * NY + c] += x[r * NX + k] * d;
        }
    return loss;
}

/* One optimizer's closed-form state over the linear regression's 8 numbers (w then b). */
typedef struct Oracle {
    coil_train_options o;
    double p[NX * NY + NY], m[NX * NY + NY], v[NX * NY + NY];
    int t;
} Oracle;

/* One step of o.optimizer on gradient g: clipped by the global norm, weight decay on w
 * (rank 2) only, as coil's optimizers (runtime/cpu/cpu_optim.c) define them. */
static void oracle_step(Oracle *s, const double *g)
{
    const coil_train_options *o = &s->o;
    double norm = 0, scale = 1;
    for (int i = 0; i < NX * NY + NY; i++)
        norm += g[i] * g[i];
    norm = sqrt(norm);
    if (o->clip > 0 && norm > o->clip)
        scale = o->clip / norm;
    s->t++;
    for (int i = 0; i < NX * NY + NY; i++) {
        double gi = g[i] * scale, decay = i < NX * NY ? o->lr * o->weight_decay : 0;
        if (strcmp(o->optimizer, "sgd") == 0) {
            s->m[i] = o->momentum * s->m[i] + gi;
            s->p[i] -= decay * s->p[i] + o->lr * s->m[i];
        } else {
            s->m[i] = o->beta1 * s->m[i] + (1 - o->beta1) * gi;
            s->v[i] = o->beta2 * s->v[i] + (1 - o->beta2) * gi * gi;
            double mh = s->m[i] / (1 - pow(o->beta1, s->t)), vh = s->v[i] / (1 - pow(o->beta2, s->t));
            s->p[i] -= decay * s->p[i] + o->lr * mh / (sqrt(vh) + o->eps);
        }
    }
}

/* STEPS steps of the trainer against the oracle: each step's loss, and the parameters after
 * the last, to 1e-6. accum 2 gives each step's batch as two halves: the same mean loss and
 * gradient. */
#define STEPS 8
static void train_against_oracle(const coil_train_options *o)
{
    coil_error err;
    coil_model *m = load_linreg(3);
    coil_trainer *tr = m ? coil_trainer_new(m, o, &err) : NULL;
    CHECK_OK(tr != NULL, err);
    if (!tr) {
        coil_free(m);
        return;
    }
    Oracle s = {.o = *o};
    CHECK(read_params(tr, m, s.p, s.p + NX * NY));
    for (int step = 0; step < STEPS; step++) {
        float x[ROWS * NX], y[ROWS * NY];
        double g[NX * NY + NY], loss;
        linreg_batch(step, x, y);
        double want = linreg_grad(s.p, s.p + NX * NY, x, y, g, g + NX * NY);
        int half = ROWS / o->accum;
        coil_tensor in[4];
        for (int k = 0; k < o->accum; k++) {
            in[2 * k] = f32_tensor(2, half, NX, x + k * half * NX);
            in[2 * k + 1] = f32_tensor(2, half, NY, y + k * half * NY);
        }
        CHECK_OK(coil_train_step(tr, in, 2 * o->accum, NULL, &loss, &err), err);
        CHECK_NEAR(loss, want, 1e-6);
        oracle_step(&s, g);
    }
    double w[NX * NY], b[NY];
    CHECK(coil_trainer_steps(tr) == STEPS);
    if (read_params(tr, m, w, b)) {
        for (int i = 0; i < NX * NY; i++)
            CHECK_NEAR(w[i], s.p[i], 1e-6);
        for (int i = 0; i < NY; i++)
            CHECK_NEAR(b[i], s.p[NX * NY + i], 1e-6);
    }
    /* the model runs the trained parameters once synced */
    float x[ROWS * NX], y[ROWS * NY];
    double g[NX * NY + NY];
    linreg_batch(100, x, y);
    double want = linreg_grad(s.p, s.p + NX * NY, x, y, g, g + NX * NY);
    coil_tensor in[2] = {f32_tensor(2, ROWS, NX, x), f32_tensor(2, ROWS, NY, y)}, out[2] = {0};
    CHECK_OK(coil_trainer_sync(tr, &err), err);
    CHECK_OK(coil_run(m, in, 2, out, 2, &err), err);
    if (out[0].data)
        CHECK_NEAR(*(float *)out[0].data, want, 1e-6);
    coil_tensor_free(&out[0]), coil_tensor_free(&out[1]);
    coil_trainer_free(tr);
    coil_free(m);
}

static void test_closed_forms(void)
{
    coil_train_options sgd = coil_train_defaults("sgd");
    sgd.lr = 0.05, sgd.momentum = 0.5, sgd.weight_decay = 0.01, sgd.clip = 0.8;
    train_against_oracle(&sgd); /* the first steps' gradients are clipped, later ones not */
    sgd.accum = 2;
    train_against_oracle(&sgd);
    coil_train_options adamw = coil_train_defaults(NULL);
    adamw.lr = 0.02;
    train_against_oracle(&adamw);
}

/* Inputs by name, in any order, train the same as in signature order. */
static void test_named_inputs(void)
{
    coil_error err;
    coil_model *m = load_linreg(3);
    coil_train_options o = coil_train_defaults("sgd");
    coil_trainer *a = coil_trainer_new(m, &o, &err), *b = coil_trainer_new(m, &o, &err);
    CHECK_OK(a && b, err);
    const char *type;
    CHECK(coil_trainer_ninputs(a) == 2);
    CHECK(strcmp(coil_trainer_input(a, 1, &type), "y") == 0 && strcmp(type, "f32[B,2]") == 0);
    CHECK(coil_trainer_input(a, 2, &type) == NULL && type == NULL);
    float x[ROWS * NX], y[ROWS * NY];
    linreg_batch(0, x, y);
    coil_tensor xy[2] = {f32_tensor(2, ROWS, NX, x), f32_tensor(2, ROWS, NY, y)};
    coil_tensor yx[2] = {xy[1], xy[0]};
    double la = 0, lb = 1;
    CHECK_OK(coil_train_step(a, xy, 2, NULL, &la, &err), err);
    CHECK_OK(coil_train_step(b, yx, 2, (const char *[]){"y", "x"}, &lb, &err), err);
    CHECK(la == lb);
    coil_tensor pa = {0}, pb = {0};
    CHECK_OK(coil_trainer_param(a, 0, &pa, &err) && coil_trainer_param(b, 0, &pb, &err), err);
    CHECK(pa.data && pb.data && memcmp(pa.data, pb.data, sizeof(float) * NX * NY) == 0);
    coil_tensor_free(&pa), coil_tensor_free(&pb);
    coil_trainer_free(a), coil_trainer_free(b);
    coil_free(m);
}

/* ---------------------------------------------------------------- checkpoints */

/* n steps from `from` on, the losses into loss[] (may be NULL). */
static void linreg_steps(coil_trainer *tr, int from, int n, double *loss)
{
    coil_error err;
    for (int s = from; s < from + n; s++) {
        float x[ROWS * NX], y[ROWS * NY];
        linreg_batch(s, x, y);
        coil_tensor in[2] = {f32_tensor(2, ROWS, NX, x), f32_tensor(2, ROWS, NY, y)};
        double l = NAN;
        CHECK_OK(coil_train_step(tr, in, 2, NULL, &l, &err), err);
        if (loss)
            loss[s - from] = l;
    }
}

static bool same_params(coil_trainer *a, coil_trainer *b, int nparam)
{
    bool same = true;
    for (int i = 0; i < nparam; i++) {
        coil_error err;
        coil_tensor pa = {0}, pb = {0};
        CHECK_OK(coil_trainer_param(a, i, &pa, &err) && coil_trainer_param(b, i, &pb, &err), err);
        same = same && pa.data && pb.data && coil_tensor_numel(&pa) == coil_tensor_numel(&pb) &&
               memcmp(pa.data, pb.data, (size_t)coil_tensor_numel(&pa) * sizeof(float)) == 0;
        coil_tensor_free(&pa), coil_tensor_free(&pb);
    }
    return same;
}

/* 3 steps, saved; a new trainer (from other initial values) resumed: its next 5 steps'
 * losses and the parameters after them are those of 8 uninterrupted steps, bit for bit. */
static void test_resume_bit_identical(void)
{
    char dir[256];
    coil_error err;
    coil_model *m = load_linreg(3), *other = load_linreg(99);
    coil_train_options o = coil_train_defaults(NULL);
    o.lr = 0.02, o.warmup = 2, o.cosine_steps = 8, o.min_lr = 0.002, o.seed = 5;
    coil_trainer *whole = coil_trainer_new(m, &o, &err), *first = coil_trainer_new(m, &o, &err);
    coil_trainer *rest = coil_trainer_new(other, &o, &err);
    CHECK_OK(whole && first && rest, err);
    if (!whole || !first || !rest)
        goto done;
    double straight[8], resumed[5];
    linreg_steps(whole, 0, 8, straight);
    linreg_steps(first, 0, 3, NULL);
    CHECK_OK(coil_trainer_save(first, tmp_path("linreg", dir, sizeof dir), &err), err);
    CHECK(access(tmp_path("linreg/checkpoint.safetensors", dir, sizeof dir), F_OK) == 0);
    CHECK_OK(coil_trainer_resume(rest, tmp_path("linreg", dir, sizeof dir), &err), err);
    CHECK(coil_trainer_steps(rest) == 3);
    CHECK(!same_params(rest, whole, 2));
    linreg_steps(rest, 3, 5, resumed);
    CHECK(memcmp(resumed, straight + 3, sizeof resumed) == 0);
    CHECK(coil_trainer_steps(rest) == 8 && same_params(rest, whole, 2));
done:
    coil_trainer_free(whole), coil_trainer_free(first), coil_trainer_free(rest);
    coil_free(m), coil_free(other);
}

/* ---------------------------------------------------------------- against coil train */

#define CLF_B 4
#define CLF_SEED 11

static const char clf_text[] =
    "graph @clf(%x: f32[B,4]) -> (logits: f32[B,3]) {\n"
    "  %w1 = param {name=\"fc1.weight\", init=\"xavier\"} : f32[4,8]\n"
    "  %b1 = param {name=\"fc1.bias\", init=\"normal(0.1)\"} : f32[8]\n"
    "  %0 = matmul %x, %w1 : f32[B,8]\n"
    "  %1 = add %0, %b1 : f32[B,8]\n"
    "  %2 = gelu %1 : f32[B,8]\n"
    "  %w2 = param {name=\"fc2.weight\", init=\"xavier\"} : f32[8,3]\n"
    "  %3 = matmul %2, %w2 : f32[B,3]\n"
    "  return %3\n"
    "}\n";

static const SymSize clf_sizes[] = {{"B", CLF_B}};

/* coil train's options for the classifier: AdamW, warm-up then cosine, the seed. */
static TrainOptions clf_train_options(int64_t steps, const char *save, bool resume, FILE *out)
{
    TrainOptions o = {.loss = "cross_entropy", .steps = steps, .accum = 1, .sizes = clf_sizes,
                      .nsizes = 1, .seed = CLF_SEED, .log_every = 1, .json = true, .out = out,
                      .save = save, .resume = resume};
    o.opt = (OptConfig){OPT_ADAMW, 0.9, 0.95, 1e-8, 0, 0.1, 1.0, 0, NULL, 0};
    o.lr = (LrSchedule){0.01, 0.001, 2, 10};
    return o;
}

static coil_train_options clf_api_options(void)
{
    coil_train_options o = coil_train_defaults("adamw");
    o.lr = 0.01, o.min_lr = 0.001, o.warmup = 2, o.cosine_steps = 10, o.seed = CLF_SEED;
    o.loss = "cross_entropy";
    return o;
}

/* train_run's per-step losses from its JSON lines; the count read. */
static int run_coil_train(const Graph *g, int64_t steps, const char *save, bool resume,
                          double *loss)
{
    FILE *out = tmpfile();
    TrainOptions o = clf_train_options(steps, save, resume, out);
    TrainResult r;
    Err e = {0};
    int n = 0;
    bool ok = out && train_run(g, &o, &r, &e);
    if (!ok)
        fprintf(stderr, "train_run: %s\n", e.msg);
    CHECK(ok);
    char line[4096];
    if (out)
        rewind(out);
    while (out && fgets(line, sizeof line, out)) {
        const char *at = strstr(line, "\"loss\":");
        if (at && n < 16)
            loss[n++] = strtod(at + 7, NULL);
    }
    if (out)
        fclose(out);
    return n;
}

/* The batches coil train draws without data (its synthetic micro-batch `draw`), made from
 * the same joint graph at the same sizes. */
typedef struct Batches {
    Graph *joint;
    SymBind sb;
} Batches;

static bool batch_at(Batches *bs, int draw, Tensor *t)
{
    bool given[2] = {false, false};
    Err e = {0};
    bool ok = init_inputs_part(bs->joint, &bs->sb, CLF_SEED + 1 + (uint64_t)draw, given, 0, t, &e);
    if (!ok)
        fprintf(stderr, "init_inputs_part: %s\n", e.msg);
    return ok;
}

static coil_tensor as_coil(const Tensor *t)
{
    coil_tensor c = {(coil_dtype)t->dt, t->rank, {0}, t->data};
    memcpy(c.shape, t->shape, sizeof c.shape);
    return c;
}

/* Steps [from, from + n) of the trainer on coil train's batches; the losses into loss[]. */
static void clf_steps(coil_trainer *tr, Batches *bs, int from, int n, double *loss)
{
    for (int s = from; s < from + n; s++) {
        Tensor t[2] = {0};
        coil_error err;
        if (batch_at(bs, s, t)) {
            coil_tensor in[2] = {as_coil(&t[0]), as_coil(&t[1])};
            CHECK_OK(coil_train_step(tr, in, 2, NULL, &loss[s - from], &err), err);
        }
        tensor_free(&t[0]), tensor_free(&t[1]);
    }
}

static coil_trainer *clf_trainer(coil_model **m)
{
    coil_error err;
    coil_train_options o = clf_api_options();
    *m = coil_load_text("clf.cir", clf_text, strlen(clf_text), NULL, &err);
    CHECK_OK(*m != NULL, err);
    if (*m)
        CHECK_OK(coil_init_params(*m, CLF_SEED, NULL, 0, &err), err);
    coil_trainer *tr = *m ? coil_trainer_new(*m, &o, &err) : NULL;
    CHECK_OK(tr != NULL, err);
    return tr;
}

/* The API's trainer and train_run on the same batches give the same losses; a trainer
 * resumed from coil train's checkpoint goes on as the API's own run does; coil train
 * resumed from the API's checkpoint goes on as the API's run does. */
static void test_matches_coil_train(void)
{
    Err e = {0};
    Graph *g = ir_parse(clf_text, strlen(clf_text), "clf.cir", &e);
    TrainOptions to = clf_train_options(6, NULL, false, NULL);
    double flops;
    Batches bs = {0};
    bs.joint = g ? train_joint_graph(g, &to, &bs.sb, &flops, &e) : NULL;
    CHECK(bs.joint != NULL);
    char from_cli[256], from_api[256];
    tmp_path("cli", from_cli, sizeof from_cli), tmp_path("api", from_api, sizeof from_api);
    double cli[16], api[10], resumed[2], cli_rest[16];
    coil_model *m = NULL, *m2 = NULL;
    coil_trainer *tr = clf_trainer(&m), *tr2 = clf_trainer(&m2);
    if (!bs.joint || !tr || !tr2)
        goto done;
    CHECK(coil_trainer_ninputs(tr) == 2 && strcmp(coil_trainer_input(tr, 1, NULL), "targets") == 0);
    CHECK(run_coil_train(g, 6, from_cli, false, cli) == 6);
    clf_steps(tr, &bs, 0, 8, api);
    for (int s = 0; s < 6; s++)
        CHECK(api[s] == cli[s]); /* the same compiled graph, batches and optimizer */
    coil_error err;
    CHECK_OK(coil_trainer_resume(tr2, from_cli, &err), err);
    CHECK(coil_trainer_steps(tr2) == 6);
    clf_steps(tr2, &bs, 6, 2, resumed);
    CHECK(resumed[0] == api[6] && resumed[1] == api[7]);
    CHECK_OK(coil_trainer_save(tr, from_api, &err), err);
    clf_steps(tr, &bs, 8, 2, api + 8);
    CHECK(run_coil_train(g, 10, from_api, true, cli_rest) == 2);
    CHECK(cli_rest[0] == api[8] && cli_rest[1] == api[9]);
done:
    coil_trainer_free(tr), coil_trainer_free(tr2);
    coil_free(m), coil_free(m2);
    graph_free(bs.joint);
    graph_free(g);
}

/* ---------------------------------------------------------------- errors */

static void test_option_errors(void)
{
    coil_error err;
    coil_model *m = load_linreg(1);
    static const struct {
        const char *field;
        double value;
        const char *says;
    } bad[] = {
        {"optimizer", 0, "optimizer 'adam': expected adamw, sgd or lion"},
        {"lr", 0, "lr = 0 trains nothing"},
        {"lr", NAN, "lr = nan"},
        {"weight_decay", -1, "weight_decay = -1"},
        {"beta1", 1, "beta1 = 1"},
        {"clip", INFINITY, "clip = inf"},
        {"accum", 0, "accum is 0: expected 1 or more"},
        {"warmup", -3, "warmup is -3"},
        {"loss", 0, "loss 'mse'"},
        {"precision", 0, "precision 'f8'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        coil_train_options o = coil_train_defaults("sgd");
        const char *f = bad[i].field;
        o.optimizer = strcmp(f, "optimizer") == 0 ? "adam" : o.optimizer;
        o.lr = strcmp(f, "lr") == 0 ? bad[i].value : o.lr;
        o.weight_decay = strcmp(f, "weight_decay") == 0 ? bad[i].value : o.weight_decay;
        o.beta1 = strcmp(f, "beta1") == 0 ? bad[i].value : o.beta1;
        o.clip = strcmp(f, "clip") == 0 ? bad[i].value : o.clip;
        o.accum = strcmp(f, "accum") == 0 ? 0 : o.accum;
        o.warmup = strcmp(f, "warmup") == 0 ? -3 : o.warmup;
        o.loss = strcmp(f, "loss") == 0 ? "mse" : NULL;
        o.precision = strcmp(f, "precision") == 0 ? "f8" : NULL;
        CHECK(coil_trainer_new(m, &o, &err) == NULL);
        CHECK_ERR(err, COIL_ERR_USAGE, "coil_train_options: ", bad[i].says);
    }
    coil_train_options zeroed = {0};
    zeroed.optimizer = "sgd";
    CHECK(coil_trainer_new(m, &zeroed, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "start from coil_train_defaults()");
    CHECK(coil_trainer_new(NULL, NULL, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_trainer_new: the model is NULL");
    coil_free(m);

    /* a model without a loss; one without parameter values; logits that are no logits */
    const char *text = "graph @f(%x: f32[B,3]) -> (y: f32[B,3]) {\n"
                       "  %w = param {name=\"w\"} : f32[3]\n"
                       "  %0 = mul %x, %w : f32[B,3]\n  return %0\n}\n";
    m = coil_load_text("f.cir", text, strlen(text), NULL, &err);
    CHECK(coil_trainer_new(m, NULL, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "model @f has no output named \"loss\" (its outputs: y)",
              "cross_entropy");
    coil_train_options ce = coil_train_defaults(NULL);
    ce.loss = "cross_entropy";
    CHECK(coil_trainer_new(m, &ce, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_USAGE, "parameter 'w' has no value");
    CHECK_OK(coil_init_params(m, 1, NULL, 0, &err), err);
    coil_trainer *tr = coil_trainer_new(m, &ce, &err); /* [B,3] logits: 3 classes, fine */
    CHECK_OK(tr != NULL, err);
    coil_trainer_free(tr);
    coil_free(m);
    text = "graph @s(%x: f32[3]) -> (y: f32[]) {\n  %w = param {name=\"w\"} : f32[3]\n"
           "  %0 = mul %x, %w : f32[3]\n  %1 = sum %0 : f32[]\n  return %1\n}\n";
    m = coil_load_text("s.cir", text, strlen(text), NULL, &err);
    CHECK_OK(m && coil_init_params(m, 1, NULL, 0, &err), err);
    CHECK(coil_trainer_new(m, &ce, &err) == NULL);
    CHECK_ERR(err, COIL_ERR_INPUT, "first output of @s is f32[]", "class dimension");
    coil_free(m);
}

static void test_step_errors(void)
{
    coil_error err;
    coil_model *m = load_linreg(1);
    coil_train_options o = coil_train_defaults("sgd");
    coil_trainer *tr = coil_trainer_new(m, &o, &err);
    CHECK_OK(tr != NULL, err);
    float x[ROWS * NX], y[ROWS * NY];
    int32_t xi[ROWS * NX] = {0};
    linreg_batch(0, x, y);
    coil_tensor in[2] = {f32_tensor(2, ROWS, NX, x), f32_tensor(2, ROWS, NY, y)};
    double loss = 42;
    CHECK(!coil_train_step(tr, in, 1, NULL, &loss, &err) && loss == 42);
    CHECK_ERR(err, COIL_ERR_USAGE, "a micro-batch is 2 tensors (x: f32[B,3], y: f32[B,2])",
              "give 2 tensors, given 1");
    CHECK(!coil_train_step(tr, NULL, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "in a NULL array");
    coil_tensor wrong[2] = {{COIL_I32, 2, {ROWS, NX}, xi}, in[1]};
    CHECK(!coil_train_step(tr, wrong, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'x': expected f32[B,3], got i32[8,3]");
    wrong[0] = in[0], wrong[1] = f32_tensor(2, ROWS, 1, y);
    CHECK(!coil_train_step(tr, wrong, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'y': expected f32[B,2], got f32[8,1]");
    wrong[1] = f32_tensor(2, ROWS - 2, NY, y); /* B = 8 from x, 6 from y */
    CHECK(!coil_train_step(tr, wrong, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'y'");
    wrong[1] = f32_tensor(2, ROWS, NY, NULL);
    CHECK(!coil_train_step(tr, wrong, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'y': data is NULL");
    CHECK(!coil_train_step(tr, in, 2, (const char *[]){"x", "z"}, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "names[1] is 'z', which is no input of the trainer");
    CHECK(!coil_train_step(tr, in, 2, (const char *[]){"x", "x"}, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "names[0] and names[1] are both 'x'");
    CHECK(!coil_train_step(tr, in, 2, (const char *[]){"x", NULL}, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "names[1] is '(null)'");
    CHECK(coil_trainer_steps(tr) == 0); /* no failed call took a step */
    CHECK_OK(coil_train_step(tr, in, 2, NULL, NULL, &err), err);
    CHECK(coil_trainer_steps(tr) == 1);

    coil_tensor out = {0};
    CHECK(!coil_trainer_param(tr, 2, &out, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "the index is out of range");
    CHECK(!coil_trainer_param(tr, 0, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "out is NULL");

    /* NULL trainers */
    CHECK(!coil_train_step(NULL, in, 2, NULL, &loss, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "coil_train_step: the trainer is NULL");
    CHECK(!coil_trainer_sync(NULL, &err) && err.code == COIL_ERR_USAGE);
    CHECK(!coil_trainer_save(NULL, "d", &err) && err.code == COIL_ERR_USAGE);
    CHECK(!coil_trainer_resume(tr, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "the directory is NULL");
    CHECK(!coil_trainer_param(NULL, 0, &out, &err) && err.code == COIL_ERR_USAGE);
    CHECK(coil_trainer_steps(NULL) == 0 && coil_trainer_ninputs(NULL) == 0);
    CHECK(coil_trainer_input(NULL, 0, NULL) == NULL);
    coil_trainer_free(NULL);
    coil_trainer_free(tr);
    coil_free(m);
}

/* A missing checkpoint, another optimizer's and a file in the way leave the trainer as it
 * was; another model's, read halfway, leaves it refusing. */
static void test_checkpoint_errors(void)
{
    char dir[256], other[256];
    coil_error err;
    coil_model *m = load_linreg(1);
    coil_train_options adamw = coil_train_defaults(NULL), sgd = coil_train_defaults("sgd");
    coil_trainer *tr = coil_trainer_new(m, &adamw, &err), *s = coil_trainer_new(m, &sgd, &err);
    CHECK_OK(tr && s, err);
    if (!tr || !s)
        goto done;
    CHECK(!coil_trainer_resume(tr, tmp_path("none", dir, sizeof dir), &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "no checkpoint to resume from");
    linreg_steps(s, 0, 1, NULL);
    CHECK_OK(coil_trainer_save(s, tmp_path("sgd", dir, sizeof dir), &err), err);
    CHECK(!coil_trainer_resume(tr, dir, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "--optimizer sgd, this one has adamw");
    CHECK(!coil_trainer_save(tr, "/dev/null/ckpt", &err));
    CHECK(err.code != COIL_OK && strstr(err.message, "/dev/null/ckpt"));
    linreg_steps(tr, 0, 1, NULL); /* still usable */
    CHECK(coil_trainer_steps(tr) == 1);

    /* another model with a parameter "w" of another shape, the same optimizer */
    const char *text = "graph @o(%x: f32[B,4]) -> (loss: f32[]) {\n"
                       "  %w = param {name=\"w\", init=\"ones\"} : f32[4,2]\n"
                       "  %b = param {name=\"b\"} : f32[2]\n"
                       "  %0 = matmul %x, %w : f32[B,2]\n  %1 = add %0, %b : f32[B,2]\n"
                       "  %2 = mean %1 : f32[]\n  return %2\n}\n";
    coil_model *om = coil_load_text("o.cir", text, strlen(text), NULL, &err);
    CHECK_OK(om && coil_init_params(om, 1, NULL, 0, &err), err);
    coil_trainer *ot = om ? coil_trainer_new(om, &adamw, &err) : NULL;
    CHECK_OK(ot && coil_trainer_save(ot, tmp_path("other", other, sizeof other), &err), err);
    CHECK(!coil_trainer_resume(tr, other, &err));
    CHECK_ERR(err, COIL_ERR_INPUT, "tensor 'w' is f32[4,2], the run's is f32[3,2]");
    float x[ROWS * NX], y[ROWS * NY];
    linreg_batch(0, x, y);
    coil_tensor in[2] = {f32_tensor(2, ROWS, NX, x), f32_tensor(2, ROWS, NY, y)};
    CHECK(!coil_train_step(tr, in, 2, NULL, NULL, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "a resume failed while restoring it; make a new one");
    coil_trainer_free(ot);
    coil_free(om);
done:
    coil_trainer_free(tr), coil_trainer_free(s);
    coil_free(m);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_closed_forms();
    test_named_inputs();
    test_resume_bit_identical();
    test_matches_coil_train();
    test_option_errors();
    test_step_errors();
    test_checkpoint_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
