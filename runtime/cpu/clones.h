/* clones.h — the CPU runtime's own loops (packing, softmax, optimizer passes) compiled once
 * per x86 ISA level, the host's widest picked when the library loads: the build itself
 * targets baseline x86-64, so one binary runs everywhere. x86-64-v3 is AVX2 with FMA (every
 * AVX2 CPU since Haswell and Zen): GCC's "avx2" target alone has no FMA, so a*b+c in that
 * clone is a multiply and a dependent add. "avx2" stays for a compiler whose resolver does
 * not know the level (clang 14 picks it; GCC 12 and clang 19 pick x86-64-v3). Internal to
 * runtime/cpu/. */
#ifndef COIL_RUNTIME_CLONES_H
#define COIL_RUNTIME_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__)
#define VECTOR_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* a*b+c as one FMA where the clone has one: GCC in ISO C mode does not contract otherwise
 * (clang contracts within an expression). Without it every clone rounds each operation
 * alone and gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__)
#define CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define CONTRACT
#endif

#endif
