/* weights.c - from mapped tensors to the matrices the forward pass reads.
 *
 * Names follow the published checkpoints (model.layers.N.self_attn.q_proj,
 * mlp.experts.E.gate_proj, Mixtral's block_sparse_moe.experts.E.w1/w2/w3).
 * Every shape is checked against config.json before anything is used. In
 * AUTO format matrices point into the mapping (no copy); F32 widens and BF16
 * narrows into owned memory. Norm vectors are always widened to f32. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct loader {
    coli__weights *w;
    const coli__config *cfg;
    const coli__tensor_set *ts;
    coli_weight_format fmt;
    coli__err *err;
} loader;

static void *own(loader *L, size_t bytes)
{
    coli__weights *w = L->w;
    if (w->n_owned == w->cap_owned) {
        size_t cap = w->cap_owned ? w->cap_owned * 2 : 256;
        void **p = realloc(w->owned, cap * sizeof *p);
        if (!p)
            return NULL;
        w->owned = p;
        w->cap_owned = cap;
    }
    void *m = malloc(bytes ? bytes : 1);
    if (m)
        w->owned[w->n_owned++] = m;
    return m;
}

/* The tensor called name, checked to be [d0] (d1 < 0) or [d0, d1]. */
static coli_status find(loader *L, const char *name, int64_t d0, int64_t d1, const coli__tensor **out)
{
    const coli__tensor *t = coli__st_find(L->ts, name);
    if (!t)
        return coli__fail(L->err, COLI_ENOENT, "tensor '%s' is missing from the checkpoint", name);
    int ndim = d1 >= 0 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char got[128] = "";
        size_t n = 0;
        for (int i = 0; i < t->ndim && n < sizeof got - 24; i++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (ndim == 2)
            return coli__fail(L->err, COLI_EFORMAT,
                              "%s: tensor '%s' has shape [%s], config.json implies [%lld, %lld]", t->file,
                              name, got, (long long)d0, (long long)d1);
        return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' has shape [%s], config.json implies [%lld]",
                          t->file, name, got, (long long)d0);
    }
    if (t->dtype == COLI_DT_OTHER)
        return coli__fail(L->err, COLI_EUNSUPPORTED,
                          "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported", t->file,
                          name, t->dtype_name);
    *out = t;
    return COLI_OK;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* Tensor data is only as aligned as the file's offsets; a misaligned tensor
 * is copied so that kernels may load whole elements. */
static const void *aligned(loader *L, const coli__tensor *t)
{
    size_t a = coli__dtype_size(t->dtype);
    if (a == 0 || (uintptr_t)t->data % a == 0)
        return t->data;
    void *p = own(L, t->nbytes);
    if (p)
        memcpy(p, t->data, t->nbytes);
    return p;
}

static coli_status load_mat(loader *L, coli__mat *m, const char *name, int rows, int cols, int active)
{
    const coli__tensor *t = NULL;
    COLI_TRY(find(L, name, rows, cols, &t));
    size_t n = (size_t)rows * (size_t)cols;
    m->rows = rows;
    m->cols = cols;
    m->dt = t->dtype;
    m->data = aligned(L, t);
    if (!m->data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    if (L->fmt == COLI_WEIGHTS_F32 && t->dtype != COLI_DT_F32) {
        float *p = own(L, n * sizeof(float));
        if (!p)
            return coli__fail(L->err, COLI_ENOMEM, "out of memory widening tensor '%s'", name);
        for (int r = 0; r < rows; r++)
            coli__mat_row(m, r, p + (size_t)r * (size_t)cols);
        m->data = p;
        m->dt = COLI_DT_F32;
    } else if (L->fmt == COLI_WEIGHTS_BF16 && t->dtype != COLI_DT_BF16) {
        uint16_t *p = own(L, n * sizeof(uint16_t));
        float *row = malloc((size_t)cols * sizeof(float));
        if (!p || !row) {
            free(row);
            return coli__fail(L->err, COLI_ENOMEM, "out of memory narrowing tensor '%s'", name);
        }
        for (int r = 0; r < rows; r++) {
            coli__mat_row(m, r, row);
            for (int c = 0; c < cols; c++)
                p[(size_t)r * (size_t)cols + (size_t)c] = f32_to_bf16(row[c]);
        }
        free(row);
        m->data = p;
        m->dt = COLI_DT_BF16;
    }
    coli__weights *w = L->w;
    w->bytes += n * (m->dt == COLI_DT_F32 ? 4 : 2);
    w->stored_bytes += t->nbytes;
    w->n_params_total += (int64_t)n;
    if (active) {
        w->n_params_active += (int64_t)n;
        w->stored_active_bytes += t->nbytes;
    }
    w->n_f32 += m->dt == COLI_DT_F32;
    w->n_bf16 += m->dt == COLI_DT_BF16;
    w->n_f16 += m->dt == COLI_DT_F16;
    return COLI_OK;
}

static coli_status load_vec(loader *L, float **out, const char *name, int n)
{
    const coli__tensor *t = NULL;
    COLI_TRY(find(L, name, n, -1, &t));
    float *p = own(L, (size_t)n * sizeof(float));
    if (!p)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory loading tensor '%s'", name);
    coli__mat m = {1, n, t->dtype, aligned(L, t)};
    if (!m.data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    coli__mat_row(&m, 0, p);
    *out = p;
    L->w->bytes += (uint64_t)n * sizeof(float);
    L->w->n_params_total += n;
    L->w->n_params_active += n;
    L->w->n_vec_params += n;
    L->w->n_vec_active += n;
    return COLI_OK;
}

#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)

static coli_status load_layer(loader *L, int l)
{
    const coli__config *c = L->cfg;
    coli__layer *ly = &L->w->layers[l];
    char name[256];
    const int H = c->hidden, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    const char *p = "model.layers";

    COLI_TRY(load_vec(L, &ly->attn_norm, NAME("%s.%d.input_layernorm.weight", p, l), H));
    COLI_TRY(load_vec(L, &ly->ffn_norm, NAME("%s.%d.post_attention_layernorm.weight", p, l), H));
    COLI_TRY(load_mat(L, &ly->wq, NAME("%s.%d.self_attn.q_proj.weight", p, l), q, H, 1));
    COLI_TRY(load_mat(L, &ly->wk, NAME("%s.%d.self_attn.k_proj.weight", p, l), kv, H, 1));
    COLI_TRY(load_mat(L, &ly->wv, NAME("%s.%d.self_attn.v_proj.weight", p, l), kv, H, 1));
    COLI_TRY(load_mat(L, &ly->wo, NAME("%s.%d.self_attn.o_proj.weight", p, l), H, q, 1));
    if (c->qk_norm == COLI_QK_NORM_HEAD) {
        COLI_TRY(load_vec(L, &ly->q_norm, NAME("%s.%d.self_attn.q_norm.weight", p, l), c->head_dim));
        COLI_TRY(load_vec(L, &ly->k_norm, NAME("%s.%d.self_attn.k_norm.weight", p, l), c->head_dim));
    } else if (c->qk_norm == COLI_QK_NORM_FULL) {
        COLI_TRY(load_vec(L, &ly->q_norm, NAME("%s.%d.self_attn.q_norm.weight", p, l), q));
        COLI_TRY(load_vec(L, &ly->k_norm, NAME("%s.%d.self_attn.k_norm.weight", p, l), kv));
    }

    ly->is_moe = c->is_moe[l];
    if (!ly->is_moe) {
        COLI_TRY(load_mat(L, &ly->gate, NAME("%s.%d.mlp.gate_proj.weight", p, l), c->inter, H, 1));
        COLI_TRY(load_mat(L, &ly->up, NAME("%s.%d.mlp.up_proj.weight", p, l), c->inter, H, 1));
        COLI_TRY(load_mat(L, &ly->down, NAME("%s.%d.mlp.down_proj.weight", p, l), H, c->inter, 1));
        return COLI_OK;
    }
    const int E = c->n_experts, I = c->moe_inter;
    int mixtral = c->arch == COLI_ARCH_MIXTRAL;
    const char *blk = mixtral ? "block_sparse_moe" : "mlp";
    COLI_TRY(load_mat(L, &ly->router, NAME("%s.%d.%s.gate.weight", p, l, blk), E, H, 1));
    ly->e_gate = calloc((size_t)E * 3, sizeof(coli__mat));
    if (!ly->e_gate)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory for layer %d experts", l);
    ly->e_up = ly->e_gate + E;
    ly->e_down = ly->e_gate + 2 * E;
    /* An expert counts as active with probability top_k / n_experts. */
    for (int e = 0; e < E; e++) {
        int act = 0;
        COLI_TRY(load_mat(L, &ly->e_gate[e],
                          mixtral ? NAME("%s.%d.%s.experts.%d.w1.weight", p, l, blk, e)
                                  : NAME("%s.%d.%s.experts.%d.gate_proj.weight", p, l, blk, e),
                          I, H, act));
        COLI_TRY(load_mat(L, &ly->e_up[e],
                          mixtral ? NAME("%s.%d.%s.experts.%d.w3.weight", p, l, blk, e)
                                  : NAME("%s.%d.%s.experts.%d.up_proj.weight", p, l, blk, e),
                          I, H, act));
        COLI_TRY(load_mat(L, &ly->e_down[e],
                          mixtral ? NAME("%s.%d.%s.experts.%d.w2.weight", p, l, blk, e)
                                  : NAME("%s.%d.%s.experts.%d.down_proj.weight", p, l, blk, e),
                          H, I, act));
    }
    L->w->n_params_active += (int64_t)c->top_k * 3 * I * H;
    /* Experts of one layer share a dtype in every checkpoint we know. */
    L->w->stored_active_bytes += (uint64_t)c->top_k * 3 * (uint64_t)I * (uint64_t)H *
                                 coli__dtype_size(coli__st_find(L->ts, name)->dtype);
    return COLI_OK;
}

coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__tensor_set *ts,
                               coli_weight_format fmt, coli__err *err)
{
    memset(w, 0, sizeof *w);
    loader L = {w, cfg, ts, fmt, err};
    const int H = cfg->hidden, V = cfg->vocab;
    w->layers = calloc((size_t)cfg->n_layers, sizeof *w->layers);
    if (!w->layers)
        return coli__fail(err, COLI_ENOMEM, "out of memory for %d layers", cfg->n_layers);
    COLI_TRY(load_mat(&L, &w->embed, "model.embed_tokens.weight", V, H, 0));
    /* Only one embedding row is read per token. */
    w->n_params_active += H;
    w->stored_active_bytes += (uint64_t)H * coli__dtype_size(coli__st_find(ts, "model.embed_tokens.weight")->dtype);
    for (int l = 0; l < cfg->n_layers; l++)
        COLI_TRY(load_layer(&L, l));
    COLI_TRY(load_vec(&L, &w->final_norm, "model.norm.weight", H));
    if (cfg->tie_embeddings && !coli__st_find(ts, "lm_head.weight")) {
        w->lm_head = w->embed;
        /* The output layer reads the whole matrix, the embedding row included. */
        w->n_params_active += (int64_t)V * H - H;
        w->stored_active_bytes += (uint64_t)(V - 1) * (uint64_t)H *
                                  coli__dtype_size(coli__st_find(ts, "model.embed_tokens.weight")->dtype);
    } else {
        COLI_TRY(load_mat(&L, &w->lm_head, "lm_head.weight", V, H, 1));
    }
    return COLI_OK;
}

void coli__weights_free(coli__weights *w, const coli__config *cfg)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_owned; i++)
        free(w->owned[i]);
    free(w->owned);
    if (w->layers && cfg)
        for (int l = 0; l < cfg->n_layers; l++)
            free(w->layers[l].e_gate);
    free(w->layers);
    memset(w, 0, sizeof *w);
}
