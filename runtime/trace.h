/* trace.h — seeing inside a run: what each step of a program is (the layer it belongs to,
 * the graph nodes and source lines it computes, its FLOPs and bytes), and a recorder of
 * runs, steps and thread-pool chunks written as a Chrome/Perfetto trace (traceEvents). */
#ifndef COIL_RUNTIME_TRACE_H
#define COIL_RUNTIME_TRACE_H

#include "codegen/loop.h"
#include "runtime/pool.h"

/* ---------------------------------------------------------------- steps described */

/* A step as a person reads it. Its layer is taken from the parameters its nodes read
 * (names as PyTorch's state dict: "transformer.h.3.mlp.c_fc.weight" is layer
 * "transformer.h.3.mlp.c_fc"); several layers share the longest common dotted prefix
 * ("transformer.h.0.{attn.c_proj,ln_2}"). A step reading no parameter (attention's
 * softmax) takes the common prefix of the nearest layers before and after it in the
 * data flow ("transformer.h.0.attn"); a weight's gradient, its output's name. */
typedef struct StepInfo {
    const char *name;    /* "transformer.h.3.mlp.c_fc: gemm+gelu_tanh" */
    const char *layer;   /* "transformer.h.3.mlp.c_fc"; "" when nothing names one */
    const char *what;    /* "gemm+gelu_tanh", "add", "attention" */
    const char *kind;    /* "kernel", "gemm", "attention" */
    const char *kernel;  /* its loop kernel (a GEMM's epilogue), or NULL */
    const char *source;  /* the distinct FILE:LINE of its nodes, ", "-separated (a few) */
    bool backward;       /* a training graph's step computing only the backward */
    double flops;        /* at the table's sizes (step_table_size) */
    int64_t bytes;       /* the buffers it reads and writes, each counted once */
} StepInfo;

typedef struct StepTable {
    Arena *arena;
    const Program *p;
    StepInfo *step;      /* nstep */
    SymBind sb;          /* the sizes flops and bytes are at */
    bool sized;
} StepTable;

/* Every step of p named; the names are the table's own, but step_table_size reads p and
 * its graph, which must outlive such calls. NULL (e set) out of memory. */
StepTable *step_table_new(const Program *p, Err *e);
/* The FLOPs and bytes of every step at the sizes sb (kept while they repeat). */
bool step_table_size(StepTable *t, const SymBind *sb, Err *e);
void step_table_free(StepTable *t);

/* ---------------------------------------------------------------- the recorder */

/* Events of the runs of one or more programs (a CPU engine, a GPU engine), held in memory
 * and written at the end. Each program is a process in the viewer: a track "steps" with
 * every run and, nested in it, its steps; a track per thread of the pool with the chunks
 * each ran. One thread records (the one running the engine); the pool's workers write
 * only their own buffers (pool_trace_start), drained after each run. */
typedef struct Trace Trace;

Trace *trace_new(Err *e);
void trace_free(Trace *t);
/* A program whose runs are traced, on `device` ("CPU", a GPU's name): its id for the
 * calls below, or -1 (e set). p must outlive the trace. */
int trace_program(Trace *t, const Program *p, const char *device, Err *e);
/* The step table of program `prog` (for profiles: the names the trace uses). */
const StepTable *trace_steps(const Trace *t, int prog);
/* A run of program prog at sizes sb began at `start` (clock_seconds(); a GPU's steps are
 * known after its run). FLOPs and bytes are taken at its sizes. */
bool trace_run_begin(Trace *t, int prog, const SymBind *sb, double start, Err *e);
/* Step s ran from start to end (clock_seconds()) on the program's "steps" track. */
void trace_step(Trace *t, int prog, int s, double start, double end);
/* A chunk a thread ran (its tag the step) in the current run. */
void trace_chunk(Trace *t, int prog, const PoolChunk *c);
/* The run of prog ends now: the run's event spans its steps. */
void trace_run_end(Trace *t, int prog);
/* Chunks the pool could not hold (pool_trace_drain), reported in the file's metadata. */
void trace_dropped(Trace *t, int64_t chunks);
/* The events as a Chrome trace-event file (JSON: {"traceEvents": [...]}; times in
 * microseconds from trace_new), written whole or not at all. */
bool trace_write(const Trace *t, const char *path, Err *e);
/* How many events are held (runs, steps and chunks). */
int64_t trace_events(const Trace *t);

#endif
