/* safetensors.h - memory-mapped safetensors checkpoints (single file or
 * sharded through model.safetensors.index.json).
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON mapping
 * tensor names to {dtype, shape, data_offsets:[begin,end]} (offsets relative
 * to the byte after the header), optional "__metadata__", then the data.
 * Everything is validated at open: header inside the file, offsets inside the
 * data area, begin <= end, no two tensors overlapping, byte size equal to
 * prod(shape) * dtype size without overflow, known dtype names. */
#ifndef COLI_SAFETENSORS_H
#define COLI_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "base/dtype.h"
#include "base/error.h"

#define COLI_MAX_DIMS 8

typedef struct coli__tensor {
    const char *name;
    coli__dtype dtype;
    const char *dtype_name;     /* as written in the file ("BF16") */
    int ndim;
    int64_t shape[COLI_MAX_DIMS];
    const void *data;           /* inside the mapping */
    size_t nbytes;
    const char *file;           /* path of the file holding it */
} coli__tensor;

typedef struct coli__tensor_set coli__tensor_set;

/* Opens dir/model.safetensors, or the shards named by
 * dir/model.safetensors.index.json (every tensor of its weight_map must be
 * found in the named shard). */
coli_status coli__st_open_dir(const char *dir, coli__tensor_set **out, coli__err *err);
/* Opens one file. */
coli_status coli__st_open_file(const char *path, coli__tensor_set **out, coli__err *err);
void coli__st_close(coli__tensor_set *ts);

size_t coli__st_count(const coli__tensor_set *ts);
const coli__tensor *coli__st_at(const coli__tensor_set *ts, size_t i);
/* By exact name, or NULL. */
const coli__tensor *coli__st_find(const coli__tensor_set *ts, const char *name);

size_t coli__dtype_size(coli__dtype dt); /* 4, 2, 2; 0 for OTHER */

#endif
