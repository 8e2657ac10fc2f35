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
    coli_context *c = calloc(1, sizeof *c);
    if (!c)
        return COLI_ENOMEM;
    c->m = m;
    c->opts = opts ? opts->o : m->opts;
    int64_t n_ctx = c->opts.context;
    if (n_ctx <= 0)
        n_ctx = m->cfg.max_pos < 4096 ? m->cfg.max_pos : 4096;
    if (n_ctx > m->cfg.max_pos)
        coli__log(&m->opts.log, COLI_LOG_WARN,
                  "option context: %lld positions exceed the model's max_position_embeddings (%d)",
                  (long long)n_ctx, m->cfg.max_pos);
    coli_status st = coli__pool_create((int)c->opts.threads, &c->pool, &m->err);
    if (st == COLI_OK)
        st = coli__kv_init(&c->kv, &m->cfg, (int)n_ctx, &m->err);
    if (st == COLI_OK && !(c->logits = malloc((size_t)m->cfg.vocab * sizeof(float))))
        st = coli__fail(&m->err, COLI_ENOMEM, "out of memory for the logits of %d tokens", m->cfg.vocab);
    if (st != COLI_OK) {
        coli__log(&m->opts.log, COLI_LOG_ERROR, "%s", m->err.msg);
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

typedef struct gen_text {
    coli__ids ids;
    coli__buf text;
    size_t emitted;
} gen_text;

/* Reports token to the callback with the text it completes. */
static coli_status emit(coli_context *c, gen_text *g, int32_t tok, coli_token_fn fn, void *user, int *stop)
{
    *stop = 0;
    if (!fn)
        return COLI_OK;
    const char *piece = "";
    size_t len = 0;
    if (c->m->tok) {
        if (g->ids.n == g->ids.cap) {
            size_t cap = g->ids.cap ? g->ids.cap * 2 : 64;
            int32_t *v = realloc(g->ids.v, cap * sizeof *v);
            if (!v)
                return coli__fail(&c->err, COLI_ENOMEM, "out of memory");
            g->ids.v = v;
            g->ids.cap = cap;
        }
        g->ids.v[g->ids.n++] = tok;
        /* Decoding the whole continuation keeps decoders that look at
         * neighbours (Metaspace, byte fallback) exact. */
        g->text.n = 0;
        COLI_TRY(coli__tok_decode(c->m->tok, g->ids.v, g->ids.n, 1, &g->text, &c->err));
        size_t ok = stable_prefix(g->text.p, g->text.n);
        if (ok > g->emitted) {
            piece = g->text.p + g->emitted;
            len = ok - g->emitted;
            g->emitted = ok;
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
    gen_text g = {{0}, {0}, 0};
    coli_status st = COLI_OK;
    size_t count = 0;
    for (size_t i = 0; i < max_tokens; i++) {
        int32_t tok;
        st = coli__sample_logits(sampler, c->logits, (size_t)c->m->cfg.vocab, &tok);
        if (st != COLI_OK)
            break;
        if (out && count < cap)
            out[count] = tok;
        count++;
        int stop = 0;
        st = emit(c, &g, tok, on_token, user, &stop);
        if (st != COLI_OK || stop || coli_model_is_eos(c->m, tok))
            break;
        st = coli_eval(c, &tok, 1);
        if (st != COLI_OK)
            break;
    }
    coli__ids_free(&g.ids);
    coli__buf_free(&g.text);
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
