/* ops_fixture.h — what test_ops_shape.c and test_ops_nn.c share: types written as text
 * ("B*T,4"), graphs built with the builder, and runs at chosen symbol values. */
#ifndef COIL_TEST_OPS_FIXTURE_H
#define COIL_TEST_OPS_FIXTURE_H

#include <ctype.h>
#include <stdlib.h>

#include "check.h"

/* A graph under construction. B and T are interned first, in that order, in every
 * fixture, so a Dim means the same in two fixtures' graphs; runs bind them to sb. */
typedef struct Fx {
    Graph *g;
    Builder b;
    Err e;
    SymBind sb;
} Fx;

static inline void fx_init(Fx *f, int64_t B, int64_t T)
{
    memset(f, 0, sizeof *f);
    f->g = graph_new("t");
    f->b = builder_make(f->g, &f->e);
    graph_sym(f->g, "B", 1);
    graph_sym(f->g, "T", 1);
    f->sb.val[0] = B, f->sb.val[1] = T;
    f->sb.known[0] = f->sb.known[1] = true;
}

static inline void fx_free(Fx *f) { graph_free(f->g); }

/* "2,B*T,4" -> dims; "" is a scalar. Factors are integers or symbol names. */
static inline Type fx_type(Fx *f, DType dt, const char *dims)
{
    Type t = {.dt = dt};
    for (const char *p = dims; *p; p += *p == ',') {
        Dim d = dim_static(1);
        for (; *p && *p != ','; p += *p == '*') {
            const char *s = p;
            if (isdigit((unsigned char)*p))
                d.k *= strtoll(p, (char **)&p, 10);
            else {
                while (isalnum((unsigned char)*p))
                    p++;
                d.syms |= 1u << graph_sym(f->g, s, (size_t)(p - s));
            }
        }
        t.dim[t.rank++] = d;
    }
    return t;
}

static inline int fx_input(Fx *f, const char *name, DType dt, const char *dims)
{
    Type t = fx_type(f, dt, dims);
    return b_input(&f->b, name, &t);
}

/* Inputs x0, x1, ... of dtypes dts[i] and dims[i], then `op` over them, its result type
 * `declared` (dims, in input 0's dtype) for typed ops. The op's id, or -1. */
static inline int fx_op(Fx *f, int op, int nin, const DType *dts, const char *const *dims,
                        const Attr *attrs, int nattr, const char *declared)
{
    int ids[8];
    for (int i = 0; i < nin && i < 8; i++) {
        char name[3] = {'x', (char)('0' + i), 0};
        ids[i] = fx_input(f, name, dts[i], dims[i]);
    }
    Type t = declared ? fx_type(f, dts[0], declared) : (Type){0};
    return b_op(&f->b, op, ids, nin, attrs, nattr, declared ? &t : NULL);
}

/* Run the graph on inputs holding vals[i] (row-major, NULL: zeros) at the fixture's
 * symbol values; outputs[] takes g->noutput tensors. A build error fails the check. */
static inline bool fx_run_flops(Fx *f, const double *const *vals, Tensor *outputs, double *flops)
{
    if (!err_ok(&f->e)) {
        fprintf(stderr, "fx_run: building failed: %s\n", f->e.msg);
        check_failures++;
        return false;
    }
    Tensor in[8];
    for (int i = 0; i < f->g->ninput && i < 8; i++) {
        const Type *t = &f->g->node[f->g->input[i]].type;
        int64_t dims[COIL_MAX_RANK];
        type_resolve(t, &f->sb, dims);
        in[i] = check_tensor(t->dt, t->rank, dims, vals ? vals[i] : NULL);
    }
    bool ok = check_run(f->g, in, outputs, flops);
    for (int i = 0; i < f->g->ninput && i < 8; i++)
        tensor_free(&in[i]);
    return ok;
}

static inline bool fx_run(Fx *f, const double *const *vals, Tensor *outputs)
{
    return fx_run_flops(f, vals, outputs, NULL);
}

/* The builder's error for the last call, which must have failed. */
#define CHECK_BUILD_ERROR(f, want)                                                       \
    do {                                                                                 \
        CHECK(!err_ok(&(f)->e));                                                         \
        CHECK_STR((f)->e.msg, want);                                                     \
    } while (0)

#endif
