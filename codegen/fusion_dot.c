/* fusion_dot.c — the fusion plan as a Graphviz picture (`coil dump --after=fuse
 * --format=dot`, the debug directory): a box per kernel in the block clusters of ir/dot.c,
 * a GEMM and its epilogue drawn as one step. Here, not in ir/, because it reads the plan
 * (passes/fuse.h) and the kernels' names (codegen/loop.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/fusion_dot.h"
#include "ir/dot_parts.h"

static const char *const kind_name[FUSE_KIND_COUNT] = {"pointwise", "row", "gemm", "attention",
                                                       "scatter"};
static const char *const kind_fill[FUSE_KIND_COUNT] = {"white", "lightcyan", "khaki", "plum",
                                                       "palegreen"};

/* What the picture of a plan needs per group: its block, its kernel's name, its members
 * in node order. */
typedef struct PlanView {
    const Graph *g;
    const Fusion *f;
    Blocks b;
    int *block;          /* per group */
    const char **kernel; /* per group: the loop kernel's name, NULL (a GEMM, or no program) */
    int *start, *member; /* member[start[grp] .. start[grp + 1]): grp's nodes */
    int *seen;           /* per group (edges) or per node (parameters): a stamp */
    int stamp;
} PlanView;

static void plan_view_free(PlanView *v)
{
    dot_blocks_free(&v->b);
    free(v->block);
    free((void *)v->kernel);
    free(v->start);
    free(v->member);
    free(v->seen);
}

static bool plan_view_make(PlanView *v, const Graph *g, const Fusion *f, const Program *p)
{
    memset(v, 0, sizeof *v);
    v->g = g, v->f = f;
    size_t ng = (size_t)f->ngroup + 2, nn = (size_t)g->nnode + 1;
    v->block = malloc(ng * sizeof *v->block);
    v->kernel = calloc(ng, sizeof *v->kernel);
    v->start = calloc(ng + 1, sizeof *v->start);
    v->member = malloc(nn * sizeof *v->member);
    v->seen = calloc(ng > nn ? ng : nn, sizeof *v->seen);
    if (!dot_blocks_make(g, &v->b) || !v->block || !v->kernel || !v->start || !v->member || !v->seen)
        return false;
    for (int grp = 0; grp < f->ngroup; grp++)
        v->block[grp] = -1;
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] >= 0) {
            int *k = &v->block[f->group[id]];
            *k = v->b.of[id] > *k ? v->b.of[id] : *k;
            v->start[f->group[id] + 1]++;
        }
    for (int grp = 0; grp < f->ngroup; grp++)
        v->start[grp + 1] += v->start[grp];
    int *at = v->seen; /* borrowed: zeroed again below */
    for (int id = 0; id < g->nnode; id++)
        if (f->group[id] >= 0)
            v->member[v->start[f->group[id]] + at[f->group[id]]++] = id;
    memset(v->seen, 0, (ng > nn ? ng : nn) * sizeof *v->seen);
    for (int k = 0; p && k < p->nkernel; k++)
        if (p->kernel[k].group >= 0 && p->kernel[k].group < f->ngroup)
            v->kernel[p->kernel[k].group] = p->kernel[k].name;
    return true;
}

/* The members' ops, "mean sub mul ..." wrapped every few, at most 48 listed. */
static void put_op_list(FILE *f, const PlanView *v, int grp)
{
    int n = v->start[grp + 1] - v->start[grp];
    for (int i = 0; i < n && i < 48; i++) {
        const Node *x = &v->g->node[v->member[v->start[grp] + i]];
        fprintf(f, "%s%s", i == 0 ? "" : i % 6 ? " " : "\\n", op_info[x->op].name);
    }
    if (n > 48)
        fprintf(f, " ... (%d ops)", n);
}

/* "stores %45 f32[B,T,768]" for up to three stored members, then a count. */
static void put_stores(FILE *f, const PlanView *v, int grp)
{
    int shown = 0, more = 0;
    char ty[128];
    for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
        int id = v->member[i];
        if (!v->f->stored[id])
            continue;
        if (shown == 3) {
            more++;
            continue;
        }
        fprintf(f, "%s%%%d %s", shown ? "\\n       " : "\\nstores ", id,
                type_fmt(v->g, &v->g->node[id].type, ty, sizeof ty));
        shown++;
    }
    if (more)
        fprintf(f, "\\n       and %d more", more);
}

/* The parameters and other leaves the group's members read, each once. */
static char *group_notes(PlanView *v, int grp)
{
    Notes no = {0};
    v->stamp++;
    for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
        const Node *x = &v->g->node[v->member[i]];
        for (int j = 0; j < x->nin; j++) {
            int in = x->in[j];
            if (!v->b.folded[in] || v->seen[in] == v->stamp)
                continue;
            v->seen[in] = v->stamp;
            dot_note_operand(&no, v->g, &v->b, v->block[grp], in);
        }
    }
    return dot_notes_take(&no);
}

static void put_group_node(FILE *f, PlanView *v, int grp, const char *indent)
{
    const FuseGroup *G = &v->f->g[grp];
    char ty[256];
    fprintf(f, "%sg%d [shape=box, fillcolor=%s, label=\"", indent, grp,
            G->gemm >= 0 ? "lightsalmon" : kind_fill[G->kind]);
    if (v->kernel[grp])
        fprintf(f, "%s", v->kernel[grp]);
    else
        fprintf(f, "%s (g%d)", kind_name[G->kind], grp);
    if (G->gemm >= 0)
        fputs("  [epilogue]", f);
    fprintf(f, "\\n%s %s", kind_name[G->kind], type_fmt(v->g, &G->space, ty, sizeof ty));
    fputs("\\n", f);
    put_op_list(f, v, grp);
    char *notes = group_notes(v, grp);
    if (notes && *notes)
        fprintf(f, "\\nreads %s", notes);
    free(notes);
    put_stores(f, v, grp);
    fputs("\"];\n", f);
}

/* A GEMM and its epilogue are one step: a cluster of two boxes. */
static void put_group(FILE *f, PlanView *v, int grp)
{
    const FuseGroup *G = &v->f->g[grp];
    if (G->gemm >= 0)
        return; /* drawn with its GEMM */
    if (G->epilogue < 0) {
        put_group_node(f, v, grp, "    ");
        return;
    }
    fprintf(f, "    subgraph cluster_step%d {\n      label=\"GEMM step, epilogue in its tiles\";\n"
               "      style=dashed;\n      color=darkorange;\n", grp);
    put_group_node(f, v, grp, "      ");
    put_group_node(f, v, G->epilogue, "      ");
    fputs("    }\n", f);
}

/* Edges between groups for the buffers one stores and the other reads (views looked
 * through), inputs to their readers, each pair once. */
static void put_plan_edges(FILE *f, PlanView *v)
{
    const Graph *g = v->g;
    const Fusion *fu = v->f;
    for (int grp = 0; grp < fu->ngroup; grp++) {
        v->stamp++;
        for (int i = v->start[grp]; i < v->start[grp + 1]; i++) {
            const Node *x = &g->node[v->member[i]];
            for (int j = 0; j < x->nin; j++) {
                int src = x->in[j];
                while (fu->cls[src] == NC_VIEW)
                    src = g->node[src].in[0];
                int from = fu->group[src];
                if (from == grp || (from < 0 && g->node[src].op != OP_INPUT))
                    continue;
                int key = from >= 0 ? from : fu->ngroup; /* inputs: stamped per node below */
                if (from >= 0 && v->seen[key] == v->stamp)
                    continue;
                if (from >= 0)
                    v->seen[key] = v->stamp;
                bool epi = from >= 0 && fu->g[from].epilogue == grp;
                if (from >= 0)
                    fprintf(f, "  g%d -> g%d%s;\n", from, grp,
                            epi ? " [style=bold, color=darkorange, label=\"epilogue\"]" : "");
                else
                    fprintf(f, "  n%d -> g%d;\n", src, grp);
            }
        }
    }
}

static void put_plan_outputs(FILE *f, const PlanView *v)
{
    const Graph *g = v->g;
    dot_put_outputs(f, g);
    for (int i = 0; i < g->noutput; i++) {
        int src = g->output[i];
        while (v->f->cls[src] == NC_VIEW && v->f->group[src] < 0)
            src = g->node[src].in[0];
        if (v->f->group[src] >= 0)
            fprintf(f, "  g%d -> out%d;\n", v->f->group[src], i);
        else if (g->node[src].op == OP_INPUT)
            fprintf(f, "  n%d -> out%d;\n", src, i);
    }
}

static bool dot_plan(FILE *f, const Graph *g, const Fusion *fu, const Program *p)
{
    PlanView v;
    if (!plan_view_make(&v, g, fu, p)) {
        plan_view_free(&v);
        return false;
    }
    char title[256];
    snprintf(title, sizeof title, "fusion plan of '%s': %d groups (boxes: one kernel each; "
             "orange: a GEMM step with its epilogue)", g->name ? g->name : "graph", fu->ngroup);
    int *start = malloc(((size_t)v.b.nkey + 2) * sizeof *start);
    int *block_at = malloc(((size_t)fu->ngroup + 1) * sizeof *block_at), *ids = NULL;
    for (int o = 0; block_at && o < fu->ngroup; o++)
        block_at[o] = v.block[fu->order[o]]; /* positions in execution order, by block */
    if (!start || !block_at || !(ids = dot_bucket_by_block(fu->ngroup, block_at, v.b.nkey, start))) {
        free(start), free(block_at);
        plan_view_free(&v);
        return false;
    }
    dot_put_header(f, g, title);
    for (int i = 0; i < g->ninput; i++) {
        const Node *n = &g->node[g->input[i]];
        fprintf(f, "  n%d [shape=%s, fillcolor=%s, label=\"", g->input[i], dot_style_input.shape,
                dot_style_input.fill);
        dot_put_escaped(f, node_name(n) ? node_name(n) : "?");
        fputs("\"];\n", f);
    }
    for (int k = 0; k <= v.b.nkey; k++) {
        if (k < v.b.nkey)
            dot_open_cluster(f, "b", k, v.b.key[k], "gray97");
        for (int i = start[k]; i < start[k + 1]; i++)
            put_group(f, &v, fu->order[ids[i]]);
        if (k < v.b.nkey)
            fputs("  }\n", f);
    }
    put_plan_edges(f, &v);
    put_plan_outputs(f, &v);
    fputs("}\n", f);
    free(start), free(block_at), free(ids);
    plan_view_free(&v);
    return true;
}

char *fuse_dot(const Graph *g, const Fusion *f, const Program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    bool ok = dot_plan(out, g, f, p);
    fclose(out);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}
