/* coil.c — the `coil` command: a table of subcommands, each parsing its own flags, and
 * the ones that only read a model (opt, dump, check). run, bench and compile have files
 * of their own. Exit status: 0 success, 1 bad input (any error loading or running),
 * 2 bad usage. */
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/version.h"
#include "codegen/fusion_dot.h"
#include "ir/dot.h"
#include "ir/summary.h"
#include "passes/fuse.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "tools/cli.h"

/* ---------------------------------------------------------------- coil opt */

static int print_graph(const Graph *g) { return print_text(ir_print(g), "graph"); }

static int cmd_opt(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"--passes", .value = &a->passes}};
    int rc = parse_args(cmd, flags, 1, argc, argv, a);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    Graph *g = load_model(a, 0, &e);
    if (g && run_passes(&g, a->passes ? a->passes : "verify", &e))
        rc = print_graph(g);
    else
        rc = cli_fail(&e);
    graph_free(g);
    return rc;
}

/* ---------------------------------------------------------------- coil dump */

/* The stages after the passes that --after also names: the fusion plan, the loop IR. */
static const char *const codegen_stage[] = {"fuse", "lower"};

static bool is_codegen_stage(const char *s)
{
    return s && (strcmp(s, codegen_stage[0]) == 0 || strcmp(s, codegen_stage[1]) == 0);
}

/* What `coil dump` prints and when: after one pass, after every pass, or at the end;
 * to stdout, or with --all --out DIR one file per stage. */
typedef struct DumpPlan {
    bool dot, all, flat;
    const char *after; /* a pass name, or NULL */
    const char *dir;   /* --out: the stages' directory, or NULL */
    int nfile;         /* files written to dir, which numbers the next */
    bool printed;
    int rc;
} DumpPlan;

/* A graph as text: IR, every node (--all-nodes), or the picture with blocks. */
static char *graph_text(const Graph *g, const DumpPlan *p)
{
    return !p->dot ? ir_print(g) : p->flat ? ir_dot(g) : ir_dot_blocks(g);
}

/* Stage `name` as DIR/NN-name.{cir,dot}, written whole or not at all. Takes text. */
static int write_stage(DumpPlan *p, const char *name, char *text)
{
    char path[FILEIO_PATH];
    Err e = {0};
    snprintf(path, sizeof path, "%s/%02d-%s.%s", p->dir, p->nfile++, name, p->dot ? "dot" : "cir");
    if (!text)
        return print_text(NULL, name);
    bool ok = file_write_atomic(path, text, strlen(text), &e);
    free(text);
    if (ok)
        printf("wrote %s\n", path);
    return ok ? EXIT_OK : cli_fail(&e);
}

static int print_as(const Graph *g, const DumpPlan *p)
{
    return print_text(graph_text(g, p), "graph");
}

/* `--all` marks each graph with the pass that made it; `--after` stops at its pass. */
static bool dump_after_pass(const Graph *g, const Pass *pass, void *ctx)
{
    DumpPlan *p = ctx;
    if (p->after && strcmp(pass->name, p->after) != 0)
        return true;
    if (p->dir) {
        char name[64];
        snprintf(name, sizeof name, "after-%s", pass->name);
        p->rc = write_stage(p, name, graph_text(g, p));
    } else {
        if (p->all)
            printf("// after %s\n", pass->name); /* a comment in IR text */
        p->rc = print_as(g, p);
    }
    p->printed = true;
    return p->all && p->rc == EXIT_OK;
}

/* Whether the comma-separated list names pass. */
static bool list_has(const char *list, const char *pass)
{
    size_t n = strlen(pass);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, pass, n) == 0 && (p[n] == ',' || p[n] == '=' || p[n] == 0))
            return true;
    return false;
}

static int check_dump_args(const Command *cmd, const Args *a, const char *list, DumpPlan *p)
{
    SymSize none[1];
    int rc = check_model_args(cmd, a, none);
    p->dot = a->format && strcmp(a->format, "dot") == 0;
    bool stage = is_codegen_stage(a->after);
    if (rc == EXIT_OK && a->format && !p->dot && strcmp(a->format, "text") != 0)
        rc = usage_error(cmd, "--format %s: expected text or dot", a->format);
    if (rc == EXIT_OK && a->after && a->all)
        rc = usage_error(cmd, "--after and --all: give one of them");
    if (rc == EXIT_OK && a->after && strcmp(a->after, "lower") == 0 && p->dot)
        rc = usage_error(cmd, "--after lower prints text only (the fusion plan has a picture: "
                         "--after=fuse --format=dot)");
    if (rc == EXIT_OK && a->after && !stage && !pass_find(a->after, strlen(a->after)))
        rc = usage_error(cmd, "--after %s: no such pass or stage (the stages after the passes: "
                         "fuse, lower)", a->after);
    if (rc == EXIT_OK && a->after && !stage && !list_has(list, a->after))
        rc = usage_error(cmd, "--after %s: the pass is not in the pipeline '%s'", a->after, list);
    if (rc == EXIT_OK && a->all && p->dot && !a->out)
        rc = usage_error(cmd, "--all --format=dot: give --out DIR for one file per stage (one "
                         "stream of several digraphs is not a picture)");
    if (rc == EXIT_OK && a->out && !a->all)
        rc = usage_error(cmd, "--out DIR applies to --all (one file per stage)");
    if (rc == EXIT_OK && p->flat && !p->dot)
        rc = usage_error(cmd, "--all-nodes applies to --format=dot");
    return rc;
}

/* --after=fuse: the graph the plan is made for, then the plan lowering used (after any
 * node it split off) as comments, so the output still reads back as IR; with dot its
 * picture (a box per kernel); --after=lower: the loop IR. With a directory (--all --out)
 * the plan is the last stage's file. */
static int dump_stage(DumpPlan *dp, const Args *a, const Graph *g, Err *e)
{
    Fusion f = {0};
    bool fuse = !a->after || strcmp(a->after, "fuse") == 0;
    LowerOptions lo = {.no_fusion = a->no_fusion, .plan = fuse ? &f : NULL};
    Program *p = fuse_and_lower(g, &lo, e);
    int rc;
    if (!p)
        rc = cli_fail(e);
    else if (!fuse)
        rc = print_text(loop_print(p), "loop IR");
    else if (dp->dot)
        rc = dp->dir ? write_stage(dp, "fusion-plan", fuse_dot(g, &f, p))
                     : print_text(fuse_dot(g, &f, p), "fusion plan");
    else if (dp->dir) {
        char *ir = ir_print(g), *plan = fuse_print(g, &f), *both = NULL;
        if (ir && plan && asprintf(&both, "%s%s", ir, plan) < 0)
            both = NULL;
        free(ir), free(plan);
        rc = write_stage(dp, "fusion-plan", both);
    } else {
        rc = print_graph(g);
        if (rc == EXIT_OK)
            rc = print_text(fuse_print(g, &f), "fusion plan");
    }
    fuse_free(&f);
    program_free(p);
    return rc;
}

static int cmd_dump(const Command *cmd, Args *a, int argc, char **argv)
{
    DumpPlan plan = {0};
    const Flag flags[] = {{"--set", .list = &a->set},        {"--passes", .value = &a->passes},
                          {"--const", .list = &a->consts},
                          {"--format", .value = &a->format}, {"--after", .value = &a->after},
                          {"--all", .on = &a->all},          {"--train", .on = &a->train},
                          {"--no-fusion", .on = &a->no_fusion},
                          {"--dtype", .value = &a->dtype},   {"--out", .value = &a->out},
                          {"--all-nodes", .on = &plan.flat}};
    int rc = parse_args(cmd, flags, sizeof flags / sizeof *flags, argc, argv, a);
    bool stage = is_codegen_stage(a->after);
    const char *list = a->passes ? a->passes : a->after || a->all ? pass_pipeline : "";
    if (rc == EXIT_OK && !a->help)
        rc = check_dump_args(cmd, a, list, &plan);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    plan.all = a->all;
    plan.after = stage ? NULL : a->after;
    plan.dir = a->out;
    Err e = {0};
    Graph *g = load_model(a, 0, &e);
    bool hooked = a->all || plan.after;
    if (g && plan.dir && !make_dir(plan.dir, "--out", &e))
        rc = cli_fail(&e);
    else if (g && plan.dir && (rc = write_stage(&plan, "input", graph_text(g, &plan))) != EXIT_OK)
        ;
    else if (!g || !run_passes_with(&g, list, hooked ? dump_after_pass : NULL, &plan, &e))
        rc = cli_fail(&e);
    else if (plan.printed && plan.rc != EXIT_OK)
        rc = plan.rc;
    else if (stage || plan.dir)
        rc = dump_stage(&plan, a, g, &e);
    else
        rc = plan.printed ? plan.rc : print_as(g, &plan);
    graph_free(g);
    return rc;
}

/* ---------------------------------------------------------------- coil check */

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static void print_memory(const MemoryPlan *mp)
{
    printf("memory: %.2f MiB planned = parameters %.2f + activations %.2f (one arena, reused) + "
           "inputs and outputs %.2f\n", mib(mp->param_bytes + mp->arena_bytes + mp->io_bytes),
           mib(mp->param_bytes), mib(mp->arena_bytes), mib(mp->io_bytes));
}

static void json_memory(JsonWriter *w, const MemoryPlan *mp)
{
    json_key(w, "memory");
    json_begin_object(w);
    json_field_int(w, "planned_bytes", mp->param_bytes + mp->arena_bytes + mp->io_bytes);
    json_field_int(w, "parameter_bytes", mp->param_bytes);
    json_field_int(w, "activation_bytes", mp->arena_bytes);
    json_field_int(w, "io_bytes", mp->io_bytes);
    json_end_object(w);
}

/* --json: what the text says, as one object (ir/summary.h names its members). */
static bool print_check_json(const Graph *g, const Args *a, const SymBind *sb,
                             const MemoryPlan *mp)
{
    JsonWriter w;
    json_writer_init(&w, stdout);
    json_begin_object(&w);
    model_summary_json(&w, g, sb);
    json_memory(&w, mp);
    if (a->params)
        model_param_list_json(&w, g);
    json_end_object(&w);
    return json_writer_done(&w);
}

/* The memory plan's figures, known before anything runs. */
static bool plan_check(const Graph *g, const Args *a, const SymBind *sb, MemoryPlan *mp, Err *e)
{
    CompileOptions o = compile_options(a, 0);
    return compile_plan(g, &o, sb, mp, e);
}

static int check_text(const Graph *g, const Args *a, const SymBind *sb, Err *e)
{
    MemoryPlan mp = {0};
    int rc = print_text(model_summary(g, sb, e), "summary");
    if (rc == EXIT_OK && !plan_check(g, a, sb, &mp, e))
        return cli_fail(e);
    if (rc == EXIT_OK)
        print_memory(&mp);
    plan_free(&mp);
    if (rc == EXIT_OK && a->params)
        rc = print_text(model_param_list(g, e), "parameter list");
    return rc;
}

static int check_json(const Graph *g, const Args *a, const SymBind *sb, Err *e)
{
    MemoryPlan mp = {0};
    bool ok = plan_check(g, a, sb, &mp, e);
    if (ok && !print_check_json(g, a, sb, &mp))
        ok = false, err_set(e, ERR_INPUT, "cannot write the JSON report to stdout");
    plan_free(&mp);
    return ok ? EXIT_OK : cli_fail(e);
}

static int cmd_check(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"--set", .list = &a->set},
                          {"--const", .list = &a->consts},
                          {"--dim", .list = &a->dim},
                          {"--params", .on = &a->params},
                          {"--no-fusion", .on = &a->no_fusion},
                          {"--dtype", .value = &a->dtype},
                          {"--json", .on = &a->json}};
    SymSize sizes[argc + 1];
    int rc = parse_args(cmd, flags, sizeof flags / sizeof *flags, argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    SymBind sb;
    Graph *g = load_model(a, 0, &e);
    bool ok = g && init_symbols(g, NULL, NULL, sizes, a->dim.n, DEFAULT_DIM, &sb, &e);
    rc = !ok ? cli_fail(&e) : a->json ? check_json(g, a, &sb, &e) : check_text(g, a, &sb, &e);
    graph_free(g);
    return rc;
}

/* ---------------------------------------------------------------- the table */

static const Command commands[] = {
    {"run", cmd_run, "compile a model for the CPU or a GPU, run it, print its outputs' checksums",
     "usage: coil run MODEL [options]\n"
     "\n"
     "MODEL is a .cir (IR text) or .coil file, or a package directory that `coil compile`\n"
     "wrote. Inputs not given are random (floats normal(0,1), integers in the range their\n"
     "uses index), parameters come from their initializers; both are drawn from the seed,\n"
     "so a run is reproducible. The model is compiled (fused, lowered, LLVM) and run on\n"
     "the CPU, or with --device cuda compiled by NVRTC and run on the first NVIDIA GPU;\n"
     "--interp evaluates it with the reference interpreter instead.\n"
     "\n"
     "options:\n"
     "  --input NAME=FILE.npy  the value of graph input NAME (repeatable)\n"
     "  --weights FILE         parameters from a .safetensors file, by name\n"
     DTYPE_HELP
     "                         (f32 --input and --weights files are rounded to it)\n"
     "  --out DIR              write each output to DIR/<output name>.npy\n"
     "  --json                 one JSON object instead of text: the model, the device, each\n"
     "                         output's name, dtype, shape, sum, mean, min, max, count of\n"
     "                         non-finite values (null, with \"<key>_nonfinite\") and --out\n"
     "                         file, the time and the compile stages\n"
     "  --seed N               seed of random inputs and initializers (default 0)\n"
     "  --dim NAME=N           size of symbolic dimension NAME for random inputs\n"
     "                         (default: from the given inputs, else 2)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     "  --train                training mode: dropout is active, its masks drawn from\n"
     "                         the seed, and batch norm uses the batch's statistics, its\n"
     "                         running ones' new values outputs update.NAME (default:\n"
     "                         inference: dropout is the identity, batch norm the running\n"
     "                         statistics)\n"
     "  --rng-step N           the rng step random ops draw at (default 0): dropout's masks\n"
     "                         as coil train's micro-batch N draws them (step x accum + m)\n"
     "  --threads N            threads for kernels and GEMMs (default: one per CPU; at\n"
     "                         most 4 per CPU: more would only wait for one)\n"
     "  --no-fusion            one kernel per op, no GEMM epilogues (for comparison)\n"
     "  --blas                 GEMMs on OpenBLAS (coil's portable GEMM in a build without\n"
     "                         it) instead of coil's generated kernels\n"
     "  --interp               evaluate with the reference interpreter (f64, one thread)\n"
     "  --device cpu|cuda      where to run (default cpu); a package runs where it was\n"
     "                         compiled for\n"
     "  --cuda-graphs          cuda: replay the run as a CUDA graph once captured\n"
     "  --allow-tf32           cuda: f32 GEMMs in TF32 (about 1e-3 relative error)\n"
     MODE_HELP
     "\n"
     "Prints one line per output (name, type, sum, mean |x|), then the time and FLOPs.\n"
     "Errors go to stderr, with or without --json, and the exit status is not 0.\n"
     "A package is checked against its manifest (every file's SHA-256) before it loads.\n"},
    {"bench", cmd_bench, "time a compiled model: latency, throughput, GFLOP/s, peak fraction",
     "usage: coil bench MODEL [options]\n"
     "\n"
     "Compiles MODEL (a .cir/.coil file or a package) for the CPU, or with --device cuda\n"
     "for the first NVIDIA GPU (its times include copying inputs in and outputs out), then\n"
     "runs it on random inputs: --warmup untimed runs, then --runs timed ones. Reports the\n"
     "compile time, the median, min and max latency, samples/s (the batch, the first\n"
     "input's first dim, per second), GFLOP/s from the model's FLOP count, the fraction of\n"
     "the machine's FMA peak (the CPU's measured at start-up on the same threads; a GPU's\n"
     "given with --peak), and memory: the planned bytes and the process's peak resident set.\n"
     "\n"
     "options:\n"
     "  --batch N              the batch size: the size of symbol B (default 2)\n"
     "  --dim NAME=N           size of another symbolic dimension (repeatable)\n"
     "  --threads N            threads (default: one per CPU; at most 4 per CPU)\n"
     "  --runs N               timed runs (default 20)\n"
     "  --warmup N             untimed runs first (default 3)\n"
     "  --peak GFLOPS          the machine's peak, instead of measuring it\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     DTYPE_HELP
     "  --no-fusion            one kernel per op, no GEMM epilogues\n"
     "  --blas                 GEMMs on OpenBLAS (coil's portable GEMM in a build without\n"
     "                         it) instead of coil's generated kernels\n"
     "  --json                 one JSON object instead of text (bench/run.sh reads it),\n"
     "                         the model's dtype among its fields\n"
     "  --profile              also time every step and list the slowest, each named by\n"
     "                         the layer it computes (transformer.h.3.mlp.c_fc: gemm+gelu_tanh);\n"
     "                         with --json, the table as \"profile\"\n"
     "  --trace FILE.json      every run, warm-ups included, as a Chrome/Perfetto trace\n"
     "                         (ui.perfetto.dev): each step by layer with its source lines,\n"
     "                         FLOPs and bytes; on the CPU each thread's chunks too\n"
     "  --device cpu|cuda      where to run (default cpu)\n"
     "  --cuda-graphs          cuda: replay each run as a CUDA graph once captured\n"
     "  --allow-tf32           cuda: f32 GEMMs in TF32\n"
     MODE_HELP
     "\n"
     "With --mode max-autotune the first run tunes (its time is reported apart), then the\n"
     "timed runs use the tuned kernels, and the same runs with the heuristics' kernels are\n"
     "timed too: the line 'max-autotune' gives the whole model's speed-up over default.\n"},
    {"autotune", cmd_autotune, "measure every kernel's candidates and keep the fastest",
     "usage: coil autotune MODEL [options]\n"
     "\n"
     "Compiles MODEL in max-autotune mode and runs it once at the given sizes: each distinct\n"
     "kernel (identical layers count once) is timed alone on real-shaped buffers with every\n"
     "candidate the search reaches (GEMMs: coil's kernels at several blockings, fused or\n"
     "separate epilogue, and OpenBLAS; other kernels: how many chunks their loop is split\n"
     "into), by coordinate descent from the default; a candidate whose results differ from\n"
     "the default's is rejected. Choices go to the cache, so the next compile of the same\n"
     "model at the same sizes on this machine measures nothing. A progress bar shows on a\n"
     "terminal; a table of kernels, shapes, candidates, times and choices at the end.\n"
     "\n"
     "options:\n"
     "  --batch N              the batch size: the size of symbol B (default 2)\n"
     "  --dim NAME=N           size of another symbolic dimension (repeatable)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     "  --threads N            threads (default: one per CPU); choices are per thread count\n"
     "  --report FILE.json     every candidate's configuration and time, as JSON\n"
     "  --cache FILE           the cache (default $COIL_CACHE_DIR/autotune.json, else\n"
     "                         ~/.cache/coil/autotune.json)\n"
     "  --seed N               seed of the random inputs and parameters\n"
     "  --no-fusion            tune the unfused program\n"
     "  --device cpu|cuda      where to tune (cuda: cuBLASLt algorithms, launch shapes)\n"},
    {"train", cmd_train, "train a model: autodiff, a fused optimizer, checkpoints",
     "usage: coil train MODEL [options]\n"
     "\n"
     "Differentiates the model's loss (its output 'loss', or with --loss cross_entropy the\n"
     "cross-entropy of its first output against an added input 'targets'), compiles the\n"
     "joint forward and backward graph like any model, and trains: each step runs --accum\n"
     "micro-batches, sums their gradients, clips the global norm and updates every\n"
     "parameter in one fused pass. Batches come from a token file (--data: --token-bytes\n"
     "1, 2 or 4 per token, nanoGPT's .bin files are 2; any text file is a character-level\n"
     "corpus at 1) sampled by a loader thread, or are random (--synthetic, the default\n"
     "without --data). Dropout is active: micro-batch n (step x --accum + m) draws its masks\n"
     "from --seed and n, new each micro-batch, the same in its backward, the same again\n"
     "when resumed (--set dropout_p=0 turns a model's dropout off where its config has\n"
     "it). A line per --log-every steps: step, loss, learning rate, gradient norm,\n"
     "tokens/s, GFLOP/s, MFU and HFU (the joint graph's FLOPs against the CPU's measured\n"
     "FMA peak; equal until recomputation exists), planned memory.\n"
     "\n"
     "options:\n"
     "  --loss cross_entropy   train the first output against targets\n"
     "  --data FILE            token file; --token-bytes N (default 1)\n"
     "  --input NAME=FILE.npy  a dataset: one array per graph input (targets too), its\n"
     "                         leading dimension the samples; B rows drawn each step\n"
     "  --synthetic            random batches (the default without --data or --input)\n"
     "  --dim NAME=N           sizes: B (batch) and T (sequence) (repeatable)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --steps N              optimizer steps (default 100)\n"
     "  --accum N              micro-batches per step (default 1)\n"
     "  --optimizer NAME       adamw (default), sgd, lion\n"
     "  --lr X                 peak learning rate (default 3e-4); --min-lr X (lr / 10)\n"
     "  --warmup N             linear warm-up steps; --cosine: cosine decay to --min-lr\n"
     "  --weight-decay X       decoupled, on parameters of rank >= 2 (default 0.1)\n"
     "  --no-decay PATTERN     exempt parameters whose names match (shell pattern such as\n"
     "                         '*.wpe.*'; repeatable)\n"
     "  --momentum X           sgd's (default 0.9)\n"
     "  --clip X               clip the global gradient norm (default 1; 0: off)\n"
     "  --log-every N          progress every N steps (default 10); --json: JSON lines (a\n"
     "                         non-finite value as null and KEY_nonfinite), then a summary;\n"
     "                         tools/plot_train.py draws them as an SVG\n"
     "  --trace FILE.json      the first --trace-steps N steps (default 10) as a Chrome/\n"
     "                         Perfetto trace: forward and backward steps by layer (CPU only;\n"
     "                         the optimizer's update is not a compiled step: the gap between)\n"
     "  --save DIR             checkpoint at the end (and --save-every N steps): params,\n"
     "                         optimizer state, step, data position, sealed with a SHA-256\n"
     "                         of it all; written atomically; DIR is locked for the run (a\n"
     "                         second writer fails at once, naming the first)\n"
     "  --resume               continue from --save DIR's checkpoint (bit-identical); it\n"
     "                         must be whole, finite, of this model, and from a run with\n"
     "                         the same --seed, --optimizer and coil version\n"
     "  --auto-resume          --resume when --save DIR holds a checkpoint, else start:\n"
     "                         what a job restarted by coil launch --max-restarts wants\n"
     "  --resume-anyway        --resume even when seed, optimizer or coil version differ\n"
     "                         (another optimizer's state starts afresh) or the file has\n"
     "                         no checksum; a damaged file is never taken\n"
     "  --weights FILE         initial parameters from safetensors\n"
     "  --seed N               initializers, synthetic batches, the data sampler, dropout\n"
     "  --threads N            threads (default: one per CPU; at most 4 per CPU)\n"
     "  --mode MODE            as for run (max-autotune tunes the joint graph)\n"
     "  --precision P          f32 (default); bf16 or f16: matmuls read operands cast to\n"
     "                         it, products back to f32; everything else and the master\n"
     "                         weights stay f32; f16 scales the loss dynamically (run's\n"
     "                         --dtype, the whole model in one dtype, is not for training)\n"
     "  --loss-scale X         f16's first loss scale (default 65536)\n"
     "  --device cpu|cuda      where the step runs (cuda: the joint graph and the optimizer,\n"
     "                         one fused launch; parameters and state stay on the GPU)\n"
     "  --peak GFLOPS          the device's peak for MFU (a GPU's must be given)\n"
     "  --checkpoint MODE      none (keep every forward value the backward reads), auto\n"
     "                         (a minimum cut by bytes: recompute cheap ops, never matmuls)\n"
     "                         or full (keep the residual stream between blocks, recompute\n"
     "                         the rest, matmuls too, a block at a time)\n"
     "  --bucket-mb X          data-parallel: gradients reduced in buckets of X MiB (the\n"
     "                         first 1 MiB; default 25)\n"
     "  --dp-timeout S         data-parallel: a rank silent for S seconds (exited, killed,\n"
     "                         stuck) fails every other one, naming it (default 60)\n"
     "  --reduce-dtype T       data-parallel: gradients summed across ranks in f32 (default)\n"
     "                         or bf16 (half the bytes, each sum rounded to bf16)\n"
     "  --measure-scaling      data-parallel: after the run rank 0 times steps alone (the\n"
     "                         other ranks gone) and prints the scaling efficiency\n"
     "  --zero K               data-parallel: ZeRO stage 1 keeps only this rank's shard of\n"
     "                         the optimizer state (gradients reduce-scattered, parameters\n"
     "                         all-gathered), 2 the accumulated gradients' too (default 0)\n"
     "  --bind none|cores|numa data-parallel: each rank on its own share of the host's CPUs\n"
     "                         (cores: the default with more than one rank on the host) or\n"
     "                         on one NUMA node's; said on stderr at start\n"
     "\n"
     "Data-parallel: started by coil launch --nproc N, torchrun, mpirun or srun (their\n"
     "RANK/WORLD_SIZE, OMPI_COMM_WORLD_* or SLURM_* variables; rank 0 at MASTER_ADDR:\n"
     "MASTER_PORT), each rank trains on its B rows of every global batch of B x ranks, the\n"
     "parameters broadcast from rank 0 at the start and the gradients averaged over the\n"
     "ranks every step (CPU ranks so far), so N ranks at --dim B=b train as one process at\n"
     "B=N*b. Rank 0 alone prints and writes checkpoints; threads default to the host's CPUs\n"
     "shared among its ranks. The collectives run on Open MPI under mpirun (libmpi.so.40,\n"
     "opened at run time: Debian's libopenmpi3; MASTER_ADDR unused), else on a ring over\n"
     "TCP; COIL_COMM=tcp or COIL_COMM=mpi chooses. Under MPI a rank that times out names\n"
     "the lost one and ends the job (MPI_Abort).\n"
     "\n"
     "Sizes (--dim) must be at least 1 and rates finite. A run whose loss is not finite\n"
     "for 10 steps in a row, or at its last step, has diverged: it exits with status 1 and\n"
     "leaves the last good checkpoint as it was (f16's skipped overflow steps are not\n"
     "counted while the loss scale can still be lowered).\n"},
    {"launch", cmd_launch, "start the ranks of a data-parallel job on this host",
     "usage: coil launch --nproc N [options] -- PROGRAM [ARGS...]\n"
     "\n"
     "Starts N copies of PROGRAM (usually `coil train ...`) as ranks 0 to N-1 of one job,\n"
     "each with torchrun's variables: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
     "MASTER_ADDR and MASTER_PORT. Their output (stdout and stderr) is forwarded a line at\n"
     "a time, each line prefixed with [rank K]. When a rank fails (a non-zero status, a\n"
     "signal) the others are stopped (SIGTERM, then SIGKILL after 5 s) and the job exits\n"
     "with the failed rank's status; an interrupt stops them all the same way.\n"
     "\n"
     "options:\n"
     "  --nproc N              ranks to start (default 1)\n"
     "  --master-addr ADDR     where rank 0 listens (default 127.0.0.1)\n"
     "  --master-port P        its port (default: one that is free now)\n"
     "  --max-restarts N       when a rank fails, start the whole job again, up to N times\n"
     "                         (each rank sees TORCHELASTIC_RESTART_COUNT; coil train\n"
     "                         --save DIR --auto-resume then goes on from its checkpoint)\n"
     "\n"
     "Across hosts, start one launcher per host under your scheduler, or let it start the\n"
     "ranks itself: coil train reads Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID and\n"
     "Open MPI's OMPI_COMM_WORLD_* as well (README: a two-node Slurm script).\n"},
    {"plan", cmd_plan, "a training step's memory and time, before anything runs",
     "usage: coil plan MODEL [options]\n"
     "\n"
     "Builds the training graph as coil train would (the loss, autodiff) and plans it\n"
     "without generating code: the bytes of parameters, gradients, optimizer state, saved\n"
     "activations (forward values the backward reads), the rest of the activation arena\n"
     "(workspace) and inputs; the FLOPs of a step and a roofline time (the larger of the\n"
     "FLOPs at the measured FMA peak and an estimate of the bytes moved at the measured\n"
     "copy bandwidth); with --memory, the largest micro-batch B that fits.\n"
     "\n"
     "options:\n"
     "  --loss cross_entropy   as for train (default: the model's output 'loss')\n"
     "  --dim NAME=N           sizes: B and T (repeatable), each at least 1\n"
     "  --set NAME=VALUE       override a config constant (repeatable)\n"
     "  --memory SIZE          e.g. 80GiB: report the largest micro-batch within it\n"
     "  --optimizer NAME       adamw (default), sgd (with momentum), lion\n"
     "  --accum N              micro-batches per step\n"
     "  --world N --zero K     each of N data-parallel ranks' memory at ZeRO stage K (0, 1\n"
     "                         or 2; as for train), beside the ZeRO paper's formulas\n"
     "  --precision P          f32 (default), bf16 or f16: as for train\n"
     "  --checkpoint MODE      none, auto or full: as for train\n"
     "  --threads N            threads for the measured peaks\n"
     "  --peak GFLOPS          the peak, instead of measuring it\n"
     "  --bandwidth GB/s       the memory bandwidth, instead of measuring it\n"
     "  --device cpu|cuda      cuda: the same plan (device memory), with the GPU's --peak\n"
     "                         and --bandwidth given (H100 SXM: about 989000 bf16 dense,\n"
     "                         3350 GB/s)\n"},
    {"compile", cmd_compile, "compile a model ahead of time into a package directory",
     "usage: coil compile MODEL -o DIR [options]\n"
     "\n"
     "Writes DIR/model.cir (the optimised IR), DIR/program.loop (the loop IR), DIR/plan.json\n"
     "(the buffers, their lifetimes and, at the --dim sizes, their offsets), the kernels and,\n"
     "last, DIR/manifest.json: every file's size and SHA-256 and a checksum of itself, held\n"
     "against the files before anything loads (a changed byte is refused, never run). Each\n"
     "file is written whole or not at all. For the CPU the kernels are DIR/kernels.o, object\n"
     "code for this CPU: `coil run DIR` then runs the model without running LLVM's optimiser,\n"
     "and refuses to load on a CPU lacking a feature its code uses, or in another version of\n"
     "coil. For CUDA (--device cuda) they are DIR/kernels.cu and DIR/kernels.ARCH.cubin,\n"
     "compiled here by NVRTC: no GPU is needed.\n"
     "\n"
     "options:\n"
     "  -o DIR                 the package directory (created; files in it replaced)\n"
     "  --device cpu|cuda      what to compile for (default cpu)\n"
     "  --arch SM              the GPU architecture for cuda: sm_80, sm_90a, ... (default\n"
     "                         sm_90a)\n"
     "  --emit=llvm-ir,asm     also write DIR/kernels.ll (optimised LLVM IR), DIR/kernels.s;\n"
     "  --emit=cuda,ptx        for cuda: also DIR/kernels.ARCH.ptx (kernels.cu, the CUDA C,\n"
     "                         is always written)\n"
     "  --dim NAME=N           sizes for plan.json's offsets (repeatable)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     DTYPE_HELP
     "                         (the package records it: `coil run DIR` runs in it)\n"
     "  --train                training mode: dropout is active, batch norm uses the\n"
     "                         batch's statistics\n"
     "  --no-fusion            one kernel per op, no GEMM epilogues\n"
     "  --mode max-autotune    cuda: NVRTC's full optimisation (default: ptxas's costliest\n"
     "                         passes off where NVRTC has --Ofast-compile, 3x faster)\n"
     "  --json                 one JSON object instead of the line: the package directory,\n"
     "                         its model, device and target, its files and their bytes, the\n"
     "                         kernels and steps, each compile stage's milliseconds\n"},
    {"opt", cmd_opt, "run passes over a model and print the resulting IR",
     "usage: coil opt FILE.cir [--passes=a,b,...]\n"
     "\n"
     "Reads the graph, runs the passes in order (default: verify) and prints the IR.\n"
     "An unknown pass name is a usage error; nothing runs. A pass that takes an argument is\n"
     "written NAME=ARG: autodiff,precision=bf16,remat=auto (the training pipeline's stages;\n"
     "remat binds every symbol to 64, where training cuts at its --dim sizes). `coil --help`\n"
     "lists the passes.\n"},
    {"check", cmd_check, "check a model and summarize it: signature, parameters, FLOPs, memory",
     "usage: coil check MODEL [--set NAME=VALUE]... [--dim NAME=N]... [--params] [--no-fusion]\n"
     "                        [--dtype f32|bf16|f16] [--json]\n"
     "\n"
     "Loads and verifies the model without running it, then prints its inputs, outputs,\n"
     "parameter count and bytes, node count, the FLOPs of one call and the planned peak\n"
     "memory (parameters, the one arena all activations share, inputs and outputs).\n"
     "Symbolic dimensions take their size from --dim (default 2).\n"
     "\n"
     "options:\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     "  --dim NAME=N           size of symbolic dimension NAME (repeatable)\n"
     "  --params               also list every parameter: name, type, initializer\n"
     "  --no-fusion            plan memory for one kernel per op\n"
     DTYPE_HELP
     "                         (the bytes and the plan are the retyped model's)\n"
     "  --json                 the same as one JSON object: inputs and outputs with dtype\n"
     "                         and shape (a symbolic dim as text, \"B\"), parameters, nodes,\n"
     "                         the sizes, FLOPs, the memory plan's bytes (and --params)\n"},
    {"dump", cmd_dump, "print a model's IR, fusion plan or loop IR",
     "usage: coil dump MODEL [--after=PASS|fuse|lower | --all [--out DIR]] [--passes=a,b,...]\n"
     "                       [--format=text|dot [--all-nodes]] [--set NAME=VALUE]... [--train]\n"
     "                       [--no-fusion] [--dtype f32|bf16|f16]\n"
     "\n"
     "Loads the model (.cir or .coil) and prints it as IR text, which `coil opt` reads\n"
     "back, or with --format=dot as a Graphviz digraph (render it with `dot -Tsvg`): ops\n"
     "in a cluster per block (the parameters' dotted prefix up to the first index, as\n"
     "transformer.h.3 or backbone.4), parameters and constants written on the ops that\n"
     "read them instead of drawn as nodes.\n"
     "\n"
     "options:\n"
     "  --after PASS           run the pipeline up to PASS and print the graph it made;\n"
     "                         --after=fuse prints the optimised graph and the fusion\n"
     "                         plan as comments (with --format=dot, a picture of the plan:\n"
     "                         a box per kernel, its ops, parameters and stored values, a\n"
     "                         GEMM and its epilogue as one step), --after=lower the loop IR\n"
     "  --all                  print the graph after every pass, each under '// after PASS'\n"
     "  --out DIR              with --all: one file per stage in DIR instead, numbered in\n"
     "                         order (00-input, 01-after-verify, ..., then the fusion plan),\n"
     "                         .cir or .dot; --all --format=dot needs it\n"
     "  --passes a,b,...       the pipeline (default: none; with --after or --all the\n"
     "                         standard one, verify,decompose_fused,colsum,fold,cse,dce)\n"
     "  --format text|dot      IR text (default) or Graphviz\n"
     "  --all-nodes            dot: every node drawn, parameters and constants included,\n"
     "                         with no clusters (the graph node by node)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --const NAME=FILE.npy  fix an ONNX model's input NAME at load to that value: a\n"
     "                         constant the ops that need one (a Reshape's shape, axes)\n"
     "                         can read; the model is specialised to it (repeatable)\n"
     "  --train                training mode: dropout stays (else it is the identity),\n"
     "                         batch norm uses the batch's statistics and outputs the\n"
     "                         running ones' new values (update.NAME)\n"
     "  --no-fusion            (fuse, lower) one group per op\n"
     DTYPE_HELP},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void print_passes(FILE *f)
{
    fprintf(f, "\npasses (coil opt --passes=...):\n");
    for (int i = 0; i < pass_count; i++)
        fprintf(f, "  %-15s %s\n", pass_table[i].name, pass_table[i].help);
}

/* The compile modes, as run, bench and autotune take them (--mode). */
static void print_modes(FILE *f)
{
    fprintf(f, "\nmodes (run, bench: --mode=...):\n"
               "  default          heuristics only: nothing is measured, compile in milliseconds\n"
               "  reduce-overhead  default, and on a GPU each run replayed as a CUDA graph\n"
               "  max-autotune     every distinct kernel's candidates measured at the first run\n"
               "                   of each size (GEMM blockings, OpenBLAS, fused or separate\n"
               "                   epilogues, thread splits; padding of odd GEMM shapes), the\n"
               "                   fastest correct one kept and cached per device, so the next\n"
               "                   compile measures nothing. On a GPU: cuBLASLt's heuristic\n"
               "                   algorithms, cuBLAS, fused or separate epilogues, threads\n"
               "                   and points per thread of every kernel, CUDA graphs.\n");
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: coil COMMAND [ARGS]   (coil --version, coil --help)\n\n"
               "coil compiles and runs deep-learning models.\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    print_passes(f);
    print_modes(f);
    fprintf(f, "\nRun 'coil COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("coil %s\n", COIL_VERSION_TEXT);
        return EXIT_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        Args a;
        if (!args_init(&a, argc)) {
            fprintf(stderr, "coil: out of memory\n");
            return EXIT_INPUT;
        }
        int rc = commands[i].run(&commands[i], &a, argc - 2, argv + 2);
        args_free(&a);
        return rc;
    }
    fprintf(stderr, "coil: unknown command '%s'\nTry 'coil --help'.\n", argv[1]);
    return EXIT_USAGE;
}
