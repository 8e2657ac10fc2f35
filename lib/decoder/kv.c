/* kv.c - the KV cache: one block of keys and one of values, in f32 or
 * bf16. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "cpu/fp16.h"
#include "decoder/kv.h"

coli_status coli__kv_type_pick(int64_t opt, int64_t *type, coli__err *err)
{
    if (opt >= 0) {
        *type = opt;
        return COLI_OK;
    }
    coli__env_val v;
    int set = 0;
    COLI_TRY(coli__env_get(COLI__ENV_KV_TYPE, &v, &set, err));
    *type = set ? v.i : COLI_KV_F32;
    return COLI_OK;
}

coli__dtype coli__kv_dtype(int64_t type)
{
    return type == COLI_KV_BF16 ? COLI_DT_BF16 : COLI_DT_F32;
}

static size_t elem_bytes(coli__dtype dt)
{
    return dt == COLI_DT_BF16 ? sizeof(uint16_t) : sizeof(float);
}

uint64_t coli__kv_bytes_per_pos(const coli__config *c, coli__dtype dt)
{
    return (uint64_t)c->n_layers * (uint64_t)c->kv_heads * ((uint64_t)c->kv_kdim + (uint64_t)c->kv_vdim) *
           elem_bytes(dt);
}

int64_t coli__kv_positions(const coli__config *c, int64_t opt_context)
{
    return opt_context > 0 ? opt_context : c->max_pos;
}

/* Physical memory, 0 if unknown. */
static uint64_t ram_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* Each block tried escapes here: a compiler may otherwise drop a malloc
 * whose block is only freed (clang does), and every size would "fit". */
static void *volatile probe_sink;

/* The most positions below hi (which failed) whose cache RAM holds and the
 * allocator grants (as two blocks: keys and values), less room for the rest of a run (an eighth, at least
 * 64 MiB: the pass's scratch and what the threads allocate come after the
 * cache), so that a context of that many positions opens and runs; the
 * blocks tried are freed untouched, so this costs no memory. Rounded down
 * to a multiple of 256 when that large. */
static int64_t fitting_positions(uint64_t per_pos, int64_t hi)
{
    uint64_t ram = ram_bytes();
    if (ram && (uint64_t)hi > ram / per_pos)
        hi = (int64_t)(ram / per_pos) + 1;
    int64_t lo = 0;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        uint64_t half = (uint64_t)mid * per_pos / 2;
        void *k = half <= SIZE_MAX ? malloc((size_t)half) : NULL, *v = k ? malloc((size_t)half) : NULL;
        probe_sink = k;
        probe_sink = v;
        if (k && v)
            lo = mid;
        else
            hi = mid;
        free(k);
        free(v);
    }
    uint64_t room = (uint64_t)lo * per_pos / 8;
    if (room < ((uint64_t)64 << 20))
        room = (uint64_t)64 << 20;
    lo = (uint64_t)lo * per_pos > room ? lo - (int64_t)((room + per_pos - 1) / per_pos) : 0;
    return lo >= 256 ? lo / 256 * 256 : lo;
}

static double gib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0 * 1024.0);
}

coli_status coli__kv_init(coli__kv *kv, const coli__config *c, int n_ctx, coli__dtype dt, coli__err *err)
{
    memset(kv, 0, sizeof *kv);
    if (n_ctx > c->max_pos)
        return coli__fail(err, COLI_ERANGE,
                          "COLI_OPT_CONTEXT: %d positions exceed the model's max_position_embeddings (%d); "
                          "use at most %d",
                          n_ctx, c->max_pos, c->max_pos);
    kv->n_ctx = n_ctx;
    kv->n_kv = c->kv_heads;
    kv->hd = c->kv_kdim;
    kv->vd = c->kv_vdim;
    kv->dt = dt;
    const char *type = coli__dtype_name(dt);
    uint64_t per_pos = coli__kv_bytes_per_pos(c, dt), bytes = per_pos * (uint64_t)n_ctx, ram = ram_bytes();
    if (bytes / 2 > SIZE_MAX) /* a 32-bit address space */
        return coli__fail(err, COLI_ERANGE,
                          "COLI_OPT_CONTEXT: a KV cache of %d positions (%llu bytes in %s) is larger than this build "
                          "can address",
                          n_ctx, (unsigned long long)bytes, type);
    size_t n = (size_t)c->n_layers * (size_t)n_ctx * (size_t)kv->n_kv;
    /* no memset: the OS hands out pages as positions are written */
    int big = ram && bytes > ram;
    if (!big) {
        kv->k = malloc(n * (size_t)kv->hd * elem_bytes(dt));
        kv->v = kv->vd ? malloc(n * (size_t)kv->vd * elem_bytes(dt)) : NULL;
    }
    if (!kv->k || (kv->vd && !kv->v)) {
        coli__kv_free(kv);
        int64_t fit = fitting_positions(per_pos, n_ctx);
        char ram_text[64] = "";
        if (ram)
            snprintf(ram_text, sizeof ram_text, " (RAM: %.2f GiB)", gib(ram));
        return coli__fail(err, COLI_ENOMEM,
                          "COLI_OPT_CONTEXT: a KV cache of %d positions needs %llu bytes (%.2f GiB, %llu bytes per "
                          "position in %s), more than can be allocated%s; at most %lld positions fit",
                          n_ctx, (unsigned long long)bytes, gib(bytes), (unsigned long long)per_pos, type, ram_text,
                          (long long)fit);
    }
    return COLI_OK;
}

void coli__kv_free(coli__kv *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

/* n values of src at element at of block dst, rounded to dt. */
static void put(void *dst, size_t at, const float *src, int n, coli__dtype dt)
{
    if (dt == COLI_DT_F32) {
        memcpy((float *)dst + at, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *b = (uint16_t *)dst + at;
    for (int i = 0; i < n; i++)
        b[i] = coli__f32_to_bf16_bits(src[i]);
}

void coli__kv_store(coli__kv *kv, int l, int pos, const float *k, const float *v)
{
    for (int g = 0; g < kv->n_kv; g++) {
        size_t row = ((size_t)l * (size_t)kv->n_kv + (size_t)g) * (size_t)kv->n_ctx + (size_t)pos;
        put(kv->k, row * (size_t)kv->hd, k + (size_t)g * (size_t)kv->hd, kv->hd, kv->dt);
        if (kv->vd)
            put(kv->v, row * (size_t)kv->vd, v + (size_t)g * (size_t)kv->vd, kv->vd, kv->dt);
    }
}

const void *coli__kv_rows(const coli__kv *kv, int l, int g, int values)
{
    const int own = values && kv->vd; /* values of their own, else the keys' rows */
    size_t head = ((size_t)l * (size_t)kv->n_kv + (size_t)g) * (size_t)kv->n_ctx;
    return (const char *)(own ? kv->v : kv->k) + head * (size_t)(own ? kv->vd : kv->hd) * elem_bytes(kv->dt);
}

const void *coli__kv_key_at(const coli__kv *kv, int l, int g, int pos, int off)
{
    return (const char *)coli__kv_rows(kv, l, g, 0) + ((size_t)pos * (size_t)kv->hd + (size_t)off) * elem_bytes(kv->dt);
}
