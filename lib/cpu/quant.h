/* quant.h - the quantized formats q8, q4, q2 and their integer-dot kernels
 * (internal). docs/formats.md is the contract: byte layout, quantization
 * rounding, activation quantization, and the exact order of the arithmetic
 * of a product. Every kernel table below must give bit-identical results.
 *
 * The files call downward only, bottom first: qlayout.c (sizes, layouts),
 * quant.c (the definition and the scalar table), quant_x86.c (the SIMD
 * tables); lib/cpu/kernels.c above them picks a table. */
#ifndef COLI_QUANT_H
#define COLI_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/dtype.h"

#define COLI_QK 32 /* activation group, and q8/q2 weight group */

/* A quantized matrix [rows, cols] as laid out in docs/formats.md. */
typedef struct coli__qmat {
    coli__dtype type;      /* COLI_DT_Q8, COLI_DT_Q4 or COLI_DT_Q2 */
    int group;             /* weight group size: 32 (q4 also 64 or 128) */
    int rows, cols;
    const uint8_t *qs;     /* quants, rows * row_bytes */
    const uint16_t *d;     /* fp16 scales, rows * (cols / group) */
    const uint16_t *m;     /* fp16 minimums (q2 only), rows * (cols / 32) */
    int layout;            /* COLI__QL_ROWS, or COLI__QL_X16: all bytes at qs, d and m NULL */
} coli__qmat;

/* Layouts of the same values (docs/formats.md, "The x16 layout"). */
enum { COLI__QL_ROWS = 0, COLI__QL_X16 = 1 };

/* The group of the scales d: q4's group, else 32. */
static inline int coli__q_scale_group(coli__dtype type, int group)
{
    return type == COLI_DT_Q4 ? group : COLI_QK;
}

/* ---- sizes and layouts (lib/cpu/qlayout.c, the bottom) ---- */

/* Bytes of quants per row. */
size_t coli__q_row_bytes(coli__dtype type, int cols);
/* Total bytes of qs + d + m for a matrix. */
size_t coli__q_matrix_bytes(coli__dtype type, int group, int rows, int cols);

/* Whether a matrix of this type and row count can take the x16 layout
 * (q8 and q4, rows a multiple of 16). */
int coli__q_x16_fits(coli__dtype type, int rows);
/* Bytes of one x16 block (16 rows): 16 times a row's quants and scales. */
size_t coli__q_x16_block_bytes(coli__dtype type, int group, int cols);
/* Writes rows [0, n) of the row-layout matrix src (n a multiple of 16) as
 * n / 16 x16 blocks at dst. */
void coli__q_x16_pack(const coli__qmat *src, int n, uint8_t *dst);
/* The row-layout bytes of 32-column group g of row r of the x16 matrix w:
 * q[coli__q_row_bytes(type, 32)] and its scale *d. */
void coli__q_x16_group(const coli__qmat *w, int r, int g, uint8_t *q, uint16_t *d);

/* ---- the definition (lib/cpu/quant.c) ---- */

/* COLI_OK if type/group/cols make a valid quantized matrix; else COLI_EINVAL
 * with a message naming what is wrong (what names the tensor). */
coli_status coli__q_check(coli__dtype type, int group, int cols, const char *what, coli__err *err);

/* Quantizes n_rows rows of src (row stride cols floats) into the arrays of
 * w (w->qs, w->d, w->m point to writable memory for those rows, i.e. rows
 * [0, n_rows) of w are written; w->type, group, cols set). Returns the
 * first row holding a NaN or an infinity, whose quants mean nothing, or -1
 * if every value was finite. */
int coli__q_quantize_rows(const float *src, int n_rows, coli__qmat *w);
/* Writes the f32 values of row r of w into out[cols]. */
void coli__q_dequantize_row(const coli__qmat *w, int r, float *out);

/* f32 -> fp16 (round to nearest even); the way back is lib/cpu/fp16.h. */
uint16_t coli__f32_to_f16(float f);

/* Quantizes one activation row a[cols] (cols % 32 == 0): p[cols] int8,
 * s[cols/32] scales, psum[cols/32] group sums of p. */
void coli__q_quantize_act(const float *a, int cols, int8_t *p, float *s, int32_t *psum);

/*
 * y[t * y_stride + r] = row r of w times token t's activations, for rows
 * [r0, r1) and tokens [0, n_tok). Token t's activations are
 * p + t * cols, s + t * (cols/32), psum + t * (cols/32).
 */
typedef void (*coli__qgemm_fn)(const coli__qmat *w, int r0, int r1, int n_tok, const int8_t *p,
                               const float *s, const int32_t *psum, float *y, size_t y_stride);

typedef struct coli__qkernels {
    const char *name;          /* "scalar", "avx2", "avx512vnni" */
    coli__qgemm_fn gemm;       /* handles all three types */
} coli__qkernels;

/* The portable definition (quant.c). */
const coli__qkernels *coli__q_kernels_scalar(void);
/* SIMD tables (quant_x86.c), or NULL when this CPU (or this build) lacks
 * the instructions. They fall back on the scalar table, never the other way:
 * the choice among the tables is made above them (lib/cpu/kernels.h). */
const coli__qkernels *coli__q_kernels_avx2(void);
const coli__qkernels *coli__q_kernels_avx512(void);

/* The scalar definition of one product, for tests. */
float coli__q_dot_ref(const coli__qmat *w, int r, const int8_t *p, const float *s, const int32_t *psum);

#endif
