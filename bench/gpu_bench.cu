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
 * Usage: bench/gpu_bench [ITERATIONS]  (make gpu-bench in a GPU build;
 * GPU_BENCH_ONLY=SHAPE,FORMAT,S runs one case, for a profiler) */
#include "gpu/compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "gpu/backend.h"
#include "cpu/quant.h"
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#if COLI_GPU_HAS_WMMA
/* The int8 tensor-core rate this device reaches through wmma: every warp
 * runs independent 16x16x16 MMAs on registers. */
__global__ void k_mma_peak(int iters, int *out)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> c[4];
    wmma::fill_fragment(a, (signed char)(threadIdx.x & 3));
    wmma::fill_fragment(b, (signed char)1);
    for (int k = 0; k < 4; k++)
        wmma::fill_fragment(c[k], 0);
    for (int i = 0; i < iters; i++)
        for (int k = 0; k < 4; k++)
            wmma::mma_sync(c[k], a, b, c[k]);
    int acc = 0;
    for (int k = 0; k < 4; k++)
        acc += c[k].x[0];
    if (acc == 12345)
        *out = acc;
}

static double mma_peak(void)
{
    int *out = NULL;
    cudaMalloc(&out, 4);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int blocks = p.multiProcessorCount * 8, iters = 4096;
    k_mma_peak<<<blocks, 128>>>(16, out);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0, 0);
    k_mma_peak<<<blocks, 128>>>(iters, out);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaFree(out);
    return 2.0 * 16 * 16 * 16 * 4.0 * iters * blocks * 4 / (ms * 1e-3);
}
#endif

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
#if COLI_GPU_HAS_WMMA
    double peak = mma_peak();
    printf("int8 tensor-core rate (wmma 16x16x16): %.0f TOP/s\n", peak / 1e12);
#else
    double peak = 0;
#endif
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
            static const int S_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 64, 256};
            for (size_t sl = 0; sl < sizeof S_list / sizeof S_list[0]; sl++) {
                int S = S_list[sl];
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
                if (S <= 8)
                    printf("%s H=%d I=%d experts=%d S=%d: kernels %.1f us, %.0f GB/s weights (%.0f%% of copy); "
                           "call %.1f us, %.0f GB/s\n",
                           dt == COLI_DT_Q8 ? "q8" : "q4", H, I, E, S, kern * 1e6, wbytes / kern / 1e9,
                           100.0 * (wbytes / kern) / bw, wall * 1e6, wbytes / wall / 1e9);
                else {
                    double ops = 2.0 * 3.0 * H * (double)I * E * S; /* multiply-adds of gate, up, down */
                    printf("%s H=%d I=%d experts=%d S=%d (prefill): kernels %.1f us, %.1f int8 TOP/s (%.1f%% of "
                           "the wmma rate); call %.1f us\n",
                           dt == COLI_DT_Q8 ? "q8" : "q4", H, I, E, S, kern * 1e6, ops / kern / 1e12,
                           peak > 0 ? 100.0 * (ops / kern) / peak : 0.0, wall * 1e6);
                }
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
