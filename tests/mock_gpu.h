/* mock_gpu.h - a host implementation of the GPU tier's contract
 * (lib/gpu/backend.h) for tests: n devices of a given capacity, whose
 * products are the library's CPU kernels, with fault injection
 * (coli__gpu_params.fail_after) and counters. */
#ifndef COLI_MOCK_GPU_H
#define COLI_MOCK_GPU_H

#include <stdint.h>

#include "cpu/kernels.h"
#include "gpu/backend.h"

/* Devices the mock will show and the bytes each one holds. Resets the
 * counters. */
void mock_gpu_setup(int n_devices, uint64_t capacity);
const coli__gpu_ops *mock_gpu_ops(void);
/* Makes the devices claim this much free memory (0: the truth), so that
 * placement plans more than uploads can take. */
void mock_gpu_report_free(uint64_t bytes);
/* Refuses upload attempt k (counting from 0) when k % period == phase, as
 * if the device were full: experts end up on the CPU between resident ones. */
void mock_gpu_refuse_every(int period, int phase);

/* What the mock saw on one device (ordinal), over every tier instance since
 * mock_gpu_setup. */
typedef struct mock_gpu_counts {
    uint64_t uploads;      /* successful uploads */
    uint64_t refused;      /* uploads beyond capacity (COLI_ENOMEM) */
    uint64_t expert_calls; /* successful experts calls */
    uint64_t matmul_calls; /* successful single products (the output projection) */
    uint64_t jobs, rows;
    uint64_t injected;     /* calls failed by fail_after */
    int64_t live;          /* tensors resident now */
    uint64_t used;         /* bytes resident now */
    int inits;
} mock_gpu_counts;

void mock_gpu_get(int ordinal, mock_gpu_counts *out);

/* The same devices with the device decoder (pipe_*) too: tests/mock_pipe.c,
 * a host implementation of docs/formats.md's written order. */
const coli__gpu_ops *mock_gpu_ops_pipe(void);
void mock_pipe_ops(coli__gpu_ops *ops);
/* For mock_pipe.c: a resident tensor as the CPU kernels take it (NULL: no
 * such handle); device memory taken and given back (COLI_ENOMEM beyond
 * the capacity); one fallible call (fault injection). */
const coli__mat *mock_gpu_mat(const coli__gpu *g, int h);
coli_status mock_gpu_reserve(coli__gpu *g, int dev, uint64_t bytes, coli__err *err);
void mock_gpu_unreserve(coli__gpu *g, int dev, uint64_t bytes);
coli_status mock_gpu_call(coli__gpu *g, int dev, coli__err *err);

#endif
