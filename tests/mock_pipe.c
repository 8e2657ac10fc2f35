/* mock_pipe.c - the device decoder of lib/gpu/backend.h (pipe_*) on the
 * host, for tests: a second implementation of docs/formats.md's written
 * order (RMSNorm, the q/k/v biases, the q/k norms and clipping, RoPE of
 * the first rot_dim dimensions from the host's tables, the KV cache,
 * attention in tiles of 256, the router's softmax and top-k or the sigmoid
 * router with its correction bias, groups and scale, the experts'
 * combination, the shared experts, dense SwiGLU layers; and latent
 * attention in its absorbed form, with one cache row [c ; k] a position),
 * written from the text and not from lib/, over the mock's resident
 * tensors (products through coli__matmul, as the mock's experts; the
 * absorption's weights dequantized here, from the format's text). The
 * experts a layer does
 * not hold go to the host through coli__gpu_host, one token at a time.
 * Memory counts against the mock device's capacity, and every run is a
 * call that fault injection can fail. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fp16.h"
#include "cpu/kernels.h"
#include "cpu/silu.h"
#include "mock_gpu.h"

struct coli__gpu_pipe {
    coli__gpu *g;
    coli__gpu_net net;
    coli__gpu_layer *layers;
    int n_ctx, bf16;
    uint64_t bytes;
    /* GQA: [L][n_ctx][kvd] keys and values; MLA (net.mla.row > 0): kc
     * alone, [L][n_ctx][row] rows [c ; k]; as stored (bf16-rounded when
     * bf16) */
    float *kc, *vc;
    coli__gpu_pipe_stats st;
};

/* ---- the written order, from docs/formats.md -------------------------- */

static float tree32(const float *P)
{
    float u[8];
    for (int l = 0; l < 8; l++)
        u[l] = (P[l] + P[l + 16]) + (P[l + 8] + P[l + 24]);
    return ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
}

static float dot(const float *w, const float *x, int n)
{
    float P[32] = {0};
    for (int i = 0; i < n; i++)
        P[i % 32] = fmaf(w[i], x[i], P[i % 32]);
    return tree32(P);
}

static float sum32(const float *a, int n)
{
    float P[32] = {0};
    for (int j = 0; j < n; j++)
        P[j % 32] = P[j % 32] + a[j];
    return tree32(P);
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    float r = 1.0f / sqrtf(dot(x, x, n) / (float)n + eps);
    for (int i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}

static float kv_round(float v, int bf16)
{
    return bf16 ? coli__bf16_bits_to_f32(coli__f32_to_bf16_bits(v)) : v;
}

/* One head of one token: keys (kd values) and values (vd values) of
 * positions lo .. pos, each position's row stride values after the one
 * before it (values may be the keys' own rows). */
static void attend(const float *q, const float *kc, const float *vc, int stride, int lo, int pos, int kd, int vd,
                   float scale, float *o, float *a)
{
    const int n = pos - lo + 1, T = 256;
    float m = -INFINITY;
    for (int j = 0; j < n; j++) {
        a[j] = dot(q, kc + (size_t)(lo + j) * stride, kd) * scale;
        m = a[j] > m ? a[j] : m;
    }
    for (int j = 0; j < n; j++)
        a[j] = coli__exp_f32(a[j] - m);
    float Z = 0.0f;
    for (int t = 0; t * T < n; t++) {
        int len = n - t * T < T ? n - t * T : T;
        float z = sum32(a + t * T, len);
        Z = t == 0 ? z : Z + z;
    }
    const float inv = 1.0f / Z;
    for (int j = 0; j < n; j++)
        a[j] = a[j] * inv;
    for (int i = 0; i < vd; i++) {
        float acc = 0.0f;
        for (int t = 0; t * T < n; t++) {
            float O[8] = {0};
            for (int j = t * T; j < n && j < (t + 1) * T; j++)
                O[j % 8] = fmaf(a[j], vc[(size_t)(lo + j) * stride + i], O[j % 8]);
            float U = ((O[0] + O[4]) + (O[2] + O[6])) + ((O[1] + O[5]) + (O[3] + O[7]));
            acc = t == 0 ? U : acc + U;
        }
        o[i] = acc;
    }
}

/* Softmax, top-k (ties: the lowest e) and the renormalisation. */
static void route(float *l, int E, int K, int norm, int *sel, float *w)
{
    float m = -INFINITY;
    for (int e = 0; e < E; e++)
        m = l[e] > m ? l[e] : m;
    for (int e = 0; e < E; e++)
        l[e] = coli__exp_f32(l[e] - m);
    float Z = sum32(l, E);
    for (int e = 0; e < E; e++)
        l[e] = l[e] / Z;
    for (int j = 0; j < K; j++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (l[e] >= 0.0f && (b < 0 || l[e] > l[b]))
                b = e;
        sel[j] = b;
        w[j] = l[b];
        l[b] = -1.0f;
    }
    if (norm) {
        float s = 0.0f;
        for (int j = 0; j < K; j++)
            s = s + w[j];
        for (int j = 0; j < K; j++)
            w[j] = w[j] / s;
    }
}

/* The sigmoid router: s_e = 1 / (1 + e(-l_e)) into l; c_e = s_e + b_e
 * (b NULL: c_e = s_e) only chooses; with G > 1 groups of E / G experts,
 * the TG best by the sum of their two largest c are kept and the others'
 * c are -inf; top-k of c (ties: the lowest e); the unbiased weights,
 * normalised with + 1e-20f, times scale. c [E], gs [G], taken [E]. */
static void route_sigmoid(float *l, const float *b, int E, int K, int G, int TG, int norm, float scale, float *c,
                          float *gs, unsigned char *taken, int *sel, float *w)
{
    for (int e = 0; e < E; e++) {
        l[e] = 1.0f / (1.0f + coli__exp_f32(-l[e]));
        c[e] = b ? l[e] + b[e] : l[e];
    }
    if (G > 1) {
        const int per = E / G;
        for (int g = 0; g < G; g++) {
            const float *cg = c + g * per;
            int a = 0;
            for (int i = 1; i < per; i++)
                if (cg[i] > cg[a])
                    a = i;
            int s2 = -1;
            for (int i = 0; i < per; i++)
                if (i != a && (s2 < 0 || cg[i] > cg[s2]))
                    s2 = i;
            gs[g] = s2 < 0 ? cg[a] : cg[a] + cg[s2];
            taken[g] = 0;
        }
        for (int t = 0; t < TG; t++) {
            int bg = -1;
            for (int g = 0; g < G; g++)
                if (!taken[g] && (bg < 0 || gs[g] > gs[bg]))
                    bg = g;
            taken[bg] = 1;
        }
        for (int e = 0; e < E; e++)
            if (!taken[e / per])
                c[e] = -INFINITY;
    }
    for (int e = 0; e < E; e++)
        taken[e] = 0;
    for (int j = 0; j < K; j++) {
        int bi = -1;
        for (int e = 0; e < E; e++)
            if (!taken[e] && (bi < 0 || c[e] > c[bi]))
                bi = e;
        taken[bi] = 1;
        sel[j] = bi;
        w[j] = l[bi];
    }
    if (norm) {
        float d = 0.0f;
        for (int j = 0; j < K; j++)
            d = d + w[j];
        d = d + 1e-20f;
        for (int j = 0; j < K; j++)
            w[j] = w[j] / d;
    }
    for (int j = 0; j < K; j++)
        w[j] = w[j] * scale;
}

/* ---- the pipe ------------------------------------------------------------ */

static const float *vec(coli__gpu *g, int h)
{
    const coli__mat *m = mock_gpu_mat(g, h);
    return m && m->dt == COLI_DT_F32 ? (const float *)m->data : NULL;
}

static coli_status mm(coli__gpu *g, int h, const float *x, float *y, coli__err *err)
{
    const coli__mat *m = mock_gpu_mat(g, h);
    if (!m)
        return coli__fail(err, COLI_EINVAL, "mock pipe: no tensor %d", h);
    return coli__matmul(NULL, NULL, m, x, 1, y);
}

/* A resident f32 vector of at least n values (one row of a matrix), or a
 * failure naming it. */
static coli_status need_vec(coli__gpu *g, int h, size_t n, int l, const char *what, const float **out,
                            coli__err *err)
{
    const coli__mat *m = mock_gpu_mat(g, h);
    *out = NULL;
    if (!m || m->dt != COLI_DT_F32 || !m->data)
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d's %s (tensor %d) is not a resident f32 vector", l,
                          what, h);
    if ((size_t)m->rows * (size_t)m->cols < n)
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d's %s (tensor %d) has %d x %d values, not %zu", l,
                          what, h, m->rows, m->cols, n);
    *out = (const float *)m->data;
    return COLI_OK;
}

/* y = down(swiglu(gate x, up x)): a dense MLP, an expert, or the shared
 * experts; f is the width the scratch g, u holds. */
static coli_status swiglu_mlp(coli__gpu *g, int hg, int hu, int hd, int f, const float *x, float *sg, float *su,
                              float *y, coli__err *err)
{
    const coli__mat *G = mock_gpu_mat(g, hg);
    if (!G)
        return coli__fail(err, COLI_EINVAL, "mock pipe: no tensor %d", hg);
    if (G->rows > f)
        return coli__fail(err, COLI_EINVAL, "mock pipe: an MLP of width %d beyond the scratch's %d", G->rows, f);
    COLI_TRY(mm(g, hg, x, sg, err));
    COLI_TRY(mm(g, hu, x, su, err));
    for (int i = 0; i < G->rows; i++)
        sg[i] = coli__swiglu(sg[i], su[i]);
    return mm(g, hd, sg, y, err);
}


/* Values of the cache: keys and values of every KV head, or with latent
 * attention one row [c ; k] of mla.row values a layer and position. */
static uint64_t kv_values(const coli__gpu_net *n, int n_ctx)
{
    if (n->mla.row > 0)
        return (uint64_t)n->n_layers * (uint64_t)n_ctx * (uint64_t)n->mla.row;
    return 2 * (uint64_t)n->n_layers * (uint64_t)n_ctx * (uint64_t)n->n_kv_heads * (uint64_t)n->head_dim;
}

static uint64_t m_pipe_bytes(const coli__gpu_net *n, const coli__gpu_pipe_params *p)
{
    return kv_values(n, p->n_ctx) * (p->kv_dt == COLI_DT_BF16 ? 2 : 4);
}

static void m_pipe_free(coli__gpu_pipe *p)
{
    if (!p)
        return;
    mock_gpu_unreserve(p->g, p->net.dev, p->bytes);
    free(p->kc);
    free(p->vc);
    free(p->layers);
    free(p);
}

static coli_status m_pipe_create(coli__gpu *g, const coli__gpu_net *net, const coli__gpu_pipe_params *p,
                                 coli__gpu_pipe **out, coli__err *err)
{
    *out = NULL;
    uint64_t b = m_pipe_bytes(net, p);
    COLI_TRY(mock_gpu_reserve(g, net->dev, b, err));
    coli__gpu_pipe *pp = calloc(1, sizeof *pp);
    /* GQA: keys and values, half the values each; MLA: the rows alone */
    const int latent = net->mla.row > 0;
    size_t kv = (size_t)kv_values(net, p->n_ctx), kn = latent ? kv : kv / 2, vn = latent ? 0 : kv / 2;
    if (pp) {
        pp->layers = malloc((size_t)net->n_layers * sizeof *pp->layers);
        pp->kc = calloc(kn ? kn : 1, sizeof(float));
        pp->vc = calloc(vn ? vn : 1, sizeof(float));
    }
    if (!pp || !pp->layers || !pp->kc || !pp->vc) {
        if (pp) {
            free(pp->layers);
            free(pp->kc);
            free(pp->vc);
            free(pp);
        }
        mock_gpu_unreserve(g, net->dev, b);
        return coli__fail(err, COLI_ENOMEM, "mock pipe: out of memory");
    }
    pp->g = g;
    pp->net = *net;
    memcpy(pp->layers, net->layers, (size_t)net->n_layers * sizeof *pp->layers);
    pp->net.layers = pp->layers;
    pp->n_ctx = p->n_ctx;
    pp->bf16 = p->kv_dt == COLI_DT_BF16;
    pp->bytes = b;
    pp->st.kv_bytes = b;
    *out = pp;
    return COLI_OK;
}

/* Scratch of one token. */
typedef struct tok {
    float *x, *xn, *q, *k, *v, *att, *o, *a, *rl, *g, *u, *y, *yh, *w, *c, *gs;
    float *kv, *qa, *qc, *lat, *tmp; /* latent attention: [row], [q_lora], [row], [kv_lora], [rope] */
    int *sel;
    unsigned char *host, *taken;
    int f; /* width of g and u */
} tok;

/* ---- latent attention (docs/formats.md, "Latent attention") ------------- */

/* w(r, i): the value of weight (r, i) of a resident matrix in the row
 * layout, as "Quantized matrices" defines it: f32 as is, bf16 widened; q8
 * d * q; q4 the nibble u, d * (u - 8), d the scale of its group; q2 the two
 * bits q, d * q + m, two roundings; fp16 scales and minimums widened. */
static float wval(const coli__mat *m, int r, int i)
{
    const size_t cols = (size_t)m->cols, at = (size_t)r * cols + (size_t)i;
    switch (m->dt) {
    case COLI_DT_F32:
        return ((const float *)m->data)[at];
    case COLI_DT_BF16:
        return coli__bf16_bits_to_f32(((const uint16_t *)m->data)[at]);
    case COLI_DT_Q8: {
        const float d = coli__f16_bits_to_f32(m->q.d[at / 32]);
        const int q = (int)(signed char)m->q.qs[at];
        return d * (float)q;
    }
    case COLI_DT_Q4: {
        const size_t G = (size_t)m->q.group;
        const int c = i % 32;
        const uint8_t b = m->q.qs[(size_t)r * (cols / 2) + (size_t)(i / 32) * 16 + (size_t)(c % 16)];
        const int u = c < 16 ? b & 15 : b >> 4;
        const float d = coli__f16_bits_to_f32(m->q.d[(size_t)r * (cols / G) + (size_t)i / G]);
        return d * (float)(u - 8);
    }
    case COLI_DT_Q2: {
        const int c = i % 32;
        const uint8_t b = m->q.qs[(size_t)r * (cols / 4) + (size_t)(i / 32) * 8 + (size_t)(c % 8)];
        const int q = (b >> (2 * (c / 8))) & 3;
        const float d = coli__f16_bits_to_f32(m->q.d[at / 32]), mn = coli__f16_bits_to_f32(m->q.m[at / 32]);
        const float dq = d * (float)q;
        return dq + mn;
    }
    default:
        return NAN;
    }
}

/* Rows r0 .. r0 + n - 1 of a resident matrix in the row layout, as a
 * matrix of their own (its products are those rows' of m): 0 for a
 * format or layout the mock cannot cut. */
static int rows_of(const coli__mat *m, int r0, int n, coli__mat *out)
{
    const size_t cols = (size_t)m->cols, r = (size_t)r0;
    *out = *m;
    out->rows = n;
    switch (m->dt) {
    case COLI_DT_F32:
        out->data = (const float *)m->data + r * cols;
        return 1;
    case COLI_DT_BF16:
        out->data = (const uint16_t *)m->data + r * cols;
        return 1;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2: {
        if (m->q.layout != COLI__QL_ROWS)
            return 0;
        const size_t bits = m->dt == COLI_DT_Q8 ? 8 : m->dt == COLI_DT_Q4 ? 4 : 2;
        const size_t G = m->dt == COLI_DT_Q4 ? (size_t)m->q.group : 32;
        out->q.rows = n;
        out->q.qs = m->q.qs + r * cols * bits / 8;
        out->q.d = m->q.d + r * (cols / G);
        out->q.m = m->dt == COLI_DT_Q2 ? m->q.m + r * (cols / 32) : NULL;
        return 1;
    }
    default:
        return 0;
    }
}

/* A resident matrix of rows x cols (into *out unless out is NULL), or a
 * failure naming it. */
static coli_status need_mat(coli__gpu *g, int h, int rows, int cols, int l, const char *what, const coli__mat **out,
                            coli__err *err)
{
    const coli__mat *m = mock_gpu_mat(g, h);
    if (out)
        *out = m;
    if (!m)
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d's %s (tensor %d) is not resident", l, what, h);
    if (m->rows != rows || m->cols != cols)
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d's %s is [%d, %d], not [%d, %d]", l, what, m->rows,
                          m->cols, rows, cols);
    return COLI_OK;
}

/* Even offsets, then odd (tmp: rot values), then rotate-half with rot
 * values of the table cs (cos, then sin). */
static void mla_rope(float *v, int rot, int interleave, const float *cs, float *tmp)
{
    const int half = rot / 2;
    if (interleave) {
        for (int i = 0; i < half; i++) {
            tmp[i] = v[2 * i];
            tmp[half + i] = v[2 * i + 1];
        }
        memcpy(v, tmp, (size_t)rot * sizeof(float));
    }
    for (int i = 0; i < half; i++) {
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[i] - x1 * cs[half + i];
        v[i + half] = x1 * cs[i] + x0 * cs[half + i];
    }
}

/* Latent attention of xn, steps 1-8 of the text in order, through o_proj,
 * into o. The cache row of pos is [c ; k], the net's row values. */
static coli_status mla(coli__gpu_pipe *pp, const coli__gpu_layer *ly, int l, int pos, const float *cs, tok *s,
                       coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const coli__gpu_mla *a = &ly->mla;
    const int nh = n->n_heads, H = n->hidden, L = a->kv_lora, R = a->rope, N = a->nope, V = a->v_dim, QL = a->q_lora;
    const int row = n->mla.row, QH = N + R;
    const coli__gpu_mla *nm = &n->mla; /* sizes the cache and the scratch */
    if (L <= 0 || R <= 0 || R % 2 || N < 0 || V <= 0 || QL < 0 || row != L + R || a->row != row ||
        R != n->rot_dim || nh <= 0 || nm->kv_lora != L || nm->rope != R || nm->nope != N || nm->v_dim != V ||
        nm->q_lora != QL)
        return coli__fail(err, COLI_EINVAL,
                          "mock pipe: layer %d's latent attention: kv_lora %d, rope %d, nope %d, v_dim %d, q_lora %d, "
                          "row %d (the net's %d), rot_dim %d, %d heads",
                          l, L, R, N, V, QL, a->row, row, n->rot_dim, nh);
    const coli__mat *KVB;
    const float *kvn, *qan = NULL;
    COLI_TRY(need_mat(pp->g, ly->kv_a, row, H, l, "kv_a_proj_with_mqa", NULL, err));
    COLI_TRY(need_mat(pp->g, ly->wq, nh * QH, QL ? QL : H, l, QL ? "q_b_proj" : "q_proj", NULL, err));
    COLI_TRY(need_mat(pp->g, ly->kv_b, nh * (N + V), L, l, "kv_b_proj", &KVB, err));
    COLI_TRY(need_mat(pp->g, ly->wo, H, nh * V, l, "o_proj", NULL, err));
    COLI_TRY(need_vec(pp->g, ly->kv_a_norm, (size_t)L, l, "kv_a_layernorm", &kvn, err));
    if (QL) {
        COLI_TRY(need_mat(pp->g, ly->q_a, QL, H, l, "q_a_proj", NULL, err));
        COLI_TRY(need_vec(pp->g, ly->q_a_norm, (size_t)QL, l, "q_a_layernorm", &qan, err));
    }
    /* 1. the latent and the query */
    COLI_TRY(mm(pp->g, ly->kv_a, s->xn, s->kv, err));
    if (QL) {
        COLI_TRY(mm(pp->g, ly->q_a, s->xn, s->qa, err));
        rmsnorm(s->qa, s->qa, qan, QL, a->eps);
        COLI_TRY(mm(pp->g, ly->wq, s->qa, s->q, err));
    } else {
        COLI_TRY(mm(pp->g, ly->wq, s->xn, s->q, err));
    }
    /* 2. c normed; k = kv[L ..) */
    rmsnorm(s->kv, s->kv, kvn, L, a->eps);
    /* 3. k and every head's qr reordered and rotated, rot = R */
    mla_rope(s->kv + L, R, a->interleave, cs, s->tmp);
    for (int h = 0; h < nh; h++)
        mla_rope(s->q + (size_t)h * QH + N, R, a->interleave, cs, s->tmp);
    /* 4. the cache row [c ; k] */
    float *kc = pp->kc + (size_t)l * pp->n_ctx * row;
    for (int i = 0; i < row; i++)
        kc[(size_t)pos * row + i] = kv_round(s->kv[i], pp->bf16);
    for (int h = 0; h < nh; h++) {
        const float *qn = s->q + (size_t)h * QH;
        /* 5. absorption: u_h from +0, d = 0 .. N - 1 in order; the query [u_h ; qr_h] */
        for (int i = 0; i < L; i++)
            s->qc[i] = 0.0f;
        for (int d = 0; d < N; d++)
            for (int i = 0; i < L; i++)
                s->qc[i] = fmaf(qn[d], wval(KVB, h * (N + V) + d, i), s->qc[i]);
        memcpy(s->qc + L, qn + N, (size_t)R * sizeof(float));
        /* 6. one KV head: keys the cached rows (L + R), values their first L */
        attend(s->qc, kc, kc, row, 0, pos, row, L, a->scale, s->lat, s->a);
        /* 7. the head's value rows times o_h (quantized as an activation
         * for a quantized kv_b) */
        coli__mat Wv;
        if (!rows_of(KVB, h * (N + V) + N, V, &Wv))
            return coli__fail(err, COLI_EUNSUPPORTED, "mock pipe: layer %d's kv_b_proj (%s) cannot be cut into heads",
                              l, coli__dtype_name(KVB->dt));
        COLI_TRY(coli__matmul(NULL, NULL, &Wv, s->lat, 1, s->att + (size_t)h * V));
    }
    /* 8. o_proj of the heads' outputs side by side */
    return mm(pp->g, ly->wo, s->att, s->o, err);
}

/* Grouped-query attention of xn, through the output projection, into o. */
static coli_status gqa(coli__gpu_pipe *pp, const coli__gpu_layer *ly, int l, int pos, const float *cs, tok *s,
                       coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const int hd = n->head_dim, nh = n->n_heads, nkv = n->n_kv_heads;
    const int QD = nh * hd, KVD = nkv * hd, half = n->rot_dim / 2;
    COLI_TRY(mm(pp->g, ly->wq, s->xn, s->q, err));
    COLI_TRY(mm(pp->g, ly->wk, s->xn, s->k, err));
    COLI_TRY(mm(pp->g, ly->wv, s->xn, s->v, err));
    /* the biases, only where there are some (+0 would make -0 +0) */
    const int bh[3] = {ly->bq, ly->bk, ly->bv}, bn[3] = {QD, KVD, KVD};
    float *const bd[3] = {s->q, s->k, s->v};
    static const char *const bname[3] = {"q bias", "k bias", "v bias"};
    for (int t = 0; t < 3; t++) {
        if (bh[t] < 0)
            continue;
        const float *b;
        COLI_TRY(need_vec(pp->g, bh[t], (size_t)bn[t], l, bname[t], &b, err));
        for (int i = 0; i < bn[t]; i++)
            bd[t][i] = bd[t][i] + b[i];
    }
    if (ly->qk_norm == 1 || ly->qk_norm == 2) {
        const int per = ly->qk_norm == 1;
        const float *qn, *kn;
        COLI_TRY(need_vec(pp->g, ly->q_norm, (size_t)(per ? hd : QD), l, "q norm", &qn, err));
        COLI_TRY(need_vec(pp->g, ly->k_norm, (size_t)(per ? hd : KVD), l, "k norm", &kn, err));
        if (per) {
            for (int h = 0; h < nh; h++)
                rmsnorm(s->q + h * hd, s->q + h * hd, qn, hd, n->eps);
            for (int h = 0; h < nkv; h++)
                rmsnorm(s->k + h * hd, s->k + h * hd, kn, hd, n->eps);
        } else {
            rmsnorm(s->q, s->q, qn, QD, n->eps);
            rmsnorm(s->k, s->k, kn, KVD, n->eps);
        }
    }
    if (ly->clip_qkv > 0) {
        const float c = ly->clip_qkv;
        for (int i = 0; i < QD; i++)
            s->q[i] = s->q[i] < -c ? -c : s->q[i] > c ? c : s->q[i];
        for (int i = 0; i < KVD; i++) {
            s->k[i] = s->k[i] < -c ? -c : s->k[i] > c ? c : s->k[i];
            s->v[i] = s->v[i] < -c ? -c : s->v[i] > c ? c : s->v[i];
        }
    }
    /* rotate-half over the first rot_dim dimensions of every head of q
     * and k; rot_dim .. hd - 1 pass unchanged */
    for (int h = 0; h < nh + nkv; h++) {
        float *v = h < nh ? s->q + h * hd : s->k + (h - nh) * hd;
        for (int i = 0; i < half; i++) {
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cs[i] - x1 * cs[half + i];
            v[i + half] = x1 * cs[i] + x0 * cs[half + i];
        }
    }
    float *kc = pp->kc + (size_t)l * pp->n_ctx * KVD, *vc = pp->vc + (size_t)l * pp->n_ctx * KVD;
    for (int i = 0; i < KVD; i++) {
        kc[(size_t)pos * KVD + i] = kv_round(s->k[i], pp->bf16);
        vc[(size_t)pos * KVD + i] = kv_round(s->v[i], pp->bf16);
    }
    int lo = ly->window > 0 && pos - ly->window + 1 > 0 ? pos - ly->window + 1 : 0;
    for (int h = 0; h < nh; h++) {
        int kh = h / (nh / nkv);
        attend(s->q + h * hd, kc + kh * hd, vc + kh * hd, KVD, lo, pos, hd, hd, 1.0f / sqrtf((float)hd),
               s->att + h * hd, s->a);
    }
    return mm(pp->g, ly->wo, s->att, s->o, err);
}

static coli_status layer(coli__gpu_pipe *pp, int l, int pos, const float *cs, tok *s, const coli__gpu_host *host,
                         coli__err *err)
{
    const coli__gpu_net *n = &pp->net;
    const coli__gpu_layer *ly = &pp->layers[l];
    const int H = n->hidden, E = n->n_experts, K = n->top_k;
    const float *an = vec(pp->g, ly->attn_norm), *fn = vec(pp->g, ly->ffn_norm);
    if (!an || !fn)
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d's norms are not resident", l);
    /* net.mla.row > 0: every layer is latent attention, else none is */
    const int latent = n->mla.row > 0;
    if (ly->attn != (latent ? COLI_ATTN_MLA : COLI_ATTN_GQA))
        return coli__fail(err, COLI_EUNSUPPORTED, "mock pipe: layer %d's attention kind %d in a net %s latent attention",
                          l, (int)ly->attn, latent ? "of" : "without");
    rmsnorm(s->xn, s->x, an, H, n->eps);
    COLI_TRY(latent ? mla(pp, ly, l, pos, cs, s, err) : gqa(pp, ly, l, pos, cs, s, err));
    for (int i = 0; i < H; i++)
        s->x[i] = s->x[i] + s->o[i];
    rmsnorm(s->xn, s->x, fn, H, n->eps);
    if (!ly->is_moe) {
        if (ly->mlp != COLI_MLP_SWIGLU)
            return coli__fail(err, COLI_EUNSUPPORTED, "mock pipe: layer %d's MLP kind %d", l, (int)ly->mlp);
        COLI_TRY(swiglu_mlp(pp->g, ly->gate, ly->up, ly->down, s->f, s->xn, s->g, s->u, s->o, err));
        for (int i = 0; i < H; i++)
            s->x[i] = s->x[i] + s->o[i];
        return COLI_OK;
    }
    COLI_TRY(mm(pp->g, ly->router, s->xn, s->rl, err));
    const coli__gpu_route *rt = &ly->route;
    if (rt->kind == COLI_ROUTER_SOFTMAX_TOPK) {
        route(s->rl, E, K, rt->norm_topk, s->sel, s->w);
    } else if (rt->kind == COLI_ROUTER_SIGMOID_GROUP) {
        const int G = rt->n_group > 1 ? rt->n_group : 1;
        if (E % G != 0 || (G > 1 && (rt->topk_group < 1 || rt->topk_group > G)) || K > E)
            return coli__fail(err, COLI_EINVAL,
                              "mock pipe: layer %d's sigmoid router: %d experts, %d groups, %d kept, top %d", l, E,
                              rt->n_group, rt->topk_group, K);
        const float *b = NULL;
        if (rt->bias >= 0)
            COLI_TRY(need_vec(pp->g, rt->bias, (size_t)E, l, "router's correction bias", &b, err));
        route_sigmoid(s->rl, b, E, K, G, rt->topk_group, rt->norm_topk, rt->scale, s->c, s->gs, s->taken, s->sel,
                      s->w);
    } else {
        return coli__fail(err, COLI_EINVAL, "mock pipe: layer %d: no router of kind %d", l, (int)rt->kind);
    }
    int any = 0;
    for (int j = 0; j < K; j++) {
        const int *h = ly->experts + 3 * s->sel[j];
        s->host[j] = h[0] < 0;
        any |= s->host[j];
        if (s->host[j])
            continue;
        COLI_TRY(swiglu_mlp(pp->g, h[0], h[1], h[2], s->f, s->xn, s->g, s->u, s->y + (size_t)j * H, err));
    }
    if (any) {
        if (!host || !host->run)
            return coli__fail(err, COLI_EINVAL, "mock pipe: experts on the host and no host");
        COLI_TRY(host->run(host->user, l, s->xn, 1, s->sel, s->host, s->yh, err));
        pp->st.host_syncs++;
    }
    /* the shared experts: one SwiGLU of width shared_inter on the same
     * xn, into o (free since the attention's residual) */
    const int shared = ly->moe == COLI_MOE_ROUTED_SHARED;
    if (shared) {
        const coli__mat *SG = mock_gpu_mat(pp->g, ly->s_gate);
        if (ly->s_up < 0 || ly->s_down < 0 || !SG || SG->rows != n->shared_inter)
            return coli__fail(err, COLI_EINVAL,
                              "mock pipe: layer %d's shared experts: gate %d, up %d, down %d, width %d, net says %d",
                              l, ly->s_gate, ly->s_up, ly->s_down, SG ? SG->rows : -1, n->shared_inter);
        COLI_TRY(swiglu_mlp(pp->g, ly->s_gate, ly->s_up, ly->s_down, s->f, s->xn, s->g, s->u, s->o, err));
    }
    /* ascending expert order, from +0; then the shared experts' output;
     * then the residual */
    for (int i = 0; i < H; i++) {
        float o = 0.0f;
        for (int e = 0; e < E; e++)
            for (int j = 0; j < K; j++)
                if (s->sel[j] == e)
                    o = fmaf(s->w[j], (s->host[j] ? s->yh : s->y)[(size_t)j * H + i], o);
        if (shared)
            o = o + s->o[i];
        s->x[i] = s->x[i] + o;
    }
    return COLI_OK;
}

static coli_status m_pipe_run(coli__gpu_pipe *pp, const int32_t *tokens, int n, int pos0, const float *rope,
                              const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err)
{
    const coli__gpu_net *nt = &pp->net;
    if (n <= 0 || pos0 < 0 || pos0 + n > pp->n_ctx)
        return coli__fail(err, COLI_EINVAL, "mock pipe: %d tokens at %d in %d positions", n, pos0, pp->n_ctx);
    COLI_TRY(mock_gpu_call(pp->g, nt->dev, err));
    const int H = nt->hidden, QD = nt->n_heads * nt->head_dim, KVD = nt->n_kv_heads * nt->head_dim;
    const int K = nt->top_k > 0 ? nt->top_k : 1, E = nt->n_experts > 0 ? nt->n_experts : 1;
    int I = nt->inter > nt->moe_inter ? nt->inter : nt->moe_inter;
    I = nt->shared_inter > I ? nt->shared_inter : I;
    I = I > 0 ? I : 1;
    tok s;
    s.f = I;
    /* latent attention: q holds every head's nope + rope values, att every
     * head's v_dim; its own buffers (one value where there is none) */
    const coli__gpu_mla *ml = &nt->mla;
    const int latent = ml->row > 0, nh = nt->n_heads;
    const size_t MQ = latent && (size_t)nh * (size_t)(ml->nope + ml->rope) > (size_t)QD
                          ? (size_t)nh * (size_t)(ml->nope + ml->rope) : (size_t)QD;
    const size_t MA = latent && (size_t)nh * (size_t)ml->v_dim > (size_t)QD ? (size_t)nh * (size_t)ml->v_dim
                                                                             : (size_t)QD;
    const size_t ROW = latent ? (size_t)ml->row : 1, QLR = latent && ml->q_lora > 0 ? (size_t)ml->q_lora : 1;
    const size_t LAT = latent && ml->kv_lora > 0 ? (size_t)ml->kv_lora : 1;
    const size_t ROT = latent && ml->rope > 0 ? (size_t)ml->rope : 1;
    size_t fl[] = {H, H, MQ, KVD, KVD, MA, H, (size_t)pp->n_ctx, E, I, I, (size_t)K * H, (size_t)K * H, K, E, E,
                   ROW, QLR, ROW, LAT, ROT};
    float **dst[] = {&s.x,  &s.xn, &s.q, &s.k, &s.v,  &s.att, &s.o, &s.a,  &s.rl, &s.g,  &s.u,
                     &s.y, &s.yh, &s.w, &s.c, &s.gs, &s.kv,  &s.qa, &s.qc, &s.lat, &s.tmp};
    int ok = 1;
    for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++)
        ok &= (*dst[i] = malloc(fl[i] * sizeof(float))) != NULL;
    s.sel = malloc((size_t)K * sizeof(int));
    s.host = malloc((size_t)K);
    s.taken = malloc((size_t)E);
    coli_status st = ok && s.sel && s.host && s.taken ? COLI_OK
                                                      : coli__fail(err, COLI_ENOMEM, "mock pipe: out of memory");
    const coli__mat *emb = mock_gpu_mat(pp->g, nt->embed);
    for (int t = 0; t < n && st == COLI_OK; t++) {
        const size_t row = (size_t)tokens[t] * (size_t)H;
        for (int i = 0; i < H; i++)
            s.x[i] = emb->dt == COLI_DT_F32 ? ((const float *)emb->data)[row + i]
                                            : coli__bf16_bits_to_f32(((const uint16_t *)emb->data)[row + i]);
        for (int l = 0; l < nt->n_layers && st == COLI_OK; l++)
            st = layer(pp, l, pos0 + t, rope + (size_t)t * nt->rot_dim, &s, host, err);
        /* the final norm of every token wanted, then its logits */
        if (st == COLI_OK && (t == n - 1 || out->all || out->hidden)) {
            rmsnorm(s.xn, s.x, vec(pp->g, nt->final_norm), H, nt->eps);
            if (out->hidden)
                memcpy(out->hidden + (size_t)t * H, s.xn, (size_t)H * sizeof(float));
            if (t == n - 1 || out->all)
                st = mm(pp->g, nt->lm_head, s.xn, out->logits + (out->all ? (size_t)t * nt->vocab : 0), err);
        }
    }
    for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++)
        free(*dst[i]);
    free(s.sel);
    free(s.host);
    free(s.taken);
    if (st == COLI_OK) {
        pp->st.steps++;
        pp->st.tokens += (uint64_t)n;
        if (n == 1)
            pp->st.graph_launches++; /* what the device would replay */
    }
    return st;
}

static void m_pipe_stats(const coli__gpu_pipe *pp, coli__gpu_pipe_stats *out)
{
    *out = pp->st;
}

void mock_pipe_ops(coli__gpu_ops *ops)
{
    ops->pipe_bytes = m_pipe_bytes;
    ops->pipe_create = m_pipe_create;
    ops->pipe_free = m_pipe_free;
    ops->pipe_run = m_pipe_run;
    ops->pipe_stats = m_pipe_stats;
}
