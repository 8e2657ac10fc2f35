/* forward.h - the transformer forward pass on the CPU (internal). */
#ifndef COLI_FORWARD_H
#define COLI_FORWARD_H

#include "model/experts.h"
#include "model/kv.h"
#include "model/model.h"
#include "cpu/threadpool.h"

/* Scratch memory reused across calls; grown on demand. */
typedef struct coli__scratch {
    float *p;
    size_t cap; /* floats */
} coli__scratch;

void coli__scratch_free(coli__scratch *s);

/* Runs tokens[0..n) at positions pos0.. (their K/V land in kv) and writes
 * the next-token logits of the last one into logits[vocab]. Ids must have
 * been checked against the vocabulary. *bytes_read (if not NULL) gets the
 * weight bytes the pass read: matrices used (each expert once per chunk),
 * embedding rows and norms. counts (may be NULL) grows by what the
 * expert tiers served. */
coli_status coli__forward(const struct coli_model *m, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                          const int32_t *tokens, int n, int pos0, float *logits, uint64_t *bytes_read,
                          coli__experts_counts *counts, coli__err *err);

#endif
