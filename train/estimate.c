/* estimate.c — `coil plan`: a training step's memory, FLOPs and roofline time from the
 * joint graph's plan, before anything runs or any code is generated. */
#include <stdlib.h>

#include "ir/summary.h"
#include "runtime/cpu/peak.h"
#include "runtime/pool.h"
#include "train/train.h"

static int64_t value_bytes(const Graph *g, int id, const SymBind *sb)
{
    int64_t n = type_bytes(&g->node[id].type, sb);
    return n > 0 ? n : 0;
}

/* Forward values (ids up to the loss) the backward reads, seen through views to the
 * values they view (a view costs nothing, what it reads must be kept). */
static int64_t saved_bytes(const Graph *g, int loss, const SymBind *sb)
{
    bool *keep = calloc((size_t)g->nnode + 1, sizeof *keep);
    int64_t total = 0;
    for (int j = loss + 1; keep && j < g->nnode; j++)
        for (int k = 0; k < g->node[j].nin; k++)
            if (g->node[j].in[k] <= loss)
                keep[g->node[j].in[k]] = true;
    for (int i = loss; keep && i >= 0; i--) {
        const Node *n = &g->node[i];
        if (!keep[i])
            continue;
        if (op_info[n->op].flags & OPF_VIEW) {
            keep[n->in[0]] = true;
            continue;
        }
        bool leaf = op_info[n->op].flags & OPF_LEAF;
        total += leaf ? 0 : value_bytes(g, i, sb);
    }
    free(keep);
    return total;
}

static int64_t param_elements(const Graph *g, const SymBind *sb)
{
    int64_t n = 0;
    for (int i = 0; i < g->nnode; i++)
        if (g->node[i].op == OP_PARAM)
            n += value_bytes(g, i, sb) / dtype_info[g->node[i].type.dt].size;
    return n;
}

/* The plan at sizes sb: memory parts and totals (no FLOPs). */
static bool plan_at(const Graph *joint, const TrainOptions *o, const SymBind *sb, TrainPlan *p,
                    Err *e)
{
    MemoryPlan mp;
    CompileOptions co = o->compile;
    co.optimised = true;
    if (!compile_plan(joint, &co, sb, &mp, e))
        return false;
    int64_t outputs = 0;
    for (int i = 1; i < joint->noutput; i++)
        outputs += value_bytes(joint, joint->output[i], sb);
    /* ZeRO (train/zero.h) keeps a rank's shard of the optimizer state (stage 1) and of
     * the accumulated gradients (stage 2); the joint graph's gradients stay whole */
    int64_t world = o->world.size > 1 ? o->world.size : 1;
    int64_t state = optim_state_kinds(&o->opt) * mp.param_bytes;
    int64_t accum = o->accum > 1 ? outputs : 0;
    p->params = mp.param_bytes, p->grads_whole = outputs, p->state_whole = state;
    p->psi = param_elements(joint, sb);
    p->grads = outputs + (o->zero >= 2 ? accum / world : accum);
    p->optimizer = o->zero >= 1 ? state / world : state;
    p->inputs = mp.io_bytes - outputs;
    p->saved = saved_bytes(joint, joint->output[0], sb);
    p->saved = p->saved < mp.arena_bytes ? p->saved : mp.arena_bytes;
    p->workspace = mp.arena_bytes - p->saved;
    p->total = p->params + p->grads + p->optimizer + mp.arena_bytes + p->inputs;
    plan_free(&mp);
    return true;
}

/* The largest B whose plan fits `limit`: the plan is affine in B, so two sizes give the
 * line; the answer is then checked (and stepped down) with the planner itself. */
static int64_t max_batch(const Graph *joint, const TrainOptions *o, SymBind sb, int64_t limit,
                         Err *e)
{
    int b = graph_sym_find(joint, "B", 1);
    if (b < 0 || limit <= 0)
        return -1;
    TrainPlan one, two;
    sb.val[b] = 1;
    if (!plan_at(joint, o, &sb, &one, e))
        return -1;
    sb.val[b] = 2;
    if (!plan_at(joint, o, &sb, &two, e))
        return -1;
    int64_t slope = two.total - one.total;
    if (one.total > limit)
        return 0;
    int64_t best = slope > 0 ? 1 + (limit - one.total) / slope : INT32_MAX;
    for (int tries = 0; tries < 8 && best > 1; tries++) {
        TrainPlan at;
        sb.val[b] = best;
        if (plan_at(joint, o, &sb, &at, e) && at.total <= limit)
            break;
        best = best * 15 / 16;
    }
    return best;
}

bool train_plan(const Graph *model, const TrainOptions *o, int64_t limit, TrainPlan *p, Err *e)
{
    *p = (TrainPlan){.max_batch = -1};
    SymBind sb;
    Graph *joint = train_joint_graph(model, o, &sb, &p->flops, e);
    bool ok = joint && plan_at(joint, o, &sb, p, e) && graph_flops(joint, &sb, &p->hflops, e);
    if (ok) {
        int threads = o->compile.threads > 0 ? o->compile.threads : pool_default_threads();
        p->flops *= (double)o->accum, p->hflops *= (double)o->accum;
        /* this CPU's, measured, unless given (a GPU's always are: see coil plan) */
        p->peak_gflops = o->peak_gflops > 0 ? o->peak_gflops : peak_fma_gflops(threads, 0.2);
        p->bandwidth_gbs = o->bandwidth_gbs > 0 ? o->bandwidth_gbs : peak_copy_gbs(threads, 64u << 20);
        /* traffic: parameters read twice (forward, backward), gradients written and read,
         * the optimizer reading and writing parameters and its state, the arena written
         * and read once per micro-batch */
        double bytes = 2.0 * (double)p->params * (double)o->accum + 2.0 * (double)p->grads +
                       2.0 * (double)(p->params + p->optimizer) +
                       2.0 * (double)(p->saved + p->workspace) * (double)o->accum;
        p->compute_s = p->hflops / (p->peak_gflops * 1e9);
        p->memory_s = bytes / (p->bandwidth_gbs * 1e9);
        p->step_s = p->compute_s > p->memory_s ? p->compute_s : p->memory_s;
        p->max_batch = max_batch(joint, o, sb, limit, e);
    }
    graph_free(joint);
    return ok;
}
