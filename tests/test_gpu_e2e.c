/* test_gpu_e2e.c - placement never changes a token: every fixture (and the
 * benchmark models, when COLI_BENCH_MODEL names them: directories apart by
 * ':'; COLI_BENCH_FORMATS, e.g. "q4" or "q8,bf16", keeps their formats to
 * those, for a model too large to run four times; COLI_E2E_THREADS sets
 * the CPU's threads, 4 by default) gives the same logits,
 * bit for bit, in q8, q4, q2 and bf16, on the CPU alone and with the GPU:
 * whole layers on the device with every expert there (decode replayed from
 * a graph), with a budget that holds about half of them (the CPU computing
 * the rest), with the prompt fed one token at a time, and with only the
 * experts on the device; a prompt's prefill and a greedy continuation are
 * compared step by step. Multi-token prediction (the glm4_moe fixture with
 * an MTP layer that repeats the model's prediction, and the models
 * COLI_MTP_MODEL names, apart by ':') gives the same tokens and the same
 * acceptance on every CPU kernel set, with the GPU three ways, and streamed
 * from disk.
 *
 * Needs a device (exit 77 without one, or without the tier compiled in). */
#include <config.h>

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "testutil.h"

#define STEPS 8 /* greedy tokens after the prompt */
#define STR_(x) #x
#define STR(x) STR_(x)

static int64_t g_slots;  /* COLI_OPT_EXPERT_SLOTS for one_run (a converted model) */
static int g_layers = 1; /* COLI_OPT_GPU_LAYERS for one_run */
static int g_tokenwise;  /* one_run feeds the prompt one token at a time */
static int g_kv = COLI_KV_F32; /* COLI_OPT_KV_TYPE for one_run */
static int g_long;       /* one_run's prompt: LONG (1) or VLONG (2) pseudo-random ids */
#define MAX_BENCH 8
static char g_bench[MAX_BENCH][4096]; /* COLI_BENCH_MODEL's directories */
static int g_n_bench;
static int g_threads = 4; /* COLI_E2E_THREADS: the CPU's threads (a large model's CPU runs) */
#define LONG 200         /* within one attention tile with the steps after it: prefill on tensor cores */
#define VLONG 2100       /* past the 8 tiles of the fused attention kernel: its four-kernel path */

typedef struct run {
    float *logits; /* (1 + STEPS) * vocab */
    int32_t tokens[STEPS];
    size_t vocab;
    uint64_t resident_experts, resident_bytes, gpu_pairs, routed_pairs;
    uint64_t dense_bytes, steps, graph_launches, host_syncs;
    int devices;
} run;

/* Opens dir in fmt with the GPU tier on (budget_mb: -1 for the default,
 * else MiB) or off (budget_mb == -2), evaluates the prompt and STEPS greedy
 * tokens, and keeps every logit. */
static void one_run(const char *dir, coli_weight_format fmt, int64_t budget_mb, const char *budget_gb_env, run *r)
{
    memset(r, 0, sizeof *r);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, g_threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, budget_mb == -2 ? 0 : 1), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_EXPERT_SLOTS, g_slots), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_HOTSET, 0), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_LAYERS, g_layers), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, g_kv), COLI_OK);
    if (g_long == 2)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, VLONG + STEPS + 8), COLI_OK);
    if (budget_mb >= 0)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_EXPERT_MB, budget_mb), COLI_OK);
    if (budget_gb_env)
        setenv("CUDA_EXPERT_GB", budget_gb_env, 1);
    else
        unsetenv("CUDA_EXPERT_GB");
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    r->vocab = (size_t)info.vocab_size;
    r->devices = coli_model_gpu_devices(m);
    if (budget_mb != -2)
        ck_assert_msg(r->devices == 1, "%s: the GPU tier is not in use: %s", dir, info.gpu_detail);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_OK);
    const char *text = "In the beginning God created the heaven and the earth.";
    static int32_t ids[VLONG];
    size_t n = 0;
    if (g_long) {
        for (n = 0; n < (g_long == 2 ? VLONG : LONG); n++)
            ids[n] = (int32_t)((n * 7919 + 11) % (size_t)info.vocab_size);
    } else if (coli_tokenize(m, text, strlen(text), 1, ids, 64, &n) != COLI_OK) {
        /* the benchmark model has no tokenizer: fixed ids */
        for (n = 0; n < 12; n++)
            ids[n] = (int32_t)((n * 7919 + 3) % (size_t)info.vocab_size);
    }
    r->logits = malloc((1 + STEPS) * r->vocab * sizeof(float));
    if (g_tokenwise) { /* all but the last: tu_greedy takes it */
        for (size_t i = 0; i + 1 < n; i++)
            ck_assert_msg(coli_eval(c, &ids[i], 1) == COLI_OK, "%s", coli_context_errmsg(c));
        ck_assert_msg(tu_greedy(c, ids + n - 1, 1, STEPS, (int)r->vocab, r->logits, r->tokens) == 0, "%s",
                      coli_context_errmsg(c));
    } else {
        ck_assert_msg(tu_greedy(c, ids, n, STEPS, (int)r->vocab, r->logits, r->tokens) == 0, "%s",
                      coli_context_errmsg(c));
    }
    for (int d = 0; d < r->devices; d++) {
        coli_gpu_stats gs;
        memset(&gs, 0, sizeof gs);
        gs.struct_size = sizeof gs;
        ck_assert_int_eq(coli_context_gpu_stats(c, d, &gs), COLI_OK);
        r->resident_experts += gs.resident_experts;
        r->resident_bytes += gs.resident_bytes;
        r->gpu_pairs += gs.gpu_pairs;
        r->routed_pairs = gs.routed_pairs;
        r->dense_bytes += gs.resident_dense_bytes;
        r->steps += gs.steps;
        r->graph_launches += gs.graph_launches;
        r->host_syncs += gs.host_syncs;
    }
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
}

static void compare(const run *a, const run *b, const char *what)
{
    ck_assert_uint_eq(a->vocab, b->vocab);
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(a->tokens[s] == b->tokens[s], "%s: greedy token %d: %d vs %d", what, s, a->tokens[s],
                      b->tokens[s]);
    size_t n = (1 + STEPS) * a->vocab;
    for (size_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a->logits[i], 4);
        memcpy(&y, &b->logits[i], 4);
        ck_assert_msg(x == y, "%s: logit %zu of step %zu: %.9g vs %.9g", what, i % a->vocab, i / a->vocab,
                      (double)a->logits[i], (double)b->logits[i]);
    }
}

/* Every format, bf16 too, has one order of arithmetic (docs/formats.md),
 * so every comparison is bit for bit; in the mixtral fixture the expert
 * width (48) is not a multiple of 32 and its down projections stay bf16
 * under the quantized formats, which changes nothing. */
static const char *const g_format_names[] = {"q8", "q4", "q2", "bf16"}; /* model_case's, in order */
static const coli_weight_format g_formats[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16};

/* Whether model_case runs format name for a benchmark model. */
static int bench_format_wanted(const char *name)
{
    const char *want = getenv("COLI_BENCH_FORMATS");
    if (!want || !*want)
        return 1;
    size_t n = strlen(name);
    for (const char *p = want; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static void model_case(const char *dir, int every_format)
{
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2,
                                              COLI_WEIGHTS_BF16};
    const char *const *names = g_format_names;
    for (int f = 0; f < 4; f++) {
        if (!every_format && !bench_format_wanted(names[f]))
            continue;
        run cpu, all, half;
        one_run(dir, fmts[f], -2, NULL, &cpu);
        one_run(dir, fmts[f], -1, NULL, &all);
        ck_assert_uint_gt(all.resident_experts, 0);
        ck_assert_uint_eq(all.gpu_pairs, all.routed_pairs); /* every routed pair on the GPU */
        /* a budget of half the bytes all experts took (the variable takes
         * fractional GiB, which fixtures of a few KiB need) */
        char gb[64];
        snprintf(gb, sizeof gb, "%.9f", (double)all.resident_bytes / 2.0 / 1073741824.0);
        one_run(dir, fmts[f], -1, gb, &half);
        ck_assert_msg(half.resident_experts * 10 >= all.resident_experts * 3 &&
                          half.resident_experts * 10 <= all.resident_experts * 6,
                      "%s %s: half budget holds %llu of %llu experts", dir, names[f],
                      (unsigned long long)half.resident_experts, (unsigned long long)all.resident_experts);
        ck_assert_uint_gt(half.gpu_pairs, 0);
        ck_assert_uint_lt(half.gpu_pairs, half.routed_pairs);
        char what[512];
        /* layers on the device: every step there, decode from a graph when
         * every expert is resident, the host's experts in the split */
        ck_assert_msg(all.dense_bytes > 0 && all.steps == 1 + STEPS && all.graph_launches == STEPS &&
                          all.host_syncs == 0,
                      "%s %s: layers on the GPU: %llu dense bytes, %llu steps, %llu graph launches, %llu syncs", dir,
                      names[f], (unsigned long long)all.dense_bytes, (unsigned long long)all.steps,
                      (unsigned long long)all.graph_launches, (unsigned long long)all.host_syncs);
        ck_assert_msg(half.steps == 1 + STEPS && half.host_syncs > 0, "%s %s: split: %llu steps, %llu syncs", dir,
                      names[f], (unsigned long long)half.steps, (unsigned long long)half.host_syncs);
        snprintf(what, sizeof what, "%s %s all experts on the GPU", dir, names[f]);
        compare(&all, &cpu, what);
        snprintf(what, sizeof what, "%s %s half the experts on the GPU", dir, names[f]);
        compare(&half, &cpu, what);
        run tw, only;
        g_tokenwise = 1;
        one_run(dir, fmts[f], -1, NULL, &tw);
        g_tokenwise = 0;
        snprintf(what, sizeof what, "%s %s the prompt one token at a time on the GPU", dir, names[f]);
        compare(&tw, &cpu, what);
        g_layers = 0;
        one_run(dir, fmts[f], -1, NULL, &only);
        g_layers = 1;
        ck_assert_uint_eq(only.dense_bytes, 0);
        snprintf(what, sizeof what, "%s %s only the experts on the GPU", dir, names[f]);
        compare(&only, &cpu, what);
        free(tw.logits);
        free(only.logits);
        /* a prompt long enough for the tensor-core products */
        run lcpu, lgpu;
        g_long = 1;
        one_run(dir, fmts[f], -2, NULL, &lcpu);
        one_run(dir, fmts[f], -1, NULL, &lgpu);
        g_long = 0;
        snprintf(what, sizeof what, "%s %s a prompt of %d tokens, layers on the GPU", dir, names[f], LONG);
        compare(&lgpu, &lcpu, what);
        free(lcpu.logits);
        free(lgpu.logits);
        /* a bf16 KV cache rounds the same values on both sides */
        run kcpu, kgpu;
        g_kv = COLI_KV_BF16;
        one_run(dir, fmts[f], -2, NULL, &kcpu);
        one_run(dir, fmts[f], -1, NULL, &kgpu);
        g_kv = COLI_KV_F32;
        ck_assert_uint_gt(kgpu.steps, 0);
        snprintf(what, sizeof what, "%s %s a bf16 KV cache, layers on the GPU", dir, names[f]);
        compare(&kgpu, &kcpu, what);
        free(kcpu.logits);
        free(kgpu.logits);
        /* serial launches (COLI_GPU_PDL=0; the other runs overlap them
         * where the device can): the decode graph and a long prompt */
        run pgpu, plgpu;
        setenv("COLI_GPU_PDL", "0", 1);
        one_run(dir, fmts[f], -1, NULL, &pgpu);
        g_long = 1;
        one_run(dir, fmts[f], -2, NULL, &lcpu);
        one_run(dir, fmts[f], -1, NULL, &plgpu);
        g_long = 0;
        unsetenv("COLI_GPU_PDL");
        ck_assert_uint_eq(pgpu.graph_launches, STEPS);
        snprintf(what, sizeof what, "%s %s serial launches, layers on the GPU", dir, names[f]);
        compare(&pgpu, &cpu, what);
        snprintf(what, sizeof what, "%s %s serial launches, a prompt of %d tokens", dir, names[f], LONG);
        compare(&plgpu, &lcpu, what);
        free(pgpu.logits);
        free(plgpu.logits);
        free(lcpu.logits);
        printf("%s %s: same tokens and bit-identical logits: CPU; layers and %llu experts on the GPU (%llu graph "
               "launches); layers and %llu of them (%.0f%% of routed pairs, %llu layer syncs); the prompt token by "
               "token; experts only; a bf16 KV cache; a prompt of " STR(LONG) " tokens; serial launches\n",
               dir, names[f], (unsigned long long)all.resident_experts, (unsigned long long)all.graph_launches,
               (unsigned long long)half.resident_experts, 100.0 * (double)half.gpu_pairs / (double)half.routed_pairs,
               (unsigned long long)half.host_syncs);
        /* a converted model: the GPU as the top tier over experts mapped
         * or streamed through a few RAM slots (docs/container.md) */
        char *tmp = tu_mkdtemp(), *out = tu_path(tmp, "out");
        coli_convert_params cp;
        coli_convert_params_init(&cp, sizeof cp);
        cp.weights = fmts[f];
        char err[512];
        ck_assert_msg(coli_convert(dir, out, &cp, err, sizeof err) == COLI_OK, "convert %s: %s", dir, err);
        static const int64_t slot_cases[] = {0, 1};
        for (int k = 0; k < 2; k++) {
            run conv_half;
            /* 1: about 10 % of the model's experts (at least top_k) */
            g_slots = slot_cases[k];
            if (k == 1) {
                coli_model *pm = NULL;
                ck_assert_int_eq(coli_model_open(out, NULL, &pm), COLI_OK);
                coli_model_info pi;
                memset(&pi, 0, sizeof pi);
                pi.struct_size = sizeof pi;
                ck_assert_int_eq(coli_model_get_info(pm, &pi), COLI_OK);
                int64_t total = (int64_t)pi.n_moe_layers * pi.n_experts;
                g_slots = total / 10 > pi.n_experts_active ? total / 10 : pi.n_experts_active;
                coli_model_free(pm);
            }
            one_run(out, fmts[f], -1, gb, &conv_half);
            snprintf(what, sizeof what, "%s %s converted, %lld RAM slots, half the experts on the GPU", dir,
                     names[f], (long long)g_slots);
            compare(&conv_half, &cpu, what);
            ck_assert_uint_gt(conv_half.gpu_pairs, 0);
            printf("%s %s converted, %lld RAM slots (0: mapped): same tokens and bit-identical logits, %llu experts "
                   "on the GPU\n", dir, names[f], (long long)g_slots, (unsigned long long)conv_half.resident_experts);
            free(conv_half.logits);
        }
        g_slots = 0;
        tu_rmtree(tmp);
        free(out);
        free(tmp);
        free(cpu.logits);
        free(all.logits);
        free(half.logits);
    }
}

START_TEST(test_fixtures)
{
    static const char *fixtures[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", tu_data_dir(), fixtures[_i]);
    model_case(dir, 1);
}
END_TEST

START_TEST(test_bench_model)
{
    const char *dir = g_bench[_i];
    model_case(dir, 0);
    /* a prompt past 2048 positions (the fixtures hold 512): the attention
     * of many tiles, in prefill chunks and in the decode graph */
    run cpu, gpu;
    g_long = 2;
    one_run(dir, COLI_WEIGHTS_Q4, -2, NULL, &cpu);
    one_run(dir, COLI_WEIGHTS_Q4, -1, NULL, &gpu);
    g_long = 0;
    ck_assert_uint_eq(gpu.graph_launches, STEPS);
    char what[512];
    snprintf(what, sizeof what, "%s q4 a prompt of %d tokens, layers on the GPU", dir, VLONG);
    compare(&gpu, &cpu, what);
    printf("%s q4: same tokens and bit-identical logits after a prompt of %d tokens\n", dir, VLONG);
    free(cpu.logits);
    free(gpu.logits);
}
END_TEST

/* ---- multi-token prediction: the same acceptance everywhere ------------------ */

#define MTP_TOKENS 64
static char g_mtp[MAX_BENCH][4096]; /* COLI_MTP_MODEL's directories */
static int g_n_mtp;

typedef struct spec {
    int32_t tok[MTP_TOKENS];
    float *logits;
    coli_stats st;
    uint64_t resident_bytes, host_syncs;
} spec;

/* Greedy generation with one draft a step and the guard off: gpu 0 the CPU
 * (kernels: a COLI_OPT_CPU_KERNELS set, 0 the best), else the tier with
 * layers as given; budget_gb: CUDA_EXPERT_GB or NULL; slots: a converted
 * model's expert slots (0: mapped whole). 0, or 1 when the kernel set is
 * not on this machine. */
static int spec_run(const char *dir, coli_weight_format fmt, int gpu, int layers, const char *budget_gb,
                    int kernels, int64_t slots, int64_t context, spec *r)
{
    memset(r, 0, sizeof *r);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, g_threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, gpu), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_LAYERS, layers), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, kernels), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_EXPERT_SLOTS, slots), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_HOTSET, 0), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, context), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP, 1), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP_GUARD, 0), COLI_OK);
    if (budget_gb)
        setenv("CUDA_EXPERT_GB", budget_gb, 1);
    else
        unsetenv("CUDA_EXPERT_GB");
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    if (st != COLI_OK && kernels) {
        coli_model_free(m);
        coli_options_free(o);
        return 1;
    }
    ck_assert_msg(st == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    if (gpu)
        ck_assert_msg(coli_model_gpu_devices(m) == 1, "%s: the GPU tier is not in use", dir);
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_OK);
    const char *text = "In the beginning God created the heaven and the earth.";
    int32_t ids[64];
    size_t n = 0;
    if (coli_tokenize(m, text, strlen(text), 1, ids, 64, &n) != COLI_OK)
        for (n = 0; n < 12; n++)
            ids[n] = (int32_t)((n * 7919 + 3) % (size_t)info.vocab_size);
    coli_sampler *smp = NULL;
    ck_assert_int_eq(coli_sampler_create(NULL, &smp), COLI_OK);
    size_t got = 0;
    st = tu_generate(c, ids, n, MTP_TOKENS, smp, NULL, NULL, r->tok, MTP_TOKENS, &got);
    ck_assert_msg(st == COLI_OK, "%s: %s", dir, coli_context_errmsg(c));
    ck_assert_uint_eq(got, MTP_TOKENS);
    r->logits = malloc((size_t)info.vocab_size * sizeof(float));
    memcpy(r->logits, coli_context_logits(c), (size_t)info.vocab_size * sizeof(float));
    r->st.struct_size = sizeof r->st;
    ck_assert_int_eq(coli_context_stats(c, &r->st), COLI_OK);
    if (gpu) {
        coli_gpu_stats gs;
        memset(&gs, 0, sizeof gs);
        gs.struct_size = sizeof gs;
        ck_assert_int_eq(coli_context_gpu_stats(c, 0, &gs), COLI_OK);
        r->resident_bytes = gs.resident_bytes;
        r->host_syncs = gs.host_syncs;
    }
    coli_sampler_free(smp);
    coli_context_free(c);
    coli_model_free(m);
    coli_options_free(o);
    return 0;
}

static void spec_compare(const spec *a, const spec *b, size_t vocab, const char *what)
{
    for (int i = 0; i < MTP_TOKENS; i++)
        ck_assert_msg(a->tok[i] == b->tok[i], "%s: token %d: %d, the CPU %d", what, i, a->tok[i], b->tok[i]);
    ck_assert_msg(memcmp(a->logits, b->logits, vocab * sizeof(float)) == 0, "%s: the last logits differ", what);
    ck_assert_msg(a->st.mtp_steps == b->st.mtp_steps && a->st.mtp_accepted == b->st.mtp_accepted &&
                      a->st.mtp_drafted == b->st.mtp_drafted,
                  "%s: %llu of %llu drafts accepted in %llu steps; the CPU: %llu of %llu in %llu", what,
                  (unsigned long long)a->st.mtp_accepted, (unsigned long long)a->st.mtp_drafted,
                  (unsigned long long)a->st.mtp_steps, (unsigned long long)b->st.mtp_accepted,
                  (unsigned long long)b->st.mtp_drafted, (unsigned long long)b->st.mtp_steps);
}

/* One model in one format: the CPU with its best kernels is the reference;
 * every kernel set, the GPU tier three ways and the converted model
 * streamed with few slots give its tokens and its acceptance. */
static void mtp_case(const char *dir, coli_weight_format fmt, const char *fname)
{
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    coli_model *probe = NULL;
    ck_assert_int_eq(coli_model_open(dir, NULL, &probe), COLI_OK);
    ck_assert_int_eq(coli_model_get_info(probe, &info), COLI_OK);
    coli_model_free(probe);
    const size_t V = (size_t)info.vocab_size;
    const int64_t ctx = info.max_positions < 1024 ? info.max_positions : 1024;
    spec cpu, r;
    ck_assert_int_eq(spec_run(dir, fmt, 0, 1, NULL, 0, 0, ctx, &cpu), 0);
    char line[2048], what[512];
    int len = snprintf(line, sizeof line, "%s %s MTP: %llu of %llu drafts accepted, %.2f tokens a step, the same "
                       "tokens, logits and acceptance:", dir, fname, (unsigned long long)cpu.st.mtp_accepted,
                       (unsigned long long)cpu.st.mtp_drafted, cpu.st.mtp_tokens_per_step);
    static const char *const kname[] = {"", "scalar", "avx2", "avx512", "amx"};
    for (int k = 1; k <= 4; k++) {
        if (spec_run(dir, fmt, 0, 1, NULL, k, 0, ctx, &r) != 0)
            continue;
        snprintf(what, sizeof what, "%s %s MTP, CPU %s", dir, fname, kname[k]);
        spec_compare(&r, &cpu, V, what);
        free(r.logits);
        len += snprintf(line + len, sizeof line - (size_t)len, " CPU %s;", kname[k]);
    }
    spec all;
    ck_assert_int_eq(spec_run(dir, fmt, 1, 1, NULL, 0, 0, ctx, &all), 0);
    snprintf(what, sizeof what, "%s %s MTP, layers and every expert on the GPU", dir, fname);
    spec_compare(&all, &cpu, V, what);
    len += snprintf(line + len, sizeof line - (size_t)len, " layers and every expert on the GPU;");
    char gb[64];
    snprintf(gb, sizeof gb, "%.9f", (double)all.resident_bytes / 2.0 / 1073741824.0);
    free(all.logits);
    ck_assert_int_eq(spec_run(dir, fmt, 1, 1, gb, 0, 0, ctx, &r), 0);
    ck_assert_uint_gt(r.host_syncs, 0);
    snprintf(what, sizeof what, "%s %s MTP, layers and half the experts on the GPU", dir, fname);
    spec_compare(&r, &cpu, V, what);
    free(r.logits);
    len += snprintf(line + len, sizeof line - (size_t)len, " layers and half the experts on the GPU;");
    ck_assert_int_eq(spec_run(dir, fmt, 1, 0, NULL, 0, 0, ctx, &r), 0);
    snprintf(what, sizeof what, "%s %s MTP, experts only on the GPU", dir, fname);
    spec_compare(&r, &cpu, V, what);
    free(r.logits);
    len += snprintf(line + len, sizeof line - (size_t)len, " experts only on the GPU;");
    if (fmt != COLI_WEIGHTS_F32) { /* converted, streamed from disk through a few slots */
        char *tmp = tu_mkdtemp(), *cont = tu_path(tmp, "c");
        coli_convert_params cp;
        coli_convert_params_init(&cp, sizeof cp);
        cp.weights = fmt;
        char errbuf[512];
        ck_assert_msg(coli_convert(dir, cont, &cp, errbuf, sizeof errbuf) == COLI_OK, "%s", errbuf);
        int64_t slots = (int64_t)info.n_experts_active * 2;
        ck_assert_int_eq(spec_run(cont, COLI_WEIGHTS_AUTO, 0, 1, NULL, 0, slots, ctx, &r), 0);
        snprintf(what, sizeof what, "%s %s MTP, converted and streamed with %lld slots", dir, fname, (long long)slots);
        spec_compare(&r, &cpu, V, what);
        free(r.logits);
        len += snprintf(line + len, sizeof line - (size_t)len, " streamed from disk with %lld expert slots;",
                        (long long)slots);
        tu_rmtree(tmp);
        free(cont);
        free(tmp);
    }
    printf("%s\n", line);
    free(cpu.logits);
}

START_TEST(test_mtp_fixture)
{
    char glm[4096];
    snprintf(glm, sizeof glm, "%s/glm4_moe", tu_data_dir());
    char *tmp = NULL, *echo = tu_mtp_echo_model(glm, &tmp);
    ck_assert_ptr_nonnull(echo);
    static const coli_weight_format f[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16};
    for (int i = 0; i < 4; i++)
        mtp_case(echo, f[i], g_format_names[i]);
    tu_rmtree(tmp);
    free(tmp);
    free(echo);
}
END_TEST

START_TEST(test_mtp_model)
{
    static const coli_weight_format f[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2, COLI_WEIGHTS_BF16};
    for (int i = 0; i < 4; i++)
        if (bench_format_wanted(g_format_names[i]))
            mtp_case(g_mtp[_i], f[i], g_format_names[i]);
}
END_TEST

/* ---- batches: several contexts in one pass, on every tier ---------------------- */

#define BSEQ 4
#define BSTEPS 6

/* Greedy logits of BSEQ sequences, [BSEQ][1 + BSTEPS][vocab]: one after
 * another (batched 0) or through coli_eval_batch, joining at different
 * rounds and decoding together (1). mode: 0 the CPU, 1 layers and every
 * expert on the GPU, 2 layers and half the experts, 3 experts only. */
static float *batch_run(const char *dir, coli_weight_format fmt, int mode, int batched, size_t *vocab_out)
{
    static const int len[BSEQ] = {1, 5, 70, 3}, join[BSEQ] = {0, 0, 1, 3};
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, g_threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 128), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU, mode ? 1 : 0), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_GPU_LAYERS, mode == 3 ? 0 : 1), COLI_OK);
    if (mode == 2)
        setenv("CUDA_EXPERT_GB", "0.0001", 1); /* a budget for a few experts */
    else
        unsetenv("CUDA_EXPERT_GB");
    coli_model *m = NULL;
    ck_assert_msg(coli_model_open(dir, o, &m) == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    ck_assert_msg(coli_model_gpu_devices(m) == (mode ? 1 : 0), "%s: the GPU tier is %s: %s", dir,
                  mode ? "not in use" : "in use", info.gpu_detail);
    size_t V = (size_t)info.vocab_size;
    *vocab_out = V;
    float *all = malloc((size_t)BSEQ * (1 + BSTEPS) * V * sizeof(float));
    ck_assert_ptr_nonnull(all);
    coli_context *c[BSEQ];
    int32_t ids[BSEQ][80], next[BSEQ];
    int done[BSEQ] = {0};
    for (int j = 0; j < BSEQ; j++) {
        ck_assert_int_eq(coli_context_create(m, o, &c[j]), COLI_OK);
        for (int i = 0; i < len[j]; i++)
            ids[j][i] = (int32_t)((i * 37 + 11 * j + 5) % (int)V);
    }
    for (int round = 0;; round++) {
        coli_batch_item it[BSEQ];
        int n = 0;
        for (int j = 0; j < BSEQ; j++) {
            if ((batched && round < join[j]) || done[j] > BSTEPS)
                continue;
            it[n++] = done[j] == 0 ? (coli_batch_item){c[j], ids[j], (size_t)len[j]}
                                   : (coli_batch_item){c[j], &next[j], 1};
            if (!batched)
                break; /* one sequence at a time, to its end */
        }
        if (n == 0)
            break;
        ck_assert_msg(coli_eval_batch(it, (size_t)n) == COLI_OK, "%s: %s", dir, coli_context_errmsg(it[0].ctx));
        for (int k = 0; k < n; k++) {
            int j = (int)(it[k].ctx == c[0] ? 0 : it[k].ctx == c[1] ? 1 : it[k].ctx == c[2] ? 2 : 3);
            const float *l = coli_context_logits(c[j]);
            memcpy(all + ((size_t)j * (1 + BSTEPS) + (size_t)done[j]) * V, l, V * sizeof(float));
            next[j] = tu_argmax(l, (int)V);
            done[j]++;
        }
    }
    for (int j = 0; j < BSEQ; j++)
        coli_context_free(c[j]);
    coli_model_free(m);
    coli_options_free(o);
    unsetenv("CUDA_EXPERT_GB");
    return all;
}

START_TEST(test_batch_tiers)
{
    static const char *fixtures[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe"};
    static const char *modes[] = {"CPU", "layers and every expert on the GPU", "layers and some experts on the GPU",
                                  "experts only on the GPU"};
    char dir[4096], line[1024];
    snprintf(dir, sizeof dir, "%s/%s", tu_data_dir(), fixtures[_i]);
    for (int f = 0; f < 4; f++) {
        size_t V = 0;
        float *ref = batch_run(dir, g_formats[f], 0, 0, &V);
        size_t bytes = (size_t)BSEQ * (1 + BSTEPS) * V * sizeof(float);
        int at = snprintf(line, sizeof line, "%s %s: %d sequences batched (one of 70 tokens), the bits of each alone "
                          "on the CPU:", fixtures[_i], g_format_names[f], BSEQ);
        for (int mode = 0; mode < 4; mode++) {
            float *got = batch_run(dir, g_formats[f], mode, 1, &V);
            ck_assert_msg(memcmp(got, ref, bytes) == 0, "%s %s: batched, %s: logits differ from each sequence alone "
                          "on the CPU", fixtures[_i], g_format_names[f], modes[mode]);
            free(got);
            at += snprintf(line + at, sizeof line - (size_t)at, " %s;", modes[mode]);
        }
        printf("%s\n", line);
        free(ref);
    }
}
END_TEST

/* COLI_BENCH_MODEL, COLI_BENCH_FORMATS and COLI_E2E_THREADS, checked
 * before anything runs: 1 when one of them is wrong (said on stderr). */
static int read_env(void)
{
    /* only when there are some: an absent model is no check, not a pass */
    const char *bench = getenv("COLI_BENCH_MODEL");
    for (const char *p = bench ? bench : ""; *p;) {
        size_t len = strcspn(p, ":");
        if (len >= sizeof g_bench[0] || (len > 0 && g_n_bench == MAX_BENCH)) {
            fprintf(stderr, "test_gpu_e2e: COLI_BENCH_MODEL: at most %d directories of fewer than %zu bytes\n",
                    MAX_BENCH, sizeof g_bench[0]);
            return 1;
        }
        if (len > 0) {
            memcpy(g_bench[g_n_bench], p, len);
            g_bench[g_n_bench++][len] = '\0';
        }
        p += len + (p[len] == ':');
    }
    const char *mtp = getenv("COLI_MTP_MODEL");
    for (const char *p = mtp ? mtp : ""; *p;) {
        size_t len = strcspn(p, ":");
        if (len >= sizeof g_mtp[0] || (len > 0 && g_n_mtp == MAX_BENCH)) {
            fprintf(stderr, "test_gpu_e2e: COLI_MTP_MODEL: at most %d directories of fewer than %zu bytes\n",
                    MAX_BENCH, sizeof g_mtp[0]);
            return 1;
        }
        if (len > 0) {
            memcpy(g_mtp[g_n_mtp], p, len);
            g_mtp[g_n_mtp++][len] = '\0';
        }
        p += len + (p[len] == ':');
    }
    /* a name no case knows would leave a model compared in no format */
    const char *fw = getenv("COLI_BENCH_FORMATS");
    for (const char *p = fw ? fw : ""; *p;) {
        size_t len = strcspn(p, ",");
        int known = 0;
        for (int f = 0; f < 4; f++)
            known |= len == strlen(g_format_names[f]) && strncmp(p, g_format_names[f], len) == 0;
        if (!known) {
            fprintf(stderr, "test_gpu_e2e: COLI_BENCH_FORMATS=%s: \"%.*s\" is not q8, q4, q2 or bf16\n", fw, (int)len,
                    p);
            return 1;
        }
        p += len + (p[len] == ',');
    }
    const char *th = getenv("COLI_E2E_THREADS");
    if (th && *th) {
        char *end;
        long v = strtol(th, &end, 10);
        if (*end || v < 1 || v > 1024) {
            fprintf(stderr, "test_gpu_e2e: COLI_E2E_THREADS=%s: not a thread count (1 to 1024)\n", th);
            return 1;
        }
        g_threads = (int)v;
    }
    return 0;
}

int main(void)
{
    if (read_env())
        return 1;
    int n = 0;
    if (coli_gpu_count(&n) != COLI_OK || n == 0) {
        printf("test_gpu_e2e: SKIP: no GPU device (tier compiled in: %s)\n", coli_gpu_tier());
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each case's line as it passes, even if a timeout stops the rest */
    unsetenv("COLI_CUDA");
    unsetenv("COLI_GPU_FAIL_AFTER");
    setenv("COLI_GPU_POISON", "1", 1); /* every device buffer starts as NaN */
    Suite *s = suite_create("gpu_e2e");
    TCase *tc = tcase_create("placement");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, test_fixtures, 0, 6);
    if (g_n_bench > 0)
        tcase_add_loop_test(tc, test_bench_model, 0, g_n_bench);
    else
        printf("test_gpu_e2e: COLI_BENCH_MODEL not set: the benchmark model is not compared\n");
    tcase_add_loop_test(tc, test_batch_tiers, 0, 4);
    tcase_add_test(tc, test_mtp_fixture);
    if (g_n_mtp > 0)
        tcase_add_loop_test(tc, test_mtp_model, 0, g_n_mtp);
    else
        printf("test_gpu_e2e: COLI_MTP_MODEL not set: only the fixture's MTP is compared\n");
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
