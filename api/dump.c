/* dump.c — coil_dump: a model's IR at the stages `coil dump --after` prints (the input, the
 * graph after any pass of the device's pipeline, the fusion plan, the loop IR) and the
 * kernels' code `coil compile --emit` writes (LLVM IR, assembly; a GPU's CUDA C, PTX), as a
 * string the caller frees with coil_string_free or written to a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "base/fileio.h"
#include "passes/fuse.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"

/* The stages after the passes: the graph with its fusion plan, the loop IR; then the
 * device's code, by the form its emit takes. */
typedef struct CodeStage {
    const char *stage, *form;
    bool gpu;
} CodeStage;

static const CodeStage code_stage[] = {
    {"llvm-ir", "llvm-ir", false}, {"asm", "asm", false}, {"cuda", "cu", true}, {"ptx", "ptx", true}};
enum { NCODE = sizeof code_stage / sizeof *code_stage };

void coil_string_free(char *s) { free(s); }

/* Whether the comma-separated pass list names pass. */
static bool list_has(const char *list, const char *pass)
{
    size_t n = strlen(pass);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, pass, n) == 0 && (p[n] == ',' || p[n] == '=' || p[n] == 0))
            return true;
    return false;
}

static const CodeStage *code_stage_find(const coil_model *m, const char *stage)
{
    for (int i = 0; i < NCODE; i++)
        if (code_stage[i].gpu == m->device->gpu && strcmp(code_stage[i].stage, stage) == 0)
            return &code_stage[i];
    return NULL;
}

/* "input, verify, ..., fuse, lower, llvm-ir, asm": every stage this model has. */
static const char *stage_list(const coil_model *m, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "input");
    for (const char *p = m->package ? "" : *m->device->passes; *p && used < n;
         p += strcspn(p, ","), p += *p == ',')
        used += (size_t)snprintf(buf + used, n - used, ", %.*s", (int)strcspn(p, ","), p);
    if (used < n)
        used += (size_t)snprintf(buf + used, n - used, ", fuse, lower");
    for (int i = 0; i < NCODE && used < n; i++)
        if (code_stage[i].gpu == m->device->gpu)
            used += (size_t)snprintf(buf + used, n - used, ", %s", code_stage[i].stage);
    return buf;
}

/* ---------------------------------------------------------------- the graph's stages */

typedef struct AfterPass {
    const char *name;
    char *text;
} AfterPass;

static bool take_after_pass(const Graph *g, const Pass *pass, void *ctx)
{
    AfterPass *a = ctx;
    if (strcmp(pass->name, a->name) != 0)
        return true;
    a->text = ir_print(g);
    return false; /* the passes after it are not needed */
}

static char *after_pass(const coil_model *m, const char *pass, Err *e)
{
    Graph *g = graph_copy(m->g, e);
    AfterPass a = {pass, NULL};
    if (g && run_passes_with(&g, *m->device->passes, take_after_pass, &a, e) && !a.text)
        err_set(e, ERR_MEMORY, "out of memory printing the graph after %s", pass);
    graph_free(g);
    return a.text;
}

/* The graph that is compiled (the compiled model's own, max-autotune's padding included;
 * a package's as it is; else the device's passes run now) and its program. */
typedef struct Lowered {
    Graph *owned;
    const Graph *g;
    Program *p;
    Fusion plan;
} Lowered;

static bool lower(const coil_model *m, Lowered *l, Err *e)
{
    memset(l, 0, sizeof *l);
    if (m->compiled)
        l->g = m->compiled->g;
    else if (m->package)
        l->g = m->g;
    else if ((l->owned = graph_copy(m->g, e)) && run_passes(&l->owned, *m->device->passes, e))
        l->g = l->owned;
    LowerOptions lo = {.plan = &l->plan};
    return l->g && (l->p = fuse_and_lower(l->g, &lo, e)) != NULL;
}

static void lowered_free(Lowered *l)
{
    program_free(l->p);
    fuse_free(&l->plan);
    graph_free(l->owned);
}

/* The optimised graph with its fusion plan as comments: it still reads back as IR. */
static char *fusion_text(const Lowered *l, Err *e)
{
    char *ir = ir_print(l->g), *plan = fuse_print(l->g, &l->plan), *both = NULL;
    if (ir && plan && asprintf(&both, "%s%s", ir, plan) < 0)
        both = NULL;
    free(ir);
    free(plan);
    if (!both)
        err_set(e, ERR_MEMORY, "out of memory printing the fusion plan");
    return both;
}

/* ---------------------------------------------------------------- the kernels' code */

static char *read_whole(const char *path, Err *e)
{
    FILE *f = fopen(path, "rb");
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *text = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    bool ok = text && fread(text, 1, (size_t)n, f) == (size_t)n;
    if (f)
        fclose(f);
    if (!ok) {
        err_set(e, text || n < 0 ? ERR_FILE : ERR_MEMORY, "%s: cannot read the code just written",
                path);
        free(text);
        return NULL;
    }
    text[n] = 0;
    return text;
}

static bool emit(const coil_model *m, const Program *p, const CodeStage *cs, const char *path,
                 Err *e)
{
    const Device *dev = m->device;
    EngineReport rep = {.arch = ""};
    if (dev->gpu && m->compiled)
        rep = compiled_report(m->compiled);
    EmitRequest er = {.full_opt = m->mode == MODE_MAX_AUTOTUNE,
                      .arch = rep.arch[0] ? rep.arch : API_GPU_ARCH};
    double seconds;
    if (!dev->ops) {
        err_set(e, ERR_UNSUPPORTED, "cannot compile for %s: %s", dev->name, dev->absent);
        return false;
    }
    return dev->ops->emit(p, &er, cs->form, path, &seconds, e);
}

/* The device's emit writes files: into a private directory, read back, removed. */
static char *emit_text(const coil_model *m, const Program *p, const CodeStage *cs, Err *e)
{
    const char *tmp = getenv("TMPDIR");
    char dir[FILEIO_PATH], path[FILEIO_PATH + 32];
    snprintf(dir, sizeof dir, "%s/coil-dump-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        err_set(e, ERR_IO, "%s: cannot make a temporary directory for the kernels' code", dir);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/kernels.%s", dir, cs->stage);
    char *text = emit(m, p, cs, path, e) ? read_whole(path, e) : NULL;
    unlink(path);
    rmdir(dir);
    return text;
}

/* ---------------------------------------------------------------- the entry points */

static bool check_stage(const coil_model *m, const char *stage, coil_error *err)
{
    char stages[512];
    bool pass = pass_find(stage, strlen(stage)) && list_has(*m->device->passes, stage);
    bool known = strcmp(stage, "input") == 0 || strcmp(stage, "fuse") == 0 ||
                 strcmp(stage, "lower") == 0 || code_stage_find(m, stage) || (pass && !m->package);
    if (known)
        return true;
    return api_fail(err, COIL_ERR_USAGE, "coil_dump: stage '%s'%s; model @%s's stages are %s",
                    stage, pass ? " is a pass, and a package's graph has been through the passes"
                    : " is not one", m->g->name, stage_list(m, stages, sizeof stages));
}

/* Stage's text (malloc'd), or the code written straight to path when path is given. */
static char *stage_text(const coil_model *m, const char *stage, const char *path, Err *e)
{
    if (strcmp(stage, "input") == 0)
        return ir_print(m->g);
    if (strcmp(stage, "fuse") != 0 && strcmp(stage, "lower") != 0 && !code_stage_find(m, stage))
        return after_pass(m, stage, e);
    Lowered l;
    char *text = NULL;
    const CodeStage *cs = code_stage_find(m, stage);
    if (lower(m, &l, e)) {
        if (cs && path)
            text = emit(m, l.p, cs, path, e) ? strdup("") : NULL;
        else if (cs)
            text = emit_text(m, l.p, cs, e);
        else
            text = strcmp(stage, "fuse") == 0 ? fusion_text(&l, e) : loop_print(l.p);
    }
    lowered_free(&l);
    if (!text && err_ok(e))
        err_set(e, ERR_MEMORY, "out of memory printing stage %s", stage);
    return text;
}

static bool dump_args(const coil_model *m, const char *fn, const char *stage, coil_error *err)
{
    api_err_clear(err);
    if (!m || !stage)
        return api_fail(err, COIL_ERR_USAGE, "%s: the %s is NULL", fn, !m ? "model" : "stage");
    return check_stage(m, stage, err);
}

char *coil_dump(const coil_model *model, const char *stage, coil_error *err)
{
    Err e = {0};
    if (!dump_args(model, "coil_dump", stage, err))
        return NULL;
    char *text = stage_text(model, stage, NULL, &e);
    if (!text)
        api_fail_err(err, &e);
    return text;
}

bool coil_dump_file(const coil_model *model, const char *stage, const char *path,
                    coil_error *err)
{
    Err e = {0};
    if (!dump_args(model, "coil_dump_file", stage, err))
        return false;
    if (!path)
        return api_fail(err, COIL_ERR_USAGE, "coil_dump_file: the path is NULL");
    char *text = stage_text(model, stage, code_stage_find(model, stage) ? path : NULL, &e);
    bool ok = text && (code_stage_find(model, stage) || file_write_atomic(path, text, strlen(text), &e));
    free(text);
    return ok || api_fail_err(err, &e);
}
