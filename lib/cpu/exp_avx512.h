/* exp_avx512.h - lib/cpu/silu.h's exp sixteen lanes at a time (internal),
 * for the AVX-512 softmax of attention.
 *
 * exp_avx2.h's steps on wider registers: the same +, -, * and / in the same
 * order (the library is built with -ffp-contract=off, so none is fused),
 * the same constants and the three special cases blended in, so every lane
 * is coli__exp_f32's result bit for bit (tests/test_cpu_kernels.c). */
#ifndef COLI_EXP_AVX512_H
#define COLI_EXP_AVX512_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

__attribute__((target("avx512f"))) static inline __m512 coli__exp16(__m512 x)
{
    __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269502162933349609375f));
    __m512 big = _mm512_add_ps(t, _mm512_set1_ps(12582912.0f));
    __m512 nf = _mm512_sub_ps(big, _mm512_set1_ps(12582912.0f));
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(nf, _mm512_set1_ps(0.693115234375f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(nf, _mm512_set1_ps(3.19461833e-05f)));
    __m512 p = _mm512_set1_ps(1.98412701e-04f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.38888892e-03f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.33333377e-03f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.16666679e-02f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.66666672e-01f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    /* lanes out of [-87, 88] or NaN have a meaningless n: replaced below */
    __m512i n = _mm512_cvttps_epi32(nf);
    __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
    __m512 e = _mm512_mul_ps(p, two_n);
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ), e, _mm512_setzero_ps());
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_GT_OQ), e, _mm512_set1_ps(HUGE_VALF));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), e, x);
}
#endif

#endif
