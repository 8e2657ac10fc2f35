/* kv.h - the keys and values of every layer (internal). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include <stdint.h>

#include "base/dtype.h"
#include "io/model_config.h"

/* Keys and values of every layer for positions [0, n_ctx), in f32 or bf16
 * (COLI_OPT_KV_TYPE; docs/formats.md, "The KV cache"). Each KV head's rows
 * are one run of memory, so that attention streams them. The config's
 * kv_heads, kv_kdim and kv_vdim shape them: MLA caches one row a position,
 * its latent and rotary key, and reads its values from it (vd 0). */
typedef struct coli__kv {
    int n_ctx;
    int n_kv, hd;   /* KV heads, and the key values of each */
    int vd;         /* value values of each; 0: none stored (v is NULL) */
    coli__dtype dt; /* COLI_DT_F32 or COLI_DT_BF16 */
    void *k, *v;    /* [layer][KV head][pos][hd] (v: [vd]) of dt */
} coli__kv;

/* The cache type of option value opt (COLI_KV_F32, COLI_KV_BF16, or -1:
 * COLI_KV_TYPE, else f32) as a coli_kv_type; COLI_EINVAL naming the
 * variable when it is malformed. */
coli_status coli__kv_type_pick(int64_t opt, int64_t *type, coli__err *err);
/* The element type of a coli_kv_type. */
coli__dtype coli__kv_dtype(int64_t type);
/* Bytes one position takes in a KV cache of element type dt: its keys and
 * values of every layer. */
uint64_t coli__kv_bytes_per_pos(const coli__config *cfg, coli__dtype dt);
/* Positions of a context for the option context (0: the model's maximum). */
int64_t coli__kv_positions(const coli__config *cfg, int64_t opt_context);

/* Allocates the cache (untouched: pages are only committed as positions are
 * written). Refuses, with the bytes needed and the positions that would fit,
 * a context beyond max_position_embeddings or one RAM cannot hold. */
coli_status coli__kv_init(coli__kv *kv, const coli__config *cfg, int n_ctx, coli__dtype dt, coli__err *err);
void coli__kv_free(coli__kv *kv);

/* Stores the key k [n_kv * hd] and value v [n_kv * vd] (NULL when vd is
 * 0) of position pos of layer l, each value rounded to the cache's type. */
void coli__kv_store(coli__kv *kv, int l, int pos, const float *k, const float *v);
/* The keys or values (values != 0) of KV head g of layer l: position p's
 * row starts p * hd (values: p * vd) values in; with vd 0, the values are
 * the keys' rows. */
const void *coli__kv_rows(const coli__kv *kv, int l, int g, int values);
/* Position pos's key row of KV head g of layer l, from its value off on
 * (a part of the row: MLA's latent dimensions, the indexer's key). */
const void *coli__kv_key_at(const coli__kv *kv, int l, int g, int pos, int off);

#endif
