/* test_onnx.c — the ONNX importer through the public API: a tiny MLP exported by PyTorch
 * (tests/onnx/fixtures, torch_mlp.py) against PyTorch's output, and models written here with
 * protobuf-c for what the node tests do not reach: named dims, symbolic shape arithmetic,
 * initializers in every storage (typed fields, raw_data, external files) and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coil/coil.h"
#include "io/npy.h"
#include "onnx.pb-c.h"
#include "tests/unit/api_check.h"

static char tmpdir[] = "/tmp/coil_test_onnx_XXXXXX";

/* ---------------------------------------------------------------- a model kit */

/* Everything one model points at, in fixed arrays: the protobuf structs hold pointers. */
typedef struct Kit {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto node[16], *nodes[16];
    Onnx__AttributeProto attr[16], *attrs[16];
    Onnx__ValueInfoProto vi[8], *ins[8], *outs[8];
    Onnx__TypeProto tp[8];
    Onnx__TypeProto__Tensor tt[8];
    Onnx__TensorShapeProto shape[8];
    Onnx__TensorShapeProto__Dimension dim[32], *dims[32];
    Onnx__TensorProto init[8], *inits[8];
    Onnx__StringStringEntryProto ext[24], *exts[24];
    char *outname[16];
    int nnode, nattr, nvi, ndim, ninit, next;
} Kit;

static void kit_start(Kit *k, const char *name, int64_t opset)
{
    memset(k, 0, sizeof *k);
    k->model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
    k->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
    k->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    k->opset.domain = "", k->opset.has_version = 1, k->opset.version = opset;
    k->opsets[0] = &k->opset;
    k->model.has_ir_version = 1, k->model.ir_version = 8;
    k->model.n_opset_import = 1, k->model.opset_import = k->opsets;
    k->graph.name = (char *)name;
    k->model.graph = &k->graph;
    k->graph.node = k->nodes, k->graph.input = k->ins, k->graph.output = k->outs;
    k->graph.initializer = k->inits;
}

/* dims: sizes, or -1 for the next name in syms */
static Onnx__ValueInfoProto *kit_value(Kit *k, const char *name, int elem, int rank,
                                       const int64_t *dims, const char *const *syms)
{
    int i = k->nvi++;
    k->tt[i] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    k->tt[i].has_elem_type = 1, k->tt[i].elem_type = elem;
    k->shape[i] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    k->shape[i].dim = &k->dims[k->ndim];
    for (int d = 0, s = 0; d < rank; d++) {
        Onnx__TensorShapeProto__Dimension *dm = &k->dim[k->ndim];
        *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (dims[d] >= 0)
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, dm->dim_value = dims[d];
        else
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM,
            dm->dim_param = (char *)syms[s++];
        k->dims[k->ndim++] = dm;
    }
    k->shape[i].n_dim = (size_t)rank;
    k->tt[i].shape = &k->shape[i];
    k->tp[i] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    k->tp[i].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, k->tp[i].tensor_type = &k->tt[i];
    k->vi[i] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    k->vi[i].name = (char *)name, k->vi[i].type = &k->tp[i];
    return &k->vi[i];
}

static void kit_input(Kit *k, const char *name, int rank, const int64_t *dims, const char *const *syms)
{
    k->ins[k->graph.n_input++] = kit_value(k, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims, syms);
}

static void kit_output(Kit *k, const char *name, int rank, const int64_t *dims, const char *const *syms)
{
    k->outs[k->graph.n_output++] = kit_value(k, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims, syms);
}

static Onnx__NodeProto *kit_node(Kit *k, const char *op, const char *name, int nin,
                                 const char **in, const char *out)
{
    Onnx__NodeProto *n = &k->node[k->nnode];
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op, n->name = (char *)name;
    n->n_input = (size_t)nin, n->input = (char **)in;
    k->outname[k->nnode] = (char *)out;
    n->n_output = 1, n->output = &k->outname[k->nnode];
    n->attribute = &k->attrs[k->nattr];
    k->nodes[k->nnode++] = n;
    k->graph.n_node = (size_t)k->nnode;
    return n;
}

/* An int (or ints) attribute on the node made last. */
static void kit_attr_ints(Kit *k, const char *name, int n, int64_t *v)
{
    Onnx__AttributeProto *a = &k->attr[k->nattr];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name, a->has_type = 1;
    if (n < 0)
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = 1, a->i = v[0];
    else
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, a->n_ints = (size_t)n, a->ints = v;
    k->attrs[k->nattr++] = a;
    k->node[k->nnode - 1].n_attribute++;
}

/* A float attribute on the node made last. */
static void kit_attr_float(Kit *k, const char *name, float v)
{
    Onnx__AttributeProto *a = &k->attr[k->nattr];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name, a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1, a->f = v;
    k->attrs[k->nattr++] = a;
    k->node[k->nnode - 1].n_attribute++;
}

/* A string attribute on the node made last. */
static void kit_attr_str(Kit *k, const char *name, const char *v)
{
    Onnx__AttributeProto *a = &k->attr[k->nattr];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name, a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_s = 1, a->s.len = strlen(v), a->s.data = (uint8_t *)v;
    k->attrs[k->nattr++] = a;
    k->node[k->nnode - 1].n_attribute++;
}

typedef enum { IN_FLOATS, IN_RAW, IN_EXTERNAL } Storage;

static Onnx__TensorProto *kit_init(Kit *k, const char *name, int elem, int rank,
                                   int64_t *dims, void *data, size_t bytes, Storage how)
{
    Onnx__TensorProto *t = &k->init[k->ninit];
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    t->name = (char *)name, t->has_data_type = 1, t->data_type = elem;
    t->n_dims = (size_t)rank, t->dims = dims;
    if (how == IN_FLOATS && elem == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        t->n_float_data = bytes / 4, t->float_data = data;
    else if (how == IN_FLOATS)
        t->n_int64_data = bytes / 8, t->int64_data = data;
    else if (how == IN_RAW)
        t->has_raw_data = 1, t->raw_data.len = bytes, t->raw_data.data = data;
    else
        t->has_data_location = 1, t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    k->inits[k->ninit++] = t;
    k->graph.n_initializer = (size_t)k->ninit;
    return t;
}

/* An external_data entry (location, offset, length) of tensor t. */
static void kit_external(Kit *k, Onnx__TensorProto *t, const char *key, const char *value)
{
    Onnx__StringStringEntryProto *e = &k->ext[k->next];
    *e = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    e->key = (char *)key, e->value = (char *)value;
    if (!t->n_external_data)
        t->external_data = &k->exts[k->next];
    k->exts[k->next++] = e;
    t->n_external_data++;
}

static const char *tmp_path(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

static bool write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(bytes, 1, n, f) == n;
    if (f)
        ok = fclose(f) == 0 && ok;
    return ok;
}

static const char *kit_save(Kit *k, const char *file, char *path, size_t n)
{
    size_t len = onnx__model_proto__get_packed_size(&k->model);
    uint8_t *buf = malloc(len);
    onnx__model_proto__pack(&k->model, buf);
    CHECK(write_file(tmp_path(file, path, n), buf, len));
    free(buf);
    return path;
}

/* ---------------------------------------------------------------- helpers */

static coil_tensor f32_tensor(int rank, const int64_t *shape, float *data)
{
    coil_tensor t = {.dtype = COIL_F32, .rank = rank, .data = data};
    memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
    return t;
}

/* Run model (compiled, then interpreted) on one input; the first output's elements close to
 * want[] within tol. */
static void check_run(const char *path, const coil_tensor *in, const float *want, int64_t n,
                      double tol)
{
    for (int interp = 0; interp < 2; interp++) {
        coil_options opt = {.interpret = interp};
        coil_error err = {0};
        coil_model *m = coil_load(path, &opt, &err);
        CHECK_OK(m, err);
        if (!m)
            return;
        coil_tensor out = {0};
        CHECK_OK(coil_run(m, in, 1, &out, 1, &err), err);
        CHECK(coil_tensor_numel(&out) == n);
        for (int64_t i = 0; out.data && i < n && i < coil_tensor_numel(&out); i++)
            if (fabs(((float *)out.data)[i] - want[i]) > tol) {
                fprintf(stderr, "%s (%s): element %lld is %g, want %g\n", path,
                        interp ? "interpreted" : "compiled", (long long)i,
                        ((float *)out.data)[i], want[i]);
                failures++;
                break;
            }
        coil_tensor_free(&out);
        coil_free(m);
    }
}

static coil_error load_error(const char *path)
{
    coil_error err = {0};
    coil_model *m = coil_load(path, NULL, &err);
    CHECK(!m);
    coil_free(m);
    return err;
}

/* ---------------------------------------------------------------- the PyTorch MLP */

static void test_torch_mlp(void)
{
    const char *model = "tests/onnx/fixtures/torch_mlp.onnx";
    Tensor x, y;
    Err e = {0};
    CHECK(npy_read("tests/onnx/fixtures/torch_mlp_x.npy", &x, &e));
    CHECK(npy_read("tests/onnx/fixtures/torch_mlp_y.npy", &y, &e));
    if (!err_ok(&e)) {
        fprintf(stderr, "%s\n", e.msg);
        failures++;
        return;
    }
    coil_error err = {0};
    coil_model *m = coil_load(model, NULL, &err);
    CHECK_OK(m, err);
    if (m) { /* the batch is the exporter's dynamic axis, named "batch" */
        const coil_info *in = coil_info_at(m, COIL_INPUT, 0);
        CHECK_STR(in->name, "x");
        CHECK_STR(in->dim[0], "batch");
        CHECK(in->shape[1] == 8);
        CHECK_STR(coil_info_at(m, COIL_OUTPUT, 0)->name, "probs");
    }
    coil_free(m);
    coil_tensor all = f32_tensor(2, x.shape, x.data);
    check_run(model, &all, y.data, 5 * 4, 1e-5);
    coil_tensor three = f32_tensor(2, (int64_t[]){3, 8}, x.data); /* another batch size */
    check_run(model, &three, y.data, 3 * 4, 1e-5);
    tensor_free(&x), tensor_free(&y);
}

/* ---------------------------------------------------------------- exported models */

/* Small random-weight ResNet-18, MobileNetV2, BERT, GPT-2 and ViT as torch.onnx.export wrote
 * them (tests/onnx/export_models.py), each against PyTorch's output for its input, compiled
 * and interpreted. The tolerance is absolute: outputs are O(1) and PyTorch's f32 rounding
 * is ~1e-6 on them. */
static const char *const exported_models[] = {"resnet18", "mobilenet_v2", "bert", "gpt2", "vit"};

static void test_exported_model(const char *name)
{
    char model[256], xpath[256], ypath[256];
    snprintf(model, sizeof model, "tests/onnx/fixtures/models/%s.onnx", name);
    snprintf(xpath, sizeof xpath, "tests/onnx/fixtures/models/%s_x.npy", name);
    snprintf(ypath, sizeof ypath, "tests/onnx/fixtures/models/%s_y.npy", name);
    Tensor x, y;
    Err e = {0};
    if (!npy_read(xpath, &x, &e) || !npy_read(ypath, &y, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        failures++;
        return;
    }
    CHECK(y.dt == DT_F32);
    coil_tensor in = {.dtype = (coil_dtype)x.dt, .rank = x.rank, .data = x.data};
    memcpy(in.shape, x.shape, sizeof x.shape);
    int64_t n = 1;
    for (int i = 0; i < y.rank; i++)
        n *= y.shape[i];
    check_run(model, &in, y.data, n, 1e-4);
    tensor_free(&x), tensor_free(&y);
}

/* ---------------------------------------------------------------- initializers */

/* y = x + w, w[2,3] stored as `how`; with external data the file beside the model. */
static void add_model(Kit *k, float *w, Storage how, const char *location)
{
    static int64_t dims[2] = {2, 3};
    static const char *in[2] = {"x", "w"};
    kit_start(k, "add", 17);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    Onnx__TensorProto *t = kit_init(k, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims, w,
                                    6 * sizeof *w, how);
    if (how == IN_EXTERNAL && location) {
        kit_external(k, t, "location", location);
        kit_external(k, t, "offset", "8");
        kit_external(k, t, "length", "24");
    }
    kit_node(k, "Add", "add", 2, in, "y");
}

static void test_initializers(void)
{
    float w[6] = {1, -2, 3.5f, 0.25f, 100, -7}, x[6] = {1, 2, 3, 4, 5, 6}, want[6];
    for (int i = 0; i < 6; i++)
        want[i] = x[i] + w[i];
    coil_tensor in = f32_tensor(2, (int64_t[]){2, 3}, x);
    char path[512], data[512];
    Kit *k = calloc(1, sizeof *k);
    add_model(k, w, IN_FLOATS, NULL);
    check_run(kit_save(k, "typed.onnx", path, sizeof path), &in, want, 6, 0);
    add_model(k, w, IN_RAW, NULL);
    check_run(kit_save(k, "raw.onnx", path, sizeof path), &in, want, 6, 0);

    /* external: 8 bytes of something else, then w */
    uint8_t blob[8 + sizeof w] = {0xde, 0xad};
    memcpy(blob + 8, w, sizeof w);
    CHECK(write_file(tmp_path("w.bin", data, sizeof data), blob, sizeof blob));
    add_model(k, w, IN_EXTERNAL, "w.bin");
    check_run(kit_save(k, "external.onnx", path, sizeof path), &in, want, 6, 0);

    add_model(k, w, IN_EXTERNAL, "missing.bin");
    coil_error err = load_error(kit_save(k, "ext_missing.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INPUT, "ext_missing.onnx", "tensor 'w'", "'missing.bin'", "cannot be opened");
    add_model(k, w, IN_EXTERNAL, "../w.bin");
    err = load_error(kit_save(k, "ext_escape.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INPUT, "tensor 'w'", "inside the model's folder");
    CHECK(write_file(tmp_path("short.bin", data, sizeof data), blob, 20));
    add_model(k, w, IN_EXTERNAL, "short.bin");
    err = load_error(kit_save(k, "ext_short.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INPUT, "tensor 'w'", "'short.bin'", "shorter");

    add_model(k, w, IN_RAW, NULL); /* raw_data of the wrong size */
    k->init[0].raw_data.len = 20;
    err = load_error(kit_save(k, "raw_short.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INPUT, "tensor 'w'", "20 bytes", "6 elements");
    free(k);
}

/* ---------------------------------------------------------------- older opsets */

/* Before opset 13 Softmax, LogSoftmax and Hardmax normalise x flattened into a matrix at
 * axis (1 by default): over [2, 3, 4] at axis 1 each of the 2 rows of 12 sums to one (at
 * opset 13 each of the 8 columns of 3 would), checked against that closed form; at the
 * last axis the two readings agree. Clip-6 takes its bounds as attributes. */
static void test_old_opsets(void)
{
    static int64_t dims[3] = {2, 3, 4}, one = 1, last = 2;
    static const char *x[] = {"x"};
    float in_data[24], want[3][24], clip[24];
    for (int i = 0; i < 24; i++)
        in_data[i] = 3 * sinf(0.7f * (float)i), clip[i] = fmaxf(-0.5f, fminf(0.5f, in_data[i]));
    for (int r = 0; r < 2; r++) {
        const float *row = in_data + 12 * r;
        int first = 0;
        double sum = 0;
        for (int j = 1; j < 12; j++)
            first = row[j] > row[first] ? j : first;
        for (int j = 0; j < 12; j++)
            sum += exp((double)row[j] - row[first]);
        for (int j = 0; j < 12; j++) {
            want[0][12 * r + j] = (float)(exp((double)row[j] - row[first]) / sum);
            want[1][12 * r + j] = (float)((double)row[j] - row[first] - log(sum));
            want[2][12 * r + j] = j == first ? 1.0f : 0.0f;
        }
    }
    coil_tensor in = f32_tensor(3, dims, in_data);
    const char *ops[3] = {"Softmax", "LogSoftmax", "Hardmax"};
    char path[512], file[64];
    Kit *k = calloc(1, sizeof *k);
    for (int i = 0; i < 3; i++) {
        kit_start(k, "old", 11);
        kit_input(k, "x", 3, dims, NULL);
        kit_output(k, "y", 3, dims, NULL);
        kit_node(k, ops[i], "y", 1, x, "y");
        if (i != 1) /* LogSoftmax: axis 1 by default */
            kit_attr_ints(k, "axis", -1, &one);
        snprintf(file, sizeof file, "old_%s.onnx", ops[i]);
        check_run(kit_save(k, file, path, sizeof path), &in, want[i], 24, 1e-5);
    }
    /* at the last axis, opset 11's Softmax is opset 13's: each row of 4 */
    float rows4[24];
    for (int r = 0; r < 6; r++) {
        double sum = 0;
        for (int j = 0; j < 4; j++)
            sum += exp((double)in_data[4 * r + j]);
        for (int j = 0; j < 4; j++)
            rows4[4 * r + j] = (float)(exp((double)in_data[4 * r + j]) / sum);
    }
    kit_start(k, "old", 11);
    kit_input(k, "x", 3, dims, NULL);
    kit_output(k, "y", 3, dims, NULL);
    kit_node(k, "Softmax", "y", 1, x, "y");
    kit_attr_ints(k, "axis", -1, &last);
    check_run(kit_save(k, "old_softmax_last.onnx", path, sizeof path), &in, rows4, 24, 1e-6);

    kit_start(k, "clip6", 9);
    kit_input(k, "x", 3, dims, NULL);
    kit_output(k, "y", 3, dims, NULL);
    kit_node(k, "Clip", "y", 1, x, "y");
    kit_attr_float(k, "min", -0.5f);
    kit_attr_float(k, "max", 0.5f);
    check_run(kit_save(k, "clip6.onnx", path, sizeof path), &in, clip, 24, 0);

    /* BatchNormalization-7 with spatial=1 (per channel, as since); spatial=0 refused */
    static int64_t cdim = 3;
    static float scale[3] = {1.5f, -2, 0.5f}, bias[3] = {0.1f, 0, -3}, mean[3] = {0.2f, -1, 2},
                 var[3] = {4, 0.25f, 1};
    static const char *bn_in[] = {"x", "scale", "bias", "mean", "var"};
    float bn[24];
    for (int i = 0; i < 24; i++) {
        int ch = i / 4 % 3;
        bn[i] = (float)((in_data[i] - mean[ch]) / sqrt(var[ch] + 1e-5) * scale[ch] + bias[ch]);
    }
    for (int64_t spatial = 1; spatial >= 0; spatial--) {
        kit_start(k, "bn7", 7);
        kit_input(k, "x", 3, dims, NULL);
        kit_output(k, "y", 3, dims, NULL);
        float *params[4] = {scale, bias, mean, var};
        for (int i = 0; i < 4; i++)
            kit_init(k, bn_in[i + 1], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &cdim, params[i],
                     sizeof scale, IN_FLOATS);
        kit_node(k, "BatchNormalization", "y", 5, bn_in, "y");
        kit_attr_ints(k, "spatial", -1, &spatial);
        kit_save(k, "bn7.onnx", path, sizeof path);
        if (spatial)
            check_run(path, &in, bn, 24, 1e-5);
        else
            CHECK_ERR(load_error(path), COIL_ERR_UNSUPPORTED, "spatial=0");
    }
    free(k);
}

/* ---------------------------------------------------------------- symbolic shapes */

/* x[B, 2, 3] reshaped to [B, 6] through Shape -> Gather -> Unsqueeze -> Concat, the way
 * exporters write x.view(x.size(0), -1); then Flatten-free Relu. */
static void test_symbolic_reshape(void)
{
    static const char *syms[] = {"B"}, *shape_in[] = {"x"}, *gather_in[] = {"s", "zero"},
                      *unsq_in[] = {"b", "axes0"}, *cat_in[] = {"b1", "six"},
                      *reshape_in[] = {"x", "target"}, *relu_in[] = {"flat"};
    static int64_t xdims[3] = {-1, 2, 3}, ydims[2] = {-1, 6}, scalar[1] = {0}, one[1] = {1},
                   zero = 0, axes0 = 0, six = 6;
    Kit *k = calloc(1, sizeof *k);
    kit_start(k, "view", 17);
    kit_input(k, "x", 3, xdims, syms);
    kit_output(k, "y", 2, ydims, syms);
    kit_init(k, "zero", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, scalar, &zero, 8, IN_FLOATS);
    kit_init(k, "axes0", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, one, &axes0, 8, IN_RAW);
    kit_init(k, "six", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, one, &six, 8, IN_FLOATS);
    kit_node(k, "Shape", "shape", 1, shape_in, "s");
    kit_node(k, "Gather", "batch", 2, gather_in, "b");
    kit_node(k, "Unsqueeze", "unsqueeze", 2, unsq_in, "b1");
    kit_node(k, "Concat", "concat", 2, cat_in, "target");
    kit_attr_ints(k, "axis", -1, &zero);
    kit_node(k, "Reshape", "reshape", 2, reshape_in, "flat");
    kit_node(k, "Relu", "relu", 1, relu_in, "y");
    char path[512];
    kit_save(k, "view.onnx", path, sizeof path);
    coil_error err = {0};
    coil_model *m = coil_load(path, NULL, &err);
    CHECK_OK(m, err);
    if (m) {
        CHECK_STR(coil_info_at(m, COIL_INPUT, 0)->type, "f32[B,2,3]");
        CHECK_STR(coil_info_at(m, COIL_OUTPUT, 0)->type, "f32[B,6]");
    }
    coil_free(m);
    float x[24], want[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i % 7) - 3, want[i] = x[i] > 0 ? x[i] : 0;
    coil_tensor in = f32_tensor(3, (int64_t[]){4, 2, 3}, x);
    check_run(path, &in, want, 24, 0);
    free(k);
}

/* ScatterND with reduction add is an index_add: 300 updates (rows 7i mod 70000, each row
 * hit up to twice) into 70,000 rows, which a [Q, N] one-hot (21M elements) refused. */
static void test_scatter_add_large(void)
{
    enum { N = 70000, Q = 300 };
    static const char *in[] = {"data", "idx", "upd"};
    static int64_t ddims[2] = {N, 1}, idims[2] = {Q, 1}, udims[2] = {Q, 1};
    static int64_t idx[Q];
    static float upd[Q], x[N], want[N];
    for (int i = 0; i < Q; i++)
        idx[i] = (int64_t)i * 7 % 1000, upd[i] = (float)i;
    for (int i = 0; i < N; i++)
        x[i] = want[i] = (float)(i % 5);
    for (int i = 0; i < Q; i++)
        want[idx[i]] += upd[i];
    Kit *k = calloc(1, sizeof *k);
    kit_start(k, "scatter", 18);
    kit_input(k, "data", 2, ddims, NULL);
    kit_output(k, "y", 2, ddims, NULL);
    kit_init(k, "idx", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, idims, idx, sizeof idx, IN_RAW);
    kit_init(k, "upd", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, udims, upd, sizeof upd, IN_RAW);
    kit_node(k, "ScatterND", "scatter", 3, in, "y");
    kit_attr_str(k, "reduction", "add");
    char path[512];
    kit_save(k, "scatter.onnx", path, sizeof path);
    coil_tensor t = f32_tensor(2, ddims, x);
    check_run(path, &t, want, N, 0);
    free(k);
}

/* A Reshape whose shape is a graph input: refused, the message naming --const; loaded
 * with that input fixed at load, the signature lacks it and the run reshapes (compiled and
 * interpreted); a value of another type, a name the model lacks and constants for a model
 * that is not ONNX are errors. */
static void test_fixed_inputs(void)
{
    static const char *in[] = {"x", "shape"};
    static int64_t xdims[2] = {2, 6}, sdims[1] = {2}, ydims[2] = {3, 4}, shape[2] = {3, 4};
    float x[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i * 0.5f;
    Kit *k = calloc(1, sizeof *k);
    kit_start(k, "fixed", 18);
    kit_input(k, "x", 2, xdims, NULL);
    k->ins[k->graph.n_input++] = kit_value(k, "shape", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1,
                                           sdims, NULL);
    kit_output(k, "y", 2, ydims, NULL);
    kit_node(k, "Reshape", "reshape", 2, in, "y");
    char path[512];
    kit_save(k, "fixed.onnx", path, sizeof path);
    coil_error err = {0};
    CHECK(!coil_load(path, NULL, &err));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "operand 1 ('shape') must be a constant",
              "`--const shape=FILE.npy`");
    const char *names[] = {"shape"}, *other[] = {"shape2"};
    coil_tensor s = {COIL_I64, 1, {2}, shape}, wrong = {COIL_I64, 2, {1, 2}, shape};
    for (int interp = 0; interp < 2; interp++) {
        coil_options o = {.interpret = interp, .constant_names = names, .constants = &s,
                          .nconstants = 1};
        coil_model *m = coil_load(path, &o, &err);
        CHECK_OK(m, err);
        CHECK(coil_count(m, COIL_INPUT) == 1 && coil_find(m, COIL_INPUT, "shape") < 0);
        coil_tensor t = {COIL_F32, 2, {2, 6}, x}, out = {0};
        CHECK_OK(m && coil_run(m, &t, 1, &out, 1, &err), err);
        CHECK(out.rank == 2 && out.shape[0] == 3 && out.shape[1] == 4 && out.data &&
              memcmp(out.data, x, sizeof x) == 0);
        coil_tensor_free(&out);
        coil_free(m);
    }
    coil_options bad = {.constant_names = names, .constants = &wrong, .nconstants = 1};
    CHECK(!coil_load(path, &bad, &err));
    CHECK_ERR(err, COIL_ERR_SHAPE, "input 'shape' fixed at load to a i64[1,2]", "declared i64[2]");
    bad = (coil_options){.constant_names = other, .constants = &s, .nconstants = 1};
    CHECK(!coil_load(path, &bad, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "input 'shape2' fixed at load, but the model has no input");
    static const char cir[] = "graph @g(%x: f32[2]) -> (y: f32[2]) {\n  return %x\n}\n";
    bad.constant_names = names;
    CHECK(!coil_load_text("g.cir", cir, strlen(cir), &bad, &err));
    CHECK_ERR(err, COIL_ERR_USAGE, "only an ONNX model's inputs can be");
    free(k);
}

/* What torch.onnx writes for x.expand(-1, ...) and torch.arange(batch) on a symbolic batch:
 * Equal and Where over the shape vector [B, 3] (B never equals -1), the shape vector
 * reshaped to its own Shape, and Range to B. y[b, j] = x[b, j] + bias[j] + b. */
static void test_symbolic_expand_and_range(void)
{
    static const char *syms[] = {"B"}, *shape_in[] = {"x"}, *eq_in[] = {"s", "minus1"},
                      *w0_in[] = {"s"}, *s2_in[] = {"s", "w0"}, *where_in[] = {"eq", "ones", "s2"},
                      *expand_in[] = {"bias", "w"}, *batch_in[] = {"s", "zero"},
                      *range_in[] = {"zero", "b", "one"}, *unsq_in[] = {"r", "axes1"},
                      *cast_in[] = {"r1"}, *add_in[] = {"x", "bb"}, *add2_in[] = {"xb", "rf"};
    static int64_t xdims[2] = {-1, 3}, two[1] = {2}, three[1] = {3}, one_dim[1] = {1},
                   scalar[1] = {0}, minus1[2] = {-1, -1}, ones[2] = {1, 1}, zero = 0, one = 1,
                   axes1 = 1, to_float = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    static float bias[3] = {10, 20, 30};
    const int i64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    Kit *k = calloc(1, sizeof *k);
    kit_start(k, "expand", 17);
    kit_input(k, "x", 2, xdims, syms);
    kit_output(k, "y", 2, xdims, syms);
    kit_init(k, "minus1", i64, 1, two, minus1, sizeof minus1, IN_RAW);
    kit_init(k, "ones", i64, 1, two, ones, sizeof ones, IN_RAW);
    kit_init(k, "zero", i64, 0, scalar, &zero, 8, IN_RAW);
    kit_init(k, "one", i64, 0, scalar, &one, 8, IN_RAW);
    kit_init(k, "axes1", i64, 1, one_dim, &axes1, 8, IN_RAW);
    kit_init(k, "bias", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three, bias, sizeof bias, IN_RAW);
    kit_node(k, "Shape", "shape", 1, shape_in, "s");
    kit_node(k, "Equal", "is_minus1", 2, eq_in, "eq");
    kit_node(k, "Shape", "shape_of_shape", 1, w0_in, "w0"); /* [2]: a constant */
    kit_node(k, "Reshape", "reshape_shape", 2, s2_in, "s2");
    kit_node(k, "Where", "expand_to", 3, where_in, "w");
    kit_node(k, "Expand", "expand", 2, expand_in, "bb");
    kit_node(k, "Gather", "batch", 2, batch_in, "b");
    kit_node(k, "Range", "arange", 3, range_in, "r");
    kit_node(k, "Unsqueeze", "column", 2, unsq_in, "r1");
    kit_node(k, "Cast", "to_float", 1, cast_in, "rf");
    kit_attr_ints(k, "to", -1, &to_float);
    kit_node(k, "Add", "add_bias", 2, add_in, "xb");
    kit_node(k, "Add", "add_index", 2, add2_in, "y");
    char path[512];
    kit_save(k, "expand.onnx", path, sizeof path);
    float x[12], want[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i, want[i] = x[i] + bias[i % 3] + (float)(i / 3);
    coil_tensor in = f32_tensor(2, (int64_t[]){4, 3}, x);
    check_run(path, &in, want, 12, 0);
    free(k);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
    static int64_t dims[2] = {2, 3}, perm[2] = {1, 0}, alpha = 3;
    static const char *x[] = {"x"}, *a[] = {"a"}, *b[] = {"b"}, *ghost[] = {"nowhere"};
    char path[512];
    Kit *k = calloc(1, sizeof *k);

    kit_start(k, "old", 6);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Relu", "relu", 1, x, "y");
    coil_error err = load_error(kit_save(k, "old.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "old.onnx", "opset 6", "opset 7 or later");

    /* an op from after the model's opset; Resize-10, whose coordinates differ */
    kit_start(k, "early", 11);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Gelu", "gelu", 1, x, "a");
    kit_node(k, "Relu", "y", 1, a, "y");
    err = load_error(kit_save(k, "early.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "'gelu' (Gelu, opset 11)",
              "not an operator of opset 11 (ONNX has it from opset 20)");
    kit_start(k, "resize10", 10);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Resize", "y", 1, x, "y");
    err = load_error(kit_save(k, "resize10.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "Resize-10 (opset 10): coil converts Resize from opset 11");

    /* every unsupported node in one error, its users skipped, supported ones fine */
    kit_start(k, "many", 17);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Relu", "fine", 1, x, "a");
    kit_node(k, "FancyOp", "fancy", 1, a, "b");
    kit_node(k, "Relu", "after_fancy", 1, b, "c");
    kit_node(k, "Elu", "odd_attribute", 1, x, "d");
    kit_attr_ints(k, "flavour", -1, &alpha);
    kit_node(k, "Transpose", "y", 1, x, "y");
    kit_attr_ints(k, "perm", 2, perm);
    kit_node(k, "Softmax", "bad_arity", 2, (const char *[]){"x", "x"}, "e");
    err = load_error(kit_save(k, "many.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "many.onnx", "3 ONNX nodes coil cannot import",
              "'fancy' (FancyOp, opset 17): no converter", "'odd_attribute' (Elu, opset 17): "
              "attribute 'flavour'", "'bad_arity' (Softmax, opset 17): 2 operands");
    CHECK(!strstr(err.message, "after_fancy") && !strstr(err.message, "'fine'"));

    /* a declared output shape the graph contradicts (Transpose makes [3,2]) */
    kit_start(k, "declared", 17);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Transpose", "t", 1, x, "y");
    err = load_error(kit_save(k, "declared.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INTERNAL, "graph output 'y'", "[2,3]", "f32[3,2]");

    kit_start(k, "ghost", 17);
    kit_input(k, "x", 2, dims, NULL);
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Relu", "r", 1, ghost, "y");
    err = load_error(kit_save(k, "ghost.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_INPUT, "ghost.onnx", "node 'r' (Relu)", "'nowhere'");

    kit_start(k, "unnamed", 17); /* a dim with neither size nor name */
    kit_input(k, "x", 2, (int64_t[]){-1, 3}, (const char *[]){""});
    kit_output(k, "y", 2, dims, NULL);
    kit_node(k, "Relu", "r", 1, x, "y");
    err = load_error(kit_save(k, "unnamed.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_UNSUPPORTED, "graph input 'x'", "dim_param");

    CHECK(write_file(tmp_path("junk.onnx", path, sizeof path), "\xff\xff\xff\xff", 4));
    err = load_error(path);
    CHECK_ERR(err, COIL_ERR_INPUT, "junk.onnx", "not an ONNX model");
    err = load_error(tmp_path("absent.onnx", path, sizeof path));
    CHECK_ERR(err, COIL_ERR_FILE, "absent.onnx");
    free(k);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_torch_mlp();
    for (size_t i = 0; i < sizeof exported_models / sizeof *exported_models; i++)
        test_exported_model(exported_models[i]);
    test_initializers();
    test_old_opsets();
    test_symbolic_reshape();
    test_symbolic_expand_and_range();
    test_scatter_add_large();
    test_fixed_inputs();
    test_errors();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_onnx: could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "test_onnx: %d failures\n", failures);
    else
        printf("test_onnx: all passed\n");
    return failures != 0;
}
