/* piece_kinds.h - the kinds of decoder pieces a model family is made of
 * (internal): one enum per piece (attention, router, feed-forward). A
 * family's row (lib/io/families.c) names its kinds; lib/decoder/pieces.c
 * maps each to its code, and the GPU pipeline (lib/gpu/) builds a layer
 * from them. A new kind is a value here, its piece file(s) in lib/model/,
 * and its case where lib/gpu/ builds a layer (docs/architecture.md,
 * "Adding a piece kind"). */
#ifndef COLI_PIECE_KINDS_H
#define COLI_PIECE_KINDS_H

/* The attention of every layer. */
typedef enum coli__attn_kind {
    COLI_ATTN_GQA, /* grouped-query attention (lib/decoder/attention.c) */
    COLI_ATTN_MLA, /* multi-head latent attention, absorbed (lib/decoder/attention_mla.c) */
    COLI_ATTN_KINDS
} coli__attn_kind;

/* How a MoE layer picks its experts. */
typedef enum coli__router_kind {
    COLI_ROUTER_SOFTMAX_TOPK, /* softmax, top-k, optional renormalisation (lib/decoder/router.c) */
    COLI_ROUTER_SIGMOID_GROUP, /* sigmoid, a correction bias for choosing, group-limited top-k, scaling
                                  (lib/decoder/router_sigmoid.c) */
    COLI_ROUTER_KINDS
} coli__router_kind;

/* The feed-forward of a MoE layer. */
typedef enum coli__moe_kind {
    COLI_MOE_ROUTED,        /* routed experts only (lib/decoder/ffn.c) */
    COLI_MOE_ROUTED_SHARED, /* routed experts plus always-on shared experts (lib/decoder/ffn.c) */
    COLI_MOE_KINDS
} coli__moe_kind;

/* The feed-forward of a dense layer. */
typedef enum coli__mlp_kind {
    COLI_MLP_SWIGLU, /* down(silu(gate x) * up x) (lib/decoder/ffn.c) */
    COLI_MLP_KINDS
} coli__mlp_kind;

#endif
