/* rope.h - rotary position embedding, rotate-half form (internal). */
#ifndef COLI_ROPE_H
#define COLI_ROPE_H

#include "io/model_config.h"

/* The cosines and sines of c's RoPE at position pos: cs[i], cs[rot/2 + i]
 * for the frequency of pair i (c->rope.inv: default or YaRN), times the
 * table's factor. Made once per token, not once per head and layer. */
void coli__rope_table(float *cs, const coli__config *c, int pos);

/* Rotates the first rot dims of a head vector by the table cs. */
void coli__rope(float *v, int rot, const float *cs);

/* Interleaved pairs (2i, 2i + 1) of the first rot dims into rotate-half's
 * (i, rot/2 + i), as transformers' rope_interleave does before rotating;
 * tmp holds rot floats. */
void coli__rope_deinterleave(float *v, int rot, float *tmp);

#endif
