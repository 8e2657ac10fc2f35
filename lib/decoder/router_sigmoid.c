/* router_sigmoid.c - the router of GLM-4.5 and DeepSeek-V3: a sigmoid
 * score per expert, a correction bias added for choosing only, the
 * choice limited to the best groups of experts, and the chosen experts'
 * unbiased scores, renormalised (router.norm_topk_prob) and scaled
 * (router.scale), in the written order of docs/formats.md. */
#include <math.h>
#include <string.h>

#include "cpu/silu.h"
#include "decoder/pieces.h"
#include "decoder/router_sigmoid.h"


/* The biased score of expert e, or -inf outside the kept groups. */
static float choice(const float *s, const float *bias, const unsigned char *kept, int per, int e)
{
    return kept[e / per] ? s[e] + bias[e] : -INFINITY;
}

/* Index of the largest of v[0..n) not yet taken (first on ties), or -1. */
static int best_of(const float *v, int n, const unsigned char *taken)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best]))
            best = i;
    return best;
}

void coli__sigmoid_choose(const coli__router_opts *o, const float *s, const float *bias, int E, int K, float *cv,
                          unsigned char *taken, int *sel, float *w)
{
    const int ng = o->n_group, per = E / ng;
    unsigned char kept[COLI__MAX_GROUPS];
    for (int g = 0; g < ng; g++)
        kept[g] = 1;
    if (o->topk_group < ng) {
        /* a group's score: the sum of its two largest biased scores */
        float gs[COLI__MAX_GROUPS];
        unsigned char gtaken[COLI__MAX_GROUPS] = {0};
        for (int g = 0; g < ng; g++) {
            const float *v = s + (size_t)g * per, *b = bias + (size_t)g * per;
            coli__top2 t = {-INFINITY, -INFINITY};
            for (int i = 0; i < per; i++)
                coli__top2_add(&t, v[i] + b[i]);
            gs[g] = coli__top2_score(&t, per);
            kept[g] = 0;
        }
        for (int j = 0; j < o->topk_group; j++) {
            int g = best_of(gs, ng, gtaken);
            gtaken[g] = 1;
            kept[g] = 1;
        }
    }
    for (int e = 0; e < E; e++) {
        cv[e] = choice(s, bias, kept, per, e);
        taken[e] = 0;
    }
    for (int j = 0; j < K; j++) {
        int e = best_of(cv, E, taken);
        taken[e] = 1;
        sel[j] = e;
        w[j] = s[e];
    }
    if (o->norm_topk_prob) {
        float sum = 0;
        for (int j = 0; j < K; j++)
            sum += w[j];
        sum += 1e-20f;
        for (int j = 0; j < K; j++)
            w[j] /= sum;
    }
    for (int j = 0; j < K; j++)
        w[j] *= o->scale;
}

static coli_status route(coli__pass *b, const coli__layer *ly, int *sel_all, float *w_all)
{
    const coli__config *c = b->d->cfg;
    const int E = c->n_experts, K = c->top_k;
    if (c->router.n_group > COLI__MAX_GROUPS)
        return coli__fail(b->err, COLI_EUNSUPPORTED, "n_group = %d: at most %d expert groups", c->router.n_group,
                          COLI__MAX_GROUPS);
    COLI_TRY(coli__pass_mm(b, &ly->router, b->xn, b->S, b->rl));
    /* scratch for the biased scores and the taken flags: past the
     * logits (lib/decoder/forward.c sizes rl so) */
    float *cv = b->rl + (size_t)b->S * E;
    unsigned char *taken = (unsigned char *)(cv + E);
    for (int t = 0; t < b->S; t++) {
        float *s = b->rl + (size_t)t * E;
        for (int e = 0; e < E; e++)
            s[e] = coli__sigmoid(s[e]);
        coli__sigmoid_choose(&c->router, s, ly->router_bias, E, K, cv, taken, sel_all + (size_t)t * K, w_all + (size_t)t * K);
    }
    return COLI_OK;
}

/* The lookahead's guess: the same scores and choice, one token. */
static coli_status guess(const coli__decoder *d, coli__pool *pool, const coli__layer *ly, const float *xn, float *rl,
                         int *sel, float *w)
{
    const coli__config *c = d->cfg;
    const int E = c->n_experts;
    if (c->router.n_group > COLI__MAX_GROUPS)
        return COLI_OK; /* route refuses it */
    float *cv = rl + E;
    unsigned char *taken = (unsigned char *)(cv + E);
    COLI_TRY(coli__matmul(d->cpuk, pool, &ly->router, xn, 1, rl));
    for (int e = 0; e < E; e++)
        rl[e] = coli__sigmoid(rl[e]);
    coli__sigmoid_choose(&c->router, rl, ly->router_bias, E, c->top_k, cv, taken, sel, w);
    return COLI_OK;
}

/* The router and its correction bias. */
static coli_status load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    COLI_TRY(L->mat(L->L, &ly->router, COLI_T_ROUTER, l, c->n_experts, c->hidden, COLI_MAT_KEEP, COLI_ROLE_DENSE));
    return L->vec(L->L, &ly->router_bias, COLI_T_ROUTER_BIAS, l, c->n_experts);
}

static void describe(const coli__describer *D, const coli__config *c, const coli__layer *ly, int *router,
                     coli__gpu_route *rt)
{
    *router = D->mat(D->D, &ly->router);
    coli__route_options(c, COLI_ROUTER_SIGMOID_GROUP, rt);
    rt->bias = D->vec(D->D, ly->router_bias, c->n_experts);
}

const coli__router_piece coli__router_sigmoid_group = {
    .name = "sigmoid",
    .load = load,
    .describe = describe,
    .route = route,
    .guess = guess,
};
