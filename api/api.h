/* api.h — private to api/: the model behind the public coil_model handle and the one way
 * the API's files report errors, so each part of the API (loading and running, building,
 * training) can live in its own file. Nothing here is installed. */
#ifndef COIL_API_API_H
#define COIL_API_API_H

#include "base/base.h"
#include "coil/coil.h"
#include "ir/ir.h"
#include "pipeline/pipeline.h"
#include "runtime/device.h"

enum { NKIND = 3 };

struct coil_model {
    Graph *g;
    coil_info *info[NKIND]; /* per coil_kind, in the graph's arena */
    int count[NKIND];
    int *param_id;  /* node ids of the parameters, graph_params order */
    Tensor *params; /* graph_params order; data is NULL until the parameter has a value */
    bool interpret;
    int threads;
    const Device *device; /* runtime/device.h */
    Compiled *compiled; /* made at the first coil_run */
    char *package;      /* a package's directory: its kernels are loaded, not compiled */
    uint64_t rng_step;  /* coil_set_rng_step */
};

/* Clears *err (NULL is fine): every API entry point does so first. */
void api_err_clear(coil_error *err);
/* Fill *err from an internal error (its code, else COIL_ERR_INPUT) and return false. */
bool api_fail_err(coil_error *err, const Err *e);
/* Fill *err with code and a formatted message and return false. */
__attribute__((format(printf, 3, 4)))
bool api_fail(coil_error *err, int code, const char *fmt, ...);

/* Take over g (freed on failure): verify it and make a model of it with opt's settings
 * (NULL: defaults; opt already checked). NULL with *err filled from e on failure. */
coil_model *api_model_from_graph(Graph *g, const coil_options *opt, Err *e, coil_error *err);

#endif
