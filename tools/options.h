/*
 * options.h - the command line of the coli tool: one table of options,
 * the parser that every subcommand shares, the help formatter, strict
 * value parsers, and the check that standard output was written.
 *
 * An option is one row of cli_opts (long name, optional short name, the
 * name of its value); a subcommand lists the options it accepts, each with
 * its help text, so that --help shows exactly what the parser accepts.
 */
#ifndef COLI_TOOLS_OPTIONS_H
#define COLI_TOOLS_OPTIONS_H

#include <colibri/colibri.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2

enum opt_id {
    O_HELP,
    O_VERSION,
    O_MODEL,
    O_PROMPT,
    O_PROMPT_IDS,
    O_PROMPT_FILE,
    O_MAX_TOKENS,
    O_TEMPERATURE,
    O_TOP_K,
    O_TOP_P,
    O_SEED,
    O_WEIGHTS,
    O_THREADS,
    O_CONTEXT,
    O_NO_SPECIAL,
    O_SKIP_SPECIAL,
    O_FORMAT,
    O_TEXT,
    O_IDS,
    O_VERBOSE,
    O_Q4_GROUP,
    O_PROMPT_TOKENS,
    O_GEN_TOKENS,
    O_REPETITIONS,
    O_PROBE_MIB,
    O_NO_PROBE,
    O_AGAINST,
    O_NO_ECHO,
    O_IGNORE_EOS,
    O_STOP,
    O_MIN_P,
    O_REPEAT_PENALTY,
    O_REPEAT_LAST_N,
    O_GPU,
    O_NO_GPU,
    O_GPU_DEVICES,
    O_GPU_EXPERT_GB,
    O_RELEASE_HOST,
    O_GPU_EXPERTS_ONLY,
    O_STATS,
    O_OUT,
    O_FORCE,
    O_RAM_GB,
    O_EXPERT_SLOTS,
    O_NO_PREFETCH,
    O_IO_THREADS,
    O_NO_HOTSET,
    O_DISK_PROBE,
    O_RANDOM_DECODE,
    O_CPU,
    O_TEXT_FILE,
    O_LOGPROBS,
    O_KV_TYPE,
    O_DEPTH,
    O_MTP,
    O_MTP_TOKENS,
    O_NO_MTP_GUARD,
    O_STREAMS,
    O_HOST,
    O_PORT,
    O_PARALLEL,
    O_CTX_SIZE,
    O_QUEUE,
    O_API_KEY,
    O_API_KEY_FILE,
    O_MAX_BODY,
    O_ALIAS,
    O_CHAT_TEMPLATE_FILE,
    O_SYSTEM,
    O_WEB_DIR,
    O_REQUEST_TIMEOUT,
    O_IDLE_TIMEOUT,
    O_MAX_CONNECTIONS,
    O_MAX_CLIENT_CONNECTIONS,
    O_STOP_TIMEOUT,
    O_COUNT
};

typedef struct optdef {
    const char *name;  /* "--model" */
    char short_name;   /* 'm' for -m; 0 when there is none */
    const char *value; /* name of the value in help ("DIR"); NULL: a flag */
    int repeatable;    /* 1: every value is kept, in order (e.g. --stop) */
} optdef;

extern const optdef cli_opts[O_COUNT];

/* Most values one repeatable option keeps. */
#define ARGS_MAX_REPEAT 16

/* The parsed command line of a subcommand: raw strings, converted later.
 * For an option given more than once the last value counts, unless the
 * option is repeatable: then values[id][0 .. given[id]-1] holds them all. */
typedef struct args {
    const char *value[O_COUNT];
    int given[O_COUNT];
    const char *values[O_COUNT][ARGS_MAX_REPEAT];
} args;

/* One option of a subcommand and its help text ('\n' continues the text on
 * the next line, in the same column). A list ends with {O_COUNT, NULL}. */
typedef struct opthelp {
    int id;
    const char *text;
} opthelp;

typedef struct command {
    const char *name;
    const char *summary;  /* one line, for `coli --help` */
    const char *synopsis; /* the "Usage:" lines and the description */
    const opthelp *options;
    const char *epilogue; /* printed after the options; may be NULL */
    int (*run)(const args *a);
} command;

/* "coli generate" etc.: the prefix of messages. */
extern const char *cli_prog;

/* Prints "<cli_prog>: <message>" and "Try '<cli_prog> --help'." on stderr;
 * returns EXIT_USAGE. */
int usage_error(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/*
 * Parses argv (after the subcommand name) into a, accepting only the options
 * cmd lists: "--opt VALUE", "--opt=VALUE", "-x VALUE", "-xVALUE", and flags
 * alone ("--verbose", "-h"). Returns 0, EXIT_USAGE after a message, or -1
 * for --help and -2 for --version (the caller prints them).
 */
int parse_args(const command *cmd, int argc, char **argv, args *a);

/* Writes cmd's help: synopsis, one line per option, epilogue. */
void print_help(const command *cmd, FILE *f);

/* Strict converters: the whole string, within bounds; else a usage error
 * naming opt (returned as EXIT_USAGE). */
int parse_int64(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out);
int parse_uint64(const char *opt, const char *s, uint64_t *out);
int parse_real(const char *opt, const char *s, double min, double max, double *out);
/* The value of library option opt, given as option name, within
 * coli_option_bounds; a usage error outside them. */
int option_in_bounds(const char *name, coli_option opt, const char *s, int64_t *out);
/* --threads: within coli_option_bounds and at most THREADS_PER_CORE_MAX
 * times the online cores; a usage error past either. */
#define THREADS_PER_CORE_MAX 4
int parse_threads(const char *name, const char *s, int64_t *out);
/* --format text|json into *json (default_json when absent); 0 or
 * EXIT_USAGE. */
int parse_format(const args *a, int default_json, int *json);
/* A list of token ids apart by commas and/or blanks ("1,2,3", "1 2 3");
 * *ids_out is malloc'd. */
int parse_ids(const char *opt, const char *s, int allow_empty, int32_t **ids_out, size_t *n_out);

/* The name of names[0..n) nearest to word (a few edits at most), or NULL:
 * the "did you mean" of unknown names. */
const char *did_you_mean(const char *word, const char *const *names, size_t n);

/* realloc that reports running out of memory and exits with status 1. */
void *xrealloc(void *p, size_t n);

/*
 * Flushes and closes standard output, as GNU close_stdout does: a write
 * that failed at any time (a full disk, /dev/full, a closed pipe) is
 * reported on stderr, naming standard output. Returns rc, or 1 when the
 * output was lost and rc was 0.
 */
int close_stdout(int rc);
/* Remembers the errno of a failed write on standard output, for the message
 * of close_stdout when the final flush has nothing left to fail on. */
void note_stdout_error(int err);

#endif /* COLI_TOOLS_OPTIONS_H */
