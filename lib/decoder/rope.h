/* rope.h - rotary position embedding, rotate-half form (internal). */
#ifndef COLI_ROPE_H
#define COLI_ROPE_H

/* The cosines and sines of RoPE at position pos: cs[i], cs[rot/2 + i] for
 * the frequency of pair i. Made once per token, not once per head and
 * layer. */
void coli__rope_table(float *cs, int rot, int pos, double theta);

/* Rotates the first rot dims of a head vector by the table cs. */
void coli__rope(float *v, int rot, const float *cs);

#endif
