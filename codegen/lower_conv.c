/* lower_conv.c — a conv kept whole (the CPU's pipeline) as a GEMM step: w as A [G, M/G, K],
 * x read through its im2col windows as B (Gemm.conv: the runtime packs B's panels from x,
 * never storing B), y as C [N, G, M/G, O], y's own NCHW layout. A 1x1 conv at unit stride
 * without padding on a dense x is a plain GEMM on x's channels. */
#include <string.h>

#include "codegen/lower_int.h"
#include "ir/ops.h"

/* Operand j of node m read at its own dims' loop variables: its buffer, offset and stride
 * per dim. False, asking for a dense copy, when the view is not strided. */
static bool operand_layout(Gen *G, int m, int j, int *buf, Dim *coef, Dim *offset)
{
    int in = G->L->g->node[m].in[j], idx[COIL_MAX_RANK];
    const Type *t = &G->L->g->node[in].type;
    for (int d = 0; d < t->rank; d++)
        idx[d] = lx_var(&G->kb, d, t->dim[d]);
    int v = value_at(G, in, idx);
    if (v < 0)
        return false;
    const Lx *x = &G->kb.lx[v];
    if (x->kind == LX_LOAD && ix_affine(&G->kb, x->a, t->rank, coef, offset)) {
        *buf = (int)x->i;
        return true;
    }
    lower_retry(G->L, in);
    return false;
}

/* Whether dims [from, rank) of t are laid out densely, row-major (an extent-1 dim has no
 * stride of its own); *inner the stride of dim from - 1 that density implies. */
static bool dense_from(const Type *t, const Dim *coef, int from, int64_t *inner)
{
    int64_t want = 1;
    for (int d = t->rank - 1; d >= from; d--) {
        if (t->dim[d].k != 1 && !(dim_is_static(coef[d]) && coef[d].k == want))
            return false;
        want *= t->dim[d].k;
    }
    *inner = want;
    return true;
}

/* The geometry on three spatial axes, the missing leading ones of size 1, with x's
 * strides. */
static GemmConv *conv_desc(Lower *L, const ConvGeom *c, const Dim *xc)
{
    GemmConv *cv = arena_alloc(L->p->arena, sizeof *cv);
    if (!cv)
        return NULL;
    int lead = CONV_MAX_AXES - c->n;
    cv->cg = c->cg, cv->c_stride = xc[1].k;
    for (int d = 0; d < CONV_MAX_AXES; d++) {
        int s = d - lead;
        bool has = s >= 0;
        cv->in[d] = has ? c->in[s] : 1, cv->k[d] = has ? c->k[s] : 1;
        cv->stride[d] = has ? c->stride[s] : 1, cv->dil[d] = has ? c->dil[s] : 1;
        cv->pad0[d] = has ? c->pad0[s] : 0, cv->out[d] = has ? c->out[s] : 1;
        cv->x_stride[d] = has ? xc[2 + s].k : 0;
    }
    return cv;
}

/* A 1x1 kernel, unit strides, no padding: output positions are x's, B is x itself. */
static bool pointwise(const ConvGeom *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->k[i] != 1 || c->stride[i] != 1 || c->pad0[i] || c->pad1[i])
            return false;
    return true;
}

bool lower_conv_fill(Gen *G, int m, Gemm *gm)
{
    const Graph *g = G->L->g;
    const Node *n = &g->node[m];
    const Type *xt = &g->node[n->in[0]].type, *wt = &g->node[n->in[1]].type;
    ConvGeom c;
    Dim xc[COIL_MAX_RANK], wc[COIL_MAX_RANK], xoff, woff;
    int xbuf, wbuf;
    if (!conv_geometry(g, n, xt, wt, &c, G->L->e))
        return false;
    int64_t taps = 1, outs = 1, mg = c.m / c.groups, wrow, xplane;
    for (int i = 0; i < c.n; i++)
        taps *= c.k[i], outs *= c.out[i];
    if (!operand_layout(G, m, 1, &wbuf, wc, &woff) || !operand_layout(G, m, 0, &xbuf, xc, &xoff))
        return false;
    bool x_static = true;
    for (int d = 1; d < xt->rank; d++)
        x_static = x_static && dim_is_static(xc[d]);
    if (!dense_from(wt, wc, 1, &wrow) || !x_static) /* A's rows must be whole kernels */
        return lower_retry(G->L, !x_static ? n->in[0] : n->in[1]);
    memset(gm, 0, sizeof *gm);
    gm->nbatch = 2;
    gm->batch[0] = xt->dim[0], gm->batch[1] = dim_static(c.groups);
    gm->m = dim_static(mg), gm->n = dim_static(outs), gm->k = dim_static(c.cg * taps);
    int64_t wstride = wt->dim[0].k == 1 ? wrow : wc[0].k;
    gm->a = (GemmOperand){.buf = wbuf, .offset = woff,
                          .batch_stride = {dim_static(0), dim_static(mg * wstride)},
                          .row_stride = dim_static(wstride), .col_stride = dim_static(1)};
    gm->b = (GemmOperand){.buf = xbuf, .offset = xoff,
                          .batch_stride = {xc[0], dim_static(c.cg * xc[1].k)},
                          .row_stride = dim_static(outs), .col_stride = dim_static(1)};
    if (pointwise(&c) && dense_from(xt, xc, 2, &xplane)) /* x's [C, O] plane as it is */
        gm->b.row_stride = dim_static(xc[1].k);
    else if (!(gm->conv = conv_desc(G->L, &c, xc)))
        return false;
    gm->c = (GemmOperand){.batch_stride = {dim_static(c.m * outs), dim_static(mg * outs)},
                          .row_stride = dim_static(outs), .col_stride = dim_static(1)};
    gm->epilogue = gm->epi_load = -1;
    return true;
}
