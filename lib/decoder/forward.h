/* forward.h - the transformer forward pass on the CPU (internal). */
#ifndef COLI_FORWARD_H
#define COLI_FORWARD_H

#include "cpu/threadpool.h"
#include "decoder/decoder.h"
#include "decoder/kv.h"
#include "decoder/weights.h"

/* Scratch memory reused across calls; grown on demand. */
typedef struct coli__scratch {
    float *p;
    size_t cap; /* floats */
} coli__scratch;

void coli__scratch_free(coli__scratch *s);

/* One pass: tokens[0..n) at positions pos0.. through the decoder, or
 * through the MTP layer (docs/formats.md, "Multi-token prediction") with
 * h_in: token i paired with h_in[i], the decoder's state of the position
 * before it. Their K/V land in kv (the MTP layer's in its own layer).
 * Ids must have been checked against the vocabulary. */
typedef struct coli__fwd {
    const int32_t *tokens;
    int n, pos0;
    const float *h_in;  /* [n, hidden]; NULL: the decoder */
    float *logits;      /* [vocab]: the last token's; [n, vocab] with all_logits */
    int all_logits;
    float *hidden;      /* NULL, or [n, hidden]: every token's state after the final norm */
} coli__fwd;

/* *bytes_read (if not NULL) gets the weight bytes the pass read: matrices
 * used (each expert once per chunk), embedding rows and norms. counts (may
 * be NULL) grows by what the expert tiers served. */
coli_status coli__forward_run(const coli__decoder *d, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                              const coli__fwd *f, uint64_t *bytes_read, coli__experts_counts *counts,
                              coli__err *err);

/* One sequence of a batched pass: n tokens at positions pos0.. of kv;
 * logits [vocab] receives the last one's. */
typedef struct coli__seq {
    coli__kv *kv;
    const int32_t *tokens;
    int n, pos0;
    float *logits;
} coli__seq;

/* The decoder over several sequences in shared chunks: each gets exactly
 * the bits a pass over it alone would give. */
coli_status coli__forward_batch(const coli__decoder *d, const coli__seq *q, int n_q, coli__scratch *s,
                                coli__pool *pool, uint64_t *bytes_read, coli__experts_counts *counts,
                                coli__err *err);

/* The decoder over tokens[0..n): the last one's logits. */
coli_status coli__forward(const coli__decoder *d, coli__kv *kv, coli__scratch *s, coli__pool *pool,
                          const int32_t *tokens, int n, int pos0, float *logits, uint64_t *bytes_read,
                          coli__experts_counts *counts, coli__err *err);

#endif
