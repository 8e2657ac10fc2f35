/* pieces.h - the parts of a decoder layer that differ between model
 * families (internal).
 *
 * lib/decoder/forward.c keeps only a layer's order of operations; the
 * attention, the router and the feed-forward are pieces, each a table of
 * functions in its own file. A family's row (lib/io/families.c) names its
 * pieces by kind (lib/io/piece_kinds.h) and coli__pieces_pick turns them
 * into these tables once, at model open (coli_model.pieces). A piece owns
 * all of its kind: the tensors it loads, its run on the CPU, the
 * description the device pipeline builds its layer from, and its name in
 * coli info. No other file tests a piece kind, so a new kind (MLA, say)
 * is its piece file, its enum value and its family rows
 * (docs/architecture.md, "Adding a piece kind").
 *
 * A piece reaches the loader and the device through the two interfaces
 * below, not by name: the loader (lib/model/weights.c) and the device
 * decoder (lib/tier/device.c) hand them in. */
#ifndef COLI_PIECES_H
#define COLI_PIECES_H

#include "decoder/pass.h"
#include "decoder/weights.h"
#include "gpu/backend.h"
#include "io/model_config.h"
#include "store/convert.h"

typedef struct coli__attn_piece coli__attn_piece;
typedef struct coli__router_piece coli__router_piece;
typedef struct coli__ffn_piece coli__ffn_piece;

/* The loader as a piece sees it: whichever of its walks runs (a
 * checkpoint, a container, a conversion's plan), a piece asks for its
 * tensors by role in the order they are stored. */
typedef struct coli__piece_loader {
    /* Matrix t of layer l, [rows, cols], of kind and role (store/convert.h). */
    coli_status (*mat)(void *L, coli__mat *m, coli__tname t, int l, int rows, int cols, coli__mat_kind kind,
                       coli__mat_role role);
    /* The same, in the row layout whatever the kernels prefer, so that
     * coli__mat_rows can cut it anywhere. */
    coli_status (*mat_rows)(void *L, coli__mat *m, coli__tname t, int l, int rows, int cols, coli__mat_kind kind,
                            coli__mat_role role);
    /* Vector t of layer l, n values, widened to f32. */
    coli_status (*vec)(void *L, float **v, coli__tname t, int l, int n);
    /* The routed experts of layer l into ly (e_gate, e_up, e_down). */
    coli_status (*experts)(void *L, int l, coli__layer *ly);
    void *L;
} coli__piece_loader;

/* The device decoder as a piece sees it: each call uploads a matrix or a
 * vector and gives its handle (-1 when it cannot; the device decoder is
 * then not used, and says why). */
typedef struct coli__describer {
    int (*mat)(void *D, const coli__mat *m);
    int (*vec)(void *D, const float *v, int n);
    /* The layer cannot run on the device (a kind the pipeline does not
     * build): why, for the log; the device decoder is then not used. */
    void (*refuse)(void *D, const char *why);
    void *D;
} coli__describer;

struct coli__attn_piece {
    const char *name;
    /* Layer l's attention tensors into ly. */
    coli_status (*load)(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly);
    /* Its part of the device's layer gl (the kind, handles, options). */
    void (*describe)(const coli__describer *D, const coli__config *c, const coli__layer *ly, coli__gpu_layer *gl);
    /* Layer l's attention over the chunk's normalised hidden states b->xn
     * into b->o, its keys and values into b->kv. then: the matrix the layer
     * reads after the output projection (hinted to idle threads), or NULL.
     * The options are the config's attn. */
    coli_status (*run)(coli__pass *b, const coli__layer *ly, int l, const coli__mat *then);
    /* Floats of b->scores that run needs for a chunk of S tokens whose
     * last one sees last positions, a cache of n_ctx positions and a pool
     * of threads threads. */
    size_t (*scratch)(const coli__config *c, int S, int last, int n_ctx, int threads);
    /* NULL, or the floats each token of the chunk (all its segments) adds
     * to b->scores beyond scratch's most for one segment (the pass sizes
     * its chunks by them). */
    size_t (*per_token)(const coli__config *c);
};

struct coli__router_piece {
    const char *name; /* coli_model_info's router: "softmax", "sigmoid" */
    /* A MoE layer's router tensors into ly. */
    coli_status (*load)(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly);
    /* The device's router of the layer: its matrix's handle in *router and
     * how it chooses in *route. */
    void (*describe)(const coli__describer *D, const coli__config *c, const coli__layer *ly, int *router,
                     coli__gpu_route *route);
    /* The top_k experts and their weights of each of the chunk's tokens,
     * from b->xn: sel, w [S, top_k]. b->rl is scratch. The options are the
     * config's router. b->rl has 2 * n_experts floats of scratch past the
     * chunk's logits. */
    coli_status (*route)(coli__pass *b, const coli__layer *ly, int *sel, float *w);
    /* The lookahead's guess at one token's top_k experts (their order is
     * free) from its normalised hidden state xn [hidden], on the threads of
     * pool; rl [3 * n_experts] and w [top_k] are scratch. Counts no reads: only
     * which experts are read early depends on it, never a value. */
    coli_status (*guess)(const coli__decoder *d, coli__pool *pool, const coli__layer *ly, const float *xn, float *rl,
                         int *sel, float *w);
};

struct coli__ffn_piece {
    const char *name;
    /* The layer's feed-forward tensors into ly (a MoE block's: not its
     * router's). */
    coli_status (*load)(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly);
    /* Its part of the device's layer gl (the kind and handles; a MoE
     * block's routed experts are placed by the tier, not here). */
    void (*describe)(const coli__describer *D, const coli__config *c, const coli__layer *ly, coli__gpu_layer *gl);
    /* NULL, or called right after the layer's feed-forward norm, before
     * the next layer's matrices are hinted (the lookahead of streamed
     * experts). */
    coli_status (*prepare)(coli__pass *b, int l);
    /* Layer l's feed-forward of b->xn into b->o. */
    coli_status (*run)(coli__pass *b, const coli__layer *ly, int l);
};

/* The router options of c as the device takes them, of kind (its bias
 * handle -1): for the routers' describe (lib/decoder/router.c). */
void coli__route_options(const coli__config *c, coli__router_kind kind, coli__gpu_route *rt);

extern const coli__attn_piece coli__attn_gqa;             /* lib/decoder/attention.c */
extern const coli__attn_piece coli__attn_mla;             /* lib/decoder/attention_mla.c */
extern const coli__router_piece coli__router_softmax_topk; /* lib/decoder/router.c */
extern const coli__router_piece coli__router_sigmoid_group; /* lib/decoder/router_sigmoid.c */
extern const coli__ffn_piece coli__moe_routed;             /* lib/decoder/ffn.c */
extern const coli__ffn_piece coli__moe_routed_shared;      /* lib/decoder/ffn.c */
extern const coli__ffn_piece coli__mlp_swiglu;             /* lib/decoder/ffn.c */

/* The pieces of c's family, or COLI_EUNSUPPORTED naming the one missing
 * from this build. */
coli_status coli__pieces_pick(const coli__config *c, coli__pieces *p, coli__err *err);

#endif
