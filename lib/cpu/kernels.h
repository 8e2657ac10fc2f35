/* kernels.h - dense compute kernels on float activations (internal).
 *
 * Weights are row-major [rows, cols] matrices kept in the dtype they were
 * loaded in; bf16 and f16 rows are widened to f32 as they are used. A kernel
 * set (scalar, AVX2+FMA, AVX-512 VNNI for quantized products, or AMX-INT8
 * tiles for their prefill) is picked
 * per model at open (COLI_OPT_CPU_KERNELS); every set gives the same bits.
 *
 * lib/cpu/ holds the CPU's arithmetic: the instruction-set probe, the
 * thread pool, the q8/q4/q2 formats and every kernel set. It may include
 * lib/base/ only; kernels.c is its top, the one file that picks a set. */
#ifndef COLI_KERNELS_H
#define COLI_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/quant.h"
#include "base/dtype.h"
#include "cpu/threadpool.h"

typedef struct coli__mat {
    int rows, cols;
    coli__dtype dt;   /* COLI_DT_F32, BF16, F16, or a quantized type */
    const void *data; /* float formats: the row-major values */
    coli__qmat q;     /* quantized formats: the arrays of docs/formats.md */
    /* COLI_DT_F8E4M3 (a checkpoint's, only ever widened: coli__mat_row):
     * the f32 scale of each block of brows x bcols values, row-major */
    const float *bscale;
    int brows, bcols;
} coli__mat;

/* A kernel set: a quantized table (lib/cpu/quant.h) and the float path. */
typedef struct coli__cpuk coli__cpuk;
enum { COLI__CPUK_AUTO = 0, COLI__CPUK_SCALAR = 1, COLI__CPUK_AVX2 = 2, COLI__CPUK_AVX512 = 3, COLI__CPUK_AMX = 4 };
/* The set COLI__CPUK_* (AUTO: the best this CPU has), or NULL when this CPU
 * or this build lacks it. The sets are made once and never change. */
const coli__cpuk *coli__cpuk_get(int which);
/* e.g. "avx512vnni, float avx512" (NULL: the best set). */
const char *coli__cpuk_name(const coli__cpuk *k);
/* Whether set k (NULL: the best) has kernels for the x16 layout of q8 and
 * q4 matrices (lib/cpu/qlayout.c), so that the loader should make it. */
int coli__cpuk_x16(const coli__cpuk *k);
/* The COLI_CPU_* bits (lib/cpu/cpu.h) set COLI__CPUK_* needs. */
unsigned coli__cpuk_needs(int which);

/* In every function below, a NULL kernel set means the best one. */

/* Bytes a product with w reads (the whole matrix), and where they start
 * (quants, scales and minimums of a quantized matrix are adjacent). */
uint64_t coli__mat_bytes(const coli__mat *w);
const void *coli__mat_base(const coli__mat *w);
/* Rows [r0, r0 + n) of w as a matrix of their own in *out (products with
 * it give the bits of those rows of w's): 1, or 0 when w's layout cannot
 * be cut there (the x16 layout, at other than whole blocks of 16 rows). */
int coli__mat_rows(const coli__mat *w, int r0, int n, coli__mat *out);
/* A rows x cols matrix of type dt whose bytes start at base (NULL: for its
 * size only): a float matrix's values, or the quantized arrays laid out
 * as docs/formats.md says (quants, scales, minimums, no gap; group is
 * the weight group, ignored for float types). */
coli__mat coli__mat_at(coli__dtype dt, int group, int rows, int cols, const void *base);

float coli__bf16_to_f32(uint16_t v);
float coli__f16_to_f32(uint16_t v);

/* Widens (or dequantizes) row r of w into out[cols]. */
void coli__mat_row(const coli__mat *w, int r, float *out);

/* y[t*rows + o] = sum_i w[o,i] * x[t*cols + i] for t < n_tok.
 * Every output element is computed by one thread in a fixed order, so the
 * result does not depend on the thread count. Returns COLI_ENOMEM only. */
coli_status coli__matmul(const coli__cpuk *k, coli__pool *pool, const coli__mat *w, const float *x, int n_tok,
                         float *y);

/* One product of a batch: y[t*w->rows + o] = w[o,:] . x[t*w->cols + :].
 * With up set (a matrix of w's shape, the up projection of a gated MLP
 * whose gate is w), y_up gets up's product the same way, and then y
 * becomes swiglu(y, y_up) (lib/cpu/silu.h) element by element, in the same
 * hand-out: the SwiGLU costs no serial pass. */
typedef struct coli__mm {
    const coli__mat *w;
    const float *x;
    int n_tok;
    float *y;
    const coli__mat *up; /* NULL: a plain product */
    float *y_up;
    /* NULL, or (quantized w and up only) token t's input is row
     * x_rows[t] / x_div of x: the routed experts' tokens picked from the
     * layer's input by their (token, expert) pairs, so that each row of x
     * is quantized once for all the products that take it */
    const int *x_rows;
    int x_div;
} coli__mm;

/* Weight bytes one product reads (w, and up when set). */
uint64_t coli__mm_bytes(const coli__mm *m);

/* Runs several independent products in one hand-out to the threads (the
 * q/k/v projections, or all routed experts of a layer), which saves a
 * thread wake-up per matrix. Same results as one coli__matmul each. */
coli_status coli__matmul_multi(const coli__cpuk *k, coli__pool *pool, const coli__mm *tasks, int n_tasks);

/* Tells the pool's idle workers to prefetch the first max_bytes (0: all)
 * of each of w[0..n) (NULL entries skipped; at most COLI__POOL_HINTS):
 * matrices the coming hand-outs read. Speed only. */
void coli__matmul_hint(coli__pool *pool, const coli__mat *const *w, int n, uint64_t max_bytes);

/* Vector helpers of the forward pass, the same bits in every set: the
 * written order of docs/formats.md ("The written order"). */
/* y_i = fma(a, x_i, y_i) */
void coli__axpy(const coli__cpuk *k, float *y, float a, const float *x, int n);
/* dot(a, b): the float product of docs/formats.md ("f32, bf16, f16") of
 * a[0..n) and b[0..n). */
float coli__dot_f32(const coli__cpuk *k, const float *a, const float *b, int n);
/* sum32(a_0 .. a_{n-1}): the float product's shape with additions (32
 * partial sums from +0 in increasing i, then its tree). One portable path:
 * the router's softmax uses it as it is. */
float coli__sum32(const float *a, int n);
/* The attention of the g query heads that share one KV head, over n of
 * its cached rows (docs/formats.md, "Attention of one head"; lib/cpu/attn.h
 * says more). Rows are kr + j * stride (in elements) of dt, COLI_DT_F32 or
 * COLI_DT_BF16, widened exactly. */
/* out[h * ostride + j] = dot(q_h, k_j) * scale for h < g, j < n_h, with
 * q_h = q + h * hd and n_h = nh[h] (nh NULL: n); mx[h] = the largest of
 * mx[h] and those scores. */
void coli__attn_scores(const coli__cpuk *k, const float *q, int g, int hd, const void *kr, coli__dtype dt,
                       size_t stride, int n, float scale, float *out, size_t ostride, float *mx, const int *nh);
/* In place: a_j = e(a_j - m) (the exp of lib/cpu/silu.h), Z = the sum32
 * of each tile of 256 of them added tile after tile, then a_j = e_j * (1 /
 * Z). */
void coli__attn_softmax(const coli__cpuk *k, float *a, int n, float m);
/* out[h * ostride + i], h < g, i < dims: for each tile of 256 positions,
 * eight partial sums O_{j mod 8} = fma(w_h[j], v_j,i, O_{j mod 8}) from +0
 * in increasing j, then ((O0+O4)+(O2+O6))+((O1+O5)+(O3+O7)); the tiles'
 * added in order. w_h = w + h * wstride; head h's j < n_h, as above. */
void coli__attn_mix(const coli__cpuk *k, float *out, size_t ostride, int g, int dims, const float *w, size_t wstride,
                    const void *v, coli__dtype dt, size_t stride, int n, const int *nh);

/* g_i = swiglu(g_i, u_i) (lib/cpu/silu.h) for i < n, the same bits in every
 * set. */
void coli__swiglu_rows(const coli__cpuk *k, float *g, const float *u, int n);

/* Tests: the float product of n values of w (F32, BF16 or F16) with x, by
 * set k's code (NULL: the best set); the same bits in every set. */
float coli__dot_for_test(const coli__cpuk *k, coli__dtype dt, const void *w, const float *x, int n);

/* Name of the best set's path for quantized formats ("avx512vnni", "avx2"
 * or "scalar"). */
const char *coli__qkernels_name(void);
/* The fastest quantized table (lib/cpu/quant.h) this CPU has, whatever
 * the float path: AVX-512 VNNI, AVX2, else scalar. Made here, above the
 * tables, which never choose among themselves. */
const coli__qkernels *coli__q_kernels_best(void);

#endif
