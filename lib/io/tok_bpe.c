/* tok_bpe.c - the BPE model: a pre-token's characters (unknown ones as the
 * unk token or byte-fallback tokens) merged lowest rank first, piece by
 * piece between the boundaries that no merge can cross. */
#include "io/tok_impl.h"

#include "io/unicode.h"

struct sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes covered; 0 once merged into the left neighbour */
};

struct hent {
    uint32_t rank;
    uint32_t pos;
    int32_t id;
};

static int hent_less(const struct hent *a, const struct hent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(scratch *sc, size_t *hn, struct hent e)
{
    size_t i;
    if (coli__tok_vec_grow(&sc->heap, &sc->hcap, *hn + 1, sizeof *sc->heap))
        return -1;
    i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hent_less(&e, &sc->heap[p]))
            break;
        sc->heap[i] = sc->heap[p];
        i = p;
    }
    sc->heap[i] = e;
    return 0;
}

static struct hent heap_pop(scratch *sc, size_t *hn)
{
    struct hent top = sc->heap[0], last = sc->heap[--(*hn)];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct hent *best = &last;
        if (l < n && hent_less(&sc->heap[l], best)) {
            m = l;
            best = &sc->heap[l];
        }
        if (r < n && hent_less(&sc->heap[r], best))
            m = r;
        if (m == i)
            break;
        sc->heap[i] = sc->heap[m];
        i = m;
    }
    if (n)
        sc->heap[i] = last;
    return top;
}

static int sym_add(scratch *sc, size_t *ns, int32_t id, uint32_t len)
{
    struct sym *s;
    if (coli__tok_vec_grow(&sc->syms, &sc->scap, *ns + 1, sizeof *sc->syms))
        return -1;
    s = &sc->syms[*ns];
    s->id = id;
    s->len = len;
    s->prev = (int32_t)*ns - 1;
    s->next = (int32_t)*ns + 1;
    (*ns)++;
    return 0;
}

/* Merges syms[0..ns) (lowest rank first, leftmost among equals, as the
 * Rust crate does: a heap of candidate pairs over the linked symbols, each
 * popped entry checked against the pair now at its place) and appends the
 * resulting ids. */
static coli_status bpe_merge(const coli__tokenizer *t, scratch *sc, size_t ns, coli__ids *out,
                             coli__err *err)
{
    size_t hn = 0, i;
    if (ns == 0)
        return COLI_OK;
    sc->syms[0].prev = -1;
    sc->syms[ns - 1].next = -1;
    for (i = 0; i + 1 < ns; i++) {
        const mslot *m = coli__tok_merge_get(t, sc->syms[i].id, sc->syms[i + 1].id);
        if (m) {
            struct hent e = {m->rank, (uint32_t)i, m->id};
            if (heap_push(sc, &hn, e))
                return coli__tok_oom(t, err);
        }
    }
    while (hn) {
        struct hent top = heap_pop(sc, &hn);
        struct sym *cur = &sc->syms[top.pos], *right;
        const mslot *m;
        if (cur->len == 0 || cur->next < 0)
            continue;
        right = &sc->syms[cur->next];
        m = coli__tok_merge_get(t, cur->id, right->id);
        if (!m || m->id != top.id)
            continue;
        cur->id = top.id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0)
            sc->syms[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && (m = coli__tok_merge_get(t, sc->syms[cur->prev].id, cur->id))) {
            struct hent e = {m->rank, (uint32_t)cur->prev, m->id};
            if (heap_push(sc, &hn, e))
                return coli__tok_oom(t, err);
            cur = &sc->syms[top.pos];
        }
        if (cur->next >= 0 && (m = coli__tok_merge_get(t, cur->id, sc->syms[cur->next].id))) {
            struct hent e = {m->rank, top.pos, m->id};
            if (heap_push(sc, &hn, e))
                return coli__tok_oom(t, err);
        }
    }
    for (i = 0; i < ns; i++)
        if (sc->syms[i].len && coli__ids_push(out, sc->syms[i].id))
            return coli__tok_oom(t, err);
    return COLI_OK;
}

/* The symbols of one word, merged piece by piece between the boundaries
 * that are no junction. */
typedef struct bpe_word {
    size_t ns;        /* symbols of the current piece */
    uint32_t last_ch; /* last character of the previous symbol */
} bpe_word;

static coli_status bpe_sym(const coli__tokenizer *t, scratch *sc, bpe_word *w, int32_t id,
                           uint32_t len, uint32_t first_ch, uint32_t last_ch, coli__ids *out,
                           coli__err *err)
{
    if (w->ns > 0 && !t->bpe_whole && !coli__tok_junction_known(t, w->last_ch, first_ch)) {
        COLI_TRY(bpe_merge(t, sc, w->ns, out, err));
        w->ns = 0;
    }
    if (sym_add(sc, &w->ns, id, len))
        return coli__tok_oom(t, err);
    w->last_ch = last_ch;
    return COLI_OK;
}

coli_status coli__tok_bpe(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                          coli__ids *out, coli__err *err)
{
    size_t i = 0;
    int32_t unk_len = -1; /* pending unknown bytes, -1 if none */
    bpe_word w = {0, 0};

    if (n == 0)
        return COLI_OK;
    if (n > INT32_MAX / 2)
        return coli__tok_fail(t, err, COLI_ERANGE, "pre-token of %zu bytes is too long", n);
    if (t->ignore_merges) {
        int32_t id = coli__tok_vocab_get(t, s, n);
        if (id >= 0)
            return coli__ids_push(out, id) ? coli__tok_oom(t, err) : COLI_OK;
    }
    while (i < n) {
        uint32_t cp;
        size_t clen;
        const char *q = s + i;
        size_t ql;
        int32_t id;
        coli__utf8_decode(s + i, n - i, &cp, &clen);
        ql = clen;
        if ((t->prefix_len && i > 0) || (t->suffix_len && i + clen == n)) {
            coli__buf_reset(&sc->tmp);
            if ((i > 0 && coli__buf_add(&sc->tmp, t->prefix, t->prefix_len)) ||
                coli__buf_add(&sc->tmp, s + i, clen) ||
                (i + clen == n && coli__buf_add(&sc->tmp, t->suffix, t->suffix_len)))
                return coli__tok_oom(t, err);
            q = sc->tmp.p;
            ql = sc->tmp.n;
        }
        id = coli__tok_vocab_get(t, q, ql);
        if (id >= 0) {
            if (unk_len >= 0) {
                COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc, t->unk_lc,
                                 out, err));
                unk_len = -1;
            }
            if (q == s + i)
                COLI_TRY(bpe_sym(t, sc, &w, id, (uint32_t)clen, cp, cp, out, err));
            else
                COLI_TRY(bpe_sym(t, sc, &w, id, (uint32_t)clen, coli__tok_first_cp(q, ql),
                                 coli__tok_last_cp(q, ql), out, err));
        } else {
            int done = 0;
            if (t->byte_fallback) {
                size_t k;
                for (k = 0; k < ql && t->byte_id[(unsigned char)q[k]] >= 0; k++)
                    ;
                if (k == ql) {
                    /* "<0xNN>" tokens; a pending unk stays pending, as in the Rust crate */
                    for (k = 0; k < ql; k++)
                        COLI_TRY(bpe_sym(t, sc, &w, t->byte_id[(unsigned char)q[k]], 1, '<', '>',
                                         out, err));
                    done = 1;
                }
            }
            if (!done && t->has_unk) {
                if (t->unk_id < 0)
                    return coli__tok_fail(t, err, COLI_EFORMAT,
                                          "model.unk_token is not in the vocab but is needed");
                if (unk_len >= 0 && t->fuse_unk) {
                    unk_len += (int32_t)clen;
                } else {
                    if (unk_len >= 0)
                        COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc,
                                         t->unk_lc, out, err));
                    unk_len = (int32_t)clen;
                }
            }
        }
        i += clen;
    }
    if (unk_len >= 0)
        COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc, t->unk_lc, out, err));
    return bpe_merge(t, sc, w.ns, out, err);
}
