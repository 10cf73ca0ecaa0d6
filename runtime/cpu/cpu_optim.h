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

/* What a step does to a parameter: a plain update, one with weight decay, or, for a buffer
 * (ir.h's param_is_buffer), an assignment of its slot (the buffer's new value: autodiff's
 * `update.<name>`) times the gradient scale, which divides out the micro-batches, ranks
 * and loss scale the slot was summed over; a buffer is outside the gradient's norm and
 * its clipping. */
typedef enum ParamRole { ROLE_PLAIN, ROLE_DECAY, ROLE_BUFFER } ParamRole;

/* "adamw", "sgd", "lion" into *k; false for anything else. */
bool optim_parse(const char *s, OptKind *k);
const char *optim_name(OptKind k);
/* State for the params of g (graph_params order, all f32). Errors name a parameter that
 * is not f32. */
Optimizer *optim_new(const OptConfig *c, const Graph *g, const Tensor *params, Err *e);
/* State for n f32 tensors named names[i] (for messages and the state's names, "m.<name>"),
 * role[i] saying how each is updated: slices of parameters (ZeRO's shards, train/zero.h)
 * as well as whole ones. */
Optimizer *optim_new_named(const OptConfig *c, int n, const Tensor *params,
                           const char *const *names, const ParamRole *role, Err *e);
/* How param node p is updated under c: weight decay for matrices and embeddings whose
 * names match none of no_decay; a buffer's assignment. */
ParamRole optim_role_of(const OptConfig *c, const Node *p);
void optim_free(Optimizer *o);
/* One update of every parameter from grads times grad_scale (1 / micro-batches summed,
 * and / the loss scale under f16) at learning rate lr. Returns the global norm of the
 * scaled gradient before clipping (NaN or inf: the update is skipped and the caller told
 * so by the value). */
double optim_step(Optimizer *o, Tensor *params, const Tensor *grads, double grad_scale, double lr);
/* optim_step in two halves, for gradients spread over ranks: the sum of the squares of
 * grads (unscaled; NaN when memory fails), and the update given the global norm of the
 * scaled gradient that the ranks' sums make (not finite: skipped). */
double optim_grad_squares(const Optimizer *o, const Tensor *grads);
void optim_apply(Optimizer *o, Tensor *params, const Tensor *grads, double grad_scale, double lr,
                 double norm);
double lr_at(const LrSchedule *s, int64_t step);
/* The state tensors, for checkpoints: count, and tensor i with a name ("m.<param>"). */
int optim_state_count(const Optimizer *o);
Tensor *optim_state(Optimizer *o, int i, const char **name);
/* The state tensors each parameter has under c (0, 1 or 2), and kind k's name prefix
 * ("m", "v"): state k of parameter p is named "<prefix>.<p>". */
int optim_state_kinds(const OptConfig *c);
const char *optim_state_prefix(const OptConfig *c, int kind);
int64_t optim_steps(const Optimizer *o);
int64_t optim_state_bytes(const Optimizer *o);
void optim_set_steps(Optimizer *o, int64_t steps);
/* What the device optimizer (cuda_optim.h) mirrors: the configuration, and how parameter
 * i (graph_params order) is updated. */
const OptConfig *optim_config(const Optimizer *o);
ParamRole optim_role(const Optimizer *o, int i);

#endif
