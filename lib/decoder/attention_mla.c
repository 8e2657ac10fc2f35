/* attention_mla.c - multi-head latent attention (DeepSeek-V2/V3, Kimi-K2),
 * in its absorbed form, in the written order of docs/formats.md ("Latent
 * attention").
 *
 * A position caches one row: its normed latent c (kv_lora_rank values)
 * and its rotated key k_pe (qk_rope_head_dim), shared by every head. A
 * head's query is turned into the latent's space by the key half of
 * kv_b_proj (q~ = W_UK^T q_nope), scores the cached rows as one query of
 * kv_lora + rope values, mixes the latents, and the value half of kv_b_proj
 * turns that mix into the head's output. The cache is MQA's: all heads
 * read each row once. Prefill and decode run the same computation, so a
 * prompt gives the same bits at once, in chunks or token by token. */
#include <math.h>
#include <string.h>

#include "cpu/attn.h"
#include "decoder/indexer.h"
#include "decoder/norm.h"
#include "decoder/pieces.h"
#include "decoder/rope.h"

/* Heads an attention task takes: each cached row read serves them all. */
#define HEADS 16
/* Heads' value products handed out at once. */
#define MM_HEADS 64

/* The scratch of a chunk of S tokens (floats from b->scores), in this
 * order: each buffer's start. */
typedef struct mla_bufs {
    float *qa;   /* [S, q_lora]: the query's LoRA */
    float *ckv;  /* [S, kv_lora + rope]: latent and rotary key, as projected */
    float *qc;   /* [S, nh, kv_lora + rope]: the absorbed queries */
    float *lat;  /* [nh, S, kv_lora]: each head's mix of latents */
    float *ov;   /* [nh, S, v]: each head's output */
    float *att;  /* [S, nh * v]: the heads' outputs side by side */
    float *row;  /* [kv row]: a position's cache row, assembled */
    coli__indexer_bufs x; /* sparse attention's indexer: its selection survives the layer */
    float *task; /* per thread: a row of kv_b, then HEADS rows of scores (or the indexer's) */
} mla_bufs;

static size_t per_token(const coli__config *c)
{
    const coli__mla_opts *a = &c->attn.mla;
    const size_t nh = (size_t)c->n_heads, K = (size_t)(a->kv_lora + a->rope);
    return (size_t)a->q_lora + K + nh * K + nh * (size_t)a->kv_lora + 2 * nh * (size_t)a->v_dim +
           coli__indexer_per_token(c);
}

static size_t task_floats(const coli__config *c, int rm)
{
    size_t mla = (size_t)c->attn.mla.kv_lora + (size_t)HEADS * (size_t)rm + HEADS, idx = coli__indexer_task(c, rm);
    return mla > idx ? mla : idx;
}

/* Whether a segment of S tokens whose last sees last positions takes
 * split_attend: fewer tokens than threads (decoding), past a few tiles
 * (below them, three hand-outs cost more than the threads gain). */
static int splits(int S, int last, int threads)
{
    return S < threads && last > 2 * COLI__ATTN_TILE;
}

/* The threads' part of the scratch, for one segment, and the row; the
 * pass adds the chunk's per_token floats (the buffers below, 64-byte
 * spaced). */
static size_t scratch(const coli__config *c, int S, int last, int n_ctx, int threads)
{
    const size_t rm = (size_t)coli__pass_room(last, n_ctx);
    /* fewer tokens than threads (decoding): every head's scores of each (split_attend) */
    const size_t split = splits(S, last, threads) ? (size_t)S * (size_t)c->n_heads * rm + 16 : 0;
    return 16 * 8 + (size_t)c->kv_kdim + (size_t)threads * task_floats(c, (int)rm) + split;
}

static mla_bufs bufs(const coli__pass *b)
{
    const coli__config *c = b->d->cfg;
    const coli__mla_opts *a = &c->attn.mla;
    const size_t S = (size_t)b->S, nh = (size_t)c->n_heads, K = (size_t)(a->kv_lora + a->rope);
    const size_t n[6] = {S * (size_t)a->q_lora, S * K, S * nh * K, nh * S * (size_t)a->kv_lora,
                         nh * S * (size_t)a->v_dim, S * nh * (size_t)a->v_dim};
    float *p[7];
    p[0] = b->scores;
    for (int i = 0; i < 6; i++) /* 64-byte spaced */
        p[i + 1] = p[i] + ((n[i] + 15) & ~(size_t)15);
    mla_bufs m = {.qa = p[0], .ckv = p[1], .qc = p[2], .lat = p[3], .ov = p[4], .att = p[5], .row = p[6]};
    m.task = coli__indexer_bufs_at(c, b->S, m.row + (((size_t)c->kv_kdim + 15) & ~(size_t)15), &m.x);
    return m;
}

/* The absorption of one head: q~_h = W_UK[h]^T q_nope_h, from +0, one fma
 * per row of W_UK in increasing order (docs/formats.md). */
typedef struct absorb_job {
    const coli__pass *b;
    const coli__layer *ly;
    const float *q; /* [S, nh, nope + rope] */
    mla_bufs m;
} absorb_job;

static void absorb_heads(void *arg, int64_t lo, int64_t hi, int thread)
{
    const absorb_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const coli__mla_opts *a = &c->attn.mla;
    const int S = j->b->S, nh = c->n_heads, L = a->kv_lora, K = L + a->rope, QH = a->nope + a->rope;
    float *row = j->m.task + (size_t)thread * (size_t)L; /* within the thread scratch scratch() sizes */
    for (int64_t h = lo; h < hi; h++) {
        for (int t = 0; t < S; t++)
            memset(j->m.qc + ((size_t)t * nh + (size_t)h) * K, 0, (size_t)L * sizeof(float));
        for (int d = 0; d < a->nope; d++) {
            coli__mat_row(&j->ly->kv_b, (int)h * (a->nope + a->v_dim) + d, row);
            for (int t = 0; t < S; t++)
                coli__axpy(j->b->d->cpuk, j->m.qc + ((size_t)t * nh + (size_t)h) * K,
                           j->q[((size_t)t * nh + (size_t)h) * QH + (size_t)d], row, L);
        }
    }
}

/* The attention of HEADS heads of one token of segment sg over its cache. */
typedef struct attend_job {
    const coli__pass *b;
    const coli__seg *sg;
    int l, rm, n_blocks, hb; /* hb: heads a task takes, at most HEADS */
    float scale;
    mla_bufs m;
    float *task; /* per thread: HEADS rows of scores, then their maxima */
} attend_job;

static void attend_blocks(void *arg, int64_t lo, int64_t hi, int thread)
{
    const attend_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const coli__mla_opts *a = &c->attn.mla;
    const coli__kv *kv = j->sg->kv;
    const int nh = c->n_heads, L = a->kv_lora, K = L + a->rope, S = j->b->S;
    const size_t stride = (size_t)kv->hd; /* [latent ; rotary key], then the indexer's key */
    float *sc = j->task + (size_t)thread * ((size_t)HEADS * (size_t)j->rm + HEADS), *mx = sc + (size_t)HEADS * j->rm;
    const void *rows = coli__kv_rows(kv, j->l, 0, 0);
    for (int64_t it = lo; it < hi; it++) {
        const int t = j->sg->t0 + (int)(it / j->n_blocks), h0 = (int)(it % j->n_blocks) * j->hb;
        const int g = nh - h0 < j->hb ? nh - h0 : j->hb, n = j->sg->pos0 + (t - j->sg->t0) + 1;
        for (int h = 0; h < g; h++)
            mx[h] = -INFINITY;
        coli__attn_scores(j->b->d->cpuk, j->m.qc + ((size_t)t * nh + (size_t)h0) * K, g, K, rows, kv->dt, stride, n,
                          j->scale, sc, (size_t)j->rm, mx, NULL);
        const int *sel = coli__indexer_choice(c, &j->m.x, t);
        if (sel) /* sparse: the positions not chosen weigh 0 */
            for (int h = 0; h < g; h++)
                mx[h] = coli__indexer_mask(sel, sc + (size_t)h * j->rm, n);
        for (int h = 0; h < g; h++)
            coli__attn_softmax(j->b->d->cpuk, sc + (size_t)h * j->rm, n, mx[h]);
        /* the values are the rows' latents: their first kv_lora values */
        coli__attn_mix(j->b->d->cpuk, j->m.lat + ((size_t)h0 * S + (size_t)t) * L, (size_t)S * L, g, L, sc,
                       (size_t)j->rm, rows, kv->dt, stride, n, NULL);
    }
}

/* The attention of a segment of fewer tokens than threads (decoding),
 * split three ways so that every thread works on every token: the scores
 * of all heads by blocks of positions, the softmax by heads, the mix by
 * blocks of the latent's dimensions. Each score, each head's softmax and
 * each output value is computed as in attend_blocks, alone: the same
 * bits. */
#define MIX_DIMS 64

typedef struct split_job {
    const coli__pass *b;
    const coli__seg *sg;
    int l, rm, n_blocks, n_chunks;
    float scale;
    mla_bufs m;
    float *task; /* per thread: task_floats(rm) */
    float *sc;   /* [segment token][head][rm] */
} split_job;

static float *split_scores_of(const split_job *j, int i)
{
    return j->sc + (size_t)i * (size_t)j->b->d->cfg->n_heads * (size_t)j->rm;
}

static void split_scores(void *arg, int64_t lo, int64_t hi, int thread)
{
    const split_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const coli__kv *kv = j->sg->kv;
    const int nh = c->n_heads, K = c->attn.mla.kv_lora + c->attn.mla.rope;
    float *mx = j->task + (size_t)thread * task_floats(c, j->rm); /* unused maxima: split_softmax takes them */
    for (int64_t it = lo; it < hi; it++) {
        const int i = (int)(it / j->n_blocks), n = j->sg->pos0 + i + 1, t = j->sg->t0 + i;
        const int p0 = (int)(it % j->n_blocks) * COLI__ATTN_TILE, p1 = p0 + COLI__ATTN_TILE < n ? p0 + COLI__ATTN_TILE : n;
        if (p0 >= n)
            continue;
        for (int h = 0; h < nh; h++)
            mx[h] = -INFINITY;
        coli__attn_scores(j->b->d->cpuk, j->m.qc + (size_t)t * nh * K, nh, K, coli__kv_key_at(kv, j->l, 0, p0, 0), kv->dt,
                          (size_t)kv->hd, p1 - p0, j->scale, split_scores_of(j, i) + p0, (size_t)j->rm, mx, NULL);
    }
}

static void split_softmax(void *arg, int64_t lo, int64_t hi, int thread)
{
    const split_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const int nh = c->n_heads;
    (void)thread;
    for (int64_t it = lo; it < hi; it++) {
        const int i = (int)(it / nh), h = (int)(it % nh), n = j->sg->pos0 + i + 1, t = j->sg->t0 + i;
        float *a = split_scores_of(j, i) + (size_t)h * j->rm;
        const int *sel = coli__indexer_choice(c, &j->m.x, t);
        float mx = -INFINITY;
        if (sel) /* sparse: the positions not chosen weigh 0 */
            mx = coli__indexer_mask(sel, a, n);
        else
            for (int p = 0; p < n; p++)
                mx = a[p] > mx ? a[p] : mx;
        coli__attn_softmax(j->b->d->cpuk, a, n, mx);
    }
}

static void split_mix(void *arg, int64_t lo, int64_t hi, int thread)
{
    const split_job *j = arg;
    const coli__config *c = j->b->d->cfg;
    const coli__kv *kv = j->sg->kv;
    const int nh = c->n_heads, L = c->attn.mla.kv_lora, S = j->b->S;
    (void)thread;
    for (int64_t it = lo; it < hi; it++) {
        const int i = (int)(it / j->n_chunks), d0 = (int)(it % j->n_chunks) * MIX_DIMS, n = j->sg->pos0 + i + 1;
        const int t = j->sg->t0 + i, dims = L - d0 < MIX_DIMS ? L - d0 : MIX_DIMS;
        coli__attn_mix(j->b->d->cpuk, j->m.lat + (size_t)t * L + (size_t)d0, (size_t)S * L, nh, dims,
                       split_scores_of(j, i), (size_t)j->rm, coli__kv_key_at(kv, j->l, 0, 0, d0), kv->dt, (size_t)kv->hd, n,
                       NULL);
    }
}

static void split_attend(const coli__pass *b, const coli__seg *sg, int l, const mla_bufs *m, int threads)
{
    const coli__config *c = b->d->cfg;
    const int rm = coli__pass_room(sg->pos0 + sg->n, sg->kv->n_ctx), last = sg->pos0 + sg->n;
    split_job j = {.b = b, .sg = sg, .l = l, .rm = rm, .n_blocks = (last + COLI__ATTN_TILE - 1) / COLI__ATTN_TILE,
                   .n_chunks = (c->attn.mla.kv_lora + MIX_DIMS - 1) / MIX_DIMS, .scale = c->attn.scale, .m = *m,
                   .task = m->task};
    j.sc = m->task + (size_t)threads * task_floats(c, rm);
    coli__pool_run(b->pool, (int64_t)sg->n * j.n_blocks, 1, split_scores, &j);
    coli__pool_run(b->pool, (int64_t)sg->n * c->n_heads, 1, split_softmax, &j);
    coli__pool_run(b->pool, (int64_t)sg->n * j.n_chunks, 1, split_mix, &j);
}

/* Each token's latent normed and its rotary key turned, stored in the
 * cache with the indexer's key (zeros in a layer that shares another's
 * choice); each head's rotary query turned. */
static void rotate_and_store(coli__pass *b, const coli__layer *ly, int l, float *q, const mla_bufs *m)
{
    const coli__config *c = b->d->cfg;
    const int D = c->attn.dsa.topk ? c->attn.dsa.dim : 0; /* the indexer's key, after [c ; k_pe] */
    const coli__mla_opts *a = &c->attn.mla;
    const int nh = c->n_heads, L = a->kv_lora, K = L + a->rope, QH = a->nope + a->rope;
    float tmp[2 * 4096];
    for (int s = 0; s < b->n_seg; s++) {
        const coli__seg *sg = &b->seg[s];
        for (int t = sg->t0; t < sg->t0 + sg->n; t++) {
            const float *cs = b->rope + (size_t)t * c->head_dim;
            float *ckv = m->ckv + (size_t)t * K;
            coli__rmsnorm(b->d->cpuk, ckv, ckv, ly->kv_a_norm, L, a->norm_eps);
            if (c->attn.mla_interleave)
                coli__rope_deinterleave(ckv + L, a->rope, tmp);
            coli__rope(ckv + L, a->rope, cs);
            const float *row = ckv;
            if (D) {
                memcpy(m->row, ckv, (size_t)K * sizeof(float));
                if (c->attn.dsa.full[l])
                    memcpy(m->row + K, m->x.k + (size_t)t * D, (size_t)D * sizeof(float));
                else
                    memset(m->row + K, 0, (size_t)D * sizeof(float));
                row = m->row;
            }
            coli__kv_store(sg->kv, l, sg->pos0 + t - sg->t0, row, NULL);
            for (int h = 0; h < nh; h++) {
                float *qp = q + ((size_t)t * nh + (size_t)h) * QH + a->nope;
                if (c->attn.mla_interleave)
                    coli__rope_deinterleave(qp, a->rope, tmp);
                coli__rope(qp, a->rope, cs);
                memcpy(m->qc + ((size_t)t * nh + (size_t)h) * K + L, qp, (size_t)a->rope * sizeof(float));
            }
        }
    }
}

static coli_status mla(coli__pass *b, const coli__layer *ly, int l, const coli__mat *then)
{
    const coli__config *c = b->d->cfg;
    const coli__mla_opts *a = &c->attn.mla;
    const int S = b->S, nh = c->n_heads, L = a->kv_lora, V = a->v_dim;
    const mla_bufs m = bufs(b);
    float *q = b->q; /* [S, nh, nope + rope] */
    /* the query (its LoRA, or q_proj) and the latent from the same input */
    coli__mm in[2] = {
        {.w = &ly->kv_a, .x = b->xn, .n_tok = S, .y = m.ckv},
        {.w = a->q_lora ? &ly->q_a : &ly->wq, .x = b->xn, .n_tok = S, .y = a->q_lora ? m.qa : q},
    };
    COLI_TRY(coli__pass_mm_multi(b, in, 2));
    if (a->q_lora) {
        for (int t = 0; t < S; t++)
            coli__rmsnorm(b->d->cpuk, m.qa + (size_t)t * a->q_lora, m.qa + (size_t)t * a->q_lora, ly->q_a_norm,
                          a->q_lora, a->norm_eps);
        COLI_TRY(coli__pass_mm(b, &ly->wq, m.qa, S, q));
    }
    const int full = c->attn.dsa.topk && c->attn.dsa.full[l]; /* a layer with its own indexer */
    if (full)
        COLI_TRY(coli__indexer_project(b, ly, m.qa, &m.x));
    rotate_and_store(b, ly, l, q, &m);
    if (full) /* else the last full layer's choice, still in m.x */
        coli__indexer_select(b, l, &m.x, m.task);

    absorb_job aj = {.b = b, .ly = ly, .q = q, .m = m};
    coli__pool_run(b->pool, nh, 1, absorb_heads, &aj);
    /* the key half of kv_b_proj, read row by row */
    b->read += coli__mat_bytes(&ly->kv_b) / (uint64_t)(a->nope + V) * (uint64_t)a->nope;

    const coli__mat *after[2] = {&ly->wo, then};
    coli__matmul_hint(b->pool, after, 2, 0);
    const int threads = coli__pool_size(b->pool);
    for (int s = 0; s < b->n_seg; s++) {
        const coli__seg *sg = &b->seg[s];
        if (splits(sg->n, sg->pos0 + sg->n, threads)) {
            split_attend(b, sg, l, &m, threads);
            continue;
        }
        /* fewer heads a task where the tokens are too few for the threads:
         * each reads the cache's rows, the threads share them */
        int hb = HEADS;
        while (hb > 4 && (int64_t)sg->n * ((nh + hb - 1) / hb) < threads)
            hb /= 2;
        const int n_blocks = (nh + hb - 1) / hb;
        attend_job tj = {.b = b, .sg = sg, .l = l, .rm = coli__pass_room(sg->pos0 + sg->n, sg->kv->n_ctx), .n_blocks = n_blocks,
                         .hb = hb,
                         .scale = c->attn.scale, .m = m, .task = m.task};
        coli__pool_run(b->pool, (int64_t)sg->n * n_blocks, 1, attend_blocks, &tj);
    }

    /* each head's value half of kv_b_proj over its mix of latents */
    coli__mm heads[MM_HEADS];
    coli__mat uv[MM_HEADS];
    for (int h0 = 0; h0 < nh; h0 += MM_HEADS) {
        int n = nh - h0 < MM_HEADS ? nh - h0 : MM_HEADS;
        for (int i = 0; i < n; i++) {
            int h = h0 + i;
            if (!coli__mat_rows(&ly->kv_b, h * (a->nope + V) + a->nope, V, &uv[i]))
                return coli__fail(b->err, COLI_EUNSUPPORTED, "layer %d: kv_b_proj cannot be cut into heads", l);
            heads[i] = (coli__mm){.w = &uv[i], .x = m.lat + (size_t)h * S * L, .n_tok = S,
                                  .y = m.ov + (size_t)h * S * V};
        }
        COLI_TRY(coli__pass_mm_multi(b, heads, n));
    }
    for (int t = 0; t < S; t++)
        for (int h = 0; h < nh; h++)
            memcpy(m.att + ((size_t)t * nh + (size_t)h) * V, m.ov + ((size_t)h * S + (size_t)t) * V,
                   (size_t)V * sizeof(float));
    return coli__pass_mm(b, &ly->wo, m.att, S, b->o);
}

/* The query (q_a_proj, its norm, q_b_proj; or q_proj), the latent
 * (kv_a_proj_with_mqa, its norm, kv_b_proj) and o_proj. */
static coli_status load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    const coli__mla_opts *a = &c->attn.mla;
    const int H = c->hidden, nh = c->n_heads, QD = nh * (a->nope + a->rope);
    if (a->q_lora) {
        COLI_TRY(L->mat(L->L, &ly->q_a, COLI_T_Q_A, l, a->q_lora, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
        COLI_TRY(L->vec(L->L, &ly->q_a_norm, COLI_T_Q_A_NORM, l, a->q_lora));
        COLI_TRY(L->mat(L->L, &ly->wq, COLI_T_Q_B, l, QD, a->q_lora, COLI_MAT_BIG, COLI_ROLE_DENSE));
    } else {
        COLI_TRY(L->mat(L->L, &ly->wq, COLI_T_WQ, l, QD, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    }
    COLI_TRY(L->mat(L->L, &ly->kv_a, COLI_T_KV_A, l, a->kv_lora + a->rope, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->vec(L->L, &ly->kv_a_norm, COLI_T_KV_A_NORM, l, a->kv_lora));
    /* cut into heads' rows: kept in the row layout */
    COLI_TRY(L->mat_rows(L->L, &ly->kv_b, COLI_T_KV_B, l, nh * (a->nope + a->v_dim), a->kv_lora, COLI_MAT_BIG,
                         COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->wo, COLI_T_WO, l, H, nh * a->v_dim, COLI_MAT_BIG, COLI_ROLE_DENSE));
    return coli__indexer_load(L, c, l, ly);
}

/* The device's layer: the query's products (its LoRA and norm, or
 * q_proj), the latent's product and norm, kv_b_proj whole (the pipeline
 * cuts it into heads as attend does) and o_proj. The indexer of sparse
 * attention is not in the device pipeline yet: such a layer is refused. */
static void describe(const coli__describer *D, const coli__config *c, const coli__layer *ly, coli__gpu_layer *gl)
{
    const coli__mla_opts *a = &c->attn.mla;
    gl->attn = COLI_ATTN_MLA;
    gl->wk = gl->wv = -1;
    gl->q_norm = gl->k_norm = gl->bq = gl->bk = gl->bv = -1;
    if (c->attn.dsa.topk) {
        D->refuse(D->D, "sparse attention's indexer is not in the device pipeline yet");
        gl->wq = gl->wo = -1;
        return;
    }
    gl->mla = (coli__gpu_mla){.q_lora = a->q_lora, .kv_lora = a->kv_lora, .rope = a->rope, .nope = a->nope,
                              .v_dim = a->v_dim, .row = c->kv_kdim, .interleave = c->attn.mla_interleave,
                              .eps = a->norm_eps, .scale = c->attn.scale};
    if (a->q_lora) {
        gl->q_a = D->mat(D->D, &ly->q_a);
        gl->q_a_norm = D->vec(D->D, ly->q_a_norm, a->q_lora);
    }
    gl->wq = D->mat(D->D, &ly->wq);
    gl->kv_a = D->mat(D->D, &ly->kv_a);
    gl->kv_a_norm = D->vec(D->D, ly->kv_a_norm, a->kv_lora);
    gl->kv_b = D->mat(D->D, &ly->kv_b);
    gl->wo = D->mat(D->D, &ly->wo);
}

const coli__attn_piece coli__attn_mla = {
    .name = "mla",
    .load = load,
    .describe = describe,
    .run = mla,
    .scratch = scratch,
    .per_token = per_token,
};
