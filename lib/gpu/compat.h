/* compat.h - the only file of the GPU tier that knows the vendor.
 *
 * The .cu files of lib/gpu/ are written against the CUDA runtime. Built by nvcc it
 * gets cuda_runtime.h; built by hipcc (ROCm/HIP) the CUDA names it uses are
 * mapped here onto HIP's, one to one. Device-side differences (the integer
 * dot product, shuffles, the width of a wavefront, tensor cores, graph
 * instantiation) are here too, as small inline functions and macros, so
 * no other file of lib/gpu/ has a vendor test of its own. */
#ifndef COLI_GPU_COMPAT_H
#define COLI_GPU_COMPAT_H

#include <stdio.h>
#include <string.h>

#if defined(__HIPCC__)

#include <hip/hip_runtime.h>

#define COLI_GPU_VENDOR "hip"
/* AMD runs the portable kernels (the WMMA ones are NVIDIA's). */
#define COLI_GPU_HAS_WMMA 0
/* Wavefront width in device code, from the target family (ROCm 7 made
 * warpSize a run-time value): 64 on GCN and CDNA, 32 on RDNA. The host
 * reads hipDeviceProp_t.warpSize. */
#if defined(__GFX9__) || defined(__GFX8__)
#define COLI_GPU_WAVE 64
#else
#define COLI_GPU_WAVE 32
#endif

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy hipMemcpy
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemset hipMemset
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventQuery hipEventQuery
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize

/* A captured graph made runnable. */
static inline hipError_t coli_graph_instantiate(hipGraphExec_t *exec, hipGraph_t graph)
{
    return hipGraphInstantiate(exec, graph, NULL, NULL, 0);
}

/* Pinned host memory kernels can read and write (at *dev). */
static inline hipError_t coli_host_alloc_mapped(void **host, void **dev, size_t n)
{
    void *h = NULL;
    hipError_t e = hipHostMalloc(&h, n, hipHostMallocMapped);
    if (e != hipSuccess)
        return e;
    e = hipHostGetDevicePointer(dev, h, 0);
    if (e != hipSuccess)
        (void)hipHostFree(h);
    else
        *host = h;
    return e;
}

/* Programmatic dependent launch is NVIDIA's (sm_90): on AMD a launch
 * waits for the one before it, and the kernels' calls are empty. */
static __device__ __forceinline__ void coli_pdl_wait(void)
{
}

static __device__ __forceinline__ void coli_pdl_release(void)
{
}

template <typename... P, typename... A>
static inline hipError_t coli_launch(int pdl, void (*k)(P...), dim3 grid, dim3 block, size_t smem, hipStream_t st,
                                     A... args)
{
    (void)pdl;
    k<<<grid, block, smem, st>>>(args...);
    return hipPeekAtLastError(); /* left for the caller's check */
}

/* The lanes of a wavefront agree on shared and global memory written
 * before this point (a wavefront runs in lock step). */
static __device__ __forceinline__ void coli_syncwarp(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

/* Shuffle within groups of `width` lanes (width <= 32 divides either
 * wavefront). HIP's shuffles take no mask. */
template <typename T>
static __device__ __forceinline__ T coli_shfl_xor(T v, int lane_mask, int width)
{
    return __shfl_xor(v, lane_mask, width);
}

template <typename T>
static __device__ __forceinline__ T coli_shfl_up(T v, int delta, int width)
{
    return __shfl_up(v, delta, width);
}

template <typename T>
static __device__ __forceinline__ T coli_shfl(T v, int lane, int width)
{
    return __shfl(v, lane, width);
}

/* Four int8 products summed into c, exactly. The portable form: the
 * compiler selects v_dot4 where the target has it. */
static __device__ __forceinline__ int coli_dp4a(int a, int b, int c)
{
    c += (int)(signed char)(a & 0xff) * (int)(signed char)(b & 0xff);
    c += (int)(signed char)((a >> 8) & 0xff) * (int)(signed char)((b >> 8) & 0xff);
    c += (int)(signed char)((a >> 16) & 0xff) * (int)(signed char)((b >> 16) & 0xff);
    c += (int)(signed char)((a >> 24) & 0xff) * (int)(signed char)((b >> 24) & 0xff);
    return c;
}

/* "gfx90a" from "gfx90a:sramecc+:xnack-". */
static inline void coli_gpu_arch_name(const hipDeviceProp_t *p, char *out, size_t cap)
{
    size_t n = strcspn(p->gcnArchName, ":");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p->gcnArchName, n);
    out[n] = '\0';
}

#else /* NVIDIA */

#include <cuda_runtime.h>
#include <mma.h>

#define COLI_GPU_VENDOR "cuda"
#define COLI_GPU_WAVE 32
/* Integer tensor-core MMA through nvcuda::wmma (sm_72 and later: every
 * target CUDA 12 and 13 build for). */
#define COLI_GPU_HAS_WMMA 1

/* One 32-column int8 group of a 16 x 8 tile in one instruction, its int32
 * sums left in registers (sm_80 and later; device code of older targets
 * takes the wmma kernel). a: four words of A (16 x 32, rows), b: two of
 * B (32 x 8, columns), c: the four sums, in the fragment layouts of the
 * PTX ISA for mma.m16n8k32 with .s8. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(COLI_GPU_NO_MMA_K32)
#define COLI_GPU_HAS_MMA_K32 1
static __device__ __forceinline__ void coli_mma_s8_k32(int c[4], const int a[4], const int b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0), "r"(0), "r"(0),
                   "r"(0));
}
#else
#define COLI_GPU_HAS_MMA_K32 0
/* Never run: the host launches the kernels that use it only on sm_80 and
 * later (coli_gpu_mma_k32_ok). */
static __device__ __forceinline__ void coli_mma_s8_k32(int c[4], const int a[4], const int b[2])
{
    (void)a;
    (void)b;
    c[0] = c[1] = c[2] = c[3] = 0;
}
#endif

/* Whether the current device runs coli_mma_s8_k32 (compute capability 8.0
 * or later, and a build that has device code for it). */
static inline int coli_gpu_mma_k32_ok(void)
{
#ifdef COLI_GPU_NO_MMA_K32 /* -D for comparing with the wmma kernel */
    return 0;
#endif
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major >= 8;
}

template <typename T>
static __device__ __forceinline__ T coli_shfl_xor(T v, int lane_mask, int width)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
}

template <typename T>
static __device__ __forceinline__ T coli_shfl_up(T v, int delta, int width)
{
    return __shfl_up_sync(0xffffffffu, v, delta, width);
}

template <typename T>
static __device__ __forceinline__ T coli_shfl(T v, int lane, int width)
{
    return __shfl_sync(0xffffffffu, v, lane, width);
}

static __device__ __forceinline__ int coli_dp4a(int a, int b, int c)
{
    return __dp4a(a, b, c);
}

static inline cudaError_t coli_graph_instantiate(cudaGraphExec_t *exec, cudaGraph_t graph)
{
    return cudaGraphInstantiateWithFlags(exec, graph, 0);
}

/* Pinned host memory kernels can read and write (at *dev). */
static inline cudaError_t coli_host_alloc_mapped(void **host, void **dev, size_t n)
{
    void *h = NULL;
    cudaError_t e = cudaHostAlloc(&h, n, cudaHostAllocMapped);
    if (e != cudaSuccess)
        return e;
    e = cudaHostGetDevicePointer(dev, h, 0);
    if (e != cudaSuccess)
        (void)cudaFreeHost(h);
    else
        *host = h;
    return e;
}

static __device__ __forceinline__ void coli_syncwarp(void)
{
    __syncwarp();
}

/* Programmatic dependent launch (sm_90 and later): a kernel launched by
 * coli_launch with pdl set may start while the kernel before it in the
 * stream (or graph) is still running. It calls coli_pdl_wait() before it
 * reads anything an earlier kernel wrote or writes anything at all (the
 * wait returns once that kernel has finished and its writes are
 * visible), and coli_pdl_release() after, so that the kernel after it
 * may start in turn. Before the wait it may only read what no kernel of
 * the step writes: weights and tables made at creation. Elsewhere both
 * are empty. */
static __device__ __forceinline__ void coli_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void coli_pdl_release(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename... P, typename... A>
static inline cudaError_t coli_launch(int pdl, void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                      A... args)
{
#if CUDART_VERSION < 12000 /* no cudaLaunchKernelEx: launches do not overlap */
    (void)pdl;
    k<<<grid, block, smem, st>>>(args...);
    return cudaPeekAtLastError(); /* left for the caller's check */
#else
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1] = {};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = pdl ? at : NULL;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, args...);
#endif
}

static inline void coli_gpu_arch_name(const cudaDeviceProp *p, char *out, size_t cap)
{
    snprintf(out, cap, "sm_%d%d", p->major, p->minor);
}

#endif

/* The kernels work in groups of 8 and 32 lanes, which must divide a wave. */
static_assert(COLI_GPU_WAVE % 32 == 0, "a wave must hold whole groups of 32 lanes");

#endif
