/* test_store.c - converted models (coli_convert, docs/container.md) and the
 * expert store.
 *
 * The independent expectation is the checkpoint itself: a converted model
 * must give the logits of the checkpoint loaded in the same format, bit for
 * bit, whether it is mapped or streamed through 10 %, 50 % or all of its
 * experts' worth of slots, with prefetch on or off, with a hot set, from two
 * threads at once. Then every damage the format guards against (docs/
 * container.md, "What is checked") must be an error naming the file and the
 * part at fault, and an I/O failure mid-generation must stop it without a
 * wrong token. */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri/colibri.h"
#include "io/crc32c.h"
#include "model/model.h"
#include "store/store.h"
#include "testutil.h"

#define STEPS 6 /* greedy tokens after the prompt */

/* the last is the trained demo model (tied embeddings, 4 MoE layers) */
static const char *const fixtures[] = {"qwen3_moe", "olmoe", "mixtral", "../../data/demo", "glm4_moe", "deepseek_v3",
                                       "deepseek_v3_lite", "glm_moe_dsa"};
static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16};
static const char *const fmt_names[] = {"q8", "q4", "q2", "bf16"};

typedef struct run {
    float *logits; /* (1 + STEPS) * vocab */
    int32_t tokens[STEPS];
    size_t vocab, n_prompt;
    int top_k;
    coli_store_stats ss;
} run;

typedef struct conf {
    coli_weight_format fmt; /* AUTO for a converted model */
    int64_t slots, budget_mb;
    int prefetch, hotset;
} conf;

static coli_options *options(const conf *c)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, c->fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, 2), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_EXPERT_SLOTS, c->slots), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MEM_BUDGET_MB, c->budget_mb), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_PREFETCH, c->prefetch), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_HOTSET, c->hotset), COLI_OK);
    return o;
}

/* The prompt is prefilled in one call (several tokens: the store's batch
 * path), then STEPS greedy tokens one at a time (decode and lookahead). */
static void eval_all(coli_model *m, run *r)
{
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    r->vocab = (size_t)info.vocab_size;
    r->top_k = info.n_experts_active;
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    const char *text = "In the beginning God created the heaven and the earth.";
    int32_t ids[64];
    size_t n = 0;
    ck_assert_int_eq(coli_tokenize(m, text, strlen(text), 1, ids, 64, &n), COLI_OK);
    r->n_prompt = n;
    r->logits = malloc((1 + STEPS) * r->vocab * sizeof(float));
    ck_assert_ptr_nonnull(r->logits);
    ck_assert_msg(tu_greedy(c, ids, n, STEPS, (int)r->vocab, r->logits, r->tokens) == 0, "%s",
                  coli_context_errmsg(c));
    coli_context_free(c);
}

static void one_run(const char *dir, const conf *cf, run *r)
{
    memset(r, 0, sizeof *r);
    coli_options *o = options(cf);
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    eval_all(m, r);
    r->ss.struct_size = sizeof r->ss;
    ck_assert_int_eq(coli_model_store_stats(m, &r->ss), COLI_OK);
    coli_model_free(m);
    coli_options_free(o);
}

static void compare(const run *a, const run *b, const char *what)
{
    ck_assert_uint_eq(a->vocab, b->vocab);
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(a->tokens[s] == b->tokens[s], "%s: greedy token %d: %d vs %d", what, s, a->tokens[s],
                      b->tokens[s]);
    ck_assert_msg(memcmp(a->logits, b->logits, (1 + STEPS) * a->vocab * sizeof(float)) == 0,
                  "%s: logits differ from the checkpoint's", what);
}

static char *convert(const char *src, const char *out, coli_weight_format fmt)
{
    coli_convert_params p;
    coli_convert_params_init(&p, sizeof p);
    p.weights = fmt;
    p.threads = 3;
    char err[512];
    coli_status st = coli_convert(src, out, &p, err, sizeof err);
    ck_assert_msg(st == COLI_OK, "convert %s: %s", src, err);
    return tu_path(out, "model.coli");
}

static char *fixture(int i)
{
    return tu_path(tu_data_dir(), fixtures[i]);
}

/* ---- the layout of model.coli, read here without the library ---------- */

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The bitwise CRC-32C definition (not the library's tables or instruction). */
static uint32_t crc_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

/* Recomputes the head's checksum after a test edited the head. */
static void reseal(uint8_t *f)
{
    uint32_t head = get32(f + 12);
    memset(f + 124, 0, 4);
    put32(f + 124, crc_ref(f, head));
}

START_TEST(test_crc32c)
{
    /* the check value of CRC-32C ("123456789") and the library's fast paths
     * against the bitwise definition at every length and alignment */
    ck_assert_uint_eq(coli__crc32c(0, "123456789", 9), 0xe3069283u);
    uint8_t buf[600];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 37)
            ck_assert_uint_eq(coli__crc32c(0, buf + off, n), crc_ref(buf + off, n));
    /* continuing a checksum equals one pass */
    ck_assert_uint_eq(coli__crc32c(coli__crc32c(0, buf, 100), buf + 100, 400), coli__crc32c(0, buf, 500));
}
END_TEST

/* The layout docs/container.md promises, checked from the bytes. */
START_TEST(test_layout)
{
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    char *path = convert(src, out, COLI_WEIGHTS_Q4);
    size_t n = 0;
    uint8_t *f = (uint8_t *)tu_read_file(path, &n);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(memcmp(f, "COLI\r\n\x1a\n", 8), 0);
    ck_assert_uint_eq(get32(f + 8), 1);
    ck_assert_uint_eq(get64(f + 40), n);
    ck_assert_uint_eq(get32(f + 16), COLI_WEIGHTS_Q4);
    ck_assert_uint_eq(get32(f + 20), 32);
    ck_assert_uint_eq(get32(f + 24), 3); /* layers */
    ck_assert_uint_eq(get32(f + 28), 8); /* experts */
    ck_assert_uint_eq(get32(f + 32), 2); /* MoE layers (mlp_only_layers [1]) */
    uint32_t head = get32(f + 12);
    uint8_t *copy = malloc(head);
    memcpy(copy, f, head);
    memset(copy + 124, 0, 4);
    ck_assert_uint_eq(get32(f + 124), crc_ref(copy, head));
    free(copy);
    uint64_t tab = get64(f + 64), rec0 = get64(f + 88), dense = get64(f + 72);
    ck_assert_uint_eq(dense % 4096, 0);
    ck_assert_uint_eq(rec0 % 4096, 0);
    for (int r = 0; r < 16; r++) {
        const uint8_t *e = f + tab + 16 * (size_t)r;
        uint64_t off = get64(e);
        uint32_t bytes = get32(e + 8);
        ck_assert_uint_eq(off % 4096, 0);
        ck_assert_uint_ge(off, rec0);
        ck_assert_uint_le(off + bytes, n);
        ck_assert_uint_eq(get32(e + 12), crc_ref(f + off, bytes));
        /* padding is zeros up to the next 4096 */
        for (uint64_t i = off + bytes; i % 4096; i++)
            ck_assert_uint_eq(f[i], 0);
    }
    /* the tensors of the directory carry their checksums */
    uint64_t dir = get64(f + 48);
    uint32_t nt = get32(f + 36);
    ck_assert_uint_gt(nt, 10);
    for (uint32_t i = 0; i < nt; i++) {
        const uint8_t *d = f + dir + 128 * (size_t)i;
        ck_assert_uint_eq(get64(d + 88) % 64, 0);
        ck_assert_uint_eq(get32(d + 104), crc_ref(f + get64(d + 88), get64(d + 96)));
    }
    /* the companion files came along */
    char *cfg = tu_path(out, "config.json"), *tok = tu_path(out, "tokenizer.json");
    ck_assert_int_eq(access(cfg, R_OK), 0);
    ck_assert_int_eq(access(tok, R_OK), 0);
    free(cfg);
    free(tok);
    free(f);
    free(path);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* Placement never changes a token: every fixture and format, mapped and
 * streamed at 10 %, 50 % and 100 % of the experts, prefetch on and off. */
START_TEST(test_bits_every_budget)
{
    int fx = _i / 4, fi = _i % 4;
    char *tmp = tu_mkdtemp(), *src = fixture(fx), *out = tu_path(tmp, "out");
    free(convert(src, out, fmts[fi]));
    run ref, r;
    conf c0 = {fmts[fi], 0, 0, 1, 0};
    one_run(src, &c0, &ref);
    ck_assert_int_eq(ref.ss.mode, COLI_STORE_RESIDENT);
    /* mapped; 10 % of the experts (at least one token's), 50 %, all */
    const int64_t all = (int64_t)ref.ss.experts;
    const int64_t slots[] = {0, all / 10 > ref.top_k ? all / 10 : ref.top_k, all / 2, all};
    for (int k = 0; k < 4; k++)
        for (int pf = 0; pf <= 1; pf++) {
            conf c = {COLI_WEIGHTS_AUTO, slots[k], 0, pf, 0};
            one_run(out, &c, &r);
            char what[256];
            snprintf(what, sizeof what, "%s %s, %lld slots, prefetch %d", fixtures[fx], fmt_names[fi],
                     (long long)slots[k], pf);
            compare(&r, &ref, what);
            if (slots[k] == 0) {
                ck_assert_int_eq(r.ss.mode, COLI_STORE_MAPPED);
                ck_assert_uint_eq(r.ss.disk_reads, 0);
            } else {
                ck_assert_int_eq(r.ss.mode, COLI_STORE_STREAMED);
                ck_assert_uint_eq(r.ss.slots, (uint64_t)slots[k]);
                ck_assert_uint_gt(r.ss.misses, 0);
                ck_assert_uint_eq(r.ss.hits + r.ss.misses, r.ss.gets);
                /* every record read is either a demand read or a read ahead */
                ck_assert_uint_ge(r.ss.disk_reads, r.ss.misses);
                if (!pf)
                    ck_assert_uint_eq(r.ss.prefetch_reads, 0);
                if (slots[k] == all && !pf) /* all fit: each expert read once at most */
                    ck_assert_uint_le(r.ss.disk_reads, (uint64_t)all);
                if (k == 1)
                    ck_assert_uint_gt(r.ss.evictions, 0);
            }
            /* each routed pair of every position is one get: decode tokens
             * route top_k per MoE layer, the prompt at least one per layer */
            ck_assert_uint_ge(r.ss.gets, (uint64_t)STEPS * (uint64_t)ref.top_k * 2);
            free(r.logits);
        }
    free(ref.logits);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* Routing counts are kept in model.coli.hot; the next open pins the hot
 * set, which changes nothing but where experts are. */
START_TEST(test_hot_set)
{
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    free(convert(src, out, COLI_WEIGHTS_Q8));
    run ref, a, b;
    conf c0 = {COLI_WEIGHTS_Q8, 0, 0, 1, 0};
    one_run(src, &c0, &ref);
    char *hot = tu_path(out, "model.coli.hot");
    conf c = {COLI_WEIGHTS_AUTO, 8, 0, 1, 1};
    one_run(out, &c, &a);
    ck_assert_uint_eq(a.ss.hot_pinned, 0);
    size_t n = 0;
    uint8_t *h = (uint8_t *)tu_read_file(hot, &n);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(n, 16 + 8 * 3 * 8 + 4);
    ck_assert_int_eq(memcmp(h, "COLIHOT1", 8), 0);
    uint64_t sum = 0;
    for (int i = 0; i < 24; i++)
        sum += get64(h + 16 + 8 * i);
    /* every routed pair of the run: each position routes 2 experts in each
     * of the 2 MoE layers (the last greedy token is not evaluated) */
    ck_assert_uint_eq(sum, (a.n_prompt + STEPS) * 2 * 2);
    for (int i = 8; i < 16; i++) /* layer 1 is dense */
        ck_assert_uint_eq(get64(h + 16 + 8 * i), 0);
    one_run(out, &c, &b);
    ck_assert_uint_gt(b.ss.hot_pinned, 0);
    ck_assert_uint_le(b.ss.hot_pinned, 4);
    compare(&a, &ref, "qwen3_moe q8 streamed, counting");
    compare(&b, &ref, "qwen3_moe q8 streamed, hot set pinned");
    /* a damaged file is ignored (a warning), and rewritten */
    h[20] ^= 0xff;
    ck_assert_int_eq(tu_write_file(hot, h, n), 0);
    free(b.logits);
    one_run(out, &c, &b);
    ck_assert_uint_eq(b.ss.hot_pinned, 0);
    compare(&b, &ref, "qwen3_moe q8 streamed, damaged hot file");
    free(h);
    free(hot);
    free(ref.logits);
    free(a.logits);
    free(b.logits);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* Two contexts on one model whose store holds only one token's experts:
 * neither may wait while holding a slot the other needs. */
typedef struct thr {
    coli_model *m;
    run r;
} thr;

static void *thread_main(void *p)
{
    thr *t = p;
    eval_all(t->m, &t->r);
    return NULL;
}

START_TEST(test_two_contexts)
{
    char *tmp = tu_mkdtemp(), *src = fixture(1), *out = tu_path(tmp, "out");
    free(convert(src, out, COLI_WEIGHTS_Q4));
    run ref;
    conf c0 = {COLI_WEIGHTS_Q4, 0, 0, 1, 0};
    one_run(src, &c0, &ref);
    conf c = {COLI_WEIGHTS_AUTO, 2, 0, 1, 0};
    coli_options *o = options(&c);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(out, o, &m), COLI_OK);
    thr a = {m, {0}}, b = {m, {0}};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, thread_main, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, thread_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    compare(&a.r, &ref, "olmoe q4, 2 slots, first of two contexts");
    compare(&b.r, &ref, "olmoe q4, 2 slots, second of two contexts");
    free(a.r.logits);
    free(b.r.logits);
    free(ref.logits);
    coli_model_free(m);
    coli_options_free(o);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* ---- damage ------------------------------------------------------------ */

static char g_log[4096];

static void log_fn(void *user, coli_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", msg);
}

/* Opens dir (converted) with the given slots; the status, and the message
 * in msg. */
static coli_status try_open(const char *dir, int64_t slots, char *msg, size_t cap, coli_model **keep)
{
    conf c = {COLI_WEIGHTS_AUTO, slots, 0, 0, 0};
    coli_options *o = options(&c);
    g_log[0] = 0;
    coli_options_set_log(o, log_fn, NULL, COLI_LOG_WARN);
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    snprintf(msg, cap, "%s", coli_model_errmsg(m));
    if (keep && st == COLI_OK)
        *keep = m;
    else
        coli_model_free(m);
    coli_options_free(o);
    return st;
}

typedef void (*damage_fn)(uint8_t *f, size_t *n);

static void d_truncate(uint8_t *f, size_t *n)
{
    (void)f;
    *n -= 4096;
}
static void d_magic(uint8_t *f, size_t *n)
{
    (void)n;
    f[1] ^= 1;
}
static void d_version(uint8_t *f, size_t *n)
{
    (void)n;
    put32(f + 8, 2);
    reseal(f);
}
static void d_head(uint8_t *f, size_t *n)
{
    (void)n;
    f[get64(f + 48) + 3] ^= 1; /* a letter of the first tensor's name */
}
static void d_range(uint8_t *f, size_t *n)
{
    /* record 5 (layer 0 expert 5) moved past the end */
    put64(f + get64(f + 64) + 16 * 5, (*n + 4096) / 4096 * 4096);
    reseal(f);
}
static void d_dense(uint8_t *f, size_t *n)
{
    (void)n;
    f[get64(f + 72) + 100] ^= 0x10;
}

START_TEST(test_damage_at_open)
{
    static const struct {
        damage_fn fn;
        coli_status st;
        const char *says;
    } cases[] = {
        {d_truncate, COLI_EFORMAT, "truncated"},
        {d_magic, COLI_EFORMAT, "bad magic"},
        {d_version, COLI_EUNSUPPORTED, "version 2"},
        {d_head, COLI_EFORMAT, "head's checksum"},
        {d_range, COLI_EFORMAT, "layer 0 expert 5"},
        {d_dense, COLI_EFORMAT, "checksum mismatch"},
    };
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    char *path = convert(src, out, COLI_WEIGHTS_Q4);
    size_t n0 = 0;
    uint8_t *orig = (uint8_t *)tu_read_file(path, &n0);
    ck_assert_ptr_nonnull(orig);
    uint8_t *f = malloc(n0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(f, orig, n0);
        size_t n = n0;
        cases[i].fn(f, &n);
        ck_assert_int_eq(tu_write_file(path, f, n), 0);
        char msg[1024];
        for (int slots = 0; slots <= 2; slots += 2) {
            coli_status st = try_open(out, slots, msg, sizeof msg, NULL);
            ck_assert_msg(st == cases[i].st, "case %zu: %s (%d)", i, msg, st);
            ck_assert_msg(strstr(msg, "model.coli") && strstr(msg, cases[i].says), "case %zu: '%s'", i, msg);
        }
    }
    /* a config.json that is not the converted one */
    ck_assert_int_eq(tu_write_file(path, orig, n0), 0);
    ck_assert_int_eq(tu_replace_in_file(out, "config.json", "{", "{ "), 0);
    char msg[1024];
    ck_assert_int_eq(try_open(out, 0, msg, sizeof msg, NULL), COLI_EFORMAT);
    ck_assert_msg(strstr(msg, "config.json"), "%s", msg);
    /* a budget that cannot hold one token's experts (2) */
    ck_assert_int_eq(tu_replace_in_file(out, "config.json", "{ ", "{"), 0);
    ck_assert_int_eq(try_open(out, 1, msg, sizeof msg, NULL), COLI_ERANGE);
    ck_assert_msg(strstr(msg, "COLI_OPT_EXPERT_SLOTS") && strstr(msg, "2 experts"), "%s", msg);
    /* the container's format, not another */
    conf c = {COLI_WEIGHTS_Q8, 0, 0, 0, 0};
    coli_options *o = options(&c);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(out, o, &m), COLI_EINVAL);
    ck_assert_msg(strstr(coli_model_errmsg(m), "q4 weights"), "%s", coli_model_errmsg(m));
    coli_model_free(m);
    coli_options_free(o);
    free(f);
    free(orig);
    free(path);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

typedef struct collect {
    int32_t t[64];
    size_t n;
} collect;

static int on_token(void *u, int32_t tok, const char *text, size_t len)
{
    (void)text;
    (void)len;
    collect *c = u;
    if (c->n < 64)
        c->t[c->n++] = tok;
    return 0;
}

/* Greedy generation of up to max (<= 64) tokens after prompt on a fresh
 * context of m, end-of-sequence ignored; the tokens reported to on_token
 * go to col, the error message (if any) to msg. */
static coli_status generate(coli_model *m, const int32_t *prompt, size_t n, size_t max, int32_t *out, size_t *n_out,
                            coli_stop_reason *why, collect *col, char *msg, size_t cap)
{
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    coli_sampler *s = NULL;
    coli_sampler_params sp;
    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
    coli_generate_params gp;
    coli_generate_params_init(&gp, sizeof gp);
    gp.max_tokens = max;
    gp.ignore_eos = 1;
    gp.on_token = on_token;
    gp.user = col;
    col->n = 0;
    *n_out = 99;
    coli_status st = coli_generate(c, prompt, n, s, &gp, out, max, n_out, why);
    snprintf(msg, cap, "%s", coli_context_errmsg(c));
    coli_sampler_free(s);
    coli_context_free(c);
    return st;
}

/* A damaged record is found when it is read (streamed) or first used
 * (mapped): the eval fails naming it, and no token comes out. */
START_TEST(test_damaged_record)
{
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    char *path = convert(src, out, COLI_WEIGHTS_Q4);
    size_t n = 0;
    uint8_t *f = (uint8_t *)tu_read_file(path, &n);
    uint64_t tab = get64(f + 64);
    for (int r = 8; r < 16; r++) /* every expert of layer 2 */
        f[get64(f + tab + 16 * (size_t)r) + 77] ^= 0x40;
    ck_assert_int_eq(tu_write_file(path, f, n), 0);
    for (int slots = 0; slots <= 2; slots += 2) {
        char msg[1024];
        coli_model *m = NULL;
        ck_assert_int_eq(try_open(out, slots, msg, sizeof msg, &m), COLI_OK);
        int32_t prompt[3] = {1, 2, 3}, outt[8];
        size_t n_out = 0;
        collect col;
        coli_stop_reason why = COLI_STOP_LENGTH;
        ck_assert_int_eq(generate(m, prompt, 3, 8, outt, &n_out, &why, &col, msg, sizeof msg), COLI_EFORMAT);
        ck_assert_uint_eq(n_out, 0);
        ck_assert_uint_eq(col.n, 0);
        ck_assert_int_eq(why, COLI_STOP_NONE);
        ck_assert_msg(strstr(msg, "model.coli: layer 2 expert") && strstr(msg, "checksum"), "%s", msg);
        coli_model_free(m);
    }
    free(f);
    free(path);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* COLI_IO_FAIL_AFTER: reads fail from the Nth on; generation stops with
 * the error, and every token it gave is the checkpoint's. */
START_TEST(test_io_failure)
{
    char *tmp = tu_mkdtemp(), *src = fixture(2), *out = tu_path(tmp, "out");
    free(convert(src, out, COLI_WEIGHTS_Q8));
    int32_t prompt[4] = {5, 17, 33, 2};
    int32_t ref[24];
    size_t n_ref = 0;
    char msg[1024];
    collect col;
    {
        conf c0 = {COLI_WEIGHTS_Q8, 0, 0, 0, 0};
        coli_options *o = options(&c0);
        coli_model *m = NULL;
        ck_assert_int_eq(coli_model_open(src, o, &m), COLI_OK);
        ck_assert_int_eq(generate(m, prompt, 4, 24, ref, &n_ref, NULL, &col, msg, sizeof msg), COLI_OK);
        ck_assert_uint_eq(n_ref, 24);
        coli_model_free(m);
        coli_options_free(o);
    }
    const char *after[] = {"0", "3", "9"};
    for (int k = 0; k < 3; k++) {
        setenv("COLI_IO_FAIL_AFTER", after[k], 1);
        coli_model *m = NULL;
        ck_assert_int_eq(try_open(out, 2, msg, sizeof msg, &m), COLI_OK);
        int32_t got[24];
        size_t n_got = 0;
        coli_stop_reason why = COLI_STOP_LENGTH;
        ck_assert_int_eq(generate(m, prompt, 4, 24, got, &n_got, &why, &col, msg, sizeof msg), COLI_EIO);
        ck_assert_int_eq(why, COLI_STOP_NONE);
        ck_assert_uint_lt(n_got, 24);
        ck_assert_uint_eq(col.n, n_got);
        for (size_t i = 0; i < n_got; i++)
            ck_assert_int_eq(got[i], ref[i]);
        ck_assert_msg(strstr(msg, "model.coli: layer") && strstr(msg, "COLI_IO_FAIL_AFTER"), "%s", msg);
        coli_model_free(m);
    }
    unsetenv("COLI_IO_FAIL_AFTER");
    setenv("COLI_IO_FAIL_AFTER", "x1", 1);
    ck_assert_int_eq(try_open(out, 2, msg, sizeof msg, NULL), COLI_EINVAL);
    ck_assert_msg(strstr(msg, "COLI_IO_FAIL_AFTER"), "%s", msg);
    unsetenv("COLI_IO_FAIL_AFTER");
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* ---- conversion's own errors -------------------------------------------- */

static int stop_at_once(void *u, uint64_t done, uint64_t total)
{
    (void)done;
    (void)total;
    ++*(int *)u;
    return 1;
}

START_TEST(test_convert_errors)
{
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    coli_convert_params p;
    coli_convert_params_init(&p, sizeof p);
    ck_assert_int_eq(p.weights, COLI_WEIGHTS_Q4);
    char err[512];
    p.weights = COLI_WEIGHTS_AUTO;
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_EINVAL);
    ck_assert_msg(strstr(err, "weights"), "%s", err);
    p.weights = COLI_WEIGHTS_Q4;
    p.q4_group = 48;
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_EINVAL);
    ck_assert_msg(strstr(err, "group"), "%s", err);
    p.q4_group = 32;
    ck_assert_int_eq(coli_convert(src, src, &p, err, sizeof err), COLI_EINVAL);
    char *missing = tu_path(tmp, "nowhere");
    ck_assert_int_eq(coli_convert(missing, out, &p, err, sizeof err), COLI_ENOENT);
    free(missing);
    ck_assert_int_eq(coli_convert(NULL, out, &p, err, sizeof err), COLI_EINVAL);
    /* A caller of the first version (no progress, user) is served with the
     * defaults for them: the stale progress past its struct_size is not
     * called. Below the first version it is refused, naming the struct. */
    int calls = 0;
    char *old = tu_path(tmp, "old");
    p.progress = stop_at_once;
    p.user = &calls;
    p.struct_size = offsetof(coli_convert_params, progress);
    ck_assert_int_eq(coli_convert(src, old, &p, err, sizeof err), COLI_OK);
    ck_assert_int_eq(calls, 0);
    p.struct_size = offsetof(coli_convert_params, progress) - 1;
    ck_assert_int_eq(coli_convert(src, old, &p, err, sizeof err), COLI_EINVAL);
    ck_assert_msg(strstr(err, "coli_convert_params: struct_size"), "%s", err);
    p.struct_size = sizeof p;
    free(old);
    /* stopped by the caller: nothing that looks like a model is left */
    p.progress = stop_at_once;
    p.user = &calls;
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_ECANCELED);
    ck_assert_int_ge(calls, 1);
    char *mc = tu_path(out, "model.coli");
    ck_assert_int_ne(access(mc, F_OK), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q tmp-", out);
    ck_assert_int_ne(system(cmd), 0);
    /* done once, the output is not overwritten unless asked */
    p.progress = NULL;
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_OK);
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_EINVAL);
    ck_assert_msg(strstr(err, "exists"), "%s", err);
    p.overwrite = 1;
    p.weights = COLI_WEIGHTS_Q2;
    ck_assert_int_eq(coli_convert(src, out, &p, err, sizeof err), COLI_OK);
    /* the same model converted twice makes the same bytes */
    char *other = tu_path(tmp, "again");
    ck_assert_int_eq(coli_convert(src, other, &p, err, sizeof err), COLI_OK);
    char *mc2 = tu_path(other, "model.coli");
    size_t a = 0, b = 0;
    char *fa = tu_read_file(mc, &a), *fb = tu_read_file(mc2, &b);
    ck_assert_uint_eq(a, b);
    ck_assert_int_eq(memcmp(fa, fb, a), 0);
    free(fa);
    free(fb);
    free(mc2);
    free(other);
    free(mc);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

/* A checkpoint with a budget: loaded whole, with a warning. */
START_TEST(test_checkpoint_budget)
{
    char *src = fixture(0);
    conf c = {COLI_WEIGHTS_Q4, 0, 64, 0, 0};
    coli_options *o = options(&c);
    g_log[0] = 0;
    coli_options_set_log(o, log_fn, NULL, COLI_LOG_WARN);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(src, o, &m), COLI_OK);
    ck_assert_msg(strstr(g_log, "converted models"), "%s", g_log);
    coli_store_stats ss;
    memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    ck_assert_int_eq(coli_model_store_stats(m, &ss), COLI_OK);
    ck_assert_int_eq(ss.mode, COLI_STORE_RESIDENT);
    ck_assert_uint_eq(ss.experts, 16);
    ss.struct_size = 0;
    ck_assert_int_eq(coli_model_store_stats(m, &ss), COLI_EINVAL);
    coli_model_free(m);
    coli_options_free(o);
    free(src);
}
END_TEST

/* The replacement policy, driven directly: 4 slots over 2 MoE layers
 * (layers 0 and 2), a share of 2 each, no prefetch. */
static int hit(coli__store *st, int l, int e)
{
    coli_store_stats a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    coli__store_stats(st, &a);
    coli__mat m[3];
    int ref = -1;
    coli__err err;
    ck_assert_int_eq(coli__store_get(st, l, e, 1, m, &ref, &err), COLI_OK);
    coli__store_put(st, ref);
    coli__store_stats(st, &b);
    ck_assert_uint_eq(b.gets, a.gets + 1);
    return b.hits == a.hits + 1;
}

START_TEST(test_policy)
{
    char *tmp = tu_mkdtemp(), *src = fixture(0), *out = tu_path(tmp, "out");
    free(convert(src, out, COLI_WEIGHTS_Q4));
    conf c = {COLI_WEIGHTS_AUTO, 4, 0, 0, 0};
    coli_options *o = options(&c);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(out, o, &m), COLI_OK);
    coli__store *st = m->store;
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(hit(st, 0, 0), 0);
    ck_assert_int_eq(hit(st, 0, 1), 0);
    ck_assert_int_eq(hit(st, 2, 0), 0);
    ck_assert_int_eq(hit(st, 2, 1), 0);
    ck_assert_int_eq(hit(st, 0, 0), 1); /* layer 0: 1 then 0 most recent */
    /* layer 0 holds its share: a miss there evicts layer 0's least
     * recently used (expert 1), never layer 2's */
    ck_assert_int_eq(hit(st, 0, 2), 0);
    ck_assert_int_eq(hit(st, 2, 0), 1);
    ck_assert_int_eq(hit(st, 2, 1), 1);
    ck_assert_int_eq(hit(st, 0, 0), 1);
    ck_assert_int_eq(hit(st, 0, 1), 0); /* it was the one evicted: now 2 goes */
    ck_assert_int_eq(hit(st, 0, 0), 1);
    ck_assert_int_eq(hit(st, 0, 2), 0);
    /* a slot held by a reader is never taken: with all 4 pinned, a get
     * that may not wait is refused, and one that may waits for a put */
    coli__mat mm[4][3];
    int refs[4];
    coli__err err;
    const int want[4][2] = {{0, 0}, {0, 2}, {2, 0}, {2, 1}};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(coli__store_get(st, want[i][0], want[i][1], 1, mm[i], &refs[i], &err), COLI_OK);
    coli__mat x[3];
    int rx = -1;
    ck_assert_int_eq(coli__store_get(st, 0, 5, 0, x, &rx, &err), COLI_ENOSPC);
    coli__store_put(st, refs[3]);
    ck_assert_int_eq(coli__store_get(st, 0, 5, 0, x, &rx, &err), COLI_OK);
    coli__store_put(st, rx);
    for (int i = 0; i < 3; i++)
        coli__store_put(st, refs[i]);
    coli_model_free(m);
    coli_options_free(o);
    tu_rmtree(tmp);
    free(out);
    free(src);
    free(tmp);
}
END_TEST

int main(void)
{
    unsetenv("COLI_IO_FAIL_AFTER");
    unsetenv("COLI_CUDA");
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_crc32c);
    tcase_add_test(tc, test_layout);
    tcase_add_loop_test(tc, test_bits_every_budget, 0, 4 * (int)(sizeof fixtures / sizeof fixtures[0]));
    tcase_add_test(tc, test_policy);
    tcase_add_test(tc, test_hot_set);
    tcase_add_test(tc, test_two_contexts);
    tcase_add_test(tc, test_damage_at_open);
    tcase_add_test(tc, test_damaged_record);
    tcase_add_test(tc, test_io_failure);
    tcase_add_test(tc, test_convert_errors);
    tcase_add_test(tc, test_checkpoint_budget);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
