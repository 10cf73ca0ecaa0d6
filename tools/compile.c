/* compile.c — `coil compile MODEL -o DIR`: compile ahead of time and write a package
 * (runtime/package.h) that `coil run DIR` runs without LLVM's optimiser. */
#include "runtime/package.h"
#include "tools/cli.h"

int cmd_compile(const Command *cmd, Args *a, int argc, char **argv)
{
    const Flag flags[] = {{"-o", .value = &a->out},         {"--emit", .value = &a->emit},
                          {"--dim", .list = &a->dim},       {"--set", .list = &a->set},
                          {"--train", .on = &a->train},     {"--no-fusion", .on = &a->no_fusion}};
    SymSize sizes[argc + 1];
    int rc = parse_args(cmd, flags, sizeof flags / sizeof *flags, argc, argv, a);
    if (rc == EXIT_OK && !a->help)
        rc = check_model_args(cmd, a, sizes);
    if (rc == EXIT_OK && !a->help && !a->out)
        rc = usage_error(cmd, "missing -o DIR, the package to write");
    if (rc != EXIT_OK || a->help)
        return rc != EXIT_OK ? rc : help(cmd);
    Err e = {0};
    SymBind sb;
    CompileOptions co = compile_options(a, 1);
    Graph *g = load_model(a, 0, &e);
    bool sized = g && a->dim.n &&
                 init_symbols(g, NULL, NULL, sizes, a->dim.n, DEFAULT_DIM, &sb, &e);
    Compiled *c = g && err_ok(&e) ? compile_graph(g, &co, &e) : NULL;
    PackageOptions po = {a->emit, sized ? &sb : NULL};
    bool ok = c && c->m && package_write(a->out, c, &co, &po, &e);
    if (c && !c->m && err_ok(&e))
        err_set(&e, ERR_INPUT, "compile: no CPU code generator in this build");
    if (ok)
        printf("wrote %s: %d kernels in %d steps, compiled in %.1f ms (passes %.1f, lowering %.1f, "
               "LLVM %.1f)\n", a->out, c->p->nkernel, c->p->nstep,
               (c->passes_s + c->lower_s + c->llvm_s) * 1e3, c->passes_s * 1e3, c->lower_s * 1e3,
               c->llvm_s * 1e3);
    rc = ok ? EXIT_OK : cli_fail(&e);
    compiled_free(c);
    graph_free(g);
    return rc;
}
