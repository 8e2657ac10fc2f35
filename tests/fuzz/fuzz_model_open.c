/* fuzz_model_open.c - libFuzzer target for opening a whole model directory.
 *
 * Input: files separated by NUL bytes (no JSON text holds a raw NUL), each
 * "NAME\nCONTENT". NAME is a plain file name ([A-Za-z0-9._-], not "." or
 * ".."); entries with another name are skipped. A file whose name ends in
 * ".safetensors" is given as its JSON header only: the 8-byte length is
 * prepended here and the data area is zeros up to the largest data offset
 * the header names (at most DATA_MAX bytes; a larger offset leaves the area
 * short, which the reader must refuse). Keeping the tensor bytes out of the
 * input keeps mutations on the structure; the safetensors target covers the
 * raw file. The pseudo-file "@options" selects the weight format (byte 0,
 * modulo 6) and the q4 group (byte 1: 32, 64 or 128).
 *
 * The directory is opened with coli_model_open. A refusal must come with a
 * message. An opened model is put to work: info, weight sizes in every
 * format, tokenize/detokenize when it has a tokenizer, and a context that
 * evaluates a two-token prefill and a one-token decode step. */
#include <string.h>

#include "fuzzutil.h"
#include "io/json.h"

#define MAX_FILES 16
#define NAME_MAX_LEN 64
#define DATA_MAX ((uint64_t)16 << 20)

static int plain_name(const char *s, size_t n)
{
    if (n == 0 || n > NAME_MAX_LEN || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* Size of the data area a header asks for: its largest offset. */
static uint64_t data_size(const char *header, size_t n)
{
    coli__err err = {{0}};
    coli__json_doc *doc = NULL;
    if (coli__json_parse(header, n, "header", &doc, &err) != COLI_OK)
        return 0;
    const coli__json *root = coli__json_root(doc);
    uint64_t max = 0;
    for (size_t i = 0; root->type == COLI_JSON_OBJECT && i < root->len; i++) {
        const coli__json *off = coli__json_get(&root->items[i], "data_offsets");
        for (size_t k = 0; off && off->type == COLI_JSON_ARRAY && k < off->len; k++)
            if (off->items[k].is_int && off->items[k].integer > 0 && (uint64_t)off->items[k].integer > max)
                max = (uint64_t)off->items[k].integer;
    }
    coli__json_free(doc);
    return max;
}

static void write_safetensors(const char *name, const char *header, size_t n, uint64_t *budget)
{
    uint8_t *buf = malloc(n + 8);
    FZ_CHECK(buf != NULL, "out of memory");
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, n);
    uint64_t pad = data_size(header, n);
    if (pad > *budget)
        pad = *budget;
    *budget -= pad;
    fz_write(name, buf, n + 8, pad);
    free(buf);
}

static int32_t pick(int32_t id, int32_t vocab)
{
    return id >= 0 && id < vocab ? id : 0;
}

static void use_model(coli_model *m)
{
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    FZ_CHECK(coli_model_get_info(m, &info) == COLI_OK, "get_info: %s", coli_model_errmsg(m));
    FZ_CHECK(info.n_layers > 0 && info.hidden_size > 0 && info.vocab_size > 0 && info.n_heads > 0 &&
                 info.n_kv_heads > 0 && info.head_dim > 0,
             "opened a model with %d layers, hidden %d, vocab %d, %d/%d heads of %d", info.n_layers,
             info.hidden_size, info.vocab_size, info.n_heads, info.n_kv_heads, info.head_dim);
    FZ_CHECK(info.n_moe_layers >= 0 && info.n_moe_layers <= info.n_layers, "%d MoE layers of %d",
             info.n_moe_layers, info.n_layers);
    FZ_CHECK(info.n_moe_layers == 0 || (info.n_experts_active > 0 && info.n_experts_active <= info.n_experts),
             "%d active experts of %d", info.n_experts_active, info.n_experts);
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++) {
        uint64_t total = 0, active = 0;
        FZ_CHECK(coli_model_weight_bytes(m, (coli_weight_format)f, &total, &active) == COLI_OK,
                 "weight_bytes(%d): %s", f, coli_model_errmsg(m));
        FZ_CHECK(active <= total, "format %d: %llu active bytes of %llu", f, (unsigned long long)active,
                 (unsigned long long)total);
    }

    static const char text[] = "Hello, world! <|endoftext|> <s>";
    int32_t ids[64];
    size_t n_ids = 0;
    coli_status st = coli_tokenize(m, text, sizeof text - 1, 1, ids, 64, &n_ids);
    if (st == COLI_OK || st == COLI_ENOSPC) {
        size_t k = n_ids < 64 ? n_ids : 64;
        for (size_t i = 0; i < k; i++)
            FZ_CHECK(ids[i] >= 0 && ids[i] < info.vocab_size, "token %ld of a vocab of %d", (long)ids[i],
                     info.vocab_size);
        char buf[256];
        size_t len = 0;
        st = coli_detokenize(m, ids, k, 0, buf, sizeof buf, &len);
        FZ_CHECK(st == COLI_OK || st == COLI_ENOSPC, "detokenize: %s", coli_model_errmsg(m));
    } else {
        fz_check_failure(st, coli_model_errmsg(m));
    }

    coli_context *ctx = NULL;
    st = coli_context_create(m, NULL, &ctx);
    if (st != COLI_OK) {
        fz_check_failure(st, coli_model_errmsg(m));
        return;
    }
    int32_t prompt[2] = {pick(info.bos_id, info.vocab_size), info.vocab_size - 1};
    st = coli_eval(ctx, prompt, 2);
    if (st == COLI_OK) {
        FZ_CHECK(coli_context_logits(ctx) != NULL, "no logits after eval");
        int32_t next = pick(info.eos_id, info.vocab_size);
        st = coli_eval(ctx, &next, 1);
    }
    /* The context holds 4 positions: both evals fit. */
    if (st != COLI_OK)
        fz_check_failure(st, coli_context_errmsg(ctx));
    coli_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    int64_t weights = COLI_WEIGHTS_AUTO, group = 32;
    uint64_t budget = DATA_MAX;
    int files = 0;

    fz_clear();
    while (p < end && files < MAX_FILES) {
        const char *stop = memchr(p, '\0', (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        if (nl != NULL) {
            size_t nlen = (size_t)(nl - p), clen = (size_t)(stop - nl - 1);
            char name[NAME_MAX_LEN + 1];
            if (nlen == 8 && memcmp(p, "@options", 8) == 0) {
                if (clen > 0)
                    weights = (unsigned char)nl[1] % 6;
                if (clen > 1)
                    group = (int64_t)32 << ((unsigned char)nl[2] % 3);
            } else if (plain_name(p, nlen)) {
                memcpy(name, p, nlen);
                name[nlen] = '\0';
                if (ends_with(name, nlen, ".safetensors"))
                    write_safetensors(name, nl + 1, clen, &budget);
                else
                    fz_write(name, nl + 1, clen, 0);
                files++;
            }
        }
        p = stop + 1;
    }

    coli_options *opts = NULL;
    FZ_CHECK(coli_options_create(&opts) == COLI_OK, "options");
    FZ_CHECK(coli_options_set(opts, COLI_OPT_THREADS, 1) == COLI_OK, "threads");
    FZ_CHECK(coli_options_set(opts, COLI_OPT_CONTEXT, 4) == COLI_OK, "context");
    FZ_CHECK(coli_options_set(opts, COLI_OPT_WEIGHTS, weights) == COLI_OK, "weights");
    FZ_CHECK(coli_options_set(opts, COLI_OPT_Q4_GROUP, group) == COLI_OK, "q4 group");
    coli_model *m = NULL;
    coli_status st = coli_model_open(fz_dir(), opts, &m);
    coli_options_free(opts);
    if (st != COLI_OK) {
        FZ_CHECK(m != NULL || st == COLI_ENOMEM, "no handle for the message");
        if (m != NULL)
            fz_check_failure(st, coli_model_errmsg(m));
    } else {
        use_model(m);
    }
    coli_model_free(m);
    return 0;
}
