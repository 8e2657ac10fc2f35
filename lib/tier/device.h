/* device.h - the decoder on a device (internal).
 *
 * With the GPU tier on, a model whose dense weights (attention, norms,
 * router, embedding, output projection) fit on the first device keeps them
 * there, and each context keeps its KV cache there: a token's step then
 * runs on the device from the embedding to the logits (lib/gpu/pipeline.cu),
 * experts not resident computed by the CPU meanwhile. Dense weights and
 * the cache are placed before experts: every token needs them. Logits have
 * the CPU's bits (docs/formats.md), so where a step runs is never seen in a
 * token. */
#ifndef COLI_DEVICE_H
#define COLI_DEVICE_H

#include "tier/experts.h"
#include "decoder/forward.h"
#include "model/model.h"

/* Opens the GPU tier (coli__experts_open), placing the device decoder
 * first when the options and the model allow it. */
coli_status coli__device_open(coli_model *m, const coli__expert_source *src);
void coli__device_close(coli_model *m);
/* 1 when the model's layers run on a device. */
int coli__device_on(const coli_model *m);

/* One context's decoder on the device: its KV cache and scratch. */
typedef struct coli__device_ctx coli__device_ctx;

/* NULL in *out (and COLI_OK) when the model has no device decoder. A
 * device that cannot hold the cache is refused with the bytes it needs and
 * has. */
coli_status coli__device_ctx_create(const coli_model *m, int n_ctx, int kv_bf16, coli__device_ctx **out,
                                    coli__err *err);
void coli__device_ctx_free(coli__device_ctx *d);

/* A pass of the decoder (lib/decoder/forward.h) on the device. */
coli_status coli__device_forward(coli__device_ctx *d, coli__pool *pool, const coli__fwd *f,
                                 coli__experts_counts *counts, coli__err *err);

/* Adds the decoder's part to a device's statistics. */
void coli__device_ctx_stats(const coli__device_ctx *d, int dev, coli_gpu_stats *s);

#endif
