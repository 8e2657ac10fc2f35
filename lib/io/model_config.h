/* model_config.h - the model hyper-parameters read from config.json (internal).
 *
 * Every architecture is normalised into one description; fields an
 * architecture does not have take neutral values (no clipping, no window).
 * What differs between families is their row in lib/io/families.c.
 *
 * lib/io/ reads files: JSON, safetensors, config.json and the family
 * table, tokenizer.json, checksums. It may include lib/cpu/ and lib/base/;
 * it knows nothing of models in memory. */
#ifndef COLI_MODEL_CONFIG_H
#define COLI_MODEL_CONFIG_H

#include <stdint.h>
#include "base/error.h"
#include "io/families.h"

typedef enum coli__qk_norm {
    COLI_QK_NORM_NONE,
    COLI_QK_NORM_HEAD, /* Qwen3: RMSNorm of each head vector, weight [head_dim] */
    COLI_QK_NORM_FULL  /* OLMoE: RMSNorm of the whole projection, weight [heads*head_dim] */
} coli__qk_norm;

/* The sizes of multi-head latent attention (DeepSeek-V2/V3, Kimi-K2,
 * GLM-5: lib/decoder/attention_mla.c). */
typedef struct coli__mla_opts {
    int q_lora;   /* q_lora_rank; 0: a plain q_proj */
    int kv_lora;  /* kv_lora_rank: the latent each position caches */
    int nope;     /* qk_nope_head_dim: a head's key part without RoPE */
    int rope;     /* qk_rope_head_dim: its rotated part, one key for all heads */
    int v_dim;    /* v_head_dim */
    float norm_eps; /* of the latents' RMSNorms (transformers: their default, not rms_norm_eps) */
} coli__mla_opts;

/* DeepSeek sparse attention (GLM-5: lib/decoder/indexer.c): a lightning
 * indexer scores the cached positions and the latent attention keeps the
 * best topk of them. */
typedef struct coli__dsa_opts {
    int topk;   /* index_topk; 0: dense attention, no indexer */
    int heads;  /* index_n_heads */
    int dim;    /* index_head_dim: its query heads' and its one key's width */
    unsigned char *full; /* n_layers flags: 1 runs its own indexer, 0 reuses
                            the last full layer's choice (indexer_types "shared") */
} coli__dsa_opts;

/* The options of the attention pieces (lib/decoder/attention.c,
 * attention_mla.c). A new option (the q/k/v biases of GLM-4.5) is a field
 * here, read by the family's parse function and applied by the piece. */
typedef struct coli__attn_opts {
    coli__qk_norm qk_norm;
    int qkv_bias;           /* q, k and v have biases (not o) */
    float clip_qkv;         /* 0: none */
    int sliding_window;     /* 0: none */
    coli__mla_opts mla;
    int mla_interleave;     /* MLA: RoPE pairs dims (2i, 2i + 1) (rope_interleave) */
    coli__dsa_opts dsa;
    float scale;            /* MLA: the softmax's scale (YaRN's mscale squared included) */
} coli__attn_opts;

/* The rotary tables' frequencies (docs/formats.md, "RoPE"): rope_type
 * default or yarn, as transformers computes them. */
typedef struct coli__rope_opts {
    int yarn;
    double factor;          /* yarn: factor */
    int orig_max;           /* yarn: original_max_position_embeddings */
    double beta_fast, beta_slow;
    double mscale, mscale_all_dim; /* 0: not given */
    double attn_factor;     /* attention_factor as given; 0: derived */
    int truncate;
    float *inv;             /* [rot_dim / 2] each pair's inverse frequency */
    float table_factor;     /* cosines and sines are multiplied by it (1: not at all) */
} coli__rope_opts;

/* The options of the router piece (lib/decoder/router.c). */
typedef struct coli__router_opts {
    int norm_topk_prob;     /* renormalise the chosen routing weights */
    int n_group, topk_group; /* the sigmoid router: experts in n_group groups, the best topk_group kept */
    float scale;            /* the sigmoid router: routed_scaling_factor */
} coli__router_opts;

#define COLI_MAX_EOS 8

typedef struct coli__config {
    const coli__family *family; /* its row in lib/io/families.c */
    const char *arch_name;  /* static string, e.g. "Qwen3MoeForCausalLM" */
    int hidden;
    int n_layers;           /* layers loaded: the decoder's, then the MTP layer when it is used */
    int n_trunk;            /* the decoder's: num_hidden_layers */
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int vocab;
    int inter;              /* dense MLP intermediate size (0 if no dense layers) */
    int moe_inter;          /* expert intermediate size */
    int n_experts;
    int top_k;
    int shared_inter;       /* intermediate size of the shared experts as one SwiGLU (0: none) */
    int n_mtp;              /* num_nextn_predict_layers: MTP layers stored after the decoder's */
    int rot_dim;            /* rotated dimensions of each head (partial rotary) */
    double rope_theta;
    coli__rope_opts rope;
    /* The KV cache's rows (lib/decoder/kv.h): kv_heads of kv_kdim key
     * values and kv_vdim value values a position; kv_vdim 0: values are
     * read from the keys' rows (MLA's latent). */
    int kv_heads, kv_kdim, kv_vdim;
    float rms_eps;
    int tie_embeddings;
    coli__attn_opts attn;
    coli__router_opts router;
    int max_pos;
    /* quantization_config of an FP8 checkpoint: weight_block_size (0: the
     * checkpoint is not FP8) */
    int fp8_block_rows, fp8_block_cols;
    unsigned char *is_moe;  /* n_layers flags */
    int n_moe_layers;
    int32_t bos;            /* -1: none */
    int32_t eos[COLI_MAX_EOS];
    int n_eos;
} coli__config;

/* Reads dir/config.json and, where present, dir/generation_config.json for
 * bos/eos ids. Unknown architectures and unsupported options are refused
 * with COLI_EUNSUPPORTED naming them. */
coli_status coli__config_load(const char *dir, coli__config *cfg, coli__err *err);
/* Adds the first MTP layer (index n_trunk, a MoE layer) to the layers to
 * load; COLI_EUNSUPPORTED naming the file when the config has none. */
coli_status coli__config_add_mtp(coli__config *cfg, const char *dir, coli__err *err);
void coli__config_free(coli__config *cfg);

/* Joins dir and name into a malloc'd path, or NULL. */
char *coli__path_join(const char *dir, const char *name);

#endif
