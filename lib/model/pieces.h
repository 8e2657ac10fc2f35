/* pieces.h - the parts of a decoder layer that differ between model
 * families (internal).
 *
 * lib/model/forward.c keeps only a layer's order of operations; the
 * attention, the router and the feed-forward are pieces, each a table of
 * functions in its own file. A family's row (lib/io/families.c) names its
 * pieces by enum and coli__pieces_pick turns them into these tables once,
 * at model open (coli_model.pieces). A new kind of attention (MLA), router
 * (sigmoid with a correction bias and group-limited top-k) or MoE block
 * (shared experts) is a new table here and an enum there. */
#ifndef COLI_PIECES_H
#define COLI_PIECES_H

#include "model/model.h"
#include "model/pass.h"

typedef struct coli__attn_piece coli__attn_piece;
typedef struct coli__router_piece coli__router_piece;
typedef struct coli__ffn_piece coli__ffn_piece;

struct coli__attn_piece {
    /* Layer l's attention over the chunk's normalised hidden states b->xn
     * into b->o, its keys and values into b->kv. then: the matrix the layer
     * reads after the output projection (hinted to idle threads), or NULL.
     * The options are the config's attn. */
    coli_status (*run)(coli__pass *b, const coli__layer *ly, int l, const coli__mat *then);
    /* Floats of b->scores that run needs for a chunk of S tokens whose
     * last one sees last positions, a cache of n_ctx positions and a pool
     * of threads threads. */
    size_t (*scratch)(const coli__config *c, int S, int last, int n_ctx, int threads);
};

struct coli__router_piece {
    /* The top_k experts and their weights of each of the chunk's tokens,
     * from b->xn: sel, w [S, top_k]. b->rl is scratch. The options are the
     * config's router. b->rl has 2 * n_experts floats of scratch past the
     * chunk's logits. */
    coli_status (*route)(coli__pass *b, const coli__layer *ly, int *sel, float *w);
    /* The lookahead's guess at one token's top_k experts (their order is
     * free) from its normalised hidden state xn [hidden], on the threads of
     * pool; rl [3 * n_experts] and w [top_k] are scratch. Counts no reads: only
     * which experts are read early depends on it, never a value. */
    coli_status (*guess)(const coli_model *m, coli__pool *pool, const coli__layer *ly, const float *xn, float *rl,
                         int *sel, float *w);
};

struct coli__ffn_piece {
    /* NULL, or called right after the layer's feed-forward norm, before
     * the next layer's matrices are hinted (the lookahead of streamed
     * experts). */
    coli_status (*prepare)(coli__pass *b, int l);
    /* Layer l's feed-forward of b->xn into b->o. */
    coli_status (*run)(coli__pass *b, const coli__layer *ly, int l);
};

extern const coli__attn_piece coli__attn_gqa;             /* lib/model/attention.c */
extern const coli__router_piece coli__router_softmax_topk; /* lib/model/router.c */
extern const coli__router_piece coli__router_sigmoid_group; /* lib/model/router_sigmoid.c */
extern const coli__ffn_piece coli__moe_routed;             /* lib/model/ffn.c */
extern const coli__ffn_piece coli__moe_routed_shared;      /* lib/model/ffn.c */
extern const coli__ffn_piece coli__mlp_swiglu;             /* lib/model/ffn.c */

/* The pieces of c's family, or COLI_EUNSUPPORTED naming the one missing
 * from this build. */
coli_status coli__pieces_pick(const coli__config *c, coli__pieces *p, coli__err *err);

#endif
