/* peak.h — what this machine can do, measured rather than looked up: the f32 FMA peak
 * and the copy bandwidth, the denominators of `coil bench`'s "fraction of peak". */
#ifndef COIL_RUNTIME_PEAK_H
#define COIL_RUNTIME_PEAK_H

#include <stddef.h>

/* f32 GFLOP/s of independent fused multiply-adds on `threads` threads (each FMA counts
 * two FLOPs), with the widest vectors the CPU has (AVX-512, AVX2+FMA, else scalar),
 * timed over about `seconds`. The best of three trials. */
double peak_fma_gflops(int threads, double seconds);
/* Which vector ISA peak_fma_gflops used: "avx512", "avx2", "scalar". */
const char *peak_isa(void);
/* Copy bandwidth in GB/s (bytes read + bytes written per second) of memcpy over
 * `bytes`-sized buffers split over `threads` threads; the best of five trials. */
double peak_copy_gbs(int threads, size_t bytes);

#endif
