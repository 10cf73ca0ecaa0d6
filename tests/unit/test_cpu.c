/* test_cpu.c — the LLVM CPU backend on hand-built Programs: every unary and binary op in
 * f32 against libm in f64 (in ulps), f16/bf16 loads, stores and rounding (also without
 * F16C), integer wrap-around and division by zero, casts, select, Philox bit for bit,
 * every reduction (argmax ties and NaN), a 3-phase softmax, nouter == 0, sub-ranges,
 * symbolic sizes, clamped loads under a select, tile functions with and without an
 * epilogue, llvm-ir/asm/obj output (vectorised), the object loaded back and its errors,
 * the object cache (hits, misses, damaged entries),
 * two modules compiled and run on two threads at once; then the bandwidth of
 * y = gelu(x) + b next to memcpy's (printed, not checked). */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cpu/cpu.h"
#include "runtime/cpu/cpu_engine.h"
#include "runtime/cpu/peak.h"

/* ---------------------------------------------------------------- building programs */

#define MAXLX 512
#define MAXST 64
#define MAXK 24
#define MAXB 64

typedef struct KB { /* a kernel under construction */
    Lx lx[MAXLX];
    int nlx;
    LStmt st[MAXST];
    int nst;
} KB;

typedef struct Prog {
    Program p;
    Buffer buf[MAXB];
    Kernel kernel[MAXK];
    KB kb[MAXK];
    Step step[MAXK];
} Prog;

static Prog *prog_new(void)
{
    Prog *pr = calloc(1, sizeof *pr);
    pr->p.buf = pr->buf;
    pr->p.kernel = pr->kernel;
    pr->p.step = pr->step;
    return pr;
}

static int add_buf(Prog *pr, const char *name, DType dt, Dim numel)
{
    int b = pr->p.nbuf++;
    pr->buf[b] = (Buffer){.name = name, .kind = BUF_TEMP, .dt = dt, .numel = numel};
    return b;
}

static int E(KB *k, LxKind kind, DType dt, int op, int a, int b, int c, int64_t i, int64_t j,
             double f)
{
    k->lx[k->nlx] = (Lx){.kind = kind, .dt = dt, .op = op, .a = a, .b = b, .c = c, .i = i, .j = j, .f = f};
    return k->nlx++;
}

static int VAR(KB *k, int i) { return E(k, LX_VAR, DT_I64, 0, -1, -1, -1, i, 0, 0); }
static int INT(KB *k, int64_t v) { return E(k, LX_INT, DT_I64, 0, -1, -1, -1, v, 0, 0); }
static int SYM(KB *k, int s) { return E(k, LX_SYM, DT_I64, 0, -1, -1, -1, s, 0, 0); }
static int CONST(KB *k, DType dt, double v) { return E(k, LX_FLOAT, dt, 0, -1, -1, -1, 0, 0, v); }
static int UN(KB *k, int op, DType dt, int a) { return E(k, LX_UNARY, dt, op, a, -1, -1, 0, 0, 0); }
static int BIN(KB *k, int op, DType dt, int a, int b) { return E(k, LX_BINARY, dt, op, a, b, -1, 0, 0, 0); }
static int CAST(KB *k, DType dt, int a) { return E(k, LX_CAST, dt, 0, a, -1, -1, 0, 0, 0); }
static int SEL(KB *k, DType dt, int c, int a, int b) { return E(k, LX_SELECT, dt, 0, c, a, b, 0, 0, 0); }
static int ACC(KB *k, DType dt, int stmt) { return E(k, LX_ACC, dt, 0, -1, -1, -1, stmt, 0, 0); }
static int LOAD(KB *k, const Prog *pr, int buf, int idx)
{
    return E(k, LX_LOAD, pr->buf[buf].dt, 0, idx, -1, -1, buf, 0, 0);
}
/* i64 index arithmetic */
static int IADD(KB *k, int a, int b) { return BIN(k, OP_ADD, DT_I64, a, b); }
static int IMUL(KB *k, int a, int b) { return BIN(k, OP_MUL, DT_I64, a, b); }

static int STORE(KB *k, int buf, int idx, int val)
{
    k->st[k->nst] = (LStmt){.kind = ST_STORE, .buf = buf, .index = idx, .value = val};
    return k->nst++;
}

static int REDUCE(KB *k, int op, int val, DType acc, int axis)
{
    k->st[k->nst] = (LStmt){.kind = ST_REDUCE, .op = op, .value = val, .acc_dt = acc, .axis = axis};
    return k->nst++;
}

/* Kernel from kb: sizes (outer then inner), nphase phases of counts[p] statements each, in
 * order, the rest after; also a step running it. Returns the kernel's index. */
static int add_kernel(Prog *pr, int kbi, const char *name, int nouter, int ninner,
                      const Dim *size, int nphase, const int *counts)
{
    KB *kb = &pr->kb[kbi];
    int k = pr->p.nkernel++;
    Kernel *kk = &pr->kernel[k];
    *kk = (Kernel){.name = name, .nouter = nouter, .ninner = ninner, .nphase = nphase,
                   .lx = kb->lx, .nlx = kb->nlx, .stmt = kb->st, .nstmt = kb->nst};
    for (int d = 0; d < nouter + ninner; d++)
        kk->size[d] = size[d];
    int first = 0;
    for (int p = 0; p < nphase; p++) {
        kk->phase[p] = (StmtRange){first, counts[p]};
        first += counts[p];
    }
    kk->after = (StmtRange){first, kb->nst - first};
    pr->step[pr->p.nstep++] = (Step){.kind = STEP_KERNEL, .kernel = k};
    return k;
}

static CpuModule *compile(const Program *p, const CpuOptions *o)
{
    Err e = {0};
    CpuModule *m = cpu_compile(p, o, &e);
    if (!m) {
        fprintf(stderr, "cpu_compile: %s\n", e.msg);
        check_failures++;
    }
    return m;
}

static uint32_t bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---------------------------------------------------------------- ulps */

/* |got - want| in units of the last place of want rounded to f32 (subnormals: 2^-149);
 * NaN must meet NaN, infinity the same infinity. */
static double ulp_err(float got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0 : INFINITY;
    float w = (float)want;
    if (isinf(got) || isinf(w)) {
        if (got == w)
            return 0;
        if (isinf(got))
            return INFINITY;
        return fabs((double)got - want) / 0x1p104;
    }
    double u = fabsf(w) < 0x1p-126f ? 0x1p-149 : ldexp(1.0, ilogbf(w) - 23);
    if (w == 0)
        u = 0x1p-149;
    return fabs((double)got - want) / u;
}

/* Inputs for accuracy runs: a sweep over all bit patterns, dense samples where the
 * functions bend, and the special values. */
static int64_t accuracy_inputs(float *x, int64_t n)
{
    static const float special[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-127f, 0x1p-126f,
                                    -0x1p-126f, 1, -1, 0.5f, 2, 0.625f, -0.625f, 0.999999f,
                                    1.000001f, 88.72283f, 88.72284f, 89, -87.33655f, -103.97f,
                                    -103.98f, -104, 3.4028235e38f, -3.4028235e38f, INFINITY,
                                    -INFINITY, NAN, 1e4f, -1e4f, 1.5707964f, 3.1415927f,
                                    6.2831855f, 1.6e6f, 9.5f, -9.5f, 14, -14, 13.3f, -13.3f,
                                    0x1p-20f, -0x1p-20f, 3.92f, -3.92f, 10.5f, -10.5f};
    int64_t i = 0, ns = (int64_t)(sizeof special / sizeof special[0]);
    for (int64_t s = 0; s < ns && i < n; s++)
        x[i++] = special[s];
    uint64_t r = 88172645463325252ull;
    for (int64_t s = 0; i < n && s < n / 2; s++)
        x[i++] = from_bits((uint32_t)(s * 8191u + 12345u));
    while (i < n) { /* uniform in [-16, 16), then [-128, 128) */
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        double u = (double)(r >> 11) * 0x1p-53;
        x[i] = (float)((u * 2 - 1) * (i % 4 ? 16 : 128));
        i++;
    }
    return n;
}

/* Bounds with some room above mathlib.c's measured maxima (gelu, all in f32 for speed:
 * 6.45 ulps over every f32, where its negative tail adds the roundings of e^(-x^2/2) and
 * of a rational's two polynomials). */
typedef struct Acc {
    int op;
    double bound;  /* ulps allowed */
    double limit;  /* |x| beyond which only range is checked (sin, cos); 0: none */
} Acc;

static const Acc unary_acc[] = {
    {OP_NEG, 0, 0},   {OP_ABS, 0, 0},        {OP_EXP, 2, 0},        {OP_LOG, 2, 0},
    {OP_SQRT, 0.5, 0}, {OP_RSQRT, 1.5, 0},   {OP_RECIPROCAL, 0.5, 0}, {OP_TANH, 3, 0},
    {OP_SIGMOID, 3, 0}, {OP_RELU, 0, 0},     {OP_GELU, 7, 0},       {OP_GELU_TANH, 4, 0},
    {OP_SILU, 4, 0},  {OP_SIN, 2, 0x1p20},  {OP_COS, 2, 0x1p20},   {OP_ERF, 2, 0},
};
#define NUNARY ((int)(sizeof unary_acc / sizeof unary_acc[0]))

/* One pointwise kernel per op over the same input; max ulps per op against f64 libm. */
static void test_unary_accuracy(void)
{
    const int64_t n = 1 << 20;
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(n));
    float *in = malloc((size_t)n * 4), *out[NUNARY];
    accuracy_inputs(in, n);
    void *bufs[MAXB] = {in};
    static char names[NUNARY][32];
    for (int u = 0; u < NUNARY; u++) {
        KB *k = &pr->kb[u];
        int y = add_buf(pr, "y", DT_F32, dim_static(n));
        int i = VAR(k, 0);
        STORE(k, y, i, UN(k, unary_acc[u].op, DT_F32, LOAD(k, pr, x, i)));
        snprintf(names[u], sizeof names[u], "k_%s", op_info[unary_acc[u].op].name);
        add_kernel(pr, u, names[u], 1, 0, (Dim[]){dim_static(n)}, 0, NULL);
        bufs[y] = out[u] = malloc((size_t)n * 4);
    }
    CpuModule *m = compile(&pr->p, NULL);
    if (!m)
        goto done;
    for (int u = 0; u < NUNARY; u++) {
        const Acc *a = &unary_acc[u];
        cpu_kernel(m, u)(bufs, NULL, 0, n);
        double worst = 0;
        float at = 0;
        for (int64_t i = 0; i < n; i++) {
            double want = op_info[a->op].scalar1(in[i]);
            if (a->limit && !(fabsf(in[i]) < a->limit)) {
                bool ok = isnan(in[i]) || isinf(in[i]) ? isnan(out[u][i]) : fabsf(out[u][i]) <= 1;
                if (!ok) {
                    fprintf(stderr, "%s(%a) = %a: not in [-1, 1]\n", op_info[a->op].name, in[i], out[u][i]);
                    check_failures++;
                }
                continue;
            }
            double e = ulp_err(out[u][i], want);
            if (e > worst)
                worst = e, at = in[i];
        }
        printf("  %-10s max %.3f ulp (at %a)\n", op_info[a->op].name, worst, at);
        if (worst > a->bound) {
            fprintf(stderr, "%s: %.3f ulp at %a, want <= %g\n", op_info[a->op].name, worst, at, a->bound);
            check_failures++;
        }
    }
    cpu_free(m);
done:
    for (int u = 0; u < NUNARY; u++)
        free(out[u]);
    free(in);
    free(pr);
}

/* ---------------------------------------------------------------- the reference */

static int64_t numel(const Prog *pr, int b, const int64_t *syms)
{
    Dim d = pr->buf[b].numel;
    int64_t n = d.k;
    for (int s = 0; s < COIL_MAX_SYMS; s++)
        if (d.syms >> s & 1)
            n *= syms[s];
    return n;
}

/* |a - b| in units of b's last place in dtype dt (integers and bool: exact). */
static double dt_err(DType dt, double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INFINITY;
    if (!dtype_info[dt].is_float || isinf(a) || isinf(b))
        return a == b ? 0 : INFINITY;
    int mant = dt == DT_F32 ? 23 : dt == DT_F16 ? 10 : 7, emin = dt == DT_F16 ? -14 : -126;
    int e = b == 0 ? emin : ilogb(b) < emin ? emin : ilogb(b);
    return fabs(a - b) / ldexp(1.0, e - mant);
}

/* Kernel k over [begin, end) by the JIT (on bufs) and by codegen/loop_eval.c (on copies
 * of the buffers it stores): every stored element within `ulps` (exact for integers). */
static void xcheck(const Prog *pr, CpuModule *m, int k, void **bufs, const int64_t *syms,
                   int64_t begin, int64_t end, double ulps)
{
    const Kernel *kk = &pr->kernel[k];
    void *ref[MAXB];
    bool stored[MAXB] = {0};
    memcpy(ref, bufs, sizeof ref);
    for (int s = 0; s < kk->nstmt; s++)
        if (kk->stmt[s].kind == ST_STORE)
            stored[kk->stmt[s].buf] = true;
    for (int b = 0; b < pr->p.nbuf; b++)
        if (stored[b]) {
            size_t bytes = (size_t)numel(pr, b, syms) * (size_t)dtype_info[pr->buf[b].dt].size;
            ref[b] = malloc(bytes + 1);
            memcpy(ref[b], bufs[b], bytes);
        }
    loop_eval_kernel(&pr->p, k, ref, syms, begin, end);
    cpu_kernel(m, k)(bufs, syms, begin, end);
    for (int b = 0; b < pr->p.nbuf; b++) {
        if (!stored[b])
            continue;
        DType dt = pr->buf[b].dt;
        int bad = 0;
        for (int64_t i = 0; i < numel(pr, b, syms); i++) {
            double got = dtype_load(dt, bufs[b], i), want = dtype_load(dt, ref[b], i);
            if (dt_err(dt, got, want) > ulps && bad++ < 5)
                fprintf(stderr, "%s: buffer %s[%lld] = %.9g, loop_eval says %.9g\n", kk->name,
                        pr->buf[b].name, (long long)i, got, want);
        }
        check_failures += bad;
        free(ref[b]);
    }
}

/* A buffer of n elements of dtype dt holding f(i). */
static void *filled(DType dt, int64_t n, double (*f)(int64_t))
{
    void *p = malloc((size_t)(n ? n : 1) * (size_t)dtype_info[dt].size);
    for (int64_t i = 0; i < n; i++)
        dtype_store(dt, p, i, f ? f(i) : 0);
    return p;
}

static double wave(int64_t i) { return sin((double)i * 0.37) * 4 + (double)(i % 7) * 0.01; }
static double nan_fill(int64_t i) { (void)i; return NAN; }

/* ---------------------------------------------------------------- binary ops */

static const float specials[] = {0.0f, -0.0f, 1, -1, 0.5f, -0.5f, 2, -2, 3, -3, 2.5f, -2.5f,
                                 INFINITY, -INFINITY, NAN, 1e10f, -1e10f, 1e-10f, 0x1p-149f,
                                 0x1p24f + 2, 0x1p24f + 2, 7, 0.7f, 1.0000001f, 0.9999999f};
#define NSPEC ((int)(sizeof specials / sizeof specials[0]))

/* Every pair of special values through each f32 binary op: the arithmetic ones exact
 * (IEEE), maximum/minimum and compares as the interpreter's scalar semantics say, pow as
 * C's pow (special cases exact, the rest within 1 ulp); then pow on random pairs. */
static void test_binary_f32(void)
{
    static const int ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM,
                              OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
    enum { NOPS = sizeof ops / sizeof ops[0], N = 4096 + NSPEC * NSPEC };
    Prog *pr = prog_new();
    int a = add_buf(pr, "a", DT_F32, dim_static(N)), b = add_buf(pr, "b", DT_F32, dim_static(N));
    float *va = malloc(N * 4), *vb = malloc(N * 4);
    void *bufs[MAXB] = {va, vb};
    int y[NOPS];
    for (int o = 0; o < NOPS; o++) {
        KB *k = &pr->kb[o];
        bool cmp = ops[o] >= OP_EQ;
        y[o] = add_buf(pr, "y", cmp ? DT_BOOL : DT_F32, dim_static(N));
        int i = VAR(k, 0);
        STORE(k, y[o], i, BIN(k, ops[o], cmp ? DT_BOOL : DT_F32, LOAD(k, pr, a, i), LOAD(k, pr, b, i)));
        add_kernel(pr, o, op_info[ops[o]].name, 1, 0, (Dim[]){dim_static(N)}, 0, NULL);
        bufs[y[o]] = filled(cmp ? DT_BOOL : DT_F32, N, NULL);
    }
    int n = 0;
    for (int i = 0; i < NSPEC; i++)
        for (int j = 0; j < NSPEC; j++, n++)
            va[n] = specials[i], vb[n] = specials[j];
    srand(3);
    for (; n < N; n++) { /* pow's bulk: a in (0, 64), b in (-40, 40); some negative a */
        va[n] = (float)rand() / RAND_MAX * 64 * (n % 5 ? 1 : -1);
        vb[n] = n % 5 ? (float)rand() / RAND_MAX * 80 - 40 : (float)(rand() % 41 - 20);
    }
    CpuModule *m = compile(&pr->p, NULL);
    for (int o = 0; m && o < NOPS; o++) {
        cpu_kernel(m, o)(bufs, NULL, 0, N);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double want = op_info[ops[o]].scalar2(va[i], vb[i]), got = dtype_load(pr->buf[y[o]].dt, bufs[y[o]], i);
            bool exact = ops[o] != OP_POW || i < NSPEC * NSPEC;
            double err = ops[o] >= OP_EQ ? (got == want ? 0 : INFINITY) : ulp_err((float)got, want);
            if (exact && ops[o] != OP_POW && ops[o] < OP_EQ && bits32((float)got) != bits32((float)want) &&
                !(isnan(got) && isnan(want)))
                err = INFINITY;
            if (ops[o] == OP_POW && exact && !(err <= 0.5))
                err = INFINITY;
            if (err > worst)
                worst = err;
            if (err > 1 && worst == err)
                fprintf(stderr, "%s(%a, %a) = %a, want %a\n", op_info[ops[o]].name, va[i], vb[i], got, want);
        }
        check_failures += worst > 1;
        if (ops[o] == OP_POW)
            printf("  %-10s max %.3f ulp\n", "pow", worst);
    }
    cpu_free(m);
    for (int o = 0; o < NOPS; o++)
        free(bufs[y[o]]);
    free(va);
    free(vb);
    free(pr);
}

/* pow with a constant exponent takes short forms; each must agree with pow. */
static void test_pow_const(void)
{
    static const double exps[] = {2, 0.5, -1, 1, 3, -0.5};
    enum { NE = sizeof exps / sizeof exps[0] };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(NSPEC));
    void *bufs[MAXB] = {(void *)specials};
    for (int e = 0; e < NE; e++) {
        KB *k = &pr->kb[e];
        int y = add_buf(pr, "y", DT_F32, dim_static(NSPEC)), i = VAR(k, 0);
        STORE(k, y, i, BIN(k, OP_POW, DT_F32, LOAD(k, pr, x, i), CONST(k, DT_F32, exps[e])));
        add_kernel(pr, e, "pow_c", 1, 0, (Dim[]){dim_static(NSPEC)}, 0, NULL);
        pr->kernel[e].name = (const char *[]){"pc0", "pc1", "pc2", "pc3", "pc4", "pc5"}[e];
        bufs[y] = filled(DT_F32, NSPEC, NULL);
    }
    CpuModule *m = compile(&pr->p, NULL);
    for (int e = 0; m && e < NE; e++) {
        cpu_kernel(m, e)(bufs, NULL, 0, NSPEC);
        for (int i = 0; i < NSPEC; i++) {
            float got = ((float *)bufs[1 + e])[i];
            double want = pow(specials[i], exps[e]);
            if (ulp_err(got, want) > 1 || (want == 0 && !signbit(got) != !signbit(want))) {
                fprintf(stderr, "pow(%a, %g) = %a, want %a\n", specials[i], exps[e], got, want);
                check_failures++;
            }
        }
    }
    cpu_free(m);
    for (int e = 0; e < NE; e++)
        free(bufs[1 + e]);
    free(pr);
}

/* ---------------------------------------------------------------- f16 and bf16 */

/* Stores of f32 values into f16 and bf16 buffers (bit for bit as dtype.c rounds them),
 * every f16 and bf16 bit pattern loaded back, and a chain of ops rounded per op. */
static void run_half(const CpuOptions *o)
{
    enum { NV = 65536 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(NV)), h = add_buf(pr, "h", DT_F16, dim_static(NV));
    int bh = add_buf(pr, "bh", DT_BF16, dim_static(NV)), hin = add_buf(pr, "hin", DT_F16, dim_static(NV));
    int bin = add_buf(pr, "bin", DT_BF16, dim_static(NV)), hout = add_buf(pr, "hout", DT_F32, dim_static(NV));
    int bout = add_buf(pr, "bout", DT_F32, dim_static(NV)), ch = add_buf(pr, "ch", DT_F16, dim_static(NV));
    int cb = add_buf(pr, "cb", DT_BF16, dim_static(NV));
    KB *k = &pr->kb[0];
    int i = VAR(k, 0), v = LOAD(k, pr, x, i);
    STORE(k, h, i, v);
    STORE(k, bh, i, v);
    STORE(k, hout, i, LOAD(k, pr, hin, i));
    STORE(k, bout, i, LOAD(k, pr, bin, i));
    /* (hin * 1.5 - hin) * 3 in f16 and in bf16: each op rounds */
    int a16 = LOAD(k, pr, hin, i), a8 = LOAD(k, pr, bin, i);
    int c16 = BIN(k, OP_MUL, DT_F16, BIN(k, OP_SUB, DT_F16, BIN(k, OP_MUL, DT_F16, a16, CONST(k, DT_F16, 1.5)), a16), CONST(k, DT_F16, 3));
    int c8 = BIN(k, OP_MUL, DT_BF16, BIN(k, OP_SUB, DT_BF16, BIN(k, OP_MUL, DT_BF16, a8, CONST(k, DT_BF16, 1.5)), a8), CONST(k, DT_BF16, 3));
    STORE(k, ch, i, c16);
    STORE(k, cb, i, c8);
    add_kernel(pr, 0, "halves", 1, 0, (Dim[]){dim_static(NV)}, 0, NULL);
    float *vx = malloc(NV * 4);
    uint16_t *bits = malloc(NV * 2);
    for (int j = 0; j < NV; j++) {
        bits[j] = (uint16_t)j;
        /* near every f16 and bf16 value and the ties between them, subnormals included */
        float f = f16_to_f32((uint16_t)(j >> 1));
        vx[j] = j & 1 ? nextafterf(f, INFINITY) : j % 3 ? f * 1.00048828125f : from_bits((uint32_t)j << 13 | (uint32_t)j);
    }
    void *bufs[MAXB] = {vx, filled(DT_F16, NV, NULL), filled(DT_BF16, NV, NULL), bits, bits,
                        filled(DT_F32, NV, NULL), filled(DT_F32, NV, NULL), filled(DT_F16, NV, NULL),
                        filled(DT_BF16, NV, NULL)};
    CpuModule *m = compile(&pr->p, o);
    if (m) {
        cpu_kernel(m, 0)(bufs, NULL, 0, NV);
        int bad = 0;
        for (int j = 0; j < NV; j++) {
            uint16_t wh = f32_to_f16(vx[j]), wb = f32_to_bf16(vx[j]);
            uint16_t gh = ((uint16_t *)bufs[h])[j], gb = ((uint16_t *)bufs[bh])[j];
            bool nan = isnan(vx[j]);
            if ((nan ? (gh & 0x7c00) != 0x7c00 || !(gh & 0x3ff) : gh != wh) || (nan ? (gb & 0x7fc0) != 0x7fc0 : gb != wb))
                if (bad++ < 5)
                    fprintf(stderr, "%s: store %a: f16 %04x want %04x, bf16 %04x want %04x\n",
                            o ? o->cpu : "host", vx[j], gh, wh, gb, wb);
            float lh = ((float *)bufs[hout])[j], lb = ((float *)bufs[bout])[j];
            float wlh = f16_to_f32(bits[j]), wlb = bf16_to_f32(bits[j]);
            if ((isnan(wlh) ? !isnan(lh) : bits32(lh) != bits32(wlh)) || (isnan(wlb) ? !isnan(lb) : bits32(lb) != bits32(wlb)))
                if (bad++ < 5)
                    fprintf(stderr, "%s: load %04x: f16 %a want %a, bf16 %a want %a\n", o ? o->cpu : "host", bits[j], lh, wlh, lb, wlb);
            double r16 = dtype_round(DT_F16, dtype_round(DT_F16, dtype_round(DT_F16, wlh * 1.5) - wlh) * 3);
            double r8 = dtype_round(DT_BF16, dtype_round(DT_BF16, dtype_round(DT_BF16, wlb * 1.5) - wlb) * 3);
            double g16 = dtype_load(DT_F16, bufs[ch], j), g8 = dtype_load(DT_BF16, bufs[cb], j);
            if (dt_err(DT_F16, g16, r16) > 0 || dt_err(DT_BF16, g8, r8) > 0)
                if (bad++ < 5)
                    fprintf(stderr, "%s: chain of %04x: f16 %a want %a, bf16 %a want %a\n", o ? o->cpu : "host", bits[j], g16, r16, g8, r8);
        }
        check_failures += bad;
        xcheck(pr, m, 0, bufs, NULL, 0, NV, 0);
    }
    cpu_free(m);
    for (int b = 0; b < pr->p.nbuf; b++)
        if (b != hin && b != bin)
            free(bufs[b]);
    free(bits);
    free(pr);
}

static void test_half(void)
{
    run_half(NULL);
    run_half(&(CpuOptions){.cpu = "x86-64"}); /* no F16C: the integer conversions */
}

/* ---------------------------------------------------------------- integers and bools */

static int64_t wrap(DType dt, int64_t v)
{
    switch (dt) {
    case DT_I8: return (int8_t)(uint8_t)v;
    case DT_I32: return (int32_t)(uint32_t)v;
    default: return v;
    }
}

/* Wrap-around of add, sub, mul, neg, abs, max, min, relu at each width; div and pow
 * through f64 (division by zero saturates, never traps), all against C. */
static void test_int(void)
{
    static const DType dts[] = {DT_I8, DT_I32, DT_I64};
    static const int bins[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM, OP_LT, OP_NE};
    static const int uns[] = {OP_NEG, OP_ABS, OP_RELU};
    static const int64_t vals[] = {0, 1, -1, 2, -2, 3, 7, -7, 100, 127, -128, 200, 65537,
                                   INT32_MAX, INT32_MIN, (int64_t)1 << 40, INT64_MAX, INT64_MIN, 40, -3};
    enum { NV = sizeof vals / sizeof vals[0], N = NV * NV, NB = sizeof bins / sizeof bins[0], NU = sizeof uns / sizeof uns[0] };
    for (int d = 0; d < 3; d++) {
        DType dt = dts[d];
        Prog *pr = prog_new();
        int a = add_buf(pr, "a", dt, dim_static(N)), b = add_buf(pr, "b", dt, dim_static(N));
        void *bufs[MAXB] = {filled(dt, N, NULL), filled(dt, N, NULL)};
        for (int i = 0; i < N; i++) { /* stored wrapped, as the dtype holds them */
            dtype_store(dt, bufs[a], i, (double)wrap(dt, vals[i / NV]));
            dtype_store(dt, bufs[b], i, (double)wrap(dt, vals[i % NV]));
        }
        if (dt == DT_I64)
            for (int i = 0; i < N; i++)
                ((int64_t *)bufs[a])[i] = vals[i / NV], ((int64_t *)bufs[b])[i] = vals[i % NV];
        int kn = 0;
        for (int o = 0; o < NB + NU; o++, kn++) {
            KB *k = &pr->kb[kn];
            bool cmp = o < NB && bins[o] >= OP_EQ;
            int y = add_buf(pr, "y", cmp ? DT_BOOL : dt, dim_static(N)), i = VAR(k, 0);
            int va = LOAD(k, pr, a, i), v = o < NB ? BIN(k, bins[o], cmp ? DT_BOOL : dt, va, LOAD(k, pr, b, i))
                                                   : UN(k, uns[o - NB], dt, va);
            STORE(k, y, i, v);
            add_kernel(pr, kn, o < NB ? op_info[bins[o]].name : op_info[uns[o - NB]].name, 1, 0, (Dim[]){dim_static(N)}, 0, NULL);
            bufs[y] = filled(cmp ? DT_BOOL : dt, N, NULL);
        }
        CpuModule *m = compile(&pr->p, NULL);
        for (int o = 0; m && o < NB + NU; o++) {
            cpu_kernel(m, o)(bufs, NULL, 0, N);
            int y = 2 + o, bad = 0;
            for (int i = 0; i < N; i++) {
                int64_t x1 = dt == DT_I64 ? ((int64_t *)bufs[a])[i] : (int64_t)dtype_load(dt, bufs[a], i);
                int64_t x2 = dt == DT_I64 ? ((int64_t *)bufs[b])[i] : (int64_t)dtype_load(dt, bufs[b], i);
                uint64_t u1 = (uint64_t)x1, u2 = (uint64_t)x2;
                int64_t want, got = pr->buf[y].dt == DT_I64 ? ((int64_t *)bufs[y])[i] : (int64_t)dtype_load(pr->buf[y].dt, bufs[y], i);
                int op = o < NB ? bins[o] : uns[o - NB];
                switch (op) {
                case OP_ADD: want = wrap(dt, (int64_t)(u1 + u2)); break;
                case OP_SUB: want = wrap(dt, (int64_t)(u1 - u2)); break;
                case OP_MUL: want = wrap(dt, (int64_t)(u1 * u2)); break;
                case OP_DIV: case OP_POW: {
                    double r = dtype_round(dt, op_info[op].scalar2((double)x1, (double)x2));
                    want = dt == DT_I64 ? (r >= 0x1p63 ? INT64_MAX : (int64_t)r) : (int64_t)r;
                    if (dt == DT_I64) /* dtype_round's i64 path: through double */
                        want = (int64_t)dtype_round(DT_I64, op_info[op].scalar2((double)x1, (double)x2));
                    break;
                }
                case OP_MAXIMUM: want = x1 > x2 ? x1 : x2; break;
                case OP_MINIMUM: want = x1 < x2 ? x1 : x2; break;
                case OP_LT: want = x1 < x2; break;
                case OP_NE: want = x1 != x2; break;
                case OP_NEG: want = wrap(dt, (int64_t)(0 - u1)); break;
                case OP_ABS: want = wrap(dt, x1 < 0 ? (int64_t)(0 - u1) : x1); break;
                default: want = x1 > 0 ? x1 : 0; break;
                }
                if (got != want && bad++ < 3)
                    fprintf(stderr, "%s %s(%lld, %lld) = %lld, want %lld\n", dtype_info[dt].name,
                            op_info[op].name, (long long)x1, (long long)x2, (long long)got, (long long)want);
            }
            check_failures += bad;
        }
        cpu_free(m);
        for (int bb = 0; bb < pr->p.nbuf; bb++)
            free(bufs[bb]);
        free(pr);
    }
}

/* Bools read as 0 and 1, a bool result is value != 0 (so 1 / 0 and 0 / 0 are true). */
static void test_bool(void)
{
    static const int ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM,
                              OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
    enum { NO = sizeof ops / sizeof ops[0] };
    Prog *pr = prog_new();
    int a = add_buf(pr, "a", DT_BOOL, dim_static(4)), b = add_buf(pr, "b", DT_BOOL, dim_static(4));
    uint8_t va[4] = {0, 0, 1, 1}, vb[4] = {0, 1, 0, 1};
    void *bufs[MAXB] = {va, vb};
    for (int o = 0; o < NO; o++) {
        KB *k = &pr->kb[o];
        int y = add_buf(pr, "y", DT_BOOL, dim_static(4)), i = VAR(k, 0);
        STORE(k, y, i, BIN(k, ops[o], DT_BOOL, LOAD(k, pr, a, i), LOAD(k, pr, b, i)));
        add_kernel(pr, o, op_info[ops[o]].name, 1, 0, (Dim[]){dim_static(4)}, 0, NULL);
        bufs[y] = filled(DT_BOOL, 4, NULL);
    }
    CpuModule *m = compile(&pr->p, NULL);
    for (int o = 0; m && o < NO; o++) {
        cpu_kernel(m, o)(bufs, NULL, 0, 4);
        for (int i = 0; i < 4; i++) {
            double want = dtype_round(DT_BOOL, op_info[ops[o]].scalar2(va[i], vb[i]));
            if (((uint8_t *)bufs[2 + o])[i] != want) {
                fprintf(stderr, "bool %s(%d, %d) = %d, want %g\n", op_info[ops[o]].name, va[i], vb[i], ((uint8_t *)bufs[2 + o])[i], want);
                check_failures++;
            }
        }
        xcheck(pr, m, o, bufs, NULL, 0, 4, 0);
    }
    cpu_free(m);
    for (int o = 0; o < NO; o++)
        free(bufs[2 + o]);
    free(pr);
}

/* ---------------------------------------------------------------- casts and select */

/* Every dtype to every dtype, over values that truncate, wrap, saturate, are NaN: each
 * result as dtype_round gives it. */
static void test_casts(void)
{
    static const double vals[] = {0, -0.0, 1, -1, 0.5, -0.5, 1.75, -1.75, 127.9, 128, -129, 255.5,
                                  300.7, 65504, 65520, 1e10, -1e10, 1e30, -1e30, 3e38, INFINITY,
                                  -INFINITY, NAN, 0x1p-20, 0x1p60 + 0x1p40, 16777217, 2147483648.0};
    enum { NV = sizeof vals / sizeof vals[0] };
    Prog *pr = prog_new();
    int nk = 0;
    void *bufs[MAXB];
    int src[DT_COUNT];
    for (int f = 0; f < DT_COUNT; f++) {
        src[f] = add_buf(pr, "x", (DType)f, dim_static(NV));
        bufs[src[f]] = filled((DType)f, NV, NULL);
        for (int i = 0; i < NV; i++)
            dtype_store((DType)f, bufs[src[f]], i, vals[i]);
    }
    for (int f = 0; f < DT_COUNT; f++) {
        KB *k = &pr->kb[nk];
        int i = VAR(k, 0), v = LOAD(k, pr, src[f], i);
        for (int t = 0; t < DT_COUNT; t++) {
            int y = add_buf(pr, "y", (DType)t, dim_static(NV));
            bufs[y] = filled((DType)t, NV, NULL);
            STORE(k, y, i, CAST(k, (DType)t, v));
        }
        static char names[DT_COUNT][16];
        snprintf(names[f], sizeof names[f], "cast_%s", dtype_info[f].name);
        add_kernel(pr, nk++, names[f], 1, 0, (Dim[]){dim_static(NV)}, 0, NULL);
    }
    CpuModule *m = compile(&pr->p, NULL);
    for (int f = 0; m && f < DT_COUNT; f++) {
        cpu_kernel(m, f)(bufs, NULL, 0, NV);
        for (int t = 0; t < DT_COUNT; t++) {
            int y = DT_COUNT + f * DT_COUNT + t;
            for (int i = 0; i < NV; i++) {
                double x = dtype_load((DType)f, bufs[src[f]], i);
                if ((DType)f == DT_I64)
                    x = (double)((int64_t *)bufs[src[f]])[i];
                /* f32 first for f16/bf16 from integers: loop.h computes those in f32 */
                double want = dtype_round((DType)t, !dtype_info[f].is_float && dtype_info[t].is_float ? (float)x : x);
                double got = dtype_load((DType)t, bufs[y], i);
                if (dt_err((DType)t, got, want) > 0) {
                    fprintf(stderr, "cast %s %.17g to %s: %.17g, want %.17g\n", dtype_info[f].name, x,
                            dtype_info[t].name, got, want);
                    check_failures++;
                }
            }
        }
    }
    cpu_free(m);
    for (int b = 0; b < pr->p.nbuf; b++)
        free(bufs[b]);
    free(pr);
}

#include <sys/mman.h>

/* n floats whose first (at_end: last) element touches a page no one may read. */
static float *guarded(int64_t n, bool at_end, void **map, size_t *len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = ((size_t)n * 4 + page - 1) / page * page;
    *len = bytes + 2 * page;
    char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(p, page, PROT_NONE);
    mprotect(p + page + bytes, page, PROT_NONE);
    *map = p;
    return (float *)(at_end ? p + page + bytes - (size_t)n * 4 : p + page);
}

/* where(i < na, a[i], b[i - na]) (concat): the arm not taken loads outside its buffer,
 * next to pages that fault; the backend clamps such loads, so nothing faults. */
static void test_select(void)
{
    enum { NA = 1000, NB = 777, N = NA + NB };
    Prog *pr = prog_new();
    int a = add_buf(pr, "a", DT_F32, dim_static(NA)), b = add_buf(pr, "b", DT_F32, dim_static(NB));
    int y = add_buf(pr, "y", DT_F32, dim_static(N)), z = add_buf(pr, "z", DT_F32, dim_static(N));
    KB *k = &pr->kb[0];
    int i = VAR(k, 0), na = INT(k, NA);
    int lt = BIN(k, OP_LT, DT_BOOL, i, na);
    int va = LOAD(k, pr, a, i), vb = LOAD(k, pr, b, BIN(k, OP_SUB, DT_I64, i, na));
    STORE(k, y, i, SEL(k, DT_F32, lt, va, vb));
    /* a select of sure values: where(y > 0, y, -2 y) on the stored y is no in-place case,
     * so use a's and b's arms again through relu */
    int r = UN(k, OP_RELU, DT_F32, SEL(k, DT_F32, lt, va, vb));
    STORE(k, z, i, SEL(k, DT_F32, BIN(k, OP_GT, DT_BOOL, r, CONST(k, DT_F32, 1)), r, CONST(k, DT_F32, -5)));
    add_kernel(pr, 0, "concat", 1, 0, (Dim[]){dim_static(N)}, 0, NULL);
    void *ma, *mb;
    size_t la, lb;
    float *va_ = guarded(NA, true, &ma, &la), *vb_ = guarded(NB, false, &mb, &lb);
    for (int j = 0; j < NA; j++)
        va_[j] = (float)j * 0.5f - 10;
    for (int j = 0; j < NB; j++)
        vb_[j] = -(float)j;
    void *bufs[MAXB] = {va_, vb_, filled(DT_F32, N, NULL), filled(DT_F32, N, NULL)};
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        cpu_kernel(m, 0)(bufs, NULL, 0, N);
        for (int j = 0; j < N; j++) {
            float want = j < NA ? va_[j] : vb_[j - NA], wz = want > 1 ? want : -5;
            if (((float *)bufs[y])[j] != want || ((float *)bufs[z])[j] != wz) {
                fprintf(stderr, "concat[%d] = %g, %g; want %g, %g\n", j, ((float *)bufs[y])[j], ((float *)bufs[z])[j], want, wz);
                check_failures++;
                break;
            }
        }
    }
    cpu_free(m);
    munmap(ma, la);
    munmap(mb, lb);
    free(bufs[y]);
    free(bufs[z]);
    free(pr);
}

/* ---------------------------------------------------------------- Philox */

static void test_rand(void)
{
    enum { N = 10007 };
    const uint64_t seed = 0x123456789abcull, offset = 0xffffffffull - 5000; /* crosses 2^32 */
    Prog *pr = prog_new();
    int y = add_buf(pr, "y", DT_F32, dim_static(N)), yh = add_buf(pr, "yh", DT_BF16, dim_static(N));
    KB *k = &pr->kb[0];
    int i = VAR(k, 0), step = SYM(k, COIL_SYM_RNG_STEP);
    STORE(k, y, i, E(k, LX_RAND, DT_F32, 0, i, step, -1, (int64_t)seed, (int64_t)offset, 0));
    STORE(k, yh, i, E(k, LX_RAND, DT_BF16, 0, i, step, -1, 7, 0, 0));
    add_kernel(pr, 0, "rand", 1, 0, (Dim[]){dim_static(N)}, 0, NULL);
    void *bufs[MAXB] = {filled(DT_F32, N, NULL), filled(DT_BF16, N, NULL)};
    CpuModule *m = compile(&pr->p, NULL);
    /* step 0 draws philox_uniform's numbers (coil's before steps); a step past 2^32 uses
     * both of Philox's high counter words */
    static const uint64_t steps[2] = {0, 0x500000009ull};
    for (int s = 0; m && s < 2; s++) {
        int64_t syms[COIL_SYM_SLOTS] = {0};
        syms[COIL_SYM_RNG_STEP] = (int64_t)steps[s];
        cpu_kernel(m, 0)(bufs, syms, 0, N);
        int bad = 0;
        for (int j = 0; j < N; j++) {
            float want = (float)(s == 0 ? philox_uniform(seed, offset, (uint64_t)j)
                                        : philox_uniform_step(seed, steps[s], offset, (uint64_t)j));
            double wb = dtype_round(DT_BF16, philox_uniform_step(7, steps[s], 0, (uint64_t)j));
            if ((bits32(((float *)bufs[y])[j]) != bits32(want) || dtype_load(DT_BF16, bufs[yh], j) != wb) && bad++ < 3)
                fprintf(stderr, "rand[%d] at step %llu = %a, want %a\n", j,
                        (unsigned long long)steps[s], ((float *)bufs[y])[j], want);
        }
        check_failures += bad;
    }
    cpu_free(m);
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* ---------------------------------------------------------------- reductions */

static double rows_fill(int64_t i)
{
    int64_t r = i / 37, c = i % 37;
    switch (r) {
    case 0: return 0;                        /* all equal: argmax 0 */
    case 1: return c == 5 || c == 20 ? 9 : c; /* ties at 36 then 9s: argmax 36 */
    case 2: return c == 7 || c == 9 ? NAN : c; /* first NaN: argmax 7, max NaN */
    case 3: return -INFINITY;                 /* argmax 0 */
    case 4: return c % 2 ? -0.0 : 0.0;        /* max +0, min -0 */
    case 5: return -0.0;                      /* max -0 */
    default: return wave(i);
    }
}

/* sum, max, min and argmax of each row of x[R, C] (f32, and its f16 copy), integer sum
 * and max, and a sum over two inner dims, against closed forms and loop_eval. */
static void test_reductions(void)
{
    enum { R = 9, C = 37 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(R * C)), xh = add_buf(pr, "xh", DT_F16, dim_static(R * C));
    int xi = add_buf(pr, "xi", DT_I32, dim_static(R * C)), x8 = add_buf(pr, "x8", DT_I8, dim_static(R * C));
    int out[10];
    static const DType out_dt[10] = {DT_F32, DT_F32, DT_F32, DT_I64, DT_F32, DT_F32, DT_I64, DT_I8, DT_I64, DT_F32};
    for (int o = 0; o < 10; o++)
        out[o] = add_buf(pr, "out", out_dt[o], dim_static(R));
    KB *k = &pr->kb[0];
    int r = VAR(k, 0), c = VAR(k, 1), idx = IADD(k, IMUL(k, r, INT(k, C)), c);
    int v = LOAD(k, pr, x, idx), vh = LOAD(k, pr, xh, idx), vi = LOAD(k, pr, xi, idx), v8 = LOAD(k, pr, x8, idx);
    int s[9] = {REDUCE(k, OP_SUM, v, DT_F32, 0), REDUCE(k, OP_MAX, v, DT_F32, 0),
                REDUCE(k, OP_MIN, v, DT_F32, 0), REDUCE(k, OP_ARGMAX, v, DT_I64, 1),
                REDUCE(k, OP_SUM, vh, DT_F32, 0), REDUCE(k, OP_MAX, vh, DT_F32, 0),
                REDUCE(k, OP_SUM, vi, DT_I64, 0), REDUCE(k, OP_MAX, v8, DT_I8, 0),
                REDUCE(k, OP_ARGMAX, v8, DT_I64, 1)};
    static const DType acc_dt[9] = {DT_F32, DT_F32, DT_F32, DT_I64, DT_F32, DT_F32, DT_I64, DT_I8, DT_I64};
    for (int o = 0; o < 9; o++)
        STORE(k, out[o], r, ACC(k, acc_dt[o], s[o]));
    /* mean: sum / C after the phase */
    STORE(k, out[9], r, BIN(k, OP_DIV, DT_F32, ACC(k, DT_F32, s[0]), CONST(k, DT_F32, C)));
    add_kernel(pr, 0, "reduce", 1, 1, (Dim[]){dim_static(R), dim_static(C)}, 1, (int[]){9});
    void *bufs[MAXB] = {filled(DT_F32, R * C, rows_fill), filled(DT_F16, R * C, rows_fill),
                        filled(DT_I32, R * C, NULL), filled(DT_I8, R * C, NULL)};
    for (int i = 0; i < R * C; i++) {
        ((int32_t *)bufs[xi])[i] = (int32_t)(i * 7919 % 20001 - 10000) * 100000;
        ((int8_t *)bufs[x8])[i] = (int8_t)(i * 31 % 256 - 128);
    }
    for (int o = 0; o < 10; o++)
        bufs[out[o]] = filled(out_dt[o], R, NULL);
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        xcheck(pr, m, 0, bufs, NULL, 0, R, 16);
        float *mx = bufs[out[1]], *mn = bufs[out[2]];
        int64_t *am = bufs[out[3]];
        CHECK(am[0] == 0 && am[1] == 36 && am[2] == 7 && am[3] == 0);
        CHECK(isnan(mx[2]) && isnan(mn[2]));
        CHECK(mx[4] == 0 && !signbit(mx[4]) && mn[4] == 0 && signbit(mn[4]));
        CHECK(mx[5] == 0 && signbit(mx[5]));
        CHECK(mx[3] == -INFINITY && mn[0] == 0);
        for (int row = 6; row < R; row++) {
            double sum = 0;
            int64_t isum = 0;
            for (int j = 0; j < C; j++)
                sum += (float)rows_fill(row * C + j), isum += ((int32_t *)bufs[xi])[row * C + j];
            CHECK_NEAR(((float *)bufs[out[0]])[row], sum, 1e-5);
            CHECK(((int64_t *)bufs[out[6]])[row] == isum);
        }
    }
    cpu_free(m);
    for (int b = 0; b < pr->p.nbuf; b++)
        free(bufs[b]);
    free(pr);
}

/* A sum over two inner dims of x[A, B, C] viewed as [A][B*C]: y[a] = sum_{b,c} x[a, b, c]. */
static void test_two_inner(void)
{
    enum { A = 5, B = 6, C = 33 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(A * B * C)), y = add_buf(pr, "y", DT_F32, dim_static(A));
    KB *k = &pr->kb[0];
    int a = VAR(k, 0), b = VAR(k, 1), c = VAR(k, 2);
    int idx = IADD(k, IMUL(k, IADD(k, IMUL(k, a, INT(k, B)), b), INT(k, C)), c);
    int s = REDUCE(k, OP_SUM, LOAD(k, pr, x, idx), DT_F32, 0);
    STORE(k, y, a, ACC(k, DT_F32, s));
    add_kernel(pr, 0, "sum2", 1, 2, (Dim[]){dim_static(A), dim_static(B), dim_static(C)}, 1, (int[]){1});
    void *bufs[MAXB] = {filled(DT_F32, A * B * C, wave), filled(DT_F32, A, NULL)};
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        cpu_kernel(m, 0)(bufs, NULL, 0, A);
        for (int i = 0; i < A; i++) {
            double want = 0;
            for (int j = 0; j < B * C; j++)
                want += ((float *)bufs[x])[i * B * C + j];
            CHECK_NEAR(((float *)bufs[y])[i], want, 1e-5);
        }
    }
    cpu_free(m);
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* softmax over the rows of x[R, C]: max; sum of exp(x - max); store exp(x - max) / sum. */
static int softmax_kernel(Prog *pr, int kb, int x, int y, Dim rows, Dim cols, int c_sym)
{
    KB *k = &pr->kb[kb];
    int r = VAR(k, 0), c = VAR(k, 1), ncol = c_sym >= 0 ? SYM(k, c_sym) : INT(k, cols.k);
    int idx = IADD(k, IMUL(k, r, ncol), c), v = LOAD(k, pr, x, idx);
    int smax = REDUCE(k, OP_MAX, v, DT_F32, 0);
    int e = UN(k, OP_EXP, DT_F32, BIN(k, OP_SUB, DT_F32, v, ACC(k, DT_F32, smax)));
    int ssum = REDUCE(k, OP_SUM, e, DT_F32, 0);
    STORE(k, y, idx, BIN(k, OP_DIV, DT_F32, e, ACC(k, DT_F32, ssum)));
    return add_kernel(pr, kb, "softmax", 1, 1, (Dim[]){rows, cols}, 3, (int[]){1, 1, 1});
}

/* At each optimisation level, against loop_eval and a softmax in f64. Below O3 nothing
 * vectorises, so the sums run in one f32 lane and lose more (still within 2e-5). */
static void test_softmax(void)
{
    enum { R = 13, C = 1000 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(R * C)), y = add_buf(pr, "y", DT_F32, dim_static(R * C));
    softmax_kernel(pr, 0, x, y, dim_static(R), dim_static(C), -1);
    void *bufs[MAXB] = {filled(DT_F32, R * C, wave), filled(DT_F32, R * C, NULL)};
    ((float *)bufs[x])[5 * C + 3] = 80; /* exp would overflow without the max */
    for (int level = 1; level <= 3; level++) {
        CpuModule *m = compile(&pr->p, &(CpuOptions){.opt_level = level});
        if (!m)
            continue;
        if (level == 3)
            xcheck(pr, m, 0, bufs, NULL, 0, R, 8);
        else
            cpu_kernel(m, 0)(bufs, NULL, 0, R);
        double tol = level == 3 ? 1e-6 : 2e-5;
        for (int r = 0; r < R; r++) {
            double mx = -INFINITY, sum = 0;
            const float *xr = (float *)bufs[x] + r * C, *yr = (float *)bufs[y] + r * C;
            for (int c = 0; c < C; c++)
                mx = fmax(mx, xr[c]);
            for (int c = 0; c < C; c++)
                sum += exp(xr[c] - mx);
            for (int c = 0; c < C; c++)
                if (fabs(yr[c] - exp(xr[c] - mx) / sum) > tol * (exp(xr[c] - mx) / sum) + 1e-12) {
                    fprintf(stderr, "O%d softmax[%d, %d] = %g, want %g\n", level, r, c, yr[c], exp(xr[c] - mx) / sum);
                    check_failures++;
                    r = R;
                    break;
                }
        }
        cpu_free(m);
    }
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* ---------------------------------------------------------------- loop structure */

/* No outer dims: a whole-vector sum into out[0], run for [0, 1) and not for [0, 0). */
static void test_nouter0(void)
{
    enum { N = 1001 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(N)), y = add_buf(pr, "y", DT_F32, dim_static(1));
    KB *k = &pr->kb[0];
    int s = REDUCE(k, OP_SUM, LOAD(k, pr, x, VAR(k, 0)), DT_F32, 0);
    STORE(k, y, INT(k, 0), ACC(k, DT_F32, s));
    add_kernel(pr, 0, "total", 0, 1, (Dim[]){dim_static(N)}, 1, (int[]){1});
    void *bufs[MAXB] = {filled(DT_F32, N, wave), filled(DT_F32, 1, nan_fill)};
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        cpu_kernel(m, 0)(bufs, NULL, 0, 0);
        CHECK(isnan(((float *)bufs[y])[0]));
        cpu_kernel(m, 0)(bufs, NULL, 0, 1);
        double want = 0;
        for (int i = 0; i < N; i++)
            want += ((float *)bufs[x])[i];
        CHECK_NEAR(((float *)bufs[y])[0], want, 1e-5);
    }
    cpu_free(m);
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* y = x + 1 over [R, C], run on rows [3, 7) only; then an empty range and one past the
 * ends (clamped to [0, R)). */
static void test_ranges(void)
{
    enum { R = 10, C = 7 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(R * C)), y = add_buf(pr, "y", DT_F32, dim_static(R * C));
    KB *k = &pr->kb[0];
    int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, C)), VAR(k, 1));
    STORE(k, y, idx, BIN(k, OP_ADD, DT_F32, LOAD(k, pr, x, idx), CONST(k, DT_F32, 1)));
    add_kernel(pr, 0, "plus1", 2, 0, (Dim[]){dim_static(R), dim_static(C)}, 0, NULL);
    void *bufs[MAXB] = {filled(DT_F32, R * C, wave), filled(DT_F32, R * C, nan_fill)};
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        cpu_kernel(m, 0)(bufs, NULL, 3, 7);
        cpu_kernel(m, 0)(bufs, NULL, 5, 5);
        for (int i = 0; i < R * C; i++) {
            float got = ((float *)bufs[y])[i];
            bool in = i / C >= 3 && i / C < 7;
            CHECK(in ? got == ((float *)bufs[x])[i] + 1 : isnan(got));
        }
        cpu_kernel(m, 0)(bufs, NULL, -5, 100);
        for (int i = 0; i < R * C; i++)
            CHECK(((float *)bufs[y])[i] == ((float *)bufs[x])[i] + 1);
    }
    cpu_free(m);
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* In-place updates: x = 2 x + 1 pointwise, and x[r, :] -= mean(x[r, :]) whose second
 * phase stores where it loads; against loop_eval, which evaluates statement by statement. */
static void test_inplace(void)
{
    enum { R = 6, C = 45 };
    Prog *pr = prog_new();
    int x = add_buf(pr, "x", DT_F32, dim_static(R * C)), w = add_buf(pr, "w", DT_F32, dim_static(R * C));
    KB *k = &pr->kb[0];
    int i = VAR(k, 0), v = LOAD(k, pr, x, i);
    STORE(k, x, i, BIN(k, OP_ADD, DT_F32, BIN(k, OP_MUL, DT_F32, v, CONST(k, DT_F32, 2)), CONST(k, DT_F32, 1)));
    STORE(k, w, i, LOAD(k, pr, x, i)); /* after the store: sees the new value */
    add_kernel(pr, 0, "twice", 1, 0, (Dim[]){dim_static(R * C)}, 0, NULL);
    k = &pr->kb[1];
    int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, C)), VAR(k, 1));
    int s = REDUCE(k, OP_SUM, LOAD(k, pr, x, idx), DT_F32, 0);
    int mean = BIN(k, OP_DIV, DT_F32, ACC(k, DT_F32, s), CONST(k, DT_F32, C));
    STORE(k, x, idx, BIN(k, OP_SUB, DT_F32, LOAD(k, pr, x, idx), mean));
    STORE(k, x, IMUL(k, VAR(k, 0), INT(k, C)), CONST(k, DT_F32, 7)); /* after: column 0 */
    add_kernel(pr, 1, "center", 1, 1, (Dim[]){dim_static(R), dim_static(C)}, 2, (int[]){1, 1});
    void *bufs[MAXB] = {filled(DT_F32, R * C, wave), filled(DT_F32, R * C, NULL)};
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        float before = ((float *)bufs[x])[10];
        xcheck(pr, m, 0, bufs, NULL, 0, R * C, 0);
        CHECK(((float *)bufs[x])[10] == before * 2 + 1 && ((float *)bufs[w])[10] == before * 2 + 1);
        for (int j = 0; j < R * C; j++) /* quarters: every sum is exact in f32 and f64 */
            ((float *)bufs[x])[j] = (float)(j * 7 % 13 - 6) * 0.25f;
        xcheck(pr, m, 1, bufs, NULL, 0, R, 0);
        CHECK(((float *)bufs[x])[2 * C] == 7);
    }
    cpu_free(m);
    free(bufs[0]);
    free(bufs[1]);
    free(pr);
}

/* Sizes k * symbols: softmax over [2 B, T] with T also read as a symbol in the index. */
static void test_symbolic(void)
{
    Prog *pr = prog_new();
    Dim rows = {2, 1u << 0, 0}, cols = {1, 1u << 1, 0}, all = {2, 3u, 0};
    int x = add_buf(pr, "x", DT_F32, all), y = add_buf(pr, "y", DT_F32, all);
    softmax_kernel(pr, 0, x, y, rows, cols, 1);
    int64_t syms[2][2] = {{3, 5}, {1, 257}};
    CpuModule *m = compile(&pr->p, NULL);
    for (int t = 0; m && t < 2; t++) {
        int64_t n = 2 * syms[t][0] * syms[t][1];
        void *bufs[MAXB] = {filled(DT_F32, n, wave), filled(DT_F32, n, NULL)};
        xcheck(pr, m, 0, bufs, syms[t], 0, 2 * syms[t][0], 8);
        double sum = 0;
        for (int c = 0; c < syms[t][1]; c++)
            sum += ((float *)bufs[y])[c];
        CHECK_NEAR(sum, 1, 1e-5);
        free(bufs[0]);
        free(bufs[1]);
    }
    cpu_free(m);
    free(pr);
}

/* ---------------------------------------------------------------- tiles */

/* A GEMM step whose C is [M, N]: its tile function stores a tile of the product into C
 * (f32 and f16 C), or runs the epilogue y = relu(C + bias[col]) on it (C stored only when
 * c_live). Elements outside the tile stay as they were. */
static void run_tile(DType cdt, bool epilogue, bool c_live)
{
    enum { M = 5, N = 7, LDT = 8, MR = 3, NR = 4, ROW0 = 1, COL0 = 2 };
    Prog *pr = prog_new();
    int c = add_buf(pr, "C", cdt, dim_static(M * N)), bias = add_buf(pr, "bias", DT_F32, dim_static(N));
    int y = add_buf(pr, "y", DT_F32, dim_static(M * N));
    int epi = -1, load = -1;
    if (epilogue) {
        KB *k = &pr->kb[0];
        int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, N)), VAR(k, 1));
        load = LOAD(k, pr, c, idx);
        int v = BIN(k, OP_ADD, DT_F32, CAST(k, DT_F32, load), LOAD(k, pr, bias, VAR(k, 1)));
        STORE(k, y, idx, UN(k, OP_RELU, DT_F32, v));
        epi = add_kernel(pr, 0, "epi", 2, 0, (Dim[]){dim_static(M), dim_static(N)}, 0, NULL);
        pr->p.nstep = 0; /* the epilogue is part of the GEMM step, not a step */
    }
    Gemm g = {.m = dim_static(M), .n = dim_static(N), .k = dim_static(1), .c = {.buf = c},
              .epilogue = epi, .epi_load = load, .c_live = c_live};
    pr->step[pr->p.nstep++] = (Step){.kind = STEP_GEMM, .gemm = g};
    float tile[MR * LDT];
    for (int i = 0; i < MR * LDT; i++)
        tile[i] = (float)i * 0.3f - 2.9f;
    void *bufs[MAXB] = {filled(cdt, M * N, nan_fill), filled(DT_F32, N, wave), filled(DT_F32, M * N, nan_fill)};
    CpuModule *m = compile(&pr->p, NULL);
    TileFn fn = m ? cpu_tile(m, pr->p.nstep - 1) : NULL;
    CHECK(!m || fn);
    if (fn) {
        CHECK(!epilogue || cpu_tile(m, 0) == fn);
        fn(tile, LDT, bufs, NULL, ROW0, COL0, MR, NR);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                bool in = i >= ROW0 && i < ROW0 + MR && j >= COL0 && j < COL0 + NR;
                double t = in ? tile[(i - ROW0) * LDT + j - COL0] : NAN;
                double gc = dtype_load(cdt, bufs[c], i * N + j), gy = ((float *)bufs[y])[i * N + j];
                double wc = in && (!epilogue || c_live) ? dtype_round(cdt, t) : NAN;
                double wy = in && epilogue ? fmax(dtype_round(DT_F32, dtype_round(cdt, t) + ((float *)bufs[bias])[j]), 0) : NAN;
                if (dt_err(cdt, gc, wc) > 0 || dt_err(DT_F32, gy, wy) > 0) {
                    fprintf(stderr, "tile %s epi %d live %d [%d, %d]: C %g y %g, want %g %g\n",
                            dtype_info[cdt].name, epilogue, c_live, i, j, gc, gy, wc, wy);
                    check_failures++;
                }
            }
    }
    CHECK(!m || cpu_tile(m, pr->p.nstep) == NULL);
    cpu_free(m);
    for (int b = 0; b < 3; b++)
        free(bufs[b]);
    free(pr);
}

static void test_tiles(void)
{
    run_tile(DT_F32, false, false);
    run_tile(DT_F16, false, false);
    run_tile(DT_F32, true, false);
    run_tile(DT_F32, true, true);
    run_tile(DT_BF16, true, true);
}

/* ---------------------------------------------------------------- shared bodies */

static double ramp(int64_t i) { return cos((double)i * 0.11) * 3 - (double)(i % 5) * 0.2; }

/* A GEMM step with C [rows, n] whose tile function runs y = relu(C + bias[col]). */
static void relu_bias_gemm(Prog *pr, int kb, const char *name, int c, int bias, int y, int64_t rows,
                           int64_t n)
{
    KB *k = &pr->kb[kb];
    int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, n)), VAR(k, 1));
    int load = LOAD(k, pr, c, idx);
    STORE(k, y, idx, UN(k, OP_RELU, DT_F32, BIN(k, OP_ADD, DT_F32, load, LOAD(k, pr, bias, VAR(k, 1)))));
    int epi = add_kernel(pr, kb, name, 2, 0, (Dim[]){dim_static(rows), dim_static(n)}, 0, NULL);
    Gemm g = {.m = dim_static(rows), .n = dim_static(n), .k = dim_static(1), .c = {.buf = c},
              .epilogue = epi, .epi_load = load};
    pr->step[pr->p.nstep - 1] = (Step){.kind = STEP_GEMM, .gemm = g}; /* not a kernel step */
}

/* Kernels that are the same code but for their buffers share one body (codegen/cpu/
 * share.c) and still each run on their own buffers: softmaxes of [R, C] from x_i into y_i
 * (one with its buffers numbered the other way round: the same form), one in place (a
 * form of its own: one buffer), one over [R, 2C] (its own: other sizes); and two GEMM
 * steps with the same epilogue on their own C, bias and y (their tiles share a body, and
 * their epilogue kernels another). 9 functions in 5. */
static void test_shared(void)
{
    enum { R = 5, C = 37, N = 6, LDT = 8 };
    Prog *pr = prog_new();
    double (*fill[])(int64_t) = {wave, ramp, rows_fill, wave, ramp};
    void *bufs[MAXB] = {0};
    int x[5], y[5];
    for (int i = 0; i < 5; i++) {
        Dim n = dim_static(i == 4 ? R * 2 * C : R * C);
        if (i == 2) /* y numbered before x */
            y[i] = add_buf(pr, "y", DT_F32, n), x[i] = add_buf(pr, "x", DT_F32, n);
        else
            x[i] = add_buf(pr, "x", DT_F32, n), y[i] = i == 3 ? x[i] : add_buf(pr, "y", DT_F32, n);
        bufs[x[i]] = filled(DT_F32, n.k, fill[i]);
        if (y[i] != x[i])
            bufs[y[i]] = filled(DT_F32, n.k, NULL);
        softmax_kernel(pr, i, x[i], y[i], dim_static(R), dim_static(i == 4 ? 2 * C : C), -1);
        pr->kernel[i].name = (const char *[]){"s0", "s1", "s2", "s3", "s4"}[i];
    }
    int c[2], bias[2], out[2];
    for (int i = 0; i < 2; i++) {
        c[i] = add_buf(pr, "C", DT_F32, dim_static(R * N));
        bias[i] = add_buf(pr, "bias", DT_F32, dim_static(N));
        out[i] = add_buf(pr, "out", DT_F32, dim_static(R * N));
        bufs[c[i]] = filled(DT_F32, R * N, nan_fill);
        bufs[bias[i]] = filled(DT_F32, N, fill[i]);
        bufs[out[i]] = filled(DT_F32, R * N, nan_fill);
        relu_bias_gemm(pr, 5 + i, i ? "e1" : "e0", c[i], bias[i], out[i], R, N);
    }
    CpuModule *m = compile(&pr->p, NULL);
    if (m) {
        CHECK(cpu_compile_times(m).functions == 5);
        for (int i = 0; i < 5; i++)
            xcheck(pr, m, i, bufs, NULL, 0, R, 8);
        float tile[R * LDT];
        for (int i = 0; i < R * LDT; i++)
            tile[i] = (float)i * 0.3f - 2.9f;
        for (int i = 0; i < 2; i++) {
            cpu_tile(m, pr->p.nstep - 2 + i)(tile, LDT, bufs, NULL, 0, 0, R, N);
            for (int r = 0; r < R; r++)
                for (int j = 0; j < N; j++) {
                    float want = fmaxf(tile[r * LDT + j] + ((float *)bufs[bias[i]])[j], 0);
                    CHECK(((float *)bufs[out[i]])[r * N + j] == want);
                }
        }
    }
    cpu_free(m);
    for (int b = 0; b < pr->p.nbuf; b++)
        free(bufs[b]);
    free(pr);
}

/* ---------------------------------------------------------------- output and objects */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    if (len)
        *len = got;
    return s;
}

static void spill(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A program worth loading back: gelu(x) + b over [R, C], a softmax, a sum, and a GEMM
 * step with a relu epilogue (its tile function and the micro-kernels come along). */
static Prog *mixed_program(int64_t rows, int64_t cols)
{
    Prog *pr = prog_new();
    Dim all = dim_static(rows * cols);
    int x = add_buf(pr, "x", DT_F32, all), b = add_buf(pr, "b", DT_F32, dim_static(cols));
    int y = add_buf(pr, "y", DT_F32, all), z = add_buf(pr, "z", DT_F32, all);
    int s = add_buf(pr, "s", DT_F32, dim_static(rows)), c = add_buf(pr, "c", DT_F32, all);
    KB *k = &pr->kb[0];
    int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, cols)), VAR(k, 1));
    STORE(k, y, idx, BIN(k, OP_ADD, DT_F32, UN(k, OP_GELU, DT_F32, LOAD(k, pr, x, idx)), LOAD(k, pr, b, VAR(k, 1))));
    add_kernel(pr, 0, "k0_gelu_add", 2, 0, (Dim[]){dim_static(rows), dim_static(cols)}, 0, NULL);
    softmax_kernel(pr, 1, x, z, dim_static(rows), dim_static(cols), -1);
    pr->kernel[1].name = "k1_softmax";
    k = &pr->kb[2];
    int r = VAR(k, 0), sum = REDUCE(k, OP_SUM, LOAD(k, pr, y, IADD(k, IMUL(k, r, INT(k, cols)), VAR(k, 1))), DT_F32, 0);
    STORE(k, s, r, ACC(k, DT_F32, sum));
    add_kernel(pr, 2, "k2_rowsum", 1, 1, (Dim[]){dim_static(rows), dim_static(cols)}, 1, (int[]){1});
    k = &pr->kb[3];
    idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, cols)), VAR(k, 1));
    int load = LOAD(k, pr, c, idx);
    STORE(k, z, idx, UN(k, OP_RELU, DT_F32, load));
    int epi = add_kernel(pr, 3, "k3_relu", 2, 0, (Dim[]){dim_static(rows), dim_static(cols)}, 0, NULL);
    pr->p.nstep--;
    Gemm g = {.m = dim_static(rows), .n = dim_static(cols), .k = dim_static(cols), .c = {.buf = c},
              .epilogue = epi, .epi_load = load};
    pr->step[pr->p.nstep++] = (Step){.kind = STEP_GEMM, .gemm = g};
    return pr;
}

static bool emit(const Program *p, const char *what, const char *path, const CpuOptions *o)
{
    Err e = {0};
    bool ok = cpu_emit(p, o, what, path, &e);
    if (!ok) {
        fprintf(stderr, "cpu_emit %s: %s\n", what, e.msg);
        check_failures++;
    }
    return ok;
}

/* llvm-ir, asm and obj; the pointwise kernel's inner loop and the sum's are vectors
 * (zmm with AVX-512, ymm with AVX2) and no libm call is left: at O3, whatever the build's
 * default (O1 under the sanitizers), for O3's vectoriser. */
static void test_emit(const char *dir)
{
    const CpuOptions *o3 = &(CpuOptions){.opt_level = 3};
    Prog *pr = mixed_program(8, 64);
    char path[512];
    snprintf(path, sizeof path, "%s/m.ll", dir);
    if (emit(&pr->p, "llvm-ir", path, o3)) {
        char *ir = slurp(path, NULL);
        CHECK(ir && strstr(ir, "define void @k0_gelu_add(") && strstr(ir, "define void @coil_tile_3("));
        CHECK(ir && strstr(ir, "x float>")); /* vectorised */
        CHECK(ir && !strstr(ir, "@expf") && !strstr(ir, "@erff") && !strstr(ir, "@exp("));
        CHECK(ir && strstr(ir, "vector.reduce.fadd")); /* the row sum, reassociated */
        free(ir);
    }
    snprintf(path, sizeof path, "%s/m.s", dir);
    if (emit(&pr->p, "asm", path, o3)) {
        char *as = slurp(path, NULL);
        char *f = as ? strstr(as, "k0_gelu_add:") : NULL, *end = f ? strstr(f, ".Lfunc_end") : NULL;
        if (end)
            *end = 0;
        const char *reg = __builtin_cpu_supports("avx512f") ? "%zmm"
                          : __builtin_cpu_supports("avx2") ? "%ymm" : "%xmm";
        printf("  pointwise kernel's asm uses %s: %s\n", reg, f && strstr(f, reg) ? "yes" : "no");
        CHECK(f && strstr(f, reg));
        free(as);
    }
    snprintf(path, sizeof path, "%s/m.o", dir);
    if (emit(&pr->p, "obj", path, o3)) {
        size_t n;
        char *o = slurp(path, &n);
        CHECK(o && n > 64 && memcmp(o, "\177ELF", 4) == 0);
        free(o);
    }
    Err e = {0};
    CHECK(!cpu_emit(&pr->p, NULL, "bitcode", path, &e) && e.code == ERR_USAGE && strstr(e.msg, "llvm-ir"));
    e = (Err){0};
    CHECK(!cpu_emit(&pr->p, NULL, "asm", "/nonexistent-dir/x.s", &e) && strstr(e.msg, "/nonexistent-dir/x.s"));
    free(pr);
}

static void run_mixed(const Prog *pr, CpuModule *m, void **bufs, int64_t rows)
{
    for (int k = 0; k < 3; k++)
        cpu_kernel(m, k)(bufs, NULL, 0, rows);
    float tile[4 * 16];
    for (int i = 0; i < 4 * 16; i++)
        tile[i] = (float)i - 20;
    cpu_tile(m, pr->p.nstep - 1)(tile, 16, bufs, NULL, 1, 3, 4, 16);
}

/* The object file of a program, loaded back, computes the same bits; damaged or foreign
 * objects are errors naming the file. */
static void test_load_object(const char *dir)
{
    enum { R = 8, C = 64 };
    Prog *pr = mixed_program(R, C);
    char obj[512];
    snprintf(obj, sizeof obj, "%s/mixed.o", dir);
    if (!emit(&pr->p, "obj", obj, NULL))
        return;
    Err e = {0};
    CpuModule *jit = compile(&pr->p, NULL), *aot = cpu_load_object(&pr->p, obj, &e);
    if (!aot) {
        fprintf(stderr, "cpu_load_object: %s\n", e.msg);
        check_failures++;
    }
    void *b1[MAXB], *b2[MAXB];
    for (int b = 0; b < pr->p.nbuf; b++) {
        b1[b] = filled(DT_F32, numel(pr, b, NULL), wave);
        b2[b] = filled(DT_F32, numel(pr, b, NULL), wave);
    }
    if (jit && aot) {
        const Ukernels *u1 = cpu_ukernels(jit), *u2 = cpu_ukernels(aot);
        CHECK(u1 && u2 && u1->dot && u1->bcast && u2->dot && u2->bcast);
        CHECK(u1 && u2 && memcmp(&u1->shape, &u2->shape, sizeof u1->shape) == 0);
        run_mixed(pr, jit, b1, R);
        run_mixed(pr, aot, b2, R);
        for (int b = 0; b < pr->p.nbuf; b++)
            CHECK(memcmp(b1[b], b2[b], (size_t)numel(pr, b, NULL) * 4) == 0);
        CHECK(cpu_compile_seconds(jit) > 0);
    }
    cpu_free(jit);
    cpu_free(aot);
    for (int b = 0; b < pr->p.nbuf; b++)
        free(b1[b]), free(b2[b]);

    /* the errors: each names the file */
    size_t n;
    char *bytes = slurp(obj, &n), bad[600];
    struct {
        const char *name, *want;
        size_t len;
        const char *from, *to; /* a symbol renamed in the object */
    } cases[] = {
        {"missing.o", "cannot read", 0, NULL, NULL},
        {"text.o", "not a loadable object", 0, NULL, NULL},
        {"cut.o", "", n / 3, NULL, NULL},
        {"noprog.o", "coil_program", n, "coil_program", "coil_progrxm"},
        {"nokernel.o", "k1_softmax", n, "k1_softmax", "k1_softmay"},
    };
    for (size_t i = 0; bytes && i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(bad, sizeof bad, "%s/%s", dir, cases[i].name);
        if (i == 1)
            spill(bad, "this is not an object file\n", 27);
        if (i >= 2) {
            char *copy = malloc(n);
            memcpy(copy, bytes, n);
            for (size_t j = 0; cases[i].from && j + strlen(cases[i].from) <= n; j++)
                if (memcmp(copy + j, cases[i].from, strlen(cases[i].from)) == 0)
                    memcpy(copy + j, cases[i].to, strlen(cases[i].to));
            spill(bad, copy, cases[i].len);
            free(copy);
        }
        e = (Err){0};
        CpuModule *m = cpu_load_object(&pr->p, bad, &e);
        CHECK(!m && strstr(e.msg, bad) && strstr(e.msg, cases[i].want));
        if (m || !strstr(e.msg, bad))
            fprintf(stderr, "load %s: %s\n", cases[i].name, m ? "loaded" : e.msg);
        cpu_free(m);
    }
    /* another program's object */
    Prog *other = mixed_program(R, C + 1);
    e = (Err){0};
    CpuModule *m = cpu_load_object(&other->p, obj, &e);
    CHECK(!m && strstr(e.msg, obj) && strstr(e.msg, "different program"));
    cpu_free(m);
    free(other);
    free(bytes);
    free(pr);
}

/* The object cache: a second compile of the same program takes its object (no optimiser,
 * no code generator) and computes the same bits; another program, or a compile writing a
 * debug directory, does not; an entry damaged on disk is compiled again and replaced. */
static void test_object_cache(const char *dir)
{
    enum { R = 8, C = 64 };
    char cache[512], entry[700] = "";
    snprintf(cache, sizeof cache, "%s/objects", dir);
    const CpuOptions o = {.cache_dir = cache};
    Prog *pr = mixed_program(R, C), *other = mixed_program(R, C + 1);
    CpuModule *first = compile(&pr->p, &o), *second = compile(&pr->p, &o);
    CpuModule *third = compile(&other->p, &o);
    CHECK(first && !cpu_compile_times(first).cached && cpu_compile_times(first).opt_s > 0);
    CHECK(second && cpu_compile_times(second).cached && cpu_compile_times(second).opt_s == 0);
    CHECK(third && !cpu_compile_times(third).cached);
    void *b1[MAXB], *b2[MAXB];
    for (int b = 0; b < pr->p.nbuf; b++) {
        b1[b] = filled(DT_F32, numel(pr, b, NULL), wave);
        b2[b] = filled(DT_F32, numel(pr, b, NULL), wave);
    }
    if (first && second) {
        run_mixed(pr, first, b1, R);
        run_mixed(pr, second, b2, R);
        for (int b = 0; b < pr->p.nbuf; b++)
            CHECK(memcmp(b1[b], b2[b], (size_t)numel(pr, b, NULL) * 4) == 0);
    }
    for (int b = 0; b < pr->p.nbuf; b++)
        free(b1[b]), free(b2[b]);
    cpu_free(first), cpu_free(second), cpu_free(third);

    /* two entries; damage each byte class of the first: its header, its object */
    DIR *d = opendir(cache);
    struct dirent *de;
    int nentry = 0;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".o"))
            nentry++, snprintf(entry, sizeof entry, "%s/%.100s", cache, de->d_name);
    if (d)
        closedir(d);
    CHECK(nentry == 2);
    size_t n = 0;
    char *bytes = entry[0] ? slurp(entry, &n) : NULL;
    for (size_t at = 0; bytes && at < 2; at++) {
        size_t where = at == 0 ? 20 : n - 100; /* in the key line; in the object */
        bytes[where] ^= 1;
        spill(entry, bytes, n);
        bytes[where] ^= 1;
        /* whichever program the entry was, one of the two compiles misses and rewrites it */
        CpuModule *a = compile(&pr->p, &o), *b = compile(&other->p, &o);
        CHECK(a && b && cpu_compile_times(a).cached + cpu_compile_times(b).cached == 1);
        cpu_free(a), cpu_free(b);
        size_t again = 0;
        char *fixed = slurp(entry, &again);
        CHECK(fixed && again == n && memcmp(fixed, bytes, n) == 0);
        free(fixed);
    }
    free(bytes);

    /* with a debug directory, the optimiser runs (its stage is written) */
    char debug_path[600];
    snprintf(debug_path, sizeof debug_path, "%s/debug", dir);
    setenv("COIL_DEBUG_DIR", debug_path, 1);
    DebugDir *debug = debug_dir_open("cached");
    unsetenv("COIL_DEBUG_DIR");
    CHECK(debug != NULL);
    CpuModule *dbg = debug ? compile(&pr->p, &(CpuOptions){.cache_dir = cache, .debug = debug}) : NULL;
    CHECK(dbg && !cpu_compile_times(dbg).cached);
    cpu_free(dbg);
    debug_dir_close(debug);
    free(pr), free(other);
}

/* ---------------------------------------------------------------- errors, threads */

/* Malformed kernels fail to compile with a message naming the kernel; none crashes. */
static void test_malformed(void)
{
    for (int c = 0; c < 6; c++) {
        Prog *pr = prog_new();
        int x = add_buf(pr, "x", DT_F32, dim_static(8)), y = add_buf(pr, "y", DT_F32, dim_static(8));
        KB *k = &pr->kb[0];
        int i = VAR(k, 0), v = LOAD(k, pr, x, i);
        switch (c) {
        case 0: k->lx[v].a = v + 5; STORE(k, y, i, v); break;            /* operand after it */
        case 1: STORE(k, 99, i, v); break;                                /* no such buffer */
        case 2: REDUCE(k, OP_SUM, ACC(k, DT_F32, 0), DT_F32, 0); STORE(k, y, i, v); break; /* own phase */
        case 3: STORE(k, y, VAR(k, 1), v); break;                         /* inner var after */
        case 4: REDUCE(k, OP_EXP, v, DT_F32, 0); STORE(k, y, i, v); break; /* not a reduction */
        default: STORE(k, y, i, v); break;
        }
        bool phase = c == 2 || c == 4;
        add_kernel(pr, 0, c == 5 ? "memset" : "bad", 1, phase || c == 3 ? 1 : 0,
                   (Dim[]){dim_static(8), dim_static(8)}, phase ? 1 : 0, (int[]){1});
        Err e = {0};
        CpuModule *m = cpu_compile(&pr->p, NULL, &e);
        CHECK(!m && e.code != ERR_OK && strstr(e.msg, c == 5 ? "memset" : "bad"));
        if (m)
            fprintf(stderr, "malformed case %d compiled\n", c);
        cpu_free(m);
        free(pr);
    }
}

typedef struct Job {
    int seed, ok;
} Job;

/* One thread's work: compile its own softmax program, run it, check a row sums to 1. */
static void *job(void *arg)
{
    Job *j = arg;
    for (int round = 0; round < 3; round++) {
        int64_t rows = 4 + j->seed, cols = 100 + 37 * j->seed + round;
        Prog *pr = prog_new();
        int x = add_buf(pr, "x", DT_F32, dim_static(rows * cols)), y = add_buf(pr, "y", DT_F32, dim_static(rows * cols));
        softmax_kernel(pr, 0, x, y, dim_static(rows), dim_static(cols), -1);
        Err e = {0};
        CpuModule *m = cpu_compile(&pr->p, NULL, &e);
        void *bufs[2] = {filled(DT_F32, rows * cols, wave), filled(DT_F32, rows * cols, NULL)};
        if (m) {
            cpu_kernel(m, 0)(bufs, NULL, 0, rows);
            double sum = 0;
            for (int64_t c = 0; c < cols; c++)
                sum += ((float *)bufs[1])[(rows - 1) * cols + c];
            j->ok += fabs(sum - 1) < 1e-5;
        }
        cpu_free(m);
        free(bufs[0]);
        free(bufs[1]);
        free(pr);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[2];
    Job jobs[2] = {{1, 0}, {2, 0}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, job, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(jobs[0].ok == 3 && jobs[1].ok == 3);
}

/* ---------------------------------------------------------------- bandwidth */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* y = gelu(x) + b (and y = x, y = exp(x)) over 64 MB of f32, one thread: GB/s counting
 * the bytes read and written, next to memcpy's on this machine. Printed, not checked. */
static void test_bandwidth(void)
{
    enum { R = 16384, C = 1024 };
    Prog *pr = mixed_program(R, C);
    KB *k = &pr->kb[4];
    int idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, C)), VAR(k, 1));
    STORE(k, 2, idx, LOAD(k, pr, 0, idx));
    add_kernel(pr, 4, "k4_copy", 2, 0, (Dim[]){dim_static(R), dim_static(C)}, 0, NULL);
    k = &pr->kb[5];
    idx = IADD(k, IMUL(k, VAR(k, 0), INT(k, C)), VAR(k, 1));
    STORE(k, 2, idx, UN(k, OP_EXP, DT_F32, LOAD(k, pr, 0, idx)));
    add_kernel(pr, 5, "k5_exp", 2, 0, (Dim[]){dim_static(R), dim_static(C)}, 0, NULL);
    CpuModule *m = compile(&pr->p, NULL);
    void *bufs[MAXB] = {0};
    for (int b = 0; b < pr->p.nbuf; b++)
        bufs[b] = filled(DT_F32, numel(pr, b, NULL), b == 0 ? wave : NULL);
    const char *what[] = {"gelu(x) + b", "softmax", "row sum", "", "copy", "exp(x)"};
    double bytes[] = {2.0 * R * C * 4, 2.0 * R * C * 4, 1.0 * R * C * 4, 0, 2.0 * R * C * 4, 2.0 * R * C * 4};
    for (int kk = 0; m && kk < 6; kk++) {
        if (kk == 3)
            continue;
        double best = INFINITY;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = seconds();
            cpu_kernel(m, kk)(bufs, NULL, 0, R);
            double t = seconds() - t0;
            best = t < best ? t : best;
        }
        printf("  %-12s %6.2f GB/s (%.2f ms)\n", what[kk], bytes[kk] / best * 1e-9, best * 1e3);
    }
    printf("  memcpy       %6.2f GB/s (runtime/cpu/peak.h, 1 thread, 64 MB)\n", peak_copy_gbs(1, (size_t)R * C * 4));
    if (m)
        printf("  compile      %.3f s for %d kernels and a tile function\n", cpu_compile_seconds(m), pr->p.nkernel);
    cpu_free(m);
    for (int b = 0; b < pr->p.nbuf; b++)
        free(bufs[b]);
    free(pr);
}

int main(void)
{
    if (!cpu_codegen_built()) { /* a build without LLVM: nothing to test */
        printf("skipped: this build has no LLVM backend\n");
        return 0;
    }
    test_unary_accuracy();
    test_binary_f32();
    test_pow_const();
    test_half();
    test_int();
    test_bool();
    test_casts();
    test_select();
    test_rand();
    test_reductions();
    test_two_inner();
    test_softmax();
    test_nouter0();
    test_ranges();
    test_inplace();
    test_symbolic();
    test_tiles();
    test_shared();
    char dir[] = "/tmp/coil_test_cpu_XXXXXX";
    if (mkdtemp(dir)) {
        test_emit(dir);
        test_load_object(dir);
        test_object_cache(dir);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    test_malformed();
    test_threads();
    test_bandwidth();
    return check_status();
}
