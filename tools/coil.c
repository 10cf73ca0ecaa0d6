/* coil.c — the `coil` command: a table of subcommands, each parsing its own flags.
 * Exit status: 0 success, 1 bad input (any error loading or running), 2 bad usage. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "frontend/frontend.h"
#include "ir/dot.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/init.h"
#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "runtime/summary.h"

#define COIL_VERSION "0.1.0"
#define DEFAULT_DIM 2 /* size of a symbolic dim that nothing else sizes */

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef struct Args Args;

typedef struct Command {
    const char *name;
    int (*run)(const struct Command *cmd, Args *a, int argc, char **argv);
    const char *summary;
    const char *usage; /* --help text after the summary */
} Command;

/* ---------------------------------------------------------------- reporting */

/* Located messages ("FILE:LINE:COL: error: ...") print as they are, others after "coil: ". */
static int fail(const Err *e)
{
    if (strstr(e->msg, ": error: "))
        fprintf(stderr, "%s\n", e->msg);
    else
        fprintf(stderr, "coil: %s\n", e->msg);
    return e->code == ERR_USAGE ? EXIT_USAGE : EXIT_INPUT;
}

__attribute__((format(printf, 2, 3)))
static int usage_error(const Command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "coil %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'coil %s --help'.\n", cmd->name);
    va_end(ap);
    return EXIT_USAGE;
}

static int help(const Command *cmd)
{
    printf("coil %s — %s\n\n%s", cmd->name, cmd->summary, cmd->usage);
    return EXIT_OK;
}

/* ---------------------------------------------------------------- flag parsing */

/* A repeatable flag's values, in command-line order (pointers into argv). */
typedef struct List {
    char **item;
    int n;
} List;

/* Everything any command accepts; each command says which flags it takes. */
struct Args {
    const char *model;
    bool help, interp, params, train, all;
    const char *passes, *weights, *out, *seed, *format, *after;
    List input, set, dim; /* "NAME=VALUE" strings */
};

/* A flag and where its value goes: one of value (single), list (repeatable), on (no value). */
typedef struct Flag {
    const char *name;
    const char **value;
    List *list;
    bool *on;
} Flag;

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
    return usage_error(cmd, "unknown option '%s'", arg);
}

/* Parse argv (after the command name): flags, -h/--help, and one model file. */
static int parse_args(const Command *cmd, const Flag *flags, int nflags, int argc, char **argv,
                      Args *a)
{
    for (int i = 0; i < argc; i++) {
        int rc = EXIT_OK;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            a->help = true;
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
static bool args_init(Args *a, int argc)
{
    memset(a, 0, sizeof *a);
    char **items = calloc(3 * (size_t)(argc + 1), sizeof *items);
    a->input.item = items;
    a->set.item = items ? items + argc + 1 : NULL;
    a->dim.item = items ? items + 2 * (argc + 1) : NULL;
    return items != NULL;
}

static void args_free(Args *a)
{
    free(a->input.item);
}

/* "NAME=VALUE" split at the first '=': false when there is no name or no '='. */
static bool split_pair(const char *s, size_t *name_len, const char **value)
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

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || s[0] == '-')
        return false;
    *out = v;
    return true;
}

static int parse_dims(const Command *cmd, const List *dims, SymSize *sizes);

/* ---------------------------------------------------------------- coil opt, coil dump */

static Graph *load_model(const Args *a, uint64_t seed, Err *e)
{
    ModelOptions opt = {(const char *const *)a->set.item, a->set.n, a->train, seed};
    return model_load(a->model, &opt, e);
}

static int print_graph(const Graph *g)
{
    char *text = ir_print(g);
    if (!text) {
        fprintf(stderr, "coil: out of memory printing the graph\n");
        return EXIT_INPUT;
    }
    fputs(text, stdout);
    free(text);
    return EXIT_OK;
}

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
        rc = fail(&e);
    graph_free(g);
    return rc;
}

/* Print text the caller allocated (NULL: out of memory). */
static int print_text(char *text, const char *what)
{
    if (!text) {
        fprintf(stderr, "coil: out of memory printing the %s\n", what);
        return EXIT_INPUT;
    }
    fputs(text, stdout);
    free(text);
    return EXIT_OK;
}

/* What `coil dump` prints and when: after one pass, after every pass, or at the end. */
typedef struct DumpPlan {
    bool dot, all;
    const char *after; /* a pass name, or NULL */
    bool printed;
    int rc;
} DumpPlan;

static int print_as(const Graph *g, bool dot)
{
    return dot ? print_text(ir_dot(g), "graph") : print_graph(g);
}

/* `--all` marks each graph with the pass that made it; `--after` stops at its pass. */
static bool dump_after_pass(const Graph *g, const Pass *pass, void *ctx)
{
    DumpPlan *p = ctx;
    if (p->after && strcmp(pass->name, p->after) != 0)
        return true;
    if (p->all)
        printf("// after %s\n", pass->name); /* a comment in IR text and in dot */
    p->rc = print_as(g, p->dot);
    p->printed = true;
    return p->all && p->rc == EXIT_OK;
}

/* Whether the comma-separated list names pass. */
static bool list_has(const char *list, const char *pass)
{
    size_t n = strlen(pass);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, pass, n) == 0 && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

static int check_dump_args(const Command *cmd, const Args *a, const char *list, DumpPlan *p)
{
    int rc = check_pairs(cmd, "--set", &a->set);
    p->dot = a->format && strcmp(a->format, "dot") == 0;
    if (rc == EXIT_OK && a->format && !p->dot && strcmp(a->format, "text") != 0)
        rc = usage_error(cmd, "--format %s: expected text or dot", a->format);
    if (rc == EXIT_OK && a->after && a->all)
        rc = usage_error(cmd, "--after and --all: give one of them");
    if (rc == EXIT_OK && a->after && !pass_find(a->after, strlen(a->after)))
        rc = usage_error(cmd, "--after %s: no such pass", a->after);
    if (rc == EXIT_OK && a->after && !list_has(list, a->after))
        rc = usage_error(cmd, "--after %s: the pass is not in the pipeline '%s'", a->after, list);
    return rc;
}

static int cmd_dump(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"--set", .list = &a->set},         {"--passes", .value = &a->passes},
                          {"--format", .value = &a->format},  {"--after", .value = &a->after},
                          {"--all", .on = &a->all},           {"--train", .on = &a->train}};
    DumpPlan plan = {0};
    int rc = parse_args(cmd, flags, 6, argc, argv, a);
    const char *list = a->passes ? a->passes : a->after || a->all ? pass_pipeline : "";
    if (rc == EXIT_OK && !a->help)
        rc = check_dump_args(cmd, a, list, &plan);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    plan.all = a->all;
    plan.after = a->after;
    Err e = {0};
    Graph *g = load_model(a, 0, &e);
    bool hooked = a->all || a->after;
    if (g && run_passes_with(&g, list, hooked ? dump_after_pass : NULL, &plan, &e))
        rc = plan.printed ? plan.rc : print_as(g, plan.dot);
    else
        rc = fail(&e);
    graph_free(g);
    return rc;
}

/* ---------------------------------------------------------------- coil check */

/* Shared by check and run: --set and --dim pairs, then the dims' sizes. */
static int check_model_args(const Command *cmd, const Args *a, SymSize *sizes)
{
    int rc = check_pairs(cmd, "--set", &a->set);
    if (rc == EXIT_OK)
        rc = check_pairs(cmd, "--dim", &a->dim);
    if (rc == EXIT_OK)
        rc = parse_dims(cmd, &a->dim, sizes);
    return rc;
}

static int cmd_check(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"--set", .list = &a->set},
                          {"--dim", .list = &a->dim},
                          {"--params", .on = &a->params}};
    SymSize sizes[argc + 1];
    int rc = parse_args(cmd, flags, 3, argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    SymBind sb;
    Graph *g = load_model(a, 0, &e);
    bool ok = g && init_symbols(g, NULL, NULL, sizes, a->dim.n, DEFAULT_DIM, &sb, &e);
    char *text = ok ? model_summary(g, &sb, &e) : NULL;
    if (ok && a->params && text) {
        rc = print_text(text, "summary");
        text = model_param_list(g, &e);
    }
    rc = !ok ? fail(&e) : rc != EXIT_OK ? rc : print_text(text, "summary");
    graph_free(g);
    return rc;
}

/* ---------------------------------------------------------------- coil run */

/* Everything a run owns, freed in one place. */
typedef struct Run {
    Graph *g;
    Tensor *inputs, *params, *outputs;
    bool *given;
    int nparam;
    double flops, seconds;
} Run;

static void run_free(Run *r)
{
    for (int i = 0; r->g && i < r->g->ninput && r->inputs; i++)
        tensor_free(&r->inputs[i]);
    for (int i = 0; r->params && i < r->nparam; i++)
        tensor_free(&r->params[i]);
    for (int i = 0; r->g && i < r->g->noutput && r->outputs; i++)
        tensor_free(&r->outputs[i]);
    free(r->inputs);
    free(r->params);
    free(r->outputs);
    free(r->given);
    graph_free(r->g);
}

static bool run_alloc(Run *r, Err *e)
{
    int n = r->g->ninput + 1, np = graph_params(r->g, NULL) + 1, no = r->g->noutput + 1;
    r->nparam = np - 1;
    r->inputs = calloc((size_t)n, sizeof(Tensor));
    r->given = calloc((size_t)n, sizeof(bool));
    r->params = calloc((size_t)np, sizeof(Tensor));
    r->outputs = calloc((size_t)no, sizeof(Tensor));
    if (r->inputs && r->given && r->params && r->outputs)
        return true;
    err_set(e, ERR_INPUT, "out of memory");
    return false;
}

static int find_input(const Graph *g, const char *name, size_t len)
{
    for (int i = 0; i < g->ninput; i++) {
        const char *n = node_name(&g->node[g->input[i]]);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return i;
    }
    return -1;
}

static bool no_such_input(const Graph *g, const char *name, size_t len, Err *e)
{
    char list[512] = "none";
    size_t used = 0;
    for (int i = 0; i < g->ninput && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 node_name(&g->node[g->input[i]]));
    err_set(e, ERR_INPUT, "--input %.*s: graph @%s has no input '%.*s' (its inputs: %s)", (int)len,
            name, g->name, (int)len, name, list);
    return false;
}

/* The first static dim of want that t disagrees with, or -1. */
static int static_dim_mismatch(const Type *want, const Tensor *t)
{
    for (int d = 0; d < t->rank; d++)
        if (dim_is_static(want->dim[d]) && want->dim[d].k != t->shape[d])
            return d;
    return -1;
}

/* The file's dtype, rank and static dims must be the input's; symbolic dims are checked
 * together when the graph binds them. */
static bool check_input(const Graph *g, int i, const Tensor *t, const char *file, Err *e)
{
    const Type *want = &g->node[g->input[i]].type;
    bool same_kind = t->dt == want->dt && t->rank == want->rank;
    int bad_dim = same_kind ? static_dim_mismatch(want, t) : -1;
    if (same_kind && bad_dim < 0)
        return true;
    char tw[256], tg[256], which[64] = "";
    if (bad_dim >= 0)
        snprintf(which, sizeof which, " (dimension %d disagrees)", bad_dim);
    err_set(e, ERR_INPUT, "input '%s' from %s: expected %s, got %s%s",
            node_name(&g->node[g->input[i]]), file, type_fmt(g, want, tw, sizeof tw),
            tensor_fmt(t, tg, sizeof tg), which);
    return false;
}

static bool read_inputs(Run *r, const Args *a, Err *e)
{
    for (int k = 0; k < a->input.n; k++) {
        const char *name = a->input.item[k], *file;
        size_t len;
        split_pair(name, &len, &file);
        int i = find_input(r->g, name, len);
        if (i < 0)
            return no_such_input(r->g, name, len, e);
        if (r->given[i]) {
            err_set(e, ERR_INPUT, "--input %.*s is given twice", (int)len, name);
            return false;
        }
        if (!npy_read(file, &r->inputs[i], e))
            return false;
        r->given[i] = true;
        if (!check_input(r->g, i, &r->inputs[i], file, e))
            return false;
    }
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

static bool load_params(Run *r, const Args *a, const SymBind *sb, uint64_t seed, Err *e)
{
    if (a->weights)
        return safetensors_bind(r->g, a->weights, r->params, e);
    return init_params(r->g, sb, seed, r->params, e);
}

static bool evaluate(Run *r, Err *e)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool ok = interp_run(r->g, r->inputs, r->params, r->outputs, &r->flops, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return ok;
}

/* One line per output: name, shape, sum and mean |x| (checksums), then time and FLOPs. */
static void print_summary(const Run *r)
{
    for (int i = 0; i < r->g->noutput; i++) {
        const Tensor *t = &r->outputs[i];
        double sum = 0, abs_sum = 0;
        int64_t n = tensor_numel(t);
        for (int64_t k = 0; k < n; k++) {
            double v = dtype_load(t->dt, t->data, k);
            sum += v;
            abs_sum += fabs(v);
        }
        char ty[256];
        printf("%s %s sum=%.6g mean_abs=%.6g\n", r->g->output_name[i], tensor_fmt(t, ty, sizeof ty),
               sum, n ? abs_sum / (double)n : 0.0);
    }
    printf("time %.3f ms (interpreter), %.4g FLOPs\n", r->seconds * 1e3, r->flops);
}

static bool write_outputs(const Run *r, const char *dir, Err *e)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        err_set(e, ERR_INPUT, "--out %s: cannot create the directory: %s", dir,
                errno == EEXIST ? "a file is in the way" : strerror(errno));
        return false;
    }
    for (int i = 0; i < r->g->noutput; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", dir, r->g->output_name[i]);
        if (!npy_write(path, &r->outputs[i], e))
            return false;
    }
    return true;
}

/* Flags that need more than being present: pairs, dims and the seed. */
static int check_run_args(const Command *cmd, const Args *a, SymSize *sizes, uint64_t *seed)
{
    int rc = check_pairs(cmd, "--input", &a->input);
    if (rc == EXIT_OK)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && a->seed && !parse_u64(a->seed, seed))
        rc = usage_error(cmd, "--seed %s: expected a non-negative integer", a->seed);
    return rc;
}

static int cmd_run(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {
        {"--input", .list = &a->input}, {"--set", .list = &a->set},
        {"--dim", .list = &a->dim},     {"--weights", .value = &a->weights},
        {"--out", .value = &a->out},    {"--seed", .value = &a->seed},
        {"--interp", .on = &a->interp}, {"--train", .on = &a->train},
    };
    SymSize sizes[argc + 1];
    uint64_t seed = 0;
    int rc = parse_args(cmd, flags, sizeof flags / sizeof flags[0], argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_run_args(cmd, a, sizes, &seed);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    Run r = {0};
    SymBind sb;
    bool ok = (r.g = load_model(a, seed, &e)) && run_alloc(&r, &e) && read_inputs(&r, a, &e) &&
              init_symbols(r.g, r.inputs, r.given, sizes, a->dim.n, DEFAULT_DIM, &sb, &e) &&
              init_inputs(r.g, &sb, seed, r.given, r.inputs, &e) &&
              load_params(&r, a, &sb, seed, &e) && evaluate(&r, &e) &&
              (!a->out || write_outputs(&r, a->out, &e));
    if (ok)
        print_summary(&r);
    rc = ok ? EXIT_OK : fail(&e);
    run_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- the table */

static const Command commands[] = {
    {"run", cmd_run, "evaluate a model and print its outputs' checksums",
     "usage: coil run MODEL [options]\n"
     "\n"
     "MODEL is a .cir (IR text) or .coil file. Inputs not given are random (floats\n"
     "normal(0,1), integers in the range their uses index), parameters come from their\n"
     "initializers; both are drawn from the seed, so a run is reproducible.\n"
     "\n"
     "options:\n"
     "  --input NAME=FILE.npy  the value of graph input NAME (repeatable)\n"
     "  --weights FILE         parameters from a .safetensors file, by name\n"
     "  --out DIR              write each output to DIR/<output name>.npy\n"
     "  --seed N               seed of random inputs and initializers (default 0)\n"
     "  --dim NAME=N           size of symbolic dimension NAME for random inputs\n"
     "                         (default: from the given inputs, else 2)\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --train                training mode: dropout is active, its masks drawn from\n"
     "                         the seed (default: inference, dropout is the identity)\n"
     "  --interp               evaluate with the reference interpreter (the only engine yet)\n"
     "\n"
     "Prints one line per output (name, type, sum, mean |x|), then the time and FLOPs.\n"},
    {"opt", cmd_opt, "run passes over a model and print the resulting IR",
     "usage: coil opt FILE.cir [--passes=a,b,...]\n"
     "\n"
     "Reads the graph, runs the passes in order (default: verify) and prints the IR.\n"
     "An unknown pass name is a usage error; nothing runs.\n"},
    {"check", cmd_check, "check a model and summarize it: signature, parameters, FLOPs",
     "usage: coil check MODEL [--set NAME=VALUE]... [--dim NAME=N]... [--params]\n"
     "\n"
     "Loads and verifies the model without running it, then prints its inputs, outputs,\n"
     "parameter count and bytes, node count and the FLOPs of one call. Symbolic\n"
     "dimensions take their size from --dim (default 2) for the FLOP count.\n"
     "\n"
     "options:\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --dim NAME=N           size of symbolic dimension NAME (repeatable)\n"
     "  --params               also list every parameter: name, type, initializer\n"},
    {"dump", cmd_dump, "print a model's IR, as text or as a Graphviz graph",
     "usage: coil dump MODEL [--after=PASS | --all] [--passes=a,b,...] [--format=text|dot]\n"
     "                       [--set NAME=VALUE]... [--train]\n"
     "\n"
     "Loads the model (.cir or .coil) and prints it as IR text, which `coil opt` reads\n"
     "back, or with --format=dot as a Graphviz digraph (render it with `dot -Tsvg`).\n"
     "\n"
     "options:\n"
     "  --after PASS           run the pipeline up to PASS and print the graph it made\n"
     "  --all                  print the graph after every pass, each under '// after PASS'\n"
     "  --passes a,b,...       the pipeline (default: none; with --after or --all the\n"
     "                         standard one, verify,decompose,fold,cse,dce)\n"
     "  --format text|dot      IR text (default) or Graphviz\n"
     "  --set NAME=VALUE       override a config constant of a .coil model (repeatable)\n"
     "  --train                training mode: dropout stays (else it is the identity)\n"},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void print_passes(FILE *f)
{
    fprintf(f, "\npasses (coil opt --passes=...):\n");
    for (int i = 0; i < pass_count; i++)
        fprintf(f, "  %-10s %s\n", pass_table[i].name, pass_table[i].help);
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: coil COMMAND [ARGS]   (coil --version, coil --help)\n\n"
               "coil compiles and runs deep-learning models.\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].summary);
    print_passes(f);
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
        printf("coil %s\n", COIL_VERSION);
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
