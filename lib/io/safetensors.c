/* safetensors.c - memory-mapped safetensors checkpoints.
 *
 * Each file is mapped read-only (MAP_PRIVATE) and stays mapped until
 * coli__st_close; tensor data points into the mappings. Tensor names are
 * copied, so the parsed headers are freed once open returns. Tensors are
 * listed file by file in header order; a hash table (FNV-1a, open addressing)
 * built at open serves coli__st_find.
 *
 * Data pointers are not aligned by us: a writer that does not pad the header
 * to a multiple of 8 yields unaligned tensors; readers should not assume
 * alignment beyond 1 byte. */
/* autoconf's config.h is force-included by the build (-include) */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "io/safetensors.h"

/* The format's own limit (the reference reader refuses longer headers).
 * Real headers are far smaller: a shard of a 744B-parameter model has well
 * under 10 MB. What a header may cost is bounded per byte instead: the
 * JSON tree at most COLI__JSON_MEM_PER_BYTE bytes a byte, and the tensor
 * table (under 190 bytes a tensor with its name and hash slots, each entry
 * taking 49 or more header bytes) at most 4 more. */
#define ST_MAX_HEADER ((uint64_t)100000000)
#define ST_SINGLE_NAME "model.safetensors"
#define ST_INDEX_NAME "model.safetensors.index.json"

typedef struct st_file {
    char *path;
    void *map;
    size_t size;
} st_file;

struct coli__tensor_set {
    st_file *files;
    size_t nfiles, capfiles;
    coli__tensor *tensors;
    size_t count, cap;
    size_t *slots; /* index + 1 into tensors; 0 = empty */
    size_t nslots; /* power of two */
};

/* ---- dtypes ------------------------------------------------------------ */

typedef struct dtype_info {
    const char *name;
    coli__dtype dt;
    size_t elsize;
} dtype_info;

static const dtype_info dtypes[] = {
    {"F32", COLI_DT_F32, 4},     {"F16", COLI_DT_F16, 2},     {"BF16", COLI_DT_BF16, 2},
    {"BOOL", COLI_DT_OTHER, 1},  {"U8", COLI_DT_OTHER, 1},    {"I8", COLI_DT_OTHER, 1},
    {"U16", COLI_DT_OTHER, 2},   {"I16", COLI_DT_OTHER, 2},   {"I32", COLI_DT_OTHER, 4},
    {"U32", COLI_DT_OTHER, 4},   {"F64", COLI_DT_OTHER, 8},   {"I64", COLI_DT_OTHER, 8},
    {"U64", COLI_DT_OTHER, 8},   {"F8_E4M3", COLI_DT_F8E4M3, 1}, {"F8_E5M2", COLI_DT_OTHER, 1},
};

static const dtype_info *find_dtype(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, name, len) == 0)
            return &dtypes[i];
    return NULL;
}

size_t coli__dtype_size(coli__dtype dt)
{
    switch (dt) {
    case COLI_DT_F32: return 4;
    case COLI_DT_F16: return 2;
    case COLI_DT_BF16: return 2;
    case COLI_DT_F8E4M3: return 1;
    default: return 0;
    }
}

/* ---- helpers ----------------------------------------------------------- */

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = malloc(a + (size_t)slash + b + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, dir, a);
    if (slash)
        p[a] = '/';
    memcpy(p + a + slash, name, b + 1);
    return p;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ULL;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static coli_status nomem(coli__err *err, const char *path)
{
    return coli__fail(err, COLI_ENOMEM, "%s: out of memory", path);
}

/* Builds the name index; a name seen twice is an error naming both files. */
static coli_status build_hash(coli__tensor_set *ts, coli__err *err)
{
    size_t n = 16;
    while (n < ts->count * 2)
        n *= 2;
    free(ts->slots);
    ts->slots = calloc(n, sizeof *ts->slots);
    if (ts->slots == NULL) {
        ts->nslots = 0;
        return coli__fail(err, COLI_ENOMEM, "out of memory indexing tensors");
    }
    ts->nslots = n;
    for (size_t i = 0; i < ts->count; i++) {
        const coli__tensor *t = &ts->tensors[i];
        size_t j = (size_t)fnv1a(t->name) & (n - 1);
        while (ts->slots[j] != 0) {
            const coli__tensor *o = &ts->tensors[ts->slots[j] - 1];
            if (strcmp(o->name, t->name) == 0) {
                if (o->file == t->file)
                    return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s' appears twice in the header",
                                      t->file, t->name);
                return coli__fail(err, COLI_EFORMAT, "tensor '%s' appears in both %s and %s", t->name,
                                  o->file, t->file);
            }
            j = (j + 1) & (n - 1);
        }
        ts->slots[j] = i + 1;
    }
    return COLI_OK;
}

typedef struct range {
    uint64_t begin, end;
    size_t idx;
} range;

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static coli_status add_file(coli__tensor_set *ts, const char *path, st_file **out, coli__err *err)
{
    if (ts->nfiles == ts->capfiles) {
        size_t cap = ts->capfiles ? ts->capfiles * 2 : 4;
        st_file *f = realloc(ts->files, cap * sizeof *f);
        if (f == NULL)
            return nomem(err, path);
        ts->files = f;
        ts->capfiles = cap;
    }
    st_file *f = &ts->files[ts->nfiles];
    f->path = dup_str(path);
    if (f->path == NULL)
        return nomem(err, path);
    f->map = NULL;
    f->size = 0;
    ts->nfiles++;
    *out = f;
    return COLI_OK;
}

/* Formats a shape for messages: "[2, 3]". */
static void fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t n = 0;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* Validates one header entry and appends the tensor. */
static coli_status add_tensor(coli__tensor_set *ts, const st_file *f, const char *name, size_t name_len,
                              const coli__json *e, const unsigned char *data, uint64_t dsize,
                              coli__err *err)
{
    const char *path = f->path;
    if (strlen(name) != name_len)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': name contains a NUL byte", path, name);
    if (e->type != COLI_JSON_OBJECT)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': entry is not an object", path, name);

    const coli__json *jdt = coli__json_get(e, "dtype");
    const coli__json *jshape = coli__json_get(e, "shape");
    const coli__json *joff = coli__json_get(e, "data_offsets");
    if (jdt == NULL)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': missing 'dtype'", path, name);
    if (jshape == NULL)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': missing 'shape'", path, name);
    if (joff == NULL)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': missing 'data_offsets'", path, name);
    if (jdt->type != COLI_JSON_STRING)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': 'dtype' is not a string", path, name);
    const dtype_info *di = find_dtype(jdt->str, jdt->len);
    if (di == NULL)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", path, name, jdt->str);

    coli__tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = di->dt;
    t.dtype_name = di->name;
    t.file = path;

    if (jshape->type != COLI_JSON_ARRAY)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': 'shape' is not an array", path, name);
    if (jshape->len > COLI_MAX_DIMS)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': %zu dimensions (at most %d supported)",
                          path, name, (size_t)jshape->len, COLI_MAX_DIMS);
    t.ndim = (int)jshape->len;
    int has_zero = 0;
    for (int i = 0; i < t.ndim; i++) {
        const coli__json *d = &jshape->items[i];
        if (d->type != COLI_JSON_NUMBER || !d->is_int || d->integer < 0)
            return coli__fail(err, COLI_EFORMAT,
                              "%s: tensor '%s': shape dimension %d is not a non-negative integer", path,
                              name, i);
        t.shape[i] = d->integer;
        if (d->integer == 0)
            has_zero = 1;
    }
    char shape_s[160];
    fmt_shape(shape_s, sizeof shape_s, t.shape, t.ndim);
    /* A zero dimension makes the tensor empty whatever the other dims. */
    size_t nbytes = di->elsize;
    if (has_zero) {
        nbytes = 0;
    } else {
        for (int i = 0; i < t.ndim; i++) {
            if ((uint64_t)t.shape[i] > SIZE_MAX ||
                __builtin_mul_overflow(nbytes, (size_t)t.shape[i], &nbytes))
                return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': shape %s of %s overflows the byte size",
                                  path, name, shape_s, di->name);
        }
    }

    if (joff->type != COLI_JSON_ARRAY || joff->len != 2 || joff->items[0].type != COLI_JSON_NUMBER ||
        joff->items[1].type != COLI_JSON_NUMBER || !joff->items[0].is_int || !joff->items[1].is_int ||
        joff->items[0].integer < 0 || joff->items[1].integer < 0)
        return coli__fail(err, COLI_EFORMAT,
                          "%s: tensor '%s': 'data_offsets' is not two non-negative integers", path, name);
    uint64_t begin = (uint64_t)joff->items[0].integer, end = (uint64_t)joff->items[1].integer;
    if (begin > end)
        return coli__fail(err, COLI_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] begin after end",
                          path, name, (unsigned long long)begin, (unsigned long long)end);
    if (end > dsize)
        return coli__fail(err, COLI_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] exceed the data area (%llu bytes)", path,
                          name, (unsigned long long)begin, (unsigned long long)end,
                          (unsigned long long)dsize);
    if (end - begin != (uint64_t)nbytes)
        return coli__fail(err, COLI_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s "
                          "needs %zu",
                          path, name, (unsigned long long)begin, (unsigned long long)end,
                          (unsigned long long)(end - begin), shape_s, di->name, nbytes);
    t.nbytes = nbytes;
    t.data = data + begin;

    if (ts->count == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 64;
        coli__tensor *n = realloc(ts->tensors, cap * sizeof *n);
        if (n == NULL)
            return nomem(err, path);
        ts->tensors = n;
        ts->cap = cap;
    }
    char *nm = malloc(name_len + 1);
    if (nm == NULL)
        return nomem(err, path);
    memcpy(nm, name, name_len + 1);
    t.name = nm;
    ts->tensors[ts->count++] = t;
    return COLI_OK;
}

/* Maps path and appends its tensors to ts. On failure ts keeps what was added
 * (the caller closes it). */
static coli_status load_file(coli__tensor_set *ts, const char *path, coli__err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return coli__fail(err, COLI_ENOENT, "%s: no such file", path);
        return coli__fail(err, COLI_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return coli__fail(err, COLI_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return coli__fail(err, COLI_EIO, "%s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return coli__fail(err, COLI_EFORMAT, "%s: file too short (%lld bytes) for a safetensors header",
                          path, (long long)sb.st_size);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return coli__fail(err, COLI_EFORMAT, "%s: file too large to map", path);
    }
    st_file *f = NULL;
    coli_status st = add_file(ts, path, &f, err);
    if (st != COLI_OK) {
        close(fd);
        return st;
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED)
        return coli__fail(err, COLI_EIO, "%s: cannot map: %s", path, strerror(e));
    f->map = map;
    f->size = size;

    const unsigned char *m = map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | m[i];
    if (hlen > size - 8)
        return coli__fail(err, COLI_EFORMAT, "%s: header length %llu exceeds the file size (%zu bytes)",
                          f->path, (unsigned long long)hlen, size);
    if (hlen > ST_MAX_HEADER)
        return coli__fail(err, COLI_EFORMAT,
                          "%s: header length %llu is over the format's limit of %llu bytes (100 MB)",
                          f->path, (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    const unsigned char *data = m + 8 + hlen;
    uint64_t dsize = (uint64_t)(size - 8 - (size_t)hlen);

    coli__json_doc *doc = NULL;
    size_t plen = strlen(f->path);
    char *what = malloc(plen + sizeof " header");
    if (what == NULL)
        return nomem(err, f->path);
    memcpy(what, f->path, plen);
    memcpy(what + plen, " header", sizeof " header");
    st = coli__json_parse((const char *)m + 8, (size_t)hlen, what, &doc, err);
    free(what);
    if (st != COLI_OK)
        return st;
    const coli__json *root = coli__json_root(doc);
    if (root->type != COLI_JSON_OBJECT) {
        coli__json_free(doc);
        return coli__fail(err, COLI_EFORMAT, "%s: header is not a JSON object", f->path);
    }
    size_t first = ts->count;
    /* Room for all of them at once: doubling would waste up to half. */
    if (root->len > ts->cap - ts->count) {
        size_t cap = ts->count + root->len;
        coli__tensor *nt = cap <= SIZE_MAX / sizeof *nt ? realloc(ts->tensors, cap * sizeof *nt) : NULL;
        if (nt == NULL) {
            coli__json_free(doc);
            return nomem(err, f->path);
        }
        ts->tensors = nt;
        ts->cap = cap;
    }
    for (size_t i = 0; i < root->len && st == COLI_OK; i++) {
        const coli__json *key = coli__json_key(root, i);
        if (strcmp(key->str, "__metadata__") == 0)
            continue; /* free-form; nothing we need */
        st = add_tensor(ts, f, key->str, key->len, &root->items[i], data, dsize, err);
    }
    coli__json_free(doc);
    if (st != COLI_OK)
        return st;

    /* Overlap check: sort the non-empty ranges by begin. */
    size_t n = ts->count - first;
    if (n > 1) {
        range *r = malloc(n * sizeof *r);
        if (r == NULL)
            return nomem(err, f->path);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const coli__tensor *t = &ts->tensors[first + i];
            if (t->nbytes == 0)
                continue;
            r[k].begin = (uint64_t)((const unsigned char *)t->data - data);
            r[k].end = r[k].begin + t->nbytes;
            r[k].idx = first + i;
            k++;
        }
        qsort(r, k, sizeof *r, cmp_range);
        for (size_t i = 1; i < k; i++) {
            if (r[i].begin < r[i - 1].end) {
                const coli__tensor *a = &ts->tensors[r[i - 1].idx], *b = &ts->tensors[r[i].idx];
                st = coli__fail(err, COLI_EFORMAT,
                                "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                                f->path, b->name, (unsigned long long)r[i].begin,
                                (unsigned long long)r[i].end, a->name, (unsigned long long)r[i - 1].begin,
                                (unsigned long long)r[i - 1].end);
                break;
            }
        }
        free(r);
    }
    return st;
}

void coli__st_close(coli__tensor_set *ts)
{
    if (ts == NULL)
        return;
    for (size_t i = 0; i < ts->count; i++)
        free((char *)ts->tensors[i].name);
    free(ts->tensors);
    for (size_t i = 0; i < ts->nfiles; i++) {
        if (ts->files[i].map != NULL)
            munmap(ts->files[i].map, ts->files[i].size);
        free(ts->files[i].path);
    }
    free(ts->files);
    free(ts->slots);
    free(ts);
}

coli_status coli__st_open_file(const char *path, coli__tensor_set **out, coli__err *err)
{
    if (out == NULL || path == NULL)
        return coli__fail(err, COLI_EINVAL, "coli__st_open_file: NULL argument");
    *out = NULL;
    coli__tensor_set *ts = calloc(1, sizeof *ts);
    if (ts == NULL)
        return nomem(err, path);
    coli_status st = load_file(ts, path, err);
    if (st == COLI_OK)
        st = build_hash(ts, err);
    if (st != COLI_OK) {
        coli__st_close(ts);
        return st;
    }
    *out = ts;
    return COLI_OK;
}

/* A shard name from an index must stay inside the directory. */
static int plain_file_name(const char *s, size_t len)
{
    if (len == 0 || strlen(s) != len)
        return 0;
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    return strchr(s, '/') == NULL;
}

static coli_status open_index(const char *dir, const char *index_path, coli__tensor_set *ts,
                              coli__err *err)
{
    coli__json_doc *doc = NULL;
    COLI_TRY(coli__json_parse_file_max(index_path, COLI__JSON_INDEX_MAX, &doc, err));
    const coli__json *root = coli__json_root(doc);
    const coli__json *wm = coli__json_get(root, "weight_map");
    coli_status st = COLI_OK;
    size_t *shard_of = NULL; /* weight_map entry -> index into shards */
    const char **shards = NULL;
    size_t *shard_file = NULL; /* shard -> index into ts->files */
    size_t nshards = 0;
    char *shard_path = NULL;

    if (root->type != COLI_JSON_OBJECT) {
        st = coli__fail(err, COLI_EFORMAT, "%s: not a JSON object", index_path);
        goto done;
    }
    if (wm == NULL || wm->type != COLI_JSON_OBJECT) {
        st = coli__fail(err, COLI_EFORMAT, "%s: missing 'weight_map' object", index_path);
        goto done;
    }
    shard_of = malloc((wm->len ? wm->len : 1) * sizeof *shard_of);
    shards = malloc((wm->len ? wm->len : 1) * sizeof *shards);
    shard_file = malloc((wm->len ? wm->len : 1) * sizeof *shard_file);
    if (shard_of == NULL || shards == NULL || shard_file == NULL) {
        st = nomem(err, index_path);
        goto done;
    }
    for (size_t i = 0; i < wm->len; i++) {
        const coli__json *v = &wm->items[i];
        if (v->type != COLI_JSON_STRING) {
            st = coli__fail(err, COLI_EFORMAT, "%s: weight_map entry for tensor '%s' is not a string",
                            index_path, coli__json_key(wm, i)->str);
            goto done;
        }
        if (!plain_file_name(v->str, v->len)) {
            st = coli__fail(err, COLI_EFORMAT,
                            "%s: tensor '%s': shard name '%s' is not a plain file name in the directory",
                            index_path, coli__json_key(wm, i)->str, v->str);
            goto done;
        }
        /* Shard counts are small: a linear search keeps this simple. */
        size_t k = 0;
        while (k < nshards && strcmp(shards[k], v->str) != 0)
            k++;
        if (k == nshards)
            shards[nshards++] = v->str;
        shard_of[i] = k;
    }
    for (size_t k = 0; k < nshards; k++) {
        shard_path = join_path(dir, shards[k]);
        if (shard_path == NULL) {
            st = nomem(err, index_path);
            goto done;
        }
        shard_file[k] = ts->nfiles;
        st = load_file(ts, shard_path, err);
        if (st == COLI_ENOENT) {
            size_t first = 0;
            while (shard_of[first] != k)
                first++;
            st = coli__fail(err, COLI_ENOENT, "%s: shard '%s' (holding tensor '%s') not found: %s",
                            index_path, shards[k], coli__json_key(wm, first)->str, shard_path);
        }
        free(shard_path);
        shard_path = NULL;
        if (st != COLI_OK)
            goto done;
    }
    st = build_hash(ts, err);
    if (st != COLI_OK)
        goto done;
    for (size_t i = 0; i < wm->len; i++) {
        const coli__tensor *t = coli__st_find(ts, coli__json_key(wm, i)->str);
        const char *want = ts->files[shard_file[shard_of[i]]].path;
        if (t == NULL || t->file != want) {
            st = coli__fail(err, COLI_ENOENT, "%s: tensor '%s' is not in its shard %s", index_path,
                            coli__json_key(wm, i)->str, want);
            goto done;
        }
    }
done:
    free(shard_path);
    free(shard_of);
    free(shards);
    free(shard_file);
    coli__json_free(doc);
    return st;
}

static int missing(const char *path)
{
    struct stat sb;
    return stat(path, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

coli_status coli__st_open_dir(const char *dir, coli__tensor_set **out, coli__err *err)
{
    if (out == NULL || dir == NULL)
        return coli__fail(err, COLI_EINVAL, "coli__st_open_dir: NULL argument");
    *out = NULL;
    char *single = join_path(dir, ST_SINGLE_NAME);
    char *index = join_path(dir, ST_INDEX_NAME);
    coli__tensor_set *ts = calloc(1, sizeof *ts);
    coli_status st;
    if (single == NULL || index == NULL || ts == NULL) {
        st = nomem(err, dir);
    } else if (!missing(single)) {
        /* The single file wins when both exist, as in transformers. */
        st = load_file(ts, single, err);
        if (st == COLI_OK)
            st = build_hash(ts, err);
    } else if (!missing(index)) {
        st = open_index(dir, index, ts, err);
    } else {
        st = coli__fail(err, COLI_ENOENT, "%s: neither %s nor %s found", dir, ST_SINGLE_NAME, ST_INDEX_NAME);
    }
    free(single);
    free(index);
    if (st != COLI_OK) {
        coli__st_close(ts);
        return st;
    }
    *out = ts;
    return COLI_OK;
}

size_t coli__st_count(const coli__tensor_set *ts)
{
    return ts != NULL ? ts->count : 0;
}

const coli__tensor *coli__st_at(const coli__tensor_set *ts, size_t i)
{
    return (ts != NULL && i < ts->count) ? &ts->tensors[i] : NULL;
}

const coli__tensor *coli__st_find(const coli__tensor_set *ts, const char *name)
{
    if (ts == NULL || name == NULL || ts->nslots == 0)
        return NULL;
    size_t mask = ts->nslots - 1;
    for (size_t j = (size_t)fnv1a(name) & mask; ts->slots[j] != 0; j = (j + 1) & mask) {
        const coli__tensor *t = &ts->tensors[ts->slots[j] - 1];
        if (strcmp(t->name, name) == 0)
            return t;
    }
    return NULL;
}
