/* package.h — ahead-of-time packages: `coil compile MODEL -o DIR` writes the optimised IR
 * (model.cir), the loop IR (program.loop), the kernels' object code (kernels.o), the buffer
 * plan (plan.json) and, last, a manifest with every file's size and SHA-256; `coil run DIR`
 * checks them all, then loads the object without running LLVM's optimiser: the IR is
 * lowered again (milliseconds, deterministic) and must give the program.loop recorded. */
#ifndef COIL_RUNTIME_PACKAGE_H
#define COIL_RUNTIME_PACKAGE_H

#include "pipeline/pipeline.h"

#define PACKAGE_FORMAT 2 /* 2: every file checksummed */

typedef struct PackageOptions {
    const char *emit;     /* also write, a list: "llvm-ir" (kernels.ll), "asm" (kernels.s);
                             for CUDA "ptx" (kernels.ARCH.ptx); the CUDA C is always written */
    const SymBind *sb;    /* symbol sizes for plan.json's offsets (NULL: lifetimes only) */
    bool full_opt;        /* CUDA: NVRTC's full optimisation (CudaCompileOptions.full_opt) */
} PackageOptions;

/* Whether path is a directory: given as a model, it is meant as a package, and loading it
 * says what it lacks (a manifest) rather than that it is no file. */
bool package_is(const char *path);
/* Write g's program p for dev to dir, created when missing: the optimised IR, the loop IR,
 * the plan and the device's kernels, each written by its emit (runtime/device.h): for the
 * CPU kernels.o (LLVM; with emit "llvm-ir", "asm" also kernels.ll, kernels.s), for a GPU
 * the kernels' CUDA C (kernels.cu) and their cubin for er->arch (kernels.ARCH.cubin; with
 * emit "ptx" also kernels.ARCH.ptx), compiled by NVRTC here: no GPU needed. Each file is
 * written to a temporary name, fsynced and renamed (a failed write leaves no temporary),
 * the old manifest removed first and the new one written last. *codegen_s: the device
 * compiler's seconds (0 from its cache). */
bool package_write_program(const char *dir, const Device *dev, const Graph *g,
                           const Program *p, const EmitRequest *er, bool no_fusion,
                           const PackageOptions *po, double *codegen_s, Err *e);
/* The same for c, compiled with o. */
bool package_write(const char *dir, const Compiled *c, const CompileOptions *o,
                   const PackageOptions *po, Err *e);

/* The package's optimised graph, once its manifest (format, coil version, its own checksum,
 * every field) and every file it lists (size, SHA-256) are checked. Errors name the file
 * and say to compile the model again. */
Graph *package_graph(const char *dir, Err *e);
/* Compile g (package_graph's, not changed) with the package's object; threads from o. The
 * files are checked again first, just before the object is mapped or the cubin loaded. */
Compiled *package_load(const char *dir, const Graph *g, const CompileOptions *o, Err *e);

#endif
