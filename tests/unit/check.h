/* check.h — the unit tests' assertions and small helpers to run a graph on host tensors.
 * Each test file is one program: CHECKs count failures, main returns check_status(). */
#ifndef COIL_TEST_CHECK_H
#define COIL_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static int check_failures;

/* Wall-time limits in the tests hold for the normal build; under ASan and UBSan (make
 * test-asan) everything runs several times slower, so they are scaled. */
#ifdef __SANITIZE_ADDRESS__
#define CHECK_TIME_SCALE 10.0
#else
#define CHECK_TIME_SCALE 1.0
#endif

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

/* Strings compared whole; both are printed on failure. */
#define CHECK_STR(got, want)                                                             \
    do {                                                                                 \
        const char *got_ = (got), *want_ = (want);                                       \
        if (!got_ || strcmp(got_, want_) != 0) {                                         \
            fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__, \
                    __LINE__, got_ ? got_ : "(null)", want_);                            \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

/* |got - want| <= tol * max(1, |want|); NaN matches only NaN, inf only the same inf. */
static inline bool check_close(double got, double want, double tol)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

#define CHECK_NEAR(got, want, tol)                                                       \
    do {                                                                                 \
        double g_ = (got), w_ = (want);                                                  \
        if (!check_close(g_, w_, tol)) {                                                 \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.17g, want %.17g\n", __FILE__, \
                    __LINE__, #got, g_, w_);                                             \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

static inline int check_status(void)
{
    if (check_failures)
        fprintf(stderr, "%d check(s) failed\n", check_failures);
    return check_failures != 0;
}

/* A host tensor holding `vals` (row-major) in dtype dt; vals may be NULL for zeros. */
static inline Tensor check_tensor(DType dt, int rank, const int64_t *shape, const double *vals)
{
    Tensor t;
    Err e = {0};
    if (!tensor_alloc(&t, dt, rank, shape, &e)) {
        fprintf(stderr, "check_tensor: %s\n", e.msg);
        check_failures++;
        return t;
    }
    for (int64_t i = 0; vals && i < tensor_numel(&t); i++)
        dtype_store(dt, t.data, i, vals[i]);
    return t;
}

/* Element i of a host tensor as a double. */
static inline double check_at(const Tensor *t, int64_t i) { return dtype_load(t->dt, t->data, i); }

/* Run g on its inputs (no params); outputs[] must have g->noutput entries. Reports and
 * counts an interpreter error; returns whether the run succeeded. */
static inline bool check_run(const Graph *g, const Tensor *inputs, Tensor *outputs, double *flops)
{
    Err e = {0};
    if (interp_run(g, inputs, NULL, outputs, flops, &e))
        return true;
    fprintf(stderr, "interp_run failed: %s\n", e.msg);
    check_failures++;
    return false;
}

/* Every element of t against want[0..n) (and t has exactly n elements). */
static inline void check_values_at(const char *file, int line, const Tensor *t, const double *want,
                                   int64_t n, double tol)
{
    if (!t->data || tensor_numel(t) != n) {
        fprintf(stderr, "%s:%d: CHECK_VALUES failed: %lld elements, want %lld\n", file, line,
                t->data ? (long long)tensor_numel(t) : -1LL, (long long)n);
        check_failures++;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        if (!check_close(check_at(t, i), want[i], tol)) {
            fprintf(stderr, "%s:%d: CHECK_VALUES failed: element %lld = %.17g, want %.17g\n", file,
                    line, (long long)i, check_at(t, i), want[i]);
            check_failures++;
        }
}
#define CHECK_VALUES(t, want, n, tol) check_values_at(__FILE__, __LINE__, t, want, n, tol)

/* A graph type as text ("f32[B,4]"). */
#define CHECK_TYPE(g, t, want)                                                           \
    do {                                                                                 \
        char buf_[256];                                                                  \
        CHECK_STR(type_fmt(g, t, buf_, sizeof buf_), want);                              \
    } while (0)

/* t's dtype and shape, as text ("f32[2,3]"). */
#define CHECK_SHAPE(t, want)                                                             \
    do {                                                                                 \
        char buf_[256];                                                                  \
        CHECK_STR(tensor_fmt(t, buf_, sizeof buf_), want);                               \
    } while (0)

/* A result's dtype and shape as text, then its values; frees it. */
static inline void check_result_at(const char *file, int line, Tensor *t, const char *shape,
                                   const double *want, int64_t n, double tol)
{
    char buf[256];
    if (strcmp(tensor_fmt(t, buf, sizeof buf), shape) != 0) {
        fprintf(stderr, "%s:%d: CHECK_RESULT failed: shape %s, want %s\n", file, line, buf, shape);
        check_failures++;
    }
    check_values_at(file, line, t, want, n, tol);
    tensor_free(t);
}
#define CHECK_RESULT(t, shape, want, n, tol) check_result_at(__FILE__, __LINE__, t, shape, want, n, tol)

/* Build one op over inputs of static types ts[0..nin) holding vals[i] (NULL: zeros),
 * evaluate it with the interpreter and hand back its result in *out (caller frees).
 * A build error is copied to *e (when e is given) instead of being counted. */
static inline bool check_eval(int op, int nin, const Type *ts, const double *const *vals,
                              const Attr *attrs, int nattr, const Type *declared, Tensor *out,
                              Err *e)
{
    Err err = {0};
    Graph *g = graph_new("check");
    Builder b = builder_make(g, &err);
    int ids[8];
    Tensor in[8];
    int64_t dims[COIL_MAX_RANK];
    for (int i = 0; i < nin && i < 8; i++) {
        char name[8] = {'x', (char)('0' + i), 0};
        ids[i] = b_input(&b, name, &ts[i]);
        for (int d = 0; d < ts[i].rank; d++)
            dims[d] = ts[i].dim[d].k;
        in[i] = check_tensor(ts[i].dt, ts[i].rank, dims, vals ? vals[i] : NULL);
    }
    b_output(&b, b_op(&b, op, ids, nin, attrs, nattr, declared), NULL);
    bool ok = err_ok(&err);
    memset(out, 0, sizeof *out);
    if (!ok && e)
        *e = err;
    else if (!ok) {
        fprintf(stderr, "check_eval: %s\n", err.msg);
        check_failures++;
    } else
        ok = check_run(g, in, out, NULL);
    for (int i = 0; i < nin && i < 8; i++)
        tensor_free(&in[i]);
    graph_free(g);
    return ok;
}

#endif
