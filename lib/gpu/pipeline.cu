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
 * bits whatever runs where. The pipe is made in pipe_build.cu (pipe.h). */
#include "gpu/compat.h"

#include <stdio.h>

#include "gpu/pipe.h"

/* ---- a step ----------------------------------------------------------------- */

/* Phases of coli_gpu_phase_name (lib/tier/device.c names them). */
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

/* An attention of the pipe's scores and parts: nh heads of q over the
 * caches kc and vc (coli__att_args), into out (quantized too with quant). */
static coli__att_args att_args(coli__gpu_pipe *pp, const float *q, const void *kc, const void *vc, int nh, int nkv,
                               int hd, int vd, int rs, int window, float scale, float *out, int quant)
{
    coli__att_args a;
    memset(&a, 0, sizeof a);
    a.q = q;
    a.kc = kc;
    a.vc = vc;
    a.kv_bf16 = pp->kv_bf16;
    a.nh = nh;
    a.nkv = nkv;
    a.hd = hd;
    a.vd = vd;
    a.rs = rs;
    a.window = window;
    a.sc_cap = pp->sc_cap;
    a.scale = scale;
    a.scores = pp->scores;
    a.part = pp->part;
    a.out = out;
    a.step = pp->step;
    a.quant = qout(pp, quant);
    return a;
}

/* Layer l's latent attention (docs/formats.md "Latent attention") of S
 * tokens after its first products (the query's first, the latent's)
 * from xn: the heads' outputs side by side in att. */
static coli_status mla(coli__gpu_pipe *pp, cudaStream_t s, int l, int S, int max_pos, coli__err *err)
{
    pl_layer *L = &pp->L[l];
    const coli__gpu_mla *a = &pp->net.mla;
    const int nh = pp->net.n_heads;
    if (a->q_lora) { /* the LoRA normed in place, then q_b_proj */
        coli__qout q = qout(pp, coli__is_quant(L->q_b.dt));
        COLI_TRY(coli__k_norm(s, pp->qa, NULL, L->q_a_norm, a->q_lora, a->eps, pp->step, S, 0, pp->qa, &q, err));
        COLI_TRY(products(pp, s, &L->q_b, S, pp->qa, 0, err));
    }
    mark(pp, s, PH_QKV);
    coli__mla_args ma;
    memset(&ma, 0, sizeof ma);
    ma.ckv = pp->ckv;
    ma.kv_norm = L->kv_a_norm;
    ma.q = pp->q;
    ma.qc = pp->qc;
    ma.cache = L->kc;
    ma.kv_bf16 = pp->kv_bf16;
    ma.nh = nh;
    ma.kv_lora = a->kv_lora;
    ma.rope = a->rope;
    ma.nope = a->nope;
    ma.v_dim = a->v_dim;
    ma.row = a->row;
    ma.interleave = a->interleave;
    ma.eps = a->eps;
    ma.rope_cs = pp->rope;
    ma.kvb = L->kvb;
    ma.step = pp->step;
    COLI_TRY(coli__k_mla_rotate_store(s, &ma, S, err));
    COLI_TRY(coli__k_mla_absorb(s, &ma, S, err));
    /* one KV head: keys the cached rows, values their latents */
    const coli__att_args aa = att_args(pp, pp->qc, L->kc, L->kc, nh, 1, a->row, a->kv_lora, a->row, 0, a->scale,
                                       pp->lat, 0);
    COLI_TRY(coli__k_attention(s, &aa, S, max_pos, err));
    /* each head's value rows over its mix, quantized as an activation */
    if (coli__is_quant(L->vb.dt))
        COLI_TRY(quantize(pp, s, pp->lat, S * nh, a->kv_lora, err));
    return products(pp, s, &L->vb, S, pp->lat, 0, err);
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
        if (L->mla) {
            COLI_TRY(mla(pp, s, l, S, max_pos, err));
        } else {
            coli__qkv_args qa = {pp->q,      pp->k,         pp->v,       L->bq,    L->bk,  L->bv,
                                 L->q_norm,  L->k_norm,     L->qk_norm,  L->clip,  n->n_heads, n->n_kv_heads,
                                 n->head_dim, pp->rot,      n->eps,      pp->rope, L->kc,  L->vc,
                                 pp->kv_bf16, pp->step};
            /* the output projection reads the heads quantized by the attention */
            const coli__att_args aa = att_args(pp, pp->q, L->kc, L->vc, n->n_heads, n->n_kv_heads, n->head_dim,
                                               n->head_dim, pp->KVD, L->window, 1.0f / sqrtf((float)n->head_dim),
                                               pp->att, coli__is_quant(L->wo.dt));
            if (coli__k_qkv_attention_fits(&qa, S, max_pos)) { /* decode: one launch for both */
                mark(pp, s, PH_QKV);
                COLI_TRY(coli__k_qkv_attention(s, &qa, &aa, err));
            } else {
                COLI_TRY(coli__k_qkv(s, &qa, S, err));
                mark(pp, s, PH_QKV);
                COLI_TRY(coli__k_attention(s, &aa, S, max_pos, err));
            }
        }
        mark(pp, s, PH_ATTN);
        if (coli__is_quant(L->wo.dt) && (L->mla || n->head_dim % QK))
            COLI_TRY(quantize(pp, s, pp->att, S, L->wo.cols, err));
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
