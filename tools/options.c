/*
 * options.c - the command line of the coli tool (see options.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "options.h"

#include <colibri/colibri.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *cli_prog = "coli";

/* Short names only for the options people type most, as llama.cpp has
 * them; -h and -V are the GNU ones. */
const optdef cli_opts[O_COUNT] = {
    [O_HELP] = {"--help", 'h', NULL, 0},
    [O_VERSION] = {"--version", 'V', NULL, 0},
    [O_MODEL] = {"--model", 'm', "DIR", 0},
    [O_PROMPT] = {"--prompt", 'p', "TEXT", 0},
    [O_PROMPT_IDS] = {"--prompt-ids", 0, "LIST", 0},
    [O_PROMPT_FILE] = {"--prompt-file", 0, "FILE", 0},
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

    fprintf(stderr, "%s: ", cli_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", cli_prog);
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

        for (k = 0; k < O_COUNT; k++)
            if (strlen(cli_opts[k].name) == len && strncmp(cli_opts[k].name, arg, len) == 0 &&
                accepts(cmd, k))
                break;
        if (k == O_COUNT)
            return usage_error("unknown option '%.*s'", (int)len, arg);
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

int parse_int64(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    if (s[0] == '\0' || s[0] == ' ' || s[0] == '\t')
        return usage_error("invalid value '%s' for %s: not an integer", s, opt);
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return usage_error("invalid value '%s' for %s: not an integer", s, opt);
    if (errno == ERANGE || v < min || v > max)
        return usage_error("value '%s' for %s is out of range [%" PRId64 ", %" PRId64 "]", s,
                           opt, min, max);
    *out = (int64_t)v;
    return 0;
}

int parse_uint64(const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;

    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return usage_error("invalid value '%s' for %s: not a non-negative integer", s, opt);
    v = strtoull(s, &end, 10);
    if (*end != '\0')
        return usage_error("invalid value '%s' for %s: not a non-negative integer", s, opt);
    if (errno == ERANGE)
        return usage_error("value '%s' for %s is out of range", s, opt);
    *out = (uint64_t)v;
    return 0;
}

int parse_real(const char *opt, const char *s, double min, double max, double *out)
{
    char *end = NULL;
    double v;

    errno = 0;
    if (s[0] == '\0' || s[0] == ' ' || s[0] == '\t')
        return usage_error("invalid value '%s' for %s: not a number", s, opt);
    v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return usage_error("invalid value '%s' for %s: not a number", s, opt);
    if (errno == ERANGE || v < min || v > max)
        return usage_error("value '%s' for %s is out of range [%g, %g]", s, opt, min, max);
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

int parse_ids(const char *opt, const char *s, int allow_empty, int32_t **ids_out, size_t *n_out)
{
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    const char *p = s;

    *ids_out = NULL;
    *n_out = 0;
    if (*p == '\0') {
        if (allow_empty)
            return 0;
        return usage_error("%s needs at least one token id", opt);
    }
    for (;;) {
        char *end = NULL;
        long long v;

        if (*p < '0' || *p > '9') {
            free(ids);
            return usage_error("invalid token id list '%s' for %s", s, opt);
        }
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
        if (*end == '\0')
            break;
        if (*end != ',') {
            free(ids);
            return usage_error("invalid token id list '%s' for %s", s, opt);
        }
        p = end + 1;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
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
