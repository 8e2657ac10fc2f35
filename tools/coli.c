/*
 * coli.c - the coli command-line tool.
 *
 * A plain client of libcolibri: it uses the public header only, so every
 * thing it does can be done by any other program linked to the library.
 *
 * The option table, the parser and the help formatter are in options.c;
 * this file holds main and the subcommands that have no file of their own.
 * Calls go one way: from here to the command files (bench, compare,
 * convert, gpu_report, store_report), from those to the helpers that every
 * file shares (options, errors, jsonout, demo_dir), never back up.
 *
 * Exit status: 0 on success, 1 on a failure (the library's, printed as
 * "coli: <coli_strerror>: <detail>"; an unreadable file; a write error on
 * standard output), 2 for a usage error (an unknown subcommand or option, a
 * missing or malformed value).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "bench.h"
#include "compare.h"
#include "convert.h"
#include "demo_dir.h"
#include "disk_probe.h"
#include "errors.h"
#include "gpu_report.h"
#include "jsonout.h"
#include "logprob.h"
#include "options.h"
#include "perplexity.h"
#include "store_report.h"
#include "mtp_report.h"
#include "serve/chatcmd.h"
#include "serve/serve.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- opening the model ---------------------------------------------------- */

/* Settings shared by every subcommand that opens a model. */
typedef struct model_args {
    const char *dir;
    int have_weights, have_threads, have_context, have_q4_group, have_cpu, have_kv_type;
    int64_t weights, threads, context, q4_group, cpu, kv_type;
    int64_t mtp;   /* drafts per step; 0: no multi-token prediction */
    int mtp_guard;
    int verbose;
    gpu_args gpu;
    store_args store;
} model_args;

/* Warns when --threads asks for more threads than there are cores: it is
 * allowed (the library takes up to its bound), but decode will be slow. */
static void warn_threads(int64_t threads)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (cores > 0 && threads > cores)
        fprintf(stderr, "%s: warning: %" PRId64 " threads exceed the %ld online cores; decode "
                        "will be slow\n",
                cli_prog, threads, cores);
}

/* A weight format by its library name (coli_weight_format_name). */
static int parse_weights(const char *opt, const char *w, int64_t *out)
{
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++)
        if (strcmp(w, coli_weight_format_name((coli_weight_format)f)) == 0) {
            *out = f;
            return 0;
        }
    return usage_error("invalid value '%s' for %s (expected auto, f32, bf16, q8, q4 or q2)", w, opt);
}

/* --cpu: the values of COLI_OPT_CPU_KERNELS past 0 (auto). */
static int parse_cpu(const char *w, int64_t *out)
{
    static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(w, names[i]) == 0) {
            *out = (int64_t)i + 1;
            return 0;
        }
    return usage_error("invalid value '%s' for --cpu (expected scalar, avx2, avx512 or amx)", w);
}

/* --kv-type: the names of coli_kv_type's values. */
static const char *const g_kv_types[] = {"f32", "bf16"};

static const char *kv_type_name(coli_kv_type t)
{
    return (unsigned)t < sizeof g_kv_types / sizeof g_kv_types[0] ? g_kv_types[t] : "unknown";
}

static int parse_kv_type(const char *w, int64_t *out)
{
    for (size_t i = 0; i < sizeof g_kv_types / sizeof g_kv_types[0]; i++)
        if (strcmp(w, g_kv_types[i]) == 0) {
            *out = (int64_t)i;
            return 0;
        }
    return usage_error("invalid value '%s' for --kv-type (expected f32 or bf16)", w);
}

static int parse_model_args(const args *a, model_args *m)
{
    int rc;

    memset(m, 0, sizeof *m);
    if (a->value[O_MODEL] != NULL && a->value[O_MODEL][0] == '\0')
        return usage_error("--model needs a directory");
    m->dir = a->value[O_MODEL] ? a->value[O_MODEL] : demo_model_dir(); /* NULL: none */
    m->verbose = a->given[O_VERBOSE];
    if (a->value[O_WEIGHTS] != NULL) {
        m->have_weights = 1;
        if ((rc = parse_weights("--weights", a->value[O_WEIGHTS], &m->weights)) != 0)
            return rc;
    }
    if (a->value[O_Q4_GROUP] != NULL) {
        rc = option_in_bounds("--q4-group", COLI_OPT_Q4_GROUP, a->value[O_Q4_GROUP],
                              &m->q4_group);
        if (rc != 0)
            return rc;
        if (m->q4_group != 32 && m->q4_group != 64 && m->q4_group != 128)
            return usage_error("invalid value '%s' for --q4-group (expected 32, 64 or 128)",
                               a->value[O_Q4_GROUP]);
        if (!m->have_weights || m->weights != COLI_WEIGHTS_Q4)
            return usage_error("--q4-group applies only to --weights q4");
        m->have_q4_group = 1;
    }
    if (a->value[O_THREADS] != NULL) {
        rc = parse_threads("--threads", a->value[O_THREADS], &m->threads);
        if (rc != 0)
            return rc;
        m->have_threads = 1;
    }
    if (a->value[O_CONTEXT] != NULL) {
        rc = option_in_bounds("--context", COLI_OPT_CONTEXT, a->value[O_CONTEXT], &m->context);
        if (rc != 0)
            return rc;
        m->have_context = 1;
    }
    if (a->value[O_CPU] != NULL) {
        if ((rc = parse_cpu(a->value[O_CPU], &m->cpu)) != 0)
            return rc;
        m->have_cpu = 1;
    }
    if (a->value[O_KV_TYPE] != NULL) {
        if ((rc = parse_kv_type(a->value[O_KV_TYPE], &m->kv_type)) != 0)
            return rc;
        m->have_kv_type = 1;
    }
    m->mtp_guard = !a->given[O_NO_MTP_GUARD];
    if (a->given[O_MTP])
        m->mtp = 1;
    if (a->value[O_MTP_TOKENS] != NULL) {
        if (!a->given[O_MTP])
            return usage_error("--mtp-tokens needs --mtp");
        rc = option_in_bounds("--mtp-tokens", COLI_OPT_MTP, a->value[O_MTP_TOKENS], &m->mtp);
        if (rc != 0)
            return rc;
        if (m->mtp < 1)
            return usage_error("invalid value '%s' for --mtp-tokens (expected 1 to 8)", a->value[O_MTP_TOKENS]);
    }
    if (a->given[O_NO_MTP_GUARD] && !a->given[O_MTP])
        return usage_error("--no-mtp-guard needs --mtp");
    if ((rc = gpu_args_parse(a, &m->gpu)) != 0)
        return rc;
    if ((rc = store_args_parse(a, &m->store)) != 0)
        return rc;
    if (m->have_threads)
        warn_threads(m->threads);
    return 0;
}

static void log_to_stderr(void *user, coli_log_level level, const char *message)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    int verbose = *(const int *)user;

    /* Errors also come back as the status of the failing call, which is
     * printed once; show them here only when asked to be verbose. */
    if (level == COLI_LOG_ERROR && !verbose)
        return;
    /* open_model says it once, with the model's detail. */
    if (!verbose && gpu_log_is_unused_warning(level, message))
        return;
    fprintf(stderr, "coli: %s: ", (unsigned)level < 4 ? names[level] : "log");
    print_translated(stderr, message); /* our option names for the library's */
    fputc('\n', stderr);
}

/* The library options that m asks for. On failure prints the message and
 * returns 1. */
static int make_options(model_args *m, coli_options **out)
{
    coli_options *opts = NULL;
    coli_status st;

    *out = NULL;
    st = coli_options_create(&opts);
    if (st != COLI_OK)
        return runtime_error(st, "cannot create options");
    if (m->have_weights && (st = coli_options_set(opts, COLI_OPT_WEIGHTS, m->weights)) != COLI_OK) {
        runtime_error(st, "--weights");
        goto fail;
    }
    if (m->have_threads && (st = coli_options_set(opts, COLI_OPT_THREADS, m->threads)) != COLI_OK) {
        runtime_error(st, "--threads");
        goto fail;
    }
    if (m->have_context && (st = coli_options_set(opts, COLI_OPT_CONTEXT, m->context)) != COLI_OK) {
        runtime_error(st, "--context");
        goto fail;
    }
    if (m->have_q4_group &&
        (st = coli_options_set(opts, COLI_OPT_Q4_GROUP, m->q4_group)) != COLI_OK) {
        runtime_error(st, "--q4-group");
        goto fail;
    }
    if (m->have_cpu && (st = coli_options_set(opts, COLI_OPT_CPU_KERNELS, m->cpu)) != COLI_OK) {
        runtime_error(st, "--cpu");
        goto fail;
    }
    if (m->have_kv_type && (st = coli_options_set(opts, COLI_OPT_KV_TYPE, m->kv_type)) != COLI_OK) {
        runtime_error(st, "--kv-type");
        goto fail;
    }
    if (m->mtp && ((st = coli_options_set(opts, COLI_OPT_MTP, m->mtp)) != COLI_OK ||
                   (st = coli_options_set(opts, COLI_OPT_MTP_GUARD, m->mtp_guard)) != COLI_OK)) {
        runtime_error(st, "--mtp");
        goto fail;
    }
    if (gpu_args_apply(&m->gpu, opts) != 0)
        goto fail;
    if (store_args_apply(&m->store, opts) != 0)
        goto fail;
    st = coli_options_set_log(opts, log_to_stderr, &m->verbose,
                              m->verbose ? COLI_LOG_DEBUG : COLI_LOG_WARN);
    if (st != COLI_OK) {
        runtime_error(st, "cannot set the log callback");
        goto fail;
    }
    *out = opts;
    return 0;
fail:
    coli_options_free(opts);
    return 1;
}

/* Opens m->dir. On failure prints the message and returns 1. */
static int open_model(model_args *m, coli_model **out)
{
    coli_options *opts = NULL;
    coli_model *model = NULL;
    coli_status st;
    int rc = 1;

    *out = NULL;
    if (m->dir == NULL)
        return runtime_error(COLI_ENOENT, "no demo model in " COLI_PKGDATADIR
                                          "/demo (not installed?): give --model DIR or set "
                                          "COLI_DEMO_MODEL");
    if (make_options(m, &opts) != 0)
        return 1;
    st = coli_model_open(m->dir, opts, &model);
    if (st != COLI_OK) {
        const char *msg = model ? coli_model_errmsg(model) : "";
        if (store_explain_open_failure(&m->store, st, msg)) {
            /* said in the tool's options and units */
        } else if (msg == NULL || msg[0] == '\0') {
            fprintf(stderr, "coli: %s: %s\n", coli_strerror(st), m->dir);
        } else if (strstr(msg, m->dir) == NULL) {
            fprintf(stderr, "coli: %s: %s: ", coli_strerror(st), m->dir);
            print_translated(stderr, msg);
            fputc('\n', stderr);
        } else {
            runtime_error(st, msg);
        }
        explain_model_path(cli_prog, m->dir);
        coli_model_free(model);
        model = NULL;
        goto done;
    }
    gpu_warn_unused(&m->gpu, model);
    *out = model;
    rc = 0;
done:
    coli_options_free(opts);
    return rc;
}

static int get_info(coli_model *model, coli_model_info *info)
{
    coli_status st;

    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    st = coli_model_get_info(model, info);
    if (st != COLI_OK)
        return runtime_error(st, coli_model_errmsg(model));
    return 0;
}

/* Tokenizes text, growing the buffer as coli_tokenize asks. */
static int tokenize_text(coli_model *model, const char *text, size_t len, int add_special,
                         int32_t **ids_out, size_t *n_out)
{
    size_t cap = len + 8, need = 0;
    int32_t *ids = xrealloc(NULL, cap * sizeof *ids);
    coli_status st;

    for (;;) {
        st = coli_tokenize(model, text, len, add_special, ids, cap, &need);
        if (st != COLI_ENOSPC || need <= cap)
            break;
        cap = need;
        ids = xrealloc(ids, cap * sizeof *ids);
    }
    if (st != COLI_OK) {
        free(ids);
        return runtime_error(st, coli_model_errmsg(model));
    }
    *ids_out = ids;
    *n_out = need;
    return 0;
}

/* Detokenizes ids into a NUL-terminated string, growing the buffer as asked. */
static int detokenize_ids(coli_model *model, const int32_t *ids, size_t n, int skip_special,
                          char **text_out, size_t *len_out)
{
    size_t cap = 256, need = 0;
    char *buf = xrealloc(NULL, cap);
    coli_status st;

    for (;;) {
        st = coli_detokenize(model, ids, n, skip_special, buf, cap, &need);
        if (st == COLI_OK && need < cap)
            break;
        if (st != COLI_OK && st != COLI_ENOSPC)
            break;
        /* ENOSPC, or exactly full with no room for the NUL: grow. */
        if (need + 1 <= cap) {
            st = COLI_ENOSPC; /* the library said too small without a size */
            break;
        }
        cap = need + 1;
        buf = xrealloc(buf, cap);
    }
    if (st != COLI_OK) {
        free(buf);
        return runtime_error(st, coli_model_errmsg(model));
    }
    buf[need] = '\0';
    *text_out = buf;
    *len_out = need;
    return 0;
}

/* ---- help texts shared by the commands ------------------------------------ */

#define H_MODEL {O_MODEL, "Hugging Face model directory (default: the demo\nmodel)"}
#define H_WEIGHTS                                                                     \
    {O_WEIGHTS, "weights in memory: auto, f32, bf16, q8, q4 or q2\n(default auto: as " \
                "the checkpoint stores them)"}
#define H_Q4_GROUP {O_Q4_GROUP, "group size of q4 weights: 32, 64 or 128 (default 32)"}
#define H_THREADS                                                                  \
    {O_THREADS, "worker threads; 0 = all online cores (default 0);\nmore than the " \
                "online cores is allowed, with a warning"}
#define H_CONTEXT \
    {O_CONTEXT, "KV cache positions; 0 = the model's maximum, at\nmost 4096 (default 0)"}
#define H_VERBOSE {O_VERBOSE, "print the library's log messages on standard error"}
#define H_CPU                                                                         \
    {O_CPU, "CPU kernel set: scalar, avx2, avx512 or amx\n(default: COLI_CPU, else the best this " \
            "CPU\nhas); every set gives the same logits"}
#define H_MTP                                                                               \
    {O_MTP, "multi-token prediction: the model's MTP layer\ndrafts tokens, one pass of the model " \
            "verifies\nthem; the output does not change (GLM-4.5)"},                         \
    {O_MTP_TOKENS, "drafts per step with --mtp, 1-8 (default 1)"},                            \
    {O_NO_MTP_GUARD, "draft at every step, even where the measured cost\nsays drafting is " \
                     "slower (default: it turns\nitself off then)"}
#define H_KV_TYPE                                                                          \
    {O_KV_TYPE, "KV cache type: f32 or bf16 (default: COLI_KV_TYPE,\nelse f32); bf16 halves " \
                "the cache and rounds each\nkey and value to bf16"}
/* The GPU expert tier (gpu_report.c); unset, the environment decides. */
#define H_GPU                                                                             \
    {O_GPU, "run on the GPU: the layers, and the routed experts\nthat fit (default: on when " \
            "COLI_CUDA=1)"},                                                             \
    {O_NO_GPU, "run every expert on the CPU, whatever COLI_CUDA\nsays"},                   \
    {O_GPU_DEVICES, "GPU devices to use, e.g. 0,1 (default: COLI_GPUS\nor COLI_GPU, else " \
                    "every visible device); implies\n--gpu"},                             \
    {O_GPU_EXPERT_GB, "GiB of each device for experts, may be fractional\n(default: "      \
                      "CUDA_EXPERT_GB, else the free memory less\na reserve); implies --gpu"}, \
    {O_RELEASE_HOST, "free the host copy of each expert once it is on a\nGPU (default: "   \
                     "CUDA_RELEASE_HOST=1 turns it on)"},                                   \
    {O_GPU_EXPERTS_ONLY, "keep only experts on the GPU; the CPU runs the\nlayers (default: "  \
                         "the layers run on the first\ndevice when their weights fit); "     \
                         "implies --gpu"}
/* The expert store of converted models (store_report.c). */
#define H_STORE_BUT_IO                                                                     \
    {O_RAM_GB, "GiB of RAM for the weights of a converted model,\nmay be fractional; "      \
               "experts that do not fit are\nread from disk when routed to (default 0: no\n" \
               "limit, model.coli is mapped)"},                                             \
    {O_EXPERT_SLOTS, "experts a converted model holds in RAM (default 0:\nas many as "      \
                     "--ram-gb leaves room for)"},                                          \
    {O_NO_PREFETCH, "read experts from disk only when routed to, not\none layer ahead"},    \
    {O_NO_HOTSET, "do not read or update model.coli.hot, the routing\ncounts that pick "    \
                  "the experts pinned in RAM"}
#define H_STORE \
    H_STORE_BUT_IO, {O_IO_THREADS, "threads reading experts from disk, 1-64 (default 4)"}
#define H_END {O_COUNT, NULL}

/* ---- coli generate -------------------------------------------------------- */

static const char generate_synopsis[] =
    "Usage: coli generate [--model DIR] --prompt TEXT [OPTION]...\n"
    "  or:  coli generate [--model DIR] --prompt-file FILE [OPTION]...\n"
    "  or:  coli generate [--model DIR] --prompt-ids ID,ID,... [OPTION]...\n"
    "Generate text from a prompt. The text is streamed to standard output as it\n"
    "is produced; speeds are reported on standard error.\n";

static const opthelp generate_options[] = {
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

static const char generate_epilogue[] =
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

/* Why the context is full, and what makes room: -c up to the model's
 * maximum, or a shorter prompt past it. The numbers are the context's and
 * the model's own. */
static void explain_context(const coli_context *ctx, const coli_model_info *info, size_t n_prompt)
{
    size_t cap = coli_context_capacity(ctx);

    if (n_prompt > (size_t)info->max_positions)
        fprintf(stderr, "%s: the prompt has %zu tokens, more than the model's %d positions: shorten it\n",
                cli_prog, n_prompt, info->max_positions);
    else
        fprintf(stderr, "%s: the prompt has %zu tokens, more than the context's %zu positions: -c %zu or "
                        "more makes room for it (up to the model's %d)\n",
                cli_prog, n_prompt, cap, n_prompt, info->max_positions);
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

/* Exactly one non-empty prompt: --prompt, --prompt-file or --prompt-ids. */
static int check_prompt_args(const args *a)
{
    static const int ids[] = {O_PROMPT, O_PROMPT_FILE, O_PROMPT_IDS};
    const char *first = NULL;
    size_t i;

    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (a->value[ids[i]] == NULL)
            continue;
        if (first != NULL)
            return usage_error("%s and %s cannot be used together", first, cli_opts[ids[i]].name);
        first = cli_opts[ids[i]].name;
    }
    if (first == NULL)
        return usage_error("a prompt is needed: --prompt TEXT, --prompt-file FILE or "
                           "--prompt-ids LIST");
    if (a->value[O_PROMPT] != NULL && a->value[O_PROMPT][0] == '\0')
        return usage_error("the prompt is empty: --prompt needs a text");
    if (a->value[O_PROMPT_FILE] != NULL && a->value[O_PROMPT_FILE][0] == '\0')
        return usage_error("--prompt-file needs a file name ('-' for standard input)");
    return 0;
}

/* The limit of --prompt-file: far beyond any context, small enough to read. */
#define PROMPT_FILE_MAX ((size_t)64 << 20)

/*
 * Reads the prompt file whole ("-": standard input), as it is: no newline is
 * stripped, as llama.cpp keeps its prompt files. The text is NUL-terminated
 * for convenience; *len excludes the NUL. Returns 0, 1 after an error
 * naming the file, or EXIT_USAGE when it is empty.
 */
static int read_prompt_file(const char *path, char **text_out, size_t *len_out)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 1;

    *text_out = NULL;
    *len_out = 0;
    if (f == NULL) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, path, strerror(errno));
        return 1;
    }
    for (;;) {
        size_t n;

        if (len == cap) {
            if (cap > PROMPT_FILE_MAX) {
                fprintf(stderr, "%s: %s: larger than the %zu MiB that --prompt-file reads\n",
                        cli_prog, name, PROMPT_FILE_MAX >> 20);
                goto done;
            }
            /* One byte past the limit tells a file over it apart. */
            cap = cap ? 2 * cap : 4096;
            if (cap > PROMPT_FILE_MAX + 1)
                cap = PROMPT_FILE_MAX + 1;
            buf = xrealloc(buf, cap + 1);
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, name, strerror(errno));
        goto done;
    }
    if (len == 0) {
        rc = usage_error("the prompt is empty: %s has no bytes", name);
        goto done;
    }
    buf[len] = '\0';
    *text_out = buf;
    *len_out = len;
    buf = NULL;
    rc = 0;
done:
    if (!is_stdin)
        fclose(f);
    free(buf);
    return rc;
}

/* The prompt as ids (--prompt-ids: *ids) or as text (--prompt, or
 * --prompt-file: *file_text holds the file's copy, for the caller to
 * free); check_prompt_args has made sure at most one is given. */
static int prompt_args(const args *a, int32_t **ids, size_t *n_ids, const char **text, size_t *text_len,
                       char **file_text)
{
    int rc;

    if (a->value[O_PROMPT_IDS] != NULL)
        return parse_ids("--prompt-ids", a->value[O_PROMPT_IDS], 0, ids, n_ids);
    if (a->value[O_PROMPT] != NULL) {
        *text = a->value[O_PROMPT];
        *text_len = strlen(*text);
    } else if (a->value[O_PROMPT_FILE] != NULL) {
        if ((rc = read_prompt_file(a->value[O_PROMPT_FILE], file_text, text_len)) != 0)
            return rc;
        *text = *file_text;
    }
    return 0;
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

static int cmd_generate(const args *a)
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
        if (tokenize_text(model, text, text_len, !a->given[O_NO_SPECIAL], &prompt, &n_prompt) != 0)
            goto done;
        if (n_prompt == 0) {
            runtime_error(COLI_EINVAL, "the prompt is empty after tokenization");
            goto done;
        }
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

/* ---- coli logits ---------------------------------------------------------- */

static const char logits_synopsis[] =
    "Usage: coli logits [--model DIR] --prompt TEXT [OPTION]...\n"
    "  or:  coli logits [--model DIR] --prompt-file FILE [OPTION]...\n"
    "  or:  coli logits [--model DIR] --prompt-ids ID,ID,... [OPTION]...\n"
    "Run the model on the prompt and print the next-token logits of its last\n"
    "position, for the whole vocabulary.\n";

static const opthelp logits_options[] = {
    H_MODEL,
    {O_PROMPT, "prompt text, tokenized with the model's tokenizer"},
    {O_PROMPT_FILE, "read the prompt text from FILE ('-': standard\ninput), byte for byte, "
                    "at most 64 MiB"},
    {O_PROMPT_IDS, "prompt as token ids apart by commas or spaces\n(as coli tokenize prints them)"},
    {O_NO_SPECIAL, "do not add the tokenizer's special tokens to the\nprompt text"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CONTEXT,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "json ({\"logits\":[...]}) or text (one per line)\n(default json)"},
    H_VERBOSE,
    H_END,
};

static int cmd_logits(const args *a)
{
    model_args m;
    coli_model_info info;
    coli_model *model = NULL;
    coli_context *ctx = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0, text_len = 0;
    const char *text = NULL; /* the prompt text, if not ids */
    char *file_text = NULL;
    const float *logits;
    int json, rc, i;
    coli_status st;

    if ((rc = parse_format(a, 1, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if ((rc = check_prompt_args(a)) != 0)
        return rc;
    if ((rc = prompt_args(a, &prompt, &n_prompt, &text, &text_len, &file_text)) != 0)
        return rc;

    rc = 1;
    if (open_model(&m, &model) != 0 || get_info(model, &info) != 0)
        goto done;
    if (text != NULL) {
        if (tokenize_text(model, text, text_len, !a->given[O_NO_SPECIAL], &prompt, &n_prompt) != 0)
            goto done;
        if (n_prompt == 0) {
            runtime_error(COLI_EINVAL, "the prompt is empty after tokenization");
            goto done;
        }
    }
    st = coli_context_create(model, NULL, &ctx);
    if (st != COLI_OK) {
        runtime_error(st, ctx ? coli_context_errmsg(ctx) : coli_model_errmsg(model));
        goto done;
    }
    st = coli_eval(ctx, prompt, n_prompt);
    if (st != COLI_OK) {
        runtime_error(st, coli_context_errmsg(ctx));
        if (st == COLI_ENOSPC)
            explain_context(ctx, &info, n_prompt);
        goto done;
    }
    logits = coli_context_logits(ctx);
    if (logits == NULL) {
        runtime_error(COLI_ESTATE, "no logits after evaluation");
        goto done;
    }
    if (json) {
        fputs("{\"logits\":[", stdout);
        for (i = 0; i < info.vocab_size; i++) {
            if (i)
                fputc(',', stdout);
            json_real(stdout, logits[i], "%.9g");
        }
        fputs("]}\n", stdout);
    } else {
        for (i = 0; i < info.vocab_size; i++)
            printf("%.9g\n", logits[i]);
    }
    rc = 0;
done:
    coli_context_free(ctx);
    coli_model_free(model);
    free(prompt);
    free(file_text);
    return rc;
}

/* ---- coli tokenize -------------------------------------------------------- */

static const char tokenize_synopsis[] =
    "Usage: coli tokenize [--model DIR] --text STR [OPTION]...\n"
    "Print the token ids of a text.\n";

static const opthelp tokenize_options[] = {
    H_MODEL,
    {O_TEXT, "the UTF-8 text to encode"},
    {O_NO_SPECIAL, "do not add the tokenizer's special tokens"},
    {O_FORMAT, "text (ids separated by spaces) or json\n({\"ids\":[...]}) (default text)"},
    H_VERBOSE,
    H_END,
};

static int cmd_tokenize(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0, i;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_TEXT] == NULL)
        return usage_error("--text is required");
    m.gpu.gpu = 0; /* only the tokenizer is used: no weights to place */

    rc = 1;
    if (open_model(&m, &model) != 0)
        goto done;
    if (tokenize_text(model, a->value[O_TEXT], strlen(a->value[O_TEXT]), !a->given[O_NO_SPECIAL],
                      &ids, &n) != 0)
        goto done;
    if (json) {
        fputs("{\"ids\":", stdout);
        json_ids(stdout, ids, n);
        fputs("}\n", stdout);
    } else {
        for (i = 0; i < n; i++)
            printf("%s%" PRId32, i ? " " : "", ids[i]);
        putchar('\n');
    }
    rc = 0;
done:
    coli_model_free(model);
    free(ids);
    return rc;
}

/* ---- coli detokenize ------------------------------------------------------ */

static const char detokenize_synopsis[] =
    "Usage: coli detokenize [--model DIR] --ids ID,ID,... [OPTION]...\n"
    "Print the text of a list of token ids.\n";

static const opthelp detokenize_options[] = {
    H_MODEL,
    {O_IDS, "token ids apart by commas or spaces"},
    {O_SKIP_SPECIAL, "leave special tokens out of the text"},
    {O_FORMAT, "text or json ({\"text\":\"...\"}) (default text)"},
    H_VERBOSE,
    H_END,
};

static int cmd_detokenize(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *text = NULL;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_IDS] == NULL)
        return usage_error("--ids is required");
    if ((rc = parse_ids("--ids", a->value[O_IDS], 1, &ids, &n)) != 0)
        return rc;
    m.gpu.gpu = 0; /* only the tokenizer is used: no weights to place */

    rc = 1;
    if (open_model(&m, &model) != 0)
        goto done;
    if (detokenize_ids(model, ids, n, a->given[O_SKIP_SPECIAL], &text, &len) != 0)
        goto done;
    if (json) {
        fputs("{\"text\":", stdout);
        json_string(stdout, text, len);
        fputs("}\n", stdout);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
    }
    rc = 0;
done:
    coli_model_free(model);
    free(ids);
    free(text);
    return rc;
}

/* ---- coli info ------------------------------------------------------------ */

static const char info_synopsis[] =
    "Usage: coli info [--model DIR] [OPTION]...\n"
    "Load a model and describe it: architecture, sizes, parameters, weights.\n";

static const opthelp info_options[] = {
    H_MODEL,
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json (default text)"},
    H_VERBOSE,
    H_END,
};

static const char *weights_label(const coli_model_info *info)
{
    return info->weights_name != NULL ? info->weights_name : coli_weight_format_name(info->weights);
}

/* Bytes per weight format: what --weights would hold, and read per token. */
static void print_format_bytes(const coli_model *model)
{
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++) {
        uint64_t t = 0, act = 0;
        if (coli_model_weight_bytes(model, (coli_weight_format)f, &t, &act) != COLI_OK)
            continue;
        const char *name = f == COLI_WEIGHTS_AUTO ? "as stored" : coli_weight_format_name((coli_weight_format)f);
        printf("  %-10s        %" PRIu64 " bytes (%.1f MiB), %" PRIu64 " bytes read per token\n", name, t,
               (double)t / (1024.0 * 1024.0), act);
    }
}

static void json_format_bytes(const coli_model *model)
{
    printf(",\"bytes_per_format\":{");
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++) {
        uint64_t t = 0, act = 0;
        coli_model_weight_bytes(model, (coli_weight_format)f, &t, &act);
        const char *name = f == COLI_WEIGHTS_AUTO ? "stored" : coli_weight_format_name((coli_weight_format)f);
        printf("%s\"%s\":{\"total\":%" PRIu64 ",\"active\":%" PRIu64 "}", f ? "," : "", name, t, act);
    }
    printf("}");
}

/* Size of dir/name, 0 if it cannot be read. */
static uint64_t file_bytes(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path || stat(path, &sb) != 0)
        return 0;
    return (uint64_t)sb.st_size;
}

static int cmd_info(const args *a)
{
    model_args m;
    coli_model_info info;
    coli_store_stats store;
    coli_model *model = NULL;
    const char *arch;
    uint64_t container_bytes = 0;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;

    rc = 1;
    if (open_model(&m, &model) != 0 || get_info(model, &info) != 0 ||
        store_report_read(model, &store) != 0)
        goto done;
    arch = info.architecture ? info.architecture : "";
    if (store.mode != COLI_STORE_RESIDENT) /* a converted model: the file's own size */
        container_bytes = file_bytes(m.dir, "model.coli");
    if (json) {
        printf("{\"model\":");
        json_string(stdout, m.dir, strlen(m.dir));
        printf(",\"architecture\":");
        json_string(stdout, arch, strlen(arch));
        printf(",\"n_layers\":%d,\"n_moe_layers\":%d,\"hidden_size\":%d,\"n_heads\":%d,"
               "\"n_kv_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,\"n_experts\":%d,"
               "\"n_experts_active\":%d,\"moe_intermediate_size\":%d,\"router\":\"%s\",\"n_expert_groups\":%d,"
               "\"n_expert_groups_active\":%d,\"routed_scaling\":%.9g,\"shared_intermediate_size\":%d,"
               "\"intermediate_size\":%d,\"rotary_dim\":%d,\"qkv_bias\":%s,\"n_mtp_layers\":%d,\"mtp_loaded\":%s,"
               "\"max_positions\":%d,"
               "\"n_params_total\":%" PRId64 ",\"n_params_active\":%" PRId64
               ",\"weight_bytes\":%" PRIu64 ",\"weights\":",
               info.n_layers, info.n_moe_layers, info.hidden_size, info.n_heads,
               info.n_kv_heads, info.head_dim, info.vocab_size, info.n_experts,
               info.n_experts_active, info.moe_intermediate_size, info.router, info.n_expert_groups,
               info.n_expert_groups_active, (double)info.routed_scaling, info.shared_intermediate_size,
               info.intermediate_size, info.rotary_dim, info.qkv_bias ? "true" : "false", info.n_mtp_layers,
               info.mtp_loaded ? "true" : "false", info.max_positions,
               info.n_params_total, info.n_params_active, info.weight_bytes);
        json_string(stdout, weights_label(&info), strlen(weights_label(&info)));
        if (info.weights_detail) {
            printf(",\"weights_detail\":");
            json_string(stdout, info.weights_detail, strlen(info.weights_detail));
        }
        json_format_bytes(model);
        if (container_bytes > 0)
            printf(",\"container_bytes\":%" PRIu64, container_bytes);
        printf(",\"context_positions\":%" PRId64 ",\"kv_bytes\":%" PRIu64 ",\"kv_bytes_per_position\":%" PRIu64
               ",\"kv_type\":\"%s\"",
               info.context_positions, info.kv_bytes, info.kv_bytes_per_position, kv_type_name(info.kv_type));
        printf(",\"gpu_devices\":%d,\"gpu_detail\":", info.gpu_devices);
        json_string(stdout, info.gpu_detail ? info.gpu_detail : "off",
                    strlen(info.gpu_detail ? info.gpu_detail : "off"));
        printf(",\"store_detail\":");
        json_string(stdout, info.store_detail ? info.store_detail : "resident",
                    strlen(info.store_detail ? info.store_detail : "resident"));
        store_report_json(stdout, &store);
        printf(",\"cpu_kernels\":");
        json_string(stdout, info.cpu_kernels ? info.cpu_kernels : "unknown",
                    strlen(info.cpu_kernels ? info.cpu_kernels : "unknown"));
        printf(",\"bos_id\":%" PRId32 ",\"eos_id\":%" PRId32 "}\n", info.bos_id, info.eos_id);
    } else {
        printf("model:              %s\n", m.dir);
        printf("architecture:       %s\n", arch);
        printf("layers:             %d (%d MoE)\n", info.n_layers, info.n_moe_layers);
        printf("hidden size:        %d\n", info.hidden_size);
        printf("attention heads:    %d (%d KV heads, head dim %d)\n", info.n_heads,
               info.n_kv_heads, info.head_dim);
        printf("vocabulary:         %d\n", info.vocab_size);
        printf("experts:            %d per MoE layer, %d active per token\n", info.n_experts,
               info.n_experts_active);
        printf("moe intermediate:   %d\n", info.moe_intermediate_size);
        printf("router:             %s", info.router);
        if (info.n_expert_groups > 1)
            printf(", best %d of %d expert groups", info.n_expert_groups_active, info.n_expert_groups);
        if (info.routed_scaling != 1.0f)
            printf(", weights scaled by %g", (double)info.routed_scaling);
        printf("\n");
        if (info.shared_intermediate_size > 0)
            printf("shared experts:     intermediate %d, in every MoE layer\n", info.shared_intermediate_size);
        if (info.intermediate_size > 0)
            printf("dense layers:       %d, intermediate %d\n", info.n_layers - info.n_moe_layers,
                   info.intermediate_size);
        printf("rotary dimensions:  %d of %d%s\n", info.rotary_dim, info.head_dim,
               info.qkv_bias ? "; q/k/v biases" : "");
        if (info.n_mtp_layers > 0)
            printf("MTP layers:         %d stored, %s\n", info.n_mtp_layers,
                   info.mtp_loaded ? "the first loaded (--mtp)" : "not loaded (--mtp drafts with the first)");
        printf("max positions:      %d\n", info.max_positions);
        printf("parameters:         %" PRId64 " total, %" PRId64 " active per token\n",
               info.n_params_total, info.n_params_active);
        printf("weights:            %s, %" PRIu64 " bytes (%.1f MiB)\n", weights_label(&info),
               info.weight_bytes, (double)info.weight_bytes / (1024.0 * 1024.0));
        if (info.weights_detail)
            printf("  by matrix:        %s\n", info.weights_detail);
        print_format_bytes(model);
        if (container_bytes > 0)
            printf("model.coli:         %" PRIu64 " bytes (%.1f MiB) on disk\n", container_bytes,
                   (double)container_bytes / (1024.0 * 1024.0));
        printf("kv cache:           %" PRIu64 " bytes (%.1f MiB) for %" PRId64 " positions, %" PRIu64
               " bytes per position in %s\n",
               info.kv_bytes, (double)info.kv_bytes / (1024.0 * 1024.0), info.context_positions,
               info.kv_bytes_per_position, kv_type_name(info.kv_type));
        printf("gpu:                %s\n", info.gpu_detail ? info.gpu_detail : "off");
        printf("store:              %s\n", info.store_detail ? info.store_detail : "resident");
        printf("cpu kernels:        %s\n", info.cpu_kernels ? info.cpu_kernels : "unknown");
        printf("cpu kernel sets:   ");
        static const char *const sets[] = {"scalar", "avx2", "avx512", "amx"};
        for (int i = 0; i < 4; i++)
            if (coli_cpu_kernels_usable(i + 1))
                printf("%s %s", i ? "," : "", sets[i]);
        printf(" (--cpu; this CPU and build)\n");
        if (info.bos_id >= 0)
            printf("bos id:             %" PRId32 "\n", info.bos_id);
        else
            printf("bos id:             none\n");
        if (info.eos_id >= 0)
            printf("eos id:             %" PRId32 "\n", info.eos_id);
        else
            printf("eos id:             none\n");
    }
    rc = 0;
done:
    coli_model_free(model);
    return rc;
}

/* ---- coli bench ----------------------------------------------------------- */

static const char bench_synopsis[] =
    "Usage: coli bench [--model DIR] [OPTION]...\n"
    "Measure prefill and decode speed, in the manner of llama-bench: each\n"
    "repetition evaluates a prompt of random token ids in one batch (ppN), then\n"
    "decodes tokens one at a time, greedily, from an empty cache (tgN), or from\n"
    "a cache already holding --depth positions (ppN @ dD, tgN @ dD). Reports\n"
    "the mean and standard deviation of tokens per second over the repetitions,\n"
    "after one warm-up.\n"
    "Decode speed is set against memory bandwidth: the weight bytes read per\n"
    "token (as the library counts them, else estimated from the parameters read\n"
    "per token), and the read bandwidth of a probe run first in this process.\n";

static const opthelp bench_options[] = {
    H_MODEL,
    H_WEIGHTS,
    H_Q4_GROUP,
    {O_THREADS, "worker threads, also used by the probe; 0 = all\nonline cores (default 0)"},
    H_CPU,
    H_KV_TYPE,
    H_MTP,
    H_GPU,
    H_STORE_BUT_IO,
    {O_IO_THREADS, "threads reading experts from disk, also the\nreaders of --disk-probe, 1-64 "
                   "(default 4)"},
    {O_PROMPT_TOKENS, "tokens of the prefill test; 0 = skip it\n(default 512, see below)"},
    {O_GEN_TOKENS, "tokens of the decode test; 0 = skip it\n(default 128, see below)"},
    {O_DEPTH, "positions in the KV cache before each test, as\nllama-bench -d: a prompt of N random ids is\n"
              "evaluated once, untimed, and every test starts\nthere (default 0)"},
    {O_STREAMS, "sequences the decode test runs together, 1-64:\neach step evaluates one token of each in one\npass "
                "(coli_eval_batch); the decode figure\nis their total (default 1)"},
    {O_REPETITIONS, "timed repetitions, at least 1 (default 5)"},
    {O_SEED, "seed of the prompt's random token ids (default 1)"},
    {O_PROBE_MIB, "size of the bandwidth probe's array in MiB\n(default: 4 times the last-level caches, "
                  "within\n64 and 1024)"},
    {O_NO_PROBE, "do not measure the memory bandwidth"},
    {O_DISK_PROBE, "measure the random-read bandwidth of the disk\nholding a converted model, in "
                   "reads of one expert\nrecord"},
    {O_RANDOM_DECODE, "decode random token ids instead of the greedy\ncontinuation (a random model's "
                      "greedy tokens\nrepeat, and so does its routing)"},
    {O_FORMAT, "text (a table) or json (one object) (default text)"},
    H_VERBOSE,
    H_END,
};

/* The help takes the probe's read limit from its constant. */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char bench_epilogue[] =
    "The defaults pp512 and tg128 are halved, those not given on the command line,\n"
    "until the depth, the prompt and the generated tokens fit the model's maximum\n"
    "positions (max_position_embeddings); the report names the sizes used. Sizes\n"
    "asked for explicitly are kept; together beyond it, they are refused.\n"
    "For a converted model the report has the expert store's figures over the\n"
    "timed repetitions, and the disk bytes it read per second of decode, set\n"
    "against the random-read bandwidth of the disk when --disk-probe measures\n"
    "it (at most " STR(DISK_PROBE_READS) " reads or about 2 seconds); and for any model the peak\n"
    "(getrusage) and current (/proc/self/statm) resident set of the process.\n";

/*
 * llama-bench's pp512 and tg128 need 640 positions, more than small models
 * have. The sizes not given on the command line are halved together (so
 * that they stay llama-bench's usual sizes) until the test fits max
 * positions; sizes given explicitly are the user's call, and when they alone
 * exceed the model nothing is shrunk (the library warns). Returns 1 if a
 * size was shrunk.
 */
static int fit_defaults(int64_t *pp, int pp_given, int64_t *tg, int tg_given, int64_t depth, int64_t max)
{
    int64_t fixed = (pp_given ? *pp : 0) + (tg_given ? *tg : 0) + depth;
    int shrunk = 0;

    if (max <= 0 || fixed >= max)
        return 0;
    while (*pp + *tg + depth > max) {
        int moved = 0;

        if (!pp_given && *pp > 1) {
            *pp /= 2;
            moved = 1;
        }
        if (!tg_given && *tg > 1) {
            *tg /= 2;
            moved = 1;
        }
        if (!moved)
            break;
        shrunk = 1;
    }
    return shrunk;
}

/* --disk-probe: reads of the store's record size from the model's file. */
static int run_disk_probe(const coli_model *model, const model_args *m, disk_probe *disk)
{
    coli_store_stats st;
    char path[4096];
    int n;

    if (store_report_read(model, &st) != 0)
        return 1;
    if (st.mode == COLI_STORE_RESIDENT || st.slot_bytes == 0) {
        fprintf(stderr, "%s: --disk-probe needs a converted model (coli convert); %s holds a "
                        "checkpoint\n",
                cli_prog, m->dir);
        return 1;
    }
    n = snprintf(path, sizeof path, "%s/model.coli", m->dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return runtime_error(COLI_EINVAL, "--model: the directory name is too long");
    return disk_probe_run(path, st.slot_bytes, store_io_threads(&m->store), disk);
}

static int cmd_bench(const args *a)
{
    bench_params p;
    bench_probe probe;
    disk_probe disk;
    model_args m;
    coli_model_info info;
    coli_model *model = NULL;
    coli_options *ctx_opts = NULL;
    int64_t repetitions = 5, probe_mib = 0, llc_bytes = 0;
    int rc;

    memset(&p, 0, sizeof p);
    memset(&probe, 0, sizeof probe);
    memset(&disk, 0, sizeof disk);
    p.disk = &disk;
    p.random_decode = a->given[O_RANDOM_DECODE] > 0;
    p.prompt_tokens = 512;
    p.gen_tokens = 128;
    p.seed = 1;
    if ((rc = parse_format(a, 0, &p.json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    p.mtp = m.mtp;
    if (p.random_decode && p.mtp)
        return usage_error("--random-decode and --mtp cannot be used together (drafts follow the text)");
    if (a->value[O_PROMPT_TOKENS] &&
        (rc = parse_int64("--prompt-tokens", a->value[O_PROMPT_TOKENS], 0, 1 << 20,
                          &p.prompt_tokens)) != 0)
        return rc;
    if (a->value[O_GEN_TOKENS] &&
        (rc = parse_int64("--gen-tokens", a->value[O_GEN_TOKENS], 0, 1 << 20, &p.gen_tokens)) !=
            0)
        return rc;
    if (p.prompt_tokens == 0 && p.gen_tokens == 0)
        return usage_error("--prompt-tokens and --gen-tokens are both 0: nothing to measure");
    if (a->value[O_DEPTH] && (rc = parse_int64("--depth", a->value[O_DEPTH], 0, 1 << 24, &p.depth)) != 0)
        return rc;
    p.streams = 1;
    if (a->value[O_STREAMS] && (rc = parse_int64("--streams", a->value[O_STREAMS], 1, 64, &p.streams)) != 0)
        return rc;
    if (p.streams > 1 && p.mtp)
        return usage_error("--streams and --mtp cannot be used together (a drafting context has passes of its own)");
    if (p.streams > 1 && p.depth > 0)
        return usage_error("--streams and --depth cannot be used together");
    if (a->value[O_REPETITIONS] &&
        (rc = parse_int64("--repetitions", a->value[O_REPETITIONS], 1, 100000, &repetitions)) !=
            0)
        return rc;
    if (a->value[O_SEED] && (rc = parse_uint64("--seed", a->value[O_SEED], &p.seed)) != 0)
        return rc;
    if (a->value[O_PROBE_MIB] &&
        (rc = parse_int64("--probe-mib", a->value[O_PROBE_MIB], 1, INT64_C(1) << 24,
                          &probe_mib)) != 0)
        return rc;
    if (a->given[O_NO_PROBE] && a->value[O_PROBE_MIB] != NULL)
        return usage_error("--probe-mib and --no-probe cannot be used together");
    p.repetitions = repetitions;
    p.model_dir = m.dir;
    p.weights = m.have_weights ? (coli_weight_format)m.weights : COLI_WEIGHTS_AUTO;
    if (p.weights == COLI_WEIGHTS_Q4)
        p.q4_group = m.have_q4_group ? (int)m.q4_group : 32;
    p.threads = m.have_threads && m.threads > 0 ? (int)m.threads : bench_online_cores();

    /* The probe runs first, so that its array and the model are not in
     * memory together. The test sizes, which depend on the model, do not
     * matter to the model's loading: its one context is made afterwards,
     * with a capacity of exactly the sizes chosen, so one open suffices. */
    if (a->value[O_PROBE_MIB] == NULL && !a->given[O_NO_PROBE])
        probe_mib = bench_probe_default_mib(llc_bytes = bench_llc_bytes());
    if (!a->given[O_NO_PROBE] && bench_probe_bandwidth(p.threads, probe_mib, &probe) != 0)
        return 1;
    probe.llc_bytes = a->given[O_NO_PROBE] ? 0 : llc_bytes ? llc_bytes : bench_llc_bytes();
    /* The expert store of a converted model sets aside the KV cache of the
     * model's context: the test's, at most the sizes asked for, not the
     * model's maximum. */
    if (p.prompt_tokens + p.gen_tokens + p.depth <= (INT64_C(1) << 24)) {
        m.have_context = 1;
        m.context = p.prompt_tokens + p.gen_tokens + p.depth;
    }
    if (open_model(&m, &model) != 0)
        return 1;
    rc = 1; /* until bench_run says otherwise */
    if (get_info(model, &info) != 0)
        goto done;
    if (a->given[O_DISK_PROBE] && run_disk_probe(model, &m, &disk) != 0)
        goto done;
    p.max_positions = info.max_positions;
    p.sizes_fitted = fit_defaults(&p.prompt_tokens, a->value[O_PROMPT_TOKENS] != NULL,
                                  &p.gen_tokens, a->value[O_GEN_TOKENS] != NULL, p.depth,
                                  info.max_positions);
    m.have_context = 1;
    m.context = p.prompt_tokens + p.gen_tokens + p.depth;
    p.kv_type = kv_type_name(info.kv_type);
    if (make_options(&m, &ctx_opts) != 0)
        goto done;
    p.ctx_opts = ctx_opts;
    rc = bench_run(model, &p, &probe);
done:
    coli_options_free(ctx_opts);
    coli_model_free(model);
    return rc;
}

/* ---- coli compare --------------------------------------------------------- */

static const char compare_synopsis[] =
    "Usage: coli compare [--model DIR] --weights FMT [OPTION]...\n"
    "Measure how far the model in one weight format strays from the same model\n"
    "in another: top-1 agreement and KL divergence of the next-token\n"
    "distribution at every prompt position, and the length of the common prefix\n"
    "of the two greedy continuations. The GPU options apply to the model under\n"
    "test; the reference runs every expert on the CPU.\n";

static const opthelp compare_options[] = {
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

static int cmd_compare(const args *a)
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

static const char perplexity_synopsis[] =
    "Usage: coli perplexity [--model DIR] --text-file FILE [OPTION]...\n"
    "Measure the perplexity of the model on a text, as llama-perplexity does:\n"
    "the text is tokenized and cut into windows of --context tokens, each run\n"
    "from an empty context; the tokens of the second half of each window are\n"
    "scored by their log-probability given all the window's tokens before them,\n"
    "and the perplexity is exp(mean negative log-likelihood). With --against,\n"
    "the model is also loaded in a reference format and compared with it at the\n"
    "same positions: mean and largest KL(reference || tested) and the share of\n"
    "positions where the most likely tokens agree.\n";

static const opthelp perplexity_options[] = {
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

static const char perplexity_epilogue[] =
    "A remainder of the text shorter than a window is left out, as llama-perplexity\n"
    "leaves it. Each window scores the tokens from index N/2 (at least 1) to its\n"
    "end: one token more than llama-perplexity, which starts at N/2+1. The\n"
    "tokens are evaluated one at a time, which is slow on large models.\n";

static int cmd_perplexity(const args *a)
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

/* ---- serve ---------------------------------------------------------------- */

static const char serve_synopsis[] =
    "Usage: coli serve [--model DIR] [--host ADDR] [--port N] [OPTION]...\n"
    "Serve the model over HTTP with OpenAI's API: POST /v1/completions and\n"
    "/v1/chat/completions (whole or streamed as server-sent events), GET\n"
    "/v1/models, /health and /metrics, POST /tokenize, /detokenize and\n"
    "/apply-template.";

static const opthelp serve_options[] = {
    H_MODEL,
    {O_HOST, "address to listen on (default 127.0.0.1)"},
    {O_PORT, "port to listen on; 0 = any free one, printed on\nstandard error (default 8080)"},
    {O_PARALLEL, "slots: requests generated at once, in one batch\n(default 4)"},
    {O_CTX_SIZE, "KV cache positions of each slot (each slot has its\nown cache; default: the model's "
                 "maximum)"},
    {O_QUEUE, "requests that may wait for a slot; more get 503\n(default 16)"},
    {O_API_KEY, "require this key (Authorization: Bearer KEY or\nX-Api-Key: KEY); may be repeated; "
                "/health stays\nopen"},
    {O_API_KEY_FILE, "read the keys from FILE, one a line ('#' starts a\ncomment)"},
    {O_MAX_BODY, "largest request body, in bytes (default 16 MiB)"},
    {O_ALIAS, "the model's id in responses and /v1/models\n(default: the directory's name)"},
    {O_CHAT_TEMPLATE_FILE, "the chat template (Jinja) in place of the model's"},
    {O_WEB_DIR, "the chat page served at / (index.html, chat.js,\nchat.css; default: the installed one)"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json: the log line of each request on\nstandard error (default text)"},
    H_VERBOSE,
    H_END,
};

static const char serve_epilogue[] =
    "Sampling defaults come from the model's generation_config.json (else\n"
    "temperature 0.8, top-k 40, top-p 0.95); request fields override them.\n"
    "Requests are logged on standard error. SIGINT or SIGTERM stops the server.\n";

static int serve_open(void *user, coli_model **out)
{
    return open_model(user, out);
}

static int cmd_serve(const args *a)
{
    model_args m;
    int rc;

    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_CTX_SIZE] != NULL) {
        rc = option_in_bounds("--ctx-size", COLI_OPT_CONTEXT, a->value[O_CTX_SIZE], &m.context);
        if (rc != 0)
            return rc;
        m.have_context = 1;
    }
    if (m.dir == NULL)
        return runtime_error(COLI_ENOENT, "no demo model in " COLI_PKGDATADIR
                                          "/demo (not installed?): give --model DIR or set "
                                          "COLI_DEMO_MODEL");
    return serve_run(a, m.dir, serve_open, &m);
}

/* ---- chat ----------------------------------------------------------------- */

static const char chat_synopsis[] =
    "Usage: coli chat [--model DIR] [--system TEXT] [OPTION]...\n"
    "Talk with the model: each line of standard input is a turn, rendered with\n"
    "the history through the model's chat template (as coli serve does) and\n"
    "answered on standard output. /clear forgets the history; /exit or the end\n"
    "of input ends. Ctrl-C stops a reply; at the prompt it ends.";

static const opthelp chat_options[] = {
    H_MODEL,
    {O_SYSTEM, "the system message that opens the conversation"},
    {O_CHAT_TEMPLATE_FILE, "the chat template (Jinja) in place of the model's"},
    {O_MAX_TOKENS, "at most N tokens a reply (default 1024)"},
    {O_TEMPERATURE, "sampling temperature; 0 = greedy (default: the\nmodel's generation_config.json, else 0.8)"},
    {O_TOP_K, "keep the K most likely tokens; 0 = off (default: the\nmodel's, else 40)"},
    {O_TOP_P, "nucleus sampling mass; 1 = off (default: the\nmodel's, else 0.95)"},
    {O_MIN_P, "drop tokens less likely than P times the most\nlikely one (default: the model's, else 0)"},
    {O_REPEAT_PENALTY, "penalise tokens seen among the last 64 (default:\nthe model's, else 1)"},
    {O_SEED, "random seed (default 0)"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CONTEXT,
    H_CPU,
    H_KV_TYPE,
    H_MTP,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text (each reply as it comes) or json (each reply\nwhole, an object a line) (default text)"},
    H_VERBOSE,
    H_END,
};

static int cmd_chat(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int rc;

    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (open_model(&m, &model) != 0)
        return 1;
    rc = chat_run(a, model, m.dir);
    coli_model_free(model);
    return rc;
}

/* ---- main ----------------------------------------------------------------- */

static const command g_commands[] = {
    {"generate", "generate text from a prompt", generate_synopsis, generate_options,
     generate_epilogue, cmd_generate},
    {"logits", "print the next-token logits of a prompt", logits_synopsis, logits_options, NULL,
     cmd_logits},
    {"tokenize", "print the token ids of a text", tokenize_synopsis, tokenize_options, NULL,
     cmd_tokenize},
    {"detokenize", "print the text of token ids", detokenize_synopsis, detokenize_options, NULL,
     cmd_detokenize},
    {"info", "describe a model", info_synopsis, info_options, NULL, cmd_info},
    {"bench", "measure prefill and decode speed against memory bandwidth", bench_synopsis,
     bench_options, bench_epilogue, cmd_bench},
    {"compare", "compare a weight format with another (top-1, KL)", compare_synopsis,
     compare_options, NULL, cmd_compare},
    {"perplexity", "measure perplexity on a text, and KL against another format", perplexity_synopsis,
     perplexity_options, perplexity_epilogue, cmd_perplexity},
    {"convert", "convert a checkpoint for streaming from disk (model.coli)", convert_synopsis,
     convert_options, convert_epilogue, cmd_convert},
    {"gpu", "list the GPU tier and the devices it sees", gpu_synopsis, gpu_options, gpu_epilogue,
     cmd_gpu},
    {"serve", "serve the model over HTTP with OpenAI's API", serve_synopsis, serve_options, serve_epilogue,
     cmd_serve},
    {"chat", "talk with the model through its chat template", chat_synopsis, chat_options, NULL, cmd_chat},
};

#define N_COMMANDS (sizeof g_commands / sizeof g_commands[0])

static const command *find_command(const char *name)
{
    size_t i;

    for (i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, g_commands[i].name) == 0)
            return &g_commands[i];
    return NULL;
}

/* "unknown command 'genrate'; did you mean 'generate'?" */
static int unknown_command(const char *prog, const char *name)
{
    const char *names[N_COMMANDS + 1];
    const char *pick;
    size_t i;

    for (i = 0; i < N_COMMANDS; i++)
        names[i] = g_commands[i].name;
    names[N_COMMANDS] = "help";
    pick = did_you_mean(name, names, N_COMMANDS + 1);
    if (pick != NULL)
        fprintf(stderr, "%s: unknown command '%s'; did you mean '%s'?\n", prog, name, pick);
    else
        fprintf(stderr, "%s: unknown command '%s'\n", prog, name);
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return EXIT_USAGE;
}

static void main_usage(FILE *f)
{
    size_t i;

    fprintf(f, "Usage: coli COMMAND [OPTION]...\n"
               "  or:  coli help [COMMAND]\n"
               "  or:  coli --help | --version\n"
               "Run Mixture-of-Experts language models from Hugging Face checkpoint\n"
               "directories on the CPU.\n"
               "\n"
               "Commands:\n");
    for (i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", g_commands[i].name, g_commands[i].summary);
    fprintf(f, "\n"
               "  -h, --help     display this help and exit\n"
               "  -V, --version  output version information and exit\n"
               "\n"
               "'coli COMMAND --help' or 'coli help COMMAND' describes the options of a\n"
               "command. Without --model the demo model is used: $COLI_DEMO_MODEL if set,\n"
               "else %s/demo, else the data/demo of the build\n"
               "tree when coli runs uninstalled from there.\n"
               "Exit status: 0 success, 1 failure, 2 usage error.\n",
            COLI_PKGDATADIR);
}

/* As GNU tools print it; the last line says what the library was built with. */
static void print_version(void)
{
    /* "none", or the vendor and targets: "cuda sm_80,sm_90" */
    const char *gpu = coli_gpu_tier();

    printf("coli (libcolibri) %s\n"
           "Copyright (C) 2026 the libcolibri authors.\n"
           "License MIT: <https://opensource.org/licenses/MIT>.\n"
           "This is free software: you are free to change and redistribute it.\n"
           "There is NO WARRANTY, to the extent permitted by law.\n"
           "Features: CPU%s (GPU tier: %s)\n",
           coli_version_string(), coli_has_feature(COLI_FEATURE_THREADS) ? ", threads" : "",
           gpu);
}

/* `coli help [COMMAND]` */
static int cmd_help(int argc, char **argv)
{
    const command *cmd;

    if (argc == 0) {
        main_usage(stdout);
        return 0;
    }
    if (argc > 1)
        return usage_error("unexpected argument '%s'", argv[1]);
    if ((cmd = find_command(argv[0])) == NULL)
        return unknown_command(cli_prog, argv[0]);
    print_help(cmd, stdout);
    return 0;
}

static int run_main(int argc, char **argv)
{
    static char prog[64];
    const command *cmd;
    args a;
    int rc;

    if (argc < 2) {
        main_usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        print_version();
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        main_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0)
        return cmd_help(argc - 2, argv + 2);
    if ((cmd = find_command(argv[1])) == NULL) {
        if (argv[1][0] != '-')
            return unknown_command("coli", argv[1]);
        fprintf(stderr, "coli: unknown option '%s'\n", argv[1]);
        fprintf(stderr, "Try 'coli --help'.\n");
        return EXIT_USAGE;
    }
    snprintf(prog, sizeof prog, "coli %s", cmd->name);
    cli_prog = prog;
    rc = parse_args(cmd, argc - 2, argv + 2, &a);
    if (rc == -1) {
        print_help(cmd, stdout);
        return 0;
    }
    if (rc == -2) {
        print_version();
        return 0;
    }
    if (rc != 0)
        return rc;
    return cmd->run(&a);
}

int main(int argc, char **argv)
{
    return close_stdout(run_main(argc, argv));
}
