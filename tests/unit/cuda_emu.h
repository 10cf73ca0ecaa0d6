/* cuda_emu.h — runs coil's generated CUDA C++ on the host, for tests on machines without a
 * GPU: force-included (-include) when the source is compiled by the host's C++ compiler.
 * Each launch runs its blocks one after another on blockDim.x real threads that meet at a
 * barrier, so __syncthreads, __shared__ memory (one block at a time: static storage) and
 * warp shuffles (through a slot per thread, between barriers) behave as on a GPU, slowly.
 * What the emulation cannot show: races a GPU's real concurrency between blocks would
 * expose, and the device's own math library's last bits. */
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct CoilEmu {
    std::barrier<> *sync;                 /* the whole block: __syncthreads */
    std::deque<std::barrier<>> warp_sync; /* one per warp: shuffles */
    std::vector<unsigned long long> slot; /* a shuffle's values, one per thread */
};
inline CoilEmu coil_emu;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static

inline void __syncthreads() { coil_emu.sync->arrive_and_wait(); }

/* Every thread of the warp calls it (the full mask coil always passes), so the warp's own
 * barrier orders the exchange; lane + o beyond the warp keeps its own value, as on a GPU. */
template <class T> T __shfl_down_sync(unsigned, T v, int o)
{
    static_assert(sizeof(T) <= sizeof(unsigned long long), "shuffled values are 8 bytes at most");
    unsigned t = threadIdx.x, lane = t & 31;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    std::barrier<> &warp = coil_emu.warp_sync[t / 32];
    coil_emu.slot[t] = bits;
    warp.arrive_and_wait();
    T r = v;
    if (lane + (unsigned)o < 32 && t + (unsigned)o < blockDim.x)
        std::memcpy(&r, &coil_emu.slot[t + (unsigned)o], sizeof r);
    warp.arrive_and_wait();
    return r;
}

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __umulhi(unsigned a, unsigned b)
{
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
using std::isfinite;
using std::isnan;
using std::signbit;

typedef void (*CoilEmuKernel)(void *const *, const long long *);

/* Launch fn over grid (gx, gy) of blocks of bx threads (a multiple of 32). */
extern "C" void coil_emu_launch(CoilEmuKernel fn, unsigned gx, unsigned gy, unsigned bx,
                                void *const *bufs, const long long *syms)
{
    std::barrier<> sync((std::ptrdiff_t)bx);
    coil_emu.sync = &sync;
    coil_emu.warp_sync.clear();
    for (unsigned w = 0; w < bx / 32; w++)
        coil_emu.warp_sync.emplace_back(32);
    coil_emu.slot.assign(bx, 0);
    blockDim = dim3{bx, 1, 1};
    gridDim = dim3{gx, gy, 1};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < bx; t++)
        threads.emplace_back([=, &sync] {
            threadIdx = dim3{t, 0, 0};
            for (unsigned y = 0; y < gy; y++)
                for (unsigned x = 0; x < gx; x++) {
                    blockIdx = dim3{x, y, 0};
                    fn(bufs, syms);
                    sync.arrive_and_wait(); /* the next block reuses the shared memory */
                }
        });
    for (auto &th : threads)
        th.join();
}
