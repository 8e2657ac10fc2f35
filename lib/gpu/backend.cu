/* backend.cu - the GPU tier's devices, resident tensors and table of
 * operations, one source for CUDA (nvcc) and HIP (hipcc); compat.h maps
 * the vendor and nothing here tests for one. The kernels live one family
 * per file (lib/gpu/kern.h lists them); the per-call products of experts
 * and matrices are here, the device-resident decoder step in
 * pipeline.cu. */
#include "gpu/compat.h"

#include "gpu/kern.h"

#ifndef COLI_GPU_TARGETS
#define COLI_GPU_TARGETS COLI_GPU_VENDOR
#endif

/* ---- host side -------------------------------------------------------- */

static const char *gpu_compiled(void)
{
    return COLI_GPU_TARGETS;
}

static void fill_info(int ordinal, const cudaDeviceProp *p, coli__gpu_devinfo *out)
{
    memset(out, 0, sizeof *out);
    out->ordinal = ordinal;
    snprintf(out->name, sizeof out->name, "%s", p->name);
    coli_gpu_arch_name(p, out->arch, sizeof out->arch);
    out->wave = p->warpSize;
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(ordinal) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        out->free_bytes = fr;
        out->total_bytes = tot;
    } else {
        (void)cudaGetLastError();
        out->total_bytes = p->totalGlobalMem;
    }
}

static coli_status gpu_probe(coli__gpu_devinfo *info, int cap, int *n_devices, coli__err *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* no driver or no device: a machine without a GPU, not an error */
        (void)cudaGetLastError();
        *n_devices = 0;
        return COLI_OK;
    }
    *n_devices = n;
    for (int i = 0; info && i < n && i < cap; i++) {
        cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
        fill_info(i, &p, &info[i]);
    }
    return COLI_OK;
}

static void gpu_free(coli__gpu *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_t; i++)
        if (g->t[i].used) {
            cudaSetDevice(g->dev[g->t[i].dev].ordinal);
            cudaFree(g->t[i].mem);
        }
    for (int d = 0; d < g->n_dev; d++) {
        device *dv = &g->dev[d];
        cudaSetDevice(dv->ordinal);
        if (dv->scratch)
            cudaFree(dv->scratch);
        if (dv->staging)
            cudaFreeHost(dv->staging);
        for (int k = 0; k < 4; k++)
            if (dv->ev[k])
                cudaEventDestroy(dv->ev[k]);
        if (dv->stream)
            cudaStreamDestroy(dv->stream);
    }
    (void)cudaGetLastError();
    free(g->t);
    free(g);
}

static coli_status gpu_init(const coli__gpu_params *p, coli__gpu **out, coli__err *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: no %s device (%s)", COLI_GPU_VENDOR,
                          e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    int zero = 0;
    const int *ids = p && p->n_devices > 0 ? p->devices : &zero;
    int n = p && p->n_devices > 0 ? p->n_devices : 1;
    if (n > COLI_GPU_MAX_DEVICES)
        return coli__fail(err, COLI_EINVAL, "GPU tier: %d devices requested, at most %d", n, COLI_GPU_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= count)
            return coli__fail(err, COLI_EINVAL, "GPU tier: device %d does not exist (%d visible)", ids[i], count);
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i])
                return coli__fail(err, COLI_EINVAL, "GPU tier: device %d listed twice", ids[i]);
    }
    coli__gpu *g = (coli__gpu *)calloc(1, sizeof *g);
    if (!g)
        return coli__fail(err, COLI_ENOMEM, "GPU tier: out of memory");
    g->fail_after = p ? p->fail_after : -1;
    for (int i = 0; i < n; i++) {
        device *dv = &g->dev[i];
        dv->ordinal = ids[i];
        g->n_dev = i + 1;
        coli_status st = COLI_OK;
        cudaError_t ce = cudaSetDevice(dv->ordinal);
        if (ce == cudaSuccess)
            ce = cudaStreamCreate(&dv->stream);
        for (int k = 0; k < 4 && ce == cudaSuccess; k++)
            ce = cudaEventCreate(&dv->ev[k]);
        if (ce != cudaSuccess) {
            (void)cudaGetLastError();
            st = coli__cuda_fail(err, ce, "initialising a device");
            gpu_free(g);
            return st;
        }
    }
    *out = g;
    return COLI_OK;
}

static int gpu_n_devices(const coli__gpu *g)
{
    return g ? g->n_dev : 0;
}

static coli_status check_dev(const coli__gpu *g, int dev, coli__err *err)
{
    if (!g || dev < 0 || dev >= g->n_dev)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no device %d (%d in use)", dev, g ? g->n_dev : 0);
    return COLI_OK;
}

static coli_status gpu_device_info(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, g->dev[dev].ordinal), "cudaGetDeviceProperties");
    fill_info(g->dev[dev].ordinal, &p, out);
    return COLI_OK;
}

static uint64_t gpu_tensor_bytes(const coli__gpu_mat *m)
{
    size_t a, b, c;
    coli__gpu_array_bytes(m, &a, &b, &c);
    return coli__align256(a) + coli__align256(b) + coli__align256(c);
}

static coli_status check_mat(const coli__gpu_mat *m, coli__err *err)
{
    if (!m)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no matrix");
    if (m->rows <= 0 || m->cols <= 0 || m->rows > (1 << 28) || m->cols > (1 << 28))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad shape [%d, %d]", m->rows, m->cols);
    switch (m->dt) {
    case COLI_DT_F32:
    case COLI_DT_BF16:
        if (!m->data)
            return coli__fail(err, COLI_EINVAL, "GPU tier: a float matrix without data");
        return COLI_OK;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        break;
    default:
        return coli__fail(err, COLI_EUNSUPPORTED, "GPU tier: unsupported format %d", (int)m->dt);
    }
    if (m->cols % QK)
        return coli__fail(err, COLI_EINVAL, "GPU tier: %d columns is not a multiple of 32", m->cols);
    if (m->dt == COLI_DT_Q4 && ((m->group != 32 && m->group != 64 && m->group != 128) || m->cols % m->group))
        return coli__fail(err, COLI_EINVAL, "GPU tier: q4 group %d does not fit %d columns", m->group, m->cols);
    if (!m->qs || !m->d || (m->dt == COLI_DT_Q2 && !m->m))
        return coli__fail(err, COLI_EINVAL, "GPU tier: a quantized matrix without its quants, scales or minimums");
    return COLI_OK;
}

static coli_status copy_in(const coli__gpu_mat *m, void *mem, coli__err *err)
{
    size_t a, b, c;
    coli__gpu_array_bytes(m, &a, &b, &c);
    char *base = (char *)mem;
    const void *src_a = m->dt == COLI_DT_F32 || m->dt == COLI_DT_BF16 ? m->data : (const void *)m->qs;
    CK(cudaMemcpy(base, src_a, a, cudaMemcpyHostToDevice), "copying a tensor to the device");
    if (b)
        CK(cudaMemcpy(base + coli__align256(a), m->d, b, cudaMemcpyHostToDevice), "copying scales to the device");
    if (c)
        CK(cudaMemcpy(base + coli__align256(a) + coli__align256(b), m->m, c, cudaMemcpyHostToDevice),
           "copying minimums to the device");
    return COLI_OK;
}

static coli_status gpu_upload(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err)
{
    *handle = -1;
    COLI_TRY(check_dev(g, dev, err));
    COLI_TRY(check_mat(m, err));
    COLI_TRY(coli__gpu_injected(g, err));
    int h = -1;
    for (int i = 0; i < g->n_t; i++)
        if (!g->t[i].used) {
            h = i;
            break;
        }
    if (h < 0) {
        if (g->n_t == g->cap_t) {
            int cap = g->cap_t ? 2 * g->cap_t : 256;
            tensor *nt = (tensor *)realloc(g->t, (size_t)cap * sizeof *nt);
            if (!nt)
                return coli__fail(err, COLI_ENOMEM, "GPU tier: out of host memory");
            g->t = nt;
            g->cap_t = cap;
        }
        h = g->n_t++;
        g->t[h].used = 0;
    }
    tensor *t = &g->t[h];
    uint64_t bytes = gpu_tensor_bytes(m);
    CK(cudaSetDevice(g->dev[dev].ordinal), "cudaSetDevice");
    void *mem = NULL;
    cudaError_t e = cudaMalloc(&mem, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return coli__fail(err, COLI_ENOMEM, "GPU tier: no room for a [%d, %d] tensor (%llu bytes) on device %d: %s",
                          m->rows, m->cols, (unsigned long long)bytes, g->dev[dev].ordinal, cudaGetErrorString(e));
    }
    coli_status st = copy_in(m, mem, err);
    if (st != COLI_OK) {
        cudaFree(mem);
        return st;
    }
    t->used = 1;
    t->dev = dev;
    t->shape = *m;
    t->shape.data = NULL;
    t->shape.qs = NULL;
    t->shape.d = t->shape.m = NULL;
    t->mem = mem;
    t->bytes = bytes;
    g->dev[dev].st.resident_tensors++;
    g->dev[dev].st.resident_bytes += bytes;
    *handle = h;
    return COLI_OK;
}

static coli_status gpu_update(coli__gpu *g, int handle, const coli__gpu_mat *m, coli__err *err)
{
    tensor *t = coli__gpu_lookup(g, handle);
    if (!t)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no tensor %d", handle);
    COLI_TRY(check_mat(m, err));
    int g1 = m->dt == COLI_DT_Q4 ? m->group : 0, g0 = t->shape.dt == COLI_DT_Q4 ? t->shape.group : 0;
    if (m->dt != t->shape.dt || m->rows != t->shape.rows || m->cols != t->shape.cols || g1 != g0)
        return coli__fail(err, COLI_EINVAL,
                          "GPU tier: tensor %d is [%d, %d] in format %d; an update must keep shape and format", handle,
                          t->shape.rows, t->shape.cols, (int)t->shape.dt);
    COLI_TRY(coli__gpu_injected(g, err));
    CK(cudaSetDevice(g->dev[t->dev].ordinal), "cudaSetDevice");
    return copy_in(m, t->mem, err);
}

static void gpu_release(coli__gpu *g, int handle)
{
    tensor *t = coli__gpu_lookup(g, handle);
    if (!t)
        return;
    device *dv = &g->dev[t->dev];
    if (cudaSetDevice(dv->ordinal) == cudaSuccess)
        cudaFree(t->mem);
    (void)cudaGetLastError();
    dv->st.resident_tensors--;
    dv->st.resident_bytes -= t->bytes;
    t->used = 0;
    t->mem = NULL;
}

/* Grows a device's scratch and staging buffers. */
static coli_status reserve(device *dv, size_t dev_bytes, size_t host_bytes, coli__err *err)
{
    if (dv->scratch_cap < dev_bytes) {
        if (dv->scratch)
            cudaFree(dv->scratch);
        dv->scratch = NULL;
        dv->scratch_cap = 0;
        CK(cudaMalloc(&dv->scratch, dev_bytes), "allocating device scratch");
        dv->scratch_cap = dev_bytes;
    }
    if (dv->staging_cap < host_bytes) {
        if (dv->staging)
            cudaFreeHost(dv->staging);
        dv->staging = NULL;
        dv->staging_cap = 0;
        CK(cudaMallocHost(&dv->staging, host_bytes), "allocating pinned host memory");
        dv->staging_cap = host_bytes;
    }
    return COLI_OK;
}

/* A bump allocator over one buffer. */
typedef struct carve {
    char *base;
    size_t off;
} carve;

static void *take(carve *c, size_t bytes)
{
    void *p = c->base + c->off;
    c->off += coli__align256(bytes);
    return p;
}

static uint64_t elapsed_ns(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

/*
 * The common path of matmul and experts on one device. Stage 1: products
 * a (each job's gate and up, or the single matmul) on x; for experts,
 * SwiGLU and stage 2: the down products on h. One copy in (x and the
 * product tables), one copy out (y).
 */
typedef struct job_view {
    prod gate, up, down;
    int n_rows;
} job_view;

static coli_status run(coli__gpu *g, int dev, const job_view *jobs, int n_jobs, int is_experts, const float *x,
                       float *y, coli__err *err)
{
    device *dv = &g->dev[dev];
    int total = 0;
    for (int j = 0; j < n_jobs; j++)
        total += jobs[j].n_rows;
    if (total == 0)
        return COLI_OK;
    const prod *first = is_experts ? &jobs[0].gate : &jobs[0].down;
    /* dt: the format of stage 1 (gate and up, or the one matrix); dt2: of
     * the down projections, which may differ (a width the quantized formats
     * cannot take leaves them in bf16) */
    int dt = first->dt, H = first->cols;
    int dt2 = is_experts ? jobs[0].down.dt : dt;
    int I = is_experts ? jobs[0].gate.rows : 0;
    int O = is_experts ? H : jobs[0].down.rows;
    for (int j = 0; j < n_jobs; j++) {
        const job_view *jv = &jobs[j];
        if (is_experts) {
            if (jv->gate.dt != dt || jv->up.dt != dt || jv->down.dt != dt2 || jv->gate.cols != H ||
                jv->up.cols != H || jv->down.rows != H || jv->gate.rows != I || jv->up.rows != I ||
                jv->down.cols != I)
                return coli__fail(err, COLI_EINVAL,
                                  "GPU tier: expert %d of the call differs from the first in format or shape", j);
        }
    }
    int n_stage1 = is_experts ? 2 * n_jobs : 1, n_stage2 = is_experts ? n_jobs : 0;
    int max_rows1 = 0; /* the most tokens of one product */
    for (int j = 0; j < n_jobs; j++)
        max_rows1 = jobs[j].n_rows > max_rows1 ? jobs[j].n_rows : max_rows1;
    size_t n_prods = (size_t)(n_stage1 + n_stage2);
    size_t x_bytes = (size_t)total * H * 4, y_bytes = (size_t)total * O * 4;
    size_t tab_bytes = n_prods * sizeof(prod);
    /* device layout */
    size_t q_bytes = coli__is_quant(dt) ? coli__align256((size_t)total * H) + 2 * coli__align256((size_t)total * (H / QK) * 4) : 0;
    size_t qh_bytes = coli__is_quant(dt2) && is_experts
                          ? coli__align256((size_t)total * I) + 2 * coli__align256((size_t)total * (I / QK) * 4)
                          : 0;
    size_t gu_bytes = is_experts ? 3 * coli__align256((size_t)total * I * 4) : 0;
    size_t dev_need = coli__align256(tab_bytes) + coli__align256(x_bytes) + coli__align256(y_bytes) + q_bytes + qh_bytes + gu_bytes;
    size_t host_need = coli__align256(tab_bytes) + coli__align256(x_bytes > y_bytes ? x_bytes : y_bytes);
    CK(cudaSetDevice(dv->ordinal), "cudaSetDevice");
    COLI_TRY(reserve(dv, dev_need, host_need, err));
    carve dc = {(char *)dv->scratch, 0};
    prod *d_tab = (prod *)take(&dc, tab_bytes);
    float *d_x = (float *)take(&dc, x_bytes);
    float *d_y = (float *)take(&dc, y_bytes);
    int8_t *px = NULL, *ph = NULL;
    float *sx = NULL, *sh = NULL, *d_g = NULL, *d_u = NULL, *d_h = NULL;
    int32_t *psx = NULL, *psh = NULL;
    if (coli__is_quant(dt)) {
        px = (int8_t *)take(&dc, (size_t)total * H);
        sx = (float *)take(&dc, (size_t)total * (H / QK) * 4);
        psx = (int32_t *)take(&dc, (size_t)total * (H / QK) * 4);
    }
    if (is_experts) {
        d_g = (float *)take(&dc, (size_t)total * I * 4);
        d_u = (float *)take(&dc, (size_t)total * I * 4);
        d_h = (float *)take(&dc, (size_t)total * I * 4);
        if (coli__is_quant(dt2)) {
            ph = (int8_t *)take(&dc, (size_t)total * I);
            sh = (float *)take(&dc, (size_t)total * (I / QK) * 4);
            psh = (int32_t *)take(&dc, (size_t)total * (I / QK) * 4);
        }
    }
    /* the product tables, built on the host in the staging buffer */
    carve hc = {(char *)dv->staging, 0};
    prod *h_tab = (prod *)take(&hc, tab_bytes);
    float *h_x = (float *)take(&hc, x_bytes > y_bytes ? x_bytes : y_bytes);
    int off = 0;
    for (int j = 0; j < n_jobs; j++) {
        const job_view *jv = &jobs[j];
        if (is_experts) {
            prod a = jv->gate, b = jv->up, c = jv->down;
            a.x0 = b.x0 = c.x0 = off;
            a.n_tok = b.n_tok = c.n_tok = jv->n_rows;
            a.y = d_g + (size_t)off * I;
            b.y = d_u + (size_t)off * I;
            c.y = d_y + (size_t)off * H;
            a.ys = b.ys = I;
            c.ys = H;
            h_tab[2 * j] = a;
            h_tab[2 * j + 1] = b;
            h_tab[n_stage1 + j] = c;
        } else {
            prod a = jv->down;
            a.x0 = 0;
            a.n_tok = jv->n_rows;
            a.y = d_y;
            a.ys = O;
            h_tab[0] = a;
        }
        off += jv->n_rows;
    }
    memcpy(h_x, x, x_bytes);
    cudaStream_t st = dv->stream;
    CK(cudaEventRecord(dv->ev[0], st), "cudaEventRecord");
    /* table and x sit together in staging and in scratch: one copy */
    size_t in_bytes = (size_t)((char *)h_x - (char *)h_tab) + x_bytes;
    if ((char *)d_x - (char *)d_tab != (char *)h_x - (char *)h_tab)
        return coli__fail(err, COLI_EGPU, "GPU tier: internal layout mismatch");
    CK(cudaMemcpyAsync(d_tab, h_tab, in_bytes, cudaMemcpyHostToDevice, st), "copying activations to the device");
    CK(cudaEventRecord(dv->ev[1], st), "cudaEventRecord");
    if (coli__is_quant(dt))
        COLI_TRY(coli__k_quantize(st, d_x, total, H, px, sx, psx, err));
    COLI_TRY(coli__k_products(st, dt, d_tab, n_stage1, is_experts ? I : O, H, max_rows1, px, sx, psx, d_x, 1, err));
    if (is_experts) {
        COLI_TRY(coli__k_swiglu(st, d_g, d_u, d_h, (size_t)total * I, err));
        if (coli__is_quant(dt2))
            COLI_TRY(coli__k_quantize(st, d_h, total, I, ph, sh, psh, err));
        COLI_TRY(coli__k_products(st, dt2, d_tab + n_stage1, n_stage2, H, I, max_rows1, ph, sh, psh, d_h, 1, err));
    }
    CK(cudaEventRecord(dv->ev[2], st), "cudaEventRecord");
    CK(cudaMemcpyAsync(h_x, d_y, y_bytes, cudaMemcpyDeviceToHost, st), "copying results from the device");
    CK(cudaEventRecord(dv->ev[3], st), "cudaEventRecord");
    CK(cudaStreamSynchronize(st), "running the products");
    memcpy(y, h_x, y_bytes);
    dv->st.calls++;
    dv->st.rows += (uint64_t)total;
    dv->st.h2d_ns += elapsed_ns(dv->ev[0], dv->ev[1]);
    dv->st.kernel_ns += elapsed_ns(dv->ev[1], dv->ev[2]);
    dv->st.d2h_ns += elapsed_ns(dv->ev[2], dv->ev[3]);
    dv->st.h2d_bytes += in_bytes;
    dv->st.d2h_bytes += y_bytes;
    return COLI_OK;
}

static coli_status gpu_matmul(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err)
{
    tensor *t = coli__gpu_lookup(g, handle);
    if (!t)
        return coli__fail(err, COLI_EINVAL, "GPU tier: no tensor %d", handle);
    if (S < 0 || (S > 0 && (!x || !y)))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad matmul arguments (S = %d)", S);
    COLI_TRY(coli__gpu_injected(g, err));
    job_view jv;
    memset(&jv, 0, sizeof jv);
    coli__gpu_view(t, &jv.down);
    jv.n_rows = S;
    coli_status st = run(g, t->dev, &jv, 1, 0, x, y, err);
    if (st != COLI_OK)
        g->dev[t->dev].st.failures++;
    return st;
}

static coli_status gpu_experts(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                               float *y, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    if (n_jobs < 0 || (n_jobs > 0 && (!jobs || !x || !y)))
        return coli__fail(err, COLI_EINVAL, "GPU tier: bad expert call arguments");
    if (n_jobs == 0)
        return COLI_OK;
    job_view *jv = (job_view *)calloc((size_t)n_jobs, sizeof *jv);
    if (!jv)
        return coli__fail(err, COLI_ENOMEM, "GPU tier: out of host memory");
    coli_status st = COLI_OK;
    for (int j = 0; j < n_jobs && st == COLI_OK; j++) {
        tensor *a = coli__gpu_lookup(g, jobs[j].gate), *b = coli__gpu_lookup(g, jobs[j].up), *c = coli__gpu_lookup(g, jobs[j].down);
        if (!a || !b || !c)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d of the call names a missing tensor", j);
        else if (a->dev != dev || b->dev != dev || c->dev != dev)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d of the call is not on device %d", j, dev);
        else if (jobs[j].n_rows < 0)
            st = coli__fail(err, COLI_EINVAL, "GPU tier: expert %d: %d rows", j, jobs[j].n_rows);
        else {
            coli__gpu_view(a, &jv[j].gate);
            coli__gpu_view(b, &jv[j].up);
            coli__gpu_view(c, &jv[j].down);
            jv[j].n_rows = jobs[j].n_rows;
        }
    }
    if (st == COLI_OK)
        st = coli__gpu_injected(g, err);
    if (st == COLI_OK) {
        st = run(g, dev, jv, n_jobs, 1, x, y, err);
        if (st != COLI_OK)
            g->dev[dev].st.failures++;
    }
    free(jv);
    return st;
}

static coli_status gpu_stats(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err)
{
    COLI_TRY(check_dev(g, dev, err));
    *out = g->dev[dev].st;
    return COLI_OK;
}

static const coli__gpu_ops gpu_ops = {
    gpu_compiled,      gpu_probe,         gpu_init,        gpu_free,         gpu_n_devices,    gpu_device_info,
    gpu_upload,        gpu_update,        gpu_release,     gpu_tensor_bytes, gpu_matmul,       gpu_experts,
    gpu_stats,         coli__pipe_bytes,  coli__pipe_create, coli__pipe_free, coli__pipe_run,  coli__pipe_stats,
};

extern "C" const coli__gpu_ops *coli__gpu_backend(void)
{
    return &gpu_ops;
}
