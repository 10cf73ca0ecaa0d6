/* training.h — the training pipeline's graph stages: a model becomes the joint forward-and-
 * backward graph a training step compiles (pipeline.c then compiles it like any graph). */
#ifndef COIL_PIPELINE_TRAINING_H
#define COIL_PIPELINE_TRAINING_H

#include "passes/passes.h"
#include "runtime/init.h"

/* What the stages need to know. */
typedef struct TrainingStages {
    const char *loss;        /* NULL: the model's output "loss"; "cross_entropy": of its first
                                output against an added i64 input "targets" */
    DType precision;         /* 0 or f32; bf16, f16: matmuls in it (f16 adds a loss scale) */
    RematMode remat;         /* what the backward recomputes instead of keeping */
    const SymSize *sizes;    /* the symbols' sizes (B, T), for FLOPs and the remat cut */
    int nsizes;
    const char *passes;      /* the device's pass list (NULL: the CPU's, pass_pipeline) */
} TrainingStages;

/* The model's training graph: its loss alone, as a scalar output "loss" (with input
 * "targets" added for cross_entropy). Errors name the model and what is missing. */
Graph *training_loss_graph(const Graph *model, const char *loss, Err *e);
/* The joint graph of model, the stages in order (training.c lists them); *sb the sizes
 * bound, *flops the model's FLOPs a micro-batch before recomputation. */
Graph *training_graph(const Graph *model, const TrainingStages *t, SymBind *sb, double *flops,
                      Err *e);

#endif
