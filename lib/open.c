/* open.c - opening, describing and freeing a model: its files
 * (lib/model/), then the GPU tier (lib/tier/), which takes what the model
 * loaded and hands the decoder its hooks. Here, above both, so that the
 * model knows nothing of the tier. */
#include <stdlib.h>
#include <string.h>

#include "base/sized.h"
#include "model/model.h"
#include "store/store.h"
#include "tier/device.h"
#include "tier/experts.h"

COLI_API coli_status coli_model_open(const char *dir, const coli_options *opts, coli_model **out)
{
    if (!out)
        return COLI_EINVAL;
    coli_model *m = calloc(1, sizeof *m);
    *out = m;
    if (!m)
        return COLI_ENOMEM;
    int gpu_on = 0;
    coli_status st = coli__model_init(m, dir, opts);
    if (st == COLI_OK)
        st = coli__experts_check(&m->opts, &gpu_on, &m->err);
    if (st == COLI_OK)
        st = coli__model_load(m, gpu_on);
    if (st == COLI_OK) {
        coli__experts_decoder(m, &m->dec);
        const coli__expert_source src = coli__model_expert_source(m);
        st = coli__device_open(m, &src);
    }
    if (st == COLI_OK && m->store)
        st = coli__store_warm(m->store, m->gpu ? coli__experts_placement(m) : NULL,
                              (size_t)m->cfg.n_layers * (size_t)m->cfg.n_experts, &m->err);
    if (st == COLI_OK)
        st = coli__model_finish(m);
    if (st == COLI_OK) {
        m->ok = 1;
        return COLI_OK;
    }
    /* keep only the message: release what was loaded */
    coli__device_close(m);
    coli__model_release(m);
    return coli__model_fail(m, st);
}

COLI_API void coli_model_free(coli_model *m)
{
    if (!m)
        return;
    coli__device_close(m);
    coli__model_release(m);
    free(m->dir);
    free(m);
}

COLI_API coli_status coli_model_get_info(const coli_model *m, coli_model_info *info)
{
    COLI_TRY(coli__model_usable(m));
    if (!coli__sized_out_ok(info))
        return COLI_EINVAL;
    coli_model_info full;
    memset(&full, 0, sizeof full);
    coli__model_info_fill(m, &full);
    full.gpu_devices = coli__experts_n_devices(m);
    full.gpu_detail = coli__experts_detail(m);
    coli__sized_out(info, &full, sizeof full);
    return COLI_OK;
}
