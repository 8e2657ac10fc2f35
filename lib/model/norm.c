/* norm.c - RMSNorm: the mean square in double, the scaling in f32. */
#include <math.h>

#include "model/norm.h"

void coli__rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    /* eight partial sums in a fixed order: one chain of n dependent
     * double additions took 4 cycles an element */
    double p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            p[l] += (double)x[i + l] * x[i + l];
    double ss = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
    for (; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}
