/* quant_avx512.c - the AVX-512 VNNI kernels for the quantized formats q8,
 * q4 and q2 (internal): the direct kernel, 4 rows at a time (q8 takes the
 * AVX2 one, lib/cpu/quant_avx2.c); the repacked one, 16 rows = 16 lanes,
 * 1 or 2 such halves; the x16 layout's kernels; the activation
 * quantization; and the avx512 tables. lib/cpu/quant_x86.h describes the
 * scheme and holds what the two sets share. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/qround.h"
#include "cpu/mask16.h"
#include "cpu/quant.h"
#include "cpu/quant_x86.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* ===================================================================== */
/* AVX-512 VNNI                                                          */
/* ===================================================================== */

#define R4 4 /* rows per block (the final reduction assumes 4) */

__attribute__((target(T_512))) INL __m512i dup256i(const void *p) /* [x | x] */
{
    __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_shuffle_i32x4(v, v, 0x44);
}

__attribute__((target(T_512))) INL __m512 dup256f(const float *p)
{
    __m512 v = _mm512_castps256_ps512(_mm256_loadu_ps(p));
    return _mm512_shuffle_f32x4(v, v, 0x44);
}

/* dup256i / dup256f of 8 entries of which only the first n exist: the
 * others read as 0 (untouched). */
__attribute__((target(T_512))) INL __m512i dup256im(const int32_t *p, int n)
{
    if (n >= 8)
        return dup256i(p);
    __m512i v = _mm512_castsi256_si512(_mm256_maskz_loadu_epi32((__mmask8)((1u << n) - 1), p));
    return _mm512_shuffle_i32x4(v, v, 0x44);
}

__attribute__((target(T_512))) INL __m512 dup256fm(const float *p, int n)
{
    if (n >= 8)
        return dup256f(p);
    __m512 v = _mm512_castps256_ps512(_mm256_maskz_loadu_ps((__mmask8)((1u << n) - 1), p));
    return _mm512_shuffle_f32x4(v, v, 0x44);
}

/* The 64 bytes at p + off, bytes from p + lim on read as 0 without
 * touching memory (with constant arguments: a plain load or a zero). */
__attribute__((target(T_512))) INL __m512i ld64m(const void *p, int off, int lim)
{
    const uint8_t *b = (const uint8_t *)p;
    if (off + 64 <= lim)
        return _mm512_loadu_si512((const void *)(b + off));
    if (off >= lim)
        return _mm512_setzero_si512();
    return _mm512_maskz_loadu_epi8(((uint64_t)1 << (lim - off)) - 1, b + off);
}

/* 8 fp16 at p, entries from n on read as 0 (untouched). */
__attribute__((target(T_512))) INL __m128i ld_h8m512(const uint16_t *p, int n)
{
    if (n >= 8)
        return _mm_loadu_si128((const __m128i *)p);
    return _mm_maskz_loadu_epi16((__mmask8)((1u << n) - 1), p);
}

/* ld_d8 for the first ng groups (ng a multiple of 2^gsh): the scales of
 * groups ng..7 read as 0. */
__attribute__((target(T_512))) INL __m128i ld_d8m512(const uint16_t *d, int gsh, int ng)
{
    if (ng >= 8)
        return ld_d8(d, gsh);
    __m128i x = ld_h8m512(d, ng >> gsh);
    if (gsh >= 1)
        x = _mm_unpacklo_epi16(x, x);
    if (gsh == 2)
        x = _mm_unpacklo_epi32(x, x);
    return x;
}

/* The f32 values of 8 fp16 of row a and 8 of row b: [a | b]. */
__attribute__((target(T_512))) INL __m512 ld_h16(__m128i a, __m128i b)
{
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}

/* acc + f32(isum) * (D * s) [+ f32(psum) * (M * s)], 16 lanes */
__attribute__((target(T_512))) INL __m512 fpart16(int kind, __m512 acc, __m512i isum, __m512 D, __m512 M,
                                                  __m512 s, __m512 fps)
{
    __m512 ds = _mm512_mul_ps(D, s);
    KEEP512(ds);
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), ds);
    KEEP512(f);
    if (kind == K_Q2) {
        __m512 ms = _mm512_mul_ps(M, s);
        KEEP512(ms);
        __m512 f2 = _mm512_mul_ps(fps, ms);
        KEEP512(f2);
        f = _mm512_add_ps(f, f2);
    }
    return _mm512_add_ps(acc, f);
}

/* ---- direct kernels: 4 rows at a time, two per 16-lane vector ------- */

/* One 8-group block for R4 rows of q4 or q2, of which the first ng groups
 * exist (see blk2). acc[pr] lanes 0-7: row 2pr, lanes 8-15: row 2pr+1. */
__attribute__((target(T_512))) INL void blk4(int kind, int gsh, int ng, const uint8_t *const q[R4],
                                             const uint16_t *const d[R4], const uint16_t *const m[R4],
                                             const int8_t *pa, const float *sa, const int32_t *pp,
                                             __m512 acc[R4 / 2])
{
    __m512i v[R4 / 2]; /* [row 2pr: g0..g7 | row 2pr+1: g0..g7] */
    if (kind == K_Q4) {
        /* nibbles: 64-byte vector h = groups 4h..4h+3, 16 bytes each; the
         * activations are regrouped to match: alo = columns 0-15 of the 4
         * groups, ahi = columns 16-31. */
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        const __m512i ps = _mm512_slli_epi32(dup256im(pp, ng), 3);
        __m512i alo[2], ahi[2];
        UNROLL for (int h = 0; h < 2; h++) {
            __m512i p0 = ld64m(pa, 128 * h, 32 * ng);
            __m512i p1 = ld64m(pa, 128 * h + 64, 32 * ng);
            alo[h] = _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0));
            ahi[h] = _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));
        }
        UNROLL for (int pr = 0; pr < R4 / 2; pr++) {
            __m512i x[2][2]; /* [row][h]: 128-bit lane L = group 4h+L */
            UNROLL for (int r = 0; r < 2; r++)
                UNROLL for (int h = 0; h < 2; h++) {
                    __m512i wv = ld64m(q[2 * pr + r], 64 * h, 16 * ng);
                    __m512i lo = _mm512_and_si512(wv, m4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
                    x[r][h] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, alo[h]), hi, ahi[h]);
                }
            /* lane L: [a g L, a g 4+L, b g L, b g 4+L] */
            __m512i ta = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0][0], x[0][1]),
                                          _mm512_unpackhi_epi32(x[0][0], x[0][1]));
            __m512i tb = _mm512_add_epi32(_mm512_unpacklo_epi32(x[1][0], x[1][1]),
                                          _mm512_unpackhi_epi32(x[1][0], x[1][1]));
            __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(ta, tb), _mm512_unpackhi_epi64(ta, tb));
            v[pr] = _mm512_sub_epi32(_mm512_permutexvar_epi32(idx, u), ps);
        }
    } else {
        /* bit pairs: (w >> 2j) & 3 = columns 8j..8j+7 of the 8 groups (one
         * qword each); Q[j] holds the matching activations. */
        const __m512i m2 = _mm512_set1_epi8(0x03);
        const __m512i i01 = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
        const __m512i i23 = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
        const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        __m512i Q[4];
        {
            __m512i p0 = ld64m(pa, 0, 32 * ng);
            __m512i p1 = ld64m(pa, 64, 32 * ng);
            __m512i p2 = ld64m(pa, 128, 32 * ng);
            __m512i p3 = ld64m(pa, 192, 32 * ng);
            __m512i a01 = _mm512_permutex2var_epi64(p0, i01, p1), b01 = _mm512_permutex2var_epi64(p0, i23, p1);
            __m512i a23 = _mm512_permutex2var_epi64(p2, i01, p3), b23 = _mm512_permutex2var_epi64(p2, i23, p3);
            Q[0] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(1, 0, 1, 0));
            Q[1] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 2, 3, 2));
            Q[2] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(1, 0, 1, 0));
            Q[3] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(3, 2, 3, 2));
        }
        UNROLL for (int pr = 0; pr < R4 / 2; pr++) {
            __m512i x[2]; /* qword g = group g */
            UNROLL for (int r = 0; r < 2; r++) {
                __m512i wv = ld64m(q[2 * pr + r], 0, 8 * ng);
                __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(wv, m2), Q[0]);
                UNROLL for (int j = 1; j < 4; j++)
                    a = _mm512_dpbusd_epi32(a, _mm512_and_si512(_mm512_srli_epi16(wv, 2 * j), m2), Q[j]);
                x[r] = a;
            }
            v[pr] = _mm512_add_epi32(_mm512_permutex2var_epi32(x[0], ie, x[1]),
                                     _mm512_permutex2var_epi32(x[0], io, x[1]));
        }
    }
    const __m512 S = dup256fm(sa, ng);
    const __m512 fps = kind == K_Q2 ? _mm512_cvtepi32_ps(dup256im(pp, ng)) : S;
    UNROLL for (int pr = 0; pr < R4 / 2; pr++) {
        __m512 D = ld_h16(ld_d8m512(d[2 * pr], gsh, ng), ld_d8m512(d[2 * pr + 1], gsh, ng));
        __m512 M = kind == K_Q2 ? ld_h16(ld_h8m512(m[2 * pr], ng), ld_h8m512(m[2 * pr + 1], ng)) : D;
        acc[pr] = fpart16(kind, acc[pr], v[pr], D, M, S, fps);
    }
}

__attribute__((target(T_512))) INL void direct4_body(int kind, int gsh, const coli__qmat *w, const qshape *sh,
                                                     int r0, int r1, int n_tok, const int8_t *p, const float *s,
                                                     const int32_t *psum, float *y, size_t ys)
{
    const int nb = sh->ng / 8, nt = sh->ng % 8;
    const size_t bq = kind == K_Q8 ? 256 : kind == K_Q4 ? 128 : 64; /* quant bytes per 8 groups */
    const size_t pfr = pf_rows(sh->rb);
    const size_t pfq = pfr * sh->rb, pfd = pfr * (size_t)sh->nd * 2, pfm = pfr * (size_t)sh->ng * 2;
    prefetch_start(w, sh->rb, (size_t)sh->nd, r0, r1);
    for (int r = r0; r < r1; r += R4) {
        const int rr = r1 - r < R4 ? r1 - r : R4;
        const uint8_t *qr[R4];
        const uint16_t *dr[R4], *mr[R4];
        UNROLL for (int i = 0; i < R4; i++) {
            int ri = r + (i < rr ? i : rr - 1);
            qr[i] = w->qs + (size_t)ri * sh->rb;
            dr[i] = w->d + (size_t)ri * (size_t)sh->nd;
            mr[i] = kind == K_Q2 ? w->m + (size_t)ri * (size_t)sh->ng : NULL;
        }
        for (int t = 0; t < n_tok; t++) {
            const int8_t *pt = p + (size_t)t * (size_t)sh->cols;
            const float *st = s + (size_t)t * (size_t)sh->ng;
            const int32_t *pst = psum + (size_t)t * (size_t)sh->ng;
            __m512 acc[R4 / 2];
            UNROLL for (int i = 0; i < R4 / 2; i++)
                acc[i] = _mm512_setzero_ps();
            const uint8_t *q[R4];
            const uint16_t *d[R4], *m[R4];
            for (int j = 0; j < nb; j++) {
                UNROLL for (int i = 0; i < R4; i++) {
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
                blk4(kind, gsh, 8, q, d, m, pt + 256 * (size_t)j, st + 8 * j, pst + 8 * j, acc);
            }
            if (nt) { /* in place, nothing read past the row's groups */
                UNROLL for (int i = 0; i < R4; i++) {
                    q[i] = qr[i] + (size_t)nb * bq;
                    d[i] = dr[i] + ((8 * nb) >> gsh);
                    m[i] = kind == K_Q2 ? mr[i] + 8 * nb : NULL;
                    if (t == 0)
                        prefetch(q[i], pfq, (size_t)nt * (size_t)sh->gb);
                }
                const int8_t *pa = pt + 256 * (size_t)nb;
                if (nt == 4) /* the common remainder, with constant masks */
                    blk4(kind, gsh, 4, q, d, m, pa, st + 8 * nb, pst + 8 * nb, acc);
                else
                    blk4(kind, gsh, nt, q, d, m, pa, st + 8 * nb, pst + 8 * nb, acc);
            }
            /* ((P0+P4)+(P2+P6))+((P1+P5)+(P3+P7)) of the 4 rows at once */
            const __m512 x = acc[0], z = acc[1];
            __m512 a = _mm512_add_ps(_mm512_shuffle_f32x4(x, z, _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(x, z, _MM_SHUFFLE(3, 1, 3, 1)));
            a = _mm512_add_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
            a = _mm512_add_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m128 o = _mm512_castps512_ps128(
                _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), a));
            _mm_mask_storeu_ps(y + (size_t)t * ys + (size_t)r, (__mmask8)((1u << rr) - 1), o);
        }
    }
}

__attribute__((target(T_512))) static void direct_512(const coli__qmat *w, int r0, int r1, int n_tok,
                                                      const int8_t *p, const float *s, const int32_t *psum,
                                                      float *y, size_t ys)
{
    const qshape sh = shape_of(w);
    if (sh.kind == K_Q8) /* see AVX512_PF_MIN_TOK */
        coli__q_direct_avx2(w, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.kind == K_Q2)
        direct4_body(K_Q2, 0, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 0)
        direct4_body(K_Q4, 0, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 1)
        direct4_body(K_Q4, 1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else
        direct4_body(K_Q4, 2, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
}

/* ---- repacked kernels: 16 rows = 16 lanes, 1 or 2 such halves ------- */

/* In-lane 4x4 transpose of dwords: x[m] 128-bit lane L = row 4L+m; out
 * x[c] = dword c of rows 0..15 in order. */
__attribute__((target(T_512))) INL void tr4_512(__m512i x[4])
{
    __m512i a = _mm512_unpacklo_epi32(x[0], x[1]), b = _mm512_unpackhi_epi32(x[0], x[1]);
    __m512i c = _mm512_unpacklo_epi32(x[2], x[3]), d = _mm512_unpackhi_epi32(x[2], x[3]);
    x[0] = _mm512_unpacklo_epi64(a, c);
    x[1] = _mm512_unpackhi_epi64(a, c);
    x[2] = _mm512_unpacklo_epi64(b, d);
    x[3] = _mm512_unpackhi_epi64(b, d);
}

/* 16 bytes at offset off of rows m, m+4, m+8, m+12 of q[] (dwords outside
 * km read as 0, without touching memory). */
__attribute__((target(T_512))) INL __m512i ld_rows4(const uint8_t *const *q, int m, size_t off, __mmask8 km)
{
    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi32(km, q[m] + off));
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi32(km, q[m + 4] + off), 1);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi32(km, q[m + 8] + off), 2);
    return _mm512_inserti32x4(v, _mm_maskz_loadu_epi32(km, q[m + 12] + off), 3);
}

/* raw[j] = f32 of fp16 entry s0 + j of each of the 16 arrays p[0..15]
 * (lane = array), j < n. */
__attribute__((target(T_512))) static void gather_h16(const uint16_t *const *p, int s0, int n, __m512 *raw)
{
    for (int j0 = 0; j0 < n; j0 += 8) {
        const int k = n - j0 < 8 ? n - j0 : 8;
        const __mmask8 km = (__mmask8)((1u << k) - 1);
        __m512i x[4];
        UNROLL for (int mm = 0; mm < 4; mm++) {
            __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi16(km, p[mm] + s0 + j0));
            v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi16(km, p[mm + 4] + s0 + j0), 1);
            v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi16(km, p[mm + 8] + s0 + j0), 2);
            x[mm] = _mm512_inserti32x4(v, _mm_maskz_loadu_epi16(km, p[mm + 12] + s0 + j0), 3);
        }
        tr4_512(x); /* x[c]: entries j0 + 2c (low half) and j0 + 2c + 1 of the 16 rows */
        UNROLL for (int c = 0; c < 4; c++) {
            if (2 * c < k)
                raw[j0 + 2 * c] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x[c]));
            if (2 * c + 1 < k)
                raw[j0 + 2 * c + 1] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x[c], 16)));
        }
    }
}

/* Scales (and minimums) of groups [g0, g0 + gn) of the 16 rows
 * rs->*[rb..rb+15] as f32: df[(gi * nr + h) * 16 + row]. g0 is a multiple
 * of 4, so group g0 + gi uses scale (g0 >> gsh) + (gi >> gsh). */
__attribute__((target(T_512))) static void repack_scales16(const rowset *rs, int rb, const qshape *sh, int g0,
                                                          int gn, float *df, float *mf, int nr, int h)
{
    __m512 raw[PF_GC];
    gather_h16(rs->d + rb, g0 >> sh->gsh, (gn + (1 << sh->gsh) - 1) >> sh->gsh, raw);
    for (int gi = 0; gi < gn; gi++)
        _mm512_store_ps(df + (gi * nr + h) * 16, raw[gi >> sh->gsh]);
    if (sh->kind == K_Q2) {
        gather_h16(rs->m + rb, g0, gn, raw);
        for (int gi = 0; gi < gn; gi++)
            _mm512_store_ps(mf + (gi * nr + h) * 16, raw[gi]);
    }
}

/* Unpacks groups [g0, g0 + gn) of the 16 rows rs->q[rb..rb+15]:
 * W[(gi * 8 + k) * nr + h] = u8 weights of columns 4k..4k+3 of the 16
 * rows (q8: q + 128). */
__attribute__((target(T_512))) static void repack16(const rowset *rs, int rb, const qshape *sh, int g0, int gn,
                                                   __m512i *W, int nr, int h)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03), x80 = _mm512_set1_epi8((char)0x80);
    const uint8_t *const *q = rs->q + rb;
    if (sh->kind == K_Q2) {
        /* 16 bytes = groups g, g+1: dword c of the 16 rows after tr4_512 is
         * bytes 4c..4c+3; (x >> 2j) & 3 of bytes 0-3 (4-7) of a group are
         * its columns 8j..8j+3 (8j+4..8j+7) */
        for (int gi = 0; gi < gn; gi += 2) {
            const int two = gi + 1 < gn;
            __m512i x[4];
            UNROLL for (int mm = 0; mm < 4; mm++)
                x[mm] = ld_rows4(q, mm, (size_t)(g0 + gi) * 8, two ? 0xF : 0x3);
            tr4_512(x);
            for (int e = 0; e <= two; e++) {
                __m512i *o = W + (size_t)(gi + e) * 8 * (size_t)nr + h;
                UNROLL for (int j = 0; j < 4; j++) {
                    o[2 * j * nr] = _mm512_and_si512(_mm512_srli_epi32(x[2 * e], 2 * j), m2);
                    o[(2 * j + 1) * nr] = _mm512_and_si512(_mm512_srli_epi32(x[2 * e + 1], 2 * j), m2);
                }
            }
        }
        return;
    }
    for (int gi = 0; gi < gn; gi++) {
        size_t off = (size_t)(g0 + gi) * (size_t)sh->gb;
        __m512i *o = W + (size_t)gi * 8 * (size_t)nr + h;
        if (sh->kind == K_Q4) {
            __m512i x[4];
            UNROLL for (int mm = 0; mm < 4; mm++)
                x[mm] = ld_rows4(q, mm, off, 0xF);
            tr4_512(x);
            UNROLL for (int c = 0; c < 4; c++) {
                o[c * nr] = _mm512_and_si512(x[c], m4);
                o[(4 + c) * nr] = _mm512_and_si512(_mm512_srli_epi16(x[c], 4), m4);
            }
        } else {
            UNROLL for (int e = 0; e < 2; e++) {
                __m512i x[4];
                UNROLL for (int mm = 0; mm < 4; mm++)
                    x[mm] = ld_rows4(q, mm, off + 16 * (size_t)e, 0xF);
                tr4_512(x);
                UNROLL for (int c = 0; c < 4; c++)
                    o[(4 * e + c) * nr] = _mm512_xor_si512(x[c], x80);
            }
        }
    }
}


/* ---- x16 layout (lib/cpu/qlayout.c): 16 rows = 16 lanes ------------------ */

/* Bytes of one record: a scale per row, then its groups' quants. */
static size_t x16_rec(int kind, int gsh)
{
    return 32 + ((size_t)16 * (kind == K_Q8 ? 32 : 16) << gsh);
}

/* Record and quants of 32-column group g of block blk. */
INL void x16_at(int kind, int gsh, const uint8_t *blk, int g, const uint8_t **rec, const uint8_t **q)
{
    *rec = blk + (size_t)(g >> gsh) * x16_rec(kind, gsh);
    *q = *rec + 32 + (size_t)(g & ((1 << gsh) - 1)) * 16 * (kind == K_Q8 ? 32 : 16);
}

/* The exact isum of group g for the 16 rows (lane = row): the weights
 * enter as u8 (q4 u = nibble, q8 u = q + 128), corrected by -8 psum or
 * -128 psum. Two chains, added at the end (integers: exact). */
__attribute__((target(T_512))) INL __m512i x16_isum(int kind, const uint8_t *q, const int8_t *pg, int32_t ps)
{
    __m512i a0, a1 = _mm512_setzero_si512();
    if (kind == K_Q4) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        a0 = _mm512_set1_epi32(-8 * ps);
        UNROLL for (int k = 0; k < 4; k++) {
            __m512i v = _mm512_loadu_si512((const void *)(q + 64 * k));
            a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(v, m4), _mm512_set1_epi32(load_i32(pg + 8 * k)));
            a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                     _mm512_set1_epi32(load_i32(pg + 8 * k + 4)));
        }
    } else {
        const __m512i x80 = _mm512_set1_epi8((char)0x80);
        a0 = _mm512_set1_epi32(-128 * ps);
        UNROLL for (int k = 0; k < 8; k += 2) {
            __m512i v0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k)), x80);
            __m512i v1 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k + 64)), x80);
            a0 = _mm512_dpbusd_epi32(a0, v0, _mm512_set1_epi32(load_i32(pg + 4 * k)));
            a1 = _mm512_dpbusd_epi32(a1, v1, _mm512_set1_epi32(load_i32(pg + 4 * k + 4)));
        }
    }
    return _mm512_add_epi32(a0, a1);
}

/* x16_isum of group g for two tokens, a and b, at once: the quants are
 * unpacked once for both (the same integers, so the same sums). */
__attribute__((target(T_512))) INL void x16_isum2(int kind, const uint8_t *q, const int8_t *pa, int32_t psa,
                                                  const int8_t *pb, int32_t psb, __m512i *ia, __m512i *ib)
{
    __m512i a0, a1 = _mm512_setzero_si512(), b0, b1 = _mm512_setzero_si512();
    if (kind == K_Q4) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        a0 = _mm512_set1_epi32(-8 * psa);
        b0 = _mm512_set1_epi32(-8 * psb);
        UNROLL for (int k = 0; k < 4; k++) {
            __m512i v = _mm512_loadu_si512((const void *)(q + 64 * k));
            __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            a0 = _mm512_dpbusd_epi32(a0, lo, _mm512_set1_epi32(load_i32(pa + 8 * k)));
            a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_set1_epi32(load_i32(pa + 8 * k + 4)));
            b0 = _mm512_dpbusd_epi32(b0, lo, _mm512_set1_epi32(load_i32(pb + 8 * k)));
            b1 = _mm512_dpbusd_epi32(b1, hi, _mm512_set1_epi32(load_i32(pb + 8 * k + 4)));
        }
    } else {
        const __m512i x80 = _mm512_set1_epi8((char)0x80);
        a0 = _mm512_set1_epi32(-128 * psa);
        b0 = _mm512_set1_epi32(-128 * psb);
        UNROLL for (int k = 0; k < 8; k += 2) {
            __m512i v0 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k)), x80);
            __m512i v1 = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k + 64)), x80);
            a0 = _mm512_dpbusd_epi32(a0, v0, _mm512_set1_epi32(load_i32(pa + 4 * k)));
            a1 = _mm512_dpbusd_epi32(a1, v1, _mm512_set1_epi32(load_i32(pa + 4 * k + 4)));
            b0 = _mm512_dpbusd_epi32(b0, v0, _mm512_set1_epi32(load_i32(pb + 4 * k)));
            b1 = _mm512_dpbusd_epi32(b1, v1, _mm512_set1_epi32(load_i32(pb + 4 * k + 4)));
        }
    }
    *ia = _mm512_add_epi32(a0, a1);
    *ib = _mm512_add_epi32(b0, b1);
}

/* The scales of a record, f32, lane = row. */
__attribute__((target(T_512))) INL __m512 x16_scales(const uint8_t *rec)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)rec));
}

/* How far ahead of the group it is on a pair of tokens prefetches the
 * block's stream of records (into L2). Two tokens' arithmetic keeps the
 * core busy long enough that the hardware prefetcher alone falls behind:
 * with it, a pair over a matrix in memory costs what one token does. One
 * token prefetches further ahead, or not at all (X16_PF1_BYTES). */
#define X16_PF_BYTES 2048

/* Prefetches the lines of one group's share of the record stream (n
 * bytes), X16_PF_BYTES past q (the group's quants; the address may lie
 * past the matrix: a prefetch never faults, and it is formed as an
 * integer). The lines of q + 64k, k < ceil(n / 64), reach up to where the
 * next group's begin, so together the groups leave no line out. */
INL void x16_prefetch(int kind, int gsh, const uint8_t *q, size_t ahead)
{
    const size_t n = x16_rec(kind, gsh) >> gsh;
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch((const void *)((uintptr_t)q + ahead + o), 0, 1);
}

/* How far ahead one token prefetches, where it does (pf1 below,
 * coli__q_x16_pf1): on a Zen 5 guest decode of the benchmark model ran
 * 16-27 % (q4) and 15-23 % (q8) faster at 4 KiB, about as fast at 2 KiB as
 * without, slower at 1 KiB; on the H200 machine's Xeon with 16 threads,
 * a median 9 % faster over 24 pairs (17 faster, a noisy guest). On Zen 4
 * it was slower, so there it is left to the hardware (docs/performance.md). */
#define X16_PF1_BYTES 4096

/* acc + group g's term of block blk's 16 rows (fpart16). */
__attribute__((target(T_512))) INL __m512 x16_group(int kind, int gsh, const uint8_t *blk, int g, const int8_t *pt,
                                                    const float *st, const int32_t *pst, __m512 acc)
{
    const uint8_t *rec, *q;
    x16_at(kind, gsh, blk, g, &rec, &q);
    const __m512 D = x16_scales(rec), S = _mm512_set1_ps(st[g]);
    return fpart16(kind, acc, x16_isum(kind, q, pt + 32 * g, pst[g]), D, D, S, S);
}


/* Decode: block after block, P_k of the 16 rows in 8 registers (group
 * 8j + J into P[J]), one sequential stream of records. */
__attribute__((target(T_512))) INL void x16_direct_body(int kind, int gsh, int pf1, const coli__qmat *w,
                                                        const qshape *sh, int r0, int r1, int n_tok,
                                                        const int8_t *p, const float *s, const int32_t *psum,
                                                        float *y, size_t ys)
{
    const int ng = sh->ng;
    const size_t bb = coli__q_x16_block_bytes(w->type, w->group, w->cols);
    for (int b = r0 / 16; 16 * b < r1; b++) {
        const uint8_t *blk = w->qs + (size_t)b * bb;
        const __mmask16 km = coli__lanes16(r0 - 16 * b, r1 - 16 * b);
        int t = 0;
        /* tokens in pairs: each record unpacked once for two (each
         * token's float steps are x16_group's, in its order) */
        for (; t + 1 < n_tok; t += 2) {
            const int8_t *pa = p + (size_t)t * (size_t)sh->cols, *pb = pa + sh->cols;
            const float *sa = s + (size_t)t * (size_t)ng, *sb = sa + ng;
            const int32_t *qa = psum + (size_t)t * (size_t)ng, *qb = qa + ng;
            __m512 P[8], Q[8];
            UNROLL for (int k = 0; k < 8; k++)
                P[k] = Q[k] = _mm512_setzero_ps();
            for (int g = 0; g < ng; g++) {
                const uint8_t *rec, *q;
                x16_at(kind, gsh, blk, g, &rec, &q);
                if (t == 0) /* later pairs find the block in L1 */
                    x16_prefetch(kind, gsh, q, X16_PF_BYTES);
                const __m512 D = x16_scales(rec), Sa = _mm512_set1_ps(sa[g]), Sb = _mm512_set1_ps(sb[g]);
                __m512i ia, ib;
                x16_isum2(kind, q, pa + 32 * g, qa[g], pb + 32 * g, qb[g], &ia, &ib);
                P[g & 7] = fpart16(kind, P[g & 7], ia, D, D, Sa, Sa);
                Q[g & 7] = fpart16(kind, Q[g & 7], ib, D, D, Sb, Sb);
            }
            const __m512 oa = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(P[0], P[4]), _mm512_add_ps(P[2], P[6])),
                                            _mm512_add_ps(_mm512_add_ps(P[1], P[5]), _mm512_add_ps(P[3], P[7])));
            const __m512 ob = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(Q[0], Q[4]), _mm512_add_ps(Q[2], Q[6])),
                                            _mm512_add_ps(_mm512_add_ps(Q[1], Q[5]), _mm512_add_ps(Q[3], Q[7])));
            _mm512_mask_storeu_ps(y + (size_t)t * ys + 16 * (size_t)b, km, oa);
            _mm512_mask_storeu_ps(y + (size_t)(t + 1) * ys + 16 * (size_t)b, km, ob);
        }
        for (; t < n_tok; t++) {
            const int8_t *pt = p + (size_t)t * (size_t)sh->cols;
            const float *st = s + (size_t)t * (size_t)ng;
            const int32_t *pst = psum + (size_t)t * (size_t)ng;
            __m512 P[8];
            UNROLL for (int k = 0; k < 8; k++)
                P[k] = _mm512_setzero_ps();
            int g = 0;
            for (; g + 8 <= ng; g += 8)
                UNROLL for (int J = 0; J < 8; J++) {
                    if (pf1 && t == 0) {
                        const uint8_t *rec, *q;
                        x16_at(kind, gsh, blk, g + J, &rec, &q);
                        x16_prefetch(kind, gsh, q, X16_PF1_BYTES);
                    }
                    P[J] = x16_group(kind, gsh, blk, g + J, pt, st, pst, P[J]);
                }
            UNROLL for (int J = 0; J < 7; J++) /* the last ng % 8 groups */
                if (g + J < ng)
                    P[J] = x16_group(kind, gsh, blk, g + J, pt, st, pst, P[J]);
            const __m512 o = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(P[0], P[4]), _mm512_add_ps(P[2], P[6])),
                                           _mm512_add_ps(_mm512_add_ps(P[1], P[5]), _mm512_add_ps(P[3], P[7])));
            _mm512_mask_storeu_ps(y + (size_t)t * ys + 16 * (size_t)b, km, o);
        }
    }
}

__attribute__((target(T_512))) INL void x16_direct(int pf1, const coli__qmat *w, int r0, int r1, int n_tok,
                                                   const int8_t *p, const float *s, const int32_t *psum, float *y,
                                                   size_t ys)
{
    const qshape sh = shape_of(w);
    if (sh.kind == K_Q8)
        x16_direct_body(K_Q8, 0, pf1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 0)
        x16_direct_body(K_Q4, 0, pf1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else if (sh.gsh == 1)
        x16_direct_body(K_Q4, 1, pf1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
    else
        x16_direct_body(K_Q4, 2, pf1, w, &sh, r0, r1, n_tok, p, s, psum, y, ys);
}

/* Prefill: groups [g0, g0 + gn) of x16 block b as the repacked kernel's
 * buffers (see repack16 and repack_scales16), half h of nr. */
__attribute__((target(T_512))) static void x16_repack(const coli__qmat *w, const qshape *sh, int b, int g0, int gn,
                                                      __m512i *W, float *df, int nr, int h)
{
    const int kind = sh->kind, gsh = sh->gsh;
    const uint8_t *blk = w->qs + (size_t)b * coli__q_x16_block_bytes(w->type, w->group, w->cols);
    const __m512i m4 = _mm512_set1_epi8(0x0F), x80 = _mm512_set1_epi8((char)0x80);
    for (int gi = 0; gi < gn; gi++) {
        const uint8_t *rec, *q;
        x16_at(kind, gsh, blk, g0 + gi, &rec, &q);
        __m512i *o = W + (size_t)gi * 8 * (size_t)nr + h;
        if (kind == K_Q4) {
            UNROLL for (int k = 0; k < 4; k++) {
                __m512i v = _mm512_loadu_si512((const void *)(q + 64 * k));
                o[2 * k * nr] = _mm512_and_si512(v, m4);
                o[(2 * k + 1) * nr] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        } else {
            UNROLL for (int k = 0; k < 8; k++)
                o[k * nr] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(q + 64 * k)), x80);
        }
        _mm512_store_ps(df + (gi * nr + h) * 16, x16_scales(rec));
    }
}

/* nt tokens (1..4) x nr halves of 16 rows (1 or 2), constants after
 * inlining, over groups [g0, g0 + gn) of the repacked chunk. Token u's
 * quants are at p + u * pstr, its scales at s + u * sstr, its sums' start
 * values (pf16_starts) at c + u * PF_GC, its partial sums at P + u * Pstr,
 * [k][h][row]. Each broadcast activation feeds nr dpbusd, each weight
 * vector nt. Every per-token value is read from memory by a broadcast, and
 * one base pointer per array with a stride addresses all tokens, so that
 * the loop needs few registers besides the vectors and no scalar work
 * reaches the vector pipes. */
__attribute__((target(T_512))) INL void pf16_tokens(int kind, int nr, int nt, const __m512i *W, const float *df,
                                                    const float *mf, int g0, int gn, const int8_t *p, size_t pstr,
                                                    const float *s, const int32_t *c, const float *cf, size_t sstr,
                                                    float *P, size_t Pstr)
{
    for (int gi = 0; gi < gn; gi++) {
        const int g = g0 + gi;
        const __m512i *wg = W + (size_t)gi * 8 * (size_t)nr;
        __m512i acc[2][4];
        UNROLL for (int u = 0; u < nt; u++) {
            acc[0][u] = kind == K_Q2 ? _mm512_setzero_si512() : _mm512_set1_epi32(c[u * PF_GC + gi]);
            if (nr > 1)
                acc[1][u] = acc[0][u];
        }
        UNROLL for (int k = 0; k < 8; k++) {
            __m512i wk[2];
            UNROLL for (int h = 0; h < nr; h++)
                wk[h] = _mm512_load_si512((const void *)(wg + k * nr + h));
            UNROLL for (int u = 0; u < nt; u++) {
                const __m512i b = _mm512_set1_epi32(load_i32(p + (size_t)u * pstr + (size_t)g * 32 + 4 * (size_t)k));
                UNROLL for (int h = 0; h < nr; h++)
                    acc[h][u] = _mm512_dpbusd_epi32(acc[h][u], wk[h], b);
            }
        }
        const float *dg = df + (size_t)gi * 16 * (size_t)nr;
        const float *mg = mf + (size_t)gi * 16 * (size_t)nr;
        UNROLL for (int u = 0; u < nt; u++) {
            const __m512 sv = _mm512_set1_ps(s[(size_t)u * sstr + (size_t)g]);
            const __m512 fps = kind == K_Q2 ? _mm512_set1_ps(cf[u * PF_GC + gi]) : sv;
            UNROLL for (int h = 0; h < nr; h++) {
                float *pk = P + (size_t)u * Pstr + (size_t)(((g & 7) * nr + h) * 16);
                __m512 D = _mm512_load_ps(dg + 16 * h);
                __m512 M = kind == K_Q2 ? _mm512_load_ps(mg + 16 * h) : D;
                const __m512 prev = g < 8 ? _mm512_setzero_ps() : _mm512_load_ps(pk); /* P_k starts at +0 */
                _mm512_store_ps(pk, fpart16(kind, prev, acc[h][u], D, M, sv, fps));
            }
        }
    }
}

__attribute__((target(T_512))) static void pf16_run(int kind, int nr, int nt, const __m512i *W, const float *df,
                                                    const float *mf, int g0, int gn, const int8_t *p, size_t pstr,
                                                    const float *s, const int32_t *c, const float *cf, size_t sstr,
                                                    float *P, size_t Pstr)
{
#define PF16(K, R, N) pf16_tokens(K, R, N, W, df, mf, g0, gn, p, pstr, s, c, cf, sstr, P, Pstr)
#define PF16N(K, R)                                                                                             \
    switch (nt) {                                                                                               \
    case 4: PF16(K, R, 4); break;                                                                               \
    case 3: PF16(K, R, 3); break;                                                                               \
    case 2: PF16(K, R, 2); break;                                                                               \
    default: PF16(K, R, 1); break;                                                                              \
    }
#define PF16K(K)                                                                                                \
    if (nr == 2) {                                                                                              \
        PF16N(K, 2)                                                                                             \
    } else {                                                                                                    \
        PF16N(K, 1)                                                                                             \
    }
    if (kind == K_Q8) {
        PF16K(K_Q8)
    } else if (kind == K_Q4) {
        PF16K(K_Q4)
    } else {
        PF16K(K_Q2)
    }
#undef PF16K
#undef PF16N
#undef PF16
}

/* The start value of each integer sum of a chunk, for tb tokens from
 * token t: -8 psum (q4, whose nibbles enter as u = q + 8) or -128 psum
 * (q8, u = q + 128) into c; q2 starts at 0 and takes psum as a float,
 * into cf (the same buffer: one kind a call). */
__attribute__((target(T_512))) static void pf16_starts(int kind, const int32_t *psum, int ng, int t, int tb, int g0,
                                                       int gn, int32_t *c, float *cf)
{
    _Static_assert(PF_GC % 16 == 0, "a chunk's starts are whole vectors");
    const int sh = kind == K_Q8 ? 7 : 3; /* -128 psum or -8 psum, exact */
    for (int u = 0; u < tb; u++) {
        const int32_t *ps = psum + (size_t)(t + u) * (size_t)ng + g0;
        for (int gi = 0; gi < gn; gi += 16) {
            const __m512i v = _mm512_maskz_loadu_epi32(coli__lanes16(0, gn - gi), ps + gi);
            if (kind == K_Q2)
                _mm512_store_ps(cf + u * PF_GC + gi, _mm512_cvtepi32_ps(v));
            else
                _mm512_store_si512((void *)(c + u * PF_GC + gi),
                                   _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(v, sh)));
        }
    }
}

__attribute__((target(T_512))) static void repacked_512(const coli__qmat *w, int r0, int r1, int n_tok,
                                                        const int8_t *p, const float *s, const int32_t *psum,
                                                        float *y, size_t ys)
{
    const qshape sh = shape_of(w);
    _Alignas(64) __m512i W[PF_GC * 16];
    _Alignas(64) float df[PF_GC * 32], mf[PF_GC * 32];
    _Alignas(64) float P[PF_TB * 256];
    _Alignas(64) union {
        int32_t i[PF_TB * PF_GC];
        float f[PF_TB * PF_GC];
    } cb; /* pf16_starts */
    const int nch = (sh.ng + PF_GC - 1) / PF_GC;
    /* x16: whole blocks, rows outside [r0, r1) computed but not stored */
    const int x16 = w->layout == COLI__QL_X16;
    const int rb0 = x16 ? r0 & ~15 : r0, rb1 = x16 ? (r1 + 15) & ~15 : r1;
    for (int r = rb0; r < rb1; r += 32) {
        const int rr = rb1 - r < 32 ? rb1 - r : 32;
        const int nr = rr > 16 ? 2 : 1;
        const int pstride = 128 * nr; /* floats of P per token */
        rowset rs;
        if (!x16)
            rowset_init(&rs, w, &sh, r, rr, 16 * nr);
        for (int t0 = 0; t0 < n_tok; t0 += PF_TB) {
            const int tb = n_tok - t0 < PF_TB ? n_tok - t0 : PF_TB;
            if (sh.ng < 8) /* else groups 0-7 start every P_k (pf16_tokens) */
                memset(P, 0, (size_t)tb * (size_t)pstride * sizeof(float));
            for (int ch = 0; ch < nch; ch++) {
                const int g0 = ch * PF_GC, gn = sh.ng - g0 < PF_GC ? sh.ng - g0 : PF_GC;
                if (nch > 1 || t0 == 0) {
                    for (int h = 0; h < nr; h++) {
                        if (x16) {
                            x16_repack(w, &sh, r / 16 + h, g0, gn, W, df, nr, h);
                            continue;
                        }
                        repack16(&rs, 16 * h, &sh, g0, gn, W, nr, h);
                        repack_scales16(&rs, 16 * h, &sh, g0, gn, df, mf, nr, h);
                    }
                }
                pf16_starts(sh.kind, psum, sh.ng, t0, tb, g0, gn, cb.i, cb.f);
                for (int t = t0; t < t0 + tb; t += 4) {
                    const int nt = t0 + tb - t < 4 ? t0 + tb - t : 4;
                    pf16_run(sh.kind, nr, nt, W, df, mf, g0, gn, p + (size_t)t * (size_t)sh.cols, (size_t)sh.cols,
                             s + (size_t)t * (size_t)sh.ng, cb.i + (t - t0) * PF_GC, cb.f + (t - t0) * PF_GC,
                             (size_t)sh.ng, P + (size_t)(t - t0) * (size_t)pstride, (size_t)pstride);
                }
            }
            for (int t = t0; t < t0 + tb; t++) {
                const float *pk = P + (size_t)(t - t0) * (size_t)pstride;
                for (int h = 0; h < nr; h++) {
                    const int at = r + 16 * h;
                    __m512 v[8];
                    UNROLL for (int k = 0; k < 8; k++)
                        v[k] = _mm512_load_ps(pk + (k * nr + h) * 16);
                    __m512 o = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                             _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
                    _mm512_mask_storeu_ps(y + (size_t)t * ys + (size_t)at, coli__lanes16(r0 - at, r1 - at), o);
                }
            }
        }
    }
}

/* Below this many tokens the direct kernel beats repacking (all formats).
 * For q8 it is the AVX2 one: an AVX-512 4-row q8 kernel, twice as fast on
 * a matrix in cache, streamed one from memory slower (on Zen 4, 15 against
 * 21 GB/s on one core; decode of the q8 1B model 7% slower). */
#define AVX512_PF_MIN_TOK 4
/* The same for the x16 layout, whose direct kernel takes tokens in pairs
 * (each record unpacked once for two) and prefetches: a 384 x 1024 q4
 * matrix on an Intel Xeon, 8 tokens in pairs against repacked, 26.8
 * against 27.8 us in cache, 35 against 40 from memory (4 tokens: 13.4
 * against 18.4, 22 against 30). */
#define X16_PF_MIN_TOK 9

__attribute__((target(T_512))) INL void gemm_512_body(int pf1, const coli__qmat *w, int r0, int r1, int n_tok,
                                                      const int8_t *p, const float *s, const int32_t *psum,
                                                      float *y, size_t y_stride)
{
    if (r1 <= r0 || n_tok <= 0)
        return;
    if (n_tok >= (w->layout == COLI__QL_X16 ? X16_PF_MIN_TOK : AVX512_PF_MIN_TOK))
        repacked_512(w, r0, r1, n_tok, p, s, psum, y, y_stride);
    else if (w->layout == COLI__QL_X16)
        x16_direct(pf1, w, r0, r1, n_tok, p, s, psum, y, y_stride);
    else
        direct_512(w, r0, r1, n_tok, p, s, psum, y, y_stride);
}

__attribute__((target(T_512))) static void gemm_512(const coli__qmat *w, int r0, int r1, int n_tok,
                                                    const int8_t *p, const float *s, const int32_t *psum,
                                                    float *y, size_t y_stride)
{
    gemm_512_body(0, w, r0, r1, n_tok, p, s, psum, y, y_stride);
}

/* The same products, one token prefetching ahead (X16_PF1_BYTES). */
__attribute__((target(T_512))) static void gemm_512_pf1(const coli__qmat *w, int r0, int r1, int n_tok,
                                                        const int8_t *p, const float *s, const int32_t *psum,
                                                        float *y, size_t y_stride)
{
    gemm_512_body(1, w, r0, r1, n_tok, p, s, psum, y, y_stride);
}

/* ---- activations ------------------------------------------------------ */

/* coli__q_quantize_act 16 lanes at a time: the exact maximum of the
 * magnitudes' bits, the operations of lib/cpu/qround.h per value (one f32
 * multiplication, then + and - 1.5 * 2^23, each rounded on its own), the
 * exact sum. A group whose t overflows takes qround.h's scalar path. */
__attribute__((target(T_512))) static void act_512(const float *a, int cols, int8_t *p, float *s, int32_t *psum)
{
    const __m512i mag = _mm512_set1_epi32(0x7fffffff);
    const __m512 big = _mm512_set1_ps(12582912.0f);
    for (int g = 0; g < cols / COLI_QK; g++) {
        const float *x = a + COLI_QK * g;
        int8_t *pg = p + COLI_QK * g;
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), mag),
                                           _mm512_and_si512(_mm512_castps_si512(x1), mag));
        const uint32_t mb = _mm512_reduce_max_epu32(m);
        float amax;
        memcpy(&amax, &mb, sizeof amax);
        s[g] = coli__qact_scale(amax);
        if (amax == 0.0f) {
            memset(pg, 0, COLI_QK);
            psum[g] = 0;
            continue;
        }
        const float t = coli__qact_mul(amax);
        if (!coli__qact_finite(t)) {
            int32_t sum = 0;
            for (int i = 0; i < COLI_QK; i++) {
                int q = coli__qact_round_inf(x[i], t);
                pg[i] = (int8_t)q;
                sum += q;
            }
            psum[g] = sum;
            continue;
        }
        const __m512 T = _mm512_set1_ps(t);
        __m512 v0 = _mm512_mul_ps(x0, T), v1 = _mm512_mul_ps(x1, T);
        KEEP512(v0);
        KEEP512(v1);
        __m512 r0 = _mm512_add_ps(v0, big), r1 = _mm512_add_ps(v1, big);
        KEEP512(r0);
        KEEP512(r1);
        const __m512i q0 = _mm512_cvttps_epi32(_mm512_sub_ps(r0, big));
        const __m512i q1 = _mm512_cvttps_epi32(_mm512_sub_ps(r1, big));
        _mm_storeu_si128((__m128i *)(void *)pg, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(void *)(pg + 16), _mm512_cvtepi32_epi8(q1));
        psum[g] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
}

/* ---- tables ---------------------------------------------------------- */

const coli__qkernels *coli__q_kernels_avx512_tuned(int pf1)
{
    static const coli__qkernels k = {"avx512vnni", gemm_512, act_512};
    static const coli__qkernels k_pf1 = {"avx512vnni", gemm_512_pf1, act_512};
    const unsigned need = COLI_CPU_AVX2 | COLI_CPU_F16C | COLI_CPU_AVX512 | COLI_CPU_AVX512VNNI;
    if ((coli__cpu_features() & need) != need)
        return NULL;
    return pf1 ? &k_pf1 : &k;
}

const coli__qkernels *coli__q_kernels_avx512(void)
{
    return coli__q_kernels_avx512_tuned(coli__q_x16_pf1(coli__cpu_features()));
}

#else /* not x86-64 GCC/Clang */

const coli__qkernels *coli__q_kernels_avx512_tuned(int pf1)
{
    (void)pf1;
    return NULL;
}

const coli__qkernels *coli__q_kernels_avx512(void)
{
    return NULL;
}

#endif

int coli__q_x16_pf1(unsigned cpu_features)
{
    return !(cpu_features & COLI_CPU_AMD) || (cpu_features & COLI_CPU_AMD_1AH);
}
