/* test_differential.c — random graphs, compiled and interpreted: seeded graphs of the ops
 * lowering handles (pointwise with broadcasting, where, cast, reductions, matmul, views,
 * concat, gather, softmax, layer_norm), on random shapes with a symbolic batch, each
 * compiled three ways (fused LLVM kernels with coil's GEMMs, no fusion, the loop
 * evaluator) and held against the interpreter on the same optimised graph. A failure
 * prints the seed and the graph's IR, so it reproduces with `coil run`.
 * usage: test_differential [COUNT [FIRST_SEED]] */
#include <stdlib.h>

#include "check.h"
#include "differential.h"
#include "passes/passes.h"
#include "pipeline/pipeline.h"

static bool run_compiled(const Graph *g, const Data *d, CompileOptions o, const char *how,
                         uint64_t seed)
{
    Err e = {0};
    Tensor got[2] = {{0}};
    Compiled *c = compile_optimised(graph_copy(g, &e), &o, &e);
    bool ok = c && compiled_run(c, d->in, d->params, got, &e);
    if (!ok)
        fprintf(stderr, "seed %llu [%s]: %s\n", (unsigned long long)seed, how, e.msg);
    ok = ok && outputs_match(g, d, got, how, seed);
    compiled_free(c);
    return ok;
}

/* One seed: false (and the graph printed) when any way of running it disagrees. */
static bool check_seed(uint64_t seed, int *ops)
{
    Err e = {0};
    Graph *g = random_graph(seed, &e);
    if (!g || !run_passes(&g, pass_pipeline, &e)) {
        fprintf(stderr, "seed %llu: cannot build the graph: %s\n", (unsigned long long)seed, e.msg);
        graph_free(g);
        return false;
    }
    *ops += g->nnode;
    Data d = {0};
    bool ok = data_make(g, seed, &d, &e);
    if (!ok)
        fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, e.msg);
    ok = ok && run_compiled(g, &d, (CompileOptions){.threads = 2}, "llvm", seed);
    ok = ok && run_compiled(g, &d, (CompileOptions){.threads = 1, .no_fusion = true},
                            "llvm, no fusion", seed);
    ok = ok && run_compiled(g, &d, (CompileOptions){.threads = 1, .no_llvm = true},
                            "loop evaluator", seed);
    if (!ok) {
        char *text = ir_print(g);
        fprintf(stderr, "%s\n", text ? text : "");
        free(text);
    }
    data_free(g, &d);
    graph_free(g);
    return ok;
}

/* Graphs by default; a quarter under the sanitizers, where each costs 3-4 times as much
 * and fuzz_graph (make test-fuzz) draws random graphs of its own. */
#ifdef __SANITIZE_ADDRESS__
#define DEFAULT_COUNT 50
#else
#define DEFAULT_COUNT 200
#endif

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : DEFAULT_COUNT, ops = 0, failed = 0;
    uint64_t first = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    for (uint64_t seed = first; seed < first + (uint64_t)count; seed++)
        failed += !check_seed(seed, &ops);
    printf("%d random graphs (%d nodes after the passes): %d disagree\n", count, ops, failed);
    CHECK(failed == 0);
    return check_status();
}
