/* options.c - coli_options: the table of options.h drives defaults,
 * bounds, set and get. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/options.h"

typedef struct opt_row {
    coli_option id;
    size_t off; /* of the field in coli__opts */
    int64_t min, max, def;
    int (*allowed)(int64_t v);
} opt_row;

static const opt_row g_opts[] = {
#define COLI__OPT_ROW_(ID, field, lo, hi, dflt, ok) \
    {.id = COLI_OPT_##ID, .off = offsetof(coli__opts, field), .min = lo, .max = hi, .def = dflt, .allowed = ok},
    COLI__OPTION_MAP(COLI__OPT_ROW_)
#undef COLI__OPT_ROW_
};

#define N_OPTS (sizeof g_opts / sizeof g_opts[0])

int coli__opt_q4_group(int64_t v)
{
    return v == 32 || v == 64 || v == 128;
}

static const opt_row *row(coli_option opt)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (g_opts[i].id == opt)
            return &g_opts[i];
    return NULL;
}

static int64_t *slot(coli__opts *o, const opt_row *r)
{
    return (int64_t *)(void *)((char *)o + r->off);
}

void coli__opts_default(coli__opts *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < N_OPTS; i++)
        *slot(o, &g_opts[i]) = g_opts[i].def;
    o->log.max_level = COLI_LOG_WARN;
    o->n_gpu_devices = -1;
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
    const opt_row *r = row(opt);
    if (!r)
        return COLI_EINVAL;
    if (min)
        *min = r->min;
    if (max)
        *max = r->max;
    return COLI_OK;
}

COLI_API coli_status coli_options_set(coli_options *opts, coli_option opt, int64_t value)
{
    const opt_row *r = row(opt);
    if (!opts || !r)
        return COLI_EINVAL;
    if (value < r->min || value > r->max || (r->allowed && !r->allowed(value)))
        return COLI_ERANGE;
    *slot(&opts->o, r) = value;
    return COLI_OK;
}

COLI_API coli_status coli_options_get(const coli_options *opts, coli_option opt, int64_t *value)
{
    const opt_row *r = row(opt);
    if (!opts || !value || !r)
        return COLI_EINVAL;
    *value = *slot((coli__opts *)&opts->o, r);
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
    int devs[COLI__MAX_DEVICES], n = 0;
    if (coli__parse_devices(list, devs, &n) != 0)
        return COLI_EINVAL;
    memcpy(opts->o.gpu_devices, devs, sizeof devs);
    opts->o.n_gpu_devices = n;
    return COLI_OK;
}

void coli__options_set_gpu_ops(coli_options *o, const struct coli__gpu_ops *ops)
{
    if (o)
        o->o.gpu_ops = ops;
}
