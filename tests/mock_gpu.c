/* mock_gpu.c - see mock_gpu.h. Products go through coli__matmul on a view
 * of the copied arrays, SwiGLU through coli__swiglu: the CPU expert path's
 * own arithmetic, so the engine's split and combine are what a test sees.
 * One mutex serialises the calls that touch the shared counters, so that
 * models on several threads may use the mock at once (tests/test_threads.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "mock_gpu.h"
#include "cpu/silu.h"

#define MAXT 4096

typedef struct tensor {
    int dev; /* -1: free slot */
    coli__mat m;
    void *mem;
    uint64_t bytes;
} tensor;

struct coli__gpu {
    int n;
    int ord[COLI_GPU_MAX_DEVICES];
    uint64_t used[COLI_GPU_MAX_DEVICES];
    int64_t fail_after, ok_calls;
    tensor t[MAXT];
    coli__gpu_stats st[COLI_GPU_MAX_DEVICES];
};

static int g_n;
static uint64_t g_cap, g_report;
static int g_period, g_phase;
static uint64_t g_seq; /* upload attempts */
static mock_gpu_counts g_cnt[COLI_GPU_MAX_DEVICES];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

void mock_gpu_setup(int n_devices, uint64_t capacity)
{
    g_n = n_devices;
    g_cap = capacity;
    g_report = 0;
    g_period = 0;
    g_seq = 0;
    pthread_mutex_lock(&g_mu);
    memset(g_cnt, 0, sizeof g_cnt);
    pthread_mutex_unlock(&g_mu);
}

void mock_gpu_report_free(uint64_t bytes)
{
    g_report = bytes;
}

void mock_gpu_refuse_every(int period, int phase)
{
    g_period = period;
    g_phase = phase;
}

void mock_gpu_get(int ordinal, mock_gpu_counts *out)
{
    pthread_mutex_lock(&g_mu);
    *out = g_cnt[ordinal];
    pthread_mutex_unlock(&g_mu);
}

static const char *m_compiled(void)
{
    return "mock";
}

static void info_of(int ord, coli__gpu_devinfo *d, uint64_t used)
{
    memset(d, 0, sizeof *d);
    d->ordinal = ord;
    snprintf(d->name, sizeof d->name, "Mock GPU %d", ord);
    snprintf(d->arch, sizeof d->arch, "mock");
    d->wave = 32;
    d->total_bytes = g_report ? g_report : g_cap;
    d->free_bytes = d->total_bytes - used;
}

static coli_status m_probe(coli__gpu_devinfo *info, int cap, int *n, coli__err *err)
{
    (void)err;
    for (int i = 0; info && i < g_n && i < cap; i++)
        info_of(i, &info[i], 0);
    *n = g_n;
    return COLI_OK;
}

static coli_status m_init(const coli__gpu_params *p, coli__gpu **out, coli__err *err)
{
    *out = NULL;
    coli__gpu *g = calloc(1, sizeof *g);
    if (!g)
        return coli__fail(err, COLI_ENOMEM, "mock: out of memory");
    g->n = p->devices ? p->n_devices : 1;
    for (int i = 0; i < g->n; i++) {
        g->ord[i] = p->devices ? p->devices[i] : 0;
        if (g->ord[i] >= g_n) {
            int bad = g->ord[i];
            free(g);
            return coli__fail(err, COLI_EINVAL, "mock: no device %d", bad);
        }
        g_cnt[g->ord[i]].inits++;
    }
    for (int i = 0; i < MAXT; i++)
        g->t[i].dev = -1;
    g->fail_after = p->fail_after;
    *out = g;
    return COLI_OK;
}

static void m_release(coli__gpu *g, int h)
{
    if (!g || h < 0 || h >= MAXT || g->t[h].dev < 0)
        return;
    tensor *t = &g->t[h];
    g->used[t->dev] -= t->bytes;
    g_cnt[g->ord[t->dev]].live--;
    g_cnt[g->ord[t->dev]].used -= t->bytes;
    g->st[t->dev].resident_tensors--;
    g->st[t->dev].resident_bytes -= t->bytes;
    free(t->mem);
    t->mem = NULL;
    t->dev = -1;
}

static void m_free(coli__gpu *g)
{
    if (!g)
        return;
    for (int i = 0; i < MAXT; i++)
        m_release(g, i);
    free(g);
}

static int m_n_devices(const coli__gpu *g)
{
    return g->n;
}

static coli_status m_device_info(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err)
{
    if (dev < 0 || dev >= g->n)
        return coli__fail(err, COLI_EINVAL, "mock: device index %d", dev);
    info_of(g->ord[dev], out, g->used[dev]);
    return COLI_OK;
}

/* A fallible call: fails once fail_after successes have happened. */
static coli_status gate(coli__gpu *g, int dev, coli__err *err)
{
    if (g->fail_after >= 0 && g->ok_calls >= g->fail_after) {
        g_cnt[g->ord[dev]].injected++;
        g->st[dev].failures++;
        return coli__fail(err, COLI_EGPU, "mock: injected failure after %lld calls", (long long)g->fail_after);
    }
    return COLI_OK;
}

static uint64_t m_tensor_bytes(const coli__gpu_mat *m)
{
    switch (m->dt) {
    case COLI_DT_F32:
        return (uint64_t)m->rows * (uint64_t)m->cols * 4;
    case COLI_DT_BF16:
        return (uint64_t)m->rows * (uint64_t)m->cols * 2;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        return coli__q_matrix_bytes(m->dt, m->group, m->rows, m->cols);
    default:
        return 0;
    }
}

static coli_status m_upload(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err)
{
    *handle = -1;
    if (dev < 0 || dev >= g->n)
        return coli__fail(err, COLI_EINVAL, "mock: device index %d", dev);
    COLI_TRY(gate(g, dev, err));
    uint64_t b = m_tensor_bytes(m);
    if (b == 0)
        return coli__fail(err, COLI_EINVAL, "mock: format %d", (int)m->dt);
    if (g->used[dev] + b > g_cap || (g_period > 0 && (int)(g_seq++ % (uint64_t)g_period) == g_phase)) {
        g_cnt[g->ord[dev]].refused++;
        return coli__fail(err, COLI_ENOMEM, "mock: device %d is full", g->ord[dev]);
    }
    int h = 0;
    while (h < MAXT && g->t[h].dev >= 0)
        h++;
    if (h == MAXT)
        return coli__fail(err, COLI_ENOMEM, "mock: too many tensors");
    tensor *t = &g->t[h];
    t->mem = malloc(b);
    if (!t->mem)
        return coli__fail(err, COLI_ENOMEM, "mock: out of memory");
    memset(&t->m, 0, sizeof t->m);
    t->m.rows = m->rows;
    t->m.cols = m->cols;
    t->m.dt = m->dt;
    if (m->dt == COLI_DT_F32 || m->dt == COLI_DT_BF16) {
        memcpy(t->mem, m->data, b);
        t->m.data = t->mem;
    } else {
        /* quants, scales, minimums: one block, laid out as the loader does */
        size_t qs = (size_t)m->rows * coli__q_row_bytes(m->dt, m->cols);
        size_t nd = (size_t)m->rows * (size_t)(m->cols / m->group);
        uint8_t *p = t->mem;
        memcpy(p, m->qs, qs);
        memcpy(p + qs, m->d, 2 * nd);
        if (m->dt == COLI_DT_Q2)
            memcpy(p + qs + 2 * nd, m->m, b - qs - 2 * nd);
        t->m.q = (coli__qmat){m->dt, m->group, m->rows, m->cols, p, (const uint16_t *)(p + qs),
                              m->dt == COLI_DT_Q2 ? (const uint16_t *)(p + qs + 2 * nd) : NULL, COLI__QL_ROWS};
    }
    t->dev = dev;
    t->bytes = b;
    g->used[dev] += b;
    g->ok_calls++;
    g->st[dev].resident_tensors++;
    g->st[dev].resident_bytes += b;
    g->st[dev].h2d_bytes += b;
    g_cnt[g->ord[dev]].uploads++;
    g_cnt[g->ord[dev]].live++;
    g_cnt[g->ord[dev]].used += b;
    *handle = h;
    return COLI_OK;
}

static coli_status m_update(coli__gpu *g, int handle, const coli__gpu_mat *m, coli__err *err)
{
    (void)g;
    (void)handle;
    (void)m;
    return coli__fail(err, COLI_EUNSUPPORTED, "mock: update is not implemented");
}

static const coli__mat *on(const coli__gpu *g, int dev, int h)
{
    return h >= 0 && h < MAXT && g->t[h].dev == dev ? &g->t[h].m : NULL;
}

static coli_status m_matmul(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err)
{
    if (handle < 0 || handle >= MAXT || g->t[handle].dev < 0)
        return coli__fail(err, COLI_EINVAL, "mock: handle %d", handle);
    int dev = g->t[handle].dev;
    COLI_TRY(gate(g, dev, err));
    COLI_TRY(coli__matmul(NULL, NULL, &g->t[handle].m, x, S, y));
    g->ok_calls++;
    g->st[dev].calls++;
    g->st[dev].rows += (uint64_t)S;
    g_cnt[g->ord[dev]].matmul_calls++;
    return COLI_OK;
}

static coli_status m_experts(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                             float *y, coli__err *err)
{
    if (dev < 0 || dev >= g->n)
        return coli__fail(err, COLI_EINVAL, "mock: device index %d", dev);
    COLI_TRY(gate(g, dev, err));
    size_t row = 0;
    for (int j = 0; j < n_jobs; j++) {
        const coli__mat *G = on(g, dev, jobs[j].gate), *U = on(g, dev, jobs[j].up), *D = on(g, dev, jobs[j].down);
        if (!G || !U || !D)
            return coli__fail(err, COLI_EINVAL, "mock: job %d names a tensor not on device %d", j, dev);
        int n = jobs[j].n_rows, I = G->rows, H = G->cols;
        float *a = malloc((size_t)n * I * sizeof(float)), *b = malloc((size_t)n * I * sizeof(float));
        coli_status st = a && b ? COLI_OK : COLI_ENOMEM;
        if (st == COLI_OK)
            st = coli__matmul(NULL, NULL, G, x + row * H, n, a);
        if (st == COLI_OK)
            st = coli__matmul(NULL, NULL, U, x + row * H, n, b);
        for (size_t k = 0; st == COLI_OK && k < (size_t)n * I; k++)
            a[k] = coli__swiglu(a[k], b[k]);
        if (st == COLI_OK)
            st = coli__matmul(NULL, NULL, D, a, n, y + row * H);
        free(a);
        free(b);
        if (st != COLI_OK)
            return coli__fail(err, st, "mock: out of memory");
        row += (size_t)n;
    }
    g->ok_calls++;
    g->st[dev].calls++;
    g->st[dev].rows += row;
    g->st[dev].kernel_ns += 1000 * (uint64_t)n_jobs; /* a fixed fake time: shows it is reported */
    g_cnt[g->ord[dev]].expert_calls++;
    g_cnt[g->ord[dev]].jobs += (uint64_t)n_jobs;
    g_cnt[g->ord[dev]].rows += row;
    return COLI_OK;
}

static coli_status m_stats(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err)
{
    if (dev < 0 || dev >= g->n)
        return coli__fail(err, COLI_EINVAL, "mock: device index %d", dev);
    *out = g->st[dev];
    return COLI_OK;
}

/* The calls that count, under g_mu. */
static coli_status l_init(const coli__gpu_params *p, coli__gpu **out, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_init(p, out, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static void l_free(coli__gpu *g)
{
    pthread_mutex_lock(&g_mu);
    m_free(g);
    pthread_mutex_unlock(&g_mu);
}

static void l_release(coli__gpu *g, int h)
{
    pthread_mutex_lock(&g_mu);
    m_release(g, h);
    pthread_mutex_unlock(&g_mu);
}

static coli_status l_upload(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_upload(g, dev, m, handle, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static coli_status l_matmul(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_matmul(g, handle, x, S, y, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static coli_status l_experts(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                             float *y, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_experts(g, dev, jobs, n_jobs, x, y, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static coli_status l_stats(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_stats(g, dev, out, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static coli_status l_device_info(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = m_device_info(g, dev, out, err);
    pthread_mutex_unlock(&g_mu);
    return st;
}

static const coli__gpu_ops mock_ops = {
    m_compiled, m_probe,  l_init,    l_free,         m_n_devices, l_device_info, l_upload,
    m_update,   l_release, m_tensor_bytes, l_matmul, l_experts,   l_stats,       NULL,
    NULL,       NULL,      NULL,           NULL,
};

const coli__gpu_ops *mock_gpu_ops(void)
{
    return &mock_ops;
}

const coli__gpu_ops *mock_gpu_ops_pipe(void)
{
    static coli__gpu_ops with;
    with = mock_ops;
    mock_pipe_ops(&with);
    return &with;
}

/* ---- for mock_pipe.c --------------------------------------------------------- */

const coli__mat *mock_gpu_mat(const coli__gpu *g, int h)
{
    return h >= 0 && h < MAXT && g->t[h].dev >= 0 ? &g->t[h].m : NULL;
}

coli_status mock_gpu_reserve(coli__gpu *g, int dev, uint64_t bytes, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = gate(g, dev, err);
    if (st == COLI_OK && g->used[dev] + bytes > g_cap)
        st = coli__fail(err, COLI_ENOMEM, "mock: %llu bytes do not fit on device %d (%llu free)",
                        (unsigned long long)bytes, g->ord[dev], (unsigned long long)(g_cap - g->used[dev]));
    if (st == COLI_OK) {
        g->used[dev] += bytes;
        g->ok_calls++;
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

void mock_gpu_unreserve(coli__gpu *g, int dev, uint64_t bytes)
{
    pthread_mutex_lock(&g_mu);
    g->used[dev] -= bytes;
    pthread_mutex_unlock(&g_mu);
}

coli_status mock_gpu_call(coli__gpu *g, int dev, coli__err *err)
{
    pthread_mutex_lock(&g_mu);
    coli_status st = gate(g, dev, err);
    if (st == COLI_OK)
        g->ok_calls++;
    pthread_mutex_unlock(&g_mu);
    return st;
}
