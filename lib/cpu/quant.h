/* quant.h - the quantized formats q8, q4, q2 and their integer-dot kernels
 * (internal). docs/formats.md is the contract: byte layout, quantization
 * rounding, activation quantization, and the exact order of the arithmetic
 * of a product. Every kernel table below must give bit-identical results.
 *
 * The files call downward only, bottom first: qlayout.c (sizes, layouts),
 * quant.c (the definition and the scalar table), quant_avx2.c, then
 * quant_avx512.c (the SIMD tables, sharing quant_x86.h; the AVX-512 set
 * calls the AVX2 direct kernel for q8), quant_amx.c (AMX tiles for many
 * tokens, the AVX-512 table for the rest); lib/cpu/kernels.c above them
 * picks a table. */
#ifndef COLI_QUANT_H
#define COLI_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/dtype.h"
#include "cpu/qlayout.h"

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

/* The activation quantization of coli__q_quantize_act, the same bits. */
typedef void (*coli__qact_fn)(const float *a, int cols, int8_t *p, float *s, int32_t *psum);

typedef struct coli__qkernels {
    const char *name;          /* "scalar", "avx2", "avx512vnni", "amx-int8" */
    coli__qgemm_fn gemm;       /* handles all three types */
    coli__qact_fn act;         /* quantizes the activations a product takes */
} coli__qkernels;

/* The portable definition (quant.c). */
const coli__qkernels *coli__q_kernels_scalar(void);
/* SIMD tables (quant_avx2.c, quant_avx512.c), or NULL when this CPU (or
 * this build) lacks the instructions. They fall back on the scalar table,
 * never the other way: the choice among the tables is made above them
 * (lib/cpu/kernels.h). */
const coli__qkernels *coli__q_kernels_avx2(void);
const coli__qkernels *coli__q_kernels_avx512(void);
/* The avx512 table's two tunings, the same products: one token's x16
 * product prefetching ahead (pf1 = 1) or leaving it to the hardware.
 * coli__q_kernels_avx512 picks by the CPU (coli__q_x16_pf1); tests check
 * both wherever the instructions are. NULL likewise. */
const coli__qkernels *coli__q_kernels_avx512_tuned(int pf1);
/* Whether one token's x16 product prefetches on a CPU with these
 * COLI_CPU_* bits: everywhere but on AMD before family 1Ah (Zen 4 and
 * older), where it was slower. */
int coli__q_x16_pf1(unsigned cpu_features);
/* AMX-INT8 (quant_amx.c) for 8 or more tokens of an x16 q8 or q4
 * matrix, the AVX-512 table for every other product; NULL without AMX. */
const coli__qkernels *coli__q_kernels_amx(void);

/* The scalar definition of one product, for tests. */
float coli__q_dot_ref(const coli__qmat *w, int r, const int8_t *p, const float *s, const int32_t *psum);

#endif
