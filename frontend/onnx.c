/* onnx.c — ONNX models (.onnx, opset 7 or later) to IR graphs: the ModelProto read with
 * protobuf-c, its initializers, inputs and outputs, and each node through onnx_ops.c's table. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/onnx.h"

#ifdef COIL_HAVE_ONNX
#include "frontend/onnx_int.h"

enum { FOLD_MAX_ELEMS = 1 << 20, UNSUPPORTED_LIST_CHARS = 640 };

/* ---------------------------------------------------------------- values */

OnnxValue *onnx_value(Onnx *o, const char *name)
{
    for (int i = o->nval - 1; i >= 0; i--)
        if (strcmp(o->vals[i].name, name) == 0)
            return &o->vals[i];
    return NULL;
}

/* A new value; a name defined twice (not valid SSA) takes the later definition. */
OnnxValue *onnx_value_add(Onnx *o, const char *name)
{
    if (o->nval == o->capval) {
        int cap = o->capval ? 2 * o->capval : 64;
        OnnxValue *grown = realloc(o->vals, (size_t)cap * sizeof *grown);
        if (!grown)
            abort();
        o->vals = grown, o->capval = cap;
    }
    OnnxValue *v = &o->vals[o->nval++];
    *v = (OnnxValue){.name = name, .id = -1};
    return v;
}

static void values_free(Onnx *o)
{
    for (int i = 0; i < o->nval; i++)
        free(o->vals[i].data), free(o->vals[i].sdim);
    free(o->vals);
    for (int i = 0; i < o->nfold; i++)
        free(o->fold[i].d);
    free(o->fold);
    free(o->known);
}

/* ---------------------------------------------------------------- dtypes */

static const struct {
    int onnx;
    const char *name;
    DType dt; /* DT_COUNT: coil has no such dtype */
} onnx_dtypes[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "float", DT_F32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, "uint8", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, "int8", DT_I8},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, "uint16", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, "int16", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "int32", DT_I32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "int64", DT_I64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__STRING, "string", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "bool", DT_BOOL},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, "float16", DT_F16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, "double", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, "uint32", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, "uint64", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, "complex64", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, "complex128", DT_COUNT},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, "bfloat16", DT_BF16},
    {17, "float8e4m3fn", DT_COUNT}, {18, "float8e4m3fnuz", DT_COUNT},
    {19, "float8e5m2", DT_COUNT}, {20, "float8e5m2fnuz", DT_COUNT}, {21, "uint4", DT_COUNT},
    {22, "int4", DT_COUNT}, {23, "float4e2m1", DT_COUNT}, {24, "float8e8m0", DT_COUNT},
    {25, "uint2", DT_COUNT}, {26, "int2", DT_COUNT},
};

bool onnx_dtype(int onnx_type, DType *out)
{
    for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
        if (onnx_dtypes[i].onnx == onnx_type && onnx_dtypes[i].dt != DT_COUNT) {
            *out = onnx_dtypes[i].dt;
            return true;
        }
    return false;
}

const char *onnx_dtype_name(int onnx_type)
{
    for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
        if (onnx_dtypes[i].onnx == onnx_type)
            return onnx_dtypes[i].name;
    return "an unknown data type";
}

static bool dtype_unsupported(Onnx *o, const char *what, int onnx_type)
{
    err_set(o->e, ERR_UNSUPPORTED, "%s: %s: ONNX data type %s (%d) is not supported; coil "
            "takes float, float16, bfloat16, int8, int32, int64 and bool", o->path, what,
            onnx_dtype_name(onnx_type), onnx_type);
    return false;
}

/* ---------------------------------------------------------------- tensors */

/* The folder of the model file, for external data ("" for the current directory). */
static void model_dir(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) + 1 : 0;
    snprintf(dir, n, "%.*s", (int)len, path);
}

static const char *external_key(const Onnx__TensorProto *t, const char *key)
{
    for (size_t i = 0; i < t->n_external_data; i++)
        if (t->external_data[i]->key && strcmp(t->external_data[i]->key, key) == 0)
            return t->external_data[i]->value;
    return NULL;
}

static bool external_fail(Onnx *o, const char *name, const char *loc, const char *why)
{
    err_set(o->e, ERR_INPUT, "%s: tensor '%s': external data '%s' %s", o->path, name,
            loc ? loc : "", why);
    return false;
}

/* A non-negative decimal of an external_data entry (offset, length); def when absent. */
static bool external_int(const char *s, int64_t def, int64_t *out)
{
    if (!s) {
        *out = def;
        return true;
    }
    char *end;
    long long v = strtoll(s, &end, 10);
    *out = v;
    return *s && !*end && v >= 0;
}

/* The bytes of an externally stored tensor: `location` relative to the model's folder,
 * inside it (no absolute path, no '..'), `offset` and `length` within the file. */
static uint8_t *external_read(Onnx *o, const Onnx__TensorProto *t, const char *name, size_t want)
{
    const char *loc = external_key(t, "location");
    int64_t offset, length;
    if (!loc || !*loc)
        return external_fail(o, name, loc, "has no location"), NULL;
    if (loc[0] == '/' || strstr(loc, "..") || strchr(loc, '\\'))
        return external_fail(o, name, loc, "must be a path inside the model's folder (no "
                             "absolute path, no '..')"), NULL;
    if (!external_int(external_key(t, "offset"), 0, &offset) ||
        !external_int(external_key(t, "length"), (int64_t)want, &length))
        return external_fail(o, name, loc, "has an offset or length that is not a "
                             "non-negative integer"), NULL;
    if ((size_t)length != want) {
        char why[160];
        snprintf(why, sizeof why, "gives length %lld where the tensor's dims and dtype make %zu "
                 "bytes", (long long)length, want);
        return external_fail(o, name, loc, why), NULL;
    }
    char dir[4096], file[8192];
    model_dir(o->path, dir, sizeof dir);
    snprintf(file, sizeof file, "%s%s", dir, loc);
    FILE *f = fopen(file, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        if (f)
            fclose(f);
        return external_fail(o, name, loc, "cannot be opened: keep the data file beside the "
                             "model"), NULL;
    }
    uint8_t *buf = malloc(want ? want : 1);
    bool ok = buf && offset <= st.st_size && (int64_t)want <= st.st_size - offset &&
              fseek(f, (long)offset, SEEK_SET) == 0 && fread(buf, 1, want, f) == want;
    fclose(f);
    if (!ok) {
        free(buf);
        return external_fail(o, name, loc, "is shorter than its offset and length say"), NULL;
    }
    return buf;
}

/* Element i of a TensorProto's typed field (for data held outside raw_data). */
static double typed_element(const Onnx__TensorProto *t, DType dt, int64_t i)
{
    switch (dt) {
    case DT_F32: return t->float_data[i];
    case DT_I64: return (double)t->int64_data[i];
    case DT_F16:
    case DT_BF16: { /* int32_data holds the 16-bit patterns */
        uint16_t bits = (uint16_t)t->int32_data[i];
        return dtype_load(dt, &bits, 0);
    }
    default: return t->int32_data[i]; /* int8, int32, bool */
    }
}

static size_t typed_count(const Onnx__TensorProto *t, DType dt)
{
    return dt == DT_F32 ? t->n_float_data : dt == DT_I64 ? t->n_int64_data : t->n_int32_data;
}

static bool tensor_shape(Onnx *o, const Onnx__TensorProto *t, const char *name, DType dt,
                         OnnxValue *v)
{
    if (t->n_dims > COIL_MAX_RANK) {
        err_set(o->e, ERR_UNSUPPORTED, "%s: tensor '%s' has rank %zu; coil's limit is %d",
                o->path, name, t->n_dims, COIL_MAX_RANK);
        return false;
    }
    int64_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || (t->dims[i] && numel > INT64_MAX / 8 / t->dims[i])) {
            err_set(o->e, ERR_INPUT, "%s: tensor '%s' has a negative or overflowing dim",
                    o->path, name);
            return false;
        }
        numel *= t->dims[i];
    }
    v->type = type_make(dt, (int)t->n_dims, t->dims);
    v->numel = numel;
    return true;
}

bool onnx_tensor_read(Onnx *o, const Onnx__TensorProto *t, OnnxValue *v)
{
    const char *name = t->name && t->name[0] ? t->name : v->name ? v->name : "(constant)";
    DType dt;
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", name);
    if (!onnx_dtype(t->data_type, &dt))
        return dtype_unsupported(o, what, t->data_type);
    if (t->segment) {
        err_set(o->e, ERR_UNSUPPORTED, "%s: tensor '%s' is segmented, which coil does not read",
                o->path, name);
        return false;
    }
    if (!tensor_shape(o, t, name, dt, v))
        return false;
    size_t esize = (size_t)dtype_info[dt].size, bytes = (size_t)v->numel * esize;
    bool external = t->has_data_location &&
                    t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    uint8_t *ext = external ? external_read(o, t, name, bytes) : NULL;
    if (external && !ext)
        return false;
    const uint8_t *raw = ext ? ext : t->has_raw_data ? t->raw_data.data : NULL;
    size_t have = ext ? bytes : t->has_raw_data ? t->raw_data.len : typed_count(t, dt) * esize;
    if (have != bytes) {
        free(ext);
        err_set(o->e, ERR_INPUT, "%s: tensor '%s' holds %zu bytes of %s where its dims make "
                "%lld elements (%zu bytes)", o->path, name, have, dtype_info[dt].name,
                (long long)v->numel, bytes);
        return false;
    }
    v->data = malloc((size_t)(v->numel ? v->numel : 1) * sizeof(double));
    if (!v->data)
        abort();
    for (int64_t i = 0; i < v->numel; i++)
        v->data[i] = raw ? dtype_load(dt, raw, i) : typed_element(t, dt, i);
    free(ext);
    return true;
}

/* ---------------------------------------------------------------- operands, folding */

int onnx_operand(Onnx *o, const char *name)
{
    OnnxValue *v = onnx_value(o, name);
    if (!v) {
        err_set(o->e, ERR_INPUT, "%s: value '%s' is used before any node or input defines it",
                o->path, name);
        return -1;
    }
    if (v->id < 0 && v->data)
        v->id = b_constant(&o->b, &v->type, v->data);
    if (v->id < 0 && v->sdim)
        err_set(o->e, ERR_UNSUPPORTED, "%s: value '%s' is the shape of a tensor with symbolic "
                "dims, which coil takes only as a shape (Reshape, Expand, ConstantOfShape), "
                "not as data", o->path, name);
    return v->id;
}

static bool fold_grow(Onnx *o)
{
    int n = o->g->nnode;
    if (n <= o->nfold)
        return true;
    ITensor *f = realloc(o->fold, (size_t)n * sizeof *f);
    char *k = realloc(o->known, (size_t)n);
    if (!f || !k)
        abort();
    memset(f + o->nfold, 0, (size_t)(n - o->nfold) * sizeof *f);
    memset(k + o->nfold, 0, (size_t)(n - o->nfold));
    o->fold = f, o->known = k, o->nfold = n;
    return true;
}

static bool foldable(const Node *n)
{
    unsigned flags = op_info[n->op].flags;
    if (flags & OPF_RANDOM)
        return false;
    if ((flags & OPF_LEAF) && n->op != OP_CONSTANT && n->op != OP_FULL && n->op != OP_IOTA)
        return false;
    bool overflow = false;
    Dim numel = type_numel(&n->type, &overflow);
    return !overflow && dim_is_static(numel) && numel.k <= FOLD_MAX_ELEMS;
}

const ITensor *onnx_fold(Onnx *o, int id)
{
    if (id < 0 || !fold_grow(o))
        return NULL;
    if (o->known[id])
        return o->known[id] == 1 ? &o->fold[id] : NULL;
    o->known[id] = 2;
    const Node *n = &o->g->node[id];
    if (!foldable(n))
        return NULL;
    ITensor in[n->nin > 0 ? n->nin : 1];
    for (int j = 0; j < n->nin; j++) {
        const ITensor *v = onnx_fold(o, n->in[j]);
        if (!v)
            return NULL;
        in[j] = *v;
    }
    SymBind none = {0};
    Err ignored = {0};
    if (!interp_eval_node(o->g, id, in, &none, &o->fold[id], &ignored))
        return NULL;
    o->known[id] = 1;
    return &o->fold[id];
}

/* ---------------------------------------------------------------- the model */

/* The names the importer looks up by, which onnx.proto leaves optional: a file without
 * one is refused here, in one message, before any of them is used. */
static bool check_names(Onnx *o, const Onnx__GraphProto *gp)
{
    char why[96] = "";
    for (size_t i = 0; !why[0] && i < gp->n_input; i++)
        if (!gp->input[i]->name)
            snprintf(why, sizeof why, "graph input %zu has no name", i);
    for (size_t i = 0; !why[0] && i < gp->n_output; i++)
        if (!gp->output[i]->name)
            snprintf(why, sizeof why, "graph output %zu has no name", i);
    for (size_t i = 0; !why[0] && i < gp->n_initializer; i++)
        if (!gp->initializer[i]->name)
            snprintf(why, sizeof why, "initializer %zu has no name", i);
    for (size_t i = 0; !why[0] && i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type)
            snprintf(why, sizeof why, "node %zu has no op_type", i);
        for (size_t j = 0; !why[0] && j < n->n_attribute; j++)
            if (!n->attribute[j]->name)
                snprintf(why, sizeof why, "node %zu's attribute %zu has no name", i, j);
    }
    if (why[0])
        err_set(o->e, ERR_INPUT, "%s: %s: not a well-formed ONNX model", o->path, why);
    return !why[0];
}

static bool check_opset(Onnx *o, const Onnx__ModelProto *m)
{
    o->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !d[0] || strcmp(d, "ai.onnx") == 0)
            o->opset = m->opset_import[i]->version;
    }
    if (o->opset >= ONNX_MIN_OPSET)
        return true;
    if (o->opset < 0)
        err_set(o->e, ERR_UNSUPPORTED, "%s: the model imports no version of the default ONNX "
                "domain (opset_import); coil imports opset %d or later", o->path, ONNX_MIN_OPSET);
    else
        err_set(o->e, ERR_UNSUPPORTED, "%s: the model uses ONNX opset %lld; coil imports opset %d "
                "or later: re-export it with a newer opset (torch.onnx.export(..., "
                "opset_version=17)) or convert it (onnx.version_converter)", o->path,
                (long long)o->opset, ONNX_MIN_OPSET);
    return false;
}

static bool value_info_fail(Onnx *o, const char *kind, const char *name, const char *why)
{
    err_set(o->e, ERR_UNSUPPORTED, "%s: graph %s '%s': %s", o->path, kind, name, why);
    return false;
}

/* A graph input's or output's declared type; dims without a size or name get one made up
 * from the value's name when `anonymous` names them (inputs), else fail. */
static bool declared_type(Onnx *o, const char *kind, const Onnx__ValueInfoProto *vi, Type *t)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return value_info_fail(o, kind, vi->name, "is not a tensor (sequences, maps and "
                               "optionals are not supported)");
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!onnx_dtype(tt->elem_type, &t->dt)) {
        char what[300];
        snprintf(what, sizeof what, "graph %s '%s'", kind, vi->name);
        return dtype_unsupported(o, what, tt->elem_type);
    }
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (!sh)
        return value_info_fail(o, kind, vi->name, "has no shape; give it one (dims may be "
                               "named, dim_param)");
    if (sh->n_dim > COIL_MAX_RANK)
        return value_info_fail(o, kind, vi->name, "has a rank above coil's limit of 8");
    t->rank = (int)sh->n_dim;
    for (size_t i = 0; i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return value_info_fail(o, kind, vi->name, "has a negative dim");
            t->dim[i] = dim_static(d->dim_value);
            continue;
        }
        if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ||
            !d->dim_param[0])
            return value_info_fail(o, kind, vi->name, "has a dim with neither a size nor a name; "
                                   "name it (dim_param), e.g. with onnx.tools.update_model_dims");
        int s = graph_sym(o->g, d->dim_param, strlen(d->dim_param));
        if (s < 0)
            return value_info_fail(o, kind, vi->name, "uses more than 32 named dims");
        t->dim[i] = (Dim){1, 1u << s, 0};
    }
    return true;
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (strcmp(gp->initializer[i]->name, name) == 0)
            return true;
    return false;
}

/* The caller's value fixing graph input `name` at load, or NULL. */
static const ModelConstant *constant_named(const Onnx *o, const char *name)
{
    for (int i = 0; o->opt && i < o->opt->nconstants; i++)
        if (strcmp(o->opt->constants[i].name, name) == 0)
            return &o->opt->constants[i];
    return NULL;
}

/* Graph input vi fixed to c's value, which must fit its declared type (a symbolic
 * dimension takes any size). */
static bool constant_input(Onnx *o, const Onnx__ValueInfoProto *vi, const ModelConstant *c)
{
    Type t;
    if (!declared_type(o, "input", vi, &t))
        return false;
    const Tensor *x = &c->value;
    bool fits = x->dt == t.dt && x->rank == t.rank;
    for (int d = 0; fits && d < t.rank; d++)
        fits = !dim_is_static(t.dim[d]) || t.dim[d].k == x->shape[d];
    if (!fits) {
        char want[256], got[256];
        err_set(o->e, ERR_SHAPE, "%s: input '%s' fixed at load to a %s, but it is declared %s",
                o->path, vi->name, tensor_fmt(x, got, sizeof got), type_fmt(o->g, &t, want, sizeof want));
        return false;
    }
    OnnxValue *v = onnx_value_add(o, vi->name);
    v->type = type_make(x->dt, x->rank, x->shape);
    v->numel = tensor_numel(x);
    v->data = malloc((size_t)(v->numel ? v->numel : 1) * sizeof *v->data);
    if (!v->data)
        abort();
    for (int64_t i = 0; i < v->numel; i++)
        v->data[i] = dtype_load(x->dt, x->data, i);
    return true;
}

/* Every input fixed at load must be one of the graph's. */
static bool constants_known(Onnx *o, const Onnx__GraphProto *gp)
{
    for (int c = 0; o->opt && c < o->opt->nconstants; c++) {
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++)
            found = strcmp(gp->input[i]->name, o->opt->constants[c].name) == 0;
        if (!found) {
            err_set(o->e, ERR_USAGE, "%s: input '%s' fixed at load, but the model has no input "
                    "of that name", o->path, o->opt->constants[c].name);
            return false;
        }
    }
    return true;
}

/* Initializers become constants (an input with an initializer too is that constant), as
 * do the inputs the caller fixed at load; the other graph inputs become coil inputs, in
 * order. */
static bool define_inputs(Onnx *o, const Onnx__GraphProto *gp)
{
    if (!constants_known(o, gp))
        return false;
    if (gp->n_sparse_initializer) {
        err_set(o->e, ERR_UNSUPPORTED, "%s: sparse initializers are not supported", o->path);
        return false;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        OnnxValue *v = onnx_value_add(o, gp->initializer[i]->name);
        if (!onnx_tensor_read(o, gp->initializer[i], v))
            return false;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        Type t;
        if (is_initializer(gp, gp->input[i]->name))
            continue;
        const ModelConstant *c = constant_named(o, gp->input[i]->name);
        if (c) {
            if (!constant_input(o, gp->input[i], c))
                return false;
            continue;
        }
        if (!declared_type(o, "input", gp->input[i], &t))
            return false;
        onnx_value_add(o, gp->input[i]->name)->id = b_input(&o->b, gp->input[i]->name, &t);
    }
    return err_ok(o->e);
}

/* ---------------------------------------------------------------- nodes */

static const char *node_label(const Onnx__NodeProto *n)
{
    return n->name && n->name[0] ? n->name : n->n_output ? n->output[0] : "";
}

static void cv_vfail(const Cv *c, int code, const char *fmt, va_list ap)
{
    char what[700];
    vsnprintf(what, sizeof what, fmt, ap);
    err_set(c->o->e, code, "%s: node '%s' (%s): %s", c->o->path, node_label(c->node),
            c->node->op_type, what);
}

bool cv_unsupported(const Cv *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cv_vfail(c, ERR_UNSUPPORTED, fmt, ap);
    va_end(ap);
    return false;
}

bool cv_invalid(const Cv *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cv_vfail(c, ERR_INPUT, fmt, ap);
    va_end(ap);
    return false;
}

static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; n && (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* Why the table cannot take node n at all, or NULL when its row can try. */
static const char *node_unsupported(const Onnx__NodeProto *n, int64_t opset, char *buf,
                                    size_t len)
{
    const OnnxOp *row = onnx_op_find(n->op_type);
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return snprintf(buf, len, "domain '%s'", n->domain), buf;
    if (!row)
        return "no converter for this op";
    if (opset < onnx_op_since(n->op_type))
        return snprintf(buf, len, "not an operator of opset %lld (ONNX has it from opset %d)",
                        (long long)opset, onnx_op_since(n->op_type)), buf;
    if ((int)n->n_input < row->min_in || (int)n->n_input > row->max_in)
        return snprintf(buf, len, "%zu operands (coil takes %d to %d)", n->n_input,
                        row->min_in, row->max_in), buf;
    if ((int)n->n_output > row->max_out || n->n_output == 0)
        return snprintf(buf, len, "%zu results (coil makes at most %d)", n->n_output,
                        row->max_out), buf;
    for (size_t i = 0; i < n->n_attribute; i++)
        if (!word_in(row->attrs, n->attribute[i]->name))
            return snprintf(buf, len, "attribute '%s'", n->attribute[i]->name), buf;
    return NULL;
}

/* The unsupported nodes, gathered so one error lists them all. */
typedef struct Unsupported {
    int count;
    char list[UNSUPPORTED_LIST_CHARS + 200];
    size_t used;
    const char *op[256]; /* past the list's room: op types and counts */
    int opn[256], nop;
} Unsupported;

static void unsupported_add(Unsupported *u, const Onnx__NodeProto *n, int64_t opset,
                            const char *reason)
{
    if (u->used < UNSUPPORTED_LIST_CHARS) {
        int w = snprintf(u->list + u->used, sizeof u->list - u->used, "%s'%s' (%s, opset %lld): %s",
                         u->count ? "; " : "", node_label(n), n->op_type, (long long)opset, reason);
        u->used = w > 0 ? u->used + (size_t)w : u->used;
        if (u->used >= sizeof u->list)
            u->used = sizeof u->list - 1;
    } else {
        int i = 0;
        while (i < u->nop && strcmp(u->op[i], n->op_type) != 0)
            i++;
        if (i == u->nop && u->nop < 256)
            u->op[u->nop] = n->op_type, u->opn[u->nop++] = 0;
        if (i < u->nop)
            u->opn[i]++;
    }
    u->count++;
}

static void unsupported_report(Onnx *o, const Unsupported *u)
{
    char more[300] = "";
    size_t used = 0;
    for (int i = 0; i < u->nop && used < sizeof more; i++) {
        int w = snprintf(more + used, sizeof more - used, "%s%d %s", i ? ", " : "; and ",
                         u->opn[i], u->op[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    err_set(o->e, ERR_UNSUPPORTED, "%s: %d ONNX node%s coil cannot import: %s%s", o->path,
            u->count, u->count == 1 ? "" : "s", u->list, more);
}

/* A builder error (no node in it) re-said with the node it came from. */
static void blame_node(Onnx *o, const Onnx__NodeProto *n)
{
    if (strncmp(o->e->msg, o->path, strlen(o->path)) == 0)
        return;
    char msg[sizeof o->e->msg];
    const char *text = strncmp(o->e->msg, "error: ", 7) == 0 ? o->e->msg + 7 : o->e->msg;
    snprintf(msg, sizeof msg, "%s", text);
    int code = o->e->code;
    o->e->code = ERR_OK;
    err_set(o->e, code, "%s: node '%s' (%s): %s", o->path, node_label(n), n->op_type, msg);
}

static bool inputs_poisoned(Onnx *o, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_input; i++) {
        OnnxValue *v = n->input[i][0] ? onnx_value(o, n->input[i]) : NULL;
        if (v && v->poisoned)
            return true;
    }
    return false;
}

static void poison_outputs(Onnx *o, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_output; i++)
        if (n->output[i][0])
            onnx_value_add(o, n->output[i])->poisoned = true;
}

/* Record the converter's results; an output it left at -2 was defined by the converter
 * itself (a constant, a shape vector), and an optional output nobody names is skipped. */
static bool bind_outputs(Cv *c)
{
    for (size_t i = 0; i < c->node->n_output; i++) {
        if (!c->node->output[i][0] || c->out[i] == -2)
            continue;
        if (c->out[i] < 0)
            return cv_unsupported(c, "coil does not make its result %zu ('%s')", i,
                                  c->node->output[i]);
        onnx_value_add(c->o, c->node->output[i])->id = c->out[i];
    }
    return true;
}

/* One node: converted, or (when coil cannot) recorded in u with its outputs poisoned. A
 * malformed model (ERR_INPUT and the like) stops the import at once. */
static bool convert_node(Onnx *o, const Onnx__NodeProto *n, Unsupported *u)
{
    char why[200];
    const char *reason = node_unsupported(n, o->opset, why, sizeof why);
    if (!reason && inputs_poisoned(o, n)) {
        poison_outputs(o, n);
        return true;
    }
    Cv c = {.o = o, .node = n, .row = onnx_op_find(n->op_type)};
    for (int i = 0; i < ONNX_MAX_OUT; i++)
        c.out[i] = -1;
    o->b.loc = (Loc){0};
    if (!reason && c.row->convert(&c) && err_ok(o->e) && bind_outputs(&c))
        return true;
    if (!reason && o->e->code != ERR_UNSUPPORTED) {
        if (err_ok(o->e))
            err_set(o->e, ERR_INTERNAL, "%s: node '%s' (%s): the converter failed without saying "
                    "why", o->path, node_label(n), n->op_type);
        blame_node(o, n);
        return false;
    }
    if (!reason) { /* the converter's message, without the path and node it repeats */
        const char *p = strstr(o->e->msg, "): ");
        snprintf(why, sizeof why, "%.190s", p ? p + 3 : o->e->msg);
        reason = why;
    }
    *o->e = (Err){0};
    unsupported_add(u, n, o->opset, reason);
    poison_outputs(o, n);
    return true;
}

static bool convert_nodes(Onnx *o, const Onnx__GraphProto *gp)
{
    Unsupported *u = calloc(1, sizeof *u);
    if (!u)
        abort();
    bool ok = true;
    for (size_t i = 0; ok && i < gp->n_node; i++)
        ok = convert_node(o, gp->node[i], u);
    if (ok && u->count)
        unsupported_report(o, u), ok = false;
    free(u);
    return ok;
}

/* ---------------------------------------------------------------- outputs */

/* A declared output type that the converted value contradicts is a bug in a converter
 * (or a wrong model): said here rather than as wrong numbers later. */
static bool check_output_type(Onnx *o, const Onnx__ValueInfoProto *vi, const Type *got)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return true;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    DType dt;
    char have[256];
    type_fmt(o->g, got, have, sizeof have);
    if (tt->has_elem_type && onnx_dtype(tt->elem_type, &dt) && dt != got->dt) {
        err_set(o->e, ERR_INTERNAL, "%s: graph output '%s' is declared %s but coil made %s",
                o->path, vi->name, onnx_dtype_name(tt->elem_type), have);
        return false;
    }
    const Onnx__TensorShapeProto *sh = tt->shape;
    if (!sh)
        return true;
    bool same = (int)sh->n_dim == got->rank;
    for (size_t i = 0; same && i < sh->n_dim; i++)
        if (sh->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            same = dim_eq(got->dim[i], dim_static(sh->dim[i]->dim_value));
    if (!same) {
        char want[256] = "[";
        for (size_t i = 0; i < sh->n_dim; i++) {
            const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
            char one[64];
            if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
                snprintf(one, sizeof one, "%lld", (long long)d->dim_value);
            else
                snprintf(one, sizeof one, "%s", d->dim_param ? d->dim_param : "?");
            strncat(want, i ? "," : "", sizeof want - strlen(want) - 1);
            strncat(want, one, sizeof want - strlen(want) - 1);
        }
        strncat(want, "]", sizeof want - strlen(want) - 1);
        err_set(o->e, ERR_INTERNAL, "%s: graph output '%s' is declared of shape %s but coil "
                "made %s", o->path, vi->name, want, have);
        return false;
    }
    return true;
}

static bool define_outputs(Onnx *o, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        int id = onnx_operand(o, name);
        if (id < 0 || !check_output_type(o, gp->output[i], b_type(&o->b, id)) ||
            b_output(&o->b, id, name) < 0)
            return false;
    }
    return err_ok(o->e);
}

/* ---------------------------------------------------------------- dead nodes */

/* The graph with only the nodes its outputs need (folded shape arithmetic, constants an
 * op read at import, converters' unused parts), inputs all kept in order. */
static Graph *live_copy(const Graph *g, Err *e)
{
    char *live = calloc((size_t)g->nnode + 1, 1);
    int *map = malloc(((size_t)g->nnode + 1) * sizeof(int));
    if (!live || !map)
        abort();
    for (int i = 0; i < g->noutput; i++)
        live[g->output[i]] = 1;
    for (int i = 0; i < g->ninput; i++)
        live[g->input[i]] = 1;
    for (int id = g->nnode - 1; id >= 0; id--)
        for (int j = 0; live[id] && j < g->node[id].nin; j++)
            live[g->node[id].in[j]] = 1;
    Graph *out = graph_new(g->name);
    Builder b = builder_make(out, e);
    for (int s = 0; s < g->nsym; s++)
        graph_sym(out, g->sym[s], strlen(g->sym[s]));
    for (int id = 0; id < g->nnode && err_ok(e); id++) {
        const Node *n = &g->node[id];
        int in[n->nin > 0 ? n->nin : 1];
        for (int j = 0; j < n->nin; j++)
            in[j] = map[n->in[j]];
        b.loc = n->loc;
        if (n->op == OP_INPUT)
            map[id] = b_input(&b, node_name(n), &n->type);
        else if (live[id])
            map[id] = b_op(&b, n->op, in, n->nin, n->attr, op_info[n->op].nattr,
                           (op_info[n->op].flags & OPF_TYPED) ? &n->type : NULL);
    }
    for (int i = 0; i < g->noutput && err_ok(e); i++)
        b_output(&b, map[g->output[i]], g->output_name[i]);
    free(live), free(map);
    if (!err_ok(e)) {
        graph_free(out);
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- loading */

/* The whole file, malloc'd (its length in *len); NULL with the error set. */
static uint8_t *read_all(const char *path, size_t *len, Err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(e, ERR_FILE, "%s: cannot open", path);
        return NULL;
    }
    size_t cap = 1 << 16, got;
    uint8_t *buf = malloc(cap);
    *len = 0;
    while (buf && (got = fread(buf + *len, 1, cap - *len, f)) > 0)
        if ((*len += got) == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    fclose(f);
    if (!buf)
        err_set(e, ERR_MEMORY, "%s: out of memory reading it", path);
    return buf;
}

static Onnx__ModelProto *model_read(const char *path, Err *e)
{
    size_t len;
    uint8_t *buf = read_all(path, &len, e);
    if (!buf)
        return NULL;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        err_set(e, ERR_INPUT, "%s: not an ONNX model (the file does not parse as an ONNX "
                "ModelProto with a graph)", path);
        return NULL;
    }
    return m;
}

static Graph *convert_graph(Onnx *o, const Onnx__GraphProto *gp)
{
    const char *name = gp->name && gp->name[0] ? gp->name : "onnx";
    o->g = graph_new(name);
    o->b = builder_make(o->g, o->e);
    bool ok = define_inputs(o, gp) && convert_nodes(o, gp) && define_outputs(o, gp);
    Graph *live = ok ? live_copy(o->g, o->e) : NULL;
    graph_free(o->g);
    if (live && !ir_verify(live, o->e)) {
        graph_free(live);
        live = NULL;
    }
    return live;
}

Graph *onnx_load(const char *path, const ModelOptions *opt, Err *e)
{
    if (opt && opt->nset > 0) {
        err_set(e, ERR_INPUT, "--set %s: %s is an ONNX model, which has no config constants to "
                "set", opt->set[0], path);
        return NULL;
    }
    Onnx__ModelProto *m = model_read(path, e);
    if (!m)
        return NULL;
    Onnx o = {.path = path, .opt = opt, .e = e};
    Graph *g = check_opset(&o, m) && check_names(&o, m->graph) ? convert_graph(&o, m->graph) : NULL;
    values_free(&o);
    onnx__model_proto__free_unpacked(m, NULL);
    return g;
}

bool onnx_tensor_file(const char *path, Tensor *out, Err *e)
{
    *out = (Tensor){0};
    size_t len;
    uint8_t *buf = read_all(path, &len, e);
    if (!buf)
        return false;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!t) {
        err_set(e, ERR_INPUT, "%s: not an ONNX TensorProto", path);
        return false;
    }
    Onnx o = {.path = path, .e = e};
    OnnxValue v = {.name = "tensor"};
    bool ok = onnx_tensor_read(&o, t, &v);
    onnx__tensor_proto__free_unpacked(t, NULL);
    int64_t dims[COIL_MAX_RANK];
    for (int i = 0; ok && i < v.type.rank; i++)
        dims[i] = v.type.dim[i].k;
    ok = ok && tensor_alloc(out, v.type.dt, v.type.rank, dims, e);
    for (int64_t i = 0; ok && i < v.numel; i++)
        dtype_store(v.type.dt, out->data, i, v.data[i]);
    free(v.data);
    return ok;
}

#else

bool onnx_tensor_file(const char *path, Tensor *out, Err *e)
{
    *out = (Tensor){0};
    err_set(e, ERR_UNSUPPORTED, "%s: this build of coil has no ONNX support", path);
    return false;
}

Graph *onnx_load(const char *path, const ModelOptions *opt, Err *e)
{
    (void)opt;
    err_set(e, ERR_UNSUPPORTED, "%s: this build of coil has no ONNX import (ONNX support was "
            "not built): install libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev "
            "(scripts/setup.sh does) and rebuild", path);
    return NULL;
}

#endif
