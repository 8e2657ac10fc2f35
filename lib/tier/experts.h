/* experts.h - where the routed experts of a MoE layer run (internal).
 *
 * A model opened with the GPU tier on keeps some experts resident on one
 * or more devices (lib/tier/placement.c decides which); coli__experts_run sends
 * each device its experts' tokens in one call and computes the rest on the
 * CPU. The outputs are combined on the CPU in one fixed order, so logits do
 * not depend on placement (docs/formats.md, "An expert"). */
#ifndef COLI_EXPERTS_H
#define COLI_EXPERTS_H

#include "gpu/backend.h"
#include "decoder/decoder.h"
#include "model/model.h"
#include "cpu/threadpool.h"

/* Runs the routed experts of MoE layer l and writes their weighted sum to
 * io->out. *read grows by the weight bytes used; counts (may be NULL) by
 * the pairs each tier served. A failing device call is not an error: its
 * experts run on the CPU (same bits) and the log says so once. */
coli_status coli__experts_run(const coli_model *m, int l, coli__pool *pool, coli__moe_io *io, uint64_t *read,
                              coli__experts_counts *counts, coli__err *err);

/* The tier's part of m's decoder (lib/decoder/decoder.h): its routed
 * experts through coli__experts_run; the lookahead when the model streams
 * experts with prefetch on (the pass then predicts the next MoE layer's
 * experts and hands them over in io->pred); the output projection on the
 * device that holds it, else on the CPU (same bits). */
void coli__experts_decoder(coli_model *m, coli__decoder *d);

/* Checks the GPU options and their environment variables, as
 * coli__experts_open will read them: called before the weights load, so
 * that a malformed variable fails at once, not after minutes of loading;
 * *gpu_on: whether they ask for the tier. */
coli_status coli__experts_check(const coli__opts *o, int *gpu_on, coli__err *err);


/* At model open, after the weights: resolves the GPU options (API, then
 * environment), and when the tier is on places and uploads experts. A bad
 * environment value fails (naming the variable); a missing tier or device
 * only logs a warning and leaves m->gpu NULL. src: kept by the tier.
 * keep: NULL, or the bytes of each device the device decoder takes first
 * (lib/tier/device.c), left out of the experts' budget; the output
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

/* The GPU tier's implementation for options o: the one they name
 * (tests: coli__options_set_gpu_ops), else the one compiled in (o NULL:
 * that one, for the calls of no model, coli_gpu_*). */
const coli__gpu_ops *coli__gpu_ops_of(const coli__opts *o);
/* coli_gpu_tier, coli_gpu_count and coli_gpu_device_get of the
 * implementation ops (the public calls: the one compiled in). */
const char *coli__gpu_tier_of(const coli__gpu_ops *ops);
coli_status coli__gpu_count_of(const coli__gpu_ops *ops, int *n);
coli_status coli__gpu_device_of(const coli__gpu_ops *ops, int index, coli_gpu_device *info);

#endif
