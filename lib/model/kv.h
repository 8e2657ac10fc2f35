/* kv.h - the keys and values of every layer (internal). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include "io/model_config.h"

/* Keys and values of every layer for positions [0, n_ctx). */
typedef struct coli__kv {
    int n_ctx;
    int kv_dim;
    float *k, *v; /* [layer][pos][kv_dim] */
} coli__kv;

coli_status coli__kv_init(coli__kv *kv, const coli__config *cfg, int n_ctx, coli__err *err);
void coli__kv_free(coli__kv *kv);

#endif
