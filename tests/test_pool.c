/* test_pool.c - the CPU thread pool: every index of a job is computed
 * exactly once, by a thread of the pool, before coli__pool_run returns,
 * and never after. The last part matters because a job waits only for the
 * workers that joined it: a worker that wakes late must not run a chunk
 * of a job that has returned. Many more threads than cores make workers
 * late often. Built to run under ThreadSanitizer too. */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu/threadpool.h"
#include "testutil.h"

#define MAX_N 4099

typedef struct job {
    atomic_int hits[MAX_N];
    atomic_int calls;     /* calls of fn for this job */
    atomic_int bad_id;    /* a thread index outside [0, size) */
    atomic_int after;     /* calls that came after the run returned */
    atomic_int returned;  /* set by the test once coli__pool_run returned */
    int size;
} job;

static void count(void *arg, int64_t b, int64_t e, int thread)
{
    job *j = arg;
    if (atomic_load(&j->returned))
        atomic_fetch_add(&j->after, 1);
    if (thread < 0 || thread >= j->size)
        atomic_fetch_add(&j->bad_id, 1);
    atomic_fetch_add(&j->calls, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&j->hits[i], 1);
}

static void reset(job *j, int size)
{
    for (int i = 0; i < MAX_N; i++)
        atomic_store(&j->hits[i], 0);
    atomic_store(&j->calls, 0);
    atomic_store(&j->bad_id, 0);
    atomic_store(&j->after, 0);
    atomic_store(&j->returned, 0);
    j->size = size;
}

/* Each index once, for pools of 1 to 8 threads and jobs of every shape:
 * fewer indices than a grain, one chunk a thread, a ragged last chunk. */
START_TEST(test_each_index_once)
{
    static const int sizes[] = {1, 2, 3, 8};
    static const int64_t ns[] = {1, 2, 7, 64, 1000, MAX_N};
    static const int64_t grains[] = {1, 3, 64, 5000};
    job *j = malloc(sizeof *j);
    ck_assert_ptr_nonnull(j);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        coli__pool *p = NULL;
        coli__err err;
        ck_assert_int_eq(coli__pool_create(sizes[si], &p, &err), COLI_OK);
        ck_assert_int_eq(coli__pool_size(p), sizes[si]);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t gi = 0; gi < sizeof grains / sizeof grains[0]; gi++) {
                int64_t n = ns[ni], g = grains[gi];
                reset(j, sizes[si]);
                coli__pool_run(p, n, g, count, j);
                atomic_store(&j->returned, 1);
                for (int64_t i = 0; i < n; i++)
                    ck_assert_msg(atomic_load(&j->hits[i]) == 1,
                                  "%d threads, n %lld, grain %lld: index %lld ran %d times",
                                  sizes[si], (long long)n, (long long)g, (long long)i,
                                  atomic_load(&j->hits[i]));
                /* ceil(n / grain) chunks, one call each; one call of the
                 * whole range where a single thread would run it anyway */
                int calls = atomic_load(&j->calls), bad = atomic_load(&j->bad_id);
                int want = sizes[si] == 1 || n <= g ? 1 : (int)((n + g - 1) / g);
                ck_assert_int_eq(calls, want);
                ck_assert_int_eq(bad, 0);
            }
        /* nothing to do: fn is not called */
        reset(j, sizes[si]);
        coli__pool_run(p, 0, 1, count, j);
        int calls = atomic_load(&j->calls);
        ck_assert_int_eq(calls, 0);
        coli__pool_free(p);
    }
    free(j);
}
END_TEST

/* Many small jobs in a row on 16 threads (on a 2-core machine, most of
 * them off their cores at any time): no call of a job after it returned,
 * and each index once. Two job records alternate, so a late worker that
 * ran a returned job's chunk would count in the record already checked. */
START_TEST(test_late_workers)
{
    enum { THREADS = 16, JOBS = 4000, N = 24 };
    job *rec = malloc(2 * sizeof *rec);
    ck_assert_ptr_nonnull(rec);
    coli__pool *p = NULL;
    coli__err err;
    ck_assert_int_eq(coli__pool_create(THREADS, &p, &err), COLI_OK);
    reset(&rec[0], THREADS);
    reset(&rec[1], THREADS);
    for (int k = 0; k < JOBS; k++) {
        job *j = &rec[k & 1], *prev = &rec[(k + 1) & 1];
        reset(j, THREADS);
        coli__pool_run(p, N, 1, count, j);
        atomic_store(&j->returned, 1);
        for (int i = 0; i < N; i++)
            ck_assert_msg(atomic_load(&j->hits[i]) == 1, "job %d: index %d ran %d times", k, i,
                          atomic_load(&j->hits[i]));
        int calls = atomic_load(&j->calls), after = atomic_load(&j->after),
            prev_after = atomic_load(&prev->after);
        ck_assert_int_eq(calls, N);
        ck_assert_int_eq(after, 0);
        ck_assert_int_eq(prev_after, 0);
    }
    coli__pool_free(p);
    /* every worker has been joined: a late call would have been counted */
    int after0 = atomic_load(&rec[0].after), after1 = atomic_load(&rec[1].after);
    int calls0 = atomic_load(&rec[0].calls), calls1 = atomic_load(&rec[1].calls);
    ck_assert_int_eq(after0, 0);
    ck_assert_int_eq(after1, 0);
    ck_assert_int_eq(calls0, N);
    ck_assert_int_eq(calls1, N);
    free(rec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_each_index_once);
    tcase_add_test(tc, test_late_workers);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
