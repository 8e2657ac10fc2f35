/* families.h - the model families we run, one row each (internal).
 *
 * A row says how config.json names the family, reads the fields that are
 * the family's own, names its tensors, and which pieces of the decoder it
 * is made of. The pieces are enums (io/piece_kinds.h: io/ sits below
 * model/ and gpu/); lib/decoder/pieces.c maps each to its code at model
 * open. Adding a family
 * is one row in lib/io/families.c, plus pieces where it needs new ones. */
#ifndef COLI_FAMILIES_H
#define COLI_FAMILIES_H

#include <stddef.h>
#include "base/error.h"
#include "io/piece_kinds.h"

/* The tensors of a family, by role. */
typedef enum coli__tname {
    /* of the model: the name as it stands */
    COLI_T_EMBED,
    COLI_T_FINAL_NORM,
    COLI_T_LM_HEAD,
    /* of layer l: <layers>.<l>.<name> */
    COLI_T_ATTN_NORM,
    COLI_T_FFN_NORM,
    COLI_T_WQ,
    COLI_T_WK,
    COLI_T_WV,
    COLI_T_WO,
    COLI_T_Q_NORM,
    COLI_T_K_NORM,
    COLI_T_GATE, /* the dense MLP */
    COLI_T_UP,
    COLI_T_DOWN,
    COLI_T_ROUTER,
    COLI_T_BQ, /* q/k/v biases (config attn.qkv_bias) */
    COLI_T_BK,
    COLI_T_BV,
    COLI_T_ROUTER_BIAS, /* the sigmoid router's correction bias */
    COLI_T_S_GATE,      /* the shared experts, as one SwiGLU */
    COLI_T_S_UP,
    COLI_T_S_DOWN,
    /* multi-head latent attention (lib/decoder/attention_mla.c); its query
     * without LoRA is COLI_T_WQ, its output COLI_T_WO */
    COLI_T_Q_A,       /* [q_lora_rank, hidden] */
    COLI_T_Q_A_NORM,  /* [q_lora_rank] */
    COLI_T_Q_B,       /* [heads * (nope + rope), q_lora_rank] */
    COLI_T_KV_A,      /* [kv_lora_rank + rope, hidden]: the latent, then the rotary key */
    COLI_T_KV_A_NORM, /* [kv_lora_rank] */
    COLI_T_KV_B,      /* [heads * (nope + v_head_dim), kv_lora_rank] */
    /* DeepSeek sparse attention's indexer (lib/decoder/indexer.c) */
    COLI_T_IDX_WQ,     /* [index heads * index dim, q_lora_rank] */
    COLI_T_IDX_WK,     /* [index dim, hidden]: its one key */
    COLI_T_IDX_K_NORM, /* [index dim]: the key's LayerNorm, weight */
    COLI_T_IDX_K_BIAS, /* [index dim]: and bias */
    COLI_T_IDX_W,      /* [index heads, hidden]: the heads' weights */
    /* the MTP (NextN) layer's own, beside its decoder layer's
     * (lib/decoder/forward.c runs it) */
    COLI_T_MTP_EH_PROJ,   /* [hidden, 2 hidden]: [embedding ; hidden state] to hidden */
    COLI_T_MTP_ENORM,     /* RMSNorm of the embedding */
    COLI_T_MTP_HNORM,     /* RMSNorm of the trunk's hidden state */
    COLI_T_MTP_HEAD_NORM, /* the MTP's own final norm */
    COLI_T_MTP_HEAD,      /* its output projection (optional: the model's) */
    COLI_T_MTP_EMBED,     /* its embedding (optional: the model's) */
    /* of expert e of layer l: <layers>.<l>.<experts>.<e>.<name> */
    COLI_T_E_GATE,
    COLI_T_E_UP,
    COLI_T_E_DOWN,
    COLI_T_COUNT
} coli__tname;

#define COLI_T_FIRST_LAYER COLI_T_ATTN_NORM
#define COLI_T_FIRST_EXPERT COLI_T_E_GATE

typedef struct coli__tensor_names {
    const char *layers;  /* "model.layers" */
    const char *experts; /* "mlp.experts" */
    const char *name[COLI_T_COUNT];
} coli__tensor_names;

struct coli__cfg_reader;
struct coli__config;

typedef struct coli__family {
    const char *arch;       /* config.json's architectures[0], e.g. "Qwen3MoeForCausalLM" */
    const char *model_type; /* its model_type, used when no architectures are given */
    const char *model_type_also; /* another model_type of the same graph, or NULL */
    double rms_eps;         /* rms_norm_eps and rope_theta when config.json omits them */
    double rope_theta;
    double partial_rotary; /* partial_rotary_factor when config.json omits it; 0: 1 */
    /* Reads the family's own fields (experts, which layers are MoE, the
     * attention's and router's options) once the common ones are read and
     * cfg->is_moe is allocated. */
    coli_status (*parse)(struct coli__cfg_reader *r, struct coli__config *cfg);
    const coli__tensor_names *names;
    coli__attn_kind attn;
    coli__router_kind router;
    coli__moe_kind moe;
    coli__mlp_kind mlp;
} coli__family;

/* YaRN's magnitude factor of a scale s with coefficient m (transformers'
 * get_mscale): 0.1 m ln(s) + 1 for s > 1, else 1. */
double coli__yarn_mscale(double s, double m);

extern const coli__family coli__families[];
extern const size_t coli__n_families;

/* The row whose architecture is arch, or (arch NULL) whose model_type is
 * model_type; NULL when there is none. */
const coli__family *coli__family_find(const char *arch, const char *model_type);

/* Tensor t of family f (of layer l, expert e where it has them), written
 * to name[cap]; returns name. */
const char *coli__tensor_name(const coli__family *f, coli__tname t, int l, int e, char *name, size_t cap);

#endif
