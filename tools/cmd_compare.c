/*
 * cmd_compare.c - `coli compare` and `coli perplexity`: their command
 * lines, and the reference model both open in another weight format;
 * compare.c and perplexity.c measure and report.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "commands.h"
#include "compare.h"
#include "help_texts.h"
#include "model_args.h"
#include "options.h"
#include "perplexity.h"
#include "prompt.h"
#include "store_report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- coli compare --------------------------------------------------------- */

const char compare_synopsis[] =
    "Usage: coli compare [--model DIR] --weights FMT [OPTION]...\n"
    "Measure how far the model in one weight format strays from the same model\n"
    "in another: top-1 agreement and KL divergence of the next-token\n"
    "distribution at every prompt position, and the length of the common prefix\n"
    "of the two greedy continuations. The GPU options apply to the model under\n"
    "test; the reference runs every expert on the CPU.\n";

const opthelp compare_options[] = {
    H_MODEL,
    {O_WEIGHTS, "the format under test: auto, f32, bf16, q8, q4 or\nq2 (auto: as the "
                "checkpoint stores them)"},
    {O_Q4_GROUP, "group size of q4 weights under test: 32, 64 or\n128 (default 32; the "
                 "reference uses 32)"},
    {O_AGAINST, "the reference format: auto, f32, bf16, q8, q4 or\nq2 (default f32; for a converted "
                "model, its format)"},
    {O_PROMPT_IDS, "prompt token ids (default: random ids)"},
    {O_PROMPT_TOKENS, "length of the random prompt (default 64)"},
    {O_GEN_TOKENS, "length of the greedy continuations (default 24)"},
    {O_SEED, "seed of the random prompt (default 1)"},
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json (default text)"},
    H_VERBOSE,
    H_END,
};

/* dir holds model.coli: a converted model, of one weight format. */
static int is_converted(const char *dir)
{
    char path[4096];

    return (size_t)snprintf(path, sizeof path, "%s/model.coli", dir) < sizeof path && access(path, F_OK) == 0;
}

/* The reference model of compare and perplexity: m's model in format
 * against, every expert on the CPU and, when converted, mapped. */
static void reference_args(const model_args *m, int64_t against, model_args *r)
{
    *r = *m;
    r->weights = against;
    r->have_weights = 1;
    r->have_q4_group = 0;
    r->have_kv_type = 1; /* the reference's KV cache is f32, whatever the test's */
    r->kv_type = COLI_KV_F32;
    memset(&r->gpu, 0, sizeof r->gpu);
    r->gpu.expert_mb = -1;
    store_args_default(&r->store);
}

int cmd_compare(const args *a)
{
    compare_params p;
    model_args m, r;
    coli_model *test = NULL, *ref = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    int64_t prompt_tokens = 64, against = COLI_WEIGHTS_F32;
    uint64_t seed = 1;
    coli_model_info info;
    int rc, converted;

    memset(&p, 0, sizeof p);
    p.greedy = 24;
    if ((rc = parse_format(a, 0, &p.json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (!m.have_weights)
        return usage_error("compare needs --weights");
    if (a->value[O_AGAINST] && (rc = parse_weights("--against", a->value[O_AGAINST], &against)) != 0)
        return rc;
    if (a->value[O_PROMPT_TOKENS] &&
        (rc = parse_int64("--prompt-tokens", a->value[O_PROMPT_TOKENS], 1, 1 << 16, &prompt_tokens)) != 0)
        return rc;
    if (a->value[O_GEN_TOKENS] &&
        (rc = parse_int64("--gen-tokens", a->value[O_GEN_TOKENS], 0, 1 << 16, &p.greedy)) != 0)
        return rc;
    if (a->value[O_SEED] && (rc = parse_uint64("--seed", a->value[O_SEED], &seed)) != 0)
        return rc;
    if (a->value[O_PROMPT_IDS] && (rc = parse_ids("--prompt-ids", a->value[O_PROMPT_IDS], 0, &prompt,
                                                  &n_prompt)) != 0)
        return rc;
    converted = is_converted(m.dir);
    if (converted && a->value[O_AGAINST] == NULL)
        against = COLI_WEIGHTS_AUTO; /* the one format model.coli holds */
    reference_args(&m, against, &r);
    rc = 1;
    if (open_model(&m, &test) != 0 || get_info(test, &info) != 0)
        goto done;
    if (converted && against != COLI_WEIGHTS_AUTO && against != (int64_t)info.weights) {
        fprintf(stderr, "%s: --against %s: %s is converted to %s (model.coli) and holds no other format: "
                        "leave --against out to compare against %s, or give the original checkpoint\n",
                cli_prog, a->value[O_AGAINST], m.dir, coli_weight_format_name(info.weights),
                coli_weight_format_name(info.weights));
        goto done;
    }
    if (open_model(&r, &ref) != 0)
        goto done;
    if (!prompt) {
        /* Random ids from the seed, below the vocabulary size. */
        n_prompt = (size_t)prompt_tokens;
        prompt = xrealloc(NULL, n_prompt * sizeof *prompt);
        uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
        for (size_t i = 0; i < n_prompt; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            prompt[i] = (int32_t)(x % (uint64_t)info.vocab_size);
        }
    }
    p.model_dir = m.dir;
    p.name_test = coli_weight_format_name((coli_weight_format)m.weights);
    p.name_ref = coli_weight_format_name(converted && against == COLI_WEIGHTS_AUTO ? info.weights
                                                                                   : (coli_weight_format)against);
    p.prompt = prompt;
    p.n_prompt = n_prompt;
    rc = compare_run(test, ref, &p);
done:
    coli_model_free(test);
    coli_model_free(ref);
    free(prompt);
    return rc;
}

/* ---- coli perplexity ------------------------------------------------------ */

const char perplexity_synopsis[] =
    "Usage: coli perplexity [--model DIR] --text-file FILE [OPTION]...\n"
    "Measure the perplexity of the model on a text, as llama-perplexity does:\n"
    "the text is tokenized and cut into windows of --context tokens, each run\n"
    "from an empty context; the tokens of the second half of each window are\n"
    "scored by their log-probability given all the window's tokens before them,\n"
    "and the perplexity is exp(mean negative log-likelihood). With --against,\n"
    "the model is also loaded in a reference format and compared with it at the\n"
    "same positions: mean and largest KL(reference || tested) and the share of\n"
    "positions where the most likely tokens agree.\n";

const opthelp perplexity_options[] = {
    H_MODEL,
    {O_TEXT_FILE, "the text ('-': standard input), at most 64 MiB"},
    {O_CONTEXT, "tokens per window, at least 2 (default: 512 or\nthe model's maximum positions, "
                "whichever is\nsmaller); a text shorter than a window is one\nwindow"},
    H_WEIGHTS,
    H_Q4_GROUP,
    {O_AGAINST, "also compare with the model in this format: auto,\nf32, bf16, q8, q4 or q2 "
                "(a checkpoint; a converted\nmodel holds one format only)"},
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json (default text)"},
    H_VERBOSE,
    H_END,
};

const char perplexity_epilogue[] =
    "A remainder of the text shorter than a window is left out, as llama-perplexity\n"
    "leaves it. Each window scores the tokens from index N/2 (at least 1) to its\n"
    "end: one token more than llama-perplexity, which starts at N/2+1. The\n"
    "tokens are evaluated one at a time, which is slow on large models.\n";

int cmd_perplexity(const args *a)
{
    perplexity_params p;
    model_args m, r;
    coli_model_info info;
    coli_model *test = NULL, *ref = NULL;
    coli_options *ctx_opts = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0, text_len = 0;
    char *text = NULL;
    int64_t against = COLI_WEIGHTS_F32;
    struct stat sb;
    int rc, given;

    memset(&p, 0, sizeof p);
    if ((rc = parse_format(a, 0, &p.json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_TEXT_FILE] == NULL)
        return usage_error("--text-file is required");
    if (a->value[O_TEXT_FILE][0] == '\0')
        return usage_error("--text-file needs a file name ('-' for standard input)");
    if (m.have_context && m.context < 2)
        return usage_error("invalid value '%s' for --context (a window needs at least 2 tokens)",
                           a->value[O_CONTEXT]);
    if (a->value[O_AGAINST] && (rc = parse_weights("--against", a->value[O_AGAINST], &against)) != 0)
        return rc;
    if (strcmp(a->value[O_TEXT_FILE], "-") != 0 && stat(a->value[O_TEXT_FILE], &sb) == 0 &&
        S_ISREG(sb.st_mode) && sb.st_size == 0) {
        fprintf(stderr, "%s: %s: the text is empty\n", cli_prog, a->value[O_TEXT_FILE]);
        return 1;
    }
    if ((rc = read_prompt_file(a->value[O_TEXT_FILE], &text, &text_len)) != 0)
        return rc;
    rc = 1;
    /* the models are opened for a window, not for the model's whole
     * context: a converted model sets RAM aside for one context of it */
    given = m.have_context;
    if (!given) {
        m.have_context = 1;
        m.context = 512;
    }
    if (open_model(&m, &test) != 0 || get_info(test, &info) != 0)
        goto done;
    if (tokenize_text(test, text, text_len, 1, &tokens, &n_tokens) != 0)
        goto done;
    if (n_tokens < 2) {
        fprintf(stderr, "%s: %s: the text has %zu token%s; perplexity needs at least 2\n", cli_prog,
                a->value[O_TEXT_FILE], n_tokens, n_tokens == 1 ? "" : "s");
        goto done;
    }
    p.window = (size_t)m.context;
    if (!given && info.max_positions > 0 && (size_t)info.max_positions < p.window)
        p.window = (size_t)info.max_positions;
    m.context = (int64_t)p.window;
    if (make_options(&m, &ctx_opts) != 0)
        goto done;
    p.ctx_opts = ctx_opts;
    if (a->value[O_AGAINST]) {
        reference_args(&m, against, &r);
        if (open_model(&r, &ref) != 0)
            goto done;
        p.name_ref = coli_weight_format_name((coli_weight_format)against);
    }
    p.model_dir = m.dir;
    p.text_file = strcmp(a->value[O_TEXT_FILE], "-") == 0 ? "standard input" : a->value[O_TEXT_FILE];
    p.name_test = m.have_weights ? coli_weight_format_name((coli_weight_format)m.weights) : weights_label(&info);
    p.tokens = tokens;
    p.n_tokens = n_tokens;
    rc = perplexity_run(test, ref, &p);
done:
    coli_options_free(ctx_opts);
    coli_model_free(test);
    coli_model_free(ref);
    free(tokens);
    free(text);
    return rc;
}
