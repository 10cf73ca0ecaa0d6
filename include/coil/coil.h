/* coil.h — the public C API of coil, the only header a program embedding coil includes:
 * load a model, inspect its signature, give its parameters values, run it on host tensors.
 * docs/API.md walks through all of it with a complete example program.
 *
 * coil_run compiles the model for the CPU at its first call (fusion, LLVM: milliseconds to
 * a second) and runs the compiled kernels from then on, unless coil_prepare compiled it
 * ahead; coil_save writes the package `coil compile -o` writes, which coil_load maps with
 * no compiling. coil_options.interpret asks for the reference interpreter instead (every
 * op in f64, rounded to its dtype: exact, slow).
 *
 * Conventions:
 * - Functions taking `coil_error *err` report failure through it (err may be NULL when the
 *   caller does not want the message) and by their return value (NULL or false). They
 *   clear *err on entry, so after a call it describes that call alone.
 * - No function crashes on a bad argument: a NULL model, a count or index out of range,
 *   a NULL pointer where data is needed are errors with code COIL_ERR_USAGE.
 * - Names and other strings the API hands out are owned by the model and stay valid until
 *   coil_free. Tensors coil_run returns are the caller's, released with coil_tensor_free.
 * - Different models are independent and may be used from different threads at once; one
 *   model must not be used from two threads at the same time.
 *
 * Works from C99 and C++. Installed (cmake --install), it is found by pkg-config
 * (`pkg-config --cflags --libs coil`) or CMake (`find_package(coil)`, target coil::coil),
 * which link libcoil.so: only the coil_ functions below are exported from it. */
#ifndef COIL_COIL_H
#define COIL_COIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "coil/coil_version.h" /* COIL_VERSION, from the build's project(VERSION) */

#define COIL_MAX_RANK 8

/* What libcoil.so exports: these functions and nothing else. */
#if defined(__GNUC__)
#define COIL_API __attribute__((visibility("default")))
#else
#define COIL_API
#endif

/* "0.1.0": the version of the library linked, which may differ from COIL_VERSION, the
 * version of the header compiled against. */
COIL_API const char *coil_version(void);

/* ---------------------------------------------------------------- errors */

/* What kind of failure it was (coil_error.code). The `coil` command exits with 2 for
 * COIL_ERR_USAGE and 1 for every other. */
enum {
    COIL_OK = 0,
    COIL_ERR_INPUT = 1,       /* bad input not classified below (a malformed weights file,
                                 a config override the model lacks, ...) */
    COIL_ERR_USAGE = 2,       /* the API misused: NULL arguments, wrong counts or indices,
                                 running before every parameter has a value */
    COIL_ERR_FILE = 3,        /* a file missing or unreadable */
    COIL_ERR_SYNTAX = 4,      /* the model's text is wrong: FILE:LINE:COL in the message */
    COIL_ERR_SHAPE = 5,       /* an input or parameter of the wrong dtype or shape */
    COIL_ERR_UNSUPPORTED = 6, /* not supported (yet, or by this build of coil) */
    COIL_ERR_DEVICE = 7,      /* the device asked for is missing or failed */
    COIL_ERR_MEMORY = 8,      /* out of memory */
    COIL_ERR_IO = 9,          /* a write failed */
    COIL_ERR_INTERNAL = 10,   /* a bug in coil: please report it with the message */
};

/* Owned by the caller (a local variable is fine). The message says where (file:line:col,
 * or the input's or parameter's name), what, and what to do; it is "" when code is 0. */
typedef struct coil_error {
    int code;
    char message[1024];
} coil_error;

/* ---------------------------------------------------------------- tensors */

/* Element types. Host buffers hold them natively: f32 as float, f16 and bf16 as their
 * 16 bits in a uint16_t, i8/i32/i64 as int8_t/int32_t/int64_t, bool as one byte (0 or 1;
 * any nonzero byte reads as 1). */
typedef enum coil_dtype {
    COIL_F32,
    COIL_F16,
    COIL_BF16,
    COIL_I8,
    COIL_I32,
    COIL_I64,
    COIL_BOOL,
} coil_dtype;

/* "f32", "bf16", ... as the IR text writes them; NULL for a value outside the enum. */
COIL_API const char *coil_dtype_name(coil_dtype dtype);
/* Bytes per element; 0 for a value outside the enum. */
COIL_API size_t coil_dtype_size(coil_dtype dtype);

/* A dense row-major tensor in host memory. shape[0..rank) are the sizes; the rest is
 * ignored. A rank-0 tensor holds one element. data may be NULL only when the tensor has
 * no elements. */
typedef struct coil_tensor {
    coil_dtype dtype;
    int rank;
    int64_t shape[COIL_MAX_RANK];
    void *data;
} coil_tensor;

/* The number of elements (1 for rank 0); -1 when rank or a size is invalid or the count
 * overflows. */
COIL_API int64_t coil_tensor_numel(const coil_tensor *t);
/* Release a tensor coil_run allocated and zero the struct; NULL or an already freed (or
 * zeroed) tensor is a no-op. Only for tensors coil allocated. */
COIL_API void coil_tensor_free(coil_tensor *t);

/* ---------------------------------------------------------------- loading */

typedef struct coil_model coil_model;

/* The size of a symbolic dimension, by name: {"B", 8}. */
typedef struct coil_dim_size {
    const char *symbol;
    int64_t size;
} coil_dim_size;

/* How to load a model. A NULL coil_options means all defaults (zero-initialise to get
 * them: `coil_options o = {0};`). The fields are `coil run`'s and `coil compile`'s flags;
 * fields are only ever added at the end. */
typedef struct coil_options {
    const char *const *overrides; /* "name=value" config overrides of a .coil model, like
                                     `coil run --set`; the last one for a name wins */
    int noverrides;
    bool training; /* dropout is active (masks drawn from seed); else it is the identity */
    uint64_t seed; /* of dropout's random streams in training mode */
    bool interpret; /* coil_run evaluates with the reference interpreter, not compiled code */
    int threads;    /* threads for compiled kernels; 0: one per CPU. The models of a
                       process that ask for the same count share one pool of them (their
                       kernels take turns), so loading more models starts no more threads */
    const char *device; /* NULL or "cpu": this CPU; "cuda": the first NVIDIA GPU (kernels by
                           NVRTC, GEMMs on cuBLAS; inputs and outputs stay host tensors).
                           Without a usable GPU the first coil_run fails saying why. */
    const char *mode;   /* as --mode: NULL or "default" (the heuristics), "reduce-overhead"
                           (on a GPU each run replayed as a CUDA graph; on the CPU as default),
                           "max-autotune" (every kernel's candidates measured at the first run
                           of each size, the fastest kept in the cache). Any other name is
                           COIL_ERR_USAGE listing these. */
    const char *cache;  /* as --cache: max-autotune's cache file (NULL: $COIL_CACHE_DIR/
                           autotune.json, else ~/.cache/coil/autotune.json) */
    const coil_dim_size *dims; /* as --dim: symbol sizes known ahead (copied at load). They
                           size coil_prepare's warm-up and coil_init_params' parameter
                           symbols when those calls give none, plan.json in coil_save's
                           package, and where max-autotune pads GEMMs. A symbol the model
                           lacks is COIL_ERR_USAGE. */
    int ndims;
    bool profile;       /* time every step of compiled runs for coil_get_profile (a clock
                           read per step) */
    const char *const *constant_names; /* inputs fixed at load, as `coil run --const`: an
                           ONNX model's graph input of each name becomes a constant holding
                           constants[i] (read during the load only), as an initializer would,
                           so the ops that need constant operands (a Reshape's shape, axes,
                           scales) can read it; the model's signature then lacks it. The
                           model is specialised to those values. Other formats: usage error */
    const coil_tensor *constants;
    int nconstants;     /* at most COIL_MAX_CONSTANTS */
} coil_options;

#define COIL_MAX_CONSTANTS 64

/* Load a model file: .cir (IR text) or .coil (the model language), by extension; or a
 * package directory that `coil compile` wrote, whose manifest and files are checked now
 * and whose kernels the first coil_run loads without compiling (milliseconds; the device
 * must be the package's). The model is verified; on failure NULL with the message (a
 * missing file is COIL_ERR_FILE and names it; an error in its text is COIL_ERR_SYNTAX at
 * FILE:LINE:COL). Overrides are an error for .cir and for packages. */
COIL_API coil_model *coil_load(const char *path, const coil_options *opt, coil_error *err);

/* The same from text in memory (len bytes, no terminator needed). name stands for the
 * file in messages (NULL: "<text>") and picks the format: a name ending in ".coil" is the
 * model language (its includes resolve relative to name), any other is IR text. */
COIL_API coil_model *coil_load_text(const char *name, const char *text, size_t len,
                                    const coil_options *opt, coil_error *err);

/* Release a model and everything it owns; NULL is a no-op. */
COIL_API void coil_free(coil_model *model);

/* ---------------------------------------------------------------- introspection */

/* What a model's signature lists: its inputs and outputs in order, and its parameters
 * (in graph order, named the way a PyTorch state dict names them: "fc1.weight"). */
typedef enum coil_kind { COIL_INPUT, COIL_OUTPUT, COIL_PARAM } coil_kind;

/* One input, output or parameter. A symbolic dimension (a batch "B", a merged "B*T") has
 * shape -1 and its text in dim; a static one has its size in both. Entries past rank are
 * 0 and NULL. */
typedef struct coil_info {
    const char *name;
    const char *type; /* the whole type as text: "f32[B,16]" */
    coil_dtype dtype;
    int rank;
    int64_t shape[COIL_MAX_RANK];
    const char *dim[COIL_MAX_RANK]; /* "16", "B", "B*T" */
    const char *init; /* a parameter's initializer ("xavier", "normal(0.02)"), else NULL */
    bool buffer;      /* a parameter the model keeps but does not train (a `buffer`: batch
                         norm's running statistics), which a training step sets */
} coil_info;

/* How many items of that kind; 0 for a NULL model or an unknown kind. */
COIL_API int coil_count(const coil_model *model, coil_kind kind);
/* Item index of that kind (owned by the model); NULL when model, kind or index is bad. */
COIL_API const coil_info *coil_info_at(const coil_model *model, coil_kind kind, int index);
/* The index of the item of that kind named name, or -1. */
COIL_API int coil_find(const coil_model *model, coil_kind kind, const char *name);

/* ---------------------------------------------------------------- parameters */

/* Give every parameter its initial value from its initializer (zeros, ones, normal,
 * uniform, xavier, kaiming), drawn from Philox streams keyed by seed and the parameter's
 * name, so the values match `coil run --seed`. sizes[0..nsizes) size the symbols that
 * parameter shapes use (rare; NULL/0 when none do; coil_options.dims fill in the rest): a
 * parameter with an unsized symbol is an error naming both. On failure the parameters keep their previous values. */
COIL_API bool coil_init_params(coil_model *model, uint64_t seed, const coil_dim_size *sizes,
                               int nsizes, coil_error *err);

/* Load every parameter by name from a .safetensors file, with dtypes and shapes checked;
 * every missing parameter and every unused tensor is listed in one error. All or nothing:
 * on failure the parameters keep their previous values. */
COIL_API bool coil_load_weights(coil_model *model, const char *path, coil_error *err);

/* Set parameter index (see coil_find) to a copy of value, whose dtype, rank and static
 * sizes must be the parameter's. On failure the parameter keeps its previous value. */
COIL_API bool coil_set_param(coil_model *model, int index, const coil_tensor *value, coil_error *err);

/* ---------------------------------------------------------------- running */

/* Evaluate the model: compiled code (compiled at the first call), or the interpreter when
 * the model was loaded with coil_options.interpret. inputs[0..ninputs) are the model's
 * inputs in signature order,
 * caller-owned and only read: ninputs must be coil_count(model, COIL_INPUT), and each
 * input's dtype, rank and static sizes must be its declared ones (the message names the
 * input). Symbolic sizes (the batch) bind from the inputs' shapes and must agree across
 * inputs. Every parameter must have a value (coil_init_params, coil_load_weights,
 * coil_set_param) or the call fails naming the first one that has none.
 *
 * noutputs must be coil_count(model, COIL_OUTPUT). On success outputs[i] is overwritten
 * (not freed: release a previous result first) with a tensor coil allocated, in the
 * output's dtype at the bound sizes; free each with coil_tensor_free. On failure
 * outputs[i] is zeroed for every i below both noutputs and the model's output count. */
COIL_API bool coil_run(coil_model *model, const coil_tensor *inputs, int ninputs,
                       coil_tensor *outputs, int noutputs, coil_error *err);

/* The rng step of the coil_run calls after this one (0 until set). In training mode each
 * dropout draws its mask from (seed, its offset, the step): give each training step its
 * own step for a new mask, the same step for the same mask (a forward and its backward).
 * Nothing is recompiled; step 0 draws what earlier versions of coil drew. */
COIL_API bool coil_set_rng_step(coil_model *model, uint64_t step, coil_error *err);

/* ---------------------------------------------------------------- compiling ahead */

/* Warm the model up now, so that no coil_run pays for it: compile it (or map a package's
 * kernels), then, when every input's size is known (sizes[0..nsizes), coil_options.dims for
 * the symbols those leave out, or an input with no symbols) and every parameter has a
 * value, run it once on zeros at those sizes, which plans its memory and, with
 * max-autotune, tunes its kernels (and pads its GEMMs for those sizes). Sizes given here
 * ask for that run: an input they leave unsized, or a parameter without a value, is then
 * COIL_ERR_USAGE naming it. A model already compiled is not compiled again; an interpreted
 * one has nothing to prepare. Compile errors are reported here as coil_run would. */
COIL_API bool coil_prepare(coil_model *model, const coil_dim_size *sizes, int nsizes,
                           coil_error *err);

/* Write the package `coil compile MODEL -o dir` writes (model.cir, program.loop, plan.json,
 * the kernels' object or, for device "cuda", CUDA C and a cubin; a manifest with each
 * file's SHA-256 written last, every file atomically), creating dir; coil_load and `coil run
 * dir` load it without compiling. The model is compiled for it if it is not yet (and keeps
 * the compiled code for its runs); options as loaded (mode max-autotune: the device
 * compiler's full optimisation; dims: plan.json's offsets). A failed write is COIL_ERR_IO
 * or COIL_ERR_FILE naming the file; the directory then holds no manifest, so no package. */
COIL_API bool coil_save(coil_model *model, const char *dir, coil_error *err);

/* ---------------------------------------------------------------- running by name */

/* Evaluate the model as coil_run does, with inputs and outputs matched by name and the
 * outputs written where the caller says (ONNX Runtime's Run with its IoBinding's host
 * side):
 * - input_names[i] names inputs[i]: any order, every input exactly once (ninputs is
 *   coil_count(model, COIL_INPUT)); input_names NULL: the signature's order.
 * - output_names[0..noutputs) chooses the outputs returned, in that order, each at most
 *   once; output_names NULL: all of them in the signature's order (noutputs their count).
 * - outputs[i] with data set is the caller's buffer: its dtype, rank and shape must be the
 *   output's at these inputs (checked before anything runs: COIL_ERR_SHAPE naming the
 *   output and both types) and the result is written into it (copied from coil's own
 *   output buffer, which is reused from call to call: nothing is allocated per call once
 *   the sizes repeat). With data NULL (zero the struct) coil allocates the tensor and
 *   outputs[i] describes it: free it with coil_tensor_free.
 * Unknown, repeated or missing names are COIL_ERR_USAGE listing the model's. On failure
 * every outputs[i] is as it was (a caller's buffer untouched). */
COIL_API bool coil_run_named(coil_model *model, const char *const *input_names,
                             const coil_tensor *inputs, int ninputs,
                             const char *const *output_names, coil_tensor *outputs,
                             int noutputs, coil_error *err);

/* ---------------------------------------------------------------- IR dumps */

/* The model at a stage of the compiler, as text (`coil dump --after STAGE`, `coil compile
 * --emit`): "input" (the IR as loaded: for a package, its optimised IR), the name of a
 * pass of the device's pipeline ("verify", "decompose", "colsum", "fold", "cse", "dce":
 * the graph after it), "fuse" (the optimised graph, its fusion plan as comments), "lower"
 * (the loop IR), and the kernels' code: on the CPU "llvm-ir" and "asm", on a GPU "cuda"
 * (CUDA C) and "ptx". A compiled model's later stages are those of what runs. An unknown
 * stage is COIL_ERR_USAGE listing the model's. The string is the caller's: release it with
 * coil_string_free. */
COIL_API char *coil_dump(const coil_model *model, const char *stage, coil_error *err);
/* The same written to path (atomically: whole or not at all). */
COIL_API bool coil_dump_file(const coil_model *model, const char *stage, const char *path,
                             coil_error *err);
/* Release a string coil returned; NULL is a no-op. */
COIL_API void coil_string_free(char *s);

/* ---------------------------------------------------------------- profile */

/* One step of the compiled program (a fused kernel, a GEMM with its epilogue, attention),
 * as `coil bench --profile` lists them. */
typedef struct coil_step_time {
    int step;            /* its place in the program */
    const char *name;    /* "fc1: gemm+relu": the layer it computes and what */
    const char *layer;   /* "fc1" (the parameters' prefix); "" when nothing names one */
    const char *kind;    /* "kernel", "gemm", "attention" */
    double ms;           /* per run, averaged over the runs counted */
    double share;        /* of a whole run (the steps' sum), 0..1 */
    double flops;        /* at the latest run's sizes */
    int64_t bytes;       /* the buffers it reads and writes, each once */
} coil_step_time;

typedef struct coil_profile {
    int64_t runs;                /* the runs counted */
    double ms;                   /* a whole run: the steps' sum */
    int nsteps;
    const coil_step_time *steps; /* every step, slowest first; owned by the model, valid
                                    until the next coil_get_profile or coil_free */
} coil_profile;

/* The steps' times over the runs since the model was compiled, since coil_prepare's
 * warm-up, or since coil_reset_profile. Needs a model loaded with coil_options.profile
 * and compiled (not interpreted), and at least one run since then (else COIL_ERR_USAGE
 * saying which). */
COIL_API bool coil_get_profile(coil_model *model, coil_profile *out, coil_error *err);
/* Count from now on (leave out the first runs, say). */
COIL_API bool coil_reset_profile(coil_model *model, coil_error *err);

/* ---------------------------------------------------------------- builder */

/* A graph made op by op from C (a program's own computation, captured without a model
 * file), then verified and compiled like any loaded model:
 *
 *     coil_builder *b = coil_builder_new("mlp", &err);
 *     int x = coil_input(b, "x", "f32[B,16]", &err);
 *     int w = coil_param(b, "fc.weight", "f32[16,4]", "xavier", &err);
 *     int y = coil_op(b, "matmul", (int[]){x, w}, 2, NULL, NULL, &err);
 *     int p = coil_op(b, "softmax", &y, 1, "axis=-1", NULL, &err);
 *     coil_output(b, "probs", p, &err);
 *     coil_model *m = coil_build(b, NULL, &err);   (then coil_init_params, coil_run, ...)
 *     coil_builder_free(b);
 *
 * Values are small integer handles (>= 0), the ids of the graph's nodes; -1 is no value.
 * Types are written as in the IR text ("f32[B,16]", "i64[]"; a dim is a size, a symbol
 * such as B bound from the inputs when the model runs, or a product "B*T"), and so are
 * attributes ("axes=[1], keepdim=true"); docs/IR.md lists the ops with their operands
 * and attributes.
 *
 * A call that fails adds nothing and returns -1 (or false) with the error; the builder
 * stays usable, as if the call had not been made. A later call given -1 as a value fails
 * too, repeating the first failure's message, so a program may check only the end of a
 * sequence (coil_output's and coil_build's results). Errors name the op as the value it
 * would have made ("%5 = matmul") and what is wrong: an unknown op (with the nearest
 * name), the wrong number of operands or a required attribute missing (COIL_ERR_USAGE);
 * type or attribute text that does not parse, or names an attribute the op lacks or gives
 * one of the wrong kind (COIL_ERR_SYNTAX: the IR parser reads it); operands of types the op
 * cannot take, listed with their types (COIL_ERR_SHAPE). */
typedef struct coil_builder coil_builder;

/* An empty graph named name (NULL: "main"); NULL only when memory runs out. */
COIL_API coil_builder *coil_builder_new(const char *name, coil_error *err);
/* Release the builder (not the models built from it); NULL is a no-op. */
COIL_API void coil_builder_free(coil_builder *b);

/* The next input of the signature, of the given type; names are unique among inputs. */
COIL_API int coil_input(coil_builder *b, const char *name, const char *type, coil_error *err);
/* A parameter (named as a state dict names it: "fc.weight", unique) with its initializer
 * for coil_init_params: "zeros" (NULL), "ones", "normal(std)", "normal(mean, std)",
 * "uniform(a, b)", "xavier", "kaiming"; checked now. */
COIL_API int coil_param(coil_builder *b, const char *name, const char *type, const char *init,
                        coil_error *err);
/* Any other op, by its IR name: args[0..nargs) its operands; attrs its attributes as the
 * IR text writes them between braces (NULL or "": none; the others take their defaults);
 * type the result type, needed by the ops whose type is declared rather than inferred
 * (constant, full, iota, rand, cast, reshape, expand) and for the others NULL or a check
 * of the inferred type. The new value's handle. */
COIL_API int coil_op(coil_builder *b, const char *op, const int *args, int nargs,
                     const char *attrs, const char *type, coil_error *err);
/* Value as the next output of the signature, named name (unique; NULL: "out<i>"). */
COIL_API bool coil_output(coil_builder *b, const char *name, int value, coil_error *err);

/* A model of the graph built so far, verified like a loaded one (its parameters without
 * values until coil_init_params, coil_load_weights or coil_set_param). opt as for
 * coil_load (NULL: defaults), without overrides (they are for .coil models). The builder
 * is left as it was: build again after more calls, or free it. */
COIL_API coil_model *coil_build(coil_builder *b, const coil_options *opt, coil_error *err);

/* ---------------------------------------------------------------- training */

/* Training a model through the API, one optimizer step per call on batches the caller
 * gives, with `coil train`'s joint forward-and-backward graph (compiled for the model's
 * device and threads, even for a model loaded with coil_options.interpret), optimizers and
 * checkpoints:
 *
 *     coil_train_options o = coil_train_defaults("sgd");
 *     o.lr = 0.1;
 *     coil_trainer *tr = coil_trainer_new(model, &o, &err);   (after coil_init_params)
 *     for (int s = 0; s < steps; s++)
 *         coil_train_step(tr, batch, 2, NULL, &loss, &err);    (x, then its targets)
 *     coil_trainer_sync(tr, &err);                             (coil_run uses them now)
 *     coil_trainer_save(tr, "ckpt", &err);
 *     coil_trainer_free(tr);
 *
 * The loss is the model's output named "loss", or with loss "cross_entropy" the cross
 * entropy of its first output (float logits [..., classes]) against an input "targets"
 * added after the model's own (i64, the logits' shape less the class dimension), as
 * `coil train --loss cross_entropy` makes it. */
typedef struct coil_trainer coil_trainer;

/* `coil train`'s hyper-parameters; coil_train_defaults gives its defaults. */
typedef struct coil_train_options {
    const char *optimizer; /* "adamw", "sgd" or "lion" */
    double lr;             /* the learning rate: the peak, after any warm-up (3e-4) */
    double min_lr;         /* where the cosine decay ends (3e-5) */
    int64_t warmup;        /* steps of linear warm-up from 0 (0) */
    int64_t cosine_steps;  /* lr decays on a cosine to min_lr at this step; 0: constant */
    double weight_decay;   /* decoupled, on parameters of rank >= 2 (0.1) */
    double beta1, beta2;   /* AdamW's (0.9, 0.95) and Lion's (0.9, 0.99) */
    double eps;            /* AdamW's (1e-8) */
    double momentum;       /* SGD's (0.9) */
    double clip;           /* the global gradient norm clipped to this (1.0; 0: never) */
    int accum;             /* micro-batches whose gradients one step sums (1) */
    const char *loss;      /* NULL: the output "loss"; "cross_entropy" (see above) */
    const char *precision; /* NULL or "f32"; "bf16", "f16": matmuls in it, f32 master
                              weights (f16 adds dynamic loss scaling) */
    uint64_t seed;         /* the run's seed, as `coil train --seed`: a checkpoint records
                              it and resuming checks it (0) */
} coil_train_options;

/* `coil train`'s defaults for that optimizer (NULL: "adamw"): the table above. An unknown
 * name is kept, for coil_trainer_new to refuse. */
COIL_API coil_train_options coil_train_defaults(const char *optimizer);

/* A trainer of model (opt NULL: coil_train_defaults(NULL)), starting from the model's
 * parameter values, which must all be set. Compiles the joint graph (a second or more).
 * The trainer keeps its own parameters: model must outlive it, and sees the trained
 * values after coil_trainer_sync. A model without a "loss" output and no loss option,
 * an unknown optimizer, loss or precision, a non-finite or negative number, lr 0 or
 * accum < 1 are errors. */
COIL_API coil_trainer *coil_trainer_new(coil_model *model, const coil_train_options *opt,
                                        coil_error *err);
/* Release the trainer (not its model); NULL is a no-op. */
COIL_API void coil_trainer_free(coil_trainer *tr);

/* The inputs a step takes: the model's in order, then "targets" for cross_entropy.
 * coil_trainer_input's strings are the trainer's; index past the end: NULL. */
COIL_API int coil_trainer_ninputs(const coil_trainer *tr);
COIL_API const char *coil_trainer_input(const coil_trainer *tr, int index, const char **type);

/* One optimizer step: its learning rate from the schedule at this step, the gradients of
 * accum micro-batches summed (averaged), clipped, the update. inputs holds the
 * micro-batches one after another, each coil_trainer_ninputs tensors (ninputs = that times
 * accum), in signature order or, with names (NULL, or one per input of a micro-batch), in
 * that order. Each is checked as coil_run checks its inputs (the message names it).
 * *loss (may be NULL): the micro-batches' mean loss. A step whose gradient is not finite
 * is skipped as `coil train` skips it (no parameter changes; it counts as a step). Dropout
 * draws each micro-batch's masks as `coil train` does. On failure no step is taken. */
COIL_API bool coil_train_step(coil_trainer *tr, const coil_tensor *inputs, int ninputs,
                              const char *const *names, double *loss, coil_error *err);
/* Optimizer steps taken: by this trainer, and by the run a resume continued. */
COIL_API int64_t coil_trainer_steps(const coil_trainer *tr);

/* The trainer's value of the model's parameter index (coil_find(model, COIL_PARAM, name)),
 * into *out as coil_run's outputs are (free it with coil_tensor_free); a parameter the
 * loss does not use is not trained, and reads as the model's value. */
COIL_API bool coil_trainer_param(coil_trainer *tr, int index, coil_tensor *out, coil_error *err);
/* The model's parameters set to the trainer's: coil_run runs the trained model. */
COIL_API bool coil_trainer_sync(coil_trainer *tr, coil_error *err);

/* Write the checkpoint `coil train --save dir` writes (dir/checkpoint.safetensors:
 * parameters, optimizer state, step, seed, optimizer; sealed with a SHA-256 and written
 * atomically, so a crash leaves the previous one whole), creating dir. Fails while a
 * `coil train` holds dir. */
COIL_API bool coil_trainer_save(coil_trainer *tr, const char *dir, coil_error *err);
/* Continue from the checkpoint in dir (this API's or `coil train --save`'s): parameters,
 * optimizer state and step, checked as `coil train --resume` checks them (checksum, the
 * same seed, optimizer and coil version, every tensor's name and shape), so that the
 * steps after it are bit-identical to a run that never stopped. A missing, damaged or
 * foreign checkpoint leaves the trainer as it was; one that fails while its tensors are
 * read (another model's) leaves it refusing every later call: free it. */
COIL_API bool coil_trainer_resume(coil_trainer *tr, const char *dir, coil_error *err);

/* ---------------------------------------------------------------- options' sizes */

/* The options structs grow: fields are only ever added at their end. So that a program
 * built against an older header keeps working with a newer libcoil, and is refused rather
 * than misread by an older one, the calls that take one are macros (below) passing the
 * size the program was compiled with to these `_sized` entry points: fields past that
 * size read as zero, which is each new field's default; a struct larger than the
 * library's own with any of its extra bytes set is COIL_ERR_USAGE naming both sizes. The
 * plain names are exported functions too (for dlsym and foreign-function callers such as
 * the Python package, which pass their own size to the `_sized` ones): they assume this
 * header's layout. coil_train_defaults writes through coil_train_defaults_into, so that
 * an older program's smaller struct is not overrun. */
COIL_API coil_model *coil_load_sized(const char *path, const coil_options *opt, coil_error *err,
                                     size_t opt_size);
COIL_API coil_model *coil_load_text_sized(const char *name, const char *text, size_t len,
                                          const coil_options *opt, coil_error *err,
                                          size_t opt_size);
COIL_API coil_model *coil_build_sized(coil_builder *b, const coil_options *opt, coil_error *err,
                                      size_t opt_size);
COIL_API coil_trainer *coil_trainer_new_sized(coil_model *model, const coil_train_options *opt,
                                              coil_error *err, size_t opt_size);
COIL_API void coil_train_defaults_into(const char *optimizer, coil_train_options *out,
                                       size_t out_size);

/* Variadic, so that an argument with commas of its own (a compound literal's
 * `&(coil_options){.device = "cuda", .threads = 2}`) passes through whole. */
#ifndef COIL_BUILDING_LIBRARY
static inline coil_train_options coil_train_defaults_sized_(const char *optimizer)
{
    coil_train_options o;
    coil_train_defaults_into(optimizer, &o, sizeof o);
    return o;
}
#define coil_load(...) coil_load_sized(__VA_ARGS__, sizeof(coil_options))
#define coil_load_text(...) coil_load_text_sized(__VA_ARGS__, sizeof(coil_options))
#define coil_build(...) coil_build_sized(__VA_ARGS__, sizeof(coil_options))
#define coil_trainer_new(...) coil_trainer_new_sized(__VA_ARGS__, sizeof(coil_train_options))
#define coil_train_defaults(...) coil_train_defaults_sized_(__VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif

#endif
