/* test_quant.c - the quantized formats q8, q4, q2 (docs/formats.md): fp16
 * conversion, byte layouts, quantization rounding, activation quantization,
 * the scalar product, bit-exactness of every SIMD kernel table against the
 * scalar definition, and the public coli_quant_size / coli_quantize /
 * coli_dequantize.
 *
 * Expectations are independent of lib/cpu/quant.c: byte layouts are derived by
 * hand in the comments, fp16 values are checked against their definition, and
 * the product is re-implemented here step by step from the contract text. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "cpu/quant.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

/* One stream of testutil's generator for the whole program, reseeded by
 * each test that needs its own sequence. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static void rng_seed(uint64_t s)
{
    g_rng = s * 0x9e3779b97f4a7c15ull + 1;
}

static uint64_t rng_u64(void)
{
    return tu_rng_u64(&g_rng);
}

/* uniform in [0, n) */
static int rng_int(int n)
{
    return (int)(rng_u64() % (uint64_t)n);
}

static double rng_unit(void)
{
    return tu_rng_unit(&g_rng);
}

static double rng_normal(void)
{
    return tu_rng_normal(&g_rng);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp16 -> f32 from the definition of binary16 (independent of the library). */
static float ref_h2f(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, man = h & 1023;
    double v;
    if (e == 31)
        v = man ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)man, -24);
    else
        v = ldexp((double)(1024 + man), e - 25);
    return (float)(sign ? -v : v);
}

/* Round half to even, written out (no reliance on the FP rounding mode). */
static double ref_rne(double v)
{
    double f = floor(v), r = v - f;
    if (r > 0.5 || (r == 0.5 && fmod(f, 2.0) != 0.0))
        return f + 1.0;
    return f;
}

/* A quantized matrix with its own storage. */
typedef struct qbuf {
    coli__qmat w;
    uint8_t *qs;
    uint16_t *d, *m;
} qbuf;

static int scale_group(coli__dtype type, int group)
{
    return type == COLI_DT_Q4 ? group : 32;
}

static void qbuf_init(qbuf *b, coli__dtype type, int group, int rows, int cols)
{
    memset(b, 0, sizeof *b);
    size_t n = (size_t)rows * (size_t)cols;
    size_t qsb = type == COLI_DT_Q8 ? n : type == COLI_DT_Q4 ? n / 2 : n / 4;
    b->qs = malloc(qsb + 1);
    b->d = malloc((n / (size_t)scale_group(type, group) + 1) * sizeof(uint16_t));
    b->m = malloc((n / 32 + 1) * sizeof(uint16_t));
    ck_assert(b->qs && b->d && b->m);
    b->w.type = type;
    b->w.group = scale_group(type, group);
    b->w.rows = rows;
    b->w.cols = cols;
    b->w.qs = b->qs;
    b->w.d = b->d;
    b->w.m = type == COLI_DT_Q2 ? b->m : NULL;
}

static void qbuf_free(qbuf *b)
{
    free(b->qs);
    free(b->d);
    free(b->m);
}

static void qbuf_quantize(qbuf *b, const float *src)
{
    coli__q_quantize_rows(src, b->w.rows, &b->w);
}

/* The quant of column c of row r from the byte rules of docs/formats.md:
 * q8: byte c, int8; q4: block c/32, byte (c%32)%16, low nibble for the first
 * 16 columns of the block, high for the next 16, minus 8; q2: group c/32,
 * byte (c%32)%8, bits 2*((c%32)/8).. of it. */
static int ref_q(const coli__qmat *w, int r, int c)
{
    size_t cols = (size_t)w->cols;
    if (w->type == COLI_DT_Q8)
        return (int8_t)w->qs[(size_t)r * cols + (size_t)c];
    if (w->type == COLI_DT_Q4) {
        const uint8_t *row = w->qs + (size_t)r * cols / 2;
        int blk = c / 32, i = c % 32;
        uint8_t byte = row[blk * 16 + (i < 16 ? i : i - 16)];
        int u = i < 16 ? (byte & 0x0f) : (byte >> 4);
        return u - 8;
    }
    const uint8_t *row = w->qs + (size_t)r * cols / 4;
    int grp = c / 32, i = c % 32;
    uint8_t byte = row[grp * 8 + i % 8];
    return (byte >> (2 * (i / 8))) & 3;
}

/* The fp16 scale covering column c of row r. */
static uint16_t ref_dh(const coli__qmat *w, int r, int c)
{
    int G = scale_group(w->type, w->group);
    return w->d[(size_t)r * (size_t)(w->cols / G) + (size_t)(c / G)];
}

static uint16_t ref_mh(const coli__qmat *w, int r, int c)
{
    return w->m[(size_t)r * (size_t)(w->cols / 32) + (size_t)(c / 32)];
}

/* The product of docs/formats.md, steps 1-4, one operation per statement;
 * volatile makes every intermediate a binary32 value. */
static float ref_dot(const coli__qmat *w, int r, const int8_t *p, const float *s,
                     const int32_t *psum)
{
    int n = w->cols / 32;
    volatile float P[8];
    for (int k = 0; k < 8; k++)
        P[k] = 0.0f;
    for (int g = 0; g < n; g++) {
        int32_t isum = 0; /* step 1 */
        for (int i = 0; i < 32; i++)
            isum += ref_q(w, r, 32 * g + i) * p[32 * g + i];
        volatile float D = ref_h2f(ref_dh(w, r, 32 * g)); /* step 2 */
        volatile float ds = D * s[g];
        volatile float f = (float)isum * ds;
        if (w->type == COLI_DT_Q2) {
            volatile float M = ref_h2f(ref_mh(w, r, 32 * g));
            volatile float ms = M * s[g];
            volatile float f2 = (float)psum[g] * ms;
            f = f + f2;
        }
        P[g % 8] = P[g % 8] + f; /* step 3 */
    }
    volatile float a = P[0] + P[4], b = P[2] + P[6], c = P[1] + P[5], d = P[3] + P[7];
    volatile float e = a + b, o = c + d; /* step 4 */
    return e + o;
}

/* Activations of n_tok tokens. */
typedef struct acts {
    int cols, n_tok;
    float *a;
    int8_t *p;
    float *s;
    int32_t *psum;
} acts;

static void acts_init(acts *x, int cols, int n_tok)
{
    x->cols = cols;
    x->n_tok = n_tok;
    size_t n = (size_t)cols * (size_t)n_tok;
    x->a = malloc(n * sizeof *x->a);
    x->p = malloc(n);
    x->s = malloc((n / 32) * sizeof *x->s);
    x->psum = malloc((n / 32) * sizeof *x->psum);
    ck_assert(x->a && x->p && x->s && x->psum);
}

static void acts_free(acts *x)
{
    free(x->a);
    free(x->p);
    free(x->s);
    free(x->psum);
}

/* Fills 32 floats with one kind of group (weights or activations). */
static void fill_group(float *x, int kind)
{
    double scale = pow(10.0, -3.0 + 5.0 * rng_unit());
    switch (kind) {
    case 0: /* plain */
    default:
        for (int i = 0; i < 32; i++)
            x[i] = (float)(scale * rng_normal());
        break;
    case 1: /* zeros, some negative */
        for (int i = 0; i < 32; i++)
            x[i] = rng_int(2) ? 0.0f : -0.0f;
        break;
    case 2: { /* all equal */
        float v = (float)(scale * rng_normal());
        for (int i = 0; i < 32; i++)
            x[i] = v;
        break;
    }
    case 3: /* large dynamic range */
        for (int i = 0; i < 32; i++)
            x[i] = (float)((rng_int(2) ? 1 : -1) * ldexp(1.0 + rng_unit(), -20 + rng_int(30)));
        break;
    case 4: /* small values and one outlier */
        for (int i = 0; i < 32; i++)
            x[i] = (float)(scale * 0.01 * rng_normal());
        x[rng_int(32)] = (float)(scale * (rng_int(2) ? 50.0 : -50.0));
        break;
    case 5: /* offset: all of one sign */
        for (int i = 0; i < 32; i++)
            x[i] = (float)(scale * (3.0 + 0.5 * rng_normal()));
        break;
    case 6: /* equal magnitudes of both signs: ties of the q4 "first" rule */
        for (int i = 0; i < 32; i++)
            x[i] = (float)(scale * (rng_int(3) - 1));
        break;
    }
}

static void fill_row_data(float *x, size_t n)
{
    for (size_t g = 0; g < n / 32; g++)
        fill_group(x + 32 * g, rng_int(8) == 0 ? 1 + rng_int(6) : 0);
}

/* Random quantized activations: either quantized from random floats or raw
 * random p/s (psum always consistent with p). */
static void fill_acts(acts *x, int raw)
{
    size_t n = (size_t)x->cols * (size_t)x->n_tok;
    if (!raw) {
        fill_row_data(x->a, n);
        for (int t = 0; t < x->n_tok; t++)
            coli__q_quantize_act(x->a + (size_t)t * x->cols, x->cols, x->p + (size_t)t * x->cols,
                                 x->s + (size_t)t * (x->cols / 32),
                                 x->psum + (size_t)t * (x->cols / 32));
        return;
    }
    for (size_t g = 0; g < n / 32; g++) {
        int zero = rng_int(10) == 0;
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) {
            int v = zero ? 0 : rng_int(255) - 127;
            x->p[32 * g + i] = (int8_t)v;
            sum += v;
        }
        x->psum[g] = sum;
        x->s[g] = zero ? 0.0f : (float)pow(10.0, -4.0 + 6.0 * rng_unit());
    }
}

/* A random finite fp16: mostly moderate, sometimes anything (subnormals,
 * zero, negative, up to 65504). */
static uint16_t rand_f16(int allow_negative)
{
    int e = rng_int(4) == 0 ? rng_int(31) : 5 + rng_int(16);
    uint16_t h = (uint16_t)((e << 10) | rng_int(1024));
    if (allow_negative && rng_int(2))
        h |= 0x8000;
    return h;
}

/* Weights: quantized from random data, or raw random bytes and scales. */
static void fill_weights(qbuf *b, int raw)
{
    const coli__qmat *w = &b->w;
    size_t n = (size_t)w->rows * (size_t)w->cols;
    if (!raw) {
        float *src = malloc(n * sizeof *src);
        ck_assert_ptr_nonnull(src);
        fill_row_data(src, n);
        qbuf_quantize(b, src);
        free(src);
        return;
    }
    size_t qsb = w->type == COLI_DT_Q8 ? n : w->type == COLI_DT_Q4 ? n / 2 : n / 4;
    for (size_t i = 0; i < qsb; i++) {
        uint8_t v = (uint8_t)rng_u64();
        if (w->type == COLI_DT_Q8 && v == 0x80) /* -128 never occurs */
            v = 0x81;
        b->qs[i] = v;
    }
    size_t nd = n / (size_t)w->group;
    for (size_t i = 0; i < nd; i++)
        b->d[i] = rand_f16(w->type != COLI_DT_Q2); /* q2's d is >= 0 by construction */
    if (w->type == COLI_DT_Q2)
        for (size_t i = 0; i < n / 32; i++)
            b->m[i] = rand_f16(1);
}

static const struct {
    coli__dtype type;
    int group;
    const char *name;
} qconf[] = {
    {COLI_DT_Q8, 32, "q8"},     {COLI_DT_Q4, 32, "q4/32"}, {COLI_DT_Q4, 64, "q4/64"},
    {COLI_DT_Q4, 128, "q4/128"}, {COLI_DT_Q2, 32, "q2"},
};
#define N_QCONF ((int)(sizeof qconf / sizeof qconf[0]))

/* ---- fp16 ------------------------------------------------------------------- */

START_TEST(test_f16_values)
{
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {0.1f, 0x2e66},            /* 1.6 * 2^-4: mantissa 614.4 -> 614 */
        {0.33333334f, 0x3555},     /* 1.333 * 2^-2: 341.33 -> 341 */
        {0.375f, 0x3600},
        {65504.0f, 0x7bff},        /* largest finite */
        {65519.996f, 0x7bff},      /* just below the midpoint to 2^16 */
        {65520.0f, 0x7c00},        /* the midpoint: ties to even = 2^16 = inf */
        {1e6f, 0x7c00},
        {-1e6f, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},        /* 6.1035156e-5: smallest normal */
        {6.1e-5f, 0x03ff},         /* just below it: 1023.4 units of 2^-24 */
        {0x1.ffcp-15f, 0x0400},    /* 1023.5 units: tie, 1023 odd -> 1024 */
        {0x1p-24f, 0x0001},        /* smallest subnormal */
        {0x1p-25f, 0x0000},        /* half of it: tie -> even 0 */
        {0x1.000002p-25f, 0x0001}, /* just above half */
        {-0x1p-25f, 0x8000},
        {0x1.4p-24f, 0x0001},      /* 1.25 units */
        {0x1.8p-24f, 0x0002},      /* 1.5 units: tie -> 2 */
        {0x1.4p-23f, 0x0002},      /* 2.5 units: tie -> 2 */
        {0x1.cp-23f, 0x0004},      /* 3.5 units: tie -> 4 */
        {1e-10f, 0x0000},
        {0x1.002p0f, 0x3c00},      /* 1 + 2^-11: tie -> even 1.0 */
        {0x1.006p0f, 0x3c02},      /* 1 + 3*2^-11: tie -> even 0x3c02 */
        {0x1.0021p0f, 0x3c01},     /* just above the tie */
        {0.12204724f, 0x2fd0},     /* 15.5/127 (used below) */
        {0.023622047f, 0x260c},    /* 3/127 (used below) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(coli__f32_to_f16(cases[i].f) == cases[i].h, "f32_to_f16(%a) = 0x%04x, want 0x%04x",
                      (double)cases[i].f, coli__f32_to_f16(cases[i].f), cases[i].h);
    uint16_t n = coli__f32_to_f16(NAN);
    ck_assert_msg((n & 0x7c00) == 0x7c00 && (n & 0x03ff) != 0, "NaN -> 0x%04x", n);
    n = coli__f32_to_f16(-NAN);
    ck_assert_msg((n & 0x7c00) == 0x7c00 && (n & 0x03ff) != 0, "-NaN -> 0x%04x", n);
    n = coli__f32_to_f16(bits_f(0x7f800001u)); /* signalling NaN with a low payload */
    ck_assert_msg((n & 0x7c00) == 0x7c00 && (n & 0x03ff) != 0, "sNaN -> 0x%04x", n);
}
END_TEST

/* Every half: f16 -> f32 is exact and back is the identity; the midpoint of
 * two neighbours goes to the even one, and one f32 ulp off it to the nearer. */
START_TEST(test_f16_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = coli__f16_to_f32((uint16_t)h);
        float want = ref_h2f((uint16_t)h);
        if (isnan(want)) {
            ck_assert(isnan(f));
            uint16_t back = coli__f32_to_f16(f);
            ck_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
            continue;
        }
        ck_assert_msg(fbits(f) == fbits(want), "f16_to_f32(0x%04x)", h);
        ck_assert_msg(coli__f32_to_f16(f) == h, "round trip of 0x%04x gives 0x%04x", h,
                      coli__f32_to_f16(f));
        if ((h & 0x7fff) >= 0x7bff) /* largest finite and above: no finite neighbour */
            continue;
        uint16_t h1 = (uint16_t)(h + 1); /* next magnitude, same sign */
        double a = ref_h2f((uint16_t)h), b = ref_h2f(h1);
        float mid = (float)((a + b) / 2); /* exact: 12 significant bits */
        ck_assert(((double)mid) == (a + b) / 2);
        uint16_t even = (h & 1) ? h1 : (uint16_t)h;
        ck_assert_msg(coli__f32_to_f16(mid) == even, "midpoint above 0x%04x", h);
        float toward0 = nextafterf(mid, 0.0f), away = nextafterf(mid, (h & 0x8000) ? -INFINITY : INFINITY);
        ck_assert_msg(coli__f32_to_f16(toward0) == h, "below midpoint above 0x%04x", h);
        ck_assert_msg(coli__f32_to_f16(away) == h1, "above midpoint above 0x%04x", h);
    }
}
END_TEST

/* Random f32 bit patterns against the test suite's own converter. */
START_TEST(test_f16_random)
{
    rng_seed(11);
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if (i & 1) /* concentrate on the half range */
            u = (u & 0x80000000u) | (0x33000000u + (u & 0x7fffffu) + ((uint32_t)rng_int(42) << 23));
        float f = bits_f(u);
        if (isnan(f))
            continue;
        ck_assert_msg(coli__f32_to_f16(f) == tu_f32_to_f16(f), "f32_to_f16(%a)", (double)f);
    }
}
END_TEST

/* ---- layouts, by hand ------------------------------------------------------- */

START_TEST(test_q8_layout)
{
    float x[128] = {0};
    /* group 0: x_i = i/2. amax = 15.5, d = fp16(15.5/127 = 0.1220472) = 0x2fd0
     * (1.953125 * 2^-4 = 0.1220703125), q_i = rne(i/2 / 0.1220703125) =
     * rne(4.096 i). */
    for (int i = 0; i < 32; i++)
        x[i] = 0.5f * (float)i;
    static const int8_t q0[32] = {0,  4,  8,  12, 16, 20, 25,  29,  33,  37,  41,
                                  45, 49, 53, 57, 61, 66, 70,  74,  78,  82,  86,
                                  90, 94, 98, 102, 106, 111, 115, 119, 123, 127};
    /* group 1: amax 127 -> d = 1.0 = 0x3c00, q = rne(x): ties to even */
    static const float x1[12] = {127, -127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, 100.5f, 101.5f, -0.0f};
    static const int8_t q1[12] = {127, -127, 0, 2, 2, 0, -2, -2, 3, 100, 102, 0};
    memcpy(x + 32, x1, sizeof x1);
    /* group 2: zeros -> d = 0, q = 0 */
    /* group 3: all -3: d = fp16(3/127 = 0.0236220) = 0x260c (0.0236206...),
     * q = rne(-127.007) = -127 = 0x81 */
    for (int i = 96; i < 128; i++)
        x[i] = -3.0f;

    qbuf b;
    qbuf_init(&b, COLI_DT_Q8, 32, 1, 128);
    qbuf_quantize(&b, x);
    ck_assert_uint_eq(b.d[0], 0x2fd0);
    ck_assert_uint_eq(b.d[1], 0x3c00);
    ck_assert_uint_eq(b.d[2], 0x0000);
    ck_assert_uint_eq(b.d[3], 0x260c);
    for (int i = 0; i < 32; i++) {
        ck_assert_msg((int8_t)b.qs[i] == q0[i], "q[%d] = %d want %d", i, (int8_t)b.qs[i], q0[i]);
        int8_t w1 = i < 12 ? q1[i] : 0;
        ck_assert_msg((int8_t)b.qs[32 + i] == w1, "q[%d]", 32 + i);
        ck_assert_uint_eq(b.qs[64 + i], 0);
        ck_assert_uint_eq(b.qs[96 + i], 0x81);
    }
    float out[128];
    coli__q_dequantize_row(&b.w, 0, out);
    ck_assert(out[31] == 127.0f * 0.1220703125f);
    ck_assert(out[32 + 9] == 100.0f);
    ck_assert(fbits(out[64]) == 0 || fbits(out[64]) == 0x80000000u);
    qbuf_free(&b);
}
END_TEST

START_TEST(test_q4_layout)
{
    float x[128] = {0};
    /* group 0 (cols 0..31): the largest magnitude 4 occurs at col 5 (-4) and
     * col 20 (+4); the first wins: mx = -4, d = fp16(-4/-8) = 0.5 = 0x3800.
     * q = clamp(rne(x / 0.5), -8, 7), nibble = q + 8:
     *   col 0: 1.0 -> 2 -> 10      col 16: -0.25 -> -0.5 -> 0 -> 8
     *   col 1: 0.75 -> 1.5 -> 2 -> 10    col 17: 1.25 -> 2.5 -> 2 -> 10
     *   col 2: -3.3 -> -6.6 -> -7 -> 1   col 18: 0 -> 8
     *   col 4: 0 -> 8              col 20: 4 -> 8 -> clamped 7 -> 15
     *   col 5: -4 -> -8 -> 0       col 21: 0 -> 8
     * byte b = nibble(col b) | nibble(col b+16) << 4:
     *   b0 = 0x8a, b1 = 0xaa, b2 = 0x81, b4 = 0xf8, b5 = 0x80, others 0x88. */
    x[0] = 1.0f;
    x[1] = 0.75f;
    x[2] = -3.3f;
    x[5] = -4.0f;
    x[16] = -0.25f;
    x[17] = 1.25f;
    x[20] = 4.0f;
    /* group 1 (cols 32..63): +4 at col 3 before -4 at col 9: mx = 4,
     * d = fp16(-0.5) = 0xb800. col 3: 4/-0.5 = -8 -> 0; col 9: 8 -> 7 -> 15;
     * col 18: 2/-0.5 = -4 -> 4. b2 = 8 | 4<<4 = 0x48, b3 = 0x80, b9 = 0x8f. */
    x[32 + 3] = 4.0f;
    x[32 + 9] = -4.0f;
    x[32 + 18] = 2.0f;
    /* group 2: zeros -> d = 0, all nibbles 8 */
    /* group 3: -3 at col 7 before +3 at col 30: mx = -3, d = fp16(0.375) =
     * 0x3600; col 7 -> -8 -> 0, col 30 -> 8 -> 7 -> 15: b7 = 0x80, b14 = 0xf8 */
    x[96 + 7] = -3.0f;
    x[96 + 30] = 3.0f;

    static const uint8_t want32[64] = {
        0x8a, 0xaa, 0x81, 0x88, 0xf8, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
        0x88, 0x88, 0x88, /* block 0 */
        0x88, 0x88, 0x48, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x8f, 0x88, 0x88, 0x88,
        0x88, 0x88, 0x88, /* block 1 */
        0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
        0x88, 0x88, 0x88, /* block 2 */
        0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88,
        0x88, 0xf8, 0x88, /* block 3 */
    };
    qbuf b;
    qbuf_init(&b, COLI_DT_Q4, 32, 1, 128);
    qbuf_quantize(&b, x);
    ck_assert_uint_eq(b.d[0], 0x3800);
    ck_assert_uint_eq(b.d[1], 0xb800);
    ck_assert_uint_eq(b.d[2], 0x0000);
    ck_assert_uint_eq(b.d[3], 0x3600);
    for (int i = 0; i < 64; i++)
        ck_assert_msg(b.qs[i] == want32[i], "G=32 byte %d = 0x%02x want 0x%02x", i, b.qs[i],
                      want32[i]);
    float out[128];
    coli__q_dequantize_row(&b.w, 0, out);
    ck_assert(out[20] == 3.5f);   /* clamped: 7 * 0.5 */
    ck_assert(out[5] == -4.0f);
    ck_assert(out[35] == 4.0f);   /* -8 * -0.5 */
    ck_assert(out[41] == -3.5f);  /* 7 * -0.5 */
    qbuf_free(&b);

    /* G = 64: one scale for cols 0..63. The first of magnitude 4 is col 5 (-4):
     * d = 0x3800 again. Block 0 as before; block 1: col 35: 4 -> 8 -> 7 -> 15,
     * col 41: -4 -> -8 -> 0, col 50: 2 -> 4 -> 12: b2 = 8 | 12<<4 = 0xc8,
     * b3 = 0x8f, b9 = 0x80. Cols 64..127: mx = -3 at col 103, d = 0x3600,
     * blocks 2 and 3 as before. */
    qbuf_init(&b, COLI_DT_Q4, 64, 1, 128);
    qbuf_quantize(&b, x);
    ck_assert_uint_eq(b.d[0], 0x3800);
    ck_assert_uint_eq(b.d[1], 0x3600);
    uint8_t want64[64];
    memcpy(want64, want32, sizeof want64);
    memset(want64 + 16, 0x88, 16);
    want64[16 + 2] = 0xc8;
    want64[16 + 3] = 0x8f;
    want64[16 + 9] = 0x80;
    for (int i = 0; i < 64; i++)
        ck_assert_msg(b.qs[i] == want64[i], "G=64 byte %d = 0x%02x want 0x%02x", i, b.qs[i],
                      want64[i]);
    qbuf_free(&b);

    /* G = 128: one scale for everything, mx = -4 at col 5: d = 0x3800; block 3:
     * col 103: -3/0.5 = -6 -> 2, col 126: 6 -> 14: b7 = 0x82, b14 = 0xe8. */
    qbuf_init(&b, COLI_DT_Q4, 128, 1, 128);
    qbuf_quantize(&b, x);
    ck_assert_uint_eq(b.d[0], 0x3800);
    want64[48 + 7] = 0x82;
    want64[48 + 14] = 0xe8;
    for (int i = 0; i < 64; i++)
        ck_assert_msg(b.qs[i] == want64[i], "G=128 byte %d = 0x%02x want 0x%02x", i, b.qs[i],
                      want64[i]);
    qbuf_free(&b);
}
END_TEST

START_TEST(test_q2_layout)
{
    float x[128];
    for (int i = 0; i < 32; i++)
        x[i] = 0.0f;
    /* group 0: lo = -1, hi = 2: m = fp16(-1) = 0xbc00, d = fp16(3/3) = 0x3c00,
     * q = clamp(rne(x + 1), 0, 3):
     *   col 0: -1 -> 0, col 8: 2 -> 3, col 16: 0.5 -> 1.5 -> 2, col 24: -0.5 -> 0.5 -> 0
     *   col 1: 0 -> 1, col 9: 1.5 -> 2.5 -> 2, col 17: 1 -> 2, col 25: 0.4 -> 1.4 -> 1
     *   the rest: 0 -> 1
     * byte b = q(b) | q(b+8)<<2 | q(b+16)<<4 | q(b+24)<<6:
     *   b0 = 0 | 3<<2 | 2<<4 | 0 = 0x2c; b1 = 1 | 2<<2 | 2<<4 | 1<<6 = 0x69;
     *   others 0x55. */
    x[0] = -1.0f;
    x[8] = 2.0f;
    x[16] = 0.5f;
    x[24] = -0.5f;
    x[1] = 0.0f;
    x[9] = 1.5f;
    x[17] = 1.0f;
    x[25] = 0.4f;
    /* group 1: all 3: m = 0x4200, d = 0, q = 0 */
    for (int i = 32; i < 64; i++)
        x[i] = 3.0f;
    /* group 3: +0 and one -0: lo = -0 (taking -0 < +0): m = 0x8000, d = 0 */
    for (int i = 96; i < 128; i++)
        x[i] = 0.0f;
    x[120] = -0.0f;
    /* group 2: 0.25 and 1.0 alternate by column quarter: lo = 0.25 (0x3400),
     * d = fp16(0.25) = 0x3400, q = (x - 0.25)/0.25 = 0 or 3: columns 8..15
     * and 24..31 of the group (quarters 1 and 3) hold 1.0 -> bits 2-3 and 6-7
     * set: every byte 0b11001100 = 0xcc */
    for (int i = 0; i < 32; i++)
        x[64 + i] = (i / 8) % 2 ? 1.0f : 0.25f;

    qbuf b;
    qbuf_init(&b, COLI_DT_Q2, 32, 1, 128);
    qbuf_quantize(&b, x);
    ck_assert_uint_eq(b.m[3], 0x8000);
    ck_assert_uint_eq(b.d[3], 0x0000);
    ck_assert_uint_eq(b.m[0], 0xbc00);
    ck_assert_uint_eq(b.d[0], 0x3c00);
    ck_assert_uint_eq(b.m[1], 0x4200);
    ck_assert_uint_eq(b.d[1], 0x0000);
    ck_assert_uint_eq(b.m[2], 0x3400);
    ck_assert_uint_eq(b.d[2], 0x3400);
    static const uint8_t want[24] = {0x2c, 0x69, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55,
                                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                     0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc};
    for (int i = 0; i < 24; i++)
        ck_assert_msg(b.qs[i] == want[i], "byte %d = 0x%02x want 0x%02x", i, b.qs[i], want[i]);
    float out[128];
    coli__q_dequantize_row(&b.w, 0, out);
    ck_assert(out[16] == 1.0f);  /* 1 * 2 - 1 */
    ck_assert(out[8] == 2.0f);
    ck_assert(out[40] == 3.0f);  /* 0 * 0 + 3 */
    ck_assert(out[64 + 8] == 1.0f);
    qbuf_free(&b);
}
END_TEST

/* Groups whose scale rounds to fp16 zero although they are not all zero:
 * every quant is 0 (lib/cpu/quant.c's rule; no division by zero, no NaN). */
/* The x16 layout byte by byte, from the rules of docs/formats.md ("The x16
 * layout") applied to the row layout's values (ref_q, ref_dh). */
START_TEST(test_x16_layout)
{
    static const struct {
        coli__dtype type;
        int group;
    } conf[] = {{COLI_DT_Q8, 32}, {COLI_DT_Q4, 32}, {COLI_DT_Q4, 64}, {COLI_DT_Q4, 128}};
    rng_seed(77);
    ck_assert(!coli__q_x16_fits(COLI_DT_Q2, 32));
    ck_assert(!coli__q_x16_fits(COLI_DT_Q4, 40));
    ck_assert(coli__q_x16_fits(COLI_DT_Q8, 48));
    for (size_t ci = 0; ci < sizeof conf / sizeof conf[0]; ci++) {
        const int rows = 32, cols = 384, G = conf[ci].group, per = G / 32;
        const size_t gb = conf[ci].type == COLI_DT_Q8 ? 32 : 16; /* quant bytes per row and 32 columns */
        const size_t rec = 32 + (size_t)per * 16 * gb, bb = (size_t)(cols / G) * rec;
        qbuf b;
        qbuf_init(&b, conf[ci].type, G, rows, cols);
        fill_weights(&b, 1);
        ck_assert_uint_eq(coli__q_x16_block_bytes(b.w.type, G, cols), bb);
        ck_assert_uint_eq(bb * (rows / 16), coli__q_matrix_bytes(b.w.type, G, rows, cols));
        uint8_t *xb = malloc(bb * (rows / 16));
        ck_assert_ptr_nonnull(xb);
        coli__q_x16_pack(&b.w, rows, xb);
        coli__qmat xw = b.w;
        xw.qs = xb;
        xw.d = NULL;
        xw.layout = COLI__QL_X16;
        for (int r = 0; r < rows; r++) {
            const int i = r % 16;
            for (int c = 0; c < cols; c++) {
                const int g = c / 32, k = c % 32;
                const uint8_t *rb = xb + (size_t)(r / 16) * bb + (size_t)(g / per) * rec;
                const uint8_t *q = rb + 32 + (size_t)(g % per) * 16 * gb;
                uint16_t d;
                memcpy(&d, rb + 2 * i, 2);
                ck_assert_uint_eq(d, ref_dh(&b.w, r, c));
                int v;
                if (conf[ci].type == COLI_DT_Q8) {
                    v = (int8_t)q[64 * (k / 4) + 4 * i + k % 4];
                } else {
                    uint8_t byte = q[64 * (k / 8) + 4 * i + k % 4];
                    v = (k % 8 < 4 ? byte & 15 : byte >> 4) - 8;
                }
                ck_assert_msg(v == ref_q(&b.w, r, c), "group %d row %d col %d: %d, want %d", G, r, c, v,
                              ref_q(&b.w, r, c));
            }
            float a[384], x[384];
            coli__q_dequantize_row(&b.w, r, a);
            coli__q_dequantize_row(&xw, r, x);
            ck_assert(memcmp(a, x, sizeof a) == 0);
        }
        free(xb);
        qbuf_free(&b);
    }
}
END_TEST

START_TEST(test_tiny_groups)
{
    float x[128];
    for (int i = 0; i < 128; i++)
        x[i] = (i % 3 - 1) * 1e-9f;
    for (int c = 0; c < N_QCONF; c++) {
        qbuf b;
        qbuf_init(&b, qconf[c].type, qconf[c].group, 1, 128);
        qbuf_quantize(&b, x);
        float out[128];
        coli__q_dequantize_row(&b.w, 0, out);
        for (int i = 0; i < 128; i++) {
            ck_assert_msg(ref_q(&b.w, 0, i) == 0, "%s col %d", qconf[c].name, i);
            ck_assert(fabsf(out[i] - x[i]) <= 2e-9f);
        }
        qbuf_free(&b);
    }
}
END_TEST

/* ---- quantization error ------------------------------------------------------ */

START_TEST(test_quant_error)
{
    rng_seed(21);
    const int rows = 16, cols = 1024;
    float *x = malloc(sizeof(float) * rows * cols), *out = malloc(sizeof(float) * cols);
    ck_assert(x && out);
    for (int c = 0; c < N_QCONF; c++) {
        fill_row_data(x, (size_t)rows * cols);
        qbuf b;
        qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
        qbuf_quantize(&b, x);
        int G = scale_group(qconf[c].type, qconf[c].group);
        long clamped = 0;
        for (int r = 0; r < rows; r++) {
            coli__q_dequantize_row(&b.w, r, out);
            for (int g = 0; g < cols / G; g++) {
                const float *xg = x + (size_t)r * cols + (size_t)g * G;
                float D = ref_h2f(ref_dh(&b.w, r, g * G));
                float amax = 0.0f, lo = xg[0], hi = xg[0];
                for (int i = 0; i < G; i++) {
                    amax = fmaxf(amax, fabsf(xg[i]));
                    lo = fminf(lo, xg[i]);
                    hi = fmaxf(hi, xg[i]);
                }
                for (int i = 0; i < G; i++) {
                    int col = g * G + i;
                    int q = ref_q(&b.w, r, col);
                    float want; /* the value as the contract defines it */
                    double bound;
                    if (qconf[c].type == COLI_DT_Q2) {
                        float M = ref_h2f(ref_mh(&b.w, r, col));
                        volatile float dq = D * (float)q;
                        want = dq + M;
                        bound = 0.51 * D + fabs((double)lo - M) + 1e-6 * (fabs(lo) + fabs(hi));
                    } else {
                        want = D * (float)q;
                        bound = 0.5 * fabs(D) + 1e-6 * amax;
                        /* q4's range is asymmetric: an element of the sign
                         * opposite to mx clamps at 7, one step short */
                        if (qconf[c].type == COLI_DT_Q4 && (double)xg[i] / D > 7.5) {
                            bound = 1.01 * fabs(D);
                            clamped++;
                        }
                    }
                    ck_assert_msg(fbits(out[col]) == fbits(want), "%s r%d c%d: deq %a want %a",
                                  qconf[c].name, r, col, (double)out[col], (double)want);
                    double err = fabs((double)xg[i] - (double)out[col]);
                    ck_assert_msg(err <= bound, "%s r%d c%d: x %a deq %a err %g > %g (d %a)",
                                  qconf[c].name, r, col, (double)xg[i], (double)out[col], err,
                                  bound, (double)D);
                }
            }
        }
        (void)clamped;
        qbuf_free(&b);
    }
    free(x);
    free(out);
}
END_TEST

/* Quantization rounding restated from the contract and checked per element. */
START_TEST(test_quant_rule)
{
    rng_seed(22);
    const int cols = 512;
    float x[512];
    for (int c = 0; c < N_QCONF; c++) {
        for (int it = 0; it < 40; it++) {
            fill_row_data(x, cols);
            qbuf b;
            qbuf_init(&b, qconf[c].type, qconf[c].group, 1, cols);
            qbuf_quantize(&b, x);
            int G = scale_group(qconf[c].type, qconf[c].group);
            for (int g = 0; g < cols / G; g++) {
                const float *xg = x + g * G;
                uint16_t wd, wm = 0;
                float amax = 0.0f, mx = 0.0f, lo = xg[0], hi = xg[0];
                for (int i = 0; i < G; i++) {
                    if (fabsf(xg[i]) > amax) {
                        amax = fabsf(xg[i]);
                        mx = xg[i];
                    }
                    /* min and max with -0 below +0 (lib/cpu/quant.c's reading of
                     * the contract, which leaves it open) */
                    if (xg[i] < lo || (xg[i] == lo && signbit(xg[i]) && !signbit(lo)))
                        lo = xg[i];
                    if (xg[i] > hi || (xg[i] == hi && !signbit(xg[i]) && signbit(hi)))
                        hi = xg[i];
                }
                if (qconf[c].type == COLI_DT_Q8)
                    wd = amax == 0.0f ? 0 : tu_f32_to_f16(amax / 127.0f);
                else if (qconf[c].type == COLI_DT_Q4)
                    wd = mx == 0.0f ? 0 : tu_f32_to_f16(mx / -8.0f);
                else {
                    volatile float range = hi - lo;
                    wm = tu_f32_to_f16(lo);
                    wd = hi == lo ? 0 : tu_f32_to_f16(range / 3.0f);
                }
                ck_assert_uint_eq(b.d[g], wd);
                if (qconf[c].type == COLI_DT_Q2)
                    ck_assert_uint_eq(b.m[g], wm);
                float D = ref_h2f(wd), M = ref_h2f(wm);
                for (int i = 0; i < G; i++) {
                    int want = 0;
                    if (D != 0.0f) {
                        volatile float v;
                        double lim_lo, lim_hi;
                        if (qconf[c].type == COLI_DT_Q2) {
                            volatile float t = xg[i] - M;
                            v = t / D;
                            lim_lo = 0, lim_hi = 3;
                        } else {
                            v = xg[i] / D;
                            lim_lo = qconf[c].type == COLI_DT_Q8 ? -127 : -8;
                            lim_hi = qconf[c].type == COLI_DT_Q8 ? 127 : 7;
                        }
                        double rq = ref_rne(v);
                        want = (int)fmin(fmax(rq, lim_lo), lim_hi);
                    }
                    ck_assert_msg(ref_q(&b.w, 0, g * G + i) == want, "%s g%d i%d: q %d want %d",
                                  qconf[c].name, g, i, ref_q(&b.w, 0, g * G + i), want);
                }
            }
            qbuf_free(&b);
        }
    }
}
END_TEST

/* ---- activations ----------------------------------------------------------- */

/* The hand-derived values below, from one table's activation
 * quantization. */
static void check_act_hand(const coli__qkernels *k)
{
    float a[160] = {0};
    /* group 0: amax 127 -> t = 1, s = 1, p = rne(a): ties to even */
    static const float a0[7] = {127, 0.5f, 1.5f, 2.5f, -2.5f, -127, 3.7f};
    static const int8_t p0[7] = {127, 0, 2, 2, -2, -127, 4}; /* psum 6 */
    memcpy(a, a0, sizeof a0);
    /* group 1: amax 2 -> t = 63.5, s = 2/127 = 0x1.020408p-6;
     * 1 -> 63.5 -> 64 (tie, even), 0.5 -> 31.75 -> 32, -1 -> -64, 2 -> 127,
     * -2 -> -127, 0.02 -> 1.27 -> 1: psum 33 */
    static const float a1[6] = {1, 0.5f, -1, 2, -2, 0.02f};
    static const int8_t p1[6] = {64, 32, -64, 127, -127, 1};
    memcpy(a + 32, a1, sizeof a1);
    /* group 2: +-0 only: s = 0, p = 0, psum 0 */
    for (int i = 64; i < 96; i++)
        a[i] = (i & 1) ? -0.0f : 0.0f;
    /* group 3: amax 3 -> t = 127/3 = 0x1.52aaaap+5, s = 0x1.83060cp-6;
     * 3 -> 126.99999 -> 127; -1.5 * t = -63.4999980926513671875 exactly, the
     * midpoint of the floats -63.499996185 and -63.5: the product rounds
     * (ties to even) to -63.5, and rne(-63.5) = -64 */
    a[96] = 3.0f;
    a[97] = -1.5f;
    /* group 4: amax below 127/FLT_MAX, t = inf: zeros stay 0, the rest
     * saturate (lib/cpu/quant.c's documented handling) */
    a[128] = 1e-38f;
    a[129] = -1e-39f;
    int8_t p[160];
    float s[5];
    int32_t psum[5];
    memset(p, 0x55, sizeof p);
    k->act(a, 160, p, s, psum);
    for (int i = 0; i < 32; i++) {
        ck_assert_int_eq(p[i], i < 7 ? p0[i] : 0);
        ck_assert_int_eq(p[32 + i], i < 6 ? p1[i] : 0);
        ck_assert_int_eq(p[64 + i], 0);
    }
    ck_assert(s[0] == 1.0f);
    ck_assert_int_eq(psum[0], 6);
    ck_assert(fbits(s[1]) == fbits(0x1.020408p-6f));
    ck_assert_int_eq(psum[1], 33);
    ck_assert(fbits(s[2]) == 0);
    ck_assert_int_eq(psum[2], 0);
    ck_assert(fbits(s[3]) == fbits(0x1.83060cp-6f));
    ck_assert_int_eq(p[96], 127);
    ck_assert_int_eq(p[97], -64);
    ck_assert_int_eq(psum[3], 63);
    ck_assert_int_eq(p[128], 127);
    ck_assert_int_eq(p[129], -127);
    ck_assert_int_eq(p[130], 0);
    ck_assert_int_eq(psum[4], 0);
}

/* Every table, where this CPU has it: the scalar one is
 * coli__q_quantize_act itself. */
static const coli__qkernels *act_tables(int i)
{
    switch (i) {
    case 0:
        return coli__q_kernels_scalar();
    case 1:
        return coli__q_kernels_avx2();
    case 2:
        return coli__q_kernels_avx512();
    default:
        return coli__q_kernels_amx();
    }
}

START_TEST(test_act_hand)
{
    ck_assert(coli__q_kernels_scalar()->act == coli__q_quantize_act);
    for (int i = 0; i < 4; i++)
        if (act_tables(i))
            check_act_hand(act_tables(i));
}
END_TEST

/* Every table's activation quantization against coli__q_quantize_act:
 * random magnitudes, ties, subnormals, zero groups and groups whose t
 * overflows, at several lengths. */
START_TEST(test_act_tables)
{
    rng_seed(41);
    static const int colsv[] = {32, 64, 1024, 4128};
    for (int i = 1; i < 4; i++) {
        const coli__qkernels *k = act_tables(i);
        if (!k) {
            fprintf(stderr, "test_quant: activation table %d not on this CPU: not checked\n", i);
            continue;
        }
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++)
            for (int it = 0; it < 50; it++) {
                const int cols = colsv[ci], ng = cols / 32;
                float *a = malloc((size_t)cols * sizeof *a);
                int8_t *pa = malloc((size_t)cols), *pb = malloc((size_t)cols);
                float *sa = malloc((size_t)ng * sizeof *sa), *sb = malloc((size_t)ng * sizeof *sb);
                int32_t *qa = malloc((size_t)ng * sizeof *qa), *qb = malloc((size_t)ng * sizeof *qb);
                ck_assert(a && pa && pb && sa && sb && qa && qb);
                for (int g = 0; g < ng; g++) {
                    const int kind = rng_int(8);
                    const float scale = kind == 0 ? 0.0f : kind == 1 ? 1e-39f : kind == 2 ? 1e-30f
                                        : kind == 3 ? 1e30f : (float)(1 << rng_int(12)) / 64.0f;
                    for (int j = 0; j < 32; j++) {
                        float v = (float)(rng_int(2001) - 1000) / 1000.0f * scale;
                        if (kind == 4) /* halves: ties after the scaling */
                            v = (float)(rng_int(255) - 127) * 0.5f;
                        a[32 * g + j] = rng_int(16) == 0 ? -0.0f : v;
                    }
                }
                memset(pa, 0x55, (size_t)cols);
                memset(pb, 0x66, (size_t)cols);
                coli__q_quantize_act(a, cols, pa, sa, qa);
                k->act(a, cols, pb, sb, qb);
                ck_assert_msg(memcmp(pa, pb, (size_t)cols) == 0, "%s: quants differ, cols %d", k->name, cols);
                ck_assert_msg(memcmp(sa, sb, (size_t)ng * sizeof *sa) == 0, "%s: scales differ", k->name);
                ck_assert_msg(memcmp(qa, qb, (size_t)ng * sizeof *qa) == 0, "%s: sums differ", k->name);
                free(a);
                free(pa);
                free(pb);
                free(sa);
                free(sb);
                free(qa);
                free(qb);
            }
    }
}
END_TEST

START_TEST(test_act_random)
{
    rng_seed(31);
    const int cols = 4096;
    acts x;
    acts_init(&x, cols, 1);
    for (int it = 0; it < 20; it++) {
        fill_acts(&x, 0);
        for (int g = 0; g < cols / 32; g++) {
            float amax = 0.0f;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(x.a[32 * g + i]));
            int32_t sum = 0;
            if (amax == 0.0f) {
                ck_assert(fbits(x.s[g]) == 0);
            } else {
                volatile float t = 127.0f / amax, s = amax / 127.0f;
                ck_assert(fbits(x.s[g]) == fbits(s));
                for (int i = 0; i < 32; i++) {
                    volatile float v = x.a[32 * g + i] * t;
                    int want = (int)ref_rne(v);
                    ck_assert(want >= -127 && want <= 127);
                    ck_assert_int_eq(x.p[32 * g + i], want);
                    ck_assert(fabs(x.p[32 * g + i] * (double)s - x.a[32 * g + i]) <=
                              0.5 * s + 1e-6 * amax);
                }
            }
            for (int i = 0; i < 32; i++)
                sum += x.p[32 * g + i];
            ck_assert_int_eq(x.psum[g], sum);
        }
    }
    acts_free(&x);
}
END_TEST

/* ---- the scalar product ----------------------------------------------------- */

/* Against double precision: the integer arithmetic and the scales are right
 * (the result is sum_c deq(w)_c * p_c * s_g up to f32 rounding). */
START_TEST(test_dot_double)
{
    rng_seed(41);
    const int rows = 8, cols = 4096, n_tok = 3;
    const coli__qkernels *k = coli__q_kernels_scalar();
    float *y = malloc(sizeof(float) * rows * n_tok);
    ck_assert_ptr_nonnull(y);
    for (int c = 0; c < N_QCONF; c++) {
        for (int raw = 0; raw < 2; raw++) {
            qbuf b;
            qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
            fill_weights(&b, raw);
            acts x;
            acts_init(&x, cols, n_tok);
            fill_acts(&x, raw);
            k->gemm(&b.w, 0, rows, n_tok, x.p, x.s, x.psum, y, rows);
            for (int t = 0; t < n_tok; t++) {
                const int8_t *p = x.p + (size_t)t * cols;
                const float *s = x.s + (size_t)t * (cols / 32);
                for (int r = 0; r < rows; r++) {
                    double sum = 0.0, mag = 0.0;
                    for (int col = 0; col < cols; col++) {
                        double D = ref_h2f(ref_dh(&b.w, r, col));
                        double q = ref_q(&b.w, r, col);
                        double av = (double)p[col] * s[col / 32];
                        double wq = D * q, wm = 0.0;
                        if (qconf[c].type == COLI_DT_Q2)
                            wm = ref_h2f(ref_mh(&b.w, r, col));
                        sum += (wq + wm) * av;
                        mag += (fabs(wq) + fabs(wm)) * fabs(av);
                    }
                    double got = y[(size_t)t * rows + r];
                    ck_assert_msg(fabs(got - sum) <= 1e-5 * mag + 1e-30,
                                  "%s raw %d t%d r%d: %.9g vs %.9g (mag %g)", qconf[c].name, raw,
                                  t, r, got, sum, mag);
                }
            }
            acts_free(&x);
            qbuf_free(&b);
        }
    }
    free(y);
}
END_TEST

/* Against the step-by-step re-implementation of the contract: bit exact. */
START_TEST(test_dot_stepwise)
{
    rng_seed(42);
    static const int colsv[] = {32, 128, 256, 288, 1024, 4128};
    const coli__qkernels *k = coli__q_kernels_scalar();
    for (int c = 0; c < N_QCONF; c++) {
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++) {
            int cols = colsv[ci];
            if (cols % qconf[c].group)
                continue;
            for (int raw = 0; raw < 2; raw++) {
                const int rows = 5, n_tok = 2;
                qbuf b;
                qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
                fill_weights(&b, raw);
                acts x;
                acts_init(&x, cols, n_tok);
                fill_acts(&x, raw);
                float y[10];
                k->gemm(&b.w, 0, rows, n_tok, x.p, x.s, x.psum, y, rows);
                for (int t = 0; t < n_tok; t++) {
                    const int8_t *p = x.p + (size_t)t * cols;
                    const float *s = x.s + (size_t)t * (cols / 32);
                    const int32_t *ps = x.psum + (size_t)t * (cols / 32);
                    for (int r = 0; r < rows; r++) {
                        float want = ref_dot(&b.w, r, p, s, ps);
                        float ref = coli__q_dot_ref(&b.w, r, p, s, ps);
                        ck_assert_msg(fbits(ref) == fbits(want), "%s cols %d raw %d: dot_ref %a want %a",
                                      qconf[c].name, cols, raw, (double)ref, (double)want);
                        ck_assert_msg(fbits(y[t * rows + r]) == fbits(want),
                                      "%s cols %d raw %d: gemm %a want %a", qconf[c].name, cols,
                                      raw, (double)y[t * rows + r], (double)want);
                    }
                }
                acts_free(&x);
                qbuf_free(&b);
            }
        }
    }
}
END_TEST

/* ---- bit-exactness of the kernel tables ------------------------------------ */

#define POISON 0x7fc0dead

static void poison(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = bits_f(POISON);
}

/* w in the x16 layout as *xw, where it fits (the buffer returned, to be
 * freed); else *xw = *w and NULL. */
static uint8_t *x16_copy(const coli__qmat *w, coli__qmat *xw)
{
    *xw = *w;
    if (!coli__q_x16_fits(w->type, w->rows))
        return NULL;
    uint8_t *xb = malloc(coli__q_x16_block_bytes(w->type, w->group, w->cols) * (size_t)(w->rows / 16));
    ck_assert_ptr_nonnull(xb);
    coli__q_x16_pack(w, w->rows, xb);
    xw->qs = xb;
    xw->d = xw->m = NULL;
    xw->layout = COLI__QL_X16;
    return xb;
}

/* Compares table k with the scalar definition over the shape grid of the
 * brief; every output (and every untouched slot) must match bitwise. */
static void check_table(const coli__qkernels *k)
{
    /* the brief's list, plus 128, 192, 384 and 640 for more q4/64 and
     * q4/128 shapes (an odd number of scales per row) */
    static const int colsv[] = {32, 64, 96, 128, 160, 192, 224, 256, 288, 384, 640, 1024, 4096 + 32};
    static const int rowsv[] = {1, 3, 7, 16, 33, 48};
    /* 8: the most the avx512 set's x16 pairs take, and the amx set's
     * fewest on tiles; 9: the avx512 set's repacked kernel; 39: two of
     * its token blocks (32 + 7), passes of 4 tokens and of 3 */
    static const int tokv[] = {1, 2, 5, 8, 9, 39};
    const coli__qkernels *ref = coli__q_kernels_scalar();
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_nonnull(k->gemm);
    ck_assert_ptr_nonnull(k->name);
    long calls = 0;
    rng_seed(51);
    for (int c = 0; c < N_QCONF; c++) {
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++) {
            int cols = colsv[ci];
            if (cols % qconf[c].group)
                continue;
            for (size_t ri = 0; ri < sizeof rowsv / sizeof rowsv[0]; ri++) {
                int rows = rowsv[ri];
                qbuf b;
                qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
                fill_weights(&b, rng_int(2));
                /* the same values in the x16 layout, where they fit */
                coli__qmat xw;
                uint8_t *xb = x16_copy(&b.w, &xw);
                for (size_t ti = 0; ti < sizeof tokv / sizeof tokv[0]; ti++) {
                    int n_tok = tokv[ti];
                    acts x;
                    acts_init(&x, cols, n_tok);
                    fill_acts(&x, rng_int(2));
                    size_t stride = (size_t)rows + (size_t)rng_int(4) + (rng_int(4) ? 1 : 0);
                    int r0 = 0, r1 = rows;
                    switch (rng_int(4)) {
                    case 0: /* the whole matrix */
                        break;
                    case 1: /* a random sub-range, possibly empty */
                        r0 = rng_int(rows + 1);
                        r1 = r0 + rng_int(rows - r0 + 1);
                        break;
                    default: /* a non-empty sub-range */
                        r0 = rng_int(rows);
                        r1 = r0 + 1 + rng_int(rows - r0);
                        break;
                    }
                    size_t ny = stride * (size_t)n_tok;
                    float *ya = malloc(ny * sizeof *ya), *yb = malloc(ny * sizeof *yb);
                    float *y1 = malloc(stride * sizeof *y1);
                    ck_assert(ya && yb && y1);
                    poison(ya, ny);
                    poison(yb, ny);
                    ref->gemm(&b.w, r0, r1, n_tok, x.p, x.s, x.psum, ya, stride);
                    k->gemm(&b.w, r0, r1, n_tok, x.p, x.s, x.psum, yb, stride);
                    calls++;
                    for (int t = 0; t < n_tok; t++)
                        for (int r = r0; r < r1; r++)
                            ck_assert_msg(isfinite(ya[(size_t)t * stride + r]),
                                          "scalar output not finite");
                    if (memcmp(ya, yb, ny * sizeof *ya) != 0) {
                        for (size_t i = 0; i < ny; i++)
                            if (fbits(ya[i]) != fbits(yb[i]))
                                ck_abort_msg("%s vs scalar: %s cols %d rows %d n_tok %d r0 %d r1 %d "
                                             "stride %zu: y[t=%zu][r=%zu] = %a (0x%08x), scalar %a "
                                             "(0x%08x)",
                                             k->name, qconf[c].name, cols, rows, n_tok, r0, r1,
                                             stride, i / stride, i % stride, (double)yb[i],
                                             fbits(yb[i]), (double)ya[i], fbits(ya[i]));
                    }
                    if (xb) { /* the x16 layout gives the row layout's bits */
                        poison(yb, ny);
                        k->gemm(&xw, r0, r1, n_tok, x.p, x.s, x.psum, yb, stride);
                        calls++;
                        for (size_t i = 0; i < ny; i++)
                            ck_assert_msg(fbits(ya[i]) == fbits(yb[i]),
                                          "%s x16 vs scalar rows: %s cols %d rows %d n_tok %d r0 %d r1 %d: "
                                          "y[t=%zu][r=%zu] = %a, scalar %a", k->name, qconf[c].name, cols, rows,
                                          n_tok, r0, r1, i / stride, i % stride, (double)yb[i], (double)ya[i]);
                    }
                    /* a batch gives each token the bits it gets alone */
                    for (int t = 0; t < n_tok; t++) {
                        poison(y1, stride);
                        k->gemm(&b.w, r0, r1, 1, x.p + (size_t)t * cols, x.s + (size_t)t * (cols / 32),
                                x.psum + (size_t)t * (cols / 32), y1, stride);
                        ck_assert_msg(memcmp(y1, yb + (size_t)t * stride, stride * sizeof *y1) == 0,
                                      "%s: %s cols %d rows %d: token %d of %d alone differs",
                                      k->name, qconf[c].name, cols, rows, t, n_tok);
                    }
                    free(ya);
                    free(yb);
                    free(y1);
                    acts_free(&x);
                }
                free(xb);
                qbuf_free(&b);
            }
        }
    }
    ck_assert(calls > 500);
    fprintf(stderr, "test_quant: %s: %ld gemm calls compared with scalar\n", k->name, calls);
}

/* Special weight/activation patterns where lane or tail handling could slip:
 * all-zero rows, all-equal scales, extreme values of every field. */
static void check_table_extremes(const coli__qkernels *k)
{
    const coli__qkernels *ref = coli__q_kernels_scalar();
    static const int colsv[] = {32, 256, 288, 4128};
    for (int c = 0; c < N_QCONF; c++) {
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++) {
            int cols = colsv[ci], rows = 4, n_tok = 2;
            if (cols % qconf[c].group)
                continue;
            for (int pat = 0; pat < 4; pat++) {
                qbuf b;
                qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
                acts x;
                acts_init(&x, cols, n_tok);
                size_t n = (size_t)rows * cols;
                size_t qsb = qconf[c].type == COLI_DT_Q8 ? n : qconf[c].type == COLI_DT_Q4 ? n / 2 : n / 4;
                /* pattern 0: largest |q| everywhere and largest |p| (isum extremes);
                 * 1: smallest q; 2: alternating; 3: zeros */
                uint8_t qbyte = pat == 0 ? (qconf[c].type == COLI_DT_Q8 ? 0x81 : qconf[c].type == COLI_DT_Q4 ? 0x00 : 0xff)
                               : pat == 1 ? (qconf[c].type == COLI_DT_Q8 ? 0x7f : qconf[c].type == COLI_DT_Q4 ? 0xff : 0x00)
                               : pat == 2 ? 0x5a : (qconf[c].type == COLI_DT_Q4 ? 0x88 : 0x00);
                memset(b.qs, qbyte, qsb);
                for (size_t i = 0; i < n / (size_t)b.w.group; i++)
                    b.d[i] = pat == 3 ? 0 : (uint16_t)(0x3c00 + (i % 7));
                for (size_t i = 0; i < n / 32; i++)
                    b.m[i] = (uint16_t)(pat == 1 ? 0xfbff : 0xbc00 + (i % 5));
                for (size_t i = 0; i < (size_t)cols * n_tok; i++)
                    x.p[i] = (int8_t)(pat == 0 ? -127 : pat == 1 ? 127 : (i % 3 == 0 ? -127 : 127));
                for (size_t g = 0; g < (size_t)cols * n_tok / 32; g++) {
                    int32_t sum = 0;
                    for (int i = 0; i < 32; i++)
                        sum += x.p[32 * g + i];
                    x.psum[g] = sum;
                    x.s[g] = (float)(1.0 + (double)(g % 11) * 0x1p-20);
                }
                size_t ny = (size_t)rows * n_tok;
                float *ya = malloc(ny * sizeof *ya), *yb = malloc(ny * sizeof *yb);
                ck_assert(ya && yb);
                poison(ya, ny);
                poison(yb, ny);
                ref->gemm(&b.w, 0, rows, n_tok, x.p, x.s, x.psum, ya, rows);
                k->gemm(&b.w, 0, rows, n_tok, x.p, x.s, x.psum, yb, rows);
                ck_assert_msg(memcmp(ya, yb, ny * sizeof *ya) == 0,
                              "%s vs scalar: %s cols %d extreme pattern %d: %a vs %a", k->name,
                              qconf[c].name, cols, pat, (double)yb[0], (double)ya[0]);
                free(ya);
                free(yb);
                acts_free(&x);
                qbuf_free(&b);
            }
        }
    }
}

static void check_named_table(const char *what, const coli__qkernels *k)
{
    if (!k) {
        fprintf(stderr, "test_quant: the %s kernel table is not available (NULL): not tested\n",
                what);
        return;
    }
    fprintf(stderr, "test_quant: checking the %s table (\"%s\") against scalar\n", what, k->name);
    check_table(k);
    check_table_extremes(k);
}

START_TEST(test_bitexact_scalar)
{
    /* the scalar table against itself: exercises the harness, strides,
     * sub-ranges and the batch = single token property */
    check_table(coli__q_kernels_scalar());
    check_table_extremes(coli__q_kernels_scalar());
}
END_TEST

START_TEST(test_bitexact_avx2)
{
    check_named_table("avx2", coli__q_kernels_avx2());
}
END_TEST

START_TEST(test_bitexact_avx512)
{
    check_named_table("avx512", coli__q_kernels_avx512());
    /* both tunings, whichever this CPU picks */
    check_named_table("avx512 without the one-token prefetch", coli__q_kernels_avx512_tuned(0));
    check_named_table("avx512 with the one-token prefetch", coli__q_kernels_avx512_tuned(1));
}
END_TEST

/* Which tuning the avx512 table takes, by the CPU's traits (hand-derived
 * from the measurements in docs/performance.md): the one-token prefetch on
 * Intel and on AMD family 1Ah, not on older AMD; and the table picked for
 * this CPU is the tuning its traits give. */
START_TEST(test_x16_tuning_choice)
{
    const unsigned isa = COLI_CPU_AVX2 | COLI_CPU_FMA | COLI_CPU_F16C | COLI_CPU_AVX512 | COLI_CPU_AVX512VNNI;
    ck_assert_int_eq(coli__q_x16_pf1(isa), 1);                                       /* Intel Xeon */
    ck_assert_int_eq(coli__q_x16_pf1(isa | COLI_CPU_AMX), 1);                        /* Sapphire Rapids */
    ck_assert_int_eq(coli__q_x16_pf1(isa | COLI_CPU_AMD), 0);                        /* Zen 4 */
    ck_assert_int_eq(coli__q_x16_pf1(isa | COLI_CPU_AMD | COLI_CPU_AMD_1AH), 1);     /* Zen 5 */
    const coli__qkernels *k = coli__q_kernels_avx512();
    if (!k) {
        fprintf(stderr, "test_quant: no AVX-512 VNNI here: the tuning picked was not checked\n");
        return;
    }
    ck_assert_ptr_eq(k, coli__q_kernels_avx512_tuned(coli__q_x16_pf1(coli__cpu_features())));
    ck_assert_ptr_ne(coli__q_kernels_avx512_tuned(0), coli__q_kernels_avx512_tuned(1));
}
END_TEST

/* Many tokens (the tile path of the amx table: one tile of fewer than 16
 * rows, tiles that overlap at the end, several passes) on x16 matrices and on the row
 * layout, against the scalar definition. */
static void check_table_many(const coli__qkernels *k)
{
    static const int colsv[] = {32, 128, 288, 1024};
    static const int rowsv[] = {16, 48, 80};
    static const int tokv[] = {15, 16, 17, 31, 48, 64, 70, 129};
    const coli__qkernels *ref = coli__q_kernels_scalar();
    long calls = 0;
    rng_seed(77);
    for (int c = 0; c < N_QCONF; c++)
        for (size_t ci = 0; ci < sizeof colsv / sizeof colsv[0]; ci++) {
            const int cols = colsv[ci];
            if (cols % qconf[c].group)
                continue;
            for (size_t ri = 0; ri < sizeof rowsv / sizeof rowsv[0]; ri++) {
                const int rows = rowsv[ri];
                qbuf b;
                qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
                fill_weights(&b, rng_int(2));
                /* the same values in the x16 layout, where they fit */
                coli__qmat xw;
                uint8_t *xb = x16_copy(&b.w, &xw);
                for (size_t ti = 0; ti < sizeof tokv / sizeof tokv[0]; ti++) {
                    const int n_tok = tokv[ti];
                    acts x;
                    acts_init(&x, cols, n_tok);
                    fill_acts(&x, rng_int(2));
                    const size_t stride = (size_t)rows + (size_t)rng_int(3);
                    int r0 = rng_int(2) ? 0 : rng_int(rows), r1 = rng_int(2) ? rows : r0 + 1 + rng_int(rows - r0);
                    const size_t ny = stride * (size_t)n_tok;
                    float *ya = malloc(ny * sizeof *ya), *yb = malloc(ny * sizeof *yb);
                    ck_assert(ya && yb);
                    poison(ya, ny);
                    ref->gemm(&b.w, r0, r1, n_tok, x.p, x.s, x.psum, ya, stride);
                    for (int lay = 0; lay < (xb ? 2 : 1); lay++) {
                        poison(yb, ny);
                        k->gemm(lay ? &xw : &b.w, r0, r1, n_tok, x.p, x.s, x.psum, yb, stride);
                        calls++;
                        for (size_t i = 0; i < ny; i++)
                            ck_assert_msg(fbits(ya[i]) == fbits(yb[i]),
                                          "%s %s vs scalar: %s cols %d rows %d n_tok %d r0 %d r1 %d: "
                                          "y[t=%zu][r=%zu] = %a, scalar %a", k->name, lay ? "x16" : "rows",
                                          qconf[c].name, cols, rows, n_tok, r0, r1, i / stride, i % stride,
                                          (double)yb[i], (double)ya[i]);
                    }
                    free(ya);
                    free(yb);
                    acts_free(&x);
                }
                free(xb);
                qbuf_free(&b);
            }
        }
    ck_assert(calls > 300);
    fprintf(stderr, "test_quant: %s: %ld products of 15 to 129 tokens compared with scalar\n", k->name, calls);
}

START_TEST(test_bitexact_many)
{
    /* every table on many tokens; AMX only where the CPU has it */
    check_table_many(coli__q_kernels_scalar());
    const coli__qkernels *t[] = {coli__q_kernels_avx2(), coli__q_kernels_avx512_tuned(0),
                                 coli__q_kernels_avx512_tuned(1)};
    for (size_t i = 0; i < 3; i++)
        if (t[i])
            check_table_many(t[i]);
}
END_TEST

/* Products whose tokens are picked from a shared input by (token, expert)
 * pairs (the routed experts of a prompt): each the same bits as the
 * product of the same rows copied out as floats, in every set, with and
 * without the threads. */
START_TEST(test_picked_rows)
{
    enum { S = 23, K = 3, COLS = 256, ROWS = 48, NT = 4 };
    static float x[S * COLS], xg[NT][S * K * COLS], ya[NT][S * K * ROWS], yb[NT][S * K * ROWS];
    static float ua[NT][S * K * ROWS], ub[NT][S * K * ROWS];
    static int pairs[NT][S * K];
    rng_seed(5);
    for (int i = 0; i < S * COLS; i++)
        x[i] = (float)rng_normal() * 2.0f;
    coli__pool *pool = NULL;
    coli__err perr;
    ck_assert_int_eq(coli__pool_create(2, &pool, &perr), COLI_OK);
    for (int c = 0; c < N_QCONF; c++) {
        qbuf g, u;
        qbuf_init(&g, qconf[c].type, qconf[c].group, ROWS, COLS);
        qbuf_init(&u, qconf[c].type, qconf[c].group, ROWS, COLS);
        fill_weights(&g, 0);
        fill_weights(&u, 0);
        const coli__mat mg = {.rows = ROWS, .cols = COLS, .dt = qconf[c].type, .q = g.w};
        const coli__mat mu = {.rows = ROWS, .cols = COLS, .dt = qconf[c].type, .q = u.w};
        coli__mm picked[NT], plain[NT];
        /* task 0: every token of the input, as a shared expert takes it
         * (in the picked hand-out, from the picked input's quantization) */
        picked[0] = (coli__mm){.w = &mg, .x = x, .n_tok = S, .y = yb[0], .up = &mu, .y_up = ub[0]};
        plain[0] = (coli__mm){.w = &mg, .x = x, .n_tok = S, .y = ya[0], .up = &mu, .y_up = ua[0]};
        for (int t = 1; t < NT; t++) {
            /* task t: some pairs of some tokens, ascending (the routed order);
             * the last tokens may be nobody's (picked rows then end early) */
            int n = 0;
            for (int p = 0; p < (S - 2) * K; p++)
                if (rng_int(NT) == t || (t == 1 && p % 7 == 0))
                    pairs[t][n++] = p;
            for (int i = 0; i < n; i++)
                memcpy(xg[t] + (size_t)i * COLS, x + (size_t)(pairs[t][i] / K) * COLS, COLS * sizeof(float));
            const coli__mat *up = t % 2 ? &mu : NULL;
            picked[t] = (coli__mm){.w = &mg, .x = x, .n_tok = n, .y = yb[t], .up = up, .y_up = ub[t],
                                   .x_rows = pairs[t], .x_div = K};
            plain[t] = (coli__mm){.w = &mg, .x = xg[t], .n_tok = n, .y = ya[t], .up = up, .y_up = ua[t]};
        }
        for (int set = COLI__CPUK_SCALAR; set <= COLI__CPUK_AMX; set++) {
            const coli__cpuk *k = coli__cpuk_get(set);
            if (!k)
                continue;
            for (int th = 0; th < 2; th++) {
                poison(&ya[0][0], sizeof ya / sizeof(float));
                poison(&yb[0][0], sizeof yb / sizeof(float));
                ck_assert_int_eq(coli__matmul_multi(k, th ? pool : NULL, plain, NT), COLI_OK);
                ck_assert_int_eq(coli__matmul_multi(k, th ? pool : NULL, picked, NT), COLI_OK);
                for (int t = 0; t < NT; t++)
                    for (size_t i = 0; i < (size_t)picked[t].n_tok * ROWS; i++)
                        ck_assert_msg(fbits(ya[t][i]) == fbits(yb[t][i]),
                                      "%s, %s, %d threads: task %d value %zu: picked %a, copied %a", qconf[c].name,
                                      coli__cpuk_name(k), th + 1, t, i, (double)yb[t][i], (double)ya[t][i]);
            }
        }
        /* a picked input is for quantized products only */
        const coli__mat fl = {.rows = ROWS, .cols = COLS, .dt = COLI_DT_F32, .data = xg[0]};
        coli__mm bad = picked[1];
        bad.w = &fl;
        bad.up = NULL;
        ck_assert_int_eq(coli__matmul_multi(NULL, NULL, &bad, 1), COLI_EINVAL);
        qbuf_free(&g);
        qbuf_free(&u);
    }
    coli__pool_free(pool);
}
END_TEST

START_TEST(test_bitexact_amx)
{
    const coli__qkernels *k = coli__q_kernels_amx();
    if (!k) {
        fprintf(stderr, "test_quant: AMX-INT8 NOT CHECKED: this CPU (or build, or kernel) lacks it\n");
        return;
    }
    check_named_table("amx", k);
    check_table_many(k);
}
END_TEST

START_TEST(test_bitexact_best)
{
    const coli__qkernels *best = coli__q_kernels_best();
    ck_assert_ptr_nonnull(best);
    ck_assert_ptr_eq(best, coli__q_kernels_best());
    const coli__qkernels *want = coli__q_kernels_avx512();
    if (!want)
        want = coli__q_kernels_avx2();
    if (!want)
        want = coli__q_kernels_scalar();
    ck_assert_ptr_eq(best, want);
    ck_assert_str_eq(coli__q_kernels_scalar()->name, "scalar");
    check_named_table("best", best);
}
END_TEST

/* ---- checks and sizes -------------------------------------------------------- */

START_TEST(test_check_sizes)
{
    coli__err err = {{0}};
    ck_assert_int_eq(coli__q_check(COLI_DT_Q8, 32, 64, "w", &err), COLI_OK);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 32, 96, "w", &err), COLI_OK);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 64, 128, "w", &err), COLI_OK);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 128, 256, "w", &err), COLI_OK);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q2, 32, 32, "w", &err), COLI_OK);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 64, 96, "blk.0.ffn", &err), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "blk.0.ffn"));
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 16, 64, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q4, 256, 256, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q8, 64, 64, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q8, 32, 48, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q2, 32, 0, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q2, 32, -32, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_F32, 32, 64, "w", &err), COLI_EINVAL);
    ck_assert_int_eq(coli__q_check(COLI_DT_Q8, 32, 40, NULL, NULL), COLI_EINVAL);

    ck_assert_uint_eq(coli__q_row_bytes(COLI_DT_Q8, 64), 64);
    ck_assert_uint_eq(coli__q_row_bytes(COLI_DT_Q4, 64), 32);
    ck_assert_uint_eq(coli__q_row_bytes(COLI_DT_Q2, 64), 16);
    /* 3 x 256: q8 768 + 24 scales * 2 = 816; q4/32: 384 + 48 = 432;
     * q4/64: 384 + 24 = 408; q4/128: 384 + 12 = 396; q2: 192 + 48 + 48 = 288 */
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q8, 32, 3, 256), 816);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q4, 32, 3, 256), 432);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q4, 64, 3, 256), 408);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q4, 128, 3, 256), 396);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q2, 32, 3, 256), 288);
    /* bits per weight of the table: 8.5, 4.5, 4.25, 4.125, 3.0 */
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q8, 32, 1, 4096) * 8, 4096 * 17 / 2);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q4, 128, 1, 4096) * 8, 4096 * 33 / 8);
    ck_assert_uint_eq(coli__q_matrix_bytes(COLI_DT_Q2, 32, 1, 4096) * 8, 4096 * 3);
}
END_TEST

/* ---- public API ------------------------------------------------------------- */

START_TEST(test_public_sizes)
{
    /* 2 x 64 q8: 128 + 4 scales * 2 = 136 (group ignored) */
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 0, 2, 64), 136);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 7, 2, 64), 136);
    /* 3 x 128 q4: 192 + 12/6/3 scales * 2 */
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 32, 3, 128), 216);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 64, 3, 128), 204);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 128, 3, 128), 198);
    /* 2 x 64 q2: 32 + 4 * 2 + 4 * 2 = 48 */
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q2, 0, 2, 64), 48);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q2, 128, 2, 64), 48);

    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_AUTO, 32, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_F32, 32, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_BF16, 32, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size((coli_weight_format)99, 32, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 0, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 16, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 96, 2, 192), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 256, 2, 256), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q4, 128, 2, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, 2, 48), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, 0, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, 2, 0), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, SIZE_MAX / 32, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, SIZE_MAX / 64 + 1, 64), 0);
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, SIZE_MAX / 64, 64), 0); /* + scales */
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, 1, (size_t)INT_MAX + 1), 0);
    /* the largest q8 matrix whose size fits: rows * 64 * 17/16 <= SIZE_MAX */
    size_t big = SIZE_MAX / 68;
    ck_assert_uint_eq(coli_quant_size(COLI_WEIGHTS_Q8, 32, big, 64), big * 68);
}
END_TEST

START_TEST(test_public_roundtrip)
{
    rng_seed(61);
    const int rows = 5, cols = 256;
    float src[5 * 256], out[5 * 256], ref[256];
    fill_row_data(src, sizeof src / sizeof src[0]);
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q4,
                                              COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2};
    for (int c = 0; c < N_QCONF; c++) {
        coli_weight_format fmt = fmts[c];
        int group = qconf[c].group;
        size_t size = coli_quant_size(fmt, group, rows, cols);
        ck_assert_uint_eq(size, coli__q_matrix_bytes(qconf[c].type, group, rows, cols));
        unsigned char *buf = malloc(size + 1), *buf2 = malloc(size + 1);
        ck_assert(buf && buf2);
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, buf, size), COLI_OK);
        /* unaligned destination: same bytes */
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, buf2 + 1, size), COLI_OK);
        ck_assert(memcmp(buf, buf2 + 1, size) == 0);

        /* the layout: qs of all rows, then d of all rows, then m, little-endian */
        qbuf b;
        qbuf_init(&b, qconf[c].type, group, rows, cols);
        qbuf_quantize(&b, src);
        size_t qsb = coli__q_row_bytes(qconf[c].type, cols) * rows;
        size_t nd = (size_t)rows * cols / (size_t)b.w.group;
        ck_assert(memcmp(buf, b.qs, qsb) == 0);
        for (size_t i = 0; i < nd; i++)
            ck_assert(buf[qsb + 2 * i] == (b.d[i] & 0xff) && buf[qsb + 2 * i + 1] == (b.d[i] >> 8));
        if (qconf[c].type == COLI_DT_Q2)
            for (size_t i = 0; i < (size_t)rows * cols / 32; i++)
                ck_assert(buf[qsb + 2 * nd + 2 * i] == (b.m[i] & 0xff) &&
                          buf[qsb + 2 * nd + 2 * i + 1] == (b.m[i] >> 8));

        ck_assert_int_eq(coli_dequantize(fmt, group, buf2 + 1, size, rows, cols, out), COLI_OK);
        for (int r = 0; r < rows; r++) {
            coli__q_dequantize_row(&b.w, r, ref);
            ck_assert(memcmp(ref, out + (size_t)r * cols, sizeof ref) == 0);
        }

        /* invalid arguments */
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, buf, size - 1), COLI_ENOSPC);
        ck_assert_int_eq(coli_quantize(fmt, group, NULL, rows, cols, buf, size), COLI_EINVAL);
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, NULL, size), COLI_EINVAL);
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, 48, buf, size), COLI_EINVAL);
        ck_assert_int_eq(coli_quantize(fmt, group, src, 0, cols, buf, size), COLI_EINVAL);
        ck_assert_int_eq(coli_dequantize(fmt, group, buf, size - 1, rows, cols, out), COLI_EINVAL);
        ck_assert_int_eq(coli_dequantize(fmt, group, buf, size + 1, rows, cols, out), COLI_EINVAL);
        ck_assert_int_eq(coli_dequantize(fmt, group, NULL, size, rows, cols, out), COLI_EINVAL);
        ck_assert_int_eq(coli_dequantize(fmt, group, buf, size, rows, cols, NULL), COLI_EINVAL);
        ck_assert_int_eq(coli_dequantize(COLI_WEIGHTS_F32, group, buf, size, rows, cols, out),
                         COLI_EINVAL);
        float keep = src[17];
        src[17] = NAN;
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, buf, size), COLI_EINVAL);
        src[17] = INFINITY;
        ck_assert_int_eq(coli_quantize(fmt, group, src, rows, cols, buf, size), COLI_EINVAL);
        src[17] = keep;
        qbuf_free(&b);
        free(buf);
        free(buf2);
    }
    ck_assert_int_eq(coli_quantize(COLI_WEIGHTS_Q4, 16, src, rows, cols, out, sizeof out), COLI_EINVAL);

    /* scales that would overflow fp16: COLI_ERANGE (largest finite scale
     * 65504; q8: amax/127 >= 65520 -> inf at amax >= 8321040, q4: |mx|/8 at
     * 524160; q2: min <= -65520, or range/3 >= 65520) */
    static const struct {
        coli_weight_format fmt;
        float ok, bad, other;
    } big[] = {
        {COLI_WEIGHTS_Q8, 8.3e6f, 8.33e6f, 0.0f},
        {COLI_WEIGHTS_Q4, 5.2e5f, 5.25e5f, 0.0f},
        {COLI_WEIGHTS_Q2, -6.5e4f, -6.6e4f, 0.0f},
        {COLI_WEIGHTS_Q2, 1.9e5f, 2.0e5f, -100.0f},
    };
    unsigned char qb[64 * 2];
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        float row[64];
        for (int j = 0; j < 64; j++)
            row[j] = big[i].other;
        row[40] = big[i].ok;
        size_t sz = coli_quant_size(big[i].fmt, 32, 1, 64);
        ck_assert(sz <= sizeof qb);
        ck_assert_int_eq(coli_quantize(big[i].fmt, 32, row, 1, 64, qb, sz), COLI_OK);
        row[40] = big[i].bad;
        ck_assert_int_eq(coli_quantize(big[i].fmt, 32, row, 1, 64, qb, sz), COLI_ERANGE);
    }
    ck_assert_int_eq(coli_quantize(COLI_WEIGHTS_BF16, 32, src, rows, cols, out, sizeof out), COLI_EINVAL);
}
END_TEST

/* The quantizer reports the first row holding a NaN or an infinity, for
 * every type and group, wherever the value sits in its group: the first or
 * a later 32-column block of a q4 group of 64 or 128 (whose magnitude
 * comparison would pass over a NaN), alone or next to other extremes. */
START_TEST(test_quantize_reports_nonfinite)
{
    rng_seed(71);
    const int rows = 4, cols = 256;
    static float src[4 * 256];
    static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    static const int at[] = {0, 31, 32, 63, 64, 100, 127, 128, 255};
    for (int c = 0; c < N_QCONF; c++) {
        qbuf b;
        qbuf_init(&b, qconf[c].type, qconf[c].group, rows, cols);
        fill_row_data(src, sizeof src / sizeof src[0]);
        ck_assert_int_eq(coli__q_quantize_rows(src, rows, &b.w), -1);
        for (size_t v = 0; v < sizeof bad / sizeof bad[0]; v++) {
            for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
                float *x = src + 2 * cols + at[k];
                float keep3 = src[3 * cols + 5];
                *x = bad[v];
                src[3 * cols + 5] = -bad[v]; /* a later row as well: the first is reported */
                ck_assert_msg(coli__q_quantize_rows(src, rows, &b.w) == 2, "%s: %g at column %d", qconf[c].name,
                              (double)bad[v], at[k]);
                /* a group of nothing but that value, or with both infinities */
                for (int i = 0; i < 32; i++)
                    src[2 * cols + 32 * (at[k] / 32) + i] = i % 2 ? -bad[v] : bad[v];
                ck_assert_int_eq(coli__q_quantize_rows(src, rows, &b.w), 2);
                fill_row_data(src + 2 * cols, (size_t)cols); /* row 2 finite again */
                src[3 * cols + 5] = keep3;
                ck_assert_int_eq(coli__q_quantize_rows(src, rows, &b.w), -1);
            }
        }
        /* beyond the fp16 scales is not "non-finite": the loader says ERANGE */
        src[cols + 7] = 3e38f;
        ck_assert_int_eq(coli__q_quantize_rows(src, rows, &b.w), -1);
        src[cols + 7] = 0.0f;
        qbuf_free(&b);
    }
}
END_TEST

/* A refused coli_quantize leaves zeros, not the rows it got through. */
START_TEST(test_public_refusal_leaves_zeros)
{
    rng_seed(73);
    const int rows = 3, cols = 128;
    float src[3 * 128];
    static const coli_weight_format fmts[] = {COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q4,
                                              COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2};
    static const float bad[] = {NAN, INFINITY, -INFINITY, 1e30f /* beyond the fp16 scales */};
    static const coli_status want[] = {COLI_EINVAL, COLI_EINVAL, COLI_EINVAL, COLI_ERANGE};
    for (int c = 0; c < N_QCONF; c++) {
        size_t size = coli_quant_size(fmts[c], qconf[c].group, rows, cols);
        unsigned char *buf = malloc(size);
        ck_assert_ptr_nonnull(buf);
        for (size_t v = 0; v < sizeof bad / sizeof bad[0]; v++) {
            fill_row_data(src, sizeof src / sizeof src[0]);
            src[2 * cols + 77] = bad[v]; /* the last row: the first two were written */
            memset(buf, 0xa5, size);
            ck_assert_int_eq(coli_quantize(fmts[c], qconf[c].group, src, rows, cols, buf, size), want[v]);
            for (size_t i = 0; i < size; i++)
                ck_assert_msg(buf[i] == 0, "%s, %g: byte %zu of %zu is %#x", qconf[c].name, (double)bad[v], i,
                              size, buf[i]);
        }
        free(buf);
    }
}
END_TEST

/* ---- suite ------------------------------------------------------------------ */

/* ---- float products ---------------------------------------------------------
 *
 * docs/formats.md: 32 partial sums, P_k taking w_i * x_i (rounded) for
 * i = k mod 32 in increasing i, then the fold written out below. Restated
 * here in double-free float steps, and both the scalar code and the SIMD
 * path in use must give its bits, with and without a tail. */
static float float_dot_contract(const float *w, const float *x, int n)
{
    float P[32];
    for (int k = 0; k < 32; k++)
        P[k] = 0.0f;
    for (int k = 0; k < 32; k++)
        for (int i = k; i < n; i += 32)
            P[k] = fmaf(w[i], x[i], P[k]); /* one rounding */
    float u0 = (P[0] + P[16]) + (P[8] + P[24]), u1 = (P[1] + P[17]) + (P[9] + P[25]);
    float u2 = (P[2] + P[18]) + (P[10] + P[26]), u3 = (P[3] + P[19]) + (P[11] + P[27]);
    float u4 = (P[4] + P[20]) + (P[12] + P[28]), u5 = (P[5] + P[21]) + (P[13] + P[29]);
    float u6 = (P[6] + P[22]) + (P[14] + P[30]), u7 = (P[7] + P[23]) + (P[15] + P[31]);
    return ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7));
}

START_TEST(test_float_dot_order)
{
    rng_seed(77);
    static const int lens[] = {1, 7, 8, 31, 32, 33, 63, 64, 100, 256, 257, 1000, 4096};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int n = lens[li];
        float *w = malloc((size_t)n * 4), *x = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4);
        uint16_t *wb = malloc((size_t)n * 2), *wh = malloc((size_t)n * 2);
        for (int i = 0; i < n; i++) {
            w[i] = (float)rng_normal();
            x[i] = (float)rng_normal() * 3.0f;
            uint32_t u = fbits(w[i]);
            wb[i] = (uint16_t)(u >> 16);
            wh[i] = coli__f32_to_f16(w[i]);
        }
        for (int fmt = 0; fmt < 3; fmt++) {
            coli__dtype dt = fmt == 0 ? COLI_DT_F32 : fmt == 1 ? COLI_DT_BF16 : COLI_DT_F16;
            const void *wp = fmt == 0 ? (const void *)w : fmt == 1 ? (const void *)wb : (const void *)wh;
            for (int i = 0; i < n; i++) { /* the widened weights */
                uint32_t u = (uint32_t)wb[i] << 16;
                float b;
                memcpy(&b, &u, 4);
                wf[i] = fmt == 0 ? w[i] : fmt == 1 ? b : coli__f16_to_f32(wh[i]);
            }
            float want = float_dot_contract(wf, x, n);
            for (int set = COLI__CPUK_SCALAR; set <= COLI__CPUK_AMX; set++) {
                const coli__cpuk *k = coli__cpuk_get(set);
                if (!k)
                    continue; /* not on this CPU: the sets it has are checked */
                float got = coli__dot_for_test(k, dt, wp, x, n);
                ck_assert_msg(fbits(got) == fbits(want), "format %d n %d %s: %.9g, the contract %.9g", (int)dt, n,
                              coli__cpuk_name(k), (double)got, (double)want);
            }
        }
        free(w);
        free(x);
        free(wf);
        free(wb);
        free(wh);
    }
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_f16_values);
    tcase_add_test(tc, test_f16_exhaustive);
    tcase_add_test(tc, test_f16_random);
    tcase_add_test(tc, test_q8_layout);
    tcase_add_test(tc, test_q4_layout);
    tcase_add_test(tc, test_q2_layout);
    tcase_add_test(tc, test_x16_layout);
    tcase_add_test(tc, test_x16_tuning_choice);
    tcase_add_test(tc, test_tiny_groups);
    tcase_add_test(tc, test_quant_error);
    tcase_add_test(tc, test_quant_rule);
    tcase_add_test(tc, test_act_hand);
    tcase_add_test(tc, test_act_tables);
    tcase_add_test(tc, test_act_random);
    tcase_add_test(tc, test_dot_double);
    tcase_add_test(tc, test_dot_stepwise);
    tcase_add_test(tc, test_check_sizes);
    tcase_add_test(tc, test_public_sizes);
    tcase_add_test(tc, test_public_roundtrip);
    tcase_add_test(tc, test_quantize_reports_nonfinite);
    tcase_add_test(tc, test_public_refusal_leaves_zeros);
    suite_add_tcase(s, tc);

    TCase *tk = tcase_create("kernels");
    tcase_set_timeout(tk, 600);
    tcase_add_test(tk, test_bitexact_scalar);
    tcase_add_test(tk, test_bitexact_avx2);
    tcase_add_test(tk, test_bitexact_avx512);
    tcase_add_test(tk, test_bitexact_many);
    tcase_add_test(tk, test_picked_rows);
    tcase_add_test(tk, test_bitexact_amx);
    tcase_add_test(tk, test_bitexact_best);
    tcase_add_test(tk, test_float_dot_order);
    suite_add_tcase(s, tk);
    return s;
}

int main(void)
{
    return tu_run_suite(quant_suite());
}
