/* forward.c - one decoder stack for Qwen3-MoE, OLMoE and Mixtral.
 *
 * Activations are f32 throughout and follow transformers' order of
 * operations (RMSNorm in f32, rotate-half RoPE, softmax attention, router
 * softmax then top-k), so f32 weights reproduce its float32 results. Tokens
 * are processed in chunks; within a chunk every weight row is loaded once and
 * applied to all tokens. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/experts.h"
#include "model/forward.h"
#include "cpu/silu.h"

#define CHUNK 64 /* tokens per pass; bounds scratch memory */

coli_status coli__kv_init(coli__kv *kv, const coli__config *c, int n_ctx, coli__err *err)
{
    memset(kv, 0, sizeof *kv);
    kv->n_ctx = n_ctx;
    kv->kv_dim = c->n_kv_heads * c->head_dim;
    size_t n = (size_t)c->n_layers * (size_t)n_ctx * (size_t)kv->kv_dim;
    if (n / (size_t)n_ctx != (size_t)c->n_layers * (size_t)kv->kv_dim)
        return coli__fail(err, COLI_ERANGE, "option context: %d positions overflow the KV cache size", n_ctx);
    kv->k = malloc(n * sizeof(float));
    kv->v = malloc(n * sizeof(float));
    if (!kv->k || !kv->v) {
        coli__kv_free(kv);
        return coli__fail(err, COLI_ENOMEM, "option context: no memory for a KV cache of %d positions (%zu MiB)",
                          n_ctx, (2 * n * sizeof(float)) >> 20);
    }
    return COLI_OK;
}

void coli__kv_free(coli__kv *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

void coli__scratch_free(coli__scratch *s)
{
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    /* eight partial sums in a fixed order: one chain of n dependent
     * double additions took 4 cycles an element */
    double p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            p[l] += (double)x[i + l] * x[i + l];
    double ss = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
    for (; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}

/* The cosines and sines of RoPE at position pos: cs[i], cs[half + i] for
 * the frequency of pair i (rot/2 pairs). Made once per token, not once per
 * head and layer. */
static void rope_table(float *cs, int rot, int pos, double theta)
{
    int half = rot / 2;
    for (int i = 0; i < half; i++) {
        /* transformers computes the frequencies in float32 */
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)rot);
        float ang = (float)pos * inv;
        cs[i] = cosf(ang);
        cs[half + i] = sinf(ang);
    }
}

/* Rotate-half RoPE on the first rot dims of a head vector. */
static void rope(float *v, int rot, const float *cs)
{
    int half = rot / 2;
    for (int i = 0; i < half; i++) {
        float c = cs[i], s = cs[half + i];
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

/* ---- attention ------------------------------------------------------- */

typedef struct attn_job {
    const coli__config *c;
    const float *q;     /* [S, nh*hd] */
    float *out;         /* [S, nh*hd] */
    const float *kc, *vc; /* this layer's cache: [n_ctx, kv_dim] */
    int kv_dim, pos0, S;
    float *scores;      /* per thread: n_ctx */
    int n_ctx;
    const coli__cpuk *k; /* the model's kernel set */
} attn_job;

static void attn_task(void *arg, int64_t b, int64_t e, int thread)
{
    attn_job *j = arg;
    const coli__config *c = j->c;
    const int hd = c->head_dim, nh = c->n_heads, group = nh / c->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = j->scores + (size_t)thread * (size_t)j->n_ctx;
    for (int64_t it = b; it < e; it++) {
        int t = (int)(it / nh), h = (int)(it % nh);
        int pos = j->pos0 + t;
        int lo = 0;
        if (c->sliding_window > 0 && pos - c->sliding_window + 1 > 0)
            lo = pos - c->sliding_window + 1;
        const float *q = j->q + (size_t)t * (size_t)(nh * hd) + (size_t)h * hd;
        const float *kbase = j->kc + (size_t)(h / group) * hd;
        const float *vbase = j->vc + (size_t)(h / group) * hd;
        int n = pos - lo + 1;
        coli__attn_scores(j->k, q, kbase + (size_t)lo * j->kv_dim, (size_t)j->kv_dim, n, hd, scale, sc);
        float mx = -INFINITY;
        for (int p = 0; p < n; p++)
            mx = sc[p] > mx ? sc[p] : mx;
        float sum = 0;
        for (int p = 0; p < n; p++) {
            sc[p] = expf(sc[p] - mx);
            sum += sc[p];
        }
        float inv = 1.0f / sum;
        for (int p = 0; p < n; p++)
            sc[p] *= inv;
        float *o = j->out + (size_t)t * (size_t)(nh * hd) + (size_t)h * hd;
        coli__attn_mix(j->k, o, sc, vbase + (size_t)lo * j->kv_dim, (size_t)j->kv_dim, n, hd);
    }
}

/* ---- the pass ---------------------------------------------------------- */

typedef struct bufs {
    float *x, *xn, *q, *k, *v, *att, *o, *g, *u, *rl, *xe, *ye, *scores, *wts, *rope;
    int *sel, *rows, *pos, *pred;
    int pred_layer, n_pred;   /* the lookahead's guess for the next MoE layer */
    uint64_t read; /* weight bytes read by this pass */
    const struct coli_model *m;
    coli__experts_counts *counts;
    coli__err *err;
} bufs;

/* Products that also count the weight bytes they read. */
static coli_status mm(coli__pool *pool, const coli__mat *w, const float *x, int n, float *y, bufs *b)
{
    b->read += coli__mat_bytes(w);
    return coli__matmul(b->m->cpuk, pool, w, x, n, y);
}

static coli_status mm_multi(coli__pool *pool, const coli__mm *t, int n, bufs *b)
{
    for (int i = 0; i < n; i++)
        b->read += coli__mm_bytes(&t[i]);
    return coli__matmul_multi(b->m->cpuk, pool, t, n);
}

static coli_status grab(coli__scratch *s, size_t floats, coli__err *err)
{
    if (s->cap >= floats)
        return COLI_OK;
    float *p = realloc(s->p, floats * sizeof(float));
    if (!p)
        return coli__fail(err, COLI_ENOMEM, "out of memory for %zu MiB of activations", floats >> 18);
    s->p = p;
    s->cap = floats;
    return COLI_OK;
}

static coli_status layout(const coli__config *c, coli__scratch *s, int S, int n_ctx, int threads, bufs *b,
                          coli__err *err)
{
    const size_t H = (size_t)c->hidden, QD = (size_t)c->n_heads * c->head_dim;
    const size_t KV = (size_t)c->n_kv_heads * c->head_dim;
    size_t E = (size_t)(c->n_experts > 0 ? c->n_experts : 1), K = (size_t)(c->top_k > 0 ? c->top_k : 1);
    /* the MoE buffers hold every routed (token, expert) pair: S * K rows */
    size_t GI = (size_t)c->inter > K * (size_t)c->moe_inter ? (size_t)c->inter : K * (size_t)c->moe_inter;
    size_t sizes[] = {
        S * H, S * H, S * QD, S * KV, S * KV, S * QD, S * H, S * GI, S * GI, S * E, S * K * H, S * K * H,
        (size_t)threads * (size_t)n_ctx, S * K, S * (size_t)c->head_dim, S * K, S * K, S * K, K,
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 15) & ~(size_t)15; /* keep each buffer 64-byte spaced */
    COLI_TRY(grab(s, total, err));
    float *p = s->p;
    float **dst[] = {&b->x, &b->xn, &b->q, &b->k, &b->v, &b->att, &b->o, &b->g, &b->u, &b->rl,
                     &b->xe, &b->ye, &b->scores, &b->wts, &b->rope};
    size_t i = 0;
    for (; i < sizeof dst / sizeof dst[0]; i++) {
        *dst[i] = p;
        p += (sizes[i] + 15) & ~(size_t)15;
    }
    b->sel = (int *)p;
    p += (sizes[i++] + 15) & ~(size_t)15;
    b->rows = (int *)p;
    p += (sizes[i++] + 15) & ~(size_t)15;
    b->pos = (int *)p;
    p += (sizes[i++] + 15) & ~(size_t)15;
    b->pred = (int *)p;
    b->n_pred = 0;
    return COLI_OK;
}

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

static coli_status moe(const coli__config *c, const coli__layer *ly, int l, coli__pool *pool, bufs *b, int S)
{
    const int E = c->n_experts, K = c->top_k;
    COLI_TRY(mm(pool, &ly->router, b->xn, S, b->rl, b));
    for (int t = 0; t < S; t++) {
        float *rl = b->rl + (size_t)t * E;
        float mx = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++)
            mx = rl[e] > mx ? rl[e] : mx;
        for (int e = 0; e < E; e++) {
            rl[e] = expf(rl[e] - mx);
            sum += rl[e];
        }
        for (int e = 0; e < E; e++)
            rl[e] /= sum;
        int *sel = b->sel + (size_t)t * K;
        float *w = b->wts + (size_t)t * K;
        topk(rl, E, K, sel, w);
        if (c->norm_topk_prob) {
            float s = 0;
            for (int j = 0; j < K; j++)
                s += w[j];
            for (int j = 0; j < K; j++)
                w[j] /= s;
        }
    }
    /* Where each routed expert runs is lib/model/experts.c's business. */
    coli__moe_io io = {b->xn, S, b->sel, b->wts, b->xe, b->ye, b->g, b->u, b->rows, b->pos, b->o,
                       b->pred_layer, b->n_pred, b->pred};
    b->n_pred = 0;
    return coli__experts_run(b->m, l, pool, &io, &b->read, b->counts, b->err);
}

/* Streaming experts: while layer l runs, guess the next MoE layer's
 * experts by applying its norm and router to the current hidden state
 * (one token; the routing of a layer is much like the next one's) and
 * start reading them. Only reads depend on the guess, never a value. */
static coli_status lookahead(const struct coli_model *m, int l, coli__pool *pool, bufs *b, int S)
{
    const coli__config *c = &m->cfg;
    const int H = c->hidden, E = c->n_experts, K = c->top_k;
    int next = l + 1;
    while (next < c->n_layers && !c->is_moe[next])
        next++;
    /* scratch: xe is free until this layer's experts run */
    if (S != 1 || next >= c->n_layers || (size_t)K * H < (size_t)H + (size_t)E)
        return COLI_OK;
    const coli__layer *ly = &m->w.layers[next];
    float *xn = b->xe, *rl = b->xe + H;
    rmsnorm(xn, b->x, ly->ffn_norm, H, c->rms_eps);
    COLI_TRY(coli__matmul(m->cpuk, pool, &ly->router, xn, 1, rl));
    /* wts is this layer's, filled only after this */
    topk(rl, E, K, b->pred, b->wts); /* the largest logits are the largest probabilities */
    b->pred_layer = next;
    b->n_pred = K;
    return COLI_OK;
}

static coli_status dense(const coli__config *c, const coli__layer *ly, coli__pool *pool, bufs *b, int S)
{
    coli__mm t = {&ly->gate, b->xn, S, b->g, &ly->up, b->u}; /* with the SwiGLU */
    COLI_TRY(mm_multi(pool, &t, 1, b));
    return mm(pool, &ly->down, b->g, S, b->o, b);
}

static coli_status layer(const coli__config *c, const coli__layer *ly, int l, coli__kv *kv,
                         coli__pool *pool, bufs *b, int S, int pos0)
{
    const int H = c->hidden, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int QD = nh * hd, KVD = nkv * hd;
    for (int t = 0; t < S; t++)
        rmsnorm(b->xn + (size_t)t * H, b->x + (size_t)t * H, ly->attn_norm, H, c->rms_eps);
    coli__mm qkv[3] = {{&ly->wq, b->xn, S, b->q, NULL, NULL}, {&ly->wk, b->xn, S, b->k, NULL, NULL},
                       {&ly->wv, b->xn, S, b->v, NULL, NULL}};
    COLI_TRY(mm_multi(pool, qkv, 3, b));
    for (int t = 0; t < S; t++) {
        float *q = b->q + (size_t)t * QD, *k = b->k + (size_t)t * KVD, *v = b->v + (size_t)t * KVD;
        if (c->qk_norm == COLI_QK_NORM_FULL) {
            rmsnorm(q, q, ly->q_norm, QD, c->rms_eps);
            rmsnorm(k, k, ly->k_norm, KVD, c->rms_eps);
        } else if (c->qk_norm == COLI_QK_NORM_HEAD) {
            for (int h = 0; h < nh; h++)
                rmsnorm(q + (size_t)h * hd, q + (size_t)h * hd, ly->q_norm, hd, c->rms_eps);
            for (int h = 0; h < nkv; h++)
                rmsnorm(k + (size_t)h * hd, k + (size_t)h * hd, ly->k_norm, hd, c->rms_eps);
        }
        if (c->clip_qkv > 0) {
            float m = c->clip_qkv;
            for (int i = 0; i < QD; i++)
                q[i] = q[i] < -m ? -m : q[i] > m ? m : q[i];
            for (int i = 0; i < KVD; i++) {
                k[i] = k[i] < -m ? -m : k[i] > m ? m : k[i];
                v[i] = v[i] < -m ? -m : v[i] > m ? m : v[i];
            }
        }
        for (int h = 0; h < nh; h++)
            rope(q + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
        for (int h = 0; h < nkv; h++)
            rope(k + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
        size_t at = ((size_t)l * kv->n_ctx + (size_t)(pos0 + t)) * (size_t)KVD;
        memcpy(kv->k + at, k, (size_t)KVD * sizeof(float));
        memcpy(kv->v + at, v, (size_t)KVD * sizeof(float));
    }
    attn_job aj = {c, b->q, b->att, kv->k + (size_t)l * kv->n_ctx * KVD, kv->v + (size_t)l * kv->n_ctx * KVD,
                   KVD, pos0, S, b->scores, kv->n_ctx, b->m->cpuk};
    const coli__mat *after_attn[2] = {&ly->wo, ly->is_moe ? &ly->router : NULL};
    coli__matmul_hint(pool, after_attn, 2, 0);
    coli__pool_run(pool, (int64_t)S * nh, 1, attn_task, &aj);
    COLI_TRY(mm(pool, &ly->wo, b->att, S, b->o, b));
    for (size_t i = 0; i < (size_t)S * H; i++)
        b->x[i] += b->o[i];

    for (int t = 0; t < S; t++)
        rmsnorm(b->xn + (size_t)t * H, b->x + (size_t)t * H, ly->ffn_norm, H, c->rms_eps);
    if (ly->is_moe && coli__experts_lookahead(b->m))
        COLI_TRY(lookahead(b->m, l, pool, b, S));
    /* the next layer's projections, or the output's first rows */
    const coli__layer *nx = l + 1 < c->n_layers ? &b->m->w.layers[l + 1] : NULL;
    const coli__mat *next[3] = {nx ? &nx->wq : &b->m->w.lm_head, nx ? &nx->wk : NULL, nx ? &nx->wv : NULL};
    coli__matmul_hint(pool, next, 3, 0);
    COLI_TRY(ly->is_moe ? moe(c, ly, l, pool, b, S) : dense(c, ly, pool, b, S));
    for (size_t i = 0; i < (size_t)S * H; i++)
        b->x[i] += b->o[i];
    return COLI_OK;
}

coli_status coli__forward(const struct coli_model *m, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                          const int32_t *tokens, int n, int pos0, float *logits, uint64_t *bytes_read,
                          coli__experts_counts *counts, coli__err *err)
{
    uint64_t read = 0;
    const coli__config *c = &m->cfg;
    const coli__weights *w = &m->w;
    const int H = c->hidden;
    for (int done = 0; done < n;) {
        int S = n - done < CHUNK ? n - done : CHUNK;
        bufs b;
        COLI_TRY(layout(c, s, S, kv->n_ctx, coli__pool_size(pool), &b, err));
        b.m = m;
        b.counts = counts;
        b.err = err;
        /* norms, and one embedding row per token unless the output
         * projection reads the whole embedding matrix anyway (tied) */
        b.read = 4 * (uint64_t)w->n_vec_params;
        if (w->lm_head.data != w->embed.data || w->lm_head.dt != w->embed.dt)
            b.read += (uint64_t)S * (coli__mat_bytes(&w->embed) / (uint64_t)c->vocab);
        for (int t = 0; t < S; t++) {
            coli__mat_row(&w->embed, tokens[done + t], b.x + (size_t)t * H);
            rope_table(b.rope + (size_t)t * c->head_dim, c->rot_dim, pos0 + done + t, c->rope_theta);
        }
        for (int l = 0; l < c->n_layers; l++) {
            coli__err_clear(err);
            coli_status st = layer(c, &w->layers[l], l, kv, pool, &b, S, pos0 + done);
            if (st != COLI_OK && err->msg[0])
                return st; /* the message names the layer, file or record */
            if (st != COLI_OK)
                return coli__fail(err, st, "layer %d: %s", l, coli_strerror(st));
        }
        done += S;
        if (done == n) {
            float *last = b.x + (size_t)(S - 1) * H;
            rmsnorm(b.xn, last, w->final_norm, H, c->rms_eps);
            b.read += coli__mat_bytes(&w->lm_head);
            coli_status st = coli__experts_output(m, pool, b.xn, logits);
            if (st != COLI_OK)
                return coli__fail(err, st, "output projection: %s", coli_strerror(st));
        }
        read += b.read;
    }
    if (bytes_read)
        *bytes_read = read;
    return COLI_OK;
}
