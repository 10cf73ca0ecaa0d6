/* training.c — the training pipeline's graph stages, in the order training_graph lists
 * them: the loss, the kept buffers, mixed precision, the loss scale, autodiff, sizes and
 * FLOPs, the passes, rematerialisation. The joint graph then goes through pipeline.c like
 * any graph (fusion, lowering, code generation, the memory plan), as train/train_loop.c
 * asks. */
#include <stdlib.h>
#include <string.h>

#include "ir/summary.h"
#include "pipeline/training.h"

static int output_named(const Graph *g, const char *name)
{
    for (int i = 0; i < g->noutput; i++)
        if (strcmp(g->output_name[i], name) == 0)
            return i;
    return -1;
}

/* cross_entropy(first output, targets): targets an i64 input of the logits' shape less
 * the class dimension. */
static int add_cross_entropy(Graph *g, Err *e)
{
    Builder b = builder_make(g, e);
    int logits = g->output[0];
    Type t = g->node[logits].type;
    if (t.rank < 2 || !dtype_info[t.dt].is_float) {
        char buf[128];
        err_set(e, ERR_INPUT, "--loss cross_entropy: the first output of @%s is %s; it must be "
                "float logits with a class dimension", g->name, type_fmt(g, &t, buf, sizeof buf));
        return -1;
    }
    t.rank--, t.dt = DT_I64;
    int targets = b_input(&b, "targets", &t);
    int in[2] = {logits, targets};
    return b_op(&b, OP_CROSS_ENTROPY, in, 2, NULL, 0, NULL);
}

/* The outputs become the loss, then the buffers' updates ("update.<buffer>", which
 * autodiff moves into the buffers' slots); the rest are dropped. */
static void keep_buffer_updates(Graph *g, int loss)
{
    int n = 1, kept[g->noutput + 1];
    const char *names[g->noutput + 1];
    for (int i = 0; i < g->noutput; i++) {
        const char *name = g->output_name[i];
        bool update = strncmp(name, "update.", 7) == 0;
        for (int p = 0; update && p < g->nnode; p++) {
            const Node *b = &g->node[p];
            if (param_is_buffer(b) && strcmp(node_name(b), name + 7) == 0)
                kept[n] = g->output[i], names[n++] = name;
        }
    }
    kept[0] = loss, names[0] = "loss";
    memcpy(g->output, kept, (size_t)n * sizeof *kept);
    memcpy(g->output_name, names, (size_t)n * sizeof *names);
    g->noutput = n;
}

Graph *training_loss_graph(const Graph *model, const char *loss, Err *e)
{
    Graph *g = graph_copy(model, e);
    if (!g)
        return NULL;
    int value = -1, at = output_named(g, "loss");
    if (!loss && at >= 0)
        value = g->output[at];
    else if (!loss)
        err_set(e, ERR_INPUT, "@%s has no output named 'loss'; give --loss cross_entropy to "
                "train its first output against targets", g->name);
    else if (strcmp(loss, "cross_entropy") == 0)
        value = add_cross_entropy(g, e);
    else
        err_set(e, ERR_USAGE, "--loss %s: expected cross_entropy (or a model output 'loss')", loss);
    if (value < 0) {
        if (err_ok(e))
            err_set(e, ERR_INPUT, "@%s: cannot make its training loss", g->name);
        graph_free(g);
        return NULL;
    }
    keep_buffer_updates(g, value);
    return g;
}

/* A leaf the joint graph keeps though nothing reads it: any but an integer buffer. */
static bool trained_or_float(const Node *n)
{
    return n->op != OP_PARAM || !param_is_buffer(n) || dtype_info[n->type.dt].is_float;
}

/* f16: the loss times an input "loss_scale", so the backward's small gradients stay above
 * f16's smallest normal; the optimizer divides it back out. */
static Graph *scale_loss(Graph *g, Err *e)
{
    Builder b = builder_make(g, e);
    Type scalar = type_scalar(DT_F32);
    int s = b_input(&b, "loss_scale", &scalar);
    int scaled = b_binary(&b, OP_MUL, g->output[0], s);
    if (scaled < 0) {
        graph_free(g);
        return NULL;
    }
    g->output[0] = scaled;
    return g;
}

/* After autodiff under a loss scale: the buffers' new values times the scale too, as the
 * gradients are, since the optimizer divides every slot by it (cpu_optim.h's
 * ROLE_BUFFER). */
static Graph *scale_buffer_updates(Graph *g, Err *e)
{
    Builder b = builder_make(g, e);
    int s = -1;
    for (int i = 0; i < g->ninput && s < 0; i++)
        if (strcmp(node_name(&g->node[g->input[i]]), "loss_scale") == 0)
            s = g->input[i];
    for (int i = 1; s >= 0 && i < g->noutput; i++)
        if (strncmp(g->output_name[i], "update.", 7) == 0)
            g->output[i] = b_binary(&b, OP_MUL, g->output[i], s);
    if (err_ok(e))
        return g;
    graph_free(g);
    return NULL;
}

/* g replaced by a stage's result (NULL: g freed too). */
static Graph *replace(Graph *g, Graph *next)
{
    graph_free(g);
    return next;
}

/* The symbols bound to the stages' sizes (defaults for the rest), and the FLOPs there. */
static bool bind_sizes(const Graph *g, const TrainingStages *t, SymBind *sb, double *flops,
                       Err *e)
{
    bool *given = calloc((size_t)g->ninput + 1, sizeof *given);
    bool ok = given && init_symbols(g, NULL, given, t->sizes, t->nsizes, 1, sb, e) &&
              graph_flops(g, sb, flops, e);
    if (!given)
        err_set(e, ERR_MEMORY, "out of memory");
    free(given);
    return ok;
}

Graph *training_graph(const Graph *model, const TrainingStages *t, SymBind *sb, double *flops,
                      Err *e)
{
    bool low = t->precision && t->precision != DT_F32;
    Graph *g = training_loss_graph(model, t->loss, e);                    /* loss */
    /* integer buffers nothing reads (batch norm's num_batches_tracked) leave: training
     * keeps f32 parameters and buffers, and the run keeps these as they are (run.h) */
    if (g)
        g = replace(g, pass_dce_leaves(g, trained_or_float, e));           /* kept buffers */
    if (g && low)
        g = replace(g, pass_mixed_precision(g, t->precision, e));          /* precision */
    if (g && t->precision == DT_F16)
        g = scale_loss(g, e);                                              /* loss scale */
    if (g)
        g = replace(g, autodiff(g, NULL, e));                              /* autodiff */
    if (g && t->precision == DT_F16)
        g = scale_buffer_updates(g, e);                                    /* buffers too */
    bool ok = g && bind_sizes(g, t, sb, flops, e) &&                       /* sizes, FLOPs */
              run_passes(&g, t->passes ? t->passes : pass_pipeline, e);   /* the passes */
    /* the passes first, then the cut: CSE afterwards would merge each recomputation with
     * the forward value it repeats */
    Graph *joint = ok ? pass_remat(g, t->remat, sb, e) : NULL;             /* remat */
    graph_free(g);
    return joint;
}
