/* memory_plan.c — the memory plan: an offset in one arena for every temporary of a Program, from
 * its lifetime in steps, so peak memory is known before anything runs.
 *
 * Two temporaries may share bytes when their lifetimes [first, last] do not overlap
 * (inclusive: a step reads its operands while it writes its result). Placement is greedy
 * best-fit, "greedy by size for offset calculation" (Pisarchyk and Lee, "Efficient Memory
 * Management for Deep Neural Net Inference", 2020; TFLite's arena planner): blocks in
 * decreasing size, each into the smallest gap that holds it between the blocks already
 * placed that it conflicts with, else above the highest of them. That order is close to
 * optimal but not always optimal, even on a chain (sizes 10, 8, 9, 10 give 27 where 19
 * will do), so two more orders are tried and the smallest arena kept: first use with
 * two-sided placement (a block whose gap reaches the target size goes to the gap's top,
 * so along a chain blocks alternate between the arena's two ends: optimal there), and
 * decreasing size with two-sided placement. Trying stops once a plan reaches the lower
 * bound, the most bytes live at any one step. In-place updates are lowering's decision
 * (a kernel storing into the buffer it loads), so the planner needs only intervals. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/cpu/cpu_engine.h"

#define PLAN_ALIGN 64 /* the CPU's: a cache line, and the widest vector (AVX-512) */

typedef struct Block {
    int buf;
    int first, last;
    int64_t size, offset;
} Block;

void plan_free(MemoryPlan *plan)
{
    if (!plan)
        return;
    free(plan->offset);
    memset(plan, 0, sizeof *plan);
}

static const char *sym_name(const Program *p, uint32_t syms)
{
    int s = __builtin_ctz(syms);
    return p->graph && s < p->graph->nsym ? p->graph->sym[s] : "?";
}

/* Bytes of buffer b at these symbol values. */
static bool buffer_bytes(const Program *p, int b, const SymBind *sb, int64_t *out, Err *e)
{
    const Buffer *buf = &p->buf[b];
    uint32_t unbound = 0;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if ((buf->numel.syms >> s & 1) && !sb->known[s])
            unbound |= 1u << s;
    if (unbound) {
        err_set(e, ERR_INPUT, "buffer '%s': symbol '%s' has no value (not bound by the inputs)",
                buf->name, sym_name(p, unbound));
        return false;
    }
    int64_t n = buf->numel.k;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        for (int times = (buf->numel.syms >> s & 1) + (buf->numel.sq >> s & 1); times > 0; times--)
            if (n >= 0 && __builtin_mul_overflow(n, sb->val[s], &n))
                n = -1;
    if (n < 0 || __builtin_mul_overflow(n, (int64_t)dtype_info[buf->dt].size, out) ||
        *out > (INT64_C(1) << 48)) {
        err_set(e, ERR_INPUT, "buffer '%s' is too large (or negative) at these sizes", buf->name);
        return false;
    }
    return true;
}

/* The temporaries as blocks: size rounded up to the alignment, lifetime checked. */
static bool temp_blocks(const Program *p, const SymBind *sb, int64_t align, Block *blk, int *nblk,
                        Err *e)
{
    *nblk = 0;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        if (buf->kind != BUF_TEMP)
            continue;
        if (buf->first < 0 || buf->first >= p->nstep || buf->last >= p->nstep) {
            err_set(e, ERR_INPUT, "temporary '%s': lifetime [%d, %d] is outside the %d steps",
                    buf->name, buf->first, buf->last, p->nstep);
            return false;
        }
        int64_t bytes;
        if (!buffer_bytes(p, b, sb, &bytes, e))
            return false;
        /* written and never read still needs its bytes while its step runs */
        int last = buf->last < buf->first ? buf->first : buf->last;
        int64_t size = (bytes + align - 1) / align * align;
        blk[(*nblk)++] = (Block){b, buf->first, last, size, 0};
    }
    return true;
}

/* Most bytes live at any one step: no plan can do better. */
static int64_t lower_bound(const Block *blk, int n, int nstep, Err *e)
{
    int64_t *delta = calloc((size_t)nstep + 1, sizeof *delta), live = 0, most = 0;
    if (!delta) {
        err_set(e, ERR_MEMORY, "out of memory planning %d temporaries", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        delta[blk[i].first] += blk[i].size;
        delta[blk[i].last + 1] -= blk[i].size;
    }
    for (int s = 0; s < nstep; s++) {
        live += delta[s];
        most = live > most ? live : most;
    }
    free(delta);
    return most;
}

static bool overlap(const Block *a, const Block *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* Place x among placed[0..n) (sorted by offset): into the smallest gap between the blocks
 * it conflicts with that holds it (the space up to `top`, the target arena size, counts as
 * a gap), else above the highest of them. Two-sided placement puts a block at the top of
 * a gap that reaches `top`: along a chain, blocks then alternate between the arena's two
 * ends, which is optimal there. */
static int64_t best_fit(const Block *x, Block *const *placed, int n, int64_t top, bool two_sided)
{
    int64_t end = 0, best = -1, best_gap = INT64_MAX;
    for (int i = 0; i <= n; i++) {
        const Block *c = i < n ? placed[i] : NULL;
        if (c && !overlap(x, c))
            continue;
        int64_t gap_top = c ? c->offset : top, gap = gap_top - end;
        if (gap >= x->size && gap < best_gap) {
            best_gap = gap;
            best = two_sided && !c && end > 0 ? top - x->size : end;
        }
        if (c && c->offset + c->size > end)
            end = c->offset + c->size;
    }
    return best >= 0 ? best : end;
}

/* Greedy placement in the given order; returns the arena's size. */
static int64_t place_all(Block *const *order, int n, Block **placed, int64_t top, bool two_sided)
{
    int64_t peak = 0;
    for (int i = 0; i < n; i++) {
        Block *x = order[i];
        x->offset = best_fit(x, placed, i, peak > top ? peak : top, two_sided);
        int at = i; /* insert keeping placed[] sorted by offset */
        while (at > 0 && placed[at - 1]->offset > x->offset) {
            placed[at] = placed[at - 1];
            at--;
        }
        placed[at] = x;
        if (x->offset + x->size > peak)
            peak = x->offset + x->size;
    }
    return peak;
}

/* Ties broken by buffer index, so a plan is the same on every run and machine. */
static int by_size(const void *pa, const void *pb)
{
    const Block *a = *(Block *const *)pa, *b = *(Block *const *)pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    return a->buf - b->buf;
}

static int by_first_use(const void *pa, const void *pb)
{
    const Block *a = *(Block *const *)pa, *b = *(Block *const *)pb;
    if (a->first != b->first)
        return a->first - b->first;
    return by_size(pa, pb);
}

/* Try each order, keep the smallest arena; offsets of the winner land in `best`. */
static int64_t place_blocks(Block *blk, int n, int64_t bound, int64_t *best, Block **tmp)
{
    static const struct {
        int (*cmp)(const void *, const void *);
        bool two_sided;
    } strategy[] = {{by_size, false}, {by_first_use, true}, {by_size, true}};
    Block **order = tmp, **placed = tmp + n;
    int64_t peak = INT64_MAX;
    for (size_t k = 0; k < sizeof strategy / sizeof *strategy && peak > bound; k++) {
        for (int i = 0; i < n; i++)
            order[i] = &blk[i];
        qsort(order, (size_t)n, sizeof *order, strategy[k].cmp);
        bool two = strategy[k].two_sided;
        int64_t got = place_all(order, n, placed, two ? bound : INT64_MAX, two);
        if (got >= peak)
            continue;
        peak = got;
        for (int i = 0; i < n; i++)
            best[i] = blk[i].offset;
    }
    return n ? peak : 0;
}

/* Bytes held for the program's life (params, constants) and crossing its boundary. */
static bool fixed_bytes(const Program *p, const SymBind *sb, MemoryPlan *plan, Err *e)
{
    for (int b = 0; b < p->nbuf; b++) {
        BufKind k = p->buf[b].kind;
        int64_t bytes;
        if (k == BUF_TEMP)
            continue;
        if (!buffer_bytes(p, b, sb, &bytes, e))
            return false;
        if (k == BUF_PARAM || k == BUF_CONST)
            plan->param_bytes += bytes;
        else
            plan->io_bytes += bytes;
    }
    return true;
}

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* COIL_LOG=info: the totals, and the arena against the most bytes live at once (the
 * least any placement can take), so a poor placement shows. */
static void log_plan(const Program *p, const MemoryPlan *plan, int ntemp, int64_t bound)
{
    coil_log(LOG_INFO, "memory plan '%s': arena %.3f MiB for %d temporaries (the most live at "
             "once: %.3f MiB), parameters %.3f MiB, inputs and outputs %.3f MiB",
             p->graph && p->graph->name ? p->graph->name : "program", mib(plan->arena_bytes),
             ntemp, mib(bound), mib(plan->param_bytes), mib(plan->io_bytes));
}

bool plan_memory(const Program *p, const SymBind *sb, MemoryPlan *plan, Err *e)
{
    return plan_memory_aligned(p, sb, PLAN_ALIGN, plan, e);
}

bool plan_memory_aligned(const Program *p, const SymBind *sb, int64_t align, MemoryPlan *plan,
                         Err *e)
{
    memset(plan, 0, sizeof *plan);
    int n = p->nbuf;
    plan->offset = malloc((size_t)(n ? n : 1) * sizeof *plan->offset);
    Block *blk = malloc((size_t)(n ? n : 1) * sizeof *blk);
    Block **tmp = malloc((size_t)(n ? n : 1) * 2 * sizeof *tmp);
    int64_t *best = malloc((size_t)(n ? n : 1) * sizeof *best);
    bool ok = plan->offset && blk && tmp && best;
    if (!ok)
        err_set(e, ERR_MEMORY, "out of memory planning %d buffers", n);
    int nblk = 0;
    ok = ok && fixed_bytes(p, sb, plan, e) && temp_blocks(p, sb, align > 0 ? align : PLAN_ALIGN,
                                                          blk, &nblk, e);
    int64_t bound = ok ? lower_bound(blk, nblk, p->nstep, e) : -1;
    if (bound >= 0) {
        plan->arena_bytes = place_blocks(blk, nblk, bound, best, tmp);
        for (int b = 0; b < n; b++)
            plan->offset[b] = -1;
        for (int i = 0; i < nblk; i++)
            plan->offset[blk[i].buf] = best[i];
    }
    free(blk);
    free(tmp);
    free(best);
    if (bound < 0)
        plan_free(plan);
    else
        log_plan(p, plan, nblk, bound);
    return bound >= 0;
}
