/* tier_api.c - the public calls of the GPU tier (coli_gpu_*), and what a
 * model's tier says of itself: its placement, devices and statistics
 * (tier.h). */
#include <string.h>

#include "base/sized.h"
#include "tier/tier.h"

/* ---- public: devices and statistics ------------------------------------- */

const char *coli__gpu_tier_of(const coli__gpu_ops *ops)
{
    return ops->compiled();
}

coli_status coli__gpu_count_of(const coli__gpu_ops *ops, int *n)
{
    if (!n)
        return COLI_EINVAL;
    coli__err err;
    return ops->probe(NULL, 0, n, &err);
}

coli_status coli__gpu_device_of(const coli__gpu_ops *ops, int index, coli_gpu_device *info)
{
    if (!coli__sized_out_ok(info) || index < 0)
        return COLI_EINVAL;
    coli__gpu_devinfo all[MAXD];
    int n = 0;
    coli__err err;
    COLI_TRY(ops->probe(all, MAXD, &n, &err));
    if (index >= n || index >= MAXD)
        return COLI_ERANGE;
    coli_gpu_device full;
    memset(&full, 0, sizeof full);
    full.ordinal = all[index].ordinal;
    memcpy(full.name, all[index].name, sizeof full.name);
    memcpy(full.arch, all[index].arch, sizeof full.arch);
    full.name[sizeof full.name - 1] = full.arch[sizeof full.arch - 1] = 0;
    full.wave = all[index].wave;
    full.free_bytes = all[index].free_bytes;
    full.total_bytes = all[index].total_bytes;
    coli__sized_out(info, &full, sizeof full);
    return COLI_OK;
}

/* The calls of no model: the implementation compiled in. */
COLI_API const char *coli_gpu_tier(void)
{
    return coli__gpu_tier_of(coli__gpu_ops_of(NULL));
}

COLI_API coli_status coli_gpu_count(int *n)
{
    return coli__gpu_count_of(coli__gpu_ops_of(NULL), n);
}

COLI_API coli_status coli_gpu_device_get(int index, coli_gpu_device *info)
{
    return coli__gpu_device_of(coli__gpu_ops_of(NULL), index, info);
}

COLI_API int coli_model_gpu_devices(const coli_model *m)
{
    return m && m->ok && m->gpu ? m->gpu->n_dev : 0;
}

const signed char *coli__experts_placement(const coli_model *m)
{
    return m->gpu ? m->gpu->dev : NULL;
}

int coli__experts_n_devices(const coli_model *m)
{
    return m->gpu ? m->gpu->n_dev : 0;
}

coli_status coli__experts_dev_stats(const coli_model *m, int dev, const coli__experts_counts *cnt,
                                    coli_gpu_stats *out)
{
    struct coli__tier *t = m->gpu;
    if (!coli__sized_out_ok(out))
        return COLI_EINVAL;
    if (!t || dev < 0 || dev >= t->n_dev)
        return COLI_ERANGE;
    coli_gpu_stats full;
    memset(&full, 0, sizeof full);
    full.ordinal = t->info[dev].ordinal;
    memcpy(full.name, t->info[dev].name, sizeof full.name);
    full.name[sizeof full.name - 1] = 0;
    full.usable = !atomic_load(&t->disabled[dev]);
    full.resident_experts = t->res_experts[dev];
    full.resident_bytes = t->res_bytes[dev];
    coli__gpu_stats gs;
    memset(&gs, 0, sizeof gs);
    coli__err err;
    pthread_mutex_lock(&t->dev_mu[dev]);
    coli_status st = t->ops->stats(t->g, dev, &gs, &err);
    pthread_mutex_unlock(&t->dev_mu[dev]);
    if (st == COLI_OK) {
        full.calls = gs.calls;
        full.rows = gs.rows;
        full.failures = gs.failures;
        full.h2d_ns = gs.h2d_ns;
        full.kernel_ns = gs.kernel_ns;
        full.d2h_ns = gs.d2h_ns;
        full.h2d_bytes = gs.h2d_bytes;
        full.d2h_bytes = gs.d2h_bytes;
    }
    full.routed_pairs = cnt->pairs;
    full.gpu_pairs = cnt->dev_pairs[dev];
    full.fallback_pairs = cnt->dev_fallback[dev];
    full.gpu_expert_hit_rate = cnt->pairs ? (double)cnt->dev_pairs[dev] / (double)cnt->pairs : 0.0;
    coli__sized_out(out, &full, sizeof full);
    return COLI_OK;
}
