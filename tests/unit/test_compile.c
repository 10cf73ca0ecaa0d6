/* test_compile.c — every op compiled, held against the reference interpreter: each graph in
 * tests/models/ops (the fixtures the interpreter is checked against numpy and PyTorch with)
 * through the standard passes, fusion and lowering, run six ways on the fixture's inputs:
 * the loop evaluator with and without fusion (lowering alone) and after the CUDA backend's
 * passes (attention as one step), the engine with LLVM kernels and coil's GEMMs, the same
 * without fusion, and with OpenBLAS GEMMs on two threads. The interpreter runs the same optimised graph, so composites are compared
 * through the same primitives (their decomposition's rounding is test_oracle's concern). */
#include <dirent.h>
#include <stdlib.h>

#include "check.h"
#include "op_cases.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"

/* Lowering alone: the program through the loop evaluator, after the CPU's passes or the
 * CUDA backend's (attention kept whole, as one step). */
static void run_loop_eval(const Case *c, bool no_fusion, const char *pipeline, Tensor *out)
{
    Err e = {0};
    Graph *g = graph_copy(c->g, &e);
    LowerOptions lo = {.no_fusion = no_fusion};
    Program *p = g && run_passes(&g, pipeline, &e) ? fuse_and_lower(g, &lo, &e) : NULL;
    char how[128];
    snprintf(how, sizeof how, "loop_eval%s%s", no_fusion ? ", no fusion" : "",
             pipeline == pass_pipeline_cuda ? ", CUDA passes" : "");
    Tensor want[16] = {{0}}; /* the interpreter on the same graph: attention whole or not */
    if (p && interp_run(g, c->in, c->params, want, NULL, &e) &&
        loop_eval(p, c->in, c->params, out, &e))
        check_against(c, how, out, want);
    else {
        fprintf(stderr, "%s [loop_eval]: %s\n", c->name, e.msg);
        check_failures++;
    }
    for (int i = 0; i < c->g->noutput; i++)
        tensor_free(&want[i]);
    program_free(p);
    graph_free(g);
}

static void run_compiled(const Case *c, const char *how, CompileOptions o, Tensor *out)
{
    Err e = {0};
    Compiled *cc = compile_graph(c->g, &o, &e);
    if (cc && compiled_run(cc, c->in, c->params, out, &e))
        check_outputs(c, how, out);
    else {
        fprintf(stderr, "%s [%s]: %s\n", c->name, how, e.msg);
        check_failures++;
    }
    compiled_free(cc);
}

static void run_case(const char *dir, const char *kase)
{
    Case c;
    Tensor out[16] = {{0}};
    if (case_load(dir, kase, &c) && c.g->noutput <= 16) {
        run_loop_eval(&c, false, pass_pipeline, out);
        run_loop_eval(&c, true, pass_pipeline, out);
        run_loop_eval(&c, false, pass_pipeline_cuda, out);
        run_compiled(&c, "llvm", (CompileOptions){.threads = 1}, out);
        run_compiled(&c, "llvm, no fusion", (CompileOptions){.threads = 1, .no_fusion = true}, out);
        run_compiled(&c, "llvm, OpenBLAS, 2 threads",
                     (CompileOptions){.threads = 2, .blas_gemm = true}, out);
    }
    case_free(&c);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : FIXTURE_DIR;
    struct dirent **list;
    int n = scandir(dir, &list, is_case_file, alphasort);
    if (n < 0) {
        fprintf(stderr, "cannot read %s (run from the source root)\n", dir);
        return 1;
    }
    if (!cpu_codegen_built())
        printf("note: built without LLVM: the engine runs the loop evaluator\n");
    for (int i = 0; i < n; i++) {
        list[i]->d_name[strlen(list[i]->d_name) - 4] = '\0';
        run_case(dir, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    CHECK(n >= 100);
    printf("%d cases compiled and checked\n", n);
    return check_status();
}
