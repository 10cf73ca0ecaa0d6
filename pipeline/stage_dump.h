/* stage_dump.h — the compile pipeline's stages in COIL_DEBUG_DIR (base/debug_dir.h), in
 * the order pipeline.c runs them: input IR, the IR after each pass, the fusion plan, the
 * loop IR, LLVM IR or CUDA C, the memory plan, the autotuner's report, the time of each. */
#ifndef COIL_RUNTIME_COMPILED_DEBUG_H
#define COIL_RUNTIME_COMPILED_DEBUG_H

#include "passes/passes.h"
#include "pipeline/pipeline.h"

/* One compile's stages. Every function takes NULL (COIL_DEBUG_DIR unset) and does nothing,
 * so the pipeline pays one check per stage. */
typedef struct CompileDebug CompileDebug;

/* NULL unless COIL_DEBUG_DIR is set (and o allows it: not a probe compile). */
CompileDebug *compile_debug_open(const Graph *g, const CompileOptions *o);
void compile_debug_free(CompileDebug *cd);
/* Its directory, for the code generators' own stages (LLVM IR). */
DebugDir *compile_debug_dir(const CompileDebug *cd);

/* g's IR text as the next stage (stage "input", "after-tune-pad"). */
void compile_debug_graph(CompileDebug *cd, const char *stage, const Graph *g);
/* The passes: start before them, then run_passes_with(..., compile_debug_after_pass, cd):
 * each pass's graph as after-<pass>.cir and its time (the writing left out). */
void compile_debug_passes_start(CompileDebug *cd);
bool compile_debug_after_pass(const Graph *g, const Pass *pass, void *ctx);
/* The fusion plan (IR with the plan as comments, and its picture) and the loop IR. */
void compile_debug_lowered(CompileDebug *cd, const Graph *g, const Fusion *f, const Program *p);
/* The CUDA C++ NVRTC compiles (the engine's helpers included). */
void compile_debug_cuda(CompileDebug *cd, const Program *p);
/* The memory plan at sizes sb, unless the last one written was at the same sizes. */
void compile_debug_plan(CompileDebug *cd, const Program *p, const SymBind *sb,
                        const MemoryPlan *mp);
/* A stage's seconds for the breakdown, in pipeline order (a stage named again is replaced:
 * tuning's total grows with each size tuned). */
void compile_debug_stage(CompileDebug *cd, const char *stage, double seconds);
/* The compile-time breakdown as compile-time.json; written again, same number, with what
 * later stages (tuning) add. */
void compile_debug_times(CompileDebug *cd);
/* The report tuning fills when the caller keeps none (NULL when off). */
TuneReport *compile_debug_report(CompileDebug *cd);
/* The autotuner's report as autotune.json, after each tuning. */
void compile_debug_tuned(CompileDebug *cd, const TuneReport *r);

#endif
