/* test_placement.c - the expert placement policy (lib/tier/placement.c), with
 * expectations worked out by hand. */
#include <check.h>
#include <string.h>

#include "tier/placement.h"
#include "testutil.h"

#define L 3
#define E 4

static uint64_t sizes[L * E];

static void equal_sizes(uint64_t b)
{
    for (int i = 0; i < L * E; i++)
        sizes[i] = b;
}

START_TEST(test_one_device_all_fit)
{
    equal_sizes(10);
    uint64_t budget = 1000, used;
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, NULL, out, &used), L * E);
    for (int i = 0; i < L * E; i++)
        ck_assert_int_eq(out[i], 0);
    ck_assert_uint_eq(used, 120);
}
END_TEST

START_TEST(test_budget_zero)
{
    equal_sizes(10);
    uint64_t budget = 0, used = 99;
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, NULL, out, &used), 0);
    for (int i = 0; i < L * E; i++)
        ck_assert_int_eq(out[i], -1);
    ck_assert_uint_eq(used, 0);
    /* no device at all */
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 0, NULL, out, NULL), 0);
}
END_TEST

/* Room for exactly 5 experts: round-robin over layers takes expert 0 of
 * layers 0, 1, 2, then expert 1 of layers 0, 1. */
START_TEST(test_exactly_n_round_robin)
{
    equal_sizes(10);
    uint64_t budget = 50, used;
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, NULL, out, &used), 5);
    const int want[L * E] = {0, 0, -1, -1, /* layer 0 */ 0, 0, -1, -1, /* layer 1 */ 0, -1, -1, -1};
    ck_assert_mem_eq(out, want, sizeof want);
    ck_assert_uint_eq(used, 50);
    /* one byte less: 4 */
    budget = 49;
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, NULL, out, &used), 4);
    ck_assert_int_eq(out[1 * E + 1], -1);
    ck_assert_int_eq(out[0 * E + 1], 0);
}
END_TEST

/* Two equal devices alternate: each expert to the least-loaded one, the
 * lower index on ties. */
START_TEST(test_two_devices)
{
    equal_sizes(10);
    uint64_t budgets[2] = {30, 30}, used[2];
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, budgets, 2, NULL, out, used), 6);
    /* order: (l0,e0) d0, (l1,e0) d1, (l2,e0) d0, (l0,e1) d1, (l1,e1) d0, (l2,e1) d1 */
    const int want[L * E] = {0, 1, -1, -1, 1, 0, -1, -1, 0, 1, -1, -1};
    ck_assert_mem_eq(out, want, sizeof want);
    ck_assert_uint_eq(used[0], 30);
    ck_assert_uint_eq(used[1], 30);
}
END_TEST

/* Two layers on two devices: alternation alone would give each layer one
 * device; the tie-break on the layer spreads both. */
START_TEST(test_two_devices_even_layers)
{
    equal_sizes(10);
    uint64_t budgets[2] = {40, 40}, used[2];
    int out[2 * E];
    ck_assert_int_eq(coli__place(sizes, 2, E, budgets, 2, NULL, out, used), 8);
    /* (0,0) d0 | (1,0) d1 | (0,1) tie, layer 0 has one on d0: d1 | (1,1)
     * d0 less loaded | (0,2) tie, layer 0 even: d0 | (1,2) d1 | (0,3) tie,
     * layer 0 has 2 on d0 and 1 on d1: d1 | (1,3) d0 */
    const int want[2 * E] = {0, 1, 0, 1, 1, 0, 1, 0};
    ck_assert_mem_eq(out, want, sizeof want);
}
END_TEST

/* Unequal budgets: 20 and 50. Least-loaded by bytes: d0, d1, d0 (10 each
 * then) ... d0 is full at 20, the rest go to d1 until it is full. */
START_TEST(test_unequal_budgets)
{
    equal_sizes(10);
    uint64_t budgets[2] = {20, 50}, used[2];
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, budgets, 2, NULL, out, used), 7);
    /* (l0,e0) d0, (l1,e0) d1, (l2,e0) d0 [d0 full], then d1: (l0,e1)
     * (l1,e1) (l2,e1) (l0,e2) [d1 full at 50] */
    const int want[L * E] = {0, 1, 1, -1, 1, 1, -1, -1, 0, 1, -1, -1};
    ck_assert_mem_eq(out, want, sizeof want);
    ck_assert_uint_eq(used[0], 20);
    ck_assert_uint_eq(used[1], 50);
}
END_TEST

/* Hot experts first; ties in round-robin order. */
START_TEST(test_hot_first)
{
    equal_sizes(10);
    uint64_t hot[L * E];
    memset(hot, 0, sizeof hot);
    hot[2 * E + 3] = 100; /* layer 2, expert 3 */
    hot[1 * E + 2] = 50;
    hot[0 * E + 3] = 50;  /* ties with (1,2): expert 2 comes before expert 3 */
    uint64_t budget = 40, used;
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, hot, out, &used), 4);
    /* (2,3), (1,2), (0,3), then the first of the cold ones: (0,0) */
    const int want[L * E] = {0, -1, -1, 0, -1, -1, 0, -1, -1, -1, -1, 0};
    ck_assert_mem_eq(out, want, sizeof want);
}
END_TEST

/* Experts that do not fit are skipped, smaller ones after them still
 * placed; size 0 means no expert (a dense layer). */
START_TEST(test_skip_and_dense)
{
    equal_sizes(10);
    for (int e = 0; e < E; e++)
        sizes[1 * E + e] = 0; /* layer 1 is dense */
    sizes[0 * E + 0] = 100;   /* too big for anything */
    uint64_t budget = 25, used;
    int out[L * E];
    ck_assert_int_eq(coli__place(sizes, L, E, &budget, 1, NULL, out, &used), 2);
    /* order: (0,0) skipped, (2,0), (0,1), then full */
    const int want[L * E] = {-1, 0, -1, -1, -1, -1, -1, -1, 0, -1, -1, -1};
    ck_assert_mem_eq(out, want, sizeof want);
    ck_assert_uint_eq(used, 20);
}
END_TEST

START_TEST(test_deterministic)
{
    for (int i = 0; i < L * E; i++)
        sizes[i] = 7 + (uint64_t)(i * 37 % 11);
    uint64_t hot[L * E];
    for (int i = 0; i < L * E; i++)
        hot[i] = (uint64_t)(i * 13 % 5);
    uint64_t budgets[3] = {30, 17, 44};
    int a[L * E], b[L * E];
    int na = coli__place(sizes, L, E, budgets, 3, hot, a, NULL);
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(coli__place(sizes, L, E, budgets, 3, hot, b, NULL), na);
        ck_assert_mem_eq(a, b, sizeof a);
    }
    /* and the budgets hold */
    uint64_t load[3] = {0};
    for (int i = 0; i < L * E; i++)
        if (a[i] >= 0)
            load[a[i]] += sizes[i];
    for (int d = 0; d < 3; d++)
        ck_assert_uint_le(load[d], budgets[d]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, test_one_device_all_fit);
    tcase_add_test(tc, test_budget_zero);
    tcase_add_test(tc, test_exactly_n_round_robin);
    tcase_add_test(tc, test_two_devices);
    tcase_add_test(tc, test_two_devices_even_layers);
    tcase_add_test(tc, test_unequal_budgets);
    tcase_add_test(tc, test_hot_first);
    tcase_add_test(tc, test_skip_and_dense);
    tcase_add_test(tc, test_deterministic);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
