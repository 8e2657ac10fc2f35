/* moe.cu - a MoE layer's routing on the device: the router's softmax and
 * top-k, or the sigmoid router's groups and top-k (docs/formats.md), the routed pairs grouped by ascending
 * expert with the product tables of the experts resident here, and the
 * combination of the experts' outputs in ascending expert order with the
 * residual after it. */
#include "gpu/compat.h"

#include "gpu/kern.h"
#include "cpu/silu.h"

#define ROUTE_PER_LANE 16 /* experts a lane holds: at most 512 in all */

/* One 32-lane group per token, the probabilities in registers (lane l
 * holds e = l + 32 i): m = max, e_e = e(l_e - m), Z = sum32 (each lane's
 * own e in increasing order, then the tree), p_e = e_e / Z; -1 past E. */
template <int PL>
static __device__ __forceinline__ void route_softmax(const float *rl, int E, int t, int lane, float pv[PL])
{
    const float *l = rl + (size_t)t * E;
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < PL; i++) {
        const int e = lane + 32 * i;
        pv[i] = e < E ? l[e] : -INFINITY;
        m = pv[i] > m ? pv[i] : m;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float o = coli_shfl_xor(m, off, 32);
        m = o > m ? o : m;
    }
    float z = 0.0f;
#pragma unroll
    for (int i = 0; i < PL; i++)
        if (lane + 32 * i < E) {
            pv[i] = coli__exp_f32(pv[i] - m);
            z = z + pv[i];
        }
    z = coli__tree32(z);
#pragma unroll
    for (int i = 0; i < PL; i++)
        pv[i] = lane + 32 * i < E ? pv[i] / z : -1.0f;
}

/* The softmax, then K times the largest p not taken (the lowest e on
 * ties), then the renormalisation. */
template <int PL>
static __device__ void route_token(const float *rl, int E, int K, int norm_topk, int t, int lane, int *sel,
                                   float *w)
{
    float pv[PL]; /* PL = 4, 8 or 16: E / 32 rounded up, so dead entries cost nothing */
    route_softmax<PL>(rl, E, t, lane, pv);
    int *s = sel + (size_t)t * K;
    float *wt = w + (size_t)t * K;
    float sum = 0.0f;
    for (int j = 0; j < K; j++) {
        float bv = -1.0f;
        int bi = -1;
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (pv[i] > bv) { /* strictly: the lane keeps its lowest e */
                bv = pv[i];
                bi = lane + 32 * i;
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
        /* every lane now has the winner: its owner marks it taken */
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (lane + 32 * i == bi)
                pv[i] = -1.0f;
        if (lane == 0) {
            s[j] = bi;
            wt[j] = bv;
        }
        sum = sum + bv;
    }
    if (norm_topk && lane == 0)
        for (int j = 0; j < K; j++)
            wt[j] = wt[j] / sum;
}

/* The largest (v, i) of a 32-lane group: the larger v, the lower i among
 * equals; i < 0 marks a lane without a candidate. */
static __device__ __forceinline__ void warp_best(float &bv, int &bi)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float ov = coli_shfl_xor(bv, off, 32);
        int oi = coli_shfl_xor(bi, off, 32);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
            bv = ov;
            bi = oi;
        }
    }
}

/* The sigmoid router (docs/formats.md, "The sigmoid router") of token t by
 * one 32-lane group: lane l holds the scores s and biased scores c of
 * experts l + 32 i; lane g scores groups g and g + 32 (their two largest
 * c, recomputed: the same bits); topk_group rounds keep the best groups,
 * then K rounds take the largest c not taken, the lowest e among equals,
 * as the CPU's scans do. Lane 0 writes the token's sel and w [K]. */
template <int PL>
static __device__ void route_sigmoid_token(const float *rl, const coli__route_dev &r, int E, int K, int t, int lane,
                                           int *sel, float *w)
{
    const float *l = rl + (size_t)t * E;
    float sv[PL], cv[PL];
#pragma unroll
    for (int i = 0; i < PL; i++) {
        const int e = lane + 32 * i;
        sv[i] = e < E ? coli__sigmoid(l[e]) : 0.0f;
        cv[i] = e < E ? sv[i] + r.bias[e] : -INFINITY;
    }
    if (r.topk_group < r.n_group) {
        const int ng = r.n_group, per = E / ng;
        float gs[2];
        for (int k = 0; k < 2; k++) {
            const int g = lane + 32 * k;
            coli__top2 t = {-INFINITY, -INFINITY};
            for (int j = 0; g < ng && j < per; j++)
                coli__top2_add(&t, coli__sigmoid(l[g * per + j]) + r.bias[g * per + j]);
            gs[k] = coli__top2_score(&t, per);
        }
        unsigned long long kept = 0;
        for (int j = 0; j < r.topk_group; j++) {
            float bv = -INFINITY;
            int bi = -1;
            for (int k = 0; k < 2; k++) {
                const int g = lane + 32 * k;
                if (g < ng && !((kept >> g) & 1) && (bi < 0 || gs[k] > bv)) {
                    bv = gs[k];
                    bi = g;
                }
            }
            warp_best(bv, bi);
            kept |= 1ull << bi;
        }
#pragma unroll
        for (int i = 0; i < PL; i++) {
            const int e = lane + 32 * i;
            if (e < E && !((kept >> (e / per)) & 1))
                cv[i] = -INFINITY;
        }
    }
    unsigned taken = 0;
    float sum = 0.0f;
    for (int j = 0; j < K; j++) {
        float bv = -INFINITY;
        int bi = -1;
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (lane + 32 * i < E && !((taken >> i) & 1) && (bi < 0 || cv[i] > bv)) {
                bv = cv[i];
                bi = lane + 32 * i;
            }
        warp_best(bv, bi);
        float mine = 0.0f;
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (lane + 32 * i == bi) {
                mine = sv[i];
                taken |= 1u << i;
            }
        const float wv = coli_shfl(mine, bi & 31, 32);
        if (lane == 0) {
            sel[j] = bi;
            w[j] = wv;
            sum = sum + wv;
        }
    }
    if (lane == 0) {
        if (r.norm_topk) {
            const float d = sum + 1e-20f;
            for (int j = 0; j < K; j++)
                w[j] = w[j] / d;
        }
        for (int j = 0; j < K; j++)
            w[j] = w[j] * r.scale;
    }
}

template <int PL>
static __global__ void k_route(const float *rl, coli__route_dev r, int E, int K, const int *S, int *sel, float *w)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int lane = (int)(threadIdx.x % 32);
    const int t = (int)blockIdx.x * (int)(blockDim.x / 32) + (int)(threadIdx.x / 32);
    if (t >= *S)
        return;
    if (r.kind)
        route_sigmoid_token<PL>(rl, r, E, K, t, lane, sel + (size_t)t * K, w + (size_t)t * K);
    else
        route_token<PL>(rl, E, K, r.norm_topk, t, lane, sel, w);
}


/* The grouping, by one block, once cnt (pairs per expert) and slot (1:
 * resident here) are in shared memory: offsets and the resident experts'
 * table slots in ascending expert order (prefix sums by one warp), each
 * expert's table entries, then each pair's row within its expert's range.
 * The order of rows within an expert is free: every (row, token) of a
 * product is computed alone, to the same bits wherever it sits. The gate
 * and up products read each row's token in place (xrow). A pair without an
 * expert (sel < 0: a router with fewer candidates than K) takes no row. */
static __device__ void group_body(const coli__group_args &a, const int *sel, int n, int *sh)
{
    int *cnt = sh, *off = sh + a.E, *slot = sh + 2 * a.E, *fill = sh + 3 * a.E;
    __shared__ int n_used;
    if (threadIdx.x < 32) { /* prefix sums of the counts and the flags, 32 experts a step */
        const int lane = (int)threadIdx.x;
        int at = 0, u = 0;
        for (int base = 0; base < a.E; base += 32) {
            const int e = base + lane;
            const int c = e < a.E ? cnt[e] : 0, f = e < a.E && c > 0 && slot[e];
            int ic = c, iflag = f;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                int oc = coli_shfl_up(ic, d, 32), of = coli_shfl_up(iflag, d, 32);
                if (lane >= d) {
                    ic += oc;
                    iflag += of;
                }
            }
            if (e < a.E) {
                off[e] = at + ic - c;
                slot[e] = f ? u + iflag - 1 : -1;
            }
            at += coli_shfl(ic, 31, 32);
            u += coli_shfl(iflag, 31, 32);
        }
        if (lane == 0)
            n_used = u;
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < a.E; e += (int)blockDim.x) {
        const int u = slot[e];
        if (u < 0)
            continue;
        const prod *v = a.views + 3 * (size_t)e;
        prod g = v[0], up = v[1], dn = v[2];
        g.x0 = up.x0 = dn.x0 = off[e];
        g.n_tok = up.n_tok = dn.n_tok = cnt[e];
        g.live = up.live = dn.live = NULL;
        g.xrow = up.xrow = a.row_tok;
        dn.xrow = NULL;
        g.y = a.g + (size_t)off[e] * a.I;
        up.y = a.u + (size_t)off[e] * a.I;
        dn.y = a.ye + (size_t)off[e] * a.H;
        g.ys = up.ys = a.I;
        dn.ys = a.H;
        a.t1[2 * u] = g;
        a.t1[2 * u + 1] = up;
        a.t2[u] = dn;
    }
    for (int q = (int)threadIdx.x; q < n; q += (int)blockDim.x) {
        const int e = sel[q];
        if (e < 0) {
            a.row[q] = 0;
            a.host[q] = 0;
            if (a.x_host)
                a.x_host[q] = 0;
            continue;
        }
        const int at = off[e] + atomicAdd(&fill[e], 1);
        a.row_tok[at] = q / a.K;
        a.row[q] = at;
        a.host[q] = slot[e] < 0;
        if (a.x_host)
            a.x_host[q] = slot[e] < 0;
    }
    for (int u = n_used + (int)threadIdx.x; u < a.slots; u += (int)blockDim.x)
        a.t1[2 * u].n_tok = a.t1[2 * u + 1].n_tok = a.t2[u].n_tok = 0;
}

/* Which experts are resident (a static table: read before the wait),
 * with their counts and fills zeroed. */
static __device__ void group_start(const coli__group_args &a, int *sh)
{
    int *cnt = sh, *slot = sh + 2 * a.E, *fill = sh + 3 * a.E;
    for (int e = (int)threadIdx.x; e < a.E; e += (int)blockDim.x) {
        const prod *v = a.views + 3 * (size_t)e;
        slot[e] = v[0].qs || v[0].w;
        cnt[e] = fill[e] = 0;
    }
}

/* The pairs of each expert into cnt (shared atomics: a count is the same
 * in any order); a pair without an expert counts nowhere. */
static __device__ __forceinline__ void count_pairs(const int *sel, int n, int *cnt)
{
    for (int q = (int)threadIdx.x; q < n; q += (int)blockDim.x)
        if (sel[q] >= 0)
            atomicAdd(&cnt[sel[q]], 1);
}

/* One block: the counts, then the grouping. */
static __global__ void k_group(coli__group_args a)
{
    extern __shared__ int sh[];
    group_start(a, sh);
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int n = *a.S * a.K;
    __syncthreads();
    count_pairs(a.sel, n, sh);
    __syncthreads();
    group_body(a, a.sel, n, sh);
}

/* Few tokens (at most COLI__ROUTE_FEW): the softmax (a warp a token) into
 * shared memory, then the top-k by ranks, every (token, expert) at once:
 * the rank of p_e is the count of experts before it in the order of
 * selection (larger p, or equal p and lower e), so the expert of rank j
 * is the j-th that route_token's K rounds take, and the K rounds' answer
 * for a token with fewer than K candidates (-1) is what stays where no
 * rank lands. Then the sum in the order of selection, and the grouping,
 * in the same block, every intermediate in shared memory. */

/* The softmax's choice for the few tokens, into shared sel and ws. */
template <int PL>
static __device__ void softmax_few(const float *rl, int norm_topk, int E, int K, int S, float *ps, int *sel, float *ws)
{
    const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
    for (int t = warp; t < S; t += (int)(blockDim.x / 32)) {
        float pv[PL];
        route_softmax<PL>(rl, E, t, lane, pv);
#pragma unroll
        for (int i = 0; i < PL; i++)
            if (lane + 32 * i < E)
                ps[t * E + lane + 32 * i] = pv[i];
    }
    __syncthreads();
    for (int c = (int)threadIdx.x; c < S * E; c += (int)blockDim.x) {
        const int t = c / E, e = c - t * E;
        const float *p = ps + (size_t)t * E;
        const float v = p[e];
        if (!(v > -1.0f))
            continue; /* never taken */
        int r = 0;
        for (int b = 0; b < E; b++) {
            const float o = p[b];
            r += o > v || (o == v && b < e);
        }
        if (r < K) {
            sel[t * K + r] = e;
            ws[t * K + r] = v;
        }
    }
    __syncthreads();
    if (norm_topk)
        for (int t = (int)threadIdx.x; t < S; t += (int)blockDim.x) {
            float *wt = ws + (size_t)t * K, sum = 0.0f;
            for (int j = 0; j < K; j++)
                sum = sum + wt[j];
            for (int j = 0; j < K; j++)
                wt[j] = wt[j] / sum;
        }
}

template <int PL>
static __global__ void k_route_group(const float *rl, coli__route_dev r, coli__group_args a)
{
    extern __shared__ int sh[];
    const int E = a.E, K = a.K;
    float *ps = (float *)(void *)(sh + 4 * E);        /* [COLI__ROUTE_FEW][E] */
    int *sel = (int *)(void *)(ps + COLI__ROUTE_FEW * E);   /* [COLI__ROUTE_FEW][K] */
    float *ws = (float *)(void *)(sel + COLI__ROUTE_FEW * K); /* [COLI__ROUTE_FEW][K] */
    group_start(a, sh);
    for (int q = (int)threadIdx.x; q < COLI__ROUTE_FEW * K; q += (int)blockDim.x) {
        sel[q] = -1;
        ws[q] = -1.0f;
    }
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    const int S = *a.S;
    if (r.kind) { /* the sigmoid router: a warp a token, straight into shared memory */
        const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
        __syncthreads(); /* sel and ws start at -1 */
        for (int t = warp; t < S; t += (int)(blockDim.x / 32))
            route_sigmoid_token<PL>(rl, r, E, K, t, lane, sel + (size_t)t * K, ws + (size_t)t * K);
        __syncthreads();
    } else {
        softmax_few<PL>(rl, r.norm_topk, E, K, S, ps, sel, ws);
    }
    count_pairs(sel, S * K, sh);
    __syncthreads();
    for (int q = (int)threadIdx.x; q < S * K; q += (int)blockDim.x) {
        a.sel[q] = sel[q];
        a.w[q] = ws[q];
        if (a.x_sel)
            a.x_sel[q] = sel[q];
    }
    if (a.x_xn) /* the host's copy of the experts' input, without a copy of its own */
        for (int i = (int)threadIdx.x; i < S * a.H; i += (int)blockDim.x)
            a.x_xn[i] = a.xn_src[i];
    group_body(a, sel, S * K, sh);
}

coli_status coli__k_route_group(cudaStream_t st, const float *rl, const coli__route_dev *r, const coli__group_args *a,
                                int max_S, coli__err *err)
{
    if (a->E > 32 * ROUTE_PER_LANE)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: a router over %d experts, at most %d", a->E,
                          32 * ROUTE_PER_LANE);
    if (r->kind && (r->n_group < 1 || r->n_group > COLI__ROUTE_MAX_GROUPS || a->E % r->n_group || !r->bias))
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: a sigmoid router of %d experts in %d groups", a->E,
                          r->n_group);
    const size_t sh = (size_t)4 * (size_t)a->E * sizeof(int);
    const int pl = a->E <= 128 ? 4 : a->E <= 256 ? 8 : 16;
    if (a->x_xn && max_S > COLI__ROUTE_FEW)
        return coli__fail(err, COLI_EINVAL, "GPU tier: the routing of %d tokens written to the host", max_S);
    if (max_S <= COLI__ROUTE_FEW) {
        const size_t shf = sh + (size_t)COLI__ROUTE_FEW * ((size_t)a->E * sizeof(float) + (size_t)a->K * 8);
        if (pl == 4)
            (void)coli_launch(coli__gpu_pdl(), k_route_group<4>, 1, 256, shf, st, rl, *r, *a);
        else if (pl == 8)
            (void)coli_launch(coli__gpu_pdl(), k_route_group<8>, 1, 256, shf, st, rl, *r, *a);
        else
            (void)coli_launch(coli__gpu_pdl(), k_route_group<16>, 1, 256, shf, st, rl, *r, *a);
        CK_LAUNCH("the router kernel");
        return COLI_OK;
    }
    const unsigned nb = (unsigned)((max_S + 3) / 4);
    if (pl == 4)
        (void)coli_launch(coli__gpu_pdl(), k_route<4>, nb, 128, 0, st, rl, *r, a->E, a->K, a->S, a->sel,
                          a->w);
    else if (pl == 8)
        (void)coli_launch(coli__gpu_pdl(), k_route<8>, nb, 128, 0, st, rl, *r, a->E, a->K, a->S, a->sel,
                          a->w);
    else
        (void)coli_launch(coli__gpu_pdl(), k_route<16>, nb, 128, 0, st, rl, *r, a->E, a->K, a->S, a->sel,
                          a->w);
    CK_LAUNCH("the router kernel");
    (void)coli_launch(coli__gpu_pdl(), k_group, 1, 1024, sh, st, *a);
    CK_LAUNCH("the expert grouping kernel");
    return COLI_OK;
}

/* One block per token: its pairs in ascending expert order (their weights
 * and rows staged in shared memory), then out_i = fma(w, y_i, out_i) from
 * +0 and x_i = x_i + out_i; each thread's loads of a batch of experts are
 * issued before their products. With nw, the next layer's norm of the
 * new row follows (coli__norm_row), quantized with q. */
static __global__ void k_combine(float *x, const float *ye, const float *yh, const int *row, const unsigned char *host,
                                 const int *sel, const float *w, int K, int H, const int *S, const float *shared,
                                 const float *nw, float eps, float *xn, coli__qout q)
{
    coli_pdl_wait(); /* everything below reads the step */
    coli_pdl_release();
    extern __shared__ float xs[];
    const int t = (int)blockIdx.x;
    if (t >= *S)
        return;
    __shared__ int key[64];
    __shared__ float ws[64];
    __shared__ const float *src[64];
    const int j = (int)threadIdx.x;
    if (j < K)
        key[j] = sel[t * K + j];
    __syncthreads();
    if (j < K) { /* ascending expert (ties by position): a stable sort */
        const int kj = key[j];
        int rank = 0;
        for (int i = 0; i < K; i++)
            rank += key[i] < kj || (key[i] == kj && i < j);
        const int qq = t * K + j;
        ws[rank] = w[qq];
        src[rank] = host[qq] ? yh + (size_t)qq * H : ye + (size_t)row[qq] * H;
    }
    __syncthreads();
    float *xr = x + (size_t)t * H;
    for (int i = (int)threadIdx.x; i < H; i += (int)blockDim.x) {
        float o = 0.0f;
        for (int j0 = 0; j0 < K; j0 += 8) {
            float y[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                y[j] = j0 + j < K ? src[j0 + j][i] : 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j0 + j < K)
                    o = fmaf(ws[j0 + j], y[j], o);
        }
        if (shared)
            o = o + shared[(size_t)t * H + i];
        float v = xr[i] + o;
        xr[i] = v;
        if (nw)
            xs[i] = v;
    }
    if (nw)
        coli__norm_row(xs, H, nw, eps, xn + (size_t)t * H, &q, (size_t)t);
}

coli_status coli__k_combine(cudaStream_t st, float *x, const float *ye, const float *yh, const int *row,
                            const unsigned char *host, const int *sel, const float *w, int K, int H, const int *S,
                            int max_S, const float *shared, const float *next_norm, float eps, float *xn,
                            const coli__qout *q, coli__err *err)
{
    if (K > 64)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: %d experts per token, at most 64", K);
    coli__qout none = {NULL, NULL, NULL};
    (void)coli_launch(coli__gpu_pdl(), k_combine, max_S, 1024, next_norm ? (size_t)H * sizeof(float) : 0, st, x, ye, yh,
                      row, host, sel, w, K, H, S, shared, next_norm, eps, xn, q ? *q : none);
    CK_LAUNCH("the expert combination kernel");
    return COLI_OK;
}
