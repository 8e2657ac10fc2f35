/* test_reference.c - the forward pass against transformers.
 *
 * tests/data/<arch>/reference.txt holds what transformers 5.17 computed in
 * float32 from the bf16 weights of the fixture (tools/make-reference.py):
 * last-position logits and a 24-token greedy continuation per prompt, with
 * the top-1/top-2 margins that tell a real mismatch from a near-tie. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "testutil.h"

#define MAX_PROMPTS 8
#define GREEDY 24

typedef struct ref_prompt {
    int n;
    int32_t *ids;
    float *logits;
    float margin;
    int32_t greedy[GREEDY];
    float greedy_margin[GREEDY];
} ref_prompt;

typedef struct ref {
    int vocab;
    int n_prompts;
    ref_prompt p[MAX_PROMPTS];
} ref;

static void ref_free(ref *r)
{
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->p[i].ids);
        free(r->p[i].logits);
    }
}

/* Reads the model records of reference.txt (tokenizer records are skipped). */
static void ref_load(const char *dir, ref *r)
{
    memset(r, 0, sizeof *r);
    char *path = tu_path(dir, "reference.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char key[64];
    while (fscanf(f, "%63s", key) == 1) {
        int p, n;
        if (strcmp(key, "vocab") == 0) {
            ck_assert_int_eq(fscanf(f, "%d", &r->vocab), 1);
        } else if (strcmp(key, "prompt") == 0) {
            ck_assert_int_eq(fscanf(f, "%d %d", &p, &n), 2);
            ck_assert(p >= 0 && p < MAX_PROMPTS && n > 0);
            if (p + 1 > r->n_prompts)
                r->n_prompts = p + 1;
            r->p[p].n = n;
            r->p[p].ids = malloc((size_t)n * sizeof(int32_t));
            for (int i = 0; i < n; i++)
                ck_assert_int_eq(fscanf(f, "%d", &r->p[p].ids[i]), 1);
        } else if (strcmp(key, "logits") == 0) {
            ck_assert_int_eq(fscanf(f, "%d %d", &p, &n), 2);
            ck_assert(p >= 0 && p < MAX_PROMPTS && n == r->vocab);
            r->p[p].logits = malloc((size_t)n * sizeof(float));
            for (int i = 0; i < n; i++)
                ck_assert_int_eq(fscanf(f, "%f", &r->p[p].logits[i]), 1);
        } else if (strcmp(key, "logit_margin") == 0) {
            ck_assert_int_eq(fscanf(f, "%d", &p), 1);
            ck_assert(p >= 0 && p < MAX_PROMPTS);
            ck_assert_int_eq(fscanf(f, "%f", &r->p[p].margin), 1);
        } else if (strcmp(key, "greedy") == 0 || strcmp(key, "greedy_margins") == 0) {
            int is_m = key[6] == '_';
            ck_assert_int_eq(fscanf(f, "%d %d", &p, &n), 2);
            ck_assert(p >= 0 && p < MAX_PROMPTS && n == GREEDY);
            for (int i = 0; i < n; i++) {
                if (is_m)
                    ck_assert_int_eq(fscanf(f, "%f", &r->p[p].greedy_margin[i]), 1);
                else
                    ck_assert_int_eq(fscanf(f, "%d", &r->p[p].greedy[i]), 1);
            }
        }
        /* skip the rest of the line */
        int ch;
        while ((ch = fgetc(f)) != EOF && ch != '\n')
            ;
    }
    fclose(f);
    free(path);
    ck_assert_int_ge(r->n_prompts, 1);
    for (int i = 0; i < r->n_prompts; i++)
        ck_assert_msg(r->p[i].ids && r->p[i].logits, "prompt %d incomplete in %s", i, dir);
}

/* kv: COLI_OPT_KV_TYPE (-1: the default, f32 here). */
static coli_model *open_model_kv(const char *dir, coli_weight_format fmt, int threads, int kv)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, kv), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 256), COLI_OK);
    coli_model *m = NULL;
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "open %s: %s: %s", dir, coli_strerror(st), coli_model_errmsg(m));
    coli_options_free(o);
    return m;
}

static coli_model *open_model(const char *dir, coli_weight_format fmt, int threads)
{
    return open_model_kv(dir, fmt, threads, -1);
}

/* Max |a-b| over the vocabulary, relative to the reference's range. */
static double rel_err(const float *got, const float *want, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = d > e ? d : e;
    }
    return e / tu_range(want, n);
}

/*
 * Checks one model directory against ref. strict: every greedy token must
 * equal (f32 weights). Otherwise a token may differ only where the
 * reference margin is within tol_tok (bf16 rounding), and comparison stops
 * at the first such divergence. Returns the worst relative logit error.
 */
static double check_dir_kv(const char *dir, const ref *r, coli_weight_format fmt, int kv, int threads,
                           double tol_logit, int strict, double tol_tok)
{
    coli_model *m = open_model_kv(dir, fmt, threads, kv);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    double worst = 0;
    for (int p = 0; p < r->n_prompts; p++) {
        const ref_prompt *rp = &r->p[p];
        coli_context_reset(c);
        coli_status st = coli_eval(c, rp->ids, (size_t)rp->n);
        ck_assert_msg(st == COLI_OK, "%s: %s", coli_strerror(st), coli_context_errmsg(c));
        const float *lg = coli_context_logits(c);
        ck_assert_ptr_nonnull(lg);
        double e = rel_err(lg, rp->logits, r->vocab);
        worst = e > worst ? e : worst;
        ck_assert_msg(e <= tol_logit, "%s prompt %d: logit error %.3g of range exceeds %.3g", dir, p, e,
                      tol_logit);
        for (int i = 0; i < GREEDY; i++) {
            int tok = tu_argmax(coli_context_logits(c), r->vocab);
            if (tok != rp->greedy[i]) {
                float range = tu_range(rp->logits, r->vocab);
                ck_assert_msg(!strict && rp->greedy_margin[i] <= tol_tok * range,
                              "%s prompt %d step %d: token %d, transformers %d (margin %.3g)", dir, p, i, tok,
                              rp->greedy[i], rp->greedy_margin[i]);
                break; /* the continuations legitimately diverge from here */
            }
            ck_assert_int_eq(coli_eval(c, &rp->greedy[i], 1), COLI_OK);
        }
    }
    coli_context_free(c);
    coli_model_free(m);
    return worst;
}

static double check_dir(const char *dir, const ref *r, coli_weight_format fmt, int threads, double tol_logit,
                        int strict, double tol_tok)
{
    return check_dir_kv(dir, r, fmt, -1, threads, tol_logit, strict, tol_tok);
}

static const char *ARCHS[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite", "glm_moe_dsa"};
#define N_ARCHS ((int)(sizeof ARCHS / sizeof ARCHS[0]))

/* f32: logits within 1e-4 of the range, every greedy token equal. */
START_TEST(test_f32_matches_transformers)
{
    char *dir = tu_path(tu_data_dir(), ARCHS[_i]);
    ref r;
    ref_load(dir, &r);
    double e = check_dir(dir, &r, COLI_WEIGHTS_F32, 2, 1e-4, 1, 0);
    fprintf(stderr, "%s f32: max logit error %.3g of range\n", ARCHS[_i], e);
    ref_free(&r);
    free(dir);
}
END_TEST

/* bf16 kept as stored: tokens equal wherever the margin exceeds bf16 error. */
START_TEST(test_bf16_matches_transformers)
{
    char *dir = tu_path(tu_data_dir(), ARCHS[_i]);
    ref r;
    ref_load(dir, &r);
    double e = check_dir(dir, &r, COLI_WEIGHTS_BF16, 2, 1e-3, 0, 1e-3);
    fprintf(stderr, "%s bf16: max logit error %.3g of range\n", ARCHS[_i], e);
    ref_free(&r);
    free(dir);
}
END_TEST

/* KL(softmax(a) || softmax(b)) in nats, in double. */
static double kl_logits(const float *a, const float *b, int n)
{
    double ma = a[0], mb = b[0], za = 0, zb = 0, kl = 0;
    for (int i = 1; i < n; i++) {
        ma = a[i] > ma ? a[i] : ma;
        mb = b[i] > mb ? b[i] : mb;
    }
    for (int i = 0; i < n; i++) {
        za += exp(a[i] - ma);
        zb += exp(b[i] - mb);
    }
    for (int i = 0; i < n; i++) {
        double la = a[i] - ma - log(za), lb = b[i] - mb - log(zb);
        kl += exp(la) * (la - lb);
    }
    return kl;
}

/* A bf16 KV cache (docs/formats.md, "The KV cache"): f32 weights still
 * follow transformers, tokens equal wherever the margin exceeds the cache's
 * rounding; and against the f32 cache the logits differ (the rounding is
 * real) but little, token by token over every prompt: a small mean KL, and
 * the top token the same but at a few near-ties (these random fixtures have
 * many; the f32 margin of each flip is checked). */
START_TEST(test_bf16_kv)
{
    char *dir = tu_path(tu_data_dir(), ARCHS[_i]);
    ref r;
    ref_load(dir, &r);
    /* glm4_moe's logits move more with the rounding (3.3e-2 of range at
     * worst, one prompt; the others stay under 9e-3), though its
     * distribution does not: the KL bounds below hold it like the others.
     * The MLA fixtures' cache rounds the latent that every head's key and
     * value come from, at once: their logits stay within 1.2e-2 of range of
     * transformers', but their distributions move more than the others'
     * (deepseek_v3_lite: KL mean 1.2e-2, max 0.62, against under 1.5e-3
     * for the GQA fixtures), and a top token may flip at a margin of 7.5%
     * of the range (deepseek_v3, position 76 of its long prompt). That the
     * bf16 cache computes exactly the f32 cache's arithmetic on rounded
     * latents was checked by hand (the same bits). The sparse fixture
     * (glm_moe_dsa) is compared so only up to its index_topk positions,
     * where attention is dense: past them a rounded indexer key moves the
     * cut (prompt 2, position 30, layer 0: positions 7 and 23, scores
     * 1.3632 and 1.3634, trade places), and this small random model turns
     * one position attended differently into another top token. That is
     * the rounding's real effect on a sparse choice; its greedy tokens
     * against transformers are not held to a margin either. */
    const int dsa = strcmp(ARCHS[_i], "glm_moe_dsa") == 0;
    const int mla = strncmp(ARCHS[_i], "deepseek", 8) == 0 || dsa;
    const double tol = strcmp(ARCHS[_i], "glm4_moe") == 0 || mla ? 5e-2 : 1e-2;
    double e = check_dir_kv(dir, &r, COLI_WEIGHTS_F32, COLI_KV_BF16, 2, tol, 0, dsa ? 1.0 : mla ? 5e-2 : 1e-2);
    coli_model *m = open_model(dir, COLI_WEIGHTS_F32, 2);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 256), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, COLI_KV_BF16), COLI_OK);
    coli_context *cf = NULL, *cb = NULL;
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    const int dense = dsa ? info.index_topk : 1 << 30; /* positions attended alike however keys round */
    ck_assert_int_gt(dense, 0);
    ck_assert_int_eq(coli_context_create(m, NULL, &cf), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, o, &cb), COLI_OK); /* per context: the model's is f32 */
    double worst_kl = 0, sum_kl = 0;
    int differ = 0, positions = 0, flips = 0;
    for (int p = 0; p < r.n_prompts; p++) {
        coli_context_reset(cf);
        coli_context_reset(cb);
        for (int i = 0; i < (r.p[p].n > dense ? dense : r.p[p].n); i++) {
            ck_assert_int_eq(coli_eval(cf, &r.p[p].ids[i], 1), COLI_OK);
            ck_assert_int_eq(coli_eval(cb, &r.p[p].ids[i], 1), COLI_OK);
            const float *a = coli_context_logits(cf), *b = coli_context_logits(cb);
            differ += memcmp(a, b, (size_t)r.vocab * sizeof(float)) != 0;
            double kl = kl_logits(a, b, r.vocab);
            worst_kl = kl > worst_kl ? kl : worst_kl;
            sum_kl += kl;
            positions++;
            int ta = tu_argmax(a, r.vocab), tb = tu_argmax(b, r.vocab);
            if (ta != tb) { /* only a near-tie of the f32 cache may flip */
                flips++;
                float margin = a[ta] - a[tb], range = tu_range(a, r.vocab);
                ck_assert_msg(margin <= (mla ? 0.1f : 0.02f) * range, "prompt %d position %d: top token %d, f32 cache %d, margin %.3g "
                              "of a range %.3g", p, i, tb, ta, (double)margin, (double)range);
            }
        }
    }
    fprintf(stderr, "%s bf16 KV: logit error %.3g of range against transformers; against f32 KV: %d of %d positions "
                    "differ, %d top tokens flip, KL mean %.3g, max %.3g\n",
            ARCHS[_i], e, differ, positions, flips, sum_kl / positions, worst_kl);
    ck_assert_int_eq(differ, positions);
    ck_assert_msg(sum_kl / positions < (mla ? 2e-2 : 5e-3), "mean KL %.3g", sum_kl / positions);
    ck_assert_int_le(flips, positions / 20);
    coli_context_free(cf);
    coli_context_free(cb);
    coli_options_free(o);
    coli_model_free(m);
    ref_free(&r);
    free(dir);
}
END_TEST

/* Logits do not depend on the thread count, nor on whether the prompt is
 * evaluated as one batch or token by token, with an f32 or a bf16 KV cache
 * (each token reads its own rounded key and value back either way): f32
 * widened at load, bf16 read in place (its dot mirrors f32's), and
 * q8/q4/q2, which are quantized at
 * load by as many threads (the output projection's ~1000 rows are 16
 * blocks, shared among them) and whose prefill computes each token's bits
 * as decoding it does (docs/formats.md). */
START_TEST(test_threads_and_batching_invariant)
{
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_F32, COLI_WEIGHTS_BF16, COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4,
                                              COLI_WEIGHTS_Q2};
    const coli_weight_format fmt = fmts[_i % (5 * N_ARCHS) / N_ARCHS];
    const int kv = _i < 5 * N_ARCHS ? COLI_KV_F32 : COLI_KV_BF16;
    char *dir = tu_path(tu_data_dir(), ARCHS[_i % N_ARCHS]);
    ref r;
    ref_load(dir, &r);
    const ref_prompt *rp = &r.p[r.n_prompts - 1];
    float *first = malloc((size_t)r.vocab * sizeof(float));
    for (int threads = 1; threads <= 3; threads++) {
        coli_model *m = open_model_kv(dir, fmt, threads, kv);
        coli_context *c = NULL;
        ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
        ck_assert_int_eq(coli_eval(c, rp->ids, (size_t)rp->n), COLI_OK);
        if (threads == 1)
            memcpy(first, coli_context_logits(c), (size_t)r.vocab * sizeof(float));
        else
            ck_assert_msg(memcmp(first, coli_context_logits(c), (size_t)r.vocab * sizeof(float)) == 0,
                          "%d threads changed the logits", threads);
        coli_context_reset(c);
        for (int i = 0; i < rp->n; i++)
            ck_assert_int_eq(coli_eval(c, &rp->ids[i], 1), COLI_OK);
        ck_assert_msg(memcmp(first, coli_context_logits(c), (size_t)r.vocab * sizeof(float)) == 0,
                      "token-by-token evaluation changed the logits");
        coli_context_free(c);
        coli_model_free(m);
    }
    free(first);
    ref_free(&r);
    free(dir);
}
END_TEST

/* Rewrites the checkpoint with every tensor as F32 (exact) or F16 (exact
 * but for values below f16's normal range): AUTO then computes from that
 * storage and must match the reference as well. */
START_TEST(test_other_dtype_checkpoint)
{
    const int f16 = _i == 1;
    char *src = tu_path(tu_data_dir(), "qwen3_moe");
    char *tmp = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, tmp), 0);
    char *st_path = tu_path(tmp, "model.safetensors");
    /* converted by the test suite's own reader and writer */
    ck_assert_int_eq(tu_st_rewrite(st_path, f16 ? "F16" : "F32", NULL, 0, 0, 0.0f), 0);
    ref r;
    ref_load(src, &r);
    double err = f16 ? check_dir(tmp, &r, COLI_WEIGHTS_AUTO, 2, 1e-3, 0, 1e-3)
                     : check_dir(tmp, &r, COLI_WEIGHTS_AUTO, 2, 1e-4, 1, 0);
    fprintf(stderr, "qwen3_moe stored as %s: max logit error %.3g of range\n", f16 ? "F16" : "F32", err);
    ref_free(&r);
    tu_rmtree(tmp);
    free(tmp);
    free(st_path);
    free(src);
}
END_TEST

/* Last-position logits of prompt 1 in f32. */
static float *logits_of(const char *dir, const ref *r)
{
    coli_model *m = open_model(dir, COLI_WEIGHTS_F32, 2);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    ck_assert_int_eq(coli_eval(c, r->p[1].ids, (size_t)r->p[1].n), COLI_OK);
    float *out = malloc((size_t)r->vocab * sizeof(float));
    memcpy(out, coli_context_logits(c), (size_t)r->vocab * sizeof(float));
    coli_context_free(c);
    coli_model_free(m);
    return out;
}

/* Config spellings real checkpoints use must mean the same model. */
typedef struct variant {
    const char *arch;
    const char *from[2], *to[2];
    int same; /* 1: logits must be identical; 0: must differ (the edit matters) */
} variant;

static const variant VARIANTS[] = {
    /* rope_theta at the top level with rope_scaling null (transformers 4 style),
     * and the num_experts spelling of published Qwen3 configs */
    {"qwen3_moe",
     {"\"rope_parameters\": {\n    \"rope_theta\": 10000.0,\n    \"rope_type\": \"default\"\n  },",
      "\"num_local_experts\": 8"},
     {"\"rope_theta\": 10000.0, \"rope_scaling\": null,", "\"num_experts\": 8"},
     1},
    /* head_dim given where it equals hidden / heads */
    {"olmoe", {"\"hidden_act\"", NULL}, {"\"head_dim\": 16, \"hidden_act\"", NULL}, 1},
    {"mixtral", {"\"head_dim\": null", NULL}, {"\"head_dim\": 16", NULL}, 1},
    /* controls: a different theta or eps must change the logits */
    {"qwen3_moe", {"\"rope_theta\": 10000.0", NULL}, {"\"rope_theta\": 500000.0", NULL}, 0},
    {"mixtral", {"\"rms_norm_eps\": 1e-05", NULL}, {"\"rms_norm_eps\": 0.5", NULL}, 0},
};

START_TEST(test_config_variants)
{
    const variant *v = &VARIANTS[_i];
    char *src = tu_path(tu_data_dir(), v->arch);
    char *tmp = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, tmp), 0);
    for (int k = 0; k < 2 && v->from[k]; k++)
        ck_assert_msg(tu_replace_in_file(tmp, "config.json", v->from[k], v->to[k]) == 0, "%s: no '%s'",
                      v->arch, v->from[k]);
    ref r;
    ref_load(src, &r);
    float *a = logits_of(src, &r), *b = logits_of(tmp, &r);
    int same = memcmp(a, b, (size_t)r.vocab * sizeof(float)) == 0;
    ck_assert_msg(same == v->same, "variant %d of %s: logits %s", _i, v->arch, same ? "unchanged" : "changed");
    free(a);
    free(b);
    ref_free(&r);
    tu_rmtree(tmp);
    free(tmp);
    free(src);
}
END_TEST

/* Sparse attention up to index_topk positions is dense attention: the
 * glm_moe_dsa fixture (index_topk 8, GLM-5.2's shared indexer layers)
 * against its copy with an index_topk past every prompt, token by token,
 * in f32 and q4 weights, f32 and bf16 caches. The first 8 positions give
 * the same bits; past them the indexer drops positions, and the logits
 * move (the fixture's reference, which transformers made with the
 * indexer, is met by the sparse one: test_f32_matches_transformers). */
START_TEST(test_dsa_dense_up_to_topk)
{
    const coli_weight_format fmt = _i & 1 ? COLI_WEIGHTS_Q4 : COLI_WEIGHTS_F32;
    const int kv = _i & 2 ? COLI_KV_BF16 : COLI_KV_F32;
    char *src = tu_path(tu_data_dir(), "glm_moe_dsa");
    char *tmp = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, tmp), 0);
    ck_assert_int_eq(tu_replace_in_file(tmp, "config.json", "\"index_topk\": 8,", "\"index_topk\": 100000,"), 0);
    ref r;
    ref_load(src, &r);
    coli_model *ms = open_model_kv(src, fmt, 2, kv), *md = open_model_kv(tmp, fmt, 2, kv);
    coli_context *cs = NULL, *cd = NULL;
    ck_assert_int_eq(coli_context_create(ms, NULL, &cs), COLI_OK);
    ck_assert_int_eq(coli_context_create(md, NULL, &cd), COLI_OK);
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(ms, &info), COLI_OK);
    const int K = info.index_topk;
    ck_assert_int_eq(K, 8);
    int same = 0, moved = 0;
    for (int p = 0; p < r.n_prompts; p++) {
        coli_context_reset(cs);
        coli_context_reset(cd);
        int moved_here = 0;
        for (int i = 0; i < r.p[p].n && i < 48; i++) {
            ck_assert_int_eq(coli_eval(cs, &r.p[p].ids[i], 1), COLI_OK);
            ck_assert_int_eq(coli_eval(cd, &r.p[p].ids[i], 1), COLI_OK);
            int eq = memcmp(coli_context_logits(cs), coli_context_logits(cd), (size_t)r.vocab * sizeof(float)) == 0;
            if (i < K)
                ck_assert_msg(eq, "prompt %d position %d: sparse and dense attention differ within index_topk", p, i);
            same += eq && i < K;
            moved_here += !eq;
        }
        /* a prompt past index_topk really drops positions */
        ck_assert_msg(r.p[p].n <= K || moved_here > 0, "prompt %d: the indexer dropped nothing", p);
        moved += moved_here;
    }
    ck_assert_int_gt(same, 0);
    ck_assert_int_gt(moved, 0);
    coli_context_free(cs);
    coli_context_free(cd);
    coli_model_free(ms);
    coli_model_free(md);
    ref_free(&r);
    tu_rmtree(tmp);
    free(tmp);
    free(src);
}
END_TEST

/* Latent attention decoding past 512 positions splits each token's work
 * across the threads by positions, heads and dimensions; below, by heads.
 * Either way the logits are the bits of the prompt evaluated at once: the
 * MLA fixtures, told they reach 1024 positions, on 1000 ids, the last 300
 * token by token, with 1, 2 and 3 threads and both caches (the sparse one
 * choosing among them). */
START_TEST(test_mla_long_decode)
{
    static const char *const fx[] = {"deepseek_v3_lite", "glm_moe_dsa"};
    char *src = tu_path(tu_data_dir(), fx[_i / 2]);
    char *tmp = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(src, tmp), 0);
    ck_assert_int_eq(
        tu_replace_in_file(tmp, "config.json", "\"max_position_embeddings\": 512", "\"max_position_embeddings\": 1024"),
        0);
    const int kv = _i % 2 ? COLI_KV_BF16 : COLI_KV_F32, N = 1000, P = 700;
    int32_t ids[1000];
    for (int i = 0; i < N; i++)
        ids[i] = (int32_t)((i * 37 + 11) % 997);
    float *want = NULL;
    int vocab = 0;
    for (int threads = 1; threads <= 3; threads++) {
        for (int whole = 1; whole >= 0; whole--) {
            coli_options *o = NULL;
            ck_assert_int_eq(coli_options_create(&o), COLI_OK);
            ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, kv), COLI_OK);
            ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, threads), COLI_OK);
            ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 1024), COLI_OK);
            coli_model *m = NULL;
            ck_assert_msg(coli_model_open(tmp, o, &m) == COLI_OK, "%s", coli_model_errmsg(m));
            coli_context *c = NULL;
            ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
            if (whole) {
                ck_assert_int_eq(coli_eval(c, ids, N), COLI_OK);
            } else {
                ck_assert_int_eq(coli_eval(c, ids, P), COLI_OK);
                for (int i = P; i < N; i++)
                    ck_assert_int_eq(coli_eval(c, &ids[i], 1), COLI_OK);
            }
            coli_model_info info;
            info.struct_size = sizeof info;
            ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
            vocab = info.vocab_size;
            if (!want) {
                want = malloc((size_t)vocab * sizeof *want);
                memcpy(want, coli_context_logits(c), (size_t)vocab * sizeof *want);
            } else {
                ck_assert_msg(memcmp(want, coli_context_logits(c), (size_t)vocab * sizeof *want) == 0,
                              "%s: %d threads, %s: other logits", fx[_i / 2], threads, whole ? "at once" : "decoded");
            }
            coli_context_free(c);
            coli_model_free(m);
            coli_options_free(o);
        }
    }
    free(want);
    tu_rmtree(tmp);
    free(tmp);
    free(src);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("transformers");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_f32_matches_transformers, 0, N_ARCHS);
    tcase_add_loop_test(tc, test_bf16_matches_transformers, 0, N_ARCHS);
    tcase_add_loop_test(tc, test_bf16_kv, 0, N_ARCHS);
    tcase_add_loop_test(tc, test_threads_and_batching_invariant, 0, 10 * N_ARCHS);
    tcase_add_loop_test(tc, test_other_dtype_checkpoint, 0, 2);
    tcase_add_loop_test(tc, test_config_variants, 0, (int)(sizeof VARIANTS / sizeof VARIANTS[0]));
    tcase_add_loop_test(tc, test_dsa_dense_up_to_topk, 0, 4);
    tcase_add_loop_test(tc, test_mla_long_decode, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
