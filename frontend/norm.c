/* norm.c — group and instance normalization as reductions and pointwise ops (instance norm is
 * group norm with one channel a group); gradients come from those ops' rules. */
#include "frontend/norm.h"

int norm_moments(Builder *b, int x, const int64_t *axes, int n, double eps, int *mean, int *inv)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int m = b_reduce(b, OP_MEAN, x, n, axes, true);
    int d = b_binary(b, OP_SUB, x, m);
    int var = b_reduce(b, OP_MEAN, b_binary(b, OP_MUL, d, d), n, axes, true);
    int r = b_unary(b, OP_RSQRT, b_binary(b, OP_ADD, var, b_scalar(b, eps, t.dt)));
    if (mean)
        *mean = m;
    if (inv)
        *inv = r;
    return b_binary(b, OP_MUL, d, r);
}

int norm_group(Builder *b, int x, int64_t groups, double eps)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    bool overflow = false;
    Dim rest = dim_static(t.dim[1].k / groups);
    for (int i = 2; i < t.rank; i++)
        rest = dim_mul(rest, t.dim[i], &overflow);
    Type g = {.dt = t.dt, .rank = 3, .dim = {t.dim[0], dim_static(groups), rest}};
    int64_t last = 2;
    int y = norm_moments(b, b_reshape(b, x, &g), &last, 1, eps, NULL, NULL);
    return b_reshape(b, y, &t);
}

int norm_instance(Builder *b, int x, double eps)
{
    Type t;
    if (!b_type_of(b, x, &t))
        return -1;
    int64_t axes[COIL_MAX_RANK];
    for (int i = 2; i < t.rank; i++)
        axes[i - 2] = i;
    return norm_moments(b, x, axes, t.rank - 2, eps, NULL, NULL);
}

int norm_channels(Builder *b, int v, const Type *y)
{
    Type t, r = {.dt = y->dt, .rank = y->rank};
    if (!b_type_of(b, v, &t))
        return -1;
    for (int i = 0; i < y->rank; i++)
        r.dim[i] = i == 1 ? t.dim[0] : dim_static(1);
    return b_reshape(b, t.dt == y->dt ? v : b_cast(b, v, y->dt), &r);
}

int norm_affine(Builder *b, int y, int weight, int bias)
{
    Type t;
    if (!b_type_of(b, y, &t))
        return -1;
    if (weight >= 0)
        y = b_binary(b, OP_MUL, y, norm_channels(b, weight, &t));
    if (bias >= 0)
        y = b_binary(b, OP_ADD, y, norm_channels(b, bias, &t));
    return y;
}
