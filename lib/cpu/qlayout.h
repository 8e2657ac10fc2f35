/* qlayout.h - a quantized matrix and where its bytes lie (internal): the
 * matrix type, the row layout's sizes and the x16 layout, defined by
 * lib/cpu/qlayout.c, the bottom of the quantized formats (quant.h above it
 * has the definition of the values and the products). */
#ifndef COLI_QLAYOUT_H
#define COLI_QLAYOUT_H

#include <stddef.h>
#include <stdint.h>

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
/* Where 32-column group g of the x16 block at blk lies: *rec is its
 * record (the 16 rows' fp16 scales first), *q the 16 * (32 or 16) bytes of
 * the group's quants. */
void coli__q_x16_locate(coli__dtype type, int group, const uint8_t *blk, int g, const uint8_t **rec,
                        const uint8_t **q);
/* The row-layout bytes of 32-column group g of row r of the x16 matrix w:
 * q[coli__q_row_bytes(type, 32)] and its scale *d. */
void coli__q_x16_group(const coli__qmat *w, int r, int g, uint8_t *q, uint16_t *d);

#endif
