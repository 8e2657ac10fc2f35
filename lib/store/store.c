/* store.c - experts of a converted model: mapped, or streamed from disk
 * into a bounded cache of slots (see store.h for the policy).
 *
 * One mutex guards the slot table; one condition variable is broadcast
 * whenever a slot changes state or loses its last pin, which is all a
 * waiter can wait for. I/O threads take slots to fill from a queue in
 * which demand reads go before reads ahead. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "store/hotset.h"
#include "store/store.h"

enum { S_EMPTY, S_LOADING, S_READY, S_ERROR };
enum { O_NONE, O_AHEAD, O_DEMAND }; /* why a slot was filled */
enum { F_NONE, F_ERRNO, F_SHORT, F_CRC, F_INJECTED };

typedef struct slot {
    int l, e;
    int state, pins;
    uint64_t last;        /* tick of the last use */
    uint64_t step;        /* its layer's step (layer_step) at the last use */
    unsigned char hot, origin, fail;
    int eno;
} slot;

struct coli__store {
    const coli__container *c;
    coli__store_conf conf;
    char dir[4096];
    int L, E, n_moe, streamed;
    atomic_uchar *verified;   /* mapped: records whose checksum was checked */
    /* streamed */
    int n_slots, n_hot;
    size_t slot_bytes;
    uint8_t *arena;
    slot *slots;
    int *where;               /* [L * E] slot of each expert, -1 */
    int *layer_count;         /* [L] slots (not hot) holding layer l */
    uint64_t *layer_step;     /* [L] passes through layer l so far (wants) */
    uint64_t tick;
    uint64_t keep;            /* slots used since this tick are spared by reads ahead */
    unsigned ahead_reads, ahead_used, ahead_skip; /* recent reads ahead, how many were used */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue, qhead, qlen;  /* ring of n_slots */
    pthread_t io[64];
    int n_io, quit;
    int fd_plain, fd_direct;
    atomic_int direct;
    int64_t fail_after;
    atomic_ullong n_reads;
    unsigned char *pred;      /* [L * E] predicted for the layer's next token */
    _Atomic uint64_t *counts; /* [L * E] routing counts, with the sidecar's */
    uint64_t *counts_copy;    /* for coli__store_counts */
    atomic_int routed_any;
    /* statistics */
    atomic_ullong gets, hits, misses, disk_reads, disk_bytes, prefetch_reads, prefetch_used, predicted,
        predicted_right, stall_ns, evictions;
    char detail[192];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t padded(uint32_t bytes)
{
    return ((size_t)bytes + COLI_CONT_ALIGN - 1) / COLI_CONT_ALIGN * COLI_CONT_ALIGN;
}

/* The three matrices of expert e of layer l, whose record's bytes are at
 * base (NULL: in the mapping). */
static void fill(const coli__store *s, int l, int e, const uint8_t *base, coli__mat out[3])
{
    if (!base)
        base = s->c->map + coli__cont_record_of(s->c, l, e)->offset;
    for (int k = 0; k < 3; k++) {
        const coli__cont_mat *cm = &s->c->layouts[3 * l + k];
        out[k] = coli__mat_at((coli__dtype)cm->dtype, cm->group, cm->rows, cm->cols, base + cm->offset);
    }
}

/* Reads record (l, e) into buf: 0, or an F_* failure with *eno. */
static int read_record(coli__store *s, int l, int e, uint8_t *buf, int *eno)
{
    const coli__cont_record *r = coli__cont_record_of(s->c, l, e);
    size_t n = padded(r->bytes);
    if (s->fail_after >= 0 && atomic_fetch_add(&s->n_reads, 1) >= (unsigned long long)s->fail_after) {
        *eno = EIO;
        return F_INJECTED;
    }
    for (;;) {
        int direct = atomic_load(&s->direct);
        int fd = direct ? s->fd_direct : s->fd_plain;
        size_t got = 0;
        int err = 0;
        while (got < n) {
            ssize_t k = pread(fd, buf + got, n - got, (off_t)(r->offset + got));
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0) {
                err = errno;
                break;
            }
            if (k == 0)
                break;
            got += (size_t)k;
        }
        if (err == EINVAL && direct) {
            /* the file system refuses O_DIRECT for this read: page cache,
             * dropped after each read */
            atomic_store(&s->direct, 0);
            continue;
        }
        if (!direct)
            posix_fadvise(s->fd_plain, (off_t)r->offset, (off_t)n, POSIX_FADV_DONTNEED);
        if (err) {
            *eno = err;
            return F_ERRNO;
        }
        if (got < r->bytes) {
            *eno = 0;
            return F_SHORT;
        }
        atomic_fetch_add(&s->disk_reads, 1);
        atomic_fetch_add(&s->disk_bytes, r->bytes);
        if (coli__cont_verify(s->c, l, e, buf, NULL) != COLI_OK)
            return F_CRC;
        return 0;
    }
}

static coli_status read_error(const coli__store *s, int l, int e, int fail, int eno, coli__err *err)
{
    const coli__cont_record *r = coli__cont_record_of(s->c, l, e);
    const char *f = s->c->path;
    switch (fail) {
    case F_CRC:
        return coli__cont_verify(s->c, l, e, NULL, err) == COLI_OK
                   ? coli__fail(err, COLI_EIO,
                                "%s: layer %d expert %d: the record read back does not match its checksum", f, l, e)
                   : COLI_EFORMAT;
    case F_SHORT:
        return coli__fail(err, COLI_EIO, "%s: layer %d expert %d: short read of the record at offset %llu", f, l, e,
                          (unsigned long long)r->offset);
    case F_INJECTED:
        return coli__fail(err, COLI_EIO,
                          "%s: layer %d expert %d: reading the record at offset %llu: %s (COLI_IO_FAIL_AFTER)", f, l,
                          e, (unsigned long long)r->offset, strerror(eno));
    default:
        return coli__fail(err, COLI_EIO, "%s: layer %d expert %d: reading the record at offset %llu: %s", f, l, e,
                          (unsigned long long)r->offset, strerror(eno));
    }
}

static void *io_main(void *arg)
{
    coli__store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && s->qlen == 0)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit)
            break;
        int i = s->queue[s->qhead];
        s->qhead = (s->qhead + 1) % s->n_slots;
        s->qlen--;
        slot *sl = &s->slots[i];
        int l = sl->l, e = sl->e;
        pthread_mutex_unlock(&s->mu);
        int eno = 0;
        int fail = read_record(s, l, e, s->arena + (size_t)i * s->slot_bytes, &eno);
        pthread_mutex_lock(&s->mu);
        sl->state = fail ? S_ERROR : S_READY;
        sl->fail = (unsigned char)fail;
        sl->eno = eno;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the slot table (under mu) ------------------------------------------ */

static void enqueue(coli__store *s, int i, int front)
{
    if (front) {
        s->qhead = (s->qhead + s->n_slots - 1) % s->n_slots;
        s->queue[s->qhead] = i;
    } else {
        s->queue[(s->qhead + s->qlen) % s->n_slots] = i;
    }
    s->qlen++;
    pthread_cond_broadcast(&s->cv);
}

static void vacate(coli__store *s, int i)
{
    slot *sl = &s->slots[i];
    if (sl->l >= 0) {
        s->where[(size_t)sl->l * s->E + sl->e] = -1;
        if (!sl->hot)
            s->layer_count[sl->l]--;
        if (sl->state == S_READY)
            atomic_fetch_add(&s->evictions, 1);
    }
    sl->l = sl->e = -1;
    sl->state = S_EMPTY;
    sl->hot = 0;
    sl->origin = O_NONE;
}

/* The slot a miss of layer l may take, or -1 (every slot pinned or being
 * read). Reads started ahead of need (want, prefetch) also spare slots
 * used since tick keep (the experts a layer is about to get), so that
 * they never evict what the caller is about to read; a get that must
 * read spares only pinned slots. A guess (ahead) never evicts an expert
 * its layer used on its last pass: a wrong guess must not cost a hit. */
static int pick(coli__store *s, int l, uint64_t keep, int ahead)
{
    int share = (s->n_slots - s->n_hot) / (s->n_moe > 0 ? s->n_moe : 1);
    if (share < 1)
        share = 1;
    int own = -1, over = -1, any = -1;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == S_EMPTY || (sl->state == S_ERROR && sl->pins == 0))
            return i;
        if (sl->state != S_READY || sl->pins > 0 || sl->hot || sl->last >= keep)
            continue;
        if (ahead && sl->origin != O_AHEAD && sl->step + 1 >= s->layer_step[sl->l])
            continue;
        if (sl->l == l && (own < 0 || sl->last < s->slots[own].last))
            own = i;
        if (s->layer_count[sl->l] > share && (over < 0 || sl->last < s->slots[over].last))
            over = i;
        if (any < 0 || sl->last < s->slots[any].last)
            any = i;
    }
    if (own >= 0 && s->layer_count[l] >= share)
        return own;
    return over >= 0 ? over : own >= 0 ? own : any;
}

static void assign(coli__store *s, int i, int l, int e, int origin, int hot)
{
    vacate(s, i);
    slot *sl = &s->slots[i];
    sl->l = l;
    sl->e = e;
    sl->state = S_LOADING;
    sl->pins = 0;
    sl->hot = (unsigned char)hot;
    sl->origin = (unsigned char)origin;
    /* a read ahead enters at the cold end: if the guess was wrong, it is
     * the first to go, not an expert that was really used */
    sl->last = origin == O_AHEAD ? 0 : ++s->tick;
    s->where[(size_t)l * s->E + e] = i;
    if (!hot)
        s->layer_count[l]++;
    enqueue(s, i, origin == O_DEMAND);
}

/* ---- open and close ------------------------------------------------------ */

static coli_status env_fail_after(int64_t *out, coli__err *err)
{
    coli__env_val v;
    int set;
    *out = -1;
    COLI_TRY(coli__env_get(COLI__ENV_IO_FAIL_AFTER, &v, &set, err));
    if (set)
        *out = v.i;
    return COLI_OK;
}

static coli_status open_streamed(coli__store *s, uint64_t n_slots, coli__err *err)
{
    const coli__container *c = s->c;
    s->streamed = 1;
    s->n_slots = (int)n_slots;
    s->slot_bytes = (size_t)c->record_max;
    size_t n = (size_t)s->L * (size_t)s->E;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->where = malloc(n * sizeof *s->where);
    s->layer_count = calloc((size_t)s->L, sizeof *s->layer_count);
    s->layer_step = calloc((size_t)s->L, sizeof *s->layer_step);
    s->queue = malloc((size_t)s->n_slots * sizeof *s->queue);
    s->pred = calloc(n, 1);
    size_t arena = (size_t)s->n_slots * s->slot_bytes;
    if (!s->slots || !s->where || !s->layer_count || !s->layer_step || !s->queue || !s->pred ||
        posix_memalign((void **)&s->arena, 4096, arena) != 0) {
        s->arena = NULL;
        return coli__fail(err, COLI_ENOMEM, "out of memory for %d expert slots (%zu MiB)", s->n_slots, arena >> 20);
    }
#ifdef MADV_HUGEPAGE
    madvise(s->arena, arena, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < n; i++)
        s->where[i] = -1;
    s->keep = UINT64_MAX;
    for (int i = 0; i < s->n_slots; i++)
        s->slots[i] = (slot){.l = -1, .e = -1, .state = S_EMPTY, .origin = O_NONE, .fail = F_NONE};
    s->fd_plain = open(c->path, O_RDONLY | O_CLOEXEC);
    if (s->fd_plain < 0)
        return coli__fail(err, COLI_EIO, "%s: %s", c->path, strerror(errno));
#ifdef O_DIRECT
    s->fd_direct = open(c->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
#endif
    atomic_store(&s->direct, s->fd_direct >= 0);
    int want = s->conf.io_threads > 0 ? s->conf.io_threads : 4;
    if (want > 64)
        want = 64;
    for (; s->n_io < want; s->n_io++)
        if (pthread_create(&s->io[s->n_io], NULL, io_main, s) != 0)
            break;
    if (s->n_io == 0)
        return coli__fail(err, COLI_ENOMEM, "cannot start an I/O thread for the expert store");
    return COLI_OK;
}

coli_status coli__store_open(const coli__container *c, const coli__store_conf *conf,
                             coli__store **out, coli__err *err)
{
    *out = NULL;
    coli__store *s = calloc(1, sizeof *s);
    if (!s)
        return coli__fail(err, COLI_ENOMEM, "out of memory for the expert store");
    s->c = c;
    s->conf = *conf;
    snprintf(s->dir, sizeof s->dir, "%s", conf->dir);
    s->conf.dir = s->dir;
    s->L = c->n_layers;
    s->E = c->n_experts;
    s->n_moe = c->n_moe;
    s->fd_plain = s->fd_direct = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    size_t n = (size_t)s->L * (size_t)s->E;
    s->counts = calloc(n ? n : 1, sizeof *s->counts);
    s->counts_copy = calloc(n ? n : 1, sizeof *s->counts_copy);
    s->verified = calloc(n ? n : 1, sizeof *s->verified);
    coli_status st = env_fail_after(&s->fail_after, err);
    if (st == COLI_OK && (!s->counts || !s->counts_copy || !s->verified))
        st = coli__fail(err, COLI_ENOMEM, "out of memory for the expert store");
    if (st == COLI_OK && conf->hotset && n) {
        if (coli__hot_load(conf->dir, s->L, s->E, s->counts_copy, &conf->log) == 0)
            for (size_t i = 0; i < n; i++)
                atomic_store(&s->counts[i], s->counts_copy[i]);
    }
    uint64_t total = (uint64_t)s->n_moe * (uint64_t)s->E, slots = 0;
    if (st == COLI_OK && total && (conf->slots > 0 || conf->budget > 0)) {
        uint64_t rec = c->record_max, dense = c->dense_bytes, fixed = dense + conf->kv_bytes;
        if (conf->slots > 0) {
            slots = (uint64_t)conf->slots;
        } else if (conf->budget > fixed) {
            slots = (conf->budget - fixed) / rec; /* the KV cache grows into its share as positions fill */
        }
        if (slots < (uint64_t)conf->top_k) {
            if (conf->slots > 0)
                st = coli__fail(err, COLI_ERANGE,
                                "COLI_OPT_EXPERT_SLOTS: %llu slots cannot hold the %d experts one token routes to "
                                "in a layer",
                                (unsigned long long)slots, conf->top_k);
            else
                st = coli__fail(err, COLI_ERANGE,
                                "COLI_OPT_MEM_BUDGET_MB: %llu MiB cannot hold the dense weights (%.1f MiB), the KV "
                                "cache of %lld positions (%.1f MiB) and the %d experts one token routes to in a "
                                "layer (%.2f MiB each); at least %llu MiB is needed (or a smaller context)",
                                (unsigned long long)(conf->budget >> 20), (double)dense / 1048576.0,
                                (long long)conf->kv_positions, (double)conf->kv_bytes / 1048576.0, conf->top_k,
                                (double)rec / 1048576.0,
                                (unsigned long long)((fixed + (uint64_t)conf->top_k * rec + 1048575) >> 20));
        }
        if (st == COLI_OK) {
            if (slots > total)
                slots = total;
            st = open_streamed(s, slots, err);
        }
    }
    if (st != COLI_OK) {
        coli__store_close(s);
        return st;
    }
    /* a slot's size in a unit that shows it: small models have records of a few KiB */
    int in_mib = s->slot_bytes >= ((size_t)1 << 20);
    double each = (double)s->slot_bytes / (in_mib ? 1048576.0 : 1024.0);
    const char *unit = in_mib ? "MiB" : "KiB";
    if (s->streamed)
        snprintf(s->detail, sizeof s->detail,
                 "streamed: %d of %llu experts in RAM (%.1f %s each), %d I/O threads, %s, prefetch %s",
                 s->n_slots, (unsigned long long)total, each, unit, s->n_io,
                 atomic_load(&s->direct) ? "O_DIRECT" : "page cache dropped", conf->prefetch ? "on" : "off");
    else
        snprintf(s->detail, sizeof s->detail, "mapped: every expert of model.coli");
    *out = s;
    return COLI_OK;
}

/* qsort has no user pointer in C11: the counts ride in the keys */
typedef struct hk {
    uint64_t count;
    int idx;
} hk;

static int hk_cmp(const void *pa, const void *pb)
{
    const hk *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

coli_status coli__store_warm(coli__store *s, const signed char *skip, size_t n_skip, coli__err *err)
{
    if (!s->streamed || !s->conf.hotset)
        return COLI_OK;
    size_t n = (size_t)s->L * (size_t)s->E;
    hk *keys = malloc(n * sizeof *keys);
    if (!keys)
        return coli__fail(err, COLI_ENOMEM, "out of memory for the hot set");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = atomic_load(&s->counts[i]);
        if (c && !(skip && i < n_skip && skip[i] >= 0))
            keys[k++] = (hk){c, (int)i};
    }
    qsort(keys, k, sizeof *keys, hk_cmp);
    /* half the slots at most, and room left for one token's experts */
    size_t cap = (size_t)s->n_slots / 2;
    if ((size_t)s->n_slots - cap < (size_t)s->conf.top_k)
        cap = (size_t)s->n_slots > (size_t)s->conf.top_k ? (size_t)s->n_slots - (size_t)s->conf.top_k : 0;
    if (k > cap)
        k = cap;
    coli_status st = COLI_OK;
    pthread_mutex_lock(&s->mu);
    for (size_t j = 0; j < k; j++) {
        int i = keys[j].idx;
        int v = pick(s, i / s->E, UINT64_MAX, 0);
        if (v < 0)
            break;
        assign(s, v, i / s->E, i % s->E, O_NONE, 1);
        s->n_hot++;
    }
    for (int i = 0; i < s->n_slots && st == COLI_OK; i++) {
        slot *sl = &s->slots[i];
        if (!sl->hot)
            continue;
        while (sl->state == S_LOADING)
            pthread_cond_wait(&s->cv, &s->mu);
        if (sl->state == S_ERROR)
            st = read_error(s, sl->l, sl->e, sl->fail, sl->eno, err);
    }
    pthread_mutex_unlock(&s->mu);
    free(keys);
    if (st == COLI_OK && s->n_hot) {
        size_t len = strlen(s->detail);
        snprintf(s->detail + len, sizeof s->detail - len, ", hot set %d", s->n_hot);
    }
    return st;
}

void coli__store_close(coli__store *s)
{
    if (!s)
        return;
    if (s->n_io) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < s->n_io; i++)
            pthread_join(s->io[i], NULL);
    }
    size_t n = (size_t)s->L * (size_t)s->E;
    if (s->conf.hotset && s->counts && s->counts_copy && n && atomic_load(&s->routed_any)) {
        for (size_t i = 0; i < n; i++)
            s->counts_copy[i] = atomic_load(&s->counts[i]);
        coli__hot_save(s->dir, s->L, s->E, s->counts_copy, &s->conf.log);
    }
    if (s->fd_plain >= 0)
        close(s->fd_plain);
    if (s->fd_direct >= 0)
        close(s->fd_direct);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->arena);
    free(s->slots);
    free(s->where);
    free(s->layer_count);
    free(s->layer_step);
    free(s->queue);
    free(s->pred);
    free((void *)s->counts);
    free(s->counts_copy);
    free((void *)s->verified);
    free(s);
}

/* ---- use ----------------------------------------------------------------- */

/* A mapped record's checksum, checked on its first use. */
static coli_status verify_mapped(coli__store *s, int l, int e, coli__err *err)
{
    size_t idx = (size_t)l * s->E + e;
    if (atomic_load(&s->verified[idx]))
        return COLI_OK;
    COLI_TRY(coli__cont_verify(s->c, l, e, NULL, err));
    atomic_store(&s->verified[idx], 1);
    return COLI_OK;
}

coli_status coli__store_get(coli__store *s, int l, int e, int wait, coli__mat out[3], int *ref, coli__err *err)
{
    size_t idx = (size_t)l * s->E + e;
    *ref = -1;
    if (!s->streamed) {
        COLI_TRY(verify_mapped(s, l, e, err));
        atomic_fetch_add(&s->gets, 1);
        atomic_fetch_add(&s->hits, 1);
        fill(s, l, e, NULL, out);
        return COLI_OK;
    }
    int counted = 0, issued = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int i = s->where[idx];
        if (i >= 0) {
            slot *sl = &s->slots[i];
            if (!counted) {
                atomic_fetch_add(sl->origin == O_DEMAND ? &s->misses : &s->hits, 1);
                counted = 1;
            }
            if (sl->origin == O_AHEAD) {
                atomic_fetch_add(&s->prefetch_used, 1);
                s->ahead_used++;
            }
            sl->origin = O_NONE;
            if (sl->state == S_READY) {
                sl->pins++;
                sl->last = ++s->tick;
                sl->step = s->layer_step[l];
                pthread_mutex_unlock(&s->mu);
                atomic_fetch_add(&s->gets, 1);
                fill(s, l, e, s->arena + (size_t)i * s->slot_bytes, out);
                *ref = i;
                return COLI_OK;
            }
            if (sl->state == S_LOADING) {
                sl->pins++;
                uint64_t t0 = now_ns();
                while (sl->state == S_LOADING)
                    pthread_cond_wait(&s->cv, &s->mu);
                atomic_fetch_add(&s->stall_ns, now_ns() - t0);
                sl->pins--;
                issued = 1; /* its outcome is this get's */
                continue;
            }
            /* S_ERROR: a read this get waited for fails the get; one that
             * failed earlier (a read ahead) is tried again */
            if (issued) {
                int fail = sl->fail, eno = sl->eno;
                if (sl->pins == 0)
                    vacate(s, i);
                pthread_cond_broadcast(&s->cv);
                pthread_mutex_unlock(&s->mu);
                return read_error(s, l, e, fail, eno, err);
            }
            sl->state = S_LOADING;
            sl->origin = O_NONE;
            enqueue(s, i, 1);
            issued = 1;
            continue;
        }
        int v = pick(s, l, UINT64_MAX, 0);
        if (v < 0) {
            if (!wait) {
                pthread_mutex_unlock(&s->mu);
                return COLI_ENOSPC;
            }
            uint64_t t0 = now_ns();
            pthread_cond_wait(&s->cv, &s->mu);
            atomic_fetch_add(&s->stall_ns, now_ns() - t0);
            continue;
        }
        assign(s, v, l, e, O_DEMAND, 0);
        if (!counted) {
            atomic_fetch_add(&s->misses, 1);
            counted = 1;
        }
        s->slots[v].origin = O_NONE;
        issued = 1;
    }
}

void coli__store_put(coli__store *s, int ref)
{
    if (!s || ref < 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (--s->slots[ref].pins == 0)
        pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void start(coli__store *s, int l, const int *experts, int n, int origin)
{
    if (origin == O_DEMAND) {
        /* the experts held already become the most recent: spared below,
         * and by the reads ahead that follow until the next want */
        s->keep = s->tick + 1;
        s->layer_step[l]++;
        for (int j = 0; j < n; j++) {
            int e = experts[j];
            int i = e >= 0 && e < s->E ? s->where[(size_t)l * s->E + e] : -1;
            if (i >= 0) {
                s->slots[i].last = ++s->tick;
                s->slots[i].step = s->layer_step[l];
            }
        }
    }
    for (int j = 0; j < n; j++) {
        int e = experts[j];
        if (e < 0 || e >= s->E || s->where[(size_t)l * s->E + e] >= 0)
            continue;
        int v = pick(s, l, s->keep, origin == O_AHEAD);
        if (v < 0)
            break;
        assign(s, v, l, e, origin, 0);
        if (origin == O_AHEAD) {
            atomic_fetch_add(&s->prefetch_reads, 1);
            if (++s->ahead_reads >= 64) { /* a window that forgets */
                s->ahead_reads /= 2;
                s->ahead_used /= 2;
            }
        }
    }
}

void coli__store_prefetch(coli__store *s, int l, const int *experts, int n)
{
    if (!s || !s->streamed || !s->conf.prefetch)
        return;
    pthread_mutex_lock(&s->mu);
    memset(s->pred + (size_t)l * s->E, 0, (size_t)s->E);
    for (int j = 0; j < n; j++)
        if (experts[j] >= 0 && experts[j] < s->E)
            s->pred[(size_t)l * s->E + experts[j]] = 1;
    /* A guess pays only when the expert was not held and is used: while
     * fewer than half of the recent reads ahead were used, only one guess
     * in 8 is read (enough to notice when they start paying again), so a
     * model whose cache already holds what the router predicts does not
     * spend the disk on its wrong guesses. */
    int paying = s->ahead_reads < 16 || 2 * s->ahead_used >= s->ahead_reads;
    if (paying || ++s->ahead_skip % 8 == 0)
        start(s, l, experts, n, O_AHEAD);
    pthread_mutex_unlock(&s->mu);
}

void coli__store_want(coli__store *s, int l, const int *experts, int n)
{
    if (!s || !s->streamed)
        return;
    pthread_mutex_lock(&s->mu);
    start(s, l, experts, n, O_DEMAND);
    pthread_mutex_unlock(&s->mu);
}

void coli__store_routed(coli__store *s, int l, const int *experts, int n, int score)
{
    if (!s)
        return;
    for (int j = 0; j < n; j++)
        if (experts[j] >= 0) /* -1: a pair served elsewhere (the device decoder) */
            atomic_fetch_add(&s->counts[(size_t)l * s->E + experts[j]], 1);
    atomic_store(&s->routed_any, 1);
    if (!score || !s->streamed || !s->conf.prefetch)
        return;
    pthread_mutex_lock(&s->mu);
    int right = 0;
    for (int j = 0; j < n; j++)
        right += experts[j] >= 0 && s->pred[(size_t)l * s->E + experts[j]];
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add(&s->predicted, (unsigned long long)n);
    atomic_fetch_add(&s->predicted_right, (unsigned long long)right);
}

coli_status coli__store_read_into(coli__store *s, int l, int e, void *buf, coli__mat out[3], coli__err *err)
{
    if (!s->streamed) {
        COLI_TRY(verify_mapped(s, l, e, err));
        fill(s, l, e, NULL, out);
        return COLI_OK;
    }
    int eno = 0, fail = read_record(s, l, e, buf, &eno);
    if (fail)
        return read_error(s, l, e, fail, eno, err);
    fill(s, l, e, buf, out);
    return COLI_OK;
}

uint64_t coli__store_record_bytes(const coli__store *s)
{
    return s->c->record_max;
}

int coli__store_streams(const coli__store *s)
{
    return s && s->streamed;
}

const uint64_t *coli__store_counts(coli__store *s)
{
    size_t n = (size_t)s->L * (size_t)s->E;
    for (size_t i = 0; i < n; i++)
        s->counts_copy[i] = atomic_load(&s->counts[i]);
    return s->counts_copy;
}

void coli__store_stats(const coli__store *s, coli_store_stats *o)
{
    o->mode = s->streamed ? COLI_STORE_STREAMED : COLI_STORE_MAPPED;
    o->direct_io = s->streamed && atomic_load(&s->direct);
    o->experts = (uint64_t)s->n_moe * (uint64_t)s->E;
    o->slots = s->streamed ? (uint64_t)s->n_slots : o->experts;
    o->slot_bytes = s->c->record_max;
    o->hot_pinned = (uint64_t)s->n_hot;
    o->dense_bytes = s->c->dense_bytes;
    o->gets = atomic_load(&s->gets);
    o->hits = atomic_load(&s->hits);
    o->misses = atomic_load(&s->misses);
    o->disk_reads = atomic_load(&s->disk_reads);
    o->disk_bytes = atomic_load(&s->disk_bytes);
    o->prefetch_reads = atomic_load(&s->prefetch_reads);
    o->prefetch_used = atomic_load(&s->prefetch_used);
    o->predicted = atomic_load(&s->predicted);
    o->predicted_right = atomic_load(&s->predicted_right);
    o->prefetch_accuracy = o->predicted ? (double)o->predicted_right / (double)o->predicted : 0.0;
    o->stall_ns = atomic_load(&s->stall_ns);
    o->evictions = atomic_load(&s->evictions);
}

const char *coli__store_detail(const coli__store *s)
{
    return s->detail;
}
