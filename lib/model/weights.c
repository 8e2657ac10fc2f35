/* weights.c - from mapped tensors to the matrices the forward pass reads:
 * the walk over a model's tensors (loader.h names the loader's other
 * files).
 *
 * Names are the family's (lib/io/families.c), as the published checkpoints
 * have them (model.layers.N.self_attn.q_proj, mlp.experts.E.gate_proj,
 * Mixtral's block_sparse_moe.experts.E.w1/w2/w3).
 * Every shape is checked against config.json before anything is used. In
 * AUTO format matrices point into the mapping (no copy); F32 widens, BF16
 * narrows and Q8/Q4/Q2 quantize into owned memory (docs/formats.md says
 * which matrices keep their precision). Norm vectors are always f32.
 *
 * A NaN or an infinity in any weight refuses the model, naming the tensor
 * and the row. The check rides on the pass that already reads each value:
 * widening, narrowing and quantizing check the rows they produce (the
 * quantizer sees it for free); matrices kept as stored (AUTO, or a format
 * equal to the stored one, and the router and embedding of the quantized
 * formats) are scanned at memory speed, their only read at load. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/loader.h"
#include "decoder/pieces.h"


static void count(coli__loader *L, const coli__mat *m, coli__mat_role role)
{
    coli__weights *w = L->w;
    int64_t n = (int64_t)m->rows * m->cols;
    w->bytes += coli__mat_bytes(m);
    w->n_params_total += n;
    if (role == COLI_ROLE_DENSE)
        w->n_params_active += n;
    else if (role == COLI_ROLE_EMBED)
        w->n_params_active += m->cols; /* one row per token */
    w->n_by_dt[m->dt]++;
}

/* A tensor of the container, checked against the shape config.json implies
 * and the dtype the walk expects; *out points into the mapping. */
static coli_status cont_mat(coli__loader *L, coli__mat *m, const char *name, int rows, int cols, coli__mat_kind kind,
                            coli__mat_role role)
{
    const coli__container *c = L->cont;
    int dt, group, stored;
    uint64_t off;
    if (L->expert >= 0) {
        const coli__cont_mat *cm = &c->layouts[3 * L->layer + L->which];
        const coli__cont_record *r = coli__cont_record_of(c, L->layer, L->expert);
        if (!r || cm->rows != rows || cm->cols != cols)
            return coli__fail(L->err, COLI_EFORMAT, "%s: layer %d: experts are %d x %d, config.json implies %d x %d",
                              c->path, L->layer, cm->rows, cm->cols, rows, cols);
        dt = cm->dtype;
        group = cm->group;
        stored = cm->stored;
        off = r->offset + cm->offset;
    } else {
        const coli__cont_tensor *t = coli__cont_find(c, name);
        if (!t || t->is_vec)
            return coli__fail(L->err, COLI_ENOENT, "%s: tensor '%s' is missing from the container", c->path, name);
        if (t->rows != rows || t->cols != cols)
            return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' is %d x %d, config.json implies %d x %d", c->path,
                              name, t->rows, t->cols, rows, cols);
        dt = t->dtype;
        group = t->group;
        stored = t->stored;
        off = t->offset;
    }
    coli__dtype want = coli__weights_target(L->fmt, kind, (coli__dtype)stored, cols, L->q4_group);
    if (dt != (int)want)
        return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' has dtype %d where format %d implies %d", c->path,
                          name, dt, (int)L->fmt, (int)want);
    *m = coli__mat_at((coli__dtype)dt, group, rows, cols, c->map + off);
    COLI_TRY(coli__ld_record(L, rows, cols, kind, (int)coli__dtype_size((coli__dtype)stored), role));
    return COLI_OK;
}

static coli_status plan_item(coli__loader *L, const char *name, const char *src, int rows, int cols, int is_vec,
                             coli__mat_kind kind, coli__mat_role role, coli__dtype stored, coli__dtype target)
{
    coli__witem it = {.name = name, .src = src, .rows = rows, .cols = cols, .is_vec = is_vec, .kind = kind,
                      .role = role, .stored = stored, .target = target, .layer = L->layer, .expert = L->expert,
                      .which = L->which};
    return L->plan(L->plan_user, &it, L->err);
}

coli_status coli__ld_mat(coli__loader *L, coli__mat *m, const char *name, int rows, int cols, coli__mat_kind kind,
                            coli__mat_role role)
{
    if (L->cont) {
        COLI_TRY(cont_mat(L, m, name, rows, cols, kind, role));
        count(L, m, role);
        return COLI_OK;
    }
    const coli__tensor *t = NULL;
    COLI_TRY(coli__ld_find(L, name, rows, cols, &t));
    if (L->plan) {
        coli__dtype target = coli__weights_target(L->fmt, kind, t->dtype, cols, L->q4_group);
        memset(m, 0, sizeof *m);
        m->rows = rows;
        m->cols = cols;
        m->dt = target;
        return plan_item(L, name, name, rows, cols, 0, kind, role, t->dtype, target);
    }
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->dt = t->dtype;
    m->data = coli__ld_aligned(L, t);
    if (!m->data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    if (t->dtype == COLI_DT_F8E4M3)
        COLI_TRY(coli__ld_fp8_scales(L, m, t, name));
    COLI_TRY(coli__ld_record(L, rows, cols, kind, (int)coli__dtype_size(t->dtype), role));
    COLI_TRY(coli__ld_convert(L, m, t->file, name, coli__weights_target(L->fmt, kind, t->dtype, cols, L->q4_group)));
    count(L, m, role);
    return COLI_OK;
}

static coli_status load_vec_hf(coli__loader *L, const coli__tensor *t, float **out, const char *name, int n);

static coli_status load_vec(coli__loader *L, float **out, const char *name, int n)
{
    if (L->cont) {
        const coli__cont_tensor *ct = coli__cont_find(L->cont, name);
        if (!ct || !ct->is_vec || ct->cols != n)
            return coli__fail(L->err, ct ? COLI_EFORMAT : COLI_ENOENT,
                              "%s: vector '%s' of %d values is missing from the container", L->cont->path, name, n);
        *out = (float *)(uintptr_t)(L->cont->map + ct->offset);
    } else {
        const coli__tensor *t = NULL;
        COLI_TRY(coli__ld_find(L, name, n, -1, &t));
        if (L->plan)
            COLI_TRY(plan_item(L, name, name, 1, n, 1, COLI_MAT_KEEP, COLI_ROLE_DENSE, t->dtype, COLI_DT_F32));
        else
            COLI_TRY(load_vec_hf(L, t, out, name, n));
    }
    L->w->bytes += (uint64_t)n * sizeof(float);
    L->w->n_params_total += n;
    L->w->n_params_active += n;
    L->w->n_vec_params += n;
    return COLI_OK;
}

static coli_status load_vec_hf(coli__loader *L, const coli__tensor *t, float **out, const char *name, int n)
{
    if (t->dtype == COLI_DT_F8E4M3) /* FP8 checkpoints keep their vectors in bf16 or f32 */
        return coli__fail(L->err, COLI_EUNSUPPORTED, "%s: vector '%s' is F8_E4M3; only its matrices may be", t->file,
                          name);
    float *p = coli__ld_own(L, (size_t)n * sizeof(float));
    if (!p)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory loading tensor '%s'", name);
    coli__mat m = {.rows = 1, .cols = n, .dt = t->dtype, .data = coli__ld_aligned(L, t)};
    if (!m.data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    coli__mat_row(&m, 0, p);
    COLI_TRY(coli__ld_check_finite(L, t->file, name, 0, COLI_DT_F32, p, (size_t)n));
    *out = p;
    return COLI_OK;
}

#define BIG COLI_MAT_BIG
#define KEEP COLI_MAT_KEEP
#define DENSE COLI_ROLE_DENSE
#define EXPERT COLI_ROLE_EXPERT

/* Tensor t of layer l (expert e) as the model's family names it
 * (lib/io/families.c), in the caller's name[]. */
#define NAME(t, l, e) coli__tensor_name(c->family, (t), (l), (e), name, sizeof name)

/* The loader as the pieces see it (coli__piece_loader). */
static coli_status piece_mat(void *user, coli__mat *m, coli__tname t, int l, int rows, int cols, coli__mat_kind kind,
                             coli__mat_role role)
{
    coli__loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    return coli__ld_mat(L, m, NAME(t, l, 0), rows, cols, kind, role);
}

/* A matrix kept in the row layout, never x16: its rows are cut apart. */
static coli_status piece_mat_rows(void *user, coli__mat *m, coli__tname t, int l, int rows, int cols,
                                  coli__mat_kind kind, coli__mat_role role)
{
    coli__loader *L = user;
    const int x16 = L->x16;
    L->x16 = 0;
    coli_status st = piece_mat(user, m, t, l, rows, cols, kind, role);
    L->x16 = x16;
    return st;
}

static coli_status piece_vec(void *user, float **v, coli__tname t, int l, int n)
{
    coli__loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    return load_vec(L, v, NAME(t, l, 0), n);
}

/* The routed experts of MoE layer l, expert by expert: gate, up, down. */
static coli_status piece_experts(void *user, int l, coli__layer *ly)
{
    coli__loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    const int H = c->hidden, E = c->n_experts, I = c->moe_inter;
    ly->e_gate = calloc((size_t)E * 3, sizeof(coli__mat));
    if (!ly->e_gate)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory for layer %d experts", l);
    ly->e_up = ly->e_gate + E;
    ly->e_down = ly->e_gate + 2 * E;
    L->layer = l;
    for (int e = 0; e < E; e++) {
        L->expert = e;
        L->which = 0;
        COLI_TRY(coli__ld_mat(L, &ly->e_gate[e], NAME(COLI_T_E_GATE, l, e), I, H, BIG, EXPERT));
        L->which = 1;
        COLI_TRY(coli__ld_mat(L, &ly->e_up[e], NAME(COLI_T_E_UP, l, e), I, H, BIG, EXPERT));
        L->which = 2;
        COLI_TRY(coli__ld_mat(L, &ly->e_down[e], NAME(COLI_T_E_DOWN, l, e), H, I, BIG, EXPERT));
    }
    L->expert = -1;
    /* top_k of the layer's experts run for each token */
    L->w->n_params_active += (int64_t)c->top_k * 3 * I * H;
    return COLI_OK;
}

/* A layer: its norms, then each piece's tensors, in the order they are
 * stored (a container keeps the loader's order). */
static coli_status load_layer(coli__loader *L, int l)
{
    const coli__config *c = L->cfg;
    const coli__pieces *p = L->pieces;
    coli__layer *ly = &L->w->layers[l];
    char name[256];
    const coli__piece_loader pl = {
        .mat = piece_mat, .mat_rows = piece_mat_rows, .vec = piece_vec, .experts = piece_experts, .L = L};

    COLI_TRY(load_vec(L, &ly->attn_norm, NAME(COLI_T_ATTN_NORM, l, 0), c->hidden));
    COLI_TRY(load_vec(L, &ly->ffn_norm, NAME(COLI_T_FFN_NORM, l, 0), c->hidden));
    COLI_TRY(p->attn->load(&pl, c, l, ly));
    ly->is_moe = c->is_moe[l];
    if (!ly->is_moe)
        return p->mlp->load(&pl, c, l, ly);
    COLI_TRY(p->router->load(&pl, c, l, ly));
    return p->moe->load(&pl, c, l, ly);
}

static coli_status load_all(coli__loader *L);

coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                               const coli__tensor_set *ts, coli_weight_format fmt, int q4_group, int threads, int x16,
                               coli__err *err)
{
    memset(w, 0, sizeof *w);
    coli__loader L = {.w = w, .cfg = cfg, .pieces = pieces, .ts = ts, .fmt = fmt, .q4_group = q4_group,
                      .err = err, .layer = -1, .expert = -1, .x16 = x16};
    coli__err perr;
    if (threads != 1 && coli__pool_create(threads, &L.pool, &perr) != COLI_OK)
        L.pool = NULL; /* quantize on the caller's thread alone */
    coli_status st = load_all(&L);
    coli__pool_free(L.pool);
    free(L.rowbuf);
    free(L.qbuf);
    return st;
}

coli_status coli__weights_load_container(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                                         const coli__container *c, coli__err *err)
{
    memset(w, 0, sizeof *w);
    coli__loader L = {.w = w, .cfg = cfg, .pieces = pieces, .fmt = (coli_weight_format)c->weights,
                      .q4_group = c->q4_group, .err = err, .cont = c, .layer = -1, .expert = -1};
    /* a container may hold the MTP layer a model opened without it does not use */
    int extra = c->n_layers == cfg->n_layers + 1 && cfg->n_layers == cfg->n_trunk && cfg->n_mtp > 0;
    if (cfg->n_layers > cfg->n_trunk && c->n_layers == cfg->n_trunk)
        return coli__fail(err, COLI_EUNSUPPORTED, "%s: converted without the MTP layer; convert the checkpoint again",
                          c->path);
    if (c->n_layers != cfg->n_layers + extra || c->n_experts != (cfg->n_moe_layers ? cfg->n_experts : 0) ||
        c->n_moe != cfg->n_moe_layers + extra)
        return coli__fail(err, COLI_EFORMAT, "%s: %d layers, %d MoE layers of %d experts; config.json says %d, %d, %d",
                          c->path, c->n_layers, c->n_moe, c->n_experts, cfg->n_layers, cfg->n_moe_layers,
                          cfg->n_experts);
    return load_all(&L);
}

coli_status coli__weights_plan(const coli__config *cfg, const coli__pieces *pieces, const coli__tensor_set *ts,
                               coli_weight_format fmt, int q4_group, coli__witem_fn fn, void *user, coli__err *err)
{
    coli__weights w;
    memset(&w, 0, sizeof w);
    coli__loader L = {.w = &w, .cfg = cfg, .pieces = pieces, .ts = ts, .fmt = fmt, .q4_group = q4_group,
                      .err = err, .plan = fn, .plan_user = user, .layer = -1, .expert = -1};
    coli_status st = load_all(&L);
    coli__weights_free(&w, cfg);
    return st;
}

coli_status coli__weights_convert_item(const coli__config *cfg, const coli__tensor_set *ts, coli_weight_format fmt,
                                       int q4_group, const coli__witem *it, coli__weights *scratch, coli__mat *out,
                                       coli__err *err)
{
    coli__loader L = {.w = scratch, .cfg = cfg, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .layer = -1, .expert = -1};
    coli_status st;
    if (it->is_vec) {
        const coli__tensor *t = NULL;
        float *v = NULL;
        st = coli__ld_find(&L, it->src, it->cols, -1, &t);
        if (st == COLI_OK)
            st = load_vec_hf(&L, t, &v, it->src, it->cols);
        if (st == COLI_OK)
            *out = (coli__mat){.rows = 1, .cols = it->cols, .dt = COLI_DT_F32, .data = v};
    } else if (it->role == COLI_ROLE_TIED_OUT) {
        const coli__tensor *t = NULL;
        st = coli__ld_find(&L, it->src, it->rows, it->cols, &t);
        if (st == COLI_OK && t->dtype == COLI_DT_F8E4M3)
            st = coli__fail(err, COLI_EUNSUPPORTED, "%s: a tied embedding '%s' in F8_E4M3", t->file, it->src);
        if (st == COLI_OK) {
            *out = (coli__mat){.rows = it->rows, .cols = it->cols, .dt = t->dtype, .data = coli__ld_aligned(&L, t)};
            st = out->data ? coli__ld_convert(&L, out, t->file, "lm_head.weight (tied)", it->target)
                           : coli__fail(err, COLI_ENOMEM, "out of memory copying tensor '%s'", it->src);
        }
    } else {
        st = coli__ld_mat(&L, out, it->src, it->rows, it->cols, it->kind, it->role);
    }
    free(L.rowbuf);
    return st;
}

/* The output projection, after the layers. */
static coli_status load_output(coli__loader *L)
{
    coli__weights *w = L->w;
    const coli__config *cfg = L->cfg;
    const int H = cfg->hidden, V = cfg->vocab;
    /* the family's names of the model's own tensors (lib/io/families.c) */
    const char *const embed = cfg->family->names->name[COLI_T_EMBED];
    const char *const out = cfg->family->names->name[COLI_T_LM_HEAD];
    char tied[256];
    snprintf(tied, sizeof tied, "%s (tied)", out);
    if (L->cont) {
        const coli__cont_tensor *t = coli__cont_find(L->cont, out);
        if (cfg->tie_embeddings && (!t || t->role == COLI_ROLE_TIED_OUT)) {
            w->lm_head = w->embed;
            w->n_params_active += (int64_t)V * H - H;
            if (!t)
                return coli__ld_record(L, V, H, COLI_MAT_OUT, 0, COLI_ROLE_TIED_OUT);
            COLI_TRY(cont_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, COLI_ROLE_TIED_OUT));
            w->bytes += coli__mat_bytes(&w->lm_head);
            w->n_by_dt[w->lm_head.dt]++;
            return COLI_OK;
        }
        return coli__ld_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, DENSE);
    }
    if (cfg->tie_embeddings && !coli__st_find(L->ts, out)) {
        /* The output layer reads the whole embedding matrix; quantized
         * formats get their own q8 copy of it for speed. */
        coli__dtype stored = w->embed.dt;
        coli__dtype target = coli__weights_target(L->fmt, COLI_MAT_OUT, stored, H, L->q4_group);
        COLI_TRY(coli__ld_record(L, V, H, COLI_MAT_OUT, 0, COLI_ROLE_TIED_OUT));
        w->lm_head = w->embed;
        w->n_params_active += (int64_t)V * H - H;
        if (L->plan)
            return target == stored ? COLI_OK
                                    : plan_item(L, out, embed, V, H, 0, COLI_MAT_OUT, COLI_ROLE_TIED_OUT, stored,
                                                target);
        if (target != stored) {
            const char *file = coli__st_find(L->ts, embed)->file;
            COLI_TRY(coli__ld_convert(L, &w->lm_head, file, tied, target));
            w->bytes += coli__mat_bytes(&w->lm_head);
            w->n_by_dt[target]++;
        }
    } else {
        COLI_TRY(coli__ld_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, DENSE));
    }
    return COLI_OK;
}

/* The MTP layer's copy of the model's matrix main (checkpoint name
 * main_name): its own when the checkpoint has one that differs, else the
 * model's, which DeepSeek documents as shared and GLM stores again. */
static coli_status mtp_copy(coli__loader *L, coli__mat *m, const char *name, const coli__mat *main,
                            const char *main_name, coli__mat_kind kind, coli__mat_role role)
{
    if (L->cont) {
        if (!coli__cont_find(L->cont, name)) {
            *m = *main;
            return COLI_OK;
        }
        return coli__ld_mat(L, m, name, main->rows, main->cols, kind, role);
    }
    const coli__tensor *t = coli__st_find(L->ts, name), *o = coli__st_find(L->ts, main_name);
    if (!t || (o && o->dtype == t->dtype && o->ndim == t->ndim && o->nbytes == t->nbytes &&
               memcmp(o->data, t->data, t->nbytes) == 0)) {
        *m = *main;
        return COLI_OK;
    }
    return coli__ld_mat(L, m, name, main->rows, main->cols, kind, role);
}

/* The MTP layer's own tensors (its decoder layer is a layer like the
 * others): docs/formats.md, "Multi-token prediction". */
static coli_status load_mtp(coli__loader *L)
{
    const coli__config *c = L->cfg;
    coli__weights *w = L->w;
    coli__mtp_weights *mt = &w->mtp;
    const int H = c->hidden, l = c->n_trunk;
    const char *const embed = c->family->names->name[COLI_T_EMBED];
    const char *const out = c->family->names->name[COLI_T_LM_HEAD];
    char name[256];
    L->layer = l;
    COLI_TRY(coli__ld_mat(L, &mt->eh_proj, NAME(COLI_T_MTP_EH_PROJ, l, 0), H, 2 * H, BIG, DENSE));
    COLI_TRY(load_vec(L, &mt->enorm, NAME(COLI_T_MTP_ENORM, l, 0), H));
    COLI_TRY(load_vec(L, &mt->hnorm, NAME(COLI_T_MTP_HNORM, l, 0), H));
    COLI_TRY(load_vec(L, &mt->head_norm, NAME(COLI_T_MTP_HEAD_NORM, l, 0), H));
    COLI_TRY(mtp_copy(L, &mt->embed, NAME(COLI_T_MTP_EMBED, l, 0), &w->embed, embed, KEEP, COLI_ROLE_EMBED));
    /* a tied output projection is the embedding, as the checkpoint names it */
    const char *head_src = c->tie_embeddings && !(L->ts && coli__st_find(L->ts, out)) ? embed : out;
    return mtp_copy(L, &mt->head, NAME(COLI_T_MTP_HEAD, l, 0), &w->lm_head, head_src, COLI_MAT_OUT, DENSE);
}

static coli_status load_all(coli__loader *L)
{
    coli__weights *w = L->w;
    const coli__config *cfg = L->cfg;
    const int H = cfg->hidden, V = cfg->vocab;
    w->layers = calloc((size_t)cfg->n_layers, sizeof *w->layers);
    if (!w->layers)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory for %d layers", cfg->n_layers);
    COLI_TRY(coli__ld_mat(L, &w->embed, cfg->family->names->name[COLI_T_EMBED], V, H, KEEP, COLI_ROLE_EMBED));
    for (int l = 0; l < cfg->n_layers; l++)
        COLI_TRY(load_layer(L, l));
    COLI_TRY(load_vec(L, &w->final_norm, cfg->family->names->name[COLI_T_FINAL_NORM], H));
    COLI_TRY(load_output(L));
    if (cfg->n_layers > cfg->n_trunk)
        COLI_TRY(load_mtp(L));
    return COLI_OK;
}

void coli__weights_free(coli__weights *w, const coli__config *cfg)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_owned; i++)
        if (w->owned[i].size == 0)
            free(w->owned[i].p);
    free(w->owned);
    for (size_t i = 0; i < w->n_regions; i++)
        munmap(w->regions[i].p, w->regions[i].size);
    free(w->regions);
    free(w->recs);
    if (w->layers && cfg)
        for (int l = 0; l < cfg->n_layers; l++)
            free(w->layers[l].e_gate);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

/* Bytes of one recorded matrix in format fmt. */
static uint64_t rec_bytes(const coli__matrec *r, coli_weight_format fmt, int q4_group)
{
    coli__dtype stored = r->stored_size == 4 ? COLI_DT_F32 : r->stored_size == 1 ? COLI_DT_F8E4M3 : COLI_DT_BF16;
    coli__dtype t = coli__weights_target(fmt, (coli__mat_kind)r->kind, stored, r->cols, q4_group);
    if (r->role == COLI_ROLE_TIED_OUT && (t == COLI_DT_F32 || t == COLI_DT_BF16 || fmt == COLI_WEIGHTS_AUTO))
        return 0; /* shares the embedding */
    coli__mat m = coli__mat_at(t, t == COLI_DT_Q4 ? q4_group : COLI_QK, r->rows, r->cols, NULL);
    return coli__mat_bytes(&m);
}

void coli__weights_bytes(const coli__weights *w, const coli__config *cfg, coli_weight_format fmt, int q4_group,
                         uint64_t *total, uint64_t *active)
{
    uint64_t t = 4 * (uint64_t)w->n_vec_params, a = t, experts = 0;
    for (size_t i = 0; i < w->n_recs; i++) {
        const coli__matrec *r = &w->recs[i];
        uint64_t b = rec_bytes(r, fmt, q4_group);
        t += b;
        switch (r->role) {
        case COLI_ROLE_DENSE:
            a += b;
            break;
        case COLI_ROLE_EMBED:
            a += b / (uint64_t)r->rows;
            break;
        case COLI_ROLE_TIED_OUT: {
            /* The output reads a whole matrix: its own q8 copy (b), or the
             * embedding itself (recs[0], loaded first), one row of which is
             * already counted under COLI_ROLE_EMBED. */
            uint64_t embed = rec_bytes(&w->recs[0], fmt, q4_group);
            a += b ? b : embed - embed / (uint64_t)r->rows;
            break;
        }
        case COLI_ROLE_EXPERT:
            experts += b;
            break;
        }
    }
    /* Experts are alike within a layer: top_k of n_experts run per token. */
    if (cfg->n_experts > 0)
        a += experts / (uint64_t)cfg->n_experts * (uint64_t)cfg->top_k;
    *total = t;
    *active = a;
}
