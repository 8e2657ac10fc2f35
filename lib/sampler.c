/* sampler.c - greedy, temperature, top-k and top-p sampling.
 *
 * The random stream is xoshiro256** seeded through splitmix64, so a seed
 * gives the same tokens on every platform. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

typedef struct cand {
    float p;
    int32_t id;
} cand;

struct coli_sampler {
    coli_sampling p;
    uint64_t s[4];
    cand *c;       /* vocab-sized scratch */
    size_t cap;
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

COLI_API void coli_sampling_default(coli_sampling *s)
{
    if (!s)
        return;
    s->temperature = 0.0f;
    s->top_k = 0;
    s->top_p = 1.0f;
    s->seed = 0;
}

COLI_API coli_status coli_sampler_create(const coli_sampling *params, coli_sampler **out)
{
    if (!out)
        return COLI_EINVAL;
    *out = NULL;
    coli_sampling p;
    coli_sampling_default(&p);
    if (params)
        p = *params;
    if (!isfinite(p.temperature) || !isfinite(p.top_p) || p.top_p <= 0.0f)
        return COLI_EINVAL;
    coli_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return COLI_ENOMEM;
    s->p = p;
    uint64_t x = p.seed;
    for (int i = 0; i < 4; i++)
        s->s[i] = splitmix64(&x);
    *out = s;
    return COLI_OK;
}

COLI_API void coli_sampler_free(coli_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s);
}

static int32_t argmax(const float *v, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

/* Descending by probability; ties by lower id, so the order is total. */
static int by_prob_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

coli_status coli__sample_logits(coli_sampler *s, const float *logits, size_t n, int32_t *token)
{
    if (n == 0)
        return COLI_EINVAL;
    if (s->p.temperature <= 0.0f || s->p.top_k == 1) {
        *token = argmax(logits, n);
        return COLI_OK;
    }
    if (s->cap < n) {
        cand *c = realloc(s->c, n * sizeof *c);
        if (!c)
            return COLI_ENOMEM;
        s->c = c;
        s->cap = n;
    }
    cand *c = s->c;
    float mx = logits[argmax(logits, n)];
    for (size_t i = 0; i < n; i++) {
        c[i].p = expf((logits[i] - mx) / s->p.temperature);
        c[i].id = (int32_t)i;
    }
    size_t m = n;
    if (s->p.top_k > 0 || s->p.top_p < 1.0f) {
        qsort(c, n, sizeof *c, by_prob_desc);
        if (s->p.top_k > 0 && (size_t)s->p.top_k < m)
            m = (size_t)s->p.top_k;
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
