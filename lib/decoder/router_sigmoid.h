/* router_sigmoid.h - the sigmoid router's choice for one token (internal;
 * lib/decoder/router_sigmoid.c, tested alone by tests/test_families.c). */
#ifndef COLI_ROUTER_SIGMOID_H
#define COLI_ROUTER_SIGMOID_H

#include "io/model_config.h"

#define COLI__MAX_GROUPS 64 /* expert groups a route can keep track of */

/* From one token's sigmoid scores s [E] and correction bias [E]: the K
 * experts sel (in order of choice) and their weights w, as
 * docs/formats.md's "The sigmoid router" writes it. cv [E] and taken [E]
 * are scratch; o->n_group <= COLI__MAX_GROUPS. */
void coli__sigmoid_choose(const coli__router_opts *o, const float *s, const float *bias, int E, int K, float *cv,
                          unsigned char *taken, int *sel, float *w);

#endif
