/* tok_pretok.c - pre-tokenization: the byte-level alphabet, the known
 * pre-tokenizer regexes and the steps ByteLevel, Split and Metaspace. The
 * regexes are not interpreted: the few patterns real checkpoints use are
 * recognised by their exact text (tok_steps.c) and run by hand-written
 * matchers with the same leftmost-first semantics (see rx_match). */
#include "io/tok_impl.h"

#include <stdlib.h>
#include <string.h>

#include "io/unicode.h"

/* ---- byte-level alphabet -------------------------------------------- */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * others map to U+0100 upwards in byte order. */
static uint32_t byte_to_char(unsigned b)
{
    unsigned n = 0;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return b;
    for (unsigned k = 0; k < b; k++)
        if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF)))
            n++;
    return 0x100 + n;
}

static int char_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 68) {
        unsigned n = cp - 0x100;
        for (unsigned k = 0; k < 256; k++) {
            if ((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))
                continue;
            if (n-- == 0)
                return (int)k;
        }
    }
    return -1;
}

void coli__tok_bytemap_init(bytemap *m)
{
    for (unsigned b = 0; b < 256; b++)
        m->enc_len[b] = (unsigned char)coli__utf8_encode(byte_to_char(b), m->enc[b]);
    for (uint32_t c = 0; c < 0x144; c++)
        m->dec[c] = (short)char_to_byte(c);
}

/* ---- pre-tokenizer regexes ------------------------------------------ */

/* Decodes s[0..n) into sc->cps / cls / offs (offs has n_cp + 1 entries). */
int coli__tok_decode_cps(scratch *sc, const char *s, size_t n, size_t *n_cp)
{
    size_t i = 0, k = 0;
    if (n + 1 > sc->ccap) {
        size_t nc = (n + 1) * 2;
        uint32_t *c = realloc(sc->cps, nc * sizeof *c);
        if (c)
            sc->cps = c;
        unsigned char *l = realloc(sc->cls, nc);
        if (l)
            sc->cls = l;
        size_t *o = realloc(sc->offs, nc * sizeof *o);
        if (o)
            sc->offs = o;
        if (!c || !l || !o)
            return -1;
        sc->ccap = nc;
    }
    while (i < n) {
        size_t len;
        coli__utf8_decode(s + i, n - i, &sc->cps[k], &len);
        sc->cls[k] =
            (unsigned char)(coli__uni_class(sc->cps[k]) & (COLI_UNI_L | COLI_UNI_N | COLI_UNI_S));
        sc->offs[k] = i;
        i += len;
        k++;
    }
    sc->offs[k] = n;
    *n_cp = k;
    return 0;
}

#define CLS_LNS (COLI_UNI_L | COLI_UNI_N | COLI_UNI_S)
#define IS_L(i) (cls[i] & COLI_UNI_L)
#define IS_N(i) (cls[i] & COLI_UNI_N)
#define IS_O(i) ((cls[i] & CLS_LNS) == 0)

static size_t run_of(const unsigned char *cls, size_t i, size_t n, unsigned bit)
{
    size_t j = i;
    if (bit == 0) {
        while (j < n && cls[j] == 0)
            j++;
    } else {
        while (j < n && (cls[j] & bit))
            j++;
    }
    return j - i;
}

/* ASCII lower case, with U+017F LONG S folding to 's' as (?i) does. */
static uint32_t fold(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c == 0x17F)
        return 's';
    return c;
}

/* Length (in code points, >= 1) of the match of the pattern at i; the
 * patterns match every character, so a match always starts at i. */
static size_t rx_match(int rx, const uint32_t *cp, const unsigned char *cls, size_t n, size_t i)
{
    uint32_t c = cp[i];
    size_t k, j;

    /* contractions: 's 't 're 've 'm 'll 'd (case-insensitive except GPT-2) */
    if (c == '\'' && i + 1 < n) {
        uint32_t d = rx == RX_GPT2 ? cp[i + 1] : fold(cp[i + 1]);
        if (d == 's' || d == 't' || d == 'm' || d == 'd')
            return 2;
        if (i + 2 < n) {
            uint32_t e = rx == RX_GPT2 ? cp[i + 2] : fold(cp[i + 2]);
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return 3;
        }
    }

    if (rx == RX_GPT2) {
        /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
        static const unsigned bits[3] = {COLI_UNI_L, COLI_UNI_N, 0};
        for (int b = 0; b < 3; b++) {
            unsigned bit = bits[b];
            if (c == ' ' && i + 1 < n && (bit ? (cls[i + 1] & bit) != 0 : IS_O(i + 1)))
                return 1 + run_of(cls, i + 1, n, bit);
            if (bit ? (cls[i] & bit) != 0 : IS_O(i))
                return run_of(cls, i, n, bit);
        }
    } else {
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (IS_L(i))
            return run_of(cls, i, n, COLI_UNI_L);
        if (c != '\r' && c != '\n' && !IS_N(i) && i + 1 < n && IS_L(i + 1))
            return 1 + run_of(cls, i + 1, n, COLI_UNI_L);
        /* \p{N} | \p{N}{1,3} */
        if (IS_N(i)) {
            if (rx == RX_QWEN2)
                return 1;
            k = run_of(cls, i, n, COLI_UNI_N);
            return k > 3 ? 3 : k;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        j = i;
        if (c == ' ' && i + 1 < n && IS_O(i + 1))
            j = i + 1;
        if (IS_O(j)) {
            j += run_of(cls, j, n, 0);
            while (j < n && (cp[j] == '\r' || cp[j] == '\n'))
                j++;
            return j - i;
        }
    }

    /* whitespace: c is \s here */
    k = run_of(cls, i, n, COLI_UNI_S);
    if (k == 0)
        return 1; /* not reached: every character has a class above */
    if (rx != RX_GPT2) {
        /* \s*[\r\n]+ : through the last line break of the run */
        for (j = i + k; j > i; j--)
            if (cp[j - 1] == '\r' || cp[j - 1] == '\n')
                return j - i;
    }
    /* \s+(?!\S) gives back the last space before a non-space; else \s+ */
    if (i + k == n)
        return k;
    return k >= 2 ? k - 1 : 1;
}

/* Splits s[0..n) with regex rx into sc->rs (byte spans covering all of s). */
static int rx_split(scratch *sc, int rx, const char *s, size_t n)
{
    size_t n_cp, i = 0;
    sc->rs_n = 0;
    if (coli__tok_decode_cps(sc, s, n, &n_cp))
        return -1;
    while (i < n_cp) {
        size_t k = rx_match(rx, sc->cps, sc->cls, n_cp, i);
        if (coli__tok_vec_grow(&sc->rs, &sc->rs_cap, sc->rs_n + 1, sizeof *sc->rs))
            return -1;
        sc->rs[sc->rs_n].off = sc->offs[i];
        sc->rs[sc->rs_n].len = sc->offs[i + k] - sc->offs[i];
        sc->rs[sc->rs_n].first = 0;
        sc->rs_n++;
        i += k;
    }
    return 0;
}

/* ---- pre-tokenization ------------------------------------------------ */

static int byte_level_append(const bytemap *bm, plist *out, const char *s, size_t n, int first)
{
    if (coli__tok_plist_open(out, first) || coli__buf_reserve(&out->text, n * 2))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        memcpy(out->text.p + out->text.n, bm->enc[b], bm->enc_len[b]);
        out->text.n += bm->enc_len[b];
    }
    out->text.p[out->text.n] = '\0';
    coli__tok_plist_close(out);
    return 0;
}

int coli__tok_pre_step_apply(const pre_step *ps, const bytemap *bm, scratch *sc, const char *s,
                             size_t n, int first, plist *out)
{
    switch (ps->type) {
    case PRE_BYTELEVEL: {
        const char *src = s;
        size_t sn = n;
        if (ps->prefix_space && (n == 0 || s[0] != ' ')) {
            coli__buf_reset(&sc->tmp);
            if (coli__buf_add(&sc->tmp, " ", 1) || coli__buf_add(&sc->tmp, s, n))
                return -1;
            src = sc->tmp.p;
            sn = sc->tmp.n;
        }
        if (!ps->use_regex)
            return byte_level_append(bm, out, src, sn, first);
        if (rx_split(sc, RX_GPT2, src, sn))
            return -1;
        for (size_t k = 0; k < sc->rs_n; k++)
            if (byte_level_append(bm, out, src + sc->rs[k].off, sc->rs[k].len,
                                  first && sc->rs[k].off == 0))
                return -1;
        return 0;
    }
    case PRE_SPLIT:
        if (rx_split(sc, ps->rx, s, n))
            return -1;
        for (size_t k = 0; k < sc->rs_n; k++)
            if (coli__tok_plist_add(out, s + sc->rs[k].off, sc->rs[k].len,
                                    first && sc->rs[k].off == 0))
                return -1;
        return 0;
    default: { /* PRE_METASPACE */
        char rep[4];
        size_t rl = coli__utf8_encode(ps->repl, rep);
        coli__buf *b = &sc->tmp;
        /* spaces become the replacement, then it is prepended unless the
         * piece already starts with it */
        int starts = n > 0 && (s[0] == ' ' || (n >= rl && memcmp(s, rep, rl) == 0));
        size_t i, last;
        coli__buf_reset(b);
        if ((ps->scheme == SCHEME_ALWAYS || (ps->scheme == SCHEME_FIRST && first)) && !starts &&
            coli__buf_add(b, rep, rl))
            return -1;
        if (coli__tok_replace_into(b, s, n, " ", 1, rep, rl))
            return -1;
        if (!ps->split)
            return coli__tok_plist_add(out, b->p, b->n, first);
        /* a piece starts at every replacement character (MergedWithNext) */
        last = 0;
        for (i = 1; i + rl <= b->n; i++) {
            if (memcmp(b->p + i, rep, rl) == 0) {
                if (coli__tok_plist_add(out, b->p + last, i - last, first && last == 0))
                    return -1;
                last = i;
            }
        }
        return coli__tok_plist_add(out, b->p + last, b->n - last, first && last == 0);
    }
    }
}
