/* unicode.c - UTF-8, character classes and NFC normalization. */
#include "io/unicode.h"

#include <stdlib.h>
#include <string.h>

typedef struct coli__uni_range {
    uint32_t lo, hi, v;
} coli__uni_range;

typedef struct coli__uni_triple {
    uint32_t a, b, c;
} coli__uni_triple;

#include "io/unicode_data.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- UTF-8 ----------------------------------------------------------- */

int coli__utf8_decode(const char *s, size_t n, uint32_t *cp, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char b0 = u[0];
    size_t need;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    *cp = COLI_UNI_REPLACEMENT;
    if (b0 < 0x80) {
        *cp = b0;
        *len = 1;
        return 1;
    }
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        v = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        v = b0 & 0x0Fu;
        if (b0 == 0xE0)
            lo = 0xA0;
        else if (b0 == 0xED)
            hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        v = b0 & 0x07u;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F;
    } else {
        *len = 1;
        return 0;
    }
    for (size_t i = 1; i <= need; i++) {
        unsigned char b;
        if (i >= n) {
            *len = i;
            return 0;
        }
        b = u[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) {
            *len = i;
            return 0;
        }
        v = (v << 6) | (b & 0x3Fu);
    }
    *cp = v;
    *len = need + 1;
    return 1;
}

size_t coli__utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

size_t coli__utf8_check(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        if (!coli__utf8_decode(s + i, n - i, &cp, &len))
            return i;
        i += len;
    }
    return n;
}

/* ---- properties ------------------------------------------------------ */

static const coli__uni_range *range_find(const coli__uni_range *t, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < t[mid].lo)
            hi = mid;
        else if (cp > t[mid].hi)
            lo = mid + 1;
        else
            return &t[mid];
    }
    return NULL;
}

unsigned coli__uni_class(uint32_t cp)
{
    const coli__uni_range *r;
    if (cp < 128) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
            return COLI_UNI_L | COLI_UNI_W;
        if (cp >= '0' && cp <= '9')
            return COLI_UNI_N | COLI_UNI_W;
        if (cp == '_')
            return COLI_UNI_W;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
            return COLI_UNI_S;
        return 0;
    }
    r = range_find(coli__uni_class_ranges, COUNT(coli__uni_class_ranges), cp);
    return r ? r->v : 0;
}

unsigned coli__uni_ccc(uint32_t cp)
{
    const coli__uni_range *r;
    if (cp < 0x300)
        return 0;
    r = range_find(coli__uni_ccc_ranges, COUNT(coli__uni_ccc_ranges), cp);
    return r ? r->v : 0;
}

const char *coli__uni_version(void)
{
    return COLI_UNI_DATA_VERSION;
}

/* ---- NFC ------------------------------------------------------------- */

#define SBASE 0xAC00u
#define LBASE 0x1100u
#define VBASE 0x1161u
#define TBASE 0x11A7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

typedef struct cpvec {
    uint32_t *v;
    size_t n, cap;
} cpvec;

static int cpvec_push(cpvec *a, uint32_t cp)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        uint32_t *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = cp;
    return 0;
}

static const coli__uni_triple *decomp_find(uint32_t cp)
{
    size_t lo = 0, hi = COUNT(coli__uni_decomp);
    if (cp < 0xC0)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < coli__uni_decomp[mid].a)
            hi = mid;
        else if (cp > coli__uni_decomp[mid].a)
            lo = mid + 1;
        else
            return &coli__uni_decomp[mid];
    }
    return NULL;
}

/* Appends the full canonical decomposition of cp. depth bounds recursion
 * (real chains are at most 4 deep). */
static int decompose(cpvec *out, uint32_t cp, int depth)
{
    const coli__uni_triple *d;
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t si = cp - SBASE;
        if (cpvec_push(out, LBASE + si / NCOUNT) || cpvec_push(out, VBASE + (si % NCOUNT) / TCOUNT))
            return -1;
        if (si % TCOUNT)
            return cpvec_push(out, TBASE + si % TCOUNT);
        return 0;
    }
    d = depth < 8 ? decomp_find(cp) : NULL;
    if (!d)
        return cpvec_push(out, cp);
    if (decompose(out, d->b, depth + 1))
        return -1;
    if (d->c && decompose(out, d->c, depth + 1))
        return -1;
    return 0;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    size_t lo = 0, hi = COUNT(coli__uni_comp);
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const coli__uni_triple *t = &coli__uni_comp[mid];
        if (a < t->a || (a == t->a && b < t->b))
            hi = mid;
        else if (a > t->a || b > t->b)
            lo = mid + 1;
        else
            return t->c;
    }
    return 0;
}

/* Stable sort of v[0..n) by combining class (all non-zero). */
static int sort_by_ccc(uint32_t *v, unsigned char *cc, size_t n)
{
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            unsigned char c = cc[i];
            size_t j = i;
            while (j > 0 && cc[j - 1] > c) {
                v[j] = v[j - 1];
                cc[j] = cc[j - 1];
                j--;
            }
            v[j] = x;
            cc[j] = c;
        }
        return 0;
    }
    /* Long runs: a counting sort keeps this linear. */
    {
        size_t count[257] = {0};
        uint32_t *tmp = malloc(n * sizeof *tmp);
        if (!tmp)
            return -1;
        for (size_t i = 0; i < n; i++)
            count[cc[i] + 1]++;
        for (size_t k = 1; k < 257; k++)
            count[k] += count[k - 1];
        for (size_t i = 0; i < n; i++)
            tmp[count[cc[i]]++] = v[i];
        memcpy(v, tmp, n * sizeof *tmp);
        for (size_t i = 0; i < n; i++)
            cc[i] = (unsigned char)coli__uni_ccc(v[i]);
        free(tmp);
    }
    return 0;
}

int coli__uni_nfc(const char *s, size_t n, char **out, size_t *out_len)
{
    cpvec d = {0};
    unsigned char *cc = NULL;
    char *res = NULL;
    size_t i, k, rn;
    int ascii = 1;

    *out = NULL;
    *out_len = 0;
    for (i = 0; i < n; i++) {
        if ((unsigned char)s[i] >= 0x80) {
            ascii = 0;
            break;
        }
    }
    if (ascii) {
        res = malloc(n + 1);
        if (!res)
            return -1;
        memcpy(res, s, n);
        res[n] = '\0';
        *out = res;
        *out_len = n;
        return 0;
    }

    /* 1. full canonical decomposition */
    for (i = 0; i < n;) {
        uint32_t cp;
        size_t len;
        if (!coli__utf8_decode(s + i, n - i, &cp, &len))
            goto fail;
        if (decompose(&d, cp, 0))
            goto fail;
        i += len;
    }
    cc = malloc(d.n ? d.n : 1);
    if (!cc)
        goto fail;
    for (i = 0; i < d.n; i++)
        cc[i] = (unsigned char)coli__uni_ccc(d.v[i]);

    /* 2. canonical ordering of each run of non-starters */
    for (i = 0; i < d.n;) {
        size_t j = i;
        if (cc[i] == 0) {
            i++;
            continue;
        }
        while (j < d.n && cc[j] != 0)
            j++;
        if (j - i > 1 && sort_by_ccc(d.v + i, cc + i, j - i))
            goto fail;
        i = j;
    }

    /* 3. canonical composition, in place: k is the output length */
    {
        size_t starter = (size_t)-1;
        unsigned prev_cc = 0;
        k = 0;
        for (i = 0; i < d.n; i++) {
            uint32_t cp = d.v[i];
            unsigned c = cc[i];
            if (starter != (size_t)-1) {
                int adjacent = (k - 1 == starter);
                if (adjacent || (prev_cc != 0 && prev_cc < c)) {
                    uint32_t comp = compose_pair(d.v[starter], cp);
                    if (comp) {
                        d.v[starter] = comp;
                        continue;
                    }
                }
            }
            if (c == 0)
                starter = k;
            d.v[k++] = cp;
            prev_cc = c;
        }
    }

    /* 4. encode */
    res = malloc(k * 4 + 1);
    if (!res)
        goto fail;
    rn = 0;
    for (i = 0; i < k; i++)
        rn += coli__utf8_encode(d.v[i], res + rn);
    res[rn] = '\0';
    free(d.v);
    free(cc);
    *out = res;
    *out_len = rn;
    return 0;

fail:
    free(d.v);
    free(cc);
    return -1;
}
