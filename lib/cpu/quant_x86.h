/* quant_x86.h - AVX2 and AVX-512 VNNI kernels for the quantized formats
 * q8, q4 and q2: what the two sets share (internal; the kernels are in
 * lib/cpu/quant_avx2.c and lib/cpu/quant_avx512.c).
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
#ifndef COLI_QUANT_X86_H
#define COLI_QUANT_X86_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/quant.h"

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

static inline qshape shape_of(const coli__qmat *w)
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

static inline int32_t load_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define UNROLL _Pragma("GCC unroll 16")

/* How far ahead of the current row block the direct kernels prefetch, in
 * bytes of quants (at least PF_MIN_ROWS rows). On Zen 4, one core streaming
 * 384 x 1024 q4 experts reads about 20 GB/s with 8 KiB ahead, 13 GB/s with
 * 2 KiB (docs/performance.md). */
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif
#define PF_MIN_ROWS 4

static inline size_t pf_rows(size_t rb)
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

/* Repacked kernels: groups per chunk (a multiple of 4; the chunk's unpacked
 * weights take PF_GC KiB per 32 rows and stay in L1) and tokens per block
 * (their partial sums take PF_TB KiB per 32 rows). All buffers are on the
 * stack: about 80 KiB for AVX-512, 26 KiB for AVX2. */
#define PF_GC 32
#define PF_TB 32
_Static_assert(PF_GC >= 8, "the first chunk's groups 0-7 start every partial sum P_k");

/* Row pointers of a row block (rows past the end repeat the last one). */
typedef struct rowset {
    const uint8_t *q[32];
    const uint16_t *d[32];
    const uint16_t *m[32];
} rowset;

static inline void rowset_init(rowset *rs, const coli__qmat *w, const qshape *sh, int r, int rr, int n)
{
    for (int i = 0; i < n; i++) {
        int ri = r + (i < rr ? i : rr - 1);
        rs->q[i] = w->qs + (size_t)ri * sh->rb;
        rs->d[i] = w->d + (size_t)ri * (size_t)sh->nd;
        rs->m[i] = sh->kind == K_Q2 ? w->m + (size_t)ri * (size_t)sh->ng : NULL;
    }
}

/* The AVX2 direct kernel (lib/cpu/quant_avx2.c), which the AVX-512 set
 * takes for q8 (lib/cpu/quant_avx512.c, AVX512_PF_MIN_TOK). */
__attribute__((target(T_AVX2))) void coli__q_direct_avx2(const coli__qmat *w, int r0, int r1, int n_tok,
                                                         const int8_t *p, const float *s, const int32_t *psum,
                                                         float *y, size_t ys);

#endif

#endif
