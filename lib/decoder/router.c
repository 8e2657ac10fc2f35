/* router.c - the router of Qwen3-MoE, OLMoE and Mixtral: softmax over
 * every expert's logit, the top_k largest, and (router.norm_topk_prob)
 * their weights renormalised to sum to one: transformers' operations in
 * the written order of docs/formats.md. */
#include <math.h>
#include <string.h>

#include "cpu/silu.h"
#include "decoder/pieces.h"

/* Top-k of router probabilities, highest first; ties keep the lower index. */
static void topk(const float *prob, int n, int k, int *sel, float *w)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int q = 0; q < j; q++)
                taken |= sel[q] == e;
            if (!taken && (best < 0 || prob[e] > prob[best]))
                best = e;
        }
        sel[j] = best;
        w[j] = prob[best];
    }
}

static coli_status route(coli__pass *b, const coli__layer *ly, int *sel_all, float *w_all)
{
    const coli__config *c = b->d->cfg;
    const int E = c->n_experts, K = c->top_k;
    COLI_TRY(coli__pass_mm(b, &ly->router, b->xn, b->S, b->rl));
    for (int t = 0; t < b->S; t++) {
        float *rl = b->rl + (size_t)t * E;
        /* the written order of docs/formats.md: e of lib/cpu/silu.h, sum32,
         * one division each */
        float mx = -INFINITY;
        for (int e = 0; e < E; e++)
            mx = rl[e] > mx ? rl[e] : mx;
        for (int e = 0; e < E; e++)
            rl[e] = coli__exp_f32(rl[e] - mx);
        float sum = coli__sum32(rl, E);
        for (int e = 0; e < E; e++)
            rl[e] = rl[e] / sum;
        int *sel = sel_all + (size_t)t * K;
        float *w = w_all + (size_t)t * K;
        topk(rl, E, K, sel, w);
        if (c->router.norm_topk_prob) {
            float s = 0;
            for (int j = 0; j < K; j++)
                s += w[j];
            for (int j = 0; j < K; j++)
                w[j] /= s;
        }
    }
    return COLI_OK;
}

static coli_status guess(const coli__decoder *d, coli__pool *pool, const coli__layer *ly, const float *xn, float *rl,
                         int *sel, float *w)
{
    COLI_TRY(coli__matmul(d->cpuk, pool, &ly->router, xn, 1, rl));
    /* the largest logits are the largest probabilities */
    topk(rl, d->cfg->n_experts, d->cfg->top_k, sel, w);
    return COLI_OK;
}

static coli_status load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    return L->mat(L->L, &ly->router, COLI_T_ROUTER, l, c->n_experts, c->hidden, COLI_MAT_KEEP, COLI_ROLE_DENSE);
}

void coli__route_options(const coli__config *c, coli__router_kind kind, coli__gpu_route *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->kind = kind;
    rt->norm_topk = c->router.norm_topk_prob;
    rt->bias = -1;
    rt->n_group = c->router.n_group;
    rt->topk_group = c->router.topk_group;
    rt->scale = c->router.scale;
}

static void describe(const coli__describer *D, const coli__config *c, const coli__layer *ly, int *router,
                     coli__gpu_route *rt)
{
    *router = D->mat(D->D, &ly->router);
    coli__route_options(c, COLI_ROUTER_SOFTMAX_TOPK, rt);
}

const coli__router_piece coli__router_softmax_topk = {
    .name = "softmax",
    .load = load,
    .describe = describe,
    .route = route,
    .guess = guess,
};
