/* conv.c — im2col panels of a convolution GEMM (GemmConv): each row of the panel is one
 * (channel, tap) of the kernel over the panel's output positions. The positions are cut
 * once per panel into runs along the output's last axis; for each tap the runs' stretches
 * of x between padding zeros are worked out once, then copied (at the convolution's
 * stride) into that tap's row of every channel. */
#include "runtime/cpu/clones.h"
#include "runtime/cpu/conv.h"

/* The packing loops run at the host's widest vectors (clones.h); the helpers below inline
 * into each. Copies only, so every clone gives the same bits. */

/* Output positions [at, at + len) of the panel: one stretch of the output's last axis,
 * from (q0, q1, q2). */
typedef struct Run {
    int64_t q0, q1, q2, len, at;
} Run;

/* Runs per chunk of a panel's columns, and spans (runs x taps) a chunk tabulates. */
enum { MAX_RUNS = 64, SPAN_TABLE = 512 };

/* Columns [n0, n0 + nr) cut into runs, as many as the span table holds (at most
 * MAX_RUNS); how many columns they cover. */
static int64_t cut_runs(const GemmConv *cv, int64_t n0, int64_t nr, Run *run, int *nrun)
{
    int64_t taps = cv->k[0] * cv->k[1] * cv->k[2], most = SPAN_TABLE / taps;
    most = most < 1 ? 1 : most > MAX_RUNS ? MAX_RUNS : most; /* a chunk's spans fit the table */
    int64_t width = cv->out[2], q2 = n0 % width, q1 = n0 / width % cv->out[1];
    int64_t q0 = n0 / width / cv->out[1], done = 0;
    for (*nrun = 0; done < nr && *nrun < most; (*nrun)++) {
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

/* Where one run reads x for one tap (t0, t1, t2), in every channel alike: from off (past
 * the channel's plane) at `step` per column, columns [lo, hi) of the run; the others lie
 * in the padding. */
typedef struct Span {
    int64_t off, lo, hi;
} Span;

static inline Span tap_span(const GemmConv *cv, const int64_t *t, const Run *r)
{
    int64_t i0 = r->q0 * cv->stride[0] - cv->pad0[0] + t[0] * cv->dil[0];
    int64_t i1 = r->q1 * cv->stride[1] - cv->pad0[1] + t[1] * cv->dil[1];
    if (i0 < 0 || i0 >= cv->in[0] || i1 < 0 || i1 >= cv->in[1])
        return (Span){0, 0, 0};
    int64_t s = cv->stride[2], in = cv->in[2];
    int64_t base = r->q2 * s + t[2] * cv->dil[2] - cv->pad0[2]; /* x index at j = 0 */
    int64_t lo = 0, hi = r->len;
    if (base < 0 || base + (r->len - 1) * s >= in) { /* only runs meeting the padding divide */
        lo = -floor_div(base, s), hi = -floor_div(base - in, s);
        lo = lo < 0 ? 0 : lo > r->len ? r->len : lo;
        hi = hi < lo ? lo : hi > r->len ? r->len : hi;
    }
    int64_t off = i0 * cv->x_stride[0] + i1 * cv->x_stride[1] + (base + lo * s) * cv->x_stride[2];
    return (Span){off, lo, hi};
}

/* One run of one panel row from the channel's plane. Steps 1 and 2 (ResNet's strides over
 * a contiguous axis) get loops of their own, which vectorise. */
static inline void fill_span(const float *plane, const Span *sp, int64_t len, int64_t step,
                             float *dst)
{
    const float *src = plane + sp->off;
    float *d = dst + sp->lo;
    int64_t n = sp->hi - sp->lo;
    for (int64_t j = 0; j < sp->lo; j++)
        dst[j] = 0;
    if (step == 1)
        for (int64_t j = 0; j < n; j++)
            d[j] = src[j];
    else if (step == 2)
        for (int64_t j = 0; j < n; j++)
            d[j] = src[2 * j];
    else
        for (int64_t j = 0; j < n; j++)
            d[j] = src[j * step];
    for (int64_t j = sp->hi; j < len; j++)
        dst[j] = 0;
}

static void spans_of_tap(const GemmConv *cv, int64_t tap, const Run *run, int nrun, Span *sp)
{
    int64_t t[3] = {tap / cv->k[2] / cv->k[1], tap / cv->k[2] % cv->k[1], tap % cv->k[2]};
    for (int i = 0; i < nrun; i++)
        sp[i] = tap_span(cv, t, &run[i]);
}

/* Rows [k0, k0 + kc) over the runs, in order (the panel is written as a stream). Each
 * tap's spans are worked out once, into a table, and serve its row in every channel (row
 * k is channel k / taps, tap k % taps); a kernel of more taps than the table holds works
 * them out row by row. */
static inline void fill_rows(const GemmConv *cv, const float *x, int64_t k0, int64_t kc,
                             const Run *run, int nrun, int64_t ld, float *dst)
{
    int64_t taps = cv->k[0] * cv->k[1] * cv->k[2], step = cv->stride[2] * cv->x_stride[2];
    Span table[SPAN_TABLE], *sp = table;
    bool tabled = taps * nrun <= SPAN_TABLE;
    for (int64_t tap = 0; tabled && tap < taps; tap++)
        spans_of_tap(cv, tap, run, nrun, table + tap * nrun);
    int64_t tap = k0 % taps;
    const float *plane = x + k0 / taps * cv->c_stride;
    for (int64_t p = 0; p < kc; p++) {
        if (tabled)
            sp = table + tap * nrun;
        else
            spans_of_tap(cv, tap, run, nrun, sp);
        for (int i = 0; i < nrun; i++)
            fill_span(plane, &sp[i], run[i].len, step, dst + p * ld + run[i].at);
        if (++tap == taps)
            tap = 0, plane += cv->c_stride; /* the next channel */
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
