/* tok_normalize.c - running the normalizer over text, and splitting text
 * on the added tokens (the raw ones before the normalizer, the normalized
 * ones after it) as the Rust crate matches them. */
#include "io/tok_impl.h"

#include <stdlib.h>
#include <string.h>

#include "io/unicode.h"

/* ---- normalization --------------------------------------------------- */

static size_t ws_prefix_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        coli__utf8_decode(s + i, n - i, &cp, &len);
        if (!(coli__uni_class(cp) & COLI_UNI_S))
            break;
        i += len;
    }
    return i;
}

/* Start of the trailing whitespace of the valid UTF-8 s[0..n). */
static size_t ws_suffix_start(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0) {
        size_t k = i - 1;
        uint32_t cp;
        size_t len;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--;
        coli__utf8_decode(s + k, n - k, &cp, &len);
        if (!(coli__uni_class(cp) & COLI_UNI_S))
            break;
        i = k;
    }
    return i;
}

/* Runs the normalizer over s[0..n); the result is left in *res (tmp is
 * scratch; the two may be swapped). */
coli_status coli__tok_normalize(const coli__tokenizer *t, const char *s, size_t n, coli__buf *res,
                                coli__buf *tmp, coli__err *err)
{
    coli__buf_reset(res);
    if (coli__buf_add(res, s, n))
        return coli__tok_oom(t, err);
    for (size_t k = 0; k < t->n_norm; k++) {
        const norm_step *ns = &t->norm[k];
        coli__buf sw;
        coli__buf_reset(tmp);
        switch (ns->type) {
        case NORM_NFC: {
            char *o;
            size_t on;
            if (coli__uni_nfc(res->p, res->n, &o, &on))
                return coli__tok_oom(t, err);
            if (coli__buf_add(tmp, o, on)) {
                free(o);
                return coli__tok_oom(t, err);
            }
            free(o);
            break;
        }
        case NORM_PREPEND:
            if (res->n &&
                (coli__buf_add(tmp, ns->a, ns->alen) || coli__buf_add(tmp, res->p, res->n)))
                return coli__tok_oom(t, err);
            if (!res->n)
                continue;
            break;
        case NORM_REPLACE:
            if (coli__tok_replace_into(tmp, res->p, res->n, ns->a, ns->alen, ns->b, ns->blen))
                return coli__tok_oom(t, err);
            break;
        default: { /* NORM_STRIP */
            size_t a = ns->left ? ws_prefix_len(res->p, res->n) : 0;
            size_t b = ns->right ? ws_suffix_start(res->p, res->n) : res->n;
            if (b < a)
                b = a;
            if (coli__buf_add(tmp, res->p + a, b - a))
                return coli__tok_oom(t, err);
            break;
        }
        }
        sw = *res;
        *res = *tmp;
        *tmp = sw;
    }
    return COLI_OK;
}

/* ---- added-token matching -------------------------------------------- */

/* Sort key of an added token in a matcher: first byte, then longest first,
 * then file order. */
typedef struct mkey {
    uint32_t first, len, idx;
} mkey;

static int mkey_cmp(const void *pa, const void *pb)
{
    const mkey *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static coli_status build_matcher(coli__tokenizer *t, matcher *m, int norm, coli__err *err)
{
    size_t cnt = 0, k = 0;
    mkey *keys;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == (unsigned char)norm && (!norm || t->added[i].nlen))
            cnt++;
    if (!cnt)
        return COLI_OK;
    keys = malloc(cnt * sizeof *keys);
    m->idx = malloc(cnt * sizeof *m->idx);
    if (!keys || !m->idx) {
        free(keys);
        return coli__tok_oom(t, err);
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const added_tok *a = &t->added[i];
        if (a->normalized != (unsigned char)norm || (norm && !a->nlen))
            continue;
        keys[k].first = (unsigned char)t->strs.p[norm ? a->noff : a->off];
        keys[k].len = norm ? a->nlen : a->len;
        keys[k].idx = (uint32_t)i;
        k++;
    }
    qsort(keys, cnt, sizeof *keys, mkey_cmp);
    k = 0;
    for (unsigned b = 0; b < 256; b++) {
        m->start[b] = (uint32_t)k;
        while (k < cnt && keys[k].first == b) {
            m->idx[k] = keys[k].idx;
            k++;
        }
    }
    m->start[256] = (uint32_t)k;
    free(keys);
    return COLI_OK;
}

/* single_word: is the character before pos / at pos a word character
 * (regex \w, as the Rust crate checks)? */
static int word_char_before(const char *s, size_t pos)
{
    size_t k;
    uint32_t cp;
    size_t len;
    if (pos == 0)
        return 0;
    k = pos - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    coli__utf8_decode(s + k, pos - k, &cp, &len);
    return (coli__uni_class(cp) & COLI_UNI_W) != 0;
}

static int word_char_at(const char *s, size_t n, size_t pos)
{
    uint32_t cp;
    size_t len;
    if (pos >= n)
        return 0;
    coli__utf8_decode(s + pos, n - pos, &cp, &len);
    return (coli__uni_class(cp) & COLI_UNI_W) != 0;
}

static int segv_add(segv *s, size_t off, size_t len, int32_t id)
{
    if (coli__tok_vec_grow(&s->v, &s->cap, s->n + 1, sizeof *s->v))
        return -1;
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->v[s->n].id = id;
    s->n++;
    return 0;
}

/* Splits s[0..n) on the added tokens of m: leftmost match, longest first;
 * single_word / lstrip / rstrip as the Rust crate applies them. */
int coli__tok_split_added(const coli__tokenizer *t, const matcher *m, int norm, const char *s,
                          size_t n, segv *out)
{
    size_t pos = 0, i = 0;
    out->n = 0;
    while (i < n) {
        unsigned b = (unsigned char)s[i];
        const added_tok *hit = NULL;
        size_t mstart, mend;
        for (uint32_t k = m->start[b]; k < m->start[b + 1]; k++) {
            const added_tok *a = &t->added[m->idx[k]];
            const char *c = t->strs.p + (norm ? a->noff : a->off);
            size_t cl = norm ? a->nlen : a->len;
            if (cl <= n - i && memcmp(s + i, c, cl) == 0) {
                hit = a;
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        mstart = i;
        mend = i + (norm ? hit->nlen : hit->len);
        if (hit->single_word && (word_char_before(s, mstart) || word_char_at(s, n, mend))) {
            i = mend;
            continue;
        }
        /* lstrip takes whitespace back to the previous match at most: the
         * scan stops there too (from the start, runs of a whitespace token
         * would cost quadratic time). */
        if (hit->lstrip)
            mstart = pos + ws_suffix_start(s + pos, mstart - pos);
        if (hit->rstrip)
            mend += ws_prefix_len(s + mend, n - mend);
        if (pos < mstart && segv_add(out, pos, mstart - pos, -1))
            return -1;
        if (segv_add(out, mstart, mend - mstart, hit->id))
            return -1;
        pos = i = mend;
    }
    if (pos < n && segv_add(out, pos, n - pos, -1))
        return -1;
    return 0;
}

coli_status coli__tok_build_added_matchers(coli__tokenizer *t, coli__err *err)
{
    coli__buf r = {0}, tmp = {0};
    coli_status st = COLI_OK;
    for (size_t i = 0; i < t->n_added && st == COLI_OK; i++) {
        added_tok *a = &t->added[i];
        if (!a->normalized)
            continue;
        st = coli__tok_normalize(t, t->strs.p + a->off, a->len, &r, &tmp, err);
        if (st == COLI_OK && r.n && coli__tok_strs_add(t, r.p, r.n, &a->noff))
            st = coli__tok_oom(t, err);
        a->nlen = (uint32_t)r.n;
    }
    coli__buf_free(&r);
    coli__buf_free(&tmp);
    if (st == COLI_OK)
        st = build_matcher(t, &t->m_raw, 0, err);
    if (st == COLI_OK)
        st = build_matcher(t, &t->m_norm, 1, err);
    t->has_raw = t->m_raw.idx != NULL;
    t->has_norm = t->m_norm.idx != NULL;
    return st;
}
