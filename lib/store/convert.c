/* convert.c - the container writer: a checkpoint into a streaming
 * container (docs/container.md), for coli_convert.
 *
 * The loader's own walk (the source's plan) lists the tensors, so the
 * container holds what loading would make, in its order. The layout is
 * fixed before anything is converted; then worker threads take one job
 * at a time (a dense tensor, or one expert's record of three matrices),
 * make its bytes exactly as the loader would (the source's make), and
 * write them at their place with pwrite. Memory stays at one job per
 * thread. The head goes last, and the file is renamed into place only
 * once synced. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/container.h"
#include "store/convert.h"
#include "io/crc32c.h"
#include "cpu/kernels.h"

typedef struct item {
    coli__witem it;
    char *name, *src;
    uint64_t offset, bytes;   /* dense: in the file; expert: in the record */
    uint32_t crc;
} item;

typedef struct job {
    int dense;                /* index in items, or -1 */
    int layer, expert;        /* a record */
} job;

typedef struct conv {
    const coli__conv_job *cj;  /* what to convert, and the loader's side */
    const coli__config *cfg;
    coli_weight_format fmt;
    int group;
    item *items;
    size_t n_items, cap_items;
    int *ex[3];               /* [n_layers] index in items of layer l expert 0's gate/up/down, -1 */
    coli__cont_record *recs;  /* [n_moe * E] */
    int *moe_index;
    uint64_t head, dense_off, dense_bytes, rec0, file_size, rec_max;
    job *jobs;
    size_t n_jobs;
    atomic_size_t next;
    atomic_int stop;
    int fd;
    const char *tmp;
    pthread_mutex_t mu;       /* first error, progress */
    coli_status st;
    coli__err err;
    uint64_t done, total;
    const coli_convert_params *p;
} conv;

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static uint64_t target_bytes(const coli__witem *it, int group)
{
    coli__mat m = coli__mat_at(it->target, it->target == COLI_DT_Q4 ? group : COLI_QK, it->rows, it->cols, NULL);
    return coli__mat_bytes(&m);
}

static coli_status on_item(void *user, const coli__witem *it, coli__err *err)
{
    conv *c = user;
    if (strlen(it->name) >= COLI_CONT_NAME)
        return coli__fail(err, COLI_EUNSUPPORTED, "tensor '%s': names of %d bytes or more do not fit the container",
                          it->name, COLI_CONT_NAME);
    if (it->expert > 0) {
        /* every expert of a layer must share expert 0's layout */
        const item *z = &c->items[c->ex[it->which][it->layer]];
        if (z->it.target != it->target || z->it.stored != it->stored)
            return coli__fail(err, COLI_EUNSUPPORTED,
                              "tensor '%s': stored as dtype %d where expert 0 of the layer has %d; the container "
                              "needs the experts of a layer alike", it->name, (int)it->stored, (int)z->it.stored);
        return COLI_OK;
    }
    if (c->n_items == c->cap_items) {
        size_t cap = c->cap_items ? 2 * c->cap_items : 256;
        item *p = realloc(c->items, cap * sizeof *p);
        if (!p)
            return coli__fail(err, COLI_ENOMEM, "out of memory planning the conversion");
        c->items = p;
        c->cap_items = cap;
    }
    item *x = &c->items[c->n_items];
    memset(x, 0, sizeof *x);
    x->it = *it;
    x->name = strdup(it->name);
    x->src = strdup(it->src);
    if (!x->name || !x->src) {
        free(x->name);
        free(x->src);
        return coli__fail(err, COLI_ENOMEM, "out of memory planning the conversion");
    }
    x->it.name = x->name;
    x->it.src = x->src;
    x->bytes = target_bytes(it, c->group);
    if (it->expert == 0)
        c->ex[it->which][it->layer] = (int)c->n_items;
    c->n_items++;
    return COLI_OK;
}

static coli_status layout(conv *c, coli__err *err)
{
    const int L = c->cfg->n_layers, E = c->cfg->n_moe_layers ? c->cfg->n_experts : 0;
    size_t n_dense = 0;
    for (size_t i = 0; i < c->n_items; i++)
        n_dense += c->items[i].it.expert < 0;
    size_t n_rec = (size_t)c->cfg->n_moe_layers * (size_t)E;
    c->head = COLI_CONT_HEADER + n_dense * COLI_CONT_DIRENT + (uint64_t)L * COLI_CONT_LAYOUT +
              n_rec * COLI_CONT_RECENT;
    c->dense_off = round_up(c->head, COLI_CONT_ALIGN);
    uint64_t at = c->dense_off;
    for (size_t i = 0; i < c->n_items; i++) {
        item *x = &c->items[i];
        if (x->it.expert >= 0)
            continue;
        at = round_up(at, 64);
        x->offset = at;
        at += x->bytes;
    }
    c->dense_bytes = at - c->dense_off;
    c->rec0 = round_up(at, COLI_CONT_ALIGN);
    c->recs = calloc(n_rec ? n_rec : 1, sizeof *c->recs);
    c->moe_index = malloc((size_t)L * sizeof *c->moe_index);
    c->jobs = malloc((n_dense + n_rec + 1) * sizeof *c->jobs);
    if (!c->recs || !c->moe_index || !c->jobs)
        return coli__fail(err, COLI_ENOMEM, "out of memory planning the conversion");
    at = c->rec0;
    for (int l = 0, m = 0; l < L; l++) {
        c->moe_index[l] = -1;
        if (!c->cfg->is_moe[l])
            continue;
        c->moe_index[l] = m;
        uint64_t end = 0;
        for (int k = 0; k < 3; k++) {
            item *x = &c->items[c->ex[k][l]];
            x->offset = round_up(end, 64);
            end = x->offset + x->bytes;
        }
        if (end > UINT32_MAX)
            return coli__fail(err, COLI_EUNSUPPORTED,
                              "layer %d: an expert of %llu bytes exceeds the record limit of 4 GiB", l,
                              (unsigned long long)end);
        uint64_t padded = round_up(end, COLI_CONT_ALIGN);
        if (padded > c->rec_max)
            c->rec_max = padded;
        for (int e = 0; e < E; e++) {
            coli__cont_record *r = &c->recs[(size_t)m * E + e];
            r->offset = at;
            r->bytes = (uint32_t)end;
            at += padded;
        }
        m++;
    }
    c->file_size = at;
    for (size_t i = 0; i < c->n_items; i++)
        if (c->items[i].it.expert < 0) {
            c->jobs[c->n_jobs++] = (job){(int)i, -1, -1};
            c->total += c->items[i].bytes;
        }
    for (int l = 0; l < L; l++)
        for (int e = 0; c->moe_index[l] >= 0 && e < E; e++) {
            c->jobs[c->n_jobs++] = (job){-1, l, e};
            c->total += c->recs[(size_t)c->moe_index[l] * E + e].bytes;
        }
    return COLI_OK;
}

static coli_status write_at(conv *c, const void *p, size_t n, uint64_t off, coli__err *err)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = pwrite(c->fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return coli__fail(err, COLI_EIO, "%s: writing %zu bytes at offset %llu: %s", c->tmp, n,
                              (unsigned long long)off, w < 0 ? strerror(errno) : "nothing written");
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return COLI_OK;
}

/* Gives back the pages of source tensor name once converted, so that the
 * mapped checkpoint does not pile up in the process's resident set (the
 * page cache keeps them for whoever reads them next). */
static void drop_source(const conv *c, const char *name)
{
    const coli__tensor *t = coli__st_find(c->cj->ts, name);
    if (!t || !t->nbytes)
        return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)t->data, b = a + t->nbytes;
    a = (a + pg - 1) / pg * pg;
    b = b / pg * pg;
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

static coli_status make(conv *c, const coli__witem *it, uint64_t bytes, void *dst, coli__err *err)
{
    const coli__conv_source *src = &c->cj->src;
    coli_status st = src->make(src->user, it, dst, bytes, err);
    drop_source(c, it->src);
    return st;
}

static void progress(conv *c, uint64_t n)
{
    pthread_mutex_lock(&c->mu);
    c->done += n;
    if (c->p->progress && !atomic_load(&c->stop) && c->p->progress(c->p->user, c->done, c->total)) {
        atomic_store(&c->stop, 1);
        if (c->st == COLI_OK) {
            c->st = COLI_ECANCELED;
            coli__fail(&c->err, COLI_ECANCELED, "conversion stopped by the caller");
        }
    }
    pthread_mutex_unlock(&c->mu);
}

static void *worker(void *arg)
{
    conv *c = arg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    coli__err err;
    coli__err_clear(&err);
    coli_status st = COLI_OK;
    while (st == COLI_OK && !atomic_load(&c->stop)) {
        size_t j = atomic_fetch_add(&c->next, 1);
        if (j >= c->n_jobs)
            break;
        const job *jb = &c->jobs[j];
        size_t need;
        if (jb->dense >= 0)
            need = c->items[jb->dense].bytes;
        else
            need = c->rec_max;
        if (need > cap) {
            free(buf);
            cap = 0;
            if (posix_memalign((void **)&buf, 4096, need ? need : 1) != 0) {
                buf = NULL;
                st = coli__fail(&err, COLI_ENOMEM, "out of memory for a buffer of %zu bytes", need);
                break;
            }
            cap = need;
        }
        if (jb->dense >= 0) {
            item *x = &c->items[jb->dense];
            st = make(c, &x->it, x->bytes, buf, &err);
            if (st == COLI_OK) {
                x->crc = coli__crc32c(0, buf, x->bytes);
                st = write_at(c, buf, x->bytes, x->offset, &err);
            }
            if (st == COLI_OK)
                progress(c, x->bytes);
            continue;
        }
        coli__cont_record *r = &c->recs[(size_t)c->moe_index[jb->layer] * (size_t)c->cfg->n_experts + jb->expert];
        size_t padded = round_up(r->bytes, COLI_CONT_ALIGN);
        memset(buf, 0, padded);
        for (int k = 0; k < 3 && st == COLI_OK; k++) {
            const item *z = &c->items[c->ex[k][jb->layer]];
            coli__witem it = z->it;
            char name[256];
            it.name = it.src = coli__tensor_name(c->cfg->family, (coli__tname)(COLI_T_E_GATE + k), jb->layer,
                                                 jb->expert, name, sizeof name);
            it.expert = jb->expert;
            st = make(c, &it, z->bytes, buf + z->offset, &err);
        }
        if (st == COLI_OK) {
            r->crc = coli__crc32c(0, buf, r->bytes);
            st = write_at(c, buf, padded, r->offset, &err);
        }
        if (st == COLI_OK)
            progress(c, r->bytes);
    }
    free(buf);
    if (st != COLI_OK) {
        pthread_mutex_lock(&c->mu);
        if (c->st == COLI_OK) {
            c->st = st;
            c->err = err;
        }
        atomic_store(&c->stop, 1);
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

static coli_status write_head(conv *c, uint32_t config_crc, coli__err *err)
{
    uint8_t *h = calloc(1, c->head);
    if (!h)
        return coli__fail(err, COLI_ENOMEM, "out of memory for the container's head");
    const int L = c->cfg->n_layers, E = c->cfg->n_moe_layers ? c->cfg->n_experts : 0;
    size_t n_dense = 0;
    for (size_t i = 0; i < c->n_items; i++)
        n_dense += c->items[i].it.expert < 0;
    uint64_t dir = COLI_CONT_HEADER, lay = dir + n_dense * COLI_CONT_DIRENT, tab = lay + (uint64_t)L * COLI_CONT_LAYOUT;
    memcpy(h, COLI_CONT_MAGIC, 8);
    coli__put32(h + 8, COLI_CONT_VERSION);
    coli__put32(h + 12, (uint32_t)c->head);
    coli__put32(h + 16, (uint32_t)c->fmt);
    coli__put32(h + 20, (uint32_t)c->group);
    coli__put32(h + 24, (uint32_t)L);
    coli__put32(h + 28, (uint32_t)E);
    coli__put32(h + 32, (uint32_t)c->cfg->n_moe_layers);
    coli__put32(h + 36, (uint32_t)n_dense);
    coli__put64(h + 40, c->file_size);
    coli__put64(h + 48, dir);
    coli__put64(h + 56, lay);
    coli__put64(h + 64, tab);
    coli__put64(h + 72, c->dense_off);
    coli__put64(h + 80, c->dense_bytes);
    coli__put64(h + 88, c->rec0);
    coli__put32(h + 96, config_crc);
    size_t k = 0;
    for (size_t i = 0; i < c->n_items; i++) {
        const item *x = &c->items[i];
        if (x->it.expert >= 0)
            continue;
        uint8_t *d = h + dir + k++ * COLI_CONT_DIRENT;
        memcpy(d, x->name, strlen(x->name));
        d[72] = (uint8_t)x->it.target;
        d[73] = (uint8_t)x->it.stored;
        int g = x->it.target == COLI_DT_Q4 ? c->group : (x->it.target >= COLI_DT_Q8 ? COLI_QK : 0);
        d[74] = (uint8_t)g;
        d[75] = (uint8_t)(g >> 8);
        d[76] = (uint8_t)x->it.is_vec;
        d[77] = (uint8_t)x->it.kind;
        d[78] = (uint8_t)x->it.role;
        coli__put32(d + 80, (uint32_t)x->it.rows);
        coli__put32(d + 84, (uint32_t)x->it.cols);
        coli__put64(d + 88, x->offset);
        coli__put64(d + 96, x->bytes);
        coli__put32(d + 104, x->crc);
    }
    for (int l = 0; l < L; l++) {
        if (c->moe_index[l] < 0)
            continue;
        for (int w = 0; w < 3; w++) {
            const item *x = &c->items[c->ex[w][l]];
            uint8_t *e = h + lay + (size_t)l * COLI_CONT_LAYOUT + 32 * (size_t)w;
            int g = x->it.target == COLI_DT_Q4 ? c->group : (x->it.target >= COLI_DT_Q8 ? COLI_QK : 0);
            e[0] = (uint8_t)x->it.target;
            e[1] = (uint8_t)x->it.stored;
            e[2] = (uint8_t)g;
            e[3] = (uint8_t)(g >> 8);
            coli__put32(e + 4, (uint32_t)x->it.rows);
            coli__put32(e + 8, (uint32_t)x->it.cols);
            coli__put32(e + 12, (uint32_t)x->offset);
            coli__put64(e + 16, x->bytes);
        }
    }
    for (size_t r = 0; r < (size_t)c->cfg->n_moe_layers * (size_t)E; r++) {
        uint8_t *d = h + tab + r * COLI_CONT_RECENT;
        coli__put64(d, c->recs[r].offset);
        coli__put32(d + 8, c->recs[r].bytes);
        coli__put32(d + 12, c->recs[r].crc);
    }
    coli__put32(h + 124, coli__crc32c(0, h, c->head));
    coli_status st = write_at(c, h, c->head, 0, err);
    free(h);
    return st;
}

/* Copies src_dir/name to out_dir/name through a temporary name; a missing
 * optional file is skipped. */
static coli_status copy_file(const char *src_dir, const char *out_dir, const char *name, int required, coli__err *err)
{
    char *from = coli__path_join(src_dir, name), *to = coli__path_join(out_dir, name);
    char tmp[4200];
    coli_status st = COLI_OK;
    int in = -1, out = -1;
    if (!from || !to) {
        st = coli__fail(err, COLI_ENOMEM, "out of memory");
        goto done;
    }
    in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        if (errno == ENOENT && !required)
            goto done;
        st = coli__fail(err, errno == ENOENT ? COLI_ENOENT : COLI_EIO, "%s: %s", from, strerror(errno));
        goto done;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", to, (long)getpid());
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        st = coli__fail(err, COLI_EIO, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = coli__fail(err, COLI_EIO, "%s: %s", from, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (write(out, buf, (size_t)n) != n) {
            st = coli__fail(err, COLI_EIO, "%s: %s", tmp, strerror(errno));
            break;
        }
    }
    if (st == COLI_OK && fsync(out) != 0)
        st = coli__fail(err, COLI_EIO, "%s: %s", tmp, strerror(errno));
    close(out);
    out = -1;
    if (st == COLI_OK && rename(tmp, to) != 0)
        st = coli__fail(err, COLI_EIO, "%s: %s", to, strerror(errno));
    if (st != COLI_OK)
        unlink(tmp);
done:
    if (in >= 0)
        close(in);
    free(from);
    free(to);
    return st;
}

static coli_status run(conv *c, coli__err *err)
{
    const coli__conv_job *cj = c->cj;
    const char *src = cj->src_dir, *out = cj->out_dir;
    const coli_convert_params *p = c->p;
    for (int k = 0; k < 3; k++) {
        c->ex[k] = malloc((size_t)c->cfg->n_layers * sizeof(int));
        if (!c->ex[k])
            return coli__fail(err, COLI_ENOMEM, "out of memory");
        for (int l = 0; l < c->cfg->n_layers; l++)
            c->ex[k][l] = -1;
    }
    COLI_TRY(cj->src.plan(cj->src.user, on_item, c, err));
    COLI_TRY(layout(c, err));

    if (mkdir(out, 0755) != 0 && errno != EEXIST)
        return coli__fail(err, COLI_EIO, "cannot create the directory %s: %s", out, strerror(errno));
    char *final = coli__path_join(out, COLI_CONT_FILE);
    if (!final)
        return coli__fail(err, COLI_ENOMEM, "out of memory");
    if (!p->overwrite && access(final, F_OK) == 0) {
        coli_status st = coli__fail(err, COLI_EINVAL,
                                    "%s exists; convert into another directory or allow overwriting", final);
        free(final);
        return st;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", final, (long)getpid());
    c->tmp = tmp;
    c->fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    coli_status st = COLI_OK;
    if (c->fd < 0)
        st = coli__fail(err, COLI_EIO, "cannot create %s: %s", tmp, strerror(errno));
    else if (ftruncate(c->fd, (off_t)c->file_size) != 0)
        st = coli__fail(err, COLI_EIO, "%s: cannot make it %llu bytes: %s", tmp, (unsigned long long)c->file_size,
                        strerror(errno));
    if (st == COLI_OK) {
        int n = p->threads > 0 ? p->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
            n = 1;
        if (n > 256)
            n = 256;
        pthread_t th[256];
        int started = 0;
        for (; started < n; started++)
            if (pthread_create(&th[started], NULL, worker, c) != 0)
                break;
        if (started == 0)
            worker(c);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        if (c->st != COLI_OK) {
            *err = c->err;
            st = c->st;
        }
    }
    uint32_t config_crc = 0;
    if (st == COLI_OK)
        st = copy_file(src, out, "config.json", 1, err);
    if (st == COLI_OK) {
        char *cpath = coli__path_join(out, "config.json");
        st = cpath ? coli__file_crc(cpath, &config_crc, err) : coli__fail(err, COLI_ENOMEM, "out of memory");
        free(cpath);
    }
    static const char *const optional[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                           "special_tokens_map.json"};
    for (size_t i = 0; st == COLI_OK && i < sizeof optional / sizeof optional[0]; i++)
        st = copy_file(src, out, optional[i], 0, err);
    if (st == COLI_OK)
        st = write_head(c, config_crc, err);
    if (st == COLI_OK && fsync(c->fd) != 0)
        st = coli__fail(err, COLI_EIO, "%s: %s", tmp, strerror(errno));
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    if (st == COLI_OK && rename(tmp, final) != 0)
        st = coli__fail(err, COLI_EIO, "%s: %s", final, strerror(errno));
    if (st != COLI_OK)
        unlink(tmp);
    if (st == COLI_OK) {
        /* routing counts of a model this file replaced say nothing of it */
        char *hot = coli__path_join(out, "model.coli.hot");
        if (hot)
            unlink(hot);
        free(hot);
    }
    free(final);
    return st;
}

coli_status coli__cont_write(const coli__conv_job *cj, coli__err *err)
{
    conv *c = calloc(1, sizeof *c);
    if (!c)
        return coli__fail(err, COLI_ENOMEM, "out of memory");
    c->cj = cj;
    c->cfg = cj->cfg;
    c->fmt = cj->fmt;
    c->group = cj->group;
    c->p = cj->params;
    c->fd = -1;
    pthread_mutex_init(&c->mu, NULL);
    coli_status st = run(c, err);
    pthread_mutex_destroy(&c->mu);
    for (size_t i = 0; i < c->n_items; i++) {
        free(c->items[i].name);
        free(c->items[i].src);
    }
    free(c->items);
    for (int k = 0; k < 3; k++)
        free(c->ex[k]);
    free(c->recs);
    free(c->moe_index);
    free(c->jobs);
    free(c);
    return st;
}
