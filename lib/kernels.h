/* kernels.h - dense compute kernels on float activations (internal).
 *
 * Weights are row-major [rows, cols] matrices kept in the dtype they were
 * loaded in; bf16 and f16 rows are widened to f32 as they are used. A SIMD
 * path (AVX2+FMA) is picked at run time, with a portable scalar fallback. */
#ifndef COLI_KERNELS_H
#define COLI_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "dtype.h"
#include "threadpool.h"

typedef struct coli__mat {
    int rows, cols;
    coli__dtype dt;   /* COLI_DT_F32, BF16, F16, or a quantized type */
    const void *data; /* float formats: the row-major values */
    coli__qmat q;     /* quantized formats: the arrays of docs/formats.md */
} coli__mat;

/* Bytes a product with w reads (the whole matrix). */
uint64_t coli__mat_bytes(const coli__mat *w);

float coli__bf16_to_f32(uint16_t v);
float coli__f16_to_f32(uint16_t v);

/* Widens (or dequantizes) row r of w into out[cols]. */
void coli__mat_row(const coli__mat *w, int r, float *out);

/* y[t*rows + o] = sum_i w[o,i] * x[t*cols + i] for t < n_tok.
 * Every output element is computed by one thread in a fixed order, so the
 * result does not depend on the thread count. Returns COLI_ENOMEM only. */
coli_status coli__matmul(coli__pool *pool, const coli__mat *w, const float *x, int n_tok, float *y);

/* One product of a batch: y[t*w->rows + o] = w[o,:] . x[t*w->cols + :]. */
typedef struct coli__mm {
    const coli__mat *w;
    const float *x;
    int n_tok;
    float *y;
} coli__mm;

/* Runs several independent products in one hand-out to the threads (the
 * q/k/v projections, or all routed experts of a layer), which saves a
 * thread wake-up per matrix. Same results as one coli__matmul each. */
coli_status coli__matmul_multi(coli__pool *pool, const coli__mm *tasks, int n_tasks);

/* Vector helpers of the forward pass (AVX2 or scalar). */
/* y += a * x */
void coli__axpy(float *y, float a, const float *x, int n);
/* out[p] = (q . k_p) * scale for n rows k_p = k + p * stride of hd floats. */
void coli__attn_scores(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out);
/* out[0..hd) = sum_p w[p] * v_p, rows v_p = v + p * stride. */
void coli__attn_mix(float *out, const float *w, const float *v, size_t stride, int n, int hd);

/* Tests: the float product of n values of w (F32, BF16 or F16) with x, by
 * the scalar code (simd 0) or the path in use (simd 1); the same bits. */
float coli__dot_for_test(coli__dtype dt, const void *w, const float *x, int n, int simd);

/* Name of the SIMD path in use for float formats ("avx2" or "scalar") and
 * for quantized ones ("avx512vnni", "avx2" or "scalar"). */
const char *coli__kernels_name(void);
const char *coli__qkernels_name(void);

#endif
