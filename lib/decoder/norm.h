/* norm.h - RMSNorm as docs/formats.md writes it (internal). */
#ifndef COLI_NORM_H
#define COLI_NORM_H

#include "cpu/kernels.h"

/* out[i] = w[i] * (x[i] * r) for i < n, r = 1 / sqrtf(dot(x, x) / n + eps),
 * dot the float product of kernel set k (the same bits in every set); out
 * may be x. */
void coli__rmsnorm(const coli__cpuk *k, float *out, const float *x, const float *w, int n, float eps);

#endif
