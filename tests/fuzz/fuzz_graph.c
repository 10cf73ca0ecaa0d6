/* fuzz_graph.c — libFuzzer harness for the compiler below the graph: the input's first 8
 * bytes seed tests/unit/differential.h's random graph (the ops lowering handles, random
 * shapes, a symbolic batch of 1 to 4), the 9th chooses how it runs. The graph goes through
 * the passes (verified and round-tripped as text), fusion and lowering, then the engine
 * with the loop evaluator, fused and not, must agree with the interpreter; the CUDA
 * pipeline lowers it too, its program run by the loop evaluator must agree as well, and its
 * CUDA C (with the autotuner's variants of each kernel) must be emitted (no NVRTC). With
 * COIL_FUZZ_LLVM=1 in the environment, an input whose 9th byte has its top bits set is
 * also compiled by LLVM and run (hundreds of ms under ASan, against milliseconds for the
 * rest: for long runs, not ctest's). A lowering that never ends is a timeout. */
#include <stdint.h>

#include "codegen/cuda/cuda.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"
#include "pipeline/pipeline.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/unit/differential.h"

#define LLVM_BITS 0xe0

static void run_compiled(const Graph *g, const Data *d, CompileOptions o, const char *how,
                         uint64_t seed)
{
    Err e = {0};
    Tensor got[2] = {{0}};
    Compiled *c = compile_optimised(graph_copy(g, &e), &o, &e);
    if (!c || !compiled_run(c, d->in, d->params, got, &e))
        fuzz_bug(how, e.msg);
    if (!outputs_match(g, d, got, how, seed))
        fuzz_bug("a compiled result differs from the interpreter's", how);
    compiled_free(c);
}

/* The CUDA backend's passes and lowering (g is the graph before any pass), its program
 * run by the loop evaluator against the interpreter's values, and its CUDA C. */
static void check_cuda(Graph *g, const Data *d, uint64_t seed)
{
    Err e = {0};
    if (!run_passes(&g, pass_pipeline_cuda, &e))
        fuzz_bug("the CUDA passes fail on a valid graph", e.msg);
    Program *p = fuse_and_lower(g, NULL, &e);
    if (!p)
        fuzz_bug("the CUDA pipeline's graph does not lower", e.msg);
    Tensor got[2] = {{0}};
    if (!loop_eval(p, d->in, d->params, got, &e))
        fuzz_bug("the loop evaluator fails on the CUDA program", e.msg);
    if (!outputs_match(g, d, got, "CUDA program, loop evaluator", seed))
        fuzz_bug("the CUDA program differs from the interpreter", NULL);
    char *src = cuda_source(p, &e);
    if (!src)
        fuzz_bug("no CUDA C for a lowered program", e.msg);
    free(src);
    for (int k = 0; k < p->nkernel; k++) {
        char *v = cuda_variants_source(p, k, &e);
        if (!v)
            fuzz_bug("no CUDA C for a kernel's variants", e.msg);
        free(v);
    }
    program_free(p);
    graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = 0;
    for (size_t i = 0; i < 8 && i < size; i++)
        seed |= (uint64_t)data[i] << (8 * i);
    uint8_t how = size > 8 ? data[8] : 0;
    Err e = {0};
    Graph *g = random_graph(seed, &e);
    if (!g)
        fuzz_bug("the generator made no graph", e.msg);
    Graph *before = graph_copy(g, &e);
    if (!before || !run_passes(&g, pass_pipeline, &e))
        fuzz_bug("the passes fail on a valid graph", e.msg);
    fuzz_check_graph(g);
    Data d = {0};
    if (!data_make(g, seed, &d, &e))
        fuzz_bug("the interpreter cannot run the graph", e.msg);
    int threads = 1 + (how & 1);
    run_compiled(g, &d, (CompileOptions){.threads = threads, .no_llvm = true}, "loop evaluator",
                 seed);
    run_compiled(g, &d, (CompileOptions){.threads = threads, .no_llvm = true, .no_fusion = true},
                 "loop evaluator, no fusion", seed);
    static int llvm = -1;
    if (llvm < 0)
        llvm = getenv("COIL_FUZZ_LLVM") && strcmp(getenv("COIL_FUZZ_LLVM"), "1") == 0;
    if (llvm && (how & LLVM_BITS) == LLVM_BITS)
        run_compiled(g, &d, (CompileOptions){.threads = threads, .no_fusion = (how & 2) != 0},
                     "llvm", seed);
    check_cuda(before, &d, seed);
    data_free(g, &d);
    graph_free(g);
    return 0;
}
