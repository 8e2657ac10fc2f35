/* loader.h - the loader's state and the parts of it that its files share
 * (internal). The loader is four files, bottom first: wmem.c (its memory,
 * a tensor found and checked), wconvert.c (a matrix into the load's
 * format), weights.c (the walk over a model's tensors, coli__weights_*),
 * wexperts.c (the host copies of experts released and rebuilt). */
#ifndef COLI_LOADER_H
#define COLI_LOADER_H

#include "cpu/threadpool.h"
#include "model/model.h"
#include "store/container.h"

/* One walk over the model's tensors serves three purposes: loading a
 * checkpoint (ts), loading a container (cont: matrices point into its
 * mapping, nothing is converted), and planning a conversion (plan: each
 * tensor is checked and reported, nothing is loaded). So the container
 * holds exactly the tensors, formats and order the loader would make. */
typedef struct coli__loader {
    coli__weights *w;
    const coli__config *cfg;
    const coli__pieces *pieces; /* each loads its layer's tensors (lib/decoder/pieces.h) */
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
    uint8_t *qbuf;            /* per thread: COLI__LD_QROWS rows in the row layout (x16) */
    size_t qbuf_cap;
} coli__loader;

/* Rows a quantizing thread takes at a time. */
#define COLI__LD_QROWS 64

/* ---- wmem.c ------------------------------------------------------------ */

/* arr (capacity *cap elements of elem bytes) with room for n + 1, grown
 * by doubling from first: the array to use, or NULL when out of memory
 * (arr and *cap unchanged). */
void *coli__ld_grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first);
/* 64-byte aligned (whole cache lines for the SIMD kernels) memory that
 * lives as long as the weights, or until released (coli__weights_release_experts). */
void *coli__ld_own(coli__loader *L, size_t bytes);
/* Notes a matrix for coli__weights_bytes. */
coli_status coli__ld_record(coli__loader *L, int rows, int cols, coli__mat_kind kind, int stored_size,
                            coli__mat_role role);
/* The tensor called name, checked to be [d0] (d1 < 0) or [d0, d1]. */
coli_status coli__ld_find(coli__loader *L, const char *name, int64_t d0, int64_t d1, const coli__tensor **out);
/* The refusal of a NaN or infinity v at element i of tensor name
 * (row-major with cols columns; cols 0: a vector). */
coli_status coli__ld_nonfinite(coli__loader *L, const char *file, const char *name, int cols, size_t i, float v);
/* Refuses a NaN or infinity among the n values of type dt at p (row-major
 * with cols columns; cols 0: a vector). */
coli_status coli__ld_check_finite(coli__loader *L, const char *file, const char *name, int cols, coli__dtype dt,
                                  const void *p, size_t n);
/* t's data, copied where the file's offset leaves it misaligned for its
 * type; NULL when out of memory. */
const void *coli__ld_aligned(coli__loader *L, const coli__tensor *t);
/* The block scales of FP8 matrix m (tensor t, called name): the tensor
 * name + "_scale_inv" of config.json's weight_block_size, widened to f32
 * and checked finite. */
coli_status coli__ld_fp8_scales(coli__loader *L, coli__mat *m, const coli__tensor *t, const char *name);

/* ---- wconvert.c -------------------------------------------------------- */

/* Brings m (pointing at checkpoint data in file) into the target format,
 * refusing non-finite values on the way. */
coli_status coli__ld_convert(coli__loader *L, coli__mat *m, const char *file, const char *name, coli__dtype target);

/* ---- weights.c --------------------------------------------------------- */

/* Matrix name [rows, cols] of kind and role, from the checkpoint or the
 * container, in the load's format (or only planned). */
coli_status coli__ld_mat(coli__loader *L, coli__mat *m, const char *name, int rows, int cols, coli__mat_kind kind,
                         coli__mat_role role);

#endif
