/* test_think.c - coli serve's split of a thinking model's reply into
 * reasoning and content (tools/serve/think.c), fed whole and in every
 * split into pieces: no partial tag ever reaches either side. */
#include <config.h>

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/serve/think.h"
#include "testutil.h"

typedef struct split {
    const char *reply, *reasoning, *content;
} split;

static const split g_cases[] = {
    {"<think>why</think>\n\nthe answer", "why", "the answer"},
    {"\n<think>a < b</think>ok", "a < b", "ok"},
    {"no thinking here", "", "no thinking here"},
    {"<thin", "", "<thin"},               /* ends before the tag is complete */
    {"<think>unfinished", "unfinished", ""},
    {"<think></think>", "", ""},
    {"<think>x</thinkish></think>y", "x</thinkish>", "y"},
    {"text <think>late</think>", "", "text <think>late</think>"},
};

static void run_split(const split *c, size_t cut1, size_t cut2)
{
    think t;
    sbuf r = {0}, k = {0};
    size_t n = strlen(c->reply);
    memset(&t, 0, sizeof t);
    think_feed(&t, c->reply, cut1, 0, &r, &k);
    think_feed(&t, c->reply + cut1, cut2 - cut1, 0, &r, &k);
    /* no partial tag is given before the end */
    ck_assert_msg(!k.p || !strstr(k.p, "<thi") || strstr(c->content, "<thi"), "content '%s'", k.p);
    think_feed(&t, c->reply + cut2, n - cut2, 1, &r, &k);
    ck_assert_str_eq(r.p ? r.p : "", c->reasoning);
    ck_assert_str_eq(k.p ? k.p : "", c->content);
    think_free(&t);
    sbuf_free(&r);
    sbuf_free(&k);
}

START_TEST(test_think_splits)
{
    const split *c = &g_cases[_i];
    size_t n = strlen(c->reply);
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++)
            run_split(c, a, b);
}
END_TEST

/* A prompt that opens the block: the reply begins inside it. */
START_TEST(test_think_opened)
{
    ck_assert_int_eq(think_opened("<|im_start|>assistant\n<think>\n", 30), 1);
    ck_assert_int_eq(think_opened("x<think>", 8), 1);
    ck_assert_int_eq(think_opened("<think></think>\n\n", 17), 0);
    ck_assert_int_eq(think_opened("think>", 6), 0);
    ck_assert_int_eq(think_opened("", 0), 0);
    const char *reply = "the reasons</think>\n\nthe answer";
    size_t n = strlen(reply);
    for (size_t a = 0; a <= n; a++) {
        think t;
        sbuf r = {0}, k = {0};
        think_start(&t, 1);
        think_feed(&t, reply, a, 0, &r, &k);
        think_feed(&t, reply + a, n - a, 1, &r, &k);
        ck_assert_str_eq(r.p ? r.p : "", "the reasons");
        ck_assert_str_eq(k.p ? k.p : "", "the answer");
        think_free(&t);
        sbuf_free(&r);
        sbuf_free(&k);
    }
    /* never closed: all of it is reasoning */
    think t;
    sbuf r = {0}, k = {0};
    think_start(&t, 1);
    think_feed(&t, "still thinking", 14, 1, &r, &k);
    ck_assert_str_eq(r.p ? r.p : "", "still thinking");
    ck_assert_ptr_null(k.p);
    think_free(&t);
    sbuf_free(&r);
}
END_TEST

static Suite *think_suite(void)
{
    Suite *s = suite_create("think");
    TCase *t = tcase_create("think");
    tcase_add_loop_test(t, test_think_splits, 0, (int)(sizeof g_cases / sizeof g_cases[0]));
    tcase_add_test(t, test_think_opened);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run_suite(think_suite());
}
