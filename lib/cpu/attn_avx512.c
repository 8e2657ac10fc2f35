/* attn_avx512.c - the attention kernels of attn.h on AVX-512 registers:
 * the AVX2 kernels' walk (eight rows' scores through one shuffle tree, row
 * blocks kept in L1 for every head, eight FMA chains in flight) with
 * sixteen lanes, in the written order of docs/formats.md.
 *
 * Why the same bits: a score's 32 partial sums P_0..31 sit in two
 * registers, P_0..15 and P_16..31, each lane the chain of one P in
 * increasing order; their sum is (P_l + P_l+16) for lanes 0-7 next to
 * (P_l+8 + P_l+24) for lanes 8-15, and the halves added give the AVX2
 * kernels' u. The mix and the softmax are lane-wise (a lane is a dimension,
 * or a position), so wider registers change no operation of any lane. */
#include <stdint.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/attn_x86.h"
#include "cpu/exp_avx512.h"
#include "cpu/fsum.h"
#include "cpu/p32x4_avx512.h"
#include "cpu/silu.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

/* The u of a score from P_0..15 (a) and P_16..31 (b). */
AVX512 static inline __m256 fold_ab(__m512 a, __m512 b)
{
    __m512 w = _mm512_add_ps(a, b);
    return _mm256_add_ps(_mm512_castps512_ps256(w),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)));
}

/* The u of one head's q against eight rows, hd % 32 == 0: four at a time. */
AVX512 static void u8_rows16(const float *q, const float *rows, size_t rs, int hd, __m256 *U)
{
    for (int half = 0; half < 2; half++) {
        __m512 a[4], b[4];
        coli__p32x4(q, rows + (size_t)(4 * half) * rs, rs, hd, a, b);
        for (int x = 0; x < 4; x++)
            U[4 * half + x] = fold_ab(a[x], b[x]);
    }
}

AVX512 static void scores_avx512(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n,
                                 float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    if (hd % 32 != 0 || hd > SC_MAXD) {
        coli__attn_kernels_avx2()->scores(q, g, hd, k, dt, stride, n, scale, out, ostride, mx, nh);
        return;
    }
    scores_blocks(u8_rows16, q, g, hd, k, dt, stride, n, scale, out, ostride, mx, nh);
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
COLI_DEFINE_MIX(mix16_nv8, 8, AVX512, tile_end16)
COLI_DEFINE_MIX(mix16_nv4, 4, AVX512, tile_end16)
COLI_DEFINE_MIX(mix16_nv2, 2, AVX512, tile_end16)
COLI_DEFINE_MIX(mix16_nv1, 1, AVX512, tile_end16)
#undef VEC_
#undef W_
#undef LOADU_
#undef STOREU_
#undef FMADD_
#undef SET1_

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

static const coli__attnk g_avx512 = {scores_avx512, softmax_avx512, mix_avx512};

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
