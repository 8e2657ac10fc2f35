/*
 * logprob.h - log-probabilities of the model's next-token distribution:
 * the log-softmax of the raw logits, computed in double. Shared by
 * `coli generate --logprobs` and `coli perplexity` (and meant for a server):
 * the distribution is the model's, before any sampler setting changes it.
 */
#ifndef COLI_TOOLS_LOGPROB_H
#define COLI_TOOLS_LOGPROB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* log(sum(exp(logits))) in double, shifted by the largest logit so that
 * nothing overflows. */
double logprob_lse(const float *logits, size_t n);

/* The log-probability of token id: logits[id] - lse (lse from logprob_lse). */
double logprob_of(const float *logits, double lse, int32_t id);

/*
 * The k most likely tokens (k <= n), most likely first, the lower id first
 * on equal logits: ids[0..k-1] and their log-probabilities lp[0..k-1].
 */
void logprob_top(const float *logits, size_t n, double lse, size_t k, int32_t *ids, double *lp);

/* KL(p || q) of the distributions of logits p and q (n each), in nats;
 * lse_p and lse_q from logprob_lse. Exactly 0 when p and q are equal. */
double logprob_kl(const float *p, double lse_p, const float *q, double lse_q, size_t n);

/* The index of the largest logit, the lowest on ties (greedy's choice);
 * NaN never wins. */
int32_t logprob_argmax(const float *logits, size_t n);

/*
 * The log-probabilities of generated tokens, one entry per token: its id
 * and log-probability, then the k most likely ids with theirs.
 */
typedef struct logprob_list {
    size_t k;          /* top entries per token */
    size_t n, cap;     /* tokens recorded */
    int32_t *ids;      /* n * (1 + k): the token, then its top k */
    double *lp;        /* the same layout */
} logprob_list;

/* Records token, drawn from logits (n of them), with the top l->k. */
void logprob_list_add(logprob_list *l, const float *logits, size_t n, int32_t token);
/* Writes [{"id":ID,"logprob":LP,"top":[{"id":ID,"logprob":LP},...]},...]. */
void logprob_list_json(FILE *f, const logprob_list *l);
void logprob_list_free(logprob_list *l);

#endif /* COLI_TOOLS_LOGPROB_H */
