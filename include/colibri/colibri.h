/*
 * colibri.h - public API of libcolibri, a Mixture-of-Experts inference library.
 *
 * This header is the reference documentation of the API.
 *
 * Conventions
 *  - Every public symbol starts with coli_ (macros with COLI_).
 *  - Handles are opaque and come in create/free pairs; free(NULL) is a no-op.
 *  - Every fallible call returns a coli_status. 0 (COLI_OK) is success; every
 *    failure is negative. coli_strerror() names a status; the object the call
 *    was made on keeps a detail message (coli_model_errmsg, coli_context_errmsg)
 *    naming the file, tensor or option at fault.
 *  - The library never exits, aborts or prints. Diagnostics reach the caller
 *    only through the log callback set with coli_options_set_log().
 *
 * ABI rule: within one major version, published signatures and enum values
 * never change; new behaviour gets new names. The libtool -version-info is
 * bumped accordingly.
 *
 * Versioned structs: a struct that begins with size_t struct_size may grow
 * fields at its end in later versions; struct_size is the sizeof the
 * caller was built with.
 *  - Output structs (coli_model_info, coli_stats, coli_gpu_device,
 *    coli_gpu_stats, coli_store_stats): set struct_size; the library writes
 *    the fields that fit in it (older callers get their prefix, bytes past
 *    it are untouched) and leaves struct_size as it was. COLI_EINVAL if it
 *    cannot hold struct_size itself.
 *  - Input structs (coli_convert_params, coli_sampler_params,
 *    coli_generate_params): fill them with their _init function, which
 *    sets struct_size. A struct_size below the struct's first version is
 *    refused with COLI_EINVAL and a message naming the struct; a shorter
 *    one from an older version is accepted, its missing fields taking
 *    their defaults; a larger one (built against a newer header) is
 *    accepted when the bytes this library does not know are all zero.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(COLI_BUILDING_LIBRARY) && defined(__GNUC__)
#define COLI_API __attribute__((visibility("default")))
#else
#define COLI_API
#endif

/* ---- version --------------------------------------------------------- */

#define COLI_VERSION_MAJOR 0
#define COLI_VERSION_MINOR 1
#define COLI_VERSION_PATCH 0
#define COLI_VERSION_NUMBER \
    (COLI_VERSION_MAJOR * 10000 + COLI_VERSION_MINOR * 100 + COLI_VERSION_PATCH)
#define COLI_VERSION_STRING "0.1.0"

/* The version of the library actually loaded (may differ from the header). */
COLI_API unsigned coli_version_number(void);
COLI_API const char *coli_version_string(void);

/* ---- status codes ---------------------------------------------------- */

/* X(NAME, value, description): one table for codes and messages. */
#define COLI_STATUS_MAP(X)                                                  \
    X(OK, 0, "success")                                                     \
    X(EINVAL, -1, "invalid argument")                                       \
    X(ENOMEM, -2, "out of memory")                                          \
    X(EIO, -3, "input/output error")                                        \
    X(ENOENT, -4, "file or tensor not found")                               \
    X(EFORMAT, -5, "malformed or corrupt file")                             \
    X(EUNSUPPORTED, -6, "unsupported model, format or option")              \
    X(ERANGE, -7, "value out of range")                                     \
    X(ENOSPC, -8, "buffer or context too small")                            \
    X(ESTATE, -9, "object is not in a usable state")                        \
    X(ECANCELED, -10, "stopped by the caller")                              \
    X(EGPU, -11, "GPU error")

typedef enum coli_status {
#define COLI_STATUS_ENUM_(name, val, msg) COLI_##name = (val),
    COLI_STATUS_MAP(COLI_STATUS_ENUM_)
#undef COLI_STATUS_ENUM_
    COLI_STATUS_MIN_ = -11
} coli_status;

/* A static string describing status; never NULL. */
COLI_API const char *coli_strerror(int status);
/* The name of the status ("COLI_EINVAL"); never NULL. */
COLI_API const char *coli_status_name(int status);

/* ---- compile-time features ------------------------------------------- */

typedef enum coli_feature {
    COLI_FEATURE_GPU = 1, /* a GPU tier (CUDA or HIP) was compiled in */
    COLI_FEATURE_CUDA = 2,
    COLI_FEATURE_HIP = 3,
    COLI_FEATURE_THREADS = 4
} coli_feature;

/* 1 if the feature was compiled in, else 0. */
COLI_API int coli_has_feature(coli_feature feature);
/* 1 if the CPU kernel set (a value of COLI_OPT_CPU_KERNELS: 1 scalar,
 * 2 avx2, 3 avx512, 4 amx) runs on this CPU with this build, else 0. */
COLI_API int coli_cpu_kernels_usable(int64_t set);

/* ---- logging --------------------------------------------------------- */

typedef enum coli_log_level {
    COLI_LOG_ERROR = 0,
    COLI_LOG_WARN = 1,
    COLI_LOG_INFO = 2,
    COLI_LOG_DEBUG = 3
} coli_log_level;

typedef void (*coli_log_fn)(void *user, coli_log_level level, const char *message);

/* ---- options --------------------------------------------------------- */

typedef struct coli_options coli_options;

/* Storage of weights in memory. AUTO keeps what the checkpoint stores
 * (bf16/f16 are widened row by row as they are used); F32 widens everything
 * once at load; BF16 narrows f32 checkpoints. Q8, Q4 and Q2 quantize the
 * large matrices at load (docs/formats.md; router, norms and embeddings keep
 * their precision, the output projection becomes q8). */
typedef enum coli_weight_format {
    COLI_WEIGHTS_AUTO = 0,
    COLI_WEIGHTS_F32 = 1,
    COLI_WEIGHTS_BF16 = 2,
    COLI_WEIGHTS_Q8 = 3,
    COLI_WEIGHTS_Q4 = 4,
    COLI_WEIGHTS_Q2 = 5
} coli_weight_format;

/* A static name of a format: "auto", "f32", "bf16", "q8", "q4", "q2" (the
 * names coli_model_info and the coli tool use), "unknown" for any other
 * value; never NULL. */
COLI_API const char *coli_weight_format_name(coli_weight_format fmt);

/* Storage of a context's KV cache (COLI_OPT_KV_TYPE; docs/formats.md, "The
 * KV cache"). F32 keeps keys and values as computed; BF16 rounds each to
 * bf16 (to nearest, ties to even) when it is stored, halving the cache, and
 * widens it exactly when read: logits then differ slightly from F32's, the
 * same on every CPU kernel set. */
typedef enum coli_kv_type {
    COLI_KV_F32 = 0,
    COLI_KV_BF16 = 1
} coli_kv_type;

typedef enum coli_option {
    COLI_OPT_WEIGHTS = 1,   /* coli_weight_format; default AUTO */
    COLI_OPT_THREADS = 2,   /* worker threads; 0 = number of online cores */
    COLI_OPT_CONTEXT = 3,   /* KV cache positions per context; 0 (default) = the model's
                               max_position_embeddings. A context beyond it is refused
                               (COLI_ERANGE), as is one whose KV cache RAM cannot hold
                               (COLI_ENOMEM, naming the bytes and the positions that fit);
                               the cache is allocated but its pages are only used as
                               positions are filled */
    COLI_OPT_MEM_BUDGET_MB = 4, /* RAM for the weights of a converted model (coli_convert):
                                   dense weights, then as many expert slots as fit; the
                                   other experts are read from disk when routed to.
                                   0 = no limit (the whole file is mapped) */
    COLI_OPT_Q4_GROUP = 5,  /* group size of q4 weights: 32 (default), 64 or 128 */
    /* The GPU expert tier (routed experts resident on GPUs; see "GPU expert
     * tier" below). For these, -1 (the default) means "not set": the
     * environment variable named decides, and an option set here wins over
     * it. A malformed variable makes coli_model_open fail, naming it. */
    COLI_OPT_GPU = 6,            /* 1 on, 0 off; -1: COLI_CUDA=1 turns it on (default off) */
    COLI_OPT_GPU_EXPERT_MB = 7,  /* MiB of each device's memory for experts; -1: CUDA_EXPERT_GB=G
                                    (GiB, may be fractional), else the device's free memory
                                    less 10 % of it (at most 1 GiB) */
    COLI_OPT_GPU_RELEASE_HOST = 8, /* 1: drop the host copy of each expert once uploaded; -1:
                                     CUDA_RELEASE_HOST=1 (default 0) */
    /* The expert store of converted models ("Expert store" below). */
    COLI_OPT_EXPERT_SLOTS = 9,   /* experts held in RAM; 0 (default): as many as
                                    COLI_OPT_MEM_BUDGET_MB leaves room for */
    COLI_OPT_PREFETCH = 10,      /* 1 (default): read the experts the next layer's router
                                    predicts while a layer runs; 0: only on demand */
    COLI_OPT_IO_THREADS = 11,    /* threads reading experts from disk (default 4) */
    COLI_OPT_HOTSET = 12,        /* 1 (default): read and update model.coli.hot, the
                                    routing counts that pick the pinned hot set; 0: off */
    COLI_OPT_CPU_KERNELS = 13,   /* CPU kernel set, per model: 1 scalar, 2 avx2, 3 avx512
                                    (AVX-512 VNNI), 4 amx (AMX-INT8 tiles for prefill, else
                                    avx512); 0 (default): COLI_CPU=scalar|avx2|avx512|amx,
                                    else the best this CPU has. Every set gives the same bits;
                                    one this CPU or build lacks makes coli_model_open fail */
    COLI_OPT_KV_TYPE = 14,       /* coli_kv_type of the KV cache, per context; -1 (default):
                                    COLI_KV_TYPE=f32|bf16, else COLI_KV_F32. A malformed
                                    variable makes coli_model_open (or coli_context_create)
                                    fail, naming it */
    COLI_OPT_GPU_LAYERS = 15,    /* with the GPU tier on: 1 (default) runs whole layers on the
                                    first device (dense weights and each context's KV cache
                                    there, placed before experts) when they fit; 0 keeps only
                                    experts (and the output projection) on the devices */
    /* Multi-token prediction ("Multi-token prediction" below), for models
     * that store an MTP layer (GLM-4.5: num_nextn_predict_layers). */
    COLI_OPT_MTP = 16,           /* drafts per step, 0 (default) to 8. For coli_model_open, above
                                    0 loads the MTP layer (a model without one is refused,
                                    COLI_EUNSUPPORTED); for a context, 0 turns drafting off, and
                                    above 0 needs a model opened with it */
    COLI_OPT_MTP_GUARD = 17      /* 1 (default): drafting turns itself off while its measured
                                    cost per token exceeds plain decoding's, and tries again
                                    later; 0: always draft (acceptance then depends on nothing
                                    but the model and the prompt) */
} coli_option;

COLI_API coli_status coli_options_create(coli_options **out);
COLI_API void coli_options_free(coli_options *opts);
/* Sets an integer option. COLI_ERANGE if value is outside coli_option_bounds. */
COLI_API coli_status coli_options_set(coli_options *opts, coli_option opt, int64_t value);
COLI_API coli_status coli_options_get(const coli_options *opts, coli_option opt, int64_t *value);
COLI_API coli_status coli_option_bounds(coli_option opt, int64_t *min, int64_t *max);
/* Log callback used by models opened with these options (and their contexts).
 * max_level filters: messages above it are not formatted at all. */
COLI_API coli_status coli_options_set_log(coli_options *opts, coli_log_fn fn, void *user,
                                          coli_log_level max_level);

/*
 * Devices of the GPU expert tier: "0,1" (distinct ordinals as the runtime
 * numbers them, at most 16), or NULL for "not set": then COLI_GPUS=0,1 or
 * COLI_GPU=N decide, else every visible device is used. COLI_EINVAL for a
 * malformed list (nothing changes).
 */
COLI_API coli_status coli_options_set_gpu_devices(coli_options *opts, const char *list);

/* ---- quantization ---------------------------------------------------- */

/*
 * Bytes that rows x cols weights take in a quantized format (fmt Q8, Q4 or
 * Q2; group: the q4 group size, 32, 64 or 128; ignored otherwise), laid out
 * as docs/formats.md says: quants, then scales, then (q2) minimums.
 * 0 if the arguments are invalid (cols must be a multiple of 32 and of group).
 */
COLI_API size_t coli_quant_size(coli_weight_format fmt, int group, size_t rows, size_t cols);
/*
 * Quantizes src[rows * cols] into dst (cap bytes; coli_quant_size needed).
 * COLI_EINVAL for invalid arguments or when src holds a NaN or an infinity,
 * COLI_ERANGE for values beyond the fp16 range of the scales, COLI_ENOSPC
 * if cap is too small. A refused src leaves no partial result: dst is then
 * all zeros (argument errors leave it untouched).
 */
COLI_API coli_status coli_quantize(coli_weight_format fmt, int group, const float *src, size_t rows,
                                   size_t cols, void *dst, size_t cap);
/* Expands quantized weights back to dst[rows * cols]. */
COLI_API coli_status coli_dequantize(coli_weight_format fmt, int group, const void *src, size_t size,
                                     size_t rows, size_t cols, float *dst);

/* ---- conversion ------------------------------------------------------ */

/* Progress of a conversion: bytes written of total. Nonzero stops it. */
typedef int (*coli_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Fields may be appended: fill with coli_convert_params_init(&p, sizeof p). */
typedef struct coli_convert_params {
    size_t struct_size;
    coli_weight_format weights;  /* BF16, Q8, Q4 (default) or Q2 */
    int q4_group;                /* 32 (default), 64 or 128 */
    int threads;                 /* 0 (default): online cores */
    int overwrite;               /* nonzero: replace an existing model.coli in the output */
    coli_progress_fn progress;   /* may be NULL; called by one thread at a time */
    void *user;
} coli_convert_params;

COLI_API void coli_convert_params_init(coli_convert_params *p, size_t struct_size);

/*
 * Converts the Hugging Face checkpoint in model_dir into a streaming
 * container in out_dir (created if missing; docs/container.md): config
 * and tokenizer files copied, model.coli holding every weight in the bytes
 * the loader makes for params->weights, experts one aligned record each.
 * Memory use is bounded by the threads times the largest tensor, not by
 * the model. model.coli appears only once complete (written under a
 * temporary name, synced, renamed). On failure errbuf (errcap bytes, may
 * be NULL) names the file, tensor or option at fault; COLI_ECANCELED when
 * progress asked to stop. Nothing partial is left behind.
 */
COLI_API coli_status coli_convert(const char *model_dir, const char *out_dir, const coli_convert_params *params,
                                  char *errbuf, size_t errcap);

/* ---- model ----------------------------------------------------------- */

typedef struct coli_model coli_model;

/*
 * Opens a Hugging Face model directory (config.json, model.safetensors or a
 * sharded index, tokenizer.json, optional generation_config.json and
 * tokenizer_config.json). opts may be NULL for defaults.
 *
 * Like sqlite3_open: unless memory runs out, *out receives a handle even when
 * opening fails, so that coli_model_errmsg() can say what went wrong; such a
 * handle refuses every other call with COLI_ESTATE. Always coli_model_free().
 */
COLI_API coli_status coli_model_open(const char *dir, const coli_options *opts, coli_model **out);
COLI_API void coli_model_free(coli_model *model);
/*
 * Detail of the last failure on this model ("" if none), valid until the
 * next call. Once a model is open, failures of calls on it (tokenize,
 * context creation...) are kept per thread, so threads sharing a model do
 * not see (or overwrite) each other's messages.
 */
COLI_API const char *coli_model_errmsg(const coli_model *model);

/* Fields may be appended in later versions: callers set struct_size to the
 * sizeof they were built with and get that many bytes filled in. */
typedef struct coli_model_info {
    size_t struct_size;          /* set by the caller to sizeof(coli_model_info) */
    const char *architecture;    /* e.g. "Qwen3MoeForCausalLM" */
    int n_layers;
    int n_moe_layers;
    int hidden_size;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int vocab_size;
    int n_experts;               /* per MoE layer */
    int n_experts_active;        /* experts per token */
    int moe_intermediate_size;
    int max_positions;
    int64_t n_params_total;
    int64_t n_params_active;     /* parameters touched per token */
    uint64_t weight_bytes;       /* bytes of weights held, in the loaded format */
    coli_weight_format weights;  /* the format asked for; AUTO is resolved to F32 or
                                    BF16 when the checkpoint holds only that, and stays
                                    AUTO for f16 or mixed checkpoints */
    const char *weights_name;    /* "f32", "bf16", "q8", "q4", "q2", "f16" or "mixed" */
    int32_t bos_id;              /* -1 if none */
    int32_t eos_id;              /* first end-of-sequence id, -1 if none */
    const char *weights_detail;  /* format of each kind of matrix, e.g.
                                    "attention q4, experts q4, router bf16, ..." */
    int gpu_devices;             /* devices the GPU expert tier uses; 0: not in use */
    const char *gpu_detail;      /* "off", "not in use: <why>" when it was asked for but
                                    could not start, or the tier, devices and experts held */
    const char *store_detail;    /* where routed experts live in host memory: "resident"
                                    (a checkpoint), "mapped: ..." or "streamed: N of M experts
                                    in RAM, ..." (a converted model; see coli_model_store_stats) */
    const char *cpu_kernels;     /* the CPU kernel set: quantized products ("avx512vnni",
                                    "avx2" or "scalar"), then the float path, e.g.
                                    "avx512vnni, float avx512" */
    /* Appended later (a caller with an older struct_size does not get them): */
    uint64_t kv_bytes_per_position; /* KV cache bytes of one position (keys and values, in
                                       kv_type) */
    int64_t context_positions;   /* positions of a context created with the model's options */
    uint64_t kv_bytes;           /* its KV cache: context_positions x kv_bytes_per_position */
    coli_kv_type kv_type;        /* its KV cache's type (COLI_OPT_KV_TYPE, or COLI_KV_TYPE) */
    /* Appended later still: the family's pieces (GLM-4.5 and the like) */
    const char *router;          /* "softmax" or "sigmoid" (a correction bias for choosing) */
    int n_expert_groups;         /* groups the sigmoid router splits experts into (1: none) */
    int n_expert_groups_active;  /* of which it chooses among the best this many */
    float routed_scaling;        /* factor of the routing weights (1 for softmax routers) */
    int shared_intermediate_size; /* width of the always-on shared experts; 0: none */
    int intermediate_size;       /* width of the dense layers' MLP; 0: no dense layer */
    int rotary_dim;              /* dimensions of each head RoPE rotates (head_dim or fewer) */
    int qkv_bias;                /* 1 when q, k and v have biases */
    int n_mtp_layers;            /* multi-token-prediction layers the checkpoint stores */
    int mtp_loaded;              /* 1: the first of them is loaded (COLI_OPT_MTP), its weights
                                    counted in weight_bytes and n_params_total */
    /* Appended later still: latent attention (DeepSeek-V3, Kimi-K2) and YaRN */
    const char *attention;       /* "gqa" (grouped-query) or "mla" (multi-head latent: the
                                    cache holds one latent and one rotary key a position) */
    int kv_lora_rank;            /* mla: the latent's width; 0 otherwise */
    int q_lora_rank;             /* mla: the query's LoRA rank; 0: none (or not mla) */
    int v_head_dim;              /* a head's value width (head_dim but for mla) */
    const char *rope_scaling;    /* "none" or "yarn" */
    float rope_factor;           /* yarn: its factor; 1 otherwise */
    int rope_original_positions; /* yarn: original_max_position_embeddings; 0 otherwise */
    /* Appended later still: DeepSeek sparse attention (GLM-5) */
    int index_topk;              /* the most past positions a token attends (its indexer's
                                    choice); 0: dense attention */
    int index_heads;             /* the indexer's query heads; 0 without one */
    int index_head_dim;          /* its heads' and its cached key's width */
    int index_shared_layers;     /* layers reusing an earlier layer's choice (GLM-5.2) */
} coli_model_info;

COLI_API coli_status coli_model_get_info(const coli_model *model, coli_model_info *info);
/*
 * Bytes the weights take (or would take) in memory when loaded in format
 * fmt: COLI_WEIGHTS_AUTO gives the checkpoint's own formats (a converted
 * model's: the format model.coli holds); Q4 uses the
 * q4 group size the model was opened with. Norm vectors always count as f32. The active bytes per token follow the same rule for
 * the parameters in n_params_active. Either output may be NULL.
 */
COLI_API coli_status coli_model_weight_bytes(const coli_model *model, coli_weight_format fmt,
                                             uint64_t *total, uint64_t *active);

/* 1 if id ends generation (any of the eos ids of the model's config files). */
COLI_API int coli_model_is_eos(const coli_model *model, int32_t id);

/* ---- tokenizer ------------------------------------------------------- */

/*
 * Encodes UTF-8 text. add_special: apply the tokenizer's post-processor
 * (e.g. a leading <s>) as Hugging Face does by default.
 * Writes at most cap ids; *n_ids receives the number needed. If cap is too
 * small, returns COLI_ENOSPC (ids holds the first cap ids).
 */
COLI_API coli_status coli_tokenize(coli_model *model, const char *text, size_t len,
                                   int add_special, int32_t *ids, size_t cap, size_t *n_ids);
/*
 * Decodes ids to UTF-8, skipping special tokens if skip_special. Ids that
 * the model's vocabulary has but its tokenizer lacks (checkpoints pad
 * vocab_size) decode to nothing; ids outside the vocabulary are refused. Like
 * snprintf: *len receives the length of the text (without NUL); if it is
 * below cap, buf holds the text and a NUL; otherwise COLI_ENOSPC, and buf
 * (if cap > 0) holds the first cap - 1 bytes and a NUL.
 */
COLI_API coli_status coli_detokenize(coli_model *model, const int32_t *ids, size_t n_ids,
                                     int skip_special, char *buf, size_t cap, size_t *len);

/*
 * The model's chat template, NUL-terminated, owned by the model: the
 * chat_template of tokenizer_config.json (a string, or the entry named
 * "default" of a list of {name, template}), else chat_template.jinja in
 * the model directory. NULL when the model has none.
 */
COLI_API const char *coli_model_chat_template(const coli_model *model);
/*
 * The text of a special token named in tokenizer_config.json ("bos_token",
 * "eos_token", ...: a string or an object with "content"), owned by the
 * model; NULL when absent. Chat templates use bos_token and eos_token.
 */
COLI_API const char *coli_model_special_text(const coli_model *model, const char *name);

/* ---- chat templates ---------------------------------------------------
 *
 * An engine of the Jinja subset that Hugging Face chat templates use
 * (docs/templates.md), run the way transformers runs them: trim_blocks and
 * lstrip_blocks on, break/continue, raise_exception(), strftime_now(), and
 * tojson as Python's json.dumps with ensure_ascii=False. It reaches
 * nothing outside the variables it is given (no files, no environment),
 * and loops, recursion and output are bounded.
 */
typedef struct coli_chat_template coli_chat_template;

/* Compiles a template (source need not be NUL-terminated). On failure
 * errbuf (errcap bytes, may be NULL) gives the line, column and reason:
 * COLI_EFORMAT for a syntax error or an unknown filter or test,
 * COLI_ERANGE for nesting beyond the bound. A compiled template is only
 * read by renders: several threads may render it at once. */
COLI_API coli_status coli_chat_template_compile(const char *source, size_t len, coli_chat_template **out,
                                                char *errbuf, size_t errcap);
COLI_API void coli_chat_template_free(coli_chat_template *tmpl);
/*
 * Renders with the members of vars_json, a JSON object, as the template's
 * variables: typically messages, tools, add_generation_prompt, bos_token,
 * eos_token and chat_template_kwargs' members such as enable_thinking. On
 * success *out is a NUL-terminated string to release with coli_free() and
 * *out_len (may be NULL) its length. A raise_exception() in the template
 * or an error at run time gives COLI_EINVAL with its message and line in
 * errbuf; malformed vars_json gives COLI_EFORMAT; exceeding a bound
 * gives COLI_ERANGE.
 */
COLI_API coli_status coli_chat_template_render(const coli_chat_template *tmpl, const char *vars_json, size_t len,
                                               char **out, size_t *out_len, char *errbuf, size_t errcap);
/* Releases memory the library returned to the caller (rendered text). */
COLI_API void coli_free(void *p);

/* ---- context --------------------------------------------------------- */

typedef struct coli_context coli_context;

/* A context holds a KV cache and scratch; opts may be NULL (model's options). */
COLI_API coli_status coli_context_create(coli_model *model, const coli_options *opts,
                                         coli_context **out);
COLI_API void coli_context_free(coli_context *ctx);
COLI_API const char *coli_context_errmsg(const coli_context *ctx);

/*
 * Appends n tokens at the current position and runs the model on them
 * (prefill when n > 1, decode when n == 1). Afterwards coli_context_logits()
 * gives the next-token logits of the last of them. COLI_ERANGE if a logit
 * comes out NaN or infinite (weights or activations overflowing): the n
 * positions are then not kept.
 */
COLI_API coli_status coli_eval(coli_context *ctx, const int32_t *tokens, size_t n);
/*
 * Evaluates several contexts of one model in one pass: item i appends its
 * n tokens to its ctx, as coli_eval would. Each context's logits, KV cache
 * and position come out exactly as coli_eval on it alone would leave them
 * (the same bits), but every weight, and each routed expert, is read once
 * for all the tokens that need it. The contexts must be distinct and of
 * one model; items with n == 0 are skipped. Everything is checked before
 * anything runs: on a refusal no context changes, and the context at fault
 * (or the first one) holds the message. A context whose logits come out
 * NaN or infinite does not keep its new positions and holds the message
 * (COLI_ERANGE); the others do. Contexts whose layers run on a GPU, or
 * that draft with COLI_OPT_MTP, are evaluated one after another. Callers
 * can tell which contexts moved on by coli_context_position().
 */
typedef struct coli_batch_item {
    coli_context *ctx;
    const int32_t *tokens;
    size_t n;
} coli_batch_item;
COLI_API coli_status coli_eval_batch(const coli_batch_item *items, size_t count);
/* vocab_size floats of the last evaluated position, or NULL before any eval. */
COLI_API const float *coli_context_logits(const coli_context *ctx);
COLI_API size_t coli_context_position(const coli_context *ctx);
COLI_API size_t coli_context_capacity(const coli_context *ctx);
/* Forgets all positions at or after n (n <= position). */
COLI_API coli_status coli_context_truncate(coli_context *ctx, size_t n);
COLI_API void coli_context_reset(coli_context *ctx);

/* ---- sampling -------------------------------------------------------- */

/*
 * The sampler settings (a versioned input struct: see "Versioned structs"
 * at the top). Fill it with coli_sampler_params_init(&p, sizeof p), then
 * change what you need. The steps run in this order on the logits of one position:
 *   1. repetition penalty: each distinct token among the last repeat_last_n
 *      tokens the sampler has seen (coli_sampler_accept, and every token it
 *      picked) has its logit divided by repeat_penalty if positive, else
 *      multiplied by it (as in the CTRL paper and llama.cpp);
 *   2. greedy (temperature <= 0 or top_k == 1): the largest logit, lowest
 *      id on ties; otherwise
 *   3. softmax at the temperature, then top_k, then top_p (the smallest
 *      set of most likely tokens whose mass reaches top_p), then min_p
 *      (drop tokens less likely than min_p times the most likely one), and
 *      a draw from what is left.
 * Every setting at its default leaves its step out.
 */
typedef struct coli_sampler_params {
    size_t struct_size;   /* sizeof the caller's struct: set by coli_sampler_params_init */
    float temperature;    /* <= 0: greedy (default 0) */
    int top_k;            /* <= 0: off (default 0) */
    float top_p;          /* in (0, 1]; 1: off (default 1) */
    float min_p;          /* in [0, 1]; 0: off (default 0) */
    float repeat_penalty; /* > 0; 1: off (default 1) */
    int repeat_last_n;    /* tokens the penalty looks back on, 0..1048576 (default 64) */
    uint64_t seed;        /* default 0 */
    /* Appended later: OpenAI's penalties, step 1b (after the repetition
     * penalty): each distinct token among the same last repeat_last_n has
     * count * frequency_penalty + presence_penalty subtracted from its
     * logit, count being its occurrences there. Each in [-2, 2]; 0: off. */
    float frequency_penalty;
    float presence_penalty;
} coli_sampler_params;

/* Sets *p to the defaults above, writing at most struct_size bytes (pass
 * sizeof *p); p->struct_size receives struct_size. */
COLI_API void coli_sampler_params_init(coli_sampler_params *p, size_t struct_size);

typedef struct coli_sampler coli_sampler;

/* A sampler with these settings (NULL: every default). COLI_EINVAL (and no
 * sampler) if a value is outside the ranges above or struct_size breaks the
 * rule for input structs. */
COLI_API coli_status coli_sampler_create(const coli_sampler_params *params, coli_sampler **out);
COLI_API void coli_sampler_free(coli_sampler *s);
/* Picks a token from the context's current logits and remembers it for the
 * repetition penalty. COLI_ERANGE if a logit is NaN or infinite. */
COLI_API coli_status coli_sample(coli_sampler *s, const coli_context *ctx, int32_t *token);
/* Remembers n tokens (a prompt, say) for the repetition penalty. */
COLI_API coli_status coli_sampler_accept(coli_sampler *s, const int32_t *tokens, size_t n);
/* Forgets the remembered tokens and restarts the random stream from the seed. */
COLI_API void coli_sampler_reset(coli_sampler *s);

/*
 * Called once per generated token with the newly decodable UTF-8 text
 * (possibly empty while a multi-byte character is incomplete). Return
 * nonzero to stop generation. While it runs the token is not yet evaluated:
 * coli_context_logits() of the generating context gives the raw logits the
 * token was sampled from.
 */
typedef int (*coli_token_fn)(void *user, int32_t token, const char *text, size_t len);

/* Why a generation ended. */
typedef enum coli_stop_reason {
    COLI_STOP_NONE = 0,     /* it failed (see the status), or has not run */
    COLI_STOP_EOS = 1,      /* an end-of-sequence token was sampled */
    COLI_STOP_LENGTH = 2,   /* max_tokens tokens were generated */
    COLI_STOP_CONTEXT = 3,  /* the context is full */
    COLI_STOP_STRING = 4,   /* the text reached one of the stop strings */
    COLI_STOP_CALLBACK = 5  /* on_token returned nonzero */
} coli_stop_reason;

/* A static name of a stop reason ("eos", "length", "context", "stop",
 * "callback", "none"); never NULL. */
COLI_API const char *coli_stop_reason_name(coli_stop_reason reason);

/* Settings of coli_generate (a versioned input struct: see "Versioned
 * structs" at the top). Fill it with coli_generate_params_init(&p, sizeof p). */
typedef struct coli_generate_params {
    size_t struct_size;       /* set by coli_generate_params_init */
    size_t max_tokens;        /* default 64 */
    int ignore_eos;           /* nonzero: an end-of-sequence token does not stop */
    const char *const *stop;  /* n_stop NUL-terminated stop strings (may be NULL) */
    size_t n_stop;
    coli_token_fn on_token;   /* may be NULL */
    void *user;               /* passed to on_token */
} coli_generate_params;

/* Sets *p to the defaults, writing at most struct_size bytes. */
COLI_API void coli_generate_params_init(coli_generate_params *p, size_t struct_size);

/*
 * Evaluates the prompt, then samples and evaluates up to params->max_tokens
 * tokens, stopping early at an end-of-sequence token (unless ignore_eos),
 * when the context is full, at a stop string, or when on_token returns
 * nonzero (that token is reported and counted but not evaluated; stopping
 * is not an error). Generated ids are written to out (if not NULL, up to
 * cap) and counted in *n_out. on_token may be NULL; the text it receives,
 * concatenated, is the decoding of the generated tokens in the context of
 * the prompt (special tokens skipped). Also:
 *  - it stops cleanly when the context is full: the token sampled from the
 *    last position is reported and counted but not evaluated
 *    (COLI_STOP_CONTEXT); a prompt that does not fit is still an error;
 *  - with stop strings, the reported text ends just before the first
 *    occurrence of any of them (text that may begin one is held back until
 *    it is decided); the ids in out include the tokens that made it;
 *  - *reason (may be NULL) says why it ended; COLI_STOP_NONE on failure,
 *    where *n_out still counts the tokens generated before it.
 * The prompt is fed to the sampler's repetition history, and its tokens
 * count as prefill in the statistics, even when there is only one.
 */
COLI_API coli_status coli_generate(coli_context *ctx, const int32_t *prompt, size_t n_prompt,
                                   coli_sampler *sampler, const coli_generate_params *params,
                                   int32_t *out, size_t cap, size_t *n_out, coli_stop_reason *reason);

/* ---- streamed text ---------------------------------------------------- */

typedef struct coli_text_stream coli_text_stream;
/* Streamed text of generated tokens exactly as coli_generate reports it to
 * on_token: decoded in the context of up to a few previous ids (context,
 * n_context: the prompt's tail), only text later tokens cannot change,
 * special tokens skipped, and with stop strings the text ends just before
 * the first occurrence of any of them (text that may begin one is held
 * back). stop may be NULL; the strings are copied. For callers that drive
 * generation themselves (coli_eval_batch). */
COLI_API coli_status coli_text_stream_create(coli_model *model, const int32_t *context, size_t n_context,
                                             const char *const *stop, size_t n_stop, coli_text_stream **out);
/* Adds a generated token. *text and *len: the newly reportable text (owned by
 * the stream, valid until the next call); *stopped: 1 once a stop string
 * is complete (nothing after it is reported). */
COLI_API coli_status coli_text_stream_push(coli_text_stream *s, int32_t token, const char **text, size_t *len,
                                           int *stopped);
/* At the end of generation: the text still held back (a partial stop
 * string, an unfinished character). */
COLI_API coli_status coli_text_stream_flush(coli_text_stream *s, const char **text, size_t *len);
COLI_API void coli_text_stream_free(coli_text_stream *s);

/* ---- statistics ------------------------------------------------------ */

/* A versioned output struct: set struct_size to sizeof(coli_stats). */
typedef struct coli_stats {
    size_t struct_size;
    uint64_t prefill_tokens;   /* tokens evaluated in batches of more than one */
    uint64_t decode_tokens;    /* tokens evaluated one at a time */
    double prefill_seconds;
    double decode_seconds;
    double prefill_tok_s;      /* 0 if nothing was prefilled */
    double decode_tok_s;
    uint64_t decode_weight_bytes; /* weight bytes read by decode steps: dense part plus routed experts */
    /* Appended later; the state of the context now, not reset by coli_context_stats_reset: */
    uint64_t context_positions;   /* positions the context holds (coli_context_capacity) */
    uint64_t context_used;        /* of them, filled (coli_context_position) */
    uint64_t kv_bytes;            /* bytes of its KV cache (the pages used grow with context_used) */
    /* Appended later: multi-token prediction (COLI_OPT_MTP). A step drafts,
     * then verifies the drafts with one pass of the decoder; its tokens
     * count in decode_tokens, its time in decode_seconds. */
    uint64_t mtp_steps;           /* verification passes */
    uint64_t mtp_drafted;         /* tokens drafted by the MTP layer */
    uint64_t mtp_accepted;        /* of them, accepted */
    uint64_t mtp_tokens;          /* tokens the verification passes gave: accepted drafts plus one each */
    uint64_t mtp_plain_tokens;    /* tokens decoded without drafts while drafting was on: turned off by
                                     the guard, its measurements, or no room left to draft */
    uint64_t mtp_extra_experts;   /* routed experts the verification passes read beyond those one token
                                     each would (the union of the drafts' experts; CPU tiers) */
    uint64_t mtp_guard_offs;      /* times the guard found drafting slower and turned it off */
    double mtp_accept_rate;       /* mtp_accepted / mtp_drafted, 0 without drafts */
    double mtp_tokens_per_step;   /* mtp_tokens / mtp_steps, 0 without steps */
    int mtp_drafts;               /* drafts per step now: COLI_OPT_MTP, fewer where a draft position is
                                     rarely accepted, 0 while the guard has drafting off or MTP is off */
} coli_stats;

COLI_API coli_status coli_context_stats(const coli_context *ctx, coli_stats *stats);

/* The MTP layer's logits [vocab] for the token after next, where next is
 * the token that follows the positions evaluated: what a step would draft
 * from (the most likely of them). Needs a context with COLI_OPT_MTP above
 * 0 and at least one position evaluated (COLI_ESTATE otherwise). Nothing
 * is evaluated by the decoder; the context's logits stay as they are. */
COLI_API coli_status coli_context_mtp_logits(coli_context *ctx, int32_t next, float *logits);
/* Also resets the context's counts in coli_gpu_stats. */
COLI_API void coli_context_stats_reset(coli_context *ctx);

/* ---- GPU expert tier --------------------------------------------------
 *
 * With COLI_OPT_GPU on (or COLI_CUDA=1), coli_model_open places routed
 * experts whole on the chosen devices, within COLI_OPT_GPU_EXPERT_MB each
 * (expert e of every layer before expert e + 1, so that every layer gets
 * about the same share), and uploads them; the rest run on the CPU. An
 * expert that does not fit stays on the CPU, logged, not an error. If the
 * tier is not compiled in or no device is usable, the model opens anyway
 * with a warning in the log and coli_model_info's gpu_devices is 0.
 * Results do not depend on placement: logits in every format are the same
 * bits with and without a GPU. A device call that fails at run time is
 * logged (once per device and kind of failure) and its experts are
 * computed on the CPU for that call; after 3 failures in a row the device
 * is no longer used. With COLI_OPT_GPU_RELEASE_HOST, host copies that the
 * loader made (quantized or converted weights) are freed after upload and
 * rebuilt from the checkpoint if the CPU ever needs them; weights used as
 * stored (COLI_WEIGHTS_AUTO) are mapped from the checkpoint, so there is
 * nothing to release. COLI_GPU_FAIL_AFTER=N makes every device call after
 * the first N fail: for tests of that fallback only. COLI_GPU_POISON=1
 * fills a context's device buffers with all-ones bytes (NaN) when they
 * are made, so that a test sees any read of what no step wrote.
 */

/* The tier compiled into the library: "none", or e.g. "cuda sm_90". */
COLI_API const char *coli_gpu_tier(void);

/* Fields may be appended: set struct_size to sizeof(coli_gpu_device). */
typedef struct coli_gpu_device {
    size_t struct_size;
    int ordinal;           /* as the runtime numbers it */
    char name[96];         /* "NVIDIA H200" */
    char arch[32];         /* "sm_90", "gfx1030" */
    int wave;              /* threads per warp or wavefront */
    uint64_t free_bytes, total_bytes;
} coli_gpu_device;

/* Devices the tier sees (0 without a tier, driver or device: not an error). */
COLI_API coli_status coli_gpu_count(int *n_devices);
/* Device index (0 .. count-1); COLI_ERANGE beyond. */
COLI_API coli_status coli_gpu_device_get(int index, coli_gpu_device *info);

/* Devices the model's tier uses (0: every expert runs on the CPU). */
COLI_API int coli_model_gpu_devices(const coli_model *model);

/* Fields may be appended: set struct_size to sizeof(coli_gpu_stats). */
#define COLI_GPU_N_PHASES 8

typedef struct coli_gpu_stats {
    size_t struct_size;
    int ordinal;
    char name[96];
    int usable;                 /* 0 once the device was given up after failures */
    uint64_t resident_experts;  /* experts held on the device */
    uint64_t resident_bytes;    /* their bytes (the output projection, when it is
                                   held too, is named in gpu_detail) */
    /* Since the model was opened, for every context: */
    uint64_t calls, rows, failures;
    uint64_t h2d_ns, kernel_ns, d2h_ns;   /* transfer and kernel time */
    uint64_t h2d_bytes, d2h_bytes;
    /* This context's, since it was created or its statistics reset: */
    uint64_t routed_pairs;      /* routed (token, expert) pairs, all tiers */
    uint64_t gpu_pairs;         /* of them, computed on this device */
    uint64_t fallback_pairs;    /* resident here but computed on the CPU after a failure */
    double gpu_expert_hit_rate; /* gpu_pairs / routed_pairs (0 if none) */
    /* Layers on the device (COLI_OPT_GPU_LAYERS): the model's dense weights
     * held here, and this context's cache, steps and time. */
    uint64_t resident_dense_bytes; /* attention, norms, routers, embedding, output */
    uint64_t kv_bytes;             /* this context's KV cache on the device */
    uint64_t scratch_bytes;        /* its activations and tables */
    uint64_t steps;                /* evaluations run on the device */
    uint64_t graph_launches;       /* decode steps replayed from a captured graph */
    uint64_t host_syncs;           /* layers that waited for experts the CPU computed */
    uint64_t step_ns;              /* device time of those steps */
    /* With COLI_GPU_PHASES=1 in the environment at context creation (for
     * profiling: steps then run without graphs), the device time of each
     * phase of the steps, named by coli_gpu_phase_name; else zeros.
     * (On compute capability 9.0 and later each kernel of a step starts
     * while the one before it ends; COLI_GPU_PDL=0 there turns it off.) */
    uint64_t phase_ns[COLI_GPU_N_PHASES];
} coli_gpu_stats;

/* "attention", "experts", ... for phase_ns[i], i < COLI_GPU_N_PHASES;
 * NULL beyond. */
COLI_API const char *coli_gpu_phase_name(int i);

/* Statistics of device index (0 .. coli_model_gpu_devices-1) of the
 * context's model; COLI_ERANGE beyond. */
COLI_API coli_status coli_context_gpu_stats(const coli_context *ctx, int device, coli_gpu_stats *stats);

/* ---- expert store -----------------------------------------------------
 *
 * A converted model (coli_convert) opened with COLI_OPT_MEM_BUDGET_MB or
 * COLI_OPT_EXPERT_SLOTS keeps its dense weights in memory and its routed
 * experts on disk, reading each into a cache of expert slots when routed
 * to: per-layer LRU, a pinned hot set learned from routing counts
 * (model.coli.hot), and, with COLI_OPT_PREFETCH, reads started one layer
 * ahead from the next layer's router applied to the current hidden state.
 * Reads bypass the page cache where the file system allows (O_DIRECT), so
 * the budget is the memory actually used. Without a budget the file is
 * mapped. Logits do not depend on any of this: every budget gives the
 * same bits. COLI_IO_FAIL_AFTER=N makes every expert read after the first
 * N fail: for tests of that error path only.
 */

typedef enum coli_store_mode {
    COLI_STORE_RESIDENT = 0, /* a checkpoint: every expert loaded at open */
    COLI_STORE_MAPPED = 1,   /* a converted model without a budget: model.coli mapped */
    COLI_STORE_STREAMED = 2  /* a converted model under a budget: experts read on demand */
} coli_store_mode;

/* Fields may be appended: set struct_size to sizeof(coli_store_stats).
 * Counts are since the model was opened, over all its contexts. */
typedef struct coli_store_stats {
    size_t struct_size;
    coli_store_mode mode;
    int direct_io;              /* 1: reads bypass the page cache (O_DIRECT) */
    uint64_t experts;           /* routed experts of the model (MoE layers x experts) */
    uint64_t slots;             /* experts RAM holds at once (streamed) */
    uint64_t slot_bytes;        /* bytes per slot: the largest record */
    uint64_t hot_pinned;        /* slots pinned by the hot set */
    uint64_t dense_bytes;       /* dense weights, always in memory */
    uint64_t gets;              /* experts the CPU asked the store for */
    uint64_t hits;              /* of them, already in RAM (or being read ahead) */
    uint64_t misses;            /* of them, read from disk on demand */
    uint64_t disk_reads, disk_bytes; /* records read, demand and prefetch */
    uint64_t prefetch_reads;    /* records read ahead of need */
    uint64_t prefetch_used;     /* of them, used before being evicted */
    uint64_t predicted, predicted_right; /* decode: routed experts, and of them predicted one layer ahead */
    double prefetch_accuracy;   /* predicted_right / predicted (0 if none) */
    uint64_t stall_ns;          /* time computing threads waited for reads */
    uint64_t evictions;
} coli_store_stats;

COLI_API coli_status coli_model_store_stats(const coli_model *model, coli_store_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_H */
