/* ops_leaf.c — ops without operands (input, param, constant, full, iota, rand): their
 * declared types are checked here, and the interpreter materialises their values. */
#include <stdio.h>

#include "ops.h"

/* Leaves are OPF_TYPED: *out is the declared type, and only its sanity is checked. */
bool infer_leaf(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    (void)in;
    const char *op = op_info[n->op].name;
    if ((unsigned)out->dt >= DT_COUNT || out->rank < 0 || out->rank > COIL_MAX_RANK) {
        err_set(e, ERR_INPUT, "%s: declared type has an unknown dtype or a rank outside 0..%d", op,
                COIL_MAX_RANK);
        return false;
    }
    for (int i = 0; i < out->rank; i++)
        if (out->dim[i].k < 0) {
            char buf[256];
            err_set(e, ERR_INPUT, "%s: %s: dimension %d is negative", op,
                    type_fmt(g, out, buf, sizeof buf), i);
            return false;
        }
    return true;
}

/* The static element count, or -1 when a dim is symbolic or the product overflows. */
static int64_t static_numel(const Type *t, int *symbolic_dim)
{
    int64_t count = 1;
    *symbolic_dim = -1;
    for (int i = 0; i < t->rank; i++) {
        if (!dim_is_static(t->dim[i])) {
            *symbolic_dim = i;
            return -1;
        }
        if (__builtin_mul_overflow(count, t->dim[i].k, &count))
            return -1;
    }
    return count;
}

bool infer_constant(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!infer_leaf(g, n, in, out, e))
        return false;
    char buf[256];
    type_fmt(g, out, buf, sizeof buf);
    int symbolic;
    int64_t count = static_numel(out, &symbolic);
    const Attr *value = node_attr(n, "value");
    if (symbolic >= 0) {
        err_set(e, ERR_INPUT, "constant: %s: dimension %d is symbolic; a constant needs a static shape",
                buf, symbolic);
        return false;
    }
    if (count < 0) {
        err_set(e, ERR_INPUT, "constant: %s has too many elements", buf);
        return false;
    }
    if (count != value->n) {
        err_set(e, ERR_INPUT, "constant: %s holds %lld elements but %d values are given", buf,
                (long long)count, value->n);
        return false;
    }
    return true;
}

bool infer_iota(const Graph *g, const Node *n, const Type *in, Type *out, Err *e)
{
    if (!infer_leaf(g, n, in, out, e))
        return false;
    int axis;
    if (axis_norm(node_int(n, "axis"), out->rank, &axis))
        return true;
    char buf[256];
    err_set(e, ERR_INPUT, "iota: axis %lld is out of range for %s (rank %d)",
            (long long)node_int(n, "axis"), type_fmt(g, out, buf, sizeof buf), out->rank);
    return false;
}

bool eval_constant(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)in;
    const Attr *value = node_attr(n, "value");
    if (value->n != out->n) {
        err_set(e, ERR_INPUT, "constant: %d values for %lld elements", value->n, (long long)out->n);
        return false;
    }
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = value->data[i];
    return true;
}

bool eval_full(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)in, (void)e;
    double v = node_float(n, "value");
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = v;
    return true;
}

bool eval_iota(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)in;
    int axis;
    if (!axis_norm(node_int(n, "axis"), out->rank, &axis)) {
        err_set(e, ERR_INPUT, "iota: axis %lld is out of range for rank %d",
                (long long)node_int(n, "axis"), out->rank);
        return false;
    }
    int64_t inner = 1; /* elements per step along axis */
    for (int d = axis + 1; d < out->rank; d++)
        inner *= out->shape[d];
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = (double)(i / inner % out->shape[axis]);
    return true;
}

/* in[0]: the rng step (a random op's extra operand). */
bool eval_rand(const Node *n, const ITensor *in, ITensor *out, Err *e)
{
    (void)e;
    uint64_t seed = (uint64_t)node_int(n, "seed"), offset = (uint64_t)node_int(n, "offset");
    uint64_t step = (uint64_t)in[0].d[0];
    for (int64_t i = 0; i < out->n; i++)
        out->d[i] = philox_uniform_step(seed, step, offset, (uint64_t)i);
    return true;
}
