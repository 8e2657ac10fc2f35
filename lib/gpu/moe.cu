/* moe.cu - a MoE layer's routing on the device: the router's softmax and
 * top-k (docs/formats.md, "Router"), the routed pairs grouped by ascending
 * expert with the product tables of the experts resident here, and the
 * combination of the experts' outputs in ascending expert order with the
 * residual after it. */
#include "gpu/compat.h"

#include "gpu/kern.h"
#include "cpu/silu.h"

/* One 32-lane group per token: m = max, e_e = e(l_e - m), Z = sum32 (lane
 * l takes e = l mod 32 in increasing e), p_e = e_e / Z, then K times the
 * largest p not taken (the lowest e on ties), then the renormalisation. */
static __global__ void k_route(const float *rl, int E, int K, int norm_topk, const int *S, float *prob, int *sel,
                               float *w)
{
    const int lane = (int)(threadIdx.x % 32);
    const int t = (int)blockIdx.x * (int)(blockDim.x / 32) + (int)(threadIdx.x / 32);
    if (t >= *S)
        return;
    const float *l = rl + (size_t)t * E;
    float *p = prob + (size_t)t * E;
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32)
        m = l[e] > m ? l[e] : m;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float o = coli_shfl_xor(m, off, 32);
        m = o > m ? o : m;
    }
    float z = 0.0f;
    for (int e = lane; e < E; e += 32) {
        float v = coli__exp_f32(l[e] - m);
        p[e] = v;
        z = z + v;
    }
    z = coli__tree32(z);
    for (int e = lane; e < E; e += 32)
        p[e] = p[e] / z;
    coli_syncwarp();
    int *s = sel + (size_t)t * K;
    float *wt = w + (size_t)t * K;
    for (int j = 0; j < K; j++) {
        float bv = -1.0f;
        int bi = -1;
        for (int e = lane; e < E; e += 32)
            if (p[e] > bv) { /* strictly: the lane keeps its lowest e */
                bv = p[e];
                bi = e;
            }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            float ov = coli_shfl_xor(bv, off, 32);
            int oi = coli_shfl_xor(bi, off, 32);
            if (ov > bv || (ov == bv && oi >= 0 && (bi < 0 || oi < bi))) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            s[j] = bi;
            wt[j] = bv;
            p[bi] = -1.0f; /* taken: below every probability */
        }
        coli_syncwarp();
    }
    if (norm_topk && lane == 0) {
        float sum = 0.0f;
        for (int j = 0; j < K; j++)
            sum = sum + wt[j];
        for (int j = 0; j < K; j++)
            wt[j] = wt[j] / sum;
    }
}

coli_status coli__k_route(cudaStream_t st, const float *rl, int E, int K, int norm_topk, const int *S, int max_S,
                          int *sel, float *w, coli__err *err)
{
    /* the probabilities overwrite nothing the caller keeps: the logits
     * buffer is the router's own scratch */
    k_route<<<(max_S + 3) / 4, 128, 0, st>>>(rl, E, K, norm_topk, S, (float *)rl, sel, w);
    CK_LAUNCH("the router kernel");
    return COLI_OK;
}

/* One block: counts per expert, rows in ascending (expert, token) order,
 * and the tables of the used resident experts. */
static __global__ void k_group(coli__group_args a)
{
    extern __shared__ int sh[];
    int *cnt = sh, *off = sh + a.E;
    const int n = *a.S * a.K;
    for (int e = (int)threadIdx.x; e < a.E; e += (int)blockDim.x) {
        int c = 0;
        for (int q = 0; q < n; q++)
            c += a.sel[q] == e;
        cnt[e] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int at = 0, u = 0;
        for (int e = 0; e < a.E; e++) {
            off[e] = at;
            at += cnt[e];
            const prod *v = a.views + 3 * (size_t)e;
            if (cnt[e] == 0 || (!v[0].qs && !v[0].w))
                continue;
            prod g = v[0], up = v[1], dn = v[2];
            g.x0 = up.x0 = dn.x0 = off[e];
            g.n_tok = up.n_tok = dn.n_tok = cnt[e];
            g.live = up.live = dn.live = NULL;
            g.y = a.g + (size_t)off[e] * a.I;
            up.y = a.u + (size_t)off[e] * a.I;
            dn.y = a.ye + (size_t)off[e] * a.H;
            g.ys = up.ys = a.I;
            dn.ys = a.H;
            a.t1[2 * u] = g;
            a.t1[2 * u + 1] = up;
            a.t2[u] = dn;
            u++;
        }
        for (; u < a.slots; u++) {
            a.t1[2 * u].n_tok = a.t1[2 * u + 1].n_tok = a.t2[u].n_tok = 0;
        }
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < a.E; e += (int)blockDim.x) {
        if (cnt[e] == 0)
            continue;
        const prod *v = a.views + 3 * (size_t)e;
        unsigned char host = !v[0].qs && !v[0].w;
        int at = off[e];
        for (int q = 0; q < n; q++)
            if (a.sel[q] == e) {
                a.row[q] = at++;
                a.host[q] = host;
            }
    }
}

/* xe[row[pair]] = xn[pair / K]. */
static __global__ void k_gather(const float *xn, const int *row, int K, int H, const int *S, float *xe)
{
    const int q = (int)blockIdx.x;
    if (q >= *S * K)
        return;
    const float *src = xn + (size_t)(q / K) * H;
    float *dst = xe + (size_t)row[q] * H;
    for (int i = (int)threadIdx.x; i < H; i += (int)blockDim.x)
        dst[i] = src[i];
}

coli_status coli__k_group(cudaStream_t st, const coli__group_args *a, int max_S, coli__err *err)
{
    k_group<<<1, 256, (size_t)2 * (size_t)a->E * sizeof(int), st>>>(*a);
    CK_LAUNCH("the expert grouping kernel");
    k_gather<<<max_S * a->K, 256, 0, st>>>(a->xn, a->row, a->K, a->H, a->S, a->xe);
    CK_LAUNCH("the expert gather kernel");
    return COLI_OK;
}

/* One block per token: its pairs in ascending expert order, then
 * out_i = fma(w, y_i, out_i) from +0 and x_i = x_i + out_i. */
static __global__ void k_combine(float *x, const float *ye, const float *yh, const int *row, const unsigned char *host,
                                 const int *sel, const float *w, int K, int H, const int *S)
{
    const int t = (int)blockIdx.x;
    if (t >= *S)
        return;
    __shared__ int order[64];
    if (threadIdx.x == 0) {
        for (int j = 0; j < K; j++)
            order[j] = t * K + j;
        for (int j = 1; j < K; j++) /* insertion sort by expert */
            for (int i = j; i > 0 && sel[order[i - 1]] > sel[order[i]]; i--) {
                int tmp = order[i];
                order[i] = order[i - 1];
                order[i - 1] = tmp;
            }
    }
    __syncthreads();
    float *xr = x + (size_t)t * H;
    for (int i = (int)threadIdx.x; i < H; i += (int)blockDim.x) {
        float o = 0.0f;
        for (int j = 0; j < K; j++) {
            const int q = order[j];
            const float y = host[q] ? yh[(size_t)q * H + i] : ye[(size_t)row[q] * H + i];
            o = fmaf(w[q], y, o);
        }
        xr[i] = xr[i] + o;
    }
}

coli_status coli__k_combine(cudaStream_t st, float *x, const float *ye, const float *yh, const int *row,
                            const unsigned char *host, const int *sel, const float *w, int K, int H, const int *S,
                            int max_S, coli__err *err)
{
    if (K > 64)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: %d experts per token, at most 64", K);
    k_combine<<<max_S, 256, 0, st>>>(x, ye, yh, row, host, sel, w, K, H, S);
    CK_LAUNCH("the expert combination kernel");
    return COLI_OK;
}
