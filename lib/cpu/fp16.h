/* fp16.h - bf16 and IEEE binary16 values widened to f32, exactly, and f32
 * rounded to bf16, one definition for the CPU and the GPU tier (internal).
 * Scales of the quantized formats, bf16/f16 weights and a bf16 KV cache go
 * through these. */
#ifndef COLI_FP16_H
#define COLI_FP16_H

#include <stdint.h>
#include <string.h>

#include "cpu/hostdev.h"

static inline COLI__HD float coli__bf16_bits_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f32 to bf16 rounded to nearest, ties to even (an overflow rounds to
 * infinity, as IEEE rounding does); a NaN stays a (quiet) NaN. */
static inline COLI__HD uint16_t coli__f32_to_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline COLI__HD float coli__f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    float f;
    if (e == 0) {
        /* zero or subnormal: man * 2^-24, exact in f32 */
        f = (float)man * 5.9604644775390625e-8f;
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else if (e == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((e + 112u) << 23) | (man << 13);
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

/* An FP8 e4m3 value (the "fn" variant of DeepSeek-V3's checkpoints: bias
 * 7, no infinities, S.1111.111 the only NaN), exactly. */
static inline COLI__HD float coli__f8e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t e = (b >> 3) & 0xfu, man = b & 0x7u;
    uint32_t u;
    float f;
    if (e == 0) {
        /* zero or subnormal: man * 2^-9, exact in f32 */
        f = (float)man * 0.001953125f;
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else if (e == 15 && man == 7) {
        u = sign | 0x7fc00000u;
    } else {
        u = sign | ((e + 120u) << 23) | (man << 20);
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
