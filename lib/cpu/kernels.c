/* kernels.c - matrix-vector kernels for f32, bf16 and f16 weights, and the
 * kernel sets: the one place above every quantized table (lib/cpu/quant.h)
 * that chooses among them. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attn.h"
#include "cpu/cpu.h"
#include "cpu/exp_avx2.h"
#include "cpu/exp_avx512.h"
#include "cpu/fp16.h"
#include "cpu/fsum.h"
#include "cpu/kernels.h"
#include "cpu/silu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COLI_X86 1
#else
#define COLI_X86 0
#endif

float coli__bf16_to_f32(uint16_t v)
{
    return coli__bf16_bits_to_f32(v);
}

float coli__f16_to_f32(uint16_t h)
{
    return coli__f16_bits_to_f32(h);
}

/* ---- scalar paths ------------------------------------------------------ */

/* The float product of docs/formats.md ("f32, bf16, f16"): 32 partial sums,
 * P_k = fma(w_i, x_i, P_k) for every i = k mod 32 in increasing i (one
 * rounding each: the FMA the SIMD paths and GPUs have; libm's fmaf in the
 * scalar code), then fold32. Every instruction set
 * and the GPU tier give the same bits; the bf16/f16 dots are the f32 one
 * on widened values (exact), so a row gives the same sum widened or not. */
static float f32_at(const float *p)
{
    return *p;
}

static float bf16_at(const uint16_t *p)
{
    return coli__bf16_to_f32(*p);
}

static float f16_at(const uint16_t *p)
{
    return coli__f16_to_f32(*p);
}

/* One definition per instruction set, instantiated for each weight type by
 * its element loader, so the three can never drift apart. */
#define DEFINE_DOT_SCALAR(name, wtype, at)                                             \
    static float name(const wtype *w, const float *x, int n)                           \
    {                                                                                  \
        float P[32] = {0};                                                             \
        for (int i = 0; i < n; i++)                                                    \
            P[i & 31] = fmaf(at(w + i), x[i], P[i & 31]);                              \
        return coli__fold32(P);                                                              \
    }

DEFINE_DOT_SCALAR(dot_f32_scalar, float, f32_at)
DEFINE_DOT_SCALAR(dot_bf16_scalar, uint16_t, bf16_at)
DEFINE_DOT_SCALAR(dot_f16_scalar, uint16_t, f16_at)

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

__attribute__((target("avx2,fma"))) static inline __m256 load_f32x8(const float *p)
{
    return _mm256_loadu_ps(p);
}

__attribute__((target("avx2,fma"))) static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma,f16c"))) static inline __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Four accumulators hold P_0..31 (register j, lane l: P_8j+l) over whole
 * 32-wide blocks, with FMA. Without a tail, (s0 + s2) + (s1 + s3) and
 * hsum256 are fold32 lane for lane; a tail goes on in scalar code. */
#define DEFINE_DOT_AVX2(name, target_, wtype, load8, at)                                                  \
    __attribute__((target(target_))) static float name(const wtype *w, const float *x, int n)              \
    {                                                                                                     \
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                                        \
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();                                        \
        int i = 0;                                                                                        \
        for (; i + 32 <= n; i += 32) {                                                                    \
            s0 = _mm256_fmadd_ps(load8(w + i), _mm256_loadu_ps(x + i), s0);                               \
            s1 = _mm256_fmadd_ps(load8(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);                       \
            s2 = _mm256_fmadd_ps(load8(w + i + 16), _mm256_loadu_ps(x + i + 16), s2);                     \
            s3 = _mm256_fmadd_ps(load8(w + i + 24), _mm256_loadu_ps(x + i + 24), s3);                     \
        }                                                                                                 \
        if (i == n)                                                                                       \
            return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3)));                  \
        float P[32];                                                                                      \
        _mm256_storeu_ps(P, s0);                                                                          \
        _mm256_storeu_ps(P + 8, s1);                                                                      \
        _mm256_storeu_ps(P + 16, s2);                                                                     \
        _mm256_storeu_ps(P + 24, s3);                                                                     \
        for (; i < n; i++)                                                                                \
            P[i & 31] = fmaf(at(w + i), x[i], P[i & 31]);                                                 \
        return coli__fold32(P);                                                                                 \
    }

DEFINE_DOT_AVX2(dot_f32_avx2, "avx2,fma", float, load_f32x8, f32_at)
DEFINE_DOT_AVX2(dot_bf16_avx2, "avx2,fma", uint16_t, load_bf16x8, bf16_at)
DEFINE_DOT_AVX2(dot_f16_avx2, "avx2,fma,f16c", uint16_t, load_f16x8, f16_at)
#endif

#if COLI_X86
__attribute__((target("avx2,fma"))) static void axpy_avx2(float *y, float a, const float *x, int n)
{
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}
#endif

/* y_i = fma(a, x_i, y_i): one rounding, as the AVX2 path and GPUs do it. */
static void axpy_scalar(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* ---- SwiGLU ------------------------------------------------------------ */

/* g_i = swiglu(g_i, u_i) (lib/cpu/silu.h). */
static void swiglu_scalar(float *g, const float *u, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = coli__swiglu(g[i], u[i]);
}

#if COLI_X86
/* lib/cpu/silu.h's SwiGLU eight lanes at a time: the exp of exp_avx2.h,
 * then the same division, addition and product as the scalar code. */
__attribute__((target("avx2"))) static void swiglu_avx2(float *g, const float *u, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 e = coli__exp8(_mm256_xor_ps(gv, _mm256_set1_ps(-0.0f))); /* -g */
        __m256 h = _mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(h, _mm256_loadu_ps(u + i)));
    }
    swiglu_scalar(g + i, u + i, n - i);
}
#endif

/* ---- AVX-512 ----------------------------------------------------------- */
#if COLI_X86
#define AVX512F __attribute__((target("avx512f,avx2,fma,f16c")))

AVX512F static inline __m512 load_f32x16(const float *p)
{
    return _mm512_loadu_ps(p);
}

AVX512F static inline __m512 load_bf16x16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512F static inline __m512 load_f16x16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

/* The AVX2 dot's four registers as two: P_0..15 and P_16..31, each lane
 * one P's chain in order; their sum's halves added are the AVX2 kernel's
 * (s0 + s2) + (s1 + s3), and the same hsum256 ends it. */
#define DEFINE_DOT_AVX512(name, wtype, load16, at)                                                         \
    AVX512F static float name(const wtype *w, const float *x, int n)                                      \
    {                                                                                                     \
        __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();                                          \
        int i = 0;                                                                                        \
        for (; i + 32 <= n; i += 32) {                                                                    \
            a = _mm512_fmadd_ps(load16(w + i), _mm512_loadu_ps(x + i), a);                                \
            b = _mm512_fmadd_ps(load16(w + i + 16), _mm512_loadu_ps(x + i + 16), b);                      \
        }                                                                                                 \
        if (i == n) {                                                                                     \
            __m512 s = _mm512_add_ps(a, b);                                                               \
            return hsum256(_mm256_add_ps(_mm512_castps512_ps256(s),                                       \
                                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)))); \
        }                                                                                                 \
        float P[32];                                                                                      \
        _mm512_storeu_ps(P, a);                                                                           \
        _mm512_storeu_ps(P + 16, b);                                                                      \
        for (; i < n; i++)                                                                                \
            P[i & 31] = fmaf(at(w + i), x[i], P[i & 31]);                                                 \
        return coli__fold32(P);                                                                           \
    }

DEFINE_DOT_AVX512(dot_f32_avx512, float, load_f32x16, f32_at)
DEFINE_DOT_AVX512(dot_bf16_avx512, uint16_t, load_bf16x16, bf16_at)
DEFINE_DOT_AVX512(dot_f16_avx512, uint16_t, load_f16x16, f16_at)

/* dot_f32_avx512 of one row w against four rows of x (xs floats apart),
 * out[t] for t < 4: eight chains in flight where one dot has two (w loaded
 * once for the four), each lane's chain in the same order as the one-row
 * dot's, so each out[t] is the same bits. */
AVX512F static void dot4_f32_avx512(const float *w, const float *x, size_t xs, int n, float *out)
{
    const float *x1 = x + xs, *x2 = x1 + xs, *x3 = x2 + xs;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 wa = _mm512_loadu_ps(w + i), wb = _mm512_loadu_ps(w + i + 16);
        a0 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x + i), a0);
        b0 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x + i + 16), b0);
        a1 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x1 + i), a1);
        b1 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x1 + i + 16), b1);
        a2 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x2 + i), a2);
        b2 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x2 + i + 16), b2);
        a3 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x3 + i), a3);
        b3 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x3 + i + 16), b3);
    }
    const __m512 A[4] = {a0, a1, a2, a3}, B[4] = {b0, b1, b2, b3};
    for (int t = 0; t < 4; t++) {
        float P[32];
        _mm512_storeu_ps(P, A[t]);
        _mm512_storeu_ps(P + 16, B[t]);
        const float *xt = x + (size_t)t * xs;
        for (int j = i; j < n; j++) /* the tail, in the text's order */
            P[j & 31] = fmaf(w[j], xt[j], P[j & 31]);
        out[t] = coli__fold32(P);
    }
}

AVX512F static void axpy_avx512(float *y, float a, const float *x, int n)
{
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    axpy_avx2(y + i, a, x + i, n - i);
}

/* swiglu_avx2's steps on sixteen lanes (exp_avx512.h). */
AVX512F static void swiglu_avx512(float *g, const float *u, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_loadu_ps(g + i);
        __m512 e = coli__exp16(_mm512_castsi512_ps(
            _mm512_xor_si512(_mm512_castps_si512(gv), _mm512_set1_epi32((int)0x80000000u)))); /* -g */
        __m512 h = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(h, _mm512_loadu_ps(u + i)));
    }
    swiglu_avx2(g + i, u + i, n - i);
}
#endif

/* ---- sums ------------------------------------------------------------- */

float coli__sum32(const float *a, int n)
{
    float P[32] = {0};
    for (int i = 0; i < n; i++)
        P[i & 31] = P[i & 31] + a[i];
    return coli__fold32(P);
}

/* ---- kernel sets ------------------------------------------------------- */

typedef float (*dot_f32_fn)(const float *, const float *, int);
typedef float (*dot_h_fn)(const uint16_t *, const float *, int);

struct coli__cpuk {
    const char *name;             /* the quantized table's name, then the float path */
    const coli__qkernels *q;
    dot_f32_fn dot_f32;
    dot_h_fn dot_bf16, dot_f16;
    /* out[t] = dot_f32(w, x + t xs, n) for t < 4; NULL: four dot_f32 */
    void (*dot4_f32)(const float *w, const float *x, size_t xs, int n, float *out);
    void (*axpy)(float *, float, const float *, int);
    const coli__attnk *attn;
    void (*swiglu)(float *, const float *, int);
};

/* Filled once, read-only after: index COLI__CPUK_*; q NULL when the CPU or
 * the build lacks the set. */
static coli__cpuk g_sets[5];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

unsigned coli__cpuk_needs(int which)
{
    const unsigned avx2 = COLI_CPU_AVX2 | COLI_CPU_FMA | COLI_CPU_F16C;
    if (which == COLI__CPUK_AVX2)
        return avx2;
    const unsigned avx512 = avx2 | COLI_CPU_AVX512 | COLI_CPU_AVX512VNNI;
    if (which == COLI__CPUK_AMX)
        return avx512 | COLI_CPU_AMX;
    return which == COLI__CPUK_AVX512 ? avx512 : 0;
}

static void pick_kernels(void)
{
    const coli__cpuk scalar = {.name = "scalar, float scalar",
                               .q = coli__q_kernels_scalar(),
                               .dot_f32 = dot_f32_scalar,
                               .dot_bf16 = dot_bf16_scalar,
                               .dot_f16 = dot_f16_scalar,
                               .axpy = axpy_scalar,
                               .attn = coli__attn_kernels_scalar(),
                               .swiglu = swiglu_scalar};
    g_sets[COLI__CPUK_SCALAR] = scalar;
    g_sets[COLI__CPUK_AUTO] = scalar;
#if COLI_X86
    unsigned f = coli__cpu_features();
    if ((f & coli__cpuk_needs(COLI__CPUK_AVX2)) == coli__cpuk_needs(COLI__CPUK_AVX2)) {
        coli__cpuk v = {.name = "avx2, float avx2",
                        .q = coli__q_kernels_avx2(),
                        .dot_f32 = dot_f32_avx2,
                        .dot_bf16 = dot_bf16_avx2,
                        .dot_f16 = dot_f16_avx2,
                        .axpy = axpy_avx2,
                        .attn = coli__attn_kernels_avx2(),
                        .swiglu = swiglu_avx2};
        if (v.q) {
            g_sets[COLI__CPUK_AVX2] = v;
            g_sets[COLI__CPUK_AUTO] = v;
        }
        /* AVX-512 for the float path too: the same bits on wider registers */
        v.name = "avx512vnni, float avx512";
        v.dot_f32 = dot_f32_avx512;
        v.dot_bf16 = dot_bf16_avx512;
        v.dot_f16 = dot_f16_avx512;
        v.dot4_f32 = dot4_f32_avx512;
        v.axpy = axpy_avx512;
        v.attn = coli__attn_kernels_avx512();
        v.swiglu = swiglu_avx512;
        v.q = (f & coli__cpuk_needs(COLI__CPUK_AVX512)) == coli__cpuk_needs(COLI__CPUK_AVX512)
                  ? coli__q_kernels_avx512()
                  : NULL;
        if (v.q) {
            g_sets[COLI__CPUK_AVX512] = v;
            g_sets[COLI__CPUK_AUTO] = v;
        }
        /* AMX tiles for the products of many tokens, the rest as avx512 */
        v.name = "amx-int8, avx512vnni, float avx512";
        v.q = v.q && (f & coli__cpuk_needs(COLI__CPUK_AMX)) == coli__cpuk_needs(COLI__CPUK_AMX)
                  ? coli__q_kernels_amx()
                  : NULL;
        if (v.q) {
            g_sets[COLI__CPUK_AMX] = v;
            g_sets[COLI__CPUK_AUTO] = v;
        }
    }
#endif
}

const coli__cpuk *coli__cpuk_get(int which)
{
    pthread_once(&g_once, pick_kernels);
    if (which < COLI__CPUK_AUTO || which > COLI__CPUK_AMX || !g_sets[which].q)
        return NULL;
    return &g_sets[which];
}

static const coli__cpuk *or_best(const coli__cpuk *k)
{
    return k ? k : coli__cpuk_get(COLI__CPUK_AUTO);
}

const char *coli__cpuk_name(const coli__cpuk *k)
{
    return or_best(k)->name;
}

float coli__dot_for_test(const coli__cpuk *k, coli__dtype dt, const void *w, const float *x, int n)
{
    k = or_best(k);
    if (dt == COLI_DT_F32)
        return k->dot_f32(w, x, n);
    if (dt == COLI_DT_BF16)
        return k->dot_bf16(w, x, n);
    return k->dot_f16(w, x, n);
}

void coli__swiglu_rows(const coli__cpuk *k, float *g, const float *u, int n)
{
    or_best(k)->swiglu(g, u, n);
}

void coli__attn_scores(const coli__cpuk *k, const float *q, int g, int hd, const void *kr, coli__dtype dt,
                       size_t stride, int n, float scale, float *out, size_t ostride, float *mx, const int *nh)
{
    or_best(k)->attn->scores(q, g, hd, kr, dt, stride, n, scale, out, ostride, mx, nh);
}

void coli__attn_softmax(const coli__cpuk *k, float *a, int n, float m)
{
    or_best(k)->attn->softmax(a, n, m);
}

void coli__attn_mix(const coli__cpuk *k, float *out, size_t ostride, int g, int dims, const float *w, size_t wstride,
                    const void *v, coli__dtype dt, size_t stride, int n, const int *nh)
{
    or_best(k)->attn->mix(out, ostride, g, dims, w, wstride, v, dt, stride, n, nh);
}

void coli__axpy(const coli__cpuk *k, float *y, float a, const float *x, int n)
{
    or_best(k)->axpy(y, a, x, n);
}

float coli__dot_f32(const coli__cpuk *k, const float *a, const float *b, int n)
{
    return or_best(k)->dot_f32(a, b, n);
}



coli__mat coli__mat_at(coli__dtype dt, int group, int rows, int cols, const void *base)
{
    coli__mat m;
    memset(&m, 0, sizeof m);
    m.rows = rows;
    m.cols = cols;
    m.dt = dt;
    if (!coli__dtype_is_quant(dt)) {
        m.data = base;
        return m;
    }
    const uint8_t *p = base;
    size_t qs = (size_t)rows * coli__q_row_bytes(dt, cols), nd = (size_t)rows * (size_t)(cols / group);
    m.q = (coli__qmat){dt, group, rows, cols, p, NULL, NULL, COLI__QL_ROWS};
    if (p) {
        m.q.d = (const uint16_t *)(const void *)(p + qs);
        if (dt == COLI_DT_Q2)
            m.q.m = (const uint16_t *)(const void *)(p + qs + 2 * nd);
    }
    return m;
}

int coli__mat_rows(const coli__mat *w, int r0, int n, coli__mat *out)
{
    if (r0 < 0 || n < 1 || r0 + n > w->rows)
        return 0;
    *out = *w;
    out->rows = n;
    if (!coli__dtype_is_quant(w->dt)) {
        out->data = (const char *)w->data + (size_t)r0 * (size_t)w->cols * (w->dt == COLI_DT_F32 ? 4u : 2u);
        return 1;
    }
    const coli__qmat *q = &w->q;
    out->q.rows = n;
    if (q->layout == COLI__QL_X16) { /* whole blocks of 16 rows only */
        if (r0 % 16 || n % 16)
            return 0;
        out->q.qs = q->qs + (size_t)(r0 / 16) * coli__q_x16_block_bytes(q->type, q->group, q->cols);
        return 1;
    }
    const size_t nd = (size_t)(q->cols / coli__q_scale_group(q->type, q->group));
    out->q.qs = q->qs + (size_t)r0 * coli__q_row_bytes(q->type, q->cols);
    out->q.d = q->d + (size_t)r0 * nd;
    if (q->m)
        out->q.m = q->m + (size_t)r0 * (size_t)(q->cols / 32);
    return 1;
}

const void *coli__mat_base(const coli__mat *w)
{
    return coli__dtype_is_quant(w->dt) ? (const void *)w->q.qs : w->data;
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
    case COLI_DT_F8E4M3:
        return (uint64_t)w->rows * (uint64_t)w->cols;
    default:
        return (uint64_t)w->rows * (uint64_t)w->cols * 2;
    }
}

int coli__cpuk_x16(const coli__cpuk *k)
{
    const coli__qkernels *q = or_best(k)->q;
    return q && (q == coli__q_kernels_avx512() || q == coli__q_kernels_amx());
}

const char *coli__qkernels_name(void)
{
    return or_best(NULL)->q->name;
}

const coli__qkernels *coli__q_kernels_best(void)
{
    const coli__qkernels *k = coli__q_kernels_avx512();
    if (!k)
        k = coli__q_kernels_avx2();
    return k ? k : coli__q_kernels_scalar();
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
    case COLI_DT_F8E4M3: { /* each value times its block's scale (docs/formats.md) */
        const uint8_t *p = (const uint8_t *)w->data + off;
        const float *s = w->bscale + (size_t)(r / w->brows) * (size_t)((w->cols + w->bcols - 1) / w->bcols);
        for (int i = 0; i < w->cols; i++)
            out[i] = coli__f8e4m3_to_f32(p[i]) * s[i / w->bcols];
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

static float dot_row(const coli__cpuk *k, const coli__mat *w, int r, const float *x)
{
    size_t off = (size_t)r * (size_t)w->cols;
    switch (w->dt) {
    case COLI_DT_F32:
        return k->dot_f32((const float *)w->data + off, x, w->cols);
    case COLI_DT_BF16:
        return k->dot_bf16((const uint16_t *)w->data + off, x, w->cols);
    default:
        return k->dot_f16((const uint16_t *)w->data + off, x, w->cols);
    }
}

/* ---- products ------------------------------------------------------------ */

/* Tokens up to which a float row is read once per token: a verification
 * of multi-token prediction (lib/context/speculate.c) is 2 to 9 tokens. */
#define FEW_TOK 8
/* Rows of a float product done together for many tokens (widened into
 * the per-thread scratch). */
#define FLOAT_RB 4

/* Float formats, rows [b, e) of one product. */
static void float_rows(const coli__cpuk *k, const coli__mat *w, const float *x, int n_tok, float *y, int64_t b,
                       int64_t e, float *buf)
{
    int rows = w->rows, cols = w->cols;
    if (n_tok <= FEW_TOK) {
        /* the row stays in L1 for the few tokens; the widening below pays
         * only for many (dot_bf16 is the dot_f32 of the widened row) */
        for (int64_t r = b; r < e; r++)
            for (int t = 0; t < n_tok; t++)
                y[(size_t)t * (size_t)rows + (size_t)r] = dot_row(k, w, (int)r, x + (size_t)t * (size_t)cols);
        return;
    }
    /* FLOAT_RB rows at a time against blocks of four tokens, so that the
     * rows and the tokens' activations stay in L1 together */
    for (int64_t r0 = b; r0 < e; r0 += FLOAT_RB) {
        const int nr = e - r0 < FLOAT_RB ? (int)(e - r0) : FLOAT_RB;
        const float *row[FLOAT_RB];
        for (int i = 0; i < nr; i++) {
            float *wide = buf + (size_t)i * (size_t)cols;
            if (w->dt == COLI_DT_F32)
                row[i] = (const float *)w->data + (size_t)(r0 + i) * (size_t)cols;
            else {
                coli__mat_row(w, (int)r0 + i, wide); /* widened once for all tokens */
                row[i] = wide;
            }
        }
        int t = 0;
        if (k->dot4_f32) /* four tokens' products at once, the same bits */
            for (; t + 4 <= n_tok; t += 4)
                for (int i = 0; i < nr; i++) {
                    float o[4];
                    k->dot4_f32(row[i], x + (size_t)t * (size_t)cols, (size_t)cols, cols, o);
                    for (int u = 0; u < 4; u++)
                        y[(size_t)(t + u) * (size_t)rows + (size_t)(r0 + i)] = o[u];
                }
        for (; t < n_tok; t++)
            for (int i = 0; i < nr; i++)
                y[(size_t)t * (size_t)rows + (size_t)(r0 + i)] = k->dot_f32(row[i], x + (size_t)t * (size_t)cols, cols);
    }
}

/* Whether a task needs its input quantized, or a float row widened. */
static int needs_q(const coli__mm *m)
{
    return coli__dtype_is_quant(m->w->dt) || (m->up && coli__dtype_is_quant(m->up->dt));
}

uint64_t coli__mm_bytes(const coli__mm *m)
{
    return coli__mat_bytes(m->w) + (m->up ? coli__mat_bytes(m->up) : 0);
}

static int widens(const coli__mat *w)
{
    return !coli__dtype_is_quant(w->dt) && w->dt != COLI_DT_F32;
}

/* A chunk of rows of one product. */
typedef struct chunk {
    int task, r0, r1;
} chunk;

/* Quantized activations of one product's input, made from x (rows of
 * cols floats), or (from set) copied from the rows rows[t] / div of
 * another's. */
typedef struct qin {
    int8_t *p;
    float *s;
    int32_t *psum;
    const float *x;
    int cols;
    const struct qin *from;
    const int *rows;
    int div;
} qin;

typedef struct multi_job {
    const coli__mm *tasks;
    const qin *qa;
    const chunk *chunks;
    const coli__cpuk *k;
    float *scratch; /* per thread: FLOAT_RB * max_cols floats */
    int max_cols;
    const chunk *qjobs; /* quantization: tokens [r0, r1) of an input (a task's, or a shared one's) */
} multi_job;

/* Tokens per quantization job, and the fewest for which the threads
 * share the quantization (below, a hand-out costs more than it saves). */
#define QUANT_JOB_TOK 8
#define QUANT_PAR_MIN_TOK 16

/* Quantizes (or copies) the activations of quantization jobs [b, e):
 * tokens [k0, k1) of one input. */
static void quant_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const multi_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        const chunk *qj = &j->qjobs[i];
        const qin *q = &j->qa[qj->task];
        const size_t ng = (size_t)q->cols / COLI_QK, cols = (size_t)q->cols;
        for (int k = qj->r0; k < qj->r1; k++) {
            if (!q->from) {
                j->k->q->act(q->x + (size_t)k * cols, q->cols, q->p + (size_t)k * cols, q->s + (size_t)k * ng,
                             q->psum + (size_t)k * ng);
                continue;
            }
            const size_t r = (size_t)(q->rows[k] / q->div);
            memcpy(q->p + (size_t)k * cols, q->from->p + r * cols, cols);
            memcpy(q->s + (size_t)k * ng, q->from->s + r * ng, ng * sizeof(float));
            memcpy(q->psum + (size_t)k * ng, q->from->psum + r * ng, ng * sizeof(int32_t));
        }
    }
}

/* Runs n quantization (or copy) jobs at jobs, of n_tok tokens in all: by
 * the threads when there are enough tokens to pay for a hand-out. */
static void quant_jobs(coli__pool *pool, multi_job *j, const chunk *jobs, size_t n, int n_tok)
{
    if (n == 0)
        return;
    j->qjobs = jobs;
    if (n_tok >= QUANT_PAR_MIN_TOK)
        coli__pool_run(pool, (int64_t)n, 1, quant_task, j);
    else
        quant_task(j, 0, (int64_t)n, 0);
}

/* Rows [r0, r1) of the product of w with x (quantized as q if w is). */
static void some_rows(const multi_job *j, const coli__mat *w, const qin *q, const float *x, int n_tok, float *y,
                      int r0, int r1, float *scr)
{
    if (coli__dtype_is_quant(w->dt))
        j->k->q->gemm(&w->q, r0, r1, n_tok, q->p, q->s, q->psum, y, (size_t)w->rows);
    else
        float_rows(j->k, w, x, n_tok, y, r0, r1, scr);
}

static void multi_task(void *arg, int64_t b, int64_t e, int thread)
{
    multi_job *j = arg;
    for (int64_t c = b; c < e; c++) {
        const chunk *ch = &j->chunks[c];
        const coli__mm *m = &j->tasks[ch->task];
        float *scr = j->scratch ? j->scratch + (size_t)thread * FLOAT_RB * (size_t)j->max_cols : NULL;
        some_rows(j, m->w, &j->qa[ch->task], m->x, m->n_tok, m->y, ch->r0, ch->r1, scr);
        if (!m->up)
            continue;
        some_rows(j, m->up, &j->qa[ch->task], m->x, m->n_tok, m->y_up, ch->r0, ch->r1, scr);
        for (int t = 0; t < m->n_tok; t++) { /* SwiGLU of the rows just made, in cache */
            size_t o = (size_t)t * (size_t)m->w->rows + (size_t)ch->r0;
            j->k->swiglu(m->y + o, m->y_up + o, ch->r1 - ch->r0);
        }
    }
}

/* Chunks are "guided": each takes a share of the work still left (a
 * quarter of a thread's share, at least 32 KiB of weights), cut at its
 * matrix's end, and a multiple of 16 rows (64 bytes of f32 output) so that
 * threads never write the same cache line. Large chunks early keep the
 * threads streaming (each chunk starts with cold misses), small ones at
 * the end keep them finishing together. */
#define CHUNK_MIN_BYTES 32768

static int chunk_rows(uint64_t row_bytes, int rows, uint64_t left, int threads)
{
    uint64_t want = left / (4 * (uint64_t)threads);
    if (want < CHUNK_MIN_BYTES)
        want = CHUNK_MIN_BYTES;
    uint64_t g = want / (row_bytes ? row_bytes : 1);
    g = (g + 15) / 16 * 16;
    return g < (uint64_t)rows ? (int)g : rows;
}

/* Bytes of one token's quantized activations of cols values. */
static size_t qrow_bytes(int cols)
{
    return (size_t)(cols / COLI_QK) * (sizeof(float) + sizeof(int32_t)) + (size_t)cols;
}

/* Lays out n_tok tokens' quantized activations at *qp. */
static void qin_place(qin *q, char **qp, int n_tok, int cols)
{
    const size_t ns = (size_t)n_tok * (size_t)(cols / COLI_QK);
    q->s = (float *)(void *)*qp;
    q->psum = (int32_t *)(void *)(*qp + ns * sizeof(float));
    q->p = (int8_t *)(*qp + ns * (sizeof(float) + sizeof(int32_t)));
    q->cols = cols;
    *qp += (size_t)n_tok * qrow_bytes(cols);
}

/* Picked inputs a hand-out takes at most (the layer input of the routed
 * experts is one). */
#define COLI__MM_PICKED 4

/* The picked inputs of a hand-out: each distinct (x, cols) of the tasks
 * with x_rows, and the rows of x they take (the largest row + 1). */
typedef struct picked {
    const float *x;
    int cols, rows;
} picked;

static int picked_of(const picked *pk, int n, const coli__mm *m)
{
    for (int i = 0; i < n; i++)
        if (pk[i].x == m->x && pk[i].cols == m->w->cols)
            return i;
    return -1;
}

coli_status coli__matmul_multi(const coli__cpuk *ks, coli__pool *pool, const coli__mm *tasks, int n_tasks)
{
    const int threads = coli__pool_size(pool);
    size_t n_chunks = 0, n_qjobs = 0, n_copy = 0, qbytes = 0;
    uint64_t total = 0;
    int max_cols = 0, need_scratch = 0, n_quant = 0, n_copied = 0, n_pk = 0;
    picked pk[COLI__MM_PICKED];
    /* the picked inputs first: a plain task on the same input then takes
     * its first rows from them, quantized once for both */
    for (int t = 0; t < n_tasks; t++) {
        const coli__mm *m = &tasks[t];
        if (!m->x_rows || m->n_tok <= 0 || m->w->rows <= 0)
            continue;
        if (!coli__dtype_is_quant(m->w->dt) || (m->up && !coli__dtype_is_quant(m->up->dt)))
            return COLI_EINVAL; /* picked rows are for quantized products only */
        int i = picked_of(pk, n_pk, m);
        if (i < 0) {
            if (n_pk == COLI__MM_PICKED)
                return COLI_EINVAL;
            i = n_pk++;
            pk[i] = (picked){m->x, m->w->cols, 0};
        }
        for (int k = 0; k < m->n_tok; k++)
            if (m->x_rows[k] / m->x_div + 1 > pk[i].rows)
                pk[i].rows = m->x_rows[k] / m->x_div + 1;
    }
    for (int t = 0; t < n_tasks; t++) {
        const coli__mm *m = &tasks[t];
        const coli__mat *w = m->w;
        if (m->n_tok <= 0 || w->rows <= 0)
            continue;
        n_chunks += (size_t)((w->rows + 15) / 16); /* at most */
        total += coli__mm_bytes(m);
        const int i = needs_q(m) ? picked_of(pk, n_pk, m) : -1;
        if (i >= 0 && !m->x_rows) {
            pk[i].rows = m->n_tok > pk[i].rows ? m->n_tok : pk[i].rows; /* its rows 0 .. n_tok - 1 */
        } else if (needs_q(m)) {
            size_t nj = (size_t)(m->n_tok + QUANT_JOB_TOK - 1) / QUANT_JOB_TOK;
            n_qjobs += nj;
            n_copy += m->x_rows ? nj : 0;
            qbytes += (size_t)m->n_tok * qrow_bytes(w->cols);
        }
        if (m->n_tok > FEW_TOK && (widens(w) || (m->up && widens(m->up))))
            need_scratch = 1;
        max_cols = w->cols > max_cols ? w->cols : max_cols;
    }
    if (n_chunks == 0)
        return COLI_OK;
    for (int i = 0; i < n_pk; i++) {
        n_qjobs += (size_t)(pk[i].rows + QUANT_JOB_TOK - 1) / QUANT_JOB_TOK;
        qbytes += (size_t)pk[i].rows * qrow_bytes(pk[i].cols);
    }
    /* One allocation: chunk list, quantization jobs, activation
     * descriptors (the tasks', then the picked inputs'), then scales and
     * sums (4-byte aligned) before the int8 quants, then scratch. */
    size_t off_qj = (n_chunks * sizeof(chunk) + 15) & ~(size_t)15;
    size_t off_qa = (off_qj + n_qjobs * sizeof(chunk) + 15) & ~(size_t)15;
    size_t off_q = off_qa + (size_t)(n_tasks + n_pk) * sizeof(qin);
    off_q = (off_q + 63) & ~(size_t)63;
    size_t off_scr = (off_q + qbytes + 63) & ~(size_t)63;
    size_t scr = need_scratch ? (size_t)threads * FLOAT_RB * (size_t)max_cols * sizeof(float) : 0;
    char *mem = malloc(off_scr + scr);
    if (!mem)
        return COLI_ENOMEM;
    /* quantization jobs [0, nq), then the copies out of the picked
     * inputs [n_qjobs - n_copy, n_qjobs), in a second hand-out */
    chunk *chunks = (chunk *)mem, *qjobs = (chunk *)(mem + off_qj), *copies = qjobs + (n_qjobs - n_copy);
    size_t nq = 0, ncp = 0;
    qin *qa = (qin *)(mem + off_qa);
    char *qp = mem + off_q;
    /* the picked inputs' rows first: each quantized once, in the first
     * hand-out; the copies out of them come after it */
    for (int i = 0; i < n_pk; i++) {
        qin *q = &qa[n_tasks + i];
        *q = (qin){.x = pk[i].x};
        qin_place(q, &qp, pk[i].rows, pk[i].cols);
        for (int k = 0; k < pk[i].rows; k += QUANT_JOB_TOK)
            qjobs[nq++] = (chunk){n_tasks + i, k, pk[i].rows - k < QUANT_JOB_TOK ? pk[i].rows : k + QUANT_JOB_TOK};
        n_quant += pk[i].rows;
    }
    size_t c = 0;
    for (int t = 0; t < n_tasks; t++) {
        const coli__mm *m = &tasks[t];
        const coli__mat *w = m->w;
        if (m->n_tok <= 0 || w->rows <= 0)
            continue;
        int shared = 0;
        const int i = needs_q(m) && !m->x_rows ? picked_of(pk, n_pk, m) : -1;
        if (i >= 0) {
            qa[t] = qa[n_tasks + i]; /* the first rows of a picked input */
            shared = 1;
        }
        for (int u = 0; u < t && !shared && needs_q(m) && !m->x_rows; u++)
            if (needs_q(&tasks[u]) && !tasks[u].x_rows && tasks[u].x == m->x && tasks[u].n_tok == m->n_tok &&
                tasks[u].w->cols == w->cols) {
                qa[t] = qa[u]; /* same input (q/k/v, gate/up): quantized once */
                shared = 1;
                break;
            }
        if (needs_q(m) && !shared) {
            /* each token's activations are quantized once (docs/formats.md) */
            qa[t] = (qin){.x = m->x};
            qin_place(&qa[t], &qp, m->n_tok, w->cols);
            chunk *to = qjobs;
            size_t *n = &nq;
            if (m->x_rows) {
                qa[t].from = &qa[n_tasks + picked_of(pk, n_pk, m)];
                qa[t].rows = m->x_rows;
                qa[t].div = m->x_div;
                to = copies;
                n = &ncp;
                n_copied += m->n_tok;
            } else {
                n_quant += m->n_tok;
            }
            for (int k = 0; k < m->n_tok; k += QUANT_JOB_TOK)
                to[(*n)++] = (chunk){t, k, m->n_tok - k < QUANT_JOB_TOK ? m->n_tok : k + QUANT_JOB_TOK};
        }
        uint64_t row_bytes = coli__mm_bytes(m) / (uint64_t)w->rows;
        for (int r = 0; r < w->rows;) {
            int g = chunk_rows(row_bytes, w->rows, total, threads);
            int e = w->rows - r < g ? w->rows : r + g;
            chunks[c++] = (chunk){t, r, e};
            total -= row_bytes * (uint64_t)(e - r);
            r = e;
        }
    }
    multi_job j = {tasks, qa, chunks, or_best(ks), need_scratch ? (float *)(mem + off_scr) : NULL,
                   max_cols, qjobs};
    /* each token's activations are quantized once (docs/formats.md); the
     * picked inputs before the copies out of them */
    quant_jobs(pool, &j, qjobs, nq, n_quant);
    quant_jobs(pool, &j, copies, ncp, n_copied);
    coli__pool_run(pool, (int64_t)c, 1, multi_task, &j);
    free(mem);
    return COLI_OK;
}

void coli__matmul_hint(coli__pool *pool, const coli__mat *const *w, int n, uint64_t max_bytes)
{
    const void *base[COLI__POOL_HINTS];
    size_t len[COLI__POOL_HINTS];
    int k = 0;
    for (int i = 0; i < n && k < COLI__POOL_HINTS; i++) {
        if (!w[i])
            continue;
        uint64_t b = coli__mat_bytes(w[i]);
        base[k] = coli__mat_base(w[i]);
        len[k++] = (size_t)(max_bytes && b > max_bytes ? max_bytes : b);
    }
    coli__pool_hint(pool, base, len, k);
}

coli_status coli__matmul(const coli__cpuk *k, coli__pool *pool, const coli__mat *w, const float *x, int n_tok,
                         float *y)
{
    coli__mm m = {.w = w, .x = x, .n_tok = n_tok, .y = y};
    return coli__matmul_multi(k, pool, &m, 1);
}
