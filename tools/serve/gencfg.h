/* gencfg.h - sampling defaults of the checkpoint: coli generate's
 * (temperature 0.8, top-k 40, top-p 0.95), then generation_config.json's
 * temperature, top_k, top_p, min_p, repetition_penalty and do_sample where
 * it gives them. coli serve and coli chat start from these. */
#ifndef COLI_SERVE_GENCFG_H
#define COLI_SERVE_GENCFG_H

#include <colibri/colibri.h>

void gencfg_defaults(const char *dir, coli_sampler_params *sp);

#endif
