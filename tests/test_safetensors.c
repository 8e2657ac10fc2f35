/* test_safetensors.c - loading and validating safetensors checkpoints. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/families.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "testutil.h"

static char *tmpdir;

static void setup(void)
{
    tmpdir = tu_mkdtemp();
    ck_assert_ptr_nonnull(tmpdir);
}

static void teardown(void)
{
    tu_rmtree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

/* tmpdir/name, freed by the caller. */
static char *tmp(const char *name)
{
    char *p = tu_path(tmpdir, name);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void assert_contains(const char *msg, const char *what)
{
    ck_assert_msg(strstr(msg, what) != NULL, "message '%s' lacks '%s'", msg, what);
}

START_TEST(test_bf16_helpers)
{
    ck_assert_uint_eq(tu_f32_to_bf16(1.0f), 0x3F80);
    ck_assert_uint_eq(tu_f32_to_bf16(-2.0f), 0xC000);
    /* 1 + 2^-8 is halfway between 0x3F80 and 0x3F81: ties go to even. */
    ck_assert_uint_eq(tu_f32_to_bf16(1.00390625f), 0x3F80);
    /* 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82: even is up. */
    ck_assert_uint_eq(tu_f32_to_bf16(1.01171875f), 0x3F82);
    /* Just above halfway rounds up. */
    ck_assert_uint_eq(tu_f32_to_bf16(1.0040f), 0x3F81);
    ck_assert(tu_bf16_to_f32(0x4049) == 3.140625f);
    ck_assert(tu_bf16_to_f32(0x0000) == 0.0f);
    uint16_t nan = tu_f32_to_bf16(__builtin_nanf(""));
    ck_assert_uint_eq(nan & 0x7F80, 0x7F80);
    ck_assert_uint_ne(nan & 0x007F, 0);
}
END_TEST

/* Writes the reference file of test_roundtrip; returns the expected data. */
static const float f32_data[6] = {0.0f, 1.0f, -2.5f, 3.25f, 1e-3f, 65504.0f};
static const int8_t i8_data[3] = {-1, 0, 127};

static void write_reference(const char *path, uint16_t bf[4])
{
    tu_st *w = tu_st_new();
    ck_assert_ptr_nonnull(w);
    const float fv[4] = {1.0f, -0.5f, 3.140625f, 100.0f};
    for (int i = 0; i < 4; i++)
        bf[i] = tu_f32_to_bf16(fv[i]);
    const int64_t s23[] = {2, 3}, s4[] = {4}, s3[] = {3}, s04[] = {0, 4};
    const uint16_t half = 0x3C00; /* 1.0 in IEEE half */
    tu_st_add(w, "model.embed_tokens.weight", "F32", 2, s23, f32_data, sizeof f32_data);
    tu_st_add(w, "model.layers.0.mlp.gate.weight", "BF16", 1, s4, bf, 4 * sizeof bf[0]);
    tu_st_add(w, "quant.i8", "I8", 1, s3, i8_data, sizeof i8_data);
    tu_st_add(w, "scalar", "F16", 0, NULL, &half, sizeof half);
    tu_st_add(w, "empty", "F32", 2, s04, NULL, 0);
    tu_st_add(w, "odd \"name\"", "F64", 0, NULL, "\0\0\0\0\0\0\xf0\x3f", 8);
    ck_assert_int_eq(tu_st_write(w, path), 0);
    tu_st_free(w);
}

static void check_reference(const coli__tensor_set *ts, const char *path, const uint16_t bf[4])
{
    ck_assert_uint_eq(coli__st_count(ts), 6);

    const coli__tensor *t = coli__st_at(ts, 0);
    ck_assert_str_eq(t->name, "model.embed_tokens.weight");
    ck_assert_int_eq(t->dtype, COLI_DT_F32);
    ck_assert_str_eq(t->dtype_name, "F32");
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_int_eq(t->shape[1], 3);
    ck_assert_uint_eq(t->nbytes, 24);
    ck_assert_int_eq(memcmp(t->data, f32_data, 24), 0);
    ck_assert_str_eq(t->file, path);
    ck_assert_ptr_eq(coli__st_find(ts, "model.embed_tokens.weight"), t);

    t = coli__st_find(ts, "model.layers.0.mlp.gate.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(t, coli__st_at(ts, 1));
    ck_assert_int_eq(t->dtype, COLI_DT_BF16);
    ck_assert_str_eq(t->dtype_name, "BF16");
    ck_assert_int_eq(t->ndim, 1);
    ck_assert_int_eq(t->shape[0], 4);
    ck_assert_uint_eq(t->nbytes, 8);
    uint16_t got[4];
    memcpy(got, t->data, sizeof got);
    ck_assert_int_eq(memcmp(got, bf, sizeof got), 0);
    ck_assert(tu_bf16_to_f32(got[2]) == 3.140625f);
    ck_assert(tu_bf16_to_f32(got[1]) == -0.5f);

    t = coli__st_find(ts, "quant.i8");
    ck_assert_int_eq(t->dtype, COLI_DT_OTHER);
    ck_assert_str_eq(t->dtype_name, "I8");
    ck_assert_uint_eq(t->nbytes, 3);
    ck_assert_int_eq(memcmp(t->data, i8_data, 3), 0);

    t = coli__st_find(ts, "scalar");
    ck_assert_int_eq(t->dtype, COLI_DT_F16);
    ck_assert_int_eq(t->ndim, 0);
    ck_assert_uint_eq(t->nbytes, 2);
    ck_assert_int_eq(memcmp(t->data, "\x00\x3c", 2), 0);

    t = coli__st_find(ts, "empty");
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_int_eq(t->shape[0], 0);
    ck_assert_int_eq(t->shape[1], 4);
    ck_assert_uint_eq(t->nbytes, 0);

    t = coli__st_find(ts, "odd \"name\"");
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->dtype_name, "F64");
    ck_assert_uint_eq(t->nbytes, 8);
    double one;
    memcpy(&one, t->data, 8);
    ck_assert(one == 1.0);

    ck_assert_ptr_null(coli__st_find(ts, "model.embed_tokens"));
    ck_assert_ptr_null(coli__st_find(ts, "__metadata__"));
    ck_assert_ptr_null(coli__st_find(ts, ""));
    ck_assert_ptr_null(coli__st_at(ts, 6));
}

START_TEST(test_roundtrip_file)
{
    char *path = tmp("weights.safetensors");
    uint16_t bf[4];
    write_reference(path, bf);
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_msg(coli__st_open_file(path, &ts, &err) == COLI_OK, "%s", err.msg);
    check_reference(ts, path, bf);
    coli__st_close(ts);
    free(path);
}
END_TEST

START_TEST(test_roundtrip_dir)
{
    char *path = tmp("model.safetensors");
    uint16_t bf[4];
    write_reference(path, bf);
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_msg(coli__st_open_dir(tmpdir, &ts, &err) == COLI_OK, "%s", err.msg);
    check_reference(ts, path, bf);
    coli__st_close(ts);
    free(path);
}
END_TEST

/* The header a writer produces is padded: data starts 8-byte aligned. */
START_TEST(test_writer_layout)
{
    char *path = tmp("w.safetensors");
    tu_st *w = tu_st_new();
    const int64_t s[] = {1};
    const float v = 2.0f;
    tu_st_add(w, "x", "F32", 1, s, &v, 4);
    ck_assert_int_eq(tu_st_write(w, path), 0);
    tu_st_free(w);
    size_t n = 0;
    char *raw = tu_read_file(path, &n);
    ck_assert_ptr_nonnull(raw);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | (unsigned char)raw[i];
    ck_assert_uint_eq((8 + hlen) % 8, 0);
    ck_assert_uint_eq(n, 8 + hlen + 4);
    ck_assert_int_eq(raw[8], '{');
    ck_assert_int_eq(memcmp(raw + 8 + hlen, &v, 4), 0);
    free(raw);
    free(path);
}
END_TEST

/* Writes a shard with the given F32 tensors of shape [2], values i + 0.5. */
static void write_shard(const char *name, const char *const *tensors, int n)
{
    char *path = tmp(name);
    tu_st *w = tu_st_new();
    const int64_t s[] = {2};
    for (int i = 0; i < n; i++) {
        float v[2] = {(float)i + 0.5f, (float)-i};
        tu_st_add(w, tensors[i], "F32", 1, s, v, sizeof v);
    }
    ck_assert_int_eq(tu_st_write(w, path), 0);
    tu_st_free(w);
    free(path);
}

static void write_index(const char *json)
{
    char *path = tmp("model.safetensors.index.json");
    ck_assert_int_eq(tu_write_file(path, json, strlen(json)), 0);
    free(path);
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static void write_two_shards(void)
{
    static const char *const s1[] = {"a.weight", "b.weight"};
    static const char *const s2[] = {"c.weight", "extra.bias"};
    write_shard(SHARD1, s1, 2);
    write_shard(SHARD2, s2, 2);
}

START_TEST(test_sharded)
{
    write_two_shards();
    write_index("{\"metadata\": {\"total_size\": 32}, \"weight_map\": {"
                "\"a.weight\": \"" SHARD1 "\", \"c.weight\": \"" SHARD2 "\","
                " \"b.weight\": \"" SHARD1 "\"}}");
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_msg(coli__st_open_dir(tmpdir, &ts, &err) == COLI_OK, "%s", err.msg);
    ck_assert_uint_eq(coli__st_count(ts), 4);
    char *p1 = tmp(SHARD1), *p2 = tmp(SHARD2);
    const coli__tensor *a = coli__st_find(ts, "a.weight"), *b = coli__st_find(ts, "b.weight");
    const coli__tensor *c = coli__st_find(ts, "c.weight");
    /* Present in a shard, absent from the map: still usable. */
    const coli__tensor *e = coli__st_find(ts, "extra.bias");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(a->file, p1);
    ck_assert_str_eq(b->file, p1);
    ck_assert_str_eq(c->file, p2);
    ck_assert_str_eq(e->file, p2);
    float v[2];
    memcpy(v, b->data, sizeof v);
    ck_assert(v[0] == 1.5f && v[1] == -1.0f);
    memcpy(v, e->data, sizeof v);
    ck_assert(v[0] == 1.5f && v[1] == -1.0f);
    memcpy(v, c->data, sizeof v);
    ck_assert(v[0] == 0.5f && v[1] == 0.0f);
    coli__st_close(ts);
    free(p1);
    free(p2);
}
END_TEST

START_TEST(test_no_checkpoint)
{
    coli__tensor_set *ts = (coli__tensor_set *)&ts;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__st_open_dir(tmpdir, &ts, &err), COLI_ENOENT);
    ck_assert_ptr_null(ts);
    assert_contains(err.msg, tmpdir);
    assert_contains(err.msg, "model.safetensors");
    assert_contains(err.msg, "model.safetensors.index.json");

    char *path = tmp("nothing.safetensors");
    ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_ENOENT);
    assert_contains(err.msg, path);
    free(path);

    char *missing_dir = tmp("no/such/dir");
    ck_assert_int_eq(coli__st_open_dir(missing_dir, &ts, &err), COLI_ENOENT);
    assert_contains(err.msg, missing_dir);
    free(missing_dir);
}
END_TEST

START_TEST(test_misc_api)
{
    ck_assert_uint_eq(coli__st_count(NULL), 0);
    ck_assert_ptr_null(coli__st_at(NULL, 0));
    ck_assert_ptr_null(coli__st_find(NULL, "x"));
    coli__st_close(NULL);
    ck_assert_uint_eq(coli__dtype_size(COLI_DT_F32), 4);
    ck_assert_uint_eq(coli__dtype_size(COLI_DT_F16), 2);
    ck_assert_uint_eq(coli__dtype_size(COLI_DT_BF16), 2);
    ck_assert_uint_eq(coli__dtype_size(COLI_DT_OTHER), 0);
    coli__err err = {{0}};
    ck_assert_int_eq(coli__st_open_file(NULL, NULL, &err), COLI_EINVAL);
    ck_assert_int_eq(coli__st_open_dir(NULL, NULL, &err), COLI_EINVAL);
}
END_TEST

/* A lenient __metadata__ of any shape, and a header with only metadata. */
START_TEST(test_metadata_lenient)
{
    char *path = tmp("m.safetensors");
    static const char data[4] = {1, 2, 3, 4};
    ck_assert_int_eq(tu_st_write_raw(path,
                                     "{\"__metadata__\": {\"n\": 1, \"a\": [1]},"
                                     " \"w\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]}}",
                                     data, 4),
                     0);
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_msg(coli__st_open_file(path, &ts, &err) == COLI_OK, "%s", err.msg);
    ck_assert_uint_eq(coli__st_count(ts), 1);
    ck_assert_int_eq(memcmp(coli__st_find(ts, "w")->data, data, 4), 0);
    coli__st_close(ts);

    ck_assert_int_eq(tu_st_write_raw(path, "{\"__metadata__\": {}}  ", NULL, 0), 0);
    ck_assert_msg(coli__st_open_file(path, &ts, &err) == COLI_OK, "%s", err.msg);
    ck_assert_uint_eq(coli__st_count(ts), 0);
    ck_assert_ptr_null(coli__st_find(ts, "w"));
    coli__st_close(ts);
    free(path);
}
END_TEST

/* ---- corrupt single files --------------------------------------------- */

typedef struct bad_file {
    const char *header;   /* NULL: raw bytes below */
    uint64_t header_len;  /* 0: strlen(header) */
    size_t data_len;      /* bytes of data after the header */
    const char *tensor;   /* expected in the message, or NULL */
    const char *expect;   /* expected in the message */
} bad_file;

#define T(name, body) "{\"" name "\": " body "}"
static const bad_file bad_files[] = {
    /* header length far beyond the file */
    {"{}", 100, 0, NULL, "exceeds the file size"},
    {"{}", (uint64_t)1 << 63, 0, NULL, "exceeds the file size"},
    {"{}", UINT64_MAX, 16, NULL, "exceeds the file size"},
    /* malformed or wrongly shaped JSON */
    {"{\"w\": {\"dtype\": \"F32\",", 0, 0, NULL, "line 1"},
    {"{\"w\": 1,}", 0, 0, NULL, "trailing comma"},
    {"[1, 2]", 0, 0, NULL, "not a JSON object"},
    {"", 0, 0, NULL, "empty"},
    {T("w", "5"), 0, 0, "'w'", "not an object"},
    /* dtype */
    {T("w", "{\"dtype\": \"Q4\", \"shape\": [2], \"data_offsets\": [0, 1]}"), 0, 1, "'w'", "Q4"},
    {T("w", "{\"dtype\": \"f32\", \"shape\": [2], \"data_offsets\": [0, 8]}"), 0, 8, "'w'", "unknown dtype"},
    {T("w", "{\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]}"), 0, 8, "'w'", "dtype"},
    {T("w", "{\"shape\": [2], \"data_offsets\": [0, 8]}"), 0, 8, "'w'", "missing 'dtype'"},
    /* shape */
    {T("w", "{\"dtype\": \"F32\", \"data_offsets\": [0, 8]}"), 0, 8, "'w'", "missing 'shape'"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]}"), 0, 8, "'w'", "shape"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [-1, 4], \"data_offsets\": [0, 8]}"), 0, 8, "'w'",
     "non-negative integer"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 8]}"), 0, 8, "'w'",
     "non-negative integer"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [\"2\"], \"data_offsets\": [0, 8]}"), 0, 8, "'w'",
     "non-negative integer"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}"), 0, 4, "'w'",
     "dimensions"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4611686018427387904],"
            " \"data_offsets\": [0, 0]}"),
     0, 0, "'w'", "overflows"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2147483648, 2147483648], \"data_offsets\": [0, 0]}"), 0, 0,
     "'w'", "overflows"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [99999999999999999999], \"data_offsets\": [0, 0]}"), 0, 0,
     "'w'", "non-negative integer"},
    /* data_offsets */
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2]}"), 0, 8, "'w'", "missing 'data_offsets'"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}"), 0, 8, "'w'", "data_offsets"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, \"8\"]}"), 0, 8, "'w'",
     "data_offsets"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-8, 0]}"), 0, 8, "'w'", "data_offsets"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 16]}"), 0, 16, "'w'",
     "data_offsets"},
    {T("model.layers.0.mlp.gate.weight", "{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}"),
     0, 16, "'model.layers.0.mlp.gate.weight'", "data_offsets [8, 24] exceed the data area (16 bytes)"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [17, 17]}"), 0, 16, "'w'",
     "exceed the data area"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}"), 0, 16, "'w'",
     "begin after end"},
    {T("w", "{\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 16]}"), 0, 16, "'w'",
     "hold 16 bytes but shape [3] of F32 needs 12"},
    {T("w", "{\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}"), 0, 16, "'w'",
     "needs 8"},
    /* two tensors */
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
     " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
     0, 16, "'b'", "overlap tensor 'a'"},
    {"{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]},"
     " \"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
     0, 16, "'b'", "overlap"},
    {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
     " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
     0, 16, "'a'", "twice"},
};
#undef T

START_TEST(test_bad_file)
{
    const bad_file *c = &bad_files[_i];
    char *path = tmp("bad.safetensors");
    unsigned char data[64];
    memset(data, 0xAB, sizeof data);
    ck_assert_uint_le(c->data_len, sizeof data);
    uint64_t hlen = c->header_len ? c->header_len : strlen(c->header);
    ck_assert_int_eq(tu_st_write_raw_len(path, hlen, c->header, data, c->data_len), 0);

    coli__tensor_set *ts = (coli__tensor_set *)&ts;
    coli__err err = {{0}};
    coli_status st = coli__st_open_file(path, &ts, &err);
    ck_assert_msg(st == COLI_EFORMAT, "case %d: status %d (%s)", _i, st, err.msg);
    ck_assert_ptr_null(ts);
    assert_contains(err.msg, path);
    if (c->tensor != NULL)
        assert_contains(err.msg, c->tensor);
    assert_contains(err.msg, c->expect);

    /* The same file inside a directory fails the same way. */
    char *single = tmp("model.safetensors");
    ck_assert_int_eq(rename(path, single), 0);
    ck_assert_int_eq(coli__st_open_dir(tmpdir, &ts, &err), COLI_EFORMAT);
    assert_contains(err.msg, single);
    free(single);
    free(path);
}
END_TEST

START_TEST(test_short_file)
{
    char *path = tmp("short.safetensors");
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    for (size_t n = 0; n < 8; n++) {
        ck_assert_int_eq(tu_write_file(path, "\x02\0\0\0\0\0\0", n), 0);
        ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_EFORMAT);
        ck_assert_ptr_null(ts);
        assert_contains(err.msg, path);
        assert_contains(err.msg, "too short");
    }
    free(path);
}
END_TEST

/* A header over 100 MB is refused even when the file is that large (the
 * file is sparse, so this costs no disk). */
START_TEST(test_huge_header)
{
    char *path = tmp("huge.safetensors");
    uint64_t hlen = (uint64_t)200 * 1024 * 1024;
    ck_assert_int_eq(tu_st_write_raw_len(path, hlen, "{", NULL, 0), 0);
    ck_assert_int_eq(truncate(path, (off_t)(8 + hlen)), 0);
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_EFORMAT);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "100 MB");
    free(path);
}
END_TEST

/* The format's limit is exactly 100000000 bytes: one byte more is refused
 * before anything is parsed; at the limit the header is parsed (and here,
 * being all NUL bytes after the '{', fails as JSON). Sparse files. */
START_TEST(test_header_limit)
{
    char *path = tmp("limit.safetensors");
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    uint64_t hlen = 100000001;
    ck_assert_int_eq(tu_st_write_raw_len(path, hlen, "{", NULL, 0), 0);
    ck_assert_int_eq(truncate(path, (off_t)(8 + hlen)), 0);
    ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_EFORMAT);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "limit of 100000000 bytes");
    hlen = 100000000;
    ck_assert_int_eq(tu_st_write_raw_len(path, hlen, "{", NULL, 0), 0);
    ck_assert_int_eq(truncate(path, (off_t)(8 + hlen)), 0);
    ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_EFORMAT);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "line 1, column 2");
    free(path);
}
END_TEST

/* A header made of tiny values would cost 8 bytes of tree a byte: it is
 * refused for its memory, naming the file, before the tree is built (the
 * old reader built it, 72 bytes a value, and only then found 300000
 * dimensions too many). */
START_TEST(test_header_memory)
{
    char *path = tmp("dense.safetensors");
    size_t k = 300000, cap = 2 * k + 128, n = 0;
    char *h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    n += (size_t)snprintf(h, cap, "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,0],\"shape\":[");
    for (size_t i = 0; i < k; i++)
        n += (size_t)snprintf(h + n, cap - n, i ? ",0" : "0");
    n += (size_t)snprintf(h + n, cap - n, "]}}");
    ck_assert_uint_lt(n, cap);
    ck_assert_int_eq(tu_st_write_raw(path, h, NULL, 0), 0);
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__st_open_file(path, &ts, &err), COLI_EFORMAT);
    ck_assert_ptr_null(ts);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "bytes of memory");
    free(h);
    free(path);
}
END_TEST

START_TEST(test_not_a_file)
{
    coli__tensor_set *ts = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__st_open_file(tmpdir, &ts, &err), COLI_EIO);
    assert_contains(err.msg, tmpdir);
}
END_TEST

/* ---- bad indexes ------------------------------------------------------- */

static coli_status open_dir_expect(coli_status want, coli__err *err)
{
    coli__tensor_set *ts = (coli__tensor_set *)&ts;
    coli_status st = coli__st_open_dir(tmpdir, &ts, err);
    ck_assert_msg(st == want, "status %d, want %d (%s)", st, want, err->msg);
    ck_assert_ptr_null(ts);
    return st;
}

START_TEST(test_index_missing_shard)
{
    write_two_shards();
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD1 "\","
                " \"z.weight\": \"model-00003-of-00002.safetensors\"}}");
    coli__err err = {{0}};
    open_dir_expect(COLI_ENOENT, &err);
    assert_contains(err.msg, "model.safetensors.index.json");
    assert_contains(err.msg, "model-00003-of-00002.safetensors");
    assert_contains(err.msg, "'z.weight'");
}
END_TEST

START_TEST(test_index_tensor_absent)
{
    write_two_shards();
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD1 "\", \"ghost.weight\": \"" SHARD2 "\"}}");
    coli__err err = {{0}};
    open_dir_expect(COLI_ENOENT, &err);
    assert_contains(err.msg, "'ghost.weight'");
    assert_contains(err.msg, SHARD2);
}
END_TEST

/* Mapped to a shard other than the one holding it. */
START_TEST(test_index_wrong_shard)
{
    write_two_shards();
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD2 "\", \"c.weight\": \"" SHARD2 "\"}}");
    coli__err err = {{0}};
    open_dir_expect(COLI_ENOENT, &err);
    assert_contains(err.msg, "'a.weight'");
    assert_contains(err.msg, SHARD2);
}
END_TEST

static const char *const bad_shard_names[] = {
    "../" SHARD1, "sub/" SHARD1, "/etc/passwd", "..", ".", "",
};

START_TEST(test_index_bad_shard_name)
{
    write_two_shards();
    char json[256];
    snprintf(json, sizeof json, "{\"weight_map\": {\"a.weight\": \"%s\"}}", bad_shard_names[_i]);
    write_index(json);
    coli__err err = {{0}};
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "model.safetensors.index.json");
    assert_contains(err.msg, "'a.weight'");
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", bad_shard_names[_i]);
    assert_contains(err.msg, quoted);
}
END_TEST

START_TEST(test_index_duplicate_tensor)
{
    static const char *const s1[] = {"a.weight"};
    static const char *const s2[] = {"b.weight", "a.weight"};
    write_shard(SHARD1, s1, 1);
    write_shard(SHARD2, s2, 2);
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD1 "\", \"b.weight\": \"" SHARD2 "\"}}");
    coli__err err = {{0}};
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "'a.weight'");
    assert_contains(err.msg, SHARD1);
    assert_contains(err.msg, SHARD2);
}
END_TEST

START_TEST(test_index_malformed)
{
    write_two_shards();
    coli__err err = {{0}};
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD1 "\",}}");
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "model.safetensors.index.json: line 1");

    write_index("{\"metadata\": {}}");
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "weight_map");

    write_index("[]");
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "model.safetensors.index.json");

    write_index("{\"weight_map\": {\"a.weight\": 1}}");
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, "'a.weight'");
}
END_TEST

/* A corrupt shard fails the whole open, naming the shard. */
START_TEST(test_index_corrupt_shard)
{
    static const char *const s1[] = {"a.weight"};
    write_shard(SHARD1, s1, 1);
    char *p2 = tmp(SHARD2);
    ck_assert_int_eq(tu_st_write_raw(p2, "{\"c.weight\": {\"dtype\": \"Q4\", \"shape\": [1],"
                                         " \"data_offsets\": [0, 1]}}",
                                     "x", 1),
                     0);
    write_index("{\"weight_map\": {\"a.weight\": \"" SHARD1 "\", \"c.weight\": \"" SHARD2 "\"}}");
    coli__err err = {{0}};
    open_dir_expect(COLI_EFORMAT, &err);
    assert_contains(err.msg, p2);
    assert_contains(err.msg, "'c.weight'");
    assert_contains(err.msg, "Q4");
    free(p2);
}
END_TEST

/* ---- the families table (lib/io/families.c) -------------------------- */

/* Every row is found by its architecture and its model_type, names its
 * pieces and every tensor role. */
START_TEST(test_family_rows)
{
    ck_assert_uint_ge(coli__n_families, 3);
    for (size_t i = 0; i < coli__n_families; i++) {
        const coli__family *f = &coli__families[i];
        ck_assert_ptr_nonnull(f->arch);
        ck_assert_ptr_nonnull(f->model_type);
        ck_assert_ptr_eq(coli__family_find(f->arch, NULL), f);
        ck_assert_ptr_eq(coli__family_find(NULL, f->model_type), f);
        ck_assert_ptr_nonnull(f->parse);
        ck_assert(f->rms_eps > 0 && f->rope_theta > 0);
        ck_assert_uint_lt((unsigned)f->attn, COLI_ATTN_KINDS);
        ck_assert_uint_lt((unsigned)f->router, COLI_ROUTER_KINDS);
        ck_assert_uint_lt((unsigned)f->moe, COLI_MOE_KINDS);
        ck_assert_uint_lt((unsigned)f->mlp, COLI_MLP_KINDS);
        ck_assert_ptr_nonnull(f->names->layers);
        ck_assert_ptr_nonnull(f->names->experts);
        /* the roles of optional pieces (biases, the sigmoid router's
         * bias, shared experts) are named by the families that have them */
        for (int t = 0; t < COLI_T_COUNT; t++)
            ck_assert_msg(f->names->name[t] != NULL || (t >= COLI_T_BQ && t <= COLI_T_MTP_EMBED),
                          "%s: tensor role %d has no name", f->arch, t);
        if (f->router == COLI_ROUTER_SIGMOID_GROUP)
            ck_assert_ptr_nonnull(f->names->name[COLI_T_ROUTER_BIAS]);
        if (f->moe == COLI_MOE_ROUTED_SHARED)
            ck_assert_ptr_nonnull(f->names->name[COLI_T_S_DOWN]);
        /* a family that reads num_nextn_predict_layers names its MTP tensors */
        if (f->names->name[COLI_T_MTP_EH_PROJ])
            for (int t = COLI_T_MTP_EH_PROJ; t <= COLI_T_MTP_EMBED; t++)
                ck_assert_ptr_nonnull(f->names->name[t]);
    }
    ck_assert_ptr_null(coli__family_find("GPTNeoXForCausalLM", NULL));
    ck_assert_ptr_null(coli__family_find(NULL, "gpt_neox"));
    /* architectures decides when given, whatever model_type says */
    ck_assert_ptr_null(coli__family_find("GPTNeoXForCausalLM", "qwen3_moe"));
}
END_TEST

static const char *const FIXTURES[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite", "glm_moe_dsa"};
/* what each fixture's config.json names in "architectures" */
static const char *const FIXTURE_ARCH[] = {"Qwen3MoeForCausalLM", "OlmoeForCausalLM", "MixtralForCausalLM",
                                           "Glm4MoeForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLM",
                                           "GlmMoeDsaForCausalLM"};

/* Each fixture's config.json picks its row, and the tensors the row names
 * for layer 0 and expert 0 are in its checkpoint. */
START_TEST(test_family_names_resolve)
{
    char *dir = tu_path(tu_data_dir(), FIXTURES[_i]);
    coli__config cfg;
    coli__err err = {{0}};
    ck_assert_msg(coli__config_load(dir, &cfg, &err) == COLI_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(cfg.family);
    ck_assert_str_eq(cfg.family->arch, FIXTURE_ARCH[_i]);
    coli__tensor_set *ts = NULL;
    ck_assert_msg(coli__st_open_dir(dir, &ts, &err) == COLI_OK, "%s", err.msg);
    const int mla = cfg.family->attn == COLI_ATTN_MLA;
    for (int t = 0; t < COLI_T_COUNT; t++) {
        int want = 1;
        if (mla && t == COLI_T_WQ) /* the query without LoRA */
            want = cfg.attn.mla.q_lora == 0;
        else if (t == COLI_T_WK || t == COLI_T_WV)
            want = !mla;
        else if (t >= COLI_T_Q_A && t <= COLI_T_Q_B)
            want = mla && cfg.attn.mla.q_lora > 0;
        else if (t >= COLI_T_KV_A && t <= COLI_T_KV_B)
            want = mla;
        else if (t >= COLI_T_IDX_WQ && t <= COLI_T_IDX_W)
            want = cfg.attn.dsa.topk && cfg.attn.dsa.full[0];
        else if (t == COLI_T_LM_HEAD)
            want = !cfg.tie_embeddings;
        else if (t == COLI_T_Q_NORM || t == COLI_T_K_NORM)
            want = cfg.attn.qk_norm != COLI_QK_NORM_NONE;
        else if (t == COLI_T_GATE || t == COLI_T_UP || t == COLI_T_DOWN)
            want = !cfg.is_moe[0];
        else if (t == COLI_T_BQ || t == COLI_T_BK || t == COLI_T_BV)
            want = cfg.attn.qkv_bias;
        else if (t == COLI_T_ROUTER_BIAS)
            want = cfg.is_moe[0] && cfg.family->router == COLI_ROUTER_SIGMOID_GROUP;
        else if (t >= COLI_T_S_GATE && t <= COLI_T_S_DOWN)
            want = cfg.is_moe[0] && cfg.shared_inter > 0;
        else if (t >= COLI_T_MTP_EH_PROJ && t <= COLI_T_MTP_EMBED)
            want = 0; /* the MTP layer's, below */
        else if (t >= COLI_T_ROUTER)
            want = cfg.is_moe[0];
        char name[256];
        coli__tensor_name(cfg.family, (coli__tname)t, 0, 0, name, sizeof name);
        if (want)
            ck_assert_msg(coli__st_find(ts, name) != NULL, "%s: '%s' is not in the checkpoint", FIXTURES[_i],
                          name);
    }
    /* the MTP layer's own tensors, at index num_hidden_layers */
    for (int t = COLI_T_MTP_EH_PROJ; cfg.n_mtp > 0 && t <= COLI_T_MTP_EMBED; t++) {
        char name[256];
        coli__tensor_name(cfg.family, (coli__tname)t, cfg.n_trunk, 0, name, sizeof name);
        ck_assert_msg(coli__st_find(ts, name) != NULL, "%s: '%s' is not in the checkpoint", FIXTURES[_i], name);
    }
    ck_assert_int_eq(cfg.n_mtp, _i == 3); /* only the glm4_moe fixture has an MTP layer */
    /* a layer that shares another's choice has no indexer, the ones after
     * it their own (the glm_moe_dsa fixture: full, shared, full) */
    for (int l = 0; cfg.attn.dsa.topk && l < cfg.n_layers; l++)
        for (int t = COLI_T_IDX_WQ; t <= COLI_T_IDX_W; t++) {
            char name[256];
            coli__tensor_name(cfg.family, (coli__tname)t, l, 0, name, sizeof name);
            ck_assert_msg((coli__st_find(ts, name) != NULL) == cfg.attn.dsa.full[l], "%s: '%s' %s", FIXTURES[_i],
                          name, cfg.attn.dsa.full[l] ? "is missing" : "is there, in a shared layer");
        }
    if (cfg.attn.dsa.topk)
        ck_assert(cfg.attn.dsa.full[0] && !cfg.attn.dsa.full[1] && cfg.attn.dsa.full[2]);
    /* the layer and expert numbers land where the checkpoint has them */
    char name[256];
    int last = cfg.n_layers - 1;
    if (cfg.is_moe[last]) {
        coli__tensor_name(cfg.family, COLI_T_E_DOWN, last, cfg.n_experts - 1, name, sizeof name);
        ck_assert_msg(coli__st_find(ts, name) != NULL, "%s: '%s' is not in the checkpoint", FIXTURES[_i], name);
        ck_assert_ptr_null(coli__st_find(ts, coli__tensor_name(cfg.family, COLI_T_E_DOWN, last, cfg.n_experts,
                                                               name, sizeof name)));
    }
    coli__st_close(ts);
    coli__config_free(&cfg);
    free(dir);
}
END_TEST

static Suite *st_suite(void)
{
    Suite *s = suite_create("safetensors");

    TCase *tc = tcase_create("valid");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bf16_helpers);
    tcase_add_test(tc, test_roundtrip_file);
    tcase_add_test(tc, test_roundtrip_dir);
    tcase_add_test(tc, test_writer_layout);
    tcase_add_test(tc, test_sharded);
    tcase_add_test(tc, test_no_checkpoint);
    tcase_add_test(tc, test_misc_api);
    tcase_add_test(tc, test_metadata_lenient);
    suite_add_tcase(s, tc);

    tc = tcase_create("corrupt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_bad_file, 0, (int)(sizeof bad_files / sizeof bad_files[0]));
    tcase_add_test(tc, test_short_file);
    tcase_add_test(tc, test_huge_header);
    tcase_add_test(tc, test_header_limit);
    tcase_add_test(tc, test_header_memory);
    tcase_add_test(tc, test_not_a_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("index");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_index_missing_shard);
    tcase_add_test(tc, test_index_tensor_absent);
    tcase_add_test(tc, test_index_wrong_shard);
    tcase_add_loop_test(tc, test_index_bad_shard_name, 0,
                        (int)(sizeof bad_shard_names / sizeof bad_shard_names[0]));
    tcase_add_test(tc, test_index_duplicate_tensor);
    tcase_add_test(tc, test_index_malformed);
    tcase_add_test(tc, test_index_corrupt_shard);
    suite_add_tcase(s, tc);

    tc = tcase_create("families");
    tcase_add_test(tc, test_family_rows);
    tcase_add_loop_test(tc, test_family_names_resolve, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(st_suite());
}
