/* compile.c — `coil compile MODEL -o DIR`: compile ahead of time and write a package
 * (runtime/package.h): for the CPU, an object `coil run DIR` runs without LLVM's optimiser;
 * for CUDA (--device cuda), the kernels' CUDA C and a cubin NVRTC compiled here, for
 * --arch (no GPU needed). */
#include <string.h>

#include "passes/passes.h"
#include "runtime/package.h"
#include "tools/cli.h"

static int compile_cpu(const Args *a, const Graph *g, const PackageOptions *po, Err *e)
{
    CompileOptions co = compile_options(a, 1);
    Compiled *c = compile_graph(g, &co, e);
    bool ok = c && c->m && package_write(a->out, c, &co, po, e);
    if (c && !c->m && err_ok(e))
        err_set(e, ERR_INPUT, "compile: no CPU code generator in this build");
    if (ok)
        printf("wrote %s: %d kernels in %d steps, compiled in %.1f ms (passes %.1f, lowering %.1f, "
               "LLVM %.1f)\n", a->out, c->p->nkernel, c->p->nstep,
               (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3, c->lower_s * 1e3,
               c->llvm_s * 1e3);
    compiled_free(c);
    return ok ? EXIT_OK : cli_fail(e);
}

static int compile_cuda(const Args *a, const Graph *src, const PackageOptions *po, Err *e)
{
    Graph *g = graph_copy(src, e);
    LowerOptions lo = {.no_fusion = a->no_fusion};
    Program *p = g && run_passes(&g, pass_pipeline_cuda, e) ? loop_lower(g, &lo, e) : NULL;
    const char *arch = a->arch ? a->arch : "sm_90a";
    double nvrtc_s = 0;
    bool ok = p && package_write_cuda(a->out, g, p, arch, a->no_fusion, po, &nvrtc_s, e);
    int gemms = 0;
    for (int s = 0; p && s < p->nstep; s++)
        gemms += p->step[s].kind == STEP_GEMM;
    if (ok)
        printf("wrote %s: %d CUDA kernels and %d GEMM steps for %s, NVRTC %.1f ms%s\n", a->out,
               p->nkernel, gemms, arch, nvrtc_s * 1e3, nvrtc_s == 0 ? " (cached)" : "");
    program_free(p);
    graph_free(g);
    return ok ? EXIT_OK : cli_fail(e);
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
                               s, known[0], known[1], device_is_cuda(a) ? "cuda" : "cpu");
        s += n + (s[n] == ',');
    }
    return EXIT_OK;
}

int cmd_compile(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"-o", .value = &a->out},         {"--emit", .value = &a->emit},
                          {"--dim", .list = &a->dim},       {"--set", .list = &a->set},
                          {"--train", .on = &a->train},     {"--no-fusion", .on = &a->no_fusion},
                          {"--device", .value = &a->device}, {"--arch", .value = &a->arch},
                          {"--mode", .value = &a->mode},    {"--dtype", .value = &a->dtype}};
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
    rc = !g || !err_ok(&e) ? cli_fail(&e) : cuda ? compile_cuda(a, g, &po, &e)
                                                : compile_cpu(a, g, &po, &e);
    graph_free(g);
    return rc;
}
