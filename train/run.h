/* run.h — private to train/: a training run's state (Run) and what its files share:
 * train_loop.c makes and steps it, checkpoint.c saves and restores it, train_run.c holds
 * it between the C API's steps. */
#ifndef COIL_TRAIN_RUN_H
#define COIL_TRAIN_RUN_H

#include "base/fileio.h"
#include "io/safetensors.h"
#include "runtime/trace.h"
#include "train/data.h"
#include "train/data_parallel.h"
#include "train/train.h"
#include "train/zero.h"

/* What a checkpoint's metadata says about where its run stands (checked values). */
typedef struct Saved {
    uint64_t step, data_pos, seed;
    const char *optimizer, *coil; /* strings of the file's */
    bool has_scale;      /* f16's loss scale, when the run that saved it had one */
    double scale;
    uint64_t good;
} Saved;

typedef struct Run {
    const TrainOptions *o;
    Graph *joint;
    Compiled *c;
    SymBind sb;
    Tensor *inputs, *params, *outputs, *accum;
    bool *given;
    int nparam, targets_at, tokens_at;
    /* params[nparam .. nparam + nkept): the model's buffers the joint graph leaves out
     * (integer buffers nothing reads, batch norm's num_batches_tracked; pipeline/
     * training.c), loaded or drawn, checkpointed and restored as they are, never trained.
     * param_name: all of their names, the joint graph's parameters first. */
    int nkept;
    const char **param_name;
    Optimizer *opt;      /* on a GPU: the device optimizer's host copy, for checkpoints */
    DataParallel *dp;         /* with other ranks: the collectives (NULL: alone) */
    Zero *zero;               /* --zero: the optimizer over this rank's shard (opt NULL) */
    bool overlap;             /* the engine starts the gradients' sums during the backward */
    bool ran;                 /* a run is done (the first may be autotuned: no overlap) */
    const DeviceTraining *dt; /* where the parameters stay on the device (a GPU's): its */
    void *dev;                /* runs and optimizer, the update where the gradients are */
    bool *fetch;         /* on a GPU: the outputs brought home (the loss, not gradients) */
    Loader *loader;
    int col_input[8];    /* arrays mode: the graph input each array feeds */
    int scale_at;        /* f16: the input "loss_scale", else -1 */
    double scale;        /* the loss scale (1 without f16) */
    int64_t good;        /* steps since the scale last changed */
    int64_t step;
    double flops, hflops, peak; /* the model's FLOPs a micro-batch; with recomputation */
    int64_t rss0;        /* resident bytes once compiled, before any training state */
    DirLock lock;        /* on the save directory, for the whole run */
    StFile ck;           /* --resume: the checkpoint, checked before compiling, then read */
    Saved saved;
    int64_t bad;         /* steps in a row that went wrong (count_divergence) */
    double bad_loss, bad_norm; /* the last such step's */
    Trace *trace;        /* o->trace: the joint graph's runs, until o->trace_steps */
    const Tensor *batch; /* train_step: the caller's micro-batches (else NULL) */
    bool broken;         /* train_resume failed while restoring: the state is mixed */
} Run;

/* train_loop.c */
bool run_setup(Run *r, const Graph *model, Err *e);
void run_free(Run *r);
/* One optimizer step: its micro-batches, the reduction, the update, the progress line. */
bool run_step_once(Run *r, TrainResult *res, Err *e);
/* A device's parameters and optimizer state into the host's tensors. */
bool run_to_host(Run *r, Err *e);
/* Every tensor finite, else an error naming the first that is not: `what` says where the
 * tensors come from, `why` what to do. */
bool run_check_finite(const Tensor *t, const char *const *names, int n, const char *what,
                      const char *why, Err *e);
/* The optimizer state, whole (ZeRO's between zero_state_gather or _open and _close). */
int run_state_count(const Run *r);
Tensor *run_state_at(Run *r, int i, const char **name);

/* checkpoint.c */
bool run_claim_save_dir(Run *r, Err *e);
/* A checkpoint, written by this rank when `writes`; under ZeRO every rank gathers first. */
bool run_checkpoint(Run *r, bool writes, Err *e);
/* --resume's checkpoint read and checked before compiling, then restored into the run. */
bool run_open_checkpoint(Run *r, Err *e);
bool run_load_checkpoint(Run *r, uint64_t *data_pos, Err *e);

#endif
