/* experts.h - where the routed experts of a MoE layer run (internal).
 *
 * A model opened with the GPU tier on keeps some experts resident on one
 * or more devices (lib/model/placement.c decides which); coli__experts_run sends
 * each device its experts' tokens in one call and computes the rest on the
 * CPU. The outputs are combined on the CPU in one fixed order, so logits do
 * not depend on placement (docs/formats.md, "An expert"). */
#ifndef COLI_EXPERTS_H
#define COLI_EXPERTS_H

#include "gpu/backend.h"
#include "model/model.h"
#include "cpu/threadpool.h"

/* What one context counted of the tier's work (since its creation or the
 * last coli_context_stats_reset). */
typedef struct coli__experts_counts {
    uint64_t pairs;                               /* routed (token, expert) pairs */
    uint64_t experts;                             /* experts read: distinct ones per layer and pass */
    uint64_t dev_pairs[COLI_GPU_MAX_DEVICES];     /* of them, served by device d */
    uint64_t dev_fallback[COLI_GPU_MAX_DEVICES];  /* placed on d, computed on the CPU */
} coli__experts_counts;

/* The buffers of one MoE layer, lent by the forward pass. Scratch sizes in
 * rows of S * top_k: xe, ye [rows, H]; g, u [rows, I]; rows, pos [rows]. */
typedef struct coli__moe_io {
    const float *xn; /* [S, H] normalised input */
    int S;
    const int *sel;    /* [S, K] routed experts */
    const float *wts;  /* [S, K] their weights */
    float *xe, *ye, *g, *u;
    int *rows, *pos;
    float *out;        /* [S, H] the layer's output */
    /* the next MoE layer's predicted experts (coli__experts_lookahead),
     * whose reads start once this layer's own are under way; n_pred 0:
     * none */
    int pred_layer, n_pred;
    const int *pred;
    signed char *group; /* [n_experts] scratch: each routed expert's group */
    /* NULL, or the layer's shared experts (gate, up, down), computed on
     * the CPU in the routed experts' hand-outs from xn into shared_y [S,
     * H] (not added to out); their gate and up rows go to shared_g and
     * shared_u [S, shared_inter] */
    const coli__mat *shared;
    float *shared_g, *shared_u, *shared_y;
} coli__moe_io;

/* Runs the routed experts of MoE layer l and writes their weighted sum to
 * io->out. *read grows by the weight bytes used; counts (may be NULL) by
 * the pairs each tier served. A failing device call is not an error: its
 * experts run on the CPU (same bits) and the log says so once. */
coli_status coli__experts_run(const coli_model *m, int l, coli__pool *pool, coli__moe_io *io, uint64_t *read,
                              coli__experts_counts *counts, coli__err *err);

/* 1 when the model streams experts with prefetch on: the forward pass
 * then predicts the next MoE layer's experts (its router on the current
 * hidden state) and hands them to coli__experts_run in io->pred. */
int coli__experts_lookahead(const coli_model *m);

/* The output projection head of n positions, x [n, H] to logits
 * [n, vocab]: the model's on the device that holds it (when every expert
 * fit, room was left for it), else on the CPU; same bits in the quantized
 * formats. */
coli_status coli__experts_output(const coli_model *m, coli__pool *pool, const coli__mat *head, const float *x, int n,
                                 float *logits);

/* Checks the GPU options and their environment variables, as
 * coli__experts_open will read them: called before the weights load, so
 * that a malformed variable fails at once, not after minutes of loading;
 * *gpu_on: whether they ask for the tier. */
coli_status coli__experts_check(const coli__opts *o, int *gpu_on, coli__err *err);

/* The loader's hold on the host copies of experts, handed down at open
 * (lib/model/model.c): the tier releases and rebuilds them through it
 * instead of calling the loader. */
typedef struct coli__expert_source {
    /* Drops the host copies the loader allocated of the experts with
     * resident[l * E + e] >= 0, setting host[l * E + e] to 0 for each;
     * *freed: their bytes; *mapped: 1 when some are mapped from the
     * checkpoint (no copy of their own). COLI_ENOMEM: none was dropped. */
    coli_status (*release)(void *user, const signed char *resident, unsigned char *host, uint64_t *freed,
                           int *mapped);
    /* Rebuilds the dropped host copies of expert e of layer l exactly as
     * loaded at open. */
    coli_status (*reload)(void *user, int l, int e, coli__err *err);
    void *user;
} coli__expert_source;

/* At model open, after the weights: resolves the GPU options (API, then
 * environment), and when the tier is on places and uploads experts. A bad
 * environment value fails (naming the variable); a missing tier or device
 * only logs a warning and leaves m->gpu NULL. src: kept by the tier.
 * keep: NULL, or the bytes of each device the device decoder takes first
 * (lib/model/device.c), left out of the experts' budget; the output
 * projection is then the decoder's, not the tier's. */
coli_status coli__experts_open(coli_model *m, const coli__expert_source *src, const uint64_t *keep);
void coli__experts_close(coli_model *m);

/* "cpu only: ..." or "2 devices, 96 of 128 experts": for coli_model_info. */
const char *coli__experts_detail(const coli_model *m);

/* [L * E] the device of each expert, -1 on the CPU; NULL without a tier. */
const signed char *coli__experts_placement(const coli_model *m);

/* Devices the model's tier uses (0: none); one device's statistics, with
 * a context's counts. */
int coli__experts_n_devices(const coli_model *m);
coli_status coli__experts_dev_stats(const coli_model *m, int dev, const coli__experts_counts *cnt,
                                    coli_gpu_stats *out);

/* The GPU tier's description of a weight matrix (its host arrays). */
coli__gpu_mat coli__gpu_mat_of(const coli__mat *w);
/* The tier's devices for the device decoder: NULL without a tier. */
coli__gpu *coli__experts_gpu(const coli_model *m, const coli__gpu_ops **ops);
/* Expert e of layer l's gate, up and down handles when resident on device
 * dev, else NULL. */
const int *coli__experts_handles(const coli_model *m, int l, int e, int dev);
/* The host's share of a layer the device decoder runs: for the pairs of
 * io->sel that are not -1, y[pair] = that expert's output for
 * io->xn[pair / top_k], computed on the device that holds the expert
 * (never the decoder's: its pairs are the -1) or on the CPU (io's scratch
 * as for coli__experts_run; io->out is not used). counts (may be NULL)
 * grows by the pairs each served. */
coli_status coli__experts_host(const coli_model *m, int l, coli__pool *pool, coli__moe_io *io, float *y,
                               coli__experts_counts *counts, coli__err *err);

/* Tests only: the ops table coli__experts_open and coli_gpu_* use instead
 * of the compiled-in one (NULL restores it). Not thread-safe. */
void coli__gpu_set_ops_for_testing(const coli__gpu_ops *ops);
const coli__gpu_ops *coli__gpu_ops_current(void);

#endif
