/* model.c - opening a model directory, model info, tokenizer calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/sized.h"
#include "store/container.h"
#include "cpu/cpu.h"
#include "cpu/cpusel.h"
#include "decoder/kv.h"
#include "io/json.h"
#include "model/model.h"
#include "decoder/pieces.h"
#include "store/store.h"

/* Once open, a model is shared by threads: failures of calls on it (tokenize,
 * context creation...) go to a per-thread message, tagged with the model it
 * is about, instead of the model's own buffer. */
static _Thread_local struct {
    const coli_model *m;
    coli__err err;
} tl_err;

coli__err *coli__model_err(const coli_model *m)
{
    tl_err.m = m;
    coli__err_clear(&tl_err.err);
    return &tl_err.err;
}

/* Fails the model: the message goes to the handle and to the log. */
coli_status coli__model_fail(coli_model *m, coli_status st)
{
    coli__log(&m->opts.log, COLI_LOG_ERROR, "%s", m->err.msg);
    return st;
}

/* eos from tokenizer_config.json when the config files name none. */
static coli_status eos_from_tokenizer_config(coli_model *m)
{
    char *path = coli__path_join(m->dir, "tokenizer_config.json");
    if (!path)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    coli__json_doc *doc = NULL;
    coli_status st = coli__json_parse_file(path, &doc, &m->err);
    free(path);
    if (st == COLI_ENOENT) {
        coli__err_clear(&m->err);
        return COLI_OK;
    }
    if (st != COLI_OK)
        return st;
    const coli__json *e = coli__json_get(coli__json_root(doc), "eos_token");
    const char *s = NULL;
    if (e && e->type == COLI_JSON_STRING)
        s = e->str;
    else if (e && e->type == COLI_JSON_OBJECT)
        s = coli__json_get_str(e, "content", NULL);
    int32_t id = s ? coli__tok_find(m->tok, s) : -1;
    if (id >= 0)
        m->cfg.eos[m->cfg.n_eos++] = id;
    coli__json_free(doc);
    return COLI_OK;
}

/* Chat templates and special token texts, for coli_model_chat_template and
 * coli_model_special_text. A template is at most this long. */
#define CHAT_TEMPLATE_MAX ((size_t)1 << 20)

static coli_status keep_template(coli_model *m, const char *what, const char *s, size_t n)
{
    if (n > CHAT_TEMPLATE_MAX)
        return coli__fail(&m->err, COLI_EFORMAT, "%s: the chat template has %zu bytes, more than %zu", what, n,
                          CHAT_TEMPLATE_MAX);
    m->chat_template = malloc(n + 1);
    if (!m->chat_template)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    memcpy(m->chat_template, s, n);
    m->chat_template[n] = '\0';
    return COLI_OK;
}

static coli_status keep_special(coli_model *m, const char *name, const char *text)
{
    char **p = realloc(m->special, (m->n_special + 1) * 2 * sizeof *p);
    if (!p)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    m->special = p;
    p[2 * m->n_special] = strdup(name);
    p[2 * m->n_special + 1] = strdup(text);
    m->n_special++;
    if (!p[2 * m->n_special - 2] || !p[2 * m->n_special - 1])
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    return COLI_OK;
}

/* chat_template.jinja in the model directory, if there is one. */
static coli_status template_file(coli_model *m)
{
    char *path = coli__path_join(m->dir, "chat_template.jinja");
    if (!path)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    FILE *f = fopen(path, "rb");
    coli_status st = COLI_OK;
    if (f) {
        char *buf = malloc(CHAT_TEMPLATE_MAX + 1);
        size_t n = buf ? fread(buf, 1, CHAT_TEMPLATE_MAX + 1, f) : 0;
        if (!buf)
            st = coli__fail(&m->err, COLI_ENOMEM, "out of memory");
        else if (ferror(f))
            st = coli__fail(&m->err, COLI_EIO, "%s: read error", path);
        else
            st = keep_template(m, path, buf, n);
        free(buf);
        fclose(f);
    }
    free(path);
    return st;
}

/* The chat template and the *_token texts of tokenizer_config.json. */
static coli_status chat_from_tokenizer_config(coli_model *m)
{
    char *path = coli__path_join(m->dir, "tokenizer_config.json");
    if (!path)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    coli__json_doc *doc = NULL;
    coli_status st = coli__json_parse_file_max(path, COLI__JSON_TOKENIZER_MAX, &doc, &m->err);
    if (st == COLI_ENOENT) {
        coli__err_clear(&m->err);
        free(path);
        return template_file(m);
    }
    if (st != COLI_OK) {
        free(path);
        return st;
    }
    const coli__json *root = coli__json_root(doc);
    const coli__json *t = coli__json_get(root, "chat_template");
    if (t && t->type == COLI_JSON_STRING) {
        st = keep_template(m, path, t->str, t->len);
    } else if (t && t->type == COLI_JSON_ARRAY) {
        for (uint32_t i = 0; i < t->len && st == COLI_OK && !m->chat_template; i++) {
            const char *name = coli__json_get_str(&t->items[i], "name", NULL);
            const coli__json *body = coli__json_get(&t->items[i], "template");
            if (name && strcmp(name, "default") == 0 && body && body->type == COLI_JSON_STRING)
                st = keep_template(m, path, body->str, body->len);
        }
    }
    for (uint32_t i = 0; root->type == COLI_JSON_OBJECT && i < root->len && st == COLI_OK; i++) {
        const coli__json *k = coli__json_key(root, i), *v = &root->items[i];
        if (k->len < 6 || strcmp(k->str + k->len - 6, "_token") != 0)
            continue;
        const char *text = v->type == COLI_JSON_STRING ? v->str : coli__json_get_str(v, "content", NULL);
        if (text)
            st = keep_special(m, k->str, text);
    }
    coli__json_free(doc);
    free(path);
    if (st == COLI_OK && !m->chat_template)
        st = template_file(m);
    return st;
}

/* Which format each kind of matrix ended up in (layer 0 speaks for all). */
static void describe_weights(coli_model *m)
{
    const coli__weights *w = &m->w;
    const coli__layer *ly = &w->layers[0];
    int moe = -1, dense = -1;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        if (m->w.layers[l].is_moe && moe < 0)
            moe = l;
        if (!m->w.layers[l].is_moe && dense < 0)
            dense = l;
    }
    size_t n = (size_t)snprintf(m->weights_detail, sizeof m->weights_detail, "attention %s", coli__dtype_name(ly->wq.dt));
    if (moe >= 0 && n < sizeof m->weights_detail)
        n += (size_t)snprintf(m->weights_detail + n, sizeof m->weights_detail - n, ", experts %s, router %s",
                              coli__dtype_name(w->layers[moe].e_gate[0].dt), coli__dtype_name(w->layers[moe].router.dt));
    if (dense >= 0 && n < sizeof m->weights_detail)
        n += (size_t)snprintf(m->weights_detail + n, sizeof m->weights_detail - n, ", dense mlp %s",
                              coli__dtype_name(w->layers[dense].gate.dt));
    if (n < sizeof m->weights_detail)
        n += (size_t)snprintf(m->weights_detail + n, sizeof m->weights_detail - n,
                              ", embedding %s, output %s, norms f32", coli__dtype_name(w->embed.dt), coli__dtype_name(w->lm_head.dt));
    /* docs/formats.md, "The x16 layout" */
    const coli__mat *probe[] = {&ly->wq, moe >= 0 ? &w->layers[moe].e_gate[0] : &ly->wq, &w->lm_head};
    int x16 = 0;
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++)
        x16 |= coli__dtype_is_quant(probe[i]->dt) && probe[i]->q.layout == COLI__QL_X16;
    if (x16 && n < sizeof m->weights_detail)
        snprintf(m->weights_detail + n, sizeof m->weights_detail - n, "; x16 layout for the CPU");
}

/* A converted model: the weights are mapped, nothing is converted; the
 * store decides where experts live. */
static coli_status open_container(coli_model *m, const char *dir)
{
    COLI_TRY(coli__cont_open(dir, &m->cont, &m->err));
    const coli__container *c = m->cont;
    if (m->opts.weights != COLI_WEIGHTS_AUTO && m->opts.weights != c->weights)
        return coli__fail(&m->err, COLI_EINVAL,
                          "COLI_OPT_WEIGHTS asks for %s, but %s holds %s weights; leave it at auto or convert again",
                          coli_weight_format_name((coli_weight_format)m->opts.weights), c->path,
                          coli_weight_format_name((coli_weight_format)c->weights));
    if (m->opts.weights == COLI_WEIGHTS_Q4 && m->opts.q4_group != c->q4_group)
        return coli__fail(&m->err, COLI_EINVAL,
                          "COLI_OPT_Q4_GROUP asks for groups of %d, but %s holds q4 weights in groups of %d",
                          (int)m->opts.q4_group, c->path, c->q4_group);
    m->wfmt = (coli_weight_format)c->weights;
    m->opts.q4_group = c->q4_group;
    COLI_TRY(coli__weights_load_container(&m->w, &m->cfg, &m->pieces, c, &m->err));
    /* the budget keeps room for one context's KV cache: none is ever longer than the model */
    int64_t kv_pos = coli__kv_positions(&m->cfg, m->opts.context);
    if (kv_pos > m->cfg.max_pos)
        kv_pos = m->cfg.max_pos;
    coli__store_conf sc = {
        .budget = (uint64_t)m->opts.mem_budget_mb << 20,
        .kv_bytes = coli__kv_bytes_per_pos(&m->cfg, coli__kv_dtype(m->opts.kv_type)) * (uint64_t)kv_pos,
        .kv_positions = kv_pos,
        .slots = m->opts.expert_slots,
        .prefetch = (int)m->opts.prefetch,
        .io_threads = (int)m->opts.io_threads,
        .hotset = (int)m->opts.hotset,
        .top_k = m->cfg.top_k,
        .log = m->opts.log,
        .dir = dir,
    };
    return coli__store_open(c, &sc, &m->store, &m->err);
}

static coli_status pick_cpu_kernels(coli_model *m)
{
    COLI_TRY(coli__cpusel_pick(m->opts.cpu_kernels, getenv("COLI_CPU"), coli__cpu_features(), &m->cpuk, &m->err));
    coli__log(&m->opts.log, COLI_LOG_DEBUG, "CPU kernels: %s", coli__cpuk_name(m->cpuk));
    return COLI_OK;
}

/* The loader's side of the GPU tier's host copies (coli__expert_source). */
static coli_status release_experts(void *user, const signed char *resident, unsigned char *host, uint64_t *freed,
                                   int *mapped)
{
    coli_model *m = user;
    return coli__weights_release_experts(&m->w, &m->cfg, resident, host, freed, mapped);
}

static coli_status reload_expert(void *user, int l, int e, coli__err *err)
{
    coli_model *m = user;
    return coli__weights_reload_expert(&m->w, &m->cfg, m->ts, m->wfmt, (int)m->opts.q4_group, l, e, err);
}

coli__expert_source coli__model_expert_source(coli_model *m)
{
    return (coli__expert_source){.release = release_experts, .reload = reload_expert, .user = m};
}

coli_status coli__model_init(coli_model *m, const char *dir, const coli_options *opts)
{
    if (opts)
        m->opts = opts->o;
    else
        coli__opts_default(&m->opts);
    if (!dir)
        return coli__fail(&m->err, COLI_EINVAL, "model directory is NULL");
    m->dir = strdup(dir);
    if (!m->dir)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return coli__fail(&m->err, COLI_ENOENT, "model directory '%s' does not exist", dir);
    if (!S_ISDIR(sb.st_mode))
        return coli__fail(&m->err, COLI_EINVAL, "model path '%s' is not a directory", dir);
    return COLI_OK;
}

coli_status coli__model_load(coli_model *m, int gpu_on)
{
    const char *dir = m->dir;
    COLI_TRY(pick_cpu_kernels(m));
    /* resolved once: contexts made with the model's options inherit it */
    COLI_TRY(coli__kv_type_pick(m->opts.kv_type, &m->opts.kv_type, &m->err));
    COLI_TRY(coli__config_load(dir, &m->cfg, &m->err));
    if (m->opts.mtp > 0 && m->cfg.n_mtp < 1)
        return coli__fail(&m->err, COLI_EUNSUPPORTED,
                          "COLI_OPT_MTP: %s/config.json has no MTP layer (num_nextn_predict_layers is 0)", dir);
    if (m->opts.mtp > 0)
        COLI_TRY(coli__config_add_mtp(&m->cfg, dir, &m->err));
    COLI_TRY(coli__pieces_pick(&m->cfg, &m->pieces, &m->err));
    m->dec = (coli__decoder){.cfg = &m->cfg, .w = &m->w, .pieces = &m->pieces, .cpuk = m->cpuk};
    if (coli__cont_present(dir)) {
        COLI_TRY(open_container(m, dir));
    } else {
        COLI_TRY(coli__st_open_dir(dir, &m->ts, &m->err));
        m->wfmt = (coli_weight_format)m->opts.weights;
        if (m->wfmt == COLI_WEIGHTS_AUTO && m->cfg.fp8_block_rows > 0)
            m->wfmt = COLI_WEIGHTS_Q8; /* an FP8 checkpoint computes in no format of its own */
        /* the x16 layout is the CPU's: matrices a GPU reads keep the rows */
        int x16 = coli__cpuk_x16(m->cpuk) && !gpu_on;
        COLI_TRY(coli__weights_load(&m->w, &m->cfg, &m->pieces, m->ts, m->wfmt, (int)m->opts.q4_group,
                                    (int)m->opts.threads, x16, &m->err));
        if (m->opts.mem_budget_mb > 0 || m->opts.expert_slots > 0)
            coli__log(&m->opts.log, COLI_LOG_WARN,
                      "%s: a memory budget applies to converted models (coli convert); this checkpoint is loaded whole",
                      dir);
    }
    describe_weights(m);
    return COLI_OK;
}

coli_status coli__model_finish(coli_model *m)
{
    const char *dir = m->dir;
    char *tpath = coli__path_join(dir, "tokenizer.json");
    if (!tpath)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory");
    coli_status st = coli__tok_load(tpath, &m->tok, &m->err);
    if (st == COLI_ENOENT) {
        coli__log(&m->opts.log, COLI_LOG_WARN, "%s: not found; the model works on token ids only", tpath);
        coli__err_clear(&m->err);
        st = COLI_OK;
    }
    free(tpath);
    COLI_TRY(st);
    if (m->tok && coli__tok_vocab_size(m->tok) > (size_t)m->cfg.vocab)
        return coli__fail(&m->err, COLI_EFORMAT,
                          "%s/tokenizer.json: %zu token ids exceed config.json vocab_size %d", dir,
                          coli__tok_vocab_size(m->tok), m->cfg.vocab);
    if (m->tok && m->cfg.n_eos == 0)
        COLI_TRY(eos_from_tokenizer_config(m));
    COLI_TRY(chat_from_tokenizer_config(m));
    coli__log(&m->opts.log, COLI_LOG_INFO,
              "%s: %s, %d layers (%d MoE), %d experts (%d active), %llu MiB of weights", dir,
              m->cfg.arch_name, m->cfg.n_layers, m->cfg.n_moe_layers, m->cfg.n_experts, m->cfg.top_k,
              (unsigned long long)(m->w.bytes >> 20));
    return COLI_OK;
}

void coli__model_release(coli_model *m)
{
    coli__store_close(m->store);
    m->store = NULL;
    coli__weights_free(&m->w, &m->cfg);
    coli__cont_close(m->cont);
    m->cont = NULL;
    coli__tok_free(m->tok);
    m->tok = NULL;
    coli__st_close(m->ts);
    m->ts = NULL;
    coli__config_free(&m->cfg);
    free(m->chat_template);
    m->chat_template = NULL;
    for (size_t i = 0; i < 2 * m->n_special; i++)
        free(m->special[i]);
    free(m->special);
    m->special = NULL;
    m->n_special = 0;
}

COLI_API const char *coli_model_errmsg(const coli_model *m)
{
    if (!m)
        return "model handle is NULL";
    if (m->ok)
        return tl_err.m == m ? tl_err.err.msg : "";
    return m->err.msg;
}

coli_status coli__model_usable(const coli_model *m)
{
    if (!m)
        return COLI_EINVAL;
    if (!m->ok)
        return COLI_ESTATE;
    return COLI_OK;
}

void coli__model_info_fill(const coli_model *m, coli_model_info *info)
{
    const coli__config *c = &m->cfg;
    info->architecture = c->arch_name;
    /* the decoder's layers: a loaded MTP layer is counted apart */
    const int mtp = c->n_layers - c->n_trunk;
    info->n_layers = c->n_trunk;
    info->n_moe_layers = c->n_moe_layers - mtp;
    info->hidden_size = c->hidden;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->vocab_size = c->vocab;
    info->n_experts = c->n_experts;
    info->n_experts_active = c->top_k;
    info->moe_intermediate_size = c->moe_inter;
    info->max_positions = c->max_pos;
    info->router = m->pieces.router->name;
    info->n_expert_groups = c->router.n_group;
    info->n_expert_groups_active = c->router.topk_group;
    info->routed_scaling = c->router.scale;
    info->shared_intermediate_size = c->shared_inter;
    info->intermediate_size = c->n_moe_layers - mtp < c->n_trunk ? c->inter : 0;
    info->rotary_dim = c->rot_dim;
    info->qkv_bias = c->attn.qkv_bias;
    info->n_mtp_layers = c->n_mtp;
    info->mtp_loaded = mtp > 0;
    info->attention = m->pieces.attn->name;
    info->kv_lora_rank = c->attn.mla.kv_lora;
    info->q_lora_rank = c->attn.mla.q_lora;
    info->v_head_dim = c->attn.mla.kv_lora ? c->attn.mla.v_dim : c->head_dim;
    info->rope_scaling = c->rope.yarn ? "yarn" : "none";
    info->rope_factor = c->rope.yarn ? (float)c->rope.factor : 1.0f;
    info->rope_original_positions = c->rope.yarn ? c->rope.orig_max : 0;
    info->index_topk = c->attn.dsa.topk;
    info->index_heads = c->attn.dsa.topk ? c->attn.dsa.heads : 0;
    info->index_head_dim = c->attn.dsa.topk ? c->attn.dsa.dim : 0;
    info->index_shared_layers = 0;
    for (int l = 0; c->attn.dsa.topk && l < c->n_trunk; l++)
        info->index_shared_layers += !c->attn.dsa.full[l];
    info->kv_type = (coli_kv_type)m->opts.kv_type;
    info->kv_bytes_per_position = coli__kv_bytes_per_pos(c, coli__kv_dtype(m->opts.kv_type));
    info->context_positions = coli__kv_positions(c, m->opts.context);
    info->kv_bytes = info->kv_bytes_per_position * (uint64_t)info->context_positions;
    info->n_params_total = m->w.n_params_total;
    info->n_params_active = m->w.n_params_active;
    info->weight_bytes = m->w.bytes;
    /* The format asked for; AUTO resolves to the checkpoint's one format. */
    const int *n = m->w.n_by_dt;
    info->weights = m->wfmt;
    info->weights_name = coli_weight_format_name(m->wfmt);
    if (m->wfmt == COLI_WEIGHTS_AUTO) {
        int kinds = (n[COLI_DT_F32] > 0) + (n[COLI_DT_BF16] > 0) + (n[COLI_DT_F16] > 0);
        info->weights_name = kinds > 1 ? "mixed" : coli__dtype_name(n[COLI_DT_F32] ? COLI_DT_F32 : n[COLI_DT_BF16] ? COLI_DT_BF16 : COLI_DT_F16);
        info->weights = kinds > 1 || n[COLI_DT_F16] ? COLI_WEIGHTS_AUTO
                        : n[COLI_DT_F32]            ? COLI_WEIGHTS_F32
                                                    : COLI_WEIGHTS_BF16;
    }
    info->weights_detail = m->weights_detail;
    info->store_detail = m->store ? coli__store_detail(m->store) : "resident: every expert loaded at open";
    info->bos_id = c->bos;
    info->eos_id = c->n_eos > 0 ? c->eos[0] : -1;
    info->cpu_kernels = coli__cpuk_name(m->cpuk);
}

COLI_API coli_status coli_model_weight_bytes(const coli_model *m, coli_weight_format fmt, uint64_t *total,
                                             uint64_t *active)
{
    COLI_TRY(coli__model_usable(m));
    if (fmt < COLI_WEIGHTS_AUTO || fmt > COLI_WEIGHTS_Q2)
        return COLI_EINVAL;
    uint64_t t, a;
    if (fmt == COLI_WEIGHTS_AUTO && m->cont) /* what model.coli holds, not what it came from */
        fmt = m->wfmt;
    coli__weights_bytes(&m->w, &m->cfg, fmt, (int)m->opts.q4_group, &t, &a);
    if (total)
        *total = t;
    if (active)
        *active = a;
    return COLI_OK;
}

COLI_API int coli_model_is_eos(const coli_model *m, int32_t id)
{
    if (coli__model_usable(m) != COLI_OK)
        return 0;
    for (int i = 0; i < m->cfg.n_eos; i++)
        if (m->cfg.eos[i] == id)
            return 1;
    return 0;
}

static coli_status need_tokenizer(coli_model *m)
{
    COLI_TRY(coli__model_usable(m));
    if (!m->tok)
        return coli__fail(coli__model_err(m), COLI_ESTATE, "%s: the model has no tokenizer.json", m->dir);
    return COLI_OK;
}

COLI_API coli_status coli_tokenize(coli_model *m, const char *text, size_t len, int add_special,
                                   int32_t *ids, size_t cap, size_t *n_ids)
{
    COLI_TRY(need_tokenizer(m));
    coli__err *err = coli__model_err(m);
    if ((!text && len) || (!ids && cap) || !n_ids)
        return coli__fail(err, COLI_EINVAL, "coli_tokenize: NULL argument");
    coli__ids v = {0};
    coli_status st = coli__tok_encode(m->tok, text ? text : "", len, add_special, &v, err);
    if (st == COLI_OK) {
        *n_ids = v.n;
        size_t k = v.n < cap ? v.n : cap;
        if (k > 0)
            memcpy(ids, v.v, k * sizeof *ids);
        if (v.n > cap)
            st = coli__fail(err, COLI_ENOSPC, "coli_tokenize: %zu ids do not fit in %zu", v.n, cap);
    }
    coli__ids_free(&v);
    return st;
}

COLI_API coli_status coli_detokenize(coli_model *m, const int32_t *ids, size_t n_ids, int skip_special,
                                     char *buf, size_t cap, size_t *len)
{
    COLI_TRY(need_tokenizer(m));
    coli__err *err = coli__model_err(m);
    if ((!ids && n_ids) || (!buf && cap) || !len)
        return coli__fail(err, COLI_EINVAL, "coli_detokenize: NULL argument");
    /* Ids the model has but the tokenizer lacks (a padded vocab_size) have
     * no text: leave them out; ids outside the model's vocabulary stay an
     * error of the tokenizer's. */
    size_t n_tok = coli__tok_vocab_size(m->tok), n_pad = 0;
#define IS_PADDING(id) ((id) >= 0 && (size_t)(id) >= n_tok && (id) < m->cfg.vocab)
    for (size_t k = 0; k < n_ids; k++)
        n_pad += IS_PADDING(ids[k]);
    int32_t *kept = NULL;
    if (n_pad) {
        if (!(kept = malloc((n_ids - n_pad + 1) * sizeof *kept)))
            return coli__fail(err, COLI_ENOMEM, "coli_detokenize: out of memory for %zu ids", n_ids);
        size_t j = 0;
        for (size_t k = 0; k < n_ids; k++)
            if (!IS_PADDING(ids[k]))
                kept[j++] = ids[k];
#undef IS_PADDING
        ids = kept;
        n_ids = j;
    }
    coli__buf b = {0};
    coli_status st = coli__tok_decode(m->tok, ids, n_ids, skip_special, &b, err);
    free(kept);
    if (st == COLI_OK) {
        /* snprintf-like: the text and its NUL must fit */
        *len = b.n;
        if (cap > 0) {
            size_t k = b.n < cap ? b.n : cap - 1;
            if (k > 0)
                memcpy(buf, b.p, k);
            buf[k] = '\0';
        }
        if (b.n >= cap)
            st = coli__fail(err, COLI_ENOSPC, "coli_detokenize: %zu bytes and a NUL do not fit in %zu", b.n, cap);
    }
    coli__buf_free(&b);
    return st;
}

COLI_API coli_status coli_model_store_stats(const coli_model *m, coli_store_stats *stats)
{
    COLI_TRY(coli__model_usable(m));
    if (!coli__sized_out_ok(stats))
        return COLI_EINVAL;
    coli_store_stats full;
    memset(&full, 0, sizeof full);
    if (m->store) {
        coli__store_stats(m->store, &full);
    } else {
        full.mode = COLI_STORE_RESIDENT;
        full.experts = (uint64_t)m->cfg.n_moe_layers * (uint64_t)m->cfg.n_experts;
        full.slots = full.experts;
    }
    coli__sized_out(stats, &full, sizeof full);
    return COLI_OK;
}

COLI_API const char *coli_model_chat_template(const coli_model *m)
{
    return m && m->ok ? m->chat_template : NULL;
}

COLI_API const char *coli_model_special_text(const coli_model *m, const char *name)
{
    if (!m || !m->ok || !name)
        return NULL;
    for (size_t i = 0; i < m->n_special; i++)
        if (strcmp(m->special[2 * i], name) == 0)
            return m->special[2 * i + 1];
    return NULL;
}
