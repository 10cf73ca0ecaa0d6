/* dtype.c — element types: names, sizes, rounding a value to what a dtype holds,
 * and loads/stores of native elements (f16 and bf16 kept as their 16 bits). */
#include <math.h>
#include <string.h>

#include "ir.h"

const DTypeInfo dtype_info[DT_COUNT] = {
    [DT_F32] = {"f32", 4, true, "<f4"},  [DT_F16] = {"f16", 2, true, "<f2"},
    [DT_BF16] = {"bf16", 2, true, "<u2"}, [DT_I8] = {"i8", 1, false, "|i1"},
    [DT_I32] = {"i32", 4, false, "<i4"},  [DT_I64] = {"i64", 8, false, "<i8"},
    [DT_BOOL] = {"bool", 1, false, "|b1"},
};

bool dtype_parse(const char *s, size_t n, DType *out)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strlen(dtype_info[i].name) == n && memcmp(dtype_info[i].name, s, n) == 0) {
            *out = (DType)i;
            return true;
        }
    return false;
}

/* Round v to a binary float format with `mant` fraction bits and normal exponents
 * [emin, emax], ties to even, straight from f64 (no double rounding through f32). */
static double round_format(double v, int mant, int emin, int emax)
{
    if (v == 0 || !isfinite(v))
        return v;
    int e = ilogb(v);
    double quantum = ldexp(1.0, (e < emin ? emin : e) - mant);
    double r = nearbyint(v / quantum) * quantum;
    if (fabs(r) >= ldexp(1.0, emax + 1))
        return copysign(INFINITY, v);
    return r;
}

/* Truncate toward zero, then wrap to `bits` two's complement bits. NaN gives 0. */
static double wrap_int(double v, int bits)
{
    if (isnan(v))
        return 0;
    v = trunc(v);
    if (v >= 0x1p63)
        v = 0x1p63 - 1024;
    if (v < -0x1p63)
        v = -0x1p63;
    int64_t i = (int64_t)v;
    if (bits == 64)
        return (double)i;
    uint64_t mask = (UINT64_C(1) << bits) - 1, u = (uint64_t)i & mask;
    if (u >> (bits - 1))
        return (double)(int64_t)(u | ~mask);
    return (double)u;
}

double dtype_round(DType dt, double v)
{
    switch (dt) {
    case DT_F32: return (double)(float)v;
    case DT_F16: return round_format(v, 10, -14, 15);
    case DT_BF16: return round_format(v, 7, -126, 127);
    case DT_I8: return wrap_int(v, 8);
    case DT_I32: return wrap_int(v, 32);
    case DT_I64: return wrap_int(v, 64);
    case DT_BOOL: return v != 0;
    default: return v;
    }
}

uint16_t f32_to_bf16(float f)
{
    float r = (float)dtype_round(DT_BF16, f);
    if (isnan(r))
        return signbit(r) ? 0xffc0 : 0x7fc0;
    uint32_t u;
    memcpy(&u, &r, 4);
    return (uint16_t)(u >> 16);
}

float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_f16(float f)
{
    double r = dtype_round(DT_F16, f);
    uint16_t sign = signbit(r) ? 0x8000 : 0;
    double a = fabs(r);
    if (isnan(r))
        return sign | 0x7e00;
    if (isinf(a))
        return sign | 0x7c00;
    if (a < 0x1p-14)
        return sign | (uint16_t)(a * 0x1p24); /* subnormal: exact after rounding */
    int e = ilogb(a);
    uint16_t frac = (uint16_t)((ldexp(a, -e) - 1.0) * 1024.0);
    return sign | (uint16_t)((e + 15) << 10) | frac;
}

float f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 0x1f, frac = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(frac, -24);
    else if (e == 31)
        v = frac ? NAN : INFINITY;
    else
        v = ldexp(1024 + frac, e - 25);
    return (float)((h & 0x8000) ? -v : v);
}

double dtype_load(DType dt, const void *base, int64_t i)
{
    switch (dt) {
    case DT_F32: return ((const float *)base)[i];
    case DT_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    case DT_I8: return ((const int8_t *)base)[i];
    case DT_I32: return ((const int32_t *)base)[i];
    case DT_I64: return (double)((const int64_t *)base)[i];
    case DT_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return 0;
    }
}

void dtype_store(DType dt, void *base, int64_t i, double v)
{
    v = dtype_round(dt, v);
    switch (dt) {
    case DT_F32: ((float *)base)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)base)[i] = f32_to_f16((float)v); break;
    case DT_BF16: ((uint16_t *)base)[i] = f32_to_bf16((float)v); break;
    case DT_I8: ((int8_t *)base)[i] = (int8_t)v; break;
    case DT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case DT_I64: ((int64_t *)base)[i] = (int64_t)v; break;
    case DT_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: break;
    }
}
