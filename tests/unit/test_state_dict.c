/* test_state_dict.c — the examples' parameter names and shapes are PyTorch's: each model's
 * params, in order, equal the state dict that tests/models/gpt2/gen.py wrote from the same
 * model built with torch.nn (gpt2.names.txt: nanoGPT's GPT-2 small; mlp.names.txt: the
 * seed's OptimizedModel at its production config). */
#include <stdlib.h>

#include "check.h"
#include "frontend/frontend.h"

/* The lines of a text file (malloc'd array of malloc'd strings, newline removed). */
static int read_lines(const char *path, char ***out)
{
    FILE *f = fopen(path, "r");
    char buf[512], **lines = NULL;
    int n = 0;
    while (f && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = 0;
        lines = realloc(lines, sizeof *lines * (size_t)(n + 1));
        lines[n++] = strdup(buf);
    }
    if (f)
        fclose(f);
    *out = lines;
    return n;
}

static void check_model(const char *model, const char *names_file)
{
    ModelOptions opt = {0};
    Err e = {0};
    Graph *g = model_load(model, &opt, &e);
    if (!g) {
        fprintf(stderr, "%s: %s\n", model, e.msg);
        check_failures++;
        return;
    }
    char **want;
    int nwant = read_lines(names_file, &want), nparam = graph_params(g, NULL);
    int *ids = malloc(sizeof *ids * (size_t)(nparam + 1));
    graph_params(g, ids);
    CHECK(nwant > 0);
    if (nparam != nwant)
        fprintf(stderr, "%s: %d parameters, %s lists %d\n", model, nparam, names_file, nwant);
    CHECK(nparam == nwant);
    for (int i = 0; i < nparam && i < nwant; i++) {
        char line[512], ty[256];
        const Node *p = &g->node[ids[i]];
        snprintf(line, sizeof line, "%s: %s", node_name(p), type_fmt(g, &p->type, ty, sizeof ty));
        CHECK_STR(line, want[i]);
    }
    for (int i = 0; i < nwant; i++)
        free(want[i]);
    free(want);
    free(ids);
    graph_free(g);
}

int main(void)
{
    check_model("examples/mlp.coil", "tests/models/gpt2/mlp.names.txt");
    check_model("examples/gpt2.coil", "tests/models/gpt2/gpt2.names.txt");
    return check_status();
}
