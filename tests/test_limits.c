/* test_limits.c - whole models whose files are too large, or claim tables
 * too large, are refused before the memory is spent, naming the file.
 *
 * Each case copies a fixture model into a temporary directory and plants
 * one oversized file (sparse where the content does not matter, so this
 * costs no disk), then opens it through the public API. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri/colibri.h"
#include "testutil.h"

#define MiB ((off_t)1 << 20)

/* A copy of the fixture model arch. */
static char *copy_model(const char *arch)
{
    char *src = tu_path(tu_data_dir(), arch);
    char *dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    free(src);
    return dir;
}

static void done(char *dir)
{
    tu_rmtree(dir);
    free(dir);
}

/* Makes dir/name size bytes long (growing it sparsely with NUL bytes). */
static void resize(const char *dir, const char *name, off_t size)
{
    char *p = tu_path(dir, name);
    ck_assert_int_eq(truncate(p, size), 0);
    free(p);
}

/* Opens dir and expects status want with both needles in the message. */
static void expect_fail(const char *dir, coli_status want, const char *n1, const char *n2)
{
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, NULL, &m);
    ck_assert_ptr_nonnull(m);
    const char *msg = coli_model_errmsg(m);
    ck_assert_msg(st == want, "status %s, wanted %s (%s)", coli_status_name(st),
                  coli_status_name(want), msg);
    ck_assert_msg(strstr(msg, n1), "message '%s' does not name '%s'", msg, n1);
    ck_assert_msg(!n2 || strstr(msg, n2), "message '%s' lacks '%s'", msg, n2);
    coli_model_free(m);
}

static void expect_open(const char *dir)
{
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, NULL, &m);
    ck_assert_msg(st == COLI_OK, "%s", coli_model_errmsg(m));
    coli_model_free(m);
}

/* Configuration files: 8 MiB. At the limit (real JSON padded with spaces)
 * the model opens; one byte more and the file is refused unread. */
START_TEST(test_config_limit)
{
    char *dir = copy_model("mixtral");
    char *p = tu_path(dir, "config.json");
    size_t n;
    char *text = tu_read_file(p, &n);
    ck_assert_ptr_nonnull(text);
    char *big = malloc((size_t)(8 * MiB));
    ck_assert_ptr_nonnull(big);
    memcpy(big, text, n);
    memset(big + n, ' ', (size_t)(8 * MiB) - n);
    ck_assert_int_eq(tu_write_file(p, big, (size_t)(8 * MiB)), 0);
    expect_open(dir);
    resize(dir, "config.json", 8 * MiB + 1);
    expect_fail(dir, COLI_EFORMAT, "config.json", "8 MiB");
    free(big);
    free(text);
    free(p);
    done(dir);
}
END_TEST

START_TEST(test_generation_config_limit)
{
    char *dir = copy_model("mixtral");
    resize(dir, "generation_config.json", 8 * MiB + 1);
    expect_fail(dir, COLI_EFORMAT, "generation_config.json", "8 MiB");
    done(dir);
}
END_TEST

/* tokenizer_config.json is read when no other file names the eos token. */
START_TEST(test_tokenizer_config_limit)
{
    char *dir = copy_model("mixtral");
    char *p = tu_path(dir, "generation_config.json");
    ck_assert_int_eq(unlink(p), 0);
    free(p);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"eos_token_id\": 2,", ""), 0);
    expect_open(dir);
    resize(dir, "tokenizer_config.json", 8 * MiB + 1);
    expect_fail(dir, COLI_EFORMAT, "tokenizer_config.json", "8 MiB");
    done(dir);
}
END_TEST

START_TEST(test_tokenizer_limit)
{
    char *dir = copy_model("qwen3_moe");
    resize(dir, "tokenizer.json", 256 * MiB + 1);
    expect_fail(dir, COLI_EFORMAT, "tokenizer.json", "256 MiB");
    done(dir);
}
END_TEST

START_TEST(test_index_limit)
{
    char *dir = copy_model("olmoe");
    resize(dir, "model.safetensors.index.json", 64 * MiB + 1);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors.index.json", "64 MiB");
    done(dir);
}
END_TEST

/* An added token id of 2^26 - 1 no longer sizes the id tables (576 MB):
 * the fixture's 1005 entries allow ids below 3034. */
START_TEST(test_tokenizer_huge_id)
{
    char *dir = copy_model("qwen3_moe");
    ck_assert_int_eq(tu_replace_in_file(dir, "tokenizer.json", "\"id\": 1004,", "\"id\": 67108863,"),
                     0);
    expect_fail(dir, COLI_EFORMAT, "tokenizer.json", "67108863");
    done(dir);
}
END_TEST

/* A header of tiny values is refused for the memory its tree would take. */
START_TEST(test_header_memory)
{
    char *dir = copy_model("mixtral");
    char *p = tu_path(dir, "model.safetensors");
    size_t k = 400000, cap = 2 * k + 128, n = 0;
    char *h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    n += (size_t)snprintf(h, cap, "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,0],\"shape\":[0");
    for (size_t i = 1; i < k; i++) {
        h[n++] = ',';
        h[n++] = '0';
    }
    n += (size_t)snprintf(h + n, cap - n, "]}}");
    ck_assert_uint_lt(n, cap);
    ck_assert_int_eq(tu_st_write_raw(p, h, NULL, 0), 0);
    expect_fail(dir, COLI_EFORMAT, "model.safetensors", "bytes of memory");
    free(h);
    free(p);
    done(dir);
}
END_TEST

/* Detokenizing to nothing through the public API: only a skipped <s>, or
 * no ids at all (the Strip decoder used to offset a NULL text). */
START_TEST(test_detokenize_nothing)
{
    char *src = tu_path(tu_data_dir(), "mixtral");
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(src, NULL, &m), COLI_OK);
    int32_t bos = 1;
    char buf[16] = "x";
    size_t len = 99;
    ck_assert_int_eq(coli_detokenize(m, &bos, 1, 1, buf, sizeof buf, &len), COLI_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(buf, "");
    len = 99;
    ck_assert_int_eq(coli_detokenize(m, NULL, 0, 1, buf, sizeof buf, &len), COLI_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(coli_detokenize(m, &bos, 1, 0, buf, sizeof buf, &len), COLI_OK);
    ck_assert_str_eq(buf, "<s>");
    coli_model_free(m);
    free(src);
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_config_limit);
    tcase_add_test(tc, test_generation_config_limit);
    tcase_add_test(tc, test_tokenizer_config_limit);
    tcase_add_test(tc, test_tokenizer_limit);
    tcase_add_test(tc, test_index_limit);
    tcase_add_test(tc, test_tokenizer_huge_id);
    tcase_add_test(tc, test_header_memory);
    tcase_add_test(tc, test_detokenize_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(limits_suite());
}
