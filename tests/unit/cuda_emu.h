/* cuda_emu.h — runs coil's generated CUDA C++ on the host, for tests on machines without a
 * GPU: force-included (-include) when the source is compiled by the host's C++ compiler.
 * Each launch runs its blocks one after another; a block's blockDim.x threads are fibers
 * (ucontext) on the calling thread, each run until it reaches a barrier, so __syncthreads,
 * __shared__ memory (one block at a time: static storage) and warp shuffles (through a slot
 * per thread, between barriers) behave as on a GPU. Fibers rather than an OS thread per
 * CUDA thread: a 256-thread block meeting at thousands of barriers costs context switches
 * in user space, not the kernel scheduler's, so the tests take the same time on a loaded
 * machine as on an idle one, and barriers that can never fill are reported, not a hang.
 * Between barriers the threads run in turn, in ascending order in one launch and
 * descending in the next, so a missing barrier shows as a thread reading what a later
 * (or, the next launch, an earlier) thread has not yet written. A kernel whose threads
 * never meet may run them one by one without fibers (the serial launch).
 * What the emulation cannot show: races that real concurrency within or between blocks
 * would expose, and the device's own math library's last bits. */
#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline dim3 threadIdx, blockIdx; /* set by the scheduler before it resumes a fiber */
inline dim3 blockDim, gridDim;

#define COIL_EMU 1 /* the prelude's tensor-core helpers call coil_emu_mma below */

struct CoilEmuFragments {
    unsigned a[4], b[2]; /* one lane's registers of an m16n8k16 A and B */
};

/* A barrier of `need` threads; a generation ends each time the last one arrives. */
struct CoilEmuBarrier {
    unsigned need = 0, arrived = 0;
    unsigned long long generation = 0;
};

/* One CUDA thread: its context, and the barrier generation it waits to see end. */
struct CoilEmuFiber {
    ucontext_t ctx;
    CoilEmuBarrier *waiting = nullptr;
    unsigned long long generation = 0;
    bool done = false;
};

typedef void (*CoilEmuKernel)(void *const *, const long long *);

struct CoilEmu {
    bool in_block = false;             /* a fiber launch: barriers may be met */
    CoilEmuBarrier block;              /* the whole block: __syncthreads */
    std::vector<CoilEmuBarrier> warp;  /* one per warp: shuffles and mma */
    std::vector<unsigned long long> slot; /* a shuffle's values, one per thread */
    std::vector<CoilEmuFragments> mma; /* an mma's operands, one per thread */
    std::vector<CoilEmuFiber> fibers;
    std::vector<char *> stacks;        /* one per thread index, kept across launches */
    ucontext_t scheduler;
    unsigned current = 0;
    bool descending = false;           /* this launch's order of turns */
    CoilEmuKernel fn = nullptr;
    void *const *bufs = nullptr;
    const long long *syms = nullptr;
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

/* libc's own swapcontext: in a sanitized test that opens this library, ASan's interceptor
 * clears the shadow of the whole target stack at every switch (half of test_cuda_emu's
 * time under ASan), which these stacks never need: only this library's uninstrumented
 * frames live on them. */
inline int coil_emu_swap(ucontext_t *from, ucontext_t *to)
{
    typedef int (*Swap)(ucontext_t *, const ucontext_t *);
    static Swap swap = [] {
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        void *f = libc ? dlsym(libc, "swapcontext") : nullptr;
        return f ? (Swap)f : (Swap)swapcontext;
    }();
    return swap(from, to);
}

/* Arrive at b and give the turn back until its generation has ended. */
inline void coil_emu_arrive(CoilEmuBarrier &b, const char *what)
{
    if (!coil_emu.in_block)
        coil_emu_not_serial(what);
    CoilEmuFiber &f = coil_emu.fibers[coil_emu.current];
    f.waiting = &b;
    f.generation = b.generation;
    if (++b.arrived == b.need)
        b.arrived = 0, b.generation++;
    coil_emu_swap(&f.ctx, &coil_emu.scheduler);
}

inline void __syncthreads() { coil_emu_arrive(coil_emu.block, "__syncthreads"); }

/* The atomics the prelude's adds use (real ones, though a block's fibers take turns). */
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
    if (!coil_emu.in_block)
        coil_emu_not_serial("a warp shuffle");
    CoilEmuBarrier &warp = coil_emu.warp[t / 32];
    coil_emu.slot[t] = bits;
    coil_emu_arrive(warp, "a warp shuffle");
    T r = v;
    if (inside && src < blockDim.x)
        std::memcpy(&r, &coil_emu.slot[src], sizeof r);
    coil_emu_arrive(warp, "a warp shuffle");
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
    if (!coil_emu.in_block)
        coil_emu_not_serial("mma.sync");
    CoilEmuBarrier &warp = coil_emu.warp[t / 32];
    std::memcpy(coil_emu.mma[t].a, a, sizeof coil_emu.mma[t].a);
    std::memcpy(coil_emu.mma[t].b, b, sizeof coil_emu.mma[t].b);
    coil_emu_arrive(warp, "mma.sync");
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
    coil_emu_arrive(warp, "mma.sync");
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

#define COIL_EMU_STACK (256u << 10) /* per fiber; a guard page below it */

/* The stack of thread index t, mapped the first time a launch needs it. */
inline char *coil_emu_stack(unsigned t)
{
    while (coil_emu.stacks.size() <= t) {
        size_t page = 4096, size = COIL_EMU_STACK + page;
        void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED || mprotect(p, page, PROT_NONE) != 0) {
            std::fprintf(stderr, "cuda_emu: no memory for a fiber's stack\n");
            std::abort();
        }
        coil_emu.stacks.push_back((char *)p + page);
    }
    return coil_emu.stacks[t];
}

inline void coil_emu_fiber_main()
{
    coil_emu.fn(coil_emu.bufs, coil_emu.syms);
    coil_emu.fibers[coil_emu.current].done = true; /* uc_link resumes the scheduler */
}

/* Start every thread of the block as a fiber at the kernel's entry. */
inline void coil_emu_start_block(unsigned bx)
{
    for (unsigned t = 0; t < bx; t++) {
        CoilEmuFiber &f = coil_emu.fibers[t];
        f.waiting = nullptr, f.done = false;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = coil_emu_stack(t);
        f.ctx.uc_stack.ss_size = COIL_EMU_STACK;
        f.ctx.uc_link = &coil_emu.scheduler;
        makecontext(&f.ctx, coil_emu_fiber_main, 0);
    }
}

/* Give each runnable thread a turn until all have returned; a sweep in which none can
 * run means barriers that will never fill, which on a GPU is a hang. */
inline void coil_emu_run_block(unsigned bx)
{
    coil_emu_start_block(bx);
    for (unsigned left = bx; left > 0;) {
        bool ran = false;
        for (unsigned i = 0; i < bx; i++) {
            unsigned t = coil_emu.descending ? bx - 1 - i : i;
            CoilEmuFiber &f = coil_emu.fibers[t];
            if (f.done || (f.waiting && f.waiting->generation == f.generation))
                continue;
            f.waiting = nullptr;
            coil_emu.current = t;
            threadIdx = dim3{t, 0, 0};
            coil_emu_swap(&coil_emu.scheduler, &f.ctx);
            left -= f.done;
            ran = true;
        }
        if (!ran) {
            std::fprintf(stderr, "cuda_emu: block (%u, %u): %u threads wait at barriers the "
                         "others never reach (__syncthreads or a shuffle in divergent code)\n",
                         blockIdx.x, blockIdx.y, left);
            std::abort();
        }
    }
}

/* Launch fn over grid (gx, gy) of blocks of bx threads (a multiple of 32). */
extern "C" void coil_emu_launch(CoilEmuKernel fn, unsigned gx, unsigned gy, unsigned bx,
                                void *const *bufs, const long long *syms)
{
    coil_emu.fn = fn, coil_emu.bufs = bufs, coil_emu.syms = syms;
    coil_emu.block = CoilEmuBarrier{bx};
    coil_emu.warp.assign(bx / 32, CoilEmuBarrier{32});
    coil_emu.slot.assign(bx, 0);
    coil_emu.mma.assign(bx, CoilEmuFragments{});
    coil_emu.fibers.resize(bx);
    blockDim = dim3{bx, 1, 1};
    gridDim = dim3{gx, gy, 1};
    coil_emu.in_block = true;
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            blockIdx = dim3{x, y, 0};
            coil_emu_run_block(bx);
        }
    coil_emu.in_block = false;
    coil_emu.descending = !coil_emu.descending;
}

/* The same launch for a kernel whose threads never meet (a pointwise kernel: no barrier,
 * shuffle or shared memory): each block's threads one after another on the calling
 * thread, which any schedule of such a kernel allows, without a thread per CUDA thread.
 * A kernel that does meet stops the test, naming what it called. */
extern "C" void coil_emu_launch_serial(CoilEmuKernel fn, unsigned gx, unsigned gy, unsigned bx,
                                       void *const *bufs, const long long *syms)
{
    coil_emu.in_block = false;
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
