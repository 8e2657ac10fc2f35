/* test_experts.c - the GPU expert tier's engine side, on a host mock of
 * the device (tests/mock_gpu.c): logits are the same bits wherever the
 * experts run, the mock really computes what is placed on it, failures
 * fall back to the CPU with a warning, and the options and environment
 * variables are resolved and checked. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "tier/experts.h"
#include "model/options.h"
#include "mock_gpu.h"
#include "model/model.h"
#include "testutil.h"

/* The GPU tier's implementation the next models open with (NULL: the one
 * compiled in): a mock, handed in through their options. */
static const coli__gpu_ops *g_ops;

static void use_ops(const coli__gpu_ops *ops)
{
    g_ops = ops;
}

#define STEPS 4 /* one prefill of the prompt, then greedy decode steps */
static const int32_t PROMPT[] = {1, 5, 9, 23, 7, 42, 3};
#define NP (sizeof PROMPT / sizeof PROMPT[0])

static char g_log[16384];

static void logger(void *user, coli_log_level level, const char *msg)
{
    (void)user;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "[%d] %s\n", (int)level, msg);
}

static void clear_env(void)
{
    const char *vars[] = {"COLI_CUDA", "COLI_GPU", "COLI_GPUS", "CUDA_EXPERT_GB", "CUDA_RELEASE_HOST",
                          "COLI_GPU_FAIL_AFTER"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    g_log[0] = 0;
}

static char *fixture(const char *name)
{
    return tu_path(tu_data_dir(), name);
}

static coli_options *opts_for(coli_weight_format fmt, int gpu)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, 2), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 64), COLI_OK);
    if (gpu >= 0)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, gpu), COLI_OK);
    ck_assert_int_eq(coli_options_set_log(o, logger, NULL, COLI_LOG_DEBUG), COLI_OK);
    coli__options_set_gpu_ops(o, g_ops);
    return o;
}

/* Logits of the prompt and of STEPS - 1 greedy steps after it, and the
 * context's GPU statistics summed over devices. */
typedef struct run {
    float *logits; /* STEPS * vocab */
    int vocab, devices;
    uint64_t resident, pairs, gpu_pairs, fallback;
    double hit;
} run;

static void run_model(coli_model *m, run *r)
{
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    memset(r, 0, sizeof *r);
    r->vocab = info.vocab_size;
    r->devices = info.gpu_devices;
    ck_assert_int_eq(coli_model_gpu_devices(m), info.gpu_devices);
    r->logits = malloc((size_t)STEPS * r->vocab * sizeof(float));
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    ck_assert_int_eq(coli_eval(c, PROMPT, NP), COLI_OK);
    for (int s = 0; s < STEPS; s++) {
        const float *lg = coli_context_logits(c);
        memcpy(r->logits + (size_t)s * r->vocab, lg, (size_t)r->vocab * sizeof(float));
        int32_t best = 0;
        for (int i = 1; i < r->vocab; i++)
            if (lg[i] > lg[best])
                best = i;
        if (s + 1 < STEPS)
            ck_assert_int_eq(coli_eval(c, &best, 1), COLI_OK);
    }
    for (int d = 0; d < r->devices; d++) {
        coli_gpu_stats st;
        st.struct_size = sizeof st;
        ck_assert_int_eq(coli_context_gpu_stats(c, d, &st), COLI_OK);
        r->resident += st.resident_experts;
        r->pairs = st.routed_pairs;
        r->gpu_pairs += st.gpu_pairs;
        r->fallback += st.fallback_pairs;
        r->hit += st.gpu_expert_hit_rate;
    }
    coli_gpu_stats st;
    st.struct_size = sizeof st;
    ck_assert_int_eq(coli_context_gpu_stats(c, r->devices, &st), COLI_ERANGE);
    coli_context_free(c);
}

static void run_dir(const char *dir, coli_options *o, run *r)
{
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "open %s: %s", dir, coli_model_errmsg(m));
    run_model(m, r);
    coli_model_free(m);
}

static void same_logits(const run *a, const run *b, const char *what)
{
    ck_assert_int_eq(a->vocab, b->vocab);
    ck_assert_msg(memcmp(a->logits, b->logits, (size_t)STEPS * a->vocab * sizeof(float)) == 0,
                  "%s: logits differ from the CPU's", what);
}

static const char *const FIXTURES[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite", "glm_moe_dsa"};
#define N_FIXTURES 4
static const coli_weight_format FORMATS[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2};

/* The fixture with top_k raised to 4: three or more terms per token, so a
 * wrong order of the combination changes bits (two terms added to 0 do not
 * show it: a + b == b + a). */
static char *topk4_copy(const char *name)
{
    char *src = fixture(name), *dst = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, dst), 0);
    /* 2 in most fixtures, 3 in glm4_moe */
    if (tu_replace_in_file(dst, "config.json", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 4") != 0)
        ck_assert_int_eq(
            tu_replace_in_file(dst, "config.json", "\"num_experts_per_tok\": 3", "\"num_experts_per_tok\": 4"), 0);
    free(src);
    return dst;
}

/* Placement: all, about half, none; one and two devices. */
static void check_placements(const char *dir, coli_weight_format fmt)
{
    clear_env();
    use_ops(mock_gpu_ops());
    int total = tu_n_experts(dir);
    ck_assert_int_gt(total, 0);
    run cpu, r;
    coli_options *o = opts_for(fmt, 0);
    run_dir(dir, o, &cpu);
    ck_assert_int_eq(cpu.devices, 0);
    coli_options_free(o);

    for (int ndev = 1; ndev <= 2; ndev++) {
        /* everything */
        mock_gpu_setup(ndev, UINT64_C(1) << 30);
        o = opts_for(fmt, 1);
        run_dir(dir, o, &r);
        ck_assert_int_eq(r.devices, ndev);
        ck_assert_int_eq((int)r.resident, total);
        same_logits(&cpu, &r, "all experts on the mock");
        ck_assert_uint_eq(r.gpu_pairs, r.pairs);
        ck_assert(r.hit == 1.0);
        mock_gpu_counts mc;
        for (int d = 0; d < ndev; d++) {
            mock_gpu_get(d, &mc);
            ck_assert_uint_gt(mc.expert_calls, 0);
            ck_assert_int_eq(mc.live, 0); /* released at close */
        }
        /* three matrices an expert, and the output projection once every
         * expert fits, computed there for each evaluated position */
        uint64_t uploads = 0, matmuls = 0;
        for (int d = 0; d < ndev; d++) {
            mock_gpu_get(d, &mc);
            uploads += mc.uploads;
            matmuls += mc.matmul_calls;
        }
        ck_assert_uint_eq(uploads, 3 * (uint64_t)total + 1);
        ck_assert_uint_gt(matmuls, 0);
        free(r.logits);
        coli_options_free(o);

        /* none: a budget of 0 */
        mock_gpu_setup(ndev, UINT64_C(1) << 30);
        o = opts_for(fmt, 1);
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_EXPERT_MB, 0), COLI_OK);
        run_dir(dir, o, &r);
        ck_assert_int_eq(r.devices, ndev);
        ck_assert_int_eq((int)r.resident, 0);
        ck_assert_uint_eq(r.gpu_pairs, 0);
        same_logits(&cpu, &r, "no expert on the mock");
        mock_gpu_get(0, &mc);
        ck_assert_uint_eq(mc.expert_calls, 0);
        free(r.logits);
        coli_options_free(o);
    }
    /* about half: each device holds a quarter (placement spreads layers),
     * on two devices */
    uint64_t bytes_all = 0;
    {
        mock_gpu_setup(1, UINT64_C(1) << 30);
        o = opts_for(fmt, 1);
        coli_model *m = NULL;
        ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
        coli_context *c = NULL;
        ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
        coli_gpu_stats st;
        st.struct_size = sizeof st;
        ck_assert_int_eq(coli_context_gpu_stats(c, 0, &st), COLI_OK);
        bytes_all = st.resident_bytes;
        coli_context_free(c);
        coli_model_free(m);
        coli_options_free(o);
    }
    mock_gpu_setup(2, bytes_all / 4 + bytes_all / 40 + 64); /* 90 % of it: a quarter */
    o = opts_for(fmt, 1);
    run_dir(dir, o, &r);
    ck_assert_int_gt((int)r.resident, 0);
    ck_assert_int_lt((int)r.resident, total);
    ck_assert_uint_gt(r.gpu_pairs, 0);
    ck_assert_uint_lt(r.gpu_pairs, r.pairs);
    ck_assert(r.hit > 0 && r.hit < 1);
    same_logits(&cpu, &r, "part of the experts on two mock devices");
    free(r.logits);
    coli_options_free(o);
    free(cpu.logits);
}

START_TEST(test_placements_bit_identical)
{
    char *dir = fixture(FIXTURES[_i / 3]);
    check_placements(dir, FORMATS[_i % 3]);
    free(dir);
}
END_TEST

START_TEST(test_placements_top4)
{
    char *dir = topk4_copy(FIXTURES[_i / 3]);
    check_placements(dir, FORMATS[_i % 3]);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* Uploads refused for lack of room leave those experts on the CPU. */
START_TEST(test_upload_refused)
{
    clear_env();
    use_ops(mock_gpu_ops());
    char *dir = topk4_copy("qwen3_moe");
    run cpu, r;
    coli_options *o = opts_for(COLI_WEIGHTS_Q4, 0);
    run_dir(dir, o, &cpu);
    coli_options_free(o);
    mock_gpu_setup(1, 8192);
    mock_gpu_report_free(UINT64_C(1) << 30);
    o = opts_for(COLI_WEIGHTS_Q4, 1);
    run_dir(dir, o, &r);
    mock_gpu_counts mc;
    mock_gpu_get(0, &mc);
    ck_assert_uint_gt(mc.refused, 0);
    ck_assert_uint_gt(mc.expert_calls, 0);
    ck_assert_int_gt((int)r.resident, 0);
    ck_assert_ptr_nonnull(strstr(g_log, "could not be uploaded"));
    same_logits(&cpu, &r, "uploads refused");
    free(r.logits);
    free(cpu.logits);
    coli_options_free(o);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* Some uploads refused here and there: CPU experts between resident ones,
 * on two devices, so that the devices' order is not the experts' order. */
START_TEST(test_interleaved)
{
    clear_env();
    use_ops(mock_gpu_ops());
    char *dir = topk4_copy(FIXTURES[_i / 3]);
    coli_weight_format fmt = FORMATS[_i % 3];
    run cpu, r;
    coli_options *o = opts_for(fmt, 0);
    run_dir(dir, o, &cpu);
    coli_options_free(o);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    mock_gpu_refuse_every(4, 1);
    o = opts_for(fmt, 1);
    run_dir(dir, o, &r);
    int total = tu_n_experts(dir);
    ck_assert_int_gt(total, 0);
    ck_assert_int_gt((int)r.resident, 0);
    ck_assert_int_lt((int)r.resident, total);
    mock_gpu_counts a, b;
    mock_gpu_get(0, &a);
    mock_gpu_get(1, &b);
    ck_assert_uint_gt(a.expert_calls, 0);
    ck_assert_uint_gt(b.expert_calls, 0);
    ck_assert_uint_eq(a.rows + b.rows, r.gpu_pairs);
    same_logits(&cpu, &r, "resident and CPU experts interleaved");
    free(r.logits);
    free(cpu.logits);
    coli_options_free(o);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* Injected failures after k device calls: same logits, a warning. */
static void check_faults(const char *dir, coli_weight_format fmt, int release)
{
    clear_env();
    use_ops(mock_gpu_ops());
    run cpu, r;
    coli_options *o = opts_for(fmt, 0);
    run_dir(dir, o, &cpu);
    coli_options_free(o);
    int total = tu_n_experts(dir);
    ck_assert_int_gt(total, 0);
    const int ks[] = {0, 1, 2, 5}; /* of at least 8 calls: 4 passes, 2 MoE layers */
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char v[32];
        g_log[0] = 0;
        /* uploads are fallible calls too: 3 per expert come first, then
         * the output projection's (every expert fits) */
        snprintf(v, sizeof v, "%d", 3 * total + 1 + ks[i]);
        setenv("COLI_GPU_FAIL_AFTER", v, 1);
        mock_gpu_setup(2, UINT64_C(1) << 30);
        o = opts_for(fmt, 1);
        if (release)
            ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_RELEASE_HOST, 1), COLI_OK);
        run_dir(dir, o, &r);
        ck_assert_int_eq((int)r.resident, total);
        same_logits(&cpu, &r, "with injected failures");
        ck_assert_msg(strstr(g_log, "injected failure") != NULL, "k %d: %s", ks[i], g_log);
        ck_assert_ptr_nonnull(strstr(g_log, "[1] GPU device"));
        ck_assert_uint_gt(r.fallback, 0);
        ck_assert_uint_lt(r.gpu_pairs, r.pairs);
        /* one warning per device and kind, then one when it is given up */
        int warnings = 0;
        for (const char *p = g_log; (p = strstr(p, "injected failure")); p++)
            warnings++;
        ck_assert_int_le(warnings, 2);
        if (ks[i] <= 2) /* enough failed calls left for MAX_FAILS in a row */
            ck_assert_msg(strstr(g_log, "failed calls in a row") != NULL, "%s", g_log);
        mock_gpu_counts a, b;
        mock_gpu_get(0, &a);
        mock_gpu_get(1, &b);
        /* the first k calls succeed: experts calls and output projections */
        ck_assert_uint_eq(a.expert_calls + b.expert_calls + a.matmul_calls + b.matmul_calls, (uint64_t)ks[i]);
        free(r.logits);
        coli_options_free(o);
    }
    free(cpu.logits);
}

START_TEST(test_faults)
{
    char *dir = topk4_copy(FIXTURES[_i / 3]);
    check_faults(dir, FORMATS[_i % 3], 0);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_faults_release_host)
{
    char *dir = topk4_copy("olmoe");
    check_faults(dir, COLI_WEIGHTS_Q4, 1);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* CUDA_RELEASE_HOST frees the host copies of resident experts (owned
 * memory: q8 experts of the fixture are malloc'd, under 4 KiB, f32 ones lie
 * in the loader's mapped regions, whose pages are given back) and the
 * logits stay the same. */
START_TEST(test_release_host)
{
    const coli_weight_format fmt = _i == 0 ? COLI_WEIGHTS_Q8 : COLI_WEIGHTS_F32;
    clear_env();
    use_ops(mock_gpu_ops());
    char *dir = fixture("qwen3_moe");
    run cpu, r;
    coli_options *o = opts_for(fmt, 0);
    run_dir(dir, o, &cpu);
    coli_options_free(o);
    mock_gpu_setup(1, UINT64_C(1) << 30);
    setenv("CUDA_RELEASE_HOST", "1", 1);
    o = opts_for(fmt, 1);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
    int released = 0, moe = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->w.layers[l].is_moe) {
            moe++;
            for (int e = 0; e < m->cfg.n_experts; e++) {
                const coli__layer *ly = &m->w.layers[l];
                released += !coli__mat_base(&ly->e_gate[e]) && !coli__mat_base(&ly->e_up[e]) &&
                            !coli__mat_base(&ly->e_down[e]);
            }
        }
    ck_assert_int_eq(released, moe * m->cfg.n_experts);
    run_model(m, &r);
    same_logits(&cpu, &r, "host copies released");
    coli_model_free(m);
    free(r.logits);
    coli_options_free(o);
    /* AUTO keeps the mapped checkpoint: nothing to release, and it says so */
    g_log[0] = 0;
    o = opts_for(COLI_WEIGHTS_AUTO, 1);
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
    ck_assert_ptr_nonnull(m->w.layers[0].e_gate[0].data);
    ck_assert_ptr_nonnull(strstr(g_log, "mapped from the checkpoint"));
    coli_model_free(m);
    coli_options_free(o);
    free(cpu.logits);
    free(dir);
}
END_TEST

static void open_fails_naming(const char *var, const char *value)
{
    clear_env();
    use_ops(mock_gpu_ops());
    mock_gpu_setup(1, UINT64_C(1) << 30);
    setenv(var, value, 1);
    char *dir = fixture("olmoe");
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, NULL, &m);
    ck_assert_msg(st == COLI_EINVAL, "%s=%s: %s", var, value, coli_status_name(st));
    ck_assert_msg(strstr(coli_model_errmsg(m), var) != NULL, "%s", coli_model_errmsg(m));
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), value));
    coli_model_free(m);
    free(dir);
}

START_TEST(test_bad_env)
{
    open_fails_naming("COLI_GPUS", "a,b");
    open_fails_naming("COLI_GPUS", "0,0");
    open_fails_naming("COLI_GPUS", "0,");
    open_fails_naming("COLI_GPU", "0,1");
    open_fails_naming("COLI_GPU", "x");
    open_fails_naming("COLI_CUDA", "yes");
    open_fails_naming("CUDA_EXPERT_GB", "-1");
    open_fails_naming("CUDA_EXPERT_GB", "12GB");
    open_fails_naming("CUDA_RELEASE_HOST", "2");
    open_fails_naming("COLI_GPU_FAIL_AFTER", "-3");
}
END_TEST

START_TEST(test_api_beats_env)
{
    clear_env();
    use_ops(mock_gpu_ops());
    char *dir = fixture("olmoe");
    run r;
    mock_gpu_counts a, b;
    /* COLI_CUDA=1 turns the tier on; the option turns it off */
    setenv("COLI_CUDA", "1", 1);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    coli_options *o = opts_for(COLI_WEIGHTS_Q8, -1);
    run_dir(dir, o, &r);
    ck_assert_int_eq(r.devices, 2);
    free(r.logits);
    coli_options_free(o);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    o = opts_for(COLI_WEIGHTS_Q8, 0);
    run_dir(dir, o, &r);
    ck_assert_int_eq(r.devices, 0);
    mock_gpu_get(0, &a);
    ck_assert_int_eq(a.inits, 0);
    free(r.logits);
    coli_options_free(o);
    /* COLI_GPUS=1 against the option "0" */
    setenv("COLI_GPUS", "1", 1);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    o = opts_for(COLI_WEIGHTS_Q8, -1);
    run_dir(dir, o, &r);
    mock_gpu_get(0, &a);
    mock_gpu_get(1, &b);
    ck_assert_uint_eq(a.uploads, 0);
    ck_assert_uint_gt(b.uploads, 0);
    free(r.logits);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, "0"), COLI_OK);
    run_dir(dir, o, &r);
    mock_gpu_get(0, &a);
    mock_gpu_get(1, &b);
    ck_assert_uint_gt(a.uploads, 0);
    ck_assert_uint_eq(b.uploads, 0);
    free(r.logits);
    /* a bad environment value the API overrides is not read */
    setenv("COLI_GPUS", "a,b", 1);
    run_dir(dir, o, &r);
    free(r.logits);
    /* CUDA_EXPERT_GB against COLI_OPT_GPU_EXPERT_MB 0 */
    setenv("CUDA_EXPERT_GB", "1", 1);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_EXPERT_MB, 0), COLI_OK);
    run_dir(dir, o, &r);
    ck_assert_uint_eq(r.resident, 0);
    free(r.logits);
    unsetenv("CUDA_EXPERT_GB");
    coli_options_free(o);
    free(dir);
}
END_TEST

START_TEST(test_options)
{
    coli_options *o = NULL;
    int64_t v, lo, hi;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    const coli_option ids[] = {COLI_OPT_GPU, COLI_OPT_GPU_EXPERT_MB, COLI_OPT_GPU_RELEASE_HOST};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(coli_options_get(o, ids[i], &v), COLI_OK);
        ck_assert_int_eq(v, -1); /* the environment decides */
        ck_assert_int_eq(coli_option_bounds(ids[i], &lo, &hi), COLI_OK);
        ck_assert_int_eq(lo, -1);
        ck_assert_int_eq(coli_options_set(o, ids[i], -2), COLI_ERANGE);
    }
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, 2), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_EXPERT_MB, 20480), COLI_OK);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_GPU_EXPERT_MB, &v), COLI_OK);
    ck_assert_int_eq(v, 20480);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, "0,1"), COLI_OK);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, "1,x"), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, ""), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, "0,1,0"), COLI_EINVAL);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, NULL), COLI_OK);
    ck_assert_int_eq(coli_options_set_gpu_devices(NULL, "0"), COLI_EINVAL);
    coli_options_free(o);
}
END_TEST

/* The compiled-in tier of a CPU build: the model opens on the CPU, says
 * the GPU is not in use, and warns. A device that is not there, likewise. */
START_TEST(test_tier_unavailable)
{
    clear_env();
    char *dir = fixture("olmoe");
    run cpu, r;
    coli_options *o = opts_for(COLI_WEIGHTS_Q8, 0);
    run_dir(dir, o, &cpu);
    coli_options_free(o);

    use_ops(NULL);
    if (strcmp(coli_gpu_tier(), "none") == 0) {
        int n = -1;
        ck_assert_int_eq(coli_gpu_count(&n), COLI_OK);
        ck_assert_int_eq(n, 0);
        o = opts_for(COLI_WEIGHTS_Q8, 1);
        coli_model *m = NULL;
        ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_OK);
        coli_model_info info;
        info.struct_size = sizeof info;
        ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
        ck_assert_int_eq(info.gpu_devices, 0);
        ck_assert_ptr_nonnull(strstr(info.gpu_detail, "not in use"));
        ck_assert_ptr_nonnull(strstr(g_log, "[1] GPU expert tier requested but"));
        run_model(m, &r);
        same_logits(&cpu, &r, "tier not compiled in");
        free(r.logits);
        coli_model_free(m);
        coli_options_free(o);
    }
    /* the mock without devices, and with device 3 of 2 asked for */
    use_ops(mock_gpu_ops());
    mock_gpu_setup(0, 0);
    g_log[0] = 0;
    o = opts_for(COLI_WEIGHTS_Q8, 1);
    run_dir(dir, o, &r);
    ck_assert_int_eq(r.devices, 0);
    ck_assert_ptr_nonnull(strstr(g_log, "no GPU device is visible"));
    free(r.logits);
    mock_gpu_setup(2, UINT64_C(1) << 30);
    ck_assert_int_eq(coli_options_set_gpu_devices(o, "3"), COLI_OK);
    run_dir(dir, o, &r);
    ck_assert_int_eq(r.devices, 0);
    ck_assert_ptr_nonnull(strstr(g_log, "device 3 was asked for"));
    same_logits(&cpu, &r, "device missing");
    free(r.logits);
    coli_options_free(o);
    /* the mock's devices through the listing the public calls make */
    int n = 0;
    ck_assert_int_eq(coli__gpu_count_of(g_ops, &n), COLI_OK);
    ck_assert_int_eq(n, 2);
    coli_gpu_device d;
    d.struct_size = sizeof d;
    ck_assert_int_eq(coli__gpu_device_of(g_ops, 1, &d), COLI_OK);
    ck_assert_int_eq(d.ordinal, 1);
    ck_assert_str_eq(d.name, "Mock GPU 1");
    ck_assert_int_eq(d.wave, 32);
    ck_assert_int_eq(coli__gpu_device_of(g_ops, 2, &d), COLI_ERANGE);
    ck_assert_str_eq(coli__gpu_tier_of(g_ops), "mock");
    /* the public ones list the implementation compiled in, whatever a
     * model opened with */
    ck_assert_str_ne(coli_gpu_tier(), "mock");
    free(cpu.logits);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("experts");
    TCase *tc = tcase_create("tier");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_placements_bit_identical, 0, 3 * N_FIXTURES);
    tcase_add_loop_test(tc, test_placements_top4, 0, 3 * N_FIXTURES);
    tcase_add_test(tc, test_upload_refused);
    tcase_add_loop_test(tc, test_interleaved, 0, 3 * N_FIXTURES);
    tcase_add_loop_test(tc, test_faults, 0, 3 * N_FIXTURES);
    tcase_add_test(tc, test_faults_release_host);
    tcase_add_loop_test(tc, test_release_host, 0, 2);
    tcase_add_test(tc, test_bad_env);
    tcase_add_test(tc, test_api_beats_env);
    tcase_add_test(tc, test_options);
    tcase_add_test(tc, test_tier_unavailable);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
