/* core.h - the part of a context its pass and its multi-token prediction
 * work on (internal): the model, the threads, the KV cache and scratch,
 * the device's cache, the history, the position and the last logits, the
 * statistics. lib/context/step.c and lib/context/speculate.c take this,
 * not the whole context (context.h), which holds it with its options. */
#ifndef COLI_CONTEXT_CORE_H
#define COLI_CONTEXT_CORE_H

#include "decoder/forward.h"
#include "tier/device.h"

struct coli__mtp;

typedef struct coli__ctx_core {
    coli_model *m;
    coli__err err;
    const coli__logger *log; /* the context's options' */
    coli__pool *pool;
    coli__kv kv;
    coli__scratch scratch;
    size_t pos;
    float *logits;
    int has_logits;
    coli_stats stats;
    coli__experts_counts gpu_counts;
    coli__device_ctx *dev; /* the layers on a device; NULL: on the CPU */
    int32_t *hist;         /* with dev or mtp: every token evaluated */
    struct coli__mtp *mtp; /* multi-token prediction (lib/context/speculate.c); NULL: off */
} coli__ctx_core;

#endif
