/* attn_x86.h - the pieces the AVX2 and AVX-512 attention kernels share
 * (internal; lib/cpu/attn.c and lib/cpu/attn_avx512.c): bf16 rows widened,
 * rows asked for ahead, the trees that end a score, all in the written
 * order of docs/formats.md. */
#ifndef COLI_ATTN_X86_H
#define COLI_ATTN_X86_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "cpu/attn.h"

#define AVX2 __attribute__((target("avx2,fma")))

/* Head dimensions the vector scores keep a widened block of (larger ones
 * take the plain C path: 640 covers the 576 of a latent attention's cached
 * row, DeepSeek-V3's and GLM-5's), and how many rows ahead they prefetch. */
#define SC_MAXD 640
#define SC_AHEAD 32

/* The mix's blocks of rows (in L1 for every head of the group) and heads
 * done together; a tile is a whole number of blocks. */
#define MIX_R 64
#define MIX_HB 8
_Static_assert(COLI__ATTN_TILE % MIX_R == 0, "a tile is a whole number of the mix's blocks");

static inline size_t elem_size(coli__dtype dt)
{
    return dt == COLI_DT_BF16 ? sizeof(uint16_t) : sizeof(float);
}

AVX2 static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Asks for the lines of rows [0, r) of a block, bytes [0, len) of each,
 * ahead of their use: a KV head's rows come from memory once per token, and
 * the hardware's prefetcher alone leaves the loads waiting. Speed only. */
AVX2 static inline void prefetch_rows(const char *p, size_t stride_bytes, int r, size_t len)
{
    for (int j = 0; j < r; j++)
        for (size_t b = 0; b < len; b += 64)
            _mm_prefetch(p + (size_t)j * stride_bytes + b, _MM_HINT_T0);
}

/* Rows [0, r) of a bf16 block, dimensions [0, d) (d % 8 == 0), widened
 * into dst, rows of d floats: once, for every head that reads them. */
AVX2 static inline void widen_rows(float *dst, const uint16_t *src, size_t stride, int r, int d)
{
    for (int j = 0; j < r; j++)
        for (int i = 0; i < d; i += 8)
            _mm256_storeu_ps(dst + (size_t)j * (size_t)d + (size_t)i, load_bf16x8(src + (size_t)j * stride + (size_t)i));
}

/* ---- the mix, for any register width ----------------------------------------
 *
 * Rows in blocks of MIX_R (in L1 for every head of the group), heads
 * MIX_HB at a time, each head's eight partial sums per dimension kept in
 * st between the blocks of a tile (a tile is a whole number of blocks).
 * Head h reads its first nh[h] rows only (nh NULL: all n). W lanes a
 * register: VEC, with LOADU, STOREU, ADD, FMADD and SET1 of that width. */

/* A tile's end: U_t = ((O0 + O4) + (O2 + O6)) + ((O1 + O5) + (O3 + O7)) of
 * each head's nv registers of dimensions (st: [head][k][dw floats]), then
 * out = U_0 for the first tile, out = out + U_t after it; heads whose rows
 * ended before the tile (start t0) are done. */
#define COLI_DEFINE_TILE_END(name, ATTR, W, VEC, LOADU, STOREU, ADD)                                          \
    ATTR static void name(const float *st, int dw, float *out, size_t ostride, int hb, int nv, int first,      \
                          const int *nh, int t0)                                                              \
    {                                                                                                         \
        for (int h = 0; h < hb; h++) {                                                                        \
            if (nh && nh[h] <= t0)                                                                            \
                continue;                                                                                     \
            for (int c = 0; c < nv; c++) {                                                                    \
                const float *s = st + (size_t)h * 8 * (size_t)dw + W * (size_t)c;                             \
                VEC O[8];                                                                                     \
                for (int k = 0; k < 8; k++)                                                                   \
                    O[k] = LOADU(s + (size_t)k * (size_t)dw);                                                 \
                VEC u = ADD(ADD(ADD(O[0], O[4]), ADD(O[2], O[6])), ADD(ADD(O[1], O[5]), ADD(O[3], O[7])));    \
                float *o = out + (size_t)h * ostride + W * (size_t)c;                                         \
                STOREU(o, first ? u : ADD(LOADU(o), u));                                                      \
            }                                                                                                 \
        }                                                                                                     \
    }

/* Accumulator x of the eight in flight: row o + k0 + x / NV (chain
 * k0 + x / NV), dimensions W (x % NV) .. + W - 1. */
#define COLI_MIX_ROW(x) ((x) / NV)
#define COLI_MIX_FMA(x)                                                                                       \
    a##x = FMADD_(SET1_(wh[o + k0 + COLI_MIX_ROW(x)]),                                                        \
                  LOADU_(rows + (size_t)(o + k0 + COLI_MIX_ROW(x) - b0) * rs + W_ * ((x) % NV)), a##x)
#define COLI_MIX_FMA_IF(x)                                                                                    \
    if (o + k0 + COLI_MIX_ROW(x) < bh)                                                                        \
    COLI_MIX_FMA(x)
#define COLI_MIX_ST(x) (st + ((size_t)h * 8 + (size_t)(k0 + COLI_MIX_ROW(x))) * (W_ * NV) + W_ * ((x) % NV))
#define COLI_MIX_ALL(M) M(0); M(1); M(2); M(3); M(4); M(5); M(6); M(7)
#define COLI_MIX_LOAD(x) VEC_ a##x = LOADU_(COLI_MIX_ST(x))
#define COLI_MIX_STORE(x) STOREU_(COLI_MIX_ST(x), a##x)

/* Dimensions [0, W NV) of hb <= MIX_HB heads. Chains k0 .. k0 + 8/NV - 1
 * run together, NV registers each: eight FMA chains always in flight.
 * The caller defines VEC_, W_, LOADU_, STOREU_, FMADD_ and SET1_. */
#define COLI_DEFINE_MIX(name, NV_, ATTR, TILE_END)                                                            \
    ATTR static void name(float *out, size_t ostride, int hb, const float *w, size_t wstride, const void *v,  \
                          coli__dtype dt, size_t stride, int n, const int *nh)                                \
    {                                                                                                         \
        enum { NV = NV_ };                                                                                    \
        const size_t es = elem_size(dt), used = (size_t)hb * 8 * W_ * NV * sizeof(float);                     \
        float st[MIX_HB * 8 * W_ * NV] __attribute__((aligned(64)));                                          \
        float wide[MIX_R * W_ * NV] __attribute__((aligned(64)));                                             \
        memset(st, 0, used); /* +0 */                                                                         \
        for (int b0 = 0; b0 < n; b0 += MIX_R) {                                                               \
            const int be = n - b0 < MIX_R ? n : b0 + MIX_R;                                                   \
            const float *rows = wide;                                                                         \
            size_t rs = W_ * NV;                                                                              \
            if (be < n) /* the next block, while this one is worked on */                                     \
                prefetch_rows((const char *)v + (size_t)be * stride * es, stride * es,                        \
                              n - be < MIX_R ? n - be : MIX_R, W_ * NV * es);                                 \
            if (dt == COLI_DT_BF16)                                                                           \
                widen_rows(wide, (const uint16_t *)v + (size_t)b0 * stride, stride, be - b0, W_ * NV);        \
            else {                                                                                            \
                rows = (const float *)v + (size_t)b0 * stride;                                                \
                rs = stride;                                                                                  \
            }                                                                                                 \
            for (int h = 0; h < hb; h++) {                                                                    \
                const float *wh = w + (size_t)h * wstride;                                                    \
                const int bh = nh && nh[h] < be ? nh[h] : be; /* this head's rows of the block */             \
                if (bh <= b0)                                                                                 \
                    continue;                                                                                 \
                for (int k0 = 0; k0 < 8; k0 += 8 / NV) {                                                      \
                    COLI_MIX_ALL(COLI_MIX_LOAD);                                                              \
                    int o = b0;                                                                               \
                    for (; o + 8 <= bh; o += 8) {                                                             \
                        COLI_MIX_ALL(COLI_MIX_FMA);                                                           \
                    }                                                                                         \
                    if (o < bh) {                                                                             \
                        COLI_MIX_ALL(COLI_MIX_FMA_IF);                                                        \
                    }                                                                                         \
                    COLI_MIX_ALL(COLI_MIX_STORE);                                                             \
                }                                                                                             \
            }                                                                                                 \
            if (be == n || be % COLI__ATTN_TILE == 0) { /* a tile's end: U_t into out */                      \
                TILE_END(st, W_ * NV, out, ostride, hb, NV, be <= COLI__ATTN_TILE, nh,                        \
                         (be - 1) / COLI__ATTN_TILE * COLI__ATTN_TILE);                                       \
                memset(st, 0, used);                                                                          \
            }                                                                                                 \
        }                                                                                                     \
    }

/* The four widths of slice (8, 4, 2 and 1 registers) of one register
 * width. */
#define COLI_DEFINE_MIXES(ATTR, TILE_END, nv8, nv4, nv2, nv1)                                                 \
    COLI_DEFINE_MIX(nv8, 8, ATTR, TILE_END)                                                                   \
    COLI_DEFINE_MIX(nv4, 4, ATTR, TILE_END)                                                                   \
    COLI_DEFINE_MIX(nv2, 2, ATTR, TILE_END)                                                                   \
    COLI_DEFINE_MIX(nv1, 1, ATTR, TILE_END)

/* A mix kernel over a slice of dimensions of hb <= MIX_HB heads. */
typedef void (*mix_slice_fn)(float *out, size_t ostride, int hb, const float *w, size_t wstride, const void *v,
                             coli__dtype dt, size_t stride, int n, const int *nh);

/* Dimensions [0, vd) of g heads, MIX_HB heads at a time, in slices of
 * the widest of width[0] > width[1] > ... that fits (each dimension's
 * sums are its own: how they are sliced changes no bit). */
static inline void mix_slices(const mix_slice_fn *fn, const int *width, int nfn, float *out, size_t ostride, int g,
                              int vd, const float *w, size_t wstride, const void *v, coli__dtype dt, size_t stride,
                              int n, const int *nh)
{
    const size_t es = elem_size(dt);
    for (int h0 = 0; h0 < g; h0 += MIX_HB) {
        const int hb = g - h0 < MIX_HB ? g - h0 : MIX_HB;
        float *o = out + (size_t)h0 * ostride;
        const float *wh = w + (size_t)h0 * wstride;
        int d = 0;
        for (int i = 0; i < nfn; i++)
            for (; d + width[i] <= vd; d += width[i])
                fn[i](o + d, ostride, hb, wh, wstride, (const char *)v + (size_t)d * es, dt, stride, n,
                      nh ? nh + h0 : NULL);
    }
}


#endif
#endif
