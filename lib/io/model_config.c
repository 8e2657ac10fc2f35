/* model_config.c - config.json and generation_config.json into coli__config. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/model_config.h"
#include "io/config_read.h"
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

/* YaRN's fields of rope object rp (docs/formats.md, "RoPE"). */
static coli_status read_yarn(coli__cfg_reader *r, const coli__json *rp, const char *field, coli__config *c)
{
    coli__rope_opts *y = &c->rope;
    double orig = 0;
    y->yarn = 1;
    y->truncate = 1;
    COLI_TRY(coli__cfg_num(r, rp, "factor", 0, &y->factor));
    COLI_TRY(coli__cfg_num(r, rp, "original_max_position_embeddings", 0, &orig));
    COLI_TRY(coli__cfg_num(r, rp, "beta_fast", 0, &y->beta_fast));
    COLI_TRY(coli__cfg_num(r, rp, "beta_slow", 0, &y->beta_slow));
    COLI_TRY(coli__cfg_num(r, rp, "mscale", 0, &y->mscale));
    COLI_TRY(coli__cfg_num(r, rp, "mscale_all_dim", 0, &y->mscale_all_dim));
    COLI_TRY(coli__cfg_num(r, rp, "attention_factor", 0, &y->attn_factor));
    const coli__json *t = coli__json_get(rp, "truncate");
    if (t && t->type == COLI_JSON_BOOL)
        y->truncate = t->boolean;
    if (!(orig >= 1 && orig <= (1 << 24) && orig == (double)(int)orig))
        return coli__fail(r->err, COLI_EFORMAT, "%s: %s.original_max_position_embeddings must be a positive integer",
                          r->file, field);
    y->orig_max = (int)orig;
    /* transformers: a missing factor is the ratio of the two lengths; beta_fast and beta_slow
     * missing or 0 are 32 and 1 */
    if (y->factor == 0)
        y->factor = (double)c->max_pos / orig;
    y->beta_fast = y->beta_fast ? y->beta_fast : 32;
    y->beta_slow = y->beta_slow ? y->beta_slow : 1;
    if (!(y->factor >= 1 && y->factor <= FLT_MAX))
        return coli__fail(r->err, COLI_ERANGE, "%s: %s.factor = %g must be at least 1", r->file, field, y->factor);
    if (!(y->beta_fast > 0 && y->beta_slow > 0 && y->mscale >= 0 && y->mscale_all_dim >= 0 && y->attn_factor >= 0))
        return coli__fail(r->err, COLI_ERANGE,
                          "%s: %s: beta_fast, beta_slow must be positive; mscale, mscale_all_dim, attention_factor "
                          "not negative",
                          r->file, field);
    return COLI_OK;
}

/* rope_theta at the top level, or inside rope_parameters (transformers 5),
 * with rope_scaling null or of the default or yarn type. */
static coli_status read_rope(coli__cfg_reader *r, double def_theta, coli__config *c, double *partial)
{
    double theta = def_theta;
    COLI_TRY(coli__cfg_num(r, r->root, "rope_theta", def_theta, &theta));
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
        if (strcmp(type, "yarn") == 0)
            COLI_TRY(read_yarn(r, rp, names[i], c));
        else if (strcmp(type, "default") != 0)
            return coli__fail(r->err, COLI_EUNSUPPORTED,
                              "%s: %s.rope_type '%s' is not supported (only 'default' and 'yarn')", r->file,
                              names[i], type);
        COLI_TRY(coli__cfg_num(r, rp, "rope_theta", theta, &theta));
        COLI_TRY(coli__cfg_num(r, rp, "partial_rotary_factor", *partial, partial));
    }
    if (!(theta > 0 && theta <= FLT_MAX))
        return coli__fail(r->err, COLI_ERANGE, "%s: rope_theta = %g must be positive and finite as a float",
                          r->file, theta);
    c->rope_theta = theta;
    return COLI_OK;
}

/* Each pair's inverse frequency, in binary32 as transformers computes it
 * (docs/formats.md, "RoPE"), and the factor of the tables. */
static coli_status rope_freqs(coli__cfg_reader *r, coli__config *c)
{
    coli__rope_opts *y = &c->rope;
    const int rot = c->rot_dim, half = rot / 2;
    y->inv = malloc((size_t)half * sizeof(float));
    if (!y->inv)
        return coli__fail(r->err, COLI_ENOMEM, "%s: out of memory", r->file);
    y->table_factor = 1.0f;
    double lo = 0, hi = 0;
    if (y->yarn) {
        const double base = c->rope_theta, two_pi = 2 * 3.14159265358979323846;
        lo = rot * log(y->orig_max / (y->beta_fast * two_pi)) / (2 * log(base));
        hi = rot * log(y->orig_max / (y->beta_slow * two_pi)) / (2 * log(base));
        if (y->truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        lo = lo > 0 ? lo : 0;
        hi = hi < rot - 1 ? hi : rot - 1;
        if (lo == hi)
            hi += 0.001;
        double af = y->attn_factor;
        if (af == 0)
            af = y->mscale && y->mscale_all_dim ? coli__yarn_mscale(y->factor, y->mscale) /
                                                      coli__yarn_mscale(y->factor, y->mscale_all_dim)
                                                : coli__yarn_mscale(y->factor, 1.0);
        y->table_factor = (float)af;
    }
    for (int i = 0; i < half; i++) {
        float pf = powf((float)c->rope_theta, (float)(2 * i) / (float)rot);
        float extra = 1.0f / pf;
        if (!y->yarn) {
            y->inv[i] = extra;
            continue;
        }
        float inter = 1.0f / ((float)y->factor * pf);
        float ramp = ((float)i - (float)lo) / (float)(hi - lo);
        ramp = ramp < 0 ? 0.0f : ramp > 1 ? 1.0f : ramp;
        float ef = 1.0f - ramp; /* how much of the unscaled frequency is kept */
        y->inv[i] = inter * (1.0f - ef) + extra * ef;
    }
    return COLI_OK;
}

/* eos_token_id may be an integer or a list of integers. */
static coli_status read_eos(coli__cfg_reader *r, coli__config *c)
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

static coli_status read_bos(coli__cfg_reader *r, coli__config *c)
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

/* "Qwen3MoeForCausalLM, OlmoeForCausalLM, ..." from the table. */
static void family_list(char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (size_t i = 0; i < coli__n_families && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? ", " : "", coli__families[i].arch);
}

/* quantization_config: absent, or FP8 e4m3 in blocks (DeepSeek-V3's). */
static coli_status read_quant(coli__cfg_reader *r, coli__config *c)
{
    const coli__json *q = coli__json_get(r->root, "quantization_config");
    if (!q || q->type == COLI_JSON_NULL)
        return COLI_OK;
    if (q->type != COLI_JSON_OBJECT)
        return coli__fail(r->err, COLI_EFORMAT, "%s: quantization_config must be an object", r->file);
    const char *method = coli__json_get_str(q, "quant_method", NULL);
    if (!method)
        return coli__fail(r->err, COLI_EFORMAT, "%s: quantization_config.quant_method is not given", r->file);
    if (strcmp(method, "fp8") != 0)
        return coli__fail(r->err, COLI_EUNSUPPORTED,
                          "%s: quantization_config.quant_method '%s' is not supported (only 'fp8')", r->file, method);
    const char *fmt = coli__json_get_str(q, "fmt", "e4m3");
    if (strcmp(fmt, "e4m3") != 0)
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: quantization_config.fmt '%s' is not supported (only 'e4m3')",
                          r->file, fmt);
    const coli__json *b = coli__json_get(q, "weight_block_size");
    int dims[2];
    if (!b || b->type != COLI_JSON_ARRAY || b->len != 2)
        return coli__fail(r->err, COLI_EFORMAT, "%s: quantization_config.weight_block_size must be [rows, cols]",
                          r->file);
    for (int i = 0; i < 2; i++) {
        const coli__json *e = &b->items[i];
        if (e->type != COLI_JSON_NUMBER || !e->is_int || e->integer < 1 || e->integer > (1 << 16))
            return coli__fail(r->err, COLI_EFORMAT,
                              "%s: quantization_config.weight_block_size must hold two positive integers", r->file);
        dims[i] = (int)e->integer;
    }
    c->fp8_block_rows = dims[0];
    c->fp8_block_cols = dims[1];
    return COLI_OK;
}

/* The fields every family has; the family's row reads its own. */
static coli_status parse_config(coli__cfg_reader *r, coli__config *c)
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
    const coli__family *fam = coli__family_find(arch, mtype);
    if (!fam) {
        char list[256];
        family_list(list, sizeof list);
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)",
                          r->file, arch ? arch : mtype, list);
    }
    c->family = fam;
    c->arch_name = fam->arch;

    const char *act = coli__json_get_str(root, "hidden_act", "silu");
    if (strcmp(act, "silu") != 0)
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (only 'silu')",
                          r->file, act);

    COLI_TRY(coli__cfg_int(r, "hidden_size", 1, 0, 1, COLI__DIM_MAX, &c->hidden));
    COLI_TRY(coli__cfg_int(r, "num_hidden_layers", 1, 0, 1, 4096, &c->n_layers));
    c->n_trunk = c->n_layers;
    COLI_TRY(coli__cfg_int(r, "num_attention_heads", 1, 0, 1, 4096, &c->n_heads));
    COLI_TRY(coli__cfg_int(r, "num_key_value_heads", 0, c->n_heads, 1, 4096, &c->n_kv_heads));
    COLI_TRY(coli__cfg_int(r, "vocab_size", 1, 0, 1, 1 << 24, &c->vocab));
    COLI_TRY(coli__cfg_int(r, "max_position_embeddings", 0, 4096, 1, 1 << 24, &c->max_pos));
    if (c->n_heads % c->n_kv_heads != 0)
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)",
                          r->file, c->n_heads, c->n_kv_heads);
    int hd_default = c->hidden / c->n_heads;
    COLI_TRY(coli__cfg_int(r, "head_dim", 0, hd_default, 1, 65536, &c->head_dim));
    if (c->head_dim == hd_default && c->hidden % c->n_heads != 0 && !coli__json_get(root, "head_dim"))
        return coli__fail(r->err, COLI_EFORMAT,
                          "%s: hidden_size %d is not divisible by num_attention_heads %d and no head_dim is given",
                          r->file, c->hidden, c->n_heads);

    /* Products used as matrix sizes must stay far from int overflow. */
    if ((int64_t)c->n_heads * c->head_dim > COLI__DIM_MAX || (int64_t)c->n_kv_heads * c->head_dim > COLI__DIM_MAX)
        return coli__fail(r->err, COLI_ERANGE, "%s: num_attention_heads x head_dim (%d x %d) is too large",
                          r->file, c->n_heads, c->head_dim);

    double eps = 1e-6;
    COLI_TRY(coli__cfg_num(r, root, "rms_norm_eps", fam->rms_eps, &eps));
    if (!(eps > 0 && eps <= 1) || (float)eps == 0)
        return coli__fail(r->err, COLI_ERANGE, "%s: rms_norm_eps = %g is outside (0, 1]", r->file, eps);
    c->rms_eps = (float)eps;

    COLI_TRY(coli__cfg_bool(r, "tie_word_embeddings", 0, &c->tie_embeddings));
    /* attention_bias means different things in each family: each reads it */
    COLI_TRY(coli__cfg_refuse_true(r, "mlp_bias"));

    double partial = fam->partial_rotary > 0 ? fam->partial_rotary : 1.0;
    COLI_TRY(coli__cfg_num(r, root, "partial_rotary_factor", partial, &partial));
    COLI_TRY(read_rope(r, fam->rope_theta, c, &partial));
    if (!(partial > 0 && partial <= 1))
        return coli__fail(r->err, COLI_ERANGE, "%s: partial_rotary_factor must be in (0, 1]", r->file);
    c->rot_dim = (int)(c->head_dim * partial);
    c->rot_dim &= ~1;
    if (c->rot_dim < 2)
        return coli__fail(r->err, COLI_ERANGE, "%s: partial_rotary_factor leaves no rotary dimensions",
                          r->file);

    c->router.n_group = c->router.topk_group = 1;
    c->router.scale = 1.0f;
    c->kv_heads = c->n_kv_heads;
    c->kv_kdim = c->kv_vdim = c->head_dim;
    c->is_moe = calloc((size_t)c->n_layers, 1);
    if (!c->is_moe)
        return coli__fail(r->err, COLI_ENOMEM, "%s: out of memory", r->file);
    COLI_TRY(fam->parse(r, c));
    COLI_TRY(rope_freqs(r, c));
    COLI_TRY(read_quant(r, c));
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
        coli__cfg_reader r = {path, coli__json_root(doc), err};
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
        coli__cfg_reader r = {path, coli__json_root(doc), err};
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

coli_status coli__config_add_mtp(coli__config *cfg, const char *dir, coli__err *err)
{
    if (cfg->n_layers > cfg->n_trunk)
        return COLI_OK;
    if (cfg->n_mtp < 1 || cfg->n_experts < 1)
        return coli__fail(err, COLI_EUNSUPPORTED,
                          "%s/config.json: the model has no MTP layer (num_nextn_predict_layers is %d)", dir,
                          cfg->n_mtp);
    unsigned char *f = realloc(cfg->is_moe, (size_t)cfg->n_trunk + 1);
    if (!f)
        return coli__fail(err, COLI_ENOMEM, "out of memory");
    cfg->is_moe = f;
    /* past first_k_dense_replace, so a MoE layer like the ones before it */
    f[cfg->n_trunk] = 1;
    cfg->n_layers = cfg->n_trunk + 1;
    cfg->n_moe_layers++;
    return COLI_OK;
}

void coli__config_free(coli__config *cfg)
{
    if (!cfg)
        return;
    free(cfg->is_moe);
    cfg->is_moe = NULL;
    free(cfg->attn.dsa.full);
    cfg->attn.dsa.full = NULL;
    free(cfg->rope.inv);
    cfg->rope.inv = NULL;
}
