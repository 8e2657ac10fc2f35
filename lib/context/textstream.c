/* textstream.c - streaming the text of generated tokens: decoded with a
 * few tokens before them, so that decoders which look at neighbours
 * (Metaspace spaces, byte fallback) give the same text as decoding the
 * whole sequence; only text that later tokens cannot change is given, and
 * text that may begin a stop string is held back until it is decided. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "context/textstream.h"

static coli_status push_id(coli__ids *v, int32_t id, coli__err *err)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return coli__fail(err, COLI_ENOMEM, "out of memory streaming generated text");
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return COLI_OK;
}

coli_status coli__ts_init(coli__textstream *t, const coli__tokenizer *tk, const int32_t *context, size_t n,
                          const char *const *stop, size_t n_stop, coli__err *err)
{
    memset(t, 0, sizeof *t);
    t->tk = tk;
    t->stop = stop;
    t->n_stop = n_stop;
    for (size_t i = n > COLI__STREAM_CTX ? n - COLI__STREAM_CTX : 0; i < n; i++)
        COLI_TRY(push_id(&t->ids, context[i], err));
    t->base = t->ids.n;
    return COLI_OK;
}

void coli__ts_free(coli__textstream *t)
{
    coli__ids_free(&t->ids);
    coli__buf_free(&t->prev);
    coli__buf_free(&t->full);
    coli__buf_free(&t->held);
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

/* Position of the first occurrence of any stop string in s[0..n), or n. */
static size_t find_stop(const coli__textstream *t, const char *s, size_t n)
{
    size_t best = n;
    for (size_t k = 0; k < t->n_stop; k++) {
        size_t m = strlen(t->stop[k]);
        for (size_t i = 0; m > 0 && i + m <= n && i < best; i++)
            if (memcmp(s + i, t->stop[k], m) == 0) {
                best = i;
                break;
            }
    }
    return best;
}

/* Length of the longest tail of s[0..n) that is a proper prefix of a stop
 * string: text that later tokens may turn into a stop. */
static size_t stop_tail(const coli__textstream *t, const char *s, size_t n)
{
    size_t best = 0;
    for (size_t k = 0; k < t->n_stop; k++) {
        size_t m = strlen(t->stop[k]);
        for (size_t l = m > n + 1 ? n : m - 1; l > best; l--)
            if (memcmp(s + n - l, t->stop[k], l) == 0) {
                best = l;
                break;
            }
    }
    return best;
}

/* Passes new text through the stop strings: out and out_len receive what
 * may be given now; *hit is set when a stop string was reached. */
static coli_status stop_filter(coli__textstream *t, const char *piece, size_t len, int final, const char **out,
                               size_t *out_len, int *hit, coli__err *err)
{
    *hit = 0;
    if (t->n_stop == 0) {
        *out = piece;
        *out_len = len;
        return COLI_OK;
    }
    /* held keeps only a few bytes: given text is dropped after each call */
    if (t->held.n + len + 1 > t->held.cap) {
        size_t cap = 2 * (t->held.n + len + 1);
        char *p = realloc(t->held.p, cap);
        if (!p)
            return coli__fail(err, COLI_ENOMEM, "out of memory checking stop strings");
        t->held.p = p;
        t->held.cap = cap;
    }
    if (len)
        memcpy(t->held.p + t->held.n, piece, len);
    t->held.n += len;
    const char *h = t->held.p ? t->held.p : "";
    size_t n = t->held.n, at = find_stop(t, h, n);
    size_t give = at < n ? at : final ? n : n - stop_tail(t, h, n);
    *hit = at < n;
    *out = h;
    *out_len = give;
    return COLI_OK;
}

void coli__ts_consume(coli__textstream *t, size_t n)
{
    if (t->n_stop == 0 || n == 0)
        return;
    memmove(t->held.p, t->held.p + n, t->held.n - n);
    t->held.n -= n;
}

coli_status coli__ts_push(coli__textstream *t, int32_t tok, int final, const char **out, size_t *out_len, int *hit,
                          coli__err *err)
{
    const char *piece = "";
    size_t len = 0;
    const coli__tokenizer *tk = t->tk;
    /* ids past the tokenizer's vocabulary (padding) have no text */
    int has = tk && tok >= 0 && (size_t)tok < coli__tok_vocab_size(tk);
    if (has || (tk && tok < 0 && final)) {
        if (has)
            COLI_TRY(push_id(&t->ids, tok, err));
        size_t ctx = t->base > COLI__STREAM_CTX ? t->base - COLI__STREAM_CTX : 0;
        t->prev.n = t->full.n = 0;
        COLI_TRY(coli__tok_decode(tk, t->ids.v + ctx, t->base - ctx, 1, &t->prev, err));
        COLI_TRY(coli__tok_decode(tk, t->ids.v + ctx, t->ids.n - ctx, 1, &t->full, err));
        size_t skip = 0;
        while (skip < t->prev.n && skip < t->full.n && t->prev.p[skip] == t->full.p[skip])
            skip++;
        const char *text = t->full.p ? t->full.p + skip : "";
        size_t n = t->full.n - skip;
        /* A trailing byte-fallback token may join the next ones into one
         * character (or into U+FFFD): hold its text back. */
        int open = !final && has && coli__tok_is_byte(tk, tok);
        size_t ok = final ? n : open ? t->done : stable_prefix(text, n);
        if (ok > t->done) {
            piece = text + t->done;
            len = ok - t->done;
            t->done = ok;
        }
        if (!open && ok == n) { /* everything so far is settled */
            t->base = t->ids.n;
            t->done = 0;
        }
    }
    *out = "";
    *out_len = 0;
    return stop_filter(t, piece, len, final, out, out_len, hit, err);
}

/* ---- the public stream ---------------------------------------------- */

struct coli_text_stream {
    coli__textstream t;
    coli_model *m;
    char **stop;     /* owned copies of the stop strings */
    size_t n_stop;
    size_t given;    /* bytes given by the last call, consumed by the next */
    int stopped;
};

COLI_API void coli_text_stream_free(coli_text_stream *s)
{
    if (!s)
        return;
    coli__ts_free(&s->t);
    for (size_t k = 0; k < s->n_stop; k++)
        free(s->stop[k]);
    free(s->stop);
    free(s);
}

COLI_API coli_status coli_text_stream_create(coli_model *m, const int32_t *context, size_t n_context,
                                             const char *const *stop, size_t n_stop, coli_text_stream **out)
{
    if (!out)
        return COLI_EINVAL;
    *out = NULL;
    if (!m || (n_context && !context))
        return COLI_EINVAL;
    if (!m->ok)
        return COLI_ESTATE;
    coli__err *err = coli__model_err(m);
    if (n_stop && !stop)
        return coli__fail(err, COLI_EINVAL, "coli_text_stream_create: n_stop is %zu but stop is NULL", n_stop);
    if (!stop)
        n_stop = 0;
    for (size_t k = 0; k < n_stop; k++)
        if (!stop[k] || !stop[k][0])
            return coli__fail(err, COLI_EINVAL, "coli_text_stream_create: stop string %zu is %s", k,
                              stop[k] ? "empty" : "NULL");
    for (size_t i = 0; i < n_context; i++)
        if (context[i] < 0 || context[i] >= m->cfg.vocab)
            return coli__fail(err, COLI_EINVAL, "coli_text_stream_create: context id %ld is outside the vocabulary",
                              (long)context[i]);
    coli_text_stream *s = calloc(1, sizeof *s);
    if (!s || (n_stop && !(s->stop = calloc(n_stop, sizeof *s->stop)))) {
        free(s);
        return coli__fail(err, COLI_ENOMEM, "out of memory for a text stream");
    }
    s->m = m;
    for (; s->n_stop < n_stop; s->n_stop++)
        if (!(s->stop[s->n_stop] = strdup(stop[s->n_stop]))) {
            coli_text_stream_free(s);
            return coli__fail(err, COLI_ENOMEM, "out of memory for a text stream");
        }
    coli_status st = coli__ts_init(&s->t, m->tok, context, n_context, (const char *const *)s->stop, s->n_stop, err);
    if (st != COLI_OK) {
        coli_text_stream_free(s);
        return st;
    }
    *out = s;
    return COLI_OK;
}

/* One step of the stream; tok < 0: the flush. */
static coli_status stream_step(coli_text_stream *s, int32_t tok, const char **text, size_t *len, int *stopped)
{
    coli__ts_consume(&s->t, s->given);
    s->given = 0;
    *text = "";
    *len = 0;
    if (s->stopped)
        return COLI_OK;
    int hit = 0;
    COLI_TRY(coli__ts_push(&s->t, tok, tok < 0, text, len, &hit, coli__model_err(s->m)));
    s->given = *len;
    s->stopped = hit;
    if (stopped)
        *stopped = hit;
    return COLI_OK;
}

COLI_API coli_status coli_text_stream_push(coli_text_stream *s, int32_t token, const char **text, size_t *len,
                                           int *stopped)
{
    if (stopped)
        *stopped = s ? s->stopped : 0;
    if (!s || !text || !len)
        return COLI_EINVAL;
    if (token < 0 || token >= s->m->cfg.vocab)
        return coli__fail(coli__model_err(s->m), COLI_EINVAL,
                          "coli_text_stream_push: token id %ld is outside the vocabulary", (long)token);
    return stream_step(s, token, text, len, stopped);
}

COLI_API coli_status coli_text_stream_flush(coli_text_stream *s, const char **text, size_t *len)
{
    if (!s || !text || !len)
        return COLI_EINVAL;
    return stream_step(s, -1, text, len, NULL);
}
