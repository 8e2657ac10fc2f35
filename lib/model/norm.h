/* norm.h - RMSNorm as transformers computes it (internal). */
#ifndef COLI_NORM_H
#define COLI_NORM_H

/* out[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)) for i < n; out may be x. */
void coli__rmsnorm(float *out, const float *x, const float *w, int n, float eps);

#endif
