/* attn_avx512.c - the attention kernels of attn.h on AVX-512 registers:
 * the softmax and the mix of the AVX2 kernels (row blocks kept in L1 for
 * every head, eight FMA chains in flight) with sixteen lanes, and the
 * scores of many heads sixteen rows at a time, in the written order of
 * docs/formats.md; the scores of a few heads are the AVX2 kernel's.
 *
 * Why the same bits: the mix and the softmax are lane-wise (a lane is a
 * dimension, or a position), so wider registers change no operation of
 * any lane; the scores of many heads are lane-wise too once the rows are
 * transposed (a lane is a row, and each of its 32 partial sums and its
 * tree are the text's, one register each). */
#include <stdint.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/attn_x86.h"
#include "cpu/exp_avx512.h"
#include "cpu/fsum.h"
#include "cpu/mask16.h"
#include "cpu/silu.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx2,fma")))
#define INL static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")

/* Heads below which the scores are the AVX2 kernel's: a 64-dimension
 * head's score is 4 FMAs on AVX-512 registers and a 32-lane tree whose
 * shuffles bound it; with 8 FMAs on AVX2 registers and tree8x8 it measured
 * 1.4 times faster. From this many heads (a block of tokens in prefill),
 * sixteen rows are transposed once for all of them and a lane is a row:
 * each partial sum's chain and the tree then run lane-wise, with no
 * shuffle per score. */
#define SC16_MIN_G 8

/* Row x of the block of r rows at k (stride elements), dims [i0, i0 + 16)
 * as floats (bf16 widened exactly); dims from d, and rows from r, are 0. */
AVX512 INL __m512 row16(const void *k, coli__dtype dt, size_t stride, int x, int r, int i0, int d)
{
    if (x >= r)
        return _mm512_setzero_ps();
    const __mmask16 m = coli__lanes16(0, d - i0);
    if (dt == COLI_DT_BF16) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)k + (size_t)x * stride + (size_t)i0);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    return _mm512_maskz_loadu_ps(m, (const float *)k + (size_t)x * stride + (size_t)i0);
}

/* The permutations of transpose_rows' stages: for the stage of blocks of
 * d (8, 4, 2, 1), the new row x (x & d == 0) takes lanes c of row x, or
 * c - d of row x + d where c & d (16 + : the second operand); the new row
 * x + d takes c + d of row x, or c of row x + d where c & d. */
static const int32_t g_tlo[4][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
    {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
    {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
    {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
};
static const int32_t g_thi[4][16] = {
    {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
    {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
    {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
    {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
};

/* kt[i][x] = row x's dim i, i < hd (hd % 8 == 0), x < 16: sixteen
 * dimensions at a time, by four stages that swap the off-diagonal blocks
 * of 8, 4, 2 and 1. */
AVX512 static void transpose_rows(float *kt, const void *k, coli__dtype dt, size_t stride, int r, int hd)
{
    __m512i il[4], ih[4];
    for (int s = 0; s < 4; s++) {
        il[s] = _mm512_loadu_si512((const void *)g_tlo[s]);
        ih[s] = _mm512_loadu_si512((const void *)g_thi[s]);
    }
    for (int i0 = 0; i0 < hd; i0 += 16) {
        __m512 v[16];
        UNROLL for (int x = 0; x < 16; x++)
            v[x] = row16(k, dt, stride, x, r, i0, hd);
        UNROLL for (int s = 0; s < 4; s++) {
            const int d = 8 >> s;
            UNROLL for (int x = 0; x < 16; x++)
                if (!(x & d)) {
                    const __m512 a = v[x], b = v[x + d];
                    v[x] = _mm512_permutex2var_ps(a, il[s], b);
                    v[x + d] = _mm512_permutex2var_ps(a, ih[s], b);
                }
        }
        const int nc = hd - i0 < 16 ? hd - i0 : 16;
        UNROLL for (int c = 0; c < 16; c++)
            if (c < nc)
                _mm512_store_ps(kt + (size_t)(i0 + c) * 16, v[c]);
    }
}

/* The partial sum P_l of sixteen rows (a lane a row): +0, then fma over
 * i = l, l + 32, ... < hd, in increasing i. */
AVX512 INL __m512 chain16(const float *qh, const float *kt, int l, int hd)
{
    __m512 p = _mm512_setzero_ps();
    for (int i = l; i < hd; i += 32)
        p = _mm512_fmadd_ps(_mm512_set1_ps(qh[i]), _mm512_load_ps(kt + (size_t)i * 16), p);
    return p;
}

/* dot(q_h, k_x) of sixteen transposed rows, a lane a row: every P_l,
 * then the tree. hd is a constant where the caller inlines it so. */
AVX512 INL __m512 tree16(const float *qh, const float *kt, int hd)
{
    __m512 P[32];
    UNROLL for (int l = 0; l < 32; l++)
        P[l] = chain16(qh, kt, l, hd);
    __m512 u[8];
    UNROLL for (int l = 0; l < 8; l++) /* u_l = (P_l + P_l+16) + (P_l+8 + P_l+24) */
        u[l] = _mm512_add_ps(_mm512_add_ps(P[l], P[l + 16]), _mm512_add_ps(P[l + 8], P[l + 24]));
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(u[0], u[4]), _mm512_add_ps(u[2], u[6])),
                         _mm512_add_ps(_mm512_add_ps(u[1], u[5]), _mm512_add_ps(u[3], u[7])));
}

AVX512 static void scores_avx512(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n,
                                 float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    if (g < SC16_MIN_G || hd % 8 != 0 || hd > SC_MAXD) {
        coli__attn_kernels_avx2()->scores(q, g, hd, k, dt, stride, n, scale, out, ostride, mx, nh);
        return;
    }
    _Alignas(64) float kt[SC_MAXD * 16];
    const __m512 vs = _mm512_set1_ps(scale);
    const size_t es = elem_size(dt), rb = stride * es;
    for (int j = 0; j < n; j += 16) {
        const int r = n - j < 16 ? n - j : 16;
        if (j + SC_AHEAD < n) /* the rows SC_AHEAD on */
            prefetch_rows((const char *)k + (size_t)(j + SC_AHEAD) * rb, rb,
                          n - j - SC_AHEAD < 16 ? n - j - SC_AHEAD : 16, (size_t)hd * es);
        transpose_rows(kt, (const char *)k + (size_t)j * rb, dt, stride, r, hd);
        for (int h = 0; h < g; h++) {
            const int rh = nh && nh[h] - j < r ? nh[h] - j : r; /* this head's rows of the block */
            if (rh <= 0)
                continue;
            const float *qh = q + (size_t)h * (size_t)hd;
            const __m512 a = _mm512_mul_ps(hd == 64 ? tree16(qh, kt, 64) : tree16(qh, kt, hd), vs);
            const __mmask16 m = coli__lanes16(0, rh);
            _mm512_mask_storeu_ps(out + (size_t)h * ostride + (size_t)j, m, a);
            const float am = _mm512_mask_reduce_max_ps(m, a);
            mx[h] = am > mx[h] ? am : mx[h];
        }
    }
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
