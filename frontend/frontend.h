/* frontend.h — loading a model file into an IR graph, whatever its format: .cir (the IR
 * text form) or .coil (the model language). Tools call model_load and nothing below it. */
#ifndef COIL_FRONTEND_H
#define COIL_FRONTEND_H

#include "ir/ir.h"

/* An input fixed at load: an ONNX model's graph input of this name becomes a constant
 * holding value, as an initializer would, so the ops that need constant operands (a
 * Reshape's shape, axes, scales) can read it; the model's inputs then lack it. */
typedef struct ModelConstant {
    const char *name;
    Tensor value; /* read during the load only */
} ModelConstant;

/* How to load a model: config overrides given on the command line, and the mode. */
typedef struct ModelOptions {
    const char *const *set; /* "name=value" strings (--set), in command-line order */
    int nset;
    bool training; /* dropout is active (the IR dropout op), else the identity */
    uint64_t seed; /* of dropout's Philox streams when training */
    const ModelConstant *constants; /* ONNX only (else an error): inputs fixed at load */
    int nconstants;
} ModelOptions;

/* Load by extension: .cir -> ir_parse_file, .coil -> coil_frontend_load, .onnx ->
 * onnx_load (frontend/onnx.h). A missing file is "FILE: cannot open: REASON"; an unknown
 * extension is an ERR_INPUT error. */
Graph *model_load(const char *path, const ModelOptions *opt, Err *e);
/* g as a loader returned it; when it failed with an error located in the model's text
 * ("FILE:LINE:COL: error: ..."), that error becomes ERR_SYNTAX. */
Graph *model_text_fault(Graph *g, Err *e);

/* The value of override `name` (the last one given wins), or NULL. */
const char *model_option(const ModelOptions *opt, const char *name);

/* The .coil frontend (frontend/to_graph.c): parse, check and lower a model file. Every
 * opt->set name must be a config constant; others are errors with a "did you mean". */
Graph *coil_frontend_load(const char *path, const ModelOptions *opt, Err *e);

#endif
