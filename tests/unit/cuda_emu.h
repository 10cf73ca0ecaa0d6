/* cuda_emu.h — runs coil's generated CUDA C++ on the host, for tests on machines without a
 * GPU: force-included (-include) when the source is compiled by the host's C++ compiler.
 * Each launch runs its blocks one after another on blockDim.x real threads that meet at a
 * barrier, so __syncthreads, __shared__ memory (one block at a time: static storage) and
 * warp shuffles (through a slot per thread, between barriers) behave as on a GPU, slowly;
 * a kernel whose threads never meet may run them one by one instead (the serial launch).
 * What the emulation cannot show: races a GPU's real concurrency between blocks would
 * expose, and the device's own math library's last bits. */
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

#define COIL_EMU 1 /* the prelude's tensor-core helpers call coil_emu_mma below */

struct CoilEmuFragments {
    unsigned a[4], b[2]; /* one lane's registers of an m16n8k16 A and B */
};

struct CoilEmu {
    std::barrier<> *sync;                 /* the whole block: __syncthreads */
    std::deque<std::barrier<>> warp_sync; /* one per warp: shuffles and mma */
    std::vector<unsigned long long> slot; /* a shuffle's values, one per thread */
    std::vector<CoilEmuFragments> mma;    /* an mma's operands, one per thread */
};
inline CoilEmu coil_emu;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
#define __shared__ static

/* A kernel launched serially (coil_emu_launch_serial) may not meet its block: say so. */
[[noreturn]] inline void coil_emu_not_serial(const char *what)
{
    std::fprintf(stderr, "cuda_emu: a kernel launched serially called %s: launch it with "
                 "coil_emu_launch\n", what);
    std::abort();
}

inline void __syncthreads()
{
    if (!coil_emu.sync)
        coil_emu_not_serial("__syncthreads");
    coil_emu.sync->arrive_and_wait();
}

/* The atomics the prelude's adds use: real ones, since a block's threads run at once. */
inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline int atomicAdd(int *p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired)
{
    std::atomic_ref<unsigned>(*p).compare_exchange_strong(expected, desired);
    return expected; /* the old value, whether or not it was swapped */
}

/* A shuffle: every thread of the warp calls it (the full mask coil always passes), so the
 * warp's own barrier orders the exchange; each thread gets thread src's value, or keeps
 * its own where src is outside the warp (or the block), as on a GPU. */
template <class T> T coil_emu_shuffle(T v, unsigned src, bool inside)
{
    static_assert(sizeof(T) <= sizeof(unsigned long long), "shuffled values are 8 bytes at most");
    unsigned t = threadIdx.x;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    if (!coil_emu.sync)
        coil_emu_not_serial("a warp shuffle");
    std::barrier<> &warp = coil_emu.warp_sync[t / 32];
    coil_emu.slot[t] = bits;
    warp.arrive_and_wait();
    T r = v;
    if (inside && src < blockDim.x)
        std::memcpy(&r, &coil_emu.slot[src], sizeof r);
    warp.arrive_and_wait();
    return r;
}

template <class T> T __shfl_down_sync(unsigned, T v, int o)
{
    return coil_emu_shuffle(v, threadIdx.x + (unsigned)o, (threadIdx.x & 31) + (unsigned)o < 32);
}

template <class T> T __shfl_xor_sync(unsigned, T v, int o)
{
    return coil_emu_shuffle(v, threadIdx.x ^ (unsigned)o, true);
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: every lane of the warp calls it with
 * its registers, laid out as the PTX ISA gives them (g = lane / 4, q = lane % 4, each
 * register a pair, the lower half the lower column or row):
 *   A 16x16: a0 (row g, cols 2q..2q+1), a1 (row g+8, same), a2 (row g, cols 2q+8..2q+9),
 *            a3 (row g+8, cols 2q+8..2q+9);
 *   B 16x8:  b0 (rows 2q..2q+1, col g), b1 (rows 2q+8..2q+9, col g);
 *   C, D 16x8 (f32): d0, d1 (row g, cols 2q, 2q+1), d2, d3 (row g+8, same).
 * The lanes post their A and B, then each sums its own four results in f32. */
inline void coil_emu_mma(float *d, const unsigned *a, const unsigned *b,
                         float (*to_f32)(unsigned short))
{
    unsigned t = threadIdx.x, lane = t & 31, warp0 = t - lane, g = lane / 4, q = lane % 4;
    if (!coil_emu.sync)
        coil_emu_not_serial("mma.sync");
    std::barrier<> &warp = coil_emu.warp_sync[t / 32];
    std::memcpy(coil_emu.mma[t].a, a, sizeof coil_emu.mma[t].a);
    std::memcpy(coil_emu.mma[t].b, b, sizeof coil_emu.mma[t].b);
    warp.arrive_and_wait();
    auto half = [&](unsigned reg, unsigned k) { return to_f32((unsigned short)(reg >> 16 * (k & 1))); };
    auto A = [&](unsigned r, unsigned k) {
        return half(coil_emu.mma[warp0 + r % 8 * 4 + k % 8 / 2].a[(r >= 8) + 2 * (k >= 8)], k);
    };
    auto B = [&](unsigned k, unsigned n) {
        return half(coil_emu.mma[warp0 + n * 4 + k % 8 / 2].b[k >= 8], k);
    };
    for (unsigned i = 0; i < 4; i++) {
        unsigned row = g + 8 * (i / 2), col = 2 * q + (i & 1);
        float sum = d[i];
        for (unsigned k = 0; k < 16; k++)
            sum += A(row, k) * B(k, col);
        d[i] = sum;
    }
    warp.arrive_and_wait();
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
    coil_emu.mma.assign(bx, CoilEmuFragments{});
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
    coil_emu.sync = nullptr;
}

/* The same launch for a kernel whose threads never meet (a pointwise kernel: no barrier,
 * shuffle or shared memory): each block's threads one after another on the calling
 * thread, which any schedule of such a kernel allows, without a thread per CUDA thread.
 * A kernel that does meet stops the test, naming what it called. */
extern "C" void coil_emu_launch_serial(CoilEmuKernel fn, unsigned gx, unsigned gy, unsigned bx,
                                       void *const *bufs, const long long *syms)
{
    coil_emu.sync = nullptr;
    blockDim = dim3{bx, 1, 1};
    gridDim = dim3{gx, gy, 1};
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++)
            for (unsigned t = 0; t < bx; t++) {
                blockIdx = dim3{x, y, 0};
                threadIdx = dim3{t, 0, 0};
                fn(bufs, syms);
            }
}
