/*
 * logprob.c - log-probabilities of the model's next-token distribution
 * (see logprob.h).
 */
#include "logprob.h"

#include "jsonout.h"
#include "options.h" /* xrealloc */

#include <math.h>
#include <stdlib.h>

int32_t logprob_argmax(const float *logits, size_t n)
{
    /* The largest value that is not NaN, kept per lane so that the scan
     * vectorises (a decode step of a fast model is shorter than a scalar
     * scan of 32000 logits), then its first index: 0 when all are NaN. */
    enum { LANES = 16 };
    float m[LANES], best = -INFINITY;
    size_t i = 0;

    for (int j = 0; j < LANES; j++)
        m[j] = -INFINITY;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
    for (int j = 0; j < LANES; j++)
        best = m[j] > best ? m[j] : best;
    for (; i < n; i++)
        best = logits[i] > best ? logits[i] : best;
    for (i = 0; i < n; i++)
        if (logits[i] == best)
            return (int32_t)i;
    return 0;
}

double logprob_lse(const float *logits, size_t n)
{
    double m = logits[logprob_argmax(logits, n)], s = 0;

    for (size_t i = 0; i < n; i++)
        s += exp((double)logits[i] - m);
    return m + log(s);
}

double logprob_of(const float *logits, double lse, int32_t id)
{
    return (double)logits[id] - lse;
}

/* a ranks before b: a larger logit, or an equal one and a lower id. */
static int before(const float *logits, int32_t a, int32_t b)
{
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

void logprob_top(const float *logits, size_t n, double lse, size_t k, int32_t *ids, double *lp)
{
    size_t have = 0;

    if (k > n)
        k = n;
    if (k == 0)
        return;
    /* Insertion into a sorted list of k: k is small (a handful). */
    for (size_t i = 0; i < n; i++) {
        int32_t id = (int32_t)i;
        size_t at;

        if (have == k && !before(logits, id, ids[k - 1]))
            continue;
        at = have < k ? have++ : k - 1;
        while (at > 0 && before(logits, id, ids[at - 1])) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = id;
    }
    for (size_t j = 0; j < k; j++)
        lp[j] = logprob_of(logits, lse, ids[j]);
}

double logprob_kl(const float *p, double lse_p, const float *q, double lse_q, size_t n)
{
    double k = 0;

    for (size_t i = 0; i < n; i++) {
        double lp = (double)p[i] - lse_p, lq = (double)q[i] - lse_q;
        k += exp(lp) * (lp - lq);
    }
    return k;
}

void logprob_list_add(logprob_list *l, const float *logits, size_t n, int32_t token)
{
    size_t w = 1 + l->k;
    double lse = logprob_lse(logits, n);

    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->ids = xrealloc(l->ids, l->cap * w * sizeof *l->ids);
        l->lp = xrealloc(l->lp, l->cap * w * sizeof *l->lp);
    }
    l->ids[l->n * w] = token;
    l->lp[l->n * w] = logprob_of(logits, lse, token);
    logprob_top(logits, n, lse, l->k, l->ids + l->n * w + 1, l->lp + l->n * w + 1);
    l->n++;
}

void logprob_list_json(FILE *f, const logprob_list *l)
{
    size_t w = 1 + l->k;

    fputc('[', f);
    for (size_t i = 0; i < l->n; i++) {
        const int32_t *id = l->ids + i * w;
        const double *lp = l->lp + i * w;

        fprintf(f, "%s{\"id\":%ld,\"logprob\":", i ? "," : "", (long)id[0]);
        json_real(f, lp[0], "%.17g");
        fputs(",\"top\":[", f);
        for (size_t j = 1; j < w; j++) {
            fprintf(f, "%s{\"id\":%ld,\"logprob\":", j > 1 ? "," : "", (long)id[j]);
            json_real(f, lp[j], "%.17g");
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputc(']', f);
}

void logprob_list_free(logprob_list *l)
{
    free(l->ids);
    free(l->lp);
    l->ids = NULL;
    l->lp = NULL;
    l->n = l->cap = 0;
}
