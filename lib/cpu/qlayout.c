/* qlayout.c - where the bytes of a quantized matrix lie (internal): the
 * sizes of the row layout of docs/formats.md, and the x16 layout of q8 and
 * q4 matrices: the same quants and scales, regrouped so that one 64-byte
 * vector holds 4 weights of each of 16 rows. A CPU kernel then adds 16
 * rows' products at once with no horizontal sums, reading one sequential
 * stream. Only the CPU reads it; the tiers exchange the row layout.
 *
 * The bottom of the quantized formats: it calls nothing of quant.c,
 * quant_avx512.c or kernels.c, which all call it. */
#include <string.h>

#include "cpu/qlayout.h"

/* ---- the row layout ------------------------------------------------------- */

size_t coli__q_row_bytes(coli__dtype type, int cols)
{
    size_t c = (size_t)cols;
    switch (type) {
    case COLI_DT_Q8:
        return c;
    case COLI_DT_Q4:
        return c / 2;
    case COLI_DT_Q2:
        return c / 4;
    default:
        return 0;
    }
}

size_t coli__q_matrix_bytes(coli__dtype type, int group, int rows, int cols)
{
    size_t r = (size_t)rows, c = (size_t)cols;
    size_t n = r * coli__q_row_bytes(type, cols);
    n += r * (c / (size_t)coli__q_scale_group(type, group)) * sizeof(uint16_t);
    if (type == COLI_DT_Q2)
        n += r * (c / COLI_QK) * sizeof(uint16_t);
    return n;
}

/* ---- the x16 layout ------------------------------------------------------- */


int coli__q_x16_fits(coli__dtype type, int rows)
{
    return (type == COLI_DT_Q8 || type == COLI_DT_Q4) && rows > 0 && rows % 16 == 0;
}

/* Bytes of the quants of one 32-column group of one row. */
static size_t group_bytes(coli__dtype type)
{
    return type == COLI_DT_Q8 ? 32 : 16;
}

/* A record holds one scale per row (32 bytes), then the quants of the
 * scale's 32-column groups: G / 32 of them (q4), 1 (q8). */
static size_t record_bytes(coli__dtype type, int group)
{
    int per = type == COLI_DT_Q4 ? group / 32 : 1;
    return 32 + (size_t)per * 16 * group_bytes(type);
}

size_t coli__q_x16_block_bytes(coli__dtype type, int group, int cols)
{
    int G = type == COLI_DT_Q4 ? group : 32;
    return (size_t)(cols / G) * record_bytes(type, group);
}

void coli__q_x16_locate(coli__dtype type, int group, const uint8_t *blk, int g, const uint8_t **rec,
                        const uint8_t **q)
{
    int per = type == COLI_DT_Q4 ? group / 32 : 1;
    *rec = blk + (size_t)(g / per) * record_bytes(type, group);
    *q = *rec + 32 + (size_t)(g % per) * 16 * group_bytes(type);
}

/* Row layout q4: byte b of a group holds column b (low nibble) and b + 16.
 * x16 q4: 64-byte step k, dword i (row), byte j holds column 8k + j (low)
 * and 8k + 4 + j (high). x16 q8: step k (of 8), dword i, byte j is column
 * 4k + j. */
void coli__q_x16_pack(const coli__qmat *src, int n, uint8_t *dst)
{
    const int cols = src->cols, ng = cols / 32;
    const int G = src->type == COLI_DT_Q4 ? src->group : 32;
    const size_t rb = coli__q_row_bytes(src->type, cols), nd = (size_t)(cols / G);
    const size_t bb = coli__q_x16_block_bytes(src->type, src->group, cols);
    for (int b = 0; b < n / 16; b++) {
        uint8_t *blk = dst + (size_t)b * bb;
        for (int g = 0; g < ng; g++) {
            const uint8_t *rec, *q;
            coli__q_x16_locate(src->type, src->group, blk, g, &rec, &q);
            uint8_t *qo = (uint8_t *)(uintptr_t)q, *ro = (uint8_t *)(uintptr_t)rec;
            for (int i = 0; i < 16; i++) {
                int r = 16 * b + i;
                const uint8_t *qr = src->qs + (size_t)r * rb + (size_t)g * group_bytes(src->type);
                if (g % (G / 32) == 0)
                    memcpy(ro + 2 * i, src->d + (size_t)r * nd + (size_t)(g / (G / 32)), 2);
                if (src->type == COLI_DT_Q8) {
                    for (int c = 0; c < 32; c++)
                        qo[64 * (c / 4) + 4 * i + c % 4] = qr[c];
                } else {
                    uint8_t u[32]; /* the nibbles in column order */
                    for (int c = 0; c < 16; c++) {
                        u[c] = qr[c] & 15;
                        u[c + 16] = qr[c] >> 4;
                    }
                    for (int k = 0; k < 4; k++)
                        for (int j = 0; j < 4; j++)
                            qo[64 * k + 4 * i + j] = (uint8_t)(u[8 * k + j] | u[8 * k + 4 + j] << 4);
                }
            }
        }
    }
}

void coli__q_x16_group(const coli__qmat *w, int r, int g, uint8_t *q, uint16_t *d)
{
    const uint8_t *blk = w->qs + (size_t)(r / 16) * coli__q_x16_block_bytes(w->type, w->group, w->cols);
    const uint8_t *rec, *qs;
    const int i = r % 16;
    coli__q_x16_locate(w->type, w->group, blk, g, &rec, &qs);
    memcpy(d, rec + 2 * i, 2);
    if (w->type == COLI_DT_Q8) {
        for (int c = 0; c < 32; c++)
            q[c] = qs[64 * (c / 4) + 4 * i + c % 4];
        return;
    }
    for (int b = 0; b < 16; b++) {
        int lo = b, hi = b + 16; /* columns of the row-layout byte b */
        uint8_t xl = qs[64 * (lo / 8) + 4 * i + lo % 4], xh = qs[64 * (hi / 8) + 4 * i + hi % 4];
        int ul = (lo % 8) < 4 ? xl & 15 : xl >> 4, uh = (hi % 8) < 4 ? xh & 15 : xh >> 4;
        q[b] = (uint8_t)(ul | uh << 4);
    }
}
