/* options.h - the integer options of coli_options, in one table (internal).
 *
 * A new option is its value in colibri.h's coli_option plus one row here:
 * the row gives coli__opts its field and coli_options_set, _get and
 * coli_option_bounds their range and default (lib/model/options.c). The
 * environment variables that stand in for unset options are in
 * lib/base/env.h. */
#ifndef COLI_OPTIONS_H
#define COLI_OPTIONS_H

#include <stdint.h>

#include "base/env.h"
#include "base/log.h"
#include "cpu/kernels.h"

/* X(ID, field, min, max, default, allowed): COLI_OPT_<ID> is stored in
 * coli__opts.field; allowed is NULL (every value in [min, max]) or a
 * function saying which of them are. */
#define COLI__OPTION_MAP(X)                                                                         \
    X(WEIGHTS, weights, COLI_WEIGHTS_AUTO, COLI_WEIGHTS_Q2, COLI_WEIGHTS_AUTO, NULL)                \
    X(THREADS, threads, 0, 1024, 0, NULL)                                                           \
    X(CONTEXT, context, 0, 1 << 24, 0, NULL)                                                        \
    X(MEM_BUDGET_MB, mem_budget_mb, 0, INT64_C(1) << 40, 0, NULL)                                   \
    X(Q4_GROUP, q4_group, 32, 128, 32, coli__opt_q4_group)                                          \
    /* GPU expert tier; -1: not set, the environment decides (lib/tier/experts.c) */               \
    X(GPU, gpu, -1, 1, -1, NULL)                                                                    \
    X(GPU_EXPERT_MB, gpu_expert_mb, -1, INT64_C(1) << 30 /* an exbibyte */, -1, NULL)               \
    X(GPU_RELEASE_HOST, gpu_release_host, -1, 1, -1, NULL)                                          \
    X(GPU_LAYERS, gpu_layers, 0, 1, 1, NULL)                                                        \
    /* the expert store of converted models (lib/store/store.c) */                                  \
    X(EXPERT_SLOTS, expert_slots, 0, INT64_C(1) << 31, 0, NULL)                                     \
    X(PREFETCH, prefetch, 0, 1, 1, NULL)                                                            \
    X(IO_THREADS, io_threads, 1, 64, 4, NULL)                                                       \
    X(HOTSET, hotset, 0, 1, 1, NULL)                                                                \
    X(CPU_KERNELS, cpu_kernels, COLI__CPUK_AUTO, COLI__CPUK_AMX, COLI__CPUK_AUTO, NULL)         \
    /* -1: not set, COLI_KV_TYPE decides (lib/decoder/kv.c) */                                       \
    X(KV_TYPE, kv_type, -1, COLI_KV_BF16, -1, NULL)                                                \
    /* multi-token prediction (lib/context/speculate.c) */                                           \
    X(MTP, mtp, 0, COLI__MTP_MAX, 0, NULL)                                                          \
    X(MTP_GUARD, mtp_guard, 0, 1, 1, NULL)

/* The most drafts a step of multi-token prediction makes. */
#define COLI__MTP_MAX 8

/* q4 groups: 32, 64 or 128. */
int coli__opt_q4_group(int64_t v);

/* Options as resolved at open; contexts inherit them. */
typedef struct coli__opts {
#define COLI__OPT_FIELD_(id, field, lo, hi, def, allowed) int64_t field;
    COLI__OPTION_MAP(COLI__OPT_FIELD_)
#undef COLI__OPT_FIELD_
    coli__logger log;
    int gpu_devices[COLI__MAX_DEVICES]; /* set with coli_options_set_gpu_devices */
    int n_gpu_devices;                  /* -1: not set, COLI_GPUS or COLI_GPU decide */
    /* the GPU tier's implementation: NULL, the one compiled in; tests
     * hand a host one in (coli__options_set_gpu_ops), per model */
    const struct coli__gpu_ops *gpu_ops;
} coli__opts;

struct coli_options {
    coli__opts o;
};

/* Every option at its default. */
void coli__opts_default(coli__opts *o);

/* Tests: the models opened with o use ops as their GPU tier (NULL: the
 * one compiled in). */
void coli__options_set_gpu_ops(coli_options *o, const struct coli__gpu_ops *ops);

#endif
