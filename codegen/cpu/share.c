/* share.c — functions that are the same code share one body. A model's repeated layers
 * lower to kernels (and GEMM tile functions) that differ only in the buffers they touch:
 * BERT's twelve layers give twelve copies of each, and optimising and compiling every copy
 * was most of its compile time. A function's form is its kernel with the buffers numbered
 * in order of first use, with those buffers' dtypes and sizes; the first function of each
 * form shared by several is generated once, as a body over a table of its own buffers, and
 * every function of that form keeps its name as a few instructions that gather its buffers
 * into such a table and call the body. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "codegen/cpu/gen.h"

/* Kernel k is function k; GEMM step s's tile function is function nkernel + s. */
typedef struct Form {
    bool valid;          /* a kernel or a GEMM step whose buffers are all in range */
    Kernel k;            /* buffers renumbered: LX_LOAD's i and ST_STORE's buf are slots */
    int nslot;
    int *slot;           /* the program buffer of each slot */
    Gemm gemm;           /* tiles: the step's, C in slot 0 and its epilogue kernel 0 */
    bool tile;
    uint64_t hash;
    int leader;          /* the first function of this form */
    int count;           /* at the leader: how many functions have this form */
} Form;

#define MIX(h, v) ((h) = fnv1a((h), &(v), sizeof(v)))

uint64_t kernel_hash(uint64_t h, const Kernel *k)
{
    MIX(h, k->nouter), MIX(h, k->ninner), MIX(h, k->nphase), MIX(h, k->after);
    for (int d = 0; d < k->nouter + k->ninner; d++)
        MIX(h, k->size[d].k), MIX(h, k->size[d].syms), MIX(h, k->size[d].sq);
    for (int p = 0; p < k->nphase; p++)
        MIX(h, k->phase[p]);
    for (int i = 0; i < k->nlx; i++) {
        const Lx *x = &k->lx[i];
        MIX(h, x->kind), MIX(h, x->dt), MIX(h, x->op), MIX(h, x->a), MIX(h, x->b);
        MIX(h, x->c), MIX(h, x->i), MIX(h, x->j), MIX(h, x->f);
    }
    for (int i = 0; i < k->nstmt; i++) {
        const LStmt *s = &k->stmt[i];
        MIX(h, s->kind), MIX(h, s->op), MIX(h, s->buf), MIX(h, s->index), MIX(h, s->value);
        MIX(h, s->axis), MIX(h, s->add), MIX(h, s->acc_dt);
    }
    return h;
}

/* ---------------------------------------------------------------- forms */

/* The slot of program buffer b, given one when it has none; -1 when b is out of range. */
static int slot_of(const Program *p, int *map, Form *f, int64_t b)
{
    if (b < 0 || b >= p->nbuf)
        return -1;
    if (map[b] < 0) {
        map[b] = f->nslot;
        f->slot[f->nslot++] = (int)b;
    }
    return map[b];
}

/* k's form into f, the slots numbered from c (a tile's C) when c >= 0; map (per program
 * buffer, all -1) is left all -1. False when a buffer is out of range or memory ran out. */
static bool form_make(const Program *p, const Kernel *k, int c, int *map, Form *f)
{
    f->k = *k;
    f->slot = malloc(((size_t)k->nlx + (size_t)k->nstmt + 1) * sizeof *f->slot);
    Lx *lx = malloc(((size_t)k->nlx + 1) * sizeof *lx);
    LStmt *st = malloc(((size_t)k->nstmt + 1) * sizeof *st);
    f->k.lx = lx, f->k.stmt = st;
    bool ok = f->slot && lx && st && (c < 0 || slot_of(p, map, f, c) == 0);
    for (int i = 0; ok && i < k->nlx; i++) {
        lx[i] = k->lx[i];
        if (lx[i].kind == LX_LOAD)
            ok = (lx[i].i = slot_of(p, map, f, lx[i].i)) >= 0;
    }
    for (int i = 0; ok && i < k->nstmt; i++) {
        st[i] = k->stmt[i];
        if (st[i].kind == ST_STORE)
            ok = (st[i].buf = slot_of(p, map, f, st[i].buf)) >= 0;
    }
    for (int s = 0; s < f->nslot; s++)
        map[f->slot[s]] = -1;
    return ok;
}

static uint64_t form_hash(const Program *p, const Form *f)
{
    uint64_t h = kernel_hash(FNV1A_OFFSET, &f->k);
    MIX(h, f->tile), MIX(h, f->nslot);
    for (int s = 0; s < f->nslot; s++) {
        const Buffer *b = &p->buf[f->slot[s]];
        MIX(h, b->dt), MIX(h, b->numel.k), MIX(h, b->numel.syms), MIX(h, b->numel.sq);
    }
    if (f->tile)
        MIX(h, f->gemm.epilogue), MIX(h, f->gemm.epi_load), MIX(h, f->gemm.c_live),
            MIX(h, f->gemm.n.k), MIX(h, f->gemm.n.syms), MIX(h, f->gemm.n.sq);
    return h;
}

static bool lx_equal(const Lx *a, const Lx *b)
{
    return a->kind == b->kind && a->dt == b->dt && a->op == b->op && a->a == b->a &&
           a->b == b->b && a->c == b->c && a->i == b->i && a->j == b->j &&
           memcmp(&a->f, &b->f, sizeof a->f) == 0;
}

static bool stmt_equal(const LStmt *a, const LStmt *b)
{
    return a->kind == b->kind && a->op == b->op && a->buf == b->buf && a->index == b->index &&
           a->value == b->value && a->axis == b->axis && a->add == b->add && a->acc_dt == b->acc_dt;
}

static bool kernel_equal(const Kernel *a, const Kernel *b)
{
    if (a->nouter != b->nouter || a->ninner != b->ninner || a->nphase != b->nphase ||
        a->after.first != b->after.first || a->after.count != b->after.count ||
        a->nlx != b->nlx || a->nstmt != b->nstmt)
        return false;
    for (int d = 0; d < a->nouter + a->ninner; d++)
        if (!dim_eq(a->size[d], b->size[d]))
            return false;
    for (int p = 0; p < a->nphase; p++)
        if (a->phase[p].first != b->phase[p].first || a->phase[p].count != b->phase[p].count)
            return false;
    for (int i = 0; i < a->nlx; i++)
        if (!lx_equal(&a->lx[i], &b->lx[i]))
            return false;
    for (int i = 0; i < a->nstmt; i++)
        if (!stmt_equal(&a->stmt[i], &b->stmt[i]))
            return false;
    return true;
}

/* The same code: the same kernel over slots of the same dtypes and sizes (and for tiles,
 * the same epilogue over a C of as many columns). */
static bool form_equal(const Program *p, const Form *a, const Form *b)
{
    if (a->hash != b->hash || a->tile != b->tile || a->nslot != b->nslot || !kernel_equal(&a->k, &b->k))
        return false;
    for (int s = 0; s < a->nslot; s++) {
        const Buffer *x = &p->buf[a->slot[s]], *y = &p->buf[b->slot[s]];
        if (x->dt != y->dt || !dim_eq(x->numel, y->numel))
            return false;
    }
    return !a->tile || (a->gemm.epilogue == b->gemm.epilogue && a->gemm.epi_load == b->gemm.epi_load &&
                        a->gemm.c_live == b->gemm.c_live && dim_eq(a->gemm.n, b->gemm.n));
}

/* A GEMM step's tile function: its epilogue kernel (or none: an empty kernel over the
 * tile) with C in slot 0. */
static bool form_tile(const Program *p, const Gemm *gm, int *map, Form *f)
{
    static const Kernel store_only = {.name = "", .nouter = 2};
    bool fused = gm->epilogue >= 0 && gm->epi_load >= 0;
    if (fused && gm->epilogue >= p->nkernel)
        return false;
    f->tile = true;
    f->gemm = *gm;
    f->gemm.c.buf = 0;
    f->gemm.epilogue = fused ? 0 : -1;
    return form_make(p, fused ? &p->kernel[gm->epilogue] : &store_only, gm->c.buf, map, f);
}

/* Every function's form, and each one's leader: the first function of an equal form. */
static Form *forms_make(const Program *p)
{
    int n = p->nkernel + p->nstep;
    Form *f = calloc((size_t)n + 1, sizeof *f);
    int *map = malloc(((size_t)p->nbuf + 1) * sizeof *map);
    if (!f || !map) {
        free(f), free(map);
        return NULL;
    }
    for (int b = 0; b < p->nbuf; b++)
        map[b] = -1;
    for (int i = 0; i < n; i++) {
        if (i < p->nkernel)
            f[i].valid = form_make(p, &p->kernel[i], -1, map, &f[i]);
        else if (p->step[i - p->nkernel].kind == STEP_GEMM)
            f[i].valid = form_tile(p, &p->step[i - p->nkernel].gemm, map, &f[i]);
        f[i].hash = f[i].valid ? form_hash(p, &f[i]) : 0;
        f[i].leader = i;
        for (int j = 0; f[i].valid && j < i && f[i].leader == i; j++)
            if (f[j].valid && f[j].leader == j && form_equal(p, &f[i], &f[j]))
                f[i].leader = j;
        f[f[i].leader].count++;
    }
    free(map);
    return f;
}

static void forms_free(Form *f, int n)
{
    for (int i = 0; f && i < n; i++) {
        free(f[i].slot);
        free((void *)f[i].k.lx);
        free((void *)f[i].k.stmt);
    }
    free(f);
}

/* ---------------------------------------------------------------- emitting */

/* The body of f's form, called `name`: f's kernel or tile generated over a program whose
 * buffers are f's slots, private to the module and never inlined into its callers. */
static bool emit_body(Gen *g, const Form *f, const char *name)
{
    const Program *p = g->p;
    Buffer *buf = malloc(((size_t)f->nslot + 1) * sizeof *buf);
    if (!buf)
        return gen_fail(g, name, "out of memory") != NULL;
    for (int s = 0; s < f->nslot; s++)
        buf[s] = p->buf[f->slot[s]];
    Step step = {.kind = STEP_GEMM, .gemm = f->gemm};
    Program local = {.buf = buf, .nbuf = f->nslot, .kernel = (Kernel *)&f->k, .nkernel = 1,
                     .step = &step, .nstep = 1, .graph = p->graph};
    g->p = &local;
    bool ok = f->tile ? tile_define(g, &f->gemm, name) : kernel_define(g, &f->k, name);
    g->p = p;
    free(buf);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (ok && fn) {
        LLVMSetLinkage(fn, LLVMInternalLinkage);
        gen_attr(g, fn, LLVMAttributeFunctionIndex, "noinline");
    }
    return ok && fn;
}

/* Function `name` of body's type: its buffer table (argument bufs_arg) gathered into f's
 * slots, then the body called with the same arguments but that table. */
static bool emit_call(Gen *g, const Form *f, const char *name, LLVMValueRef body, unsigned bufs_arg)
{
    LLVMTypeRef type = LLVMGlobalGetValueType(body);
    LLVMValueRef fn = LLVMAddFunction(g->mod, name, type);
    gen_attr(g, fn, LLVMAttributeFunctionIndex, "nounwind");
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
    LLVMValueRef table = LLVMBuildAlloca(g->b, LLVMArrayType2(g->ptr, (uint64_t)f->nslot + 1), "slots");
    LLVMValueRef bufs = LLVMGetParam(fn, bufs_arg);
    for (int s = 0; s < f->nslot; s++) {
        LLVMValueRef from = LLVMConstInt(g->i64, (unsigned long long)f->slot[s], 0);
        LLVMValueRef to = LLVMConstInt(g->i64, (unsigned long long)s, 0);
        LLVMValueRef at = LLVMBuildInBoundsGEP2(g->b, g->ptr, bufs, &from, 1, "");
        LLVMValueRef base = LLVMBuildLoad2(g->b, g->ptr, at, g->p->buf[f->slot[s]].name);
        LLVMBuildStore(g->b, base, LLVMBuildInBoundsGEP2(g->b, g->ptr, table, &to, 1, ""));
    }
    unsigned n = LLVMCountParams(fn);
    LLVMValueRef args[8];
    for (unsigned i = 0; i < n && i < 8; i++)
        args[i] = i == bufs_arg ? table : LLVMGetParam(fn, i);
    LLVMBuildCall2(g->b, type, body, args, n, "");
    LLVMBuildRetVoid(g->b);
    return n <= 8;
}

/* Function i (a kernel or a tile), named `name`: generated alone when no other function
 * has its form, else as a call of its form's body, which its leader generates. */
static bool emit_function(Gen *g, const Form *forms, int i, const char *name, int *functions)
{
    const Form *f = &forms[i], *lead = &forms[f->leader];
    if (!f->valid || lead->count < 2) {
        ++*functions;
        return i >= g->p->nkernel ? tile_define(g, &g->p->step[i - g->p->nkernel].gemm, name)
                       : kernel_define(g, &g->p->kernel[i], name);
    }
    char body[64];
    snprintf(body, sizeof body, "coil.shared.%d", f->leader);
    if (f->leader == i) {
        ++*functions;
        if (!emit_body(g, f, body))
            return false;
    }
    return emit_call(g, f, name, LLVMGetNamedFunction(g->mod, body), i >= g->p->nkernel ? 2 : 0) ||
           gen_fail(g, name, "a function of more than 8 arguments") != NULL;
}

bool share_emit(Gen *g, int *functions)
{
    const Program *p = g->p;
    *functions = 0;
    Form *forms = forms_make(p);
    if (!forms)
        return gen_fail(g, "module", "out of memory") != NULL;
    bool ok = true;
    for (int k = 0; k < p->nkernel && ok; k++)
        ok = kernel_check(g, k) && emit_function(g, forms, k, p->kernel[k].name, functions);
    for (int s = 0; s < p->nstep && ok; s++) {
        char name[32];
        snprintf(name, sizeof name, "coil_tile_%d", s);
        if (p->step[s].kind == STEP_GEMM)
            ok = emit_function(g, forms, p->nkernel + s, name, functions);
    }
    forms_free(forms, p->nkernel + p->nstep);
    return ok;
}
