/* wexperts.c - the host copies of experts resident on a GPU, released
 * (CUDA_RELEASE_HOST) and rebuilt from the checkpoint exactly as loaded
 * (loader.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/loader.h"

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
    coli__loader L = {.w = w, .cfg = cfg, .ts = ts, .fmt = fmt, .q4_group = q4_group, .err = err, .layer = -1,
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
        const char *tn = coli__tensor_name(cfg->family, (coli__tname)(COLI_T_E_GATE + k), l, e, name, sizeof name);
        st = coli__ld_find(&L, tn, m->rows, m->cols, &t);
        if (st != COLI_OK)
            break;
        coli__mat fresh = {.rows = m->rows, .cols = m->cols, .dt = t->dtype, .data = coli__ld_aligned(&L, t)};
        if (!fresh.data) {
            st = coli__fail(err, COLI_ENOMEM, "out of memory copying tensor '%s'", name);
            break;
        }
        if (t->dtype == COLI_DT_F8E4M3 && (st = coli__ld_fp8_scales(&L, &fresh, t, name)) != COLI_OK)
            break;
        st = coli__ld_convert(&L, &fresh, t->file, name, m->dt);
        if (st == COLI_OK)
            *m = fresh;
    }
    free(L.rowbuf);
    return st;
}
