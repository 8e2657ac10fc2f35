/*
 * test_api.c - the public API, seen from a client.
 *
 * Every expectation here comes from the header's contract or from the
 * fixture files themselves (config.json and the safetensors header are read
 * by hand below), never from the library's own internals.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define PROMPT_TEXT "In the beginning God created the heaven and the earth."

/* ---- helpers -------------------------------------------------------------- */

static char *fixture_dir(const char *name)
{
    char *p = tu_path(tu_data_dir(), name);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* The integer value of the first "key": N (or "key": [N, ...]) in json. */
static int json_int(const char *json, const char *key, long *out)
{
    char pat[128];
    const char *p;
    char *end;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p++ != ':')
        return -1;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '[')
        p++;
    *out = strtol(p, &end, 10);
    return end == p ? -1 : 0;
}

/* 1 if "key": true, 0 if "key": false, -1 if absent or something else. */
static int json_bool(const char *json, const char *key)
{
    char pat[128];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ':')
        p++;
    if (strncmp(p, "true", 4) == 0)
        return 1;
    if (strncmp(p, "false", 5) == 0)
        return 0;
    return -1;
}

/* All integers of "key": N or "key": [N, M, ...]; returns how many (max cap). */
static int json_ints(const char *json, const char *key, long *out, int cap)
{
    char pat[128];
    const char *p;
    char *end;
    int n = 0;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return 0;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ':')
        p++;
    if (*p != '[') {
        long v = strtol(p, &end, 10);
        if (end == p)
            return 0;
        out[0] = v;
        return 1;
    }
    p++;
    while (n < cap) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',')
            p++;
        if (*p == ']')
            break;
        out[n] = strtol(p, &end, 10);
        if (end == p)
            break;
        n++;
        p = end;
    }
    return n;
}

/* The first string of "key": ["..."] (or "key": "...") into buf. */
static int json_first_string(const char *json, const char *key, char *buf, size_t cap)
{
    char pat[128];
    const char *p, *q;

    snprintf(pat, sizeof pat, "\"%s\"", key);
    p = strstr(json, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    while (*p != '\0' && *p != '"')
        p++;
    if (*p != '"')
        return -1;
    q = strchr(p + 1, '"');
    if (q == NULL || (size_t)(q - p - 1) >= cap)
        return -1;
    memcpy(buf, p + 1, (size_t)(q - p - 1));
    buf[q - p - 1] = '\0';
    return 0;
}

/* Sum over the tensors of a safetensors file of the product of their shapes. */
static int64_t safetensors_params(const char *path)
{
    size_t n = 0;
    unsigned char *data = (unsigned char *)tu_read_file(path, &n);
    uint64_t hlen = 0;
    int64_t total = 0;
    char *header, *p;
    int i;

    ck_assert_ptr_nonnull(data);
    ck_assert_uint_ge(n, 8);
    for (i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    ck_assert_uint_le(hlen, n - 8);
    header = malloc(hlen + 1);
    ck_assert_ptr_nonnull(header);
    memcpy(header, data + 8, hlen);
    header[hlen] = '\0';
    for (p = strstr(header, "\"shape\""); p != NULL; p = strstr(p + 1, "\"shape\"")) {
        int64_t prod = 1;
        char *q = strchr(p, '[');
        ck_assert_ptr_nonnull(q);
        q++;
        for (;;) {
            char *end;
            long long v;
            while (*q == ' ' || *q == ',')
                q++;
            if (*q == ']')
                break;
            v = strtoll(q, &end, 10);
            ck_assert_ptr_ne(end, q);
            prod *= v;
            q = end;
        }
        total += prod;
    }
    free(header);
    free(data);
    return total;
}

/* The fixture model and a context on it, for the tests that need them. */
static coli_model *g_model;
static coli_context *g_ctx;
static coli_model_info g_info;
static int32_t g_prompt[256];
static size_t g_n_prompt;

static void open_fixture(void)
{
    char *dir = fixture_dir("qwen3_moe");
    coli_status st = coli_model_open(dir, NULL, &g_model);

    ck_assert_msg(st == COLI_OK, "opening %s: %s: %s", dir, coli_strerror(st),
                  g_model ? coli_model_errmsg(g_model) : "");
    free(dir);
    memset(&g_info, 0, sizeof g_info);
    g_info.struct_size = sizeof g_info;
    ck_assert_int_eq(coli_model_get_info(g_model, &g_info), COLI_OK);
    ck_assert_int_eq(coli_context_create(g_model, NULL, &g_ctx), COLI_OK);
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, strlen(PROMPT_TEXT), 1, g_prompt,
                                   sizeof g_prompt / sizeof g_prompt[0], &g_n_prompt),
                     COLI_OK);
    ck_assert_uint_ge(g_n_prompt, 4);
}

static void close_fixture(void)
{
    coli_context_free(g_ctx);
    coli_model_free(g_model);
    g_ctx = NULL;
    g_model = NULL;
}

/* ---- version, status, features --------------------------------------------- */

START_TEST(test_version)
{
    char buf[64];

    ck_assert_int_eq(COLI_VERSION_NUMBER,
                     COLI_VERSION_MAJOR * 10000 + COLI_VERSION_MINOR * 100 + COLI_VERSION_PATCH);
    snprintf(buf, sizeof buf, "%d.%d.%d", COLI_VERSION_MAJOR, COLI_VERSION_MINOR,
             COLI_VERSION_PATCH);
    ck_assert_str_eq(buf, COLI_VERSION_STRING);
    ck_assert_uint_eq(coli_version_number(), COLI_VERSION_NUMBER);
    ck_assert_ptr_nonnull(coli_version_string());
    ck_assert_str_eq(coli_version_string(), COLI_VERSION_STRING);
#ifdef PACKAGE_VERSION
    ck_assert_str_eq(COLI_VERSION_STRING, PACKAGE_VERSION);
#endif
}
END_TEST

static const struct {
    int value;
    const char *name;
    const char *message;
} k_statuses[] = {
#define ROW_(name, val, msg) {val, "COLI_" #name, msg},
    COLI_STATUS_MAP(ROW_)
#undef ROW_
};
#define N_STATUSES ((int)(sizeof k_statuses / sizeof k_statuses[0]))

START_TEST(test_status_strings)
{
    int i, j;

    ck_assert_int_eq(N_STATUSES, 12);
    ck_assert_int_eq(COLI_OK, 0);
    for (i = 0; i < N_STATUSES; i++) {
        const char *s = coli_strerror(k_statuses[i].value);
        const char *name = coli_status_name(k_statuses[i].value);

        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_nonnull(name);
        ck_assert_uint_gt(strlen(s), 0);
        ck_assert_str_eq(s, k_statuses[i].message);
        ck_assert_str_eq(name, k_statuses[i].name);
        if (k_statuses[i].value != 0)
            ck_assert_int_lt(k_statuses[i].value, 0);
        ck_assert_int_ge(k_statuses[i].value, COLI_STATUS_MIN_);
        for (j = 0; j < i; j++) {
            ck_assert_int_ne(k_statuses[i].value, k_statuses[j].value);
            ck_assert_str_ne(s, coli_strerror(k_statuses[j].value));
            ck_assert_str_ne(name, coli_status_name(k_statuses[j].value));
        }
    }
}
END_TEST

START_TEST(test_status_unknown)
{
    static const int unknown[] = {1, 42, -12, -1000, COLI_STATUS_MIN_ - 1, 2147483647,
                                  -2147483647 - 1};
    size_t u;
    int i;

    for (u = 0; u < sizeof unknown / sizeof unknown[0]; u++) {
        const char *s = coli_strerror(unknown[u]);
        const char *name = coli_status_name(unknown[u]);

        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_nonnull(name);
        ck_assert_uint_gt(strlen(s), 0);
        ck_assert_uint_gt(strlen(name), 0);
        for (i = 0; i < N_STATUSES; i++) {
            ck_assert_str_ne(s, k_statuses[i].message);
            ck_assert_str_ne(name, k_statuses[i].name);
        }
    }
    /* One generic string, whatever the unknown value. */
    ck_assert_str_eq(coli_strerror(1), coli_strerror(-1000));
}
END_TEST

START_TEST(test_features)
{
    int gpu = coli_has_feature(COLI_FEATURE_GPU);
    int cuda = coli_has_feature(COLI_FEATURE_CUDA);
    int hip = coli_has_feature(COLI_FEATURE_HIP);

    ck_assert(gpu == 0 || gpu == 1);
    ck_assert(cuda == 0 || cuda == 1);
    ck_assert(hip == 0 || hip == 1);
    ck_assert_int_eq(gpu, cuda || hip);
    ck_assert_int_eq(coli_has_feature(COLI_FEATURE_THREADS), 1);
    ck_assert_int_eq(coli_has_feature((coli_feature)0), 0);
    ck_assert_int_eq(coli_has_feature((coli_feature)999), 0);
}
END_TEST

/* ---- options ---------------------------------------------------------------- */

START_TEST(test_options_defaults)
{
    coli_options *o = NULL;
    int64_t v = -1;

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_WEIGHTS, &v), COLI_OK);
    ck_assert_int_eq(v, COLI_WEIGHTS_AUTO);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_THREADS, &v), COLI_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_CONTEXT, &v), COLI_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_MEM_BUDGET_MB, &v), COLI_OK);
    ck_assert_int_eq(v, 0);
    coli_options_free(o);
}
END_TEST

START_TEST(test_options_set_get_bounds)
{
    static const coli_option all[] = {COLI_OPT_WEIGHTS, COLI_OPT_THREADS, COLI_OPT_CONTEXT,
                                      COLI_OPT_MEM_BUDGET_MB};
    coli_options *o = NULL;
    int64_t min, max, v;
    size_t i;

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        min = 1;
        max = 0;
        ck_assert_int_eq(coli_option_bounds(all[i], &min, &max), COLI_OK);
        ck_assert_int_le(min, max);
        /* 0 is the documented default of every option, so it is in range. */
        ck_assert_int_le(min, 0);
        ck_assert_int_ge(max, 0);

        ck_assert_int_eq(coli_options_set(o, all[i], min), COLI_OK);
        ck_assert_int_eq(coli_options_get(o, all[i], &v), COLI_OK);
        ck_assert_int_eq(v, min);
        ck_assert_int_eq(coli_options_set(o, all[i], max), COLI_OK);
        ck_assert_int_eq(coli_options_get(o, all[i], &v), COLI_OK);
        ck_assert_int_eq(v, max);
        if (max < INT64_MAX)
            ck_assert_int_eq(coli_options_set(o, all[i], max + 1), COLI_ERANGE);
        if (min > INT64_MIN)
            ck_assert_int_eq(coli_options_set(o, all[i], min - 1), COLI_ERANGE);
        ck_assert_int_eq(coli_options_set(o, all[i], INT64_MIN), COLI_ERANGE);
        /* A refused value leaves the option as it was. */
        ck_assert_int_eq(coli_options_get(o, all[i], &v), COLI_OK);
        ck_assert_int_eq(v, max);
    }
    ck_assert_int_eq(coli_option_bounds(COLI_OPT_WEIGHTS, &min, &max), COLI_OK);
    ck_assert_int_eq(min, COLI_WEIGHTS_AUTO);
    ck_assert_int_eq(max, COLI_WEIGHTS_Q2);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, COLI_WEIGHTS_F32), COLI_OK);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_WEIGHTS, &v), COLI_OK);
    ck_assert_int_eq(v, COLI_WEIGHTS_F32);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, -1), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, -1), COLI_ERANGE);
    /* q4 group: 32 by default, and only 32, 64 or 128 */
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_Q4_GROUP, &v), COLI_OK);
    ck_assert_int_eq(v, 32);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_Q4_GROUP, 64), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_Q4_GROUP, 128), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_Q4_GROUP, 48), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_Q4_GROUP, 256), COLI_ERANGE);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_Q4_GROUP, &v), COLI_OK);
    ck_assert_int_eq(v, 128);
    coli_options_free(o);
}
END_TEST

START_TEST(test_options_invalid)
{
    coli_options *o = NULL;
    int64_t v = 7, min, max;

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, (coli_option)0, 1), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set(o, (coli_option)99, 1), COLI_EINVAL);
    ck_assert_int_eq(coli_options_get(o, (coli_option)99, &v), COLI_EINVAL);
    ck_assert_int_eq(coli_option_bounds((coli_option)99, &min, &max), COLI_EINVAL);
    ck_assert_int_eq(coli_option_bounds((coli_option)-1, &min, &max), COLI_EINVAL);

    ck_assert_int_eq(coli_options_create(NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set(NULL, COLI_OPT_THREADS, 1), COLI_EINVAL);
    ck_assert_int_eq(coli_options_get(NULL, COLI_OPT_THREADS, &v), COLI_EINVAL);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_THREADS, NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set_log(NULL, NULL, NULL, COLI_LOG_ERROR), COLI_EINVAL);
    coli_options_free(o);
}
END_TEST

START_TEST(test_free_null)
{
    coli_options_free(NULL);
    coli_model_free(NULL);
    coli_context_free(NULL);
    coli_sampler_free(NULL);
}
END_TEST

/* ---- opening models ----------------------------------------------------------- */

START_TEST(test_open_missing)
{
    char *tmp = tu_mkdtemp();
    char *missing;
    coli_model *m = NULL;
    coli_context *c = NULL;
    coli_model_info info;
    int32_t ids[8];
    size_t n = 0;
    coli_status st;

    ck_assert_ptr_nonnull(tmp);
    missing = tu_path(tmp, "no-such-model");
    st = coli_model_open(missing, NULL, &m);
    ck_assert_int_eq(st, COLI_ENOENT);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(coli_model_errmsg(m));
    ck_assert_msg(strstr(coli_model_errmsg(m), missing) != NULL,
                  "errmsg '%s' does not name '%s'", coli_model_errmsg(m), missing);

    /* A failed handle refuses everything else. */
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_ESTATE);
    ck_assert_ptr_null(c);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_ESTATE);
    ck_assert_int_eq(coli_tokenize(m, "a", 1, 0, ids, 8, &n), COLI_ESTATE);
    ck_assert_int_eq(coli_model_is_eos(m, 0), 0);
    coli_model_free(m);

    /* An existing directory without config.json names the file. */
    m = NULL;
    st = coli_model_open(tmp, NULL, &m);
    ck_assert_int_eq(st, COLI_ENOENT);
    ck_assert_ptr_nonnull(m);
    ck_assert_msg(strstr(coli_model_errmsg(m), "config.json") != NULL,
                  "errmsg '%s' does not name config.json", coli_model_errmsg(m));
    coli_model_free(m);

    /* Bad arguments. */
    m = NULL;
    ck_assert_int_eq(coli_model_open(NULL, NULL, &m), COLI_EINVAL);
    coli_model_free(m);
    ck_assert_int_eq(coli_model_open(tmp, NULL, NULL), COLI_EINVAL);

    free(missing);
    tu_rmtree(tmp);
    free(tmp);
}
END_TEST

typedef struct log_capture {
    int n[4];
    int n_other;
    char first_error[512];
} log_capture;

static void capture_log(void *user, coli_log_level level, const char *message)
{
    log_capture *cap = user;

    ck_assert_ptr_nonnull(message);
    if ((unsigned)level < 4)
        cap->n[level]++;
    else
        cap->n_other++;
    if (level == COLI_LOG_ERROR && cap->first_error[0] == '\0')
        snprintf(cap->first_error, sizeof cap->first_error, "%s", message);
}

START_TEST(test_log_callback)
{
    char *tmp = tu_mkdtemp();
    char *missing = tu_path(tmp, "absent");
    coli_options *o = NULL;
    coli_model *m = NULL;
    log_capture cap;

    memset(&cap, 0, sizeof cap);
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set_log(o, capture_log, &cap, COLI_LOG_DEBUG), COLI_OK);
    ck_assert_int_eq(coli_model_open(missing, o, &m), COLI_ENOENT);
    ck_assert_int_ge(cap.n[COLI_LOG_ERROR], 1);
    ck_assert_int_eq(cap.n_other, 0);
    coli_model_free(m);

    /* max_level ERROR filters the rest out. */
    memset(&cap, 0, sizeof cap);
    ck_assert_int_eq(coli_options_set_log(o, capture_log, &cap, COLI_LOG_ERROR), COLI_OK);
    m = NULL;
    ck_assert_int_eq(coli_model_open(missing, o, &m), COLI_ENOENT);
    ck_assert_int_ge(cap.n[COLI_LOG_ERROR], 1);
    ck_assert_int_eq(cap.n[COLI_LOG_WARN] + cap.n[COLI_LOG_INFO] + cap.n[COLI_LOG_DEBUG], 0);
    coli_model_free(m);

    coli_options_free(o);
    free(missing);
    tu_rmtree(tmp);
    free(tmp);
}
END_TEST

/* The library never prints: run a whole session, failures included, with
 * stdout and stderr redirected to a file, and find the file empty. */
START_TEST(test_silent)
{
    char *tmp = tu_mkdtemp();
    char *capture = tu_path(tmp, "output");
    char *missing = tu_path(tmp, "absent");
    char *dir = fixture_dir("qwen3_moe");
    coli_model *m = NULL, *bad = NULL;
    coli_context *c = NULL;
    coli_sampler *s = NULL;
    coli_sampler_params sp;
    int32_t ids[64], out[4];
    int32_t bogus = 999999999;
    size_t n = 0, n_out = 0;
    int fd, saved1, saved2;
    struct stat sb;

    fflush(stdout);
    fflush(stderr);
    fd = open(capture, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    saved1 = dup(1);
    saved2 = dup(2);
    ck_assert_int_ge(saved1, 0);
    ck_assert_int_ge(saved2, 0);
    dup2(fd, 1);
    dup2(fd, 2);

    (void)coli_model_open(missing, NULL, &bad);
    (void)coli_model_open(dir, NULL, &m);
    (void)coli_tokenize(m, PROMPT_TEXT, strlen(PROMPT_TEXT), 1, ids, 64, &n);
    (void)coli_context_create(m, NULL, &c);
    (void)coli_eval(c, &bogus, 1);
    coli_sampler_params_init(&sp, sizeof sp);
    (void)coli_sampler_create(&sp, &s);
    (void)tu_generate(c, ids, n, 4, s, NULL, NULL, out, 4, &n_out);
    coli_sampler_free(s);
    coli_context_free(c);
    coli_model_free(m);
    coli_model_free(bad);

    fflush(stdout);
    fflush(stderr);
    dup2(saved1, 1);
    dup2(saved2, 2);
    close(saved1);
    close(saved2);
    close(fd);
    ck_assert_int_eq(stat(capture, &sb), 0);
    ck_assert_msg(sb.st_size == 0, "the library wrote %lld bytes to stdout/stderr",
                  (long long)sb.st_size);
    ck_assert_uint_gt(n_out, 0);

    free(dir);
    free(missing);
    free(capture);
    tu_rmtree(tmp);
    free(tmp);
}
END_TEST

/* ---- model info ------------------------------------------------------------------- */

START_TEST(test_info_matches_config)
{
    char *dir = fixture_dir("qwen3_moe");
    char *cfg_path = tu_path(dir, "config.json");
    char *st_path = tu_path(dir, "model.safetensors");
    char *gen_path = tu_path(dir, "generation_config.json");
    char *cfg = tu_read_file(cfg_path, NULL);
    char *gen = tu_read_file(gen_path, NULL);
    long layers, hidden, heads, kv, vocab, experts, active, inter, maxpos, head_dim, step = 1;
    long mlp_only[64], eos[8], bos;
    int n_mlp_only, n_eos, i, moe_layers = 0;
    int64_t params, untouched_embed = 0;
    char arch[128];

    ck_assert_ptr_nonnull(cfg);
    ck_assert_ptr_nonnull(gen);
    ck_assert_int_eq(json_int(cfg, "num_hidden_layers", &layers), 0);
    ck_assert_int_eq(json_int(cfg, "hidden_size", &hidden), 0);
    ck_assert_int_eq(json_int(cfg, "num_attention_heads", &heads), 0);
    ck_assert_int_eq(json_int(cfg, "num_key_value_heads", &kv), 0);
    ck_assert_int_eq(json_int(cfg, "vocab_size", &vocab), 0);
    /* transformers 5 writes num_local_experts where older files had num_experts. */
    if (json_int(cfg, "num_experts", &experts) != 0)
        ck_assert_int_eq(json_int(cfg, "num_local_experts", &experts), 0);
    ck_assert_int_eq(json_int(cfg, "num_experts_per_tok", &active), 0);
    ck_assert_int_eq(json_int(cfg, "moe_intermediate_size", &inter), 0);
    ck_assert_int_eq(json_int(cfg, "max_position_embeddings", &maxpos), 0);
    if (json_int(cfg, "head_dim", &head_dim) != 0)
        head_dim = hidden / heads;
    (void)json_int(cfg, "decoder_sparse_step", &step);
    n_mlp_only = json_ints(cfg, "mlp_only_layers", mlp_only, 64);
    for (i = 0; i < layers; i++) {
        int j, dense = step <= 0 || (i + 1) % step != 0;
        for (j = 0; j < n_mlp_only; j++)
            if (mlp_only[j] == i)
                dense = 1;
        moe_layers += !dense;
    }
    ck_assert_int_eq(json_first_string(cfg, "architectures", arch, sizeof arch), 0);

    open_fixture();
    ck_assert_ptr_nonnull(g_info.architecture);
    ck_assert_str_eq(g_info.architecture, arch);
    ck_assert_int_eq(g_info.n_layers, layers);
    ck_assert_int_eq(g_info.n_moe_layers, moe_layers);
    ck_assert_int_eq(g_info.hidden_size, hidden);
    ck_assert_int_eq(g_info.n_heads, heads);
    ck_assert_int_eq(g_info.n_kv_heads, kv);
    ck_assert_int_eq(g_info.head_dim, head_dim);
    ck_assert_int_eq(g_info.vocab_size, vocab);
    ck_assert_int_eq(g_info.n_experts, experts);
    ck_assert_int_eq(g_info.n_experts_active, active);
    ck_assert_int_eq(g_info.moe_intermediate_size, inter);
    ck_assert_int_eq(g_info.max_positions, maxpos);

    /* Parameters: what the checkpoint stores. Those touched per token leave
     * out the experts a token does not use (gate, up and down of each) and,
     * unless the embedding doubles as the output layer, all embedding rows
     * but one. */
    params = safetensors_params(st_path);
    ck_assert_int_eq(g_info.n_params_total, params);
    if (json_bool(cfg, "tie_word_embeddings") != 1)
        untouched_embed = (int64_t)(vocab - 1) * hidden;
    ck_assert_int_eq(g_info.n_params_active,
                     params - (int64_t)(experts - active) * 3 * hidden * inter * moe_layers -
                         untouched_embed);

    /* End-of-sequence and beginning ids. */
    if (json_int(cfg, "bos_token_id", &bos) == 0)
        ck_assert_int_eq(g_info.bos_id, bos);
    n_eos = json_ints(cfg, "eos_token_id", eos, 8);
    ck_assert_int_ge(n_eos, 1);
    for (i = 0; i < n_eos; i++)
        ck_assert_int_eq(coli_model_is_eos(g_model, (int32_t)eos[i]), 1);
    n_eos = json_ints(gen, "eos_token_id", eos, 8);
    for (i = 0; i < n_eos; i++)
        ck_assert_int_eq(coli_model_is_eos(g_model, (int32_t)eos[i]), 1);
    ck_assert_int_eq(coli_model_is_eos(g_model, g_info.eos_id), 1);
    ck_assert_int_eq(coli_model_is_eos(g_model, -1), 0);
    ck_assert_int_eq(coli_model_is_eos(g_model, (int32_t)vocab + 5), 0);

    /* The weight format is resolved, and the bytes are plausible. */
    ck_assert_int_ne(g_info.weights, COLI_WEIGHTS_AUTO);
    ck_assert_ptr_nonnull(g_info.weights_name);
    ck_assert_uint_ge(g_info.weight_bytes, 2 * (uint64_t)params);
    ck_assert_uint_le(g_info.weight_bytes, 4 * (uint64_t)params);

    close_fixture();
    free(cfg);
    free(gen);
    free(cfg_path);
    free(st_path);
    free(gen_path);
    free(dir);
}
END_TEST

START_TEST(test_info_f32)
{
    char *dir = fixture_dir("qwen3_moe");
    coli_options *o = NULL;
    coli_model *m = NULL;
    coli_model_info info;

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, COLI_WEIGHTS_F32), COLI_OK);
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    ck_assert_int_eq(info.weights, COLI_WEIGHTS_F32);
    ck_assert_str_eq(info.weights_name, "f32");
    ck_assert_uint_eq(info.weight_bytes, 4 * (uint64_t)info.n_params_total);

    /* Bytes per format: f32 is 4 bytes a parameter; the fixture is stored in
     * bf16, so "as stored" equals bf16, and the loaded f32 size is what
     * weight_bytes reports. bf16 lies between half and all of f32 (norms stay
     * f32), and the same holds for the bytes read per token. */
    uint64_t f32_t = 0, f32_a = 0, bf_t = 0, bf_a = 0, st_t = 0, st_a = 0;
    ck_assert_int_eq(coli_model_weight_bytes(m, COLI_WEIGHTS_F32, &f32_t, &f32_a), COLI_OK);
    ck_assert_int_eq(coli_model_weight_bytes(m, COLI_WEIGHTS_BF16, &bf_t, &bf_a), COLI_OK);
    ck_assert_int_eq(coli_model_weight_bytes(m, COLI_WEIGHTS_AUTO, &st_t, &st_a), COLI_OK);
    ck_assert_uint_eq(f32_t, 4 * (uint64_t)info.n_params_total);
    ck_assert_uint_eq(f32_a, 4 * (uint64_t)info.n_params_active);
    ck_assert_uint_eq(f32_t, info.weight_bytes);
    ck_assert_uint_eq(st_t, bf_t);
    ck_assert_uint_eq(st_a, bf_a);
    ck_assert(bf_t > f32_t / 2 && bf_t < f32_t);
    ck_assert(bf_a > f32_a / 2 && bf_a < f32_a && bf_a < bf_t);
    ck_assert_int_eq(coli_model_weight_bytes(m, (coli_weight_format)99, &bf_t, NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_model_weight_bytes(NULL, COLI_WEIGHTS_F32, &bf_t, NULL), COLI_EINVAL);

    ck_assert_int_eq(coli_model_get_info(m, NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_model_get_info(NULL, &info), COLI_EINVAL);

    coli_model_free(m);
    coli_options_free(o);
    free(dir);
}
END_TEST

/* ---- tokenizer --------------------------------------------------------------------- */

START_TEST(test_tokenize_enospc)
{
    int32_t small[2], big[256];
    size_t need = 0, n = 0;

    open_fixture();
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, strlen(PROMPT_TEXT), 0, small, 2, &need),
                     COLI_ENOSPC);
    ck_assert_uint_gt(need, 2);
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, strlen(PROMPT_TEXT), 0, big, need, &n),
                     COLI_OK);
    ck_assert_uint_eq(n, need);
    /* The short buffer got the first ids. */
    ck_assert_int_eq(small[0], big[0]);
    ck_assert_int_eq(small[1], big[1]);
    /* Counting only. */
    n = 0;
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, strlen(PROMPT_TEXT), 0, NULL, 0, &n),
                     COLI_ENOSPC);
    ck_assert_uint_eq(n, need);
    /* len is honoured: only the first word. */
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, 2, 0, big, 256, &n), COLI_OK);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, 2);
    /* Empty text without special tokens gives no ids. */
    ck_assert_int_eq(coli_tokenize(g_model, "", 0, 0, big, 256, &n), COLI_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(coli_tokenize(g_model, NULL, 3, 0, big, 256, &n), COLI_EINVAL);
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, 3, 0, big, 256, NULL), COLI_EINVAL);
    close_fixture();
}
END_TEST

START_TEST(test_detokenize_round_trip)
{
    static const char *const texts[] = {
        PROMPT_TEXT, "a", "  two  spaces", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", "line\nbreak\t!",
    };
    int32_t ids[256];
    char buf[512], tiny[4];
    size_t n = 0, len = 0, need = 0, t;

    open_fixture();
    for (t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        ck_assert_int_eq(coli_tokenize(g_model, texts[t], strlen(texts[t]), 0, ids, 256, &n),
                         COLI_OK);
        ck_assert_int_eq(coli_detokenize(g_model, ids, n, 0, buf, sizeof buf, &len), COLI_OK);
        ck_assert_uint_eq(len, strlen(texts[t]));
        ck_assert_str_eq(buf, texts[t]);
    }
    /* Too small: ENOSPC with the full length. */
    ck_assert_int_eq(coli_tokenize(g_model, PROMPT_TEXT, strlen(PROMPT_TEXT), 0, ids, 256, &n),
                     COLI_OK);
    ck_assert_int_eq(coli_detokenize(g_model, ids, n, 0, tiny, sizeof tiny, &need), COLI_ENOSPC);
    ck_assert_uint_eq(need, strlen(PROMPT_TEXT));
    ck_assert_int_eq(coli_detokenize(g_model, ids, n, 0, NULL, 0, &need), COLI_ENOSPC);
    ck_assert_uint_eq(need, strlen(PROMPT_TEXT));
    /* Like snprintf: the text needs room for its NUL too; a short buffer
     * still gets a terminated prefix. */
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(coli_detokenize(g_model, ids, n, 0, buf, need, &len), COLI_ENOSPC);
    ck_assert_int_eq(buf[need - 1], '\0');
    ck_assert_int_eq(memcmp(buf, PROMPT_TEXT, need - 1), 0);
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(coli_detokenize(g_model, ids, n, 0, buf, need + 1, &len), COLI_OK);
    ck_assert_str_eq(buf, PROMPT_TEXT);
    /* Nothing to decode. */
    ck_assert_int_eq(coli_detokenize(g_model, ids, 0, 0, buf, sizeof buf, &len), COLI_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(buf, "");
    /* An id outside the vocabulary. */
    ids[0] = g_info.vocab_size + 100;
    ck_assert_int_eq(coli_detokenize(g_model, ids, 1, 0, buf, sizeof buf, &len), COLI_EINVAL);
    close_fixture();
}
END_TEST

/* ---- sampling ---------------------------------------------------------------------- */

static int32_t sample_once(const coli_sampler_params *sp, const coli_context *c)
{
    coli_sampler *s = NULL;
    int32_t tok = -1;

    ck_assert_int_eq(coli_sampler_create(sp, &s), COLI_OK);
    ck_assert_int_eq(coli_sample(s, c, &tok), COLI_OK);
    coli_sampler_free(s);
    return tok;
}

START_TEST(test_sampler_greedy_and_degenerate)
{
    coli_sampler_params sp;
    const float *logits;
    int best;
    uint64_t seed;

    open_fixture();
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, g_n_prompt), COLI_OK);
    logits = coli_context_logits(g_ctx);
    ck_assert_ptr_nonnull(logits);
    best = tu_argmax(logits, g_info.vocab_size);

    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_float_le(sp.temperature, 0);
    ck_assert_int_le(sp.top_k, 0);
    ck_assert_float_ge(sp.top_p, 1);
    ck_assert_uint_eq(sp.seed, 0);
    ck_assert_int_eq(sample_once(&sp, g_ctx), best);

    for (seed = 1; seed <= 8; seed++) {
        coli_sampler_params_init(&sp, sizeof sp);
        sp.temperature = 1.0f;
        sp.top_k = 1;
        sp.seed = seed;
        ck_assert_int_eq(sample_once(&sp, g_ctx), best);

        coli_sampler_params_init(&sp, sizeof sp);
        sp.temperature = 1.0f;
        sp.top_p = 1e-6f;
        sp.seed = seed;
        ck_assert_int_eq(sample_once(&sp, g_ctx), best);
    }
    close_fixture();
}
END_TEST

static void sample_sequence(uint64_t seed, const coli_context *c, int32_t *seq, int n)
{
    coli_sampler_params sp;
    coli_sampler *s = NULL;
    int i;

    coli_sampler_params_init(&sp, sizeof sp);
    sp.temperature = 10.0f; /* flat enough to make draws differ */
    sp.seed = seed;
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
    for (i = 0; i < n; i++)
        ck_assert_int_eq(coli_sample(s, c, &seq[i]), COLI_OK);
    coli_sampler_free(s);
}

START_TEST(test_sampler_seeds)
{
    int32_t a[32], b[32], c[32];
    int i, vocab;

    open_fixture();
    vocab = g_info.vocab_size;
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, g_n_prompt), COLI_OK);
    sample_sequence(1234, g_ctx, a, 32);
    sample_sequence(1234, g_ctx, b, 32);
    sample_sequence(98765, g_ctx, c, 32);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert_int_ne(memcmp(a, c, sizeof a), 0);
    for (i = 0; i < 32; i++) {
        ck_assert_int_ge(a[i], 0);
        ck_assert_int_lt(a[i], vocab);
    }
    close_fixture();
}
END_TEST

START_TEST(test_sampler_invalid)
{
    coli_sampler_params sp;
    coli_sampler *s = NULL;
    coli_context *fresh = NULL;
    int32_t tok;

    open_fixture();
    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_int_eq(coli_sampler_create(&sp, NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
    /* No logits before any eval. */
    ck_assert_int_eq(coli_context_create(g_model, NULL, &fresh), COLI_OK);
    ck_assert_ptr_null(coli_context_logits(fresh));
    ck_assert_int_ne(coli_sample(s, fresh, &tok), COLI_OK);
    ck_assert_int_eq(coli_sample(NULL, g_ctx, &tok), COLI_EINVAL);
    ck_assert_int_eq(coli_sample(s, NULL, &tok), COLI_EINVAL);
    coli_context_free(fresh);
    coli_sampler_free(s);
    close_fixture();
}
END_TEST

/* ---- context ----------------------------------------------------------------------- */

START_TEST(test_context_positions_truncate)
{
    size_t n, v;
    float *first, *second;
    const float *l;
    float lo, hi, worst = 0;

    open_fixture();
    n = g_n_prompt;
    v = (size_t)g_info.vocab_size;
    first = malloc(v * sizeof *first);
    second = malloc(v * sizeof *second);
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_nonnull(second);

    ck_assert_uint_eq(coli_context_position(g_ctx), 0);
    ck_assert_uint_gt(coli_context_capacity(g_ctx), n);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, n), COLI_OK);
    ck_assert_uint_eq(coli_context_position(g_ctx), n);
    l = coli_context_logits(g_ctx);
    ck_assert_ptr_nonnull(l);
    memcpy(first, l, v * sizeof *first);

    /* Back to 0 and again: bitwise the same. */
    ck_assert_int_eq(coli_context_truncate(g_ctx, 0), COLI_OK);
    ck_assert_uint_eq(coli_context_position(g_ctx), 0);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, n), COLI_OK);
    ck_assert_mem_eq(coli_context_logits(g_ctx), first, v * sizeof *first);

    /* Forget the last two positions and redo them: the KV cache of the
     * first n-2 is reused; equal up to the rounding of another batch size. */
    ck_assert_int_eq(coli_context_truncate(g_ctx, n - 2), COLI_OK);
    ck_assert_uint_eq(coli_context_position(g_ctx), n - 2);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt + n - 2, 1), COLI_OK);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt + n - 1, 1), COLI_OK);
    ck_assert_uint_eq(coli_context_position(g_ctx), n);
    memcpy(second, coli_context_logits(g_ctx), v * sizeof *second);
    lo = hi = first[0];
    for (size_t i = 0; i < v; i++) {
        float d = fabsf(first[i] - second[i]);
        if (first[i] < lo)
            lo = first[i];
        if (first[i] > hi)
            hi = first[i];
        if (d > worst)
            worst = d;
    }
    ck_assert_msg(worst <= 1e-4f * (hi - lo), "decode after truncate differs by %g (range %g)",
                  (double)worst, (double)(hi - lo));

    /* Truncating forward is refused; reset empties the context. */
    ck_assert_int_ne(coli_context_truncate(g_ctx, n + 1), COLI_OK);
    ck_assert_uint_eq(coli_context_position(g_ctx), n);
    coli_context_reset(g_ctx);
    ck_assert_uint_eq(coli_context_position(g_ctx), 0);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, n), COLI_OK);
    ck_assert_mem_eq(coli_context_logits(g_ctx), first, v * sizeof *first);

    free(first);
    free(second);
    close_fixture();
}
END_TEST

START_TEST(test_context_capacity)
{
    coli_options *o = NULL;
    coli_context *c = NULL;
    int32_t one;

    open_fixture();
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 8), COLI_OK);
    ck_assert_int_eq(coli_context_create(g_model, o, &c), COLI_OK);
    ck_assert_uint_eq(coli_context_capacity(c), 8);
    ck_assert_uint_ge(g_n_prompt, 4);

    /* Too many at once: refused, nothing changes. */
    if (g_n_prompt > 8) {
        ck_assert_int_eq(coli_eval(c, g_prompt, g_n_prompt), COLI_ENOSPC);
        ck_assert_uint_eq(coli_context_position(c), 0);
    }
    ck_assert_int_eq(coli_eval(c, g_prompt, 4), COLI_OK);
    ck_assert_int_eq(coli_eval(c, g_prompt, 4), COLI_OK);
    ck_assert_uint_eq(coli_context_position(c), 8);
    one = g_prompt[0];
    ck_assert_int_eq(coli_eval(c, &one, 1), COLI_ENOSPC);
    ck_assert_uint_eq(coli_context_position(c), 8);
    ck_assert_ptr_nonnull(coli_context_errmsg(c));
    /* The numbers a caller needs (asked, used, size, free), not the name of
     * the function: coli_generate fails the same way. */
    const char *full = coli_context_errmsg(c);
    ck_assert_msg(strstr(full, "1 tokens asked for at position 8") && strstr(full, "8 positions") &&
                      strstr(full, "(0 free)") && !strstr(full, "coli_eval"),
                  "%s", full);

    /* Room again after a truncate. */
    ck_assert_int_eq(coli_context_truncate(c, 7), COLI_OK);
    ck_assert_int_eq(coli_eval(c, &one, 1), COLI_OK);

    coli_context_free(c);
    coli_options_free(o);
    close_fixture();
}
END_TEST

START_TEST(test_context_bad_token)
{
    int32_t bad[2];
    char want[32];

    open_fixture();
    bad[0] = g_prompt[0];
    bad[1] = g_info.vocab_size; /* one past the last id */
    ck_assert_int_eq(coli_eval(g_ctx, bad, 2), COLI_EINVAL);
    snprintf(want, sizeof want, "%d", g_info.vocab_size);
    ck_assert_msg(strstr(coli_context_errmsg(g_ctx), want) != NULL,
                  "errmsg '%s' does not name id %s", coli_context_errmsg(g_ctx), want);
    ck_assert_uint_eq(coli_context_position(g_ctx), 0);

    bad[1] = -5;
    ck_assert_int_eq(coli_eval(g_ctx, bad, 2), COLI_EINVAL);
    ck_assert_msg(strstr(coli_context_errmsg(g_ctx), "-5") != NULL,
                  "errmsg '%s' does not name id -5", coli_context_errmsg(g_ctx));
    ck_assert_uint_eq(coli_context_position(g_ctx), 0);

    ck_assert_int_eq(coli_eval(g_ctx, NULL, 2), COLI_EINVAL);
    ck_assert_int_eq(coli_eval(NULL, bad, 1), COLI_EINVAL);
    /* Still usable. */
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, g_n_prompt), COLI_OK);
    close_fixture();
}
END_TEST

/* ---- generation and statistics ---------------------------------------------------- */

typedef struct counter {
    int calls;
    int stop_after;
    int32_t tokens[64];
} counter;

static int count_tokens(void *user, int32_t token, const char *text, size_t len)
{
    counter *c = user;

    ck_assert(text != NULL || len == 0);
    if (c->calls < 64)
        c->tokens[c->calls] = token;
    c->calls++;
    return c->stop_after > 0 && c->calls >= c->stop_after;
}

START_TEST(test_generate_stop_and_greedy)
{
    coli_sampler_params sp;
    coli_sampler *s = NULL;
    counter cnt;
    int32_t out[16], manual[16];
    size_t n_out = 0, i, n_manual = 0;

    open_fixture();
    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);

    /* Stopping from the callback is not an error. */
    memset(&cnt, 0, sizeof cnt);
    cnt.stop_after = 3;
    ck_assert_int_eq(tu_generate(g_ctx, g_prompt, g_n_prompt, 10, s, count_tokens, &cnt, out,
                                   16, &n_out),
                     COLI_OK);
    ck_assert_uint_eq(n_out, 3);
    ck_assert_int_eq(cnt.calls, 3);
    ck_assert_mem_eq(cnt.tokens, out, 3 * sizeof out[0]);

    /* Greedy generation equals argmax, eval, argmax, ... by hand. */
    coli_context_reset(g_ctx);
    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, g_n_prompt), COLI_OK);
    while (n_manual < 8) {
        int32_t t = tu_argmax(coli_context_logits(g_ctx), g_info.vocab_size);
        manual[n_manual++] = t;
        if (coli_model_is_eos(g_model, t))
            break;
        ck_assert_int_eq(coli_eval(g_ctx, &t, 1), COLI_OK);
    }
    coli_context_reset(g_ctx);
    memset(&cnt, 0, sizeof cnt);
    ck_assert_int_eq(tu_generate(g_ctx, g_prompt, g_n_prompt, 8, s, count_tokens, &cnt, out, 16,
                                   &n_out),
                     COLI_OK);
    ck_assert_uint_eq(n_out, n_manual);
    ck_assert_int_eq(cnt.calls, (int)n_out);
    for (i = 0; i < n_out; i++)
        ck_assert_int_eq(out[i], manual[i]);

    /* out may be NULL; n_out still counts. */
    coli_context_reset(g_ctx);
    ck_assert_int_eq(tu_generate(g_ctx, g_prompt, g_n_prompt, 4, s, NULL, NULL, NULL, 0, &n_out),
                     COLI_OK);
    ck_assert_uint_ge(n_out, 1);
    ck_assert_uint_le(n_out, 4);

    coli_sampler_free(s);
    close_fixture();
}
END_TEST

START_TEST(test_stats)
{
    coli_stats st = {.struct_size = sizeof(coli_stats)};
    coli_sampler_params sp;
    coli_sampler *s = NULL;
    int32_t out[8], t;
    size_t n_out = 0;

    open_fixture();
    memset(&st, 0xff, sizeof st);
    st.struct_size = sizeof st;
    ck_assert_int_eq(coli_context_stats(g_ctx, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, 0);
    ck_assert_uint_eq(st.decode_tokens, 0);
    ck_assert(st.prefill_tok_s == 0);

    ck_assert_int_eq(coli_eval(g_ctx, g_prompt, g_n_prompt), COLI_OK);
    t = g_prompt[0];
    ck_assert_int_eq(coli_eval(g_ctx, &t, 1), COLI_OK);
    ck_assert_int_eq(coli_eval(g_ctx, &t, 1), COLI_OK);
    ck_assert_int_eq(coli_context_stats(g_ctx, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, g_n_prompt);
    ck_assert_uint_eq(st.decode_tokens, 2);
    ck_assert(st.prefill_seconds > 0 && st.decode_seconds > 0);
    ck_assert(st.prefill_tok_s > 0 && st.decode_tok_s > 0);
    ck_assert(fabs(st.prefill_tok_s * st.prefill_seconds - (double)g_n_prompt) <
              1e-6 * (double)g_n_prompt + 1e-9);

    coli_context_stats_reset(g_ctx);
    ck_assert_int_eq(coli_context_stats(g_ctx, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, 0);
    ck_assert_uint_eq(st.decode_tokens, 0);

    /* A generation: the prompt is prefilled, the tokens decoded (the last one
     * needs no evaluation, nor does an end-of-sequence token). */
    coli_context_reset(g_ctx);
    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
    ck_assert_int_eq(tu_generate(g_ctx, g_prompt, g_n_prompt, 8, s, NULL, NULL, out, 8, &n_out),
                     COLI_OK);
    ck_assert_int_eq(coli_context_stats(g_ctx, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, g_n_prompt);
    ck_assert_uint_le(st.decode_tokens, n_out);
    ck_assert_uint_ge(st.decode_tokens + 1, n_out);
    ck_assert_int_eq(coli_context_stats(NULL, &st), COLI_EINVAL);
    ck_assert_int_eq(coli_context_stats(g_ctx, NULL), COLI_EINVAL);
    st.struct_size = 0;
    ck_assert_int_eq(coli_context_stats(g_ctx, &st), COLI_EINVAL);

    /* Versioned output structs: a caller built with an older, shorter
     * struct gets only its bytes written, and its struct_size is kept. */
    size_t short_stats = offsetof(coli_stats, decode_tokens);
    unsigned char raw[sizeof(coli_stats) + 16];
    memset(raw, 0xa5, sizeof raw);
    memcpy(raw, &short_stats, sizeof short_stats);
    ck_assert_int_eq(coli_context_stats(g_ctx, (coli_stats *)(void *)raw), COLI_OK);
    ck_assert_uint_eq(((coli_stats *)(void *)raw)->struct_size, short_stats);
    ck_assert_uint_eq(((coli_stats *)(void *)raw)->prefill_tokens, g_n_prompt);
    for (size_t i = short_stats; i < sizeof raw; i++)
        ck_assert_uint_eq(raw[i], 0xa5);
    size_t short_info = offsetof(coli_model_info, n_moe_layers);
    unsigned char iraw[sizeof(coli_model_info) + 16];
    memset(iraw, 0xa5, sizeof iraw);
    memcpy(iraw, &short_info, sizeof short_info);
    ck_assert_int_eq(coli_model_get_info(g_model, (coli_model_info *)(void *)iraw), COLI_OK);
    ck_assert_uint_eq(((coli_model_info *)(void *)iraw)->struct_size, short_info);
    ck_assert_str_eq(((coli_model_info *)(void *)iraw)->architecture, g_info.architecture);
    for (size_t i = short_info; i < sizeof iraw; i++)
        ck_assert_uint_eq(iraw[i], 0xa5);
    /* a newer caller's longer struct: the bytes past ours are untouched */
    size_t long_stats = sizeof(coli_stats) + 16;
    memset(raw, 0xa5, sizeof raw);
    memcpy(raw, &long_stats, sizeof long_stats);
    ck_assert_int_eq(coli_context_stats(g_ctx, (coli_stats *)(void *)raw), COLI_OK);
    ck_assert_uint_eq(((coli_stats *)(void *)raw)->struct_size, long_stats);
    ck_assert_uint_eq(((coli_stats *)(void *)raw)->prefill_tokens, g_n_prompt);
    for (size_t i = sizeof(coli_stats); i < sizeof raw; i++)
        ck_assert_uint_eq(raw[i], 0xa5);
    coli_sampler_free(s);
    close_fixture();
}
END_TEST

/* ---- main ------------------------------------------------------------------------- */

/* The bytes the forward pass counts while decoding equal the bytes per token
 * that coli_model_weight_bytes derives from the matrix list, for a tied
 * (mixtral), a sharded (olmoe) and a partly dense (qwen3_moe) model, in
 * stored and quantized formats: two independent tallies of one quantity. */
START_TEST(test_decode_bytes_match_estimate)
{
    static const char *const dirs[] = {"qwen3_moe", "olmoe", "mixtral"};
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_AUTO, COLI_WEIGHTS_Q4};
    char *dir = fixture_dir(dirs[_i % 3]);
    coli_options *o = NULL;
    coli_model *m = NULL;
    coli_context *c = NULL;
    coli_stats st = {.struct_size = sizeof(coli_stats)};
    uint64_t total = 0, active = 0;
    int32_t ids[5] = {1, 2, 3, 4, 5};

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmts[_i / 3]), COLI_OK);
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
    ck_assert_int_eq(coli_model_weight_bytes(m, fmts[_i / 3], &total, &active), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(coli_eval(c, &ids[i], 1), COLI_OK);
    ck_assert_int_eq(coli_context_stats(c, &st), COLI_OK);
    ck_assert_uint_eq(st.decode_tokens, 5);
    ck_assert_uint_eq(st.decode_weight_bytes, 5 * active);
    ck_assert_uint_lt(active, total);
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
    free(dir);
}
END_TEST

/* The default context is the model's whole max_position_embeddings (once
 * capped at 4096), its KV cache is counted in coli_model_info and
 * coli_stats, and a context beyond the model is refused, naming it. */
START_TEST(test_context_default_full_length)
{
    char *src = fixture_dir("qwen3_moe"), *dir = tu_mkdtemp();
    coli_options *o = NULL;
    coli_model *m = NULL;
    coli_context *c = NULL;
    coli_model_info info = {.struct_size = sizeof info};
    coli_stats st = {.struct_size = sizeof st};
    int32_t ids[3] = {1, 2, 3};

    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"max_position_embeddings\": 512",
                                        "\"max_position_embeddings\": 40960"), 0);
    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_OK);
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    ck_assert_int_eq(info.max_positions, 40960);
    uint64_t per_pos = 2u * (uint64_t)info.n_layers * (uint64_t)info.n_kv_heads * (uint64_t)info.head_dim * 4u;
    ck_assert_uint_eq(info.kv_bytes_per_position, per_pos);
    ck_assert_int_eq(info.context_positions, 40960);
    ck_assert_uint_eq(info.kv_bytes, per_pos * 40960);

    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    ck_assert_uint_eq(coli_context_capacity(c), 40960);
    ck_assert_int_eq(coli_eval(c, ids, 3), COLI_OK);
    ck_assert_int_eq(coli_context_stats(c, &st), COLI_OK);
    ck_assert_uint_eq(st.context_positions, 40960);
    ck_assert_uint_eq(st.context_used, 3);
    ck_assert_uint_eq(st.kv_bytes, per_pos * 40960);
    coli_context_free(c);
    c = NULL;

    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 40961), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_ERANGE);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "max_position_embeddings (40960)"));
    coli_options_free(o);
    coli_model_free(m);
    tu_rmtree(dir);
    free(dir);
    free(src);
}
END_TEST

/* ---- streamed text ---------------------------------------------------------------- */

typedef struct stream_buf {
    char text[8192];
    size_t len;
} stream_buf;

static int collect(void *user, int32_t token, const char *text, size_t len)
{
    stream_buf *b = user;
    (void)token;
    ck_assert_uint_lt(b->len + len, sizeof b->text);
    memcpy(b->text + b->len, text, len);
    b->len += len;
    return 0;
}

/* The text streamed by coli_generate, concatenated, equals what
 * coli_detokenize makes of prompt + output minus what it makes of the prompt
 * alone: with Metaspace spaces (mixtral) and byte-fallback tokens, which
 * high-temperature sampling produces, and with byte-level BPE (qwen3). */
START_TEST(test_generate_stream_matches_detokenize)
{
    static const char *const dirs[] = {"mixtral", "qwen3_moe"};
    char *dir = fixture_dir(dirs[_i / 6]);
    coli_model *m = NULL;
    coli_context *c = NULL;
    coli_sampler *sm = NULL;
    coli_sampler_params sp;
    int32_t prompt[64], out[48], all[112];
    size_t np = 0, nout = 0, lp = 0, la = 0;
    static char tp[16384], ta[16384];
    stream_buf sb = {{0}, 0};

    ck_assert_int_eq(coli_model_open(dir, NULL, &m), COLI_OK);
    ck_assert_int_eq(coli_tokenize(m, "And the earth was", 17, 1, prompt, 64, &np), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    coli_sampler_params_init(&sp, sizeof sp);
    sp.temperature = 3.0f; /* wild sampling: many byte-fallback tokens */
    sp.seed = (uint64_t)(_i % 6) + 1;
    ck_assert_int_eq(coli_sampler_create(&sp, &sm), COLI_OK);
    ck_assert_int_eq(tu_generate(c, prompt, np, 48, sm, collect, &sb, out, 48, &nout), COLI_OK);
    memcpy(all, prompt, np * sizeof *all);
    memcpy(all + np, out, nout * sizeof *all);
    ck_assert_int_eq(coli_detokenize(m, prompt, np, 1, tp, sizeof tp, &lp), COLI_OK);
    ck_assert_int_eq(coli_detokenize(m, all, np + nout, 1, ta, sizeof ta, &la), COLI_OK);
    ck_assert_uint_ge(la, lp);
    ck_assert_int_eq(memcmp(ta, tp, lp), 0);
    ck_assert_msg(sb.len == la - lp && memcmp(sb.text, ta + lp, sb.len) == 0,
                  "%s seed %d: streamed %zu bytes '%.*s', expected %zu bytes '%.*s'", dirs[_i / 6], _i % 6 + 1,
                  sb.len, (int)sb.len, sb.text, la - lp, (int)(la - lp), ta + lp);
    coli_sampler_free(sm);
    coli_context_free(c);
    coli_model_free(m);
    free(dir);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *basic = tcase_create("basic");
    TCase *model = tcase_create("model");

    tcase_add_test(basic, test_version);
    tcase_add_test(basic, test_status_strings);
    tcase_add_test(basic, test_status_unknown);
    tcase_add_test(basic, test_features);
    tcase_add_test(basic, test_options_defaults);
    tcase_add_test(basic, test_options_set_get_bounds);
    tcase_add_test(basic, test_options_invalid);
    tcase_add_test(basic, test_free_null);
    tcase_add_test(basic, test_open_missing);
    tcase_add_test(basic, test_log_callback);
    suite_add_tcase(s, basic);

    tcase_set_timeout(model, 120);
    tcase_add_test(model, test_silent);
    tcase_add_test(model, test_info_matches_config);
    tcase_add_test(model, test_info_f32);
    tcase_add_test(model, test_tokenize_enospc);
    tcase_add_test(model, test_detokenize_round_trip);
    tcase_add_test(model, test_sampler_greedy_and_degenerate);
    tcase_add_test(model, test_sampler_seeds);
    tcase_add_test(model, test_sampler_invalid);
    tcase_add_test(model, test_context_positions_truncate);
    tcase_add_test(model, test_context_capacity);
    tcase_add_test(model, test_context_bad_token);
    tcase_add_test(model, test_generate_stop_and_greedy);
    tcase_add_test(model, test_stats);
    tcase_add_test(model, test_context_default_full_length);
    tcase_add_loop_test(model, test_generate_stream_matches_detokenize, 0, 12);
    tcase_add_loop_test(model, test_decode_bytes_match_estimate, 0, 6);
    suite_add_tcase(s, model);
    return s;
}

int main(void)
{
    return tu_run_suite(api_suite());
}
