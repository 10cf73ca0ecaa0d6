/* safetensors.h — reading and writing the safetensors weight format (an 8-byte little-endian
 * header length, a JSON header of name -> {dtype, shape, data_offsets}, then the raw data),
 * and binding a file's tensors to a graph's parameters by name. */
#ifndef COIL_RUNTIME_SAFETENSORS_H
#define COIL_RUNTIME_SAFETENSORS_H

#include "ir/ir.h"

/* The largest header accepted (the reference implementation's limit). */
#define SAFETENSORS_MAX_HEADER (100u << 20)

/* One tensor of a file: its place in the data section, already checked against it. */
typedef struct StEntry {
    const char *name;
    DType dt;
    int rank;
    int64_t shape[COIL_MAX_RANK];
    uint64_t begin, end; /* byte range within the data section */
} StEntry;

/* A file held in memory. Everything is owned by the struct; safetensors_free releases it. */
typedef struct StFile {
    Arena *arena;
    StEntry *entry; /* in header order */
    int nentry;
    const char **meta_key, **meta_value; /* the optional "__metadata__" string map */
    int nmeta;
    uint8_t *bytes; /* the whole file */
    size_t nbytes;
    const uint8_t *data; /* the data section inside bytes */
    uint64_t ndata;
} StFile;

/* Read and validate a file: header length within the file, strict JSON, known dtypes,
 * shapes that match their byte ranges, ranges inside the data, neither overlapping nor
 * leaving holes. Errors name the path and the tensor. On failure *f is empty. */
bool safetensors_read(const char *path, StFile *f, Err *e);
/* The same on bytes in memory (taken over by f: freed by safetensors_free, even on failure).
 * what names them in errors. */
bool safetensors_parse(uint8_t *bytes, size_t n, const char *what, StFile *f, Err *e);
void safetensors_free(StFile *f);
/* The entry of that name, or NULL. */
const StEntry *safetensors_find(const StFile *f, const char *name);
/* A copy of an entry's data as a host tensor (caller frees with tensor_free). */
bool safetensors_tensor(const StFile *f, const StEntry *en, Tensor *out, Err *e);

/* Load the parameters of g by name: params[i] for the i-th param node (graph_params order).
 * Dtype and shape are checked against each param's type; every missing parameter and every
 * tensor the graph does not use are listed in one error. On failure params are left empty. */
bool safetensors_bind(const Graph *g, const char *path, Tensor *params, Err *e);
/* The same, but an F32 tensor also binds an f16 or bf16 parameter, rounded to it (to
 * nearest even; beyond f16's range, inf, as torch's .to() gives): f32 weights for a model
 * retyped by `--dtype bf16|f16`. Only that conversion: other dtypes must still match. */
bool safetensors_bind_rounded(const Graph *g, const char *path, Tensor *params, Err *e);
/* The same for a list of n param nodes (of g, or of a graph g was made from: g names their
 * symbols in messages), params[i] for param[i]. */
bool safetensors_bind_nodes(const Graph *g, const Node *const *param, int n, const char *path,
                            Tensor *params, Err *e);

/* Write n tensors under names (metadata: nmeta key/value pairs, may be 0). The file is
 * written beside path, fsynced and renamed over it, so a crash or a full disk never leaves
 * half a file under the name (the temporary is removed when a write fails). */
bool safetensors_write(const char *path, const char *const *names, const Tensor *tensors, int n,
                       const char *const *meta_key, const char *const *meta_value, int nmeta,
                       Err *e);

/* The metadata key under which a sealed file carries its digest. */
#define SAFETENSORS_DIGEST_KEY "sha256"
/* safetensors_write, with the contents' digest added to the metadata: SHA-256 over every
 * tensor's name, dtype, shape and bytes and every other metadata pair, in file order, so
 * any changed byte of a tensor or a value shows (checkpoints). */
bool safetensors_write_sealed(const char *path, const char *const *names, const Tensor *tensors,
                              int n, const char *const *meta_key, const char *const *meta_value,
                              int nmeta, Err *e);
/* The digest of a file's contents as safetensors_write_sealed computes it (64 hex digits
 * and a NUL): compare with safetensors_meta(f, SAFETENSORS_DIGEST_KEY). */
void safetensors_digest(const StFile *f, char hex[65]);
/* A metadata value by key, or NULL. */
const char *safetensors_meta(const StFile *f, const char *key);

/* The safetensors dtype code ("F32") of a dtype, and back (false for codes coil lacks). */
const char *safetensors_dtype_name(DType dt);
bool safetensors_dtype_parse(const char *s, DType *dt);

#endif
