/* ffn.c - the feed-forward pieces: a MoE layer's routed experts (where
 * each runs is lib/tier/experts.c's business), with or without shared
 * experts, and the SwiGLU MLP of dense layers. */
#include "decoder/norm.h"
#include "decoder/pieces.h"

/* The routed experts' sum into b->o, and with shared (three matrices) the
 * shared experts' output into b->sy, in the same hand-outs. */
static coli_status run_experts(coli__pass *b, const coli__layer *ly, int l, const coli__mat *shared)
{
    COLI_TRY(b->d->pieces->router->route(b, ly, b->sel, b->wts));
    coli__moe_io io = {
        .xn = b->xn,
        .S = b->S,
        .sel = b->sel,
        .wts = b->wts,
        .xe = b->xe,
        .ye = b->ye,
        .g = b->g,
        .u = b->u,
        .rows = b->rows,
        .pos = b->pos,
        .out = b->o,
        .pred_layer = b->pred_layer,
        .n_pred = b->n_pred,
        .pred = b->pred,
        .group = b->group,
        .shared = shared,
        .shared_g = b->g + (size_t)b->S * (size_t)b->d->cfg->top_k * (size_t)b->d->cfg->moe_inter,
        .shared_u = b->u + (size_t)b->S * (size_t)b->d->cfg->top_k * (size_t)b->d->cfg->moe_inter,
        .shared_y = b->sy,
    };
    b->n_pred = 0;
    if (shared)
        b->read += coli__mat_bytes(&shared[0]) + coli__mat_bytes(&shared[1]) + coli__mat_bytes(&shared[2]);
    return b->d->experts.run(b->d->experts.user, l, b->pool, &io, &b->read, b->counts, b->err);
}

static coli_status routed(coli__pass *b, const coli__layer *ly, int l)
{
    return run_experts(b, ly, l, NULL);
}

/* Streaming experts: while layer l runs, guess the next MoE layer's
 * experts by applying its norm and router to the current hidden state
 * (one token; the routing of a layer is much like the next one's) and
 * start reading them. Only reads depend on the guess, never a value. */
static coli_status lookahead(coli__pass *b, int l)
{
    const coli__decoder *d = b->d;
    const coli__config *c = d->cfg;
    const int H = c->hidden, E = c->n_experts, K = c->top_k;
    if (!d->experts.lookahead || !d->experts.lookahead(d->experts.user))
        return COLI_OK;
    int next = l + 1;
    while (next < b->end && !c->is_moe[next])
        next++;
    /* scratch: xe is free until this layer's experts run */
    if (b->S != 1 || next >= b->end || (size_t)K * H < (size_t)H + 3 * (size_t)E)
        return COLI_OK;
    const coli__layer *ly = &d->w->layers[next];
    float *xn = b->xe, *rl = b->xe + H;
    coli__rmsnorm(d->cpuk, xn, b->x, ly->ffn_norm, H, c->rms_eps);
    /* wts is this layer's, filled only after this */
    COLI_TRY(d->pieces->router->guess(d, b->pool, ly, xn, rl, b->pred, b->wts));
    b->pred_layer = next;
    b->n_pred = K;
    return COLI_OK;
}

static coli_status load_routed(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    (void)c;
    return L->experts(L->L, l, ly);
}

static void describe_routed(const coli__describer *D, const coli__config *c, const coli__layer *ly,
                            coli__gpu_layer *gl)
{
    (void)D;
    (void)c;
    (void)ly;
    gl->moe = COLI_MOE_ROUTED;
}

const coli__ffn_piece coli__moe_routed = {
    .name = "routed experts",
    .load = load_routed,
    .describe = describe_routed,
    .prepare = lookahead,
    .run = routed,
};

/* down(silu(gate x) * up x) of b->xn into y. */
static coli_status mlp(coli__pass *b, const coli__mat *gate, const coli__mat *up, const coli__mat *down, float *y)
{
    coli__mm t = {.w = gate, .x = b->xn, .n_tok = b->S, .y = b->g, .up = up, .y_up = b->u};
    COLI_TRY(coli__pass_mm_multi(b, &t, 1));
    return coli__pass_mm(b, down, b->g, b->S, y);
}

static coli_status swiglu(coli__pass *b, const coli__layer *ly, int l)
{
    (void)l;
    return mlp(b, &ly->gate, &ly->up, &ly->down, b->o);
}

static coli_status load_swiglu(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    const int H = c->hidden;
    COLI_TRY(L->mat(L->L, &ly->gate, COLI_T_GATE, l, c->inter, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    COLI_TRY(L->mat(L->L, &ly->up, COLI_T_UP, l, c->inter, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
    return L->mat(L->L, &ly->down, COLI_T_DOWN, l, H, c->inter, COLI_MAT_BIG, COLI_ROLE_DENSE);
}

static void describe_swiglu(const coli__describer *D, const coli__config *c, const coli__layer *ly,
                            coli__gpu_layer *gl)
{
    (void)c;
    gl->mlp = COLI_MLP_SWIGLU;
    gl->gate = D->mat(D->D, &ly->gate);
    gl->up = D->mat(D->D, &ly->up);
    gl->down = D->mat(D->D, &ly->down);
}

const coli__ffn_piece coli__mlp_swiglu = {
    .name = "swiglu",
    .load = load_swiglu,
    .describe = describe_swiglu,
    .prepare = NULL,
    .run = swiglu,
};

/* The routed experts' sum, then the shared experts' output added to it
 * (docs/formats.md): transformers' routed + shared. The shared experts
 * run in the routed experts' hand-outs to the threads. */
static coli_status routed_shared(coli__pass *b, const coli__layer *ly, int l)
{
    const coli__mat shared[3] = {ly->s_gate, ly->s_up, ly->s_down};
    COLI_TRY(run_experts(b, ly, l, shared));
    for (size_t i = 0; i < (size_t)b->S * (size_t)b->d->cfg->hidden; i++)
        b->o[i] += b->sy[i];
    return COLI_OK;
}

/* The shared experts, resident like the dense MLP (every token runs
 * them), then the routed ones. */
static coli_status load_routed_shared(const coli__piece_loader *L, const coli__config *c, int l, coli__layer *ly)
{
    const int H = c->hidden, SI = c->shared_inter;
    if (SI > 0) { /* n_shared_experts may be 0 */
        COLI_TRY(L->mat(L->L, &ly->s_gate, COLI_T_S_GATE, l, SI, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
        COLI_TRY(L->mat(L->L, &ly->s_up, COLI_T_S_UP, l, SI, H, COLI_MAT_BIG, COLI_ROLE_DENSE));
        COLI_TRY(L->mat(L->L, &ly->s_down, COLI_T_S_DOWN, l, H, SI, COLI_MAT_BIG, COLI_ROLE_DENSE));
    }
    return L->experts(L->L, l, ly);
}

static void describe_routed_shared(const coli__describer *D, const coli__config *c, const coli__layer *ly,
                                   coli__gpu_layer *gl)
{
    gl->moe = COLI_MOE_ROUTED;
    if (c->shared_inter <= 0)
        return; /* none: the device runs the routed experts alone */
    gl->moe = COLI_MOE_ROUTED_SHARED;
    gl->s_gate = D->mat(D->D, &ly->s_gate);
    gl->s_up = D->mat(D->D, &ly->s_up);
    gl->s_down = D->mat(D->D, &ly->s_down);
}

const coli__ffn_piece coli__moe_routed_shared = {
    .name = "routed and shared experts",
    .load = load_routed_shared,
    .describe = describe_routed_shared,
    .prepare = lookahead,
    .run = routed_shared,
};
