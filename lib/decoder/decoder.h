/* decoder.h - what the forward pass runs on (internal): a model's
 * config, weights, pieces and CPU kernels, and the two ways the GPU tier
 * takes part, as functions it hands in (the pass calls nothing of the
 * tier by name):
 *  - experts: where the routed experts of a MoE layer run;
 *  - place: products the tier holds a matrix of on a device (the output
 *    projection), which run there with the CPU's bits.
 * The model fills one in at open (coli_model.dec). */
#ifndef COLI_DECODER_H
#define COLI_DECODER_H

#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "gpu/backend.h"
#include "io/model_config.h"

struct coli__weights;
struct coli__pieces;

/* What one context counted of the tier's work (since its creation or the
 * last coli_context_stats_reset). */
typedef struct coli__experts_counts {
    uint64_t pairs;                               /* routed (token, expert) pairs */
    uint64_t experts;                             /* experts read: distinct ones per layer and pass */
    uint64_t dev_pairs[COLI_GPU_MAX_DEVICES];     /* of them, served by device d */
    uint64_t dev_fallback[COLI_GPU_MAX_DEVICES];  /* placed on d, computed on the CPU */
} coli__experts_counts;

/* The buffers of one MoE layer, lent by the forward pass. Scratch sizes in
 * rows of S * top_k: xe, ye [rows, H]; g, u [rows, I]; rows, pos [rows]. */
typedef struct coli__moe_io {
    const float *xn; /* [S, H] normalised input */
    int S;
    const int *sel;    /* [S, K] routed experts */
    const float *wts;  /* [S, K] their weights */
    float *xe, *ye, *g, *u;
    int *rows, *pos;
    float *out;        /* [S, H] the layer's output */
    /* the next MoE layer's predicted experts (coli__experts_lookahead),
     * whose reads start once this layer's own are under way; n_pred 0:
     * none */
    int pred_layer, n_pred;
    const int *pred;
    signed char *group; /* [n_experts] scratch: each routed expert's group */
    /* NULL, or the layer's shared experts (gate, up, down), computed on
     * the CPU in the routed experts' hand-outs from xn into shared_y [S,
     * H] (not added to out); their gate and up rows go to shared_g and
     * shared_u [S, shared_inter] */
    const coli__mat *shared;
    float *shared_g, *shared_u, *shared_y;
} coli__moe_io;

typedef struct coli__decoder_experts {
    /* The routed experts of MoE layer l: their weighted sum into io->out
     * (lib/tier/experts.h, coli__experts_run). */
    coli_status (*run)(void *user, int l, coli__pool *pool, coli__moe_io *io, uint64_t *read,
                       coli__experts_counts *counts, coli__err *err);
    /* 1: predict the next MoE layer's experts for io->pred (streaming). */
    int (*lookahead)(void *user);
    void *user;
} coli__decoder_experts;

typedef struct coli__decoder_place {
    /* y [n, w->rows] = w x on the device that holds w: COLI_OK when it ran
     * there; anything else (w is not held, or the device failed) leaves
     * the product to the CPU. NULL: nothing is placed. */
    coli_status (*mm)(void *user, const coli__mat *w, const float *x, int n, float *y);
    void *user;
} coli__decoder_place;

typedef struct coli__decoder {
    const coli__config *cfg;
    const struct coli__weights *w;
    const struct coli__pieces *pieces;
    const coli__cpuk *cpuk;
    coli__decoder_experts experts;
    coli__decoder_place place;
} coli__decoder;

#endif
