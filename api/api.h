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

/* A GPU's architecture when no GPU compiled the model: `coil compile --arch`'s default. */
#define API_GPU_ARCH "sm_90a"

struct coil_model {
    Graph *g;
    coil_info *info[NKIND]; /* per coil_kind, in the graph's arena */
    int count[NKIND];
    int *param_id;  /* node ids of the parameters, graph_params order */
    Tensor *params; /* graph_params order; data is NULL until the parameter has a value */
    bool interpret;
    int threads;
    const Device *device; /* runtime/device.h */
    Compiled *compiled; /* made at the first run, coil_prepare or coil_save */
    char *package;      /* a package's directory: its kernels are loaded, not compiled */
    uint64_t rng_step;  /* coil_set_rng_step */
    /* api/compile.c: coil_options' compile settings */
    CompileMode mode;
    char *cache;        /* max-autotune's cache file (NULL: the default) */
    SymBind dims;       /* coil_options.dims (known[s]: given) */
    bool profile;       /* compiled with per-step timing */
    /* api/run_named.c: the last run's outputs that went to no caller, kept so the next run
     * of the same sizes writes into them instead of allocating (the CPU engine reuses) */
    Tensor *spare;
    /* api/profile.c: what coil_get_profile handed out, and the sums it counts from */
    struct ApiProfile *prof;
    int64_t runs;       /* compiled runs since the profile restarted */
};

/* Clears *err (NULL is fine): every API entry point does so first. */
void api_err_clear(coil_error *err);
/* Fill *err from an internal error (its code, else COIL_ERR_INPUT) and return false. */
bool api_fail_err(coil_error *err, const Err *e);
/* Fill *err with code and a formatted message and return false. */
__attribute__((format(printf, 3, 4)))
bool api_fail(coil_error *err, int code, const char *fmt, ...);
/* An options struct the caller compiled at `given` bytes, as this library's `size`-byte
 * struct in out: the bytes past `given` zero (the defaults of fields a newer header added);
 * a larger struct's extra bytes must be zero (fields this library does not know), else
 * COIL_ERR_USAGE naming fn, the type and both sizes. NULL given: out is not touched. */
bool api_sized(const void *given, size_t given_size, void *out, size_t size, const char *fn,
               const char *type, coil_error *err);

/* ---------------------------------------------------------------- api.c: tensors, running */

/* t as an internal tensor view (checked: dtype, rank, sizes, data); `what` and `name` for
 * the message ("input 'x': ..."). */
bool api_tensor_view(const coil_tensor *t, const char *what, const char *name, Tensor *out,
                     coil_error *err);
/* The dtype, rank and static dims of t must be want's (COIL_ERR_SHAPE naming it). */
bool api_check_type(const Graph *g, const Type *want, const Tensor *t, const char *what,
                    const char *name, coil_error *err);
/* Every parameter has a value, else COIL_ERR_USAGE naming the first without one. */
bool api_check_params(const coil_model *m, const char *fn, coil_error *err);
/* "x, labels": the names of the items of a kind, for messages. */
const char *api_name_list(const coil_model *m, coil_kind kind, char *buf, size_t size);
/* Run the model on inputs (graph order) into res (zeroed, or the last run's to reuse when
 * the CPU engine runs): compiled code (compiled or mapped now if need be) or the
 * interpreter. */
bool api_evaluate(coil_model *m, const Tensor *inputs, Tensor *res, Err *e);

/* ---------------------------------------------------------------- compile.c */

/* coil_options' compile settings checked without a graph (mode, dims' form); after
 * api_model_from_graph made the model, api_options_apply keeps them (dims' symbols
 * checked against the graph). */
bool api_options_check(const coil_options *opt, coil_error *err);
bool api_options_apply(coil_model *m, const coil_options *opt, coil_error *err);
/* The options the model compiles with (mode, cache, threads, device, profile). */
CompileOptions api_compile_options(const coil_model *m);
/* m->compiled made now if it is not yet: compiled, or a package's kernels mapped; with
 * max-autotune, GEMMs padded where that measured faster at sizes (NULL: the options'
 * dims) when they size every input. */
bool api_ensure_compiled(coil_model *m, const SymBind *sizes, Err *e);
/* sizes[0..n) as symbol bindings over base (NULL: none); `fn` names the caller in
 * messages. A symbol g lacks, a NULL one or a negative size is COIL_ERR_USAGE. */
bool api_bind_sizes(const Graph *g, const char *fn, const coil_dim_size *sizes, int n,
                    const SymBind *base, SymBind *sb, coil_error *err);
/* Release what compile.c, run_named.c and profile.c keep in the model. */
void api_model_extras_free(coil_model *m);

/* run_named.c: release the spare outputs. */
void api_spare_free(coil_model *m);
/* profile.c: the profile counts from now (after compiling, after a warm-up); release it. */
void api_profile_restart(coil_model *m);
void api_profile_free(coil_model *m);

/* Take over g (freed on failure): verify it and make a model of it with opt's settings
 * (NULL: defaults; opt already checked). NULL with *err filled from e on failure. */
coil_model *api_model_from_graph(Graph *g, const coil_options *opt, Err *e, coil_error *err);

#endif
