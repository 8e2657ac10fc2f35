/* test_batch.c - coli_eval_batch: contexts evaluated in one pass get the
 * bits each would get alone (the expectation is each context run by
 * itself with coli_eval), on every fixture and weight format, and on each
 * CPU kernel set; and refusals change nothing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NSEQ 4
#define STEPS 6

static const char *const FIXTURES[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite", "glm_moe_dsa"};
static const coli_weight_format FORMATS[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16,
                                             COLI_WEIGHTS_F32};
/* Prompt lengths: one token, a few, one past a chunk of 64, a few; and
 * the round at which each sequence joins the batch. */
static const int LEN[NSEQ] = {1, 5, 70, 3};
static const int START[NSEQ] = {0, 0, 1, 3};

static coli_status open_model(const char *fixture, coli_weight_format fmt, int64_t set, int64_t kv, int threads,
                              coli_model **m)
{
    char *dir = tu_path(tu_data_dir(), fixture);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 128), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, set), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, kv), COLI_OK);
    coli_status st = coli_model_open(dir, o, m);
    coli_options_free(o);
    free(dir);
    return st;
}

static int vocab_of(coli_model *m)
{
    coli_model_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    return (int)info.vocab_size;
}

static void prompt_of(int j, int vocab, int32_t *ids)
{
    for (int i = 0; i < LEN[j]; i++)
        ids[i] = (int32_t)((i * 37 + 11 * j + 5) % vocab);
}

/* logits [NSEQ][1 + STEPS][vocab]: each sequence alone, greedy. */
static void alone(coli_model *m, int vocab, float *logits)
{
    for (int j = 0; j < NSEQ; j++) {
        coli_context *c = NULL;
        ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
        int32_t ids[128];
        prompt_of(j, vocab, ids);
        ck_assert_int_eq(tu_greedy(c, ids, (size_t)LEN[j], STEPS, vocab,
                                   logits + (size_t)j * (1 + STEPS) * (size_t)vocab, NULL),
                         0);
        coli_context_free(c);
    }
}

/* The same sequences through coli_eval_batch, joining at START and
 * decoding together; every step's logits must equal alone's bit for bit. */
static void together(coli_model *m, int vocab, const float *want, const char *what)
{
    coli_context *c[NSEQ];
    int32_t ids[NSEQ][128], next[NSEQ];
    int done[NSEQ] = {0};
    for (int j = 0; j < NSEQ; j++) {
        ck_assert_int_eq(coli_context_create(m, NULL, &c[j]), COLI_OK);
        prompt_of(j, vocab, ids[j]);
    }
    for (int round = 0;; round++) {
        coli_batch_item it[NSEQ];
        int n = 0;
        for (int j = 0; j < NSEQ; j++) {
            if (round < START[j] || done[j] > STEPS)
                continue;
            if (round == START[j])
                it[n++] = (coli_batch_item){c[j], ids[j], (size_t)LEN[j]};
            else
                it[n++] = (coli_batch_item){c[j], &next[j], 1};
        }
        if (n == 0)
            break;
        ck_assert_msg(coli_eval_batch(it, (size_t)n) == COLI_OK, "%s: %s", what, coli_context_errmsg(it[0].ctx));
        for (int j = 0; j < NSEQ; j++) {
            if (round < START[j] || done[j] > STEPS)
                continue;
            const float *got = coli_context_logits(c[j]);
            ck_assert_ptr_nonnull(got);
            const float *w = want + ((size_t)j * (1 + STEPS) + (size_t)done[j]) * (size_t)vocab;
            ck_assert_msg(memcmp(got, w, (size_t)vocab * sizeof(float)) == 0,
                          "%s: sequence %d, step %d: logits differ from the sequence alone", what, j, done[j]);
            ck_assert_uint_eq(coli_context_position(c[j]), (size_t)(LEN[j] + done[j]));
            next[j] = tu_argmax(got, vocab);
            done[j]++;
        }
    }
    for (int j = 0; j < NSEQ; j++)
        coli_context_free(c[j]);
}

static void check_case(const char *fixture, coli_weight_format fmt, int64_t set, int64_t kv, int threads)
{
    coli_model *m = NULL;
    coli_status st = open_model(fixture, fmt, set, kv, threads, &m);
    if (st == COLI_EUNSUPPORTED && set > 1) {
        printf("%s: kernel set %ld not checked: %s\n", fixture, (long)set, coli_model_errmsg(m));
        coli_model_free(m);
        return;
    }
    ck_assert_msg(st == COLI_OK, "%s: %s", fixture, coli_model_errmsg(m));
    int vocab = vocab_of(m);
    float *want = malloc((size_t)NSEQ * (1 + STEPS) * (size_t)vocab * sizeof(float));
    ck_assert_ptr_nonnull(want);
    alone(m, vocab, want);
    char what[128];
    snprintf(what, sizeof what, "%s %s set %ld kv %ld threads %d", fixture, coli_weight_format_name(fmt),
             (long)set, (long)kv, threads);
    together(m, vocab, want, what);
    free(want);
    coli_model_free(m);
}

START_TEST(test_same_bits)
{
    const char *fixture = FIXTURES[_i];
    /* every format on the best kernel set, every set in q4 (the sets'
     * agreement in every format is tests/test_cpu_kernels.c's) */
    for (size_t f = 0; f < sizeof FORMATS / sizeof FORMATS[0]; f++)
        check_case(fixture, FORMATS[f], 0, 0, 2);
    for (int64_t set = 1; set <= 3; set++)
        check_case(fixture, COLI_WEIGHTS_Q4, set, 0, 2);
    /* a bf16 cache, and three threads */
    check_case(fixture, COLI_WEIGHTS_Q4, 0, 1, 3);
}
END_TEST

/* Contexts with different caches and positions in one pass: a long one
 * beside many single tokens, more items than a chunk holds. */
START_TEST(test_many)
{
    coli_model *m = NULL;
    ck_assert_int_eq(open_model("qwen3_moe", COLI_WEIGHTS_Q8, 0, 0, 2, &m), COLI_OK);
    int vocab = vocab_of(m);
    enum { N = 70 };
    coli_context *c[N];
    int32_t tok[N];
    coli_batch_item it[N];
    for (int j = 0; j < N; j++) {
        ck_assert_int_eq(coli_context_create(m, NULL, &c[j]), COLI_OK);
        tok[j] = (int32_t)((j * 13 + 7) % vocab);
        it[j] = (coli_batch_item){c[j], &tok[j], 1};
    }
    ck_assert_int_eq(coli_eval_batch(it, N), COLI_OK);
    coli_context *ref = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &ref), COLI_OK);
    for (int j = 0; j < N; j++) {
        coli_context_reset(ref);
        ck_assert_int_eq(coli_eval(ref, &tok[j], 1), COLI_OK);
        ck_assert_msg(memcmp(coli_context_logits(ref), coli_context_logits(c[j]), (size_t)vocab * sizeof(float)) == 0,
                      "context %d of %d differs from itself alone", j, N);
        ck_assert_uint_eq(coli_context_position(c[j]), 1);
    }
    coli_context_free(ref);
    for (int j = 0; j < N; j++)
        coli_context_free(c[j]);
    coli_model_free(m);
}
END_TEST

/* Refusals: checked before anything runs, so no context moves. */
START_TEST(test_refusals)
{
    coli_model *m = NULL, *m2 = NULL;
    ck_assert_int_eq(open_model("qwen3_moe", COLI_WEIGHTS_Q8, 0, 0, 2, &m), COLI_OK);
    ck_assert_int_eq(open_model("olmoe", COLI_WEIGHTS_Q8, 0, 0, 2, &m2), COLI_OK);
    int vocab = vocab_of(m);
    coli_context *a = NULL, *b = NULL, *x = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &a), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, NULL, &b), COLI_OK);
    ck_assert_int_eq(coli_context_create(m2, NULL, &x), COLI_OK);
    int32_t t[2] = {1, 2}, bad = vocab, many[129];
    for (int i = 0; i < 129; i++)
        many[i] = i % vocab;

    ck_assert_int_eq(coli_eval_batch(NULL, 1), COLI_EINVAL);
    coli_batch_item same[2] = {{a, t, 2}, {a, t, 1}};
    ck_assert_int_eq(coli_eval_batch(same, 2), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(a), "same context"));
    coli_batch_item mixed[2] = {{a, t, 2}, {x, t, 1}};
    ck_assert_int_eq(coli_eval_batch(mixed, 2), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(x), "another model"));
    coli_batch_item oov[2] = {{a, t, 2}, {b, &bad, 1}};
    ck_assert_int_eq(coli_eval_batch(oov, 2), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(b), "outside the vocabulary"));
    coli_batch_item null_tokens[2] = {{a, t, 2}, {b, NULL, 1}};
    ck_assert_int_eq(coli_eval_batch(null_tokens, 2), COLI_EINVAL);
    coli_batch_item full[2] = {{a, t, 2}, {b, many, 129}};
    ck_assert_int_eq(coli_eval_batch(full, 2), COLI_ENOSPC);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(b), "context is full"));
    ck_assert_uint_eq(coli_context_position(a), 0);
    ck_assert_uint_eq(coli_context_position(b), 0);
    ck_assert_ptr_null(coli_context_logits(a));

    /* an empty item is skipped */
    coli_batch_item skip[2] = {{a, t, 2}, {b, NULL, 0}};
    ck_assert_int_eq(coli_eval_batch(skip, 2), COLI_OK);
    ck_assert_uint_eq(coli_context_position(a), 2);
    ck_assert_uint_eq(coli_context_position(b), 0);

    coli_context_free(a);
    coli_context_free(b);
    coli_context_free(x);
    coli_model_free(m);
    coli_model_free(m2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("batch");
    TCase *t = tcase_create("batch");
    tcase_set_timeout(t, 600);
    tcase_add_loop_test(t, test_same_bits, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(t, test_many);
    tcase_add_test(t, test_refusals);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
