/* test_gpt2_torch.c — examples/gpt2.coil against the same GPT-2 written in PyTorch
 * (tests/models/gpt2/gen.py): same weights from safetensors, same token ids, logits equal
 * at f32 tolerance. Then a perturbed weight must be caught, so the comparison can fail. */
#include <stdlib.h>

#include "check.h"
#include "frontend/frontend.h"
#include "io/npy.h"
#include "io/safetensors.h"

#define DIR "tests/models/gpt2/"

/* gen.py's TINY config. */
static const char *const tiny[] = {"layers=2", "heads=4", "hidden=64", "vocab=97", "context=16"};

/* The interpreter rounds every node to f32; PyTorch's reference is f64 rounded once. */
static const double tol = 1e-5;

/* Largest |got - want| / max(1, |want|) over all logits. */
static double max_error(const Tensor *got, const Tensor *want)
{
    double worst = 0;
    for (int64_t i = 0; i < tensor_numel(want); i++) {
        double w = check_at(want, i), d = fabs(check_at(got, i) - w) / fmax(1, fabs(w));
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    return worst;
}

static bool run(const Graph *g, const Tensor *ids, const Tensor *params, Tensor *logits)
{
    Err e = {0};
    if (interp_run(g, ids, params, logits, NULL, &e))
        return true;
    fprintf(stderr, "interp_run: %s\n", e.msg);
    check_failures++;
    return false;
}

/* Add delta to element 0 of the parameter named name. */
static void perturb(const Graph *g, Tensor *params, const char *name, double delta)
{
    int ids[4096], n = graph_params(g, ids);
    for (int i = 0; i < n && i < 4096; i++)
        if (strcmp(node_name(&g->node[ids[i]]), name) == 0) {
            dtype_store(params[i].dt, params[i].data, 0, check_at(&params[i], 0) + delta);
            return;
        }
    fprintf(stderr, "no parameter %s\n", name);
    check_failures++;
}

int main(void)
{
    ModelOptions opt = {.set = tiny, .nset = sizeof tiny / sizeof tiny[0]};
    Err e = {0};
    Tensor ids = {0}, want = {0}, got = {0};
    Graph *g = model_load("examples/gpt2.coil", &opt, &e);
    int nparam = g ? graph_params(g, NULL) : 0;
    Tensor *params = calloc((size_t)nparam + 1, sizeof *params);
    bool ok = g && safetensors_bind(g, DIR "weights.safetensors", params, &e) &&
              npy_read(DIR "ids.npy", &ids, &e) && npy_read(DIR "logits.npy", &want, &e);
    if (!ok) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    CHECK(nparam == 28);
    if (run(g, &ids, params, &got)) {
        CHECK_SHAPE(&got, "f32[2,11,97]");
        double err = max_error(&got, &want);
        printf("gpt2 vs PyTorch: max relative error %.3g (tolerance %g)\n", err, tol);
        CHECK(err <= tol);
        tensor_free(&got);
    }
    perturb(g, params, "transformer.h.1.mlp.c_proj.bias", 0.05);
    if (run(g, &ids, params, &got)) {
        CHECK(max_error(&got, &want) > 10 * tol);
        tensor_free(&got);
    }
    for (int i = 0; i < nparam; i++)
        tensor_free(&params[i]);
    free(params);
    tensor_free(&ids);
    tensor_free(&want);
    graph_free(g);
    return check_status();
}
