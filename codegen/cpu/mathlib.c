/* mathlib.c — coil's f32 math library in LLVM IR: exp, log, tanh, sigmoid, erf, gelu,
 * gelu_tanh, silu, sin, cos, pow and Philox, each an internal always-inline function
 * without branches or libm calls, so the loop vectoriser widens loops that use them.
 *
 * Accuracy, in ulps of the f32 result against libm in f64 (tests/unit/test_cpu.c; also
 * every 5th bit pattern once; erf and gelu over every bit pattern): exp 1.0, log 0.83,
 * tanh 1.5, sigmoid 2.4, erf 1.18, sin and cos 0.83 (|x| < 1.6e6), silu 3.2, gelu_tanh 3.2,
 * gelu 6.45, pow 0.5, rsqrt 1.5. How:
 * - exp: n = round(x / ln 2), r = x - n ln 2 in two parts (Cody and Waite), e^r by a
 *   degree-6 polynomial, 2^n applied in two steps so subnormal results round once.
 *   exp_core also takes a low part of x (for arguments that are exact sums, such as
 *   -x^2) and a power of two to scale by (so x e^x keeps its digits below 2^-126).
 * - log: musl's reduction to [sqrt(1/2), sqrt(2)) and s = f / (2 + f); subnormals scaled.
 * - tanh: an odd polynomial below 0.625, (1 - e^-2|x|) / (1 + e^-2|x|) above.
 * - gelu: x Phi(x) = max(x, 0) - |x| Phi(-|x|), Phi(-a) = e^(-a^2/2) M(a) / 2 with a^2/2
 *   split exactly and M(a) = erfc(a / sqrt 2) e^(a^2/2) a (4,5) rational in a, all in f32,
 *   so the negative tail keeps its digits down to the subnormals: about 1 cycle an element
 *   with AVX-512 (exp 0.65). The rational's two polynomials in f32 cost up to 3 ulps of
 *   rounding at large a (in f64, as before, gelu was 3.9 ulps but 2.5 cycles an element);
 *   without FMA (x86-64-v2) gelu is 7.9 ulps over every f32.
 * - erf: x P(x^2) below 1; above, 1 - e^-x^2 M(x sqrt 2) with x^2 split exactly (the
 *   rational's error shrinks there by erfc/erf <= 0.19).
 * - gelu_tanh: the argument 2u of the sigmoid computed in f64, then exp of its two parts.
 * - sin, cos: reduction by pi/2 in f64 with a three-part pi/2, exact for |x| < 2^20 pi/2
 *   (about 1.6e6); beyond, the reduction's error grows as |x| 2^-52 (absolute); above 2^50
 *   the result is in [-1, 1] but means nothing (libm's Payne-Hanek reduction would cost
 *   every call five gathers). Polynomials in f32 on r as two floats.
 * - pow: log2 |a| and 2^y in f64 (series), so the result is close to correctly rounded;
 *   the special cases of C's powf (negative bases, zeros, infinities, NaN) by selects.
 * Polynomial coefficients were fitted (weighted least squares on Chebyshev nodes, then
 * rounded to f32 one at a time, refitting the rest) with mpmath. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cpu/gen.h"

/* ---------------------------------------------------------------- a small IR vocabulary */

typedef struct M {
    Gen *g;
    LLVMBuilderRef b;
} M;

static LLVMValueRef K(M *m, double v) { return LLVMConstReal(m->g->f32, v); }
static LLVMValueRef KD(M *m, double v) { return LLVMConstReal(m->g->f64, v); }
static LLVMValueRef KI(M *m, int32_t v) { return LLVMConstInt(m->g->i32, (unsigned long long)(int64_t)v, 1); }
static LLVMValueRef add(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef mul(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef dvd(M *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(M *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static LLVMValueRef cmp(M *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static LLVMValueRef to_i32(M *m, LLVMValueRef x) { return LLVMBuildBitCast(m->b, x, m->g->i32, ""); }
static LLVMValueRef to_f32(M *m, LLVMValueRef i) { return LLVMBuildBitCast(m->b, i, m->g->f32, ""); }
static LLVMValueRef ext(M *m, LLVMValueRef x) { return LLVMBuildFPExt(m->b, x, m->g->f64, ""); }
static LLVMValueRef trunc_(M *m, LLVMValueRef x) { return LLVMBuildFPTrunc(m->b, x, m->g->f32, ""); }

static LLVMValueRef intr1(M *m, const char *name, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return gen_intrinsic(m->g, m->b, name, &t, 1, &x, 1);
}

static LLVMValueRef intr2(M *m, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef a[2] = {x, y};
    return gen_intrinsic(m->g, m->b, name, &t, 1, a, 2);
}

static LLVMValueRef fabs_(M *m, LLVMValueRef x) { return intr1(m, "llvm.fabs", x); }
static LLVMValueRef copysign_(M *m, LLVMValueRef x, LLVMValueRef s) { return intr2(m, "llvm.copysign", x, s); }

/* a * b + c, fused where the target has FMA (the algorithms are exact either way). */
static LLVMValueRef fma_(M *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef args[3] = {a, b, c};
    return gen_intrinsic(m->g, m->b, "llvm.fmuladd", &t, 1, args, 3);
}

/* c[0] + c[1] x + ... + c[n-1] x^(n-1), by Horner, in x's type. */
static LLVMValueRef poly(M *m, LLVMValueRef x, const double *c, int n)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef r = LLVMConstReal(t, c[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        r = fma_(m, r, x, LLVMConstReal(t, c[i]));
    return r;
}

/* x*y = hi + lo exactly (hi the rounded product, no overflow or underflow): FMA where
 * there is one, else Dekker's product of the 12-bit halves. Where hi overflows lo is
 * meaningless; exp_core drops it there (its argument is below its range). */
static LLVMValueRef mul_exact(M *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef *lo)
{
    LLVMValueRef hi = mul(m, x, y);
    if (m->g->t->fma) {
        LLVMValueRef args[3] = {x, y, LLVMBuildFNeg(m->b, hi, "")};
        *lo = gen_intrinsic(m->g, m->b, "llvm.fma", &m->g->f32, 1, args, 3);
        return hi;
    }
    LLVMValueRef mask = KI(m, (int32_t)0xfffff000u);
    LLVMValueRef xh = to_f32(m, LLVMBuildAnd(m->b, to_i32(m, x), mask, "")), xl = sub(m, x, xh);
    LLVMValueRef yh = to_f32(m, LLVMBuildAnd(m->b, to_i32(m, y), mask, "")), yl = sub(m, y, yh);
    LLVMValueRef t = add(m, add(m, sub(m, mul(m, xh, yh), hi), mul(m, xh, yl)), mul(m, xl, yh));
    *lo = add(m, t, mul(m, xl, yl));
    return hi;
}

/* ---------------------------------------------------------------- exp */

static const double exp_p[] = {0.499999881, 0.166665182, 0.0416696519, 0.00836895313,
                               0.00137450593};

/* How exp_core may cut corners for its caller. */
enum {
    EXP_NEG = 1,    /* x <= 0 (or NaN): no overflow to guard */
    EXP_NORMAL = 2, /* results below 2^-126 (times 2^bias) may be 0: scale in one step */
    EXP_INRANGE = 4, /* with EXP_NEG|EXP_NORMAL: x is NaN or in [floor, 0], the floor being
                        (-126.4 - bias) ln 2, so nothing is clamped */
};

/* e^(x + lo) * 2^bias, lo a small correction (NULL: 0), bias in [0, 32]. Below the
 * range the result is 0 (x = -inf included, so -inf e^x is NaN, as in libm); without
 * EXP_NORMAL, 2^n is applied in two steps so a subnormal result rounds once. A lane
 * below the range computes e^0 and is then zeroed: computing its underflow would cost a
 * microcode assist per vector on x86 (a causal mask's -inf lanes made softmax 7x slower). */
static LLVMValueRef exp_core(M *m, LLVMValueRef x, LLVMValueRef lo, int bias, int how)
{
    LLVMBuilderRef b = m->b;
    double floor_x = how & EXP_NORMAL ? (-126.4 - bias) * M_LN2 : -105 - bias * M_LN2;
    bool clamp = !(how & EXP_INRANGE);
    LLVMValueRef low = clamp ? cmp(m, LLVMRealOLT, x, K(m, floor_x)) : NULL; /* NaN: false */
    if (!(how & EXP_NEG))
        x = sel(m, cmp(m, LLVMRealOGT, x, K(m, 89)), K(m, 89), x); /* 2^128: inf */
    if (clamp)
        x = sel(m, low, K(m, how & EXP_NORMAL ? floor_x : 0), x);
    LLVMValueRef t = fma_(m, x, K(m, 0x1.715476p+0), K(m, 0x1.8p23));
    LLVMValueRef nf = sub(m, t, K(m, 0x1.8p23));
    LLVMValueRef n = LLVMBuildSub(b, to_i32(m, t), KI(m, 0x4b400000 - bias), "");
    LLVMValueRef r = fma_(m, nf, K(m, -0x1.63p-1), x);
    r = fma_(m, nf, K(m, 0x1.bd0106p-13), r);
    if (lo) /* a clamped x has lost its meaning for lo (and lo may be NaN there) */
        r = add(m, r, clamp ? sel(m, low, K(m, 0), lo) : lo);
    LLVMValueRef q = fma_(m, mul(m, r, r), poly(m, r, exp_p, 5), r);
    if (how & EXP_NORMAL) { /* (1 + q) 2^n as q 2^n + 2^n: one rounding */
        LLVMValueRef s = to_f32(m, LLVMBuildShl(b, LLVMBuildAdd(b, n, KI(m, 127), ""), KI(m, 23), ""));
        LLVMValueRef v = fma_(m, q, s, s);
        return clamp ? sel(m, low, K(m, 0), v) : v;
    }
    LLVMValueRef p = add(m, q, K(m, 1));
    LLVMValueRef n1 = LLVMBuildAShr(b, n, KI(m, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(b, n, n1, "");
    LLVMValueRef s1 = to_f32(m, LLVMBuildShl(b, LLVMBuildAdd(b, n1, KI(m, 127), ""), KI(m, 23), ""));
    LLVMValueRef s2 = to_f32(m, LLVMBuildShl(b, LLVMBuildAdd(b, n2, KI(m, 127), ""), KI(m, 23), ""));
    LLVMValueRef v = mul(m, mul(m, p, s1), s2);
    return clamp ? sel(m, low, K(m, 0), v) : v;
}

static LLVMValueRef m_exp(M *m, LLVMValueRef *a) { return exp_core(m, a[0], NULL, 0, 0); }

/* ---------------------------------------------------------------- log */

static const double log_q[] = {0.666666627, 0.4000085, 0.285101414, 0.240292102};

static LLVMValueRef m_log(M *m, LLVMValueRef *a)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef x = a[0];
    LLVMValueRef tiny = cmp(m, LLVMRealOLT, x, K(m, 0x1p-126));
    LLVMValueRef xs = sel(m, tiny, mul(m, x, K(m, 0x1p23)), x);
    LLVMValueRef ix = LLVMBuildAdd(b, to_i32(m, xs), KI(m, 0x3f800000 - 0x3f3504f3), "");
    LLVMValueRef k = LLVMBuildSub(b, LLVMBuildAShr(b, ix, KI(m, 23), ""), KI(m, 0x7f), "");
    k = LLVMBuildAdd(b, k, sel(m, tiny, KI(m, -23), KI(m, 0)), "");
    LLVMValueRef mb = LLVMBuildAdd(b, LLVMBuildAnd(b, ix, KI(m, 0x007fffff), ""), KI(m, 0x3f3504f3), "");
    LLVMValueRef f = sub(m, to_f32(m, mb), K(m, 1));
    LLVMValueRef s = dvd(m, f, add(m, K(m, 2), f));
    LLVMValueRef z = mul(m, s, s);
    LLVMValueRef R = mul(m, z, poly(m, z, log_q, 4));
    LLVMValueRef hfsq = mul(m, mul(m, K(m, 0.5), f), f);
    LLVMValueRef dk = LLVMBuildSIToFP(b, k, m->g->f32, "");
    LLVMValueRef r = fma_(m, s, add(m, hfsq, R), mul(m, dk, K(m, 0x1.7f7d1cp-20)));
    r = add(m, add(m, sub(m, r, hfsq), f), mul(m, dk, K(m, 0x1.62e4p-1)));
    r = sel(m, cmp(m, LLVMRealOEQ, x, K(m, INFINITY)), x, r);
    r = sel(m, cmp(m, LLVMRealOEQ, x, K(m, 0)), K(m, -INFINITY), r);
    return sel(m, cmp(m, LLVMRealULT, x, K(m, 0)), K(m, NAN), r);
}

/* ---------------------------------------------------------------- tanh, sigmoid, silu */

static const double tanh_p[] = {-0.333333313, 0.133332223, -0.0539484546, 0.021708671,
                                -0.00819482189, 0.00215734588};

static LLVMValueRef m_tanh(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], ax = fabs_(m, x), z = mul(m, x, x);
    LLVMValueRef small = fma_(m, mul(m, ax, z), poly(m, z, tanh_p, 6), ax);
    LLVMValueRef e = exp_core(m, mul(m, ax, K(m, -2)), NULL, 0, EXP_NEG | EXP_NORMAL);
    LLVMValueRef big = dvd(m, sub(m, K(m, 1), e), add(m, K(m, 1), e));
    return copysign_(m, sel(m, cmp(m, LLVMRealOLT, ax, K(m, 0.625)), small, big), x);
}

/* sigmoid(x) = 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: e^-|x| never overflows;
 * formed at 2^32 times its size and scaled back, so a subnormal result rounds once. */
static LLVMValueRef m_sigmoid(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], e32 = exp_core(m, LLVMBuildFNeg(m->b, fabs_(m, x), ""), NULL, 32, EXP_NEG | EXP_NORMAL);
    LLVMValueRef e = mul(m, e32, K(m, 0x1p-32)), pos = cmp(m, LLVMRealOGE, x, K(m, 0));
    LLVMValueRef num = sel(m, pos, K(m, 1), e32);
    return mul(m, dvd(m, num, add(m, K(m, 1), e)), sel(m, pos, K(m, 1), K(m, 0x1p-32)));
}

/* x sigmoid(x); for x < 0, x e^x is formed at 2^32 times its size so it keeps its digits
 * where e^x alone would be subnormal. */
static LLVMValueRef m_silu(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], e32 = exp_core(m, LLVMBuildFNeg(m->b, fabs_(m, x), ""), NULL, 32, EXP_NEG | EXP_NORMAL);
    LLVMValueRef e = mul(m, e32, K(m, 0x1p-32)), pos = cmp(m, LLVMRealOGE, x, K(m, 0));
    LLVMValueRef num = sel(m, pos, x, mul(m, x, e32));
    return mul(m, dvd(m, num, add(m, K(m, 1), e)), sel(m, pos, K(m, 1), K(m, 0x1p-32)));
}

/* ---------------------------------------------------------------- erf, gelu */

static const double erf_p[] = {0.128379166, -0.37612626, 0.112835824, -0.0268536434,
                               0.00518796267, -0.000800679321, 7.84228832e-05};
/* M(a) = erfc(a / sqrt 2) e^(a^2 / 2) (sqrt(2 pi) times Mills' ratio of the normal
 * distribution) on [0, 13.2], where x Phi(-x) = x e^(-x^2/2) M(x) / 2 is normal: a (4,5)
 * rational, 0.21 ulp relative with these f32 coefficients; it stays within 4e-7 to 20. */
static const double mills_p[] = {1, 0.869539261, 0.361212105, 0.0794832632, 0.00796473026};
static const double mills_q[] = {1, 1.66742408, 1.19162059, 0.462524951, 0.0996251106,
                                 0.00998216029};

/* scale M(a) for an f32 a >= 0 (or NaN), scale a power of two: everything in f32. The
 * two polynomials' roundings cost up to about 3 ulps (their terms all count at large a). */
static LLVMValueRef mills(M *m, LLVMValueRef a, double scale)
{
    double p[5];
    for (int i = 0; i < 5; i++)
        p[i] = mills_p[i] * scale;
    return dvd(m, poly(m, a, p, 5), poly(m, a, mills_q, 6));
}

static LLVMValueRef m_erf(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], ax = fabs_(m, x), lo;
    LLVMValueRef z = mul(m, x, x);
    LLVMValueRef small = fma_(m, ax, poly(m, z, erf_p, 7), ax);
    LLVMValueRef hi = mul_exact(m, ax, ax, &lo);
    LLVMValueRef e = exp_core(m, LLVMBuildFNeg(m->b, hi, ""), LLVMBuildFNeg(m->b, lo, ""), 0, EXP_NEG | EXP_NORMAL);
    /* erfc(ax) e^(ax^2) = M(ax sqrt 2); beyond 3.92 e M rounds away, and beyond 10.5 e is 0 */
    LLVMValueRef s = mul(m, ax, K(m, M_SQRT2));
    s = sel(m, cmp(m, LLVMRealOGT, s, K(m, 14.5)), K(m, 14.5), s); /* NaN stays */
    LLVMValueRef big = sub(m, K(m, 1), mul(m, e, mills(m, s, 1)));
    return copysign_(m, sel(m, cmp(m, LLVMRealOLT, ax, K(m, 1)), small, big), x);
}

/* x Phi(x) = max(x, 0) - t, t = |x| Phi(-|x|) = |x| e^(-x^2/2) M(|x|) / 2, in f32: -x^2/2
 * exact as hi + lo, e^(...) formed at 2^32 times its size (like silu's) so t rounds once
 * where it is subnormal. For x >= 0 the result is x - t in one rounding (Phi(x) itself,
 * just above 1/2, would round at twice the result's relative ulp). |x| is clamped at 14.5,
 * where t is below half the least subnormal (and e stays in exp_core's range); max(x, 0)
 * as x - min(x, 0) keeps +inf and NaN, and gives NaN for -inf, as libm's x erfc(-x)/2. */
static LLVMValueRef m_gelu(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], ax = fabs_(m, x), lo;
    ax = sel(m, cmp(m, LLVMRealOGT, ax, K(m, 14.5)), K(m, 14.5), ax); /* NaN stays */
    LLVMValueRef h = mul(m, ax, K(m, -0.5)); /* exact but below 2^-125, where e is 1 */
    LLVMValueRef hi = mul_exact(m, h, ax, &lo);
    LLVMValueRef e = exp_core(m, hi, lo, 32, EXP_NEG | EXP_NORMAL | EXP_INRANGE);
    LLVMValueRef t = mul(m, mul(m, ax, e), mills(m, ax, 0x1p-33));
    LLVMValueRef neg = sel(m, cmp(m, LLVMRealOLT, x, K(m, 0)), x, K(m, 0));
    return sub(m, sub(m, x, neg), t);
}

/* x sigmoid(2u), 2u = 2 sqrt(2/pi) (x + 0.044715 x^3): 2u in f64, so a large negative
 * 2u loses nothing before the exponential. */
static LLVMValueRef m_gelu_tanh(M *m, LLVMValueRef *a)
{
    LLVMValueRef x = a[0], xd = ext(m, x);
    LLVMValueRef v = mul(m, xd, fma_(m, mul(m, xd, xd), KD(m, 0x1.2444f2a4d8b4bp-4), KD(m, 0x1.9884533d43651p+0)));
    LLVMValueRef nv = LLVMBuildFNeg(m->b, fabs_(m, v), "");
    LLVMValueRef nh = trunc_(m, nv), nl = trunc_(m, sub(m, nv, ext(m, nh)));
    LLVMValueRef e32 = exp_core(m, nh, nl, 32, EXP_NEG | EXP_NORMAL);
    LLVMValueRef e = mul(m, e32, K(m, 0x1p-32)), pos = cmp(m, LLVMRealOGE, x, K(m, 0));
    LLVMValueRef num = sel(m, pos, x, mul(m, x, e32));
    return mul(m, dvd(m, num, add(m, K(m, 1), e)), sel(m, pos, K(m, 1), K(m, 0x1p-32)));
}

/* ---------------------------------------------------------------- sin, cos */

static const double sin_s[] = {-0.166666672, 0.00833337288, -0.000198503039, 2.8045306e-06};
static const double cos_c[] = {0.0416666679, -0.0013888973, 2.48192755e-05, -2.86171428e-07};

/* sin(x + shift pi/2): x = n pi/2 + r, |r| <= pi/4, then sin or cos of r by quadrant. */
static LLVMValueRef sin_quadrant(M *m, LLVMValueRef x, int shift)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef xd = ext(m, x);
    LLVMValueRef t = fma_(m, xd, KD(m, 0x1.45f306dc9c883p-1), KD(m, 0x1.8p52));
    LLVMValueRef n = sub(m, t, KD(m, 0x1.8p52));
    LLVMValueRef r = fma_(m, n, KD(m, -0x1.921fb544p+0), xd);
    r = fma_(m, n, KD(m, -0x1.0b4611a6p-34), r);
    r = fma_(m, n, KD(m, -0x1.3198a2e037073p-69), r);
    /* Beyond 2^50, n is not exact: keep r where the polynomials stay within [-1, 1]. */
    LLVMValueRef sane = cmp(m, LLVMRealULT, fabs_(m, x), K(m, 0x1p50));
    r = sel(m, sane, r, sel(m, cmp(m, LLVMRealOGE, fabs_(m, r), KD(m, 0.785)), KD(m, 0), r));
    LLVMValueRef rh = trunc_(m, r), rl = trunc_(m, sub(m, r, ext(m, rh)));
    LLVMValueRef z = mul(m, rh, rh);
    LLVMValueRef sr = add(m, rh, fma_(m, mul(m, rh, z), poly(m, z, sin_s, 4), rl));
    LLVMValueRef hz = mul(m, z, K(m, 0.5)), w = sub(m, K(m, 1), hz);
    LLVMValueRef corr = sub(m, sub(m, sub(m, K(m, 1), w), hz), mul(m, rh, rl));
    LLVMValueRef cr = add(m, w, fma_(m, mul(m, z, z), poly(m, z, cos_c, 4), corr));
    LLVMValueRef q = LLVMBuildTrunc(b, LLVMBuildBitCast(b, t, m->g->i64, ""), m->g->i32, "");
    q = LLVMBuildAdd(b, q, KI(m, shift), "");
    LLVMValueRef odd = LLVMBuildTrunc(b, q, m->g->i1, "");
    LLVMValueRef v = sel(m, odd, cr, sr);
    LLVMValueRef flip = LLVMBuildShl(b, LLVMBuildAnd(b, q, KI(m, 2), ""), KI(m, 30), "");
    return to_f32(m, LLVMBuildXor(b, to_i32(m, v), flip, ""));
}

static LLVMValueRef m_sin(M *m, LLVMValueRef *a)
{
    return sel(m, cmp(m, LLVMRealOEQ, a[0], K(m, 0)), a[0], sin_quadrant(m, a[0], 0)); /* -0 */
}

static LLVMValueRef m_cos(M *m, LLVMValueRef *a) { return sin_quadrant(m, a[0], 1); }

/* ---------------------------------------------------------------- pow */

/* log2 |x| in f64, to about 1e-16 relative: musl's reduction, then 2 atanh(s) as its
 * series to s^17 (|s| < 0.172). */
static LLVMValueRef log2_wide(M *m, LLVMValueRef ax)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef tiny = cmp(m, LLVMRealOLT, ax, K(m, 0x1p-126));
    LLVMValueRef xs = sel(m, tiny, mul(m, ax, K(m, 0x1p23)), ax);
    LLVMValueRef ix = LLVMBuildAdd(b, to_i32(m, xs), KI(m, 0x3f800000 - 0x3f3504f3), "");
    LLVMValueRef k = LLVMBuildSub(b, LLVMBuildAShr(b, ix, KI(m, 23), ""), KI(m, 0x7f), "");
    k = LLVMBuildAdd(b, k, sel(m, tiny, KI(m, -23), KI(m, 0)), "");
    LLVMValueRef mb = LLVMBuildAdd(b, LLVMBuildAnd(b, ix, KI(m, 0x007fffff), ""), KI(m, 0x3f3504f3), "");
    LLVMValueRef f = sub(m, ext(m, to_f32(m, mb)), KD(m, 1));
    LLVMValueRef s = dvd(m, f, add(m, KD(m, 2), f)), w = mul(m, s, s);
    double c[9];
    for (int j = 0; j < 9; j++)
        c[j] = 2.0 / (2 * j + 1) / M_LN2;
    LLVMValueRef l = mul(m, s, poly(m, w, c, 9));
    l = add(m, LLVMBuildSIToFP(b, k, m->g->f64, ""), l);
    l = sel(m, cmp(m, LLVMRealUEQ, ax, K(m, INFINITY)), ext(m, ax), l); /* inf, NaN */
    return sel(m, cmp(m, LLVMRealOEQ, ax, K(m, 0)), KD(m, -INFINITY), l);
}

/* 2^y in f64 for the f32 result: y clamped to +-300 (beyond f32's range either way). */
static LLVMValueRef exp2_wide(M *m, LLVMValueRef y)
{
    LLVMBuilderRef b = m->b;
    y = sel(m, cmp(m, LLVMRealOGT, y, KD(m, 300)), KD(m, 300), y);
    y = sel(m, cmp(m, LLVMRealOLT, y, KD(m, -300)), KD(m, -300), y);
    LLVMValueRef t = add(m, y, KD(m, 0x1.8p52)), n = sub(m, t, KD(m, 0x1.8p52));
    LLVMValueRef r = sub(m, y, n);
    double c[14];
    c[0] = 1;
    for (int k = 1; k < 14; k++)
        c[k] = c[k - 1] * M_LN2 / k;
    LLVMValueRef p = poly(m, r, c, 14);
    LLVMValueRef ni = LLVMBuildSub(b, LLVMBuildBitCast(b, t, m->g->i64, ""),
                                   LLVMBuildBitCast(b, KD(m, 0x1.8p52), m->g->i64, ""), "");
    LLVMValueRef e = LLVMBuildShl(b, LLVMBuildAdd(b, ni, LLVMConstInt(m->g->i64, 1023, 0), ""),
                                  LLVMConstInt(m->g->i64, 52, 0), "");
    return mul(m, p, LLVMBuildBitCast(b, e, m->g->f64, ""));
}

/* Whether y is an integer, and an odd one (|y| >= 2^24 is always even). */
static LLVMValueRef int_test(M *m, LLVMValueRef y, LLVMValueRef *odd)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef ay = fabs_(m, y), small = cmp(m, LLVMRealOLT, ay, K(m, 0x1p24));
    LLVMValueRef i = LLVMBuildFPToSI(b, sel(m, small, y, K(m, 0)), m->g->i32, "");
    LLVMValueRef whole = cmp(m, LLVMRealOEQ, LLVMBuildSIToFP(b, i, m->g->f32, ""), y);
    *odd = LLVMBuildAnd(b, LLVMBuildAnd(b, small, whole, ""), LLVMBuildTrunc(b, i, m->g->i1, ""), "");
    LLVMValueRef finite = cmp(m, LLVMRealONE, ay, K(m, INFINITY));
    return sel(m, small, whole, finite);
}

static LLVMValueRef m_pow(M *m, LLVMValueRef *a)
{
    LLVMBuilderRef b = m->b;
    LLVMValueRef x = a[0], y = a[1], odd;
    LLVMValueRef r = trunc_(m, exp2_wide(m, mul(m, ext(m, y), log2_wide(m, fabs_(m, x)))));
    LLVMValueRef whole = int_test(m, y, &odd);
    LLVMValueRef negx = LLVMBuildICmp(b, LLVMIntSLT, to_i32(m, x), KI(m, 0), ""); /* signbit */
    r = sel(m, LLVMBuildAnd(b, negx, odd, ""), LLVMBuildFNeg(b, r, ""), r);
    LLVMValueRef finite = LLVMBuildAnd(b, cmp(m, LLVMRealONE, fabs_(m, x), K(m, INFINITY)),
                                       cmp(m, LLVMRealONE, fabs_(m, y), K(m, INFINITY)), "");
    LLVMValueRef nan = LLVMBuildAnd(b, LLVMBuildAnd(b, cmp(m, LLVMRealOLT, x, K(m, 0)), finite, ""),
                                    LLVMBuildNot(b, whole, ""), "");
    r = sel(m, nan, K(m, NAN), r);
    LLVMValueRef one = LLVMBuildOr(b, cmp(m, LLVMRealOEQ, y, K(m, 0)), cmp(m, LLVMRealOEQ, x, K(m, 1)), "");
    LLVMValueRef minus1 = LLVMBuildAnd(b, cmp(m, LLVMRealOEQ, x, K(m, -1)),
                                       cmp(m, LLVMRealOEQ, fabs_(m, y), K(m, INFINITY)), "");
    return sel(m, LLVMBuildOr(b, one, minus1, ""), K(m, 1), r);
}

/* ---------------------------------------------------------------- the simple ones */

static LLVMValueRef m_neg(M *m, LLVMValueRef *a) { return LLVMBuildFNeg(m->b, a[0], ""); }
static LLVMValueRef m_abs(M *m, LLVMValueRef *a) { return fabs_(m, a[0]); }
static LLVMValueRef m_sqrt(M *m, LLVMValueRef *a) { return intr1(m, "llvm.sqrt", a[0]); }
static LLVMValueRef m_rsqrt(M *m, LLVMValueRef *a) { return dvd(m, K(m, 1), intr1(m, "llvm.sqrt", a[0])); }
static LLVMValueRef m_recip(M *m, LLVMValueRef *a) { return dvd(m, K(m, 1), a[0]); }

/* x > 0 or NaN ? x : +0 */
static LLVMValueRef m_relu(M *m, LLVMValueRef *a)
{
    return sel(m, cmp(m, LLVMRealUGT, a[0], K(m, 0)), a[0], K(m, 0));
}

/* ---------------------------------------------------------------- functions and calls */

typedef LLVMValueRef (*MathBody)(M *m, LLVMValueRef *args);

typedef struct MathFn {
    const char *name; /* in the module; the dots keep it apart from C's names */
    MathBody body;
    bool inline_only; /* a handful of instructions: emitted in place, no function */
} MathFn;

static const MathFn math_fns[OP_COUNT] = {
    [OP_NEG] = {"coil.neg", m_neg, true},       [OP_ABS] = {"coil.abs", m_abs, true},
    [OP_EXP] = {"coil.exp", m_exp, false},      [OP_LOG] = {"coil.log", m_log, false},
    [OP_SQRT] = {"coil.sqrt", m_sqrt, true},    [OP_RSQRT] = {"coil.rsqrt", m_rsqrt, true},
    [OP_RECIPROCAL] = {"coil.recip", m_recip, true},
    [OP_TANH] = {"coil.tanh", m_tanh, false},   [OP_SIGMOID] = {"coil.sigmoid", m_sigmoid, false},
    [OP_RELU] = {"coil.relu", m_relu, true},    [OP_GELU] = {"coil.gelu", m_gelu, false},
    [OP_GELU_TANH] = {"coil.gelu_tanh", m_gelu_tanh, false},
    [OP_SILU] = {"coil.silu", m_silu, false},   [OP_SIN] = {"coil.sin", m_sin, false},
    [OP_COS] = {"coil.cos", m_cos, false},      [OP_ERF] = {"coil.erf", m_erf, false},
    [OP_POW] = {"coil.pow", m_pow, false},
};

/* The function `name` of n f32 arguments (built on first use), internal and always
 * inlined: after inlining the vectoriser sees straight-line code. */
static LLVMValueRef math_fn(Gen *g, const char *name, MathBody body, int n, LLVMTypeRef ret,
                            LLVMTypeRef arg)
{
    LLVMTypeRef args[3] = {arg, arg, arg};
    LLVMTypeRef type = LLVMFunctionType(ret, args, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (fn)
        return fn;
    fn = LLVMAddFunction(g->mod, name, type);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    const char *attrs[] = {"alwaysinline", "nounwind", "willreturn"};
    for (int i = 0; i < 3; i++)
        gen_attr(g, fn, LLVMAttributeFunctionIndex, attrs[i]);
    M m = {g, LLVMCreateBuilderInContext(g->ctx)};
    LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
    LLVMValueRef params[3];
    for (int i = 0; i < n; i++)
        params[i] = LLVMGetParam(fn, (unsigned)i);
    LLVMBuildRet(m.b, body(&m, params));
    LLVMDisposeBuilder(m.b);
    return fn;
}

static LLVMValueRef call(Gen *g, LLVMValueRef fn, LLVMValueRef *args, int n)
{
    return LLVMBuildCall2(g->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)n, "");
}

LLVMValueRef math_unary(Gen *g, int op, LLVMValueRef x)
{
    if (op < 0 || op >= OP_COUNT || op == OP_POW || !math_fns[op].body)
        return NULL;
    const MathFn *f = &math_fns[op];
    if (f->inline_only) {
        M m = {g, g->b};
        return f->body(&m, &x);
    }
    return call(g, math_fn(g, f->name, f->body, 1, g->f32, g->f32), &x, 1);
}

/* pow with a constant exponent that has a short exact form (x^2 is rounded once). */
static LLVMValueRef pow_const(Gen *g, LLVMValueRef x, double y)
{
    M m = {g, g->b};
    if (y == 1)
        return x;
    if (y == 2)
        return mul(&m, x, x);
    if (y == -1)
        return dvd(&m, K(&m, 1), x);
    if (y == 0.5) /* pow(-0, .5) is +0 and pow(-inf, .5) is +inf; sqrt says -0 and NaN */
        return sel(&m, cmp(&m, LLVMRealOEQ, x, K(&m, -INFINITY)), K(&m, INFINITY),
                   add(&m, intr1(&m, "llvm.sqrt", x), K(&m, 0)));
    return NULL;
}

LLVMValueRef math_pow(Gen *g, LLVMValueRef a, LLVMValueRef b)
{
    if (LLVMIsAConstantFP(b)) {
        LLVMBool loses;
        LLVMValueRef v = pow_const(g, a, LLVMConstRealGetDouble(b, &loses));
        if (v)
            return v;
    }
    LLVMValueRef args[2] = {a, b};
    return call(g, math_fn(g, math_fns[OP_POW].name, m_pow, 2, g->f32, g->f32), args, 2);
}

/* ---------------------------------------------------------------- Philox4x32-10 */

/* ir/rng.c's rounds in i32 and i64 arithmetic (the 32x32->64 products vectorise);
 * a: seed, counter, rng step. */
static LLVMValueRef m_philox(M *m, LLVMValueRef *a)
{
    LLVMBuilderRef b = m->b;
    Gen *g = m->g;
    LLVMValueRef k32 = LLVMConstInt(g->i64, 32, 0);
    LLVMValueRef c[4] = {LLVMBuildTrunc(b, a[1], g->i32, ""),
                         LLVMBuildTrunc(b, LLVMBuildLShr(b, a[1], k32, ""), g->i32, ""),
                         LLVMBuildTrunc(b, a[2], g->i32, ""),
                         LLVMBuildTrunc(b, LLVMBuildLShr(b, a[2], k32, ""), g->i32, "")};
    LLVMValueRef k[2] = {LLVMBuildTrunc(b, a[0], g->i32, ""),
                         LLVMBuildTrunc(b, LLVMBuildLShr(b, a[0], k32, ""), g->i32, "")};
    for (int round = 0; round < 10; round++) {
        LLVMValueRef p0 = LLVMBuildMul(b, LLVMBuildZExt(b, c[0], g->i64, ""),
                                       LLVMConstInt(g->i64, 0xD2511F53u, 0), "");
        LLVMValueRef p1 = LLVMBuildMul(b, LLVMBuildZExt(b, c[2], g->i64, ""),
                                       LLVMConstInt(g->i64, 0xCD9E8D57u, 0), "");
        LLVMValueRef hi0 = LLVMBuildTrunc(b, LLVMBuildLShr(b, p0, k32, ""), g->i32, "");
        LLVMValueRef hi1 = LLVMBuildTrunc(b, LLVMBuildLShr(b, p1, k32, ""), g->i32, "");
        LLVMValueRef n0 = LLVMBuildXor(b, LLVMBuildXor(b, hi1, c[1], ""), k[0], "");
        LLVMValueRef n2 = LLVMBuildXor(b, LLVMBuildXor(b, hi0, c[3], ""), k[1], "");
        c[1] = LLVMBuildTrunc(b, p1, g->i32, "");
        c[3] = LLVMBuildTrunc(b, p0, g->i32, "");
        c[0] = n0;
        c[2] = n2;
        k[0] = LLVMBuildAdd(b, k[0], KI(m, (int32_t)0x9E3779B9u), "");
        k[1] = LLVMBuildAdd(b, k[1], KI(m, (int32_t)0xBB67AE85u), "");
    }
    LLVMValueRef bits = LLVMBuildLShr(b, c[0], KI(m, 8), ""); /* 24 bits: exact in f32 */
    return mul(m, LLVMBuildSIToFP(b, bits, g->f32, ""), K(m, 0x1p-24));
}

LLVMValueRef math_rand(Gen *g, uint64_t seed, uint64_t offset, LLVMValueRef index,
                       LLVMValueRef step)
{
    LLVMValueRef fn = math_fn(g, "coil.philox", m_philox, 3, g->f32, g->i64);
    LLVMValueRef ctr = LLVMBuildAdd(g->b, index, LLVMConstInt(g->i64, offset, 0), "");
    LLVMValueRef args[3] = {LLVMConstInt(g->i64, seed, 0), ctr, step};
    return call(g, fn, args, 3);
}
