/* sampler.h - sampling from a logit vector (internal). */
#ifndef COLI_SAMPLER_H
#define COLI_SAMPLER_H

#include <stddef.h>
#include "colibri/colibri.h"
#include "base/error.h"

/* Picks a token from logits[0..n) and remembers it for the repetition
 * penalty. Non-finite logits are refused (COLI_ERANGE) with a message in err. */
coli_status coli__sample_logits(coli_sampler *s, const float *logits, size_t n, int32_t *token,
                                coli__err *err);

/* The first index of the largest of n values, none NaN. */
int32_t coli__argmax(const float *v, size_t n);

#endif
