/* ukernel.h — the GEMM micro-kernels (cpu.h's UkernelDotFn and UkernelBcastFn) generated
 * as LLVM IR for a target's vector width: register-tiled, vectorised, FMA. They depend
 * only on the target, not on the program, so every module gets the same two. */
#ifndef COIL_CODEGEN_CPU_UKERNEL_H
#define COIL_CODEGEN_CPU_UKERNEL_H

#include <llvm-c/Core.h>

#include "codegen/cpu/cpu.h"

/* Function names in the module. */
#define UKERNEL_DOT_NAME "coil_ukernel_dot"
#define UKERNEL_BCAST_NAME "coil_ukernel_bcast"

/* The tile shapes for a target whose widest f32 vector has `vec` lanes (16 with
 * AVX-512, 8 with AVX2, 4 with SSE or NEON). */
UkernelShape ukernel_shape(int vec);

/* Add both micro-kernels, with external linkage under the names above, to mod. */
bool ukernel_emit(LLVMModuleRef mod, const UkernelShape *shape, Err *e);

#endif
