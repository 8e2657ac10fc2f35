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
    /* the four buffers, each rounded up to 16 floats by SPACED */
    return (size_t)x->heads * (size_t)x->dim + (size_t)x->dim + (size_t)x->heads + (size_t)x->topk + 1 + 4 * 15;
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

/* Positions a scoring task takes: decoding one token, the threads share
 * its positions; each position's score is computed alone, so the split
 * changes no bit. */
#define BLOCK 256

typedef struct select_job {
    coli__pass *b;
    const coli__seg *sg;
    int l, room, t0, n_tok, n_blocks; /* the wave: tokens t0 .. t0 + n_tok of the segment */
    const coli__indexer_bufs *x;
    float *task;
} select_job;

static size_t work_floats(const coli__config *c, int room)
{
    const size_t a = (size_t)c->attn.dsa.heads * (BLOCK + 1);
    return a > (size_t)room ? a : (size_t)room;
}

size_t coli__indexer_task(const coli__config *c, int room)
{
    return c->attn.dsa.topk ? (size_t)room + work_floats(c, room) : 0;
}

/* Positions a token of the segment sees. */
static int seen(const select_job *j, int t)
{
    return j->sg->pos0 + (t - j->sg->t0) + 1;
}

/* The wave's i-th token's row of scores (in thread i's part of the
 * scratch), and thread k's work area. */
static float *score_row(const select_job *j, int i)
{
    return j->task + (size_t)i * coli__indexer_task(j->b->d->cfg, j->room);
}

static float *work_of(const select_job *j, int k)
{
    return score_row(j, k) + j->room;
}

/* The scores of one token's positions [p0, p1): s_h = relu(dot(q_h, k_t)
 * / sqrt(dim)), then sum_h w_h s_h from +0 in increasing h, one fma each
 * (docs/formats.md); a NaN counts as -inf. */
static void score_block(void *arg, int64_t lo, int64_t hi, int thread)
{
    const select_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const coli__dsa_opts *o = &c->attn.dsa;
    const int NH = o->heads, D = o->dim;
    const coli__kv *kv = j->sg->kv;
    const float scale = (float)pow((double)D, -0.5);
    float *sc = work_of(j, thread), *mx = sc + (size_t)NH * BLOCK;
    for (int64_t it = lo; it < hi; it++) {
        const int i = (int)(it / j->n_blocks), t = j->t0 + i, n = seen(j, t);
        const int p0 = (int)(it % j->n_blocks) * BLOCK, p1 = p0 + BLOCK < n ? p0 + BLOCK : n;
        if (n <= o->topk || p0 >= n)
            continue;
        for (int h = 0; h < NH; h++)
            mx[h] = -INFINITY;
        /* the indexer's key ends each cache row */
        coli__attn_scores(j->b->d->cpuk, j->x->q + (size_t)t * NH * D, NH, D, coli__kv_key_at(kv, j->l, 0, p0, kv->hd - D),
                          kv->dt, (size_t)kv->hd, p1 - p0, scale, sc, BLOCK, mx, NULL);
        float *score = score_row(j, i) + p0;
        memset(score, 0, (size_t)(p1 - p0) * sizeof(float));
        const float *w = j->x->w + (size_t)t * NH;
        for (int h = 0; h < NH; h++) {
            float *r = sc + (size_t)h * BLOCK;
            for (int k = 0; k < p1 - p0; k++)
                r[k] = r[k] > 0.0f ? r[k] : 0.0f;
            coli__axpy(j->b->d->cpuk, score, w[h], r, p1 - p0);
        }
        for (int k = 0; k < p1 - p0; k++)
            if (score[k] != score[k])
                score[k] = -INFINITY;
    }
}

/* The choice of one token from its scores: the topk best (docs/formats.md:
 * the largest scores; of equal scores at the cut, the later positions). */
static void choose(void *arg, int64_t lo, int64_t hi, int thread)
{
    const select_job *j = arg;
    const int K = j->b->d->cfg->attn.dsa.topk;
    float *copy = work_of(j, thread);
    for (int64_t i = lo; i < hi; i++) {
        const int t = j->t0 + (int)i, n = seen(j, t);
        int *sel = j->x->sel + (size_t)t * ((size_t)K + 1);
        if (n <= K) {
            sel[0] = -1; /* every position: the dense attention */
            continue;
        }
        const float *score = score_row(j, (int)i);
        memcpy(copy, score, (size_t)n * sizeof(float));
        const float cut = kth_largest(copy, n, K);
        int above = 0;
        for (int p = 0; p < n; p++)
            above += score[p] > cut;
        /* K - above of the scores equal to cut, the latest ones */
        int ties = K - above, from = n;
        while (ties > 0) {
            from--;
            ties -= score[from] == cut;
        }
        int m = 0;
        for (int p = 0; p < n; p++)
            if (score[p] > cut || (score[p] == cut && p >= from))
                sel[1 + m++] = p;
        sel[0] = m; /* K */
    }
}

void coli__indexer_select(coli__pass *b, int l, const coli__indexer_bufs *x, float *task)
{
    const int W = coli__pool_size(b->pool); /* tokens a wave: one score row a thread */
    for (int s = 0; s < b->n_seg; s++) {
        const coli__seg *sg = &b->seg[s];
        const int room = coli__pass_room(sg->pos0 + sg->n, sg->kv->n_ctx);
        for (int t0 = sg->t0; t0 < sg->t0 + sg->n; t0 += W) {
            const int n_tok = sg->t0 + sg->n - t0 < W ? sg->t0 + sg->n - t0 : W;
            select_job j = {.b = b, .sg = sg, .l = l, .room = room, .t0 = t0, .n_tok = n_tok,
                            .n_blocks = (sg->pos0 + (t0 + n_tok - sg->t0) + BLOCK - 1) / BLOCK, .x = x, .task = task};
            coli__pool_run(b->pool, (int64_t)n_tok * j.n_blocks, 1, score_block, &j);
            coli__pool_run(b->pool, n_tok, 1, choose, &j);
        }
    }
}

const int *coli__indexer_choice(const coli__config *c, const coli__indexer_bufs *x, int t)
{
    if (!c->attn.dsa.topk)
        return NULL;
    const int *sel = x->sel + (size_t)t * ((size_t)c->attn.dsa.topk + 1);
    return sel[0] >= 0 ? sel : NULL;
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
