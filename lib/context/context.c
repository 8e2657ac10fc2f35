/* context.c - KV cache, evaluation, generation and statistics. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sized.h"
#include "context/context.h"
#include "context/step.h"
#include "model/finite.h"
#include "context/sampler.h"
#include "context/speculate.h"
#include "context/textstream.h"

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
    c->core.m = m;
    c->opts = opts ? opts->o : m->opts;
    c->core.log = &c->opts.log;
    int64_t n_ctx = coli__kv_positions(&m->cfg, c->opts.context);
    coli_status st = coli__kv_type_pick(c->opts.kv_type, &c->opts.kv_type, err);
    if (st == COLI_OK)
        st = coli__pool_create((int)c->opts.threads, &c->core.pool, err);
    if (st == COLI_OK)
        st = coli__kv_init(&c->core.kv, &m->cfg, (int)n_ctx, coli__kv_dtype(c->opts.kv_type), err);
    if (st == COLI_OK && !(c->core.logits = malloc((size_t)m->cfg.vocab * sizeof(float))))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for the logits of %d tokens", m->cfg.vocab);
    if (st == COLI_OK)
        st = coli__device_ctx_create(m, (int)n_ctx, c->core.kv.dt == COLI_DT_BF16, &c->core.dev, err);
    if (st == COLI_OK && (c->core.dev || c->opts.mtp > 0) &&
        !(c->core.hist = malloc((size_t)n_ctx * sizeof *c->core.hist)))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for a context's token history");
    if (st == COLI_OK && c->opts.mtp > 0) {
        st = coli__mtp_create(&c->core, (int)c->opts.mtp, (int)c->opts.mtp_guard);
        if (st != COLI_OK)
            coli__fail(err, st, "%s", c->core.err.msg);
    }
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
    coli__device_ctx_free(c->core.dev);
    coli__mtp_free(c->core.mtp);
    free(c->core.hist);
    coli__pool_free(c->core.pool);
    coli__kv_free(&c->core.kv);
    coli__scratch_free(&c->core.scratch);
    free(c->core.logits);
    free(c);
}

COLI_API const char *coli_context_errmsg(const coli_context *c)
{
    return c ? c->core.err.msg : "context handle is NULL";
}

static coli_status ctx_fail(coli_context *c, coli_status st)
{
    coli__log(&c->opts.log, COLI_LOG_ERROR, "%s", c->core.err.msg);
    return st;
}

static coli_status run(coli_context *c, const int32_t *tokens, size_t n, uint64_t *read)
{
    if (c->core.mtp)
        return coli__mtp_eval(&c->core, tokens, n, read);
    const coli__fwd f = {.tokens = tokens, .n = (int)n, .pos0 = (int)c->core.pos, .logits = c->core.logits};
    return coli__ctx_forward(&c->core, &f, read, NULL);
}

/* Runs n tokens; prefill says how the statistics count them (a prompt is
 * prefill even when it is one token long). */
static coli_status eval_tokens(coli_context *c, const int32_t *tokens, size_t n, int prefill)
{
    coli__err_clear(&c->core.err);
    if (n == 0)
        return COLI_OK;
    if (!tokens)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_eval: tokens is NULL"));
    int vocab = c->core.m->cfg.vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL,
                                          "coli_eval: token id %ld at index %zu is outside the vocabulary [0, %d)",
                                          (long)tokens[i], i, vocab));
    if (n > (size_t)c->core.kv.n_ctx - c->core.pos)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_ENOSPC,
                                      "the context is full: %zu tokens asked for at position %zu, but it has %d "
                                      "positions (%zu free)",
                                      n, c->core.pos, c->core.kv.n_ctx, (size_t)c->core.kv.n_ctx - c->core.pos));
    double t0 = now_s();
    uint64_t read = 0;
    coli_status st = run(c, tokens, n, &read);
    double dt = now_s() - t0;
    if (st != COLI_OK) {
        /* Positions written partly are forgotten; earlier ones stay valid. */
        c->core.has_logits = 0;
        coli__mtp_truncate(&c->core, c->core.pos);
        return ctx_fail(c, st);
    }
    /* Overflowing weights or activations: a NaN or infinity is no token. */
    size_t bad = coli__first_nonfinite(COLI_DT_F32, c->core.logits, (size_t)vocab);
    if (bad < (size_t)vocab) {
        c->core.has_logits = 0;
        coli__mtp_truncate(&c->core, c->core.pos);
        return ctx_fail(c, coli__fail(&c->core.err, COLI_ERANGE,
                                      "coli_eval: non-finite logit at position %zu (token id %zu: %g)",
                                      c->core.pos + n - 1, bad, (double)c->core.logits[bad]));
    }
    c->core.pos += n;
    c->core.has_logits = 1;
    if (prefill) {
        c->core.stats.prefill_tokens += n;
        c->core.stats.prefill_seconds += dt;
    } else {
        c->core.stats.decode_tokens += n;
        c->core.stats.decode_seconds += dt;
        c->core.stats.decode_weight_bytes += read;
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
    return c && c->core.has_logits ? c->core.logits : NULL;
}

COLI_API size_t coli_context_position(const coli_context *c)
{
    return c ? c->core.pos : 0;
}

COLI_API size_t coli_context_capacity(const coli_context *c)
{
    return c ? (size_t)c->core.kv.n_ctx : 0;
}

COLI_API coli_status coli_context_truncate(coli_context *c, size_t n)
{
    if (!c)
        return COLI_EINVAL;
    if (n > c->core.pos)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_ERANGE,
                                      "coli_context_truncate: %zu is beyond the position %zu", n, c->core.pos));
    if (n < c->core.pos)
        c->core.has_logits = 0;
    c->core.pos = n;
    coli__mtp_truncate(&c->core, n);
    return COLI_OK;
}

COLI_API void coli_context_reset(coli_context *c)
{
    if (c) {
        c->core.pos = 0;
        c->core.has_logits = 0;
        coli__mtp_truncate(&c->core, 0);
    }
}

COLI_API coli_status coli_sample(coli_sampler *s, const coli_context *c, int32_t *token)
{
    if (!s || !c || !token)
        return COLI_EINVAL;
    if (!c->core.has_logits)
        return COLI_ESTATE;
    coli__err err;
    return coli__sample_logits(s, c->core.logits, (size_t)c->core.m->cfg.vocab, token, &err);
}

/* Reports tok to the callback with the text it completes; final: no
 * token follows, so everything left is reported. *hit: a stop string was
 * reached (the text before it has been reported). */
static coli_status emit(coli_context *c, coli__textstream *g, int32_t tok, int final, coli_token_fn fn, void *user,
                        int *stop, int *hit)
{
    *stop = 0;
    *hit = 0;
    if (!fn && g->n_stop == 0)
        return COLI_OK;
    const char *text = "";
    size_t n = 0;
    COLI_TRY(coli__ts_push(g, tok, final, &text, &n, hit, &c->core.err));
    if (fn)
        *stop = fn(user, tok, n ? text : "", n) != 0;
    coli__ts_consume(g, n);
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

/* One call of coli_generate: what its steps share. */
typedef struct gen_run {
    coli_context *c;
    coli__textstream *g;
    const coli_generate_params *p;
    coli_sampler *sampler;
    int32_t *out;
    size_t cap, count, max;
    coli_stop_reason why;
} gen_run;

/* After a token: generation goes on (the token is evaluated next), ends
 * once the token is evaluated (the length is reached: a later call
 * continues from it), or ends there. */
enum { GEN_ON, GEN_EVAL_END, GEN_END };

/* Samples the token that follows logits, records and reports it; at: the
 * position it would be evaluated at. *next: a GEN_ value. */
static coli_status take(gen_run *r, const float *logits, size_t at, int32_t *tok, int *next)
{
    coli_context *c = r->c;
    COLI_TRY(coli__sample_logits(r->sampler, logits, (size_t)c->core.m->cfg.vocab, tok, &c->core.err));
    if (r->out && r->count < r->cap)
        r->out[r->count] = *tok;
    r->count++;
    int eos = !r->p->ignore_eos && coli_model_is_eos(c->core.m, *tok);
    int full = at >= (size_t)c->core.kv.n_ctx; /* no room to evaluate tok */
    int last = r->count == r->max;
    int stop = 0, hit = 0;
    COLI_TRY(emit(c, r->g, *tok, eos || full || last, r->p->on_token, r->p->user, &stop, &hit));
    *next = GEN_ON;
    if (hit || stop || eos || (full && !last)) {
        r->why = hit ? COLI_STOP_STRING : stop ? COLI_STOP_CALLBACK : eos ? COLI_STOP_EOS : COLI_STOP_CONTEXT;
        *next = GEN_END;
    } else if (full) {
        *next = GEN_END; /* the length is reached too: LENGTH, tok is not evaluated */
    } else if (last) {
        *next = GEN_EVAL_END;
    }
    return COLI_OK;
}

/* A step of multi-token prediction after tok (sampled, not evaluated): k
 * drafts, one pass of the decoder over tok and them, then a token sampled
 * from each position's logits as long as it is the draft that position
 * took as input. So the tokens are those of one step at a time, with the
 * sampler drawing in the same order: for a greedy draft this is the
 * speculative sampling rule (accept with the target's probability of the
 * draft, else a token from the rest), and the output does not change
 * (docs/formats.md, "Multi-token prediction"). */
static coli_status spec_step(gen_run *r, int32_t *tok, int k, int *next)
{
    coli_context *c = r->c;
    double t0 = now_s();
    uint64_t read = 0;
    COLI_TRY(coli__mtp_propose(&c->core, *tok, k, &read));
    coli_status st = COLI_OK;
    int j = 0;
    for (;; j++) {
        st = take(r, coli__mtp_logits(&c->core, j), c->core.pos + (size_t)j + 1, tok, next);
        if (st != COLI_OK || *next != GEN_ON || j == k || *tok != coli__mtp_draft(&c->core, j + 1))
            break;
    }
    double dt = now_s() - t0;
    coli__mtp_commit(&c->core, j, dt);
    c->core.stats.decode_tokens += (uint64_t)j + 1;
    c->core.stats.decode_seconds += dt;
    c->core.stats.decode_weight_bytes += read;
    return st;
}

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
    coli__err_clear(&c->core.err);
    if (!sampler)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_generate: sampler is NULL"));
    if (!params_in)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_generate: params is NULL"));
    coli_generate_params pv;
    coli_generate_params_init(&pv, sizeof pv);
    coli_status pst = coli__sized_in(&pv, params_in, sizeof pv, COLI__GENERATE_PARAMS_V1, "coli_generate_params",
                                     &c->core.err);
    if (pst != COLI_OK)
        return ctx_fail(c, pst);
    const coli_generate_params *params = &pv;
    if (params->n_stop && !params->stop)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_generate: n_stop is %zu but stop is NULL",
                                      params->n_stop));
    for (size_t k = 0; k < params->n_stop; k++)
        if (!params->stop[k] || !params->stop[k][0])
            return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_generate: stop string %zu is %s", k,
                                          params->stop[k] ? "empty" : "NULL"));
    COLI_TRY(eval_tokens(c, prompt, n_prompt, 1));
    if (!c->core.has_logits)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL,
                                      "coli_generate: empty prompt and no evaluated position to continue"));
    COLI_TRY(coli_sampler_accept(sampler, prompt, n_prompt));
    coli__textstream g;
    /* the last prompt tokens give the decoders their left context */
    coli_status st = coli__ts_init(&g, c->core.m->tok, prompt, n_prompt, params->stop, params->n_stop, &c->core.err);
    gen_run r = {.c = c, .g = &g, .p = params, .sampler = sampler, .out = out, .cap = cap,
                 .max = params->max_tokens, .why = COLI_STOP_LENGTH};
    int32_t tok = 0;
    int next = r.max ? GEN_ON : GEN_END;
    if (st == COLI_OK && next == GEN_ON)
        st = take(&r, c->core.logits, c->core.pos, &tok, &next);
    while (st == COLI_OK && next != GEN_END) {
        int k = 0;
        if (c->core.mtp && next == GEN_ON) {
            /* room to evaluate every draft, and no more drafts than tokens wanted */
            size_t most = (size_t)c->core.kv.n_ctx - c->core.pos - 1, want = r.max - r.count - 1;
            most = most < want ? most : want;
            k = coli__mtp_plan(&c->core, most < COLI__MTP_MAX ? (int)most : COLI__MTP_MAX);
        }
        if (k > 0) {
            st = spec_step(&r, &tok, k, &next);
            continue;
        }
        /* the last token is evaluated too, so that a later call continues */
        double t0 = now_s();
        st = eval_tokens(c, &tok, 1, 0);
        if (st != COLI_OK || next == GEN_EVAL_END)
            break;
        if (c->core.mtp)
            coli__mtp_note_plain(&c->core, now_s() - t0);
        st = take(&r, c->core.logits, c->core.pos, &tok, &next);
    }
    size_t count = r.count;
    coli_stop_reason why = r.why;
    coli__ts_free(&g);
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
    coli_stats full = c->core.stats;
    full.prefill_tok_s = full.prefill_seconds > 0 ? (double)full.prefill_tokens / full.prefill_seconds : 0;
    full.decode_tok_s = full.decode_seconds > 0 ? (double)full.decode_tokens / full.decode_seconds : 0;
    full.context_positions = (uint64_t)c->core.kv.n_ctx;
    full.context_used = c->core.pos;
    full.kv_bytes = coli__kv_bytes_per_pos(&c->core.m->cfg, c->core.kv.dt) * (uint64_t)c->core.kv.n_ctx;
    full.mtp_accept_rate = full.mtp_drafted ? (double)full.mtp_accepted / (double)full.mtp_drafted : 0;
    full.mtp_tokens_per_step = full.mtp_steps ? (double)full.mtp_tokens / (double)full.mtp_steps : 0;
    full.mtp_drafts = coli__mtp_drafts_now(&c->core);
    coli__sized_out(s, &full, sizeof full);
    return COLI_OK;
}

COLI_API coli_status coli_context_mtp_logits(coli_context *c, int32_t next, float *logits)
{
    if (!c)
        return COLI_EINVAL;
    coli__err_clear(&c->core.err);
    if (!logits)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL, "coli_context_mtp_logits: logits is NULL"));
    if (!c->core.mtp)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_ESTATE,
                                      "coli_context_mtp_logits: the context has no MTP (COLI_OPT_MTP is 0)"));
    if (c->core.pos == 0)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_ESTATE,
                                      "coli_context_mtp_logits: no position evaluated to draft after"));
    if (next < 0 || next >= c->core.m->cfg.vocab)
        return ctx_fail(c, coli__fail(&c->core.err, COLI_EINVAL,
                                      "coli_context_mtp_logits: token id %ld is outside the vocabulary [0, %d)",
                                      (long)next, c->core.m->cfg.vocab));
    coli_status st = coli__mtp_peek(&c->core, next, logits);
    return st == COLI_OK ? COLI_OK : ctx_fail(c, st);
}

COLI_API void coli_context_stats_reset(coli_context *c)
{
    if (c) {
        memset(&c->core.stats, 0, sizeof c->core.stats);
        memset(&c->core.gpu_counts, 0, sizeof c->core.gpu_counts);
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
    COLI_TRY(coli__experts_dev_stats(c->core.m, device, &c->core.gpu_counts, &full));
    coli__device_ctx_stats(c->core.dev, device, &full);
    coli__sized_out(s, &full, sizeof full);
    return COLI_OK;
}
