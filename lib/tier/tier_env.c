/* tier_env.c - the GPU tier's implementation (the one compiled in, or a
 * test's), and its settings: the API's options, else the environment's
 * (COLI_CUDA, COLI_GPU(S), CUDA_EXPERT_GB, CUDA_RELEASE_HOST) (tier.h). */
#include <string.h>

#include "base/env.h"
#include "tier/tier.h"

/* ---- the ops table ------------------------------------------------------- */

const coli__gpu_ops *coli__gpu_ops_of(const coli__opts *o)
{
    return o && o->gpu_ops ? o->gpu_ops : coli__gpu_backend();
}

/* ---- options and environment ------------------------------------------- */


/* Reads one variable of lib/base/env.h into *out (left alone when unset). */
static coli_status env_int(coli__env_id id, int64_t *out, coli__err *err)
{
    coli__env_val v;
    int set;
    COLI_TRY(coli__env_get(id, &v, &set, err));
    if (set)
        *out = v.i;
    return COLI_OK;
}

static coli_status env_devices(coli__env_id id, coli__tier_conf *gc, coli__err *err)
{
    coli__env_val v;
    int set;
    COLI_TRY(coli__env_get(id, &v, &set, err));
    if (set) {
        memcpy(gc->devices, v.devs, sizeof gc->devices);
        gc->n_devices = v.n;
    }
    return COLI_OK;
}

/* API options win; what they leave unset comes from the environment. Every
 * variable that is read is checked, whether the tier is on or not, so that
 * a typo is found where it is made. */
coli_status coli__tier_resolve(const coli__opts *o, coli__tier_conf *gc, coli__err *err)
{
    memset(gc, 0, sizeof *gc);
    gc->n_devices = -1;
    gc->budget = -1;
    gc->fail_after = -1;
    int64_t on = 0, release = 0;
    if (o->gpu >= 0)
        on = o->gpu;
    else
        COLI_TRY(env_int(COLI__ENV_CUDA, &on, err));
    if (o->n_gpu_devices >= 0) {
        memcpy(gc->devices, o->gpu_devices, sizeof gc->devices);
        gc->n_devices = o->n_gpu_devices;
    } else {
        COLI_TRY(env_devices(COLI__ENV_GPU, gc, err));
        COLI_TRY(env_devices(COLI__ENV_GPUS, gc, err)); /* the list wins over the single one */
    }
    if (o->gpu_expert_mb >= 0)
        gc->budget = o->gpu_expert_mb << 20;
    else
        COLI_TRY(env_int(COLI__ENV_CUDA_EXPERT_GB, &gc->budget, err));
    if (o->gpu_release_host >= 0)
        release = o->gpu_release_host;
    else
        COLI_TRY(env_int(COLI__ENV_CUDA_RELEASE_HOST, &release, err));
    gc->on = (int)on;
    gc->release_host = (int)release;
    COLI_TRY(env_int(COLI__ENV_GPU_FAIL_AFTER, &gc->fail_after, err));
    return COLI_OK;
}

coli_status coli__experts_check(const coli__opts *o, int *gpu_on, coli__err *err)
{
    coli__tier_conf gc;
    COLI_TRY(coli__tier_resolve(o, &gc, err));
    *gpu_on = gc.on;
    return COLI_OK;
}
