/* wconvert.c - a matrix into the load's format: widened to f32, narrowed
 * to bf16 or quantized to q8, q4 or q2 (docs/formats.md), on the
 * loader's threads, its rows checked for non-finite values on the way
 * (loader.h). */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fp16.h"
#include "model/finite.h"
#include "model/loader.h"

static coli__dtype target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols, int q4_group);

/* The in-memory format of a matrix of this kind under the load format. An
 * FP8 checkpoint's matrices are computed with in no format of their own:
 * as stored means q8 (the large ones) or f32 (exact, the others). */
coli__dtype coli__weights_target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols,
                                 int q4_group)
{
    if (stored == COLI_DT_F8E4M3 && fmt == COLI_WEIGHTS_AUTO)
        fmt = kind == COLI_MAT_KEEP ? COLI_WEIGHTS_F32 : COLI_WEIGHTS_Q8;
    coli__dtype t = target(fmt, kind, stored, cols, q4_group);
    return t == COLI_DT_F8E4M3 ? COLI_DT_F32 : t;
}

static coli__dtype target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols, int q4_group)
{
    coli__dtype q = COLI_DT_OTHER;
    switch (fmt) {
    case COLI_WEIGHTS_F32:
        return COLI_DT_F32;
    case COLI_WEIGHTS_BF16:
        return COLI_DT_BF16;
    case COLI_WEIGHTS_Q8:
        q = COLI_DT_Q8;
        break;
    case COLI_WEIGHTS_Q4:
        q = COLI_DT_Q4;
        break;
    case COLI_WEIGHTS_Q2:
        q = COLI_DT_Q2;
        break;
    default:
        return stored;
    }
    if (kind == COLI_MAT_KEEP)
        return stored;
    if (kind == COLI_MAT_OUT)
        q = COLI_DT_Q8;
    if (coli__q_check(q, q == COLI_DT_Q4 ? q4_group : COLI_QK, cols, NULL, NULL) != COLI_OK)
        return stored; /* a width the format cannot take stays as it is */
    return q;
}

/* Quantization of one matrix, COLI__LD_QROWS rows at a time, shared by the load's
 * threads: each block's bytes depend only on its rows, so the thread
 * count changes nothing but the time. */
typedef struct qjob {
    const coli__mat *m;
    const coli__qmat *w;
    float *rowbuf;        /* per thread: COLI__LD_QROWS rows of cols floats */
    atomic_int bad;       /* first row holding a non-finite value, INT_MAX: none */
    uint8_t *qbuf;        /* x16: per thread, COLI__LD_QROWS rows in the row layout; NULL: rows in place */
    size_t qrow;          /* their bytes per row */
    atomic_int range;     /* a scale or minimum overflowed fp16 */
} qjob;

/* Whether any of n fp16 values is an infinity (or NaN): an overflowed scale. */
static int f16_overflow(const uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((h[i] & 0x7c00) == 0x7c00)
            return 1;
    return 0;
}

static void quantize_blocks(void *arg, int64_t b, int64_t e, int thread)
{
    qjob *j = arg;
    const int cols = j->m->cols, rows = j->m->rows;
    const coli__qmat *w = j->w;
    float *buf = j->rowbuf + (size_t)thread * COLI__LD_QROWS * (size_t)cols;
    for (int64_t blk = b; blk < e; blk++) {
        int r = (int)blk * COLI__LD_QROWS, n = rows - r < COLI__LD_QROWS ? rows - r : COLI__LD_QROWS;
        for (int i = 0; i < n; i++)
            coli__mat_row(j->m, r + i, buf + (size_t)i * (size_t)cols);
        coli__qmat view = *w;
        view.rows = n;
        view.layout = COLI__QL_ROWS;
        if (j->qbuf) { /* quantized in the row layout, then regrouped into place */
            uint8_t *t = j->qbuf + (size_t)thread * COLI__LD_QROWS * j->qrow;
            view.qs = t;
            view.d = (const uint16_t *)(const void *)(t + (size_t)n * coli__q_row_bytes(w->type, cols));
        } else {
            view.qs = w->qs + (size_t)r * coli__q_row_bytes(w->type, cols);
            view.d = w->d + (size_t)r * (size_t)(cols / w->group);
            view.m = w->m ? w->m + (size_t)r * (size_t)(cols / COLI_QK) : NULL;
        }
        int bad = coli__q_quantize_rows(buf, n, &view);
        /* scales that overflow fp16 (docs/formats.md) cannot be represented */
        if (f16_overflow(view.d, (size_t)n * (size_t)(cols / w->group)) ||
            (view.m && f16_overflow(view.m, (size_t)n * (size_t)(cols / COLI_QK))))
            atomic_store(&j->range, 1);
        if (j->qbuf) {
            uint8_t *dst = (uint8_t *)(uintptr_t)w->qs;
            coli__q_x16_pack(&view, n, dst + (size_t)(r / 16) * coli__q_x16_block_bytes(w->type, w->group, cols));
        }
        if (bad >= 0) {
            int row = r + bad, cur = atomic_load(&j->bad);
            while (row < cur && !atomic_compare_exchange_weak(&j->bad, &cur, row))
                ;
        }
    }
}

static coli_status quantize(coli__loader *L, coli__mat *m, const char *file, const char *name, coli__dtype q)
{
    const int rows = m->rows, cols = m->cols;
    int group = q == COLI_DT_Q4 ? L->q4_group : COLI_QK;
    size_t need = (size_t)coli__pool_size(L->pool) * COLI__LD_QROWS * (size_t)cols;
    if (L->rowbuf_cap < need) {
        float *p = realloc(L->rowbuf, need * sizeof(float));
        if (!p)
            return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
        L->rowbuf = p;
        L->rowbuf_cap = need;
    }
    uint8_t *buf = coli__ld_own(L, coli__q_matrix_bytes(q, group, rows, cols));
    if (!buf)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
    coli__qmat *w = &m->q;
    *w = coli__mat_at(q, group, rows, cols, buf).q;
    qjob j = {m, w, L->rowbuf, INT_MAX, NULL, 0, 0};
    if (L->x16 && coli__q_x16_fits(q, rows)) {
        j.qrow = coli__q_row_bytes(q, cols) + (size_t)(cols / group) * sizeof(uint16_t);
        size_t qneed = (size_t)coli__pool_size(L->pool) * COLI__LD_QROWS * j.qrow;
        if (L->qbuf_cap < qneed) {
            uint8_t *p = realloc(L->qbuf, qneed);
            if (!p)
                return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
            L->qbuf = p;
            L->qbuf_cap = qneed;
        }
        j.qbuf = L->qbuf;
    }
    coli__pool_run(L->pool, (rows + COLI__LD_QROWS - 1) / COLI__LD_QROWS, 1, quantize_blocks, &j);
    int bad = atomic_load(&j.bad);
    if (bad != INT_MAX) {
        float *row = L->rowbuf; /* the threads are done with it */
        coli__mat_row(m, bad, row);
        size_t c = coli__first_nonfinite(COLI_DT_F32, row, (size_t)cols);
        return coli__ld_nonfinite(L, file, name, cols, (size_t)bad * (size_t)cols + c, row[c]);
    }
    if (atomic_load(&j.range))
        return coli__fail(L->err, COLI_ERANGE,
                          "tensor '%s': values too large for the fp16 scales of %s; load it as bf16 or f32", name,
                          coli__dtype_name(q));
    if (j.qbuf) {
        w->layout = COLI__QL_X16;
        w->d = NULL;
    }
    m->dt = q;
    m->data = NULL;
    return COLI_OK;
}

/* Brings m (pointing at checkpoint data in file) into the target format,
 * refusing non-finite values on the way. */
coli_status coli__ld_convert(coli__loader *L, coli__mat *m, const char *file, const char *name, coli__dtype target)
{
    size_t n = (size_t)m->rows * (size_t)m->cols;
    const int rows = m->rows, cols = m->cols;
    if (target == m->dt)
        return coli__ld_check_finite(L, file, name, cols, m->dt, m->data, n);
    if (coli__dtype_is_quant(target))
        return quantize(L, m, file, name, target);
    if (target == COLI_DT_F32) {
        float *p = coli__ld_own(L, n * sizeof(float));
        if (!p)
            return coli__fail(L->err, COLI_ENOMEM, "out of memory widening tensor '%s'", name);
        for (int r = 0; r < rows; r++) {
            float *row = p + (size_t)r * (size_t)cols;
            coli__mat_row(m, r, row);
            size_t c = coli__first_nonfinite(COLI_DT_F32, row, (size_t)cols);
            if (c < (size_t)cols)
                return coli__ld_nonfinite(L, file, name, cols, (size_t)r * (size_t)cols + c, row[c]);
        }
        m->data = p;
        m->dt = COLI_DT_F32;
        return COLI_OK;
    }
    /* BF16 */
    uint16_t *p = coli__ld_own(L, n * sizeof(uint16_t));
    float *row = malloc((size_t)cols * sizeof(float));
    if (!p || !row) {
        free(row);
        return coli__fail(L->err, COLI_ENOMEM, "out of memory narrowing tensor '%s'", name);
    }
    for (int r = 0; r < rows; r++) {
        coli__mat_row(m, r, row);
        uint16_t *out = p + (size_t)r * (size_t)cols;
        for (int c = 0; c < cols; c++)
            out[c] = coli__f32_to_bf16_bits(row[c]);
        /* a non-finite bf16 comes from a non-finite value or a finite one
         * beyond bf16's range (3.39e38), which f32 can hold */
        size_t c = coli__first_nonfinite(COLI_DT_BF16, out, (size_t)cols);
        if (c < (size_t)cols) {
            float v = row[c];
            free(row);
            if (!isfinite(v))
                return coli__ld_nonfinite(L, file, name, cols, (size_t)r * (size_t)cols + c, v);
            return coli__fail(L->err, COLI_ERANGE,
                              "%s: tensor '%s': row %d, column %zu: %g is beyond the range of bf16; load it as f32",
                              file, name, r, c, (double)v);
        }
    }
    free(row);
    m->data = p;
    m->dt = COLI_DT_BF16;
    return COLI_OK;
}
