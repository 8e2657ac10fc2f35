/* p32x4_avx512.h - the partial sums of four float products that share
 * one operand, on AVX-512 registers (internal; lib/cpu/kernels.c and
 * lib/cpu/attn_avx512.c).
 *
 * Product x of s with row x (r + x rs): register a[x] lane l is the chain
 * of P_l, b[x] lane l that of P_l+16, over the whole blocks of 32 below n
 * (docs/formats.md, "f32, bf16, f16": P_i mod 32, each in increasing i),
 * from +0. Eight chains in flight, s loaded once for the four. */
#ifndef COLI_P32X4_AVX512_H
#define COLI_P32X4_AVX512_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>

__attribute__((target("avx512f"), always_inline)) static inline void coli__p32x4(const float *s, const float *r,
                                                                                size_t rs, int n, __m512 *a,
                                                                                __m512 *b)
{
    const float *r1 = r + rs, *r2 = r1 + rs, *r3 = r2 + rs;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int i = 0; i + 32 <= n; i += 32) {
        const __m512 sa = _mm512_loadu_ps(s + i), sb = _mm512_loadu_ps(s + i + 16);
        a0 = _mm512_fmadd_ps(sa, _mm512_loadu_ps(r + i), a0);
        b0 = _mm512_fmadd_ps(sb, _mm512_loadu_ps(r + i + 16), b0);
        a1 = _mm512_fmadd_ps(sa, _mm512_loadu_ps(r1 + i), a1);
        b1 = _mm512_fmadd_ps(sb, _mm512_loadu_ps(r1 + i + 16), b1);
        a2 = _mm512_fmadd_ps(sa, _mm512_loadu_ps(r2 + i), a2);
        b2 = _mm512_fmadd_ps(sb, _mm512_loadu_ps(r2 + i + 16), b2);
        a3 = _mm512_fmadd_ps(sa, _mm512_loadu_ps(r3 + i), a3);
        b3 = _mm512_fmadd_ps(sb, _mm512_loadu_ps(r3 + i + 16), b3);
    }
    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
    b[0] = b0, b[1] = b1, b[2] = b2, b[3] = b3;
}
#endif

#endif
