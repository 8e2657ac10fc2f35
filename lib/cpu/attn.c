/* attn.c - the attention kernels of attn.h: scores, softmax and mix over
 * the cached rows of one KV head for all the query heads of its group, in
 * the written order of docs/formats.md. The plain C versions are the text
 * as written; the AVX2 ones walk rows, heads and dimensions differently
 * (eight rows' scores at once, row blocks kept in L1 for every head, eight
 * FMA chains in flight) and keep every partial sum's order, so every value
 * has the same bits (tests/test_cpu_kernels.c checks them against the text
 * for many shapes). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/attn_x86.h"
#include "cpu/exp_avx2.h"
#include "cpu/fp16.h"
#include "cpu/fsum.h"
#include "cpu/silu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COLI_X86 1
#else
#define COLI_X86 0
#endif

/* Element at of a row block of dt. */
static inline float elem(const void *base, coli__dtype dt, size_t at)
{
    return dt == COLI_DT_BF16 ? coli__bf16_bits_to_f32(((const uint16_t *)base)[at]) : ((const float *)base)[at];
}

/* ---- plain C: the text as written ------------------------------------- */

static void scores_scalar(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n,
                          float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    for (int j = 0; j < n; j++)
        for (int h = 0; h < g; h++) {
            if (nh && j >= nh[h])
                continue;
            const float *qh = q + (size_t)h * (size_t)hd;
            float P[32] = {0};
            for (int i = 0; i < hd; i++)
                P[i & 31] = fmaf(qh[i], elem(k, dt, (size_t)j * stride + (size_t)i), P[i & 31]);
            float a = coli__fold32(P) * scale;
            out[(size_t)h * ostride + (size_t)j] = a;
            mx[h] = a > mx[h] ? a : mx[h];
        }
}

/* sum32 of a[0..n) (n <= a tile). */
static float sum32_scalar(const float *a, int n)
{
    float P[32] = {0};
    for (int j = 0; j < n; j++)
        P[j & 31] = P[j & 31] + a[j];
    return coli__fold32(P);
}

static void softmax_scalar(float *a, int n, float m)
{
    for (int j = 0; j < n; j++)
        a[j] = coli__exp_f32(a[j] - m);
    float Z = 0.0f;
    for (int t0 = 0; t0 < n; t0 += COLI__ATTN_TILE) {
        float z = sum32_scalar(a + t0, n - t0 < COLI__ATTN_TILE ? n - t0 : COLI__ATTN_TILE);
        Z = t0 == 0 ? z : Z + z;
    }
    float inv = 1.0f / Z;
    for (int j = 0; j < n; j++)
        a[j] = a[j] * inv;
}

/* Dimensions in chunks of MIX_DIMS, rows in order: O[j mod 8][i] is one
 * chain in increasing j within a tile whatever the loops around it. */
#define MIX_DIMS 64

static void mix_scalar(float *out, size_t ostride, int g, int dims, const float *w, size_t wstride, const void *v,
                       coli__dtype dt, size_t stride, int n_all, const int *nh)
{
    for (int h = 0; h < g; h++)
        for (int base = 0, n = nh ? nh[h] : n_all; base < dims; base += MIX_DIMS) {
            int m = dims - base < MIX_DIMS ? dims - base : MIX_DIMS;
            float *o = out + (size_t)h * ostride + (size_t)base;
            for (int t0 = 0; t0 < n; t0 += COLI__ATTN_TILE) {
                int te = n - t0 < COLI__ATTN_TILE ? n : t0 + COLI__ATTN_TILE;
                float O[8][MIX_DIMS] = {{0}};
                for (int j = t0; j < te; j++) {
                    float wj = w[(size_t)h * wstride + (size_t)j];
                    size_t r = (size_t)j * stride + (size_t)base;
                    for (int i = 0; i < m; i++)
                        O[j & 7][i] = fmaf(wj, elem(v, dt, r + (size_t)i), O[j & 7][i]);
                }
                for (int i = 0; i < m; i++) {
                    float P[8];
                    for (int k = 0; k < 8; k++)
                        P[k] = O[k][i];
                    float U = coli__fold8(P);
                    o[i] = t0 == 0 ? U : o[i] + U;
                }
            }
        }
}

static const coli__attnk g_scalar = {scores_scalar, softmax_scalar, mix_scalar};

const coli__attnk *coli__attn_kernels_scalar(void)
{
    return &g_scalar;
}

/* ---- AVX2 + FMA --------------------------------------------------------- */
#if COLI_X86

/* The float product's partial sums over hd % 8 == 0 values: register c
 * holds P_{8c+l}; a short last block leaves the registers it does not
 * reach at +0, as the text's loop leaves those P. Returns the u of the
 * tree: lane l is (P_l + P_l+16) + (P_l+8 + P_l+24). */
AVX2 static inline __m256 dot_u(const float *q, const float *k, int hd)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= hd; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 16), _mm256_loadu_ps(k + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 24), _mm256_loadu_ps(k + i + 24), s3);
    }
    if (i < hd) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), s0);
        if (i + 8 < hd)
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), s1);
        if (i + 16 < hd)
            s2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 16), _mm256_loadu_ps(k + i + 16), s2);
    }
    return _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
}

/* ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7)) of one u. */
AVX2 static inline float tree8(__m256 u)
{
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* tree8 of eight rows' u at once, row r's in lane r: the same additions,
 * gathered by shuffles instead of done one row at a time. */
AVX2 static inline __m256 tree8x8(const __m256 *U)
{
    __m256 a[4];
    for (int p = 0; p < 4; p++) /* [U_2p: u_l + u_l+4 | U_2p+1: the same] */
        a[p] = _mm256_add_ps(_mm256_permute2f128_ps(U[2 * p], U[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(U[2 * p], U[2 * p + 1], 0x31));
    /* rows 0, 2 | 1, 3 (and 4, 6 | 5, 7): (u0 + u4) + (u2 + u6), (u1 + u5) + (u3 + u7) */
    __m256 b0 = _mm256_add_ps(_mm256_shuffle_ps(a[0], a[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(a[0], a[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 b1 = _mm256_add_ps(_mm256_shuffle_ps(a[2], a[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(a[2], a[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* rows 0, 2, 4, 6 | 1, 3, 5, 7: the last addition */
    __m256 t = _mm256_add_ps(_mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

AVX2 static inline float hmax8(__m256 v)
{
    __m256 t = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 1));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, _MM_SHUFFLE(1, 0, 3, 2)));
    t = _mm256_max_ps(t, _mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtss_f32(t);
}

/* dot_u of one head's q against eight rows: what dot_u computes, with q
 * held in registers across the rows where it fits (hd 64), or each part of
 * q loaded once for two rows (hd 128), so that loads do not bound it. */
AVX2 static void u8_rows(const float *q, const float *rows, size_t rs, int hd, __m256 *U)
{
    if (hd == 64) {
        const __m256 q0 = _mm256_loadu_ps(q), q1 = _mm256_loadu_ps(q + 8), q2 = _mm256_loadu_ps(q + 16);
        const __m256 q3 = _mm256_loadu_ps(q + 24), q4 = _mm256_loadu_ps(q + 32), q5 = _mm256_loadu_ps(q + 40);
        const __m256 q6 = _mm256_loadu_ps(q + 48), q7 = _mm256_loadu_ps(q + 56);
        for (int x = 0; x < 8; x++) {
            const float *k = rows + (size_t)x * rs;
            __m256 s0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(k), _mm256_setzero_ps());
            __m256 s1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(k + 8), _mm256_setzero_ps());
            __m256 s2 = _mm256_fmadd_ps(q2, _mm256_loadu_ps(k + 16), _mm256_setzero_ps());
            __m256 s3 = _mm256_fmadd_ps(q3, _mm256_loadu_ps(k + 24), _mm256_setzero_ps());
            s0 = _mm256_fmadd_ps(q4, _mm256_loadu_ps(k + 32), s0);
            s1 = _mm256_fmadd_ps(q5, _mm256_loadu_ps(k + 40), s1);
            s2 = _mm256_fmadd_ps(q6, _mm256_loadu_ps(k + 48), s2);
            s3 = _mm256_fmadd_ps(q7, _mm256_loadu_ps(k + 56), s3);
            U[x] = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
        }
        return;
    }
    if (hd % 32 == 0) {
        for (int x = 0; x < 8; x += 2) {
            const float *ka = rows + (size_t)x * rs, *kb = ka + rs;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int i = 0; i < hd; i += 32) {
                const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
                const __m256 q2 = _mm256_loadu_ps(q + i + 16), q3 = _mm256_loadu_ps(q + i + 24);
                a0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(ka + i), a0);
                b0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kb + i), b0);
                a1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(ka + i + 8), a1);
                b1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kb + i + 8), b1);
                a2 = _mm256_fmadd_ps(q2, _mm256_loadu_ps(ka + i + 16), a2);
                b2 = _mm256_fmadd_ps(q2, _mm256_loadu_ps(kb + i + 16), b2);
                a3 = _mm256_fmadd_ps(q3, _mm256_loadu_ps(ka + i + 24), a3);
                b3 = _mm256_fmadd_ps(q3, _mm256_loadu_ps(kb + i + 24), b3);
            }
            U[x] = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
            U[x + 1] = _mm256_add_ps(_mm256_add_ps(b0, b2), _mm256_add_ps(b1, b3));
        }
        return;
    }
    for (int x = 0; x < 8; x++)
        U[x] = dot_u(q, rows + (size_t)x * rs, hd);
}


/* Eight rows at a time: each head's eight u go through tree8x8, so a
 * score costs no horizontal sum of its own; the rows stay in L1 while
 * every head of the group reads them. */
AVX2 static void scores_avx2(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n,
                             float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    if (hd % 8 != 0 || hd > SC_MAXD) {
        scores_scalar(q, g, hd, k, dt, stride, n, scale, out, ostride, mx, nh);
        return;
    }
    float wide[8 * SC_MAXD] __attribute__((aligned(64)));
    const __m256 vs = _mm256_set1_ps(scale);
    const size_t es = elem_size(dt), rb = stride * es;
    for (int j = 0; j < n; j += 8) {
        int r = n - j < 8 ? n - j : 8;
        if (j + SC_AHEAD < n) /* the rows SC_AHEAD on */
            prefetch_rows((const char *)k + (size_t)(j + SC_AHEAD) * rb, rb,
                          n - j - SC_AHEAD < 8 ? n - j - SC_AHEAD : 8, (size_t)hd * es);
        const float *rows = wide;
        size_t rs = (size_t)hd;
        if (dt == COLI_DT_BF16)
            widen_rows(wide, (const uint16_t *)k + (size_t)j * stride, stride, r, hd);
        else {
            rows = (const float *)k + (size_t)j * stride;
            rs = stride;
        }
        for (int h = 0; h < g; h++) {
            const float *qh = q + (size_t)h * (size_t)hd;
            float *o = out + (size_t)h * ostride + (size_t)j;
            const int rh = nh && nh[h] - j < r ? nh[h] - j : r; /* this head's rows of the block */
            if (rh == 8) {
                __m256 U[8];
                u8_rows(qh, rows, rs, hd, U);
                __m256 s = _mm256_mul_ps(tree8x8(U), vs);
                _mm256_storeu_ps(o, s);
                float m8 = hmax8(s);
                mx[h] = m8 > mx[h] ? m8 : mx[h];
            } else {
                for (int x = 0; x < rh; x++) {
                    float a = tree8(dot_u(qh, rows + (size_t)x * rs, hd)) * scale;
                    o[x] = a;
                    mx[h] = a > mx[h] ? a : mx[h];
                }
            }
        }
    }
}

/* e and each tile's sum32 eight lanes at a time: register c of P holds
 * the partial sums P_{8c+l}, and j = 8 * (4b + c) + l runs through them in
 * order (a tile starts on a multiple of 32). */
AVX2 static void softmax_avx2(float *a, int n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    float Z = 0.0f;
    for (int t0 = 0; t0 < n; t0 += COLI__ATTN_TILE) {
        const int te = n - t0 < COLI__ATTN_TILE ? n : t0 + COLI__ATTN_TILE;
        __m256 P[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        int j = t0;
        for (; j + 8 <= te; j += 8) {
            __m256 e = coli__exp8(_mm256_sub_ps(_mm256_loadu_ps(a + j), vm));
            _mm256_storeu_ps(a + j, e);
            P[(j >> 3) & 3] = _mm256_add_ps(P[(j >> 3) & 3], e);
        }
        float Ps[32];
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(Ps + 8 * c, P[c]);
        for (; j < te; j++) {
            a[j] = coli__exp_f32(a[j] - m);
            Ps[j & 31] = Ps[j & 31] + a[j];
        }
        float z = coli__fold32(Ps);
        Z = t0 == 0 ? z : Z + z;
    }
    const float inv = 1.0f / Z;
    const __m256 vi = _mm256_set1_ps(inv);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(a + j, _mm256_mul_ps(_mm256_loadu_ps(a + j), vi));
    for (; j < n; j++)
        a[j] = a[j] * inv;
}

COLI_DEFINE_TILE_END(mix_tile_end, AVX2, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps)

#define VEC_ __m256
#define W_ 8
#define LOADU_ _mm256_loadu_ps
#define STOREU_ _mm256_storeu_ps
#define FMADD_ _mm256_fmadd_ps
#define SET1_ _mm256_set1_ps
COLI_DEFINE_MIXES(AVX2, mix_tile_end, mix_nv8, mix_nv4, mix_nv2, mix_nv1)

AVX2 static void mix_avx2(float *out, size_t ostride, int g, int dims, const float *w, size_t wstride,
                          const void *v, coli__dtype dt, size_t stride, int n, const int *nh)
{
    static const mix_slice_fn fn[] = {mix_nv8, mix_nv4, mix_nv2, mix_nv1};
    static const int width[] = {64, 32, 16, 8};
    const int vd = dims - dims % 8;
    mix_slices(fn, width, 4, out, ostride, g, vd, w, wstride, v, dt, stride, n, nh);
    if (vd < dims) /* the last dims % 8 dimensions */
        mix_scalar(out + vd, ostride, g, dims - vd, w, wstride, (const char *)v + (size_t)vd * elem_size(dt), dt,
                   stride, n, nh);
}

static const coli__attnk g_avx2 = {scores_avx2, softmax_avx2, mix_avx2};

const coli__attnk *coli__attn_kernels_avx2(void)
{
    return &g_avx2;
}
#else
const coli__attnk *coli__attn_kernels_avx2(void)
{
    return NULL;
}
#endif
