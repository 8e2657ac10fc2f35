/* pipe_build.cu - a decoder pipe made on its device (pipe.h): the sizes
 * of its cache and scratch, its layers' tables of products built from the
 * coli__gpu_net (each piece kind the layer names, or a refusal), and its
 * release. pipeline.cu runs its steps. */
#include "gpu/compat.h"

#include <stdio.h>

#include "gpu/pipe.h"

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
    /* latent attention (mla.row > 0): its query's LoRA, latent rows,
     * absorbed queries and the heads' mixes of latents, quantized for the
     * value products; the heads' outputs are nh * v_dim wide */
    const coli__gpu_mla *ma = &n->mla;
    const size_t nh = (size_t)n->n_heads, ML = ma->row > 0 ? (size_t)ma->kv_lora : 0;
    const size_t AD = ma->row > 0 && nh * (size_t)ma->v_dim > QD ? nh * (size_t)ma->v_dim : QD;
    const size_t VD = ML > (size_t)n->head_dim ? ML : (size_t)n->head_dim; /* an attention part's values */
    size_t qmax = C * H;
    qmax = C * AD > qmax ? C * AD : qmax;
    qmax = C * nh * ML > qmax ? C * nh * ML : qmax;
    qmax = ma->row > 0 && C * (size_t)ma->q_lora > qmax ? C * (size_t)ma->q_lora : qmax;
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
    TAKE(att, float, C * AD);
    if (ma->row > 0) {
        TAKE(qa, float, C * (size_t)(ma->q_lora > 0 ? ma->q_lora : 1));
        TAKE(ckv, float, C * (size_t)(ma->kv_lora + ma->rope));
        TAKE(qc, float, C * nh * (size_t)(ma->kv_lora + ma->rope));
        TAKE(lat, float, C * nh * ML);
        TAKE(xrow, int, nh * C);
    }
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
    TAKE(part, float, (size_t)n->n_heads * (sc / ATT_TILE) * (VD + 2));
    TAKE(logits, float, (size_t)n->vocab * COLI__GPU_ALL_ROWS);
#undef TAKE
    return off;
}

static size_t kv_bytes_of(const coli__gpu_net *n, const coli__gpu_pipe_params *p)
{
    size_t el = p->kv_dt == COLI_DT_BF16 ? 2 : 4;
    if (n->mla.row > 0) /* one row a position: the latent and the rotary key */
        return (size_t)n->n_layers * (size_t)p->n_ctx * (size_t)n->mla.row * el;
    return 2 * (size_t)n->n_layers * (size_t)p->n_ctx * (size_t)n->n_kv_heads * (size_t)n->head_dim * el;
}

/* static table entries: per layer q, k, v, o, router, gate, up, down (latent
 * attention: q_a or q, kv_a, q_b, o, ...); the output projection of the
 * last row, then of every row; with latent attention, each layer's heads'
 * value products after them */
static int n_tab_of(const coli__gpu_net *n)
{
    return 8 * n->n_layers + 2 + (n->mla.row > 0 ? n->n_layers * n->n_heads : 0);
}

/* The first table entry of layer l's value products. */
static int vb_first(const coli__gpu_net *n, int l)
{
    return 8 * n->n_layers + 2 + l * n->n_heads;
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
    const coli__gpu_mla *a = &n->mla;
    if (a->row > 0 &&
        (a->kv_lora <= 0 || a->rope <= 0 || a->rope % 2 || a->rope > 256 || a->nope <= 0 || a->v_dim <= 0 ||
         a->q_lora < 0 || a->row != a->kv_lora + a->rope || n->n_kv_heads != 1 || n->rot_dim != a->rope ||
         n->head_dim != a->nope + a->rope || (size_t)(ATT_TILE + 8 * a->kv_lora) * 4 > 48 * 1024 ||
         (size_t)a->q_lora * 4 > 48 * 1024))
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU pipe: latent attention of rank %d, rope %d, %d + %d dims a "
                                                  "head is not a shape its kernels take",
                          a->kv_lora, a->rope, a->nope, a->v_dim);
    /* what the per-token kernels stage in shared memory (48 KiB a block) */
    if ((size_t)n->hidden * 4 > 48 * 1024 ||
        (a->row <= 0 && (size_t)(n->n_heads + 2 * n->n_kv_heads) * (size_t)n->head_dim * 4 > 48 * 1024) ||
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

/* A view of rows r0 .. r0 + n - 1 of the matrix pr views. */
static void rows_view(prod *pr, int r0, int n)
{
    const size_t c = (size_t)pr->cols, r = (size_t)r0;
    switch (pr->dt) {
    case COLI_DT_F32:
        pr->w = (const float *)pr->w + r * c;
        break;
    case COLI_DT_BF16:
        pr->w = (const uint16_t *)pr->w + r * c;
        break;
    case COLI_DT_Q8:
        pr->qs += r * c;
        pr->d += r * c / QK;
        break;
    case COLI_DT_Q4:
        pr->qs += r * c / 2;
        pr->d += r * c / (size_t)pr->group;
        break;
    default: /* q2 */
        pr->qs += r * c / 4;
        pr->d += r * c / QK;
        pr->m += r * c / QK;
        break;
    }
    pr->rows = n;
}

/* The q, k, v launches of a layer: one per run of one format among the
 * n table entries from b, each read from xn. */
static void qkv_launches(pl_layer *L, const prod *tab, int b, int n, int H)
{
    L->n_qkv = 0;
    for (int i = 0; i < n; i++) {
        int dt = tab[b + i].dt, rows = tab[b + i].rows;
        L->qkv_quant |= coli__is_quant(dt);
        if (L->n_qkv && L->qkv[L->n_qkv - 1].dt == dt) {
            launch *la = &L->qkv[L->n_qkv - 1];
            la->n++;
            la->rows = rows > la->rows ? rows : la->rows;
        } else {
            L->qkv[L->n_qkv++] = (launch){dt, b + i, 1, rows, H};
        }
    }
}

/* Layer l's latent attention: the query's products (its LoRA, or q_proj)
 * and the latent's from xn, o_proj from the heads' outputs, kv_b_proj
 * whole for the absorption and as each head's value rows. */
static coli_status build_mla(coli__gpu_pipe *pp, prod *tab, int l, coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const coli__gpu_layer *ly = &n->layers[l];
    const coli__gpu_mla *a = &n->mla;
    pl_layer *L = &pp->L[l];
    const int H = pp->H, nh = n->n_heads, QH = nh * (a->nope + a->rope), VD = nh * a->v_dim, b = 8 * l;
    char what[64];
    if (memcmp(&ly->mla, a, sizeof *a))
        return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d's latent attention is not layer 0's shape", l);
    L->mla = 1;
    snprintf(what, sizeof what, "layer %d's latent norm", l);
    COLI_TRY(vec(pp->g, pp->dev, ly->kv_a_norm, a->kv_lora, what, &L->kv_a_norm, err));
    if (!L->kv_a_norm)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has no latent norm", l);
    if (a->q_lora) {
        snprintf(what, sizeof what, "layer %d's query LoRA norm", l);
        COLI_TRY(vec(pp->g, pp->dev, ly->q_a_norm, a->q_lora, what, &L->q_a_norm, err));
        if (!L->q_a_norm)
            return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d has no query LoRA norm", l);
        snprintf(what, sizeof what, "layer %d's q_a_proj", l);
        COLI_TRY(entry(pp, tab, b + 0, ly->q_a, a->q_lora, H, pp->qa, a->q_lora, what, err));
        snprintf(what, sizeof what, "layer %d's q_b_proj", l);
        COLI_TRY(entry(pp, tab, b + 2, ly->wq, QH, a->q_lora, pp->q, QH, what, err));
        L->q_b = (launch){tab[b + 2].dt, b + 2, 1, QH, a->q_lora};
    } else {
        snprintf(what, sizeof what, "layer %d's q projection", l);
        COLI_TRY(entry(pp, tab, b + 0, ly->wq, QH, H, pp->q, QH, what, err));
    }
    snprintf(what, sizeof what, "layer %d's kv_a_proj_with_mqa", l);
    COLI_TRY(entry(pp, tab, b + 1, ly->kv_a, a->row, H, pp->ckv, a->row, what, err));
    snprintf(what, sizeof what, "layer %d's output projection", l);
    COLI_TRY(entry(pp, tab, b + 3, ly->wo, H, VD, pp->o, H, what, err));
    qkv_launches(L, tab, b, 2, H);
    L->wo = (launch){tab[b + 3].dt, b + 3, 1, H, VD};
    tensor *t = coli__gpu_lookup(pp->g, ly->kv_b);
    if (!t || t->dev != pp->dev || t->shape.rows != nh * (a->nope + a->v_dim) || t->shape.cols != a->kv_lora)
        return coli__fail(err, COLI_EINVAL, "GPU pipe: layer %d's kv_b_proj is not resident here as [%d, %d]", l,
                          nh * (a->nope + a->v_dim), a->kv_lora);
    coli__gpu_view(t, &L->kvb);
    /* head h's value rows read row t * nh + h of lat for token t */
    const int f = vb_first(n, l);
    for (int h = 0; h < nh; h++) {
        prod *pr = &tab[f + h];
        *pr = L->kvb;
        rows_view(pr, h * (a->nope + a->v_dim) + a->nope, a->v_dim);
        pr->x0 = h * pp->C;
        pr->n_tok = pp->C;
        pr->live = pp->step;
        pr->xrow = pp->xrow;
        pr->y = pp->att + (size_t)h * a->v_dim;
        pr->ys = VD;
    }
    L->vb = (launch){L->kvb.dt, f, nh, a->v_dim, a->kv_lora};
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
    if (ly->attn != COLI_ATTN_GQA && (ly->attn != COLI_ATTN_MLA || n->mla.row <= 0))
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
    if (ly->attn == COLI_ATTN_MLA) {
        COLI_TRY(build_mla(pp, tab, l, err));
    } else {
        snprintf(what, sizeof what, "layer %d's q projection", l);
        COLI_TRY(entry(pp, tab, b + 0, ly->wq, pp->QD, H, pp->q, pp->QD, what, err));
        snprintf(what, sizeof what, "layer %d's k projection", l);
        COLI_TRY(entry(pp, tab, b + 1, ly->wk, pp->KVD, H, pp->k, pp->KVD, what, err));
        snprintf(what, sizeof what, "layer %d's v projection", l);
        COLI_TRY(entry(pp, tab, b + 2, ly->wv, pp->KVD, H, pp->v, pp->KVD, what, err));
        snprintf(what, sizeof what, "layer %d's output projection", l);
        COLI_TRY(entry(pp, tab, b + 3, ly->wo, H, pp->QD, pp->o, H, what, err));
        /* q, k, v: one launch per run of one format */
        qkv_launches(L, tab, b, 3, H);
        L->wo = (launch){tab[b + 3].dt, b + 3, 1, H, pp->QD};
    }
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
    const int n_tab = n_tab_of(net), lm0 = 8 * net->n_layers; /* the output projection's two entries */
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
    if (net->mla.row > 0) { /* one cache a layer, its rows [latent ; rotary key] */
        size_t per_layer = (size_t)p->n_ctx * (size_t)net->mla.row * (pp->kv_bf16 ? 2 : 4);
        for (int l = 0; l < net->n_layers; l++)
            pp->L[l].kc = pp->L[l].vc = (char *)pp->kv_mem + (size_t)l * per_layer;
        int *xr = (int *)malloc((size_t)net->n_heads * pp->C * sizeof(int));
        if (!xr) {
            st = coli__fail(err, COLI_ENOMEM, "GPU pipe: out of host memory");
            goto fail;
        }
        for (int h = 0; h < net->n_heads; h++)
            for (int t = 0; t < pp->C; t++)
                xr[(size_t)h * pp->C + t] = t * net->n_heads + h;
        cudaError_t e = cudaMemcpy(pp->xrow, xr, (size_t)net->n_heads * pp->C * sizeof(int), cudaMemcpyHostToDevice);
        free(xr);
        FAIL_IF(e, "copying the latent attention's row table to the device");
    } else {
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
        st = entry(pp, tab, lm0, net->lm_head, net->vocab, pp->H, pp->logits, net->vocab,
                   "the output projection", err);
    if (st == COLI_OK)
        st = entry(pp, tab, lm0 + 1, net->lm_head, net->vocab, pp->H, pp->logits, net->vocab,
                   "the output projection", err);
    if (st != COLI_OK)
        goto fail;
    tab[lm0].n_tok = 1; /* the last token's row, normalised into xn[0] */
    tab[lm0].live = NULL;
    pp->lm = (launch){tab[lm0].dt, lm0, 1, net->vocab, net->hidden};
    /* every row (a verification's): the step's count caps it */
    tab[lm0 + 1].n_tok = pp->C < COLI__GPU_ALL_ROWS ? pp->C : COLI__GPU_ALL_ROWS;
    pp->lm_all = (launch){tab[lm0 + 1].dt, lm0 + 1, 1, net->vocab, net->hidden};
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
