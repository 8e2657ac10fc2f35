/* test_gpu.c - the GPU tier (lib/gpu/backend.h) against hand-computed
 * values and against the CPU kernels, bit for bit in every format.
 *
 * Runs where a device exists; elsewhere (no GPU, or a build without the
 * tier) the whole program reports itself skipped (exit 77). Every output
 * buffer is poisoned with NaN bytes before a call, so a kernel that writes
 * nothing fails. */
#include <config.h>

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend.h"
#include "cpu/kernels.h"
#include "cpu/quant.h"
#include "cpu/silu.h"
#include "cpu/threadpool.h"
#include "testutil.h"

static const coli__gpu_ops *ops;
static coli__pool *pool;

/* ---- data ------------------------------------------------------------- */

static uint64_t rng = 1; /* testutil's generator, one stream */

static uint64_t next_u64(void)
{
    return tu_rng_u64(&rng);
}

static float next_normal(void)
{
    return (float)tu_rng_normal(&rng);
}

/* A matrix on the host in one format, with the CPU's view of it. */
typedef struct hmat {
    coli__mat m;
    void *vals;    /* f32 or bf16 values */
    uint8_t *qs;
    uint16_t *d, *mn;
} hmat;

static void hmat_free(hmat *h)
{
    free(h->vals);
    free(h->qs);
    free(h->d);
    free(h->mn);
    memset(h, 0, sizeof *h);
}

static int is_q(coli__dtype dt)
{
    return dt == COLI_DT_Q8 || dt == COLI_DT_Q4 || dt == COLI_DT_Q2;
}

/* Fills h from f32 values src [rows, cols]. */
static void hmat_from(hmat *h, coli__dtype dt, int group, int rows, int cols, const float *src)
{
    memset(h, 0, sizeof *h);
    h->m.rows = rows;
    h->m.cols = cols;
    h->m.dt = dt;
    size_t n = (size_t)rows * (size_t)cols;
    if (dt == COLI_DT_F32) {
        h->vals = malloc(n * 4);
        memcpy(h->vals, src, n * 4);
        h->m.data = h->vals;
    } else if (dt == COLI_DT_BF16) {
        uint16_t *b = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &src[i], 4);
            b[i] = (uint16_t)(u >> 16); /* truncation: any bf16 values will do */
        }
        h->vals = b;
        h->m.data = b;
    } else {
        int G = dt == COLI_DT_Q4 ? group : 32;
        h->qs = malloc(coli__q_row_bytes(dt, cols) * (size_t)rows);
        h->d = malloc(n / (size_t)G * 2);
        h->mn = dt == COLI_DT_Q2 ? malloc(n / 32 * 2) : NULL;
        coli__qmat q = {dt, G, rows, cols, h->qs, h->d, h->mn, COLI__QL_ROWS};
        coli__qmat wq = q;
        ck_assert_int_lt(coli__q_quantize_rows(src, rows, &wq), 0);
        h->m.q = q;
    }
}

static void hmat_random(hmat *h, coli__dtype dt, int group, int rows, int cols, float scale)
{
    size_t n = (size_t)rows * (size_t)cols;
    float *src = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        src[i] = next_normal() * scale;
    hmat_from(h, dt, group, rows, cols, src);
    free(src);
}

static coli__gpu_mat gview(const hmat *h)
{
    coli__gpu_mat g;
    memset(&g, 0, sizeof g);
    g.dt = h->m.dt;
    g.group = is_q(h->m.dt) ? h->m.q.group : 0;
    g.rows = h->m.rows;
    g.cols = h->m.cols;
    g.data = h->m.data;
    g.qs = h->m.q.qs;
    g.d = h->m.q.d;
    g.m = h->m.q.m;
    return g;
}

static float *random_acts(int S, int cols)
{
    float *x = malloc((size_t)S * (size_t)cols * 4);
    for (size_t i = 0; i < (size_t)S * (size_t)cols; i++)
        x[i] = next_normal();
    return x;
}

static float *poisoned(size_t n)
{
    float *y = malloc(n * 4);
    memset(y, 0xff, n * 4); /* NaN: a kernel that writes nothing fails */
    return y;
}

static void poison(float *y, size_t n)
{
    memset(y, 0xff, n * 4);
}

static coli__gpu *open_gpu(int64_t fail_after)
{
    coli__gpu *g = NULL;
    coli__err err = {{0}};
    int dev0 = 0;
    coli__gpu_params p = {&dev0, 1, fail_after};
    coli_status st = ops->init(&p, &g, &err);
    ck_assert_msg(st == COLI_OK, "init: %s", err.msg);
    return g;
}

static int upload(coli__gpu *g, const hmat *h)
{
    coli__err err = {{0}};
    coli__gpu_mat gm = gview(h);
    int handle = -1;
    coli_status st = ops->upload(g, 0, &gm, &handle, &err);
    ck_assert_msg(st == COLI_OK, "upload: %s", err.msg);
    ck_assert_int_ge(handle, 0);
    return handle;
}

/* Every format has one order of arithmetic (docs/formats.md): the device
 * must give the CPU's bits, for f32 and bf16 as for q8, q4 and q2. */
static void expect_same(const float *gpu, const float *cpu, size_t n, coli__dtype dt, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &gpu[i], 4);
        memcpy(&b, &cpu[i], 4);
        ck_assert_msg(a == b, "%s (format %d): element %zu: GPU %.9g (0x%08x), CPU %.9g (0x%08x)", what, (int)dt, i,
                      (double)gpu[i], a, (double)cpu[i], b);
    }
}

static const coli__dtype FORMATS[] = {COLI_DT_Q8, COLI_DT_Q4, COLI_DT_Q2, COLI_DT_BF16, COLI_DT_F32};
#define N_FORMATS 5

/* ---- hand-computed values --------------------------------------------- */

/* Activations whose group maximum is 127 quantize to themselves with scale
 * 1 (t = 127 / 127 = 1), and weights with scale 1 are their quants: every
 * product is then an exact integer computed here by hand. */
START_TEST(test_hand_values)
{
    const int rows = 3, cols = 64;
    float x[64];
    for (int i = 0; i < cols; i++)
        x[i] = (float)((i % 7) - 3); /* -3..3 */
    x[5] = 127.0f;                   /* group 0's maximum */
    x[40] = -127.0f;                 /* group 1's */
    coli__gpu *g = open_gpu(-1);
    coli__err err = {{0}};
    for (int f = 0; f < 3; f++) {
        coli__dtype dt = FORMATS[f];
        hmat h;
        memset(&h, 0, sizeof h);
        h.m.rows = rows;
        h.m.cols = cols;
        h.m.dt = dt;
        size_t rb = coli__q_row_bytes(dt, cols);
        h.qs = calloc(rb * rows, 1);
        h.d = malloc((size_t)rows * (cols / 32) * 2);
        h.mn = dt == COLI_DT_Q2 ? malloc((size_t)rows * (cols / 32) * 2) : NULL;
        double expect[3];
        for (int r = 0; r < rows; r++) {
            expect[r] = 0;
            for (int j = 0; j < cols / 32; j++) {
                h.d[r * (cols / 32) + j] = 0x3c00; /* fp16 1.0 */
                if (h.mn)
                    h.mn[r * (cols / 32) + j] = r == 2 ? 0xbc00 : 0; /* -1.0 on the last row */
            }
            for (int c = 0; c < cols; c++) {
                int q;
                if (dt == COLI_DT_Q8) {
                    q = ((c * 5 + r * 3) % 255) - 127; /* -127..127 */
                    h.qs[r * rb + c] = (uint8_t)(int8_t)q;
                } else if (dt == COLI_DT_Q4) {
                    q = ((c + r) % 16) - 8; /* -8..7 */
                    int blk = c / 32, within = c % 32;
                    uint8_t *b = &h.qs[r * rb + blk * 16 + within % 16];
                    *b |= (uint8_t)((q + 8) << (within < 16 ? 0 : 4));
                } else {
                    q = (c * 3 + r) % 4; /* 0..3 */
                    int blk = c / 32, within = c % 32;
                    h.qs[r * rb + blk * 8 + within % 8] |= (uint8_t)(q << (2 * (within / 8)));
                }
                double w = q + (dt == COLI_DT_Q2 && r == 2 ? -1.0 : 0.0);
                expect[r] += w * x[c];
            }
        }
        h.m.q = (coli__qmat){dt, 32, rows, cols, h.qs, h.d, h.mn, COLI__QL_ROWS};
        int hd = upload(g, &h);
        float y[3];
        poison(y, 3);
        ck_assert_msg(ops->matmul(g, hd, x, 1, y, &err) == COLI_OK, "%s", err.msg);
        for (int r = 0; r < rows; r++)
            ck_assert_msg(y[r] == (float)expect[r], "format %d row %d: %g, by hand %g", dt, r, (double)y[r],
                          expect[r]);
        ops->release(g, hd);
        hmat_free(&h);
    }
    /* float formats: small integers multiply and add exactly */
    for (int f = 3; f < N_FORMATS; f++) {
        float w[3 * 64];
        double expect[3] = {0, 0, 0};
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) {
                w[r * cols + c] = (float)(((c + 2 * r) % 5) - 2);
                expect[r] += (double)w[r * cols + c] * x[c];
            }
        hmat h;
        hmat_from(&h, FORMATS[f], 0, rows, cols, w);
        int hd = upload(g, &h);
        float y[3];
        poison(y, 3);
        ck_assert_msg(ops->matmul(g, hd, x, 1, y, &err) == COLI_OK, "%s", err.msg);
        for (int r = 0; r < rows; r++)
            ck_assert_msg(y[r] == (float)expect[r], "float format %d row %d: %g, by hand %g", FORMATS[f], r,
                          (double)y[r], expect[r]);
        ops->release(g, hd);
        hmat_free(&h);
    }
    ops->free(g);
}
END_TEST

/* ---- against the CPU kernels ------------------------------------------ */

static void matmul_case(coli__gpu *g, coli__dtype dt, int group, int rows, int cols, int S)
{
    hmat h;
    hmat_random(&h, dt, group, rows, cols, 0.05f);
    float *x = random_acts(S, cols);
    float *yc = poisoned((size_t)S * rows), *yg = poisoned((size_t)S * rows);
    ck_assert_int_eq(coli__matmul(NULL, pool, &h.m, x, S, yc), COLI_OK);
    int hd = upload(g, &h);
    coli__err err = {{0}};
    ck_assert_msg(ops->matmul(g, hd, x, S, yg, &err) == COLI_OK, "%s", err.msg);
    char what[96];
    snprintf(what, sizeof what, "format %d group %d [%d, %d] S=%d", dt, group, rows, cols, S);
    expect_same(yg, yc, (size_t)S * rows, dt, what);
    ops->release(g, hd);
    hmat_free(&h);
    free(x);
    free(yc);
    free(yg);
}

START_TEST(test_matmul_vs_cpu)
{
    coli__gpu *g = open_gpu(-1);
    static const int S_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 67};
    for (int f = 0; f < N_FORMATS; f++)
        for (size_t si = 0; si < sizeof S_list / sizeof S_list[0]; si++) {
            int rows = 1 + (int)(next_u64() % 300), cols = 32 * (1 + (int)(next_u64() % 24));
            matmul_case(g, FORMATS[f], 32, rows, cols, S_list[si]);
        }
    /* q4's other groups, and a shape of the benchmark model */
    matmul_case(g, COLI_DT_Q4, 64, 77, 256, 3);
    matmul_case(g, COLI_DT_Q4, 128, 130, 1024, 8);
    matmul_case(g, COLI_DT_Q8, 32, 512, 1024, 1);
    matmul_case(g, COLI_DT_Q2, 32, 1024, 512, 65);
    ops->free(g);
}
END_TEST

/* ---- the grouped expert call ------------------------------------------ */

/* The CPU's expert path (lib/tier/experts.c): gate, up, SwiGLU, down. */
static void cpu_expert(const hmat *gate, const hmat *up, const hmat *down, const float *x, int n, float *y)
{
    int I = gate->m.rows;
    float *a = malloc((size_t)n * I * 4), *b = malloc((size_t)n * I * 4);
    ck_assert_int_eq(coli__matmul(NULL, pool, &gate->m, x, n, a), COLI_OK);
    ck_assert_int_eq(coli__matmul(NULL, pool, &up->m, x, n, b), COLI_OK);
    for (size_t k = 0; k < (size_t)n * I; k++)
        a[k] = coli__swiglu(a[k], b[k]);
    ck_assert_int_eq(coli__matmul(NULL, pool, &down->m, a, n, y), COLI_OK);
    free(a);
    free(b);
}

static void experts_case(coli__gpu *g, coli__dtype dt, coli__dtype dt_down, int H, int I, int n_jobs, const int *rows)
{
    hmat *m = calloc((size_t)n_jobs * 3, sizeof *m);
    coli__gpu_expert *jobs = calloc((size_t)n_jobs, sizeof *jobs);
    int total = 0;
    for (int j = 0; j < n_jobs; j++) {
        hmat_random(&m[3 * j], dt, 32, I, H, 0.08f);
        hmat_random(&m[3 * j + 1], dt, 32, I, H, 0.08f);
        hmat_random(&m[3 * j + 2], dt_down, 32, H, I, 0.08f);
        jobs[j].gate = upload(g, &m[3 * j]);
        jobs[j].up = upload(g, &m[3 * j + 1]);
        jobs[j].down = upload(g, &m[3 * j + 2]);
        jobs[j].n_rows = rows[j];
        total += rows[j];
    }
    float *x = random_acts(total, H);
    float *yc = poisoned((size_t)total * H), *yg = poisoned((size_t)total * H);
    int off = 0;
    for (int j = 0; j < n_jobs; j++) {
        if (rows[j])
            cpu_expert(&m[3 * j], &m[3 * j + 1], &m[3 * j + 2], x + (size_t)off * H, rows[j],
                       yc + (size_t)off * H);
        off += rows[j];
    }
    coli__err err = {{0}};
    ck_assert_msg(ops->experts(g, 0, jobs, n_jobs, x, yg, &err) == COLI_OK, "%s", err.msg);
    char what[96];
    snprintf(what, sizeof what, "experts: format %d (down %d), H %d, I %d, %d jobs", dt, dt_down, H, I, n_jobs);
    expect_same(yg, yc, (size_t)total * H, dt, what);
    for (int j = 0; j < n_jobs; j++) {
        ops->release(g, jobs[j].gate);
        ops->release(g, jobs[j].up);
        ops->release(g, jobs[j].down);
        for (int k = 0; k < 3; k++)
            hmat_free(&m[3 * j + k]);
    }
    free(m);
    free(jobs);
    free(x);
    free(yc);
    free(yg);
}

START_TEST(test_experts_vs_cpu)
{
    coli__gpu *g = open_gpu(-1);
    static const int decode[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    static const int prefill[5] = {9, 1, 0, 17, 70};
    for (int f = 0; f < N_FORMATS; f++) {
        experts_case(g, FORMATS[f], FORMATS[f], 256, 128, 8, decode);
        experts_case(g, FORMATS[f], FORMATS[f], 128, 96, 5, prefill);
    }
    /* an expert width the quantized formats cannot take (48, as in the
     * mixtral fixture): gate and up quantized, down in bf16 */
    for (int f = 0; f < 3; f++)
        experts_case(g, FORMATS[f], COLI_DT_BF16, 64, 48, 5, prefill);
    ops->free(g);
}
END_TEST

/* ---- tensor life ------------------------------------------------------- */

START_TEST(test_update_and_release_host)
{
    coli__gpu *g = open_gpu(-1);
    coli__err err = {{0}};
    const int rows = 40, cols = 96, S = 3;
    for (int f = 0; f < N_FORMATS; f++) {
        coli__dtype dt = FORMATS[f];
        hmat a, b;
        hmat_random(&a, dt, 32, rows, cols, 0.1f);
        hmat_random(&b, dt, 32, rows, cols, 0.1f);
        float *x = random_acts(S, cols);
        float *yb = poisoned((size_t)S * rows), *yg = poisoned((size_t)S * rows);
        ck_assert_int_eq(coli__matmul(NULL, pool, &b.m, x, S, yb), COLI_OK);
        int hd = upload(g, &a);
        coli__gpu_mat gb = gview(&b);
        ck_assert_msg(ops->update(g, hd, &gb, &err) == COLI_OK, "%s", err.msg);
        ck_assert_msg(ops->matmul(g, hd, x, S, yg, &err) == COLI_OK, "%s", err.msg);
        expect_same(yg, yb, (size_t)S * rows, dt, "after tensor_update");
        /* another shape or format is refused, and the tensor stays b */
        hmat c;
        hmat_random(&c, dt, 32, rows + 1, cols, 0.1f);
        coli__gpu_mat gc = gview(&c);
        ck_assert_int_eq(ops->update(g, hd, &gc, &err), COLI_EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "shape and format"));
        hmat d;
        hmat_random(&d, dt == COLI_DT_Q8 ? COLI_DT_Q4 : COLI_DT_Q8, 32, rows, cols, 0.1f);
        coli__gpu_mat gd = gview(&d);
        ck_assert_int_eq(ops->update(g, hd, &gd, &err), COLI_EINVAL);
        hmat_free(&c);
        hmat_free(&d);
        /* the host copy goes: 64 calls later the device still has it all */
        hmat_free(&a);
        hmat_free(&b);
        for (int k = 0; k < 64; k++) {
            poison(yg, (size_t)S * rows);
            ck_assert_msg(ops->matmul(g, hd, x, S, yg, &err) == COLI_OK, "%s", err.msg);
            expect_same(yg, yb, (size_t)S * rows, dt, "after the host copy was freed");
        }
        ops->release(g, hd);
        ops->release(g, hd); /* twice: ignored */
        free(x);
        free(yb);
        free(yg);
    }
    ops->free(g);
}
END_TEST

/* ---- failures ------------------------------------------------------------ */

static void expect_stats_equal(const coli__gpu_stats *a, const coli__gpu_stats *b)
{
    ck_assert_uint_eq(a->resident_tensors, b->resident_tensors);
    ck_assert_uint_eq(a->resident_bytes, b->resident_bytes);
    ck_assert_uint_eq(a->calls, b->calls);
    ck_assert_uint_eq(a->rows, b->rows);
}

START_TEST(test_bad_calls)
{
    coli__gpu *g = open_gpu(-1);
    coli__err err = {{0}};
    hmat ok;
    hmat_random(&ok, COLI_DT_Q8, 32, 16, 64, 0.1f);
    float *x = random_acts(2, 64), *yc = poisoned(32), *yg = poisoned(32);
    ck_assert_int_eq(coli__matmul(NULL, pool, &ok.m, x, 2, yc), COLI_OK);
    coli__gpu_stats s0, s1;
    ck_assert_int_eq(ops->stats(g, 0, &s0, &err), COLI_OK);
    coli__gpu_mat gm = gview(&ok);
    int h = 7;
    /* a device that is not in use */
    ck_assert_int_eq(ops->upload(g, 5, &gm, &h, &err), COLI_EINVAL);
    ck_assert_int_eq(h, -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "device 5"));
    /* a format the tier does not hold */
    coli__gpu_mat bad = gm;
    bad.dt = COLI_DT_OTHER;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EUNSUPPORTED);
    /* missing scales, missing quants, missing minimums of q2 */
    bad = gm;
    bad.d = NULL;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EINVAL);
    bad = gm;
    bad.qs = NULL;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EINVAL);
    bad = gm;
    bad.dt = COLI_DT_Q2;
    bad.m = NULL;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EINVAL);
    bad = gm;
    bad.dt = COLI_DT_F32;
    bad.data = NULL;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EINVAL);
    bad = gm;
    bad.cols = 48;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_EINVAL);
    /* an impossible allocation: 2^28 x 2^14 q8 is 4 TiB; nothing is read
     * from the host pointers before the allocation fails */
    bad = gm;
    bad.rows = 1 << 28;
    bad.cols = 1 << 14;
    ck_assert_int_eq(ops->upload(g, 0, &bad, &h, &err), COLI_ENOMEM);
    ck_assert_ptr_nonnull(strstr(err.msg, "no room"));
    /* unknown handles */
    ck_assert_int_eq(ops->matmul(g, 12345, x, 2, yg, &err), COLI_EINVAL);
    ck_assert_int_eq(ops->update(g, -1, &gm, &err), COLI_EINVAL);
    ck_assert_int_eq(ops->stats(g, 3, &s1, &err), COLI_EINVAL);
    ck_assert_int_eq(ops->stats(g, 0, &s1, &err), COLI_OK);
    expect_stats_equal(&s0, &s1);
    /* and the next healthy call works */
    int hd = upload(g, &ok);
    ck_assert_msg(ops->matmul(g, hd, x, 2, yg, &err) == COLI_OK, "%s", err.msg);
    expect_same(yg, yc, 32, COLI_DT_Q8, "after the refused calls");
    ck_assert_int_eq(ops->stats(g, 0, &s1, &err), COLI_OK);
    ck_assert_uint_eq(s1.resident_tensors, s0.resident_tensors + 1);
    ck_assert_uint_eq(s1.resident_bytes, s0.resident_bytes + ops->tensor_bytes(&gm));
    ck_assert_uint_eq(s1.calls, s0.calls + 1);
    ck_assert_uint_eq(s1.rows, s0.rows + 2);
    ops->release(g, hd);
    ck_assert_int_eq(ops->stats(g, 0, &s1, &err), COLI_OK);
    ck_assert_uint_eq(s1.resident_tensors, s0.resident_tensors);
    ck_assert_uint_eq(s1.resident_bytes, s0.resident_bytes);
    ops->free(g);
    /* bad device lists */
    coli__gpu *g2 = NULL;
    int twice[2] = {0, 0}, missing[1] = {999};
    coli__gpu_params p2 = {twice, 2, -1}, p3 = {missing, 1, -1};
    ck_assert_int_eq(ops->init(&p2, &g2, &err), COLI_EINVAL);
    ck_assert_ptr_null(g2);
    ck_assert_int_eq(ops->init(&p3, &g2, &err), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "999"));
    hmat_free(&ok);
    free(x);
    free(yc);
    free(yg);
}
END_TEST

/* Fault injection: with the fault after k calls, the first k calls of a
 * fixed sequence succeed with the right bits and every later one fails with
 * COLI_EGPU, whatever k is. */
START_TEST(test_fault_injection)
{
    hmat a, b, c;
    hmat_random(&a, COLI_DT_Q4, 32, 64, 128, 0.1f);
    hmat_random(&b, COLI_DT_Q4, 32, 64, 128, 0.1f);
    hmat_random(&c, COLI_DT_Q4, 32, 128, 64, 0.1f);
    float *x = random_acts(4, 128), *ya = poisoned(4 * 64), *ye = poisoned(4 * 128), *yg = poisoned(4 * 128);
    ck_assert_int_eq(coli__matmul(NULL, pool, &a.m, x, 4, ya), COLI_OK);
    cpu_expert(&a, &b, &c, x, 4, ye);
    const int n_calls = 6; /* upload a, b, c; matmul; update; experts */
    for (int k = 0; k <= n_calls; k++) {
        coli__gpu *g = open_gpu(k);
        coli__err err = {{0}};
        int h[3] = {-1, -1, -1}, done = 0;
        const hmat *m[3] = {&a, &b, &c};
        for (int i = 0; i < 3; i++) {
            coli__gpu_mat gm = gview(m[i]);
            coli_status st = ops->upload(g, 0, &gm, &h[i], &err);
            ck_assert_int_eq(st, done < k ? COLI_OK : COLI_EGPU);
            done++;
        }
        if (k >= 3) {
            poison(yg, 4 * 64);
            ck_assert_int_eq(ops->matmul(g, h[0], x, 4, yg, &err), done < k ? COLI_OK : COLI_EGPU);
            if (done < k)
                expect_same(yg, ya, 4 * 64, COLI_DT_Q4, "before the fault");
            else
                ck_assert_ptr_nonnull(strstr(err.msg, "injected"));
            done++;
            coli__gpu_mat ga = gview(&a);
            ck_assert_int_eq(ops->update(g, h[0], &ga, &err), done < k ? COLI_OK : COLI_EGPU);
            done++;
            coli__gpu_expert job = {h[0], h[1], h[2], 4};
            poison(yg, 4 * 128);
            ck_assert_int_eq(ops->experts(g, 0, &job, 1, x, yg, &err), done < k ? COLI_OK : COLI_EGPU);
            if (done < k)
                expect_same(yg, ye, 4 * 128, COLI_DT_Q4, "experts before the fault");
            done++;
        }
        ops->free(g);
    }
    hmat_free(&a);
    hmat_free(&b);
    hmat_free(&c);
    free(x);
    free(ya);
    free(ye);
    free(yg);
}
END_TEST

START_TEST(test_devices)
{
    coli__err err = {{0}};
    int n = 0;
    coli__gpu_devinfo info[COLI_GPU_MAX_DEVICES];
    ck_assert_int_eq(ops->probe(info, COLI_GPU_MAX_DEVICES, &n, &err), COLI_OK);
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n && i < COLI_GPU_MAX_DEVICES; i++) {
        ck_assert_int_eq(info[i].ordinal, i);
        ck_assert_msg(info[i].wave == 32 || info[i].wave == 64, "wave %d", info[i].wave);
        ck_assert_msg(info[i].arch[0] == 's' || info[i].arch[0] == 'g', "arch %s", info[i].arch);
        ck_assert_uint_gt(info[i].total_bytes, 0);
        ck_assert_uint_le(info[i].free_bytes, info[i].total_bytes);
        printf("device %d: %s, %s, wave %d, %llu of %llu MiB free\n", i, info[i].name, info[i].arch, info[i].wave,
               (unsigned long long)(info[i].free_bytes >> 20), (unsigned long long)(info[i].total_bytes >> 20));
    }
    coli__gpu *g = open_gpu(-1);
    ck_assert_int_eq(ops->n_devices(g), 1);
    coli__gpu_devinfo d0;
    ck_assert_int_eq(ops->device_info(g, 0, &d0, &err), COLI_OK);
    ck_assert_str_eq(d0.name, info[0].name);
    ck_assert_int_eq(ops->device_info(g, 1, &d0, &err), COLI_EINVAL);
    ops->free(g);
    printf("compiled: %s\n", ops->compiled());
}
END_TEST

int main(void)
{
    ops = coli__gpu_backend();
    coli__err err = {{0}};
    int n = 0;
    if (ops->probe(NULL, 0, &n, &err) != COLI_OK || n == 0) {
        printf("test_gpu: SKIP: no GPU device (tier compiled in: %s)\n", ops->compiled());
        return 77;
    }
    if (coli__pool_create(0, &pool, &err) != COLI_OK) {
        fprintf(stderr, "test_gpu: %s\n", err.msg);
        return 1;
    }
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_devices);
    tcase_add_test(tc, test_hand_values);
    tcase_add_test(tc, test_matmul_vs_cpu);
    tcase_add_test(tc, test_experts_vs_cpu);
    tcase_add_test(tc, test_update_and_release_host);
    tcase_add_test(tc, test_bad_calls);
    tcase_add_test(tc, test_fault_injection);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* one device context for all */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    coli__pool_free(pool);
    return failed ? 1 : 0;
}
