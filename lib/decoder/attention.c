/* attention.c - grouped-query attention: q/k/v projections and their
 * biases, the family's q/k norm (per head or over the whole projection), clipping, RoPE, the
 * KV cache, causal softmax attention (optionally within a sliding window)
 * and the output projection, in the written order of docs/formats.md. Each
 * option is a field of the config's attn, not a branch elsewhere. */
#include <math.h>
#include <string.h>

#include "decoder/norm.h"
#include "decoder/pieces.h"
#include "decoder/rope.h"

/*
 * The heads of a KV head's group are done together, so that each cached
 * row is read from memory once for all of them (lib/cpu/attn.h). The work
 * is cut one of two ways, with the same bits (docs/formats.md fixes every
 * value, not who computes it):
 *
 * - whole: one task per KV head and block of consecutive tokens: scores,
 *   softmax and mix of the group's heads of every token of the block over
 *   its positions, in per-thread scratch, each token's heads reading only
 *   the rows up to its own position: a row read once serves the heads of
 *   several tokens. Prefill, and decode when the KV heads share out
 *   evenly over the threads;
 * - split (decode with fewer KV heads than threads to keep busy): three
 *   hand-outs over [S][nh][room] scores: blocks of positions of each KV
 *   head (scores and each block's maximum), then each head's softmax over
 *   all its positions, then slices of dimensions of each KV head (the
 *   mix, whose eight partial sums per dimension run over every position
 *   in order).
 */
typedef struct attn_job {
    const coli__config *c;
    const coli__cpuk *k; /* the model's kernel set */
    const float *q;      /* [S, nh*hd] */
    float *out;          /* [S, nh*hd] */
    const coli__kv *kv;  /* the cache, and this layer in it */
    int l;
    coli__dtype dt;
    size_t es; /* bytes of a cached value */
    int pos0, n_tok, room, group; /* room: positions a head's scores have room for */
    float scale;
    int tb;        /* whole: tokens per task */
    float *scores; /* whole: per thread the block's [tb * group][room] scores, then whole_scratch's rest; split:
                      [S][nh][room] */
    float *bmax;   /* split: [S][nh][nb], each block's maximum */
    int block, nb; /* split: positions per scoring task, and tasks per token and KV head */
    int dims, nd;  /* split: dimensions per mixing task, and tasks per token and KV head */
} attn_job;

/* Positions lo .. lo + n - 1 that token t attends to (a sliding window
 * starts later). */
static void span(const attn_job *j, int t, int *lo, int *n)
{
    const int window = j->c->attn.sliding_window, pos = j->pos0 + t;
    *lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    *n = pos - *lo + 1;
}

/* Row lo of KV head g's keys (or values), at dimension d; rows are
 * head_dim values apart. */
static const char *row(const attn_job *j, int values, int lo, int g, int d)
{
    const char *base = coli__kv_rows(j->kv, j->l, g, values);
    return base + ((size_t)lo * (size_t)j->c->head_dim + (size_t)d) * j->es;
}

/* Query heads a whole task takes at most (tokens times the group's heads):
 * the rows of a block read once serve that many. */
#define WHOLE_HEADS 16

/* Tokens of a whole task: consecutive tokens see the same first rows
 * (not so in a sliding window, whose first row moves); as many tasks as
 * threads at least. */
static int whole_tokens(const coli__config *c, int S, int threads)
{
    int g = c->n_heads / c->n_kv_heads, tb = g < WHOLE_HEADS ? WHOLE_HEADS / g : 1;
    int most = S * c->n_kv_heads / (threads > 0 ? threads : 1);
    if (c->attn.sliding_window > 0 || most < 1)
        return 1;
    tb = tb < most ? tb : most;
    return tb < S ? tb : S;
}

/* Floats of a thread's whole-task scratch: scores, maxima, the block's
 * query heads and their outputs, their row counts. */
static size_t whole_scratch(const coli__config *c, int tb, int room)
{
    const size_t H = (size_t)tb * (size_t)(c->n_heads / c->n_kv_heads);
    return H * (size_t)room + H + 2 * H * (size_t)c->head_dim + H;
}

static void whole_task(void *arg, int64_t b, int64_t e, int thread)
{
    const attn_job *j = arg;
    const int hd = j->c->head_dim, nkv = j->c->n_kv_heads, G = j->group, QD = j->c->n_heads * hd;
    const size_t HB = (size_t)j->tb * (size_t)G; /* query heads of a full block */
    float *sc = j->scores + (size_t)thread * whole_scratch(j->c, j->tb, j->room);
    float *mx = sc + HB * (size_t)j->room;
    float *qb = mx + HB, *ob = qb + HB * (size_t)hd;
    int *nh = (int *)(void *)(ob + HB * (size_t)hd);
    for (int64_t it = b; it < e; it++) {
        const int t0 = (int)(it / nkv) * j->tb, g = (int)(it % nkv);
        const int tb = j->n_tok - t0 < j->tb ? j->n_tok - t0 : j->tb, H = tb * G;
        int lo, n;
        span(j, t0 + tb - 1, &lo, &n); /* the last token's: the most rows */
        const float *q = j->q + (size_t)t0 * QD + (size_t)g * G * hd;
        for (int x = 0; x < tb; x++) {
            int lx, nx;
            span(j, t0 + x, &lx, &nx);
            if (tb > 1) /* the block's query heads side by side */
                memcpy(qb + (size_t)x * G * hd, q + (size_t)x * QD, (size_t)G * (size_t)hd * sizeof(float));
            for (int h = 0; h < G; h++) {
                nh[x * G + h] = nx; /* lx == lo: no window when tb > 1 */
                mx[x * G + h] = -INFINITY;
            }
        }
        coli__attn_scores(j->k, tb > 1 ? qb : q, H, hd, row(j, 0, lo, g, 0), j->dt, (size_t)hd, n, j->scale, sc,
                          (size_t)j->room, mx, tb > 1 ? nh : NULL);
        for (int h = 0; h < H; h++)
            coli__attn_softmax(j->k, sc + (size_t)h * (size_t)j->room, nh[h], mx[h]);
        if (tb == 1) {
            coli__attn_mix(j->k, j->out + (size_t)t0 * QD + (size_t)g * G * hd, (size_t)hd, G, hd, sc,
                           (size_t)j->room, row(j, 1, lo, g, 0), j->dt, (size_t)hd, n, NULL);
            continue;
        }
        coli__attn_mix(j->k, ob, (size_t)hd, H, hd, sc, (size_t)j->room, row(j, 1, lo, g, 0), j->dt, (size_t)hd, n,
                       nh);
        for (int x = 0; x < tb; x++)
            memcpy(j->out + (size_t)(t0 + x) * QD + (size_t)g * G * hd, ob + (size_t)x * G * hd,
                   (size_t)G * (size_t)hd * sizeof(float));
    }
}

/* Heads a scoring task keeps the maxima of at once. */
#define SPLIT_HEADS 16

static void split_scores(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const attn_job *j = arg;
    const int hd = j->c->head_dim, nh = j->c->n_heads, nkv = j->c->n_kv_heads, G = j->group;
    for (int64_t it = b; it < e; it++) {
        int t = (int)(it / ((int64_t)nkv * j->nb)), g = (int)(it / j->nb % nkv), bl = (int)(it % j->nb), lo, n;
        span(j, t, &lo, &n);
        int r0 = bl * j->block, r = n - r0 < j->block ? n - r0 : j->block;
        size_t head0 = (size_t)t * (size_t)nh + (size_t)g * (size_t)G;
        for (int h0 = 0; h0 < G; h0 += SPLIT_HEADS) {
            int hb = G - h0 < SPLIT_HEADS ? G - h0 : SPLIT_HEADS;
            float mx[SPLIT_HEADS];
            for (int h = 0; h < hb; h++)
                mx[h] = -INFINITY;
            if (r > 0)
                coli__attn_scores(j->k, j->q + (head0 + (size_t)h0) * (size_t)hd, hb, hd, row(j, 0, lo + r0, g, 0),
                                  j->dt, (size_t)hd, r, j->scale,
                                  j->scores + (head0 + (size_t)h0) * (size_t)j->room + (size_t)r0, (size_t)j->room,
                                  mx, NULL);
            for (int h = 0; h < hb; h++)
                j->bmax[(head0 + (size_t)(h0 + h)) * (size_t)j->nb + (size_t)bl] = mx[h];
        }
    }
}

static void split_softmax(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const attn_job *j = arg;
    const int nh = j->c->n_heads;
    for (int64_t it = b; it < e; it++) {
        int t = (int)(it / nh), lo, n;
        span(j, t, &lo, &n);
        const float *bm = j->bmax + (size_t)it * (size_t)j->nb;
        float m = -INFINITY;
        for (int bl = 0; bl < j->nb; bl++) /* blocks past n hold -inf */
            m = bm[bl] > m ? bm[bl] : m;
        coli__attn_softmax(j->k, j->scores + (size_t)it * (size_t)j->room, n, m);
    }
}

static void split_mix(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const attn_job *j = arg;
    const int hd = j->c->head_dim, nh = j->c->n_heads, nkv = j->c->n_kv_heads, G = j->group;
    for (int64_t it = b; it < e; it++) {
        int t = (int)(it / ((int64_t)nkv * j->nd)), g = (int)(it / j->nd % nkv), d = (int)(it % j->nd) * j->dims, lo,
            n;
        span(j, t, &lo, &n);
        int dims = hd - d < j->dims ? hd - d : j->dims;
        size_t head0 = (size_t)t * (size_t)nh + (size_t)g * (size_t)G;
        coli__attn_mix(j->k, j->out + head0 * (size_t)hd + (size_t)d, (size_t)hd, G, dims,
                       j->scores + head0 * (size_t)j->room, (size_t)j->room, row(j, 1, lo, g, d), j->dt,
                       (size_t)hd, n, NULL);
    }
}

/* The split is for a chunk whose tokens and KV heads are too few for the
 * threads, or share out unevenly; positions go in blocks of at least
 * SPLIT_BLOCK (below, a whole task is cheaper than three hand-outs). */
#define SPLIT_BLOCK 64

static int split_fits(int S, int nkv, int threads)
{
    int tasks = S * nkv;
    return threads > 1 && tasks % threads != 0 && tasks < 4 * threads;
}

static size_t scratch(const coli__config *c, int S, int last, int n_ctx, int threads)
{
    const size_t R = (size_t)coli__pass_room(last, n_ctx);
    size_t whole = (size_t)threads * whole_scratch(c, whole_tokens(c, S, threads), (int)R);
    if (!split_fits(S, c->n_kv_heads, threads))
        return whole;
    size_t nb = (R + SPLIT_BLOCK - 1) / SPLIT_BLOCK;
    size_t split = (size_t)S * (size_t)c->n_heads * (R + nb);
    return split > whole ? split : whole;
}

static void add(float *v, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        v[i] += b[i];
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

/* The attention of segment sg's tokens over their own cache. */
static void attend(coli__pass *b, const coli__seg *sg, int l)
{
    const coli__config *c = b->d->cfg;
    const int S = sg->n, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, QD = nh * hd;
    const coli__kv *kv = sg->kv;
    const int threads = coli__pool_size(b->pool), last = sg->pos0 + S; /* positions the last token sees, at most */
    attn_job aj = {
        .c = c,
        .k = b->d->cpuk,
        .q = b->q + (size_t)sg->t0 * QD,
        .out = b->att + (size_t)sg->t0 * QD,
        .kv = kv,
        .l = l,
        .dt = kv->dt,
        .es = kv->dt == COLI_DT_BF16 ? 2 : 4,
        .pos0 = sg->pos0,
        .n_tok = S,
        .tb = whole_tokens(c, S, threads),
        .room = coli__pass_room(last, kv->n_ctx),
        .group = nh / nkv,
        .scale = 1.0f / sqrtf((float)hd),
        .scores = b->scores,
    };
    if (split_fits(S, nkv, threads) && last >= 2 * SPLIT_BLOCK) {
        /* enough blocks for every thread, four times over */
        int want = (4 * threads + S * nkv - 1) / (S * nkv), block = (last + want - 1) / want;
        aj.block = block < SPLIT_BLOCK ? SPLIT_BLOCK : (block + 7) / 8 * 8;
        aj.nb = (last + aj.block - 1) / aj.block;
        aj.bmax = b->scores + (size_t)S * (size_t)nh * (size_t)aj.room;
        /* a mixing task reads one 64-byte line of each row */
        aj.dims = kv->dt == COLI_DT_BF16 ? 32 : 16;
        aj.dims = aj.dims < hd ? aj.dims : hd;
        aj.nd = (hd + aj.dims - 1) / aj.dims;
        coli__pool_run(b->pool, (int64_t)S * nkv * aj.nb, 1, split_scores, &aj);
        coli__pool_run(b->pool, (int64_t)S * nh, 1, split_softmax, &aj);
        coli__pool_run(b->pool, (int64_t)S * nkv * aj.nd, 1, split_mix, &aj);
    } else {
        coli__pool_run(b->pool, (int64_t)((S + aj.tb - 1) / aj.tb) * nkv, 1, whole_task, &aj);
    }
}

static coli_status gqa(coli__pass *b, const coli__layer *ly, int l, const coli__mat *then)
{
    const coli__config *c = b->d->cfg;
    const int S = b->S, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    const int QD = nh * hd, KVD = nkv * hd;
    coli__mm qkv[3] = {
        {.w = &ly->wq, .x = b->xn, .n_tok = S, .y = b->q},
        {.w = &ly->wk, .x = b->xn, .n_tok = S, .y = b->k},
        {.w = &ly->wv, .x = b->xn, .n_tok = S, .y = b->v},
    };
    COLI_TRY(coli__pass_mm_multi(b, qkv, 3));
    for (int s = 0; s < b->n_seg; s++) {
        const coli__seg *sg = &b->seg[s];
        for (int t = sg->t0; t < sg->t0 + sg->n; t++) {
            float *q = b->q + (size_t)t * QD, *k = b->k + (size_t)t * KVD, *v = b->v + (size_t)t * KVD;
            if (c->attn.qkv_bias) {
                add(q, ly->bq, QD);
                add(k, ly->bk, KVD);
                add(v, ly->bv, KVD);
            }
            qk_norm(b->d->cpuk, c, ly, q, k);
            if (c->attn.clip_qkv > 0) {
                clip(q, QD, c->attn.clip_qkv);
                clip(k, KVD, c->attn.clip_qkv);
                clip(v, KVD, c->attn.clip_qkv);
            }
            for (int h = 0; h < nh; h++)
                coli__rope(q + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
            for (int h = 0; h < nkv; h++)
                coli__rope(k + (size_t)h * hd, c->rot_dim, b->rope + (size_t)t * hd);
            coli__kv_store(sg->kv, l, sg->pos0 + t - sg->t0, k, v);
        }
    }
    const coli__mat *after[2] = {&ly->wo, then};
    coli__matmul_hint(b->pool, after, 2, 0);
    for (int s = 0; s < b->n_seg; s++)
        attend(b, &b->seg[s], l);
    return coli__pass_mm(b, &ly->wo, b->att, S, b->o);
}

/* q, k, v and output projections, then the q/k norms and the q/k/v
 * biases the options ask for: the order they are stored in. */
static coli_status load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    const int H = c->hidden, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    COLI_TRY(L->mat(L->L, &ly->wq, COLI_T_WQ, l, q, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->wk, COLI_T_WK, l, kv, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->wv, COLI_T_WV, l, kv, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->wo, COLI_T_WO, l, H, q, COLI_MAT_BIG, COLI_ROLE_DENSE));
    if (c->attn.qk_norm == COLI_QK_NORM_HEAD) {
        COLI_TRY(L->vec(L->L, &ly->q_norm, COLI_T_Q_NORM, l, c->head_dim));
        COLI_TRY(L->vec(L->L, &ly->k_norm, COLI_T_K_NORM, l, c->head_dim));
    } else if (c->attn.qk_norm == COLI_QK_NORM_FULL) {
        COLI_TRY(L->vec(L->L, &ly->q_norm, COLI_T_Q_NORM, l, q));
        COLI_TRY(L->vec(L->L, &ly->k_norm, COLI_T_K_NORM, l, kv));
    }
    if (c->attn.qkv_bias) {
        COLI_TRY(L->vec(L->L, &ly->bq, COLI_T_BQ, l, q));
        COLI_TRY(L->vec(L->L, &ly->bk, COLI_T_BK, l, kv));
        COLI_TRY(L->vec(L->L, &ly->bv, COLI_T_BV, l, kv));
    }
    return COLI_OK;
}

static void describe(const coli__describer *D, const coli__config *c, const coli__layer *ly, coli__gpu_layer *gl)
{
    const int hd = c->head_dim, q = c->n_heads * hd, kv = c->n_kv_heads * hd;
    gl->attn = COLI_ATTN_GQA;
    gl->wq = D->mat(D->D, &ly->wq);
    gl->wk = D->mat(D->D, &ly->wk);
    gl->wv = D->mat(D->D, &ly->wv);
    gl->wo = D->mat(D->D, &ly->wo);
    gl->qk_norm = c->attn.qk_norm == COLI_QK_NORM_HEAD ? 1 : c->attn.qk_norm == COLI_QK_NORM_FULL ? 2 : 0;
    gl->q_norm = gl->k_norm = -1;
    if (gl->qk_norm) {
        gl->q_norm = D->vec(D->D, ly->q_norm, gl->qk_norm == 1 ? hd : q);
        gl->k_norm = D->vec(D->D, ly->k_norm, gl->qk_norm == 1 ? hd : kv);
    }
    gl->clip_qkv = c->attn.clip_qkv;
    gl->window = c->attn.sliding_window;
    gl->bq = gl->bk = gl->bv = -1;
    if (c->attn.qkv_bias) {
        gl->bq = D->vec(D->D, ly->bq, q);
        gl->bk = D->vec(D->D, ly->bk, kv);
        gl->bv = D->vec(D->D, ly->bv, kv);
    }
}

const coli__attn_piece coli__attn_gqa = {
    .name = "gqa",
    .load = load,
    .describe = describe,
    .run = gqa,
    .scratch = scratch,
};
