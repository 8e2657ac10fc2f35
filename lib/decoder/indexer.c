/* indexer.c - DeepSeek sparse attention's lightning indexer (GLM-5), in
 * the written order of docs/formats.md ("Sparse attention").
 *
 * A token at position p with more than index_topk positions to see scores
 * each cached position t <= p as sum_h w_h relu(q_h . k_t / sqrt(dim)),
 * with index_n_heads query heads made from the query's LoRA and one key a
 * position, and keeps the index_topk best; the latent attention then
 * weighs the others 0. Up to index_topk positions nothing is scored: the
 * attention is the dense one, bit for bit. */
#include <math.h>
#include <string.h>

#include "decoder/indexer.h"
#include "decoder/rope.h"

#define SPACED(n) (((size_t)(n) + 15) & ~(size_t)15)

size_t coli__indexer_per_token(const coli__config *c)
{
    const coli__dsa_opts *x = &c->attn.dsa;
    if (!x->topk)
        return 0;
    return (size_t)x->heads * (size_t)x->dim + (size_t)x->dim + (size_t)x->heads + (size_t)x->topk + 1 + 64;
}

size_t coli__indexer_task(const coli__config *c, int room)
{
    const coli__dsa_opts *x = &c->attn.dsa;
    return x->topk ? ((size_t)x->heads + 2) * (size_t)room + (size_t)x->heads : 0;
}

float *coli__indexer_bufs_at(const coli__config *c, int S, float *p, coli__indexer_bufs *x)
{
    const coli__dsa_opts *o = &c->attn.dsa;
    memset(x, 0, sizeof *x);
    if (!o->topk)
        return p;
    x->q = p;
    p += SPACED((size_t)S * (size_t)o->heads * (size_t)o->dim);
    x->k = p;
    p += SPACED((size_t)S * (size_t)o->dim);
    x->w = p;
    p += SPACED((size_t)S * (size_t)o->heads);
    x->sel = (int *)p;
    return p + SPACED((size_t)S * ((size_t)o->topk + 1));
}

coli_status coli__indexer_load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    const coli__dsa_opts *x = &c->attn.dsa;
    if (!x->topk || !x->full[l])
        return COLI_OK;
    COLI_TRY(L->mat(L->L, &ly->idx_wq, COLI_T_IDX_WQ, l, x->heads * x->dim, c->attn.mla.q_lora, COLI_MAT_BIG,
                    COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->idx_wk, COLI_T_IDX_WK, l, x->dim, c->hidden, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->vec(L->L, &ly->idx_k_norm, COLI_T_IDX_K_NORM, l, x->dim));
    COLI_TRY(L->vec(L->L, &ly->idx_k_bias, COLI_T_IDX_K_BIAS, l, x->dim));
    return L->mat(L->L, &ly->idx_w, COLI_T_IDX_W, l, x->heads, c->hidden, COLI_MAT_BIG, COLI_ROLE_DENSE);
}

/* LayerNorm with weight and bias, eps 1e-6 (transformers' nn.LayerNorm of
 * the indexer): mean and variance as plain sums from +0 in increasing i,
 * each divided by n; y_i = ((x_i - mean) * r) * w_i + b_i, r = 1 / sqrtf(
 * var + eps). */
static void layer_norm(float *v, const float *w, const float *bias, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += v[i];
    const float mean = s / (float)n;
    float q = 0.0f;
    for (int i = 0; i < n; i++) {
        float d = v[i] - mean;
        q += d * d;
    }
    const float r = 1.0f / sqrtf(q / (float)n + 1e-6f);
    for (int i = 0; i < n; i++)
        v[i] = ((v[i] - mean) * r) * w[i] + bias[i];
}

coli_status coli__indexer_project(coli__pass *b, const coli__layer *ly, const float *qa, const coli__indexer_bufs *x)
{
    const coli__config *c = b->d->cfg;
    const coli__dsa_opts *o = &c->attn.dsa;
    const int S = b->S, R = c->attn.mla.rope, D = o->dim, NH = o->heads;
    coli__mm in[3] = {
        {.w = &ly->idx_wk, .x = b->xn, .n_tok = S, .y = x->k},
        {.w = &ly->idx_w, .x = b->xn, .n_tok = S, .y = x->w},
        {.w = &ly->idx_wq, .x = qa, .n_tok = S, .y = x->q},
    };
    COLI_TRY(coli__pass_mm_multi(b, in, 3));
    /* transformers: the weights times index_n_heads ** -0.5, after the product */
    const float wf = (float)pow((double)NH, -0.5);
    float tmp[2 * 4096];
    for (int t = 0; t < S; t++) {
        const float *cs = b->rope + (size_t)t * c->head_dim;
        float *k = x->k + (size_t)t * D;
        layer_norm(k, ly->idx_k_norm, ly->idx_k_bias, D);
        /* interleaved pairs on the first qk_rope_head_dim values, as the
         * latent attention's */
        coli__rope_deinterleave(k, R, tmp);
        coli__rope(k, R, cs);
        for (int h = 0; h < NH; h++) {
            float *q = x->q + ((size_t)t * NH + (size_t)h) * D;
            coli__rope_deinterleave(q, R, tmp);
            coli__rope(q, R, cs);
            x->w[(size_t)t * NH + (size_t)h] *= wf;
        }
    }
    return COLI_OK;
}

/* The k-th largest (k in [1, n]) of a[0..n), which it reorders. */
static float kth_largest(float *a, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float m = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > m)
                i++;
            while (a[j] < m)
                j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return a[want];
    }
    return a[want];
}

typedef struct select_job {
    coli__pass *b;
    const coli__seg *sg;
    int l, room;
    const coli__indexer_bufs *x;
    float *task;
} select_job;

/* The choice of one token: its scores, then the topk best (docs/formats.md:
 * the largest scores; of equal scores at the cut, the later positions). */
static void choose(const select_job *j, int t, float *task)
{
    const coli__seg *sg = j->sg;
    const coli__config *c = j->b->d->cfg;
    const coli__dsa_opts *o = &c->attn.dsa;
    const int NH = o->heads, D = o->dim, K = o->topk, rm = j->room;
    const int n = sg->pos0 + (t - sg->t0) + 1;
    int *sel = j->x->sel + (size_t)t * ((size_t)K + 1);
    if (n <= K) {
        sel[0] = -1; /* every position: the dense attention */
        return;
    }
    const coli__kv *kv = sg->kv;
    const size_t es = kv->dt == COLI_DT_BF16 ? 2 : 4;
    const char *keys = (const char *)coli__kv_rows(kv, j->l, 0, 0) + (size_t)(kv->hd - D) * es;
    float *sc = task, *mx = sc + (size_t)NH * rm, *score = mx + NH, *copy = score + rm;
    for (int h = 0; h < NH; h++)
        mx[h] = -INFINITY;
    const float scale = (float)pow((double)D, -0.5);
    coli__attn_scores(j->b->d->cpuk, j->x->q + (size_t)t * NH * D, NH, D, keys, kv->dt, (size_t)kv->hd, n, scale, sc,
                      (size_t)rm, mx, NULL);
    /* relu, then sum_h w_h relu_h from +0 in increasing h, one fma each */
    memset(score, 0, (size_t)n * sizeof(float));
    const float *w = j->x->w + (size_t)t * NH;
    for (int h = 0; h < NH; h++) {
        float *r = sc + (size_t)h * rm;
        for (int i = 0; i < n; i++)
            r[i] = r[i] > 0.0f ? r[i] : 0.0f;
        coli__axpy(j->b->d->cpuk, score, w[h], r, n);
    }
    for (int i = 0; i < n; i++) {
        if (score[i] != score[i])
            score[i] = -INFINITY; /* a NaN counts as -inf */
        copy[i] = score[i];
    }
    const float cut = kth_largest(copy, n, K);
    int above = 0;
    for (int i = 0; i < n; i++)
        above += score[i] > cut;
    /* K - above of the scores equal to cut, the latest ones */
    int ties = K - above, from = n;
    while (ties > 0) {
        from--;
        ties -= score[from] == cut;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (score[i] > cut || (score[i] == cut && i >= from))
            sel[1 + m++] = i;
    sel[0] = m; /* K */
}

static void select_tokens(void *arg, int64_t lo, int64_t hi, int thread)
{
    const select_job *j = arg;
    float *task = j->task + (size_t)thread * coli__indexer_task(j->b->d->cfg, j->room);
    for (int64_t t = lo; t < hi; t++)
        choose(j, j->sg->t0 + (int)t, task);
}

void coli__indexer_select(coli__pass *b, int l, const coli__indexer_bufs *x, float *task)
{
    for (int s = 0; s < b->n_seg; s++) {
        const coli__seg *sg = &b->seg[s];
        select_job j = {.b = b, .sg = sg, .l = l, .room = coli__pass_room(sg->pos0 + sg->n, sg->kv->n_ctx), .x = x,
                        .task = task};
        coli__pool_run(b->pool, sg->n, 1, select_tokens, &j);
    }
}

float coli__indexer_mask(const int *sel, float *sc, int n)
{
    float mx = -INFINITY;
    int next = 0;
    const int m = sel[0];
    for (int i = 0; i < n; i++) {
        if (next < m && sel[1 + next] == i) {
            next++;
            mx = sc[i] > mx ? sc[i] : mx;
        } else {
            sc[i] = -INFINITY;
        }
    }
    return mx;
}
