/* model.h - a loaded model: config, mapped tensors, weights in the chosen
 * format, tokenizer (internal). A model is read-only once open, so many
 * contexts may use it at once.
 *
 * lib/model/ is a loaded model and its forward pass: options, the loader,
 * the decoder's order of operations and the pieces families differ in,
 * where experts run, contexts and sampling. It may include every folder
 * below it (store, gpu, io, cpu, base) and is included only by lib/api.c
 * and itself. */
#ifndef COLI_MODEL_H
#define COLI_MODEL_H

#include "io/model_config.h"
#include "base/error.h"
#include "cpu/kernels.h"
#include "base/log.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/decoder.h"
#include "model/options.h"
#include "store/convert.h"

typedef struct coli__layer {
    coli__mat wq, wk, wv, wo;
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

/* The decoder's pieces of the model's family (lib/model/pieces.h),
 * chosen once at open. */
typedef struct coli__pieces {
    const struct coli__attn_piece *attn;
    const struct coli__router_piece *router;
    const struct coli__ffn_piece *moe; /* the feed-forward of MoE layers */
    const struct coli__ffn_piece *mlp; /* of dense layers */
} coli__pieces;

struct coli_model {
    coli__err err;
    int ok;                          /* 0: open failed; only errmsg and free work */
    char *dir;
    coli__opts opts;
    coli__config cfg;
    coli__tensor_set *ts;
    coli__tokenizer *tok;
    coli__weights w;
    coli_weight_format wfmt;
    char weights_detail[192];        /* for coli_model_info */
    struct coli__container *cont;    /* a converted model's model.coli; NULL: a checkpoint */
    struct coli__store *store;       /* its experts in host memory; NULL: a checkpoint */
    struct coli__tier *gpu;          /* GPU expert tier; NULL: every expert on the CPU */
    struct coli__device *dev;        /* layers on a device (lib/model/device.c); NULL: none */
    char gpu_detail[160];            /* why or how the tier is used, for coli_model_info */
    const coli__cpuk *cpuk;          /* CPU kernel set (COLI_OPT_CPU_KERNELS) */
    coli__pieces pieces;             /* of cfg.family */
    coli__decoder dec;               /* what the forward pass runs on (lib/model/decoder.h) */
    char *chat_template;             /* tokenizer_config.json or chat_template.jinja; NULL: none */
    char **special;                  /* name, text, name, text...: tokenizer_config's *_token */
    size_t n_special;                /* pairs in special */
};

struct coli__container;

/* Loads every weight of cfg from ts in format fmt, checking names and
 * shapes, each piece of pieces (lib/model/pieces.h) its own; quantization uses threads threads (0: every online core; the
 * same bytes for any); x16: q8 and q4 matrices that fit take the x16
 * layout (lib/cpu/qlayout.c), for the CPU only. */
coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                               const coli__tensor_set *ts, coli_weight_format fmt, int q4_group, int threads, int x16,
                               coli__err *err);
void coli__weights_free(coli__weights *w, const coli__config *cfg);
/* Points every weight of cfg into a container's mapping (docs/container.md):
 * nothing is converted; names, shapes and dtypes are checked. */
coli_status coli__weights_load_container(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                                         const struct coli__container *c, coli__err *err);
/* Walks the tensors coli__weights_load would load, in its order, checking
 * each against ts and calling fn with it; nothing is converted. */
coli_status coli__weights_plan(const coli__config *cfg, const coli__pieces *pieces, const coli__tensor_set *ts,
                               coli_weight_format fmt, int q4_group, coli__witem_fn fn, void *user, coli__err *err);
/* Makes one planned tensor as the loader would: *out's memory belongs to
 * scratch (free it with coli__weights_free(scratch, NULL)) or to ts. */
coli_status coli__weights_convert_item(const coli__tensor_set *ts, coli_weight_format fmt, int q4_group,
                                       const coli__witem *it, coli__weights *scratch, coli__mat *out,
                                       coli__err *err);
/* Drops the host copies the loader allocated of the experts with
 * resident[l * E + e] >= 0 (an expert resident on a GPU), setting
 * host[l * E + e] to 0 for each: their data (or q.qs) becomes NULL and
 * their memory goes back (the pages, when it lies in a region). *freed:
 * the bytes dropped; *mapped: 1 when some point into the checkpoint's
 * mapping, which costs no memory of its own. COLI_ENOMEM: nothing dropped. */
coli_status coli__weights_release_experts(coli__weights *w, const coli__config *cfg, const signed char *resident,
                                          unsigned char *host, uint64_t *freed, int *mapped);
/* Loads again the matrices of expert e of layer l whose host copy was
 * released, from the checkpoint, exactly as at open. */
coli_status coli__weights_reload_expert(coli__weights *w, const coli__config *cfg, const coli__tensor_set *ts,
                                        coli_weight_format fmt, int q4_group, int l, int e, coli__err *err);
/* The in-memory dtype of a matrix of this kind when loaded in fmt. */
coli__dtype coli__weights_target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols,
                                 int q4_group);
/* Bytes all weights would take in fmt, and the bytes one token reads. */
void coli__weights_bytes(const coli__weights *w, const coli__config *cfg, coli_weight_format fmt, int q4_group,
                         uint64_t *total, uint64_t *active);

/* The message buffer for a failing call on an open model, private to the
 * calling thread (coli_model_errmsg reads it back on the same thread). */
coli__err *coli__model_err(const coli_model *m);

#endif
