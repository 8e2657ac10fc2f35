/* quant_avx2.c - the AVX2 (+F16C) kernels for the quantized formats q8, q4
 * and q2 (internal): the direct kernel, 2 rows at a time, which the
 * AVX-512 set takes for q8 too; the repacked one, 8 rows = 8 lanes; and the
 * avx2 table. lib/cpu/quant_x86.h describes the scheme and holds what the
 * AVX-512 kernels (lib/cpu/quant_avx512.c) share with these. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/quant.h"
#include "cpu/quant_x86.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* ===================================================================== */
/* AVX2 (+F16C)                                                          */
/* ===================================================================== */

/* Dword lanes 0..n-1 all ones, the others 0 (any n). */
__attribute__((target(T_AVX2))) INL __m256i dmask8(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The 32 bytes at p + off, bytes from p + lim on read as 0 without
 * touching memory (lim - off a multiple of 4; with constant arguments this
 * is a plain load or a zero). */
__attribute__((target(T_AVX2))) INL __m256i ld32m(const void *p, int off, int lim)
{
    const uint8_t *b = (const uint8_t *)p;
    if (off + 32 <= lim)
        return _mm256_loadu_si256((const __m256i *)(b + off));
    if (off >= lim)
        return _mm256_setzero_si256();
    return _mm256_maskload_epi32((const int *)(b + off), dmask8((lim - off) >> 2));
}

/* 8 int32 / f32 at p, entries from n on read as 0 (untouched). */
__attribute__((target(T_AVX2))) INL __m256i ld_i8m(const int32_t *p, int n)
{
    if (n >= 8)
        return _mm256_loadu_si256((const __m256i *)p);
    return _mm256_maskload_epi32((const int *)p, dmask8(n));
}

__attribute__((target(T_AVX2))) INL __m256 ld_f8m(const float *p, int n)
{
    if (n >= 8)
        return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, dmask8(n));
}

/* 8 fp16 at p, entries from n on read as 0 (untouched; n in 1..8). */
__attribute__((target(T_AVX2))) INL __m128i ld_h8m(const uint16_t *p, int n)
{
    if (n >= 8)
        return _mm_loadu_si128((const __m128i *)p);
    __m128i x = _mm_maskload_epi32((const int *)p, _mm256_castsi256_si128(dmask8(n >> 1)));
    if (n & 1) {
        const __m128i at = _mm_cmpeq_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), _mm_set1_epi16((short)(n - 1)));
        x = _mm_blendv_epi8(x, _mm_set1_epi16((short)p[n - 1]), at);
    }
    return x;
}

/* ld_d8 for the first ng groups (ng a multiple of 2^gsh): the scales of
 * groups ng..7 read as 0. */
__attribute__((target(T_AVX2))) INL __m128i ld_d8m(const uint16_t *d, int gsh, int ng)
{
    if (ng >= 8)
        return ld_d8(d, gsh);
    __m128i x = ld_h8m(d, ng >> gsh);
    if (gsh >= 1)
        x = _mm_unpacklo_epi16(x, x);
    if (gsh == 2)
        x = _mm_unpacklo_epi32(x, x);
    return x;
}

/* y = ((P0+P4)+(P2+P6))+((P1+P5)+(P3+P7)) */
__attribute__((target(T_AVX2))) INL float hsum_p8(__m256 a)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

/* acc + f32(isum) * (D * s) [+ f32(psum) * (M * s)] */
__attribute__((target(T_AVX2))) INL __m256 fpart8(int kind, __m256 acc, __m256i isum, __m256 D, __m256 M,
                                                  __m256 s, __m256 fps)
{
    __m256 ds = _mm256_mul_ps(D, s);
    KEEP(ds);
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), ds);
    KEEP(f);
    if (kind == K_Q2) {
        __m256 ms = _mm256_mul_ps(M, s);
        KEEP(ms);
        __m256 f2 = _mm256_mul_ps(fps, ms);
        KEEP(f2);
        f = _mm256_add_ps(f, f2);
    }
    return _mm256_add_ps(acc, f);
}

/* ---- direct kernels: 2 rows at a time ------------------------------- */

#define R2 2

/* One 8-group block for R2 rows: q[i] the row's quants of the block, d[i]
 * its scales (gsh as ld_d8), m[i] its minimums (q2); pa, sa, pp the
 * activations, scales and sums of the block. Only its first ng groups
 * (1..8) exist: nothing of groups ng..7 is read, and they count as 0. */
__attribute__((target(T_AVX2))) INL void blk2(int kind, int gsh, int ng, const uint8_t *const q[R2],
                                              const uint16_t *const d[R2], const uint16_t *const m[R2],
                                              const int8_t *pa, const float *sa, const int32_t *pp, __m256 acc[R2])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[R2]; /* [g0..g7] of each row */
    if (kind == K_Q8) {
        __m256i h[R2][4];
        UNROLL for (int j = 0; j < 4; j++) {
            __m256i x[R2][2];
            UNROLL for (int e = 0; e < 2; e++) {
                const int g = 2 * j + e;
                __m256i pg = ld32m(pa, 32 * g, 32 * ng);
                __m256i ag = _mm256_abs_epi8(pg);
                UNROLL for (int i = 0; i < R2; i++) {
                    __m256i wv = ld32m(q[i], 32 * g, 32 * ng);
                    x[i][e] = _mm256_madd_epi16(_mm256_maddubs_epi16(ag, _mm256_sign_epi8(wv, pg)), ones);
                }
            }
            UNROLL for (int i = 0; i < R2; i++)
                h[i][j] = _mm256_hadd_epi32(x[i][0], x[i][1]);
        }
        UNROLL for (int i = 0; i < R2; i++) {
            __m256i u0 = _mm256_hadd_epi32(h[i][0], h[i][1]), u1 = _mm256_hadd_epi32(h[i][2], h[i][3]);
            v[i] = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                    _mm256_permute2x128_si256(u0, u1, 0x31));
        }
    } else if (kind == K_Q4) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const __m256i ps8 = _mm256_slli_epi32(ld_i8m(pp, ng), 3);
        __m256i x[R2][4]; /* [row][h]: 128-bit half = group 2h, 2h+1 */
        UNROLL for (int j = 0; j < 4; j++) {
            __m256i a0 = ld32m(pa, 64 * j, 32 * ng);
            __m256i a1 = ld32m(pa, 64 * j + 32, 32 * ng);
            __m256i alo = _mm256_permute2x128_si256(a0, a1, 0x20), ahi = _mm256_permute2x128_si256(a0, a1, 0x31);
            UNROLL for (int i = 0; i < R2; i++) {
                __m256i wv = ld32m(q[i], 32 * j, 16 * ng);
                __m256i lo = _mm256_and_si256(wv, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
                __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
                x[i][j] = _mm256_madd_epi16(t, ones);
            }
        }
        UNROLL for (int i = 0; i < R2; i++) {
            __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(x[i][0], x[i][1]), _mm256_hadd_epi32(x[i][2], x[i][3]));
            v[i] = _mm256_sub_epi32(_mm256_permutevar8x32_epi32(u, perm), ps8);
        }
    } else {
        const __m256i m2 = _mm256_set1_epi8(0x03);
        __m256i x[R2][2];
        UNROLL for (int h = 0; h < 2; h++) { /* groups 4h..4h+3 */
            __m256i p0 = ld32m(pa, 128 * h, 32 * ng);
            __m256i p1 = ld32m(pa, 128 * h + 32, 32 * ng);
            __m256i p2 = ld32m(pa, 128 * h + 64, 32 * ng);
            __m256i p3 = ld32m(pa, 128 * h + 96, 32 * ng);
            __m256i l01 = _mm256_unpacklo_epi64(p0, p1), h01 = _mm256_unpackhi_epi64(p0, p1);
            __m256i l23 = _mm256_unpacklo_epi64(p2, p3), h23 = _mm256_unpackhi_epi64(p2, p3);
            __m256i qa[4]; /* qword g: group 4h+g, columns 8j..8j+7 */
            qa[0] = _mm256_permute2x128_si256(l01, l23, 0x20);
            qa[1] = _mm256_permute2x128_si256(h01, h23, 0x20);
            qa[2] = _mm256_permute2x128_si256(l01, l23, 0x31);
            qa[3] = _mm256_permute2x128_si256(h01, h23, 0x31);
            UNROLL for (int i = 0; i < R2; i++) {
                __m256i wv = ld32m(q[i], 32 * h, 8 * ng);
                __m256i t = _mm256_maddubs_epi16(_mm256_and_si256(wv, m2), qa[0]);
                UNROLL for (int j = 1; j < 4; j++)
                    t = _mm256_add_epi16(
                        t, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(wv, 2 * j), m2), qa[j]));
                x[i][h] = _mm256_madd_epi16(t, ones);
            }
        }
        UNROLL for (int i = 0; i < R2; i++)
            v[i] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(x[i][0], x[i][1]), _MM_SHUFFLE(3, 1, 2, 0));
    }
    const __m256 s = ld_f8m(sa, ng);
    const __m256 fps = kind == K_Q2 ? _mm256_cvtepi32_ps(ld_i8m(pp, ng)) : s;
    UNROLL for (int i = 0; i < R2; i++) {
        __m256 D = _mm256_cvtph_ps(ld_d8m(d[i], gsh, ng));
        __m256 M = kind == K_Q2 ? _mm256_cvtph_ps(ld_h8m(m[i], ng)) : D;
        acc[i] = fpart8(kind, acc[i], v[i], D, M, s, fps);
    }
}

__attribute__((target(T_AVX2))) INL void direct2_body(int kind, int gsh, const coli__qmat *w, const qshape *sh,
                                                      int r0, int r1, int n_tok, const int8_t *p, const float *s,
                                                      const int32_t *psum, float *y, size_t ys)
{
    const int nb = sh->ng / 8, nt = sh->ng % 8;
    const size_t bq = kind == K_Q8 ? 256 : kind == K_Q4 ? 128 : 64; /* quant bytes per 8 groups */
    const size_t pfr = pf_rows(sh->rb);
    const size_t pfq = pfr * sh->rb, pfd = pfr * (size_t)sh->nd * 2, pfm = pfr * (size_t)sh->ng * 2;
    prefetch_start(w, sh->rb, (size_t)sh->nd, r0, r1);
    for (int r = r0; r < r1; r += R2) {
        const int rr = r1 - r < R2 ? r1 - r : R2;
        const uint8_t *qr[R2];
        const uint16_t *dr[R2], *mr[R2];
        UNROLL for (int i = 0; i < R2; i++) {
            int ri = r + (i < rr ? i : rr - 1);
            qr[i] = w->qs + (size_t)ri * sh->rb;
            dr[i] = w->d + (size_t)ri * (size_t)sh->nd;
            mr[i] = kind == K_Q2 ? w->m + (size_t)ri * (size_t)sh->ng : NULL;
        }
        for (int t = 0; t < n_tok; t++) {
            const int8_t *pt = p + (size_t)t * (size_t)sh->cols;
            const float *st = s + (size_t)t * (size_t)sh->ng;
            const int32_t *pst = psum + (size_t)t * (size_t)sh->ng;
            __m256 acc[R2];
            UNROLL for (int i = 0; i < R2; i++)
                acc[i] = _mm256_setzero_ps();
            const uint8_t *q[R2];
            const uint16_t *d[R2], *m[R2];
            for (int j = 0; j < nb; j++) {
                UNROLL for (int i = 0; i < R2; i++) {
                    q[i] = qr[i] + (size_t)j * bq;
                    d[i] = dr[i] + ((8 * j) >> gsh);
                    m[i] = kind == K_Q2 ? mr[i] + 8 * j : NULL;
                    if (t == 0) {
                        prefetch(q[i], pfq, bq);
                        prefetch(d[i], pfd, 2);
                        if (kind == K_Q2)
                            prefetch(m[i], pfm, 2);
                    }
                }
                blk2(kind, gsh, 8, q, d, m, pt + 256 * (size_t)j, st + 8 * j, pst + 8 * j, acc);
            }
            if (nt) { /* in place, nothing read past the row's groups */
                UNROLL for (int i = 0; i < R2; i++) {
                    q[i] = qr[i] + (size_t)nb * bq;
                    d[i] = dr[i] + ((8 * nb) >> gsh);
                    m[i] = kind == K_Q2 ? mr[i] + 8 * nb : NULL;
                    if (t == 0)
                        prefetch(q[i], pfq, (size_t)nt * (size_t)sh->gb);
                }
                const int8_t *pa = pt + 256 * (size_t)nb;
                if (nt == 4) /* the common remainder, with constant masks */
                    blk2(kind, gsh, 4, q, d, m, pa, st + 8 * nb, pst + 8 * nb, acc);
                else
                    blk2(kind, gsh, nt, q, d, m, pa, st + 8 * nb, pst + 8 * nb, acc);
            }
            for (int i = 0; i < rr; i++)
                y[(size_t)t * ys + (size_t)(r + i)] = hsum_p8(acc[i]);
        }
    }
}

__attribute__((target(T_AVX2))) void coli__q_direct_avx2(const coli__qmat *w, int r0, int r1, int n_tok,
                                                         const int8_t *p, const float *s, const int32_t *psum,
                                                         float *y, size_t ys)
{
    const qshape sh = shape_of(w);
    if (sh.kind == K_Q8)
        direct2_body(K_Q8, 0, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.kind == K_Q2)
        direct2_body(K_Q2, 0, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 0)
        direct2_body(K_Q4, 0, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 1)
        direct2_body(K_Q4, 1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else
        direct2_body(K_Q4, 2, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
}

/* ---- repacked kernels: 8 rows = 8 lanes ----------------------------- */

/* Scales (and minimums) of groups [g0, g0 + gn) of 8 rows as f32, [g][row]. */
__attribute__((target(T_AVX2))) static void repack_scales8(const rowset *rs, const qshape *sh, int g0, int gn,
                                                           float *df, float *mf)
{
    /* gathered first, converted afterwards (store forwarding) */
    _Alignas(16) uint16_t t[2][PF_GC][8];
    const int nm = sh->kind == K_Q2 ? 2 : 1;
    for (int i = 0; i < 8; i++) {
        for (int gi = 0; gi < gn; gi++)
            t[0][gi][i] = rs->d[i][(g0 + gi) >> sh->gsh];
        if (nm > 1)
            for (int gi = 0; gi < gn; gi++)
                t[1][gi][i] = rs->m[i][g0 + gi];
    }
    for (int e = 0; e < nm; e++) {
        float *o = e ? mf : df;
        for (int gi = 0; gi < gn; gi++)
            _mm256_store_ps(o + 8 * gi, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)t[e][gi])));
    }
}

/* In-lane 4x4 transpose of dwords: x[m] 128-bit lane L = row 4L+m; out
 * x[c] = dword c of rows 0.. in order. */
__attribute__((target(T_AVX2))) INL void tr4_avx2(__m256i x[4])
{
    __m256i a = _mm256_unpacklo_epi32(x[0], x[1]), b = _mm256_unpackhi_epi32(x[0], x[1]);
    __m256i c = _mm256_unpacklo_epi32(x[2], x[3]), d = _mm256_unpackhi_epi32(x[2], x[3]);
    x[0] = _mm256_unpacklo_epi64(a, c);
    x[1] = _mm256_unpackhi_epi64(a, c);
    x[2] = _mm256_unpacklo_epi64(b, d);
    x[3] = _mm256_unpackhi_epi64(b, d);
}

/* 16 bytes at offset off of rows m and m+4 as one vector. */
__attribute__((target(T_AVX2))) INL __m256i ld_rows2(const rowset *rs, int m, size_t off)
{
    __m256i v = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(rs->q[m] + off)));
    return _mm256_inserti128_si256(v, _mm_loadu_si128((const __m128i *)(rs->q[m + 4] + off)), 1);
}

/* Unpacks groups [g0, g0 + gn) of 8 rows: W[g*8 + k] = u8 weights of
 * columns 4k..4k+3 of the 8 rows (q8: |q|, and q itself in S). */
__attribute__((target(T_AVX2))) static void repack8(const rowset *rs, const qshape *sh, int g0, int gn,
                                                    __m256i *W, __m256i *S)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    _Alignas(32) int32_t t2[PF_GC][2][8]; /* q2: dwords 0 and 1 of each group, [row] */
    if (sh->kind == K_Q2) /* gathered first (see repack_scales8) */
        for (int i = 0; i < 8; i++)
            for (int gi = 0; gi < gn; gi++) {
                t2[gi][0][i] = load_i32(rs->q[i] + (size_t)(g0 + gi) * 8);
                t2[gi][1][i] = load_i32(rs->q[i] + (size_t)(g0 + gi) * 8 + 4);
            }
    for (int gi = 0; gi < gn; gi++) {
        size_t off = (size_t)(g0 + gi) * (size_t)sh->gb;
        __m256i *o = W + 8 * gi;
        if (sh->kind == K_Q4) {
            __m256i x[4];
            UNROLL for (int mm = 0; mm < 4; mm++)
                x[mm] = ld_rows2(rs, mm, off);
            tr4_avx2(x);
            UNROLL for (int c = 0; c < 4; c++) {
                o[c] = _mm256_and_si256(x[c], m4);
                o[4 + c] = _mm256_and_si256(_mm256_srli_epi16(x[c], 4), m4);
            }
        } else if (sh->kind == K_Q8) {
            __m256i *os = S + 8 * gi;
            UNROLL for (int h = 0; h < 2; h++) {
                __m256i x[4];
                UNROLL for (int mm = 0; mm < 4; mm++)
                    x[mm] = ld_rows2(rs, mm, off + 16 * (size_t)h);
                tr4_avx2(x);
                UNROLL for (int c = 0; c < 4; c++) {
                    os[4 * h + c] = x[c];
                    o[4 * h + c] = _mm256_abs_epi8(x[c]);
                }
            }
        } else {
            const __m256i va = _mm256_load_si256((const __m256i *)t2[gi][0]);
            const __m256i vb = _mm256_load_si256((const __m256i *)t2[gi][1]);
            UNROLL for (int j = 0; j < 4; j++) {
                o[2 * j] = _mm256_and_si256(_mm256_srli_epi32(va, 2 * j), m2);
                o[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi32(vb, 2 * j), m2);
            }
        }
    }
}

/* Tokens per pass of the AVX2 repacked kernel (maddubs-bound: more tokens
 * per weight load only add register pressure). */
#define PF8_TQ 2

/* nt tokens (1..PF8_TQ, a constant after inlining) over groups [g0, g0 + gn)
 * of the repacked chunk; P[u] the token's partial sums [k][row]. */
__attribute__((target(T_AVX2))) INL void pf8_tokens(int kind, int nt, const __m256i *W, const __m256i *S,
                                                    const float *df, const float *mf, int g0, int gn,
                                                    const int8_t *const pt[4], const float *const st[4],
                                                    const int32_t *const pst[4], float *const P[4])
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int c = kind == K_Q4 ? 8 : 0;
    for (int gi = 0; gi < gn; gi++) {
        const int g = g0 + gi;
        const __m256i *wg = W + 8 * gi;
        __m256i acc[4];
        if (kind == K_Q8) {
            const __m256i *sg = S + 8 * gi;
            UNROLL for (int u = 0; u < nt; u++)
                acc[u] = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++) {
                const __m256i wk = _mm256_load_si256(wg + k), sk = _mm256_load_si256(sg + k);
                UNROLL for (int u = 0; u < nt; u++) {
                    __m256i a = _mm256_set1_epi32(load_i32(pt[u] + (size_t)g * 32 + 4 * k));
                    __m256i m = _mm256_maddubs_epi16(wk, _mm256_sign_epi8(a, sk));
                    acc[u] = _mm256_add_epi32(acc[u], _mm256_madd_epi16(m, ones));
                }
            }
        } else {
            __m256i a16[4];
            UNROLL for (int u = 0; u < nt; u++)
                a16[u] = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++) {
                const __m256i wk = _mm256_load_si256(wg + k);
                UNROLL for (int u = 0; u < nt; u++) {
                    __m256i a = _mm256_set1_epi32(load_i32(pt[u] + (size_t)g * 32 + 4 * k));
                    a16[u] = _mm256_add_epi16(a16[u], _mm256_maddubs_epi16(wk, a));
                }
            }
            UNROLL for (int u = 0; u < nt; u++)
                acc[u] = _mm256_add_epi32(_mm256_madd_epi16(a16[u], ones), _mm256_set1_epi32(-c * pst[u][g]));
        }
        const __m256 D = _mm256_load_ps(df + 8 * gi);
        const __m256 M = kind == K_Q2 ? _mm256_load_ps(mf + 8 * gi) : D;
        UNROLL for (int u = 0; u < nt; u++) {
            float *pk = P[u] + 8 * (g & 7);
            __m256 fps = _mm256_set1_ps((float)pst[u][g]);
            const __m256 prev = g < 8 ? _mm256_setzero_ps() : _mm256_load_ps(pk); /* P_k starts at +0 */
            _mm256_store_ps(pk, fpart8(kind, prev, acc[u], D, M, _mm256_set1_ps(st[u][g]), fps));
        }
    }
}

__attribute__((target(T_AVX2))) static void pf8_run(int kind, int nt, const __m256i *W, const __m256i *S,
                                                    const float *df, const float *mf, int g0, int gn,
                                                    const int8_t *const pt[4], const float *const st[4],
                                                    const int32_t *const pst[4], float *const P[4])
{
#define PF8(K, N) pf8_tokens(K, N, W, S, df, mf, g0, gn, pt, st, pst, P)
#define PF8K(K)                                                                                                 \
    if (nt == 2)                                                                                                \
        PF8(K, 2);                                                                                              \
    else                                                                                                        \
        PF8(K, 1);
    if (kind == K_Q8) {
        PF8K(K_Q8)
    } else if (kind == K_Q4) {
        PF8K(K_Q4)
    } else {
        PF8K(K_Q2)
    }
#undef PF8K
#undef PF8
}

__attribute__((target(T_AVX2))) static void repacked_avx2(const coli__qmat *w, int r0, int r1, int n_tok,
                                                          const int8_t *p, const float *s, const int32_t *psum,
                                                          float *y, size_t ys)
{
    const qshape sh = shape_of(w);
    _Alignas(32) __m256i W[PF_GC * 8];
    _Alignas(32) __m256i S[PF_GC * 8];
    _Alignas(32) float df[PF_GC * 8], mf[PF_GC * 8];
    _Alignas(32) float P[PF_TB * 64];
    const int nch = (sh.ng + PF_GC - 1) / PF_GC;
    for (int r = r0; r < r1; r += 8) {
        const int rr = r1 - r < 8 ? r1 - r : 8;
        rowset rs;
        rowset_init(&rs, w, &sh, r, rr, 8);
        for (int t0 = 0; t0 < n_tok; t0 += PF_TB) {
            const int tb = n_tok - t0 < PF_TB ? n_tok - t0 : PF_TB;
            if (sh.ng < 8) /* else groups 0-7 start every P_k (pf8_tokens) */
                memset(P, 0, (size_t)tb * 64 * sizeof(float));
            for (int ch = 0; ch < nch; ch++) {
                const int g0 = ch * PF_GC, gn = sh.ng - g0 < PF_GC ? sh.ng - g0 : PF_GC;
                if (nch > 1 || t0 == 0) {
                    repack8(&rs, &sh, g0, gn, W, S);
                    repack_scales8(&rs, &sh, g0, gn, df, mf);
                }
                for (int t = t0; t < t0 + tb; t += PF8_TQ) {
                    const int nt = t0 + tb - t < PF8_TQ ? t0 + tb - t : PF8_TQ;
                    const int8_t *pt[4];
                    const float *st[4];
                    const int32_t *pst[4];
                    float *Pt[4];
                    for (int u = 0; u < 4; u++) {
                        int tu = t + (u < nt ? u : 0);
                        pt[u] = p + (size_t)tu * (size_t)sh.cols;
                        st[u] = s + (size_t)tu * (size_t)sh.ng;
                        pst[u] = psum + (size_t)tu * (size_t)sh.ng;
                        Pt[u] = P + (size_t)(tu - t0) * 64;
                    }
                    pf8_run(sh.kind, nt, W, S, df, mf, g0, gn, pt, st, pst, Pt);
                }
            }
            for (int t = t0; t < t0 + tb; t++) {
                const float *pk = P + (size_t)(t - t0) * 64;
                __m256 v[8];
                UNROLL for (int k = 0; k < 8; k++)
                    v[k] = _mm256_load_ps(pk + 8 * k);
                __m256 o = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                                         _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
                float tmp[8];
                _mm256_storeu_ps(tmp, o);
                memcpy(y + (size_t)t * ys + (size_t)r, tmp, (size_t)rr * sizeof(float));
            }
        }
    }
}

/* Below this many tokens the direct kernel (re-reading a 2-row block from
 * L1 per token) beats repacking: measured crossovers on a Sapphire Rapids
 * class core, q4 / q8 / q2. */
static int avx2_pf_min_tok(int kind)
{
    return kind == K_Q4 ? 8 : kind == K_Q8 ? 16 : 32;
}

__attribute__((target(T_AVX2))) static void gemm_avx2(const coli__qmat *w, int r0, int r1, int n_tok,
                                                      const int8_t *p, const float *s, const int32_t *psum,
                                                      float *y, size_t y_stride)
{
    if (r1 <= r0 || n_tok <= 0)
        return;
    if (w->layout == COLI__QL_X16) { /* made for the AVX-512 set only */
        coli__q_kernels_scalar()->gemm(w, r0, r1, n_tok, p, s, psum, y, y_stride);
        return;
    }
    if (n_tok >= avx2_pf_min_tok(shape_of(w).kind))
        repacked_avx2(w, r0, r1, n_tok, p, s, psum, y, y_stride);
    else
        coli__q_direct_avx2(w, r0, r1, n_tok, p, s, psum, y, y_stride);
}

/* ---- tables ---------------------------------------------------------- */

const coli__qkernels *coli__q_kernels_avx2(void)
{
    static const coli__qkernels k = {"avx2", gemm_avx2, coli__q_quantize_act};
    const unsigned need = COLI_CPU_AVX2 | COLI_CPU_F16C;
    return (coli__cpu_features() & need) == need ? &k : NULL;
}

#else /* not x86-64 GCC/Clang */

const coli__qkernels *coli__q_kernels_avx2(void)
{
    return NULL;
}

#endif
