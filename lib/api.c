/* api.c - version, status strings, features and options. */
#include <stdlib.h>
#include <string.h>

#include "model/experts.h"
#include "model/model.h"
#include "cpu/threadpool.h"

COLI_API unsigned coli_version_number(void)
{
    return COLI_VERSION_NUMBER;
}

COLI_API const char *coli_version_string(void)
{
    return COLI_VERSION_STRING;
}

COLI_API const char *coli_strerror(int status)
{
    switch (status) {
#define COLI_STATUS_MSG_(name, val, msg) \
    case val:                            \
        return msg;
        COLI_STATUS_MAP(COLI_STATUS_MSG_)
#undef COLI_STATUS_MSG_
    }
    return "unknown status";
}

COLI_API const char *coli_status_name(int status)
{
    switch (status) {
#define COLI_STATUS_NAME_(name, val, msg) \
    case val:                             \
        return "COLI_" #name;
        COLI_STATUS_MAP(COLI_STATUS_NAME_)
#undef COLI_STATUS_NAME_
    }
    return "COLI_UNKNOWN";
}

COLI_API int coli_has_feature(coli_feature feature)
{
    switch (feature) {
    case COLI_FEATURE_THREADS:
        return 1;
    /* configure --with-cuda or --with-hip (config.h) */
#if defined(COLI_GPU_CUDA)
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_CUDA:
        return 1;
    case COLI_FEATURE_HIP:
        return 0;
#elif defined(COLI_GPU_HIP)
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_HIP:
        return 1;
    case COLI_FEATURE_CUDA:
        return 0;
#else
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_CUDA:
    case COLI_FEATURE_HIP:
        return 0;
#endif
    }
    return 0;
}

/* ---- options ------------------------------------------------------------ */

void coli__opts_default(coli__opts *o)
{
    memset(o, 0, sizeof *o);
    o->weights = COLI_WEIGHTS_AUTO;
    o->threads = 0;
    o->context = 0;
    o->mem_budget_mb = 0;
    o->q4_group = 32;
    o->log.max_level = COLI_LOG_WARN;
    o->gpu = o->gpu_expert_mb = o->gpu_release_host = -1; /* the environment decides */
    o->n_gpu_devices = -1;
    o->expert_slots = 0;
    o->prefetch = 1;
    o->io_threads = 4;
    o->hotset = 1;
    o->cpu_kernels = 0;
}

COLI_API coli_status coli_options_create(coli_options **out)
{
    if (!out)
        return COLI_EINVAL;
    coli_options *o = malloc(sizeof *o);
    *out = o;
    if (!o)
        return COLI_ENOMEM;
    coli__opts_default(&o->o);
    return COLI_OK;
}

COLI_API void coli_options_free(coli_options *opts)
{
    free(opts);
}

COLI_API coli_status coli_option_bounds(coli_option opt, int64_t *min, int64_t *max)
{
    int64_t lo, hi;
    switch (opt) {
    case COLI_OPT_WEIGHTS:
        lo = COLI_WEIGHTS_AUTO;
        hi = COLI_WEIGHTS_Q2;
        break;
    case COLI_OPT_Q4_GROUP:
        lo = 32;
        hi = 128;
        break;
    case COLI_OPT_THREADS:
        lo = 0;
        hi = 1024;
        break;
    case COLI_OPT_CONTEXT:
        lo = 0;
        hi = 1 << 24;
        break;
    case COLI_OPT_MEM_BUDGET_MB:
        lo = 0;
        hi = INT64_C(1) << 40;
        break;
    case COLI_OPT_GPU:
    case COLI_OPT_GPU_RELEASE_HOST:
        lo = -1;
        hi = 1;
        break;
    case COLI_OPT_GPU_EXPERT_MB:
        lo = -1;
        hi = INT64_C(1) << 30; /* an exbibyte */
        break;
    case COLI_OPT_EXPERT_SLOTS:
        lo = 0;
        hi = INT64_C(1) << 31;
        break;
    case COLI_OPT_PREFETCH:
    case COLI_OPT_HOTSET:
        lo = 0;
        hi = 1;
        break;
    case COLI_OPT_IO_THREADS:
        lo = 1;
        hi = 64;
        break;
    case COLI_OPT_CPU_KERNELS:
        lo = COLI__CPUK_AUTO;
        hi = COLI__CPUK_AVX512;
        break;
    default:
        return COLI_EINVAL;
    }
    if (min)
        *min = lo;
    if (max)
        *max = hi;
    return COLI_OK;
}

static int64_t *opt_slot(coli__opts *o, coli_option opt)
{
    switch (opt) {
    case COLI_OPT_WEIGHTS:
        return &o->weights;
    case COLI_OPT_THREADS:
        return &o->threads;
    case COLI_OPT_CONTEXT:
        return &o->context;
    case COLI_OPT_MEM_BUDGET_MB:
        return &o->mem_budget_mb;
    case COLI_OPT_Q4_GROUP:
        return &o->q4_group;
    case COLI_OPT_GPU:
        return &o->gpu;
    case COLI_OPT_GPU_EXPERT_MB:
        return &o->gpu_expert_mb;
    case COLI_OPT_GPU_RELEASE_HOST:
        return &o->gpu_release_host;
    case COLI_OPT_EXPERT_SLOTS:
        return &o->expert_slots;
    case COLI_OPT_PREFETCH:
        return &o->prefetch;
    case COLI_OPT_IO_THREADS:
        return &o->io_threads;
    case COLI_OPT_HOTSET:
        return &o->hotset;
    case COLI_OPT_CPU_KERNELS:
        return &o->cpu_kernels;
    }
    return NULL;
}

COLI_API coli_status coli_options_set(coli_options *opts, coli_option opt, int64_t value)
{
    int64_t lo, hi;
    if (!opts || coli_option_bounds(opt, &lo, &hi) != COLI_OK)
        return COLI_EINVAL;
    if (value < lo || value > hi)
        return COLI_ERANGE;
    if (opt == COLI_OPT_Q4_GROUP && value != 32 && value != 64 && value != 128)
        return COLI_ERANGE;
    *opt_slot(&opts->o, opt) = value;
    return COLI_OK;
}

COLI_API coli_status coli_options_get(const coli_options *opts, coli_option opt, int64_t *value)
{
    if (!opts || !value)
        return COLI_EINVAL;
    int64_t *slot = opt_slot((coli__opts *)&opts->o, opt);
    if (!slot)
        return COLI_EINVAL;
    *value = *slot;
    return COLI_OK;
}

COLI_API coli_status coli_options_set_log(coli_options *opts, coli_log_fn fn, void *user,
                                          coli_log_level max_level)
{
    if (!opts || max_level < COLI_LOG_ERROR || max_level > COLI_LOG_DEBUG)
        return COLI_EINVAL;
    opts->o.log.fn = fn;
    opts->o.log.user = user;
    opts->o.log.max_level = max_level;
    return COLI_OK;
}

COLI_API coli_status coli_options_set_gpu_devices(coli_options *opts, const char *list)
{
    if (!opts)
        return COLI_EINVAL;
    if (!list) {
        opts->o.n_gpu_devices = -1;
        return COLI_OK;
    }
    int devs[COLI_GPU_MAX_DEVICES], n = 0;
    if (coli__parse_devices(list, devs, &n) != 0)
        return COLI_EINVAL;
    memcpy(opts->o.gpu_devices, devs, sizeof devs);
    opts->o.n_gpu_devices = n;
    return COLI_OK;
}
