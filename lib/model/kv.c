/* kv.c - the KV cache: one block of keys and one of values. */
#include <stdlib.h>
#include <string.h>

#include "model/kv.h"

coli_status coli__kv_init(coli__kv *kv, const coli__config *c, int n_ctx, coli__err *err)
{
    memset(kv, 0, sizeof *kv);
    kv->n_ctx = n_ctx;
    kv->kv_dim = c->n_kv_heads * c->head_dim;
    size_t n = (size_t)c->n_layers * (size_t)n_ctx * (size_t)kv->kv_dim;
    if (n / (size_t)n_ctx != (size_t)c->n_layers * (size_t)kv->kv_dim)
        return coli__fail(err, COLI_ERANGE, "COLI_OPT_CONTEXT: %d positions overflow the KV cache size", n_ctx);
    kv->k = malloc(n * sizeof(float));
    kv->v = malloc(n * sizeof(float));
    if (!kv->k || !kv->v) {
        coli__kv_free(kv);
        return coli__fail(err, COLI_ENOMEM, "COLI_OPT_CONTEXT: no memory for a KV cache of %d positions (%zu MiB)",
                          n_ctx, (2 * n * sizeof(float)) >> 20);
    }
    return COLI_OK;
}

void coli__kv_free(coli__kv *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}
