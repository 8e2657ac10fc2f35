/* attn_avx512.c - the attention kernels of attn.h on AVX-512 registers:
 * the softmax and the mix of the AVX2 kernels (row blocks kept in L1 for
 * every head, eight FMA chains in flight) with sixteen lanes, in the
 * written order of docs/formats.md; the scores are the AVX2 kernel's.
 *
 * Why the same bits: the mix and the softmax are lane-wise (a lane is a
 * dimension, or a position), so wider registers change no operation of
 * any lane. */
#include <stdint.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/attn_x86.h"
#include "cpu/exp_avx512.h"
#include "cpu/fsum.h"
#include "cpu/silu.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

/* The scores stay the AVX2 kernel's: a 64-dimension head's score is 4
 * FMAs on AVX-512 registers and a 32-lane tree whose shuffles bound it;
 * with 8 FMAs on AVX2 registers and tree8x8 it measured 1.4 times faster
 * (the tree's first level is then the registers' own addition). */
static void scores_avx2_table(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n,
                              float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    coli__attn_kernels_avx2()->scores(q, g, hd, k, dt, stride, n, scale, out, ostride, mx, nh);
}

/* e and each tile's sum32 sixteen lanes at a time: positions j .. j + 15
 * (j % 16 == 0) feed P_{j mod 32} .. +15, the registers P_0..15 and
 * P_16..31 of the AVX2 kernel's four, lane for lane. */
AVX512 static void softmax_avx512(float *a, int n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    float Z = 0.0f;
    for (int t0 = 0; t0 < n; t0 += COLI__ATTN_TILE) {
        const int te = n - t0 < COLI__ATTN_TILE ? n : t0 + COLI__ATTN_TILE;
        __m512 P[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        int j = t0;
        for (; j + 16 <= te; j += 16) {
            __m512 e = coli__exp16(_mm512_sub_ps(_mm512_loadu_ps(a + j), vm));
            _mm512_storeu_ps(a + j, e);
            P[(j >> 4) & 1] = _mm512_add_ps(P[(j >> 4) & 1], e);
        }
        float Ps[32];
        _mm512_storeu_ps(Ps, P[0]);
        _mm512_storeu_ps(Ps + 16, P[1]);
        for (; j < te; j++) {
            a[j] = coli__exp_f32(a[j] - m);
            Ps[j & 31] = Ps[j & 31] + a[j];
        }
        float z = coli__fold32(Ps);
        Z = t0 == 0 ? z : Z + z;
    }
    const __m512 vi = _mm512_set1_ps(1.0f / Z);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(a + j, _mm512_mul_ps(_mm512_loadu_ps(a + j), vi));
    const float inv = 1.0f / Z;
    for (; j < n; j++)
        a[j] = a[j] * inv;
}

COLI_DEFINE_TILE_END(tile_end16, AVX512, 16, __m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps)

#define VEC_ __m512
#define W_ 16
#define LOADU_ _mm512_loadu_ps
#define STOREU_ _mm512_storeu_ps
#define FMADD_ _mm512_fmadd_ps
#define SET1_ _mm512_set1_ps
COLI_DEFINE_MIXES(AVX512, tile_end16, mix16_nv8, mix16_nv4, mix16_nv2, mix16_nv1)

AVX512 static void mix_avx512(float *out, size_t ostride, int g, int dims, const float *w, size_t wstride,
                              const void *v, coli__dtype dt, size_t stride, int n, const int *nh)
{
    static const mix_slice_fn fn[] = {mix16_nv8, mix16_nv4, mix16_nv2, mix16_nv1};
    static const int width[] = {128, 64, 32, 16};
    const int vd = dims - dims % 16;
    mix_slices(fn, width, 4, out, ostride, g, vd, w, wstride, v, dt, stride, n, nh);
    if (vd < dims) /* the last dims % 16: the AVX2 kernel's (8 lanes, then plain C) */
        coli__attn_kernels_avx2()->mix(out + vd, ostride, g, dims - vd, w, wstride,
                                        (const char *)v + (size_t)vd * elem_size(dt), dt, stride, n, nh);
}

static const coli__attnk g_avx512 = {scores_avx2_table, softmax_avx512, mix_avx512};

const coli__attnk *coli__attn_kernels_avx512(void)
{
    return &g_avx512;
}
#else
const coli__attnk *coli__attn_kernels_avx512(void)
{
    return NULL;
}
#endif
