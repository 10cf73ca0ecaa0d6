/* cli.h — what the `coil` command's files share: the command table's types, the flags
 * every command draws from, their parsing, and reporting (exit 0 success, 1 bad input,
 * 2 bad usage). */
#ifndef COIL_TOOLS_CLI_H
#define COIL_TOOLS_CLI_H

#include <stdio.h>

#include "ir/ir.h"
#include "pipeline/pipeline.h"
#include "runtime/init.h"

#define DEFAULT_DIM 2 /* size of a symbolic dim that nothing else sizes */

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef struct Args Args;

typedef struct Command {
    const char *name;
    int (*run)(const struct Command *cmd, Args *a, int argc, char **argv);
    const char *summary;
    const char *usage; /* --help text after the summary */
} Command;

/* A repeatable flag's values, in command-line order (pointers into argv). */
typedef struct List {
    char **item;
    int n;
} List;

/* Everything any command accepts; each command says which flags it takes. */
struct Args {
    const char *model;
    bool help, interp, params, train, all, no_fusion, json, blas, profile, graphs, tf32;
    const char *passes, *weights, *out, *seed, *format, *after, *threads, *batch, *runs,
        *warmup, *peak, *emit, *mode, *device, *arch, *cache, *report, *rng_step, *dtype,
        *trace;
    List input, set, dim, consts; /* "NAME=VALUE" strings */
};

/* A flag and where its value goes: one of value (single), list (repeatable), on (no value). */
typedef struct Flag {
    const char *name;
    const char **value;
    List *list;
    bool *on;
} Flag;

/* The rows of every flag table that compiles a model and runs it at sizes it is given (run,
 * bench, autotune): sizes, overrides, seed, threads, fusion, the device, the tuning cache. */
#define MODEL_FLAGS(a)                                                                     \
    {"--set", .list = &(a)->set}, {"--dim", .list = &(a)->dim},                            \
        {"--const", .list = &(a)->consts},                                                 \
        {"--seed", .value = &(a)->seed}, {"--threads", .value = &(a)->threads},            \
        {"--no-fusion", .on = &(a)->no_fusion}, {"--device", .value = &(a)->device},       \
        {"--cache", .value = &(a)->cache}

/* The rows run and bench add: GEMM choices, the GPU's options, the compile mode, the
 * dtype, JSON output. */
#define RUN_FLAGS(a)                                                                       \
    MODEL_FLAGS(a), {"--blas", .on = &(a)->blas}, {"--cuda-graphs", .on = &(a)->graphs},   \
        {"--allow-tf32", .on = &(a)->tf32}, {"--mode", .value = &(a)->mode},               \
        {"--dtype", .value = &(a)->dtype}, {"--json", .on = &(a)->json}

int cli_fail(const Err *e);
int usage_error(const Command *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int help(const Command *cmd);
/* Parse argv (after the command name): flags, -h/--help, and one model file. */
int parse_args(const Command *cmd, const Flag *flags, int nflags, int argc, char **argv, Args *a);
bool args_init(Args *a, int argc);
void args_free(Args *a);
/* "NAME=VALUE" split at the first '=': false when there is no name or no '='. */
bool split_pair(const char *s, size_t *name_len, const char **value);
bool parse_u64(const char *s, uint64_t *out);
/* --set and --dim pairs and --dtype checked, then the dims' sizes parsed into
 * sizes[a->dim.n]. */
int check_model_args(const Command *cmd, const Args *a, SymSize *sizes);
/* Every size in sizes[0..n) at least 1 (a training step, or its plan, of no samples has
 * nothing to learn from): else a usage error naming the dimension ("--dim B=0"). */
int check_dim_sizes(const Command *cmd, const SymSize *sizes, int n);
/* A positive count flag (--threads, --runs): def when absent. */
int parse_count(const Command *cmd, const char *flag, const char *value, int64_t def,
                int64_t *out);
/* --batch N as the size B=N, appended to sizes[*nsizes] (nothing when absent). */
int parse_batch(const Command *cmd, const Args *a, SymSize *sizes, int *nsizes);
/* A positive number flag (--peak GFLOP/s, --bandwidth GB/s): 0 when absent. */
int parse_positive(const Command *cmd, const char *flag, const char *value, const char *unit,
                   double *out);
/* Print text the caller allocated (NULL: out of memory). */
int print_text(char *text, const char *what);

/* The model file (.cir, .coil) a command names, loaded with --set, --train, a seed and
 * --dtype (the whole model retyped from f32; see passes/retype.c). */
Graph *load_model(const Args *a, uint64_t seed, Err *e);
/* --device (cpu or cuda), and the flags only a GPU takes (--cuda-graphs, --allow-tf32,
 * --arch) refused without it. */
int check_device(const Command *cmd, const Args *a);
bool device_is_cuda(const Args *a);
/* --device's Device (NULL when it names none: check_device says so). */
const Device *args_device(const Args *a);
/* Compile options from --no-fusion, --threads (already checked), --blas, --device,
 * --cuda-graphs, --allow-tf32, --mode (checked by check_device) and --cache. */
CompileOptions compile_options(const Args *a, int threads);

/* ---------------------------------------------------------------- prepare.c */

/* A model ready to run: loaded (a model file or a package directory), inputs read from
 * --input or drawn from the seed, parameters from --weights or their initializers. */
typedef struct Prepared {
    Graph *g;         /* as loaded (a package: its optimised graph) */
    const char *package; /* the directory when MODEL is a package, else NULL */
    Tensor *inputs, *params;
    bool *given;
    int nparam;
    SymBind sb;
} Prepared;

/* sizes[0..nsizes): symbol sizes given on the command line. */
bool prepare(Prepared *r, const Args *a, const SymSize *sizes, int nsizes, uint64_t seed, Err *e);
void prepared_free(Prepared *r);
/* Compile r's model (or load its package) for the CPU. */
Compiled *prepared_compile(const Prepared *r, const CompileOptions *o, Err *e);

/* ---------------------------------------------------------------- the commands */

int cmd_run(const Command *cmd, Args *a, int argc, char **argv);
int cmd_bench(const Command *cmd, Args *a, int argc, char **argv);
int cmd_compile(const Command *cmd, Args *a, int argc, char **argv);
int cmd_autotune(const Command *cmd, Args *a, int argc, char **argv);
int cmd_train(const Command *cmd, Args *a, int argc, char **argv);
int cmd_plan(const Command *cmd, Args *a, int argc, char **argv);
int cmd_launch(const Command *cmd, Args *a, int argc, char **argv);

/* --dtype's help lines, shared by the commands that take it. */
#define DTYPE_HELP                                                                        \
    "  --dtype f32|bf16|f16   the whole model in this dtype, as PyTorch's model.to(dtype):\n" \
    "                         parameters, inputs and every activation stored in it, kernels\n" \
    "                         computing in f32 (default f32: as written)\n"

/* --mode's help lines, shared by the commands that take it. */
#define MODE_HELP                                                                         \
    "  --mode MODE            default: the heuristics, nothing measured; reduce-overhead:\n" \
    "                         the same, replayed as CUDA graphs on a GPU (on the CPU, as\n"  \
    "                         default); max-autotune: every kernel's candidates measured\n" \
    "                         at the first run of each size and the fastest kept, in the\n"  \
    "                         cache for later compiles (CPU; a GPU measures nothing yet)\n" \
    "  --cache FILE           max-autotune's cache (default $COIL_CACHE_DIR/autotune.json,\n" \
    "                         else ~/.cache/coil/autotune.json)\n"

#endif
