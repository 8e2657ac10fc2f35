/* experts.c - the routed experts of a MoE layer on the CPU and the GPU tier.
 *
 * At open (coli__experts_open) the GPU options are resolved, experts are
 * placed whole on devices (lib/tier/placement.c) and uploaded. At run time each
 * device gets its experts' tokens in one ops->experts call; the other
 * experts, and those of a device whose call failed, run on the CPU with
 * the same kernels as without a GPU. Outputs are combined in one order,
 * ascending expert for every token, so placement never changes a bit.
 *
 * A failing call is logged once per device and kind of failure, and its
 * experts are computed on the CPU for that call. After MAX_FAILS failures
 * in a row a device is given up: its experts run on the CPU from then on
 * (a device that fails that often would only add the cost of a failed
 * call to every layer). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/silu.h"
#include "tier/tier.h"
#include "store/store.h"

/* ---- run ------------------------------------------------------------------- */

#define COLI_MAX_ACTIVE 64 /* experts handed to the threads at once */

typedef struct cpu_batch {
    coli__mm tg[COLI_MAX_ACTIVE], td[COLI_MAX_ACTIVE]; /* gate with up, down */
    coli__mat em[COLI_MAX_ACTIVE][3]; /* experts lent by the store */
    int ref[COLI_MAX_ACTIVE];
    int nt;
    coli__store *store;
    const coli__cpuk *k; /* the model's kernel set */
} cpu_batch;

static void give_back(cpu_batch *b)
{
    for (int i = 0; i < b->nt; i++)
        coli__store_put(b->store, b->ref[i]);
    b->nt = 0;
}

/* gate and up of the batch's experts with their SwiGLU, then their down
 * projections: two hand-outs. */
static coli_status flush(coli__pool *pool, cpu_batch *b)
{
    if (b->nt == 0)
        return COLI_OK;
    /* the first rows of every gate and up, for workers waiting to start */
    const coli__mat *gu[COLI__POOL_HINTS];
    int nh = 0;
    for (int i = 0; i < b->nt && nh + 2 <= COLI__POOL_HINTS; i++) {
        gu[nh++] = b->tg[i].w;
        gu[nh++] = b->tg[i].up;
    }
    coli__matmul_hint(pool, gu, nh, 16384);
    coli_status st = coli__matmul_multi(b->k, pool, b->tg, b->nt);
    if (st == COLI_OK)
        st = coli__matmul_multi(b->k, pool, b->td, b->nt);
    give_back(b);
    return st;
}

/* The host copy of a resident expert, rebuilt from the checkpoint if it
 * was released. */
static coli_status ensure_host(const coli_model *m, struct coli__tier *t, int l, int e)
{
    size_t i = (size_t)l * t->E + e;
    coli_status st = COLI_OK;
    pthread_mutex_lock(&t->mu);
    if (!t->host[i]) {
        coli__err err;
        coli__err_clear(&err);
        st = t->src.reload(t->src.user, l, e, &err);
        if (st == COLI_OK)
            t->host[i] = 1;
        else
            coli__log(&m->opts.log, COLI_LOG_ERROR,
                      "GPU expert tier: rebuilding the host copy of layer %d expert %d: %s", l, e, err.msg);
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* A call on device d worked: its run of failures ends. */
static void note_success(struct coli__tier *t, int d)
{
    pthread_mutex_lock(&t->mu);
    t->fails_in_row[d] = 0;
    pthread_mutex_unlock(&t->mu);
}

/* Records a failed call on device d; logs the first of each kind. */
static void note_failure(const coli_model *m, struct coli__tier *t, int d, coli_status st, const char *msg)
{
    unsigned bit = 1u << ((unsigned)-st & 31u);
    pthread_mutex_lock(&t->mu);
    int warn = !(t->warned[d] & bit);
    t->warned[d] |= bit;
    int give_up = ++t->fails_in_row[d] >= MAX_FAILS && !atomic_load(&t->disabled[d]);
    if (give_up)
        atomic_store(&t->disabled[d], 1);
    pthread_mutex_unlock(&t->mu);
    if (warn)
        coli__log(&m->opts.log, COLI_LOG_WARN,
                  "GPU device %d (%s): %s (%s); its experts ran on the CPU (once per kind of failure)",
                  t->info[d].ordinal, t->info[d].name, msg, coli_status_name(st));
    if (give_up)
        coli__log(&m->opts.log, COLI_LOG_WARN,
                  "GPU device %d (%s): %d failed calls in a row; its experts run on the CPU from now on",
                  t->info[d].ordinal, t->info[d].name, MAX_FAILS);
}

/* The three matrices of expert e for the CPU, from the store when the
 * model has one: without waiting while the batch holds slots (it is run
 * and gives them back first), so that contexts never wait on each other
 * while holding slots. */
static coli_status cpu_expert(const coli_model *m, int l, int e, coli__pool *pool, cpu_batch *b, coli__err *err)
{
    const coli__layer *ly = &m->w.layers[l];
    int i = b->nt;
    b->ref[i] = -1;
    if (!m->store) {
        b->em[i][0] = ly->e_gate[e];
        b->em[i][1] = ly->e_up[e];
        b->em[i][2] = ly->e_down[e];
        return COLI_OK;
    }
    coli_status st = coli__store_get(m->store, l, e, b->nt == 0, b->em[i], &b->ref[i], err);
    if (st != COLI_ENOSPC)
        return st;
    COLI_TRY(flush(pool, b));
    return coli__store_get(m->store, l, e, 1, b->em[0], &b->ref[0], err);
}

/* One call of coli__experts_run: what its steps share. */
typedef struct moe_call {
    const coli_model *m;
    struct coli__tier *t;        /* NULL: every expert on the CPU */
    coli__moe_io *io;
    int l, H, E, K, I, S;
    int n;                       /* routed pairs, in io->rows */
    int cpu;                     /* the CPU's group: after the devices' 0 .. n_dev - 1 */
    signed char *group;          /* [E] group of each routed expert; NULL: the CPU for all */
    int lo[MAXD + 1], hi[MAXD + 1]; /* each group's rows of xe and ye */
    int failed[MAXD];            /* devices whose call failed */
    coli__pool *pool;            /* the CPU's threads, for copies too */
    int pick;                    /* the CPU's experts take their tokens' rows of xn by pair: each
                                    token's row is quantized once for all its experts */
} moe_call;

static int group_of(const moe_call *c, int e)
{
    return c->group ? c->group[e] : c->cpu;
}

/* The canonical order: routed pairs by ascending expert, then token. */
static void order_pairs(moe_call *c, uint64_t *read, coli__experts_counts *counts)
{
    const coli__layer *ly = &c->m->w.layers[c->l];
    coli__moe_io *io = c->io;
    const int K = c->K;
    int n = 0;
    for (int e = 0; e < c->E; e++) {
        int n0 = n;
        for (int s = 0; s < c->S; s++)
            for (int j = 0; j < K; j++)
                if (io->sel[(size_t)s * K + j] == e)
                    io->rows[n++] = s * K + j;
        if (n > n0 && read)
            *read += coli__mat_bytes(&ly->e_gate[e]) + coli__mat_bytes(&ly->e_up[e]) +
                     coli__mat_bytes(&ly->e_down[e]);
        if (n > n0 && counts)
            counts->experts++;
    }
    c->n = n;
    if (counts)
        counts->pairs += (uint64_t)n;
    if (c->m->store)
        for (int s = 0; s < c->S; s++)
            coli__store_routed(c->m->store, c->l, io->sel + (size_t)s * K, K, c->S == 1);
}

/* Each routed expert's group, once for the call: its device, unless the
 * device is given up (as of now: another context may give one up
 * meanwhile), else the CPU. */
static void assign_groups(moe_call *c)
{
    const struct coli__tier *t = c->t;
    if (!c->group)
        return;
    int off[MAXD];
    for (int d = 0; d < t->n_dev; d++)
        off[d] = atomic_load(&t->disabled[d]);
    const signed char *dev = t->dev + (size_t)c->l * c->E;
    for (int r = 0; r < c->n; r++) {
        int e = c->io->sel[c->io->rows[r]];
        c->group[e] = (signed char)(dev[e] >= 0 && !off[dev[e]] ? dev[e] : c->cpu);
    }
}

/* Rows laid out by group (device 0, 1, ..., then the CPU), each expert's
 * rows together: one contiguous block per device call. */
/* Rows [begin, end) of io->rows: each pair's token into its row of xe
 * (many rows of a prompt: the CPU's threads share the copying). */
static void gather_rows(void *arg, int64_t begin, int64_t end, int thread)
{
    const moe_call *c = arg;
    const coli__moe_io *io = c->io;
    (void)thread;
    for (int64_t r = begin; r < end; r++) {
        const int pair = io->rows[r];
        /* one token on the CPU reads xn itself, and so do picked rows */
        if (group_of(c, io->sel[pair]) != c->cpu || (c->S > 1 && !c->pick))
            memcpy(io->xe + (size_t)io->pos[pair] * c->H, io->xn + (size_t)(pair / c->K) * c->H,
                   (size_t)c->H * sizeof(float));
    }
}

static void group_rows(moe_call *c)
{
    coli__moe_io *io = c->io;
    int at = 0;
    for (int gi = 0; gi <= c->cpu; gi++) {
        c->lo[gi] = at;
        for (int r = 0; r < c->n; r++) {
            int pair = io->rows[r];
            if (group_of(c, io->sel[pair]) != gi)
                continue;
            io->pos[pair] = at++;
        }
        c->hi[gi] = at;
    }
    coli__pool_run(c->pool, c->n, 64, gather_rows, c);
}

/* Every read the CPU's share needs starts now, before the devices run
 * theirs; each get then waits only for its own record; reads for the next
 * layer's predicted experts queue behind. */
static void start_reads(const moe_call *c)
{
    const coli__moe_io *io = c->io;
    coli__store *store = c->m->store;
    if (!store)
        return;
    int want[COLI_MAX_ACTIVE], nw = 0;
    for (int r = 0; r < c->n;) {
        int e = io->sel[io->rows[r]];
        while (r < c->n && io->sel[io->rows[r]] == e)
            r++;
        if (group_of(c, e) == c->cpu && nw < COLI_MAX_ACTIVE)
            want[nw++] = e;
    }
    coli__store_want(store, c->l, want, nw);
    if (io->n_pred > 0)
        coli__store_prefetch(store, io->pred_layer, io->pred, io->n_pred);
}

/* One call per device with its experts in ascending order; a failed one
 * leaves its experts to the CPU. */
static void run_devices(moe_call *c, coli__experts_counts *counts)
{
    struct coli__tier *t = c->t;
    coli__moe_io *io = c->io;
    for (int d = 0; d < c->cpu; d++) {
        if (c->hi[d] == c->lo[d])
            continue;
        coli__err derr;
        coli__err_clear(&derr);
        pthread_mutex_lock(&t->dev_mu[d]);
        coli__gpu_expert *jobs = t->jobs + (size_t)d * c->E;
        int nj = 0, prev = -1;
        for (int r = 0; r < c->n; r++) {
            int e = io->sel[io->rows[r]];
            if (group_of(c, e) != d)
                continue;
            if (e != prev) {
                const int *h = &t->h[3 * ((size_t)c->l * c->E + e)];
                jobs[nj++] = (coli__gpu_expert){h[0], h[1], h[2], 0};
                prev = e;
            }
            jobs[nj - 1].n_rows++;
        }
        size_t at = (size_t)c->lo[d] * c->H;
        coli_status st = t->ops->experts(t->g, d, jobs, nj, io->xe + at, io->ye + at, &derr);
        pthread_mutex_unlock(&t->dev_mu[d]);
        uint64_t rows = (uint64_t)(c->hi[d] - c->lo[d]);
        if (st == COLI_OK) {
            note_success(t, d);
            if (counts)
                counts->dev_pairs[d] += rows;
        } else {
            note_failure(c->m, t, d, st, derr.msg[0] ? derr.msg : coli_strerror(st));
            c->failed[d] = 1;
            if (counts)
                counts->dev_fallback[d] += rows;
        }
    }
}

/* The CPU's experts, and those of devices that failed, ascending. */
static coli_status run_cpu(moe_call *c, coli__pool *pool, coli__err *err)
{
    const coli_model *m = c->m;
    struct coli__tier *t = c->t;
    coli__moe_io *io = c->io;
    const int l = c->l, H = c->H, I = c->I;
    cpu_batch b;
    b.nt = 0;
    b.store = m->store;
    b.k = m->cpuk;
    for (int r = 0; r < c->n;) {
        int e = io->sel[io->rows[r]], r0 = r;
        while (r < c->n && io->sel[io->rows[r]] == e)
            r++;
        int gi = group_of(c, e);
        if (gi != c->cpu && !c->failed[gi])
            continue;
        /* resident here, but failed or given up: its host copy may be gone */
        if (t && t->released && t->dev[(size_t)l * c->E + e] >= 0) {
            coli_status st = ensure_host(m, t, l, e);
            if (st != COLI_OK) {
                give_back(&b);
                return coli__fail(err, st, "layer %d expert %d: its host copy could not be rebuilt", l, e);
            }
        }
        if (b.nt == COLI_MAX_ACTIVE) {
            coli_status st = flush(pool, &b);
            if (st != COLI_OK)
                return coli__fail(err, st, "layer %d: %s", l, coli_strerror(st));
        }
        coli_status st = cpu_expert(m, l, e, pool, &b, err);
        if (st != COLI_OK) {
            give_back(&b);
            return st;
        }
        const coli__mat *em = b.em[b.nt];
        int p0 = io->pos[io->rows[r0]], cnt = r - r0;
        const float *xe = gi == c->cpu && c->S == 1 ? io->xn : io->xe + (size_t)p0 * H;
        float *g = io->g + (size_t)p0 * I, *u = io->u + (size_t)p0 * I;
        b.tg[b.nt] = (coli__mm){.w = &em[0], .x = xe, .n_tok = cnt, .y = g, .up = &em[1], .y_up = u};
        if (gi == c->cpu && c->pick) {
            if (coli__dtype_is_quant(em[0].dt) && coli__dtype_is_quant(em[1].dt)) {
                b.tg[b.nt].x = io->xn;
                b.tg[b.nt].x_rows = io->rows + r0;
                b.tg[b.nt].x_div = c->K;
            } else { /* not quantized after all: its rows, as floats */
                for (int q = r0; q < r; q++)
                    memcpy(io->xe + (size_t)io->pos[io->rows[q]] * H, io->xn + (size_t)(io->rows[q] / c->K) * H,
                           (size_t)H * sizeof(float));
            }
        }
        b.td[b.nt] = (coli__mm){.w = &em[2], .x = g, .n_tok = cnt, .y = io->ye + (size_t)p0 * H};
        b.nt++;
    }
    if (io->shared) { /* in the same two hand-outs as the last routed experts */
        if (b.nt == COLI_MAX_ACTIVE) {
            coli_status st = flush(pool, &b);
            if (st != COLI_OK)
                return coli__fail(err, st, "layer %d: %s", l, coli_strerror(st));
        }
        const coli__mat *sm = io->shared;
        b.ref[b.nt] = -1;
        b.tg[b.nt] = (coli__mm){.w = &sm[0], .x = io->xn, .n_tok = c->S, .y = io->shared_g, .up = &sm[1],
                                .y_up = io->shared_u};
        b.td[b.nt] = (coli__mm){.w = &sm[2], .x = io->shared_g, .n_tok = c->S, .y = io->shared_y};
        b.nt++;
    }
    coli_status st = flush(pool, &b);
    if (st != COLI_OK)
        return coli__fail(err, st, "layer %d: %s", l, coli_strerror(st));
    return COLI_OK;
}

/* Weighted sum per token, experts in ascending order, wherever they ran:
 * this order is the bit-exact contract (docs/formats.md). */
static void combine(const moe_call *c)
{
    coli__moe_io *io = c->io;
    const int H = c->H, K = c->K;
    memset(io->out, 0, (size_t)c->S * H * sizeof(float));
    for (int r = 0; r < c->n; r++) {
        int pair = io->rows[r];
        coli__axpy(c->m->cpuk, io->out + (size_t)(pair / K) * H, io->wts[pair], io->ye + (size_t)io->pos[pair] * H,
                   H);
    }
}

/* What both entries do: the pairs in order (read and pair_counts, when
 * set, count the expert reads and the routed pairs), grouped, read, and
 * run on the devices that hold them (dev_counts) and on the CPU. */
static coli_status run_pairs(moe_call *c, const coli_model *m, int l, coli__pool *pool, coli__moe_io *io,
                             uint64_t *read, coli__experts_counts *pair_counts, coli__experts_counts *dev_counts,
                             coli__err *err)
{
    const coli__config *cfg = &m->cfg;
    *c = (moe_call){
        .m = m,
        .t = m->gpu,
        .io = io,
        .l = l,
        .H = cfg->hidden,
        .E = cfg->n_experts,
        .K = cfg->top_k,
        .I = cfg->moe_inter,
        .S = io->S,
        .cpu = m->gpu ? m->gpu->n_dev : 0,
        .pool = pool,
    };
    c->group = c->t ? io->group : NULL;
    const coli__layer *ly = &m->w.layers[l];
    c->pick = c->S > 1 && coli__dtype_is_quant(ly->e_gate[0].dt) && coli__dtype_is_quant(ly->e_up[0].dt);
    order_pairs(c, read, pair_counts);
    assign_groups(c);
    group_rows(c);
    start_reads(c);
    if (c->t)
        run_devices(c, dev_counts);
    return run_cpu(c, pool, err);
}

coli_status coli__experts_run(const coli_model *m, int l, coli__pool *pool, coli__moe_io *io, uint64_t *read,
                              coli__experts_counts *counts, coli__err *err)
{
    moe_call c;
    COLI_TRY(run_pairs(&c, m, l, pool, io, read, counts, counts, err));
    combine(&c);
    return COLI_OK;
}

/* ---- the decoder's hooks (lib/decoder/decoder.h) ------------------------------ */

static coli_status decoder_experts(void *user, int l, coli__pool *pool, coli__moe_io *io, uint64_t *read,
                                   coli__experts_counts *counts, coli__err *err)
{
    return coli__experts_run(user, l, pool, io, read, counts, err);
}

static int decoder_lookahead(void *user)
{
    const coli_model *m = user;
    return m->store && coli__store_streams(m->store) && m->opts.prefetch != 0;
}

/* The output projection on the device that holds it (when every expert
 * fit, room was left for it); the MTP layer's own head stays on the CPU.
 * A failure is noted and the CPU computes it (the same bits). */
static coli_status decoder_place(void *user, const coli__mat *w, const float *x, int n, float *y)
{
    const coli_model *m = user;
    struct coli__tier *t = m->gpu;
    if (!t || t->out_h < 0 || atomic_load(&t->disabled[t->out_dev]) ||
        coli__mat_base(w) != coli__mat_base(&m->w.lm_head) || w->dt != m->w.lm_head.dt || w->rows != m->w.lm_head.rows)
        return COLI_ENOENT;
    int d = t->out_dev;
    coli__err err;
    coli__err_clear(&err);
    pthread_mutex_lock(&t->dev_mu[d]);
    coli_status st = t->ops->matmul(t->g, t->out_h, x, n, y, &err);
    pthread_mutex_unlock(&t->dev_mu[d]);
    if (st == COLI_OK) {
        note_success(t, d);
        return COLI_OK;
    }
    note_failure(m, t, d, st, err.msg[0] ? err.msg : coli_strerror(st));
    return st;
}

void coli__experts_decoder(coli_model *m, coli__decoder *d)
{
    d->experts = (coli__decoder_experts){.run = decoder_experts, .lookahead = decoder_lookahead, .user = m};
    d->place = (coli__decoder_place){.mm = decoder_place, .user = m};
}

/* ---- for the device decoder (lib/tier/device.c) --------------------------- */

coli__gpu *coli__experts_gpu(const coli_model *m, const coli__gpu_ops **ops)
{
    if (!m->gpu)
        return NULL;
    *ops = m->gpu->ops;
    return m->gpu->g;
}

const int *coli__experts_handles(const coli_model *m, int l, int e, int dev)
{
    const struct coli__tier *t = m->gpu;
    if (!t)
        return NULL;
    size_t i = (size_t)l * t->E + e;
    return t->dev[i] == dev ? &t->h[3 * i] : NULL;
}

/* The host's outputs, pair by pair, into y (coli__experts_host). */
typedef struct host_out {
    const moe_call *c;
    float *y;
} host_out;

static void scatter_rows(void *arg, int64_t begin, int64_t end, int thread)
{
    const host_out *o = arg;
    const moe_call *c = o->c;
    (void)thread;
    for (int64_t r = begin; r < end; r++) {
        const int pair = c->io->rows[r];
        memcpy(o->y + (size_t)pair * c->H, c->io->ye + (size_t)c->io->pos[pair] * c->H, (size_t)c->H * sizeof(float));
    }
}

coli_status coli__experts_host(const coli_model *m, int l, coli__pool *pool, coli__moe_io *io, float *y,
                               coli__experts_counts *counts, coli__err *err)
{
    /* the pairs given are the decoder's device's to skip: of the rest,
     * those resident on another device run there, the others here */
    moe_call c;
    COLI_TRY(run_pairs(&c, m, l, pool, io, NULL, NULL, counts, err));
    host_out o = {&c, y};
    coli__pool_run(pool, c.n, 64, scatter_rows, &o);
    return COLI_OK;
}
