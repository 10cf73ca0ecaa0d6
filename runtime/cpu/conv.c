/* conv.c — im2col panels of a convolution GEMM (GemmConv): each row of the panel is one
 * (channel, tap) of the kernel over the panel's output positions. The positions are cut
 * once per panel into runs along the output's last axis; each row then copies each run
 * from x (along x's contiguous last axis one stretch between padding zeros, read at the
 * convolution's stride; else element by element), the taps stepped without divisions. */
#include "runtime/cpu/conv.h"

/* The packing loops at the host's widest vectors: a clone per ISA, picked when the library
 * loads (the build targets baseline x86-64); the helpers below inline into each. Copies
 * only, so every clone gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#define VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* Output positions [at, at + len) of the panel: one stretch of the output's last axis,
 * from (q0, q1, q2). */
typedef struct Run {
    int64_t q0, q1, q2, len, at;
} Run;

enum { MAX_RUNS = 64 };

/* Columns [n0, n0 + nr) cut into runs, at most MAX_RUNS; how many columns they cover. */
static int64_t cut_runs(const GemmConv *cv, int64_t n0, int64_t nr, Run *run, int *nrun)
{
    int64_t width = cv->out[2], q2 = n0 % width, q1 = n0 / width % cv->out[1];
    int64_t q0 = n0 / width / cv->out[1], done = 0;
    for (*nrun = 0; done < nr && *nrun < MAX_RUNS; (*nrun)++) {
        int64_t len = width - q2 < nr - done ? width - q2 : nr - done;
        run[*nrun] = (Run){q0, q1, q2, len, done};
        done += len, q2 = 0;
        if (++q1 == cv->out[1])
            q1 = 0, q0++;
    }
    return done;
}

/* a / b rounded towards minus infinity (b > 0). */
static inline int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0); }

/* One run of one row: x's row at output (q0, q1) and taps t0, t1, or zeros in the padding. */
static inline void fill_run(const GemmConv *cv, const float *plane, const int64_t *t, const Run *r,
                     float *dst)
{
    int64_t i0 = r->q0 * cv->stride[0] - cv->pad0[0] + t[0] * cv->dil[0];
    int64_t i1 = r->q1 * cv->stride[1] - cv->pad0[1] + t[1] * cv->dil[1];
    if (i0 < 0 || i0 >= cv->in[0] || i1 < 0 || i1 >= cv->in[1]) {
        for (int64_t j = 0; j < r->len; j++)
            dst[j] = 0;
        return;
    }
    const float *row = plane + i0 * cv->x_stride[0] + i1 * cv->x_stride[1];
    int64_t s = cv->stride[2], xs = cv->x_stride[2], in = cv->in[2];
    int64_t base = r->q2 * s + t[2] * cv->dil[2] - cv->pad0[2]; /* x index at j = 0 */
    if (xs != 1) {
        for (int64_t j = 0; j < r->len; j++) {
            int64_t i = j * s + base;
            dst[j] = i >= 0 && i < in ? row[i * xs] : 0;
        }
        return;
    }
    /* j in [lo, hi) reads x (0 <= j * s + base < in), the rest is padding; only runs that
     * meet the padding divide (two divisions were a sixth of the packing). Strides 1 and 2
     * (ResNet's) get loops of their own, which vectorise. */
    int64_t lo = 0, hi = r->len;
    if (base < 0 || base + (r->len - 1) * s >= in) {
        lo = -floor_div(base, s), hi = -floor_div(base - in, s);
        lo = lo < 0 ? 0 : lo > r->len ? r->len : lo;
        hi = hi < lo ? lo : hi > r->len ? r->len : hi;
    }
    const float *src = row + base + lo * s;
    float *d = dst + lo;
    int64_t n = hi - lo;
    for (int64_t j = 0; j < lo; j++)
        dst[j] = 0;
    if (s == 1)
        for (int64_t j = 0; j < n; j++)
            d[j] = src[j];
    else if (s == 2)
        for (int64_t j = 0; j < n; j++)
            d[j] = src[2 * j];
    else
        for (int64_t j = 0; j < n; j++)
            d[j] = src[j * s];
    for (int64_t j = hi; j < r->len; j++)
        dst[j] = 0;
}

/* Rows [k0, k0 + kc) over the runs: the channel and taps of k0, then stepped. */
static inline void fill_rows(const GemmConv *cv, const float *x, int64_t k0, int64_t kc,
                             const Run *run, int nrun, int64_t ld, float *dst)
{
    int64_t taps = cv->k[0] * cv->k[1] * cv->k[2], rest = k0 % taps, t[3];
    int64_t c = k0 / taps;
    t[2] = rest % cv->k[2], t[1] = rest / cv->k[2] % cv->k[1], t[0] = rest / cv->k[2] / cv->k[1];
    for (int64_t p = 0; p < kc; p++) {
        const float *plane = x + c * cv->c_stride;
        for (int i = 0; i < nrun; i++)
            fill_run(cv, plane, t, &run[i], dst + p * ld + run[i].at);
        if (++t[2] < cv->k[2])
            continue;
        t[2] = 0;
        if (++t[1] < cv->k[1])
            continue;
        t[1] = 0;
        if (++t[0] < cv->k[0])
            continue;
        t[0] = 0, c++;
    }
}

VECTOR_CLONES static void pack_panel(const GemmConv *cv, const float *x, int64_t k0, int64_t kc,
                                     int64_t n0, int64_t nr, int64_t ld, float *dst)
{
    Run run[MAX_RUNS];
    for (int64_t done = 0; done < nr;) { /* columns in chunks of at most MAX_RUNS runs */
        int nrun;
        int64_t cols = cut_runs(cv, n0 + done, nr - done, run, &nrun);
        fill_rows(cv, x, k0, kc, run, nrun, ld, dst + done);
        done += cols;
    }
}

/* Not cloned itself: a cloned function's ifunc resolver is a global symbol of its own,
 * which the library would export beside the coil_ API. */
void conv_pack_panel(const GemmConv *cv, const float *x, int64_t k0, int64_t kc, int64_t n0,
                     int64_t nr, int64_t ld, float *dst)
{
    pack_panel(cv, x, k0, kc, n0, nr, ld, dst);
}
