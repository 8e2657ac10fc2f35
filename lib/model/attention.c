/* attention.c - grouped-query attention: q/k/v projections, the family's
 * q/k norm (per head or over the whole projection), clipping, RoPE, the
 * KV cache, causal softmax attention (optionally within a sliding window)
 * and the output projection. Each option is a field of the config's attn,
 * not a branch elsewhere. */
#include <math.h>
#include <string.h>

#include "model/norm.h"
#include "model/pieces.h"
#include "model/rope.h"

typedef struct attn_job {
    const coli__config *c;
    const float *q;       /* [S, nh*hd] */
    float *out;           /* [S, nh*hd] */
    const void *kc, *vc;  /* this layer's cache: [n_ctx, kv_dim] of dt */
    coli__dtype dt;
    int kv_dim, pos0, S;
    float *scores;        /* per thread: n_ctx */
    int n_ctx;
    const coli__cpuk *k;  /* the model's kernel set */
} attn_job;

static void attn_task(void *arg, int64_t b, int64_t e, int thread)
{
    attn_job *j = arg;
    const coli__config *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const int window = c->attn.sliding_window;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = j->scores + (size_t)thread * (size_t)j->n_ctx;
    for (int64_t it = b; it < e; it++) {
        int t = (int)(it / nh), h = (int)(it % nh);
        int pos = j->pos0 + t;
        int lo = 0;
        if (window > 0 && pos - window + 1 > 0)
            lo = pos - window + 1;
        const float *q = j->q + (size_t)t * (size_t)(nh * hd) + (size_t)h * hd;
        size_t first = ((size_t)lo * (size_t)j->kv_dim + (size_t)(h / group) * hd) * (j->dt == COLI_DT_BF16 ? 2 : 4);
        int n = pos - lo + 1;
        coli__attn_scores(j->k, q, (const char *)j->kc + first, j->dt, (size_t)j->kv_dim, n, hd, scale, sc);
        coli__attn_softmax(j->k, sc, n);
        float *o = j->out + (size_t)t * (size_t)(nh * hd) + (size_t)h * hd;
        coli__attn_mix(j->k, o, sc, (const char *)j->vc + first, j->dt, (size_t)j->kv_dim, n, hd);
    }
}

static void clip(float *v, int n, float m)
{
    for (int i = 0; i < n; i++)
        v[i] = v[i] < -m ? -m : v[i] > m ? m : v[i];
}

/* One token's q [nh*hd] and k [nkv*hd] after the projections. */
static void qk_norm(const coli__cpuk *ks, const coli__config *c, const coli__layer *ly, float *q, float *k)
{
    const int hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    switch (c->attn.qk_norm) {
    case COLI_QK_NORM_FULL:
        coli__rmsnorm(ks, q, q, ly->q_norm, nh * hd, c->rms_eps);
        coli__rmsnorm(ks, k, k, ly->k_norm, nkv * hd, c->rms_eps);
        break;
    case COLI_QK_NORM_HEAD:
        for (int h = 0; h < nh; h++)
            coli__rmsnorm(ks, q + (size_t)h * hd, q + (size_t)h * hd, ly->q_norm, hd, c->rms_eps);
        for (int h = 0; h < nkv; h++)
            coli__rmsnorm(ks, k + (size_t)h * hd, k + (size_t)h * hd, ly->k_norm, hd, c->rms_eps);
        break;
    case COLI_QK_NORM_NONE:
        break;
    }
}

static coli_status gqa(coli__pass *b, const coli__layer *ly, int l, const coli__mat *then)
{
    const coli__config *c = &b->m->cfg;
    coli__kv *kv = b->kv;
    const int S = b->S, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int QD = nh * hd, KVD = nkv * hd;
    coli__mm qkv[3] = {
        {.w = &ly->wq, .x = b->xn, .n_tok = S, .y = b->q},
        {.w = &ly->wk, .x = b->xn, .n_tok = S, .y = b->k},
        {.w = &ly->wv, .x = b->xn, .n_tok = S, .y = b->v},
    };
    COLI_TRY(coli__pass_mm_multi(b, qkv, 3));
    for (int t = 0; t < S; t++) {
        float *q = b->q + (size_t)t * QD, *k = b->k + (size_t)t * KVD, *v = b->v + (size_t)t * KVD;
        qk_norm(b->m->cpuk, c, ly, q, k);
        if (c->attn.clip_qkv > 0) {
            clip(q, QD, c->attn.clip_qkv);
            clip(k, KVD, c->attn.clip_qkv);
            clip(v, KVD, c->attn.clip_qkv);
        }
        for (int h = 0; h < nh; h++)
            coli__rope(q + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
        for (int h = 0; h < nkv; h++)
            coli__rope(k + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
        coli__kv_store(kv, l, b->pos0 + t, k, v);
    }
    attn_job aj = {
        .c = c,
        .q = b->q,
        .out = b->att,
        .kc = coli__kv_layer(kv, l, 0),
        .vc = coli__kv_layer(kv, l, 1),
        .dt = kv->dt,
        .kv_dim = KVD,
        .pos0 = b->pos0,
        .S = S,
        .scores = b->scores,
        .n_ctx = kv->n_ctx,
        .k = b->m->cpuk,
    };
    const coli__mat *after[2] = {&ly->wo, then};
    coli__matmul_hint(b->pool, after, 2, 0);
    coli__pool_run(b->pool, (int64_t)S * nh, 1, attn_task, &aj);
    return coli__pass_mm(b, &ly->wo, b->att, S, b->o);
}

const coli__attn_piece coli__attn_gqa = {
    .run = gqa,
};
