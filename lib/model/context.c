/* context.c - KV cache, evaluation, generation and statistics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sized.h"
#include "model/device.h"
#include "model/finite.h"
#include "model/forward.h"
#include "model/sampler.h"

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
    coli__experts_counts gpu_counts;
    coli__device_ctx *dev; /* the layers on a device; NULL: on the CPU */
    int32_t *hist;         /* with dev: every token evaluated, to rebuild the CPU's cache */
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
    int64_t n_ctx = coli__kv_positions(&m->cfg, c->opts.context);
    coli_status st = coli__kv_type_pick(c->opts.kv_type, &c->opts.kv_type, err);
    if (st == COLI_OK)
        st = coli__pool_create((int)c->opts.threads, &c->pool, err);
    if (st == COLI_OK)
        st = coli__kv_init(&c->kv, &m->cfg, (int)n_ctx, coli__kv_dtype(c->opts.kv_type), err);
    if (st == COLI_OK && !(c->logits = malloc((size_t)m->cfg.vocab * sizeof(float))))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for the logits of %d tokens", m->cfg.vocab);
    if (st == COLI_OK)
        st = coli__device_ctx_create(m, (int)n_ctx, c->kv.dt == COLI_DT_BF16, &c->dev, err);
    if (st == COLI_OK && c->dev && !(c->hist = malloc((size_t)n_ctx * sizeof *c->hist)))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for a context's token history");
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
    coli__device_ctx_free(c->dev);
    free(c->hist);
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

/* The device's step, or the CPU's. A device that fails hands the context
 * to the CPU for good: the history is evaluated there first to rebuild the
 * CPU's cache, which gives the same bits as the device's. */
static coli_status run(coli_context *c, const int32_t *tokens, size_t n, uint64_t *read)
{
    if (c->dev) {
        coli_status st = coli__device_forward(c->dev, c->pool, tokens, (int)n, (int)c->pos, c->logits,
                                              &c->gpu_counts, &c->err);
        if (st == COLI_OK) {
            memcpy(c->hist + c->pos, tokens, n * sizeof *tokens);
            return COLI_OK;
        }
        coli__log(&c->opts.log, COLI_LOG_WARN, "GPU: a step on the device failed (%s); this context continues on "
                  "the CPU, re-reading its %zu tokens", c->err.msg, c->pos);
        coli__device_ctx_free(c->dev);
        c->dev = NULL;
        coli__err_clear(&c->err);
        if (c->pos > 0) {
            uint64_t r = 0;
            COLI_TRY(coli__forward(c->m, &c->kv, &c->scratch, c->pool, c->hist, (int)c->pos, 0, c->logits, &r,
                                   &c->gpu_counts, &c->err));
        }
    }
    return coli__forward(c->m, &c->kv, &c->scratch, c->pool, tokens, (int)n, (int)c->pos, c->logits, read,
                         &c->gpu_counts, &c->err);
}

/* Runs n tokens; prefill says how the statistics count them (a prompt is
 * prefill even when it is one token long). */
static coli_status eval_tokens(coli_context *c, const int32_t *tokens, size_t n, int prefill)
{
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
                                      "the context is full: %zu tokens asked for at position %zu, but it has %d "
                                      "positions (%zu free)",
                                      n, c->pos, c->kv.n_ctx, (size_t)c->kv.n_ctx - c->pos));
    double t0 = now_s();
    uint64_t read = 0;
    coli_status st = run(c, tokens, n, &read);
    double dt = now_s() - t0;
    if (st != COLI_OK) {
        /* Positions written partly are forgotten; earlier ones stay valid. */
        c->has_logits = 0;
        return ctx_fail(c, st);
    }
    /* Overflowing weights or activations: a NaN or infinity is no token. */
    size_t bad = coli__first_nonfinite(COLI_DT_F32, c->logits, (size_t)vocab);
    if (bad < (size_t)vocab) {
        c->has_logits = 0;
        return ctx_fail(c, coli__fail(&c->err, COLI_ERANGE,
                                      "coli_eval: non-finite logit at position %zu (token id %zu: %g)",
                                      c->pos + n - 1, bad, (double)c->logits[bad]));
    }
    c->pos += n;
    c->has_logits = 1;
    if (prefill) {
        c->stats.prefill_tokens += n;
        c->stats.prefill_seconds += dt;
    } else {
        c->stats.decode_tokens += n;
        c->stats.decode_seconds += dt;
        c->stats.decode_weight_bytes += read;
    }
    return COLI_OK;
}

COLI_API coli_status coli_eval(coli_context *c, const int32_t *tokens, size_t n)
{
    if (!c)
        return COLI_EINVAL;
    return eval_tokens(c, tokens, n, n > 1);
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
    coli__err err;
    return coli__sample_logits(s, c->logits, (size_t)c->m->cfg.vocab, token, &err);
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
    /* stop strings */
    const char *const *stop;
    size_t n_stop;
    coli__buf held;  /* decoded text not yet reported: it may begin a stop string */
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

/* Position of the first occurrence of any stop string in s[0..n), or n. */
static size_t find_stop(const gen_text *g, const char *s, size_t n)
{
    size_t best = n;
    for (size_t k = 0; k < g->n_stop; k++) {
        size_t m = strlen(g->stop[k]);
        for (size_t i = 0; m > 0 && i + m <= n && i < best; i++)
            if (memcmp(s + i, g->stop[k], m) == 0) {
                best = i;
                break;
            }
    }
    return best;
}

/* Length of the longest tail of s[0..n) that is a proper prefix of a stop
 * string: text that later tokens may turn into a stop. */
static size_t stop_tail(const gen_text *g, const char *s, size_t n)
{
    size_t best = 0;
    for (size_t k = 0; k < g->n_stop; k++) {
        size_t m = strlen(g->stop[k]);
        for (size_t t = m > n + 1 ? n : m - 1; t > best; t--)
            if (memcmp(s + n - t, g->stop[k], t) == 0) {
                best = t;
                break;
            }
    }
    return best;
}

/* Passes new text through the stop strings: out and out_len receive what
 * may be reported now; *hit is set when a stop string was reached. */
static coli_status stop_filter(coli_context *c, gen_text *g, const char *piece, size_t len, int final,
                               const char **out, size_t *out_len, int *hit)
{
    *hit = 0;
    if (g->n_stop == 0) {
        *out = piece;
        *out_len = len;
        return COLI_OK;
    }
    /* held keeps only a few bytes: reported text is dropped after each call */
    if (g->held.n + len + 1 > g->held.cap) {
        size_t cap = 2 * (g->held.n + len + 1);
        char *p = realloc(g->held.p, cap);
        if (!p)
            return coli__fail(&c->err, COLI_ENOMEM, "out of memory checking stop strings");
        g->held.p = p;
        g->held.cap = cap;
    }
    if (len)
        memcpy(g->held.p + g->held.n, piece, len);
    g->held.n += len;
    const char *h = g->held.p ? g->held.p : "";
    size_t n = g->held.n, at = find_stop(g, h, n);
    size_t give = at < n ? at : final ? n : n - stop_tail(g, h, n);
    *hit = at < n;
    *out = h;
    *out_len = give;
    return COLI_OK;
}

/* Drops the reported head of held (after the callback has seen it). */
static void stop_consume(gen_text *g, size_t n)
{
    if (g->n_stop == 0 || n == 0)
        return;
    memmove(g->held.p, g->held.p + n, g->held.n - n);
    g->held.n -= n;
}

/* Reports token to the callback with the text it completes; final: no
 * token follows, so everything left is reported. *hit: a stop string was
 * reached (the text before it has been reported). */
static coli_status emit(coli_context *c, gen_text *g, int32_t tok, int final, coli_token_fn fn, void *user,
                        int *stop, int *hit)
{
    *stop = 0;
    *hit = 0;
    if (!fn && g->n_stop == 0)
        return COLI_OK;
    const char *piece = "";
    size_t len = 0;
    const coli__tokenizer *tk = c->m->tok;
    /* ids past the tokenizer's vocabulary (padding) have no text */
    if (tk && (size_t)tok < coli__tok_vocab_size(tk)) {
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
    const char *text = "";
    size_t n = 0;
    COLI_TRY(stop_filter(c, g, piece, len, final, &text, &n, hit));
    if (fn)
        *stop = fn(user, tok, n ? text : "", n) != 0;
    stop_consume(g, n);
    return COLI_OK;
}

COLI_API const char *coli_stop_reason_name(coli_stop_reason r)
{
    switch (r) {
    case COLI_STOP_EOS: return "eos";
    case COLI_STOP_LENGTH: return "length";
    case COLI_STOP_CONTEXT: return "context";
    case COLI_STOP_STRING: return "stop";
    case COLI_STOP_CALLBACK: return "callback";
    default: return "none";
    }
}

COLI_API void coli_generate_params_init(coli_generate_params *p, size_t struct_size)
{
    coli_generate_params d;
    memset(&d, 0, sizeof d);
    d.max_tokens = 64;
    coli__sized_init(p, &d, sizeof d, struct_size);
}

/* The first version of coli_generate_params is the whole of this one. */
#define COLI__GENERATE_PARAMS_V1 (offsetof(coli_generate_params, user) + sizeof(void *))

COLI_API coli_status coli_generate(coli_context *c, const int32_t *prompt, size_t n_prompt, coli_sampler *sampler,
                                   const coli_generate_params *params_in, int32_t *out, size_t cap, size_t *n_out,
                                   coli_stop_reason *reason)
{
    if (n_out)
        *n_out = 0;
    if (reason)
        *reason = COLI_STOP_NONE;
    if (!c)
        return COLI_EINVAL;
    coli__err_clear(&c->err);
    if (!sampler)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_generate: sampler is NULL"));
    if (!params_in)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_generate: params is NULL"));
    coli_generate_params pv;
    coli_generate_params_init(&pv, sizeof pv);
    coli_status pst = coli__sized_in(&pv, params_in, sizeof pv, COLI__GENERATE_PARAMS_V1, "coli_generate_params",
                                     &c->err);
    if (pst != COLI_OK)
        return ctx_fail(c, pst);
    const coli_generate_params *params = &pv;
    if (params->n_stop && !params->stop)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_generate: n_stop is %zu but stop is NULL",
                                      params->n_stop));
    for (size_t k = 0; k < params->n_stop; k++)
        if (!params->stop[k] || !params->stop[k][0])
            return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL, "coli_generate: stop string %zu is %s", k,
                                          params->stop[k] ? "empty" : "NULL"));
    COLI_TRY(eval_tokens(c, prompt, n_prompt, 1));
    if (!c->has_logits)
        return ctx_fail(c, coli__fail(&c->err, COLI_EINVAL,
                                      "coli_generate: empty prompt and no evaluated position to continue"));
    COLI_TRY(coli_sampler_accept(sampler, prompt, n_prompt));
    gen_text g;
    memset(&g, 0, sizeof g);
    g.stop = params->stop;
    g.n_stop = params->n_stop;
    coli_status st = COLI_OK;
    coli_stop_reason why = COLI_STOP_LENGTH;
    size_t count = 0, max_tokens = params->max_tokens;
    /* the last prompt tokens give the decoders their left context */
    for (size_t i = n_prompt > STREAM_CTX ? n_prompt - STREAM_CTX : 0; i < n_prompt && st == COLI_OK; i++)
        st = push_id(c, &g.ids, prompt[i]);
    g.base = g.ids.n;
    for (size_t i = 0; i < max_tokens && st == COLI_OK; i++) {
        int32_t tok;
        st = coli__sample_logits(sampler, c->logits, (size_t)c->m->cfg.vocab, &tok, &c->err);
        if (st != COLI_OK)
            break;
        if (out && count < cap)
            out[count] = tok;
        count++;
        int eos = !params->ignore_eos && coli_model_is_eos(c->m, tok);
        int full = c->pos >= (size_t)c->kv.n_ctx; /* no room to evaluate tok */
        int last = i + 1 == max_tokens;
        int stop = 0, hit = 0;
        st = emit(c, &g, tok, eos || full || last, params->on_token, params->user, &stop, &hit);
        if (st != COLI_OK)
            break;
        if (hit || stop || eos || (full && !last)) {
            why = hit ? COLI_STOP_STRING : stop ? COLI_STOP_CALLBACK : eos ? COLI_STOP_EOS : COLI_STOP_CONTEXT;
            break;
        }
        if (full)
            break; /* the length is reached too: LENGTH, tok is not evaluated */
        /* the last token is evaluated too, so that a later call continues */
        st = eval_tokens(c, &tok, 1, 0);
    }
    coli__ids_free(&g.ids);
    coli__buf_free(&g.prev);
    coli__buf_free(&g.full);
    coli__buf_free(&g.held);
    if (n_out)
        *n_out = count;
    if (st != COLI_OK)
        return ctx_fail(c, st);
    if (reason)
        *reason = why;
    return COLI_OK;
}

COLI_API coli_status coli_context_stats(const coli_context *c, coli_stats *s)
{
    if (!c || !coli__sized_out_ok(s))
        return COLI_EINVAL;
    coli_stats full = c->stats;
    full.prefill_tok_s = full.prefill_seconds > 0 ? (double)full.prefill_tokens / full.prefill_seconds : 0;
    full.decode_tok_s = full.decode_seconds > 0 ? (double)full.decode_tokens / full.decode_seconds : 0;
    full.context_positions = (uint64_t)c->kv.n_ctx;
    full.context_used = c->pos;
    full.kv_bytes = coli__kv_bytes_per_pos(&c->m->cfg, c->kv.dt) * (uint64_t)c->kv.n_ctx;
    coli__sized_out(s, &full, sizeof full);
    return COLI_OK;
}

COLI_API void coli_context_stats_reset(coli_context *c)
{
    if (c) {
        memset(&c->stats, 0, sizeof c->stats);
        memset(&c->gpu_counts, 0, sizeof c->gpu_counts);
    }
}

COLI_API coli_status coli_context_gpu_stats(const coli_context *c, int device, coli_gpu_stats *s)
{
    if (!c)
        return COLI_EINVAL;
    if (!coli__sized_out_ok(s))
        return COLI_EINVAL;
    coli_gpu_stats full;
    memset(&full, 0, sizeof full);
    full.struct_size = sizeof full;
    COLI_TRY(coli__experts_dev_stats(c->m, device, &c->gpu_counts, &full));
    coli__device_ctx_stats(c->dev, device, &full);
    coli__sized_out(s, &full, sizeof full);
    return COLI_OK;
}
