/* tile.c — a GEMM step's TileFn: the finished product tile stored into C (in C's dtype)
 * and, when the step has a fusable epilogue kernel, that kernel run at every point of the
 * tile with its load of C replaced by the tile's value, so the epilogue needs no pass
 * over C. */
#include "codegen/cpu/gen.h"

typedef struct Tile {
    LLVMValueRef tile, ldt, n; /* the tile, its row stride, C's columns */
    int c;                     /* C's buffer */
    bool store_c;
} Tile;

/* At tile point (i, j): the product's value, as the epilogue's load of C would give it
 * (rounded to C's dtype), and C itself when it is stored. */
static void tile_point(Fn *f)
{
    Tile *t = f->ctx;
    Gen *g = f->g;
    int nb = g->p->nbuf;
    LLVMValueRef idx = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, f->iv[0], t->ldt, ""), f->iv[1], "");
    LLVMValueRef inst, v = mem_load(g, DT_F32, t->tile, idx, &inst);
    fn_mark(f, inst, nb);
    DType cdt = g->p->buf[t->c].dt;
    if (f->override >= 0)
        f->val[f->override] = expr_convert(g, v, DT_F32, cdt);
    if (!t->store_c)
        return;
    LLVMValueRef at = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, f->var[0], t->n, ""), f->var[1], "");
    fn_mark(f, mem_store(g, cdt, fn_buffer(f, t->c), at, expr_convert(g, v, DT_F32, cdt)), t->c);
}

/* Whether the step's epilogue runs in its tiles: loop.h marks one that can (epi_load);
 * one that cannot runs after the product, as its own kernel. */
static bool fused(const Gemm *gm) { return gm->epilogue >= 0 && gm->epi_load >= 0; }

/* A fused epilogue must be what loop.h promises: pointwise over [rows, N], reading C once. */
static bool check_epilogue(Gen *g, const Gemm *gm, const char *name)
{
    const Program *p = g->p;
    if (gm->c.buf < 0 || gm->c.buf >= p->nbuf)
        return gen_fail(g, name, "C is buffer %d, out of range", gm->c.buf) != NULL;
    if (!fused(gm))
        return true;
    if (gm->epilogue >= p->nkernel)
        return gen_fail(g, name, "epilogue kernel %d, out of range", gm->epilogue) != NULL;
    const Kernel *k = &p->kernel[gm->epilogue];
    if (k->nouter != 2 || k->ninner != 0 || k->nphase != 0)
        return gen_fail(g, name, "epilogue %s is not pointwise over [rows, N] (%d outer, %d inner dims)",
                        k->name, k->nouter, k->ninner) != NULL;
    if (gm->epi_load < 0 || gm->epi_load >= k->nlx || k->lx[gm->epi_load].kind != LX_LOAD ||
        k->lx[gm->epi_load].i != gm->c.buf)
        return gen_fail(g, name, "epilogue %s: expression %d is not its load of C (buffer %d)",
                        k->name, gm->epi_load, gm->c.buf) != NULL;
    return true;
}

bool tile_define(Gen *g, const Gemm *gm, const char *name)
{
    if (!check_epilogue(g, gm, name))
        return false;
    /* Without a fused epilogue, an empty kernel over the tile: tile_point does the stores. */
    Kernel store_only = {.name = name, .nouter = 2};
    const Kernel *k = fused(gm) ? &g->p->kernel[gm->epilogue] : &store_only;
    LLVMTypeRef args[8] = {g->ptr, g->i64, g->ptr, g->ptr, g->i64, g->i64, g->i64, g->i64};
    Fn f;
    Tile t = {.c = gm->c.buf, .store_c = !fused(gm) || gm->c_live};
    bool ok = fn_begin(g, &f, k, name, LLVMFunctionType(g->voidt, args, 8, 0));
    if (ok) {
        fn_tables(&f, 2, 3);
        const char *attrs[] = {"noalias", "nocapture", "readonly"}; /* the runtime's scratch */
        for (int i = 0; i < 3; i++)
            fn_attr(&f, 1, attrs[i]);
        fn_set_size(&f);
        t.tile = LLVMGetParam(f.fn, 0);
        t.ldt = LLVMGetParam(f.fn, 1);
        t.n = fn_dim(&f, gm->n);
        f.base[g->p->nbuf] = t.tile; /* its own alias scope */
        fn_buffer(&f, t.c);
        for (int d = 0; d < 2; d++) {
            f.lo[d] = LLVMConstInt(g->i64, 0, 0);
            f.hi[d] = LLVMGetParam(f.fn, 6 + (unsigned)d);
            f.off[d] = LLVMGetParam(f.fn, 4 + (unsigned)d);
        }
        f.override = fused(gm) ? gm->epi_load : -1;
        f.at_point = tile_point;
        f.narrow = true;
        f.ctx = &t;
        ok = fn_body(&f);
    }
    fn_end(&f);
    return ok && err_ok(g->e);
}
