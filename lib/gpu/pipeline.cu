/* pipeline.cu - a whole decoder step on one device: the embedding, every
 * layer (norms, the q/k/v products, RoPE, the KV cache, attention, the
 * output projection, the router and the routed experts, or a dense MLP),
 * the final norm and the logits. Only token ids and RoPE tables go in and
 * only logits come out; experts the device does not hold are computed by
 * the host while the device works on its own (coli__gpu_host), the
 * normalised hidden state crossing the bus once each way for such a layer.
 *
 * A decode step is captured once as graphs and replayed: its kernels read
 * the token count and position from a device buffer the step copies in, so
 * the graphs serve every position of an attention tile count (they are
 * captured again when that grows). A step whose every layer is resident is
 * one graph; one with experts on the host is cut where the host takes
 * over, so that each layer costs two graph launches and not a launch per
 * kernel, the host's share of the step.
 *
 * Every kernel keeps docs/formats.md's order: the logits have the CPU's
 * bits whatever runs where. */
#include "gpu/compat.h"

#include <stdio.h>

#include "gpu/kern.h"

/* Products of one launch: n entries of one format from index first of the
 * pipe's table, rows at most. */
typedef struct launch {
    int dt, first, n, rows, cols; /* cols: of every product of the launch */
} launch;

typedef struct pl_layer {
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm;
    const float *bq, *bk, *bv; /* NULL: no biases */
    int qk_norm, window, moe;
    coli__route_dev route;
    float clip;
    launch qkv[3];
    int n_qkv, qkv_quant; /* launches; 1 when one reads quantized xn */
    launch wo, router, mlp_gu, mlp_down; /* mlp_*: the dense MLP, or a MoE layer's shared experts */
    int shared;   /* a MoE layer with shared experts */
    prod *views;  /* device [E * 3]: the experts' products (empty: the host's) */
    int dt1, dt2; /* formats of the resident experts' gate/up and down */
    int n_host;   /* experts of the layer the host computes */
    void *kc, *vc;
} pl_layer;

struct coli__gpu_pipe {
    coli__gpu *g;
    int dev;
    device *dv;
    coli__gpu_net net; /* layers: not kept (pipe->L holds what is needed) */
    coli__gpu_pipe_params p;
    int H, QD, KVD, E, K, I, inter, C, CK, slots, rot, kv_bf16, sc_cap;
    pl_layer *L;
    tensor *embed;
    const float *final_norm;
    launch lm;     /* the last token's row of xn */
    launch lm_all; /* every row of xn, up to COLI__GPU_ALL_ROWS */
    float *out_hidden; /* the run's destination of the states after the final norm, or NULL */
    /* device memory: one allocation for the KV cache, one for the rest */
    void *kv_mem, *mem;
    uint64_t kv_bytes, mem_bytes;
    prod *tab, *t1, *t2; /* static tables, then the experts' (rewritten each MoE layer) */
    int *step;           /* S, pos0, then tokens [C], then rope [C * rot] */
    int32_t *tokens;
    float *rope;
    float *x, *xn, *o, *q, *k, *v, *att, *rl, *w, *ye, *yh, *gg, *uu, *hh, *scores, *part, *logits;
    int *sel, *row, *row_tok;
    unsigned char *host;
    int8_t *qp;
    float *qs_;
    int32_t *qps;
    /* pinned host memory: the step's input (same layout as step), the
     * logits, and the host experts' exchange */
    void *pin;
    int *h_step;
    float *h_logits, *h_xn, *h_yh;
    int *h_sel;
    unsigned char *h_host;
    /* the same, as kernels address them (mapped: a decode step's exchange
     * with the host takes no copy); d_xn NULL: not mapped */
    float *d_xn, *d_yh;
    int *d_sel;
    unsigned char *d_host;
    size_t in_bytes;
    cudaStream_t stream; /* its own: contexts run at once, and a capture sees only its step */
    cudaEvent_t ev_route, ev0, ev1;
    cudaEvent_t ph_ev[1 + 16 * 64]; /* phase timing: an event at each boundary */
    int ph_id[1 + 16 * 64], ph_n, ph_cap;
    /* the decode step's graphs, in order; after segment i, flags[i] says
     * what the host does (SEG_*) for layer seg_layer[i] */
    cudaGraphExec_t *seg;
    unsigned char *seg_flags;
    int *seg_layer;
    int n_seg, cap_seg;
    int rec;       /* capturing: a host point cuts the capture instead of running the host */
    int capturing; /* the stream is in a capture */
    int graph_tiles; /* attention tiles the graphs were captured for; 0: none */
    int any_host;
    int pdl; /* launches overlap their predecessor's end (coli__gpu_pdl_set) */
    coli__gpu_pipe_stats st;
};

/* ---- sizes ---------------------------------------------------------------- */

typedef struct sizes {
    size_t kv, scratch;
} sizes;

static int chunk_of(const coli__gpu_pipe_params *p)
{
    return p->chunk > 0 ? p->chunk : 512;
}

static int sc_cap_of(const coli__gpu_net *n, const coli__gpu_pipe_params *p)
{
    /* score rows: the whole context for one token, or a prefill chunk's
     * worth of positions, whichever is larger */
    size_t ctx = ((size_t)p->n_ctx + ATT_TILE - 1) / ATT_TILE * ATT_TILE;
    size_t pre = (size_t)chunk_of(p) * 512;
    (void)n;
    return (int)(ctx > pre ? ctx : pre);
}

/* The scratch layout, in order; returns its bytes. With base, also sets
 * the pipe's pointers. */
static size_t layout(coli__gpu_pipe *pp, const coli__gpu_net *n, const coli__gpu_pipe_params *p, int n_tab,
                     char *base)
{
    const size_t C = (size_t)chunk_of(p), H = (size_t)n->hidden, QD = (size_t)n->n_heads * n->head_dim;
    const size_t KVD = (size_t)n->n_kv_heads * n->head_dim;
    const size_t K = n->top_k > 0 ? (size_t)n->top_k : 1, E = n->n_experts > 0 ? (size_t)n->n_experts : 1;
    const size_t CK = C * K, I = (size_t)(n->moe_inter > 0 ? n->moe_inter : 1);
    size_t GI = CK * I > C * (size_t)n->inter ? CK * I : C * (size_t)n->inter;
    GI = GI > C * (size_t)n->shared_inter ? GI : C * (size_t)n->shared_inter;
    size_t qmax = C * H;
    qmax = C * QD > qmax ? C * QD : qmax;
    qmax = CK * H > qmax ? CK * H : qmax;
    qmax = GI > qmax ? GI : qmax;
    const size_t slots = E < CK ? E : CK;
    const size_t sc = (size_t)sc_cap_of(n, p);
    size_t off = 0;
#define TAKE(ptr, type, count)                                            \
    do {                                                                  \
        if (base)                                                         \
            pp->ptr = (type *)(void *)(base + off);                       \
        off += coli__align256((size_t)(count) * sizeof(type));            \
    } while (0)
    TAKE(tab, prod, n_tab);
    TAKE(t1, prod, 2 * slots);
    TAKE(t2, prod, slots);
    /* step: S, pos0, tokens, rope, contiguous for one copy */
    size_t step_bytes = 2 * sizeof(int) + C * sizeof(int32_t) + C * (size_t)n->rot_dim * sizeof(float);
    if (base) {
        pp->step = (int *)(void *)(base + off);
        pp->tokens = (int32_t *)(pp->step + 2);
        pp->rope = (float *)(void *)(pp->tokens + C);
    }
    off += coli__align256(step_bytes);
    TAKE(x, float, C * H);
    TAKE(xn, float, C * H);
    TAKE(o, float, C * H);
    TAKE(q, float, C * QD);
    TAKE(k, float, C * KVD);
    TAKE(v, float, C * KVD);
    TAKE(att, float, C * QD);
    TAKE(rl, float, C * E);
    TAKE(w, float, CK);
    TAKE(sel, int, CK);
    TAKE(row, int, CK);
    TAKE(row_tok, int, CK);
    TAKE(host, unsigned char, CK);
    TAKE(ye, float, CK * H);
    TAKE(yh, float, CK * H);
    TAKE(gg, float, GI);
    TAKE(uu, float, GI);
    TAKE(hh, float, GI);
    TAKE(qp, int8_t, qmax);
    TAKE(qs_, float, qmax / QK);
    TAKE(qps, int32_t, qmax / QK);
    TAKE(scores, float, (size_t)n->n_heads * sc);
    TAKE(part, float, (size_t)n->n_heads * (sc / ATT_TILE) * (size_t)(n->head_dim + 2));
    TAKE(logits, float, (size_t)n->vocab * COLI__GPU_ALL_ROWS);
#undef TAKE
    return off;
}

static size_t kv_bytes_of(const coli__gpu_net *n, const coli__gpu_pipe_params *p)
{
    size_t el = p->kv_dt == COLI_DT_BF16 ? 2 : 4;
    return 2 * (size_t)n->n_layers * (size_t)p->n_ctx * (size_t)n->n_kv_heads * (size_t)n->head_dim * el;
}

/* static table entries: per layer q, k, v, o, router, gate, up, down; the
 * output projection of the last row, then of every row */
static int n_tab_of(const coli__gpu_net *n)
{
    return 8 * n->n_layers + 2;
}

uint64_t coli__pipe_bytes(const coli__gpu_net *net, const coli__gpu_pipe_params *p)
{
    return (uint64_t)kv_bytes_of(net, p) + (uint64_t)layout(NULL, net, p, n_tab_of(net), NULL);
}

/* ---- creation ------------------------------------------------------------- */

void coli__pipe_free(coli__gpu_pipe *pp)
{
    if (!pp)
        return;
    if (cudaSetDevice(pp->dv->ordinal) == cudaSuccess) {
        for (int i = 0; i < pp->n_seg; i++)
            cudaGraphExecDestroy(pp->seg[i]);
        if (pp->ev_route)
            cudaEventDestroy(pp->ev_route);
        if (pp->stream)
            cudaStreamDestroy(pp->stream);
        for (int i = 0; i < pp->ph_cap; i++)
            if (pp->ph_ev[i])
                cudaEventDestroy(pp->ph_ev[i]);
        if (pp->ev0)
            cudaEventDestroy(pp->ev0);
        if (pp->ev1)
            cudaEventDestroy(pp->ev1);
        for (int l = 0; pp->L && l < pp->net.n_layers; l++)
            if (pp->L[l].views)
                cudaFree(pp->L[l].views);
        if (pp->kv_mem)
            cudaFree(pp->kv_mem);
        if (pp->mem)
            cudaFree(pp->mem);
        if (pp->pin)
            cudaFreeHost(pp->pin);
    }
    (void)cudaGetLastError();
    free(pp->L);
    free(pp->seg);
    free(pp->seg_flags);
    free(pp->seg_layer);
    free(pp);
}

/* A resident f32 vector's device values. */
static coli_status vec(coli__gpu *g, int dev, int h, int n, const char *what, const float **out, coli__err *err)
{
    *out = NULL;
    if (h < 0)
        return COLI_OK;
    tensor *t = coli__gpu_lookup(g, h);
    if (!t || t->dev != dev || t->shape.dt != COLI_DT_F32 || (size_t)t->shape.rows * t->shape.cols != (size_t)n)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: %s is not a resident f32 vector of %d values on the device",
                          what, n);
    *out = (const float *)t->mem;
    return COLI_OK;
}

/* Adds the product of a resident matrix to the host table. */
static coli_status entry(coli__gpu_pipe *pp, prod *tab, int idx, int h, int rows, int cols, float *x_out, int ys,
                         const char *what, coli__err *err)
{
    tensor *t = coli__gpu_lookup(pp->g, h);
    if (!t || t->dev != pp->dev)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: %s is not resident on the device", what);
    if (t->shape.rows != rows || t->shape.cols != cols)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: %s is [%d, %d], the model says [%d, %d]", what, t->shape.rows,
                          t->shape.cols, rows, cols);
    prod *pr = &tab[idx];
    coli__gpu_view(t, pr);
    pr->x0 = 0;
    pr->n_tok = pp->C;
    pr->live = pp->step;
    pr->y = x_out;
    pr->ys = ys;
    return COLI_OK;
}

static coli_status check_net(const coli__gpu_net *n, coli__err *err)
{
    if (n->hidden <= 0 || n->n_heads <= 0 || n->n_kv_heads <= 0 || n->head_dim <= 0 || n->n_layers <= 0 ||
        n->n_heads % n->n_kv_heads || n->rot_dim < 0 || n->rot_dim > n->head_dim || n->rot_dim % 2 || n->vocab <= 0)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: the decoder's shape is not one it can run");
    /* what the per-token kernels stage in shared memory (48 KiB a block) */
    if ((size_t)n->hidden * 4 > 48 * 1024 ||
        (size_t)(n->n_heads + 2 * n->n_kv_heads) * (size_t)n->head_dim * 4 > 48 * 1024 ||
        (size_t)(ATT_TILE + 8 * n->head_dim) * 4 > 48 * 1024 || (size_t)n->n_experts * 12 > 48 * 1024)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: a hidden size of %d or %d + 2 x %d heads of %d is "
                                                  "beyond what its kernels stage",
                          n->hidden, n->n_heads, n->n_kv_heads, n->head_dim);
    if (n->n_experts > 512)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: %d experts, at most 512", n->n_experts);
    if (n->n_experts > 0 && (n->top_k <= 0 || n->top_k > 64 || n->top_k > n->n_experts))
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: %d of %d experts per token (at most 64)", n->top_k,
                          n->n_experts);
    return COLI_OK;
}

static coli_status build_layer(coli__gpu_pipe *pp, prod *tab, int l, coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const coli__gpu_layer *ly = &n->layers[l];
    pl_layer *L = &pp->L[l];
    const int H = pp->H, hd = n->head_dim;
    char what[64];
    snprintf(what, sizeof what, "layer %d's attention norm", l);
    COLI_TRY(vec(pp->g, pp->dev, ly->attn_norm, H, what, &L->attn_norm, err));
    snprintf(what, sizeof what, "layer %d's feed-forward norm", l);
    COLI_TRY(vec(pp->g, pp->dev, ly->ffn_norm, H, what, &L->ffn_norm, err));
    if (!L->attn_norm || !L->ffn_norm)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has no norm weights", l);
    /* the pieces this pipe builds; any other kind stays on the CPU */
    if (ly->attn != COLI_ATTN_GQA)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's attention (kind %d) runs on the CPU", l,
                          (int)ly->attn);
    L->moe = ly->is_moe != 0;
    if (L->moe && ly->moe != COLI_MOE_ROUTED && ly->moe != COLI_MOE_ROUTED_SHARED)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's MoE block (kind %d) runs on the CPU", l,
                          (int)ly->moe);
    if (!L->moe && ly->mlp != COLI_MLP_SWIGLU)
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's MLP (kind %d) runs on the CPU", l,
                          (int)ly->mlp);
    L->qk_norm = ly->qk_norm;
    if (ly->qk_norm) {
        int nq = ly->qk_norm == 1 ? hd : pp->QD, nk = ly->qk_norm == 1 ? hd : pp->KVD;
        snprintf(what, sizeof what, "layer %d's q norm", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->q_norm, nq, what, &L->q_norm, err));
        snprintf(what, sizeof what, "layer %d's k norm", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->k_norm, nk, what, &L->k_norm, err));
        if (!L->q_norm || !L->k_norm)
            return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has a q/k norm without weights", l);
    }
    L->clip = ly->clip_qkv;
    L->window = ly->window;
    if (ly->bq >= 0 || ly->bk >= 0 || ly->bv >= 0) {
        snprintf(what, sizeof what, "layer %d's q bias", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->bq, pp->QD, what, &L->bq, err));
        snprintf(what, sizeof what, "layer %d's k bias", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->bk, pp->KVD, what, &L->bk, err));
        snprintf(what, sizeof what, "layer %d's v bias", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->bv, pp->KVD, what, &L->bv, err));
        if (!L->bq || !L->bk || !L->bv)
            return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has some of the q/k/v biases, not all", l);
    }
    switch (ly->route.kind) {
    case COLI_ROUTER_SOFTMAX_TOPK:
        L->route.kind = 0;
        break;
    case COLI_ROUTER_SIGMOID_GROUP:
        L->route.kind = 1;
        break;
    default:
        if (L->moe)
            return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's router (kind %d) runs on the CPU", l,
                              (int)ly->route.kind);
    }
    L->route.norm_topk = ly->route.norm_topk;
    L->route.n_group = ly->route.n_group;
    L->route.topk_group = ly->route.topk_group;
    L->route.scale = ly->route.scale;
    if (L->moe && ly->route.kind == COLI_ROUTER_SIGMOID_GROUP) {
        snprintf(what, sizeof what, "layer %d's router correction bias", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->route.bias, pp->E, what, &L->route.bias, err));
        if (!L->route.bias || ly->route.n_group < 1 || ly->route.n_group > COLI__ROUTE_MAX_GROUPS ||
            pp->E % ly->route.n_group || ly->route.topk_group < 1 || ly->route.topk_group > ly->route.n_group)
            return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's sigmoid router (%d groups, %d kept)", l,
                              ly->route.n_group, ly->route.topk_group);
    }
    const int b = 8 * l;
    snprintf(what, sizeof what, "layer %d's q projection", l);
    COLI_TRY(entry(pp, tab, b + 0, ly->wq, pp->QD, H, pp->q, pp->QD, what, err));
    snprintf(what, sizeof what, "layer %d's k projection", l);
    COLI_TRY(entry(pp, tab, b + 1, ly->wk, pp->KVD, H, pp->k, pp->KVD, what, err));
    snprintf(what, sizeof what, "layer %d's v projection", l);
    COLI_TRY(entry(pp, tab, b + 2, ly->wv, pp->KVD, H, pp->v, pp->KVD, what, err));
    snprintf(what, sizeof what, "layer %d's output projection", l);
    COLI_TRY(entry(pp, tab, b + 3, ly->wo, H, pp->QD, pp->o, H, what, err));
    /* q, k, v: one launch per run of one format */
    L->n_qkv = 0;
    for (int i = 0; i < 3; i++) {
        int dt = tab[b + i].dt, rows = i == 0 ? pp->QD : pp->KVD;
        L->qkv_quant |= coli__is_quant(dt);
        if (L->n_qkv && L->qkv[L->n_qkv - 1].dt == dt) {
            launch *la = &L->qkv[L->n_qkv - 1];
            la->n++;
            la->rows = rows > la->rows ? rows : la->rows;
        } else {
            L->qkv[L->n_qkv++] = (launch){dt, b + i, 1, rows, H};
        }
    }
    L->wo = (launch){tab[b + 3].dt, b + 3, 1, H, pp->QD};
    if (L->moe) {
        if (!ly->experts)
            return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has a router and no expert list", l);
        snprintf(what, sizeof what, "layer %d's router", l);
        COLI_TRY(entry(pp, tab, b + 4, ly->router, pp->E, H, pp->rl, pp->E, what, err));
        L->router = (launch){tab[b + 4].dt, b + 4, 1, pp->E, H};
        prod *views = (prod *)calloc((size_t)pp->E * 3, sizeof *views);
        if (!views)
            return coli__fail(err, COLI_ENOMEM, "GPU pipe: out of host memory");
        coli_status st = COLI_OK;
        L->dt1 = L->dt2 = -1;
        for (int e = 0; e < pp->E && st == COLI_OK; e++) {
            const int *h = ly->experts + 3 * (size_t)e;
            if (h[0] < 0) {
                L->n_host++;
                continue;
            }
            tensor *tg = coli__gpu_lookup(pp->g, h[0]), *tu = coli__gpu_lookup(pp->g, h[1]),
                   *td = coli__gpu_lookup(pp->g, h[2]);
            if (!tg || !tu || !td || tg->dev != pp->dev || tu->dev != pp->dev || td->dev != pp->dev ||
                tg->shape.rows != pp->I || tg->shape.cols != H || tu->shape.rows != pp->I || tu->shape.cols != H ||
                td->shape.rows != H || td->shape.cols != pp->I || tg->shape.dt != tu->shape.dt) {
                st = coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d expert %d is not resident here in its shape", l,
                                e);
                break;
            }
            if (L->dt1 < 0) {
                L->dt1 = tg->shape.dt;
                L->dt2 = td->shape.dt;
            }
            if (tg->shape.dt != L->dt1 || td->shape.dt != L->dt2) {
                L->n_host++; /* a format the layer's launches do not take */
                continue;
            }
            coli__gpu_view(tg, &views[3 * e]);
            coli__gpu_view(tu, &views[3 * e + 1]);
            coli__gpu_view(td, &views[3 * e + 2]);
        }
        if (st == COLI_OK) {
            cudaError_t ce = cudaMalloc((void **)&L->views, (size_t)pp->E * 3 * sizeof *views);
            if (ce == cudaSuccess)
                ce = cudaMemcpy(L->views, views, (size_t)pp->E * 3 * sizeof *views, cudaMemcpyHostToDevice);
            if (ce != cudaSuccess) {
                (void)cudaGetLastError();
                st = coli__cuda_fail(err, ce, "copying the expert tables to the device");
            }
        }
        free(views);
        COLI_TRY(st);
        if (L->n_host)
            pp->any_host = 1;
        if (ly->moe == COLI_MOE_ROUTED_SHARED) { /* the shared experts: the dense MLP's table slots and launches */
            const int SI = n->shared_inter;
            snprintf(what, sizeof what, "layer %d's shared experts' gate", l);
            COLI_TRY(entry(pp, tab, b + 5, ly->s_gate, SI, H, pp->gg, SI, what, err));
            snprintf(what, sizeof what, "layer %d's shared experts' up", l);
            COLI_TRY(entry(pp, tab, b + 6, ly->s_up, SI, H, pp->uu, SI, what, err));
            snprintf(what, sizeof what, "layer %d's shared experts' down", l);
            COLI_TRY(entry(pp, tab, b + 7, ly->s_down, H, SI, pp->o, H, what, err));
            if (tab[b + 5].dt != tab[b + 6].dt)
                return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's shared gate and up differ in format",
                                  l);
            L->mlp_gu = (launch){tab[b + 5].dt, b + 5, 2, SI, H};
            L->mlp_down = (launch){tab[b + 7].dt, b + 7, 1, H, SI};
            L->shared = 1;
        }
    } else {
        snprintf(what, sizeof what, "layer %d's MLP gate", l);
        COLI_TRY(entry(pp, tab, b + 5, ly->gate, n->inter, H, pp->gg, n->inter, what, err));
        snprintf(what, sizeof what, "layer %d's MLP up", l);
        COLI_TRY(entry(pp, tab, b + 6, ly->up, n->inter, H, pp->uu, n->inter, what, err));
        snprintf(what, sizeof what, "layer %d's MLP down", l);
        COLI_TRY(entry(pp, tab, b + 7, ly->down, H, n->inter, pp->o, H, what, err));
        if (tab[b + 5].dt != tab[b + 6].dt)
            return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: layer %d's MLP gate and up differ in format", l);
        L->mlp_gu = (launch){tab[b + 5].dt, b + 5, 2, n->inter, H};
        L->mlp_down = (launch){tab[b + 7].dt, b + 7, 1, H, n->inter};
    }
    return COLI_OK;
}

coli_status coli__pipe_create(coli__gpu *g, const coli__gpu_net *net, const coli__gpu_pipe_params *p,
                               coli__gpu_pipe **out, coli__err *err)
{
    *out = NULL;
    if (!g || !net || !p || net->dev < 0 || net->dev >= g->n_dev)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: bad arguments");
    COLI_TRY(check_net(net, err));
    if (p->n_ctx <= 0 || (p->kv_dt != COLI_DT_F32 && p->kv_dt != COLI_DT_BF16))
        return coli__fail(err, COLI_EINVAL, "GPU pipe: a KV cache of %d positions in format %d", p->n_ctx,
                          (int)p->kv_dt);
    COLI_TRY(coli__gpu_injected(g, err));
    coli__gpu_pipe *pp = (coli__gpu_pipe *)calloc(1, sizeof *pp);
    if (!pp)
        return coli__fail(err, COLI_ENOMEM, "GPU pipe: out of host memory");
    pp->g = g;
    pp->dev = net->dev;
    pp->dv = &g->dev[net->dev];
    pp->net = *net;
    pp->p = *p;
    pp->H = net->hidden;
    pp->QD = net->n_heads * net->head_dim;
    pp->KVD = net->n_kv_heads * net->head_dim;
    pp->E = net->n_experts > 0 ? net->n_experts : 1;
    pp->K = net->top_k > 0 ? net->top_k : 1;
    pp->I = net->moe_inter;
    pp->inter = net->inter;
    pp->C = chunk_of(p);
    pp->CK = pp->C * pp->K;
    pp->slots = pp->E < pp->CK ? pp->E : pp->CK;
    pp->rot = net->rot_dim;
    pp->kv_bf16 = p->kv_dt == COLI_DT_BF16;
    pp->sc_cap = sc_cap_of(net, p);
    coli_status st = COLI_OK;
    prod *tab = NULL;
    const int n_tab = n_tab_of(net);
    pp->L = (pl_layer *)calloc((size_t)net->n_layers, sizeof *pp->L);
    tab = (prod *)calloc((size_t)n_tab, sizeof *tab);
    /* a decode step cuts at most twice a layer */
    pp->cap_seg = 2 * net->n_layers + 1;
    pp->seg = (cudaGraphExec_t *)calloc((size_t)pp->cap_seg, sizeof *pp->seg);
    pp->seg_flags = (unsigned char *)calloc((size_t)pp->cap_seg, 1);
    pp->seg_layer = (int *)calloc((size_t)pp->cap_seg, sizeof *pp->seg_layer);
    if (!pp->L || !tab || !pp->seg || !pp->seg_flags || !pp->seg_layer) {
        free(tab);
        coli__pipe_free(pp);
        return coli__fail(err, COLI_ENOMEM, "GPU pipe: out of host memory");
    }
#define FAIL_IF(cond_call, what)                                  \
    do {                                                          \
        cudaError_t e_ = (cond_call);                             \
        if (e_ != cudaSuccess) {                                  \
            (void)cudaGetLastError();                             \
            st = coli__cuda_fail(err, e_, what);                  \
            goto fail;                                            \
        }                                                         \
    } while (0)
    FAIL_IF(cudaSetDevice(pp->dv->ordinal), "cudaSetDevice");
    pp->kv_bytes = kv_bytes_of(net, p);
    pp->mem_bytes = layout(NULL, net, p, n_tab, NULL);
    {
        cudaError_t e = cudaMalloc(&pp->kv_mem, pp->kv_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            size_t fr = 0, tot = 0;
            (void)cudaMemGetInfo(&fr, &tot);
            (void)cudaGetLastError();
            st = coli__fail(err, COLI_ENOMEM,
                            "GPU pipe: a KV cache of %d positions takes %llu MiB on device %d, %llu MiB are free",
                            p->n_ctx, (unsigned long long)(pp->kv_bytes >> 20), pp->dv->ordinal,
                            (unsigned long long)(fr >> 20));
            goto fail;
        }
        e = cudaMalloc(&pp->mem, pp->mem_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            st = coli__fail(err, COLI_ENOMEM, "GPU pipe: %llu MiB of scratch for chunks of %d tokens do not fit on "
                                              "device %d",
                            (unsigned long long)(pp->mem_bytes >> 20), pp->C, pp->dv->ordinal);
            goto fail;
        }
    }
    if (p->poison) { /* before the tables go in: what no step writes reads as NaN */
        FAIL_IF(cudaMemset(pp->kv_mem, 0xff, pp->kv_bytes), "poisoning the KV cache");
        FAIL_IF(cudaMemset(pp->mem, 0xff, pp->mem_bytes), "poisoning the scratch");
    }
    layout(pp, net, p, n_tab, (char *)pp->mem);
    /* a step writes only n_tok of the expert tables' unused entries (which
     * the kernels read first): the rest starts as zeros, not poison */
    FAIL_IF(cudaMemset(pp->t1, 0, 2 * (size_t)pp->slots * sizeof(prod)), "clearing the expert tables");
    FAIL_IF(cudaMemset(pp->t2, 0, (size_t)pp->slots * sizeof(prod)), "clearing the expert tables");
    {
        size_t per_layer = (size_t)p->n_ctx * (size_t)pp->KVD * (pp->kv_bf16 ? 2 : 4);
        for (int l = 0; l < net->n_layers; l++) {
            pp->L[l].kc = (char *)pp->kv_mem + (2 * (size_t)l) * per_layer;
            pp->L[l].vc = (char *)pp->kv_mem + (2 * (size_t)l + 1) * per_layer;
        }
    }
    pp->embed = coli__gpu_lookup(g, net->embed);
    if (!pp->embed || pp->embed->dev != pp->dev ||
        (pp->embed->shape.dt != COLI_DT_F32 && pp->embed->shape.dt != COLI_DT_BF16) ||
        pp->embed->shape.rows != net->vocab || pp->embed->shape.cols != net->hidden) {
        st = coli__fail(err, COLI_EINVAL, "GPU pipe: the embedding is not resident on the device in f32 or bf16");
        goto fail;
    }
    st = vec(g, pp->dev, net->final_norm, pp->H, "the final norm", &pp->final_norm, err);
    if (st == COLI_OK && !pp->final_norm)
        st = coli__fail(err, COLI_EINVAL, "GPU pipe: no final norm");
    for (int l = 0; l < net->n_layers && st == COLI_OK; l++)
        st = build_layer(pp, tab, l, err);
    if (st == COLI_OK)
        st = entry(pp, tab, n_tab - 2, net->lm_head, net->vocab, pp->H, pp->logits, net->vocab,
                   "the output projection", err);
    if (st == COLI_OK)
        st = entry(pp, tab, n_tab - 1, net->lm_head, net->vocab, pp->H, pp->logits, net->vocab,
                   "the output projection", err);
    if (st != COLI_OK)
        goto fail;
    tab[n_tab - 2].n_tok = 1; /* the last token's row, normalised into xn[0] */
    tab[n_tab - 2].live = NULL;
    pp->lm = (launch){tab[n_tab - 2].dt, n_tab - 2, 1, net->vocab, net->hidden};
    /* every row (a verification's): the step's count caps it */
    tab[n_tab - 1].n_tok = pp->C < COLI__GPU_ALL_ROWS ? pp->C : COLI__GPU_ALL_ROWS;
    pp->lm_all = (launch){tab[n_tab - 1].dt, n_tab - 1, 1, net->vocab, net->hidden};
    FAIL_IF(cudaMemcpy(pp->tab, tab, (size_t)n_tab * sizeof *tab, cudaMemcpyHostToDevice),
            "copying the product tables to the device");
    {
        /* pinned: the step's input, then logits, xn and the host's y, sel, host flags */
        pp->in_bytes = 2 * sizeof(int) + (size_t)pp->C * sizeof(int32_t) + (size_t)pp->C * pp->rot * sizeof(float);
        size_t hb = coli__align256(pp->in_bytes) + coli__align256((size_t)net->vocab * 4 * COLI__GPU_ALL_ROWS);
        if (pp->any_host)
            hb += coli__align256((size_t)pp->C * pp->H * 4) + coli__align256((size_t)pp->CK * pp->H * 4) +
                  coli__align256((size_t)pp->CK * 4) + coli__align256((size_t)pp->CK);
        void *dpin = NULL;
        if (coli_host_alloc_mapped(&pp->pin, &dpin, hb) != cudaSuccess) { /* copies, then */
            (void)cudaGetLastError();
            dpin = NULL;
            FAIL_IF(cudaMallocHost(&pp->pin, hb), "allocating pinned host memory");
        }
        char *h = (char *)pp->pin;
        pp->h_step = (int *)(void *)h;
        h += coli__align256(pp->in_bytes);
        pp->h_logits = (float *)(void *)h;
        h += coli__align256((size_t)net->vocab * 4 * COLI__GPU_ALL_ROWS);
        if (pp->any_host) {
            pp->h_xn = (float *)(void *)h;
            h += coli__align256((size_t)pp->C * pp->H * 4);
            pp->h_yh = (float *)(void *)h;
            h += coli__align256((size_t)pp->CK * pp->H * 4);
            pp->h_sel = (int *)(void *)h;
            h += coli__align256((size_t)pp->CK * 4);
            pp->h_host = (unsigned char *)h;
            if (dpin) { /* the same offsets from the device's address */
                char *d = (char *)dpin;
                pp->d_xn = (float *)(void *)(d + ((char *)pp->h_xn - (char *)pp->pin));
                pp->d_yh = (float *)(void *)(d + ((char *)pp->h_yh - (char *)pp->pin));
                pp->d_sel = (int *)(void *)(d + ((char *)pp->h_sel - (char *)pp->pin));
                pp->d_host = (unsigned char *)(d + ((char *)pp->h_host - (char *)pp->pin));
            }
        }
    }
    FAIL_IF(cudaStreamCreate(&pp->stream), "cudaStreamCreate");
    if (p->pdl && !p->phases) { /* phases time each kernel alone */
        cudaDeviceProp prop;
        FAIL_IF(cudaGetDeviceProperties(&prop, pp->dv->ordinal), "cudaGetDeviceProperties");
        pp->pdl = prop.major >= 9;
    }
    if (p->phases) {
        int want = 8 + 12 * net->n_layers;
        pp->ph_cap = want < (int)(sizeof pp->ph_ev / sizeof pp->ph_ev[0]) ? want
                                                                           : (int)(sizeof pp->ph_ev / sizeof pp->ph_ev[0]);
        for (int i = 0; i < pp->ph_cap; i++)
            FAIL_IF(cudaEventCreate(&pp->ph_ev[i]), "cudaEventCreate");
    }
    FAIL_IF(cudaEventCreate(&pp->ev_route), "cudaEventCreate");
    FAIL_IF(cudaEventCreate(&pp->ev0), "cudaEventCreate");
    FAIL_IF(cudaEventCreate(&pp->ev1), "cudaEventCreate");
#undef FAIL_IF
    pp->st.kv_bytes = pp->kv_bytes;
    pp->st.scratch_bytes = pp->mem_bytes;
    free(tab);
    *out = pp;
    return COLI_OK;
fail:
    free(tab);
    coli__pipe_free(pp);
    return st;
}

/* ---- a step ----------------------------------------------------------------- */

/* Phases of coli_gpu_phase_name (lib/model/device.c names them). */
enum { PH_NORM, PH_QKV, PH_ATTN, PH_WO, PH_ROUTE, PH_EXPERTS, PH_COMBINE, PH_OUTPUT };

/* With phase timing, an event closing phase id. */
static void mark(coli__gpu_pipe *pp, cudaStream_t s, int id)
{
    if (!pp->p.phases || pp->ph_n >= pp->ph_cap)
        return;
    if (cudaEventRecord(pp->ph_ev[pp->ph_n], s) == cudaSuccess)
        pp->ph_id[pp->ph_n++] = id;
    else
        (void)cudaGetLastError();
}

/* After a synchronised step: the time between consecutive marks. */
static void phases_done(coli__gpu_pipe *pp)
{
    for (int i = 1; i < pp->ph_n; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, pp->ph_ev[i - 1], pp->ph_ev[i]) == cudaSuccess)
            pp->st.phase_ns[pp->ph_id[i]] += (uint64_t)((double)ms * 1e6);
        else
            (void)cudaGetLastError();
    }
    pp->ph_n = 0;
}

static coli_status products(coli__gpu_pipe *pp, cudaStream_t s, const launch *la, int S, const float *x, int quant,
                            coli__err *err)
{
    (void)quant;
    return coli__k_products(s, la->dt, pp->tab + la->first, la->n, la->rows, la->cols, S, pp->qp, pp->qs_, pp->qps, x,
                            1, err);
}

static coli_status quantize(coli__gpu_pipe *pp, cudaStream_t s, const float *x, int rows, int cols, coli__err *err)
{
    return coli__k_quantize(s, x, rows, cols, pp->qp, pp->qs_, pp->qps, err);
}

/* The quantized copy of an activation the next products read, when one
 * of them takes it quantized. */
static coli__qout qout(coli__gpu_pipe *pp, int want)
{
    coli__qout q = {NULL, NULL, NULL};
    if (want) {
        q.p = pp->qp;
        q.s = pp->qs_;
        q.psum = pp->qps;
    }
    return q;
}

/* What reads layer l's feed-forward input: quantized by one of them? */
static int ffn_quant(const pl_layer *L)
{
    return L->moe ? coli__is_quant(L->router.dt) || coli__is_quant(L->dt1) || (L->shared && coli__is_quant(L->mlp_gu.dt))
                  : coli__is_quant(L->mlp_gu.dt);
}

/* After layer l: the next layer's attention norm (quantized when its
 * q/k/v products want it), or nothing after the last (the final norm
 * takes the last row alone). */
static const float *next_norm(const coli__gpu_pipe *pp, int l, int *quant)
{
    if (l + 1 >= pp->net.n_layers) {
        *quant = 0;
        return NULL;
    }
    *quant = pp->L[l + 1].qkv_quant;
    return pp->L[l + 1].attn_norm;
}

/* What the host does after a segment of the decode step's graphs. */
enum { SEG_RECORD = 1, /* record ev_route: the routing has reached pinned memory */
       SEG_HOST = 2 };  /* wait for ev_route, then compute the layer's host experts */

/* The host's share of layer l: waits for the routing, computes its
 * experts into pinned memory (the device runs its own meanwhile). */
static coli_status host_turn(coli__gpu_pipe *pp, const coli__gpu_host *host, int l, int S, coli__err *err)
{
    CK(cudaEventSynchronize(pp->ev_route), "waiting for the routing");
    COLI_TRY(host->run(host->user, l, pp->h_xn, S, pp->h_sel, pp->h_host, pp->h_yh, err));
    pp->st.host_syncs++;
    return COLI_OK;
}

/* While capturing the decode step: ends the graph so far as the next
 * segment, to be followed by flags for layer l, and starts the next. */
static coli_status cut(coli__gpu_pipe *pp, cudaStream_t s, int flags, int l, coli__err *err)
{
    if (pp->n_seg >= pp->cap_seg)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: more than %d graphs for a decode step", pp->cap_seg);
    cudaGraph_t graph = NULL;
    pp->capturing = 0;
    CK(cudaStreamEndCapture(s, &graph), "ending a graph capture");
    cudaError_t ce = coli_graph_instantiate(&pp->seg[pp->n_seg], graph);
    cudaGraphDestroy(graph);
    CK(ce, "instantiating a decode graph");
    pp->seg_flags[pp->n_seg] = (unsigned char)flags;
    pp->seg_layer[pp->n_seg] = l;
    pp->n_seg++;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "starting a graph capture");
    pp->capturing = 1;
    return COLI_OK;
}

/* The routed experts of layer l for S tokens, the host's share when the
 * layer has one; ends with the combination and the next layer's norm. */
static coli_status moe(coli__gpu_pipe *pp, cudaStream_t s, int l, int S, const coli__gpu_host *host, coli__err *err)
{
    pl_layer *L = &pp->L[l];
    const int H = pp->H, K = pp->K, I = pp->I;
    /* xn (and its quantized copy) are the norm's, made just before */
    COLI_TRY(products(pp, s, &L->router, S, pp->xn, 0, err));
    const int hosted = L->n_host > 0, dev_work = L->dt1 >= 0 || L->shared;
    /* few tokens: the router's kernel writes what the host reads into
     * mapped memory, and the combination reads the host's rows there: a
     * graph node less each way (their latency, not their bytes, counts) */
    const int mapped = hosted && pp->d_xn && S <= COLI__ROUTE_FEW;
    coli__group_args ga = {pp->sel,  pp->w,  L->views, pp->E,   K,        H,        I,         pp->gg,
                           pp->uu,   pp->ye, pp->row,  pp->row_tok, pp->host, pp->t1, pp->t2, pp->slots,
                           pp->step, mapped ? pp->xn : NULL, mapped ? pp->d_xn : NULL,
                           mapped ? pp->d_sel : NULL, mapped ? pp->d_host : NULL};
    COLI_TRY(coli__k_route_group(s, pp->rl, &L->route, &ga, S, err));
    mark(pp, s, PH_ROUTE);
    if (hosted) {
        if (!pp->rec && (!host || !host->run))
            return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has experts on the host and no host to run them", l);
        if (!mapped) {
            CK(cudaMemcpyAsync(pp->h_xn, pp->xn, (size_t)S * H * 4, cudaMemcpyDeviceToHost, s),
               "copying xn to the host");
            CK(cudaMemcpyAsync(pp->h_sel, pp->sel, (size_t)S * K * 4, cudaMemcpyDeviceToHost, s),
               "copying the routing to the host");
            CK(cudaMemcpyAsync(pp->h_host, pp->host, (size_t)S * K, cudaMemcpyDeviceToHost, s),
               "copying the routing to the host");
        }
        if (pp->rec) /* no device work: the host starts after this segment */
            COLI_TRY(cut(pp, s, dev_work ? SEG_RECORD : SEG_RECORD | SEG_HOST, l, err));
        else
            CK(cudaEventRecord(pp->ev_route, s), "cudaEventRecord");
    }
    const int slots = S * K < pp->E ? S * K : pp->E;
    if (L->dt1 >= 0) {
        /* gate and up read the tokens' quantized (or float) xn in place */
        COLI_TRY(coli__k_products(s, L->dt1, pp->t1, 2 * slots, I, H, S, pp->qp, pp->qs_, pp->qps, pp->xn, 0, err));
        coli__qout q = qout(pp, coli__is_quant(L->dt2));
        COLI_TRY(coli__k_swiglu_q(s, pp->gg, pp->uu, pp->hh, S * K, I, &q, err));
        COLI_TRY(coli__k_products(s, L->dt2, pp->t2, slots, H, I, S, pp->qp, pp->qs_, pp->qps, pp->hh, 0, err));
    }
    if (L->shared) {
        /* the shared experts into o (free since the norm read it); the
         * routed experts' SwiGLU overwrote the quantized xn */
        if (coli__is_quant(L->mlp_gu.dt) && L->dt1 >= 0 && coli__is_quant(L->dt2))
            COLI_TRY(quantize(pp, s, pp->xn, S, H, err));
        COLI_TRY(products(pp, s, &L->mlp_gu, S, pp->xn, 0, err));
        coli__qout qh = qout(pp, coli__is_quant(L->mlp_down.dt));
        COLI_TRY(coli__k_swiglu_q(s, pp->gg, pp->uu, pp->hh, S, pp->net.shared_inter, &qh, err));
        COLI_TRY(products(pp, s, &L->mlp_down, S, pp->hh, 0, err));
    }
    mark(pp, s, PH_EXPERTS);
    if (hosted) {
        /* the device runs its experts meanwhile */
        if (pp->rec) {
            if (dev_work)
                COLI_TRY(cut(pp, s, SEG_HOST, l, err));
        } else {
            COLI_TRY(host_turn(pp, host, l, S, err));
        }
        if (!mapped)
            CK(cudaMemcpyAsync(pp->yh, pp->h_yh, (size_t)S * K * H * 4, cudaMemcpyHostToDevice, s),
               "copying the host's experts to the device");
    }
    int nq;
    const float *nw = next_norm(pp, l, &nq);
    coli__qout q = qout(pp, nq);
    COLI_TRY(coli__k_combine(s, pp->x, pp->ye, mapped ? pp->d_yh : pp->yh, pp->row, pp->host, pp->sel, pp->w, K, H,
                             pp->step, S,
                             L->shared ? pp->o : NULL, nw,
                             pp->net.eps, pp->xn, &q, err));
    mark(pp, s, PH_COMBINE);
    return COLI_OK;
}

/* Everything of a chunk of S tokens after its input is on the device, up
 * to the logits in device memory. max_pos: the last position. */
static coli_status layers(coli__gpu_pipe *pp, cudaStream_t s, int S, int max_pos, int all,
                          const coli__gpu_host *host, coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const int H = pp->H;
    mark(pp, s, PH_NORM);
    COLI_TRY(coli__k_embed(s, pp->embed, pp->tokens, pp->step, S, pp->x, err));
    coli__qout q0 = qout(pp, pp->L[0].qkv_quant);
    COLI_TRY(coli__k_norm(s, pp->x, NULL, pp->L[0].attn_norm, H, n->eps, pp->step, S, 0, pp->xn, &q0, err));
    mark(pp, s, PH_NORM);
    for (int l = 0; l < n->n_layers; l++) {
        pl_layer *L = &pp->L[l];
        /* xn: this layer's attention norm, quantized when wanted */
        for (int i = 0; i < L->n_qkv; i++)
            COLI_TRY(products(pp, s, &L->qkv[i], S, pp->xn, 0, err));
        coli__qkv_args qa = {pp->q,      pp->k,         pp->v,       L->bq,    L->bk,  L->bv,
                             L->q_norm,  L->k_norm,     L->qk_norm,  L->clip,  n->n_heads, n->n_kv_heads,
                             n->head_dim, pp->rot,      n->eps,      pp->rope, L->kc,  L->vc,
                             pp->kv_bf16, pp->step};
        /* the output projection reads the heads quantized by the attention */
        coli__att_args aa = {pp->q,   L->kc,  L->vc,      pp->kv_bf16, n->n_heads, n->n_kv_heads,
                             n->head_dim, L->window, pp->sc_cap, pp->scores, pp->part, pp->att, pp->step,
                             qout(pp, coli__is_quant(L->wo.dt))};
        if (coli__k_qkv_attention_fits(&qa, S, max_pos)) { /* decode: one launch for both */
            mark(pp, s, PH_QKV);
            COLI_TRY(coli__k_qkv_attention(s, &qa, &aa, err));
        } else {
            COLI_TRY(coli__k_qkv(s, &qa, S, err));
            mark(pp, s, PH_QKV);
            COLI_TRY(coli__k_attention(s, &aa, S, max_pos, err));
        }
        mark(pp, s, PH_ATTN);
        if (coli__is_quant(L->wo.dt) && n->head_dim % QK)
            COLI_TRY(quantize(pp, s, pp->att, S, pp->QD, err));
        COLI_TRY(products(pp, s, &L->wo, S, pp->att, 0, err));
        coli__qout qf = qout(pp, ffn_quant(L));
        mark(pp, s, PH_WO);
        COLI_TRY(coli__k_norm(s, pp->x, pp->o, L->ffn_norm, H, n->eps, pp->step, S, 0, pp->xn, &qf, err));
        mark(pp, s, PH_NORM);
        if (L->moe) {
            COLI_TRY(moe(pp, s, l, S, host, err));
        } else {
            COLI_TRY(products(pp, s, &L->mlp_gu, S, pp->xn, 0, err));
            mark(pp, s, PH_EXPERTS);
            coli__qout qh = qout(pp, coli__is_quant(L->mlp_down.dt));
            COLI_TRY(coli__k_swiglu_q(s, pp->gg, pp->uu, pp->hh, S, pp->inter, &qh, err));
            COLI_TRY(products(pp, s, &L->mlp_down, S, pp->hh, 0, err));
            int nq;
            const float *nw = next_norm(pp, l, &nq);
            if (nw) {
                coli__qout qn = qout(pp, nq);
                COLI_TRY(coli__k_norm(s, pp->x, pp->o, nw, H, n->eps, pp->step, S, 0, pp->xn, &qn, err));
            } else {
                COLI_TRY(coli__k_residual(s, pp->x, pp->o, H, pp->step, S, err));
            }
            mark(pp, s, PH_COMBINE);
        }
    }
    coli__qout ql = qout(pp, coli__is_quant(pp->lm.dt)), none = qout(pp, 0);
    if (all || pp->out_hidden) { /* every row's state: the same bits as the last row's alone */
        COLI_TRY(coli__k_norm(s, pp->x, NULL, pp->final_norm, H, n->eps, pp->step, S, 0, pp->xn, all ? &ql : &none,
                              err));
        if (pp->out_hidden)
            CK(cudaMemcpyAsync(pp->out_hidden, pp->xn, (size_t)S * H * sizeof(float), cudaMemcpyDeviceToHost, s),
               "copying the states out");
    }
    if (all) {
        COLI_TRY(products(pp, s, &pp->lm_all, S, pp->xn, 0, err));
    } else {
        COLI_TRY(coli__k_norm(s, pp->x, NULL, pp->final_norm, H, n->eps, pp->step, S, 1, pp->xn, &ql, err));
        COLI_TRY(products(pp, s, &pp->lm, 1, pp->xn, 0, err));
    }
    mark(pp, s, PH_OUTPUT);
    return COLI_OK;
}

/* One chunk: input in, the layers, logits out (when wanted). */
static coli_status chunk(coli__gpu_pipe *pp, cudaStream_t s, int S, int max_pos, int want_logits, int all,
                         const coli__gpu_host *host, coli__err *err)
{
    /* the header, the token slots and the S rows of RoPE in use: a decode
     * step copies one row, not the chunk's (264 KB at 512 x 128) */
    size_t in = pp->in_bytes - (size_t)(pp->C - S) * pp->rot * sizeof(float);
    CK(cudaMemcpyAsync(pp->step, pp->h_step, in, cudaMemcpyHostToDevice, s), "copying the tokens in");
    COLI_TRY(layers(pp, s, S, max_pos, all, host, err));
    if (want_logits)
        CK(cudaMemcpyAsync(pp->h_logits, pp->logits, (size_t)pp->net.vocab * 4 * (all ? S : 1), cudaMemcpyDeviceToHost,
                           s),
           "copying the logits out");
    return COLI_OK;
}

static void drop_graphs(coli__gpu_pipe *pp)
{
    for (int i = 0; i < pp->n_seg; i++)
        cudaGraphExecDestroy(pp->seg[i]);
    pp->n_seg = 0;
    pp->graph_tiles = 0;
}

/* Captures a decode step's graphs for `tiles` attention tiles. */
static coli_status capture(coli__gpu_pipe *pp, cudaStream_t s, int tiles, coli__err *err)
{
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "starting a graph capture");
    pp->capturing = 1;
    pp->rec = 1;
    coli_status st = chunk(pp, s, 1, tiles * ATT_TILE - 1, 1, 0, NULL, err);
    pp->rec = 0;
    if (st == COLI_OK)
        st = cut(pp, s, 0, -1, err);
    if (pp->capturing) { /* the one cut opened, or the capture a failure left */
        cudaGraph_t graph = NULL;
        (void)cudaStreamEndCapture(s, &graph);
        if (graph)
            cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        pp->capturing = 0;
    }
    if (st != COLI_OK) {
        drop_graphs(pp);
        return st;
    }
    pp->graph_tiles = tiles;
    pp->st.graph_captures++;
    return COLI_OK;
}

/* A decode step from its graphs, captured for the current attention tile
 * count and replayed while it holds; the host's experts between them. */
static coli_status decode_graph(coli__gpu_pipe *pp, cudaStream_t s, int pos, const coli__gpu_host *host,
                                coli__err *err)
{
    int tiles = pos / ATT_TILE + 1;
    if (pp->n_seg && pp->graph_tiles != tiles)
        drop_graphs(pp);
    if (!pp->n_seg)
        COLI_TRY(capture(pp, s, tiles, err));
    for (int i = 0; i < pp->n_seg; i++) {
        CK(cudaGraphLaunch(pp->seg[i], s), "launching a decode graph");
        pp->st.graph_launches++;
        if (pp->seg_flags[i] & SEG_RECORD)
            CK(cudaEventRecord(pp->ev_route, s), "cudaEventRecord");
        if (pp->seg_flags[i] & SEG_HOST) {
            if (!host || !host->run)
                return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has experts on the host and no host to run them",
                                  pp->seg_layer[i]);
            COLI_TRY(host_turn(pp, host, pp->seg_layer[i], 1, err));
        }
    }
    return COLI_OK;
}

static uint64_t ns_between(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

static coli_status run_steps(coli__gpu_pipe *pp, const int32_t *tokens, int n, int pos0, const float *rope,
                             const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err);

coli_status coli__pipe_run(coli__gpu_pipe *pp, const int32_t *tokens, int n, int pos0, const float *rope,
                            const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err)
{
    /* the launches of this thread overlap only while the pipe runs */
    coli__gpu_pdl_set(pp ? pp->pdl : 0);
    coli_status st = run_steps(pp, tokens, n, pos0, rope, out, host, err);
    coli__gpu_pdl_set(0);
    if (pp)
        pp->out_hidden = NULL;
    return st;
}

static coli_status run_steps(coli__gpu_pipe *pp, const int32_t *tokens, int n, int pos0, const float *rope,
                             const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err)
{
    if (!pp || !out || !out->logits || n < 0 || (n > 0 && (!tokens || !rope)) || pos0 < 0 || pos0 + n > pp->p.n_ctx)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: %d tokens at position %d do not fit a context of %d", n, pos0,
                          pp ? pp->p.n_ctx : 0);
    if (out->all && (n > COLI__GPU_ALL_ROWS || n > pp->C))
        return coli__fail(err, COLI_EINVAL, "GPU pipe: the logits of %d tokens asked for; at most %d", n,
                          COLI__GPU_ALL_ROWS < pp->C ? COLI__GPU_ALL_ROWS : pp->C);
    if (n == 0)
        return COLI_OK;
    COLI_TRY(coli__gpu_injected(pp->g, err));
    device *dv = pp->dv;
    cudaStream_t s = pp->stream;
    CK(cudaSetDevice(dv->ordinal), "cudaSetDevice");
    CK(cudaEventRecord(pp->ev0, s), "cudaEventRecord");
    for (int done = 0; done < n;) {
        const int S = n - done < pp->C ? n - done : pp->C;
        const int last = done + S == n;
        pp->h_step[0] = S;
        pp->h_step[1] = pos0 + done;
        int32_t *tk = (int32_t *)(pp->h_step + 2);
        memcpy(tk, tokens + done, (size_t)S * sizeof *tk);
        memcpy(tk + pp->C, rope + (size_t)done * pp->rot, (size_t)S * pp->rot * sizeof(float));
        pp->out_hidden = out->hidden ? out->hidden + (size_t)done * pp->H : NULL;
        coli_status st;
        if (S == 1 && last && !pp->p.phases) {
            /* one row: the graph's last-row norm is every row's */
            st = decode_graph(pp, s, pos0 + done, host, err);
            if (st == COLI_OK && pp->out_hidden) {
                cudaError_t e = cudaMemcpyAsync(pp->out_hidden, pp->xn, (size_t)pp->H * sizeof(float),
                                                cudaMemcpyDeviceToHost, s);
                if (e != cudaSuccess) {
                    (void)cudaGetLastError();
                    st = coli__cuda_fail(err, e, "copying the state out");
                }
            }
        } else {
            st = chunk(pp, s, S, pos0 + done + S - 1, last, out->all, host, err);
        }
        if (st != COLI_OK) {
            (void)cudaStreamSynchronize(s);
            (void)cudaGetLastError();
            return st;
        }
        /* the pinned input is reused by the next chunk */
        CK(cudaStreamSynchronize(s), "running a step");
        phases_done(pp);
        done += S;
    }
    CK(cudaEventRecord(pp->ev1, s), "cudaEventRecord");
    CK(cudaEventSynchronize(pp->ev1), "running a step");
    memcpy(out->logits, pp->h_logits, (size_t)pp->net.vocab * sizeof(float) * (out->all ? (size_t)n : 1));
    pp->st.steps++;
    pp->st.tokens += (uint64_t)n;
    pp->st.step_ns += ns_between(pp->ev0, pp->ev1);
    dv->st.calls++;
    dv->st.rows += (uint64_t)n;
    dv->st.h2d_bytes += (uint64_t)n * (sizeof(int32_t) + (size_t)pp->rot * 4);
    dv->st.d2h_bytes += (uint64_t)pp->net.vocab * 4 * (out->all ? (uint64_t)n : 1) +
                        (out->hidden ? (uint64_t)n * (uint64_t)pp->H * 4 : 0);
    return COLI_OK;
}

void coli__pipe_stats(const coli__gpu_pipe *pp, coli__gpu_pipe_stats *out)
{
    memset(out, 0, sizeof *out);
    if (pp)
        *out = pp->st;
}

