/* rng.c — Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
 * Counter-based: element i of stream (seed, offset) at rng step s is a pure function of
 * (seed, offset + i, s), so every backend and every thread draws the same numbers. */
#include <math.h>

#include "ir.h"

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
        uint32_t n[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
        for (int j = 0; j < 4; j++)
            c[j] = n[j];
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    for (int j = 0; j < 4; j++)
        out[j] = c[j];
}

/* The 128-bit counter is (counter, step), the key is the seed; words low first. The step
 * takes the high words so that step 0 draws what coil drew before steps existed. */
void philox4x32_step(uint64_t seed, uint64_t counter, uint64_t step, uint32_t out[4])
{
    uint32_t c[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), (uint32_t)step,
                     (uint32_t)(step >> 32)};
    uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox4x32_10(c, k, out);
}

void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4])
{
    philox4x32_step(seed, counter, 0, out);
}

/* 24 random bits, so the value is exact in f32 and every backend compares the
 * same number against a dropout probability. */
double philox_uniform_step(uint64_t seed, uint64_t step, uint64_t offset, uint64_t index)
{
    uint32_t r[4];
    philox4x32_step(seed, offset + index, step, r);
    return (double)(r[0] >> 8) * 0x1p-24;
}

double philox_uniform(uint64_t seed, uint64_t offset, uint64_t index)
{
    return philox_uniform_step(seed, 0, offset, index);
}

double philox_normal(uint64_t seed, uint64_t offset, uint64_t index)
{
    uint32_t r[4];
    philox4x32(seed, offset + index, r);
    double u1 = ((double)r[0] + 1.0) * 0x1p-32; /* (0, 1]: log is finite */
    double u2 = (double)r[1] * 0x1p-32;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
