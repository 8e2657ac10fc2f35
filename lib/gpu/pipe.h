/* pipe.h - a decoder pipe's state on its device, shared by the two files
 * of the pipeline (internal): pipe_build.cu makes a pipe (its sizes, its
 * buffers, its layers from the coli__gpu_net) and pipeline.cu runs its
 * steps. */
#ifndef COLI_GPU_PIPE_H
#define COLI_GPU_PIPE_H

#include "gpu/kern.h"

/* Products of one launch: n entries of one format from index first of the
 * pipe's table, rows at most. */
typedef struct launch {
    int dt, first, n, rows, cols; /* cols: of every product of the launch */
} launch;

typedef struct pl_layer {
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm;
    const float *bq, *bk, *bv; /* NULL: no biases */
    int qk_norm, window, moe;
    coli__route_dev route;
    float clip;
    launch qkv[3];
    int n_qkv, qkv_quant; /* launches; 1 when one reads quantized xn */
    launch wo, router, mlp_gu, mlp_down; /* mlp_*: the dense MLP, or a MoE layer's shared experts */
    int shared;   /* a MoE layer with shared experts */
    prod *views;  /* device [E * 3]: the experts' products (empty: the host's) */
    int dt1, dt2; /* formats of the resident experts' gate/up and down */
    int n_host;   /* experts of the layer the host computes */
    void *kc, *vc; /* latent attention: one cache (vc == kc) */
    /* latent attention (mla): qkv[] are q_a_proj (or q_proj) and
     * kv_a_proj_with_mqa; q_b the query's second product; vb the heads'
     * value rows of kv_b_proj; kvb all of it, for the absorption */
    int mla;
    const float *q_a_norm, *kv_a_norm;
    launch q_b, vb;
    prod kvb;
} pl_layer;

struct coli__gpu_pipe {
    coli__gpu *g;
    int dev;
    device *dv;
    coli__gpu_net net; /* layers: not kept (pipe->L holds what is needed) */
    coli__gpu_pipe_params p;
    int H, QD, KVD, E, K, I, inter, C, CK, slots, rot, kv_bf16, sc_cap;
    pl_layer *L;
    tensor *embed;
    const float *final_norm;
    launch lm;     /* the last token's row of xn */
    launch lm_all; /* every row of xn, up to COLI__GPU_ALL_ROWS */
    float *out_hidden; /* the run's destination of the states after the final norm, or NULL */
    /* device memory: one allocation for the KV cache, one for the rest */
    void *kv_mem, *mem;
    uint64_t kv_bytes, mem_bytes;
    prod *tab, *t1, *t2; /* static tables, then the experts' (rewritten each MoE layer) */
    int *step;           /* S, pos0, then tokens [C], then rope [C * rot] */
    int32_t *tokens;
    float *rope;
    float *x, *xn, *o, *q, *k, *v, *att, *rl, *w, *ye, *yh, *gg, *uu, *hh, *scores, *part, *logits;
    int *sel, *row, *row_tok;
    float *qa, *ckv, *qc, *lat; /* latent attention: [C, q_lora], [C, row], [C, nh, row], [C, nh, kv_lora] */
    int *xrow;                  /* [nh, C]: row t * nh + h of lat for head h's product */
    unsigned char *host;
    int8_t *qp;
    float *qs_;
    int32_t *qps;
    /* pinned host memory: the step's input (same layout as step), the
     * logits, and the host experts' exchange */
    void *pin;
    int *h_step;
    float *h_logits, *h_xn, *h_yh;
    int *h_sel;
    unsigned char *h_host;
    /* the same, as kernels address them (mapped: a decode step's exchange
     * with the host takes no copy); d_xn NULL: not mapped */
    float *d_xn, *d_yh;
    int *d_sel;
    unsigned char *d_host;
    size_t in_bytes;
    cudaStream_t stream; /* its own: contexts run at once, and a capture sees only its step */
    cudaEvent_t ev_route, ev0, ev1;
    cudaEvent_t ph_ev[1 + 16 * 64]; /* phase timing: an event at each boundary */
    int ph_id[1 + 16 * 64], ph_n, ph_cap;
    /* the decode step's graphs, in order; after segment i, flags[i] says
     * what the host does (SEG_*) for layer seg_layer[i] */
    cudaGraphExec_t *seg;
    unsigned char *seg_flags;
    int *seg_layer;
    int n_seg, cap_seg;
    int rec;       /* capturing: a host point cuts the capture instead of running the host */
    int capturing; /* the stream is in a capture */
    int graph_tiles; /* attention tiles the graphs were captured for; 0: none */
    int any_host;
    int pdl; /* launches overlap their predecessor's end (coli__gpu_pdl_set) */
    coli__gpu_pipe_stats st;
};

#endif
