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
    const coli__cpuk scalar = {"scalar, float scalar", coli__q_kernels_scalar(), dot_f32_scalar, dot_bf16_scalar,
                               dot_f16_scalar, axpy_scalar, coli__attn_kernels_scalar(),
                               swiglu_scalar};
    g_sets[COLI__CPUK_SCALAR] = scalar;
    g_sets[COLI__CPUK_AUTO] = scalar;
#if COLI_X86
    unsigned f = coli__cpu_features();
    if ((f & coli__cpuk_needs(COLI__CPUK_AVX2)) == coli__cpuk_needs(COLI__CPUK_AVX2)) {
        coli__cpuk v = {"avx2, float avx2", coli__q_kernels_avx2(), dot_f32_avx2, dot_bf16_avx2, dot_f16_avx2,
                        axpy_avx2, coli__attn_kernels_avx2(), swiglu_avx2};
        if (v.q) {
            g_sets[COLI__CPUK_AVX2] = v;
            g_sets[COLI__CPUK_AUTO] = v;
        }
        /* no AVX-512 float path: the quantized table is the difference */
        v.name = "avx512vnni, float avx2";
        v.q = (f & coli__cpuk_needs(COLI__CPUK_AVX512)) == coli__cpuk_needs(COLI__CPUK_AVX512)
                  ? coli__q_kernels_avx512()
                  : NULL;
        if (v.q) {
            g_sets[COLI__CPUK_AVX512] = v;
            g_sets[COLI__CPUK_AUTO] = v;
        }
        /* AMX tiles for the products of many tokens, the rest as avx512 */
        v.name = "amx-int8, avx512vnni, float avx2";
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

float coli__dot_for_test(coli__dtype dt, const void *w, const float *x, int n, int simd)
{
    const coli__cpuk *k = coli__cpuk_get(simd ? COLI__CPUK_AUTO : COLI__CPUK_SCALAR);
    if (dt == COLI_DT_F32)
        return k->dot_f32(w, x, n);
    if (dt == COLI_DT_BF16)
        return k->dot_bf16(w, x, n);
    return k->dot_f16(w, x, n);
}

const char *coli__kernels_name(void)
{
    return or_best(NULL)->dot_f32 == dot_f32_scalar ? "scalar" : "avx2";
}

void coli__swiglu_rows(const coli__cpuk *k, float *g, const float *u, int n)
{
    or_best(k)->swiglu(g, u, n);
}

void coli__attn_scores(const coli__cpuk *k, const float *q, int g, int hd, const void *kr, coli__dtype dt,
                       size_t stride, int n, float scale, float *out, size_t ostride, float *mx)
{
    or_best(k)->attn->scores(q, g, hd, kr, dt, stride, n, scale, out, ostride, mx);
}

void coli__attn_softmax(const coli__cpuk *k, float *a, int n, float m)
{
    or_best(k)->attn->softmax(a, n, m);
}

void coli__attn_mix(const coli__cpuk *k, float *out, size_t ostride, int g, int dims, const float *w, size_t wstride,
                    const void *v, coli__dtype dt, size_t stride, int n)
{
    or_best(k)->attn->mix(out, ostride, g, dims, w, wstride, v, dt, stride, n);
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
 * of multi-token prediction (lib/model/speculate.c) is 2 to 9 tokens. */
#define FEW_TOK 8

/* Float formats, rows [b, e) of one product. */
static void float_rows(const coli__cpuk *k, const coli__mat *w, const float *x, int n_tok, float *y, int64_t b,
                       int64_t e, float *buf)
{
    int rows = w->rows, cols = w->cols;
    if (n_tok <= FEW_TOK || w->dt == COLI_DT_F32) {
        /* the row stays in L1 for the few tokens; the widening below pays
         * only for many (dot_bf16 is the dot_f32 of the widened row) */
        for (int64_t r = b; r < e; r++)
            for (int t = 0; t < n_tok; t++)
                y[(size_t)t * (size_t)rows + (size_t)r] = dot_row(k, w, (int)r, x + (size_t)t * (size_t)cols);
        return;
    }
    for (int64_t r = b; r < e; r++) {
        coli__mat_row(w, (int)r, buf); /* widened once for all tokens */
        for (int t = 0; t < n_tok; t++)
            y[(size_t)t * (size_t)rows + (size_t)r] = k->dot_f32(buf, x + (size_t)t * (size_t)cols, cols);
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
 * cols floats). */
typedef struct qin {
    int8_t *p;
    float *s;
    int32_t *psum;
    const float *x;
    int cols;
} qin;

typedef struct multi_job {
    const coli__mm *tasks;
    const qin *qa;
    const chunk *chunks;
    const coli__cpuk *k;
    float *scratch; /* per thread: max_cols floats */
    int max_cols;
    const chunk *qjobs; /* quantization: tokens [r0, r1) of a task's input */
} multi_job;

/* Tokens per quantization job, and the fewest for which the threads
 * share the quantization (below, a hand-out costs more than it saves). */
#define QUANT_JOB_TOK 8
#define QUANT_PAR_MIN_TOK 16

/* Quantizes the activations of quantization jobs [b, e): tokens
 * [k0, k1) of one task's input. */
static void quant_task(void *arg, int64_t b, int64_t e, int thread)
{
    (void)thread;
    const multi_job *j = arg;
    for (int64_t i = b; i < e; i++) {
        const chunk *qj = &j->qjobs[i];
        const qin *q = &j->qa[qj->task];
        const int ng = q->cols / COLI_QK;
        for (int k = qj->r0; k < qj->r1; k++)
            j->k->q->act(q->x + (size_t)k * q->cols, q->cols, q->p + (size_t)k * q->cols,
                         q->s + (size_t)k * ng, q->psum + (size_t)k * ng);
    }
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
        float *scr = j->scratch ? j->scratch + (size_t)thread * (size_t)j->max_cols : NULL;
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

coli_status coli__matmul_multi(const coli__cpuk *ks, coli__pool *pool, const coli__mm *tasks, int n_tasks)
{
    const int threads = coli__pool_size(pool);
    size_t n_chunks = 0, n_qjobs = 0, qbytes = 0;
    uint64_t total = 0;
    int max_cols = 0, need_scratch = 0, n_quant = 0;
    for (int t = 0; t < n_tasks; t++) {
        const coli__mat *w = tasks[t].w;
        if (tasks[t].n_tok <= 0 || w->rows <= 0)
            continue;
        n_chunks += (size_t)((w->rows + 15) / 16); /* at most */
        total += coli__mm_bytes(&tasks[t]);
        if (needs_q(&tasks[t])) {
            size_t ng = (size_t)w->cols / COLI_QK;
            n_qjobs += (size_t)(tasks[t].n_tok + QUANT_JOB_TOK - 1) / QUANT_JOB_TOK;
            qbytes += (size_t)tasks[t].n_tok * (ng * (sizeof(float) + sizeof(int32_t)) + (size_t)w->cols);
        }
        if (tasks[t].n_tok > FEW_TOK && (widens(w) || (tasks[t].up && widens(tasks[t].up))))
            need_scratch = 1;
        max_cols = w->cols > max_cols ? w->cols : max_cols;
    }
    if (n_chunks == 0)
        return COLI_OK;
    /* One allocation: chunk list, quantization jobs, per-task activation
     * descriptors, then scales and sums (4-byte aligned) before the int8
     * quants, then scratch. */
    size_t off_qj = (n_chunks * sizeof(chunk) + 15) & ~(size_t)15;
    size_t off_qa = (off_qj + n_qjobs * sizeof(chunk) + 15) & ~(size_t)15;
    size_t off_q = off_qa + (size_t)n_tasks * sizeof(qin);
    off_q = (off_q + 63) & ~(size_t)63;
    size_t off_scr = (off_q + qbytes + 63) & ~(size_t)63;
    size_t scr = need_scratch ? (size_t)threads * (size_t)max_cols * sizeof(float) : 0;
    char *mem = malloc(off_scr + scr);
    if (!mem)
        return COLI_ENOMEM;
    chunk *chunks = (chunk *)mem, *qjobs = (chunk *)(mem + off_qj);
    size_t nq = 0;
    qin *qa = (qin *)(mem + off_qa);
    char *qp = mem + off_q;
    size_t c = 0;
    for (int t = 0; t < n_tasks; t++) {
        const coli__mm *m = &tasks[t];
        const coli__mat *w = m->w;
        if (m->n_tok <= 0 || w->rows <= 0)
            continue;
        int shared = 0;
        for (int u = 0; u < t && needs_q(m); u++)
            if (needs_q(&tasks[u]) && tasks[u].x == m->x && tasks[u].n_tok == m->n_tok &&
                tasks[u].w->cols == w->cols) {
                qa[t] = qa[u]; /* same input (q/k/v, gate/up): quantized once */
                shared = 1;
                break;
            }
        if (needs_q(m) && !shared) {
            /* each token's activations are quantized once (docs/formats.md) */
            const int cols = w->cols, ng = cols / COLI_QK;
            size_t ns = (size_t)m->n_tok * (size_t)ng;
            qa[t].s = (float *)qp;
            qa[t].psum = (int32_t *)(qp + ns * sizeof(float));
            qa[t].p = (int8_t *)(qp + ns * (sizeof(float) + sizeof(int32_t)));
            qp += ns * (sizeof(float) + sizeof(int32_t)) + (size_t)m->n_tok * (size_t)cols;
            qa[t].x = m->x;
            qa[t].cols = cols;
            for (int k = 0; k < m->n_tok; k += QUANT_JOB_TOK)
                qjobs[nq++] = (chunk){t, k, m->n_tok - k < QUANT_JOB_TOK ? m->n_tok : k + QUANT_JOB_TOK};
            n_quant += m->n_tok;
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
    /* each token's activations are quantized once (docs/formats.md): by
     * the threads when there are enough tokens to pay for a hand-out */
    if (n_quant >= QUANT_PAR_MIN_TOK)
        coli__pool_run(pool, (int64_t)nq, 1, quant_task, &j);
    else
        quant_task(&j, 0, (int64_t)nq, 0);
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
    coli__mm m = {w, x, n_tok, y, NULL, NULL};
    return coli__matmul_multi(k, pool, &m, 1);
}
