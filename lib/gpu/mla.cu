/* mla.cu - latent attention's own steps on the device, in the order of
 * docs/formats.md ("Latent attention"): the latent's norm, the rotary key
 * and queries turned, the cache row stored, and the absorption of each
 * head's query into the latent's space. The products around them are
 * matmul.cu's and the attention over the cached rows attention.cu's (one
 * KV head, keys of kv_lora + rope values, values their first kv_lora). */
#include "gpu/compat.h"

#include "gpu/kern.h"

/* The value of weight (r, i) of a resident matrix, as coli__mat_row
 * widens it (docs/formats.md "Quantized matrices"). */
static __device__ __forceinline__ float mat_value(const prod &w, int r, int i)
{
    const size_t at = (size_t)r * (size_t)w.cols + (size_t)i;
    const int b = (int)(at % 32);
    switch (w.dt) {
    case COLI_DT_F32:
        return ((const float *)w.w)[at];
    case COLI_DT_BF16:
        return coli__bf16_bits_to_f32(((const uint16_t *)w.w)[at]);
    case COLI_DT_Q8:
        return coli__f16_bits_to_f32(w.d[at / 32]) * (float)((const int8_t *)w.qs)[at];
    case COLI_DT_Q4: {
        const uint8_t byte = w.qs[16 * (at / 32) + (size_t)(b & 15)];
        const int u = b < 16 ? byte & 15 : byte >> 4;
        return coli__f16_bits_to_f32(w.d[at / (size_t)w.group]) * (float)(u - 8);
    }
    default: { /* q2: d * q, then + m (two roundings) */
        const int q = (w.qs[8 * (at / 32) + (size_t)(b & 7)] >> (2 * (b >> 3))) & 3;
        const float dq = coli__f16_bits_to_f32(w.d[at / 32]) * (float)q;
        return dq + coli__f16_bits_to_f32(w.m[at / 32]);
    }
    }
}

/* A rotary part of R values at src, reordered (even offsets, then odd)
 * when interleaved, into v (shared memory), then turned by the token's
 * table cs. One 32-lane group. */
static __device__ void turn(const float *src, float *v, int R, int interleave, const float *cs, int lane)
{
    const int half = R / 2;
    for (int i = lane; i < half; i += 32) {
        v[i] = interleave ? src[2 * i] : src[i];
        v[half + i] = interleave ? src[2 * i + 1] : src[half + i];
    }
    coli_syncwarp();
    for (int i = lane; i < half; i += 32)
        coli__rotate_pair(v, i, half, cs);
    coli_syncwarp();
}

/* One block per token: c = RMSNorm(kv[0 .. L)) and the turned key into
 * the cache row of the token's position (rounded as the cache's type
 * says); every head's turned query part after its absorbed latent part
 * in qc. smem: L + 8 * R floats. */
static __global__ void k_mla_rotate_store(coli__mla_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int t = (int)blockIdx.x;
    if (t >= a.step[0])
        return;
    const int L = a.kv_lora, R = a.rope, K = L + R, QH = a.nope + R;
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32), warps = (int)(blockDim.x / 32);
    extern __shared__ float smem[];
    float *c = smem, *v = smem + L + warp * R;
    const float *kv = a.ckv + (size_t)t * K, *cs = a.rope_cs + (size_t)t * R;
    for (int i = (int)threadIdx.x; i < L; i += (int)blockDim.x)
        c[i] = kv[i];
    coli__norm_row(c, L, a.kv_norm, a.eps, c, NULL, 0); /* ends with a barrier */
    const size_t at = (size_t)(a.step[1] + t) * (size_t)a.row;
    for (int i = (int)threadIdx.x; i < L; i += (int)blockDim.x)
        coli__cache_put(a.cache, a.kv_bf16, at + (size_t)i, c[i]);
    /* warp w: the key (w == 0), then heads w - 1, w - 1 + warps, ... */
    for (int h = warp - 1; h < a.nh; h += warps) {
        const float *src = h < 0 ? kv + L : a.q + ((size_t)t * a.nh + (size_t)h) * QH + a.nope;
        turn(src, v, R, a.interleave, cs, lane);
        if (h < 0) {
            for (int i = lane; i < R; i += 32)
                coli__cache_put(a.cache, a.kv_bf16, at + (size_t)(L + i), v[i]);
        } else {
            float *dst = a.qc + ((size_t)t * a.nh + (size_t)h) * K + L;
            for (int i = lane; i < R; i += 32)
                dst[i] = v[i];
        }
        coli_syncwarp();
    }
}

#define ABS_COLS 128 /* latent values a block of the absorption computes */
#define ABS_TOK 8    /* tokens it takes, each weight read once for them */

/* u_h[i] = sum over d < nope, in increasing d, of fma(qn_h[d], w(h (nope
 * + v) + d, i), .) from +0: block (column block, head, token block). */
static __global__ void __launch_bounds__(ABS_COLS) k_mla_absorb(coli__mla_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int h = (int)blockIdx.y, t0 = (int)blockIdx.z * ABS_TOK, S = a.step[0];
    if (t0 >= S)
        return;
    const int nt = S - t0 < ABS_TOK ? S - t0 : ABS_TOK;
    const int N = a.nope, L = a.kv_lora, K = L + a.rope, QH = N + a.rope;
    extern __shared__ float qn[]; /* [ABS_TOK][N] */
    for (int k = (int)threadIdx.x; k < ABS_TOK * N; k += (int)blockDim.x) {
        const int tt = k / N, d = k % N;
        qn[k] = tt < nt ? a.q[((size_t)(t0 + tt) * a.nh + (size_t)h) * QH + (size_t)d] : 0.0f;
    }
    __syncthreads();
    const int i = (int)blockIdx.x * ABS_COLS + (int)threadIdx.x;
    if (i >= L)
        return;
    const int r0 = h * (N + a.v_dim);
    float u[ABS_TOK];
#pragma unroll
    for (int tt = 0; tt < ABS_TOK; tt++)
        u[tt] = 0.0f;
    for (int d = 0; d < N; d++) {
        const float w = mat_value(a.kvb, r0 + d, i);
#pragma unroll
        for (int tt = 0; tt < ABS_TOK; tt++)
            u[tt] = fmaf(qn[tt * N + d], w, u[tt]);
    }
    for (int tt = 0; tt < nt; tt++)
        a.qc[((size_t)(t0 + tt) * a.nh + (size_t)h) * K + (size_t)i] = u[tt];
}

coli_status coli__k_mla_rotate_store(cudaStream_t st, const coli__mla_args *a, int max_S, coli__err *err)
{
    const size_t smem = (size_t)(a->kv_lora + 8 * a->rope) * sizeof(float);
    (void)coli_launch(coli__gpu_pdl(), k_mla_rotate_store, dim3((unsigned)max_S), 256, smem, st, *a);
    CK_LAUNCH("the latent attention's rotary kernel");
    return COLI_OK;
}

coli_status coli__k_mla_absorb(cudaStream_t st, const coli__mla_args *a, int max_S, coli__err *err)
{
    const dim3 grid((unsigned)((a->kv_lora + ABS_COLS - 1) / ABS_COLS), (unsigned)a->nh,
                    (unsigned)((max_S + ABS_TOK - 1) / ABS_TOK));
    const size_t smem = (size_t)ABS_TOK * (size_t)a->nope * sizeof(float);
    (void)coli_launch(coli__gpu_pdl(), k_mla_absorb, grid, ABS_COLS, smem, st, *a);
    CK_LAUNCH("the latent attention's absorption kernel");
    return COLI_OK;
}
