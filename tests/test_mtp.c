/* test_mtp.c - multi-token prediction on the glm4_moe fixture.
 *
 * tests/data/glm4_moe holds an MTP layer drawn by tools/make-mtp-reference.py,
 * which also computed in float32, with an MTP step written from the notes
 * (not transformers' code), the draft logits of every pair (h_i, t_{i+1})
 * of each prompt: mtp_pairs (the tokens t_{i+1}, the last one the greedy
 * token after the prompt), mtp_argmax and its margins, and the full
 * logits of the last pair (mtp_logits).
 *
 * Then the promises: greedy and sampled output token for token the same
 * with drafts as without, the acceptance rule's rate against the target
 * probabilities, statistics that add up, and the same acceptance with
 * every format, kernel set, thread count and tier the CPU build has. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "testutil.h"

#define MAX_PROMPTS 8

typedef struct mref {
    int vocab, n;
    int n_ids[MAX_PROMPTS], n_pairs[MAX_PROMPTS];
    int32_t *ids[MAX_PROMPTS], *pairs[MAX_PROMPTS], *argmax[MAX_PROMPTS];
    float *margins[MAX_PROMPTS], *logits[MAX_PROMPTS];
} mref;

static const char *fixture(void)
{
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/glm4_moe", tu_data_dir());
    return dir;
}

static void read_ints(FILE *f, int32_t **out, int n)
{
    *out = malloc((size_t)n * sizeof **out);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(fscanf(f, "%d", &(*out)[i]), 1);
}

static void read_floats(FILE *f, float **out, int n)
{
    *out = malloc((size_t)n * sizeof **out);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(fscanf(f, "%f", &(*out)[i]), 1);
}

static void mref_load(mref *r)
{
    memset(r, 0, sizeof *r);
    char *path = tu_path(fixture(), "reference.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char key[64];
    while (fscanf(f, "%63s", key) == 1) {
        int p = 0, n = 0;
        if (strcmp(key, "vocab") == 0) {
            ck_assert_int_eq(fscanf(f, "%d", &r->vocab), 1);
        } else if (strcmp(key, "prompt") == 0 || strncmp(key, "mtp_", 4) == 0) {
            if (strcmp(key, "mtp_margin") == 0) { /* one number: the last pair's, in the margins too */
                ck_assert_int_eq(fscanf(f, "%d", &p), 1);
            } else {
                ck_assert_int_eq(fscanf(f, "%d %d", &p, &n), 2);
                ck_assert(p >= 0 && p < MAX_PROMPTS && n > 0);
                if (p + 1 > r->n)
                    r->n = p + 1;
                if (strcmp(key, "prompt") == 0) {
                    r->n_ids[p] = n;
                    read_ints(f, &r->ids[p], n);
                } else if (strcmp(key, "mtp_pairs") == 0) {
                    r->n_pairs[p] = n;
                    read_ints(f, &r->pairs[p], n);
                } else if (strcmp(key, "mtp_argmax") == 0) {
                    read_ints(f, &r->argmax[p], n);
                } else if (strcmp(key, "mtp_argmax_margins") == 0) {
                    read_floats(f, &r->margins[p], n);
                } else if (strcmp(key, "mtp_logits") == 0) {
                    ck_assert_int_eq(n, r->vocab);
                    read_floats(f, &r->logits[p], n);
                }
            }
        }
        int ch;
        while ((ch = fgetc(f)) != EOF && ch != '\n')
            ;
    }
    fclose(f);
    free(path);
    ck_assert_int_ge(r->n, 1);
    for (int p = 0; p < r->n; p++)
        ck_assert_msg(r->ids[p] && r->pairs[p] && r->argmax[p] && r->margins[p] && r->logits[p] &&
                          r->n_pairs[p] == r->n_ids[p],
                      "prompt %d's MTP records are incomplete", p);
}

static void mref_free(mref *r)
{
    for (int p = 0; p < r->n; p++) {
        free(r->ids[p]);
        free(r->pairs[p]);
        free(r->argmax[p]);
        free(r->margins[p]);
        free(r->logits[p]);
    }
}

/* The settings a test varies; 0 or -1 leave the option at its default. */
typedef struct setup {
    coli_weight_format fmt;
    int mtp, guard, kernels, threads;
    const char *dir; /* NULL: the fixture */
    int64_t budget_mb, slots;
} setup;

static coli_options *options_of(const setup *s)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, s->fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, s->threads ? s->threads : 2), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 256), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP, s->mtp), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP_GUARD, s->guard), COLI_OK);
    if (s->kernels)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, s->kernels), COLI_OK);
    if (s->budget_mb)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_MEM_BUDGET_MB, s->budget_mb), COLI_OK);
    if (s->slots)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_EXPERT_SLOTS, s->slots), COLI_OK);
    return o;
}

static coli_model *open_with(const setup *s)
{
    coli_options *o = options_of(s);
    coli_model *m = NULL;
    const char *dir = s->dir ? s->dir : fixture();
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "open %s: %s: %s", dir, coli_strerror(st), coli_model_errmsg(m));
    coli_options_free(o);
    return m;
}

static coli_context *context_of(coli_model *m, const setup *s)
{
    coli_options *o = options_of(s);
    coli_context *c = NULL;
    coli_status st = coli_context_create(m, o, &c);
    ck_assert_msg(st == COLI_OK, "context: %s: %s", coli_strerror(st), coli_model_errmsg(m));
    coli_options_free(o);
    return c;
}

/* The MTP layer's logits of every pair against the reference: the
 * argmax wherever the reference's margin is clear of rounding, and the
 * last pair's logits within tol of their range. Pairs are drafted one
 * position at a time, so every pair but the first of each prompt pairs a
 * state kept from an earlier call. */
static double check_reference(coli_weight_format fmt, double tol, double tol_tok, int min_checked)
{
    mref r;
    mref_load(&r);
    setup s = {.fmt = fmt, .mtp = 1, .guard = 0};
    coli_model *m = open_with(&s);
    coli_context *c = context_of(m, &s);
    float *lg = malloc((size_t)r.vocab * sizeof *lg);
    double worst = 0;
    int checked = 0;
    for (int p = 0; p < r.n; p++) {
        coli_context_reset(c);
        float range = tu_range(r.logits[p], r.vocab);
        for (int i = 0; i < r.n_ids[p]; i++) {
            ck_assert_int_eq(coli_eval(c, &r.ids[p][i], 1), COLI_OK);
            coli_status st = coli_context_mtp_logits(c, r.pairs[p][i], lg);
            ck_assert_msg(st == COLI_OK, "%s", coli_context_errmsg(c));
            int got = tu_argmax(lg, r.vocab);
            if (r.margins[p][i] > tol_tok * range) {
                ck_assert_msg(got == r.argmax[p][i], "format %d prompt %d pair %d: draft %d, reference %d (margin %g)",
                              (int)fmt, p, i, got, r.argmax[p][i], r.margins[p][i]);
                checked++;
            }
        }
        double e = 0;
        for (int v = 0; v < r.vocab; v++)
            e = fmax(e, fabs((double)lg[v] - r.logits[p][v]));
        e /= range;
        worst = fmax(worst, e);
        ck_assert_msg(e <= tol, "format %d prompt %d: MTP logits off by %.3g of their range (tolerance %.3g)",
                      (int)fmt, p, e, tol);
    }
    ck_assert_int_ge(checked, min_checked); /* the argmax test must not pass by skipping */
    free(lg);
    coli_context_free(c);
    coli_model_free(m);
    mref_free(&r);
    return worst;
}

START_TEST(mtp_logits_f32)
{
    double e = check_reference(COLI_WEIGHTS_F32, 1e-5, 1e-4, 40);
    printf("MTP layer, f32 weights: largest error %.3g of the logit range\n", e);
}
END_TEST

START_TEST(mtp_logits_other_formats)
{
    /* bf16 keeps the fixture's bf16 weights exactly: as close as f32 */
    double e = check_reference(COLI_WEIGHTS_BF16, 1e-5, 1e-4, 40);
    printf("MTP layer, bf16 weights: largest error %.3g of the logit range\n", e);
    /* q8 and q4 round the decoder's state and the MTP layer both; on this
     * small random model that moves the logits by some hundredths of their
     * range, far less than a wrong piece would (a swapped concatenation
     * or the decoder's norm in place of the head's: most of the range) */
    e = check_reference(COLI_WEIGHTS_Q8, 0.1, 1, 0);
    printf("MTP layer, q8 weights: largest error %.3g of the logit range\n", e);
    e = check_reference(COLI_WEIGHTS_Q4, 0.3, 1, 0);
    printf("MTP layer, q4 weights: largest error %.3g of the logit range\n", e);
}
END_TEST

/* One generation's tokens, final logits and statistics. */
typedef struct run {
    int32_t tok[96];
    size_t n;
    float *logits;
    coli_stats st;
} run;

static void generate(const setup *s, const coli_sampler_params *sp, const int32_t *prompt, size_t n_prompt,
                     size_t max, run *out)
{
    coli_model *m = open_with(s);
    coli_context *c = context_of(m, s);
    coli_sampler *smp = NULL;
    ck_assert_int_eq(coli_sampler_create(sp, &smp), COLI_OK);
    memset(out, 0, sizeof *out);
    coli_status st = tu_generate(c, prompt, n_prompt, max, smp, NULL, NULL, out->tok, 96, &out->n);
    ck_assert_msg(st == COLI_OK, "%s", coli_context_errmsg(c));
    ck_assert_uint_eq(out->n, max);
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    out->logits = malloc((size_t)info.vocab_size * sizeof(float));
    memcpy(out->logits, coli_context_logits(c), (size_t)info.vocab_size * sizeof(float));
    out->st.struct_size = sizeof out->st;
    ck_assert_int_eq(coli_context_stats(c, &out->st), COLI_OK);
    coli_sampler_free(smp);
    coli_context_free(c);
    coli_model_free(m);
}

static void run_free(run *r)
{
    free(r->logits);
}

/* The statistics add up: every token of the generation after the first
 * came from a verification or a plain step. */
static void check_stats(const run *r, int k)
{
    const coli_stats *s = &r->st;
    ck_assert_uint_le(s->mtp_accepted, s->mtp_drafted);
    ck_assert_uint_le(s->mtp_drafted, (uint64_t)k * s->mtp_steps);
    ck_assert_uint_eq(s->mtp_tokens, s->mtp_accepted + s->mtp_steps);
    /* max tokens: the first is sampled from the prompt, the last evaluated plainly */
    ck_assert_uint_eq(s->decode_tokens, s->mtp_tokens + s->mtp_plain_tokens + 1);
    ck_assert_uint_eq(s->decode_tokens, r->n);
    if (s->mtp_drafted)
        ck_assert(fabs(s->mtp_accept_rate - (double)s->mtp_accepted / (double)s->mtp_drafted) < 1e-12);
    if (s->mtp_steps)
        ck_assert(fabs(s->mtp_tokens_per_step - (double)s->mtp_tokens / (double)s->mtp_steps) < 1e-12);
}

static const int32_t PROMPT[] = {40, 77, 258, 818, 264};
#define N_PROMPT (sizeof PROMPT / sizeof PROMPT[0])

/* Greedy: the same tokens and the same bits of the last logits with any
 * number of drafts as without, in every format. */
START_TEST(greedy_unchanged)
{
    const coli_weight_format f[] = {COLI_WEIGHTS_F32, COLI_WEIGHTS_BF16, COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4,
                                    COLI_WEIGHTS_Q2};
    coli_sampler_params sp;
    coli_sampler_params_init(&sp, sizeof sp);
    char *tmp, *echo = tu_mtp_echo_model(fixture(), &tmp);
    ck_assert_ptr_nonnull(echo);
    for (int i = 0; i < 5; i++) {
        run plain, spec;
        setup s0 = {.fmt = f[i], .mtp = 0, .dir = echo};
        generate(&s0, &sp, PROMPT, N_PROMPT, 48, &plain);
        ck_assert_uint_eq(plain.st.mtp_steps, 0);
        for (int k = 1; k <= 3; k++) {
            setup s = {.fmt = f[i], .mtp = k, .guard = 0, .dir = echo};
            generate(&s, &sp, PROMPT, N_PROMPT, 48, &spec);
            for (size_t t = 0; t < plain.n; t++)
                ck_assert_msg(spec.tok[t] == plain.tok[t], "format %d, %d drafts: token %zu is %d, without %d",
                              (int)f[i], k, t, spec.tok[t], plain.tok[t]);
            ck_assert_msg(memcmp(spec.logits, plain.logits, 1005 * sizeof(float)) == 0,
                          "format %d, %d drafts: the last logits differ", (int)f[i], k);
            check_stats(&spec, k);
            ck_assert_uint_gt(spec.st.mtp_accepted, 0); /* both ways through a step are taken */
            ck_assert_uint_lt(spec.st.mtp_accepted, spec.st.mtp_drafted);
            printf("format %d, %d drafts: %llu steps, %llu of %llu drafts accepted, %.2f tokens a step, "
                   "%llu extra experts\n",
                   (int)f[i], k, (unsigned long long)spec.st.mtp_steps, (unsigned long long)spec.st.mtp_accepted,
                   (unsigned long long)spec.st.mtp_drafted, spec.st.mtp_tokens_per_step,
                   (unsigned long long)spec.st.mtp_extra_experts);
            run_free(&spec);
        }
        run_free(&plain);
    }
    tu_rmtree(tmp);
    free(tmp);
    free(echo);
}
END_TEST

/* Sampling: the same seed gives the same tokens with drafts as without. */
START_TEST(sampled_unchanged)
{
    coli_sampler_params sp;
    coli_sampler_params_init(&sp, sizeof sp);
    sp.temperature = 0.8f;
    sp.top_p = 0.95f;
    sp.repeat_penalty = 1.1f;
    char *tmp, *echo = tu_mtp_echo_model(fixture(), &tmp);
    ck_assert_ptr_nonnull(echo);
    uint64_t accepted = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        sp.seed = seed;
        run plain, spec;
        setup s0 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 0, .dir = echo};
        setup s1 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 2, .guard = 0, .dir = echo};
        generate(&s0, &sp, PROMPT, N_PROMPT, 40, &plain);
        generate(&s1, &sp, PROMPT, N_PROMPT, 40, &spec);
        for (size_t t = 0; t < plain.n; t++)
            ck_assert_msg(spec.tok[t] == plain.tok[t], "seed %llu: token %zu is %d, without drafts %d",
                          (unsigned long long)seed, t, spec.tok[t], plain.tok[t]);
        check_stats(&spec, 2);
        accepted += spec.st.mtp_accepted;
        run_free(&plain);
        run_free(&spec);
    }
    ck_assert_uint_gt(accepted, 0);
    tu_rmtree(tmp);
    free(tmp);
    free(echo);
}
END_TEST

/* The acceptance rule: with temperature, a draft d is accepted with the
 * target's probability p(d). Over many seeds, the drafts accepted match
 * the sum of p(d) computed here from the decoder's logits (softmax at the
 * temperature), within four standard deviations. */
START_TEST(acceptance_rate)
{
    const float temp = 0.7f;
    char *tmp, *echo = tu_mtp_echo_model(fixture(), &tmp);
    ck_assert_ptr_nonnull(echo);
    setup s = {.fmt = COLI_WEIGHTS_Q8, .mtp = 1, .guard = 0, .dir = echo};
    coli_model *m = open_with(&s);
    coli_context *c = context_of(m, &s);
    setup s0 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 0, .dir = echo};
    coli_context *ref = context_of(m, &s0);
    enum { V = 1005, SEEDS = 400 };
    float *lg = malloc(V * sizeof *lg);
    double expect = 0, var = 0;
    uint64_t accepted = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        coli_sampler_params sp;
        coli_sampler_params_init(&sp, sizeof sp);
        sp.temperature = temp;
        sp.seed = seed;
        coli_sampler *smp = NULL;
        ck_assert_int_eq(coli_sampler_create(&sp, &smp), COLI_OK);
        coli_context_reset(c);
        coli_context_stats_reset(c);
        int32_t out[3];
        size_t n = 0;
        /* x0 from the prompt, then one step: draft d after x0, x1 sampled
         * from the logits after x0 and accepted when it is d */
        ck_assert_int_eq(tu_generate(c, PROMPT, N_PROMPT, 3, smp, NULL, NULL, out, 3, &n), COLI_OK);
        coli_stats st;
        st.struct_size = sizeof st;
        ck_assert_int_eq(coli_context_stats(c, &st), COLI_OK);
        ck_assert_uint_ge(st.mtp_steps, 1);
        /* the first step's draft and its probability, recomputed */
        coli_context_reset(ref);
        ck_assert_int_eq(coli_eval(ref, PROMPT, N_PROMPT), COLI_OK);
        /* the draft: the MTP layer's argmax after x0, from the prompt again */
        coli_context_reset(c);
        ck_assert_int_eq(coli_eval(c, PROMPT, N_PROMPT), COLI_OK);
        ck_assert_int_eq(coli_context_mtp_logits(c, out[0], lg), COLI_OK);
        int32_t d = tu_argmax(lg, V);
        ck_assert_int_eq(coli_eval(ref, &out[0], 1), COLI_OK);
        const float *t = coli_context_logits(ref);
        double mx = t[0], z = 0;
        for (int v = 1; v < V; v++)
            mx = t[v] > mx ? t[v] : mx;
        for (int v = 0; v < V; v++)
            z += exp(((double)t[v] - mx) / temp);
        double p = exp(((double)t[d] - mx) / temp) / z;
        expect += p;
        var += p * (1 - p);
        int acc = out[1] == d;
        accepted += (uint64_t)acc;
        /* the first step's acceptance is in the statistics */
        ck_assert_uint_ge(st.mtp_accepted, (uint64_t)acc);
        coli_sampler_free(smp);
    }
    double sd = sqrt(var);
    printf("acceptance over %d seeds: %llu drafts accepted, %.1f expected (sd %.1f)\n", SEEDS,
           (unsigned long long)accepted, expect, sd);
    ck_assert_msg(fabs((double)accepted - expect) <= 4 * sd + 1, "accepted %llu, expected %.1f +- %.1f",
                  (unsigned long long)accepted, expect, sd);
    ck_assert(expect > 20 && expect < SEEDS - 20); /* a rule that always or never accepts would fail */
    free(lg);
    coli_context_free(ref);
    coli_context_free(c);
    coli_model_free(m);
    tu_rmtree(tmp);
    free(tmp);
    free(echo);
}
END_TEST

/* The MTP cache follows the positions: drafting after a prompt evaluated
 * at once, token by token, or cut back and evaluated again gives the same
 * bits. */
START_TEST(cache_follows_positions)
{
    setup s = {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0};
    coli_model *m = open_with(&s);
    coli_context *c = context_of(m, &s);
    enum { V = 1005 };
    float a[V], b[V];
    ck_assert_int_eq(coli_eval(c, PROMPT, N_PROMPT), COLI_OK);
    ck_assert_int_eq(coli_context_mtp_logits(c, 7, a), COLI_OK);
    coli_context_reset(c);
    for (size_t i = 0; i < N_PROMPT; i++)
        ck_assert_int_eq(coli_eval(c, &PROMPT[i], 1), COLI_OK);
    ck_assert_int_eq(coli_context_mtp_logits(c, 7, b), COLI_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    /* a draft for another token, then the context moves on and back */
    ck_assert_int_eq(coli_context_mtp_logits(c, 9, b), COLI_OK);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    int32_t more[] = {5, 6, 7};
    ck_assert_int_eq(coli_eval(c, more, 3), COLI_OK);
    ck_assert_int_eq(coli_context_truncate(c, N_PROMPT), COLI_OK);
    ck_assert_int_eq(coli_context_mtp_logits(c, 7, b), COLI_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    /* cut into the prompt: the state of the last position kept is made again */
    ck_assert_int_eq(coli_context_truncate(c, N_PROMPT - 3), COLI_OK);
    ck_assert_int_eq(coli_eval(c, PROMPT + N_PROMPT - 3, 3), COLI_OK);
    ck_assert_int_eq(coli_context_mtp_logits(c, 7, b), COLI_OK);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    coli_context_free(c);
    coli_model_free(m);
}
END_TEST

START_TEST(refusals)
{
    /* a model without an MTP layer */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/qwen3_moe", tu_data_dir());
    setup s = {.fmt = COLI_WEIGHTS_Q8, .mtp = 1, .dir = dir};
    coli_options *o = options_of(&s);
    coli_model *m = NULL;
    ck_assert_int_eq(coli_model_open(dir, o, &m), COLI_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "COLI_OPT_MTP"));
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "num_nextn_predict_layers"));
    coli_model_free(m);
    coli_options_free(o);
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP, 9), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_MTP, -1), COLI_ERANGE);
    coli_options_free(o);
    /* a model opened without it cannot draft */
    setup s0 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 0};
    m = open_with(&s0);
    setup s1 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 1};
    o = options_of(&s1);
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_model_errmsg(m), "without its MTP layer"));
    coli_options_free(o);
    c = context_of(m, &s0);
    float lg[1005];
    ck_assert_int_eq(coli_context_mtp_logits(c, 1, lg), COLI_ESTATE);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(c), "COLI_OPT_MTP"));
    coli_context_free(c);
    coli_model_free(m);
    /* bad arguments */
    m = open_with(&s1);
    c = context_of(m, &s1);
    ck_assert_int_eq(coli_context_mtp_logits(c, 1, lg), COLI_ESTATE); /* nothing evaluated */
    ck_assert_int_eq(coli_eval(c, PROMPT, 2), COLI_OK);
    ck_assert_int_eq(coli_context_mtp_logits(c, 1005, lg), COLI_EINVAL);
    ck_assert_int_eq(coli_context_mtp_logits(c, -1, lg), COLI_EINVAL);
    ck_assert_int_eq(coli_context_mtp_logits(c, 1, NULL), COLI_EINVAL);
    ck_assert_int_eq(coli_context_mtp_logits(NULL, 1, lg), COLI_EINVAL);
    coli_context_free(c);
    coli_model_free(m);
}
END_TEST

/* The same tokens and the same acceptance on every CPU kernel set and
 * thread count, and from a converted container in RAM or streamed from
 * disk with two expert slots. */
START_TEST(same_acceptance_everywhere)
{
    coli_sampler_params sp;
    coli_sampler_params_init(&sp, sizeof sp);
    char *tmp, *echo = tu_mtp_echo_model(fixture(), &tmp);
    ck_assert_ptr_nonnull(echo);
    char *cont = tu_path(tmp, "q4");
    coli_convert_params cp;
    coli_convert_params_init(&cp, sizeof cp);
    cp.weights = COLI_WEIGHTS_Q4;
    char errbuf[512];
    ck_assert_msg(coli_convert(echo, cont, &cp, errbuf, sizeof errbuf) == COLI_OK, "%s", errbuf);
    run base;
    setup s0 = {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0, .threads = 1, .dir = echo};
    generate(&s0, &sp, PROMPT, N_PROMPT, 64, &base);
    setup v[] = {
        {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0, .threads = 3, .dir = echo},
        {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0, .kernels = 1, .dir = echo},
        {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0, .kernels = 2, .dir = echo},
        {.fmt = COLI_WEIGHTS_Q4, .mtp = 1, .guard = 0, .kernels = 3, .dir = echo},
        {.fmt = COLI_WEIGHTS_AUTO, .mtp = 1, .guard = 0, .dir = cont},
        {.fmt = COLI_WEIGHTS_AUTO, .mtp = 1, .guard = 0, .dir = cont, .budget_mb = 1, .slots = 4},
    };
    const char *name[] = {"3 threads", "scalar kernels", "avx2 kernels", "avx512 kernels", "container",
                          "container, 4 expert slots streamed"};
    int ran = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (v[i].kernels) {
            /* a kernel set this CPU or build lacks is refused at open: not run */
            coli_options *o = options_of(&v[i]);
            coli_model *m = NULL;
            coli_status st = coli_model_open(echo, o, &m);
            coli_model_free(m);
            coli_options_free(o);
            if (st != COLI_OK) {
                printf("%s: not on this machine\n", name[i]);
                continue;
            }
        }
        run r;
        generate(&v[i], &sp, PROMPT, N_PROMPT, 64, &r);
        ck_assert_msg(memcmp(r.tok, base.tok, sizeof r.tok) == 0, "%s: other tokens", name[i]);
        ck_assert_msg(memcmp(r.logits, base.logits, 1005 * sizeof(float)) == 0, "%s: other logits", name[i]);
        ck_assert_msg(r.st.mtp_steps == base.st.mtp_steps && r.st.mtp_accepted == base.st.mtp_accepted &&
                          r.st.mtp_drafted == base.st.mtp_drafted,
                      "%s: %llu of %llu drafts accepted in %llu steps; %llu of %llu in %llu at first", name[i],
                      (unsigned long long)r.st.mtp_accepted, (unsigned long long)r.st.mtp_drafted,
                      (unsigned long long)r.st.mtp_steps, (unsigned long long)base.st.mtp_accepted,
                      (unsigned long long)base.st.mtp_drafted, (unsigned long long)base.st.mtp_steps);
        printf("%s: %llu of %llu drafts accepted, as with 1 thread\n", name[i],
               (unsigned long long)r.st.mtp_accepted, (unsigned long long)r.st.mtp_drafted);
        run_free(&r);
        ran++;
    }
    ck_assert_int_ge(ran, 4);
    ck_assert_uint_gt(base.st.mtp_accepted, 0);
    /* the container opened without MTP: the decoder alone, same tokens */
    run plain;
    setup sp0 = {.fmt = COLI_WEIGHTS_AUTO, .mtp = 0, .dir = cont};
    generate(&sp0, &sp, PROMPT, N_PROMPT, 64, &plain);
    ck_assert(memcmp(plain.tok, base.tok, sizeof plain.tok) == 0);
    run_free(&plain);
    run_free(&base);
    tu_rmtree(tmp);
    free(cont);
    free(tmp);
    free(echo);
}
END_TEST

/* With the guard on, output is unchanged and it times plain steps first. */
START_TEST(guard_measures)
{
    coli_sampler_params sp;
    coli_sampler_params_init(&sp, sizeof sp);
    run plain, guarded;
    char *tmp, *echo = tu_mtp_echo_model(fixture(), &tmp);
    ck_assert_ptr_nonnull(echo);
    setup s0 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 0, .dir = echo};
    setup s1 = {.fmt = COLI_WEIGHTS_Q8, .mtp = 1, .guard = 1, .dir = echo};
    generate(&s0, &sp, PROMPT, N_PROMPT, 80, &plain);
    generate(&s1, &sp, PROMPT, N_PROMPT, 80, &guarded);
    ck_assert(memcmp(plain.tok, guarded.tok, sizeof plain.tok) == 0);
    ck_assert_uint_ge(guarded.st.mtp_plain_tokens, 3);
    check_stats(&guarded, 1);
    run_free(&plain);
    run_free(&guarded);
    tu_rmtree(tmp);
    free(tmp);
    free(echo);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("mtp");
    TCase *t = tcase_create("mtp");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, mtp_logits_f32);
    tcase_add_test(t, mtp_logits_other_formats);
    tcase_add_test(t, greedy_unchanged);
    tcase_add_test(t, sampled_unchanged);
    tcase_add_test(t, acceptance_rate);
    tcase_add_test(t, cache_follows_positions);
    tcase_add_test(t, refusals);
    tcase_add_test(t, same_acceptance_everywhere);
    tcase_add_test(t, guard_measures);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
