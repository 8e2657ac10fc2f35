/* norm.c - RMSNorm in the written order of docs/formats.md: the sum of
 * squares is the float product of x with itself, the scaling in f32. */
#include <math.h>

#include "decoder/norm.h"

void coli__rmsnorm(const coli__cpuk *k, float *out, const float *x, const float *w, int n, float eps)
{
    float ss = coli__dot_f32(k, x, x, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}
