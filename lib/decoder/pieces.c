/* pieces.c - from a family's enums to the code of its pieces. */
#include "decoder/pieces.h"

static const coli__attn_piece *const attn[COLI_ATTN_KINDS] = {
    [COLI_ATTN_GQA] = &coli__attn_gqa,
    [COLI_ATTN_MLA] = &coli__attn_mla,
};
static const coli__router_piece *const router[COLI_ROUTER_KINDS] = {
    [COLI_ROUTER_SOFTMAX_TOPK] = &coli__router_softmax_topk,
    [COLI_ROUTER_SIGMOID_GROUP] = &coli__router_sigmoid_group,
};
static const coli__ffn_piece *const moe[COLI_MOE_KINDS] = {
    [COLI_MOE_ROUTED] = &coli__moe_routed,
    [COLI_MOE_ROUTED_SHARED] = &coli__moe_routed_shared,
};
static const coli__ffn_piece *const mlp[COLI_MLP_KINDS] = {
    [COLI_MLP_SWIGLU] = &coli__mlp_swiglu,
};

coli_status coli__pieces_pick(const coli__config *c, coli__pieces *p, coli__err *err)
{
    const coli__family *f = c->family;
    p->attn = (unsigned)f->attn < COLI_ATTN_KINDS ? attn[f->attn] : NULL;
    p->router = (unsigned)f->router < COLI_ROUTER_KINDS ? router[f->router] : NULL;
    p->moe = (unsigned)f->moe < COLI_MOE_KINDS ? moe[f->moe] : NULL;
    p->mlp = (unsigned)f->mlp < COLI_MLP_KINDS ? mlp[f->mlp] : NULL;
    const char *missing = !p->attn     ? "attention"
                          : !p->router ? "router"
                          : !p->moe    ? "MoE block"
                          : !p->mlp    ? "MLP"
                                       : NULL;
    if (missing)
        return coli__fail(err, COLI_EUNSUPPORTED, "architecture %s: its %s is not built into this library", f->arch,
                          missing);
    return COLI_OK;
}
