/* fuzz_safetensors.c - libFuzzer target for the safetensors reader.
 *
 * Input: the bytes of one model.safetensors file, written to the scratch
 * directory and opened with coli__st_open_file (the reader maps files by
 * path). A refused file must come with a message. For an accepted one the
 * header is parsed again here and every tensor is checked against it: same
 * count, dtype, shape, a byte size equal to prod(shape) * element size, data
 * equal to the file's bytes at data_offsets, and no two tensors overlapping. */
#include <string.h>

#include "fuzzutil.h"
#include "io/json.h"
#include "io/safetensors.h"

/* Element sizes of the safetensors dtypes, as the format defines them. */
static size_t elsize(const char *name)
{
    static const struct {
        const char *name;
        size_t size;
    } t[] = {{"F64", 8}, {"I64", 8}, {"U64", 8}, {"F32", 4}, {"I32", 4},     {"U32", 4},
             {"F16", 2}, {"BF16", 2}, {"I16", 2}, {"U16", 2}, {"I8", 1},     {"U8", 1},
             {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].size;
    return 0;
}

typedef struct span {
    uint64_t begin, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The reader accepted the file: check what it returns against the header. */
static void check_accepted(const coli__tensor_set *ts, const uint8_t *data, size_t size)
{
    FZ_CHECK(size >= 8, "accepted a file of %zu bytes", size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    FZ_CHECK(hlen <= size - 8, "header length %llu past the end", (unsigned long long)hlen);
    const uint8_t *area = data + 8 + hlen;
    uint64_t area_len = size - 8 - hlen;

    coli__err err = {{0}};
    coli__json_doc *doc = NULL;
    FZ_CHECK(coli__json_parse((const char *)data + 8, (size_t)hlen, "header", &doc, &err) == COLI_OK,
             "accepted a header that does not parse: %s", err.msg);
    const coli__json *root = coli__json_root(doc);
    FZ_CHECK(root->type == COLI_JSON_OBJECT, "accepted a header that is not an object");

    size_t want = 0;
    span *spans = calloc(root->len + 1, sizeof *spans);
    FZ_CHECK(spans != NULL, "out of memory");
    size_t nspans = 0;
    for (size_t i = 0; i < root->len; i++) {
        const char *name = coli__json_key(root, i)->str;
        if (strcmp(name, "__metadata__") == 0)
            continue;
        want++;
        const coli__json *e = &root->items[i];
        const coli__tensor *t = coli__st_find(ts, name);
        FZ_CHECK(t != NULL, "tensor '%s' of the header is not found", name);
        FZ_CHECK(strcmp(t->name, name) == 0, "found '%s' for '%s'", t->name, name);
        const char *dt = coli__json_get_str(e, "dtype", "");
        FZ_CHECK(strcmp(t->dtype_name, dt) == 0, "'%s': dtype %s, header %s", name, t->dtype_name, dt);
        const coli__json *shape = coli__json_get(e, "shape");
        FZ_CHECK(shape && shape->type == COLI_JSON_ARRAY && (size_t)t->ndim == shape->len,
                 "'%s': %d dimensions", name, t->ndim);
        uint64_t bytes = elsize(dt);
        FZ_CHECK(bytes > 0, "'%s': accepted dtype '%s'", name, dt);
        for (int d = 0; d < t->ndim; d++) {
            FZ_CHECK(shape->items[d].is_int && t->shape[d] == shape->items[d].integer,
                     "'%s': dimension %d", name, d);
            /* The reader checked that the product fits; so must it here. */
            FZ_CHECK(t->shape[d] == 0 || bytes == 0 ||
                         !__builtin_mul_overflow(bytes, (uint64_t)t->shape[d], &bytes),
                     "'%s': accepted an overflowing shape", name);
            if (t->shape[d] == 0)
                bytes = 0;
        }
        const coli__json *off = coli__json_get(e, "data_offsets");
        FZ_CHECK(off && off->type == COLI_JSON_ARRAY && off->len == 2, "'%s': data_offsets", name);
        uint64_t b = (uint64_t)off->items[0].integer, en = (uint64_t)off->items[1].integer;
        FZ_CHECK(b <= en && en <= area_len, "'%s': accepted [%llu, %llu] in %llu bytes", name,
                 (unsigned long long)b, (unsigned long long)en, (unsigned long long)area_len);
        FZ_CHECK(t->nbytes == en - b && t->nbytes == bytes, "'%s': %zu bytes, offsets say %llu, shape %llu",
                 name, t->nbytes, (unsigned long long)(en - b), (unsigned long long)bytes);
        FZ_CHECK(t->nbytes == 0 || memcmp(t->data, area + b, t->nbytes) == 0, "'%s': data differs", name);
        if (t->nbytes > 0)
            spans[nspans++] = (span){b, en};
    }
    FZ_CHECK(coli__st_count(ts) == want, "%zu tensors, header has %zu", coli__st_count(ts), want);
    qsort(spans, nspans, sizeof *spans, cmp_span);
    for (size_t i = 1; i < nspans; i++)
        FZ_CHECK(spans[i].begin >= spans[i - 1].end, "accepted overlapping tensors");
    free(spans);
    for (size_t i = 0; i < coli__st_count(ts); i++) {
        const coli__tensor *t = coli__st_at(ts, i);
        FZ_CHECK(t != NULL && coli__st_find(ts, t->name) == t, "tensor %zu is not found by name", i);
    }
    FZ_CHECK(coli__st_at(ts, coli__st_count(ts)) == NULL, "a tensor past the end");
    coli__json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("model.safetensors", data, size, 0);
    coli__err err = {{0}};
    coli__tensor_set *ts = NULL;
    coli_status st = coli__st_open_file(fz_path("model.safetensors"), &ts, &err);
    if (st != COLI_OK) {
        FZ_CHECK(ts == NULL, "a failed open returned tensors");
        fz_check_failure(st, err.msg);
        return 0;
    }
    check_accepted(ts, data, size);
    coli__st_close(ts);
    return 0;
}
