/* test_badinput.c - bad model directories are refused cleanly.
 *
 * Each case builds a tiny synthetic Qwen3-MoE checkpoint with one defect and
 * checks that coli_model_open returns the expected status with a message
 * naming the file and the tensor or field at fault. Under ASan this also
 * proves that nothing leaks or is read out of bounds on the way out. The
 * non-finite cases patch a copy of the qwen3_moe fixture instead, in every
 * stored dtype and load format. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "testutil.h"

/* Tiny dimensions: hidden 8, 2 heads of 4, 1 KV head, 2 experts of 4. */
static const char *CONFIG =
    "{\n"
    "  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n"
    "  \"model_type\": \"qwen3_moe\",\n"
    "  \"hidden_size\": 8,\n"
    "  \"num_hidden_layers\": 1,\n"
    "  \"num_attention_heads\": 2,\n"
    "  \"num_key_value_heads\": 1,\n"
    "  \"head_dim\": 4,\n"
    "  \"vocab_size\": 16,\n"
    "  \"num_experts\": 2,\n"
    "  \"num_experts_per_tok\": 1,\n"
    "  \"moe_intermediate_size\": 4,\n"
    "  \"intermediate_size\": 12,\n"
    "  \"norm_topk_prob\": true,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 10000.0,\n"
    "  \"max_position_embeddings\": 64,\n"
    "  \"tie_word_embeddings\": false\n"
    "}\n";

typedef struct spec {
    const char *name;
    int64_t d0, d1; /* d1 < 0: a vector */
} spec;

static const spec TENSORS[] = {
    {"model.embed_tokens.weight", 16, 8},
    {"model.layers.0.input_layernorm.weight", 8, -1},
    {"model.layers.0.post_attention_layernorm.weight", 8, -1},
    {"model.layers.0.self_attn.q_proj.weight", 8, 8},
    {"model.layers.0.self_attn.k_proj.weight", 4, 8},
    {"model.layers.0.self_attn.v_proj.weight", 4, 8},
    {"model.layers.0.self_attn.o_proj.weight", 8, 8},
    {"model.layers.0.self_attn.q_norm.weight", 4, -1},
    {"model.layers.0.self_attn.k_norm.weight", 4, -1},
    {"model.layers.0.mlp.gate.weight", 2, 8},
    {"model.layers.0.mlp.experts.0.gate_proj.weight", 4, 8},
    {"model.layers.0.mlp.experts.0.up_proj.weight", 4, 8},
    {"model.layers.0.mlp.experts.0.down_proj.weight", 8, 4},
    {"model.layers.0.mlp.experts.1.gate_proj.weight", 4, 8},
    {"model.layers.0.mlp.experts.1.up_proj.weight", 4, 8},
    {"model.layers.0.mlp.experts.1.down_proj.weight", 8, 4},
    {"model.norm.weight", 8, -1},
    {"lm_head.weight", 16, 8},
};
#define N_TENSORS (sizeof TENSORS / sizeof TENSORS[0])

/* A defect to plant: tensor `victim` is left out, given `shape`, or `dtype`. */
typedef struct defect {
    const char *victim;
    int omit;
    int64_t shape0;       /* non-zero: replaces the first dimension */
    const char *dtype;    /* non-NULL: replaces "BF16" */
} defect;

static char *make_model(const defect *d)
{
    char *dir = tu_mkdtemp();
    char *p = tu_path(dir, "config.json");
    ck_assert_int_eq(tu_write_file(p, CONFIG, strlen(CONFIG)), 0);
    free(p);
    tu_st *w = tu_st_new();
    for (size_t i = 0; i < N_TENSORS; i++) {
        const spec *t = &TENSORS[i];
        int is_victim = d && d->victim && strcmp(d->victim, t->name) == 0;
        if (is_victim && d->omit)
            continue;
        int64_t shape[2] = {t->d0, t->d1};
        if (is_victim && d->shape0)
            shape[0] = d->shape0;
        int nd = t->d1 < 0 ? 1 : 2;
        size_t n = (size_t)shape[0] * (size_t)(nd == 2 ? shape[1] : 1);
        uint16_t *v = malloc(n * 2 + 2);
        for (size_t k = 0; k < n; k++)
            v[k] = tu_f32_to_bf16((float)((int)(k * 7 % 13) - 6) / 16.0f);
        tu_st_add(w, t->name, is_victim && d->dtype ? d->dtype : "BF16", nd, shape, v, n * 2);
        free(v);
    }
    p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_write(w, p), 0);
    free(p);
    tu_st_free(w);
    return dir;
}

/* Opens dir and expects status want with every needle in the message. */
static void expect_fail(const char *dir, coli_status want, const char *n1, const char *n2)
{
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, NULL, &m);
    ck_assert_ptr_nonnull(m);
    const char *msg = coli_model_errmsg(m);
    ck_assert_msg(st == want, "status %s, wanted %s (%s)", coli_status_name(st), coli_status_name(want), msg);
    ck_assert_msg(!n1 || strstr(msg, n1), "message '%s' does not name '%s'", msg, n1);
    ck_assert_msg(!n2 || strstr(msg, n2), "message '%s' does not name '%s'", msg, n2);
    /* A failed handle refuses further use. */
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_ESTATE);
    ck_assert_ptr_null(c);
    coli_model_free(m);
}

static void done(char *dir)
{
    tu_rmtree(dir);
    free(dir);
}

START_TEST(test_good_synthetic_model_opens)
{
    /* The control: without a defect the synthetic model opens and runs. */
    char *dir = make_model(NULL);
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, NULL, &m);
    ck_assert_msg(st == COLI_OK, "%s", coli_model_errmsg(m));
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    int32_t ids[3] = {1, 5, 15};
    ck_assert_int_eq(coli_eval(c, ids, 3), COLI_OK);
    ck_assert_ptr_nonnull(coli_context_logits(c));
    coli_context_free(c);
    coli_model_free(m);
    done(dir);
}
END_TEST

START_TEST(test_missing_dir)
{
    expect_fail("/nonexistent/colibri-model", COLI_ENOENT, "/nonexistent/colibri-model", NULL);
}
END_TEST

START_TEST(test_missing_config)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "config.json");
    remove(p);
    free(p);
    expect_fail(dir, COLI_ENOENT, "config.json", NULL);
    done(dir);
}
END_TEST

START_TEST(test_malformed_config)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"head_dim\": 4,", "\"head_dim\": 4,,"), 0);
    expect_fail(dir, COLI_EFORMAT, "config.json", "line 8");
    done(dir);
}
END_TEST

START_TEST(test_unknown_architecture)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "Qwen3MoeForCausalLM", "GPTNeoXForCausalLM"), 0);
    expect_fail(dir, COLI_EUNSUPPORTED, "config.json", "GPTNeoXForCausalLM");
    done(dir);
}
END_TEST

START_TEST(test_unsupported_rope_scaling)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"rope_theta\": 10000.0,",
                    "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4.0},"), 0);
    expect_fail(dir, COLI_EUNSUPPORTED, "config.json", "dynamic");
    done(dir);
}
END_TEST

START_TEST(test_unsupported_activation)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"head_dim\": 4,", "\"head_dim\": 4, \"hidden_act\": \"gelu\","), 0);
    expect_fail(dir, COLI_EUNSUPPORTED, "hidden_act", "gelu");
    done(dir);
}
END_TEST

START_TEST(test_wrong_field_type)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"hidden_size\": 8", "\"hidden_size\": \"8\""), 0);
    expect_fail(dir, COLI_EFORMAT, "config.json", "hidden_size");
    done(dir);
}
END_TEST

START_TEST(test_huge_dimensions)
{
    /* Sizes whose products would overflow are refused before any allocation. */
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"head_dim\": 4", "\"head_dim\": 65536"), 0);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"num_attention_heads\": 2", "\"num_attention_heads\": 4096"), 0);
    expect_fail(dir, COLI_ERANGE, "config.json", "head_dim");
    done(dir);
}
END_TEST

START_TEST(test_missing_weights_file)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    remove(p);
    free(p);
    expect_fail(dir, COLI_ENOENT, "model.safetensors", NULL);
    done(dir);
}
END_TEST

START_TEST(test_truncated_weights)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    size_t n;
    char *s = tu_read_file(p, &n);
    ck_assert_int_eq(tu_write_file(p, s, n / 2), 0);
    free(s);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", NULL);
    done(dir);
}
END_TEST

START_TEST(test_header_beyond_file)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_write_raw_len(p, 1u << 20, "{}", "", 0), 0);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", NULL);
    done(dir);
}
END_TEST

START_TEST(test_offsets_out_of_range)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_write_raw(p,
                                     "{\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[8],"
                                     "\"data_offsets\":[0,16000]}}",
                                     "0123456789abcdef", 16),
                     0);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", "model.norm.weight");
    done(dir);
}
END_TEST

START_TEST(test_overlapping_tensors)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_write_raw(p,
                                     "{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[4,12]}}",
                                     "0123456789abcdef", 16),
                     0);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", NULL);
    done(dir);
}
END_TEST

START_TEST(test_overflowing_shape)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_write_raw(p,
                                     "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,"
                                     "4611686018427387904],\"data_offsets\":[0,16]}}",
                                     "0123456789abcdef", 16),
                     0);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", "model.norm.weight");
    done(dir);
}
END_TEST

START_TEST(test_unknown_dtype)
{
    defect d = {"model.layers.0.self_attn.k_proj.weight", 0, 0, "Q4"};
    char *dir = make_model(&d);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", "Q4");
    done(dir);
}
END_TEST

START_TEST(test_unsupported_dtype)
{
    /* A valid safetensors dtype we cannot compute with. */
    defect d = {"model.layers.0.self_attn.k_proj.weight", 0, 0, "I16"};
    char *dir = make_model(&d);
    expect_fail(dir, COLI_EUNSUPPORTED, "model.layers.0.self_attn.k_proj.weight", "I16");
    done(dir);
}
END_TEST

START_TEST(test_shape_disagrees_with_config)
{
    defect d = {"model.layers.0.mlp.experts.1.up_proj.weight", 0, 5, NULL};
    char *dir = make_model(&d);
    expect_fail(dir, COLI_EFORMAT, "model.layers.0.mlp.experts.1.up_proj.weight", "[5, 8]");
    done(dir);
}
END_TEST

START_TEST(test_missing_tensor)
{
    defect d = {"model.layers.0.self_attn.q_norm.weight", 1, 0, NULL};
    char *dir = make_model(&d);
    expect_fail(dir, COLI_ENOENT, "model.layers.0.self_attn.q_norm.weight", "missing");
    done(dir);
}
END_TEST

/* transformers' Qwen3-MoE rule: layer l is MoE iff l is not in
 * mlp_only_layers and (l + 1) % decoder_sparse_step == 0. The synthetic
 * model's only layer holds experts, so either setting below makes layer 0
 * dense and the open must ask for its dense MLP. */
static const char *const DENSE_LAYER_0[] = {
    "\"head_dim\": 4, \"decoder_sparse_step\": 2,",
    "\"head_dim\": 4, \"mlp_only_layers\": [0],",
};

START_TEST(test_config_makes_layer_dense)
{
    char *dir = make_model(NULL);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"head_dim\": 4,", DENSE_LAYER_0[_i]), 0);
    expect_fail(dir, COLI_ENOENT, "model.layers.0.mlp.gate_proj.weight", "missing");
    done(dir);
}
END_TEST

/* A GLM-5 config over a checkpoint without the indexer: DeepSeek-V3's
 * fixture named glm_moe_dsa. The open names the first missing tensor;
 * with the tensor present but the wrong width, its shape. */
START_TEST(test_indexer_without_its_tensors)
{
    char *src = tu_path(tu_data_dir(), "deepseek_v3");
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"DeepseekV3ForCausalLM\"", "\"GlmMoeDsaForCausalLM\""),
                     0);
    expect_fail(dir, COLI_ENOENT, "model.layers.0.self_attn.indexer.wq_b.weight", "missing");
    done(dir);
    /* the glm_moe_dsa fixture told its indexer is wider than it is */
    free(src);
    src = tu_path(tu_data_dir(), "glm_moe_dsa");
    dir = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"index_head_dim\": 32", "\"index_head_dim\": 48"), 0);
    expect_fail(dir, COLI_EFORMAT, "model.layers.0.self_attn.indexer.wq_b.weight", "[512, 32]");
    done(dir);
    free(src);
}
END_TEST

START_TEST(test_malformed_tokenizer)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "tokenizer.json");
    ck_assert_int_eq(tu_write_file(p, "{\"model\": {\"type\": \"BPE\", ", 27), 0);
    free(p);
    expect_fail(dir, COLI_EFORMAT, "tokenizer.json", NULL);
    done(dir);
}
END_TEST

START_TEST(test_index_names_missing_shard)
{
    char *dir = make_model(NULL);
    char *p = tu_path(dir, "model.safetensors");
    remove(p);
    free(p);
    p = tu_path(dir, "model.safetensors.index.json");
    const char *idx = "{\"metadata\": {}, \"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}";
    ck_assert_int_eq(tu_write_file(p, idx, strlen(idx)), 0);
    free(p);
    expect_fail(dir, COLI_ENOENT, "model-00001-of-00002.safetensors", NULL);
    done(dir);
}
END_TEST

START_TEST(test_bad_token_ids)
{
    char *dir = make_model(NULL);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_OK);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    int32_t ids[2] = {3, 16};
    ck_assert_int_eq(coli_eval(c, ids, 2), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(c), "16"));
    ck_assert_int_eq(coli_context_position(c), 0);
    ids[1] = -1;
    ck_assert_int_eq(coli_eval(c, ids, 2), COLI_EINVAL);
    /* The context still works after refusing. */
    ids[1] = 4;
    ck_assert_int_eq(coli_eval(c, ids, 2), COLI_OK);
    ck_assert_int_eq(coli_context_position(c), 2);
    coli_context_free(c);
    coli_model_free(m);
    done(dir);
}
END_TEST

/* ---- non-finite weights ------------------------------------------------ */

static const coli_weight_format FORMATS[] = {COLI_WEIGHTS_AUTO, COLI_WEIGHTS_F32, COLI_WEIGHTS_BF16,
                                             COLI_WEIGHTS_Q8,   COLI_WEIGHTS_Q4,  COLI_WEIGHTS_Q2};
#define N_FORMATS (sizeof FORMATS / sizeof FORMATS[0])
static const char *const STORED[] = {"BF16", "F32", "F16"};

/* The value planted and the word the message must use for it. */
typedef struct bad_value {
    float v;
    const char *word;
} bad_value;

static const bad_value BAD[] = {{NAN, "(NaN)"}, {INFINITY, "(+Inf)"}, {-INFINITY, "(-Inf)"}};

/* A copy of the qwen3_moe fixture stored as dtype, with elements [first,
 * first + count) of tensor victim set to v (victim NULL: unchanged). */
static char *patched_fixture(const char *dtype, const char *victim, size_t first, size_t count, float v)
{
    char *src = tu_path(tu_data_dir(), "qwen3_moe");
    char *dir = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    char *p = tu_path(dir, "model.safetensors");
    ck_assert_int_eq(tu_st_rewrite(p, dtype, victim, first, count, v), 0);
    free(p);
    free(src);
    return dir;
}

static coli_status open_as(const char *dir, coli_weight_format fmt, coli_model **m)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    coli_status st = coli_model_open(dir, o, m);
    coli_options_free(o);
    ck_assert_ptr_nonnull(*m);
    return st;
}

/* Opens dir in every load format and expects a refusal naming the file,
 * the tensor, the place and the value. */
static void expect_refused_everywhere(const char *dir, const char *dtype, const char *tensor, const char *where,
                                      const char *word)
{
    for (size_t f = 0; f < N_FORMATS; f++) {
        coli_model *m = NULL;
        coli_status st = open_as(dir, FORMATS[f], &m);
        const char *msg = coli_model_errmsg(m);
        ck_assert_msg(st == COLI_EFORMAT, "%s stored, format %d: status %s (%s)", dtype, (int)FORMATS[f],
                      coli_status_name(st), msg);
        const char *needles[] = {"model.safetensors", tensor, where, word, "non-finite"};
        for (size_t k = 0; k < sizeof needles / sizeof needles[0]; k++)
            ck_assert_msg(strstr(msg, needles[k]), "%s stored, format %d: '%s' does not name '%s'", dtype,
                          (int)FORMATS[f], msg, needles[k]);
        coli_model_free(m);
    }
}

/* One expert weight, row 17 column 5 (of [32, 64]), in every stored dtype,
 * every non-finite value and every load format. */
START_TEST(test_nonfinite_weight_refused)
{
    const char *dtype = STORED[_i / 3];
    const bad_value *b = &BAD[_i % 3];
    const char *victim = "model.layers.0.mlp.experts.3.up_proj.weight";
    char *dir = patched_fixture(dtype, victim, 17 * 64 + 5, 1, b->v);
    expect_refused_everywhere(dir, dtype, victim, "row 17, column 5", b->word);
    done(dir);
}
END_TEST

/* Every other kind of tensor: the ones the quantized formats keep as stored
 * (embedding, router), the q8 output, a dense MLP, attention and the norm
 * vectors, each in every stored dtype; the value cycles through BAD. */
typedef struct victim {
    const char *name;
    size_t first;
    const char *where;
} victim;

static const victim VICTIMS[] = {
    {"model.embed_tokens.weight", 1004 * 64 + 63, "row 1004, column 63"},
    {"model.layers.2.mlp.gate.weight", 0, "row 0, column 0"},
    {"lm_head.weight", 3 * 64 + 1, "row 3, column 1"},
    {"model.layers.1.mlp.down_proj.weight", 63 * 96 + 95, "row 63, column 95"},
    {"model.layers.2.self_attn.k_proj.weight", 40 * 64 + 7, "row 40, column 7"},
    {"model.norm.weight", 9, "element 9"},
    {"model.layers.0.self_attn.q_norm.weight", 23, "element 23"},
};
#define N_VICTIMS (sizeof VICTIMS / sizeof VICTIMS[0])

START_TEST(test_nonfinite_weight_anywhere)
{
    const victim *v = &VICTIMS[_i % N_VICTIMS];
    const char *dtype = STORED[_i / N_VICTIMS];
    const bad_value *b = &BAD[_i % 3];
    char *dir = patched_fixture(dtype, v->name, v->first, 1, b->v);
    expect_refused_everywhere(dir, dtype, v->name, v->where, b->word);
    done(dir);
}
END_TEST

/* The control: the same rewrite with a finite value opens in every format. */
START_TEST(test_finite_patch_opens)
{
    char *dir = patched_fixture(STORED[_i], "model.layers.0.mlp.experts.3.up_proj.weight", 17 * 64 + 5, 1, 0.5f);
    for (size_t f = 0; f < N_FORMATS; f++) {
        coli_model *m = NULL;
        coli_status st = open_as(dir, FORMATS[f], &m);
        ck_assert_msg(st == COLI_OK, "%s stored, format %d: %s", STORED[_i], (int)FORMATS[f], coli_model_errmsg(m));
        coli_model_free(m);
    }
    done(dir);
}
END_TEST

/* A finite f32 weight beyond bf16's largest value (3.39e38) would narrow to
 * infinity: bf16 refuses it, f32 keeps it. */
START_TEST(test_beyond_bf16_refused_as_bf16)
{
    const char *tensor = "model.layers.0.mlp.experts.3.up_proj.weight";
    char *dir = patched_fixture("F32", tensor, 17 * 64 + 5, 1, 3.4e38f);
    coli_model *m = NULL;
    ck_assert_int_eq(open_as(dir, COLI_WEIGHTS_BF16, &m), COLI_ERANGE);
    const char *msg = coli_model_errmsg(m);
    ck_assert_msg(strstr(msg, tensor) && strstr(msg, "row 17, column 5") && strstr(msg, "bf16"), "%s", msg);
    coli_model_free(m);
    const coli_weight_format keep[] = {COLI_WEIGHTS_AUTO, COLI_WEIGHTS_F32};
    for (size_t f = 0; f < 2; f++) {
        m = NULL;
        ck_assert_msg(open_as(dir, keep[f], &m) == COLI_OK, "%s", coli_model_errmsg(m));
        coli_model_free(m);
    }
    done(dir);
}
END_TEST

/* ---- non-finite logits ------------------------------------------------- */

/* lm_head row 7 all 3e38 (finite in bf16 and f32): its logit overflows. */
START_TEST(test_overflowing_logit_is_an_error)
{
    char *dir = patched_fixture("BF16", "lm_head.weight", 7 * 64, 64, 3e38f);
    const coli_weight_format fmts[] = {COLI_WEIGHTS_AUTO, COLI_WEIGHTS_F32, COLI_WEIGHTS_BF16};
    const int32_t prompt[3] = {1, 5, 15};
    for (size_t f = 0; f < 3; f++) {
        coli_model *m = NULL;
        ck_assert_int_eq(open_as(dir, fmts[f], &m), COLI_OK);
        coli_context *c = NULL;
        ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
        coli_status st = coli_eval(c, prompt, 3);
        const char *msg = coli_context_errmsg(c);
        ck_assert_msg(st == COLI_ERANGE, "format %d: status %s (%s)", (int)fmts[f], coli_status_name(st), msg);
        ck_assert_msg(strstr(msg, "non-finite logit at position 2") && strstr(msg, "token id 7"), "%s", msg);
        /* nothing to sample from, and the positions were not kept */
        ck_assert_ptr_null(coli_context_logits(c));
        ck_assert_int_eq(coli_context_position(c), 0);
        /* generation stops with the same error and no token */
        coli_sampler *s = NULL;
        ck_assert_int_eq(coli_sampler_create(NULL, &s), COLI_OK);
        int32_t out[4];
        size_t n_out = 99;
        ck_assert_int_eq(tu_generate(c, prompt, 3, 4, s, NULL, NULL, out, 4, &n_out), COLI_ERANGE);
        ck_assert_uint_eq(n_out, 0);
        ck_assert_ptr_nonnull(strstr(coli_context_errmsg(c), "token id 7"));
        coli_sampler_free(s);
        coli_context_free(c);
        coli_model_free(m);
    }
    /* The quantized formats make the output q8, whose fp16 scales cannot
     * hold 3e38: refused at load instead. */
    for (size_t f = 3; f < N_FORMATS; f++) {
        coli_model *m = NULL;
        ck_assert_int_eq(open_as(dir, FORMATS[f], &m), COLI_ERANGE);
        ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "lm_head.weight"));
        coli_model_free(m);
    }
    done(dir);
}
END_TEST

/* The same refusal for a matrix of 64 rows, which q8 and q4 quantize
 * block by block into the x16 layout where the CPU has AVX-512 VNNI (the
 * lm_head above, 1005 rows, keeps the row layout). */
START_TEST(test_overflowing_scale_refused_in_both_layouts)
{
    const char *oproj = "model.layers.0.self_attn.o_proj.weight"; /* [64, 96] */
    char *dir = patched_fixture("BF16", oproj, 37 * 96, 96, 3e38f);
    for (size_t f = 3; f < N_FORMATS; f++) {
        coli_model *m = NULL;
        ck_assert_int_eq(open_as(dir, FORMATS[f], &m), COLI_ERANGE);
        ck_assert_msg(strstr(coli_model_errmsg(m), oproj) && strstr(coli_model_errmsg(m), "fp16 scales"), "%s",
                      coli_model_errmsg(m));
        coli_model_free(m);
    }
    coli_model *m = NULL;
    ck_assert_int_eq(open_as(dir, COLI_WEIGHTS_BF16, &m), COLI_OK);
    coli_model_free(m);
    done(dir);
}
END_TEST

/* The sampler never picks from a NaN or infinite logit, whatever the
 * settings (the logits are altered behind the library's back here). */
START_TEST(test_sampler_refuses_nonfinite_logits)
{
    char *dir = make_model(NULL);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_OK);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    int32_t ids[2] = {3, 4};
    ck_assert_int_eq(coli_eval(c, ids, 2), COLI_OK);
    float *logits = (float *)coli_context_logits(c); /* the context's own, writable buffer */
    coli_sampler_params greedy, random;
    coli_sampler_params_init(&greedy, sizeof greedy);
    coli_sampler_params_init(&random, sizeof random);
    random.temperature = 0.8f;
    random.top_k = 8;
    random.top_p = 0.9f;
    random.seed = 7;
    const coli_sampler_params *settings[2] = {&greedy, &random};
    for (int k = 0; k < 2; k++) {
        coli_sampler *s = NULL;
        ck_assert_int_eq(coli_sampler_create(settings[k], &s), COLI_OK);
        int32_t tok = -1;
        ck_assert_int_eq(coli_sample(s, c, &tok), COLI_OK);
        for (size_t b = 0; b < 3; b++) {
            float keep = logits[5];
            logits[5] = BAD[b].v;
            tok = -1;
            ck_assert_int_eq(coli_sample(s, c, &tok), COLI_ERANGE);
            ck_assert_int_eq(tok, -1);
            logits[5] = keep;
        }
        coli_sampler_free(s);
    }
    coli_context_free(c);
    coli_model_free(m);
    done(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = tcase_create("open");
    tcase_add_test(tc, test_good_synthetic_model_opens);
    tcase_add_test(tc, test_missing_dir);
    tcase_add_test(tc, test_missing_config);
    tcase_add_test(tc, test_malformed_config);
    tcase_add_test(tc, test_unknown_architecture);
    tcase_add_test(tc, test_unsupported_rope_scaling);
    tcase_add_test(tc, test_unsupported_activation);
    tcase_add_test(tc, test_wrong_field_type);
    tcase_add_test(tc, test_huge_dimensions);
    tcase_add_test(tc, test_missing_weights_file);
    tcase_add_test(tc, test_truncated_weights);
    tcase_add_test(tc, test_header_beyond_file);
    tcase_add_test(tc, test_offsets_out_of_range);
    tcase_add_test(tc, test_overlapping_tensors);
    tcase_add_test(tc, test_overflowing_shape);
    tcase_add_test(tc, test_unknown_dtype);
    tcase_add_test(tc, test_unsupported_dtype);
    tcase_add_test(tc, test_shape_disagrees_with_config);
    tcase_add_test(tc, test_missing_tensor);
    tcase_add_test(tc, test_indexer_without_its_tensors);
    tcase_add_loop_test(tc, test_config_makes_layer_dense, 0, 2);
    tcase_add_test(tc, test_malformed_tokenizer);
    tcase_add_test(tc, test_index_names_missing_shard);
    tcase_add_test(tc, test_bad_token_ids);
    suite_add_tcase(s, tc);
    TCase *nf = tcase_create("nonfinite");
    tcase_add_loop_test(nf, test_nonfinite_weight_refused, 0, 9);
    tcase_add_loop_test(nf, test_nonfinite_weight_anywhere, 0, (int)(3 * N_VICTIMS));
    tcase_add_loop_test(nf, test_finite_patch_opens, 0, 3);
    tcase_add_test(nf, test_beyond_bf16_refused_as_bf16);
    tcase_add_test(nf, test_overflowing_logit_is_an_error);
    tcase_add_test(nf, test_overflowing_scale_refused_in_both_layouts);
    tcase_add_test(nf, test_sampler_refuses_nonfinite_logits);
    suite_add_tcase(s, nf);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
