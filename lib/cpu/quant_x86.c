/* quant_x86.c - AVX2 and AVX-512 VNNI kernels for the quantized formats
 * q8, q4 and q2 (internal).
 *
 * Every kernel here computes exactly the arithmetic of docs/formats.md: the
 * integer group sums isum_g are exact int32, the group value is
 * f32(isum_g) * (D * s_g) [+ f32(psum_g) * (M * s_g) for q2] with one
 * rounding per operation (no FMA: see KEEP below), the eight partial sums
 * P_k live in the eight lanes of a float vector (lane k takes the groups
 * g = 8j + k in increasing j) and the final sum is
 * ((P0+P4)+(P2+P6))+((P1+P5)+(P3+P7)).
 *
 * Two engines per instruction set:
 *
 * - "direct" (decode, few tokens): a block of rows (4 for AVX-512 q4 and
 *   q2, 2 for AVX2 and for q8 in both sets) streams its quants straight
 *   from the matrix, 8 groups at a time, sharing each activation load,
 *   prefetching the same bytes about PF_BYTES further on. The exact int32 sums of 8 consecutive groups are
 *   transpose-reduced into one 8-lane vector (lane k = group 8j + k),
 *   converted to float (exact), scaled lane-wise and added to the 8-lane
 *   accumulator: that is exactly P_k (AVX-512 keeps two rows in one 16-lane
 *   vector). The activations are regrouped in registers (once per row
 *   block) to match the nibble / bit-pair layout of q4 / q2, so the weights
 *   need no shuffles. A tail of nt = n_groups % 8 groups runs through the
 *   same code in place, with ng = nt: every load is cut at the end of the
 *   tail's bytes (masked or skipped loads, nothing past the row is read),
 *   so the lanes k >= nt see zero quants, activations and scales and add
 *   f32(0) * (0 * 0) [+ 0 * (0 * 0)] = +0 to P_k. That is exact, as if P_k
 *   received nothing: P_k is never -0 (it starts at +0, and x + y is -0
 *   only when both are -0), and x + (+0) = x for every other x.
 *
 * - "repacked" (prefill, many tokens): a block of 32 (AVX-512: two 16-lane
 *   halves) or 8 (AVX2) rows is unpacked, PF_GC groups at a time, into an
 *   L1 buffer laid out "lane = row": for group g and 4-column step k, one
 *   vector holds the 4 weights (as u8) of every row. A token's 4
 *   activations of step k are broadcast, so dpbusd / maddubs accumulate the
 *   exact isum_g of all rows at once with no horizontal reduction; the
 *   float part then runs lane = row, with the partial sums P_k of every
 *   (token, row) kept in a small array. Each loaded weight vector serves 4
 *   tokens, each broadcast 2 halves.
 *
 * The weights enter the integer dot as unsigned bytes u with an exact
 * correction: q8 u = q + 128 (isum = sum u*p - 128 psum, AVX-512 repacked only),
 * q4 u = nibble (isum = sum u*p - 8 psum), q2 u = q. AVX2 maddubs would
 * saturate on q + 128, so the AVX2 q8 kernels use |q| and sign-adjusted
 * activations instead (exact: pair sums are at most 2*127*127, as p is
 * never -128). Both corrections use psum = sum p (the definition).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/qround.h"
#include "cpu/mask16.h"
#include "cpu/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T_AVX2 "avx2,f16c"
#define T_512 "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define INL static inline __attribute__((always_inline))

/* An empty asm that makes v opaque: a product passed through it cannot be
 * fused with the following addition into an FMA, whatever -ffp-contract the
 * file is compiled with. */
#define KEEP(v) __asm__("" : "+x"(v))
#define KEEP512(v) __asm__("" : "+v"(v))

enum { K_Q8, K_Q4, K_Q2 };

/* Shape of a matrix as the kernels see it. */
typedef struct qshape {
    int kind;    /* K_Q8, K_Q4, K_Q2 */
    int cols;
    int ng;      /* groups of 32 per row */
    int gsh;     /* log2(weight group / 32): scale of group g is d[g >> gsh] */
    int nd;      /* scales per row */
    size_t rb;   /* quant bytes per row */
    int gb;      /* quant bytes per group of 32 */
} qshape;

static qshape shape_of(const coli__qmat *w)
{
    qshape q;
    q.cols = w->cols;
    q.ng = w->cols / 32;
    if (w->type == COLI_DT_Q8) {
        q.kind = K_Q8;
        q.gb = 32;
    } else if (w->type == COLI_DT_Q4) {
        q.kind = K_Q4;
        q.gb = 16;
    } else {
        q.kind = K_Q2;
        q.gb = 8;
    }
    int g = q.kind == K_Q4 ? w->group : 32;
    q.gsh = g == 128 ? 2 : g == 64 ? 1 : 0;
    q.nd = w->cols / g;
    q.rb = (size_t)q.ng * (size_t)q.gb;
    return q;
}

static int32_t load_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ===================================================================== */
/* AVX2 (+F16C)                                                          */
/* ===================================================================== */

#define UNROLL _Pragma("GCC unroll 16")

/* How far ahead of the current row block the direct kernels prefetch, in
 * bytes of quants (at least PF_MIN_ROWS rows). On Zen 4, one core streaming
 * 384 x 1024 q4 experts reads about 20 GB/s with 8 KiB ahead, 13 GB/s with
 * 2 KiB (docs/performance.md). */
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif
#define PF_MIN_ROWS 4

static size_t pf_rows(size_t rb)
{
    size_t n = (PF_BYTES + rb - 1) / rb;
    return n < PF_MIN_ROWS ? PF_MIN_ROWS : n;
}

/* Prefetches the n bytes at p + off (off may point past the object: a
 * prefetch never faults, and the address is formed as an integer) into L2
 * (prefetcht2): an L1 prefetch holds one of the few L1 miss buffers until
 * the line arrives, which caps one core at a third of its bandwidth. */
static inline __attribute__((always_inline)) void prefetch(const void *p, size_t off, size_t n)
{
    for (size_t o = 0; o < n; o += 64)
        __builtin_prefetch((const void *)((uintptr_t)p + off + o), 0, 1);
}

/* The first rows a direct kernel reads, [r0, r0 + n) of w (n = pf_rows
 * clipped to the chunk), which its running prefetch does not cover: without
 * this, every chunk began with a row block's worth of demand misses. */
static inline __attribute__((always_inline)) void prefetch_start(const coli__qmat *w, size_t rb, size_t nd,
                                                                 int r0, int r1)
{
    size_t n = pf_rows(rb);
    if ((size_t)(r1 - r0) < n)
        n = (size_t)(r1 - r0);
    prefetch(w->qs, (size_t)r0 * rb, n * rb);
    prefetch(w->d, (size_t)r0 * nd * 2, n * nd * 2);
    if (w->type == COLI_DT_Q2)
        prefetch(w->m, (size_t)r0 * (rb / 8) * 2, n * (rb / 8) * 2);
}

/* The 8 fp16 scales of groups 8j..8j+7, d pointing at the scale of group
 * 8j (gsh = log2(G/32)). */
__attribute__((target(T_AVX2))) INL __m128i ld_d8(const uint16_t *d, int gsh)
{
    if (gsh == 0)
        return _mm_loadu_si128((const __m128i *)d);
    if (gsh == 1) {
        __m128i x = _mm_loadl_epi64((const __m128i *)d);
        return _mm_unpacklo_epi16(x, x);
    }
    __m128i x = _mm_cvtsi32_si128(load_i32(d));
    x = _mm_unpacklo_epi16(x, x);
    return _mm_unpacklo_epi32(x, x);
}

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

__attribute__((target(T_AVX2))) static void direct_avx2(const coli__qmat *w, int r0, int r1, int n_tok,
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

/* Repacked kernels: groups per chunk (a multiple of 4; the chunk's unpacked
 * weights take PF_GC KiB per 32 rows and stay in L1) and tokens per block
 * (their partial sums take PF_TB KiB per 32 rows). All buffers are on the
 * stack: about 76 KiB for AVX-512, 26 KiB for AVX2. */
#define PF_GC 32
#define PF_TB 32
_Static_assert(PF_GC >= 8, "the first chunk's groups 0-7 start every partial sum P_k");

/* Row pointers of a row block (rows past the end repeat the last one). */
typedef struct rowset {
    const uint8_t *q[32];
    const uint16_t *d[32];
    const uint16_t *m[32];
} rowset;

static void rowset_init(rowset *rs, const coli__qmat *w, const qshape *sh, int r, int rr, int n)
{
    for (int i = 0; i < n; i++) {
        int ri = r + (i < rr ? i : rr - 1);
        rs->q[i] = w->qs + (size_t)ri * sh->rb;
        rs->d[i] = w->d + (size_t)ri * (size_t)sh->nd;
        rs->m[i] = sh->kind == K_Q2 ? w->m + (size_t)ri * (size_t)sh->ng : NULL;
    }
}

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
        direct_avx2(w, r0, r1, n_tok, p, s, psum, y, y_stride);
}

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
        direct_avx2(w, r0, r1, n_tok, p, s, psum, y, ys);
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
 * token is left to the hardware, which was faster on Zen 4 and the same on
 * an Intel Xeon (docs/performance.md). */
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
 * inlining, over groups [g0, g0 + gn) of the repacked chunk. P[u]: the
 * token's partial sums, [k][h][row]. Each broadcast activation feeds nr
 * dpbusd, each weight vector nt. */
__attribute__((target(T_512))) INL void pf16_tokens(int kind, int nr, int nt, const __m512i *W, const float *df,
                                                    const float *mf, int g0, int gn, const int8_t *const pt[4],
                                                    const float *const st[4], const int32_t *const pst[4],
                                                    float *const P[4])
{
    const int c = kind == K_Q8 ? 128 : kind == K_Q4 ? 8 : 0;
    for (int gi = 0; gi < gn; gi++) {
        const int g = g0 + gi;
        const __m512i *wg = W + (size_t)gi * 8 * (size_t)nr;
        __m512i acc[2][4];
        UNROLL for (int u = 0; u < nt; u++) {
            acc[0][u] = _mm512_set1_epi32(-c * pst[u][g]);
            if (nr > 1)
                acc[1][u] = acc[0][u];
        }
        UNROLL for (int k = 0; k < 8; k++) {
            __m512i wk[2];
            UNROLL for (int h = 0; h < nr; h++)
                wk[h] = _mm512_load_si512((const void *)(wg + k * nr + h));
            UNROLL for (int u = 0; u < nt; u++) {
                const __m512i b = _mm512_set1_epi32(load_i32(pt[u] + (size_t)g * 32 + 4 * (size_t)k));
                UNROLL for (int h = 0; h < nr; h++)
                    acc[h][u] = _mm512_dpbusd_epi32(acc[h][u], wk[h], b);
            }
        }
        const float *dg = df + (size_t)gi * 16 * (size_t)nr;
        const float *mg = mf + (size_t)gi * 16 * (size_t)nr;
        UNROLL for (int u = 0; u < nt; u++) {
            const __m512 sv = _mm512_set1_ps(st[u][g]);
            const __m512 fps = _mm512_set1_ps((float)pst[u][g]);
            UNROLL for (int h = 0; h < nr; h++) {
                float *pk = P[u] + ((g & 7) * nr + h) * 16;
                __m512 D = _mm512_load_ps(dg + 16 * h);
                __m512 M = kind == K_Q2 ? _mm512_load_ps(mg + 16 * h) : D;
                const __m512 prev = g < 8 ? _mm512_setzero_ps() : _mm512_load_ps(pk); /* P_k starts at +0 */
                _mm512_store_ps(pk, fpart16(kind, prev, acc[h][u], D, M, sv, fps));
            }
        }
    }
}

__attribute__((target(T_512))) static void pf16_run(int kind, int nr, int nt, const __m512i *W, const float *df,
                                                    const float *mf, int g0, int gn, const int8_t *const pt[4],
                                                    const float *const st[4], const int32_t *const pst[4],
                                                    float *const P[4])
{
#define PF16(K, R, N) pf16_tokens(K, R, N, W, df, mf, g0, gn, pt, st, pst, P)
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

__attribute__((target(T_512))) static void repacked_512(const coli__qmat *w, int r0, int r1, int n_tok,
                                                        const int8_t *p, const float *s, const int32_t *psum,
                                                        float *y, size_t ys)
{
    const qshape sh = shape_of(w);
    _Alignas(64) __m512i W[PF_GC * 16];
    _Alignas(64) float df[PF_GC * 32], mf[PF_GC * 32];
    _Alignas(64) float P[PF_TB * 256];
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
                for (int t = t0; t < t0 + tb; t += 4) {
                    const int nt = t0 + tb - t < 4 ? t0 + tb - t : 4;
                    const int8_t *pt[4];
                    const float *st[4];
                    const int32_t *pst[4];
                    float *Pt[4];
                    for (int u = 0; u < 4; u++) {
                        int tu = t + (u < nt ? u : 0);
                        pt[u] = p + (size_t)tu * (size_t)sh.cols;
                        st[u] = s + (size_t)tu * (size_t)sh.ng;
                        pst[u] = psum + (size_t)tu * (size_t)sh.ng;
                        Pt[u] = P + (size_t)(tu - t0) * (size_t)pstride;
                    }
                    pf16_run(sh.kind, nr, nt, W, df, mf, g0, gn, pt, st, pst, Pt);
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

const coli__qkernels *coli__q_kernels_avx2(void)
{
    static const coli__qkernels k = {"avx2", gemm_avx2, coli__q_quantize_act};
    const unsigned need = COLI_CPU_AVX2 | COLI_CPU_F16C;
    return (coli__cpu_features() & need) == need ? &k : NULL;
}

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

const coli__qkernels *coli__q_kernels_avx2(void)
{
    return NULL;
}

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
