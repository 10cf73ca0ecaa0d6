/* compile.c — `coil compile MODEL -o DIR`: compile ahead of time and write a package
 * (io/package.h): for the CPU, an object `coil run DIR` runs without LLVM's optimiser;
 * for CUDA (--device cuda), the kernels' CUDA C and a cubin NVRTC compiled here, for
 * --arch (no GPU needed). --json reports the package and its files as one JSON object. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "io/package.h"
#include "passes/fuse.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/stage_dump.h"
#include "tools/cli.h"

/* What compiling made and took, for the report. */
typedef struct Built {
    const char *arch;  /* cuda: the GPU architecture; NULL for the CPU */
    int kernels, steps, gemm_steps;
    double passes_s, lower_s, codegen_s; /* codegen: LLVM, or NVRTC (0: from its cache) */
} Built;

static bool compile_cpu(const Args *a, const Graph *g, const PackageOptions *po, Built *b,
                        Err *e)
{
    CompileOptions co = compile_options(a, 1);
    Compiled *c = compile_graph(g, &co, e);
    bool ok = c && c->generated && package_write(a->out, c, &co, po, e);
    if (c && !c->generated && err_ok(e))
        err_set(e, ERR_INPUT, "compile: no CPU code generator in this build");
    for (int s = 0; ok && s < c->p->nstep; s++)
        b->gemm_steps += c->p->step[s].kind == STEP_GEMM;
    if (ok) {
        b->kernels = c->p->nkernel, b->steps = c->p->nstep;
        b->passes_s = c->passes_s, b->lower_s = c->lower_s, b->codegen_s = c->llvm_s;
    }
    compiled_free(c);
    return ok;
}

static bool compile_cuda(const Args *a, const Graph *src, const PackageOptions *po, Built *b,
                         Err *e)
{
    double t0 = clock_seconds();
    Graph *g = graph_copy(src, e);
    CompileDebug *cd = g ? compile_debug_open(g, NULL) : NULL; /* COIL_DEBUG_DIR */
    Fusion f = {0};
    LowerOptions lo = {.no_fusion = a->no_fusion, .plan = cd ? &f : NULL};
    compile_debug_graph(cd, "input", g);
    compile_debug_passes_start(cd);
    bool passed = g && run_passes_with(&g, pass_pipeline_cuda, cd ? compile_debug_after_pass : NULL,
                                       cd, e);
    double t1 = clock_seconds();
    Program *p = passed ? fuse_and_lower(g, &lo, e) : NULL;
    b->passes_s = t1 - t0, b->lower_s = clock_seconds() - t1;
    b->arch = a->arch ? a->arch : "sm_90a";
    if (p) {
        compile_debug_lowered(cd, g, &f, p);
        compile_debug_cuda(cd, p);
    }
    fuse_free(&f);
    compile_debug_free(cd);
    EmitRequest er = {.arch = b->arch, .full_opt = po->full_opt};
    bool ok = p && package_write_program(a->out, args_device(a), g, p, &er, a->no_fusion, po,
                                         &b->codegen_s, e);
    for (int s = 0; ok && s < p->nstep; s++)
        b->gemm_steps += p->step[s].kind == STEP_GEMM;
    if (ok)
        b->kernels = p->nkernel, b->steps = p->nstep;
    program_free(p);
    graph_free(g);
    return ok;
}

static void print_built(const char *dir, const Built *b)
{
    if (b->arch)
        printf("wrote %s: %d CUDA kernels and %d GEMM steps for %s, NVRTC %.1f ms%s\n", dir,
               b->kernels, b->gemm_steps, b->arch, b->codegen_s * 1e3,
               b->codegen_s == 0 ? " (cached)" : "");
    else
        printf("wrote %s: %d kernels in %d steps, compiled in %.1f ms (passes %.1f, lowering "
               "%.1f, LLVM %.1f)\n", dir, b->kernels, b->steps,
               (b->passes_s + b->lower_s + b->codegen_s) * 1e3, b->passes_s * 1e3,
               b->lower_s * 1e3, b->codegen_s * 1e3);
}

/* ---------------------------------------------------------------- --json */

/* dir/manifest.json, whole (malloc'd; *len its bytes). */
static char *read_manifest(const char *dir, size_t *len, Err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "rb");
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *text = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    bool ok = text && fread(text, 1, (size_t)n, f) == (size_t)n;
    if (f)
        fclose(f);
    if (!ok) {
        err_set(e, ERR_INPUT, "%s: cannot read the manifest just written", path);
        free(text);
        return NULL;
    }
    *len = (size_t)n;
    return text;
}

static const char *manifest_string(const Json *m, const char *key)
{
    const Json *v = json_get(m, key);
    return v && v->kind == JSON_STRING ? v->s : NULL;
}

/* The package's files as its manifest lists them, the manifest last. */
static void json_files(JsonWriter *w, const Json *m, size_t manifest_bytes)
{
    const Json *files = json_get(m, "files"), *bytes;
    json_key(w, "files");
    json_begin_array(w);
    for (int i = 0; files && files->kind == JSON_OBJECT && i < files->n; i++) {
        json_begin_object(w);
        json_field_string(w, "name", files->key[i]);
        bytes = json_get(&files->item[i], "bytes");
        json_field_int(w, "bytes", bytes && bytes->is_int ? bytes->i : -1);
        json_end_object(w);
    }
    json_begin_object(w);
    json_field_string(w, "name", "manifest.json");
    json_field_int(w, "bytes", (int64_t)manifest_bytes);
    json_end_object(w);
    json_end_array(w);
}

static void json_built(JsonWriter *w, const Built *b)
{
    json_field_int(w, "kernels", b->kernels);
    json_field_int(w, "steps", b->steps);
    json_field_int(w, "gemm_steps", b->gemm_steps);
    json_field_double(w, "compile_ms", (b->passes_s + b->lower_s + b->codegen_s) * 1e3);
    json_field_double(w, "passes_ms", b->passes_s * 1e3);
    json_field_double(w, "lowering_ms", b->lower_s * 1e3);
    json_field_string(w, "codegen", b->arch ? "NVRTC" : "LLVM");
    json_field_double(w, "codegen_ms", b->codegen_s * 1e3);
    if (b->arch)
        json_field_bool(w, "codegen_cached", b->codegen_s == 0);
}

/* One object: the package (its manifest's model, device and target, its files and their
 * sizes) and what compiling it made and took. */
static bool print_json(const char *dir, const Built *b, Err *e)
{
    size_t len = 0;
    char *text = read_manifest(dir, &len, e);
    Arena *arena = text ? arena_new() : NULL;
    const Json *m = arena ? json_parse(arena, text, len, "manifest.json", e) : NULL;
    JsonWriter w;
    json_writer_init(&w, stdout);
    if (m) {
        json_begin_object(&w);
        json_field_string(&w, "package", dir);
        json_field_string(&w, "model", manifest_string(m, "model"));
        json_field_string(&w, "device", manifest_string(m, "device"));
        json_field_string(&w, "target", manifest_string(m, "target"));
        json_built(&w, b);
        json_files(&w, m, len);
        json_end_object(&w);
    }
    bool ok = m && json_writer_done(&w);
    if (m && !ok)
        err_set(e, ERR_INPUT, "cannot write the JSON report to stdout");
    arena_free(arena);
    free(text);
    return ok;
}

/* Each item of --emit (comma-separated) is one the device's package can write: the CPU's
 * llvm-ir and asm, CUDA's cuda (its C++, written always) and ptx. */
static int check_emit(const Command *cmd, const Args *a)
{
    static const char *const cpu[] = {"llvm-ir", "asm", NULL}, *const cuda[] = {"cuda", "ptx", NULL};
    const char *const *known = device_is_cuda(a) ? cuda : cpu;
    for (const char *s = a->emit; s && *s;) {
        size_t n = strcspn(s, ",");
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++)
            ok = strlen(known[i]) == n && strncmp(s, known[i], n) == 0;
        if (!ok)
            return usage_error(cmd, "--emit: '%.*s' is not one of %s,%s for --device %s", (int)n,
                               s, known[0], known[1], args_device(a)->name);
        s += n + (s[n] == ',');
    }
    return EXIT_OK;
}

int cmd_compile(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"-o", .value = &a->out},         {"--emit", .value = &a->emit},
                          {"--dim", .list = &a->dim},       {"--set", .list = &a->set},
                          {"--const", .list = &a->consts},
                          {"--train", .on = &a->train},     {"--no-fusion", .on = &a->no_fusion},
                          {"--device", .value = &a->device}, {"--arch", .value = &a->arch},
                          {"--mode", .value = &a->mode},    {"--dtype", .value = &a->dtype},
                          {"--json", .on = &a->json}};
    SymSize sizes[argc + 1];
    int rc = parse_args(cmd, flags, sizeof flags / sizeof *flags, argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && !a->help && !a->out)
        rc = usage_error(cmd, "missing -o DIR, the package to write");
    bool cuda = device_is_cuda(a);
    if (rc == EXIT_OK && !a->help)
        rc = check_device(cmd, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_emit(cmd, a);
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    SymBind sb;
    Graph *g = load_model(a, 0, &e);
    bool sized = g && a->dim.n &&
                 init_symbols(g, NULL, NULL, sizes, a->dim.n, DEFAULT_DIM, &sb, &e);
    PackageOptions po = {a->emit, sized ? &sb : NULL,
                         a->mode && strcmp(a->mode, "max-autotune") == 0};
    Built b = {0};
    bool ok = g && err_ok(&e) &&
              (cuda ? compile_cuda(a, g, &po, &b, &e) : compile_cpu(a, g, &po, &b, &e)) &&
              (!a->json || print_json(a->out, &b, &e));
    if (ok && !a->json)
        print_built(a->out, &b);
    rc = ok ? EXIT_OK : cli_fail(&e);
    graph_free(g);
    return rc;
}
