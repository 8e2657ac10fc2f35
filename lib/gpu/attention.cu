/* attention.cu - causal softmax attention over the KV cache, in the order
 * docs/formats.md writes ("Attention"): positions in tiles of 256, the
 * scores and each tile's maximum, then e() of the differences and each
 * tile's sum32, then each tile's eight-partial weighted sum of values,
 * then the tiles added in increasing order. Four launches, each a grid of
 * (tile, head, token) blocks, so that a long context spreads over the
 * whole device while every value keeps the CPU's bits.
 *
 * part holds, per (token, head, tile): [0] the tile's maximum, [1] its
 * sum, [2 ..] its weighted sum of values (hd floats). */
#include "gpu/compat.h"

#include "gpu/kern.h"
#include "cpu/silu.h"

typedef struct att_dims {
    int t_base;  /* first token of this launch within the step */
    int stride;  /* positions per score row (a multiple of ATT_TILE) */
    int tiles;   /* stride / ATT_TILE */
} att_dims;

/* The window of token t: j = p - lo for p = lo .. pos. */
static __device__ __forceinline__ void span(const coli__att_args &a, int t, int *lo, int *n)
{
    const int pos = a.step[1] + t;
    int l = 0;
    if (a.window > 0 && pos - a.window + 1 > 0)
        l = pos - a.window + 1;
    *lo = l;
    *n = pos - l + 1;
}

static __device__ __forceinline__ float kv_at(const void *c, int bf16, size_t i)
{
    return bf16 ? coli__bf16_bits_to_f32(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

static __device__ __forceinline__ float *part_of(const coli__att_args &a, const att_dims &d, int tl, int h, int tile)
{
    return a.part + (((size_t)tl * a.nh + (size_t)h) * (size_t)d.tiles + (size_t)tile) * (size_t)(a.vd + 2);
}

/* 1. a_j = dot(q, k_p) * scale, and the tile's maximum. One warp per
 * position; 8 warps. */
static __global__ void k_att_scores(coli__att_args a, att_dims d)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int tile = (int)blockIdx.x, h = (int)blockIdx.y, tl = (int)blockIdx.z, t = d.t_base + tl;
    if (t >= a.step[0])
        return;
    int lo, n;
    span(a, t, &lo, &n);
    const int j0 = tile * ATT_TILE;
    if (j0 >= n)
        return;
    const int j1 = n - j0 < ATT_TILE ? n : j0 + ATT_TILE;
    const int hd = a.hd, kvh = h / (a.nh / a.nkv);
    extern __shared__ float smem[];
    float *qs = smem;               /* hd */
    float *mx = smem + hd;          /* 8 */
    const float *q = a.q + (size_t)t * (size_t)(a.nh * hd) + (size_t)h * hd;
    for (int i = (int)threadIdx.x; i < hd; i += (int)blockDim.x)
        qs[i] = q[i];
    __syncthreads();
    const float scale = a.scale;
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    float *sc = a.scores + ((size_t)tl * a.nh + (size_t)h) * (size_t)d.stride;
    float m = -INFINITY;
    for (int j = j0 + warp; j < j1; j += 8) {
        const size_t kb = (size_t)(lo + j) * (size_t)a.rs + (size_t)kvh * hd;
        float p = 0.0f;
        for (int i = lane; i < hd; i += 32)
            p = fmaf(qs[i], kv_at(a.kc, a.kv_bf16, kb + (size_t)i), p);
        float s = coli__tree32(p) * scale;
        if (lane == 0)
            sc[j] = s;
        m = s > m ? s : m;
    }
    if (lane == 0)
        mx[warp] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = mx[0];
        for (int w = 1; w < 8; w++)
            b = mx[w] > b ? mx[w] : b;
        part_of(a, d, tl, h, tile)[0] = b;
    }
}

/* 2.-4. e_j = e(a_j - m) with m the maximum over every tile, and the
 * tile's sum32: lane k of the first warp adds the e_j with j = k mod 32
 * in increasing j. One thread per position. */
static __global__ void k_att_exp(coli__att_args a, att_dims d)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int tile = (int)blockIdx.x, h = (int)blockIdx.y, tl = (int)blockIdx.z, t = d.t_base + tl;
    if (t >= a.step[0])
        return;
    int lo, n;
    span(a, t, &lo, &n);
    const int j0 = tile * ATT_TILE;
    if (j0 >= n)
        return;
    const int nt = (n + ATT_TILE - 1) / ATT_TILE;
    __shared__ float e[ATT_TILE];
    float m = part_of(a, d, tl, h, 0)[0];
    for (int k = 1; k < nt; k++) {
        float b = part_of(a, d, tl, h, k)[0];
        m = b > m ? b : m;
    }
    float *sc = a.scores + ((size_t)tl * a.nh + (size_t)h) * (size_t)d.stride;
    const int j = j0 + (int)threadIdx.x;
    float v = 0.0f;
    if (j < n) {
        v = coli__exp_f32(sc[j] - m);
        sc[j] = v;
    }
    e[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        const int lane = (int)threadIdx.x;
        float p = 0.0f;
        for (int r = 0; r < ATT_TILE / 32; r++)
            if (j0 + lane + 32 * r < n)
                p = p + e[lane + 32 * r];
        p = coli__tree32(p);
        if (lane == 0)
            part_of(a, d, tl, h, tile)[1] = p;
    }
}

/* 5.-6. Z from the tiles' sums in increasing order, w_j = e_j * (1 / Z),
 * and the tile's weighted sum of values: thread (i, k) takes the
 * positions j = k mod 8 of the tile, in increasing j. */
static __global__ void k_att_mix(coli__att_args a, att_dims d)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int tile = (int)blockIdx.x, h = (int)blockIdx.y, tl = (int)blockIdx.z, t = d.t_base + tl;
    if (t >= a.step[0])
        return;
    int lo, n;
    span(a, t, &lo, &n);
    const int j0 = tile * ATT_TILE;
    if (j0 >= n)
        return;
    const int nt = (n + ATT_TILE - 1) / ATT_TILE;
    const int j1 = n - j0 < ATT_TILE ? n : j0 + ATT_TILE;
    const int vd = a.vd, kvh = h / (a.nh / a.nkv);
    extern __shared__ float smem[];
    float *w = smem;            /* ATT_TILE */
    float *O = smem + ATT_TILE; /* [8][vd] */
    float Z = part_of(a, d, tl, h, 0)[1];
    for (int k = 1; k < nt; k++)
        Z = Z + part_of(a, d, tl, h, k)[1];
    const float inv = 1.0f / Z;
    const float *sc = a.scores + ((size_t)tl * a.nh + (size_t)h) * (size_t)d.stride;
    for (int j = j0 + (int)threadIdx.x; j < j1; j += (int)blockDim.x)
        w[j - j0] = sc[j] * inv;
    __syncthreads();
    for (int it = (int)threadIdx.x; it < 8 * vd; it += (int)blockDim.x) {
        const int i = it % vd, k = it / vd;
        float o = 0.0f;
        for (int j = j0 + k; j < j1; j += 8)
            o = fmaf(w[j - j0], kv_at(a.vc, a.kv_bf16, (size_t)(lo + j) * (size_t)a.rs + (size_t)kvh * vd + (size_t)i),
                     o);
        O[k * vd + i] = o;
    }
    __syncthreads();
    float *out = part_of(a, d, tl, h, tile) + 2;
    for (int i = (int)threadIdx.x; i < vd; i += (int)blockDim.x) {
        const float *c = O + i;
        float a04 = c[0] + c[4 * vd], a26 = c[2 * vd] + c[6 * vd];
        float a15 = c[vd] + c[5 * vd], a37 = c[3 * vd] + c[7 * vd];
        out[i] = (a04 + a26) + (a15 + a37);
    }
}

/* With a.quant: the head's output (thread i < hd holds o_i) quantized for the
 * output projection, its groups being the head's (hd is a multiple of 32
 * whenever that projection is quantized). buf: hd floats of shared memory.
 * Every thread of the block calls it. */
static __device__ void quantize_head(const coli__att_args &a, int t, int h, float o, float *buf)
{
    if (!a.quant.p || a.vd % QK)
        return;
    __syncthreads();
    if ((int)threadIdx.x < a.vd)
        buf[threadIdx.x] = o;
    __syncthreads();
    const int lane = (int)(threadIdx.x % 32), warps = (int)(blockDim.x / 32);
    const size_t g0 = ((size_t)t * (size_t)(a.nh * a.vd) + (size_t)h * a.vd) / QK;
    for (int gi = (int)(threadIdx.x / 32); gi < a.vd / QK; gi += warps)
        coli__quant32(buf[gi * QK + lane], lane, g0 + (size_t)gi, a.quant.p, a.quant.s, a.quant.psum);
}

/* The tiles' sums added in increasing order. */
static __global__ void k_att_out(coli__att_args a, att_dims d)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int h = (int)blockIdx.x, tl = (int)blockIdx.y, t = d.t_base + tl;
    if (t >= a.step[0])
        return;
    int lo, n;
    span(a, t, &lo, &n);
    const int nt = (n + ATT_TILE - 1) / ATT_TILE;
    float *o = a.out + (size_t)t * (size_t)(a.nh * a.vd) + (size_t)h * a.vd;
    __shared__ float buf[256];
    float mine = 0.0f;
    for (int i = (int)threadIdx.x; i < a.vd; i += (int)blockDim.x) {
        float v = part_of(a, d, tl, h, 0)[2 + i];
        for (int k = 1; k < nt; k++)
            v = v + part_of(a, d, tl, h, k)[2 + i];
        o[i] = v;
        mine = v;
    }
    quantize_head(a, t, h, mine, buf);
}

#define FUSED_TILES 8 /* up to this many tiles, one block does a (head, token) whole */

/* The four steps above in one block of 256 threads for a (head, token)
 * of at most FUSED_TILES tiles: the same operations in the same order,
 * the scores in shared memory (smem: hd + FUSED_TILES * ATT_TILE + 8 hd
 * floats; with CUR, the token's q already there). With CUR the token's
 * own key and value (position lo + n - 1) come from kcur and vcur, as
 * the cache holds them, instead of from the cache. */
template <bool CUR>
static __device__ void att_fused_body(const coli__att_args &a, int h, int t, const float *kcur, const float *vcur,
                                      float *smem)
{
    int lo, n;
    span(a, t, &lo, &n);
    const int hd = a.hd, KVD = a.rs, kvh = h / (a.nh / a.nkv); /* hd == vd (fused_fits) */
    const int nt = (n + ATT_TILE - 1) / ATT_TILE;
    float *qs = smem;                        /* hd */
    float *sc = qs + hd;                     /* FUSED_TILES * ATT_TILE */
    float *O = sc + FUSED_TILES * ATT_TILE;  /* 8 * hd */
    __shared__ float red[8], Zt[FUSED_TILES];
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (!CUR) {
        const float *q = a.q + (size_t)t * (size_t)(a.nh * hd) + (size_t)h * hd;
        for (int i = tid; i < hd; i += 256)
            qs[i] = q[i];
    }
    __syncthreads();
    const float scale = a.scale;
    float m = -INFINITY;
    /* a warp takes positions warp, warp + 8, ... as before, four at a time
     * so that their keys' loads are in flight together */
    const size_t kb = (size_t)kvh * hd;
    for (int j = warp; j < n; j += 32) {
        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = lane; i < hd; i += 32) {
            const float qv = qs[i];
            float kv[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int jj = j + 8 * u < n ? j + 8 * u : j;
                kv[u] = CUR && jj == n - 1 ? kcur[i]
                                           : kv_at(a.kc, a.kv_bf16, (size_t)(lo + jj) * (size_t)KVD + kb + (size_t)i);
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
                p[u] = fmaf(qv, kv[u], p[u]);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const float sv = coli__tree32(p[u]) * scale;
            if (j + 8 * u < n) { /* the same for the whole warp */
                if (lane == 0)
                    sc[j + 8 * u] = sv;
                m = sv > m ? sv : m;
            }
        }
    }
    if (lane == 0)
        red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < 8; w++)
        m = red[w] > m ? red[w] : m;
    for (int j = tid; j < n; j += 256)
        sc[j] = coli__exp_f32(sc[j] - m);
    __syncthreads();
    if (warp < nt) { /* warp k: tile k's sum32 */
        const int j0 = warp * ATT_TILE;
        float p = 0.0f;
        for (int r = 0; r < ATT_TILE / 32; r++)
            if (j0 + lane + 32 * r < n)
                p = p + sc[j0 + lane + 32 * r];
        p = coli__tree32(p);
        if (lane == 0)
            Zt[warp] = p;
    }
    __syncthreads();
    float Z = Zt[0];
    for (int k = 1; k < nt; k++)
        Z = Z + Zt[k];
    const float inv = 1.0f / Z;
    for (int j = tid; j < n; j += 256)
        sc[j] = sc[j] * inv;
    float o = 0.0f; /* thread i < hd: the sum of the tiles so far */
    for (int tile = 0; tile < nt; tile++) {
        const int j0 = tile * ATT_TILE, j1 = n - j0 < ATT_TILE ? n : j0 + ATT_TILE;
        __syncthreads();
        for (int it = tid; it < 8 * hd; it += 256) {
            const int i = it % hd, k = it / hd;
            const size_t vb = (size_t)kvh * hd + (size_t)i;
            float acc = 0.0f;
            int j = j0 + k;
            for (; j + 24 < j1; j += 32) { /* four values' loads, then the chain */
                float v[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    v[u] = CUR && j + 8 * u == n - 1 ? vcur[i]
                                                     : kv_at(a.vc, a.kv_bf16, (size_t)(lo + j + 8 * u) * (size_t)KVD + vb);
#pragma unroll
                for (int u = 0; u < 4; u++)
                    acc = fmaf(sc[j + 8 * u], v[u], acc);
            }
            for (; j < j1; j += 8)
                acc = fmaf(sc[j], CUR && j == n - 1 ? vcur[i] : kv_at(a.vc, a.kv_bf16, (size_t)(lo + j) * (size_t)KVD + vb),
                           acc);
            O[k * hd + i] = acc;
        }
        __syncthreads();
        for (int i = tid; i < hd; i += 256) {
            const float *c = O + i;
            float a04 = c[0] + c[4 * hd], a26 = c[2 * hd] + c[6 * hd];
            float a15 = c[hd] + c[5 * hd], a37 = c[3 * hd] + c[7 * hd];
            float U = (a04 + a26) + (a15 + a37);
            o = tile == 0 ? U : o + U;
        }
    }
    float *out = a.out + (size_t)t * (size_t)(a.nh * hd) + (size_t)h * hd;
    for (int i = tid; i < hd; i += 256)
        out[i] = o;
    quantize_head(a, t, h, tid < hd ? o : 0.0f, O);
}

static __global__ void __launch_bounds__(256) k_att_fused(coli__att_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int h = (int)blockIdx.x, t = (int)blockIdx.y;
    if (t >= a.step[0])
        return;
    extern __shared__ float smem[];
    att_fused_body<false>(a, h, t, NULL, NULL, smem);
}

/* Decode (one token): the q/k/v step (coli__head_prep) of q head h by
 * warp 0 and of its k/v head by warp 1, then k_att_fused with the token's
 * key and value from shared memory, rounded as the cache stores them. The
 * first q head of each k/v head stores them in the cache; no block of
 * this launch reads that position there. */
static __global__ void __launch_bounds__(256) k_qkv_att(coli__qkv_args qa, coli__att_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int h = (int)blockIdx.x, grp = a.nh / a.nkv, hd = a.hd;
    if (a.step[0] < 1)
        return;
    extern __shared__ float smem[];
    float *kcur = smem + hd + FUSED_TILES * ATT_TILE + 8 * hd, *vcur = kcur + hd;
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    if (warp == 0) {
        coli__head_prep(qa, h, 0, lane, smem, vcur); /* vcur unused for a q head */
    } else if (warp == 1) {
        float *kk = kcur + 2 * hd, *vv = kk + hd; /* the step's values, then as cached */
        coli__head_prep(qa, qa.nh + h / grp, 0, lane, kk, vv);
        const size_t at = (size_t)a.step[1] * (size_t)(a.nkv * hd) + (size_t)(h / grp) * hd;
        for (int i = lane; i < hd; i += 32) {
            const float k = kk[i], v = vv[i];
            kcur[i] = coli__kv_rounded(a.kv_bf16, k);
            vcur[i] = coli__kv_rounded(a.kv_bf16, v);
            if (h % grp == 0)
                coli__store_kv(qa, at + (size_t)i, k, v);
        }
    }
    att_fused_body<true>(a, h, 0, kcur, vcur, smem); /* begins with a barrier */
}

/* Whether one block can do a (head, token) whole (k_att_fused): a
 * thread per output value, keys as wide as values. */
static int fused_fits(int max_pos, int hd, int vd)
{
    return max_pos + 1 <= FUSED_TILES * ATT_TILE && hd <= 256 && vd == hd;
}

/* One token's q/k/v step and attention in one launch, where it fits. */
int coli__k_qkv_attention_fits(const coli__qkv_args *qa, int max_S, int max_pos)
{
    return max_S == 1 && qa->qk_norm != 2 && fused_fits(max_pos, qa->hd, qa->hd);
}

coli_status coli__k_qkv_attention(cudaStream_t st, const coli__qkv_args *qa, const coli__att_args *a, coli__err *err)
{
    const size_t smem = (size_t)(a->hd + FUSED_TILES * ATT_TILE + 8 * a->hd + 4 * a->hd) * sizeof(float);
    (void)coli_launch(coli__gpu_pdl(), k_qkv_att, dim3((unsigned)a->nh), 256, smem, st, *qa, *a);
    CK_LAUNCH("the q/k/v and attention kernel");
    return COLI_OK;
}

coli_status coli__k_attention(cudaStream_t st, const coli__att_args *a, int max_S, int max_pos, coli__err *err)
{
    if (fused_fits(max_pos, a->hd, a->vd)) {
        size_t smem = (size_t)(a->hd + FUSED_TILES * ATT_TILE + 8 * a->hd) * sizeof(float);
        (void)coli_launch(coli__gpu_pdl(), k_att_fused, dim3((unsigned)a->nh, (unsigned)max_S), 256, smem, st, *a);
        CK_LAUNCH("the attention kernel");
        return COLI_OK;
    }
    /* the launch covers tokens whose positions reach max_pos at most; the
     * score rows hold that many positions, so a launch takes as many
     * tokens as the buffers were sized for (cap_tokens) */
    att_dims d;
    d.tiles = (max_pos + 1 + ATT_TILE - 1) / ATT_TILE;
    d.stride = d.tiles * ATT_TILE;
    if (d.stride > a->sc_cap)
        return coli__fail(err, COLI_EINVAL, "GPU tier: attention over %d positions, room for %d", max_pos + 1,
                          a->sc_cap);
    const int step_tok = a->sc_cap / d.stride;
    const size_t smem_mix = (size_t)(ATT_TILE + 8 * a->vd) * sizeof(float);
    const size_t smem_sc = (size_t)(a->hd + 8) * sizeof(float);
    for (int t0 = 0; t0 < max_S; t0 += step_tok) {
        int nt = max_S - t0 < step_tok ? max_S - t0 : step_tok;
        d.t_base = t0;
        dim3 grid((unsigned)d.tiles, (unsigned)a->nh, (unsigned)nt);
        /* token tl of this launch uses score row tl: rows are per launch */
        (void)coli_launch(coli__gpu_pdl(), k_att_scores, grid, 256, smem_sc, st, *a, d);
        CK_LAUNCH("the attention score kernel");
        (void)coli_launch(coli__gpu_pdl(), k_att_exp, grid, ATT_TILE, 0, st, *a, d);
        CK_LAUNCH("the attention softmax kernel");
        (void)coli_launch(coli__gpu_pdl(), k_att_mix, grid, 256, smem_mix, st, *a, d);
        CK_LAUNCH("the attention value kernel");
        (void)coli_launch(coli__gpu_pdl(), k_att_out, dim3((unsigned)a->nh, (unsigned)nt), 256, 0, st, *a, d);
        CK_LAUNCH("the attention output kernel");
    }
    return COLI_OK;
}
