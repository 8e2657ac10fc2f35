/* test_gpu_build.c - the GPU tier that configure chose is the one linked in.
 *
 * configure --with-cuda / --with-hip write COLI_GPU_CUDA or COLI_GPU_HIP and
 * COLI_GPU_TARGETS into config.h; the build must then link lib/gpu/backend.cu
 * (whose compiled() names those targets) in place of lib/gpu/none.c, and the
 * public coli_gpu_tier and feature query must agree. Without a GPU or a driver (CI), probing
 * finds no device and that is not an error. tests/test_configure_gpu.sh
 * checks the configure side: which options give which config.h. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <string.h>

#include "colibri/colibri.h"
#include "gpu/backend.h"
#include "testutil.h"

#if defined(COLI_GPU_CUDA) || defined(COLI_GPU_HIP)
#define WANT_TIER COLI_GPU_TARGETS
#else
#define WANT_TIER "none"
#endif

START_TEST(test_compiled_is_configured)
{
    const coli__gpu_ops *ops = coli__gpu_backend();

    ck_assert_ptr_nonnull(ops);
    ck_assert_str_eq(ops->compiled(), WANT_TIER);
    ck_assert_str_eq(coli_gpu_tier(), WANT_TIER);
#if defined(COLI_GPU_CUDA)
    ck_assert(strncmp(ops->compiled(), "cuda sm_", 8) == 0);
#elif defined(COLI_GPU_HIP)
    ck_assert(strncmp(ops->compiled(), "hip gfx", 7) == 0);
#endif
}
END_TEST

START_TEST(test_features_match_config)
{
#if defined(COLI_GPU_CUDA)
    const int cuda = 1, hip = 0;
#elif defined(COLI_GPU_HIP)
    const int cuda = 0, hip = 1;
#else
    const int cuda = 0, hip = 0;
#endif
    ck_assert_int_eq(coli_has_feature(COLI_FEATURE_CUDA), cuda);
    ck_assert_int_eq(coli_has_feature(COLI_FEATURE_HIP), hip);
    ck_assert_int_eq(coli_has_feature(COLI_FEATURE_GPU), cuda || hip);
}
END_TEST

/* Every table entry is set: a missing one would be a NULL call later. */
START_TEST(test_table_complete)
{
    const coli__gpu_ops *ops = coli__gpu_backend();

    ck_assert(ops->compiled && ops->probe && ops->init && ops->free && ops->n_devices &&
              ops->device_info && ops->upload && ops->update && ops->release && ops->tensor_bytes &&
              ops->matmul && ops->experts && ops->stats);
}
END_TEST

/* No device is a count, not a failure; the count fits the buffer. */
START_TEST(test_probe_without_failing)
{
    const coli__gpu_ops *ops = coli__gpu_backend();
    coli__gpu_devinfo info[COLI_GPU_MAX_DEVICES];
    coli__err err = {{0}};
    int n = -1;

    ck_assert_int_eq(ops->probe(info, COLI_GPU_MAX_DEVICES, &n, &err), COLI_OK);
    ck_assert_int_ge(n, 0);
    n = -1;
    ck_assert_int_eq(ops->probe(NULL, 0, &n, &err), COLI_OK);
    ck_assert_int_ge(n, 0);
#if !defined(COLI_GPU_CUDA) && !defined(COLI_GPU_HIP)
    ck_assert_int_eq(n, 0);
#endif
}
END_TEST

static Suite *gpu_build_suite(void)
{
    Suite *s = suite_create("gpu_build");
    TCase *tc = tcase_create("tier");

    tcase_add_test(tc, test_compiled_is_configured);
    tcase_add_test(tc, test_features_match_config);
    tcase_add_test(tc, test_table_complete);
    tcase_add_test(tc, test_probe_without_failing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(gpu_build_suite());
}
