/* sampler.h - sampling from a logit vector (internal). */
#ifndef COLI_SAMPLER_H
#define COLI_SAMPLER_H

#include <stddef.h>
#include "colibri/colibri.h"

coli_status coli__sample_logits(coli_sampler *s, const float *logits, size_t n, int32_t *token);

#endif
