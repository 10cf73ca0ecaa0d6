/* cli.c — flag parsing and reporting shared by the `coil` command's subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "io/npy.h"
#include "io/package.h"
#include "passes/passes.h"
#include "runtime/device.h"
#include "runtime/pool.h"
#include "tools/cli.h"

/* Located messages ("FILE:LINE:COL: error: ...") print as they are, others after "coil: ". */
int cli_fail(const Err *e)
{
    if (strstr(e->msg, ": error: "))
        fprintf(stderr, "%s\n", e->msg);
    else
        fprintf(stderr, "coil: %s\n", e->msg);
    return e->code == ERR_USAGE ? EXIT_USAGE : EXIT_INPUT;
}

int usage_error(const Command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "coil %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'coil %s --help'.\n", cmd->name);
    va_end(ap);
    return EXIT_USAGE;
}

/* The commands that compile a model, which all take --debug-dir (see parse_args). */
static bool compiles(const Command *cmd)
{
    static const char *const names[] = {"run", "bench", "compile", "check", "autotune", "train",
                                        "plan"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(cmd->name, names[i]) == 0)
            return true;
    return false;
}

int help(const Command *cmd)
{
    printf("coil %s — %s\n\n%s", cmd->name, cmd->summary, cmd->usage);
    if (compiles(cmd))
        printf("\ncompiler diagnostics (every command that compiles):\n"
               "  --debug-dir DIR        write every stage of the compile into DIR/NNN-<graph>/,\n"
               "                         numbered in order: the IR as given and after each pass,\n"
               "                         the fusion plan (text and .dot), the loop IR, the LLVM\n"
               "                         IR before and after O3 (or the CUDA C), the memory plan,\n"
               "                         the autotuner's report and the compile-time breakdown\n"
               "                         (the same as COIL_DEBUG_DIR=DIR)\n"
               "  COIL_LOG=info|debug    (environment) what the compiler decides and why, on\n"
               "                         stderr: each pass's time, fusion refusals, cuBLASLt\n"
               "                         epilogues, autotuner candidates, the memory plan\n");
    return EXIT_OK;
}

/* Flags a command does not take but a user may reach for there, and what to use instead. */
static const struct {
    const char *command, *flag, *instead;
} flag_hints[] = {
    {"train", "--dtype", "coil train takes --precision bf16|f16 (autocast: matmuls in it, f32 "
     "master weights); a whole model in one dtype is for run, bench, compile and check"},
    {"plan", "--dtype", "coil plan takes --precision bf16|f16, as coil train does"},
};

static int unknown_option(const Command *cmd, const char *arg)
{
    size_t n = strcspn(arg, "=");
    for (size_t i = 0; i < sizeof flag_hints / sizeof *flag_hints; i++)
        if (strcmp(cmd->name, flag_hints[i].command) == 0 &&
            strlen(flag_hints[i].flag) == n && strncmp(arg, flag_hints[i].flag, n) == 0)
            return usage_error(cmd, "unknown option '%s': %s", arg, flag_hints[i].instead);
    return usage_error(cmd, "unknown option '%s'", arg);
}

/* Match argv[*i] against flags; "--name=value" and "--name value" are both accepted. */
static int parse_flag(const Command *cmd, const Flag *flags, int nflags, int argc, char **argv,
                      int *i)
{
    char *arg = argv[*i];
    for (const Flag *f = flags; f < flags + nflags; f++) {
        size_t n = strlen(f->name);
        if (strncmp(arg, f->name, n) != 0 || (arg[n] != 0 && arg[n] != '='))
            continue;
        if (f->on) {
            if (arg[n] == '=')
                return usage_error(cmd, "%s takes no value", f->name);
            *f->on = true;
            return EXIT_OK;
        }
        char *value = arg[n] == '=' ? arg + n + 1 : *i + 1 < argc ? argv[++*i] : NULL;
        if (!value)
            return usage_error(cmd, "%s needs a value", f->name);
        if (f->list)
            f->list->item[f->list->n++] = value;
        else
            *f->value = value;
        return EXIT_OK;
    }
    return unknown_option(cmd, arg);
}

/* --debug-dir DIR (or =DIR), for every command that compiles: the compiler reads it as
 * COIL_DEBUG_DIR (base/debug_dir.h), so it reaches every compile the command makes (training
 * compiles several) without a field in each command's options. */
static int debug_dir_flag(const Command *cmd, int argc, char **argv, int *i)
{
    const char *arg = argv[*i], *value = NULL;
    size_t n = strlen("--debug-dir");
    if (arg[n] == '=')
        value = arg + n + 1;
    else if (*i + 1 < argc)
        value = argv[++*i];
    if (!value || !*value)
        return usage_error(cmd, "--debug-dir needs a directory");
    if (setenv("COIL_DEBUG_DIR", value, 1) != 0)
        return usage_error(cmd, "--debug-dir %s: %s", value, strerror(errno));
    return EXIT_OK;
}

static bool is_debug_dir(const Command *cmd, const char *arg)
{
    size_t n = strlen("--debug-dir");
    return strncmp(arg, "--debug-dir", n) == 0 && (arg[n] == 0 || arg[n] == '=') && compiles(cmd);
}

int parse_args(const Command *cmd, const Flag *flags, int nflags, int argc, char **argv, Args *a)
{
    for (int i = 0; i < argc; i++) {
        int rc = EXIT_OK;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            a->help = true;
        else if (is_debug_dir(cmd, argv[i]))
            rc = debug_dir_flag(cmd, argc, argv, &i);
        else if (argv[i][0] == '-' && argv[i][1] != 0)
            rc = parse_flag(cmd, flags, nflags, argc, argv, &i);
        else if (a->model)
            rc = usage_error(cmd, "unexpected argument '%s'", argv[i]);
        else
            a->model = argv[i];
        if (rc != EXIT_OK)
            return rc;
    }
    if (!a->model && !a->help)
        return usage_error(cmd, "missing the model file");
    return EXIT_OK;
}

/* Room in every list for all of argc. */
bool args_init(Args *a, int argc)
{
    memset(a, 0, sizeof *a);
    char **items = calloc(4 * (size_t)(argc + 1), sizeof *items);
    a->input.item = items;
    a->set.item = items ? items + argc + 1 : NULL;
    a->dim.item = items ? items + 2 * (argc + 1) : NULL;
    a->consts.item = items ? items + 3 * (argc + 1) : NULL;
    return items != NULL;
}

void args_free(Args *a) { free(a->input.item); }

bool split_pair(const char *s, size_t *name_len, const char **value)
{
    const char *eq = strchr(s, '=');
    *name_len = eq ? (size_t)(eq - s) : 0;
    *value = eq ? eq + 1 : NULL;
    return eq && eq != s;
}

static int check_pairs(const Command *cmd, const char *flag, const List *list)
{
    size_t len;
    const char *value;
    for (int i = 0; i < list->n; i++)
        if (!split_pair(list->item[i], &len, &value) || !*value)
            return usage_error(cmd, "%s expects NAME=VALUE, got '%s'", flag, list->item[i]);
    return EXIT_OK;
}

bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || s[0] == '-')
        return false;
    *out = v;
    return true;
}

/* --dim NAME=N strings to sizes (already checked to be pairs). */
static int parse_dims(const Command *cmd, const List *dims, SymSize *sizes)
{
    for (int i = 0; i < dims->n; i++) {
        char *name = dims->item[i];
        size_t len;
        const char *value;
        split_pair(name, &len, &value);
        uint64_t v;
        if (!parse_u64(value, &v) || v > (UINT64_C(1) << 40))
            return usage_error(cmd, "--dim %s: the size must be a non-negative integer", name);
        name[len] = 0; /* argv's strings are ours to cut */
        sizes[i] = (SymSize){name, (int64_t)v};
    }
    return EXIT_OK;
}

static int check_dtype(const Command *cmd, const Args *a)
{
    DType dt;
    if (a->dtype && !precision_parse(a->dtype, &dt))
        return usage_error(cmd, "--dtype %s: expected f32, bf16 or f16 (the dtype the whole "
                           "model runs in)", a->dtype);
    return EXIT_OK;
}

int check_model_args(const Command *cmd, const Args *a, SymSize *sizes)
{
    int rc = check_dtype(cmd, a);
    if (rc == EXIT_OK)
        rc = check_pairs(cmd, "--set", &a->set);
    if (rc == EXIT_OK)
        rc = check_pairs(cmd, "--input", &a->input);
    if (rc == EXIT_OK)
        rc = check_pairs(cmd, "--const", &a->consts);
    if (rc == EXIT_OK)
        rc = check_pairs(cmd, "--dim", &a->dim);
    if (rc == EXIT_OK)
        rc = parse_dims(cmd, &a->dim, sizes);
    return rc;
}

int check_dim_sizes(const Command *cmd, const SymSize *sizes, int n)
{
    for (int i = 0; i < n; i++)
        if (sizes[i].value < 1)
            return usage_error(cmd, "--dim %s=%lld: a size must be at least 1", sizes[i].name,
                               (long long)sizes[i].value);
    return EXIT_OK;
}

int parse_positive(const Command *cmd, const char *flag, const char *value, const char *unit,
                   double *out)
{
    char *end = NULL;
    *out = value ? strtod(value, &end) : 0;
    if (value && (end == value || *end || !(*out > 0)))
        return usage_error(cmd, "%s %s: expected a positive number of %s", flag, value, unit);
    return EXIT_OK;
}

/* More threads than CPUs only queue for them, and the engine's threads spin at a barrier
 * after every step, so each extra thread costs every step a time slice (--threads 512 on
 * 2 CPUs: a 45 s bench). Up to THREADS_PER_CPU a CPU is allowed, for experiments; more is
 * refused rather than capped: a silent cap would run, and time, what was not asked for. */
#define THREADS_PER_CPU 4

static int check_threads(const Command *cmd, const char *flag, int64_t n)
{
    int cpus = pool_default_threads();
    int64_t most = (int64_t)THREADS_PER_CPU * cpus;
    if (n <= most)
        return EXIT_OK;
    return usage_error(cmd, "%s %lld: more than %d per CPU on the %d CPU%s this process may use; "
                       "extra threads only wait for a CPU: give at most %lld, or leave %s out "
                       "for one per CPU", flag, (long long)n, THREADS_PER_CPU, cpus,
                       cpus == 1 ? "" : "s", (long long)most, flag);
}

int parse_count(const Command *cmd, const char *flag, const char *value, int64_t def,
                int64_t *out)
{
    uint64_t v;
    *out = def;
    if (!value)
        return EXIT_OK;
    if (!parse_u64(value, &v) || v == 0 || v > (UINT64_C(1) << 30))
        return usage_error(cmd, "%s %s: expected a positive integer", flag, value);
    *out = (int64_t)v;
    /* every command's --threads comes through here */
    return strcmp(flag, "--threads") == 0 ? check_threads(cmd, flag, *out) : EXIT_OK;
}

int parse_batch(const Command *cmd, const Args *a, SymSize *sizes, int *nsizes)
{
    int64_t batch;
    int rc = parse_count(cmd, "--batch", a->batch, 2, &batch);
    if (rc == EXIT_OK && a->batch)
        sizes[(*nsizes)++] = (SymSize){"B", batch};
    return rc;
}

int print_text(char *text, const char *what)
{
    if (!text) {
        fprintf(stderr, "coil: out of memory printing the %s\n", what);
        return EXIT_INPUT;
    }
    fputs(text, stdout);
    free(text);
    return EXIT_OK;
}

/* The model in --dtype's dtype: a dtype is part of what the model is (its parameters'
 * bytes, its inputs' types), so every stage after loading sees the retyped graph: the
 * drawn inputs and parameters, check's summary and plan, dump, the compiler, packages. */
static Graph *in_dtype(Graph *g, const Args *a, Err *e)
{
    DType to = DT_F32;
    if (!g || !a->dtype || !precision_parse(a->dtype, &to) || to == DT_F32)
        return g; /* --dtype was checked by check_model_args */
    Graph *retyped = pass_retype(g, DT_F32, to, e);
    graph_free(g);
    return retyped;
}

/* A directory where a model file is wanted: said so, rather than the file system's "Is a
 * directory" (run and bench take packages before they get here). */
static bool not_a_directory(const char *path, Err *e)
{
    char manifest[4096];
    struct stat st;
    if (!package_is(path))
        return true;
    snprintf(manifest, sizeof manifest, "%s/manifest.json", path);
    err_set(e, ERR_INPUT, "%s: cannot open: Is a directory; give a model file (.coil or .cir)%s",
            path, stat(manifest, &st) == 0 ? " (a compiled package runs with `coil run` or "
                                             "`coil bench`)" : "");
    return false;
}

/* --const NAME=FILE.npy: the inputs fixed at load, read into c[0..n). */
static bool read_constants(const Args *a, ModelConstant *c, Err *e)
{
    for (int i = 0; i < a->consts.n; i++) {
        const char *file;
        size_t len;
        if (!split_pair(a->consts.item[i], &len, &file)) {
            err_set(e, ERR_USAGE, "--const %s: expected NAME=FILE.npy", a->consts.item[i]);
            return false;
        }
        c[i].name = strndup(a->consts.item[i], len);
        if (!c[i].name) {
            err_set(e, ERR_MEMORY, "out of memory");
            return false;
        }
        if (!npy_read(file, &c[i].value, e))
            return false;
    }
    return true;
}

Graph *load_model(const Args *a, uint64_t seed, Err *e)
{
    if (!not_a_directory(a->model, e))
        return NULL;
    ModelConstant c[a->consts.n + 1];
    memset(c, 0, sizeof c);
    ModelOptions opt = {.set = (const char *const *)a->set.item, .nset = a->set.n,
                        .training = a->train, .seed = seed, .constants = c,
                        .nconstants = a->consts.n};
    Graph *g = read_constants(a, c, e) ? in_dtype(model_load(a->model, &opt, e), a, e) : NULL;
    for (int i = 0; i < a->consts.n; i++)
        free((char *)c[i].name), tensor_free(&c[i].value);
    return g;
}

const Device *args_device(const Args *a) { return device_find(a->device); }

bool device_is_cuda(const Args *a) { return args_device(a) && args_device(a)->gpu; }

int check_device(const Command *cmd, const Args *a)
{
    if (!args_device(a))
        return usage_error(cmd, "--device %s: expected %s", a->device, device_names());
    const char *gpu_only = a->graphs ? "--cuda-graphs" : a->tf32 ? "--allow-tf32" : a->arch ? "--arch" : NULL;
    if (gpu_only && !device_is_cuda(a))
        return usage_error(cmd, "%s applies to --device cuda", gpu_only);
    if (a->blas && device_is_cuda(a))
        return usage_error(cmd, "--blas applies to the CPU (a GPU's GEMMs are cuBLAS's)");
    CompileMode m;
    if (a->mode && !compile_mode_parse(a->mode, &m))
        return usage_error(cmd, "--mode %s: expected default, reduce-overhead or max-autotune",
                           a->mode);
    return EXIT_OK;
}

CompileOptions compile_options(const Args *a, int threads)
{
    CompileMode mode = MODE_DEFAULT;
    if (a->mode)
        compile_mode_parse(a->mode, &mode);
    return (CompileOptions){.no_fusion = a->no_fusion, .blas_gemm = a->blas, .threads = threads,
                            .device = args_device(a),
                            .cuda = {.graphs = a->graphs, .allow_tf32 = a->tf32},
                            .mode = mode, .tune_cache = a->cache,
                            .tune_progress = isatty(STDERR_FILENO)};
}
