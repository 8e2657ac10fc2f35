/* families.c - one row per model family: its names, its own config.json
 * fields, its tensors and its pieces. */
#include <float.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/config_read.h"
#include "io/families.h"
#include "io/model_config.h"

/* ---- tensor names ---------------------------------------------------- */

/* transformers' names of the parts llama-like models share: embedding,
 * norms, attention, dense MLP. */
#define HF_LLAMA_NAMES                                                     \
    [COLI_T_EMBED] = "model.embed_tokens.weight",                          \
    [COLI_T_FINAL_NORM] = "model.norm.weight",                             \
    [COLI_T_LM_HEAD] = "lm_head.weight",                                   \
    [COLI_T_ATTN_NORM] = "input_layernorm.weight",                         \
    [COLI_T_FFN_NORM] = "post_attention_layernorm.weight",                 \
    [COLI_T_WQ] = "self_attn.q_proj.weight",                               \
    [COLI_T_WK] = "self_attn.k_proj.weight",                               \
    [COLI_T_WV] = "self_attn.v_proj.weight",                               \
    [COLI_T_WO] = "self_attn.o_proj.weight",                               \
    [COLI_T_Q_NORM] = "self_attn.q_norm.weight",                           \
    [COLI_T_K_NORM] = "self_attn.k_norm.weight",                           \
    [COLI_T_GATE] = "mlp.gate_proj.weight",                                \
    [COLI_T_UP] = "mlp.up_proj.weight",                                    \
    [COLI_T_DOWN] = "mlp.down_proj.weight"

/* transformers' names for Qwen3-MoE and OLMoE (and most llama-like MoE). */
static const coli__tensor_names hf_moe = {
    .layers = "model.layers",
    .experts = "mlp.experts",
    .name = {
        HF_LLAMA_NAMES,
        [COLI_T_ROUTER] = "mlp.gate.weight",
        [COLI_T_E_GATE] = "gate_proj.weight",
        [COLI_T_E_UP] = "up_proj.weight",
        [COLI_T_E_DOWN] = "down_proj.weight",
    },
};

/* GLM-4.5's: q/k/v biases, the router's correction bias, shared experts. */
static const coli__tensor_names hf_glm4_moe = {
    .layers = "model.layers",
    .experts = "mlp.experts",
    .name = {
        HF_LLAMA_NAMES,
        [COLI_T_ROUTER] = "mlp.gate.weight",
        [COLI_T_BQ] = "self_attn.q_proj.bias",
        [COLI_T_BK] = "self_attn.k_proj.bias",
        [COLI_T_BV] = "self_attn.v_proj.bias",
        [COLI_T_ROUTER_BIAS] = "mlp.gate.e_score_correction_bias",
        [COLI_T_S_GATE] = "mlp.shared_experts.gate_proj.weight",
        [COLI_T_S_UP] = "mlp.shared_experts.up_proj.weight",
        [COLI_T_S_DOWN] = "mlp.shared_experts.down_proj.weight",
        [COLI_T_MTP_EH_PROJ] = "eh_proj.weight",
        [COLI_T_MTP_ENORM] = "enorm.weight",
        [COLI_T_MTP_HNORM] = "hnorm.weight",
        [COLI_T_MTP_HEAD_NORM] = "shared_head.norm.weight",
        [COLI_T_MTP_HEAD] = "shared_head.head.weight",
        [COLI_T_MTP_EMBED] = "embed_tokens.weight",
        [COLI_T_E_GATE] = "gate_proj.weight",
        [COLI_T_E_UP] = "up_proj.weight",
        [COLI_T_E_DOWN] = "down_proj.weight",
    },
};

/* DeepSeek-V3's MoE (GLM-4.5's) and multi-head latent attention. */
#define HF_MLA_NAMES                                                       \
    HF_LLAMA_NAMES,                                                        \
    [COLI_T_ROUTER] = "mlp.gate.weight",                                   \
    [COLI_T_ROUTER_BIAS] = "mlp.gate.e_score_correction_bias",             \
    [COLI_T_S_GATE] = "mlp.shared_experts.gate_proj.weight",               \
    [COLI_T_S_UP] = "mlp.shared_experts.up_proj.weight",                   \
    [COLI_T_S_DOWN] = "mlp.shared_experts.down_proj.weight",               \
    [COLI_T_Q_A] = "self_attn.q_a_proj.weight",                            \
    [COLI_T_Q_A_NORM] = "self_attn.q_a_layernorm.weight",                  \
    [COLI_T_Q_B] = "self_attn.q_b_proj.weight",                            \
    [COLI_T_KV_A] = "self_attn.kv_a_proj_with_mqa.weight",                 \
    [COLI_T_KV_A_NORM] = "self_attn.kv_a_layernorm.weight",                \
    [COLI_T_KV_B] = "self_attn.kv_b_proj.weight",                          \
    [COLI_T_E_GATE] = "gate_proj.weight",                                  \
    [COLI_T_E_UP] = "up_proj.weight",                                      \
    [COLI_T_E_DOWN] = "down_proj.weight"

/* DeepSeek-V3's (Kimi-K2's). */
static const coli__tensor_names hf_deepseek_v3 = {
    .layers = "model.layers",
    .experts = "mlp.experts",
    .name = {HF_MLA_NAMES},
};

/* GLM-5's: DeepSeek-V3's, and the indexer's. */
static const coli__tensor_names hf_glm_moe_dsa = {
    .layers = "model.layers",
    .experts = "mlp.experts",
    .name = {
        HF_MLA_NAMES,
        [COLI_T_IDX_WQ] = "self_attn.indexer.wq_b.weight",
        [COLI_T_IDX_WK] = "self_attn.indexer.wk.weight",
        [COLI_T_IDX_K_NORM] = "self_attn.indexer.k_norm.weight",
        [COLI_T_IDX_K_BIAS] = "self_attn.indexer.k_norm.bias",
        [COLI_T_IDX_W] = "self_attn.indexer.weights_proj.weight",
    },
};

/* Mixtral's block_sparse_moe with experts w1 (gate), w3 (up), w2 (down). */
static const coli__tensor_names mixtral = {
    .layers = "model.layers",
    .experts = "block_sparse_moe.experts",
    .name = {
        HF_LLAMA_NAMES,
        [COLI_T_ROUTER] = "block_sparse_moe.gate.weight",
        [COLI_T_E_GATE] = "w1.weight",
        [COLI_T_E_UP] = "w3.weight",
        [COLI_T_E_DOWN] = "w2.weight",
    },
};

const char *coli__tensor_name(const coli__family *f, coli__tname t, int l, int e, char *name, size_t cap)
{
    const coli__tensor_names *n = f->names;
    if (t < COLI_T_FIRST_LAYER)
        snprintf(name, cap, "%s", n->name[t]);
    else if (t < COLI_T_FIRST_EXPERT)
        snprintf(name, cap, "%s.%d.%s", n->layers, l, n->name[t]);
    else
        snprintf(name, cap, "%s.%d.%s.%d.%s", n->layers, l, n->experts, e, n->name[t]);
    return name;
}

/* ---- the fields of each family --------------------------------------- */

static coli_status parse_qwen3_moe(coli__cfg_reader *r, coli__config *c)
{
    const coli__json *root = r->root;
    int step = 1;
    /* Published configs say num_experts; transformers 5 writes num_local_experts. */
    COLI_TRY(coli__cfg_int(r, coli__json_get(root, "num_experts") ? "num_experts" : "num_local_experts", 1, 0, 0,
                           1 << 16, &c->n_experts));
    COLI_TRY(coli__cfg_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
    COLI_TRY(coli__cfg_int(r, "moe_intermediate_size", 1, 0, 1, COLI__DIM_MAX, &c->moe_inter));
    COLI_TRY(coli__cfg_int(r, "intermediate_size", 0, 0, 0, COLI__DIM_MAX, &c->inter));
    COLI_TRY(coli__cfg_int(r, "decoder_sparse_step", 0, 1, 0, 4096, &step));
    COLI_TRY(coli__cfg_bool(r, "norm_topk_prob", 0, &c->router.norm_topk_prob));
    COLI_TRY(coli__cfg_refuse_true(r, "use_sliding_window"));
    COLI_TRY(coli__cfg_refuse_true(r, "attention_bias")); /* it would bias o_proj too */
    c->attn.qk_norm = COLI_QK_NORM_HEAD;
    for (int l = 0; l < c->n_layers; l++)
        c->is_moe[l] = c->n_experts > 0 && step > 0 && (l + 1) % step == 0;
    const coli__json *only = coli__json_get(root, "mlp_only_layers");
    if (only && only->type != COLI_JSON_NULL) {
        if (only->type != COLI_JSON_ARRAY)
            return coli__fail(r->err, COLI_EFORMAT, "%s: mlp_only_layers must be a list", r->file);
        for (size_t i = 0; i < only->len; i++) {
            const coli__json *e = &only->items[i];
            if (e->type != COLI_JSON_NUMBER || !e->is_int || e->integer < 0)
                return coli__fail(r->err, COLI_EFORMAT, "%s: mlp_only_layers must hold layer indices", r->file);
            if (e->integer < c->n_layers)
                c->is_moe[e->integer] = 0;
        }
    }
    return COLI_OK;
}

static coli_status parse_olmoe(coli__cfg_reader *r, coli__config *c)
{
    double clip = 0;
    COLI_TRY(coli__cfg_int(r, "num_experts", 1, 0, 1, 1 << 16, &c->n_experts));
    COLI_TRY(coli__cfg_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
    COLI_TRY(coli__cfg_int(r, "intermediate_size", 1, 0, 1, COLI__DIM_MAX, &c->moe_inter));
    COLI_TRY(coli__cfg_bool(r, "norm_topk_prob", 0, &c->router.norm_topk_prob));
    COLI_TRY(coli__cfg_num(r, r->root, "clip_qkv", 0, &clip));
    COLI_TRY(coli__cfg_refuse_true(r, "attention_bias"));
    if (clip < 0 || clip > FLT_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: clip_qkv = %g is outside [0, FLT_MAX]", r->file, clip);
    c->attn.clip_qkv = (float)clip;
    c->attn.qk_norm = COLI_QK_NORM_FULL;
    memset(c->is_moe, 1, (size_t)c->n_layers);
    return COLI_OK;
}

static coli_status parse_mixtral(coli__cfg_reader *r, coli__config *c)
{
    COLI_TRY(coli__cfg_int(r, "num_local_experts", 1, 0, 1, 1 << 16, &c->n_experts));
    COLI_TRY(coli__cfg_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
    COLI_TRY(coli__cfg_int(r, "intermediate_size", 1, 0, 1, COLI__DIM_MAX, &c->moe_inter));
    COLI_TRY(coli__cfg_int(r, "sliding_window", 0, 0, 0, 1 << 24, &c->attn.sliding_window));
    COLI_TRY(coli__cfg_refuse_true(r, "attention_bias"));
    c->router.norm_topk_prob = 1;
    c->attn.qk_norm = COLI_QK_NORM_NONE;
    memset(c->is_moe, 1, (size_t)c->n_layers);
    return COLI_OK;
}

/* DeepSeek-V3's MoE, which GLM-4.5 shares: a sigmoid router with a
 * correction bias and expert groups, shared experts, dense leading
 * layers. */
static coli_status sigmoid_moe_fields(coli__cfg_reader *r, coli__config *c)
{
    int dense = 0, shared = 0;
    double scale = 1.0;
    COLI_TRY(coli__cfg_int(r, "n_routed_experts", 1, 0, 1, 1 << 16, &c->n_experts));
    COLI_TRY(coli__cfg_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
    COLI_TRY(coli__cfg_int(r, "moe_intermediate_size", 1, 0, 1, COLI__DIM_MAX, &c->moe_inter));
    COLI_TRY(coli__cfg_int(r, "intermediate_size", 0, 0, 0, COLI__DIM_MAX, &c->inter));
    COLI_TRY(coli__cfg_int(r, "first_k_dense_replace", 0, 1, 0, c->n_layers, &dense));
    COLI_TRY(coli__cfg_int(r, "n_shared_experts", 0, 1, 0, 1 << 10, &shared));
    COLI_TRY(coli__cfg_int(r, "n_group", 0, 1, 1, c->n_experts, &c->router.n_group));
    COLI_TRY(coli__cfg_int(r, "topk_group", 0, 1, 1, c->router.n_group, &c->router.topk_group));
    COLI_TRY(coli__cfg_bool(r, "norm_topk_prob", 1, &c->router.norm_topk_prob));
    COLI_TRY(coli__cfg_num(r, r->root, "routed_scaling_factor", 1.0, &scale));
    COLI_TRY(coli__cfg_refuse_true(r, "use_sliding_window"));
    if (!(scale > 0 && scale <= FLT_MAX))
        return coli__fail(r->err, COLI_ERANGE, "%s: routed_scaling_factor = %g must be positive and finite", r->file,
                          scale);
    const int ng = c->router.n_group, per = c->n_experts / ng;
    if (c->n_experts % ng)
        return coli__fail(r->err, COLI_EFORMAT, "%s: n_group (%d) does not divide n_routed_experts (%d)", r->file, ng,
                          c->n_experts);
    if ((int64_t)c->router.topk_group * per < c->top_k)
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: topk_group (%d) groups of %d experts leave fewer than num_experts_per_tok (%d)",
                          r->file, c->router.topk_group, per, c->top_k);
    if ((int64_t)c->moe_inter * shared > COLI__DIM_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: n_shared_experts (%d) is too large", r->file, shared);
    c->router.scale = (float)scale;
    c->shared_inter = c->moe_inter * shared;
    for (int l = 0; l < c->n_layers; l++)
        c->is_moe[l] = l >= dense;
    return COLI_OK;
}

/* GLM-4.5, 4.5-Air, 4.6, 4.7: DeepSeek-V3's MoE with grouped-query
 * attention (q/k/v biases, optional per-head q/k norm, RoPE on part of
 * each head). The MTP layers at index num_hidden_layers are not part of
 * the decoder: transformers skips them too. */
static coli_status parse_glm4_moe(coli__cfg_reader *r, coli__config *c)
{
    int qk = 0;
    COLI_TRY(sigmoid_moe_fields(r, c));
    COLI_TRY(coli__cfg_bool(r, "use_qk_norm", 0, &qk));
    COLI_TRY(coli__cfg_bool(r, "attention_bias", 0, &c->attn.qkv_bias));
    COLI_TRY(coli__cfg_int(r, "num_nextn_predict_layers", 0, 0, 0, 16, &c->n_mtp));
    if (!coli__json_get(r->root, "head_dim")) /* not hidden / heads: GLM-4.5's 5120 / 96 is not whole */
        return coli__fail(r->err, COLI_EFORMAT, "%s: head_dim is not given", r->file);
    c->attn.qk_norm = qk ? COLI_QK_NORM_HEAD : COLI_QK_NORM_NONE;
    return COLI_OK;
}

double coli__yarn_mscale(double scale, double m)
{
    return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* Multi-head latent attention's fields (query LoRA or a plain q_proj) on
 * DeepSeek-V3's MoE, which DeepSeek-V3 and GLM-5 share. The cache holds
 * one latent and one rotary key a position; the heads' query and key are
 * nope + rope wide, RoPE turns the rope part. */
static coli_status mla_fields(coli__cfg_reader *r, coli__config *c)
{
    coli__mla_opts *a = &c->attn.mla;
    COLI_TRY(sigmoid_moe_fields(r, c));
    COLI_TRY(coli__cfg_refuse_true(r, "attention_bias")); /* it would bias q_a, kv_a and o */
    COLI_TRY(coli__cfg_int(r, "q_lora_rank", 0, 0, 0, COLI__DIM_MAX, &a->q_lora));
    COLI_TRY(coli__cfg_int(r, "kv_lora_rank", 1, 0, 1, 1 << 16, &a->kv_lora));
    COLI_TRY(coli__cfg_int(r, "qk_nope_head_dim", 1, 0, 1, 1 << 12, &a->nope));
    COLI_TRY(coli__cfg_int(r, "qk_rope_head_dim", 1, 0, 2, 1 << 12, &a->rope));
    COLI_TRY(coli__cfg_int(r, "v_head_dim", 1, 0, 1, 1 << 12, &a->v_dim));
    if (a->rope % 2)
        return coli__fail(r->err, COLI_EFORMAT, "%s: qk_rope_head_dim (%d) must be even", r->file, a->rope);
    if ((int64_t)c->n_heads * (a->nope + a->rope) > COLI__DIM_MAX || (int64_t)c->n_heads * a->v_dim > COLI__DIM_MAX ||
        (int64_t)c->n_heads * (a->nope + a->v_dim) > COLI__DIM_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: num_attention_heads x the head dims is too large", r->file);
    a->norm_eps = 1e-6f; /* the RMSNorms of q_lora_rank and kv_lora_rank: the class's default */
    c->n_kv_heads = 1;
    c->head_dim = a->nope + a->rope;
    c->rot_dim = a->rope;
    /* absorbed, every head attends to one cached row of latent and rotary key */
    c->kv_heads = 1;
    c->kv_kdim = a->kv_lora + a->rope;
    c->kv_vdim = 0;
    /* transformers: qk_head_dim ** -0.5, times mscale(factor, mscale_all_dim) squared under YaRN */
    double scale = pow((double)c->head_dim, -0.5);
    if (c->rope.yarn && c->rope.mscale_all_dim) {
        double m = coli__yarn_mscale(c->rope.factor, c->rope.mscale_all_dim);
        scale = scale * m * m;
    }
    c->attn.scale = (float)scale;
    return COLI_OK;
}

/* DeepSeek-V3, R1, V3.1 and Kimi-K2 (the same graph). The MTP layer at
 * index num_hidden_layers is not loaded yet. */
static coli_status parse_deepseek_v3(coli__cfg_reader *r, coli__config *c)
{
    COLI_TRY(mla_fields(r, c));
    return coli__cfg_bool(r, "rope_interleave", 1, &c->attn.mla_interleave);
}

/* "dense" or "sparse" per layer (mlp_layer_types), where it is given: it
 * overrides first_k_dense_replace, as in transformers. */
static coli_status mlp_layer_types(coli__cfg_reader *r, coli__config *c)
{
    const coli__json *t = coli__json_get(r->root, "mlp_layer_types");
    if (!t || t->type == COLI_JSON_NULL)
        return COLI_OK;
    if (t->type != COLI_JSON_ARRAY || (int)t->len != c->n_layers)
        return coli__fail(r->err, COLI_EFORMAT, "%s: mlp_layer_types must list num_hidden_layers (%d) types",
                          r->file, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const coli__json *e = &t->items[l];
        int sparse = e->type == COLI_JSON_STRING && strcmp(e->str, "sparse") == 0;
        if (!sparse && !(e->type == COLI_JSON_STRING && strcmp(e->str, "dense") == 0))
            return coli__fail(r->err, COLI_EFORMAT, "%s: mlp_layer_types[%d] must be \"dense\" or \"sparse\"",
                              r->file, l);
        c->is_moe[l] = (unsigned char)sparse;
    }
    return COLI_OK;
}

/* Which layers run their own indexer: indexer_types ("full" or "shared",
 * GLM-5.2), else index_topk_pattern ("F"/"S" a layer), else transformers'
 * schedule: full where max(l - index_skip_topk_offset + 1, 0) is a
 * multiple of index_topk_freq (1 and 2 by default: every layer). */
static coli_status indexer_types(coli__cfg_reader *r, coli__config *c, unsigned char *full)
{
    const coli__json *t = coli__json_get(r->root, "indexer_types");
    const coli__json *pat = coli__json_get(r->root, "index_topk_pattern");
    const char *field = "indexer_types";
    if ((!t || t->type == COLI_JSON_NULL) && pat && pat->type != COLI_JSON_NULL) {
        t = pat;
        field = "index_topk_pattern";
    }
    if (t && t->type != COLI_JSON_NULL) {
        int n = t->type == COLI_JSON_STRING ? (int)t->len : t->type == COLI_JSON_ARRAY ? (int)t->len : -1;
        if (n != c->n_layers)
            return coli__fail(r->err, COLI_EFORMAT, "%s: %s must give num_hidden_layers (%d) layers", r->file, field,
                              c->n_layers);
        for (int l = 0; l < n; l++) {
            const char *v = NULL;
            char one[2] = {0, 0};
            if (t->type == COLI_JSON_STRING) {
                one[0] = t->str[l];
                v = one[0] == 'F' ? "full" : one[0] == 'S' ? "shared" : one;
            } else if (t->items[l].type == COLI_JSON_STRING) {
                v = t->items[l].str;
            }
            if (!v || (strcmp(v, "full") && strcmp(v, "shared")))
                return coli__fail(r->err, COLI_EFORMAT, "%s: %s[%d] must be \"full\" or \"shared\"", r->file, field, l);
            full[l] = strcmp(v, "full") == 0;
        }
    } else {
        int freq = 1, offset = 2;
        COLI_TRY(coli__cfg_int(r, "index_topk_freq", 0, 1, 0, 1 << 16, &freq));
        COLI_TRY(coli__cfg_int(r, "index_skip_topk_offset", 0, 2, -(1 << 16), 1 << 16, &offset));
        freq = freq > 1 ? freq : 1;
        for (int l = 0; l < c->n_layers; l++) {
            int k = l - offset + 1;
            full[l] = (k > 0 ? k : 0) % freq == 0;
        }
    }
    if (!full[0])
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: %s: layer 0 is \"shared\", but there is no earlier full layer to share", r->file,
                          field);
    return COLI_OK;
}

/* GLM-5, 5.1 and 5.2: DeepSeek-V3's latent attention with interleaved
 * RoPE (always: transformers has no switch) and DeepSeek sparse attention,
 * whose indexer reads the query's LoRA. Its key is cached beside the
 * latent. The MTP layer is not loaded yet. */
static coli_status parse_glm_moe_dsa(coli__cfg_reader *r, coli__config *c)
{
    coli__dsa_opts *x = &c->attn.dsa;
    COLI_TRY(mla_fields(r, c));
    COLI_TRY(mlp_layer_types(r, c));
    c->attn.mla_interleave = 1;
    if (!c->attn.mla.q_lora)
        return coli__fail(r->err, COLI_EFORMAT, "%s: q_lora_rank is not given: the indexer reads the query's LoRA",
                          r->file);
    COLI_TRY(coli__cfg_int(r, "index_topk", 0, 2048, 1, 1 << 30, &x->topk));
    COLI_TRY(coli__cfg_int(r, "index_n_heads", 0, 32, 1, 1 << 10, &x->heads));
    COLI_TRY(coli__cfg_int(r, "index_head_dim", 0, 128, 2, 1 << 12, &x->dim));
    if (x->dim < c->attn.mla.rope)
        return coli__fail(r->err, COLI_EFORMAT, "%s: index_head_dim (%d) is narrower than qk_rope_head_dim (%d)",
                          r->file, x->dim, c->attn.mla.rope);
    if ((int64_t)x->heads * x->dim > COLI__DIM_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: index_n_heads x index_head_dim is too large", r->file);
    if (!(x->full = calloc((size_t)c->n_layers, 1)))
        return coli__fail(r->err, COLI_ENOMEM, "%s: out of memory", r->file);
    COLI_TRY(indexer_types(r, c, x->full));
    c->kv_kdim += x->dim; /* [latent ; rotary key ; indexer key] a position */
    return COLI_OK;
}

/* ---- the table ------------------------------------------------------- */

const coli__family coli__families[] = {
    {
        .arch = "Qwen3MoeForCausalLM",
        .model_type = "qwen3_moe",
        .rms_eps = 1e-6,
        .rope_theta = 10000.0,
        .parse = parse_qwen3_moe,
        .names = &hf_moe,
        .attn = COLI_ATTN_GQA,
        .router = COLI_ROUTER_SOFTMAX_TOPK,
        .moe = COLI_MOE_ROUTED,
        .mlp = COLI_MLP_SWIGLU,
    },
    {
        .arch = "OlmoeForCausalLM",
        .model_type = "olmoe",
        .rms_eps = 1e-5,
        .rope_theta = 10000.0,
        .parse = parse_olmoe,
        .names = &hf_moe,
        .attn = COLI_ATTN_GQA,
        .router = COLI_ROUTER_SOFTMAX_TOPK,
        .moe = COLI_MOE_ROUTED,
        .mlp = COLI_MLP_SWIGLU,
    },
    {
        .arch = "Glm4MoeForCausalLM",
        .model_type = "glm4_moe",
        .rms_eps = 1e-5,
        .rope_theta = 10000.0,
        .partial_rotary = 0.5,
        .parse = parse_glm4_moe,
        .names = &hf_glm4_moe,
        .attn = COLI_ATTN_GQA,
        .router = COLI_ROUTER_SIGMOID_GROUP,
        .moe = COLI_MOE_ROUTED_SHARED,
        .mlp = COLI_MLP_SWIGLU,
    },
    {
        .arch = "DeepseekV3ForCausalLM",
        .model_type = "deepseek_v3",
        .model_type_also = "kimi_k2", /* whose configs name DeepseekV3ForCausalLM too */
        .rms_eps = 1e-6,
        .rope_theta = 10000.0,
        .parse = parse_deepseek_v3,
        .names = &hf_deepseek_v3,
        .attn = COLI_ATTN_MLA,
        .router = COLI_ROUTER_SIGMOID_GROUP,
        .moe = COLI_MOE_ROUTED_SHARED,
        .mlp = COLI_MLP_SWIGLU,
    },
    {
        .arch = "GlmMoeDsaForCausalLM",
        .model_type = "glm_moe_dsa",
        .rms_eps = 1e-5,
        .rope_theta = 10000.0,
        .parse = parse_glm_moe_dsa,
        .names = &hf_glm_moe_dsa,
        .attn = COLI_ATTN_MLA,
        .router = COLI_ROUTER_SIGMOID_GROUP,
        .moe = COLI_MOE_ROUTED_SHARED,
        .mlp = COLI_MLP_SWIGLU,
    },
    {
        .arch = "MixtralForCausalLM",
        .model_type = "mixtral",
        .rms_eps = 1e-5,
        .rope_theta = 1e6,
        .parse = parse_mixtral,
        .names = &mixtral,
        .attn = COLI_ATTN_GQA,
        .router = COLI_ROUTER_SOFTMAX_TOPK,
        .moe = COLI_MOE_ROUTED,
        .mlp = COLI_MLP_SWIGLU,
    },
};

const size_t coli__n_families = sizeof coli__families / sizeof coli__families[0];

const coli__family *coli__family_find(const char *arch, const char *model_type)
{
    for (size_t i = 0; i < coli__n_families; i++) {
        const coli__family *f = &coli__families[i];
        if (arch ? strcmp(arch, f->arch) == 0
                 : model_type && (strcmp(model_type, f->model_type) == 0 ||
                                  (f->model_type_also && strcmp(model_type, f->model_type_also) == 0)))
            return f;
    }
    return NULL;
}
