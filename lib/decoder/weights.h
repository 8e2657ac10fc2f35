/* weights.h - a model's weights as the forward pass reads them (internal):
 * each layer's matrices and norms, the MTP layer's own, and the pieces of
 * the model's family. The loader (lib/model/weights.c) fills them in. */
#ifndef COLI_DECODER_WEIGHTS_H
#define COLI_DECODER_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"

typedef struct coli__layer {
    coli__mat wq, wk, wv, wo;        /* MLA: wq is q_proj or q_b_proj, wo o_proj */
    coli__mat q_a, kv_a, kv_b;       /* MLA: the query's LoRA (data NULL: none), the latent's */
    float *q_a_norm, *kv_a_norm;     /* MLA: their RMSNorms */
    coli__mat idx_wq, idx_wk, idx_w; /* DSA's indexer (data NULL: none, or a shared layer) */
    float *idx_k_norm, *idx_k_bias;  /* its key's LayerNorm */
    float *attn_norm, *ffn_norm;     /* [hidden], widened to f32 */
    float *q_norm, *k_norm;          /* NULL when the architecture has none */
    float *bq, *bk, *bv;             /* q/k/v biases, or NULL */
    int is_moe;
    coli__mat gate, up, down;        /* dense MLP */
    coli__mat router;                /* [n_experts, hidden] */
    float *router_bias;              /* [n_experts]: the sigmoid router's correction bias, or NULL */
    coli__mat s_gate, s_up, s_down;  /* the shared experts as one SwiGLU (data NULL: none) */
    coli__mat *e_gate, *e_up, *e_down; /* n_experts each */
} coli__layer;

/* One matrix of the checkpoint, for sizing it in any format. */
typedef struct coli__matrec {
    int rows, cols;
    uint8_t kind, stored_size, role;
} coli__matrec;

/* A block of memory: an allocation of the loader, or a mapped region. */
typedef struct coli__block {
    void *p;
    size_t size;
} coli__block;

/* The MTP layer's own weights; its decoder layer is layers[n_trunk]. */
typedef struct coli__mtp_weights {
    coli__mat eh_proj;               /* [hidden, 2 hidden] */
    float *enorm, *hnorm, *head_norm;
    coli__mat embed, head;           /* the model's own where the checkpoint has no copy, or
                                        one that is byte for byte the model's */
} coli__mtp_weights;

typedef struct coli__weights {
    coli__mat embed;                 /* [vocab, hidden] */
    coli__mat lm_head;               /* [vocab, hidden]; the embedding when tied */
    float *final_norm;
    coli__layer *layers;             /* cfg.n_layers: the decoder's, then the MTP layer */
    coli__mtp_weights mtp;           /* with cfg.n_layers > cfg.n_trunk */
    coli__block *owned;              /* allocations made while loading; size 0: malloc'd */
    size_t n_owned, cap_owned;
    coli__block *regions;            /* mapped regions holding the others */
    size_t n_regions, cap_regions;
    char *arena;                     /* the free end of the region shared by small ones */
    size_t arena_left;
    uint64_t bytes;                  /* bytes of weights as held, norms included */
    int64_t n_params_total, n_params_active;
    int64_t n_vec_params;            /* norm vectors: always f32 */
    coli__matrec *recs;              /* every matrix, for coli__weights_bytes */
    size_t n_recs, cap_recs;
    int n_by_dt[8];                  /* matrices held in each coli__dtype */
} coli__weights;

/* The decoder's pieces of the model's family (lib/decoder/pieces.h),
 * chosen once at open. */
typedef struct coli__pieces {
    const struct coli__attn_piece *attn;
    const struct coli__router_piece *router;
    const struct coli__ffn_piece *moe; /* the feed-forward of MoE layers */
    const struct coli__ffn_piece *mlp; /* of dense layers */
} coli__pieces;

#endif
