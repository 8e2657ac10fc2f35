/* model_config.c - config.json and generation_config.json into coli__config. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/model_config.h"
#include "io/json.h"

char *coli__path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/')
        p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}

/* Reading context: the file name goes into every message. */
typedef struct cfg_reader {
    const char *file;
    const coli__json *root;
    coli__err *err;
} cfg_reader;

/* An integer field. required: missing is an error; else *out keeps def. */
static coli_status get_int(cfg_reader *r, const char *key, int required, int def, int lo, int hi,
                           int *out)
{
    const coli__json *v = coli__json_get(r->root, key);
    if (!v || v->type == COLI_JSON_NULL) {
        if (required)
            return coli__fail(r->err, COLI_EFORMAT, "%s: required field '%s' is missing", r->file, key);
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_NUMBER || !v->is_int)
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be an integer", r->file, key);
    if (v->integer < lo || v->integer > hi)
        return coli__fail(r->err, COLI_ERANGE, "%s: field '%s' = %lld is outside [%d, %d]", r->file,
                          key, (long long)v->integer, lo, hi);
    *out = (int)v->integer;
    return COLI_OK;
}

static coli_status get_num(cfg_reader *r, const coli__json *obj, const char *key, double def,
                           double *out)
{
    const coli__json *v = coli__json_get(obj, key);
    if (!v || v->type == COLI_JSON_NULL) {
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_NUMBER || !isfinite(coli__json_num(v)))
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be a number", r->file, key);
    *out = coli__json_num(v);
    return COLI_OK;
}

static coli_status get_bool(cfg_reader *r, const char *key, int def, int *out)
{
    const coli__json *v = coli__json_get(r->root, key);
    if (!v || v->type == COLI_JSON_NULL) {
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_BOOL)
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be true or false", r->file, key);
    *out = v->boolean;
    return COLI_OK;
}

/* Refuses a boolean option that is set to true: we do not implement it. */
static coli_status refuse_true(cfg_reader *r, const char *key)
{
    int on = 0;
    COLI_TRY(get_bool(r, key, 0, &on));
    if (on)
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: option '%s': true is not supported", r->file,
                          key);
    return COLI_OK;
}

/* rope_theta at the top level, or inside rope_parameters (transformers 5),
 * with rope_scaling null or of the default type. */
static coli_status read_rope(cfg_reader *r, double def_theta, coli__config *c, double *partial)
{
    double theta = def_theta;
    COLI_TRY(get_num(r, r->root, "rope_theta", def_theta, &theta));
    const char *names[2] = {"rope_parameters", "rope_scaling"};
    for (int i = 0; i < 2; i++) {
        const coli__json *rp = coli__json_get(r->root, names[i]);
        if (!rp || rp->type == COLI_JSON_NULL)
            continue;
        if (rp->type != COLI_JSON_OBJECT)
            return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be an object", r->file,
                              names[i]);
        const char *type = coli__json_get_str(rp, "rope_type", NULL);
        if (!type)
            type = coli__json_get_str(rp, "type", "default");
        if (strcmp(type, "default") != 0)
            return coli__fail(r->err, COLI_EUNSUPPORTED,
                              "%s: %s.rope_type '%s' is not supported (only 'default')", r->file,
                              names[i], type);
        COLI_TRY(get_num(r, rp, "rope_theta", theta, &theta));
        COLI_TRY(get_num(r, rp, "partial_rotary_factor", *partial, partial));
    }
    if (!(theta > 0 && theta <= FLT_MAX))
        return coli__fail(r->err, COLI_ERANGE, "%s: rope_theta = %g must be positive and finite as a float",
                          r->file, theta);
    c->rope_theta = theta;
    return COLI_OK;
}

/* eos_token_id may be an integer or a list of integers. */
static coli_status read_eos(cfg_reader *r, coli__config *c)
{
    const coli__json *v = coli__json_get(r->root, "eos_token_id");
    if (!v || v->type == COLI_JSON_NULL)
        return COLI_OK;
    const coli__json *items = v;
    size_t n = 1;
    if (v->type == COLI_JSON_ARRAY) {
        items = v->items;
        n = v->len;
    }
    c->n_eos = 0;
    for (size_t i = 0; i < n; i++) {
        const coli__json *e = &items[i];
        if (e->type != COLI_JSON_NUMBER || !e->is_int || e->integer < 0 || e->integer > INT32_MAX)
            return coli__fail(r->err, COLI_EFORMAT, "%s: eos_token_id must be a non-negative integer",
                              r->file);
        if (c->n_eos < COLI_MAX_EOS)
            c->eos[c->n_eos++] = (int32_t)e->integer;
    }
    return COLI_OK;
}

static coli_status read_bos(cfg_reader *r, coli__config *c)
{
    const coli__json *v = coli__json_get(r->root, "bos_token_id");
    if (!v || v->type == COLI_JSON_NULL)
        return COLI_OK;
    if (v->type != COLI_JSON_NUMBER || !v->is_int || v->integer < 0 || v->integer > INT32_MAX)
        return coli__fail(r->err, COLI_EFORMAT, "%s: bos_token_id must be a non-negative integer",
                          r->file);
    c->bos = (int32_t)v->integer;
    return COLI_OK;
}

#define DIM_MAX (1 << 20)

static coli_status parse_config(cfg_reader *r, coli__config *c)
{
    const coli__json *root = r->root;
    if (root->type != COLI_JSON_OBJECT)
        return coli__fail(r->err, COLI_EFORMAT, "%s: top level must be an object", r->file);

    /* Architecture: "architectures": [name], else model_type. */
    const char *arch = NULL;
    const coli__json *archs = coli__json_get(root, "architectures");
    if (archs && archs->type == COLI_JSON_ARRAY && archs->len > 0 &&
        archs->items[0].type == COLI_JSON_STRING)
        arch = archs->items[0].str;
    const char *mtype = coli__json_get_str(root, "model_type", NULL);
    if (!arch && !mtype)
        return coli__fail(r->err, COLI_EFORMAT, "%s: neither 'architectures' nor 'model_type' is given",
                          r->file);
    if ((arch && strcmp(arch, "Qwen3MoeForCausalLM") == 0) || (!arch && strcmp(mtype, "qwen3_moe") == 0)) {
        c->arch = COLI_ARCH_QWEN3_MOE;
        c->arch_name = "Qwen3MoeForCausalLM";
    } else if ((arch && strcmp(arch, "OlmoeForCausalLM") == 0) || (!arch && strcmp(mtype, "olmoe") == 0)) {
        c->arch = COLI_ARCH_OLMOE;
        c->arch_name = "OlmoeForCausalLM";
    } else if ((arch && strcmp(arch, "MixtralForCausalLM") == 0) || (!arch && strcmp(mtype, "mixtral") == 0)) {
        c->arch = COLI_ARCH_MIXTRAL;
        c->arch_name = "MixtralForCausalLM";
    } else {
        return coli__fail(r->err, COLI_EUNSUPPORTED,
                          "%s: architecture '%s' is not supported (supported: Qwen3MoeForCausalLM, "
                          "OlmoeForCausalLM, MixtralForCausalLM)",
                          r->file, arch ? arch : mtype);
    }

    const char *act = coli__json_get_str(root, "hidden_act", "silu");
    if (strcmp(act, "silu") != 0)
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (only 'silu')",
                          r->file, act);

    COLI_TRY(get_int(r, "hidden_size", 1, 0, 1, DIM_MAX, &c->hidden));
    COLI_TRY(get_int(r, "num_hidden_layers", 1, 0, 1, 4096, &c->n_layers));
    COLI_TRY(get_int(r, "num_attention_heads", 1, 0, 1, 4096, &c->n_heads));
    COLI_TRY(get_int(r, "num_key_value_heads", 0, c->n_heads, 1, 4096, &c->n_kv_heads));
    COLI_TRY(get_int(r, "vocab_size", 1, 0, 1, 1 << 24, &c->vocab));
    COLI_TRY(get_int(r, "max_position_embeddings", 0, 4096, 1, 1 << 24, &c->max_pos));
    if (c->n_heads % c->n_kv_heads != 0)
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)",
                          r->file, c->n_heads, c->n_kv_heads);
    int hd_default = c->hidden / c->n_heads;
    COLI_TRY(get_int(r, "head_dim", 0, hd_default, 1, 65536, &c->head_dim));
    if (c->head_dim == hd_default && c->hidden % c->n_heads != 0 && !coli__json_get(root, "head_dim"))
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: hidden_size %d is not divisible by num_attention_heads %d and no head_dim is given",
                          r->file, c->hidden, c->n_heads);

    /* Products used as matrix sizes must stay far from int overflow. */
    if ((int64_t)c->n_heads * c->head_dim > DIM_MAX || (int64_t)c->n_kv_heads * c->head_dim > DIM_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: num_attention_heads x head_dim (%d x %d) is too large",
                          r->file, c->n_heads, c->head_dim);

    double eps = 1e-6;
    COLI_TRY(get_num(r, root, "rms_norm_eps", c->arch == COLI_ARCH_QWEN3_MOE ? 1e-6 : 1e-5, &eps));
    if (!(eps > 0 && eps <= 1) || (float)eps == 0)
        return coli__fail(r->err, COLI_ERANGE, "%s: rms_norm_eps = %g is outside (0, 1]", r->file, eps);
    c->rms_eps = (float)eps;

    COLI_TRY(get_bool(r, "tie_word_embeddings", c->arch == COLI_ARCH_OLMOE ? 0 : 0, &c->tie_embeddings));
    COLI_TRY(refuse_true(r, "attention_bias"));
    COLI_TRY(refuse_true(r, "mlp_bias"));

    double partial = 1.0;
    COLI_TRY(get_num(r, root, "partial_rotary_factor", 1.0, &partial));
    COLI_TRY(read_rope(r, c->arch == COLI_ARCH_MIXTRAL ? 1e6 : 10000.0, c, &partial));
    if (!(partial > 0 && partial <= 1))
        return coli__fail(r->err, COLI_ERANGE, "%s: partial_rotary_factor must be in (0, 1]", r->file);
    c->rot_dim = (int)(c->head_dim * partial);
    c->rot_dim &= ~1;
    if (c->rot_dim < 2)
        return coli__fail(r->err, COLI_ERANGE, "%s: partial_rotary_factor leaves no rotary dimensions",
                          r->file);

    c->is_moe = calloc((size_t)c->n_layers, 1);
    if (!c->is_moe)
        return coli__fail(r->err, COLI_ENOMEM, "%s: out of memory", r->file);

    switch (c->arch) {
    case COLI_ARCH_QWEN3_MOE: {
        int step = 1;
        /* Published configs say num_experts; transformers 5 writes num_local_experts. */
        COLI_TRY(get_int(r, coli__json_get(root, "num_experts") ? "num_experts" : "num_local_experts", 1, 0,
                         0, 1 << 16, &c->n_experts));
        COLI_TRY(get_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
        COLI_TRY(get_int(r, "moe_intermediate_size", 1, 0, 1, DIM_MAX, &c->moe_inter));
        COLI_TRY(get_int(r, "intermediate_size", 0, 0, 0, DIM_MAX, &c->inter));
        COLI_TRY(get_int(r, "decoder_sparse_step", 0, 1, 0, 4096, &step));
        COLI_TRY(get_bool(r, "norm_topk_prob", 0, &c->norm_topk_prob));
        COLI_TRY(refuse_true(r, "use_sliding_window"));
        c->qk_norm = COLI_QK_NORM_HEAD;
        for (int l = 0; l < c->n_layers; l++)
            c->is_moe[l] = c->n_experts > 0 && step > 0 && (l + 1) % step == 0;
        const coli__json *only = coli__json_get(root, "mlp_only_layers");
        if (only && only->type != COLI_JSON_NULL) {
            if (only->type != COLI_JSON_ARRAY)
                return coli__fail(r->err, COLI_EFORMAT, "%s: mlp_only_layers must be a list", r->file);
            for (size_t i = 0; i < only->len; i++) {
                const coli__json *e = &only->items[i];
                if (e->type != COLI_JSON_NUMBER || !e->is_int || e->integer < 0)
                    return coli__fail(r->err, COLI_EFORMAT,
                                      "%s: mlp_only_layers must hold layer indices", r->file);
                if (e->integer < c->n_layers)
                    c->is_moe[e->integer] = 0;
            }
        }
        break;
    }
    case COLI_ARCH_OLMOE: {
        double clip = 0;
        COLI_TRY(get_int(r, "num_experts", 1, 0, 1, 1 << 16, &c->n_experts));
        COLI_TRY(get_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
        COLI_TRY(get_int(r, "intermediate_size", 1, 0, 1, DIM_MAX, &c->moe_inter));
        COLI_TRY(get_bool(r, "norm_topk_prob", 0, &c->norm_topk_prob));
        COLI_TRY(get_num(r, root, "clip_qkv", 0, &clip));
        if (clip < 0 || clip > FLT_MAX)
            return coli__fail(r->err, COLI_ERANGE, "%s: clip_qkv = %g is outside [0, FLT_MAX]", r->file, clip);
        c->clip_qkv = (float)clip;
        c->qk_norm = COLI_QK_NORM_FULL;
        memset(c->is_moe, 1, (size_t)c->n_layers);
        break;
    }
    case COLI_ARCH_MIXTRAL:
        COLI_TRY(get_int(r, "num_local_experts", 1, 0, 1, 1 << 16, &c->n_experts));
        COLI_TRY(get_int(r, "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k));
        COLI_TRY(get_int(r, "intermediate_size", 1, 0, 1, DIM_MAX, &c->moe_inter));
        COLI_TRY(get_int(r, "sliding_window", 0, 0, 0, 1 << 24, &c->sliding_window));
        c->norm_topk_prob = 1;
        c->qk_norm = COLI_QK_NORM_NONE;
        memset(c->is_moe, 1, (size_t)c->n_layers);
        break;
    }
    if (c->n_experts > 0 && c->top_k > c->n_experts)
        return coli__fail(r->err, COLI_ERANGE,
                          "%s: num_experts_per_tok (%d) exceeds the number of experts (%d)", r->file,
                          c->top_k, c->n_experts);
    c->n_moe_layers = 0;
    for (int l = 0; l < c->n_layers; l++) {
        c->n_moe_layers += c->is_moe[l];
        if (!c->is_moe[l] && c->inter <= 0)
            return coli__fail(r->err, COLI_EFORMAT,
                              "%s: layer %d is dense but intermediate_size is not given", r->file, l);
    }
    c->bos = -1;
    COLI_TRY(read_bos(r, c));
    COLI_TRY(read_eos(r, c));
    return COLI_OK;
}

static coli_status load_json(const char *dir, const char *name, int required, coli__json_doc **doc,
                             char **path, coli__err *err)
{
    *doc = NULL;
    *path = coli__path_join(dir, name);
    if (!*path)
        return coli__fail(err, COLI_ENOMEM, "out of memory");
    coli_status st = coli__json_parse_file_max(*path, COLI__JSON_CONFIG_MAX, doc, err);
    if (st == COLI_ENOENT && !required) {
        coli__err_clear(err);
        return COLI_OK;
    }
    return st;
}

coli_status coli__config_load(const char *dir, coli__config *cfg, coli__err *err)
{
    memset(cfg, 0, sizeof *cfg);
    coli__json_doc *doc = NULL;
    char *path = NULL;
    coli_status st = load_json(dir, "config.json", 1, &doc, &path, err);
    if (st == COLI_OK) {
        cfg_reader r = {path, coli__json_root(doc), err};
        st = parse_config(&r, cfg);
    }
    coli__json_free(doc);
    free(path);
    doc = NULL;
    path = NULL;
    /* generation_config.json overrides bos/eos where it gives them. */
    if (st == COLI_OK)
        st = load_json(dir, "generation_config.json", 0, &doc, &path, err);
    if (st == COLI_OK && doc) {
        cfg_reader r = {path, coli__json_root(doc), err};
        if (r.root->type != COLI_JSON_OBJECT)
            st = coli__fail(err, COLI_EFORMAT, "%s: top level must be an object", path);
        if (st == COLI_OK)
            st = read_bos(&r, cfg);
        if (st == COLI_OK)
            st = read_eos(&r, cfg);
    }
    coli__json_free(doc);
    free(path);
    if (st != COLI_OK)
        coli__config_free(cfg);
    return st;
}

void coli__config_free(coli__config *cfg)
{
    if (!cfg)
        return;
    free(cfg->is_moe);
    cfg->is_moe = NULL;
}
