/* context.h - a context's state, shared by its files (internal):
 * lib/context/context.c (evaluation, generation, statistics) and
 * lib/context/speculate.c (multi-token prediction). */
#ifndef COLI_CONTEXT_H
#define COLI_CONTEXT_H

#include "tier/device.h"
#include "decoder/forward.h"

struct coli__mtp;

struct coli_context {
    coli_model *m;
    coli__err err;
    coli__opts opts;
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
};

#endif
