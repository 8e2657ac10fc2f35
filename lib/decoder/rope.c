/* rope.c - rotary position embedding, rotate-half form. */
#include <math.h>

#include "decoder/rope.h"

void coli__rope_table(float *cs, const coli__config *c, int pos)
{
    const int half = c->rot_dim / 2;
    const float f = c->rope.table_factor;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * c->rope.inv[i];
        cs[i] = cosf(ang);
        cs[half + i] = sinf(ang);
        if (f != 1.0f) { /* YaRN's attention factor (docs/formats.md) */
            cs[i] = cs[i] * f;
            cs[half + i] = cs[half + i] * f;
        }
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

void coli__rope_deinterleave(float *v, int rot, float *tmp)
{
    const int half = rot / 2;
    for (int i = 0; i < half; i++) {
        tmp[i] = v[2 * i];
        tmp[half + i] = v[2 * i + 1];
    }
    for (int i = 0; i < rot; i++)
        v[i] = tmp[i];
}
