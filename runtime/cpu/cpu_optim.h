/* cpu_optim.h — optimizers as one fused pass over every parameter (a multi-tensor update: one
 * loop over the list of tensors, no per-parameter graph), the learning-rate schedule and
 * clipping by the global gradient norm. f32 parameters, f32 state (the master weights). */
#ifndef COIL_RUNTIME_OPTIM_H
#define COIL_RUNTIME_OPTIM_H

#include "ir/ir.h"

typedef enum OptKind { OPT_ADAMW, OPT_SGD, OPT_LION } OptKind;

typedef struct OptConfig {
    OptKind kind;
    double beta1, beta2, eps;   /* AdamW (0.9, 0.95, 1e-8); Lion's betas (0.9, 0.99) */
    double momentum;            /* SGD (0: plain) */
    double weight_decay;        /* decoupled; applied to parameters of rank >= 2 only
                                   (matrices and embeddings, not biases and norm gains)
                                   whose names match none of no_decay */
    double clip;                /* clip the global gradient norm to this (0: no clipping) */
    int threads;                /* the update's threads (0: one per CPU) */
    const char *const *no_decay;/* shell patterns of names to exempt ("*.wpe.*") */
    int nno_decay;
} OptConfig;

typedef struct LrSchedule {
    double lr, min_lr;          /* peak and floor */
    int64_t warmup, total;      /* linear warm-up steps, then cosine to min_lr at `total`
                                   (total 0: constant after the warm-up) */
} LrSchedule;

typedef struct Optimizer Optimizer;

/* "adamw", "sgd", "lion" into *k; false for anything else. */
bool optim_parse(const char *s, OptKind *k);
const char *optim_name(OptKind k);
/* State for the params of g (graph_params order, all f32). Errors name a parameter that
 * is not f32. */
Optimizer *optim_new(const OptConfig *c, const Graph *g, const Tensor *params, Err *e);
void optim_free(Optimizer *o);
/* One update of every parameter from grads times grad_scale (1 / micro-batches summed,
 * and / the loss scale under f16) at learning rate lr. Returns the global norm of the
 * scaled gradient before clipping (NaN or inf: the update is skipped and the caller told
 * so by the value). */
double optim_step(Optimizer *o, Tensor *params, const Tensor *grads, double grad_scale, double lr);
double lr_at(const LrSchedule *s, int64_t step);
/* The state tensors, for checkpoints: count, and tensor i with a name ("m.<param>"). */
int optim_state_count(const Optimizer *o);
Tensor *optim_state(Optimizer *o, int i, const char **name);
int64_t optim_steps(const Optimizer *o);
int64_t optim_state_bytes(const Optimizer *o);
void optim_set_steps(Optimizer *o, int64_t steps);
/* What the device optimizer (cuda_optim.h) mirrors: the configuration, and whether
 * parameter i (graph_params order) takes weight decay. */
const OptConfig *optim_config(const Optimizer *o);
bool optim_decays(const Optimizer *o, int i);

#endif
