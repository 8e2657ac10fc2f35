/* model.h - a loaded model: config, mapped tensors, weights in the chosen
 * format, tokenizer (internal). A model is read-only once open, so many
 * contexts may use it at once. */
#ifndef COLI_MODEL_H
#define COLI_MODEL_H

#include "model_config.h"
#include "error.h"
#include "kernels.h"
#include "log.h"
#include "safetensors.h"
#include "tokenizer.h"

typedef struct coli__layer {
    coli__mat wq, wk, wv, wo;
    float *attn_norm, *ffn_norm;     /* [hidden], widened to f32 */
    float *q_norm, *k_norm;          /* NULL when the architecture has none */
    int is_moe;
    coli__mat gate, up, down;        /* dense MLP */
    coli__mat router;                /* [n_experts, hidden] */
    coli__mat *e_gate, *e_up, *e_down; /* n_experts each */
} coli__layer;

typedef struct coli__weights {
    coli__mat embed;                 /* [vocab, hidden] */
    coli__mat lm_head;               /* [vocab, hidden]; the embedding when tied */
    float *final_norm;
    coli__layer *layers;
    void **owned;                    /* allocations made while loading */
    size_t n_owned, cap_owned;
    uint64_t bytes;                  /* bytes of weights as held, norms included */
    int64_t n_params_total, n_params_active;
    /* For coli_model_weight_bytes: parameters of norm vectors (always f32)
     * and bytes of the matrices in the checkpoint's own dtypes. */
    int64_t n_vec_params, n_vec_active;
    uint64_t stored_bytes, stored_active_bytes;
    int n_f32, n_bf16, n_f16;        /* matrices held in each dtype */
} coli__weights;

/* Options as resolved at open; contexts inherit them. */
typedef struct coli__opts {
    int64_t weights;
    int64_t threads;
    int64_t context;
    int64_t mem_budget_mb;
    coli__logger log;
} coli__opts;

struct coli_options {
    coli__opts o;
};

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
};

/* Loads every weight of cfg from ts in format fmt, checking names and shapes. */
coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__tensor_set *ts,
                               coli_weight_format fmt, coli__err *err);
void coli__weights_free(coli__weights *w, const coli__config *cfg);

void coli__opts_default(coli__opts *o);

#endif
