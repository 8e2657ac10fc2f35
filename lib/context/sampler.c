/* sampler.c - repetition, frequency and presence penalties, greedy,
 * temperature, top-k, top-p and min-p sampling.
 *
 * The random stream is xoshiro256** seeded through splitmix64, so a seed
 * gives the same tokens on every platform. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/sized.h"
#include "model/finite.h"
#include "context/sampler.h"

typedef struct cand {
    float p;
    int32_t id;
} cand;

struct coli_sampler {
    coli_sampler_params p;
    uint64_t s[4];
    cand *c, *c2;   /* vocab-sized scratch, and the sort's or selection's */
    size_t cap;
    float *pen;     /* penalised copy of the logits */
    uint8_t *mark;  /* tokens already penalised in this step */
    uint32_t *count; /* occurrences of each token in the history (frequency penalty) */
    size_t pen_cap;
    int32_t *hist;  /* ring of the last p.repeat_last_n tokens seen */
    size_t n_hist, head;
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(coli_sampler *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(coli_sampler *r)
{
    return (double)(next_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

COLI_API void coli_sampler_params_init(coli_sampler_params *p, size_t struct_size)
{
    coli_sampler_params d;
    memset(&d, 0, sizeof d);
    d.temperature = 0.0f;
    d.top_k = 0;
    d.top_p = 1.0f;
    d.min_p = 0.0f;
    d.repeat_penalty = 1.0f;
    d.repeat_last_n = 64;
    d.seed = 0;
    coli__sized_init(p, &d, sizeof d, struct_size);
}

static void reseed(coli_sampler *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->s[i] = splitmix64(&x);
}

/* The first version of coli_sampler_params is the whole of this one. */
#define COLI__SAMPLER_PARAMS_V1 (offsetof(coli_sampler_params, seed) + sizeof(uint64_t))

COLI_API coli_status coli_sampler_create(const coli_sampler_params *params, coli_sampler **out)
{
    if (!out)
        return COLI_EINVAL;
    *out = NULL;
    coli_sampler_params p;
    coli_sampler_params_init(&p, sizeof p);
    COLI_TRY(coli__sized_in(&p, params, sizeof p, COLI__SAMPLER_PARAMS_V1, "coli_sampler_params", NULL));
    if (!isfinite(p.temperature) || !(p.top_p > 0.0f) || !isfinite(p.top_p) || !(p.min_p >= 0.0f) ||
        !(p.min_p <= 1.0f) || !(p.repeat_penalty > 0.0f) || !isfinite(p.repeat_penalty) ||
        p.repeat_last_n < 0 || p.repeat_last_n > (1 << 20) || !(p.frequency_penalty >= -2.0f) ||
        !(p.frequency_penalty <= 2.0f) || !(p.presence_penalty >= -2.0f) || !(p.presence_penalty <= 2.0f))
        return COLI_EINVAL;
    coli_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return COLI_ENOMEM;
    s->p = p;
    /* the history exists when any penalty reads it */
    int any = p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    if (any && p.repeat_last_n > 0 &&
        !(s->hist = malloc((size_t)p.repeat_last_n * sizeof *s->hist))) {
        free(s);
        return COLI_ENOMEM;
    }
    reseed(s);
    *out = s;
    return COLI_OK;
}

COLI_API void coli_sampler_free(coli_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s->c2);
    free(s->pen);
    free(s->mark);
    free(s->count);
    free(s->hist);
    free(s);
}

/* Remembers a token for the penalties (a no-op when they are off). */
static void remember(coli_sampler *s, int32_t tok)
{
    if (!s->hist)
        return;
    size_t n = (size_t)s->p.repeat_last_n;
    s->hist[s->head] = tok;
    s->head = (s->head + 1) % n;
    if (s->n_hist < n)
        s->n_hist++;
}

COLI_API coli_status coli_sampler_accept(coli_sampler *s, const int32_t *tokens, size_t n)
{
    if (!s || (!tokens && n))
        return COLI_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0)
            return COLI_EINVAL;
    for (size_t i = 0; i < n; i++)
        remember(s, tokens[i]);
    return COLI_OK;
}

COLI_API void coli_sampler_reset(coli_sampler *s)
{
    if (!s)
        return;
    s->n_hist = s->head = 0;
    reseed(s);
}

/* The largest of n values, none NaN, kept per lane so that the scan
 * vectorises (a chain through v[best] costs a dependent load per value,
 * ~100 us for a 32000-token vocabulary). */
static float max_of(const float *v, size_t n)
{
    enum { LANES = 16 };
    float m[LANES], best = v[0];
    size_t i = 0;
    for (int j = 0; j < LANES; j++)
        m[j] = v[0];
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            m[j] = v[i + j] > m[j] ? v[i + j] : m[j];
    for (int j = 0; j < LANES; j++)
        best = m[j] > best ? m[j] : best;
    for (; i < n; i++)
        best = v[i] > best ? v[i] : best;
    return best;
}

int32_t coli__argmax(const float *v, size_t n)
{
    const float best = max_of(v, n);
    size_t k = 0;
    while (k + 1 < n && v[k] != best)
        k++;
    return (int32_t)k;
}

/* Descending by probability; ties by lower id, so the order is total. */
static int by_prob_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* x comes before y in by_prob_desc's order. */
static int before(const cand *x, const cand *y)
{
    return x->p > y->p || (x->p == y->p && x->id < y->id);
}

/* Restores the heap below h[i]: h[0] is the last in the order of the k. */
static void sift(cand *h, size_t k, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && before(&h[w], &h[l]))
            w = l;
        if (r < k && before(&h[w], &h[r]))
            w = r;
        if (w == i)
            return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The first k of c[0..n) in by_prob_desc's order, in that order, into
 * c[0..k): a heap of the best k so far, then a sort of those k only (a
 * sort of a whole vocabulary took milliseconds a token). h: k entries. */
static void first_k(cand *c, size_t n, size_t k, cand *h)
{
    memcpy(h, c, k * sizeof *h);
    for (size_t i = k / 2; i-- > 0;)
        sift(h, k, i);
    for (size_t i = k; i < n; i++)
        if (before(&c[i], &h[0])) {
            h[0] = c[i];
            sift(h, k, 0);
        }
    memcpy(c, h, k * sizeof *c);
    qsort(c, k, sizeof *c, by_prob_desc);
}

/* All of c[0..n) in by_prob_desc's order. The probabilities are in
 * [0, 1] (expf of a value <= 0), so their bits order them as integers; a
 * stable radix sort on the complemented bits keeps ties in ascending id,
 * as c comes. t: n entries. */
static void sort_all(cand *c, size_t n, cand *t)
{
    size_t cnt[256];
    for (int shift = 0; shift < 32; shift += 8) {
        memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &c[i].p, 4);
            cnt[(~b >> shift) & 255]++;
        }
        size_t at = 0;
        for (int d = 0; d < 256; d++) {
            size_t x = cnt[d];
            cnt[d] = at;
            at += x;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &c[i].p, 4);
            t[cnt[(~b >> shift) & 255]++] = c[i];
        }
        cand *sw = c;
        c = t;
        t = sw;
    }
    /* four passes: the sorted values are back in the caller's c */
}

/* Grows the per-token scratch of the penalties to n tokens. */
static int pen_room(coli_sampler *s, size_t n)
{
    if (s->pen_cap >= n)
        return 1;
    float *pen = realloc(s->pen, n * sizeof *pen);
    if (!pen)
        return 0;
    s->pen = pen;
    uint8_t *mark = realloc(s->mark, n);
    if (!mark)
        return 0;
    s->mark = mark;
    memset(s->mark, 0, n);
    uint32_t *count = realloc(s->count, n * sizeof *count);
    if (!count)
        return 0;
    s->count = count;
    memset(s->count, 0, n * sizeof *count);
    s->pen_cap = n;
    return 1;
}

/* The logits with the penalties applied (steps 1 and 1b), or logits
 * itself when they are off or nothing is remembered yet. NULL if memory
 * runs out. mark and count are all zero between calls. */
static const float *penalised(coli_sampler *s, const float *logits, size_t n)
{
    if (!s->hist || s->n_hist == 0)
        return logits;
    if (!pen_room(s, n))
        return NULL;
    memcpy(s->pen, logits, n * sizeof *s->pen);
    float r = s->p.repeat_penalty, fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
    for (size_t i = 0; i < s->n_hist; i++)
        if ((size_t)s->hist[i] < n)
            s->count[s->hist[i]]++;
    for (size_t i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if ((size_t)t >= n || s->mark[t])
            continue;
        s->mark[t] = 1; /* each distinct token once */
        if (r != 1.0f)
            s->pen[t] = s->pen[t] > 0.0f ? s->pen[t] / r : s->pen[t] * r;
        s->pen[t] -= (float)s->count[t] * fp + pp;
    }
    for (size_t i = 0; i < s->n_hist; i++)
        if ((size_t)s->hist[i] < n)
            s->mark[s->hist[i]] = 0, s->count[s->hist[i]] = 0;
    return s->pen;
}

static coli_status pick(coli_sampler *s, const float *logits, size_t n, int32_t *token)
{
    if (s->p.temperature <= 0.0f || s->p.top_k == 1) {
        *token = coli__argmax(logits, n);
        return COLI_OK;
    }
    if (s->cap < n) {
        cand *c = realloc(s->c, n * sizeof *c);
        if (!c)
            return COLI_ENOMEM;
        s->c = c;
        cand *c2 = realloc(s->c2, n * sizeof *c2);
        if (!c2)
            return COLI_ENOMEM;
        s->c2 = c2;
        s->cap = n;
    }
    cand *c = s->c;
    const float mx = max_of(logits, n);
    for (size_t i = 0; i < n; i++) {
        c[i].p = expf((logits[i] - mx) / s->p.temperature);
        c[i].id = (int32_t)i;
    }
    size_t m = n;
    if (s->p.top_k > 0 || s->p.top_p < 1.0f || s->p.min_p > 0.0f) {
        /* only the candidates kept are ordered: the same first m as a
         * sort of all n */
        if (s->p.top_k > 0 && (size_t)s->p.top_k < m) {
            m = (size_t)s->p.top_k;
            first_k(c, n, m, s->c2);
        } else {
            sort_all(c, n, s->c2);
        }
        if (s->p.top_p < 1.0f) {
            double kept = 0, run = 0;
            for (size_t i = 0; i < m; i++)
                kept += c[i].p;
            size_t i = 0;
            while (i < m) {
                run += c[i++].p;
                if (run >= s->p.top_p * kept)
                    break;
            }
            m = i;
        }
        if (s->p.min_p > 0.0f) {
            /* c[0] is the most likely token; it always stays */
            float floor_p = s->p.min_p * c[0].p;
            size_t i = 1;
            while (i < m && c[i].p >= floor_p)
                i++;
            m = i;
        }
    }
    double sum = 0;
    for (size_t i = 0; i < m; i++)
        sum += c[i].p;
    double u = next_unit(s) * sum, run = 0;
    for (size_t i = 0; i < m; i++) {
        run += c[i].p;
        if (u < run) {
            *token = c[i].id;
            return COLI_OK;
        }
    }
    *token = c[m - 1].id;
    return COLI_OK;
}

coli_status coli__sample_logits(coli_sampler *s, const float *logits, size_t n, int32_t *token,
                                coli__err *err)
{
    if (n == 0)
        return coli__fail(err, COLI_EINVAL, "sampling: empty vocabulary");
    /* NaN would make the order of the candidates meaningless */
    size_t bad = coli__first_nonfinite(COLI_DT_F32, logits, n);
    if (bad < n)
        return coli__fail(err, COLI_ERANGE, "sampling: the logit of token id %zu is %s", bad,
                          isnan(logits[bad]) ? "NaN" : "infinite");
    const float *l = penalised(s, logits, n);
    if (!l)
        return coli__fail(err, COLI_ENOMEM, "sampling: out of memory for the penalties");
    coli_status st = pick(s, l, n, token);
    if (st != COLI_OK)
        return coli__fail(err, st, "sampling: out of memory for %zu candidates", n);
    remember(s, *token);
    return COLI_OK;
}
