/* none.c - the GPU tier of a build without one: no devices, and every call
 * that needs a device says that none was compiled in. */
#include "gpu/backend.h"

static const char *none_compiled(void)
{
    return "none";
}

static coli_status none_probe(coli__gpu_devinfo *info, int cap, int *n, coli__err *err)
{
    (void)info;
    (void)cap;
    (void)err;
    *n = 0;
    return COLI_OK;
}

static coli_status none_init(const coli__gpu_params *p, coli__gpu **out, coli__err *err)
{
    (void)p;
    *out = NULL;
    return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: this libcolibri was built without one "
                                              "(configure --with-cuda or --with-hip)");
}

static void none_free(coli__gpu *g)
{
    (void)g;
}

static int none_n_devices(const coli__gpu *g)
{
    (void)g;
    return 0;
}

static coli_status no_device(coli__err *err)
{
    return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: not compiled in");
}

static coli_status none_device_info(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err)
{
    (void)g;
    (void)dev;
    (void)out;
    return no_device(err);
}

static coli_status none_upload(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err)
{
    (void)g;
    (void)dev;
    (void)m;
    *handle = -1;
    return no_device(err);
}

static coli_status none_update(coli__gpu *g, int handle, const coli__gpu_mat *m, coli__err *err)
{
    (void)g;
    (void)handle;
    (void)m;
    return no_device(err);
}

static void none_release(coli__gpu *g, int handle)
{
    (void)g;
    (void)handle;
}

static uint64_t none_tensor_bytes(const coli__gpu_mat *m)
{
    (void)m;
    return 0;
}

static coli_status none_matmul(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err)
{
    (void)g;
    (void)handle;
    (void)x;
    (void)S;
    (void)y;
    return no_device(err);
}

static coli_status none_experts(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                                float *y, coli__err *err)
{
    (void)g;
    (void)dev;
    (void)jobs;
    (void)n_jobs;
    (void)x;
    (void)y;
    return no_device(err);
}

static coli_status none_stats(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err)
{
    (void)g;
    (void)dev;
    (void)out;
    return no_device(err);
}

static const coli__gpu_ops none_ops = {
    none_compiled, none_probe,  none_init,   none_free,         none_n_devices, none_device_info,
    none_upload,   none_update, none_release, none_tensor_bytes, none_matmul,    none_experts,
    none_stats,    NULL,        NULL,        NULL,              NULL,           NULL,
};

const coli__gpu_ops *coli__gpu_backend(void)
{
    return &none_ops;
}
