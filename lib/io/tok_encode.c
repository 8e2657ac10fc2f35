/* tok_encode.c - text to ids: the added tokens, the normalizer, the
 * pre-tokenizer, BPE and the post-processor's ids, in the Rust crate's
 * order. */
#include "io/tok_impl.h"

#include <string.h>

#include "io/unicode.h"

/* Pre-tokenizes and runs the model on a piece with no added tokens. */
static coli_status encode_text(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                               int first, coli__ids *out, coli__err *err)
{
    plist *cur = &sc->pa, *next = &sc->pb;
    if (n == 0)
        return COLI_OK;
    if (t->n_pre == 0)
        return coli__tok_bpe(t, sc, s, n, out, err);
    coli__tok_plist_reset(cur);
    if (coli__tok_plist_add(cur, s, n, first))
        return coli__tok_oom(t, err);
    for (size_t k = 0; k < t->n_pre; k++) {
        plist *sw;
        coli__tok_plist_reset(next);
        for (size_t p = 0; p < cur->n; p++)
            if (coli__tok_pre_step_apply(&t->pre[k], &t->bm, sc, cur->text.p + cur->v[p].off,
                                         cur->v[p].len, cur->v[p].first, next))
                return coli__tok_oom(t, err);
        sw = cur;
        cur = next;
        next = sw;
    }
    for (size_t p = 0; p < cur->n; p++)
        COLI_TRY(coli__tok_bpe(t, sc, cur->text.p + cur->v[p].off, cur->v[p].len, out, err));
    return COLI_OK;
}

/* A raw piece between non-normalized added tokens. */
static coli_status encode_segment(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                                  int first, coli__ids *out, coli__err *err)
{
    const char *ns = s;
    size_t nn = n;
    if (t->n_norm) {
        COLI_TRY(coli__tok_normalize(t, s, n, &sc->nbuf, &sc->ntmp, err));
        ns = sc->nbuf.p;
        nn = sc->nbuf.n;
    }
    if (!t->has_norm)
        return encode_text(t, sc, ns, nn, first, out, err);
    if (coli__tok_split_added(t, &t->m_norm, 1, ns, nn, &sc->norm))
        return coli__tok_oom(t, err);
    for (size_t k = 0; k < sc->norm.n; k++) {
        const seg *g = &sc->norm.v[k];
        if (g->id >= 0) {
            if (coli__ids_push(out, g->id))
                return coli__tok_oom(t, err);
        } else {
            COLI_TRY(encode_text(t, sc, ns + g->off, g->len, first && g->off == 0, out, err));
        }
    }
    return COLI_OK;
}

coli_status coli__tok_encode(const coli__tokenizer *t, const char *text, size_t len,
                             int add_special, coli__ids *out, coli__err *err)
{
    scratch sc;
    coli_status st = COLI_OK;
    size_t bad, start;

    if (!t || !out || (!text && len))
        return coli__fail(err, COLI_EINVAL, "tokenizer: encode needs a tokenizer, text and output");
    if (!text)
        text = "";
    bad = coli__utf8_check(text, len);
    if (bad != len)
        return coli__tok_fail(t, err, COLI_EINVAL, "input text is not valid UTF-8 (byte %zu)", bad);
    memset(&sc, 0, sizeof sc);
    start = out->n;
    if (add_special && coli__ids_add(out, t->post_prefix.v, t->post_prefix.n)) {
        st = coli__tok_oom(t, err);
        goto done;
    }
    if (!t->has_raw) {
        st = encode_segment(t, &sc, text, len, 1, out, err);
    } else if (coli__tok_split_added(t, &t->m_raw, 0, text, len, &sc.raw)) {
        st = coli__tok_oom(t, err);
    } else {
        for (size_t k = 0; k < sc.raw.n && st == COLI_OK; k++) {
            const seg *g = &sc.raw.v[k];
            if (g->id >= 0)
                st = coli__ids_push(out, g->id) ? coli__tok_oom(t, err) : COLI_OK;
            else
                st = encode_segment(t, &sc, text + g->off, g->len, g->off == 0, out, err);
        }
    }
    if (st == COLI_OK && add_special && coli__ids_add(out, t->post_suffix.v, t->post_suffix.n))
        st = coli__tok_oom(t, err);
done:
    coli__tok_scratch_free(&sc);
    if (st != COLI_OK)
        out->n = start; /* nothing appended on failure */
    return st;
}
