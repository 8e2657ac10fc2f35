/* context.c - KV cache, evaluation, generation and statistics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forward.h"
#include "sampler.h"

struct coli_context {
    coli_model *m;
    coli__err err;
    coli__opts opts;
    coli__pool *pool;
    coli__kv kv;
    coli__scratch scratch;
    size_t pos;
    float *logits;
    int has_logits;
    coli_stats stats;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

COLI_API coli_status coli_context_create(coli_model *m, const coli_options *opts, coli_context **out)
{
    if (!out)
        return COLI_EINVAL;
    *out = NULL;
    if (!m)
        return COLI_EINVAL;
    if (!m->ok)
        return COLI_ESTATE;
    coli__err *err = coli__model_err(m);
    coli_context *c = calloc(1, sizeof *c);
    if (!c)
        return coli__fail(err, COLI_ENOMEM, "out of memory for a context");
    c->m = m;
    c->opts = opts ? opts->o : m->opts;
    int64_t n_ctx = c->opts.context;
    if (n_ctx <= 0)
        n_ctx = m->cfg.max_pos < 4096 ? m->cfg.max_pos : 4096;
    if (n_ctx > m->cfg.max_pos)
        coli__log(&m->opts.log, COLI_LOG_WARN,
                  "option context: %lld positions exceed the model's max_position_embeddings (%d)",
                  (long long)n_ctx, m->cfg.max_pos);
    coli_status st = coli__pool_create((int)c->opts.threads, &c->pool, err);
    if (st == COLI_OK)
        st = coli__kv_init(&c->kv, &m->cfg, (int)n_ctx, err);
    if (st == COLI_OK && !(c->logits = malloc((size_t)m->cfg.vocab * sizeof(float))))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for the logits of %d tokens", m->cfg.vocab);
    if (st != COLI_OK) {
        coli__log(&m->opts.log, COLI_LOG_ERROR, "%s", err->msg);
        coli_context_free(c);
        return st;
    }
    *out = c;
    return COLI_OK;
}

COLI_API void coli_context_free(coli_context *c)
{
    if (!c)
        return;
    coli__pool_free(c->pool);
    coli__kv_free(&c->kv);
    coli__scratch_free(&c->scratch);
    free(c->logits);
    free(c);
}

COLI_API const char *coli_context_errmsg(const coli_context *c)
{
    return c ? c->err.msg : "context handle is NULL";
}

static coli_status ctx_fail(coli_context *c, coli_status st)
{
    coli__log(&c->opts.log, COLI_LOG_ERROR, "%s", c->err.msg);
    return st;
}

COLI_API coli_status coli_eval(coli_context *c, const int32_t *tokens, size_t n)
{
    if (!c)
        return COLI_EINVAL;
    coli__err_clear(&c->err);
    if (n == 0)
        return COLI_OK;
    if (!tokens)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_eval: tokens is NULL"));
    int vocab = c->m->cfg.vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL,
                                          "coli_eval: token id %ld at index %zu is outside the vocabulary [0, %d)",
                                          (long)tokens[i], i, vocab));
    if (n > (size_t)c->kv.n_ctx - c->pos)
        return ctx_fail(c, coli__fail(&c->err, COLI_ENOSPC,
                                      "coli_eval: %zu tokens at position %zu exceed the context of %d positions",
                                      n, c->pos, c->kv.n_ctx));
    double t0 = now_s();
    uint64_t read = 0;
    coli_status st = coli__forward(c->m, &c->kv, &c->scratch, c->pool, tokens, (int)n, (int)c->pos,
                                   c->logits, &read, &c->err);
    double dt = now_s() - t0;
    if (st != COLI_OK) {
        /* Positions written partly are forgotten; earlier ones stay valid. */
        c->has_logits = 0;
        return ctx_fail(c, st);
    }
    c->pos += n;
    c->has_logits = 1;
    if (n > 1) {
        c->stats.prefill_tokens += n;
        c->stats.prefill_seconds += dt;
    } else {
        c->stats.decode_tokens += n;
        c->stats.decode_seconds += dt;
        c->stats.decode_weight_bytes += read;
    }
    return COLI_OK;
}

COLI_API const float *coli_context_logits(const coli_context *c)
{
    return c && c->has_logits ? c->logits : NULL;
}

COLI_API size_t coli_context_position(const coli_context *c)
{
    return c ? c->pos : 0;
}

COLI_API size_t coli_context_capacity(const coli_context *c)
{
    return c ? (size_t)c->kv.n_ctx : 0;
}

COLI_API coli_status coli_context_truncate(coli_context *c, size_t n)
{
    if (!c)
        return COLI_EINVAL;
    if (n > c->pos)
        return ctx_fail(c, coli__fail(&c->err, COLI_ERANGE,
                                      "coli_context_truncate: %zu is beyond the position %zu", n, c->pos));
    if (n < c->pos)
        c->has_logits = 0;
    c->pos = n;
    return COLI_OK;
}

COLI_API void coli_context_reset(coli_context *c)
{
    if (c) {
        c->pos = 0;
        c->has_logits = 0;
    }
}

COLI_API coli_status coli_sample(coli_sampler *s, const coli_context *c, int32_t *token)
{
    if (!s || !c || !token)
        return COLI_EINVAL;
    if (!c->has_logits)
        return COLI_ESTATE;
    return coli__sample_logits(s, c->logits, (size_t)c->m->cfg.vocab, token);
}

/* Length of the longest prefix of s[0..n) that does not end inside an
 * unfinished UTF-8 sequence or in a replacement character standing for one. */
static size_t stable_prefix(const char *s, size_t n)
{
    size_t i = n;
    /* A trailing U+FFFD may become a real character once more bytes come. */
    while (i >= 3 && (unsigned char)s[i - 3] == 0xEF && (unsigned char)s[i - 2] == 0xBF &&
           (unsigned char)s[i - 1] == 0xBD)
        i -= 3;
    size_t j = i, back = 0;
    while (j > 0 && back < 4 && ((unsigned char)s[j - 1] & 0xC0) == 0x80) {
        j--;
        back++;
    }
    if (j > 0) {
        unsigned char lead = (unsigned char)s[j - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (need > back + 1)
            return j - 1;
    }
    return i;
}

/* Streaming text: the generated tokens are decoded together with a few
 * tokens before them, so that decoders which look at neighbours (Metaspace
 * spaces, byte fallback) give the same text as decoding the whole sequence;
 * only text that later tokens cannot change is reported. */
#define STREAM_CTX 4

typedef struct gen_text {
    coli__ids ids;   /* up to STREAM_CTX prompt tokens, then the generated ones */
    size_t base;     /* ids[base..] hold text not yet wholly reported */
    size_t done;     /* bytes of that text already reported */
    coli__buf prev, full;
} gen_text;

static coli_status push_id(coli_context *c, coli__ids *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return coli__fail(&c->err, COLI_ENOMEM, "out of memory streaming generated text");
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return COLI_OK;
}

/* Reports token to the callback with the text it completes; final: no
 * token follows, so everything left is reported. */
static coli_status emit(coli_context *c, gen_text *g, int32_t tok, int final, coli_token_fn fn, void *user,
                        int *stop)
{
    *stop = 0;
    if (!fn)
        return COLI_OK;
    const char *piece = "";
    size_t len = 0;
    const coli__tokenizer *tk = c->m->tok;
    if (tk) {
        COLI_TRY(push_id(c, &g->ids, tok));
        size_t ctx = g->base > STREAM_CTX ? g->base - STREAM_CTX : 0;
        g->prev.n = g->full.n = 0;
        COLI_TRY(coli__tok_decode(tk, g->ids.v + ctx, g->base - ctx, 1, &g->prev, &c->err));
        COLI_TRY(coli__tok_decode(tk, g->ids.v + ctx, g->ids.n - ctx, 1, &g->full, &c->err));
        size_t skip = 0;
        while (skip < g->prev.n && skip < g->full.n && g->prev.p[skip] == g->full.p[skip])
            skip++;
        const char *text = g->full.p ? g->full.p + skip : "";
        size_t n = g->full.n - skip;
        /* A trailing byte-fallback token may join the next ones into one
         * character (or into U+FFFD): hold its text back. */
        int open = !final && coli__tok_is_byte(tk, tok);
        size_t ok = final ? n : open ? g->done : stable_prefix(text, n);
        if (ok > g->done) {
            piece = text + g->done;
            len = ok - g->done;
            g->done = ok;
        }
        if (!open && ok == n) { /* everything so far is settled */
            g->base = g->ids.n;
            g->done = 0;
        }
    }
    *stop = fn(user, tok, piece, len) != 0;
    return COLI_OK;
}

COLI_API coli_status coli_generate(coli_context *c, const int32_t *prompt, size_t n_prompt,
                                   size_t max_tokens, coli_sampler *sampler, coli_token_fn on_token,
                                   void *user, int32_t *out, size_t cap, size_t *n_out)
{
    if (!c)
        return COLI_EINVAL;
    if (n_out)
        *n_out = 0;
    if (!sampler)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_generate: sampler is NULL"));
    COLI_TRY(coli_eval(c, prompt, n_prompt));
    if (!c->has_logits)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL,
                                      "coli_generate: empty prompt and no evaluated position to continue"));
    gen_text g = {{0}, 0, 0, {0}, {0}};
    coli_status st = COLI_OK;
    size_t count = 0;
    /* the last prompt tokens give the decoders their left context */
    for (size_t i = n_prompt > STREAM_CTX ? n_prompt - STREAM_CTX : 0; i < n_prompt && st == COLI_OK; i++)
        st = push_id(c, &g.ids, prompt[i]);
    g.base = g.ids.n;
    for (size_t i = 0; i < max_tokens && st == COLI_OK; i++) {
        int32_t tok;
        st = coli__sample_logits(sampler, c->logits, (size_t)c->m->cfg.vocab, &tok);
        if (st != COLI_OK) {
            coli__fail(&c->err, st, "coli_generate: sampling failed: %s", coli_strerror(st));
            break;
        }
        if (out && count < cap)
            out[count] = tok;
        count++;
        int stop = 0, eos = coli_model_is_eos(c->m, tok);
        st = emit(c, &g, tok, eos || i + 1 == max_tokens, on_token, user, &stop);
        if (st != COLI_OK || stop || eos)
            break;
        st = coli_eval(c, &tok, 1);
        if (st != COLI_OK)
            break;
    }
    coli__ids_free(&g.ids);
    coli__buf_free(&g.prev);
    coli__buf_free(&g.full);
    if (n_out)
        *n_out = count;
    return st;
}

COLI_API coli_status coli_context_stats(const coli_context *c, coli_stats *s)
{
    if (!c || !s)
        return COLI_EINVAL;
    *s = c->stats;
    s->prefill_tok_s = s->prefill_seconds > 0 ? (double)s->prefill_tokens / s->prefill_seconds : 0;
    s->decode_tok_s = s->decode_seconds > 0 ? (double)s->decode_tokens / s->decode_seconds : 0;
    return COLI_OK;
}

COLI_API void coli_context_stats_reset(coli_context *c)
{
    if (c)
        memset(&c->stats, 0, sizeof c->stats);
}
