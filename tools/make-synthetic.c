/*
 * make-synthetic.c - coli-make-synthetic(1): writes a random Mixture-of-
 * Experts checkpoint in Hugging Face layout (config.json,
 * generation_config.json, model.safetensors), for benchmarks and tests that
 * need a model of a given shape but not a trained one.
 *
 * --arch picks the layout: qwen3_moe (the default; transformers'
 * Qwen3MoeForCausalLM) or glm4_moe (Glm4MoeForCausalLM, GLM-4.5's layout:
 * q/k/v biases, per-head q/k norms, half-rotary heads, a sigmoid router with
 * a score correction bias and expert groups, shared experts, and
 * --dense-layers leading layers with a dense MLP instead of experts). The
 * tensor names are those lib/io/families.c reads for each family.
 *
 * The values are deterministic for a given --seed: each tensor draws from
 * its own generator, seeded from the seed and the tensor's index. Matrices
 * are roughly normal with standard deviation 0.02 (the usual initializer
 * range), the router 0.5 (so that routing is not flat), norm weights
 * 1.0 +- 0.01, biases (glm4_moe's q/k/v biases and the router's score
 * correction bias) 0.02 around 0.
 *
 * The safetensors file is written as a stream, one buffer at a time: a model
 * of a billion parameters never sits in memory. It is written under a
 * temporary name and renamed when complete.
 *
 * This program does not link libcolibri.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define PROG "coli-make-synthetic"
#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: coli-make-synthetic --out DIR [OPTION]...\n"
    "Write a random Mixture-of-Experts checkpoint (config.json,\n"
    "generation_config.json, model.safetensors) into DIR, which is created if it\n"
    "does not exist. The defaults give the benchmark model: a Qwen3-MoE of about\n"
    "1B parameters, 2 GB in bf16.\n"
    "\n"
    "  --out DIR          output directory (required)\n"
    "  --arch NAME        qwen3_moe, glm4_moe for GLM-4.5, deepseek_v3 for\n"
    "                       DeepSeek-V3's layout, or glm_moe_dsa for GLM-5's\n"
    "                       (default qwen3_moe)\n"
    "  --hidden N         hidden size (default 1024)\n"
    "  --layers N         decoder layers (default 12)\n"
    "  --experts N        experts per layer (default 64)\n"
    "  --active N         experts per token (default 8)\n"
    "  --moe-inter N      expert intermediate size (default 384)\n"
    "  --heads N          attention heads (default 16)\n"
    "  --kv-heads N       key/value heads (default 4)\n"
    "  --head-dim N       dimension of a head, even; for glm4_moe a multiple of 4,\n"
    "                       rotary on half of it (default 64; glm4_moe 128)\n"
    "  --vocab N          vocabulary size (default 32000)\n"
    "  --max-pos N        max_position_embeddings (default 4096)\n"
    "  --seed N           random seed (default 1)\n"
    "  --dtype TYPE       bf16 or f32 (default bf16)\n"
    "  -h, --help         show this help and exit\n"
    "\n"
    "Only with --arch glm4_moe, deepseek_v3 or glm_moe_dsa:\n"
    "  --dense-layers N   leading layers with a dense MLP, first_k_dense_replace\n"
    "                       (default 1); at most --layers\n"
    "  --inter N          intermediate size of the dense MLP\n"
    "                       (default 8 * --moe-inter, GLM-4.5's ratio)\n"
    "  --shared N         shared experts, n_shared_experts (default 1; 0 for none)\n"
    "  --groups N         expert groups, n_group (default 4); divides --experts\n"
    "  --topk-groups N    groups a token may route to, topk_group (default 2);\n"
    "                       at most --groups, and these groups must hold at least\n"
    "                       --active experts\n"
    "  --mtp N            MTP layers after the decoder's, num_nextn_predict_layers:\n"
    "                       0 or 1 (default 0; glm4_moe only); for coli generate --mtp\n"
    "\n"
    "Only with --arch deepseek_v3 or glm_moe_dsa (multi-head latent attention;\n"
    "--kv-heads and --head-dim do not apply):\n"
    "  --q-lora N         q_lora_rank; 0: a plain q_proj (default 1536)\n"
    "  --kv-lora N        kv_lora_rank, the latent a position caches (default 512)\n"
    "  --nope-dim N       qk_nope_head_dim (default 128)\n"
    "  --rope-dim N       qk_rope_head_dim, even (default 64)\n"
    "  --v-dim N          v_head_dim (default 128)\n"
    "  --yarn-factor N    YaRN's factor; 0: no YaRN (default 0)\n"
    "  --yarn-orig N      YaRN's original_max_position_embeddings (default 4096)\n"
    "\n"
    "Only with --arch glm_moe_dsa (DeepSeek sparse attention; --q-lora not 0):\n"
    "  --index-topk N     index_topk, the positions a token attends (default 2048)\n"
    "  --index-heads N    index_n_heads (default 32)\n"
    "  --index-dim N      index_head_dim, at least --rope-dim (default 128)\n"
    "  --index-freq N     index_topk_freq: past the first 3 layers, one in N runs\n"
    "                       its indexer and the others share its choice, as\n"
    "                       GLM-5.2's (default 1: every layer)\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n";

static int usage_error(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, PROG ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '" PROG " --help'.\n");
    return EXIT_USAGE;
}

/* ---- the model's shape ---------------------------------------------------- */

typedef struct shape {
    int64_t hidden, layers, experts, active, moe_inter, heads, kv_heads, head_dim, vocab, max_pos;
    /* glm4_moe only: first_k_dense_replace, the dense intermediate_size,
     * n_shared_experts, n_group, topk_group */
    int64_t dense_layers, inter, shared, groups, topk_groups;
    int64_t mtp; /* glm4_moe only: MTP layers after the decoder's, num_nextn_predict_layers */
    /* deepseek_v3 only: q_lora_rank (0: a plain q_proj), kv_lora_rank,
     * qk_nope_head_dim, qk_rope_head_dim, v_head_dim; YaRN's factor (0:
     * none) over yarn_orig original positions */
    int64_t q_lora, kv_lora, nope, rope, v_dim, yarn_factor, yarn_orig;
    /* glm_moe_dsa only: index_topk, index_n_heads, index_head_dim,
     * index_topk_freq (with index_skip_topk_offset 3) */
    int64_t index_topk, index_heads, index_dim, index_freq;
    uint64_t seed;
    int bf16; /* 1: BF16 tensors, 0: F32 */
    int glm;  /* 1: glm4_moe or deepseek_v3 (GLM-4.5's MoE), 0: qwen3_moe */
    int mla;  /* 1: deepseek_v3 or glm_moe_dsa (multi-head latent attention) */
    int dsa;  /* 1: glm_moe_dsa (DeepSeek sparse attention) */
} shape;

/* Layer n runs its own indexer: transformers' schedule for index_topk_freq
 * with index_skip_topk_offset 3 (lib/io/families.c reads it back). */
static int index_full(const shape *s, int64_t n)
{
    int64_t k = n - 3 + 1;
    return (k > 0 ? k : 0) % s->index_freq == 0;
}

/* How a tensor's values are drawn. */
enum init_kind { INIT_MATRIX, INIT_ROUTER, INIT_NORM, INIT_BIAS };

typedef struct tensor {
    char name[96];
    int ndim;
    int64_t dim[2];
    enum init_kind init;
    uint64_t begin, end; /* byte offsets in the data section */
} tensor;

typedef struct tensor_list {
    tensor *v;
    size_t n, cap;
} tensor_list;

static int add_tensor(tensor_list *l, enum init_kind init, int64_t rows, int64_t cols,
                      const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Appends a tensor; cols < 0 makes it a vector of rows elements. */
static int add_tensor(tensor_list *l, enum init_kind init, int64_t rows, int64_t cols,
                      const char *fmt, ...)
{
    va_list ap;
    tensor *t;

    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        tensor *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            fprintf(stderr, PROG ": out of memory for the tensor list\n");
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    t = &l->v[l->n++];
    memset(t, 0, sizeof *t);
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->init = init;
    t->dim[0] = rows;
    t->dim[1] = cols;
    t->ndim = cols < 0 ? 1 : 2;
    return 0;
}

static uint64_t tensor_elems(const tensor *t)
{
    return t->ndim == 1 ? (uint64_t)t->dim[0] : (uint64_t)t->dim[0] * (uint64_t)t->dim[1];
}

/* The routed experts of layer n, gate, up and down of each in turn. */
static int add_experts(tensor_list *l, const char *p, long long n, int64_t E, int64_t I, int64_t H)
{
    int rc = 0;

    for (int64_t e = 0; e < E && rc == 0; e++) {
        long long x = (long long)e;
        rc |= add_tensor(l, INIT_MATRIX, I, H, "%s.%lld.mlp.experts.%lld.gate_proj.weight", p, n, x);
        rc |= add_tensor(l, INIT_MATRIX, I, H, "%s.%lld.mlp.experts.%lld.up_proj.weight", p, n, x);
        rc |= add_tensor(l, INIT_MATRIX, H, I, "%s.%lld.mlp.experts.%lld.down_proj.weight", p, n, x);
    }
    return rc;
}

/* Layer n's norms and attention, in file order; with bias, q/k/v biases
 * each after its weight. */
static int add_attention(tensor_list *l, const shape *s, const char *p, long long n, int bias)
{
    const int64_t H = s->hidden, q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
    const int64_t rows[3] = {q, kv, kv};
    const char qkv[3] = {'q', 'k', 'v'};
    int rc = 0;

    rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.input_layernorm.weight", p, n);
    for (int i = 0; i < 3; i++) {
        rc |= add_tensor(l, INIT_MATRIX, rows[i], H, "%s.%lld.self_attn.%c_proj.weight", p, n, qkv[i]);
        if (bias)
            rc |= add_tensor(l, INIT_BIAS, rows[i], -1, "%s.%lld.self_attn.%c_proj.bias", p, n, qkv[i]);
    }
    rc |= add_tensor(l, INIT_MATRIX, H, q, "%s.%lld.self_attn.o_proj.weight", p, n);
    rc |= add_tensor(l, INIT_NORM, s->head_dim, -1, "%s.%lld.self_attn.q_norm.weight", p, n);
    rc |= add_tensor(l, INIT_NORM, s->head_dim, -1, "%s.%lld.self_attn.k_norm.weight", p, n);
    rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.post_attention_layernorm.weight", p, n);
    return rc;
}

/* Layer n's norms and latent attention (DeepSeek-V3's), in file order. */
static int add_mla(tensor_list *l, const shape *s, const char *p, long long n)
{
    const int64_t H = s->hidden, q = s->heads * (s->nope + s->rope);
    int rc = 0;

    rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.input_layernorm.weight", p, n);
    if (s->q_lora > 0) {
        rc |= add_tensor(l, INIT_MATRIX, s->q_lora, H, "%s.%lld.self_attn.q_a_proj.weight", p, n);
        rc |= add_tensor(l, INIT_NORM, s->q_lora, -1, "%s.%lld.self_attn.q_a_layernorm.weight", p, n);
        rc |= add_tensor(l, INIT_MATRIX, q, s->q_lora, "%s.%lld.self_attn.q_b_proj.weight", p, n);
    } else {
        rc |= add_tensor(l, INIT_MATRIX, q, H, "%s.%lld.self_attn.q_proj.weight", p, n);
    }
    rc |= add_tensor(l, INIT_MATRIX, s->kv_lora + s->rope, H, "%s.%lld.self_attn.kv_a_proj_with_mqa.weight", p,
                     n);
    rc |= add_tensor(l, INIT_NORM, s->kv_lora, -1, "%s.%lld.self_attn.kv_a_layernorm.weight", p, n);
    rc |= add_tensor(l, INIT_MATRIX, s->heads * (s->nope + s->v_dim), s->kv_lora,
                     "%s.%lld.self_attn.kv_b_proj.weight", p, n);
    rc |= add_tensor(l, INIT_MATRIX, H, s->heads * s->v_dim, "%s.%lld.self_attn.o_proj.weight", p, n);
    if (s->dsa && index_full(s, n)) {
        rc |= add_tensor(l, INIT_MATRIX, s->index_heads * s->index_dim, s->q_lora,
                         "%s.%lld.self_attn.indexer.wq_b.weight", p, n);
        rc |= add_tensor(l, INIT_MATRIX, s->index_dim, H, "%s.%lld.self_attn.indexer.wk.weight", p, n);
        rc |= add_tensor(l, INIT_NORM, s->index_dim, -1, "%s.%lld.self_attn.indexer.k_norm.weight", p, n);
        rc |= add_tensor(l, INIT_BIAS, s->index_dim, -1, "%s.%lld.self_attn.indexer.k_norm.bias", p, n);
        rc |= add_tensor(l, INIT_MATRIX, s->index_heads, H, "%s.%lld.self_attn.indexer.weights_proj.weight", p, n);
    }
    rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.post_attention_layernorm.weight", p, n);
    return rc;
}

/* Every tensor of a Qwen3-MoE layout (Qwen3MoeForCausalLM), in file order. */
static int list_qwen3_moe(const shape *s, tensor_list *l)
{
    const int64_t H = s->hidden, I = s->moe_inter, E = s->experts;
    int64_t layer;
    int rc = 0;

    rc |= add_tensor(l, INIT_MATRIX, s->vocab, H, "model.embed_tokens.weight");
    for (layer = 0; layer < s->layers && rc == 0; layer++) {
        const char *p = "model.layers";
        long long n = (long long)layer;

        rc |= add_attention(l, s, p, n, 0);
        rc |= add_tensor(l, INIT_ROUTER, E, H, "%s.%lld.mlp.gate.weight", p, n);
        rc |= add_experts(l, p, n, E, I, H);
    }
    rc |= add_tensor(l, INIT_NORM, H, -1, "model.norm.weight");
    rc |= add_tensor(l, INIT_MATRIX, s->vocab, H, "lm_head.weight");
    return rc != 0 ? -1 : 0;
}

/* Every tensor of a GLM-4.5 layout (transformers' Glm4MoeForCausalLM), in
 * file order: a layer's attention has q/k/v biases and per-head q/k norms;
 * its MLP is dense in the first dense_layers layers, else the router (with
 * its score correction bias), the routed experts and the shared experts. */
static int list_glm4_moe(const shape *s, tensor_list *l)
{
    const int64_t H = s->hidden, I = s->moe_inter, E = s->experts, S = s->moe_inter * s->shared;
    int64_t layer;
    int rc = 0;

    rc |= add_tensor(l, INIT_MATRIX, s->vocab, H, "model.embed_tokens.weight");
    for (layer = 0; layer < s->layers + s->mtp && rc == 0; layer++) {
        const char *p = "model.layers";
        long long n = (long long)layer;

        if (layer >= s->layers) {
            /* an MTP layer's own tensors; its embedding and head are the
             * model's (the checkpoints that store copies store the same) */
            rc |= add_tensor(l, INIT_MATRIX, H, 2 * H, "%s.%lld.eh_proj.weight", p, n);
            rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.enorm.weight", p, n);
            rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.hnorm.weight", p, n);
            rc |= add_tensor(l, INIT_NORM, H, -1, "%s.%lld.shared_head.norm.weight", p, n);
        }
        rc |= s->mla ? add_mla(l, s, p, n) : add_attention(l, s, p, n, 1);
        if (layer < s->dense_layers) {
            rc |= add_tensor(l, INIT_MATRIX, s->inter, H, "%s.%lld.mlp.gate_proj.weight", p, n);
            rc |= add_tensor(l, INIT_MATRIX, s->inter, H, "%s.%lld.mlp.up_proj.weight", p, n);
            rc |= add_tensor(l, INIT_MATRIX, H, s->inter, "%s.%lld.mlp.down_proj.weight", p, n);
            continue;
        }
        rc |= add_tensor(l, INIT_ROUTER, E, H, "%s.%lld.mlp.gate.weight", p, n);
        rc |= add_tensor(l, INIT_BIAS, E, -1, "%s.%lld.mlp.gate.e_score_correction_bias", p, n);
        rc |= add_experts(l, p, n, E, I, H);
        if (S > 0) {
            rc |= add_tensor(l, INIT_MATRIX, S, H, "%s.%lld.mlp.shared_experts.gate_proj.weight",
                             p, n);
            rc |= add_tensor(l, INIT_MATRIX, S, H, "%s.%lld.mlp.shared_experts.up_proj.weight", p,
                             n);
            rc |= add_tensor(l, INIT_MATRIX, H, S, "%s.%lld.mlp.shared_experts.down_proj.weight",
                             p, n);
        }
    }
    rc |= add_tensor(l, INIT_NORM, H, -1, "model.norm.weight");
    rc |= add_tensor(l, INIT_MATRIX, s->vocab, H, "lm_head.weight");
    return rc != 0 ? -1 : 0;
}

/* Every tensor the loader reads for the shape's family, in file order, with
 * offsets. */
static int build_tensors(const shape *s, tensor_list *l)
{
    const uint64_t esize = s->bf16 ? 2 : 4;
    uint64_t off = 0;
    size_t i;

    if ((s->glm ? list_glm4_moe(s, l) : list_qwen3_moe(s, l)) != 0)
        return -1;
    for (i = 0; i < l->n; i++) {
        l->v[i].begin = off;
        off += tensor_elems(&l->v[i]) * esize;
        l->v[i].end = off;
    }
    return 0;
}

/* ---- random numbers ------------------------------------------------------- */

/* splitmix64: seeds the per-tensor generators. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* xoshiro256** */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95u);
    int i;

    for (i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

/* A normal-ish value with mean 0 and standard deviation 1: the sum of four
 * uniform variables (from the four 16-bit parts of one draw), centred and
 * scaled. Bounded by +-sqrt(12), which suits weights. */
static float rng_normalish(rng *r)
{
    uint64_t v = rng_next(r);
    double sum = 0.0;
    int i;

    for (i = 0; i < 4; i++) {
        sum += ((double)(v & 0xffffu) + 0.5) / 65536.0;
        v >>= 16;
    }
    return (float)((sum - 2.0) * 1.7320508075688772); /* variance 4/12 -> 1 */
}

/* ---- writing -------------------------------------------------------------- */

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* A growing string, for the JSON texts. */
typedef struct strbuf {
    char *p;
    size_t n, cap;
    int failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    int len;

    if (b->failed)
        return;
    va_start(ap, fmt);
    len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) {
        b->failed = 1;
        return;
    }
    if (b->n + (size_t)len + 1 > b->cap) {
        size_t cap = 2 * (b->n + (size_t)len + 1);
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

/* Writes all of a buffer or reports the failure. */
static int write_all(FILE *f, const void *p, size_t n, const char *path)
{
    if (n > 0 && fwrite(p, 1, n, f) != n) {
        fprintf(stderr, PROG ": %s: write failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Closes f, reporting a failure of the close or of earlier buffered writes. */
static int close_file(FILE *f, const char *path)
{
    int bad = ferror(f);

    if (fclose(f) != 0 || bad) {
        fprintf(stderr, PROG ": %s: write failed: %s\n", path, bad ? "I/O error" : strerror(errno));
        return -1;
    }
    return 0;
}

/* Writes a whole small text file. */
static int write_text_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (write_all(f, text, len, path) != 0) {
        fclose(f);
        return -1;
    }
    return close_file(f, path);
}

/* The safetensors header: JSON padded with spaces to a multiple of 8. */
static int build_header(const shape *s, const tensor_list *l, strbuf *b)
{
    const char *dtype = s->bf16 ? "BF16" : "F32";
    size_t i;

    sb_printf(b, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; i < l->n; i++) {
        const tensor *t = &l->v[i];

        sb_printf(b, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRId64, t->name, dtype, t->dim[0]);
        if (t->ndim == 2)
            sb_printf(b, ",%" PRId64, t->dim[1]);
        sb_printf(b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", t->begin, t->end);
    }
    sb_printf(b, "}");
    while (!b->failed && b->n % 8 != 0)
        sb_printf(b, " ");
    if (b->failed) {
        fprintf(stderr, PROG ": out of memory for the safetensors header\n");
        return -1;
    }
    return 0;
}

#define CHUNK_ELEMS ((size_t)1 << 16)

/* Draws a tensor's values and writes them, CHUNK_ELEMS at a time. */
static int write_tensor(FILE *f, const char *path, const shape *s, const tensor *t, size_t index,
                        unsigned char *buf)
{
    uint64_t left = tensor_elems(t);
    /* INIT_MATRIX and INIT_BIAS: 0.02 around 0 */
    float scale = t->init == INIT_ROUTER ? 0.5f : t->init == INIT_NORM ? 0.01f : 0.02f;
    float bias = t->init == INIT_NORM ? 1.0f : 0.0f;
    size_t esize = s->bf16 ? 2 : 4;
    rng r;

    rng_seed(&r, s->seed, (uint64_t)index + 1);
    while (left > 0) {
        size_t n = left < CHUNK_ELEMS ? (size_t)left : CHUNK_ELEMS, i;

        for (i = 0; i < n; i++) {
            float v = bias + scale * rng_normalish(&r);
            uint32_t u;

            if (s->bf16) {
                uint16_t h = f32_to_bf16(v);
                buf[2 * i] = (unsigned char)(h & 0xff);
                buf[2 * i + 1] = (unsigned char)(h >> 8);
            } else {
                memcpy(&u, &v, sizeof u);
                buf[4 * i] = (unsigned char)(u & 0xff);
                buf[4 * i + 1] = (unsigned char)((u >> 8) & 0xff);
                buf[4 * i + 2] = (unsigned char)((u >> 16) & 0xff);
                buf[4 * i + 3] = (unsigned char)(u >> 24);
            }
        }
        if (write_all(f, buf, n * esize, path) != 0)
            return -1;
        left -= n;
    }
    return 0;
}

static int write_safetensors(const char *dir, const shape *s, const tensor_list *l)
{
    char path[4096], tmp_path[4096];
    unsigned char len_bytes[8];
    unsigned char *buf = NULL;
    strbuf header = {0};
    FILE *f = NULL;
    uint64_t hlen;
    size_t i;
    int rc = -1, k;

    if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path ||
        (size_t)snprintf(tmp_path, sizeof tmp_path, "%s/model.safetensors.partial", dir) >=
            sizeof tmp_path) {
        fprintf(stderr, PROG ": output directory name is too long\n");
        return -1;
    }
    if (build_header(s, l, &header) != 0)
        goto done;
    buf = malloc(CHUNK_ELEMS * 4);
    if (buf == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        goto done;
    }
    f = fopen(tmp_path, "wb");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", tmp_path, strerror(errno));
        goto done;
    }
    hlen = header.n;
    for (k = 0; k < 8; k++)
        len_bytes[k] = (unsigned char)((hlen >> (8 * k)) & 0xff);
    if (write_all(f, len_bytes, sizeof len_bytes, tmp_path) != 0 ||
        write_all(f, header.p, header.n, tmp_path) != 0)
        goto done;
    for (i = 0; i < l->n; i++)
        if (write_tensor(f, tmp_path, s, &l->v[i], i, buf) != 0)
            goto done;
    k = close_file(f, tmp_path);
    f = NULL;
    if (k != 0)
        goto done;
    if (rename(tmp_path, path) != 0) {
        fprintf(stderr, PROG ": cannot rename %s to %s: %s\n", tmp_path, path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (f != NULL)
        fclose(f);
    if (rc != 0)
        remove(tmp_path);
    free(buf);
    free(header.p);
    return rc;
}

/* config.json of a GLM-4.5 layout, with the keys transformers 4.54 writes
 * for Glm4MoeConfig (sorted, as it sorts them). */
static void glm4_moe_config(strbuf *b, const shape *s, int64_t bos, int64_t eos)
{
    sb_printf(b,
              "{\n"
              "  \"architectures\": [\n"
              "    \"Glm4MoeForCausalLM\"\n"
              "  ],\n"
              "  \"attention_bias\": true,\n"
              "  \"attention_dropout\": 0.0,\n"
              "  \"bos_token_id\": %" PRId64 ",\n"
              "  \"eos_token_id\": %" PRId64 ",\n"
              "  \"first_k_dense_replace\": %" PRId64 ",\n"
              "  \"head_dim\": %" PRId64 ",\n"
              "  \"hidden_act\": \"silu\",\n"
              "  \"hidden_size\": %" PRId64 ",\n"
              "  \"initializer_range\": 0.02,\n"
              "  \"intermediate_size\": %" PRId64 ",\n"
              "  \"max_position_embeddings\": %" PRId64 ",\n"
              "  \"model_type\": \"glm4_moe\",\n"
              "  \"moe_intermediate_size\": %" PRId64 ",\n"
              "  \"n_group\": %" PRId64 ",\n"
              "  \"n_routed_experts\": %" PRId64 ",\n"
              "  \"n_shared_experts\": %" PRId64 ",\n"
              "  \"norm_topk_prob\": true,\n"
              "  \"num_attention_heads\": %" PRId64 ",\n"
              "  \"num_experts_per_tok\": %" PRId64 ",\n"
              "  \"num_hidden_layers\": %" PRId64 ",\n"
              "  \"num_key_value_heads\": %" PRId64 ",\n"
              "  \"num_nextn_predict_layers\": %" PRId64 ",\n"
              "  \"partial_rotary_factor\": 0.5,\n"
              "  \"rms_norm_eps\": 1e-05,\n"
              "  \"rope_scaling\": null,\n"
              "  \"rope_theta\": 1000000.0,\n"
              "  \"routed_scaling_factor\": 2.5,\n"
              "  \"tie_word_embeddings\": false,\n"
              "  \"topk_group\": %" PRId64 ",\n"
              "  \"torch_dtype\": \"%s\",\n"
              "  \"transformers_version\": \"4.54.0\",\n"
              "  \"use_cache\": true,\n"
              "  \"use_qk_norm\": true,\n"
              "  \"vocab_size\": %" PRId64 "\n"
              "}\n",
              bos, eos, s->dense_layers, s->head_dim, s->hidden, s->inter, s->max_pos,
              s->moe_inter, s->groups, s->experts, s->shared, s->heads, s->active, s->layers,
              s->kv_heads, s->mtp, s->topk_groups, s->bf16 ? "bfloat16" : "float32", s->vocab);
}

/* config.json of a DeepSeek-V3 layout, with the keys of DeepSeek-V3's own
 * (rope_scaling beside rope_theta); GLM-5's adds its indexer's. */
static void deepseek_v3_config(strbuf *b, const shape *s, int64_t bos, int64_t eos)
{
    char qlora[32], rope[256], dsa[256] = "";

    if (s->q_lora > 0)
        snprintf(qlora, sizeof qlora, "%" PRId64, s->q_lora);
    else
        snprintf(qlora, sizeof qlora, "null");
    if (s->yarn_factor > 0)
        snprintf(rope, sizeof rope,
                 "{\n    \"beta_fast\": 32,\n    \"beta_slow\": 1,\n    \"factor\": %" PRId64
                 ",\n    \"mscale\": 1.0,\n    \"mscale_all_dim\": 1.0,\n"
                 "    \"original_max_position_embeddings\": %" PRId64 ",\n    \"type\": \"yarn\"\n  }",
                 s->yarn_factor, s->yarn_orig);
    else
        snprintf(rope, sizeof rope, "null");
    if (s->dsa)
        snprintf(dsa, sizeof dsa,
                 "  \"index_head_dim\": %" PRId64 ",\n  \"index_n_heads\": %" PRId64 ",\n  \"index_skip_topk_offset\": 3,\n"
                 "  \"index_topk\": %" PRId64 ",\n  \"index_topk_freq\": %" PRId64 ",\n",
                 s->index_dim, s->index_heads, s->index_topk, s->index_freq);
    sb_printf(b,
              "{\n"
              "  \"architectures\": [\n"
              "    \"%s\"\n"
              "  ],\n"
              "  \"attention_bias\": false,\n"
              "  \"attention_dropout\": 0.0,\n"
              "  \"bos_token_id\": %" PRId64 ",\n"
              "  \"eos_token_id\": %" PRId64 ",\n"
              "  \"first_k_dense_replace\": %" PRId64 ",\n"
              "  \"hidden_act\": \"silu\",\n"
              "  \"hidden_size\": %" PRId64 ",\n"
              "%s"
              "  \"initializer_range\": 0.02,\n"
              "  \"intermediate_size\": %" PRId64 ",\n"
              "  \"kv_lora_rank\": %" PRId64 ",\n"
              "  \"max_position_embeddings\": %" PRId64 ",\n"
              "  \"model_type\": \"%s\",\n"
              "  \"moe_intermediate_size\": %" PRId64 ",\n"
              "  \"n_group\": %" PRId64 ",\n"
              "  \"n_routed_experts\": %" PRId64 ",\n"
              "  \"n_shared_experts\": %" PRId64 ",\n"
              "  \"norm_topk_prob\": true,\n"
              "  \"num_attention_heads\": %" PRId64 ",\n"
              "  \"num_experts_per_tok\": %" PRId64 ",\n"
              "  \"num_hidden_layers\": %" PRId64 ",\n"
              "  \"num_key_value_heads\": %" PRId64 ",\n"
              "  \"num_nextn_predict_layers\": 0,\n"
              "  \"q_lora_rank\": %s,\n"
              "  \"qk_nope_head_dim\": %" PRId64 ",\n"
              "  \"qk_rope_head_dim\": %" PRId64 ",\n"
              "  \"rms_norm_eps\": 1e-06,\n"
              "  \"rope_scaling\": %s,\n"
              "  \"rope_theta\": 10000,\n"
              "  \"routed_scaling_factor\": 2.5,\n"
              "  \"scoring_func\": \"sigmoid\",\n"
              "  \"tie_word_embeddings\": false,\n"
              "  \"topk_group\": %" PRId64 ",\n"
              "  \"topk_method\": \"noaux_tc\",\n"
              "  \"torch_dtype\": \"%s\",\n"
              "  \"transformers_version\": \"4.46.3\",\n"
              "  \"use_cache\": true,\n"
              "  \"v_head_dim\": %" PRId64 ",\n"
              "  \"vocab_size\": %" PRId64 "\n"
              "}\n",
              s->dsa ? "GlmMoeDsaForCausalLM" : "DeepseekV3ForCausalLM", bos, eos, s->dense_layers, s->hidden, dsa,
              s->inter, s->kv_lora, s->max_pos, s->dsa ? "glm_moe_dsa" : "deepseek_v3", s->moe_inter, s->groups,
              s->experts, s->shared, s->heads, s->active, s->layers, s->heads, qlora, s->nope, s->rope, rope,
              s->topk_groups, s->bf16 ? "bfloat16" : "float32", s->v_dim, s->vocab);
}

/* config.json of a Qwen3-MoE layout. */
static void qwen3_moe_config(strbuf *b, const shape *s, int64_t bos, int64_t eos)
{
    sb_printf(b,
              "{\n"
              "  \"architectures\": [\n"
              "    \"Qwen3MoeForCausalLM\"\n"
              "  ],\n"
              "  \"attention_bias\": false,\n"
              "  \"attention_dropout\": 0.0,\n"
              "  \"bos_token_id\": %" PRId64 ",\n"
              "  \"decoder_sparse_step\": 1,\n"
              "  \"eos_token_id\": %" PRId64 ",\n"
              "  \"head_dim\": %" PRId64 ",\n"
              "  \"hidden_act\": \"silu\",\n"
              "  \"hidden_size\": %" PRId64 ",\n"
              "  \"initializer_range\": 0.02,\n"
              "  \"intermediate_size\": %" PRId64 ",\n"
              "  \"max_position_embeddings\": %" PRId64 ",\n"
              "  \"max_window_layers\": %" PRId64 ",\n"
              "  \"mlp_only_layers\": [],\n"
              "  \"model_type\": \"qwen3_moe\",\n"
              "  \"moe_intermediate_size\": %" PRId64 ",\n"
              "  \"norm_topk_prob\": true,\n"
              "  \"num_attention_heads\": %" PRId64 ",\n"
              "  \"num_experts\": %" PRId64 ",\n"
              "  \"num_experts_per_tok\": %" PRId64 ",\n"
              "  \"num_hidden_layers\": %" PRId64 ",\n"
              "  \"num_key_value_heads\": %" PRId64 ",\n"
              "  \"output_router_logits\": false,\n"
              "  \"rms_norm_eps\": 1e-06,\n"
              "  \"rope_scaling\": null,\n"
              "  \"rope_theta\": 1000000.0,\n"
              "  \"router_aux_loss_coef\": 0.001,\n"
              "  \"sliding_window\": null,\n"
              "  \"tie_word_embeddings\": false,\n"
              "  \"torch_dtype\": \"%s\",\n"
              "  \"transformers_version\": \"4.51.0\",\n"
              "  \"use_cache\": true,\n"
              "  \"use_sliding_window\": false,\n"
              "  \"vocab_size\": %" PRId64 "\n"
              "}\n",
              bos, eos, s->head_dim, s->hidden, s->active * s->moe_inter, s->max_pos, s->layers,
              s->moe_inter, s->heads, s->experts, s->active, s->layers, s->kv_heads,
              s->bf16 ? "bfloat16" : "float32", s->vocab);
}

static int write_configs(const char *dir, const shape *s)
{
    char path[4096];
    strbuf b = {0};
    int64_t bos = s->vocab - 2, eos = s->vocab - 1;
    int rc = -1;

    if (s->mla)
        deepseek_v3_config(&b, s, bos, eos);
    else if (s->glm)
        glm4_moe_config(&b, s, bos, eos);
    else
        qwen3_moe_config(&b, s, bos, eos);
    if (b.failed) {
        fprintf(stderr, PROG ": out of memory\n");
        goto done;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (write_text_file(path, b.p, b.n) != 0)
        goto done;
    b.n = 0;
    sb_printf(&b,
              "{\n"
              "  \"bos_token_id\": %" PRId64 ",\n"
              "  \"do_sample\": false,\n"
              "  \"eos_token_id\": %" PRId64 ",\n"
              "  \"transformers_version\": \"4.51.0\"\n"
              "}\n",
              bos, eos);
    if (b.failed) {
        fprintf(stderr, PROG ": out of memory\n");
        goto done;
    }
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (write_text_file(path, b.p, b.n) != 0)
        goto done;
    rc = 0;
done:
    free(b.p);
    return rc;
}

/* ---- command line --------------------------------------------------------- */

static int parse_count(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return usage_error("invalid value '%s' for %s: not a non-negative integer", s, opt);
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return usage_error("invalid value '%s' for %s: not an integer", s, opt);
    if (errno == ERANGE || v < min || v > max)
        return usage_error("value '%s' for %s is out of range [%" PRId64 ", %" PRId64 "]", s, opt,
                           min, max);
    *out = (int64_t)v;
    return 0;
}

/* Whether the option name arg[0..name_len) is name. */
static int option_is(const char *arg, size_t name_len, const char *name)
{
    return strlen(name) == name_len && strncmp(arg, name, name_len) == 0;
}

static int make_dir(const char *dir)
{
    struct stat sb;

    if (mkdir(dir, 0777) == 0)
        return 0;
    if (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 0;
    if (errno == EEXIST)
        fprintf(stderr, PROG ": %s exists and is not a directory\n", dir);
    else
        fprintf(stderr, PROG ": cannot create directory %s: %s\n", dir, strerror(errno));
    return -1;
}

int main(int argc, char **argv)
{
    /* glm: the option is only for --arch glm4_moe, deepseek_v3 or
     * glm_moe_dsa (2: the latter two, 3: glm_moe_dsa only) */
    static const struct {
        const char *name;
        int64_t min, max;
        size_t offset;
        int glm;
    } nums[] = {
        {"--hidden", 1, 1 << 20, offsetof(shape, hidden), 0},
        {"--layers", 1, 4096, offsetof(shape, layers), 0},
        {"--experts", 1, 1 << 16, offsetof(shape, experts), 0},
        {"--active", 1, 1 << 16, offsetof(shape, active), 0},
        {"--moe-inter", 1, 1 << 20, offsetof(shape, moe_inter), 0},
        {"--heads", 1, 4096, offsetof(shape, heads), 0},
        {"--kv-heads", 1, 4096, offsetof(shape, kv_heads), 0},
        {"--head-dim", 2, 65536, offsetof(shape, head_dim), 0},
        {"--vocab", 2, 1 << 24, offsetof(shape, vocab), 0},
        {"--max-pos", 1, 1 << 24, offsetof(shape, max_pos), 0},
        {"--dense-layers", 0, 4096, offsetof(shape, dense_layers), 1},
        {"--inter", 1, 1 << 20, offsetof(shape, inter), 1},
        {"--shared", 0, 1024, offsetof(shape, shared), 1},
        {"--groups", 1, 1 << 16, offsetof(shape, groups), 1},
        {"--topk-groups", 1, 1 << 16, offsetof(shape, topk_groups), 1},
        {"--mtp", 0, 1, offsetof(shape, mtp), 1},
        {"--q-lora", 0, 1 << 16, offsetof(shape, q_lora), 2},
        {"--kv-lora", 1, 1 << 16, offsetof(shape, kv_lora), 2},
        {"--nope-dim", 1, 4096, offsetof(shape, nope), 2},
        {"--rope-dim", 2, 4096, offsetof(shape, rope), 2},
        {"--v-dim", 1, 4096, offsetof(shape, v_dim), 2},
        {"--yarn-factor", 0, 1 << 16, offsetof(shape, yarn_factor), 2},
        {"--yarn-orig", 1, 1 << 24, offsetof(shape, yarn_orig), 2},
        {"--index-topk", 1, 1 << 30, offsetof(shape, index_topk), 3},
        {"--index-heads", 1, 1024, offsetof(shape, index_heads), 3},
        {"--index-dim", 2, 4096, offsetof(shape, index_dim), 3},
        {"--index-freq", 1, 4096, offsetof(shape, index_freq), 3},
    };
    shape s = {
        .hidden = 1024,
        .layers = 12,
        .experts = 64,
        .active = 8,
        .moe_inter = 384,
        .heads = 16,
        .kv_heads = 4,
        .head_dim = 64, /* glm4_moe: 128 unless given */
        .vocab = 32000,
        .max_pos = 4096,
        .dense_layers = 1,
        .inter = 0, /* glm4_moe: 8 * moe_inter unless given */
        .shared = 1,
        .groups = 4,
        .topk_groups = 2,
        .q_lora = 1536, /* deepseek_v3: DeepSeek-V3's own */
        .kv_lora = 512,
        .nope = 128,
        .rope = 64,
        .v_dim = 128,
        .yarn_factor = 0,
        .yarn_orig = 4096,
        .index_topk = 2048, /* glm_moe_dsa: GLM-5's own */
        .index_heads = 32,
        .index_dim = 128,
        .index_freq = 1,
        .seed = 1,
        .bf16 = 1,
        .glm = 0,
    };
    /* given[j]: nums[j] was on the command line */
    int given[sizeof nums / sizeof nums[0]] = {0};
    const char *out = NULL, *glm_opt = NULL, *mla_opt = NULL, *dsa_opt = NULL;
    int head_dim_given = 0, inter_given = 0;
    tensor_list l = {0};
    uint64_t params = 0, bytes;
    size_t i, j;
    int rc;

    for (i = 1; i < (size_t)argc; i++) {
        const char *arg = argv[i], *val, *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        int num = -1;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage_text, stdout);
            return fflush(stdout) == 0 ? 0 : 1;
        }
        if (strncmp(arg, "--", 2) != 0 || name_len <= 2)
            return usage_error("unexpected argument '%s'", arg);
        for (j = 0; j < sizeof nums / sizeof nums[0]; j++)
            if (option_is(arg, name_len, nums[j].name))
                num = (int)j;
        if (num < 0 && !option_is(arg, name_len, "--out") && !option_is(arg, name_len, "--arch") &&
            !option_is(arg, name_len, "--dtype") && !option_is(arg, name_len, "--seed"))
            return usage_error("unknown option '%.*s'", (int)name_len, arg);
        if (eq != NULL)
            val = eq + 1;
        else if (i + 1 < (size_t)argc)
            val = argv[++i];
        else
            return usage_error("option '%s' needs a value", arg);

        if (num >= 0) {
            int64_t *dst = (int64_t *)(void *)((char *)&s + nums[num].offset);
            rc = parse_count(nums[num].name, val, nums[num].min, nums[num].max, dst);
            if (rc != 0)
                return rc;
            given[num] = 1;
            if (nums[num].glm == 1)
                glm_opt = nums[num].name;
            else if (nums[num].glm == 2)
                mla_opt = nums[num].name;
            else if (nums[num].glm == 3)
                dsa_opt = nums[num].name;
        } else if (option_is(arg, name_len, "--out")) {
            if (val[0] == '\0')
                return usage_error("--out needs a directory");
            out = val;
        } else if (option_is(arg, name_len, "--arch")) {
            s.glm = s.mla = s.dsa = 0;
            if (strcmp(val, "glm4_moe") == 0)
                s.glm = 1;
            else if (strcmp(val, "deepseek_v3") == 0)
                s.glm = s.mla = 1;
            else if (strcmp(val, "glm_moe_dsa") == 0)
                s.glm = s.mla = s.dsa = 1;
            else if (strcmp(val, "qwen3_moe") != 0)
                return usage_error("invalid value '%s' for --arch (expected qwen3_moe, glm4_moe, "
                                   "deepseek_v3 or glm_moe_dsa)",
                                   val);
        } else if (option_is(arg, name_len, "--dtype")) {
            if (strcmp(val, "bf16") == 0)
                s.bf16 = 1;
            else if (strcmp(val, "f32") == 0)
                s.bf16 = 0;
            else
                return usage_error("invalid value '%s' for --dtype (expected bf16 or f32)", val);
        } else {
            char *end = NULL;

            errno = 0;
            if (val[0] < '0' || val[0] > '9')
                return usage_error("invalid value '%s' for --seed: not a non-negative integer",
                                   val);
            s.seed = strtoull(val, &end, 10);
            if (*end != '\0' || errno == ERANGE)
                return usage_error("invalid value '%s' for --seed", val);
        }
    }
    if (out == NULL)
        return usage_error("--out DIR is required");
    for (j = 0; j < sizeof nums / sizeof nums[0]; j++) {
        if (strcmp(nums[j].name, "--head-dim") == 0)
            head_dim_given = given[j];
        else if (strcmp(nums[j].name, "--inter") == 0)
            inter_given = given[j];
    }
    if (!s.glm && glm_opt != NULL)
        return usage_error("%s is only for --arch glm4_moe, deepseek_v3 or glm_moe_dsa", glm_opt);
    if (!s.mla && mla_opt != NULL)
        return usage_error("%s is only for --arch deepseek_v3 or glm_moe_dsa", mla_opt);
    if (!s.dsa && dsa_opt != NULL)
        return usage_error("%s is only for --arch glm_moe_dsa", dsa_opt);
    if (s.mla && s.mtp)
        return usage_error("--mtp is not made for --arch deepseek_v3 or glm_moe_dsa yet");
    if (s.dsa && s.q_lora == 0)
        return usage_error("--q-lora 0 leaves glm_moe_dsa's indexer without the query's LoRA it reads");
    if (s.dsa && s.index_dim < s.rope)
        return usage_error("--index-dim (%" PRId64 ") is narrower than --rope-dim (%" PRId64 ")", s.index_dim,
                           s.rope);
    if (s.mla && s.rope % 2 != 0)
        return usage_error("--rope-dim must be even (rotary embeddings pair dimensions)");
    if (s.glm && !head_dim_given)
        s.head_dim = 128;
    if (s.active > s.experts)
        return usage_error("--active (%" PRId64 ") exceeds --experts (%" PRId64 ")", s.active,
                           s.experts);
    if (s.heads % s.kv_heads != 0)
        return usage_error("--heads (%" PRId64 ") is not a multiple of --kv-heads (%" PRId64 ")",
                           s.heads, s.kv_heads);
    if (s.head_dim % 2 != 0)
        return usage_error("--head-dim must be even (rotary embeddings pair dimensions)");
    if (s.glm) {
        if (!inter_given && 8 * s.moe_inter > (1 << 20))
            return usage_error("the default --inter, 8 * --moe-inter (%" PRId64
                               "), exceeds %d: give --inter",
                               8 * s.moe_inter, 1 << 20);
        if (!inter_given)
            s.inter = 8 * s.moe_inter;
        if (s.head_dim % 4 != 0)
            return usage_error("--head-dim (%" PRId64 ") must be a multiple of 4 for glm4_moe "
                               "(rotary embeddings pair the dimensions of its first half)",
                               s.head_dim);
        if (s.dense_layers > s.layers)
            return usage_error("--dense-layers (%" PRId64 ") exceeds --layers (%" PRId64 ")",
                               s.dense_layers, s.layers);
        if (s.moe_inter * s.shared > (1 << 20))
            return usage_error("--moe-inter * --shared (%" PRId64 ") exceeds %d",
                               s.moe_inter * s.shared, 1 << 20);
        if (s.experts % s.groups != 0)
            return usage_error("--groups (%" PRId64 ") does not divide --experts (%" PRId64 ")",
                               s.groups, s.experts);
        if (s.topk_groups > s.groups)
            return usage_error("--topk-groups (%" PRId64 ") exceeds --groups (%" PRId64 ")",
                               s.topk_groups, s.groups);
        if (s.topk_groups * (s.experts / s.groups) < s.active)
            return usage_error("--topk-groups (%" PRId64 ") groups of %" PRId64
                               " experts hold fewer than --active (%" PRId64 ")",
                               s.topk_groups, s.experts / s.groups, s.active);
    }

    rc = 1;
    if (build_tensors(&s, &l) != 0)
        goto done;
    for (i = 0; i < l.n; i++)
        params += tensor_elems(&l.v[i]);
    bytes = l.v[l.n - 1].end;
    if (make_dir(out) != 0 || write_safetensors(out, &s, &l) != 0 || write_configs(out, &s) != 0)
        goto done;
    printf("%s: %zu tensors, %" PRIu64 " parameters, %" PRIu64 " bytes of %s\n", out, l.n, params,
           bytes, s.bf16 ? "bf16" : "f32");
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(l.v);
    return rc;
}
