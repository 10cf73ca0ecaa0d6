/* expr.c — loop IR expressions as LLVM values: each dtype's register and memory forms,
 * the conversions between dtypes (dtype_round's rules) and every operator's arithmetic as
 * codegen/loop.h defines it. Transcendentals come from mathlib.c. */
#include <math.h>

#include "codegen/cpu/gen.h"

/* ---------------------------------------------------------------- types and constants */

LLVMTypeRef reg_type(Gen *g, DType dt)
{
    LLVMTypeRef t[DT_COUNT] = {[DT_F32] = g->f32, [DT_F16] = g->f32, [DT_BF16] = g->f32,
                               [DT_I8] = g->i8,   [DT_I32] = g->i32, [DT_I64] = g->i64,
                               [DT_BOOL] = g->i1};
    return t[dt];
}

/* f16 and bf16 travel as their 16 bits, bool as a byte. */
static LLVMTypeRef mem_type(Gen *g, DType dt)
{
    LLVMTypeRef t[DT_COUNT] = {[DT_F32] = g->f32, [DT_F16] = g->i16, [DT_BF16] = g->i16,
                               [DT_I8] = g->i8,   [DT_I32] = g->i32, [DT_I64] = g->i64,
                               [DT_BOOL] = g->i8};
    return t[dt];
}

static bool is_float(DType dt) { return dtype_info[dt].is_float; }
static LLVMValueRef c32(Gen *g, uint32_t v) { return LLVMConstInt(g->i32, v, 0); }
static LLVMValueRef cf(Gen *g, double v) { return LLVMConstReal(g->f32, v); }

/* ---------------------------------------------------------------- f16 and bf16 bits */

/* float -> binary16 bits, ties to even, in integer operations (for targets without F16C,
 * where LLVM would call a runtime helper): F. Giesen's float_to_half_fast3_rtne. */
static LLVMValueRef f16_bits_soft(Gen *g, LLVMValueRef x)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef u = LLVMBuildBitCast(b, x, g->i32, "");
    LLVMValueRef sign = LLVMBuildAnd(b, u, c32(g, 0x80000000u), "");
    LLVMValueRef a = LLVMBuildXor(b, u, sign, "");
    LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, a, c32(g, 0x47800000), "");
    LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, a, c32(g, 0x7f800000), "");
    LLVMValueRef o_big = LLVMBuildSelect(b, nan, c32(g, 0x7e00), c32(g, 0x7c00), "");
    /* Below 2^-14 the result is subnormal: adding 0.5 rounds at the quantum 2^-24. */
    LLVMValueRef small = LLVMBuildICmp(b, LLVMIntULT, a, c32(g, 0x38800000), "");
    LLVMValueRef s = LLVMBuildFAdd(b, LLVMBuildBitCast(b, a, g->f32, ""), cf(g, 0.5), "");
    LLVMValueRef o_small = LLVMBuildSub(b, LLVMBuildBitCast(b, s, g->i32, ""),
                                        c32(g, 0x3f000000), "");
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, a, c32(g, 13), ""), c32(g, 1), "");
    LLVMValueRef n = LLVMBuildAdd(b, LLVMBuildAdd(b, a, c32(g, 0xc8000fffu), ""), odd, "");
    LLVMValueRef o_norm = LLVMBuildLShr(b, n, c32(g, 13), "");
    LLVMValueRef o = LLVMBuildSelect(b, big, o_big, LLVMBuildSelect(b, small, o_small, o_norm, ""), "");
    o = LLVMBuildOr(b, o, LLVMBuildLShr(b, sign, c32(g, 16), ""), "");
    return LLVMBuildTrunc(b, o, g->i16, "");
}

/* binary16 bits -> float, exactly (Giesen's half_to_float). */
static LLVMValueRef f16_value_soft(Gen *g, LLVMValueRef h16)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef h = LLVMBuildZExt(b, h16, g->i32, "");
    LLVMValueRef o = LLVMBuildShl(b, LLVMBuildAnd(b, h, c32(g, 0x7fff), ""), c32(g, 13), "");
    LLVMValueRef e = LLVMBuildAnd(b, o, c32(g, 0x0f800000), "");
    o = LLVMBuildAdd(b, o, c32(g, 0x38000000), "");
    LLVMValueRef infnan = LLVMBuildICmp(b, LLVMIntEQ, e, c32(g, 0x0f800000), "");
    LLVMValueRef o_inf = LLVMBuildAdd(b, o, c32(g, 0x38000000), "");
    LLVMValueRef sub = LLVMBuildICmp(b, LLVMIntEQ, e, c32(g, 0), "");
    LLVMValueRef d = LLVMBuildBitCast(b, LLVMBuildAdd(b, o, c32(g, 0x00800000), ""), g->f32, "");
    d = LLVMBuildFSub(b, d, LLVMBuildBitCast(b, c32(g, 0x38800000), g->f32, ""), "");
    LLVMValueRef o_sub = LLVMBuildBitCast(b, d, g->i32, "");
    o = LLVMBuildSelect(b, infnan, o_inf, LLVMBuildSelect(b, sub, o_sub, o, ""), "");
    o = LLVMBuildOr(b, o, LLVMBuildShl(b, LLVMBuildAnd(b, h, c32(g, 0x8000), ""), c32(g, 16), ""), "");
    return LLVMBuildBitCast(b, o, g->f32, "");
}

static LLVMValueRef f16_bits(Gen *g, LLVMValueRef x)
{
    if (!g->t->f16)
        return f16_bits_soft(g, x);
    LLVMValueRef h = LLVMBuildFPTrunc(g->b, x, LLVMHalfTypeInContext(g->ctx), "");
    return LLVMBuildBitCast(g->b, h, g->i16, "");
}

static LLVMValueRef f16_value(Gen *g, LLVMValueRef h16)
{
    if (!g->t->f16)
        return f16_value_soft(g, h16);
    LLVMValueRef h = LLVMBuildBitCast(g->b, h16, LLVMHalfTypeInContext(g->ctx), "");
    return LLVMBuildFPExt(g->b, h, g->f32, "");
}

/* float -> bfloat16 in the top half of an i32, ties to even, subnormals kept. Integer
 * operations rather than LLVM's fptrunc to bfloat: x86's vcvtneps2bf16 flushes subnormals
 * and targets without it call a runtime helper. NaN is left to the caller. */
static LLVMValueRef bf16_rounded(Gen *g, LLVMValueRef x)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef u = LLVMBuildBitCast(b, x, g->i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(g, 16), ""), c32(g, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, u, c32(g, 0x7fff), ""), lsb, "");
    return LLVMBuildAnd(b, r, c32(g, 0xffff0000u), "");
}

/* bf16 bits as f32_to_bf16 gives them: a NaN is the quiet NaN of its sign. */
static LLVMValueRef bf16_bits(Gen *g, LLVMValueRef x)
{
    LLVMBuilderRef b = g->b;
    LLVMValueRef u = LLVMBuildBitCast(b, x, g->i32, "");
    LLVMValueRef qnan = LLVMBuildOr(b, LLVMBuildAnd(b, u, c32(g, 0x80000000u), ""),
                                    c32(g, 0x7fc00000), "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
    LLVMValueRef r = LLVMBuildSelect(b, nan, qnan, bf16_rounded(g, x), "");
    return LLVMBuildTrunc(b, LLVMBuildLShr(b, r, c32(g, 16), ""), g->i16, "");
}

static LLVMValueRef bf16_value(Gen *g, LLVMValueRef h16)
{
    LLVMValueRef u = LLVMBuildShl(g->b, LLVMBuildZExt(g->b, h16, g->i32, ""), c32(g, 16), "");
    return LLVMBuildBitCast(g->b, u, g->f32, "");
}

LLVMValueRef expr_round(Gen *g, LLVMValueRef v, DType dt)
{
    if (dt == DT_F16)
        return f16_value(g, f16_bits(g, v));
    if (dt != DT_BF16)
        return v;
    LLVMValueRef r = LLVMBuildBitCast(g->b, bf16_rounded(g, v), g->f32, "");
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealUNO, v, v, ""), v, r, "");
}

/* ---------------------------------------------------------------- memory */

static LLVMValueRef element(Gen *g, DType dt, LLVMValueRef base, LLVMValueRef idx)
{
    return LLVMBuildInBoundsGEP2(g->b, mem_type(g, dt), base, &idx, 1, "");
}

LLVMValueRef mem_load(Gen *g, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef *inst)
{
    LLVMValueRef v = LLVMBuildLoad2(g->b, mem_type(g, dt), element(g, dt, base, idx), "");
    LLVMSetAlignment(v, (unsigned)dtype_info[dt].size);
    *inst = v;
    switch (dt) {
    case DT_F16: return f16_value(g, v);
    case DT_BF16: return bf16_value(g, v);
    case DT_BOOL: return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->i8, 0, 0), "");
    default: return v;
    }
}

LLVMValueRef mem_store(Gen *g, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
    if (dt == DT_F16)
        v = f16_bits(g, v);
    else if (dt == DT_BF16)
        v = bf16_bits(g, v);
    else if (dt == DT_BOOL)
        v = LLVMBuildZExt(g->b, v, g->i8, "");
    LLVMValueRef s = LLVMBuildStore(g->b, v, element(g, dt, base, idx));
    LLVMSetAlignment(s, (unsigned)dtype_info[dt].size);
    return s;
}

/* ---------------------------------------------------------------- conversions */

/* A float or double to an integer dtype as dtype_round does: truncate, NaN gives 0,
 * saturate at 2^63 - 1024 (the largest double below 2^63) and -2^63, then wrap. */
static LLVMValueRef float_to_int(Gen *g, LLVMValueRef v, DType to)
{
    LLVMBuilderRef b = g->b;
    if (LLVMTypeOf(v) != g->f64)
        v = LLVMBuildFPExt(b, v, g->f64, "");
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGE, v, LLVMConstReal(g->f64, 0x1p63), "");
    v = LLVMBuildSelect(b, big, LLVMConstReal(g->f64, 0x1p63 - 1024), v, "");
    LLVMTypeRef ov[2] = {g->i64, g->f64};
    LLVMValueRef i = gen_intrinsic(g, b, "llvm.fptosi.sat", ov, 2, &v, 1);
    return to == DT_I64 ? i : LLVMBuildTrunc(b, i, reg_type(g, to), "");
}

/* An integer (or bool) register as a double, exactly below 2^53. */
static LLVMValueRef int_to_double(Gen *g, LLVMValueRef v, DType from)
{
    if (from == DT_BOOL)
        return LLVMBuildUIToFP(g->b, v, g->f64, "");
    return LLVMBuildSIToFP(g->b, v, g->f64, "");
}

/* i64 rounds once to double, then to float, as the interpreter's doubles do; narrower
 * integers convert exactly to double, so one rounding to float is the same. */
static LLVMValueRef int_to_float(Gen *g, LLVMValueRef v, DType from)
{
    if (from == DT_I64)
        return LLVMBuildFPTrunc(g->b, int_to_double(g, v, from), g->f32, "");
    if (from == DT_BOOL)
        return LLVMBuildUIToFP(g->b, v, g->f32, "");
    return LLVMBuildSIToFP(g->b, v, g->f32, "");
}

LLVMValueRef expr_convert(Gen *g, LLVMValueRef v, DType from, DType to)
{
    LLVMBuilderRef b = g->b;
    if (from == to)
        return v;
    if (to == DT_BOOL) {
        if (is_float(from))
            return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(g->f32, 0), "");
        return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(reg_type(g, from), 0, 0), "");
    }
    if (is_float(to))
        return expr_round(g, is_float(from) ? v : int_to_float(g, v, from), to);
    if (is_float(from))
        return float_to_int(g, v, to);
    if (from == DT_BOOL)
        return LLVMBuildZExt(b, v, reg_type(g, to), "");
    return LLVMBuildIntCast2(b, v, reg_type(g, to), 1, "");
}

/* ---------------------------------------------------------------- operators */

/* How each binary op computes, per class of operand dtype. Integer div and pow go through
 * f64 (loop.h); on bools (0 and 1, result != 0) both are a | !b. */
typedef struct BinRule {
    LLVMOpcode fop, iop, bop;  /* 0: see the other fields */
    const char *fintr, *iintr; /* intrinsics for float, integer operands */
    LLVMRealPredicate fcmp;
    LLVMIntPredicate icmp, bcmp; /* signed for integers, unsigned for bools */
    bool f64;                    /* integer operands through double */
} BinRule;

static const BinRule bin_rule[OP_COUNT] = {
    [OP_ADD] = {.fop = LLVMFAdd, .iop = LLVMAdd, .bop = LLVMOr},
    [OP_SUB] = {.fop = LLVMFSub, .iop = LLVMSub, .bop = LLVMXor},
    [OP_MUL] = {.fop = LLVMFMul, .iop = LLVMMul, .bop = LLVMAnd},
    [OP_DIV] = {.fop = LLVMFDiv, .f64 = true},
    [OP_POW] = {.f64 = true},
    [OP_MAXIMUM] = {.fintr = "llvm.maximum", .iintr = "llvm.smax", .bop = LLVMOr},
    [OP_MINIMUM] = {.fintr = "llvm.minimum", .iintr = "llvm.smin", .bop = LLVMAnd},
    [OP_EQ] = {.fcmp = LLVMRealOEQ, .icmp = LLVMIntEQ, .bcmp = LLVMIntEQ},
    [OP_NE] = {.fcmp = LLVMRealUNE, .icmp = LLVMIntNE, .bcmp = LLVMIntNE},
    [OP_LT] = {.fcmp = LLVMRealOLT, .icmp = LLVMIntSLT, .bcmp = LLVMIntULT},
    [OP_LE] = {.fcmp = LLVMRealOLE, .icmp = LLVMIntSLE, .bcmp = LLVMIntULE},
    [OP_GT] = {.fcmp = LLVMRealOGT, .icmp = LLVMIntSGT, .bcmp = LLVMIntUGT},
    [OP_GE] = {.fcmp = LLVMRealOGE, .icmp = LLVMIntSGE, .bcmp = LLVMIntUGE},
};

static LLVMValueRef binary_float(Gen *g, int op, LLVMValueRef a, LLVMValueRef b, DType dt)
{
    const BinRule *r = &bin_rule[op];
    if (r->fcmp)
        return LLVMBuildFCmp(g->b, r->fcmp, a, b, "");
    LLVMValueRef v;
    LLVMValueRef args[2] = {a, b};
    if (op == OP_POW)
        v = math_pow(g, a, b);
    else if (r->fintr)
        v = gen_intrinsic(g, g->b, r->fintr, &g->f32, 1, args, 2);
    else
        v = LLVMBuildBinOp(g->b, r->fop, a, b, "");
    return expr_round(g, v, dt);
}

/* x * y in i64; *over collects whether any product so far left i64. */
static LLVMValueRef mul_checked(Gen *g, LLVMValueRef x, LLVMValueRef y, LLVMValueRef *over)
{
    LLVMValueRef args[2] = {x, y};
    LLVMValueRef r = gen_intrinsic(g, g->b, "llvm.smul.with.overflow", &g->i64, 1, args, 2);
    *over = LLVMBuildOr(g->b, *over, LLVMBuildExtractValue(g->b, r, 1, ""), "");
    return LLVMBuildExtractValue(g->b, r, 0, "");
}

/* a^(b mod 64) by squaring; *over: the product (or a square it used) left i64, so
 * |a^b| >= 2^63. Six unrolled steps, no branches. */
static LLVMValueRef pow_squaring(Gen *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *over)
{
    LLVMBuilderRef bd = g->b;
    LLVMValueRef r = LLVMConstInt(g->i64, 1, 0), base = a, base_over = LLVMConstInt(g->i1, 0, 0);
    *over = base_over;
    for (int bit = 0; bit < 6; bit++) {
        LLVMValueRef take = LLVMBuildTrunc(bd, LLVMBuildLShr(bd, b, LLVMConstInt(g->i64, (unsigned)bit, 0), ""), g->i1, "");
        LLVMValueRef o = base_over;
        LLVMValueRef prod = mul_checked(g, r, base, &o);
        r = LLVMBuildSelect(bd, take, prod, r, "");
        *over = LLVMBuildOr(bd, *over, LLVMBuildAnd(bd, take, o, ""), "");
        base = mul_checked(g, base, base, &base_over);
    }
    return r;
}

/* a^b of integers as pow in f64 and dtype_round give it, but exactly (libm's pow would be
 * a call, and a kernel named pow would be called instead):
 *     |a| >= 2, b < 0: 0              a in {-1, 0, 1}, b < 0 or b >= 64: 1, -1, 0, 0^-n = inf
 *     |a^b| >= 2^63: +-saturated     else the exact product, rounded through f64 */
static LLVMValueRef int_pow(Gen *g, LLVMValueRef a, LLVMValueRef b, DType dt)
{
    LLVMBuilderRef bd = g->b;
    LLVMTypeRef t = g->i64;
    if (dt != DT_I64) {
        a = LLVMBuildSExt(bd, a, t, "");
        b = LLVMBuildSExt(bd, b, t, "");
    } else { /* the operands as the doubles pow sees (2^53 + 1 is even there) */
        a = float_to_int(g, LLVMBuildSIToFP(bd, a, g->f64, ""), dt);
        b = float_to_int(g, LLVMBuildSIToFP(bd, b, g->f64, ""), dt);
    }
    LLVMValueRef over, r = pow_squaring(g, a, b, &over);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0), inf = LLVMConstInt(t, INT64_MAX - 1023, 0);
    LLVMValueRef neg = LLVMBuildAnd(bd, LLVMBuildICmp(bd, LLVMIntSLT, a, zero, ""), LLVMBuildTrunc(bd, b, g->i1, ""), "");
    LLVMValueRef big = LLVMBuildICmp(bd, LLVMIntUGT, LLVMBuildAdd(bd, a, one, ""), LLVMConstInt(t, 2, 0), "");
    LLVMValueRef bneg = LLVMBuildICmp(bd, LLVMIntSLT, b, zero, "");
    LLVMValueRef far = LLVMBuildOr(bd, bneg, LLVMBuildICmp(bd, LLVMIntSGE, b, LLVMConstInt(t, 64, 0), ""), "");
    over = LLVMBuildOr(bd, over, LLVMBuildAnd(bd, far, big, ""), "");
    LLVMValueRef unit = LLVMBuildSelect(bd, LLVMBuildICmp(bd, LLVMIntEQ, a, zero, ""),
                                        LLVMBuildSelect(bd, bneg, inf, zero, ""),
                                        LLVMBuildSelect(bd, neg, LLVMConstAllOnes(t), one, ""), "");
    LLVMValueRef v = LLVMBuildSelect(bd, over, LLVMBuildSelect(bd, neg, LLVMConstInt(t, (unsigned long long)INT64_MIN, 1), inf, ""), r, "");
    v = LLVMBuildSelect(bd, LLVMBuildAnd(bd, far, LLVMBuildNot(bd, big, ""), ""), unit, v, "");
    v = LLVMBuildSelect(bd, LLVMBuildAnd(bd, bneg, big, ""), zero, v, "");
    return float_to_int(g, LLVMBuildSIToFP(bd, v, g->f64, ""), dt);
}

static LLVMValueRef binary_int(Gen *g, int op, LLVMValueRef a, LLVMValueRef b, DType dt)
{
    const BinRule *r = &bin_rule[op];
    if (r->icmp)
        return LLVMBuildICmp(g->b, r->icmp, a, b, "");
    LLVMValueRef args[2] = {a, b};
    if (r->iintr) {
        LLVMTypeRef t = reg_type(g, dt);
        return gen_intrinsic(g, g->b, r->iintr, &t, 1, args, 2);
    }
    if (op == OP_POW)
        return int_pow(g, a, b, dt);
    if (!r->f64)
        return LLVMBuildBinOp(g->b, r->iop, a, b, "");
    LLVMValueRef q = LLVMBuildFDiv(g->b, int_to_double(g, a, dt), int_to_double(g, b, dt), "");
    return float_to_int(g, q, dt); /* x / 0 is +-inf or NaN: saturates or gives 0 */
}

static LLVMValueRef binary_bool(Gen *g, int op, LLVMValueRef a, LLVMValueRef b)
{
    const BinRule *r = &bin_rule[op];
    if (r->bcmp)
        return LLVMBuildICmp(g->b, r->bcmp, a, b, "");
    if (r->f64)
        return LLVMBuildOr(g->b, a, LLVMBuildNot(g->b, b, ""), "");
    return LLVMBuildBinOp(g->b, r->bop, a, b, "");
}

static LLVMValueRef unary_int(Fn *f, int op, LLVMValueRef x, DType dt)
{
    Gen *g = f->g;
    LLVMTypeRef t = reg_type(g, dt);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0);
    if (op == OP_NEG)
        return LLVMBuildSub(g->b, zero, x, "");
    if (op == OP_ABS) {
        LLVMValueRef args[2] = {x, LLVMConstInt(g->i1, 0, 0)}; /* INT_MIN wraps to itself */
        return gen_intrinsic(g, g->b, "llvm.abs", &t, 1, args, 2);
    }
    if (op == OP_RELU) {
        LLVMValueRef args[2] = {x, zero};
        return gen_intrinsic(g, g->b, "llvm.smax", &t, 1, args, 2);
    }
    return gen_fail(g, f->name, "%s of %s: the CPU backend computes float functions of "
                    "float operands only (the op table rejects others)",
                    op_info[op].name, dtype_info[dt].name);
}

static LLVMValueRef emit_unary(Fn *f, const Lx *x)
{
    Gen *g = f->g;
    DType in = f->k->lx[x->a].dt;
    LLVMValueRef a = f->val[x->a];
    if (is_float(in)) {
        LLVMValueRef v = math_unary(g, x->op, a);
        if (!v)
            return gen_fail(g, f->name, "unary op %d is not a pointwise unary op", x->op);
        return expr_round(g, v, x->dt);
    }
    if (in == DT_BOOL)
        return gen_fail(g, f->name, "%s of bool", op_info[x->op].name);
    return unary_int(f, x->op, a, x->dt);
}

static LLVMValueRef emit_binary(Fn *f, const Lx *x)
{
    DType in = f->k->lx[x->a].dt;
    LLVMValueRef a = f->val[x->a], b = f->val[x->b];
    if (x->op < OP_ADD || x->op > OP_GE)
        return gen_fail(f->g, f->name, "binary op %d is not a pointwise binary op", x->op);
    if (is_float(in))
        return binary_float(f->g, x->op, a, b, x->dt);
    if (in == DT_BOOL)
        return binary_bool(f->g, x->op, a, b);
    return binary_int(f->g, x->op, a, b, in);
}

static LLVMValueRef emit_const(Gen *g, const Lx *x)
{
    double v = dtype_round(x->dt, x->f);
    if (is_float(x->dt))
        return LLVMConstReal(g->f32, v);
    return LLVMConstInt(reg_type(g, x->dt), (unsigned long long)(int64_t)v, 1);
}

/* A load only a select's arm uses may be out of its buffer when that arm is not taken
 * (lowering's concat and pad do that): its index is clamped into the buffer. */
static LLVMValueRef emit_load(Fn *f, int id, const Lx *x)
{
    Gen *g = f->g;
    DType dt = g->p->buf[x->i].dt;
    LLVMValueRef idx = f->val[x->a];
    if (!(f->flag[id] & FL_SURE)) {
        LLVMTypeRef t = g->i64;
        LLVMValueRef last[2] = {idx, LLVMBuildNSWSub(g->b, f->numel[x->i], LLVMConstInt(t, 1, 0), "")};
        LLVMValueRef lo[2] = {gen_intrinsic(g, g->b, "llvm.smin", &t, 1, last, 2), LLVMConstInt(t, 0, 0)};
        idx = gen_intrinsic(g, g->b, "llvm.smax", &t, 1, lo, 2);
    }
    LLVMValueRef inst, v = mem_load(g, dt, fn_buffer(f, (int)x->i), idx, &inst);
    fn_mark(f, inst, (int)x->i);
    return v;
}

LLVMValueRef expr_emit(Fn *f, int id)
{
    Gen *g = f->g;
    const Lx *x = &f->k->lx[id];
    LLVMValueRef idx;
    switch (x->kind) {
    case LX_INT: return LLVMConstInt(g->i64, (unsigned long long)x->i, 1);
    case LX_FLOAT: return emit_const(g, x);
    case LX_SYM:
        idx = LLVMConstInt(g->i64, (unsigned long long)x->i, 0);
        return LLVMBuildLoad2(g->b, g->i64, LLVMBuildInBoundsGEP2(g->b, g->i64, f->syms, &idx, 1, ""), "");
    case LX_VAR: return f->var[x->i];
    case LX_LOAD: return emit_load(f, id, x);
    case LX_UNARY: return emit_unary(f, x);
    case LX_BINARY: return emit_binary(f, x);
    case LX_IDIV: return LLVMBuildUDiv(g->b, f->val[x->a], f->val[x->b], "");
    case LX_IMOD: return LLVMBuildURem(g->b, f->val[x->a], f->val[x->b], "");
    case LX_SELECT: return LLVMBuildSelect(g->b, f->val[x->a], f->val[x->b], f->val[x->c], "");
    case LX_CAST: return expr_convert(g, f->val[x->a], f->k->lx[x->a].dt, x->dt);
    case LX_RAND:
        return expr_round(g, math_rand(g, (uint64_t)x->i, (uint64_t)x->j, f->val[x->a], f->val[x->b]),
                          x->dt);
    case LX_ACC: return f->acc[x->i];
    default: return gen_fail(g, f->name, "expression %d has unknown kind %d", id, x->kind);
    }
}
