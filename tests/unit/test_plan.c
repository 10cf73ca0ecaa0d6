/* test_plan.c — the memory planner on hand-built Programs: temporaries with disjoint
 * lifetimes share bytes, overlapping ones never do (every pair, on random programs),
 * offsets are 64-byte aligned, symbolic sizes plan at each batch size, a chain's arena is
 * the largest adjacent pair, and unbound symbols or bad lifetimes are errors. */
#include <stdlib.h>

#include "check.h"
#include "runtime/cpu/cpu_engine.h"

#define MAXBUF 64

/* A program of buffers only: the planner reads nothing else but nstep. */
typedef struct Prog {
    Program p;
    Buffer buf[MAXBUF];
    Graph *g; /* for symbol names; may be NULL */
} Prog;

static void prog_init(Prog *pr, int nstep, Graph *g)
{
    memset(pr, 0, sizeof *pr);
    pr->p.buf = pr->buf;
    pr->p.nstep = nstep;
    pr->p.graph = g;
}

static int add_buf(Prog *pr, BufKind kind, DType dt, Dim numel, int first, int last)
{
    int b = pr->p.nbuf++;
    pr->buf[b] = (Buffer){.name = "t", .kind = kind, .dt = dt, .numel = numel, .first = first,
                          .last = last};
    return b;
}

static int add_temp(Prog *pr, int64_t bytes, int first, int last)
{
    return add_buf(pr, BUF_TEMP, DT_I8, dim_static(bytes), first, last);
}

static bool plan(const Prog *pr, const SymBind *sb, MemoryPlan *mp)
{
    Err e = {0};
    SymBind none = {0};
    bool ok = plan_memory(&pr->p, sb ? sb : &none, mp, &e);
    if (!ok)
        fprintf(stderr, "plan_memory: %s\n", e.msg);
    return ok;
}

static int64_t round64(int64_t n) { return (n + 63) / 64 * 64; }

/* The plan's invariants: aligned, within the arena, no two live temporaries overlap,
 * the arena is the highest end and at least the bytes live at any step. */
static void check_plan(const Prog *pr, const SymBind *sb, const MemoryPlan *mp)
{
    SymBind none = {0}; /* a static program reads no symbol, but needs a table to read */
    sb = sb ? sb : &none;
    const Program *p = &pr->p;
    int64_t top = 0, live_most = 0;
    for (int i = 0; i < p->nbuf; i++) {
        const Buffer *a = &p->buf[i];
        if (a->kind != BUF_TEMP) {
            CHECK(mp->offset[i] == -1);
            continue;
        }
        int64_t size = round64(dim_value(a->numel, sb) * dtype_info[a->dt].size);
        CHECK(mp->offset[i] >= 0 && mp->offset[i] % 64 == 0);
        CHECK(mp->offset[i] + size <= mp->arena_bytes);
        top = mp->offset[i] + size > top ? mp->offset[i] + size : top;
        for (int j = 0; j < i; j++) {
            const Buffer *b = &p->buf[j];
            if (b->kind != BUF_TEMP || a->first > b->last || b->first > a->last)
                continue;
            int64_t bsize = round64(dim_value(b->numel, sb) * dtype_info[b->dt].size);
            bool apart = mp->offset[i] + size <= mp->offset[j] ||
                         mp->offset[j] + bsize <= mp->offset[i];
            if (size && bsize && !apart) {
                fprintf(stderr, "temps %d and %d overlap in time and in memory\n", i, j);
                check_failures++;
            }
        }
    }
    for (int s = 0; s < p->nstep; s++) {
        int64_t live = 0;
        for (int i = 0; i < p->nbuf; i++)
            if (p->buf[i].kind == BUF_TEMP && p->buf[i].first <= s && s <= p->buf[i].last)
                live += round64(dim_value(p->buf[i].numel, sb) * dtype_info[p->buf[i].dt].size);
        live_most = live > live_most ? live : live_most;
    }
    CHECK(mp->arena_bytes == top);
    CHECK(mp->arena_bytes >= live_most);
}

static void test_share(void)
{
    Prog pr;
    prog_init(&pr, 4, NULL);
    int a = add_temp(&pr, 4096, 0, 1), b = add_temp(&pr, 4096, 2, 3);
    MemoryPlan mp;
    if (!plan(&pr, NULL, &mp))
        return;
    CHECK(mp.offset[a] == mp.offset[b]); /* a is dead before b is written */
    CHECK(mp.arena_bytes == 4096);
    check_plan(&pr, NULL, &mp);
    plan_free(&mp);

    pr.buf[b].first = 1; /* b written where a is last read: they must not share */
    if (!plan(&pr, NULL, &mp))
        return;
    CHECK(mp.offset[a] != mp.offset[b]);
    CHECK(mp.arena_bytes == 8192);
    check_plan(&pr, NULL, &mp);
    plan_free(&mp);
}

/* Odd sizes still give aligned offsets; params, consts, inputs and outputs are counted
 * but not placed. */
static void test_align_and_kinds(void)
{
    Prog pr;
    prog_init(&pr, 3, NULL);
    add_buf(&pr, BUF_INPUT, DT_F32, dim_static(10), 0, 0);
    add_buf(&pr, BUF_PARAM, DT_F16, dim_static(7), 0, 0);
    add_buf(&pr, BUF_CONST, DT_I64, dim_static(3), 0, 0);
    add_buf(&pr, BUF_OUTPUT, DT_BF16, dim_static(5), 0, 0);
    add_buf(&pr, BUF_TEMP, DT_F32, dim_static(3), 0, 2);   /* 12 bytes */
    add_buf(&pr, BUF_TEMP, DT_BOOL, dim_static(65), 1, 2); /* 65 bytes */
    add_buf(&pr, BUF_TEMP, DT_F16, dim_static(1), 0, 1);
    add_buf(&pr, BUF_TEMP, DT_F32, dim_static(0), 0, 2);   /* empty */
    MemoryPlan mp;
    if (!plan(&pr, NULL, &mp))
        return;
    CHECK(mp.param_bytes == 7 * 2 + 3 * 8);
    CHECK(mp.io_bytes == 10 * 4 + 5 * 2);
    CHECK(mp.arena_bytes == 64 + 128 + 64);
    check_plan(&pr, NULL, &mp);
    plan_free(&mp);
}

/* A GPU's plan: every temporary's offset and size a multiple of 256 bytes. */
static void test_align_256(void)
{
    Prog pr;
    Err e = {0};
    SymBind none = {0};
    MemoryPlan mp;
    prog_init(&pr, 4, NULL);
    add_temp(&pr, 12, 0, 1);
    add_temp(&pr, 300, 1, 2);
    add_temp(&pr, 1, 0, 3);
    add_temp(&pr, 257, 2, 3);
    if (!plan_memory_aligned(&pr.p, &none, 256, &mp, &e)) {
        fprintf(stderr, "plan_memory_aligned: %s\n", e.msg);
        check_failures++;
        return;
    }
    for (int b = 0; b < pr.p.nbuf; b++)
        CHECK(mp.offset[b] % 256 == 0);
    CHECK(mp.arena_bytes % 256 == 0 && mp.arena_bytes == 256 + 512 + 512);
    plan_free(&mp);
}

/* Random programs: every invariant, on every pair. */
static void test_random(void)
{
    srand(7);
    for (int round = 0; round < 500; round++) {
        Prog pr;
        int nstep = 1 + rand() % 20, n = 1 + rand() % (MAXBUF - 1);
        prog_init(&pr, nstep, NULL);
        for (int i = 0; i < n; i++) {
            int a = rand() % nstep, b = rand() % nstep;
            add_buf(&pr, BUF_TEMP, (DType)(rand() % DT_COUNT), dim_static(rand() % 5000),
                    a < b ? a : b, a < b ? b : a);
        }
        MemoryPlan mp;
        SymBind none = {0};
        if (!plan(&pr, NULL, &mp))
            return;
        check_plan(&pr, &none, &mp);
        plan_free(&mp);
    }
}

/* f32[B, 256] temporaries: the plan follows B. */
static void test_symbolic(void)
{
    Graph *g = graph_new("sym");
    int B = graph_sym(g, "B", 1);
    Prog pr;
    prog_init(&pr, 3, g);
    Dim b256 = {256, 1u << B, 0};
    add_buf(&pr, BUF_INPUT, DT_F32, b256, 0, 0);
    add_buf(&pr, BUF_TEMP, DT_F32, b256, 0, 1);
    add_buf(&pr, BUF_TEMP, DT_F32, (Dim){1024, 1u << B, 0}, 1, 2);
    add_buf(&pr, BUF_TEMP, DT_F32, b256, 2, 2);
    add_buf(&pr, BUF_OUTPUT, DT_F32, dim_static(4), 2, 2);
    for (int64_t batch = 2; batch <= 32; batch *= 16) {
        SymBind sb = {0};
        sb.val[B] = batch, sb.known[B] = true;
        MemoryPlan mp;
        if (!plan(&pr, &sb, &mp))
            break;
        /* the widest step holds the 1024-wide temp and one 256-wide one */
        CHECK(mp.arena_bytes == batch * (1024 + 256) * 4);
        CHECK(mp.io_bytes == batch * 256 * 4 + 16);
        check_plan(&pr, &sb, &mp);
        plan_free(&mp);
    }
    SymBind unbound = {0};
    MemoryPlan mp;
    Err e = {0};
    CHECK(!plan_memory(&pr.p, &unbound, &mp, &e));
    CHECK(strstr(e.msg, "symbol 'B'") != NULL);
    CHECK(mp.offset == NULL);
    graph_free(g);
}

/* t_i written at step i, read at step i + 1: the arena is the largest adjacent pair,
 * including chains where decreasing-size order alone does worse. */
static void check_chain(const int64_t *sizes, int n)
{
    Prog pr;
    prog_init(&pr, n + 1, NULL);
    int64_t want = 0;
    for (int i = 0; i < n; i++) {
        add_temp(&pr, sizes[i] * 64, i, i + 1);
        if (i > 0 && (sizes[i] + sizes[i - 1]) * 64 > want)
            want = (sizes[i] + sizes[i - 1]) * 64;
    }
    MemoryPlan mp;
    if (!plan(&pr, NULL, &mp))
        return;
    CHECK(mp.arena_bytes == want);
    check_plan(&pr, NULL, &mp);
    plan_free(&mp);
}

static void test_chain(void)
{
    check_chain((const int64_t[]){10, 8, 9, 10}, 4); /* greedy by size alone: 27 */
    check_chain((const int64_t[]){1, 1, 10}, 3);     /* first use, one-sided: 12 */
    check_chain((const int64_t[]){16, 64, 16, 64, 16, 64, 16, 8, 1}, 9); /* an MLP */
    srand(11);
    for (int round = 0; round < 200; round++) {
        int64_t sizes[40];
        int n = 2 + rand() % 39;
        for (int i = 0; i < n; i++)
            sizes[i] = 1 + rand() % 100;
        check_chain(sizes, n);
    }
}

static void test_errors(void)
{
    Prog pr;
    prog_init(&pr, 2, NULL);
    add_temp(&pr, 64, 0, 5);
    pr.buf[0].name = "t7";
    MemoryPlan mp;
    SymBind none = {0};
    Err e = {0};
    CHECK(!plan_memory(&pr.p, &none, &mp, &e));
    CHECK(strstr(e.msg, "'t7'") != NULL);
    prog_init(&pr, 0, NULL); /* nothing at all */
    e = (Err){0};
    CHECK(plan_memory(&pr.p, &none, &mp, &e));
    CHECK(mp.arena_bytes == 0);
    plan_free(&mp);
}

int main(void)
{
    test_share();
    test_align_and_kinds();
    test_align_256();
    test_random();
    test_symbolic();
    test_chain();
    test_errors();
    return check_status();
}
