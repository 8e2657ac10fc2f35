/* indexer.h - DeepSeek sparse attention's lightning indexer (GLM-5), in
 * the written order of docs/formats.md ("Sparse attention") (internal).
 *
 * The latent attention (lib/decoder/attention_mla.c) asks it which of a
 * token's past positions to attend: all of them up to index_topk, else
 * the index_topk best by the indexer's score. Its key of each position is
 * cached in the latent's row, after the rotary key. */
#ifndef COLI_INDEXER_H
#define COLI_INDEXER_H

#include "decoder/pass.h"
#include "decoder/pieces.h"

/* The chunk's part of the indexer, beside the latent attention's buffers:
 * each token's query heads, key, head weights and choice. */
typedef struct coli__indexer_bufs {
    float *q;   /* [S, heads, dim] */
    float *k;   /* [S, dim] */
    float *w;   /* [S, heads] */
    int *sel;   /* [S, topk + 1]: a count (-1: every position), then that many positions, increasing */
} coli__indexer_bufs;

/* Floats the buffers take a token (0 without sparse attention). */
size_t coli__indexer_per_token(const coli__config *c);
/* Floats a thread's scoring takes with room positions. */
size_t coli__indexer_task(const coli__config *c, int room);
/* The buffers from p on (floats, each 64-byte spaced): p's end. */
float *coli__indexer_bufs_at(const coli__config *c, int S, float *p, coli__indexer_bufs *x);

/* Layer l's indexer tensors (a full layer's; none on shared ones). */
coli_status coli__indexer_load(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly);

/* The products of the chunk's queries (from qa, the normed query LoRA
 * [S, q_lora]), keys and head weights (from b->xn) into x, then the key's
 * LayerNorm, RoPE on both and the weights' factor. */
coli_status coli__indexer_project(coli__pass *b, const coli__layer *ly, const float *qa, const coli__indexer_bufs *x);

/* Each token's choice into x->sel, over the keys cached in layer l of
 * its segment (stored before: the chunk's own included). task: the
 * threads' scratch, coli__indexer_task floats each for the segment's
 * coli__pass_room. */
void coli__indexer_select(coli__pass *b, int l, const coli__indexer_bufs *x, float *task);

/* Token t's choice (sel of coli__indexer_bufs), or NULL where it attends
 * every position: no sparse attention, or no more positions than
 * index_topk. */
const int *coli__indexer_choice(const coli__config *c, const coli__indexer_bufs *x, int t);

/* Scores sc[0..n) of one head of a token whose choice is sel: positions
 * not chosen become -inf; returns the largest of the chosen ones. */
float coli__indexer_mask(const int *sel, float *sc, int n);

#endif
