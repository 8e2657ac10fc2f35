/* wmem.c - the loader's memory (owned blocks in huge-page regions) and a
 * tensor found, checked for shape and for non-finite values (loader.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/fp16.h"
#include "model/finite.h"
#include "model/loader.h"

/* arr (capacity *cap elements of elem bytes) with room for n + 1, grown
 * by doubling from first: the array to use, or NULL when out of memory
 * (arr and *cap unchanged). */
void *coli__ld_grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
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
    coli__block *r = coli__ld_grow(w->regions, &w->cap_regions, w->n_regions, sizeof *r, 16);
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
void *coli__ld_own(coli__loader *L, size_t bytes)
{
    coli__weights *w = L->w;
    coli__block *o = coli__ld_grow(w->owned, &w->cap_owned, w->n_owned, sizeof *o, 256);
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

coli_status coli__ld_record(coli__loader *L, int rows, int cols, coli__mat_kind kind, int stored_size,
                          coli__mat_role role)
{
    coli__weights *w = L->w;
    coli__matrec *r = coli__ld_grow(w->recs, &w->cap_recs, w->n_recs, sizeof *r, 256);
    if (!r)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory");
    w->recs = r;
    w->recs[w->n_recs++] = (coli__matrec){rows, cols, (uint8_t)kind, (uint8_t)stored_size, (uint8_t)role};
    return COLI_OK;
}

/* The tensor called name, checked to be [d0] (d1 < 0) or [d0, d1]. */
coli_status coli__ld_find(coli__loader *L, const char *name, int64_t d0, int64_t d1, const coli__tensor **out)
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
coli_status coli__ld_nonfinite(coli__loader *L, const char *file, const char *name, int cols, size_t i, float v)
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
coli_status coli__ld_check_finite(coli__loader *L, const char *file, const char *name, int cols, coli__dtype dt,
                                const void *p, size_t n)
{
    size_t i = coli__first_nonfinite(dt, p, n);
    return i == n ? COLI_OK : coli__ld_nonfinite(L, file, name, cols, i, stored_at(dt, p, i));
}

coli_status coli__ld_fp8_scales(coli__loader *L, coli__mat *m, const coli__tensor *t, const char *name)
{
    const int br = L->cfg ? L->cfg->fp8_block_rows : 0, bc = L->cfg ? L->cfg->fp8_block_cols : 0;
    if (br <= 0 || bc <= 0)
        return coli__fail(L->err, COLI_EFORMAT,
                          "%s: tensor '%s' is F8_E4M3, but config.json has no quantization_config giving its "
                          "weight_block_size",
                          t->file, name);
    char sname[300];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const int64_t sr = (m->rows + br - 1) / br, sc = (m->cols + bc - 1) / bc;
    const coli__tensor *s = coli__st_find(L->ts, sname);
    if (!s)
        return coli__fail(L->err, COLI_ENOENT, "%s: tensor '%s' is F8_E4M3 but its scales '%s' are missing", t->file,
                          name, sname);
    if (s->ndim != 2 || s->shape[0] != sr || s->shape[1] != sc)
        return coli__fail(L->err, COLI_EFORMAT,
                          "%s: tensor '%s' has %d dimensions of %lld x %lld; [%d, %d] blocks of %d x %d imply [%lld, "
                          "%lld]",
                          s->file, sname, s->ndim, (long long)s->shape[0], s->ndim > 1 ? (long long)s->shape[1] : 0LL,
                          m->rows, m->cols, br, bc, (long long)sr, (long long)sc);
    if (s->dtype != COLI_DT_F32 && s->dtype != COLI_DT_BF16)
        return coli__fail(L->err, COLI_EUNSUPPORTED, "%s: tensor '%s' has dtype %s; scales must be F32 or BF16", s->file,
                          sname, s->dtype_name);
    const size_t n = (size_t)(sr * sc);
    float *v = coli__ld_own(L, n * sizeof(float));
    const void *src = coli__ld_aligned(L, s);
    if (!v || !src)
        return coli__fail(L->err, COLI_ENOMEM, "out of memory loading tensor '%s'", sname);
    for (size_t i = 0; i < n; i++)
        v[i] = stored_at(s->dtype, src, i);
    COLI_TRY(coli__ld_check_finite(L, s->file, sname, (int)sc, COLI_DT_F32, v, n));
    m->bscale = v;
    m->brows = br;
    m->bcols = bc;
    return COLI_OK;
}

/* Tensor data is only as aligned as the file's offsets; a misaligned tensor
 * is copied so that kernels may load whole elements. */
const void *coli__ld_aligned(coli__loader *L, const coli__tensor *t)
{
    size_t a = coli__dtype_size(t->dtype);
    if (a == 0 || (uintptr_t)t->data % a == 0)
        return t->data;
    void *p = coli__ld_own(L, t->nbytes);
    if (p)
        memcpy(p, t->data, t->nbytes);
    return p;
}
