/*
 * options.c - the command line of the coli tool (see options.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "options.h"

#include "diag.h"

#include <colibri/colibri.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_prog = "coli";

/* Short names only for the options people type most, as llama.cpp has
 * them; -h and -V are the GNU ones. */
const optdef cli_opts[O_COUNT] = {
    [O_HELP] = {"--help", 'h', NULL, 0},
    [O_VERSION] = {"--version", 'V', NULL, 0},
    [O_MODEL] = {"--model", 'm', "DIR", 0},
    [O_PROMPT] = {"--prompt", 'p', "TEXT", 0},
    [O_PROMPT_IDS] = {"--prompt-ids", 0, "LIST", 0},
    [O_PROMPT_FILE] = {"--prompt-file", 'f', "FILE", 0},
    [O_MAX_TOKENS] = {"--max-tokens", 'n', "N", 0},
    [O_TEMPERATURE] = {"--temperature", 0, "T", 0},
    [O_TOP_K] = {"--top-k", 0, "K", 0},
    [O_TOP_P] = {"--top-p", 0, "P", 0},
    [O_SEED] = {"--seed", 's', "S", 0},
    [O_WEIGHTS] = {"--weights", 0, "FMT", 0},
    [O_THREADS] = {"--threads", 't', "N", 0},
    [O_CONTEXT] = {"--context", 'c', "N", 0},
    [O_NO_SPECIAL] = {"--no-special", 0, NULL, 0},
    [O_SKIP_SPECIAL] = {"--skip-special", 0, NULL, 0},
    [O_FORMAT] = {"--format", 0, "FMT", 0},
    [O_TEXT] = {"--text", 0, "STR", 0},
    [O_IDS] = {"--ids", 0, "LIST", 0},
    [O_VERBOSE] = {"--verbose", 0, NULL, 0},
    [O_Q4_GROUP] = {"--q4-group", 0, "N", 0},
    [O_PROMPT_TOKENS] = {"--prompt-tokens", 0, "N", 0},
    [O_GEN_TOKENS] = {"--gen-tokens", 0, "N", 0},
    [O_REPETITIONS] = {"--repetitions", 0, "N", 0},
    [O_PROBE_MIB] = {"--probe-mib", 0, "N", 0},
    [O_NO_PROBE] = {"--no-probe", 0, NULL, 0},
    [O_AGAINST] = {"--against", 0, "FMT", 0},
    [O_NO_ECHO] = {"--no-echo", 0, NULL, 0},
    [O_IGNORE_EOS] = {"--ignore-eos", 0, NULL, 0},
    [O_STOP] = {"--stop", 0, "STR", 1},
    [O_MIN_P] = {"--min-p", 0, "P", 0},
    [O_REPEAT_PENALTY] = {"--repeat-penalty", 0, "R", 0},
    [O_REPEAT_LAST_N] = {"--repeat-last-n", 0, "N", 0},
    [O_GPU] = {"--gpu", 0, NULL, 0},
    [O_NO_GPU] = {"--no-gpu", 0, NULL, 0},
    [O_GPU_DEVICES] = {"--gpu-devices", 0, "LIST", 0},
    [O_GPU_EXPERT_GB] = {"--gpu-expert-gb", 0, "G", 0},
    [O_RELEASE_HOST] = {"--release-host", 0, NULL, 0},
    [O_GPU_EXPERTS_ONLY] = {"--gpu-experts-only", 0, NULL, 0},
    [O_STATS] = {"--stats", 0, NULL, 0},
    [O_OUT] = {"--out", 0, "DIR", 0},
    [O_FORCE] = {"--force", 0, NULL, 0},
    [O_RAM_GB] = {"--ram-gb", 0, "G", 0},
    [O_EXPERT_SLOTS] = {"--expert-slots", 0, "N", 0},
    [O_NO_PREFETCH] = {"--no-prefetch", 0, NULL, 0},
    [O_IO_THREADS] = {"--io-threads", 0, "N", 0},
    [O_NO_HOTSET] = {"--no-hotset", 0, NULL, 0},
    [O_DISK_PROBE] = {"--disk-probe", 0, NULL, 0},
    [O_RANDOM_DECODE] = {"--random-decode", 0, NULL, 0},
    [O_CPU] = {"--cpu", 0, "SET", 0},
    [O_TEXT_FILE] = {"--text-file", 0, "FILE", 0},
    [O_LOGPROBS] = {"--logprobs", 0, "N", 0},
    [O_KV_TYPE] = {"--kv-type", 0, "TYPE", 0},
    [O_DEPTH] = {"--depth", 0, "N", 0},
    [O_MTP] = {"--mtp", 0, NULL, 0},
    [O_MTP_TOKENS] = {"--mtp-tokens", 0, "K", 0},
    [O_NO_MTP_GUARD] = {"--no-mtp-guard", 0, NULL, 0},
    [O_STREAMS] = {"--streams", 0, "N", 0},
    [O_HOST] = {"--host", 0, "ADDR", 0},
    [O_PORT] = {"--port", 0, "N", 0},
    [O_PARALLEL] = {"--parallel", 0, "N", 0},
    [O_CTX_SIZE] = {"--ctx-size", 0, "N", 0},
    [O_QUEUE] = {"--queue", 0, "N", 0},
    [O_API_KEY] = {"--api-key", 0, "KEY", 1},
    [O_API_KEY_FILE] = {"--api-key-file", 0, "FILE", 0},
    [O_MAX_BODY] = {"--max-body", 0, "BYTES", 0},
    [O_ALIAS] = {"--alias", 0, "NAME", 0},
    [O_CHAT_TEMPLATE_FILE] = {"--chat-template-file", 0, "FILE", 0},
    [O_SYSTEM] = {"--system", 0, "TEXT", 0},
    [O_WEB_DIR] = {"--web-dir", 0, "DIR", 0},
    [O_REQUEST_TIMEOUT] = {"--request-timeout", 0, "S", 0},
    [O_IDLE_TIMEOUT] = {"--idle-timeout", 0, "S", 0},
    [O_MAX_CONNECTIONS] = {"--max-connections", 0, "N", 0},
    [O_MAX_CLIENT_CONNECTIONS] = {"--max-client-connections", 0, "N", 0},
    [O_STOP_TIMEOUT] = {"--stop-timeout", 0, "S", 0},
};

/* Every subcommand takes these two; print_help lists them last. */
static const opthelp g_common[] = {
    {O_HELP, "display this help and exit"},
    {O_VERSION, "output version information and exit"},
    {O_COUNT, NULL},
};

int usage_error(const char *fmt, ...)
{
    va_list ap;
    diag d;
    FILE *f = diag_begin(&d, DIAG_ERROR);

    fprintf(f, "%s: ", cli_prog);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fprintf(f, "\nTry '%s --help'.\n", cli_prog);
    diag_end(&d);
    return EXIT_USAGE;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (q == NULL) {
        fprintf(stderr, "coli: %s\n", coli_strerror(COLI_ENOMEM));
        exit(1);
    }
    return q;
}

static int accepts(const command *cmd, int id)
{
    const opthelp *o;

    if (id == O_HELP || id == O_VERSION)
        return 1;
    for (o = cmd->options; o->id != O_COUNT; o++)
        if (o->id == id)
            return 1;
    return 0;
}

/* ---- llama.cpp's names, near misses -------------------------------------- */

/* A name people bring from llama.cpp: an alias of one of ours (id), or one
 * with no equivalent here (id O_COUNT), with what to do instead. Looked up
 * as a whole word before short options, so that "-cnv" is not "-c nv". */
typedef struct foreign_opt {
    const char *name;
    int id;
    const char *why;
} foreign_opt;

#define WHY_NGL                                                                               \
    "llama.cpp's GPU layers: coli keeps the dense weights on the CPU; --gpu puts the routed " \
    "experts on the GPU (--gpu-expert-gb: how much memory they take)"
#define WHY_CNV                                                                               \
    "llama.cpp's conversation mode: coli has none; coli generate continues one prompt (-p " \
    "TEXT, -f FILE or --prompt-ids) and exits"
#define WHY_FA "llama.cpp's flash attention: coli has no such switch; leave it out"
#define WHY_TO                                                                                    \
    "llama.cpp's read and write timeout: coli serve has --request-timeout (for a request's "   \
    "headers and body) and --idle-timeout (for a connection without one)"

static const foreign_opt g_foreign[] = {
    {"--temp", O_TEMPERATURE, NULL},
    {"--file", O_PROMPT_FILE, NULL},
    {"--ctx-size", O_CONTEXT, NULL},
    {"--n-predict", O_MAX_TOKENS, NULL},
    {"-ngl", O_COUNT, WHY_NGL},
    {"--n-gpu-layers", O_COUNT, WHY_NGL},
    {"--gpu-layers", O_COUNT, WHY_NGL},
    {"-cnv", O_COUNT, WHY_CNV},
    {"--conversation", O_COUNT, WHY_CNV},
    {"-fa", O_COUNT, WHY_FA},
    {"--flash-attn", O_COUNT, WHY_FA},
    {"-to", O_COUNT, WHY_TO},
    {"--timeout", O_COUNT, WHY_TO},
};

#define N_FOREIGN (sizeof g_foreign / sizeof g_foreign[0])

/* The row of g_foreign spelt arg[0..len), or NULL. */
static const foreign_opt *find_foreign(const char *arg, size_t len)
{
    for (size_t i = 0; i < N_FOREIGN; i++)
        if (strlen(g_foreign[i].name) == len && strncmp(g_foreign[i].name, arg, len) == 0)
            return &g_foreign[i];
    return NULL;
}

/* Levenshtein distance, for the suggestions of unknown names. */
static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    size_t row[64], i, j;

    if (nb >= sizeof row / sizeof row[0])
        return (size_t)-1;
    for (j = 0; j <= nb; j++)
        row[j] = j;
    for (i = 1; i <= na; i++) {
        size_t corner = row[0];

        row[0] = i;
        for (j = 1; j <= nb; j++) {
            size_t up = row[j], best = corner + (a[i - 1] != b[j - 1]);

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            corner = up;
            row[j] = best;
        }
    }
    return row[nb];
}

/* A near miss: at most 2 edits, and at most a third of the word. */
static int near_miss(const char *word, size_t len, const char *name, size_t *best)
{
    size_t d = edit_distance(word, len, name, strlen(name));

    if (d > 2 || 3 * d > len || d >= *best)
        return 0;
    *best = d;
    return 1;
}

const char *did_you_mean(const char *word, const char *const *names, size_t n)
{
    const char *pick = NULL;
    size_t best = (size_t)-1;

    for (size_t i = 0; i < n; i++)
        if (near_miss(word, strlen(word), names[i], &best))
            pick = names[i];
    return pick;
}

/* The unknown long option arg[0..len): suggests the nearest that cmd takes
 * (llama.cpp's aliases included), or says that cmd does not take it. */
static int unknown_long(const command *cmd, const char *arg, size_t len)
{
    const char *pick = NULL;
    size_t best = (size_t)-1, skip = 2; /* "--" does not count */
    int k;

    for (k = 0; k < O_COUNT; k++)
        if (strlen(cli_opts[k].name) == len && strncmp(cli_opts[k].name, arg, len) == 0)
            return usage_error("unknown option '%.*s': %s does not take it", (int)len, arg, cli_prog);
    for (k = 0; k < O_COUNT; k++)
        if (accepts(cmd, k) && near_miss(arg + skip, len - skip, cli_opts[k].name + skip, &best))
            pick = cli_opts[k].name;
    for (size_t i = 0; i < N_FOREIGN; i++)
        if (g_foreign[i].id != O_COUNT && accepts(cmd, g_foreign[i].id) && g_foreign[i].name[1] == '-' &&
            near_miss(arg + skip, len - skip, g_foreign[i].name + skip, &best))
            pick = cli_opts[g_foreign[i].id].name;
    if (pick != NULL)
        return usage_error("unknown option '%.*s'; did you mean '%s'?", (int)len, arg, pick);
    return usage_error("unknown option '%.*s'", (int)len, arg);
}

/* Records one occurrence of option id with value v (NULL for a flag). */
static int store(args *a, int id, const char *v)
{
    if (cli_opts[id].repeatable) {
        if (a->given[id] == ARGS_MAX_REPEAT)
            return usage_error("%s is given more than %d times", cli_opts[id].name,
                               ARGS_MAX_REPEAT);
        a->values[id][a->given[id]] = v;
    }
    a->value[id] = v;
    a->given[id]++;
    return 0;
}

/* Finds the option that argv[*i] names, stores it with its value (taken
 * from the same word or the next one) and sets *id. Returns 0 or
 * EXIT_USAGE. A short option is "-x VALUE", "-xVALUE" or a lone flag "-x";
 * a long one "--opt VALUE", "--opt=VALUE" or a lone flag "--opt". */
static int parse_one(const command *cmd, int argc, char **argv, int *i, args *a, int *id)
{
    const char *arg = argv[*i];
    const char *inline_value = NULL; /* the value in the same word */
    char shown[8];                   /* the option as the user spelt it */
    const char *name = shown;
    int k;

    {
        const char *eq = strchr(arg, '=');
        const foreign_opt *f = find_foreign(arg, eq ? (size_t)(eq - arg) : strlen(arg));

        if (f != NULL && f->id == O_COUNT)
            return usage_error("option '%s' is %s", f->name, f->why);
    }
    if (arg[1] != '-') {
        for (k = 0; k < O_COUNT; k++)
            if (cli_opts[k].short_name == arg[1] && accepts(cmd, k))
                break;
        snprintf(shown, sizeof shown, "-%c", arg[1]);
        if (k == O_COUNT)
            return usage_error("unknown option '%s'", shown);
        if (arg[2] != '\0')
            inline_value = arg + 2;
        if (inline_value != NULL && cli_opts[k].value == NULL)
            return usage_error("option '%s' takes no value (in '%s')", shown, arg);
    } else {
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);

        const foreign_opt *f = find_foreign(arg, len);

        for (k = 0; k < O_COUNT; k++)
            if (strlen(cli_opts[k].name) == len && strncmp(cli_opts[k].name, arg, len) == 0 &&
                accepts(cmd, k))
                break;
        if (k == O_COUNT && f != NULL && accepts(cmd, f->id))
            k = f->id; /* llama.cpp's name for it */
        if (k == O_COUNT)
            return unknown_long(cmd, arg, len);
        name = cli_opts[k].name;
        if (eq != NULL)
            inline_value = eq + 1;
        if (inline_value != NULL && cli_opts[k].value == NULL)
            return usage_error("option '%s' takes no value", name);
    }
    *id = k;
    if (cli_opts[k].value == NULL)
        return store(a, k, NULL);
    if (inline_value != NULL)
        return store(a, k, inline_value);
    if (*i + 1 >= argc)
        return usage_error("option '%s' needs a value", name);
    *i += 1;
    return store(a, k, argv[*i]);
}

int parse_args(const command *cmd, int argc, char **argv, args *a)
{
    int i;

    memset(a, 0, sizeof *a);
    for (i = 0; i < argc; i++) {
        const char *arg = argv[i];
        int id = O_COUNT, rc;

        /* No positional arguments: "-", "--" and words are all stray. */
        if (arg[0] != '-' || arg[1] == '\0' || (arg[1] == '-' && arg[2] == '\0'))
            return usage_error("unexpected argument '%s'", arg);
        if ((rc = parse_one(cmd, argc, argv, &i, a, &id)) != 0)
            return rc;
        /* Like getopt: --help and --version act when they are met. */
        if (id == O_HELP)
            return -1;
        if (id == O_VERSION)
            return -2;
    }
    return 0;
}

/* ---- help ------------------------------------------------------------------ */

/* The column where option descriptions start, as in GNU --help. */
#define HELP_COL 26

static void print_option(FILE *f, const opthelp *o)
{
    const optdef *d = &cli_opts[o->id];
    const char *t = o->text;
    int n;

    if (d->short_name)
        n = fprintf(f, "  -%c, %s", d->short_name, d->name);
    else
        n = fprintf(f, "      %s", d->name);
    if (d->value != NULL)
        n += fprintf(f, " %s", d->value);
    if (n + 2 > HELP_COL) { /* too long: the text starts on the next line */
        fputc('\n', f);
        n = 0;
    }
    for (;;) {
        const char *nl = strchr(t, '\n');
        int len = nl ? (int)(nl - t) : (int)strlen(t);

        fprintf(f, "%*s%.*s\n", HELP_COL - n, "", len, t);
        if (nl == NULL)
            break;
        t = nl + 1;
        n = 0;
    }
}

void print_help(const command *cmd, FILE *f)
{
    const opthelp *o;

    fputs(cmd->synopsis, f);
    fputc('\n', f);
    for (o = cmd->options; o->id != O_COUNT; o++)
        print_option(f, o);
    for (o = g_common; o->id != O_COUNT; o++)
        print_option(f, o);
    if (cmd->epilogue != NULL) {
        fputc('\n', f);
        fputs(cmd->epilogue, f);
    }
}

/* ---- values ---------------------------------------------------------------- */

/* A decimal number: [+-]digits[.digits][e[+-]digits] (int_only: the
 * digits alone), as people write it; strtod would also take hex, inf, nan
 * and leading blanks. */
static int is_decimal(const char *s, int int_only)
{
    int digits = 0;

    if (*s == '+' || *s == '-')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (int_only)
        return digits > 0 && *s == '\0';
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (digits == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* A bound as people write it: 1073741824, 0.95 or 0.000001, not 1.07374e+09. */
static const char *plain(char *buf, size_t size, double v)
{
    size_t n;

    snprintf(buf, size, "%.6f", v);
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '0')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '.')
        buf[--n] = '\0';
    return buf;
}

int parse_int64(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    if (!is_decimal(s, 1))
        return usage_error("invalid value '%s' for %s: not a decimal integer", s, opt);
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return usage_error("invalid value '%s' for %s: not a decimal integer", s, opt);
    if (errno == ERANGE || v < min || v > max)
        return usage_error("value '%s' for %s is out of range: give %" PRId64 " to %" PRId64, s,
                           opt, min, max);
    *out = (int64_t)v;
    return 0;
}

int parse_uint64(const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;

    errno = 0;
    if (s[0] < '0' || s[0] > '9' || !is_decimal(s, 1))
        return usage_error("invalid value '%s' for %s: not a non-negative decimal integer", s, opt);
    v = strtoull(s, &end, 10);
    if (*end != '\0')
        return usage_error("invalid value '%s' for %s: not a non-negative decimal integer", s, opt);
    if (errno == ERANGE)
        return usage_error("value '%s' for %s is out of range: give 0 to %llu", s, opt, ULLONG_MAX);
    *out = (uint64_t)v;
    return 0;
}

int parse_real(const char *opt, const char *s, double min, double max, double *out)
{
    char lo[64], hi[64];
    char *end = NULL;
    double v;

    errno = 0;
    if (!is_decimal(s, 0))
        return usage_error("invalid value '%s' for %s: not a decimal number", s, opt);
    v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return usage_error("invalid value '%s' for %s: not a decimal number", s, opt);
    if (errno == ERANGE || v < min || v > max)
        return usage_error("value '%s' for %s is out of range: give %s to %s", s, opt,
                           plain(lo, sizeof lo, min), plain(hi, sizeof hi, max));
    *out = v;
    return 0;
}

int option_in_bounds(const char *name, coli_option opt, const char *s, int64_t *out)
{
    int64_t min = 0, max = 0;
    coli_status st = coli_option_bounds(opt, &min, &max);

    if (st != COLI_OK) {
        fprintf(stderr, "coli: %s: no bounds for option %s\n", coli_strerror(st), name);
        return 1;
    }
    return parse_int64(name, s, min, max, out);
}

int parse_threads(const char *name, const char *s, int64_t *out)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int rc = option_in_bounds(name, COLI_OPT_THREADS, s, out);

    if (rc != 0)
        return rc;
    /* Threads past the cores only take turns: 1000 on 2 cores decode
     * hundreds of times slower. A few per core is still a sane experiment. */
    if (cores > 0 && *out > THREADS_PER_CORE_MAX * (int64_t)cores)
        return usage_error("%s %s is more than %d times the %ld online cores: give at most %ld "
                           "(0: one per core)",
                           name, s, THREADS_PER_CORE_MAX, cores, THREADS_PER_CORE_MAX * cores);
    return 0;
}

/* A blank of an id list. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int parse_ids(const char *opt, const char *s, int allow_empty, int32_t **ids_out, size_t *n_out)
{
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    const char *p = s;

    *ids_out = NULL;
    *n_out = 0;
    while (is_blank(*p))
        p++;
    if (*p == '\0') {
        if (allow_empty)
            return 0;
        return usage_error("%s needs at least one token id", opt);
    }
    /* Ids apart by commas, blanks or both: "1,2,3", "1 2 3" (what coli
     * tokenize prints), "1, 2, 3". */
    for (;;) {
        char *end = NULL;
        long long v;
        int comma = 0;

        if (*p < '0' || *p > '9')
            goto bad;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (errno == ERANGE || v > INT32_MAX) {
            free(ids);
            return usage_error("token id out of range in '%s' for %s", s, opt);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            ids = xrealloc(ids, cap * sizeof *ids);
        }
        ids[n++] = (int32_t)v;
        for (p = end; is_blank(*p) || (*p == ',' && !comma); p++)
            comma |= *p == ',';
        if (*p == '\0') {
            if (comma)
                goto bad; /* a trailing comma: an id is missing */
            break;
        }
        if (p == end)
            goto bad; /* no separator */
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
bad:
    free(ids);
    return usage_error("invalid token id list '%s' for %s: give non-negative ids apart by commas "
                       "or spaces, e.g. '1,2,3' or '1 2 3'",
                       s, opt);
}

/* --format text|json */
int parse_format(const args *a, int default_json, int *json)
{
    const char *v = a->value[O_FORMAT];

    *json = default_json;
    if (v == NULL)
        return 0;
    if (strcmp(v, "text") == 0)
        *json = 0;
    else if (strcmp(v, "json") == 0)
        *json = 1;
    else
        return usage_error("invalid value '%s' for --format (expected text or json)", v);
    return 0;
}

/* ---- standard output --------------------------------------------------------- */

static int g_stdout_errno;

void note_stdout_error(int err)
{
    if (g_stdout_errno == 0)
        g_stdout_errno = err;
}

int close_stdout(int rc)
{
    int failed = ferror(stdout) != 0;
    int err;

    errno = 0;
    if (fclose(stdout) != 0)
        failed = 1;
    err = errno != 0 ? errno : g_stdout_errno;
    if (!failed)
        return rc;
    /* errno is that of the last flush; an earlier failure may have none. */
    if (err != 0)
        fprintf(stderr, "%s: write error on standard output: %s\n", cli_prog, strerror(err));
    else
        fprintf(stderr, "%s: write error on standard output\n", cli_prog);
    return 1;
}
