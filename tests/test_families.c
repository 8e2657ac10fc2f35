/* test_families.c - GLM-4.5's family row and its sigmoid router: the
 * published config.json files of GLM-4.5, 4.5-Air, 4.6 and 4.7 read into
 * the values their model cards give (../shared notes, table A.7), the
 * refusals, and the router's choice against values worked out by hand;
 * DeepSeek-V3's and Kimi-K2's rows: their published configs, the softmax
 * scales and YaRN frequencies worked out in the notes (D.2, D.4, D.5). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/model_config.h"
#include "decoder/router_sigmoid.h"
#include "testutil.h"

/* The fields the four releases share; the rest is each one's. */
#define GLM_COMMON                                                                                              \
    "\"architectures\": [\"Glm4MoeForCausalLM\"], \"model_type\": \"glm4_moe\", \"attention_bias\": true, "   \
    "\"attention_dropout\": 0.0, \"pad_token_id\": 151329, \"eos_token_id\": [151329, 151336, 151338], "     \
    "\"head_dim\": 128, \"hidden_act\": \"silu\", \"partial_rotary_factor\": 0.5, "                          \
    "\"initializer_range\": 0.02, \"n_group\": 1, \"n_shared_experts\": 1, \"norm_topk_prob\": true, "       \
    "\"num_attention_heads\": 96, \"num_experts_per_tok\": 8, \"num_key_value_heads\": 8, "                  \
    "\"num_nextn_predict_layers\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "                     \
    "\"rope_theta\": 1000000, \"tie_word_embeddings\": false, \"topk_group\": 1, "                           \
    "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 151552, "

static const struct release {
    const char *name, *json;
    int hidden, layers, dense, inter, moe_inter, experts, qk_norm, max_pos;
    float scale;
} releases[] = {
    {"GLM-4.5",
     "{" GLM_COMMON "\"hidden_size\": 5120, \"num_hidden_layers\": 92, \"first_k_dense_replace\": 3, "
     "\"intermediate_size\": 12288, \"moe_intermediate_size\": 1536, \"n_routed_experts\": 160, "
     "\"routed_scaling_factor\": 2.5, \"use_qk_norm\": true, \"max_position_embeddings\": 131072}",
     5120, 92, 3, 12288, 1536, 160, 1, 131072, 2.5f},
    {"GLM-4.5-Air",
     "{" GLM_COMMON "\"hidden_size\": 4096, \"num_hidden_layers\": 46, \"first_k_dense_replace\": 1, "
     "\"intermediate_size\": 10944, \"moe_intermediate_size\": 1408, \"n_routed_experts\": 128, "
     "\"routed_scaling_factor\": 1.0, \"use_qk_norm\": false, \"max_position_embeddings\": 131072}",
     4096, 46, 1, 10944, 1408, 128, 0, 131072, 1.0f},
    {"GLM-4.6",
     "{" GLM_COMMON "\"hidden_size\": 5120, \"num_hidden_layers\": 92, \"first_k_dense_replace\": 3, "
     "\"intermediate_size\": 12288, \"moe_intermediate_size\": 1536, \"n_routed_experts\": 160, "
     "\"routed_scaling_factor\": 2.5, \"use_qk_norm\": true, \"max_position_embeddings\": 202752}",
     5120, 92, 3, 12288, 1536, 160, 1, 202752, 2.5f},
    {"GLM-4.7",
     "{" GLM_COMMON "\"hidden_size\": 5120, \"num_hidden_layers\": 92, \"first_k_dense_replace\": 3, "
     "\"intermediate_size\": 12288, \"moe_intermediate_size\": 1536, \"n_routed_experts\": 160, "
     "\"routed_scaling_factor\": 2.5, \"use_qk_norm\": true, \"max_position_embeddings\": 202752}",
     5120, 92, 3, 12288, 1536, 160, 1, 202752, 2.5f},
};

/* config.json with text into a new directory; returns the directory. */
static char *config_dir(const char *text)
{
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    char *path = tu_path(dir, "config.json");
    ck_assert_int_eq(tu_write_file(path, text, strlen(text)), 0);
    free(path);
    return dir;
}

START_TEST(test_glm_releases_parse)
{
    const struct release *r = &releases[_i];
    char *dir = config_dir(r->json);
    coli__config c;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_msg(coli__config_load(dir, &c, &err) == COLI_OK, "%s: %s", r->name, err.msg);
    ck_assert_str_eq(c.arch_name, "Glm4MoeForCausalLM");
    ck_assert_int_eq(c.hidden, r->hidden);
    ck_assert_int_eq(c.n_layers, r->layers);
    ck_assert_int_eq(c.head_dim, 128); /* given: 5120 / 96 is not whole */
    ck_assert_int_eq(c.rot_dim, 64);
    ck_assert_int_eq(c.n_heads, 96);
    ck_assert_int_eq(c.n_kv_heads, 8);
    ck_assert_int_eq(c.inter, r->inter);
    ck_assert_int_eq(c.moe_inter, r->moe_inter);
    ck_assert_int_eq(c.shared_inter, r->moe_inter); /* one shared expert */
    ck_assert_int_eq(c.n_experts, r->experts);
    ck_assert_int_eq(c.top_k, 8);
    ck_assert_int_eq(c.n_moe_layers, r->layers - r->dense);
    for (int l = 0; l < c.n_layers; l++)
        ck_assert_int_eq(c.is_moe[l], l >= r->dense);
    ck_assert_int_eq(c.attn.qkv_bias, 1);
    ck_assert_int_eq(c.attn.qk_norm, r->qk_norm ? COLI_QK_NORM_HEAD : COLI_QK_NORM_NONE);
    ck_assert_int_eq(c.router.n_group, 1);
    ck_assert_int_eq(c.router.topk_group, 1);
    ck_assert_int_eq(c.router.norm_topk_prob, 1);
    ck_assert(c.router.scale == r->scale);
    ck_assert_int_eq(c.n_mtp, 1);
    ck_assert(c.rope_theta == 1e6);
    ck_assert(c.rms_eps == 1e-5f);
    ck_assert_int_eq(c.max_pos, r->max_pos);
    ck_assert_int_eq(c.vocab, 151552);
    ck_assert_int_eq(c.n_eos, 3);
    ck_assert_int_eq(c.eos[2], 151338);
    ck_assert_int_eq(c.tie_embeddings, 0);
    coli__config_free(&c);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* Config text base with one field changed: refused, the message naming
 * it. */
static void refused_in(const char *base, const char *from, const char *to, const char *named)
{
    const char *at = strstr(base, from);
    ck_assert_msg(at != NULL, "no '%s'", from);
    char *text = malloc(strlen(base) + strlen(to) + 1);
    size_t pre = (size_t)(at - base);
    memcpy(text, base, pre);
    strcpy(text + pre, to);
    strcat(text, at + strlen(from));
    char *dir = config_dir(text);
    coli__config c;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_int_ne(coli__config_load(dir, &c, &err), COLI_OK);
    ck_assert_msg(strstr(err.msg, named) != NULL, "'%s' does not name %s", err.msg, named);
    tu_rmtree(dir);
    free(dir);
    free(text);
}

/* GLM-4.5 with one field changed. */
static void refused(const char *from, const char *to, const char *named)
{
    refused_in(releases[0].json, from, to, named);
}

START_TEST(test_glm_refusals)
{
    refused("\"n_group\": 1", "\"n_group\": 3", "n_group"); /* 160 experts in 3 groups */
    refused("\"n_group\": 1", "\"n_group\": 32", "topk_group"); /* 1 group of 5 leaves fewer than 8 */
    refused("\"head_dim\": 128, ", "", "head_dim");
    refused("\"routed_scaling_factor\": 2.5", "\"routed_scaling_factor\": -1", "routed_scaling_factor");
    refused("\"topk_group\": 1", "\"topk_group\": 2", "topk_group"); /* more groups than there are */
    refused("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 4}", "dynamic");
    refused("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}",
            "original_max_position_embeddings");
}
END_TEST

/* DeepSeek-V3's and Kimi-K2-Instruct's config.json as published (the
 * fields that matter; quantization_config as DeepSeek-V3 ships it). */
static const char DEEPSEEK_V3[] =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\", \"attention_bias\": false, "
    "\"bos_token_id\": 0, \"eos_token_id\": 1, \"first_k_dense_replace\": 3, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 7168, \"intermediate_size\": 18432, \"kv_lora_rank\": 512, \"max_position_embeddings\": 163840, "
    "\"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 8, \"n_routed_experts\": 256, "
    "\"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_attention_heads\": 128, \"num_experts_per_tok\": 8, "
    "\"num_hidden_layers\": 61, \"num_key_value_heads\": 128, \"num_nextn_predict_layers\": 1, "
    "\"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
    "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
    "\"weight_block_size\": [128, 128]}, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32, "
    "\"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, "
    "\"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, \"rope_theta\": 10000, "
    "\"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", \"tie_word_embeddings\": false, "
    "\"topk_group\": 4, \"topk_method\": \"noaux_tc\", \"torch_dtype\": \"bfloat16\", \"v_head_dim\": 128, "
    "\"vocab_size\": 129280}";

static const char KIMI_K2[] =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"kimi_k2\", \"attention_bias\": false, "
    "\"bos_token_id\": 163584, \"eos_token_id\": 163585, \"first_k_dense_replace\": 1, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 7168, \"intermediate_size\": 18432, \"kv_lora_rank\": 512, \"max_position_embeddings\": 131072, "
    "\"moe_intermediate_size\": 2048, \"n_group\": 1, \"n_routed_experts\": 384, \"n_shared_experts\": 1, "
    "\"norm_topk_prob\": true, \"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61, "
    "\"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 0, \"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, "
    "\"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 1.0, \"beta_slow\": 1.0, "
    "\"factor\": 32.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, "
    "\"type\": \"yarn\"}, \"rope_theta\": 50000.0, \"routed_scaling_factor\": 2.827, \"topk_group\": 1, "
    "\"v_head_dim\": 128, \"vocab_size\": 163840}";

/* DeepSeek-V3: its MLA sizes, a cache of 576 values a position and layer,
 * its softmax scale (0.13524, ../shared notes D.2) and YaRN's frequencies:
 * pairs up to 10 keep theta's, pairs from 23 on are divided by 40 (D.4). */
START_TEST(test_deepseek_v3_parse)
{
    char *dir = config_dir(DEEPSEEK_V3);
    coli__config c;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_msg(coli__config_load(dir, &c, &err) == COLI_OK, "%s", err.msg);
    ck_assert_str_eq(c.arch_name, "DeepseekV3ForCausalLM");
    ck_assert_int_eq(c.family->attn, COLI_ATTN_MLA);
    ck_assert_int_eq(c.hidden, 7168);
    ck_assert_int_eq(c.n_layers, 61);
    ck_assert_int_eq(c.n_heads, 128);
    ck_assert_int_eq(c.attn.mla.q_lora, 1536);
    ck_assert_int_eq(c.attn.mla.kv_lora, 512);
    ck_assert_int_eq(c.attn.mla.nope, 128);
    ck_assert_int_eq(c.attn.mla.rope, 64);
    ck_assert_int_eq(c.attn.mla.v_dim, 128);
    ck_assert_int_eq(c.head_dim, 192);
    ck_assert_int_eq(c.rot_dim, 64);
    ck_assert_int_eq(c.kv_heads * (c.kv_kdim + c.kv_vdim), 576);
    ck_assert_int_eq(c.n_moe_layers, 58);
    ck_assert_int_eq(c.router.n_group, 8);
    ck_assert_int_eq(c.router.topk_group, 4);
    ck_assert(c.router.scale == 2.5f);
    ck_assert_int_eq(c.shared_inter, 2048);
    ck_assert_int_eq(c.max_pos, 163840);
    ck_assert_msg(fabsf(c.attn.scale - 0.13524f) < 1e-5f, "softmax scale %.6f", (double)c.attn.scale);
    ck_assert(c.rope.yarn && c.rope.factor == 40 && c.rope.orig_max == 4096);
    ck_assert(c.rope.table_factor == 1.0f); /* mscale equals mscale_all_dim */
    for (int j = 0; j < 32; j++) {
        float pf = powf(10000.0f, (float)(2 * j) / 64.0f);
        if (j <= 10)
            ck_assert_msg(c.rope.inv[j] == 1.0f / pf, "pair %d", j);
        else if (j >= 23)
            ck_assert_msg(c.rope.inv[j] == 1.0f / (40.0f * pf), "pair %d", j);
        else /* between the two */
            ck_assert_msg(c.rope.inv[j] < 1.0f / pf && c.rope.inv[j] > 1.0f / (40.0f * pf), "pair %d", j);
    }
    coli__config_free(&c);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* Kimi-K2: the same row (model_type kimi_k2), 64 heads, one router group,
 * YaRN on theta 50000 with factor 32: a softmax scale of 0.13086 (D.5). */
START_TEST(test_kimi_k2_parse)
{
    char *dir = config_dir(KIMI_K2);
    coli__config c;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_msg(coli__config_load(dir, &c, &err) == COLI_OK, "%s", err.msg);
    ck_assert_str_eq(c.arch_name, "DeepseekV3ForCausalLM");
    ck_assert_int_eq(c.n_heads, 64);
    ck_assert_int_eq(c.n_experts, 384);
    ck_assert_int_eq(c.n_moe_layers, 60);
    ck_assert_int_eq(c.router.n_group, 1);
    ck_assert(c.router.scale == 2.827f);
    ck_assert(c.rope_theta == 50000.0);
    ck_assert_msg(fabsf(c.attn.scale - 0.13086f) < 1e-5f, "softmax scale %.6f", (double)c.attn.scale);
    coli__config_free(&c);
    /* without architectures, its model_type names the same row */
    char *text = malloc(sizeof KIMI_K2);
    memcpy(text, KIMI_K2, sizeof KIMI_K2);
    memcpy(strstr(text, "\"architectures\""), "\"archi_ignored\"", strlen("\"archi_ignored\""));
    char *dir2 = config_dir(text);
    ck_assert_msg(coli__config_load(dir2, &c, &err) == COLI_OK, "%s", err.msg);
    ck_assert_str_eq(c.arch_name, "DeepseekV3ForCausalLM");
    coli__config_free(&c);
    tu_rmtree(dir);
    tu_rmtree(dir2);
    free(dir);
    free(dir2);
    free(text);
}
END_TEST

/* GLM-5's published config (zai-org/GLM-5; ../shared notes, section C). */
static const char GLM_5[] =
    "{\"architectures\": [\"GlmMoeDsaForCausalLM\"], \"model_type\": \"glm_moe_dsa\", \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, \"eos_token_id\": [154820, 154827, 154829], \"first_k_dense_replace\": 3, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 6144, \"index_head_dim\": 128, \"index_n_heads\": 32, "
    "\"index_topk\": 2048, \"intermediate_size\": 12288, \"kv_lora_rank\": 512, "
    "\"max_position_embeddings\": 202752, \"moe_intermediate_size\": 2048, \"n_group\": 1, "
    "\"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true, "
    "\"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 78, "
    "\"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 2048, "
    "\"qk_nope_head_dim\": 192, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, \"rope_interleave\": true, "
    "\"rope_theta\": 1000000, \"routed_scaling_factor\": 2.5, \"tie_word_embeddings\": false, "
    "\"topk_group\": 1, \"v_head_dim\": 256, \"vocab_size\": 154880}";

/* GLM-5: the MLA sizes, a cache row of 512 + 64 + 128 a layer (the
 * indexer's key beside the latent), the softmax scale 1/16 (no YaRN), an
 * indexer in every layer; GLM-5.2's schedules: index_topk_freq 4 with
 * offset 3 runs it in layers 0, 1, 2, then every 4th from 6 (21 of 78,
 * the notes' count), and an explicit list or "F"/"S" pattern as given. */
START_TEST(test_glm5_parse)
{
    char *dir = config_dir(GLM_5);
    coli__config c;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_msg(coli__config_load(dir, &c, &err) == COLI_OK, "%s", err.msg);
    ck_assert_str_eq(c.arch_name, "GlmMoeDsaForCausalLM");
    ck_assert_int_eq(c.family->attn, COLI_ATTN_MLA);
    ck_assert_int_eq(c.head_dim, 256);
    ck_assert_int_eq(c.kv_heads * (c.kv_kdim + c.kv_vdim), 704);
    ck_assert_int_eq(c.n_moe_layers, 75);
    ck_assert(c.attn.mla_interleave);
    ck_assert(c.attn.scale == 0.0625f);
    ck_assert_int_eq(c.attn.dsa.topk, 2048);
    ck_assert_int_eq(c.attn.dsa.heads, 32);
    ck_assert_int_eq(c.attn.dsa.dim, 128);
    for (int l = 0; l < 78; l++)
        ck_assert_int_eq(c.attn.dsa.full[l], 1);
    coli__config_free(&c);
    tu_rmtree(dir);
    free(dir);

    static const char *const spell[] = {"\"index_topk_freq\": 4, \"index_skip_topk_offset\": 3, \"index_topk\"",
                                        "\"index_topk_pattern\": \"FFFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSSFSSS"
                                        "FSSSFSSSFSSSFSSSFSSSFSSS\", \"index_topk\""};
    for (int k = 0; k < 2; k++) {
        char *text = malloc(sizeof GLM_5 + strlen(spell[k]));
        const char *at = strstr(GLM_5, "\"index_topk\"");
        memcpy(text, GLM_5, (size_t)(at - GLM_5));
        strcpy(text + (at - GLM_5), spell[k]);
        strcat(text, at + strlen("\"index_topk\""));
        dir = config_dir(text);
        ck_assert_msg(coli__config_load(dir, &c, &err) == COLI_OK, "%s", err.msg);
        int n_full = 0;
        for (int l = 0; l < 78; l++) {
            int want = l < 3 || (l >= 6 && (l - 6) % 4 == 0);
            ck_assert_msg(c.attn.dsa.full[l] == want, "spelling %d, layer %d", k, l);
            n_full += want;
        }
        ck_assert_int_eq(n_full, 21);
        coli__config_free(&c);
        tu_rmtree(dir);
        free(dir);
        free(text);
    }
}
END_TEST

START_TEST(test_glm5_refusals)
{
    refused_in(GLM_5, "\"q_lora_rank\": 2048", "\"q_lora_rank\": null", "q_lora_rank");
    refused_in(GLM_5, "\"index_head_dim\": 128", "\"index_head_dim\": 32", "index_head_dim");
    refused_in(GLM_5, "\"index_topk\": 2048", "\"index_topk\": 0", "index_topk");
    refused_in(GLM_5, "\"index_topk\": 2048", "\"index_topk\": 2048, \"indexer_types\": [\"full\"]", "indexer_types");
    refused_in(GLM_5, "\"index_topk\": 2048", "\"index_topk\": 2048, \"index_topk_pattern\": \"S\"",
               "index_topk_pattern");
    refused_in(GLM_5, "\"index_topk\": 2048", "\"index_topk\": 2048, \"mlp_layer_types\": [\"dense\"]",
               "mlp_layer_types");
}
END_TEST

/* DeepSeek-V3 with one field changed. */
static void ds_refused(const char *from, const char *to, const char *named)
{
    refused_in(DEEPSEEK_V3, from, to, named);
}

START_TEST(test_deepseek_refusals)
{
    ds_refused("\"kv_lora_rank\": 512, ", "", "kv_lora_rank");
    ds_refused("\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63", "qk_rope_head_dim");
    ds_refused("\"v_head_dim\": 128, ", "", "v_head_dim");
    ds_refused("\"attention_bias\": false", "\"attention_bias\": true", "attention_bias");
    ds_refused("\"original_max_position_embeddings\": 4096, ", "", "original_max_position_embeddings");
    ds_refused("\"factor\": 40", "\"factor\": 0.5", "factor");
    ds_refused("\"type\": \"yarn\"", "\"type\": \"longrope\"", "longrope");
}
END_TEST

/* 8 experts in 4 groups of 2, 2 groups kept, 3 chosen. Biased scores c =
 * s + b: .90 .10 | .70 .65 | .95 .05 | .50 .75; group scores 1.0, 1.35,
 * 1.0, 1.25: groups 1 and 3 are kept, so expert 4 (the best score) and
 * expert 0 are not chosen; then 7 (.75), 2 (.70), 3 (.65). Weights: the
 * unbiased .45 .60 .55 over their sum 1.6, times 2.5. */
START_TEST(test_sigmoid_groups)
{
    const float s[8] = {0.90f, 0.10f, 0.60f, 0.55f, 0.95f, 0.05f, 0.50f, 0.45f};
    const float b[8] = {0, 0, 0.10f, 0.10f, 0, 0, 0, 0.30f};
    float cv[8], w[3];
    unsigned char taken[8];
    int sel[3];
    coli__router_opts o = {.norm_topk_prob = 1, .n_group = 4, .topk_group = 2, .scale = 2.5f};
    coli__sigmoid_choose(&o, s, b, 8, 3, cv, taken, sel, w);
    ck_assert_int_eq(sel[0], 7);
    ck_assert_int_eq(sel[1], 2);
    ck_assert_int_eq(sel[2], 3);
    const double want[3] = {0.45 / 1.6 * 2.5, 0.60 / 1.6 * 2.5, 0.55 / 1.6 * 2.5};
    for (int j = 0; j < 3; j++)
        ck_assert_msg(fabs(w[j] - want[j]) < 1e-6, "w[%d] = %.9g, want %.9g", j, w[j], want[j]);

    /* one group: the three best biased scores, 4 .95, 0 .90, 7 .75; not
     * renormalised, the unbiased scores times 2.5 */
    o.n_group = o.topk_group = 1;
    o.norm_topk_prob = 0;
    coli__sigmoid_choose(&o, s, b, 8, 3, cv, taken, sel, w);
    ck_assert_int_eq(sel[0], 4);
    ck_assert_int_eq(sel[1], 0);
    ck_assert_int_eq(sel[2], 7);
    ck_assert(w[0] == 0.95f * 2.5f && w[1] == 0.90f * 2.5f && w[2] == 0.45f * 2.5f);
}
END_TEST

/* Every kept expert's biased score below 0: the other group stays out
 * (docs/formats.md masks with -inf; a mask of 0 would pick experts 2, 3). */
START_TEST(test_sigmoid_negative_kept)
{
    const float s[4] = {0.01f, 0.02f, 0.03f, 0.04f};
    const float b[4] = {-0.1f, -0.1f, -0.5f, -0.5f};
    float cv[4], w[2];
    unsigned char taken[4];
    int sel[2];
    coli__router_opts o = {.norm_topk_prob = 1, .n_group = 2, .topk_group = 1, .scale = 1.0f};
    coli__sigmoid_choose(&o, s, b, 4, 2, cv, taken, sel, w);
    ck_assert_int_eq(sel[0], 1);
    ck_assert_int_eq(sel[1], 0);
    ck_assert(fabs(w[0] - 2.0 / 3.0) < 1e-6 && fabs(w[1] - 1.0 / 3.0) < 1e-6);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("families");
    TCase *tc = tcase_create("glm4_moe");
    tcase_add_loop_test(tc, test_glm_releases_parse, 0, (int)(sizeof releases / sizeof releases[0]));
    tcase_add_test(tc, test_glm_refusals);
    tcase_add_test(tc, test_sigmoid_groups);
    tcase_add_test(tc, test_sigmoid_negative_kept);
    suite_add_tcase(s, tc);
    TCase *ds = tcase_create("deepseek_v3");
    tcase_add_test(ds, test_deepseek_v3_parse);
    tcase_add_test(ds, test_kimi_k2_parse);
    tcase_add_test(ds, test_deepseek_refusals);
    suite_add_tcase(s, ds);
    TCase *g5 = tcase_create("glm_moe_dsa");
    tcase_add_test(g5, test_glm5_parse);
    tcase_add_test(g5, test_glm5_refusals);
    suite_add_tcase(s, g5);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
