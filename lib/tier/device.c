/* device.c - the decoder on a device: what lib/tier/device.h promises.
 *
 * At open, the dense weights' bytes and a context's cache and scratch are
 * set aside on the first device before the expert tier places experts in
 * what is left; the dense weights are then uploaded and described to the
 * tier as a coli__gpu_net (handles and shapes, no model family). Each
 * context then creates a pipe (its KV cache and scratch) and its steps run
 * there. Anything the device cannot take leaves the model as before:
 * experts on the devices, the rest on the CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "tier/device.h"
#include "decoder/kv.h"
#include "decoder/pieces.h"
#include "decoder/rope.h"

#define CHUNK 512 /* tokens per device pass (scratch is sized for it) */

struct coli__device {
    const coli__gpu_ops *ops;
    coli__gpu *g;
    int dev;
    int *owned; /* handles uploaded here */
    int n_owned, cap_owned;
    coli__gpu_layer *layers;
    int *experts; /* [L * E * 3] */
    coli__gpu_net net;
    uint64_t dense_bytes;
    int any_host; /* some expert is not resident on dev */
};

struct coli__device_ctx {
    const coli_model *m;
    const struct coli__device *d;
    coli__gpu_pipe *pipe;
    float *rope; /* [CHUNK, rot] */
    /* the host's experts: scratch for coli__experts_host */
    coli__pool *pool;
    coli__experts_counts *counts;
    int *sel;
    float *xe, *ye, *g, *u;
    int *rows, *pos;
    signed char *group;
    uint64_t host_pairs;
};

/* ---- the weights ------------------------------------------------------------ */

static int uploadable(const coli__mat *w)
{
    switch (w->dt) {
    case COLI_DT_F32:
    case COLI_DT_BF16:
        return 1;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        return w->q.layout == COLI__QL_ROWS;
    default:
        return 0;
    }
}

static coli__gpu_mat vector(const float *v, int n)
{
    coli__gpu_mat g;
    memset(&g, 0, sizeof g);
    g.dt = COLI_DT_F32;
    g.rows = 1;
    g.cols = n;
    g.data = v;
    return g;
}

/* Every dense matrix and vector of the model, in one walk: with up NULL
 * it only sizes them (and says whether the device can take them all). */
typedef struct walk {
    const coli__gpu_ops *ops;
    struct coli__device *up; /* NULL: size only */
    uint64_t bytes;
    int ok;
    coli__err *err;
    coli__gpu_mla mla; /* layer 0's latent attention, if any: the net's */
} walk;

static int put(walk *w, const coli__gpu_mat *g, int *handle)
{
    *handle = -1;
    if (!w->ok)
        return -1;
    w->bytes += w->ops->tensor_bytes(g);
    if (!w->up)
        return 0;
    struct coli__device *d = w->up;
    if (d->n_owned == d->cap_owned) {
        int cap = d->cap_owned ? 2 * d->cap_owned : 64;
        int *p = realloc(d->owned, (size_t)cap * sizeof *p);
        if (!p) {
            w->ok = 0;
            coli__fail(w->err, COLI_ENOMEM, "out of memory");
            return -1;
        }
        d->owned = p;
        d->cap_owned = cap;
    }
    if (w->ops->upload(d->g, d->dev, g, handle, w->err) != COLI_OK) {
        w->ok = 0;
        return -1;
    }
    d->owned[d->n_owned++] = *handle;
    return 0;
}

static void put_mat(walk *w, const coli__mat *m, int *handle)
{
    if (!uploadable(m)) {
        w->ok = 0;
        coli__fail(w->err, COLI_EUNSUPPORTED, "a [%d, %d] matrix in %s stays on the CPU", m->rows, m->cols,
                   coli__dtype_name(m->dt));
        *handle = -1;
        return;
    }
    coli__gpu_mat g = coli__gpu_mat_of(m);
    put(w, &g, handle);
}

static void put_vec(walk *w, const float *v, int n, int *handle)
{
    coli__gpu_mat g = vector(v, n);
    put(w, &g, handle);
}

/* The walk as the pieces see it (coli__describer). */
static int describe_mat(void *D, const coli__mat *m)
{
    int h;
    put_mat(D, m, &h);
    return h;
}

static int describe_vec(void *D, const float *v, int n)
{
    int h;
    put_vec(D, v, n, &h);
    return h;
}

static void describe_refuse(void *D, const char *why)
{
    walk *w = D;
    w->ok = 0;
    coli__fail(w->err, COLI_EUNSUPPORTED, "%s", why);
}

static void walk_model(const coli_model *m, walk *w, coli__gpu_layer *layers, int *top)
{
    const coli__config *c = &m->cfg;
    const int H = c->hidden;
    int scratch[3];
    if (m->w.embed.dt != COLI_DT_F32 && m->w.embed.dt != COLI_DT_BF16) {
        w->ok = 0;
        coli__fail(w->err, COLI_EUNSUPPORTED, "the embedding is in %s, not f32 or bf16",
                   coli__dtype_name(m->w.embed.dt));
        return;
    }
    put_mat(w, &m->w.embed, top ? &top[0] : &scratch[0]);
    put_vec(w, m->w.final_norm, H, top ? &top[1] : &scratch[1]);
    put_mat(w, &m->w.lm_head, top ? &top[2] : &scratch[2]);
    const coli__pieces *p = &m->pieces;
    const coli__describer D = {.mat = describe_mat, .vec = describe_vec, .refuse = describe_refuse, .D = w};
    for (int l = 0; l < c->n_trunk && w->ok; l++) { /* the MTP layer runs on the CPU */
        const coli__layer *ly = &m->w.layers[l];
        coli__gpu_layer tmp, *gl = layers ? &layers[l] : &tmp;
        memset(gl, 0, sizeof *gl); /* experts: placed by the tier, after this */
        gl->router = gl->gate = gl->up = gl->down = -1;
        gl->s_gate = gl->s_up = gl->s_down = -1;
        gl->route.bias = -1;
        gl->q_a = gl->q_a_norm = gl->kv_a = gl->kv_a_norm = gl->kv_b = -1;
        put_vec(w, ly->attn_norm, H, &gl->attn_norm);
        put_vec(w, ly->ffn_norm, H, &gl->ffn_norm);
        /* each piece describes its own part of the layer */
        p->attn->describe(&D, c, ly, gl);
        if (l == 0)
            w->mla = gl->mla;
        gl->is_moe = ly->is_moe;
        if (ly->is_moe) {
            p->router->describe(&D, c, ly, &gl->router, &gl->route);
            p->moe->describe(&D, c, ly, gl);
        } else {
            p->mlp->describe(&D, c, ly, gl);
        }
    }
}

static coli__gpu_net describe(const coli_model *m, const walk *w, int dev, const coli__gpu_layer *layers,
                              const int *top)
{
    const coli__config *c = &m->cfg;
    coli__gpu_net n;
    memset(&n, 0, sizeof n);
    n.dev = dev;
    n.hidden = c->hidden;
    n.n_heads = c->n_heads;
    n.n_kv_heads = c->n_kv_heads;
    n.head_dim = c->head_dim;
    n.rot_dim = c->rot_dim;
    n.vocab = c->vocab;
    n.n_layers = c->n_trunk;
    n.n_experts = c->n_experts;
    n.top_k = c->top_k;
    n.moe_inter = c->moe_inter;
    n.inter = c->inter;
    n.shared_inter = c->shared_inter;
    n.eps = c->rms_eps;
    n.embed = top ? top[0] : -1;
    n.final_norm = top ? top[1] : -1;
    n.lm_head = top ? top[2] : -1;
    n.layers = layers;
    n.mla = w->mla;
    return n;
}

static coli__gpu_pipe_params pipe_params(int n_ctx, int kv_bf16)
{
    coli__gpu_pipe_params p = {.n_ctx = n_ctx, .kv_dt = kv_bf16 ? COLI_DT_BF16 : COLI_DT_F32, .chunk = CHUNK};
    return p;
}

/* A flag of the environment, read when a context is made: dflt when
 * unset or not a flag. COLI_GPU_PHASES=1 times each phase (profiling),
 * COLI_GPU_PDL=0 keeps each launch waiting for the one before it (sm_90
 * and later overlap them by default), COLI_GPU_POISON=1 starts the device
 * buffers as NaN (tests). */
static int env_flag(coli__env_id id, int dflt)
{
    coli__env_val v;
    int set = 0;
    coli__err e;
    if (coli__env_get(id, &v, &set, &e) != COLI_OK || !set)
        return dflt;
    return v.i != 0;
}

static const char *const g_phase_names[COLI__GPU_N_PHASES] = {
    "norms", "q/k/v", "attention", "output projection", "router", "experts", "combination", "logits",
};

COLI_API const char *coli_gpu_phase_name(int i)
{
    return i >= 0 && i < COLI__GPU_N_PHASES ? g_phase_names[i] : NULL;
}

static int kv_bf16_of(const coli__opts *o)
{
    return coli__kv_dtype(o->kv_type) == COLI_DT_BF16; /* picked at open, before this */
}

static void device_free(struct coli__device *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n_owned; i++)
        d->ops->release(d->g, d->owned[i]);
    free(d->owned);
    free(d->layers);
    free(d->experts);
    free(d);
}

/* Says why the decoder stays off, at the INFO level: the tier still runs. */
static coli_status stays_off(coli_model *m, const char *why, const char *detail)
{
    coli__log(&m->opts.log, COLI_LOG_INFO, "GPU: layers stay on the CPU: %s%s%s", why, detail[0] ? ": " : "",
              detail);
    return COLI_OK;
}

coli_status coli__device_open(coli_model *m, const coli__expert_source *src)
{
    int gpu_on = 0;
    COLI_TRY(coli__experts_check(&m->opts, &gpu_on, &m->err));
    const coli__gpu_ops *ops = coli__gpu_ops_of(&m->opts);
    if (!gpu_on || !m->opts.gpu_layers || !ops->pipe_create)
        return coli__experts_open(m, src, NULL);
    /* what the decoder needs on device 0, before any expert */
    coli__err e;
    coli__err_clear(&e);
    walk w = {.ops = ops, .up = NULL, .bytes = 0, .ok = 1, .err = &e};
    walk_model(m, &w, NULL, NULL);
    if (!w.ok) {
        COLI_TRY(coli__experts_open(m, src, NULL));
        return stays_off(m, "a layer or a dense weight the device cannot hold", e.msg);
    }
    const int n_ctx = (int)coli__kv_positions(&m->cfg, m->opts.context);
    coli__gpu_net n = describe(m, &w, 0, NULL, NULL);
    coli__gpu_pipe_params pp = pipe_params(n_ctx, kv_bf16_of(&m->opts));
    uint64_t keep[COLI_GPU_MAX_DEVICES] = {0};
    keep[0] = w.bytes + ops->pipe_bytes(&n, &pp) + (UINT64_C(64) << 20);
    COLI_TRY(coli__experts_open(m, src, keep));
    const coli__gpu_ops *tops = NULL;
    coli__gpu *g = coli__experts_gpu(m, &tops);
    if (!g)
        return COLI_OK; /* the tier is off: it said why */
    struct coli__device *d = calloc(1, sizeof *d);
    const int L = m->cfg.n_trunk, E = m->cfg.n_experts > 0 ? m->cfg.n_experts : 1;
    if (d) {
        d->layers = calloc((size_t)L, sizeof *d->layers);
        d->experts = malloc((size_t)L * E * 3 * sizeof *d->experts);
    }
    if (!d || !d->layers || !d->experts) {
        device_free(d);
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory for the device decoder");
    }
    d->ops = tops;
    d->g = g;
    d->dev = 0;
    int top[3];
    walk up = {.ops = tops, .up = d, .bytes = 0, .ok = 1, .err = &e};
    walk_model(m, &up, d->layers, top);
    if (!up.ok) {
        device_free(d);
        return stays_off(m, "the dense weights could not be uploaded", e.msg);
    }
    for (int l = 0; l < L; l++) {
        int *ex = d->experts + (size_t)l * E * 3;
        for (int x = 0; x < E; x++) {
            const int *h = m->cfg.is_moe[l] ? coli__experts_handles(m, l, x, d->dev) : NULL;
            ex[3 * x] = h ? h[0] : -1;
            ex[3 * x + 1] = h ? h[1] : -1;
            ex[3 * x + 2] = h ? h[2] : -1;
            d->any_host |= m->cfg.is_moe[l] && !h;
        }
        d->layers[l].experts = ex;
    }
    d->dense_bytes = up.bytes;
    d->net = describe(m, &up, d->dev, d->layers, top);
    m->dev = d;
    size_t len = strlen(m->gpu_detail);
    snprintf(m->gpu_detail + len, sizeof m->gpu_detail - len, ", layers on device 0 (%llu MiB dense)",
             (unsigned long long)(d->dense_bytes >> 20));
    coli__log(&m->opts.log, COLI_LOG_INFO, "GPU: every layer runs on device 0: %llu MiB of dense weights%s",
              (unsigned long long)(d->dense_bytes >> 20),
              d->any_host ? "; experts not resident are computed by the CPU" : "");
    return COLI_OK;
}

void coli__device_close(coli_model *m)
{
    device_free(m->dev);
    m->dev = NULL;
    coli__experts_close(m);
}

int coli__device_on(const coli_model *m)
{
    return m->dev != NULL;
}

/* ---- contexts ------------------------------------------------------------------ */

void coli__device_ctx_free(coli__device_ctx *c)
{
    if (!c)
        return;
    if (c->pipe)
        c->d->ops->pipe_free(c->pipe);
    free(c->rope);
    free(c->sel);
    free(c->xe);
    free(c->ye);
    free(c->g);
    free(c->u);
    free(c->rows);
    free(c->pos);
    free(c->group);
    free(c);
}

coli_status coli__device_ctx_create(const coli_model *m, int n_ctx, int kv_bf16, coli__device_ctx **out,
                                    coli__err *err)
{
    *out = NULL;
    const struct coli__device *d = m->dev;
    if (!d)
        return COLI_OK;
    const coli__config *cf = &m->cfg;
    coli__device_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return coli__fail(err, COLI_ENOMEM, "out of memory for a context");
    c->m = m;
    c->d = d;
    const size_t CK = (size_t)CHUNK * (size_t)(cf->top_k > 0 ? cf->top_k : 1), H = (size_t)cf->hidden;
    const size_t I = (size_t)(cf->moe_inter > 0 ? cf->moe_inter : 1);
    c->rope = malloc((size_t)CHUNK * (size_t)(cf->rot_dim > 0 ? cf->rot_dim : 1) * sizeof(float));
    int ok = c->rope != NULL;
    /* the host's scratch, only when some expert is not on the device */
    if (ok && d->any_host) {
        c->sel = malloc(CK * sizeof *c->sel);
        c->xe = malloc(CK * H * sizeof(float));
        c->ye = malloc(CK * H * sizeof(float));
        c->g = malloc(CK * I * sizeof(float));
        c->u = malloc(CK * I * sizeof(float));
        c->rows = malloc(CK * sizeof(int));
        c->pos = malloc(CK * sizeof(int));
        c->group = malloc((size_t)(cf->n_experts > 0 ? cf->n_experts : 1));
        ok = c->sel && c->xe && c->ye && c->g && c->u && c->rows && c->pos && c->group;
    }
    if (!ok) {
        coli__device_ctx_free(c);
        return coli__fail(err, COLI_ENOMEM, "out of memory for a context's device buffers");
    }
    coli__gpu_pipe_params pp = pipe_params(n_ctx, kv_bf16);
    pp.phases = env_flag(COLI__ENV_GPU_PHASES, 0);
    pp.pdl = env_flag(COLI__ENV_GPU_PDL, 1);
    pp.poison = env_flag(COLI__ENV_GPU_POISON, 0);
    coli__err e;
    coli__err_clear(&e);
    coli_status st = d->ops->pipe_create(d->g, &d->net, &pp, &c->pipe, &e);
    if (st != COLI_OK) {
        uint64_t need = d->ops->pipe_bytes(&d->net, &pp);
        coli__device_ctx_free(c);
        return coli__fail(err, st,
                          "a context of %d positions needs %llu MiB on GPU device 0 for its KV cache and scratch "
                          "(beside %llu MiB of dense weights): %s; ask for a smaller context (COLI_OPT_CONTEXT), "
                          "a bf16 cache, a smaller expert budget, or no layers on the GPU (COLI_OPT_GPU_LAYERS 0)",
                          n_ctx, (unsigned long long)(need >> 20), (unsigned long long)(d->dense_bytes >> 20), e.msg);
    }
    *out = c;
    return COLI_OK;
}

/* coli__gpu_host: the CPU's share of a layer, while the device runs its own. */
static coli_status host_run(void *user, int layer, const float *xn, int S, const int *sel, const unsigned char *host,
                            float *y, coli__err *err)
{
    coli__device_ctx *c = user;
    const int K = c->m->cfg.top_k;
    if (!c->sel)
        return coli__fail(err, COLI_EINVAL, "layer %d: experts for the CPU with every expert on the device", layer);
    for (int q = 0; q < S * K; q++) {
        c->sel[q] = host[q] ? sel[q] : -1;
        c->host_pairs += host[q] != 0;
    }
    coli__moe_io io = {
        .xn = xn,
        .S = S,
        .sel = c->sel,
        .wts = NULL,
        .xe = c->xe,
        .ye = c->ye,
        .g = c->g,
        .u = c->u,
        .rows = c->rows,
        .pos = c->pos,
        .out = NULL,
        .pred_layer = 0,
        .n_pred = 0,
        .pred = NULL,
        .group = c->group,
    };
    return coli__experts_host(c->m, layer, c->pool, &io, y, c->counts, err);
}

coli_status coli__device_forward(coli__device_ctx *c, coli__pool *pool, const coli__fwd *f,
                                 coli__experts_counts *counts, coli__err *err)
{
    const coli__config *cf = &c->m->cfg;
    const int32_t *tokens = f->tokens;
    const int n = f->n, pos0 = f->pos0;
    if (f->h_in)
        return coli__fail(err, COLI_EINVAL, "the device runs the decoder, not the MTP layer");
    if (f->all_logits && n > COLI__GPU_ALL_ROWS)
        return coli__fail(err, COLI_EINVAL, "the device gives the logits of at most %d tokens at once, %d asked for",
                          COLI__GPU_ALL_ROWS, n);
    const int rot = cf->rot_dim;
    float cs[2048];
    if (rot > (int)(sizeof cs / sizeof cs[0]))
        return coli__fail(err, COLI_EUNSUPPORTED, "a rotary dimension of %d", rot);
    c->pool = pool;
    c->counts = counts;
    c->host_pairs = 0;
    const coli__gpu_host host = {.run = host_run, .user = c};
    for (int done = 0; done < n;) {
        int S = n - done < CHUNK ? n - done : CHUNK;
        for (int t = 0; t < S; t++) {
            coli__rope_table(cs, cf, pos0 + done + t);
            memcpy(c->rope + (size_t)t * rot, cs, (size_t)rot * sizeof(float));
        }
        const coli__gpu_out out = {.logits = f->logits, .all = f->all_logits,
                                   .hidden = f->hidden ? f->hidden + (size_t)done * cf->hidden : NULL};
        COLI_TRY(c->d->ops->pipe_run(c->pipe, tokens + done, S, pos0 + done, c->rope, &out, &host, err));
        done += S;
    }
    if (counts) {
        /* the decoder's MoE layers: the MTP layer, when loaded, is MoE and not here */
        uint64_t pairs = (uint64_t)n * (uint64_t)cf->top_k * (uint64_t)(cf->n_moe_layers - (cf->n_layers - cf->n_trunk));
        counts->pairs += pairs;
        counts->dev_pairs[c->d->dev] += pairs - c->host_pairs;
    }
    return COLI_OK;
}

void coli__device_ctx_stats(const coli__device_ctx *c, int dev, coli_gpu_stats *s)
{
    if (!c || dev != c->d->dev)
        return;
    coli__gpu_pipe_stats ps;
    c->d->ops->pipe_stats(c->pipe, &ps);
    s->resident_dense_bytes = c->d->dense_bytes;
    s->kv_bytes = ps.kv_bytes;
    s->scratch_bytes = ps.scratch_bytes;
    s->steps = ps.steps;
    s->graph_launches = ps.graph_launches;
    s->host_syncs = ps.host_syncs;
    s->step_ns = ps.step_ns;
    for (int i = 0; i < COLI__GPU_N_PHASES && i < COLI_GPU_N_PHASES; i++)
        s->phase_ns[i] = ps.phase_ns[i];
}
