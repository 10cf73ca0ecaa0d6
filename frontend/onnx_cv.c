/* onnx_cv.c — what the ONNX converters share: a node's operands, attributes and constant
 * operands (shapes, axes, pads), and the small compositions of builder ops they reuse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COIL_HAVE_ONNX
#include "frontend/onnx_int.h"
#include "frontend/window.h"

/* ---------------------------------------------------------------- operands, attributes */

bool cv_has(const Cv *c, size_t i)
{
    return i < c->node->n_input && c->node->input[i][0] != '\0';
}

int cv_in(Cv *c, size_t i)
{
    if (!cv_has(c, i)) {
        cv_invalid(c, "operand %zu is required", i);
        return -1;
    }
    if (!onnx_value(c->o, c->node->input[i])) {
        cv_invalid(c, "operand %zu, '%s', is not defined by an input, an initializer or an "
                   "earlier node (the nodes must be in topological order)", i, c->node->input[i]);
        return -1;
    }
    return onnx_operand(c->o, c->node->input[i]);
}

Type cv_type(Cv *c, int id)
{
    const Type *t = b_type(cv_b(c), id);
    return t ? *t : (Type){0};
}

const Onnx__AttributeProto *cv_attr(const Cv *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++)
        if (strcmp(c->node->attribute[i]->name, name) == 0)
            return c->node->attribute[i];
    return NULL;
}

int64_t cv_int(const Cv *c, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = cv_attr(c, name);
    return a ? a->i : def;
}

double cv_float(const Cv *c, const char *name, double def)
{
    const Onnx__AttributeProto *a = cv_attr(c, name);
    return a ? a->f : def;
}

const char *cv_str(const Cv *c, const char *name, const char *def, char *buf, size_t n)
{
    const Onnx__AttributeProto *a = cv_attr(c, name);
    if (!a)
        snprintf(buf, n, "%s", def);
    else
        snprintf(buf, n, "%.*s", (int)a->s.len, a->s.data ? (const char *)a->s.data : "");
    return buf;
}

bool cv_str_is(const Cv *c, const char *name, const char *def, const char *want)
{
    char buf[64];
    return strcmp(cv_str(c, name, def, buf, sizeof buf), want) == 0;
}

/* ---------------------------------------------------------------- constant operands */

const double *cv_const(Cv *c, size_t i, int64_t *numel)
{
    if (!cv_has(c, i))
        return NULL;
    OnnxValue *v = onnx_value(c->o, c->node->input[i]);
    if (v && v->data) {
        *numel = v->numel;
        return v->data;
    }
    if (!v || v->id < 0)
        return NULL;
    const ITensor *f = onnx_fold(c->o, v->id);
    if (!f)
        return NULL;
    *numel = f->n;
    return f->d;
}

bool cv_need_const(const Cv *c, size_t i)
{
    const char *name = cv_has(c, i) ? c->node->input[i] : "";
    const Node *n = name[0] && onnx_value(c->o, name) && onnx_value(c->o, name)->id >= 0
                        ? &c->o->g->node[onnx_value(c->o, name)->id] : NULL;
    bool input = n && n->op == OP_INPUT; /* the caller can fix it at load */
    return cv_unsupported(c, "operand %zu ('%s') must be a constant (an initializer, a Constant "
                          "node, or computable from them): coil needs it when it compiles%s%s%s",
                          i, name, input ? "; or fix the graph input at load: `--const " : "",
                          input ? name : "", input ? "=FILE.npy` (coil_options.constants)" : "");
}

bool cv_ints(Cv *c, size_t i, const char *attr, int64_t *out, int *n)
{
    *n = -1;
    if (cv_has(c, i)) {
        int64_t numel;
        const double *d = cv_const(c, i, &numel);
        if (!d)
            return cv_need_const(c, i);
        if (numel > ONNX_MAX_LIST)
            return cv_unsupported(c, "operand %zu holds %lld values, more than coil's %d", i,
                                  (long long)numel, ONNX_MAX_LIST);
        for (int64_t k = 0; k < numel; k++)
            out[k] = (int64_t)d[k];
        *n = (int)numel;
        return true;
    }
    const Onnx__AttributeProto *a = attr ? cv_attr(c, attr) : NULL;
    if (a) {
        if (a->n_ints > ONNX_MAX_LIST)
            return cv_unsupported(c, "attribute '%s' is longer than coil's %d", attr, ONNX_MAX_LIST);
        memcpy(out, a->ints, a->n_ints * sizeof *out);
        *n = (int)a->n_ints;
    }
    return true;
}

const OnnxValue *cv_shape_value(Cv *c, size_t i)
{
    const OnnxValue *v = cv_has(c, i) ? onnx_value(c->o, c->node->input[i]) : NULL;
    return v && v->sdim ? v : NULL;
}

bool cv_shape(Cv *c, size_t i, Dim *out, int *n)
{
    const OnnxValue *v = cv_shape_value(c, i);
    if (v) {
        memcpy(out, v->sdim, (size_t)v->numel * sizeof *out);
        *n = (int)v->numel;
        return true;
    }
    int64_t k[ONNX_MAX_LIST];
    if (!cv_ints(c, i, NULL, k, n))
        return false;
    if (*n < 0)
        return cv_invalid(c, "needs its shape operand %zu", i);
    for (int j = 0; j < *n; j++)
        out[j] = dim_static(k[j]);
    return true;
}

/* A shape vector whose entries are all static is an ordinary constant, so that any op
 * (a Slice's ends, a Range's limit) can take it, not only those that read shapes. */
static bool define_static_shape(Cv *c, size_t i, const Dim *d, int n, int rank)
{
    double k[ONNX_MAX_LIST];
    if (n > ONNX_MAX_LIST)
        return false;
    for (int j = 0; j < n; j++) {
        if (!dim_is_static(d[j]))
            return false;
        k[j] = (double)d[j].k;
    }
    cv_define_const(c, i, DT_I64, rank, (int64_t[]){n}, k);
    return true;
}

void cv_define_shape(Cv *c, size_t i, const Dim *d, int n, int rank)
{
    if (define_static_shape(c, i, d, n, rank))
        return;
    OnnxValue *v = onnx_value_add(c->o, c->node->output[i]);
    int64_t len = n;
    v->type = type_make(DT_I64, rank, &len);
    v->numel = n;
    v->sdim = malloc((size_t)(n ? n : 1) * sizeof *v->sdim);
    if (!v->sdim)
        abort();
    memcpy(v->sdim, d, (size_t)n * sizeof *d);
    c->out[i] = -2;
}

void cv_define_const(Cv *c, size_t i, DType dt, int rank, const int64_t *dims, const double *d)
{
    OnnxValue *v = onnx_value_add(c->o, c->node->output[i]);
    v->type = type_make(dt, rank, dims);
    v->numel = 1;
    for (int j = 0; j < rank; j++)
        v->numel *= dims[j];
    v->data = malloc((size_t)(v->numel ? v->numel : 1) * sizeof(double));
    if (!v->data)
        abort();
    for (int64_t j = 0; j < v->numel; j++)
        v->data[j] = dtype_round(dt, d[j]);
    c->out[i] = -2;
}

bool cv_axes(Cv *c, const int64_t *axes, int n, int rank, int64_t *out)
{
    bool seen[COIL_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if (!axis_norm(axes[i], rank, &a) || seen[a])
            return cv_invalid(c, "axis %lld is out of range for rank %d, or repeated",
                              (long long)axes[i], rank);
        seen[a] = true;
    }
    int k = 0;
    for (int a = 0; a < rank; a++)
        if (seen[a])
            out[k++] = a;
    return true;
}

/* ---------------------------------------------------------------- small compositions */

int cv_scalar(Cv *c, double v, DType dt) { return b_scalar(cv_b(c), v, dt); }
int cv_un(Cv *c, int op, int x) { return b_unary(cv_b(c), op, x); }
int cv_bin(Cv *c, int op, int x, int y) { return b_binary(cv_b(c), op, x, y); }
int cv_where(Cv *c, int cond, int x, int y) { return b_where(cv_b(c), cond, x, y); }

int cv_cast(Cv *c, int x, DType dt)
{
    if (x < 0 || cv_type(c, x).dt == dt)
        return x;
    return b_cast(cv_b(c), x, dt);
}

int cv_reshape(Cv *c, int x, int rank, const Dim *dims)
{
    if (x < 0)
        return -1;
    Type t = cv_type(c, x);
    bool same = t.rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = dim_eq(t.dim[i], dims[i]);
    if (same)
        return x;
    t.rank = rank;
    if (rank > 0) /* a scalar's dims may be NULL, which memcpy may not be given */
        memcpy(t.dim, dims, (size_t)rank * sizeof *dims);
    return b_reshape(cv_b(c), x, &t);
}

int cv_flatten_at(Cv *c, int x, int axis)
{
    if (x < 0)
        return -1;
    Type t = cv_type(c, x);
    Dim d[2] = {dim_static(1), dim_static(1)};
    bool overflow = false;
    for (int i = 0; i < t.rank; i++)
        d[i >= axis] = dim_mul(d[i >= axis], t.dim[i], &overflow);
    return cv_reshape(c, x, 2, d);
}

int cv_to_last(Cv *c, int x, int axis)
{
    return x < 0 ? -1 : b_move_axis(cv_b(c), x, axis, cv_type(c, x).rank - 1);
}

int cv_from_last(Cv *c, int x, int axis)
{
    return x < 0 ? -1 : b_move_axis(cv_b(c), x, cv_type(c, x).rank - 1, axis);
}

int cv_reverse(Cv *c, int x, int axis) { return window_reverse(cv_b(c), x, axis); }

/* trunc(x) for |x| < 2^52 through an i64 cast; larger floats, infinities and NaN are
 * already whole (or stay NaN) and pass through. */
int cv_trunc(Cv *c, int x)
{
    DType dt = cv_type(c, x).dt;
    int t = cv_cast(c, b_cast(cv_b(c), x, DT_I64), dt);
    int small = cv_bin(c, OP_LT, cv_un(c, OP_ABS, x), cv_scalar(c, 4503599627370496.0, dt));
    return cv_where(c, small, t, x);
}

int cv_floor(Cv *c, int x)
{
    DType dt = cv_type(c, x).dt;
    int t = cv_trunc(c, x);
    int above = cv_cast(c, cv_bin(c, OP_GT, t, x), dt); /* trunc rounded a negative up */
    return cv_bin(c, OP_SUB, t, above);
}

#endif
