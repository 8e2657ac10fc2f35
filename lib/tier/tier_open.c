/* tier_open.c - the GPU tier at model open: its settings resolved, experts
 * placed whole on devices (lib/tier/placement.c) and uploaded, the output
 * projection where room is left, host copies released when asked; and its
 * close (tier.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "tier/placement.h"
#include "tier/tier.h"
#include "store/store.h"

/* ---- open ---------------------------------------------------------------- */

static int supported(const coli__mat *w)
{
    return w->dt == COLI_DT_F32 || w->dt == COLI_DT_BF16 || w->dt == COLI_DT_Q8 || w->dt == COLI_DT_Q4 ||
           w->dt == COLI_DT_Q2;
}

coli__gpu_mat coli__gpu_mat_of(const coli__mat *w)
{
    coli__gpu_mat g;
    memset(&g, 0, sizeof g);
    g.dt = w->dt;
    g.rows = w->rows;
    g.cols = w->cols;
    if (w->dt == COLI_DT_F32 || w->dt == COLI_DT_BF16) {
        g.data = w->data;
    } else {
        g.group = w->q.group;
        g.qs = w->q.qs;
        g.d = w->q.d;
        g.m = w->q.m;
    }
    return g;
}

static void tier_free(struct coli__tier *t)
{
    if (!t)
        return;
    if (t->g) {
        for (size_t i = 0; t->h && i < (size_t)t->L * (size_t)t->E * 3; i++)
            if (t->h[i] >= 0)
                t->ops->release(t->g, t->h[i]);
        if (t->out_h >= 0)
            t->ops->release(t->g, t->out_h);
        t->ops->free(t->g);
    }
    pthread_mutex_destroy(&t->mu);
    for (int d = 0; d < MAXD; d++)
        pthread_mutex_destroy(&t->dev_mu[d]);
    free(t->dev);
    free(t->h);
    free(t->host);
    free(t->jobs);
    free(t);
}

/* The tier requested but not usable: a warning, the CPU for every expert. */
static coli_status cpu_only(coli_model *m, const char *why)
{
    snprintf(m->gpu_detail, sizeof m->gpu_detail, "not in use: %.140s", why);
    coli__log(&m->opts.log, COLI_LOG_WARN, "GPU expert tier requested but %s; every expert runs on the CPU", why);
    return COLI_OK;
}

/* Uploads the three matrices of one expert; on failure none stays. A
 * converted model's expert comes through the store: checked, and read from
 * disk into buf when streamed (never into a slot of the RAM cache). */
static coli_status upload_expert(const coli_model *m, struct coli__tier *t, int l, int e, int d, int *h, void *buf,
                                 coli__err *err)
{
    const coli__layer *ly = &m->w.layers[l];
    coli__mat tmp[3];
    const coli__mat *mats[3] = {&ly->e_gate[e], &ly->e_up[e], &ly->e_down[e]};
    if (m->store) {
        COLI_TRY(coli__store_read_into(m->store, l, e, buf, tmp, err));
        for (int k = 0; k < 3; k++)
            mats[k] = &tmp[k];
    }
    for (int k = 0; k < 3; k++) {
        coli__gpu_mat gm = coli__gpu_mat_of(mats[k]);
        coli_status st = t->ops->upload(t->g, d, &gm, &h[k], err);
        if (st != COLI_OK) {
            for (int j = 0; j < k; j++) {
                t->ops->release(t->g, h[j]);
                h[j] = -1;
            }
            h[k] = -1;
            return st;
        }
    }
    return COLI_OK;
}

/* Once every expert is resident, the output projection goes where room
 * is left: after the experts it is the largest matrix a token reads, and
 * its product on a device has the CPU's bits in the quantized formats
 * like any other (docs/formats.md). */
static void place_output(coli_model *m, struct coli__tier *t, const uint64_t *budgets)
{
    const coli__mat *out = &m->w.lm_head;
    if (!supported(out))
        return;
    coli__gpu_mat gm = coli__gpu_mat_of(out);
    uint64_t need = t->ops->tensor_bytes(&gm);
    int best = -1;
    for (int d = 0; d < t->n_dev; d++)
        if (budgets[d] >= t->res_bytes[d] + need &&
            (best < 0 || budgets[d] - t->res_bytes[d] > budgets[best] - t->res_bytes[best]))
            best = d;
    coli__err one;
    coli__err_clear(&one);
    if (best >= 0 && t->ops->upload(t->g, best, &gm, &t->out_h, &one) == COLI_OK) {
        t->out_dev = best; /* not counted in res_bytes: those are the experts' */
    } else {
        t->out_h = -1;
        if (best >= 0)
            coli__log(&m->opts.log, COLI_LOG_INFO, "GPU expert tier: the output projection stays on the CPU: %s",
                      one.msg);
    }
}

static coli_status place_and_upload(coli_model *m, struct coli__tier *t, const coli__tier_conf *gc,
                                    const uint64_t *keep)
{
    size_t n = (size_t)t->L * (size_t)t->E;
    coli_status st = COLI_OK;
    void *buf = NULL;
    uint64_t *sizes = calloc(n ? n : 1, sizeof *sizes);
    int *where = malloc((n ? n : 1) * sizeof *where);
    if (!sizes || !where)
        goto nomem;
    for (int l = 0; l < t->L; l++) {
        const coli__layer *ly = &m->w.layers[l];
        if (!ly->is_moe)
            continue;
        for (int e = 0; e < t->E; e++) {
            const coli__mat *mats[3] = {&ly->e_gate[e], &ly->e_up[e], &ly->e_down[e]};
            if (!supported(mats[0]) || !supported(mats[1]) || !supported(mats[2]))
                continue; /* f16 experts stay on the CPU */
            uint64_t b = 0;
            for (int k = 0; k < 3; k++) {
                coli__gpu_mat gm = coli__gpu_mat_of(mats[k]);
                b += t->ops->tensor_bytes(&gm);
            }
            sizes[(size_t)l * t->E + e] = b;
        }
    }
    uint64_t budgets[MAXD];
    for (int d = 0; d < t->n_dev; d++) {
        uint64_t fr = t->info[d].free_bytes;
        /* reserve for the device's own buffers: 10 % of free memory, at
         * most 1 GiB; an explicit budget is taken as asked, up to free */
        uint64_t reserve = fr / 10 < (UINT64_C(1) << 30) ? fr / 10 : (UINT64_C(1) << 30);
        /* what the device decoder takes first (dense weights, KV cache,
         * scratch): every token needs it */
        uint64_t first = keep ? keep[d] : 0;
        uint64_t room = fr > first ? fr - first : 0;
        budgets[d] = gc->budget >= 0 ? ((uint64_t)gc->budget < room ? (uint64_t)gc->budget : room)
                                     : (room > reserve ? room - reserve : 0);
    }
    /* hot-first when the store has routing counts (model.coli.hot) */
    const uint64_t *hot = m->store ? coli__store_counts(m->store) : NULL;
    if (coli__place(sizes, t->L, t->E, budgets, t->n_dev, hot, where, NULL) < 0)
        goto nomem;
    if (m->store && coli__store_streams(m->store) &&
        posix_memalign(&buf, 4096, coli__store_record_bytes(m->store)) != 0) {
        buf = NULL;
        goto nomem;
    }
    int refused = 0;
    coli__err uerr;
    coli__err_clear(&uerr);
    for (int l = 0; l < t->L; l++)
        for (int e = 0; e < t->E; e++) {
            size_t i = (size_t)l * t->E + e;
            int d = where[i];
            if (d < 0)
                continue;
            coli__err one;
            coli__err_clear(&one);
            coli_status ust = upload_expert(m, t, l, e, d, &t->h[3 * i], buf, &one);
            if (ust == COLI_EIO || ust == COLI_EFORMAT) {
                /* the container, not the device, failed: that is the model's error */
                m->err = one;
                st = ust;
                goto done;
            }
            if (ust != COLI_OK) {
                if (!refused++)
                    uerr = one;
                continue;
            }
            t->dev[i] = (signed char)d;
            t->res_experts[d]++;
            t->res_bytes[d] += sizes[i];
        }
    if (refused)
        coli__log(&m->opts.log, COLI_LOG_WARN,
                  "GPU expert tier: %d experts could not be uploaded (first: %s); they run on the CPU", refused,
                  uerr.msg);
    int all = !refused;
    for (size_t i = 0; all && i < n; i++)
        all = sizes[i] == 0 || where[i] >= 0;
    if (all && !keep) /* the device decoder holds its own */
        place_output(m, t, budgets);
    goto done;
nomem:
    st = coli__fail(&m->err, COLI_ENOMEM, "out of memory placing experts");
done:
    free(buf);
    free(sizes);
    free(where);
    return st;
}

/* CUDA_RELEASE_HOST: drops the host copies of resident experts that the
 * loader allocated (quantized or converted weights), through the source
 * the loader handed down. Weights used as stored point into the mapped
 * checkpoint: nothing to release there. */
static coli_status release_host(coli_model *m, struct coli__tier *t)
{
    uint64_t freed = 0;
    int mapped = 0;
    if (t->src.release(t->src.user, t->dev, t->host, &freed, &mapped) != COLI_OK)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory releasing host copies of experts");
    for (size_t i = 0; i < (size_t)t->L * (size_t)t->E && !t->released; i++)
        t->released = !t->host[i];
    coli__log(&m->opts.log, COLI_LOG_INFO, "GPU expert tier: released %llu MiB of host copies%s",
              (unsigned long long)(freed >> 20),
              mapped ? "; weights used as stored are mapped from the checkpoint and have no copy to release" : "");
    return COLI_OK;
}


coli_status coli__experts_open(coli_model *m, const coli__expert_source *src, const uint64_t *keep)
{
    coli__tier_conf gc;
    COLI_TRY(coli__tier_resolve(&m->opts, &gc, &m->err));
    snprintf(m->gpu_detail, sizeof m->gpu_detail, "off");
    if (!gc.on)
        return COLI_OK;
    if (m->cfg.n_moe_layers == 0 || m->cfg.n_experts == 0)
        return cpu_only(m, "the model has no routed experts");
    const coli__gpu_ops *ops = coli__gpu_ops_of(&m->opts);
    if (strcmp(ops->compiled(), "none") == 0)
        return cpu_only(m, "this libcolibri was built without a GPU tier (configure --with-cuda or --with-hip)");
    coli__err e;
    coli__err_clear(&e);
    int seen = 0;
    if (ops->probe(NULL, 0, &seen, &e) != COLI_OK || seen == 0) {
        char why[COLI_ERRMSG_MAX + 64];
        snprintf(why, sizeof why, "no GPU device is visible%s%s", e.msg[0] ? ": " : "", e.msg);
        return cpu_only(m, why);
    }
    coli__gpu_params p;
    int all[MAXD];
    if (gc.n_devices < 0) {
        gc.n_devices = seen < MAXD ? seen : MAXD;
        for (int d = 0; d < gc.n_devices; d++)
            all[d] = d;
        p.devices = all;
    } else {
        for (int d = 0; d < gc.n_devices; d++)
            if (gc.devices[d] >= seen) {
                char why[128];
                snprintf(why, sizeof why, "device %d was asked for and %d %s visible", gc.devices[d], seen,
                         seen == 1 ? "is" : "are");
                return cpu_only(m, why);
            }
        p.devices = gc.devices;
    }
    p.n_devices = gc.n_devices;
    p.fail_after = gc.fail_after;

    struct coli__tier *t = calloc(1, sizeof *t);
    if (!t)
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory for the GPU expert tier");
    pthread_mutex_init(&t->mu, NULL);
    for (int d = 0; d < MAXD; d++)
        pthread_mutex_init(&t->dev_mu[d], NULL);
    t->ops = ops;
    t->src = *src;
    t->L = m->cfg.n_layers;
    t->E = m->cfg.n_experts;
    size_t n = (size_t)t->L * (size_t)t->E;
    t->dev = malloc(n);
    t->h = malloc(3 * n * sizeof *t->h);
    t->host = malloc(n);
    if (!t->dev || !t->h || !t->host) {
        tier_free(t);
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory for the GPU expert tier");
    }
    memset(t->dev, -1, n);
    memset(t->h, -1, 3 * n * sizeof *t->h);
    memset(t->host, 1, n);
    t->out_h = t->out_dev = -1;
    if (ops->init(&p, &t->g, &e) != COLI_OK) {
        t->g = NULL;
        tier_free(t);
        char why[COLI_ERRMSG_MAX + 32];
        snprintf(why, sizeof why, "it failed to start: %s", e.msg);
        return cpu_only(m, why);
    }
    t->n_dev = ops->n_devices(t->g);
    /* a device's call lists at most every expert of a layer once */
    t->jobs = malloc((size_t)(t->n_dev > 0 ? t->n_dev : 1) * (size_t)t->E * sizeof *t->jobs);
    if (!t->jobs) {
        tier_free(t);
        return coli__fail(&m->err, COLI_ENOMEM, "out of memory for the GPU expert tier");
    }
    for (int d = 0; d < t->n_dev; d++)
        if (ops->device_info(t->g, d, &t->info[d], &e) != COLI_OK) {
            tier_free(t);
            char why[COLI_ERRMSG_MAX + 32];
            snprintf(why, sizeof why, "a device could not be queried: %s", e.msg);
            return cpu_only(m, why);
        }
    coli_status st = place_and_upload(m, t, &gc, keep);
    if (st == COLI_OK && gc.release_host)
        st = release_host(m, t);
    if (st != COLI_OK) {
        tier_free(t);
        return st;
    }
    uint64_t placed = 0, bytes = 0;
    for (int d = 0; d < t->n_dev; d++) {
        placed += t->res_experts[d];
        bytes += t->res_bytes[d];
    }
    snprintf(m->gpu_detail, sizeof m->gpu_detail, "%s, %d device%s, %llu of %llu experts (%llu MiB)%s",
             ops->compiled(), t->n_dev, t->n_dev == 1 ? "" : "s", (unsigned long long)placed,
             (unsigned long long)m->cfg.n_moe_layers * (unsigned long long)m->cfg.n_experts,
             (unsigned long long)(bytes >> 20), gc.release_host ? ", host copies released" : "");
    if (t->out_h >= 0) {
        size_t len = strlen(m->gpu_detail);
        snprintf(m->gpu_detail + len, sizeof m->gpu_detail - len, ", output projection on device %d",
                 t->info[t->out_dev].ordinal);
    }
    coli__log(&m->opts.log, COLI_LOG_INFO, "GPU expert tier: %s", m->gpu_detail);
    m->gpu = t;
    return COLI_OK;
}

void coli__experts_close(coli_model *m)
{
    tier_free(m->gpu);
    m->gpu = NULL;
}

const char *coli__experts_detail(const coli_model *m)
{
    return m->gpu_detail[0] ? m->gpu_detail : "off";
}
