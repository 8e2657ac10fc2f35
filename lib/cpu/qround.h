/* qround.h - the activation quantization of docs/formats.md, value by
 * value: one definition for the CPU (lib/cpu/quant.c) and the GPU tier
 * (lib/gpu/backend.cu), so that both round to the same int8 (internal).
 *
 * A group of 32 activations whose largest magnitude is amax (found by
 * each side its own way: the maximum is exact in any order) has the scale
 * s = amax / 127, and value a the quant rne(a * t), t = 127 / amax. Each
 * product, sum and quotient is its own IEEE binary32 operation, never
 * fused (the library is built with -ffp-contract=off, the GPU side with
 * --fmad=false or -ffp-contract=off). Plain C99/C++. */
#ifndef COLI_QROUND_H
#define COLI_QROUND_H

#include <float.h>
#include <math.h>

#include "cpu/hostdev.h"

/* s of a group: 0 for an all-zero group. */
static inline COLI__HD float coli__qact_scale(float amax)
{
    return amax == 0.0f ? 0.0f : amax / 127.0f;
}

/* t of a group, amax != 0; +inf when amax < 127 / FLT_MAX. */
static inline COLI__HD float coli__qact_mul(float amax)
{
    return 127.0f / amax;
}

/* Whether t is finite, i.e. coli__qact_round applies, else
 * coli__qact_round_inf. */
static inline COLI__HD int coli__qact_finite(float t)
{
    return t <= FLT_MAX;
}

/* The quant of a for a finite t: |a * t| <= 127 up to one rounding, so
 * the result is within [-127, 127]. rne of |v| < 2^22 is (v + 1.5 * 2^23)
 * - 1.5 * 2^23 in the default rounding mode (which the library never
 * changes): exact, and cheap and vectorisable, unlike nearbyintf. */
static inline COLI__HD int coli__qact_round(float a, float t)
{
    float v = a * t;
    float big = v + 12582912.0f; /* 1.5 * 2^23 */
    float r = big - 12582912.0f;
    return (int)r;
}

/* The quant of a for t = +inf: zeros give 0 * inf = NaN, taken as 0; the
 * other values saturate at +-127. */
static inline COLI__HD int coli__qact_round_inf(float a, float t)
{
    float v = a * t;
    return v != v ? 0 : v >= 127.0f ? 127 : v <= -127.0f ? -127 : (int)rintf(v);
}

#endif
