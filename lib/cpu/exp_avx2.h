/* exp_avx2.h - lib/cpu/silu.h's exp eight lanes at a time (internal), for
 * the kernel files that vectorise SwiGLU and the softmax of attention.
 *
 * The same +, -, * and / in the same order (no FMA: the target has none),
 * the same constants, and the three special cases blended in, so every lane
 * is coli__exp_f32's result bit for bit (tests/test_cpu_kernels.c). */
#ifndef COLI_EXP_AVX2_H
#define COLI_EXP_AVX2_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

__attribute__((target("avx2"))) static inline __m256 coli__exp8(__m256 x)
{
    __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269502162933349609375f));
    __m256 big = _mm256_add_ps(t, _mm256_set1_ps(12582912.0f));
    __m256 nf = _mm256_sub_ps(big, _mm256_set1_ps(12582912.0f));
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(nf, _mm256_set1_ps(0.693115234375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, _mm256_set1_ps(3.19461833e-05f)));
    __m256 p = _mm256_set1_ps(1.98412701e-04f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.38888892e-03f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.33333377e-03f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.16666679e-02f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.66666672e-01f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    /* lanes out of [-87, 88] or NaN have a meaningless n: replaced below */
    __m256i n = _mm256_cvttps_epi32(nf);
    __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
    __m256 e = _mm256_mul_ps(p, two_n);
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ));
    e = _mm256_blendv_ps(e, _mm256_set1_ps(HUGE_VALF), _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

#endif
