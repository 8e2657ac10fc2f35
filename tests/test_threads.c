/* test_threads.c - models opened on several threads at once: each gets the
 * logits of the same model opened alone on the CPU, bit for bit. Opening shares no
 * state between models: the loader's quantizing, the GPU tier's placement
 * and its release of host copies (which sorts the loader's allocations),
 * and the rebuild of released copies when device calls fail. Built to run
 * under ThreadSanitizer too (configure --enable-tsan). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "tier/experts.h"
#include "model/options.h"
#include "mock_gpu.h"
#include "testutil.h"

/* The GPU tier's implementation the next models open with (NULL: the one
 * compiled in): a mock, handed in through their options. */
static const coli__gpu_ops *g_ops;

static void use_ops(const coli__gpu_ops *ops)
{
    g_ops = ops;
}

#define N_THREADS 4
#define STEPS 2 /* greedy steps after the prompt */
static const int32_t PROMPT[] = {1, 5, 9, 23, 7, 42, 3};
#define NP (sizeof PROMPT / sizeof PROMPT[0])

/* How one model is opened. */
typedef struct conf {
    const char *fixture;
    coli_weight_format fmt;
    int gpu, release_host;
    int fails; /* the device's calls fail: its experts fall back to the CPU */
} conf;

/* One opening: its configuration, the logits it must give, what it got. */
typedef struct job {
    const conf *cf;
    const float *want; /* (1 + STEPS) * vocab */
    int vocab;
    float *got;
    char why[COLI_ERRMSG_MAX + 128]; /* empty: all is well */
} job;

static coli_options *options_for(const conf *cf)
{
    coli_options *o = NULL;
    if (coli_options_create(&o) != COLI_OK)
        return NULL;
    if (coli_options_set(o, COLI_OPT_WEIGHTS, cf->fmt) != COLI_OK ||
        coli_options_set(o, COLI_OPT_THREADS, 2) != COLI_OK || coli_options_set(o, COLI_OPT_CONTEXT, 64) != COLI_OK ||
        coli_options_set(o, COLI_OPT_GPU, cf->gpu) != COLI_OK ||
        coli_options_set(o, COLI_OPT_GPU_RELEASE_HOST, cf->release_host) != COLI_OK) {
        coli_options_free(o);
        return NULL;
    }
    coli__options_set_gpu_ops(o, g_ops);
    return o;
}

/* Opens cf's model and writes its logits to out ((1 + STEPS) * vocab,
 * allocated here); why gets what went wrong. */
static void open_and_run(const conf *cf, float **out, int *vocab, char *why, size_t cap)
{
    *out = NULL;
    why[0] = 0;
    char *dir = tu_path(tu_data_dir(), cf->fixture);
    coli_options *o = options_for(cf);
    coli_model *m = NULL;
    coli_context *c = NULL;
    coli_status st = o ? coli_model_open(dir, o, &m) : COLI_ENOMEM;
    if (st != COLI_OK) {
        snprintf(why, cap, "open %s: %s", cf->fixture, m ? coli_model_errmsg(m) : coli_status_name(st));
        goto done;
    }
    coli_model_info info;
    info.struct_size = sizeof info;
    if (coli_model_get_info(m, &info) != COLI_OK) {
        snprintf(why, cap, "%s: no model info", cf->fixture);
        goto done;
    }
    if (cf->release_host && !strstr(info.gpu_detail, "host copies released")) {
        snprintf(why, cap, "%s: the tier says '%s'", cf->fixture, info.gpu_detail);
        goto done;
    }
    *vocab = info.vocab_size;
    *out = malloc((size_t)(1 + STEPS) * (size_t)info.vocab_size * sizeof(float));
    if (!*out || coli_context_create(m, NULL, &c) != COLI_OK ||
        tu_greedy(c, PROMPT, NP, STEPS, info.vocab_size, *out, NULL) != 0) {
        snprintf(why, cap, "%s: running the prompt: %s", cf->fixture, c ? coli_context_errmsg(c) : "no context");
        goto done;
    }
    /* the device did the work, or (its calls failing) the CPU did it for
     * it from rebuilt host copies */
    coli_gpu_stats gs;
    gs.struct_size = sizeof gs;
    if (cf->gpu && (coli_context_gpu_stats(c, 0, &gs) != COLI_OK ||
                    (cf->fails ? gs.fallback_pairs == 0 : gs.gpu_pairs == 0 || gs.fallback_pairs != 0)))
        snprintf(why, cap, "%s: the device served %llu pairs, %llu fell back", cf->fixture,
                 (unsigned long long)gs.gpu_pairs, (unsigned long long)gs.fallback_pairs);
done:
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
    free(dir);
}

static void *thread_main(void *arg)
{
    job *j = arg;
    int vocab = 0;
    open_and_run(j->cf, &j->got, &vocab, j->why, sizeof j->why);
    if (!j->why[0] && (vocab != j->vocab ||
                       memcmp(j->got, j->want, (size_t)(1 + STEPS) * (size_t)vocab * sizeof(float)) != 0))
        snprintf(j->why, sizeof j->why, "%s: logits differ from the model opened alone", j->cf->fixture);
    return NULL;
}

/* Opens each of the n configurations alone, then N_THREADS models at once
 * (configuration t % n on thread t), and compares. */
static void open_at_once(const conf *cf, int n)
{
    float *want[N_THREADS];
    int vocab[N_THREADS];
    for (int i = 0; i < n; i++) {
        /* the reference: the same model alone, every expert on the CPU */
        conf cpu = {.fixture = cf[i].fixture, .fmt = cf[i].fmt};
        char why[COLI_ERRMSG_MAX + 128];
        open_and_run(&cpu, &want[i], &vocab[i], why, sizeof why);
        ck_assert_msg(!why[0], "alone: %s", why);
    }
    job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        jobs[t] = (job){.cf = &cf[t % n], .want = want[t % n], .vocab = vocab[t % n]};
        ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < N_THREADS; t++)
        ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < N_THREADS; t++) {
        ck_assert_msg(!jobs[t].why[0], "thread %d: %s", t, jobs[t].why);
        free(jobs[t].got);
    }
    for (int i = 0; i < n; i++)
        free(want[i]);
}

static void clear_env(void)
{
    const char *vars[] = {"COLI_CUDA", "COLI_GPU", "COLI_GPUS", "CUDA_EXPERT_GB", "CUDA_RELEASE_HOST",
                          "COLI_GPU_FAIL_AFTER", "COLI_CPU"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

/* Checkpoints loaded in several formats at once, on the CPU. */
START_TEST(test_open_cpu)
{
    clear_env();
    static const conf cf[] = {
        {.fixture = "qwen3_moe", .fmt = COLI_WEIGHTS_Q8},
        {.fixture = "olmoe", .fmt = COLI_WEIGHTS_Q4},
        {.fixture = "mixtral", .fmt = COLI_WEIGHTS_F32},
        {.fixture = "qwen3_moe", .fmt = COLI_WEIGHTS_Q2},
    };
    open_at_once(cf, 4);
}
END_TEST

/* Host copies released at once by several models: q8 experts are small
 * allocations of their own, f32 ones lie in the loader's regions. */
START_TEST(test_release_host)
{
    clear_env();
    use_ops(mock_gpu_ops());
    mock_gpu_setup(1, UINT64_C(1) << 30);
    static const conf cf[] = {
        {.fixture = "qwen3_moe", .fmt = COLI_WEIGHTS_Q8, .gpu = 1, .release_host = 1},
        {.fixture = "olmoe", .fmt = COLI_WEIGHTS_F32, .gpu = 1, .release_host = 1},
    };
    open_at_once(cf, 2);
    use_ops(NULL);
}
END_TEST

/* Every device call after the uploads fails: each model rebuilds its
 * released host copies from its checkpoint while the others do too. */
START_TEST(test_rebuild_host)
{
    clear_env();
    use_ops(mock_gpu_ops());
    mock_gpu_setup(1, UINT64_C(1) << 30);
    /* uploads are fallible calls: 3 per expert, then the output projection */
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    int total = tu_n_experts(dir);
    ck_assert_int_gt(total, 0);
    free(dir);
    char v[32];
    snprintf(v, sizeof v, "%d", 3 * total + 1);
    setenv("COLI_GPU_FAIL_AFTER", v, 1);
    static const conf cf[] = {
        {.fixture = "qwen3_moe", .fmt = COLI_WEIGHTS_Q8, .gpu = 1, .release_host = 1, .fails = 1}};
    open_at_once(cf, 1);
    unsetenv("COLI_GPU_FAIL_AFTER");
    use_ops(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("open");
    tcase_set_timeout(tc, 300); /* ThreadSanitizer is slow */
    tcase_add_test(tc, test_open_cpu);
    tcase_add_test(tc, test_release_host);
    tcase_add_test(tc, test_rebuild_host);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
