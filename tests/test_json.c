/* test_json.c - the strict JSON reader. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json.h"
#include "testutil.h"

/* Parses a NUL-terminated literal; fails the test on error. */
static coli__json_doc *parse_ok(const char *text)
{
    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    coli_status st = coli__json_parse(text, strlen(text), "doc.json", &doc, &err);
    ck_assert_msg(st == COLI_OK, "parse of %s failed: %s", text, err.msg);
    ck_assert_ptr_nonnull(doc);
    return doc;
}

START_TEST(test_types)
{
    coli__json_doc *doc =
        parse_ok(" {\"n\": null, \"t\": true, \"f\": false, \"num\": -12.5e1, \"s\": \"x y\",\n"
                 "  \"a\": [1, \"two\", [], {}], \"o\": {\"k\": 3}, \"e\": \"\"} ");
    const coli__json *r = coli__json_root(doc);
    ck_assert_int_eq(r->type, COLI_JSON_OBJECT);
    ck_assert_uint_eq(r->len, 8);
    ck_assert_str_eq(coli__json_key(r, 0)->str, "n");
    ck_assert_uint_eq(coli__json_key(r, 3)->len, 3);
    ck_assert_str_eq(coli__json_key(r, 7)->str, "e");

    ck_assert_int_eq(coli__json_get(r, "n")->type, COLI_JSON_NULL);
    const coli__json *t = coli__json_get(r, "t");
    ck_assert_int_eq(t->type, COLI_JSON_BOOL);
    ck_assert_int_eq(t->boolean, 1);
    ck_assert_int_eq(coli__json_get(r, "f")->boolean, 0);

    const coli__json *num = coli__json_get(r, "num");
    ck_assert_int_eq(num->type, COLI_JSON_NUMBER);
    ck_assert(coli__json_num(num) == -125.0);
    ck_assert_int_eq(num->is_int, 0);

    const coli__json *s = coli__json_get(r, "s");
    ck_assert_int_eq(s->type, COLI_JSON_STRING);
    ck_assert_str_eq(s->str, "x y");
    ck_assert_uint_eq(s->len, 3);
    ck_assert_str_eq(coli__json_get(r, "e")->str, "");
    ck_assert_uint_eq(coli__json_get(r, "e")->len, 0);

    const coli__json *a = coli__json_get(r, "a");
    ck_assert_int_eq(a->type, COLI_JSON_ARRAY);
    ck_assert_uint_eq(a->len, 4);
    ck_assert_int_eq(a->items[0].is_int, 1);
    ck_assert_int_eq(a->items[0].integer, 1);
    ck_assert_str_eq(a->items[1].str, "two");
    ck_assert_int_eq(a->items[2].type, COLI_JSON_ARRAY);
    ck_assert_uint_eq(a->items[2].len, 0);
    ck_assert_int_eq(a->items[3].type, COLI_JSON_OBJECT);
    ck_assert_uint_eq(a->items[3].len, 0);

    const coli__json *o = coli__json_get(r, "o");
    ck_assert_int_eq(coli__json_get_int(o, "k", -1), 3);

    ck_assert_ptr_null(coli__json_get(r, "missing"));
    ck_assert_ptr_null(coli__json_get(a, "k")); /* not an object */
    ck_assert_ptr_null(coli__json_get(NULL, "k"));
    coli__json_free(doc);
}
END_TEST

START_TEST(test_scalar_roots)
{
    coli__json_doc *doc = parse_ok("42");
    ck_assert_int_eq(coli__json_root(doc)->integer, 42);
    coli__json_free(doc);
    doc = parse_ok("\"s\"");
    ck_assert_str_eq(coli__json_root(doc)->str, "s");
    coli__json_free(doc);
    doc = parse_ok("null");
    ck_assert_int_eq(coli__json_root(doc)->type, COLI_JSON_NULL);
    coli__json_free(doc);
    /* A UTF-8 byte order mark is skipped (RFC 8259 8.1). */
    doc = parse_ok("\xEF\xBB\xBF[true]");
    ck_assert_int_eq(coli__json_root(doc)->items[0].boolean, 1);
    coli__json_free(doc);
}
END_TEST

START_TEST(test_accessors)
{
    coli__json_doc *doc =
        parse_ok("{\"i\": 7, \"d\": 0.25, \"b\": true, \"s\": \"v\", \"big\": 1e300, \"frac\": 2.5}");
    const coli__json *r = coli__json_root(doc);
    ck_assert_int_eq(coli__json_get_int(r, "i", -1), 7);
    ck_assert_int_eq(coli__json_get_int(r, "frac", -1), -1); /* not an integer */
    ck_assert_int_eq(coli__json_get_int(r, "s", -1), -1);    /* wrong type */
    ck_assert_int_eq(coli__json_get_int(r, "none", 99), 99);
    ck_assert(coli__json_get_num(r, "d", -1) == 0.25);
    ck_assert(coli__json_get_num(r, "i", -1) == 7.0);
    ck_assert(coli__json_get_num(r, "big", -1) == 1e300);
    ck_assert(coli__json_get_num(r, "s", -1) == -1.0);
    ck_assert_int_eq(coli__json_get_bool(r, "b", 0), 1);
    ck_assert_int_eq(coli__json_get_bool(r, "i", 5), 5);
    ck_assert_str_eq(coli__json_get_str(r, "s", "def"), "v");
    ck_assert_str_eq(coli__json_get_str(r, "i", "def"), "def");
    ck_assert_ptr_null(coli__json_get_str(r, "none", NULL));
    coli__json_free(doc);
}
END_TEST

START_TEST(test_escapes)
{
    coli__json_doc *doc = parse_ok("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\", \"\\ud83d\\ude00\","
                                   " \"a\\u0000b\", \"\\u20AC\", \"caf\xC3\xA9 \xF0\x9F\x98\x80\"]");
    const coli__json *a = coli__json_root(doc);
    ck_assert_uint_eq(a->len, 6);
    ck_assert_str_eq(a->items[0].str, "\"\\/\b\f\n\r\t");
    ck_assert_uint_eq(a->items[0].len, 8);
    /* U+00E9 is C3 A9 in UTF-8. */
    ck_assert_uint_eq(a->items[1].len, 2);
    ck_assert_int_eq(memcmp(a->items[1].str, "\xC3\xA9", 3), 0);
    /* U+1F600 from a surrogate pair is F0 9F 98 80. */
    ck_assert_uint_eq(a->items[2].len, 4);
    ck_assert_int_eq(memcmp(a->items[2].str, "\xF0\x9F\x98\x80", 5), 0);
    /* \u0000 is kept; len counts past it. */
    ck_assert_uint_eq(a->items[3].len, 3);
    ck_assert_int_eq(memcmp(a->items[3].str, "a\0b", 4), 0);
    /* U+20AC (upper-case hex) is E2 82 AC. */
    ck_assert_int_eq(memcmp(a->items[4].str, "\xE2\x82\xAC", 4), 0);
    /* Raw UTF-8 passes through unchanged. */
    ck_assert_str_eq(a->items[5].str, "caf\xC3\xA9 \xF0\x9F\x98\x80");
    ck_assert_uint_eq(a->items[5].len, 10);
    coli__json_free(doc);

    /* Escaped keys are unescaped too, and can be looked up. */
    doc = parse_ok("{\"\\u0041b\": 1, \"\\u0120x\": 2}");
    ck_assert_int_eq(coli__json_get_int(coli__json_root(doc), "Ab", 0), 1);
    ck_assert_int_eq(coli__json_get_int(coli__json_root(doc), "\xC4\xA0x", 0), 2);
    coli__json_free(doc);
}
END_TEST

START_TEST(test_numbers)
{
    coli__json_doc *doc =
        parse_ok("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
                 " -9223372036854775809, 1e2, 1.0, 0.5, -1E-2, 123456789, 100000000000000000000000,"
                 " 2.5e+3, 1e-400]");
    const coli__json *a = coli__json_root(doc);
    ck_assert_uint_eq(a->len, 14);
    ck_assert_int_eq(a->items[0].is_int, 1);
    ck_assert_int_eq(a->items[0].integer, 0);
    ck_assert_int_eq(a->items[1].is_int, 1);
    ck_assert_int_eq(a->items[1].integer, 0);
    ck_assert(coli__json_num(&a->items[1]) == 0.0);
    ck_assert(signbit(coli__json_num(&a->items[1]))); /* -0 keeps its sign */
    ck_assert(!signbit(coli__json_num(&a->items[0])));

    ck_assert_int_eq(a->items[2].is_int, 1);
    ck_assert(a->items[2].integer == INT64_MAX);
    ck_assert_int_eq(a->items[3].is_int, 1);
    ck_assert(a->items[3].integer == INT64_MIN);
    ck_assert(coli__json_num(&a->items[3]) == -9223372036854775808.0);

    /* One past either end of int64: still a number, no longer an integer. */
    ck_assert_int_eq(a->items[4].type, COLI_JSON_NUMBER);
    ck_assert_int_eq(a->items[4].is_int, 0);
    ck_assert(coli__json_num(&a->items[4]) == 9223372036854775808.0);
    ck_assert_int_eq(a->items[5].is_int, 0);
    ck_assert(coli__json_num(&a->items[5]) == -9223372036854775808.0); /* nearest double */

    /* A fraction or exponent makes a number non-integer even when whole. */
    ck_assert_int_eq(a->items[6].is_int, 0);
    ck_assert(coli__json_num(&a->items[6]) == 100.0);
    ck_assert_int_eq(a->items[7].is_int, 0);
    ck_assert(coli__json_num(&a->items[7]) == 1.0);
    ck_assert(coli__json_num(&a->items[8]) == 0.5);
    ck_assert(coli__json_num(&a->items[9]) == -0.01);
    ck_assert_int_eq(a->items[10].integer, 123456789);
    ck_assert(coli__json_num(&a->items[10]) == 123456789.0);
    ck_assert_int_eq(a->items[11].is_int, 0);
    ck_assert(coli__json_num(&a->items[11]) == 1e23);
    ck_assert(coli__json_num(&a->items[12]) == 2500.0);
    ck_assert(coli__json_num(&a->items[13]) >= 0.0 &&
              coli__json_num(&a->items[13]) < 1e-300); /* underflow is fine */
    coli__json_free(doc);
}
END_TEST

/* The decimal point must not depend on the caller's locale. */
START_TEST(test_numbers_locale)
{
    static const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "C.UTF-8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof locales / sizeof locales[0] && set == NULL; i++)
        set = setlocale(LC_NUMERIC, locales[i]);
    coli__json_doc *doc = parse_ok("[1.5, 2e-1]");
    ck_assert(coli__json_num(&coli__json_root(doc)->items[0]) == 1.5);
    ck_assert(coli__json_num(&coli__json_root(doc)->items[1]) == 0.2);
    coli__json_free(doc);
    setlocale(LC_NUMERIC, "C");
}
END_TEST

START_TEST(test_duplicate_keys)
{
    coli__json_doc *doc = parse_ok("{\"k\": 1, \"x\": 0, \"k\": 2}");
    const coli__json *r = coli__json_root(doc);
    ck_assert_uint_eq(r->len, 3); /* all members are kept */
    ck_assert_int_eq(coli__json_get_int(r, "k", 0), 2); /* the last wins */
    coli__json_free(doc);
}
END_TEST

START_TEST(test_nested)
{
    coli__json_doc *doc = parse_ok("{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1},"
                                   " \"merges\": [\"a b\", [\"c\", \"d\"]]},"
                                   " \"added\": [{\"id\": 5, \"special\": true}]}");
    const coli__json *r = coli__json_root(doc);
    const coli__json *m = coli__json_get(r, "model");
    const coli__json *v = coli__json_get(m, "vocab");
    ck_assert_uint_eq(v->len, 2);
    ck_assert_int_eq(coli__json_get_int(v, "b", -1), 1);
    const coli__json *merges = coli__json_get(m, "merges");
    ck_assert_str_eq(merges->items[0].str, "a b");
    ck_assert_str_eq(merges->items[1].items[1].str, "d");
    const coli__json *added = coli__json_get(r, "added");
    ck_assert_int_eq(coli__json_get_int(&added->items[0], "id", 0), 5);
    ck_assert_int_eq(coli__json_get_bool(&added->items[0], "special", 0), 1);
    coli__json_free(doc);
}
END_TEST

static char *nested(int depth)
{
    char *s = malloc((size_t)depth * 2 + 1);
    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < depth; i++) {
        s[i] = '[';
        s[depth + i] = ']';
    }
    s[2 * depth] = '\0';
    return s;
}

START_TEST(test_depth_limit)
{
    char *s = nested(256);
    coli__json_doc *doc = parse_ok(s);
    coli__json_free(doc);
    free(s);

    coli__err err = {{0}};
    doc = NULL;
    s = nested(257);
    ck_assert_int_eq(coli__json_parse(s, strlen(s), "deep.json", &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_null(doc);
    ck_assert_ptr_nonnull(strstr(err.msg, "deep.json: line 1, column 257"));
    free(s);
}
END_TEST

/* A big flat object and array, the shape of tokenizer.json. */
START_TEST(test_large)
{
    enum { N = 150000 };
    size_t cap = (size_t)N * 40 + 64, n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    n += (size_t)snprintf(s + n, cap - n, "{\"vocab\": {");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"t%d\": %d", i ? ", " : "", i, i);
    n += (size_t)snprintf(s + n, cap - n, "}, \"merges\": [");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"a%d b\"", i ? "," : "", i);
    n += (size_t)snprintf(s + n, cap - n, "]}");
    ck_assert_uint_lt(n, cap);
    coli__json_doc *doc = parse_ok(s);
    const coli__json *v = coli__json_get(coli__json_root(doc), "vocab");
    ck_assert_uint_eq(v->len, N);
    ck_assert_str_eq(coli__json_key(v, 12345)->str, "t12345");
    ck_assert_int_eq(v->items[12345].integer, 12345);
    ck_assert_int_eq(coli__json_get_int(v, "t149999", -1), 149999);
    const coli__json *m = coli__json_get(coli__json_root(doc), "merges");
    ck_assert_uint_eq(m->len, N);
    ck_assert_str_eq(m->items[N - 1].str, "a149999 b");
    coli__json_free(doc);
    free(s);
}
END_TEST

/* The memory a parse takes is the tree itself, once: 16 bytes a node plus
 * the strings, and a 4-byte count per container while parsing. Checked on
 * the shape of a compact tokenizer.json, pair-form merges being the most
 * node-dense content real files have. (The old reader took a 72-byte node,
 * held twice while its container was open.) */
START_TEST(test_mem_bound)
{
    enum { N = 200000 };
    size_t cap = (size_t)N * 40 + 64, n = 0, strb = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    n += (size_t)snprintf(s + n, cap - n, "{\"vocab\":{");
    strb += sizeof "vocab";
    for (int i = 0; i < N; i++) {
        int k = snprintf(s + n, cap - n, "%s\"t%d\":%d", i ? "," : "", i, i);
        n += (size_t)k;
        strb += (size_t)snprintf(NULL, 0, "t%d", i) + 1;
    }
    n += (size_t)snprintf(s + n, cap - n, "},\"merges\":[");
    strb += sizeof "merges";
    for (int i = 0; i < N; i++) {
        n += (size_t)snprintf(s + n, cap - n, "%s[\"a%d\",\"b\"]", i ? "," : "", i);
        strb += (size_t)snprintf(NULL, 0, "a%d", i) + 1 + sizeof "b";
    }
    n += (size_t)snprintf(s + n, cap - n, "]}");
    ck_assert_uint_lt(n, cap);
    /* root + 2 keys + 2 values; vocab: a key and a value each; merges: an
     * array and its two strings each */
    size_t nodes = 5 + 2 * (size_t)N + 3 * (size_t)N, containers = 3 + (size_t)N;
    size_t tree = nodes * 16 + strb;

    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse(s, n, "tok.json", &doc, &err), COLI_OK);
    size_t used = coli__json_mem_used(doc);
    ck_assert_uint_ge(used, tree);
    ck_assert_uint_le(used, tree + 2 * 4 * containers + 4096); /* counts grow by doubling */
    ck_assert_uint_le(used, coli__json_mem_limit(n));
    ck_assert_uint_le(used, 5 * n);
    const coli__json *m = coli__json_get(coli__json_root(doc), "merges");
    ck_assert_uint_eq(m->len, N);
    ck_assert_str_eq(m->items[N - 1].items[0].str, "a199999");
    coli__json_free(doc);
    free(s);
}
END_TEST

/* [0,0,...,0]: 2 bytes of text per 16-byte node, the densest JSON there is.
 * k zeros need 16 (k + 1) bytes against a limit of 6 (2k + 1) + 1 MiB, so
 * 200000 fit and 300000 do not; the refusal comes before the tree is
 * allocated and names the document. */
static char *zeros(size_t k, size_t *len)
{
    char *s = malloc(2 * k + 2);
    ck_assert_ptr_nonnull(s);
    s[0] = '[';
    for (size_t i = 0; i < k; i++) {
        s[1 + 2 * i] = '0';
        s[2 + 2 * i] = i + 1 < k ? ',' : ']';
    }
    *len = 2 * k + 1;
    return s;
}

START_TEST(test_mem_refused)
{
    size_t len;
    char *s = zeros(200000, &len);
    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse(s, len, "dense.json", &doc, &err), COLI_OK);
    ck_assert_uint_eq(coli__json_root(doc)->len, 200000);
    ck_assert_uint_le(coli__json_mem_used(doc), coli__json_mem_limit(len));
    coli__json_free(doc);
    free(s);

    s = zeros(300000, &len);
    doc = (coli__json_doc *)&doc;
    ck_assert_int_eq(coli__json_parse(s, len, "dense.json", &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strncmp(err.msg, "dense.json: ", 12) == 0, "message '%s'", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "bytes of memory"));
    free(s);
}
END_TEST

/* Files are refused past the caller's limit, before they are read: from the
 * size of a regular file, while reading anything else. */
START_TEST(test_file_limit)
{
    char path[] = "/tmp/colijsonXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char text[100];
    memset(text, ' ', sizeof text);
    text[0] = '[';
    text[99] = ']';
    ck_assert_int_eq(write(fd, text, sizeof text), (ssize_t)sizeof text);
    close(fd);

    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse_file_max(path, 100, &doc, &err), COLI_OK);
    coli__json_free(doc);
    doc = (coli__json_doc *)&doc;
    ck_assert_int_eq(coli__json_parse_file_max(path, 99, &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_null(doc);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    ck_assert_ptr_nonnull(strstr(err.msg, "99 bytes"));

    /* The default, for configuration files: 8 MiB (a sparse file: at the
     * limit it is read, and its NUL bytes are what fails). */
    ck_assert_int_eq(truncate(path, (off_t)COLI__JSON_CONFIG_MAX), 0);
    ck_assert_int_eq(coli__json_parse_file(path, &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "after the JSON document"));
    ck_assert_int_eq(truncate(path, (off_t)COLI__JSON_CONFIG_MAX + 1), 0);
    ck_assert_int_eq(coli__json_parse_file(path, &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    ck_assert_ptr_nonnull(strstr(err.msg, "8 MiB"));
    unlink(path);

    /* A device has no size to check: reading stops at the limit. */
    ck_assert_int_eq(coli__json_parse_file_max("/dev/zero", 1 << 16, &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "/dev/zero"));
    ck_assert_ptr_nonnull(strstr(err.msg, "65536 bytes"));
}
END_TEST

/* Each must fail with COLI_EFORMAT, naming the source and a line. */
static const struct bad_case {
    const char *text;
    size_t len; /* 0: strlen */
    const char *expect; /* substring of the message, or NULL */
} bad_cases[] = {
    {"[1, 2,]", 0, "trailing comma"},
    {"{\"a\": 1,}", 0, "trailing comma"},
    {"[1 // c\n]", 0, "comment"},
    {"// c\n[1]", 0, "comment"},
    {"/* c */ 1", 0, "comment"},
    {"01", 0, "leading zero"},
    {"[-01]", 0, "leading zero"},
    {"[00]", 0, "leading zero"},
    {"\"\\ud83d\"", 0, "surrogate"},
    {"\"\\ude00\"", 0, "surrogate"},
    {"\"\\ud83d\\u0041\"", 0, "surrogate"},
    {"\"\\ud83dx\"", 0, "surrogate"},
    {"\"a\tb\"", 0, "control character"},
    {"\"a\nb\"", 0, "control character"},
    {"\"\xff\"", 0, "UTF-8"},
    {"\"\xc0\xaf\"", 0, "UTF-8"},         /* overlong '/' */
    {"\"\xed\xa0\x80\"", 0, "UTF-8"},     /* encoded surrogate */
    {"\"\xf4\x90\x80\x80\"", 0, "UTF-8"}, /* above U+10FFFF */
    {"\"\xe2\x82\"", 0, "UTF-8"},         /* truncated sequence */
    {"[\xc3\xa9]", 0, NULL},              /* non-ASCII outside a string */
    {"[1] x", 0, "after the JSON document"},
    {"1 2", 0, "after the JSON document"},
    {"truex", 0, "after the JSON document"},
    {"{} {}", 0, "after the JSON document"},
    {"[1]\0", 4, "after the JSON document"},
    {"{\"a\": [1, 2", 0, "end of input"},
    {"{\"a\"", 0, "end of input"},
    {"\"abc", 0, "unterminated"},
    {"\"abc\\", 0, "unterminated"},
    {"tru", 0, NULL},
    {"-", 0, NULL},
    {"1.", 0, NULL},
    {"1e", 0, NULL},
    {"1e+", 0, NULL},
    {".5", 0, NULL},
    {"+1", 0, NULL},
    {"NaN", 0, NULL},
    {"Infinity", 0, NULL},
    {"1e999", 0, "range"},
    {"'a'", 0, NULL},
    {"{a: 1}", 0, "string key"},
    {"{\"a\" 1}", 0, "':'"},
    {"{\"a\": 1 \"b\": 2}", 0, NULL},
    {"[1 2]", 0, NULL},
    {"\"\\x\"", 0, "escape"},
    {"\"\\u12G4\"", 0, "escape"},
    {"\"\\u12\"", 0, "escape"},
    {"", 0, "empty"},
    {" \n\t ", 0, "empty"},
    {"nul", 0, NULL},
    {"[,1]", 0, NULL},
    {"{,}", 0, NULL},
    /* The structure pass counts members up to where the document breaks
     * off; the value pass must still report the real error there. */
    {"[1, [", 0, "end of input"},
    {"[1, [2, [3]], [", 0, "end of input"},
    {"[}", 0, "unexpected '}'"},
    {"{\"a\": [}", 0, "unexpected '}'"},
    {"[\"a\", \"b", 0, "unterminated"},
    {"{\"a\": 1, \"b", 0, "unterminated"},
};

START_TEST(test_reject)
{
    const struct bad_case *c = &bad_cases[_i];
    size_t len = c->len ? c->len : strlen(c->text);
    coli__json_doc *doc = (coli__json_doc *)&doc; /* must be reset to NULL */
    coli__err err = {{0}};
    coli_status st = coli__json_parse(c->text, len, "bad.json", &doc, &err);
    ck_assert_msg(st == COLI_EFORMAT, "case %d (%s): status %d", _i, c->text, st);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strncmp(err.msg, "bad.json: line ", 15) == 0, "case %d: message '%s'", _i, err.msg);
    if (c->expect != NULL)
        ck_assert_msg(strstr(err.msg, c->expect) != NULL, "case %d (%s): message '%s' lacks '%s'", _i,
                      c->text, err.msg, c->expect);
}
END_TEST

START_TEST(test_error_position)
{
    const char *text = "{\n  \"a\": 1,\n  \"b\": [1, 2,]\n}";
    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse(text, strlen(text), "pos.json", &doc, &err), COLI_EFORMAT);
    /* The ']' after the trailing comma is line 3, column 14. */
    ck_assert_str_eq(err.msg, "pos.json: line 3, column 14: trailing comma in array");

    text = "[\"ok\",\n \"\xC3\xA9\xFF\"]";
    ck_assert_int_eq(coli__json_parse(text, strlen(text), "pos.json", &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "pos.json: line 2, column 5: invalid UTF-8 byte 0xFF"));
}
END_TEST

START_TEST(test_parse_file)
{
    char path[] = "/tmp/colijsonXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "{\"hidden_size\": 64, \"rope_theta\": 10000.0}\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);

    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse_file(path, &doc, &err), COLI_OK);
    ck_assert_int_eq(coli__json_get_int(coli__json_root(doc), "hidden_size", 0), 64);
    ck_assert(coli__json_get_num(coli__json_root(doc), "rope_theta", 0) == 10000.0);
    coli__json_free(doc);

    /* Parse errors name the file. */
    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{\"a\":}", 6), 6);
    close(fd);
    doc = NULL;
    ck_assert_int_eq(coli__json_parse_file(path, &doc, &err), COLI_EFORMAT);
    ck_assert_ptr_null(doc);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    ck_assert_ptr_nonnull(strstr(err.msg, "line 1, column 6"));
    unlink(path);

    ck_assert_int_eq(coli__json_parse_file(path, &doc, &err), COLI_ENOENT);
    ck_assert_ptr_null(doc);
    ck_assert_ptr_nonnull(strstr(err.msg, path));

    /* A directory is not a readable JSON file. */
    ck_assert_int_eq(coli__json_parse_file("/", &doc, &err), COLI_EIO);
}
END_TEST

START_TEST(test_null_args)
{
    coli__json_doc *doc = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__json_parse("1", 1, NULL, NULL, &err), COLI_EINVAL);
    ck_assert_int_eq(coli__json_parse(NULL, 3, "x", &doc, &err), COLI_EINVAL);
    /* A NULL err is allowed: the status still says what happened. */
    ck_assert_int_eq(coli__json_parse("[", 1, "x", &doc, NULL), COLI_EFORMAT);
    ck_assert_ptr_null(coli__json_root(NULL));
    coli__json_free(NULL);
}
END_TEST

START_TEST(test_err_helpers)
{
    coli__err err;
    ck_assert_int_eq(coli__fail(&err, COLI_ERANGE, "%s=%d", "k", 5), COLI_ERANGE);
    ck_assert_str_eq(err.msg, "k=5");
    coli__err_clear(&err);
    ck_assert_str_eq(err.msg, "");
    ck_assert_int_eq(coli__fail(NULL, COLI_EIO, "x"), COLI_EIO);
    coli__err_clear(NULL);
    /* Long messages are truncated, not overflowed. */
    char big[COLI_ERRMSG_MAX * 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    coli__fail(&err, COLI_EIO, "%s", big);
    ck_assert_uint_eq(strlen(err.msg), COLI_ERRMSG_MAX - 1);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_types);
    tcase_add_test(tc, test_scalar_roots);
    tcase_add_test(tc, test_accessors);
    tcase_add_test(tc, test_escapes);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_numbers_locale);
    tcase_add_test(tc, test_duplicate_keys);
    tcase_add_test(tc, test_nested);
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_large);
    tcase_add_test(tc, test_mem_bound);
    tcase_add_test(tc, test_mem_refused);
    tcase_add_test(tc, test_file_limit);
    tcase_add_loop_test(tc, test_reject, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_error_position);
    tcase_add_test(tc, test_parse_file);
    tcase_add_test(tc, test_null_args);
    tcase_add_test(tc, test_err_helpers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(json_suite());
}
