/* test_cpu_kernels.c - every CPU kernel set gives the same logits.
 *
 * For each fixture and weight format, a prompt's prefill and a few greedy
 * decode steps run with the scalar set and with each other set this CPU
 * has (COLI_OPT_CPU_KERNELS); every logit must have the same bits as the
 * scalar one (docs/formats.md). Sets the CPU lacks are printed as not
 * checked. Then the option itself: bounds, COLI_CPU, refusals. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "cpu/cpu.h"
#include "cpu/cpusel.h"
#include "cpu/kernels.h"
#include "cpu/silu.h"
#include "decoder/norm.h"
#include "testutil.h"

/* long enough for the amx set's tile products (16 tokens or more) */
#define PROMPT 40
#define STEPS 4

static const char *const FIXTURES[] = {"qwen3_moe", "olmoe", "mixtral", "glm4_moe", "deepseek_v3", "deepseek_v3_lite", "glm_moe_dsa"};

static const struct {
    coli_weight_format fmt;
    const char *name;
} FORMATS[] = {{COLI_WEIGHTS_Q8, "q8"},   {COLI_WEIGHTS_Q4, "q4"},   {COLI_WEIGHTS_Q2, "q2"},
               {COLI_WEIGHTS_BF16, "bf16"}, {COLI_WEIGHTS_F32, "f32"}, {COLI_WEIGHTS_AUTO, "auto"}};

/* The sets besides scalar, and the name coli_model_info gives each. */
static const struct {
    int64_t opt;
    const char *name;
} SETS[] = {{2, "avx2, float avx2"},
             {3, "avx512vnni, float avx512"},
             {4, "amx-int8, avx512vnni, float avx512"},
             {0, NULL}};

/* kv: COLI_OPT_KV_TYPE (-1: COLI_KV_TYPE, else f32). */
static coli_status open_set_kv(const char *dir, coli_weight_format fmt, int64_t set, int64_t kv, coli_model **m)
{
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, kv), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, 2), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 64), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, set), COLI_OK);
    coli_status st = coli_model_open(dir, o, m);
    coli_options_free(o);
    return st;
}

static coli_status open_set(const char *dir, coli_weight_format fmt, int64_t set, coli_model **m)
{
    return open_set_kv(dir, fmt, set, -1, m);
}

static const char *kernels_of(coli_model *m);

/* Logits after the prompt and after each greedy step: (1 + STEPS) * vocab.
 * The prompt evaluated token by token must give its batch's last logits,
 * bit for bit (prefill computes each token as decode does). */
static float *run(coli_model *m, int vocab)
{
    float *all = malloc((size_t)(1 + STEPS) * (size_t)vocab * sizeof(float));
    ck_assert_ptr_nonnull(all);
    coli_context *ctx = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &ctx), COLI_OK);
    int32_t ids[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        ids[i] = (int32_t)((i * 37 + 5) % vocab);
    ck_assert_msg(tu_greedy(ctx, ids, PROMPT, STEPS, vocab, all, NULL) == 0, "%s", coli_context_errmsg(ctx));
    coli_context_reset(ctx);
    for (int i = 0; i < PROMPT; i++)
        ck_assert_int_eq(coli_eval(ctx, &ids[i], 1), COLI_OK);
    ck_assert_msg(memcmp(coli_context_logits(ctx), all, (size_t)vocab * sizeof(float)) == 0,
                  "%s: the prompt token by token changed its logits", kernels_of(m));
    coli_context_free(ctx);
    return all;
}

/* Whether the model holds matrices in the x16 layout (docs/formats.md):
 * with the avx512 and amx sets, the fixtures' q8 and q4 attention matrices (rows a
 * multiple of 16) take it, and with q2 the q8 output projection where the
 * vocabulary is a multiple of 16; never with another set or format. */
static void check_layout(coli_model *m, const char *set, coli_weight_format fmt)
{
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    int q8_head = fmt == COLI_WEIGHTS_Q2 && info.vocab_size % 16 == 0;
    int want = strstr(set, "avx512vnni") != NULL && (fmt == COLI_WEIGHTS_Q8 || fmt == COLI_WEIGHTS_Q4 || q8_head);
    int has = strstr(info.weights_detail, "x16 layout for the CPU") != NULL;
    ck_assert_msg(has == want, "set %s, weights %d: %s", set, (int)fmt, info.weights_detail);
}

static const char *kernels_of(coli_model *m)
{
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    ck_assert_ptr_nonnull(info.cpu_kernels);
    return info.cpu_kernels;
}

START_TEST(test_same_bits)
{
    unsetenv("COLI_CPU");
    unsetenv("COLI_KV_TYPE");
    const int nf = (int)(sizeof FORMATS / sizeof FORMATS[0]), nx = (int)(sizeof FIXTURES / sizeof FIXTURES[0]);
    const int kv = _i / (nf * nx); /* COLI_KV_F32, then COLI_KV_BF16 */
    const int fx = _i % (nf * nx) / nf;
    const int f = _i % nf;
    const char *kvn = kv ? "bf16 KV" : "f32 KV";
    char *dir = tu_path(tu_data_dir(), FIXTURES[fx]);
    coli_model *m = NULL;
    coli_status st = open_set_kv(dir, FORMATS[f].fmt, 1, kv, &m);
    ck_assert_msg(st == COLI_OK, "%s", coli_model_errmsg(m));
    ck_assert_str_eq(kernels_of(m), "scalar, float scalar");
    check_layout(m, "scalar", FORMATS[f].fmt);
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    const int vocab = info.vocab_size;
    float *want = run(m, vocab);
    coli_model_free(m);
    for (size_t k = 0; k < sizeof SETS / sizeof SETS[0]; k++) {
        m = NULL;
        st = open_set_kv(dir, FORMATS[f].fmt, SETS[k].opt, kv, &m);
        if (SETS[k].opt != 0 && st == COLI_EUNSUPPORTED) {
            fprintf(stderr, "%s %s %s: set %s not checked: %s\n", FIXTURES[fx], FORMATS[f].name, kvn, SETS[k].name,
                    coli_model_errmsg(m));
            coli_model_free(m);
            continue;
        }
        ck_assert_msg(st == COLI_OK, "%s", coli_model_errmsg(m)); /* auto always opens */
        const char *name = kernels_of(m);
        if (SETS[k].name)
            ck_assert_str_eq(name, SETS[k].name);
        check_layout(m, name, FORMATS[f].fmt);
        float *got = run(m, vocab);
        for (int s = 0; s <= STEPS; s++)
            for (int v = 0; v < vocab; v++) {
                float a = want[(size_t)s * vocab + v], b = got[(size_t)s * vocab + v];
                ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s %s %s, %s: step %d logit %d is %.9g, scalar %.9g",
                              FIXTURES[fx], FORMATS[f].name, kvn, name, s, v, (double)b, (double)a);
            }
        fprintf(stderr, "%s %s %s: %s = scalar, %d logits x %d steps\n", FIXTURES[fx], FORMATS[f].name, kvn, name,
                vocab, STEPS + 1);
        free(got);
        coli_model_free(m);
    }
    free(want);
    free(dir);
}
END_TEST

START_TEST(test_option_bounds)
{
    int64_t lo = -5, hi = -5, v = -5;
    ck_assert_int_eq(coli_option_bounds(COLI_OPT_CPU_KERNELS, &lo, &hi), COLI_OK);
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 4);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_CPU_KERNELS, &v), COLI_OK);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, 5), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, -1), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, 3), COLI_OK);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_CPU_KERNELS, &v), COLI_OK);
    ck_assert_int_eq(v, 3);
    /* the KV cache's type: -1 (COLI_KV_TYPE decides), f32 or bf16 */
    ck_assert_int_eq(coli_option_bounds(COLI_OPT_KV_TYPE, &lo, &hi), COLI_OK);
    ck_assert_int_eq(lo, -1);
    ck_assert_int_eq(hi, COLI_KV_BF16);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_KV_TYPE, &v), COLI_OK);
    ck_assert_int_eq(v, -1);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, 2), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, -2), COLI_ERANGE);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, COLI_KV_BF16), COLI_OK);
    ck_assert_int_eq(coli_options_get(o, COLI_OPT_KV_TYPE, &v), COLI_OK);
    ck_assert_int_eq(v, 1);
    coli_options_free(o);
}
END_TEST

/* Every set's SwiGLU is lib/cpu/silu.h's, element by element, on random
 * values and on the edges of its exp (the cut-offs at -87 and 88, their
 * neighbours, zeros, subnormals, infinities, NaN), at every length mod 8. */
START_TEST(test_swiglu)
{
    enum { N = 4099 };
    static float g[N], u[N], want[N], got[N];
    const float edge[] = {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 87.00001f, -87.00001f, 88.00001f,
                          -88.00001f, 1e-40f, -1e-40f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, 0.5f, -0.5f,
                          86.99999f, -86.99999f, 1.0f, -1.0f, 20.0f, -20.0f};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005u + 1442695040888963407u;
        float r = (float)((int32_t)(st >> 32)) / 2147483648.0f; /* [-1, 1) */
        g[i] = i < ne ? edge[i] : i % 3 == 0 ? r * 100.0f : r * 8.0f;
        u[i] = i % 5 == 0 ? -r : r * 3.0f;
        want[i] = coli__swiglu(g[i], u[i]);
    }
    /* the scalar set is lib/cpu/silu.h itself: the vector sets are the test */
    const int sets[] = {COLI__CPUK_AVX2, COLI__CPUK_AVX512, COLI__CPUK_AMX};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        const coli__cpuk *set = coli__cpuk_get(sets[k]);
        if (!set) {
            fprintf(stderr, "swiglu: set %d not on this CPU, not checked\n", sets[k]);
            continue;
        }
        for (int n = N - 8; n <= N; n++) {
            memcpy(got, g, sizeof got);
            got[n < N ? n : 0] = n < N ? 12345.0f : got[0]; /* past n: must stay */
            coli__swiglu_rows(set, got, u, n);
            for (int i = 0; i < n; i++) {
                int same = memcmp(&got[i], &want[i], sizeof got[i]) == 0 || (isnan(got[i]) && isnan(want[i]));
                ck_assert_msg(same, "%s: swiglu(%.9g, %.9g) is %.9g, lib/cpu/silu.h says %.9g", coli__cpuk_name(set),
                              g[i], u[i], got[i], want[i]);
            }
            if (n < N)
                ck_assert_float_eq(got[n], 12345.0f);
        }
    }
}
END_TEST

/* ---- the written order of docs/formats.md, as this test reads it ---- */

static float t_fold32(const float *P)
{
    float u[8];
    for (int l = 0; l < 8; l++)
        u[l] = (P[l] + P[l + 16]) + (P[l + 8] + P[l + 24]);
    return ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
}

static float t_dot(const float *a, const float *b, int n)
{
    float P[32] = {0};
    for (int i = 0; i < n; i++)
        P[i % 32] = fmaf(a[i], b[i], P[i % 32]);
    return t_fold32(P);
}

static float t_sum32(const float *a, int n)
{
    float P[32] = {0};
    for (int i = 0; i < n; i++)
        P[i % 32] = P[i % 32] + a[i];
    return t_fold32(P);
}

/* One head: scores a[j] (then the weights w[j]) and max, e, Z, weights,
 * then the eight-partial mix o[0..hd); rows already widened to f32. Sums
 * over positions go by tiles of 256, added in order (docs/formats.md). */
static void t_attention(const float *q, const float *k, const float *v, size_t stride, int n, int hd, float *a,
                        float *w, float *mx, float *o)
{
    const int T = 256;
    const float scale = 1.0f / sqrtf((float)hd);
    float m = -INFINITY;
    for (int j = 0; j < n; j++) {
        a[j] = t_dot(q, k + (size_t)j * stride, hd) * scale;
        m = a[j] > m ? a[j] : m;
    }
    *mx = m;
    for (int j = 0; j < n; j++)
        w[j] = coli__exp_f32(a[j] - m);
    float Z = 0;
    for (int t = 0; t * T < n; t++) {
        float z = t_sum32(w + t * T, n - t * T < T ? n - t * T : T);
        Z = t == 0 ? z : Z + z;
    }
    float inv = 1.0f / Z;
    for (int j = 0; j < n; j++)
        w[j] = w[j] * inv;
    for (int i = 0; i < hd; i++) {
        float acc = 0;
        for (int t = 0; t * T < n; t++) {
            float O[8] = {0};
            for (int j = t * T; j < n && j < (t + 1) * T; j++)
                O[j % 8] = fmaf(w[j], v[(size_t)j * stride + i], O[j % 8]);
            float U = ((O[0] + O[4]) + (O[2] + O[6])) + ((O[1] + O[5]) + (O[3] + O[7]));
            acc = t == 0 ? U : acc + U;
        }
        o[i] = acc;
    }
}

static float t_random(uint64_t *st)
{
    *st = *st * 6364136223846793005u + 1442695040888963407u;
    return (float)((int32_t)(*st >> 32)) / 2147483648.0f; /* [-1, 1) */
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static const int ALL_SETS[] = {COLI__CPUK_SCALAR, COLI__CPUK_AVX2, COLI__CPUK_AVX512, COLI__CPUK_AMX};

/* bf16 bits of f: round to nearest even, as the KV cache stores it. */
static uint16_t t_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float t_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* RMSNorm and sum32 of every set against the text, bit for bit, over
 * lengths around the 8- and 32-wide blocks. */
START_TEST(test_written_order)
{
    static float x[1031], w[1031], got[1031];
    uint64_t st = 99;
    for (int i = 0; i < 1031; i++) {
        x[i] = t_random(&st) * 3.0f;
        w[i] = 1.0f + t_random(&st) * 0.5f;
    }
    /* hand-derived: two equal scores weigh exactly 1/2 each; e(0) = 1 */
    float two[2] = {0.75f, 0.75f};
    coli__attn_softmax(coli__cpuk_get(COLI__CPUK_SCALAR), two, 2, 0.75f);
    ck_assert(two[0] == 0.5f && two[1] == 0.5f);
    /* sum32: element 32 joins P_0, which cancels; the ones stay in P_1..P_31
     * (a left-to-right sum loses each 1 against 1e8 and gives 0) */
    float big[33] = {1e8f};
    for (int i = 1; i < 33; i++)
        big[i] = 1.0f;
    big[32] = -1e8f;
    ck_assert(coli__sum32(big, 33) == 31.0f);
    for (size_t s = 0; s < sizeof ALL_SETS / sizeof ALL_SETS[0]; s++) {
        const coli__cpuk *set = coli__cpuk_get(ALL_SETS[s]);
        if (!set) {
            fprintf(stderr, "written order: set %d not on this CPU, not checked\n", ALL_SETS[s]);
            continue;
        }
        static const int lens[] = {1, 2, 7, 8, 24, 31, 32, 33, 64, 100, 1024, 1031};
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int n = lens[li];
            coli__rmsnorm(set, got, x, w, n, 1e-6f);
            float r = 1.0f / sqrtf(t_dot(x, x, n) / (float)n + 1e-6f);
            for (int i = 0; i < n; i++)
                ck_assert_msg(same_bits(got[i], w[i] * (x[i] * r)), "%s: rmsnorm n=%d element %d",
                              coli__cpuk_name(set), n, i);
        }
    }
}
END_TEST

/* The attention kernels of every set against the text (t_attention), bit
 * for bit: the g heads of a KV head at once, rows of f32 and of bf16 in a
 * strided cache, head dimensions with and without a 32-wide tail (one not
 * a multiple of 8, one past what AVX2 widens in place), groups of 1 to 9
 * heads, positions around the 8-row and 64-row blocks and the tiles of
 * 256; the scores cut in two blocks (with their maxima combined) and the
 * mix over a slice of dimensions, as the split decode does, give the same
 * bits. */
/* Float products (f32, bf16 widened) of many tokens in every set: each
 * value is the text's dot of the widened row, whatever tokens it is done
 * with (four at a time in the avx512 set). */
START_TEST(test_float_products)
{
    enum { ROWS = 13, MAXC = 1100, MAXT = 41 };
    static float wf[ROWS * MAXC], ww[ROWS * MAXC], x[MAXT * MAXC], y[MAXT * ROWS];
    static uint16_t wb[ROWS * MAXC];
    uint64_t st = 99;
    for (int i = 0; i < ROWS * MAXC; i++) {
        wf[i] = t_random(&st);
        wb[i] = t_bf16(wf[i] * 0.5f);
        ww[i] = t_widen(wb[i]);
    }
    for (int i = 0; i < MAXT * MAXC; i++)
        x[i] = t_random(&st) * 2.0f;
    static const int cols[] = {1024, 1100, 33, 64};
    static const int toks[] = {1, 4, 8, 9, 12, 13, 40, 41};
    for (size_t s = 0; s < sizeof ALL_SETS / sizeof ALL_SETS[0]; s++) {
        const coli__cpuk *set = coli__cpuk_get(ALL_SETS[s]);
        if (!set)
            continue;
        for (int bf = 0; bf < 2; bf++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
                for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                    const int c = cols[ci], n = toks[ti];
                    const coli__mat w = coli__mat_at(bf ? COLI_DT_BF16 : COLI_DT_F32, 0, ROWS, c,
                                                     bf ? (const void *)wb : (const void *)wf);
                    memset(y, 0xff, sizeof y); /* NaN: a value not written shows */
                    ck_assert_int_eq(coli__matmul(set, NULL, &w, x, n, y), COLI_OK);
                    for (int t = 0; t < n; t++)
                        for (int r = 0; r < ROWS; r++) {
                            float want = t_dot((bf ? ww : wf) + (size_t)r * c, x + (size_t)t * c, c);
                            ck_assert_msg(same_bits(y[(size_t)t * ROWS + r], want),
                                          "%s %s: row %d token %d of %d, %d columns: %.9g, the text %.9g",
                                          coli__cpuk_name(set), bf ? "bf16" : "f32", r, t, n, c,
                                          (double)y[(size_t)t * ROWS + r], (double)want);
                        }
                }
    }
}
END_TEST

START_TEST(test_attention_kernels)
{
    enum { MAXN = 600, MAXD = 264, STRIDE = 3 * MAXD + 8, MAXG = 9 };
    static float kf[MAXN * STRIDE], vf[MAXN * STRIDE], kw[MAXN * STRIDE], vw[MAXN * STRIDE], q[MAXG * MAXD];
    static uint16_t kb[MAXN * STRIDE], vb[MAXN * STRIDE];
    static float ra[MAXN], rw[MAXN], ro[MAXG][MAXD], rmx[MAXG], rsc[MAXG][MAXN], rwt[MAXG][MAXN];
    static float sc[MAXG * MAXN], o[MAXG * MAXD], o2[MAXG * MAXD], mx[MAXG], mx2[MAXG];
    uint64_t st = 7;
    for (int i = 0; i < MAXN * STRIDE; i++) {
        kf[i] = t_random(&st) * 2.0f;
        vf[i] = t_random(&st);
        kb[i] = t_bf16(kf[i]);
        vb[i] = t_bf16(vf[i]);
        kw[i] = t_widen(kb[i]);
        vw[i] = t_widen(vb[i]);
    }
    for (int i = 0; i < MAXG * MAXD; i++)
        q[i] = t_random(&st) * 4.0f;
    static const int hds[] = {64, 128, 16, 24, 40, 72, 12, 264, 32, 96, 256, 48, 80};
    static const int gs[] = {1, 4, 3, 9};
    static const int ns[] = {1, 5, 8, 9, 31, 32, 33, 63, 64, 65, 127, 129, 255, 256, 257, 300, 513, 600};
    for (size_t s = 0; s < sizeof ALL_SETS / sizeof ALL_SETS[0]; s++) {
        const coli__cpuk *set = coli__cpuk_get(ALL_SETS[s]);
        if (!set)
            continue;
        const char *sn = coli__cpuk_name(set);
        for (int bf = 0; bf < 2; bf++)
            for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
                for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
                    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                        const int hd = hds[hi], g = gs[gi], n = ns[ni], off = hd + 8; /* the second KV head */
                        const coli__dtype dt = bf ? COLI_DT_BF16 : COLI_DT_F32;
                        const void *k = bf ? (const void *)(kb + off) : (const void *)(kf + off);
                        const void *v = bf ? (const void *)(vb + off) : (const void *)(vf + off);
                        const float scale = 1.0f / sqrtf((float)hd);
                        for (int h = 0; h < g; h++) {
                            t_attention(q + h * hd, (bf ? kw : kf) + off, (bf ? vw : vf) + off, STRIDE, n, hd, ra,
                                        rw, &rmx[h], ro[h]);
                            memcpy(rsc[h], ra, (size_t)n * sizeof(float));
                            memcpy(rwt[h], rw, (size_t)n * sizeof(float));
                            mx[h] = mx2[h] = -INFINITY;
                        }
                        for (int i = 0; i < MAXG * MAXN; i++)
                            sc[i] = NAN; /* poisoned: a score left unwritten fails */
                        coli__attn_scores(set, q, g, hd, k, dt, STRIDE, n, scale, sc, MAXN, mx, NULL);
                        for (int h = 0; h < g; h++) {
                            ck_assert_msg(mx[h] == rmx[h], "%s: max", sn);
                            for (int j = 0; j < n; j++)
                                ck_assert_msg(same_bits(sc[h * MAXN + j], rsc[h][j]),
                                              "%s %s: score hd=%d g=%d n=%d head %d row %d is %.9g, the text %.9g", sn,
                                              bf ? "bf16" : "f32", hd, g, n, h, j, (double)sc[h * MAXN + j],
                                              (double)rsc[h][j]);
                        }
                        /* the same scores in two blocks, maxima combined */
                        int cut = n / 3 / 8 * 8 + 3 < n ? n / 3 / 8 * 8 + 3 : n;
                        static float sc2[MAXG * MAXN];
                        float mb[MAXG];
                        for (int h = 0; h < g; h++)
                            mb[h] = -INFINITY;
                        coli__attn_scores(set, q, g, hd, k, dt, STRIDE, cut, scale, sc2, MAXN, mx2, NULL);
                        coli__attn_scores(set, q, g, hd, (const char *)k + (size_t)cut * STRIDE * (bf ? 2 : 4), dt,
                                          STRIDE, n - cut, scale, sc2 + cut, MAXN, mb, NULL);
                        for (int h = 0; h < g; h++) {
                            float m = mb[h] > mx2[h] ? mb[h] : mx2[h];
                            ck_assert_msg(m == rmx[h] && memcmp(sc2 + h * MAXN, sc + h * MAXN,
                                                                (size_t)n * sizeof(float)) == 0,
                                          "%s: scores in two blocks", sn);
                        }
                        for (int h = 0; h < g; h++) {
                            coli__attn_softmax(set, sc + h * MAXN, n, mx[h]);
                            for (int j = 0; j < n; j++)
                                ck_assert_msg(same_bits(sc[h * MAXN + j], rwt[h][j]),
                                              "%s: weight hd=%d n=%d head %d row %d", sn, hd, n, h, j);
                        }
                        coli__attn_mix(set, o, hd, g, hd, sc, MAXN, v, dt, STRIDE, n, NULL);
                        for (int h = 0; h < g; h++)
                            for (int i = 0; i < hd; i++)
                                ck_assert_msg(same_bits(o[h * hd + i], ro[h][i]),
                                              "%s %s: mix hd=%d g=%d n=%d head %d dim %d is %.9g, the text %.9g", sn,
                                              bf ? "bf16" : "f32", hd, g, n, h, i, (double)o[h * hd + i],
                                              (double)ro[h][i]);
                        /* dimensions [d0, hd) alone */
                        const int d0 = hd > 16 ? 16 : 8;
                        memset(o2, 0, sizeof o2);
                        coli__attn_mix(set, o2 + d0, hd, g, hd - d0, sc, MAXN,
                                       (const char *)v + (size_t)d0 * (bf ? 2 : 4), dt, STRIDE, n, NULL);
                        for (int h = 0; h < g; h++)
                            ck_assert_msg(memcmp(o2 + h * hd + d0, o + h * hd + d0,
                                                 (size_t)(hd - d0) * sizeof(float)) == 0,
                                          "%s: mix of a slice", sn);
                        if (g == 1)
                            continue;
                        /* each head its own rows (a block of tokens: head
                         * h sees n - g + 1 + h of them, or some fewer) */
                        int nh[MAXG];
                        for (int h = 0; h < g; h++) {
                            nh[h] = n - (g - 1 - h) * (1 + (int)(ni % 3)) > 0 ? n - (g - 1 - h) * (1 + (int)(ni % 3)) : 1;
                            t_attention(q + h * hd, (bf ? kw : kf) + off, (bf ? vw : vf) + off, STRIDE, nh[h], hd, ra,
                                        rw, &rmx[h], ro[h]);
                            memcpy(rwt[h], rw, (size_t)nh[h] * sizeof(float));
                            mx[h] = -INFINITY;
                            for (int j = 0; j < MAXN; j++)
                                sc[h * MAXN + j] = 1234.5f; /* past nh[h]: must stay */
                        }
                        coli__attn_scores(set, q, g, hd, k, dt, STRIDE, n, scale, sc, MAXN, mx, nh);
                        for (int h = 0; h < g; h++) {
                            ck_assert_msg(mx[h] == rmx[h], "%s: max of head %d's %d rows", sn, h, nh[h]);
                            for (int j = nh[h]; j < n; j++)
                                ck_assert_msg(sc[h * MAXN + j] == 1234.5f, "%s: score past a head's rows", sn);
                            coli__attn_softmax(set, sc + h * MAXN, nh[h], mx[h]);
                            ck_assert_msg(memcmp(sc + h * MAXN, rwt[h], (size_t)nh[h] * sizeof(float)) == 0,
                                          "%s: weights of head %d's %d rows", sn, h, nh[h]);
                            for (int j = nh[h]; j < n; j++)
                                sc[h * MAXN + j] = NAN; /* never read */
                        }
                        coli__attn_mix(set, o, hd, g, hd, sc, MAXN, v, dt, STRIDE, n, nh);
                        for (int h = 0; h < g; h++)
                            for (int i = 0; i < hd; i++)
                                ck_assert_msg(same_bits(o[h * hd + i], ro[h][i]),
                                              "%s %s: mix hd=%d g=%d n=%d head %d of %d rows, dim %d is %.9g, the "
                                              "text %.9g",
                                              sn, bf ? "bf16" : "f32", hd, g, n, h, nh[h], i, (double)o[h * hd + i],
                                              (double)ro[h][i]);
                    }
        fprintf(stderr, "attention kernels: %s = the text\n", sn);
    }
}
END_TEST

static coli_model_info info_of(coli_model *m)
{
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    return info;
}

/* Logits of a 300-token prompt (two tiles of attention), then STEPS greedy
 * steps, threads threads (each (1 + STEPS) * vocab): with 3 or 4 threads
 * and 2 KV heads, decode past 128 positions cuts the attention by
 * positions and dimensions (lib/decoder/attention.c), with 1 or 2 it does
 * one task per KV head. The prompt token by token gives its batch's bits. */
#define LONG 300
static float *run_long(const char *dir, int64_t set, int64_t kv, int threads, int vocab)
{
    coli_options *o = NULL;
    coli_model *m = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, COLI_WEIGHTS_Q8), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, threads), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, LONG + STEPS + 1), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CPU_KERNELS, set), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, kv), COLI_OK);
    ck_assert_msg(coli_model_open(dir, o, &m) == COLI_OK, "%s", coli_model_errmsg(m));
    coli_options_free(o);
    float *all = malloc((size_t)(1 + STEPS) * (size_t)vocab * sizeof(float));
    ck_assert_ptr_nonnull(all);
    coli_context *ctx = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &ctx), COLI_OK);
    int32_t ids[LONG];
    for (int i = 0; i < LONG; i++)
        ids[i] = (int32_t)((i * 37 + 5) % vocab);
    ck_assert_msg(tu_greedy(ctx, ids, LONG, STEPS, vocab, all, NULL) == 0, "%s", coli_context_errmsg(ctx));
    if (threads == 1 || threads == 3) {
        coli_context_reset(ctx);
        for (int i = 0; i < LONG; i++)
            ck_assert_int_eq(coli_eval(ctx, &ids[i], 1), COLI_OK);
        ck_assert_msg(memcmp(coli_context_logits(ctx), all, (size_t)vocab * sizeof(float)) == 0,
                      "%d threads: the prompt token by token changed its logits", threads);
    }
    coli_context_free(ctx);
    coli_model_free(m);
    return all;
}

/* The ways attention's work is cut give the same bits: every set, both KV
 * types, the fixtures as they are and Mixtral with a sliding window of 100
 * positions (the split's blocks and the tiles then start past 0). */
START_TEST(test_attention_cuts)
{
    const int fx = _i % 4, kv = _i / 4;
    char *src = tu_path(tu_data_dir(), FIXTURES[fx < 3 ? fx : 2]), *dir = src, *tmp = NULL;
    if (fx == 3) {
        tmp = tu_mkdtemp();
        ck_assert_int_eq(tu_copy_dir(src, tmp), 0);
        ck_assert_int_eq(tu_replace_in_file(tmp, "config.json", "\"sliding_window\": null", "\"sliding_window\": 100"),
                         0);
        dir = tmp;
    }
    coli_model *m = NULL;
    ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 1, &m), COLI_OK);
    const int vocab = info_of(m).vocab_size;
    ck_assert_int_eq(info_of(m).n_kv_heads, 2);
    coli_model_free(m);
    float *want = run_long(dir, 1, kv, 1, vocab);
    for (size_t k = 0; k < sizeof ALL_SETS / sizeof ALL_SETS[0]; k++) {
        if (!coli__cpuk_get(ALL_SETS[k]))
            continue;
        for (int threads = 1; threads <= 4; threads++) {
            if (ALL_SETS[k] == COLI__CPUK_SCALAR && threads == 1)
                continue;
            float *got = run_long(dir, ALL_SETS[k], kv, threads, vocab);
            ck_assert_msg(memcmp(got, want, (size_t)(1 + STEPS) * (size_t)vocab * sizeof(float)) == 0,
                          "%s%s, set %d, %s KV, %d threads: other logits than scalar with 1 thread",
                          FIXTURES[fx < 3 ? fx : 2], fx == 3 ? " (window 100)" : "", ALL_SETS[k], kv ? "bf16" : "f32",
                          threads);
            free(got);
        }
    }
    fprintf(stderr, "%s%s, %s KV: the same logits on 1 to 4 threads, every set\n", FIXTURES[fx < 3 ? fx : 2],
            fx == 3 ? " (window 100)" : "", kv ? "bf16" : "f32");
    free(want);
    if (tmp) {
        tu_rmtree(tmp);
        free(tmp);
    }
    free(src);
}
END_TEST

/* coli_cpu_kernels_usable says which sets a model opens with. */
START_TEST(test_usable)
{
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    unsetenv("COLI_CPU");
    ck_assert_int_eq(coli_cpu_kernels_usable(0), 0);
    ck_assert_int_eq(coli_cpu_kernels_usable(5), 0);
    ck_assert_int_eq(coli_cpu_kernels_usable(-1), 0);
    ck_assert_int_eq(coli_cpu_kernels_usable(1), 1);
    for (int64_t set = 1; set <= 4; set++) {
        coli_model *m = NULL;
        coli_status st = open_set(dir, COLI_WEIGHTS_Q8, set, &m);
        ck_assert_msg(st == (coli_cpu_kernels_usable(set) ? COLI_OK : COLI_EUNSUPPORTED), "set %d: %s", (int)set,
                      coli_model_errmsg(m));
        coli_model_free(m);
    }
    /* a set implies the ones below it */
    for (int64_t set = 2; set <= 4; set++)
        ck_assert(!coli_cpu_kernels_usable(set) || coli_cpu_kernels_usable(set - 1));
    free(dir);
}
END_TEST

/* COLI_CPU: malformed values fail at open naming it; the option wins. */
START_TEST(test_env)
{
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    static const char *const bad[] = {"", "AVX2", "avx", "scalar ", "avx512vnni", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(setenv("COLI_CPU", bad[i], 1), 0);
        coli_model *m = NULL;
        ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 0, &m), COLI_EINVAL);
        ck_assert_msg(strstr(coli_model_errmsg(m), "COLI_CPU") != NULL, "%s", coli_model_errmsg(m));
        coli_model_free(m);
    }
    ck_assert_int_eq(setenv("COLI_CPU", "scalar", 1), 0);
    coli_model *m = NULL;
    ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 0, &m), COLI_OK);
    ck_assert_str_eq(kernels_of(m), "scalar, float scalar");
    coli_model_free(m);
    /* two models in one process, each with its own set */
    coli_model *a = NULL, *b = NULL;
    ck_assert_int_eq(setenv("COLI_CPU", "avx512", 1), 0);
    ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 1, &a), COLI_OK); /* the option wins */
    ck_assert_str_eq(kernels_of(a), "scalar, float scalar");
    coli_status st = open_set(dir, COLI_WEIGHTS_Q8, 0, &b);
    if (st == COLI_OK) {
        ck_assert_str_eq(kernels_of(b), "avx512vnni, float avx512");
        ck_assert_str_eq(kernels_of(a), "scalar, float scalar");
    } else {
        ck_assert_int_eq(st, COLI_EUNSUPPORTED);
        ck_assert_msg(strstr(coli_model_errmsg(b), "COLI_OPT_CPU_KERNELS avx512 (from COLI_CPU)") != NULL, "%s",
                      coli_model_errmsg(b));
        fprintf(stderr, "avx512 from COLI_CPU not checked: %s\n", coli_model_errmsg(b));
    }
    coli_model_free(a);
    coli_model_free(b);
    unsetenv("COLI_CPU");
    free(dir);
}
END_TEST

/* COLI_KV_TYPE: malformed values fail naming it, at open and at a context
 * made with options that leave the type to it; the option wins; each
 * context has its own type, and its bytes say so. */
START_TEST(test_kv_env)
{
    char *dir = tu_path(tu_data_dir(), "qwen3_moe");
    static const char *const bad[] = {"", "F32", "bf", "f16", "1", "bf16 "};
    coli_model *m = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(setenv("COLI_KV_TYPE", bad[i], 1), 0);
        m = NULL;
        ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 0, &m), COLI_EINVAL);
        ck_assert_msg(strstr(coli_model_errmsg(m), "environment variable COLI_KV_TYPE") != NULL, "%s",
                      coli_model_errmsg(m));
        coli_model_free(m);
    }
    unsetenv("COLI_KV_TYPE");
    ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 0, &m), COLI_OK);
    coli_model_info f = info_of(m);
    ck_assert_int_eq(f.kv_type, COLI_KV_F32);
    coli_model_free(m);
    ck_assert_int_eq(setenv("COLI_KV_TYPE", "bf16", 1), 0);
    ck_assert_int_eq(open_set(dir, COLI_WEIGHTS_Q8, 0, &m), COLI_OK);
    coli_model_info b = info_of(m);
    ck_assert_int_eq(b.kv_type, COLI_KV_BF16);
    ck_assert_uint_eq(2 * b.kv_bytes_per_position, f.kv_bytes_per_position);
    ck_assert_uint_eq(b.kv_bytes, b.kv_bytes_per_position * (uint64_t)b.context_positions);
    /* the type the model resolved at open is its contexts', whatever the
     * environment says later; options of a context leave it open again */
    ck_assert_int_eq(setenv("COLI_KV_TYPE", "fp8", 1), 0);
    coli_context *c = NULL;
    coli_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    ck_assert_int_eq(coli_context_stats(c, &st), COLI_OK);
    ck_assert_uint_eq(st.kv_bytes, b.kv_bytes);
    coli_context_free(c);
    coli_options *o = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, 64), COLI_OK);
    c = NULL;
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(coli_model_errmsg(m), "environment variable COLI_KV_TYPE: 'fp8'") != NULL, "%s",
                  coli_model_errmsg(m));
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_KV_TYPE, COLI_KV_F32), COLI_OK);
    ck_assert_int_eq(coli_context_create(m, o, &c), COLI_OK);
    ck_assert_int_eq(coli_context_stats(c, &st), COLI_OK);
    ck_assert_uint_eq(st.kv_bytes, 64 * f.kv_bytes_per_position);
    coli_context_free(c);
    coli_options_free(o);
    coli_model_free(m);
    /* the option wins over the variable */
    ck_assert_int_eq(setenv("COLI_KV_TYPE", "bf16", 1), 0);
    ck_assert_int_eq(open_set_kv(dir, COLI_WEIGHTS_Q8, 0, COLI_KV_F32, &m), COLI_OK);
    ck_assert_int_eq(info_of(m).kv_type, COLI_KV_F32);
    coli_model_free(m);
    unsetenv("COLI_KV_TYPE");
    free(dir);
}
END_TEST

/* The choice for a CPU with fewer features than this one. */
START_TEST(test_pick)
{
    const unsigned avx2 = COLI_CPU_AVX2 | COLI_CPU_FMA | COLI_CPU_F16C;
    const unsigned all = avx2 | COLI_CPU_AVX512 | COLI_CPU_AVX512VNNI;
    const coli__cpuk *k = NULL;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_int_eq(coli__cpusel_pick(0, NULL, 0, &k, &err), COLI_OK);
    ck_assert_str_eq(coli__cpuk_name(k), "scalar, float scalar");
    ck_assert_int_eq(coli__cpusel_pick(2, NULL, 0, &k, &err), COLI_EUNSUPPORTED);
    ck_assert_str_eq(err.msg, "COLI_OPT_CPU_KERNELS avx2: this CPU (or build) has only scalar");
    ck_assert_int_eq(coli__cpusel_pick(0, "avx2", COLI_CPU_AVX2 | COLI_CPU_F16C, &k, &err), COLI_EUNSUPPORTED);
    ck_assert_str_eq(err.msg, "COLI_OPT_CPU_KERNELS avx2 (from COLI_CPU): this CPU (or build) has only scalar");
    ck_assert_int_eq(coli__cpusel_pick(5, NULL, all, &k, &err), COLI_EINVAL);
    ck_assert_int_eq(coli__cpusel_pick(0, "avx", all, &k, &err), COLI_EINVAL);
    ck_assert_str_eq(err.msg, "environment variable COLI_CPU: 'avx' is not scalar, avx2, avx512 or amx");
    if ((coli__cpu_features() & avx2) == avx2) {
        ck_assert_int_eq(coli__cpusel_pick(3, NULL, avx2 | COLI_CPU_AVX512, &k, &err), COLI_EUNSUPPORTED);
        ck_assert_str_eq(err.msg, "COLI_OPT_CPU_KERNELS avx512: this CPU (or build) has only scalar, avx2");
        ck_assert_int_eq(coli__cpusel_pick(0, NULL, avx2, &k, &err), COLI_OK);
        ck_assert_str_eq(coli__cpuk_name(k), "avx2, float avx2");
        ck_assert_int_eq(coli__cpusel_pick(0, "scalar", avx2, &k, &err), COLI_OK);
        ck_assert_str_eq(coli__cpuk_name(k), "scalar, float scalar");
    } else {
        fprintf(stderr, "this CPU has no AVX2+FMA+F16C: the avx2 choices not checked\n");
    }
    if ((coli__cpu_features() & all) == all) {
        ck_assert_int_eq(coli__cpusel_pick(0, NULL, all, &k, &err), COLI_OK);
        ck_assert_str_eq(coli__cpuk_name(k), "avx512vnni, float avx512");
        ck_assert_int_eq(coli__cpusel_pick(4, NULL, all, &k, &err), COLI_EUNSUPPORTED);
        ck_assert_str_eq(err.msg, "COLI_OPT_CPU_KERNELS amx: this CPU (or build) has only scalar, avx2, avx512");
    } else {
        fprintf(stderr, "this CPU has no AVX-512 VNNI: the avx512 choice not checked\n");
    }
    if (coli__cpu_features() & COLI_CPU_AMX) {
        ck_assert_int_eq(coli__cpusel_pick(0, NULL, all | COLI_CPU_AMX, &k, &err), COLI_OK);
        ck_assert_str_eq(coli__cpuk_name(k), "amx-int8, avx512vnni, float avx512");
        ck_assert_int_eq(coli__cpusel_pick(0, "avx512", all | COLI_CPU_AMX, &k, &err), COLI_OK);
        ck_assert_str_eq(coli__cpuk_name(k), "avx512vnni, float avx512");
    } else {
        fprintf(stderr, "AMX NOT CHECKED: this CPU (or kernel) has no AMX-INT8: the amx choice not checked\n");
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cpu_kernels");
    TCase *tc = tcase_create("same_bits");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_same_bits, 0,
                        2 * (int)(sizeof FIXTURES / sizeof FIXTURES[0] * (sizeof FORMATS / sizeof FORMATS[0])));
    tcase_add_loop_test(tc, test_attention_cuts, 0, 8);
    suite_add_tcase(s, tc);
    TCase *kern = tcase_create("attention_kernels");
    tcase_set_timeout(kern, 300);
    tcase_add_test(kern, test_attention_kernels);
    tcase_add_test(kern, test_float_products);
    suite_add_tcase(s, kern);
    TCase *opt = tcase_create("option");
    tcase_add_test(opt, test_swiglu);
    tcase_add_test(opt, test_written_order);
    tcase_add_test(opt, test_option_bounds);
    tcase_add_test(opt, test_env);
    tcase_add_test(opt, test_usable);
    tcase_add_test(opt, test_kv_env);
    tcase_add_test(opt, test_pick);
    suite_add_tcase(s, opt);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
