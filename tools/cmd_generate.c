/*
 * cmd_generate.c - `coli generate`: text from a prompt, streamed to
 * standard output as it comes (or one JSON object), with the reason it
 * stopped, the speeds and, with --stats, the figures of the run.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "commands.h"
#include "errors.h"
#include "gpu_report.h"
#include "help_texts.h"
#include "jsonout.h"
#include "logprob.h"
#include "model_args.h"
#include "mtp_report.h"
#include "options.h"
#include "prompt.h"
#include "store_report.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- coli generate -------------------------------------------------------- */

const char generate_synopsis[] =
    "Usage: coli generate [--model DIR] --prompt TEXT [OPTION]...\n"
    "  or:  coli generate [--model DIR] --prompt-file FILE [OPTION]...\n"
    "  or:  coli generate [--model DIR] --prompt-ids ID,ID,... [OPTION]...\n"
    "Generate text from a prompt. The text is streamed to standard output as it\n"
    "is produced; speeds are reported on standard error.\n";

const opthelp generate_options[] = {
    H_MODEL,
    {O_PROMPT, "prompt text, tokenized with the model's tokenizer"},
    {O_PROMPT_FILE, "read the prompt text from FILE ('-': standard\ninput), byte for byte, "
                    "at most 64 MiB"},
    {O_PROMPT_IDS, "prompt as token ids apart by commas or spaces\n(as coli tokenize prints them)"},
    {O_MAX_TOKENS, "generate at most N tokens (default 64)"},
    {O_TEMPERATURE, "sampling temperature; 0 = greedy (default 0.8)"},
    {O_TOP_K, "keep the K most likely tokens; 0 = off (default 40)"},
    {O_TOP_P, "nucleus sampling mass; 1 = off (default 0.95)"},
    {O_MIN_P, "drop tokens less likely than P times the most\nlikely one; 0 = off (default 0)"},
    {O_REPEAT_PENALTY, "penalise tokens seen among the last N; 1 = off\n(default 1)"},
    {O_REPEAT_LAST_N, "tokens the repetition penalty looks back on\n(default 64)"},
    {O_SEED, "random seed (default: taken from the clock;\nprinted by --verbose, --stats and --format json)"},
    {O_STOP, "stop before the text STR; may be repeated"},
    {O_IGNORE_EOS, "do not stop at an end-of-sequence token"},
    {O_NO_ECHO, "do not print the prompt text first"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CONTEXT,
    H_CPU,
    H_KV_TYPE,
    H_MTP,
    H_GPU,
    H_STORE,
    {O_NO_SPECIAL, "do not add the tokenizer's special tokens to the\nprompt text"},
    {O_FORMAT, "text or json (default text)"},
    {O_LOGPROBS, "with --format json: the log-probability of each\ngenerated token and of the N most likely "
                 "tokens\n(0-20) under the model's distribution (the\nlog-softmax of its logits, before any "
                 "sampler\nsetting)"},
    {O_STATS, "after the summary, print on standard error the\ntokens, speeds, context used, memory of "
              "the\nweights and KV cache, the seed, the expert\nstore's figures (converted models) and the GPU\n"
              "tier's, per device"},
    H_VERBOSE,
    H_END,
};

const char generate_epilogue[] =
    "Exactly one of --prompt, --prompt-file and --prompt-ids gives the prompt;\n"
    "it must not be empty. Generation stops at an end-of-sequence token, after\n"
    "--max-tokens tokens, when the context is full, at a --stop string, or on\n"
    "Ctrl-C; every token is kept and the reason is given (stop_reason in JSON,\n"
    "a line on standard error in text mode). Exit status 130 after Ctrl-C.\n";

static volatile sig_atomic_t g_interrupted; /* set by Ctrl-C during generate */

typedef struct gen_state {
    int stream;        /* text mode: write as we go */
    int ids_only;      /* no tokenizer: stream the ids (len counts them), no text */
    int write_failed;
    int write_errno;   /* of the failed write */
    char *text;        /* json mode: collected text */
    size_t len, cap;
    coli_context *ctx; /* --logprobs: its logits are the token's during on_token */
    size_t vocab;
    int logprobs;
    logprob_list lp;
} gen_state;

static int on_token(void *user, int32_t token, const char *text, size_t len)
{
    gen_state *g = user;

    if (g->logprobs)
        logprob_list_add(&g->lp, coli_context_logits(g->ctx), g->vocab, token);
    if (g_interrupted)
        return 1; /* stop after this token: what came is kept */
    if (g->stream) {
        if (g->ids_only) {
            if (printf("%s%" PRId32, g->len++ ? " " : "", token) < 0)
                g->write_failed = 1;
        } else if (len > 0 && fwrite(text, 1, len, stdout) != len) {
            g->write_failed = 1;
        }
        if (fflush(stdout) != 0)
            g->write_failed = 1;
        if (g->write_failed) {
            g->write_errno = errno;
            note_stdout_error(errno);
        }
        return g->write_failed; /* stop when nobody reads any more */
    }
    if (g->len + len + 1 > g->cap) {
        g->cap = 2 * (g->len + len + 1);
        g->text = xrealloc(g->text, g->cap);
    }
    if (len > 0)
        memcpy(g->text + g->len, text, len);
    g->len += len;
    g->text[g->len] = '\0';
    return 0;
}

/* The model has no tokenizer.json (coli_detokenize says so on no ids). */
static int lacks_tokenizer(coli_model *model)
{
    char c;
    size_t len = 0;

    return coli_detokenize(model, NULL, 0, 0, &c, 1, &len) == COLI_ESTATE;
}

/* "the context is full (512 positions; -c raises it up to the model's 4096)" */
static void context_full_line(char *buf, size_t size, const coli_context *ctx, const coli_model_info *info)
{
    size_t cap = coli_context_capacity(ctx);

    if (cap < (size_t)info->max_positions)
        snprintf(buf, size, "the context is full (%zu positions; -c raises it up to the model's %d)", cap,
                 info->max_positions);
    else
        snprintf(buf, size, "the context is full (%zu positions, the model's maximum)", cap);
}

static uint64_t clock_seed(void)
{
    struct timespec ts;
    uint64_t z;

    clock_gettime(CLOCK_REALTIME, &ts);
    z = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    z ^= (uint64_t)getpid() << 32;
    /* splitmix64 finalizer: spread the bits. */
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/*
 * The text of the generated ids, decoded after the last few prompt ids as
 * the library streams it (so that decoders looking at their left neighbour
 * agree), into a NUL-terminated *text_out. Returns 0, or 1 after an error.
 */
static int generated_text(coli_model *model, const int32_t *prompt, size_t n_prompt, const int32_t *gen,
                          size_t n_gen, char **text_out, size_t *len_out)
{
    size_t n_ctx = n_prompt < 4 ? n_prompt : 4, skip = 0, n_before, n_all;
    int32_t *ids = xrealloc(NULL, (n_ctx + n_gen + 1) * sizeof *ids);
    char *before = NULL, *all = NULL;
    int rc = 1;

    memcpy(ids, prompt + n_prompt - n_ctx, n_ctx * sizeof *ids);
    memcpy(ids + n_ctx, gen, n_gen * sizeof *ids);
    if (detokenize_ids(model, ids, n_ctx, 1, &before, &n_before) == 0 &&
        detokenize_ids(model, ids, n_ctx + n_gen, 1, &all, &n_all) == 0) {
        while (skip < n_before && skip < n_all && before[skip] == all[skip])
            skip++;
        memmove(all, all + skip, n_all - skip + 1);
        *text_out = all;
        *len_out = n_all - skip;
        all = NULL;
        rc = 0;
    }
    free(ids);
    free(before);
    free(all);
    return rc;
}

/* The --stop string that ends text first (the first given on a tie, as the
 * library picks it) and its offset, or NULL. */
static const char *first_stop(const args *a, const char *text, size_t len, size_t *at)
{
    const char *best = NULL;

    *at = len;
    for (int k = 0; k < a->given[O_STOP]; k++) {
        const char *stop = a->values[O_STOP][k];
        size_t m = strlen(stop);
        for (size_t i = 0; i + m <= len && i < *at; i++)
            if (memcmp(text + i, stop, m) == 0) {
                *at = i;
                best = stop;
                break;
            }
    }
    return best;
}

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

int cmd_generate(const args *a)
{
    model_args m;
    coli_sampler_params sp;
    coli_generate_params gp;
    coli_stop_reason why = COLI_STOP_NONE;
    const char *reason_name = "none", *reason_line = "none";
    int interrupted = 0;
    double min_p = 0.0, repeat_penalty = 1.0;
    int64_t repeat_last_n = 64;
    coli_model *model = NULL;
    coli_model_info info;
    coli_context *ctx = NULL;
    coli_sampler *sampler = NULL;
    coli_stats stats;
    char full_line[160], write_line[160];
    gpu_report gpu;
    coli_store_stats store;
    gen_state g;
    char *full_text = NULL; /* the decoding of every generated token, after a stop string */
    size_t full_len = 0, stop_at = 0;
    const char *stop_hit = NULL;
    int32_t *prompt = NULL, *out = NULL;
    size_t n_prompt = 0, n_out = 0;
    int64_t max_tokens = 64, top_k = 40;
    double temperature = 0.8, top_p = 0.95;
    uint64_t seed = 0;
    const char *text = NULL; /* the prompt text, if not ids */
    char *file_text = NULL;
    size_t text_len = 0;
    int json, rc;
    coli_status st;

    memset(&g, 0, sizeof g);
    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if ((rc = check_prompt_args(a)) != 0)
        return rc;
    if (a->value[O_MAX_TOKENS] &&
        (rc = parse_int64("--max-tokens", a->value[O_MAX_TOKENS], 0, 1 << 24, &max_tokens)))
        return rc;
    if (a->value[O_TEMPERATURE] &&
        (rc = parse_real("--temperature", a->value[O_TEMPERATURE], 0.0, 1e6, &temperature)))
        return rc;
    if (a->value[O_TOP_K] && (rc = parse_int64("--top-k", a->value[O_TOP_K], 0, INT_MAX, &top_k)))
        return rc;
    if (a->value[O_TOP_P] && (rc = parse_real("--top-p", a->value[O_TOP_P], 0.0, 1.0, &top_p)))
        return rc;
    if (a->value[O_MIN_P] && (rc = parse_real("--min-p", a->value[O_MIN_P], 0.0, 1.0, &min_p)))
        return rc;
    if (a->value[O_REPEAT_PENALTY] &&
        (rc = parse_real("--repeat-penalty", a->value[O_REPEAT_PENALTY], 1e-6, 1e6, &repeat_penalty)))
        return rc;
    if (a->value[O_REPEAT_LAST_N] &&
        (rc = parse_int64("--repeat-last-n", a->value[O_REPEAT_LAST_N], 0, 1 << 20, &repeat_last_n)))
        return rc;
    for (int k = 0; k < a->given[O_STOP]; k++)
        if (a->values[O_STOP][k][0] == '\0')
            return usage_error("--stop needs a non-empty string");
    if (a->value[O_LOGPROBS] != NULL) {
        int64_t top_n;
        if ((rc = parse_int64("--logprobs", a->value[O_LOGPROBS], 0, 20, &top_n)) != 0)
            return rc;
        if (!json)
            return usage_error("--logprobs needs --format json");
        g.logprobs = 1;
        g.lp.k = (size_t)top_n;
    }
    if (a->value[O_SEED] != NULL) {
        if ((rc = parse_uint64("--seed", a->value[O_SEED], &seed)) != 0)
            return rc;
    } else {
        seed = clock_seed();
    }
    if ((rc = prompt_args(a, &prompt, &n_prompt, &text, &text_len, &file_text)) != 0)
        return rc;

    rc = 1;
    if (open_model(&m, &model) != 0 || get_info(model, &info) != 0)
        goto done;
    g.ids_only = lacks_tokenizer(model);
    if (g.ids_only && text != NULL) {
        fprintf(stderr, "%s: %s has no tokenizer.json, so a text prompt cannot be read: give token ids "
                        "with --prompt-ids (the output is then ids too)\n",
                cli_prog, m.dir);
        goto done;
    }
    if (g.ids_only && !json)
        fprintf(stderr, "%s: %s has no tokenizer.json: printing token ids, not text\n", cli_prog, m.dir);
    if (text != NULL) {
        if (tokenize_prompt(model, text, text_len, !a->given[O_NO_SPECIAL], &prompt, &n_prompt) != 0)
            goto done;
    }
    st = coli_context_create(model, NULL, &ctx);
    if (st != COLI_OK) {
        runtime_error(st, ctx ? coli_context_errmsg(ctx) : coli_model_errmsg(model));
        goto done;
    }
    coli_sampler_params_init(&sp, sizeof sp);
    sp.temperature = (float)temperature;
    sp.top_k = (int)top_k;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.repeat_penalty = (float)repeat_penalty;
    sp.repeat_last_n = (int)repeat_last_n;
    sp.seed = seed;
    st = coli_sampler_create(&sp, &sampler);
    if (st != COLI_OK) {
        runtime_error(st, "cannot create the sampler");
        goto done;
    }
    out = xrealloc(NULL, (size_t)(max_tokens ? max_tokens : 1) * sizeof *out);
    g.stream = !json;
    if (g.logprobs) {
        g.ctx = ctx;
        g.vocab = (size_t)info.vocab_size;
    }
    if (m.verbose) /* before any text, so that it is there even after Ctrl-C */
        fprintf(stderr, "%s: seed %" PRIu64 " (--seed %" PRIu64 " gives this text again)\n", cli_prog, seed,
                seed);
    if (g.stream && text != NULL && !a->given[O_NO_ECHO]) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    } else if (g.stream && !a->given[O_NO_ECHO] && !g.ids_only) {
        /* --prompt-ids: echo their text, without the special tokens that
         * --prompt would have added, so that both print the same (without
         * a tokenizer only the generated ids are printed). */
        char *echo = NULL;
        size_t echo_len = 0;

        if (detokenize_ids(model, prompt, n_prompt, 1, &echo, &echo_len) != 0)
            goto done;
        fwrite(echo, 1, echo_len, stdout);
        fflush(stdout);
        free(echo);
    }
    coli_generate_params_init(&gp, sizeof gp);
    gp.max_tokens = (size_t)max_tokens;
    gp.ignore_eos = a->given[O_IGNORE_EOS];
    gp.stop = a->values[O_STOP];
    gp.n_stop = (size_t)a->given[O_STOP];
    gp.on_token = on_token;
    gp.user = &g;
    signal(SIGINT, on_sigint);
    st = coli_generate(ctx, prompt, n_prompt, sampler, &gp, out, (size_t)max_tokens, &n_out, &why);
    signal(SIGINT, SIG_DFL);
    interrupted = why == COLI_STOP_CALLBACK && g_interrupted;
    if (g.stream) {
        fputc('\n', stdout);
        fflush(stdout); /* before the summary on stderr */
    }
    if (st != COLI_OK) {
        fflush(stdout);
        runtime_error(st, coli_context_errmsg(ctx));
        if (st == COLI_ENOSPC)
            explain_context(ctx, &info, n_prompt);
        goto done;
    }
    context_full_line(full_line, sizeof full_line, ctx, &info);
    snprintf(write_line, sizeof write_line, "a write error on standard output: %s", strerror(g.write_errno));
    if (n_out > (size_t)max_tokens)
        n_out = (size_t)max_tokens;
    if (why == COLI_STOP_STRING) {
        /* tokens and text both end with the token that completed the stop
         * string: the text is theirs, the string and what followed in it */
        if (generated_text(model, prompt, n_prompt, out, n_out, &full_text, &full_len) != 0)
            goto done;
        stop_hit = first_stop(a, full_text, full_len, &stop_at);
    }
    reason_name = interrupted ? "interrupted" : coli_stop_reason_name(why);
    reason_line = interrupted                  ? "interrupted (Ctrl-C)"
                  : why == COLI_STOP_EOS       ? "end of sequence"
                  : why == COLI_STOP_LENGTH    ? "--max-tokens reached"
                  : why == COLI_STOP_CONTEXT   ? full_line
                  : g.write_failed             ? write_line
                  : why == COLI_STOP_STRING    ? "a --stop string"
                                               : reason_name;
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    st = coli_context_stats(ctx, &stats);
    if (st != COLI_OK) {
        runtime_error(st, coli_context_errmsg(ctx));
        goto done;
    }
    if (gpu_report_read(model, ctx, &gpu) != 0 || store_report_read(model, &store) != 0)
        goto done;
    if (json) {
        printf("{\"model\":");
        json_string(stdout, m.dir, strlen(m.dir));
        printf(",\"prompt_ids\":");
        json_ids(stdout, prompt, n_prompt);
        printf(",\"tokens\":");
        json_ids(stdout, out, n_out);
        if (g.logprobs) {
            printf(",\"logprobs\":");
            logprob_list_json(stdout, &g.lp);
        }
        printf(",\"text\":");
        if (full_text != NULL)
            json_string(stdout, full_text, full_len);
        else
            json_string(stdout, g.text ? g.text : "", g.len);
        if (stop_hit != NULL) {
            printf(",\"stop\":");
            json_string(stdout, stop_hit, strlen(stop_hit));
            printf(",\"stop_offset\":%zu", stop_at);
        } else {
            printf(",\"stop\":null");
        }
        printf(",\"prefill_tok_s\":");
        json_real(stdout, stats.prefill_tok_s, "%.3f");
        printf(",\"decode_tok_s\":");
        json_real(stdout, stats.decode_tok_s, "%.3f");
        printf(",\"prefill_tokens\":%" PRIu64 ",\"decode_tokens\":%" PRIu64
               ",\"seed\":%" PRIu64 ",\"stop_reason\":\"%s\"",
               stats.prefill_tokens, stats.decode_tokens, seed, reason_name);
        printf(",\"context_positions\":%" PRIu64 ",\"context_used\":%" PRIu64 ",\"kv_bytes\":%" PRIu64
               ",\"kv_type\":\"%s\",\"weight_bytes\":%" PRIu64,
               stats.context_positions, stats.context_used, stats.kv_bytes, kv_type_name(info.kv_type),
               info.weight_bytes);
        mtp_report_json(stdout, &stats, m.mtp);
        store_report_json(stdout, &store);
        gpu_report_json(stdout, model, &gpu);
        printf("}\n");
    } else {
        fprintf(stderr, "%s: stopped: %s", cli_prog, reason_line);
        if (stop_hit != NULL && m.verbose) {
            fputc(' ', stderr);
            json_string(stderr, stop_hit, strlen(stop_hit));
        }
        fputc('\n', stderr);
        fprintf(stderr, "prefill: %" PRIu64 " tok, %.2f tok/s; decode: %" PRIu64
                        " tok, %.2f tok/s\n",
                stats.prefill_tokens, stats.prefill_tok_s, stats.decode_tokens,
                stats.decode_tok_s);
    }
    if (a->given[O_STATS]) {
        fprintf(stderr, "tokens: %zu prompt, %zu generated\n", n_prompt, n_out);
        fprintf(stderr, "speed: prefill %.2f tok/s, decode %.2f tok/s\n", stats.prefill_tok_s,
                stats.decode_tok_s);
        fprintf(stderr, "context: %" PRIu64 " of %" PRIu64 " positions used\n", stats.context_used,
                stats.context_positions);
        fprintf(stderr, "memory: weights %.1f MiB, KV cache %.1f MiB (%" PRIu64 " bytes per position)\n",
                (double)info.weight_bytes / (1024.0 * 1024.0), (double)stats.kv_bytes / (1024.0 * 1024.0),
                info.kv_bytes_per_position);
        fprintf(stderr, "seed: %" PRIu64 "\n", seed);
        if (store.mode != COLI_STORE_RESIDENT) /* a converted model */
            store_report_text(stderr, 0, &store);
        gpu_report_text(stderr, 0, model, &gpu);
        mtp_report_text(stderr, &stats, m.mtp);
    }
    rc = interrupted ? 130 : 0;
done:
    coli_sampler_free(sampler);
    coli_context_free(ctx);
    coli_model_free(model);
    free(prompt);
    free(out);
    free(g.text);
    free(full_text);
    free(file_text);
    logprob_list_free(&g.lp);
    return rc;
}
