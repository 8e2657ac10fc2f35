/* tok_buf.c - what the tokenizer grows: byte buffers and id arrays
 * (coli__buf, coli__ids), any array (coli__tok_vec_grow), lists of string
 * pieces (plist), the copies and replacements the steps append with, and
 * freeing the scratch of one call. */
#include "io/tok_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- growable buffers ------------------------------------------------ */

void coli__ids_free(coli__ids *ids)
{
    if (!ids)
        return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

void coli__buf_free(coli__buf *b)
{
    if (!b)
        return;
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void coli__buf_reset(coli__buf *b)
{
    b->n = 0;
    if (b->p)
        b->p[0] = '\0';
}

int coli__ids_push(coli__ids *ids, int32_t v)
{
    return coli__ids_add(ids, &v, 1);
}

int coli__ids_add(coli__ids *ids, const int32_t *v, size_t n)
{
    if (n > SIZE_MAX - ids->n || coli__tok_vec_grow(&ids->v, &ids->cap, ids->n + n, sizeof *ids->v))
        return -1;
    if (n)
        memcpy(ids->v + ids->n, v, n * sizeof *v);
    ids->n += n;
    return 0;
}

/* Grows the array whose pointer is at pp (elements of size sz) to hold at
 * least need elements. The pointer is moved with memcpy so that any pointer
 * type can be passed without type punning. */
int coli__tok_vec_grow(void *pp, size_t *cap, size_t need, size_t sz)
{
    size_t nc;
    void *v, *nv;
    if (need <= *cap)
        return 0;
    nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    if (nc > SIZE_MAX / sz)
        return -1;
    memcpy(&v, pp, sizeof v);
    nv = realloc(v, nc * sz);
    if (!nv)
        return -1;
    memcpy(pp, &nv, sizeof nv);
    *cap = nc;
    return 0;
}

/* ---- piece lists ----------------------------------------------------- */

void coli__tok_plist_reset(plist *l)
{
    coli__buf_reset(&l->text);
    l->n = 0;
}

static void plist_free(plist *l)
{
    coli__buf_free(&l->text);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* Starts a new piece at the end of the text; bytes are then added to
 * l->text and the piece is closed by coli__tok_plist_close (empty ones
 * are dropped, as the Rust crate drops empty splits). */
int coli__tok_plist_open(plist *l, int first)
{
    /* The text is allocated even for an empty piece, so that a piece's
     * pointer (text.p + off) is never an offset from NULL. */
    if (coli__tok_vec_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v) ||
        coli__buf_reserve(&l->text, 0))
        return -1;
    l->v[l->n].off = l->text.n;
    l->v[l->n].len = 0;
    l->v[l->n].first = first;
    return 0;
}

void coli__tok_plist_close(plist *l)
{
    span *s = &l->v[l->n];
    s->len = l->text.n - s->off;
    if (s->len)
        l->n++;
}

int coli__tok_plist_add(plist *l, const char *p, size_t n, int first)
{
    if (coli__tok_plist_open(l, first) || coli__buf_add(&l->text, p, n))
        return -1;
    coli__tok_plist_close(l);
    return 0;
}

/* Decoders keep empty tokens (a later step may count positions). */
void coli__tok_plist_close_keep(plist *l)
{
    l->v[l->n].len = l->text.n - l->v[l->n].off;
    l->n++;
}

int coli__tok_plist_add_keep(plist *l, const char *p, size_t n)
{
    if (coli__tok_plist_open(l, 0) || coli__buf_add(&l->text, p, n))
        return -1;
    coli__tok_plist_close_keep(l);
    return 0;
}

/* ---- text ------------------------------------------------------------ */

/* Appends s with every occurrence of pat replaced by rep. */
int coli__tok_replace_into(coli__buf *out, const char *s, size_t n, const char *pat, size_t plen,
                           const char *rep, size_t rlen)
{
    size_t i = 0, last = 0;
    while (plen <= n && i + plen <= n) {
        const char *f = memchr(s + i, pat[0], n - i - plen + 1);
        if (!f)
            break;
        i = (size_t)(f - s);
        if (memcmp(s + i, pat, plen) == 0) {
            if (coli__buf_add(out, s + last, i - last) || coli__buf_add(out, rep, rlen))
                return -1;
            i += plen;
            last = i;
        } else {
            i++;
        }
    }
    return coli__buf_add(out, s + last, n - last);
}

/* A NUL-terminated copy of s[0..n), or NULL. */
char *coli__tok_dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* ---- one call's scratch ---------------------------------------------- */

void coli__tok_scratch_free(scratch *sc)
{
    plist_free(&sc->pa);
    plist_free(&sc->pb);
    coli__buf_free(&sc->nbuf);
    coli__buf_free(&sc->ntmp);
    coli__buf_free(&sc->tmp);
    free(sc->raw.v);
    free(sc->norm.v);
    free(sc->cps);
    free(sc->cls);
    free(sc->offs);
    free(sc->rs);
    free(sc->syms);
    free(sc->heap);
}
