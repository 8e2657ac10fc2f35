/* attn.h - the kernels of attention over the cached rows of one KV head
 * (internal): the scores, softmax and mix of docs/formats.md ("Attention of
 * one head") for the g query heads that share that KV head, so that each
 * row is read from memory once for all of them. Plain C, AVX2 and AVX-512
 * versions, the same bits; lib/cpu/kernels.c puts them in its kernel sets and the
 * model calls them through coli__attn_* there. */
#ifndef COLI_ATTN_H
#define COLI_ATTN_H

#include <stddef.h>

#include "base/dtype.h"

/* The tiles of docs/formats.md: positions j = 256 t .. 256 t + 255 are
 * tile t, whose sums are made apart and then added in increasing t (a
 * GPU gives each tile a block of its own; the CPU keeps the order). */
#define COLI__ATTN_TILE 256

/* Rows are row j = base + j * stride (in elements) of dt, COLI_DT_F32 or
 * COLI_DT_BF16 (widened exactly); j = 0 is the first position attended to,
 * where tile 0 starts. */
typedef struct coli__attnk {
    /* out[h * ostride + j] = dot(q_h, k_j) * scale for h < g, j < n_h,
     * with q_h = q + h * hd and n_h = nh[h] <= n (nh NULL: n_h = n; a
     * head's rows past n_h are not written); mx[h] = the largest of mx[h]
     * and those scores. Several tokens' heads go together this way, each
     * seeing its own positions. */
    void (*scores)(const float *q, int g, int hd, const void *k, coli__dtype dt, size_t stride, int n, float scale,
                   float *out, size_t ostride, float *mx, const int *nh);
    /* a[j] = e(a[j] - m) for j < n; Z_t = sum32 of tile t's, Z = Z_0 + Z_1
     * + ... in order; then each a[j] times 1 / Z. */
    void (*softmax)(float *a, int n, float m);
    /* out[h * ostride + i] for h < g, i < dims: for each tile, eight partial
     * sums O_{j mod 8} = fma(w_h[j], v_j,i, O_{j mod 8}) from +0 over its
     * j in increasing order, then their tree U_t; out = U_0 + U_1 + ... in
     * order. w_h = w + h * wstride, v_j,i = (v + j * stride)[i]; head h's
     * j < n_h, as for scores. */
    void (*mix)(float *out, size_t ostride, int g, int dims, const float *w, size_t wstride, const void *v,
                coli__dtype dt, size_t stride, int n, const int *nh);
} coli__attnk;

const coli__attnk *coli__attn_kernels_scalar(void);
/* NULL in a build without x86 intrinsics; the CPU's support is the
 * caller's to check (AVX2 and FMA). */
const coli__attnk *coli__attn_kernels_avx2(void);
/* The same on AVX-512 registers (F and VL), NULL without x86 intrinsics. */
const coli__attnk *coli__attn_kernels_avx512(void);

#endif
