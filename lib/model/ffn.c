/* ffn.c - the feed-forward pieces: a MoE layer's routed experts (where
 * each runs is lib/model/experts.c's business), and the SwiGLU MLP of
 * dense layers. */
#include "model/experts.h"
#include "model/norm.h"
#include "model/pieces.h"

static coli_status routed(coli__pass *b, const coli__layer *ly, int l)
{
    COLI_TRY(b->m->pieces.router->route(b, ly, b->sel, b->wts));
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
    };
    b->n_pred = 0;
    COLI_TRY(coli__experts_run(b->m, l, b->pool, &io, &b->read, b->counts, b->err));
    /* shared experts, for a family that has them, add to b->o here */
    return COLI_OK;
}

/* Streaming experts: while layer l runs, guess the next MoE layer's
 * experts by applying its norm and router to the current hidden state
 * (one token; the routing of a layer is much like the next one's) and
 * start reading them. Only reads depend on the guess, never a value. */
static coli_status lookahead(coli__pass *b, int l)
{
    const struct coli_model *m = b->m;
    const coli__config *c = &m->cfg;
    const int H = c->hidden, E = c->n_experts, K = c->top_k;
    if (!coli__experts_lookahead(m))
        return COLI_OK;
    int next = l + 1;
    while (next < c->n_layers && !c->is_moe[next])
        next++;
    /* scratch: xe is free until this layer's experts run */
    if (b->S != 1 || next >= c->n_layers || (size_t)K * H < (size_t)H + (size_t)E)
        return COLI_OK;
    const coli__layer *ly = &m->w.layers[next];
    float *xn = b->xe, *rl = b->xe + H;
    coli__rmsnorm(m->cpuk, xn, b->x, ly->ffn_norm, H, c->rms_eps);
    /* wts is this layer's, filled only after this */
    COLI_TRY(m->pieces.router->guess(m, b->pool, ly, xn, rl, b->pred, b->wts));
    b->pred_layer = next;
    b->n_pred = K;
    return COLI_OK;
}

const coli__ffn_piece coli__moe_routed = {
    .prepare = lookahead,
    .run = routed,
};

static coli_status swiglu(coli__pass *b, const coli__layer *ly, int l)
{
    (void)l;
    coli__mm t = {.w = &ly->gate, .x = b->xn, .n_tok = b->S, .y = b->g, .up = &ly->up, .y_up = b->u};
    COLI_TRY(coli__pass_mm_multi(b, &t, 1));
    return coli__pass_mm(b, &ly->down, b->g, b->S, b->o);
}

const coli__ffn_piece coli__mlp_swiglu = {
    .prepare = NULL,
    .run = swiglu,
};
