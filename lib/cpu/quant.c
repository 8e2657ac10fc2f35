/* quant.c - the quantized formats q8, q4, q2: checks, quantization,
 * dequantization, activation quantization, the scalar product (the
 * definition every SIMD kernel is tested against bit for bit) and the public
 * coli_quant_size / coli_quantize / coli_dequantize. Sizes and layouts are
 * below it (qlayout.c); the SIMD tables above it (quant_avx2.c,
 * quant_avx512.c) and the choice among the tables at the top (kernels.c).
 *
 * docs/formats.md is the contract. Its arithmetic is binary32 with one
 * rounding per operation: every product and sum below is written as its own
 * expression or assigned to its own variable, so the result does not depend
 * on -ffp-contract (the build's -std=c11 already means "off" for GCC).
 *
 * Rounding to nearest, ties to even, adds and subtracts 1.5 * 2^23 (the
 * activations' rounding, shared with the GPU tier, is lib/cpu/qround.h),
 * which follows the current rounding mode: we rely on the default
 * floating-point environment (round to nearest), which the library never
 * changes. */
/* Belt and braces: GCC contracts a*b+c into an FMA even across statements
 * under -ffp-contract=fast (its default outside ISO mode, e.g. -std=gnu11
 * with -march=haswell), and ignores the standard pragma; clang honours the
 * standard one. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#else
#pragma STDC FP_CONTRACT OFF
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fp16.h"
#include "cpu/qround.h"
#include "cpu/quant.h"

/* ---- fp16 ----------------------------------------------------------------- */

uint16_t coli__f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: a quiet NaN, keeping the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    /* 65520 = 65504 + half an ulp: the tie goes to the even neighbour, which
     * is 2^16, i.e. infinity. */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* >= 2^-14: a normal half */
        uint32_t r = a - ((uint32_t)(127 - 15) << 23);
        /* round the 23-bit mantissa to 10 bits, ties to even; a carry out of
         * the mantissa correctly bumps the exponent */
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    /* Below 2^-14: a subnormal half, in units of 2^-24. The value is
     * mant * 2^(e - 150) with the implicit bit, i.e. mant >> (126 - e) units. */
    uint32_t e = a >> 23;
    if (e < 102) /* < 2^-25: rounds to zero (2^-25 itself is handled below) */
        return sign;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 .. 24 */
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* may reach 0x400, the smallest normal: still the right code */
    return (uint16_t)(sign | q);
}

/* ---- checks --------------------------------------------------------------- */

coli_status coli__q_check(coli__dtype type, int group, int cols, const char *what, coli__err *err)
{
    if (!what)
        what = "matrix";
    if (!coli__dtype_is_quant(type))
        return coli__fail(err, COLI_EINVAL, "%s: not a quantized type (%d)", what, (int)type);
    if (type == COLI_DT_Q4) {
        if (group != 32 && group != 64 && group != 128)
            return coli__fail(err, COLI_EINVAL, "%s: q4 group size %d is not 32, 64 or 128", what,
                              group);
    } else if (group != COLI_QK) {
        return coli__fail(err, COLI_EINVAL, "%s: %s group size %d is not 32", what,
                          coli__dtype_name(type), group);
    }
    if (cols <= 0 || cols % COLI_QK != 0)
        return coli__fail(err, COLI_EINVAL, "%s: %d columns is not a positive multiple of 32 (%s)",
                          what, cols, coli__dtype_name(type));
    if (cols % group != 0)
        return coli__fail(err, COLI_EINVAL, "%s: %d columns is not a multiple of the group size %d",
                          what, cols, group);
    return COLI_OK;
}

/* ---- quantization --------------------------------------------------------- */

/* q[i] = clamp(rne(x[i] / D), lo, hi) for 32 values, lo and hi integers.
 * Clamping before rounding gives the same integers (rne is monotonic and
 * fixes integers), and bounds the value for rne by the 1.5 * 2^23 trick:
 * (v + 1.5*2^23) - 1.5*2^23 is v rounded to an integer, ties to even, in the
 * default rounding mode, for |v| < 2^22. A NaN (non-finite input) becomes
 * lo. Written on local arrays so that it vectorises (divps is as exact as
 * the scalar division). */
static void quantize_32(const float *x, float D, float lo, float hi, int8_t *q)
{
    float v[32];
    for (int i = 0; i < 32; i++) {
        float t = x[i] / D;
        t = t > lo ? t : lo;
        t = t < hi ? t : hi;
        float big = t + 0x1.8p23f;
        v[i] = big - 0x1.8p23f;
    }
    for (int i = 0; i < 32; i++)
        q[i] = (int8_t)(int)v[i];
}

/* The largest magnitude of 32 values: compared as the integers of their
 * magnitude bits, whose order is the order of the magnitudes (a NaN's are
 * above infinity's, so a NaN among them gives a NaN). */
static float amax_32(const float *x)
{
    uint32_t bits[32], m = 0;
    memcpy(bits, x, sizeof bits);
    for (int i = 0; i < 32; i++) {
        uint32_t b = bits[i] & 0x7fffffffu;
        m = b > m ? b : m;
    }
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

/* The scale d is a rounded fp16; when it rounds to 0 although the group is not
 * all zeros (|scale| < 2^-25), every q is 0, as for an all-zero group: the
 * division by f32(d) would otherwise be by zero.
 *
 * Each group quantizer returns 1 if its group holds a NaN or an infinity,
 * which it sees for free in the magnitude or range it computes anyway; the
 * quants it then writes are defined but meaningless. */

static int quantize_q8_group(const float *x, uint8_t *qs, uint16_t *d)
{
    float xv[32];
    memcpy(xv, x, sizeof xv);
    float amax = amax_32(xv);
    uint16_t h = coli__f32_to_f16(amax / 127.0f);
    float D = coli__f16_bits_to_f32(h);
    *d = amax == 0.0f ? 0 : h;
    int8_t q[32];
    if (amax != 0.0f && D != 0.0f)
        quantize_32(xv, D, -127.0f, 127.0f, q);
    else
        memset(q, 0, sizeof q);
    memcpy(qs, q, sizeof q);
    return !(amax <= FLT_MAX);
}

/* One G-group of q4: x[0..G), quants into qs (G/2 bytes, whole 32-column
 * blocks of 16 bytes). */
static int quantize_q4_group(const float *x, int G, uint8_t *qs, uint16_t *d)
{
    float amx = 0.0f;
    int bad = 0;
    for (int k = 0; k < G / 32; k++) {
        float a = amax_32(x + 32 * k);
        bad |= !(a <= FLT_MAX); /* a NaN would be lost by the comparison below */
        amx = a > amx ? a : amx;
    }
    /* mx: the first element of that magnitude, with its sign */
    float mx = 0.0f;
    for (int i = 0; i < G; i++) {
        if (fabsf(x[i]) == amx) {
            mx = x[i];
            break;
        }
    }
    uint16_t h = coli__f32_to_f16(mx / -8.0f);
    float D = coli__f16_bits_to_f32(h);
    *d = mx == 0.0f ? 0 : h;
    for (int k = 0; k < G / 32; k++) {
        int8_t q[32];
        if (mx != 0.0f && D != 0.0f)
            quantize_32(x + 32 * k, D, -8.0f, 7.0f, q);
        else
            memset(q, 0, sizeof q);
        uint8_t *qb = qs + 16 * k;
        for (int b = 0; b < 16; b++)
            qb[b] = (uint8_t)((q[b] + 8) | ((q[b + 16] + 8) << 4));
    }
    return bad;
}

static int quantize_q2_group(const float *x, uint8_t *qs, uint16_t *d, uint16_t *m)
{
    /* lo and hi in the order of the floats; a group holding both -0 and +0
     * (and nothing below/above) takes lo = -0, hi = +0: see the key below */
    uint32_t bits[32];
    memcpy(bits, x, sizeof bits);
    uint32_t kmin = UINT32_MAX, kmax = 0;
    for (int i = 0; i < 32; i++) {
        /* order-preserving key: positive floats get the top bit set, negative
         * ones are complemented, so unsigned order is float order with
         * -0 < +0 */
        uint32_t b = bits[i];
        uint32_t key = b ^ ((0u - (b >> 31)) | 0x80000000u);
        kmin = key < kmin ? key : kmin;
        kmax = key > kmax ? key : kmax;
    }
    uint32_t blo = (kmin & 0x80000000u) ? kmin ^ 0x80000000u : ~kmin;
    uint32_t bhi = (kmax & 0x80000000u) ? kmax ^ 0x80000000u : ~kmax;
    float lo, hi;
    memcpy(&lo, &blo, sizeof lo);
    memcpy(&hi, &bhi, sizeof hi);
    uint16_t hm = coli__f32_to_f16(lo);
    float M = coli__f16_bits_to_f32(hm);
    *m = hm;
    uint16_t hd = 0;
    float D = 0.0f;
    if (hi != lo) {
        float range = hi - lo;
        hd = coli__f32_to_f16(range / 3.0f);
        D = coli__f16_bits_to_f32(hd);
    }
    *d = hd;
    int8_t q[32];
    if (D != 0.0f) {
        float t[32];
        for (int i = 0; i < 32; i++)
            t[i] = x[i] - M; /* one rounding; the division in quantize_32 another */
        quantize_32(t, D, 0.0f, 3.0f, q);
    } else {
        memset(q, 0, sizeof q);
    }
    for (int b = 0; b < 8; b++)
        qs[b] = (uint8_t)(q[b] | (q[b + 8] << 2) | (q[b + 16] << 4) | (q[b + 24] << 6));
    /* a NaN sorts below -inf or above +inf, so it is lo or hi */
    return !(fabsf(lo) <= FLT_MAX && fabsf(hi) <= FLT_MAX);
}

int coli__q_quantize_rows(const float *src, int n_rows, coli__qmat *w)
{
    int cols = w->cols;
    int G = coli__q_scale_group(w->type, w->group);
    size_t rb = coli__q_row_bytes(w->type, cols);
    int ng = cols / G, n32 = cols / COLI_QK;
    uint8_t *qs = (uint8_t *)w->qs;
    uint16_t *d = (uint16_t *)w->d;
    uint16_t *m = (uint16_t *)w->m;
    int first_bad = -1;
    for (int r = 0; r < n_rows; r++) {
        const float *x = src + (size_t)r * (size_t)cols;
        uint8_t *qr = qs + (size_t)r * rb;
        uint16_t *dr = d + (size_t)r * (size_t)ng;
        int bad = 0;
        switch (w->type) {
        case COLI_DT_Q8:
            for (int j = 0; j < n32; j++)
                bad |= quantize_q8_group(x + 32 * j, qr + 32 * j, dr + j);
            break;
        case COLI_DT_Q4:
            for (int j = 0; j < ng; j++)
                bad |= quantize_q4_group(x + (size_t)G * j, G, qr + (size_t)(G / 2) * j, dr + j);
            break;
        case COLI_DT_Q2: {
            uint16_t *mr = m + (size_t)r * (size_t)n32;
            for (int j = 0; j < n32; j++)
                bad |= quantize_q2_group(x + 32 * j, qr + 8 * j, dr + j, mr + j);
            break;
        }
        default:
            return -1;
        }
        if (bad && first_bad < 0)
            first_bad = r;
    }
    return first_bad;
}

void coli__q_dequantize_row(const coli__qmat *w, int r, float *out)
{
    int cols = w->cols;
    int G = coli__q_scale_group(w->type, w->group);
    int ng = cols / G, n32 = cols / COLI_QK;
    if (w->layout == COLI__QL_X16) { /* q8 and q4 only: one group at a time */
        uint8_t q[32];
        uint16_t d;
        coli__qmat row = {w->type, 32, 1, 32, q, &d, NULL, COLI__QL_ROWS};
        for (int g = 0; g < n32; g++) {
            coli__q_x16_group(w, r, g, q, &d);
            coli__q_dequantize_row(&row, 0, out + 32 * g);
        }
        return;
    }
    const uint8_t *qr = w->qs + (size_t)r * coli__q_row_bytes(w->type, cols);
    const uint16_t *dr = w->d + (size_t)r * (size_t)ng;
    /* a group's scale widened once; each value d * q (q2: then + m), the
     * same two roundings per value as ever */
    switch (w->type) {
    case COLI_DT_Q8:
        for (int g = 0; g < n32; g++) {
            const float D = coli__f16_bits_to_f32(dr[g]);
            const int8_t *q = (const int8_t *)qr + 32 * g;
            float *o = out + 32 * g;
            for (int i = 0; i < 32; i++)
                o[i] = D * (float)q[i];
        }
        break;
    case COLI_DT_Q4:
        for (int k = 0; k < n32; k++) {
            const float D = coli__f16_bits_to_f32(dr[32 * k / G]);
            const uint8_t *b = qr + 16 * k;
            float *o = out + 32 * k;
            for (int i = 0; i < 16; i++) {
                o[i] = D * (float)((int)(b[i] & 15) - 8);
                o[i + 16] = D * (float)((int)(b[i] >> 4) - 8);
            }
        }
        break;
    case COLI_DT_Q2: {
        const uint16_t *mr = w->m + (size_t)r * (size_t)n32;
        for (int g = 0; g < n32; g++) {
            const float D = coli__f16_bits_to_f32(dr[g]), M = coli__f16_bits_to_f32(mr[g]);
            const uint8_t *b = qr + 8 * g;
            float *o = out + 32 * g;
            for (int i = 0; i < 32; i++) {
                float dq = D * (float)((b[i & 7] >> (2 * (i >> 3))) & 3); /* w = d * q + m: two roundings */
                o[i] = dq + M;
            }
        }
        break;
    }
    default:
        break;
    }
}

void coli__q_quantize_act(const float *a, int cols, int8_t *p, float *s, int32_t *psum)
{
    for (int g = 0; g < cols / COLI_QK; g++) {
        const float *x = a + COLI_QK * g;
        int8_t *pg = p + COLI_QK * g;
        float amax = amax_32(x);
        int32_t sum = 0;
        s[g] = coli__qact_scale(amax);
        if (amax == 0.0f) {
            memset(pg, 0, COLI_QK);
        } else {
            float t = coli__qact_mul(amax);
            if (coli__qact_finite(t)) {
                float xv[COLI_QK]; /* local copies: no aliasing, so it vectorises */
                int8_t qv[COLI_QK];
                memcpy(xv, x, sizeof xv);
                for (int i = 0; i < COLI_QK; i++) {
                    int q = coli__qact_round(xv[i], t);
                    qv[i] = (int8_t)q;
                    sum += q;
                }
                memcpy(pg, qv, sizeof qv);
            } else {
                for (int i = 0; i < COLI_QK; i++) {
                    int q = coli__qact_round_inf(x[i], t);
                    pg[i] = (int8_t)q;
                    sum += q;
                }
            }
        }
        psum[g] = sum;
    }
}

/* ---- the product: steps 1-4 of docs/formats.md ---------------------------- */

/* Step 1 for one 32-column group g of row quants qr. */
static int32_t isum_q8(const uint8_t *qg, const int8_t *pg)
{
    const int8_t *q = (const int8_t *)(const void *)qg;
    int32_t sum = 0;
    for (int i = 0; i < 32; i++)
        sum += (int32_t)q[i] * (int32_t)pg[i];
    return sum;
}

static int32_t isum_q4(const uint8_t *qb, const int8_t *pg)
{
    int32_t sum = 0;
    for (int b = 0; b < 16; b++) {
        int32_t lo = (int32_t)(qb[b] & 15) - 8;
        int32_t hi = (int32_t)(qb[b] >> 4) - 8;
        sum += lo * (int32_t)pg[b];
        sum += hi * (int32_t)pg[b + 16];
    }
    return sum;
}

static int32_t isum_q2(const uint8_t *qb, const int8_t *pg)
{
    int32_t sum = 0;
    for (int b = 0; b < 8; b++) {
        int32_t v = qb[b];
        sum += (v & 3) * (int32_t)pg[b];
        sum += ((v >> 2) & 3) * (int32_t)pg[b + 8];
        sum += ((v >> 4) & 3) * (int32_t)pg[b + 16];
        sum += ((v >> 6) & 3) * (int32_t)pg[b + 24];
    }
    return sum;
}

static float dot_row(const coli__qmat *w, int r, const int8_t *p, const float *s,
                     const int32_t *psum)
{
    int cols = w->cols;
    int n = cols / COLI_QK;
    int G = coli__q_scale_group(w->type, w->group);
    int per = G / COLI_QK; /* 32-column groups per scale */
    size_t gb = coli__q_row_bytes(w->type, COLI_QK);
    const int x16 = w->layout == COLI__QL_X16;
    const uint8_t *qr = x16 ? NULL : w->qs + (size_t)r * coli__q_row_bytes(w->type, cols);
    const uint16_t *dr = x16 ? NULL : w->d + (size_t)r * (size_t)(cols / G);
    const uint16_t *mr = w->type == COLI_DT_Q2 ? w->m + (size_t)r * (size_t)n : NULL;
    uint8_t buf[32];
    uint16_t dx = 0;
    float P[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}; /* step 3: start at +0 */
    for (int g = 0; g < n; g++) {
        const uint8_t *qg = x16 ? buf : qr + (size_t)g * gb;
        const int8_t *pg = p + 32 * g;
        if (x16)
            coli__q_x16_group(w, r, g, buf, &dx); /* the same values, in the row layout */
        float f;
        switch (w->type) {
        case COLI_DT_Q8: {
            float D = coli__f16_bits_to_f32(x16 ? dx : dr[g]);
            float ds = D * s[g];
            f = (float)isum_q8(qg, pg) * ds; /* f32(isum) is exact */
            break;
        }
        case COLI_DT_Q4: {
            float D = coli__f16_bits_to_f32(x16 ? dx : dr[g / per]);
            float ds = D * s[g];
            f = (float)isum_q4(qg, pg) * ds;
            break;
        }
        case COLI_DT_Q2: {
            float D = coli__f16_bits_to_f32(dr[g]);
            float M = coli__f16_bits_to_f32(mr[g]);
            float ds = D * s[g];
            float ms = M * s[g];
            float f1 = (float)isum_q2(qg, pg) * ds;
            float f2 = (float)psum[g] * ms;
            f = f1 + f2;
            break;
        }
        default:
            return 0.0f;
        }
        P[g % 8] += f;
    }
    /* step 4 */
    float a04 = P[0] + P[4], a26 = P[2] + P[6], a15 = P[1] + P[5], a37 = P[3] + P[7];
    float e = a04 + a26, o = a15 + a37;
    return e + o;
}

float coli__q_dot_ref(const coli__qmat *w, int r, const int8_t *p, const float *s,
                      const int32_t *psum)
{
    return dot_row(w, r, p, s, psum);
}

static void gemm_scalar(const coli__qmat *w, int r0, int r1, int n_tok, const int8_t *p,
                        const float *s, const int32_t *psum, float *y, size_t y_stride)
{
    size_t cols = (size_t)w->cols, n = cols / COLI_QK;
    for (int t = 0; t < n_tok; t++) {
        const int8_t *pt = p + (size_t)t * cols;
        const float *st = s + (size_t)t * n;
        const int32_t *sumt = psum + (size_t)t * n;
        float *yt = y + (size_t)t * y_stride;
        for (int r = r0; r < r1; r++)
            yt[r] = dot_row(w, r, pt, st, sumt);
    }
}

static const coli__qkernels g_scalar = {"scalar", gemm_scalar, coli__q_quantize_act};

const coli__qkernels *coli__q_kernels_scalar(void)
{
    return &g_scalar;
}

/* ---- public API ------------------------------------------------------------ */

/* The shape of a public call, validated. */
typedef struct qshape {
    coli__dtype type;
    int group;        /* as in coli__qmat: 32 for q8/q2 */
    size_t rows, cols;
    size_t qs_bytes;  /* all rows */
    size_t n_scales;  /* d entries, all rows */
    size_t n_mins;    /* m entries, all rows (q2) */
    size_t total;
} qshape;

static int add_ok(size_t *acc, size_t v)
{
    if (v > SIZE_MAX - *acc)
        return 0;
    *acc += v;
    return 1;
}

/* 1 if the arguments describe a valid quantized matrix; fills *sh. */
static int public_shape(coli_weight_format fmt, int group, size_t rows, size_t cols, qshape *sh)
{
    memset(sh, 0, sizeof *sh);
    switch (fmt) {
    case COLI_WEIGHTS_Q8:
        sh->type = COLI_DT_Q8;
        sh->group = COLI_QK;
        break;
    case COLI_WEIGHTS_Q4:
        sh->type = COLI_DT_Q4;
        sh->group = group;
        break;
    case COLI_WEIGHTS_Q2:
        sh->type = COLI_DT_Q2;
        sh->group = COLI_QK;
        break;
    default:
        return 0;
    }
    if (rows == 0 || cols == 0 || cols > (size_t)INT_MAX)
        return 0;
    if (coli__q_check(sh->type, sh->group, (int)cols, NULL, NULL) != COLI_OK)
        return 0;
    if (rows > SIZE_MAX / cols)
        return 0;
    size_t n = rows * cols;
    sh->rows = rows;
    sh->cols = cols;
    sh->qs_bytes = sh->type == COLI_DT_Q8 ? n : sh->type == COLI_DT_Q4 ? n / 2 : n / 4;
    sh->n_scales = n / (size_t)sh->group;
    sh->n_mins = sh->type == COLI_DT_Q2 ? n / COLI_QK : 0;
    size_t total = sh->qs_bytes;
    /* n_scales, n_mins <= n / 32, so doubling them cannot overflow */
    if (!add_ok(&total, sh->n_scales * 2) || !add_ok(&total, sh->n_mins * 2))
        return 0;
    sh->total = total;
    return 1;
}

/* The public buffer stores fp16 values little-endian at any alignment. */
static void store_le16(unsigned char *dst, const uint16_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = (unsigned char)(v[i] & 0xff);
        dst[2 * i + 1] = (unsigned char)(v[i] >> 8);
    }
}

static void load_le16(uint16_t *v, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
}

COLI_API size_t coli_quant_size(coli_weight_format fmt, int group, size_t rows, size_t cols)
{
    qshape sh;
    return public_shape(fmt, group, rows, cols, &sh) ? sh.total : 0;
}

COLI_API coli_status coli_quantize(coli_weight_format fmt, int group, const float *src, size_t rows,
                                   size_t cols, void *dst, size_t cap)
{
    qshape sh;
    if (!src || !dst || !public_shape(fmt, group, rows, cols, &sh))
        return COLI_EINVAL;
    if (cap < sh.total)
        return COLI_ENOSPC;
    /* dst may have any alignment: the fp16 arrays of a row are built in
     * aligned scratch and copied. */
    size_t nd = cols / (size_t)sh.group, nm = sh.type == COLI_DT_Q2 ? cols / COLI_QK : 0;
    uint16_t *tmp = malloc((nd + nm + 1) * sizeof *tmp);
    if (!tmp)
        return COLI_ENOMEM;
    unsigned char *out = dst;
    size_t rb = sh.qs_bytes / rows;
    unsigned char *dbase = out + sh.qs_bytes;
    unsigned char *mbase = dbase + sh.n_scales * 2;
    coli_status st = COLI_OK;
    for (size_t r = 0; r < rows && st == COLI_OK; r++) {
        coli__qmat w = {.type = sh.type,
                        .group = sh.group,
                        .rows = 1,
                        .cols = (int)cols,
                        .qs = out + r * rb,
                        .d = tmp,
                        .m = tmp + nd};
        if (coli__q_quantize_rows(src + r * cols, 1, &w) >= 0)
            st = COLI_EINVAL; /* a NaN or an infinity */
        /* values beyond the fp16 range of the scales (q8 |x| >= ~8.3e6, q4
         * ~5.2e5, q2 |min| >= 65520 or range >= ~2e5) would store infinite
         * scales, whose products are NaN */
        for (size_t i = 0; i < nd + nm && st == COLI_OK; i++)
            if ((tmp[i] & 0x7c00u) == 0x7c00u)
                st = COLI_ERANGE;
        store_le16(dbase + r * nd * 2, tmp, nd);
        store_le16(mbase + r * nm * 2, tmp + nd, nm);
    }
    free(tmp);
    if (st != COLI_OK)
        memset(dst, 0, sh.total); /* no partial result */
    return st;
}

COLI_API coli_status coli_dequantize(coli_weight_format fmt, int group, const void *src, size_t size,
                                     size_t rows, size_t cols, float *dst)
{
    qshape sh;
    if (!src || !dst || !public_shape(fmt, group, rows, cols, &sh))
        return COLI_EINVAL;
    if (size != sh.total)
        return COLI_EINVAL;
    size_t nd = cols / (size_t)sh.group, nm = sh.type == COLI_DT_Q2 ? cols / COLI_QK : 0;
    uint16_t *tmp = malloc((nd + nm + 1) * sizeof *tmp);
    if (!tmp)
        return COLI_ENOMEM;
    const unsigned char *in = src;
    size_t rb = sh.qs_bytes / rows;
    const unsigned char *dbase = in + sh.qs_bytes;
    const unsigned char *mbase = dbase + sh.n_scales * 2;
    for (size_t r = 0; r < rows; r++) {
        load_le16(tmp, dbase + r * nd * 2, nd);
        load_le16(tmp + nd, mbase + r * nm * 2, nm);
        coli__qmat w = {.type = sh.type,
                        .group = sh.group,
                        .rows = 1,
                        .cols = (int)cols,
                        .qs = in + r * rb,
                        .d = tmp,
                        .m = tmp + nd};
        coli__q_dequantize_row(&w, 0, dst + r * cols);
    }
    free(tmp);
    return COLI_OK;
}
