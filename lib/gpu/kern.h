/* kern.h - what the GPU tier's sources share (internal, device code).
 *
 * One file per kernel family: matmul.cu (activation quantization and the
 * products), norm.cu (embedding rows, RMSNorm, residuals, the q/k/v step
 * with RoPE and the KV cache), attention.cu, moe.cu (router, the grouping
 * of routed pairs, their combination) and pipeline.cu (a whole decoder
 * step on one device), with backend.cu holding devices, tensors and the
 * table of operations, and state.cu, below them all, what they share of
 * the state (errors, fault injection, tensor views). Calls go downward:
 * backend.cu, then pipeline.cu and pipe_build.cu, then the kernel families,
 * then state.cu. Every kernel follows docs/formats.md to the bit;
 * the sources are compiled with --fmad=false (nvcc) or -ffp-contract=off
 * (hipcc), so only the fmaf calls written here fuse.
 *
 * Included only by the .cu files of lib/gpu/, after compat.h. */
#ifndef COLI_GPU_KERN_H
#define COLI_GPU_KERN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "cpu/fp16.h"
#include "cpu/qround.h"

#define QK 32      /* activation group; q8/q2 weight group */
#define TOK_TILE 8 /* tokens one block of the vector products computes */
#define ATT_TILE 256 /* positions of one attention tile (docs/formats.md) */

/* One product of a launch: W [rows, cols] times n_tok quantized (or float)
 * activation rows starting at row x0, results into y (row stride ys).
 * live, when set, is a device count that caps n_tok at run time, so that
 * one table serves every chunk size (and a captured graph). xrow, when
 * set, maps row x0 + t to the activation row it reads (the routed experts
 * read the tokens' rows in place). */
typedef struct prod {
    const uint8_t *qs;
    const uint16_t *d, *m;
    const void *w; /* float formats */
    int dt, group, rows, cols;
    int x0, n_tok; /* activation rows of this product */
    float *y;
    int ys;
    const int *live;
    const int *xrow;
} prod;

/* The tokens a product computes this step. n_tok first: an unused table
 * entry says only n_tok = 0, and its pointers are not to be read. */
static __device__ __forceinline__ int prod_tokens(const prod &pr)
{
    if (pr.n_tok <= 0)
        return 0;
    return pr.live && *pr.live < pr.n_tok ? *pr.live : pr.n_tok;
}

/* ---- device and tensor state (backend.cu; read by pipeline.cu) ---- */

typedef struct tensor {
    int used, dev;
    coli__gpu_mat shape; /* dt, group, rows, cols; pointers are device ones */
    void *mem;           /* one allocation holding every array */
    uint64_t bytes;
    int kind;            /* coli__gpu_kind, for the statistics */
} tensor;

typedef struct device {
    int ordinal;
    cudaStream_t stream;
    cudaEvent_t ev[4];
    void *scratch; /* device: activations, products, tables */
    size_t scratch_cap;
    void *staging; /* pinned host: input rows and the product table out, results in */
    size_t staging_cap;
    int smem_optin; /* bytes of shared memory a block may ask for */
    coli__gpu_stats st;
} device;

struct coli__gpu {
    device dev[COLI_GPU_MAX_DEVICES];
    int n_dev;
    tensor *t;
    int n_t, cap_t;
    int64_t fail_after, n_calls; /* fault injection */
};

/* state.cu: the bottom of the tier. */
coli_status coli__cuda_fail(coli__err *err, cudaError_t e, const char *what);
/* Bytes of each array of m: quants (or values), scales, minimums. */
void coli__gpu_array_bytes(const coli__gpu_mat *m, size_t *a, size_t *b, size_t *c);
/* Programmatic dependent launch for this thread's launches (on: every
 * kernel launched waits with coli_pdl_wait before it touches the step's
 * data; see compat.h). */
void coli__gpu_pdl_set(int on);
int coli__gpu_pdl(void);
/* Fault injection (COLI_GPU_FAIL_AFTER): every fallible call counts. */
coli_status coli__gpu_injected(coli__gpu *g, coli__err *err);
/* The tensor of a handle, or NULL. */
tensor *coli__gpu_lookup(coli__gpu *g, int handle);
/* A product's weight fields for a resident tensor (x0, n_tok, y unset). */
void coli__gpu_view(const tensor *t, prod *pr);

#define CK(call, what)                                  \
    do {                                                \
        cudaError_t ck_e_ = (call);                     \
        if (ck_e_ != cudaSuccess) {                     \
            (void)cudaGetLastError(); /* not sticky */  \
            return coli__cuda_fail(err, ck_e_, what);   \
        }                                               \
    } while (0)

/* After each launch: a bad configuration shows only here. */
#define CK_LAUNCH(what) CK(cudaGetLastError(), what)

static inline size_t coli__align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

static inline int coli__is_quant(int dt)
{
    return dt == COLI_DT_Q8 || dt == COLI_DT_Q4 || dt == COLI_DT_Q2;
}

/* ---- device arithmetic shared by the kernel families ---- */

/* The float product's step 3-4 (docs/formats.md) for the value v this lane
 * holds as partial P_lane of 32: afterwards every lane has y. */
static __device__ __forceinline__ float coli__tree32(float v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v += coli_shfl_xor(v, off, 32);
    return v;
}

/* dot(w, x) over n values by the float product rule, from one 32-lane
 * group: lane l takes i = l, l + 32, ... ; every lane gets the result. */
static __device__ __forceinline__ float coli__dot32(const float *w, const float *x, int n, int lane)
{
    float p = 0.0f;
    for (int i = lane; i < n; i += 32)
        p = fmaf(w[i], x[i], p);
    return coli__tree32(p);
}

/* The activation quantization of docs/formats.md for value a of lane
 * `lane` of a 32-lane group (group gi), rounded by lib/cpu/qround.h as
 * lib/cpu/quant.c does: the maximum and the sum are exact whatever the
 * order of the lanes. */
static __device__ __forceinline__ void coli__quant32(float a, int lane, size_t gi, int8_t *p, float *s,
                                                     int32_t *psum)
{
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
    p[gi * QK + (size_t)lane] = (int8_t)q;
    int sum = q;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += coli_shfl_xor(sum, off, QK);
    if (lane == 0) {
        s[gi] = coli__qact_scale(amax);
        psum[gi] = sum;
    }
}

/* Where a kernel also writes its output quantized (NULL: it does not). */
typedef struct coli__qout {
    int8_t *p;
    float *s;
    int32_t *psum;
} coli__qout;

/* RMSNorm of the row xs (shared memory, n values) by one block, into out;
 * with q, quantized too (row index qrow). docs/formats.md: ss = dot(x, x)
 * by the float product rule, lane l of the first warp taking i = l, l + 32,
 * ...; r = 1 / sqrtf(ss / n + eps); out_i = w_i * (x_i * r). Ends with a
 * barrier: xs may be reused after. */
static __device__ inline void coli__norm_row(float *xs, int n, const float *w, float eps, float *out, const coli__qout *q,
                                      size_t qrow)
{
    __shared__ float rs;
    float wv[4]; /* the first weights a thread needs, loaded under the sum */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int i = (int)threadIdx.x + k * (int)blockDim.x;
        wv[k] = i < n ? w[i] : 0.0f;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        const int lane = (int)threadIdx.x;
        float p = 0.0f;
        int i = lane;
        for (; i + 32 * 7 < n; i += 32 * 8) { /* eight loads, then the chain */
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                v[u] = xs[i + 32 * u];
#pragma unroll
            for (int u = 0; u < 8; u++)
                p = fmaf(v[u], v[u], p);
        }
        for (; i < n; i += 32)
            p = fmaf(xs[i], xs[i], p);
        const float ss = coli__tree32(p);
        if (lane == 0)
            rs = 1.0f / sqrtf(ss / (float)n + eps);
    }
    __syncthreads();
    const float r = rs;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int i = (int)threadIdx.x + k * (int)blockDim.x;
        if (i < n) {
            float v = wv[k] * (xs[i] * r);
            out[i] = v;
            xs[i] = v;
        }
    }
    for (int i = (int)threadIdx.x + 4 * (int)blockDim.x; i < n; i += (int)blockDim.x) {
        float v = w[i] * (xs[i] * r);
        out[i] = v;
        xs[i] = v;
    }
    if (q && q->p && n % QK == 0) {
        __syncthreads();
        const int lane = (int)(threadIdx.x % 32), warps = (int)(blockDim.x / 32);
        const size_t g0 = qrow * (size_t)(n / QK);
        for (int g = (int)(threadIdx.x / 32); g < n / QK; g += warps)
            coli__quant32(xs[g * QK + lane], lane, g0 + (size_t)g, q->p, q->s, q->psum);
    }
    __syncthreads();
}

/* ---- launchers (host side), one family per file ---- */

/* matmul.cu: activation quantization of rows x [rows, cols]. */
coli_status coli__k_quantize(cudaStream_t st, const float *x, int rows, int cols, int8_t *p, float *s, int32_t *psum,
                             coli__err *err);
/* n_prods products of format dt from a device table, at most max_rows
 * rows and max_tok tokens each (the grid), of about cols columns (a hint
 * for the kernel's shape: each product has its own); quantized
 * activations (p, s, psum) or float ones (x). early: the table and its
 * weights are made at creation, never by a kernel of the step, so that
 * the weights may load before the kernel waits for the one before it. */
coli_status coli__k_products(cudaStream_t st, int dt, const prod *dev_prods, int n_prods, int max_rows, int cols,
                             int max_tok, const int8_t *p, const float *s, const int32_t *psum, const float *x,
                             int early, coli__err *err);
/* h = swiglu(g, u) over n values. */
coli_status coli__k_swiglu(cudaStream_t st, const float *g, const float *u, float *h, size_t n, coli__err *err);
/* The same for rows x cols, and h quantized when q is set. */
coli_status coli__k_swiglu_q(cudaStream_t st, const float *g, const float *u, float *h, int rows, int cols,
                             const coli__qout *q, coli__err *err);

/* norm.cu */
/* x[t] = row tokens[t] of the embedding (f32 or bf16), t < *S. */
coli_status coli__k_embed(cudaStream_t st, const tensor *emb, const int32_t *tokens, const int *S, int max_S,
                          float *x, coli__err *err);
/* With o: x += o first (the residual). Then xn = rmsnorm(x, w) for rows
 * 0 .. *S - 1 (or the last row alone, into row 0, when last_only); with
 * q, quantized too. */
coli_status coli__k_norm(cudaStream_t st, float *x, const float *o, const float *w, int H, float eps, const int *S,
                         int max_S, int last_only, float *xn, const coli__qout *q, coli__err *err);
/* x += o for rows < *S (a residual without a norm after it). */
coli_status coli__k_residual(cudaStream_t st, float *x, const float *o, int H, const int *S, int max_S,
                             coli__err *err);

/* The step after the q, k, v products: their biases, q/k norm, clipping,
 * RoPE, and the keys and values into the cache at positions pos0 + t. */
typedef struct coli__qkv_args {
    float *q, *k, *v;         /* [S, nh*hd], [S, nkv*hd] */
    const float *bq, *bk, *bv; /* NULL: no biases (else all three) */
    const float *q_norm, *k_norm; /* NULL: none */
    int qk_norm;              /* 0 none, 1 per head, 2 whole projection */
    float clip;
    int nh, nkv, hd, rot;
    float eps;
    const float *rope;        /* [S, rot]: cos then sin of each token */
    void *kc, *vc;            /* this layer's cache [n_ctx, nkv*hd] */
    int kv_bf16;
    const int *step;          /* S, pos0 */
} coli__qkv_args;
coli_status coli__k_qkv(cudaStream_t st, const coli__qkv_args *a, int max_S, coli__err *err);

/* RMSNorm in place of one vector v[n] (shared memory) with weights w, by
 * one 32-lane group. */
static __device__ inline void coli__norm_in_place(float *v, const float *w, int n, float eps, int lane)
{
    float p = 0.0f;
    for (int i = lane; i < n; i += 32)
        p = fmaf(v[i], v[i], p);
    const float ss = coli__tree32(p);
    const float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = lane; i < n; i += 32)
        v[i] = w[i] * (v[i] * r);
}

static __device__ __forceinline__ float coli__clip1(float v, float c)
{
    return v < -c ? -c : v > c ? c : v;
}

/* x as a cache of bf16 (or f32) gives it back: the contract's rounding,
 * as the CPU's cache. */
static __device__ __forceinline__ float coli__kv_rounded(int bf16, float x)
{
    return bf16 ? coli__bf16_bits_to_f32(coli__f32_to_bf16_bits(x)) : x;
}

/* Value i of a cache, rounded to bf16 when it is bf16 (the contract's
 * rounding, as the CPU's cache). */
static __device__ __forceinline__ void coli__cache_put(void *c, int bf16, size_t i, float x)
{
    if (bf16)
        ((uint16_t *)c)[i] = coli__f32_to_bf16_bits(x);
    else
        ((float *)c)[i] = x;
}

/* Key and value i of the cache. */
static __device__ __forceinline__ void coli__store_kv(const coli__qkv_args &a, size_t i, float k, float v)
{
    coli__cache_put(a.kc, a.kv_bf16, i, k);
    coli__cache_put(a.vc, a.kv_bf16, i, v);
}

/* RoPE's rotate-half of pair (i, i + half) of head hv, with the token's
 * table cs (cos, then sin). */
static __device__ __forceinline__ void coli__rotate_pair(float *hv, int i, int half, const float *cs)
{
    const float c = cs[i], sn = cs[half + i];
    const float x0 = hv[i], x1 = hv[i + half];
    const float c0 = x0 * c, s1 = x1 * sn, c1 = x1 * c, s0 = x0 * sn;
    hv[i] = c0 - s1;
    hv[i + half] = c1 + s0;
}

/* The q/k/v step of head h of token t (h < nh: a q head; else k head h -
 * nh with its v): loaded into hv (and vv) with their biases, the per-head q/k norm, the
 * clip, then RoPE, in k_qkv's order. One 32-lane group; hv, vv: hd
 * floats of shared memory each. */
static __device__ inline void coli__head_prep(const coli__qkv_args &a, int h, int t, int lane, float *hv, float *vv)
{
    const int hd = a.hd, QD = a.nh * hd, KVD = a.nkv * hd;
    const int is_q = h < a.nh, kh = h - a.nh;
    const float *src = is_q ? a.q + (size_t)t * QD + (size_t)h * hd : a.k + (size_t)t * KVD + (size_t)kh * hd;
    const float *vsrc = a.v + (size_t)t * KVD + (size_t)kh * hd;
    if (a.bq) { /* only then: x + 0 would turn -0 into +0 */
        const float *b = is_q ? a.bq + (size_t)h * hd : a.bk + (size_t)kh * hd, *bv = a.bv + (size_t)kh * hd;
        for (int i = lane; i < hd; i += 32) {
            hv[i] = src[i] + b[i];
            if (!is_q)
                vv[i] = vsrc[i] + bv[i];
        }
    } else {
        for (int i = lane; i < hd; i += 32) {
            hv[i] = src[i];
            if (!is_q)
                vv[i] = vsrc[i];
        }
    }
    coli_syncwarp();
    if (a.qk_norm == 1)
        coli__norm_in_place(hv, is_q ? a.q_norm : a.k_norm, hd, a.eps, lane);
    coli_syncwarp();
    if (a.clip > 0.0f) {
        for (int i = lane; i < hd; i += 32) {
            hv[i] = coli__clip1(hv[i], a.clip);
            if (!is_q)
                vv[i] = coli__clip1(vv[i], a.clip);
        }
        coli_syncwarp();
    }
    const int half = a.rot / 2;
    const float *cs = a.rope + (size_t)t * a.rot;
    for (int i = lane; i < half; i += 32)
        coli__rotate_pair(hv, i, half, cs);
    coli_syncwarp();
}

/* attention.cu: out [S, nh*vd] from q [S, nh*hd] and the cache, positions
 * 0 .. pos0 + t of each token t (within the window). Position p's key of
 * KV head g is kc[p * rs + g * hd ..] (hd values), its value vc[p * rs + g
 * * vd ..] (vd values): GQA's caches have rs = nkv * hd = nkv * vd; latent
 * attention's one cache (kc = vc) has rows of rs values whose first vd are
 * the values. scores: [nh, sc_cap] floats (sc_cap a multiple of ATT_TILE,
 * at least the context), part: [nh, sc_cap / ATT_TILE, vd + 2]; a launch
 * takes as many tokens as fit. */
typedef struct coli__att_args {
    const float *q;
    const void *kc, *vc;
    int kv_bf16;
    int nh, nkv, hd, vd, rs, window, sc_cap;
    float scale; /* of the scores */
    float *scores, *part, *out;
    const int *step;
    coli__qout quant; /* out quantized too (p NULL: not) */
} coli__att_args;
coli_status coli__k_attention(cudaStream_t st, const coli__att_args *a, int max_S, int max_pos, coli__err *err);
/* Both steps in one launch for one token (decode): 1 when it applies. */
int coli__k_qkv_attention_fits(const coli__qkv_args *qa, int max_S, int max_pos);
coli_status coli__k_qkv_attention(cudaStream_t st, const coli__qkv_args *qa, const coli__att_args *a, coli__err *err);

/* mla.cu: latent attention's steps around the products and the attention
 * (docs/formats.md "Latent attention"), for tokens t < step[0]. */
typedef struct coli__mla_args {
    const float *ckv;     /* [S, kv_lora + rope]: kv_a_proj_with_mqa's rows */
    const float *kv_norm; /* kv_a_layernorm [kv_lora] */
    const float *q;       /* [S, nh, nope + rope]: the query */
    float *qc;            /* [S, nh, kv_lora + rope]: the absorbed query */
    void *cache;          /* this layer's cache [n_ctx, row] */
    int kv_bf16;
    int nh, kv_lora, rope, nope, v_dim, row, interleave;
    float eps;
    const float *rope_cs; /* [S, rope]: cos then sin of each token */
    prod kvb;             /* kv_b_proj whole [nh * (nope + v_dim), kv_lora] */
    const int *step;      /* S, pos0 */
} coli__mla_args;
/* The latent normed and the key turned into the cache row of each token's
 * position; each head's rotary query turned into qc's last rope values. */
coli_status coli__k_mla_rotate_store(cudaStream_t st, const coli__mla_args *a, int max_S, coli__err *err);
/* Each head's query absorbed into qc's first kv_lora values. */
coli_status coli__k_mla_absorb(cudaStream_t st, const coli__mla_args *a, int max_S, coli__err *err);

/* moe.cu */
/* The routed pairs of the router's logits rl [S, E]: sel, w [S, K] (the
 * router's softmax and top-k), grouped by ascending expert, then token:
 * row[pair], the token of each row (row_tok), and the product tables of
 * the resident experts (views: [E * 3] gate, up, down; a NULL qs/w marks
 * the host's): t1 [2 * slots] gate and up, t2 [slots] down, unused entries
 * empty. host: [S*K] 1 for the pairs the host computes. */
typedef struct coli__group_args {
    int *sel; /* written by the top-k, read by the grouping */
    float *w;
    const prod *views;
    int E, K, H, I;
    float *g, *u, *ye;
    int *row, *row_tok;
    unsigned char *host;
    prod *t1, *t2;
    int slots;
    const int *S;
    /* NULL, or (few tokens) where the host reads the routing: xn [S, H]
     * from xn_src, sel and the host flags, written to mapped memory */
    const float *xn_src;
    float *x_xn;
    int *x_sel;
    unsigned char *x_host;
} coli__group_args;
/* How the router chooses (lib/gpu/backend.h's coli__gpu_route, with the
 * bias as device memory). */
typedef struct coli__route_dev {
    int kind; /* 0 softmax, 1 sigmoid */
    int norm_topk;
    const float *bias;
    int n_group, topk_group;
    float scale;
} coli__route_dev;
#define COLI__ROUTE_MAX_GROUPS 64
#define COLI__ROUTE_FEW 8 /* tokens the router's one-block kernel takes (it also groups them) */
coli_status coli__k_route_group(cudaStream_t st, const float *rl, const coli__route_dev *r, const coli__group_args *a,
                                int max_S, coli__err *err);
/* x += sum over each token's experts, ascending, of fma(w, y, .) from +0
 * (plus the shared experts' row after it, when shared is not NULL); y from
 * ye[row[pair]], or yh[pair] for the host's pairs. With next_norm, xn =
 * rmsnorm(x) follows (quantized with q). */
coli_status coli__k_combine(cudaStream_t st, float *x, const float *ye, const float *yh, const int *row,
                            const unsigned char *host, const int *sel, const float *w, int K, int H, const int *S,
                            int max_S, const float *shared, const float *next_norm, float eps, float *xn,
                            const coli__qout *q, coli__err *err);

/* pipeline.cu: the pipe operations of the table (lib/gpu/backend.h). */
uint64_t coli__pipe_bytes(const coli__gpu_net *net, const coli__gpu_pipe_params *p);
coli_status coli__pipe_create(coli__gpu *g, const coli__gpu_net *net, const coli__gpu_pipe_params *p,
                              coli__gpu_pipe **out, coli__err *err);
void coli__pipe_free(coli__gpu_pipe *pipe);
coli_status coli__pipe_run(coli__gpu_pipe *pipe, const int32_t *tokens, int n, int pos0, const float *rope,
                           const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err);
void coli__pipe_stats(const coli__gpu_pipe *pipe, coli__gpu_pipe_stats *out);

#endif
