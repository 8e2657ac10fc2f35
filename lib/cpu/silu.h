/* silu.h - the SwiGLU activation of docs/formats.md, and the sigmoid
 * router's score and group score, one definition for the CPU and the GPU
 * tier (internal).
 *
 * libm's expf and a device's __expf round differently, so an expert's
 * output would depend on where it ran. This exp uses only IEEE binary32
 * +, -, * and / (each rounded to nearest even, never fused: the library is
 * built with -ffp-contract=off, the GPU side with --fmad=false or
 * -ffp-contract=off) and integer bit operations, so every compiler and
 * device gives the same bits. Accuracy: within 2 ulp of exp on the range
 * it computes. Plain C99/C++ (included by lib/gpu/backend.cu). */
#ifndef COLI_SILU_H
#define COLI_SILU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/hostdev.h"

/* e^x: 0 below -87, +inf above 88 (silu needs no more: x / (1 + e^-x)
 * is x there to the last bit, or -0 / 0). */
static inline COLI__HD float coli__exp_f32(float x)
{
    if (x < -87.0f)
        return 0.0f;
    if (x > 88.0f)
        return HUGE_VALF;
    if (!(x == x))
        return x;
    /* n = rne(x / ln 2) by the 1.5 * 2^23 trick (|x / ln 2| < 2^22) */
    float t = x * 1.44269502162933349609375f;
    float big = t + 12582912.0f;
    float nf = big - 12582912.0f;
    /* r = x - n ln 2 in two steps (Cody-Waite); ln2_hi has 12 significant
     * bits, so n * ln2_hi is exact for |n| <= 127 */
    float r = x - nf * 0.693115234375f;
    r = r - nf * 3.19461833e-05f;
    /* e^r on |r| <= ln2 / 2: Taylor to degree 7, Horner */
    float p = 1.98412701e-04f;
    p = p * r + 1.38888892e-03f;
    p = p * r + 8.33333377e-03f;
    p = p * r + 4.16666679e-02f;
    p = p * r + 1.66666672e-01f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* times 2^n, n in [-126, 127]: a normal power of two */
    int32_t n = (int32_t)nf;
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

/* 1 / (1 + e^-x): the sigmoid router's score. */
static inline COLI__HD float coli__sigmoid(float x)
{
    return 1.0f / (1.0f + coli__exp_f32(-x));
}

/* A group's score for the sigmoid router: fed the group's biased scores
 * in turn, it keeps the two largest; the score is their sum (the only one
 * of a group of one expert). Starts as {-inf, -inf}. */
typedef struct coli__top2 {
    float a, c; /* the largest, the second */
} coli__top2;

static inline COLI__HD void coli__top2_add(coli__top2 *t, float x)
{
    if (x > t->a) {
        t->c = t->a;
        t->a = x;
    } else if (x > t->c) {
        t->c = x;
    }
}

static inline COLI__HD float coli__top2_score(const coli__top2 *t, int n)
{
    return n > 1 ? t->a + t->c : t->a;
}

/* silu(g) * u, the SwiGLU of a gate and an up projection. */
static inline COLI__HD float coli__swiglu(float g, float u)
{
    return g / (1.0f + coli__exp_f32(-g)) * u;
}

#endif
