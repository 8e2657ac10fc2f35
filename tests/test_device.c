/* test_device.c - the layers on a device (lib/tier/device.c), in plain
 * `make check`: over a host mock of the tier whose decoder is a second
 * implementation of docs/formats.md's written order (tests/mock_pipe.c),
 * every fixture gives the CPU's logits bit for bit with every expert on
 * the device, with about half of them (the CPU computing the rest), with a
 * prompt long enough for two attention tiles, and with a bf16 cache, and
 * so do the latent attention fixtures (sparse attention's layers stay on
 * the CPU); a device step that fails hands the context to the CPU with the
 * same bits;
 * a context whose cache does not fit is refused with the numbers. */
#include <check.h>
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

#define STEPS 4
#define LONG 300 /* positions: two attention tiles */

static char g_log[16384];

static void logger(void *user, coli_log_level level, const char *msg)
{
    (void)user;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "[%d] %s\n", (int)level, msg);
}

typedef struct run {
    float *logits; /* (1 + STEPS) * vocab */
    int vocab;
    coli_gpu_stats gs;
    int devices;
} run;

typedef struct how {
    int gpu, layers, kv;
    const char *budget_gb; /* CUDA_EXPERT_GB, or NULL */
    int n_prompt;
    int64_t context;
} how;

static coli_options *opts_of(coli_weight_format fmt, const how *h)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, 2), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, h->context), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, h->gpu), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_LAYERS, h->layers), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, h->kv), COLI_OK);
    ck_assert_int_eq(coli_options_set_log(o, logger, NULL, COLI_LOG_DEBUG), COLI_OK);
    coli__options_set_gpu_ops(o, g_ops);
    return o;
}

static void one_run(const char *dir, coli_weight_format fmt, const how *h, run *r)
{
    memset(r, 0, sizeof *r);
    if (h->budget_gb)
        setenv("CUDA_EXPERT_GB", h->budget_gb, 1);
    else
        unsetenv("CUDA_EXPERT_GB");
    coli_options *o = opts_of(fmt, h);
    coli_model *m = NULL;
    ck_assert_msg(coli_model_open(dir, o, &m) == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    r->vocab = info.vocab_size;
    r->devices = coli_model_gpu_devices(m);
    coli_context *c = NULL;
    ck_assert_msg(coli_context_create(m, o, &c) == COLI_OK, "%s", coli_model_errmsg(m));
    int32_t ids[LONG];
    for (int i = 0; i < h->n_prompt; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % info.vocab_size);
    r->logits = malloc((size_t)(1 + STEPS) * (size_t)r->vocab * sizeof(float));
    ck_assert_msg(tu_greedy(c, ids, (size_t)h->n_prompt, STEPS, r->vocab, r->logits, NULL) == 0, "%s",
                  coli_context_errmsg(c));
    r->gs.struct_size = sizeof r->gs;
    if (r->devices > 0)
        ck_assert_int_eq(coli_context_gpu_stats(c, 0, &r->gs), COLI_OK);
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
}

static void same(const run *a, const run *b, const char *what)
{
    size_t n = (size_t)(1 + STEPS) * (size_t)a->vocab;
    ck_assert_int_eq(a->vocab, b->vocab);
    ck_assert_msg(memcmp(a->logits, b->logits, n * sizeof(float)) == 0, "%s: logits differ from the CPU's", what);
}

/* deepseek_v3 (query LoRA, YaRN) and deepseek_v3_lite (q_proj, one router
 * group): latent attention on the device */
static const char *const FIXTURES[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite"};

START_TEST(test_same_bits)
{
    char *dir = tu_path(tu_data_dir(), FIXTURES[_i]);
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16};
    for (int f = 0; f < 4; f++)
        for (int kv = 0; kv < 2; kv++)
            for (int longp = 0; longp < 2; longp++) {
                how h = {.gpu = 0, .layers = 1, .kv = kv, .budget_gb = NULL, .n_prompt = longp ? LONG : 7,
                         .context = 512};
                run cpu, all, half, only;
                one_run(dir, fmts[f], &h, &cpu);
                h.gpu = 1;
                g_log[0] = 0;
                one_run(dir, fmts[f], &h, &all);
                ck_assert_msg(strstr(g_log, "GPU: every layer runs on device 0") != NULL,
                              "%s format %d kv %d: the log does not say the layers run on the device: %s",
                              FIXTURES[_i], f, kv, g_log);
                ck_assert_uint_gt(all.gs.resident_dense_bytes, 0);
                ck_assert_uint_eq(all.gs.steps, 1 + STEPS);
                ck_assert_uint_eq(all.gs.host_syncs, 0);
                ck_assert_uint_eq(all.gs.gpu_pairs, all.gs.routed_pairs);
                char gb[64];
                snprintf(gb, sizeof gb, "%.9f", (double)all.gs.resident_bytes / 2.0 / 1073741824.0);
                h.budget_gb = gb;
                one_run(dir, fmts[f], &h, &half);
                ck_assert_uint_gt(half.gs.host_syncs, 0);
                ck_assert_uint_gt(half.gs.gpu_pairs, 0);
                ck_assert_uint_lt(half.gs.gpu_pairs, half.gs.routed_pairs);
                h.budget_gb = NULL;
                h.layers = 0;
                one_run(dir, fmts[f], &h, &only);
                ck_assert_uint_eq(only.gs.resident_dense_bytes, 0);
                char what[256];
                snprintf(what, sizeof what, "%s format %d kv %d prompt %d: layers and every expert on the device",
                         FIXTURES[_i], f, kv, h.n_prompt);
                same(&all, &cpu, what);
                snprintf(what, sizeof what, "%s format %d kv %d prompt %d: layers and half the experts", FIXTURES[_i],
                         f, kv, h.n_prompt);
                same(&half, &cpu, what);
                snprintf(what, sizeof what, "%s format %d kv %d prompt %d: experts only", FIXTURES[_i], f, kv,
                         h.n_prompt);
                same(&only, &cpu, what);
                free(cpu.logits);
                free(all.logits);
                free(half.logits);
                free(only.logits);
            }
    free(dir);
}
END_TEST

/* A step that fails on the device: the context re-reads its tokens on the
 * CPU and goes on there, with the same bits, and the log says so. */
START_TEST(test_fallback)
{
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    how h = {.gpu = 0, .layers = 1, .kv = 0, .budget_gb = NULL, .n_prompt = 7, .context = 64};
    run cpu, dev;
    one_run(dir, COLI_WEIGHTS_Q4, &h, &cpu);
    /* the uploads and the context's reservation succeed, then 2 steps */
    mock_gpu_setup(1, UINT64_C(1) << 30);
    h.gpu = 1;
    one_run(dir, COLI_WEIGHTS_Q4, &h, &dev);
    mock_gpu_counts cnt;
    mock_gpu_get(0, &cnt);
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)(cnt.uploads + 1 + 2));
    setenv("COLI_GPU_FAIL_AFTER", n, 1);
    g_log[0] = 0;
    free(dev.logits);
    one_run(dir, COLI_WEIGHTS_Q4, &h, &dev);
    unsetenv("COLI_GPU_FAIL_AFTER");
    ck_assert_msg(strstr(g_log, "continues on the CPU") != NULL, "no word of the fallback in the log: %s", g_log);
    same(&dev, &cpu, "a device step that failed");
    free(cpu.logits);
    free(dev.logits);
    free(dir);
}
END_TEST

/* A context whose cache the device cannot hold is refused, naming the
 * MiB it needs and the positions. */
START_TEST(test_refused)
{
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    mock_gpu_setup(1, UINT64_C(1) << 30);
    how h = {.gpu = 1, .layers = 1, .kv = 0, .budget_gb = NULL, .n_prompt = 7, .context = 64};
    coli_options *o = opts_of(COLI_WEIGHTS_Q8, &h);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
    mock_gpu_counts cnt;
    mock_gpu_get(0, &cnt);
    /* what is left after the dense weights and experts holds the 64
     * positions kept at open, not 512 */
    mock_gpu_setup(1, cnt.used + 64 * 1024);
    coli_options *big = opts_of(COLI_WEIGHTS_Q8, &h);
    ck_assert_int_eq(coli_options_set(big, COLI_OPT_CONTEXT, 512), COLI_OK);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, big, &c), COLI_ENOMEM);
    const char *msg = coli_model_errmsg(m);
    ck_assert_msg(strstr(msg, "512 positions") && strstr(msg, "MiB"), "message: %s", msg);
    ck_assert_ptr_null(c);
    coli_options_free(big);
    coli_model_free(m);
    coli_options_free(o);
    free(dir);
}
END_TEST

/* Multi-token prediction with the decoder on the device: its
 * verifications give every position's logits and states, so the tokens,
 * the last logits and the acceptance are the CPU's, with every expert on
 * the device, about half of them, or experts only; and the context never
 * falls back to the CPU. */
typedef struct spec_run {
    int32_t tok[48];
    float logits[1005];
    coli_stats st;
} spec_run;

static void spec_one(const char *dir, coli_weight_format fmt, const how *h, int mtp, spec_run *r)
{
    if (h->budget_gb)
        setenv("CUDA_EXPERT_GB", h->budget_gb, 1);
    else
        unsetenv("CUDA_EXPERT_GB");
    coli_options *o = opts_of(fmt, h);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP, mtp), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP_GUARD, 0), COLI_OK);
    coli_model *m = NULL;
    ck_assert_msg(coli_model_open(dir, o, &m) == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    coli_context *c = NULL;
    ck_assert_msg(coli_context_create(m, o, &c) == COLI_OK, "%s", coli_model_errmsg(m));
    coli_sampler *smp = NULL;
    ck_assert_int_eq(coli_sampler_create(NULL, &smp), COLI_OK);
    const int32_t prompt[] = {40, 77, 258, 818, 264};
    size_t n = 0;
    g_log[0] = '\0';
    coli_status st = tu_generate(c, prompt, 5, 48, smp, NULL, NULL, r->tok, 48, &n);
    ck_assert_msg(st == COLI_OK, "%s", coli_context_errmsg(c));
    ck_assert_uint_eq(n, 48);
    ck_assert_msg(strstr(g_log, "continues on the CPU") == NULL, "the device gave up: %s", g_log);
    memcpy(r->logits, coli_context_logits(c), sizeof r->logits);
    r->st.struct_size = sizeof r->st;
    ck_assert_int_eq(coli_context_stats(c, &r->st), COLI_OK);
    coli_sampler_free(smp);
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
}

static void spec_same(const spec_run *a, const spec_run *b, const char *what)
{
    ck_assert_msg(memcmp(a->tok, b->tok, sizeof a->tok) == 0, "%s: other tokens", what);
    ck_assert_msg(memcmp(a->logits, b->logits, sizeof a->logits) == 0, "%s: other logits", what);
    ck_assert_msg(a->st.mtp_steps == b->st.mtp_steps && a->st.mtp_accepted == b->st.mtp_accepted &&
                      a->st.mtp_drafted == b->st.mtp_drafted,
                  "%s: %llu of %llu drafts accepted in %llu steps, the CPU %llu of %llu in %llu", what,
                  (unsigned long long)a->st.mtp_accepted, (unsigned long long)a->st.mtp_drafted,
                  (unsigned long long)a->st.mtp_steps, (unsigned long long)b->st.mtp_accepted,
                  (unsigned long long)b->st.mtp_drafted, (unsigned long long)b->st.mtp_steps);
}

START_TEST(test_mtp_same_acceptance)
{
    mock_gpu_setup(1, UINT64_C(1) << 30); /* the tests before may have shrunk it */
    char *glm = tu_path(tu_data_dir(), "glm4_moe");
    char *tmp = NULL, *dir = tu_mtp_echo_model(glm, &tmp);
    ck_assert_ptr_nonnull(dir);
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_BF16};
    for (int f = 0; f < 3; f++) {
        how h = {.gpu = 0, .layers = 1, .kv = 0, .budget_gb = NULL, .n_prompt = 5, .context = 512};
        spec_run cpu, all, half, only, plain;
        spec_one(dir, fmts[f], &h, 2, &cpu);
        ck_assert_uint_gt(cpu.st.mtp_accepted, 0);
        spec_one(dir, fmts[f], &h, 0, &plain);
        ck_assert(memcmp(plain.tok, cpu.tok, sizeof plain.tok) == 0);
        h.gpu = 1;
        spec_one(dir, fmts[f], &h, 2, &all);
        h.budget_gb = "0.0001";
        spec_one(dir, fmts[f], &h, 2, &half);
        h.budget_gb = NULL;
        h.layers = 0;
        spec_one(dir, fmts[f], &h, 2, &only);
        char what[128];
        snprintf(what, sizeof what, "format %d: layers and every expert on the device", (int)fmts[f]);
        spec_same(&all, &cpu, what);
        snprintf(what, sizeof what, "format %d: layers and some experts on the device", (int)fmts[f]);
        spec_same(&half, &cpu, what);
        snprintf(what, sizeof what, "format %d: experts only on the device", (int)fmts[f]);
        spec_same(&only, &cpu, what);
        printf("glm4_moe (MTP drafts the decoder's prediction) format %d: %llu of %llu drafts accepted on the CPU "
               "and with every placement on the device\n",
               (int)fmts[f], (unsigned long long)cpu.st.mtp_accepted, (unsigned long long)cpu.st.mtp_drafted);
    }
    tu_rmtree(tmp);
    free(tmp);
    free(dir);
    free(glm);
}
END_TEST

/* Sparse attention's indexer (glm_moe_dsa) is not in the device pipeline
 * yet: with the GPU on, the layers stay on the CPU and the log says why,
 * the routed experts are still placed on the device, and the bits are the
 * CPU's, for a prompt past index_topk and two attention tiles. */
START_TEST(test_dsa_stays_on_cpu)
{
    mock_gpu_setup(1, UINT64_C(1) << 30);
    char *dir = tu_path(tu_data_dir(), "glm_moe_dsa");
    how h = {.gpu = 0, .layers = 1, .kv = 0, .budget_gb = NULL, .n_prompt = LONG, .context = 512};
    run cpu, gpu;
    one_run(dir, COLI_WEIGHTS_Q8, &h, &cpu);
    g_log[0] = 0;
    h.gpu = 1;
    one_run(dir, COLI_WEIGHTS_Q8, &h, &gpu);
    ck_assert_msg(strstr(g_log, "layers stay on the CPU") &&
                      strstr(g_log, "sparse attention's indexer is not in the device pipeline yet"),
                  "the log does not say why the layers stay: %s", g_log);
    ck_assert_msg(strstr(g_log, "GPU: every layer runs on device 0") == NULL, "the layers went to the device: %s",
                  g_log);
    ck_assert_int_eq(gpu.devices, 1);
    ck_assert_uint_eq(gpu.gs.resident_dense_bytes, 0);
    ck_assert_uint_gt(gpu.gs.gpu_pairs, 0);
    same(&gpu, &cpu, "glm_moe_dsa: experts on the device, layers on the CPU");
    free(cpu.logits);
    free(gpu.logits);
    free(dir);
}
END_TEST

int main(void)
{
    unsetenv("COLI_CUDA");
    unsetenv("COLI_GPU_FAIL_AFTER");
    unsetenv("COLI_KV_TYPE");
    mock_gpu_setup(1, UINT64_C(1) << 30);
    use_ops(mock_gpu_ops_pipe());
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("layers");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_same_bits, 0, (int)(sizeof FIXTURES / sizeof FIXTURES[0]));
    tcase_add_test(tc, test_dsa_stays_on_cpu);
    tcase_add_test(tc, test_fallback);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_mtp_same_acceptance);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    use_ops(NULL);
    return failed ? 1 : 0;
}
