/* kernel_expr.c — one kernel's expression pool: Lx nodes hash-consed (an expression built twice is
 * one id, so common subexpressions of a fused kernel are computed once), constants folded
 * as the interpreter would, and statements collected by phase. */
#include <stdlib.h>
#include <string.h>

#include "codegen/kernel_expr.h"


void kb_init(KB *kb) { memset(kb, 0, sizeof *kb); }

void kb_free(KB *kb)
{
    free(kb->lx);
    free(kb->slot);
    free(kb->extent);
    free(kb->dimval);
    free(kb->phase_of);
    free(kb->stmt);
    free(kb->stmt_phase);
    memset(kb, 0, sizeof *kb);
}

/* ---------------------------------------------------------------- hash-consing */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h;
}

static uint64_t lx_hash(const Lx *x)
{
    uint64_t f;
    memcpy(&f, &x->f, sizeof f);
    uint64_t h = mix(mix(mix((uint64_t)x->kind, (uint64_t)x->dt), (uint64_t)x->op),
                     (uint64_t)(uint32_t)x->a);
    h = mix(mix(mix(h, (uint64_t)(uint32_t)x->b), (uint64_t)(uint32_t)x->c), (uint64_t)x->i);
    return mix(mix(h, (uint64_t)x->j), f);
}

static bool lx_same(const Lx *x, const Lx *y)
{
    return x->kind == y->kind && x->dt == y->dt && x->op == y->op && x->a == y->a &&
           x->b == y->b && x->c == y->c && x->i == y->i && x->j == y->j &&
           memcmp(&x->f, &y->f, sizeof x->f) == 0;
}

static bool rehash(KB *kb)
{
    int n = kb->nslot ? 2 * kb->nslot : 256;
    int *slot = malloc((size_t)n * sizeof *slot);
    if (!slot)
        return false;
    memset(slot, -1, (size_t)n * sizeof *slot);
    for (int id = 0; id < kb->nlx; id++) {
        size_t s = lx_hash(&kb->lx[id]) & (size_t)(n - 1);
        while (slot[s] >= 0)
            s = (s + 1) & (size_t)(n - 1);
        slot[s] = id;
    }
    free(kb->slot);
    kb->slot = slot;
    kb->nslot = n;
    return true;
}

static bool grow_pool(KB *kb)
{
    int cap = kb->cap ? 2 * kb->cap : 64;
    Lx *lx = realloc(kb->lx, (size_t)cap * sizeof *lx);
    if (lx)
        kb->lx = lx;
    Dim *ext = lx ? realloc(kb->extent, (size_t)cap * sizeof *ext) : NULL;
    if (ext)
        kb->extent = ext;
    Dim *dv = ext ? realloc(kb->dimval, (size_t)cap * sizeof *dv) : NULL;
    if (dv)
        kb->dimval = dv;
    int *ph = dv ? realloc(kb->phase_of, (size_t)cap * sizeof *ph) : NULL;
    if (ph)
        kb->phase_of = ph;
    if (!ph)
        return false;
    kb->cap = cap;
    return true;
}

/* The id of x, added when new; its facts (extent, value, phase) set on first sight. */
static int intern(KB *kb, Lx x, Dim extent, Dim dimval)
{
    if (kb->oom)
        return -1;
    if (2 * (kb->nlx + 1) > kb->nslot && !rehash(kb)) {
        kb->oom = true;
        return -1;
    }
    size_t s = lx_hash(&x) & (size_t)(kb->nslot - 1);
    for (; kb->slot[s] >= 0; s = (s + 1) & (size_t)(kb->nslot - 1))
        if (lx_same(&kb->lx[kb->slot[s]], &x))
            return kb->slot[s];
    if (kb->nlx == kb->cap && !grow_pool(kb)) {
        kb->oom = true;
        return -1;
    }
    int id = kb->nlx++, phase = -1;
    const int ops[3] = {x.a, x.b, x.c};
    for (int k = 0; k < 3; k++)
        if (ops[k] >= 0 && kb->phase_of[ops[k]] > phase)
            phase = kb->phase_of[ops[k]];
    if (x.kind == LX_ACC)
        phase = kb->stmt_phase[x.i];
    kb->lx[id] = x;
    kb->extent[id] = extent;
    kb->dimval[id] = dimval;
    kb->phase_of[id] = phase;
    kb->slot[s] = id;
    return id;
}

static Lx node(LxKind kind, DType dt) { return (Lx){kind, dt, -1, -1, -1, -1, 0, 0, 0}; }

/* ---------------------------------------------------------------- values */

int lx_int(KB *kb, int64_t v)
{
    Lx x = node(LX_INT, DT_I64);
    x.i = v;
    return intern(kb, x, v >= 0 ? dim_static(v + 1) : LX_NO_EXTENT, dim_static(v));
}

static int mul_node(KB *kb, int a, int b, Dim value)
{
    Lx m = node(LX_BINARY, DT_I64);
    m.op = OP_MUL, m.a = a, m.b = b;
    return a < 0 || b < 0 ? -1 : intern(kb, m, LX_NO_EXTENT, value);
}

/* Symbols multiplied in bit order, then the factor k: one canonical id per Dim. */
int lx_dim(KB *kb, Dim d)
{
    if (dim_is_static(d))
        return lx_int(kb, d.k);
    int id = -1;
    Dim sofar = {1, 0, 0};
    for (int s = 0; s < COIL_MAX_SYMS; s++) {
        for (int times = (d.syms >> s & 1) + (d.sq >> s & 1), t = 0; t < times; t++) {
            Lx x = node(LX_SYM, DT_I64);
            x.i = s;
            sofar.sq |= sofar.syms & 1u << s;
            sofar.syms |= 1u << s;
            int sym = intern(kb, x, LX_NO_EXTENT, (Dim){1, 1u << s, 0});
            id = id < 0 ? sym : mul_node(kb, id, sym, sofar);
        }
    }
    return d.k == 1 ? id : mul_node(kb, lx_int(kb, d.k), id, d);
}

int lx_var(KB *kb, int var, Dim extent)
{
    if (dim_eq(extent, dim_static(1)))
        return lx_int(kb, 0);
    Lx x = node(LX_VAR, DT_I64);
    x.i = var;
    return intern(kb, x, extent, LX_NO_VALUE);
}

int lx_float(KB *kb, double v, DType dt)
{
    Lx x = node(LX_FLOAT, dt);
    x.f = dtype_round(dt, v);
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

int lx_load(KB *kb, int buf, DType dt, int index)
{
    if (index < 0)
        return -1;
    Lx x = node(LX_LOAD, dt);
    x.i = buf, x.a = index;
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

static bool is_const(const KB *kb, int id, double *v)
{
    const Lx *x = &kb->lx[id];
    if (x->kind == LX_FLOAT)
        *v = x->f;
    else if (x->kind == LX_INT)
        *v = (double)x->i;
    return x->kind == LX_FLOAT || x->kind == LX_INT;
}

int lx_unary(KB *kb, int op, DType dt, int a)
{
    double v;
    if (a < 0)
        return -1;
    if (is_const(kb, a, &v))
        return lx_float(kb, op_info[op].scalar1(v), dt);
    Lx x = node(LX_UNARY, dt);
    x.op = op, x.a = a;
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

int lx_binary(KB *kb, int op, DType dt, int a, int b)
{
    double u, v;
    if (a < 0 || b < 0)
        return -1;
    if (is_const(kb, a, &u) && is_const(kb, b, &v)) {
        double r = op_info[op].scalar2(u, v);
        bool index = kb->lx[a].kind == LX_INT && kb->lx[b].kind == LX_INT;
        return index && dt == DT_I64 ? lx_int(kb, (int64_t)dtype_round(DT_I64, r))
                                     : lx_float(kb, r, dt);
    }
    Lx x = node(LX_BINARY, dt);
    x.op = op, x.a = a, x.b = b;
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

int lx_select(KB *kb, DType dt, int c, int a, int b)
{
    double v;
    if (c < 0 || a < 0 || b < 0)
        return -1;
    if (a == b)
        return a;
    if (is_const(kb, c, &v))
        return v != 0 ? a : b;
    Lx x = node(LX_SELECT, dt);
    x.a = c, x.b = a, x.c = b;
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

int lx_cast(KB *kb, DType dt, int a)
{
    double v;
    if (a < 0)
        return -1;
    if (kb->lx[a].dt == dt)
        return a;
    if (is_const(kb, a, &v))
        return dt == DT_I64 ? lx_int(kb, (int64_t)dtype_round(DT_I64, v)) : lx_float(kb, v, dt);
    Lx x = node(LX_CAST, dt);
    x.a = a;
    return intern(kb, x, kb->extent[a], LX_NO_VALUE);
}

/* The step is read from the syms table at run time: a kernel serves every training step. */
int lx_rand(KB *kb, int64_t seed, int64_t offset, int index)
{
    if (index < 0)
        return -1;
    Lx step = node(LX_SYM, DT_I64);
    step.i = COIL_SYM_RNG_STEP;
    Lx x = node(LX_RAND, DT_F32);
    x.i = seed, x.j = offset, x.a = index;
    x.b = intern(kb, step, LX_NO_EXTENT, LX_NO_VALUE);
    return x.b < 0 ? -1 : intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

int lx_acc(KB *kb, int stmt, DType dt)
{
    if (stmt < 0)
        return -1;
    Lx x = node(LX_ACC, dt);
    x.i = stmt;
    return intern(kb, x, LX_NO_EXTENT, LX_NO_VALUE);
}

/* Internal to index.c: an index node of the given kind with its bound. */
int lx_index_node(KB *kb, LxKind kind, int op, int a, int b, Dim extent, Dim dimval)
{
    if (a < 0 || b < 0)
        return -1;
    Lx x = node(kind, DT_I64);
    x.op = op, x.a = a, x.b = b;
    return intern(kb, x, extent, dimval);
}

/* ---------------------------------------------------------------- statements */

static int add_stmt(KB *kb, LStmt s, int phase)
{
    if (kb->oom || s.value < 0 || (s.kind == ST_STORE && s.index < 0))
        return -1;
    if (kb->nstmt == kb->cap_stmt) {
        int cap = kb->cap_stmt ? 2 * kb->cap_stmt : 16;
        LStmt *st = realloc(kb->stmt, (size_t)cap * sizeof *st);
        if (st)
            kb->stmt = st;
        int *ph = st ? realloc(kb->stmt_phase, (size_t)cap * sizeof *ph) : NULL;
        if (!ph) {
            kb->oom = true;
            return -1;
        }
        kb->stmt_phase = ph;
        kb->cap_stmt = cap;
    }
    kb->stmt[kb->nstmt] = s;
    kb->stmt_phase[kb->nstmt] = phase;
    return kb->nstmt++;
}

int kb_store(KB *kb, int phase, int buf, int index, int value)
{
    return add_stmt(kb, (LStmt){.kind = ST_STORE, .buf = buf, .index = index, .value = value},
                    phase);
}

int kb_store_add(KB *kb, int phase, int buf, int index, int value)
{
    return add_stmt(kb, (LStmt){.kind = ST_STORE, .buf = buf, .index = index, .value = value,
                                .add = true}, phase);
}

int kb_reduce(KB *kb, int phase, int op, int value, int axis, DType acc_dt)
{
    return add_stmt(kb, (LStmt){.kind = ST_REDUCE, .op = op, .value = value, .axis = axis,
                                .acc_dt = acc_dt}, phase);
}

/* ---------------------------------------------------------------- finishing */

/* Mark what the statements use (ids only refer to smaller ids, so one backward sweep). */
static void mark_used(const KB *kb, bool *used)
{
    for (int s = 0; s < kb->nstmt; s++) {
        used[kb->stmt[s].value] = true;
        if (kb->stmt[s].kind == ST_STORE)
            used[kb->stmt[s].index] = true;
    }
    for (int id = kb->nlx - 1; id >= 0; id--) {
        const Lx *x = &kb->lx[id];
        if (!used[id])
            continue;
        if (x->a >= 0)
            used[x->a] = true;
        if (x->b >= 0)
            used[x->b] = true;
        if (x->c >= 0)
            used[x->c] = true;
    }
}

/* Statement order: phases in order, `after` last, creation order within each. */
static void order_statements(const KB *kb, int nphase, int *pos, Kernel *k)
{
    int n = 0;
    for (int ph = 0; ph <= nphase; ph++) {
        int want = ph < nphase ? ph : -1, first = n;
        for (int s = 0; s < kb->nstmt; s++)
            if (kb->stmt_phase[s] == want)
                pos[s] = n++;
        StmtRange r = {first, n - first};
        if (ph < nphase)
            k->phase[ph] = r;
        else
            k->after = r;
    }
}

bool kb_finish(KB *kb, Arena *arena, Kernel *k)
{
    int nphase = 0;
    for (int s = 0; s < kb->nstmt; s++)
        if (kb->stmt_phase[s] + 1 > nphase)
            nphase = kb->stmt_phase[s] + 1;
    bool *used = calloc((size_t)kb->nlx + 1, sizeof *used);
    int *renum = malloc(((size_t)kb->nlx + 1) * sizeof *renum);
    int *pos = malloc(((size_t)kb->nstmt + 1) * sizeof *pos);
    k->lx = arena_alloc(arena, ((size_t)kb->nlx + 1) * sizeof *k->lx);
    k->stmt = arena_alloc(arena, ((size_t)kb->nstmt + 1) * sizeof *k->stmt);
    bool ok = !kb->oom && used && renum && pos && k->lx && k->stmt && nphase <= LOOP_MAX_PHASES;
    if (ok) {
        mark_used(kb, used);
        order_statements(kb, nphase, pos, k);
        k->nphase = nphase;
        k->nlx = 0;
        for (int id = 0; id < kb->nlx; id++) {
            if (!used[id])
                continue;
            Lx x = kb->lx[id];
            x.a = x.a >= 0 ? renum[x.a] : -1;
            x.b = x.b >= 0 ? renum[x.b] : -1;
            x.c = x.c >= 0 ? renum[x.c] : -1;
            if (x.kind == LX_ACC)
                x.i = pos[x.i];
            renum[id] = k->nlx;
            k->lx[k->nlx++] = x;
        }
        for (int s = 0; s < kb->nstmt; s++) {
            LStmt st = kb->stmt[s];
            st.value = renum[st.value];
            st.index = st.kind == ST_STORE ? renum[st.index] : -1;
            k->stmt[pos[s]] = st;
        }
        k->nstmt = kb->nstmt;
    }
    free(used);
    free(renum);
    free(pos);
    return ok;
}
