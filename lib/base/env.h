/* env.h - the environment variables the library reads, in one table, and
 * their parsers (internal); COLI_CPU, a kernel set's name, is read with
 * the sets (lib/cpu/cpusel.c). API options win over them where both exist
 * (lib/model/options.h); a malformed value fails naming the variable. */
#ifndef COLI_ENV_H
#define COLI_ENV_H

#include <stdint.h>

#include "base/error.h"

#define COLI__MAX_DEVICES 16 /* devices a model uses at most (lib/gpu/backend.h) */

/* X(ID, variable, kind, what a value must be). Kinds: FLAG 0 or 1;
 * DEVICE one ordinal; DEVICES a list of distinct ordinals; GIB a size in
 * GiB (fractional), read as bytes; COUNT a non-negative integer; KV a KV
 * cache type, f32 (0) or bf16 (1), as coli_kv_type numbers them. */
#define COLI__ENV_MAP(X)                                                                          \
    X(CUDA, "COLI_CUDA", FLAG, "0 or 1")                                                          \
    X(GPU, "COLI_GPU", DEVICE, "a device number (e.g. 0)")                                        \
    X(GPUS, "COLI_GPUS", DEVICES, "a list of distinct device numbers (e.g. 0,1)")                 \
    X(CUDA_EXPERT_GB, "CUDA_EXPERT_GB", GIB, "a size in GiB between 0 and 1048576 (e.g. 20 or 7.5)") \
    X(CUDA_RELEASE_HOST, "CUDA_RELEASE_HOST", FLAG, "0 or 1")                                     \
    X(GPU_FAIL_AFTER, "COLI_GPU_FAIL_AFTER", COUNT, "a count of calls (a non-negative integer)")   \
    X(GPU_PHASES, "COLI_GPU_PHASES", FLAG, "0 or 1")                                              \
    X(GPU_PDL, "COLI_GPU_PDL", FLAG, "0 or 1")                                                    \
    X(GPU_POISON, "COLI_GPU_POISON", FLAG, "0 or 1")                                              \
    X(IO_FAIL_AFTER, "COLI_IO_FAIL_AFTER", COUNT, "a count of reads")                             \
    X(KV_TYPE, "COLI_KV_TYPE", KV, "f32 or bf16")

typedef enum coli__env_id {
#define COLI__ENV_ID_(id, var, kind, want) COLI__ENV_##id,
    COLI__ENV_MAP(COLI__ENV_ID_)
#undef COLI__ENV_ID_
    COLI__ENV_COUNT_
} coli__env_id;

/* A parsed value: i for FLAG, GIB (bytes), COUNT and KV; devs[n] for DEVICE
 * and DEVICES. */
typedef struct coli__env_val {
    int64_t i;
    int devs[COLI__MAX_DEVICES];
    int n;
} coli__env_val;

/* Reads variable id: *set 0 when it is not set (v untouched), else 1 and
 * v holds its value. COLI_EINVAL naming the variable and its value if it
 * is malformed. */
coli_status coli__env_get(coli__env_id id, coli__env_val *v, int *set, coli__err *err);

/* "0,1": distinct ordinals 0..1023, at most COLI__MAX_DEVICES of them,
 * into devs[*n]; -1 if s is malformed (devs may then be partly written). */
int coli__parse_devices(const char *s, int *devs, int *n);

#endif
