/* type.c — dims (k times a product of symbols), tensor types, and their text:
 * "f32[B,1024]", "2*B*T". Shapes stay symbolic until the interpreter binds them. */
#include <stdio.h>
#include <string.h>

#include "ir.h"

Dim dim_mul(Dim a, Dim b, bool *overflow)
{
    Dim r = {0, a.syms | b.syms, 0};
    if ((a.syms & b.syms) || __builtin_mul_overflow(a.k, b.k, &r.k))
        *overflow = true;
    return r;
}

bool type_same_shape(const Type *a, const Type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!dim_eq(a->dim[i], b->dim[i]))
            return false;
    return true;
}

bool type_eq(const Type *a, const Type *b)
{
    return a->dt == b->dt && type_same_shape(a, b);
}

Type type_scalar(DType dt)
{
    return (Type){.dt = dt, .rank = 0};
}

Type type_make(DType dt, int rank, const int64_t *dims)
{
    Type t = {.dt = dt, .rank = rank};
    for (int i = 0; i < rank; i++)
        t.dim[i] = dim_static(dims[i]);
    return t;
}

Dim type_numel(const Type *t, bool *overflow)
{
    Dim n = dim_static(1);
    for (int i = 0; i < t->rank; i++)
        n = dim_mul(n, t->dim[i], overflow);
    return n;
}

bool axis_norm(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

char *dim_fmt(const Graph *g, Dim d, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    if (d.syms == 0 || d.k != 1)
        len += (size_t)snprintf(buf, n, "%lld", (long long)d.k);
    for (int i = 0; i < COIL_MAX_SYMS && len < n; i++) {
        if (!(d.syms >> i & 1))
            continue;
        const char *name = g && i < g->nsym ? g->sym[i] : "?";
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "*" : "", name);
        if (d.sq >> i & 1 && len < n)
            len += (size_t)snprintf(buf + len, n - len, "*%s", name);
    }
    return buf;
}

int64_t dim_eval(Dim d, const int64_t *val)
{
    int64_t v = d.k;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if (d.syms >> s & 1)
            v *= d.sq >> s & 1 ? val[s] * val[s] : val[s];
    return v;
}

char *type_fmt(const Graph *g, const Type *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s[", dtype_info[t->dt].name);
    for (int i = 0; i < t->rank && len < n; i++) {
        char d[256];
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "," : "", dim_fmt(g, t->dim[i], d, sizeof d));
    }
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}

bool type_resolve(const Type *t, const SymBind *sb, int64_t *dims)
{
    for (int i = 0; i < t->rank; i++) {
        int64_t v = t->dim[i].k;
        for (int s = 0; s < COIL_MAX_SYMS; s++) {
            if (!(t->dim[i].syms >> s & 1))
                continue;
            if (!sb || !sb->known[s] || __builtin_mul_overflow(v, sb->val[s], &v))
                return false;
        }
        dims[i] = v;
    }
    return true;
}

int64_t type_bytes(const Type *t, const SymBind *sb)
{
    int64_t dims[COIL_MAX_RANK], n = dtype_info[t->dt].size;
    if (!type_resolve(t, sb, dims))
        return -1;
    for (int d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(n, dims[d], &n))
            return -1;
    return n;
}
