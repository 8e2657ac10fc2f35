/* backend.h - the GPU expert tier's interface (internal, C ABI).
 *
 * The tier knows matrices, not models: it holds tensors in the formats of
 * docs/formats.md on one or more devices and computes products with them,
 * with the same bits as the CPU kernels for q8, q4 and q2. The engine
 * (lib/tier/experts.c) decides what lives where and falls back to the CPU when a
 * call fails; every call that can fail returns a status and a message.
 *
 * Implementations: lib/gpu/backend.cu (CUDA or HIP, one source) and
 * lib/gpu/none.c (no tier compiled in: every device query answers "none").
 * Callers reach one through a table of functions (coli__gpu_ops), so that
 * tests can put a host implementation of the same contract in its place.
 *
 * lib/gpu/ sits beside lib/store/, above lib/io/, lib/cpu/ and lib/base/,
 * which it may include (it shares fp16.h, silu.h and qround.h with the
 * CPU); the vendor is known in compat.h alone. */
#ifndef COLI_GPU_BACKEND_H
#define COLI_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/dtype.h"
#include "base/env.h"
#include "base/error.h"
#include "io/piece_kinds.h"

/* One count of devices for the options, the environment and the tier. */
#define COLI_GPU_MAX_DEVICES COLI__MAX_DEVICES

/* What one visible device is. */
typedef struct coli__gpu_devinfo {
    int ordinal;         /* as the runtime numbers it (after *_VISIBLE_DEVICES) */
    char name[256];      /* "NVIDIA H200", "AMD Radeon RX 9070 XT" */
    char arch[32];       /* "sm_90", "gfx1030" */
    int wave;            /* threads of a warp or wavefront: 32 or 64 */
    uint64_t free_bytes, total_bytes;
} coli__gpu_devinfo;

/* A matrix on the host, in one format of docs/formats.md: f32 or bf16
 * values (data) or the arrays of a quantized one (qs, d, m). */
typedef struct coli__gpu_mat {
    coli__dtype dt; /* COLI_DT_F32, BF16, Q8, Q4 or Q2 */
    int group;      /* weight group of the quantized formats (q4: 32, 64, 128) */
    int rows, cols;
    const void *data;   /* f32/bf16: rows * cols values */
    const uint8_t *qs;  /* quantized: quants */
    const uint16_t *d;  /* quantized: fp16 scales */
    const uint16_t *m;  /* q2: fp16 minimums */
} coli__gpu_mat;

/* Counters of one device since init. Times are wall-clock nanoseconds
 * measured with device events around each phase. */
typedef struct coli__gpu_stats {
    uint64_t resident_tensors, resident_bytes;
    uint64_t calls;       /* successful matmul and expert calls */
    uint64_t rows;        /* activation rows (tokens) those calls computed */
    uint64_t failures;    /* calls that reported an error */
    uint64_t h2d_ns, kernel_ns, d2h_ns;
    uint64_t h2d_bytes, d2h_bytes;
} coli__gpu_stats;

/* One routed expert of a layer, resident on the device of the call: its
 * gate [I, H], up [I, H] and down [H, I] tensors, applied to n_rows rows of
 * the call's input. Jobs take consecutive rows, in order. */
typedef struct coli__gpu_expert {
    int gate, up, down; /* tensor handles */
    int n_rows;
} coli__gpu_expert;

typedef struct coli__gpu coli__gpu; /* an initialised tier */
typedef struct coli__gpu_pipe coli__gpu_pipe; /* one context's decoder on a device */

/* How a MoE layer's router chooses (docs/formats.md): COLI_ROUTER_SOFTMAX_TOPK,
 * the softmax and top-k (norm_topk); COLI_ROUTER_SIGMOID_GROUP, the
 * sigmoid router: a correction bias (handle of [1, n_experts] f32) for
 * choosing, n_group groups of which the best topk_group are kept,
 * norm_topk, then the weights times scale. */
typedef struct coli__gpu_route {
    coli__router_kind kind;
    int norm_topk;
    int bias;
    int n_group, topk_group;
    float scale;
} coli__gpu_route;

/* Latent attention's shape (COLI_ATTN_MLA; docs/formats.md "Latent
 * attention"): the same in every layer of a net. */
typedef struct coli__gpu_mla {
    int q_lora;     /* 0: q_proj (wq) reads x itself */
    int kv_lora, rope, nope, v_dim;
    int row;        /* values of a cache row: kv_lora + rope */
    int interleave; /* RoPE's pairs (2i, 2i + 1), reordered before rotating */
    float eps;      /* of q_a_layernorm and kv_a_layernorm */
    float scale;    /* of the softmax */
} coli__gpu_mla;

/* A decoder layer as the device runs it, in handles of resident tensors
 * (-1: none). Norm weights are f32 matrices of one row. The tier knows no
 * model family, only the kinds of pieces a layer is made of
 * (io/piece_kinds.h) and their fields; the pieces of lib/model/ fill
 * them in (their describe). */
typedef struct coli__gpu_layer {
    int attn_norm, ffn_norm;
    coli__attn_kind attn; /* COLI_ATTN_GQA: the fields to clip_qkv, window and the biases */
    int wq, wk, wv, wo;   /* MLA: wq is q_b_proj (or q_proj), wk and wv -1 */
    /* COLI_ATTN_MLA: q_a_proj [q_lora, hidden] and its norm (-1 without a
     * query LoRA), kv_a_proj_with_mqa [kv_lora + rope, hidden] and its
     * norm, kv_b_proj [heads * (nope + v_dim), kv_lora]; the shape */
    int q_a, q_a_norm, kv_a, kv_a_norm, kv_b;
    coli__gpu_mla mla;
    int q_norm, k_norm; /* -1, or [1, head_dim] (per head) or [1, heads * head_dim] (whole) */
    int qk_norm;        /* 0 none, 1 per head, 2 over the whole projection */
    float clip_qkv;     /* > 0: q, k and v clipped to [-clip, clip] */
    int window;         /* > 0: sliding window of that many positions */
    int bq, bk, bv;     /* -1, or the q/k/v biases [1, heads * head_dim], [1, kv_heads * head_dim] x 2 */
    int is_moe;         /* 0: a dense layer (mlp), 1: a MoE layer (route, moe) */
    coli__mlp_kind mlp; /* COLI_MLP_SWIGLU: gate, up, down */
    coli__moe_kind moe; /* COLI_MOE_ROUTED: router, experts; ..._SHARED: also s_gate, s_up, s_down */
    int router;
    coli__gpu_route route; /* how the router chooses */
    int gate, up, down;
    /* [n_experts * 3]: gate, up, down of each routed expert; -1: the
     * host computes that expert (coli__gpu_host) */
    const int *experts;
    int s_gate, s_up, s_down; /* -1, or the shared experts as one SwiGLU of width net.shared_inter */
} coli__gpu_layer;

/* A whole decoder. */
typedef struct coli__gpu_net {
    int dev; /* the device every layer, the cache and the scratch live on */
    int hidden, n_heads, n_kv_heads, head_dim, rot_dim, vocab, n_layers;
    int n_experts, top_k, moe_inter, inter;
    int shared_inter; /* width of the shared experts (0: none) */
    float eps;
    int embed, final_norm, lm_head; /* embed: f32 or bf16 */
    coli__gpu_mla mla; /* row > 0: every layer's latent attention (sizes the cache and scratch) */
    const coli__gpu_layer *layers;
} coli__gpu_net;

/* Sizes of a pipe: a KV cache of n_ctx positions in kv_dt (COLI_DT_F32 or
 * COLI_DT_BF16), and chunks of up to chunk tokens. */
typedef struct coli__gpu_pipe_params {
    int n_ctx;
    coli__dtype kv_dt;
    int chunk;
    int phases; /* 1: time each phase with events (no graphs: slower) */
    int pdl;    /* 1: a kernel may start while the one before it ends (sm_90) */
    int poison; /* 1: the cache and scratch start as all-ones bytes (tests) */
} coli__gpu_pipe_params;

/* The experts a pipe leaves to the host: for every pair q = t * top_k + j
 * of the chunk with host[q] set, y[q] = the expert sel[q]'s output for
 * xn[t] (unweighted); other rows are not read. */
typedef struct coli__gpu_host {
    coli_status (*run)(void *user, int layer, const float *xn, int S, const int *sel, const unsigned char *host,
                       float *y, coli__err *err);
    void *user;
} coli__gpu_host;

/* Phases of a step (coli__gpu_pipe_stats.phase_ns), as COLI_GPU_PHASES
 * in colibri.h counts them. */
#define COLI__GPU_N_PHASES 8

/* What a pipe did (since creation). */
typedef struct coli__gpu_pipe_stats {
    uint64_t kv_bytes, scratch_bytes;
    uint64_t steps, tokens;
    uint64_t graph_launches, graph_captures;
    uint64_t host_syncs; /* layers that waited for the host's experts */
    uint64_t step_ns, host_ns;
    /* with phase timing on (coli__gpu_pipe_params.phases): device time of
     * each phase, in the order of coli_gpu_phase_name */
    uint64_t phase_ns[COLI__GPU_N_PHASES];
} coli__gpu_pipe_stats;

/* Settings of coli__gpu_init. */
typedef struct coli__gpu_params {
    const int *devices;  /* ordinals to use; NULL: device 0 */
    int n_devices;
    /* Fault injection for tests (COLI_GPU_FAIL_AFTER): after this many
     * successful fallible calls, every further one fails. < 0: never. */
    int64_t fail_after;
} coli__gpu_params;

/* Rows of logits a pipe run gives at most: a verification of
 * multi-token prediction (lib/context/speculate.c), its drafts and one. */
#define COLI__GPU_ALL_ROWS 9

/* What a pipe run gives back: the last token's logits [vocab], or with
 * all every token's [n, vocab] (n at most COLI__GPU_ALL_ROWS); with
 * hidden, every token's state after the final norm [n, hidden]. */
typedef struct coli__gpu_out {
    float *logits;
    int all;
    float *hidden;
} coli__gpu_out;

typedef struct coli__gpu_ops {
    /* "none", or the vendor and targets compiled in ("cuda sm_90",
     * "hip gfx1030,gfx90a"). Never fails. */
    const char *(*compiled)(void);
    /* Devices the runtime sees (0 with no driver or device: not an error).
     * info may be NULL; else it receives up to cap entries. */
    coli_status (*probe)(coli__gpu_devinfo *info, int cap, int *n_devices, coli__err *err);

    coli_status (*init)(const coli__gpu_params *p, coli__gpu **out, coli__err *err);
    void (*free)(coli__gpu *g);
    /* Devices of g: index 0 .. n-1 in the order of p->devices. */
    int (*n_devices)(const coli__gpu *g);
    coli_status (*device_info)(const coli__gpu *g, int dev, coli__gpu_devinfo *out, coli__err *err);

    /* Copies m to device dev (no computing, so that capacity shows at
     * load). *handle >= 0 names it from then on. */
    coli_status (*upload)(coli__gpu *g, int dev, const coli__gpu_mat *m, int *handle, coli__err *err);
    /* Overwrites a resident tensor in place: same format, shape and group,
     * else COLI_EINVAL and the tensor is unchanged. */
    coli_status (*update)(coli__gpu *g, int handle, const coli__gpu_mat *m, coli__err *err);
    /* Frees a resident tensor (unknown handles are ignored). */
    void (*release)(coli__gpu *g, int handle);
    /* Bytes a tensor of this shape and format takes on a device. */
    uint64_t (*tensor_bytes)(const coli__gpu_mat *m);

    /* y[S, rows] = x[S, cols] . W[rows, cols]^T with W = handle, host
     * buffers in and out. For quantized W: x is quantized as the CPU does
     * (docs/formats.md) and the result has the CPU's bits. */
    coli_status (*matmul)(coli__gpu *g, int handle, const float *x, int S, float *y, coli__err *err);
    /* Every job's gate and up products, SwiGLU, and down product, on device
     * dev: x [rows, H] in, y [rows, H] out (host buffers; rows = sum of
     * n_rows). One transfer each way. Same bits as the CPU expert path. */
    coli_status (*experts)(coli__gpu *g, int dev, const coli__gpu_expert *jobs, int n_jobs, const float *x,
                           float *y, coli__err *err);

    coli_status (*stats)(const coli__gpu *g, int dev, coli__gpu_stats *out, coli__err *err);

    /* The device-resident decoder (NULL in an implementation without
     * one). pipe_bytes: device bytes a pipe of these sizes takes beyond
     * the weights (KV cache and scratch). */
    uint64_t (*pipe_bytes)(const coli__gpu_net *net, const coli__gpu_pipe_params *p);
    coli_status (*pipe_create)(coli__gpu *g, const coli__gpu_net *net, const coli__gpu_pipe_params *p,
                               coli__gpu_pipe **out, coli__err *err);
    void (*pipe_free)(coli__gpu_pipe *pipe);
    /* n tokens at positions pos0 .. pos0 + n - 1: rope [n, rot_dim] the
     * host's tables (cos, then sin) of each position; out says what comes
     * back. Same bits as the CPU (docs/formats.md). */
    coli_status (*pipe_run)(coli__gpu_pipe *pipe, const int32_t *tokens, int n, int pos0, const float *rope,
                            const coli__gpu_out *out, const coli__gpu_host *host, coli__err *err);
    void (*pipe_stats)(const coli__gpu_pipe *pipe, coli__gpu_pipe_stats *out);
} coli__gpu_ops;

/* The implementation compiled into this library. */
const coli__gpu_ops *coli__gpu_backend(void);

#ifdef __cplusplus
}
#endif

#endif
