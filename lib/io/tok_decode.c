/* tok_decode.c - ids to text: the tokens' strings through the decoder
 * chain; and which ids are byte-fallback tokens, whose text depends on the
 * tokens that follow. */
#include "io/tok_impl.h"

#include <string.h>

#include "io/unicode.h"

static int buf_add_cp(coli__buf *b, uint32_t cp)
{
    char u[4];
    size_t k = coli__utf8_encode(cp, u);
    return coli__buf_add(b, u, k);
}

/* Appends bytes with each ill-formed sequence replaced by U+FFFD, like
 * Rust's String::from_utf8_lossy: the well-formed run, then one U+FFFD for
 * the bytes coli__utf8_decode says it replaces. */
static int add_lossy(coli__buf *b, const char *s, size_t n)
{
    for (;;) {
        size_t ok = coli__utf8_check(s, n), len;
        uint32_t cp;
        if (coli__buf_add(b, s, ok))
            return -1;
        if (ok == n)
            return 0;
        coli__utf8_decode(s + ok, n - ok, &cp, &len);
        if (buf_add_cp(b, COLI_UNI_REPLACEMENT))
            return -1;
        s += ok + len;
        n -= ok + len;
    }
}

/* "<0xNN>" -> NN, or -1. */
static int byte_token(const char *s, size_t n)
{
    int v = 0;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static int dec_step_apply(const dec_step *d, const bytemap *bm, scratch *sc, const plist *in,
                          plist *out)
{
    size_t k;
    switch (d->type) {
    case DEC_BYTELEVEL: {
        coli__buf_reset(&sc->tmp);
        for (k = 0; k < in->n; k++) {
            const char *s = in->text.p + in->v[k].off;
            size_t n = in->v[k].len, i = 0, start = sc->tmp.n;
            int ok = 1;
            while (i < n) {
                uint32_t cp;
                size_t len;
                coli__utf8_decode(s + i, n - i, &cp, &len);
                if (cp >= 0x144 || bm->dec[cp] < 0) {
                    ok = 0;
                    break;
                }
                if (coli__buf_add(&sc->tmp, &(char){(char)bm->dec[cp]}, 1))
                    return -1;
                i += len;
            }
            if (!ok) { /* a character outside the alphabet: the token's own bytes */
                sc->tmp.n = start;
                if (coli__buf_add(&sc->tmp, s, n))
                    return -1;
            }
        }
        if (coli__tok_plist_open(out, 0) ||
            add_lossy(&out->text, sc->tmp.p ? sc->tmp.p : "", sc->tmp.n))
            return -1;
        coli__tok_plist_close_keep(out);
        return 0;
    }
    case DEC_FUSE:
        if (coli__tok_plist_open(out, 0))
            return -1;
        for (k = 0; k < in->n; k++)
            if (coli__buf_add(&out->text, in->text.p + in->v[k].off, in->v[k].len))
                return -1;
        coli__tok_plist_close_keep(out);
        return 0;
    case DEC_BYTEFALLBACK: {
        size_t run = 0; /* pending byte tokens, collected in sc->tmp */
        coli__buf_reset(&sc->tmp);
        for (k = 0; k <= in->n; k++) {
            int b = k < in->n ? byte_token(in->text.p + in->v[k].off, in->v[k].len) : -1;
            if (b >= 0) {
                char c = (char)b;
                if (coli__buf_add(&sc->tmp, &c, 1))
                    return -1;
                run++;
                continue;
            }
            if (run) {
                if (coli__utf8_check(sc->tmp.p, sc->tmp.n) == sc->tmp.n) {
                    if (coli__tok_plist_add_keep(out, sc->tmp.p, sc->tmp.n))
                        return -1;
                } else {
                    for (size_t r = 0; r < run; r++)
                        if (coli__tok_plist_add_keep(out, "\xEF\xBF\xBD", 3))
                            return -1;
                }
                run = 0;
                coli__buf_reset(&sc->tmp);
            }
            if (k < in->n && coli__tok_plist_add_keep(out, in->text.p + in->v[k].off, in->v[k].len))
                return -1;
        }
        return 0;
    }
    case DEC_REPLACE:
        for (k = 0; k < in->n; k++) {
            if (coli__tok_plist_open(out, 0) ||
                coli__tok_replace_into(&out->text, in->text.p + in->v[k].off, in->v[k].len, d->a,
                                       d->alen, d->b, d->blen))
                return -1;
            coli__tok_plist_close_keep(out);
        }
        return 0;
    case DEC_STRIP:
        for (k = 0; k < in->n; k++) {
            const char *s = in->text.p + in->v[k].off;
            size_t n = in->v[k].len, a = 0, b = n, i;
            size_t n_cp;
            if (coli__tok_decode_cps(sc, s, n, &n_cp))
                return -1;
            for (i = 0; i < d->start && i < n_cp && sc->cps[i] == d->ch; i++)
                a = sc->offs[i + 1];
            for (i = 0; i < d->stop && i < n_cp && sc->cps[n_cp - 1 - i] == d->ch; i++)
                b = sc->offs[n_cp - 1 - i];
            if (b < a)
                b = a;
            if (coli__tok_plist_add_keep(out, s + a, b - a))
                return -1;
        }
        return 0;
    default: { /* DEC_METASPACE: replacement -> ' ', dropped in the first token */
        char rep[4];
        size_t rl = coli__utf8_encode(d->ch, rep);
        for (k = 0; k < in->n; k++) {
            int drop = (k == 0 && d->scheme != SCHEME_NEVER);
            if (coli__tok_plist_open(out, 0) ||
                coli__tok_replace_into(&out->text, in->text.p + in->v[k].off, in->v[k].len, rep, rl,
                                       drop ? "" : " ", drop ? 0 : 1))
                return -1;
            coli__tok_plist_close_keep(out);
        }
        return 0;
    }
    }
}

coli_status coli__tok_decode(const coli__tokenizer *t, const int32_t *ids, size_t n,
                             int skip_special, coli__buf *out, coli__err *err)
{
    scratch sc;
    plist *cur, *next;
    coli_status st = COLI_OK;
    size_t start;

    if (!t || !out || (!ids && n))
        return coli__fail(err, COLI_EINVAL, "tokenizer: decode needs a tokenizer, ids and output");
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || (size_t)ids[k] >= t->n_ids)
            return coli__tok_fail(t, err, COLI_EINVAL,
                                  "token id %ld (at %zu) is out of range [0, %zu)", (long)ids[k], k,
                                  t->n_ids);
    memset(&sc, 0, sizeof sc);
    start = out->n;
    cur = &sc.pa;
    next = &sc.pb;
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        if (t->id_len[id] == NO_STR)
            continue;
        if (skip_special && (t->id_flags[id] & IDF_SPECIAL))
            continue;
        if (coli__tok_plist_add_keep(cur, t->strs.p + t->id_off[id], t->id_len[id])) {
            st = coli__tok_oom(t, err);
            goto done;
        }
    }
    for (size_t k = 0; k < t->n_dec; k++) {
        plist *sw;
        coli__tok_plist_reset(next);
        if (dec_step_apply(&t->dec[k], &t->bm, &sc, cur, next)) {
            st = coli__tok_oom(t, err);
            goto done;
        }
        sw = cur;
        cur = next;
        next = sw;
    }
    if (coli__buf_add(out, "", 0)) {
        st = coli__tok_oom(t, err);
        goto done;
    }
    for (size_t k = 0; k < cur->n; k++) {
        if ((k && !t->has_decoder && coli__buf_add(out, " ", 1)) ||
            coli__buf_add(out, cur->text.p + cur->v[k].off, cur->v[k].len)) {
            st = coli__tok_oom(t, err);
            goto done;
        }
    }
done:
    coli__tok_scratch_free(&sc);
    if (st != COLI_OK && out->p) {
        out->n = start; /* nothing appended on failure */
        out->p[start] = '\0';
    }
    return st;
}

int coli__tok_is_byte(const coli__tokenizer *t, int32_t id)
{
    if (!t || !t->byte_fallback || id < 0 || (size_t)id >= t->n_ids || t->id_len[id] == NO_STR)
        return 0;
    return byte_token(t->strs.p + t->id_off[id], t->id_len[id]) >= 0;
}
