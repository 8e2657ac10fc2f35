/* container.c - reading and checking model.coli (docs/container.md).
 *
 * The file is mapped read-only. Everything the head says is checked
 * against the file's size before any of it is used, so that a truncated
 * or damaged file is an error naming what is wrong, never a read outside
 * the mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/container.h"
#include "io/crc32c.h"
#include "cpu/kernels.h"
#include "io/model_config.h"
#include "cpu/quant.h"

int coli__cont_present(const char *dir)
{
    char *p = coli__path_join(dir, COLI_CONT_FILE);
    struct stat sb;
    int ok = p && stat(p, &sb) == 0;
    free(p);
    return ok;
}

coli_status coli__file_crc(const char *path, uint32_t *crc, coli__err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return coli__fail(err, errno == ENOENT ? COLI_ENOENT : COLI_EIO, "%s: %s", path, strerror(errno));
    unsigned char buf[65536];
    uint32_t c = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return coli__fail(err, COLI_EIO, "%s: %s", path, strerror(e));
        }
        if (n == 0)
            break;
        c = coli__crc32c(c, buf, (size_t)n);
    }
    close(fd);
    *crc = c;
    return COLI_OK;
}

void coli__cont_close(coli__container *c)
{
    if (!c)
        return;
    if (c->map && c->map != MAP_FAILED)
        munmap((void *)c->map, c->size);
    if (c->fd >= 0)
        close(c->fd);
    free(c->path);
    free(c->tensors);
    free(c->layouts);
    free(c->moe_index);
    free(c->records);
    free(c);
}

/* Bytes a matrix of this dtype takes, 0 if the dtype or shape is invalid. */
static uint64_t mat_bytes(int dt, int group, int rows, int cols)
{
    if (rows <= 0 || cols <= 0 || dt < COLI_DT_F32 || dt > COLI_DT_Q2 || dt == COLI_DT_OTHER)
        return 0;
    if (coli__dtype_is_quant((coli__dtype)dt) && coli__q_check((coli__dtype)dt, group, cols, NULL, NULL) != COLI_OK)
        return 0;
    coli__mat m = coli__mat_at((coli__dtype)dt, group, rows, cols, NULL);
    return coli__mat_bytes(&m);
}

static int stored_ok(int dt)
{
    return dt == COLI_DT_F32 || dt == COLI_DT_F16 || dt == COLI_DT_BF16 || dt == COLI_DT_F8E4M3;
}

#define BAD(...) coli__fail(err, COLI_EFORMAT, __VA_ARGS__)

static coli_status parse(coli__container *c, coli__err *err)
{
    const uint8_t *h = c->map;
    const char *f = c->path;
    if (c->size < COLI_CONT_HEADER || memcmp(h, COLI_CONT_MAGIC, 8) != 0)
        return BAD("%s: not a colibri container (bad magic)", f);
    uint32_t version = coli__get32(h + 8);
    if (version != COLI_CONT_VERSION)
        return coli__fail(err, COLI_EUNSUPPORTED,
                          "%s: container format version %u; this library reads version %d (convert the model again)",
                          f, version, COLI_CONT_VERSION);
    uint64_t head = coli__get32(h + 12), fsize = coli__get64(h + 40);
    if (fsize != c->size)
        return BAD("%s: the file has %llu bytes, its header says %llu (truncated or damaged)", f,
                   (unsigned long long)c->size, (unsigned long long)fsize);
    if (head < COLI_CONT_HEADER || head > c->size)
        return BAD("%s: head size %llu is outside the file", f, (unsigned long long)head);
    uint8_t *copy = malloc(head);
    if (!copy)
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory for the head", f);
    memcpy(copy, h, head);
    memset(copy + 124, 0, 4);
    uint32_t crc = coli__crc32c(0, copy, head);
    free(copy);
    if (crc != coli__get32(h + 124))
        return BAD("%s: the head's checksum does not match (damaged file)", f);

    c->weights = (int)coli__get32(h + 16);
    c->q4_group = (int)coli__get32(h + 20);
    c->n_layers = (int)coli__get32(h + 24);
    c->n_experts = (int)coli__get32(h + 28);
    c->n_moe = (int)coli__get32(h + 32);
    c->n_tensors = coli__get32(h + 36);
    uint64_t dir = coli__get64(h + 48), lay = coli__get64(h + 56), tab = coli__get64(h + 64);
    uint64_t dense = coli__get64(h + 72), dense_n = coli__get64(h + 80), rec0 = coli__get64(h + 88);
    c->config_crc = coli__get32(h + 96);
    c->dense_bytes = dense_n;
    if (c->weights < COLI_WEIGHTS_BF16 || c->weights > COLI_WEIGHTS_Q2)
        return BAD("%s: unknown weight format %d", f, c->weights);
    if (c->n_layers <= 0 || c->n_layers > 4096 || c->n_experts < 0 || c->n_experts > 65536 || c->n_moe < 0 ||
        c->n_moe > c->n_layers || (c->n_moe > 0) != (c->n_experts > 0))
        return BAD("%s: implausible counts (%d layers, %d MoE layers, %d experts)", f, c->n_layers, c->n_moe,
                   c->n_experts);
    uint64_t n_rec = (uint64_t)c->n_moe * (uint64_t)c->n_experts;
    if (dir != COLI_CONT_HEADER || lay != dir + c->n_tensors * (uint64_t)COLI_CONT_DIRENT ||
        tab != lay + (uint64_t)c->n_layers * COLI_CONT_LAYOUT || head != tab + n_rec * COLI_CONT_RECENT)
        return BAD("%s: the head's tables are not where the header says", f);
    if (dense % COLI_CONT_ALIGN || dense < head || dense > c->size || dense_n > c->size - dense ||
        rec0 % COLI_CONT_ALIGN || rec0 < dense + dense_n || rec0 > c->size)
        return BAD("%s: the dense region or the records lie outside the file", f);

    c->tensors = calloc(c->n_tensors ? c->n_tensors : 1, sizeof *c->tensors);
    c->layouts = calloc((size_t)c->n_layers * 3, sizeof *c->layouts);
    c->moe_index = malloc((size_t)c->n_layers * sizeof *c->moe_index);
    c->records = calloc(n_rec ? n_rec : 1, sizeof *c->records);
    if (!c->tensors || !c->layouts || !c->moe_index || !c->records)
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory for the directory", f);
    for (size_t i = 0; i < c->n_tensors; i++) {
        const uint8_t *d = h + dir + i * COLI_CONT_DIRENT;
        coli__cont_tensor *t = &c->tensors[i];
        memcpy(t->name, d, COLI_CONT_NAME);
        if (!memchr(t->name, 0, COLI_CONT_NAME) || !t->name[0])
            return BAD("%s: tensor %zu of the directory has no name", f, i);
        t->dtype = d[72];
        t->stored = d[73];
        t->group = (uint16_t)(d[74] | d[75] << 8);
        t->is_vec = d[76];
        t->kind = d[77];
        t->role = d[78];
        uint32_t rows = coli__get32(d + 80), cols = coli__get32(d + 84);
        t->offset = coli__get64(d + 88);
        t->bytes = coli__get64(d + 96);
        t->crc = coli__get32(d + 104);
        if (rows > (1u << 30) || cols > (1u << 30))
            return BAD("%s: tensor '%s' has an implausible shape", f, t->name);
        t->rows = (int)rows;
        t->cols = (int)cols;
        if (!stored_ok(t->stored) || mat_bytes(t->dtype, t->group, t->rows, t->cols) != t->bytes ||
            t->is_vec > 1 || t->kind > 2 || t->role > 3 ||
            (t->is_vec && (t->dtype != COLI_DT_F32 || t->rows != 1)))
            return BAD("%s: tensor '%s': dtype %d, %d x %d does not make %llu bytes", f, t->name, t->dtype,
                       t->rows, t->cols, (unsigned long long)t->bytes);
        if (t->offset % 64 || t->offset < dense || t->offset > dense + dense_n ||
            t->bytes > dense + dense_n - t->offset)
            return BAD("%s: tensor '%s' lies outside the dense region", f, t->name);
    }
    int moe = 0;
    uint64_t rec_bytes[4096];
    for (int l = 0; l < c->n_layers; l++) {
        const uint8_t *d = h + lay + (size_t)l * COLI_CONT_LAYOUT;
        coli__cont_mat *m = &c->layouts[3 * l];
        uint64_t end = 0;
        for (int k = 0; k < 3; k++) {
            const uint8_t *e = d + 32 * k;
            m[k].dtype = e[0];
            m[k].stored = e[1];
            m[k].group = (uint16_t)(e[2] | e[3] << 8);
            m[k].rows = (int)coli__get32(e + 4);
            m[k].cols = (int)coli__get32(e + 8);
            m[k].offset = coli__get32(e + 12);
            m[k].bytes = coli__get64(e + 16);
        }
        int is_moe = m[0].rows != 0;
        c->moe_index[l] = is_moe ? moe++ : -1;
        rec_bytes[l] = 0;
        if (!is_moe)
            continue;
        for (int k = 0; k < 3; k++) {
            if (m[k].rows <= 0 || m[k].cols <= 0 || m[k].rows > (1 << 30) || m[k].cols > (1 << 30) ||
                !stored_ok(m[k].stored) || mat_bytes(m[k].dtype, m[k].group, m[k].rows, m[k].cols) != m[k].bytes ||
                m[k].offset % 64 || m[k].offset < end)
                return BAD("%s: layer %d: the expert layout is invalid", f, l);
            end = m[k].offset + m[k].bytes;
        }
        rec_bytes[l] = end;
    }
    if (moe != c->n_moe)
        return BAD("%s: %d layers have expert layouts, the header says %d", f, moe, c->n_moe);
    c->record_max = 0;
    for (int l = 0, r = 0; l < c->n_layers; l++) {
        if (c->moe_index[l] < 0)
            continue;
        for (int e = 0; e < c->n_experts; e++, r++) {
            const uint8_t *d = h + tab + (size_t)r * COLI_CONT_RECENT;
            coli__cont_record *rec = &c->records[r];
            rec->offset = coli__get64(d);
            rec->bytes = coli__get32(d + 8);
            rec->crc = coli__get32(d + 12);
            uint64_t padded = ((uint64_t)rec->bytes + COLI_CONT_ALIGN - 1) / COLI_CONT_ALIGN * COLI_CONT_ALIGN;
            if (rec->bytes != rec_bytes[l] || rec->offset % COLI_CONT_ALIGN || rec->offset < rec0 ||
                rec->offset > c->size || padded > c->size - rec->offset)
                return BAD("%s: layer %d expert %d: record at offset %llu, %u bytes, is out of range (file %llu bytes)",
                           f, l, e, (unsigned long long)rec->offset, rec->bytes, (unsigned long long)c->size);
            if (padded > c->record_max)
                c->record_max = padded;
        }
    }
    /* dense tensors are read by every token: checked once here */
    for (size_t i = 0; i < c->n_tensors; i++) {
        const coli__cont_tensor *t = &c->tensors[i];
        if (coli__crc32c(0, c->map + t->offset, t->bytes) != t->crc)
            return BAD("%s: tensor '%s': checksum mismatch (damaged file)", f, t->name);
    }
    return COLI_OK;
}

coli_status coli__cont_open(const char *dir, coli__container **out, coli__err *err)
{
    *out = NULL;
    coli__container *c = calloc(1, sizeof *c);
    if (!c)
        return coli__fail(err, COLI_ENOMEM, "out of memory");
    c->fd = -1;
    c->path = coli__path_join(dir, COLI_CONT_FILE);
    char *cfg = coli__path_join(dir, "config.json");
    coli_status st = COLI_OK;
    if (!c->path || !cfg) {
        st = coli__fail(err, COLI_ENOMEM, "out of memory");
        goto done;
    }
    c->fd = open(c->path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (c->fd < 0 || fstat(c->fd, &sb) != 0) {
        st = coli__fail(err, errno == ENOENT ? COLI_ENOENT : COLI_EIO, "%s: %s", c->path, strerror(errno));
        goto done;
    }
    c->size = (uint64_t)sb.st_size;
    if (c->size < COLI_CONT_HEADER) {
        st = BAD("%s: %llu bytes is too short for a container (truncated)", c->path, (unsigned long long)c->size);
        goto done;
    }
    c->map = mmap(NULL, c->size, PROT_READ, MAP_SHARED, c->fd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        st = coli__fail(err, COLI_EIO, "%s: cannot map: %s", c->path, strerror(errno));
        goto done;
    }
    st = parse(c, err);
    if (st == COLI_OK) {
        uint32_t crc = 0;
        st = coli__file_crc(cfg, &crc, err);
        if (st == COLI_OK && crc != c->config_crc)
            st = BAD("%s: config.json is not the one this container was converted with", c->path);
    }
done:
    free(cfg);
    if (st != COLI_OK) {
        coli__cont_close(c);
        return st;
    }
    *out = c;
    return COLI_OK;
}

const coli__cont_tensor *coli__cont_find(const coli__container *c, const char *name)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            return &c->tensors[i];
    return NULL;
}

const coli__cont_record *coli__cont_record_of(const coli__container *c, int l, int e)
{
    if (l < 0 || l >= c->n_layers || c->moe_index[l] < 0 || e < 0 || e >= c->n_experts)
        return NULL;
    return &c->records[(size_t)c->moe_index[l] * (size_t)c->n_experts + (size_t)e];
}

coli_status coli__cont_verify(const coli__container *c, int l, int e, const void *buf, coli__err *err)
{
    const coli__cont_record *r = coli__cont_record_of(c, l, e);
    if (!r)
        return coli__fail(err, COLI_ERANGE, "%s: layer %d expert %d: no such record", c->path, l, e);
    const void *p = buf ? buf : (const void *)(c->map + r->offset);
    if (coli__crc32c(0, p, r->bytes) != r->crc)
        return BAD("%s: layer %d expert %d: record checksum mismatch (damaged file or failed read)", c->path, l, e);
    return COLI_OK;
}
