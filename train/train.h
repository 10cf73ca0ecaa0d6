/* train.h — training a model with the compiler: the loss (the model's own `loss` output,
 * or cross_entropy of its first output against a `targets` input), the joint forward and
 * backward graph from autodiff compiled like any graph, a fused optimizer over every
 * parameter, batches from a token file's loader thread or synthetic, progress lines with
 * throughput and MFU, and checkpoints written atomically and resumed bit-identically. */
#ifndef COIL_RUNTIME_TRAIN_H
#define COIL_RUNTIME_TRAIN_H

#include <stdio.h>

#include "passes/passes.h"
#include "pipeline/pipeline.h"
#include "runtime/cpu/cpu_optim.h"
#include "runtime/init.h"
#include "runtime/world.h"

typedef struct TrainOptions {
    RematMode checkpoint;      /* what the backward recomputes instead of keeping */
    DType precision;           /* 0 or f32: f32; bf16, f16: matmuls in it (master weights
                                  f32); f16 adds dynamic loss scaling */
    double loss_scale;         /* f16: the first scale (0: 65536); halved when a step's
                                  gradient overflows (that step skipped), doubled after
                                  LOSS_SCALE_GROWTH good steps */
    const char *loss;          /* NULL: the model's output "loss"; "cross_entropy": of its
                                  first output against an added input "targets" */
    int64_t steps, accum;      /* optimizer steps; micro-batches summed per step */
    const SymSize *sizes;      /* symbol sizes (B, T) */
    int nsizes;
    const char *data;          /* token file; NULL: the arrays below, or synthetic batches */
    const char *const *array_names, *const *array_files; /* a dataset of .npy arrays, one per
                                  graph input (targets included), rows sampled together */
    int narray;
    int data_width;            /* bytes per token: 1, 2, 4 */
    uint64_t seed;
    OptConfig opt;
    LrSchedule lr;
    int64_t log_every;
    bool json;                 /* progress as JSON lines */
    const char *save;          /* checkpoint directory (NULL: none), locked for the run:
                                  a second writer fails at once, naming the first */
    int64_t save_every;        /* also every N steps (0: only at the end) */
    bool resume;               /* continue from `save`'s checkpoint (checked: its digest,
                                  metadata, shapes, finite values; the same seed, optimizer
                                  and coil version) */
    bool resume_anyway;        /* resume even when the seed, optimizer or coil version
                                  differ (another optimizer's state starts afresh) or the
                                  checkpoint has no digest; a wrong digest is never taken */
    const char *weights;       /* initial parameters (safetensors), else the initializers */
    double peak_gflops;        /* the device's peak for MFU (0: measured) */
    double bandwidth_gbs;      /* coil plan: the device's memory bandwidth (0: measured) */
    CompileOptions compile;
    const char *trace;         /* a Chrome/Perfetto trace of the joint graph's runs (forward
                                  and backward steps by layer; the CPU's optimizer is no
                                  program) written here at the end; the CPU only so far */
    int64_t trace_steps;       /* with trace: this run's first N steps only, so a long
                                  run's trace stays bounded (0: every step) */
    FILE *out;                 /* progress lines (stdout) */
    World world;               /* data-parallel: this rank of world.size ranks, each with
                                  its share of every global batch (size 0 or 1: alone) */
    double bucket_mb;          /* gradients reduced in buckets of this many MiB (0: 25) */
    bool reduce_bf16;          /* gradients reduced in bf16 (--reduce-dtype bf16), else f32 */
    bool measure_scaling;      /* after the run, rank 0 times steps alone (the others gone)
                                  for the scaling efficiency (TrainResult.scaling) */
    int zero;                  /* ZeRO stage (train/zero.h): 1 shards the optimizer state
                                  over the ranks, 2 the accumulated gradients too; 0: none */
    double dp_timeout_s;       /* a rank silent this long fails the job (0: 60) */
} TrainOptions;

#define TRAIN_TAIL 20
#define LOSS_SCALE_GROWTH 200

typedef struct TrainResult {
    double first_loss, last_loss, seconds, flops_per_step, mfu;
    double hflops_per_step, hfu; /* with what rematerialisation recomputes */
    double tail_loss;          /* the mean loss of the last TRAIN_TAIL steps (less noisy) */
    int64_t steps, skipped;    /* steps taken; updates skipped for a non-finite gradient */
    double loss_scale;         /* f16: the scale at the end */
    int64_t planned_bytes;     /* the engine's plan: activations, parameters, inputs, outputs */
    int64_t measured_bytes;    /* resident memory the training added after compiling */
    double tail[TRAIN_TAIL];   /* the last steps' losses, a ring */
    int64_t trace_events;      /* o->trace: the events written */
    int world;                 /* ranks that trained together */
    double comm_s, comm_waited_s; /* data-parallel: seconds the collectives took, and of them
                                  the part the steps waited for (the rest overlapped) */
    bool overlap;              /* the gradients' sums started during the backward, each
                                  bucket once its last gradient was final */
    double step_tail[TRAIN_TAIL]; /* the last steps' seconds, a ring */
    double step_s;             /* the median of those */
    double alone_step_s;       /* measure_scaling: rank 0's step alone (median) */
    double scaling;            /* measure_scaling: alone_step_s / step_s, the N ranks'
                                  throughput over N times one rank's */
} TrainResult;

/* The model's joint forward-and-backward graph (pipeline/training.h's stages), at the sizes
 * o gives (into *sb), rematerialised as o->checkpoint says; *flops: the model's FLOPs a
 * micro-batch, before recomputation. */
Graph *train_joint_graph(const Graph *model, const TrainOptions *o, SymBind *sb, double *flops,
                         Err *e);
/* Whether dir holds a checkpoint (a file by that name: resuming checks the rest). */
bool train_checkpoint_exists(const char *dir);
/* Train; false with e set on any error, and when the run diverges (the loss, or with no
 * loss scale left the gradient, not finite for 10 steps in a row or at the last step). */
bool train_run(const Graph *model, const TrainOptions *o, TrainResult *r, Err *e);

/* A run held between steps whose batches the caller gives (the C API's trainer): train_run's
 * joint graph, parameters, optimizer, steps and checkpoints. o is copied; of it the loss,
 * precision, checkpoint (remat), sizes, seed, opt, lr, accum, weights and compile are read
 * (not data, arrays, save, resume, trace, world). */
typedef struct TrainRun TrainRun;
TrainRun *train_open(const Graph *model, const TrainOptions *o, Err *e);
void train_close(TrainRun *t);
/* The joint graph: its inputs (loss_scale aside) are what a step takes, its parameters
 * (graph_params order) the run's. */
const Graph *train_graph(const TrainRun *t);
int64_t train_steps_done(const TrainRun *t);
/* The parameters (brought home from a device), then the model's buffers the joint graph
 * leaves out (integer buffers nothing reads: kept as they are, never trained); new values
 * written into them take effect after train_params_changed. */
Tensor *train_params(TrainRun *t, Err *e);
/* Their names, in that order; *n their count (the joint graph's parameters and the kept). */
const char *const *train_param_names(const TrainRun *t, int *n);
void train_params_changed(TrainRun *t);
/* One optimizer step on o->accum micro-batches, one after another in batch, each the joint
 * graph's inputs in order less loss_scale (checked by the caller against their types);
 * *loss: their mean loss. */
bool train_step(TrainRun *t, const Tensor *batch, double *loss, Err *e);
/* Checkpoints as train_run's --save and --resume: dir locked while written; a resume that
 * fails after it began restoring leaves the run refusing every later call. */
bool train_save(TrainRun *t, const char *dir, Err *e);
bool train_resume(TrainRun *t, const char *dir, Err *e);

/* estimate.c: what a training step needs, before anything runs (`coil plan`): bytes of parameters,
 * gradients, optimizer state, saved activations (forward values the backward reads) and
 * the rest of the activation arena (workspace), the inputs; FLOPs; a roofline time. */
typedef struct TrainPlan {
    int64_t params, grads, optimizer, saved, workspace, inputs, total;
    double flops, hflops, peak_gflops, bandwidth_gbs, compute_s, memory_s, step_s;
    int64_t max_batch;         /* the largest B within `limit` (-1: no limit or no B) */
    int64_t psi;               /* parameter elements (the ZeRO paper's Ψ) */
    int64_t grads_whole, state_whole; /* a micro-batch's gradients and the optimizer state,
                                  unsharded (ZeRO's accounting) */
} TrainPlan;
bool train_plan(const Graph *model, const TrainOptions *o, int64_t limit, TrainPlan *p, Err *e);

#endif
