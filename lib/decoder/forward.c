/* forward.c - the decoder stack: embedding, then each layer's order of
 * operations (norm, attention, residual, norm, feed-forward, residual),
 * then the output. What differs between model families (the attention,
 * the router, the feed-forward) are pieces the model chose at open
 * (lib/decoder/pieces.h).
 *
 * Activations are f32 throughout: transformers' operations (RMSNorm,
 * rotate-half RoPE, softmax attention, router softmax then top-k) in the
 * float order docs/formats.md writes down for every tier, so f32 weights
 * reproduce its float32 results to rounding. Tokens
 * are processed in chunks; within a chunk every weight row is loaded once and
 * applied to all tokens. */
#include <stdlib.h>
#include <string.h>

#include "decoder/forward.h"
#include "decoder/norm.h"
#include "decoder/pass.h"
#include "decoder/pieces.h"
#include "decoder/rope.h"

/* Tokens per pass: at most CHUNK, fewer where their activations would
 * pass CHUNK_BYTES (chunk_cap). A routed expert's weights are read once a
 * chunk for all its tokens there, so a long prompt gains from large chunks
 * (an expert of 8 in 64 meets 64 of 512 tokens: enough for a tile
 * product); the scratch holds about 30 hidden sizes of floats a token. */
#define CHUNK 512
#define CHUNK_MIN 64
#define CHUNK_BYTES ((size_t)64 << 20)

void coli__scratch_free(coli__scratch *s)
{
    free(s->p);
    s->p = NULL;
    s->cap = 0;
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

enum { N_BUFS = 22 };

/* The floats of each buffer of a pass of S tokens (scores: the
 * attention's scratch), in layout()'s order; returns their sum, each
 * rounded up to 64 bytes. */
static size_t pass_sizes(const coli__config *c, int S, size_t scores, int mtp, size_t sizes[N_BUFS])
{
    const size_t H = (size_t)c->hidden, QD = (size_t)c->n_heads * c->head_dim;
    const size_t KV = (size_t)c->n_kv_heads * c->head_dim;
    size_t E = (size_t)(c->n_experts > 0 ? c->n_experts : 1), K = (size_t)(c->top_k > 0 ? c->top_k : 1);
    /* the MoE buffers hold every routed (token, expert) pair: S * K rows */
    size_t GI = (size_t)c->inter > K * (size_t)c->moe_inter ? (size_t)c->inter : K * (size_t)c->moe_inter;
    /* the shared experts' rows follow the routed pairs' (lib/decoder/ffn.c) */
    GI = GI > K * (size_t)c->moe_inter + (size_t)c->shared_inter ? GI : K * (size_t)c->moe_inter + (size_t)c->shared_inter;
    /* rl: the router's logits, then its scratch (lib/decoder/pieces.h) */
    const size_t v[N_BUFS] = {
        S * H, S * H, S * QD, S * KV, S * KV, S * QD, S * H, S * GI, S * GI, S * E + 2 * E, S * K * H, S * K * H,
        scores, S * K, S * (size_t)c->head_dim, S * H, mtp ? 2 * S * H : 0, S * K, S * K, S * K, K, (E + 3) / 4,
    };
    size_t total = 0;
    for (size_t i = 0; i < N_BUFS; i++) {
        sizes[i] = v[i];
        total += (v[i] + 15) & ~(size_t)15; /* keep each buffer 64-byte spaced */
    }
    return total;
}

static coli_status layout(const coli__config *c, coli__scratch *s, int S, size_t scores, int mtp, coli__pass *b,
                          coli__err *err)
{
    size_t sizes[N_BUFS];
    const size_t total = pass_sizes(c, S, scores, mtp, sizes);
    COLI_TRY(grab(s, total, err));
    float *p = s->p;
    float **dst[] = {&b->x, &b->xn, &b->q, &b->k, &b->v, &b->att, &b->o, &b->g, &b->u, &b->rl,
                     &b->xe, &b->ye, &b->scores, &b->wts, &b->rope, &b->sy, &b->cat};
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
    p += (sizes[i++] + 15) & ~(size_t)15;
    b->group = (signed char *)p;
    b->n_pred = 0;
    return COLI_OK;
}

/* The most tokens a pass takes for this model (see CHUNK): the floats a
 * token adds to a pass (with MTP's buffers, the larger case). */
static int chunk_cap(const coli__decoder *d)
{
    const coli__config *c = d->cfg;
    size_t sizes[N_BUFS];
    size_t per = 4 * (pass_sizes(c, 1, 0, 1, sizes) - pass_sizes(c, 0, 0, 1, sizes));
    if (d->pieces->attn->per_token) /* the attention's own buffers */
        per += 4 * d->pieces->attn->per_token(c);
    size_t n = CHUNK_BYTES / (per ? per : 1);
    return n >= CHUNK ? CHUNK : n <= CHUNK_MIN ? CHUNK_MIN : (int)n;
}

static void norm_rows(coli__pass *b, const float *w)
{
    const coli__config *c = b->d->cfg;
    const int H = c->hidden;
    for (int t = 0; t < b->S; t++)
        coli__rmsnorm(b->d->cpuk, b->xn + (size_t)t * H, b->x + (size_t)t * H, w, H, c->rms_eps);
}

static void residual(coli__pass *b)
{
    for (size_t i = 0; i < (size_t)b->S * (size_t)b->d->cfg->hidden; i++)
        b->x[i] += b->o[i];
}

/* The layers a pass runs, and what comes before and after them: the
 * decoder's, or the MTP layer's (its own embedding and output, where it
 * has them). */
typedef struct stack {
    int first, end;
    const coli__mat *embed, *head;
    const float *norm;
} stack;

static coli_status layer(coli__pass *b, const stack *k, int l)
{
    const coli__decoder *d = b->d;
    const coli__layer *ly = &d->w->layers[l];
    const coli__ffn_piece *ffn = ly->is_moe ? d->pieces->moe : d->pieces->mlp;

    norm_rows(b, ly->attn_norm);
    COLI_TRY(d->pieces->attn->run(b, ly, l, ly->is_moe ? &ly->router : NULL));
    residual(b);

    norm_rows(b, ly->ffn_norm);
    if (ffn->prepare)
        COLI_TRY(ffn->prepare(b, l));
    /* the next layer's projections, or the output's first rows */
    const coli__layer *nx = l + 1 < k->end ? &d->w->layers[l + 1] : NULL;
    const coli__mat *next[3] = {nx ? &nx->wq : k->head, nx ? &nx->wk : NULL, nx ? &nx->wv : NULL};
    coli__matmul_hint(b->pool, next, 3, 0);
    COLI_TRY(ffn->run(b, ly, l));
    residual(b);
    return COLI_OK;
}

/* The MTP layer's input of each token: eh_proj applied to the normed
 * embedding followed by the normed state of the decoder (docs/formats.md). */
static coli_status mtp_input(coli__pass *b, const stack *k, const int32_t *tokens, const float *h)
{
    const coli__decoder *d = b->d;
    const coli__mtp_weights *mt = &d->w->mtp;
    const int H = d->cfg->hidden;
    for (int t = 0; t < b->S; t++) {
        float *cat = b->cat + (size_t)t * 2 * H;
        coli__mat_row(k->embed, tokens[t], b->xn);
        coli__rmsnorm(d->cpuk, cat, b->xn, mt->enorm, H, d->cfg->rms_eps);
        coli__rmsnorm(d->cpuk, cat + H, h + (size_t)t * H, mt->hnorm, H, d->cfg->rms_eps);
    }
    return coli__pass_mm(b, &mt->eh_proj, b->cat, b->S, b->x);
}

/* Sets up chunk b of S tokens in segments seg: its buffers, its RoPE
 * tables and what it reads besides the matrices. */
static coli_status chunk_begin(coli__pass *b, const coli__decoder *d, coli__scratch *s, coli__pool *pool,
                               const stack *k, const coli__seg *seg, int n_seg, int S, int mtp,
                               coli__experts_counts *counts, coli__err *err)
{
    const coli__config *c = d->cfg;
    size_t scores = 0;
    for (int i = 0; i < n_seg; i++) {
        size_t x = d->pieces->attn->scratch(c, seg[i].n, seg[i].pos0 + seg[i].n, seg[i].kv->n_ctx,
                                           coli__pool_size(pool));
        scores = x > scores ? x : scores;
    }
    if (d->pieces->attn->per_token) /* buffers of the whole chunk */
        scores += (size_t)S * d->pieces->attn->per_token(c);
    COLI_TRY(layout(c, s, S, scores, mtp, b, err));
    b->d = d;
    b->seg = seg;
    b->n_seg = n_seg;
    b->pool = pool;
    b->S = S;
    b->end = k->end;
    b->counts = counts;
    b->err = err;
    /* norms, and one embedding row per token unless the output
     * projection reads the whole embedding matrix anyway (tied) */
    b->read = 4 * (uint64_t)d->w->n_vec_params;
    if (coli__mat_base(k->head) != coli__mat_base(k->embed) || k->head->dt != k->embed->dt)
        b->read += (uint64_t)S * (coli__mat_bytes(k->embed) / (uint64_t)c->vocab);
    for (int i = 0; i < n_seg; i++)
        for (int t = seg[i].t0; t < seg[i].t0 + seg[i].n; t++)
            coli__rope_table(b->rope + (size_t)t * c->head_dim, c, seg[i].pos0 + t - seg[i].t0);
    return COLI_OK;
}

static coli_status chunk_layers(coli__pass *b, const stack *k)
{
    for (int l = k->first; l < k->end; l++) {
        coli__err_clear(b->err);
        coli_status st = layer(b, k, l);
        if (st != COLI_OK && b->err->msg[0])
            return st; /* the message names the layer, file or record */
        if (st != COLI_OK)
            return coli__fail(b->err, st, "layer %d: %s", l, coli_strerror(st));
    }
    return COLI_OK;
}

static void embed_rows(coli__pass *b, const stack *k, const int32_t *tokens)
{
    const size_t H = (size_t)b->d->cfg->hidden;
    for (int t = 0; t < b->S; t++)
        coli__mat_row(k->embed, tokens[t], b->x + (size_t)t * H);
}

coli_status coli__forward_run(const coli__decoder *d, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                              const coli__fwd *f, uint64_t *bytes_read, coli__experts_counts *counts,
                              coli__err *err)
{
    uint64_t read = 0;
    const coli__config *c = d->cfg;
    const coli__weights *w = d->w;
    const int H = c->hidden, n = f->n, pos0 = f->pos0;
    const stack k = f->h_in ? (stack){c->n_trunk, c->n_trunk + 1, &w->mtp.embed, &w->mtp.head, w->mtp.head_norm}
                            : (stack){0, c->n_trunk, &w->embed, &w->lm_head, w->final_norm};
    const int cap = chunk_cap(d);
    for (int done = 0; done < n;) {
        int S = n - done < cap ? n - done : cap;
        coli__pass b;
        const coli__seg seg = {.kv = kv, .pos0 = pos0 + done, .t0 = 0, .n = S};
        COLI_TRY(chunk_begin(&b, d, s, pool, &k, &seg, 1, S, f->h_in != NULL, counts, err));
        if (f->h_in)
            COLI_TRY(mtp_input(&b, &k, f->tokens + done, f->h_in + (size_t)done * H));
        else
            embed_rows(&b, &k, f->tokens + done);
        COLI_TRY(chunk_layers(&b, &k));
        /* the final norm of the rows wanted: every one for hidden or all
         * the logits, else the last of the last chunk */
        int last = done + S == n, lo = f->hidden || f->all_logits ? 0 : last ? S - 1 : S;
        for (int t = lo; t < S; t++) {
            coli__rmsnorm(d->cpuk, b.xn + (size_t)(t - lo) * H, b.x + (size_t)t * H, k.norm, H, c->rms_eps);
            if (f->hidden)
                memcpy(f->hidden + (size_t)(done + t) * H, b.xn + (size_t)(t - lo) * H, (size_t)H * sizeof(float));
        }
        int from = f->all_logits ? 0 : last ? S - 1 : S;
        if (from < S) {
            float *out = f->all_logits ? f->logits + (size_t)done * c->vocab : f->logits;
            /* a product like any other: on the device where one holds it */
            coli_status st = coli__pass_mm(&b, k.head, b.xn + (size_t)(from - lo) * H, S - from, out);
            if (st != COLI_OK)
                return coli__fail(err, st, "output projection: %s", coli_strerror(st));
        }
        read += b.read;
        done += S;
    }
    if (bytes_read)
        *bytes_read = read;
    return COLI_OK;
}

/* Chunks of the sequences' tokens in their order, a sequence cut where a
 * chunk fills up. Each token's values depend only on its own row and its
 * own cache (docs/formats.md), so sharing a chunk changes no bit. */
coli_status coli__forward_batch(const coli__decoder *d, const coli__seq *q, int n_q, coli__scratch *s,
                                coli__pool *pool, uint64_t *bytes_read, coli__experts_counts *counts,
                                coli__err *err)
{
    const coli__config *c = d->cfg;
    const coli__weights *w = d->w;
    const size_t H = (size_t)c->hidden, V = (size_t)c->vocab;
    const stack k = {0, c->n_trunk, &w->embed, &w->lm_head, w->final_norm};
    const int cap = chunk_cap(d);
    int ends = 0; /* sequences that end in one chunk, at most */
    for (int i = 0; i < n_q; i++)
        ends += q[i].n > 0;
    ends = ends < cap ? ends : cap;
    float *tmp = NULL; /* logits of the chunk's last rows, when more than one */
    if (ends > 1 && !(tmp = malloc((size_t)ends * V * sizeof *tmp)))
        return coli__fail(err, COLI_ENOMEM, "out of memory for the logits of %d sequences", ends);
    coli_status st = COLI_OK;
    uint64_t read = 0;
    int i = 0, off = 0;
    while (st == COLI_OK && i < n_q) {
        coli__seg seg[CHUNK];
        int32_t tok[CHUNK];
        float *dst[CHUNK];
        int n_seg = 0, S = 0, n_out = 0, row[CHUNK];
        for (; i < n_q && S < cap; off = 0, i++) {
            int take = q[i].n - off < cap - S ? q[i].n - off : cap - S;
            if (take <= 0)
                continue;
            seg[n_seg++] = (coli__seg){.kv = q[i].kv, .pos0 = q[i].pos0 + off, .t0 = S, .n = take};
            memcpy(tok + S, q[i].tokens + off, (size_t)take * sizeof *tok);
            S += take;
            if (off + take < q[i].n) { /* the chunk is full: the rest goes in the next */
                off += take;
                break;
            }
            row[n_out] = S - 1;
            dst[n_out++] = q[i].logits;
        }
        if (S == 0)
            break;
        coli__pass b;
        st = chunk_begin(&b, d, s, pool, &k, seg, n_seg, S, 0, counts, err);
        if (st != COLI_OK)
            break;
        embed_rows(&b, &k, tok);
        st = chunk_layers(&b, &k);
        if (st != COLI_OK || n_out == 0) {
            read += b.read;
            continue;
        }
        for (int r = 0; r < n_out; r++)
            coli__rmsnorm(d->cpuk, b.xn + (size_t)r * H, b.x + (size_t)row[r] * H, k.norm, (int)H, c->rms_eps);
        st = coli__pass_mm(&b, k.head, b.xn, n_out, n_out > 1 ? tmp : dst[0]);
        if (st != COLI_OK) {
            st = coli__fail(err, st, "output projection: %s", coli_strerror(st));
            break;
        }
        for (int r = 0; n_out > 1 && r < n_out; r++)
            memcpy(dst[r], tmp + (size_t)r * V, V * sizeof *tmp);
        read += b.read;
    }
    free(tmp);
    if (bytes_read)
        *bytes_read = read;
    return st;
}

coli_status coli__forward(const coli__decoder *d, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                          const int32_t *tokens, int n, int pos0, float *logits, uint64_t *bytes_read,
                          coli__experts_counts *counts, coli__err *err)
{
    const coli__fwd f = {.tokens = tokens, .n = n, .pos0 = pos0, .logits = logits};
    return coli__forward_run(d, kv, s, pool, &f, bytes_read, counts, err);
}
