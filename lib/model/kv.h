/* kv.h - the keys and values of every layer (internal). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include <stdint.h>

#include "io/model_config.h"

/* Keys and values of every layer for positions [0, n_ctx). */
typedef struct coli__kv {
    int n_ctx;
    int kv_dim;
    float *k, *v; /* [layer][pos][kv_dim] */
} coli__kv;

/* Bytes one position takes in the KV cache: a key and a value per layer. */
uint64_t coli__kv_bytes_per_pos(const coli__config *cfg);
/* Positions of a context for the option context (0: the model's maximum). */
int64_t coli__kv_positions(const coli__config *cfg, int64_t opt_context);

/* Allocates the cache (untouched: pages are only committed as positions are
 * written). Refuses, with the bytes needed and the positions that would fit,
 * a context beyond max_position_embeddings or one RAM cannot hold. */
coli_status coli__kv_init(coli__kv *kv, const coli__config *cfg, int n_ctx, coli__err *err);
void coli__kv_free(coli__kv *kv);

#endif
