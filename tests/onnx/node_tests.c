/* node_tests.c — runs the onnx wheel's backend node tests (DIR/test_NAME/model.onnx with
 * test_data_set_0/{input,output}_N.pb) through coil, compiled and interpreted, in worker
 * processes that a crash or timeout cannot take the run down with; prints passed / failed
 * / unsupported per op and in total, and fails when a test of the expected-pass list no
 * longer passes.
 *
 * usage: node_tests NODE_DIR EXPECTED_PASS [--jobs N] [--only SUBSTR] [--update] [-v]
 *        [--no-interp] [--timeout SECONDS]
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coil/coil.h"
#include "frontend/onnx.h"
#include "onnx.pb-c.h"

/* onnx's backend test: numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7) */
#define RTOL 1e-3
#define ATOL 1e-7

/* R_CONST: passes once the graph inputs coil needs constant (axes, shapes, scales that
 * the test feeds as inputs) are fixed at load to the test's own data, as `coil run
 * --const` and coil_options.constants fix them: the model specialised to those values. */
typedef enum { R_PASS, R_CONST, R_FAIL, R_UNSUPPORTED, R_KINDS } Kind;
static const char *kind_name[] = {"pass", "const", "fail", "unsupported"};

typedef struct Test {
    char name[256];
    char op[128];
    Kind kind;
    char why[600];
    int want; /* in the expected list: R_PASS, R_CONST ("NAME const"), or -1 */
} Test;

typedef struct Options {
    const char *dir, *expected;
    int jobs, timeout;
    const char *only;
    bool update, verbose, interp;
} Options;

/* ---------------------------------------------------------------- one test (in a worker) */

static bool read_pb(const char *path, Tensor *t, char *why, size_t n)
{
    Err e = {0};
    if (!onnx_tensor_file(path, t, &e)) {
        snprintf(why, n, "%.590s", e.msg);
        return false;
    }
    return true;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static coil_tensor as_coil(const Tensor *t)
{
    coil_tensor c = {.dtype = (coil_dtype)t->dt, .rank = t->rank, .data = t->data};
    memcpy(c.shape, t->shape, sizeof c.shape);
    return c;
}

/* Whether got matches want at the tolerances, else why not. */
static bool same(const coil_tensor *got, const Tensor *want, char *why, size_t n)
{
    if ((int)got->dtype != (int)want->dt || got->rank != want->rank) {
        snprintf(why, n, "dtype or rank differs (%s rank %d, expected %s rank %d)",
                 coil_dtype_name(got->dtype), got->rank, dtype_info[want->dt].name, want->rank);
        return false;
    }
    for (int i = 0; i < got->rank; i++)
        if (got->shape[i] != want->shape[i]) {
            snprintf(why, n, "dim %d is %lld, expected %lld", i, (long long)got->shape[i],
                     (long long)want->shape[i]);
            return false;
        }
    int64_t count = tensor_numel(want);
    for (int64_t i = 0; i < count; i++) {
        double g = dtype_load(want->dt, got->data, i), w = dtype_load(want->dt, want->data, i);
        bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= ATOL + RTOL * fabs(w);
        if (!ok) {
            snprintf(why, n, "element %lld is %.9g, expected %.9g", (long long)i, g, w);
            return false;
        }
    }
    return true;
}

/* Run the model once (compiled or interpreted) on the inputs and compare every output. */
/* The test's inputs: those coil runs on, and those fixed at load (inlined[k]). */
typedef struct Inputs {
    Tensor in[64];
    int nin;
    const char *const_name[64];
    coil_tensor constant[64];
    Tensor const_data[64];
    int nconst;
} Inputs;

static Kind run_mode(const char *model, bool interp, const Inputs *x, const char *data,
                     char *why, size_t n)
{
    const Tensor *in = x->in;
    int nin = x->nin;
    coil_options opt = {.interpret = interp, .threads = 1, .constant_names = x->const_name,
                        .constants = x->constant, .nconstants = x->nconst};
    coil_error err = {0};
    coil_model *m = coil_load(model, &opt, &err);
    if (!m) {
        snprintf(why, n, "%.590s", err.message);
        return err.code == COIL_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
    }
    Kind kind = R_FAIL;
    int nout = coil_count(m, COIL_OUTPUT);
    coil_tensor cin[64], cout[64] = {{0}};
    if (coil_count(m, COIL_INPUT) != nin || nin > 64 || nout > 64) {
        snprintf(why, n, "the model has %d inputs, the test data %d", coil_count(m, COIL_INPUT), nin);
        goto done;
    }
    for (int i = 0; i < nin; i++)
        cin[i] = as_coil(&in[i]);
    if (!coil_run(m, cin, nin, cout, nout, &err)) {
        snprintf(why, n, "%s: %.570s", interp ? "interpreted" : "compiled", err.message);
        kind = err.code == COIL_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
        goto done;
    }
    kind = R_PASS;
    for (int i = 0; i < nout && kind == R_PASS; i++) {
        char path[4200], diff[300];
        Tensor want;
        snprintf(path, sizeof path, "%s/output_%d.pb", data, i);
        if (!read_pb(path, &want, why, n)) {
            kind = R_UNSUPPORTED;
            break;
        }
        if (!same(&cout[i], &want, diff, sizeof diff)) {
            snprintf(why, n, "%s: output %d (%s): %s", interp ? "interpreted" : "compiled", i,
                     coil_info_at(m, COIL_OUTPUT, i)->name, diff);
            kind = R_FAIL;
        }
        tensor_free(&want);
    }
done:
    for (int i = 0; i < nout; i++)
        coil_tensor_free(&cout[i]);
    coil_free(m);
    return kind;
}

/* A whole file, malloc'd; NULL when it cannot be read. */
static uint8_t *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, cap *= 2);
    fclose(f);
    *len = n;
    return buf;
}

static Onnx__ModelProto *read_model(const char *dir)
{
    char path[4200];
    size_t len;
    snprintf(path, sizeof path, "%.4000s/model.onnx", dir);
    uint8_t *buf = read_bytes(path, &len);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    free(buf);
    return m;
}

/* Which graph input is called name (initializers aside: the order of input_N.pb), or -1. */
static int input_index(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0, k = 0; i < g->n_input; i++) {
        bool init = false;
        for (size_t j = 0; j < g->n_initializer; j++)
            init = init || strcmp(g->initializer[j]->name, g->input[i]->name) == 0;
        if (!init && strcmp(g->input[i]->name, name) == 0)
            return (int)k;
        k += !init;
    }
    return -1;
}

/* The graph inputs coil's message says must be constants ("operand 1 ('axes') must be a
 * constant"), marked in inlined[]; how many were new. */
static int constant_operands(const Onnx__GraphProto *g, const char *msg, bool *inlined)
{
    int found = 0;
    for (const char *p = msg; (p = strstr(p, "operand ")); p++) {
        const char *open = strstr(p, "('"), *close = open ? strstr(open, "')") : NULL;
        if (!open || !close || !strstr(close, "must be a constant") || open - p > 12)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(close - open - 2), open + 2);
        int k = input_index(g, name);
        if (k >= 0 && k < 64 && !inlined[k])
            inlined[k] = true, found++;
    }
    return found;
}

/* Test input k (input_K.pb) into t; false with why (a dtype coil lacks, a sequence). */
static bool read_input(const char *dir, int k, Tensor *t, char *why, size_t n)
{
    char path[4300];
    snprintf(path, sizeof path, "%.4000s/test_data_set_0/input_%d.pb", dir, k);
    return read_pb(path, t, why, n);
}

/* x's constants: the inlined inputs' test data, named as the graph names them. */
static bool fix_inputs(const char *dir, const Onnx__GraphProto *g, const bool *inlined, Inputs *x,
                       char *why, size_t n)
{
    for (int k = 0; k < x->nconst; k++)
        tensor_free(&x->const_data[k]);
    x->nconst = 0;
    for (size_t i = 0; i < g->n_input && i < 64; i++) {
        int k = input_index(g, g->input[i]->name);
        if (k < 0 || !inlined[k])
            continue;
        Tensor *t = &x->const_data[x->nconst];
        if (!read_input(dir, k, t, why, n))
            return false;
        x->const_name[x->nconst] = g->input[i]->name;
        x->constant[x->nconst] = as_coil(t);
        x->nconst++;
    }
    return true;
}

/* Load the model (its errors first: an input's dtype, an op); where coil needs graph inputs
 * constant, again with them fixed at load to the test's data (R_CONST), in inlined[] and
 * x's constants. mp: the model's protobuf, for its input names. */
static Kind load_model(const char *dir, const char *model, const Onnx__ModelProto *mp,
                       bool *inlined, Inputs *x, char *why, size_t n)
{
    Kind kind = R_PASS;
    for (int tries = 0; tries < 4; tries++) {
        coil_error err = {0};
        coil_options opt = {.constant_names = x->const_name, .constants = x->constant,
                            .nconstants = x->nconst};
        coil_model *m = coil_load(model, &opt, &err);
        if (m) {
            coil_free(m);
            return kind;
        }
        snprintf(why, n, "%.590s", err.message);
        if (err.code != COIL_ERR_UNSUPPORTED)
            return R_FAIL;
        int found = mp && mp->graph ? constant_operands(mp->graph, err.message, inlined) : 0;
        if (!found || !fix_inputs(dir, mp->graph, inlined, x, why, n))
            return R_UNSUPPORTED;
        kind = R_CONST;
    }
    return R_UNSUPPORTED;
}

static Kind run_test(const char *dir, bool interp, char *why, size_t n)
{
    char model[4200], data[4200], path[4300];
    snprintf(model, sizeof model, "%.4000s/model.onnx", dir);
    snprintf(data, sizeof data, "%.4000s/test_data_set_0", dir);
    bool inlined[64] = {false};
    Inputs *x = calloc(1, sizeof *x);
    Onnx__ModelProto *mp = read_model(dir);
    Kind loaded = x ? load_model(dir, model, mp, inlined, x, why, n) : R_FAIL;
    Kind kind = loaded == R_PASS || loaded == R_CONST ? R_PASS : loaded;
    for (int k = 0; k < 64 && kind == R_PASS; k++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", data, k);
        if (!file_exists(path))
            break;
        if (inlined[k])
            continue;
        if (!read_input(dir, k, &x->in[x->nin], why, n)) {
            kind = R_UNSUPPORTED; /* a dtype coil does not have, or a sequence */
            break;
        }
        x->nin++;
    }
    if (kind == R_PASS)
        kind = run_mode(model, false, x, data, why, n);
    if (kind == R_PASS && interp)
        kind = run_mode(model, true, x, data, why, n);
    for (int i = 0; x && i < x->nin; i++)
        tensor_free(&x->in[i]);
    for (int i = 0; x && i < x->nconst; i++)
        tensor_free(&x->const_data[i]);
    free(x);
    if (mp)
        onnx__model_proto__free_unpacked(mp, NULL);
    return kind == R_PASS ? loaded : kind;
}

/* A one-node test is that node's op; a function's expansion (test_X_expanded) counts as
 * "Op (expanded)" after its one-node sibling test_X; anything else is "(graph)". */
static void test_op(const Options *o, const char *name, char *op, size_t n)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%.3000s/%.255s", o->dir, name);
    Onnx__ModelProto *m = read_model(dir);
    snprintf(op, n, "(graph)");
    if (m && m->graph && m->graph->n_node == 1)
        snprintf(op, n, "%s", m->graph->node[0]->op_type);
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
    const char *cut = strstr(name, "_expanded");
    if (strcmp(op, "(graph)") != 0 || !cut)
        return;
    char sibling[256];
    snprintf(sibling, sizeof sibling, "%.*s", (int)(cut - name), name);
    test_op(o, sibling, op, n - 12);
    if (strcmp(op, "(graph)") != 0)
        strncat(op, " (expanded)", n - strlen(op) - 1);
}

/* ---------------------------------------------------------------- running them all */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const Test *)a)->name, ((const Test *)b)->name);
}

static Test *list_tests(const Options *o, int *count)
{
    DIR *d = opendir(o->dir);
    if (!d)
        return NULL;
    Test *t = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char model[4300];
        snprintf(model, sizeof model, "%s/%s/model.onnx", o->dir, de->d_name);
        if (strncmp(de->d_name, "test_", 5) != 0 || !file_exists(model) ||
            (o->only && !strstr(de->d_name, o->only)))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            t = realloc(t, (size_t)cap * sizeof *t);
        }
        t[n] = (Test){0};
        snprintf(t[n].name, sizeof t[n].name, "%s", de->d_name);
        n++;
    }
    closedir(d);
    qsort(t, (size_t)n, sizeof *t, by_name);
    *count = n;
    return t;
}

/* The tests run in --jobs worker processes, each taking test numbers on one pipe and
 * answering "KIND\tWHY" on another, many tests per process: LLVM's one-time set-up in a
 * process (its target tables, pass registries, code generator) costs as much as compiling a
 * small model, and a process per test paid it 1,765 times. A crash or a timeout ends only
 * its worker: that test fails with the signal's name and a fresh worker takes the next. */
typedef struct Worker {
    pid_t pid;
    int to, from; /* test numbers to it, results from it; -1 when closed */
    int test;     /* the test it runs, or -1 when idle */
} Worker;

static void serve(const Options *o, const Test *tests, int to, int from)
{
    int index;
    while (read(to, &index, sizeof index) == (ssize_t)sizeof index) {
        char dir[4200], why[600] = "", line[700];
        snprintf(dir, sizeof dir, "%s/%s", o->dir, tests[index].name);
        alarm((unsigned)o->timeout);
        Kind k = run_test(dir, o->interp, why, sizeof why);
        alarm(0);
        for (char *s = why; *s; s++)
            if (*s == '\n' || *s == '\t')
                *s = ' ';
        int len = snprintf(line, sizeof line, "%d\t%s", (int)k, why);
        /* one write, shorter than PIPE_BUF: the parent's one read gets all of it */
        if (write(from, line, (size_t)(len < (int)sizeof line ? len : (int)sizeof line - 1)) < 0)
            break;
    }
    _exit(0);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Fork worker w; the child closes every other worker's pipes, or their ends would keep
 * a dead worker's result pipe open and the parent would never see it end. */
static void spawn(const Options *o, const Test *tests, Worker *w, Worker *all, int nall)
{
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
        perror("pipe");
        exit(2);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        for (int i = 0; i < nall; i++)
            close_fd(&all[i].to), close_fd(&all[i].from);
        close(to[1]), close(from[0]);
        serve(o, tests, to[0], from[1]);
    }
    close(to[0]), close(from[1]);
    *w = (Worker){pid, to[1], from[0], -1};
}

/* Give the worker test `next`, if one is left. A worker that died meanwhile does not
 * take it: its result pipe's end then says how it ended, and that test fails. */
static bool assign(Worker *w, int next, int n)
{
    if (next >= n)
        return false;
    w->test = next;
    ssize_t sent = write(w->to, &next, sizeof next);
    (void)sent;
    return true;
}

/* The worker's answer for its test: "KIND\tWHY", or, when it ended, how it ended. */
static void collect(Worker *w, Test *tests)
{
    Test *t = &tests[w->test];
    char buf[700] = "";
    ssize_t got = read(w->from, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    char *tab = strchr(buf, '\t');
    if (got > 0 && tab) {
        t->kind = (Kind)atoi(buf);
        snprintf(t->why, sizeof t->why, "%s", tab + 1);
        w->test = -1;
        return;
    }
    int status = 0;
    waitpid(w->pid, &status, 0);
    close_fd(&w->to), close_fd(&w->from);
    w->pid = 0, w->test = -1;
    t->kind = R_FAIL;
    if (WIFSIGNALED(status))
        snprintf(t->why, sizeof t->why, "%s", WTERMSIG(status) == SIGALRM ? "timed out"
                 : strsignal(WTERMSIG(status)));
    else
        snprintf(t->why, sizeof t->why, "its worker exited with status %d", WEXITSTATUS(status));
}

static void run_all(const Options *o, Test *tests, int n)
{
    signal(SIGPIPE, SIG_IGN); /* a worker that died is seen at its result pipe's end */
    int nw = o->jobs < n ? o->jobs : n, next = 0, busy = 0;
    Worker *w = calloc((size_t)nw, sizeof *w);
    struct pollfd *fds = calloc((size_t)nw, sizeof *fds);
    for (int i = 0; i < nw; i++)
        w[i] = (Worker){0, -1, -1, -1};
    for (int i = 0; i < nw; i++) {
        spawn(o, tests, &w[i], w, i);
        busy += assign(&w[i], next++, n);
    }
    while (busy) {
        for (int i = 0; i < nw; i++)
            fds[i] = (struct pollfd){w[i].test >= 0 ? w[i].from : -1, POLLIN, 0};
        if (poll(fds, (nfds_t)nw, -1) < 0) {
            if (errno == EINTR)
                continue;
            perror("poll");
            exit(2);
        }
        for (int i = 0; i < nw; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            collect(&w[i], tests), busy--;
            if (next < n && !w[i].pid)
                spawn(o, tests, &w[i], w, nw);
            if (next < n)
                busy += assign(&w[i], next++, n);
        }
    }
    for (int i = 0; i < nw; i++) {
        close_fd(&w[i].to), close_fd(&w[i].from);
        if (w[i].pid)
            waitpid(w[i].pid, NULL, 0);
    }
    free(w), free(fds);
}

/* ---------------------------------------------------------------- the expected list */

/* Lines "NAME" (passes) or "NAME const" (passes with constant operands); # comments. */
static int read_expected(const Options *o, Test *tests, int n)
{
    for (int i = 0; i < n; i++)
        tests[i].want = -1;
    FILE *f = fopen(o->expected, "r");
    if (!f)
        return 0;
    char line[512];
    int listed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\r\n")] = '\0';
        char name[300] = "", tag[32] = "";
        if (sscanf(line, "%299s %31s", name, tag) < 1)
            continue;
        Test key = {0}, *t;
        snprintf(key.name, sizeof key.name, "%.255s", name);
        t = bsearch(&key, tests, (size_t)n, sizeof *tests, by_name);
        if (t)
            t->want = strcmp(tag, "const") == 0 ? R_CONST : R_PASS, listed++;
        else if (!o->only)
            fprintf(stderr, "node_tests: %s lists %s, which is not a test here\n", o->expected, name);
    }
    fclose(f);
    return listed;
}

static bool write_expected(const Options *o, const Test *tests, int n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%.4000s.tmp", o->expected);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return false;
    fprintf(f, "# The ONNX backend node tests (onnx 1.22.0) coil passes, compiled and interpreted;\n"
               "# 'const': passes once the operands coil needs constant (axes, shapes, scales the\n"
               "# test feeds as inputs) are initializers. node_tests.sh fails when one regresses;\n"
               "# node_tests.sh RUNNER --update rewrites this list.\n");
    for (int i = 0; i < n; i++)
        if (tests[i].kind == R_PASS || tests[i].kind == R_CONST)
            fprintf(f, "%s%s\n", tests[i].name, tests[i].kind == R_CONST ? " const" : "");
    return fclose(f) == 0 && rename(tmp, o->expected) == 0;
}

/* Worse than the list says: a pass that now needs constants, or no pass at all. */
static bool regressed(const Test *t)
{
    return (t->want == R_PASS && t->kind != R_PASS) ||
           (t->want == R_CONST && t->kind != R_PASS && t->kind != R_CONST);
}

static bool improved(const Test *t)
{
    return (t->want < 0 && (t->kind == R_PASS || t->kind == R_CONST)) ||
           (t->want == R_CONST && t->kind == R_PASS);
}

/* ---------------------------------------------------------------- the report */

typedef struct Count {
    char key[200];
    int n[R_KINDS];
} Count;

static Count *count_of(Count *c, int *nc, const char *key)
{
    for (int i = 0; i < *nc; i++)
        if (strcmp(c[i].key, key) == 0)
            return &c[i];
    c[*nc] = (Count){0};
    snprintf(c[*nc].key, sizeof c[*nc].key, "%s", key);
    return &c[(*nc)++];
}

static int by_total(const void *a, const void *b)
{
    const Count *x = a, *y = b;
    int tx = x->n[0] + x->n[1] + x->n[2] + x->n[3], ty = y->n[0] + y->n[1] + y->n[2] + y->n[3];
    return tx != ty ? ty - tx : strcmp(x->key, y->key);
}

static int by_unsupported(const void *a, const void *b)
{
    const Count *x = a, *y = b;
    return x->n[R_UNSUPPORTED] != y->n[R_UNSUPPORTED] ? y->n[R_UNSUPPORTED] - x->n[R_UNSUPPORTED]
                                                      : strcmp(x->key, y->key);
}

/* Why a test is unsupported, shortened to the op and reason ("Conv: no converter ..."). */
static void reason_key(const Test *t, char *key, size_t n)
{
    const char *p = strstr(t->why, "cannot import: ");
    if (p) {
        const char *open = strchr(p, '('), *colon = open ? strstr(open, "): ") : NULL;
        const char *comma = open ? strchr(open, ',') : NULL;
        if (open && comma && colon) {
            snprintf(key, n, "%.*s: %.60s", (int)(comma - open - 1), open + 1, colon + 3);
            key[strcspn(key, ";")] = '\0';
            return;
        }
    }
    p = strstr(t->why, ".onnx: ");
    snprintf(key, n, "%.70s", p ? p + 7 : t->why);
}

static void report(const Options *o, Test *tests, int n, double seconds)
{
    Count *ops = calloc((size_t)n + 1, sizeof *ops), *why = calloc((size_t)n + 1, sizeof *why);
    int nops = 0, nwhy = 0, total[R_KINDS] = {0};
    for (int i = 0; i < n; i++) {
        count_of(ops, &nops, tests[i].op)->n[tests[i].kind]++;
        total[tests[i].kind]++;
        if (tests[i].kind == R_UNSUPPORTED) {
            char key[200];
            reason_key(&tests[i], key, sizeof key);
            count_of(why, &nwhy, key)->n[R_UNSUPPORTED]++;
        }
        if (o->verbose && tests[i].kind != R_PASS)
            printf("%-11s %s: %s\n", kind_name[tests[i].kind], tests[i].name, tests[i].why);
    }
    qsort(ops, (size_t)nops, sizeof *ops, by_total);
    printf("\n%-40s %6s %6s %6s %6s\n", "op", "passed", "const", "failed", "unsup.");
    for (int i = 0; i < nops; i++)
        printf("%-40s %6d %6d %6d %6d\n", ops[i].key, ops[i].n[R_PASS], ops[i].n[R_CONST],
               ops[i].n[R_FAIL], ops[i].n[R_UNSUPPORTED]);
    qsort(why, (size_t)nwhy, sizeof *why, by_unsupported);
    printf("\nmost common reasons for unsupported tests:\n");
    for (int i = 0; i < nwhy && i < 25; i++)
        printf("  %4d  %s\n", why[i].n[R_UNSUPPORTED], why[i].key);
    printf("\nonnx node tests: %d passed (%d of them with graph inputs fixed at load, as `coil run "
           "--const` fixes them), %d failed, %d unsupported of %d (%.1f%% passed) in %.1f s\n",
           total[R_PASS] + total[R_CONST], total[R_CONST], total[R_FAIL], total[R_UNSUPPORTED], n,
           n ? 100.0 * (total[R_PASS] + total[R_CONST]) / n : 0.0, seconds);
    free(ops), free(why);
}

/* ---------------------------------------------------------------- main */

static bool parse(int argc, char **argv, Options *o)
{
    *o = (Options){.jobs = 2, .timeout = 60, .interp = true};
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--jobs") == 0 && i + 1 < argc)
            o->jobs = atoi(argv[++i]);
        else if (strcmp(a, "--timeout") == 0 && i + 1 < argc)
            o->timeout = atoi(argv[++i]);
        else if (strcmp(a, "--only") == 0 && i + 1 < argc)
            o->only = argv[++i];
        else if (strcmp(a, "--update") == 0)
            o->update = true;
        else if (strcmp(a, "--no-interp") == 0)
            o->interp = false;
        else if (strcmp(a, "-v") == 0)
            o->verbose = true;
        else if (a[0] != '-' && pos == 0)
            o->dir = a, pos++;
        else if (a[0] != '-' && pos == 1)
            o->expected = a, pos++;
        else
            return false;
    }
    return pos == 2 && o->jobs > 0 && o->timeout > 0;
}

int main(int argc, char **argv)
{
    Options o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: node_tests NODE_DIR EXPECTED_PASS [--jobs N] [--only SUBSTR] "
                        "[--update] [-v] [--no-interp] [--timeout SECONDS]\n");
        return 2;
    }
    int n;
    Test *tests = list_tests(&o, &n);
    if (!tests || n == 0) {
        printf("SKIP: no node tests under %s\n", o.dir);
        return 77;
    }
    for (int i = 0; i < n; i++)
        test_op(&o, tests[i].name, tests[i].op, sizeof tests[i].op);
    int listed = read_expected(&o, tests, n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_all(&o, tests, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    report(&o, tests, n, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    int worse = 0, better = 0;
    for (int i = 0; i < n; i++) {
        if (regressed(&tests[i])) {
            printf("REGRESSION %s (%s in %s): now %s: %s\n", tests[i].name,
                   kind_name[tests[i].want], o.expected, kind_name[tests[i].kind], tests[i].why);
            worse++;
        }
        if (improved(&tests[i])) {
            if (o.verbose || !o.update)
                printf("newly passing (%s): %s\n", kind_name[tests[i].kind], tests[i].name);
            better++;
        }
    }
    printf("%d of the %d listed regressed; %d pass beyond the list%s\n", worse, listed, better,
           better && !o.update ? " (add them: node_tests.sh RUNNER --update)" : "");
    if (o.update && !o.only && !write_expected(&o, tests, n)) {
        fprintf(stderr, "node_tests: cannot write %s: %s\n", o.expected, strerror(errno));
        return 2;
    }
    free(tests);
    return worse ? 1 : 0;
}
