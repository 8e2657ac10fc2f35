/* kernels.c - matrix-vector kernels for f32, bf16 and f16 weights. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COLI_X86 1
#else
#define COLI_X86 0
#endif

float coli__bf16_to_f32(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float coli__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            man &= 0x3ff;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- scalar paths ------------------------------------------------------ */

/* Eight partial sums: the same association the SIMD path uses. */
static float dot_f32_scalar(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++)
        t += a[i] * b[i];
    return t;
}

static float dot_bf16_scalar(const uint16_t *w, const float *x, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += coli__bf16_to_f32(w[i + j]) * x[i + j];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++)
        t += coli__bf16_to_f32(w[i]) * x[i];
    return t;
}

static float dot_f16_scalar(const uint16_t *w, const float *x, int n)
{
    float t = 0;
    for (int i = 0; i < n; i++)
        t += coli__f16_to_f32(w[i]) * x[i];
    return t;
}

/* ---- AVX2 + FMA -------------------------------------------------------- */
#if COLI_X86
__attribute__((target("avx2,fma"))) static float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

__attribute__((target("avx2,fma"))) static float dot_f32_avx2(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float t = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        t += a[i] * b[i];
    return t;
}

__attribute__((target("avx2,fma"))) static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma"))) static float dot_bf16_avx2(const uint16_t *w, const float *x, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(load_bf16x8(w + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load_bf16x8(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(load_bf16x8(w + i + 16), _mm256_loadu_ps(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(load_bf16x8(w + i + 24), _mm256_loadu_ps(x + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(load_bf16x8(w + i), _mm256_loadu_ps(x + i), s0);
    float t = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        t += coli__bf16_to_f32(w[i]) * x[i];
    return t;
}

__attribute__((target("avx2,fma,f16c"))) static float dot_f16_avx2(const uint16_t *w, const float *x, int n)
{
    __m256 s0 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
        s0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), s0);
    }
    float t = hsum256(s0);
    for (; i < n; i++)
        t += coli__f16_to_f32(w[i]) * x[i];
    return t;
}
#endif

/* ---- dispatch ---------------------------------------------------------- */

typedef float (*dot_f32_fn)(const float *, const float *, int);
typedef float (*dot_h_fn)(const uint16_t *, const float *, int);

static dot_f32_fn g_dot_f32 = dot_f32_scalar;
static dot_h_fn g_dot_bf16 = dot_bf16_scalar;
static dot_h_fn g_dot_f16 = dot_f16_scalar;
static const char *g_name = "scalar";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void pick_kernels(void)
{
#if COLI_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        g_dot_f32 = dot_f32_avx2;
        g_dot_bf16 = dot_bf16_avx2;
        if (__builtin_cpu_supports("f16c"))
            g_dot_f16 = dot_f16_avx2;
        g_name = "avx2";
    }
#endif
}

static void init_kernels(void)
{
    pthread_once(&g_once, pick_kernels);
}

const char *coli__kernels_name(void)
{
    init_kernels();
    return g_name;
}

float coli__dot_f32(const float *a, const float *b, int n)
{
    init_kernels();
    return g_dot_f32(a, b, n);
}

void coli__axpy(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

uint64_t coli__mat_bytes(const coli__mat *w)
{
    switch (w->dt) {
    case COLI_DT_F32:
        return (uint64_t)w->rows * (uint64_t)w->cols * 4;
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        return coli__q_matrix_bytes(w->dt, w->q.group, w->rows, w->cols);
    default:
        return (uint64_t)w->rows * (uint64_t)w->cols * 2;
    }
}

const char *coli__qkernels_name(void)
{
    return coli__q_kernels_best()->name;
}

void coli__mat_row(const coli__mat *w, int r, float *out)
{
    size_t off = (size_t)r * (size_t)w->cols;
    switch (w->dt) {
    case COLI_DT_Q8:
    case COLI_DT_Q4:
    case COLI_DT_Q2:
        coli__q_dequantize_row(&w->q, r, out);
        break;
    case COLI_DT_F32:
        memcpy(out, (const float *)w->data + off, (size_t)w->cols * sizeof(float));
        break;
    case COLI_DT_BF16: {
        const uint16_t *p = (const uint16_t *)w->data + off;
        for (int i = 0; i < w->cols; i++)
            out[i] = coli__bf16_to_f32(p[i]);
        break;
    }
    default: {
        const uint16_t *p = (const uint16_t *)w->data + off;
        for (int i = 0; i < w->cols; i++)
            out[i] = coli__f16_to_f32(p[i]);
        break;
    }
    }
}

static float dot_row(const coli__mat *w, int r, const float *x)
{
    size_t off = (size_t)r * (size_t)w->cols;
    switch (w->dt) {
    case COLI_DT_F32:
        return g_dot_f32((const float *)w->data + off, x, w->cols);
    case COLI_DT_BF16:
        return g_dot_bf16((const uint16_t *)w->data + off, x, w->cols);
    default:
        return g_dot_f16((const uint16_t *)w->data + off, x, w->cols);
    }
}

typedef struct mm_job {
    const coli__mat *w;
    const float *x;
    float *y;
    int n_tok;
    float *scratch; /* per thread: cols floats, for widening a row once per batch */
} mm_job;

static void mm_task(void *arg, int64_t b, int64_t e, int thread)
{
    mm_job *j = arg;
    const coli__mat *w = j->w;
    int rows = w->rows, cols = w->cols;
    if (j->n_tok == 1) {
        for (int64_t r = b; r < e; r++)
            j->y[r] = dot_row(w, (int)r, j->x);
        return;
    }
    const float *row;
    float *buf = j->scratch ? j->scratch + (size_t)thread * (size_t)cols : NULL;
    for (int64_t r = b; r < e; r++) {
        if (w->dt == COLI_DT_F32) {
            row = (const float *)w->data + (size_t)r * (size_t)cols;
        } else {
            coli__mat_row(w, (int)r, buf);
            row = buf;
        }
        for (int t = 0; t < j->n_tok; t++)
            j->y[(size_t)t * (size_t)rows + (size_t)r] = g_dot_f32(row, j->x + (size_t)t * (size_t)cols, cols);
    }
}

typedef struct qmm_job {
    const coli__qmat *w;
    const coli__qkernels *k;
    int n_tok;
    const int8_t *p;
    const float *s;
    const int32_t *psum;
    float *y;
} qmm_job;

static void qmm_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    qmm_job *j = arg;
    j->k->gemm(j->w, (int)b, (int)e, j->n_tok, j->p, j->s, j->psum, j->y, (size_t)j->w->rows);
}

/* Quantized weights: the activations of every token are quantized once
 * (docs/formats.md), then rows are split between threads. */
static coli_status qmatmul(coli__pool *pool, const coli__mat *w, const float *x, int n_tok, float *y)
{
    const int cols = w->cols, ng = cols / COLI_QK;
    size_t np = (size_t)n_tok * (size_t)cols, ns = (size_t)n_tok * (size_t)ng;
    /* one allocation: scales and sums first keeps them 4-byte aligned */
    char *buf = malloc(ns * (sizeof(float) + sizeof(int32_t)) + np);
    if (!buf)
        return COLI_ENOMEM;
    float *s = (float *)buf;
    int32_t *psum = (int32_t *)(buf + ns * sizeof(float));
    int8_t *p = (int8_t *)(buf + ns * (sizeof(float) + sizeof(int32_t)));
    for (int t = 0; t < n_tok; t++)
        coli__q_quantize_act(x + (size_t)t * cols, cols, p + (size_t)t * cols, s + (size_t)t * ng,
                             psum + (size_t)t * ng);
    qmm_job j = {&w->q, coli__q_kernels_best(), n_tok, p, s, psum, y};
    /* Chunks of 16 rows keep threads' outputs on separate cache lines. */
    int64_t per_thread = (w->rows + coli__pool_size(pool) - 1) / coli__pool_size(pool);
    int64_t grain = 16;
    if (grain > per_thread)
        grain = per_thread > 0 ? per_thread : 1;
    coli__pool_run(pool, w->rows, grain, qmm_task, &j);
    free(buf);
    return COLI_OK;
}

coli_status coli__matmul(coli__pool *pool, const coli__mat *w, const float *x, int n_tok, float *y)
{
    init_kernels();
    if (n_tok <= 0 || w->rows <= 0)
        return COLI_OK;
    if (w->dt == COLI_DT_Q8 || w->dt == COLI_DT_Q4 || w->dt == COLI_DT_Q2)
        return qmatmul(pool, w, x, n_tok, y);
    mm_job j = {w, x, y, n_tok, NULL};
    if (n_tok > 1 && w->dt != COLI_DT_F32) {
        j.scratch = malloc((size_t)coli__pool_size(pool) * (size_t)w->cols * sizeof(float));
        if (!j.scratch)
            return COLI_ENOMEM;
    }
    /* About 64 KiB of weights per chunk keeps hand-out overhead small. */
    int64_t bytes_per_row = (int64_t)w->cols * (w->dt == COLI_DT_F32 ? 4 : 2);
    int64_t grain = 65536 / (bytes_per_row > 0 ? bytes_per_row : 1);
    if (grain < 1)
        grain = 1;
    int64_t per_thread = (w->rows + coli__pool_size(pool) - 1) / coli__pool_size(pool);
    if (grain > per_thread)
        grain = per_thread > 0 ? per_thread : 1;
    coli__pool_run(pool, w->rows, grain, mm_task, &j);
    free(j.scratch);
    return COLI_OK;
}
