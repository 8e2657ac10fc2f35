/* gpu_bench.cu - speed of the GPU tier's grouped expert call against the
 * device's own copy bandwidth, measured in the same run.
 *
 * For each shape (hidden H x expert width I, 8 routed experts) and format
 * (q8, q4), S = 1..8 token rows per expert: the weight bytes the call reads
 * (gate, up and down of 8 experts) divided by the kernel time the tier's
 * events measure, and by the whole call's wall time (transfers and launch
 * overhead included). The reference is a device-to-device cudaMemcpy of
 * 1 GiB, counted as bytes read plus bytes written.
 *
 * Usage: gpu_bench [ITERATIONS]   (built by bench/run-gpu.sh) */
#include "gpu/compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "gpu/backend.h"
#include "quant.h"
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double copy_bandwidth(void)
{
    size_t n = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess)
        return 0;
    cudaMemset(a, 1, n);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0, 0);
    for (int i = 0; i < 10; i++)
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * 10.0 * (double)n / (ms * 1e-3);
}

/* A random quantized matrix (values do not matter for speed). */
static coli__gpu_mat random_q(coli__dtype dt, int rows, int cols)
{
    coli__gpu_mat m;
    memset(&m, 0, sizeof m);
    m.dt = dt;
    m.group = 32;
    m.rows = rows;
    m.cols = cols;
    size_t rb = coli__q_row_bytes(dt, cols) * (size_t)rows;
    uint8_t *qs = (uint8_t *)malloc(rb);
    for (size_t i = 0; i < rb; i++)
        qs[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t nd = (size_t)rows * (size_t)(cols / 32);
    uint16_t *d = (uint16_t *)malloc(nd * 2);
    for (size_t i = 0; i < nd; i++)
        d[i] = 0x2000; /* a small fp16 */
    m.qs = qs;
    m.d = d;
    return m;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    const coli__gpu_ops *ops = coli__gpu_backend();
    coli__err err;
    coli__gpu *g = NULL;
    coli__gpu_params p = {NULL, 0, -1};
    if (ops->init(&p, &g, &err) != COLI_OK) {
        fprintf(stderr, "gpu_bench: %s\n", err.msg);
        return 1;
    }
    double bw = copy_bandwidth();
    printf("device copy bandwidth: %.0f GB/s (read + write)\n", bw / 1e9);
    static const int shapes[][2] = {{4096, 1536}, {7168, 2048}, {1024, 256}};
    static const coli__dtype fmts[] = {COLI_DT_Q8, COLI_DT_Q4};
    const int E = 8;
    /* GPU_BENCH_ONLY=SHAPE,FORMAT,S (e.g. 0,0,1) runs one case, for a profiler */
    int only_shape = -1, only_fmt = -1, only_s = -1;
    const char *only = getenv("GPU_BENCH_ONLY");
    if (only)
        sscanf(only, "%d,%d,%d", &only_shape, &only_fmt, &only_s);
    for (int si = 0; si < 3; si++) {
        int H = shapes[si][0], I = shapes[si][1];
        if (only_shape >= 0 && si != only_shape)
            continue;
        for (int fi = 0; fi < 2; fi++) {
            coli__dtype dt = fmts[fi];
            if (only_fmt >= 0 && fi != only_fmt)
                continue;
            coli__gpu_expert jobs[8];
            uint64_t wbytes = 0;
            for (int e = 0; e < E; e++) {
                coli__gpu_mat a = random_q(dt, I, H), b = random_q(dt, I, H), c = random_q(dt, H, I);
                wbytes += 2 * (uint64_t)(coli__q_row_bytes(dt, H) * I + (size_t)I * (H / 32) * 2) +
                          (uint64_t)(coli__q_row_bytes(dt, I) * H + (size_t)H * (I / 32) * 2);
                if (ops->upload(g, 0, &a, &jobs[e].gate, &err) || ops->upload(g, 0, &b, &jobs[e].up, &err) ||
                    ops->upload(g, 0, &c, &jobs[e].down, &err)) {
                    fprintf(stderr, "gpu_bench: %s\n", err.msg);
                    return 1;
                }
                free((void *)a.qs), free((void *)a.d), free((void *)b.qs), free((void *)b.d);
                free((void *)c.qs), free((void *)c.d);
            }
            for (int S = 1; S <= 8; S++) {
                if (only_s >= 0 && S != only_s)
                    continue;
                for (int e = 0; e < E; e++)
                    jobs[e].n_rows = S;
                size_t n = (size_t)E * S * H;
                float *x = (float *)malloc(n * 4), *y = (float *)malloc(n * 4);
                for (size_t i = 0; i < n; i++)
                    x[i] = (float)((int)(i % 17) - 8) * 0.01f;
                ops->experts(g, 0, jobs, E, x, y, &err); /* warm-up */
                coli__gpu_stats s0, s1;
                ops->stats(g, 0, &s0, &err);
                double t0 = now();
                for (int it = 0; it < iters; it++)
                    if (ops->experts(g, 0, jobs, E, x, y, &err) != COLI_OK) {
                        fprintf(stderr, "gpu_bench: %s\n", err.msg);
                        return 1;
                    }
                double wall = (now() - t0) / iters;
                ops->stats(g, 0, &s1, &err);
                double kern = (double)(s1.kernel_ns - s0.kernel_ns) * 1e-9 / iters;
                printf("%s H=%d I=%d experts=%d S=%d: kernels %.1f us, %.0f GB/s weights (%.0f%% of copy); "
                       "call %.1f us, %.0f GB/s\n",
                       dt == COLI_DT_Q8 ? "q8" : "q4", H, I, E, S, kern * 1e6, wbytes / kern / 1e9,
                       100.0 * (wbytes / kern) / bw, wall * 1e6, wbytes / wall / 1e9);
                free(x);
                free(y);
            }
            for (int e = 0; e < E; e++) {
                ops->release(g, jobs[e].gate);
                ops->release(g, jobs[e].up);
                ops->release(g, jobs[e].down);
            }
        }
    }
    ops->free(g);
    return 0;
}
