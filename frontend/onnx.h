/* onnx.h — the ONNX importer's entry points: model_load (load.c) calls onnx_load for
 * .onnx files; in a build without protobuf-c both say so in one error. */
#ifndef COIL_FRONTEND_ONNX_H
#define COIL_FRONTEND_ONNX_H

#include "frontend/frontend.h"

/* An ONNX model (opset 7 or later) as an IR graph: initializers become constants, graph
 * inputs inputs (dim_param names become symbols), each node coil ops. Every node coil
 * cannot convert is listed in one ERR_UNSUPPORTED error. */
Graph *onnx_load(const char *path, const ModelOptions *opt, Err *e);
/* A serialized TensorProto file (the node tests' input_0.pb) into a host tensor. */
bool onnx_tensor_file(const char *path, Tensor *out, Err *e);

#endif
