/* backend.cu - the GPU expert tier, one source for CUDA (nvcc) and HIP
 * (hipcc). compat.h maps the vendor; nothing here tests for one.
 *
 * Tensors are kept in the bytes of docs/formats.md. Quantized products
 * follow its arithmetic to the bit: activations are quantized on the device
 * exactly as lib/cpu/quant.c does, each 32-column group's integer sum is exact,
 * eight lanes per row take the groups g = k mod 8 in increasing order and a
 * butterfly with offsets 4, 2, 1 adds them as step 4 says, and nothing is
 * fused (the file is compiled with --fmad=false / -ffp-contract=off).
 * Kernels use groups of 8 or 32 lanes that divide any wavefront (32 on
 * NVIDIA and RDNA, 64 on GCN/CDNA), so they are wave-size agnostic. */
#include "gpu/compat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "cpu/fp16.h"
#include "cpu/qround.h"
#include "cpu/silu.h"

#ifndef COLI_GPU_TARGETS
#define COLI_GPU_TARGETS COLI_GPU_VENDOR
#endif

#define QK 32      /* activation group; q8/q2 weight group */
#define TOK_TILE 8 /* tokens one block computes at once */

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

/* ---- the device-side arithmetic of docs/formats.md -------------------- */


/* One 32-lane group per 32-value activation group: the activation
 * quantization of docs/formats.md, rounded by lib/cpu/qround.h as
 * lib/cpu/quant.c does. The maximum and the sum are exact whatever the
 * order of the lanes. */
__global__ void k_quantize_act(const float *x, int n_groups, int8_t *p, float *s, int32_t *psum)
{
    int gi = (int)blockIdx.x * (int)(blockDim.x / QK) + (int)(threadIdx.x / QK);
    int lane = (int)(threadIdx.x % QK);
    if (gi >= n_groups)
        return; /* all 32 lanes of the group alike */
    float a = x[(size_t)gi * QK + (size_t)lane];
    uint32_t m;
    memcpy(&m, &a, 4);
    m &= 0x7fffffffu; /* magnitudes compare as integers */
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        uint32_t o = coli_shfl_xor(m, off, QK);
        m = o > m ? o : m;
    }
    float amax;
    memcpy(&amax, &m, 4);
    int q = 0;
    if (amax != 0.0f) {
        float t = coli__qact_mul(amax);
        q = coli__qact_finite(t) ? coli__qact_round(a, t) : coli__qact_round_inf(a, t);
    }
    p[(size_t)gi * QK + (size_t)lane] = (int8_t)q;
    int sum = q;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += coli_shfl_xor(sum, off, QK);
    if (lane == 0) {
        s[gi] = coli__qact_scale(amax);
        psum[gi] = sum;
    }
}

/* One product of a launch: W [rows, cols] times n_tok quantized (or float)
 * activation rows starting at row x0, results into y (row stride ys). */
typedef struct prod {
    const uint8_t *qs;
    const uint16_t *d, *m;
    const void *w; /* float formats */
    int dt, group, rows, cols;
    int x0, n_tok; /* activation rows of this product */
    float *y;
    int ys;
} prod;

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

/* Steps 1-4 for 32 R rows and up to TOK_TILE tokens: 8 lanes per row,
 * lane k taking groups k, k+8, ... Each lane serves R rows 32 apart, which reuses every activation load and keeps more loads in
 * flight. blockIdx.z picks the product. */
template <int DT, int R, int GU>
__global__ void k_qgemm(const prod *prods, const int8_t *p, const float *s, const int32_t *psum)
{
    const prod pr = prods[blockIdx.z];
    const int ROWS_PER_BLOCK = 32 * R;
    const int base = (int)blockIdx.x * ROWS_PER_BLOCK + (int)(threadIdx.x >> 3);
    const int k = threadIdx.x & 7;
    const int t0 = (int)blockIdx.y * TOK_TILE;
    if (t0 >= pr.n_tok || (int)blockIdx.x * ROWS_PER_BLOCK >= pr.rows)
        return; /* the whole block: no shuffle below is left half-done */
    const int nt = pr.n_tok - t0 < TOK_TILE ? pr.n_tok - t0 : TOK_TILE;
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const uint8_t *qr[R];
    const uint16_t *dr[R], *mr[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        int row = base + 32 * r;
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
                    size_t xr = x0 + (size_t)t;
                    const int8_t *pg = p + xr * (size_t)cols + (size_t)QK * gg;
                    float sg = s[xr * (size_t)n + gg];
                    int32_t ps = DT == COLI_DT_Q8 ? 0 : psum[xr * (size_t)n + gg];
                    const int4 *pa = (const int4 *)(const void *)pg;
                    int4 a0 = pa[0], a1 = pa[1];
                    int xa[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        int32_t is = 0;
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            is = coli_dp4a(word<DT>(w[r][h], i), xa[i], is);
                        if (DT == COLI_DT_Q4)
                            is -= 8 * ps; /* the nibbles are q + 8 */
                        float f;
                        if (DT == COLI_DT_Q2) {
                            float ds = D[r][h] * sg, ms = M[r][h] * sg;
                            float f1 = (float)is * ds;
                            float f2 = (float)ps * ms;
                            f = f1 + f2;
                        } else {
                            float ds = D[r][h] * sg;
                            f = (float)is * ds;
                        }
                        P[r][t] += f;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int row = base + 32 * r;
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
__global__ void __launch_bounds__(128) k_qgemm_mma(const prod *prods, const int8_t *p, const float *s,
                                                    const int32_t *psum)
{
    using namespace nvcuda;
    __shared__ __align__(32) signed char sA[4][2][256]; /* per warp: 16 rows x 16 k, two halves */
    __shared__ __align__(32) signed char sB[2][256];    /* 16 tokens x 16 k (col-major), two halves */
    __shared__ __align__(32) int sC[4][256];            /* per warp: 16 x 16 isums, row-major */
    __shared__ float sS[MMA_TOK];
    __shared__ int sP[MMA_TOK];
    const prod pr = prods[blockIdx.z];
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    const int row0 = (int)blockIdx.x * MMA_ROWS + warp * 16;
    const int t0 = (int)blockIdx.y * MMA_TOK;
    if (t0 >= pr.n_tok || (int)blockIdx.x * MMA_ROWS >= pr.rows)
        return; /* the whole block: no barrier below is left waiting */
    const int nt = pr.n_tok - t0 < MMA_TOK ? pr.n_tok - t0 : MMA_TOK;
    const int cols = pr.cols, n = cols / QK;
    const int G = DT == COLI_DT_Q4 ? pr.group : QK;
    const int per = G / QK;
    const size_t row_bytes = DT == COLI_DT_Q8 ? (size_t)cols : DT == COLI_DT_Q4 ? (size_t)cols / 2 : (size_t)cols / 4;
    const size_t x0 = (size_t)(pr.x0 + t0);
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
                    v = *(const int *)(const void *)(p + (x0 + (size_t)j) * (size_t)cols + (size_t)QK * g + 4 * w);
                memcpy(&sB[w / 4][j * 16 + 4 * (w % 4)], &v, 4);
                if (threadIdx.x < MMA_TOK) {
                    int jj = (int)threadIdx.x;
                    sS[jj] = jj < nt ? s[(x0 + (size_t)jj) * (size_t)n + g] : 0.0f;
                    sP[jj] = jj < nt && DT == COLI_DT_Q2 ? psum[(x0 + (size_t)jj) * (size_t)n + g] : 0;
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
                float f;
                if (DT == COLI_DT_Q2) {
                    const float M = coli__f16_bits_to_f32(pr.m[(size_t)rr * (size_t)n + (size_t)g]);
                    float ds = D * sg, ms = M * sg;
                    float f1 = (float)is * ds;
                    float f2 = (float)sP[tok] * ms;
                    f = f1 + f2;
                } else {
                    float ds = D * sg;
                    f = (float)is * ds;
                }
                P[e][k] += f;
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

/* Float weights (f32 or bf16) times float activations: 32 lanes per row,
 * lane k taking columns k, k+32, ... in order with one fused multiply-add
 * each (explicit: --fmad=false only forbids implicit ones), then the
 * butterfly 16, 8, 4, 2, 1: the float product of docs/formats.md, with the
 * CPU's bits. */
template <int DT>
__global__ void k_fgemm(const prod *prods, const float *x)
{
    const prod pr = prods[blockIdx.z];
    const int lanes = 32, rows_per = blockDim.x / lanes;
    int row = (int)blockIdx.x * rows_per + (int)(threadIdx.x / lanes);
    int lane = threadIdx.x % lanes;
    int t0 = (int)blockIdx.y * TOK_TILE;
    if (t0 >= pr.n_tok || (int)blockIdx.x * rows_per >= pr.rows)
        return;
    int nt = pr.n_tok - t0 < TOK_TILE ? pr.n_tok - t0 : TOK_TILE;
    bool live = row < pr.rows;
    int rr = live ? row : 0;
    const int cols = pr.cols;
    float acc[TOK_TILE];
#pragma unroll
    for (int t = 0; t < TOK_TILE; t++)
        acc[t] = 0.0f;
    for (int c = lane; c < cols; c += lanes) {
        float w = DT == COLI_DT_F32 ? ((const float *)pr.w)[(size_t)rr * cols + c]
                                    : coli__bf16_bits_to_f32(((const uint16_t *)pr.w)[(size_t)rr * cols + c]);
#pragma unroll
        for (int t = 0; t < TOK_TILE; t++)
            if (t < nt)
                acc[t] = fmaf(w, x[(size_t)(pr.x0 + t0 + t) * cols + c], acc[t]);
    }
#pragma unroll
    for (int t = 0; t < TOK_TILE; t++) {
        float v = acc[t];
        for (int off = 16; off > 0; off >>= 1)
            v += coli_shfl_xor(v, off, 32);
        if (live && lane == 0 && t < nt)
            pr.y[(size_t)(t0 + t) * (size_t)pr.ys + (size_t)row] = v;
    }
}

/* h = swiglu(g, u) elementwise (lib/cpu/silu.h, the CPU's very function). */
__global__ void k_swiglu(const float *g, const float *u, float *h, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        h[i] = coli__swiglu(g[i], u[i]);
}

/* ---- host side -------------------------------------------------------- */

typedef struct tensor {
    int used, dev;
    coli__gpu_mat shape; /* dt, group, rows, cols; pointers are device ones */
    void *mem;           /* one allocation holding every array */
    uint64_t bytes;
} tensor;

typedef struct device {
    int ordinal;
    cudaStream_t stream;
    cudaEvent_t ev[4];
    void *scratch; /* device: activations, products, tables */
    size_t scratch_cap;
    void *staging; /* pinned host: input rows and the product table out, results in */
    size_t staging_cap;
    coli__gpu_stats st;
} device;

struct coli__gpu {
    device dev[COLI_GPU_MAX_DEVICES];
    int n_dev;
    tensor *t;
    int n_t, cap_t;
    int64_t fail_after, n_calls; /* fault injection */
};

static coli_status cuda_fail(coli__err *err, cudaError_t e, const char *what)
{
    return coli__fail(err, e == cudaErrorMemoryAllocation ? COLI_ENOMEM : COLI_EGPU, "GPU tier: %s: %s (%s)", what,
                      cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CK(call, what)                                  \
    do {                                                \
        cudaError_t ck_e_ = (call);                     \
        if (ck_e_ != cudaSuccess) {                     \
            (void)cudaGetLastError(); /* not sticky */  \
            return cuda_fail(err, ck_e_, what);         \
        }                                               \
    } while (0)

/* After each launch: a bad configuration shows only here. */
#define CK_LAUNCH(what) CK(cudaGetLastError(), what)

static const char *gpu_compiled(void)
{
    return COLI_GPU_TARGETS;
}

static void fill_info(int ordinal, const cudaDeviceProp *p, coli__gpu_devinfo *out)
{
    memset(out, 0, sizeof *out);
    out->ordinal = ordinal;
    snprintf(out->name, sizeof out->name, "%s", p->name);
    coli_gpu_arch_name(p, out->arch, sizeof out->arch);
    out->wave = p->warpSize;
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(ordinal) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        out->free_bytes = fr;
        out->total_bytes = tot;
    } else {
        (void)cudaGetLastError();
        out->total_bytes = p->totalGlobalMem;
    }
}

static coli_status gpu_probe(coli__gpu_devinfo *info, int cap, int *n_devices, coli__err *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* no driver or no device: a machine without a GPU, not an error */
        (void)cudaGetLastError();
        *n_devices = 0;
        return COLI_OK;
    }
    *n_devices = n;
    for (int i = 0; info && i < n && i < cap; i++) {
        cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
        fill_info(i, &p, &info[i]);
    }
    return COLI_OK;
}

static void gpu_free(coli__gpu *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_t; i++)
        if (g->t[i].used) {
            cudaSetDevice(g->dev[g->t[i].dev].ordinal);
            cudaFree(g->t[i].mem);
        }
    for (int d = 0; d < g->n_dev; d++) {
        device *dv = &g->dev[d];
        cudaSetDevice(dv->ordinal);
        if (dv->scratch)
            cudaFree(dv->scratch);
        if (dv->staging)
            cudaFreeHost(dv->staging);
        for (int k = 0; k < 4; k++)
            if (dv->ev[k])
                cudaEventDestroy(dv->ev[k]);
        if (dv->stream)
            cudaStreamDestroy(dv->stream);
    }
    (void)cudaGetLastError();
    free(g->t);
    free(g);
}

static coli_status gpu_init(const coli__gpu_params *p, coli__gpu **out, coli__err *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: no %s device (%s)", COLI_GPU_VENDOR,
                          e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    int zero = 0;
    const int *ids = p && p->n_devices > 0 ? p->devices : &zero;
    int n = p && p->n_devices > 0 ? p->n_devices : 1;
    if (n > COLI_GPU_MAX_DEVICES)
        return coli__fail(err, COLI_EINVAL, "GPU tier: %d devices requested, at most %d", n, COLI_GPU_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= count)
            return coli__fail(err, COLI_EINVAL, "GPU tier: device %d does not exist (%d visible)", ids[i], count);
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i])
                return coli__fail(err, COLI_EINVAL, "GPU tier: device %d listed twice", ids[i]);
    }
    coli__gpu *g = (coli__gpu *)calloc(1, sizeof *g);
    if (!g)
        return coli__fail(err, COLI_ENOMEM, "GPU tier: out of memory");
    g->fail_after = p ? p->fail_after : -1;
    for (int i = 0; i < n; i++) {
        device *dv = &g->dev[i];
        dv->ordinal = ids[i];
        g->n_dev = i + 1;
        coli_status st = COLI_OK;
        cudaError_t ce = cudaSetDevice(dv->ordinal);
        if (ce == cudaSuccess)
            ce = cudaStreamCreate(&dv->stream);
        for (int k = 0; k < 4 && ce == cudaSuccess; k++)
            ce = cudaEventCreate(&dv->ev[k]);
        if (ce != cudaSuccess) {
            (void)cudaGetLastError();
            st = cuda_fail(err, ce, "initialising a device");
            gpu_free(g);
            return st;
        }
    }
    *out = g;
    return COLI_OK;
}

static int gpu_n_devices(const coli__gpu *g)
{
    return g ? g->n_dev : 0;
}

static coli_status check_dev(const coli__gpu *g, int dev, coli__err *err)
{
    if (!g || dev < 0 || dev >= g->n_dev)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no device %d (%d in use)", dev, g ? g->n_dev : 0);
    return COLI_OK;
}

static coli_status gpu_device_info(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, g->dev[dev].ordinal), "cudaGetDeviceProperties");
    fill_info(g->dev[dev].ordinal, &p, out);
    return COLI_OK;
}

/* Fault injection: every fallible call counts; past the limit it fails. */
static coli_status injected(coli__gpu *g, coli__err *err)
{
    if (g->fail_after >= 0 && g->n_calls >= g->fail_after)
        return coli__fail(err, COLI_EGPU, "GPU tier: injected fault (COLI_GPU_FAIL_AFTER=%lld, call %lld)",
                          (long long)g->fail_after, (long long)g->n_calls + 1);
    g->n_calls++;
    return COLI_OK;
}

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* Bytes of each array of m: quants (or values), scales, minimums. */
static void array_bytes(const coli__gpu_mat *m, size_t *a, size_t *b, size_t *c)
{
    size_t rc = (size_t)m->rows * (size_t)m->cols;
    *a = *b = *c = 0;
    switch (m->dt) {
    case COLI_DT_F32:
        *a = rc * 4;
        break;
    case COLI_DT_BF16:
        *a = rc * 2;
        break;
    case COLI_DT_Q8:
        *a = rc;
        *b = rc / QK * 2;
        break;
    case COLI_DT_Q4:
        *a = rc / 2;
        *b = rc / (size_t)m->group * 2;
        break;
    case COLI_DT_Q2:
        *a = rc / 4;
        *b = rc / QK * 2;
        *c = rc / QK * 2;
        break;
    default:
        break;
    }
}

static uint64_t gpu_tensor_bytes(const coli__gpu_mat *m)
{
    size_t a, b, c;
    array_bytes(m, &a, &b, &c);
    return align256(a) + align256(b) + align256(c);
}

static coli_status check_mat(const coli__gpu_mat *m, coli__err *err)
{
    if (!m)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no matrix");
    if (m->rows <= 0 || m->cols <= 0 || m->rows > (1 << 28) || m->cols > (1 << 28))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad shape [%d, %d]", m->rows, m->cols);
    switch (m->dt) {
    case COLI_DT_F32:
    case COLI_DT_BF16:
        if (!m->data)
            return coli__fail(err, COLI_EINVAL, "GPU tier: a float matrix without data");
        return COLI_OK;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        break;
    default:
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: unsupported format %d", (int)m->dt);
    }
    if (m->cols % QK)
        return coli__fail(err, COLI_EINVAL, "GPU tier: %d columns is not a multiple of 32", m->cols);
    if (m->dt == COLI_DT_Q4 && ((m->group != 32 && m->group != 64 && m->group != 128) || m->cols % m->group))
        return coli__fail(err, COLI_EINVAL, "GPU tier: q4 group %d does not fit %d columns", m->group, m->cols);
    if (!m->qs || !m->d || (m->dt == COLI_DT_Q2 && !m->m))
        return coli__fail(err, COLI_EINVAL, "GPU tier: a quantized matrix without its quants, scales or minimums");
    return COLI_OK;
}

static coli_status copy_in(const coli__gpu_mat *m, void *mem, coli__err *err)
{
    size_t a, b, c;
    array_bytes(m, &a, &b, &c);
    char *base = (char *)mem;
    const void *src_a = m->dt == COLI_DT_F32 || m->dt == COLI_DT_BF16 ? m->data : (const void *)m->qs;
    CK(cudaMemcpy(base, src_a, a, cudaMemcpyHostToDevice), "copying a tensor to the device");
    if (b)
        CK(cudaMemcpy(base + align256(a), m->d, b, cudaMemcpyHostToDevice), "copying scales to the device");
    if (c)
        CK(cudaMemcpy(base + align256(a) + align256(b), m->m, c, cudaMemcpyHostToDevice),
           "copying minimums to the device");
    return COLI_OK;
}

static void device_view(const tensor *t, prod *pr)
{
    size_t a, b, c;
    array_bytes(&t->shape, &a, &b, &c);
    char *base = (char *)t->mem;
    memset(pr, 0, sizeof *pr);
    pr->dt = t->shape.dt;
    pr->group = t->shape.dt == COLI_DT_Q4 ? t->shape.group : QK;
    pr->rows = t->shape.rows;
    pr->cols = t->shape.cols;
    if (pr->dt == COLI_DT_F32 || pr->dt == COLI_DT_BF16) {
        pr->w = base;
    } else {
        pr->qs = (const uint8_t *)base;
        pr->d = (const uint16_t *)(base + align256(a));
        pr->m = c ? (const uint16_t *)(base + align256(a) + align256(b)) : NULL;
    }
}

static coli_status gpu_upload(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err)
{
    *handle = -1;
    COLI_TRY(check_dev(g, dev, err));
    COLI_TRY(check_mat(m, err));
    COLI_TRY(injected(g, err));
    int h = -1;
    for (int i = 0; i < g->n_t; i++)
        if (!g->t[i].used) {
            h = i;
            break;
        }
    if (h < 0) {
        if (g->n_t == g->cap_t) {
            int cap = g->cap_t ? 2 * g->cap_t : 256;
            tensor *nt = (tensor *)realloc(g->t, (size_t)cap * sizeof *nt);
            if (!nt)
                return coli__fail(err, COLI_ENOMEM, "GPU tier: out of host memory");
            g->t = nt;
            g->cap_t = cap;
        }
        h = g->n_t++;
        g->t[h].used = 0;
    }
    tensor *t = &g->t[h];
    uint64_t bytes = gpu_tensor_bytes(m);
    CK(cudaSetDevice(g->dev[dev].ordinal), "cudaSetDevice");
    void *mem = NULL;
    cudaError_t e = cudaMalloc(&mem, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return coli__fail(err, COLI_ENOMEM, "GPU tier: no room for a [%d, %d] tensor (%llu bytes) on device %d: %s",
                          m->rows, m->cols, (unsigned long long)bytes, g->dev[dev].ordinal, cudaGetErrorString(e));
    }
    coli_status st = copy_in(m, mem, err);
    if (st != COLI_OK) {
        cudaFree(mem);
        return st;
    }
    t->used = 1;
    t->dev = dev;
    t->shape = *m;
    t->shape.data = NULL;
    t->shape.qs = NULL;
    t->shape.d = t->shape.m = NULL;
    t->mem = mem;
    t->bytes = bytes;
    g->dev[dev].st.resident_tensors++;
    g->dev[dev].st.resident_bytes += bytes;
    *handle = h;
    return COLI_OK;
}

static tensor *lookup(coli__gpu *g, int handle)
{
    if (!g || handle < 0 || handle >= g->n_t || !g->t[handle].used)
        return NULL;
    return &g->t[handle];
}

static coli_status gpu_update(coli__gpu *g, int handle, const coli__gpu_mat *m, coli__err *err)
{
    tensor *t = lookup(g, handle);
    if (!t)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no tensor %d", handle);
    COLI_TRY(check_mat(m, err));
    int g1 = m->dt == COLI_DT_Q4 ? m->group : 0, g0 = t->shape.dt == COLI_DT_Q4 ? t->shape.group : 0;
    if (m->dt != t->shape.dt || m->rows != t->shape.rows || m->cols != t->shape.cols || g1 != g0)
        return coli__fail(err, COLI_EINVAL,
                          "GPU tier: tensor %d is [%d, %d] in format %d; an update must keep shape and format", handle,
                          t->shape.rows, t->shape.cols, (int)t->shape.dt);
    COLI_TRY(injected(g, err));
    CK(cudaSetDevice(g->dev[t->dev].ordinal), "cudaSetDevice");
    return copy_in(m, t->mem, err);
}

static void gpu_release(coli__gpu *g, int handle)
{
    tensor *t = lookup(g, handle);
    if (!t)
        return;
    device *dv = &g->dev[t->dev];
    if (cudaSetDevice(dv->ordinal) == cudaSuccess)
        cudaFree(t->mem);
    (void)cudaGetLastError();
    dv->st.resident_tensors--;
    dv->st.resident_bytes -= t->bytes;
    t->used = 0;
    t->mem = NULL;
}

/* Grows a device's scratch and staging buffers. */
static coli_status reserve(device *dv, size_t dev_bytes, size_t host_bytes, coli__err *err)
{
    if (dv->scratch_cap < dev_bytes) {
        if (dv->scratch)
            cudaFree(dv->scratch);
        dv->scratch = NULL;
        dv->scratch_cap = 0;
        CK(cudaMalloc(&dv->scratch, dev_bytes), "allocating device scratch");
        dv->scratch_cap = dev_bytes;
    }
    if (dv->staging_cap < host_bytes) {
        if (dv->staging)
            cudaFreeHost(dv->staging);
        dv->staging = NULL;
        dv->staging_cap = 0;
        CK(cudaMallocHost(&dv->staging, host_bytes), "allocating pinned host memory");
        dv->staging_cap = host_bytes;
    }
    return COLI_OK;
}

/* A bump allocator over one buffer. */
typedef struct carve {
    char *base;
    size_t off;
} carve;

static void *take(carve *c, size_t bytes)
{
    void *p = c->base + c->off;
    c->off += align256(bytes);
    return p;
}

static int is_quant(int dt)
{
    return dt == COLI_DT_Q8 || dt == COLI_DT_Q4 || dt == COLI_DT_Q2;
}

/* Launches the products of one stage: all of one format (checked by the
 * caller). xq: the quantized activations (p, s, psum) or x for floats. */
static coli_status launch_products(cudaStream_t st, const prod *host_prods, const prod *dev_prods, int n_prods,
                                   const int8_t *p, const float *s, const int32_t *psum, const float *x,
                                   coli__err *err)
{
    int max_rows = 0, max_tok = 0;
    for (int i = 0; i < n_prods; i++) {
        max_rows = host_prods[i].rows > max_rows ? host_prods[i].rows : max_rows;
        max_tok = host_prods[i].n_tok > max_tok ? host_prods[i].n_tok : max_tok;
    }
    if (n_prods == 0 || max_tok == 0)
        return COLI_OK;
    int dt = host_prods[0].dt;
    dim3 grid, block(256);
#if COLI_GPU_HAS_WMMA
    /* prefill: tensor cores, same bits (dispatch follows the flag the
     * kernel is compiled under, so a target without it never gets here) */
    if (is_quant(dt) && max_tok >= 32) {
        grid = dim3((unsigned)((max_rows + MMA_ROWS - 1) / MMA_ROWS), (unsigned)((max_tok + MMA_TOK - 1) / MMA_TOK),
                    (unsigned)n_prods);
        if (dt == COLI_DT_Q8)
            k_qgemm_mma<COLI_DT_Q8><<<grid, 128, 0, st>>>(dev_prods, p, s, psum);
        else if (dt == COLI_DT_Q4)
            k_qgemm_mma<COLI_DT_Q4><<<grid, 128, 0, st>>>(dev_prods, p, s, psum);
        else
            k_qgemm_mma<COLI_DT_Q2><<<grid, 128, 0, st>>>(dev_prods, p, s, psum);
        CK_LAUNCH("a tensor-core product kernel");
        return COLI_OK;
    }
#endif
    if (is_quant(dt)) {
        /* rows per lane and groups per iteration: enough bytes in flight
         * per lane without spilling (measured on an H200) */
        const int R = dt == COLI_DT_Q8 ? Q8_R : dt == COLI_DT_Q4 ? Q4_R : Q2_R;
        grid = dim3((unsigned)((max_rows + 32 * R - 1) / (32 * R)), (unsigned)((max_tok + TOK_TILE - 1) / TOK_TILE),
                    (unsigned)n_prods);
        if (dt == COLI_DT_Q8)
            k_qgemm<COLI_DT_Q8, Q8_R, Q8_GU><<<grid, block, 0, st>>>(dev_prods, p, s, psum);
        else if (dt == COLI_DT_Q4)
            k_qgemm<COLI_DT_Q4, Q4_R, Q4_GU><<<grid, block, 0, st>>>(dev_prods, p, s, psum);
        else
            k_qgemm<COLI_DT_Q2, Q2_R, Q2_GU><<<grid, block, 0, st>>>(dev_prods, p, s, psum);
    } else {
        grid = dim3((unsigned)((max_rows + 7) / 8), (unsigned)((max_tok + TOK_TILE - 1) / TOK_TILE),
                    (unsigned)n_prods);
        if (dt == COLI_DT_F32)
            k_fgemm<COLI_DT_F32><<<grid, block, 0, st>>>(dev_prods, x);
        else
            k_fgemm<COLI_DT_BF16><<<grid, block, 0, st>>>(dev_prods, x);
    }
    CK_LAUNCH("a product kernel");
    return COLI_OK;
}

static coli_status launch_quantize(cudaStream_t st, const float *x, int rows, int cols, int8_t *p, float *s,
                                   int32_t *psum, coli__err *err)
{
    int n_groups = rows * (cols / QK);
    if (n_groups == 0)
        return COLI_OK;
    k_quantize_act<<<(n_groups + 7) / 8, 8 * QK, 0, st>>>(x, n_groups, p, s, psum);
    CK_LAUNCH("the activation quantization kernel");
    return COLI_OK;
}

static uint64_t elapsed_ns(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

/*
 * The common path of matmul and experts on one device. Stage 1: products
 * a (each job's gate and up, or the single matmul) on x; for experts,
 * SwiGLU and stage 2: the down products on h. One copy in (x and the
 * product tables), one copy out (y).
 */
typedef struct job_view {
    prod gate, up, down;
    int n_rows;
} job_view;

static coli_status run(coli__gpu *g, int dev, const job_view *jobs, int n_jobs, int is_experts, const float *x,
                       float *y, coli__err *err)
{
    device *dv = &g->dev[dev];
    int total = 0;
    for (int j = 0; j < n_jobs; j++)
        total += jobs[j].n_rows;
    if (total == 0)
        return COLI_OK;
    const prod *first = is_experts ? &jobs[0].gate : &jobs[0].down;
    /* dt: the format of stage 1 (gate and up, or the one matrix); dt2: of
     * the down projections, which may differ (a width the quantized formats
     * cannot take leaves them in bf16) */
    int dt = first->dt, H = first->cols;
    int dt2 = is_experts ? jobs[0].down.dt : dt;
    int I = is_experts ? jobs[0].gate.rows : 0;
    int O = is_experts ? H : jobs[0].down.rows;
    for (int j = 0; j < n_jobs; j++) {
        const job_view *jv = &jobs[j];
        if (is_experts) {
            if (jv->gate.dt != dt || jv->up.dt != dt || jv->down.dt != dt2 || jv->gate.cols != H ||
                jv->up.cols != H || jv->down.rows != H || jv->gate.rows != I || jv->up.rows != I ||
                jv->down.cols != I)
                return coli__fail(err, COLI_EINVAL,
                                  "GPU tier: expert %d of the call differs from the first in format or shape", j);
        }
    }
    int n_stage1 = is_experts ? 2 * n_jobs : 1, n_stage2 = is_experts ? n_jobs : 0;
    size_t n_prods = (size_t)(n_stage1 + n_stage2);
    size_t x_bytes = (size_t)total * H * 4, y_bytes = (size_t)total * O * 4;
    size_t tab_bytes = n_prods * sizeof(prod);
    /* device layout */
    size_t q_bytes = is_quant(dt) ? align256((size_t)total * H) + 2 * align256((size_t)total * (H / QK) * 4) : 0;
    size_t qh_bytes = is_quant(dt2) && is_experts
                          ? align256((size_t)total * I) + 2 * align256((size_t)total * (I / QK) * 4)
                          : 0;
    size_t gu_bytes = is_experts ? 3 * align256((size_t)total * I * 4) : 0;
    size_t dev_need = align256(tab_bytes) + align256(x_bytes) + align256(y_bytes) + q_bytes + qh_bytes + gu_bytes;
    size_t host_need = align256(tab_bytes) + align256(x_bytes > y_bytes ? x_bytes : y_bytes);
    CK(cudaSetDevice(dv->ordinal), "cudaSetDevice");
    COLI_TRY(reserve(dv, dev_need, host_need, err));
    carve dc = {(char *)dv->scratch, 0};
    prod *d_tab = (prod *)take(&dc, tab_bytes);
    float *d_x = (float *)take(&dc, x_bytes);
    float *d_y = (float *)take(&dc, y_bytes);
    int8_t *px = NULL, *ph = NULL;
    float *sx = NULL, *sh = NULL, *d_g = NULL, *d_u = NULL, *d_h = NULL;
    int32_t *psx = NULL, *psh = NULL;
    if (is_quant(dt)) {
        px = (int8_t *)take(&dc, (size_t)total * H);
        sx = (float *)take(&dc, (size_t)total * (H / QK) * 4);
        psx = (int32_t *)take(&dc, (size_t)total * (H / QK) * 4);
    }
    if (is_experts) {
        d_g = (float *)take(&dc, (size_t)total * I * 4);
        d_u = (float *)take(&dc, (size_t)total * I * 4);
        d_h = (float *)take(&dc, (size_t)total * I * 4);
        if (is_quant(dt2)) {
            ph = (int8_t *)take(&dc, (size_t)total * I);
            sh = (float *)take(&dc, (size_t)total * (I / QK) * 4);
            psh = (int32_t *)take(&dc, (size_t)total * (I / QK) * 4);
        }
    }
    /* the product tables, built on the host in the staging buffer */
    carve hc = {(char *)dv->staging, 0};
    prod *h_tab = (prod *)take(&hc, tab_bytes);
    float *h_x = (float *)take(&hc, x_bytes > y_bytes ? x_bytes : y_bytes);
    int off = 0;
    for (int j = 0; j < n_jobs; j++) {
        const job_view *jv = &jobs[j];
        if (is_experts) {
            prod a = jv->gate, b = jv->up, c = jv->down;
            a.x0 = b.x0 = c.x0 = off;
            a.n_tok = b.n_tok = c.n_tok = jv->n_rows;
            a.y = d_g + (size_t)off * I;
            b.y = d_u + (size_t)off * I;
            c.y = d_y + (size_t)off * H;
            a.ys = b.ys = I;
            c.ys = H;
            h_tab[2 * j] = a;
            h_tab[2 * j + 1] = b;
            h_tab[n_stage1 + j] = c;
        } else {
            prod a = jv->down;
            a.x0 = 0;
            a.n_tok = jv->n_rows;
            a.y = d_y;
            a.ys = O;
            h_tab[0] = a;
        }
        off += jv->n_rows;
    }
    memcpy(h_x, x, x_bytes);
    cudaStream_t st = dv->stream;
    CK(cudaEventRecord(dv->ev[0], st), "cudaEventRecord");
    /* table and x sit together in staging and in scratch: one copy */
    size_t in_bytes = (size_t)((char *)h_x - (char *)h_tab) + x_bytes;
    if ((char *)d_x - (char *)d_tab != (char *)h_x - (char *)h_tab)
        return coli__fail(err, COLI_EGPU, "GPU tier: internal layout mismatch");
    CK(cudaMemcpyAsync(d_tab, h_tab, in_bytes, cudaMemcpyHostToDevice, st), "copying activations to the device");
    CK(cudaEventRecord(dv->ev[1], st), "cudaEventRecord");
    if (is_quant(dt))
        COLI_TRY(launch_quantize(st, d_x, total, H, px, sx, psx, err));
    COLI_TRY(launch_products(st, h_tab, d_tab, n_stage1, px, sx, psx, d_x, err));
    if (is_experts) {
        size_t n = (size_t)total * I;
        k_swiglu<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(d_g, d_u, d_h, n);
        CK_LAUNCH("the SwiGLU kernel");
        if (is_quant(dt2))
            COLI_TRY(launch_quantize(st, d_h, total, I, ph, sh, psh, err));
        COLI_TRY(launch_products(st, h_tab + n_stage1, d_tab + n_stage1, n_stage2, ph, sh, psh, d_h, err));
    }
    CK(cudaEventRecord(dv->ev[2], st), "cudaEventRecord");
    CK(cudaMemcpyAsync(h_x, d_y, y_bytes, cudaMemcpyDeviceToHost, st), "copying results from the device");
    CK(cudaEventRecord(dv->ev[3], st), "cudaEventRecord");
    CK(cudaStreamSynchronize(st), "running the products");
    memcpy(y, h_x, y_bytes);
    dv->st.calls++;
    dv->st.rows += (uint64_t)total;
    dv->st.h2d_ns += elapsed_ns(dv->ev[0], dv->ev[1]);
    dv->st.kernel_ns += elapsed_ns(dv->ev[1], dv->ev[2]);
    dv->st.d2h_ns += elapsed_ns(dv->ev[2], dv->ev[3]);
    dv->st.h2d_bytes += in_bytes;
    dv->st.d2h_bytes += y_bytes;
    return COLI_OK;
}

static coli_status gpu_matmul(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err)
{
    tensor *t = lookup(g, handle);
    if (!t)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no tensor %d", handle);
    if (S < 0 || (S > 0 && (!x || !y)))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad matmul arguments (S = %d)", S);
    COLI_TRY(injected(g, err));
    job_view jv;
    memset(&jv, 0, sizeof jv);
    device_view(t, &jv.down);
    jv.n_rows = S;
    coli_status st = run(g, t->dev, &jv, 1, 0, x, y, err);
    if (st != COLI_OK)
        g->dev[t->dev].st.failures++;
    return st;
}

static coli_status gpu_experts(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                               float *y, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    if (n_jobs < 0 || (n_jobs > 0 && (!jobs || !x || !y)))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad expert call arguments");
    if (n_jobs == 0)
        return COLI_OK;
    job_view *jv = (job_view *)calloc((size_t)n_jobs, sizeof *jv);
    if (!jv)
        return coli__fail(err, COLI_ENOMEM, "GPU tier: out of host memory");
    coli_status st = COLI_OK;
    for (int j = 0; j < n_jobs && st == COLI_OK; j++) {
        tensor *a = lookup(g, jobs[j].gate), *b = lookup(g, jobs[j].up), *c = lookup(g, jobs[j].down);
        if (!a || !b || !c)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d of the call names a missing tensor", j);
        else if (a->dev != dev || b->dev != dev || c->dev != dev)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d of the call is not on device %d", j, dev);
        else if (jobs[j].n_rows < 0)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d: %d rows", j, jobs[j].n_rows);
        else {
            device_view(a, &jv[j].gate);
            device_view(b, &jv[j].up);
            device_view(c, &jv[j].down);
            jv[j].n_rows = jobs[j].n_rows;
        }
    }
    if (st == COLI_OK)
        st = injected(g, err);
    if (st == COLI_OK) {
        st = run(g, dev, jv, n_jobs, 1, x, y, err);
        if (st != COLI_OK)
            g->dev[dev].st.failures++;
    }
    free(jv);
    return st;
}

static coli_status gpu_stats(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    *out = g->dev[dev].st;
    return COLI_OK;
}

static const coli__gpu_ops gpu_ops = {
    gpu_compiled, gpu_probe,  gpu_init,    gpu_free,         gpu_n_devices, gpu_device_info,
    gpu_upload,   gpu_update, gpu_release, gpu_tensor_bytes, gpu_matmul,    gpu_experts,
    gpu_stats,
};

extern "C" const coli__gpu_ops *coli__gpu_backend(void)
{
    return &gpu_ops;
}
