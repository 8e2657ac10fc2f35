/* rope.c - rotary position embedding, rotate-half form. */
#include <math.h>

#include "decoder/rope.h"

void coli__rope_table(float *cs, int rot, int pos, double theta)
{
    int half = rot / 2;
    for (int i = 0; i < half; i++) {
        /* transformers computes the frequencies in float32 */
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)rot);
        float ang = (float)pos * inv;
        cs[i] = cosf(ang);
        cs[half + i] = sinf(ang);
    }
}

void coli__rope(float *v, int rot, const float *cs)
{
    int half = rot / 2;
    for (int i = 0; i < half; i++) {
        float c = cs[i], s = cs[half + i];
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}
