/* matmul.cu - the products of docs/formats.md on the device: activation
 * quantization, the quantized products (vector kernels for few tokens,
 * integer tensor cores for many), the float products and SwiGLU.
 *
 * Quantized products follow the text to the bit: activations are
 * quantized exactly as lib/cpu/quant.c does, each 32-column group's
 * integer sum is exact, eight lanes per row take the groups g = k mod 8 in
 * increasing order and a butterfly with offsets 4, 2, 1 adds them as step
 * 4 says. Kernels use groups of 8 or 32 lanes that divide any wavefront
 * (32 on NVIDIA and RDNA, 64 on GCN/CDNA), so they are wave-size
 * agnostic. */
#include "gpu/compat.h"

#include "gpu/kern.h"
#include "cpu/silu.h"

/* Rows per lane (R) and groups per iteration (GU) of the decode kernels:
 * enough bytes in flight per lane without spilling, as measured on an H200
 * (docs/gpu.md). -D overrides them for tuning runs. */
#ifndef Q8_R
#define Q8_R 2
#endif
#ifndef Q8_GU
#define Q8_GU 2
#endif
#ifndef Q4_R
#define Q4_R 4
#endif
#ifndef Q4_GU
#define Q4_GU 2
#endif
#ifndef Q2_R
#define Q2_R 4
#endif
#ifndef Q2_GU
#define Q2_GU 2
#endif
/* Blocks (of 256 threads) below which a launch would leave an H200's
 * multiprocessors idle: then smaller blocks. */
#ifndef SMALL_BLOCKS_BELOW
#define SMALL_BLOCKS_BELOW 132
#endif

/* One 32-lane group per 32-value activation group (coli__quant32). */
static __global__ void k_quantize_act(const float *x, int n_groups, int8_t *p, float *s, int32_t *psum)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    int gi = (int)blockIdx.x * (int)(blockDim.x / QK) + (int)(threadIdx.x / QK);
    int lane = (int)(threadIdx.x % QK);
    if (gi >= n_groups)
        return; /* all 32 lanes of the group alike */
    coli__quant32(x[(size_t)gi * QK + (size_t)lane], lane, (size_t)gi, p, s, psum);
}

/* h = swiglu(g, u), then quantized: one 32-lane group per group of 32. */
static __global__ void k_swiglu_q(const float *g, const float *u, float *h, int n_groups, int8_t *p, float *s,
                                  int32_t *psum)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    int gi = (int)blockIdx.x * (int)(blockDim.x / QK) + (int)(threadIdx.x / QK);
    int lane = (int)(threadIdx.x % QK);
    if (gi >= n_groups)
        return;
    size_t i = (size_t)gi * QK + (size_t)lane;
    float v = coli__swiglu(g[i], u[i]);
    h[i] = v;
    if (p)
        coli__quant32(v, lane, (size_t)gi, p, s, psum);
}

/* The quants of one group as loaded, with the widest aligned loads the
 * format allows: q8 32 bytes, q4 16, q2 8. word(i) gives the four int8
 * of columns 4i .. 4i+3 (q4: as u = q + 8). Kept packed, so that more
 * groups fit in registers at once. */
template <int DT> struct wgroup {
    int raw[DT == COLI_DT_Q8 ? 8 : DT == COLI_DT_Q4 ? 4 : 2];
};

template <int DT>
static __device__ __forceinline__ void load_group(const uint8_t *qr, int g, wgroup<DT> &w)
{
    if (DT == COLI_DT_Q8) {
        const int4 *p = (const int4 *)(const void *)(qr + (size_t)QK * g);
        int4 a = p[0], b = p[1];
        w.raw[0] = a.x, w.raw[1] = a.y, w.raw[2] = a.z, w.raw[3] = a.w;
        w.raw[4] = b.x, w.raw[5] = b.y, w.raw[6] = b.z, w.raw[7] = b.w;
    } else if (DT == COLI_DT_Q4) {
        int4 a = *(const int4 *)(const void *)(qr + (size_t)16 * g);
        w.raw[0] = a.x, w.raw[1] = a.y, w.raw[2] = a.z, w.raw[3] = a.w;
    } else {
        int2 a = *(const int2 *)(const void *)(qr + (size_t)8 * g);
        w.raw[0] = a.x, w.raw[1] = a.y;
    }
}

template <int DT>
static __device__ __forceinline__ int word(const wgroup<DT> &w, int i)
{
    if (DT == COLI_DT_Q8)
        return w.raw[i];
    if (DT == COLI_DT_Q4) /* byte b: column b low, column b + 16 high */
        return i < 4 ? w.raw[i] & 0x0f0f0f0f : (w.raw[i - 4] >> 4) & 0x0f0f0f0f;
    /* q2: byte b holds columns b, b+8, b+16, b+24 in bit pairs */
    return (w.raw[i & 1] >> (2 * (i >> 1))) & 0x03030303;
}

/* Step 1 for one group: the exact integer sum of a packed weight group
 * and the activations' 32 int8 (xa); q4's nibbles are q + 8. */
template <int DT>
static __device__ __forceinline__ int32_t group_isum(const wgroup<DT> &w, const int xa[8], int32_t ps)
{
    int32_t is = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        is = coli_dp4a(word<DT>(w, i), xa[i], is);
    if (DT == COLI_DT_Q4)
        is -= 8 * ps;
    return is;
}

/* Steps 2-3 for one group: its float term from the integer sum, the
 * weight scale D (and q2's minimum M), the activation scale sg and sum
 * ps, in the order docs/formats.md writes. Every product kernel uses it. */
template <int DT>
static __device__ __forceinline__ float group_term(int32_t is, float D, float M, float sg, int32_t ps)
{
    if (DT == COLI_DT_Q2) {
        float ds = D * sg, ms = M * sg;
        float f1 = (float)is * ds;
        float f2 = (float)ps * ms;
        return f1 + f2;
    }
    float ds = D * sg;
    return (float)is * ds;
}

/* Steps 1-4 for BT / 8 * R rows and up to TOK_TILE tokens: 8 lanes per
 * row, lane k taking groups k, k+8, ... Each lane serves R rows BT / 8
 * apart, which reuses every activation load and keeps more loads in
 * flight; BT threads a block (256, or 64 when a product has too few rows
 * to fill the device otherwise). blockIdx.z picks the product. */
template <int DT, int R, int GU, int BT>
static __global__ void __launch_bounds__(BT) k_qgemm(const prod *prods, const int8_t *p, const float *s,
                                                      const int32_t *psum)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const prod pr = prods[blockIdx.z];
    const int n_tok = prod_tokens(pr);
    const int RS = BT / 8; /* rows of one pass */
    const int ROWS_PER_BLOCK = RS * R;
    const int base = (int)blockIdx.x * ROWS_PER_BLOCK + (int)(threadIdx.x >> 3);
    const int k = threadIdx.x & 7;
    const int t0 = (int)blockIdx.y * TOK_TILE;
    if (t0 >= n_tok || (int)blockIdx.x * ROWS_PER_BLOCK >= pr.rows)
        return; /* the whole block: no shuffle below is left half-done */
    const int nt = n_tok - t0 < TOK_TILE ? n_tok - t0 : TOK_TILE;
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const uint8_t *qr[R];
    const uint16_t *dr[R], *mr[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int row = base + RS * r;
        int rr = row < pr.rows ? row : 0; /* dead rows compute row 0, unwritten */
        qr[r] = pr.qs + (size_t)rr * row_bytes;
        dr[r] = pr.d + (size_t)rr * (size_t)(cols / G);
        mr[r] = DT == COLI_DT_Q2 ? pr.m + (size_t)rr * (size_t)n : NULL;
    }
    const size_t x0 = (size_t)(pr.x0 + t0);
    float P[R][TOK_TILE];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int t = 0; t < TOK_TILE; t++)
            P[r][t] = 0.0f;
    /* GU groups per iteration, all their loads before any use (they
     * overlap); each P still takes its groups in increasing g. */
    for (int g = k; g < n; g += 8 * GU) {
        wgroup<DT> w[R][GU];
        float D[R][GU], M[R][GU];
#pragma unroll
        for (int h = 0; h < GU; h++) {
            const int gg = g + 8 * h < n ? g + 8 * h : g;
#pragma unroll
            for (int r = 0; r < R; r++) {
                load_group<DT>(qr[r], gg, w[r][h]);
                D[r][h] = coli__f16_bits_to_f32(dr[r][gg / per]);
                M[r][h] = DT == COLI_DT_Q2 ? coli__f16_bits_to_f32(mr[r][gg]) : 0.0f;
            }
        }
#pragma unroll
        for (int h = 0; h < GU; h++) {
            const int gg = g + 8 * h;
#pragma unroll
            for (int t = 0; t < TOK_TILE; t++) {
                if (t < nt && gg < n) {
                    size_t xr = pr.xrow ? (size_t)pr.xrow[x0 + (size_t)t] : x0 + (size_t)t;
                    const int8_t *pg = p + xr * (size_t)cols + (size_t)QK * gg;
                    float sg = s[xr * (size_t)n + gg];
                    int32_t ps = DT == COLI_DT_Q8 ? 0 : psum[xr * (size_t)n + gg];
                    const int4 *pa = (const int4 *)(const void *)pg;
                    int4 a0 = pa[0], a1 = pa[1];
                    int xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const int32_t is = group_isum<DT>(w[r][h], xa, ps);
                        P[r][t] += group_term<DT>(is, D[r][h], M[r][h], sg, ps);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = base + RS * r;
#pragma unroll
        for (int t = 0; t < TOK_TILE; t++) {
            /* step 4: lane k holds P_k; offsets 4, 2, 1 give
             * ((P0 + P4) + (P2 + P6)) + ((P1 + P5) + (P3 + P7)) in lane 0 */
            float v = P[r][t];
            v = v + coli_shfl_xor(v, 4, 8);
            v = v + coli_shfl_xor(v, 2, 8);
            v = v + coli_shfl_xor(v, 1, 8);
            if (row < pr.rows && k == 0 && t < nt)
                pr.y[(size_t)(t0 + t) * (size_t)pr.ys + (size_t)row] = v;
        }
    }
}

/* Steps 1-4 for few tokens (TT at most), LPR lanes per row (8 or 32;
 * 128 threads a block): lane j of a row loads groups j, j + LPR, ...
 * (QV_U of them before any use, so that a row's bytes are in flight at
 * once), computes their terms f_g, and hands them to the eight lanes
 * that own the partial sums, by shuffles in increasing g: P_k = ((+0 +
 * f_k) + f_k+8) + ..., the order of k_qgemm, then the same butterfly.
 * 32 lanes a row for long rows, 8 for short ones; TT = 1 (decode) keeps
 * the registers few, so that many rows are in flight. */
#define QV_U 4 /* groups a lane loads per batch */

template <int DT, int TT, int LPR>
static __global__ void __launch_bounds__(128) k_qgemv(const prod *prods, const int8_t *p, const float *s,
                                                       const int32_t *psum, int early)
{
    /* early: the table is static, so the first groups' weights load before
     * the wait (coli_pdl_wait), beside the kernel before this one */
    if (!early) {
        coli_pdl_wait();
        coli_pdl_release();
    }
    const prod pr = prods[blockIdx.z];
    const int n_tok = prod_tokens(pr);
    const int row = (int)blockIdx.x * (128 / LPR) + (int)(threadIdx.x / LPR), lane = (int)(threadIdx.x % LPR);
    const int t0 = (int)blockIdx.y * TT;
    if (t0 >= n_tok || (int)blockIdx.x * (128 / LPR) >= pr.rows)
        return; /* the whole block */
    const bool live = row < pr.rows; /* dead rows compute row 0, unwritten: the shuffles need every lane */
    const int nt = n_tok - t0 < TT ? n_tok - t0 : TT;
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const size_t rr = live ? (size_t)row : 0;
    const uint8_t *qr = pr.qs + rr * row_bytes;
    const uint16_t *dr = pr.d + rr * (size_t)(cols / G);
    const uint16_t *mr = DT == COLI_DT_Q2 ? pr.m + rr * (size_t)n : NULL;
    size_t xr[TT];
#pragma unroll
    for (int t = 0; t < TT; t++) {
        const size_t r = (size_t)pr.x0 + (size_t)t0 + (size_t)(t < nt ? t : 0);
        xr[t] = pr.xrow ? (size_t)pr.xrow[r] : r;
    }
    float P[TT];
#pragma unroll
    for (int t = 0; t < TT; t++)
        P[t] = 0.0f;
    const int k = lane & 7;
    for (int g0 = 0; g0 < n; g0 += LPR * QV_U) {
        wgroup<DT> w[QV_U];
        float D[QV_U], M[QV_U];
#pragma unroll
        for (int u = 0; u < QV_U; u++) {
            if (g0 + LPR * u < n) { /* the same for every lane */
                const int g = g0 + LPR * u + lane, gg = g < n ? g : 0;
                load_group<DT>(qr, gg, w[u]);
                D[u] = coli__f16_bits_to_f32(dr[gg / per]);
                M[u] = DT == COLI_DT_Q2 ? coli__f16_bits_to_f32(mr[gg]) : 0.0f;
            }
        }
        if (early && g0 == 0) { /* the activations are the step's */
            coli_pdl_wait();
            coli_pdl_release();
        }
#pragma unroll
        for (int t = 0; t < TT; t++) {
#pragma unroll
            for (int u = 0; u < QV_U; u++) {
                if (t >= nt || g0 + LPR * u >= n)
                    continue; /* the same for every lane */
                const int g = g0 + LPR * u + lane, gg = g < n ? g : 0;
                const int4 *pa = (const int4 *)(const void *)(p + xr[t] * (size_t)cols + (size_t)QK * gg);
                const int4 a0 = pa[0], a1 = pa[1];
                const int xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float sg = s[xr[t] * (size_t)n + gg];
                const int32_t ps = DT == COLI_DT_Q8 ? 0 : psum[xr[t] * (size_t)n + gg];
                const float f = group_term<DT>(group_isum<DT>(w[u], xa, ps), D[u], M[u], sg, ps);
                /* group g0 + LPR u + 8 q + k goes to lane k, in increasing g */
#pragma unroll
                for (int q = 0; q < LPR / 8; q++) {
                    const float v = LPR == 8 ? f : coli_shfl(f, k + 8 * q, LPR);
                    if (g0 + LPR * u + 8 * q + k < n)
                        P[t] += v;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TT; t++) {
        float v = P[t];
        v = v + coli_shfl_xor(v, 4, 8);
        v = v + coli_shfl_xor(v, 2, 8);
        v = v + coli_shfl_xor(v, 1, 8);
        if (live && lane == 0 && t < nt)
            pr.y[(size_t)(t0 + t) * (size_t)pr.ys + (size_t)row] = v;
    }
}

/* The decode launch of format DT: tokens per block, lanes per row (32
 * for rows of 64 groups or more: 16 measured no faster on an H200). */
template <int DT>
static void launch_qgemv(cudaStream_t st, int max_rows, int max_tok, int cols_hint, int n_prods, const prod *dev_prods,
                         const int8_t *p, const float *s, const int32_t *psum, int early)
{
    const bool wide = cols_hint >= 64 * QK; /* 64 groups or more: 32 lanes a row */
    const int rows_per = wide ? 4 : 16;
    const unsigned ty = max_tok == 1 ? 1u : (unsigned)((max_tok + TOK_TILE - 1) / TOK_TILE);
    const dim3 grid((unsigned)((max_rows + rows_per - 1) / rows_per), ty, (unsigned)n_prods);
    if (max_tok == 1 && wide)
        (void)coli_launch(coli__gpu_pdl(), k_qgemv<DT, 1, 32>, grid, 128, 0, st, dev_prods, p, s, psum, early);
    else if (max_tok == 1)
        (void)coli_launch(coli__gpu_pdl(), k_qgemv<DT, 1, 8>, grid, 128, 0, st, dev_prods, p, s, psum, early);
    else if (wide)
        (void)coli_launch(coli__gpu_pdl(), k_qgemv<DT, TOK_TILE, 32>, grid, 128, 0, st, dev_prods, p, s, psum, early);
    else
        (void)coli_launch(coli__gpu_pdl(), k_qgemv<DT, TOK_TILE, 8>, grid, 128, 0, st, dev_prods, p, s, psum, early);
}

#if COLI_GPU_HAS_WMMA
/* Prefill on integer tensor cores: a block of 4 warps computes 64 rows x
 * 16 tokens. For each 32-column group the weights (unpacked to int8) and
 * the activations are staged in shared memory, two 16x16x16 int8 MMAs
 * give every (row, token) its exact isum_g in int32, and each lane then
 * applies steps 2-4 of docs/formats.md to its 8 elements, with the eight
 * partial sums kept per element and the groups taken in increasing g: the
 * same bits as k_qgemm and the CPU. */
#define MMA_ROWS 64
#define MMA_TOK 16

template <int DT>
static __device__ __forceinline__ void stage_weights(const uint8_t *qr, int g, int half, signed char *dst)
{
    /* dst: 16 int8, columns 16 half .. 16 half + 15 of group g */
    signed char v[16];
    if (DT == COLI_DT_Q8) {
        int4 a = *(const int4 *)(const void *)(qr + (size_t)QK * g + 16 * half);
        memcpy(v, &a, 16);
    } else if (DT == COLI_DT_Q4) {
        int4 a = *(const int4 *)(const void *)(qr + (size_t)16 * g);
        unsigned char b[16];
        memcpy(b, &a, 16);
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] = (signed char)((half ? b[i] >> 4 : b[i] & 15) - 8);
    } else {
        int2 a = *(const int2 *)(const void *)(qr + (size_t)8 * g);
        unsigned char b[8];
        memcpy(b, &a, 8);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int c = 16 * half + i; /* column c: byte c % 8, bits 2 (c / 8) */
            v[i] = (signed char)((b[c & 7] >> (2 * (c >> 3))) & 3);
        }
    }
    memcpy(dst, v, 16);
}

template <int DT>
static __global__ void __launch_bounds__(128) k_qgemm_mma(const prod *prods, const int8_t *p, const float *s,
                                                    const int32_t *psum)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    using namespace nvcuda;
    __shared__ __align__(32) signed char sA[4][2][256]; /* per warp: 16 rows x 16 k, two halves */
    __shared__ __align__(32) signed char sB[2][256];    /* 16 tokens x 16 k (col-major), two halves */
    __shared__ __align__(32) int sC[4][256];            /* per warp: 16 x 16 isums, row-major */
    __shared__ float sS[MMA_TOK];
    __shared__ int sP[MMA_TOK];
    const prod pr = prods[blockIdx.z];
    const int n_tok = prod_tokens(pr);
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    const int row0 = (int)blockIdx.x * MMA_ROWS + warp * 16;
    const int t0 = (int)blockIdx.y * MMA_TOK;
    if (t0 >= n_tok || (int)blockIdx.x * MMA_ROWS >= pr.rows)
        return; /* the whole block: no barrier below is left waiting */
    const int nt = n_tok - t0 < MMA_TOK ? n_tok - t0 : MMA_TOK;
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const size_t x0 = (size_t)(pr.x0 + t0);
    __shared__ size_t xrows[MMA_TOK]; /* the activation row of each token */
    if (threadIdx.x < MMA_TOK) {
        size_t r = x0 + ((int)threadIdx.x < nt ? threadIdx.x : 0);
        xrows[threadIdx.x] = pr.xrow ? (size_t)pr.xrow[r] : r;
    }
    __syncthreads();
    /* this lane's rows in staging (lane / 2, half lane % 2) and in the
     * epilogue (element e: row lane / 16 + 2 e, token lane % 16) */
    const int srow = row0 + lane / 2, shalf = lane % 2;
    const bool slive = srow < pr.rows;
    const uint8_t *sqr = pr.qs + (size_t)(slive ? srow : 0) * row_bytes;
    const int tok = lane % 16;
    float P[8][8];
#pragma unroll
    for (int e = 0; e < 8; e++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            P[e][k] = 0.0f;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa0, fa1;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb0, fb1;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
    for (int g8 = 0; g8 < n; g8 += 8) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int g = g8 + k;
            if (g >= n)
                break; /* uniform over the block */
            /* stage the activations: 128 threads, 4 bytes each */
            {
                int j = (int)threadIdx.x / 8, w = (int)threadIdx.x % 8;
                int v = 0;
                if (j < nt)
                    v = *(const int *)(const void *)(p + xrows[j] * (size_t)cols + (size_t)QK * g + 4 * w);
                memcpy(&sB[w / 4][j * 16 + 4 * (w % 4)], &v, 4);
                if (threadIdx.x < MMA_TOK) {
                    int jj = (int)threadIdx.x;
                    sS[jj] = jj < nt ? s[xrows[jj] * (size_t)n + g] : 0.0f;
                    sP[jj] = jj < nt && DT == COLI_DT_Q2 ? psum[xrows[jj] * (size_t)n + g] : 0;
                }
            }
            if (slive)
                stage_weights<DT>(sqr, g, shalf, &sA[warp][shalf][(lane / 2) * 16]);
            else
                memset(&sA[warp][shalf][(lane / 2) * 16], 0, 16);
            __syncthreads();
            wmma::fill_fragment(fc, 0);
            wmma::load_matrix_sync(fa0, sA[warp][0], 16);
            wmma::load_matrix_sync(fb0, sB[0], 16);
            wmma::mma_sync(fc, fa0, fb0, fc);
            wmma::load_matrix_sync(fa1, sA[warp][1], 16);
            wmma::load_matrix_sync(fb1, sB[1], 16);
            wmma::mma_sync(fc, fa1, fb1, fc);
            wmma::store_matrix_sync(sC[warp], fc, 16, wmma::mem_row_major);
            __syncwarp();
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int i = lane / 16 + 2 * e, row = row0 + i;
                const int rr = row < pr.rows ? row : 0;
                const int32_t is = sC[warp][i * 16 + tok];
                const float sg = sS[tok];
                const float D = coli__f16_bits_to_f32(pr.d[(size_t)rr * (size_t)(cols / G) + (size_t)(g / per)]);
                const float M =
                    DT == COLI_DT_Q2 ? coli__f16_bits_to_f32(pr.m[(size_t)rr * (size_t)n + (size_t)g]) : 0.0f;
                P[e][k] += group_term<DT>(is, D, M, sg, DT == COLI_DT_Q2 ? sP[tok] : 0);
            }
            __syncthreads(); /* before the next group's staging */
        }
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int row = row0 + lane / 16 + 2 * e;
        /* step 4 */
        float a04 = P[e][0] + P[e][4], a26 = P[e][2] + P[e][6], a15 = P[e][1] + P[e][5], a37 = P[e][3] + P[e][7];
        float v = (a04 + a26) + (a15 + a37);
        if (row < pr.rows && tok < nt)
            pr.y[(size_t)(t0 + tok) * (size_t)pr.ys + (size_t)row] = v;
    }
}
#endif

#if COLI_GPU_HAS_WMMA
/* Prefill on integer tensor cores, the epilogue in registers: a block of
 * 4 warps computes 64 rows x 16 tokens, staging 8 groups (256 columns) of
 * weights (unpacked to int8) and activations, with their scales, in shared
 * memory between barriers. Each warp then takes the chunk's groups in
 * increasing g: for each, two m16n8k32 products give its 16 rows x 16
 * tokens their exact isum_g in registers, and each lane applies steps 2-4
 * of docs/formats.md to its 8 elements, the eight partial sums kept per
 * element. The same bits as k_qgemm and the CPU. */
#define MM2_ROWS 64
#define MM2_TOK 16
#define MM2_G 8                /* groups staged at once */
#define MM2_W (MM2_G * QK + 16) /* bytes of a staged row: padded against bank conflicts */

template <int DT>
static __global__ void __launch_bounds__(128) k_qgemm_mma2(const prod *prods, const int8_t *p, const float *s,
                                                            const int32_t *psum)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    __shared__ __align__(16) signed char sA[MM2_ROWS * MM2_W]; /* weights, row-major */
    __shared__ __align__(16) signed char sB[MM2_TOK * MM2_W];  /* activations, token-major */
    __shared__ float sD[MM2_ROWS][MM2_G], sM[MM2_ROWS][MM2_G], sS[MM2_TOK][MM2_G];
    __shared__ int sPs[MM2_TOK][MM2_G];
    __shared__ size_t xrows[MM2_TOK];
    const prod pr = prods[blockIdx.z];
    const int n_tok = prod_tokens(pr);
    const int rb = (int)blockIdx.x * MM2_ROWS;
    if (rb >= pr.rows)
        return; /* the whole block */
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int gid = lane >> 2, tig = lane & 3;
    /* token tiles y, y + gridDim.y, ...: a routed table's launch is sized
     * for the busiest expert's few tiles, not for every token */
    for (int t0 = (int)blockIdx.y * MM2_TOK; t0 < n_tok; t0 += (int)gridDim.y * MM2_TOK) {
        const int nt = n_tok - t0 < MM2_TOK ? n_tok - t0 : MM2_TOK;
        if (tid < MM2_TOK) {
            size_t r = (size_t)(pr.x0 + t0) + (size_t)(tid < nt ? tid : 0);
            xrows[tid] = pr.xrow ? (size_t)pr.xrow[r] : r;
        }
        float P[8][8]; /* [element][k]: element e = subtile (e / 4), register (e % 4) */
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int k = 0; k < 8; k++)
                P[e][k] = 0.0f;
        for (int g0 = 0; g0 < n; g0 += MM2_G) {
            const int ng = n - g0 < MM2_G ? n - g0 : MM2_G;
            __syncthreads(); /* the previous chunk is read; xrows is written */
            /* weights: 64 rows x ng groups, one (row, group) of 32 int8 per item */
            for (int it = tid; it < MM2_ROWS * MM2_G; it += 128) {
                const int r = it / MM2_G, gg = it % MM2_G, row = rb + r, g = g0 + gg;
                signed char v[QK];
                float d = 0.0f, mn = 0.0f;
                if (row < pr.rows && gg < ng) {
                    const uint8_t *qr = pr.qs + (size_t)row * row_bytes;
                    if (DT == COLI_DT_Q8) {
                        const int4 *src = (const int4 *)(const void *)(qr + (size_t)QK * g);
                        int4 a = src[0], b = src[1];
                        memcpy(v, &a, 16);
                        memcpy(v + 16, &b, 16);
                    } else if (DT == COLI_DT_Q4) {
                        int4 a = *(const int4 *)(const void *)(qr + (size_t)16 * g);
                        unsigned char b[16];
                        memcpy(b, &a, 16);
#pragma unroll
                        for (int i = 0; i < 16; i++) {
                            v[i] = (signed char)((b[i] & 15) - 8);
                            v[16 + i] = (signed char)((b[i] >> 4) - 8);
                        }
                    } else {
                        int2 a = *(const int2 *)(const void *)(qr + (size_t)8 * g);
                        unsigned char b[8];
                        memcpy(b, &a, 8);
#pragma unroll
                        for (int c = 0; c < QK; c++) /* column c: byte c % 8, bits 2 (c / 8) */
                            v[c] = (signed char)((b[c & 7] >> (2 * (c >> 3))) & 3);
                    }
                    d = coli__f16_bits_to_f32(pr.d[(size_t)row * (size_t)(cols / G) + (size_t)(g / per)]);
                    if (DT == COLI_DT_Q2)
                        mn = coli__f16_bits_to_f32(pr.m[(size_t)row * (size_t)n + (size_t)g]);
                } else {
                    memset(v, 0, sizeof v);
                }
                memcpy(&sA[r * MM2_W + gg * QK], v, QK);
                sD[r][gg] = d;
                sM[r][gg] = mn;
            }
            /* activations: 16 tokens x ng groups */
            for (int it = tid; it < MM2_TOK * MM2_G; it += 128) {
                const int j = it / MM2_G, gg = it % MM2_G, g = g0 + gg;
                int4 a = make_int4(0, 0, 0, 0), b = make_int4(0, 0, 0, 0);
                float sg = 0.0f;
                int ps = 0;
                if (j < nt && gg < ng) {
                    const size_t xr = xrows[j];
                    const int4 *src = (const int4 *)(const void *)(p + xr * (size_t)cols + (size_t)QK * g);
                    a = src[0];
                    b = src[1];
                    sg = s[xr * (size_t)n + g];
                    ps = DT == COLI_DT_Q8 ? 0 : psum[xr * (size_t)n + g];
                }
                memcpy(&sB[j * MM2_W + gg * QK], &a, 16);
                memcpy(&sB[j * MM2_W + gg * QK + 16], &b, 16);
                sS[j][gg] = sg;
                sPs[j][gg] = ps;
            }
            __syncthreads();
            const int wr = warp * 16; /* this warp's rows in the block */
#pragma unroll
            for (int gg = 0; gg < MM2_G; gg++) {
                if (gg < ng) {
                    int a[4], b0[2], b1[2], c0[4], c1[4];
                    const signed char *ar = &sA[(wr + gid) * MM2_W + gg * QK + tig * 4];
                    memcpy(&a[0], ar, 4);
                    memcpy(&a[1], ar + 8 * MM2_W, 4);
                    memcpy(&a[2], ar + 16, 4);
                    memcpy(&a[3], ar + 8 * MM2_W + 16, 4);
                    const signed char *br0 = &sB[gid * MM2_W + gg * QK + tig * 4];
                    const signed char *br1 = br0 + 8 * MM2_W;
                    memcpy(&b0[0], br0, 4);
                    memcpy(&b0[1], br0 + 16, 4);
                    memcpy(&b1[0], br1, 4);
                    memcpy(&b1[1], br1 + 16, 4);
                    coli_mma_s8_k32(c0, a, b0);
                    coli_mma_s8_k32(c1, a, b1);
#pragma unroll
                    for (int e = 0; e < 8; e++) {
                        const int is = e < 4 ? c0[e] : c1[e - 4];
                        const int r = wr + gid + 8 * ((e & 3) >> 1), j = 8 * (e >> 2) + tig * 2 + (e & 1);
                        const float M = DT == COLI_DT_Q2 ? sM[r][gg] : 0.0f; /* read only where used */
                        const int32_t ps = DT == COLI_DT_Q2 ? sPs[j][gg] : 0;
                        P[e][gg] += group_term<DT>(is, sD[r][gg], M, sS[j][gg], ps);
                    }
                }
            }
        }
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int row = rb + warp * 16 + gid + 8 * ((e & 3) >> 1), j = 8 * (e >> 2) + tig * 2 + (e & 1);
            float a04 = P[e][0] + P[e][4], a26 = P[e][2] + P[e][6], a15 = P[e][1] + P[e][5], a37 = P[e][3] + P[e][7];
            float v = (a04 + a26) + (a15 + a37);
            if (row < pr.rows && j < nt)
                pr.y[(size_t)(t0 + j) * (size_t)pr.ys + (size_t)row] = v;
        }
    } /* token tiles */
}
#endif

/* Float weights (f32 or bf16) times float activations: 32 lanes per row,
 * lane k taking columns k, k+32, ... in order with one fused multiply-add
 * each (explicit: --fmad=false only forbids implicit ones), then the
 * butterfly 16, 8, 4, 2, 1: the float product of docs/formats.md, with the
 * CPU's bits. TT tokens a block (one token: k_fgemv); U columns' weight
 * loads are issued before their products, so that a lane has them in
 * flight together. */
template <int DT, int TT, int U>
static __global__ void k_fgemm(const prod *prods, const float *x, int early)
{
    if (!early) { /* early: as k_qgemv's */
        coli_pdl_wait();
        coli_pdl_release();
    }
    const prod pr = prods[blockIdx.z];
    const int n_tok = prod_tokens(pr);
    const int lanes = 32, rows_per = blockDim.x / lanes;
    int row = (int)blockIdx.x * rows_per + (int)(threadIdx.x / lanes);
    int lane = threadIdx.x % lanes;
    int t0 = (int)blockIdx.y * TT;
    if (t0 >= n_tok || (int)blockIdx.x * rows_per >= pr.rows)
        return;
    int nt = n_tok - t0 < TT ? n_tok - t0 : TT;
    bool live = row < pr.rows;
    int rr = live ? row : 0;
    const int cols = pr.cols;
    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; t++)
        acc[t] = 0.0f;
    const float *xt[TT]; /* the activation row of each token */
#pragma unroll
    for (int t = 0; t < TT; t++) {
        size_t r = (size_t)(pr.x0 + t0 + (t < nt ? t : 0));
        xt[t] = x + (pr.xrow ? (size_t)pr.xrow[r] : r) * (size_t)cols;
    }
    const float *wf = (const float *)pr.w + (size_t)rr * cols;
    const uint16_t *wh = (const uint16_t *)pr.w + (size_t)rr * cols;
    for (int c0 = lane; c0 < cols; c0 += U * lanes) {
        float w[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + u * lanes;
            w[u] = c >= cols ? 0.0f : DT == COLI_DT_F32 ? wf[c] : coli__bf16_bits_to_f32(wh[c]);
        }
        if (early && c0 == lane) {
            coli_pdl_wait();
            coli_pdl_release();
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + u * lanes;
            if (c < cols) {
#pragma unroll
                for (int t = 0; t < TT; t++)
                    if (t < nt)
                        acc[t] = fmaf(w[u], xt[t][c], acc[t]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TT; t++) {
        float v = acc[t];
        for (int off = 16; off > 0; off >>= 1)
            v += coli_shfl_xor(v, off, 32);
        if (live && lane == 0 && t < nt)
            pr.y[(size_t)(t0 + t) * (size_t)pr.ys + (size_t)row] = v;
    }
}

/* Decode's float product (one token): a warp a row. The warp stages a
 * chunk of its row (FV_VEC 16-byte loads a lane, all in flight together)
 * in shared memory, then lane k takes columns k, k+32, ... of it in order,
 * k_fgemm's arithmetic with its bits: a row costs one memory round trip a
 * chunk instead of one for every 32 U columns. */
#define FV_VEC 8  /* 16-byte loads a lane issues for a chunk */
#define FV_ROWS 2 /* rows (warps) a block: small blocks spread a short table */
#define FV_X 16   /* activations a lane loads before their products */

template <int DT>
static __global__ void __launch_bounds__(32 * FV_ROWS) k_fgemv(const prod *prods, const float *x, int early)
{
    constexpr int ES = DT == COLI_DT_F32 ? 4 : 2; /* bytes a weight */
    constexpr int CB = 32 * FV_VEC * 16;          /* bytes a chunk */
    constexpr int CH = CB / ES;                   /* columns a chunk: a multiple of 32 */
    __shared__ __align__(16) unsigned char stage[FV_ROWS][CB];
    if (!early) { /* early: as k_qgemv's */
        coli_pdl_wait();
        coli_pdl_release();
    }
    const prod pr = prods[blockIdx.z];
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    const int row = (int)blockIdx.x * FV_ROWS + warp;
    if (prod_tokens(pr) < 1 || row >= pr.rows)
        return; /* the whole warp; the warps share no barrier */
    const int cols = pr.cols;
    const unsigned char *wr = (const unsigned char *)pr.w + (size_t)row * (size_t)cols * ES;
    const bool vec = ((uintptr_t)wr & 15) == 0;
    unsigned char *sw = stage[warp];
    const float *xv = NULL;
    float acc = 0.0f;
    for (int c0 = 0; c0 < cols; c0 += CH) {
        const int cn = cols - c0 < CH ? cols - c0 : CH, nb = cn * ES;
        const unsigned char *src = wr + (size_t)c0 * ES;
        if (vec && nb % 16 == 0) {
            uint4 v[FV_VEC];
#pragma unroll
            for (int u = 0; u < FV_VEC; u++)
                if ((u * 32 + lane) * 16 < nb)
                    v[u] = *(const uint4 *)(const void *)(src + (size_t)(u * 32 + lane) * 16);
#pragma unroll
            for (int u = 0; u < FV_VEC; u++)
                if ((u * 32 + lane) * 16 < nb)
                    *(uint4 *)(void *)(sw + (u * 32 + lane) * 16) = v[u];
        } else { /* a row that is not 16-byte aligned: a byte at a time */
            for (int i = lane; i < nb; i += 32)
                sw[i] = src[i];
        }
        if (!xv) { /* the activations are the step's */
            if (early) {
                coli_pdl_wait();
                coli_pdl_release();
            }
            const size_t r = pr.xrow ? (size_t)pr.xrow[pr.x0] : (size_t)pr.x0;
            xv = x + r * (size_t)cols;
        }
        coli_syncwarp();
        for (int i0 = lane; i0 < cn; i0 += 32 * FV_X) {
            float xa[FV_X], wa[FV_X];
#pragma unroll
            for (int u = 0; u < FV_X; u++) {
                const int i = i0 + 32 * u;
                xa[u] = i < cn ? xv[c0 + i] : 0.0f;
                wa[u] = i >= cn                ? 0.0f
                        : DT == COLI_DT_F32    ? ((const float *)(const void *)sw)[i]
                                               : coli__bf16_bits_to_f32(((const uint16_t *)(const void *)sw)[i]);
            }
#pragma unroll
            for (int u = 0; u < FV_X; u++)
                if (i0 + 32 * u < cn)
                    acc = fmaf(wa[u], xa[u], acc);
        }
        coli_syncwarp(); /* before the next chunk overwrites the stage */
    }
    acc = coli__tree32(acc);
    if (lane == 0)
        pr.y[row] = acc;
}

/* h = swiglu(g, u) elementwise (lib/cpu/silu.h, the CPU's very function). */
static __global__ void k_swiglu(const float *g, const float *u, float *h, size_t n)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        h[i] = coli__swiglu(g[i], u[i]);
}

/* ---- launchers ---------------------------------------------------------- */

coli_status coli__k_products(cudaStream_t st, int dt, const prod *dev_prods, int n_prods, int max_rows, int cols,
                             int max_tok, const int8_t *p, const float *s, const int32_t *psum, const float *x,
                             int early, coli__err *err)
{
    if (n_prods == 0 || max_tok == 0 || max_rows == 0)
        return COLI_OK;
    dim3 grid, block(256);
#if COLI_GPU_HAS_WMMA
    /* prefill: tensor cores, same bits (dispatch follows the flag the
     * kernel is compiled under, so a target without it never gets here) */
    if (coli__is_quant(dt) && max_tok >= 32 && coli_gpu_mma_k32_ok()) {
        /* a routed table (many products sharing max_tok tokens) gets
         * few token tiles a product; its blocks take the rest in turn */
        unsigned ty = (unsigned)((max_tok + MM2_TOK - 1) / MM2_TOK);
        if (n_prods > 8 && ty > 4)
            ty = 4;
        grid = dim3((unsigned)((max_rows + MM2_ROWS - 1) / MM2_ROWS), ty, (unsigned)n_prods);
        if (dt == COLI_DT_Q8)
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma2<COLI_DT_Q8>, grid, 128, 0, st, dev_prods, p, s, psum);
        else if (dt == COLI_DT_Q4)
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma2<COLI_DT_Q4>, grid, 128, 0, st, dev_prods, p, s, psum);
        else
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma2<COLI_DT_Q2>, grid, 128, 0, st, dev_prods, p, s, psum);
        CK_LAUNCH("a tensor-core product kernel");
        return COLI_OK;
    }
    if (coli__is_quant(dt) && max_tok >= 32) {
        grid = dim3((unsigned)((max_rows + MMA_ROWS - 1) / MMA_ROWS), (unsigned)((max_tok + MMA_TOK - 1) / MMA_TOK),
                    (unsigned)n_prods);
        if (dt == COLI_DT_Q8)
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma<COLI_DT_Q8>, grid, 128, 0, st, dev_prods, p, s, psum);
        else if (dt == COLI_DT_Q4)
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma<COLI_DT_Q4>, grid, 128, 0, st, dev_prods, p, s, psum);
        else
            (void)coli_launch(coli__gpu_pdl(), k_qgemm_mma<COLI_DT_Q2>, grid, 128, 0, st, dev_prods, p, s, psum);
        CK_LAUNCH("a tensor-core product kernel");
        return COLI_OK;
    }
#endif
    if (coli__is_quant(dt) && max_tok <= TOK_TILE) {
        /* decode: 32 or 8 lanes a row (launch_qgemv) */
        if (dt == COLI_DT_Q8)
            launch_qgemv<COLI_DT_Q8>(st, max_rows, max_tok, cols, n_prods, dev_prods, p, s, psum, early);
        else if (dt == COLI_DT_Q4)
            launch_qgemv<COLI_DT_Q4>(st, max_rows, max_tok, cols, n_prods, dev_prods, p, s, psum, early);
        else
            launch_qgemv<COLI_DT_Q2>(st, max_rows, max_tok, cols, n_prods, dev_prods, p, s, psum, early);
    } else if (coli__is_quant(dt)) {
        /* rows per lane and groups per iteration: enough bytes in flight
         * per lane without spilling (measured on an H200); a product too
         * small to fill the device that way gets blocks of 8 rows */
        const int R = dt == COLI_DT_Q8 ? Q8_R : dt == COLI_DT_Q4 ? Q4_R : Q2_R;
        const unsigned ty = (unsigned)((max_tok + TOK_TILE - 1) / TOK_TILE);
        const long big = (long)((max_rows + 32 * R - 1) / (32 * R)) * ty * n_prods;
        if (big < 2 * SMALL_BLOCKS_BELOW) {
            grid = dim3((unsigned)((max_rows + 7) / 8), ty, (unsigned)n_prods);
            if (dt == COLI_DT_Q8)
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q8, 1, 8, 64>, grid, 64, 0, st, dev_prods, p, s,
                                  psum);
            else if (dt == COLI_DT_Q4)
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q4, 1, 8, 64>, grid, 64, 0, st, dev_prods, p, s,
                                  psum);
            else
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q2, 1, 8, 64>, grid, 64, 0, st, dev_prods, p, s,
                                  psum);
        } else {
            grid = dim3((unsigned)((max_rows + 32 * R - 1) / (32 * R)), ty, (unsigned)n_prods);
            if (dt == COLI_DT_Q8)
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q8, Q8_R, Q8_GU, 256>, grid, block, 0, st, dev_prods,
                                  p, s, psum);
            else if (dt == COLI_DT_Q4)
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q4, Q4_R, Q4_GU, 256>, grid, block, 0, st, dev_prods,
                                  p, s, psum);
            else
                (void)coli_launch(coli__gpu_pdl(), k_qgemm<COLI_DT_Q2, Q2_R, Q2_GU, 256>, grid, block, 0, st, dev_prods,
                                  p, s, psum);
        }
    } else if (max_tok == 1) {
        /* decode: a warp a row, its chunks staged (k_fgemv) */
        grid = dim3((unsigned)((max_rows + FV_ROWS - 1) / FV_ROWS), 1, (unsigned)n_prods);
        if (dt == COLI_DT_F32)
            (void)coli_launch(coli__gpu_pdl(), k_fgemv<COLI_DT_F32>, grid, 32 * FV_ROWS, 0, st, dev_prods, x, early);
        else
            (void)coli_launch(coli__gpu_pdl(), k_fgemv<COLI_DT_BF16>, grid, 32 * FV_ROWS, 0, st, dev_prods, x, early);
    } else {
        /* two rows a block when that is what fills the device */
        const unsigned ty = (unsigned)((max_tok + TOK_TILE - 1) / TOK_TILE);
        const int per = (long)((max_rows + 7) / 8) * ty * n_prods < 2 * SMALL_BLOCKS_BELOW ? 2 : 8;
        grid = dim3((unsigned)((max_rows + per - 1) / per), ty, (unsigned)n_prods);
        if (dt == COLI_DT_F32)
            (void)coli_launch(coli__gpu_pdl(), k_fgemm<COLI_DT_F32, TOK_TILE, 8>, grid, 32 * per, 0, st, dev_prods, x,
                              early);
        else
            (void)coli_launch(coli__gpu_pdl(), k_fgemm<COLI_DT_BF16, TOK_TILE, 8>, grid, 32 * per, 0, st, dev_prods, x,
                              early);
    }
    CK_LAUNCH("a product kernel");
    return COLI_OK;
}

coli_status coli__k_quantize(cudaStream_t st, const float *x, int rows, int cols, int8_t *p, float *s, int32_t *psum,
                             coli__err *err)
{
    int n_groups = rows * (cols / QK);
    if (n_groups == 0)
        return COLI_OK;
    (void)coli_launch(coli__gpu_pdl(), k_quantize_act, (n_groups + 7) / 8, 8 * QK, 0, st, x, n_groups, p, s, psum);
    CK_LAUNCH("the activation quantization kernel");
    return COLI_OK;
}

coli_status coli__k_swiglu_q(cudaStream_t st, const float *g, const float *u, float *h, int rows, int cols,
                             const coli__qout *q, coli__err *err)
{
    if (cols % QK)
        return coli__k_swiglu(st, g, u, h, (size_t)rows * cols, err); /* then nothing reads it quantized */
    int n_groups = rows * (cols / QK);
    if (n_groups == 0)
        return COLI_OK;
    (void)coli_launch(coli__gpu_pdl(), k_swiglu_q, (n_groups + 7) / 8, 8 * QK, 0, st, g, u, h, n_groups,
                      q ? q->p : NULL, q ? q->s : NULL, q ? q->psum : NULL);
    CK_LAUNCH("the SwiGLU kernel");
    return COLI_OK;
}

coli_status coli__k_swiglu(cudaStream_t st, const float *g, const float *u, float *h, size_t n, coli__err *err)
{
    if (n == 0)
        return COLI_OK;
    (void)coli_launch(coli__gpu_pdl(), k_swiglu, (unsigned)((n + 255) / 256), 256, 0, st, g, u, h, n);
    CK_LAUNCH("the SwiGLU kernel");
    return COLI_OK;
}
