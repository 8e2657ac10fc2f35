/* store.h - where the routed experts of a converted model live in host
 * memory: mapped from model.coli, or streamed from it into a bounded
 * cache of slots (internal).
 *
 * A streamed store holds as many experts as the RAM budget leaves room
 * for after the dense weights. Reads of one record each go to a pool of
 * I/O threads (O_DIRECT where the file system allows, so that the budget
 * is the real memory use); a reader needing an expert waits only for its
 * own record. Replacement is per layer: a miss evicts the least recently
 * used expert of its own layer once that layer holds its share of the
 * slots, else of the layer furthest above its share; the hot set (the
 * experts most often routed to, from model.coli.hot) is pinned. Which
 * slot an expert occupies never changes its bytes, so never a result.
 *
 * lib/store/ holds converted models: the container (read and written),
 * the experts' cache of slots and the hot set. It may include lib/io/,
 * lib/cpu/ and lib/base/; what it needs of the loader is handed down to it
 * (convert.h). */
#ifndef COLI_STORE_H
#define COLI_STORE_H

#include "store/container.h"
#include "cpu/kernels.h"
#include "base/log.h"

typedef struct coli__store coli__store;

typedef struct coli__store_conf {
    uint64_t budget;     /* bytes of RAM for weights and the KV cache; 0: no limit */
    uint64_t kv_bytes;   /* of the budget, kept for the KV cache of one context */
    int64_t kv_positions; /* its positions (for messages) */
    int64_t slots;       /* experts in RAM; 0: from the budget */
    int prefetch;        /* 0 or 1 */
    int io_threads;
    int hotset;          /* read and update model.coli.hot */
    int top_k;
    coli__logger log;
    const char *dir;     /* the model directory */
} coli__store_conf;

/* A model's store over container c (its expert layouts give the
 * matrices). COLI_ERANGE when the budget cannot hold the dense weights, the KV
 * cache and one token's routed experts (the message has the numbers);
 * COLI_IO_FAIL_AFTER is read here. */
coli_status coli__store_open(const coli__container *c, const coli__store_conf *conf, coli__store **out,
                             coli__err *err);
/* Loads the hot set, except experts whose skip[l * E + e] >= 0 (the device
 * holding it, coli__experts_placement, of n_skip entries: a layer past
 * them, the MTP layer of a model opened without it, skips none; NULL:
 * none skipped). */
coli_status coli__store_warm(coli__store *s, const signed char *skip, size_t n_skip, coli__err *err);
void coli__store_close(coli__store *s);

/* The three matrices (gate, up, down) of expert e of layer l, readable
 * until coli__store_put(*ref). When no slot is free and wait is 0,
 * returns COLI_ENOSPC without waiting (the caller holds slots it must
 * give back first); with wait 1 it waits for one. A failed read or a
 * checksum mismatch is COLI_EIO / COLI_EFORMAT with the file, layer and
 * expert named. */
coli_status coli__store_get(coli__store *s, int l, int e, int wait, coli__mat out[3], int *ref, coli__err *err);
void coli__store_put(coli__store *s, int ref);
/* Starts reading experts of layer l that are not held (no waiting); also
 * records them as the prediction for layer l. */
void coli__store_prefetch(coli__store *s, int l, const int *experts, int n);
/* Starts reading the experts of layer l the caller is about to get. */
void coli__store_want(coli__store *s, int l, const int *experts, int n);
/* One token's routed experts of layer l: scores the prediction, counts
 * routing for the hot set. */
void coli__store_routed(coli__store *s, int l, const int *experts, int n, int score);
/* Reads expert e of layer l into buf (coli__store_record_bytes, 4096-
 * aligned) and checks it: for uploads that need no slot. */
coli_status coli__store_read_into(coli__store *s, int l, int e, void *buf, coli__mat out[3], coli__err *err);
uint64_t coli__store_record_bytes(const coli__store *s);
int coli__store_streams(const coli__store *s);
/* A snapshot of the routing counts so far ([L * E], valid until the next
 * call), for hot-first GPU placement at open. */
const uint64_t *coli__store_counts(coli__store *s);

void coli__store_stats(const coli__store *s, coli_store_stats *out);
const char *coli__store_detail(const coli__store *s);

#endif
