/* norm.cu - the elementwise and per-token steps of a decoder layer on the
 * device: embedding rows, RMSNorm (with the residual before it), and the
 * step between the q/k/v products and attention (q/k norm, clipping, RoPE
 * from the host's tables, the KV cache). docs/formats.md gives the order
 * of every operation; these follow it as the CPU does. */
#include "gpu/compat.h"

#include "gpu/kern.h"

/* ---- embedding ---------------------------------------------------------- */

template <int DT>
static __global__ void k_embed(const void *table, const int32_t *tokens, const int *S, int H, float *x)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int t = (int)blockIdx.x;
    if (t >= *S)
        return;
    const size_t row = (size_t)tokens[t] * (size_t)H;
    float *o = x + (size_t)t * H;
    for (int i = (int)threadIdx.x; i < H; i += (int)blockDim.x)
        o[i] = DT == COLI_DT_F32 ? ((const float *)table)[row + (size_t)i]
                                 : coli__bf16_bits_to_f32(((const uint16_t *)table)[row + (size_t)i]);
}

coli_status coli__k_embed(cudaStream_t st, const tensor *emb, const int32_t *tokens, const int *S, int max_S,
                          float *x, coli__err *err)
{
    if (emb->shape.dt == COLI_DT_F32)
        (void)coli_launch(coli__gpu_pdl(), k_embed<COLI_DT_F32>, max_S, 256, 0, st,
                          emb->mem, tokens, S, emb->shape.cols, x);
    else
        (void)coli_launch(coli__gpu_pdl(), k_embed<COLI_DT_BF16>, max_S, 256, 0, st,
                          emb->mem, tokens, S, emb->shape.cols, x);
    CK_LAUNCH("the embedding kernel");
    return COLI_OK;
}

/* ---- RMSNorm ------------------------------------------------------------- */

/* One block per row: every thread loads (and with o adds the residual
 * into x), so that the loads are all in flight; then coli__norm_row. */
static __global__ void k_norm(float *x, const float *o, const float *w, int H, float eps, const int *S, int last_only,
                              float *xn, coli__qout q)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    extern __shared__ float xs[];
    int t = (int)blockIdx.x;
    const int n = *S;
    if (last_only)
        t = n - 1;
    else if (t >= n)
        return; /* the whole block */
    float *xr = x + (size_t)t * H;
    const float *orow = o ? o + (size_t)t * H : NULL;
    for (int i = (int)threadIdx.x; i < H; i += (int)blockDim.x) {
        float v = xr[i];
        if (orow) {
            v = v + orow[i];
            xr[i] = v;
        }
        xs[i] = v;
    }
    const size_t row = (size_t)(last_only ? 0 : t);
    coli__norm_row(xs, H, w, eps, xn + row * H, &q, row);
}

coli_status coli__k_norm(cudaStream_t st, float *x, const float *o, const float *w, int H, float eps, const int *S,
                         int max_S, int last_only, float *xn, const coli__qout *q, coli__err *err)
{
    int rows = last_only ? 1 : max_S;
    coli__qout none = {NULL, NULL, NULL};
    (void)coli_launch(coli__gpu_pdl(), k_norm, rows, 1024, (size_t)H * sizeof(float), st, x, o, w, H, eps, S, last_only,
                      xn, q ? *q : none);
    CK_LAUNCH("the RMSNorm kernel");
    return COLI_OK;
}

static __global__ void k_residual(float *x, const float *o, int H, const int *S)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)*S * (size_t)H)
        x[i] = x[i] + o[i];
}

coli_status coli__k_residual(cudaStream_t st, float *x, const float *o, int H, const int *S, int max_S,
                             coli__err *err)
{
    size_t n = (size_t)max_S * (size_t)H;
    (void)coli_launch(coli__gpu_pdl(), k_residual, (unsigned)((n + 255) / 256), 256, 0, st, x, o, H, S);
    CK_LAUNCH("the residual kernel");
    return COLI_OK;
}

/* ---- q, k, v: norm, clip, RoPE, cache ----------------------------------- */

/* One block per token: its q, k and v staged in shared memory, so that
 * each step reads them there. */
static __global__ void k_qkv(coli__qkv_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int t = (int)blockIdx.x;
    if (t >= a.step[0])
        return;
    extern __shared__ float sm[];
    const int pos = a.step[1] + t;
    const int hd = a.hd, QD = a.nh * hd, KVD = a.nkv * hd;
    float *gq = a.q + (size_t)t * QD, *gk = a.k + (size_t)t * KVD, *gv = a.v + (size_t)t * KVD;
    float *q = sm, *k = sm + QD, *v = sm + QD + KVD;
    const int tid = (int)threadIdx.x, nthr = (int)blockDim.x;
    if (a.bq) { /* only then: x + 0 would turn -0 into +0 */
        for (int i = tid; i < QD; i += nthr)
            q[i] = gq[i] + a.bq[i];
        for (int i = tid; i < KVD; i += nthr) {
            k[i] = gk[i] + a.bk[i];
            v[i] = gv[i] + a.bv[i];
        }
    } else {
        for (int i = tid; i < QD; i += nthr)
            q[i] = gq[i];
        for (int i = tid; i < KVD; i += nthr) {
            k[i] = gk[i];
            v[i] = gv[i];
        }
    }
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32, warps = nthr / 32;
    if (a.qk_norm == 1) {
        for (int h = warp; h < a.nh + a.nkv; h += warps)
            coli__norm_in_place(h < a.nh ? q + (size_t)h * hd : k + (size_t)(h - a.nh) * hd,
                          h < a.nh ? a.q_norm : a.k_norm, hd, a.eps, lane);
    } else if (a.qk_norm == 2) {
        if (warp == 0)
            coli__norm_in_place(q, a.q_norm, QD, a.eps, lane);
        else if (warp == 1)
            coli__norm_in_place(k, a.k_norm, KVD, a.eps, lane);
    }
    __syncthreads();
    if (a.clip > 0.0f) {
        for (int i = tid; i < QD; i += nthr)
            q[i] = coli__clip1(q[i], a.clip);
        for (int i = tid; i < KVD; i += nthr) {
            k[i] = coli__clip1(k[i], a.clip);
            v[i] = coli__clip1(v[i], a.clip);
        }
        __syncthreads();
    }
    /* rotate-half: each thread one pair (i, i + half) of one head */
    const int half = a.rot / 2;
    const float *cs = a.rope + (size_t)t * a.rot;
    for (int it = tid; it < (a.nh + a.nkv) * half; it += nthr) {
        int h = it / half, i = it % half;
        coli__rotate_pair(h < a.nh ? q + (size_t)h * hd : k + (size_t)(h - a.nh) * hd, i, half, cs);
    }
    __syncthreads();
    for (int i = tid; i < QD; i += nthr)
        gq[i] = q[i];
    const size_t at = (size_t)pos * KVD;
    for (int i = tid; i < KVD; i += nthr)
        coli__store_kv(a, at + (size_t)i, k[i], v[i]);
}

/* The same step with one 32-lane group per head (q heads, then k heads
 * with their v), so that a token's heads run side by side; not for a
 * q/k norm over the whole projection. */
static __global__ void k_qkv_head(coli__qkv_args a)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int h = (int)blockIdx.x, t = (int)blockIdx.y, lane = (int)threadIdx.x;
    if (t >= a.step[0])
        return;
    extern __shared__ float sm[];
    const int hd = a.hd;
    float *hv = sm, *vv = sm + hd;
    coli__head_prep(a, h, t, lane, hv, vv);
    if (h < a.nh) {
        float *gq = a.q + (size_t)t * (size_t)(a.nh * hd) + (size_t)h * hd;
        for (int i = lane; i < hd; i += 32)
            gq[i] = hv[i];
        return;
    }
    const size_t at = (size_t)(a.step[1] + t) * (size_t)(a.nkv * hd) + (size_t)(h - a.nh) * hd;
    for (int i = lane; i < hd; i += 32)
        coli__store_kv(a, at + (size_t)i, hv[i], vv[i]);
}

coli_status coli__k_qkv(cudaStream_t st, const coli__qkv_args *a, int max_S, coli__err *err)
{
    if (a->qk_norm != 2) {
        const dim3 grid((unsigned)(a->nh + a->nkv), (unsigned)max_S);
        (void)coli_launch(coli__gpu_pdl(), k_qkv_head, grid, 32, (size_t)2 * a->hd * sizeof(float), st, *a);
        CK_LAUNCH("the q/k/v kernel");
        return COLI_OK;
    }
    size_t smem = (size_t)(a->nh + 2 * a->nkv) * (size_t)a->hd * sizeof(float);
    (void)coli_launch(coli__gpu_pdl(), k_qkv, max_S, 256, smem, st, *a);
    CK_LAUNCH("the q/k/v kernel");
    return COLI_OK;
}
