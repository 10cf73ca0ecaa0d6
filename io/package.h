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
/* Write c (compiled with o) to dir, created when missing; each file written to a
 * temporary name, fsynced and renamed (a failed write leaves no temporary), the old
 * manifest removed first and the new one written last. */
bool package_write(const char *dir, const Compiled *c, const CompileOptions *o,
                   const PackageOptions *po, Err *e);
/* A CUDA package: the same IR, loop IR and plan, the kernels' CUDA C (kernels.cu) and their
 * cubin for `arch` (kernels.ARCH.cubin; with emit "ptx" also kernels.ARCH.ptx), compiled by
 * NVRTC here: no GPU needed. *nvrtc_s gets the seconds NVRTC took (0 from the cache). */
bool package_write_cuda(const char *dir, const Graph *g, const Program *p, const char *arch,
                        bool no_fusion, const PackageOptions *po, double *nvrtc_s, Err *e);

/* The package's optimised graph, once its manifest (format, coil version, its own checksum,
 * every field) and every file it lists (size, SHA-256) are checked. Errors name the file
 * and say to compile the model again. */
Graph *package_graph(const char *dir, Err *e);
/* Compile g (package_graph's, not changed) with the package's object; threads from o. The
 * files are checked again first, just before the object is mapped or the cubin loaded. */
Compiled *package_load(const char *dir, const Graph *g, const CompileOptions *o, Err *e);

#endif
