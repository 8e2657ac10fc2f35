/* weights.c - from mapped tensors to the matrices the forward pass reads.
 *
 * Names are the family's (lib/io/families.c), as the published checkpoints
 * have them (model.layers.N.self_attn.q_proj, mlp.experts.E.gate_proj,
 * Mixtral's block_sparse_moe.experts.E.w1/w2/w3).
 * Every shape is checked against config.json before anything is used. In
 * AUTO format matrices point into the mapping (no copy); F32 widens, BF16
 * narrows and Q8/Q4/Q2 quantize into owned memory (docs/formats.md says
 * which matrices keep their precision). Norm vectors are always f32.
 *
 * A NaN or an infinity in any weight refuses the model, naming the tensor
 * and the row. The check rides on the pass that already reads each value:
 * widening, narrowing and quantizing check the rows they produce (the
 * quantizer sees it for free); matrices kept as stored (AUTO, or a format
 * equal to the stored one, and the router and embedding of the quantized
 * formats) are scanned at memory speed, their only read at load. */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/fp16.h"
#include "store/container.h"
#include "model/finite.h"
#include "model/model.h"
#include "model/pieces.h"

/* One walk over the model's tensors serves three purposes: loading a
 * checkpoint (ts), loading a container (cont: matrices point into its
 * mapping, nothing is converted), and planning a conversion (plan: each
 * tensor is checked and reported, nothing is loaded). So the container
 * holds exactly the tensors, formats and order the loader would make. */
typedef struct loader {
    coli__weights *w;
    const coli__config *cfg;
    const coli__pieces *pieces; /* each loads its layer's tensors (lib/model/pieces.h) */
    const coli__tensor_set *ts;
    coli_weight_format fmt;
    int q4_group;
    coli__err *err;
    const coli__container *cont;
    coli__witem_fn plan;
    void *plan_user;
    int layer, expert, which; /* of the matrix being loaded; expert -1: dense */
    coli__pool *pool;         /* quantizing threads (NULL: the caller only) */
    float *rowbuf;            /* their widening scratch (quantize) */
    size_t rowbuf_cap;
    int x16;                  /* q8/q4 matrices that fit take the x16 layout */
    uint8_t *qbuf;            /* per thread: QROWS rows in the row layout (x16) */
    size_t qbuf_cap;
} loader;

#define QROWS 64

/* arr (capacity *cap elements of elem bytes) with room for n + 1, grown
 * by doubling from first: the array to use, or NULL when out of memory
 * (arr and *cap unchanged). */
static void *grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t c = *cap ? *cap * 2 : first;
    void *p = realloc(arr, c * elem);
    if (p)
        *cap = c;
    return p;
}

/* Weights of a page or more go in mapped regions advised for transparent
 * huge pages: REGION bytes shared by the smaller ones, or one region of
 * its own for one larger than a quarter of that. The kernels stream
 * hundreds of MiB per token, and 2 MiB pages spare them most TLB misses
 * (decode about 4% faster on Zen 4). */
#define REGION ((size_t)64 << 20)
#define REGION_MIN 4096

static void *region_new(coli__weights *w, size_t bytes)
{
    coli__block *r = grow(w->regions, &w->cap_regions, w->n_regions, sizeof *r, 16);
    if (!r)
        return NULL;
    w->regions = r;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(m, bytes, MADV_HUGEPAGE); /* advice: refused or ignored is fine */
#endif
    w->regions[w->n_regions++] = (coli__block){m, bytes};
    return m;
}

/* 64-byte aligned (whole cache lines for the SIMD kernels) memory that
 * lives as long as the weights, or until released (coli__weights_release_experts). */
static void *own(loader *L, size_t bytes)
{
    coli__weights *w = L->w;
    coli__block *o = grow(w->owned, &w->cap_owned, w->n_owned, sizeof *o, 256);
    if (!o)
        return NULL;
    w->owned = o;
    void *m = NULL;
    size_t size = (bytes + 63) & ~(size_t)63;
    if (bytes < REGION_MIN) {
        size = 0;
        if (posix_memalign(&m, 64, bytes ? bytes : 1) != 0)
            return NULL;
    } else if (size > REGION / 4) {
        if (!(m = region_new(w, size)))
            return NULL;
    } else {
        if (w->arena_left < size) {
            if (!(w->arena = region_new(w, REGION)))
                return NULL;
            w->arena_left = REGION;
        }
        m = w->arena;
        w->arena += size;
        w->arena_left -= size;
    }
    w->owned[w->n_owned++] = (coli__block){m, size};
    return m;
}

static coli_status record(loader *L, int rows, int cols, coli__mat_kind kind, int stored_size,
                          coli__mat_role role)
{
    coli__weights *w = L->w;
    coli__matrec *r = grow(w->recs, &w->cap_recs, w->n_recs, sizeof *r, 256);
    if (!r)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory");
    w->recs = r;
    w->recs[w->n_recs++] = (coli__matrec){rows, cols, (uint8_t)kind, (uint8_t)stored_size, (uint8_t)role};
    return COLI_OK;
}

/* The tensor called name, checked to be [d0] (d1 < 0) or [d0, d1]. */
static coli_status find(loader *L, const char *name, int64_t d0, int64_t d1, const coli__tensor **out)
{
    const coli__tensor *t = coli__st_find(L->ts, name);
    if (!t)
        return coli__fail(L->err, COLI_ENOENT, "tensor '%s' is missing from the checkpoint", name);
    int ndim = d1 >= 0 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1)) {
        char got[128] = "";
        size_t n = 0;
        for (int i = 0; i < t->ndim && n < sizeof got - 24; i++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (ndim == 2)
            return coli__fail(L->err, COLI_EFORMAT,
                              "%s: tensor '%s' has shape [%s], config.json implies [%lld, %lld]", t->file,
                              name, got, (long long)d0, (long long)d1);
        return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' has shape [%s], config.json implies [%lld]",
                          t->file, name, got, (long long)d0);
    }
    if (t->dtype == COLI_DT_OTHER)
        return coli__fail(L->err, COLI_EUNSUPPORTED,
                          "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported", t->file,
                          name, t->dtype_name);
    *out = t;
    return COLI_OK;
}

/* Value i of n stored values of type dt (F32, BF16 or F16). */
static float stored_at(coli__dtype dt, const void *p, size_t i)
{
    if (dt == COLI_DT_F32) {
        float f;
        memcpy(&f, (const float *)p + i, sizeof f);
        return f;
    }
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == COLI_DT_BF16 ? coli__bf16_to_f32(h) : coli__f16_to_f32(h);
}

/* The refusal of a NaN or infinity v at element i of tensor name (row-major
 * with cols columns; cols 0: a vector). */
static coli_status nonfinite(loader *L, const char *file, const char *name, int cols, size_t i, float v)
{
    const char *what = isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
    if (cols == 0)
        return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s': element %zu holds a non-finite value (%s)",
                          file, name, i, what);
    return coli__fail(L->err, COLI_EFORMAT,
                      "%s: tensor '%s': row %zu, column %zu holds a non-finite value (%s)", file, name,
                      i / (size_t)cols, i % (size_t)cols, what);
}

/* Refuses a NaN or infinity among the n values of type dt at p. */
static coli_status check_finite(loader *L, const char *file, const char *name, int cols, coli__dtype dt,
                                const void *p, size_t n)
{
    size_t i = coli__first_nonfinite(dt, p, n);
    return i == n ? COLI_OK : nonfinite(L, file, name, cols, i, stored_at(dt, p, i));
}

/* Tensor data is only as aligned as the file's offsets; a misaligned tensor
 * is copied so that kernels may load whole elements. */
static const void *aligned(loader *L, const coli__tensor *t)
{
    size_t a = coli__dtype_size(t->dtype);
    if (a == 0 || (uintptr_t)t->data % a == 0)
        return t->data;
    void *p = own(L, t->nbytes);
    if (p)
        memcpy(p, t->data, t->nbytes);
    return p;
}

/* The in-memory format of a matrix of this kind under the load format. */
coli__dtype coli__weights_target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols,
                                 int q4_group)
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

/* Quantization of one matrix, QROWS rows at a time, shared by the load's
 * threads: each block's bytes depend only on its rows, so the thread
 * count changes nothing but the time. */
typedef struct qjob {
    const coli__mat *m;
    const coli__qmat *w;
    float *rowbuf;        /* per thread: QROWS rows of cols floats */
    atomic_int bad;       /* first row holding a non-finite value, INT_MAX: none */
    uint8_t *qbuf;        /* x16: per thread, QROWS rows in the row layout; NULL: rows in place */
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
    float *buf = j->rowbuf + (size_t)thread * QROWS * (size_t)cols;
    for (int64_t blk = b; blk < e; blk++) {
        int r = (int)blk * QROWS, n = rows - r < QROWS ? rows - r : QROWS;
        for (int i = 0; i < n; i++)
            coli__mat_row(j->m, r + i, buf + (size_t)i * (size_t)cols);
        coli__qmat view = *w;
        view.rows = n;
        view.layout = COLI__QL_ROWS;
        if (j->qbuf) { /* quantized in the row layout, then regrouped into place */
            uint8_t *t = j->qbuf + (size_t)thread * QROWS * j->qrow;
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

static coli_status quantize(loader *L, coli__mat *m, const char *file, const char *name, coli__dtype q)
{
    const int rows = m->rows, cols = m->cols;
    int group = q == COLI_DT_Q4 ? L->q4_group : COLI_QK;
    size_t need = (size_t)coli__pool_size(L->pool) * QROWS * (size_t)cols;
    if (L->rowbuf_cap < need) {
        float *p = realloc(L->rowbuf, need * sizeof(float));
        if (!p)
            return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
        L->rowbuf = p;
        L->rowbuf_cap = need;
    }
    uint8_t *buf = own(L, coli__q_matrix_bytes(q, group, rows, cols));
    if (!buf)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
    coli__qmat *w = &m->q;
    *w = coli__mat_at(q, group, rows, cols, buf).q;
    qjob j = {m, w, L->rowbuf, INT_MAX, NULL, 0, 0};
    if (L->x16 && coli__q_x16_fits(q, rows)) {
        j.qrow = coli__q_row_bytes(q, cols) + (size_t)(cols / group) * sizeof(uint16_t);
        size_t qneed = (size_t)coli__pool_size(L->pool) * QROWS * j.qrow;
        if (L->qbuf_cap < qneed) {
            uint8_t *p = realloc(L->qbuf, qneed);
            if (!p)
                return coli__fail(L->err, COLI_ENOMEM, "out of memory quantizing tensor '%s'", name);
            L->qbuf = p;
            L->qbuf_cap = qneed;
        }
        j.qbuf = L->qbuf;
    }
    coli__pool_run(L->pool, (rows + QROWS - 1) / QROWS, 1, quantize_blocks, &j);
    int bad = atomic_load(&j.bad);
    if (bad != INT_MAX) {
        float *row = L->rowbuf; /* the threads are done with it */
        coli__mat_row(m, bad, row);
        size_t c = coli__first_nonfinite(COLI_DT_F32, row, (size_t)cols);
        return nonfinite(L, file, name, cols, (size_t)bad * (size_t)cols + c, row[c]);
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
static coli_status convert(loader *L, coli__mat *m, const char *file, const char *name, coli__dtype target)
{
    size_t n = (size_t)m->rows * (size_t)m->cols;
    const int rows = m->rows, cols = m->cols;
    if (target == m->dt)
        return check_finite(L, file, name, cols, m->dt, m->data, n);
    if (coli__dtype_is_quant(target))
        return quantize(L, m, file, name, target);
    if (target == COLI_DT_F32) {
        float *p = own(L, n * sizeof(float));
        if (!p)
            return coli__fail(L->err, COLI_ENOMEM, "out of memory widening tensor '%s'", name);
        for (int r = 0; r < rows; r++) {
            float *row = p + (size_t)r * (size_t)cols;
            coli__mat_row(m, r, row);
            size_t c = coli__first_nonfinite(COLI_DT_F32, row, (size_t)cols);
            if (c < (size_t)cols)
                return nonfinite(L, file, name, cols, (size_t)r * (size_t)cols + c, row[c]);
        }
        m->data = p;
        m->dt = COLI_DT_F32;
        return COLI_OK;
    }
    /* BF16 */
    uint16_t *p = own(L, n * sizeof(uint16_t));
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
                return nonfinite(L, file, name, cols, (size_t)r * (size_t)cols + c, v);
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

static void count(loader *L, const coli__mat *m, coli__mat_role role)
{
    coli__weights *w = L->w;
    int64_t n = (int64_t)m->rows * m->cols;
    w->bytes += coli__mat_bytes(m);
    w->n_params_total += n;
    if (role == COLI_ROLE_DENSE)
        w->n_params_active += n;
    else if (role == COLI_ROLE_EMBED)
        w->n_params_active += m->cols; /* one row per token */
    w->n_by_dt[m->dt]++;
}

/* A tensor of the container, checked against the shape config.json implies
 * and the dtype the walk expects; *out points into the mapping. */
static coli_status cont_mat(loader *L, coli__mat *m, const char *name, int rows, int cols, coli__mat_kind kind,
                            coli__mat_role role)
{
    const coli__container *c = L->cont;
    int dt, group, stored;
    uint64_t off;
    if (L->expert >= 0) {
        const coli__cont_mat *cm = &c->layouts[3 * L->layer + L->which];
        const coli__cont_record *r = coli__cont_record_of(c, L->layer, L->expert);
        if (!r || cm->rows != rows || cm->cols != cols)
            return coli__fail(L->err, COLI_EFORMAT, "%s: layer %d: experts are %d x %d, config.json implies %d x %d",
                              c->path, L->layer, cm->rows, cm->cols, rows, cols);
        dt = cm->dtype;
        group = cm->group;
        stored = cm->stored;
        off = r->offset + cm->offset;
    } else {
        const coli__cont_tensor *t = coli__cont_find(c, name);
        if (!t || t->is_vec)
            return coli__fail(L->err, COLI_ENOENT, "%s: tensor '%s' is missing from the container", c->path, name);
        if (t->rows != rows || t->cols != cols)
            return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' is %d x %d, config.json implies %d x %d", c->path,
                              name, t->rows, t->cols, rows, cols);
        dt = t->dtype;
        group = t->group;
        stored = t->stored;
        off = t->offset;
    }
    coli__dtype want = coli__weights_target(L->fmt, kind, (coli__dtype)stored, cols, L->q4_group);
    if (dt != (int)want)
        return coli__fail(L->err, COLI_EFORMAT, "%s: tensor '%s' has dtype %d where format %d implies %d", c->path,
                          name, dt, (int)L->fmt, (int)want);
    *m = coli__mat_at((coli__dtype)dt, group, rows, cols, c->map + off);
    COLI_TRY(record(L, rows, cols, kind, (int)coli__dtype_size((coli__dtype)stored), role));
    return COLI_OK;
}

static coli_status plan_item(loader *L, const char *name, const char *src, int rows, int cols, int is_vec,
                             coli__mat_kind kind, coli__mat_role role, coli__dtype stored, coli__dtype target)
{
    coli__witem it = {.name = name, .src = src, .rows = rows, .cols = cols, .is_vec = is_vec, .kind = kind,
                      .role = role, .stored = stored, .target = target, .layer = L->layer, .expert = L->expert,
                      .which = L->which};
    return L->plan(L->plan_user, &it, L->err);
}

static coli_status load_mat(loader *L, coli__mat *m, const char *name, int rows, int cols, coli__mat_kind kind,
                            coli__mat_role role)
{
    if (L->cont) {
        COLI_TRY(cont_mat(L, m, name, rows, cols, kind, role));
        count(L, m, role);
        return COLI_OK;
    }
    const coli__tensor *t = NULL;
    COLI_TRY(find(L, name, rows, cols, &t));
    if (L->plan) {
        coli__dtype target = coli__weights_target(L->fmt, kind, t->dtype, cols, L->q4_group);
        memset(m, 0, sizeof *m);
        m->rows = rows;
        m->cols = cols;
        m->dt = target;
        return plan_item(L, name, name, rows, cols, 0, kind, role, t->dtype, target);
    }
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->dt = t->dtype;
    m->data = aligned(L, t);
    if (!m->data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    COLI_TRY(record(L, rows, cols, kind, (int)coli__dtype_size(t->dtype), role));
    COLI_TRY(convert(L, m, t->file, name, coli__weights_target(L->fmt, kind, t->dtype, cols, L->q4_group)));
    count(L, m, role);
    return COLI_OK;
}

static coli_status load_vec_hf(loader *L, const coli__tensor *t, float **out, const char *name, int n);

static coli_status load_vec(loader *L, float **out, const char *name, int n)
{
    if (L->cont) {
        const coli__cont_tensor *ct = coli__cont_find(L->cont, name);
        if (!ct || !ct->is_vec || ct->cols != n)
            return coli__fail(L->err, ct ? COLI_EFORMAT : COLI_ENOENT,
                              "%s: vector '%s' of %d values is missing from the container", L->cont->path, name, n);
        *out = (float *)(uintptr_t)(L->cont->map + ct->offset);
    } else {
        const coli__tensor *t = NULL;
        COLI_TRY(find(L, name, n, -1, &t));
        if (L->plan)
            COLI_TRY(plan_item(L, name, name, 1, n, 1, COLI_MAT_KEEP, COLI_ROLE_DENSE, t->dtype, COLI_DT_F32));
        else
            COLI_TRY(load_vec_hf(L, t, out, name, n));
    }
    L->w->bytes += (uint64_t)n * sizeof(float);
    L->w->n_params_total += n;
    L->w->n_params_active += n;
    L->w->n_vec_params += n;
    return COLI_OK;
}

static coli_status load_vec_hf(loader *L, const coli__tensor *t, float **out, const char *name, int n)
{
    float *p = own(L, (size_t)n * sizeof(float));
    if (!p)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory loading tensor '%s'", name);
    coli__mat m = {1, n, t->dtype, aligned(L, t), {0}};
    if (!m.data)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
    coli__mat_row(&m, 0, p);
    COLI_TRY(check_finite(L, t->file, name, 0, COLI_DT_F32, p, (size_t)n));
    *out = p;
    return COLI_OK;
}

#define BIG COLI_MAT_BIG
#define KEEP COLI_MAT_KEEP
#define DENSE COLI_ROLE_DENSE
#define EXPERT COLI_ROLE_EXPERT

/* Tensor t of layer l (expert e) as the model's family names it
 * (lib/io/families.c), in the caller's name[]. */
#define NAME(t, l, e) coli__tensor_name(c->family, (t), (l), (e), name, sizeof name)

/* The loader as the pieces see it (coli__piece_loader). */
static coli_status piece_mat(void *user, coli__mat *m, coli__tname t, int l, int rows, int cols, coli__mat_kind kind,
                             coli__mat_role role)
{
    loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    return load_mat(L, m, NAME(t, l, 0), rows, cols, kind, role);
}

static coli_status piece_vec(void *user, float **v, coli__tname t, int l, int n)
{
    loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    return load_vec(L, v, NAME(t, l, 0), n);
}

/* The routed experts of MoE layer l, expert by expert: gate, up, down. */
static coli_status piece_experts(void *user, int l, coli__layer *ly)
{
    loader *L = user;
    const coli__config *c = L->cfg;
    char name[256];
    const int H = c->hidden, E = c->n_experts, I = c->moe_inter;
    ly->e_gate = calloc((size_t)E * 3, sizeof(coli__mat));
    if (!ly->e_gate)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory for layer %d experts", l);
    ly->e_up = ly->e_gate + E;
    ly->e_down = ly->e_gate + 2 * E;
    L->layer = l;
    for (int e = 0; e < E; e++) {
        L->expert = e;
        L->which = 0;
        COLI_TRY(load_mat(L, &ly->e_gate[e], NAME(COLI_T_E_GATE, l, e), I, H, BIG, EXPERT));
        L->which = 1;
        COLI_TRY(load_mat(L, &ly->e_up[e], NAME(COLI_T_E_UP, l, e), I, H, BIG, EXPERT));
        L->which = 2;
        COLI_TRY(load_mat(L, &ly->e_down[e], NAME(COLI_T_E_DOWN, l, e), H, I, BIG, EXPERT));
    }
    L->expert = -1;
    /* top_k of the layer's experts run for each token */
    L->w->n_params_active += (int64_t)c->top_k * 3 * I * H;
    return COLI_OK;
}

/* A layer: its norms, then each piece's tensors, in the order they are
 * stored (a container keeps the loader's order). */
static coli_status load_layer(loader *L, int l)
{
    const coli__config *c = L->cfg;
    const coli__pieces *p = L->pieces;
    coli__layer *ly = &L->w->layers[l];
    char name[256];
    const coli__piece_loader pl = {.mat = piece_mat, .vec = piece_vec, .experts = piece_experts, .L = L};

    COLI_TRY(load_vec(L, &ly->attn_norm, NAME(COLI_T_ATTN_NORM, l, 0), c->hidden));
    COLI_TRY(load_vec(L, &ly->ffn_norm, NAME(COLI_T_FFN_NORM, l, 0), c->hidden));
    COLI_TRY(p->attn->load(&pl, c, l, ly));
    ly->is_moe = c->is_moe[l];
    if (!ly->is_moe)
        return p->mlp->load(&pl, c, l, ly);
    COLI_TRY(p->router->load(&pl, c, l, ly));
    return p->moe->load(&pl, c, l, ly);
}

static coli_status load_all(loader *L);

coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                               const coli__tensor_set *ts, coli_weight_format fmt, int q4_group, int threads, int x16,
                               coli__err *err)
{
    memset(w, 0, sizeof *w);
    loader L = {.w = w, .cfg = cfg, .pieces = pieces, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .layer = -1,
                .expert = -1, .x16 = x16};
    coli__err perr;
    if (threads != 1 && coli__pool_create(threads, &L.pool, &perr) != COLI_OK)
        L.pool = NULL; /* quantize on the caller's thread alone */
    coli_status st = load_all(&L);
    coli__pool_free(L.pool);
    free(L.rowbuf);
    free(L.qbuf);
    return st;
}

coli_status coli__weights_load_container(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                                         const coli__container *c, coli__err *err)
{
    memset(w, 0, sizeof *w);
    loader L = {.w = w, .cfg = cfg, .pieces = pieces, .fmt = (coli_weight_format)c->weights, .q4_group = c->q4_group, .err = err,
                .cont = c, .layer = -1, .expert = -1};
    /* a container may hold the MTP layer a model opened without it does not use */
    int extra = c->n_layers == cfg->n_layers + 1 && cfg->n_layers == cfg->n_trunk && cfg->n_mtp > 0;
    if (cfg->n_layers > cfg->n_trunk && c->n_layers == cfg->n_trunk)
        return coli__fail(err, COLI_EUNSUPPORTED, "%s: converted without the MTP layer; convert the checkpoint again",
                          c->path);
    if (c->n_layers != cfg->n_layers + extra || c->n_experts != (cfg->n_moe_layers ? cfg->n_experts : 0) ||
        c->n_moe != cfg->n_moe_layers + extra)
        return coli__fail(err, COLI_EFORMAT, "%s: %d layers, %d MoE layers of %d experts; config.json says %d, %d, %d",
                          c->path, c->n_layers, c->n_moe, c->n_experts, cfg->n_layers, cfg->n_moe_layers,
                          cfg->n_experts);
    return load_all(&L);
}

coli_status coli__weights_plan(const coli__config *cfg, const coli__pieces *pieces, const coli__tensor_set *ts,
                               coli_weight_format fmt, int q4_group, coli__witem_fn fn, void *user, coli__err *err)
{
    coli__weights w;
    memset(&w, 0, sizeof w);
    loader L = {.w = &w, .cfg = cfg, .pieces = pieces, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .plan = fn,
                .plan_user = user, .layer = -1, .expert = -1};
    coli_status st = load_all(&L);
    coli__weights_free(&w, cfg);
    return st;
}

coli_status coli__weights_convert_item(const coli__tensor_set *ts, coli_weight_format fmt, int q4_group,
                                       const coli__witem *it, coli__weights *scratch, coli__mat *out, coli__err *err)
{
    loader L = {.w = scratch, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .layer = -1, .expert = -1};
    coli_status st;
    if (it->is_vec) {
        const coli__tensor *t = NULL;
        float *v = NULL;
        st = find(&L, it->src, it->cols, -1, &t);
        if (st == COLI_OK)
            st = load_vec_hf(&L, t, &v, it->src, it->cols);
        if (st == COLI_OK)
            *out = (coli__mat){1, it->cols, COLI_DT_F32, v, {0}};
    } else if (it->role == COLI_ROLE_TIED_OUT) {
        const coli__tensor *t = NULL;
        st = find(&L, it->src, it->rows, it->cols, &t);
        if (st == COLI_OK) {
            *out = (coli__mat){it->rows, it->cols, t->dtype, aligned(&L, t), {0}};
            st = out->data ? convert(&L, out, t->file, "lm_head.weight (tied)", it->target)
                           : coli__fail(err, COLI_ENOMEM, "out of memory copying tensor '%s'", it->src);
        }
    } else {
        st = load_mat(&L, out, it->src, it->rows, it->cols, it->kind, it->role);
    }
    free(L.rowbuf);
    return st;
}

/* The output projection, after the layers. */
static coli_status load_output(loader *L)
{
    coli__weights *w = L->w;
    const coli__config *cfg = L->cfg;
    const int H = cfg->hidden, V = cfg->vocab;
    /* the family's names of the model's own tensors (lib/io/families.c) */
    const char *const embed = cfg->family->names->name[COLI_T_EMBED];
    const char *const out = cfg->family->names->name[COLI_T_LM_HEAD];
    char tied[256];
    snprintf(tied, sizeof tied, "%s (tied)", out);
    if (L->cont) {
        const coli__cont_tensor *t = coli__cont_find(L->cont, out);
        if (cfg->tie_embeddings && (!t || t->role == COLI_ROLE_TIED_OUT)) {
            w->lm_head = w->embed;
            w->n_params_active += (int64_t)V * H - H;
            if (!t)
                return record(L, V, H, COLI_MAT_OUT, 0, COLI_ROLE_TIED_OUT);
            COLI_TRY(cont_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, COLI_ROLE_TIED_OUT));
            w->bytes += coli__mat_bytes(&w->lm_head);
            w->n_by_dt[w->lm_head.dt]++;
            return COLI_OK;
        }
        return load_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, DENSE);
    }
    if (cfg->tie_embeddings && !coli__st_find(L->ts, out)) {
        /* The output layer reads the whole embedding matrix; quantized
         * formats get their own q8 copy of it for speed. */
        coli__dtype stored = w->embed.dt;
        coli__dtype target = coli__weights_target(L->fmt, COLI_MAT_OUT, stored, H, L->q4_group);
        COLI_TRY(record(L, V, H, COLI_MAT_OUT, 0, COLI_ROLE_TIED_OUT));
        w->lm_head = w->embed;
        w->n_params_active += (int64_t)V * H - H;
        if (L->plan)
            return target == stored ? COLI_OK
                                    : plan_item(L, out, embed, V, H, 0, COLI_MAT_OUT, COLI_ROLE_TIED_OUT, stored,
                                                target);
        if (target != stored) {
            const char *file = coli__st_find(L->ts, embed)->file;
            COLI_TRY(convert(L, &w->lm_head, file, tied, target));
            w->bytes += coli__mat_bytes(&w->lm_head);
            w->n_by_dt[target]++;
        }
    } else {
        COLI_TRY(load_mat(L, &w->lm_head, out, V, H, COLI_MAT_OUT, DENSE));
    }
    return COLI_OK;
}

/* The MTP layer's copy of the model's matrix main (checkpoint name
 * main_name): its own when the checkpoint has one that differs, else the
 * model's, which DeepSeek documents as shared and GLM stores again. */
static coli_status mtp_copy(loader *L, coli__mat *m, const char *name, const coli__mat *main, const char *main_name,
                            coli__mat_kind kind, coli__mat_role role)
{
    if (L->cont) {
        if (!coli__cont_find(L->cont, name)) {
            *m = *main;
            return COLI_OK;
        }
        return load_mat(L, m, name, main->rows, main->cols, kind, role);
    }
    const coli__tensor *t = coli__st_find(L->ts, name), *o = coli__st_find(L->ts, main_name);
    if (!t || (o && o->dtype == t->dtype && o->ndim == t->ndim && o->nbytes == t->nbytes &&
               memcmp(o->data, t->data, t->nbytes) == 0)) {
        *m = *main;
        return COLI_OK;
    }
    return load_mat(L, m, name, main->rows, main->cols, kind, role);
}

/* The MTP layer's own tensors (its decoder layer is a layer like the
 * others): docs/formats.md, "Multi-token prediction". */
static coli_status load_mtp(loader *L)
{
    const coli__config *c = L->cfg;
    coli__weights *w = L->w;
    coli__mtp_weights *mt = &w->mtp;
    const int H = c->hidden, l = c->n_trunk;
    const char *const embed = c->family->names->name[COLI_T_EMBED];
    const char *const out = c->family->names->name[COLI_T_LM_HEAD];
    char name[256];
    L->layer = l;
    COLI_TRY(load_mat(L, &mt->eh_proj, NAME(COLI_T_MTP_EH_PROJ, l, 0), H, 2 * H, BIG, DENSE));
    COLI_TRY(load_vec(L, &mt->enorm, NAME(COLI_T_MTP_ENORM, l, 0), H));
    COLI_TRY(load_vec(L, &mt->hnorm, NAME(COLI_T_MTP_HNORM, l, 0), H));
    COLI_TRY(load_vec(L, &mt->head_norm, NAME(COLI_T_MTP_HEAD_NORM, l, 0), H));
    COLI_TRY(mtp_copy(L, &mt->embed, NAME(COLI_T_MTP_EMBED, l, 0), &w->embed, embed, KEEP, COLI_ROLE_EMBED));
    /* a tied output projection is the embedding, as the checkpoint names it */
    const char *head_src = c->tie_embeddings && !(L->ts && coli__st_find(L->ts, out)) ? embed : out;
    return mtp_copy(L, &mt->head, NAME(COLI_T_MTP_HEAD, l, 0), &w->lm_head, head_src, COLI_MAT_OUT, DENSE);
}

static coli_status load_all(loader *L)
{
    coli__weights *w = L->w;
    const coli__config *cfg = L->cfg;
    const int H = cfg->hidden, V = cfg->vocab;
    w->layers = calloc((size_t)cfg->n_layers, sizeof *w->layers);
    if (!w->layers)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory for %d layers", cfg->n_layers);
    COLI_TRY(load_mat(L, &w->embed, cfg->family->names->name[COLI_T_EMBED], V, H, KEEP, COLI_ROLE_EMBED));
    for (int l = 0; l < cfg->n_layers; l++)
        COLI_TRY(load_layer(L, l));
    COLI_TRY(load_vec(L, &w->final_norm, cfg->family->names->name[COLI_T_FINAL_NORM], H));
    COLI_TRY(load_output(L));
    if (cfg->n_layers > cfg->n_trunk)
        COLI_TRY(load_mtp(L));
    return COLI_OK;
}

void coli__weights_free(coli__weights *w, const coli__config *cfg)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_owned; i++)
        if (w->owned[i].size == 0)
            free(w->owned[i].p);
    free(w->owned);
    for (size_t i = 0; i < w->n_regions; i++)
        munmap(w->regions[i].p, w->regions[i].size);
    free(w->regions);
    free(w->recs);
    if (w->layers && cfg)
        for (int l = 0; l < cfg->n_layers; l++)
            free(w->layers[l].e_gate);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

/* Bytes of one recorded matrix in format fmt. */
static uint64_t rec_bytes(const coli__matrec *r, coli_weight_format fmt, int q4_group)
{
    coli__dtype stored = r->stored_size == 4 ? COLI_DT_F32 : COLI_DT_BF16;
    coli__dtype t = coli__weights_target(fmt, (coli__mat_kind)r->kind, stored, r->cols, q4_group);
    if (r->role == COLI_ROLE_TIED_OUT && (t == COLI_DT_F32 || t == COLI_DT_BF16 || fmt == COLI_WEIGHTS_AUTO))
        return 0; /* shares the embedding */
    coli__mat m = coli__mat_at(t, t == COLI_DT_Q4 ? q4_group : COLI_QK, r->rows, r->cols, NULL);
    return coli__mat_bytes(&m);
}

void coli__weights_bytes(const coli__weights *w, const coli__config *cfg, coli_weight_format fmt, int q4_group,
                         uint64_t *total, uint64_t *active)
{
    uint64_t t = 4 * (uint64_t)w->n_vec_params, a = t, experts = 0;
    for (size_t i = 0; i < w->n_recs; i++) {
        const coli__matrec *r = &w->recs[i];
        uint64_t b = rec_bytes(r, fmt, q4_group);
        t += b;
        switch (r->role) {
        case COLI_ROLE_DENSE:
            a += b;
            break;
        case COLI_ROLE_EMBED:
            a += b / (uint64_t)r->rows;
            break;
        case COLI_ROLE_TIED_OUT: {
            /* The output reads a whole matrix: its own q8 copy (b), or the
             * embedding itself (recs[0], loaded first), one row of which is
             * already counted under COLI_ROLE_EMBED. */
            uint64_t embed = rec_bytes(&w->recs[0], fmt, q4_group);
            a += b ? b : embed - embed / (uint64_t)r->rows;
            break;
        }
        case COLI_ROLE_EXPERT:
            experts += b;
            break;
        }
    }
    /* Experts are alike within a layer: top_k of n_experts run per token. */
    if (cfg->n_experts > 0)
        a += experts / (uint64_t)cfg->n_experts * (uint64_t)cfg->top_k;
    *total = t;
    *active = a;
}

/* ---- host copies of experts resident on a GPU (CUDA_RELEASE_HOST) ---- */

/* An allocation of w->owned by address: the key rides in the element, so
 * that the sort needs no shared state (qsort has no user pointer in C11)
 * and models open on several threads at once. */
typedef struct owned_key {
    uintptr_t at;
    size_t slot;
} owned_key;

static int by_address(const void *pa, const void *pb)
{
    const owned_key *a = pa, *b = pb;
    return (a->at > b->at) - (a->at < b->at);
}

/* When the loader allocated matrix *mat's host copy (1): sets its data (or
 * q.qs) to NULL and *slot to its entry of w->owned, for the caller to free
 * once done searching; 0 when it points into the checkpoint's mapping,
 * which costs no memory of its own. */
static int release_mat(const owned_key *keys, size_t n, coli__mat *mat, size_t *slot)
{
    const void *base = coli__mat_base(mat);
    if (!base)
        return 0;
    size_t lo = 0, hi = n;
    while (lo < hi) { /* binary search of base among the allocations */
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t a = keys[mid].at;
        if (a == (uintptr_t)base) {
            *slot = keys[mid].slot;
            if (coli__dtype_is_quant(mat->dt)) {
                mat->q.qs = NULL;
                mat->q.d = mat->q.m = NULL;
            } else {
                mat->data = NULL;
            }
            return 1;
        }
        if (a < (uintptr_t)base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Gives back allocation w->owned[slot] (its pages, when it lies in a
 * region) and sets the entry to NULL. */
static void free_owned(coli__weights *w, size_t slot)
{
    coli__block *b = &w->owned[slot];
    if (!b->p)
        return;
    if (b->size == 0) {
        free(b->p);
    } else {
        /* the whole pages inside it go back to the system */
        uintptr_t lo = ((uintptr_t)b->p + 4095) & ~(uintptr_t)4095;
        uintptr_t hi = ((uintptr_t)b->p + b->size) & ~(uintptr_t)4095;
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    b->p = NULL;
}

coli_status coli__weights_release_experts(coli__weights *w, const coli__config *cfg, const signed char *resident,
                                          unsigned char *host, uint64_t *freed, int *mapped)
{
    const int L = cfg->n_layers, E = cfg->n_experts;
    owned_key *keys = malloc((w->n_owned ? w->n_owned : 1) * sizeof *keys);
    size_t *slots = malloc(((size_t)L * (size_t)E * 3 + 1) * sizeof *slots), n_slots = 0;
    if (!keys || !slots) {
        free(keys);
        free(slots);
        return COLI_ENOMEM;
    }
    for (size_t i = 0; i < w->n_owned; i++)
        keys[i] = (owned_key){.at = (uintptr_t)w->owned[i].p, .slot = i};
    qsort(keys, w->n_owned, sizeof *keys, by_address);
    *freed = 0;
    *mapped = 0;
    for (int l = 0; l < L; l++)
        for (int e = 0; e < E; e++) {
            size_t i = (size_t)l * E + e;
            if (resident[i] < 0)
                continue;
            coli__layer *ly = &w->layers[l];
            coli__mat *mats[3] = {&ly->e_gate[e], &ly->e_up[e], &ly->e_down[e]};
            for (int k = 0; k < 3; k++) {
                uint64_t b = coli__mat_bytes(mats[k]);
                if (release_mat(keys, w->n_owned, mats[k], &slots[n_slots])) {
                    n_slots++;
                    *freed += b;
                    host[i] = 0;
                } else {
                    *mapped = 1;
                }
            }
        }
    /* freed only now: the search needs the allocations' addresses */
    for (size_t k = 0; k < n_slots; k++)
        free_owned(w, slots[k]);
    free(slots);
    free(keys);
    return COLI_OK;
}

coli_status coli__weights_reload_expert(coli__weights *w, const coli__config *cfg, const coli__tensor_set *ts,
                                        coli_weight_format fmt, int q4_group, int l, int e, coli__err *err)
{
    loader L = {.w = w, .cfg = cfg, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .layer = -1,
                .expert = -1};
    coli__layer *ly = &w->layers[l];
    coli__mat *mats[3] = {&ly->e_gate[e], &ly->e_up[e], &ly->e_down[e]};
    coli_status st = COLI_OK;
    for (int k = 0; k < 3 && st == COLI_OK; k++) {
        coli__mat *m = mats[k];
        if (coli__mat_base(m))
            continue;
        char name[256];
        const coli__tensor *t = NULL;
        st = find(&L, coli__tensor_name(cfg->family, (coli__tname)(COLI_T_E_GATE + k), l, e, name, sizeof name), m->rows,
                    m->cols, &t);
        if (st != COLI_OK)
            break;
        coli__mat fresh = {m->rows, m->cols, t->dtype, aligned(&L, t), {0}};
        if (!fresh.data) {
            st = coli__fail(err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
            break;
        }
        st = convert(&L, &fresh, t->file, name, m->dt);
        if (st == COLI_OK)
            *m = fresh;
    }
    free(L.rowbuf);
    return st;
}
