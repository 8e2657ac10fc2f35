/* pass.h - one forward pass over a chunk of tokens, as the decoder's
 * pieces see it (internal). lib/decoder/forward.c lays out the buffers and
 * runs the layers; the pieces (lib/decoder/pieces.h) read and write here. */
#ifndef COLI_PASS_H
#define COLI_PASS_H

#include "cpu/threadpool.h"
#include "decoder/decoder.h"
#include "decoder/kv.h"
#include "decoder/weights.h"

/* Tokens [t0, t0 + n) of a chunk are one sequence's, at positions pos0..
 * of its cache kv. A context's pass has one segment; coli_eval_batch's has
 * one per context. */
typedef struct coli__seg {
    coli__kv *kv;
    int pos0, t0, n;
} coli__seg;

typedef struct coli__pass {
    const coli__decoder *d;
    const coli__seg *seg;
    int n_seg;
    coli__pool *pool;
    int S;       /* tokens in the chunk */
    int end;     /* the layer after the pass's last */
    /* [S, hidden]: the hidden states, their norm, a sublayer's output */
    float *x, *xn, *o;
    /* attention: q, k, v, the heads' outputs, per thread scores, the
     * chunk's RoPE tables [S, head_dim] */
    float *q, *k, *v, *att, *scores, *rope;
    /* feed-forward: gate and up rows, router logits, experts' in and out
     * rows, routing weights */
    float *g, *u, *rl, *xe, *ye, *wts;
    float *sy; /* [S, hidden]: the shared experts' output */
    float *cat; /* [S, 2 hidden]: the MTP layer's input (lib/decoder/forward.c) */
    int *sel, *rows, *pos, *pred;
    signed char *group; /* [n_experts] where each routed expert runs (lib/tier/experts.c) */
    int pred_layer, n_pred; /* the lookahead's guess for the next MoE layer */
    uint64_t read;          /* weight bytes read by this pass */
    coli__experts_counts *counts;
    coli__err *err;
} coli__pass;

/* Products on the pass's threads that also count the weight bytes they
 * read. */
coli_status coli__pass_mm(coli__pass *b, const coli__mat *w, const float *x, int n, float *y);
coli_status coli__pass_mm_multi(coli__pass *b, const coli__mm *t, int n);

/* Positions an attention's per-head scores have room for when the chunk's
 * last token sees last of them: in steps of 1024, so that the pass's
 * scratch grows with the context (and is rarely reallocated), never past
 * the cache's n_ctx. */
int coli__pass_room(int last, int n_ctx);

#endif
